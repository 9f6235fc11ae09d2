"""The adversarial pass of issue 22 on both devices (``device`` fixture: NumPy
arrays, and CUDA device arrays in the simulator or on a GPU): the same bad
input gives the same clear error on the CUDA path as on the CPU path, and the
caller's arrays are left unchanged.  Small cases (the simulator runs one
Python thread per CUDA thread)."""
import numpy as np
import pytest

import numbaot
from numbaot.bregman import barycenter




def _call_unchanged(device, fn, arrays, *args, kw_arrays=None, **kwargs):
    """fn(*device copies of arrays, *args, **device copies of kw_arrays,
    **kwargs); checks every array after the call."""
    kw_arrays = kw_arrays or {}
    before = [np.array(x, copy=True) for x in [*arrays, *kw_arrays.values()]]
    on_dev = [device.put(x) for x in arrays]
    kw_dev = {k: device.put(x) for k, x in kw_arrays.items()}
    try:
        return fn(*on_dev, *args, **kw_dev, **kwargs)
    finally:
        for x0, x in zip(before, [*on_dev, *kw_dev.values()]):
            np.testing.assert_array_equal(device.get(x) if device.is_cuda else x, x0)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_nan_in_M(device, abM, method):
    a, b, M = abM
    M = M.copy()
    M[2, 3] = np.nan
    with pytest.raises(ValueError, match="M contains NaN or inf"):
        _call_unchanged(device, numbaot.sinkhorn, [a, b, M], 0.1, method=method)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_unequal_masses(device, abM, method):
    a, b, M = abM
    with pytest.raises(ValueError, match=r"a and b must have the same \(finite\) total mass"):
        _call_unchanged(device, numbaot.sinkhorn2, [a, 1.5 * b, M], 0.1, method=method)


def test_nan_warmstart(device, abM):
    a, b, M = abM
    warm = (np.full(6, np.nan), np.zeros(5))
    with pytest.raises(ValueError, match="warmstart"):
        _call_unchanged(device, numbaot.sinkhorn2, [a, b, M], 0.1, method="sinkhorn_log",
                        warmstart=warm)


@pytest.mark.parametrize("stopThr", [np.nan, -1.0])
def test_bad_stop_threshold(device, abM, stopThr):
    a, b, M = abM
    with pytest.raises(ValueError, match="stopThr"):
        _call_unchanged(device, numbaot.sinkhorn, [a, b, M], 0.1, stopThr=stopThr)


def test_iteration_count_beyond_int64(device, abM):
    a, b, M = abM
    with pytest.raises(ValueError, match="numItermax"):
        _call_unchanged(device, numbaot.sinkhorn, [a, b, M], 0.1, numItermax=2 ** 63)


@pytest.mark.parametrize("weights", [np.zeros(3), np.ones(3)])
def test_barycenter_weights(device, weights):
    rng = np.random.default_rng(1)
    H = rng.random((5, 3))
    H /= H.sum(0)
    x = np.arange(5.0)[:, None] / 4
    M = (x - x.T) ** 2
    with pytest.raises(ValueError, match="weights"):
        _call_unchanged(device, barycenter, [H, M], 0.1, kw_arrays={"weights": weights})


def test_unbalanced_reference_measure_without_mass(device, abM):
    a, b, M = abM
    c = np.zeros((6, 5))
    with pytest.raises(ValueError, match=r"c \(the reference measure\) has an all-zero row"):
        _call_unchanged(device, numbaot.sinkhorn_unbalanced2, [a, b, M], 0.1, 1.0,
                        kw_arrays={"c": c})


def test_tau_zero(device, abM):
    a, b, M = abM
    with pytest.raises(ValueError, match="tau"):
        _call_unchanged(device, numbaot.sinkhorn2, [a, b, M], 0.1,
                        method="sinkhorn_stabilized", tau=0.0)


# ---------------------------------------------------------------------------
# max|M| / reg on both devices: a device M gets the host's ValueError (its
# max |M| comes from the device finiteness scan, one reduction)
# ---------------------------------------------------------------------------
def _bary_call(H, M, reg):
    return barycenter(H, M, reg)


