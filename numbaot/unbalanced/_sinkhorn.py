"""The kernel-backed unbalanced solvers, on either device.

``sinkhorn_knopp_unbalanced`` (``method='sinkhorn'``) and
``sinkhorn_unbalanced_log`` (``method='sinkhorn_log'``) run the launchers of
``numbaot.cpu.unbalanced`` or ``numbaot.cuda.unbalanced`` (one contract:
``UotState``, ``uot_steps``, ``uot_scalings``, ``uot_loss``, ``uot_plan``,
``uot_stats`` and their ``UotLogState`` / ``uot_log_*`` counterparts),
chosen once from the device of the inputs; the outputs are shaped once, here.
``sinkhorn_unbalanced`` / ``sinkhorn_unbalanced2`` dispatch on ``method``.
"""
import warnings

import numpy as np

from .. import _checks, _config, _loops
from .._balanced import plain_array, plain_weights, plan_result, vector_result
from ._common import METHODS, setup, total_cost
from ._stabilized import sinkhorn_stabilized_unbalanced, sinkhorn_unbalanced_translation_invariant

__all__ = ["sinkhorn_unbalanced", "sinkhorn_unbalanced2", "sinkhorn_knopp_unbalanced",
           "sinkhorn_unbalanced_log"]


def _backend(P):
    """The launcher module of the problem's device."""
    if P.device == "cuda":
        from ..cuda import unbalanced
    else:
        unbalanced = _cpu()
    return unbalanced


_CPU = []


def _cpu():
    """``numbaot.cpu.unbalanced``, imported on first use (``import numbaot``
    loads no kernel module) and then kept: an import statement costs about
    a microsecond per call."""
    if not _CPU:
        from ..cpu import unbalanced

        _CPU.append(unbalanced)
    return _CPU[0]


def _initial(S, log_domain):
    """Initial scalings (or log-scalings), float64 (n_problems, dim), owned
    by the caller: ones (zeros), or the warm start's exp(log u0), exp(log v0)
    (log u0, log v0)."""
    P = S.P
    shape_u, shape_v = (P.n_problems, P.shape[0]), (P.n_problems, P.shape[1])
    if log_domain:
        if S.warm is None:
            return np.zeros(shape_u), np.zeros(shape_v)
        return S.warm[0].copy(), S.warm[1].copy()
    if S.warm is None:
        return np.ones(shape_u), np.ones(shape_v)
    return np.exp(S.warm[0]), np.exp(S.warm[1])


def _iterate(S, steps, st, verbose, log):
    """Run ``steps`` (``uot_steps`` or ``uot_log_steps``) for up to
    numItermax iterations; POT's warning on a numerical failure, and (with
    ``log``) the error list in the result dtype, printed after the run when
    ``verbose``.  Returns the log dict, or None without ``log``."""
    errs = []
    nit, failed = steps(st, S.numItermax, S.stopThr, errs)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    if not log:
        return None
    lg = {"err": _err_list(errs, S.P.dtype)}
    if verbose:
        _loops.print_errs(lg["err"])
    return lg


def _err_list(errs, dtype):
    """The errors as POT's list of scalars of the result dtype."""
    return list(np.array(errs, dtype=dtype))


def _vectors(P, x):
    """(n_problems, dim) float64 -> (dim,) or (dim, n_hists), as a result."""
    return vector_result(P, x[0] if not P.n_hists else x.T)


def _outputs(S, st, lg, want_plan, loss, stats, plan=None):
    """POT's outputs of the solved state ``st``: the losses (n_hists,) for
    2-D b, else the plan (None unless ``want_plan``) and, with ``lg``,
    lg['cost'] and lg['total_cost'].  ``loss(st)``, ``stats(st, want_plan)``
    and ``plan(st)`` are the backend's launchers; without ``plan`` the plan
    comes from ``stats``."""
    P = S.P
    if P.n_hists:
        res = vector_result(P, loss(st))
    elif lg is not None or not want_plan or plan is None:
        G, rows, cols, out = stats(st, want_plan)
        if lg is not None:
            lg["cost"] = P.dtype.type(out[0])
            lg["total_cost"] = P.dtype.type(total_cost(S, out[0], out[1], rows, cols))
        res = plan_result(P, G) if want_plan else None
    else:
        res = plan_result(P, plan(st))
    return (res, lg) if lg is not None else res


