"""Entropic partial optimal transport, drop-in for ``ot.partial`` (entropic solvers).

``entropic_partial_wasserstein`` and ``entropic_partial_wasserstein_logscale``
mirror POT 0.9.7 [3]_: argument order, keywords and defaults, the plan
returned, the ``log`` keys (``'err'``, ``'partial_w_dist'``), the verbose table,
the checks of ``m`` (same messages) and the handling of numerical failure (the
multiplicative solver prints "Warning: numerical errors at iteration t" and
stops; the log-domain one warns).  They run POT's iterated Bregman projections
with Dykstra's corrections (Benamou et al. 2015 [1]_) step for step, with the
corrections collapsed to vectors and a scalar (``numbaot.cpu.partial``): one
read of the kernel per iteration and O(dim_a + dim_b) memory besides the
kernel, instead of POT's two dense ``diag(.) @ K`` products (O(dim_a^2 dim_b)
flops) and six (dim_a, dim_b) temporaries.

Where numbaot differs from POT: bad input raises a ``ValueError``/``TypeError``
naming the argument (M not finite, negative weights, ``m`` not a finite
number, ...); iterates agree with POT's to rounding, not bit for bit (POT
accumulates its corrections elementwise); arithmetic is float64 on the CPU
(the kernel itself is kept in the input dtype, as POT's, so its underflows
are POT's).  Beyond POT: paired batches, n_hists problems that share ``M``
(2-D ``b`` of shape (dim_b, n_hists), with ``a`` shared (dim_a,) or paired
(dim_a, n_hists), and ``m`` one value or one per problem), solved together
with one read of the kernel per iteration for all of them; the plans come
back stacked, (n_hists, dim_a, dim_b).  CUDA device arrays (numba, CuPy) run
on ``numbaot.cuda.partial`` in the input dtype and return device plans.

References
----------
.. [1] J.-D. Benamou, G. Carlier, M. Cuturi, L. Nenna, G. Peyre, "Iterative
   Bregman projections for regularized transportation problems", SIAM
   Journal on Scientific Computing 37(2), A1111-A1138, 2015 (prop. 5).
.. [2] L. Chapel, M. Alaya, G. Gasso, "Partial Optimal Transport with
   Applications on Positive-Unlabeled Learning", NeurIPS 2020.
.. [3] POT 0.9.7, module ``ot.partial`` (R. Flamary et al., "POT: Python
   Optimal Transport", JMLR 22(78) 2021).
"""
import numbers
import warnings

import numpy as np

from . import _checks, _dispatch, _loops

__all__ = ["entropic_partial_wasserstein", "entropic_partial_wasserstein_logscale"]

_METHODS = ("sinkhorn", "sinkhorn_log")

#: POT's texts (verbatim)
_M_NEGATIVE = "Problem infeasible. Parameter m should be greater than 0."
_M_TOO_LARGE = ("Problem infeasible. Parameter m should lower or"
                " equal than min(|a|_1, |b|_1).")
_PRINT_FAILURE = "Warning: numerical errors at iteration"
_LOG_FAILURE = "Numerical errors at iteration {} of entropic_partial_wasserstein_logscale"


def _backend(P):
    if P.device == "cuda":
        from .cuda import partial
    else:
        from .cpu import partial
    return partial


def _mass(w, dim):
    """POT's |w|_1: the sum in the caller's dtype (per column for 2-D
    ``w``); uniform weights (sum of ones(dim) / dim in float64) for an empty
    ``w``."""
    if type(w) is np.ndarray and w.ndim == 1 and w.size:
        return np.add.reduce(w)  # np.sum's pairwise sum, without its wrapper
    w = np.asarray(_dispatch.to_host(w) if w is not None else [])
    if w.size == 0:
        return np.sum(np.ones(dim) / dim)
    if w.ndim == 2:  # column by column: POT's (pairwise) sum of each histogram
        return np.array([np.sum(w[:, k]) for k in range(w.shape[1])])
    return np.sum(w)


def _m_values(m, n_hists):
    """``m`` as given (a real scalar) or, for a batch, a float64 array
    (n_hists,); TypeError/ValueError for anything else."""
    if isinstance(m, (bool, np.bool_)):
        raise TypeError(f"m must be a real number or None; got {type(m).__name__}")
    if isinstance(m, numbers.Real):
        return m
    if not isinstance(m, (np.ndarray, list, tuple)) or (not n_hists and
                                                        not isinstance(m, np.ndarray)):
        raise TypeError(f"m must be a real number or None; got {type(m).__name__}")
    arr = np.asarray(m)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"m must hold real numbers; got an array of dtype {arr.dtype}")
    if arr.ndim == 0:
        return arr
    if not n_hists:
        raise TypeError(f"m must be a real scalar or None; got an array of shape {arr.shape}")
    if arr.shape != (n_hists,):
        raise ValueError(f"m must be a real number or hold one mass per problem, shape "
                         f"({n_hists},); got shape {arr.shape}")
    return arr.astype(np.float64)


