"""Lazy point-cloud Sinkhorn on CUDA device arrays (simulator in CI, or a
GPU): float32 across two warps against numbaot's CPU path, and the launcher
contract.  The comparison with POT on both devices is in tests/test_devices.py."""
import numpy as np

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


_LAUNCHERS = ("LazyState", "lazy_steps", "lazy_row_lse", "lazy_potentials", "lazy_outputs",
              "lazy_transport_cost")


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
