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

Paired batches (n_hists problems sharing M) as on the CPU: problems on
blockIdx.y of the row kernels and blockIdx.x of the finishing ones; a
problem whose flags are set is frozen while the others go on.

Device state layout: u, up (n_hists, dim_a), v, vp (n_hists, dim_b), ``sc``
(n_hists, 2) = [s, s_prev] (log: [Ls, Ls_prev]) in the problem's dtype,
``flags`` int32 (n_hists, 3) = [1 + failing step in the block (0: none),
broken correction pending, unused].
"""
import math

import numba
import numpy as np
from numba import cuda

from . import sinkhorn as cuda_sinkhorn
from ._launch import col_launch as _col_launch
from ._launch import col_layout as _col_layout
from ._launch import grid_problems, per_dtype, threads
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
    I32 = "int32[:, ::1]"

    R = make_reductions(dt)
    block_sum, block_max, block_lse, lse_push, lse_merge, finite = (
        R.block_sum, R.block_max, R.block_lse, R.lse_push, R.lse_merge, R.finite)

    # ------------------------------------------------------------------
    # multiplicative domain (problems k on blockIdx.y / blockIdx.x of the
    # finishing kernels; a problem whose flags[k, 0] is set is frozen)
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {I32}, {A2}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_row_update(K0, a, v, sc, flags, u, up):
        """up_ki = u_ki; u_ki = min(a_ki / (sc[k, 0] sum_j K0_ij v_kj), 1);
        block per (row, problem); ``a`` has one shared row or one per problem."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if flags[k, 0] != 0:
                continue
            s = ZERO
            for j in range(tid, K0.shape[1], cuda.blockDim.x):
                s += K0[i, j] * v[k, j]
            s = block_sum(s, ss)
            if tid == 0:
                x = a[0 if a.shape[0] == 1 else k, i] / (sc[k, 0] * s)
                up[k, i] = u[k, i]
                u[k, i] = ONE if x > ONE else x

    @kernel([f"void({A3}, {A2}, {A1}, {A1}, {A2}, {A2}, {A2}, {A2}, {I32}, int64)"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_finish(P, b, mass, kmin, u, v, vp, sc, flags, step):
        """One block per problem k: c = K0^T u_k (chunks in order), vp_k =
        v_k, v_k = min(b_k / (sp c), 1), s = m_k / sum_j v_kj c_j, sc[k] =
        [s, sp]; flags[k, 0] = step + 1 at the first step whose iterate is
        not finite, or that follows a broken correction; flags[k, 1] = 1
        (broken) when K0, u, v or s has a zero (POT divides by it
        elementwise: its next iterate is NaN)."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.x, v.shape[0], cuda.gridDim.x):
            if flags[k, 0] != 0:
                continue
            sp = sc[k, 0]
            acc = ZERO
            vmax_neg = -INF  # max of -v (min of v)
            bad = ZERO
            for j in range(tid, v.shape[1], cuda.blockDim.x):
                c = P[k, 0, j]
                for ch in range(1, P.shape[1]):
                    c += P[k, ch, j]
                vp[k, j] = v[k, j]
                x = b[k, j] / (sp * c)
                x = ONE if x > ONE else x
                v[k, j] = x
                acc += x * c
                vmax_neg = max(vmax_neg, -x)
                if not finite(x):
                    bad = ONE
            umax_neg = -INF
            for i in range(tid, u.shape[1], cuda.blockDim.x):
                x = u[k, i]
                umax_neg = max(umax_neg, -x)
                if not finite(x):
                    bad = ONE
            acc = block_sum(acc, ss)
            bad = block_sum(bad, ss)
            vmax_neg = block_max(vmax_neg, ss)
            umax_neg = block_max(umax_neg, ss)
            if tid == 0:
                s = mass[k] / acc
                sc[k, 1] = sp
                sc[k, 0] = s
                if bad != ZERO or not finite(s) or flags[k, 1] != 0:
                    flags[k, 0] = step + 1
                if not (kmin[k] > ZERO and -umax_neg > ZERO and -vmax_neg > ZERO
                        and s > ZERO):
                    flags[k, 1] = 1
            cuda.syncthreads()

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {I32}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_err_rows(K0, u, v, up, vp, sc, flags, part):
        """part[k, i] = sum_j (K0_ij (sp_k up_ki vp_kj - s_k u_ki v_kj))^2
        (0 for a problem that failed); block per (row, problem)."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            acc = ZERO
            if flags[k, 0] == 0:
                a0 = sc[k, 1] * up[k, i]
                a1 = sc[k, 0] * u[k, i]
                for j in range(tid, K0.shape[1], cuda.blockDim.x):
                    d = K0[i, j] * (a0 * vp[k, j] - a1 * v[k, j])
                    acc += d * d
            acc = block_sum(acc, ss)
            if tid == 0:
                part[k, i] = acc

    @kernel([f"void({A2}, {A1}, {A1})"], warp_shuffle=True, tag=tag)
    def minmax_rows(X, lo, hi):
        """lo[i] = min_j X[i, j], hi[i] = max_j X[i, j]; block per row."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        mn = -INF
        mx = -INF
        for j in range(tid, X.shape[1], cuda.blockDim.x):
            mn = max(mn, -X[i, j])
            mx = max(mx, X[i, j])
        mn = block_max(mn, ss)
        mx = block_max(mx, ss)
        if tid == 0:
            lo[i] = -mn
            hi[i] = mx

    # ------------------------------------------------------------------
    # log domain
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {T}, {A2}, {A2}, {A2}, {A1}, {I32}, {A2}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_log_row(M, c, La, v, sc, C0, flags, u, up):
        """up_ki = u_ki; u_ki = min(La_ki - (sc[k, 0] + C0_k) - LSE_j(c M_ij +
        v_kj), 0); block per (row, problem), online (max, sum) pairs merged
        by warp shuffles."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if flags[k, 0] != 0:
                continue
            m = NINF
            s = ZERO
            for j in range(tid, M.shape[1], cuda.blockDim.x):
                m, s = lse_push(m, s, c * M[i, j] + v[k, j])
            m, s = block_lse(m, s, sm, ss)
            if tid == 0:
                la = La[0 if La.shape[0] == 1 else k, i]
                up[k, i] = u[k, i]
                if la == NINF:
                    u[k, i] = NINF
                else:
                    x = la - (sc[k, 0] + C0[k]) - (m + math.log(s))
                    u[k, i] = ZERO if x > ZERO else x

    @kernel([f"void({A3}, {A3}, {A2}, {A1}, {A1}, {A2}, {A2}, {A2}, {A2}, {I32}, int64)"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_log_finish(PM, PS, Lb, C0, logm, u, v, vp, sc, flags, step):
        """One block per problem k: colLSE_j = LSE_i(c M_ij + u_ki) from the
        chunk pairs (in order), vp_k = v_k, v_kj = min(Lb_kj - (sp + C0_k) -
        colLSE_j, 0), Ls = log m_k - C0_k - LSE_j(v_kj + colLSE_j), sc[k] =
        [Ls, sp]; flags[k, 0] = step + 1 when a potential is not finite
        (POT's LK has a -inf/NaN)."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.x, v.shape[0], cuda.gridDim.x):
            if flags[k, 0] != 0:
                continue
            sp = sc[k, 0]
            off = sp + C0[k]
            gm = NINF
            gs = ZERO
            bad = ZERO
            for j in range(tid, v.shape[1], cuda.blockDim.x):
                m = PM[k, 0, j]
                s = PS[k, 0, j]
                for ch in range(1, PM.shape[1]):
                    m, s = lse_merge(m, s, PM[k, ch, j], PS[k, ch, j])
                cl = m + math.log(s)
                vp[k, j] = v[k, j]
                x = Lb[k, j] - off - cl
                x = ZERO if x > ZERO else x
                v[k, j] = x
                gm, gs = lse_push(gm, gs, x + cl)
                if not finite(x):
                    bad = ONE
            for i in range(tid, u.shape[1], cuda.blockDim.x):
                if not finite(u[k, i]):
                    bad = ONE
            gm, gs = block_lse(gm, gs, sm, ss)
            bad = block_sum(bad, ss)
            if tid == 0:
                Ls = logm[k] - C0[k] - (gm + math.log(gs))
                sc[k, 1] = sp
                sc[k, 0] = Ls
                if bad != ZERO or not finite(Ls):
                    flags[k, 0] = step + 1
            cuda.syncthreads()

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A2}, {I32}, {A2})"],
            hot=True, warp_shuffle=True, tag=tag)
    def partial_log_err_rows(u, v, up, vp, sc, flags, part):
        """part[k, i] = sum_j ((up_ki - u_ki) + (sp_k - s_k) + (vp_kj - v_kj))^2
        (0 for a problem that failed)."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            acc = ZERO
            if flags[k, 0] == 0:
                x = (up[k, i] - u[k, i]) + (sc[k, 1] - sc[k, 0])
                for j in range(tid, v.shape[1], cuda.blockDim.x):
                    d = x + (vp[k, j] - v[k, j])
                    acc += d * d
            acc = block_sum(acc, ss)
            if tid == 0:
                part[k, i] = acc

    return dict(partial_row_update=partial_row_update, partial_finish=partial_finish,
                partial_err_rows=partial_err_rows,
                minmax_rows=minmax_rows, partial_log_row=partial_log_row,
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


def _sum_parts(part, dt):
    """sum_k sum_i part[k, i] as a host float (fixed-order device sums per
    problem, then in problem order on the host)."""
    K = part.shape[0]
    out = cuda.device_array(K, dtype=dt)
    cuda_sinkhorn.kernel("sum_rows", dt)[grid_problems(K), threads()](part, out)
    return float(np.sum(out.copy_to_host().astype(np.float64)))


class _Common:
    """Device vectors and flags shared by both solvers (one problem or a
    paired batch of n_hists problems sharing M)."""

    def _setup(self, M, a, b, m, start):
        dt = M.dtype
        n, mm = M.shape
        K = b.shape[0]
        self.dt, self.n_hists = dt, K
        self.mass = np.ascontiguousarray(m, dtype=np.float64).reshape(-1)
        self.a, self.b = _dev(a, dt), _dev(b, dt)
        self.u = _dev(np.full((K, n), start), dt)
        self.up = _dev(np.full((K, n), start), dt)
        self.v = _dev(np.full((K, mm), start), dt)
        self.vp = _dev(np.full((K, mm), start), dt)
        self.flags_host = np.zeros((K, 3), dtype=np.int32)
        self.active = cuda.to_device(np.ones(K, dtype=np.uint8))
        self.n_chunks, self.chunk_rows = _col_layout(n)
        self.fail_at = np.full(K, -1, dtype=np.int64)
        self.it = 0
        self.stopped = False
        self.started = False

    def _read_flags(self, n_steps):
        """After a block of ``n_steps`` launches: record the problems that
        failed in it (flags[k, 0] = 1 + the step) and whether none is left."""
        f = self.flags.copy_to_host()[:, 0]
        new = (f != 0) & (self.fail_at < 0)
        self.fail_at[new] = self.it + f[new].astype(np.int64) - 1
        self.it += n_steps
        self.stopped = bool(np.all(f != 0))
        return n_steps, self.stopped


class PartialState(_Common):
    """Device state of an entropic partial OT run (multiplicative domain).

    Same constructor as ``numbaot.cpu.partial.PartialState``: ``M`` is the
    C-contiguous device cost matrix (its dtype is the computation's); K0 =
    exp(-M / reg) * m_ref / sum(exp(-M / reg)) (m_ref the largest mass) is
    formed on the device and problem k starts from (m_k / m_ref) K0; ``a``
    (1 or n_hists, dim_a), ``b`` (n_hists, dim_b) and ``m`` (n_hists,) are
    host float64 arrays, copied in M's dtype."""

    def __init__(self, M, reg, a, b, m):
        self._setup(M, a, b, m, 1.0)
        dt = self.dt
        n, mm = M.shape
        self.M = M
        mref = float(self.mass.max())
        K0 = cuda.device_array(M.shape, dtype=dt)
        cuda_sinkhorn.gibbs_kernel(M, -1.0 / reg, _dev(np.zeros(n), dt), _dev(np.zeros(mm), dt),
                                   K0)
        rows = cuda.device_array((1, n), dtype=dt)
        cuda_sinkhorn.kernel("sum_rows", dt)[n, threads()](K0, rows.reshape(n))
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.float64(mref) / _sum_parts(rows, dt)
        cuda_sinkhorn.scaled_plan(K0, _dev(np.full(n, alpha), dt), _dev(np.ones(mm), dt), K0)
        self.K0 = K0
        lo, hi = cuda.device_array(n, dtype=dt), cuda.device_array(n, dtype=dt)
        _k("minmax_rows", dt)[n, threads()](K0, lo, hi)
        ratio = self.mass / mref if mref > 0 else np.ones(self.n_hists)
        zero_below = float(np.finfo(dt).smallest_subnormal) / 2
        self.kmin = _dev(float(lo.copy_to_host().min()) * ratio, dt)
        if mref > 0:  # problem k's K0 all zero (m_k = 0): POT's first iterate is NaN
            self.flags_host[float(hi.copy_to_host().max()) * ratio <= zero_below, 1] = 1
        self.flags = cuda.to_device(self.flags_host)
        self.mass_dev = _dev(self.mass, dt)
        self.sc = _dev(np.stack([ratio, ratio], axis=1), dt)
        self.P = cuda.device_array((self.n_hists, self.n_chunks, mm), dtype=dt)


def partial_steps(st, n_steps):
    """Run up to ``n_steps`` iterations of every problem not yet failed (see
    ``numbaot.cpu.partial.partial_steps``): three launches per iteration,
    the failure flags read once at the end.  Returns (steps run, stopped)."""
    if st.stopped:
        return 0, True
    if n_steps == 0:
        return 0, False
    dt = st.dt
    n, m = st.K0.shape
    K = st.n_hists
    t = threads()
    row = _k("partial_row_update", dt)[(n, grid_problems(K)), t]
    cgrid, cblock = _col_launch(st.K0.shape, K, st.n_chunks)
    colp = cuda_sinkhorn.kernel("knopp_col_partial", dt)[cgrid, cblock]
    fin = _k("partial_finish", dt)[grid_problems(K), t]
    for s in range(n_steps):
        row(st.K0, st.a, st.v, st.sc, st.flags, st.u, st.up)
        colp(st.K0, st.u, st.active, st.chunk_rows, st.P)
        fin(st.P, st.b, st.mass_dev, st.kmin, st.u, st.v, st.vp, st.sc, st.flags, s)
    st.started = True
    return st._read_flags(n_steps)


def partial_failed_at(st):
    """The iteration at which each problem failed, -1 where it did not:
    int64 (n_hists,), a host array (either state)."""
    return st.fail_at.copy()


def partial_error(st):
    """POT's error of the last iteration, ||K_prev - K||_F over the problems
    not failed (host float)."""
    n = st.K0.shape[0]
    K = st.n_hists
    part = cuda.device_array((K, n), dtype=st.dt)
    _k("partial_err_rows", st.dt)[(n, grid_problems(K)), threads()](
        st.K0, st.u, st.v, st.up, st.vp, st.sc, st.flags, part)
    return math.sqrt(max(_sum_parts(part, st.dt), 0.0))


def _scaled_u(st):
    """s_k u_k, host float64 (n_hists, dim_a)."""
    s = st.sc.copy_to_host()[:, :1].astype(np.float64)
    return st.u.copy_to_host().astype(np.float64) * s


def partial_plan(st):
    """The current iterates s_k diag(u_k) K0 diag(v_k), a device array
    (n_hists, dim_a, dim_b) of M's dtype (all NaN for a problem that
    failed, as POT's)."""
    n, m = st.K0.shape
    plans = cuda.device_array((st.n_hists, n, m), dtype=st.dt)
    us = _scaled_u(st)
    for k in range(st.n_hists):
        if st.fail_at[k] >= 0:
            plans[k].copy_to_device(np.full((n, m), np.nan, dtype=st.dt))
        else:
            cuda_sinkhorn.scaled_plan(st.K0, _dev(us[k], st.dt), st.v[k], plans[k])
    return plans


def partial_loss(st):
    """<K_k, M>_F of the current iterates, host float64 (n_hists,) (NaN for
    a problem that failed)."""
    out = cuda.device_array(st.n_hists, dtype=st.dt)
    cuda_sinkhorn.scaled_loss(st.K0, st.M, _dev(_scaled_u(st), st.dt), st.v, out)
    loss = out.copy_to_host().astype(np.float64)
    loss[st.fail_at >= 0] = np.nan
    return loss


class PartialLogState(_Common):
    """Device state of an entropic partial OT run in the log domain.

    Same constructor as ``numbaot.cpu.partial.PartialLogState``; the log
    kernel is never formed (M is read on the fly)."""

    def __init__(self, M, reg, a, b, m):
        self._setup(M, a, b, m, 0.0)
        dt = self.dt
        n, mm = M.shape
        self.M, self.c = M, dt.type(-1.0 / reg)
        self.flags = cuda.to_device(self.flags_host)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.La, self.Lb = _dev(np.log(a), dt), _dev(np.log(b), dt)
            logm = np.array([math.log(x) if x > 0 else -np.inf for x in self.mass])
        self.PM = cuda.device_array((self.n_hists, self.n_chunks, mm), dtype=dt)
        self.PS = cuda.device_array((self.n_hists, self.n_chunks, mm), dtype=dt)
        # (max, sum) of c M_ij (u = 0) per chunk and column
        PM1 = cuda.device_array((1, self.n_chunks, mm), dtype=dt)
        PS1 = cuda.device_array((1, self.n_chunks, mm), dtype=dt)
        grid, block = _col_launch(M.shape, 1, self.n_chunks)
        cuda_sinkhorn.kernel("log_col_partial", dt)[grid, block](
            M, self.c, _dev(np.zeros((1, n)), dt), self.active[:1], self.chunk_rows, PM1, PS1)
        pm = PM1.copy_to_host()[0].astype(np.float64)
        ps = PS1.copy_to_host()[0].astype(np.float64)
        mx = pm.max()
        lse = mx + math.log(float(np.sum(ps * np.exp(pm - mx))))
        with np.errstate(invalid="ignore"):
            self.C0 = _dev(logm - lse, dt)
        # the kernels' C0 (in M's dtype), for the plans and losses on the host side
        self.C0_host = self.C0.copy_to_host().astype(np.float64)
        self.logm = _dev(logm, dt)
        self.sc = _dev(np.zeros((self.n_hists, 2)), dt)

    def _col_pass(self):
        grid, block = _col_launch(self.M.shape, self.n_hists, self.n_chunks)
        cuda_sinkhorn.kernel("log_col_partial", self.dt)[grid, block](
            self.M, self.c, self.u, self.active, self.chunk_rows, self.PM, self.PS)


def partial_log_steps(st, n_steps):
    """As :func:`partial_steps`, in the log domain; a problem's failing step
    freezes it there (its state keeps that step's iterate, as POT returns
    it)."""
    if st.stopped:
        return 0, True
    if n_steps == 0:
        return 0, False
    dt = st.dt
    n = st.M.shape[0]
    K = st.n_hists
    t = threads()
    row = _k("partial_log_row", dt)[(n, grid_problems(K)), t]
    fin = _k("partial_log_finish", dt)[grid_problems(K), t]
    for s in range(n_steps):
        row(st.M, st.c, st.La, st.v, st.sc, st.C0, st.flags, st.u, st.up)
        st._col_pass()
        fin(st.PM, st.PS, st.Lb, st.C0, st.logm, st.u, st.v, st.vp, st.sc, st.flags, s)
    st.started = True
    return st._read_flags(n_steps)


def partial_log_error(st):
    """POT's error of the last iteration, ||LK_prev - LK||_F over the
    problems not failed (host float)."""
    n = st.M.shape[0]
    K = st.n_hists
    part = cuda.device_array((K, n), dtype=st.dt)
    _k("partial_log_err_rows", st.dt)[(n, grid_problems(K)), threads()](
        st.u, st.v, st.up, st.vp, st.sc, st.flags, part)
    return math.sqrt(max(_sum_parts(part, st.dt), 0.0))


def _log_rows(st):
    """f_k = Lu_k + C0_k + Ls_k, host float64 (n_hists, dim_a)."""
    with np.errstate(invalid="ignore"):
        return st.u.copy_to_host().astype(np.float64) + (
            st.C0_host + st.sc.copy_to_host()[:, 0].astype(np.float64))[:, None]


def partial_log_plan(st):
    """exp(LK_k) of the current iterates, a device array (n_hists, dim_a,
    dim_b) of M's dtype."""
    n, m = st.M.shape
    plans = cuda.device_array((st.n_hists, n, m), dtype=st.dt)
    f = _log_rows(st)
    for k in range(st.n_hists):
        cuda_sinkhorn.gibbs_kernel(st.M, st.c, _dev(f[k], st.dt), st.v[k], plans[k])
    return plans


def partial_log_loss(st):
    """<exp(LK_k), M>_F of the current iterates, host float64 (n_hists,)."""
    out = cuda.device_array(st.n_hists, dtype=st.dt)
    cuda_sinkhorn.gibbs_loss(st.M, st.c, _dev(_log_rows(st), st.dt), st.v, out)
    return out.copy_to_host().astype(np.float64)


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
             "partial_failed_at", "partial_plan", "partial_loss", "PartialLogState",
             "partial_log_steps", "partial_log_solve_small", "partial_log_error",
             "partial_log_plan", "partial_log_loss")
