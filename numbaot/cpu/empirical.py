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

from .._config import (COL_BLOCK, JIT_OPTIONS, LAZY_F32_ROW_FLOOR, LAZY_F32_SCALE_BUDGET,
                       LOG_F32_SWITCH_ERR, ROW_SUM_FLOOR)
from ._math import fast_exp_f32_ftz, fast_exp_ftz

__all__ = ["lazy_lse", "lazy_lse_f32", "lazy_loss", "lazy_block", "lazy_grad",
           "LazyState", "lazy_steps", "lazy_row_lse", "lazy_note_error", "lazy_potentials",
           "lazy_outputs", "lazy_transport_cost"]

#: the launcher contract shared with numbaot.cuda.empirical
LAUNCHERS = ("LazyState", "lazy_steps", "lazy_row_lse", "lazy_note_error", "lazy_potentials",
             "lazy_outputs", "lazy_transport_cost")

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)


@njit(**_SER)
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


@njit(**_SER)
def _row_lse_online(X, i, Yt, w, c, metric, buf):
    """LSE_j (w_j + c cost_ij) by blocks with a running (max, sum) pair
    (Viehmann's online logsumexp); the safe path."""
    m = Yt.shape[1]
    mx = -np.inf
    s = 0.0
    for j0 in range(0, m, COL_BLOCK):
        ln = min(COL_BLOCK, m - j0)
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
    return mx + math.log(s) if mx > -np.inf else -np.inf


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
            _costs(X, i, Yt, j0, ln, metric, buf)
            base = np.uint64(j0)
            for t in range(ln):
                s += fast_exp_ftz(w[base + np.uint64(t)] + c * buf[t] - W)
        if s > ROW_SUM_FLOOR:
            out[i] = W + math.log(s)
        else:
            out[i] = _row_lse_online(X, i, Yt, w, c, metric, buf)


@njit(**_SER)
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
            _exps_f32(X32, i, Yt32, j0, ln, metric, w32, c32, buf)
            # (a loop of its own: a float64 sum in the exponentials' loop makes
            # LLVM vectorise it four lanes wide, as
            # ``numbaot.cpu.sinkhorn._exp_store_sum_f32``)
            for t in range(ln):
                s += np.float64(buf[t])
        if s > LAZY_F32_ROW_FLOOR:
            out[i] = W + math.log(s)
        else:
            out[i] = _row_lse_online(X, i, Yt, w, c, metric, np.empty(COL_BLOCK))


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
            _costs(X, i, Yt, j0, ln, metric, buf)
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
        _costs(X, i, Yt, 0, m, metric, buf)
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
            _costs(X, i, Yt, j0, ln, metric, buf)
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


def lanes32_ok(st):
    """Whether the state's half-steps run in float32 lanes now
    (:func:`lazy_lse_f32`): a float32 problem not yet switched to float64,
    at a temperature with |c| cost_max (d + 4) <= ``LAZY_F32_SCALE_BUDGET``
    (the bound of the arguments' rounding, ``numbaot._config``)."""
    return st.lanes32 and abs(st.c) * st.cost_scale <= LAZY_F32_SCALE_BUDGET


def _half_step(st, X, Yt, X32, Yt32, w, out):
    if lanes32_ok(st):
        lazy_lse_f32(X, Yt, X32, Yt32, w, st.c, st.metric, out)
    else:
        lazy_lse(X, Yt, w, st.c, st.metric, out)


def lazy_steps(st, n_steps):
    """Run ``n_steps`` iterations in POT's order: f = log a - LSE_j(g_j + c
    cost_ij), then g = log b - LSE_i(f_i + c cost_ij) (the LSE over every
    process's rows with a reduction hook)."""
    for _ in range(n_steps):
        _half_step(st, st.Xs, st.Xt_t, st.Xs32, st.Xt_t32, st.g, st.lse_f)
        st.f = st.log_a - st.lse_f
        _half_step(st, st.Xt, st.Xs_t, st.Xt32, st.Xs_t32, st.f, st.lse_g)
        if st.reduction is not None:
            st.reduction.col_logsumexp(st.lse_g)
        st.g = st.log_b - st.lse_g


def lazy_row_lse(st):
    """(f, LSE_j(g_j + c cost_ij)) as host float64 arrays (n,), (n,): the
    row marginal of the current plan is exp(f + LSE) (POT's stopping test).
    Always in float64 lanes: the test measures the iterate exactly."""
    lazy_lse(st.Xs, st.Xt_t, st.g, st.c, st.metric, st.lse_f)
    return st.f, st.lse_f


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
