"""numbaot.sinkhorn_operator and sinkhorn_operator_backward (CPU).

Oracles (none shares code with numbaot): a SciPy ``logsumexp`` loop for the
forward; the dense 2n x 2n system [[I, R], [R^T, I]] solved by
``numpy.linalg.lstsq`` (or, batched, made non-singular by adding w w^T along
its null vector w = [1; -1]) for the implicit gradient; central finite
differences in float64 of L(X) = sum(G * S(X)) for every gradient.  They
are defined in tests/reference.py (shared with tests/cuda/test_implicit_cuda.py).
"""
import numba
import numpy as np
import pytest

import numbaot
from numbaot._dispatch import num_threads
from numbaot.implicit import sinkhorn_operator, sinkhorn_operator_backward

from _helpers import assert_raises_naming
from reference import batched_dense_grad, fd_grad, lstsq_grad, ref_forward, ref_forward_tol

#: one xdist worker runs every test sharing the sinkhorn_operator kernels (static
#: mark: see tests/conftest.py, compile groups)
pytestmark = pytest.mark.xdist_group("implicit")


@pytest.fixture
def rng():
    return np.random.default_rng(2026)


# ---------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 3, 7, 7), (70, 16, 16), (5, 33, 33)])
def test_forward_matches_logsumexp_loop(rng, shape):
    X = rng.uniform(0, 4, size=shape)
    R = sinkhorn_operator(X, n_iter=7)
    assert R.shape == X.shape and R.dtype == np.float64
    np.testing.assert_allclose(R, ref_forward(X, 7), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(R.sum(-2), 1.0, rtol=0, atol=1e-13)   # columns exact


def test_forward_large_values_are_stable(rng):
    X = rng.normal(size=(6, 5, 5)) * 1e3      # exp(X) overflows / underflows
    X[0, 0, :] = -3e3                          # spreads beyond the fast shift
    R = sinkhorn_operator(X, n_iter=30)
    assert np.all(np.isfinite(R))
    np.testing.assert_allclose(R, ref_forward(X, 30), rtol=1e-9, atol=1e-12)


def _stress_batch(rng, B=70, n=6):
    """Moderate matrices mixed with ones that drive the CPU forward's
    stabilised iteration off its fast path: column offsets of 100-400 (the
    scalings leave [1e-30, 1e30] and are absorbed into the log potentials),
    row and column offsets of up to 3000 and |X| ~ 1e3 (exp-sums below
    1e-200: those half-steps run as shifted logsumexps)."""
    X = rng.uniform(0, 4, size=(B, n, n))
    m = max(B // 7, 2)                                 # 3 stress groups of m
    X[:m] += rng.uniform(100, 400, size=(m, 1, n))
    X[m:2 * m] += rng.uniform(0, 3000, size=(m, n, 1)) + rng.uniform(0, 3000, size=(m, 1, n))
    X[2 * m:3 * m] = rng.normal(size=(m, n, n)) * 1e3
    return rng.permutation(X)


@pytest.mark.parametrize("tol", [None, 1e-8])
def test_forward_stabilised_paths(rng, tol):
    X = _stress_batch(rng)
    R, ks = sinkhorn_operator(X, 40, tol=tol, return_n_iter=True)
    if tol is None:
        Rref, kref = ref_forward(X, 40), np.full(len(X), 40)
    else:
        Rref, kref = ref_forward_tol(X, 40, tol)
    np.testing.assert_array_equal(ks, kref)
    assert np.all(np.isfinite(R))
    np.testing.assert_allclose(R, Rref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(R.sum(-2), 1.0, rtol=0, atol=1e-12)
    # a lane's arithmetic is its own: alone, in other company or on one
    # thread, every matrix gets the same bits
    for b in (0, 9, 33, 69):
        np.testing.assert_array_equal(sinkhorn_operator(X[b:b + 1], 40, tol=tol)[0], R[b])
    with num_threads(1):
        np.testing.assert_array_equal(sinkhorn_operator(X[::-1], 40, tol=tol), R[::-1])


@pytest.mark.parametrize("scale", [1e5, 1e7, 1e100, 1e300])
def test_forward_huge_entries(rng, scale):
    # beyond |X| ~ 1e6 the potentials cannot hold the multiplicative
    # scalings' updates and the CPU forward runs those lanes in the log
    # domain: the result agrees with the logsumexp loop to the rounding of
    # X (|X| * eps) and stays a column-normalised matrix with entries in [0, 1]
    X = rng.normal(size=(70, 5, 5)) * scale
    X[::3] = rng.uniform(0, 4, size=X[::3].shape)      # lanes on the fast path
    R = sinkhorn_operator(X, 30)
    # rounding of X + f + g: 16 |X| eps; from ~1e16 on, X's ulps exceed 1 and
    # every exponent is 0 or far below -745 (entries are exact fractions)
    atol = 16 * np.finfo(np.float64).eps * (scale if scale < 1e15 else 1.0)
    assert np.all(np.isfinite(R)) and R.min() >= 0 and R.max() <= 1 + atol
    np.testing.assert_allclose(R.sum(-2), 1.0, rtol=0, atol=atol)
    np.testing.assert_allclose(R, ref_forward(X, 30), rtol=0, atol=atol)
    np.testing.assert_array_equal(sinkhorn_operator(X[1:2], 30)[0], R[1])


def test_unrolled_stabilised_paths(rng):
    X = _stress_batch(rng, B=12, n=4)
    G = rng.normal(size=X.shape)
    R, ks = sinkhorn_operator(X, 6, tol=1e-8, return_n_iter=True)
    dX, info = sinkhorn_operator_backward(R, G, "unrolled", X=X, n_iter=6, tol=1e-8,
                                          return_info=True)
    np.testing.assert_array_equal(info["n_iters"], ks)
    for b in range(len(X)):
        K = int(ks[b])
        # entries up to ~6000: each evaluation of the oracle is off by about
        # eps * 6000 ~ 1e-12, so the step balancing that against the O(h^2)
        # truncation is h ~ 1e-4 (FD error ~1e-8)
        fd = fd_grad(lambda Y: np.sum(G[b] * ref_forward(Y, K), axis=(-2, -1)), X[b],
                     h=1e-4)
        np.testing.assert_allclose(dX[b], fd, rtol=1e-5, atol=1e-7)
        # lanes restarted in the log domain sit beside lanes that are not:
        # alone, every matrix gets the same bits
        alone = sinkhorn_operator_backward(None, G[b:b + 1], "unrolled", X=X[b:b + 1],
                                           n_iter=6, tol=1e-8)
        np.testing.assert_array_equal(alone[0], dX[b])


@pytest.mark.parametrize("tol", [1e-3, 1e-8, 0.0])
def test_forward_tol_stops_per_matrix(rng, tol):
    X = rng.uniform(0, 4, size=(37, 5, 5))
    X[3] *= 3                                   # slower matrices in the batch
    R, ks = sinkhorn_operator(X, n_iter=40, tol=tol, return_n_iter=True)
    Rref, kref = ref_forward_tol(X, 40, tol)
    np.testing.assert_array_equal(ks, kref)
    np.testing.assert_allclose(R, Rref, rtol=1e-12, atol=1e-15)
    if tol > 0:
        err = np.abs(R.sum(-1) - 1).max(-1)
        assert np.all((err < tol) | (ks == 40))
        assert len(np.unique(ks)) > 1
    else:
        assert np.all(ks == 40)


def test_forward_float32(rng):
    X = rng.uniform(0, 4, size=(50, 6, 6)).astype(np.float32)
    R = sinkhorn_operator(X, n_iter=10)
    assert R.dtype == np.float32
    np.testing.assert_allclose(R, ref_forward(X, 10), rtol=2e-7, atol=1e-8)


def test_forward_integer_input_and_small_cases():
    R = sinkhorn_operator(np.array([[1, 2], [3, 4]]), n_iter=5)
    assert R.dtype == np.float64
    np.testing.assert_allclose(R, ref_forward([[1.0, 2.0], [3.0, 4.0]], 5), rtol=1e-13)
    assert sinkhorn_operator(np.zeros((0, 3, 3))).shape == (0, 3, 3)
    np.testing.assert_allclose(sinkhorn_operator(np.full((4, 1, 1), 7.0)), 1.0)


def test_forward_thread_count_and_batch_independent(rng):
    X = rng.uniform(0, 4, size=(101, 6, 6))
    with num_threads(1):
        R1, k1 = sinkhorn_operator(X, 30, tol=1e-9, return_n_iter=True)
    R2, k2 = sinkhorn_operator(X, 30, tol=1e-9, return_n_iter=True)
    np.testing.assert_array_equal(R1, R2)
    np.testing.assert_array_equal(k1, k2)
    # a matrix computed alone or inside a batch (other lanes): same bits
    R3 = sinkhorn_operator(X[57:58], 30, tol=1e-9)
    np.testing.assert_array_equal(R3[0], R2[57])


@pytest.mark.parametrize("n", [5, 20])
def test_batch_size_changes_no_bits(rng, n):
    # small batches run on fewer lanes per work item (no padding lanes): a
    # matrix's results are the same bits whatever the batch around it
    X = rng.uniform(0, 4, size=(70, n, n))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, 20)
    full = [sinkhorn_operator_backward(R, G, m, X=X, n_iter=20)
            for m in ("implicit", "implicit_corrected", "unrolled")]
    for sl in (slice(3, 4), slice(10, 19), slice(40, 70)):
        np.testing.assert_array_equal(sinkhorn_operator(X[sl], 20), R[sl])
        part = [sinkhorn_operator_backward(R[sl], G[sl], m, X=X[sl], n_iter=20)
                for m in ("implicit", "implicit_corrected", "unrolled")]
        for a, b in zip(part, full):
            np.testing.assert_array_equal(a, b[sl])


def test_backward_thread_count_independent(rng):
    X = rng.uniform(0, 4, size=(150, 5, 5))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, 20)
    out = []
    for nt in (1, 2):
        with num_threads(nt):
            out.append([sinkhorn_operator_backward(R, G, m, X=X, n_iter=20)
                        for m in ("implicit", "implicit_corrected", "unrolled")])
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                    reason="needs NUMBA_NUM_THREADS >= 2 to cap the thread count")
def test_no_more_threads_than_work_items(rng, monkeypatch, restore_num_threads):
    # a thread without a work item would only be woken up to find nothing to
    # do (0.1-10 ms on a shared VM): the kernels of a small batch run on as
    # many threads as it has work items (64 matrices per item up to n = 16,
    # 32 above), and the thread count is back afterwards
    import numbaot.cpu.implicit as imp   # the launchers cap the threads
    real = imp.threads_at_most
    seen, inside = [], []

    class Spy:
        def __init__(self, n_items):
            seen.append(n_items)
            self.cm = real(n_items)

        def __enter__(self):
            self.cm.__enter__()
            inside.append(numba.get_num_threads())

        def __exit__(self, *exc):
            return self.cm.__exit__(*exc)

    monkeypatch.setattr(imp, "threads_at_most", Spy)
    restore_num_threads(2)
    for B, n, items in ((10, 4, 1), (64, 16, 1), (200, 4, 4), (3, 20, 1), (33, 20, 2)):
        X = rng.uniform(0, 4, size=(B, n, n))
        G = rng.normal(size=X.shape)
        seen.clear()
        inside.clear()
        R = sinkhorn_operator(X, 20)
        for m in ("implicit", "implicit_corrected", "unrolled"):
            sinkhorn_operator_backward(R, G, m, X=X, n_iter=20)
        assert seen == [items] * 4, (B, n)
        assert inside == [min(items, 2)] * 4, (B, n)
        assert numba.get_num_threads() == 2


