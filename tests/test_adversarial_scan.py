"""Adversarial inputs of numbaot.scan: sums that leave the range of the output
dtype between finite values (issue 22, item 4).

The decided behaviour (the docstrings' Raises sections): every element that
``discounted_cumsum_right/left``, their backward functions and ``gae`` return
is finite, or the call raises ``ValueError`` saying the sums overflow.  A
float32 result is a float64 sum rounded once to float32, so an intermediate
partial sum beyond the float32 range is an overflow even when the sums after
it come back into range (the old kernels tested only the chunks' last values
and stored ``inf`` there); a sum that rounds to the largest float32 is not.

Oracles: float64 plain loops (tests/reference.py) and hand-computed values.
Every case also checks that the caller's arrays are left unchanged.  The
``device`` tests run once on the CPU and once on CUDA (the simulator, or a
GPU).
"""
import numpy as np
import pytest

import numbaot
from numbaot import _config
from numbaot._dispatch import simulator_enabled

from reference import loop_left, loop_right

F32MAX = float(np.finfo(np.float32).max)  # 2^128 - 2^104
F64MAX = float(np.finfo(np.float64).max)


@pytest.fixture(autouse=True)
def small_scan_tiles(monkeypatch):
    """In the simulator: 64 threads x 2 items per tile and rows of more than
    8 positions on the block path (as tests/test_scan.py), so the [cuda]
    cases below cover both CUDA paths on tiny rows."""
    if simulator_enabled():
        monkeypatch.setattr(_config, "CUDA_SCAN_THREADS", 64)
        monkeypatch.setattr(_config, "CUDA_SCAN_ITEMS", 2)
        monkeypatch.setattr(_config, "CUDA_SCAN_ROW_MAX_N", 8)
        monkeypatch.setattr(_config, "CUDA_SCAN_ROW_THREADS", 64)
    yield


@pytest.fixture(params=["rows", "chunks"])
def path(request, monkeypatch):
    """The CPU's two paths: one task per row, and rows split in chunks of 7
    (a long row's reduce-then-scan path, here on a short row)."""
    if request.param == "chunks":
        monkeypatch.setattr(_config, "SCAN_CHUNK", 7)
    return request.param


def unchanged(*arrays):
    """Copies to compare with after the call."""
    return [(a, a.copy()) for a in arrays]


def assert_unchanged(saved):
    for a, c in saved:
        np.testing.assert_array_equal(a, c)


def overflow_row(n, k, dtype, big, right):
    """A row of n zeros with big, big, -big placed so that the scan (gamma =
    1) reaches 2 big at position k and comes back to big after it: the only
    sum out of range lies strictly inside the row, neither at its end nor at
    a chunk end when the chunk is longer than 2."""
    x = np.zeros(n, dtype)
    if right:  # y_t = x_t + y_{t+1}: scanned from the end
        x[k + 1], x[k], x[k - 1] = big, big, -big
    else:
        x[k - 1], x[k], x[k + 1] = big, big, -big
    return x


# --------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------
def test_issue_example():
    """The issue's example: y = [3e38, 6e38, 3e38] in float64, the middle
    entry out of the float32 range; the call stored inf there."""
    x = np.array([-3e38, 3e38, 3e38], np.float32)
    saved = unchanged(x)
    with pytest.raises(ValueError, match="overflow") as info:
        numbaot.discounted_cumsum_right(x, 1.0)
    assert "float32" in str(info.value) and "x" in str(info.value)
    assert_unchanged(saved)


@pytest.mark.parametrize("direction", ["right", "left"])
@pytest.mark.parametrize("n, k", [(3, 1), (30, 10), (30, 15), (16, 7)])
def test_float32_inner_overflow(direction, n, k, path):
    fn = getattr(numbaot, f"discounted_cumsum_{direction}")
    x = np.stack([np.ones(n, np.float32), overflow_row(n, k, np.float32, 3e38,
                                                        direction == "right")])
    saved = unchanged(x)
    with pytest.raises(ValueError, match="overflow"):
        fn(x, 1.0)
    # and in a row of a batch of many rows (four rows in lockstep)
    xb = np.ones((9, n), np.float32)
    xb[6] = x[1]
    with pytest.raises(ValueError, match="overflow"):
        fn(xb, np.full(9, 1.0))
    assert_unchanged(saved)


