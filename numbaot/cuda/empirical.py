"""CUDA kernels for point clouds with costs computed on the fly, mirroring
``numbaot/cpu/empirical.py`` (``lazy_lse``, ``lazy_loss``, ``lazy_grad``).

Points: ``X`` (n, d) and ``Yt`` (d, m) C-contiguous device arrays (Y stored
transposed: a warp reads 32 consecutive targets of one coordinate,
coalesced).  The cost of (x_i, y_j) is formed in registers (metric 0:
squared Euclidean, 1: Euclidean) inside the reduction; nothing of size n m
is ever stored.  ``lazy_lse`` is Viehmann's block per row: each thread keeps
an online (max, scaled sum) pair over its strided targets, merged by warp
shuffles and then across warps.  ``lazy_grad`` (the gradient of the entropic
value w.r.t. the points) also runs a block per row: each tile of blockDim
targets first gets its plan weights in shared memory (a thread per target,
coalesced reads of ``Yt``), then the threads sweep the tile along the
coordinates (a thread per coordinate k).  One kernel set per dtype (float32
problems compute in float32).

Kernel truncation (the multiscale path, ``lazy_truncate``) mirrors the CPU's:
both clouds in voxel order on the device; per half-step a gather of the
column weights into that order (``voxel_gather``, a thread per column),
each column voxel's largest weight (``voxel_wmax``, a thread per voxel),
the voxel pairs kept (``trunc_pattern``, a thread per row voxel, counted,
prefix-summed on the host from Kr numbers, then filled) and the logsumexps
on those pairs (``lazy_lse_trunc``, a block per row as ``lazy_lse``; the
online pair needs no shift, so the CPU's S is not formed).

The launchers at the end (``LazyState``, ``lazy_steps``, ...) have the same
names, signatures and returns as those of ``numbaot.cpu.empirical``: host
float64 arrays in, device copies in the problem's dtype inside.
"""
import math

import numpy as np
import numba
from numba import cuda

from .. import _config, _dispatch
from ._launch import per_dtype
from ._reduce import make_reductions
from ._registry import device, kernel

__all__ = ["lazy_lse", "lazy_lse_trunc", "trunc_pattern", "voxel_wmax", "voxel_gather",
           "lazy_loss", "lazy_grad", "potential_update",
           "LazyState", "lazy_steps", "lazy_row_lse", "lazy_truncate", "lazy_kept_fraction",
           "lazy_note_error", "lazy_potentials", "lazy_outputs", "lazy_transport_cost"]

#: the launcher contract shared with numbaot.cpu.empirical
LAUNCHERS = ("LazyState", "lazy_steps", "lazy_row_lse", "lazy_truncate", "lazy_kept_fraction",
             "lazy_note_error", "lazy_potentials", "lazy_outputs", "lazy_transport_cost")

#: size of the shared weight tile of ``lazy_grad_rows``: the largest block
#: (CUDA_THREADS must not exceed it); ``_config.CUDA_MAX_BLOCK_THREADS``.
_MAX_THREADS = int(_config.CUDA_MAX_BLOCK_THREADS)


