r"""Entropic OT values with their gradients, without an autodiff framework.

Both calls return ``(value, grad)`` for the entropic OT problem with the
Shannon-entropy regulariser (Cuturi 2013; Peyre & Cuturi 2019, eq. 4.2)

    value(a, b, M) = min_{P >= 0, P 1 = a, P^T 1 = b} <P, M>_F + reg * sum_ij P_ij log P_ij,

evaluated at the plan P = exp(log_u_i + log_v_j - M_ij / reg) that the
Sinkhorn iterations return, so ``value = <P, M> + reg * sum P log P`` exactly
(computed as reg * (<P 1, log_u> + <P^T 1, log_v>), no (n, m) temporary).
At convergence the envelope theorem gives its exact gradient:

* d value / d M = P (the plan);
* d value / d a = reg * (log_u - mean(log_u)), d value / d b = reg * (log_v -
  mean(log_v)): the dual potentials, centred as POT's
  ``ot.solve(..., grad='envelope')`` does.  value is only defined for
  histograms of equal mass, so only mass-preserving directions (sum da = 0)
  are meaningful; along them the centring changes nothing;
* for point clouds, d value / d x_i = sum_j P_ij grad_x cost(x_i, y_j) (chain
  rule through the cost; for 'euclidean' the subgradient 0 at coincident
  points), and likewise for y_j.

Note: POT's ``ot.solve`` reports value + reg * KL(P | a b^T) but the entropic
potentials as gradient; for a, b these are the gradient of the entropy form
above, which is why numbaot returns that value.  Before convergence (few
iterations, large ``stopThr``) the returned gradient is that of the
converged problem evaluated at the current iterate, not the derivative of
the truncated iteration.
"""
import numpy as np

from . import _checks, _dispatch
from .bregman import sinkhorn_knopp, sinkhorn_log
from .cpu import empirical as _ke
from .cpu import sinkhorn as _ks
from .empirical import _LAZY_METRICS, _lazy

__all__ = ["sinkhorn2_value_and_grad", "empirical_sinkhorn2_value_and_grad"]


def _xlogy_sum(w, logw):
    """sum_i w_i * logw_i with 0 * (-inf) = 0."""
    mask = w > 0
    return float(np.sum(w[mask] * logw[mask]))