_COST_SCALE_CALLS = {
    "sinkhorn2": lambda a, b, M, reg: numbaot.sinkhorn2(a, b, M, reg),
    "sinkhorn2_log": lambda a, b, M, reg: numbaot.sinkhorn2(a, b, M, reg,
                                                            method="sinkhorn_log"),
    "sinkhorn": lambda a, b, M, reg: numbaot.sinkhorn(a, b, M, reg, method="sinkhorn_log"),
    "value_and_grad": lambda a, b, M, reg: numbaot.sinkhorn2_value_and_grad(a, b, M, reg),
    "unbalanced2": lambda a, b, M, reg: numbaot.sinkhorn_unbalanced2(a, b, M, reg, 1.0),
}


@pytest.mark.parametrize("call", sorted(_COST_SCALE_CALLS))
@pytest.mark.parametrize("scale", [1e308, -(2.0 ** 53)])
def test_cost_scale_device_M(device, abM, call, scale):
    """max|M| / reg > 2**52 (here 1e308 / 0.1 overflows; -2**53 / 1 counts by
    its magnitude): ValueError naming M and reg on both devices."""
    a, b, M = abM
    M = np.full_like(M, scale)
    M[1, 2] = 0.5  # the maximum magnitude is not the first entry
    reg = 0.1 if scale > 0 else 1.0
    with pytest.raises(ValueError, match=r"M / reg is too large.*reg ="):
        _call_unchanged(device, _COST_SCALE_CALLS[call], [a, b, M], reg)


def test_cost_scale_device_M_barycenter(device):
    rng = np.random.default_rng(1)
    H = rng.random((5, 3))
    H /= H.sum(0)
    M = np.full((5, 5), 1e300)
    with pytest.raises(ValueError, match=r"M / reg is too large"):
        _call_unchanged(device, _bary_call, [H, M], 1e-10)
    M[3, 1] = np.inf  # NaN / inf is reported as such, before the scale
    with pytest.raises(ValueError, match="M contains NaN or inf"):
        _call_unchanged(device, _bary_call, [H, M], 0.1)


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
@pytest.mark.parametrize("shape, order, dtype", [((1, 1), "C", np.float64),
                                                 ((3, 70), "C", np.float32),
                                                 ((7, 40), "F", np.float64),
                                                 ((9, 5), "C", np.float64)])
def test_device_finite_absmax(device, monkeypatch, shape, order, dtype):
    """The device scan against NumPy: max |M| exactly (several blocks, rows
    strided by 2 blocks, columns by 32 threads; C and Fortran layouts), and
    inf for one NaN, inf or -inf anywhere; the checked Problem carries it."""
    from numbaot import _checks, _config, _dispatch

    monkeypatch.setattr(_config, "CUDA_CHECK_MAX_BLOCKS", 2)
    rng = np.random.default_rng(7)
    M = np.asarray(rng.normal(size=shape) * 1e3, dtype=dtype, order=order)
    M.flat[rng.integers(M.size)] = -5e3  # a negative entry of largest magnitude
    dev = device.put(M)
    got = _dispatch.device_finite_absmax(dev)
    assert type(got) is float and got == float(np.abs(M).max())
    assert _dispatch.device_all_finite(dev)
    for bad in (np.nan, np.inf, -np.inf):
        for pos in (0, M.size - 1, M.size // 2):
            Mb = M.copy(order="K")
            Mb.flat[pos] = bad
            assert _dispatch.device_finite_absmax(device.put(Mb)) == np.inf
            assert not _dispatch.device_all_finite(device.put(Mb))
    a, b = np.full(shape[0], 1.0 / shape[0]), np.full(shape[1], 1.0 / shape[1])
    P = _checks.prepare_problem(device.put(a), device.put(b), dev)
    assert P.device == "cuda" and P.absmax == float(np.abs(M).max())
    assert _checks.check_cost_scale(P, 0.5) == 2 * P.absmax
