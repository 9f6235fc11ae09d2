"""Tunables of numbaot, in one place.

Every kernel reads its compilation flags and work-split sizes from here, so a
change of policy (fastmath flags, caching, chunk sizes) is made once.

Environment switch (read once, at import):

* ``NUMBAOT_CACHE=0`` turns Numba's on-disk cache off for numbaot's kernels
  (default on; see ``CACHE``).
"""
import os

#: LLVM fast-math flags for the CPU kernels.  ``nnan`` and ``ninf`` are left
#: out on purpose: they allow LLVM to delete ``isnan``/``isfinite`` tests and to
#: mishandle the ``-inf`` log-weights of zero-mass bins.  ``reassoc`` lets
#: reductions vectorise (their order then depends only on the problem size,
#: never on the thread count).
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}

#: Cache compiled kernels on disk (Numba's ``cache=True``), so that only the
#: first process after installation pays the compilation.  See BENCHMARKS.md
#: for the measured cold and warm start-up times.  The environment variable
#: ``NUMBAOT_CACHE=0`` turns it off (e.g. read-only or shared installs, or a
#: clean first-call timing); any other value, or none, leaves it on.  It is
#: off, whatever the variable says, where the package ships without its
#: ``.py`` sources (``.pyc`` only): Numba caches only functions whose source
#: file exists, and raises at decoration time otherwise.
CACHE = (os.environ.get("NUMBAOT_CACHE", "1").strip() != "0"
         and os.path.isfile(os.path.splitext(__file__)[0] + ".py"))

#: Options shared by every ``@njit`` kernel.  ``error_model='numpy'`` makes a
#: float division by zero return inf/nan (as NumPy, and POT) instead of raising.
#: ``no_cfunc_wrapper``: Numba makes no C-callable wrapper of a kernel (nothing
#: here calls one through it; ``numbaot.cpu._pointer`` takes the native
#: function's address).
JIT_OPTIONS = dict(cache=CACHE, fastmath=FASTMATH, error_model="numpy", nogil=True,
                   no_cfunc_wrapper=True)

#: Added to the options of a kernel that only compiled code calls (directly,
#: or through its address, ``numbaot.cpu._pointer``): Numba then makes no
#: CPython wrapper for it either, which it would compile, optimise and emit
#: (unboxing every argument) on a first call.  Such a kernel must never be
#: called from Python, where it would crash the interpreter;
#: ``tests/test_structure.py`` checks that no Python code of the project names
#: one.  With ``no_cfunc_wrapper`` above: first calls 0.83-0.96 of before for
#: the 200^2 ``sinkhorn_log`` (issue 23; BENCHMARKS.md, "First-call").
INNER = dict(no_cpython_wrapper=True)

#: Small problems in one compiled call (issue 23): a dense solve whose
#: matrix work per iteration, dim_a x dim_b x n_problems entries, is at most
#: this runs start to finish (every iteration, POT's convergence checks and
#: failure rule) inside one serial compiled function: no Python per block of
#: iterations and no parallel-region launch, whose wake-up of the worker
#: threads costs more than the arithmetic at these sizes and stalls behind
#: any other thread pool (OpenBLAS, a training loop) that keeps the cores
#: busy.  Measured below (SMALL_MAX_ENTRIES_LOG) and in BENCHMARKS.md.
SMALL_MAX_ENTRIES = 1 << 17

#: The same bound for the log-domain solvers (``method='sinkhorn_log'``,
#: balanced and unbalanced), at most SMALL_MAX_ENTRIES: their iteration
#: computes exponentials per entry, so two threads pay for their launch on
#: smaller problems.  Measured 2026-11-27 (2-core AMD EPYC VM, idle cores,
#: reg 0.05, to stopThr 1e-9), blocked / one-call time: balanced log 1.44 at
#: n = 64, 0.84 at 128, 0.56 at 256; unbalanced log (reg_m 1) 1.35 at 64,
#: 0.90 at 96, 0.80 at 128, 0.66-0.78 at 256; balanced Sinkhorn-Knopp 9.0 at
#: 64, 1.96 at 128, 1.10 at 256, 1.00 at 362, unbalanced 1.02 at 362, 0.85
#: at 512 (their K v and K^T u are cheap next to the launches).  With busy
#: cores (another thread pool, a loaded machine) the one-call path was 2-3x
#: faster at every size measured up to 128^2.  Raised from 1 << 13 to
#: 1 << 14 (128^2) on 2026-11-29 (Zen 4 VM, 2 threads), after the balanced
#: one-call path dropped its max pass (1.2-1.7x per iteration): balanced log
#: blocked / one-call 1.30 at 96, 0.94 at 128, 0.77 at 160 back to back
#: (idle), and POT / numbaot when each call alternates with POT's (a
#: training loop's pattern) 8.1 -> 21.3x at 96, 9.4 -> 15.7x at 128;
#: partial log 1.0 at 96, 0.89 at 128 back to back; unbalanced log
#: unchanged at 96-128.
SMALL_MAX_ENTRIES_LOG = 1 << 14

