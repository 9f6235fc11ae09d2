"""numbaot.scan on CUDA device arrays, against the CPU kernels and lfilter.

In the simulator the block-scan tunables are lowered (64 threads x 2 items =
128 positions per tile, rows of more than 8 positions take the block path),
so that rows of a few hundred positions cross several tiles and every block
has two warps.
"""
import numpy as np
import pytest
from scipy.signal import lfilter

import numbaot
from numbaot import _config
from numbaot._dispatch import simulator_enabled


@pytest.fixture(autouse=True)
def small_scan_tiles(monkeypatch):
    if simulator_enabled():
        monkeypatch.setattr(_config, "CUDA_SCAN_THREADS", 64)
        monkeypatch.setattr(_config, "CUDA_SCAN_ITEMS", 2)
        monkeypatch.setattr(_config, "CUDA_SCAN_ROW_MAX_N", 8)
        monkeypatch.setattr(_config, "CUDA_SCAN_ROW_THREADS", 64)
    yield


def tol(dtype):
    return dict(rtol=3e-7, atol=1e-6) if np.dtype(dtype) == np.float32 else dict(rtol=1e-12, atol=1e-12)


def lfilter_rows(x, gamma, right):
    x = np.asarray(x, dtype=np.float64)
    out = []
    for row, g in zip(x, gamma):
        out.append(lfilter([1.0], [1.0, -g], row[::-1])[::-1] if right
                   else lfilter([1.0], [1.0, -g], row))
    return np.stack(out)


#: (batch, N, dtype): one thread per row (N <= 8: one block, and 3 blocks of
#: 64 threads for 150 rows); block path with 1 tile (partly filled), 2 tiles
#: (the second with one position) and 3 tiles of 128 per row
CASES = [(3, 5, np.float32), (150, 8, np.float64), (1, 9, np.float64), (1, 129, np.float32),
         (2, 300, np.float64)]


@pytest.mark.parametrize("shape0, shape1, dtype", CASES)
def test_forward_vs_cpu_and_lfilter(shape0, shape1, dtype, cuda, rng):
    shape = (shape0, shape1)
    x = rng.normal(size=shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.0, size=shape[0])
    xd = cuda.to_device(x)
    for right, fn in ((True, numbaot.discounted_cumsum_right), (False, numbaot.discounted_cumsum_left)):
        yd = fn(xd, cuda.to_device(gamma))
        assert yd.shape == shape and yd.dtype == dtype
        y = yd.copy_to_host()
        np.testing.assert_allclose(y, fn(x, gamma), **tol(dtype))
        np.testing.assert_allclose(y, lfilter_rows(x, gamma, right), **tol(dtype))
        if shape[1] <= 8:  # scalar gamma with many rows (the block path: in test_gae)
            np.testing.assert_allclose(fn(xd, 0.9).copy_to_host(), fn(x, 0.9), **tol(dtype))


def test_one_dimensional_and_noncontiguous(cuda, rng):
    x = rng.normal(size=(2, 280))
    xd = cuda.to_device(x)
    y = numbaot.discounted_cumsum_right(xd[:, ::2], 0.95).copy_to_host()
    np.testing.assert_allclose(y, lfilter_rows(x[:, ::2], [0.95] * 2, True), rtol=1e-12, atol=1e-12)
    y1 = numbaot.discounted_cumsum_left(cuda.to_device(x[1]), 0.95).copy_to_host()
    np.testing.assert_allclose(y1, lfilter([1.0], [1.0, -0.95], x[1]), rtol=1e-12, atol=1e-12)


def test_many_tiles_carry_loop(cuda, rng, monkeypatch):
    """More tiles per row than threads: chunk_carries loops with a running carry."""
    monkeypatch.setattr(_config, "CUDA_SCAN_THREADS", 32)
    monkeypatch.setattr(_config, "CUDA_SCAN_ITEMS", 1)
    x = rng.normal(size=(1, 32 * 33 + 7))
    y = numbaot.discounted_cumsum_right(cuda.to_device(x), 0.999).copy_to_host()
    np.testing.assert_allclose(y, lfilter_rows(x, [0.999], True), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("shape", [(4, 6), (2, 200)])
def test_dones_vs_cpu(shape, cuda, rng):
    x = rng.normal(size=shape)
    dones = rng.random(size=shape) < 0.05
    dones[0, 100 % shape[1]] = True
    g = rng.uniform(0.8, 1.0, size=shape[0])
    for fn in (numbaot.discounted_cumsum_right, numbaot.discounted_cumsum_left):
        for d in (cuda.to_device(dones), cuda.to_device(dones.astype(np.uint8)))[:1 + (shape[1] < 9)]:
            # a per-row gamma may be a host array (O(batch), read on the host)
            yd = fn(cuda.to_device(x), cuda.to_device(g) if shape[1] > 8 else g, d)
            np.testing.assert_allclose(yd.copy_to_host(), fn(x, g, dones), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 6), (1, 140)])
