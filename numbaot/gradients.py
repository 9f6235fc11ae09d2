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

Devices: both calls also take CUDA device arrays (numba device arrays,
CuPy arrays; all array arguments on the GPU, ``None``/empty weights
allowed).  The Sinkhorn iterations then run on the CUDA kernels
(``numbaot.cuda.sinkhorn``, ``numbaot.cuda.empirical``), and the plan, the
value and the centred potentials are formed on the device
(``numbaot.cuda.gradients``; the point-cloud gradient by
``numbaot.cuda.empirical.lazy_grad``, costs recomputed in registers): the
arrays of ``grad`` come back as device arrays of the input kind and dtype,
a single value as a NumPy scalar and a batch of values as a device array
(as :func:`numbaot.sinkhorn2` on the device).  Nothing of size
dim_a x dim_b (or n_samples_a x n_samples_b) crosses to the host; the
weights and the points, O(dim) and O(n d), are validated on host copies.

Note: POT's ``ot.solve`` reports value + reg * KL(P | a b^T) but the entropic
potentials as gradient; for a, b these are the gradient of the entropy form
above, which is why numbaot returns that value.  Before convergence (few
iterations, large ``stopThr``) the returned gradient is that of the
converged problem evaluated at the current iterate, not the derivative of
the truncated iteration.
"""
import numpy as np

from . import _checks, _dispatch
from . import _balanced, _loops
from .bregman import sinkhorn_knopp, sinkhorn_log
from .cpu import empirical as _ke
from .cpu import sinkhorn as _ks
from .bregman._empirical import LAZY_METRICS, lazy_solve

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
    if P.device == "cuda":
        return _value_and_grad_cuda(P, meth, reg, numItermax, stopThr, verbose, warn, warmstart)
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


def _value_and_grad_cuda(P, meth, reg, numItermax, stopThr, verbose, warn, warmstart):
    """``sinkhorn2_value_and_grad`` on a device problem: the CUDA Sinkhorn
    core of ``numbaot.bregman`` (same stopping rule and warnings as
    ``sinkhorn_knopp`` / ``sinkhorn_log``), then plan, value and centred
    potentials on the device."""
    from numba import cuda

    from .cuda import gradients as cg

    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    if meth == "sinkhorn_log":
        _, st, res = _balanced.log_solve(P, reg, numItermax, stopThr, warmstart)
        _loops.log_report(P, res, verbose, _loops.log_warn(P, warn))
        lu, lv = st.u, st.v
    else:
        _, st, _, _ = _balanced.knopp_solve(P, reg, numItermax, stopThr, verbose, True, warn,
                                            warmstart)
        lu, lv = cg.log_of(st.u), cg.log_of(st.v)
    dt = P.dtype
    n, m = P.shape
    K = P.n_problems
    plan, vals = cg.plan_and_value(P.M, -1.0 / reg, lu, lv)
    values = reg * vals
    ga = cuda.device_array((n, K), dtype=dt)
    gb = cuda.device_array((m, K), dtype=dt)
    cg.centred(lu, reg, ga)
    cg.centred(lv, reg, gb)
    like = _dispatch.like_input
    if P.n_hists:
        grad = {"a": like(ga, P.like), "b": like(gb, P.like), "M": like(plan, P.like)}
        return _dispatch.result_to_device(values.astype(dt), P.like), grad
    grad = {"a": like(ga.reshape(n), P.like), "b": like(gb.reshape(m), P.like),
            "M": like(plan.reshape(n, m), P.like)}
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
    CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Notes
    -----
    Devices: NumPy arrays (CPU kernels, float64 inside) or CUDA device
    arrays for ``X_s``, ``X_t``, ``a``, ``b`` (lazy CUDA kernels in the
    input dtype; ``grad`` arrays on the device; a batch of values as a
    device array).  A batch runs its problems one after the other, on
    either device.
    """
    if metric not in LAZY_METRICS:
        raise ValueError(f"metric must be one of {sorted(LAZY_METRICS)}; got {metric!r}")
    if _dispatch.device_of(X_s=X_s, X_t=X_t, a=a, b=b) == "cuda":
        return _empirical_cuda(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, verbose, warn,
                               warmstart)
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
    f_out, g_out, _, st = lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, 100,
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


