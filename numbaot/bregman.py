"""Balanced entropic optimal transport (Sinkhorn), drop-in for ``ot.bregman``.

Every function here mirrors the POT 0.9.7 function of the same name: argument
order, keywords and defaults, returns, ``log`` keys, stopping rules and warning
texts.  Where numbaot deliberately differs:

* bad input raises a ``ValueError``/``TypeError`` naming the argument (POT
  returns garbage or fails deep inside);
* 2-D ``a`` of shape (dim_a, n_hists) together with 2-D ``b`` of shape
  (dim_b, n_hists) solves n_hists independent problems that share ``M``
  ("paired batches", which POT cannot do);
* arithmetic is carried out in float64 whatever the input dtype on the CPU;
  results are returned in the input dtype (float32 in, float32 out).

GPU: every function also takes CUDA device arrays (numba device arrays, CuPy
arrays: anything with ``__cuda_array_interface__``) for ``a``, ``b``, ``M``
(``[]``/None weights allowed) and then returns device arrays of the input
dtype (plans, vectors of losses, the arrays in ``log``; a single loss stays a
NumPy scalar).  ``sinkhorn_knopp`` and ``sinkhorn_log`` (and ``sinkhorn``,
``sinkhorn2`` with these methods) run on the CUDA kernels of
``numbaot.cuda.sinkhorn`` and compute in the input dtype;
``sinkhorn_stabilized``, ``sinkhorn_epsilon_scaling`` and ``greenkhorn`` copy
the inputs to the host, run there and copy the results back.  Mixing host
and device arrays raises ``TypeError``; without numba-cuda or a usable GPU,
``numbaot._dispatch.CudaUnavailableError`` (a ``RuntimeError``) names the fix
(``pip install 'numbaot[cuda]'``).

The problem solved is (Cuturi 2013; Peyre & Cuturi 2019, eq. 4.2)

    gamma = argmin_{gamma 1 = a, gamma^T 1 = b, gamma >= 0} <gamma, M>_F + reg * sum gamma log gamma,

whose solution is gamma = diag(u) K diag(v) with K = exp(-M / reg).
"""
import warnings

import numpy as np

from . import _checks
from ._checks import prepare_problem
from ._config import BATCH_MINOR_MIN, UNDERFLOW_RTOL
from ._dispatch import device_of
from .cpu import chunk_layout
from .cpu import sinkhorn as _k

__all__ = [
    "sinkhorn",
    "sinkhorn2",
    "sinkhorn_knopp",
    "sinkhorn_log",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
    "greenkhorn",
    "empirical_sinkhorn",
    "empirical_sinkhorn2",
    "empirical_sinkhorn_divergence",
    "barycenter",
    "barycenter_sinkhorn",
    "barycenter_stabilized",
    "convolutional_barycenter2d",
]

_NOT_CONVERGED = (
    "Sinkhorn did not converge. You might want to "
    "increase the number of iterations `numItermax` "
    "or the regularization parameter `reg`."
)

_SINKHORN_METHODS = (
    "sinkhorn",
    "sinkhorn_log",
    "greenkhorn",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
)
_SINKHORN2_METHODS = ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized")


# --------------------------------------------------------------------------
# host helpers
# --------------------------------------------------------------------------
def _check_common(reg, numItermax, stopThr):
    reg = _checks.check_reg(reg)
    numItermax = _checks.check_iter_count(numItermax, "numItermax")
    stopThr = _checks.check_real_scalar(stopThr, "stopThr")
    return reg, numItermax, stopThr


def _blocks(numItermax, period):
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


def _print_header_and_row(ii, err, header_every):
    if ii % header_every == 0:
        print("{:5s}|{:12s}".format("It.", "Err") + "\n" + "-" * 19)
    print("{:5d}|{:8e}|".format(ii, err))


def _warmstart_pair(warmstart, P, what):
    """Return warmstart (w_a, w_b) as float64 arrays (n_problems, dim)."""
    dim_a, dim_b = P.shape
    K = P.n_problems
    try:
        w_a, w_b = warmstart
    except (TypeError, ValueError):
        raise ValueError(f"warmstart must be a pair ({what}); got {type(warmstart).__name__}") from None
    out = []
    for w, dim, name in ((w_a, dim_a, "warmstart[0]"), (w_b, dim_b, "warmstart[1]")):
        w = _checks.as_real_array(w, name).astype(np.float64)
        if P.n_hists and w.shape == (dim, P.n_hists):
            out.append(np.ascontiguousarray(w.T))
        elif w.shape == (dim,):
            out.append(np.ascontiguousarray(np.broadcast_to(w, (K, dim))))
        else:
            expect = f"({dim},)" + (f" or ({dim}, {P.n_hists})" if P.n_hists else "")
            raise ValueError(f"{name} must have shape {expect}; got {w.shape}")
        if np.any(np.isnan(out[-1])) or np.any(out[-1] == np.inf):
            raise ValueError(f"{name} contains NaN or +inf")
    return out[0], out[1]


def _cast(x, dtype):
    return np.asarray(x, dtype=dtype)


def _err_scalar(x, dtype):
    return dtype.type(x)


