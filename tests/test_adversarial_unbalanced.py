"""Adversarial inputs of the unbalanced solvers, the barycenters and the
point-cloud solvers (issue 22): each test pins numbaot's decided behaviour
(a ValueError naming the argument, or a result with a warning that says the
cause), shows POT 0.9.7's behaviour beside it where they differ, and checks
that the caller's arrays are left unchanged."""
import warnings

import numpy as np
import ot
import pytest

import numbaot
from numbaot.bregman import convolutional_barycenter2d, empirical_sinkhorn, empirical_sinkhorn2
from numbaot.gradients import empirical_sinkhorn2_value_and_grad
from numbaot.unbalanced import barycenter_unbalanced, sinkhorn_unbalanced




@pytest.fixture
def hists():
    """Three normalised histograms on 5 bins and a cost between the bins."""
    rng = np.random.default_rng(1)
    H = rng.random((5, 3))
    H /= H.sum(axis=0)
    x = np.arange(5.0)[:, None] / 4
    return H, (x - x.T) ** 2


def _frozen(*arrays):
    return [np.array(x, copy=True) for x in arrays]


def _unchanged(before, *arrays):
    for x0, x in zip(before, arrays):
        np.testing.assert_array_equal(x0, x)


def _record(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(x.message) for x in w if not issubclass(x.category, RuntimeWarning)]


# ---------------------------------------------------------------------------
# 1. a reference measure c with no mass on a row / column that carries mass
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "sinkhorn_stabilized",
                                    "sinkhorn_translation_invariant"])
def test_zero_reference_measure_is_refused(abM, method):
    a, b, M = abM
    c = np.zeros((6, 5))
    before = _frozen(a, b, M, c)
    with pytest.raises(ValueError, match=r"c \(the reference measure\) has an all-zero row 0"):
        numbaot.sinkhorn_unbalanced2(a, b, M, 0.1, 1.0, method=method, c=c)
    _unchanged(before, a, b, M, c)
    if method != "sinkhorn_log":  # POT: "Numerical errors", cost 0 and a NaN total cost
        (cost, lg), msgs = _record(ot.unbalanced.sinkhorn_unbalanced2, a, b, M, 0.1, 1.0,
                                   method=method, c=c, log=True)
        assert cost == 0.0 and np.isnan(lg["total_cost"])
        assert any("Numerical errors" in m for m in msgs)


def test_zero_column_of_reference_measure_is_refused(abM):
    a, b, M = abM
    c = np.ones((6, 5))
    c[:, 3] = 0.0
    with pytest.raises(ValueError, match=r"all-zero column 3 where b\[3\] > 0"):
        numbaot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method="sinkhorn_log", c=c)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_zeros_of_reference_measure_force_zeros_of_the_plan(abM, method):
    """Isolated zeros of c are allowed (as POT): the plan is 0 there."""
    a, b, M = abM
    c = np.ones((6, 5))
    c[0, 0] = c[3, 2] = 0.0
    G = numbaot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method=method, c=c)
    Gp = ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, c=c)
    assert G[0, 0] == 0.0 and G[3, 2] == 0.0
    np.testing.assert_allclose(G, Gp, rtol=1e-4, atol=1e-12)


def test_zero_row_of_reference_measure_where_a_vanishes_is_allowed(abM):
    a, b, M = abM
    a = a.copy()
    a[1] = 0.0
    c = np.ones((6, 5))
    c[1] = 0.0
    G = numbaot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method="sinkhorn_log", c=c)
    assert np.all(np.isfinite(G)) and np.all(G[1] == 0.0)


# ---------------------------------------------------------------------------
# 2. barycentric weights must sum to 1
# ---------------------------------------------------------------------------
_BALANCED = [
    ("sinkhorn", lambda H, M, **kw: numbaot.barycenter(H, M, 0.1, method="sinkhorn", **kw)),
    ("sinkhorn_log", lambda H, M, **kw: numbaot.barycenter(H, M, 0.1, method="sinkhorn_log", **kw)),
    ("sinkhorn_stabilized",
     lambda H, M, **kw: numbaot.barycenter(H, M, 0.1, method="sinkhorn_stabilized", **kw)),
]
_POT = {"sinkhorn": lambda H, M, **kw: ot.barycenter(H, M, 0.1, method="sinkhorn", **kw),
        "sinkhorn_log": lambda H, M, **kw: ot.barycenter(H, M, 0.1, method="sinkhorn_log", **kw)}


