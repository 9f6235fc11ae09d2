"""POT's stabilized and translation-invariant unbalanced Sinkhorn, step for step.

NumPy ports of POT 0.9.7's host loops (``ot.unbalanced.sinkhorn_stabilized_unbalanced``,
``ot.unbalanced.sinkhorn_unbalanced_translation_invariant``) in float64 with
NumPy mat-vecs: POT's control flow, errors, warnings and ``log`` keys.  Host
(NumPy) arrays only.
"""
import warnings

import numpy as np

from .. import _checks, _loops
from ._common import absorbing_loop, bad_step, rel_change, setup, total_cost

__all__ = ["sinkhorn_stabilized_unbalanced", "sinkhorn_unbalanced_translation_invariant"]

#: The cause added to POT's "Numerical errors at iteration %s" when the
#: translation t of the translation-invariant solver is 0, inf or NaN.
TRANSLATION_OVERFLOW = (
    ": the translation step overflowed (t = {t!r}): its exponent "
    "reg_m1 reg_m2 / ((reg_m1 + reg_m2) reg) = {e:.3g} is too large for the rounding error "
    "of the mass ratio it raises; the previous iterate is returned. Use a smaller reg_m / reg, "
    "reg_m=inf for a hard marginal, or method 'sinkhorn' / 'sinkhorn_stabilized'")


def _pot_layout(S, u_cols):
    """POT's arrays: a (dim_a,) (or (dim_a, 1) for 2-D b), b (dim_b,) or
    (dim_b, n_hists), M float64, the M0 of POT (M - reg log c for 1-D b),
    c (None for 2-D b), and the initial scalings u ((dim_a,) or (dim_a,
    u_cols)), v: ones or the warm start's exp(log u0), exp(log v0)."""
    P = S.P
    dim_a, dim_b = P.shape
    if S.warm is None:
        u, v = ((np.ones((dim_a, u_cols)), np.ones((dim_b, P.n_hists))) if P.n_hists
                else (np.ones(dim_a), np.ones(dim_b)))
    elif P.n_hists:
        u, v = np.exp(S.warm[0]).T.copy(), np.exp(S.warm[1]).T.copy()
    else:
        u, v = np.exp(S.warm[0][0]), np.exp(S.warm[1][0])
    M = P.M.astype(np.float64)
    if P.n_hists:
        return P.a[0].reshape(dim_a, 1), np.ascontiguousarray(P.b.T), M, M, None, u, v
    c = S.C if S.use_mat else np.outer(S.ca, S.cb)
    with np.errstate(divide="ignore"):
        M0 = M - S.reg * np.log(c)
    return P.a[0], P.b[0], M, M0, c, u, v


def _finish_host(S, u, v, K, M, c, logu, logv, log, lg, n_hists, want_plan=True):
    """POT's outputs from float64 u, v (or log-scalings) on the host."""
    dt = S.P.dtype
    if log:
        lg["logu"], lg["logv"] = np.asarray(logu, dt), np.asarray(logv, dt)
    if n_hists:
        res = np.asarray(np.einsum("ik,ij,jk,ij->k", u, K, v, M), dt)
        return (res, lg) if log else res
    return _plan_outputs(S, u[:, None] * K * v[None, :], M, c, log, lg)


def _plan_outputs(S, plan, M, c, log, lg):
    """The plan (float64 (dim_a, dim_b)) as a result and, with ``log``,
    lg['cost'] = <plan, M> and lg['total_cost'] (POT's objective)."""
    dt = S.P.dtype
    if log:
        lin = float(np.sum(plan * M))
        lg["cost"] = dt.type(lin)
        lg["total_cost"] = dt.type(total_cost(S, lin, _loops.kl_div(plan, c), plan.sum(1), plan.sum(0)))
    plan = np.asarray(plan, dt)
    return (plan, lg) if log else plan


