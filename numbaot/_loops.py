"""POT's control flow, written once for every solver and both devices.

The kernels (``numbaot.cpu.<topic>`` / ``numbaot.cuda.<topic>``) make
iterations; this module decides, as POT 0.9.7 does, when the error is
checked, what goes into ``log['err']``, what is printed with
``verbose=True``, when the loop stops, and which warning is issued.  Each
stopping rule is here once:

* :func:`knopp_iterate` / :func:`knopp_report` (together
  :func:`knopp_loop`): balanced Sinkhorn-Knopp, error every 10 iterations
  (``ot.bregman.sinkhorn_knopp``), failure/replay of a numerically broken
  step; the report also serves the compiled small-problem runs, which make
  the same record;
* :func:`log_loop`: log-domain Sinkhorn with a stopping test per problem
  (``ot.bregman.sinkhorn_log`` loops over the columns of a 2-D ``b``),
  :func:`log_record` for the same result from a compiled small-problem run,
  and :func:`log_report` for its verbose table and warnings;
* :func:`periodic_loop`: barycenters (error at ``ii % 10 == 1``,
  ``ot.bregman.barycenter_sinkhorn``) and convolutional barycenters (error at
  ``ii % 10 == 9``, ``ot.bregman.convolutional_barycenter2d``).

It also holds the verbose table format, POT's warning texts and the initial
iterates (warm starts checked by ``numbaot._checks.check_warmstart``).
Nothing here imports a kernel module.
"""
import warnings

import numpy as np

from . import _checks

# --------------------------------------------------------------------------
# POT's warning texts (verbatim, including POT's own spacing)
# --------------------------------------------------------------------------
NOT_CONVERGED = (
    "Sinkhorn did not converge. You might want to "
    "increase the number of iterations `numItermax` "
    "or the regularization parameter `reg`."
)
#: ``ot.bregman.sinkhorn_knopp``: a zero in K^T u or a NaN/inf in u, v.
KNOPP_NUMERICAL_ERRORS = "Warning: numerical errors at iteration %d"
#: ``ot.bregman.sinkhorn_stabilized`` and the unbalanced solvers.
NUMERICAL_ERRORS = "Numerical errors at iteration %s"
CONV_NOT_CONVERGED = (
    "Convolutional Sinkhorn did not converge. "
    "Try a larger number of iterations `numItermax` "
    "or a larger entropy `reg`."
)
ENTROPY_WARNING = "If reg_type = entropy, then the matrix c is overwritten by the one matrix."
REG_SCALING_WARNING = "Method not implemented yet. Using classic Sinkhorn-Knopp"
STAB_UNBALANCED_NOT_CONVERGED = (
    "Stabilized Unbalanced Sinkhorn did not converge."
    + "Try a larger entropy `reg` or a lower mass `reg_m`."
    + "Or a larger absorption threshold `tau`."
)


# --------------------------------------------------------------------------
# verbose table
# --------------------------------------------------------------------------
def print_header_and_row(ii, err, header_every):
    """POT's verbose table: the header when ``ii % header_every == 0``, then
    the row of iteration ``ii``."""
    if ii % header_every == 0:
        print("{:5s}|{:12s}".format("It.", "Err") + "\n" + "-" * 19)
    print("{:5d}|{:8e}|".format(ii, err))


def print_errs(errs, every=50):
    """The table of a whole error list, row i for iteration i (the unbalanced
    solvers print after the compiled loop, in POT's format)."""
    for i, err in enumerate(errs):
        print_header_and_row(i, err, every)


def err_scalar(x, dtype):
    """An error value as a NumPy scalar of the result dtype (POT's type)."""
    return dtype.type(x)