@pytest.mark.parametrize("name,bary", _BALANCED)
@pytest.mark.parametrize("weights", [np.zeros(3), np.ones(3), np.array([0.5, 0.3, 0.1])])
def test_barycenter_weights_must_sum_to_one(hists, name, bary, weights):
    H, M = hists
    before = _frozen(H, M, weights)
    with pytest.raises(ValueError, match="weights must sum to 1"):
        bary(H, M, weights=weights)
    _unchanged(before, H, M, weights)


def test_pot_barycenter_with_unnormalised_weights():
    """POT does not normalise: zero weights give ones, weights summing to 3
    NaN (multiplicative) or inf (log domain)."""
    rng = np.random.default_rng(1)
    H = rng.random((5, 3))
    H /= H.sum(axis=0)
    M = rng.random((5, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(_POT["sinkhorn"](H, M, weights=np.zeros(3)), np.ones(5))
        assert np.all(np.isnan(_POT["sinkhorn"](H, M, weights=np.ones(3))))
        assert np.all(np.isinf(_POT["sinkhorn_log"](H, M, weights=np.ones(3))))


def test_barycenter_weights_within_tolerance_are_accepted(hists):
    H, M = hists
    w = np.full(3, 1 / 3, dtype=np.float32)  # sums to 1 within float32 rounding
    q = numbaot.barycenter(H, M, 0.1, weights=w)
    qp = ot.barycenter(H, M, 0.1, weights=w.astype(np.float64))
    np.testing.assert_allclose(q, qp, rtol=1e-5)


@pytest.mark.parametrize("weights", [np.zeros(3), np.ones(3)])
def test_unbalanced_barycenter_weights_must_sum_to_one(hists, weights):
    H, M = hists
    for method in ("sinkhorn", "sinkhorn_stabilized"):
        with pytest.raises(ValueError, match="weights must sum to 1"):
            barycenter_unbalanced(H, M, 0.1, 1.0, method=method, weights=weights)
    # POT: zero weights end in "Numerical errors" and a zero barycenter
    q, msgs = _record(ot.unbalanced.barycenter_unbalanced, H, M, 0.1, 1.0,
                      weights=np.zeros(3))
    if weights.sum() == 0:
        assert np.all(q == 0) and any("Numerical errors" in m for m in msgs)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_convolutional_barycenter_weights_must_sum_to_one(method):
    A = np.zeros((2, 3, 3))
    A[0, 0, 0] = A[1, 2, 2] = 1.0
    with pytest.raises(ValueError, match="weights must sum to 1"):
        convolutional_barycenter2d(A, 0.1, weights=np.ones(2), method=method)
    # POT: weights summing to 2 give a barycenter of mass far from 1
    bp = ot.bregman.convolutional_barycenter2d(A, 0.1, weights=np.ones(2))
    assert bp.sum() > 2


# ---------------------------------------------------------------------------
# 3. the histograms of a barycenter: zero mass, unequal masses, integer counts
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,bary", _BALANCED)
def test_barycenter_zero_mass_histogram(hists, name, bary):
    H, M = hists
    H = H.copy()
    H[:, 1] = 0.0
    before = _frozen(H)
    with pytest.raises(ValueError, match=r"A has a histogram of zero mass, A\[:, 1\]"):
        bary(H, M)
    _unchanged(before, H)
    if name == "sinkhorn":  # POT: a NaN barycenter
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.all(np.isnan(_POT[name](H, M)))


@pytest.mark.parametrize("name,bary", _BALANCED)
def test_barycenter_unequal_masses(hists, name, bary):
    H, M = hists
    H = H.copy()
    H[:, 1] *= 2
    with pytest.raises(ValueError, match=r"same total mass .* sum A\[:, [02]\] = .* sum A\[:, 1\]"):
        bary(H, M)
    if name == "sinkhorn":  # POT: NaN
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert np.all(np.isnan(_POT[name](H, M)))


def test_barycenter_integer_counts(hists):
    H, M = hists
    counts = np.array([[3, 1, 0], [1, 2, 4], [0, 1, 0], [4, 2, 3], [2, 4, 3]])  # sums 10
    q = numbaot.barycenter(counts, M, 0.1, method="sinkhorn_log")
    qp = ot.barycenter(counts.astype(np.float64), M, 0.1, method="sinkhorn_log")
    np.testing.assert_allclose(q, qp, rtol=1e-6)
    assert abs(q.sum() - 10) < 1e-2
    # POT's log domain on the integer array itself is wrong (not a barycenter of mass 10)
    assert abs(ot.barycenter(counts, M, 0.1, method="sinkhorn_log").sum() - 10) > 1
    unequal = counts.copy()
    unequal[0, 0] += 5
    with pytest.raises(ValueError, match="A holds integer counts: divide each histogram"):
        numbaot.barycenter(unequal, M, 0.1)


def test_convolutional_barycenter_zero_and_unequal_images():
    A = np.zeros((2, 3, 3))
    A[0, 0, 0] = 1.0
    with pytest.raises(ValueError, match=r"zero mass, A\[1\]"):
        convolutional_barycenter2d(A, 0.1)
    A[1, 2, 2] = 3.0
    with pytest.raises(ValueError, match=r"same total mass"):
        convolutional_barycenter2d(A, 0.1, method="sinkhorn_log")


def test_unbalanced_barycenter_zero_mass_histogram(hists):
    H, M = hists
    H = H.copy()
    H[:, 2] = 0.0
    with pytest.raises(ValueError, match=r"zero mass, A\[:, 2\]"):
        barycenter_unbalanced(H, M, 0.1, 1.0)
    q, msgs = _record(ot.unbalanced.barycenter_unbalanced, H, M, 0.1, 1.0)  # POT: fails
    assert any("Numerical errors" in m for m in msgs)
    # unequal masses are what unbalanced barycenters are for: no error
    H[:, 2] = 3 * H[:, 0]
    np.testing.assert_allclose(barycenter_unbalanced(H, M, 0.1, 1.0),
                               ot.unbalanced.barycenter_unbalanced(H, M, 0.1, 1.0), rtol=1e-6)


# ---------------------------------------------------------------------------
# 4. LazyPlan: POT's LazyTensor indexing, values of POT's dense plan, own copies
# ---------------------------------------------------------------------------
@pytest.fixture
def clouds():
    rng = np.random.default_rng(2)
    return rng.random((6, 2)), rng.random((5, 2))


_KEYS = [(4, 3), 5, -1, (-1, -1), (-6, 0), np.int64(2), (slice(None), 2), (slice(None), -2),
         (slice(None, None, 2), slice(1, 4)), (slice(None, None, -1), slice(-1, -6, -2)),
         (Ellipsis, 1), (1, Ellipsis), Ellipsis, (slice(10, 20),), (slice(2, 2), 0),
         ([0, 2], slice(1, 3)), (slice(None), [True, False, True, False, True]),
         (np.array([-1, 0]), 1), ([0, 1], [0, 1])]


def _block_key(key, shape):
    """``key`` read as a block of the dense plan: an integer k as the slice
    of its one row (column), counted from the end when negative; index
    arrays on both axes as their outer product (np.ix_)."""
    key = key if isinstance(key, tuple) else (key,)
    key = tuple(slice(None) if k is Ellipsis else k for k in key)
    key = key + (slice(None),) * (2 - len(key))
    out = []
    for k, n in zip(key, shape):
        if isinstance(k, (int, np.integer)):
            k = slice(int(k) % n, int(k) % n + 1)
        elif not isinstance(k, slice):
            k = np.arange(n)[np.asarray(k)]
        out.append(k)
    if all(isinstance(k, np.ndarray) for k in out):
        return np.ix_(*out)
    return tuple(out)


def test_lazy_plan_indexing(clouds):
    X, Y = clouds
    kw = dict(isLazy=True, log=True, numIterMax=30, stopThr=0.0, warn=False)
    lp = empirical_sinkhorn(X, Y, 0.5, **kw)[2]["lazy_plan"]
    dense = ot.bregman.empirical_sinkhorn(X, Y, 0.5, **kw)[2]["lazy_plan"][:, :]  # POT's plan
    for key in _KEYS:
        got = lp[key]
        want = dense[_block_key(key, dense.shape)]
        assert got.ndim == 2 and got.shape == want.shape, key
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)
    for key in [(6, 0), (0, 5), (-7, 0), (0, -6), ([0, 9], 0), (1, 2, 3), (None,), (1.5,)]:
        with pytest.raises(IndexError):
            lp[key]
    # POT's LazyTensor: an integer keeps its axis; -1 and out-of-range
    # integers give empty blocks there (numbaot: the last row, IndexError)
    pot_lp = ot.bregman.empirical_sinkhorn(X, Y, 0.5, **kw)[2]["lazy_plan"]
    assert pot_lp[-1, -1].shape == (0, 0) and pot_lp[10, 0].shape == (0, 1)
    assert pot_lp[4, 3].shape == lp[4, 3].shape == (1, 1)


def test_lazy_plan_owns_its_points(clouds):
    X, Y = clouds
    X, Y = X[:, :1].copy(), Y[:, :1].copy()  # float64 C-contiguous, d = 1: no copies made
    lp = empirical_sinkhorn(X, Y, 0.5, isLazy=True, log=True, warn=False)[2]["lazy_plan"]
    block = lp[:, :]
    X += 100.0
    Y -= 3.0
    np.testing.assert_array_equal(lp[:, :], block)


# ---------------------------------------------------------------------------
# 5. empty point clouds; reg_m = 0 for the translation-invariant solver
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [empirical_sinkhorn, empirical_sinkhorn2])
@pytest.mark.parametrize("lazy", [False, True])
def test_empty_point_cloud(clouds, fn, lazy):
    X, _ = clouds
    E = np.zeros((0, 2))
    with pytest.raises(ValueError, match="X_s must hold at least one point"):
        fn(E, X, 0.1, isLazy=lazy)
    with pytest.raises(ValueError, match="X_t must hold at least one point"):
        fn(X, E, 0.1, isLazy=lazy)
    if not lazy:
        with pytest.raises(ZeroDivisionError):  # POT
            ot.bregman.empirical_sinkhorn(E, X, 0.1)


