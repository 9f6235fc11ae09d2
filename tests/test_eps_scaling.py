"""Epsilon scaling for point clouds: ``numbaot.solve_sample(method='geomloss*',
scaling=...)`` and the lazy solver's ``scaling`` keyword.

Epsilon scaling changes the path, not the answer: at a tight tolerance the
result must be the entropic OT at the target reg, i.e. POT's
``ot.solve_sample(lazy=True)`` / ``ot.bregman.empirical_sinkhorn2`` (float64),
POT's dense ``ot.solve_sample`` (values with the KL term) and numbaot's plain
lazy solver.  Tolerances:

* float64, both sides at marginal error <= 1e-11 (L1): the values are within a
  few 1e-11 of the fixed point; ``rtol=1e-8``.
* dual potentials are defined up to a constant moved between F and G: they are
  compared after removing their mean difference, to ``atol=1e-7 * reg``-scaled
  1e-7 (they are O(diameter**2) numbers).
* float32 inputs: numbaot's CPU point-cloud kernels compute in float64, the
  result is rounded to float32: ``rtol=1e-5``.
* at reg = 1e-3 both runs stop at tol 1e-4 (L1 marginal violation), where
  the value has about 4 correct digits: ``rtol=1e-3`` against a reference
  converged to 1e-7.
"""
import warnings

import numpy as np
import pytest

import numbaot
from numbaot import _lazy

ot = pytest.importorskip("ot")

TIGHT = 1e-11
F64 = dict(rtol=1e-8, atol=1e-12)


def _clouds(n, m, d, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    Y = rng.random((m, d)) ** 2 + 0.1  # a shaped, shifted target
    return X.astype(dtype), Y.astype(dtype)


def _centred(F, G):
    """(F, G) with the constant shift removed (F + c, G - c with mean(F) = 0)."""
    c = np.mean(F)
    return F - c, G + c


def _pot_potentials(res_pot, n, m, reg):
    """POT's lazy log-scalings (u, v) as dual potentials F = reg (u - log a)."""
    u, v = res_pot.potentials
    return reg * (np.asarray(u) + np.log(n)), reg * (np.asarray(v) + np.log(m))


# --------------------------------------------------------------------------
# agreement with POT at the target reg
# --------------------------------------------------------------------------
def _check_against_pot(res, X, Y, reg):
    """A converged point-cloud result at reg against POT (float64): its
    value_linear = POT's lazy value, its value = POT's dense (KL) value, its
    potentials = POT's lazy ones (up to the constant), its lazy plan = POT's
    dense plan."""
    n, m = len(X), len(Y)
    res_pot = ot.solve_sample(X, Y, reg=reg, lazy=True, tol=TIGHT, max_iter=100000)
    res_dense = ot.solve_sample(X, Y, reg=reg, tol=TIGHT, max_iter=100000)
    np.testing.assert_allclose(res.value_linear, res_pot.value_linear, **F64)
    np.testing.assert_allclose(res.value, res_dense.value, **F64)
    F, G = _centred(*res.potentials)
    Fp, Gp = _centred(*_pot_potentials(res_pot, n, m, reg))
    np.testing.assert_allclose(F, Fp, rtol=0, atol=1e-9)
    np.testing.assert_allclose(G, Gp, rtol=0, atol=1e-9)
    np.testing.assert_allclose(res.lazy_plan[:, :], res_dense.plan, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("reg", [0.5, 0.05])
def test_online_matches_pot_lazy(d, reg):
    """value_linear and potentials of 'geomloss_online' = POT's lazy solver;
    value = POT's dense (KL) value; n != m."""
    n, m = 37, 29
    X, Y = _clouds(n, m, d, seed=d)
    res = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_online", scaling=0.7,
                               tol=TIGHT, max_iter=100000)
    _check_against_pot(res, X, Y, reg)
    assert res.plan is None
    P = res.lazy_plan[:, :]
    # the plan from the potentials, GeomLoss's formula
    C = ot.dist(X, Y)
    Fr, Gr = res.potentials
    np.testing.assert_allclose(np.exp((Fr[:, None] + Gr[None, :] - C) / reg) / (n * m), P,
                               rtol=1e-9, atol=1e-14)
    assert res.log["niter_total"] == res.log["niter_scaling"] + res.log["niter"] + 1
    assert res.log["niter_scaling"] == len(res.log["eps_schedule"])


@pytest.mark.parametrize("reg", [0.5, 0.02])
def test_tensorized_matches_pot_dense(reg):
    """'geomloss_tensorized' = POT's dense solve_sample (plan, value, value_linear)."""
    X, Y = _clouds(33, 41, 2, seed=5)
    res_dense = ot.solve_sample(X, Y, reg=reg, tol=TIGHT, max_iter=100000)
    res = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_tensorized", scaling=0.5,
                               tol=TIGHT, max_iter=100000)
    np.testing.assert_allclose(res.value, res_dense.value, **F64)
    np.testing.assert_allclose(res.value_linear, res_dense.value_linear, **F64)
    np.testing.assert_allclose(res.plan, res_dense.plan, rtol=1e-7, atol=1e-12)
    assert res.lazy_plan is None
    res_on = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_online", scaling=0.5,
                                  tol=TIGHT, max_iter=100000)
    for p, q in zip(_centred(*res.potentials), _centred(*res_on.potentials)):
        np.testing.assert_allclose(p, q, rtol=0, atol=1e-9)