def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    NINF = dt(-np.inf)
    ZERO = dt(0.0)
    TWO = dt(2.0)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    I1 = "int64[::1]"
    I2 = "int64[:, ::1]"
    R = make_reductions(dt)
    lse_push, block_lse, block_sum, block_max = R.lse_push, R.block_lse, R.block_sum, R.block_max

    @kernel([f"void({A2}, {A2}, {A1}, {T}, int64, {A1})"], hot=True, warp_shuffle=True, tag=tag)
    def lazy_lse_rows(X, Yt, w, c, metric, out):
        """out[i] = LSE_j (w[j] + c cost(x_i, y_j)); block per row i."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        d = X.shape[1]
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            m = NINF
            s = ZERO
            for j in range(tid, Yt.shape[1], cuda.blockDim.x):
                cost = ZERO
                for k in range(d):
                    diff = X[i, k] - Yt[k, j]
                    cost += diff * diff
                if metric == 1:
                    cost = math.sqrt(cost)
                m, s = lse_push(m, s, w[j] + c * cost)
            m, s = block_lse(m, s, sm, ss)
            if tid == 0:
                out[i] = m + math.log(s) if m > NINF else NINF

    @kernel([f"void({A2}, {A2}, {A1}, {A1}, {T}, int64, {A1})"], warp_shuffle=True, tag=tag)
    def lazy_loss_rows(X, Yt, f, g, c, metric, part):
        """part[i] = sum_j cost_ij exp(f_i + g_j + c cost_ij)."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        d = X.shape[1]
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            acc = ZERO
            if f[i] > NINF:
                for j in range(tid, Yt.shape[1], cuda.blockDim.x):
                    cost = ZERO
                    for k in range(d):
                        diff = X[i, k] - Yt[k, j]
                        cost += diff * diff
                    if metric == 1:
                        cost = math.sqrt(cost)
                    acc += cost * math.exp(f[i] + g[j] + c * cost)
            acc = block_sum(acc, ss)
            if tid == 0:
                part[i] = acc

    @kernel([f"void({A2}, {A2}, {A1}, {A1}, {T}, int64, {A2})"], tag=tag)
    def lazy_grad_rows(X, Yt, f, g, c, metric, out):
        """out[i, :] = sum_j P_ij grad_x cost(x_i, y_j), P_ij = exp(f_i + g_j +
        c cost_ij); sqeuclidean: grad = 2 (x_i - y_j), euclidean:
        (x_i - y_j) / ||x_i - y_j|| (0 for coincident points).  Block per row
        i; per tile of blockDim targets: weights W_j (2 P_ij, or P_ij / cost_ij)
        into shared memory, then thread k adds sum_j W_j (x_ik - y_jk) to
        out[i, k] (each out[i, k] owned by one thread: no atomics)."""
        wt = cuda.shared.array(_MAX_THREADS, dtype=T)
        tid = cuda.threadIdx.x
        bd = cuda.blockDim.x
        d = X.shape[1]
        m = Yt.shape[1]
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            fi = f[i]
            for k in range(tid, d, bd):
                out[i, k] = ZERO
            if fi > NINF:  # the same for the whole block
                for j0 in range(0, m, bd):
                    j = j0 + tid
                    wj = ZERO
                    if j < m:
                        cost = ZERO
                        for k in range(d):
                            diff = X[i, k] - Yt[k, j]
                            cost += diff * diff
                        if metric == 1:
                            cost = math.sqrt(cost)
                        p = math.exp(fi + g[j] + c * cost)
                        if metric == 1:
                            wj = p / cost if cost > ZERO else ZERO
                        else:
                            wj = TWO * p
                    cuda.syncthreads()  # the previous tile is no longer read
                    wt[tid] = wj
                    cuda.syncthreads()
                    ln = min(bd, m - j0)
                    for k in range(tid, d, bd):
                        xk = X[i, k]
                        s = ZERO
                        for t in range(ln):
                            s += wt[t] * (xk - Yt[k, j0 + t])
                        out[i, k] += s

    @kernel([f"void({A1}, {A1}, {A1})"], hot=True, tag=tag)
    def potential_update(base, lse, out):
        """out = base - lse, -inf where base is -inf (zero weights)."""
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = base[i] - lse[i] if base[i] > NINF else NINF

    # ----------------------------------------------------------------------
    # kernel truncation: the CPU's voxel_wmax, trunc_pattern, lazy_lse_trunc
    # ----------------------------------------------------------------------
    @kernel([f"void({A1}, {I1}, {A1})"], hot=True, tag=tag)
    def voxel_gather_cols(w, perm, wp):
        """wp[j] = w[perm[j]]: the column weights in voxel order (thread per
        column)."""
        j = cuda.grid(1)
        if j < wp.shape[0]:
            wp[j] = w[perm[j]]

    @kernel([f"void({A1}, {I1}, {A1}, {I1})"], hot=True, tag=tag)
    def voxel_wmax_cols(wp, col_ptr, wmax, jstar):
        """wmax[J], jstar[J]: the largest wp over voxel J's columns and the
        first column reaching it (-inf and the voxel's first column when all
        are -inf); thread per column voxel."""
        J = cuda.grid(1)
        if J < wmax.shape[0]:
            mx = NINF
            at = col_ptr[J]
            for j in range(col_ptr[J], col_ptr[J + 1]):
                if wp[j] > mx:
                    mx = wp[j]
                    at = j
            wmax[J] = mx
            jstar[J] = at

    @kernel([f"void({A2}, {A1}, {A2}, {A1}, {A2}, {I1}, {A1}, {I1}, {T}, int64, {T}, boolean, "
             f"{I2}, {I1}, {I1})"], hot=True, tag=tag)
    def trunc_pattern_rows(Cr, Rr, Cc, Rc, Pct, col_ptr, wmax, jstar, c, metric, tau, fill,
                           counts, jptr, jlist):
        """The CPU's ``trunc_pattern`` (its ``_voxel_bounds``), a thread per
        row voxel I over every column voxel J: L = max_J wmax_J + c (|C_I -
        y_jstar(J)| + r_I)^p, then J kept where U = wmax_J + c max(|C_I -
        C_J| - r_I - r_J, 0)^p >= L - tau (two passes over J instead of the
        CPU's array of U: no per-thread array).  fill False: counts[0, I] =
        the voxels kept, counts[1, I] = the columns they hold (the host's
        kept fraction from Kr numbers); fill True: jlist[jptr[I]:jptr[I +
        1]] = those voxels, increasing."""
        I = cuda.grid(1)
        if I < Cr.shape[0]:
            d = Cr.shape[1]
            Kc = Cc.shape[0]
            L = NINF
            for J in range(Kc):
                if wmax[J] > NINF:
                    js = jstar[J]
                    dy = ZERO
                    for k in range(d):
                        e = Cr[I, k] - Pct[k, js]
                        dy += e * e
                    dmax = math.sqrt(dy) + Rr[I]
                    if metric == 0:
                        dmax *= dmax
                    L = max(L, wmax[J] + c * dmax)
            cut = L - tau
            q = jptr[I] if fill else 0
            cols = 0
            for J in range(Kc):
                if wmax[J] > NINF:
                    dc = ZERO
                    for k in range(d):
                        e = Cr[I, k] - Cc[J, k]
                        dc += e * e
                    dmin = max(math.sqrt(dc) - Rr[I] - Rc[J], ZERO)
                    if metric == 0:
                        dmin *= dmin
                    U = wmax[J] + c * dmin
                    if U >= cut and U > NINF:
                        if fill:
                            jlist[q] = J
                        q += 1
                        cols += col_ptr[J + 1] - col_ptr[J]
            if not fill:
                counts[0, I] = q
                counts[1, I] = cols

    @device
    def pair_cost(Pr, i, Pct, j, metric):
        """cost(x_i, y_j) of row i of Pr (n, d) and column j of Pct (d, m):
        squared Euclidean (metric 0) or Euclidean (1)."""
        cost = ZERO
        for k in range(Pr.shape[1]):
            diff = Pr[i, k] - Pct[k, j]
            cost += diff * diff
        if metric == 1:
            cost = math.sqrt(cost)
        return cost

    @device
    def run_lse(Pr, i, Pct, wp, c, metric, lo, hi, m, s):
        """Push wp[j] + c cost(x_i, y_j) into this thread's pair (m, s) for
        the columns j of [lo, hi) it strides (coalesced reads of Pct)."""
        for j in range(lo + cuda.threadIdx.x, hi, cuda.blockDim.x):
            m, s = lse_push(m, s, wp[j] + c * pair_cost(Pr, i, Pct, j, metric))
        return m, s

    @kernel([f"void({A2}, {A2}, {A1}, {T}, int64, {T}, {I1}, {A2}, {A1}, {I1}, {A1}, {I1}, "
             f"{I1}, {I1}, {I1}, {A1})"], hot=True, warp_shuffle=True, tag=tag)
    def lazy_lse_trunc_rows(Pr, Pct, wp, c, metric, tau, row_label, Cc, Rc, col_ptr, wmax,
                            jstar, jptr, jlist, row_perm, out):
        """The CPU's ``lazy_lse_trunc``, a block per row i (voxel order; voxel
        I = row_label[i]): L = the largest of wmax_J + c cost(x_i, y_jstar(J))
        over the kept voxels J of I (terms of the row; block max), then each
        voxel's U = wmax_J + c max(|x_i - C_J| - r_J, 0)^p against L - tau
        by a thread per voxel, blockDim voxels at a time (their column
        ranges, or -1, in shared memory); the block walks those flags and
        its threads stride over the columns of each run of adjacent kept
        voxels with the online pair (lse_push, block_lse: no shift S and no
        fallback needed).  out[row_perm[i]] = the logsumexp."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        bc = cuda.shared.array(1, dtype=T)
        klo = cuda.shared.array(_MAX_THREADS, dtype=numba.int64)
        khi = cuda.shared.array(_MAX_THREADS, dtype=numba.int64)
        tid = cuda.threadIdx.x
        bd = cuda.blockDim.x
        d = Pr.shape[1]
        for i in range(cuda.blockIdx.x, Pr.shape[0], cuda.gridDim.x):
            I = row_label[i]
            q0 = jptr[I]
            nq = jptr[I + 1] - q0
            L = NINF
            for q in range(tid, nq, bd):
                J = jlist[q0 + q]
                L = max(L, wmax[J] + c * pair_cost(Pr, i, Pct, jstar[J], metric))
            L = block_max(L, ss)
            if tid == 0:
                bc[0] = L
            cuda.syncthreads()
            cut = bc[0] - tau
            m = NINF
            s = ZERO
            lo = 0
            hi = 0  # the current run of adjacent kept voxels' columns, [lo, hi)
            for qb in range(0, nq, bd):
                q = qb + tid
                a = -1
                b = -1
                if q < nq:
                    J = jlist[q0 + q]
                    dc = ZERO
                    for k in range(d):
                        e = Pr[i, k] - Cc[J, k]
                        dc += e * e
                    dmin = max(math.sqrt(dc) - Rc[J], ZERO)
                    if metric == 0:
                        dmin *= dmin
                    if wmax[J] + c * dmin >= cut:
                        a = col_ptr[J]
                        b = col_ptr[J + 1]
                cuda.syncthreads()  # the previous chunk's flags are read by every thread
                klo[tid] = a
                khi[tid] = b
                cuda.syncthreads()
                for t in range(min(bd, nq - qb)):
                    a = klo[t]
                    if a < 0:
                        continue
                    if a == hi and hi > lo:  # adjacent to the run: extend it
                        hi = khi[t]
                        continue
                    m, s = run_lse(Pr, i, Pct, wp, c, metric, lo, hi, m, s)  # the run ends
                    lo = a
                    hi = khi[t]
            m, s = run_lse(Pr, i, Pct, wp, c, metric, lo, hi, m, s)  # the last run
            m, s = block_lse(m, s, sm, ss)
            if tid == 0:
                out[row_perm[i]] = m + math.log(s) if m > NINF else NINF

    return dict(lazy_lse_rows=lazy_lse_rows, lazy_loss_rows=lazy_loss_rows,
                lazy_grad_rows=lazy_grad_rows, potential_update=potential_update,
                voxel_gather_cols=voxel_gather_cols, voxel_wmax_cols=voxel_wmax_cols,
                trunc_pattern_rows=trunc_pattern_rows, lazy_lse_trunc_rows=lazy_lse_trunc_rows)


_k = per_dtype(_build)


def _grid(n):
    return max(1, min(int(n), 65535 * 32))


def lazy_lse(X, Yt, w, c, metric, out):
    """out[i] = LSE_j (w[j] + c cost(x_i, y_j)) (device arrays)."""
    dt = X.dtype
    _k("lazy_lse_rows", dt)[_grid(X.shape[0]), int(_config.CUDA_THREADS)](
        X, Yt, w, dt.type(c), metric, out)


def potential_update(base, lse, out):
    """out = base - lse (log-weights minus a logsumexp), on the device."""
    t = int(_config.CUDA_THREADS)
    _k("potential_update", out.dtype)[(out.shape[0] + t - 1) // t, t](base, lse, out)


def lazy_loss(X, Yt, f, g, c, metric):
    """sum_ij cost_ij exp(f_i + g_j + c cost_ij) (row partials summed on the
    host in row order: n numbers)."""
    dt = X.dtype
    part = cuda.device_array(X.shape[0], dtype=dt)
    _k("lazy_loss_rows", dt)[_grid(X.shape[0]), int(_config.CUDA_THREADS)](
        X, Yt, f, g, dt.type(c), metric, part)
    return float(np.sum(part.copy_to_host(), dtype=np.float64))


def lazy_grad(X, Yt, f, g, c, metric, out):
    """out[i, :] = sum_j P_ij grad_x cost(x_i, y_j) (device arrays; X (n, d),
    Yt (d, m), out (n, d)); mirror of ``numbaot.cpu.empirical.lazy_grad``."""
    t = int(_config.CUDA_THREADS)
    if t > _MAX_THREADS:
        raise ValueError(f"CUDA_THREADS must be at most {_MAX_THREADS} for lazy_grad; got {t}")
    dt = X.dtype
    _k("lazy_grad_rows", dt)[_grid(X.shape[0]), t](X, Yt, f, g, dt.type(c), metric, out)


def voxel_gather(w, perm, wp):
    """wp = w[perm] (device arrays): column weights into voxel order (the
    CPU launcher's ``w[cc.perm]``)."""
    t = int(_config.CUDA_THREADS)
    _k("voxel_gather_cols", wp.dtype)[(wp.shape[0] + t - 1) // t, t](w, perm, wp)


def voxel_wmax(wp, col_ptr, wmax, jstar):
    """wmax[J], jstar[J]: each column voxel's largest weight and its first
    column (device arrays); mirror of ``numbaot.cpu.empirical.voxel_wmax``."""
    t = int(_config.CUDA_THREADS)
    _k("voxel_wmax_cols", wp.dtype)[(wmax.shape[0] + t - 1) // t, t](wp, col_ptr, wmax, jstar)


def trunc_pattern(Cr, Rr, Cc, Rc, Pct, col_ptr, wmax, jstar, c, metric, tau, fill, n_kept,
                  jptr, jlist):
    """The voxel pairs a truncated half-step reads (device arrays); mirror of
    ``numbaot.cpu.empirical.trunc_pattern``, except that ``n_kept`` is (2,
    Kr): with ``fill`` False, row 0 gets the voxels each row voxel keeps and
    row 1 the columns they hold (so the host's kept fraction reads Kr
    numbers, not jlist)."""
    t = int(_config.CUDA_THREADS)
    dt = Cr.dtype
    _k("trunc_pattern_rows", dt)[(Cr.shape[0] + t - 1) // t, t](
        Cr, Rr, Cc, Rc, Pct, col_ptr, wmax, jstar, dt.type(c), metric, dt.type(tau), bool(fill),
        n_kept, jptr, jlist)


def lazy_lse_trunc(Pr, Pct, wp, c, metric, tau, row_label, Cc, Rc, col_ptr, wmax, jstar, jptr,
                   jlist, row_perm, out):
    """``lazy_lse`` on the voxel pairs of :func:`trunc_pattern`, each row
    refined by its own bounds, out[row_perm[i]] = row i's logsumexp (device
    arrays); mirror of ``numbaot.cpu.empirical.lazy_lse_trunc``."""
    t = int(_config.CUDA_THREADS)
    if t > _MAX_THREADS:
        raise ValueError(f"CUDA_THREADS must be at most {_MAX_THREADS} for lazy_lse_trunc; "
                         f"got {t}")
    dt = Pr.dtype
    _k("lazy_lse_trunc_rows", dt)[_grid(Pr.shape[0]), t](
        Pr, Pct, wp, dt.type(c), metric, dt.type(tau), row_label, Cc, Rc, col_ptr, wmax, jstar,
        jptr, jlist, row_perm, out)


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cpu.empirical
# --------------------------------------------------------------------------
class LazyState:
    """Device state of a lazy log-domain Sinkhorn run, in the result dtype.

    Same constructor as ``numbaot.cpu.empirical.LazyState``: the host
    float64 arrays ``Xs``, ``Xt``, ``log_a``, ``log_b``, ``f``, ``g`` are
    copied to the device in ``dtype`` (float32 problems compute in float32).
    The potentials stay on the device; the host reads n numbers per stopping
    test (every 10 iterations).

    The column-reduction hook ``reduction`` (points split across processes)
    is CPU-only: ValueError if given.

    Attributes read by ``numbaot.cuda.gradients``: ``Xs``, ``Xt``, ``Xs_t``,
    ``Xt_t``, ``f``, ``g`` (device arrays), ``c``, ``metric``, ``dtype``.
    """

    def __init__(self, Xs, Xt, log_a, log_b, f, g, c, metric, dtype, reduction=None):
        if reduction is not None:
            raise ValueError("reduction: the CUDA launchers do not support points split across "
                             "processes; use NumPy arrays with numbaot.distributed")
        def dev(x):
            return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))

        self.Xs, self.Xt = dev(Xs), dev(Xt)
        self.Xs_t, self.Xt_t = dev(Xs.T), dev(Xt.T)
        self.log_a, self.log_b, self.f, self.g = dev(log_a), dev(log_b), dev(f), dev(g)
        self.c, self.metric, self.dtype = c, metric, dtype
        self.lse_f = cuda.device_array(Xs.shape[0], dtype=dtype)
        self.lse_g = cuda.device_array(Xt.shape[0], dtype=dtype)
        self.trunc = None  # kernel truncation (:func:`lazy_truncate`)


class _Truncation:
    """Device copies of both clouds in voxel order for the truncated
    half-steps (:func:`lazy_truncate`), per cloud k (0: source, 1: target):
    ``P[k]`` (n_k, d) and ``Pt[k]`` (d, n_k) in the state's dtype (the
    state's own points, reordered: the costs are those of ``lazy_lse``),
    ``perm``, ``label``, ``ptr`` (int64), ``center``, ``radius`` (the
    dtype), ``rows[k]`` (host: points per voxel), ``tau[k]`` for the
    half-step whose rows are cloud k, ``kept[k]`` its last kept fraction, and
    the work arrays of the half-steps (``wp``, ``wmax``, ``jstar`` where
    cloud k holds the columns, ``counts``, ``jptr``, ``jlist`` where it holds
    the rows; ``jlist`` grows as needed).

    The bounds are evaluated in the dtype: a rounding error delta (in log
    units) of a bound lets through at most e^delta times the tolerance,
    and delta is about |c| times the rounding of the distances, as for the
    terms themselves, so float32 needs no padding of the radii."""

    def __init__(self, st, cs, ct, tol):
        dt = st.Xs.dtype

        def dev(x, dtype=dt):
            return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))

        P = [X.copy_to_host()[cl.perm] for X, cl in ((st.Xs, cs), (st.Xt, ct))]
        self.P = tuple(dev(p) for p in P)
        self.Pt = tuple(dev(p.T) for p in P)
        self.perm, self.label, self.ptr = ((dev(cs.perm, np.int64), dev(ct.perm, np.int64)),
                                           (dev(cs.label, np.int64), dev(ct.label, np.int64)),
                                           (dev(cs.ptr, np.int64), dev(ct.ptr, np.int64)))
        self.center = (dev(cs.center), dev(ct.center))
        self.radius = (dev(cs.radius), dev(ct.radius))
        self.rows = (np.diff(cs.ptr).astype(np.int64), np.diff(ct.ptr).astype(np.int64))
        n, m = P[0].shape[0], P[1].shape[0]
        self.tau = (math.log(m / tol), math.log(n / tol))
        self.kept = [1.0, 1.0]
        self.full_at = [None, None]  # the temperature c of a side's last fallback
        K = (cs.center.shape[0], ct.center.shape[0])
        self.wp = tuple(cuda.device_array(p.shape[0], dtype=dt) for p in P)
        self.wmax = tuple(cuda.device_array(k, dtype=dt) for k in K)
        self.jstar = tuple(cuda.device_array(k, dtype=np.int64) for k in K)
        self.counts = tuple(cuda.device_array((2, k), dtype=np.int64) for k in K)
        self.jptr = tuple(cuda.device_array(k + 1, dtype=np.int64) for k in K)
        self.jlist = [cuda.device_array(1, dtype=np.int64) for _ in K]


