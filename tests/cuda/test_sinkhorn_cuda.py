"""Balanced Sinkhorn on CUDA device arrays (simulator in CI, or a real GPU),
compared with POT 0.9.7 (the oracle) and with numbaot's CPU path.

Problems are tiny because the simulator runs one Python thread per CUDA
thread; the block/tile/chunk sizes are lowered (tests/cuda/conftest.py) so
that multi-block, multi-chunk, multi-warp and fused paths all run.
"""
import warnings

import numpy as np
import pytest

import numbaot
from numbaot import _config
from numbaot._dispatch import is_device_array

from _helpers import ot

F64 = dict(rtol=1e-7, atol=1e-10)
#: the CUDA kernels compute float32 problems in float32 (the CPU in float64)
F32 = dict(rtol=2e-4, atol=2e-6)


def _problem(rng, n=6, m=9, k=None, dtype=np.float64):
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(m, 2)) + 0.5
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    a = rng.random(n) + 0.1
    a /= a.sum()
    if k is None:
        b = rng.random(m) + 0.1
        b /= b.sum()
    else:
        b = rng.random((m, k)) + 0.1
        b /= b.sum(0)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def _h(x):
    return x.copy_to_host() if is_device_array(x) else np.asarray(x)


@pytest.fixture(params=["fused", "multi_launch"])
def path(request, monkeypatch):
    """Both kernel paths: whole blocks of iterations in one launch (small
    problems) and one launch per half-step (large problems)."""
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES",
                        10**9 if request.param == "fused" else 0)
    return request.param


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_plan_matches_pot_and_cpu(cuda, rng, path, method):
    a, b, M = _problem(rng)
    kw = dict(method=method, numItermax=11, stopThr=1e-14, log=True, warn=False)
    G, lg = numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5, **kw)
    assert is_device_array(G) and G.dtype == np.float64 and G.shape == M.shape
    Gc, lgc = numbaot.sinkhorn(a, b, M, 0.5, **kw)
    Gp, lgp = ot.sinkhorn(a, b, M, 0.5, **kw)
    np.testing.assert_allclose(_h(G), Gp, **F64)
    np.testing.assert_allclose(_h(G), Gc, **F64)
    assert set(lg) == set(lgp)
    assert lg["niter"] == lgp["niter"] == 10 and len(lg["err"]) == len(lgp["err"]) == 2
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-6, atol=1e-12)
    for key in ("u", "v"):
        assert is_device_array(lg[key])
        np.testing.assert_allclose(_h(lg[key]), lgp[key], **F64)


def test_multi_warp_blocks(cuda, rng, path, multi_warp):
    a, b, M = _problem(rng, n=5, m=7)
    for method in ("sinkhorn", "sinkhorn_log"):
        G = numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5,
                             method=method, numItermax=4, warn=False)
        np.testing.assert_allclose(_h(G), ot.sinkhorn(a, b, M, 0.5, method=method, numItermax=4,
                                                      warn=False), **F64)


def test_float32_stays_float32(cuda, rng, path):
    a, b, M = _problem(rng, dtype=np.float32)
    for method in ("sinkhorn", "sinkhorn_log"):
        G = numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5,
                             method=method, numItermax=5, warn=False)
        assert G.dtype == np.float32
        ref = ot.sinkhorn(a.astype(np.float64), b.astype(np.float64), M.astype(np.float64),
                          0.5, method=method, numItermax=5, warn=False)
        np.testing.assert_allclose(_h(G), ref, **F32)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_batched_b_losses(cuda, rng, path, method):
    a, b, M = _problem(rng, n=4, m=5, k=2)
    kw = dict(method=method, numItermax=3, warn=False)
    W = numbaot.sinkhorn2(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5, **kw)
    assert is_device_array(W) and W.shape == (2,)
    np.testing.assert_allclose(_h(W), ot.sinkhorn2(a, b, M, 0.5, **kw), **F64)


def test_log_domain_zero_weights_and_small_reg(cuda, rng, path):
    """log 0 = -inf in the online (max, sum) merges; reg small enough that
    the multiplicative kernel underflows."""
    a, b, M = _problem(rng)
    a[1] = 0.0
    b[[0, 4]] = 0.0
    a /= a.sum()
    b /= b.sum()
    kw = dict(method="sinkhorn_log", numItermax=6, warn=False)
    G = _h(numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 1e-3, **kw))
    assert np.all(np.isfinite(G))
    assert np.all(G[1] == 0) and np.all(G[:, [0, 4]] == 0)
    np.testing.assert_allclose(G, ot.sinkhorn(a, b, M, 1e-3, **kw), rtol=1e-6, atol=1e-12)


def test_per_problem_stopping_matches_cpu(cuda, rng):
    """Each problem of a batch stops on its own test (POT's per-column loop)."""
    a, b, M = _problem(rng, n=4, m=5, k=2)
    b[:, 1] = np.full(b.shape[0], 1.0 / b.shape[0])
    kw = dict(method="sinkhorn_log", numItermax=30, stopThr=1e-5, log=True, warn=False)
    W, lg = numbaot.sinkhorn2(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 1.0, **kw)
    Wc, lgc = numbaot.sinkhorn2(a, b, M, 1.0, **kw)
    np.testing.assert_allclose(_h(W), Wc, **F64)
    np.testing.assert_allclose(_h(lg["log_u"]), lgc["log_u"], rtol=1e-7, atol=1e-9)


