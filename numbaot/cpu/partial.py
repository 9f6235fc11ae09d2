"""CPU kernels of entropic partial OT, mirrored by name in ``numbaot/cuda/partial.py``.

The problem (Benamou et al. 2015, prop. 5; POT's
``ot.partial.entropic_partial_wasserstein``): min <gamma, M> + reg * Omega(gamma)
under gamma 1 <= a, gamma^T 1 <= b, 1^T gamma 1 = m, solved by iterated
Bregman projections with Dykstra's corrections, step for step as POT 0.9.7.

Collapsed iteration
-------------------
POT keeps three (dim_a, dim_b) correction matrices q1, q2, q3 and forms two
dense ``diag(.) @ K`` products per iteration.  With K0 the initial kernel
(exp(-M / reg) scaled to mass m), every iterate is K_t = s_t diag(u_t) K0
diag(v_t), and the corrections are q1 = 1 / u_t (a column of row factors),
q2 = 1 / v_t (a row of column factors), q3 = 1 / s_t (a scalar): with
(u_{-1}, v_{-1}, s_{-1}) = (1, 1, 1),

* K * q1 = s_{t-1} K0 diag(v_{t-1}), so u_t = min(a / (s_{t-1} K0 v_{t-1}), 1);
* K1 * q2 = s_{t-1} diag(u_t) K0, so v_t = min(b / (s_{t-1} K0^T u_t), 1);
* K2 * q3 = diag(u_t) K0 diag(v_t), so s_t = m / sum_j v_t,j (K0^T u_t)_j.

One iteration is therefore one read of K0 (``partial_fused_pass``: a tile of
rows gives (K0 v)_i, hence u_i, and is re-read from L2 to accumulate K0^T u),
plus O(dim_a + dim_b) work.  POT's error ||K_{t-1} - K_t||_F (every 10
iterations) is taken in the same read of K0 as the next iteration's pass
(``partial_fused_err_pass``, run ahead by ``partial_error``: its result is
kept for the next ``partial_steps``, dropped if the loop stops), so every
iteration, checks included, reads K0 once.  The log-domain solver
(``entropic_partial_wasserstein_logscale``) collapses the same way, with
potentials Lu, Lv, Ls added to LK0 = -M / reg + log m - LSE(-M / reg); its
fused pass computes one exponential per entry and its error needs no read
of M at all (the difference of two iterates is (dLu_i + dLv_j + dLs)).

POT's numerical failure, reproduced
-----------------------------------
POT divides elementwise (q1 = q1 * Kprev / K1, ...): a zero in K0 (an entry
of exp(-M / reg) that underflowed), in u (a zero weight a_i), in v or in s
puts a NaN/inf into a correction, and the next iterate is NaN: POT prints
"Warning: numerical errors at iteration t" and stops.  The collapsed
iteration never divides elementwise, so ``partial_run`` flags that event
instead (a zero in the dtype of the computation: float32 values below half
its smallest subnormal count as zero).  Not reproduced: POT's elementwise
corrections of subnormal entries of K round differently from the exact
ones, and a product of them may later round to zero in POT (float32 with
exp(-M / reg) near 1e-40); numbaot's iterate, exact to rounding, stays
finite there.  The log-domain solver fails, as POT's, when a potential is
not finite (a zero weight, m = 0).

Conventions: K0 and M are (dim_a, dim_b), C order, float32 or float64, only
read; vectors are float64; rows are split by ``numbaot.cpu.chunk_layout``
(fixed chunks, merged in chunk order: bit-identical for any thread count).
Small problems run serial twins of the kernels (no parallel region; see
"Small problems" below).
"""
import math

import numpy as np
from numba import njit, prange

from .. import _config
from .._config import (
    COL_BLOCK,
    JIT_OPTIONS,
    PARTIAL_SUM_FLOOR,
    ROW_SUM_FLOOR,
)
from . import chunk_layout, serial_twin
from ._math import fast_exp, fast_exp_ftz
from ._small import knopp_rows
from .sinkhorn import (
    axpy_rows,
    dot_rows,
    gibbs_kernel,
    gibbs_kernel_serial,
    gibbs_loss,
    log_col_lse,
    merge_chunks,
    scaled_loss,
    scaled_plan,
    tile_rows,
)

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)


@njit(**_SER)
def _min1(x):
    """np.minimum(x, 1): NaN stays NaN."""
    return 1.0 if x > 1.0 else x


