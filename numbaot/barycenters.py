r"""Entropic Wasserstein barycenters, drop-in for POT 0.9.7's ``ot.bregman``
barycenter functions (exported from :mod:`numbaot.bregman`; ``barycenter``
also top-level, as ``ot.barycenter``).

The barycenter of histograms a_1..a_H (columns of ``A``) with weights w is

    argmin_a sum_k w_k W_reg(a, a_k)

solved by iterative Bregman projections (Benamou, Carlier, Cuturi, Nenna &
Peyre 2015, "Iterative Bregman projections for regularized transportation
problems", Prop. 1 / eq. (12)), step for step as POT 0.9.7: same stopping
tests (every 10 iterations), same ``log`` keys, same warnings.  numbaot reads
the kernel (or the cost matrix, in the log domain) once per iteration for all
histograms: the row pass forms K u (or the row logsumexp) and the same sweep
accumulates the column sums (``numbaot.cpu.sinkhorn.knopp_fused_pass`` /
``log_fused_pass``).  ``convolutional_barycenter2d`` uses the separable
Gaussian kernel of the image grid (Solomon et al. 2015, "Convolutional
Wasserstein distances", Alg. 2): BLAS matrix products in the multiplicative
form, numbaot's log-domain separable convolution otherwise.
"""
import warnings

import numpy as np

from . import _checks
from .bregman import _NOT_CONVERGED, _print_header_and_row
from .cpu import chunk_layout
from .cpu import barycenter as _kb
from .cpu import sinkhorn as _k

__all__ = ["barycenter", "barycenter_sinkhorn", "barycenter_stabilized",
           "convolutional_barycenter2d"]


def _check_A(A, M=None, name="A"):
    A = _checks.as_real_array(A, name)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D (dim, n_hists); got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} must hold at least one histogram of at least one bin")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(A < 0):
        raise ValueError(f"{name} has negative entries; histograms must be >= 0")
    if M is not None:
        M = _checks.as_real_array(M, "M")
        if M.shape != (A.shape[0], A.shape[0]):
            raise ValueError(f"M must have shape ({A.shape[0]}, {A.shape[0]}) for histograms "
                             f"of {A.shape[0]} bins; got {M.shape}")
        if not np.all(np.isfinite(M)):
            raise ValueError("M contains NaN or inf; costs must be finite")
    return A, M


def _check_weights(weights, n_hists):
    if weights is None:
        return np.full(n_hists, 1.0 / n_hists)
    w = _checks.as_real_array(weights, "weights").astype(np.float64)
    if w.shape != (n_hists,):
        raise ValueError(f"weights must have shape ({n_hists},) (one per histogram); "
                         f"got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and >= 0")
    return w


def _common(reg, numItermax, stopThr):
    return (_checks.check_reg(reg), _checks.check_iter_count(numItermax, "numItermax"),
            _checks.check_real_scalar(stopThr, "stopThr"))


def _geometric_bar(w, X):
    """exp(sum_k w_k log X[:, k]) (POT's geometricBar), X (dim, n_hists)."""
    with np.errstate(divide="ignore"):
        return np.exp(np.log(X) @ w)