def test_empirical_sinkhorn2_scaling_matches_pot():
    """The lazy empirical calls take ``scaling``: same value as POT's
    ``empirical_sinkhorn2(isLazy=True)``, with the schedule in the log."""
    X, Y = _clouds(30, 45, 3, seed=2)
    ref = ot.bregman.empirical_sinkhorn2(X, Y, 0.05, isLazy=True, stopThr=TIGHT,
                                         numIterMax=100000)
    val, lg = numbaot.bregman.empirical_sinkhorn2(X, Y, 0.05, isLazy=True, stopThr=TIGHT,
                                                  numIterMax=100000, log=True, scaling=0.6)
    np.testing.assert_allclose(val, ref, **F64)
    eps = lg["eps_schedule"]
    assert eps[0] == pytest.approx(_lazy.max_diameter(X, Y) ** 2)
    assert all(e1 == pytest.approx(0.6 * e0) for e0, e1 in zip(eps, eps[1:]))
    assert eps[-1] > 0.05 >= 0.6 * eps[-1]
    f, g = numbaot.bregman.empirical_sinkhorn(X, Y, 0.05, isLazy=True, stopThr=TIGHT,
                                              numIterMax=100000, scaling=0.6)
    P = np.exp(f[:, None] + g[None, :] - ot.dist(X, Y) / 0.05)
    np.testing.assert_allclose(P.sum(0), np.full(45, 1 / 45), rtol=1e-9)


def test_euclidean_metric():
    X, Y = _clouds(25, 31, 2, seed=4)
    ref = ot.bregman.empirical_sinkhorn2(X, Y, 0.05, metric="euclidean", isLazy=True,
                                         stopThr=TIGHT, numIterMax=100000)
    res = numbaot.solve_sample(X, Y, reg=0.05, metric="euclidean", method="geomloss_online",
                               scaling=0.5, tol=TIGHT, max_iter=100000)
    np.testing.assert_allclose(res.value_linear, ref, **F64)
    assert res.log["eps_schedule"][0] == pytest.approx(_lazy.max_diameter(X, Y))