def _check_m(m, a, b, P):
    """POT's default and checks of ``m``, per problem for a batch: returns
    the masses as a float64 array (n_problems,)."""
    dim_a, dim_b = P.shape
    if not P.n_hists:  # one problem: m is a number (or a 0-d array), checked as POT does
        bound = min(_mass(a, dim_a), _mass(b, dim_b))
        m = bound * 1.0 if m is None else _m_values(m, 0)
        if m != m:
            raise ValueError(f"m must be a number in [0, min(|a|_1, |b|_1)]; got {m!r}")
        if m < 0:
            raise ValueError(_M_NEGATIVE)
        if m > bound:
            raise ValueError(_M_TOO_LARGE)
        return np.array([float(m)])
    bound = np.minimum(_mass(a, dim_a), _mass(b, dim_b))
    m = bound * 1.0 if m is None else _m_values(m, P.n_hists)
    if np.any(np.isnan(np.asarray(m, dtype=np.float64))):
        raise ValueError(f"m must be a number in [0, min(|a|_1, |b|_1)]; got {m!r}")
    if np.any(m < 0):
        raise ValueError(_M_NEGATIVE)
    # a batch: a mass may exceed its bound by the rounding of another
    # summation order of the histogram (NumPy's column sums, A.sum(0)): dim
    # eps relative; the message names the problem
    slack = np.asarray(bound, dtype=np.float64) * (
        1.0 + max(P.shape) * float(np.finfo(P.dtype).eps))
    over = np.flatnonzero(np.broadcast_to(np.asarray(m, dtype=np.float64) > slack,
                                          (P.n_hists,)))
    if over.size:
        raise ValueError(f"{_M_TOO_LARGE} (problem {over[0]})")
    return np.broadcast_to(np.asarray(m, dtype=np.float64), (P.n_problems,)).copy()


def _prepare(a, b, M, reg, m, numItermax, stopThr, name):
    """(Problem, reg, masses (n_problems,) float64, numItermax, stopThr),
    validated as POT's checks and numbaot's (``numbaot._checks``)."""
    P = _checks.prepare_problem(a, b, M, allow_batch=True, method_name=name)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    _checks.check_cost_scale(P, reg)  # max|M| / reg <= 2**52, as every solver
    return P, reg, _check_m(m, a, b, P), numItermax, stopThr


def _print_check(ii, err):
    """One line of POT's verbose table (its header every 200 iterations)."""
    if ii % 200 == 0:
        print("{:5s}|{:12s}".format("It.", "Err") + "\n" + "-" * 11)
    print("{:5d}|{:8e}|".format(ii, err))


def _partial_loop(run, error, dtype, numItermax, stopThr, verbose, log, small=None):
    """POT's loop of the entropic partial solvers: ``while err > stopThr and
    cpt < numItermax`` with err = 1 at the start and the error taken (logged,
    printed) at cpt % 10 == 0.  ``run(n)`` makes up to n iterations and
    returns (done, stopped): stopped once every problem failed (a batch goes
    on while one problem is left; the error is then over those).
    ``small()``, when it returns the errors at the checks (the backend ran
    the whole loop in one call), replaces the loop; the verbose table is
    then printed from them.  Returns the error list (empty unless ``log``)."""
    rec = small() if small is not None else None
    if rec is not None:
        errs = [_loops.err_scalar(e, dtype) for e in rec]
        if verbose:
            for k, err in enumerate(errs):
                _print_check(10 * k, err)
        return errs if log else []
    errs = []
    if not 1 > stopThr:
        return errs
    for start, stop in _loops.blocks(numItermax, 10):
        done, stopped = run(stop - start)
        if stopped:
            break
        ii = stop - 1
        if ii % 10 == 0:
            err = _loops.err_scalar(error(), dtype)
            if log:
                errs.append(err)
            if verbose:
                _print_check(ii, err)
            if not err > stopThr:
                break
    return errs


