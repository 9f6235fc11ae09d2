"""CPU kernels for point clouds with costs computed on the fly ("lazy" costs).

The cost between source point x_i and target point y_j (rows of ``X`` (n, d)
and columns of ``Yt`` (d, m), float64, C order) is recomputed inside the
reductions, so memory stays O((n + m) d): never an (n, m) matrix.

metric 0: squared Euclidean ||x_i - y_j||^2; metric 1: Euclidean ||x_i - y_j||.

``lazy_lse`` is the log-domain Sinkhorn half-step of Viehmann's online
logsumexp (arXiv:1907.01729, sec. 4) in blocks: a block of COL_BLOCK costs is
formed (vectorised over j, the point dimension d in the outer loop), its
maximum taken, then its exponentials summed with a vectorisable polynomial
exp and merged into the running (max, sum) pair.

The launchers at the end (``LazyState``, ``lazy_steps``, ...) have the same
names, signatures and returns as those of ``numbaot.cuda.empirical``; the
host loop that drives them is ``numbaot._lazy.lazy_solve``.
"""
import math

import numpy as np
from numba import njit, prange

from .. import _config
from .._config import INNER as _INNER
from .._config import (COL_BLOCK, JIT_OPTIONS, LAZY_F32_ROW_FLOOR, LAZY_F32_SCALE_BUDGET,
                       LOG_F32_SWITCH_ERR, ROW_SUM_FLOOR)
from . import serial_twin
from ._math import fast_exp_f32_ftz, fast_exp_ftz

__all__ = ["cost_matrix", "cost_matrix_serial", "lazy_lse", "lazy_lse_f32", "lazy_lse_trunc",
           "trunc_pattern", "voxel_wmax", "lazy_loss", "lazy_block", "lazy_grad",
           "LazyState", "lazy_steps", "lazy_row_lse", "lazy_truncate", "lazy_kept_fraction",
           "lazy_note_error", "lazy_potentials", "lazy_outputs", "lazy_transport_cost"]

#: the launcher contract shared with numbaot.cuda.empirical
LAUNCHERS = ("LazyState", "lazy_steps", "lazy_row_lse", "lazy_truncate", "lazy_kept_fraction",
             "lazy_note_error", "lazy_potentials", "lazy_outputs", "lazy_transport_cost")

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)


@njit(**_SER, **_INNER)
def _costs(X, i, Yt, j0, ln, metric, buf):
    """buf[:ln] = cost(x_i, y_j) for j in [j0, j0 + ln) (unsigned offsets:
    a signed, non-constant start keeps Numba's wrap-around and blocks SIMD)."""
    d = X.shape[1]
    base = np.uint64(j0)
    xk = X[i, 0]  # the first coordinate stored, not added to zeros (same bits)
    for t in range(ln):
        diff = xk - Yt[0, base + np.uint64(t)]
        buf[t] = diff * diff
    for k in range(1, d):
        xk = X[i, k]
        for t in range(ln):
            diff = xk - Yt[k, base + np.uint64(t)]
            buf[t] += diff * diff
    if metric == 1:
        for t in range(ln):
            buf[t] = math.sqrt(buf[t])


@njit(**_PAR)
def cost_matrix(X, Yt, metric, out):
    """out[i, j] = cost(x_i, y_j), the dense matrix of the costs above
    (``numbaot.dist`` for few features), rows in parallel.

    X (n, d) and Yt (d, m), C order, of out's dtype (float32 or float64); the
    differences are squared and summed in that dtype, feature by feature
    (exact zeros where x_i == y_j, unlike |x|^2 + |y|^2 - 2 x.y)."""
    m = Yt.shape[1]
    for i in prange(X.shape[0]):
        _costs(X, np.uint64(i), Yt, np.int64(0), m, metric, out[i])


#: the same on the calling thread (small matrices: no parallel region)
cost_matrix_serial = serial_twin(cost_matrix)