# ---------------------------------------------------------------------------
# implicit backward
# ---------------------------------------------------------------------------
def test_each_padded_size_has_its_own_kernel():
    # The first call at one size must compile that size's generated kernels
    # only (compiling all sizes took 75 s): each size's parallel kernel sees,
    # through its work-item function, the bindings of its own size alone.
    from numbaot.cpu import _implicit_unrolled as k
    sizes = k.UNROLL_SIZES
    for n in range(1, sizes[-1] + 1):   # the smallest listed size >= n
        N = k.PADDED[n]
        assert N in sizes and N >= n and not [s for s in sizes if n <= s < N]
    for N, kernel in k.UNROLLED_KERNELS.items():
        item = kernel.py_func.__globals__["_backward_item_unrolled"]
        assert item.py_func.__name__ == f"_backward_item_unrolled_{N}"
        names = item.py_func.__globals__
        for name in ("cg", "cg_init", "rhs", "u", "setup", "dx"):
            bound = names["_" + name]
            if not hasattr(bound, "py_func"):
                # an intrinsic (numbaot.cpu._irlower) lowering size N's kernel
                assert bound.kernel_name == f"_{name}_{N}", (N, name, bound.kernel_name)
                assert bound is names[f"_{name}_at_{N}"]
                continue
            assert bound.py_func.__name__ == f"_{name}_at_{N}"
            # the binding calls size N's kernel (or nothing: setup/dx are
            # written out for small N only)
            called = [v for v in bound.py_func.__code__.co_names if v.startswith("_")]
            assert called in ([f"_{name}_{N}"], []), (N, name, called)
            if called:
                assert called[0] in bound.py_func.__globals__


