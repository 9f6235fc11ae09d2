"""Balanced Sinkhorn on either device: the kernels' launchers under POT's loops.

``knopp_solve`` / ``log_solve`` run ``numbaot.cpu.sinkhorn`` or
``numbaot.cuda.sinkhorn`` (same launcher contract: ``KnoppState``,
``knopp_steps``, ``knopp_solve_small``, ``knopp_error``, ``knopp_scalings``,
``knopp_loss``, ``knopp_plan`` and their ``log_`` counterparts) under the
control flow of ``numbaot._loops``; a small problem on the CPU runs the
whole loop in one compiled call (``knopp_solve_small``), whose record goes
through the same report (warnings, verbose table, log); ``knopp_outputs`` / ``log_outputs`` shape the results as
POT does.  Shared by ``numbaot.bregman``, ``numbaot.gradients`` and the
point-cloud solvers; validation happens before (``numbaot._checks``), except
the checks that need ``reg`` with the problem (equal masses, the scale of
M / reg: ``_checks.check_balanced``), which the solves run first, so that
every caller has them.
"""
import numpy as np

from . import _checks, _config, _dispatch, _loops
from ._lazy import eps_schedule, rescaled
from .cpu import _small


def backend(P):
    """The launcher module of the problem's device."""
    if P.device == "cuda":
        from .cuda import sinkhorn
    else:
        from .cpu import sinkhorn
    return sinkhorn


# --------------------------------------------------------------------------
# results in POT's types, on the caller's device
# --------------------------------------------------------------------------
def vector_result(P, x):
    """A host array as a result in the problem's dtype, on its device."""
    x = np.asarray(x, dtype=P.dtype)
    return _dispatch.result_to_device(x, P.like) if P.device == "cuda" else x


def loss_result(P, loss):
    """The losses (n_problems,) as returned: a vector for 2-D ``b``, else the
    single loss as a NumPy scalar of the result dtype (``np.float64`` /
    ``np.float32``, POT's type) on either device."""
    if P.n_hists:
        return vector_result(P, loss)
    return P.dtype.type(loss[0])


def plan_result(P, plan):
    """A plan made by a launcher, as the caller's array kind."""
    return _dispatch.like_input(plan, P.like) if P.device == "cuda" else plan


def _per_problem(P, x):
    """(n_problems, dim) -> (dim,) for one problem, (dim, n_hists) for a batch."""
    return x.T if P.n_hists else x[0]


def _outputs(P, loss, plan, log, want_loss, log_dict):
    """The common tail of :func:`knopp_outputs` and :func:`log_outputs`: the
    losses (``loss()``) for ``want_loss`` or a batch, else the plan
    (``plan()``); with ``log``, also ``log_dict()``."""
    res = loss_result(P, loss()) if want_loss or P.n_hists else plan_result(P, plan())
    return (res, log_dict()) if log else res


# --------------------------------------------------------------------------
# Sinkhorn-Knopp
# --------------------------------------------------------------------------
def knopp_solve(P, reg, numItermax, stopThr, verbose, log, warn, warmstart):
    """Run POT's Sinkhorn-Knopp on problem ``P``.  Returns (launcher module,
    state, error list, last iteration)."""
    _checks.check_balanced(P, reg)
    be = backend(P)
    u, v = _loops.knopp_start(P, warmstart)
    st = be.KnoppState(P.M, -1.0 / reg, P.a, P.b, u, v)
    record = be.knopp_solve_small(st, numItermax, stopThr)
    if record is None:
        record = _loops.knopp_iterate(lambda n: be.knopp_steps(st, n),
                                      lambda: be.knopp_error(st), P.dtype, numItermax, stopThr)
    errs, ii = _loops.knopp_report(record, P.dtype, verbose, log, warn)
    return be, st, errs, ii


def knopp_outputs(P, solved, log, want_loss):
    """The plan (or the losses) and POT's log dict (``err``, ``niter``,
    ``u``, ``v``) of :func:`knopp_solve`'s result."""
    be, st, errs, ii = solved

    def log_dict():
        u, v = be.knopp_scalings(st)
        return {"err": errs, "niter": ii, "u": vector_result(P, _per_problem(P, u)),
                "v": vector_result(P, _per_problem(P, v))}

    return _outputs(P, lambda: be.knopp_loss(st), lambda: be.knopp_plan(st), log, want_loss,
                    log_dict)