@njit(**_SER, **_INNER)
def _range_lse_online(X, i, Yt, w, c, metric, lo, hi, buf, mx, s):
    """Merge the terms w_j + c cost_ij, j in [lo, hi), into the running
    (max, scaled sum) pair (mx, s) of Viehmann's online logsumexp, by blocks;
    returns the new pair."""
    for j0 in range(lo, hi, COL_BLOCK):
        ln = min(COL_BLOCK, hi - j0)
        _costs(X, i, Yt, j0, ln, metric, buf)
        bm = -np.inf
        for t in range(ln):
            buf[t] = w[j0 + t] + c * buf[t]
            bm = max(bm, buf[t])
        if bm == -np.inf:
            continue
        bs = 0.0
        for t in range(ln):
            bs += fast_exp_ftz(buf[t] - bm)
        if bm > mx:
            s = s * fast_exp_ftz(mx - bm) + bs
            mx = bm
        else:
            s += bs * fast_exp_ftz(bm - mx)
    return mx, s


@njit(**_SER, **_INNER)
def _row_lse_online(X, i, Yt, w, c, metric, buf):
    """LSE_j (w_j + c cost_ij) by blocks with a running (max, sum) pair
    (Viehmann's online logsumexp); the safe path."""
    mx, s = _range_lse_online(X, i, Yt, w, c, metric, np.int64(0), Yt.shape[1], buf, -np.inf,
                              0.0)
    return mx + math.log(s) if mx > -np.inf else -np.inf


# The prange kernels pass their row index to the helpers as np.uint64(i):
# Numba types a prange body twice (the loop as a range, int64 index, then
# the outlined parallel body, uint64 index), and each index type compiled
# every helper once more (issue 23's duplicate specialisations).
@njit(**_PAR)
def lazy_lse(X, Yt, w, c, metric, out):
    """out[i] = LSE_j (w[j] + c * cost(x_i, y_j)), c = -1/reg; -inf entries of
    w (zero weights) contribute nothing.

    Costs are >= 0 and c < 0, so W = max_j w_j bounds every term: one pass
    sums exp(w_j + c cost_ij - W) with no max pass and no overflow; a row
    whose sum underflows (below ROW_SUM_FLOOR) is redone by the online pass.
    """
    n = X.shape[0]
    m = Yt.shape[1]
    W = -np.inf
    for j in range(m):
        W = max(W, w[j])
    for i in prange(n):
        buf = np.empty(COL_BLOCK)
        s = 0.0
        for j0 in range(0, m, COL_BLOCK):
            ln = min(COL_BLOCK, m - j0)
            _costs(X, np.uint64(i), Yt, j0, ln, metric, buf)
            base = np.uint64(j0)
            for t in range(ln):
                s += fast_exp_ftz(w[base + np.uint64(t)] + c * buf[t] - W)
        if s > ROW_SUM_FLOOR:
            out[i] = W + math.log(s)
        else:
            out[i] = _row_lse_online(X, np.uint64(i), Yt, w, c, metric, buf)


@njit(**_SER, **_INNER)
def _exps_f32(X32, i, Yt32, j0, ln, metric, w32, c32, buf):
    """buf[:ln] = exp(w32_j + c32 cost(x_i, y_j)) for j in [j0, j0 + ln), in
    float32 (the costs and the exponentials of a block in one function: 7 %
    faster than the same loops split between the kernel and ``_costs``,
    measured at 10^4 points in 3-D)."""
    _costs(X32, i, Yt32, j0, ln, metric, buf)
    base = np.uint64(j0)
    for t in range(ln):
        buf[t] = fast_exp_f32_ftz(w32[base + np.uint64(t)] + c32 * buf[t])