@njit(**_SER)
def _min0(x):
    """np.minimum(x, 0): NaN stays NaN."""
    return 0.0 if x > 0.0 else x


@njit(**_SER)
def _finite(x):
    """Not NaN nor inf.  (Under the kernels' fast-math flags, nsz with
    reassoc, LLVM folds both ``np.isfinite(x)`` and ``x - x == 0`` to True
    for a NaN x computed as a difference of infinities; ``isnan``/``isinf``
    survive.)"""
    return not (math.isnan(x) or math.isinf(x))


# --------------------------------------------------------------------------
# multiplicative domain
# --------------------------------------------------------------------------
@njit(**_PAR)
def partial_fused_pass(K0, a, v, sp, n_chunks, chunk_rows, Q, u, q):
    """One read of K0: u_i = min(a_i / (sp (K0 v)_i), 1) and q = K0^T u.

    ``v`` is (1, dim_b), ``q`` (1, dim_b), ``Q`` (n_chunks, 1, dim_b) the
    chunks' column accumulators.  Tiles of rows (register-blocked dot
    products against a block of v held in L1), then the same tile re-read
    from L2 for the column accumulation (``numbaot.cpu.sinkhorn``'s row
    helpers; a chunk's first tile stores its accumulators).
    """
    n, m = K0.shape
    R = tile_rows(m, K0.itemsize)
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        if i1 <= i0:
            Qc[:, :] = 0.0
        s = np.empty(R)
        w = np.empty(R)
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            s[:] = 0.0
            for j0 in range(0, m, COL_BLOCK):
                dot_rows(K0, t0, nr, v, np.int64(0), j0, min(m, j0 + COL_BLOCK) - j0, s)
            for r in range(nr):
                x = _min1(a[t0 + r] / (sp * s[r]))
                w[r] = x
                u[t0 + r] = x
            for j0 in range(0, m, COL_BLOCK):
                axpy_rows(w, K0, t0, nr, Qc, np.int64(0), j0, min(m, j0 + COL_BLOCK) - j0,
                          t0 == i0)
    merge_chunks(Q, np.ones(1, dtype=np.bool_), q)


@njit(**_SER)
def _finish_step(b, mass, u, v, scal, kmin, zero_below, q, sp):
    """The O(dim_a + dim_b) end of an iteration whose fused pass left u and
    q = K0^T u: v = min(b / (sp q), 1), s = m / sum_j v_j q_j, the failure
    tests.  Returns True when the iterate is not finite (POT's K is NaN/inf);
    sets scal[2] (broken) when K0, u, v or s has a zero in the dtype."""
    n = u.shape[0]
    m = v.shape[1]
    tot = 0.0
    vmin = np.inf
    ok = True
    for j in range(m):
        x = _min1(b[j] / (sp * q[0, j]))
        v[0, j] = x
        tot += x * q[0, j]
        vmin = min(vmin, x)
        ok &= _finite(x)  # no short circuit: the loop stays branch-free
    s = mass / tot
    scal[0] = s
    umin = np.inf
    for i in range(n):
        umin = min(umin, u[i])
        ok &= _finite(u[i])
    if not (ok and _finite(s)):
        return True
    if not (kmin > zero_below and umin > zero_below and vmin > zero_below
            and s > zero_below):
        scal[2] = 1.0
    return False


@njit(**_SER)
def partial_run(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below,
                n_chunks, chunk_rows, Q, q, n_steps):
    """Up to ``n_steps`` iterations in place.  ``scal`` = [s, s_prev,
    broken]: ``broken`` is set when POT's corrections would hold a NaN/inf
    (a zero in K0, u, v or s, in the dtype: POT divides by it elementwise,
    and its next iterate is NaN).  Returns (steps completed, failed); on
    failure the first value is the index of the failing step (POT's K is
    NaN/inf there)."""
    for t in range(n_steps):
        if scal[2] != 0.0:
            return t, True
        sp = scal[0]
        scal[1] = sp
        up[:] = u
        vp[:, :] = v
        partial_fused_pass(K0, a, v, sp, n_chunks, chunk_rows, Q, u, q)
        if _finish_step(b, mass, u, v, scal, kmin, zero_below, q, sp):
            return t, True
    return n_steps, False


