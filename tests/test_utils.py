"""numbaot.dist / numbaot.unif (numbaot.utils.*) against POT, SciPy's cdist
and plain float64 loops."""
import numpy as np
import pytest
from scipy.spatial.distance import cdist

import numbaot
from _helpers import ot

SHAPES = [(1, 5), (6, 1), (7, 13), (40, 25), (1, 1)]
DIMS = [1, 2, 5]


def _points(n, m, d, seed, dtype=np.float64, scale=1.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.normal(size=(n, d))).astype(dtype), (scale * rng.normal(size=(m, d))).astype(dtype)


def _loop(x, y, metric, p=2):
    """Plain float64 double loop."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    D = np.empty((x.shape[0], y.shape[0]))
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            diff = x[i] - y[j]
            if metric == "sqeuclidean":
                D[i, j] = np.sum(diff * diff)
            elif metric == "euclidean":
                D[i, j] = np.sqrt(np.sum(diff * diff))
            elif metric == "cityblock":
                D[i, j] = np.sum(np.abs(diff))
            elif metric == "minkowski":
                D[i, j] = np.sum(np.abs(diff) ** p) ** (1 / p)
            elif metric == "chebyshev":
                D[i, j] = np.max(np.abs(diff))
            else:
                raise ValueError(metric)
    return D


def _tol(metric, dtype, x, y):
    """Absolute tolerance: POT's sqeuclidean uses |x|^2 + |y|^2 - 2 x.y, whose
    rounding error is ~eps * (|x|^2 + |y|^2); for euclidean the square root of
    that error near 0 (hence sqrt(eps) * scale)."""
    eps = np.finfo(dtype).eps
    s2 = float(max(np.max(np.sum(np.asarray(x, np.float64) ** 2, axis=1)),
                   np.max(np.sum(np.asarray(y, np.float64) ** 2, axis=1))))
    if metric == "sqeuclidean":
        return dict(rtol=10 * eps, atol=20 * eps * s2)
    if metric == "euclidean":
        return dict(rtol=10 * eps, atol=10 * np.sqrt(eps * s2))
    return dict(rtol=10 * eps, atol=10 * eps * np.sqrt(s2))


# ---------------------------------------------------------------------------
# native metrics
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean", "cityblock"])
def test_native_metrics(metric, shape, d, dtype):
    x, y = _points(*shape, d, seed=shape[0] * 100 + shape[1] * 10 + d, dtype=dtype)
    D = numbaot.dist(x, y, metric=metric)
    ref_pot = ot.dist(x, y, metric=metric)
    assert isinstance(D, np.ndarray)
    assert D.shape == shape
    assert D.dtype == ref_pot.dtype == dtype
    t = _tol(metric, dtype, x, y)
    np.testing.assert_allclose(D, _loop(x, y, metric), **t)
    np.testing.assert_allclose(D, ref_pot, **t)
    assert np.all(D >= 0)


def test_default_metric_is_sqeuclidean():
    x, y = _points(7, 9, 3, seed=1)
    np.testing.assert_array_equal(numbaot.dist(x, y), numbaot.dist(x, y, metric="sqeuclidean"))
    np.testing.assert_allclose(numbaot.dist(x, y), _loop(x, y, "sqeuclidean"), **_tol("sqeuclidean", np.float64, x, y))


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean", "cityblock"])
def test_self_distance(metric):
    """dist(x) == dist(x, x): symmetric with an exactly zero diagonal (POT
    zeroes it for the Euclidean metrics; |x - x| = 0 exactly for cityblock)."""
    x, _ = _points(20, 1, 3, seed=2, scale=5.0)
    D = numbaot.dist(x, metric=metric)
    assert D.shape == (20, 20)
    assert np.all(np.diag(D) == 0)
    np.testing.assert_allclose(D, D.T, rtol=1e-14, atol=0)
    np.testing.assert_allclose(D, ot.dist(x, metric=metric), **_tol(metric, np.float64, x, x))
    np.testing.assert_allclose(D, _loop(x, x, metric), **_tol(metric, np.float64, x, x))


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_duplicate_points_are_non_negative(metric):
    """Equal rows in x and y (different arrays): the expansion
    |x|^2 + |y|^2 - 2 x.y can round below 0; POT clamps at 0 (no NaN from
    the square root)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 4)) * 1e3 + 1e4
    y = x[::-1].copy()
    D = numbaot.dist(x, y, metric=metric)
    assert np.all(np.isfinite(D)) and np.all(D >= 0)
    np.testing.assert_allclose(D, _loop(x, y, metric), **_tol(metric, np.float64, x, y))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", [64, 65])
