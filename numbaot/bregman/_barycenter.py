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

Devices.  Every function also takes CUDA device arrays (numba device arrays,
CuPy arrays) for ``A``, ``M`` and ``weights`` (all on the GPU; ``weights``
may be None) and then returns device arrays of the caller's kind ('err'
and 'niter' of the log stay host numbers):

* ``barycenter_sinkhorn`` and the 'sinkhorn_log' method run on the CUDA
  kernels of ``numbaot.cuda.barycenter`` (with the balanced Sinkhorn
  half-step kernels of ``numbaot.cuda.sinkhorn``), in the input dtype, all
  histograms in one launch per half-step; ``M`` never leaves the device,
  ``A`` and ``weights`` (O(dim n_hists)) are validated on host copies and
  the host reads dim numbers per stopping test.  The stopping rule, the
  'err' list and the warnings come from the same loop as on the CPU
  (``_periodic_bary``).
* ``convolutional_barycenter2d(method='sinkhorn')`` runs on the CUDA
  kernels too (separable convolution of all images per launch); the images
  are validated on a host copy.
* ``barycenter_stabilized`` and ``convolutional_barycenter2d(method=
  'sinkhorn_log')`` run on host copies of the inputs (the CPU code above)
  and copy their results back to the device.

Mixing host and device arrays raises ``TypeError``; device arrays without
numba-cuda or a GPU raise ``numbaot._dispatch.CudaUnavailableError``.
"""
import warnings

import numpy as np

from .. import _checks, _dispatch, _loops
from ..cpu import chunk_layout
from ..cpu import barycenter as _kb
from ..cpu import sinkhorn as _k

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


def _geometric_bar(w, X):
    """exp(sum_k w_k log X[:, k]) (POT's geometricBar), X (dim, n_hists)."""
    with np.errstate(divide="ignore"):
        return np.exp(np.log(X) @ w)


def _periodic_bary(run, dtype, numItermax, stopThr, verbose, log, warn):
    """POT's control flow of ``barycenter_sinkhorn`` / ``_barycenter_sinkhorn_log``."""
    return _loops.periodic_loop(run, dtype, numItermax, stopThr, verbose, log, warn,
                                check_at=1, print_before_stop=False,
                                warning=_loops.NOT_CONVERGED)


def _periodic_conv(run, dtype, numItermax, stopThr, verbose, log, warn):
    """POT's control flow of the convolutional barycenters."""
    return _loops.periodic_loop(run, dtype, numItermax, stopThr, verbose, log, warn,
                                check_at=9, print_before_stop=True,
                                warning=_loops.CONV_NOT_CONVERGED)


def _on_device(**arrays):
    return _dispatch.device_of(**arrays) == "cuda"


def _device_problem(A, M, weights):
    """Validate a barycenter problem given on the GPU.

    ``A`` (dim, n_hists) and ``weights`` are O(dim n_hists): they are copied
    to the host and checked by the host code (same messages).  ``M`` stays on
    the device: dtype and shape checks, a device finiteness reduction, and a
    copy only when it is not C-contiguous or not of the result dtype.
    Returns (A as a host array, M on the device in the result dtype, weights
    as a host float64 array, result dtype)."""
    _dispatch.require_cuda()
    from ..cuda import sinkhorn as cu

    A, _ = _check_A(_dispatch.to_host(A))
    dim = A.shape[0]
    if not _dispatch.is_device_array(M):
        raise ValueError(f"M must have shape ({dim}, {dim}) for histograms of {dim} bins "
                         f"(a GPU array like A)")
    Md = _dispatch.as_device_array(M)
    if np.dtype(Md.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"M on the GPU must be float32 or float64; got dtype {Md.dtype}")
    if tuple(Md.shape) != (dim, dim):
        raise ValueError(f"M must have shape ({dim}, {dim}) for histograms of {dim} bins; "
                         f"got {tuple(Md.shape)}")
    if not cu.all_finite(Md):
        raise ValueError("M contains NaN or inf; costs must be finite")
    w = _check_weights(None if weights is None else _dispatch.to_host(weights), A.shape[1])
    dt = _checks.result_dtype(A, np.empty(1, dtype=Md.dtype))
    return A, cu.to_contiguous(Md, dt), w, dt


def _barycenter_cuda(meth, A, M, reg, weights, numItermax, stopThr, verbose, log, warn):
    """``barycenter_sinkhorn`` / ``_barycenter_sinkhorn_log`` on device arrays
    (kernels of ``numbaot.cuda.barycenter``, in the input dtype; the
    control flow is ``_periodic_bary``, as on the CPU)."""
    like = A
    A, Md, w, dt = _device_problem(A, M, weights)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    from numba import cuda

    from ..cuda import barycenter as cb
    from ..cuda import sinkhorn as cu

    dim, H = A.shape
    wd = cuda.to_device(w.astype(dt))
    Af = A.astype(np.float64)
    if meth == "sinkhorn":
        Kmat = cuda.device_array((dim, dim), dtype=dt)
        z = cuda.to_device(np.zeros(dim, dtype=dt))
        cu.gibbs_kernel(Md, -1.0 / reg, z, z, Kmat)
        st = cb.KnoppBaryState(Kmat, Af.T, wd)
        errs, ii = _periodic_bary(lambda want: cb.knopp_bary_step(st, want), dt, numItermax,
                              stopThr, verbose, log, warn)
        bar = st.bar
        if np.any(np.isnan(bar.copy_to_host())):
            warnings.warn("the barycenter has NaN entries: the Gibbs kernel exp(-M/reg) "
                          "underflowed at this reg; use method='sinkhorn_log'")
    else:
        logA = np.ascontiguousarray(np.log(Af + 1e-16).T, dtype=dt)
        st = cb.LogBaryState(Md, -1.0 / reg, cuda.to_device(logA), wd)
        errs, ii = _periodic_bary(lambda want: cb.log_bary_step(st, want), dt, numItermax,
                              stopThr, verbose, log, warn)
        bar = cuda.device_array(dim, dtype=dt)
        cb.exp_vec(st.logbar, bar)
    bar = _dispatch.like_input(bar, like)
    if log:
        return bar, {"err": errs, "niter": ii}
    return bar


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
        Non-numeric input; host and device arrays mixed; a device ``M`` that
        is not float32/float64.
    CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Notes
    -----
    Devices: NumPy arrays run on the CPU (float64 inside); CUDA device
    arrays run 'sinkhorn' and 'sinkhorn_log' on the CUDA kernels (input
    dtype) and 'sinkhorn_stabilized' on host copies; results come back as
    device arrays (see the module docstring).
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
    Parameters, returns and exceptions as :func:`barycenter`.  Devices: CPU
    (NumPy) or CUDA kernels (device arrays, input dtype).
    """
    if _on_device(A=A, M=M, weights=weights):
        return _barycenter_cuda("sinkhorn", A, M, reg, weights, numItermax, stopThr, verbose,
                                log, warn)
    A, M = _check_A(A, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
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
    s = {"u": u, "UKvT": UKv.T}

    def run(want_err):
        with np.errstate(divide="ignore", invalid="ignore"):
            _k.knopp_fused_pass(Kmat, AT, s["u"], n_chunks, chunk_rows, Q, unew, q)
            UKvT = s["u"] * q
            bar = _geometric_bar(w, UKvT.T)
            s["u"] = np.ascontiguousarray(s["u"] * bar[None, :] / UKvT)
        s["UKvT"] = UKvT
        return np.sum(np.std(UKvT.T, axis=1)) if want_err else None

    errs, ii = _periodic_bary(run, dt, numItermax, stopThr, verbose, log, warn)
    bar = _geometric_bar(w, np.asarray(s["UKvT"]).T).astype(dt)
    if np.any(np.isnan(bar)):
        warnings.warn("the barycenter has NaN entries: the Gibbs kernel exp(-M/reg) "
                      "underflowed at this reg; use method='sinkhorn_log'")
    if log:
        return bar, {"err": errs, "niter": ii}
    return bar


def _barycenter_sinkhorn_log(A, M, reg, weights=None, numItermax=1000, stopThr=1e-4,
                             verbose=False, log=False, warn=True):
    """Log-domain Bregman projections (POT's ``_barycenter_sinkhorn_log``):
    f_k = log A_k - LSE_j(-M_ij/reg + G_jk), log KU_k = LSE_i(-M_ij/reg + f_ik),
    log_bar = sum_k w_k log KU_k, G = log_bar - log KU; one sweep over M per
    iteration for all histograms.  Devices: CPU (NumPy) or CUDA kernels
    (device arrays, input dtype)."""
    if _on_device(A=A, M=M, weights=weights):
        return _barycenter_cuda("sinkhorn_log", A, M, reg, weights, numItermax, stopThr,
                                verbose, log, warn)
    A, M = _check_A(A, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    dt = _checks.result_dtype(A, M)
    dim, H = A.shape
    w = _check_weights(weights, H)
    Mf = np.ascontiguousarray(M, dtype=np.float64)
    c = -1.0 / reg
    logA = np.ascontiguousarray(np.log(A.astype(np.float64) + 1e-16).T)  # (H, dim)
    G_old = np.zeros((H, dim))
    f = np.zeros((H, dim))
    q = np.empty((H, dim))
    n_chunks, chunk_rows = chunk_layout(dim, H, dim)
    Q = np.empty((n_chunks, H, dim))
    active = np.ones(H, dtype=np.bool_)
    lse = np.empty((H, dim))
    s = {"G": np.zeros((H, dim)), "shift_ok": False, "dv": np.zeros(H),
         "log_bar": np.zeros(dim)}

    def run(want_err):
        G = s["G"]
        if s["shift_ok"]:
            s["dv"] = np.max(G - G_old, axis=1)
        _k.log_fused_pass(Mf, c, logA, G, s["shift_ok"], s["dv"], active, n_chunks,
                          chunk_rows, Q, f, q)
        s["shift_ok"] = True
        G_old[:, :] = G
        if np.all(q > 1e-290):
            log_KU = np.log(q) - G
        else:  # some column sums underflowed: the safe tiled column logsumexp
            _k.log_col_lse(Mf, c, f, n_chunks, chunk_rows, lse)
            log_KU = lse.copy()
        log_bar = w @ log_KU
        s["log_bar"] = log_bar
        err = np.exp(G + log_KU).std(axis=0).sum() if want_err else None
        s["G"] = np.ascontiguousarray(log_bar[None, :] - log_KU)
        return err

    errs, ii = _periodic_bary(run, dt, numItermax, stopThr, verbose, log, warn)
    bar = np.exp(s["log_bar"]).astype(dt)
    if log:
        return bar, {"err": errs, "niter": ii}
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
    (``tau``: absorption threshold, positional 4th as in POT).  Devices:
    device arrays run on host copies (CPU code), results copied back to the
    device.
    """
    if _on_device(A=A, M=M, weights=weights):
        return _dispatch.via_host(barycenter_stabilized, (A, M, reg, tau),
                              dict(weights=weights, numItermax=numItermax, stopThr=stopThr,
                                   verbose=verbose, log=log, warn=warn), like=A)
    A, M = _check_A(A, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
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
            warnings.warn(_loops.NUMERICAL_ERRORS % ii)
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
                _loops.print_header_and_row(ii, err, 50)
    if not converged and warn:
        warnings.warn("Stabilized Sinkhorn did not converge." + "Try a larger entropy `reg`"
                      + "Or a larger absorption threshold `tau`.")
    if log:
        lg["niter"] = ii
        lg["logu"] = np.log(u.T + 1e-16).astype(dt)
        lg["logv"] = np.log(v.T + 1e-16).astype(dt)
        return qbar.astype(dt), lg
    return qbar.astype(dt)


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
    TypeError
        Host and device arrays mixed.

    Notes
    -----
    Devices: with device arrays (``A``, ``weights``) 'sinkhorn' runs on the
    CUDA kernels (input dtype; ``A`` validated on a host copy) and
    'sinkhorn_log' on host copies (CPU code); ``bar`` and the arrays of
    ``log`` are device arrays.
    """
    meth = _checks.check_method(method, ("sinkhorn", "sinkhorn_log"))
    like = None
    if _on_device(A=A, weights=weights):
        if meth == "sinkhorn_log":
            return _dispatch.via_host(convolutional_barycenter2d, (A, reg),
                                  dict(weights=weights, method=meth, numItermax=numItermax,
                                       stopThr=stopThr, verbose=verbose, log=log, warn=warn,
                                       **kwargs), like=A)
        _dispatch.require_cuda()
        like = A  # images and weights (O(n_hists W H)) are validated on host copies
        A = _dispatch.to_host(A)
        if _dispatch.is_device_array(weights):
            weights = _dispatch.as_device_array(weights).copy_to_host()
    A = _checks.as_real_array(A, "A")
    if A.ndim != 3 or 0 in A.shape:
        raise ValueError(f"A must be 3-D (n_hists, width, height); got shape {A.shape}")
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A must be finite and >= 0")
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    stabThr = _checks.check_real_scalar(kwargs.get("stabThr", 1e-30), "stabThr")
    dt = _checks.result_dtype(A)
    H, W, Hh = A.shape
    w = _check_weights(weights, H)
    Af = A.astype(np.float64)
    M1, M2 = _grid_costs(W, reg), _grid_costs(Hh, reg)
    if meth == "sinkhorn" and like is not None:
        return _conv_cuda(Af, M1, M2, w, stabThr, dt, like, numItermax, stopThr, verbose, log,
                          warn)
    if meth == "sinkhorn":
        K1, K2 = np.exp(M1), np.exp(M2)

        def conv(imgs):
            return np.matmul(np.matmul(K1, imgs), K2.T)

        s = {"bar": np.ones((W, Hh)) / (W * Hh), "U": np.ones(A.shape), "V": np.ones(A.shape)}
        s["KU"] = conv(s["U"])

        def run(want_err):
            with np.errstate(divide="ignore", invalid="ignore"):
                s["V"] = s["bar"][None] / s["KU"]
                KV = conv(s["V"])
                s["U"] = Af / KV
                s["KU"] = conv(s["U"])
                s["bar"] = np.exp(np.sum(w[:, None, None] * np.log(s["KU"] + stabThr), axis=0))
            return np.sum(np.std(s["V"] * s["KU"], axis=0)) if want_err else None

        errs, ii = _periodic_conv(run, dt, numItermax, stopThr, verbose, log, warn)
        if log:
            lg = {"err": errs, "niter": ii, "U": s["U"].astype(dt), "V": s["V"].astype(dt)}
            return s["bar"].astype(dt), lg
        return s["bar"].astype(dt)

    M1c, M2c = np.ascontiguousarray(M1), np.ascontiguousarray(M2)
    tmp = np.empty((W, Hh))

    def log_conv(img, out):
        _kb.log_convolve2d(M1c, M2c, img, tmp, out)

    logA = np.log(Af + stabThr)
    log_KU = np.zeros(A.shape)
    lc = np.empty((W, Hh))
    s = {"G": np.zeros(A.shape), "log_bar": np.zeros((W, Hh))}

    def run(want_err):
        G = s["G"]
        log_bar = np.zeros((W, Hh))
        for k in range(H):
            log_conv(np.ascontiguousarray(G[k]), lc)
            f = logA[k] - lc
            log_conv(np.ascontiguousarray(f), log_KU[k])
            log_bar = log_bar + w[k] * log_KU[k]
        s["log_bar"] = log_bar
        err = np.exp(G + log_KU).std(axis=0).sum() if want_err else None
        s["G"] = log_bar[None, :, :] - log_KU
        return err

    errs, ii = _periodic_conv(run, dt, numItermax, stopThr, verbose, log, warn)
    if log:
        return np.exp(s["log_bar"]).astype(dt), {"err": errs, "niter": ii}
    return np.exp(s["log_bar"]).astype(dt)


def _conv_cuda(Af, M1, M2, w, stabThr, dt, like, numItermax, stopThr, verbose, log, warn):
    """Multiplicative convolutional barycenter on the device (kernels of
    ``numbaot.cuda.barycenter``, input dtype; control flow ``_periodic_conv``)."""
    from numba import cuda

    from ..cuda import barycenter as cb

    def dev(x):
        return cuda.to_device(np.ascontiguousarray(x, dtype=dt))

    st = cb.ConvBaryState(dev(Af), dev(np.exp(M1)), dev(np.exp(M2)), dev(w), stabThr)
    errs, ii = _periodic_conv(lambda want: cb.conv_bary_step(st, want), dt, numItermax, stopThr,
                          verbose, log, warn)
    bar = _dispatch.like_input(st.bar.reshape(*Af.shape[1:]), like)
    if log:
        lg = {"err": errs, "niter": ii, "U": _dispatch.like_input(st.U, like),
              "V": _dispatch.like_input(st.V, like)}
        return bar, lg
    return bar