@njit(**_PAR)
def partial_fused_err_pass(K0, a, v, s, vpp, upp, spp, n_chunks, chunk_rows, Q, u, q):
    """``partial_fused_pass`` of the next iteration (u is overwritten with
    u_next, q = K0^T u_next) that also returns POT's error of the current
    one, sum_ij (K0_ij (spp upp_i vpp_j - s u_i v_j))^2, from the same read
    of K0 (each tile's rows are re-read from L1/L2; chunk partials summed in
    order).  ``s`` is the current s (the next iteration's s_prev)."""
    n, m = K0.shape
    R = tile_rows(m, K0.itemsize)
    part = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        if i1 <= i0:
            Qc[:, :] = 0.0
        rs = np.empty(R)
        w = np.empty(R)
        acc = 0.0
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            rs[:] = 0.0
            for j0 in range(0, m, COL_BLOCK):
                dot_rows(K0, t0, nr, v, np.int64(0), j0, min(m, j0 + COL_BLOCK) - j0, rs)
            for r in range(nr):
                i = t0 + r
                a0 = spp * upp[i]
                a1 = s * u[i]
                e = 0.0
                for j in range(m):
                    d = K0[i, j] * (a0 * vpp[0, j] - a1 * v[0, j])
                    e += d * d
                acc += e
                x = _min1(a[i] / (s * rs[r]))
                w[r] = x
                u[i] = x
            for j0 in range(0, m, COL_BLOCK):
                axpy_rows(w, K0, t0, nr, Qc, np.int64(0), j0, min(m, j0 + COL_BLOCK) - j0,
                          t0 == i0)
        part[ch] = acc
    merge_chunks(Q, np.ones(1, dtype=np.bool_), q)
    tot = 0.0
    for ch in range(n_chunks):
        tot += part[ch]
    return tot


@njit(**_PAR)
def partial_err2(K0, u, v, s, up, vp, sp, n_chunks, chunk_rows):
    """sum_ij (K0_ij (sp up_i vp_j - s u_i v_j))^2, chunk partials summed in order."""
    n, m = K0.shape
    part = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        acc = 0.0
        for i in range(i0, i1):
            a0 = sp * up[i]
            a1 = s * u[i]
            r = 0.0
            for j in range(m):
                d = K0[i, j] * (a0 * vp[0, j] - a1 * v[0, j])
                r += d * d
            acc += r
        part[ch] = acc
    tot = 0.0
    for ch in range(n_chunks):
        tot += part[ch]
    return tot


# --------------------------------------------------------------------------
# log domain
# --------------------------------------------------------------------------
@njit(**_SER)
def _row_exp_sum(M, i, c, v, sh, E, r):
    """E[r, j] = exp(c M_ij + v_j - sh); returns their sum."""
    S = 0.0
    for j in range(M.shape[1]):
        e = fast_exp_ftz(c * M[i, j] + v[0, j] - sh)
        E[r, j] = e
        S += e
    return S


@njit(**_PAR)
def partial_log_fused_pass(M, c, La, v, off, shift_ok, dv_max, rmax, n_chunks, chunk_rows,
                           Q, u, q):
    """One read of M, one exponential per entry:

    u_i = min(La_i - off - LSE_j(c M_ij + v_j), 0)      (row projection)
    q_j = sum_i exp(c M_ij + u_i + v_j + off)            (columns of POT's K1)

    Each row i is shifted by r_i >= max_j (c M_ij + v_j) (E_ij = exp(c M_ij +
    v_j - r_i) <= 1, kept in a per-thread tile buffer).  When ``shift_ok``,
    r_i = rmax_i + dv_max is certified from the previous iterate (rmax_i its
    shift, dv_max = max_j (v_j - v_prev_j)), so no max pass is needed; a row
    whose sum falls below ROW_SUM_FLOOR, and every row of the first
    iteration, takes the exact row maximum.  q accumulates E_ij w_i with
    w_i = exp(u_i + r_i + off) (POT's K1 has row sums <= a_i): nothing
    overflows; a column whose q underflows is redone by the caller.
    """
    n, m = M.shape
    R = tile_rows(m, np.int64(8))  # tiles of the float64 row buffer E
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        E = np.empty((R, m))
        w = np.empty(R)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            for r in range(nr):
                i = t0 + r
                la = La[i]
                if la == -np.inf:
                    u[i] = -np.inf
                    w[r] = 0.0
                    E[r, :] = 0.0
                    continue
                S = 0.0
                mx = rmax[i] + dv_max
                if shift_ok:
                    S = _row_exp_sum(M, i, c, v, mx, E, r)
                if not S > ROW_SUM_FLOOR:
                    mx = -np.inf
                    for j in range(m):
                        mx = max(mx, c * M[i, j] + v[0, j])
                    S = _row_exp_sum(M, i, c, v, mx, E, r)
                rmax[i] = mx
                x = la - off - (mx + math.log(S))
                if x > 0.0:  # clamped: u_i = 0
                    u[i] = 0.0
                    w[r] = fast_exp(mx + off)
                else:
                    u[i] = x
                    w[r] = fast_exp(la) / S
            for j0 in range(0, m, COL_BLOCK):
                axpy_rows(w, E, np.int64(0), nr, Qc, np.int64(0), j0,
                          min(m, j0 + COL_BLOCK) - j0, np.bool_(False))
    merge_chunks(Q, np.ones(1, dtype=np.bool_), q)


