"""CPU kernels of balanced entropic OT (Sinkhorn), mirrored by name in ``numbaot/cuda``.

Conventions shared by every kernel here
----------------------------------------
* ``M`` (or the Gibbs kernel ``Kmat``) has shape (dim_a, dim_b), C order, dtype
  float32 or float64; it is only ever read (but for ``knopp_prepare_chunk``,
  which forms a state's own Kmat, and ``knopp_plan_chunk``, which turns it into
  the plan at its last use).
* Per-problem vectors are stored problem-major, in float64: ``u`` has shape
  (n_hists, dim_a), ``v`` and ``q`` shape (n_hists, dim_b).  A weight array with
  a leading dimension of 1 (``a`` of shape (1, dim_a)) is shared by all problems.
* Rows are split into ``n_chunks`` fixed chunks of ``chunk_rows`` rows
  (``chunk_layout``); each chunk owns a private slice ``Q[c]`` of column
  accumulators, and chunks are merged in chunk order.  The split depends only on
  the problem size, so results are bit-identical for any number of threads.
* Column quantities are accumulated while sweeping rows in memory order: no
  kernel walks down a column with a stride.

Algorithms
----------
Multiplicative (Sinkhorn-Knopp, Cuturi 2013): one iteration is
v <- b / (K^T u), u <- a / (K v).  ``knopp_fused_pass`` reads K once per
iteration: for each row it forms (K v)_i, the new u_i, and adds K_ij u_i into the
chunk's column accumulators, which give K^T u for the next v (and the marginal
error for free).  A blocked solve (above the one-call bound) has one parallel
kernel, ``knopp_pass_at``: it calls a serial chunk kernel at its address once
per thread and merges the chunks' column sums on the calling thread; the chunk
kernels share one signature and do the solve's steps: K and K^T u
(``knopp_prepare_chunk``), the iterations (``knopp_rows_chunk`` for rows that
fit four in L1, else the tiles of ``knopp_chunk``), the plan in place of K
(``knopp_plan_chunk``) and the losses (``knopp_loss_chunk``).

Log domain (Viehmann, arXiv:1907.01729, sec. 4; Peyre & Cuturi 2019, sec. 4.4):
with c = -1/reg, v <- log b - LSE_i(c M_ij + u_i), u <- log a - LSE_j(c M_ij + v_j).
``log_fused_pass`` reads M once per iteration and computes one exponential per
entry.  The row logsumexp is shifted by a certified upper bound taken from the
previous iterate (r_i = log a_i - u_old_i + max_j (v_j - v_old_j)), so no max
pass is needed and nothing can overflow; rows whose scaled sum underflows, and
the first iteration, take the row's exact maximum first (two reads of the row,
from L1 or L2; Viehmann's one-pass online logsumexp did the same work and cost
a compiled helper more).  The row's exponentials E_ij are
kept in a per-thread buffer and reused: P_ij = E_ij * a_i / s_i (the new plan
entry, never above a_i) is added into the chunk's column accumulators, whose
sums q_j give both the marginal error and the next v_j = log b_j - log q_j + v_j.
Columns whose sum underflows are recomputed by the tiled, max-shifted
``log_col_lse`` pass (called by the launcher between runs, so that a solve
that never needs it does not compile it).  The first v is formed by the
same fused pass, run once with every row's weight 1 and the columns shifted
by h_j = c min_i M_ij + max_i u_i (``log_run``'s ``col_first``; NumPy's
column minimum, no kernel of its own to compile); many problems in the
problem-minor layout form it by ``_small.col_lse`` on the calling thread up
to ``_config.LOG_INIT_SERIAL_MAX_ENTRIES``, by ``log_col_lse`` above.

Batches: with many problems sharing M (``*_pm`` kernels) the vectors are
stored problem-minor, (dim, n_hists), and the inner loops run over the
contiguous problem axis.
"""
import math

import numba
import numpy as np
from numba import njit, prange, typeof
from numba.core import types as nbtypes
from numba.extending import overload

from .._config import INNER as _INNER
from .._config import (
    BATCH_MINOR_MIN,
    COL_BLOCK,
    COL_TILE_ROWS,
    EXP_BLOCK,
    JIT_OPTIONS,
    LOG_F32_MAX_SCALE,
    ROW_SUM_FLOOR,
    ROW_TILE,
    ROW_TILE_F32,
    TILE_BYTES,
    UNDERFLOW_RTOL,
)
from .. import _config
from . import _small, chunk_layout, serial_twin
from ._math import fast_exp, fast_exp_f32_ftz, fast_exp_ftz
from ._pointer import NONE as _NONE
from ._pointer import address_for, call_at

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)


from .._config import MERGE_COLS as _MERGE_COLS  # noqa: E402 (see _config)


@njit(**_PAR)
def merge_chunks(Q, active, out):
    """out[k, j] = sum_c Q[c, k, j] for the active k, summed in chunk order
    (deterministic); parallel over (k, block of columns) pairs."""
    n_chunks, K, m = Q.shape
    nb = (m + _MERGE_COLS - 1) // _MERGE_COLS
    for kb in prange(K * nb):
        k = kb // nb
        if not active[k]:
            continue
        j0 = (kb - k * nb) * _MERGE_COLS
        j1 = min(m, j0 + _MERGE_COLS)
        for j in range(j0, j1):
            out[k, j] = Q[0, k, j]
        for c in range(1, n_chunks):
            _axpy(1.0, Q[c], k, out, k, j0, j1 - j0)


# --------------------------------------------------------------------------
# Gibbs kernels, plans and losses
# --------------------------------------------------------------------------
@njit(**_PAR)
def gibbs_kernel(M, c, f, g, out):
    """out[i, j] = exp(c * M[i, j] + f[i] + g[j]) (cast to out.dtype).

    With f = g = 0 this is K = exp(-M / reg); with log-scalings it is the plan.
    """
    n, m = M.shape
    for i in prange(n):
        fi = f[i]
        for j in range(m):
            out[i, j] = fast_exp(c * M[i, j] + fi + g[j])


@njit(**_PAR)
def scaled_plan(Kmat, u, v, out):
    """out[i, j] = u[i] * K[i, j] * v[j]."""
    n, m = Kmat.shape
    for i in prange(n):
        ui = u[i]
        for j in range(m):
            out[i, j] = ui * Kmat[i, j] * v[j]


@njit(**_SER, **_INNER)
def _sum_chunk_parts(part, out):
    """out[k] = sum_c part[c, k], in chunk order (deterministic)."""
    for k in range(part.shape[1]):
        acc = 0.0
        for ch in range(part.shape[0]):
            acc += part[ch, k]
        out[k] = acc


@njit(**_SER, **_INNER)
def loss_rows(M, Kmat, u, v, i0, i1, acc):
    """acc[k] += sum over the rows i0 <= i < i1 of u[k, i] sum_j M[i, j]
    K[i, j] v[k, j], for every problem k: a chunk's share of <plan_k, M>
    (``scaled_loss``, and the blocked solves' loss chunk kernels
    ``knopp_loss_chunk``, ``unbalanced.uot_loss_chunk``)."""
    m = Kmat.shape[1]
    for i in range(i0, i1):
        for k in range(v.shape[0]):
            s = 0.0
            for j in range(m):
                s += M[i, j] * Kmat[i, j] * v[k, j]
            acc[k] += s * u[k, i]


@njit(**_PAR)
def scaled_loss(Kmat, M, u, v, n_chunks, chunk_rows, out):
    """out[k] = sum_ij M[i, j] * u[k, i] * K[i, j] * v[k, j] for each problem k."""
    n = Kmat.shape[0]
    part = np.zeros((n_chunks, v.shape[0]))
    for ch in prange(n_chunks):
        loss_rows(M, Kmat, u, v, np.int64(ch * chunk_rows),
                  np.int64(min(n, (ch + 1) * chunk_rows)), part[ch])
    _sum_chunk_parts(part, out)


@njit(**_PAR)
def gibbs_loss(M, c, f, g, n_chunks, chunk_rows, out):
    """out[k] = sum_ij M[i, j] * exp(c * M[i, j] + f[k, i] + g[k, j])."""
    n, m = M.shape
    K = g.shape[0]
    part = np.zeros((n_chunks, K))
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        for i in range(i0, i1):
            for k in range(K):
                fi = f[k, i]
                if fi == -np.inf:
                    continue
                s = 0.0
                for j in range(m):
                    x = M[i, j]
                    s += x * fast_exp(c * x + fi + g[k, j])
                part[ch, k] += s
    _sum_chunk_parts(part, out)


#: the output kernels on the calling thread (``numbaot.cpu.serial_twin``), for
#: small problems (no parallel region) here and in ``numbaot.cpu.partial``
#: and ``numbaot.cpu.gradients``
gibbs_kernel_serial = serial_twin(gibbs_kernel)
scaled_plan_serial = serial_twin(scaled_plan)
scaled_loss_serial = serial_twin(scaled_loss)
gibbs_loss_serial = serial_twin(gibbs_loss)
#: also where a parallel pass's chunk merge (n_chunks x m additions,
#: n_chunks <= MAX_ROW_CHUNKS) costs less than a parallel region's launch
#: (``log_fused_pass``), and 0.5 s less to compile
merge_chunks_serial = serial_twin(merge_chunks, inner=True)


# --------------------------------------------------------------------------
# Row-segment helpers: they act on A[i, j0:j0+ln] and Y[k, j0:j0+ln] without
# creating views (a view costs an atomic reference-count update on the shared
# array, which two threads then fight over).  The column index is unsigned:
# with a signed, non-constant start Numba keeps its negative-index wrap-around
# in the loop and LLVM does not vectorise it.
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
def _dot(A, i, Y, k, j0, ln):
    """sum_t A[i, j0+t] * Y[k, j0+t], accumulated in the dtype of the products
    (float64 unless A and Y are both float32: float32 lanes)."""
    acc = Y.dtype.type(0)
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        acc += A[i, j] * Y[k, j]
    return acc


@njit(**_SER, **_INNER)
def _axpy(alpha, A, i, Y, k, j0, ln):
    """Y[k, j0+t] += alpha * A[i, j0+t]"""
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        Y[k, j] += A[i, j] * alpha


