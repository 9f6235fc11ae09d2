"""Lazy point-cloud Sinkhorn on CUDA device arrays (simulator in CI, or a
GPU), against POT's lazy solver and numbaot's CPU path."""
import numpy as np

from _helpers import ot

from numbaot._dispatch import is_device_array
from numbaot.bregman import empirical_sinkhorn, empirical_sinkhorn2


def _clouds(rng, n=5, m=7, dtype=np.float64):
    return (rng.normal(size=(n, 2)).astype(dtype), (rng.normal(size=(m, 2)) + 0.5).astype(dtype))


def test_lazy_potentials_and_loss_on_device(cuda, rng):
    Xs, Xt = _clouds(rng, n=3, m=5)
    for metric in ("sqeuclidean", "euclidean"):
        kw = dict(metric=metric, numIterMax=10, stopThr=0.0, isLazy=True, log=True, warn=False)
        f, g, lg = empirical_sinkhorn(cuda.to_device(Xs), cuda.to_device(Xt), 0.5, **kw)
        assert is_device_array(f) and is_device_array(g)
        fp, gp, lgp = ot.bregman.empirical_sinkhorn(Xs, Xt, 0.5, **kw)
        np.testing.assert_allclose(f.copy_to_host(), fp, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(g.copy_to_host(), gp, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-7, atol=1e-14)
        np.testing.assert_allclose(lg["lazy_plan"][1:3, :], lgp["lazy_plan"][1:3, :], rtol=1e-9)
        kw2 = dict(metric=metric, numIterMax=1, isLazy=True, warn=False)
        W = empirical_sinkhorn2(cuda.to_device(Xs), cuda.to_device(Xt), 0.5, **kw2)
        np.testing.assert_allclose(W, ot.bregman.empirical_sinkhorn2(Xs, Xt, 0.5, **kw2), rtol=1e-9)


def test_lazy_float32_on_device(cuda, rng, multi_warp):
    Xs, Xt = _clouds(rng, n=2, m=40, dtype=np.float32)  # 40 targets: two warps
    f, g = empirical_sinkhorn(cuda.to_device(Xs), cuda.to_device(Xt), 0.5, isLazy=True,
                              numIterMax=1, warn=False)
    assert f.dtype == np.float32
    fc, gc = empirical_sinkhorn(Xs, Xt, 0.5, isLazy=True, numIterMax=1, warn=False)
    np.testing.assert_allclose(f.copy_to_host(), fc, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g.copy_to_host(), gc, rtol=1e-4, atol=1e-4)