# --------------------------------------------------------------------------
# Sinkhorn-Knopp
# --------------------------------------------------------------------------
def _knopp_core(P, reg, numItermax, stopThr, verbose, log, warn, warmstart):
    if P.device == "cuda":
        return _knopp_core_cuda(P, reg, numItermax, stopThr, verbose, log, warn, warmstart)
    dim_a, dim_b = P.shape
    K = P.n_problems
    n_chunks, chunk_rows = chunk_layout(dim_a, K, dim_b)
    Kmat = np.empty(P.shape, dtype=P.dtype)
    _k.gibbs_kernel(P.M, -1.0 / reg, np.zeros(dim_a), np.zeros(dim_b), Kmat)
    if warmstart is None:
        u = np.full((K, dim_a), 1.0 / dim_a)
        v = np.full((K, dim_b), 1.0 / dim_b)
    else:
        w_a, w_b = _warmstart_pair(warmstart, P, "log u, log v")
        u, v = np.exp(w_a), np.exp(w_b)
    # Many problems: problem-minor layout (dim, n_hists), vectorised over problems.
    pm = K >= BATCH_MINOR_MIN
    if pm:
        u, v = np.ascontiguousarray(u.T), np.ascontiguousarray(v.T)
        a_w, b_w = np.ascontiguousarray(P.a.T), np.ascontiguousarray(P.b.T)
        Q = np.empty((n_chunks, dim_b, K))
        q = np.empty((dim_b, K))
        _k.knopp_col_sums_pm(Kmat, u, n_chunks, chunk_rows, Q, q)
    else:
        a_w, b_w = P.a, P.b
        Q = np.empty((n_chunks, K, dim_b))
        q = np.empty((K, dim_b))
        _k.knopp_col_sums(Kmat, u, n_chunks, chunk_rows, Q, q)
    steps = _k.knopp_steps_pm if pm else _k.knopp_steps

    def run(n):
        return steps(Kmat, a_w, b_w, u, v, q, n_chunks, chunk_rows, Q, n)

    errs, ii = _knopp_loop(run, lambda: np.linalg.norm(v * q - b_w), P.dtype,
                           numItermax, stopThr, verbose, log, warn)
    if pm:
        u, v = np.ascontiguousarray(u.T), np.ascontiguousarray(v.T)
    return dict(Kmat=Kmat, u=u, v=v, errs=errs, niter=ii, n_chunks=n_chunks, chunk_rows=chunk_rows)


def _knopp_loop(run, error, dtype, numItermax, stopThr, verbose, log, warn):
    """POT's Sinkhorn-Knopp control flow, for both devices: ``run(n)`` makes
    up to n iterations and returns (done, failed); ``error()`` is the 2-norm
    of the column-marginal violation (all problems together).  Returns the
    error list and the last iteration index."""
    errs = []
    ii = 0
    completed = True
    for start, stop in _blocks(numItermax, 10):
        done, failed = run(stop - start)
        if failed:
            ii = start + done
            warnings.warn("Warning: numerical errors at iteration %d" % ii)
            completed = False
            break
        ii = stop - 1
        if ii % 10 == 0:
            err = _err_scalar(error(), dtype)
            if log:
                errs.append(err)
            if err < stopThr:
                completed = False
                break
            if verbose:
                _print_header_and_row(ii, err, 200)
    if completed and warn:
        warnings.warn(_NOT_CONVERGED)
    return errs, ii


def _knopp_outputs(P, st, log, want_loss):
    if P.device == "cuda":
        return _knopp_outputs_cuda(P, st, log, want_loss)
    dt = P.dtype
    u, v = st["u"], st["v"]
    if want_loss or P.n_hists:
        loss = np.empty(P.n_problems)
        _k.scaled_loss(st["Kmat"], P.M, u, v, st["n_chunks"], st["chunk_rows"], loss)
        res = _cast(loss if P.n_hists else loss[0], dt)
    else:
        res = np.empty(P.shape, dtype=dt)
        _k.scaled_plan(st["Kmat"], u[0], v[0], res)
    if not log:
        return res
    lg = {"err": st["errs"], "niter": st["niter"]}
    if P.n_hists:
        lg["u"], lg["v"] = _cast(u.T, dt), _cast(v.T, dt)
    else:
        lg["u"], lg["v"] = _cast(u[0], dt), _cast(v[0], dt)
    return res, lg


def sinkhorn_knopp(a, b, M, reg, numItermax=1000, stopThr=1e-9, verbose=False,
                   log=False, warn=True, warmstart=None, **kwargs):
    r"""Entropic OT by Sinkhorn-Knopp matrix scaling; mirrors ``ot.bregman.sinkhorn_knopp``.

    Solves min_gamma <gamma, M>_F + reg * sum_ij gamma_ij log gamma_ij under
    gamma 1 = a, gamma^T 1 = b, gamma >= 0 (Cuturi 2013, "Sinkhorn Distances:
    Lightspeed Computation of Optimal Transport", Algorithm 1), by the updates
    v <- b / (K^T u), u <- a / (K v), K = exp(-M / reg).  numbaot reads K once
    per iteration (the row pass that forms K v also accumulates K^T u).

    Parameters
    ----------
    a : array-like, shape (dim_a,) or (dim_a, n_hists), float
        Source weights (non-negative, mass per source point).  Empty (``[]``)
        means uniform.  2-D (numbaot extension): one source histogram per
        problem, with ``b`` 2-D of the same n_hists ("paired batch").
    b : array-like, shape (dim_b,) or (dim_b, n_hists), float
        Target weights.  Empty means uniform.  2-D: n_hists problems sharing
        ``M``; the losses are returned instead of the plans.
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the loss.
    reg : float
        Entropic regularisation strength (> 0), in units of ``M``.
    numItermax : int, default 1000
        Maximum number of iterations (>= 0).
    stopThr : float, default 1e-9
        Stop when the 2-norm of the column-marginal violation, checked every
        10 iterations, falls below this.
    verbose : bool, default False
        Print the error table at each check.
    log : bool, default False
        Also return a dict with keys ``'err'`` (list of errors at checks),
        ``'niter'`` (last iteration index), ``'u'``, ``'v'`` (scalings, shape
        (dim,) or (dim, n_hists)).
    warn : bool, default True
        Warn (``UserWarning``) if ``numItermax`` is reached without convergence.
    warmstart : tuple of arrays, optional
        Initial log-scalings (log u, log v), shapes (dim_a,), (dim_b,) (or
        (dim, n_hists)).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), dtype of the inputs
        Optimal plan (mass moved from source i to target j); or, for 2-D
        ``b``, the losses <gamma_k, M>_F, shape (n_hists,).
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError
        Non-numeric, boolean or complex arrays; non-numeric ``reg``,
        ``stopThr``; non-integer ``numItermax``; host and device arrays mixed;
        a device ``M`` that is not float32/float64.
    ValueError
        ``reg`` <= 0 or not finite; ``M`` not 2-D or not finite; weights of the
        wrong length, negative, not finite or of zero mass; 2-D ``a`` without a
        matching 2-D ``b``; negative ``numItermax``; malformed ``warmstart``.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``), and "Warning: numerical
        errors at iteration %d" when K^T u has a zero or u, v overflow (the
        previous iterate is then returned), exactly as POT.
    """
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _check_common(reg, numItermax, stopThr)
    st = _knopp_core(P, reg, numItermax, stopThr, verbose, log, warn, warmstart)
    return _knopp_outputs(P, st, log, want_loss=False)