@pytest.mark.parametrize("n, B", [(2, 6), (4, 6), (4, 130), (8, 70), (9, 6), (12, 65),
                                  (13, 6), (16, 6), (16, 129), (40, 6)])
def test_implicit_matches_lstsq(rng, n, B):
    # B > 64: several work items, the last one partial; n in (4, 8, 12, 16):
    # the kernels written out for the size, other n: padded
    X = rng.uniform(0, 4, size=(B, n, n))
    R = ref_forward(X, 2000)                 # converged to rounding
    G = rng.normal(size=X.shape)
    for method in ("implicit", "implicit_corrected"):
        dX, info = sinkhorn_operator_backward(R, G, method, return_info=True)
        ref = np.array([lstsq_grad(R[b], G[b]) for b in range(B)])
        np.testing.assert_allclose(dX, ref, rtol=1e-8, atol=1e-10 * np.abs(ref).max())
        assert np.all(info["cg_iters"] <= n) and np.all(info["residual"] <= 1e-12)


def test_implicit_matches_finite_differences(rng):
    n = 5
    X = rng.uniform(0, 3, size=(n, n))
    G = rng.normal(size=(n, n))
    R = sinkhorn_operator(X, n_iter=500)
    dX = sinkhorn_operator_backward(R, G)
    fd = fd_grad(lambda Y: np.sum(G * ref_forward(Y, 500), axis=(-2, -1)), X)
    np.testing.assert_allclose(dX, fd, rtol=1e-6, atol=1e-8)