@pytest.mark.parametrize("reg_m", [0.0, (0.0, 1.0), (1.0, 0.0)])
def test_translation_invariant_reg_m_zero(abM, reg_m):
    a, b, M = abM
    with pytest.raises(ValueError, match="reg_m must be > 0 on both sides"):
        numbaot.sinkhorn_unbalanced(a, b, M, 0.1, reg_m, method="sinkhorn_translation_invariant")
    with pytest.raises(ZeroDivisionError):  # POT
        ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, reg_m,
                                          method="sinkhorn_translation_invariant")


# ---------------------------------------------------------------------------
# 6. integer point clouds
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("lazy", [False, True])
def test_integer_point_clouds(lazy):
    rng = np.random.default_rng(3)
    Xi, Yi = rng.integers(0, 5, (4, 2)), rng.integers(0, 5, (3, 2))
    before = _frozen(Xi, Yi)
    w = empirical_sinkhorn2(Xi, Yi, 1.0, isLazy=lazy)
    _unchanged(before, Xi, Yi)
    ref = ot.bregman.empirical_sinkhorn2(Xi.astype(np.float64), Yi.astype(np.float64), 1.0,
                                         isLazy=lazy)
    assert np.asarray(w).dtype == np.float64
    np.testing.assert_allclose(w, ref, rtol=1e-8)
    # POT on the integer arrays themselves: wrong (dense) or NaN (lazy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wp = ot.bregman.empirical_sinkhorn2(Xi, Yi, 1.0, isLazy=lazy)
    assert np.isnan(wp) or abs(wp - ref) > 1


