"""Point-cloud entropic OT (numbaot.bregman.empirical_*) against POT 0.9.7."""
import warnings

import numpy as np
import pytest

from _helpers import ot

import numbaot
from numbaot.bregman import empirical_sinkhorn, empirical_sinkhorn2, empirical_sinkhorn_divergence


def _clouds(rng, n=60, m=45, d=3, dtype=np.float64):
    Xs = rng.normal(size=(n, d)).astype(dtype)
    Xt = (rng.normal(size=(m, d)) + 0.7).astype(dtype)
    a = rng.random(n) + 0.1
    a /= a.sum()
    b = rng.random(m) + 0.1
    b /= b.sum()
    return Xs, Xt, a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("reg", [1.0, 1e-2])
def test_lazy_potentials_match_pot(rng, metric, reg):
    Xs, Xt, a, b = _clouds(rng)
    kw = dict(metric=metric, numIterMax=40, stopThr=0.0, isLazy=True, log=True, warn=False)
    f, g, lg = empirical_sinkhorn(Xs, Xt, reg, a, b, **kw)
    fp, gp, lgp = ot.bregman.empirical_sinkhorn(Xs, Xt, reg, a, b, **kw)
    np.testing.assert_allclose(f, fp, rtol=1e-10, atol=1e-10 * np.abs(fp).max())
    np.testing.assert_allclose(g, gp, rtol=1e-10, atol=1e-10 * np.abs(gp).max())
    assert set(lg) == set(lgp)
    assert lg["niter"] == lgp["niter"] == 39
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-8, atol=1e-14)
    plan, plan_p = lg["lazy_plan"], lgp["lazy_plan"]
    assert plan.shape == plan_p.shape
    for key in [(slice(3, 9), slice(10, 30)), (4, 7), (slice(None), 2), 5, -3]:
        # indexed as POT's LazyTensor: an integer keeps its axis (plan[5] is (1, m))
        assert plan[key].shape == plan_p[key].shape
        np.testing.assert_allclose(plan[key], plan_p[key], rtol=1e-9, atol=1e-300)


def test_lazy_stops_and_warns_as_pot(rng):
    Xs, Xt, a, b = _clouds(rng)
    for kw in (dict(numIterMax=500, stopThr=1e-6), dict(numIterMax=15, stopThr=1e-14)):
        with warnings.catch_warnings(record=True) as w1:
            warnings.simplefilter("always")
            *_, lg = empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, log=True, **kw)
        with warnings.catch_warnings(record=True) as w2:
            warnings.simplefilter("always")
            *_, lgp = ot.bregman.empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, log=True, **kw)
        assert lg["niter"] == lgp["niter"]
        assert [str(x.message) for x in w1] == [str(x.message) for x in w2]


def test_lazy_loss_and_divergence_match_pot(rng):
    Xs, Xt, a, b = _clouds(rng)
    for metric in ("sqeuclidean", "euclidean"):
        kw = dict(metric=metric, numIterMax=30, isLazy=True, warn=False)
        W = empirical_sinkhorn2(Xs, Xt, 0.3, a, b, **kw)
        Wp = ot.bregman.empirical_sinkhorn2(Xs, Xt, 0.3, a, b, **kw)
        np.testing.assert_allclose(W, Wp, rtol=1e-10)
    kw = dict(numIterMax=30, warn=False)
    for lazy in (False, True):
        S = empirical_sinkhorn_divergence(Xs, Xt, 0.3, a, b, isLazy=lazy, **kw)
        Sp = ot.bregman.empirical_sinkhorn_divergence(Xs, Xt, 0.3, a, b, isLazy=lazy, **kw)
        np.testing.assert_allclose(S, Sp, rtol=1e-9)
    S, lg = empirical_sinkhorn_divergence(Xs, Xt, 0.3, log=True, **kw)
    Sp, lgp = ot.bregman.empirical_sinkhorn_divergence(Xs, Xt, 0.3, log=True, **kw)
    assert set(lg) == set(lgp)
    np.testing.assert_allclose(S, Sp, rtol=1e-9)


