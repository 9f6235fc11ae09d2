"""Adversarial inputs of the balanced solvers (issue 22): each test shows the
decided behaviour of numbaot, POT 0.9.7's behaviour beside it where they
differ (the reason for the decision), and that the caller's arrays are left
unchanged.

Setup of the issue: a (6,), b (5,) random histograms summing to 1, M (6, 5)
uniform in [0, 1).
"""
import warnings

import numpy as np
import pytest

import numbaot
import numbaot.gradients
from _helpers import METHODS, METHODS2, assert_raises_naming, ot

from numbaot import _checks




class Unchanged:
    """Snapshot of arrays (copies); ``check()`` asserts they are bit-identical."""

    def __init__(self, *arrays):
        self.arrays = [x for x in arrays if isinstance(x, np.ndarray)]
        self.copies = [x.copy() for x in self.arrays]

    def check(self):
        for x, c in zip(self.arrays, self.copies):
            np.testing.assert_array_equal(x, c)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ---------------------------------------------------------------------------
# 1. max|M| / reg beyond floating point
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_cost_scale_overflow_is_refused(abM, method):
    a, b, _ = abM
    M = np.full((6, 5), 1e308)
    keep = Unchanged(a, b, M)
    info = assert_raises_naming(ValueError, "M", numbaot.sinkhorn, a, b, M, 0.1, method=method)
    assert "reg" in str(info.value)
    keep.check()


@pytest.mark.parametrize("method", METHODS2)
def test_cost_scale_overflow_sinkhorn2(abM, method):
    a, b, _ = abM
    M = np.full((6, 5), 1e308)
    info = assert_raises_naming(ValueError, "M", numbaot.sinkhorn2, a, b, M, 0.1, method=method)
    assert "reg" in str(info.value)


def test_cost_scale_pot_returns_nan(abM):
    """The decision's reason: POT returns NaN without a word."""
    a, b, _ = abM
    M = np.full((6, 5), 1e308)
    assert np.isnan(_quiet(ot.sinkhorn2, a, b, M, 0.1, method="sinkhorn_log"))


def test_cost_scale_gradients(abM):
    a, b, _ = abM
    M = np.full((6, 5), 1e308)
    assert_raises_naming(ValueError, "M", numbaot.gradients.sinkhorn2_value_and_grad,
                         a, b, M, 0.1)


def test_cost_scale_limit_is_2_pow_52():
    """max|M| / reg = 2**52 passes, beyond it is refused; negative costs count
    by their magnitude."""
    assert _checks.check_cost_scale(np.array([[0.0, 2.0 ** 52]]), 1.0) == 2.0 ** 52
    assert _checks.check_cost_scale(np.array([[-(2.0 ** 51)]]), 0.5) == 2.0 ** 52
    for M in (np.array([[2.0 ** 53]]), np.array([[-(2.0 ** 53)]])):
        with pytest.raises(ValueError, match="reg"):
            _checks.check_cost_scale(M, 1.0)
    with pytest.raises(ValueError):  # absmax / reg overflows to inf
        _checks.check_cost_scale(np.array([[1e300]]), 1e-10)


def test_large_but_representable_costs_still_solve(abM):
    """M / reg = 1e4 (exp(-M/reg) underflows) stays accepted: the log-domain
    result is POT's."""
    a, b, M = abM
    res = numbaot.sinkhorn2(a, b, 1e3 * M, 0.1, method="sinkhorn_log", numItermax=50)
    ref = ot.sinkhorn2(a, b, 1e3 * M, 0.1, method="sinkhorn_log", numItermax=50)
    np.testing.assert_allclose(res, ref, rtol=1e-7)


