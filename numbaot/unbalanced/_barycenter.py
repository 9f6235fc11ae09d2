"""POT's unbalanced barycenters (``ot.unbalanced.barycenter_unbalanced*``),
step for step: NumPy ports of POT 0.9.7's host loops in float64, POT's control
flow, errors, warnings and ``log`` keys.  Host (NumPy) arrays only.
"""
import warnings

import numpy as np

from .. import _checks, _loops
from ._common import absorbing_loop, bad_step, rel_change

__all__ = ["barycenter_unbalanced", "barycenter_unbalanced_sinkhorn",
           "barycenter_unbalanced_stabilized"]


def _bary_setup(A, M, reg, reg_m, weights, numItermax, stopThr):
    A = _checks.as_real_array(A, "A")
    M = _checks.as_real_array(M, "M")
    dt = _checks.result_dtype(A, M)
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"A must be a 2-D array (dim, n_hists) with dim, n_hists >= 1; got shape {A.shape}")
    dim, n_hists = A.shape
    if M.shape != (dim, dim):
        raise ValueError(f"M must have shape (dim, dim) = {(dim, dim)}; got {M.shape}")
    A_in, A = A, A.astype(np.float64)
    M = M.astype(np.float64)
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A must be finite and >= 0")
    _checks.check_barycenter_masses(A_in, A.sum(axis=0), equal=False)
    if not np.all(np.isfinite(M)):
        raise ValueError("M contains NaN or inf; costs must be finite")
    reg = _checks.check_reg(reg)
    _checks.check_cost_scale(M, reg)
    reg_m = _checks.check_real_scalar(reg_m, "reg_m")
    if not np.isfinite(reg_m) or reg_m < 0:
        raise ValueError(f"reg_m must be a finite number >= 0 for barycenters; got {reg_m!r}")
    weights = _checks.check_barycenter_weights(weights, n_hists)
    numItermax = _checks.check_iter_count(numItermax, "numItermax")
    stopThr = _checks.check_stop_thr(stopThr)
    return A, M, dt, reg, reg_m, weights, numItermax, stopThr


def _bary_result(q, u, v, i, lg, dt):
    """The barycenter q in the result dtype and, when ``lg`` is a dict,
    lg['niter'] = i, lg['logu'], lg['logv'] = log(u + 1e-300), log(v + 1e-300)."""
    if lg is not None:
        lg["niter"] = i
        lg["logu"] = np.asarray(np.log(u + 1e-300), dt)
        lg["logv"] = np.asarray(np.log(v + 1e-300), dt)
    q = np.asarray(q, dt)
    return (q, lg) if lg is not None else q


