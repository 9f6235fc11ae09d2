"""POT's stabilized (absorption) and epsilon-scaling Sinkhorn, step for step.

NumPy ports of POT 0.9.7's host loops (``ot.bregman.sinkhorn_stabilized``,
``ot.bregman.sinkhorn_epsilon_scaling``) whose passes over the matrix run on
the CPU kernels of ``numbaot.cpu.sinkhorn``.  Device inputs are copied to the
host (documented in ``numbaot.bregman``).
"""
import warnings
from dataclasses import replace

import numpy as np

from .. import _checks, _dispatch, _loops
from .._checks import prepare_problem
from .._dispatch import device_of
from ..cpu import chunk_layout
from ..cpu import sinkhorn as cpu_sinkhorn
from .._config import STABILIZED_SERIAL_MAX_ENTRIES

__all__ = ["sinkhorn_stabilized", "sinkhorn_epsilon_scaling", "stabilized_solve", "check_stabilized_args"]

#: numbaot's own warning (no POT counterpart): every iteration absorbed.
TAU_TOO_SMALL = (
    "Stabilized Sinkhorn absorbed the scalings at every iteration: tau=%g is below "
    "their size, so the iteration resets them to 1/dim each time and cannot converge. "
    "Use a larger `tau` (default 1e3)."
)
#: numbaot's own warning: non-finite entries left in the result.
NONFINITE_RESULT = (
    "Stabilized Sinkhorn returned NaN or inf entries (numerical errors: "
    "|M| / reg too large for the dtype?); use a larger `reg` or sinkhorn_log."
)


def _as_dtype(x, dtype):
    return np.asarray(x, dtype=dtype)


def check_stabilized_args(tau, print_period):
    """``tau`` (a finite number > 0, the rule of the unbalanced stabilized
    solvers) and ``print_period`` (an integer >= 1), validated.

    POT accepts ``tau <= 0``: every iteration then absorbs and resets the
    scalings to 1/dim, which is not a Sinkhorn step, and it returns a wrong
    value without a warning; ``print_period=0`` raises ZeroDivisionError."""
    tau = _checks.check_reg(tau, "tau")
    print_period = _checks.check_positive_int(print_period, "print_period")
    return tau, print_period


def _warm_potentials(warmstart, P):
    """(alpha, beta) as new float64 arrays of shapes (dim_a,), (dim_b,) (zeros
    without a warm start), by the warm-start rule of ``numbaot._checks``
    (finite, -inf only where the weight is 0 in every problem)."""
    dim_a, dim_b = P.shape
    if warmstart is None:
        return np.zeros(dim_a), np.zeros(dim_b)
    weights = (P.a.max(axis=0, keepdims=True), P.b.max(axis=0, keepdims=True))
    alpha, beta = _checks.check_warmstart(warmstart, P.shape, 0, weights)
    return alpha[0].copy(), beta[0].copy()


def _soft_ctransform(M, pot, reg, axis):
    """-reg * log sum exp((pot - M) / reg) along ``axis`` of M (float64):
    axis=1 gives the row potentials alpha from beta (pot (dim_b,)), axis=0 the
    column potentials beta from alpha (pot (dim_a,)).  A row (column) of the
    kernel exp((alpha_i + beta_j - M_ij) / reg) then sums to 1."""
    with np.errstate(over="ignore", invalid="ignore"):
        x = (np.expand_dims(pot, 1 - axis) - M) / reg
        mx = np.max(x, axis=axis)
        return -reg * (mx + np.log(np.sum(np.exp(x - np.expand_dims(mx, axis)), axis=axis)))