@pytest.mark.parametrize("direction", ["right", "left"])
def test_float32_edge_of_the_range(direction, path):
    """M + 2^102 (M = FLT_MAX) rounds to M: a finite result, equal to the
    float64 oracle rounded; M + 2^103 (the halfway point to 2^128) rounds to
    inf: an error, though the sums after it are back in range."""
    fn = getattr(numbaot, f"discounted_cumsum_{direction}")
    oracle = loop_right if direction == "right" else loop_left
    for extra, finite in ((2.0 ** 102, True), (2.0 ** 103, False)):
        # y = [M, M + e, M + e, e, e + 1, ...] (left; right: reversed)
        x = np.array([F32MAX, extra, 0.0, -F32MAX, 1.0] + [0.0] * 7, np.float32)
        if direction == "right":
            x = x[::-1].copy()
        x = x[None, :]
        saved = unchanged(x)
        if finite:
            y = fn(x, 1.0)
            assert y.dtype == np.float32 and np.all(np.isfinite(y))
            ref = oracle(x, [1.0])
            assert np.all(np.abs(ref) < 2.0 ** 128 - 2.0 ** 103)  # rounds to finite
            np.testing.assert_array_equal(y, ref.astype(np.float32))
            assert np.max(y) == np.float32(F32MAX)
        else:
            with pytest.raises(ValueError, match="overflow"):
                fn(x, 1.0)
        assert_unchanged(saved)


@pytest.mark.parametrize("direction", ["right", "left"])
def test_float64_edge_of_the_range(direction, path):
    """float64: DBL_MAX and -DBL_MAX cancel (finite, exact); DBL_MAX twice
    overflows (inf, and NaN after a cut link: an error either way)."""
    fn = getattr(numbaot, f"discounted_cumsum_{direction}")
    oracle = loop_right if direction == "right" else loop_left
    x = np.array([[F64MAX, -F64MAX, 1.0, F64MAX, -F64MAX]])
    if direction == "right":
        x = x[:, ::-1].copy()
    saved = unchanged(x)
    y = fn(x, 1.0)
    np.testing.assert_array_equal(y, oracle(x, [1.0]))
    # the left scan reaches 2 DBL_MAX (gamma = 1) or 1.5 DBL_MAX (gamma = 0.5)
    # at t = 2, then a cut link (d_4) turns the inf into NaN
    bad = np.array([[1.0, F64MAX, F64MAX, -F64MAX, 0.0, 0.0, 0.0, 0.0, 0.0]])
    dones = np.zeros(bad.shape, bool)
    dones[0, 4] = True
    if direction == "right":
        bad, dones = bad[:, ::-1], dones[:, ::-1]  # views: non-contiguous inputs too
    for gamma in (1.0, 0.5):
        for d in (None, dones):
            with pytest.raises(ValueError, match="overflow"):
                fn(bad, gamma, d)
    assert_unchanged(saved)


def test_overflow_behind_an_episode_boundary(path):
    """The overflowing episode is followed by another one (a cut link): the
    row's last values are finite, the inner overflow is still found."""
    x = np.zeros(20, np.float32)
    x[2:5] = [-3e38, 3e38, 3e38]
    dones = np.zeros(20, bool)
    dones[4] = True
    saved = unchanged(x, dones)
    with pytest.raises(ValueError, match="overflow"):
        numbaot.discounted_cumsum_right(x, 1.0, dones)
    assert_unchanged(saved)


# --------------------------------------------------------------------------
# GAE
# --------------------------------------------------------------------------
def test_gae_advantages_inner_overflow(path):
    """delta = rewards (values 0): the advantages are the right cumsum
    [3e38, 6e38, 3e38] at gamma = lam = 1."""
    r = np.array([[0.0, -3e38, 3e38, 3e38, 0.0]], np.float32)
    v = np.zeros((1, 6), np.float32)
    saved = unchanged(r, v)
    with pytest.raises(ValueError, match="advantages overflow"):
        numbaot.gae(r, v, None, 1.0, 1.0)
    assert_unchanged(saved)


@pytest.mark.parametrize("dtype, big", [(np.float32, 3e38), (np.float64, 1e308)])
def test_gae_returns_overflow(dtype, big, path):
    """lam = 0: A_0 = r_0 + V_1 - V_0 = big and A_1 = -big are finite, but
    returns_0 = A_0 + V_0 = 2 big is not (the returns were never checked)."""
    r = np.array([[big, 0.0]], dtype)
    v = np.array([[big, big, 0.0]], dtype)
    saved = unchanged(r, v)
    if dtype == np.float32:
        # the float64 residuals stay finite: the returns are the only overflow
        with pytest.raises(ValueError, match="returns overflow"):
            numbaot.gae(r, v, None, 1.0, 0.0)
    else:
        # float64: r_0 + V_1 already overflows in the residual
        with pytest.raises(ValueError, match="overflow"):
            numbaot.gae(r, v, None, 1.0, 0.0)
    assert_unchanged(saved)
    # at half the size everything is finite, and matches the plain loop
    half = (r / 2, v / 2)
    adv, ret = numbaot.gae(*half, None, 1.0, 0.0)
    assert np.all(np.isfinite(adv)) and np.all(np.isfinite(ret))
    np.testing.assert_allclose(ret, [[big, 0.0]], rtol=1e-6)