def sinkhorn2_value_and_grad(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
                             verbose=False, warn=False, warmstart=None, **kwargs):
    r"""Entropic OT value and its gradient w.r.t. ``a``, ``b`` and ``M``.

    See the module docstring for the exact objective and the envelope
    gradients.  Arguments as :func:`numbaot.sinkhorn2` (whose solvers run the
    iterations).

    Parameters
    ----------
    a : array-like, shape (dim_a,) or (dim_a, n_hists)
        Source weights (empty = uniform; 2-D = paired batch with 2-D ``b``).
    b : array-like, shape (dim_b,) or (dim_b, n_hists)
        Target weights (2-D: n_hists problems sharing ``M``).
    M : array-like, shape (dim_a, dim_b), float
        Cost matrix.
    reg : float
        Entropic regularisation (> 0), units of ``M``.
    method : {'sinkhorn', 'sinkhorn_log'}, default 'sinkhorn'
        Solver (multiplicative or log domain; use 'sinkhorn_log' for small reg).
    numItermax, stopThr, verbose, warn, warmstart, **kwargs
        As :func:`numbaot.sinkhorn2` (``warn`` defaults to False as there).

    Returns
    -------
    value : float, or ndarray (n_hists,) for a batch
        <P, M> + reg * sum P log P at the returned plan, units of ``M``.
    grad : dict
        ``"M"``: the plan P, shape (dim_a, dim_b) (or (n_hists, dim_a, dim_b));
        ``"a"``: shape of ``a`` broadcast to the batch, (dim_a,) or
        (dim_a, n_hists); ``"b"``: (dim_b,) or (dim_b, n_hists): centred dual
        potentials reg * (log_u - mean), reg * (log_v - mean).

    Raises
    ------
    ValueError, TypeError
        As :func:`numbaot.sinkhorn2`; ``method`` not one of the two above.
    """
    meth = _checks.check_method(method, ("sinkhorn", "sinkhorn_log"))
    reg_f = _checks.check_reg(reg)
    solver = sinkhorn_log if meth == "sinkhorn_log" else sinkhorn_knopp
    P = _checks.prepare_problem(a, b, M)
    if P.device != "cpu":
        raise TypeError("sinkhorn2_value_and_grad takes host (NumPy) arrays for now")
    res = solver(a, b, M, reg, numItermax=numItermax, stopThr=stopThr, verbose=verbose,
                 log=True, warn=warn, warmstart=warmstart, **kwargs)
    lg = res[1]
    if meth == "sinkhorn_log":
        lu, lv = np.asarray(lg["log_u"], float), np.asarray(lg["log_v"], float)
    else:
        with np.errstate(divide="ignore"):
            lu, lv = np.log(np.asarray(lg["u"], float)), np.log(np.asarray(lg["v"], float))
    batch = P.n_hists > 0
    lu2 = lu.T if batch else lu[None, :]
    lv2 = lv.T if batch else lv[None, :]
    lu2 = np.ascontiguousarray(np.broadcast_to(lu2, (P.n_problems, P.shape[0])))
    Mf = np.ascontiguousarray(P.M, dtype=np.float64)
    c = -1.0 / reg_f
    values, plans = [], []
    for k in range(P.n_problems):
        plan = np.empty(P.shape)
        _ks.gibbs_kernel(Mf, c, lu2[k], np.ascontiguousarray(lv2[k]), plan)
        r, col = plan.sum(1), plan.sum(0)
        values.append(reg_f * (_xlogy_sum(r, lu2[k]) + _xlogy_sum(col, lv2[k])))
        plans.append(plan)
    dt = P.dtype

    def centred(x):
        fin = np.isfinite(x)
        out = np.where(fin, x, 0.0)
        return reg_f * (out - out[fin].mean() if fin.any() else out)

    ga = np.stack([centred(lu2[k]) for k in range(P.n_problems)])
    gb = np.stack([centred(lv2[k]) for k in range(P.n_problems)])
    if batch:
        grad = {"a": ga.T.astype(dt), "b": gb.T.astype(dt), "M": np.stack(plans).astype(dt)}
        return np.asarray(values, dtype=dt), grad
    grad = {"a": ga[0].astype(dt), "b": gb[0].astype(dt), "M": plans[0].astype(dt)}
    return dt.type(values[0]), grad


def _cloud_grad(X, Y, f, g, c, code):
    """sum_j P_ij grad_x cost(x_i, y_j), shape (n, d)."""
    out = np.empty_like(X)
    _ke.lazy_grad(X, np.ascontiguousarray(Y.T), f, g, c, code, out)
    return out


