"""Warp shuffles for the Numba CUDA simulator.

The simulator (NUMBA_ENABLE_CUDASIM=1) runs one Python thread per CUDA thread
but has no warp intrinsics, so kernels that reduce or broadcast with
``shfl_xor_sync`` / ``shfl_sync`` could not be tested without a GPU.
``install()`` adds faithful versions to the simulator's fake ``cuda`` module:
the 32 lanes of a warp post their values, meet at a barrier, read the source
lane's value (``lane ^ lane_mask`` for the butterfly, ``src_lane % 32`` for
the indexed shuffle) and meet again before the slots are reused.  As on a GPU
with a full mask, all 32 lanes of the warp must take part (blocks are a
multiple of 32 threads).  Only ever installed in simulator mode.
"""
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


def install():
    """Give the simulator's fake cuda module ``shfl_xor_sync`` and ``shfl_sync``."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    if not hasattr(FakeCUDAModule, "shfl_xor_sync"):
        FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
    if not hasattr(FakeCUDAModule, "shfl_sync"):
        FakeCUDAModule.shfl_sync = _shfl_sync
