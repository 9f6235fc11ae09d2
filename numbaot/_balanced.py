"""Balanced Sinkhorn on either device: the kernels' launchers under POT's loops.

``knopp_solve`` / ``log_solve`` run ``numbaot.cpu.sinkhorn`` or
``numbaot.cuda.sinkhorn`` (same launcher contract: ``KnoppState``,
``knopp_steps``, ``knopp_error``, ``knopp_scalings``, ``knopp_loss``,
``knopp_plan`` and their ``log_`` counterparts) under the control flow of
``numbaot._loops``; ``knopp_outputs`` / ``log_outputs`` shape the results as
POT does.  Shared by ``numbaot.bregman``, ``numbaot.gradients`` and the
point-cloud solvers; validation happens before (``numbaot._checks``), except
the checks that need ``reg`` with the problem (equal masses, the scale of
M / reg: ``_checks.check_balanced``), which the solves run first, so that
every caller has them.
"""
import numpy as np

from . import _checks, _dispatch, _loops


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
    errs, ii = _loops.knopp_loop(lambda n: be.knopp_steps(st, n), lambda: be.knopp_error(st),
                                 P.dtype, numItermax, stopThr, verbose, log, warn)
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
def log_solve(P, reg, numItermax, stopThr, warmstart):
    """Run POT's log-domain Sinkhorn (a stopping test per problem) on
    problem ``P``.  Returns (launcher module, state, the result dict of
    ``_loops.log_loop``)."""
    _checks.check_balanced(P, reg)
    be = backend(P)
    loga, logb, u, v = _loops.log_start(P, warmstart)
    st = be.LogState(P.M, -1.0 / reg, loga, logb, P.b, u, v)
    res = _loops.log_loop(lambda n, active: be.log_steps(st, n, active),
                          lambda: be.log_errors(st), P.n_problems, P.dtype, numItermax, stopThr)
    return be, st, res


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
        lg["log_u"], lg["log_v"] = vector_result(P, log_u), vector_result(P, log_v)
        lg["u"], lg["v"] = vector_result(P, np.exp(log_u)), vector_result(P, np.exp(log_v))
        return lg

    return _outputs(P, lambda: be.log_loss(st), lambda: be.log_plan(st), log, want_loss,
                    log_dict)