# ---------------------------------------------------------------------------
# 2. / 10. warm starts: one rule for every solver that takes one
# ---------------------------------------------------------------------------
def _solver_calls(a, b, M):
    """(name, fn(warmstart)) for every public solver with a ``warmstart``."""
    rng = np.random.default_rng(1)
    Xs, Xt = rng.random((6, 2)), rng.random((5, 2))
    calls = [(f"sinkhorn-{m}", lambda w, m=m: numbaot.sinkhorn(a, b, M, 0.5, method=m,
                                                               warmstart=w))
             for m in METHODS]
    calls += [(f"sinkhorn2-{m}", lambda w, m=m: numbaot.sinkhorn2(a, b, M, 0.5, method=m,
                                                                  warmstart=w))
              for m in METHODS2]
    calls += [(f"unbalanced-{m}", lambda w, m=m: numbaot.sinkhorn_unbalanced(
        a, b, M, 0.5, 1.0, method=m, warmstart=w))
              for m in ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_translation_invariant")]
    calls += [
        ("unbalanced2", lambda w: numbaot.sinkhorn_unbalanced2(a, b, M, 0.5, 1.0, warmstart=w)),
        ("empirical", lambda w: numbaot.bregman.empirical_sinkhorn2(Xs, Xt, 0.5, warmstart=w)),
        ("empirical-lazy", lambda w: numbaot.bregman.empirical_sinkhorn2(
            Xs, Xt, 0.5, isLazy=True, warmstart=w)),
        ("divergence", lambda w: numbaot.bregman.empirical_sinkhorn_divergence(
            Xs, Xt, 0.5, warmstart=w)),
        ("value_and_grad", lambda w: numbaot.gradients.sinkhorn2_value_and_grad(
            a, b, M, 0.5, warmstart=w)),
        ("value_and_grad-log", lambda w: numbaot.gradients.sinkhorn2_value_and_grad(
            a, b, M, 0.5, method="sinkhorn_log", warmstart=w)),
        ("cloud_value_and_grad", lambda w: numbaot.gradients.empirical_sinkhorn2_value_and_grad(
            Xs, Xt, 0.5, warmstart=w)),
    ]
    return calls


_BAD_WARMSTARTS = {
    "-inf at a positive weight": (ValueError, lambda: (np.full(6, -np.inf), np.zeros(5))),
    "nan": (ValueError, lambda: (np.zeros(6), np.full(5, np.nan))),
    "+inf": (ValueError, lambda: (np.zeros(6), np.array([0, 0, np.inf, 0, 0.0]))),
    "three arrays": (ValueError, lambda: (np.zeros(6), np.zeros(5), np.zeros(5))),
    "one array": (ValueError, lambda: (np.zeros(6),)),
    "not a pair": (TypeError, lambda: np.zeros((2, 6))),
    "wrong shape": (ValueError, lambda: (np.zeros(5), np.zeros(6))),
    "complex": (TypeError, lambda: (np.zeros(6, complex), np.zeros(5))),
}


@pytest.mark.parametrize("bad", sorted(_BAD_WARMSTARTS))
def test_bad_warmstart_is_refused_by_every_solver(abM, bad):
    a, b, M = abM
    exc, make = _BAD_WARMSTARTS[bad]
    for name, call in _solver_calls(a, b, M):
        ws = make()
        keep = Unchanged(a, b, M, *(ws if isinstance(ws, tuple) else (ws,)))
        with pytest.raises(exc) as info:
            _quiet(call, ws)
        assert "warmstart" in str(info.value), (name, str(info.value))
        assert "unpack" not in str(info.value), name
        keep.check()


def test_bad_warmstart_pot_returns_nan(abM):
    """The decision's reason: POT returns NaN for a -inf or NaN warm start."""
    a, b, M = abM
    ws = (np.full(6, -np.inf), np.zeros(5))
    assert np.isnan(_quiet(ot.sinkhorn2, a, b, M, 0.1, method="sinkhorn_log", warmstart=ws))
    ws = (np.full(6, np.nan), np.zeros(5))
    assert np.isnan(_quiet(ot.sinkhorn2, a, b, M, 0.1, warmstart=ws))


@pytest.mark.parametrize("method, key_u, key_v", [
    ("sinkhorn_log", "log_u", "log_v"),
    ("sinkhorn_stabilized", "alpha", "beta"),
])
def test_warmstart_minus_inf_at_zero_weight_is_accepted(abM, method, key_u, key_v):
    """A log fed back: -inf where the weight is 0 is what the log holds there."""
    a, b, M = abM
    a = a.copy()
    a[2] = 0.0
    a /= a.sum()
    G0, log0 = numbaot.sinkhorn(a, b, M, 0.5, method=method, log=True, stopThr=1e-12,
                                numItermax=5000)
    assert np.isneginf(log0[key_u][2])
    G = numbaot.sinkhorn(a, b, M, 0.5, method=method, warmstart=(log0[key_u], log0[key_v]),
                         stopThr=1e-12, numItermax=5000)
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G, G0, rtol=1e-7, atol=1e-12)