def test_knopp_numerical_error_undoes_the_step(cuda, rng, path):
    """K^T u has zeros (reg tiny, K underflows): POT warns and returns the
    previous iterate; the device path flags the step and replays the block."""
    a, b, M = _problem(rng)
    M = M * 1e3
    kw = dict(numItermax=20, log=True, warn=False)
    # UserWarnings only: NumPy's divide-by-zero RuntimeWarnings differ (the
    # simulator runs the kernels' arithmetic on NumPy scalars)
    with warnings.catch_warnings(record=True) as wd:
        warnings.simplefilter("always")
        G, lg = numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 1.0, **kw)
    with warnings.catch_warnings(record=True) as wp:
        warnings.simplefilter("always")
        Gp, lgp = ot.sinkhorn(a, b, M, 1.0, **kw)
    wd = [str(w.message) for w in wd if w.category is UserWarning]
    wp = [str(w.message) for w in wp if w.category is UserWarning]
    assert wd == wp
    assert any("numerical errors" in w for w in wd)
    assert lg["niter"] == lgp["niter"]
    np.testing.assert_allclose(_h(G), Gp, **F64)


@pytest.mark.parametrize("method", ["sinkhorn_stabilized", "sinkhorn_epsilon_scaling",
                                    "greenkhorn"])
def test_host_solvers_take_device_arrays(cuda, rng, method):
    """Solvers without CUDA kernels run on host copies and return device arrays."""
    a, b, M = _problem(rng)
    kw = dict(method=method, numItermax=30, log=True, warn=False)
    G, lg = numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5, **kw)
    Gp, lgp = ot.sinkhorn(a, b, M, 0.5, **kw)
    assert is_device_array(G)
    np.testing.assert_allclose(_h(G), Gp, **F64)
    assert set(lg) == set(lgp)


def test_sinkhorn2_scalar_and_stabilized(cuda, rng):
    a, b, M = _problem(rng)
    for method in ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"):
        W = numbaot.sinkhorn2(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5,
                              method=method, numItermax=8)
        assert np.ndim(W) == 0
        np.testing.assert_allclose(W, ot.sinkhorn2(a, b, M, 0.5, method=method, numItermax=8),
                                   **F64)


def test_uniform_weights_and_bregman_functions(cuda, rng):
    a, b, M = _problem(rng)
    Md = cuda.to_device(M)
    for fn in (numbaot.bregman.sinkhorn_knopp, numbaot.bregman.sinkhorn_log):
        G = fn([], [], Md, 0.5, numItermax=6, warn=False)
        ref = getattr(ot.bregman, fn.__name__)([], [], M, 0.5, numItermax=6, warn=False)
        np.testing.assert_allclose(_h(G), ref, **F64)


def test_non_contiguous_and_float32_cost_with_float64_weights(cuda, rng):
    a, b, M = _problem(rng, n=7, m=7)
    Mt = cuda.to_device(np.asfortranarray(M.T.astype(np.float32)))  # not C-contiguous
    G = numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), Mt, 0.5, numItermax=5, warn=False)
    assert G.dtype == np.float64  # float64 weights promote, as on the CPU
    ref = ot.sinkhorn(a, b, M.T.astype(np.float32).astype(np.float64), 0.5, numItermax=5,
                      warn=False)
    np.testing.assert_allclose(_h(G), ref, **F64)


def test_bad_device_input(cuda, rng):
    a, b, M = _problem(rng)
    Mbad = M.copy()
    Mbad[2, 3] = np.nan
    with pytest.raises(ValueError, match="M contains NaN"):
        numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(Mbad), 0.5)
    with pytest.raises(TypeError, match="float32 or float64"):
        numbaot.sinkhorn([], [], cuda.to_device(np.ones((3, 3), dtype=np.int64)), 0.5)
    with pytest.raises(TypeError, match="on the GPU but a on the host"):
        numbaot.sinkhorn(a, cuda.to_device(b), cuda.to_device(M), 0.5)
    with pytest.raises(ValueError, match="b has 8 entries"):
        numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b[:-1]), cuda.to_device(M), 0.5)
    with pytest.raises(ValueError, match="reg must be"):
        numbaot.sinkhorn(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), -1.0)


def test_caller_device_arrays_unchanged(cuda, rng):
    a, b, M = _problem(rng)
    da, db, dM = cuda.to_device(a), cuda.to_device(b), cuda.to_device(M)
    numbaot.sinkhorn(da, db, dM, 0.5, method="sinkhorn_log", numItermax=3, warn=False)
    numbaot.sinkhorn(da, db, dM, 0.5, numItermax=3, warn=False)
    np.testing.assert_array_equal(da.copy_to_host(), a)
    np.testing.assert_array_equal(db.copy_to_host(), b)
    np.testing.assert_array_equal(dM.copy_to_host(), M)
