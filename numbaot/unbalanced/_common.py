"""The validated unbalanced problem, its objective, and the helpers of POT's
host loops, shared by the solvers of ``numbaot.unbalanced``."""
import warnings

import numpy as np

from .. import _checks, _dispatch, _loops
from .._checks import prepare_problem

__all__ = ["METHODS", "Setup", "setup", "total_cost", "bad_step", "rel_change",
           "absorbing_loop"]

#: The methods of ``sinkhorn_unbalanced`` / ``sinkhorn_unbalanced2``.
METHODS = ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_translation_invariant",
           "sinkhorn_reg_scaling", "sinkhorn_log")


class Setup:
    """Validated unbalanced problem: P (numbaot._checks.Problem), reg,
    reg_m1/2, fi1/2, the reference measure (ca, cb rank one, or C; Cmat is C
    or a (1, 1) placeholder, use_mat tells which), the initial log-scalings
    ``warm`` (log u0, log v0), float64 (n_problems, dim), or None,
    numItermax, stopThr."""


def setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
          allow_paired=True, method_name=None, allow_cuda=False):
    """Validate the arguments of an unbalanced solver (POT's conventions);
    issues POT's warning for reg_type 'entropy'.  Returns a :class:`Setup`.

    Raises
    ------
    TypeError, ValueError
        As the public solvers document; GPU arrays where ``allow_cuda`` is
        False; 2-D ``a`` where ``allow_paired`` is False.
    """
    P = prepare_problem(a, b, M, method_name=method_name)
    if P.device == "cuda" and not allow_cuda:
        raise TypeError(
            f"{method_name or 'this method'} takes host (NumPy) arrays only; GPU arrays are "
            "supported by methods 'sinkhorn' and 'sinkhorn_log'"
        )
    if P.paired and not allow_paired:
        raise ValueError(
            f"2-D a (paired batches) is supported by methods 'sinkhorn' and 'sinkhorn_log' "
            f"only, not by {method_name}"
        )
    S = Setup()
    S.P = P
    S.reg = _checks.check_reg(reg)
    _checks.check_cost_scale(P, S.reg)  # max|M| / reg <= 2**52 (host problems)
    S.reg_m1, S.reg_m2 = _checks.check_reg_m(reg_m)
    if S.reg_m1 == np.inf and S.reg_m2 == np.inf:
        # both marginals hard: balanced OT, which needs sum a = sum b (the
        # iterations would run to numItermax and return a plan that meets
        # neither marginal, as POT's does)
        _checks.check_equal_mass(P.a.sum(axis=1), P.b.sum(axis=1), P.mass_tol,
                                 remedy="give reg_m (ot.solve's unbalanced) a finite value")
    S.reg_type = _checks.check_reg_type(reg_type)
    S.numItermax = _checks.check_iter_count(numItermax, "numItermax")
    S.stopThr = _checks.check_stop_thr(stopThr)
    S.fi1 = _loops.marginal_exponent(S.reg_m1, S.reg)
    S.fi2 = _loops.marginal_exponent(S.reg_m2, S.reg)
    dim_a, dim_b = P.shape
    C = None
    if c is not None:
        if _dispatch.is_device_array(c):  # O(dim_a dim_b) copy: validated on the host
            c = _dispatch.to_host(c)
        C = _checks.check_reference_measure(c, P.shape)
    if S.reg_type == "entropy":
        warnings.warn(_loops.ENTROPY_WARNING)
        C = None
        ca, cb = np.ones(dim_a), np.ones(dim_b)
    elif P.n_hists:
        C = None  # as POT: with 2-D b, K = exp(-M / reg) (no reference measure)
        ca, cb = np.ones(dim_a), np.ones(dim_b)
    else:
        ca, cb = P.a[0], P.b[0]
    S.ca, S.cb, S.C = ca, cb, C
    S.use_mat = C is not None
    if S.use_mat:
        _check_reference_support(C, P.a[0], P.b[0])
    S.Cmat = C if C is not None else np.zeros((1, 1))
    S.warm = None
    if warmstart is not None:
        S.warm = _checks.check_warmstart(warmstart, P.shape, P.n_hists, (P.a, P.b))
    return S


def _check_reference_support(C, a, b):
    """ValueError when the reference measure ``C`` has an all-zero row i
    with a_i > 0 (or column j with b_j > 0).  Zeros of c force the plan to 0
    there (K = exp(-M / reg) c), which the iterations handle; a whole row of
    zeros makes K v = 0 on that row, so u_i = (a_i / 0)^fi is infinite: POT's
    'sinkhorn' stops with "Numerical errors" and a NaN total_cost, the log
    domain gets NaN potentials."""
    for axis, w, wname, what in ((1, a, "a", "row"), (0, b, "b", "column")):
        dead = np.flatnonzero(~(C.max(axis=axis) > 0) & (w > 0))
        if dead.size:
            k = int(dead[0])
            raise ValueError(
                f"c (the reference measure) has an all-zero {what} {k} where {wname}[{k}] > 0 "
                f"({dead.size} such {what}s): the plan must vanish on that {what} and the scaling "
                f"iterations cannot represent it; give c a positive entry in every {what} where "
                f"{wname} > 0 (or drop that {what} from the problem)")


