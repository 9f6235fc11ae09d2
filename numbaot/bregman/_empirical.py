"""Entropic OT between point clouds, drop-in for POT 0.9.7's empirical calls.

``empirical_sinkhorn``, ``empirical_sinkhorn2`` and
``empirical_sinkhorn_divergence`` mirror ``ot.bregman.empirical_sinkhorn*``
(signature, defaults, returns, log keys, warnings).  With ``isLazy=True`` the
cost between two points is recomputed inside numbaot's log-domain reduction
(the launchers of ``numbaot.cpu.empirical`` or, for CUDA device arrays,
``numbaot.cuda.empirical``, driven by ``numbaot._lazy.lazy_solve``), so memory
is O((n + m) d) and never O(n m); POT builds the cost matrix block by block
(``batchSize`` rows) instead.
``batchSize`` is validated as POT does but has no effect on numbaot's kernels.
With ``isLazy=False`` the cost matrix is formed with :func:`numbaot.dist` and
the problem is solved by :func:`numbaot.sinkhorn` / :func:`numbaot.sinkhorn2`.
"""
import numpy as np

from .. import _checks
from .._lazy import LAZY_METRICS, LazyPlan, check_point_scale, check_points, lazy_solve
from ._sinkhorn import sinkhorn, sinkhorn2
from ..utils import dist

__all__ = ["empirical_sinkhorn", "empirical_sinkhorn2", "empirical_sinkhorn_divergence",
           "LazyPlan"]


def _dense_problem(X_s, X_t, reg, a, b, metric, numIterMax):
    """The cost matrix dist(X_s, X_t) and the weights (uniform for None, in
    the dtype of M) of the non-lazy path.  The points are checked first
    (:func:`numbaot._lazy.check_points`: 2-D, at least one point, finite;
    integer coordinates are points like any other and are computed in
    float64), and, for the metrics of the lazy path, the cost scale
    (:func:`numbaot._lazy.check_point_scale`, naming X_s, X_t and reg)."""
    Xs, Xt = check_points(X_s, "X_s"), check_points(X_t, "X_t")
    # named as the caller knows them (the solver would name M and numItermax)
    _checks.check_iter_count(numIterMax, "numIterMax")
    for w, name, X, owner in ((a, "a", Xs, "X_s"), (b, "b", Xt, "X_t")):
        if w is not None and np.ndim(w) >= 1 and np.shape(w)[0] != 0:  # (empty: uniform)
            _checks.check_length(np.shape(w)[0], name, X.shape[0], "points", owner)
    if Xs.shape[1] != Xt.shape[1]:
        raise ValueError(f"X_s and X_t must have the same dimension; got {Xs.shape[1]} "
                         f"and {Xt.shape[1]}")
    if metric in LAZY_METRICS:
        check_point_scale(Xs, Xt, _checks.check_reg(reg), metric)
    M = dist(*(X if np.issubdtype(X.dtype, np.floating) else X.astype(np.float64)
               for X in (Xs, Xt)), metric=metric)
    if not np.all(np.isfinite(M)):
        raise ValueError(f"the {metric!r} costs between X_s and X_t overflow (inf or NaN); "
                         f"rescale the points")
    if a is None:
        a = np.full(M.shape[0], 1.0 / M.shape[0], dtype=M.dtype)
    if b is None:
        b = np.full(M.shape[1], 1.0 / M.shape[1], dtype=M.dtype)
    return M, a, b