# --------------------------------------------------------------------------
# small reg: same answer, fewer iterations
# --------------------------------------------------------------------------
def test_small_reg_fewer_iterations():
    """reg = 1e-3 on unit-scaled 2-D clouds (eps_0 / reg ~ 2e3): to the same
    tol, epsilon scaling needs fewer iterations in all (annealing included)
    than the plain lazy solver (measured 654 against 1360), and gives the
    same value to the accuracy the tolerance allows."""
    X, Y = _clouds(60, 67, 2, seed=0)
    reg, tol = 1e-3, 1e-4
    ref = numbaot.bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True, stopThr=1e-7,
                                              numIterMax=100000)
    plain, lg0 = numbaot.bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True, stopThr=tol,
                                                     numIterMax=100000, log=True)
    res = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_online", scaling=0.9, tol=tol,
                               max_iter=100000)
    n_plain = lg0["niter"] + 1
    n_scaled = res.log["niter_total"]
    assert n_scaled < 0.8 * n_plain, (n_scaled, n_plain)
    np.testing.assert_allclose(res.value_linear, ref, rtol=1e-3)
    np.testing.assert_allclose(plain, ref, rtol=1e-3)


# --------------------------------------------------------------------------
# multiscale: the hot stages on voxel centroids
# --------------------------------------------------------------------------
def _blobs(n, d, n_blobs, seed, spread=1e-3):
    """n points in n_blobs tight blobs (radius ~spread) spread over [0, 1]^d:
    each blob falls in one or two voxels of the default cluster scale, so the
    coarse clouds are much smaller than the points."""
    rng = np.random.default_rng(seed)
    centres = rng.random((n_blobs, d))
    return centres[rng.integers(0, n_blobs, n)] + spread * rng.random((n, d))


@pytest.mark.parametrize("d,reg", [(2, 0.5), (2, 0.02), (3, 0.001)])
def test_multiscale_matches_pot_lazy(d, reg):
    """'geomloss_multiscale' changes the path, not the answer: value_linear,
    potentials and plan of POT's lazy / dense solvers at reg, after stages on
    the voxel centroids (fewer than the points); in 3-D at reg 0.001 four
    stages (eps <= h**2 = 0.0038) run on the points after the extrapolation."""
    n, m = 60, 45
    X, Y = _blobs(n, d, 6, seed=11), _blobs(m, d, 5, seed=12) * 0.8 + 0.1
    res = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_multiscale", scaling=0.7,
                               tol=TIGHT, max_iter=100000)
    _check_against_pot(res, X, Y, reg)
    lg = res.log
    ka, kb = lg["n_clusters"]
    assert 6 <= ka < n and 5 <= kb < m, lg["n_clusters"]
    h2 = (_lazy.max_diameter(X, Y) / (np.sqrt(d) * 2000 ** (1 / d))) ** 2
    assert lg["niter_coarse"] == sum(e > h2 for e in lg["eps_schedule"]) > 0
    if d == 3:
        assert lg["niter_scaling"] > lg["niter_coarse"]
    assert lg["niter_scaling"] == len(lg["eps_schedule"])
    assert lg["niter_total"] == lg["niter_scaling"] + lg["niter"] + 1


# --------------------------------------------------------------------------
# the dense log domain: sinkhorn_log(..., scaling=...)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_sinkhorn_log_scaling_matches_pot(dtype):
    """``sinkhorn_log(scaling=0.7)`` at reg 1e-3 (costs scaled to max 1):
    POT's plan at the same stopThr (POT's plain ``sinkhorn_log`` as the
    oracle), fewer iterations in all than the plain solver's (the annealing
    counted: measured 1491 against 1680 here), the log's schedule from
    max |M| = 1 down to reg, and ``sinkhorn`` / ``sinkhorn2`` pass the keyword
    through.  float32: to stopThr 1e-7 (its weights' rounding leaves an
    error floor of about 1e-9), within float32 tolerances of POT's float64
    plan."""
    rng = np.random.default_rng(0)
    X, Y = rng.random((300, 2)), rng.random((280, 2)) ** 2
    M = ot.dist(X, Y)
    M /= M.max()
    a, b = ot.unif(300), ot.unif(280)
    reg = 1e-3
    ref = ot.bregman.sinkhorn_log(a, b, M, reg, numItermax=100000, stopThr=1e-9)
    Md = M.astype(dtype)
    stop = 1e-9 if dtype == np.float64 else 1e-7  # float32 weights: an error floor of ~1e-9
    G, lg = numbaot.bregman.sinkhorn_log(a.astype(dtype), b.astype(dtype), Md, reg,
                                         numItermax=100000, stopThr=stop, log=True,
                                         scaling=0.7)
    _, lg0 = numbaot.bregman.sinkhorn_log(a, b, M, reg, numItermax=100000, stopThr=1e-9,
                                          log=True)
    assert G.dtype == dtype
    tol = dict(rtol=1e-6, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-7)
    np.testing.assert_allclose(G, ref, **tol)
    eps = lg["eps_schedule"]
    assert eps[0] == pytest.approx(1.0) and eps[-1] > reg >= 0.7 * eps[-1]
    assert all(e1 == pytest.approx(0.7 * e0) for e0, e1 in zip(eps, eps[1:]))
    assert lg["niter_scaling"] == len(eps)
    assert lg["niter_total"] == lg["niter_scaling"] + lg["niter"] + 1
    if dtype == np.float64:
        assert lg["niter_total"] < lg0["niter"] + 1, (lg["niter_total"], lg0["niter"])
    loss = numbaot.sinkhorn2(a, b, M, reg, method="sinkhorn_log", numItermax=100000,
                             scaling=0.7)
    np.testing.assert_allclose(loss, np.sum(ref * M), rtol=1e-6)
    G2 = numbaot.sinkhorn(a, b, M, reg, method="sinkhorn_log", numItermax=100000, scaling=0.7)
    np.testing.assert_allclose(G2, ref, rtol=1e-6, atol=1e-12)