def empirical_sinkhorn2_value_and_grad(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean",
                                       numIterMax=10000, stopThr=1e-9, verbose=False,
                                       warn=True, warmstart=None, **kwargs):
    r"""Entropic OT value between point clouds and its gradient w.r.t. the
    points and the weights, with costs computed on the fly (memory
    O((n_samples_a + n_samples_b) dim), as ``empirical_sinkhorn(isLazy=True)``).

    See the module docstring for the objective and the gradients.

    Parameters
    ----------
    X_s : array-like, shape (n_samples_a, dim)
        Source points.
    X_t : array-like, shape (n_samples_b, dim)
        Target points.
    reg : float
        Entropic regularisation (> 0), units of the cost.
    a, b : array-like, optional
        Weights (n_samples_a,), (n_samples_b,) (None = uniform), or for a batch
        ``b`` of shape (n_samples_b, n_hists) (and optionally ``a`` of shape
        (n_samples_a, n_hists), paired): one problem per column.
    metric : {'sqeuclidean', 'euclidean'}
        The cost.
    numIterMax, stopThr, verbose, warn, warmstart, **kwargs
        As :func:`numbaot.bregman.empirical_sinkhorn2` (lazy path; ``warmstart``
        only for a single problem).

    Returns
    -------
    value : float, or ndarray (n_hists,)
    grad : dict with keys ``"X_s"`` (n_samples_a, dim), ``"X_t"``
        (n_samples_b, dim), ``"a"``, ``"b"`` (shapes of the weights); for a
        batch a leading n_hists axis on ``"X_s"``, ``"X_t"`` and weights of
        shape (n, n_hists).

    Raises
    ------
    TypeError, ValueError
        As :func:`numbaot.bregman.empirical_sinkhorn`.
    """
    if metric not in _LAZY_METRICS:
        raise ValueError(f"metric must be one of {sorted(_LAZY_METRICS)}; got {metric!r}")
    if _dispatch.device_of(X_s=X_s, X_t=X_t, a=a, b=b) != "cpu":
        raise TypeError("empirical_sinkhorn2_value_and_grad takes host (NumPy) arrays for now")
    b_arr = None if b is None else _checks.as_real_array(b, "b")
    a_arr = None if a is None else _checks.as_real_array(a, "a")
    if b_arr is not None and b_arr.ndim == 2:
        K = b_arr.shape[1]
        if a_arr is not None and a_arr.ndim == 2 and a_arr.shape[1] != K:
            raise ValueError(f"paired batch: a has {a_arr.shape[1]} histograms but b has {K}")
        outs = [empirical_sinkhorn2_value_and_grad(
            X_s, X_t, reg, a_arr[:, k] if a_arr is not None and a_arr.ndim == 2 else a_arr,
            b_arr[:, k], metric, numIterMax, stopThr, verbose, warn, None, **kwargs)
            for k in range(K)]
        vals = np.asarray([o[0] for o in outs])
        grad = {"X_s": np.stack([o[1]["X_s"] for o in outs]),
                "X_t": np.stack([o[1]["X_t"] for o in outs]),
                "a": np.stack([o[1]["a"] for o in outs], axis=1),
                "b": np.stack([o[1]["b"] for o in outs], axis=1)}
        return vals, grad
    if a_arr is not None and a_arr.ndim == 2:
        raise ValueError("a is 2-D (paired batch), so b must be 2-D with as many histograms")
    f_out, g_out, _, st = _lazy(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, 100,
                                verbose, False, warn, warmstart)
    Xs, Xt_t, f, g, c, code = st["Xs"], st["Xt_t"], st["f"], st["g"], st["c"], st["code"]
    Xt = np.ascontiguousarray(Xt_t.T)
    reg_f = -1.0 / c
    lse = np.empty(Xs.shape[0])
    _ke.lazy_lse(Xs, Xt_t, g, c, code, lse)
    with np.errstate(invalid="ignore"):
        r = np.where(np.isneginf(f), 0.0, np.exp(f + lse))
    lse_c = np.empty(Xt.shape[0])
    _ke.lazy_lse(Xt, np.ascontiguousarray(Xs.T), f, c, code, lse_c)
    with np.errstate(invalid="ignore"):
        col = np.where(np.isneginf(g), 0.0, np.exp(g + lse_c))
    value = reg_f * (_xlogy_sum(r, f) + _xlogy_sum(col, g))
    dt = st["dtype"]

    def centred(x):
        fin = np.isfinite(x)
        out = np.where(fin, x, 0.0)
        return reg_f * (out - out[fin].mean())

    grad = {"X_s": _cloud_grad(Xs, Xt, f, g, c, code).astype(dt),
            "X_t": _cloud_grad(Xt, Xs, g, f, c, code).astype(dt),
            "a": centred(f).astype(dt), "b": centred(g).astype(dt)}
    return dt.type(value), grad