def test_dense_path_is_sinkhorn_on_dist(rng):
    Xs, Xt, a, b = _clouds(rng)
    G = empirical_sinkhorn(Xs, Xt, 0.5, numIterMax=50, warn=False)
    Gp = ot.bregman.empirical_sinkhorn(Xs, Xt, 0.5, numIterMax=50, warn=False)
    np.testing.assert_allclose(G, Gp, rtol=1e-9, atol=1e-15)
    W = empirical_sinkhorn2(Xs, Xt, 0.5, a, b, metric="cityblock", numIterMax=50, warn=False)
    Wp = ot.bregman.empirical_sinkhorn2(Xs, Xt, 0.5, a, b, metric="cityblock", numIterMax=50,
                                        warn=False)
    np.testing.assert_allclose(W, Wp, rtol=1e-9)


def test_lazy_plan_marginals_against_dense_closed_form(rng):
    """Oracle without POT: the dense plan exp(f + g - M/reg) from NumPy."""
    Xs, Xt, a, b = _clouds(rng, n=20, m=30)
    f, g, lg = empirical_sinkhorn(Xs, Xt, 0.4, a, b, isLazy=True, log=True, numIterMax=2000,
                                  stopThr=1e-13)
    M = ((Xs[:, None, :] - Xt[None, :, :]) ** 2).sum(-1)
    P = np.exp(f[:, None] + g[None, :] - M / 0.4)
    np.testing.assert_allclose(P.sum(1), a, atol=1e-12)
    np.testing.assert_allclose(P.sum(0), b, atol=1e-12)
    np.testing.assert_allclose(lg["lazy_plan"][:, :], P, rtol=1e-12, atol=1e-300)


def test_float32_points(rng):
    Xs, Xt, a, b = _clouds(rng, dtype=np.float32)
    f, g = empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, numIterMax=20, warn=False)
    assert f.dtype == np.float32 and g.dtype == np.float32
    fp, gp = ot.bregman.empirical_sinkhorn(Xs.astype(np.float64), Xt.astype(np.float64), 0.5,
                                           isLazy=True, numIterMax=20, warn=False)
    np.testing.assert_allclose(f, fp, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# float32 lanes (numbaot.cpu.empirical.lazy_lse_f32, issue 23 item 4)
# ---------------------------------------------------------------------------
def _lse_loop(X, Y, w, c, metric):
    """LSE_j (w_j + c cost(x_i, y_j)) per row, float64, one row at a time
    with NumPy (the oracle of the kernels)."""
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        cost = ((X[i] - Y) ** 2).sum(1)
        if metric == 1:
            cost = np.sqrt(cost)
        t = w + c * cost
        mx = t.max()
        out[i] = mx + np.log(np.exp(t - mx).sum()) if mx > -np.inf else -np.inf
    return out


@pytest.mark.parametrize("metric", [0, 1])
@pytest.mark.parametrize("d", [1, 3])
def test_float32_lanes_lse_against_a_float64_loop(rng, metric, d):
    """Within the budget |c| cost_max (d + 4) <= LAZY_F32_SCALE_BUDGET the
    float32-lane half-step is within the bound derived in numbaot._config
    (6e-5 relative on every term that matters, so 6e-5 on the logsumexp)
    of the float64 logsumexp of the same float32 points; zero weights
    (-inf) drop out; a row whose shifted sum underflows the float32 range
    takes the float64 path (a row far from the one column of large w)."""
    from numbaot._config import LAZY_F32_SCALE_BUDGET
    from numbaot.cpu.empirical import lazy_lse_f32

    X = rng.random((70, d)).astype(np.float32)
    Y = rng.random((530, d)).astype(np.float32)  # two column blocks
    X[0] = 0.0
    Y[5] = 1.0
    cost_max = d if metric == 0 else np.sqrt(d)
    c = -LAZY_F32_SCALE_BUDGET / ((d + 4) * cost_max)  # at the budget
    w = rng.normal(0, 5, Y.shape[0])
    w[::7] = -np.inf
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    Yt64 = np.ascontiguousarray(Y64.T)
    out = np.empty(X.shape[0])
    lazy_lse_f32(X64, Yt64, X, np.ascontiguousarray(Y.T), w, c, metric, out)
    ref = _lse_loop(X64, Y64, w, c, metric)
    np.testing.assert_allclose(out, ref, rtol=0, atol=6e-5)
    # row 0 at the corner opposite the only column that is not far below:
    # its shifted sum is about exp(c cost_max) < 1e-20 (float64 path)
    w2 = np.full(Y.shape[0], -400.0)
    w2[5] = 0.0
    lazy_lse_f32(X64, Yt64, X, np.ascontiguousarray(Y.T), w2, c, metric, out)
    ref = _lse_loop(X64, Y64, w2, c, metric)
    assert np.exp(ref[0]) < 1e-20
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=6e-5)