# --------------------------------------------------------------------------
# Log domain
# --------------------------------------------------------------------------
def _log_warmstart(warmstart, P):
    """POT's conventions: (log_u, log_v) for one problem; for 2-D b a sequence
    of per-histogram pairs.  numbaot also takes one pair of (dim, n_hists)
    arrays."""
    if P.n_hists == 0:
        return _warmstart_pair(warmstart, P, "log_u, log_v")
    try:
        items = list(warmstart)
    except TypeError:
        raise ValueError("warmstart must be a sequence") from None
    per_hist = len(items) == P.n_hists and all(
        isinstance(w, (tuple, list)) and len(w) == 2 and np.ndim(w[0]) == 1 for w in items
    )
    if per_hist:
        w_a = np.stack([np.asarray(w[0], dtype=np.float64) for w in items])
        w_b = np.stack([np.asarray(w[1], dtype=np.float64) for w in items])
        return _warmstart_pair((w_a.T, w_b.T), P, "log_u, log_v")
    return _warmstart_pair(warmstart, P, "log_u, log_v")


def _log_start(P, warmstart):
    """log a, log b (-inf for zero weights) and the initial log-scalings
    (n_problems, dim), float64 host arrays owned by the caller."""
    K = P.n_problems
    with np.errstate(divide="ignore"):
        loga = np.log(P.a)
        logb = np.log(P.b)
    if warmstart is None:
        return loga, logb, np.zeros((K, P.shape[0])), np.zeros((K, P.shape[1]))
    u, v = _log_warmstart(warmstart, P)
    return loga, logb, u.copy(), v.copy()


def _log_core(P, reg, numItermax, stopThr, warmstart):
    """Batched log-domain Sinkhorn with POT's per-problem stopping rule.

    Returns the state and, per problem, the error list, last iteration and a
    converged flag.
    """
    if P.device == "cuda":
        return _log_core_cuda(P, reg, numItermax, stopThr, warmstart)
    dim_a, dim_b = P.shape
    K = P.n_problems
    n_chunks, chunk_rows = chunk_layout(dim_a, K, dim_b)
    c = -1.0 / reg
    loga, logb, u, v = _log_start(P, warmstart)
    vnext = np.empty((K, dim_b))
    _k.log_col_lse(P.M, c, u, n_chunks, chunk_rows, vnext)
    vnext = logb - vnext
    vnext[np.isneginf(logb)] = -np.inf
    q = np.zeros((K, dim_b))
    # Many problems: problem-minor layout (dim, n_hists), vectorised over problems.
    pm = K >= BATCH_MINOR_MIN
    if pm:
        tr = np.ascontiguousarray
        u_w, v_w, vnext_w, q_w = tr(u.T), tr(v.T), tr(vnext.T), tr(q.T)
        loga_w, logb_w, b_w = tr(loga.T), tr(logb.T), tr(P.b.T)
        Q = np.empty((n_chunks, dim_b, K))
    else:
        u_w, v_w, vnext_w, q_w = u, v, vnext, q
        loga_w, logb_w, b_w = loga, logb, P.b
        Q = np.empty((n_chunks, K, dim_b))
    steps = _k.log_steps_pm if pm else _k.log_steps
    shift = [False]

    def run(n, active):
        shift[0] = steps(P.M, c, loga_w, logb_w, b_w, u_w, v_w, vnext_w, shift[0],
                         active, n_chunks, chunk_rows, Q, q_w, n, UNDERFLOW_RTOL)

    def errors():
        q = q_w.T if pm else q_w
        return np.linalg.norm(q - P.b, axis=1)

    res = _log_loop(run, errors, K, P.dtype, numItermax, stopThr)
    if pm:
        u, v = np.ascontiguousarray(u_w.T), np.ascontiguousarray(v_w.T)
    return dict(res, u=u, v=v, c=c, n_chunks=n_chunks, chunk_rows=chunk_rows)


def _log_loop(run, errors, K, dtype, numItermax, stopThr):
    """POT's log-domain control flow with a stopping test per problem, for
    both devices: ``run(n, active)`` makes n iterations of the active
    problems; ``errors()`` gives each problem's column-marginal violation
    (2-norm).  Returns the per-problem error lists, check iterations, last
    iterations and converged flags."""
    active = np.ones(K, dtype=np.bool_)
    errs = [[] for _ in range(K)]
    checks = [[] for _ in range(K)]
    niter = [0] * K
    converged = [False] * K
    for start, stop in _blocks(numItermax, 10):
        run(stop - start, active)
        ii = stop - 1
        for k in np.flatnonzero(active):
            niter[k] = ii
        if ii % 10 == 0:
            e = errors()
            for k in np.flatnonzero(active):
                err = _err_scalar(e[k], dtype)
                errs[k].append(err)
                checks[k].append(ii)
                if err < stopThr:
                    converged[k] = True
                    active[k] = False
            if not active.any():
                break
    return dict(errs=errs, checks=checks, niter=niter, converged=converged)


def _log_report(P, st, verbose, warn):
    """Verbose tables and warnings in POT's order (one problem after another)."""
    for k in range(P.n_problems):
        if verbose:
            for ii, err in zip(st["checks"][k], st["errs"][k]):
                _print_header_and_row(ii, err, 200)
        if warn and not st["converged"][k]:
            warnings.warn(_NOT_CONVERGED)


def _log_warn(P, warn):
    # POT's sinkhorn_log loops over the columns of a 2-D b without passing
    # `warn` on, so those calls always warn; numbaot's paired batches (no POT
    # counterpart) respect `warn`.
    return warn or (P.n_hists > 0 and not P.paired)


def _gibbs_result(P, st, f, g, want_loss):
    """The plan exp(c M + f + g^T) of the single problem, or the losses
    <plan_k, M> of every problem (without forming the plans)."""
    if want_loss or P.n_hists:
        loss = np.empty(P.n_problems)
        _k.gibbs_loss(P.M, st["c"], f, g, st["n_chunks"], st["chunk_rows"], loss)
        return _cast(loss if P.n_hists else loss[0], P.dtype)
    res = np.empty(P.shape, dtype=P.dtype)
    _k.gibbs_kernel(P.M, st["c"], f[0], g[0], res)
    return res