@njit(**_PAR)
def lazy_lse_f32(X, Yt, X32, Yt32, w, c, metric, out):
    """``lazy_lse`` in float32 lanes (eight per AVX2 register where float64
    has four): the costs from float32 copies ``X32`` (n, d), ``Yt32`` (d, m)
    of the points, the exponentials exp(float32(w_j - W) + float32(c)
    cost_ij) in float32 (``fast_exp_f32_ftz``), each block's exponentials
    summed in float64.  W = max_j w_j as in ``lazy_lse``.  A row whose sum
    falls below ``_config.LAZY_F32_ROW_FLOOR`` (float32 exponentials flush
    below e^-87.3) is redone in float64 by the online pass on ``X``, ``Yt``
    (float64).  The caller keeps the argument's rounding within float32
    tolerances (``_config.LAZY_F32_SCALE_BUDGET``, :func:`lanes32_ok`)."""
    n = X.shape[0]
    m = Yt.shape[1]
    W = -np.inf
    for j in range(m):
        W = max(W, w[j])
    w32 = np.empty(m, np.float32)
    for j in range(m):
        w32[j] = np.float32(w[j] - W)
    c32 = np.float32(c)
    for i in prange(n):
        buf = np.empty(COL_BLOCK, np.float32)
        s = 0.0
        for j0 in range(0, m, COL_BLOCK):
            ln = min(COL_BLOCK, m - j0)
            _exps_f32(X32, np.uint64(i), Yt32, j0, ln, metric, w32, c32, buf)
            # (a loop of its own: a float64 sum in the exponentials' loop makes
            # LLVM vectorise it four lanes wide, as
            # ``numbaot.cpu.sinkhorn._exp_store_sum_f32``)
            for t in range(ln):
                s += np.float64(buf[t])
        if s > LAZY_F32_ROW_FLOOR:
            out[i] = W + math.log(s)
        else:
            out[i] = _row_lse_online(X, np.uint64(i), Yt, w, c, metric, np.empty(COL_BLOCK))


# --------------------------------------------------------------------------
# Kernel truncation (the multiscale path): voxel pairs skipped by bounds
# --------------------------------------------------------------------------
@njit(**_PAR)
def voxel_wmax(wp, col_ptr, wmax, jstar):
    """wmax[J] = max of wp over voxel J's columns [col_ptr[J], col_ptr[J + 1])
    and jstar[J] the first column where it is reached (-inf and the voxel's
    first column when every w there is -inf)."""
    for J in prange(col_ptr.size - 1):
        mx = -np.inf
        at = col_ptr[J]
        for j in range(col_ptr[J], col_ptr[J + 1]):
            if wp[j] > mx:
                mx = wp[j]
                at = j
        wmax[J] = mx
        jstar[J] = at


@njit(**_SER, **_INNER)
def _voxel_bounds(I, Cr, Rr, Cc, Rc, Pct, wmax, jstar, c, metric, U):
    """For row voxel I against every column voxel J: U[J] = wmax_J + c
    dmin_IJ^p, an upper bound of every term w_j + c cost(x_i, y_j) with x_i
    in I, y_j in J (dmin = |centre_I - centre_J| - r_I - r_J, at least 0;
    p = 2 for metric 0, 1 for metric 1; c < 0).  Returns L, a lower bound of
    the largest term of every row of I: max_J wmax_J + c (|centre_I -
    y_jstar(J)| + r_I)^p."""
    d = Cr.shape[1]
    L = -np.inf
    for J in range(Cc.shape[0]):
        if wmax[J] == -np.inf:
            U[J] = -np.inf
            continue
        dc = 0.0
        dy = 0.0
        js = jstar[J]
        for k in range(d):
            e = Cr[I, k] - Cc[J, k]
            dc += e * e
            e = Cr[I, k] - Pct[k, js]
            dy += e * e
        dmin = max(math.sqrt(dc) - Rr[I] - Rc[J], 0.0)
        dmax = math.sqrt(dy) + Rr[I]
        if metric == 0:
            dmin *= dmin
            dmax *= dmax
        U[J] = wmax[J] + c * dmin
        L = max(L, wmax[J] + c * dmax)
    return L


@njit(**_PAR)
def trunc_pattern(Cr, Rr, Cc, Rc, Pct, col_ptr, wmax, jstar, c, metric, tau, fill,
                  n_kept, jptr, jlist):
    """The voxel pairs a truncated half-step reads.  Row voxels: centres Cr
    (Kr, d), radii Rr (Kr,); column voxels: Cc (Kc, d), Rc (Kc,), their points
    Pct (d, m) in voxel order (voxel J = columns [col_ptr[J], col_ptr[J + 1])),
    ``voxel_wmax``'s wmax, jstar.  Row voxel I keeps the column voxels J with
    U_IJ >= L_I - tau (:func:`_voxel_bounds`): the others hold no term within
    tau of any of its rows' largest.

    fill False: n_kept[0, I] = the number of column voxels I keeps,
    n_kept[1, I] = the columns they hold (n_kept (2, Kr): the kept fraction
    from Kr numbers).  fill True: those voxels, in increasing order, as
    jlist[jptr[I]:jptr[I + 1]] (jptr from the counts)."""
    Kc = Cc.shape[0]
    for I in prange(Cr.shape[0]):
        U = np.empty(Kc)
        cut = _voxel_bounds(I, Cr, Rr, Cc, Rc, Pct, wmax, jstar, c, metric, U) - tau
        q = jptr[I] if fill else 0
        cols = 0
        for J in range(Kc):
            if U[J] >= cut and U[J] > -np.inf:
                if fill:
                    jlist[q] = J
                q += 1
                cols += col_ptr[J + 1] - col_ptr[J]
        if not fill:
            n_kept[0, I] = q
            n_kept[1, I] = cols