def test_implicit_sums_to_zero(rng):
    # S(X + a 1^T + 1 b^T) = S(X): the gradient's rows and columns sum to 0
    X = rng.uniform(0, 4, size=(20, 6, 6))
    R = sinkhorn_operator(X, n_iter=300)
    dX = sinkhorn_operator_backward(R, rng.normal(size=X.shape))
    np.testing.assert_allclose(dX.sum(-1), 0, atol=1e-12)
    np.testing.assert_allclose(dX.sum(-2), 0, atol=1e-12)


#: 4, 12: kernels written out for the size; n = 12 is slow (the finite
#: differences run the 3000-iteration SciPy oracle on 2 n^2 = 288 matrices:
#: 11 CPU-seconds, 20 s wall with a warm Numba cache, measured 2026-11-25)
@pytest.mark.parametrize("n", [4, 5, pytest.param(12, marks=pytest.mark.slow)])
def test_corrected_matches_fd_of_exact_projection(rng, n):
    """For an unconverged R (3 iterations) the corrected gradient is the
    gradient of X -> the exact Sinkhorn projection of exp(X) onto R's own
    marginals (r, c), checked by finite differences of that projection."""
    X = rng.uniform(0, 4, size=(n, n))
    G = rng.normal(size=(n, n))
    R = sinkhorn_operator(X, n_iter=3)
    r, c = R.sum(1), R.sum(0)
    assert np.abs(r - 1).max() > 1e-3                 # really unconverged
    np.testing.assert_allclose(ref_forward(X, 3000, r, c), R, rtol=1e-10)  # R = projection
    dX = sinkhorn_operator_backward(R, G, "implicit_corrected")
    fd = fd_grad(lambda Y: np.sum(G * ref_forward(Y, 3000, r, c), axis=(-2, -1)), X)
    np.testing.assert_allclose(dX, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dX, lstsq_grad(R, G, r, c), rtol=1e-8, atol=1e-12)
    # the uncorrected formula is off by about the marginal error
    d_plain = sinkhorn_operator_backward(R, G, "implicit")
    assert np.abs(d_plain - fd).max() > 1e3 * np.abs(dX - fd).max()


def test_implicit_error_shrinks_with_forward_iterations(rng):
    X = rng.uniform(0, 4, size=(4, 4))
    G = rng.normal(size=(4, 4))
    exact = lstsq_grad(ref_forward(X, 2000), G)
    errs = []
    for k in (2, 5, 10, 20):
        R = sinkhorn_operator(X, n_iter=k)
        errs.append(np.abs(sinkhorn_operator_backward(R, G) - exact).max())
    assert errs == sorted(errs, reverse=True) and errs[-1] < 1e-6


def test_cg_cap_and_tolerance(rng):
    X = rng.uniform(0, 4, size=(30, 12, 12))
    R = sinkhorn_operator(X, n_iter=200)
    G = rng.normal(size=X.shape)
    _, info = sinkhorn_operator_backward(R, G, max_cg_iter=2, return_info=True)
    assert np.all(info["cg_iters"] <= 2) and np.all(info["residual"] > 1e-12)
    _, info = sinkhorn_operator_backward(R, G, cg_tol=1e-4, return_info=True)
    assert np.all(info["residual"] <= 1e-4)
    assert np.all(info["cg_iters"] < 12)


def test_implicit_near_permutation(rng):
    # low temperature: R close to a permutation, CG ill-conditioned
    n = 6
    perm = rng.permutation(n)
    X = np.eye(n)[perm] * 8 + rng.uniform(0, 1, (n, n))
    R = ref_forward(X, 5000)
    G = rng.normal(size=(n, n))
    dX, info = sinkhorn_operator_backward(R, G, max_cg_iter=3 * n, return_info=True)
    ref = lstsq_grad(R, G)
    np.testing.assert_allclose(dX, ref, rtol=1e-6, atol=1e-9 * np.abs(ref).max())


# ---------------------------------------------------------------------------
# unrolled backward
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_iter", [1, 3, 10])
def test_unrolled_matches_finite_differences(rng, n_iter):
    n = 4
    X = rng.uniform(0, 4, size=(n, n))
    G = rng.normal(size=(n, n))
    dX = sinkhorn_operator_backward(None, G, "unrolled", X=X, n_iter=n_iter)
    fd = fd_grad(lambda Y: np.sum(G * ref_forward(Y, n_iter), axis=(-2, -1)), X)
    np.testing.assert_allclose(dX, fd, rtol=1e-6, atol=1e-9)


