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
are POT's); 2-D (batched) weights are not accepted (POT does not accept them
either).  CUDA device arrays (numba, CuPy) run on ``numbaot.cuda.partial`` in
the input dtype and return a device plan.

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
import math
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
    """POT's |w|_1: the sum in the caller's dtype; uniform weights (sum of
    ones(dim) / dim in float64) for an empty ``w``."""
    w = np.asarray(_dispatch.to_host(w) if w is not None else [])
    if w.size == 0:
        return np.sum(np.ones(dim) / dim)
    return np.sum(w)


def _check_m(m, a, b, P):
    """POT's default and checks of ``m``; returns it as a float."""
    dim_a, dim_b = P.shape
    bound = min(_mass(a, dim_a), _mass(b, dim_b))
    if m is None:
        m = bound * 1.0
    elif isinstance(m, (bool, np.bool_)) or not isinstance(m, (numbers.Real, np.ndarray)):
        raise TypeError(f"m must be a real number or None; got {type(m).__name__}")
    elif isinstance(m, np.ndarray) and (m.ndim != 0 or m.dtype.kind not in "iuf"):
        raise TypeError(f"m must be a real scalar or None; got an array of shape {m.shape}")
    if math.isnan(float(m)):
        raise ValueError(f"m must be a number in [0, min(|a|_1, |b|_1)]; got {m!r}")
    if m < 0:
        raise ValueError(_M_NEGATIVE)
    if m > bound:
        raise ValueError(_M_TOO_LARGE)
    return float(m)