@njit(**_SER)
def partial_log_run(M, c, C0, logm, La, Lb, u, v, up, vp, scal, rmax, floor,
                    n_chunks, chunk_rows, Q, q, colL, n_steps):
    """Up to ``n_steps`` log-domain iterations in place; ``scal`` =
    [Ls, Ls_prev, shift_ok, dv_max] (the certified row shifts ``rmax`` of
    ``partial_log_fused_pass`` are valid when shift_ok is 1).  Returns (steps completed, failed): a step fails, as
    POT's, when a potential is not finite (POT's LK then has a -inf/NaN)."""
    n = u.shape[0]
    m = v.shape[1]
    for t in range(n_steps):
        sp = scal[0]
        scal[1] = sp
        up[:] = u
        vp[:, :] = v
        off = sp + C0
        partial_log_fused_pass(M, c, La, v, off, scal[2] != 0.0, scal[3], rmax, n_chunks,
                               chunk_rows, Q, u, q)
        redo = False
        for j in range(m):
            if not q[0, j] > floor:
                redo = True
        if redo:  # columns of K1 that underflowed: their exact column LSE
            log_col_lse(M, c, u.reshape(1, n), n_chunks, chunk_rows, colL)
        # colLSE_j = LSE_i(c M_ij + u_i) = log q_j - off - vp_j
        g = np.empty(m)
        gmax = -np.inf
        ok = True
        for j in range(m):
            if q[0, j] > floor:
                lq = math.log(q[0, j])
                x = _min0(Lb[j] - lq + vp[0, j])
                g[j] = x + lq - off - vp[0, j]
            else:
                cl = colL[0, j]
                x = _min0(Lb[j] - off - cl)
                g[j] = x + cl
            v[0, j] = x
            ok = ok and _finite(x)
            gmax = max(gmax, g[j])
        S = 0.0
        for j in range(m):
            S += math.exp(g[j] - gmax)
        s = logm - C0 - (gmax + math.log(S))
        scal[0] = s
        dv = -np.inf
        for j in range(m):
            dv = max(dv, v[0, j] - vp[0, j])
        scal[2] = 1.0
        scal[3] = dv
        for i in range(n):
            ok = ok and _finite(u[i])
        if not (ok and _finite(s)):
            return t, True
    return n_steps, False


@njit(**_PAR)
def partial_log_err2(u, v, s, up, vp, sp, n_chunks, chunk_rows):
    """sum_ij ((up_i - u_i) + (vp_j - v_j) + (sp - s))^2 (no read of M)."""
    n = u.shape[0]
    m = v.shape[1]
    part = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        acc = 0.0
        for i in range(i0, i1):
            x = (up[i] - u[i]) + (sp - s)
            r = 0.0
            for j in range(m):
                d = x + (vp[0, j] - v[0, j])
                r += d * d
            acc += r
        part[ch] = acc
    tot = 0.0
    for ch in range(n_chunks):
        tot += part[ch]
    return tot