def _state(S, be_state, log_domain):
    P = S.P
    u, v = _initial(S, log_domain)
    return be_state(P.M, S.reg, S.ca, S.cb, S.Cmat, S.use_mat, P.a, P.b, u, v, S.fi1, S.fi2)


# --------------------------------------------------------------------------
# the one-call path of a plain small problem (issue 23): no Setup, no state
# --------------------------------------------------------------------------
_FAST_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))
_FAST_SCALARS = (float, int, np.float64)


def _fast_solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                verbose, log, want_plan):
    """``method`` ('sinkhorn' or 'sinkhorn_log') on a plain small problem in
    one compiled call (``uot_small_call`` / ``uot_log_small_call`` of
    ``numbaot.cpu.unbalanced``; a second, ``uot_small_stats``, when the log
    or the loss is asked of the first): NumPy arrays of one dtype (float64 or
    float32), 1-D weights of the right lengths, a small size
    (``numbaot.cpu.unbalanced.is_small``), a scalar reg > 0, a scalar reg_m >= 0,
    reg_type 'kl' or 'entropy', no ``c``, no warm start, an int numItermax
    within ``_config.SMALL_MAX_ITER``, a real stopThr >= 0.  The array
    values are screened in the compiled call.  Returns the outputs as the
    full path would, or None: anything this or the screen refuses takes the
    full path (``setup``, ``numbaot._checks``), which raises where the input
    is bad."""
    if type(M) is np.ndarray and M.ndim == 2:
        a, b = plain_weights(a, M.shape[0], M), plain_weights(b, M.shape[1], M)
    if (c is not None or warmstart is not None or type(M) is not np.ndarray
            or type(a) is not np.ndarray or type(b) is not np.ndarray):
        return None
    dt = M.dtype
    if (dt not in _FAST_DTYPES or a.dtype != dt or b.dtype != dt or M.ndim != 2 or a.ndim != 1
            or b.ndim != 1):
        return None
    n, m = M.shape
    if a.shape[0] != n or b.shape[0] != m or n == 0 or m == 0:
        return None
    be = _cpu()
    if not be.is_small(n, m, 1, method == "sinkhorn_log"):
        return None
    if type(numItermax) is not int or not 0 <= numItermax <= _config.SMALL_MAX_ITER:
        return None
    if (type(reg) not in _FAST_SCALARS or type(stopThr) not in _FAST_SCALARS
            or type(reg_m) not in _FAST_SCALARS):
        return None
    reg, reg_m, stopThr = float(reg), float(reg_m), float(stopThr)
    if not (0.0 < reg < np.inf and 0.0 <= reg_m < np.inf and stopThr >= 0.0):
        return None  # (reg_m = inf: balanced, whose masses the full path checks)
    if reg_type == "kl":
        entropy = False
    elif reg_type == "entropy":
        entropy = True
    else:
        return None
    a, b, M = plain_array(a), plain_array(b), plain_array(M)
    fi = _loops.marginal_exponent(reg_m, reg)
    errs = np.empty(max(numItermax, 1))
    plan = np.empty((n, m), dtype=dt)
    u, v = np.empty(n), np.empty(m)
    stats = np.empty(n + m + 4)
    if method == "sinkhorn":
        want_stats = log or not want_plan
        ok, nit, failed = be.uot_small_call(M, M.reshape(-1), a, b, reg, fi, fi, entropy,
                                            numItermax, stopThr, _checks.COST_SCALE_MAX,
                                            not want_stats, errs, plan, u, v)
        if ok and want_stats:
            be.uot_small_stats(M, a, b, entropy, plan, u, v, stats)
    else:
        ok, nit, failed = be.uot_log_small_call(M, M.reshape(-1), a, b, reg, fi, fi, entropy,
                                                numItermax, stopThr, _checks.COST_SCALE_MAX, errs,
                                                plan, u, v, stats)
    if not ok:
        return None
    if entropy:
        warnings.warn(_loops.ENTROPY_WARNING)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    res = plan if want_plan else None
    if not log:
        return res
    lg = {"err": list(errs[:nit].astype(dt))}
    if verbose:
        _loops.print_errs(lg["err"])
    if method == "sinkhorn":
        with np.errstate(divide="ignore"):
            lg["logu"] = np.log(u + 1e-300).astype(dt)
            lg["logv"] = np.log(v + 1e-300).astype(dt)
    else:
        lg["logu"], lg["logv"] = u.astype(dt), v.astype(dt)
    lin, kl_plan, kl_a, kl_b = stats[n + m:].tolist()
    total = lin + reg * kl_plan  # POT's total_cost (``_common.total_cost``)
    if reg_m != np.inf:
        total += reg_m * kl_a
        total += reg_m * kl_b
    lg["cost"] = dt.type(lin)
    lg["total_cost"] = dt.type(total)
    return res, lg