def empirical_sinkhorn(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean", numIterMax=10000,
                       stopThr=1e-9, isLazy=False, batchSize=100, verbose=False, log=False,
                       warn=True, warmstart=None, **kwargs):
    r"""Entropic OT between two point clouds; mirrors ``ot.bregman.empirical_sinkhorn``.

    Solves min_gamma <gamma, M>_F + reg * sum gamma log gamma under
    gamma 1 = a, gamma^T 1 = b, with M_ij = cost(x_i, y_j) (Cuturi 2013).
    With ``isLazy=True`` the log-domain iterations (Peyre & Cuturi 2019,
    Remark 4.23) recompute every cost inside the reduction: memory
    O((n_samples_a + n_samples_b) dim), never an (n_samples_a, n_samples_b)
    matrix; the result is the pair of log-scalings (f, g).

    Parameters
    ----------
    X_s : array-like, shape (n_samples_a, dim), float32 or float64
        Source points (finite, at least one).  Other real dtypes are
        accepted: integer coordinates are computed in float64, float16 ones
        in float32.  With ``isLazy=True`` also a CUDA device array.
    X_t : array-like, shape (n_samples_b, dim), float32 or float64
        Target points (same dim; same rules).
    reg : float
        Entropic regularisation (finite, > 0), in units of the cost.
    a, b : array-like, shapes (n_samples_a,), (n_samples_b,), float32 or float64, optional
        Point weights (mass per point; >= 0, finite, positive total; sum a
        = sum b, checked); None = uniform.  Any
        real dtype (float16 computed as float32, integers as float64); with
        ``isLazy=True`` host or device arrays, 1-D only.
    metric : str, default 'sqeuclidean'
        Cost: with ``isLazy=True`` 'sqeuclidean' or 'euclidean'; otherwise
        any metric of :func:`numbaot.dist`.
    numIterMax : int, default 10000
        Maximum number of iterations.
    stopThr : float, default 1e-9
        Lazy: stop when sum_i |(gamma 1)_i - a_i| <= stopThr, checked every
        10 iterations (POT's rule); otherwise as :func:`numbaot.sinkhorn`.
    isLazy : bool, default False
        Costs on the fly (see above).
    batchSize : int or tuple of two ints, default 100
        Validated as in POT; numbaot's lazy kernels need no batches.
    warmstart : tuple of 2 host arrays, optional
        Initial log-scalings: with ``isLazy=True`` (f, g), shapes
        (n_samples_a,), (n_samples_b,); otherwise the ``warmstart`` of
        :func:`numbaot.sinkhorn` ((log u, log v) for the default method).
        Any real dtype, used as float64; finite except -inf at a zero weight.
    verbose, log, warn, **kwargs
        As POT; ``**kwargs`` go to
        :func:`numbaot.sinkhorn` when ``isLazy=False``.  With ``isLazy=True``
        numbaot reads one keyword of its own, ``scaling`` (None by default:
        POT's iterates): a float in (0, 1) turns on epsilon scaling (one
        iteration at each eps_k = diameter**p scaling**k > reg, p = 2 for
        'sqeuclidean' and 1 for 'euclidean', warm-started from the previous
        stage's dual potentials, then POT's loop at reg to ``stopThr``, at
        most ``numIterMax`` iterations there: the annealing's come on top; the
        same answer, fewer iterations at small reg; Schmitzer 2019 [4]_,
        Feydy 2020 [5]_).  The log then also has 'eps_schedule',
        'niter_scaling' and 'niter_total'.  Other keywords are ignored, as POT.

    Returns
    -------
    gamma : ndarray, shape (n_samples_a, n_samples_b)
        If ``isLazy=False``: the entropic plan (mass moved from x_i to y_j),
        as :func:`numbaot.sinkhorn` returns it (the losses, shape (n_hists,),
        for a 2-D ``b``).  float32 when the points and the given weights are
        float32 (or float16) and ``metric`` is computed by NumPy (not
        SciPy), else float64.
    f : ndarray or CUDA device array, shape (n_samples_a,)
        If ``isLazy=True`` (returned in place of ``gamma``): log-scalings of
        the source points (dual potential / reg); the plan is
        exp(f_i + g_j - cost(x_i, y_j) / reg).  float32 when every given
        input (X_s, X_t, a, b) is float32 (or float16), else float64; a
        device array of ``X_s``'s kind for device inputs.
    g : ndarray or CUDA device array, shape (n_samples_b,)
        If ``isLazy=True``: log-scalings of the target points, as ``f``.
    log : dict
        Only if ``log=True``.  If ``isLazy=True``: 'err' (row-marginal
        errors at the checks), 'u' (= f), 'v' (= g), 'niter', 'lazy_plan' (a
        :class:`LazyPlan`, indexed as POT's LazyTensor: an integer keeps its
        axis; a negative one counts from the end, where POT's returns an
        empty block); with ``scaling`` also 'eps_schedule',
        'niter_scaling', 'niter_total'.  Else the log of
        :func:`numbaot.sinkhorn`.

    Raises
    ------
    TypeError
        Non-numeric, boolean, complex or masked points or weights;
        non-numeric ``reg``, ``stopThr``; non-integer ``numIterMax``;
        ``warmstart`` not a tuple/list; with ``isLazy=True``, host and
        device arrays mixed; with ``isLazy=False``, device arrays (the dense
        path takes host arrays).
    ValueError
        reg <= 0 or not finite; points not 2-D, empty (POT:
        ZeroDivisionError), of different dim or not finite; squared (or
        plain) distances / reg beyond 2**52 or overflowing, e.g. points at
        1e200 (POT: NaN); bad weights (wrong length, negative, not finite,
        zero mass, unequal masses); unknown lazy metric; numIterMax < 0;
        stopThr NaN or < 0; malformed batchSize or warmstart; a lazy
        ``scaling`` outside (0, 1); the errors of :func:`numbaot.sinkhorn`
        (``isLazy=False``).
    numbaot._dispatch.CudaUnavailableError
        Device arrays (``isLazy=True``) without numba-cuda or a usable GPU.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``).

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [2] G. Peyre, M. Cuturi, "Computational Optimal Transport",
       Foundations and Trends in Machine Learning 11(5-6) 2019, Remark 4.23.
    .. [3] POT 0.9.7, ``ot.bregman.empirical_sinkhorn``.
    .. [4] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3) 2019,
       sec. 3.2 (epsilon scaling).
    .. [5] J. Feydy, "Geometric data analysis, beyond convolutions", PhD
       thesis, Universite Paris-Saclay 2020, sec. 3.3.3.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X_s, X_t = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> print(np.round(numbaot.bregman.empirical_sinkhorn(X_s, X_t, 0.1), 3))
    [[0.333 0.167 0.   ]
     [0.    0.167 0.333]]
    >>> f, g = numbaot.bregman.empirical_sinkhorn(X_s, X_t, 0.1, isLazy=True)
    >>> print(np.round(np.exp(f[:, None] + g[None, :] - numbaot.dist(X_s, X_t) / 0.1), 3))
    [[0.333 0.167 0.   ]
     [0.    0.167 0.333]]
    """
    if isLazy:
        f, g, lg, _, _ = lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr,
                                    batchSize, verbose, log, warn, warmstart,
                                    scaling=kwargs.get("scaling"))
        return (f, g, lg) if log else (f, g)
    M, a, b = _dense_problem(X_s, X_t, reg, a, b, metric, numIterMax)
    return sinkhorn(a, b, M, reg, numItermax=numIterMax, stopThr=stopThr, verbose=verbose,
                    log=log, warmstart=warmstart, **kwargs)