@njit(**_SER, **_INNER)
def _dot4(A, i, Y, k, j0, ln, out, o):
    """out[o + r] += sum_t A[i + r, j0+t] * Y[k, j0+t] for r < 4: four rows
    share each load of Y (register blocking); partial sums in the products'
    dtype, added into ``out``."""
    z = Y.dtype.type(0)
    a0 = z
    a1 = z
    a2 = z
    a3 = z
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        y = Y[k, j]
        a0 += A[i, j] * y
        a1 += A[i + 1, j] * y
        a2 += A[i + 2, j] * y
        a3 += A[i + 3, j] * y
    out[o] += a0
    out[o + 1] += a1
    out[o + 2] += a2
    out[o + 3] += a3


@njit(**_SER, **_INNER)
def _axpy4(w, o, A, i, Y, k, j0, ln, store):
    """Y[k, j0+t] (+)= sum_{r<4} w[o + r] * A[i + r, j0+t]: one load and one
    store of Y for four rows; with ``store`` Y's old values are overwritten."""
    base = np.uint64(j0)
    w0 = w[o]
    w1 = w[o + 1]
    w2 = w[o + 2]
    w3 = w[o + 3]
    if store:
        for t in range(ln):
            j = base + np.uint64(t)
            Y[k, j] = A[i, j] * w0 + A[i + 1, j] * w1 + A[i + 2, j] * w2 + A[i + 3, j] * w3
    else:
        for t in range(ln):
            j = base + np.uint64(t)
            Y[k, j] += A[i, j] * w0 + A[i + 1, j] * w1 + A[i + 2, j] * w2 + A[i + 3, j] * w3


@njit(**_SER, **_INNER)
def dot8(A, i, Y, k, j0, ln, out, o):
    """``_dot4`` for eight rows (eight accumulators, one load of Y)."""
    z = Y.dtype.type(0)
    a0 = z
    a1 = z
    a2 = z
    a3 = z
    a4 = z
    a5 = z
    a6 = z
    a7 = z
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        y = Y[k, j]
        a0 += A[i, j] * y
        a1 += A[i + 1, j] * y
        a2 += A[i + 2, j] * y
        a3 += A[i + 3, j] * y
        a4 += A[i + 4, j] * y
        a5 += A[i + 5, j] * y
        a6 += A[i + 6, j] * y
        a7 += A[i + 7, j] * y
    out[o] += a0
    out[o + 1] += a1
    out[o + 2] += a2
    out[o + 3] += a3
    out[o + 4] += a4
    out[o + 5] += a5
    out[o + 6] += a6
    out[o + 7] += a7


@njit(**_SER, **_INNER)
def axpy8(w, o, A, i, Y, k, j0, ln, store):
    """``_axpy4`` for eight rows."""
    base = np.uint64(j0)
    w0 = w[o]
    w1 = w[o + 1]
    w2 = w[o + 2]
    w3 = w[o + 3]
    w4 = w[o + 4]
    w5 = w[o + 5]
    w6 = w[o + 6]
    w7 = w[o + 7]
    if store:
        for t in range(ln):
            j = base + np.uint64(t)
            Y[k, j] = ((A[i, j] * w0 + A[i + 1, j] * w1 + A[i + 2, j] * w2 + A[i + 3, j] * w3)
                       + (A[i + 4, j] * w4 + A[i + 5, j] * w5 + A[i + 6, j] * w6
                          + A[i + 7, j] * w7))
    else:
        for t in range(ln):
            j = base + np.uint64(t)
            Y[k, j] += ((A[i, j] * w0 + A[i + 1, j] * w1 + A[i + 2, j] * w2 + A[i + 3, j] * w3)
                        + (A[i + 4, j] * w4 + A[i + 5, j] * w5 + A[i + 6, j] * w6
                           + A[i + 7, j] * w7))


@njit(**_SER, **_INNER)
def dot_rows(A, i, nr, Y, k, j0, ln, out):
    """out[r] += sum_t A[i + r, j0+t] * Y[k, j0+t] for r < nr, rows in
    register-blocked groups of 8, then 4, then one.  With A and Y float32
    (the unbalanced pass's float32 lanes) products and the block's partial
    sums are float32, added into ``out`` (float64)."""
    # int64, not the literal 0: Numba would first type (and compile) the
    # helpers for the offset Literal[int](0), then again for int64
    r = np.int64(0)
    while r + 8 <= nr:
        dot8(A, i + r, Y, k, j0, ln, out, r)
        r += 8
    while r + 4 <= nr:
        _dot4(A, i + r, Y, k, j0, ln, out, r)
        r += 4
    while r < nr:
        out[r] += _dot(A, i + r, Y, k, j0, ln)
        r += 1


@njit(**_SER, **_INNER)
def axpy_rows(w, A, i, nr, Y, k, j0, ln, first=False):
    """Y[k, j0+t] += sum_{r<nr} w[r] * A[i + r, j0+t], rows in groups of 8, 4, 1;
    with ``first`` the first group stores (Y's old values are ignored: no
    zeroing pass before a chunk's first tile)."""
    r = np.int64(0)  # not the literal 0 (see dot_rows)
    store = first
    while r + 8 <= nr:
        axpy8(w, r, A, i + r, Y, k, j0, ln, store)
        store = False
        r += 8
    while r + 4 <= nr:
        _axpy4(w, r, A, i + r, Y, k, j0, ln, store)
        store = False
        r += 4
    while r < nr:
        if store:
            _axpy1_store(w[r], A, i + r, Y, k, j0, ln)
            store = False
        else:
            _axpy(w[r], A, i + r, Y, k, j0, ln)
        r += 1


@njit(**_SER, **_INNER)
def _axpy1_store(alpha, A, i, Y, k, j0, ln):
    """Y[k, j0+t] = alpha * A[i, j0+t]"""
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        Y[k, j] = A[i, j] * alpha


@njit(**_SER, **_INNER)
def _exp_store_sum(M, i, c, V, k, sh, E, r, j0, ln):
    """E[r, j] = exp(c M[i, j] + V[k, j] - sh) for j in [j0, j0+ln); returns their sum."""
    acc = 0.0
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        e = fast_exp_ftz(c * M[i, j] + V[k, j] - sh)
        E[r, j] = e
        acc += e
    return acc


@njit(**_SER, **_INNER)
def _exp_store_sum_f32(M, i, c, V32, k, sh, S32, E, r, j0, ln):
    """``_exp_store_sum`` in float32 lanes (float32 M, ``V32`` a float32 copy
    of V): exp(c M[i, j] + (V32[k, j] - sh)) with the argument and the
    exponential in float32 (eight lanes of AVX2 where float64 has four)
    into the scratch ``S32`` (>= ln entries, L1), then a second loop stores
    them in E (float64) and sums them: a float64 store or sum in the first
    loop makes LLVM vectorise it four lanes wide, no faster than float64."""
    c32 = np.float32(c)
    sh32 = np.float32(sh)
    base = np.uint64(j0)
    for t in range(ln):
        j = base + np.uint64(t)
        S32[t] = fast_exp_f32_ftz(c32 * M[i, j] + (V32[k, j] - sh32))
    acc = 0.0
    for t in range(ln):
        e = np.float64(S32[t])
        E[r, base + np.uint64(t)] = e
        acc += e
    return acc


#: the register-blocked axpy of a full tile of float64 rows (``tile_rows``)
_axpy_tile = axpy8 if ROW_TILE == 8 else _axpy4


def _lane_copy(M, v, active):
    """(v as float32, max |v| over the finite entries of each active
    problem) for a float32 M, whose row exponentials may then run in float32
    lanes; (an empty array, +inf) for a float64 M (float64 lanes only).
    A function of its own, not inlined into the parallel ``log_run``: Numba
    compiles an ``inline="always"`` overload for its typing and again in the
    caller (float32 first call at 200^2: 3.22 -> 3.04 s of compile CPU,
    runs 0.97-1.00; ``_row_exps`` the same way ran 1.09-1.11x slower)."""
    raise NotImplementedError("called from the kernels only")


@overload(_lane_copy)
def _lane_copy_impl(M, v, active):
    if M.dtype.bitwidth == 64:
        def impl64(M, v, active):
            vmax = np.empty(v.shape[0])  # (a loop: np.full is one more compile)
            for k in range(v.shape[0]):
                vmax[k] = np.inf
            return np.empty((0, 0), np.float32), vmax
        return impl64

    def impl(M, v, active):
        K, m = v.shape
        V32 = np.empty((K, m), np.float32)
        vmax = np.empty(K)
        for k in range(K):
            vmax[k] = np.inf
        for k in range(K):
            if not active[k]:
                continue
            mx = 0.0
            for j in range(m):
                x = v[k, j]
                V32[k, j] = np.float32(x)
                if x > -np.inf:
                    mx = max(mx, abs(x))
            vmax[k] = mx
        return V32, vmax

    return impl


def _row_exps(M, i, c, V, V32, vmax, k, sh, S32, E, r, j0, ln):
    """``_exp_store_sum`` of one block of row i: in float32 lanes
    (``_exp_store_sum_f32``) for a float32 M when |sh| + vmax[k] <=
    ``LOG_F32_MAX_SCALE``, else in float64.  A float64 M compiles the float64
    loop only."""
    raise NotImplementedError("called from the kernels only")


@overload(_row_exps, inline="always")
def _row_exps_impl(M, i, c, V, V32, vmax, k, sh, S32, E, r, j0, ln):
    if M.dtype.bitwidth == 64:
        return lambda M, i, c, V, V32, vmax, k, sh, S32, E, r, j0, ln: _exp_store_sum(
            M, i, c, V, k, sh, E, r, j0, ln)

    def impl(M, i, c, V, V32, vmax, k, sh, S32, E, r, j0, ln):
        if abs(sh) + vmax[k] <= LOG_F32_MAX_SCALE:
            return _exp_store_sum_f32(M, i, c, V32, k, sh, S32, E, r, j0, ln)
        return _exp_store_sum(M, i, c, V, k, sh, E, r, j0, ln)

    return impl


