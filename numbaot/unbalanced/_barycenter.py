"""POT's unbalanced barycenters (``ot.unbalanced.barycenter_unbalanced*``),
step for step: NumPy ports of POT 0.9.7's host loops in float64, POT's control
flow, errors, warnings and ``log`` keys.  Host (NumPy) arrays only.
"""
import warnings

import numpy as np

from .. import _checks, _loops
from ._common import bad_step, rel_change

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
    A = A.astype(np.float64)
    M = M.astype(np.float64)
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A must be finite and >= 0")
    if not np.all(np.isfinite(M)):
        raise ValueError("M contains NaN or inf; costs must be finite")
    reg = _checks.check_reg(reg)
    reg_m = _checks.check_real_scalar(reg_m, "reg_m")
    if not np.isfinite(reg_m) or reg_m < 0:
        raise ValueError(f"reg_m must be a finite number >= 0 for barycenters; got {reg_m!r}")
    if weights is None:
        weights = np.ones(n_hists) / n_hists
    else:
        weights = _checks.as_real_array(weights, "weights").astype(np.float64)
        if weights.shape != (n_hists,):
            raise ValueError(f"weights must have shape (n_hists,) = ({n_hists},); got {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("weights must be finite and >= 0")
    numItermax = _checks.check_iter_count(numItermax, "numItermax")
    stopThr = _checks.check_real_scalar(stopThr, "stopThr")
    return A, M, dt, reg, reg_m, weights, numItermax, stopThr


def barycenter_unbalanced_sinkhorn(A, M, reg, reg_m, weights=None, numItermax=1000,
                                   stopThr=1e-6, verbose=False, log=False):
    r"""Entropic unbalanced barycenter; mirrors ``ot.unbalanced.barycenter_unbalanced_sinkhorn``.

    Chizat et al. 2018, Algorithm 2 with the barycentric proximal step:
    q = (sum_k w_k (K^T u_k)^(1 - fi))^(1 / (1 - fi)), fi = reg_m / (reg_m + reg).
    Host loop in float64, POT's control flow (err on q, stop when err < stopThr
    after more than 10 iterations).

    Parameters
    ----------
    A : array-like, shape (dim, n_hists)
        Histograms (finite, >= 0).
    M : array-like, shape (dim, dim)
        Ground cost (finite).
    reg : float
        Entropic regularisation (> 0).
    reg_m : float
        Marginal relaxation (finite, >= 0).
    weights : array-like, shape (n_hists,), optional
        Barycentric weights (>= 0); uniform by default.
    numItermax, stopThr, verbose, log
        As POT.

    Returns
    -------
    q : ndarray, shape (dim,), dtype of the inputs
    log : dict with 'err', 'niter', 'logu', 'logv', only if ``log``

    Raises
    ------
    TypeError, ValueError
        Malformed A, M, weights; reg <= 0; reg_m < 0 or infinite.

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
        if log:
            lg["niter"] = i
            lg["logu"] = np.asarray(np.log(u + 1e-300), dt)
            lg["logv"] = np.asarray(np.log(v + 1e-300), dt)
    q = np.asarray(q, dt)
    return (q, lg) if log else q


def barycenter_unbalanced_stabilized(A, M, reg, reg_m, weights=None, tau=1e3, numItermax=1000,
                                     stopThr=1e-6, verbose=False, log=False):
    r"""Stabilized entropic unbalanced barycenter; mirrors
    ``ot.unbalanced.barycenter_unbalanced_stabilized`` (absorption of
    scalings above ``tau``, Schmitzer 2019).

    Parameters
    ----------
    A, M, reg, reg_m, weights, numItermax, stopThr, verbose, log
        As :func:`barycenter_unbalanced_sinkhorn`.
    tau : float, default 1e3
        Absorption threshold (> 0).

    Returns
    -------
    q : ndarray, shape (dim,), dtype of the inputs
    log : dict with 'err', 'niter', 'logu', 'logv', only if ``log``

    Raises
    ------
    TypeError, ValueError
        As :func:`barycenter_unbalanced_sinkhorn`; ``tau`` <= 0.

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
    err = 1.0
    alpha = np.zeros(dim)
    beta = np.zeros(dim)
    q = np.ones(dim) / dim
    i = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(numItermax):
            qprev = q.copy()
            Kv = K.dot(v)
            f_alpha = np.exp(-alpha / (reg + reg_m))[:, None]
            f_beta = np.exp(-beta / (reg + reg_m))[:, None]
            u = ((A / (Kv + 1e-16)) ** fi) * f_alpha
            Ktu = K.T.dot(u)
            q = (Ktu ** (1 - fi)) * f_beta
            q = q.dot(weights) ** (1 / (1 - fi))
            v = ((q[:, None] / (Ktu + 1e-16)) ** fi) * f_beta
            absorbing = False
            if np.any(u > tau) or np.any(v > tau):
                absorbing = True
                alpha = alpha + reg * np.log(np.max(u, 1))
                beta = beta + reg * np.log(np.max(v, 1))
                K = np.exp((alpha[:, None] + beta[None, :] - M) / reg)
                v = np.ones(v.shape)
            if bad_step(Ktu, u, v):
                warnings.warn(_loops.NUMERICAL_ERRORS % i)
                q = qprev
                break
            if (i % 10 == 0 and not absorbing) or i == 0:
                err = rel_change(q, qprev)
                if log:
                    lg["err"].append(dt.type(err))
                if verbose:
                    _loops.print_header_and_row(i, err, 50)
                if err < stopThr:
                    break
        if err > stopThr:
            warnings.warn(_loops.STAB_UNBALANCED_NOT_CONVERGED)
        if log:
            lg["niter"] = i
            lg["logu"] = np.asarray(np.log(u + 1e-300), dt)
            lg["logv"] = np.asarray(np.log(v + 1e-300), dt)
    q = np.asarray(q, dt)
    return (q, lg) if log else q


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
    q : ndarray, shape (dim,), dtype of the inputs
    log : dict, only if ``log``

    Raises
    ------
    ValueError
        "Unknown method '<method>'." and the solvers' errors.

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
