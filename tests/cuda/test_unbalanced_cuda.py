"""Unbalanced Sinkhorn on CUDA device arrays (simulator in CI, or a real GPU),
compared with POT 0.9.7 (the oracle) and numbaot's CPU path.

Tiny problems (the simulator runs a Python thread per CUDA thread); the
conftest lowers the block/tile/chunk sizes so multi-block, multi-chunk and
warp-shuffle paths run; the ``path`` fixture runs the fused (one launch per
block of iterations) and the multi-launch kernels.
"""
import warnings

import numpy as np
import pytest

from numbaot import _config
from numbaot import unbalanced as nu
from numbaot._dispatch import is_device_array

from _helpers import ot

F64 = dict(rtol=1e-7, atol=1e-10)
#: float32 problems run float32 arithmetic on the GPU (float64 on the CPU)
F32 = dict(rtol=2e-4, atol=2e-6)


def _problem(rng, n=6, m=9, k=None, dtype=np.float64):
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(m, 2)) + 0.5
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    a = rng.random(n) + 0.1
    a /= a.sum()
    if k is None:
        b = 1.5 * (rng.random(m) + 0.1)
        b /= b.sum()
    else:
        b = rng.random((m, k)) + 0.1
        b /= b.sum(0)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def _h(x):
    return x.copy_to_host() if is_device_array(x) else np.asarray(x)


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@pytest.fixture(params=["fused", "multi_launch"])
def path(request, monkeypatch):
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES",
                        10**9 if request.param == "fused" else 0)
    return request.param


@pytest.mark.parametrize("kind, reg_m", [("fused", (2.0, 0.3)), ("multi_launch", (0.5, float("inf")))])
def test_plan_matches_pot_and_cpu(cuda, rng, monkeypatch, kind, reg_m):
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES", 10**9 if kind == "fused" else 0)
    a, b, M = _problem(rng, n=5, m=7)
    kw = dict(numItermax=11, stopThr=1e-14, log=True)
    G, lg = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M),
                                   0.2, reg_m, **kw)
    assert is_device_array(G) and G.dtype == np.float64 and G.shape == M.shape
    Gc, lgc = nu.sinkhorn_unbalanced(a, b, M, 0.2, reg_m, **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, reg_m, **kw)
    np.testing.assert_allclose(_h(G), Gp, **F64)
    np.testing.assert_allclose(_h(G), Gc, **F64)
    assert len(lg["err"]) == len(lgp["err"]) == 11
    np.testing.assert_allclose(np.asarray(lg["err"], np.float64), lgp["err"], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(_h(lg["logu"]), lgp["logu"], **F64)
    np.testing.assert_allclose(lg["cost"], lgp["cost"], **F64)
    np.testing.assert_allclose(lg["total_cost"], lgp["total_cost"], **F64)


def test_stops_inside_a_block_like_pot(cuda, rng):
    """Convergence at an iteration that is not a multiple of 10: the block is
    replayed up to it (same err list, same plan as POT)."""
    a, b, M = _problem(rng, n=3, m=4)
    kw = dict(numItermax=40, stopThr=1e-3, log=True)  # POT stops after 5 iterations
    G, lg = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M),
                                   0.5, 0.5, **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.5, 0.5, **kw)
    assert len(lg["err"]) == len(lgp["err"])
    assert len(lgp["err"]) % 10 != 0
    np.testing.assert_allclose(_h(G), Gp, **F64)


def test_batch_losses_and_float32(cuda, rng, path):
    a, B, M = _problem(rng, n=4, m=5, k=2)
    kw = dict(numItermax=4, stopThr=0.0)
    loss = _quiet(nu.sinkhorn_unbalanced, cuda.to_device(a), cuda.to_device(B),
                  cuda.to_device(M), 0.3, 0.7, **kw)
    ref = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, B, M, 0.3, 0.7, **kw)
    np.testing.assert_allclose(_h(loss), ref, **F64)
    a32, b32, M32 = (x.astype(np.float32) for x in _problem(rng, n=3, m=5))
    G = nu.sinkhorn_unbalanced(cuda.to_device(a32), cuda.to_device(b32), cuda.to_device(M32),
                               0.3, 0.7, **kw)
    assert G.dtype == np.float32
    Gp = _quiet(ot.unbalanced.sinkhorn_unbalanced, *(x.astype(np.float64) for x in (a32, b32, M32)),
                0.3, 0.7, **kw)
    np.testing.assert_allclose(_h(G), Gp, **F32)


def test_numerical_errors_replayed(cuda, rng, path):
    a, b, M = _problem(rng, n=3, m=4)
    M = M * 2000.0
    kw = dict(numItermax=3, log=True)
    (G, lg) = _quiet(nu.sinkhorn_unbalanced, cuda.to_device(a), cuda.to_device(b),
                     cuda.to_device(M), 0.01, 1.0, **kw)
    Gc, lgc = _quiet(nu.sinkhorn_unbalanced, a, b, M, 0.01, 1.0, **kw)
    assert len(lg["err"]) == len(lgc["err"])
    np.testing.assert_allclose(_h(G), Gc, **F64)


def test_log_solver_matches_pot_and_cpu(cuda, rng):
    """The log-domain iterations are the multiplicative ones in log space:
    after N iterations the plan equals POT's (and the CPU log solver's)."""
    a, b, M = _problem(rng, n=4, m=5)
    kw = dict(numItermax=3, stopThr=0.0, log=True)
    G, lg = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M),
                                   0.2, (0.5, 2.0), method="sinkhorn_log", **kw)
    Gc, lgc = nu.sinkhorn_unbalanced(a, b, M, 0.2, (0.5, 2.0), method="sinkhorn_log", **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, (0.5, 2.0), **kw)
    np.testing.assert_allclose(_h(G), Gp, **F64)
    np.testing.assert_allclose(_h(G), Gc, **F64)
    np.testing.assert_allclose(np.asarray(lg["err"]), lgc["err"], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(_h(lg["logu"]), lgc["logu"], **F64)
    np.testing.assert_allclose(lg["total_cost"], lgp["total_cost"], **F64)
    # 2-D b (losses) and an explicit reference measure
    B = np.stack([b, 0.5 * b], axis=1)
    loss = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(B), cuda.to_device(M), 0.2,
                                  0.7, method="sinkhorn_log", numItermax=2, stopThr=0.0)
    ref = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, B, M, 0.2, 0.7, numItermax=2, stopThr=0.0)
    np.testing.assert_allclose(_h(loss), ref, **F64)
    C = rng.uniform(0.5, 2.0, size=M.shape)
    Gx = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.2,
                                0.7, c=C, method="sinkhorn_log", numItermax=2, stopThr=0.0)
    Gxp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, 0.7, c=C, numItermax=2,
                 stopThr=0.0)
    np.testing.assert_allclose(_h(Gx), Gxp, **F64)


def test_unsupported_method_on_gpu(cuda, rng):
    a, b, M = _problem(rng, n=3, m=3)
    with pytest.raises(TypeError, match="host"):
        nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.1, 1.0,
                               method="sinkhorn_stabilized")
