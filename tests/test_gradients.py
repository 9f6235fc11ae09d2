"""Gradients of the entropic OT value (numbaot.gradients) against central
finite differences of the same function in float64, and the value against a
dense NumPy evaluation of <P, M> + reg * sum P log P."""
import numpy as np
import ot
import pytest

import numbaot
from numbaot.gradients import empirical_sinkhorn2_value_and_grad, sinkhorn2_value_and_grad

TIGHT = dict(numItermax=20000, stopThr=1e-14)
H = 1e-6


def _fd(fun, x, direction, h=H):
    return (fun(x + h * direction) - fun(x - h * direction)) / (2 * h)


def _problem(rng, n=7, m=9):
    M = rng.random((n, m))
    a = rng.random(n) + 0.1
    b = rng.random(m) + 0.1
    return a / a.sum(), b / b.sum(), M


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_gradients_match_finite_differences(rng, method):
    a, b, M = _problem(rng)
    kw = dict(method=method, **TIGHT)
    val, g = sinkhorn2_value_and_grad(a, b, M, 0.2, **kw)
    for _ in range(3):
        E = rng.normal(size=M.shape)
        fd = _fd(lambda X: sinkhorn2_value_and_grad(a, b, X, 0.2, **kw)[0], M, E)
        np.testing.assert_allclose(np.sum(g["M"] * E), fd, rtol=1e-6, atol=1e-9)
        da = rng.normal(size=a.shape)
        da -= da.mean()  # mass-preserving direction
        fd = _fd(lambda x: sinkhorn2_value_and_grad(x, b, M, 0.2, **kw)[0], a, da)
        np.testing.assert_allclose(g["a"] @ da, fd, rtol=1e-6, atol=1e-9)
        db = rng.normal(size=b.shape)
        db -= db.mean()
        fd = _fd(lambda x: sinkhorn2_value_and_grad(a, x, M, 0.2, **kw)[0], b, db)
        np.testing.assert_allclose(g["b"] @ db, fd, rtol=1e-6, atol=1e-9)
    # the value is <P, M> + reg * sum P log P at the returned plan (dense oracle)
    P = g["M"]
    np.testing.assert_allclose(val, np.sum(P * M) + 0.2 * np.sum(P * np.log(P)), rtol=1e-12)
    np.testing.assert_allclose(g["a"].sum(), 0.0, atol=1e-12)


def test_seed_setting_three_gaussians_reg_1e_3():
    """The seed notebook's 1-D setting: 100 bins on [0, 1], Gaussian
    histograms, squared distance, reg = 1e-3 (log domain)."""
    x = np.linspace(0, 1, 100)
    hists = [np.exp(-((x - mu) ** 2) / (2 * s ** 2)) for mu, s in ((0.2, 0.05), (0.5, 0.08),
                                                                    (0.8, 0.04))]
    a, b, c = (h / h.sum() for h in hists)
    M = (x[:, None] - x[None, :]) ** 2
    kw = dict(method="sinkhorn_log", numItermax=5000, stopThr=1e-13)
    for p, q in ((a, b), (b, c)):
        val, g = sinkhorn2_value_and_grad(p, q, M, 1e-3, **kw)
        rng = np.random.default_rng(0)
        d = rng.normal(size=100) * p
        d -= p * d.sum() / p.sum()  # mass-preserving, stays positive for small h
        fd = _fd(lambda y: sinkhorn2_value_and_grad(y, q, M, 1e-3, **kw)[0], p, d, h=1e-7)
        np.testing.assert_allclose(g["a"] @ d, fd, rtol=1e-5, atol=1e-10)
        E = rng.normal(size=M.shape)
        fd = _fd(lambda X: sinkhorn2_value_and_grad(p, q, X, 1e-3, **kw)[0], M, E, h=1e-7)
        np.testing.assert_allclose(np.sum(g["M"] * E), fd, rtol=1e-5, atol=1e-10)