def _report_failures(failed_at, P, log_domain):
    """POT's message for each problem that failed: printed by the
    multiplicative solver, a warning in the log domain; a batch names the
    problem."""
    for k in np.flatnonzero(failed_at >= 0):
        where = f" (problem {k})" if P.n_hists else ""
        if log_domain:
            warnings.warn(_LOG_FAILURE.format(failed_at[k]) + where, stacklevel=3)
        else:
            print(_PRINT_FAILURE, f"{failed_at[k]}{where}")


def _outputs(P, plans, loss, errs, log):
    """plans (n_problems, dim_a, dim_b) -> the plan (one problem) or the
    stack; the log dict with 'partial_w_dist' a scalar or (n_hists,)."""
    plan = plans if P.n_hists else plans[0]
    if P.device == "cuda":
        plan = _dispatch.like_input(plan, P.like)
    if not log:
        return plan
    dist = np.asarray(loss, dtype=P.dtype) if P.n_hists else P.dtype.type(loss[0])
    return plan, {"err": errs, "partial_w_dist": dist}


def entropic_partial_wasserstein(a, b, M, reg, m=None, method="sinkhorn", numItermax=1000,
                                 stopThr=1e-100, verbose=False, log=False):
    r"""Entropic partial OT plan; mirrors ``ot.partial.entropic_partial_wasserstein`` [3]_.

    Solves

        gamma = argmin <gamma, M>_F + reg * sum_ij gamma_ij log gamma_ij
        s.t. gamma 1 <= a, gamma^T 1 <= b, gamma >= 0, 1^T gamma 1 = m

    (Benamou et al. 2015, prop. 5 [1]_; partial OT as in Chapel et al. 2020
    [2]_) by iterated Bregman projections with Dykstra's corrections, step for
    step as POT.  ``method='sinkhorn'`` iterates on the kernel
    K = exp(-M / reg), which underflows to 0 for small ``reg`` (the run then
    fails as POT's does, see Notes); ``method='sinkhorn_log'`` runs
    :func:`entropic_partial_wasserstein_logscale`, which stays finite.

    Parameters
    ----------
    a : array-like or CUDA device array, shape (dim_a,) or (dim_a, n_hists), float32 or float64
        Source weights (mass per point; >= 0, finite, positive total); empty
        (``[]``) means uniform 1 / dim_a.  Any real dtype: float16 is
        computed as float32, integers as float64.  2-D (with a 2-D ``b`` of
        as many columns): one source histogram per problem of a paired
        batch.
    b : array-like or CUDA device array, shape (dim_b,) or (dim_b, n_hists), float32 or float64
        Target weights (>= 0, finite); empty means uniform; same dtype
        rules.  2-D: a batch of n_hists problems sharing ``M`` (and ``a``
        when it is 1-D), solved together (numbaot's own; POT solves one
        problem per call).
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the loss.  A host ``M`` may
        have any real dtype (float16 as float32, integers as float64); a
        device ``M`` must be float32 or float64.
    reg : float
        Entropic regularisation strength (finite, > 0), in units of ``M``.
    m : float or array-like of shape (n_hists,), optional
        Mass to transport, in [0, min(|a|_1, |b|_1)] (units of the
        weights); default (None) that minimum.  One problem: a real number
        (Python or NumPy scalar, or a 0-d array of a real dtype).  For a
        batch: one mass for every problem, or one per problem (a list,
        tuple or array of shape (n_hists,) of integers or floats, used as
        float64; each checked against its own histograms; the default is
        each problem's minimum).
    method : str, default 'sinkhorn'
        'sinkhorn' (multiplicative domain) or 'sinkhorn_log' (log domain);
        case-insensitive.
    numItermax : int, default 1000
        Maximum number of iterations (>= 0).
    stopThr : float, default 1e-100
        Stop once the error ||K_prev - K||_F, taken every 10 iterations,
        is <= stopThr (the loop runs while it is > stopThr; it starts at 1,
        so stopThr >= 1 runs no iteration, as POT).  A batch has one error,
        the Frobenius norm over the problems still running (the stacked
        differences), and every problem makes the batch's iterations.
    verbose : bool, default False
        Print POT's error table at every check.
    log : bool, default False
        Also return the log dict.

    Returns
    -------
    gamma : ndarray (or device array), shape (dim_a, dim_b), or (n_hists, dim_a, dim_b) for a batch; dtype of the inputs
        The plan: mass moved from source i to target j (row sums <= a,
        column sums <= b, total m); gamma[k] is problem k's.  All NaN if the
        run (that problem) failed (Notes).
    log : dict
        Only if ``log=True``: ``'err'``, the list of errors at the checks
        (NumPy scalars of the result dtype); ``'partial_w_dist'``,
        <gamma, M>_F (a NumPy scalar, NaN after a failure; for a batch an
        ndarray (n_hists,) of the result dtype).

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."``; ``m`` < 0 or > min(|a|_1, |b|_1)
        (POT's messages; per problem for a batch), or NaN; for a batch,
        ``m`` an array, list or tuple not of shape (n_hists,); ``reg`` <= 0
        or not finite; ``M`` not 2-D, empty or not finite; max|M| / reg
        above 2**52; weights 0-d or of more than 2 dimensions, of the wrong
        length, negative, not finite or of zero mass; a 2-D ``a`` without a 2-D ``b`` of as many columns;
        a 2-D ``b`` without columns; ``numItermax`` < 0 or > 2**62;
        ``stopThr`` NaN or < 0.
    TypeError
        ``method`` not a string; non-numeric, boolean, complex or masked
        arrays; ``m`` a bool, not a real number, or (one problem) an array
        of one or more dimensions or a list/tuple, or an array of a
        non-real dtype; ``reg``, ``stopThr`` not real numbers;
        ``numItermax`` not an integer; host and device arrays mixed; a
        device ``M`` that is not float32/float64.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Notes
    -----
    As POT: when an entry of K underflows to 0 (small ``reg``) or a weight
    is 0, POT's elementwise corrections get a NaN and its next iterate is
    NaN; numbaot detects the same event (a zero in K, u, v or the mass
    scaling, in the dtype), prints "Warning: numerical errors at iteration
    t" (a print, as POT, not a warning), stops and returns POT's all-NaN
    plan.  ``m = 0`` fails at iteration 0.  In a batch, a problem that fails
    does so at POT's iteration for it alone (the message names it: "...
    at iteration t (problem k)"), its plan is NaN, and the others go on.
    Not reproduced: when K has
    subnormal entries (float32, exp(-M / reg) near 1e-40), POT's corrections
    of those entries round differently from the exact ones and POT may fail
    some iterations later; numbaot's iterate stays finite there.

    References
    ----------
    .. [1] J.-D. Benamou, G. Carlier, M. Cuturi, L. Nenna, G. Peyre,
       "Iterative Bregman projections for regularized transportation
       problems", SIAM J. Sci. Comput. 37(2), A1111-A1138, 2015.
    .. [2] L. Chapel, M. Alaya, G. Gasso, "Partial Optimal Transport with
       Applications on Positive-Unlabeled Learning", NeurIPS 2020.
    .. [3] POT 0.9.7, ``ot.partial.entropic_partial_wasserstein``.

    Examples
    --------
    POT's example: 0.1 of the mass moves, mostly along the cheapest pair.

    >>> import numpy as np
    >>> import numbaot
    >>> a, b = [.1, .2], [.1, .1]
    >>> M = [[0., 1.], [2., 3.]]
    >>> G = numbaot.partial.entropic_partial_wasserstein(a, b, M, 1, 0.1)
    >>> print(np.round(G, 2))
    [[0.06 0.02]
     [0.01 0.  ]]
    >>> print(round(float(G.sum()), 6))
    0.1

    A paired batch: two problems sharing M, one mass each.

    >>> A = np.array([[.1, .2], [.2, .1]])
    >>> B = np.array([[.1, .2], [.1, .1]])
    >>> G = numbaot.partial.entropic_partial_wasserstein(A, B, M, 1, m=[0.1, 0.2])
    >>> G.shape
    (2, 2, 2)
    >>> print(np.round(G.sum(axis=(1, 2)), 6))
    [0.1 0.2]
    """
    meth = _checks.check_method(method, _METHODS)
    if meth == "sinkhorn_log":
        return entropic_partial_wasserstein_logscale(
            a, b, M, reg, m=m, numItermax=numItermax, stopThr=stopThr, verbose=verbose,
            log=log)
    P, reg, m, numItermax, stopThr = _prepare(a, b, M, reg, m, numItermax, stopThr,
                                              "entropic_partial_wasserstein")
    be = _backend(P)
    st = be.PartialState(P.M, reg, P.a, P.b, m)
    errs = _partial_loop(lambda n: be.partial_steps(st, n), lambda: be.partial_error(st),
                         P.dtype, numItermax, stopThr, verbose, log,
                         lambda: be.partial_solve_small(st, numItermax, stopThr))
    _report_failures(be.partial_failed_at(st), P, False)
    plans = be.partial_plan(st)
    loss = be.partial_loss(st) if log else None
    return _outputs(P, plans, loss, errs, log)