def _truncated_lse(st, side, w, out):
    """out = the half-step's logsumexps (rows: cloud ``side``, columns the
    other, column weights w; device arrays) on the voxel pairs that bounds
    cannot rule out, as ``numbaot.cpu.empirical._truncated_lse``: gather,
    voxel maxima, pattern counts (Kr numbers to the host: the kept fraction
    and the prefix sum), then, unless it keeps more than
    ``_config.LAZY_TRUNCATION_MAX_KEPT`` of the pairs (False returned, out
    untouched), the fill and ``lazy_lse_trunc``.  Returns True when it ran."""
    tr, r, o = st.trunc, side, 1 - side
    if tr.full_at[r] == st.c:  # this temperature's pattern kept too much: skip it
        return False
    voxel_gather(w, tr.perm[o], tr.wp[o])
    voxel_wmax(tr.wp[o], tr.ptr[o], tr.wmax[o], tr.jstar[o])
    args = (tr.center[r], tr.radius[r], tr.center[o], tr.radius[o], tr.Pt[o], tr.ptr[o],
            tr.wmax[o], tr.jstar[o], st.c, st.metric, tr.tau[r])
    trunc_pattern(*args, False, tr.counts[r], tr.jptr[r], tr.jlist[r])
    counts = tr.counts[r].copy_to_host()
    n, m = tr.P[r].shape[0], tr.P[o].shape[0]
    tr.kept[r] = float(np.dot(tr.rows[r], counts[1])) / (n * m)
    if tr.kept[r] > _config.LAZY_TRUNCATION_MAX_KEPT:
        tr.full_at[r] = st.c  # no pattern again at this temperature
        return False
    jptr = np.zeros(counts.shape[1] + 1, np.int64)
    np.cumsum(counts[0], out=jptr[1:])
    tr.jptr[r].copy_to_device(jptr)
    if tr.jlist[r].shape[0] < jptr[-1]:
        tr.jlist[r] = cuda.device_array(int(jptr[-1]), dtype=np.int64)
    trunc_pattern(*args, True, tr.counts[r], tr.jptr[r], tr.jlist[r])
    lazy_lse_trunc(tr.P[r], tr.Pt[o], tr.wp[o], st.c, st.metric, tr.tau[r], tr.label[r],
                   tr.center[o], tr.radius[o], tr.ptr[o], tr.wmax[o], tr.jstar[o], tr.jptr[r],
                   tr.jlist[r], tr.perm[r], out)
    return True