def test_unrolled_with_tol_and_lanes(rng):
    X = rng.uniform(0, 4, size=(70, 5, 5))
    X[::7] *= 3                                   # different K per matrix
    G = rng.normal(size=X.shape)
    R, ks = sinkhorn_operator(X, 40, tol=1e-6, return_n_iter=True)
    dX, info = sinkhorn_operator_backward(R, G, "unrolled", X=X, n_iter=40, tol=1e-6,
                                          return_info=True)
    np.testing.assert_array_equal(info["n_iters"], ks)
    assert len(np.unique(ks)) > 1
    for b in (0, 7, 13, 69):
        K = int(ks[b])
        fd = fd_grad(lambda Y: np.sum(G[b] * ref_forward(Y, K), axis=(-2, -1)), X[b])
        np.testing.assert_allclose(dX[b], fd, rtol=1e-6, atol=1e-9)
        alone = sinkhorn_operator_backward(None, G[b:b + 1], "unrolled", X=X[b:b + 1],
                                           n_iter=40, tol=1e-6)
        np.testing.assert_array_equal(alone[0], dX[b])


def test_unrolled_converges_to_implicit(rng):
    X = rng.uniform(0, 4, size=(10, 6, 6))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, n_iter=300)
    du = sinkhorn_operator_backward(R, G, "unrolled", X=X, n_iter=300)
    di = sinkhorn_operator_backward(R, G, "implicit")
    np.testing.assert_allclose(du, di, rtol=1e-8, atol=1e-11)


def test_unrolled_large_scaling_steps(rng):
    # column scalings that move by more than ~700 in one iteration: exp of
    # their difference overflows, so each iterate is recomputed directly
    n = 4
    X = rng.normal(size=(n, n)) * 800
    G = rng.normal(size=(n, n))
    dX = sinkhorn_operator_backward(None, G, "unrolled", X=X, n_iter=2)
    assert np.all(np.isfinite(dX))
    fd = fd_grad(lambda Y: np.sum(G * ref_forward(Y, 2), axis=(-2, -1)), X, h=1e-6)
    np.testing.assert_allclose(dX, fd, rtol=1e-5, atol=1e-8)


def test_large_values_backward(rng):
    X = rng.normal(size=(3, 5, 5)) * 300
    G = rng.normal(size=X.shape)
    du = sinkhorn_operator_backward(None, G, "unrolled", X=X, n_iter=5)
    assert np.all(np.isfinite(du))
    R = sinkhorn_operator(X, n_iter=5)
    dc = sinkhorn_operator_backward(R, G, "implicit_corrected")
    assert np.all(np.isfinite(dc))


# ---------------------------------------------------------------------------
# the seed's settings
# ---------------------------------------------------------------------------
def test_seed_setting_batch_10001_n4():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 4, size=(10001, 4, 4))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, n_iter=48)
    idx = np.arange(0, 10001, 97)
    np.testing.assert_allclose(R[idx], ref_forward(X[idx], 48), rtol=1e-12, atol=1e-15)
    # after 48 iterations a few (slow) matrices are not doubly stochastic to
    # 1e-10: the plain implicit gradient is exact only where R is
    err = np.abs(R.sum(-1) - 1).max(-1)
    ok = err < 1e-10
    assert ok.sum() > 9900
    dX = sinkhorn_operator_backward(R, G)
    ref = batched_dense_grad(R, G)
    np.testing.assert_allclose(dX[ok], ref[ok], rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(dX, ref, rtol=0, atol=1e-6)
    for b in idx[:10]:
        np.testing.assert_allclose(dX[b], lstsq_grad(R[b], G[b]), rtol=1e-7, atol=1e-10)
    # the corrected system is consistent for every matrix
    dc = sinkhorn_operator_backward(R, G, "implicit_corrected")
    np.testing.assert_allclose(dc, batched_dense_grad(R, G, corrected=True), rtol=1e-7,
                               atol=1e-10)
    du = sinkhorn_operator_backward(R, G, "unrolled", X=X, n_iter=48)
    np.testing.assert_allclose(du[ok], ref[ok], rtol=1e-6, atol=1e-8)  # near the limit


def test_seed_setting_batch_65536_n16():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 4, size=(65536, 16, 16))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, n_iter=48)
    dX, info = sinkhorn_operator_backward(R, G, return_info=True)
    assert np.all(info["cg_iters"] <= 16)
    idx = np.arange(0, 65536, 257)
    np.testing.assert_allclose(R[idx], ref_forward(X[idx], 48), rtol=1e-12, atol=1e-15)
    dc = sinkhorn_operator_backward(R, G, "implicit_corrected")
    np.testing.assert_allclose(dc[idx], batched_dense_grad(R[idx], G[idx], True), rtol=1e-7,
                               atol=1e-10)
    ok = np.abs(R[idx].sum(-1) - 1).max(-1) < 1e-10
    assert ok.sum() > 200
    np.testing.assert_allclose(dX[idx][ok], batched_dense_grad(R[idx], G[idx])[ok],
                               rtol=1e-7, atol=1e-10)


