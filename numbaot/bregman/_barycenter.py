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

This module validates (once, for both devices), picks the launcher module
of the inputs' device once (``numbaot.cpu.barycenter`` or
``numbaot.cuda.barycenter``: the same ``KnoppBaryState`` /
``knopp_bary_step`` / ``knopp_bary_result`` and their ``log_`` and
``conv_`` counterparts) and runs it under POT's control flow
(``numbaot._loops.periodic_loop``).

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
  'err' list and the warnings come from the same loop as on the CPU.
* ``convolutional_barycenter2d(method='sinkhorn')`` runs on the CUDA
  kernels too (separable convolution of all images per launch); the images
  are validated on a host copy.
* ``barycenter_stabilized`` and ``convolutional_barycenter2d(method=
  'sinkhorn_log')`` run on host copies of the inputs (the CPU code) and
  copy their results back to the device.

Mixing host and device arrays raises ``TypeError``; device arrays without
numba-cuda or a GPU raise ``numbaot._dispatch.CudaUnavailableError``.
"""
import warnings
from dataclasses import dataclass

import numpy as np

from .. import _checks, _dispatch, _loops
from ..cpu import barycenter as cpu_barycenter
from ..cpu import chunk_layout
from ..cpu import sinkhorn as cpu_sinkhorn

__all__ = ["barycenter", "barycenter_sinkhorn", "barycenter_stabilized",
           "convolutional_barycenter2d"]

_NO_TAU = object()


def _backend(device):
    """The launcher module of the device (same launchers on both)."""
    if device == "cuda":
        from ..cuda import barycenter
        return barycenter
    return cpu_barycenter


@dataclass
class _Problem:
    """A validated barycenter problem.

    A : ndarray (dim, n_hists) float64 (a host copy for device inputs).
    M : the cost (dim, dim) as the launchers take it: host float64 C order,
        or a C-contiguous device array of ``dtype``; None for images.
    w : ndarray (n_hists,) float64, the weights.
    dtype : float32 or float64, the dtype of the results.
    device : "cpu" or "cuda".
    like : the caller's ``A`` (CUDA results come back as its array kind).
    """

    A: np.ndarray
    M: object
    w: np.ndarray
    dtype: np.dtype
    device: str
    like: object
    reg: float = 0.0
    numItermax: int = 0
    stopThr: float = 0.0
    tau: float = 0.0


def _check_A(A, name="A"):
    """The histograms (dim, n_hists), a host array (device inputs are
    validated on a host copy: O(dim n_hists))."""
    A = _checks.as_real_array(A, name)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D (dim, n_hists); got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} must hold at least one histogram of at least one bin")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(A < 0):
        raise ValueError(f"{name} has negative entries; histograms must be >= 0")
    return A


def _check_M(M, dim, device):
    """The cost (dim, dim), validated where it lives: a host array, or on
    the GPU a float32/float64 device array (never copied to the host), and
    max |M| from the same finiteness scan (one min/max pass on the host, one
    device reduction on the GPU) for ``_checks.check_cost_scale``.  Returns
    ``(M, absmax)``."""
    if device == "cuda":
        if not _dispatch.is_device_array(M):
            raise ValueError(f"M must have shape ({dim}, {dim}) for histograms of {dim} bins "
                             f"(a GPU array like A)")
        M = _dispatch.as_device_array(M)
        if np.dtype(M.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"M on the GPU must be float32 or float64; got dtype {M.dtype}")
    else:
        M = _checks.as_real_array(M, "M")
    if tuple(M.shape) != (dim, dim):
        raise ValueError(f"M must have shape ({dim}, {dim}) for histograms of {dim} bins; "
                         f"got {tuple(M.shape)}")
    if device == "cuda":
        absmax = _dispatch.device_finite_absmax(M)
        if not absmax < np.inf:
            raise ValueError("M contains NaN or inf; costs must be finite")
    else:
        absmax = _checks.finite_absmax(M, "M", "costs must be finite")
    return M, absmax




def _host_copies(device, *arrays):
    """The inputs validated on the host (O(dim n_hists): histograms, images,
    weights): host copies of them on the GPU path (after the CUDA probe),
    the inputs themselves on the CPU path."""
    if device == "cuda":
        _dispatch.require_cuda()
        return tuple(_dispatch.to_host(x) for x in arrays)
    return arrays


def _problem(A, M, weights, reg, numItermax, stopThr, tau=_NO_TAU):
    """Validate a barycenter problem on either device, in one order: A, M,
    reg / numItermax / stopThr (and tau), weights.  ``A`` and ``weights``
    (O(dim n_hists)) of a device problem are checked on host copies;
    ``M`` stays on its device."""
    device = _dispatch.device_of(A=A, M=M, weights=weights)
    like = A
    A, weights = _host_copies(device, A, weights)
    A = _check_A(A)
    M, absmax = _check_M(M, A.shape[0], device)  # shapes before masses
    _checks.check_barycenter_masses(A, A.sum(axis=0, dtype=np.float64), equal=True)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    _checks.check_cost_scale(M, reg, absmax=absmax)
    if tau is not _NO_TAU:
        tau = _checks.check_real_scalar(tau, "tau")
    dt = _checks.result_dtype(A, M)
    w = _checks.check_barycenter_weights(weights, A.shape[1])
    if device == "cuda":
        M = _dispatch.device_contiguous(M, dt)
    else:
        M = np.ascontiguousarray(M, dtype=np.float64)
    return _Problem(A.astype(np.float64), M, w, dt, device, like, reg, numItermax, stopThr,
                    tau)


def _periodic_bary(run, P, verbose, log, warn):
    """POT's control flow of ``barycenter_sinkhorn`` / ``_barycenter_sinkhorn_log``."""
    return _loops.periodic_loop(run, P.dtype, P.numItermax, P.stopThr, verbose, log, warn,
                                check_at=1, print_before_stop=False,
                                warning=_loops.NOT_CONVERGED)