@njit(**_SER, **_INNER)
def _point_voxel_bounds(Pr, i, candC, candY, candR, candW, nq, metric, c, ub, lb):
    """For row point i against its row voxel's nq candidate voxels (their
    centres candC (d, nq), largest-w points candY (d, nq), radii candR
    (nq,), largest w candW (nq,)): ub[q] = candW + c max(|x_i - centre| -
    r, 0)^p bounds every term of the voxel from above, lb[q] = candW + c
    |x_i - y|^p is one of its terms.  Coordinates in the outer loop,
    candidates in the inner one (SIMD), as :func:`_costs`."""
    xk = Pr[i, 0]
    for q in range(nq):
        e = xk - candC[0, q]
        ub[q] = e * e
        e = xk - candY[0, q]
        lb[q] = e * e
    for k in range(1, Pr.shape[1]):
        xk = Pr[i, k]
        for q in range(nq):
            e = xk - candC[k, q]
            ub[q] += e * e
            e = xk - candY[k, q]
            lb[q] += e * e
    for q in range(nq):
        dmin = max(math.sqrt(ub[q]) - candR[q], 0.0)
        if metric == 0:
            ub[q] = candW[q] + c * (dmin * dmin)
            lb[q] = candW[q] + c * lb[q]
        else:
            ub[q] = candW[q] + c * dmin
            lb[q] = candW[q] + c * math.sqrt(lb[q])


@njit(**_SER, **_INNER)
def _trunc_row_lse(Pr, i, Pct, wp, c, metric, tau, col_ptr, cand, nq, candC, candY, candR,
                   candW, ub, lb, buf):
    """Row i's logsumexp over the candidate voxels cand[:nq] of its row
    voxel that its own bounds keep (see :func:`lazy_lse_trunc`)."""
    _point_voxel_bounds(Pr, i, candC, candY, candR, candW, nq, metric, c, ub, lb)
    L = -np.inf
    for q in range(nq):
        L = max(L, lb[q])
    cut = L - tau
    S = -np.inf
    for q in range(nq):
        if ub[q] >= cut:
            S = max(S, ub[q])
    s = 0.0
    lo = 0
    hi = 0  # the current run of adjacent kept voxels, [lo, hi)
    for q in range(nq + 1):
        if q < nq and ub[q] >= cut:
            J = cand[q]
            if col_ptr[J] == hi and hi > lo:
                hi = col_ptr[J + 1]
                continue
            nlo, nhi = col_ptr[J], col_ptr[J + 1]
        else:
            nlo, nhi = 0, 0
        for j0 in range(lo, hi, COL_BLOCK):  # the run ends: sum it
            ln = min(COL_BLOCK, hi - j0)
            _costs(Pr, i, Pct, j0, ln, metric, buf)
            base = np.uint64(j0)
            for t in range(ln):
                s += fast_exp_ftz(wp[base + np.uint64(t)] + c * buf[t] - S)
        lo, hi = nlo, nhi
    if s > ROW_SUM_FLOOR:
        return S + math.log(s)
    mx = -np.inf
    acc = 0.0
    for q in range(nq):
        if ub[q] >= cut:
            J = cand[q]
            mx, acc = _range_lse_online(Pr, i, Pct, wp, c, metric, col_ptr[J], col_ptr[J + 1],
                                        buf, mx, acc)
    return mx + math.log(acc) if mx > -np.inf else -np.inf