def _half_step(st, side, w, out):
    """out = LSE over the other cloud of (w_j + c cost) for the rows of
    cloud ``side`` (0: source, 1: target): truncated where
    :func:`lazy_truncate` set it up and the pattern skips enough, else
    ``lazy_lse``."""
    if st.trunc is None or not _truncated_lse(st, side, w, out):
        X, Yt = (st.Xs, st.Xt_t) if side == 0 else (st.Xt, st.Xs_t)
        lazy_lse(X, Yt, w, st.c, st.metric, out)


def lazy_steps(st, n_steps):
    """Run ``n_steps`` iterations in POT's order: f = log a - LSE_j(g_j + c
    cost_ij), then g = log b - LSE_i(f_i + c cost_ij)."""
    for _ in range(n_steps):
        _half_step(st, 0, st.g, st.lse_f)
        potential_update(st.log_a, st.lse_f, st.f)
        _half_step(st, 1, st.f, st.lse_g)
        potential_update(st.log_b, st.lse_g, st.g)


def lazy_row_lse(st):
    """(f, LSE_j(g_j + c cost_ij)) as host float64 arrays (n,), (n,): the
    row marginal of the current plan is exp(f + LSE) (POT's stopping test;
    within ``_config.LAZY_TRUNCATION_TOL`` when truncated)."""
    _half_step(st, 0, st.g, st.lse_f)
    return (st.f.copy_to_host().astype(np.float64),
            st.lse_f.copy_to_host().astype(np.float64))