def barycenter(A, M, reg, weights=None, method="sinkhorn", numItermax=10000, stopThr=1e-4,
               verbose=False, log=False, warn=True, **kwargs):
    r"""Entropic Wasserstein barycenter; mirrors ``ot.bregman.barycenter``.

    Parameters
    ----------
    A : array-like, shape (dim, n_hists)
        Histograms (columns, non-negative, same mass), on bins of cost ``M``.
    M : array-like, shape (dim, dim)
        Ground cost between bins.
    reg : float
        Entropic regularisation (> 0), units of ``M``.
    weights : array-like, shape (n_hists,), optional
        Barycentric weights (default uniform).
    method : {'sinkhorn', 'sinkhorn_log', 'sinkhorn_stabilized'}
        :func:`barycenter_sinkhorn`, the log-domain iteration (stable for
        small reg, e.g. 1e-3 where the multiplicative one underflows), or
        :func:`barycenter_stabilized`.
    numItermax : int, default 10000
    stopThr : float, default 1e-4
        Stop when the error (see each method) falls below it.
    verbose, log, warn, **kwargs
        As POT (``tau`` for 'sinkhorn_stabilized').

    Returns
    -------
    a : ndarray, shape (dim,), dtype of the inputs
        The barycenter.
    log : dict, only if ``log=True``: 'err', 'niter' (and 'logu', 'logv' for
        'sinkhorn_stabilized').

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."``; reg <= 0; A not 2-D, negative or not
        finite; M of the wrong shape or not finite; weights of the wrong length.
    TypeError
        Non-numeric input.
    """
    meth = _checks.check_method(method, ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_log"))
    if meth == "sinkhorn":
        return barycenter_sinkhorn(A, M, reg, weights=weights, numItermax=numItermax,
                                   stopThr=stopThr, verbose=verbose, log=log, warn=warn, **kwargs)
    if meth == "sinkhorn_stabilized":
        return barycenter_stabilized(A, M, reg, weights=weights, numItermax=numItermax,
                                     stopThr=stopThr, verbose=verbose, log=log, warn=warn,
                                     **kwargs)
    return _barycenter_sinkhorn_log(A, M, reg, weights=weights, numItermax=numItermax,
                                    stopThr=stopThr, verbose=verbose, log=log, warn=warn,
                                    **kwargs)


def barycenter_sinkhorn(A, M, reg, weights=None, numItermax=1000, stopThr=1e-4, verbose=False,
                        log=False, warn=True):
    r"""Entropic barycenter by Bregman projections (multiplicative); mirrors
    ``ot.bregman.barycenter_sinkhorn``.

    One iteration: UKv = u * K^T (A / (K u)), u <- u * geometricBar(w, UKv) / UKv
    (Benamou et al. 2015, eq. (12)); error every 10 iterations (ii % 10 == 1):
    sum over bins of the standard deviation of UKv across histograms.
    Parameters, returns and exceptions as :func:`barycenter`.
    """
    A, M = _check_A(A, M)
    reg, numItermax, stopThr = _common(reg, numItermax, stopThr)
    dt = _checks.result_dtype(A, M)
    dim, H = A.shape
    w = _check_weights(weights, H)
    Kmat = np.empty((dim, dim))
    _k.gibbs_kernel(np.ascontiguousarray(M, dtype=np.float64), -1.0 / reg, np.zeros(dim),
                    np.zeros(dim), Kmat)
    Af = A.astype(np.float64)
    AT = np.ascontiguousarray(Af.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        UKv = Kmat @ (Af.T / Kmat.sum(0)).T
        gm = np.exp(np.mean(np.log(UKv), axis=1))
        u = np.ascontiguousarray((gm / UKv.T))  # (H, dim), problem-major
    n_chunks, chunk_rows = chunk_layout(dim, H, dim)
    Q = np.empty((n_chunks, H, dim))
    q = np.empty((H, dim))
    unew = np.empty((H, dim))
    lg = {"err": []} if log else None
    ii = 0
    converged = False
    UKvT = UKv.T
    for ii in range(numItermax):
        with np.errstate(divide="ignore", invalid="ignore"):
            _k.knopp_fused_pass(Kmat, AT, u, n_chunks, chunk_rows, Q, unew, q)
            UKvT = u * q
            bar = _geometric_bar(w, UKvT.T)
            u = np.ascontiguousarray(u * bar[None, :] / UKvT)
        if ii % 10 == 1:
            err = dt.type(np.sum(np.std(UKvT.T, axis=1)))
            if log:
                lg["err"].append(err)
            if err < stopThr:
                converged = True
                break
            if verbose:
                _print_header_and_row(ii, err, 200)
    if not converged and warn:
        warnings.warn(_NOT_CONVERGED)
    bar = _geometric_bar(w, np.asarray(UKvT).T).astype(dt)
    if np.any(np.isnan(bar)):
        warnings.warn("the barycenter has NaN entries: the Gibbs kernel exp(-M/reg) "
                      "underflowed at this reg; use method='sinkhorn_log'")
    if log:
        lg["niter"] = ii
        return bar, lg
    return bar


def _barycenter_sinkhorn_log(A, M, reg, weights=None, numItermax=1000, stopThr=1e-4,
                             verbose=False, log=False, warn=True):
    """Log-domain Bregman projections (POT's ``_barycenter_sinkhorn_log``):
    f_k = log A_k - LSE_j(-M_ij/reg + G_jk), log KU_k = LSE_i(-M_ij/reg + f_ik),
    log_bar = sum_k w_k log KU_k, G = log_bar - log KU; one sweep over M per
    iteration for all histograms."""
    A, M = _check_A(A, M)
    reg, numItermax, stopThr = _common(reg, numItermax, stopThr)
    dt = _checks.result_dtype(A, M)
    dim, H = A.shape
    w = _check_weights(weights, H)
    Mf = np.ascontiguousarray(M, dtype=np.float64)
    c = -1.0 / reg
    logA = np.ascontiguousarray(np.log(A.astype(np.float64) + 1e-16).T)  # (H, dim)
    G = np.zeros((H, dim))
    G_old = np.zeros((H, dim))
    f = np.zeros((H, dim))
    q = np.empty((H, dim))
    n_chunks, chunk_rows = chunk_layout(dim, H, dim)
    Q = np.empty((n_chunks, H, dim))
    active = np.ones(H, dtype=np.bool_)
    dv = np.zeros(H)
    lse = np.empty((H, dim))
    lg = {"err": []} if log else None
    converged = False
    shift_ok = False
    ii = 0
    log_bar = np.zeros(dim)
    for ii in range(numItermax):
        if shift_ok:
            dv = np.max(G - G_old, axis=1)
        _k.log_fused_pass(Mf, c, logA, G, shift_ok, dv, active, n_chunks, chunk_rows, Q, f, q)
        shift_ok = True
        G_old[:, :] = G
        if np.all(q > 1e-290):
            log_KU = np.log(q) - G
        else:  # some column sums underflowed: the safe tiled column logsumexp
            _k.log_col_lse(Mf, c, f, n_chunks, chunk_rows, lse)
            log_KU = lse.copy()
        log_bar = w @ log_KU
        if ii % 10 == 1:
            err = dt.type(np.exp(G + log_KU).std(axis=0).sum())
            if log:
                lg["err"].append(err)
            if err < stopThr:
                converged = True
                break
            if verbose:
                _print_header_and_row(ii, err, 200)
        G = np.ascontiguousarray(log_bar[None, :] - log_KU)
    if not converged and warn:
        warnings.warn(_NOT_CONVERGED)
    bar = np.exp(log_bar).astype(dt)
    if log:
        lg["niter"] = ii
        return bar, lg
    return bar


def barycenter_stabilized(A, M, reg, tau=1e10, weights=None, numItermax=1000, stopThr=1e-4,
                          verbose=False, log=False, warn=True):
    r"""Entropic barycenter with log absorption of large scalings; mirrors
    ``ot.bregman.barycenter_stabilized`` (Schmitzer 2019, "Stabilized sparse
    scaling algorithms", Alg. 2, applied to Bregman projections), step for
    step: absorption when max(u, v) > ``tau``, error max|u K v - A| at
    ii % 10 == 0 (when not absorbing) and at ii == 0, "Numerical errors at
    iteration %s" (previous barycenter returned) and POT's own non-convergence
    text.  Parameters, returns and exceptions as :func:`barycenter`
    (``tau``: absorption threshold, positional 4th as in POT).
    """
    A, M = _check_A(A, M)
    reg, numItermax, stopThr = _common(reg, numItermax, stopThr)
    tau = _checks.check_real_scalar(tau, "tau")
    dt = _checks.result_dtype(A, M)
    dim, H = A.shape
    w = _check_weights(weights, H)
    Mf = np.ascontiguousarray(M, dtype=np.float64)
    Af = A.astype(np.float64)
    AT = np.ascontiguousarray(Af.T)
    u = np.full((H, dim), 1.0 / dim)
    v = np.full((H, dim), 1.0 / dim)
    Kmat = np.empty((dim, dim))
    _k.gibbs_kernel(Mf, -1.0 / reg, np.zeros(dim), np.zeros(dim), Kmat)
    alpha = np.zeros(dim)
    beta = np.zeros(dim)
    qbar = np.full(dim, 1.0 / dim)
    n_chunks, chunk_rows = chunk_layout(dim, H, dim)
    Q = np.empty((n_chunks, H, dim))
    Ktu = np.empty((H, dim))
    lg = {"err": []} if log else None
    converged = False
    ii = 0
    for ii in range(numItermax):
        qprev = qbar
        with np.errstate(divide="ignore", invalid="ignore"):
            _k.knopp_fused_pass(Kmat, AT, v, n_chunks, chunk_rows, Q, u, Ktu)
            qbar = _geometric_bar(w, Ktu.T)
            v = np.ascontiguousarray(qbar[None, :] / Ktu)
        absorbing = False
        if np.any(u > tau) or np.any(v > tau):
            absorbing = True
            with np.errstate(divide="ignore"):
                alpha = alpha + reg * np.log(np.max(u, 0))
                beta = beta + reg * np.log(np.max(v, 0))
            _k.gibbs_kernel(Mf, -1.0 / reg, alpha / reg, beta / reg, Kmat)
            v = np.ones((H, dim))
        if (np.any(Ktu == 0.0) or np.any(np.isnan(u)) or np.any(np.isnan(v))
                or np.any(np.isinf(u)) or np.any(np.isinf(v))):
            warnings.warn("Numerical errors at iteration %s" % ii)
            qbar = qprev
            converged = True  # left by break as in POT: no "did not converge" warning
            break
        if (ii % 10 == 0 and not absorbing) or ii == 0:
            Kv = v @ Kmat.T  # (K v_k) for every histogram
            err = dt.type(np.max(np.abs(u * Kv - AT)))
            if log:
                lg["err"].append(err)
            if err < stopThr:
                converged = True
                break
            if verbose:
                if ii % 50 == 0:
                    print("{:5s}|{:12s}".format("It.", "Err") + "\n" + "-" * 19)
                print("{:5d}|{:8e}|".format(ii, err))
    if not converged and warn:
        warnings.warn("Stabilized Sinkhorn did not converge." + "Try a larger entropy `reg`"
                      + "Or a larger absorption threshold `tau`.")
    if log:
        lg["niter"] = ii
        lg["logu"] = np.log(u.T + 1e-16).astype(dt)
        lg["logv"] = np.log(v.T + 1e-16).astype(dt)
        return qbar.astype(dt), lg
    return qbar.astype(dt)


_CONV_NOT_CONVERGED = (
    "Convolutional Sinkhorn did not converge. "
    "Try a larger number of iterations `numItermax` "
    "or a larger entropy `reg`."
)


def _grid_costs(n, reg):
    t = np.linspace(0, 1, n)
    return -((t[:, None] - t[None, :]) ** 2) / reg


def convolutional_barycenter2d(A, reg, weights=None, method="sinkhorn", numItermax=10000,
                               stopThr=1e-4, verbose=False, log=False, warn=True, **kwargs):
    r"""Entropic barycenter of 2-D images on the unit square grid; mirrors
    ``ot.bregman.convolutional_barycenter2d`` (Solomon et al. 2015, Alg. 2).

    The Gibbs kernel of the squared distance on a width x height grid of
    [0, 1]^2 is separable: K img = K1 img K2 with K1, K2 the 1-D kernels
    exp(-(t_i - t_j)^2 / reg); the image is never flattened into a
    (width height)^2 kernel.

    Parameters
    ----------
    A : array-like, shape (n_hists, width, height)
        Non-negative images of equal mass (non-square allowed).
    reg : float
        Entropic regularisation (> 0), in squared units of the unit square.
    weights : array-like, shape (n_hists,), optional
    method : {'sinkhorn', 'sinkhorn_log'}
        Multiplicative (BLAS matrix products) or log domain (numbaot's
        separable log-convolution kernel, ``numbaot.cpu.barycenter``).
    numItermax, stopThr, verbose, log, warn, **kwargs
        As POT; ``stabThr`` may be passed in kwargs.

    Returns
    -------
    bar : ndarray, shape (width, height)
    log : dict, only if ``log=True``: 'err', 'niter' (and 'U', 'V' for 'sinkhorn').

    Raises
    ------
    ValueError
        Unknown method; A not 3-D, negative or not finite; reg <= 0; weights
        of the wrong length.
    """
    meth = _checks.check_method(method, ("sinkhorn", "sinkhorn_log"))
    A = _checks.as_real_array(A, "A")
    if A.ndim != 3 or 0 in A.shape:
        raise ValueError(f"A must be 3-D (n_hists, width, height); got shape {A.shape}")
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A must be finite and >= 0")
    reg, numItermax, stopThr = _common(reg, numItermax, stopThr)
    stabThr = _checks.check_real_scalar(kwargs.get("stabThr", 1e-30), "stabThr")
    dt = _checks.result_dtype(A)
    H, W, Hh = A.shape
    w = _check_weights(weights, H)
    Af = A.astype(np.float64)
    M1, M2 = _grid_costs(W, reg), _grid_costs(Hh, reg)
    lg = {"err": []} if log else None
    converged = False
    ii = 0
    if meth == "sinkhorn":
        K1, K2 = np.exp(M1), np.exp(M2)

        def conv(imgs):
            return np.matmul(np.matmul(K1, imgs), K2.T)

        bar = np.ones((W, Hh)) / (W * Hh)
        U = np.ones(A.shape)
        V = np.ones(A.shape)
        KU = conv(U)
        for ii in range(numItermax):
            with np.errstate(divide="ignore", invalid="ignore"):
                V = bar[None] / KU
                KV = conv(V)
                U = Af / KV
                KU = conv(U)
                bar = np.exp(np.sum(w[:, None, None] * np.log(KU + stabThr), axis=0))
            if ii % 10 == 9:
                err = dt.type(np.sum(np.std(V * KU, axis=0)))
                if log:
                    lg["err"].append(err)
                if verbose:
                    _print_conv(ii, err)
                if err < stopThr:
                    converged = True
                    break
        if not converged and warn:
            warnings.warn(_CONV_NOT_CONVERGED)
        if log:
            lg["niter"] = ii
            lg["U"] = U.astype(dt)
            lg["V"] = V.astype(dt)
            return bar.astype(dt), lg
        return bar.astype(dt)

    M1c, M2c = np.ascontiguousarray(M1), np.ascontiguousarray(M2)
    tmp = np.empty((W, Hh))

    def log_conv(img, out):
        _kb.log_convolve2d(M1c, M2c, img, tmp, out)

    logA = np.log(Af + stabThr)
    log_KU = np.zeros(A.shape)
    G = np.zeros(A.shape)
    f = np.empty((W, Hh))
    lc = np.empty((W, Hh))
    log_bar = np.zeros((W, Hh))
    for ii in range(numItermax):
        log_bar = np.zeros((W, Hh))
        for k in range(H):
            log_conv(np.ascontiguousarray(G[k]), lc)
            f = logA[k] - lc
            log_conv(np.ascontiguousarray(f), log_KU[k])
            log_bar = log_bar + w[k] * log_KU[k]
        if ii % 10 == 9:
            err = dt.type(np.exp(G + log_KU).std(axis=0).sum())
            if log:
                lg["err"].append(err)
            if verbose:
                _print_conv(ii, err)
            if err < stopThr:
                converged = True
                break
        G = log_bar[None, :, :] - log_KU
    if not converged and warn:
        warnings.warn(_CONV_NOT_CONVERGED)
    if log:
        lg["niter"] = ii
        return np.exp(log_bar).astype(dt), lg
    return np.exp(log_bar).astype(dt)


def _print_conv(ii, err):
    """POT's ``_print_report`` of the convolutional barycenters."""
    if ii % 200 == 0:
        print("{:5s}|{:12s}".format("It.", "Err") + "\n" + "-" * 19)
    print("{:5d}|{:8e}|".format(ii, err))
