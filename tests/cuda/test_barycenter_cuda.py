"""Entropic barycenters on CUDA device arrays (simulator in CI, or a GPU),
against POT 0.9.7 (the oracle) and numbaot's CPU path.

Tiny problems and two iterations (the simulator runs one Python thread per
CUDA thread): two iterations are enough for one stopping test (POT tests at
ii % 10 == 1).  The lowered block, tile and chunk sizes of tests/cuda/
conftest.py make dim 5 span two row chunks and three row tiles, and the
histograms run on the grid's problem axis.
"""
import warnings

import numpy as np
import pytest

from _helpers import ot

from numbaot._dispatch import is_device_array
from numbaot.bregman import (barycenter, barycenter_sinkhorn, barycenter_stabilized,
                             convolutional_barycenter2d)

F64 = dict(rtol=1e-9, atol=1e-14)
#: the CUDA kernels compute float32 problems in float32 (the CPU in float64)
F32 = dict(rtol=2e-4, atol=1e-6)


def _problem(rng, dim=5, H=2, dtype=np.float64):
    x = np.linspace(0.0, 1.0, dim)
    M = (x[:, None] - x[None, :]) ** 2
    M = M + 0.1 * rng.random((dim, dim))  # not symmetric: K and K^T both matter
    A = rng.random((dim, H)) + 0.1
    A /= A.sum(0)
    w = rng.random(H) + 0.5
    w /= w.sum()
    return A.astype(dtype), M.astype(dtype), w.astype(dtype)


def test_stopping_rule_as_pot(cuda, rng):
    """A stopThr above the first error: the loop stops at the first test
    (ii == 1), without a warning, on both devices and in POT."""
    A, M, _ = _problem(rng, dim=4)
    kw = dict(numItermax=50, stopThr=10.0, log=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar, lg = barycenter_sinkhorn(cuda.to_device(A), cuda.to_device(M), 0.2, **kw)
    barp, lgp = ot.bregman.barycenter_sinkhorn(A, M, 0.2, **kw)
    assert lg["niter"] == lgp["niter"] == 1 and len(lg["err"]) == 1
    np.testing.assert_allclose(bar.copy_to_host(), barp, **F64)


def test_no_iteration(cuda, rng):
    """numItermax=0: the barycenter of the starting point, as on the CPU."""
    A, M, w = _problem(rng, dim=4)
    bar = barycenter_sinkhorn(cuda.to_device(A), cuda.to_device(M), 0.2,
                              weights=cuda.to_device(w), numItermax=0, warn=False)
    barc = barycenter_sinkhorn(A, M, 0.2, weights=w, numItermax=0, warn=False)
    np.testing.assert_allclose(bar.copy_to_host(), barc, **F64)


def test_float32_log(cuda, rng):
    A, M, w = _problem(rng, dim=4, dtype=np.float32)
    kw = dict(method="sinkhorn_log", numItermax=2, stopThr=0.0, warn=False)
    bar = barycenter(cuda.to_device(A), cuda.to_device(M), 0.2, weights=cuda.to_device(w), **kw)
    assert bar.dtype == np.float32
    barp = ot.bregman.barycenter(A.astype(np.float64), M.astype(np.float64), 0.2,
                                 weights=w.astype(np.float64), **kw)
    np.testing.assert_allclose(bar.copy_to_host(), barp, **F32)


def test_host_copy_methods(cuda, rng):
    """'sinkhorn_stabilized' and convolutional 'sinkhorn_log' run on host
    copies and return device arrays (results bit-identical to the CPU call)."""
    A, M, w = _problem(rng, dim=4)
    kw = dict(numItermax=3, stopThr=0.0, log=True, warn=False)
    bar, lg = barycenter_stabilized(cuda.to_device(A), cuda.to_device(M), 0.2,
                                    weights=cuda.to_device(w), **kw)
    barc, lgc = barycenter_stabilized(A, M, 0.2, weights=w, **kw)
    assert is_device_array(bar) and is_device_array(lg["logu"])
    np.testing.assert_array_equal(bar.copy_to_host(), barc)
    np.testing.assert_array_equal(lg["logv"].copy_to_host(), lgc["logv"])
    imgs = rng.random((2, 3, 4)) + 0.1
    imgs /= imgs.sum(axis=(1, 2), keepdims=True)
    out = convolutional_barycenter2d(cuda.to_device(imgs), 0.1, method="sinkhorn_log", **kw)
    outc = convolutional_barycenter2d(imgs, 0.1, method="sinkhorn_log", **kw)
    assert is_device_array(out[0]) and out[0].shape == (3, 4)
    np.testing.assert_array_equal(out[0].copy_to_host(), outc[0])


def test_convolutional_sinkhorn_kernels(cuda, rng):
    """Convolutional 'sinkhorn' on the CUDA kernels: 10 iterations (one
    error test, at ii == 9), images of 3 x 5 pixels (two row tiles of the
    lowered 2-row tiles), against POT and the CPU path."""
    imgs = rng.random((2, 3, 5)) + 0.1
    imgs /= imgs.sum(axis=(1, 2), keepdims=True)
    w = np.array([0.3, 0.7])
    dimgs = cuda.to_device(imgs)
    kw = dict(method="sinkhorn", numItermax=10, stopThr=0.0, log=True)
    with pytest.warns(UserWarning, match="Convolutional Sinkhorn did not converge"):
        bar, lg = convolutional_barycenter2d(dimgs, 0.1, weights=cuda.to_device(w), **kw)
    assert is_device_array(bar) and bar.shape == (3, 5) and is_device_array(lg["U"])
    with pytest.warns(UserWarning, match="Convolutional Sinkhorn did not converge"):
        barp, lgp = ot.bregman.convolutional_barycenter2d(imgs, 0.1, weights=w, **kw)
    barc, lgc = convolutional_barycenter2d(imgs, 0.1, weights=w, **dict(kw, warn=False))
    np.testing.assert_allclose(bar.copy_to_host(), barp, **F64)
    np.testing.assert_allclose(bar.copy_to_host(), barc, **F64)
    np.testing.assert_allclose(lg["V"].copy_to_host(), lgc["V"], **F64)
    np.testing.assert_allclose(lg["U"].copy_to_host(), lgp["U"], **F64)
    assert lg["niter"] == lgp["niter"] == 9
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(dimgs.copy_to_host(), imgs)


def test_bad_device_input(cuda, rng):
    A, M, w = _problem(rng, dim=4)
    dA, dM = cuda.to_device(A), cuda.to_device(M)
    with pytest.raises(TypeError, match="on the GPU but M on the host"):
        barycenter(dA, M, 0.2)
    with pytest.raises(TypeError, match="on the host"):
        barycenter(dA, dM, 0.2, weights=w)
    bad = A.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="A contains NaN"):
        barycenter(cuda.to_device(bad), dM, 0.2)
    Mb = M.copy()
    Mb[0, 2] = np.inf
    with pytest.raises(ValueError, match="M contains NaN or inf"):
        barycenter(dA, cuda.to_device(Mb), 0.2, method="sinkhorn_log")
    with pytest.raises(ValueError, match=r"M must have shape \(4, 4\)"):
        barycenter(dA, cuda.to_device(M[:3]), 0.2)
    with pytest.raises(TypeError, match="float32 or float64"):
        barycenter(dA, cuda.to_device(M.astype(np.int64)), 0.2)
    with pytest.raises(ValueError, match="weights must have shape"):
        barycenter(dA, dM, 0.2, weights=cuda.to_device(np.ones(3) / 3))
    with pytest.raises(ValueError, match="reg"):
        barycenter(dA, dM, -1.0)
    with pytest.raises(ValueError, match="Unknown method"):
        barycenter(dA, dM, 0.2, method="nope")