def test_dense_sinkhorn_log_scaling_edge_cases():
    """A bad ``scaling`` raises naming it; a warm start replaces the
    annealing (empty schedule, POT's warm-started iterates); reg above
    max |M| leaves nothing to anneal."""
    a, b = ot.unif(4), ot.unif(5)
    M = ot.dist(np.arange(4.0)[:, None], np.arange(5.0)[:, None])
    for bad in (0, 1, 2.0, float("nan")):
        with pytest.raises(ValueError, match="scaling"):
            numbaot.bregman.sinkhorn_log(a, b, M, 0.1, scaling=bad)
    with pytest.raises(ValueError, match="scaling"):
        numbaot.sinkhorn2(a, b, M, 0.1, method="sinkhorn_log", scaling=1.5)
    ws = (np.zeros(4), np.zeros(5))
    G, lg = numbaot.bregman.sinkhorn_log(a, b, M, 0.1, warmstart=ws, scaling=0.5, log=True)
    Gp = ot.bregman.sinkhorn_log(a, b, M, 0.1, warmstart=ws)
    np.testing.assert_allclose(G, Gp, rtol=1e-10, atol=1e-14)
    assert lg["eps_schedule"] == [] and lg["niter_scaling"] == 0
    _, lg = numbaot.bregman.sinkhorn_log(a, b, M, 100.0, scaling=0.5, log=True)
    assert lg["eps_schedule"] == [] and lg["niter_total"] == lg["niter"] + 1


# --------------------------------------------------------------------------
# kernel truncation: the voxel pairs bounds rule out are skipped
# --------------------------------------------------------------------------
@pytest.fixture
def always_truncate(monkeypatch):
    """Every half-step truncated (however many pairs the pattern keeps) on
    voxels of 4 points: small tests then skip pairs too."""
    from numbaot import _config
    monkeypatch.setattr(_config, "LAZY_TRUNCATION_MAX_KEPT", 1.0)
    monkeypatch.setattr(_config, "LAZY_TRUNCATION_CLUSTER_POINTS", 4)
    monkeypatch.setattr(_config, "LAZY_TRUNCATION_MIN_PAIRS", 0)