# --------------------------------------------------------------------------
# log domain
# --------------------------------------------------------------------------
def log_solve(P, reg, numItermax, stopThr, warmstart, scaling=None):
    """Run POT's log-domain Sinkhorn (a stopping test per problem) on
    problem ``P``, after :func:`log_anneal`'s epsilon scaling when
    ``scaling`` (a checked float in (0, 1)) is given and ``warmstart`` is
    not.  Returns (launcher module, state, the result dict of
    ``_loops.log_loop``, plus 'eps_schedule' and 'niter_scaling' with
    ``scaling``)."""
    _checks.check_balanced(P, reg)
    be = backend(P)
    loga, logb, u, v = _loops.log_start(P, warmstart)
    schedule, n_anneal = [], 0
    if scaling is not None and warmstart is None:
        absmax = P.absmax  # from the finiteness scan (None: no scan was made)
        if absmax is None:
            absmax = _checks.finite_absmax(_dispatch.to_host(P.M), "M")
        schedule = eps_schedule(absmax, reg, scaling)
        if schedule:
            u, v, n_anneal = log_anneal(be, P, loga, logb, u, v, schedule, reg)
    st = be.LogState(P.M, -1.0 / reg, loga, logb, P.b, u, v)
    record = be.log_solve_small(st, numItermax, stopThr)
    if record is not None:
        res = _loops.log_record(*record, P.dtype)
    else:
        res = _loops.log_loop(lambda n, active: be.log_steps(st, n, active),
                              lambda: be.log_errors(st), P.n_problems, P.dtype, numItermax,
                              stopThr)
    if scaling is not None:
        res = dict(res, eps_schedule=schedule, niter_scaling=n_anneal)
    return be, st, res


def log_anneal(be, P, loga, logb, u, v, schedule, reg, stage_iters=None):
    """Epsilon scaling for the dense log domain: ``stage_iters`` iterations
    (default ``_config.EPS_SCALING_STAGE_ITERS``) of the launchers' log
    solver at each temperature of ``schedule`` (decreasing, all > reg; from
    eps_0 = max |M_ij|, the squared diameter of the point-cloud path when M
    holds squared distances), each stage started from the previous one's
    dual potentials F = eps (log_u - log a), G = eps (log_v - log b) (the
    potentials carry across temperatures, as ``numbaot._lazy.set_temperature``;
    Schmitzer 2019, sec. 3.2; Feydy 2020, Alg. 3.5).  Each stage is a fresh
    launcher state (its first column logsumexp is the stage's first
    v-update).  Returns the log-scalings (u, v) at ``reg`` (host float64
    (n_problems, dim)) and the number of iterations made."""
    stage_iters = _config.EPS_SCALING_STAGE_ITERS if stage_iters is None else stage_iters
    active = np.ones(P.n_problems, dtype=bool)
    for k, eps in enumerate(schedule):
        st = be.LogState(P.M, -1.0 / eps, loga, logb, P.b, u, v)
        be.log_steps(st, stage_iters, active)
        u, v = (np.array(x, dtype=np.float64) for x in be.log_potentials(st))
        eps_next = schedule[k + 1] if k + 1 < len(schedule) else reg
        u, v = rescaled(u, loga, eps / eps_next), rescaled(v, logb, eps / eps_next)
    return u, v, len(schedule) * stage_iters


def log_outputs(P, solved, log, want_loss):
    """The plan (or the losses) and POT's log dict of :func:`log_solve`'s
    result: ``err``, ``niter`` (single problem only), ``log_u``, ``log_v``,
    ``u``, ``v``."""
    be, st, res = solved

    def log_dict():
        u, v = be.log_potentials(st)
        log_u = np.asarray(_per_problem(P, u), dtype=P.dtype)
        log_v = np.asarray(_per_problem(P, v), dtype=P.dtype)
        lg = {} if P.n_hists else {"err": res["errs"][0], "niter": res["niter"][0]}
        if "eps_schedule" in res:  # epsilon scaling (numbaot's ``scaling``)
            lg.update(eps_schedule=res["eps_schedule"], niter_scaling=res["niter_scaling"])
            if not P.n_hists:  # every iteration: the annealing's and those at reg
                n_final = res["niter"][0] + 1 if res["errs"][0] else 0
                lg["niter_total"] = res["niter_scaling"] + n_final
        lg["log_u"], lg["log_v"] = vector_result(P, log_u), vector_result(P, log_v)
        lg["u"], lg["v"] = vector_result(P, np.exp(log_u)), vector_result(P, np.exp(log_v))
        return lg

    return _outputs(P, lambda: be.log_loss(st), lambda: be.log_plan(st), log, want_loss,
                    log_dict)


# --------------------------------------------------------------------------
# the one-call path of a plain small problem (issue 23): no Problem, no state
# --------------------------------------------------------------------------
#: dtypes of the one-call path, with their relative mass tolerance
#: (``_checks.mass_tolerance``)
_FAST_TOL = {np.dtype(t): _checks.mass_tolerance(np.dtype(t)) for t in (np.float64, np.float32)}