def empirical_sinkhorn2(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean", numIterMax=10000,
                        stopThr=1e-9, isLazy=False, batchSize=100, verbose=False, log=False,
                        warn=True, warmstart=None, **kwargs):
    r"""Transport cost <gamma, M>_F of the entropic plan between two point
    clouds (without the entropic term); mirrors ``ot.bregman.empirical_sinkhorn2``.

    With ``isLazy=True`` the cost is reduced on the fly after the iterations
    (no (n, m) matrix).

    Parameters
    ----------
    X_s, X_t, reg, a, b, metric, numIterMax, stopThr, isLazy, batchSize, verbose, log, warn, warmstart, **kwargs
        As :func:`empirical_sinkhorn` (same shapes, units and defaults).

    Returns
    -------
    W : numpy.float32 or numpy.float64; for 2-D ``b`` with ``isLazy=False`` an ndarray (n_hists,)
        Transport cost <gamma, M>_F in units of the cost; of the result
        dtype of :func:`empirical_sinkhorn` (a NumPy scalar also for device
        inputs).
    log : dict
        Only if ``log=True``: that of :func:`empirical_sinkhorn` (lazy) or
        of :func:`numbaot.sinkhorn2`.

    Raises
    ------
    TypeError, ValueError, numbaot._dispatch.CudaUnavailableError
        As :func:`empirical_sinkhorn`.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [2] POT 0.9.7, ``ot.bregman.empirical_sinkhorn2``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X_s, X_t = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> print(np.round(numbaot.bregman.empirical_sinkhorn2(X_s, X_t, 0.1, isLazy=True), 4))
    0.0834
    """
    if isLazy:
        _, _, lg, be, st = lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr,
                                      batchSize, verbose, log, warn, warmstart,
                                      scaling=kwargs.get("scaling"))
        loss = st.dtype.type(be.lazy_transport_cost(st))
        return (loss, lg) if log else loss
    M, a, b = _dense_problem(X_s, X_t, reg, a, b, metric, numIterMax)
    return sinkhorn2(a, b, M, reg, numItermax=numIterMax, stopThr=stopThr, verbose=verbose,
                     log=log, warn=warn, warmstart=warmstart, **kwargs)