def barycenter_unbalanced_sinkhorn(A, M, reg, reg_m, weights=None, numItermax=1000,
                                   stopThr=1e-6, verbose=False, log=False):
    r"""Entropic unbalanced barycenter; mirrors ``ot.unbalanced.barycenter_unbalanced_sinkhorn``.

    Chizat et al. 2018, Algorithm 2 with the barycentric proximal step:
    q = (sum_k w_k (K^T u_k)^(1 - fi))^(1 / (1 - fi)), fi = reg_m / (reg_m + reg).
    Host loop in float64, POT's control flow (err on q, stop when err < stopThr
    after more than 10 iterations).

    Parameters
    ----------
    A : array-like, shape (dim, n_hists), float32 or float64
        Histograms (columns: mass per bin; finite, >= 0, each of positive
        mass; masses may differ).  Host arrays of any real dtype: float16 is
        computed as float32, integers as float64.
    M : array-like, shape (dim, dim), float32 or float64
        Ground cost between bins (finite), units of the loss; any real
        dtype, as ``A``.
    reg : float
        Entropic regularisation (> 0), units of ``M``.
    reg_m : float
        Marginal relaxation (finite, >= 0), units of ``M``.
    weights : array-like, shape (n_hists,), optional
        Barycentric weights (>= 0, summing to 1); any real dtype, used as
        float64 (they do not set the result dtype).  Uniform by default.
    numItermax : int, default 1000
        Maximum number of iterations (0 <= numItermax <= 2**62).
    stopThr : float, default 1e-6
        Stop when the relative change of q, max|q - q_prev| / max(max|q|,
        max|q_prev|, 1), is < stopThr after more than 10 iterations (>= 0).
    verbose, log : bool
        As POT: print the error table; also return the log.

    Returns
    -------
    q : ndarray, shape (dim,)
        The unbalanced barycenter (mass per bin); float32 when ``A`` and
        ``M`` are both float32 (or float16), else float64 (iterations in
        float64).
    log : dict
        Only if ``log``: 'err', 'niter', 'logu', 'logv' (log(u + 1e-300),
        log(v + 1e-300), shape (dim, n_hists), of the result dtype).

    Raises
    ------
    TypeError
        Non-numeric, boolean, complex, masked or GPU arrays; non-numeric
        ``reg``, ``reg_m``, ``stopThr``; non-integer ``numItermax``.
    ValueError
        A not 2-D or empty, negative or not finite; M not of shape (dim, dim)
        or not finite; a histogram of zero mass (POT: "Numerical errors" and
        a meaningless result); weights of the wrong shape, negative, not
        finite or not summing to 1 (POT does not normalise them); reg <= 0
        or not finite; max|M| / reg > 2**52; reg_m < 0 or infinite;
        numItermax < 0; stopThr NaN or < 0.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s".

    References
    ----------
    .. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018, Algorithm 2.
    .. [2] POT 0.9.7, ``ot.unbalanced.barycenter_unbalanced_sinkhorn``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> A = np.array([[0.5, 0.0], [0.5, 0.2], [0.0, 0.8]])  # two histograms
    >>> M = numbaot.dist(np.array([[0.0], [0.5], [1.0]]))
    >>> q = numbaot.unbalanced.barycenter_unbalanced_sinkhorn(A, M, 0.1, 1.0)
    >>> print(np.round(q, 4))
    [0.2135 0.4266 0.3528]
    """
    A, M, dt, reg, reg_m, weights, numItermax, stopThr = _bary_setup(
        A, M, reg, reg_m, weights, numItermax, stopThr)
    dim, n_hists = A.shape
    lg = {"err": []} if log else None
    K = np.exp(-M / reg)
    fi = reg_m / (reg_m + reg)
    v = np.ones((dim, n_hists))
    u = np.ones((dim, 1))
    q = np.ones(dim)
    i = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(numItermax):
            uprev, vprev, qprev = u.copy(), v.copy(), q.copy()
            Kv = K.dot(v)
            u = (A / Kv) ** fi
            Ktu = K.T.dot(u)
            q = (Ktu ** (1 - fi)).dot(weights)
            q = q ** (1 / (1 - fi))
            v = (q[:, None] / Ktu) ** fi
            if bad_step(Ktu, u, v):
                warnings.warn(_loops.NUMERICAL_ERRORS % i)
                u, v, q = uprev, vprev, qprev
                break
            err = rel_change(q, qprev)
            if log:
                lg["err"].append(dt.type(err))
            if err < stopThr and i > 10:
                break
            if verbose:
                _loops.print_header_and_row(i, err, 10)
        return _bary_result(q, u, v, i, lg, dt)


def barycenter_unbalanced_stabilized(A, M, reg, reg_m, weights=None, tau=1e3, numItermax=1000,
                                     stopThr=1e-6, verbose=False, log=False):
    r"""Stabilized entropic unbalanced barycenter; mirrors
    ``ot.unbalanced.barycenter_unbalanced_stabilized`` (absorption of
    scalings above ``tau``, Schmitzer 2019).

    Parameters
    ----------
    A, M, reg, reg_m, weights, numItermax, verbose, log
        As :func:`barycenter_unbalanced_sinkhorn` (same shapes, dtypes and
        units).
    stopThr : float, default 1e-6
        Stop when the relative change of q (as
        :func:`barycenter_unbalanced_sinkhorn`), taken at iteration 0 and
        every 10th iteration without absorption, is < stopThr.
    tau : float, default 1e3
        Absorption threshold on the scalings (finite, > 0).

    Returns
    -------
    q : ndarray, shape (dim,)
        The unbalanced barycenter; float32 when ``A`` and ``M`` are both
        float32 (or float16), else float64 (iterations in float64).
    log : dict
        Only if ``log``: 'err', 'niter', 'logu', 'logv' (of the result
        dtype).

    Raises
    ------
    TypeError, ValueError
        As :func:`barycenter_unbalanced_sinkhorn`; ``tau`` <= 0 or not
        finite (ValueError) or not a real number (TypeError).

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s"; "Stabilized Unbalanced Sinkhorn did
        not converge..." when err > stopThr at the end.

    References
    ----------
    .. [1] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3),
       A1443-A1481, 2019, Algorithm 2.
    .. [2] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018.
    .. [3] POT 0.9.7, ``ot.unbalanced.barycenter_unbalanced_stabilized``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> A = np.array([[0.5, 0.0], [0.5, 0.2], [0.0, 0.8]])  # two histograms
    >>> M = numbaot.dist(np.array([[0.0], [0.5], [1.0]]))
    >>> q = numbaot.unbalanced.barycenter_unbalanced_stabilized(A, M, 0.1, 1.0)
    >>> print(np.round(q, 4))
    [0.2135 0.4266 0.3528]
    """
    A, M, dt, reg, reg_m, weights, numItermax, stopThr = _bary_setup(
        A, M, reg, reg_m, weights, numItermax, stopThr)
    tau = _checks.check_reg(tau, "tau")
    dim, n_hists = A.shape
    lg = {"err": []} if log else None
    fi = reg_m / (reg_m + reg)
    u = np.ones((dim, n_hists)) / dim
    v = np.ones((dim, n_hists)) / dim
    K = np.exp(-M / reg)
    bar = {"q": np.ones(dim) / dim}

    def target(Ktu, f_beta):  # the barycenter step: q from K^T u, q_prev kept
        q = (Ktu ** (1 - fi)) * f_beta
        bar["qprev"], bar["q"] = bar["q"], q.dot(weights) ** (1 / (1 - fi))
        return bar["q"][:, None]

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        u, v, _, _, _, _, i, failed = absorbing_loop(
            K, M, A, target, u, v, reg, (reg_m, reg_m), (fi, fi), tau, numItermax, stopThr,
            lambda u, uprev: rel_change(bar["q"], bar["qprev"]), False, lg, dt, verbose, 50)
        q = bar["qprev"] if failed else bar["q"]
        return _bary_result(q, u, v, i, lg, dt)