def _revive(M, Kmat, alpha, beta, reg):
    """Rows (columns) of the kernel that vanish or overflow are given the
    soft c-transform of the other potential as potential (their kernel row
    then sums to 1), in place; True when anything changed.

    Such a row (from a scaling that underflowed to 0 and was absorbed as
    log 0 = -inf, a subnormal weight, or exp(-M / reg) below the smallest
    float) makes (K v)_i = 0 and u_i = a_i / 0: POT's iteration then turns
    into NaN.  Any finite potential represents the same plan (the scaling
    u_i absorbs the difference), so the iteration goes on from there."""
    with np.errstate(over="ignore", invalid="ignore"):
        rs, cs = Kmat.sum(axis=1), Kmat.sum(axis=0)  # 0: vanished; inf / NaN: overflow
    bad_r = ~(np.isfinite(alpha) & (rs > 0) & np.isfinite(rs))
    bad_c = ~(np.isfinite(beta) & (cs > 0) & np.isfinite(cs))
    if not (bad_r.any() or bad_c.any()):
        return False
    Mf = np.asarray(M, dtype=np.float64)
    if not np.isfinite(beta).all():
        fin = np.isfinite(alpha)
        if not fin.any():
            alpha[:] = 0.0
            fin[:] = True
        cols = ~np.isfinite(beta)
        beta[cols] = _soft_ctransform(Mf[np.ix_(fin, cols)], alpha[fin], reg, axis=0)
    if bad_r.any():
        alpha[bad_r] = _soft_ctransform(Mf[bad_r], beta, reg, axis=1)
    # the columns against the new rows: a column still without a finite,
    # non-zero entry gets the c-transform of alpha
    with np.errstate(over="ignore", invalid="ignore"):
        cs = np.exp((alpha[:, None] + beta[None, :] - Mf) / reg).sum(axis=0)
    bad_c = ~(np.isfinite(beta) & (cs > 0) & np.isfinite(cs))
    if bad_c.any():
        beta[bad_c] = _soft_ctransform(Mf[:, bad_c], alpha, reg, axis=0)
    return True


def _gibbs_result(P, st, f, g, want_loss):
    """The plan exp(c M + f + g^T) of the single problem, or the losses
    <plan_k, M> of every problem (without forming the plans)."""
    if _serial(P.n_problems, *P.shape):
        with np.errstate(over="ignore", invalid="ignore"):
            Mf = np.asarray(P.M, dtype=np.float64)
            plans = np.exp(st["c"] * Mf + f[:, :, None] + g[:, None, :])
        if want_loss or P.n_hists:
            loss = np.sum(np.where(plans > 0, plans * Mf, 0.0), axis=(1, 2))
            return _as_dtype(loss, P.dtype) if P.n_hists else P.dtype.type(loss[0])
        return _as_dtype(plans[0], P.dtype)
    if want_loss or P.n_hists:
        loss = np.empty(P.n_problems)
        cpu_sinkhorn.gibbs_loss(P.M, st["c"], f, g, st["n_chunks"], st["chunk_rows"], loss)
        return _as_dtype(loss, P.dtype) if P.n_hists else P.dtype.type(loss[0])
    res = np.empty(P.shape, dtype=P.dtype)
    cpu_sinkhorn.gibbs_kernel(P.M, st["c"], f[0], g[0], res)
    return res


def _serial(n_problems, dim_a, dim_b):
    """Whether a problem this small runs its iterations in NumPy (one thread)
    rather than on the parallel kernels (see ``STABILIZED_SERIAL_MAX_ENTRIES``)."""
    return n_problems * dim_a * dim_b <= STABILIZED_SERIAL_MAX_ENTRIES


