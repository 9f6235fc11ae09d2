"""Warp shuffles as the kernels use them: on a GPU the hardware, in the
simulator numbaot's emulation (numbaot/cuda/_sim.py), checked against index
arithmetic."""
import numpy as np
import pytest
from numba import cuda

import numbaot.cuda._registry  # noqa: F401  (installs the simulator shuffles)
from numbaot._dispatch import simulator_enabled


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


@cuda.jit
def _shared_roundtrip(out):
    """Every thread writes its slot of two shared arrays; thread 0 sums them."""
    a = cuda.shared.array(64, dtype=np.float64)
    b = cuda.shared.array(64, dtype=np.float64)
    i = cuda.threadIdx.x
    a[i] = i
    b[i] = 2 * i
    cuda.syncthreads()
    if i == 0:
        s = 0.0
        for k in range(64):
            s += a[k] + b[k]
        out[cuda.blockIdx.x] = s


def test_shared_arrays_are_shared_by_the_block():
    out = cuda.to_device(np.zeros(3))
    _shared_roundtrip[3, 64](out)
    np.testing.assert_array_equal(out.copy_to_host(), 3 * (63 * 64 // 2))


@pytest.mark.skipif(not simulator_enabled(), reason="checks the simulator's shared arrays")
def test_simulator_shared_array_lookup_is_atomic():
    """Threads that reach the same ``cuda.shared.array`` line at once get
    one array.  The dict's lookup is slowed down so that every thread is
    inside the check-then-set window at the same time; the simulator's own
    (unlocked) version hands out eight arrays then."""
    import threading
    import time

    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    class SlowDict(dict):
        def get(self, key, default=None):
            found = super().get(key, default)
            time.sleep(0.01)   # between the lookup and the store
            return found

    shared = FakeCUDAShared(0)
    shared._allocations = SlowDict()
    got = [None] * 8

    def alloc(t):
        got[t] = shared.array(4, np.float64)   # one source line for all threads

    threads = [threading.Thread(target=alloc, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(g is got[0] for g in got)
    assert len(shared._allocations) == 1