#: The compiled small-problem solvers keep every check's error in a buffer
#: of numItermax // 10 + 1 entries; above this numItermax the solve takes
#: the blocked path instead (its Python loop needs no buffer).
SMALL_MAX_ITER = 10**7

#: Rows of the matrix are split into at most this many fixed chunks; each chunk
#: owns private column accumulators that are merged in chunk order.  The split
#: depends only on the number of rows, so results are bit-identical for any
#: thread count.
MAX_ROW_CHUNKS = 32

#: Minimum rows per chunk (small problems use fewer chunks): a chunk's work
#: (rows x dim_b x n_hists) is then at least 16 times the cost of merging its
#: accumulators (dim_b x n_hists).
MIN_CHUNK_ROWS = 16

#: Minimum entries per chunk (rows x dim_b x n_hists) of the memory-bound
#: multiplicative passes (``chunk_layout(..., memory_bound=True)``): with
#: two threads, many small chunks cost more than their share (not isolated:
#: per-chunk buffers made no difference, the larger merge explains ~3 µs of
#: the ~20 µs at 512²).  Measured (Zen 3 VM,
#: 2 threads, ``benchmarks/bench_chunks.py``): the partial-OT pass alone at
#: 512² 77-89 µs with 32 chunks of 16 rows, 53-64 µs with 4-8 chunks; whole
#: calls at 512² 1.03-1.33x (Knopp, unbalanced, partial); at 1024² both
#: rules give 32 chunks.  The log-domain passes are exp-bound and keep
#: MIN_CHUNK_ROWS (more threads on many-core machines).
MIN_CHUNK_ENTRIES = 1 << 15

#: Column block length (elements) of the tiled row passes and of the blocked
#: online logsumexp: a block of a row is read from memory once, and the blocks
#: of v and of the column accumulators it meets stay in L1.
COL_BLOCK = 512

#: Column block of the exponential pass of the log-domain kernel: long runs
#: of one row stream better from memory, and that pass is bound by the
#: exponentials, not by reloading v (measured 8-13 % faster than COL_BLOCK).
EXP_BLOCK = 4096

def _vector_registers():
    """SIMD registers of the code Numba generates: 32 where it targets
    AVX-512 (the host's features, or ``NUMBA_CPU_FEATURES``), else 16 (AVX2,
    and any named ``NUMBA_CPU_NAME`` target without explicit features)."""
    feats = os.environ.get("NUMBA_CPU_FEATURES")
    if feats is not None:
        return 32 if "+avx512f" in feats else 16
    if os.environ.get("NUMBA_CPU_NAME"):
        return 16
    try:
        from llvmlite import binding
        return 32 if binding.get_host_cpu_features().get("avx512f", False) else 16
    except Exception:  # pragma: no cover - llvmlite without the query
        return 16


#: Rows per tile in the fused row passes (the tile's rows are re-read from L2,
#: never from memory, by the column-accumulation pass) and of the register
#: blocking of ``cpu.sinkhorn.dot_rows``: one row accumulator per row, each
#: unrolled over two vectors.  Eight rows need more than AVX2's 16 vector
#: registers (spills): on the Zen 3 VM (AVX2) four-row groups made the
#: balanced blocked pass 15-25 % faster than eight (2 threads, 512^2-2048^2,
#: 2026-11-28, BENCHMARKS.md); eight stay where AVX-512 gives 32 registers.
ROW_TILE = 8 if _vector_registers() >= 32 else 4

#: Rows per tile and register group for a float32 K (``cpu.sinkhorn.tile_rows``):
#: eight on every target.  On the Zen 3 VM (AVX2) the float32 pass with eight
#: rows took 0.89-1.02x the time of four (512^2 and 1024^2, v in float32 or
#: float64, the pass alone, interleaved in one process, 2026-11-28).
ROW_TILE_F32 = 8

#: Upper bound (bytes) of one tile of rows (ROW_TILE x dim_b float64): wide
#: matrices use fewer rows per tile.
TILE_BYTES = 512 * 1024