def _stabilized_core(P, reg, numItermax, tau, stopThr, alpha, beta, verbose,
                     print_period, log, warn, init, q_extra=None):
    """POT's stabilized loop on the problem P (its weights all > 0 once the
    zero-weight bins are cut off by :func:`_solve_support`), from the
    potentials (alpha, beta) (float64, modified).  ``init`` = (1 / dim_a,
    1 / dim_b) of the caller's problem: POT's initial and reset scalings;
    ``q_extra`` (n_problems, dim_b), added to the first K^T u: what the
    zero-weight rows, cut off here, add to it in POT's first iteration."""
    dim_a, dim_b = P.shape
    n_problems = P.n_problems
    n_hists = P.n_hists
    n_chunks, chunk_rows = chunk_layout(dim_a, n_problems, dim_b)
    serial = _serial(n_problems, dim_a, dim_b)
    c = -1.0 / reg
    u = np.full((n_problems, dim_a), init[0])
    v = np.full((n_problems, dim_b), init[1])
    Kmat = np.empty(P.shape, dtype=P.dtype)
    Q = np.empty((n_chunks, n_problems, dim_b))
    q = np.empty((n_problems, dim_b))
    Mf = np.asarray(P.M, dtype=np.float64) if serial else None

    def absorb_kernel():
        for _ in range(2):
            if serial:
                Kmat[...] = np.exp(c * Mf + alpha[:, None] / reg + beta[None, :] / reg)
            else:
                cpu_sinkhorn.gibbs_kernel(P.M, c, alpha / reg, beta / reg, Kmat)
            if not _revive(P.M, Kmat, alpha, beta, reg):
                break
        if serial:
            q[...] = u @ Kmat
        else:
            cpu_sinkhorn.knopp_col_sums(Kmat, u, n_chunks, chunk_rows, Q, q)

    errs = []
    err = 1
    ii = 0
    completed = True
    n_absorbed = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        absorb_kernel()
        if q_extra is not None:
            q += q_extra
        for ii in range(numItermax):
            uprev, vprev = u.copy(), v.copy()
            v = P.b / q
            if serial:
                u = P.a / (v @ Kmat.T)
                q = u @ Kmat
            else:
                u = np.empty_like(u)
                cpu_sinkhorn.knopp_fused_pass(Kmat, P.a, v, n_chunks, chunk_rows, Q, u, q)
            if np.max(np.abs(u)) > tau or np.max(np.abs(v)) > tau:
                n_absorbed += 1
                if n_hists:
                    alpha = alpha + reg * np.max(np.log(u), 0)
                    beta = beta + reg * np.max(np.log(v))
                else:
                    alpha = alpha + reg * np.log(u[0])
                    beta = beta + reg * np.log(v[0])
                    u = np.full((n_problems, dim_a), init[0])
                    v = np.full((n_problems, dim_b), init[1])
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
                err = _loops.err_scalar(err, P.dtype)
                if log:
                    errs.append(err)
                if verbose:
                    _loops.print_header_and_row(ii, err, print_period * 20)
            if err <= stopThr:
                completed = False
                break
            if np.any(np.isnan(u)) or np.any(np.isnan(v)):
                warnings.warn(_loops.NUMERICAL_ERRORS % ii)
                u, v = uprev, vprev
                completed = False
                break
        if completed and warn:
            warnings.warn(_loops.NOT_CONVERGED)
        if completed and numItermax >= 10 and n_absorbed == numItermax:
            warnings.warn(TAU_TOO_SMALL % tau)
        logu = alpha[None, :] / reg + np.log(u)
        logv = beta[None, :] / reg + np.log(v)
    return dict(logu=logu, logv=logv, errs=errs, niter=ii)


def _solve_support(P, reg, numItermax, tau, stopThr, potentials, verbose, print_period, log,
                   warn):
    """:func:`_stabilized_core` on the rows and columns of positive weight
    (in some problem); the log-scalings of the zero-weight bins are -inf
    (log 0: their plan rows and columns are 0).  POT keeps those bins in its
    iteration, where the first absorption turns their potentials into -inf
    and the iterates into NaN (0 / 0)."""
    dim_a, dim_b = P.shape
    alpha, beta = (np.array(x, dtype=np.float64) for x in potentials)
    rows = np.any(P.a > 0, axis=0)
    cols = np.any(P.b > 0, axis=0)
    init = (1.0 / dim_a, 1.0 / dim_b)
    if rows.all() and cols.all():
        st = _stabilized_core(P, reg, numItermax, tau, stopThr, alpha, beta, verbose,
                              print_period, log, warn, init)
    else:
        Ps = replace(P, M=np.ascontiguousarray(P.M[np.ix_(rows, cols)]),
                     a=np.ascontiguousarray(P.a[:, rows]), b=np.ascontiguousarray(P.b[:, cols]))
        q_extra = None
        if not rows.all():  # POT's first K^T u, u = 1 / dim_a, sums them too
            with np.errstate(over="ignore", invalid="ignore"):
                Kz = np.exp(-np.asarray(P.M[np.ix_(~rows, cols)], dtype=np.float64) / reg
                            + alpha[~rows, None] / reg + beta[None, cols] / reg)
            q_extra = np.broadcast_to((Kz.astype(P.dtype) * init[0]).sum(axis=0),
                                      (P.n_problems, Ps.shape[1]))
        st = _stabilized_core(Ps, reg, numItermax, tau, stopThr, alpha[rows], beta[cols],
                              verbose, print_period, log, warn, init, q_extra)
        logu = np.full((P.n_problems, dim_a), -np.inf)
        logv = np.full((P.n_problems, dim_b), -np.inf)
        logu[:, rows] = st["logu"]
        logv[:, cols] = st["logv"]
        st.update(logu=logu, logv=logv)
    st["n_chunks"], st["chunk_rows"] = chunk_layout(dim_a, P.n_problems, dim_b)
    st["c"] = -1.0 / reg
    return st


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
    lg = {"err": st["errs"], "n_iter": st["niter"], "logu": _as_dtype(lu, dt), "logv": _as_dtype(lv, dt)}
    lg["alpha"] = _as_dtype(reg * lu, dt)
    lg["beta"] = _as_dtype(reg * lv, dt)
    lg["warmstart"] = (lg["alpha"], lg["beta"])
    return res, lg