def lazy_truncate(st, clusters_s, clusters_t, tol=None):
    """Turn kernel truncation on for the state's next half-steps (and
    stopping tests): the voxels ``clusters_s``, ``clusters_t``
    (``numbaot._lazy.truncation_clusters`` of the source and target points,
    host arrays) and the tolerance ``tol`` (default
    ``_config.LAZY_TRUNCATION_TOL``): every truncated logsumexp is within
    ``tol`` of the untruncated one (plus the dtype's rounding).  Copies both
    clouds in voxel order to the device (O((n + m) d), once)."""
    tol = _config.LAZY_TRUNCATION_TOL if tol is None else tol
    st.trunc = _Truncation(st, clusters_s, clusters_t, tol)


def lazy_kept_fraction(st):
    """(source rows, target rows): the fraction of the n m point pairs in the
    voxel pairs that the last truncation pattern of each half-step kept
    (above ``_config.LAZY_TRUNCATION_MAX_KEPT`` the untruncated kernel ran
    instead); 1.0 without truncation or before any pattern."""
    return (1.0, 1.0) if st.trunc is None else tuple(st.trunc.kept)


def lazy_note_error(st, err):
    """The host loop's stopping error after :func:`lazy_row_lse` (float): a
    no-op here (a float32 problem computes in float32 throughout on the GPU;
    the CPU launcher of this name ends its float32 lanes near convergence)."""


def lazy_potentials(st):
    """(f, g) as host float64 arrays (n,), (m,)."""
    return st.f.copy_to_host().astype(np.float64), st.g.copy_to_host().astype(np.float64)


def lazy_outputs(st, like):
    """(f, g) as the caller's results: the device arrays, as the array kind
    of ``like`` (the caller's ``X_s``)."""
    return _dispatch.like_input(st.f, like), _dispatch.like_input(st.g, like)


def lazy_transport_cost(st):
    """sum_ij cost_ij P_ij of the current plan (float), the plan never formed."""
    return lazy_loss(st.Xs, st.Xt_t, st.f, st.g, st.c, st.metric)