# ---------------------------------------------------------------------------
# 7. the translation-invariant solver at a huge reg_m
# ---------------------------------------------------------------------------
def test_translation_invariant_huge_reg_m(abM):
    a, b, M = abM
    G, msgs = _record(numbaot.sinkhorn_unbalanced, a, b, M, 0.1, 1e20,
                      method="sinkhorn_translation_invariant")
    assert np.all(np.isfinite(G))
    assert any(m.startswith("Numerical errors at iteration 0: the translation step overflowed")
               for m in msgs)
    # POT: a NaN plan, and no warning but NumPy's RuntimeWarnings
    Gp, pmsgs = _record(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.1, 1e20,
                        method="sinkhorn_translation_invariant")
    assert np.all(np.isnan(Gp)) and pmsgs == []
    # a large but representable reg_m still matches POT
    np.testing.assert_allclose(
        numbaot.sinkhorn_unbalanced(a, b, M, 0.1, 1e10, method="sinkhorn_translation_invariant"),
        ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, 1e10,
                                          method="sinkhorn_translation_invariant"), rtol=1e-8)


# ---------------------------------------------------------------------------
# 8. costs of point clouds beyond floating point
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda X, Y: empirical_sinkhorn(X, Y, 0.1, isLazy=True),
    lambda X, Y: empirical_sinkhorn2(X, Y, 0.1, isLazy=True),
    lambda X, Y: empirical_sinkhorn2(X, Y, 0.1),
    lambda X, Y: empirical_sinkhorn(X, Y, 0.1, metric="euclidean"),
    lambda X, Y: empirical_sinkhorn2_value_and_grad(X, Y, 0.1),
])
def test_point_clouds_with_overflowing_costs(clouds, call):
    X, Y = clouds
    Xb, Yb = X * 1e200, Y * 1e200
    before = _frozen(Xb, Yb)
    with pytest.raises(ValueError, match="X_s, X_t and reg give costs too large"):
        call(Xb, Yb)
    _unchanged(before, Xb, Yb)


