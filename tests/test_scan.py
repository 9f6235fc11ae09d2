"""Discounted cumulative sums, their gradients and GAE (numbaot.scan), on the
CPU and on CUDA device arrays.

Oracles: scipy.signal.lfilter (y_t = x_t + gamma y_{t-1} is the IIR filter
b = [1], a = [1, -gamma]), plain Python loops over the recurrences
(tests/reference.py), float64 closed forms, central finite differences in
float64, and, for the CUDA kernels, numbaot's CPU kernels.  None of the
first four shares code with numbaot.

The tests that take the ``device`` fixture (the last section) run once on the
CPU and once on CUDA (the ``[cuda]`` case runs in the simulator pass of the
README's test command, or on a GPU); the others are CPU-only (thread counts,
CPU chunking, host-side validation).  In the simulator the block-scan
tunables are lowered (64 threads x 2 items = 128 positions per tile, rows of
more than 8 positions take the block path), so that rows of a few hundred
positions cross several tiles and every block has two warps.
"""
import re

import numpy as np
import pytest
from scipy.signal import lfilter

import numbaot
from numbaot import _config
from numbaot._dispatch import simulator_enabled

from reference import lfilter_left, lfilter_right, loop_gae, loop_left, loop_right

F64 = dict(rtol=1e-12, atol=1e-12)
#: float32 input/output vs a float64 oracle on the same (upcast) data: the
#: result is a float64 sum rounded once to float32 (6e-8 relative), plus the
#: float32 rounding of an intermediate chunk sum where rows are split.
F32 = dict(rtol=3e-7, atol=1e-6)


def tol(dtype):
    return F32 if np.dtype(dtype) == np.float32 else F64


def names(message, name):
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) is not None


@pytest.fixture
def small_chunks(monkeypatch):
    """Split rows into chunks of 7 scan positions, so that the parallel
    (reduce, then scan) path runs on short rows, with uneven last chunks and
    lockstep groups of fewer than four chunks."""
    monkeypatch.setattr(_config, "SCAN_CHUNK", 7)
    yield


# --------------------------------------------------------------------------
# forward against lfilter
# --------------------------------------------------------------------------
#: lengths on and around powers of two up to 2^17 (sampled to keep the suite fast)
LENGTHS = [1, 2, 3, 7, 8, 9, 31, 32, 33, 255, 256, 257, 4095, 4096, 4097,
           16383, 16384, 16385, 65535, 65536, 65537, 131071, 131072]


@pytest.mark.parametrize("N", LENGTHS)
def test_single_row_vs_lfilter(N, rng):
    x = rng.normal(size=N)
    g = 0.995
    right = numbaot.discounted_cumsum_right(x, g)
    left = numbaot.discounted_cumsum_left(x, g)
    assert right.shape == (N,) and right.dtype == np.float64
    np.testing.assert_allclose(right, lfilter([1.0], [1.0, -g], x[::-1])[::-1], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(left, lfilter([1.0], [1.0, -g], x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 33), (5, 64), (70, 129), (3, 1), (8, 1000)])
@pytest.mark.parametrize("per_row", [False, True])
def test_batch_vs_lfilter(dtype, shape, per_row, rng):
    x = rng.normal(size=shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.0, size=shape[0]) if per_row else 0.9
    gvec = gamma if per_row else np.full(shape[0], gamma)
    for fn, oracle in ((numbaot.discounted_cumsum_right, lfilter_right),
                       (numbaot.discounted_cumsum_left, lfilter_left)):
        y = fn(x, gamma)
        assert y.shape == shape and y.dtype == dtype
        np.testing.assert_allclose(y, oracle(x, gvec), **tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 7), (1, 8), (1, 29), (2, 30), (3, 57), (5, 100)])
def test_chunked_path_vs_lfilter(small_chunks, dtype, shape, rng):
    """Rows split in chunks of 7 (1 to 15 chunks, uneven tails, rows of a
    batch split too): the same results as one sequential pass."""
    x = rng.normal(size=shape).astype(dtype)
    gamma = rng.uniform(0.3, 1.0, size=shape[0])
    np.testing.assert_allclose(numbaot.discounted_cumsum_right(x, gamma),
                               lfilter_right(x, gamma), **tol(dtype))
    np.testing.assert_allclose(numbaot.discounted_cumsum_left(x, gamma),
                               lfilter_left(x, gamma), **tol(dtype))