@pytest.mark.parametrize("metric", [0, 1])
@pytest.mark.parametrize("d,reg", [(2, 1e-3), (3, 2e-3), (2, 1e-5)])
def test_truncated_half_step_against_dense_logsumexp(always_truncate, metric, d, reg):
    """A truncated half-step against scipy's logsumexp over the dense cost
    matrix (float64): within LAZY_TRUNCATION_TOL (1e-10) plus rounding, with
    zero weights among the columns (w = -inf) and potentials of both signs,
    while skipping most pairs.  At reg 1e-5 the bounds' slack (|c| times the
    voxels' size squared) exceeds the float range: the rows take the online
    fallback."""
    from scipy.special import logsumexp
    from numbaot import _config
    from numbaot.cpu import empirical as cpu_emp

    rng = np.random.default_rng(d)
    n, m = 300, 260
    X, Y = rng.random((n, d)), rng.random((m, d)) * 0.8 + 0.1
    C = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    if metric == 1:
        C = np.sqrt(C)
    g = rng.normal(size=m) * 2.0
    g[::11] = -np.inf
    st = cpu_emp.LazyState(X, Y, np.zeros(n), np.zeros(m), np.zeros(n), g.copy(), -1.0 / reg,
                           metric, np.float64)
    cpu_emp.lazy_truncate(st, _lazy.truncation_clusters(X), _lazy.truncation_clusters(Y))
    out = np.full(n, np.nan)
    cpu_emp._half_step(st, 0, g, out)
    ref = logsumexp(g[None, :] - C / reg, axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=_config.LAZY_TRUNCATION_TOL)
    kept_rows, _ = cpu_emp.lazy_kept_fraction(st)
    assert kept_rows < 0.5, kept_rows


def test_truncation_clusters_partition():
    """Every point in exactly one voxel, voxels contiguous in ``perm``,
    centres the voxels' means and radii the largest distance to them
    (against a loop over the voxels)."""
    rng = np.random.default_rng(3)
    X = rng.random((1000, 3))
    cl = _lazy.truncation_clusters(X, 10)
    assert np.array_equal(np.sort(cl.perm), np.arange(1000))
    k = cl.center.shape[0]
    assert 50 <= k <= 200 and cl.ptr[0] == 0 and cl.ptr[-1] == 1000
    for v in range(k):
        pts = X[cl.perm[cl.ptr[v]:cl.ptr[v + 1]]]
        assert len(pts) > 0 and np.all(cl.label[cl.ptr[v]:cl.ptr[v + 1]] == v)
        np.testing.assert_allclose(cl.center[v], pts.mean(0), rtol=1e-12)
        r = np.sqrt(((pts - pts.mean(0)) ** 2).sum(1)).max()
        assert r <= cl.radius[v] <= r * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_multiscale_truncated_matches_pot(always_truncate, metric):
    """'geomloss_multiscale' with every half-step on the points truncated
    (voxels of 4 points, reg 2e-3 on 2-D clouds: a third of the pairs skipped) gives
    POT's value, potentials and plan at reg (the truncation's 1e-10 per
    logsumexp is below the tolerances)."""
    X, Y = _clouds(70, 55, 2, seed=5)
    reg = 2e-3 if metric == "sqeuclidean" else 5e-3
    res = numbaot.solve_sample(X, Y, reg=reg, metric=metric, method="geomloss_multiscale",
                               scaling=0.7, tol=TIGHT, max_iter=100000)
    if metric == "sqeuclidean":
        _check_against_pot(res, X, Y, reg)
    else:
        ref = ot.bregman.empirical_sinkhorn2(X, Y, reg, metric="euclidean", isLazy=True,
                                             stopThr=TIGHT, numIterMax=100000)
        np.testing.assert_allclose(res.value_linear, ref, **F64)
    kept = res.log["kept_fraction"]  # the last patterns (measured 0.66-0.67 here)
    assert max(kept) < 0.75, kept