@njit(**_PAR)
def lazy_lse_trunc(Pr, Pct, wp, c, metric, tau, row_ptr, Cc, Rc, col_ptr, wmax, jstar, jptr,
                   jlist, row_perm, out):
    """``lazy_lse`` on the voxel pairs of ``trunc_pattern``, each row refined
    by its own bounds: rows Pr (n, d) and columns Pct (d, m) in voxel order
    (row voxel I = rows [row_ptr[I], row_ptr[I + 1])), wp (m,) the column
    weights in that order.  Per row voxel I (in parallel), its candidate
    voxels J = jlist[jptr[I]:jptr[I + 1]] are gathered (centres Cc, radii
    Rc, ``voxel_wmax``'s wmax and the columns jstar where it is reached);
    then each row i of I bounds each candidate by :func:`_point_voxel_bounds`
    and sums exp(wp_j + c cost_ij - S) over the voxels with U >= L - tau (L:
    the largest of its lower bounds, a term of the row; S: the largest U
    kept, a bound of every term: no max pass, no overflow), adjacent voxels
    read as one range; a sum below ROW_SUM_FLOOR is redone by the online
    pass over the same voxels.  out[row_perm[i]] = the logsumexp (out in the
    caller's point order).  The terms skipped are each below L - tau: at
    most m e^-tau of the row's sum together.  Memory: the candidates of one
    row voxel per thread (gathered per voxel rather than for all voxels at
    once: 344 MB more at 10^5 points, eps 1e-3, measured)."""
    d = Pr.shape[1]
    for I in prange(row_ptr.size - 1):
        q0 = jptr[I]
        nq = jptr[I + 1] - q0
        cand = jlist[q0:q0 + nq]
        candC = np.empty((d, max(nq, 1)))
        candY = np.empty((d, max(nq, 1)))
        candR = np.empty(max(nq, 1))
        candW = np.empty(max(nq, 1))
        for q in range(nq):
            J = cand[q]
            for k in range(d):
                candC[k, q] = Cc[J, k]
                candY[k, q] = Pct[k, jstar[J]]
            candR[q] = Rc[J]
            candW[q] = wmax[J]
        ub = np.empty(max(nq, 1))
        lb = np.empty(max(nq, 1))
        buf = np.empty(COL_BLOCK)
        for i in range(row_ptr[I], row_ptr[I + 1]):
            out[row_perm[i]] = _trunc_row_lse(Pr, np.uint64(i), Pct, wp, c, metric, tau, col_ptr,
                                              cand, nq, candC, candY, candR, candW, ub, lb, buf)


@njit(**_PAR)
def lazy_loss(X, Yt, f, g, c, metric):
    """sum_ij cost_ij exp(f_i + g_j + c cost_ij): the transport cost of the
    plan of log-scalings (f, g), row partials summed in row order."""
    n = X.shape[0]
    m = Yt.shape[1]
    part = np.zeros(n)
    for i in prange(n):
        if f[i] == -np.inf:
            continue
        buf = np.empty(COL_BLOCK)
        acc = 0.0
        for j0 in range(0, m, COL_BLOCK):
            ln = min(COL_BLOCK, m - j0)
            _costs(X, np.uint64(i), Yt, j0, ln, metric, buf)
            for t in range(ln):
                acc += buf[t] * fast_exp_ftz(f[i] + g[j0 + t] + c * buf[t])
        part[i] = acc
    tot = 0.0
    for i in range(n):
        tot += part[i]
    return tot


@njit(**_PAR)
def lazy_block(X, Yt, f, g, c, metric, out):
    """out[i, j] = exp(f_i + g_j + c cost(x_i, y_j)): a block of the plan."""
    n = X.shape[0]
    m = Yt.shape[1]
    for i in prange(n):
        buf = np.empty(m)
        _costs(X, np.uint64(i), Yt, np.int64(0), m, metric, buf)
        for j in range(m):
            out[i, j] = math.exp(f[i] + g[j] + c * buf[j])