def _empirical_one_cuda(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, verbose, warn,
                        warmstart):
    """One point-cloud problem on the device: the lazy CUDA iterations of
    ``numbaot.empirical`` (its ``_LazyCUDA`` engine), then the value's two
    reductions and the two point gradients on the device.  Returns (value
    as a host float, grad X_s, grad X_t, the engine, dtype)."""
    from numba import cuda

    from .cuda import empirical as ce
    from .cuda import gradients as cg

    _, _, _, st = lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, 100, verbose, False,
                        warn, warmstart)
    eng, c, code, dt = st["engine"], st["c"], st["code"], st["dtype"]
    (n, d), m = eng.Xs.shape, eng.Xt.shape[0]
    parts = cuda.device_array(2, dtype=dt)
    lse = cuda.device_array(n, dtype=dt)
    ce.lazy_lse(eng.Xs, eng.Xt_t, eng.g, c, code, lse)
    cg.xlogy_mass(eng.f, lse, parts, 0)
    lse_c = cuda.device_array(m, dtype=dt)
    ce.lazy_lse(eng.Xt, eng.Xs_t, eng.f, c, code, lse_c)
    cg.xlogy_mass(eng.g, lse_c, parts, 1)
    value = (-1.0 / c) * float(np.sum(parts.copy_to_host(), dtype=np.float64))
    gX = cuda.device_array((n, d), dtype=dt)
    gY = cuda.device_array((m, d), dtype=dt)
    ce.lazy_grad(eng.Xs, eng.Xt_t, eng.f, eng.g, c, code, gX)
    ce.lazy_grad(eng.Xt, eng.Xs_t, eng.g, eng.f, c, code, gY)
    return value, gX, gY, eng, dt


def _empirical_cuda(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, verbose, warn,
                    warmstart):
    """``empirical_sinkhorn2_value_and_grad`` on device arrays (a batch: one
    problem after another, results gathered on the device)."""
    _dispatch.require_cuda()
    from numba import cuda

    from .cuda import gradients as cg

    like = X_s

    def host(x):
        return _dispatch.as_device_array(x).copy_to_host() if _dispatch.is_device_array(x) else x

    b_arr = None if b is None else _checks.as_real_array(host(b), "b")
    a_arr = None if a is None else _checks.as_real_array(host(a), "a")
    if b_arr is not None and b_arr.ndim == 2:
        K = b_arr.shape[1]
        if a_arr is not None and a_arr.ndim == 2 and a_arr.shape[1] != K:
            raise ValueError(f"paired batch: a has {a_arr.shape[1]} histograms but b has {K}")

        def col(x, k):
            if x is None:
                return None
            return cuda.to_device(np.ascontiguousarray(x[:, k] if x.ndim == 2 else x))

        vals = []
        for k in range(K):
            v, gX, gY, eng, dt = _empirical_one_cuda(X_s, X_t, reg, col(a_arr, k),
                                                     col(b_arr, k), metric, numIterMax,
                                                     stopThr, verbose, warn, None)
            if k == 0:
                (n, d), m = gX.shape, gY.shape[0]
                GX = cuda.device_array((K, n, d), dtype=dt)
                GY = cuda.device_array((K, m, d), dtype=dt)
                Ga = cuda.device_array((n, K), dtype=dt)
                Gb = cuda.device_array((m, K), dtype=dt)
            GX[k].copy_to_device(gX)
            GY[k].copy_to_device(gY)
            cg.centred(eng.f.reshape(1, n), -1.0 / eng.c, Ga, k)
            cg.centred(eng.g.reshape(1, m), -1.0 / eng.c, Gb, k)
            vals.append(v)
        li = _dispatch.like_input
        grad = {"X_s": li(GX, like), "X_t": li(GY, like), "a": li(Ga, like),
                "b": li(Gb, like)}
        return li(cuda.to_device(np.asarray(vals, dtype=dt)), like), grad
    if a_arr is not None and a_arr.ndim == 2:
        raise ValueError("a is 2-D (paired batch), so b must be 2-D with as many histograms")
    v, gX, gY, eng, dt = _empirical_one_cuda(X_s, X_t, reg, a, b, metric, numIterMax, stopThr,
                                             verbose, warn, warmstart)
    n, m = gX.shape[0], gY.shape[0]
    ga = cuda.device_array((n, 1), dtype=dt)
    gb = cuda.device_array((m, 1), dtype=dt)
    cg.centred(eng.f.reshape(1, n), -1.0 / eng.c, ga)
    cg.centred(eng.g.reshape(1, m), -1.0 / eng.c, gb)
    li = _dispatch.like_input
    grad = {"X_s": li(gX, like), "X_t": li(gY, like), "a": li(ga.reshape(n), like),
            "b": li(gb.reshape(m), like)}
    return dt.type(v), grad