def stabilized_solve(P, reg, numItermax, tau, stopThr, warmstart, verbose, print_period,
                log, warn, want_loss):
    """POT's stabilized algorithm on a validated problem: the engine of
    :func:`sinkhorn_stabilized`, of ``sinkhorn2(method='sinkhorn_stabilized')``
    and of the inner steps of :func:`sinkhorn_epsilon_scaling`.

    Exported (``__all__``) for those callers inside ``numbaot.bregman``; it
    validates only ``tau`` and ``print_period`` (which ``sinkhorn2`` forwards
    from its ``**kwargs``) and is not part of the user-facing API (use
    :func:`sinkhorn_stabilized`, whose example applies).  One problem or a
    2-D ``b`` runs POT's algorithm as is [1]_ [2]_.  Paired batches (no POT
    counterpart) run POT's single-problem algorithm once per problem: the
    absorption rewrites K per problem, so the representation of the
    potentials (logu, alpha, ...) then equals POT's per-problem result;
    ``log['err']`` and ``log['n_iter']`` become per-problem lists.

    Departures from POT, all where POT returns NaN or a wrong value: the
    bins of zero weight are left out of the iteration (their log-scalings
    are -inf, their plan rows / columns 0); a row or column of the kernel
    that vanishes (underflow, subnormal weights, large M / reg) or overflows
    gets the soft c-transform of the other potential as potential (any
    finite potential represents the same plan); ``tau`` <= 0 is refused.
    Problems of at most ``numbaot._config.STABILIZED_SERIAL_MAX_ENTRIES``
    entries (dim_a x dim_b x n_problems) iterate in NumPy on one thread
    (the parallel kernels cost more than they save there).

    Parameters
    ----------
    P : numbaot._checks.Problem
        The validated problem (``prepare_problem(a, b, M)``): ``M`` of shape
        (dim_a, dim_b), weights of shape (n_problems, dim), dtype, device.
    reg : float
        Entropic regularisation (> 0, validated), in units of ``M``.
    numItermax : int
        Maximum number of iterations (>= 0, validated).
    tau : float
        Absorption threshold on max |u|, max |v| (finite, > 0; validated here).
    stopThr : float
        Stopping threshold on the error (see :func:`sinkhorn_stabilized`).
    warmstart : tuple of arrays or None
        Initial dual potentials (alpha, beta), shapes (dim_a,), (dim_b,).
    verbose : bool
        Print the error table.
    print_period : int
        Error computed every ``print_period`` iterations (>= 1; validated here).
    log : bool
        Also return the log dict.
    warn : bool
        Warn when ``numItermax`` is reached.
    want_loss : bool
        Return the losses <gamma_k, M>_F instead of the plan.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), or the losses (scalar or
        (n_hists,)); dtype of the problem
    log : dict, only if ``log``
        As :func:`sinkhorn_stabilized`.

    Raises
    ------
    ValueError
        Malformed ``warmstart`` (``numbaot._checks.check_warmstart``);
        ``tau`` not a finite number > 0; ``print_period`` < 1; unequal
        masses or max|M| / reg too large (``numbaot._checks.check_balanced``).
    TypeError
        ``tau`` not a real number, ``print_period`` not an integer.

    Warns
    -----
    UserWarning
        As :func:`sinkhorn_stabilized`.

    References
    ----------
    .. [1] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3), A1443-A1481,
       2019, Algorithm 2.
    .. [2] POT 0.9.7, ``ot.bregman.sinkhorn_stabilized``.
    """
    tau, print_period = check_stabilized_args(tau, print_period)
    _checks.check_balanced(P, reg)
    if P.device == "cuda":
        res = stabilized_solve(replace(P, M=P.M.copy_to_host(), device="cpu"), reg, numItermax,
                          tau, stopThr, warmstart, verbose, print_period, log, warn, want_loss)
        return _dispatch.outputs_to_device(res, P.like)
    return _solve_validated(P, reg, numItermax, tau, stopThr, _warm_potentials(warmstart, P),
                            verbose, print_period, log, warn, want_loss)