def sinkhorn_stabilized_unbalanced(a, b, M, reg, reg_m, reg_type="kl", c=None, warmstart=None,
                                   tau=1e5, numItermax=1000, stopThr=1e-6, verbose=False,
                                   log=False, **kwargs):
    r"""Log-stabilized unbalanced Sinkhorn with absorption; mirrors
    ``ot.unbalanced.sinkhorn_stabilized_unbalanced``.

    Schmitzer 2019 ("Stabilized sparse scaling algorithms for entropy
    regularized transport problems", Algorithm 2) for the unbalanced problem
    (Chizat et al. 2018): scalings above ``tau`` are absorbed into the dual
    potentials (alpha, beta) and K is rebuilt.  Host loop in float64 (NumPy
    mat-vecs), POT's control flow: err on u only, checked at iteration 0 and
    every 10th iteration without absorption.

    Parameters
    ----------
    a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        As :func:`numbaot.unbalanced.sinkhorn_knopp_unbalanced` (no paired
        batches, no GPU arrays).
    tau : float, default 1e5
        Absorption threshold (> 0).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D b
        The unbalanced plan (or the losses <gamma_k, M>); float32 when every
        non-empty input among ``a``, ``b``, ``M`` is float32 (or float16),
        else float64 (iterations in float64).
    log : dict
        Only if ``log``: ``'err'``, ``'logu'``, ``'logv'`` (alpha/reg + log
        u, ..., of the result dtype), and for 1-D b ``'cost'``,
        ``'total_cost'``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp_unbalanced`; ``tau`` <= 0 or not finite
        (ValueError) or not a real number (TypeError); 2-D ``a``
        (ValueError); GPU arrays (TypeError).
    numbaot._dispatch.CudaUnavailableError
        GPU arrays given without numba-cuda or a usable GPU (raised before
        the TypeError above).

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s"; "Stabilized Unbalanced Sinkhorn did
        not converge..." when err > stopThr at the end; the 'entropy' warning.

    References
    ----------
    .. [1] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3),
       A1443-A1481, 2019, Algorithm 2.
    .. [2] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018.
    .. [3] POT 0.9.7, ``ot.unbalanced.sinkhorn_stabilized_unbalanced``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.unbalanced.sinkhorn_stabilized_unbalanced(a, b, M, 0.1, 1.0)
    >>> print(np.round(G, 3))
    [[0.314 0.076 0.   ]
     [0.    0.206 0.344]]
    """
    S = setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
              allow_paired=False, method_name="sinkhorn_stabilized_unbalanced")
    tau = _checks.check_reg(tau, "tau")
    a, b, M, M0, c, u, v = _pot_layout(S, S.P.n_hists)
    n_hists = S.P.n_hists
    reg = S.reg
    lg = {"err": []} if log else None
    K = np.exp(-M0 / reg)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        u, v, uprev, vprev, alpha, beta, _, failed = absorbing_loop(
            K, M0, a, lambda Ktu, f_beta: b, u, v, reg, (S.reg_m1, S.reg_m2), (S.fi1, S.fi2),
            tau, S.numItermax, S.stopThr, rel_change, True, lg, S.P.dtype, verbose, 200)
        if failed:
            u, v = uprev, vprev
        if n_hists:
            logu = alpha[:, None] / reg + np.log(u)
            logv = beta[:, None] / reg + np.log(v)
        else:
            logu = alpha / reg + np.log(u)
            logv = beta / reg + np.log(v)
        dt = S.P.dtype
        if log:
            lg["logu"], lg["logv"] = np.asarray(logu, dt), np.asarray(logv, dt)
        if n_hists:
            # POT: exp(logsumexp(log(M + 1e-100) + logu + logv - M0 / reg))
            res = np.einsum("ij,ik,jk->k", (M + 1e-100) * np.exp(-M0 / reg),
                            np.exp(logu), np.exp(logv))
            res = np.asarray(res, dt)
            return (res, lg) if log else res
        return _plan_outputs(S, np.exp(logu[:, None] + logv[None, :] - M0 / reg), M, c, log, lg)