@njit(**_PAR)
def lazy_grad(X, Yt, f, g, c, metric, out):
    """out[i, :] = sum_j P_ij grad_x cost(x_i, y_j) with
    P_ij = exp(f_i + g_j + c cost_ij): the gradient of the entropic OT value
    w.r.t. the source points (chain rule through the cost).  sqeuclidean:
    grad = 2 (x_i - y_j); euclidean: (x_i - y_j) / ||x_i - y_j|| (0 when the
    points coincide)."""
    n, d = X.shape
    m = Yt.shape[1]
    for i in prange(n):
        buf = np.empty(COL_BLOCK)
        wts = np.empty(COL_BLOCK)
        acc = np.zeros(d)
        if f[i] == -np.inf:
            out[i, :] = 0.0
            continue
        for j0 in range(0, m, COL_BLOCK):
            ln = min(COL_BLOCK, m - j0)
            _costs(X, np.uint64(i), Yt, j0, ln, metric, buf)
            base = np.uint64(j0)
            for t in range(ln):
                p = fast_exp_ftz(f[i] + g[base + np.uint64(t)] + c * buf[t])
                if metric == 1:
                    wts[t] = p / buf[t] if buf[t] > 0.0 else 0.0
                else:
                    wts[t] = 2.0 * p
            for k in range(d):
                xk = X[i, k]
                s = 0.0
                for t in range(ln):
                    s += wts[t] * (xk - Yt[k, base + np.uint64(t)])
                acc[k] += s
        for k in range(d):
            out[i, k] = acc[k]


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cuda.empirical
# --------------------------------------------------------------------------
class LazyState:
    """State of a lazy log-domain Sinkhorn run on the CPU (float64 inside;
    a float32 problem's half-steps in float32 lanes, :func:`lanes32_ok`).

    Parameters
    ----------
    Xs, Xt : ndarray (n, d), (m, d), float64, C order
        Source and target points.
    log_a, log_b : ndarray (n,), (m,), float64
        log of the weights (-inf for zero weights).
    f, g : ndarray (n,), (m,), float64
        Initial log-scalings (dual potentials / reg); the state takes ownership.
    c : float
        -1 / reg.
    metric : int
        Cost code (0: squared Euclidean, 1: Euclidean).
    dtype : numpy dtype
        Dtype of the results.
    reduction : object, optional
        Column-reduction hook for source points split across processes
        (``numbaot.distributed``), as for ``numbaot.cpu.sinkhorn.LogState``:
        ``col_logsumexp(x)`` replaces the column logsumexps ``x`` (dim_b,) of
        this process's rows by those over every process's rows, in place.

    Attributes read by ``numbaot.cpu.gradients``: ``Xs``, ``Xt``, ``Xs_t``,
    ``Xt_t`` (the points, and transposed (d, n), (d, m)), ``f``, ``g`` (the
    current log-scalings), ``c``, ``metric``, ``dtype``.
    """

    def __init__(self, Xs, Xt, log_a, log_b, f, g, c, metric, dtype, reduction=None):
        from .._lazy import max_diameter

        self.reduction = reduction
        self.Xs, self.Xt = Xs, Xt
        self.Xs_t, self.Xt_t = np.ascontiguousarray(Xs.T), np.ascontiguousarray(Xt.T)
        self.log_a, self.log_b, self.f, self.g = log_a, log_b, f, g
        self.c, self.metric, self.dtype = c, metric, dtype
        self.lse_f = np.empty(Xs.shape[0])
        self.lse_g = np.empty(Xt.shape[0])
        # float32 lanes for a float32 problem (not with a reduction hook: the
        # processes' column sums must agree to float64 rounding), while the
        # temperature allows (:func:`lanes32_ok`) and until the stopping
        # error stops falling (:func:`lazy_note_error`)
        self.lanes32 = np.dtype(dtype) == np.float32 and reduction is None
        self.last_err = np.inf
        self.cost_scale = np.inf
        self.Xs32 = self.Xt32 = self.Xs_t32 = self.Xt_t32 = None
        if self.lanes32:
            diam = max_diameter(Xs, Xt)
            self.cost_scale = (diam ** 2 if metric == 0 else diam) * (Xs.shape[1] + 4)
            self.Xs32, self.Xt32 = Xs.astype(np.float32), Xt.astype(np.float32)
            self.Xs_t32, self.Xt_t32 = self.Xs_t.astype(np.float32), self.Xt_t.astype(np.float32)
        self.trunc = None  # kernel truncation (:func:`lazy_truncate`)


