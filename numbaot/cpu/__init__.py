"""Parallel CPU kernels (``numba.njit(parallel=True)`` with ``prange``).

Kernels never validate their input (see ``numbaot._checks``).  ``chunk_layout``
is the one place that decides how rows are split into fixed chunks;
``serial_twin`` the one that compiles a parallel kernel for the calling
thread alone (small problems); ``weighted_sum`` the host sums of the
entropic values (sum_i w_i f(x_i) over the bins with mass), and ``host_dot``
their inner products (no BLAS thread pool woken).
"""
import types

import numpy as np
from numba import njit

from .. import _config
from .._config import (ACCUMULATOR_BYTES, INNER, JIT_OPTIONS, MAX_ROW_CHUNKS, MIN_CHUNK_ENTRIES,
                       MIN_CHUNK_ROWS)

__all__ = ["chunk_layout", "serial_twin", "host_dot", "weighted_sum"]


def serial_twin(kernel, inner=False, **subs):
    """``kernel`` (a Numba dispatcher) compiled serially (``prange`` runs as
    ``range``) as a function named ``<name>_serial``, with the global names
    in ``subs`` bound to other functions (the serial twins of the parallel
    kernels it calls), so that a small problem's solve launches no parallel
    region: waking the worker threads costs more than the arithmetic there,
    and stalls behind any other busy thread pool.  The new name matters:
    Numba's disk cache keys a function by its qualified name, not by its
    flags, so the same function compiled both ways would share one entry.
    Call it once per kernel, after every global the kernel uses is defined
    (``subs`` binds into a copy of the module's globals).  Give ``subs``
    only for a kernel of the calling module: Numba's cache entry of the twin
    is invalidated by a change of the kernel's source file, so a twin whose
    substitutions were made in another file could load stale code from the
    cache after that file changed.  ``inner``: compiled with
    ``_config.INNER`` (no CPython wrapper: for a twin that only compiled code
    calls)."""
    f = kernel.py_func
    glob = dict(f.__globals__, **subs) if subs else f.__globals__
    g = types.FunctionType(f.__code__, glob, f.__name__ + "_serial", f.__defaults__,
                           f.__closure__)
    g.__qualname__ = f.__qualname__ + "_serial"
    g.__module__, g.__doc__ = f.__module__, f.__doc__
    return njit(**JIT_OPTIONS, **(INNER if inner else {}))(g)


def chunk_layout(n_rows, n_hists, n_cols, memory_bound=False):
    """Split ``n_rows`` rows into fixed chunks.

    Returns ``(n_chunks, chunk_rows)``.  The split depends only on the problem
    size (never on the thread count), which keeps every reduction order, and so
    every result, identical for any number of threads.  A chunk has at least
    ``MIN_CHUNK_ROWS`` rows and, for a ``memory_bound`` pass (the
    multiplicative passes, bound by reading K: a few operations per entry),
    at least ``MIN_CHUNK_ENTRIES`` entries (rows x n_cols x n_hists); the
    exp-bound log-domain passes keep more, smaller chunks (more threads on
    many-core machines).  The number of chunks is
    capped so that the per-chunk column accumulators (n_chunks x n_hists x
    n_cols float64) stay within ``ACCUMULATOR_BYTES``.
    """
    min_rows = MIN_CHUNK_ROWS
    if memory_bound:
        min_rows = max(min_rows, -(-MIN_CHUNK_ENTRIES // max(1, n_hists * n_cols)))
    chunk_rows = max(min_rows, -(-n_rows // MAX_ROW_CHUNKS))
    n_chunks = -(-n_rows // chunk_rows)
    cap = max(1, ACCUMULATOR_BYTES // max(1, 8 * n_hists * n_cols))
    if n_chunks > cap:
        n_chunks = cap
        chunk_rows = -(-n_rows // n_chunks)
        n_chunks = -(-n_rows // chunk_rows)
    return n_chunks, chunk_rows


def weighted_sum(w, x, f=None):
    """sum_i w_i f(x_i) over the i with w_i > 0, as a Python float: w and
    x NumPy float arrays (n,), w >= 0 (a plan's marginal, or weights), f a
    NumPy ufunc (np.log) or None for the identity.  A bin without mass adds 0, even where x_i = -inf (0 log 0
    = 0) or x_i has no logarithm (f is applied after the mask).  The mask
    only where some w_i is 0: one min and one dot otherwise (this runs
    after every solve: ``numbaot.solvers``, ``numbaot.cpu.gradients``)."""
    if w.min() > 0:
        return host_dot(w, x if f is None else f(x))
    mask = w > 0
    return host_dot(w[mask], x[mask] if f is None else f(x[mask]))


def host_dot(x, y):
    """sum_i x_i y_i of two NumPy vectors (n,), as a Python float: BLAS's
    ``ddot`` up to ``_config.HOST_DOT_BLAS_MAX`` entries (0.4 us at 16), ``np.einsum``
    above, where OpenBLAS would run it on its thread pool and leave the
    workers spinning on the cores of numbaot's next parallel kernels
    (docs/performance-notes.md, "No BLAS call on numbaot's own paths")."""
    if x.shape[0] <= _config.HOST_DOT_BLAS_MAX:
        return float(np.dot(x, y))
    return float(np.einsum("i,i->", x, y))