def test_float32_backward(rng):
    X = rng.uniform(0, 4, size=(40, 6, 6))
    G = rng.normal(size=X.shape)
    R64 = sinkhorn_operator(X, n_iter=200)
    R32 = R64.astype(np.float32)
    for method in ("implicit", "implicit_corrected"):
        d32 = sinkhorn_operator_backward(R32, G.astype(np.float32), method)
        assert d32.dtype == np.float32
        np.testing.assert_allclose(d32, sinkhorn_operator_backward(R64, G, method),
                                   rtol=1e-4, atol=1e-5)
    d32 = sinkhorn_operator_backward(None, G.astype(np.float32), "unrolled",
                                     X=X.astype(np.float32), n_iter=10)
    assert d32.dtype == np.float32
    ref = sinkhorn_operator_backward(None, G.astype(np.float32).astype(np.float64), "unrolled",
                                     X=X.astype(np.float32).astype(np.float64), n_iter=10)
    np.testing.assert_allclose(d32, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [4, 7, 16])
def test_read_only_inputs_give_the_same_gradient(rng, n, dtype):
    # the work item is called at an address compiled for the arrays' exact
    # types (numbaot.cpu._pointer): read-only R and / or G are accepted and
    # give the bits of writable inputs (whose gradients the dense-solve
    # tests above check)
    X = rng.uniform(0, 4, size=(70, n, n))
    R = sinkhorn_operator(X, n_iter=100).astype(dtype)
    G = rng.normal(size=X.shape).astype(dtype)
    ref = {m: sinkhorn_operator_backward(R, G, m) for m in ("implicit", "implicit_corrected")}
    for ro in ("R", "G", "both"):
        Rc, Gc = R.copy(), G.copy()
        if ro in ("R", "both"):
            Rc.setflags(write=False)
        if ro in ("G", "both"):
            Gc.setflags(write=False)
        for m, d in ref.items():
            np.testing.assert_array_equal(sinkhorn_operator_backward(Rc, Gc, m), d)


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------
def test_caller_arrays_unmodified(rng):
    X = rng.uniform(0, 4, size=(9, 5, 5))
    G = rng.normal(size=X.shape)
    X0, G0 = X.copy(), G.copy()
    R = sinkhorn_operator(X, 10)
    R0 = R.copy()
    for m in ("implicit", "implicit_corrected", "unrolled"):
        sinkhorn_operator_backward(R, G, m, X=X, n_iter=10)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(G, G0)
    np.testing.assert_array_equal(R, R0)


@pytest.mark.parametrize("shape", [(0, 4, 4), (0, 20, 20), (3, 0, 16, 16)])
def test_backward_empty_batch(shape):
    # no matrices: empty results of the right shape and dtype, for every
    # method and both kernel families (n <= 16 generated, n > 16 generic)
    R = np.zeros(shape, dtype=np.float32)
    for method in ("implicit", "implicit_corrected"):
        d, info = sinkhorn_operator_backward(R, R, method, return_info=True)
        assert d.shape == shape and d.dtype == np.float32
        assert info["cg_iters"].shape == info["residual"].shape == shape[:-2]
    d = sinkhorn_operator_backward(R, R, "unrolled", X=R)
    assert d.shape == shape and d.dtype == np.float32
    assert sinkhorn_operator(R).dtype == np.float32


@pytest.mark.parametrize("method", ["implicit", "implicit_corrected"])
def test_input_forms_agree(rng, method):
    # C-contiguous float arrays of one dtype skip the conversions; every other
    # form goes through them and must give the same bits and info
    X = rng.uniform(0, 4, size=(2, 35, 4, 4))
    G = rng.normal(size=X.shape)
    R = sinkhorn_operator(X, 30)
    ref, info = sinkhorn_operator_backward(R, G, method, return_info=True)
    assert ref.shape == X.shape and ref.dtype == np.float64
    assert info["cg_iters"].shape == info["residual"].shape == X.shape[:2]
    variants = [
        dict(R=np.asfortranarray(R), grad_R=G),
        dict(R=R, grad_R=np.concatenate([G, G], -1)[..., :4]),   # a non-contiguous view
        dict(R=R.tolist(), grad_R=G),
        dict(R=R, grad_R=G, cg_tol=np.float64(1e-12)),
        dict(R=R, grad_R=G, max_cg_iter=4),
        dict(R=R, grad_R=G, method=method.upper()),
    ]
    assert not variants[1]["grad_R"].flags.c_contiguous
    for kw in variants:
        kw.setdefault("method", method)
        d, inf = sinkhorn_operator_backward(return_info=True, **kw)
        np.testing.assert_array_equal(d, ref)
        np.testing.assert_array_equal(inf["cg_iters"], info["cg_iters"])
        np.testing.assert_array_equal(inf["residual"], info["residual"])
    # mixed dtypes: float64 (the float32 values, exactly)
    d = sinkhorn_operator_backward(R.astype(np.float32), G, method)
    assert d.dtype == np.float64
    np.testing.assert_array_equal(
        d, sinkhorn_operator_backward(R.astype(np.float32).astype(np.float64), G, method))


