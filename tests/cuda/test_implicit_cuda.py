"""numbaot.sinkhorn_operator and its backward on CUDA device arrays, against the
CPU kernels and independent oracles (SciPy logsumexp loop, numpy lstsq:
tests/reference.py).

Both kernel families run: one thread per matrix (n < CUDA_IMPLICIT_WARP_MIN_N,
lowered here so that n = 3, 4 take it) and one warp per matrix (n >= it;
n = 34 also uses each lane's second slot, entries l + 32).  Blocks are small
(32 threads, 2 warps) so that several blocks and several warps per block run.
"""
import numpy as np
import pytest

from numbaot import _config
from numbaot._dispatch import simulator_enabled
from numbaot.implicit import sinkhorn_operator, sinkhorn_operator_backward

from reference import lstsq_grad, ref_forward


@pytest.fixture(autouse=True)
def small_implicit_blocks(monkeypatch):
    if simulator_enabled():
        monkeypatch.setattr(_config, "CUDA_IMPLICIT_THREADS", 32)
        monkeypatch.setattr(_config, "CUDA_IMPLICIT_WARPS_PER_BLOCK", 2)
    monkeypatch.setattr(_config, "CUDA_IMPLICIT_WARP_MIN_N", 5)
    yield


def tol(dtype):
    return dict(rtol=2e-6, atol=1e-7) if np.dtype(dtype) == np.float32 else \
        dict(rtol=1e-11, atol=1e-13)


#: (batch, n): thread path over 2 blocks; warp path over 2 blocks of 2 warps
#: (3 matrices: one warp idle); n = 34 (second register slot)
@pytest.mark.parametrize("B, n, dtype, n_iter, tols", [
    (40, 3, np.float64, 6, (None, 1e-4)),
    (40, 4, np.float32, 6, (None, 1e-4)),
    (3, 6, np.float64, 4, (None, 1e-2)),
    (3, 5, np.float32, 3, (None,)),
    (1, 34, np.float64, 2, (None,)),
])
def test_forward_vs_cpu(B, n, dtype, n_iter, tols, cuda, rng):
    X = rng.uniform(0, 4, size=(B, n, n)).astype(dtype)
    Xd = cuda.to_device(X)
    for tol_ in tols:
        Rd, kd = sinkhorn_operator(Xd, n_iter=n_iter, tol=tol_, return_n_iter=True)
        assert Rd.shape == X.shape and Rd.dtype == dtype
        R, k = sinkhorn_operator(X, n_iter=n_iter, tol=tol_, return_n_iter=True)
        np.testing.assert_array_equal(kd.copy_to_host(), k)
        np.testing.assert_allclose(Rd.copy_to_host(), R, **tol(dtype))
        if tol_ is None:
            np.testing.assert_allclose(Rd.copy_to_host(), ref_forward(X, n_iter), **tol(dtype))
    if len(tols) > 1:
        assert len(np.unique(k)) > 1 or B == 1   # early stop hit some matrices
    np.testing.assert_array_equal(Xd.copy_to_host(), X)