#: The blocked Knopp pass (``cpu.sinkhorn.knopp_fused_pass``) sweeps each
#: chunk's rows with the one-call path's four-row loop (``_small.knopp_rows``:
#: whole rows, no column blocks or tile buffers; ``cpu.sinkhorn.knopp_rows_chunk``)
#: when four rows of K take at most this many bytes (they then stay in L1
#: between the row sums and the column sums); wider K keeps the tiles of
#: COL_BLOCK columns.  The pass alone, both versions in one process (2
#: threads, Zen 4 VM, 2026-11-29): 30.5 -> 27.7 us at 512^2, 102 -> 84 us at
#: 1024^2, but 356-369 -> 382-392 us at 2048^2 (four rows of 64 KB spill from
#: L1).  A kernel of its own, so a narrow K compiles none of the tile helpers
#: (1.5 s of a first call at 400^2).  Problem-major batches sweep each group
#: of four rows for every problem (0.88-1.04x the tiles' time); the
#: partial-OT pass (``cpu.partial.partial_rows_chunk``) uses the same bound
#: for one problem: 0.90x the time per pass at 1024^2, 1.00x at 400^2-512^2.
KNOPP_ROWS_MAX_BYTES = 32 * 1024

#: Unbalanced multiplicative pass (``numbaot.cpu.unbalanced.uot_fused_pass``):
#: upper bound (bytes) of one tile of ROW_TILE rows (else half as many) of K, in K's own
#: dtype.  The tile is re-read from L2 (1 MiB per core here) by the column
#: sweep; 768 KiB keeps 8 rows of the 1024 x 10240 float64 case (640 KiB).
UOT_TILE_BYTES = 768 * 1024

#: Unbalanced multiplicative pass: columns per block (entries, any dtype).
#: Long runs of each row stream better from memory and cut the per-block
#: reductions; measured 5-15 % faster than 512 (2 threads, 4000^2 and the
#: MAP-UOT shapes).  A float32 block partial sums at most 2048 / 16 = 128
#: terms per lane before it is added into float64.
UOT_COL_BLOCK = 2048

#: Unbalanced pass, float32 lanes (float32 K): u, v must be 0 or within
#: [UOT_LANE_MIN, UOT_LANE_MAX] and the sums (K v)_i, (K^T u)_j within
#: [UOT_LANE_SUM_MIN, UOT_LANE_SUM_MAX] (K >= 0: no partial sum overflows, and
#: each product lost to float32 underflow, < 1.2e-38, is < 1.2e-18 of its
#: sum), else the iteration is redone in float64 lanes, and so are the next.
UOT_LANE_MIN = 1e-30
UOT_LANE_MAX = 1e30
UOT_LANE_SUM_MIN = 1e-20
UOT_LANE_SUM_MAX = 1e20

#: Rows per tile in the column logsumexp pass (tile max, then exp-sum).
COL_TILE_ROWS = 8

#: The blocked balanced log-domain solver, for many problems in the
#: problem-minor layout (one or a few problems form it by their fused pass,
#: ``log_run``'s ``col_first``), forms its first column update on
#: the calling thread (``_small.col_lse``, two sweeps of M) up to this many
#: entries (matrix entries times problems), with the parallel
#: ``log_col_lse`` above: a first call below it compiles no parallel column
#: pass (1.2-1.5 s of the 200^2 first call, 8.0 -> 6.5 s).  One pass,
#: serial / parallel, interleaved medians (2 threads, Zen 4 VM, 2026-11-29):
#: 23 / 26 us at 200^2, 36 / 35 at 256^2, 74 / 68 at 362^2, 150 / 163 at
#: 512^2, 297 / 225 at 724^2; 560 / 490 at 1024^2 and 4.0 / 1.8 ms at 2000^2
#: (medians of 7 calls back to back).
LOG_INIT_SERIAL_MAX_ENTRIES = 1 << 18

#: Column sums smaller than this (relative to the column's target mass) are
#: considered underflowed in the fused log-domain pass; the affected iteration
#: then recomputes the column logsumexp with the safe tiled pass.
UNDERFLOW_RTOL = 1e-200

#: Upper bound on the memory of the per-chunk column accumulators (bytes).
ACCUMULATOR_BYTES = 256 * 2**20

#: In the log-domain row pass with a certified shift, a row whose scaled sum
#: falls below this is recomputed with the running-max online logsumexp.
ROW_SUM_FLOOR = 1e-200

#: Log-domain row pass with a float32 M (``numbaot.cpu.sinkhorn.log_fused_pass``):
#: a row's exponentials exp(c M_ij + v_j - r_i) are computed in float32 lanes
#: (twice the lanes of float64) when |r_i| + max_j |v_j| <= this, else in
#: float64.  The float32 argument then carries an absolute error of about
#: 3 * LOG_F32_MAX_SCALE * 2^-24 = 2.3e-5 at most for the terms that matter
#: (those within ~30 of the row maximum, where |c M_ij| is within 30 of
#: |v_j - r_i|): a relative error of 2.3e-5 in those plan entries, against
#: float32 tolerances of 1e-4 (tests/_helpers.py).  Typical problems (costs
#: scaled to [0, 1], reg >= 0.02) stay under it.
LOG_F32_MAX_SCALE = 128.0

