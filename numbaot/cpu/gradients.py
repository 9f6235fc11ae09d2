"""CPU launchers of ``numbaot.gradients``: the entropic plans with the value
<P, M> + reg sum P log P, the centred dual potentials, and the point-cloud
value and gradients from a lazy state (``numbaot.cpu.empirical.LazyState``).

Same names, signatures and returns as ``numbaot.cuda.gradients``.  Work
arrays are host float64 whatever the result dtype (the CPU kernels compute
in float64); :func:`result` casts them to the result dtype.  Per-problem
vectors are problem-major (n_problems, dim), as in ``numbaot.cpu.sinkhorn``.
"""
import numpy as np

from .. import _config
from . import empirical as cpu_empirical
from . import weighted_sum
from . import sinkhorn as cpu_sinkhorn

__all__ = ["log_scalings", "plan_and_value", "centred", "centred_support", "work_array",
           "result", "values_result", "cloud_value", "cloud_grads", "cloud_centred"]

#: the launcher contract shared with numbaot.cuda.gradients
LAUNCHERS = tuple(__all__)


def _through(x, dtype):
    """x rounded to ``dtype`` and back to float64 (the values of POT's log
    dict, which holds the scalings in the result dtype)."""
    return np.asarray(np.asarray(x, dtype=dtype), dtype=np.float64)


def log_scalings(st, dtype):
    """(log u, log v) of a finished Sinkhorn run (a ``numbaot.cpu.sinkhorn``
    ``KnoppState`` or ``LogState``), float64 (n_problems, dim_a),
    (n_problems, dim_b), C order.  The scalings are first rounded to the
    result ``dtype``: the CPU gradients have always been formed from the
    ``log`` dict of ``sinkhorn_knopp`` / ``sinkhorn_log``, which holds them
    in that dtype (this matters for float32 problems)."""
    if isinstance(st, cpu_sinkhorn.KnoppState):
        u, v = cpu_sinkhorn.knopp_scalings(st)
        with np.errstate(divide="ignore"):
            lu, lv = np.log(_through(u, dtype)), np.log(_through(v, dtype))
    else:
        lu, lv = (np.asarray(x, dtype=dtype) for x in cpu_sinkhorn.log_potentials(st))
        # that log dict also holds u = exp(log_u), v = exp(log_v) in the result
        # dtype: formed here for their NumPy warnings only (an "overflow
        # encountered in exp" the CPU path has always issued with them)
        np.exp(lu)
        np.exp(lv)
        lu, lv = np.asarray(lu, dtype=np.float64), np.asarray(lv, dtype=np.float64)
    return np.ascontiguousarray(lu), np.ascontiguousarray(lv)


def plan_and_value(M, c, lu, lv):
    """Plans exp(c M + lu_k 1^T + 1 lv_k^T) of every problem, float64
    (K, n, m), and the float64 array (K,) of sum_ij P_ij (lu_i + lv_j) =
    sum_i r_i lu_i + sum_j col_j lv_j with r, col the plan's marginals
    (0 log 0 = 0), i.e. (<P, M> + reg sum P log P) / reg.  Plans of at most
    ``_config.SMALL_MAX_ENTRIES_LOG`` entries in all (the one-call rule of
    the exp-bound solvers) are formed by the serial twin of the kernel (the
    same bits, no parallel region)."""
    Mf = np.ascontiguousarray(M, dtype=np.float64)
    K = lu.shape[0]
    plans = np.empty((K,) + Mf.shape)
    vals = np.empty(K)
    small = Mf.size * K <= _config.SMALL_MAX_ENTRIES_LOG
    gibbs = cpu_sinkhorn.gibbs_kernel_serial if small else cpu_sinkhorn.gibbs_kernel
    for k in range(K):
        plan = plans[k]
        gibbs(Mf, c, lu[k], lv[k], plan)
        vals[k] = weighted_sum(plan.sum(1), lu[k]) + weighted_sum(plan.sum(0), lv[k])
    return plans, vals


def _centred_row(x, scale):
    fin = np.isfinite(x)
    out = np.where(fin, x, 0.0)
    return scale * (out - out[fin].mean() if fin.any() else out)


def centred(x, scale, out=None, col0=0):
    """Column col0 + k of ``out`` (dim, >= K) = scale * (x[k] - the mean of
    its finite entries), the non-finite entries taken as 0 (x (K, dim)).
    Returns ``out``; without it a new float64 (dim, K) array."""
    if out is None and np.isfinite(x).all():
        # every row at once (each row's mean is its own pairwise sum / dim,
        # as x[k].mean(): the same values)
        return (scale * (x - np.add.reduce(x, axis=1, keepdims=True) / x.shape[1])).T
    rows = [_centred_row(x[k], scale) for k in range(x.shape[0])]
    if out is None:
        return np.stack(rows).T
    for k, row in enumerate(rows):
        out[:, col0 + k] = row
    return out