def test_launchers_same_contract_as_cpu(cuda, rng):
    """numbaot.cpu.barycenter and numbaot.cuda.barycenter expose the same
    launchers (names and signatures); driven with the same host inputs (the
    big array on its device) they give the same errors and results."""
    import inspect

    from numbaot.cpu import barycenter as cpu_b
    from numbaot.cuda import barycenter as gpu_b

    assert cpu_b.LAUNCHERS == gpu_b.LAUNCHERS
    for name in cpu_b.LAUNCHERS:
        assert inspect.signature(getattr(cpu_b, name)) == inspect.signature(getattr(gpu_b, name))
    A, M, w = _problem(rng)
    imgs = rng.random((2, 3, 4)) + 0.1
    imgs /= imgs.sum(axis=(1, 2), keepdims=True)
    t3, t4 = np.linspace(0, 1, 3), np.linspace(0, 1, 4)
    K1, K2 = (np.exp(-(t[:, None] - t[None, :]) ** 2 / 0.1) for t in (t3, t4))
    for kind, args_cpu, args_gpu in (
            ("knopp", (M, -5.0, A, w), (cuda.to_device(M), -5.0, A, w)),
            ("log", (M, -5.0, A, w), (cuda.to_device(M), -5.0, A, w)),
            ("conv", (imgs, K1, K2, w, 1e-30), (cuda.to_device(imgs), K1, K2, w, 1e-30))):
        State = "KnoppBaryState" if kind == "knopp" else kind.capitalize() + "BaryState"
        st_c = getattr(cpu_b, State)(*args_cpu)
        st_g = getattr(gpu_b, State)(*args_gpu)
        step_c, step_g = getattr(cpu_b, kind + "_bary_step"), getattr(gpu_b, kind + "_bary_step")
        for want in (False, True):
            e_c, e_g = step_c(st_c, want), step_g(st_g, want)
            if want:
                np.testing.assert_allclose(e_g, e_c, rtol=1e-9, atol=1e-15)
            else:
                assert e_c is None and e_g is None
        res_c = getattr(cpu_b, kind + "_bary_result")(st_c, np.dtype(np.float64))
        res_g = getattr(gpu_b, kind + "_bary_result")(st_g, np.dtype(np.float64))
        assert isinstance(res_c, np.ndarray) and is_device_array(res_g)
        np.testing.assert_allclose(res_g.copy_to_host(), res_c, **F64)
    for x_g, x_c in zip(gpu_b.conv_bary_scalings(st_g, np.dtype(np.float64)),
                        cpu_b.conv_bary_scalings(st_c, np.dtype(np.float64))):
        np.testing.assert_allclose(x_g.copy_to_host(), x_c, **F64)