# --------------------------------------------------------------------------
# Small problems: the same kernels compiled for the calling thread alone
# --------------------------------------------------------------------------
# Small problems run these twins (``serial_twin``: the same code, prange as
# range, the parallel kernels it calls replaced by their twins; the
# multiplicative pass by the tight loop ``partial_small_pass``): no parallel
# region is launched, per iteration or at the end, and a first call on a
# small problem compiles no parallel kernel.  The same results as the
# parallel kernels to rounding (sums in another order; LLVM may contract or
# vectorise the serial code differently); the choice depends on the size
# alone, so results stay bit-identical for any thread count.
# Small: at most ``_config.SMALL_MAX_ENTRIES`` entries (dim_a x dim_b), or
# ``SMALL_MAX_ENTRIES_LOG`` in the log domain, the dense solvers' bounds:
# ``benchmarks/bench_partial.py --twins`` (BENCHMARKS.md, "Entropic partial
# OT") measured the small path faster at every size up to 256^2 in every
# run (parallel / small time 1.13-2.85) and 0.88-1.41 at 362^2; log domain
# 1.04-1.31 at 64-128 (the whole loop) against 0.78 at 181.
@njit(**_SER)
def partial_small_pass(K0, a, v, sp, n_chunks, chunk_rows, Q, u, q):
    """``partial_fused_pass`` of a small K0 (``n_chunks``, ``chunk_rows``
    and ``Q`` unused: the whole matrix in one sweep) as one tight loop:
    ``numbaot.cpu._small.knopp_rows``, four rows at a time, with the scale
    sp and the clamp at 1 (no tiles, column blocks, row buffers or chunk
    merge).  The same iterate to rounding (sums in another order; a float32
    K0 is widened entry by entry)."""
    n, m = K0.shape
    for j in range(m):
        q[0, j] = 0.0
    knopp_rows(K0, a.reshape(1, n), np.int64(0), v, u.reshape(1, n), q, np.int64(0), sp,
                np.bool_(True))


_merge_chunks_serial = serial_twin(merge_chunks)
partial_fused_err_pass_serial = serial_twin(partial_fused_err_pass,
                                            merge_chunks=_merge_chunks_serial)
partial_err2_serial = serial_twin(partial_err2)
partial_run_serial = serial_twin(partial_run, partial_fused_pass=partial_small_pass)
_scaled_plan_serial = serial_twin(scaled_plan)
_scaled_loss_serial = serial_twin(scaled_loss)
partial_log_fused_pass_serial = serial_twin(partial_log_fused_pass,
                                            merge_chunks=_merge_chunks_serial)
_log_col_lse_serial = serial_twin(log_col_lse)
partial_log_run_serial = serial_twin(partial_log_run,
                                     partial_log_fused_pass=partial_log_fused_pass_serial,
                                     log_col_lse=_log_col_lse_serial)
partial_log_err2_serial = serial_twin(partial_log_err2)
_gibbs_loss_serial = serial_twin(gibbs_loss)


@njit(**_SER)
def _check_stops(e2, f32, errs, n_err, stopThr):
    """POT's check: err = sqrt(e2) in the result dtype (``f32``: rounded to
    float32, as ``numbaot._loops.err_scalar``), stored in errs[n_err];
    True when the loop stops (not err > stopThr).  A float32 err is compared
    in float32, as the host loop's NumPy scalar is with a Python float
    (NumPy 2's promotion rules)."""
    err = math.sqrt(e2)
    if f32:
        e32 = np.float32(err)
        errs[n_err] = np.float64(e32)
        return not e32 > np.float32(stopThr)
    errs[n_err] = err
    return not err > stopThr


@njit(**_SER)
def partial_small_loop(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, n_chunks,
                       chunk_rows, Q, q, numItermax, stopThr, f32, errs):
    """``numbaot.partial._partial_loop`` with ``partial_steps`` and
    ``partial_error`` in one serial compiled call (small problems): after
    each iteration ii with ii % 10 == 0, POT's error ||K_prev - K||_F
    (``partial_err2``) is stored in ``errs`` (>= numItermax // 10 + 1
    entries) and the loop stops when it is not above stopThr.  Returns
    (errors stored, failing iteration or -1)."""
    n_err = 0
    if not 1.0 > stopThr:
        return n_err, -1
    for ii in range(numItermax):
        if partial_run_serial(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, n_chunks,
                              chunk_rows, Q, q, np.int64(1))[1]:
            return n_err, ii
        if ii % 10 == 0:
            e2 = partial_err2_serial(K0, u, v, scal[0], up, vp, scal[1], n_chunks, chunk_rows)
            n_err += 1
            if _check_stops(e2, f32, errs, n_err - 1, stopThr):
                break
    return n_err, -1


@njit(**_SER)
def partial_log_small_loop(M, c, C0, logm, La, Lb, u, v, up, vp, scal, rmax, floor,
                           n_chunks, chunk_rows, Q, q, colL, numItermax, stopThr, f32, errs):
    """:func:`partial_small_loop` for the log domain (``partial_log_run``,
    ``partial_log_err2``)."""
    n_err = 0
    if not 1.0 > stopThr:
        return n_err, -1
    for ii in range(numItermax):
        if partial_log_run_serial(M, c, C0, logm, La, Lb, u, v, up, vp, scal, rmax, floor,
                                  n_chunks, chunk_rows, Q, q, colL, np.int64(1))[1]:
            return n_err, ii
        if ii % 10 == 0:
            e2 = partial_log_err2_serial(u, v, scal[0], up, vp, scal[1], n_chunks, chunk_rows)
            n_err += 1
            if _check_stops(e2, f32, errs, n_err - 1, stopThr):
                break
    return n_err, -1


