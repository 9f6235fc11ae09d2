"""One test, both devices: every solver family against POT 0.9.7 (the oracle)
on NumPy arrays (``[cpu]``) and on CUDA device arrays (``[cuda]``: the
simulator in CI, or a GPU), through the ``device`` fixture (tests/conftest.py).

Problems are tiny because the simulator runs one Python thread per CUDA
thread; in the simulator the block, tile and chunk sizes are lowered
(``small_blocks``) so that multi-block and multi-chunk paths run.  The tests
of CUDA-only paths (fused against multi-launch blocks, multi-warp blocks,
launcher contracts) stay in tests/cuda.
"""
import warnings

import numpy as np
import pytest

from _helpers import ot

import numbaot
from numbaot import unbalanced as nu
from numbaot.bregman import barycenter, empirical_sinkhorn, empirical_sinkhorn2
from numbaot.gradients import sinkhorn2_value_and_grad

F64 = dict(rtol=1e-9, atol=1e-12)


def _dense(rng, n=4, m=5, k=None):
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(m, 2)) + 0.5
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    a = rng.random(n) + 0.1
    a /= a.sum()
    b = rng.random(m if k is None else (m, k)) + 0.1
    b /= b.sum(0)
    return a, b, M


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _unchanged(device, pairs):
    for on_device, host in pairs:
        np.testing.assert_array_equal(device.get(on_device) if device.is_cuda else on_device,
                                      host)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_sinkhorn_plan_and_log(device, rng, method):
    a, b, M = _dense(rng, n=6, m=9)
    da, db, dM = device.put(a.copy()), device.put(b.copy()), device.put(M.copy())
    kw = dict(method=method, numItermax=11, stopThr=1e-14, log=True, warn=False)
    G, lg = numbaot.sinkhorn(da, db, dM, 0.5, **kw)
    Gp, lgp = ot.sinkhorn(a, b, M, 0.5, **kw)
    np.testing.assert_allclose(device.get(G), Gp, rtol=1e-7, atol=1e-10)
    assert set(lg) == set(lgp)
    assert lg["niter"] == lgp["niter"] == 10
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-6, atol=1e-12)
    for key in ("u", "v"):
        np.testing.assert_allclose(device.get(lg[key]), lgp[key], rtol=1e-7, atol=1e-10)
    _unchanged(device, [(da, a), (db, b), (dM, M)])


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_sinkhorn2_batched_and_paired(device, rng, method):
    a, b, M = _dense(rng, k=2)
    kw = dict(method=method, numItermax=6, warn=False)
    # 2-D b with 1-D a: one source, several targets (POT's meaning)
    W = numbaot.sinkhorn2(device.put(a), device.put(b), device.put(M), 0.5, **kw)
    np.testing.assert_allclose(device.get(W), ot.sinkhorn2(a, b, M, 0.5, **kw), **F64)
    # paired batch: column k of a with column k of b
    A = np.stack([a, a[::-1]], axis=1)
    W = numbaot.sinkhorn2(device.put(A), device.put(b), device.put(M), 0.5, **kw)
    ref = [ot.sinkhorn2(A[:, k], b[:, k], M, 0.5, **kw) for k in range(2)]
    np.testing.assert_allclose(device.get(W), ref, **F64)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_unbalanced_plan_and_losses(device, rng, method):
    a, b, M = _dense(rng)
    kw = dict(numItermax=3, stopThr=0.0, log=True)
    G, lg = nu.sinkhorn_unbalanced(device.put(a), device.put(b), device.put(M), 0.2, (0.5, 2.0),
                                   method=method, **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, (0.5, 2.0), **kw)
    np.testing.assert_allclose(device.get(G), Gp, **F64)
    if method == "sinkhorn":
        # numbaot's extra 'sinkhorn_log' measures its error on the log-scalings
        np.testing.assert_allclose(np.asarray(lg["err"], np.float64), lgp["err"], rtol=1e-6,
                                   atol=1e-12)
    np.testing.assert_allclose(lg["total_cost"], lgp["total_cost"], **F64)
    # 2-D b (one loss per target) and an explicit reference measure c
    B = np.stack([b, 0.5 * b], axis=1)
    loss = nu.sinkhorn_unbalanced(device.put(a), device.put(B), device.put(M), 0.2, 0.7,
                                  method=method, numItermax=2, stopThr=0.0)
    ref = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, B, M, 0.2, 0.7, numItermax=2, stopThr=0.0)
    np.testing.assert_allclose(device.get(loss), ref, **F64)
    C = rng.uniform(0.5, 2.0, size=M.shape)
    Gx = nu.sinkhorn_unbalanced(device.put(a), device.put(b), device.put(M), 0.2, 0.7,
                                c=device.put(C), method=method, numItermax=2, stopThr=0.0)
    Gxp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, 0.7, c=C, numItermax=2,
                 stopThr=0.0)
    np.testing.assert_allclose(device.get(Gx), Gxp, **F64)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_barycenter(device, rng, method):
    x = np.linspace(0.0, 1.0, 5)
    M = (x[:, None] - x[None, :]) ** 2 + 0.1 * rng.random((5, 5))  # K and K^T both matter
    A = rng.random((5, 2)) + 0.1
    A /= A.sum(0)
    w = rng.random(2) + 0.5
    w /= w.sum()
    dA, dM, dw = device.put(A.copy()), device.put(M.copy()), device.put(w.copy())
    kw = dict(method=method, numItermax=2, stopThr=0.0, log=True)
    with pytest.warns(UserWarning, match="did not converge"):
        bar, lg = barycenter(dA, dM, 0.2, weights=dw, **kw)
    with pytest.warns(UserWarning, match="did not converge"):
        barp, lgp = ot.bregman.barycenter(A, M, 0.2, weights=w, **kw)
    np.testing.assert_allclose(device.get(bar), barp, **F64)
    assert lg["niter"] == lgp["niter"] == 1
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-9, atol=1e-15)
    _unchanged(device, [(dA, A), (dM, M), (dw, w)])


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_lazy_point_clouds(device, rng, metric):
    Xs, Xt = rng.normal(size=(3, 2)), rng.normal(size=(5, 2)) + 0.5
    kw = dict(metric=metric, numIterMax=10, stopThr=0.0, isLazy=True, log=True, warn=False)
    f, g, lg = empirical_sinkhorn(device.put(Xs), device.put(Xt), 0.5, **kw)
    fp, gp, lgp = ot.bregman.empirical_sinkhorn(Xs, Xt, 0.5, **kw)
    np.testing.assert_allclose(device.get(f), fp, **F64)
    np.testing.assert_allclose(device.get(g), gp, **F64)
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-7, atol=1e-14)
    np.testing.assert_allclose(lg["lazy_plan"][1:3, :], lgp["lazy_plan"][1:3, :], rtol=1e-9)
    kw2 = dict(metric=metric, numIterMax=1, isLazy=True, warn=False)
    W = empirical_sinkhorn2(device.put(Xs), device.put(Xt), 0.5, **kw2)
    np.testing.assert_allclose(W, ot.bregman.empirical_sinkhorn2(Xs, Xt, 0.5, **kw2), rtol=1e-9)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_value_and_grad(device, rng, method):
    a, b, M = _dense(rng)
    reg = 0.5
    kw = dict(method=method, numItermax=5, stopThr=0.0)
    val, grad = sinkhorn2_value_and_grad(device.put(a), device.put(b), device.put(M), reg, **kw)
    Pp, lgp = ot.sinkhorn(a, b, M, reg, log=True, warn=False, **kw)
    # value: <P, M> + reg sum P log P, float64 closed form on POT's plan
    np.testing.assert_allclose(val, np.sum(Pp * M) + reg * np.sum(Pp * np.log(Pp)), **F64)
    np.testing.assert_allclose(device.get(grad["M"]), Pp, **F64)
    # gradients in a and b: the centred dual potentials reg * log u, reg * log v
    lu = lgp["log_u"] if method == "sinkhorn_log" else np.log(lgp["u"])
    lv = lgp["log_v"] if method == "sinkhorn_log" else np.log(lgp["v"])
    np.testing.assert_allclose(device.get(grad["a"]), reg * (lu - lu.mean()), **F64)
    np.testing.assert_allclose(device.get(grad["b"]), reg * (lv - lv.mean()), **F64)