def empirical_sinkhorn_divergence(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean",
                                  numIterMax=10000, stopThr=1e-9, verbose=False, log=False,
                                  warn=True, warmstart=None, **kwargs):
    r"""Sinkhorn divergence between point clouds as POT 0.9.7 computes it:
    max(0, W_ab - (W_aa + W_bb) / 2) with W the transport costs of
    :func:`empirical_sinkhorn2` (Genevay, Peyre & Cuturi 2018, eq. 2, without
    the entropic terms, as ``ot.bregman.empirical_sinkhorn_divergence``).

    Parameters
    ----------
    X_s, X_t, reg, a, b, metric, numIterMax, stopThr, verbose, log, warn, **kwargs
        As :func:`empirical_sinkhorn2` (``isLazy`` may be passed in kwargs).
    warmstart : pair (u, v) of host arrays, optional
        Log-scalings of shapes (n_samples_a,) and (n_samples_b,), any real
        dtype (used as float64).  As POT: (u, v) for the cross term, (u, u)
        and (v, v) for the two others.

    Returns
    -------
    S : numpy.float32 or numpy.float64
        The divergence (>= 0), in units of the cost; of the result dtype of
        :func:`empirical_sinkhorn2`.
    log : dict, only if ``log=True``: 'sinkhorn_loss_ab', 'sinkhorn_loss_a',
        'sinkhorn_loss_b', 'log_sinkhorn_ab', 'log_sinkhorn_a', 'log_sinkhorn_b'.

    Raises
    ------
    TypeError, ValueError, numbaot._dispatch.CudaUnavailableError
        As :func:`empirical_sinkhorn2`; ``warmstart`` not a tuple/list
        (TypeError) or not of 2 items (ValueError).

    References
    ----------
    .. [1] A. Genevay, G. Peyre, M. Cuturi, "Learning Generative Models with
       Sinkhorn Divergences", AISTATS 2018, eq. 2.
    .. [2] POT 0.9.7, ``ot.bregman.empirical_sinkhorn_divergence``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X_s, X_t = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> print(np.round(numbaot.bregman.empirical_sinkhorn_divergence(X_s, X_t, 0.1), 4))
    0.0712
    """
    if warmstart is None:
        warmstart_a, warmstart_b = None, None
    else:
        u, v = _checks.warmstart_items(warmstart)
        warmstart_a, warmstart_b = (u, u), (v, v)
    kw = dict(metric=metric, numIterMax=numIterMax, stopThr=stopThr, verbose=verbose, log=log,
              warn=warn, **kwargs)
    r_ab = empirical_sinkhorn2(X_s, X_t, reg, a, b, warmstart=warmstart, **kw)
    r_a = empirical_sinkhorn2(X_s, X_s, reg, a, a, warmstart=warmstart_a, **kw)
    r_b = empirical_sinkhorn2(X_t, X_t, reg, b, b, warmstart=warmstart_b, **kw)
    if not log:
        return np.maximum(0, r_ab - 0.5 * (r_a + r_b))
    div = np.maximum(0, r_ab[0] - 0.5 * (r_a[0] + r_b[0]))
    lg = {"sinkhorn_loss_ab": r_ab[0], "sinkhorn_loss_a": r_a[0], "sinkhorn_loss_b": r_b[0],
          "log_sinkhorn_ab": r_ab[1], "log_sinkhorn_a": r_a[1], "log_sinkhorn_b": r_b[1]}
    return div, lg