# --------------------------------------------------------------------------
# stopping rules
# --------------------------------------------------------------------------
def blocks(numItermax, period):
    """Iteration ranges [start, stop) whose last iteration is either a check
    iteration (ii % period == 0) or the final one."""
    ii = 0
    while ii < numItermax:
        if ii % period == 0:
            stop = ii + 1
        else:
            stop = min(numItermax, (ii // period + 1) * period + 1)
        yield ii, stop
        ii = stop


#: how a Sinkhorn-Knopp run ended (:func:`knopp_iterate`; the compiled
#: small-problem runs of ``numbaot.cpu._small`` return the same codes)
RAN_OUT, CONVERGED, FAILED = 0, 1, 2


def knopp_iterate(run, error, dtype, numItermax, stopThr):
    """POT's Sinkhorn-Knopp control flow, for both devices: ``run(n)`` makes
    up to n iterations and returns (done, failed); ``error()`` is the 2-norm
    of the column-marginal violation (all problems together), taken at
    ii % 10 == 0 and compared with stopThr in the result ``dtype`` (POT's
    arithmetic).  Returns the record (errors at the checks, float64 list;
    last iteration index; ``RAN_OUT`` / ``CONVERGED`` / ``FAILED``) that
    :func:`knopp_report` turns into POT's outputs."""
    errs = []
    ii = 0
    for start, stop in blocks(numItermax, 10):
        done, failed = run(stop - start)
        if failed:
            return errs, start + done, FAILED
        ii = stop - 1
        if ii % 10 == 0:
            err = err_scalar(error(), dtype)
            errs.append(err)
            if err < stopThr:
                return errs, ii, CONVERGED
    return errs, ii, RAN_OUT


def knopp_report(record, dtype, verbose, log, warn):
    """POT's verbose table, warnings and ``log['err']`` of a Sinkhorn-Knopp
    run ``record`` (:func:`knopp_iterate`, or the compiled small-problem
    run): "Warning: numerical errors at iteration %d" on a failure, the
    table's row of every check that did not stop the run, "Sinkhorn did not
    converge" (if ``warn``) when numItermax ran out.  Returns (the error
    list, in ``dtype`` scalars when ``log``, else empty; last iteration)."""
    errs, ii, status = record
    if status == FAILED:
        warnings.warn(KNOPP_NUMERICAL_ERRORS % ii)
    if verbose:
        shown = len(errs) - 1 if status == CONVERGED else len(errs)
        for k in range(shown):
            print_header_and_row(10 * k, err_scalar(errs[k], dtype), 200)
    if status == RAN_OUT and warn:
        warnings.warn(NOT_CONVERGED)
    return (list(np.asarray(errs, dtype=dtype)) if log else []), ii


def knopp_loop(run, error, dtype, numItermax, stopThr, verbose, log, warn):
    """:func:`knopp_iterate` then :func:`knopp_report`: returns the error
    list and the last iteration index."""
    return knopp_report(knopp_iterate(run, error, dtype, numItermax, stopThr), dtype, verbose,
                        log, warn)


def log_loop(run, errors, n_problems, dtype, numItermax, stopThr):
    """POT's log-domain control flow with a stopping test per problem, for
    both devices: ``run(n, active)`` makes n iterations of the active
    problems; ``errors()`` gives each problem's column-marginal violation
    (2-norm).  Returns the per-problem error lists, check iterations, last
    iterations and converged flags."""
    active = np.ones(n_problems, dtype=np.bool_)
    errs = [[] for _ in range(n_problems)]
    checks = [[] for _ in range(n_problems)]
    niter = [0] * n_problems
    converged = [False] * n_problems
    for start, stop in blocks(numItermax, 10):
        run(stop - start, active)
        ii = stop - 1
        for k in np.flatnonzero(active):
            niter[k] = ii
        if ii % 10 == 0:
            e = errors()
            for k in np.flatnonzero(active):
                err = err_scalar(e[k], dtype)
                errs[k].append(err)
                checks[k].append(ii)
                if err < stopThr:
                    converged[k] = True
                    active[k] = False
            if not active.any():
                break
    return dict(errs=errs, checks=checks, niter=niter, converged=converged)


def log_record(errs, n_errs, niter, converged, dtype):
    """:func:`log_loop`'s result from the arrays of a compiled run (the
    small-problem path of ``numbaot.cpu.sinkhorn.log_solve_small``): errors
    (n_problems, >= n_checks), checks per problem, last iterations,
    converged flags.  The checks are at ii = 0, 10, 20, ..."""
    n_problems = len(n_errs)
    return dict(errs=[list(errs[k, :n_errs[k]].astype(dtype)) for k in range(n_problems)],
                checks=[list(range(0, 10 * int(n_errs[k]), 10)) for k in range(n_problems)],
                niter=[int(x) for x in niter], converged=[bool(x) for x in converged])


def log_warn(P, warn):
    """Whether the log-domain solver warns: POT's ``sinkhorn_log`` loops over
    the columns of a 2-D ``b`` without passing ``warn`` on, so those calls
    always warn; numbaot's paired batches (no POT counterpart) respect
    ``warn``."""
    return warn or (P.n_hists > 0 and not P.paired)


def log_report(P, st, verbose, warn):
    """Verbose tables and warnings of :func:`log_loop`'s result, in POT's
    order (one problem after another)."""
    for k in range(P.n_problems):
        log_report_one(st, verbose, warn, k)


def log_report_one(st, verbose, warn, k=0):
    """:func:`log_report` for problem ``k`` of the result ``st``."""
    if verbose:
        for ii, err in zip(st["checks"][k], st["errs"][k]):
            print_header_and_row(ii, err, 200)
    if warn and not st["converged"][k]:
        warnings.warn(NOT_CONVERGED)


def periodic_loop(run, dtype, numItermax, stopThr, verbose, log, warn, *, check_at,
                  print_before_stop, warning):
    """The control flow of POT's barycenter solvers, for both devices:
    ``run(want_err)`` makes one iteration for all histograms and, when
    ``want_err``, returns its error.  The error is taken at
    ``ii % 10 == check_at`` and appended to the log; it is printed (when
    ``verbose``) before the comparison with ``stopThr`` if
    ``print_before_stop``, else after it (only when the loop goes on).
    ``warning`` is issued (when ``warn``) if the loop runs out.

    POT uses ``check_at=1, print_before_stop=False, warning=NOT_CONVERGED``
    in ``barycenter_sinkhorn`` and ``_barycenter_sinkhorn_log``, and
    ``check_at=9, print_before_stop=True, warning=CONV_NOT_CONVERGED`` in
    the convolutional barycenters.  Returns the error list and the last
    iteration index."""
    errs = []
    ii = 0
    converged = False
    for ii in range(numItermax):
        want = ii % 10 == check_at
        err = run(want)
        if want:
            err = err_scalar(err, dtype)
            if log:
                errs.append(err)
            if verbose and print_before_stop:
                print_header_and_row(ii, err, 200)
            if err < stopThr:
                converged = True
                break
            if verbose and not print_before_stop:
                print_header_and_row(ii, err, 200)
    if not converged and warn:
        warnings.warn(warning)
    return errs, ii


# --------------------------------------------------------------------------
# unbalanced OT: POT's scalars
# --------------------------------------------------------------------------
def marginal_exponent(reg_m, reg):
    """The exponent reg_m / (reg_m + reg) of the KL-relaxed scaling updates
    (1 for a hard marginal, reg_m = inf); POT's ``fi``."""
    return reg_m / (reg_m + reg) if reg_m != np.inf else 1.0


def kl_div(p, q):
    """POT's ``nx.kl_div(p, q)`` (mass=False): sum p log(p / q + 1e-16),
    with a term of p = 0 counted as 0 (0 log 0 = 0).  POT's is NaN where p
    and q are both 0 (a zero weight with no mass on it: a NaN total cost);
    elsewhere the same sum."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.sum(np.where(p != 0, p * np.log(p / q + 1e-16), 0.0)))


# --------------------------------------------------------------------------
# initial iterates (warm starts are checked by numbaot._checks.check_warmstart)
# --------------------------------------------------------------------------
def knopp_start(P, warmstart):
    """Initial scalings (u, v) of Sinkhorn-Knopp, float64 (n_problems, dim):
    POT's uniform 1/dim, or exp of the warm start's (log u, log v)."""
    dim_a, dim_b = P.shape
    n_problems = P.n_problems
    if warmstart is None:
        return (np.full((n_problems, dim_a), 1.0 / dim_a),
                np.full((n_problems, dim_b), 1.0 / dim_b))
    w_a, w_b = _checks.check_warmstart(warmstart, P.shape, P.n_hists, (P.a, P.b))
    return np.exp(w_a), np.exp(w_b)


def log_start(P, warmstart):
    """log a, log b (-inf for zero weights) and the initial log-scalings
    (n_problems, dim), float64 host arrays owned by the caller."""
    n_problems = P.n_problems
    with np.errstate(divide="ignore"):
        loga = np.log(P.a)
        logb = np.log(P.b)
    if warmstart is None:
        return loga, logb, np.zeros((n_problems, P.shape[0])), np.zeros((n_problems, P.shape[1]))
    u, v = _checks.check_warmstart(warmstart, P.shape, P.n_hists, (P.a, P.b),
                                   per_hist_pairs=True)
    return loga, logb, u, v
