"""Warp shuffles as the kernels use them: on a GPU the hardware, in the
simulator numbaot's emulation (numbaot/cuda/_sim.py), checked against index
arithmetic."""
import numpy as np
from numba import cuda

import numbaot.cuda._registry  # noqa: F401  (installs the simulator shuffles)


@cuda.jit
def _shuffles(x, out, out2):
    i = cuda.threadIdx.x
    out[i] = cuda.shfl_sync(0xFFFFFFFF, x[i], (i * 7) & 31)
    out2[i] = cuda.shfl_xor_sync(0xFFFFFFFF, x[i], 5)


def test_shfl_sync_and_butterfly():
    x = np.arange(64.0)
    o, o2 = cuda.to_device(np.zeros(64)), cuda.to_device(np.zeros(64))
    _shuffles[1, 64](cuda.to_device(x), o, o2)
    lane, warp = np.arange(64) % 32, np.arange(64) // 32
    np.testing.assert_array_equal(o.copy_to_host(), warp * 32 + (lane * 7) % 32)
    np.testing.assert_array_equal(o2.copy_to_host(), warp * 32 + (lane ^ 5))
