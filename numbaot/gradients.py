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
  are meaningful; along them the centring changes nothing.  The mean is
  taken over the bins of positive weight;
* at a bin of zero weight (a_i = 0) the derivative is -inf: the value holds
  reg * a_i log a_i, whose slope is -inf at 0.  numbaot reports instead the
  finite part, the same for every method and device: d value / d a_i =
  reg * (t_i - mean(log_u)), t_i = -log sum_j exp(-M_ij / reg + log_v_j)
  the soft c-transform of the target potential, i.e. the log-scaling the
  bin would get per unit of mass (lim_{a_i -> 0} of the gradient minus
  reg log a_i).  Moving mass eps from a bin p into such a bin changes
  value - reg (eps log eps - eps) at the rate grad[i] - grad[p]; likewise
  for b (POT's ``ot.solve`` centres the -inf potentials: NaN everywhere).
  Point clouds follow the same rule, with M_ij the cost(x_i, y_j)
  recomputed from the points for the zero-weight points only;
* for point clouds, d value / d x_i = sum_j P_ij grad_x cost(x_i, y_j) (chain
  rule through the cost; for 'euclidean' the subgradient 0 at coincident
  points), and likewise for y_j.

Devices: both calls also take CUDA device arrays (numba device arrays,
CuPy arrays; all array arguments on the GPU, ``None``/empty weights
allowed).  Each call picks its backend once: the Sinkhorn iterations run
through ``numbaot._balanced`` / ``numbaot._lazy`` on the launchers of
``numbaot.cpu.sinkhorn`` / ``numbaot.cpu.empirical`` or their CUDA twins,
and the plan, the value and the centred potentials are formed by
``numbaot.cpu.gradients`` or ``numbaot.cuda.gradients`` (same launchers; on
the GPU the point-cloud gradient by ``numbaot.cuda.empirical.lazy_grad``,
costs recomputed in registers).  On the GPU the
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
import warnings

import numpy as np

from . import _balanced, _checks, _dispatch, _loops
from ._lazy import LAZY_METRICS, lazy_solve

__all__ = ["sinkhorn2_value_and_grad", "empirical_sinkhorn2_value_and_grad"]

#: numbaot's warning when a returned value or gradient is not finite.
NONFINITE_GRAD = ("sinkhorn2_value_and_grad: the value or gradient holds NaN or inf "
                  "(numerical errors in the Sinkhorn iterations); try method='sinkhorn_log' "
                  "or a larger reg")


def _backend(device):
    """The gradient launchers of the device (``"cpu"`` or ``"cuda"``)."""
    if device == "cuda":
        from .cuda import gradients
    else:
        from .cpu import gradients
    return gradients


def sinkhorn2_value_and_grad(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
                             verbose=False, warn=False, warmstart=None, **kwargs):
    r"""Entropic OT value and its gradient w.r.t. ``a``, ``b`` and ``M``.

    See the module docstring for the exact objective and the envelope
    gradients.  Arguments as :func:`numbaot.sinkhorn2` (whose solvers run the
    iterations).

    Parameters
    ----------
    a : array-like or CUDA device array, shape (dim_a,) or (dim_a, n_hists), float32 or float64
        Source weights (>= 0, finite, positive total; empty = uniform; 2-D =
        paired batch with 2-D ``b``).  Any real dtype: float16 is computed
        as float32, integers as float64.
    b : array-like or CUDA device array, shape (dim_b,) or (dim_b, n_hists), float32 or float64
        Target weights (empty = uniform; 2-D: n_hists problems sharing
        ``M``); same dtype rules; sum b = sum a per problem.
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the value.  A host ``M`` may
        have any real dtype (float16 as float32, integers as float64); a
        device ``M`` must be float32 or float64.
    reg : float
        Entropic regularisation (> 0), units of ``M``.
    method : {'sinkhorn', 'sinkhorn_log'}, default 'sinkhorn'
        Solver (multiplicative or log domain; use 'sinkhorn_log' for small reg).
    numItermax, stopThr, verbose, warn, warmstart, **kwargs
        As :func:`numbaot.sinkhorn2` (``warn`` defaults to False as there).

    Returns
    -------
    value : numpy.float32 or numpy.float64; for a batch an ndarray (or device array) of shape (n_hists,)
        <P, M> + reg * sum P log P at the returned plan, units of ``M``.
        The result dtype: float32 when every non-empty input among ``a``,
        ``b``, ``M`` is float32 (or float16), else float64.
    grad : dict of arrays of the result dtype (device arrays for device inputs)
        ``"M"``: the plan P, shape (dim_a, dim_b) (or (n_hists, dim_a, dim_b));
        ``"a"``: shape of ``a`` broadcast to the batch, (dim_a,) or
        (dim_a, n_hists); ``"b"``: (dim_b,) or (dim_b, n_hists): centred dual
        potentials reg * (log_u - mean), reg * (log_v - mean), in units of
        ``M`` per unit of mass, the mean over the bins of positive weight;
        at a zero-weight bin the finite part of the derivative (module
        docstring): reg * (soft c-transform - mean).

    Raises
    ------
    ValueError, TypeError
        As :func:`numbaot.sinkhorn2` (among them max|M| / reg too large, or
        unequal masses: ``numbaot._checks.check_balanced``); ``method`` not
        one of the two above (ValueError; TypeError for a non-string).
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        The solver's warnings, and "... value or gradient holds NaN or
        inf ..." when a result is not finite (host arrays).

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [2] G. Peyre, M. Cuturi, "Computational Optimal Transport",
       Foundations and Trends in Machine Learning 11(5-6) 2019, eq. 4.2.
    .. [3] POT 0.9.7, ``ot.solve(a, b, M, reg, grad='envelope')`` (``ot.sinkhorn2``).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> value, grad = numbaot.gradients.sinkhorn2_value_and_grad(a, b, M, 0.1)
    >>> print(np.round(value, 4), np.round(grad["a"], 4))
    -0.0432 [-0.0693  0.0693]
    >>> print(np.round(grad["M"], 3))  # the plan
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    """
    meth = _checks.check_method(method, ("sinkhorn", "sinkhorn_log"))
    _checks.check_reg(reg)  # before the arrays, as always
    P = _checks.prepare_problem(a, b, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    be = _backend(P.device)
    if meth == "sinkhorn_log":
        _, st, res = _balanced.log_solve(P, reg, numItermax, stopThr, warmstart)
        _loops.log_report(P, res, verbose, _loops.log_warn(P, warn))
    else:
        _, st, _, _ = _balanced.knopp_solve(P, reg, numItermax, stopThr, verbose, True, warn,
                                            warmstart)
    lu, lv = be.log_scalings(st, P.dtype)
    plan, vals = be.plan_and_value(P.M, -1.0 / reg, lu, lv)
    values = reg * vals
    za, zb = P.a == 0, P.b == 0
    if za.any() or zb.any():  # numbaot's convention at zero-weight bins (see the docstring)
        ga, gb = be.centred_support(P.M, -1.0 / reg, lu, lv, za, zb, reg)
    else:
        ga, gb = be.centred(lu, reg), be.centred(lv, reg)
    dt, like = P.dtype, P.like
    if P.device == "cpu" and not (np.isfinite(values).all() and np.isfinite(plan).all()
                                  and np.isfinite(ga).all() and np.isfinite(gb).all()):
        warnings.warn(NONFINITE_GRAD)
    if P.n_hists:
        grad = {"a": be.result(ga, dt, like), "b": be.result(gb, dt, like),
                "M": be.result(plan, dt, like)}
        return be.values_result(values, dt, like), grad
    n, m = P.shape
    grad = {"a": be.result(ga.reshape(n), dt, like), "b": be.result(gb.reshape(m), dt, like),
            "M": be.result(plan.reshape(n, m), dt, like)}
    return dt.type(values[0]), grad


def empirical_sinkhorn2_value_and_grad(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean",
                                       numIterMax=10000, stopThr=1e-9, verbose=False,
                                       warn=True, warmstart=None, scaling=None,
                                       multiscale=False, **kwargs):
    r"""Entropic OT value between point clouds and its gradient w.r.t. points and weights.

    Costs are computed on the fly (memory O((n_samples_a + n_samples_b)
    dim), as ``empirical_sinkhorn(isLazy=True)``).  See the module docstring
    for the objective and the gradients.

    Parameters
    ----------
    X_s : array-like or CUDA device array, shape (n_samples_a, dim), float32 or float64
        Source points (finite).  Any real dtype: float16 is computed as
        float32, integers as float64.
    X_t : array-like or CUDA device array, shape (n_samples_b, dim), float32 or float64
        Target points (same dim), same rules.
    reg : float
        Entropic regularisation (> 0), units of the cost.
    a, b : array-like or CUDA device array, float32 or float64, optional
        Weights (mass per point, >= 0) of shapes (n_samples_a,),
        (n_samples_b,) (None = uniform), or for a batch ``b`` of shape
        (n_samples_b, n_hists) (and optionally ``a`` of shape (n_samples_a,
        n_hists), paired): one problem per column.  Any real dtype, as the
        points.
    metric : {'sqeuclidean', 'euclidean'}, default 'sqeuclidean'
        The cost: |x - y|^2 or |x - y|.
    numIterMax, stopThr, verbose, warn, warmstart, **kwargs
        As :func:`numbaot.bregman.empirical_sinkhorn2` (lazy path; ``warmstart``
        only for a single problem).
    scaling : float in (0, 1), optional
        Epsilon scaling before the iterations at ``reg`` (as
        ``solve_sample(method='geomloss_online', scaling=...)``): eps
        multiplied by ``scaling`` per stage from the data's squared diameter
        down to ``reg``, each stage warm-started [4]_.  None (default): POT's
        iterations from zero potentials.
    multiscale : bool, default False
        With ``scaling``: the stages hotter than the voxel scale on voxel
        centroids of both clouds, as
        ``solve_sample(method='geomloss_multiscale')`` [5]_.  The gradient is
        the envelope gradient at the final potentials either way (the same
        formula; only the path to the potentials changes).

    Returns
    -------
    value : numpy.float32 or numpy.float64; for a batch an ndarray (or device array) of shape (n_hists,)
        <P, C> + reg * sum P log P at the returned plan (C_ij =
        cost(x_i, y_j)), in units of the cost; one per problem for a batch.
        The result dtype: float32 when every given input among ``X_s``,
        ``X_t``, ``a``, ``b`` is float32 (or float16), else float64.
    grad : dict of arrays of the result dtype (device arrays for device inputs)
        Keys ``"X_s"`` (n_samples_a, dim), ``"X_t"``
        (n_samples_b, dim), ``"a"``, ``"b"`` (shapes of the weights); for a
        batch a leading n_hists axis on ``"X_s"``, ``"X_t"`` and weights of
        shape (n, n_hists).  ``"a"``, ``"b"`` are the centred potentials
        reg * (f - mean), reg * (g - mean), the means over the points of
        positive weight; at a point of zero weight the finite part of the
        derivative, as :func:`sinkhorn2_value_and_grad` (module docstring):
        reg * (t_i - mean), t_i = -log sum_j exp(g_j - cost(x_i, y_j) / reg)
        the soft c-transform of the other side's potential (likewise for
        b), the costs recomputed from the points.

    Raises
    ------
    TypeError, ValueError
        As :func:`numbaot.bregman.empirical_sinkhorn` (``isLazy=True``);
        ValueError for a ``metric`` other than the two above, a ``scaling``
        outside (0, 1), ``multiscale`` without ``scaling``, or a 2-D ``a``
        without a 2-D ``b`` of as many columns (or a 2-D ``b`` without
        columns).
    numbaot._dispatch.CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Notes
    -----
    Devices: NumPy arrays (CPU kernels, float64 inside) or CUDA device
    arrays for ``X_s``, ``X_t``, ``a``, ``b`` (lazy CUDA kernels in the
    input dtype; ``grad`` arrays on the device; a batch of values as a
    device array).  A batch runs its problems one after the other, on
    either device.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [2] G. Peyre, M. Cuturi, "Computational Optimal Transport",
       Foundations and Trends in Machine Learning 11(5-6) 2019, Remark 4.23.
    .. [3] POT 0.9.7, ``ot.bregman.empirical_sinkhorn2`` (``isLazy=True``).
    .. [4] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3), 2019,
       sec. 3.2 (epsilon scaling).
    .. [5] J. Feydy, "Geometric data analysis, beyond convolutions", PhD
       thesis, 2020, ch. 3 (multiscale Sinkhorn, GeomLoss).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X_s, X_t = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> value, grad = numbaot.gradients.empirical_sinkhorn2_value_and_grad(X_s, X_t, 0.1)
    >>> print(np.round(value, 4), sorted(grad))
    -0.0496 ['X_s', 'X_t', 'a', 'b']
    >>> print(np.round(grad["X_s"], 4))
    [[-0.1667]
     [ 0.1667]]
    """
    if metric not in LAZY_METRICS:
        raise ValueError(f"metric must be one of {sorted(LAZY_METRICS)}; got {metric!r}")
    if multiscale and scaling is None:
        raise ValueError("multiscale=True needs scaling (the factor of the epsilon-scaling "
                         "schedule, in (0, 1)); got scaling=None")
    device = _dispatch.device_of(X_s=X_s, X_t=X_t, a=a, b=b)
    if device == "cuda":
        _dispatch.require_cuda()
    be = _backend(device)
    like = X_s
    b_arr = None if b is None else _checks.as_real_array(_dispatch.to_host(b), "b")
    a_arr = None if a is None else _checks.as_real_array(_dispatch.to_host(a), "a")
    batch = b_arr is not None and b_arr.ndim == 2
    if batch:
        K = b_arr.shape[1]
        if a_arr is not None and a_arr.ndim == 2 and a_arr.shape[1] != K:
            raise ValueError(f"paired batch: a has {a_arr.shape[1]} histograms but b has {K}")
        if K == 0:
            raise ValueError(f"b has shape {b_arr.shape}: no histogram to solve (2-D b needs "
                             f"at least one column)")
        problems = [(a_arr[:, k] if a_arr is not None and a_arr.ndim == 2 else a_arr,
                     b_arr[:, k]) for k in range(K)]
        warmstart = None
    else:
        if a_arr is not None and a_arr.ndim == 2:
            raise ValueError("a is 2-D (paired batch), so b must be 2-D with as many histograms")
        problems = [(a, b)]
    K = len(problems)
    vals = np.empty(K)
    for k, (a_k, b_k) in enumerate(problems):  # one problem after the other
        *_, st = lazy_solve(X_s, X_t, reg, a_k, b_k, metric, numIterMax, stopThr, 100, verbose,
                            False, warn, warmstart, device=device, scaling=scaling,
                            multiscale=bool(multiscale))
        if k == 0:
            (n, d), m, dt = st.Xs.shape, st.Xt.shape[0], st.dtype
            GX, GY = be.work_array((K, n, d), dt), be.work_array((K, m, d), dt)
            Ga, Gb = be.work_array((n, K), dt), be.work_array((m, K), dt)
        vals[k] = be.cloud_value(st)
        be.cloud_grads(st, GX[k], GY[k])
        be.cloud_centred(st, Ga, Gb, k)
    if batch:
        grad = {"X_s": be.result(GX, dt, like), "X_t": be.result(GY, dt, like),
                "a": be.result(Ga, dt, like), "b": be.result(Gb, dt, like)}
        return be.values_result(vals, dt, like), grad
    grad = {"X_s": be.result(GX[0], dt, like), "X_t": be.result(GY[0], dt, like),
            "a": be.result(Ga.reshape(n), dt, like), "b": be.result(Gb.reshape(m), dt, like)}
    return dt.type(vals[0]), grad