def _fast_tol(a, b, M, reg, numItermax, stopThr, warmstart, log_domain):
    """The mass tolerance when (a, b, M, ...) is a plain small problem for
    :func:`fast_solve`: NumPy arrays of one dtype (float64 or float32), 1-D
    weights of the right lengths, M of at most ``_config.SMALL_MAX_ENTRIES``
    entries, reg > 0 and
    stopThr >= 0 real, an int numItermax within ``_config.SMALL_MAX_ITER``,
    no warm start; else None.  The values are screened in the compiled call
    (``numbaot.cpu._small``); anything this or the screen refuses takes the
    full path (``numbaot._checks``), which raises where the input is bad."""
    if (warmstart is not None or type(M) is not np.ndarray or type(a) is not np.ndarray
            or type(b) is not np.ndarray):
        return None
    dt = M.dtype
    tol = _FAST_TOL.get(dt)
    if tol is None or a.dtype != dt or b.dtype != dt or M.ndim != 2 or a.ndim != 1 or b.ndim != 1:
        return None
    n, m = M.shape
    limit = _config.SMALL_MAX_ENTRIES
    if log_domain:
        limit = min(limit, _config.SMALL_MAX_ENTRIES_LOG)
    if a.shape[0] != n or b.shape[0] != m or n == 0 or m == 0 or n * m > limit:
        return None
    if type(numItermax) is not int or not 0 <= numItermax <= _config.SMALL_MAX_ITER:
        return None
    if not (isinstance(reg, (float, int)) and isinstance(stopThr, (float, int))):
        return None
    if type(reg) is bool or type(stopThr) is bool or not (0 < reg < np.inf and stopThr >= 0):
        return None
    return tol


def plain_weights(w, dim, M):
    """POT's empty weights (``[]``, ``()``, an empty 1-D array, None) of a
    float64 NumPy M as the full path makes them (``_checks.check_histograms``:
    1 / dim, float64), so that such a call can take the one-call path
    (``sinkhorn([], [], M, reg)`` at 16 x 16 took the full path: 20 µs
    against 5 µs); any other ``w`` unchanged.  (A float32 M keeps the full
    path: its uniform weights are float64 there, not of M's dtype.)"""
    if type(M) is not np.ndarray or M.dtype != np.float64 or dim == 0:
        return w  # (an empty M: the full path's validation names it)
    if w is None or (type(w) in (list, tuple) and len(w) == 0) or (
            type(w) is np.ndarray and w.ndim <= 1 and w.size == 0):
        return np.full(dim, 1.0 / dim)
    return w


def plain_array(x):
    """``x`` as a C-contiguous writeable array (a copy if it is not one, as
    ``_checks.kernel_array``: Numba would compile the kernels again for a
    read-only or strided array)."""
    f = x.flags
    return x if f.c_contiguous and f.writeable else np.array(x, order="C")


def fast_solve(method, a, b, M, reg, numItermax, stopThr, verbose, log, warn, warmstart,
               want_loss):
    """POT's ``sinkhorn_knopp`` (``method='sinkhorn'``) or ``sinkhorn_log``
    on a plain small problem (:func:`_fast_tol`) in one compiled call
    (``numbaot.cpu._small``): validation screen, solve, plan or loss.
    Returns the outputs as the full path would (plan or loss, and the log
    dict), or None when the call must take the full path."""
    if type(M) is np.ndarray and M.ndim == 2:
        a, b = plain_weights(a, M.shape[0], M), plain_weights(b, M.shape[1], M)
    tol = _fast_tol(a, b, M, reg, numItermax, stopThr, warmstart, method == "sinkhorn_log")
    if tol is None:
        return None
    a, b, M = plain_array(a), plain_array(b), plain_array(M)
    dt = M.dtype
    n, m = M.shape
    errs = np.empty((1, numItermax // 10 + 1))
    plan = np.empty((n, m), dtype=dt)
    u2, v2 = np.empty((1, n)), np.empty((1, m))
    if method == "sinkhorn":
        ok, ii, ne, status, loss = _small.knopp_small_call(
            M, M.reshape(-1), a, b, float(reg), numItermax, float(stopThr), tol,
            _checks.COST_SCALE_MAX, want_loss, errs[0], plan, u2, v2)
    else:
        ok, ii, ne, status, loss = _small.log_small_call(
            M, M.reshape(-1), a, b, float(reg), numItermax, float(stopThr), tol,
            _checks.COST_SCALE_MAX, want_loss, errs, plan, u2, v2)
    if not ok:
        return None
    u, v = u2[0], v2[0]
    res = dt.type(loss) if want_loss else plan
    if method == "sinkhorn":
        err_list, ii = _loops.knopp_report((errs[0, :ne], ii, status), dt, verbose, log, warn)
        if not log:
            return res
        return res, {"err": err_list, "niter": ii, "u": np.asarray(u, dtype=dt),
                     "v": np.asarray(v, dtype=dt)}
    rec = _loops.log_record(errs, [ne], [ii], [status], dt)
    _loops.log_report_one(rec, verbose, warn)
    if not log:
        return res
    log_u, log_v = np.asarray(u, dtype=dt), np.asarray(v, dtype=dt)
    return res, {"err": rec["errs"][0], "niter": ii, "log_u": log_u, "log_v": log_v,
                 "u": np.exp(log_u), "v": np.exp(log_v)}