def _log_outputs(P, st, log, want_loss):
    if P.device == "cuda":
        return _log_outputs_cuda(P, st, log, want_loss)
    dt = P.dtype
    u, v = st["u"], st["v"]
    res = _gibbs_result(P, st, u, v, want_loss)
    if not log:
        return res
    if P.n_hists:
        lg = {"log_u": _cast(u.T, dt), "log_v": _cast(v.T, dt)}
    else:
        lg = {"err": st["errs"][0], "niter": st["niter"][0],
              "log_u": _cast(u[0], dt), "log_v": _cast(v[0], dt)}
    lg["u"] = np.exp(lg["log_u"])
    lg["v"] = np.exp(lg["log_v"])
    return res, lg


def sinkhorn_log(a, b, M, reg, numItermax=1000, stopThr=1e-9, verbose=False,
                 log=False, warn=True, warmstart=None, **kwargs):
    r"""Entropic OT by log-domain Sinkhorn; mirrors ``ot.bregman.sinkhorn_log``.

    Same problem as :func:`sinkhorn_knopp`, iterated on the log-scalings
    (dual potentials divided by reg) so that any ``reg`` > 0 stays finite
    (Peyre & Cuturi 2019, "Computational Optimal Transport", Remark 4.23):
    v <- log b - logsumexp_i(-M_ij/reg + u_i), u <- log a - logsumexp_j(-M_ij/reg + v_j).
    numbaot's kernel reads ``M`` once per iteration and computes one
    exponential per entry: the row logsumexp is shifted by a certified upper
    bound from the previous iterate, with Viehmann's single-pass online
    logsumexp (arXiv:1907.01729, sec. 4) where that bound is not available;
    the row exponentials are reused for the column update.  It allocates no
    (dim_a, dim_b) temporary; 2-D ``b`` (and paired 2-D ``a``) are solved in
    one sweep over ``M`` per iteration for all problems.

    Parameters
    ----------
    a, b, M, reg, numItermax, stopThr, verbose, warn
        As in :func:`sinkhorn_knopp`.  For 2-D ``b`` each problem has its own
        stopping test (as POT, which loops over the columns of ``b``).
    log : bool, default False
        Also return a dict with keys ``'err'``, ``'niter'``, ``'log_u'``,
        ``'log_v'``, ``'u'``, ``'v'``; for 2-D ``b`` only ``'log_u'``,
        ``'log_v'``, ``'u'``, ``'v'``, of shape (dim, n_hists).
    warmstart : tuple, optional
        Initial log-scalings (log_u, log_v) of shapes (dim_a,), (dim_b,).  For
        2-D ``b``: POT's list of n_hists such pairs, or one pair of arrays of
        shapes (dim_a, n_hists), (dim_b, n_hists).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), dtype of the inputs
        Optimal plan, or for 2-D ``b`` the losses <gamma_k, M>_F, shape (n_hists,).
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp`.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." per unconverged problem.  As POT, for
        2-D ``b`` with 1-D ``a`` this warning is issued even with
        ``warn=False`` (POT's loop over the columns of ``b`` does not pass
        ``warn`` on); paired batches respect ``warn``.
    """
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _check_common(reg, numItermax, stopThr)
    st = _log_core(P, reg, numItermax, stopThr, warmstart)
    _log_report(P, st, verbose, _log_warn(P, warn))
    return _log_outputs(P, st, log, want_loss=False)


# --------------------------------------------------------------------------
# Stabilized (absorption) and epsilon scaling
# --------------------------------------------------------------------------
def _stabilized_core(P, reg, numItermax, tau, stopThr, warmstart, verbose,
                     print_period, log, warn):
    dim_a, dim_b = P.shape
    K = P.n_problems
    n_hists = P.n_hists
    n_chunks, chunk_rows = chunk_layout(dim_a, K, dim_b)
    c = -1.0 / reg
    if warmstart is None:
        alpha, beta = np.zeros(dim_a), np.zeros(dim_b)
    else:
        try:
            alpha, beta = warmstart
        except (TypeError, ValueError):
            raise ValueError("warmstart must be a pair (alpha, beta) of dual potentials") from None
        alpha = _checks.as_real_array(alpha, "warmstart[0]").astype(np.float64).reshape(-1)
        beta = _checks.as_real_array(beta, "warmstart[1]").astype(np.float64).reshape(-1)
        if alpha.shape != (dim_a,) or beta.shape != (dim_b,):
            raise ValueError(
                f"warmstart (alpha, beta) must have shapes ({dim_a},), ({dim_b},); "
                f"got {alpha.shape}, {beta.shape}"
            )
    u = np.full((K, dim_a), 1.0 / dim_a)
    v = np.full((K, dim_b), 1.0 / dim_b)
    Kmat = np.empty(P.shape, dtype=P.dtype)
    Q = np.empty((n_chunks, K, dim_b))
    q = np.empty((K, dim_b))

    def absorb_kernel():
        _k.gibbs_kernel(P.M, c, alpha / reg, beta / reg, Kmat)
        _k.knopp_col_sums(Kmat, u, n_chunks, chunk_rows, Q, q)

    absorb_kernel()
    errs = []
    err = 1
    ii = 0
    completed = True
    for ii in range(numItermax):
        uprev, vprev = u.copy(), v.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            v = P.b / q
        u = np.empty_like(u)
        _k.knopp_fused_pass(Kmat, P.a, v, n_chunks, chunk_rows, Q, u, q)
        if np.max(np.abs(u)) > tau or np.max(np.abs(v)) > tau:
            with np.errstate(divide="ignore", invalid="ignore"):
                if n_hists:
                    alpha = alpha + reg * np.max(np.log(u), 0)
                    beta = beta + reg * np.max(np.log(v))
                else:
                    alpha = alpha + reg * np.log(u[0])
                    beta = beta + reg * np.log(v[0])
                    u = np.full((K, dim_a), 1.0 / dim_a)
                    v = np.full((K, dim_b), 1.0 / dim_b)
            absorb_kernel()
        if ii % print_period == 0:
            if n_hists:
                err_u = np.max(np.abs(u - uprev))
                err_u /= max(np.max(np.abs(u)), np.max(np.abs(uprev)), 1.0)
                err_v = np.max(np.abs(v - vprev))
                err_v /= max(np.max(np.abs(v)), np.max(np.abs(vprev)), 1.0)
                err = 0.5 * (err_u + err_v)
            else:
                err = np.linalg.norm(v[0] * q[0] - P.b[0])
            err = _err_scalar(err, P.dtype)
            if log:
                errs.append(err)
            if verbose:
                _print_header_and_row(ii, err, print_period * 20)
        if err <= stopThr:
            completed = False
            break
        if np.any(np.isnan(u)) or np.any(np.isnan(v)):
            warnings.warn("Numerical errors at iteration %d" % ii)
            u, v = uprev, vprev
            completed = False
            break
    if completed and warn:
        warnings.warn(_NOT_CONVERGED)
    with np.errstate(divide="ignore"):
        logu = alpha[None, :] / reg + np.log(u)
        logv = beta[None, :] / reg + np.log(v)
    return dict(alpha=alpha, beta=beta, logu=logu, logv=logv, errs=errs, niter=ii,
                c=c, n_chunks=n_chunks, chunk_rows=chunk_rows)