@pytest.mark.parametrize("d", [3, 40])
def test_voxel_clusters_against_a_loop(d):
    """Centroids and masses of the voxels of positive mass, against a dict of
    voxels built point by point; a voxel whose points all have zero weight
    is left out.  (In 40-D the bounding box holds more voxels than one int64
    key can number: the rows-as-keys path.)"""
    rng = np.random.default_rng(4)
    X = rng.random((200, d)) * 2.0 - 0.5
    w = rng.random(200)
    h = 0.37
    key = [tuple(np.floor(x / h).astype(int)) for x in X]
    w[[i for i, k in enumerate(key) if k == key[0]]] = 0.0  # one voxel without mass
    groups = {}
    for i, k in enumerate(key):
        groups.setdefault(k, []).append(i)
    C, A = _lazy.voxel_clusters(X, w, h)
    expect = sorted((k, w[idx].sum(), (w[idx, None] * X[idx]).sum(0) / w[idx].sum())
                    for k, idx in groups.items() if w[idx].sum() > 0)
    assert len(A) == len(expect) == len(groups) - 1
    np.testing.assert_allclose(A, [e[1] for e in expect], rtol=1e-14)
    np.testing.assert_allclose(C, np.array([e[2] for e in expect]), rtol=1e-13)


# --------------------------------------------------------------------------
# dtypes, weights, debias, backend choice
# --------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["geomloss_online", "geomloss_tensorized",
                                    "geomloss_multiscale"])
def test_float32(method):
    X, Y = _clouds(30, 22, 3, seed=7)
    r64 = numbaot.solve_sample(X, Y, reg=0.05, method=method, tol=1e-10, max_iter=100000)
    r32 = numbaot.solve_sample(X.astype(np.float32), Y.astype(np.float32), reg=0.05,
                               method=method, tol=1e-6, max_iter=100000)
    assert r32.value.dtype == np.float32 and r32.value_linear.dtype == np.float32
    assert r32.potentials[0].dtype == np.float32 and r32.potentials[1].dtype == np.float32
    np.testing.assert_allclose(r32.value, r64.value, rtol=1e-4)
    np.testing.assert_allclose(r32.value_linear, r64.value_linear, rtol=1e-4)
    assert r64.value.dtype == np.float64


def test_weights_and_zero_weights():
    """Non-uniform weights with zeros: the value is POT's dense one; the
    potentials stay finite (at a zero weight, the soft c-transform's value)."""
    X, Y = _clouds(20, 24, 2, seed=8)
    rng = np.random.default_rng(1)
    a, b = rng.random(20), rng.random(24)
    a[3] = 0.0
    b[[0, 7]] = 0.0
    a, b = a / a.sum(), b / b.sum()
    ref = ot.bregman.empirical_sinkhorn2(X, Y, 0.1, a, b, isLazy=True, stopThr=TIGHT,
                                         numIterMax=100000)
    for method in ("geomloss_online", "geomloss_tensorized", "geomloss_multiscale"):
        res = numbaot.solve_sample(X, Y, a, b, reg=0.1, method=method, scaling=0.5, tol=TIGHT,
                                   max_iter=100000)
        np.testing.assert_allclose(res.value_linear, ref, **F64)
        F, G = res.potentials
        assert np.all(np.isfinite(F)) and np.all(np.isfinite(G))
        # F_i = -reg log sum_j b_j exp((G_j - C_ij) / reg) at every i (zero a_i included)
        C = ot.dist(X, Y)
        with np.errstate(divide="ignore"):
            Ft = -0.1 * np.log(np.sum(b * np.exp((G[None, :] - C) / 0.1), axis=1))
        np.testing.assert_allclose(F, Ft, rtol=0, atol=1e-8)


def test_debias_matches_pot_divergence():
    """debias=True: value_linear = POT's empirical_sinkhorn_divergence (the
    transport costs W_ab - (W_aa + W_bb) / 2), value = the entropic
    divergence from the three values."""
    X, Y = _clouds(26, 31, 2, seed=9)
    reg = 0.05
    div = ot.bregman.empirical_sinkhorn_divergence(X, Y, reg, stopThr=TIGHT, numIterMax=100000)
    res = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_online", debias=True,
                               scaling=0.6, tol=TIGHT, max_iter=100000)
    np.testing.assert_allclose(res.value_linear, div, **F64)
    vals = [ot.solve_sample(P, Q, reg=reg, tol=TIGHT, max_iter=100000).value
            for P, Q in ((X, Y), (X, X), (Y, Y))]
    np.testing.assert_allclose(res.value, vals[0] - 0.5 * (vals[1] + vals[2]), **F64)
    assert set(res.log) == {"res_ab", "res_aa", "res_bb"}


