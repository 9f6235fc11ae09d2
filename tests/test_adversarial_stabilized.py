"""Issue 22 (hardening): adversarial inputs of the stabilized and
epsilon-scaling Sinkhorn solvers and of ``sinkhorn2_value_and_grad``.

Each test states numbaot's decided behaviour (a clear error naming the
argument, or a documented result with a warning), shows POT 0.9.7's
behaviour beside it where the two differ (by calling ``ot.*`` and asserting
what it does), and checks that the caller's arrays are left unchanged.
Oracles: POT's log-domain ``ot.bregman.sinkhorn_log`` (converged tightly),
POT's ``ot.sinkhorn2``, or closed forms.
"""
import warnings

import numpy as np
import ot
import pytest

import numbaot
import numbaot.bregman._stabilized as stabilized_module
from numbaot.gradients import sinkhorn2_value_and_grad

TRUE_VALUE = 0.2211  # <P, M> of the entropic plan of the abM, reg = 0.1




def _copies(*xs):
    return [x.copy() for x in xs]


def _assert_unchanged(originals, arrays):
    for x0, x in zip(originals, arrays):
        np.testing.assert_array_equal(x, x0)


def _pot_log_plan(a, b, M, reg):
    """POT's log-domain plan, converged tightly: the oracle plan."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ot.bregman.sinkhorn_log(a, b, M, reg, numItermax=100000, stopThr=1e-14)


# --------------------------------------------------------------------------
# 1. tau <= 0 (and a tau the scalings always exceed)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("tau", [0.0, -1.0, np.inf, np.nan])
def test_tau_not_positive_finite_is_refused(abM, tau):
    a, b, M = abM
    orig = _copies(a, b, M)
    with pytest.raises(ValueError, match="tau must be a finite number > 0"):
        numbaot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", tau=tau)
    with pytest.raises(ValueError, match="tau"):
        numbaot.sinkhorn_stabilized(a, b, M, 0.1, tau=tau)
    with pytest.raises(ValueError, match="tau"):
        numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.1, tau=tau)
    _assert_unchanged(orig, (a, b, M))


def test_tau_zero_pot_returns_a_wrong_value_silently(abM):
    """POT's behaviour that the refusal replaces: tau = 0 absorbs at every
    iteration and resets the scalings to 1/dim, which is no Sinkhorn step."""
    a, b, M = abM
    true = ot.sinkhorn2(a, b, M, 0.1)
    assert abs(true - TRUE_VALUE) < 1e-4
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # POT warns nothing (sinkhorn2: warn=False)
        pot = ot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", tau=0.0)
    assert abs(pot - 0.0074) < 1e-4 and abs(pot - true) > 0.2


def test_tau_below_the_scalings_warns(abM):
    """A positive tau that the scalings exceed at every iteration (here 1):
    numbaot returns POT's (non-converged) value with a warning that names
    tau; POT returns the same wrong value silently."""
    a, b, M = abM
    orig = _copies(a, b, M)
    with pytest.warns(UserWarning, match="absorbed the scalings at every iteration: tau=1"):
        got = numbaot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", tau=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pot = ot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", tau=1.0)
    np.testing.assert_allclose(got, pot, rtol=1e-10)
    assert abs(pot - TRUE_VALUE) > 0.2
    _assert_unchanged(orig, (a, b, M))


# --------------------------------------------------------------------------
# 2. print_period = 0
# --------------------------------------------------------------------------
def test_print_period_zero_is_refused(abM):
    a, b, M = abM
    orig = _copies(a, b, M)
    for bad in (0, -1):  # one message for both (it said ">= 0" for -1)
        with pytest.raises(ValueError, match="print_period must be >= 1"):
            numbaot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", print_period=bad)
    with pytest.raises(ValueError, match="print_period"):
        numbaot.sinkhorn_stabilized(a, b, M, 0.1, print_period=0)
    with pytest.raises(ValueError, match="print_period"):
        numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.1, print_period=0)
    with pytest.raises(TypeError, match="print_period must be an integer"):
        numbaot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", print_period=1.5)
    # POT: a ZeroDivisionError from `ii % print_period`
    with pytest.raises(ZeroDivisionError):
        ot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_stabilized", print_period=0)
    _assert_unchanged(orig, (a, b, M))


# --------------------------------------------------------------------------
# 3. small problems iterate serially (NumPy); same results as the kernels
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_serial_path_matches_parallel_kernels_and_pot(abM, monkeypatch, dtype):
    a, b, M = (x.astype(dtype) for x in abM)
    assert stabilized_module._serial(1, 6, 5)  # the problem runs serially
    kw = dict(reg=0.05, log=True)
    G_ser, log_ser = numbaot.sinkhorn_stabilized(a, b, M, **kw)
    E_ser = numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.05)
    monkeypatch.setattr(stabilized_module, "STABILIZED_SERIAL_MAX_ENTRIES", 0)
    assert not stabilized_module._serial(1, 6, 5)
    G_par, log_par = numbaot.sinkhorn_stabilized(a, b, M, **kw)
    E_par = numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.05)
    tol = dict(rtol=1e-12, atol=1e-15) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-7)
    assert G_ser.dtype == G_par.dtype == dtype
    np.testing.assert_allclose(G_ser, G_par, **tol)
    np.testing.assert_allclose(E_ser, E_par, **tol)
    assert log_ser["n_iter"] == log_par["n_iter"]
    G_pot = ot.bregman.sinkhorn_stabilized(a, b, M, 0.05)
    np.testing.assert_allclose(G_ser, G_pot, **tol)


def test_serial_path_2d_b_and_paired(abM, monkeypatch):
    a, b, M = abM
    B = np.stack([b, b[::-1]], axis=1)
    A = np.stack([a, a[::-1]], axis=1)
    ser = numbaot.sinkhorn2(a, B, M, 0.1, method="sinkhorn_stabilized")
    ser_p = numbaot.sinkhorn2(A, B, M, 0.1, method="sinkhorn_stabilized")
    monkeypatch.setattr(stabilized_module, "STABILIZED_SERIAL_MAX_ENTRIES", 0)
    par = numbaot.sinkhorn2(a, B, M, 0.1, method="sinkhorn_stabilized")
    par_p = numbaot.sinkhorn2(A, B, M, 0.1, method="sinkhorn_stabilized")
    np.testing.assert_allclose(ser, par, rtol=1e-12)
    np.testing.assert_allclose(ser_p, par_p, rtol=1e-12)
    np.testing.assert_allclose(ser, ot.sinkhorn2(a, B, M, 0.1, method="sinkhorn_stabilized"),
                               rtol=1e-10)
    pot_p = [ot.sinkhorn2(A[:, k], B[:, k], M, 0.1, method="sinkhorn_stabilized") for k in (0, 1)]
    np.testing.assert_allclose(ser_p, pot_p, rtol=1e-10)


# --------------------------------------------------------------------------
# 4. subnormal and zero weights, vanishing kernel rows
# --------------------------------------------------------------------------
def _subnormal(w):
    w = w.copy()
    w[0] = 5e-324
    return w / w.sum()


@pytest.mark.parametrize("reg", [0.1, 0.01])
@pytest.mark.parametrize("side", ["a", "b"])
def test_subnormal_weight(abM, side, reg):
    """A valid subnormal weight: numbaot's plans are finite and equal POT's
    log-domain plan; POT's epsilon scaling returns inf / NaN entries."""
    a, b, M = abM
    if side == "a":
        a = _subnormal(a)
    else:
        b = _subnormal(b)
    orig = _copies(a, b, M)
    ref = _pot_log_plan(a, b, M, reg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inner calls' "did not converge" (as POT)
        G = numbaot.sinkhorn_stabilized(a, b, M, reg, numItermax=20000, stopThr=1e-13)
        E = numbaot.sinkhorn_epsilon_scaling(a, b, M, reg, numInnerItermax=2000, stopThr=1e-13)
        E_pot = ot.bregman.sinkhorn_epsilon_scaling(a, b, M, reg)
    for plan in (G, E):
        assert np.all(np.isfinite(plan))
        np.testing.assert_allclose(plan, ref, rtol=0, atol=1e-9)
    assert not np.all(np.isfinite(E_pot))
    _assert_unchanged(orig, (a, b, M))


@pytest.mark.parametrize("which", ["a", "b", "ab"])
def test_zero_weights_with_absorption(abM, which):
    """Zero weights at a small reg (the scalings are absorbed): numbaot
    leaves those bins out of the iteration (finite plan, zero rows /
    columns, log-scalings -inf there); POT turns them into NaN (0 / 0)."""
    a, b, M = abM
    if "a" in which:
        a = a.copy()
        a[1] = 0.0
        a /= a.sum()
    if "b" in which:
        b = b.copy()
        b[3] = 0.0
        b /= b.sum()
    orig = _copies(a, b, M)
    reg = 0.01
    ref = _pot_log_plan(a, b, M, reg)
    G, log = numbaot.sinkhorn_stabilized(a, b, M, reg, log=True, numItermax=20000,
                                         stopThr=1e-13)
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G, ref, rtol=0, atol=1e-9)
    assert np.all(G[a == 0] == 0) and np.all(G[:, b == 0] == 0)
    assert np.all(np.isneginf(log["logu"][a == 0])) and np.all(np.isfinite(log["logu"][a > 0]))
    assert np.all(np.isneginf(log["logv"][b == 0])) and np.all(np.isfinite(log["logv"][b > 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        E = numbaot.sinkhorn_epsilon_scaling(a, b, M, reg, numInnerItermax=2000, stopThr=1e-13)
    np.testing.assert_allclose(E, ref, rtol=0, atol=1e-9)
    # the log feeds back as a warm start (-inf where the weight is 0)
    G2 = numbaot.sinkhorn_stabilized(a, b, M, reg, warmstart=log["warmstart"])
    np.testing.assert_allclose(G2, ref, rtol=0, atol=1e-9)
    # POT: 0 / 0 at the first absorption; it warns and returns NaN or the
    # iterate before it, far from the solution
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        G_pot = ot.bregman.sinkhorn_stabilized(a, b, M, reg, numItermax=20000, stopThr=1e-13)
    assert any("Numerical errors" in str(x.message) for x in w)
    assert np.any(np.isnan(G_pot)) or np.max(np.abs(G_pot - ref)) > 1e-4
    _assert_unchanged(orig, (a, b, M))


@pytest.mark.parametrize("shift", [40.0, 1e4])
def test_kernel_rows_underflowing(abM, shift):
    """exp(-M / reg) underflows on a whole row and a whole column (M shifted
    there by a constant, which leaves the plan unchanged): numbaot re-bases
    them on the soft c-transform and returns the plan of the unshifted
    problem; POT returns NaN ("Numerical errors")."""
    a, b, M0 = abM
    M = M0.copy()
    M[2] += shift
    M[:, 4] += 2 * shift
    reg = 0.05
    assert np.all(np.exp(-M[2] / reg) == 0) and np.all(np.exp(-M[:, 4] / reg) == 0)
    ref = _pot_log_plan(a, b, M0, reg)
    G = numbaot.sinkhorn_stabilized(a, b, M, reg, numItermax=20000, stopThr=1e-13)
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G, ref, rtol=0, atol=1e-9)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        G_pot = ot.bregman.sinkhorn_stabilized(a, b, M, reg)
    assert not np.all(np.isfinite(G_pot))
    assert any("Numerical errors" in str(x.message) for x in w)


# --------------------------------------------------------------------------
# 5. numInnerItermax = 0
# --------------------------------------------------------------------------
def test_num_inner_itermax_zero_is_refused(abM):
    a, b, M = abM
    orig = _copies(a, b, M)
    with pytest.raises(ValueError, match="numInnerItermax must be an integer >= 1"):
        numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.1, numInnerItermax=0)
    with pytest.raises(ValueError, match="numInnerItermax"):
        numbaot.sinkhorn(a, b, M, 0.1, method="sinkhorn_epsilon_scaling", numInnerItermax=0)
    # POT: its inner stabilized call runs no iteration and reads an unset variable
    with pytest.raises(UnboundLocalError):
        ot.bregman.sinkhorn_epsilon_scaling(a, b, M, 0.1, numInnerItermax=0)
    _assert_unchanged(orig, (a, b, M))


# --------------------------------------------------------------------------
# 6. |M| / reg overflowing in the gradient call
# --------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_value_and_grad_cost_scale_overflow(abM, method):
    a, b, _ = abM
    M = np.full((6, 5), 1e308)
    orig = _copies(a, b, M)
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        sinkhorn2_value_and_grad(a, b, M, 0.1, method=method)
    # the dense log solver raises the same error
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        numbaot.sinkhorn_log(a, b, M, 0.1)
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        numbaot.sinkhorn_stabilized(a, b, M, 0.1)
    # POT's log solver returns a plan without a finite entry
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G_pot = ot.bregman.sinkhorn_log(a, b, M, 0.1)
    assert not np.any(np.isfinite(G_pot))
    _assert_unchanged(orig, (a, b, M))


# --------------------------------------------------------------------------
# 8. non-finite results are never silent
# --------------------------------------------------------------------------
def test_warm_start_must_be_finite_at_positive_weights(abM):
    a, b, M = abM
    alpha, beta = np.zeros(6), np.zeros(5)
    alpha[2] = np.nan
    with pytest.raises(ValueError, match=r"warmstart\[0\] must be finite"):
        numbaot.sinkhorn_stabilized(a, b, M, 0.1, warmstart=(alpha, beta))
    with pytest.raises(ValueError, match=r"warmstart\[0\] must be finite"):
        numbaot.sinkhorn_epsilon_scaling(a, b, M, 0.1, warmstart=(alpha, beta))
    with pytest.raises(ValueError, match="shape"):
        numbaot.sinkhorn_stabilized(a, b, M, 0.1, warmstart=(np.zeros(5), beta))


def test_huge_warm_start_potentials_recover(abM):
    """Potentials that make the kernel overflow (exp(1e4)) are re-based as
    vanishing ones are: the plan is finite and POT's log-domain plan."""
    a, b, M = abM
    alpha, beta = np.full(6, 100.0), np.full(5, 900.0)
    G = numbaot.sinkhorn_stabilized(a, b, M, 0.1, warmstart=(alpha, beta))
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G, _pot_log_plan(a, b, M, 0.1), rtol=0, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G_pot = ot.bregman.sinkhorn_stabilized(a, b, M, 0.1, warmstart=(alpha, beta))
    assert not np.all(np.isfinite(G_pot))