def test_batches_give_per_problem_values_and_gradients(rng):
    a, b, M = _problem(rng)
    B = np.stack([b, b[::-1], np.roll(b, 3)], axis=1)
    A = np.stack([a, a[::-1], np.roll(a, 2)], axis=1)
    for aa in (a, A):
        vals, g = sinkhorn2_value_and_grad(aa, B, M, 0.3, method="sinkhorn_log", **TIGHT)
        assert vals.shape == (3,) and g["M"].shape == (3,) + M.shape
        assert g["b"].shape == B.shape and g["a"].shape == (a.shape[0], 3)
        for k in range(3):
            ak = aa if aa.ndim == 1 else aa[:, k]
            v1, g1 = sinkhorn2_value_and_grad(ak, B[:, k], M, 0.3, method="sinkhorn_log", **TIGHT)
            np.testing.assert_allclose(vals[k], v1, rtol=1e-10)
            np.testing.assert_allclose(g["M"][k], g1["M"], rtol=1e-8, atol=1e-15)
            np.testing.assert_allclose(g["b"][:, k], g1["b"], rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_point_cloud_gradients(rng, metric):
    Xs = rng.normal(size=(6, 2))
    Xt = rng.normal(size=(8, 2)) + 0.3
    kw = dict(numIterMax=50000, stopThr=1e-14, metric=metric)
    val, g = empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.5, **kw)
    E = rng.normal(size=Xs.shape)
    fd = _fd(lambda X: empirical_sinkhorn2_value_and_grad(X, Xt, 0.5, **kw)[0], Xs, E)
    np.testing.assert_allclose(np.sum(g["X_s"] * E), fd, rtol=1e-6, atol=1e-9)
    E = rng.normal(size=Xt.shape)
    fd = _fd(lambda X: empirical_sinkhorn2_value_and_grad(Xs, X, 0.5, **kw)[0], Xt, E)
    np.testing.assert_allclose(np.sum(g["X_t"] * E), fd, rtol=1e-6, atol=1e-9)
    a = np.full(6, 1 / 6)
    da = rng.normal(size=6)
    da -= da.mean()
    fd = _fd(lambda x: empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.5, a=x, **kw)[0], a, da)
    np.testing.assert_allclose(g["a"] @ da, fd, rtol=1e-6, atol=1e-9)
    # same value as the dense computation on the explicit cost matrix
    Md = ((Xs[:, None] - Xt[None]) ** 2).sum(-1)
    Md = np.sqrt(Md) if metric == "euclidean" else Md
    vd, gd = sinkhorn2_value_and_grad([], [], Md, 0.5, method="sinkhorn_log", **TIGHT)
    np.testing.assert_allclose(val, vd, rtol=1e-10)


def test_point_cloud_gradients_multiscale(rng, monkeypatch):
    """scaling / multiscale change the path to the potentials, not the
    answer: with a tight stopThr the value equals the dense computation and
    the gradient w.r.t. the points matches central differences of the value
    (both through the multiscale path, whose coarse stages ran)."""
    from numbaot import _lazy

    runs = []
    anneal = _lazy.multiscale_anneal

    def spy(pb, *args):
        out = anneal(pb, *args)
        runs.append(out)
        return out

    monkeypatch.setattr(_lazy, "multiscale_anneal", spy)
    Xs = rng.random((40, 2))
    Xt = rng.random((35, 2)) * 0.8 + 0.2
    kw = dict(numIterMax=50000, stopThr=1e-14, scaling=0.5, multiscale=True)
    val, g = empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.05, **kw)
    assert runs and runs[0][0] > 0  # iterations on the voxel centroids
    Md = ((Xs[:, None] - Xt[None]) ** 2).sum(-1)
    vd, _ = sinkhorn2_value_and_grad([], [], Md, 0.05, method="sinkhorn_log", **TIGHT)
    np.testing.assert_allclose(val, vd, rtol=1e-10)
    for X, key in ((Xs, "X_s"), (Xt, "X_t")):
        E = rng.normal(size=X.shape)

        def value(Y, key=key):
            args = (Y, Xt) if key == "X_s" else (Xs, Y)
            return empirical_sinkhorn2_value_and_grad(*args, 0.05, **kw)[0]

        np.testing.assert_allclose(np.sum(g[key] * E), _fd(value, X, E), rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="multiscale"):
        empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.05, multiscale=True)
    with pytest.raises(ValueError, match="scaling"):
        empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.05, scaling=1.5)