#: (parallel kernel, its serial twin) of each launcher's call
_KERNELS = {
    "run": (partial_run, partial_run_serial),
    "err_pass": (partial_fused_err_pass, partial_fused_err_pass_serial),
    "err2": (partial_err2, partial_err2_serial),
    "plan": (scaled_plan, _scaled_plan_serial),
    "loss": (scaled_loss, _scaled_loss_serial),
    "log_run": (partial_log_run, partial_log_run_serial),
    "log_col_lse": (log_col_lse, _log_col_lse_serial),
    "log_err2": (partial_log_err2, partial_log_err2_serial),
    "gibbs": (gibbs_kernel, gibbs_kernel_serial),
    "gibbs_loss": (gibbs_loss, _gibbs_loss_serial),
}


def _is_small(dim_a, dim_b, log_domain):
    """Whether a state runs the small path (the rule above)."""
    bound = _config.SMALL_MAX_ENTRIES_LOG if log_domain else _config.SMALL_MAX_ENTRIES
    return dim_a * dim_b <= bound


def _kernels(small):
    """name -> the kernel each launcher calls: the serial twins for a small
    problem, else the parallel kernels."""
    return {name: pair[bool(small)] for name, pair in _KERNELS.items()}


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cuda.partial
# --------------------------------------------------------------------------
class PartialState:
    """State of an entropic partial OT run (multiplicative domain) on the CPU.

    Parameters
    ----------
    M : ndarray (dim_a, dim_b), float32 or float64, C order
        Cost matrix (read only).  K0 = exp(-M / reg) * m / sum(exp(-M / reg))
        is formed once, in M's dtype, with POT's NumPy operations (so its
        zeros, which decide POT's failures, are POT's).
    reg : float
        Regularisation (> 0).
    a, b : ndarray (dim_a,), (dim_b,), float64
        Weights.
    m : float
        Mass to transport.
    """

    def __init__(self, M, reg, a, b, m):
        dim_a, dim_b = M.shape
        dt = M.dtype
        K0 = np.empty(M.shape, dtype=dt)
        np.divide(M, -reg, out=K0)
        np.exp(K0, out=K0)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.multiply(K0, m / np.sum(K0), out=K0)
        self.M, self.K0, self.mass = M, K0, float(m)
        self.a = np.ascontiguousarray(a, dtype=np.float64)
        self.b = np.ascontiguousarray(b, dtype=np.float64)
        self.u = np.ones(dim_a)
        self.v = np.ones((1, dim_b))
        self.up = np.ones(dim_a)
        self.vp = np.ones((1, dim_b))
        self.scal = np.array([1.0, 1.0, 0.0])  # s, s_prev, broken
        self.zero_below = float(np.finfo(dt).smallest_subnormal) / 2
        self.kmin = float(K0.min())
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, 1, dim_b, memory_bound=True)
        self.small = _is_small(dim_a, dim_b, False)
        self.k = _kernels(self.small)
        self.Q = np.empty((self.n_chunks, 1, dim_b))
        self.q = np.empty((1, dim_b))
        self.failed = False
        self.started = False
        # the iterate before the last (kept while partial_error runs the next
        # iteration's pass ahead: ``pending``)
        self.upp = np.ones(dim_a)
        self.vpp = np.ones((1, dim_b))
        self.spp = 1.0
        self.pending = False


def partial_steps(st, n_steps):
    """Run up to ``n_steps`` iterations.  Returns (steps completed, failed
    flag); on failure the first value is the index (in this call) of the
    step where POT's iterate is NaN/inf, and the plan is NaN from then on.
    An iteration started by :func:`partial_error` (its fused pass done) is
    finished first and counts as the first step."""
    if st.failed:
        return 0, True
    if n_steps == 0:
        return 0, False
    done = 0
    with np.errstate(all="ignore"):
        if st.pending:
            st.pending = False
            done = 1
            if _finish_step(st.b, st.mass, st.u, st.v, st.scal, st.kmin, st.zero_below, st.q,
                            st.scal[1]):
                st.failed = True
                return 0, True
        more, failed = st.k["run"](st.K0, st.a, st.b, st.mass, st.u, st.v, st.up, st.vp,
                                   st.scal, st.kmin, st.zero_below, st.n_chunks,
                                   st.chunk_rows, st.Q, st.q, n_steps - done)
    st.started = True
    st.failed = bool(failed)
    return done + int(more), bool(failed)