@pytest.mark.parametrize("shape", [(30, 20), (400, 380)])
@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_compiled_and_numpy_paths_agree_with_loops(metric, shape, d, dtype):
    """Up to ``_config.DIST_DIRECT_MAX_FEATURES`` (64) features the distances
    come from the compiled loop (on the calling thread for small matrices,
    rows in parallel above ``DIST_SERIAL_MAX_ENTRIES``: 400 x 380), above it
    from POT's formula; both within POT's rounding of the float64 loops, the
    samples untouched, and exact zeros between equal points on the compiled
    path."""
    from numbaot import _config

    assert _config.DIST_DIRECT_MAX_FEATURES == 64 and 30 * 20 < _config.DIST_SERIAL_MAX_ENTRIES
    assert 400 * 380 > _config.DIST_SERIAL_MAX_ENTRIES
    x, y = _points(*shape, d, seed=d, dtype=dtype)
    cols = np.arange(0, len(y), 7)
    y[cols] = x[:len(cols)]  # equal pairs (k, 7 k)
    x0, y0 = x.copy(), y.copy()
    xs = np.asfortranarray(x)  # any layout
    D = numbaot.dist(xs, y, metric=metric)
    assert D.dtype == dtype and D.shape == shape
    np.testing.assert_array_equal(xs, x0)
    np.testing.assert_array_equal(y, y0)
    t = _tol(metric, dtype, x, y)
    np.testing.assert_allclose(D, _loop(x, y, metric), **t)
    np.testing.assert_allclose(D, ot.dist(x, y, metric=metric), **t)
    if d <= 64:
        assert np.all(D[np.arange(len(cols)), cols] == 0)
    mixed = numbaot.dist(x.astype(np.float32), y.astype(np.float64), metric=metric)
    assert mixed.dtype == np.float64


def test_large_offset_inputs():
    """Points far from the origin (cancellation in the expansion formula)."""
    x, y = _points(8, 6, 3, seed=4)
    x += 1e3
    y += 1e3
    D = numbaot.dist(x, y)
    np.testing.assert_allclose(D, _loop(x, y, "sqeuclidean"), **_tol("sqeuclidean", np.float64, x, y))


@pytest.mark.parametrize("func", ["dist", "unif"])
def test_signature_matches_pot(func):
    import inspect

    assert inspect.signature(getattr(numbaot.utils, func)) == inspect.signature(getattr(ot.utils, func))


def test_integer_and_list_inputs():
    rng = np.random.default_rng(5)
    x = rng.integers(-5, 5, size=(6, 2))
    y = rng.integers(-5, 5, size=(4, 2))
    for metric in ("sqeuclidean", "euclidean", "cityblock"):
        ref = ot.dist(x, y, metric=metric)
        D = numbaot.dist(x, y, metric=metric)
        np.testing.assert_allclose(D, _loop(x, y, metric), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(D, ref, rtol=1e-12, atol=1e-12)
    xl, yl = x.astype(float).tolist(), y.astype(float).tolist()
    np.testing.assert_allclose(numbaot.dist(np.array(xl), np.array(yl)), _loop(x, y, "sqeuclidean"), rtol=1e-12)


def test_non_contiguous_inputs():
    x, y = _points(10, 12, 3, seed=6)
    xf, yf = np.asfortranarray(x), np.asfortranarray(y)
    xs = np.repeat(x, 2, axis=0)[::2]
    for metric in ("sqeuclidean", "euclidean", "cityblock"):
        ref = _loop(x, y, metric)
        t = _tol(metric, np.float64, x, y)
        np.testing.assert_allclose(numbaot.dist(xf, yf, metric=metric), ref, **t)
        np.testing.assert_allclose(numbaot.dist(xs, y, metric=metric), ref, **t)
        np.testing.assert_allclose(numbaot.dist(x.T.copy().T, y[:, ::-1][:, ::-1], metric=metric), ref, **t)


# ---------------------------------------------------------------------------
# other metrics (SciPy / POT formulas)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "metric, kwargs",
    [
        ("minkowski", dict(p=3)),
        ("minkowski", dict(p=1.5)),
        ("minkowski", dict()),
        ("cosine", dict()),
        ("correlation", dict()),
        ("chebyshev", dict()),
        ("canberra", dict()),
        ("braycurtis", dict()),
        ("seuclidean", dict()),
        ("hamming", dict()),
    ],
    ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(f"{k}={x}" for k, x in v.items()),
)
def test_other_metrics_match_pot(metric, kwargs, dtype):
    x, y = _points(9, 7, 4, seed=7, dtype=dtype)
    ref = ot.dist(x, y, metric=metric, **kwargs)
    D = numbaot.dist(x, y, metric=metric, **kwargs)
    assert D.shape == (9, 7)
    assert D.dtype == ref.dtype
    eps = np.finfo(ref.dtype).eps
    np.testing.assert_allclose(D, ref, rtol=100 * eps, atol=100 * eps)
    if metric in ("chebyshev", "minkowski"):
        np.testing.assert_allclose(D, _loop(x, y, metric, p=kwargs.get("p", 2)), rtol=100 * eps, atol=100 * eps)
    elif metric != "hamming" or dtype == np.float64:
        # SciPy itself (float64)
        c = cdist(x.astype(np.float64), y.astype(np.float64), metric=metric, **kwargs)
        np.testing.assert_allclose(D, c, rtol=1e-4 if dtype == np.float32 else 1e-10,
                                   atol=1e-5 if dtype == np.float32 else 1e-12)