def test_backend_choice():
    X, Y = _clouds(12, 9, 2)
    r_on = numbaot.solve_sample(X, Y, reg=0.1, method="geomloss", lazy=True)
    assert r_on.plan is None and r_on.lazy_plan is not None
    r_auto = numbaot.solve_sample(X, Y, reg=0.1, method="geomloss")
    assert r_auto.plan is not None and r_auto.plan.shape == (12, 9)
    r_auto2 = numbaot.solve_sample(X, Y, reg=0.1, method="geomloss_auto")
    np.testing.assert_allclose(r_auto2.plan, r_auto.plan)
    with pytest.warns(UserWarning, match="geomloss backend is set to 'auto'"):
        numbaot.solve_sample(X, Y, reg=0.1, method="geomloss", lazy=None)
    np.testing.assert_allclose(r_on.value, r_auto.value, rtol=1e-7)


def test_plain_lazy_ignores_scaling():
    """As POT, ``scaling`` is for the geomloss methods: lazy=True without one
    makes POT's iterates exactly."""
    X, Y = _clouds(15, 18, 2)
    r1 = numbaot.solve_sample(X, Y, reg=0.1, lazy=True, scaling=0.3)
    r2 = numbaot.solve_sample(X, Y, reg=0.1, lazy=True)
    assert r1.log["niter"] == r2.log["niter"] and "eps_schedule" not in r1.log
    np.testing.assert_array_equal(r1.potentials[0], r2.potentials[0])


def test_eps_schedule():
    assert _lazy.eps_schedule(1.0, 2.0, 0.5) == []
    assert _lazy.eps_schedule(1.0, 1.0, 0.5) == []
    np.testing.assert_allclose(_lazy.eps_schedule(1.0, 0.1, 0.5), [1.0, 0.5, 0.25, 0.125])
    np.testing.assert_allclose(_lazy.eps_schedule(1.0, 0.125, 0.5), [1.0, 0.5, 0.25])
    # reg larger than the data's diameter**2: no annealing stage
    X, Y = _clouds(10, 8, 2)
    res = numbaot.solve_sample(X, Y, reg=100.0, method="geomloss_online", tol=TIGHT)
    assert res.log["niter_scaling"] == 0 and res.log["eps_schedule"] == []


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------
@pytest.mark.parametrize("scaling", [0, 1, 1.5, -0.2, float("nan"), float("inf")])
@pytest.mark.parametrize("method", ["geomloss", "geomloss_online", "geomloss_tensorized"])
def test_bad_scaling(scaling, method):
    X, Y = _clouds(5, 6, 2)
    with pytest.raises(ValueError, match="scaling"):
        numbaot.solve_sample(X, Y, reg=0.1, method=method, scaling=scaling)


def test_bad_scaling_lazy_keyword():
    X, Y = _clouds(5, 6, 2)
    with pytest.raises(ValueError, match="scaling"):
        numbaot.bregman.empirical_sinkhorn2(X, Y, 0.1, isLazy=True, scaling=1.0)
    with pytest.raises(TypeError, match="scaling"):
        numbaot.solve_sample(X, Y, reg=0.1, method="geomloss_online", scaling="0.5")


@pytest.mark.parametrize("method", ["geomloss", "geomloss_online", "geomloss_tensorized",
                                    "geomloss_auto", "geomloss_multiscale"])
def test_dimension_mismatch(method):
    X, _ = _clouds(5, 6, 2)
    Y = np.random.default_rng(0).random((6, 3))
    with pytest.raises(ValueError, match="X_a and X_b must have the same dimension"):
        numbaot.solve_sample(X, Y, reg=0.1, method=method)