def _stabilized_outputs(P, st, reg, log, want_loss):
    dt = P.dtype
    logu, logv = st["logu"], st["logv"]
    res = _gibbs_result(P, st, logu, logv, want_loss)
    if not log:
        return res
    if P.n_hists:
        lu, lv = logu.T, logv.T
    else:
        lu, lv = logu[0], logv[0]
    lg = {"err": st["errs"], "n_iter": st["niter"], "logu": _cast(lu, dt), "logv": _cast(lv, dt)}
    lg["alpha"] = _cast(reg * lu, dt)
    lg["beta"] = _cast(reg * lv, dt)
    lg["warmstart"] = (lg["alpha"], lg["beta"])
    return res, lg


def _stabilized(P, reg, numItermax, tau, stopThr, warmstart, verbose, print_period,
                log, warn, want_loss):
    """POT's algorithm for one problem or a 2-D ``b``.  Paired batches (no POT
    counterpart) run POT's single-problem algorithm once per problem: the
    absorption rewrites K per problem, so the representation of the
    potentials (logu, alpha, ...) then equals POT's per-problem result;
    ``log['err']`` and ``log['n_iter']`` become per-problem lists."""
    if P.device == "cuda":
        res = _stabilized(_on_host(P), reg, numItermax, tau, stopThr, warmstart, verbose,
                          print_period, log, warn, want_loss)
        return _outputs_to_device(res, P)
    if not P.paired:
        st = _stabilized_core(P, reg, numItermax, tau, stopThr, warmstart, verbose,
                              print_period, log, warn)
        return _stabilized_outputs(P, st, reg, log, want_loss)
    outs = []
    for k in range(P.n_hists):
        Pk = _checks.Problem(M=P.M, a=P.a[k:k + 1], b=P.b[k:k + 1], dtype=P.dtype,
                             n_hists=0, paired=False)
        st = _stabilized_core(Pk, reg, numItermax, tau, stopThr, warmstart, verbose,
                              print_period, log, warn)
        outs.append(_stabilized_outputs(Pk, st, reg, True, want_loss=True))
    res = np.stack([o[0] for o in outs])
    if not log:
        return res
    lg = {"err": [o[1]["err"] for o in outs], "n_iter": [o[1]["n_iter"] for o in outs]}
    for key in ("logu", "logv", "alpha", "beta"):
        lg[key] = np.stack([o[1][key] for o in outs], axis=1)
    lg["warmstart"] = (lg["alpha"], lg["beta"])
    return res, lg


def sinkhorn_stabilized(a, b, M, reg, numItermax=1000, tau=1e3, stopThr=1e-9,
                        warmstart=None, verbose=False, print_period=20, log=False,
                        warn=True, **kwargs):
    r"""Stabilized Sinkhorn with absorption; mirrors ``ot.bregman.sinkhorn_stabilized``.

    Same problem as :func:`sinkhorn_knopp`.  The scalings u, v are absorbed
    into dual potentials (alpha, beta) whenever one of them exceeds ``tau``,
    and K = exp(-(M - alpha - beta^T) / reg) is rebuilt (Schmitzer 2019,
    "Stabilized Sparse Scaling Algorithms for Entropy Regularized Transport
    Problems", Algorithm 2), step for step as POT 0.9.7.

    Parameters
    ----------
    a, b, M, reg, numItermax, stopThr, verbose, log, warn
        As in :func:`sinkhorn_knopp`.
    tau : float, default 1e3
        Absorption threshold on max |u|, max |v|.
    warmstart : tuple of arrays, optional
        Initial dual potentials (alpha, beta), shapes (dim_a,), (dim_b,), in
        units of ``M``.
    print_period : int, default 20
        The error is computed (and printed) every ``print_period`` iterations:
        the 2-norm of the column-marginal violation, or for 2-D ``b`` the mean
        relative change of u and v (POT's rule).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), or losses of shape (n_hists,) for 2-D ``b``.
    log : dict, only if ``log=True``
        Keys ``'err'``, ``'n_iter'``, ``'logu'``, ``'logv'`` (total
        log-scalings), ``'alpha'``, ``'beta'`` (dual potentials
        reg * log-scalings, units of ``M``) and ``'warmstart'`` = (alpha, beta).
        For paired batches (2-D ``a``) each problem runs POT's single-problem
        algorithm; ``'err'`` and ``'n_iter'`` are then per-problem lists.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp`, plus a malformed ``warmstart``.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``) and "Numerical errors at
        iteration %d" (a NaN in u or v; the previous iterate is returned).
    """
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _check_common(reg, numItermax, stopThr)
    tau = _checks.check_real_scalar(tau, "tau")
    print_period = _checks.check_iter_count(print_period, "print_period")
    if print_period == 0:
        raise ValueError("print_period must be >= 1")
    return _stabilized(P, reg, numItermax, tau, stopThr, warmstart, verbose, print_period,
                       log, warn, want_loss=False)


