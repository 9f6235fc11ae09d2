"""CUDA kernels of entropic partial OT, mirroring ``numbaot/cpu/partial.py``.

The collapsed iteration of the CPU module (its docstring has the algebra):
K_t = s_t diag(u_t) K0 diag(v_t), with

* ``partial_row_update``: u_i = min(a_i / (s_prev (K0 v)_i), 1), one block
  per row (warp-shuffle block sums);
* ``numbaot.cuda.sinkhorn.knopp_col_partial``: chunk partials of K0^T u
  (coalesced 32-column tiles), merged in chunk order by
* ``partial_finish`` (one block): v_j = min(b_j / (s_prev (K0^T u)_j), 1),
  s = m / sum_j v_j (K0^T u)_j and the failure flags (a zero in K0, u, v or
  s breaks POT's elementwise corrections, as on the CPU).

The log domain: ``partial_log_row`` (online logsumexp per row, one
exponential per entry), ``numbaot.cuda.sinkhorn.log_col_partial`` (chunk
(max, sum) pairs of each column) and ``partial_log_finish`` (one block: the
column logsumexps, v, Ls).  The errors of POT (every 10 iterations) are row
partials (``partial_err_rows``, ``partial_log_err_rows``) summed in a fixed
order.  Like the other CUDA modules, float32 problems compute in float32;
flags live on the device and the host reads them once per block of
iterations (at most 10).

Device state layout: u, up (1, dim_a), v, vp (1, dim_b), ``sc`` = [s, s_prev]
(log: [Ls, Ls_prev]) in the problem's dtype, ``flags`` int32 =
[1 + first failing step (0: none), broken correction pending, unused].
"""
import math

import numba
import numpy as np
from numba import cuda

from . import sinkhorn as cuda_sinkhorn
from ._launch import col_launch as _col_launch
from ._launch import col_layout as _col_layout
from ._launch import per_dtype, threads
from ._reduce import make_reductions
from ._registry import kernel