def partial_solve_small(st, numItermax, stopThr):
    """The whole loop of ``numbaot.partial._partial_loop`` in one serial
    compiled call (:func:`partial_small_loop`) for a small state not yet
    iterated; else None (the caller then alternates :func:`partial_steps`
    and :func:`partial_error`).  Returns (POT's errors at the checks,
    float64 (n_checks,) in the result dtype's values; the failing
    iteration, or None)."""
    if not st.small or st.started or st.failed or numItermax > _config.SMALL_MAX_ITER:
        return None
    errs = np.empty(numItermax // 10 + 1)
    with np.errstate(all="ignore"):
        n_err, failed_at = partial_small_loop(
            st.K0, st.a, st.b, st.mass, st.u, st.v, st.up, st.vp, st.scal, st.kmin,
            st.zero_below, st.n_chunks, st.chunk_rows, st.Q, st.q, numItermax, stopThr,
            st.K0.dtype == np.float32, errs)
    st.started = numItermax > 0 and 1 > stopThr
    st.failed = failed_at >= 0
    return errs[:n_err], (int(failed_at) if failed_at >= 0 else None)


def _undo_pending(st):
    """Forget the speculative next iteration of :func:`partial_error`."""
    if st.pending:
        st.u[:] = st.up
        st.scal[0] = st.scal[1]
        st.up[:] = st.upp
        st.vp[:, :] = st.vpp
        st.scal[1] = st.spp
        st.pending = False


def partial_error(st):
    """POT's error of the last iteration, ||K_prev - K||_F (float).

    It is taken in the same read of K0 as the next iteration's fused pass
    (whose result is kept for the next :func:`partial_steps`, or dropped by
    :func:`partial_plan` / :func:`partial_loss` when the loop stops): one
    read of K0 per iteration, checks included."""
    if st.pending:  # asked again: the error between the saved iterates
        e2 = st.k["err2"](st.K0, st.up, st.vp, st.scal[1], st.upp, st.vpp, st.spp,
                          st.n_chunks, st.chunk_rows)
        return math.sqrt(e2)
    if st.failed or st.scal[2] != 0.0 or not st.started:
        e2 = st.k["err2"](st.K0, st.u, st.v, st.scal[0], st.up, st.vp, st.scal[1],
                          st.n_chunks, st.chunk_rows)
        return math.sqrt(e2)
    st.upp[:] = st.up
    st.vpp[:, :] = st.vp
    st.spp = st.scal[1]
    s = st.scal[0]
    st.scal[1] = s
    st.up[:] = st.u
    st.vp[:, :] = st.v
    with np.errstate(all="ignore"):
        e2 = st.k["err_pass"](st.K0, st.a, st.v, s, st.vpp, st.upp, st.spp,
                                    st.n_chunks, st.chunk_rows, st.Q, st.u, st.q)
    st.pending = True
    return math.sqrt(e2)


def partial_plan(st):
    """The current iterate s diag(u) K0 diag(v), (dim_a, dim_b), M's dtype
    (all NaN after a failed step, as POT's)."""
    _undo_pending(st)
    if st.failed:
        return np.full(st.K0.shape, np.nan, dtype=st.K0.dtype)
    if not st.started:
        return st.K0.copy()
    plan = np.empty(st.K0.shape, dtype=st.K0.dtype)
    st.k["plan"](st.K0, st.u * st.scal[0], st.v[0], plan)
    return plan


def partial_loss(st):
    """<K, M>_F of the current iterate (float; NaN after a failed step)."""
    _undo_pending(st)
    if st.failed:
        return np.nan
    out = np.empty(1)
    st.k["loss"](st.K0, st.M, (st.u * st.scal[0]).reshape(1, -1), st.v, st.n_chunks,
                 st.chunk_rows, out)
    return float(out[0])


class PartialLogState:
    """State of an entropic partial OT run in the log domain on the CPU.

    Same parameters as :class:`PartialState`.  The kernel is never formed:
    LK0 = -M / reg + log m - LSE(-M / reg) is read from M on the fly
    (C0 = log m - LSE(-M / reg) is a scalar); the iterate is
    LK0 + Lu 1^T + 1 Lv^T + Ls.
    """

    def __init__(self, M, reg, a, b, m):
        dim_a, dim_b = M.shape
        self.M, self.c = M, -1.0 / reg
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, 1, dim_b)
        self.small = _is_small(dim_a, dim_b, True)
        self.k = _kernels(self.small)
        lse = np.empty((1, dim_b))
        self.k["log_col_lse"](M, self.c, np.zeros((1, dim_a)), self.n_chunks, self.chunk_rows,
                              lse)
        mx = lse.max()
        with np.errstate(divide="ignore", invalid="ignore"):
            self.logm = math.log(m) if m > 0 else -np.inf
            self.C0 = self.logm - (mx + math.log(np.exp(lse - mx).sum()))
            self.La = np.log(np.ascontiguousarray(a, dtype=np.float64))
            self.Lb = np.log(np.ascontiguousarray(b, dtype=np.float64))
        self.u = np.zeros(dim_a)
        self.v = np.zeros((1, dim_b))
        self.up = np.zeros(dim_a)
        self.vp = np.zeros((1, dim_b))
        self.scal = np.array([0.0, 0.0, 0.0, 0.0])  # Ls, Ls_prev, shift_ok, dv_max
        self.rmax = np.zeros(dim_a)
        self.Q = np.empty((self.n_chunks, 1, dim_b))
        self.q = np.empty((1, dim_b))
        self.colL = np.empty((1, dim_b))
        self.failed = False
        self.started = False