#: The float32 lanes above put a floor of about 1e-8 under the marginal error
#: (measured 4e-9 to 1.5e-8 on 64 x 48 to 2000 x 2000 problems), below POT's
#: default stopThr of 1e-9 would never be reached: a solve switches to float64
#: lanes for good once the error is at most this, or falls by less than 10 %
#: between two checks (``numbaot.cpu.sinkhorn.log_errors``).  The lazy
#: point-cloud solver's float32 lanes follow the same rule on its own
#: stopping error, the L1 row-marginal violation
#: (``numbaot.cpu.empirical.lazy_note_error``).
LOG_F32_SWITCH_ERR = 1e-6

#: Lazy point clouds (``numbaot.cpu.empirical.lazy_lse_f32``): a float32
#: problem's half-steps run in float32 lanes (costs from float32 coordinates,
#: exponentials in float32, sums in float64) while |c| * cost_max * (d + 4)
#: <= this (c = -1/eps, cost_max the bounding-box bound of every cost, d the
#: point dimension), else in float64.  A float32 cost carries a relative
#: error of at most (d + 2) 2^-24 and c * cost (d + 4) 2^-24; the terms that
#: matter (within 30 of their row's logsumexp, itself within |c| cost_max of
#: the shift) have |argument| <= |c| cost_max + 30 and |w_j - shift| <=
#: 2 |c| cost_max + 30, so their argument is off by at most
#: (LAZY_F32_SCALE_BUDGET + 3 |c| cost_max + 60) 2^-24 <= 5.3e-5 (d = 1;
#: 4.7e-5 for d = 3): a relative error below 6e-5 in those plan entries
#: (float32 tolerances: 1e-4).  512 admits eps >= 0.041 on points spread over
#: a unit cube in 3-D (cost_max = 3), e.g. GeomLoss's benchmarks at eps 0.05.
LAZY_F32_SCALE_BUDGET = 512.0

#: ... and a row whose float32-lane sum (shifted by the largest column
#: potential) falls below this is recomputed in float64 (the online
#: logsumexp): float32 exponentials flush below e^-87.3 = 1.2e-38, so the
#: terms lost are below 1.2e-18 of the row's sum each.
LAZY_F32_ROW_FLOOR = 1e-20

#: ``numbaot.dist`` ('sqeuclidean', 'euclidean') sums the squared
#: differences in a compiled loop (``numbaot.cpu.empirical.cost_matrix``) up
#: to this many features, and takes POT's |x|^2 + |y|^2 - 2 x.y with a BLAS
#: product above.  The BLAS product leaves OpenBLAS's workers spinning on the
#: cores for about 0.1 s, which halves the speed of the parallel Sinkhorn
#: kernels that follow (``solve_sample`` at 1000 points, BENCHMARKS.md).
#: Measured 2026-11-29 (Zen 4 VM, 2 threads, squared distances alone, the
#: two alternating in one process, best of 9): compiled / NumPy time 0.18,
#: 0.61, 0.81, 1.09 at 256 x 256 and 2, 16, 32, 64 features; 0.23, 0.60,
#: 0.79 at 1000 x 1000 and 16, 32, 64; 0.15, 0.36, 0.81, 1.14 at 2000 x
#: 2000 and 2, 16, 32, 64 (about 2.5x at 128 features).
DIST_DIRECT_MAX_FEATURES = 64

#: Cost matrices of at most this many entries are formed on the calling
#: thread (``cost_matrix_serial``).
DIST_SERIAL_MAX_ENTRIES = 1 << 17

#: Longest vectors whose inner product ``numbaot.cpu.host_dot`` (the host
#: sums of the entropic values) hands to BLAS's ``ddot``: OpenBLAS computes
#: one of up to 10 000 entries on the calling thread, longer ones on its
#: pool, whose workers then spin on the solver's cores; ``np.einsum`` above.
HOST_DOT_BLAS_MAX = 8192

#: From this many problems sharing one matrix on, the multiplicative solver
#: stores its vectors problem-minor (dim, n_hists) and vectorises over the
#: problems (no per-row horizontal reductions).
BATCH_MINOR_MIN = 8

#: Columns per work item of the parallel merge of the per-chunk column
#: accumulators (``numbaot.cpu.sinkhorn.merge_chunks``, ``_MERGE_COLS``):
#: work items are (problem, block of this many columns) pairs, so that a
#: small batch still splits over the threads; 2 KiB of float64 per row of a
#: block.  No measurement is recorded for the value.
MERGE_COLS = 256

