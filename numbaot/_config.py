"""Tunables of numbaot, in one place.

Every kernel reads its compilation flags and work-split sizes from here, so a
change of policy (fastmath flags, caching, chunk sizes) is made once.
"""

#: LLVM fast-math flags for the CPU kernels.  ``nnan`` and ``ninf`` are left
#: out on purpose: they allow LLVM to delete ``isnan``/``isfinite`` tests and to
#: mishandle the ``-inf`` log-weights of zero-mass bins.  ``reassoc`` lets
#: reductions vectorise (their order then depends only on the problem size,
#: never on the thread count).
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}

#: Cache compiled kernels on disk (Numba's ``cache=True``), so that only the
#: first process after installation pays the compilation.  See BENCHMARKS.md
#: for the measured cold and warm start-up times.
CACHE = True

#: Options shared by every ``@njit`` kernel.  ``error_model='numpy'`` makes a
#: float division by zero return inf/nan (as NumPy, and POT) instead of raising.
JIT_OPTIONS = dict(cache=CACHE, fastmath=FASTMATH, error_model="numpy", nogil=True)

#: Rows of the matrix are split into at most this many fixed chunks; each chunk
#: owns private column accumulators that are merged in chunk order.  The split
#: depends only on the number of rows, so results are bit-identical for any
#: thread count.
MAX_ROW_CHUNKS = 32

#: Minimum rows per chunk (small problems use fewer chunks): a chunk's work
#: (rows x dim_b x n_hists) is then at least 16 times the cost of merging its
#: accumulators (dim_b x n_hists).
MIN_CHUNK_ROWS = 16

#: Column block length (elements) of the tiled row passes and of the blocked
#: online logsumexp: a block of a row is read from memory once, and the blocks
#: of v and of the column accumulators it meets stay in L1.
COL_BLOCK = 512

#: Column block of the exponential pass of the log-domain kernel: long runs
#: of one row stream better from memory, and that pass is bound by the
#: exponentials, not by reloading v (measured 8-13 % faster than COL_BLOCK).
EXP_BLOCK = 4096

#: Rows per tile in the fused row passes: the tile's rows are re-read from L2
#: (never from memory) by the column-accumulation pass.
ROW_TILE = 8

#: Upper bound (bytes) of one tile of rows (ROW_TILE x dim_b float64): wide
#: matrices use fewer rows per tile.
TILE_BYTES = 512 * 1024

#: Rows per tile in the column logsumexp pass (tile max, then exp-sum).
COL_TILE_ROWS = 8

#: Column sums smaller than this (relative to the column's target mass) are
#: considered underflowed in the fused log-domain pass; the affected iteration
#: then recomputes the column logsumexp with the safe tiled pass.
UNDERFLOW_RTOL = 1e-200

#: Upper bound on the memory of the per-chunk column accumulators (bytes).
ACCUMULATOR_BYTES = 256 * 2**20

#: In the log-domain row pass with a certified shift, a row whose scaled sum
#: falls below this is recomputed with the running-max online logsumexp.
ROW_SUM_FLOOR = 1e-200

#: From this many problems sharing one matrix on, the multiplicative solver
#: stores its vectors problem-minor (dim, n_hists) and vectorises over the
#: problems (no per-row horizontal reductions).
BATCH_MINOR_MIN = 8
