"""Device resolution, the lazy CUDA probe, and thread-count control.

NumPy inputs run on the CPU kernels.  Inputs that expose
``__cuda_array_interface__`` (numba device arrays, CuPy arrays; in the Numba
CUDA simulator, its fake device arrays) run on the CUDA kernels and results
come back as device arrays.  Mixing host and device arrays in one call is a
``TypeError``: numbaot never moves a large array between devices behind the
caller's back.  ``import numbaot`` does not import ``numba.cuda``; the GPU is
probed on the first CUDA call.
"""
import os
from contextlib import contextmanager

import numba
import numpy as np

__all__ = [
    "num_threads",
    "threads_at_most",
    "CudaUnavailableError",
    "is_device_array",
    "device_of",
    "require_cuda",
    "as_device_array",
    "like_input",
    "simulator_enabled",
    "to_device",
    "to_host",
    "result_to_device",
    "outputs_to_device",
    "via_host",
    "device_all_finite",
    "device_finite_absmax",
    "device_contiguous",
]

_INSTALL_HINT = "pip install 'numbaot[cuda]'"


class CudaUnavailableError(RuntimeError):
    """CUDA inputs were given but no usable GPU / CUDA toolkit was found."""


@contextmanager
def num_threads(n):
    """Run the enclosed block with Numba's thread count set to ``n``.

    The previous thread count is restored on exit, also after an exception.

    Raises
    ------
    ValueError
        If ``n`` is not between 1 and ``numba.config.NUMBA_NUM_THREADS``.
    """
    if not isinstance(n, int) or not 1 <= n <= numba.config.NUMBA_NUM_THREADS:
        raise ValueError(
            f"n must be an integer in [1, {numba.config.NUMBA_NUM_THREADS}]; got {n!r}"
        )
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)


class threads_at_most:
    """Context manager: run the enclosed parallel kernel call on at most
    ``n_items`` of Numba's threads (at least one).  A thread without a work
    item would only be woken up to find nothing to do, and waking a sleeping
    worker costs 0.1-10 ms on a shared VM (docs/performance-notes.md), more than a small
    batch's whole computation.  With ``n_items`` >= the current thread count
    this changes nothing; otherwise the count is restored on exit, also
    after an exception.  (A class, not ``num_threads``: this runs on every
    call of the kernels it guards, and a hot call of a small batch takes
    10-20 us.)"""

    __slots__ = ("_n", "_old")

    def __init__(self, n_items):
        self._n = max(1, int(n_items))
        self._old = 0

    def __enter__(self):
        old = numba.get_num_threads()
        if self._n < old:
            numba.set_num_threads(self._n)
            self._old = old
        return self

    def __exit__(self, *exc):
        if self._old:
            numba.set_num_threads(self._old)
            self._old = 0
        return False