def test_point_cloud_batch(rng):
    """A batch runs its problems one after the other: bit for bit the
    single-problem calls."""
    Xs, Xt = rng.normal(size=(5, 2)), rng.normal(size=(6, 2))
    B = rng.random((6, 2)) + 0.1
    B /= B.sum(0)
    A = rng.random((5, 2)) + 0.1
    A /= A.sum(0)
    for aa in (None, A):
        vals, g = empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.5, a=aa, b=B, numIterMax=5000,
                                                     stopThr=1e-13)
        assert vals.shape == (2,) and g["X_s"].shape == (2, 5, 2) and g["b"].shape == (6, 2)
        assert g["a"].shape == (5, 2) and g["X_t"].shape == (2, 6, 2)
        for k in range(2):
            v1, g1 = empirical_sinkhorn2_value_and_grad(
                Xs, Xt, 0.5, a=None if aa is None else aa[:, k], b=B[:, k], numIterMax=5000,
                stopThr=1e-13)
            assert vals[k] == v1
            for key in ("X_s", "X_t"):
                np.testing.assert_array_equal(g[key][k], g1[key])
            for key in ("a", "b"):
                np.testing.assert_array_equal(g[key][:, k], g1[key])


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_float32_potentials_are_those_of_the_log_dict(rng, method):
    """On the CPU a float32 problem is differentiated at the scalings as the
    log dict of ``sinkhorn_knopp`` / ``sinkhorn_log`` holds them (float32):
    grad a is exactly reg * (log u - mean) of those, computed in float64."""
    from numbaot.bregman import sinkhorn_knopp, sinkhorn_log

    a, b, M = (x.astype(np.float32) for x in _problem(rng))
    solver = sinkhorn_log if method == "sinkhorn_log" else sinkhorn_knopp
    _, lg = solver(a, b, M, 0.2, numItermax=40, log=True, warn=False)
    val, g = sinkhorn2_value_and_grad(a, b, M, 0.2, method=method, numItermax=40)
    assert isinstance(val, np.float32) and all(g[k].dtype == np.float32 for k in g)
    for key, name in (("a", "u"), ("b", "v")):
        if method == "sinkhorn_log":
            lx = np.asarray(lg["log_" + name], dtype=np.float64)
        else:
            lx = np.log(np.asarray(lg[name], dtype=np.float64))
        np.testing.assert_array_equal(g[key], (0.2 * (lx - lx.mean())).astype(np.float32))


def test_bad_input(rng):
    a, b, M = _problem(rng)
    with pytest.raises(ValueError, match="Unknown method"):
        sinkhorn2_value_and_grad(a, b, M, 0.1, method="greenkhorn")
    with pytest.raises(ValueError, match="reg"):
        sinkhorn2_value_and_grad(a, b, M, -1.0)
    with pytest.raises(ValueError, match="metric"):
        empirical_sinkhorn2_value_and_grad(np.ones((3, 2)), np.ones((3, 2)), 0.1, metric="cosine")


def test_exported():
    assert numbaot.sinkhorn2_value_and_grad is sinkhorn2_value_and_grad
    assert numbaot.empirical_sinkhorn2_value_and_grad is empirical_sinkhorn2_value_and_grad


# --------------------------------------------------------------------------
# zero-weight bins: numbaot's convention (issue 22, item 7)
# --------------------------------------------------------------------------
def _entropic_value(P, M, reg):
    """<P, M> + reg * sum P log P (0 log 0 = 0) of a dense plan."""
    nz = P > 0
    return float(np.sum(P * M) + reg * np.sum(P[nz] * np.log(P[nz])))


def _zero_bin_problem(rng):
    a, b, M = _problem(rng, 6, 5)
    a[[0, 3]] = 0.0
    b[2] = 0.0
    return a / a.sum(), b / b.sum(), M


def _zero_bin_reg(device):
    """reg of the zero-bin tests: 0.1 on the CPU (40 iterations to 1e-14);
    1.0 on CUDA (10 iterations: the simulator takes seconds per iteration)."""
    return 1.0 if device.is_cuda else 0.1


