"""Parallel CPU kernels (``numba.njit(parallel=True)`` with ``prange``).

Kernels never validate their input (see ``numbaot._checks``).  ``chunk_layout``
is the one place that decides how rows are split into fixed chunks.
"""

from .._config import MAX_ROW_CHUNKS, MIN_CHUNK_ENTRIES, MIN_CHUNK_ROWS, ACCUMULATOR_BYTES

__all__ = ["chunk_layout"]


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