def sinkhorn_unbalanced_translation_invariant(a, b, M, reg, reg_m, reg_type="kl", c=None,
                                              warmstart=None, numItermax=1000, stopThr=1e-6,
                                              verbose=False, log=False, **kwargs):
    r"""Translation-invariant unbalanced Sinkhorn; mirrors
    ``ot.unbalanced.sinkhorn_unbalanced_translation_invariant``.

    Séjourné, Vialard, Peyré 2022 ("Faster unbalanced optimal transport:
    translation invariant Sinkhorn and 1-D Frank-Wolfe", Algorithm 2): the
    scaling updates are followed by the optimal translation of the dual pair.
    Host loop in float64 (NumPy mat-vecs), POT's control flow and err.

    Parameters
    ----------
    a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        As :func:`numbaot.unbalanced.sinkhorn_knopp_unbalanced` (no paired
        batches, no GPU arrays).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D b
        The unbalanced plan (or the losses <gamma_k, M>); float32 when every
        non-empty input among ``a``, ``b``, ``M`` is float32 (or float16),
        else float64 (iterations in float64).
    log : dict, only if ``log``
        As :func:`numbaot.unbalanced.sinkhorn_knopp_unbalanced`.

    Raises
    ------
    TypeError, ValueError
        As :func:`numbaot.unbalanced.sinkhorn_knopp_unbalanced`; 2-D ``a``
        (ValueError); ``reg_m`` = 0 on either side (ValueError; POT:
        ZeroDivisionError); GPU arrays (TypeError).
    numbaot._dispatch.CudaUnavailableError
        GPU arrays given without numba-cuda or a usable GPU (raised before
        the TypeError above).

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" (POT's) when K^T u has a zero or a
        scaling a NaN/inf, and, numbaot, with the cause appended when the
        translation t is 0, inf or NaN (reg_m / reg so large, about 1e17 and
        beyond, that t = ratio^(reg_m1 reg_m2 / ((reg_m1 + reg_m2) reg)) raises
        the rounding error of the mass ratio to an overflowing power; POT
        returns a NaN plan silently): the previous iterate is returned.

    References
    ----------
    .. [1] T. Sejourne, F.-X. Vialard, G. Peyre, "Faster Unbalanced Optimal
       Transport: Translation invariant Sinkhorn and 1-D Frank-Wolfe",
       AISTATS 2022, Algorithm 2.
    .. [2] POT 0.9.7, ``ot.unbalanced.sinkhorn_unbalanced_translation_invariant``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.unbalanced.sinkhorn_unbalanced_translation_invariant(a, b, M, 0.1, 1.0)
    >>> print(np.round(G, 3))
    [[0.314 0.076 0.   ]
     [0.    0.206 0.344]]
    """
    S = setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
              allow_paired=False, method_name="sinkhorn_unbalanced_translation_invariant")
    if S.reg_m1 == 0 or S.reg_m2 == 0:  # POT: ZeroDivisionError (reg / reg_m)
        raise ValueError(
            f"reg_m must be > 0 on both sides for sinkhorn_unbalanced_translation_invariant "
            f"(its steps divide by reg_m); got reg_m = ({S.reg_m1!r}, {S.reg_m2!r}); use "
            f"method 'sinkhorn' or 'sinkhorn_stabilized' for reg_m = 0")
    a, b, M, M0, c, u, v = _pot_layout(S, 1)
    n_hists = S.P.n_hists
    reg, reg_m1, reg_m2, fi_1, fi_2 = S.reg, S.reg_m1, S.reg_m2, S.fi1, S.fi2
    inf = np.inf
    lg = {"err": []} if log else None
    u_, v_ = u, v
    K = np.exp(-M0 / reg)
    k1 = reg * reg_m1 / ((reg + reg_m1) * (reg_m1 + reg_m2)) if reg_m1 != inf else 0
    k2 = reg * reg_m2 / ((reg + reg_m2) * (reg_m1 + reg_m2)) if reg_m2 != inf else 0
    k_rho1 = k1 * reg_m1 / reg if reg_m1 != inf else 0
    k_rho2 = k2 * reg_m2 / reg if reg_m2 != inf else 0
    if reg_m1 == inf and reg_m2 == inf:
        xi1, xi2, fi_12 = 0, 0, 1
    elif reg_m1 == inf:
        xi1, xi2, fi_12 = 0, reg / reg_m2, reg_m2
    elif reg_m2 == inf:
        xi1, xi2, fi_12 = reg / reg_m1, 0, reg_m1
    else:
        xi1 = (reg_m2 * reg) / (reg_m1 * (reg + reg_m1 + reg_m2))
        xi2 = (reg_m1 * reg) / (reg_m2 * (reg + reg_m1 + reg_m2))
        fi_12 = reg_m1 * reg_m2 / (reg_m1 + reg_m2)
    xi_rho1 = xi1 * reg_m1 / reg if reg_m1 != inf else 0
    xi_rho2 = xi2 * reg_m2 / reg if reg_m2 != inf else 0
    reg_ratio1 = reg / reg_m1 if reg_m1 != inf else 0
    reg_ratio2 = reg / reg_m2 if reg_m2 != inf else 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(S.numItermax):
            uprev, vprev = u, v
            Kv = K.dot(v_)
            u_hat = (a / Kv) ** fi_1 * np.sum(b * v_ ** reg_ratio2) ** k_rho2
            u_ = u_hat * np.sum(a * u_hat ** (-reg_ratio1)) ** (-xi_rho1)
            Ktu = K.T.dot(u_)
            v_hat = (b / Ktu) ** fi_2 * np.sum(a * u_ ** (-reg_ratio1)) ** k_rho1
            v_ = v_hat * np.sum(b * v_hat ** (-reg_ratio2)) ** (-xi_rho2)
            if bad_step(Ktu, u_, v_):
                warnings.warn(_loops.NUMERICAL_ERRORS % i)
                u, v = uprev, vprev
                break
            t = (np.sum(a * u_ ** (-reg_ratio1)) / np.sum(b * v_ ** (-reg_ratio2))) ** (fi_12 / reg)
            if not 0 < t < inf:  # POT goes on with NaN/inf scalings (a NaN plan, no warning)
                warnings.warn((_loops.NUMERICAL_ERRORS % i) + TRANSLATION_OVERFLOW.format(
                    t=float(t), e=fi_12 / reg))
                u, v = uprev, vprev
                break
            u = u_ * t
            v = v_ / t
            err = 0.5 * (rel_change(u, uprev) + rel_change(v, vprev))
            if log:
                lg["err"].append(S.P.dtype.type(err))
                if verbose:
                    _loops.print_header_and_row(i, err, 50)
            if err < S.stopThr:
                break
        logu, logv = np.log(u + 1e-300), np.log(v + 1e-300)
    return _finish_host(S, u, v, K, M, c, logu, logv, log, lg, n_hists)