# --------------------------------------------------------------------------
# Multiplicative (Sinkhorn-Knopp) kernels
# --------------------------------------------------------------------------
@njit(**_SER)
def knopp_col_sums(Kmat, u, n_chunks, chunk_rows, Q, q):
    """q[k, j] = sum_i K[i, j] u[k, i]  (K^T u), row-major sweep.

    Serial (the same chunks, merged in the same order: the same bits as a
    parallel sweep): the stabilized solver runs it after each absorption,
    half an iteration's work, and a parallel loop here cost 1.2-1.4 s of
    CPU on the first call's compile (issue 23).  The blocked Knopp solve
    forms K^T u with K instead (``knopp_prepare_chunk``)."""
    n, m = Kmat.shape
    K = u.shape[0]
    for ch in range(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        for i in range(i0, i1):
            for k in range(K):
                uki = u[k, i]
                for j in range(m):
                    Qc[k, j] += Kmat[i, j] * uki
    merge_chunks_serial(Q, np.ones(K, dtype=np.bool_), q)


@njit(**_SER, **_INNER)
def tile_rows(m, itemsize):
    """Rows per tile of a row pass over rows of ``m`` entries of ``itemsize``
    bytes: ROW_TILE_F32 for float32, ROW_TILE for float64, fewer when a tile
    of float64 rows would not fit TILE_BYTES."""
    rows = ROW_TILE_F32 if itemsize == 4 else ROW_TILE
    return max(1, min(rows, TILE_BYTES // (8 * max(m, 1))))


@njit(**_SER, **_INNER)
def knopp_rows_chunk(M, c, Kmat, a, v, ch0, ch1, chunk_rows, Q, u):
    """``knopp_chunk`` for rows of K such that four fit
    ``_config.KNOPP_ROWS_MAX_BYTES`` (``knopp_rows_fit``): each chunk's rows
    swept four at a time by the one-call path's loop (``_small.knopp_rows``:
    whole rows, no column blocks or tile buffers; the four rows stay in L1
    between their row sums and their column sums).  One problem: one sweep
    of the chunk; a problem-major batch: every problem's sweep of each group
    of four rows in turn (the group read from L1 for all but the first).  A
    kernel of its own, so that a problem of this shape compiles none of the
    tile helpers (1.5 s of a first call at 400^2).  ``M`` and ``c`` are
    unused."""
    n = Kmat.shape[0]
    K = v.shape[0]
    shared_a = a.shape[0] == 1
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        if K == 1:
            _small.knopp_rows(Kmat, a, np.int64(0), v, u, Qc, np.int64(0), np.float64(1.0),
                              np.bool_(False), np.int64(i0), np.int64(i1))
            continue
        for g0 in range(i0, i1, 4):
            g1 = min(i1, g0 + 4)
            for k in range(K):
                ka = 0 if shared_a else k
                _small.knopp_rows(Kmat, a, np.int64(ka), v, u, Qc, np.int64(k),
                                  np.float64(1.0), np.bool_(False), np.int64(g0), np.int64(g1))


@njit(**_SER, **_INNER)
def knopp_chunk(M, c, Kmat, a, v, ch0, ch1, chunk_rows, Q, u):
    """The work of ``knopp_fused_pass`` on the chunks of rows [ch0, ch1) (one
    thread's share): u[k, i] = a[k, i] / (K v_k)_i for their rows and
    Q[ch, k, :] = K[rows of ch]^T u_k (new u).  ``M`` and ``c`` are unused
    (the chunk kernels' common signature: ``knopp_prepare_chunk``).

    Rows are processed in tiles of a few rows and columns in blocks of
    COL_BLOCK, so that the block of v (first pass) and of the column
    accumulators (second pass) stays in L1 while a tile's rows stream
    through; the second pass re-reads the tile from L2, never from memory;
    a batch re-reads each tile per problem from L1.  Both passes work on
    groups of ``tile_rows`` (8 or 4) rows, so each load of v and each
    load/store of an accumulator serves the whole group; a chunk's first
    tile stores its accumulators (no zeroing pass).  A narrow K of one
    problem runs ``knopp_rows_chunk`` instead (``knopp_chunk_address``).
    """
    n, m = Kmat.shape
    K = v.shape[0]
    shared_a = a.shape[0] == 1
    R = tile_rows(m, Kmat.itemsize)
    s = np.empty(R)
    w = np.empty(R)
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        if i1 <= i0:
            Qc[:, :] = 0.0
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            for k in range(K):
                s[:] = 0.0
                for j0 in range(0, m, COL_BLOCK):
                    dot_rows(Kmat, t0, nr, v, k, j0, min(m, j0 + COL_BLOCK) - j0, s)
                for r in range(nr):
                    aki = a[0, t0 + r] if shared_a else a[k, t0 + r]
                    w[r] = aki / s[r]
                    u[k, t0 + r] = w[r]
                for j0 in range(0, m, COL_BLOCK):
                    axpy_rows(w, Kmat, t0, nr, Qc, k, j0, min(m, j0 + COL_BLOCK) - j0,
                              t0 == i0)


def knopp_rows_fit(K):
    """Whether the blocked passes sweep K (dim_a, dim_b) four whole rows at a
    time (four rows within ``_config.KNOPP_ROWS_MAX_BYTES``) rather than in
    tiles (``knopp_rows_chunk``: one problem or a problem-major batch;
    ``partial.partial_rows_chunk``: one problem)."""
    return 4 * K.shape[1] * K.itemsize <= _config.KNOPP_ROWS_MAX_BYTES


@njit(**_SER, **_INNER)
def knopp_prepare_chunk(M, c, Kmat, a, v, ch0, ch1, chunk_rows, Q, u):
    """The blocked solve's first pass on the chunks of rows [ch0, ch1): the
    rows of the Gibbs kernel, Kmat[i, j] = exp(c M[i, j]) (in Kmat's dtype,
    as ``gibbs_kernel`` with f = g = 0), and Q[ch, k, :] = K[rows of
    ch]^T u_k from each row just written (still in L1; the order of
    ``knopp_col_sums``: the same bits).  ``a`` and ``v`` are unused.  Run
    through ``knopp_pass_at`` (``knopp_prepare_address``): K and K^T u in
    one parallel pass, and no parallel kernel of their own to compile (0.6 s
    for ``gibbs_kernel``, 0.5 s with its merge for ``knopp_col_sums``, on a
    first call)."""
    n, m = M.shape
    for ch in range(ch0, ch1):
        Qc = Q[ch]
        Qc[:, :] = 0.0
        for i in range(ch * chunk_rows, min(n, (ch + 1) * chunk_rows)):
            for j in range(m):
                Kmat[i, j] = fast_exp(c * M[i, j])
            for k in range(u.shape[0]):
                uki = u[k, i]
                for j in range(m):
                    Qc[k, j] += Kmat[i, j] * uki


def _knopp_chunk_signature(M, Kmat, a, v, Q, u):
    i64 = nbtypes.int64
    return nbtypes.none(typeof(M), nbtypes.float64, typeof(Kmat), typeof(a), typeof(v), i64,
                        i64, i64, typeof(Q), typeof(u))


def knopp_chunk_address(M, Kmat, a, v, Q, u):
    """The ``jit_address`` of the chunk work for these arrays (the first
    argument of ``knopp_pass_at`` and ``knopp_run``): ``knopp_rows_chunk``
    for narrow rows (``knopp_rows_fit``), else
    ``knopp_chunk``; compiled on the first request.  ``M``: the array
    passed in ``knopp_pass_at``'s M slot (unused by these kernels; any
    array, e.g. Kmat, whose type is then part of the signature)."""
    return address_for(knopp_rows_chunk if knopp_rows_fit(Kmat) else knopp_chunk,
                       _knopp_chunk_signature, M, Kmat, a, v, Q, u)


def knopp_prepare_address(M, Kmat, a, v, Q, u):
    """The ``jit_address`` of ``knopp_prepare_chunk`` for these arrays."""
    return address_for(knopp_prepare_chunk, _knopp_chunk_signature, M, Kmat, a, v, Q, u)


@njit(**_SER, **_INNER)
def knopp_plan_chunk(M, c, Kmat, a, v, ch0, ch1, chunk_rows, Q, u):
    """The first problem's plan in place of K on the chunks of rows [ch0,
    ch1): Kmat[i, j] = u[0, i] K[i, j] v[0, j] (``scaled_plan``'s
    expression: the same bits).  Q is left as it is (so the merge of
    ``knopp_pass_at`` writes q = K^T u again); ``M``, ``c`` and ``a`` are
    unused."""
    scale_rows_inplace(Kmat, u, v, np.int64(ch0 * chunk_rows),
                       np.int64(min(Kmat.shape[0], ch1 * chunk_rows)))


@njit(**_SER, **_INNER)
def scale_rows_inplace(Kmat, u, v, i0, i1):
    """Kmat[i, j] = u[0, i] Kmat[i, j] v[0, j] for the rows i0 <= i < i1
    (``scaled_plan``'s expression): the plan chunk kernels of the blocked
    Knopp and unbalanced solves (``knopp_plan_chunk``,
    ``unbalanced.uot_plan_chunk``)."""
    for i in range(i0, i1):
        ui = u[0, i]
        for j in range(Kmat.shape[1]):
            Kmat[i, j] = ui * Kmat[i, j] * v[0, j]


@njit(**_SER, **_INNER)
def knopp_loss_chunk(M, c, Kmat, a, v, ch0, ch1, chunk_rows, Q, u):
    """<plan_k, M> of every problem k over the chunks of rows [ch0, ch1),
    chunk by chunk: Q[ch, k, 0] = sum over the chunk's rows of u[k, i]
    sum_j M[i, j] K[i, j] v[k, j] (``scaled_loss``'s order), Q[ch, k, 1:]
    = 0, so that ``knopp_pass_at``'s merge leaves the losses, summed in
    chunk order, in q[:, 0] (``loss_rows``, as ``scaled_loss``).  ``c`` and
    ``a`` are unused."""
    n = Kmat.shape[0]
    acc = np.empty(v.shape[0])
    for ch in range(ch0, ch1):
        acc[:] = 0.0
        loss_rows(M, Kmat, u, v, np.int64(ch * chunk_rows),
                  np.int64(min(n, (ch + 1) * chunk_rows)), acc)
        Q[ch, :, :] = 0.0
        Q[ch, :, 0] = acc


@njit(**_PAR)
def knopp_pass_at(item_addr, n_workers, M, c, Kmat, a, v, n_chunks, chunk_rows, Q, u, q):
    """``knopp_fused_pass`` with the chunk work (``knopp_chunk`` or
    ``knopp_rows_chunk``) called at its address ``item_addr``
    (``knopp_chunk_address``) on consecutive chunks, once per worker
    (``n_workers``: the number of threads), then the chunks' column sums
    merged in chunk order on the calling thread.  The parallel loop holds an
    indirect call, not the tile loops (``numbaot.cpu._pointer``): a blocked
    problem's first call 1.6-1.8 s shorter than with the loops inside the
    ``prange`` body (7.6 -> 5.9-6.1 s at 400^2), then 5.7 -> 3.3-3.4 s with
    the serial merge and the four-row sweep in a kernel of its own.  The
    serial merge (one parallel region per pass, not two): 0.86-0.91x the
    time per pass at 400^2-512^2, 0.99-1.02x at 1024^2-4000^2.  With the
    address of ``knopp_prepare_chunk`` (``knopp_prepare_address``), the
    solve's first pass: K = exp(c M) and q = K^T u.  ``M`` and ``c`` go to
    the chunk kernel as they are."""
    K = v.shape[0]
    nw = max(1, min(n_chunks, n_workers))
    per = (n_chunks + nw - 1) // nw
    for w in prange(nw):
        call_at(item_addr, _NONE, M, c, Kmat, a, v, np.int64(w * per),
                np.int64(min(n_chunks, (w + 1) * per)), np.int64(chunk_rows), Q, u)
    merge_chunks_serial(Q, np.ones(K, dtype=np.bool_), q)


def _knopp_pass_signature(M, Kmat, a, v, Q, u, q):
    i64 = nbtypes.int64
    return nbtypes.none(i64, i64, typeof(M), nbtypes.float64, typeof(Kmat), typeof(a), typeof(v),
                        i64, i64, typeof(Q), typeof(u), typeof(q))


def knopp_pass_address(M, Kmat, a, v, Q, u, q):
    """The ``jit_address`` of ``knopp_pass_at`` for these arrays (the second
    argument of ``knopp_run``)."""
    return address_for(knopp_pass_at, _knopp_pass_signature, M, Kmat, a, v, Q, u, q)


def knopp_fused_pass(Kmat, a, v, n_chunks, chunk_rows, Q, u, q):
    """One read of K: u[k, i] = a[k, i] / (K v_k)_i and q = K^T u (new u),
    Kmat (dim_a, dim_b) and u, a (n_hists or 1, dim_a), v, q (n_hists,
    dim_b), Q (n_chunks, n_hists, dim_b), C order; rows in fixed chunks of
    ``chunk_rows`` (``chunk_layout``), the chunks on the threads
    (``numba.get_num_threads()``, ``knopp_pass_at``) and their column sums
    merged in chunk order (bit-identical for any thread count).  For the
    host loops (barycenters, the stabilized and distributed solvers);
    ``knopp_run`` calls ``knopp_pass_at`` itself.  (Kmat stands in for
    the unused M.)"""
    knopp_pass_at(knopp_chunk_address(Kmat, Kmat, a, v, Q, u), numba.get_num_threads(), Kmat,
                  np.float64(1.0), Kmat, a, v, n_chunks, chunk_rows, Q, u, q)


@njit(**_PAR)
def knopp_col_sums_pm(Kmat, u, n_chunks, chunk_rows, Q, q):
    """Problem-minor twin of ``knopp_col_sums``: u (dim_a, n_hists),
    q (dim_b, n_hists), Q (n_chunks, dim_b, n_hists); q[j, :] = sum_i K_ij u[i, :]."""
    n, m = Kmat.shape
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        K = u.shape[1]
        for i in range(i0, i1):
            for j in range(m):
                kij = Kmat[i, j]
                for k in range(K):
                    Qc[j, k] += kij * u[i, k]
    merge_chunks(Q, np.ones(m, dtype=np.bool_), q)


@njit(**_PAR, **_INNER)
def knopp_fused_pass_pm(Kmat, a, v, n_chunks, chunk_rows, Q, u, q):
    """Problem-minor twin of ``knopp_fused_pass`` for many problems sharing K.

    Layouts: a (dim_a, 1 or n_hists), v, q (dim_b, n_hists), u (dim_a, n_hists),
    Q (n_chunks, dim_b, n_hists).  Each K_ij is loaded once per pass and
    applied to all problems at once (loops over the contiguous problem axis,
    no horizontal reductions), four rows at a time so that a row of v and of
    the accumulators is loaded once per four rows: (K v)_i for all problems,
    u_i = a_i / (K v)_i, then Q_j += sum_r K_{i_r j} u_{i_r}.
    """
    n, m = Kmat.shape
    K = v.shape[1]
    shared_a = a.shape[1] == 1
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        S = np.empty((4, K))
        for t0 in range(i0, i1, 4):
            nr = min(i1, t0 + 4) - t0
            # a short last group repeats its last row, with weight 0 in Q
            r1 = t0 + min(1, nr - 1)
            r2 = t0 + min(2, nr - 1)
            r3 = t0 + min(3, nr - 1)
            S[:, :] = 0.0
            for j in range(m):
                k0 = Kmat[t0, j]
                k1 = Kmat[r1, j]
                k2 = Kmat[r2, j]
                k3 = Kmat[r3, j]
                for kk in range(K):
                    vj = v[j, kk]
                    S[0, kk] += k0 * vj
                    S[1, kk] += k1 * vj
                    S[2, kk] += k2 * vj
                    S[3, kk] += k3 * vj
            for r in range(nr):
                for kk in range(K):
                    u[t0 + r, kk] = (a[t0 + r, 0] if shared_a else a[t0 + r, kk]) / S[r, kk]
            w1 = 1.0 if nr > 1 else 0.0
            w2 = 1.0 if nr > 2 else 0.0
            w3 = 1.0 if nr > 3 else 0.0
            for j in range(m):
                k0 = Kmat[t0, j]
                k1 = Kmat[r1, j] * w1
                k2 = Kmat[r2, j] * w2
                k3 = Kmat[r3, j] * w3
                for kk in range(K):
                    Qc[j, kk] += k0 * u[t0, kk] + k1 * u[r1, kk] + k2 * u[r2, kk] + k3 * u[r3, kk]
    merge_chunks(Q, np.ones(m, dtype=np.bool_), q)


@njit(**_SER, **_INNER)
def _all_finite(x):
    for k in range(x.shape[0]):
        for j in range(x.shape[1]):
            if not np.isfinite(x[k, j]):
                return False
    return True


@njit(**_SER, **_INNER)
def _copy2(dst, src):
    """dst[:, :] = src for two arrays of one shape, as loops: an array-to-slice
    assignment makes Numba compile its shape-mismatch message (string
    formatting, ~2.7 s of CPU on the first compile in a process)."""
    for k in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[k, j] = src[k, j]


@njit(**_SER)
def _knopp_step_begin(b, q, u, v, uprev, vprev):
    """Save (u, v) and set v = b / q; True when q (= K^T u) has a zero."""
    _copy2(uprev, u)
    _copy2(vprev, v)
    bad = False
    for k in range(q.shape[0]):
        for j in range(q.shape[1]):
            if q[k, j] == 0.0:
                bad = True
            v[k, j] = b[k, j] / q[k, j]
    return bad


@njit(**_SER, **_INNER)
def _knopp_step_failed(u, v, uprev, vprev, bad):
    """POT's check: a zero in K^T u or a NaN/inf in u, v undoes the step."""
    if bad or not _all_finite(u) or not _all_finite(v):
        _copy2(u, uprev)
        _copy2(v, vprev)
        return True
    return False


@njit(**_SER)
def knopp_run(item_addr, pass_addr, n_workers, M, c, Kmat, a, b, u, v, q, n_chunks, chunk_rows,
              Q, n_steps):
    """Run up to ``n_steps`` Sinkhorn-Knopp iterations in place.

    Arrays are problem-major (n_hists, dim).  On entry q = K^T u.  Each
    iteration: v = b / q; u = a / (K v); q = K^T u (``knopp_pass_at``,
    called at its address ``pass_addr`` = ``knopp_pass_address`` of these
    arrays, with ``item_addr`` = ``knopp_chunk_address``, ``n_workers``
    threads, and M, c passed on to the chunk kernel, which ignores them;
    the run's module then holds an indirect call, not the parallel kernel's
    code to optimise and emit again: ``numbaot.cpu._pointer``).
    As POT, an iteration where K^T u has a zero or u, v get a NaN/inf is
    undone (u, v restored) and the run stops.  Returns
    (steps completed, failed flag); on failure the first value is the index
    of the failing step.
    """
    uprev = np.empty_like(u)
    vprev = np.empty_like(v)
    for s in range(n_steps):
        bad = _knopp_step_begin(b, q, u, v, uprev, vprev)
        call_at(pass_addr, _NONE, item_addr, n_workers, M, c, Kmat, a, v, n_chunks, chunk_rows,
                Q, u, q)
        if _knopp_step_failed(u, v, uprev, vprev, bad):
            return s, True
    return n_steps, False


@njit(**_SER)
def knopp_run_pm(Kmat, a, b, u, v, q, n_chunks, chunk_rows, Q, n_steps):
    """``knopp_run`` for the problem-minor layout (dim, n_hists); a separate
    entry point so that a single problem never compiles the batch kernel."""
    uprev = np.empty_like(u)
    vprev = np.empty_like(v)
    for s in range(n_steps):
        bad = _knopp_step_begin(b, q, u, v, uprev, vprev)
        knopp_fused_pass_pm(Kmat, a, v, n_chunks, chunk_rows, Q, u, q)
        if _knopp_step_failed(u, v, uprev, vprev, bad):
            return s, True
    return n_steps, False


# --------------------------------------------------------------------------
# Log-domain kernels
# --------------------------------------------------------------------------
@njit(**_PAR)
def log_col_lse(M, c, u, n_chunks, chunk_rows, out):
    """out[k, j] = logsumexp_i (c * M[i, j] + u[k, i]), max-shifted per tile.

    Rows are swept in memory order in tiles of COL_TILE_ROWS: a tile's column
    maxima are taken first, the running sums are rescaled when a maximum grows,
    then the tile's exponentials are added (one exp per entry).  Chunk partials
    (max, sum) are merged in chunk order.
    """
    n, m = M.shape
    K = u.shape[0]
    Cm = np.empty((n_chunks, K, m))
    Cs = np.empty((n_chunks, K, m))
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        tmax = np.empty(m)
        for k in range(K):
            cm = Cm[ch, k]
            cs = Cs[ch, k]
            cm[:] = -np.inf
            cs[:] = 0.0
            for t0 in range(i0, i1, COL_TILE_ROWS):
                t1 = min(i1, t0 + COL_TILE_ROWS)
                tmax[:] = -np.inf
                for i in range(t0, t1):
                    uki = u[k, i]
                    for j in range(m):
                        tmax[j] = max(tmax[j], c * M[i, j] + uki)
                for j in range(m):
                    nm = max(cm[j], tmax[j])
                    if nm > cm[j]:
                        if cm[j] > -np.inf:
                            cs[j] *= fast_exp(cm[j] - nm)
                        cm[j] = nm
                for i in range(t0, t1):
                    uki = u[k, i]
                    if uki == -np.inf:
                        continue
                    for j in range(m):
                        sh = cm[j]
                        e = fast_exp(c * M[i, j] + uki - sh)
                        cs[j] += e if sh > -np.inf else 0.0
    # the chunk merge, serial: O(n_chunks K m) against the O(n K m) sweep,
    # and a second parallel loop cost 0.7 s of CPU to compile (issue 23)
    for k in range(K):
        for j in range(m):
            mx = -np.inf
            for ch in range(n_chunks):
                mx = max(mx, Cm[ch, k, j])
            if mx == -np.inf:
                out[k, j] = -np.inf
                continue
            s = 0.0
            for ch in range(n_chunks):
                if Cm[ch, k, j] > -np.inf:
                    s += Cs[ch, k, j] * fast_exp(Cm[ch, k, j] - mx)
            out[k, j] = mx + math.log(s)


@njit(**_SER, **_INNER)
def log_chunk(M, c, loga, v, shift_ok, col_only, dv_max, active, ch0, ch1, chunk_rows, Q, u,
              V32, vmax, P):
    """``log_fused_pass`` on the chunks ch0 .. ch1 - 1 of rows of M (chunk
    ch: rows ch * chunk_rows .., its column sums in Q[ch]; a chunk's result
    does not depend on the others run with it).  Called through its address
    (``log_chunk_address``): the parallel pass then holds an indirect call,
    and this body is compiled once instead of being linked and optimised
    again in the pass's gufunc layers and in ``log_run``
    (``numbaot.cpu._pointer``)."""
    n, m = M.shape
    K = v.shape[0]
    shared_a = loga.shape[0] == 1
    R = tile_rows(m, np.int64(8))  # tiles of the float64 row buffer E
    E = np.empty((R, m))
    S32 = np.empty(EXP_BLOCK if M.itemsize == 4 else 0, np.float32)
    s = np.empty(R)
    rr = np.empty(R)
    alpha = np.empty(R)
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            for k in range(K):
                if not active[k]:
                    continue
                ka = 0 if shared_a else k
                s[:] = 0.0
                if shift_ok and not col_only:
                    for r in range(nr):
                        rr[r] = loga[ka, t0 + r] - u[k, t0 + r] + dv_max[k]
                    for j0 in range(0, m, EXP_BLOCK):
                        ln = min(m, j0 + EXP_BLOCK) - j0
                        for r in range(nr):
                            if rr[r] > -np.inf:
                                s[r] += _row_exps(M, t0 + r, c, v, V32, vmax, k, rr[r], S32, E,
                                                  r, j0, ln)
                for r in range(nr):
                    i = t0 + r
                    la = 0.0
                    if col_only:
                        # the first column update (``log_run``): v holds -h
                        # with h_j >= max_i (c M_ij + u_i), so E_ij =
                        # exp(c M_ij + u_i - h_j) <= 1, the row's weight is
                        # 1 and u is not written
                        sh = -u[k, i]
                    else:
                        la = loga[ka, i]
                        if la == -np.inf:
                            u[k, i] = -np.inf
                            alpha[r] = 0.0
                            continue
                        if s[r] > ROW_SUM_FLOOR:
                            u[k, i] = la - rr[r] - math.log(s[r])
                            alpha[r] = math.exp(la) / s[r]
                            continue
                        # no bound (first pass) or the sum underflowed: the
                        # row's exact maximum, then its exponentials (sum >= 1)
                        sh = -np.inf
                        for j in range(m):
                            sh = max(sh, c * M[i, j] + v[k, j])
                    sr = 0.0
                    if -np.inf < sh < np.inf:   # (the exact-shift rows' call too)
                        sr = _exp_store_sum(M, i, c, v, k, sh, E, r, np.int64(0), m)
                    else:
                        E[r, :] = 0.0
                    if col_only:
                        alpha[r] = 1.0 if sh < np.inf else 0.0
                        if P.shape[0] > 0:   # the plan's row (``log_plan``)
                            for j in range(m):
                                P[i, j] = E[r, j]
                    else:
                        u[k, i] = la - sh - math.log(sr)
                        alpha[r] = math.exp(la) / sr
                if P.shape[0] > 0:
                    continue   # (the plan's rows: no column sums)
                # rows of empty bins (alpha = 0) hold stale exponentials: zero them
                for r in range(nr):
                    if alpha[r] == 0.0:
                        E[r, :] = 0.0
                # Qc[k] += alpha^T E: groups of ROW_TILE rows (a tile's
                # rows, unless it is a chunk's last), then row by row
                for j0 in range(0, m, COL_BLOCK):
                    ln = min(m, j0 + COL_BLOCK) - j0
                    r = np.int64(0)
                    while r + ROW_TILE <= nr:
                        _axpy_tile(alpha, r, E, r, Qc, k, j0, ln, np.bool_(False))
                        r += ROW_TILE
                    while r < nr:
                        _axpy(alpha[r], E, r, Qc, k, j0, ln)
                        r += 1


_V32_TYPE = nbtypes.Array(nbtypes.float32, 2, "C")
_VEC_TYPE = nbtypes.Array(nbtypes.float64, 1, "C")


def _log_chunk_signature(M, loga, v, active, Q, u):
    return nbtypes.none(typeof(M), nbtypes.float64, typeof(loga), typeof(v), nbtypes.boolean,
                        nbtypes.boolean, _VEC_TYPE, typeof(active), nbtypes.int64, nbtypes.int64,
                        nbtypes.int64,
                        typeof(Q), typeof(u), _V32_TYPE, _VEC_TYPE,
                        nbtypes.Array(typeof(M).dtype, 2, "C"))


def log_chunk_address(M, loga, v, active, Q, u):
    """The ``jit_address`` of ``log_chunk`` for these arrays (the first
    argument of ``log_fused_pass`` and ``log_run``; dv_max: float64 (K,),
    C-contiguous), compiled on the first request."""
    return address_for(log_chunk, _log_chunk_signature, M, loga, v, active, Q, u)


@njit(**_PAR, inline="always")
def log_fused_pass(item_addr, n_workers, M, c, loga, v, shift_ok, dv_max, active, n_chunks,
                   chunk_rows, Q, u, q, P, lanes32=True, col_only=False):
    """One read of M for all active problems k:

    u[k, i] = loga[k, i] - logsumexp_j (c M_ij + v[k, j])     (row half-step)
    q[k, j] = sum_i exp(c M_ij + u[k, i] + v[k, j])            (new column sums)

    Row logsumexp: when ``shift_ok``, u holds on entry the previous row
    potentials u_old (computed from v_old) and dv_max[k] = max_j (v - v_old),
    so r_i = loga_i - u_old_i + dv_max is a certified upper bound of the new
    row logsumexp: exp(c M_ij + v_j - r_i) <= 1 cannot overflow and one pass
    with one exponential per entry suffices.  Rows whose sum underflows
    (s < ROW_SUM_FLOOR), and every row when not ``shift_ok``, are shifted
    by their exact maximum (a max sweep first).  The exponentials of a tile of
    rows are kept in a per-thread buffer (L2) and reused for q:
    P_ij = E_ij * a_i / s_i <= a_i.  Tiles of rows x blocks of COL_BLOCK
    columns keep the blocks of v and of the accumulators in L1.

    float32 M with ``lanes32``: a row's exponentials run in float32 lanes
    (``_row_exps``) when |r_i| + max_j |v_j| <= ``LOG_F32_MAX_SCALE`` (the
    argument's float32 error then stays below 2.3e-5 absolute); sums and
    accumulators stay float64.  The solver turns them off once the marginal
    error falls to ``LOG_F32_SWITCH_ERR`` (``log_errors``), and never uses
    them in a distributed solve (``_log_steps_reduced``).

    ``col_only``: the first column update instead, from the initial u:
    v holds -h with h_j >= max_i (c M_ij + u_i) (``log_run``), every row
    has weight 1 and u is not written, so that q_j = sum_i exp(c M_ij +
    u_i - h_j), in [1, dim_a] when h is the exact maximum.  With v the
    final log_v and P of M's shape (not (0, 0)), the exponentials are the
    plan exp(c M_ij + u_i + v_j), stored in P (``log_plan``), and no column
    sums are formed (q is all zeros).

    ``item_addr``: ``log_chunk_address`` of these arrays; ``log_chunk``
    there runs the chunks of rows in
    ``n_workers`` calls (the number of threads: ``numba.get_num_threads()``
    in a kernel would make it uncacheable, a dynamic global); the chunks'
    column sums are then merged on the calling thread (at most
    MAX_ROW_CHUNKS x m additions: less than a second parallel region's
    launch).  Inlined into ``log_run`` (Numba's ``inline="always"``), so
    that the run, itself parallel, compiles one parallel loop and no
    separate pass: 0.3 s less of a first call.
    """
    K = v.shape[0]
    V32, vmax = _lane_copy(M, v, active)
    if not lanes32:
        for k in range(K):
            vmax[k] = np.inf
    # one call per thread, on consecutive chunks (the split prange makes)
    nw = max(1, min(n_chunks, n_workers))
    per = (n_chunks + nw - 1) // nw
    for w in prange(nw):
        call_at(item_addr, _NONE, M, np.float64(c), loga, v, np.bool_(shift_ok),
                np.bool_(col_only), dv_max, active, np.int64(w * per),
                np.int64(min(n_chunks, (w + 1) * per)), np.int64(chunk_rows), Q, u, V32, vmax, P)
    merge_chunks_serial(Q, active, q)


@njit(**_PAR, **_INNER)
def log_fused_pass_pm(M, c, loga, v, shift_ok, dv_max, active, n_chunks, chunk_rows, Q, u, q):
    """Problem-minor twin of ``log_fused_pass`` for many problems sharing M.

    Layouts: loga (dim_a, 1 or n_hists), v, q (dim_b, n_hists), u (dim_a, n_hists),
    Q (n_chunks, dim_b, n_hists).  Same mathematics and the same certified
    shift; each M_ij is loaded once per pass and the loops over the contiguous
    problem axis vectorise with no horizontal reductions.  A row where the
    shift is not available, or where a problem's sum underflows, is redone for
    all its problems with an exact max-shifted two-pass logsumexp (the running
    maxima are elementwise over problems).  Inactive problems are computed
    along (the loops stay branch-free) but neither u nor q is written for them.
    """
    n, m = M.shape
    K = v.shape[1]
    shared_a = loga.shape[1] == 1
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        E = np.empty((m, K))
        s = np.empty(K)
        rr = np.empty(K)
        alpha = np.empty(K)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        for i in range(i0, i1):
            exact = not shift_ok
            for k in range(K):
                la = loga[i, 0] if shared_a else loga[i, k]
                # la = -inf (empty bin): shift +inf makes every E_ij = 0
                rr[k] = la - u[i, k] + dv_max[k] if la > -np.inf else np.inf
            if not exact:
                s[:] = 0.0
                for j in range(m):
                    cm = c * M[i, j]
                    for k in range(K):
                        e = fast_exp_ftz(cm + v[j, k] - rr[k])
                        E[j, k] = e
                        s[k] += e
                for k in range(K):
                    if active[k] and rr[k] < np.inf and not s[k] > ROW_SUM_FLOOR:
                        exact = True
            if exact:
                rr[:] = -np.inf
                for j in range(m):
                    cm = c * M[i, j]
                    for k in range(K):
                        rr[k] = max(rr[k], cm + v[j, k])
                s[:] = 0.0
                for j in range(m):
                    cm = c * M[i, j]
                    for k in range(K):
                        e = fast_exp_ftz(cm + v[j, k] - rr[k])
                        E[j, k] = e
                        s[k] += e
            for k in range(K):
                la = loga[i, 0] if shared_a else loga[i, k]
                if not active[k]:
                    alpha[k] = 0.0
                elif la == -np.inf:
                    u[i, k] = -np.inf
                    alpha[k] = 0.0
                else:
                    u[i, k] = la - rr[k] - math.log(s[k])
                    alpha[k] = math.exp(la) / s[k]
            for j in range(m):
                for k in range(K):
                    Qc[j, k] += E[j, k] * alpha[k]
    merge_chunks(Q, np.ones(m, dtype=np.bool_), q)


@njit(**_SER, inline="always")
def _log_step_begin(V, VN, active, dv_max):
    """v = vnext for the active problems; dv_max[k] = max_j (vnext - v)."""
    K, m = V.shape
    for k in range(K):
        if not active[k]:
            continue
        d = -np.inf
        for j in range(m):
            if VN[k, j] > -np.inf:
                d = max(d, VN[k, j] - V[k, j])
            V[k, j] = VN[k, j]
        dv_max[k] = d


@njit(**_SER, inline="always")
def _log_step_end(LB, BB, QQ, V, VN, active, tiny):
    """vnext = log b - log q + v for the active problems; returns True when a
    column sum underflowed (q <= tiny * b), left for ``_log_redo_columns``."""
    K, m = V.shape
    redo = False
    for k in range(K):
        if not active[k]:
            continue
        for j in range(m):
            if LB[k, j] == -np.inf:
                VN[k, j] = -np.inf
            elif QQ[k, j] > tiny * BB[k, j]:
                VN[k, j] = LB[k, j] - math.log(QQ[k, j]) + V[k, j]
            else:
                redo = True
    return redo


@njit(**_SER)
def _log_redo_columns(M, c, U, LB, BB, QQ, VN, active, n_chunks, chunk_rows, tiny):
    """vnext = log b - LSE_i(c M_ij + u_i) by the safe tiled pass, for the
    underflowed columns.  U is problem-major (n_hists, dim_a), C order."""
    K, m = VN.shape
    lse = np.empty((K, m))
    log_col_lse(M, c, U, n_chunks, chunk_rows, lse)
    for k in range(K):
        if not active[k]:
            continue
        for j in range(m):
            if LB[k, j] > -np.inf and not QQ[k, j] > tiny * BB[k, j]:
                VN[k, j] = LB[k, j] - lse[k, j]


@njit(**_PAR)
def log_run(item_addr, n_workers, M, c, loga, logb, b, u, v, vnext, shift_ok, active, n_chunks,
            chunk_rows, Q, q, n_steps, tiny, lanes32, col_first, P):
    """Run up to ``n_steps`` log-domain Sinkhorn iterations (POT order) in place.

    State on entry: (u, v) after the previous iteration and
    vnext = log b - LSE_i(c M_ij + u_i); ``shift_ok`` says whether u was
    computed from v (true after any pass).  Each iteration sets v = vnext,
    u = loga - LSE_j(c M_ij + v_j), q = column sums of the plan (u, v) and
    vnext = log b - log q + v.  Inactive problems are untouched.  Arrays
    are problem-major (n_hists, dim).  ``lanes32``: float32 lanes for a
    float32 M (``log_fused_pass``); ``item_addr``: ``log_chunk_address``
    of these arrays, ``n_workers``: the number of threads.

    ``col_first``: vnext is not formed yet but holds -h, a column-wise
    upper bound h_j >= max_i (c M_ij + u_i) (``_log_prepare``); a first
    pass (``log_fused_pass`` with ``col_only``, float64 lanes) then forms
    it, vnext = log b - h - log sum_i exp(c M_ij + u_i - h_j), before the
    iterations.  That pass is not counted in the steps.  It also writes the
    plan when P is not (0, 0) (``log_plan``: n_steps = 0, vnext = log_v).

    Returns (steps run, redo).  ``redo``: the last step's column sums
    underflowed somewhere (q <= tiny * b); the run stops there, and the
    caller sets those columns of vnext (``_log_redo_columns``) before it
    runs on.  That safe pass is compiled only when a problem needs it.
    Parallel: the pass's loop over the threads is inlined here (with the
    step helpers) at one call site; allocations here must not be NumPy
    calls that the parallel compiler turns into loops of their own
    (``np.zeros``).
    """
    dv_max = np.empty(v.shape[0])
    first = 1 if col_first else 0
    for s in range(n_steps + first):
        init = s < first
        if not init:
            _log_step_begin(v, vnext, active, dv_max)
        log_fused_pass(item_addr, n_workers, M, c, loga, vnext if init else v, shift_ok, dv_max,
                       active, n_chunks, chunk_rows, Q, u, q, P, lanes32 and not init, init)
        shift_ok = not init
        if _log_step_end(logb, b, q, vnext if init else v, vnext, active, tiny):
            return s + 1 - first, True
    return n_steps, False


@njit(**_SER)
def log_run_pm(M, c, loga, logb, b, u, v, vnext, shift_ok, active, n_chunks,
                 chunk_rows, Q, q, n_steps, tiny):
    """``log_run`` for the problem-minor layout (dim, n_hists); a separate
    entry point so that a single problem never compiles the batch kernel."""
    dv_max = np.zeros(v.shape[1])
    for s in range(n_steps):
        _log_step_begin(v.T, vnext.T, active, dv_max)
        log_fused_pass_pm(M, c, loga, v, shift_ok, dv_max, active, n_chunks,
                          chunk_rows, Q, u, q)
        shift_ok = True
        if _log_step_end(logb.T, b.T, q.T, v.T, vnext.T, active, tiny):
            return s + 1, True
    return n_steps, False


# --------------------------------------------------------------------------
# Greenkhorn (Altschuler et al. 2017), sequential by nature
# --------------------------------------------------------------------------
@njit(**_SER)
def greenkhorn_loop(Kmat, a, b, u, v, G, numItermax, stopThr):
    """Greedy coordinate Sinkhorn, POT's ``greenkhorn`` step for step, in place.

    Returns (last iteration index, converged flag).
    """
    n, m = Kmat.shape
    viol = np.empty(n)
    viol_2 = np.empty(m)
    for i in range(n):
        for j in range(m):
            G[i, j] = u[i] * Kmat[i, j] * v[j]
    for i in range(n):
        s = 0.0
        for j in range(m):
            s += G[i, j]
        viol[i] = s - a[i]
    for j in range(m):
        viol_2[j] = -b[j]
    for i in range(n):
        for j in range(m):
            viol_2[j] += G[i, j]
    ii = 0
    for ii in range(numItermax):
        i_1 = np.argmax(np.abs(viol))
        i_2 = np.argmax(np.abs(viol_2))
        m_viol_1 = abs(viol[i_1])
        m_viol_2 = abs(viol_2[i_2])
        stop_val = max(m_viol_1, m_viol_2)
        if m_viol_1 > m_viol_2:
            old_u = u[i_1]
            s = 0.0
            for j in range(m):
                s += Kmat[i_1, j] * v[j]
            new_u = a[i_1] / s
            s2 = 0.0
            for j in range(m):
                G[i_1, j] = new_u * Kmat[i_1, j] * v[j]
                s2 += new_u * Kmat[i_1, j] * v[j]
            viol[i_1] = s2 - a[i_1]
            for j in range(m):
                viol_2[j] += Kmat[i_1, j] * (new_u - old_u) * v[j]
            u[i_1] = new_u
        else:
            old_v = v[i_2]
            s = 0.0
            for i in range(n):
                s += Kmat[i, i_2] * u[i]
            new_v = b[i_2] / s
            for i in range(n):
                G[i, i_2] = u[i] * Kmat[i, i_2] * new_v
            for i in range(n):
                viol[i] += (-old_v + new_v) * Kmat[i, i_2] * u[i]
            viol_2[i_2] = new_v * s - b[i_2]
            v[i_2] = new_v
        if stop_val <= stopThr:
            return ii, True
    return ii, False


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cuda.sinkhorn
# --------------------------------------------------------------------------
def _transposed(x):
    return np.ascontiguousarray(x.T)


class KnoppState:
    """State of a batched Sinkhorn-Knopp run on the CPU.

    Parameters
    ----------
    M : ndarray (dim_a, dim_b), float32 or float64, C order
        Cost matrix; the Gibbs kernel K = exp(c M) is formed once.
    c : float
        -1 / reg.
    a : ndarray (1 or n_problems, dim_a), float64
        Source weights (one row shared by all problems, or one per problem).
    b : ndarray (n_problems, dim_b), float64
        Target weights.
    u, v : ndarray (n_problems, dim_a), (n_problems, dim_b), float64
        Initial scalings; the state takes ownership.
    reduction : object, optional
        Column-reduction hook for a matrix whose rows are split across
        processes (``numbaot.distributed``): ``col_sum(q)`` sums the column
        accumulators over the processes in place, ``col_sum_flag(q, flag)``
        does the same and returns the sum of the scalar ``flag`` (one
        message), ``agree(x)`` returns the value every process uses for a
        stopping decision.  With a hook the iterations run one by one from
        Python (one reduction per iteration); a single problem only.

    Many problems (n_problems >= ``BATCH_MINOR_MIN``) are iterated in the
    problem-minor layout (dim, n_problems), vectorised over problems.
    """

    def __init__(self, M, c, a, b, u, v, reduction=None):
        dim_a, dim_b = M.shape
        n_problems = u.shape[0]
        self.M, self.c = M, c
        self.reduction = reduction
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, n_problems, dim_b,
                                                      memory_bound=True)
        self.Kmat = np.empty(M.shape, dtype=M.dtype)
        self.small = reduction is None and _is_small(M.shape, n_problems)
        self.pm = reduction is None and n_problems >= BATCH_MINOR_MIN and not self.small
        if self.pm:
            self.u, self.v = _transposed(u), _transposed(v)
            self.a, self.b = _transposed(a), _transposed(b)
            self.Q = np.empty((self.n_chunks, dim_b, n_problems))
            self.q = np.empty((dim_b, n_problems))
        else:
            self.u, self.v, self.a, self.b = u, v, a, b
            self.Q = np.empty((self.n_chunks, n_problems, dim_b))
            self.q = np.empty((n_problems, dim_b))
        # K and K^T u are formed by the first knopp_steps (``_knopp_prepare``)
        # or by the small-problem run, which forms them itself
        self.prepared = False


def _is_small(shape, n_problems, log_domain=False):
    """Whether a problem runs the small-problem path (``numbaot.cpu._small``):
    at most ``_config.SMALL_MAX_ENTRIES`` (and for the log domain
    ``SMALL_MAX_ENTRIES_LOG``) matrix entries times problems (read at call
    time, so that tests can move the thresholds)."""
    limit = _config.SMALL_MAX_ENTRIES
    if log_domain:
        limit = min(limit, _config.SMALL_MAX_ENTRIES_LOG)
    return shape[0] * shape[1] * n_problems <= limit


def _knopp_prepare(st):
    """K = exp(c M) and q = K^T u for the blocked path, once."""
    if st.prepared:
        return
    dim_a, dim_b = st.M.shape
    if st.pm:
        gibbs_kernel(st.M, st.c, np.zeros(dim_a), np.zeros(dim_b), st.Kmat)
        knopp_col_sums_pm(st.Kmat, st.u, st.n_chunks, st.chunk_rows, st.Q, st.q)
    else:
        # K and K^T u in one parallel pass (``knopp_prepare_chunk``)
        knopp_pass_at(knopp_prepare_address(st.M, st.Kmat, st.a, st.v, st.Q, st.u),
                      numba.get_num_threads(), st.M, np.float64(st.c), st.Kmat, st.a, st.v,
                      st.n_chunks, st.chunk_rows, st.Q, st.u, st.q)
        if st.reduction is not None:
            st.reduction.col_sum(st.q)
    st.prepared = True


def _knopp_steps_reduced(st, n_steps):
    """``knopp_run`` one iteration at a time, with the column sums reduced
    across processes after each pass (a process's u is checked by all)."""
    u, v, q = st.u, st.v, st.q
    uprev, vprev = np.empty_like(u), np.empty_like(v)
    for s in range(n_steps):
        bad = _knopp_step_begin(st.b, q, u, v, uprev, vprev)
        knopp_fused_pass(st.Kmat, st.a, v, st.n_chunks, st.chunk_rows, st.Q, u, q)
        bad_u = st.reduction.col_sum_flag(q, 0.0 if np.isfinite(u).all() else 1.0)
        if bad or bad_u != 0.0 or not np.isfinite(v).all():
            u[:, :] = uprev
            v[:, :] = vprev
            return s, True
    return n_steps, False


def knopp_steps(st, n_steps):
    """Run up to ``n_steps`` Sinkhorn-Knopp iterations (v = b / K^T u,
    u = a / K v).  As POT, an iteration that meets a zero in K^T u or a
    NaN/inf in u, v is undone and the run stops.  Returns (steps completed,
    failed flag); on failure the first value is the index of the failing
    step."""
    _knopp_prepare(st)
    if st.reduction is not None:
        return _knopp_steps_reduced(st, n_steps)
    if st.pm:
        return knopp_run_pm(st.Kmat, st.a, st.b, st.u, st.v, st.q, st.n_chunks, st.chunk_rows,
                            st.Q, n_steps)
    return knopp_run(knopp_chunk_address(st.M, st.Kmat, st.a, st.v, st.Q, st.u),
                     knopp_pass_address(st.M, st.Kmat, st.a, st.v, st.Q, st.u, st.q),
                     numba.get_num_threads(), st.M, np.float64(st.c), st.Kmat, st.a, st.b, st.u,
                     st.v, st.q, st.n_chunks, st.chunk_rows, st.Q, n_steps)


def knopp_solve_small(st, numItermax, stopThr):
    """The whole solve (POT's ``sinkhorn_knopp`` loop) in one serial
    compiled call when the state is small (``_config.SMALL_MAX_ENTRIES``,
    ``SMALL_MAX_ITER``) and not yet iterated; else None (the caller then runs
    ``knopp_steps`` / ``knopp_error`` under ``numbaot._loops``).  Returns
    (errors at the checks, float64 (n_checks,); last iteration index;
    status ``RAN_OUT`` / ``CONVERGED`` / ``FAILED`` of ``numbaot.cpu._small``)."""
    if not st.small or st.prepared or numItermax > _config.SMALL_MAX_ITER:
        return None
    errs = np.empty(numItermax // 10 + 1)
    # kernel_ready given (not left to its default): the same signature as
    # the call inside knopp_small_call, one compile
    ii, ne, status = _small.knopp_small_run(st.M, st.c, st.a, st.b, st.u, st.v, numItermax,
                                            stopThr, errs, st.Kmat, st.q, False)
    st.prepared = True
    return errs[:ne], ii, status


def knopp_error(st):
    """2-norm of the column-marginal violation v * K^T u - b, all problems
    together (POT's error of ``sinkhorn_knopp``)."""
    if st.reduction is not None:
        return st.reduction.agree(float(np.linalg.norm(st.v * st.q - st.b)))
    return np.linalg.norm(st.v * st.q - st.b)


def knopp_scalings(st):
    """(u, v) as host arrays (n_problems, dim_a), (n_problems, dim_b), float64."""
    if st.pm:
        return _transposed(st.u), _transposed(st.v)
    return st.u, st.v


def _knopp_blocked_pass(st, plan):
    """``knopp_pass_at`` with the chunk kernel ``knopp_plan_chunk`` (``plan``)
    or ``knopp_loss_chunk`` on the state's problem-major arrays: the blocked
    path's one parallel kernel serves its prepare, plan and loss too (no
    parallel kernel of their own to compile on a first call: ``scaled_plan``
    0.3-0.4 s)."""
    addr = address_for(knopp_plan_chunk if plan else knopp_loss_chunk, _knopp_chunk_signature,
                       st.M, st.Kmat, st.a, st.v, st.Q, st.u)
    knopp_pass_at(addr, numba.get_num_threads(), st.M, np.float64(st.c), st.Kmat, st.a, st.v,
                  st.n_chunks, st.chunk_rows, st.Q, st.u, st.q)


def knopp_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,), float64
    (the plans are not formed)."""
    _knopp_prepare(st)
    if st.small or st.pm:
        u, v = knopp_scalings(st)
        loss = np.empty(u.shape[0])
        kernel = scaled_loss_serial if st.small else scaled_loss
        kernel(st.Kmat, st.M, u, v, st.n_chunks, st.chunk_rows, loss)
        return loss
    _knopp_blocked_pass(st, False)
    st.prepared = False  # q holds the losses: formed again before any use
    return st.q[:, 0].copy()


def knopp_plan(st):
    """The plan diag(u) K diag(v) of the first problem, (dim_a, dim_b), dtype
    of M.  On the blocked path it is formed in place of K (the state's
    last use in a solve; the state takes a fresh K, formed again before any
    later iteration): no second array of n m entries to fault in."""
    _knopp_prepare(st)
    u, v = knopp_scalings(st)
    if st.small or st.pm:
        plan = np.empty(st.Kmat.shape, dtype=st.Kmat.dtype)
        (scaled_plan_serial if st.small else scaled_plan)(st.Kmat, u[0], v[0], plan)
        return plan
    _knopp_blocked_pass(st, True)
    plan = st.Kmat
    st.Kmat = np.empty_like(plan)
    st.prepared = False
    return plan


class LogState:
    """State of a batched log-domain Sinkhorn run on the CPU.

    Parameters
    ----------
    M : ndarray (dim_a, dim_b), float32 or float64, C order
        Cost matrix (never copied).
    c : float
        -1 / reg.
    loga, logb : ndarray (1 or n_problems, dim_a), (n_problems, dim_b), float64
        log of the weights (-inf for zero weights).
    b : ndarray (n_problems, dim_b), float64
        Target weights (for the marginal error).
    u, v : ndarray (n_problems, dim_a), (n_problems, dim_b), float64
        Initial log-scalings; the state takes ownership.
    reduction : object, optional
        As for :class:`KnoppState`, plus ``col_logsumexp(x)``: the
        log-sum-exp of the processes' column values, in place.
    """

    def __init__(self, M, c, loga, logb, b, u, v, reduction=None):
        dim_a, dim_b = M.shape
        n_problems = u.shape[0]
        self.M, self.c = M, c
        self.reduction = reduction
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, n_problems, dim_b)
        self.small = reduction is None and _is_small(M.shape, n_problems, log_domain=True)
        self.pm = reduction is None and n_problems >= BATCH_MINOR_MIN and not self.small
        self.u, self.v, self.loga, self.logb, self.b = u, v, loga, logb, b
        # vnext = log b - LSE_i(c M + u) is formed by the first log_steps
        # (``_log_prepare``) or by the small-problem run, which forms it itself
        self.prepared = False
        self.shift_ok = False
        self.col_first = False   # vnext holds -h until log_run's first pass (``_log_prepare``)
        # float32 lanes for a float32 M (``log_fused_pass``), until
        # ``log_errors`` switches them off; never in a distributed solve,
        # whose float32 plans must equal the single-process small path's
        self.lanes32 = M.dtype == np.float32 and reduction is None
        self.last_err = np.inf
        self.chunk_address = None   # ``_chunk_address``, made on the first blocked step
        self.no_plan = np.empty((0, 0), M.dtype)   # the plan argument of log_run's steps


def _log_prepare(st):
    """The blocked path's state, once: vnext, q, the chunk accumulators, and
    the problem-minor layout for many problems."""
    if st.prepared:
        return
    M, c, u, logb, reduction = st.M, st.c, st.u, st.logb, st.reduction
    n_problems, dim_b = u.shape[0], M.shape[1]
    if st.pm:
        # once per solve: on the calling thread (``_small.col_lse``) up to
        # LOG_INIT_SERIAL_MAX_ENTRIES, so that a first call there does not
        # compile the parallel ``log_col_lse`` (1.2-1.5 s)
        vnext = np.empty((n_problems, dim_b))
        if M.size * n_problems <= _config.LOG_INIT_SERIAL_MAX_ENTRIES:
            _small.col_lse(M, c, u, vnext)
        else:
            log_col_lse(M, c, u, st.n_chunks, st.chunk_rows, vnext)
        vnext = logb - vnext
        vnext[np.isneginf(logb)] = -np.inf
    elif reduction is None:
        # -h, the column-wise bound of c M_ij + u_i that the first
        # ``log_run`` pass turns into vnext (``col_first``): exact for a
        # constant u (POT's u = 0), c < 0 makes c * min the maximum
        umax = np.max(u, axis=1)
        umax[umax == -np.inf] = 0.0  # no row of mass: the run redoes every column
        vnext = -(c * np.minimum.reduce(M, axis=0).astype(np.float64) + umax[:, None])
        st.col_first = True
    else:
        with np.errstate(invalid="ignore"):
            vnext = logb - _reduced_col_lse(M, c, u, st.n_chunks, st.chunk_rows, reduction)
        vnext[np.isneginf(logb)] = -np.inf
    q = np.zeros((n_problems, dim_b))
    if st.pm:
        st.u, st.v, st.vnext, st.q = (_transposed(x) for x in (u, st.v, vnext, q))
        st.loga, st.logb, st.b = (_transposed(x) for x in (st.loga, logb, st.b))
        st.Q = np.empty((st.n_chunks, dim_b, n_problems))
    else:
        st.vnext, st.q = vnext, q
        st.Q = np.empty((st.n_chunks, n_problems, dim_b))
    st.prepared = True


def _reduced_col_lse(M, c, u, n_chunks, chunk_rows, reduction):
    """LSE_i(c M_ij + u_i) over the rows of every process."""
    out = np.empty((u.shape[0], M.shape[1]))
    log_col_lse(M, c, u, n_chunks, chunk_rows, out)
    reduction.col_logsumexp(out)
    return out


def _chunk_address(st, active):
    """The state's ``log_chunk_address``: made on its first step, after
    ``_log_prepare``, whose arrays the solve then updates in place (never
    replaces: ``call_at`` does not check the types it passes).  ``active``
    is a fresh bool (n_problems,) array per call, of one type."""
    addr = st.chunk_address
    if addr is None:
        addr = st.chunk_address = log_chunk_address(st.M, st.loga, st.v, active, st.Q, st.u)
    return addr


def _log_steps_reduced(st, n_steps, active):
    """``log_run`` one iteration at a time, with the column sums (and, where
    they underflowed, the column logsumexps) reduced across processes."""
    dv_max = np.zeros(st.v.shape[0])
    for _ in range(n_steps):
        _log_step_begin(st.v, st.vnext, active, dv_max)
        log_fused_pass(_chunk_address(st, active), numba.get_num_threads(), st.M, st.c,
                       st.loga, st.v, st.shift_ok, dv_max, active, st.n_chunks, st.chunk_rows,
                       st.Q, st.u, st.q, st.no_plan, False)
        st.shift_ok = True
        st.reduction.col_sum(st.q)
        if _log_step_end(st.logb, st.b, st.q, st.v, st.vnext, active, UNDERFLOW_RTOL):
            lse = _reduced_col_lse(st.M, st.c, st.u, st.n_chunks, st.chunk_rows, st.reduction)
            redo = (st.logb > -np.inf) & ~(st.q > UNDERFLOW_RTOL * st.b)
            st.vnext[redo] = (st.logb - lse)[redo]


def log_steps(st, n_steps, active):
    """Run ``n_steps`` log-domain Sinkhorn iterations (POT's order) of the
    problems flagged in ``active`` (bool (n_problems,)); the others are left
    untouched."""
    _log_prepare(st)
    if st.reduction is not None:
        _log_steps_reduced(st, n_steps, active)
        return
    done = 0
    while done < n_steps:
        if st.pm:
            ran, redo = log_run_pm(st.M, st.c, st.loga, st.logb, st.b, st.u, st.v, st.vnext,
                                   st.shift_ok, active, st.n_chunks, st.chunk_rows, st.Q, st.q,
                                   n_steps - done, UNDERFLOW_RTOL)
        else:
            ran, redo = log_run(_chunk_address(st, active), numba.get_num_threads(), st.M,
                                st.c, st.loga, st.logb, st.b, st.u, st.v, st.vnext, st.shift_ok,
                                active, st.n_chunks, st.chunk_rows, st.Q, st.q, n_steps - done,
                                UNDERFLOW_RTOL, st.lanes32, st.col_first, st.no_plan)
            st.col_first = False
        done += ran
        st.shift_ok = st.shift_ok or ran > 0
        if redo:
            if st.pm:
                _log_redo_columns(st.M, st.c, np.ascontiguousarray(st.u.T), st.logb.T, st.b.T,
                                  st.q.T, st.vnext.T, active, st.n_chunks, st.chunk_rows,
                                  UNDERFLOW_RTOL)
            else:
                _log_redo_columns(st.M, st.c, st.u, st.logb, st.b, st.q, st.vnext, active,
                                  st.n_chunks, st.chunk_rows, UNDERFLOW_RTOL)


def log_solve_small(st, numItermax, stopThr):
    """The whole solve (POT's ``sinkhorn_log`` loop, a stopping test per
    problem) in one serial compiled call when the state is small
    (``_config.SMALL_MAX_ENTRIES``, ``SMALL_MAX_ITER``) and not yet
    iterated; else None (the caller then runs ``log_steps`` /
    ``log_errors`` under ``numbaot._loops``).  Returns (errs, n_errs, niter,
    converged): the errors at the checks, float64 (n_problems, >= n_checks),
    the number of checks per problem, int64 (n_problems,), each problem's
    last iteration index, int64 (n_problems,), and whether it met stopThr,
    bool (n_problems,)."""
    if not st.small or st.prepared or numItermax > _config.SMALL_MAX_ITER:
        return None
    P = st.u.shape[0]
    errs = np.empty((P, numItermax // 10 + 1))
    n_errs = np.empty(P, dtype=np.int64)
    niter = np.empty(P, dtype=np.int64)
    converged = np.empty(P, dtype=np.bool_)
    st.q = np.empty((P, st.M.shape[1]))
    _small.log_small_run(st.M, st.c, st.loga, st.logb, st.b, st.u, st.v, st.q, numItermax,
                         stopThr, errs, n_errs, niter, converged)
    st.prepared = True
    return errs, n_errs, niter, converged


def log_errors(st):
    """Each problem's column-marginal violation ||plan^T 1 - b||_2, host
    array (n_problems,)."""
    _log_prepare(st)
    if st.reduction is not None:
        return np.array([st.reduction.agree(float(np.linalg.norm(st.q[0] - st.b[0])))])
    if st.pm:
        return np.linalg.norm(st.q.T - st.b.T, axis=1)
    errs = np.linalg.norm(st.q - st.b, axis=1)
    if st.lanes32:
        # float32 lanes until the error falls to LOG_F32_SWITCH_ERR or stops
        # falling (their rounding puts a floor of about 1e-8 under it), float64
        # lanes after that, so that POT's stopThr (1e-9 by default) is reached
        # as with float64 arithmetic
        e = float(np.max(errs)) if errs.size else 0.0
        if not (e > _config.LOG_F32_SWITCH_ERR and e < 0.9 * st.last_err):
            st.lanes32 = False
        st.last_err = e
    return errs


def log_potentials(st):
    """(log_u, log_v) as host arrays (n_problems, dim_a), (n_problems, dim_b), float64."""
    _log_prepare(st)  # the layout is final (numItermax = 0 ran no step)
    if st.pm:
        return _transposed(st.u), _transposed(st.v)
    return st.u, st.v


def log_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,), float64."""
    u, v = log_potentials(st)
    loss = np.empty(u.shape[0])
    (gibbs_loss_serial if st.small else gibbs_loss)(st.M, st.c, u, v, st.n_chunks,
                                                   st.chunk_rows, loss)
    return loss


def log_plan(st):
    """The plan exp(c M + log_u 1^T + 1 log_v^T) of the first problem,
    (dim_a, dim_b), dtype of M."""
    u, v = log_potentials(st)
    plan = np.empty(st.M.shape, dtype=st.M.dtype)
    if st.small or st.pm or st.reduction is not None:
        (gibbs_kernel_serial if st.small else gibbs_kernel)(st.M, st.c, u[0], v[0], plan)
        return plan
    # one problem's pass of ``log_run`` (the first column update's, with
    # vnext = log_v): the plan's exponentials are that pass's, and a first
    # call compiles no kernel of its own for them (``gibbs_kernel``, 0.3 s)
    active = np.zeros(u.shape[0], dtype=np.bool_)
    active[0] = True
    log_run(_chunk_address(st, active), numba.get_num_threads(), st.M, st.c, st.loga, st.logb,
            st.b, u, v, v.copy(), False, active, st.n_chunks, st.chunk_rows, st.Q,
            np.empty_like(st.q), 0, UNDERFLOW_RTOL, False, True, plan)
    return plan


#: The launcher contract shared with numbaot.cuda.sinkhorn (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("KnoppState", "knopp_steps", "knopp_solve_small", "knopp_error",
             "knopp_scalings", "knopp_loss", "knopp_plan", "LogState", "log_steps",
             "log_solve_small", "log_errors", "log_potentials", "log_loss", "log_plan")
