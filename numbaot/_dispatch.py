"""Device resolution and thread-count control.

Only NumPy (CPU) inputs are served for now; arrays exposing
``__cuda_array_interface__`` are refused with a clear error by
``numbaot._checks.as_real_array`` until the CUDA kernels land.
"""
from contextlib import contextmanager

import numba

__all__ = ["num_threads"]


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