def sinkhorn_epsilon_scaling(a, b, M, reg, numItermax=100, epsilon0=1e4,
                             numInnerItermax=100, tau=1e3, stopThr=1e-9,
                             warmstart=None, verbose=False, print_period=10,
                             log=False, warn=True, **kwargs):
    r"""Sinkhorn with epsilon scaling; mirrors ``ot.bregman.sinkhorn_epsilon_scaling``.

    Solves a sequence of stabilized problems with regularisation
    reg_i = (epsilon0 - reg) exp(-i) + reg, each warm-started from the
    previous potentials (Schmitzer 2019, Algorithm 3.2), as POT 0.9.7.

    Parameters
    ----------
    a : array-like, shape (dim_a,)
        Source weights (empty = uniform).
    b : array-like, shape (dim_b,)
        Target weights (empty = uniform).  2-D ``b`` is refused: POT returns
        meaningless values for it.
    M, reg, stopThr, verbose, warn
        As in :func:`sinkhorn_knopp`.
    numItermax : int, default 100
        Number of outer (epsilon) steps; at least 35 are made, as POT.
    epsilon0 : float, default 1e4
        Initial regularisation.
    numInnerItermax : int, default 100
        Iterations of each inner :func:`sinkhorn_stabilized` call.
    tau : float, default 1e3
        Absorption threshold of the inner calls.
    warmstart : tuple of arrays, optional
        Initial dual potentials (alpha, beta).
    print_period : int, default 10
        Error (squared marginal violations of both sides) computed every
        ``print_period`` outer steps.
    log : bool
        Also return a dict with keys ``'err'``, ``'alpha'``, ``'beta'``,
        ``'warmstart'``, ``'niter'``.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), dtype of the inputs
    log : dict, only if ``log=True``

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_stabilized`; 2-D ``a`` or ``b``.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." from the outer loop (if ``warn``) and,
        as in POT, from every inner stabilized call that hits
        ``numInnerItermax`` (POT does not pass ``warn`` to them).
    """
    if device_of(a=a, b=b, M=M) == "cuda":
        return _via_host(sinkhorn_epsilon_scaling, a, b, M, reg, numItermax, epsilon0,
                         numInnerItermax, tau, stopThr, warmstart, verbose, print_period,
                         log, warn, **kwargs)
    P = prepare_problem(a, b, M, allow_batch=False, method_name="sinkhorn_epsilon_scaling")
    reg, numItermax, stopThr = _check_common(reg, numItermax, stopThr)
    epsilon0 = _checks.check_reg(epsilon0, "epsilon0")
    numInnerItermax = _checks.check_iter_count(numInnerItermax, "numInnerItermax")
    print_period = _checks.check_iter_count(print_period, "print_period")
    if print_period == 0:
        raise ValueError("print_period must be >= 1")
    a1 = P.a[0].astype(P.dtype)
    b1 = P.b[0].astype(P.dtype)
    dim_a, dim_b = P.shape
    numItermin = 35
    numItermax = max(numItermin, numItermax)
    if warmstart is None:
        alpha, beta = np.zeros(dim_a, dtype=P.dtype), np.zeros(dim_b, dtype=P.dtype)
    else:
        alpha, beta = warmstart
    errs = []
    err = 1
    completed = True
    ii = 0
    G = None
    for ii in range(numItermax):
        regi = (epsilon0 - reg) * np.exp(-ii) + reg
        # POT's inner call: print_period=20, log=True, warn left at True.
        # The problem is validated once, not at every epsilon step.
        G, logi = _stabilized(P, regi, numInnerItermax, tau, stopThr, (alpha, beta),
                              False, 20, True, True, want_loss=False)
        alpha = logi["alpha"]
        beta = logi["beta"]
        if ii % print_period == 0:
            err = np.linalg.norm(np.sum(G, axis=0) - b1) ** 2 + np.linalg.norm(np.sum(G, axis=1) - a1) ** 2
            if log:
                errs.append(err)
            if verbose:
                _print_header_and_row(ii, err, print_period * 10)
        if err <= stopThr and ii > numItermin:
            completed = False
            break
    if completed and warn:
        warnings.warn(_NOT_CONVERGED)
    if log:
        lg = {"err": errs, "alpha": alpha, "beta": beta, "warmstart": (alpha, beta), "niter": ii}
        return G, lg
    return G


# --------------------------------------------------------------------------
# Greenkhorn
# --------------------------------------------------------------------------
def greenkhorn(a, b, M, reg, numItermax=10000, stopThr=1e-9, verbose=False,
               log=False, warn=True, warmstart=None):
    r"""Greedy coordinate Sinkhorn; mirrors ``ot.bregman.greenkhorn``.

    Same problem as :func:`sinkhorn_knopp`, solved by updating at each step
    only the row or column with the largest marginal violation (Altschuler,
    Weed & Rigollet 2017, "Near-linear time approximation algorithms for
    optimal transport via Sinkhorn iteration", Algorithm 2), step for step as
    POT 0.9.7, compiled (one step costs O(dim_a + dim_b)).

    Parameters
    ----------
    a : array-like, shape (dim_a,)
        Source weights (empty = uniform).
    b : array-like, shape (dim_b,)
        Target weights (empty = uniform).
    M, reg, stopThr, warn
        As in :func:`sinkhorn_knopp`; stops when the largest absolute
        marginal violation is <= ``stopThr``.
    numItermax : int, default 10000
        Maximum number of coordinate updates.
    verbose : bool
        Accepted for compatibility; POT prints nothing either.
    log : bool
        Also return a dict with keys ``'u'``, ``'v'``, ``'n_iter'``.
    warmstart : tuple of arrays, optional
        Initial log-scalings (log u, log v).

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), dtype of the inputs
    log : dict, only if ``log=True``

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp`; 2-D ``a`` or ``b``.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``).
    """
    if device_of(a=a, b=b, M=M) == "cuda":
        return _via_host(greenkhorn, a, b, M, reg, numItermax, stopThr, verbose, log, warn,
                         warmstart)
    P = prepare_problem(a, b, M, allow_batch=False, method_name="greenkhorn")
    reg, numItermax, stopThr = _check_common(reg, numItermax, stopThr)
    dt = P.dtype
    dim_a, dim_b = P.shape
    Kmat = np.empty(P.shape, dtype=dt)
    _k.gibbs_kernel(P.M, -1.0 / reg, np.zeros(dim_a), np.zeros(dim_b), Kmat)
    if warmstart is None:
        u = np.full(dim_a, 1.0 / dim_a, dtype=dt)
        v = np.full(dim_b, 1.0 / dim_b, dtype=dt)
    else:
        w_a, w_b = _warmstart_pair(warmstart, P, "log u, log v")
        u, v = np.exp(w_a[0]).astype(dt), np.exp(w_b[0]).astype(dt)
    G = np.empty(P.shape, dtype=dt)
    ii, converged = _k.greenkhorn_loop(
        Kmat, P.a[0].astype(dt), P.b[0].astype(dt), u, v, G, numItermax, stopThr
    )
    if not converged and warn:
        warnings.warn(_NOT_CONVERGED)
    if log:
        return G, {"u": u, "v": v, "n_iter": ii}
    return G