def _periodic_conv(run, P, verbose, log, warn):
    """POT's control flow of the convolutional barycenters."""
    return _loops.periodic_loop(run, P.dtype, P.numItermax, P.stopThr, verbose, log, warn,
                                check_at=9, print_before_stop=True,
                                warning=_loops.CONV_NOT_CONVERGED)


def _result(P, x):
    """A launcher's result (an array of the result dtype on the problem's
    device) as the caller's array kind (CuPy for CuPy inputs)."""
    return _dispatch.like_input(x, P.like)


def barycenter(A, M, reg, weights=None, method="sinkhorn", numItermax=10000, stopThr=1e-4,
               verbose=False, log=False, warn=True, **kwargs):
    r"""Entropic Wasserstein barycenter; mirrors ``ot.bregman.barycenter``.

    Parameters
    ----------
    A : array-like or CUDA device array, shape (dim, n_hists), float32 or float64
        Histograms a_k (columns: mass of each bin; finite, >= 0, each of
        positive mass, all of the same mass), on bins of cost ``M``.  Host
        ``A`` may have any real dtype: float16 is computed as float32,
        integers as float64.
    M : array-like or CUDA device array, shape (dim, dim), float32 or float64
        Ground cost between bins (finite), in the units of the loss.  Host
        ``M`` may have any real dtype (float16 as float32, integers as
        float64); a device ``M`` must be float32 or float64.
    reg : float
        Entropic regularisation (finite, > 0), units of ``M``.
    weights : array-like or CUDA device array, shape (n_hists,), optional
        Barycentric weights w_k (>= 0, summing to 1 within 1.5e-6; 3.8e-6
        for float32, 0.031 for float16 weights); any real dtype, used as
        float64 (they do not set the result dtype).  Default uniform
        1 / n_hists.
    method : {'sinkhorn', 'sinkhorn_log', 'sinkhorn_stabilized'}, default 'sinkhorn'
        :func:`barycenter_sinkhorn`, the log-domain iteration (stable for
        small reg, e.g. 1e-3 where the multiplicative one underflows), or
        :func:`barycenter_stabilized`; case-insensitive.
    numItermax : int, default 10000
        Maximum number of iterations (0 <= numItermax <= 2**62).
    stopThr : float, default 1e-4
        Stop when the error (see each method), taken every 10 iterations,
        falls below it (>= 0).
    verbose, log, warn, **kwargs
        As POT (``tau`` for 'sinkhorn_stabilized'; the other methods take
        no extra keyword).

    Returns
    -------
    a : ndarray or CUDA device array, shape (dim,)
        The barycenter (mass per bin); float32 when ``A`` and ``M`` are both
        float32 (or float16), else float64.  A device array of ``A``'s kind
        for device inputs.
    log : dict, only if ``log=True``: 'err', 'niter' (and 'logu', 'logv' for
        'sinkhorn_stabilized').

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."``; reg <= 0 or not finite;
        numItermax < 0 or > 2**62; stopThr NaN or < 0; A not 2-D, empty,
        negative or not finite; a histogram (column of A) of zero mass, or
        histograms of unequal masses (relative difference above 1.5e-6,
        3.8e-6 for float32 A; POT returns NaN or an unconverged result); M
        of the wrong shape or not finite; max|M| / reg > 2**52; weights of
        the wrong length, negative, not finite, or not summing to 1 (POT does
        not normalise them and returns ones for zero weights, inf/NaN for
        weights summing to 3).
    TypeError
        ``method`` not a string; non-numeric, boolean, complex or masked
        arrays; non-numeric ``reg``, ``stopThr`` (or ``tau``); non-integer
        ``numItermax``; a keyword the method does not take; host and device
        arrays mixed; a device ``M`` that is not float32/float64.
    numbaot._dispatch.CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Notes
    -----
    Devices: NumPy arrays run on the CPU (float64 inside); CUDA device
    arrays run 'sinkhorn' and 'sinkhorn_log' on the CUDA kernels (input
    dtype) and 'sinkhorn_stabilized' on host copies; results come back as
    device arrays (see the module docstring).

    References
    ----------
    .. [1] J.-D. Benamou, G. Carlier, M. Cuturi, L. Nenna, G. Peyre, "Iterative
       Bregman Projections for Regularized Transportation Problems", SIAM J.
       Sci. Comput. 37(2), A1111-A1138, 2015, Prop. 1.
    .. [2] POT 0.9.7, ``ot.bregman.barycenter`` (``ot.barycenter``).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> A = np.array([[0.5, 0.0], [0.5, 0.5], [0.0, 0.5]])  # two histograms
    >>> M = numbaot.dist(np.array([[0.0], [0.5], [1.0]]))
    >>> bary = numbaot.bregman.barycenter(A, M, 0.1, method="sinkhorn_log")
    >>> print(np.round(bary, 4))
    [0.2508 0.4983 0.2508]
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
    Devices: CPU (NumPy) or CUDA kernels (device arrays, input dtype).

    Parameters
    ----------
    A : array-like or CUDA device array, shape (dim, n_hists), float32 or float64
        Histograms (columns: mass per bin; finite, >= 0, of equal positive
        masses).  Host ``A`` may have any real dtype: float16 is computed as
        float32, integers as float64.
    M : array-like or CUDA device array, shape (dim, dim), float32 or float64
        Ground cost between bins (finite), units of the loss; host ``M`` of
        any real dtype, as ``A``; a device ``M`` must be float32 or float64.
    reg : float
        Entropic regularisation (finite, > 0), units of ``M``.
    weights : array-like or CUDA device array, shape (n_hists,), optional
        Barycentric weights (>= 0, summing to 1); any real dtype, used as
        float64.  Default uniform.
    numItermax : int, default 1000
        Maximum number of iterations (0 <= numItermax <= 2**62).
    stopThr : float, default 1e-4
        Stop when the error above, taken at ii % 10 == 1, is < stopThr (>= 0).
    verbose, log, warn : bool
        As POT: print the error table; also return the log; warn when
        ``numItermax`` is reached without convergence.

    Returns
    -------
    a : ndarray or CUDA device array, shape (dim,)
        The barycenter; float32 when ``A`` and ``M`` are both float32 (or
        float16), else float64 (a device array of ``A``'s kind for device
        inputs).
    log : dict
        Only if ``log=True``: 'err' (errors at the checks, host scalars of
        the result dtype) and 'niter' (last iteration index).

    Raises
    ------
    ValueError
        reg <= 0 or not finite; numItermax < 0 or > 2**62; stopThr NaN or
        < 0; A not 2-D, empty, negative or not finite; a histogram of zero
        mass or histograms of unequal masses; M of the wrong shape or not
        finite; max|M| / reg > 2**52; weights of the wrong length, negative,
        not finite or not summing to 1 (as :func:`barycenter`).
    TypeError
        Non-numeric, boolean, complex or masked arrays; non-numeric ``reg``
        or ``stopThr``; non-integer ``numItermax``; host and device arrays
        mixed; a device ``M`` that is not float32/float64.
    numbaot._dispatch.CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``); "the barycenter has
        NaN entries ..." when the Gibbs kernel underflowed (use
        ``method='sinkhorn_log'`` of :func:`barycenter`).

    References
    ----------
    .. [1] J.-D. Benamou, G. Carlier, M. Cuturi, L. Nenna, G. Peyre, "Iterative
       Bregman Projections for Regularized Transportation Problems", SIAM J.
       Sci. Comput. 37(2), A1111-A1138, 2015, eq. (12).
    .. [2] POT 0.9.7, ``ot.bregman.barycenter_sinkhorn``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> A = np.array([[0.5, 0.0], [0.5, 0.5], [0.0, 0.5]])  # two histograms
    >>> M = numbaot.dist(np.array([[0.0], [0.5], [1.0]]))
    >>> print(np.round(numbaot.bregman.barycenter_sinkhorn(A, M, 0.1), 4))
    [0.2508 0.4983 0.2508]
    """
    P = _problem(A, M, weights, reg, numItermax, stopThr)
    be = _backend(P.device)
    st = be.KnoppBaryState(P.M, -1.0 / P.reg, P.A, P.w)
    errs, ii = _periodic_bary(lambda want: be.knopp_bary_step(st, want), P, verbose, log, warn)
    bar = _result(P, be.knopp_bary_result(st, P.dtype))
    if np.any(np.isnan(_dispatch.to_host(bar))):
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
    P = _problem(A, M, weights, reg, numItermax, stopThr)
    be = _backend(P.device)
    st = be.LogBaryState(P.M, -1.0 / P.reg, P.A, P.w)
    errs, ii = _periodic_bary(lambda want: be.log_bary_step(st, want), P, verbose, log, warn)
    bar = _result(P, be.log_bary_result(st, P.dtype))
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
    text.  Devices: device arrays run on host copies (CPU code), results
    copied back to the device.

    Parameters
    ----------
    A : array-like or CUDA device array, shape (dim, n_hists), float32 or float64
        Histograms (columns: mass per bin; finite, >= 0, of equal positive
        masses); any real dtype (float16 computed as float32, integers as
        float64).
    M : array-like or CUDA device array, shape (dim, dim), float32 or float64
        Ground cost between bins (finite), units of the loss; any real
        dtype, as ``A``.
    reg : float
        Entropic regularisation (finite, > 0), units of ``M``.
    tau : float, default 1e10
        Absorption threshold on the scalings u, v (a real number;
        positional 4th, as in POT).
    weights : array-like or CUDA device array, shape (n_hists,), optional
        Barycentric weights (>= 0, summing to 1); any real dtype, used as
        float64.  Default uniform.
    numItermax : int, default 1000
        Maximum number of iterations (0 <= numItermax <= 2**62).
    stopThr : float, default 1e-4
        Stop when the error max|u K v - A| is < stopThr (>= 0).
    verbose, log, warn : bool
        As POT: print the error table; also return the log; warn when
        ``numItermax`` is reached without convergence.

    Returns
    -------
    a : ndarray or CUDA device array, shape (dim,)
        The barycenter; float32 when ``A`` and ``M`` are both float32 (or
        float16), else float64 (a device array of ``A``'s kind for device
        inputs).
    log : dict
        Only if ``log=True``: 'err' (errors at the checks), 'niter' (last
        iteration index), 'logu', 'logv' (log of the scalings + 1e-16,
        shape (dim, n_hists), of the result dtype).

    Raises
    ------
    ValueError
        As :func:`barycenter_sinkhorn`.
    TypeError
        Non-numeric, boolean, complex or masked arrays; non-numeric ``reg``,
        ``stopThr`` or ``tau``; non-integer ``numItermax``; host and device
        arrays mixed.
    numbaot._dispatch.CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" (the previous barycenter is
        returned); "Stabilized Sinkhorn did not converge. ..." (if ``warn``).

    References
    ----------
    .. [1] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3),
       A1443-A1481, 2019, Algorithm 2.
    .. [2] J.-D. Benamou, G. Carlier, M. Cuturi, L. Nenna, G. Peyre, "Iterative
       Bregman Projections for Regularized Transportation Problems", SIAM J.
       Sci. Comput. 37(2), A1111-A1138, 2015.
    .. [3] POT 0.9.7, ``ot.bregman.barycenter_stabilized``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> A = np.array([[0.5, 0.0], [0.5, 0.5], [0.0, 0.5]])  # two histograms
    >>> M = numbaot.dist(np.array([[0.0], [0.5], [1.0]]))
    >>> print(np.round(numbaot.bregman.barycenter_stabilized(A, M, 0.1), 4))
    [0.2508 0.4983 0.2508]
    """
    if _dispatch.device_of(A=A, M=M, weights=weights) == "cuda":
        return _dispatch.via_host(barycenter_stabilized, (A, M, reg, tau),
                                  dict(weights=weights, numItermax=numItermax,
                                       stopThr=stopThr, verbose=verbose, log=log, warn=warn),
                                  like=A)
    P = _problem(A, M, weights, reg, numItermax, stopThr, tau=tau)
    reg, tau, dt, w, Mf = P.reg, P.tau, P.dtype, P.w, P.M
    dim, H = P.A.shape
    AT = np.ascontiguousarray(P.A.T)
    u = np.full((H, dim), 1.0 / dim)
    v = np.full((H, dim), 1.0 / dim)
    Kmat = np.empty((dim, dim))
    cpu_sinkhorn.gibbs_kernel(Mf, -1.0 / reg, np.zeros(dim), np.zeros(dim), Kmat)
    alpha = np.zeros(dim)
    beta = np.zeros(dim)
    qbar = np.full(dim, 1.0 / dim)
    n_chunks, chunk_rows = chunk_layout(dim, H, dim)
    Q = np.empty((n_chunks, H, dim))
    Ktu = np.empty((H, dim))
    lg = {"err": []} if log else None
    converged = False
    ii = 0
    for ii in range(P.numItermax):
        qprev = qbar
        with np.errstate(divide="ignore", invalid="ignore"):
            cpu_sinkhorn.knopp_fused_pass(Kmat, AT, v, n_chunks, chunk_rows, Q, u, Ktu)
            qbar = cpu_barycenter.geometric_bar(w, Ktu.T)
            v = np.ascontiguousarray(qbar[None, :] / Ktu)
        absorbing = False
        if np.any(u > tau) or np.any(v > tau):
            absorbing = True
            with np.errstate(divide="ignore"):
                alpha = alpha + reg * np.log(np.max(u, 0))
                beta = beta + reg * np.log(np.max(v, 0))
            cpu_sinkhorn.gibbs_kernel(Mf, -1.0 / reg, alpha / reg, beta / reg, Kmat)
            v = np.ones((H, dim))
        if (np.any(Ktu == 0.0) or np.any(np.isnan(u)) or np.any(np.isnan(v))
                or np.any(np.isinf(u)) or np.any(np.isinf(v))):
            warnings.warn(_loops.NUMERICAL_ERRORS % ii)
            qbar = qprev
            converged = True  # left by break as in POT: no "did not converge" warning
            break
        if (ii % 10 == 0 and not absorbing) or ii == 0:
            # (K v_k) for every histogram, by NumPy's own loops: a BLAS
            # product would leave OpenBLAS's workers spinning on the cores of
            # the next iterations' parallel passes (cpu/barycenter.py)
            Kv = np.einsum("kj,ij->ki", v, Kmat)
            err = dt.type(np.max(np.abs(u * Kv - AT)))
            if log:
                lg["err"].append(err)
            if err < P.stopThr:
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
    A : array-like or CUDA device array, shape (n_hists, width, height), float32 or float64
        Images: mass per pixel (finite, >= 0), all of the same positive mass
        (non-square allowed).  Any real dtype: float16 is computed as
        float32, integers as float64.
    reg : float
        Entropic regularisation (finite, > 0), in squared units of the unit
        square.
    weights : array-like or CUDA device array, shape (n_hists,), optional
        Barycentric weights of the images (>= 0, summing to 1); any real
        dtype, used as float64 (they do not set the result dtype).  Default
        uniform 1 / n_hists.
    method : {'sinkhorn', 'sinkhorn_log'}, default 'sinkhorn'
        Multiplicative (BLAS matrix products) or log domain (numbaot's
        separable log-convolution kernel, ``numbaot.cpu.barycenter``);
        case-insensitive.
    numItermax, stopThr, verbose, log, warn, **kwargs
        As POT (``numItermax`` default 10000, ``stopThr`` default 1e-4, the
        error taken at ii % 10 == 9); ``stabThr`` (a real number, default
        1e-30) may be passed in kwargs.

    Returns
    -------
    bar : ndarray or CUDA device array, shape (width, height)
        The barycenter image; float32 when ``A`` is float32 (or float16),
        else float64 (a device array of ``A``'s kind for device inputs).
    log : dict
        Only if ``log=True``: 'err' (errors at the checks, scalars of the
        result dtype), 'niter' (last iteration index) and, for 'sinkhorn',
        'U', 'V' (the scalings, shape (n_hists, width, height), of the
        result dtype).

    Raises
    ------
    ValueError
        Unknown method; A not 3-D, with an empty axis, negative or not
        finite; an image of zero mass or images of unequal masses; reg <= 0
        or not finite; numItermax < 0 or > 2**62; stopThr NaN or < 0;
        weights of the wrong length, negative, not finite or not summing to
        1.
    TypeError
        ``method`` not a string; non-numeric, boolean, complex or masked
        ``A`` or ``weights``; non-numeric ``reg``, ``stopThr`` or
        ``stabThr``; non-integer ``numItermax``; host and device arrays
        mixed.
    numbaot._dispatch.CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.

    Warns
    -----
    UserWarning
        "Convolutional Sinkhorn did not converge. ..." (POT's text; if
        ``warn``).

    Notes
    -----
    Devices: with device arrays (``A``, ``weights``) 'sinkhorn' runs on the
    CUDA kernels (input dtype; ``A`` validated on a host copy) and
    'sinkhorn_log' on host copies (CPU code); ``bar`` and the arrays of
    ``log`` are device arrays.

    References
    ----------
    .. [1] J. Solomon, F. de Goes, G. Peyre, M. Cuturi, A. Butscher, A. Nguyen,
       T. Du, L. Guibas, "Convolutional Wasserstein Distances: Efficient
       Optimal Transportation on Geometric Domains", ACM Trans. Graph. 34(4),
       2015, Algorithm 2.
    .. [2] POT 0.9.7, ``ot.bregman.convolutional_barycenter2d``.

    Examples
    --------
    Two 3 x 3 images with their mass in opposite corners; the barycenter sits
    in the centre:

    >>> import numpy as np
    >>> import numbaot
    >>> A = np.zeros((2, 3, 3)); A[0, 0, 0] = 1.0; A[1, 2, 2] = 1.0
    >>> print(np.round(numbaot.bregman.convolutional_barycenter2d(A, 0.1), 3))
    [[0.005 0.061 0.005]
     [0.061 0.738 0.061]
     [0.005 0.061 0.005]]
    """
    meth = _checks.check_method(method, ("sinkhorn", "sinkhorn_log"))
    device = _dispatch.device_of(A=A, weights=weights)
    if device == "cuda" and meth == "sinkhorn_log":
        return _dispatch.via_host(convolutional_barycenter2d, (A, reg),
                                  dict(weights=weights, method=meth, numItermax=numItermax,
                                       stopThr=stopThr, verbose=verbose, log=log, warn=warn,
                                       **kwargs), like=A)
    like = A
    A, weights = _host_copies(device, A, weights)
    A = _checks.as_real_array(A, "A")
    if A.ndim != 3 or 0 in A.shape:
        raise ValueError(f"A must be 3-D (n_hists, width, height); got shape {A.shape}")
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A must be finite and >= 0")
    _checks.check_barycenter_masses(A, A.sum(axis=(1, 2), dtype=np.float64), equal=True,
                                    item="A[{}]")
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    stabThr = _checks.check_real_scalar(kwargs.get("stabThr", 1e-30), "stabThr")
    dt = _checks.result_dtype(A)
    n_hists, W, H = A.shape
    w = _checks.check_barycenter_weights(weights, n_hists)
    P = _Problem(A.astype(np.float64), None, w, dt, device, like,
                 reg, numItermax, stopThr)
    M1, M2 = _grid_costs(W, reg), _grid_costs(H, reg)
    if meth == "sinkhorn":
        be = _backend(device)
        # the images on the launchers' device (uploaded once, in the result dtype)
        imgs = _dispatch.to_device(P.A, dt) if device == "cuda" else P.A
        st = be.ConvBaryState(imgs, np.exp(M1), np.exp(M2), P.w, stabThr)
        errs, ii = _periodic_conv(lambda want: be.conv_bary_step(st, want), P, verbose, log,
                                  warn)
        if log:
            U, V = be.conv_bary_scalings(st, dt)
            lg = {"err": errs, "niter": ii, "U": _result(P, U), "V": _result(P, V)}
            return _result(P, be.conv_bary_result(st, dt)), lg
        return _result(P, be.conv_bary_result(st, dt))
    # the log domain: host only (device inputs were sent through via_host above)
    st = cpu_barycenter.LogConvBaryState(P.A, M1, M2, P.w, stabThr)
    errs, ii = _periodic_conv(lambda want: cpu_barycenter.log_conv_bary_step(st, want), P,
                              verbose, log, warn)
    if log:
        return cpu_barycenter.log_conv_bary_result(st, dt), {"err": errs, "niter": ii}
    return cpu_barycenter.log_conv_bary_result(st, dt)