def test_float32_lanes_solve_matches_pot_and_switches_to_float64(rng):
    """A float32 point-cloud solve inside the budget runs its half-steps in
    float32 lanes, leaves them near convergence (lazy_note_error) and
    reaches POT's default stopThr as float64 does: the potentials within
    float32 tolerances of POT's float64 solve of the same points, the same
    stopping test passed within one test (10 iterations)."""
    from numbaot import _lazy
    from numbaot.cpu.empirical import LazyState, lanes32_ok

    Xs = rng.random((300, 3)).astype(np.float32)
    Xt = rng.random((280, 3)).astype(np.float32)
    st0 = LazyState(Xs.astype(np.float64), Xt.astype(np.float64), np.zeros(300), np.zeros(280),
                    np.zeros(300), np.zeros(280), -1 / 0.05, 0, np.float32)
    assert lanes32_ok(st0)
    f, g, lg, be, st = _lazy.lazy_solve(Xs, Xt, 0.05, None, None, "sqeuclidean", 1000, 1e-9,
                                        100, verbose=False, log=True, warn=True, warmstart=None)
    assert f.dtype == np.float32 and np.isfinite(st.last_err) and not st.lanes32
    X64, Y64 = Xs.astype(np.float64), Xt.astype(np.float64)
    fp, gp, lgp = ot.bregman.empirical_sinkhorn(X64, Y64, 0.05, isLazy=True, log=True)
    np.testing.assert_allclose(f, fp, rtol=1e-5, atol=1e-5 * np.abs(fp).max())
    np.testing.assert_allclose(g, gp, rtol=1e-5, atol=1e-5 * np.abs(gp).max())
    assert lg["err"][-1] <= 1e-9 and abs(lg["niter"] - lgp["niter"]) <= 10


def test_float32_lanes_only_within_the_budget():
    """Colder than the budget (or a float64 problem, or points split across
    processes) the half-steps stay in float64."""
    from numbaot._config import LAZY_F32_SCALE_BUDGET
    from numbaot.cpu.empirical import LazyState, lanes32_ok

    Xs = np.array([[0.0, 0.0], [1.0, 2.0]])  # cost_max = 5, d = 2
    Xt = np.array([[0.5, 0.5]])
    args = (np.zeros(2), np.zeros(1), np.zeros(2), np.zeros(1))
    edge = -LAZY_F32_SCALE_BUDGET / (5 * 6)
    assert lanes32_ok(LazyState(Xs, Xt, *args, 0.999 * edge, 0, np.float32))
    assert not lanes32_ok(LazyState(Xs, Xt, *args, 1.001 * edge, 0, np.float32))
    assert not lanes32_ok(LazyState(Xs, Xt, *args, edge, 0, np.float64))
    assert not lanes32_ok(LazyState(Xs, Xt, *args, edge, 0, np.float32, reduction=object()))