def _expected_zero_bin_grads(a, b, M, reg):
    """The convention from POT's log-domain potentials (float64 closed
    form): reg * (log u_i - mean over the positive bins) at a positive
    bin, reg * (t_i - that mean) at a zero bin, t the soft c-transform
    -log sum_j exp(-M_ij / reg + log v_j) (columns alike)."""
    from scipy.special import logsumexp

    with np.errstate(divide="ignore"):
        _, log = ot.bregman.sinkhorn_log(a, b, M, reg, numItermax=100000, stopThr=1e-14,
                                         log=True)
    lu, lv = log["log_u"], log["log_v"]
    t_a = -logsumexp(-M / reg + lv[None, :], axis=1)
    t_b = -logsumexp(-M / reg + lu[:, None], axis=0)
    ga = reg * (np.where(a > 0, lu, t_a) - lu[a > 0].mean())
    gb = reg * (np.where(b > 0, lv, t_b) - lv[b > 0].mean())
    return ga, gb


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_zero_weight_bins_convention(rng, device, method):
    """Both methods (and both devices) give the documented, finite
    gradient at zero-weight bins, and leave the positive bins' as before."""
    a, b, M = _zero_bin_problem(rng)
    reg = _zero_bin_reg(device)
    ga, gb = _expected_zero_bin_grads(a, b, M, reg)
    val, g = sinkhorn2_value_and_grad(device.put(a), device.put(b), device.put(M), reg,
                                      method=method, **TIGHT)
    got_a, got_b = device.get(g["a"]), device.get(g["b"])
    assert np.all(np.isfinite(got_a)) and np.all(np.isfinite(got_b))
    np.testing.assert_allclose(got_a, ga, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got_b, gb, rtol=0, atol=1e-9)
    P = device.get(g["M"])
    assert np.all(P[a == 0] == 0) and np.all(P[:, b == 0] == 0)


def test_zero_weight_bins_convention_batch(rng, device):
    """2-D b whose histograms have their zero bins in different places."""
    a, b, M = _zero_bin_problem(rng)
    b2 = b[::-1].copy()
    B = np.stack([b, b2], axis=1)
    reg = _zero_bin_reg(device)
    val, g = sinkhorn2_value_and_grad(device.put(a), device.put(B), device.put(M), reg,
                                      method="sinkhorn_log", **TIGHT)
    got_a, got_b = device.get(g["a"]), device.get(g["b"])
    for k, bk in enumerate((b, b2)):
        ga, gb = _expected_zero_bin_grads(a, bk, M, reg)
        np.testing.assert_allclose(got_a[:, k], ga, rtol=0, atol=1e-9)
        np.testing.assert_allclose(got_b[:, k], gb, rtol=0, atol=1e-9)