def test_scalar_gamma_many_rows(rng):
    """torch-discounted-cumsum's CPU path reads out of bounds here."""
    x = rng.normal(size=(300, 20))
    np.testing.assert_allclose(numbaot.discounted_cumsum_right(x, 0.97),
                               lfilter_right(x, np.full(300, 0.97)), **F64)


def test_gamma_edges(rng):
    x = rng.normal(size=(4, 50))
    np.testing.assert_array_equal(numbaot.discounted_cumsum_right(x, 0.0), x)
    np.testing.assert_array_equal(numbaot.discounted_cumsum_left(x, 0), x)
    np.testing.assert_allclose(numbaot.discounted_cumsum_left(x, 1.0), np.cumsum(x, axis=1), **F64)
    np.testing.assert_allclose(numbaot.discounted_cumsum_right(x, 1),
                               np.cumsum(x[:, ::-1], axis=1)[:, ::-1], **F64)


def test_long_row_underflow_no_nan(small_chunks):
    """gamma^len underflows to 0 between chunks: exact zeros, never NaN."""
    x = np.ones(3000)
    for g in (1e-300, 0.01, 0.5):
        y = numbaot.discounted_cumsum_right(x, g)
        assert np.all(np.isfinite(y))
        np.testing.assert_allclose(y, lfilter([1.0], [1.0, -g], x)[::-1], **F64)


def test_integer_input_gives_float64():
    y = numbaot.discounted_cumsum_right(np.arange(5), 0.5)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, loop_right(np.arange(5)[None], [0.5])[0], **F64)


def test_empty_rows():
    y = numbaot.discounted_cumsum_right(np.zeros((3, 0)), 0.9)
    assert y.shape == (3, 0)
    gi, gg = numbaot.discounted_cumsum_left_backward(np.zeros((3, 0)), np.zeros((3, 0)),
                                                     np.full(3, 0.5))
    assert gi.shape == (3, 0) and gg.shape == (3,) and np.all(gg == 0)


def test_results_independent_of_thread_count(restore_num_threads, rng):
    x = rng.normal(size=(2, 70000))
    restore_num_threads(1)
    one = numbaot.discounted_cumsum_right(x, 0.999)
    restore_num_threads(2)
    two = numbaot.discounted_cumsum_right(x, 0.999)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("masked", [False, True])