def test_not_implemented_cases():
    X, Y = _clouds(5, 6, 2)
    with pytest.raises(NotImplementedError, match="Exact OT"):
        numbaot.solve_sample(X, Y, method="geomloss_online")
    with pytest.raises(NotImplementedError, match="Unbalanced"):
        numbaot.solve_sample(X, Y, reg=0.1, unbalanced=1.0, method="geomloss_online")
    with pytest.raises(NotImplementedError, match="cityblock"):
        numbaot.solve_sample(X, Y, reg=0.1, metric="cityblock", method="geomloss_online")
    with pytest.raises(ValueError, match="reg"):
        numbaot.solve_sample(X, Y, reg=-1.0, method="geomloss_online")


# --------------------------------------------------------------------------
# devices
# --------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
@pytest.mark.parametrize("method", ["geomloss_online", "geomloss_multiscale"])
def test_annealing_on_device(device, method):
    """The annealing runs on the device's launchers (the temperature changes
    rewrite the device potentials; with 'geomloss_multiscale' also the coarse
    stages and the soft c-transforms onto the centroids): the value and
    potentials of the CPU run.  Small and few iterations (the CUDA simulator
    runs one Python thread per thread): max_iter 3, against 12 to
    convergence, the same iterates on both devices."""
    if method == "geomloss_online":
        X, Y = _clouds(10, 7, 3, seed=3)
    else:
        X, Y = _blobs(12, 2, 3, seed=13), _blobs(9, 2, 2, seed=14)
    kw = dict(reg=0.2, method=method, scaling=0.3, tol=1e-3, max_iter=3)
    ref = numbaot.solve_sample(X, Y, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = numbaot.solve_sample(device.put(X), device.put(Y), **kw)
    F = device.get(res.potentials[0])
    assert res.log["niter_scaling"] == ref.log["niter_scaling"] > 0
    if method == "geomloss_multiscale":
        assert res.log["niter_coarse"] == ref.log["niter_coarse"] > 0
        assert res.log["n_clusters"] == ref.log["n_clusters"]
    np.testing.assert_allclose(float(res.value), float(ref.value), rtol=1e-6)
    np.testing.assert_allclose(F - F.mean(), ref.potentials[0] - ref.potentials[0].mean(),
                               atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)
def test_dense_scaling_on_device(device):
    """``sinkhorn_log(scaling=...)`` anneals on the device's launchers: POT's
    plan (float64) at reg, small problem, few temperatures (the simulator)."""
    rng = np.random.default_rng(7)
    M = ot.dist(rng.random((9, 2)), rng.random((7, 2)))
    a, b = ot.unif(9), ot.unif(7)
    ref = ot.bregman.sinkhorn_log(a, b, M, 0.2, stopThr=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G, lg = numbaot.bregman.sinkhorn_log(device.put(a), device.put(b), device.put(M), 0.2,
                                             stopThr=1e-8, log=True, scaling=0.3)
    assert lg["niter_scaling"] == len(lg["eps_schedule"]) > 0
    np.testing.assert_allclose(device.get(G), ref, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("method", ["geomloss_online", "geomloss_multiscale",
                                    "geomloss_tensorized"])
def test_geomloss_value_is_the_dual_objective(method):
    """Before convergence (max_iter 2) the "geomloss*" value is GeomLoss's
    (POT's for these methods): the entropic dual objective of the returned
    potentials, sum a F + sum b G - reg sum_ij a_i b_j (exp((F_i + G_j -
    C_ij) / reg) - 1) computed densely here, a lower bound of POT's
    converged OT_reg."""
    X, Y = _clouds(40, 33, 2, seed=8)
    reg = 0.02
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = numbaot.solve_sample(X, Y, reg=reg, method=method, scaling=0.5, max_iter=2)
    F, G = (np.asarray(x, dtype=np.float64) for x in res.potentials)
    a, b = ot.unif(40), ot.unif(33)
    C = ot.dist(X, Y)
    dual = a @ F + b @ G - reg * np.sum(a[:, None] * b[None, :]
                                        * (np.exp((F[:, None] + G[None, :] - C) / reg) - 1))
    np.testing.assert_allclose(res.value, dual, rtol=1e-10)
    ref = ot.solve_sample(X, Y, reg=reg, tol=TIGHT, max_iter=100000).value
    assert res.value <= ref * (1 + 1e-12)