def entropic_partial_wasserstein_logscale(a, b, M, reg, m=None, numItermax=1000,
                                          stopThr=1e-100, verbose=False, log=False):
    r"""Entropic partial OT plan in the log domain; mirrors ``ot.partial.entropic_partial_wasserstein_logscale`` [3]_.

    The problem and the iteration of :func:`entropic_partial_wasserstein`
    (Benamou et al. 2015, prop. 5 [1]_; Chapel et al. 2020 [2]_), run on the
    logarithm of the iterate with log-sum-exp reductions, so that any
    ``reg`` > 0 stays finite.  numbaot never forms the log kernel: each
    iteration reads ``M`` once and computes one exponential per entry.

    Parameters
    ----------
    a : array-like or CUDA device array, shape (dim_a,) or (dim_a, n_hists), float
        Source weights (>= 0, finite); empty means uniform; 2-D: paired
        batch (as :func:`entropic_partial_wasserstein`).
    b : array-like or CUDA device array, shape (dim_b,) or (dim_b, n_hists), float
        Target weights (>= 0, finite); empty means uniform; 2-D: a batch.
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite).
    reg : float
        Regularisation (finite, > 0).
    m : float or array-like of shape (n_hists,), optional
        Mass to transport, in [0, min(|a|_1, |b|_1)]; default that minimum
        (per problem for a batch).
    numItermax : int, default 1000
        Maximum number of iterations (>= 0).
    stopThr : float, default 1e-100
        Stop once ||LK_prev - LK||_F (log of the iterates), taken every 10
        iterations, is <= stopThr.
    verbose : bool, default False
        Print POT's error table at every check.
    log : bool, default False
        Also return the log dict.

    Returns
    -------
    gamma : ndarray (or device array), shape (dim_a, dim_b), or (n_hists, dim_a, dim_b) for a batch; dtype of the inputs
        The plan exp(LK) (gamma[k]: problem k's).
    log : dict
        Only if ``log=True``: ``'err'`` (errors at the checks; a batch's
        over the problems still running) and ``'partial_w_dist'``
        (<gamma, M>_F; (n_hists,) for a batch).

    Raises
    ------
    ValueError, TypeError, numbaot._dispatch.CudaUnavailableError
        As :func:`entropic_partial_wasserstein` (no ``method`` here).

    Warns
    -----
    UserWarning
        "Numerical errors at iteration t of
        entropic_partial_wasserstein_logscale" when a log-potential is not
        finite (a zero weight gives -inf, ``m = 0`` NaN): the loop stops and
        that iterate is returned (zeros on the rows/columns of zero weight),
        as POT.  In a batch, that problem alone stops there (the message
        ends with " (problem k)"); the others go on.

    References
    ----------
    .. [1] J.-D. Benamou, G. Carlier, M. Cuturi, L. Nenna, G. Peyre,
       "Iterative Bregman projections for regularized transportation
       problems", SIAM J. Sci. Comput. 37(2), A1111-A1138, 2015.
    .. [2] L. Chapel, M. Alaya, G. Gasso, "Partial Optimal Transport with
       Applications on Positive-Unlabeled Learning", NeurIPS 2020.
    .. [3] POT 0.9.7, ``ot.partial.entropic_partial_wasserstein_logscale``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = [.1, .2], [.1, .1]
    >>> M = [[0., 1.], [2., 3.]]
    >>> G, log = numbaot.partial.entropic_partial_wasserstein_logscale(a, b, M, 1, 0.1, log=True)
    >>> print(np.round(G, 2))
    [[0.06 0.02]
     [0.01 0.  ]]
    >>> sorted(log)
    ['err', 'partial_w_dist']
    """
    P, reg, m, numItermax, stopThr = _prepare(a, b, M, reg, m, numItermax, stopThr,
                                              "entropic_partial_wasserstein_logscale")
    be = _backend(P)
    st = be.PartialLogState(P.M, reg, P.a, P.b, m)
    errs = _partial_loop(lambda n: be.partial_log_steps(st, n),
                         lambda: be.partial_log_error(st), P.dtype, numItermax, stopThr,
                         verbose, log, lambda: be.partial_log_solve_small(st, numItermax, stopThr))
    _report_failures(be.partial_failed_at(st), P, True)
    plans = be.partial_log_plan(st)
    loss = be.partial_log_loss(st) if log else None
    return _outputs(P, plans, loss, errs, log)