def barycenter_unbalanced(A, M, reg, reg_m, method="sinkhorn", weights=None, numItermax=1000,
                          stopThr=1e-6, verbose=False, log=False, **kwargs):
    r"""Entropic unbalanced barycenter; mirrors ``ot.unbalanced.barycenter_unbalanced``.

    Parameters
    ----------
    A, M, reg, reg_m, weights, numItermax, stopThr, verbose, log
        As :func:`barycenter_unbalanced_sinkhorn`.
    method : str, default 'sinkhorn'
        'sinkhorn' (:func:`barycenter_unbalanced_sinkhorn`),
        'sinkhorn_stabilized' (:func:`barycenter_unbalanced_stabilized`);
        'sinkhorn_reg_scaling' and 'sinkhorn_translation_invariant' warn
        "Method not implemented yet. Using classic Sinkhorn Knopp" and use
        'sinkhorn', as POT.
    **kwargs
        Passed to the solver (``tau`` for 'sinkhorn_stabilized').

    Returns
    -------
    q : ndarray, shape (dim,)
        The unbalanced barycenter; float32 when ``A`` and ``M`` are both
        float32 (or float16), else float64.
    log : dict
        Only if ``log``: the solver's.

    Raises
    ------
    ValueError
        "Unknown method '<method>'." and the solvers' errors.
    TypeError
        ``method`` not a string; a keyword the solver does not take (e.g.
        ``tau`` with 'sinkhorn'); the solvers' errors.

    References
    ----------
    .. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018.
    .. [2] POT 0.9.7, ``ot.unbalanced.barycenter_unbalanced``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> A = np.array([[0.5, 0.0], [0.5, 0.2], [0.0, 0.8]])  # two histograms
    >>> M = numbaot.dist(np.array([[0.0], [0.5], [1.0]]))
    >>> q = numbaot.unbalanced.barycenter_unbalanced(A, M, 0.1, 1.0, method="sinkhorn_stabilized")
    >>> print(np.round(q, 4))
    [0.2135 0.4266 0.3528]
    """
    method = _checks.check_method(method, ("sinkhorn", "sinkhorn_stabilized",
                                           "sinkhorn_reg_scaling",
                                           "sinkhorn_translation_invariant"))
    if method == "sinkhorn_stabilized":
        return barycenter_unbalanced_stabilized(A, M, reg, reg_m, weights=weights,
                                                numItermax=numItermax, stopThr=stopThr,
                                                verbose=verbose, log=log, **kwargs)
    if method != "sinkhorn":
        warnings.warn("Method not implemented yet. Using classic Sinkhorn Knopp")
    return barycenter_unbalanced_sinkhorn(A, M, reg, reg_m, weights=weights,
                                          numItermax=numItermax, stopThr=stopThr,
                                          verbose=verbose, log=log, **kwargs)