# --------------------------------------------------------------------------
# backward
# --------------------------------------------------------------------------
@pytest.mark.parametrize("direction", ["right", "left"])
def test_backward_scan_inner_overflow(direction, path):
    """dL/dx of the right scan is the LEFT scan of grad_output (and the other
    way round): an inner float32 overflow there is an error."""
    bwd = getattr(numbaot, f"discounted_cumsum_{direction}_backward")
    g = overflow_row(30, 12, np.float32, 3e38, right=direction == "left")[None, :]
    y = np.zeros_like(g)
    saved = unchanged(g, y)
    with pytest.raises(ValueError, match="gradients overflow"):
        bwd(g, y, 1.0)
    assert_unchanged(saved)


@pytest.mark.parametrize("direction", ["right", "left"])
def test_backward_gamma_gradient_overflow(direction):
    """dL/dgamma = sum_t z_t y_{t+1} (right) is 1e20 * 1e20 = 1e40 in
    float64: beyond float32, an error; in float64, finite and exact."""
    bwd = getattr(numbaot, f"discounted_cumsum_{direction}_backward")
    g = np.array([[1e20, 0.0]])
    y = np.array([[0.0, 1e20]])
    if direction == "left":  # dL/dgamma = sum_t z_t y_{t-1}, z the right scan
        g, y = g[:, ::-1].copy(), y[:, ::-1].copy()
    gx, gg = bwd(g, y, 0.5)
    assert gg.dtype == np.float64 and float(gg) == 1e40
    g32, y32 = g.astype(np.float32), y.astype(np.float32)
    saved = unchanged(g32, y32)
    for gamma in (0.5, np.array([0.5])):
        with pytest.raises(ValueError, match="gamma gradient overflow"):
            bwd(g32, y32, gamma)
    assert_unchanged(saved)


def test_backward_gamma_gradient_sum_over_rows_overflows():
    """Two rows of dL/dgamma_r = 1e308 each: finite per row (a per-row gamma),
    but their sum (a scalar gamma) is not."""
    g = np.array([[1e154, 0.0], [1e154, 0.0]])
    y = np.array([[0.0, 1e154], [0.0, 1e154]])
    saved = unchanged(g, y)
    _, gg = numbaot.discounted_cumsum_right_backward(g, y, np.array([0.5, 0.5]))
    np.testing.assert_array_equal(gg, [1e154 * 1e154] * 2)
    with pytest.raises(ValueError, match="gamma gradient overflow"):
        numbaot.discounted_cumsum_right_backward(g, y, 0.5)
    assert_unchanged(saved)


def test_no_warning_on_the_error_path(recwarn):
    """The float32 cast of an overflowing gamma gradient is tested, not
    warned about (NumPy's 'overflow encountered in cast')."""
    g = np.array([[1e20, 0.0]], np.float32)
    y = np.array([[0.0, 1e20]], np.float32)
    with pytest.raises(ValueError):
        numbaot.discounted_cumsum_right_backward(g, y, 0.5)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# --------------------------------------------------------------------------
# both devices
# --------------------------------------------------------------------------
#: the CUDA simulator runs the kernels on NumPy scalars, which warn where a
#: GPU silently overflows (the overflow is what these tests make)
SIM_OVERFLOW = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


@SIM_OVERFLOW
@pytest.mark.parametrize("n, k", [(5, 2), (40, 20)])
def test_device_float32_inner_overflow(n, k, device):
    """On CUDA, n = 5 runs one thread per row and n = 40 the block scan (the
    simulator's tunables, see ``small_scan_tiles``)."""
    for direction in ("right", "left"):
        fn = getattr(numbaot, f"discounted_cumsum_{direction}")
        x = np.stack([np.ones(n, np.float32),
                      overflow_row(n, k, np.float32, 3e38, direction == "right")])
        saved = unchanged(x)
        xd = device.put(x)
        with pytest.raises(ValueError, match="overflow"):
            fn(xd, 1.0)
        assert_unchanged(saved)
        if device.is_cuda:
            np.testing.assert_array_equal(xd.copy_to_host(), x)
        # at a third of the size every sum is in range: finite and as the loop
        ok = device.get(fn(device.put(x / 3), 1.0))
        oracle = loop_right if direction == "right" else loop_left
        np.testing.assert_allclose(ok, oracle(x / 3, [1.0, 1.0]), rtol=1e-6)


@SIM_OVERFLOW
def test_device_gae_and_backward_overflow(device):
    r = np.array([[3e38, 0.0]], np.float32)
    v = np.array([[3e38, 3e38, 0.0]], np.float32)
    with pytest.raises(ValueError, match="returns overflow"):
        numbaot.gae(device.put(r), device.put(v), None, 1.0, 0.0)
    g = overflow_row(12, 5, np.float32, 3e38, right=False)[None, :]
    with pytest.raises(ValueError, match="gradients overflow"):
        numbaot.discounted_cumsum_right_backward(device.put(g), device.put(np.zeros_like(g)),
                                                 1.0)
    gg = np.array([[1e20, 0.0]], np.float32)
    yy = np.array([[0.0, 1e20]], np.float32)
    with pytest.raises(ValueError, match="gamma gradient overflow"):
        numbaot.discounted_cumsum_right_backward(device.put(gg), device.put(yy), 0.5)