def _neg_lse(x, axis):
    """-log sum exp(x) along ``axis`` (max-shifted; -inf terms are 0)."""
    mx = np.max(x, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return -(mx + np.log(np.sum(np.exp(x - np.expand_dims(mx, axis)), axis=axis)))


def centred_support(M, c, lu, lv, za, zb, scale):
    """The gradients (ga (dim_a, K), gb (dim_b, K), float64) of problems
    with zero-weight bins (za (n_a, dim_a), zb (n_b, dim_b) bool, n = 1 or
    K): :func:`centred` over the bins of positive weight (the zero bins'
    log-scalings taken as -inf, so out of the mean), and at a zero bin
    scale * (t_i - that mean), t the soft c-transform of the other side's
    log-scalings: t_i = -log sum_j exp(c M_ij + lv_j) for a row, t_j = -log
    sum_i exp(c M_ij + lu_i) for a column (over its positive bins)."""
    lu = np.where(np.broadcast_to(za, lu.shape), -np.inf, lu)
    lv = np.where(np.broadcast_to(zb, lv.shape), -np.inf, lv)
    ga, gb = centred(lu, scale), centred(lv, scale)
    Mf = np.asarray(M, dtype=np.float64)
    for k in range(lu.shape[0]):
        rows = np.flatnonzero(za[min(k, za.shape[0] - 1)])
        if rows.size:
            ga[rows, k] += scale * _neg_lse(c * Mf[rows] + lv[k][None, :], axis=1)
        cols = np.flatnonzero(zb[min(k, zb.shape[0] - 1)])
        if cols.size:
            gb[cols, k] += scale * _neg_lse(c * Mf[:, cols] + lu[k][:, None], axis=0)
    return ga, gb


def work_array(shape, dtype):
    """An uninitialised work array for results of ``dtype`` (host float64)."""
    return np.empty(shape)


def result(x, dtype, like):
    """A work array as the caller's result: a new host array of ``dtype``
    (``like``, the caller's array, matters on the GPU only)."""
    return x.astype(dtype)


def values_result(vals, dtype, like):
    """A host vector of values (n_problems,) as the caller's result, of ``dtype``."""
    return np.asarray(vals, dtype=dtype)


# --------------------------------------------------------------------------
# point clouds (a finished numbaot.cpu.empirical.LazyState)
# --------------------------------------------------------------------------
def cloud_value(st):
    """The value <P, M> + reg sum P log P of the lazy plan (float), as
    reg (sum_i r_i f_i + sum_j col_j g_j), reg = -1 / c."""
    lse = np.empty(st.Xs.shape[0])
    cpu_empirical.lazy_lse(st.Xs, st.Xt_t, st.g, st.c, st.metric, lse)
    with np.errstate(invalid="ignore"):
        r = np.where(np.isneginf(st.f), 0.0, np.exp(st.f + lse))
    lse_c = np.empty(st.Xt.shape[0])
    cpu_empirical.lazy_lse(st.Xt, st.Xs_t, st.f, st.c, st.metric, lse_c)
    with np.errstate(invalid="ignore"):
        col = np.where(np.isneginf(st.g), 0.0, np.exp(st.g + lse_c))
    return (-1.0 / st.c) * (weighted_sum(r, st.f) + weighted_sum(col, st.g))


def cloud_grads(st, gX, gY):
    """gX[i] = sum_j P_ij grad_x cost(x_i, y_j) (n, d) and gY[j] = sum_i
    P_ij grad_y cost(x_i, y_j) (m, d), into the given work arrays."""
    cpu_empirical.lazy_grad(st.Xs, st.Xt_t, st.f, st.g, st.c, st.metric, gX)
    cpu_empirical.lazy_grad(st.Xt, st.Xs_t, st.g, st.f, st.c, st.metric, gY)


def _cloud_centred_side(x, logw, X, Yt, w, c, metric, scale, out, col):
    """out[:, col] = scale * (x - mean of x's finite entries), and at the
    zero-weight points (logw = -inf) scale * (t - that mean), t_i = -LSE_j(
    w_j + c cost(x_i, y_j)) the soft c-transform of the other side's final
    potential w, computed for those points only (O(n_zero m d))."""
    fin = np.isfinite(x)
    y = np.where(fin, x, 0.0)
    mean = y[fin].mean()
    out[:, col] = scale * (y - mean)
    zero = np.flatnonzero(np.isneginf(logw))
    if zero.size:
        lse = np.empty(zero.size)
        cpu_empirical.lazy_lse(np.ascontiguousarray(X[zero]), Yt, w, c, metric, lse)
        out[zero, col] = scale * (-lse - mean)


def cloud_centred(st, out_a, out_b, col):
    """Column ``col`` of out_a (n, K), out_b (m, K) = reg * (f - mean),
    reg * (g - mean), the means over the points of positive weight (the
    finite potentials); at a point of zero weight numbaot's convention
    (``numbaot.gradients``): reg * (t - mean), t the soft c-transform of the
    other side's final potential, the costs recomputed from the points.
    (As this path always has: NaN, with NumPy's warnings, when no potential
    is finite; the CUDA launcher gives 0.)"""
    scale = -1.0 / st.c
    _cloud_centred_side(st.f, st.log_a, st.Xs, st.Xt_t, st.g, st.c, st.metric, scale,
                        out_a, col)
    _cloud_centred_side(st.g, st.log_b, st.Xt, st.Xs_t, st.f, st.c, st.metric, scale,
                        out_b, col)
