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

__all__ = ["sinkhorn_stabilized", "sinkhorn_epsilon_scaling", "stabilized_solve"]

def _as_dtype(x, dtype):
    return np.asarray(x, dtype=dtype)


def _gibbs_result(P, st, f, g, want_loss):
    """The plan exp(c M + f + g^T) of the single problem, or the losses
    <plan_k, M> of every problem (without forming the plans)."""
    if want_loss or P.n_hists:
        loss = np.empty(P.n_problems)
        cpu_sinkhorn.gibbs_loss(P.M, st["c"], f, g, st["n_chunks"], st["chunk_rows"], loss)
        return _as_dtype(loss if P.n_hists else loss[0], P.dtype)
    res = np.empty(P.shape, dtype=P.dtype)
    cpu_sinkhorn.gibbs_kernel(P.M, st["c"], f[0], g[0], res)
    return res



def _stabilized_core(P, reg, numItermax, tau, stopThr, warmstart, verbose,
                     print_period, log, warn):
    dim_a, dim_b = P.shape
    n_problems = P.n_problems
    n_hists = P.n_hists
    n_chunks, chunk_rows = chunk_layout(dim_a, n_problems, dim_b)
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
    u = np.full((n_problems, dim_a), 1.0 / dim_a)
    v = np.full((n_problems, dim_b), 1.0 / dim_b)
    Kmat = np.empty(P.shape, dtype=P.dtype)
    Q = np.empty((n_chunks, n_problems, dim_b))
    q = np.empty((n_problems, dim_b))

    def absorb_kernel():
        cpu_sinkhorn.gibbs_kernel(P.M, c, alpha / reg, beta / reg, Kmat)
        cpu_sinkhorn.knopp_col_sums(Kmat, u, n_chunks, chunk_rows, Q, q)

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
        cpu_sinkhorn.knopp_fused_pass(Kmat, P.a, v, n_chunks, chunk_rows, Q, u, q)
        if np.max(np.abs(u)) > tau or np.max(np.abs(v)) > tau:
            with np.errstate(divide="ignore", invalid="ignore"):
                if n_hists:
                    alpha = alpha + reg * np.max(np.log(u), 0)
                    beta = beta + reg * np.max(np.log(v))
                else:
                    alpha = alpha + reg * np.log(u[0])
                    beta = beta + reg * np.log(v[0])
                    u = np.full((n_problems, dim_a), 1.0 / dim_a)
                    v = np.full((n_problems, dim_b), 1.0 / dim_b)
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
    does no validation and is not part of the user-facing API (use
    :func:`sinkhorn_stabilized`, whose example applies).  One problem or a
    2-D ``b`` runs POT's algorithm as is [1]_ [2]_.  Paired batches (no POT
    counterpart) run POT's single-problem algorithm once per problem: the
    absorption rewrites K per problem, so the representation of the
    potentials (logu, alpha, ...) then equals POT's per-problem result;
    ``log['err']`` and ``log['n_iter']`` become per-problem lists.

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
        Absorption threshold on max |u|, max |v|.
    stopThr : float
        Stopping threshold on the error (see :func:`sinkhorn_stabilized`).
    warmstart : tuple of arrays or None
        Initial dual potentials (alpha, beta), shapes (dim_a,), (dim_b,).
    verbose : bool
        Print the error table.
    print_period : int
        Error computed every ``print_period`` iterations (>= 1).
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
        Malformed ``warmstart``.

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
    if P.device == "cuda":
        res = stabilized_solve(replace(P, M=P.M.copy_to_host(), device="cpu"), reg, numItermax,
                          tau, stopThr, warmstart, verbose, print_period, log, warn, want_loss)
        return _dispatch.outputs_to_device(res, P.like)
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
    tau = _checks.check_real_scalar(tau, "tau")
    print_period = _checks.check_iter_count(print_period, "print_period")
    if print_period == 0:
        raise ValueError("print_period must be >= 1")
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
    **kwargs
        Ignored, as in POT.

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
        G, logi = stabilized_solve(P, regi, numInnerItermax, tau, stopThr, (alpha, beta),
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


