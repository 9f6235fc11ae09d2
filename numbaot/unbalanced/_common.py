"""The validated unbalanced problem, its objective, and the helpers of POT's
host loops, shared by the solvers of ``numbaot.unbalanced``."""
import warnings

import numpy as np

from .. import _checks, _dispatch, _loops
from .._checks import prepare_problem

__all__ = ["METHODS", "Setup", "setup", "total_cost", "bad_step", "rel_change"]

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
    S.reg_m1, S.reg_m2 = _checks.check_reg_m(reg_m)
    S.reg_type = _checks.check_reg_type(reg_type)
    S.numItermax = _checks.check_iter_count(numItermax, "numItermax")
    S.stopThr = _checks.check_real_scalar(stopThr, "stopThr")
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
    S.Cmat = C if C is not None else np.zeros((1, 1))
    S.warm = None
    if warmstart is not None:
        S.warm = _checks.check_unbalanced_warmstart(warmstart, P.shape, P.n_hists)
    return S


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
