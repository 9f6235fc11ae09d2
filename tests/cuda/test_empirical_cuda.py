"""Lazy point-cloud Sinkhorn on CUDA device arrays (simulator in CI, or a
GPU): float32 across two warps against numbaot's CPU path, the launcher
contract, and kernel truncation (truncated half-steps against a dense
logsumexp, the multiscale solver against the CPU's).  The comparison with
POT on both devices is in tests/test_devices.py."""
import numpy as np
import pytest

from numbaot._dispatch import is_device_array
from numbaot.bregman import empirical_sinkhorn


def _clouds(rng, n=5, m=7, dtype=np.float64):
    return (rng.normal(size=(n, 2)).astype(dtype), (rng.normal(size=(m, 2)) + 0.5).astype(dtype))


def test_lazy_float32_on_device(cuda, rng, multi_warp):
    Xs, Xt = _clouds(rng, n=2, m=40, dtype=np.float32)  # 40 targets: two warps
    f, g = empirical_sinkhorn(cuda.to_device(Xs), cuda.to_device(Xt), 0.5, isLazy=True,
                              numIterMax=1, warn=False)
    assert f.dtype == np.float32
    fc, gc = empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, numIterMax=1, warn=False)
    np.testing.assert_allclose(f.copy_to_host(), fc, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g.copy_to_host(), gc, rtol=1e-4, atol=1e-4)


_LAUNCHERS = ("LazyState", "lazy_steps", "lazy_row_lse", "lazy_truncate", "lazy_kept_fraction",
              "lazy_potentials", "lazy_outputs", "lazy_transport_cost")


def test_launchers_same_contract_as_cpu(cuda, rng):
    """numbaot.cpu.empirical and numbaot.cuda.empirical expose the same lazy
    launchers (names and signatures); driven with the same host float64
    inputs they give the same iterates, stopping-test values and costs."""
    import inspect

    from numbaot.cpu import empirical as cpu_e
    from numbaot.cuda import empirical as gpu_e

    for name in _LAUNCHERS:
        assert inspect.signature(getattr(cpu_e, name)) == inspect.signature(getattr(gpu_e, name))
    Xs, Xt = _clouds(rng, n=3, m=7)
    b = rng.random(7) + 0.1
    b[5] = 0.0  # a zero weight: -inf potential
    b /= b.sum()
    with np.errstate(divide="ignore"):
        log_a, log_b = np.log(np.full(3, 1 / 3)), np.log(b)
    for metric in (0, 1):
        states = [be.LazyState(Xs, Xt, log_a.copy(), log_b.copy(), np.zeros(3), np.zeros(7),
                               -2.0, metric, np.dtype(np.float64)) for be in (cpu_e, gpu_e)]
        for be, st in zip((cpu_e, gpu_e), states):
            be.lazy_steps(st, 2)
        (f_c, lse_c), (f_g, lse_g) = (be.lazy_row_lse(st) for be, st in zip((cpu_e, gpu_e), states))
        assert isinstance(f_g, np.ndarray) and f_g.dtype == np.float64
        np.testing.assert_allclose(f_g, f_c, rtol=1e-12)
        np.testing.assert_allclose(lse_g, lse_c, rtol=1e-12)
        (fc, gc), (fg, gg) = (be.lazy_potentials(st) for be, st in zip((cpu_e, gpu_e), states))
        np.testing.assert_allclose(fg, fc, rtol=1e-12)
        assert np.isneginf(gc[5]) and np.isneginf(gg[5])
        np.testing.assert_allclose(gg, gc, rtol=1e-12)
        np.testing.assert_allclose(gpu_e.lazy_transport_cost(states[1]),
                                   cpu_e.lazy_transport_cost(states[0]), rtol=1e-12)
        out_c = cpu_e.lazy_outputs(states[0], Xs)
        out_g = gpu_e.lazy_outputs(states[1], cuda.to_device(Xs))
        assert all(isinstance(x, np.ndarray) for x in out_c)
        assert all(is_device_array(x) for x in out_g)
        np.testing.assert_array_equal(out_c[0], fc)