# --------------------------------------------------------------------------
# multiplicative solver (one read of K per iteration on the CPU)
# --------------------------------------------------------------------------
def _knopp(S, verbose, log, want_plan=True):
    be = _backend(S.P)
    st = _state(S, be.UotState, log_domain=False)
    lg = _iterate(S, be.uot_steps, st, verbose, log)
    if log:
        u, v = be.uot_scalings(st)
        with np.errstate(divide="ignore"):
            lg["logu"] = _vectors(S.P, np.log(u + 1e-300))
            lg["logv"] = _vectors(S.P, np.log(v + 1e-300))
    return _outputs(S, st, lg, want_plan, be.uot_loss, be.uot_stats, be.uot_plan)


def sinkhorn_knopp_unbalanced(a, b, M, reg, reg_m, reg_type="kl", c=None, warmstart=None,
                              numItermax=1000, stopThr=1e-6, verbose=False, log=False,
                              **kwargs):
    r"""Unbalanced entropic OT by scaling iterations; mirrors ``ot.unbalanced.sinkhorn_knopp_unbalanced``.

    Chizat et al. 2018, Algorithm 2 (KL divergences): u = (a / K v)^fi1,
    v = (b / K^T u)^fi2, K = exp(-M / reg) * c, fi = reg_m / (reg_m + reg).
    One read of K per iteration (see the module docstring).

    Parameters
    ----------
    a : array-like or CUDA device array, shape (dim_a,) or (dim_a, n_hists), float32 or float64
        Source masses (>= 0, finite, positive total); empty means uniform
        1/dim_a.  Any real dtype: float16 is computed as float32, integers
        as float64.  2-D (numbaot extension, needs 2-D ``b`` with the same
        n_hists): paired batch.
    b : array-like or CUDA device array, shape (dim_b,) or (dim_b, n_hists), float32 or float64
        Target masses (>= 0); empty means uniform; same dtype rules.  2-D:
        n_hists problems sharing ``M`` (then, as POT, ``K = exp(-M / reg)``
        with no reference measure, and the losses are returned).
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the loss.  A host ``M`` may
        have any real dtype (float16 as float32, integers as float64); a
        device ``M`` must be float32 or float64.
    reg : float
        Entropic regularisation (> 0), units of ``M``.
    reg_m : float or indexable of length 1 or 2
        Marginal relaxation (>= 0) of the source and target KL penalties;
        ``inf`` on one side makes that marginal a hard constraint.
    reg_type : {'kl', 'entropy'}, default 'kl'
        'kl': reference measure ``c = a b^T`` (or the given ``c``);
        'entropy': ``c = 1`` (a warning says ``c`` is overwritten, as POT);
        case-insensitive.
    c : array-like, shape (dim_a, dim_b), optional
        Explicit reference measure (>= 0, finite), used with 'kl' and 1-D b;
        any real dtype, used as float64 (a device ``c`` is copied to the
        host).
    warmstart : tuple (log u, log v) of host arrays, optional
        Initial log-scalings, shapes (dim_a,), (dim_b,) (or (dim_a,
        n_hists), (dim_b, n_hists) for a batch); any real dtype, used as
        float64; finite except -inf where the weight is 0.
    numItermax : int, default 1000
    stopThr : float, default 1e-6
        Stop once err = (err_u + err_v) / 2 < stopThr, err_x =
        max|x - x_prev| / max(max|x|, max|x_prev|, 1), checked every iteration.
    verbose : bool
        With ``log``, print the err table (after the run).
    log : bool
        Also return a dict: ``'err'`` (list, one per iteration), ``'logu'``,
        ``'logv'`` (log(u + 1e-300), shape (dim,) or (dim, n_hists)); for 1-D b
        also ``'cost'`` (<gamma, M>) and ``'total_cost'`` (the objective above).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray or CUDA device array, shape (dim_a, dim_b)
        Unbalanced plan; for 2-D ``b`` the losses <gamma_k, M>, shape
        (n_hists,).  float32 when every non-empty input among ``a``, ``b``,
        ``M`` is float32 (or float16), else float64.
    log : dict
        Only if ``log``.

    Raises
    ------
    TypeError
        Non-numeric/complex arrays, non-numeric scalars; ``warmstart`` not a
        tuple/list; host and device arrays mixed; a device ``M`` that is not
        float32/float64.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.
    ValueError
        ``reg`` <= 0 or not finite; ``reg_m`` < 0, NaN, or of length > 2;
        ``reg_type`` not 'kl'/'entropy'; ``M`` not 2-D or not finite;
        max|M| / reg > 2**52 (host arrays; POT returns a zero plan with a
        "Numerical errors" warning, the log domain a wrong total cost); weights
        of the wrong length, negative, not finite or of zero mass; ``c`` of the
        wrong shape, negative or not finite, or with an all-zero row i where
        a_i > 0 (column j where b_j > 0; zeros elsewhere in ``c`` are allowed
        and force the plan to 0 there); malformed ``warmstart``.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" when K^T u has a zero or u, v get a
        NaN/inf (the previous iterate is returned), and the 'entropy' warning.

    Notes
    -----
    GPU: with ``M`` a GPU array (numba device array or CuPy), the iterations
    run on the GPU (``numbaot.cuda.unbalanced``) in the dtype of the data,
    and the plan / losses / ``logu``, ``logv`` come back as device arrays of
    the caller's kind (``cost``, ``total_cost`` and ``err`` as host
    scalars).  An explicit ``c`` on the GPU is copied to the host to be
    validated.

    References
    ----------
    .. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018, Algorithm 2.
    .. [2] C. Sun, J. Hu, H. Jiang, "MAP-UOT: A Memory-Efficient Approach to
       Unbalanced Optimal Transport Implementation", arXiv:2412.11079 2024, sec. 5.
    .. [3] POT 0.9.7, ``ot.unbalanced.sinkhorn_knopp_unbalanced``.

    Examples
    --------
    Two source points (mass 0.4, 0.6), three target points of mass 1/3, KL
    marginal penalties of weight ``reg_m = 1``; the plan's mass is no longer 1:

    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.unbalanced.sinkhorn_knopp_unbalanced(a, b, M, 0.1, 1.0)
    >>> print(np.round(G, 3))
    [[0.314 0.076 0.   ]
     [0.    0.206 0.344]]
    >>> print(np.round(G.sum(), 4))
    0.9402
    """
    res = _fast_solve("sinkhorn", a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax,
                      stopThr, verbose, log, True)
    if res is not None:
        return res
    S = setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, allow_cuda=True)
    return _knopp(S, verbose, log)