def lanes32_ok(st):
    """Whether the state's half-steps run in float32 lanes now
    (:func:`lazy_lse_f32`): a float32 problem not yet switched to float64,
    at a temperature with |c| cost_max (d + 4) <= ``LAZY_F32_SCALE_BUDGET``
    (the bound of the arguments' rounding, ``numbaot._config``)."""
    return st.lanes32 and abs(st.c) * st.cost_scale <= LAZY_F32_SCALE_BUDGET


class _Truncation:
    """Both clouds in voxel order for the truncated half-steps
    (:func:`lazy_truncate`): ``cl[k]``, ``P[k]`` (points in voxel order),
    ``Pt[k]`` (the same transposed), ``tau[k]`` for the half-step whose rows
    are cloud k (0: source, 1: target), ``kept[k]`` the fraction of pairs
    its last pattern kept."""

    def __init__(self, Xs, Xt, cs, ct, tol):
        self.cl = (cs, ct)
        self.P = (np.ascontiguousarray(Xs[cs.perm]), np.ascontiguousarray(Xt[ct.perm]))
        self.Pt = tuple(np.ascontiguousarray(P.T) for P in self.P)
        self.tau = (math.log(Xt.shape[0] / tol), math.log(Xs.shape[0] / tol))
        self.kept = [1.0, 1.0]
        self.full_at = [None, None]  # the temperature c of a side's last fallback


def _truncated_lse(tr, side, w, c, metric, out):
    """out = the half-step's logsumexps (rows: cloud ``side``, columns the
    other, column weights w) on the voxel pairs that bounds cannot rule out
    (:func:`trunc_pattern`, :func:`lazy_lse_trunc`).  Returns False, out
    untouched, when the pattern keeps more than
    ``_config.LAZY_TRUNCATION_MAX_KEPT`` of the pairs (read at each call);
    the later half-steps of that side at the same temperature then skip the
    pattern (it is recomputed once the temperature changes)."""
    if tr.full_at[side] == c:  # this temperature's pattern kept too much: skip it
        return False
    rc, cc = tr.cl[side], tr.cl[1 - side]
    Kr, Kc = rc.center.shape[0], cc.center.shape[0]
    wp = w[cc.perm]
    wmax, jstar = np.empty(Kc), np.empty(Kc, np.int64)
    voxel_wmax(wp, cc.ptr, wmax, jstar)
    n_kept = np.empty((2, Kr), np.int64)
    none = np.empty(0, np.int64)
    args = (rc.center, rc.radius, cc.center, cc.radius, tr.Pt[1 - side], cc.ptr, wmax, jstar,
            c, metric, tr.tau[side])
    trunc_pattern(*args, False, n_kept, none, none)
    n, m = rc.perm.size, cc.perm.size
    tr.kept[side] = float(np.dot(np.diff(rc.ptr), n_kept[1])) / (n * m)
    if tr.kept[side] > _config.LAZY_TRUNCATION_MAX_KEPT:
        tr.full_at[side] = c  # no pattern again at this temperature
        return False
    jptr = np.zeros(Kr + 1, np.int64)
    np.cumsum(n_kept[0], out=jptr[1:])
    jlist = np.empty(jptr[-1], np.int64)
    trunc_pattern(*args, True, n_kept, jptr, jlist)
    lazy_lse_trunc(tr.P[side], tr.Pt[1 - side], wp, c, metric, tr.tau[side], rc.ptr,
                   cc.center, cc.radius, cc.ptr, wmax, jstar, jptr, jlist, rc.perm, out)
    return True


def _half_step(st, side, w, out):
    """out = LSE over the other cloud of (w_j + c cost) for the rows of
    cloud ``side`` (0: source, 1: target): float32 lanes where
    :func:`lanes32_ok`, else truncated where :func:`lazy_truncate` set it up
    and the pattern skips enough, else ``lazy_lse``."""
    X, Yt, X32, Yt32 = ((st.Xs, st.Xt_t, st.Xs32, st.Xt_t32) if side == 0
                        else (st.Xt, st.Xs_t, st.Xt32, st.Xs_t32))
    if lanes32_ok(st):
        lazy_lse_f32(X, Yt, X32, Yt32, w, st.c, st.metric, out)
    elif st.trunc is None or not _truncated_lse(st.trunc, side, w, st.c, st.metric, out):
        lazy_lse(X, Yt, w, st.c, st.metric, out)