def _prepare(a, b, M, reg, m, numItermax, stopThr, name):
    P = _checks.prepare_problem(a, b, M, allow_batch=False, method_name=name)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
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
    returns (done, failed).  ``small()``, when it returns a record (the
    backend ran the whole loop in one call: the errors at the checks and the
    failing iteration or None), replaces the loop; the verbose table is then
    printed from the record.  Returns (error list, failing iteration or
    None)."""
    rec = small() if small is not None else None
    if rec is not None:
        checks, failed_at = rec
        errs = [_loops.err_scalar(e, dtype) for e in checks]
        if verbose:
            for k, err in enumerate(errs):
                _print_check(10 * k, err)
        return (errs if log else []), failed_at
    errs = []
    if not 1 > stopThr:
        return errs, None
    for start, stop in _loops.blocks(numItermax, 10):
        done, failed = run(stop - start)
        if failed:
            return errs, start + done
        ii = stop - 1
        if ii % 10 == 0:
            err = _loops.err_scalar(error(), dtype)
            if log:
                errs.append(err)
            if verbose:
                _print_check(ii, err)
            if not err > stopThr:
                break
    return errs, None


def _outputs(P, plan, loss, errs, log):
    if P.device == "cuda":
        plan = _dispatch.like_input(plan, P.like)
    if not log:
        return plan
    return plan, {"err": errs, "partial_w_dist": P.dtype.type(loss)}


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
    a : array-like or CUDA device array, shape (dim_a,), float
        Source weights (>= 0, finite); empty (``[]``) means uniform 1 / dim_a.
    b : array-like or CUDA device array, shape (dim_b,), float
        Target weights (>= 0, finite); empty means uniform.
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the loss.
    reg : float
        Entropic regularisation strength (finite, > 0), in units of ``M``.
    m : float, optional
        Mass to transport, in [0, min(|a|_1, |b|_1)]; default (None) that
        minimum.
    method : str, default 'sinkhorn'
        'sinkhorn' (multiplicative domain) or 'sinkhorn_log' (log domain);
        case-insensitive.
    numItermax : int, default 1000
        Maximum number of iterations (>= 0).
    stopThr : float, default 1e-100
        Stop once the error ||K_prev - K||_F, taken every 10 iterations,
        is <= stopThr (the loop runs while it is > stopThr; it starts at 1,
        so stopThr >= 1 runs no iteration, as POT).
    verbose : bool, default False
        Print POT's error table at every check.
    log : bool, default False
        Also return the log dict.

    Returns
    -------
    gamma : ndarray (or device array), shape (dim_a, dim_b), dtype of the inputs
        The plan: mass moved from source i to target j (row sums <= a,
        column sums <= b, total m).  All NaN if the run failed (Notes).
    log : dict
        Only if ``log=True``: ``'err'``, the list of errors at the checks
        (NumPy scalars of the result dtype); ``'partial_w_dist'``,
        <gamma, M>_F (a NumPy scalar, NaN after a failure).

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."``; ``m`` < 0 or > min(|a|_1, |b|_1)
        (POT's messages), or NaN; ``reg`` <= 0 or not finite; ``M`` not 2-D,
        empty or not finite; weights of the wrong length, 2-D, negative, not
        finite or of zero mass; negative ``numItermax``.
    TypeError
        ``method`` not a string; non-numeric, boolean or complex arrays;
        ``m``, ``reg``, ``stopThr`` not real numbers; ``numItermax`` not an
        integer; host and device arrays mixed.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Notes
    -----
    As POT: when an entry of K underflows to 0 (small ``reg``) or a weight
    is 0, POT's elementwise corrections get a NaN and its next iterate is
    NaN; numbaot detects the same event (a zero in K, u, v or the mass
    scaling, in the dtype), prints "Warning: numerical errors at iteration
    t" (a print, as POT, not a warning), stops and returns POT's all-NaN
    plan.  ``m = 0`` fails at iteration 0.  Not reproduced: when K has
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
    """
    meth = _checks.check_method(method, _METHODS)
    if meth == "sinkhorn_log":
        return entropic_partial_wasserstein_logscale(
            a, b, M, reg, m=m, numItermax=numItermax, stopThr=stopThr, verbose=verbose,
            log=log)
    P, reg, m, numItermax, stopThr = _prepare(a, b, M, reg, m, numItermax, stopThr,
                                              "entropic_partial_wasserstein")
    be = _backend(P)
    st = be.PartialState(P.M, reg, P.a[0], P.b[0], m)
    errs, failed_at = _partial_loop(lambda n: be.partial_steps(st, n),
                                    lambda: be.partial_error(st), P.dtype, numItermax,
                                    stopThr, verbose, log,
                                    lambda: be.partial_solve_small(st, numItermax, stopThr))
    if failed_at is not None:
        print(_PRINT_FAILURE, failed_at)
    plan = be.partial_plan(st)
    loss = be.partial_loss(st) if log else np.nan
    return _outputs(P, plan, loss, errs, log)


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
    a : array-like or CUDA device array, shape (dim_a,), float
        Source weights (>= 0, finite); empty means uniform.
    b : array-like or CUDA device array, shape (dim_b,), float
        Target weights (>= 0, finite); empty means uniform.
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite).
    reg : float
        Regularisation (finite, > 0).
    m : float, optional
        Mass to transport, in [0, min(|a|_1, |b|_1)]; default that minimum.
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
    gamma : ndarray (or device array), shape (dim_a, dim_b), dtype of the inputs
        The plan exp(LK).
    log : dict
        Only if ``log=True``: ``'err'`` (errors at the checks) and
        ``'partial_w_dist'`` (<gamma, M>_F).

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
        as POT.

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
    st = be.PartialLogState(P.M, reg, P.a[0], P.b[0], m)
    errs, failed_at = _partial_loop(lambda n: be.partial_log_steps(st, n),
                                    lambda: be.partial_log_error(st), P.dtype, numItermax,
                                    stopThr, verbose, log,
                                    lambda: be.partial_log_solve_small(st, numItermax, stopThr))
    if failed_at is not None:
        warnings.warn(_LOG_FAILURE.format(failed_at), stacklevel=2)
    plan = be.partial_log_plan(st)
    loss = be.partial_log_loss(st) if log else np.nan
    return _outputs(P, plan, loss, errs, log)