@pytest.mark.parametrize("B, n, cap", [(40, 3, None), (3, 6, None), (1, 34, 3)])
def test_implicit_backward_vs_cpu_and_lstsq(B, n, cap, cuda, rng):
    X = rng.uniform(0, 4, size=(B, n, n))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, n_iter=5)               # unconverged on purpose
    Rd, Gd = cuda.to_device(R), cuda.to_device(G)
    for method in ("implicit", "implicit_corrected") if cap is None else ("implicit_corrected",):
        dXd, info = sinkhorn_operator_backward(Rd, Gd, method, max_cg_iter=cap,
                                               return_info=True)
        dX, info_c = sinkhorn_operator_backward(R, G, method, max_cg_iter=cap, return_info=True)
        np.testing.assert_allclose(dXd.copy_to_host(), dX, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(info["cg_iters"].copy_to_host(), info_c["cg_iters"])
    for b in range(min(B, 3) if cap is None else 0):   # CG capped: not converged
        np.testing.assert_allclose(dXd.copy_to_host()[b],
                                   lstsq_grad(R[b], G[b], R[b].sum(1), R[b].sum(0)),
                                   rtol=1e-8, atol=1e-11)
    np.testing.assert_array_equal(Rd.copy_to_host(), R)
    np.testing.assert_array_equal(Gd.copy_to_host(), G)


@pytest.mark.parametrize("B, n", [(40, 3), (3, 6)])
def test_unrolled_backward_vs_cpu(B, n, cuda, rng):
    X = rng.uniform(0, 4, size=(B, n, n)).astype(np.float32)
    G = rng.normal(size=X.shape).astype(np.float32)
    Xd, Gd = cuda.to_device(X), cuda.to_device(G)
    for tol_ in (None, 1e-3):
        dXd, info = sinkhorn_operator_backward(None, Gd, "unrolled", X=Xd, n_iter=5, tol=tol_,
                                               return_info=True)
        dX, info_c = sinkhorn_operator_backward(None, G, "unrolled", X=X, n_iter=5, tol=tol_,
                                                return_info=True)
        assert dXd.dtype == np.float32
        np.testing.assert_array_equal(info["n_iters"].copy_to_host(), info_c["n_iters"])
        np.testing.assert_allclose(dXd.copy_to_host(), dX, rtol=1e-5, atol=1e-6)


def test_device_bad_inputs(cuda):
    X = np.ones((2, 3, 3))
    bad = X.copy()
    bad[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        sinkhorn_operator(cuda.to_device(bad))
    R = sinkhorn_operator(X)
    Rn = R.copy()
    Rn[0, 0, 0] = -1.0
    with pytest.raises(ValueError, match="R has 1 negative"):
        sinkhorn_operator_backward(cuda.to_device(Rn), cuda.to_device(X))
    with pytest.raises(TypeError, match="on the GPU but"):
        sinkhorn_operator_backward(cuda.to_device(R), X)
    with pytest.raises(ValueError, match="X must be a"):
        sinkhorn_operator(cuda.to_device(np.ones((2, 3, 4))))
    with pytest.raises(TypeError, match="float32 or float64"):
        sinkhorn_operator(cuda.to_device(np.ones((2, 3, 3), dtype=np.int64)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the simulator's NumPy scalars
def test_device_overflow_raises(cuda):
    # finite R and grad_R whose products overflow: an error on the device
    # path too, not an inf/NaN gradient
    R = np.full((1, 2, 2), 0.5)
    G = np.full((1, 2, 2), 1.5e308)
    G[0, 0, 1] = -1.5e308
    for method in ("implicit", "implicit_corrected"):
        with pytest.raises(ValueError, match="overflows float64"):
            sinkhorn_operator_backward(cuda.to_device(R * 2), cuda.to_device(G), method)
    X = np.array([[[-0.1, -1.2], [-0.6, -0.5]]])
    Gu = 1.7e308 * np.array([[[-1.0, 1.0], [-1.0, -1.0]]])
    with pytest.raises(ValueError, match="unrolled gradient overflows"):
        sinkhorn_operator_backward(None, cuda.to_device(Gu), "unrolled",
                                   X=cuda.to_device(X), n_iter=1)


def test_device_2d_input_with_info(cuda, rng):
    # a single matrix (no batch dimension): scalar-shaped per-matrix outputs
    X = rng.uniform(0, 2, size=(4, 4))
    Rd, iters = sinkhorn_operator(cuda.to_device(X), 5, return_n_iter=True)
    R, iters_c = sinkhorn_operator(X, 5, return_n_iter=True)
    assert Rd.shape == (4, 4) and iters.shape == ()
    np.testing.assert_allclose(Rd.copy_to_host(), R, rtol=1e-12, atol=1e-14)
    assert int(iters.copy_to_host()) == int(iters_c) == 5
    G = rng.normal(size=(4, 4))
    dXd, info = sinkhorn_operator_backward(Rd, cuda.to_device(G), return_info=True)
    dX, info_c = sinkhorn_operator_backward(R, G, return_info=True)
    assert dXd.shape == (4, 4) and info["cg_iters"].shape == ()
    np.testing.assert_allclose(dXd.copy_to_host(), dX, rtol=1e-9, atol=1e-12)
    assert int(info["cg_iters"].copy_to_host()) == int(info_c["cg_iters"])


@pytest.mark.parametrize("n", [3, 6])
def test_implicit_backward_extreme_scales_of_grad_R(n, cuda, rng):
    # the backward is linear in grad_R: the CG runs on a rhs scaled by a
    # power of two, so 1e-300 and 1e160 give the gradient of scale 1 times
    # the scale (oracle: the dense solve); n = 3 one thread, n = 6 one warp
    X = rng.uniform(0, 4, size=(3, n, n))
    R = sinkhorn_operator(X, n_iter=300)
    G1 = rng.normal(size=X.shape)
    ref = np.stack([lstsq_grad(R[b], G1[b]) for b in range(3)])
    Rd = cuda.to_device(R)
    for scale in (1e-300, 1.0, 1e160):
        dX, info = sinkhorn_operator_backward(Rd, cuda.to_device(G1 * scale),
                                              return_info=True)
        np.testing.assert_allclose(dX.copy_to_host() / scale, ref, rtol=0,
                                   atol=1e-11 * np.abs(ref).max(), err_msg=str(scale))
        assert np.all(info["cg_iters"].copy_to_host() > 0)