def test_log_domain_batch_warmstart_conventions(abM):
    """2-D b: POT's list of per-histogram pairs, or one pair of (dim, n_hists)
    arrays; an empty list is refused with a clear message."""
    a, b, M = abM
    B = np.stack([b, b[::-1]], axis=1)
    rng = np.random.default_rng(3)
    pairs = [(0.1 * rng.normal(size=6), 0.1 * rng.normal(size=5)) for _ in range(2)]
    ref = ot.sinkhorn2(a, B, M, 0.5, method="sinkhorn_log", warmstart=pairs)
    res1 = numbaot.sinkhorn2(a, B, M, 0.5, method="sinkhorn_log", warmstart=pairs)
    stacked = (np.stack([p[0] for p in pairs], 1), np.stack([p[1] for p in pairs], 1))
    res2 = numbaot.sinkhorn2(a, B, M, 0.5, method="sinkhorn_log", warmstart=stacked)
    np.testing.assert_allclose(res1, ref, rtol=1e-7)
    np.testing.assert_array_equal(res1, res2)
    with pytest.raises(ValueError, match="warmstart"):
        numbaot.sinkhorn2(a, B, M, 0.5, method="sinkhorn_log", warmstart=[])


def test_value_and_grad_empty_batch_message(abM):
    """``b`` of shape (m, 0) used to leak NumPy's "need at least one array to stack"."""
    rng = np.random.default_rng(4)
    Xs, Xt = rng.random((6, 2)), rng.random((5, 2))
    with pytest.raises(ValueError) as info:
        numbaot.gradients.empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.5, b=np.zeros((5, 0)))
    assert "stack" not in str(info.value) and "b" in str(info.value)


# ---------------------------------------------------------------------------
# 3. balanced problems need sum a = sum b
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_unequal_masses_are_refused(abM, method):
    a, b, M = abM
    b2 = 2 * b
    keep = Unchanged(a, b2, M)
    info = assert_raises_naming(ValueError, "a", numbaot.sinkhorn, a, b2, M, 0.5, method=method)
    assert "b" in str(info.value) and "mass" in str(info.value)
    keep.check()


@pytest.mark.parametrize("method", METHODS2)
def test_unequal_masses_sinkhorn2_and_pot(abM, method):
    """POT returns a number, with no warning from sinkhorn2 (warn=False), for
    a problem that has no balanced plan."""
    a, b, M = abM
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(_quiet(ot.sinkhorn2, a, 2 * b, M, 0.5, method=method))
    assert_raises_naming(ValueError, "b", numbaot.sinkhorn2, a, 2 * b, M, 0.5, method=method)


def test_mass_tolerance(abM):
    """Rounding-level differences pass: 1e-7 relative in float64, float32
    histograms normalised in float32 (10**5 bins), uniform ``[]`` against a
    normalised b; 1e-5 relative is refused."""
    a, b, M = abM
    numbaot.sinkhorn2(a, b * (1 + 1e-7), M, 0.5)
    numbaot.sinkhorn2([], b, M, 0.5)
    with pytest.raises(ValueError, match="mass"):
        numbaot.sinkhorn2(a, b * (1 + 1e-5), M, 0.5)
    rng = np.random.default_rng(5)
    x = rng.random(10 ** 5).astype(np.float32)
    y = rng.random(3).astype(np.float32)
    x32, y32 = x / x.sum(), y / y.sum()
    M32 = rng.random((10 ** 5, 3)).astype(np.float32)
    numbaot.sinkhorn2(x32, y32, M32, 0.5, numItermax=1)