@pytest.mark.parametrize("direction", ["right", "left"])
def test_backward_vs_cpu(shape, direction, cuda, rng):
    bwd = getattr(numbaot, f"discounted_cumsum_{direction}_backward")
    fwd = getattr(numbaot, f"discounted_cumsum_{direction}")
    x = rng.normal(size=shape)
    w = rng.normal(size=shape)
    dones = rng.random(size=shape) < 0.1
    g = rng.uniform(0.5, 1.0, size=shape[0])
    y = fwd(x, g, dones)
    gi, gg = bwd(w, y, g, dones)
    gid, ggd = bwd(cuda.to_device(w), cuda.to_device(y), cuda.to_device(g), cuda.to_device(dones))
    np.testing.assert_allclose(gid.copy_to_host(), gi, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ggd.copy_to_host(), gg, rtol=1e-12, atol=1e-12)
    gi2, gg2 = bwd(w, y, 0.7)
    gid2, ggd2 = bwd(cuda.to_device(w), cuda.to_device(y), 0.7)
    assert ggd2.shape == ()
    np.testing.assert_allclose(gid2.copy_to_host(), gi2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ggd2.copy_to_host(), gg2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype, N", [(np.float32, 140), (np.float64, 7)])
def test_gae_vs_cpu(dtype, N, cuda, rng):
    B = 2
    r = rng.normal(size=(B, N)).astype(dtype)
    v = rng.normal(size=(B, N + 1)).astype(dtype)
    d = rng.random(size=(B, N)) < 0.05
    adv, ret = numbaot.gae(r, v, d, 0.99, 0.95)
    advd, retd = numbaot.gae(cuda.to_device(r), cuda.to_device(v), cuda.to_device(d), 0.99, 0.95)
    assert advd.dtype == dtype
    np.testing.assert_allclose(advd.copy_to_host(), adv, **tol(dtype))
    np.testing.assert_allclose(retd.copy_to_host(), ret, **tol(dtype))
    adv2, _ = numbaot.gae(r, v[:, :N], None, 0.9, 0.8, last_value=v[:, N])
    advd2, _ = numbaot.gae(cuda.to_device(r), cuda.to_device(np.ascontiguousarray(v[:, :N])),
                           None, 0.9, 0.8,
                           last_value=cuda.to_device(v[:, N].copy()))
    np.testing.assert_allclose(advd2.copy_to_host(), adv2, **tol(dtype))


def test_errors_on_device(cuda):
    x = np.ones((2, 20))
    x[1, 3] = np.nan
    with pytest.raises(ValueError, match="x contains NaN"):
        numbaot.discounted_cumsum_right(cuda.to_device(x), 0.9)
    with pytest.raises(ValueError, match="x contains NaN"):
        numbaot.discounted_cumsum_left(cuda.to_device(np.ascontiguousarray(x[:, :5])), 0.0)
    with pytest.raises(TypeError, match="on the host"):
        numbaot.discounted_cumsum_right(cuda.to_device(np.ones(5)), 0.9, np.zeros(5, bool))
    with pytest.raises(TypeError, match="dones"):
        numbaot.discounted_cumsum_right(cuda.to_device(np.ones(5)), 0.9,
                                        cuda.to_device(np.zeros(5)))
    with pytest.raises(ValueError, match="gamma"):
        numbaot.discounted_cumsum_right(cuda.to_device(np.ones((2, 5))), cuda.to_device(np.ones(3)))
    with pytest.raises(TypeError, match="x"):
        numbaot.discounted_cumsum_right(cuda.to_device(np.ones(5, np.int64)), 0.9)