def test_one_thread_path_equals_parallel_path(dtype, masked, rng, monkeypatch):
    """Below ``SCAN_MIN_THREAD_WORK`` a batch runs on the calling thread
    without a parallel region (and a float gamma reaches the kernel as it
    is); the parallel path gives the same bits, and both match the loops."""
    x = rng.normal(size=(37, 40)).astype(dtype)
    d = rng.random(x.shape) < 0.1 if masked else None
    runs = []
    for min_work in (_config.SCAN_MIN_THREAD_WORK, 1):  # one thread, then the parallel path
        monkeypatch.setattr(_config, "SCAN_MIN_THREAD_WORK", min_work)
        runs.append([numbaot.discounted_cumsum_right(x, 0.9, dones=d),
                     numbaot.discounted_cumsum_left(x[:, ::3], np.full(37, 0.9), dones=None),
                     numbaot.discounted_cumsum_right(x[5], np.float64(0.9))])
    for a, b in zip(*runs):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(runs[0][0], loop_right(x64, np.full(37, 0.9), d), **tol(dtype))
    np.testing.assert_allclose(runs[0][1], loop_left(x64[:, ::3], np.full(37, 0.9)), **tol(dtype))
    np.testing.assert_allclose(runs[0][2], loop_right(x64[5:6], [0.9])[0], **tol(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("masked", [False, True])
def test_many_row_tasks(dtype, masked, rng, monkeypatch):
    """The parallel path of whole rows splits them into tasks of at least
    2^14 entries (1024 rows of 16, four at a time); 4099 rows make five
    tasks, the last of three rows scanned one by one: the same bits as the
    one-thread path, the plain loops' values, and a float32 overflow in one
    row of a middle task still raises."""
    x = rng.normal(size=(4099, 16)).astype(dtype)
    d = rng.random(x.shape) < 0.1 if masked else None
    g = rng.uniform(0.5, 1.0, 4099)
    runs = []
    for min_work in (_config.SCAN_MIN_THREAD_WORK, 1):  # one thread, then the parallel path
        monkeypatch.setattr(_config, "SCAN_MIN_THREAD_WORK", min_work)
        runs.append([numbaot.discounted_cumsum_right(x, g, dones=d),
                     numbaot.discounted_cumsum_left(x, 0.9, dones=d)])
    for a, b in zip(*runs):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(runs[1][0], loop_right(x64, g, d), **tol(dtype))
    np.testing.assert_allclose(runs[1][1], loop_left(x64, np.full(4099, 0.9), d), **tol(dtype))
    if dtype == np.float32:
        # y_14 = 3e38 + 0.99 * 3e38 overflows float32 when stored, and the
        # next entries bring the sum back (y_13 = 2.9e38, y_12 = -1.2e37,
        # then zeros): only the read-back of the stored values sees it
        big = x.copy()
        big[2050, :] = 0.0
        big[2050, 12:] = [-3e38, -3e38, 3e38, 3e38]
        with pytest.raises(ValueError, match="overflow"):
            numbaot.discounted_cumsum_right(big, 0.99)


def test_host_fast_path_equals_general_path(rng):
    """A C-contiguous float array with a float gamma and no mask skips the
    general validation; every other spelling of the same problem (gamma as
    a NumPy scalar, a 0-d array or one value per row; x big-endian or
    Fortran-ordered) takes the general path and gives the same bits."""
    x = rng.normal(size=(6, 50))
    fast = numbaot.discounted_cumsum_right(x, 0.95)
    for xx, g in [(x, np.float64(0.95)), (x, np.array(0.95)), (x, np.full(6, 0.95)),
                  (x.astype(">f8"), 0.95), (np.asfortranarray(x), 0.95)]:
        y = numbaot.discounted_cumsum_right(xx, g)
        assert y.dtype == np.float64 and y.shape == x.shape
        np.testing.assert_array_equal(y, fast)
    np.testing.assert_allclose(fast, lfilter_right(x, np.full(6, 0.95)), **F64)


# --------------------------------------------------------------------------
# the seed's examples
# --------------------------------------------------------------------------
def test_seed_printed_example():
    """torch-discounted-cumsum's README: N = 8 ones, gamma = 0.99."""
    y = numbaot.discounted_cumsum_right(np.ones((1, 8)), 0.99)
    expected = [7.7255, 6.7935, 5.8520, 4.9010, 3.9404, 2.9701, 1.9900, 1.0000]
    np.testing.assert_allclose(y[0], expected, atol=5e-5)
    # closed form: sum_{k < N - t} gamma^k
    closed = (1 - 0.99 ** (8 - np.arange(8))) / (1 - 0.99)
    np.testing.assert_allclose(y[0], closed, **F64)


@pytest.mark.parametrize("K", [1, 3, 10])
def test_k_step_window_trick(K, rng):
    """The K-step truncated discounted sum sum_{k<K} gamma^k x_{t+k} equals
    y_t - gamma^K y_{t+K} (y_{t+K} = 0 past the end)."""
    x = rng.normal(size=(3, 40))
    g = 0.9
    y = numbaot.discounted_cumsum_right(x, g)
    y_shift = np.zeros_like(y)
    y_shift[:, :-K] = y[:, K:]
    window = y - g ** K * y_shift
    ref = np.zeros_like(x)
    for r in range(3):
        for t in range(40):
            ref[r, t] = sum(g ** k * x[r, t + k] for k in range(K) if t + k < 40)
    np.testing.assert_allclose(window, ref, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------
# float32 precision claim
# --------------------------------------------------------------------------
@pytest.mark.parametrize("chunked", [False, True])
def test_float32_precision(chunked, monkeypatch):
    """N = 10000 ones, gamma = 0.99: the seed's L-inf errors are 2.8e-4
    (sequential) and 9.9e-5 (parallel); float64 accumulation rounds once."""
    if chunked:
        monkeypatch.setattr(_config, "SCAN_CHUNK", 1000)
    N, g = 10000, 0.99
    y = numbaot.discounted_cumsum_right(np.ones(N, dtype=np.float32), np.float32(g))
    assert y.dtype == np.float32
    g32 = float(np.float32(g))  # the discount actually used
    closed = (1.0 - g32 ** (N - np.arange(N, dtype=np.float64))) / (1.0 - g32)
    err = np.max(np.abs(y.astype(np.float64) - closed))
    assert err < 9.9e-5
    # one float32 rounding of values <= 100: half an ulp (3.8e-6) + float64 noise
    assert err <= 4e-6


# --------------------------------------------------------------------------
# episode masks
# --------------------------------------------------------------------------
@pytest.mark.parametrize("chunks", [None, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask_dtype", [bool, np.int64, np.float32])
def test_dones_vs_loop(chunks, dtype, mask_dtype, rng, monkeypatch):
    if chunks:
        monkeypatch.setattr(_config, "SCAN_CHUNK", chunks)
    x = rng.normal(size=(6, 61)).astype(dtype)
    dones = rng.random(size=x.shape) < 0.1
    dones[0] = False  # a row without boundary
    dones[1, -1] = True
    gamma = rng.uniform(0.5, 1.0, size=6)
    d = dones.astype(mask_dtype)
    np.testing.assert_allclose(numbaot.discounted_cumsum_right(x, gamma, d),
                               loop_right(x, gamma, dones), **tol(dtype))
    np.testing.assert_allclose(numbaot.discounted_cumsum_left(x, gamma, d),
                               loop_left(x, gamma, dones), **tol(dtype))


def test_dones_split_episodes_exactly(rng):
    """With a boundary after step t, each episode is scanned on its own."""
    x = rng.normal(size=50)
    dones = np.zeros(50, bool)
    dones[[9, 30]] = True
    y = numbaot.discounted_cumsum_right(x, 0.9, dones)
    yl = numbaot.discounted_cumsum_left(x, 0.9, dones)
    for a, b in ((0, 10), (10, 31), (31, 50)):
        seg = x[a:b]
        np.testing.assert_allclose(y[a:b], lfilter([1.0], [1.0, -0.9], seg[::-1])[::-1], **F64)
        np.testing.assert_allclose(yl[a:b], lfilter([1.0], [1.0, -0.9], seg), **F64)


# --------------------------------------------------------------------------
# GAE
# --------------------------------------------------------------------------
@pytest.mark.parametrize("bootstrap", ["column", "last_value", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gae_vs_loop(bootstrap, dtype, rng):
    B, N = 4, 37
    rewards = rng.normal(size=(B, N)).astype(dtype)
    values_all = rng.normal(size=(B, N + 1)).astype(dtype)
    dones = rng.random(size=(B, N)) < 0.1
    gamma, lam = 0.99, 0.95
    if bootstrap == "column":
        adv, ret = numbaot.gae(rewards, values_all, dones, gamma, lam)
        last = values_all[:, N]
    elif bootstrap == "last_value":
        last = values_all[:, N].astype(np.float64)
        adv, ret = numbaot.gae(rewards, values_all[:, :N], dones, gamma, lam, last_value=last)
    else:
        adv, ret = numbaot.gae(rewards, values_all[:, :N], dones, gamma, lam)
        last = np.zeros(B)
    ref_adv, ref_ret = loop_gae(rewards.astype(np.float64), values_all.astype(np.float64),
                                dones, gamma, lam, np.asarray(last, dtype=np.float64))
    assert adv.dtype == dtype and ret.dtype == dtype and adv.shape == (B, N)
    t = dict(rtol=1e-6, atol=1e-5) if dtype == np.float32 else F64
    np.testing.assert_allclose(adv, ref_adv, **t)
    np.testing.assert_allclose(ret, ref_ret, **t)


def test_gae_1d_per_row_and_scalar_last_value(rng):
    r = rng.normal(size=20)
    v = rng.normal(size=20)
    adv, ret = numbaot.gae(r, v, None, 0.9, 0.8, last_value=1.5)
    vv = np.append(v, 1.5)[None]
    ref_adv, ref_ret = loop_gae(r[None], vv, np.zeros((1, 20), bool), 0.9, 0.8, [1.5])
    np.testing.assert_allclose(adv, ref_adv[0], **F64)
    np.testing.assert_allclose(ret, ref_ret[0], **F64)
    # per-row gamma/lam
    R = rng.normal(size=(3, 15))
    V = rng.normal(size=(3, 16))
    g = np.array([0.9, 0.95, 0.99])
    lm = np.array([0.5, 0.9, 1.0])
    adv, _ = numbaot.gae(R, V, None, g, lm)
    for i in range(3):
        ref, _ = loop_gae(R[i:i + 1], V[i:i + 1], np.zeros((1, 15), bool), g[i], lm[i], [V[i, 15]])
        np.testing.assert_allclose(adv[i], ref[0], **F64)


def test_gae_lambda_one_is_return_minus_value(rng):
    R = rng.normal(size=(2, 30))
    V = np.zeros((2, 31))
    adv, ret = numbaot.gae(R, V, None, 0.97, 1.0)
    np.testing.assert_allclose(adv, lfilter_right(R, [0.97, 0.97]), **F64)


# --------------------------------------------------------------------------
# gradients against central finite differences (float64)
# --------------------------------------------------------------------------
def _fd_check(direction, gamma, dones, rng, B=3, N=12):
    fwd = numbaot.discounted_cumsum_right if direction == "right" else numbaot.discounted_cumsum_left
    bwd = (numbaot.discounted_cumsum_right_backward if direction == "right"
           else numbaot.discounted_cumsum_left_backward)
    x = rng.normal(size=(B, N))
    w = rng.normal(size=(B, N))  # L = <w, y>, so dL/dy = w

    def loss(xx, gg):
        return float(np.sum(w * fwd(xx, gg, dones)))

    y = fwd(x, gamma, dones)
    gi, gg = bwd(w, y, gamma, dones)
    h = 1e-6
    num_x = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        num_x[idx] = (loss(xp, gamma) - loss(xm, gamma)) / (2 * h)
    np.testing.assert_allclose(gi, num_x, rtol=1e-7, atol=1e-8)
    gvec = np.asarray(gamma, dtype=np.float64)
    if gvec.ndim == 0:
        num_g = (loss(x, gamma + h) - loss(x, gamma - h)) / (2 * h)
        assert np.ndim(gg) == 0
    else:
        num_g = np.zeros(B)
        for r in range(B):
            gp, gm = gvec.copy(), gvec.copy()
            gp[r] += h
            gm[r] -= h
            num_g[r] = (loss(x, gp) - loss(x, gm)) / (2 * h)
        assert gg.shape == (B,)
    np.testing.assert_allclose(gg, num_g, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("direction", ["right", "left"])
@pytest.mark.parametrize("gamma", [0.8, np.array([0.3, 0.7, 0.95])])
@pytest.mark.parametrize("masked", [False, True])
def test_gradients_vs_finite_differences(direction, gamma, masked, rng):
    dones = None
    if masked:
        dones = np.zeros((3, 12), bool)
        dones[0, 4] = dones[1, [2, 3, 9]] = dones[2, -1] = True
    _fd_check(direction, gamma, dones, rng)


@pytest.mark.parametrize("direction", ["right", "left"])
def test_gradients_chunked_long_row(direction, small_chunks, rng):
    """The gamma gradient's chunk partials (rows split in chunks of 7)."""
    _fd_check(direction, np.array([0.9, 0.99]), None, rng, B=2, N=40)


def test_gradient_1d_and_float32(rng):
    x = rng.normal(size=30).astype(np.float32)
    y = numbaot.discounted_cumsum_right(x, 0.9)
    gi, gg = numbaot.discounted_cumsum_right_backward(np.ones(30, np.float32), y, 0.9)
    assert gi.dtype == np.float32 and gi.shape == (30,) and isinstance(gg, np.float32)
    # dL/dx_k for L = sum(y): sum_{t <= k} 0.9^(k - t)
    np.testing.assert_allclose(gi, lfilter([1.0], [1.0, -0.9], np.ones(30)), rtol=1e-6)


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [-0.1, 1.0000001, np.nan, np.inf])
def test_gamma_out_of_range(gamma):
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right(np.ones(5), gamma)
    assert names(str(info.value), "gamma")


@pytest.mark.parametrize("gamma", ["0.5", None, True, 1j, [[0.5]]])
def test_gamma_wrong_type(gamma):
    with pytest.raises((TypeError, ValueError)) as info:
        numbaot.discounted_cumsum_left(np.ones((1, 5)), gamma)
    assert names(str(info.value), "gamma")


def test_gamma_wrong_shape():
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right(np.ones((2, 5)), np.array([0.5, 0.5, 0.5]))
    assert names(str(info.value), "gamma") and "(2,)" in str(info.value)
    with pytest.raises(ValueError):
        numbaot.discounted_cumsum_right(np.ones((2, 5)), np.array([0.5, 1.5]))


@pytest.mark.parametrize("x", [np.ones((2, 3, 4)), np.float64(3.0)])
def test_wrong_rank(x):
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right(x, 0.5)
    assert names(str(info.value), "x")


@pytest.mark.parametrize("x", [np.ones(3, complex), np.ones(3, bool), np.array(["a", "b"])])
def test_wrong_dtype(x):
    with pytest.raises(TypeError) as info:
        numbaot.discounted_cumsum_left(x, 0.5)
    assert names(str(info.value), "x")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [0, 13, -1])
@pytest.mark.parametrize("gamma", [0.0, 0.9, 1.0])
def test_nonfinite_x(bad, where, gamma, small_chunks):
    x = np.ones((2, 30))
    x[1, where] = bad
    dones = np.zeros(x.shape, bool)
    dones[1, :] = True  # every link cut: the value must still be found
    for fn in (numbaot.discounted_cumsum_right, numbaot.discounted_cumsum_left):
        for d in (None, dones):
            with pytest.raises(ValueError) as info:
                fn(x, gamma, d)
            assert names(str(info.value), "x") and "NaN or inf" in str(info.value)


def test_nonfinite_float32_x():
    x = np.ones(10, np.float32)
    x[3] = np.nan
    with pytest.raises(ValueError, match="x contains NaN"):
        numbaot.discounted_cumsum_right(x, 0.5)


def test_overflow_is_an_error():
    with pytest.raises(ValueError, match="overflow"):
        numbaot.discounted_cumsum_right(np.full(4, 1e308), 1.0)
    with pytest.raises(ValueError, match="overflow"):
        numbaot.discounted_cumsum_left(np.full(4, 3e38, np.float32), 1.0)


def test_dones_errors():
    x = np.ones((2, 5))
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right(x, 0.5, np.zeros((2, 4), bool))
    assert names(str(info.value), "dones")
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right(x, 0.5, np.full((2, 5), 2))
    assert names(str(info.value), "dones")
    with pytest.raises(TypeError) as info:
        numbaot.discounted_cumsum_left(x, 0.5, np.full((2, 5), 1j))
    assert names(str(info.value), "dones")


def test_backward_errors():
    y = np.ones((2, 5))
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right_backward(np.ones((2, 4)), y, 0.5)
    assert names(str(info.value), "output")
    g = np.ones((2, 5))
    g[0, 2] = np.nan
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_left_backward(g, y, 0.5)
    assert names(str(info.value), "grad_output")
    y2 = y.copy()
    y2[1, 3] = np.inf
    with pytest.raises(ValueError) as info:
        numbaot.discounted_cumsum_right_backward(np.ones((2, 5)), y2, 0.5)
    assert names(str(info.value), "output")


def test_gae_errors():
    r = np.ones((2, 5))
    with pytest.raises(ValueError) as info:
        numbaot.gae(r, np.ones((2, 7)), None, 0.9, 0.9)
    assert names(str(info.value), "values")
    with pytest.raises(ValueError) as info:
        numbaot.gae(r, np.ones((3, 6)), None, 0.9, 0.9)
    assert names(str(info.value), "values")
    with pytest.raises(ValueError) as info:
        numbaot.gae(r, np.ones((2, 6)), None, 0.9, 0.9, last_value=1.0)
    assert names(str(info.value), "last_value")
    with pytest.raises(ValueError) as info:
        numbaot.gae(r, np.ones((2, 6)), None, 0.9, 1.5)
    assert names(str(info.value), "lam")
    with pytest.raises(ValueError) as info:
        numbaot.gae(r, np.ones((2, 5)), None, 0.9, 0.9, last_value=[1.0, 2.0, 3.0])
    assert names(str(info.value), "last_value")
    v = np.ones((2, 6))
    v[1, 5] = np.nan  # the bootstrap value, behind a done
    d = np.zeros((2, 5), bool)
    d[1, 4] = True
    with pytest.raises(ValueError) as info:
        numbaot.gae(r, v, d, 0.9, 0.9)
    assert names(str(info.value), "values")
    r2 = r.copy()
    r2[0, 0] = np.inf
    with pytest.raises(ValueError) as info:
        numbaot.gae(r2, np.ones((2, 6)), None, 0.9, 0.9)
    assert names(str(info.value), "rewards")


def test_inputs_not_modified(rng):
    x = rng.normal(size=(3, 20))
    g = np.array([0.5, 0.9, 1.0])
    d = rng.random(size=(3, 20)) < 0.2
    v = rng.normal(size=(3, 21))
    copies = [a.copy() for a in (x, g, d, v)]
    y = numbaot.discounted_cumsum_right(x, g, d)
    numbaot.discounted_cumsum_left(x, g, d)
    yc = y.copy()
    numbaot.discounted_cumsum_right_backward(x, y, g, d)
    numbaot.gae(x, v, d, g, g)
    for a, c in zip((x, g, d, v), copies):
        np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(y, yc)


def test_exports():
    for name in ("discounted_cumsum_right", "discounted_cumsum_left", "gae",
                 "discounted_cumsum_right_backward", "discounted_cumsum_left_backward"):
        assert name in numbaot.__all__ and callable(getattr(numbaot, name))


@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_dones_on_chunk_edges(offset, small_chunks, rng):
    """Boundaries on, just before and just after the chunk edges (chunks of 7),
    and a fully cut row (then y = x)."""
    x = rng.normal(size=(3, 50))
    dones = np.zeros(x.shape, bool)
    dones[0, np.arange(7 + offset, 50, 7)] = True
    dones[1, :] = True
    dones[2, [0, 49]] = True
    g = np.array([0.9, 0.8, 1.0])
    for fn, loop in ((numbaot.discounted_cumsum_right, loop_right),
                     (numbaot.discounted_cumsum_left, loop_left)):
        y = fn(x, g, dones)
        np.testing.assert_allclose(y, loop(x, g, dones), **F64)
        np.testing.assert_array_equal(y[1], x[1])


# --------------------------------------------------------------------------
# on every device: CPU and CUDA (from tests/cuda/test_scan_cuda.py)
# --------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def small_scan_tiles(monkeypatch):
    if simulator_enabled():
        monkeypatch.setattr(_config, "CUDA_SCAN_THREADS", 64)
        monkeypatch.setattr(_config, "CUDA_SCAN_ITEMS", 2)
        monkeypatch.setattr(_config, "CUDA_SCAN_ROW_MAX_N", 8)
        monkeypatch.setattr(_config, "CUDA_SCAN_ROW_THREADS", 64)
    yield


#: (batch, N, dtype): on CUDA, one thread per row (N <= 8: one block, and 3
#: blocks of 64 threads for 150 rows); block path with 1 tile (partly filled),
#: 2 tiles (the second with one position) and 3 tiles of 128 per row
CASES = [(3, 5, np.float32), (150, 8, np.float64), (1, 9, np.float64), (1, 129, np.float32),
         (2, 300, np.float64)]


@pytest.mark.parametrize("shape0, shape1, dtype", CASES)
def test_forward_vs_cpu_and_lfilter(shape0, shape1, dtype, device, rng):
    shape = (shape0, shape1)
    x = rng.normal(size=shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.0, size=shape[0])
    xd = device.put(x)
    for oracle, fn in ((lfilter_right, numbaot.discounted_cumsum_right),
                       (lfilter_left, numbaot.discounted_cumsum_left)):
        yd = fn(xd, device.put(gamma))
        assert yd.shape == shape and yd.dtype == dtype
        y = device.get(yd)
        np.testing.assert_allclose(y, fn(x, gamma), **tol(dtype))
        np.testing.assert_allclose(y, oracle(x, gamma), **tol(dtype))
        if shape[1] <= 8:  # scalar gamma with many rows (the block path: in test_gae)
            np.testing.assert_allclose(device.get(fn(xd, 0.9)), fn(x, 0.9), **tol(dtype))


def test_one_dimensional_and_noncontiguous(device, rng):
    x = rng.normal(size=(2, 280))
    xd = device.put(x)
    y = device.get(numbaot.discounted_cumsum_right(xd[:, ::2], 0.95))
    np.testing.assert_allclose(y, lfilter_right(x[:, ::2], [0.95] * 2), rtol=1e-12, atol=1e-12)
    y1 = device.get(numbaot.discounted_cumsum_left(device.put(x[1]), 0.95))
    np.testing.assert_allclose(y1, lfilter([1.0], [1.0, -0.95], x[1]), rtol=1e-12, atol=1e-12)


def test_many_tiles_carry_loop(device, rng, monkeypatch):
    """More tiles per row than threads: on CUDA, chunk_carries loops with a
    running carry."""
    monkeypatch.setattr(_config, "CUDA_SCAN_THREADS", 32)
    monkeypatch.setattr(_config, "CUDA_SCAN_ITEMS", 1)
    x = rng.normal(size=(1, 32 * 33 + 7))
    y = device.get(numbaot.discounted_cumsum_right(device.put(x), 0.999))
    np.testing.assert_allclose(y, lfilter_right(x, [0.999]), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("shape", [(4, 6), (2, 200)])
def test_dones_vs_cpu(shape, device, rng):
    x = rng.normal(size=shape)
    dones = rng.random(size=shape) < 0.05
    dones[0, 100 % shape[1]] = True
    g = rng.uniform(0.8, 1.0, size=shape[0])
    for fn in (numbaot.discounted_cumsum_right, numbaot.discounted_cumsum_left):
        for d in (device.put(dones), device.put(dones.astype(np.uint8)))[:1 + (shape[1] < 9)]:
            # a per-row gamma may be a host array (O(batch), read on the host)
            yd = fn(device.put(x), device.put(g) if shape[1] > 8 else g, d)
            np.testing.assert_allclose(device.get(yd), fn(x, g, dones), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 6), (1, 140)])
@pytest.mark.parametrize("direction", ["right", "left"])
def test_backward_vs_cpu(shape, direction, device, rng):
    bwd = getattr(numbaot, f"discounted_cumsum_{direction}_backward")
    fwd = getattr(numbaot, f"discounted_cumsum_{direction}")
    x = rng.normal(size=shape)
    w = rng.normal(size=shape)
    dones = rng.random(size=shape) < 0.1
    g = rng.uniform(0.5, 1.0, size=shape[0])
    y = fwd(x, g, dones)
    gi, gg = bwd(w, y, g, dones)
    gid, ggd = bwd(device.put(w), device.put(y), device.put(g), device.put(dones))
    np.testing.assert_allclose(device.get(gid), gi, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(device.get(ggd), gg, rtol=1e-12, atol=1e-12)
    gi2, gg2 = bwd(w, y, 0.7)
    gid2, ggd2 = bwd(device.put(w), device.put(y), 0.7)
    assert ggd2.shape == ()
    np.testing.assert_allclose(device.get(gid2), gi2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(device.get(ggd2), gg2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype, N", [(np.float32, 140), (np.float64, 7)])
def test_gae_vs_cpu(dtype, N, device, rng):
    B = 2
    r = rng.normal(size=(B, N)).astype(dtype)
    v = rng.normal(size=(B, N + 1)).astype(dtype)
    d = rng.random(size=(B, N)) < 0.05
    adv, ret = numbaot.gae(r, v, d, 0.99, 0.95)
    advd, retd = numbaot.gae(device.put(r), device.put(v), device.put(d), 0.99, 0.95)
    assert advd.dtype == dtype
    np.testing.assert_allclose(device.get(advd), adv, **tol(dtype))
    np.testing.assert_allclose(device.get(retd), ret, **tol(dtype))
    adv2, _ = numbaot.gae(r, v[:, :N], None, 0.9, 0.8, last_value=v[:, N])
    advd2, _ = numbaot.gae(device.put(r), device.put(np.ascontiguousarray(v[:, :N])),
                           None, 0.9, 0.8,
                           last_value=device.put(v[:, N].copy()))
    np.testing.assert_allclose(device.get(advd2), adv2, **tol(dtype))


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_errors_on_device(device):
    """Device-only rules: host masks with device arrays, and the dtypes the
    CUDA kernels take (the CPU accepts integer x and float masks)."""
    x = np.ones((2, 20))
    x[1, 3] = np.nan
    with pytest.raises(ValueError, match="x contains NaN"):
        numbaot.discounted_cumsum_right(device.put(x), 0.9)
    with pytest.raises(ValueError, match="x contains NaN"):
        numbaot.discounted_cumsum_left(device.put(np.ascontiguousarray(x[:, :5])), 0.0)
    with pytest.raises(TypeError, match="on the host"):
        numbaot.discounted_cumsum_right(device.put(np.ones(5)), 0.9, np.zeros(5, bool))
    with pytest.raises(TypeError, match="dones"):
        numbaot.discounted_cumsum_right(device.put(np.ones(5)), 0.9,
                                        device.put(np.zeros(5)))
    with pytest.raises(ValueError, match="gamma"):
        numbaot.discounted_cumsum_right(device.put(np.ones((2, 5))), device.put(np.ones(3)))
    with pytest.raises(TypeError, match="x"):
        numbaot.discounted_cumsum_right(device.put(np.ones(5, np.int64)), 0.9)