def test_paired_batch_masses_are_checked_per_problem(abM):
    a, b, M = abM
    A = np.stack([a, a], axis=1)
    B = np.stack([b, 3 * b], axis=1)
    with pytest.raises(ValueError, match="histogram 1"):
        numbaot.sinkhorn2(A, B, M, 0.5)
    A2 = np.stack([a, 3 * a], axis=1)
    numbaot.sinkhorn2(A2, B, M, 0.5)  # each problem balanced: accepted


# ---------------------------------------------------------------------------
# 4. / 5. stopThr and iteration counts
# ---------------------------------------------------------------------------
_STOP_CALLS = {
    "sinkhorn": lambda a, b, M, s: numbaot.sinkhorn(a, b, M, 0.5, stopThr=s),
    "sinkhorn_log": lambda a, b, M, s: numbaot.sinkhorn(a, b, M, 0.5, method="sinkhorn_log",
                                                        stopThr=s),
    "unbalanced": lambda a, b, M, s: numbaot.sinkhorn_unbalanced(a, b, M, 0.5, 1.0, stopThr=s),
    "lazy": lambda a, b, M, s: numbaot.bregman.empirical_sinkhorn2(
        M, M[:5], 0.5, isLazy=True, stopThr=s),
}


@pytest.mark.parametrize("stop", [np.nan, -1e-9, -np.inf])
@pytest.mark.parametrize("call", sorted(_STOP_CALLS))
def test_bad_stopThr(abM, call, stop):
    a, b, M = abM
    assert_raises_naming(ValueError, "stopThr", _STOP_CALLS[call], a, b, M, stop)


def test_stopThr_inf_stops_at_first_check(abM):
    a, b, M = abM
    _, log = _quiet(numbaot.sinkhorn, a, b, M, 0.5, stopThr=np.inf, log=True)
    _, log_ref = _quiet(ot.sinkhorn, a, b, M, 0.5, stopThr=np.inf, log=True)
    assert log["niter"] == log_ref["niter"] == 0


@pytest.mark.parametrize("n", [2 ** 63, 2 ** 64 + 5, np.uint64(2 ** 63), 2 ** 62 + 1])
def test_huge_iteration_counts_are_refused(abM, n):
    """Validated as Python ints: the same ValueError every time, whatever ran
    before (they used to reach the kernels as garbage, OverflowError or
    SystemError)."""
    a, b, M = abM
    for _ in range(2):
        for method in ("sinkhorn", "sinkhorn_log"):
            assert_raises_naming(ValueError, "numItermax", numbaot.sinkhorn, a, b, M, 0.5,
                                 method=method, numItermax=n)
        assert_raises_naming(ValueError, "numIterMax", numbaot.bregman.empirical_sinkhorn2,
                             M, M[:5], 0.5, isLazy=True, numIterMax=n)


@pytest.mark.parametrize("n", [True, np.bool_(False), 3.0])
def test_iteration_count_type(abM, n):
    a, b, M = abM
    assert_raises_naming(TypeError, "numItermax", numbaot.sinkhorn, a, b, M, 0.5, numItermax=n)


def test_numpy_integer_iteration_counts(abM):
    a, b, M = abM
    G = _quiet(numbaot.sinkhorn, a, b, M, 0.5, numItermax=np.int64(30))
    G_ref = _quiet(numbaot.sinkhorn, a, b, M, 0.5, numItermax=30)
    np.testing.assert_array_equal(G, G_ref)
    _quiet(numbaot.sinkhorn, a, b, M, 0.5, numItermax=2 ** 62, stopThr=1e-3)