def _solve_validated(P, reg, numItermax, tau, stopThr, potentials, verbose, print_period,
                     log, warn, want_loss):
    """:func:`stabilized_solve` after its checks, from the potentials
    (alpha, beta) (float64 (dim_a,), (dim_b,); -inf allowed anywhere: such
    bins are cut off or re-based); a host problem.  The inner steps of
    :func:`sinkhorn_epsilon_scaling` call it with the previous step's
    potentials, where a weight too small for its scaling gives -inf."""
    if not P.paired:
        st = _solve_support(P, reg, numItermax, tau, stopThr, potentials, verbose,
                            print_period, log, warn)
        out = _stabilized_outputs(P, st, reg, log, want_loss)
        _warn_nonfinite(out[0] if log else out)
        return out
    outs = []
    for k in range(P.n_hists):
        Pk = _checks.Problem(M=P.M, a=P.a[k:k + 1], b=P.b[k:k + 1], dtype=P.dtype,
                             n_hists=0, paired=False)
        st = _solve_support(Pk, reg, numItermax, tau, stopThr, potentials, verbose,
                            print_period, log, warn)
        outs.append(_stabilized_outputs(Pk, st, reg, True, want_loss=True))
    res = np.stack([o[0] for o in outs])
    _warn_nonfinite(res)
    if not log:
        return res
    lg = {"err": [o[1]["err"] for o in outs], "n_iter": [o[1]["n_iter"] for o in outs]}
    for key in ("logu", "logv", "alpha", "beta"):
        lg[key] = np.stack([o[1][key] for o in outs], axis=1)
    lg["warmstart"] = (lg["alpha"], lg["beta"])
    return res, lg


def _warn_nonfinite(res):
    if not np.all(np.isfinite(res)):
        warnings.warn(NONFINITE_RESULT)