def lazy_steps(st, n_steps):
    """Run ``n_steps`` iterations in POT's order: f = log a - LSE_j(g_j + c
    cost_ij), then g = log b - LSE_i(f_i + c cost_ij) (the LSE over every
    process's rows with a reduction hook)."""
    for _ in range(n_steps):
        _half_step(st, 0, st.g, st.lse_f)
        st.f = st.log_a - st.lse_f
        _half_step(st, 1, st.f, st.lse_g)
        if st.reduction is not None:
            st.reduction.col_logsumexp(st.lse_g)
        st.g = st.log_b - st.lse_g


def lazy_row_lse(st):
    """(f, LSE_j(g_j + c cost_ij)) as host float64 arrays (n,), (n,): the
    row marginal of the current plan is exp(f + LSE) (POT's stopping test).
    Always in float64 lanes: the test measures the iterate exactly (within
    ``LAZY_TRUNCATION_TOL`` when truncated)."""
    if st.trunc is None or not _truncated_lse(st.trunc, 0, st.g, st.c, st.metric, st.lse_f):
        lazy_lse(st.Xs, st.Xt_t, st.g, st.c, st.metric, st.lse_f)
    return st.f, st.lse_f


def lazy_truncate(st, clusters_s, clusters_t, tol=None):
    """Turn kernel truncation on for the state's next half-steps (and
    stopping tests): the voxels ``clusters_s``, ``clusters_t``
    (``numbaot._lazy.truncation_clusters`` of the source and target points)
    and the tolerance ``tol`` (default ``_config.LAZY_TRUNCATION_TOL``):
    every truncated logsumexp is within ``tol`` of the untruncated one.
    Float32 lanes, where they run, take precedence (large eps, where nothing
    would be skipped).  Not with a reduction hook (the processes would need
    each other's voxels)."""
    if st.reduction is not None:
        raise ValueError("kernel truncation needs every source point in one process")
    tol = _config.LAZY_TRUNCATION_TOL if tol is None else tol
    st.trunc = _Truncation(st.Xs, st.Xt, clusters_s, clusters_t, tol)


def lazy_kept_fraction(st):
    """(source rows, target rows): the fraction of the n m point pairs in the
    voxel pairs that the last truncation pattern of each half-step kept
    (above ``_config.LAZY_TRUNCATION_MAX_KEPT`` the untruncated kernel ran instead);
    1.0 without truncation or before any pattern."""
    return (1.0, 1.0) if st.trunc is None else tuple(st.trunc.kept)


def lazy_note_error(st, err):
    """Take note of the stopping error ``err`` (float) that the host loop
    computed from :func:`lazy_row_lse`: a float32 problem leaves its float32
    lanes for good once ``err`` is at most ``_config.LOG_F32_SWITCH_ERR`` or
    fell by less than 10 % since the previous test (the lanes' rounding
    puts a floor of 1e-8 to 1e-6 under it), so that POT's stopThr (1e-9 by
    default) is reached as with float64 arithmetic, as the dense log domain
    does (``numbaot.cpu.sinkhorn.log_errors``)."""
    if st.lanes32:
        if not (err > LOG_F32_SWITCH_ERR and err < 0.9 * st.last_err):
            st.lanes32 = False
        st.last_err = err


def lazy_potentials(st):
    """(f, g) as host float64 arrays (n,), (m,)."""
    return st.f, st.g


def lazy_outputs(st, like):
    """(f, g) as the caller's results: new host arrays of the result dtype
    (``like``, the caller's ``X_s``, matters on the GPU only)."""
    return st.f.astype(st.dtype), st.g.astype(st.dtype)


def lazy_transport_cost(st):
    """sum_ij cost_ij P_ij of the current plan (float), the plan never formed."""
    return lazy_loss(st.Xs, st.Xt_t, st.f, st.g, st.c, st.metric)