def test_weighted_minkowski():
    x, y = _points(6, 5, 3, seed=8)
    w = np.array([0.5, 1.0, 2.0])
    ref = ot.dist(x, y, metric="minkowski", p=3, w=w)
    D = numbaot.dist(x, y, metric="minkowski", p=3, w=w)
    loop = np.array([[np.sum(w * np.abs(xi - yj) ** 3) ** (1 / 3) for yj in y] for xi in x])
    np.testing.assert_allclose(D, ref, rtol=1e-12)
    np.testing.assert_allclose(D, loop, rtol=1e-12)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean", "cityblock", "cosine", "chebyshev"])
def test_backend_scipy(metric):
    x, y = _points(6, 5, 3, seed=9)
    D = numbaot.dist(x, y, metric=metric, backend="scipy")
    np.testing.assert_allclose(D, cdist(x, y, metric=metric), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D, ot.dist(x, y, metric=metric, backend="scipy"), rtol=1e-12, atol=1e-12)


def test_callable_metric():
    x, y = _points(5, 4, 2, seed=10)

    def l_inf(u, v):
        return float(np.max(np.abs(u - v)))

    D = numbaot.dist(x, y, metric=l_inf)
    np.testing.assert_allclose(D, _loop(x, y, "chebyshev"), rtol=1e-15)
    np.testing.assert_allclose(D, ot.dist(x, y, metric=l_inf), rtol=1e-15)


@pytest.mark.parametrize("metric", ["cityblock", "minkowski"])
def test_use_tensor_flag(metric):
    x, y = _points(6, 5, 3, seed=11)
    ref = ot.dist(x, y, metric=metric, use_tensor=True)
    D = numbaot.dist(x, y, metric=metric, use_tensor=True)
    np.testing.assert_allclose(D, ref, rtol=1e-12, atol=1e-14)


def test_unknown_metric_raises_like_scipy():
    x, y = _points(3, 4, 2, seed=12)
    with pytest.raises(ValueError):
        ot.dist(x, y, metric="no-such-metric")
    with pytest.raises(ValueError):
        numbaot.dist(x, y, metric="no-such-metric")


# ---------------------------------------------------------------------------
# unif
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 1000])
def test_unif(n):
    h = numbaot.unif(n)
    assert isinstance(h, np.ndarray)
    assert h.shape == (n,) and h.dtype == np.float64
    # 1/n correctly rounded, in every bin (closed form)
    assert np.all(h == 1.0 / n)
    np.testing.assert_array_equal(h, ot.unif(n))
    assert abs(h.sum() - 1.0) <= n * np.finfo(np.float64).eps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unif_type_as(dtype):
    h = numbaot.unif(7, type_as=np.zeros(3, dtype=dtype))
    assert h.dtype == dtype
    assert np.all(h == dtype(1.0) / dtype(7))
    ref = ot.unif(7, type_as=np.zeros(3, dtype=dtype))
    assert ref.dtype == h.dtype
    np.testing.assert_array_equal(h, ref)


def test_unif_is_a_fresh_array():
    h1 = numbaot.unif(4)
    h1[0] = 5.0
    assert numbaot.unif(4)[0] == 0.25