def sinkhorn_stabilized(a, b, M, reg, numItermax=1000, tau=1e3, stopThr=1e-9,
                        warmstart=None, verbose=False, print_period=20, log=False,
                        warn=True, **kwargs):
    r"""Stabilized Sinkhorn with absorption; mirrors ``ot.bregman.sinkhorn_stabilized`` [2]_.

    Same problem as :func:`sinkhorn_knopp`.  The scalings u, v are absorbed
    into dual potentials (alpha, beta) whenever one of them exceeds ``tau``,
    and K = exp(-(M - alpha - beta^T) / reg) is rebuilt (Schmitzer 2019,
    "Stabilized Sparse Scaling Algorithms for Entropy Regularized Transport
    Problems", Algorithm 2) [1]_, step for step as POT 0.9.7.

    Parameters
    ----------
    a, b, M, reg, numItermax, stopThr, verbose, log, warn
        As in :func:`sinkhorn_knopp`.
    tau : float, default 1e3
        Absorption threshold on max |u|, max |v|: a finite number > 0 (as the
        unbalanced stabilized solvers; POT accepts tau <= 0 and then returns
        a wrong value, every iteration resetting the scalings).
    warmstart : tuple of 2 arrays, optional
        Initial dual potentials (alpha, beta), shapes (dim_a,), (dim_b,)
        (shared by every problem of a batch), in units of ``M``: host arrays
        of any real dtype, used as float64; finite except -inf where the
        weight is 0 in every problem.
    print_period : int, default 20
        The error is computed (and printed) every ``print_period`` iterations
        (an integer >= 1; POT raises ZeroDivisionError for 0): the 2-norm of
        the column-marginal violation, or for 2-D ``b`` the mean relative
        change of u and v (POT's rule).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D ``b``
        The plan, or the losses <gamma_k, M>_F; float32 when every non-empty
        input among ``a``, ``b``, ``M`` is float32 (or float16), else
        float64.  Device inputs run on host copies and get device arrays
        back.
    log : dict, only if ``log=True``
        Keys ``'err'``, ``'n_iter'``, ``'logu'``, ``'logv'`` (total
        log-scalings), ``'alpha'``, ``'beta'`` (dual potentials
        reg * log-scalings, units of ``M``) and ``'warmstart'`` = (alpha, beta).
        For paired batches (2-D ``a``) each problem runs POT's single-problem
        algorithm; ``'err'`` and ``'n_iter'`` are then per-problem lists.
        Bins of zero weight have log-scalings (and potentials) -inf: they
        take no part in the iteration (see Notes).

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp`, plus a malformed ``warmstart``, ``tau``
        not a finite number > 0, ``print_period`` not an integer >= 1.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``) and "Numerical errors at
        iteration %d" (a NaN in u or v; the previous iterate is returned), as
        POT; numbaot's own "... absorbed the scalings at every iteration ..."
        (``tau`` too small for the iteration to converge) and "... returned
        NaN or inf entries ..." (a non-finite result).

    Notes
    -----
    Where POT's iteration breaks down numbaot's goes on (see
    :func:`stabilized_solve`): zero-weight bins are left out (POT: NaN after
    the first absorption), and a vanishing or overflowing row or column of
    the kernel (a subnormal weight, exp(-M / reg) below the smallest float)
    is re-based on the soft c-transform of the other potential.  Elsewhere
    the iterates are POT's.

    References
    ----------
    .. [1] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3), A1443-A1481,
       2019, Algorithm 2.
    .. [2] POT 0.9.7, ``ot.bregman.sinkhorn_stabilized``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G, log = numbaot.sinkhorn_stabilized(a, b, M, 0.01, log=True)
    >>> print(np.round(G, 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    >>> sorted(log)
    ['alpha', 'beta', 'err', 'logu', 'logv', 'n_iter', 'warmstart']
    """
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    _checks.check_balanced(P, reg)
    tau, print_period = check_stabilized_args(tau, print_period)
    return stabilized_solve(P, reg, numItermax, tau, stopThr, warmstart, verbose, print_period,
                       log, warn, want_loss=False)