# --------------------------------------------------------------------------
# CUDA paths (numbaot.cuda.sinkhorn kernels; POT semantics from the shared
# control loops above).  Vectors are O(dim): they are moved with plain host
# copies; the matrix never leaves the device.
# --------------------------------------------------------------------------
def _dev(x, dtype):
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))


def _dev_out(x, P):
    """A host result as a device array of the caller's kind (scalars stay
    host scalars)."""
    if isinstance(x, np.ndarray) and x.ndim > 0:
        from ._dispatch import like_input

        return like_input(_dev(x, x.dtype), P.like)
    return x


def _knopp_core_cuda(P, reg, numItermax, stopThr, verbose, log, warn, warmstart):
    from numba import cuda

    from .cuda import sinkhorn as cu

    dt = P.dtype
    dim_a, dim_b = P.shape
    K = P.n_problems
    Kmat = cuda.device_array(P.shape, dtype=dt)
    cu.gibbs_kernel(P.M, -1.0 / reg, _dev(np.zeros(dim_a), dt), _dev(np.zeros(dim_b), dt), Kmat)
    if warmstart is None:
        u = np.full((K, dim_a), 1.0 / dim_a)
        v = np.full((K, dim_b), 1.0 / dim_b)
    else:
        w_a, w_b = _warmstart_pair(warmstart, P, "log u, log v")
        u, v = np.exp(w_a), np.exp(w_b)
    st = cu.KnoppState(Kmat, _dev(P.a, dt), _dev(P.b, dt), _dev(u, dt), _dev(v, dt))
    last = {}

    def run(n):
        done, failed, last["err2"] = cu.knopp_steps(st, n)
        return done, failed

    errs, ii = _knopp_loop(run, lambda: np.sqrt(np.sum(last["err2"], dtype=np.float64)),
                           dt, numItermax, stopThr, verbose, log, warn)
    return dict(Kmat=Kmat, u=st.u, v=st.v, errs=errs, niter=ii)


def _knopp_outputs_cuda(P, st, log, want_loss):
    from numba import cuda

    from .cuda import sinkhorn as cu

    dt = P.dtype
    u, v = st["u"], st["v"]
    if want_loss or P.n_hists:
        loss = cuda.device_array(P.n_problems, dtype=dt)
        cu.scaled_loss(st["Kmat"], P.M, u, v, loss)
        res = _dev_out(loss.copy_to_host(), P) if P.n_hists else dt.type(loss.copy_to_host()[0])
    else:
        res = cuda.device_array(P.shape, dtype=dt)
        cu.scaled_plan(st["Kmat"], u[0], v[0], res)
        from ._dispatch import like_input

        res = like_input(res, P.like)
    if not log:
        return res
    uh, vh = u.copy_to_host(), v.copy_to_host()
    lg = {"err": st["errs"], "niter": st["niter"]}
    lg["u"], lg["v"] = (uh.T, vh.T) if P.n_hists else (uh[0], vh[0])
    lg["u"], lg["v"] = _dev_out(lg["u"], P), _dev_out(lg["v"], P)
    return res, lg


def _log_core_cuda(P, reg, numItermax, stopThr, warmstart):
    from .cuda import sinkhorn as cu

    dt = P.dtype
    K = P.n_problems
    c = -1.0 / reg
    loga, logb, u, v = _log_start(P, warmstart)
    st = cu.LogState(P.M, c, _dev(loga, dt), _dev(logb, dt), _dev(P.b, dt), _dev(u, dt), _dev(v, dt))
    last = {}

    def run(n, active):
        if not np.array_equal(st.active_host, active):
            st.set_active(active)
        last["err2"] = cu.log_steps(st, n)

    res = _log_loop(run, lambda: np.sqrt(last["err2"].astype(np.float64)), K, dt,
                    numItermax, stopThr)
    return dict(res, u=st.u, v=st.v, c=c)


def _log_outputs_cuda(P, st, log, want_loss):
    from numba import cuda

    from ._dispatch import like_input
    from .cuda import sinkhorn as cu

    dt = P.dtype
    u, v = st["u"], st["v"]
    if want_loss or P.n_hists:
        loss = cuda.device_array(P.n_problems, dtype=dt)
        cu.gibbs_loss(P.M, st["c"], u, v, loss)
        res = _dev_out(loss.copy_to_host(), P) if P.n_hists else dt.type(loss.copy_to_host()[0])
    else:
        res = cuda.device_array(P.shape, dtype=dt)
        cu.gibbs_kernel(P.M, st["c"], u[0], v[0], res)
        res = like_input(res, P.like)
    if not log:
        return res
    uh, vh = u.copy_to_host(), v.copy_to_host()
    if P.n_hists:
        lu, lv = uh.T, vh.T
        lg = {}
    else:
        lu, lv = uh[0], vh[0]
        lg = {"err": st["errs"][0], "niter": st["niter"][0]}
    lg["log_u"], lg["log_v"] = _dev_out(lu, P), _dev_out(lv, P)
    lg["u"], lg["v"] = _dev_out(np.exp(lu), P), _dev_out(np.exp(lv), P)
    return res, lg


def _on_host(P):
    """The problem with M copied to the host, for the solvers without CUDA
    kernels (documented copy)."""
    from dataclasses import replace

    return replace(P, M=P.M.copy_to_host(), device="cpu")