# --------------------------------------------------------------------------
# kernel truncation (the multiscale path): voxel pairs skipped by bounds
# --------------------------------------------------------------------------
@pytest.fixture
def always_truncate(monkeypatch):
    """Every half-step truncated, however many pairs its pattern keeps, on
    voxels of 3 points: small problems then skip pairs too."""
    from numbaot import _config

    monkeypatch.setattr(_config, "LAZY_TRUNCATION_MAX_KEPT", 1.0)
    monkeypatch.setattr(_config, "LAZY_TRUNCATION_CLUSTER_POINTS", 3)


@pytest.mark.slow  # about 20 s each in the simulator (2 cores)
@pytest.mark.parametrize("metric,dtype", [(0, np.float64), (1, np.float32)])
def test_truncated_half_steps_against_dense_logsumexp(cuda, rng, always_truncate, metric, dtype):
    """One iteration (both half-steps) on truncated patterns against SciPy's
    logsumexp over the dense float64 cost matrix (of the dtype-rounded
    points): f = log a - LSE_j(g_j + c C_ij), g = log b - LSE_i(f_i + c
    C_ij), zero weights on both sides (-inf potentials), while skipping
    over 40 % of the pairs; then the stopping test's row LSE
    (``lazy_row_lse``).  Voxels of about 4 points in the rows, of about 1
    point in the columns of the first half-step (more voxels than a block
    has threads: several chunks of flags, runs of adjacent voxels).
    float64 within LAZY_TRUNCATION_TOL plus rounding; float32 as this
    file's float32 test."""
    from scipy.special import logsumexp

    from numbaot import _config, _lazy
    from numbaot.cuda import empirical as gpu_e

    n, m, reg = 24, 60, 1e-3
    X = rng.random((n, 2)).astype(dtype).astype(np.float64)
    Y = (rng.random((m, 2)) * 0.8 + 0.1).astype(dtype).astype(np.float64)
    C = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    if metric == 1:
        C = np.sqrt(C)
    a, b = np.full(n, 1.0 / n), rng.random(m) + 0.1
    a[7] = 0.0
    b[::11] = 0.0
    with np.errstate(divide="ignore"):
        log_a, log_b = np.log(a), np.log(b)
    g = np.where(b > 0, rng.normal(size=m) * 2.0, -np.inf)
    st = gpu_e.LazyState(X, Y, log_a, log_b, np.zeros(n), g.copy(), -1.0 / reg, metric,
                         np.dtype(dtype))
    assert gpu_e.lazy_kept_fraction(st) == (1.0, 1.0)
    gpu_e.lazy_truncate(st, _lazy.truncation_clusters(X, 4), _lazy.truncation_clusters(Y, 1))
    assert st.trunc.center[1].shape[0] > 32  # column voxels of the first half-step
    gpu_e.lazy_steps(st, 1)
    f, g1 = gpu_e.lazy_potentials(st)
    f_ref = log_a - logsumexp(g[None, :] - C / reg, axis=1)
    with np.errstate(invalid="ignore"):
        g_ref = log_b - logsumexp(f_ref[:, None] - C / reg, axis=0)
    g_ref[b == 0] = -np.inf
    tol = (dict(rtol=1e-13, atol=2 * _config.LAZY_TRUNCATION_TOL) if dtype == np.float64
           else dict(rtol=1e-4, atol=1e-4))
    np.testing.assert_allclose(f, f_ref, **tol)
    np.testing.assert_allclose(g1, g_ref, **tol)
    kept = gpu_e.lazy_kept_fraction(st)
    assert max(kept) < 0.6, kept  # below the default LAZY_TRUNCATION_MAX_KEPT too
    _, lse = gpu_e.lazy_row_lse(st)
    np.testing.assert_allclose(lse, logsumexp(g_ref[None, :] - C / reg, axis=1), **tol)
