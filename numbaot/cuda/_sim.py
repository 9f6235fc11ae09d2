"""Simulator-only shim: patches the Numba CUDA simulator so that numbaot's own
kernels run (and run correctly) under ``NUMBA_ENABLE_CUDASIM=1``.

It never runs on a GPU.  ``numbaot.cuda._registry`` imports this module and
calls :func:`install` only when the simulator is on
(``numbaot._dispatch.simulator_enabled()``); a process has either the
simulator or the real ``numba.cuda``, never both, so on a machine that runs
the kernels on a GPU nothing here is imported, and nothing here changes a
kernel's code or its PTX (tests/test_ptx.py compiles with the simulator off).

Why it ships in the package (and not in tests/): numbaot itself treats the
simulator as a device (``numbaot._dispatch``: the simulator's fake device
arrays are dispatched to the CUDA kernels), and its warp-shuffle kernels
(``numbaot.cuda._reduce``'s butterflies, the warp paths of
``numbaot.cuda.sinkhorn`` and ``numbaot.cuda.implicit``) cannot run in the
stock simulator at all: numba-cuda 0.30's ``FakeCUDAModule`` has no
``shfl_xor_sync`` / ``shfl_sync`` (a call raises ``AttributeError:
'FakeCUDAModule' object has no attribute 'shfl_xor_sync'``).  Anyone who runs
numbaot's CUDA path in the simulator (its test suite, or a user debugging a
pipeline without a GPU) needs the patch, so it is installed where the kernels
are declared.

What :func:`install` patches (process-wide, on numba-cuda's simulator
classes; idempotent; a simulator that already has the shuffles keeps its
own):

1. ``FakeCUDAModule.shfl_xor_sync`` and ``FakeCUDAModule.shfl_sync``: faithful
   warp shuffles.  The simulator runs one Python thread per CUDA thread; the
   32 lanes of a warp post their values, meet at a barrier, read the source
   lane's value (``lane ^ lane_mask`` for the butterfly, ``src_lane % 32`` for
   the indexed shuffle) and meet again before the slots are reused.  As on a
   GPU with a full mask, all 32 lanes of the warp must take part (blocks are a
   multiple of 32 threads).  The ``mask`` argument is not checked.

2. ``FakeCUDAShared.array`` (``cuda.shared.array``), made thread-safe.  The
   simulator (numba-cuda 0.30) gives every thread of a launch the array that
   the first thread to reach a source line allocated, with an unlocked
   check-then-set on a dict: two threads that both find no array there each
   allocate one (``np.empty``: old bytes), so a thread writes a "shared" slot
   that the reader never sees.  It is rare (a thread switch in a window of a
   few bytecodes: once in 3.6e5 allocations, measured under load) but made a
   CI run fail (tests/cuda/test_sinkhorn_cuda.py::test_multi_warp_blocks,
   13 % off; commit e5633c0), so :func:`install` replaces it with the same
   lookup under a lock.  Dynamic shared memory (shape 0) and explicit
   alignment still go to the simulator's own code.

Since the patch is on the simulator's classes, other simulated kernels in
the same process see it too (they gain the shuffles and the locked
``shared.array``; nothing they could do before changes).  Tested by
tests/cuda/test_warp_shuffles.py (the shuffles against index arithmetic, the
shared arrays of a block, and the atomic lookup under forced contention).
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
    ``shfl_sync``, and a thread-safe ``cuda.shared.array``.  Simulator only:
    it imports ``numba.cuda.simulator`` and is called by
    ``numbaot.cuda._registry`` only when NUMBA_ENABLE_CUDASIM is on."""
    from numba.cuda.simulator.kernelapi import FakeCUDAModule, FakeCUDAShared

    if not hasattr(FakeCUDAModule, "shfl_xor_sync"):
        FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
    if not hasattr(FakeCUDAModule, "shfl_sync"):
        FakeCUDAModule.shfl_sync = _shfl_sync
    if not getattr(FakeCUDAShared.array, "_numbaot_locked", False):
        FakeCUDAShared.array = _make_shared_array(FakeCUDAShared.array)