#: Columns per work item of the unbalanced solver's parallel column update
#: (``numbaot.cpu.unbalanced.uot_col_chunk``, ``_COLS``): (problem, block of
#: this many columns) pairs, merged in chunk order (bit-identical for any
#: thread count).  No measurement is recorded for the value.
UOT_MERGE_COLS = 256

# --------------------------------------------------------------------------
# CUDA (read at launch time, so tests may lower them to exercise multi-block
# and multi-warp paths in the simulator)
# --------------------------------------------------------------------------
#: Fast-math for the CUDA kernels: numba.cuda takes a bool (approximate
#: division/sqrt, flush-to-zero in float32).  Off: the kernels rely on exact
#: -inf handling and on IEEE results that match the CPU within tolerance.
CUDA_FASTMATH = False

#: Threads per block of the 1-D reduction kernels (a multiple of 32).
CUDA_THREADS = 256

#: Threads along the reduced axis in the 2-D column-tile kernels
#: (blocks are 32 columns x CUDA_TILE_ROWS rows of threads).
CUDA_TILE_ROWS = 8

#: Rows per partial in the column passes: the column reduction over dim_a is
#: split into chunks of this many rows (more blocks), merged in chunk order.
CUDA_COL_CHUNK_ROWS = 1024

#: A (batched) problem with at most this many matrix entries runs its
#: iterations inside one kernel launch (one block per problem): it pays one
#: launch per 10 iterations instead of several per iteration.
CUDA_FUSED_MAX_ENTRIES = 1 << 16

# --------------------------------------------------------------------------
# Sinkhorn operator on batches of small matrices (numbaot.implicit)
# --------------------------------------------------------------------------
#: Matrices per work item (lanes, stored side by side, batch-minor) of the
#: forward, the unrolled backward and the generic implicit backward
#: (``numbaot.cpu.implicit.lanes_for``): IMPLICIT_LANES (two unrolled AVX-512
#: bodies) for n <= IMPLICIT_LANES_MAX_N, then IMPLICIT_LANES_LARGE (an
#: n = 64 work item's matrix copy is 1 MiB); a batch smaller than that gets
#: its size rounded up to a multiple of IMPLICIT_LANES_MIN (the float64
#: AVX-512 width; a forward on 4 matrices of n = 16 cost as much as on 64:
#: 1.9 ms, now 0.3 ms).  Each lane's arithmetic is its matrix's alone, so
#: the lane counts change no result.
IMPLICIT_LANES = 64
IMPLICIT_LANES_MAX_N = 16
IMPLICIT_LANES_LARGE = 32
IMPLICIT_LANES_MIN = 8

#: CPU forward: a shifted exp-sum of a log-domain half-step below this is
#: recomputed with the exact max shift (possible only for |X| spreads beyond
#: ~460); a stabilised half-step whose sums fall below it is redone in the
#: log domain.
IMPLICIT_SUM_FLOOR = 1e-200

#: CPU forward: the scalings u, v of the stabilised iteration are absorbed
#: into the log potentials (and the kernel recomputed) once they leave
#: [1/IMPLICIT_ABSORB, IMPLICIT_ABSORB]: the next half-step then multiplies
#: the kernel by scalings <= 1e30, so a kernel entry flushed to 0 (< e^-708)
#: stands for a term < 1e-277, against sums >= IMPLICIT_SUM_FLOOR.
IMPLICIT_ABSORB = 1e30

#: CPU forward: a lane whose absorbed potentials exceed this in magnitude
#: runs the plain log-domain half-steps: f = fa + log u could no longer hold
#: the scalings' updates (its rounding, |fa| * 2.2e-16, would reach 2e-10),
#: while the log-domain iterates stay consistent with their own rounding
#: (|X| ~ 1e6 and beyond: temperatures so low that R is a permutation to
#: rounding).
IMPLICIT_LOG_ONLY = 1e6

#: Sinkhorn operator forward (CPU and CUDA): a row, then a column, whose
#: largest entry x exceeds this in magnitude and whose entries all lie
#: within a factor 2 of x (same sign: a constant row at -1e14, a row
#: -1e14 + O(1)) is shifted by x before the iterations, exactly (Sterbenz:
#: x_j - x is exact there), a column with the compensating initial potential
#: g^0 = x, so the iterates are unchanged.  Without it the potential f_i
#: ~ -x holds the row's O(1) information to |x| * 1.1e-16 only (R's sums off
#: by 5 % at -1e15).  Below 64 that rounding is < 1.4e-14 and the shift is
#: skipped: ordinary inputs give the same bits as before.  CPU: only a work
#: item with a row or column maximum beyond this in magnitude (from the load
#: pass) takes a minimum pass, only one holding such a line the shifts.
#: CUDA: one extra read of each matrix finds them.
IMPLICIT_SHIFT_MIN = 64.0