def sinkhorn_epsilon_scaling(a, b, M, reg, numItermax=100, epsilon0=1e4,
                             numInnerItermax=100, tau=1e3, stopThr=1e-9,
                             warmstart=None, verbose=False, print_period=10,
                             log=False, warn=True, **kwargs):
    r"""Sinkhorn with epsilon scaling; mirrors ``ot.bregman.sinkhorn_epsilon_scaling`` [2]_.

    Solves a sequence of stabilized problems with regularisation
    reg_i = (epsilon0 - reg) exp(-i) + reg, each warm-started from the
    previous potentials (Schmitzer 2019, Algorithm 3.2) [1]_, as POT 0.9.7.

    Parameters
    ----------
    a : array-like, shape (dim_a,), float32 or float64
        Source weights (>= 0, finite; empty = uniform); float16 is computed
        as float32, integers as float64.  1-D only.
    b : array-like, shape (dim_b,), float32 or float64
        Target weights (empty = uniform), same rules; sum b = sum a.  2-D
        ``b`` is refused: POT returns meaningless values for it.
    M, reg, stopThr, verbose, warn
        As in :func:`sinkhorn_knopp`.
    numItermax : int, default 100
        Number of outer (epsilon) steps; at least 35 are made, as POT.
    epsilon0 : float, default 1e4
        Initial regularisation.
    numInnerItermax : int, default 100
        Iterations of each inner :func:`sinkhorn_stabilized` call, >= 1
        (POT raises UnboundLocalError for 0).
    tau : float, default 1e3
        Absorption threshold of the inner calls (finite, > 0).
    warmstart : tuple of 2 arrays, optional
        Initial dual potentials (alpha, beta), shapes (dim_a,), (dim_b,), in
        units of ``M``: host arrays of any real dtype, used as float64;
        finite except -inf where the weight is 0.
    print_period : int, default 10
        Error (squared marginal violations of both sides) computed every
        ``print_period`` outer steps.
    log : bool
        Also return a dict with keys ``'err'``, ``'alpha'``, ``'beta'``,
        ``'warmstart'``, ``'niter'``.
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b)
        The plan; float32 when every non-empty input among ``a``, ``b``,
        ``M`` is float32 (or float16), else float64.  Device inputs run on
        host copies and get a device array back.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_stabilized`; 2-D ``a`` or ``b``; ``epsilon0`` not
        a finite number > 0; ``numInnerItermax`` not an integer >= 1.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." from the outer loop (if ``warn``) and,
        as in POT, from every inner stabilized call that hits
        ``numInnerItermax`` (POT does not pass ``warn`` to them); the inner
        calls' other warnings (see :func:`sinkhorn_stabilized`).  Where POT's
        inner iterations break down (zero or subnormal weights, vanishing
        kernel rows: inf / NaN plans) numbaot's go on, as described there.

    References
    ----------
    .. [1] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3), A1443-A1481,
       2019, Algorithm 3.2.
    .. [2] POT 0.9.7, ``ot.bregman.sinkhorn_epsilon_scaling``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.01)
    >>> print(np.round(G, 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    """
    if device_of(a=a, b=b, M=M) == "cuda":
        return _dispatch.via_host(
            sinkhorn_epsilon_scaling,
            (a, b, M, reg, numItermax, epsilon0, numInnerItermax, tau, stopThr, warmstart,
             verbose, print_period, log, warn), kwargs, M)
    P = prepare_problem(a, b, M, allow_batch=False, method_name="sinkhorn_epsilon_scaling")
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    _checks.check_balanced(P, reg)
    epsilon0 = _checks.check_reg(epsilon0, "epsilon0")
    numInnerItermax = _checks.check_iter_count(numInnerItermax, "numInnerItermax")
    if numInnerItermax == 0:
        raise ValueError("numInnerItermax must be an integer >= 1; got 0")
    tau, print_period = check_stabilized_args(tau, print_period)
    a1 = P.a[0].astype(P.dtype)
    b1 = P.b[0].astype(P.dtype)
    dim_a, dim_b = P.shape
    numItermin = 35
    numItermax = max(numItermin, numItermax)
    if warmstart is None:
        alpha, beta = np.zeros(dim_a, dtype=P.dtype), np.zeros(dim_b, dtype=P.dtype)
    else:
        alpha, beta = _warm_potentials(warmstart, P)
    errs = []
    err = 1
    completed = True
    ii = 0
    G = None
    for ii in range(numItermax):
        regi = (epsilon0 - reg) * np.exp(-ii) + reg
        # POT's inner call: print_period=20, log=True, warn left at True.
        # The problem is validated once (above), not at every epsilon step.
        G, logi = _solve_validated(P, regi, numInnerItermax, tau, stopThr, (alpha, beta),
                                   False, 20, True, True, want_loss=False)
        alpha = logi["alpha"]
        beta = logi["beta"]
        if ii % print_period == 0:
            err = np.linalg.norm(np.sum(G, axis=0) - b1) ** 2 + np.linalg.norm(np.sum(G, axis=1) - a1) ** 2
            if log:
                errs.append(err)
            if verbose:
                _loops.print_header_and_row(ii, err, print_period * 10)
        if err <= stopThr and ii > numItermin:
            completed = False
            break
    if completed and warn:
        warnings.warn(_loops.NOT_CONVERGED)
    if log:
        lg = {"err": errs, "alpha": alpha, "beta": beta, "warmstart": (alpha, beta), "niter": ii}
        return G, lg
    return G