# ---------------------------------------------------------------------------
# 6. a single value is a NumPy scalar, as POT's
# ---------------------------------------------------------------------------
_SCALAR_CALLS = {
    "sinkhorn2": lambda m, a, b, M, X, Y: m.sinkhorn2(a, b, M, 0.5),
    "sinkhorn2-log": lambda m, a, b, M, X, Y: m.sinkhorn2(a, b, M, 0.5, method="sinkhorn_log"),
    "sinkhorn2-stabilized": lambda m, a, b, M, X, Y: m.sinkhorn2(
        a, b, M, 0.5, method="sinkhorn_stabilized"),
    "sinkhorn_unbalanced2": lambda m, a, b, M, X, Y: m.sinkhorn_unbalanced2(a, b, M, 0.5, 1.0),
    "sinkhorn_unbalanced2-stabilized": lambda m, a, b, M, X, Y: m.sinkhorn_unbalanced2(
        a, b, M, 0.5, 1.0, method="sinkhorn_stabilized"),
    "empirical_sinkhorn2": lambda m, a, b, M, X, Y: m.bregman.empirical_sinkhorn2(X, Y, 0.5),
    "empirical_sinkhorn2-lazy": lambda m, a, b, M, X, Y: m.bregman.empirical_sinkhorn2(
        X, Y, 0.5, isLazy=True),
    "empirical_sinkhorn_divergence": lambda m, a, b, M, X, Y:
        m.bregman.empirical_sinkhorn_divergence(X, Y, 0.5),
    "empirical_sinkhorn_divergence-lazy": lambda m, a, b, M, X, Y:
        m.bregman.empirical_sinkhorn_divergence(X, Y, 0.5, isLazy=True),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("call", sorted(_SCALAR_CALLS))
def test_scalar_results_have_pots_type(abM, call, dtype):
    a, b, M = (x.astype(dtype) for x in abM)
    rng = np.random.default_rng(6)
    X, Y = rng.random((6, 2)).astype(dtype), rng.random((5, 2)).astype(dtype)
    ref = _quiet(_SCALAR_CALLS[call], ot, a, b, M, X, Y)
    res = _quiet(_SCALAR_CALLS[call], numbaot, a, b, M, X, Y)
    assert type(res) is type(ref), (type(res), type(ref))


def test_value_and_grad_values_are_numpy_scalars(abM):
    """No POT counterpart: the value of one problem is a NumPy float64, as
    ``ot.sinkhorn2``'s."""
    a, b, M = abM
    rng = np.random.default_rng(7)
    for method in ("sinkhorn", "sinkhorn_log"):
        v, _ = numbaot.gradients.sinkhorn2_value_and_grad(a, b, M, 0.5, method=method)
        assert type(v) is np.float64
    v, _ = numbaot.gradients.empirical_sinkhorn2_value_and_grad(rng.random((6, 2)),
                                                                rng.random((5, 2)), 0.5)
    assert type(v) is np.float64


# ---------------------------------------------------------------------------
# 7. narrow dtypes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int64])
def test_integer_inputs_give_float64_as_pot(abM, dtype):
    a, b, M = abM
    ai = np.array([1, 2, 3, 1, 2, 1], dtype=dtype)
    bi = np.array([2, 2, 2, 2, 2], dtype=dtype)
    Mi = (10 * M).astype(dtype)
    keep = Unchanged(ai, bi, Mi)
    G = numbaot.sinkhorn(ai, bi, Mi, 1.0)
    G_ref = _quiet(ot.sinkhorn, ai, bi, Mi, 1.0)
    assert G.dtype == G_ref.dtype == np.float64
    np.testing.assert_allclose(G, G_ref, rtol=1e-7, atol=1e-10)
    assert type(numbaot.sinkhorn2(ai, bi, Mi, 1.0)) is np.float64
    keep.check()


def test_float16_inputs_give_float32(abM):
    """POT returns float16 (its arithmetic stays in the input dtype); numbaot
    has no float16 kernels and returns the nearest, float32 (documented)."""
    a, b, M = (x.astype(np.float16) for x in abM)
    b = (b / b.sum(dtype=np.float32) * a.sum(dtype=np.float32)).astype(np.float16)
    assert _quiet(ot.sinkhorn, a, b, M, 1.0).dtype == np.float16
    G = numbaot.sinkhorn(a, b, M, 1.0)
    assert G.dtype == np.float32
    G_ref = ot.sinkhorn(*(x.astype(np.float64) for x in (a, b, M)), 1.0)
    np.testing.assert_allclose(G, G_ref, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------
# 8. masked arrays
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["a", "b", "M"])
def test_masked_arrays_are_refused(abM, which):
    a, b, M = abM
    args = dict(a=a, b=b, M=M)
    args[which] = np.ma.masked_array(args[which], mask=np.zeros(args[which].shape, bool))
    assert_raises_naming(TypeError, which, numbaot.sinkhorn2, args["a"], args["b"], args["M"],
                         0.5)


# ---------------------------------------------------------------------------
# 9. read-only inputs: same result, no new compilation
# ---------------------------------------------------------------------------
def _signature_count(*modules):
    from numba.core.registry import CPUDispatcher

    return sum(len(f.signatures) for mod in modules for f in vars(mod).values()
               if isinstance(f, CPUDispatcher))


@pytest.mark.parametrize("method", METHODS)
def test_read_only_M(abM, method):
    from numbaot.cpu import sinkhorn as cpu_sinkhorn

    a, b, M = abM
    G = _quiet(numbaot.sinkhorn, a, b, M, 0.5, method=method)
    before = _signature_count(cpu_sinkhorn)
    for frozen in (M.copy(), np.broadcast_to(M, M.shape)):  # own memory, and a view
        if frozen.flags.writeable:
            frozen.flags.writeable = False
        a_ro, b_ro = a.copy(), b.copy()
        a_ro.flags.writeable = b_ro.flags.writeable = False
        G_ro = _quiet(numbaot.sinkhorn, a_ro, b_ro, frozen, 0.5, method=method)
        np.testing.assert_array_equal(G_ro, G)
        assert not frozen.flags.writeable
    assert _signature_count(cpu_sinkhorn) == before


# ---------------------------------------------------------------------------
# 11. greenkhorn on an underflowing Gibbs kernel
# ---------------------------------------------------------------------------
def test_greenkhorn_kernel_underflow(abM):
    a, b, M = abM
    M = M.copy()
    M[1] += 1e4  # the whole row 1: exp(-M/reg) = 0 in float64
    keep = Unchanged(a, b, M)
    G_ref = _quiet(ot.bregman.greenkhorn, a, b, M, 0.1)
    assert np.isnan(G_ref).any()  # POT: a NaN plan, only "did not converge"
    with pytest.raises(ValueError, match="sinkhorn_log") as info:
        numbaot.greenkhorn(a, b, M, 0.1)
    assert "row 1" in str(info.value) and "underflow" in str(info.value)
    keep.check()
    # the log domain solves it (the row is shifted away: same plan as M - 1e4 on row 1)
    G = numbaot.sinkhorn(a, b, M, 0.1, method="sinkhorn_log", numItermax=5000, stopThr=1e-12)
    M2 = M.copy()
    M2[1] -= 1e4
    G2 = numbaot.sinkhorn(a, b, M2, 0.1, method="sinkhorn_log", numItermax=5000, stopThr=1e-12)
    np.testing.assert_allclose(G, G2, rtol=1e-6, atol=1e-12)


def test_greenkhorn_subnormal_kernel_row_warns(abM):
    """A row of exp(-M/reg) that is subnormal but not 0: the scaling
    u_i = a_i / (K v)_i overflows and the plan holds inf/NaN, as in POT;
    numbaot says so, and why, instead of only "did not converge"."""
    a, b, M = abM
    M = M.copy()
    M[1] = 74.0  # reg = 0.1: K[1, :] = exp(-740) = 4e-322 (subnormal, not 0)
    G_ref = _quiet(ot.bregman.greenkhorn, a, b, M, 0.1)
    assert not np.all(np.isfinite(G_ref))
    with warnings.catch_warnings(record=True) as rec, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        G = numbaot.greenkhorn(a, b, M, 0.1)
    assert not np.all(np.isfinite(G))
    assert any("sinkhorn_log" in str(w.message) and "underflow" in str(w.message) for w in rec)