# --------------------------------------------------------------------------
# log-domain solver (numbaot extension)
# --------------------------------------------------------------------------
def _log_solve(S, verbose, log, want_plan=True):
    be = _backend(S.P)
    st = _state(S, be.UotLogState, log_domain=True)
    lg = _iterate(S, be.uot_log_steps, st, verbose, log)
    if log:
        logu, logv = be.uot_log_potentials(st)
        lg["logu"], lg["logv"] = _vectors(S.P, logu), _vectors(S.P, logv)
    return _outputs(S, st, lg, want_plan, be.uot_log_loss, be.uot_log_stats)


def sinkhorn_unbalanced_log(a, b, M, reg, reg_m, reg_type="kl", c=None, warmstart=None,
                            numItermax=1000, stopThr=1e-6, verbose=False, log=False,
                            **kwargs):
    r"""Log-domain unbalanced Sinkhorn (numbaot extension, ``method='sinkhorn_log'``).

    The iterations of :func:`sinkhorn_knopp_unbalanced` on the log-scalings
    (Chizat et al. 2018, sec. 4.1; Schmitzer 2019, log-domain stabilisation):

        log u = fi1 (log a - LSE_j(log K_ij + log v_j)),
        log v = fi2 (log b - LSE_i(log K_ij + log u_i)),

    each logsumexp max-shifted, so nothing overflows at small ``reg`` where
    u = exp(log u) would.  Same fixed point as the multiplicative solver.

    Parameters
    ----------
    a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, verbose
        As :func:`sinkhorn_knopp_unbalanced`.
    stopThr : float, default 1e-6
        Stop once err = (err_logu + err_logv) / 2 < stopThr, err_x =
        max|x - x_prev| / max(max|x|, max|x_prev|, 1) on the log-scalings
        (finite entries), checked every iteration.
    log : bool
        As :func:`sinkhorn_knopp_unbalanced`, except that ``log['logu']``,
        ``log['logv']`` are the log-scalings themselves.
    **kwargs
        Ignored.

    Returns
    -------
    gamma : ndarray or CUDA device array, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D b
        The plan (or the losses <gamma_k, M>); float32 when every non-empty
        input among ``a``, ``b``, ``M`` is float32 (or float16), else
        float64.
    log : dict
        Only if ``log``.

    Raises
    ------
    TypeError, ValueError, numbaot._dispatch.CudaUnavailableError
        As :func:`sinkhorn_knopp_unbalanced`.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" if a NaN appears (the previous
        iterate is returned); the 'entropy' warning.

    Notes
    -----
    GPU arrays run on the GPU (``numbaot.cuda.unbalanced.uot_log_steps``)
    and return device arrays, as :func:`sinkhorn_knopp_unbalanced`; with an
    explicit ``c`` there, M - reg log c is formed on the host (one
    dim_a x dim_b copy each way).

    References
    ----------
    .. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018, sec. 4.1.
    .. [2] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3),
       A1443-A1481, 2019.
    .. [3] POT 0.9.7, ``ot.unbalanced.sinkhorn_unbalanced`` (numbaot's
       ``method='sinkhorn_log'`` has no POT counterpart).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.unbalanced.sinkhorn_unbalanced_log(a, b, M, 0.1, 1.0)
    >>> print(np.round(G, 3))  # the plan of sinkhorn_knopp_unbalanced
    [[0.314 0.076 0.   ]
     [0.    0.206 0.344]]
    """
    res = _fast_solve("sinkhorn_log", a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax,
                      stopThr, verbose, log, True)
    if res is not None:
        return res
    S = setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, allow_cuda=True)
    return _log_solve(S, verbose, log)