def test_pot_lazy_with_overflowing_costs(clouds):
    """POT's lazy potentials are NaN for points at 1e200."""
    X, Y = clouds
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f, g = ot.bregman.empirical_sinkhorn(X * 1e200, Y * 1e200, 0.1, isLazy=True)
    assert np.all(np.isnan(f)) or np.all(np.isnan(g))


def test_point_cloud_scale_limit_is_on_cost_over_reg(clouds):
    """The same points pass with a reg large enough for their costs."""
    X, Y = clouds
    Xb, Yb = X * 1e6, Y * 1e6  # squared costs about 1e12
    with pytest.raises(ValueError, match="too large"):
        empirical_sinkhorn2(Xb, Yb, 1e-6, isLazy=True)
    w = empirical_sinkhorn2(Xb, Yb, 1e11, isLazy=True, warn=False)
    wp = ot.bregman.empirical_sinkhorn2(Xb, Yb, 1e11, isLazy=True, warn=False)
    np.testing.assert_allclose(w, wp, rtol=1e-8)


# ---------------------------------------------------------------------------
# 9. costs / reg beyond 2**52 in the unbalanced solvers and the barycenters
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "sinkhorn_stabilized",
                                    "sinkhorn_translation_invariant"])
def test_unbalanced_cost_scale(abM, method):
    a, b, M = abM
    Mb = M * 1e17
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        numbaot.sinkhorn_unbalanced2(a, b, Mb, 0.1, 1.0, method=method, returnCost="total")
    if method != "sinkhorn_log":
        # POT: every entry of K underflows; a zero cost and a zero "total" cost
        # (the true objective of the zero plan is reg_m (sum a + sum b) = 2)
        (cost, lg), msgs = _record(ot.unbalanced.sinkhorn_unbalanced2, a, b, Mb, 0.1, 1.0,
                                   method=method, log=True)
        assert cost == 0.0 and lg["total_cost"] == 0.0
        assert any("Numerical errors" in m for m in msgs)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"])
def test_barycenter_cost_scale(hists, method):
    H, M = hists
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        numbaot.barycenter(H, M * 1e17, 0.1, method=method)
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        barycenter_unbalanced(H, M * 1e17, 0.1, 1.0)
    if method == "sinkhorn_log":  # POT: a result far from a barycenter, "did not converge"
        q, msgs = _record(ot.barycenter, H, M * 1e17, 0.1, method=method)
        assert all("did not converge" in m for m in msgs) and abs(q.sum() - 1) > 0.1


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"])
def test_infinite_reg_m_on_both_sides_needs_equal_masses(method):
    """reg_m = inf on both sides is balanced OT: unequal masses raise the
    balanced solvers' ValueError (POT runs to numItermax and returns a plan
    that meets neither marginal, without a warning); equal masses solve the
    balanced problem (POT's balanced sinkhorn as the oracle)."""
    rng = np.random.default_rng(5)
    M = rng.random((5, 4))
    a, b = np.full(5, 0.2), np.full(4, 0.375)
    with pytest.raises(ValueError, match="same \\(finite\\) total mass.*finite value"):
        sinkhorn_unbalanced(a, b, M, 1.0, np.inf, method=method)
    with pytest.raises(ValueError, match="same \\(finite\\) total mass"):
        sinkhorn_unbalanced(a, np.stack([b / 1.5, b], axis=1), M, 1.0, (np.inf, np.inf),
                            method=method)
    b = np.full(4, 0.25)
    np.testing.assert_allclose(sinkhorn_unbalanced(a, b, M, 1.0, np.inf, method=method),
                               ot.sinkhorn(a, b, M, 1.0, stopThr=1e-12), rtol=1e-6, atol=1e-12)