def _build(dt):
    """Kernels for one dtype (float32 or float64)."""
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    NINF = dt(-np.inf)
    INF = dt(np.inf)
    ZERO = dt(0.0)
    ONE = dt(1.0)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    A3 = f"{T}[:, :, ::1]"
    I32 = "int32[::1]"

    R = make_reductions(dt)
    block_sum, block_max, block_lse, lse_push, lse_merge, finite = (
        R.block_sum, R.block_max, R.block_lse, R.lse_push, R.lse_merge, R.finite)

    # ------------------------------------------------------------------
    # multiplicative domain
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {A1}, {A2}, {A1}, {I32}, {A2}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_row_update(K0, a, v, sc, flags, u, up):
        """up_i = u_i; u_i = min(a_i / (sc[0] sum_j K0_ij v_j), 1); block per row."""
        if flags[0] != 0:
            return
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        s = ZERO
        for j in range(tid, K0.shape[1], cuda.blockDim.x):
            s += K0[i, j] * v[0, j]
        s = block_sum(s, ss)
        if tid == 0:
            x = a[i] / (sc[0] * s)
            up[0, i] = u[0, i]
            u[0, i] = ONE if x > ONE else x

    @kernel([f"void({A3}, {A1}, {T}, {T}, {A2}, {A2}, {A2}, {A1}, {I32}, int64)"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_finish(P, b, mass, kmin, u, v, vp, sc, flags, step):
        """One block: c = K0^T u (chunks in order), vp = v, v = min(b / (sp c), 1),
        s = m / sum_j v_j c_j, sc = [s, sp]; flags[0] = step + 1 at the first
        step whose iterate is not finite, or that follows a broken correction;
        flags[1] = 1 (broken) when K0, u, v or s has a zero (POT divides by it
        elementwise: its next iterate is NaN)."""
        if flags[0] != 0:
            return
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        sp = sc[0]
        acc = ZERO
        vmax_neg = -INF  # max of -v (min of v)
        bad = ZERO
        for j in range(tid, v.shape[1], cuda.blockDim.x):
            c = P[0, 0, j]
            for ch in range(1, P.shape[1]):
                c += P[0, ch, j]
            old = v[0, j]
            vp[0, j] = old
            x = b[j] / (sp * c)
            x = ONE if x > ONE else x
            v[0, j] = x
            acc += x * c
            vmax_neg = max(vmax_neg, -x)
            if not finite(x):
                bad = ONE
        umax_neg = -INF
        for i in range(tid, u.shape[1], cuda.blockDim.x):
            x = u[0, i]
            umax_neg = max(umax_neg, -x)
            if not finite(x):
                bad = ONE
        acc = block_sum(acc, ss)
        bad = block_sum(bad, ss)
        vmax_neg = block_max(vmax_neg, ss)
        umax_neg = block_max(umax_neg, ss)
        if tid == 0:
            s = mass / acc
            sc[1] = sp
            sc[0] = s
            if bad != ZERO or not finite(s) or flags[1] != 0:
                flags[0] = step + 1
            if not (kmin > ZERO and -umax_neg > ZERO and -vmax_neg > ZERO and s > ZERO):
                flags[1] = 1

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A2}, {A1}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_err_rows(K0, u, v, up, vp, sc, part):
        """part[0, i] = sum_j (K0_ij (sp up_i vp_j - s u_i v_j))^2; block per row."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        a0 = sc[1] * up[0, i]
        a1 = sc[0] * u[0, i]
        acc = ZERO
        for j in range(tid, K0.shape[1], cuda.blockDim.x):
            d = K0[i, j] * (a0 * vp[0, j] - a1 * v[0, j])
            acc += d * d
        acc = block_sum(acc, ss)
        if tid == 0:
            part[0, i] = acc

    @kernel([f"void({A2}, {A1})"], warp_shuffle=True, tag=tag)
    def min_rows(X, out):
        """out[i] = min_j X[i, j]; block per row."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        mx = -INF
        for j in range(tid, X.shape[1], cuda.blockDim.x):
            mx = max(mx, -X[i, j])
        mx = block_max(mx, ss)
        if tid == 0:
            out[i] = -mx

    # ------------------------------------------------------------------
    # log domain
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {T}, {A1}, {A2}, {A1}, {T}, {I32}, {A2}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_log_row(M, c, La, v, sc, C0, flags, u, up):
        """up_i = u_i; u_i = min(La_i - (sc[0] + C0) - LSE_j(c M_ij + v_j), 0);
        block per row, online (max, sum) pairs merged by warp shuffles."""
        if flags[0] != 0:
            return
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        m = NINF
        s = ZERO
        for j in range(tid, M.shape[1], cuda.blockDim.x):
            m, s = lse_push(m, s, c * M[i, j] + v[0, j])
        m, s = block_lse(m, s, sm, ss)
        if tid == 0:
            la = La[i]
            up[0, i] = u[0, i]
            if la == NINF:
                u[0, i] = NINF
            else:
                x = la - (sc[0] + C0) - (m + math.log(s))
                u[0, i] = ZERO if x > ZERO else x

    @kernel([f"void({A3}, {A3}, {A1}, {T}, {T}, {A2}, {A2}, {A2}, {A1}, {I32}, int64)"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_log_finish(PM, PS, Lb, C0, logm, u, v, vp, sc, flags, step):
        """One block: colLSE_j = LSE_i(c M_ij + u_i) from the chunk pairs (in
        order), vp = v, v_j = min(Lb_j - (sp + C0) - colLSE_j, 0),
        Ls = log m - C0 - LSE_j(v_j + colLSE_j), sc = [Ls, sp]; flags[0] =
        step + 1 when a potential is not finite (POT's LK has a -inf/NaN)."""
        if flags[0] != 0:
            return
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        sp = sc[0]
        off = sp + C0
        gm = NINF
        gs = ZERO
        bad = ZERO
        for j in range(tid, v.shape[1], cuda.blockDim.x):
            m = PM[0, 0, j]
            s = PS[0, 0, j]
            for ch in range(1, PM.shape[1]):
                m, s = lse_merge(m, s, PM[0, ch, j], PS[0, ch, j])
            cl = m + math.log(s)
            vp[0, j] = v[0, j]
            x = Lb[j] - off - cl
            x = ZERO if x > ZERO else x
            v[0, j] = x
            gm, gs = lse_push(gm, gs, x + cl)
            if not finite(x):
                bad = ONE
        for i in range(tid, u.shape[1], cuda.blockDim.x):
            if not finite(u[0, i]):
                bad = ONE
        gm, gs = block_lse(gm, gs, sm, ss)
        bad = block_sum(bad, ss)
        if tid == 0:
            Ls = logm - C0 - (gm + math.log(gs))
            sc[1] = sp
            sc[0] = Ls
            if bad != ZERO or not finite(Ls):
                flags[0] = step + 1

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A1}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_log_err_rows(u, v, up, vp, sc, part):
        """part[0, i] = sum_j ((up_i - u_i) + (sp - s) + (vp_j - v_j))^2."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        x = (up[0, i] - u[0, i]) + (sc[1] - sc[0])
        acc = ZERO
        for j in range(tid, v.shape[1], cuda.blockDim.x):
            d = x + (vp[0, j] - v[0, j])
            acc += d * d
        acc = block_sum(acc, ss)
        if tid == 0:
            part[0, i] = acc

    return dict(partial_row_update=partial_row_update, partial_finish=partial_finish,
                partial_err_rows=partial_err_rows,
                min_rows=min_rows, partial_log_row=partial_log_row,
                partial_log_finish=partial_log_finish,
                partial_log_err_rows=partial_log_err_rows)


#: kernel(name, dtype): the compiled kernel of this module for ``dtype``
kernel = per_dtype(_build)
_k = kernel


# --------------------------------------------------------------------------
# host launchers (names and signatures as in numbaot/cpu/partial.py)
# --------------------------------------------------------------------------
def _dev(x, dt):
    return cuda.to_device(np.ascontiguousarray(x, dtype=dt))


def _sum_rows(part, dt):
    """sum_i part[0, i] as a host float (fixed-order device sum)."""
    out = cuda.device_array(1, dtype=dt)
    cuda_sinkhorn.kernel("sum_rows", dt)[1, threads()](part, out)
    return float(out.copy_to_host()[0])


class _Common:
    """Device vectors and flags shared by both solvers."""

    def _setup(self, M, a, b, start):
        dt = M.dtype
        n, m = M.shape
        self.dt = dt
        self.a, self.b = _dev(a, dt), _dev(b, dt)
        self.u = _dev(np.full((1, n), start), dt)
        self.up = _dev(np.full((1, n), start), dt)
        self.v = _dev(np.full((1, m), start), dt)
        self.vp = _dev(np.full((1, m), start), dt)
        self.flags = cuda.to_device(np.zeros(3, dtype=np.int32))
        self.active = cuda.to_device(np.ones(1, dtype=np.uint8))
        self.n_chunks, self.chunk_rows = _col_layout(n)
        self.failed = False

    def _read_flags(self, n_steps):
        f = int(self.flags.copy_to_host()[0])
        if f:
            self.failed = True
            return f - 1, True
        return n_steps, False


class PartialState(_Common):
    """Device state of an entropic partial OT run (multiplicative domain).

    Same constructor as ``numbaot.cpu.partial.PartialState``: ``M`` is the
    C-contiguous device cost matrix (its dtype is the computation's); K0 =
    exp(-M / reg) * m / sum(exp(-M / reg)) is formed on the device; ``a``,
    ``b`` are host float64 arrays, copied in M's dtype."""

    def __init__(self, M, reg, a, b, m):
        self._setup(M, a, b, 1.0)
        dt = self.dt
        n, mm = M.shape
        self.M = M
        K0 = cuda.device_array(M.shape, dtype=dt)
        cuda_sinkhorn.gibbs_kernel(M, -1.0 / reg, _dev(np.zeros(n), dt), _dev(np.zeros(mm), dt),
                                   K0)
        rows = cuda.device_array((1, n), dtype=dt)
        cuda_sinkhorn.kernel("sum_rows", dt)[n, threads()](K0, rows.reshape(n))
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.float64(m) / _sum_rows(rows, dt)
        cuda_sinkhorn.scaled_plan(K0, _dev(np.full(n, alpha), dt), _dev(np.ones(mm), dt), K0)
        self.K0 = K0
        mins = cuda.device_array(n, dtype=dt)
        _k("min_rows", dt)[n, threads()](K0, mins)
        self.kmin = dt.type(mins.copy_to_host().min())
        self.mass = dt.type(m)
        self.sc = _dev(np.ones(2), dt)
        self.P = cuda.device_array((1, self.n_chunks, mm), dtype=dt)
        self.started = False


def partial_steps(st, n_steps):
    """Run up to ``n_steps`` iterations (see ``numbaot.cpu.partial.partial_steps``):
    three launches per iteration, the failure flags read once at the end.
    Returns (steps completed, failed)."""
    if st.failed:
        return 0, True
    if n_steps == 0:
        return 0, False
    dt = st.dt
    n, m = st.K0.shape
    t = threads()
    row = _k("partial_row_update", dt)[n, t]
    cgrid, cblock = _col_launch(st.K0.shape, 1, st.n_chunks)
    colp = cuda_sinkhorn.kernel("knopp_col_partial", dt)[cgrid, cblock]
    fin = _k("partial_finish", dt)[1, t]
    for s in range(n_steps):
        row(st.K0, st.a, st.v, st.sc, st.flags, st.u, st.up)
        colp(st.K0, st.u, st.active, st.chunk_rows, st.P)
        fin(st.P, st.b, st.mass, st.kmin, st.u, st.v, st.vp, st.sc, st.flags, s)
    st.started = True
    return st._read_flags(n_steps)


def partial_error(st):
    """POT's error of the last iteration, ||K_prev - K||_F (host float)."""
    n = st.K0.shape[0]
    part = cuda.device_array((1, n), dtype=st.dt)
    _k("partial_err_rows", st.dt)[n, threads()](st.K0, st.u, st.v, st.up, st.vp, st.sc, part)
    return math.sqrt(max(_sum_rows(part, st.dt), 0.0))


def _scaled_u(st):
    s = st.sc.copy_to_host()[0]
    return _dev(st.u.copy_to_host()[0] * s, st.dt)


def partial_plan(st):
    """The current iterate s diag(u) K0 diag(v), a device array (dim_a,
    dim_b) of M's dtype (all NaN after a failed step, as POT's)."""
    if st.failed:
        return _dev(np.full(st.K0.shape, np.nan), st.dt)
    plan = cuda.device_array(st.K0.shape, dtype=st.dt)
    if not st.started:
        plan.copy_to_device(st.K0)
        return plan
    cuda_sinkhorn.scaled_plan(st.K0, _scaled_u(st), st.v[0], plan)
    return plan


def partial_loss(st):
    """<K, M>_F of the current iterate (host float; NaN after a failure)."""
    if st.failed:
        return np.nan
    out = cuda.device_array(1, dtype=st.dt)
    cuda_sinkhorn.scaled_loss(st.K0, st.M, _scaled_u(st).reshape(1, st.K0.shape[0]), st.v, out)
    return float(out.copy_to_host()[0])


class PartialLogState(_Common):
    """Device state of an entropic partial OT run in the log domain.

    Same constructor as ``numbaot.cpu.partial.PartialLogState``; the log
    kernel is never formed (M is read on the fly)."""

    def __init__(self, M, reg, a, b, m):
        self._setup(M, a, b, 0.0)
        dt = self.dt
        n, mm = M.shape
        self.M, self.c = M, dt.type(-1.0 / reg)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.La, self.Lb = _dev(np.log(a), dt), _dev(np.log(b), dt)
            logm = math.log(m) if m > 0 else -np.inf
        self.PM = cuda.device_array((1, self.n_chunks, mm), dtype=dt)
        self.PS = cuda.device_array((1, self.n_chunks, mm), dtype=dt)
        self._col_pass()  # (max, sum) of c M_ij (u = 0) per chunk and column
        pm = self.PM.copy_to_host()[0].astype(np.float64)
        ps = self.PS.copy_to_host()[0].astype(np.float64)
        mx = pm.max()
        lse = mx + math.log(float(np.sum(ps * np.exp(pm - mx))))
        with np.errstate(invalid="ignore"):
            self.C0 = dt.type(logm - lse)
        self.logm = dt.type(logm)
        self.sc = _dev(np.zeros(2), dt)

    def _col_pass(self):
        grid, block = _col_launch(self.M.shape, 1, self.n_chunks)
        cuda_sinkhorn.kernel("log_col_partial", self.dt)[grid, block](
            self.M, self.c, self.u, self.active, self.chunk_rows, self.PM, self.PS)


def partial_log_steps(st, n_steps):
    """As :func:`partial_steps`, in the log domain; a failing step stops the
    kernels there (the state keeps that step's iterate, as POT returns it)."""
    if st.failed:
        return 0, True
    if n_steps == 0:
        return 0, False
    dt = st.dt
    n = st.M.shape[0]
    t = threads()
    row = _k("partial_log_row", dt)[n, t]
    fin = _k("partial_log_finish", dt)[1, t]
    for s in range(n_steps):
        row(st.M, st.c, st.La, st.v, st.sc, st.C0, st.flags, st.u, st.up)
        st._col_pass()
        fin(st.PM, st.PS, st.Lb, st.C0, st.logm, st.u, st.v, st.vp, st.sc, st.flags, s)
    return st._read_flags(n_steps)


def partial_log_error(st):
    """POT's error of the last iteration, ||LK_prev - LK||_F (host float)."""
    n = st.M.shape[0]
    part = cuda.device_array((1, n), dtype=st.dt)
    _k("partial_log_err_rows", st.dt)[n, threads()](st.u, st.v, st.up, st.vp, st.sc, part)
    return math.sqrt(max(_sum_rows(part, st.dt), 0.0))


def _log_rows(st):
    with np.errstate(invalid="ignore"):
        f = st.u.copy_to_host()[0].astype(np.float64) + (float(st.C0)
                                                          + float(st.sc.copy_to_host()[0]))
    return _dev(f, st.dt)


def partial_log_plan(st):
    """exp(LK) of the current iterate, a device array (dim_a, dim_b) of M's dtype."""
    plan = cuda.device_array(st.M.shape, dtype=st.dt)
    cuda_sinkhorn.gibbs_kernel(st.M, st.c, _log_rows(st), st.v[0], plan)
    return plan


def partial_log_loss(st):
    """<exp(LK), M>_F of the current iterate (host float)."""
    out = cuda.device_array(1, dtype=st.dt)
    cuda_sinkhorn.gibbs_loss(st.M, st.c, _log_rows(st).reshape(1, st.M.shape[0]), st.v, out)
    return float(out.copy_to_host()[0])


def partial_solve_small(st, numItermax, stopThr):
    """The whole loop in one call for small problems
    (``numbaot.cpu.partial.partial_solve_small``): none on the GPU yet, where
    every iteration is a kernel launch anyway; None, the caller runs
    :func:`partial_steps` / :func:`partial_error`."""
    return None


def partial_log_solve_small(st, numItermax, stopThr):
    """As :func:`partial_solve_small`, for the log domain: None."""
    return None


#: The launcher contract shared with numbaot.cpu.partial (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("PartialState", "partial_steps", "partial_solve_small", "partial_error",
             "partial_plan", "partial_loss", "PartialLogState", "partial_log_steps",
             "partial_log_solve_small", "partial_log_error", "partial_log_plan",
             "partial_log_loss")