def total_cost(S, lin, kl_plan, rows, cols):
    """POT's ``total_cost`` of one problem: <plan, M> + reg KL(plan, c) +
    reg_m1 KL(plan 1, a) + reg_m2 KL(plan^T 1, b) (a term with an infinite
    reg_m left out), from lin = <plan, M>, kl_plan = KL(plan, c) and the
    plan's row and column sums."""
    total = lin + S.reg * kl_plan
    if S.reg_m1 != np.inf:
        total += S.reg_m1 * _loops.kl_div(rows, S.P.a[0])
    if S.reg_m2 != np.inf:
        total += S.reg_m2 * _loops.kl_div(cols, S.P.b[0])
    return total


def bad_step(Ktu, u, v):
    """POT's failure test of a scaling step: a zero in K^T u or a NaN/inf in
    u or v."""
    return (np.any(Ktu == 0.0) or not np.all(np.isfinite(u)) or not np.all(np.isfinite(v)))


def rel_change(x, xprev):
    """POT's relative sup-norm change max|x - xprev| / max(max|x|, max|xprev|, 1)."""
    return np.max(np.abs(x - xprev)) / max(np.max(np.abs(x)), np.max(np.abs(xprev)), 1.0)


def absorbing_loop(K, M0, a, target, u, v, reg, reg_m, fi, tau, numItermax, stopThr, err_of,
                   check_first, lg, dtype, verbose, header_every):
    """POT's stabilized unbalanced scaling loop with absorption (Schmitzer
    2019, Algorithm 2), shared by ``sinkhorn_stabilized_unbalanced`` and
    ``barycenter_unbalanced_stabilized``, step for step as POT 0.9.7.

    One iteration: u = (a / (K v + 1e-16))^fi1 f_alpha, v = (t / (K^T u +
    1e-16))^fi2 f_beta with t = ``target(K^T u, f_beta)`` (the target
    marginal b, or the barycenter), f = exp(-potential / (reg + reg_m)) (1
    for an infinite reg_m); scalings above ``tau`` are absorbed into the
    potentials (alpha, beta) and K = exp((alpha + beta - M0) / reg) rebuilt.
    ``a`` 2-D (dim_a, n) means n problems (per-row maxima when absorbing).
    err = ``err_of(u, uprev)`` at iteration 0 and every 10th one without
    absorption (appended to ``lg['err']`` when ``lg`` is a dict); the loop
    stops once err < stopThr, or, with ``check_first`` (POT's
    ``while err > stopThr``), once err <= stopThr (no iteration when
    stopThr >= 1).  On a failed step (:func:`bad_step`) warns "Numerical
    errors at iteration %s" and stops; after the loop warns "Stabilized
    Unbalanced Sinkhorn did not converge..." when err > stopThr.

    Returns ``(u, v, uprev, vprev, alpha, beta, it, failed)``: ``it`` the
    index of the last iteration run (0 if none), ``failed`` whether the last
    step failed (then u, v are that step's, uprev, vprev the previous ones).
    """
    reg_m1, reg_m2 = reg_m
    fi_1, fi_2 = fi
    dim_a, dim_b = K.shape
    batched = a.ndim == 2
    alpha = np.zeros(dim_a)
    beta = np.zeros(dim_b)
    ones_a, ones_b = np.ones(dim_a), np.ones(dim_b)
    err = 1.0
    it = 0
    failed = False
    uprev, vprev = u, v
    if check_first and not err > stopThr:
        numItermax = 0
    for it in range(numItermax):
        uprev, vprev = u, v
        Kv = K.dot(v)
        f_alpha = np.exp(-alpha / (reg + reg_m1)) if reg_m1 != np.inf else ones_a
        f_beta = np.exp(-beta / (reg + reg_m2)) if reg_m2 != np.inf else ones_b
        if batched:
            f_alpha, f_beta = f_alpha[:, None], f_beta[:, None]
        u = ((a / (Kv + 1e-16)) ** fi_1) * f_alpha
        Ktu = K.T.dot(u)
        v = ((target(Ktu, f_beta) / (Ktu + 1e-16)) ** fi_2) * f_beta
        absorbing = False
        if np.any(u > tau) or np.any(v > tau):
            absorbing = True
            if batched:
                alpha = alpha + reg * np.log(np.max(u, 1))
                beta = beta + reg * np.log(np.max(v, 1))
            else:
                alpha = alpha + reg * np.log(np.max(u))
                beta = beta + reg * np.log(np.max(v))
            K = np.exp((alpha[:, None] + beta[None, :] - M0) / reg)
            v = np.ones(v.shape)
        if bad_step(Ktu, u, v):
            warnings.warn(_loops.NUMERICAL_ERRORS % it)
            failed = True
            break
        if (it % 10 == 0 and not absorbing) or it == 0:
            err = err_of(u, uprev)
            if lg is not None:
                lg["err"].append(dtype.type(err))
            if verbose:
                _loops.print_header_and_row(it, err, header_every)
            if (not err > stopThr) if check_first else err < stopThr:
                break
    if err > stopThr:
        warnings.warn(_loops.STAB_UNBALANCED_NOT_CONVERGED)
    return u, v, uprev, vprev, alpha, beta, it, failed