def test_bad_input(rng):
    Xs, Xt, a, b = _clouds(rng)
    with pytest.raises(ValueError, match="metric"):
        empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, metric="cityblock")
    with pytest.raises(ValueError, match="same dimension"):
        empirical_sinkhorn(Xs, Xt[:, :2], 0.5, isLazy=True)
    with pytest.raises(ValueError, match="reg"):
        empirical_sinkhorn(Xs, Xt, 0.0, isLazy=True)
    with pytest.raises(ValueError, match="Batch size"):
        empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, batchSize=(1, 2, 3))
    bad = Xs.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X_s contains NaN"):
        empirical_sinkhorn(bad, Xt, 0.5, isLazy=True)
    with pytest.raises(ValueError, match="a has"):
        empirical_sinkhorn(Xs, Xt, 0.5, a=a[:-1], isLazy=True)
    with pytest.raises(ValueError, match="2-D"):
        empirical_sinkhorn(Xs[0], Xt, 0.5, isLazy=True)


def test_caller_arrays_unchanged(rng):
    Xs, Xt, a, b = _clouds(rng)
    copies = [x.copy() for x in (Xs, Xt, a, b)]
    empirical_sinkhorn2(Xs, Xt, 0.5, a, b, isLazy=True, numIterMax=10, warn=False)
    for x, y in zip((Xs, Xt, a, b), copies):
        np.testing.assert_array_equal(x, y)


def test_exported_from_bregman():
    assert numbaot.bregman.empirical_sinkhorn is empirical_sinkhorn


@pytest.mark.parametrize("call", ["lazy", "lazy2", "value_and_grad", "value_and_grad_scaling",
                                  "solve_sample"])
def test_lazy_unequal_masses_raise_as_the_dense_solvers(call):
    """Balanced OT needs sum a = sum b: the lazy paths raise the dense
    solvers' ValueError (POT's lazy loop runs on and warns that it did
    not converge, returning a plan that meets neither marginal)."""
    rng = np.random.default_rng(3)
    Xs, Xt = rng.random((6, 2)), rng.random((5, 2))
    a, b = np.full(6, 1 / 3), np.full(5, 0.2)
    calls = {
        "lazy": lambda: numbaot.bregman.empirical_sinkhorn(Xs, Xt, 1.0, a, b, isLazy=True),
        "lazy2": lambda: numbaot.bregman.empirical_sinkhorn2(Xs, Xt, 1.0, a, b, isLazy=True),
        "value_and_grad": lambda: numbaot.empirical_sinkhorn2_value_and_grad(Xs, Xt, 1.0, a, b),
        "value_and_grad_scaling": lambda: numbaot.empirical_sinkhorn2_value_and_grad(
            Xs, Xt, 1.0, a, b, scaling=0.5),
        "solve_sample": lambda: numbaot.solve_sample(Xs, Xt, a, b, reg=1.0, lazy=True),
    }
    with pytest.raises(ValueError, match=r"a and b must have the same \(finite\) total mass"):
        calls[call]()


@pytest.mark.parametrize("isLazy", [True, False])
def test_weight_length_errors_name_the_points(isLazy):
    rng = np.random.default_rng(4)
    Xs, Xt = rng.random((6, 2)), rng.random((5, 2))
    with pytest.raises(ValueError, match=r"a has 5 entries .* but X_s has 6 points"):
        empirical_sinkhorn(Xs, Xt, 1.0, a=np.full(5, 0.2), isLazy=isLazy)
    with pytest.raises(ValueError, match=r"b has 6 entries .* but X_t has 5 points"):
        empirical_sinkhorn2(Xs, Xt, 1.0, b=np.full(6, 1 / 6), isLazy=isLazy)
    with pytest.raises(ValueError, match="numIterMax"):
        empirical_sinkhorn(Xs, Xt, 1.0, numIterMax=-1, isLazy=isLazy)


@pytest.mark.parametrize("batchSize", [0, -1, (0, 5), (5, -2)])
def test_lazy_batch_size_below_one_raises(batchSize):
    rng = np.random.default_rng(7)
    Xs, Xt = rng.random((6, 2)), rng.random((5, 2))
    with pytest.raises(ValueError, match="batchSize must be >= 1"):
        empirical_sinkhorn(Xs, Xt, 1.0, isLazy=True, batchSize=batchSize)
