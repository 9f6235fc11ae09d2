"""Warp shuffles for the Numba CUDA simulator.

The simulator (NUMBA_ENABLE_CUDASIM=1) runs one Python thread per CUDA thread
but has no warp intrinsics, so kernels that reduce with ``shfl_xor_sync``
could not be tested without a GPU.  ``install()`` adds a faithful
``shfl_xor_sync`` to the simulator's fake ``cuda`` module: the 32 lanes of a
warp post their values, meet at a barrier, read the partner lane's value
(``lane ^ lane_mask``) and meet again before the slots are reused.  As on a
GPU with a full mask, all 32 lanes of the warp must take part (blocks are a
multiple of 32 threads).  Only ever installed in simulator mode.
"""
import threading

_LOCK = threading.Lock()
_WARP = 32


def _shfl_xor_sync(self, mask, value, lane_mask):
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
    out = slots[lane ^ lane_mask]
    barrier.wait()
    return out


def install():
    """Give the simulator's fake cuda module a ``shfl_xor_sync``."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    if not hasattr(FakeCUDAModule, "shfl_xor_sync"):
        FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