#: Implicit backward (CPU): a matrix whose marginals of G*R (s_r = (G*R) 1,
#: s_c = (G*R)^T 1) leave [1/IMPLICIT_CG_SCALE_BAND, IMPLICIT_CG_SCALE_BAND]
#: in magnitude (0 excepted) runs its CG on the right-hand side scaled by a
#: power of two (exact) that brings their largest magnitude into [0.5, 1),
#: and the solution is scaled back: the backward is linear in G, but the
#: CG's squared norms underflow to 0 below |G| ~ 1e-154 (no iteration, a
#: wrong gradient with residual 0) and overflow above 1e154.  Inside the
#: band (2^256 ~ 1e77: squared norms, also of residuals 1e-12 times smaller,
#: stay normal numbers) nothing is scaled.  (The generated kernels, n <= 16,
#: test the norm of the right-hand side instead: one comparison per matrix.)
#: Out of the band the result dX is also checked for overflow (its entries
#: are at most ~ the marginals times the solve's amplification); for a
#: float32 dX the band is
#: IMPLICIT_CG_SCALE_BAND_F32 (2^64), so that a dX beyond float32's range
#: is caught too (scaling there changes no bit: powers of two are exact).
IMPLICIT_CG_SCALE_BAND = 2.0 ** 256
IMPLICIT_CG_SCALE_BAND_F32 = 2.0 ** 64

#: CPU implicit backward: matrices with n <= max of these run the generated
#: register-blocked CG kernels, n padded up to the next size listed (each size
#: is one compiled specialisation, compiled on the first call at that size:
#: more sizes, less padding, more first calls that compile); larger n run the
#: generic lane kernels.
IMPLICIT_UNROLL_SIZES = (4, 8, 12, 16)

#: CPU implicit backward, generated kernels: matrices per work item, side by
#: side (a compile-time constant; a multiple of 8, the float64 AVX-512 width).
IMPLICIT_UNROLL_LANES = 64

#: CPU implicit backward, generated kernels: the CG runs on blocks of this many
#: lanes of a work item at a time, start to finish, so that the block's copy
#: of R stays in L1 (8 float64 = one AVX-512 vector; passed to the kernels at
#: run time: LLVM would unroll a constant trip count of 8 into scalar code).
IMPLICIT_CG_BLOCK = 8

#: CPU implicit backward, generated kernels: the CG block grows (8, 16, 32, 64
#: lanes) while its lanes' copy of R, 8 N^2 bytes per lane, stays within this
#: many bytes (half of a 32 KiB L1 data cache): N = 4 runs all 64 lanes at
#: once, N = 8 32, N >= 12 8.
IMPLICIT_CG_BLOCK_BYTES = 16384

#: CPU implicit backward, generated kernels: workspaces per thread (prange
#: chunks, each running every n_chunks-th work item and zeroing its workspace
#: once, instead of one allocation per work item).  Results do not depend on
#: it.
IMPLICIT_CHUNKS = 2

#: The CPU value checks of the Sinkhorn operator (X on every call, R and
#: grad_R after a suspect backward): up to this many entries with NumPy's
#: min and max (finite extremes: every entry finite; exact counts only
#: otherwise), above it with the parallel counting kernel
#: (``numbaot.cpu.implicit.count_invalid_kernel``), which a first call then
#: compiles (0.9 s on 2 cores).  Measured 2026-11-29 (Zen 4, 2 threads), µs
#: per check, NumPy / kernel: 1.62 / 2.00 at 64 entries, 2.12 / 2.24 at
#: 4096, 3.66 / 2.72 at 16384, 8.79 / 4.74 at 65536: up to 16 384 entries
#: (64 matrices of 16 x 16) a microsecond at most for 0.9 s less of a
#: first call.
IMPLICIT_CHECK_NUMPY_MAX = 2 ** 14

#: CUDA: matrices with n >= this (and n <= 64) run one warp per matrix (lane i
#: holds row/column i, and i + 32, in registers; mat-vecs broadcast the vector
#: with warp shuffles); smaller n (and n > 64) run one thread per matrix
#: (vectors in a batch-minor global scratch array, coalesced across threads).
#: The unrolled backward always runs one thread per matrix.
CUDA_IMPLICIT_WARP_MIN_N = 8

#: CUDA: warps per block of the one-warp-per-matrix kernels (warps never
#: synchronise with each other: no shared memory, no block barrier).
CUDA_IMPLICIT_WARPS_PER_BLOCK = 4

#: CUDA: threads per block of the one-thread-per-matrix kernels.
CUDA_IMPLICIT_THREADS = 128

#: CUDA: at most this many blocks in the grid-stride value checks
#: (``numbaot.cuda.implicit.count_invalid``): enough to fill the device,
#: few enough that each thread loops over many entries and the one atomic
#: per thread stays cheap.  (``numbaot.cuda._reduce.finite_absmax``, the
#: finiteness and max|M| scan of a device cost matrix, caps its grid here too.)
CUDA_CHECK_MAX_BLOCKS = 1024