def partial_log_steps(st, n_steps):
    """As :func:`partial_steps`, in the log domain (a step fails when a
    potential is not finite; the state then holds that step's iterate)."""
    if st.failed:
        return 0, True
    st.started = True
    with np.errstate(all="ignore"):
        done, failed = st.k["log_run"](st.M, st.c, st.C0, st.logm, st.La, st.Lb, st.u, st.v,
                                       st.up, st.vp, st.scal, st.rmax, PARTIAL_SUM_FLOOR,
                                       st.n_chunks,
                                       st.chunk_rows, st.Q, st.q, st.colL, n_steps)
    st.failed = bool(failed)
    return int(done), bool(failed)


def partial_log_solve_small(st, numItermax, stopThr):
    """:func:`partial_solve_small` for the log domain
    (:func:`partial_log_small_loop`)."""
    if not st.small or st.started or st.failed or numItermax > _config.SMALL_MAX_ITER:
        return None
    errs = np.empty(numItermax // 10 + 1)
    with np.errstate(all="ignore"):
        n_err, failed_at = partial_log_small_loop(
            st.M, st.c, st.C0, st.logm, st.La, st.Lb, st.u, st.v, st.up, st.vp, st.scal,
            st.rmax, PARTIAL_SUM_FLOOR, st.n_chunks, st.chunk_rows, st.Q, st.q, st.colL,
            numItermax, stopThr, st.M.dtype == np.float32, errs)
    st.started = numItermax > 0 and 1 > stopThr
    st.failed = failed_at >= 0
    return errs[:n_err], (int(failed_at) if failed_at >= 0 else None)


def partial_log_error(st):
    """POT's error of the last iteration, ||LK_prev - LK||_F (float)."""
    e2 = st.k["log_err2"](st.u, st.v, st.scal[0], st.up, st.vp, st.scal[1], st.n_chunks,
                          st.chunk_rows)
    return math.sqrt(e2)


def partial_log_plan(st):
    """exp(LK) of the current iterate, (dim_a, dim_b), M's dtype (zeros
    where a potential is -inf, NaN where it is NaN, as POT's)."""
    plan = np.empty(st.M.shape, dtype=st.M.dtype)
    with np.errstate(invalid="ignore"):
        f = st.u + (st.C0 + st.scal[0])
    st.k["gibbs"](st.M, st.c, f, st.v[0], plan)
    return plan


def partial_log_loss(st):
    """<exp(LK), M>_F of the current iterate (float)."""
    out = np.empty(1)
    with np.errstate(invalid="ignore"):
        f = (st.u + (st.C0 + st.scal[0])).reshape(1, -1)
    st.k["gibbs_loss"](st.M, st.c, f, st.v, st.n_chunks, st.chunk_rows, out)
    return float(out[0])


#: The launcher contract shared with numbaot.cuda.partial (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("PartialState", "partial_steps", "partial_solve_small", "partial_error",
             "partial_plan", "partial_loss", "PartialLogState", "partial_log_steps",
             "partial_log_solve_small", "partial_log_error", "partial_log_plan",
             "partial_log_loss")
