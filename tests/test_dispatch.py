"""Device dispatch without a GPU: import does not touch CUDA, mixed inputs
and missing GPUs give clear errors."""
import subprocess
import sys

import numba
import numpy as np
import pytest

import numbaot
from numbaot._dispatch import (CudaUnavailableError, device_of, is_device_array,
                               simulator_enabled, threads_at_most)


class FakeDeviceArray:
    """Stands for a CuPy/numba device array: it only exposes the interface."""

    def __init__(self, shape=(3, 3), typestr="<f8"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (0, False), "version": 3}


def test_import_does_not_load_cuda():
    code = "import numbaot, sys; print('numba.cuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_device_detection():
    assert not is_device_array(np.ones(3))
    assert not is_device_array([1.0])
    assert is_device_array(FakeDeviceArray())
    assert device_of(a=np.ones(3), M=np.ones((3, 3))) == "cpu"
    assert device_of(a=[], b=None, M=FakeDeviceArray()) == "cuda"


def test_mixed_host_and_device_is_a_type_error():
    with pytest.raises(TypeError, match="M on the GPU but a on the host"):
        numbaot.sinkhorn(np.ones(3) / 3, [], FakeDeviceArray(), 1.0)
    with pytest.raises(TypeError, match="b on the GPU but a, M on the host"):
        numbaot.sinkhorn(np.ones(3) / 3, FakeDeviceArray((3,)), np.ones((3, 3)), 1.0)


@pytest.mark.skipif(simulator_enabled(), reason="the simulator stands in for a GPU")
def test_no_gpu_names_the_fix():
    try:
        from numba import cuda
    except Exception:
        cuda = None
    if cuda is not None and cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(CudaUnavailableError, match=r"pip install 'numbaot\[cuda\]'"):
        numbaot.sinkhorn([], [], FakeDeviceArray(), 1.0)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                    reason="needs NUMBA_NUM_THREADS >= 2 to cap the thread count")
def test_threads_at_most_caps_and_restores(restore_num_threads):
    restore_num_threads(2)
    with threads_at_most(1):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == 2
    with threads_at_most(0):          # no work item: still one thread
        assert numba.get_num_threads() == 1
    with threads_at_most(2):          # enough items: nothing changes
        assert numba.get_num_threads() == 2
    with threads_at_most(10**6):
        assert numba.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="inside"):
        with threads_at_most(1):
            raise RuntimeError("inside")
    assert numba.get_num_threads() == 2