#: CUDA: the largest block of the point-cloud gradient kernel
#: (``numbaot.cuda.empirical.lazy_grad_rows``): the size of its shared weight
#: tile, one slot per thread (1024 is the hardware's limit of threads per
#: block); CUDA_THREADS must not exceed it there.  Read when the module is
#: imported (a compile-time array size), not at launch time.
CUDA_MAX_BLOCK_THREADS = 1024

# --------------------------------------------------------------------------
# Discounted cumulative sums (numbaot.scan)
# --------------------------------------------------------------------------
#: CPU: scan positions per chunk when a row is split for the parallel
#: (reduce, then scan) path; a task scans four consecutive chunks in lockstep.
#: Only the shape decides the split, so results do not depend on the thread
#: count.  16384 (128 KiB of float64 per chunk) measured best at N = 10^7
#: with two threads (4096: 25 % slower there, though 15 % faster on one core).
SCAN_CHUNK = 16384

#: CPU: rows are split into chunks only when the batch has fewer rows than
#: this (with more rows, one task per row keeps every core busy).
SCAN_SPLIT_MAX_ROWS = 64

#: CPU: the least work (entries of the (batch, N) input) worth one thread: a
#: call with less work per thread runs on fewer threads, through
#: ``_dispatch.threads_at_most``; below this size, unsplit rows run on the
#: calling thread without a parallel region (``cpu.scan.scan_rows_serial``).
#: Waking a sleeping worker costs 0.1-10 ms on a shared VM
#: (docs/performance-notes.md), and a descheduled one stalls the whole
#: parallel region, while 2^18 float64 entries take about 0.1 ms on one core
#: (the (8192, 16) batch: 51 us on one thread, 32 us on two with idle cores).
#: Results do not depend on it.
SCAN_MIN_THREAD_WORK = 2**18

#: CPU: block length of the vectorised chunk reduction
#: (``numbaot.cpu.scan._poly``, ``_PB``): blocks of this many entries are
#: reduced by dot products with the powers g^0 .. g^(SCAN_POLY_BLOCK - 1) and
#: combined by one step per block (at most n / SCAN_POLY_BLOCK roundings in
#: the block weight).  No measurement is recorded for the value.
SCAN_POLY_BLOCK = 256

#: CUDA: threads per block of the block-scan kernels (a power of two >= 32).
CUDA_SCAN_THREADS = 256

#: CUDA: consecutive scan positions per thread in the block-scan kernels; a
#: block scans a tile of CUDA_SCAN_THREADS * CUDA_SCAN_ITEMS positions.
CUDA_SCAN_ITEMS = 8

#: CUDA: rows of at most this length run one thread per row (many short rows,
#: e.g. thousands of environments x tens of steps); longer rows use the
#: three-launch block scan.
CUDA_SCAN_ROW_MAX_N = 64

#: CUDA: threads per block of the one-thread-per-row and elementwise kernels.
CUDA_SCAN_ROW_THREADS = 128

# --------------------------------------------------------------------------
# Entropic partial OT (numbaot.partial)
# --------------------------------------------------------------------------
#: Log-domain partial solver (``numbaot.cpu.partial.partial_log_run``): a
#: column sum of POT's K1 computed in the exponential domain below this is
#: treated as underflowed, and that iteration's column logsumexps are
#: recomputed by the max-shifted ``numbaot.cpu.sinkhorn.log_col_lse`` pass.
#: Above it, every term lost to underflow (< 1e-308 each) is far below the
#: sum's rounding.
PARTIAL_SUM_FLOOR = 1e-200

# --------------------------------------------------------------------------
# Stabilized and epsilon-scaling Sinkhorn (numbaot.bregman._stabilized)
# --------------------------------------------------------------------------
#: A problem of at most this many entries (dim_a x dim_b x n_problems)
#: iterates in NumPy on one thread instead of launching the parallel kernels
#: of ``numbaot.cpu.sinkhorn`` at every iteration (POT's host loop runs
#: around each pass, so the launches and their thread wake-ups dominate
#: small problems).  Measured on the 2-core development box (best of 300,
#: one iteration's matrix work, NumPy ``a / (v @ K.T)``, ``u @ K`` against
#: the parallel ``knopp_fused_pass``): 3.6 / 10.1 us at 64 x 64, 14.3 / 26.3
#: us at 256 x 256, 54.3 / 44.5 us at 512 x 512, 402 / 257 us at 1024 x 1024;
#: the crossover lies near 400 x 400.  On a loaded machine the parallel
#: launches cost far more (a 6 x 5 problem took seconds), whence the bound
#: at the low end of the crossover.
STABILIZED_SERIAL_MAX_ENTRIES = 1 << 17