def test_zero_weight_bin_gradient_is_a_one_sided_derivative(rng):
    """What the convention means: with a_i0 = 0, moving mass eps from a
    positive bin p into i0 changes value - reg * (eps log eps - eps) (the
    value without the bin's own entropy term, whose slope is -inf at 0) at
    the rate grad[i0] - grad[p].  Oracle: POT's plans, one-sided finite
    differences, Richardson-extrapolated."""
    a, b, M = _zero_bin_problem(rng)
    reg, i0, p = 0.1, 0, 1
    _, g = sinkhorn2_value_and_grad(a, b, M, reg, method="sinkhorn_log", **TIGHT)

    def D(eps):
        x = a.copy()
        x[i0] += eps
        x[p] -= eps
        with np.errstate(divide="ignore"):
            P = ot.bregman.sinkhorn_log(x, b, M, reg, numItermax=100000, stopThr=1e-15)
        own = eps * np.log(eps) - eps if eps > 0 else 0.0
        return _entropic_value(P, M, reg) - reg * own

    h = 1e-5
    d1 = (D(h) - D(0.0)) / h
    d2 = (D(2 * h) - D(0.0)) / (2 * h)
    slope = 2 * d1 - d2  # the O(h) term cancels
    np.testing.assert_allclose(g["a"][i0] - g["a"][p], slope, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------
# zero-weight points: the same convention for point clouds (issue 22)
# --------------------------------------------------------------------------
def _zero_bin_clouds(rng):
    X_s, X_t = rng.random((6, 2)), rng.random((5, 2))
    a, b, _ = _zero_bin_problem(rng)
    return X_s, X_t, a, b


def _pot_cost(X_s, X_t, metric):
    return ot.dist(X_s, X_t, metric=metric)  # POT's dense cost (sqeuclidean / euclidean)


#: reg of the batch case: 10 iterations to 1e-14 (reg 0.1 takes 70, at
#: seconds per iteration in the CUDA simulator)
_CLOUD_REG = 1.0


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("reg", [0.05, 0.5])
def test_empirical_zero_weight_points_convention(rng, metric, reg):
    """empirical_sinkhorn2_value_and_grad at zero-weight points: the dense
    rule, reg * (t_i - mean over the positive points), t the soft
    c-transform; oracle: POT's log-domain potentials on POT's dense cost
    (float64 closed form).  The CUDA launcher: the batch case below."""
    X_s, X_t, a, b = _zero_bin_clouds(rng)
    ga, gb = _expected_zero_bin_grads(a, b, _pot_cost(X_s, X_t, metric), reg)
    _, g = empirical_sinkhorn2_value_and_grad(X_s, X_t, reg, a, b, metric=metric,
                                              numIterMax=20000, stopThr=1e-14)
    got_a, got_b = g["a"], g["b"]
    assert np.all(np.isfinite(got_a)) and np.all(np.isfinite(got_b))
    np.testing.assert_allclose(got_a, ga, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got_b, gb, rtol=0, atol=1e-9)


def test_empirical_zero_weight_points_batch(rng, device):
    """2-D b (and a paired 2-D a) with the zero points in different places,
    on both devices (the CUDA launcher writes column k of the batch)."""
    X_s, X_t, a, b = _zero_bin_clouds(rng)
    a2, b2 = a[::-1].copy(), np.roll(b, 2)
    A, B = np.stack([a, a2], axis=1), np.stack([b, b2], axis=1)
    _, g = empirical_sinkhorn2_value_and_grad(device.put(X_s), device.put(X_t), _CLOUD_REG,
                                              device.put(A), device.put(B),
                                              numIterMax=20000, stopThr=1e-14)
    got_a, got_b = device.get(g["a"]), device.get(g["b"])
    M = _pot_cost(X_s, X_t, "sqeuclidean")
    for k, (ak, bk) in enumerate(((a, b), (a2, b2))):
        ga, gb = _expected_zero_bin_grads(ak, bk, M, _CLOUD_REG)
        np.testing.assert_allclose(got_a[:, k], ga, rtol=0, atol=1e-9)
        np.testing.assert_allclose(got_b[:, k], gb, rtol=0, atol=1e-9)


def _pot_value(x, y, M, reg):
    """<P, M> + reg sum P log P at POT's converged log-domain plan."""
    with np.errstate(divide="ignore"):
        P = ot.bregman.sinkhorn_log(x, y, M, reg, numItermax=100000, stopThr=1e-15)
    return _entropic_value(P, M, reg)


@pytest.mark.parametrize("side", ["a", "b"])
def test_empirical_zero_weight_points_finite_differences(rng, side):
    """What the rule means, checked against POT's plans (float64): along a
    mass-preserving direction on the positive points, central differences
    of the value match grad; moving mass eps from a positive point p into a
    zero point z changes value - reg * (eps log eps - eps) at the rate
    grad[z] - grad[p] (one-sided differences, Richardson-extrapolated:
    the value is not defined for eps < 0)."""
    X_s, X_t, a, b = _zero_bin_clouds(rng)
    reg = 0.1
    M = _pot_cost(X_s, X_t, "sqeuclidean")
    _, g = empirical_sinkhorn2_value_and_grad(X_s, X_t, reg, a, b, numIterMax=20000,
                                              stopThr=1e-14)
    w, gw = (a, g["a"]) if side == "a" else (b, g["b"])

    def value(x):
        return _pot_value(x, b, M, reg) if side == "a" else _pot_value(a, x, M, reg)

    pos = w > 0
    d = np.where(pos, rng.normal(size=w.shape), 0.0)
    d[pos] -= d[pos].mean()
    h = 1e-6
    fd = (value(w + h * d) - value(w - h * d)) / (2 * h)
    np.testing.assert_allclose(gw @ d, fd, rtol=1e-6, atol=1e-9)

    z, p = int(np.flatnonzero(~pos)[0]), int(np.flatnonzero(pos)[0])

    def D(eps):
        x = w.copy()
        x[z] += eps
        x[p] -= eps
        own = eps * np.log(eps) - eps if eps > 0 else 0.0
        return value(x) - reg * own

    h = 1e-5
    d1 = (D(h) - D(0.0)) / h
    d2 = (D(2 * h) - D(0.0)) / (2 * h)
    np.testing.assert_allclose(gw[z] - gw[p], 2 * d1 - d2, rtol=0, atol=1e-6)