def _kl0(p, q):
    """POT's kl_div(p, q) = sum p log(p / q + 1e-16), with 0 log 0 = 0."""
    p, q = np.ravel(p), np.ravel(q)
    keep = p != 0
    return float(np.sum(p[keep] * np.log(p[keep] / q[keep] + 1e-16)))


@pytest.mark.parametrize("method, zeros, pot_method", [("sinkhorn_log", "ab", "sinkhorn"),
                                                        ("sinkhorn_stabilized", "a",
                                                         "sinkhorn_stabilized")])
@pytest.mark.parametrize("n", [5, 400])  # the one-call path and the blocked kernels
def test_total_cost_with_zero_weights_is_the_reduced_problems(method, zeros, pot_method, n):
    """A zero weight with no mass on it adds nothing to the total cost
    (0 log 0 = 0): POT's own on the problem without those rows and columns
    is the oracle (POT's on the full problem is NaN: 0 log(0 / 0)).  Three
    iterations, far from convergence, where the total is O(1) (at
    convergence it cancels to about 1e-12 for any data)."""
    rng = np.random.default_rng(8)
    M = rng.random((n, n - 1))
    a, b = rng.random(n) + 0.1, rng.random(n - 1) + 0.1
    a[::3] = 0.0
    if "b" in zeros:
        b[1::4] = 0.0
    a, b = a / a.sum(), 1.5 * b / b.sum()
    ka, kb = a > 0, b > 0
    kw = dict(numItermax=3, stopThr=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ot.unbalanced.sinkhorn_unbalanced2(a[ka], b[kb], M[np.ix_(ka, kb)], 0.5, 1.0,
                                                 method=pot_method, returnCost="total", **kw)
        got = numbaot.sinkhorn_unbalanced2(a, b, M, 0.5, 1.0, method=method,
                                           returnCost="total", **kw)
        lg = numbaot.sinkhorn_unbalanced(a, b, M, 0.5, 1.0, method=method, log=True, **kw)[1]
    assert abs(ref) > 0.01                      # far from the cancellation
    np.testing.assert_allclose(got, ref, rtol=1e-9)
    np.testing.assert_allclose(lg["total_cost"], ref, rtol=1e-9)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_stabilized"])
@pytest.mark.parametrize("n", [5, 400])
def test_total_cost_after_a_failed_first_iteration_is_finite(method, n):
    """A zero in b stops POT's multiplicative and stabilized solvers at
    iteration 0 (numerical errors), on their initial plan, whose total POT
    reports as NaN (0 log(0 / 0) in the KL terms); numbaot stops on the same
    plan and counts those terms as 0: POT's plan in the cost formula with
    0 log 0 = 0 is the oracle."""
    rng = np.random.default_rng(9)
    M = rng.random((n, n - 1))
    a, b = rng.random(n) + 0.1, rng.random(n - 1) + 0.1
    b[1] = 0.0
    a, b = a / a.sum(), 1.5 * b / b.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Gp = ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.5, 1.0, method=method)
        got = numbaot.sinkhorn_unbalanced2(a, b, M, 0.5, 1.0, method=method,
                                           returnCost="total")
    ref = (np.sum(Gp * M) + 0.5 * _kl0(Gp, np.outer(a, b)) + _kl0(Gp.sum(1), a)
           + _kl0(Gp.sum(0), b))
    assert np.isfinite(got) and abs(ref) > 0.01
    np.testing.assert_allclose(got, ref, rtol=1e-9)