# --------------------------------------------------------------------------
# Epsilon scaling (point clouds)
# --------------------------------------------------------------------------
#: Iterations (POT's order: f then g) at each annealing temperature of the
#: epsilon-scaling schedule of the point-cloud solvers
#: (``numbaot._lazy.lazy_anneal``, ``numbaot.solve_sample(method='geomloss*')``),
#: before the iterations at the target reg that run to POT's stopping rule.
#: GeomLoss makes one (symmetric) update per temperature (Feydy 2020, Alg.
#: 3.5).  Measured with benchmarks/bench_eps_scaling.py (see BENCHMARKS.md
#: notes there): at a given ``scaling`` a second iteration per stage costs a
#: full iteration per stage and buys less than a smaller ``scaling`` with one.
EPS_SCALING_STAGE_ITERS = 1

#: ``solve_sample(method='geomloss_multiscale')``: voxel side of the coarse
#: clouds, GeomLoss's default ``cluster_scale`` = diameter / (sqrt(D)
#: MULTISCALE_CLUSTERS ** (1 / D)) (about this many voxels in the bounding box
#: of the data).  On bench_eps_scaling.py's clouds (10^4 points in 3-D; side
#: 0.079 by this rule) a prototype of the scheme with fixed sides reached an
#: error of 2e-4 in 0.21-0.33 s with side 0.1, 0.23-0.48 s with 0.2 and
#: 0.36-0.67 s with 0.05 (eps 0.05 and 0.01, scaling 0.25-0.7, 2026-11-28);
#: the rule's side, BENCHMARKS.md: 0.23-0.30 s.
MULTISCALE_CLUSTERS = 2000

#: Kernel truncation of the multiscale path (``numbaot._lazy.multiscale_anneal``
#: on the points, then the iterations at reg): each cloud is cut into voxels
#: of about this many points (``numbaot._lazy.truncation_clusters``); a
#: half-step skips the pairs of voxels (I, J) whose terms w_j + c cost_ij are
#: all provably below the row's logsumexp minus tau, tau = log(m /
#: LAZY_TRUNCATION_TOL) (bounds from the voxels' centres and radii and from
#: the largest w_j of each voxel, recomputed at every half-step).  The terms
#: skipped then sum to at most LAZY_TRUNCATION_TOL times the row's sum: every
#: truncated logsumexp is within LAZY_TRUNCATION_TOL (absolute, in log units)
#: of the untruncated one, and so is each log-scaling of a half-step from the
#: same input.  1e-10 keeps the stopping test (POT's L1 row error, whose
#: perturbation is at most this) ten times below POT's default stopThr 1e-9.
LAZY_TRUNCATION_TOL = 1e-10

#: ... voxel size of the truncation in points per voxel (the bounds' slack
#: grows with the voxels' radii, their cost with the number of voxel pairs).
#: One half-step on 2 10^4 points of bench_eps_scaling's clouds (2026-11-28,
#: 2 threads; untruncated 0.31-0.36 s), truncated, at 8 / 16 / 32 / 64
#: points per voxel: 373 / 147 / 117 / 130 ms at eps 2e-3, 199 / 93 / 74 /
#: 73 ms at eps 5e-4 (8: the O(voxels^2) pattern dominates), measured with
#: the voxel-pair bounds alone; with the per-row bounds now, 80 ms and 46 ms
#: at 32 points.
LAZY_TRUNCATION_CLUSTER_POINTS = 32

#: ... and a half-step whose pattern keeps more than this fraction of the
#: n m pairs runs the untruncated kernel instead (its SIMD blocks are longer
#: and it needs no gather of the potentials; at large eps nothing is skipped).
LAZY_TRUNCATION_MAX_KEPT = 0.6

#: ... and only problems of at least this many point pairs n m truncate: below
#: it the clustering and the per-half-step pattern cost more than they save
#: (multiscale_anneal plus 10 iterations, bench_eps_scaling's clouds, 2 threads,
#: truncated / untruncated time: 1.7x at 256^2, 1.0-1.2x at 1024^2, 0.73x at
#: 4096^2 and eps 1e-3; 2026-11-28).
LAZY_TRUNCATION_MIN_PAIRS = 1 << 22

#: ``method='geomloss_auto'`` (and ``'geomloss'`` with ``lazy=None``) in
#: ``numbaot.solve_sample``: the dense cost matrix ('geomloss_tensorized') up
#: to this many entries n_samples_a x n_samples_b (64 MiB in float64), costs
#: recomputed on the fly ('geomloss_online') above it.
GEOMLOSS_AUTO_DENSE_MAX_ENTRIES = 1 << 23