# --------------------------------------------------------------------------
# dispatchers
# --------------------------------------------------------------------------
def _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
           verbose, log, kwargs, want_plan=True):
    if method == "sinkhorn_reg_scaling":
        warnings.warn(_loops.REG_SCALING_WARNING)
        method = "sinkhorn"
    if method == "sinkhorn_stabilized":
        return sinkhorn_stabilized_unbalanced(a, b, M, reg, reg_m, reg_type, c, warmstart,
                                              numItermax=numItermax, stopThr=stopThr,
                                              verbose=verbose, log=log, **kwargs)
    if method == "sinkhorn_translation_invariant":
        return sinkhorn_unbalanced_translation_invariant(
            a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax=numItermax,
            stopThr=stopThr, verbose=verbose, log=log, **kwargs)
    res = _fast_solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                      verbose, log, want_plan)
    if res is not None:
        return res
    S = setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
              allow_cuda=method in ("sinkhorn", "sinkhorn_log"), method_name=f"method={method!r}")
    if method == "sinkhorn_log":
        return _log_solve(S, verbose, log, want_plan)
    return _knopp(S, verbose, log, want_plan)


def sinkhorn_unbalanced(a, b, M, reg, reg_m, method="sinkhorn", reg_type="kl", c=None,
                        warmstart=None, numItermax=1000, stopThr=1e-6, verbose=False,
                        log=False, **kwargs):
    r"""Unbalanced entropic OT plan; mirrors ``ot.unbalanced.sinkhorn_unbalanced``.

    Parameters
    ----------
    a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        See :func:`sinkhorn_knopp_unbalanced`.
    method : str, default 'sinkhorn'
        'sinkhorn' (:func:`sinkhorn_knopp_unbalanced`), 'sinkhorn_stabilized'
        (:func:`sinkhorn_stabilized_unbalanced`), 'sinkhorn_translation_invariant'
        (:func:`sinkhorn_unbalanced_translation_invariant`), 'sinkhorn_reg_scaling'
        (warns, then 'sinkhorn', as POT) and, numbaot extension, 'sinkhorn_log'
        (:func:`sinkhorn_unbalanced_log`, stable at small ``reg``).
    **kwargs
        Passed to the solver (e.g. ``tau`` for 'sinkhorn_stabilized').

    Returns
    -------
    gamma : ndarray or CUDA device array, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D b
        The unbalanced plan (or the losses <gamma_k, M>); float32 when every
        non-empty input among ``a``, ``b``, ``M`` is float32 (or float16),
        else float64.  Device arrays only for 'sinkhorn' and
        'sinkhorn_log'.
    log : dict
        Only if ``log``: the solver's.

    Raises
    ------
    ValueError
        "Unknown method '<method>'." and the solvers' errors (2-D ``a`` for
        'sinkhorn_stabilized' and 'sinkhorn_translation_invariant').
    TypeError
        ``method`` not a string; GPU arrays with 'sinkhorn_stabilized' or
        'sinkhorn_translation_invariant'; the solvers' errors.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    References
    ----------
    .. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018.
    .. [2] POT 0.9.7, ``ot.unbalanced.sinkhorn_unbalanced``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method="sinkhorn_log")
    >>> print(np.round(G, 3))
    [[0.314 0.076 0.   ]
     [0.    0.206 0.344]]
    """
    method = _checks.check_method(method, METHODS)
    return _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                  verbose, log, kwargs)