def test_bad_inputs():
    X = np.ones((3, 4, 4))
    R = sinkhorn_operator(X)
    G = np.ones_like(R)
    assert_raises_naming(ValueError, "X", sinkhorn_operator, np.ones(4))
    assert_raises_naming(ValueError, "X", sinkhorn_operator, np.ones((3, 4, 5)))
    assert_raises_naming(ValueError, "X", sinkhorn_operator, np.ones((3, 0, 0)))
    bad = X.copy()
    bad[1, 2, 3] = np.nan
    assert_raises_naming(ValueError, "X", sinkhorn_operator, bad)
    bad[1, 2, 3] = np.inf
    assert_raises_naming(ValueError, "X", sinkhorn_operator, bad)
    assert_raises_naming(TypeError, "X", sinkhorn_operator, X.astype(complex))
    assert_raises_naming(TypeError, "X", sinkhorn_operator, X > 0)
    assert_raises_naming(ValueError, "n_iter", sinkhorn_operator, X, n_iter=0)
    assert_raises_naming(TypeError, "n_iter", sinkhorn_operator, X, n_iter=2.5)
    assert_raises_naming(ValueError, "tol", sinkhorn_operator, X, tol=-1.0)
    assert_raises_naming(ValueError, "tol", sinkhorn_operator, X, tol=np.nan)
    assert_raises_naming(TypeError, "tol", sinkhorn_operator, X, tol="small")

    bwd = sinkhorn_operator_backward
    assert_raises_naming(ValueError, "grad_R", bwd, R, np.ones((3, 4, 3)))
    assert_raises_naming(ValueError, "grad_R", bwd, R, np.ones((2, 4, 4)))
    assert_raises_naming(ValueError, "R", bwd, np.ones(4), np.ones((4, 4)))
    Rb = R.copy()
    Rb[0, 0, 0] = np.nan
    assert_raises_naming(ValueError, "R", bwd, Rb, G)
    Rb[0, 0, 0] = -0.1
    assert_raises_naming(ValueError, "R", bwd, Rb, G)
    Gb = G.copy()
    Gb[2, 1, 1] = np.inf
    assert_raises_naming(ValueError, "grad_R", bwd, R, Gb)
    assert_raises_naming(ValueError, "method", bwd, R, G, "adjoint")
    assert_raises_naming(TypeError, "method", bwd, R, G, 3)
    assert_raises_naming(ValueError, "X", bwd, R, G, "unrolled")
    assert_raises_naming(ValueError, "X", bwd, R, G, "unrolled", X=np.ones((3, 5, 5)))
    Xb = X.copy()
    Xb[0, 0, 0] = np.nan
    assert_raises_naming(ValueError, "X", bwd, R, G, "unrolled", X=Xb)
    assert_raises_naming(ValueError, "n_iter", bwd, R, G, "unrolled", X=X, n_iter=0)
    assert_raises_naming(ValueError, "tol", bwd, R, G, "unrolled", X=X, tol=-1)
    assert_raises_naming(ValueError, "cg_tol", bwd, R, G, cg_tol=0.0)
    assert_raises_naming(ValueError, "max_cg_iter", bwd, R, G, max_cg_iter=0)
    # the unrolled backward does not use them, but checks them too
    for bad in (-1.0, np.nan):
        assert_raises_naming(ValueError, "cg_tol", bwd, R, G, "unrolled", X=X, cg_tol=bad)
    assert_raises_naming(TypeError, "cg_tol", bwd, R, G, "unrolled", X=X, cg_tol="x")
    assert_raises_naming(ValueError, "max_cg_iter", bwd, R, G, "unrolled", X=X, max_cg_iter=0)
    assert_raises_naming(TypeError, "max_cg_iter", bwd, R, G, "unrolled", X=X,
                         max_cg_iter=1.5)
    for name, kw in [("n_iter", dict(n_iter=-1)), ("max_cg_iter", dict(max_cg_iter=-2))]:
        with pytest.raises(ValueError, match=f"{name} must be >= 1"):
            bwd(R, G, "unrolled", X=X, **kw) if name == "n_iter" else bwd(R, G, **kw)
    with pytest.raises(ValueError, match="n_iter must be >= 1"):
        sinkhorn_operator(X, n_iter=-1)
    assert_raises_naming(ValueError, "R", bwd, None, G, "implicit")


