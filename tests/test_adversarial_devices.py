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