def simulator_enabled():
    """True when the Numba CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def is_device_array(x):
    """True for arrays that live on a CUDA device (or the simulator's fakes)."""
    if type(x).__module__ == "numpy":
        return False
    return hasattr(x, "__cuda_array_interface__") or bool(getattr(x, "__cuda_ndarray__", False))


def _is_empty_host(x):
    if x is None:
        return True
    try:
        return len(x) == 0 and not is_device_array(x)
    except TypeError:
        return False


def device_of(**arrays):
    """Return ``"cuda"`` when the arrays are on a CUDA device, else ``"cpu"``.

    ``None`` and empty host sequences (POT's "uniform" ``[]``) go with
    either device.  Scalars count as host.

    Raises
    ------
    TypeError
        If some arrays are on the device and others on the host, naming both.
    """
    on_dev = [k for k, x in arrays.items() if is_device_array(x)]
    if not on_dev:
        return "cpu"
    on_host = [k for k, x in arrays.items() if not is_device_array(x) and not _is_empty_host(x)]
    if on_host:
        raise TypeError(
            f"{', '.join(on_dev)} on the GPU but {', '.join(on_host)} on the host: "
            "pass all arrays on the same device (numba.cuda.to_device(x) or "
            "cupy.asarray(x) moves a host array; .copy_to_host() / cupy.asnumpy() "
            "brings one back)"
        )
    return "cuda"


def require_cuda():
    """Import ``numba.cuda`` and check a GPU (or the simulator) is usable.

    Raises
    ------
    CudaUnavailableError
        numba-cuda is not installed, or no CUDA GPU/driver is available.
    """
    try:
        from numba import cuda
    except Exception as exc:  # numba-cuda missing or broken
        raise CudaUnavailableError(
            f"GPU arrays need the numba-cuda package ({exc}); install it with {_INSTALL_HINT}"
        ) from None
    if not simulator_enabled() and not cuda.is_available():
        raise CudaUnavailableError(
            "GPU arrays were given but no CUDA GPU/driver is usable "
            f"(numba.cuda.is_available() is False); install the CUDA support with "
            f"{_INSTALL_HINT} on a machine with an NVIDIA GPU and driver, or pass NumPy arrays"
        )
    return cuda


def as_device_array(x):
    """A numba device-array view of ``x`` (no copy)."""
    cuda = require_cuda()
    if getattr(x, "__cuda_ndarray__", False):
        return x
    return cuda.as_cuda_array(x)


def like_input(out, like):
    """Return device array ``out`` as the array kind of ``like`` where
    practical: a CuPy array for CuPy inputs (zero copy), else the numba
    device array itself."""
    if type(like).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy.asarray(out)
    return out


# --------------------------------------------------------------------------
# host <-> device copies (O(dim) vectors and results; never a hidden copy of
# a large matrix, except where a public docstring says so)
# --------------------------------------------------------------------------
def to_device(x, dtype):
    """A new numba device array holding ``x`` (host) as C-contiguous ``dtype``."""
    cuda = require_cuda()
    return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))


def to_host(x):
    """A host copy of a device array; anything else is returned unchanged."""
    if is_device_array(x):
        return as_device_array(x).copy_to_host()
    return x


def result_to_device(x, like):
    """A host result (array of ndim >= 1) as a device array of the kind of
    ``like`` (CuPy or numba); scalars and non-arrays are returned unchanged
    (losses of one problem stay host scalars, as documented)."""
    if isinstance(x, np.ndarray) and x.ndim > 0:
        return like_input(to_device(x, x.dtype), like)
    return x


def outputs_to_device(out, like):
    """:func:`result_to_device` applied through tuples, lists and dicts (the
    ``log`` dict) of a host solver's outputs."""
    if isinstance(out, tuple):
        return tuple(outputs_to_device(x, like) for x in out)
    if isinstance(out, list):
        return [outputs_to_device(x, like) for x in out]
    if isinstance(out, dict):
        return {k: outputs_to_device(x, like) for k, x in out.items()}
    return result_to_device(out, like)


def via_host(fn, args, kwargs, like):
    """Run the host solver ``fn`` on host copies of its device arrays and
    return its outputs as device arrays of the kind of ``like`` (for the
    solvers that have no CUDA kernels; their docstrings say so)."""
    require_cuda()
    out = fn(*[to_host(x) for x in args], **{k: to_host(x) for k, x in kwargs.items()})
    return outputs_to_device(out, like)


def device_finite_absmax(x):
    """max |x_ij| of the 2-D device array ``x`` as a float, ``inf`` when
    ``x`` has a NaN or inf: one device reduction (nothing large is copied),
    the device twin of ``_checks.finite_absmax``."""
    from .cuda import _reduce

    return _reduce.finite_absmax(x)


def device_all_finite(x):
    """True when the 2-D device array ``x`` has no NaN or inf
    (:func:`device_finite_absmax`)."""
    return device_finite_absmax(x) < float("inf")


def device_contiguous(x, dtype):
    """The device array ``x`` as C-contiguous ``dtype`` (``x`` itself when it
    already is, else a device copy)."""
    from .cuda import sinkhorn as cuda_sinkhorn

    return cuda_sinkhorn.to_contiguous(x, dtype)