@pytest.mark.parametrize("method", ["implicit", "implicit_corrected"])
@pytest.mark.parametrize("n, B", [(4, 1), (4, 70), (13, 130), (16, 64), (20, 33)])
def test_bad_values_found_in_the_kernel_pass(rng, method, n, B):
    # the implicit backward checks R and grad_R inside its read pass: every
    # kind of bad entry, anywhere (first and last matrix, a partial last work
    # item, generated and generic kernels), also where the other array is 0
    R = sinkhorn_operator(rng.uniform(0, 2, size=(B, n, n)), 30)
    G = rng.normal(size=R.shape)
    bwd = sinkhorn_operator_backward
    for b in {0, B - 1}:
        for val, zero_other in [(np.nan, False), (np.inf, True), (-np.inf, False),
                                (np.nan, True)]:
            Rb, Gb = R.copy(), G.copy()
            Rb[b, n - 1, 0] = val
            if zero_other:
                Gb[b, n - 1, 0] = 0.0
            with pytest.raises(ValueError, match=r"R contains NaN or inf \(1 entries\)"):
                bwd(Rb, Gb, method)
            Rb, Gb = R.copy(), G.copy()
            Gb[b, 0, n - 1] = val
            if zero_other:
                Rb[b, 0, n - 1] = 0.0
            with pytest.raises(ValueError, match=r"grad_R contains NaN or inf \(1 entries\)"):
                bwd(Rb, Gb, method)
        Rb = R.copy()
        Rb[b, 1, 1] = -1e-300
        Rb[b, 0, 1] = -0.5
        with pytest.raises(ValueError, match="R has 2 negative entries"):
            bwd(Rb, G, method)
    # finite inputs whose products overflow: a clear error, not NaN
    Rb, Gb = R.copy(), G.copy()
    Rb[B - 1] = 10.0
    Gb[B - 1] = 1e308
    with pytest.raises(ValueError, match="overflows float64"):
        bwd(Rb, Gb, method)


def test_unrolled_overflow_raises():
    # finite X and grad_R whose unrolled products overflow float64 (checked
    # in float64 by hand: 1.7e308 times entries of R near 1 and their sums):
    # a clear error rather than an inf/NaN gradient
    X = np.array([[-0.1, -1.2], [-0.6, -0.5]])
    G = 1.7e308 * np.array([[-1.0, 1.0], [-1.0, -1.0]])
    with np.errstate(over="ignore", invalid="ignore"):
        R = np.exp(X - np.log(np.exp(X).sum(1, keepdims=True)))
        R = R / R.sum(0)
        H = G * R
        assert not np.all(np.isfinite(H.sum(0)) & np.isfinite(H.sum(1)))
    with pytest.raises(ValueError, match="unrolled gradient overflows"):
        sinkhorn_operator_backward(None, G, "unrolled", X=X, n_iter=1)
    # the same inputs, scaled down, give a finite gradient
    dX = sinkhorn_operator_backward(None, G * 1e-300, "unrolled", X=X, n_iter=1)
    assert np.all(np.isfinite(dX))


def test_exported():
    assert numbaot.sinkhorn_operator is sinkhorn_operator
    assert numbaot.sinkhorn_operator_backward is sinkhorn_operator_backward
    assert "sinkhorn_operator" in numbaot.__all__


@pytest.mark.parametrize("size", [1, 7, 4096, 16384, 16385, 70000])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_count_invalid_both_paths(rng, size, dtype):
    # up to _config.IMPLICIT_CHECK_NUMPY_MAX entries NumPy's min / max, above
    # it the counting kernel: the counts of NumPy's isfinite and x < 0
    from numbaot.cpu.implicit import count_invalid
    for case in ("clean", "negative", "bad"):
        x = rng.uniform(0.0, 1e30, size).astype(dtype)
        if case != "clean":
            idx = rng.choice(size, size=min(size, 5), replace=False)
            x[idx[:2]] = -rng.uniform(1, 2, len(idx[:2])) if case == "negative" else x[idx[:2]]
            x[-1] = -0.0
        if case == "bad":
            x[idx[2:]] = np.array([np.nan, np.inf, -np.inf])[:len(idx[2:])]
        for nonneg in (True, False):
            bad = int(np.count_nonzero(~np.isfinite(x)))
            neg = int(np.count_nonzero(x < 0)) if nonneg else 0
            assert count_invalid(x.reshape(1, 1, -1), nonneg) == (bad, neg), (case, nonneg)
