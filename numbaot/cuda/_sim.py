"""Warp shuffles for the Numba CUDA simulator.

The simulator (NUMBA_ENABLE_CUDASIM=1) runs one Python thread per CUDA thread
but has no warp intrinsics, so kernels that reduce or broadcast with
``shfl_xor_sync`` / ``shfl_sync`` could not be tested without a GPU.
``install()`` adds faithful versions to the simulator's fake ``cuda`` module:
the 32 lanes of a warp post their values, meet at a barrier, read the source
lane's value (``lane ^ lane_mask`` for the butterfly, ``src_lane % 32`` for
the indexed shuffle) and meet again before the slots are reused.  As on a GPU
with a full mask, all 32 lanes of the warp must take part (blocks are a
multiple of 32 threads).

It also makes the simulator's ``cuda.shared.array`` thread-safe.  The
simulator (numba-cuda 0.30) gives every thread of a launch the array that
the first thread to reach a source line allocated, with an unlocked
check-then-set on a dict: two threads that both find no array there each
allocate one (``np.empty``: old bytes), so a thread writes a "shared" slot
that the reader never sees.  It is rare (a thread switch in a window of a
few bytecodes: once in 3.6e5 allocations, measured under load) but made a
CI run fail (tests/cuda/test_sinkhorn_cuda.py::test_multi_warp_blocks,
13 % off), so ``install`` replaces it with the same lookup under a lock.

Only ever installed in simulator mode.
"""
import sys
import threading

_LOCK = threading.Lock()
_WARP = 32


def _exchange(value, source):
    """Post ``value`` for this lane; return the value of lane ``source(lane)``."""
    t = threading.current_thread()
    mgr = t._manager  # one BlockManager per simulated block
    w = t.thread_id // _WARP
    with _LOCK:
        warps = mgr.__dict__.setdefault("_numbaot_warps", {})
        if w not in warps:
            warps[w] = (threading.Barrier(_WARP), [None] * _WARP)
        barrier, slots = warps[w]
    lane = t.thread_id % _WARP
    slots[lane] = value
    barrier.wait()
    out = slots[source(lane) % _WARP]
    barrier.wait()
    return out


def _shfl_xor_sync(self, mask, value, lane_mask):
    return _exchange(value, lambda lane: lane ^ lane_mask)


def _shfl_sync(self, mask, value, src_lane):
    return _exchange(value, lambda lane: src_lane)


_SHARED_LOCK = threading.Lock()


def _make_shared_array(simulator_array):
    """``FakeCUDAShared.array`` with the lookup and the allocation under one
    lock; arrays are keyed, as in the simulator, by the (file, line) of the
    call, so two calls on one line alias (as documented there).  Dynamic
    shared memory (shape 0) and alignment go to the simulator's own code."""
    import numpy as np
    from numba.core import types
    from numba.np import numpy_support

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:
            return simulator_array(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        key = (frame.f_code.co_filename, frame.f_lineno)
        with _SHARED_LOCK:
            res = self._allocations.get(key)
            if res is None:
                res = np.empty(shape, dtype)
                self._allocations[key] = res
        return res

    array._numbaot_locked = True
    return array


def install():
    """Give the simulator's fake cuda module ``shfl_xor_sync`` and
    ``shfl_sync``, and a thread-safe ``cuda.shared.array``."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule, FakeCUDAShared

    if not hasattr(FakeCUDAModule, "shfl_xor_sync"):
        FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
    if not hasattr(FakeCUDAModule, "shfl_sync"):
        FakeCUDAModule.shfl_sync = _shfl_sync
    if not getattr(FakeCUDAShared.array, "_numbaot_locked", False):
        FakeCUDAShared.array = _make_shared_array(FakeCUDAShared.array)