def sinkhorn_unbalanced2(a, b, M, reg, reg_m, method="sinkhorn", reg_type="kl", c=None,
                         warmstart=None, returnCost="linear", numItermax=1000, stopThr=1e-6,
                         verbose=False, log=False, **kwargs):
    r"""Unbalanced entropic OT loss; mirrors ``ot.unbalanced.sinkhorn_unbalanced2``.

    Parameters
    ----------
    a, b, M, reg, reg_m, method, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        See :func:`sinkhorn_unbalanced`.
    returnCost : {'linear', 'total'}, default 'linear'
        1-D b: return <gamma, M> ('linear') or the full objective ('total').
        2-D b: the linear losses <gamma_k, M> (as POT, which also warns
        "Reg_type not implemented yet. Use entropy." when reg_type == 'kl').
    **kwargs
        Passed to the solver (e.g. ``tau`` for 'sinkhorn_stabilized').

    Returns
    -------
    loss : numpy.float32 or numpy.float64 for 1-D b; ndarray (or device array) of shape (n_hists,) for 2-D b
        The cost in units of ``M``; float32 when every non-empty input among
        ``a``, ``b``, ``M`` is float32 (or float16), else float64 (a single
        loss is a NumPy scalar also for device inputs).
    log : dict
        Only if ``log``.

    Raises
    ------
    ValueError
        "Unknown method <method>."; "Unknown returnCost = <value>" (1-D b);
        the solvers' errors.
    TypeError
        ``method`` not a string; the solvers' errors.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    References
    ----------
    .. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018.
    .. [2] POT 0.9.7, ``ot.unbalanced.sinkhorn_unbalanced2``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> loss = numbaot.unbalanced.sinkhorn_unbalanced2(a, b, M, 0.1, 1.0)
    >>> print(np.round(loss, 4))  # <gamma, M>_F
    0.0706
    """
    if not isinstance(method, str) or method.lower() not in METHODS:
        if not isinstance(method, str):
            raise TypeError(f"method must be a string, one of {METHODS}; got {method!r}")
        raise ValueError("Unknown method %s." % method)
    method = method.lower()
    b_arr = b if b is None else np.asarray(b) if not hasattr(b, "__cuda_array_interface__") else b
    two_d = b_arr is not None and getattr(b_arr, "ndim", 1) >= 2
    if not two_d:
        if returnCost not in ("linear", "total"):
            raise ValueError("Unknown returnCost = {}".format(returnCost))
        res = _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                     verbose, True, kwargs, want_plan=False)
        lg = res[1]
        cost = lg["cost"] if returnCost == "linear" else lg["total_cost"]
        return (cost, lg) if log else cost
    if reg_type == "kl":
        warnings.warn("Reg_type not implemented yet. Use entropy.")
    return _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                  verbose, log, kwargs)