def _via_host(fn, a, b, M, *args, **kwargs):
    """Run the host solver ``fn`` on host copies of device inputs and return
    its outputs as device arrays (for the solvers without CUDA kernels)."""
    from types import SimpleNamespace

    from ._dispatch import as_device_array, is_device_array

    def host(x):
        return as_device_array(x).copy_to_host() if is_device_array(x) else x

    out = fn(host(a), host(b), host(M), *args, **kwargs)
    return _outputs_to_device(out, SimpleNamespace(like=M))


def _outputs_to_device(out, P):
    """Host outputs of a solver run on ``_on_host(P)``, back as device arrays."""
    if isinstance(out, tuple):
        return tuple(_outputs_to_device(x, P) for x in out)
    if isinstance(out, list):
        return [_outputs_to_device(x, P) for x in out]
    if isinstance(out, dict):
        return {k: _outputs_to_device(x, P) for k, x in out.items()}
    return _dev_out(out, P)


# --------------------------------------------------------------------------
# dispatchers
# --------------------------------------------------------------------------
def sinkhorn(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
             verbose=False, log=False, warn=True, warmstart=None, **kwargs):
    r"""Entropic OT plan; mirrors ``ot.sinkhorn`` / ``ot.bregman.sinkhorn``.

    Solves min_gamma <gamma, M>_F + reg * sum gamma log gamma subject to
    gamma 1 = a, gamma^T 1 = b, gamma >= 0 (Cuturi 2013) with the solver named
    by ``method``.

    Parameters
    ----------
    a : array-like, shape (dim_a,) or (dim_a, n_hists)
        Source weights (empty = uniform; 2-D = paired batch with 2-D ``b``).
    b : array-like, shape (dim_b,) or (dim_b, n_hists)
        Target weights (empty = uniform; 2-D: the losses are returned).
    M : array-like, shape (dim_a, dim_b)
        Cost matrix.
    reg : float
        Regularisation (> 0).
    method : str, default 'sinkhorn'
        'sinkhorn' (:func:`sinkhorn_knopp`), 'sinkhorn_log'
        (:func:`sinkhorn_log`), 'greenkhorn' (:func:`greenkhorn`),
        'sinkhorn_stabilized' (:func:`sinkhorn_stabilized`) or
        'sinkhorn_epsilon_scaling' (:func:`sinkhorn_epsilon_scaling`);
        case-insensitive.
    numItermax, stopThr, verbose, log, warn, warmstart, **kwargs
        Passed to the solver (see each one; ``warmstart`` follows the
        solver's convention).

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), or losses (n_hists,) for 2-D ``b``.
    log : dict, only if ``log=True``

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."`` for any other method, and everything
        the solver raises.
    TypeError
        ``method`` not a string, and everything the solver raises.
    """
    meth = _checks.check_method(method, _SINKHORN_METHODS)
    if meth == "sinkhorn":
        return sinkhorn_knopp(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                              verbose=verbose, log=log, warn=warn, warmstart=warmstart, **kwargs)
    if meth == "sinkhorn_log":
        return sinkhorn_log(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                            verbose=verbose, log=log, warn=warn, warmstart=warmstart, **kwargs)
    if meth == "greenkhorn":
        return greenkhorn(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                          verbose=verbose, log=log, warn=warn, warmstart=warmstart)
    if meth == "sinkhorn_stabilized":
        return sinkhorn_stabilized(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                                   warmstart=warmstart, verbose=verbose, log=log,
                                   warn=warn, **kwargs)
    return sinkhorn_epsilon_scaling(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                                    warmstart=warmstart, verbose=verbose, log=log,
                                    warn=warn, **kwargs)


def sinkhorn2(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
              verbose=False, log=False, warn=False, warmstart=None, **kwargs):
    r"""Entropic OT loss <gamma, M>_F; mirrors ``ot.sinkhorn2`` / ``ot.bregman.sinkhorn2``.

    The plan gamma is the solution of :func:`sinkhorn`; the returned value is
    its transport cost <gamma, M>_F (without the entropic term), as POT.  The
    plan itself is never formed (the cost is reduced on the fly).

    Parameters
    ----------
    a, b, M, reg, numItermax, stopThr, verbose, log, warmstart, **kwargs
        As in :func:`sinkhorn`.
    method : str, default 'sinkhorn'
        'sinkhorn', 'sinkhorn_log' or 'sinkhorn_stabilized' (case-insensitive).
    warn : bool, default False
        Note the default differs from :func:`sinkhorn`, as in POT.

    Returns
    -------
    W : float (numpy scalar of the input dtype), or ndarray (n_hists,) for 2-D ``b``
        Transport cost of the entropic plan, in units of ``M``.
    log : dict, only if ``log=True`` (keys of the chosen solver)

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."`` and everything the solver raises.
    TypeError
        ``method`` not a string, and everything the solver raises.
    """
    meth = _checks.check_method(method, _SINKHORN2_METHODS)
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _check_common(reg, numItermax, stopThr)
    if meth == "sinkhorn":
        st = _knopp_core(P, reg, numItermax, stopThr, verbose, log, warn, warmstart)
        return _knopp_outputs(P, st, log, want_loss=True)
    if meth == "sinkhorn_log":
        st = _log_core(P, reg, numItermax, stopThr, warmstart)
        _log_report(P, st, verbose, _log_warn(P, warn))
        return _log_outputs(P, st, log, want_loss=True)
    tau = _checks.check_real_scalar(kwargs.get("tau", 1e3), "tau")
    print_period = _checks.check_iter_count(kwargs.get("print_period", 20), "print_period")
    return _stabilized(P, reg, numItermax, tau, stopThr, warmstart, verbose, print_period,
                       log, warn, want_loss=True)


# Point clouds (costs on the fly): defined in numbaot.empirical, exported here
# as POT exports them from ot.bregman.  Imported last: numbaot.empirical uses
# the solvers above.
from .empirical import (  # noqa: E402
    empirical_sinkhorn,
    empirical_sinkhorn2,
    empirical_sinkhorn_divergence,
)
from .barycenters import (  # noqa: E402
    barycenter,
    barycenter_sinkhorn,
    barycenter_stabilized,
    convolutional_barycenter2d,
)
