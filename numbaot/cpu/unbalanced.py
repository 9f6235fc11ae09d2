"""CPU kernels of unbalanced entropic OT and their launchers; the launchers
(``LAUNCHERS``) have the names, signatures and returns of those of
``numbaot/cuda/unbalanced.py``.

Conventions (as ``numbaot.cpu.sinkhorn``)
-----------------------------------------
* ``Kmat`` / ``M`` have shape (dim_a, dim_b), C order, float32 or float64, and
  are only read by the iterations.
* Per-problem vectors are problem-major float64: ``u`` (n_hists, dim_a), ``v``
  and ``q`` (n_hists, dim_b); a weight array with leading dimension 1 is shared.
* Rows are split into fixed chunks (``numbaot.cpu.chunk_layout``); each chunk
  owns a private block ``Q[c]`` of column accumulators, merged in chunk order,
  so results do not depend on the thread count.

Algorithms
----------
Multiplicative (Chizat, Peyre, Schmitzer, Vialard 2018, "Scaling algorithms for
unbalanced optimal transport problems", Algorithm 2 with the KL proximal
operator; POT's ``sinkhorn_knopp_unbalanced``): with fi1 = reg_m1 / (reg_m1 +
reg), fi2 = reg_m2 / (reg_m2 + reg) (1 for an infinite reg_m),

    u <- (a / (K v))^fi1,   v <- (b / (K^T u))^fi2.

``uot_fused_pass`` streams K exactly once per iteration (MAP-UOT, Sun, Hu,
Jiang 2024, adapted to the read-only scaling form): for each tile of rows it
forms (K v)_i, the new u_i, and adds K_ij u_i into the chunk's column
accumulators, which become K^T u for the v update (``uot_col_chunk``, also
through ``uot_pass_at``, which forms v and the convergence error).  A float32 K is processed in
float32 lanes (16 per AVX-512 vector, no conversions): products and partial
sums over a block of columns (for K v) or a group of 8 rows (for K^T u) are
float32 and go into float64 sums; while u, v and the sums are in the ranges
where float32 loses nothing (``_config.UOT_LANE_*``), else in float64 lanes.

Log domain (numbaot extension): with log-kernel -M0/reg + ga_i + gb_j,
log u_i = fi1 (log a_i - ga_i - LSE_j(-M0_ij/reg + gb_j + log v_j)) and the
symmetric update of log v, each logsumexp max-shifted (``uot_log_row_update``
reads M0 row by row; ``log_col_lse`` of ``numbaot.cpu.sinkhorn`` does the
columns in tiles).
"""
import math

import numba
import numpy as np
from numba import njit, prange, typeof
from numba.core import types as nbtypes

from .. import _config
from .._config import INNER as _INNER
from .._config import (
    JIT_OPTIONS,
    ROW_TILE,
    ROW_TILE_F32,
    UOT_LANE_MAX,
    UOT_LANE_MIN,
    UOT_LANE_SUM_MAX,
    UOT_LANE_SUM_MIN,
    UOT_COL_BLOCK,
    UOT_MERGE_COLS,
    UOT_TILE_BYTES,
)
from . import chunk_layout, serial_twin
from ._math import fast_exp, pow_inplace
from ._pointer import NONE as _NONE
from ._pointer import address_for, call_at
from ._small import col_lse, copy_weights, screen_cost
from .sinkhorn import (
    axpy8,
    axpy_rows,
    dot8,
    dot_rows,
    gibbs_loss,
    log_col_lse,
    loss_rows,
    merge_chunks,
    merge_chunks_serial,
    scale_rows_inplace,
)


_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)

#: rows per tile of the small path's pass (``uot_small_run``; a multiple of 4):
#: their ratios are raised to the power fi in one vectorised loop
_SMALL_ROW_TILE = 16

__all__ = [
    # kernels
    "uot_gibbs",
    "uot_chunk",
    "uot_pass_at",
    "uot_fused_pass",
    "uot_col_chunk",
    "uot_rule",
    "uot_run",
    "uot_plan_stats",
    "uot_log_row_update",
    "uot_log_run",
    "uot_log_plan_stats",
    # kernels of small problems (serial, on the calling thread)
    "uot_gibbs_serial",
    "uot_small_run",
    "uot_small_plan",
    "uot_small_loss",
    "uot_small_plan_stats",
    "uot_log_row_update_serial",
    "uot_log_small_run",
    "uot_log_small_loss",
    "uot_log_small_plan_stats",
    "uot_small_call",
    "uot_small_stats",
    "uot_log_small_call",
    "is_small",
    # launchers
    "UotState",
    "uot_steps",
    "uot_scalings",
    "uot_loss",
    "uot_plan",
    "uot_stats",
    "UotLogState",
    "uot_log_steps",
    "uot_log_potentials",
    "uot_log_loss",
    "uot_log_stats",
]

#: The launchers, the same in ``numbaot.cuda.unbalanced``.
LAUNCHERS = ("UotState", "uot_steps", "uot_scalings", "uot_loss", "uot_plan", "uot_stats",
             "UotLogState", "uot_log_steps", "uot_log_potentials", "uot_log_loss",
             "uot_log_stats")


# --------------------------------------------------------------------------
# Gibbs kernel with reference measure
# --------------------------------------------------------------------------
@njit(**_PAR)
def uot_gibbs(M, c, ca, cb, C, use_mat, out):
    """out[i, j] = exp(c M[i, j]) * C[i, j] if use_mat else exp(c M[i, j]) * ca[i] * cb[j].

    ``c = -1/reg``; ``ca``/``cb`` give a rank-one reference measure (a b^T for
    reg_type 'kl', ones for 'entropy'); ``C`` an explicit one.
    """
    n, m = M.shape
    for i in prange(n):
        if use_mat:
            for j in range(m):
                out[i, j] = fast_exp(c * M[i, j]) * C[i, j]
        else:
            cai = ca[i]
            for j in range(m):
                out[i, j] = fast_exp(c * M[i, j]) * cai * cb[j]


# --------------------------------------------------------------------------
# Multiplicative iterations
# --------------------------------------------------------------------------
# The row-segment helpers (``dot_rows``, ``axpy_rows``) are those of the
# balanced pass (``numbaot.cpu.sinkhorn``): with a float32 K and the float32
# lane copy of v, products and the partial sums over one block of columns
# (dot) or over a group of rows (axpy) are float32 (16 lanes per AVX-512
# vector, no conversions), then added into float64 (``out``: row sums, ``Q``:
# column accumulators).


@njit(**_SER, **_INNER)
def _uot_tile_rows(m, itemsize):
    """Rows per tile for rows of ``m`` entries of ``itemsize`` bytes:
    ROW_TILE_F32 for a float32 K, else ROW_TILE (8 or 4); then halved until
    the tile fits UOT_TILE_BYTES."""
    R = ROW_TILE_F32 if itemsize == 4 else ROW_TILE
    while R > 1 and R * m * itemsize > UOT_TILE_BYTES:
        R //= 2
    return R


@njit(**_SER, **_INNER)
def _in_lane_range(x):
    """x can be a float32 lane value without losing relative precision."""
    return x == 0.0 or (x >= UOT_LANE_MIN and x <= UOT_LANE_MAX)


# --------------------------------------------------------------------------
# Multiplicative iterations
# --------------------------------------------------------------------------
@njit(inline="always", **_SER)
def _group_scalings(a, ka, s, x64, w, nr, t0, k, u, fi1, check, du, mu, fin, ok):
    """The new u of a group of ``nr`` rows from t0 of problem k, whose sums
    (K v_k)_i are in ``s``: u = (a[ka] / s)^fi1 (``x64``; also into ``w``, the
    lanes' weights of the column sweep), and the chunk's flags updated and
    returned: (du, mu) = (max |u - u_old|, max(|u|, |u_old|)), ``fin``
    (every u finite), ``ok`` (``check`` off, or every sum and u in the
    float32 lane ranges).  Inlined into ``uot_chunk`` and
    ``uot_rows_chunk`` (per group of rows: no call)."""
    for r in range(nr):
        x64[r] = a[ka, t0 + r] / s[r]
    pow_inplace(x64, nr, fi1)
    for r in range(nr):
        x = x64[r]
        old = u[k, t0 + r]
        u[k, t0 + r] = x
        w[r] = x
        if not np.isfinite(x):
            fin = False
        du = max(du, abs(x - old))
        mu = max(mu, max(abs(x), abs(old)))
        if check and not (s[r] >= UOT_LANE_SUM_MIN and s[r] <= UOT_LANE_SUM_MAX
                          and _in_lane_range(x)):
            ok = False
    return du, mu, fin, ok


@njit(**_SER, **_INNER)
def uot_chunk(M, c, Kmat, a, vl, fi1, ch0, ch1, chunk_rows, Q, u, check, part):
    """The work of ``uot_fused_pass`` on the chunks of rows [ch0, ch1) (one
    thread's share).  ``M`` and ``c`` are unused (the chunk kernels' common
    signature: ``uot_prepare_chunk``)."""
    n, m = Kmat.shape
    K = vl.shape[0]
    shared_a = a.shape[0] == 1
    R = _uot_tile_rows(m, Kmat.itemsize)
    cb = UOT_COL_BLOCK
    s = np.empty(R)
    x64 = np.empty(R)
    w = np.empty(R, dtype=vl.dtype)
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        if i1 <= i0:
            Qc[:, :] = 0.0
        du = 0.0
        mu = 0.0
        fin = True
        ok = True
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            for k in range(K):
                s[:] = 0.0
                for j0 in range(0, m, cb):
                    dot_rows(Kmat, t0, nr, vl, k, j0, min(m, j0 + cb) - j0, s)
                du, mu, fin, ok = _group_scalings(a, 0 if shared_a else k, s, x64, w, nr, t0, k,
                                                  u, fi1, check, du, mu, fin, ok)
                for j0 in range(0, m, cb):
                    ln = min(m, j0 + cb) - j0
                    axpy_rows(w, Kmat, t0, nr, Qc, k, j0, ln, t0 == i0)
        part[ch, 0] = du
        part[ch, 1] = mu
        part[ch, 2] = 1.0 if fin else 0.0
        part[ch, 3] = 1.0 if ok else 0.0


@njit(**_SER, **_INNER)
def uot_rows_chunk(M, c, Kmat, a, vl, fi1, ch0, ch1, chunk_rows, Q, u, check, part):
    """``uot_chunk`` for a float64 K of at most UOT_COL_BLOCK columns whose
    rows fit four in ``_config.KNOPP_ROWS_MAX_BYTES`` (``uot_rows_fit``):
    the same groups of eight rows and the same row kernels (``dot8``,
    ``axpy8`` over whole rows, as the tiles' single column block there),
    the last rows of a chunk by plain loops instead of the tiles' ladder of
    four- and one-row helpers.  A kernel of its own, so that a problem of
    this shape compiles none of the ladder (``dot_rows``, ``axpy_rows``,
    ``_dot4``, ``_axpy4``, ...).  ``M`` and ``c`` are unused."""
    n, m = Kmat.shape
    K = vl.shape[0]
    shared_a = a.shape[0] == 1
    s = np.empty(8)
    x64 = np.empty(8)
    w = np.empty(8)
    zero = np.int64(0)
    mm = np.int64(m)
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        if i1 - i0 < 8:  # no group of eight to store the accumulators
            Qc[:, :] = 0.0
        du = 0.0
        mu = 0.0
        fin = True
        ok = True
        for t0 in range(i0, i1, 8):
            nr = min(i1, t0 + 8) - t0
            for k in range(K):
                s[:] = 0.0
                if nr == 8:
                    dot8(Kmat, np.int64(t0), vl, np.int64(k), zero, mm, s, zero)
                else:
                    for r in range(nr):
                        acc = 0.0
                        for j in range(m):
                            acc += Kmat[t0 + r, j] * vl[k, j]
                        s[r] = acc
                du, mu, fin, ok = _group_scalings(a, 0 if shared_a else k, s, x64, w, nr, t0, k,
                                                  u, fi1, check, du, mu, fin, ok)
                if nr == 8:
                    axpy8(w, zero, Kmat, np.int64(t0), Qc, np.int64(k), zero, mm,
                           np.bool_(t0 == i0))
                else:
                    for r in range(nr):
                        wr = w[r]
                        for j in range(m):
                            Qc[k, j] += Kmat[t0 + r, j] * wr
        part[ch, 0] = du
        part[ch, 1] = mu
        part[ch, 2] = 1.0 if fin else 0.0
        part[ch, 3] = 1.0 if ok else 0.0


def uot_rows_fit(Kmat):
    """Whether the blocked unbalanced pass runs ``uot_rows_chunk`` on K: float64,
    four rows within ``_config.KNOPP_ROWS_MAX_BYTES`` (and so at most
    UOT_COL_BLOCK columns)."""
    return (Kmat.itemsize == 8 and Kmat.shape[1] <= UOT_COL_BLOCK
            and 4 * Kmat.shape[1] * 8 <= _config.KNOPP_ROWS_MAX_BYTES)


@njit(**_SER, **_INNER)
def uot_prepare_chunk(M, c, Kmat, a, vl, fi1, ch0, ch1, chunk_rows, Q, u, check, part):
    """The rows [ch0 chunk_rows, ch1 chunk_rows) of the Gibbs kernel with a
    rank-one reference measure: Kmat[i, j] = exp(c M[i, j]) ca_i cb_j
    (``uot_gibbs``'s expression: the same bits), with ca = u[0] and cb =
    vl[0] (the caller passes them in those slots, as (1, dim) rows).
    ``a``, ``fi1``, ``Q``, ``check`` and ``part`` are unused.  Through
    ``uot_pass_at`` (``UotState``): no parallel kernel of its own to compile
    (``uot_gibbs``, 0.75 s of a first call)."""
    n, m = M.shape
    for i in range(ch0 * chunk_rows, min(n, ch1 * chunk_rows)):
        cai = u[0, i]
        for j in range(m):
            Kmat[i, j] = fast_exp(c * M[i, j]) * cai * vl[0, j]


@njit(**_SER, **_INNER)
def uot_plan_chunk(M, c, Kmat, a, vl, fi1, ch0, ch1, chunk_rows, Q, u, check, part):
    """The first problem's plan in place of K on the rows [ch0 chunk_rows,
    ch1 chunk_rows): Kmat[i, j] = u[0, i] K[i, j] vl[0, j] (``scaled_plan``'s
    expression, with v in the ``vl`` slot: the same bits); the other
    arguments are unused."""
    scale_rows_inplace(Kmat, u, vl, np.int64(ch0 * chunk_rows),
                       np.int64(min(Kmat.shape[0], ch1 * chunk_rows)))


@njit(**_SER, **_INNER)
def uot_loss_chunk(M, c, Kmat, a, vl, fi1, ch0, ch1, chunk_rows, Q, u, check, part):
    """<plan_k, M> of every problem k over the chunks [ch0, ch1), chunk by
    chunk: part[ch, k] = sum over the chunk's rows of u[k, i] sum_j M[i, j]
    K[i, j] v[k, j] (v in the ``vl`` slot, ``part`` of shape (n_chunks,
    n_problems); ``sinkhorn.loss_rows``, as ``scaled_loss``); the other
    arguments are unused."""
    n = Kmat.shape[0]
    for ch in range(ch0, ch1):
        part[ch, :] = 0.0
        loss_rows(M, Kmat, u, vl, np.int64(ch * chunk_rows),
                  np.int64(min(n, (ch + 1) * chunk_rows)), part[ch])


def _uot_chunk_signature(M, Kmat, a, vl, Q, u, part):
    f64, i64 = nbtypes.float64, nbtypes.int64
    return nbtypes.none(typeof(M), f64, typeof(Kmat), typeof(a), typeof(vl), f64, i64, i64, i64,
                        typeof(Q), typeof(u), nbtypes.boolean, typeof(part))


def uot_col_address(M, Kmat, b, vl, Q, v, part):
    """The ``jit_address`` of ``uot_col_chunk`` for these arrays (the b, v
    and flags of the column update in the a, u and part slots: of their
    types)."""
    return address_for(uot_col_chunk, _uot_chunk_signature, M, Kmat, b, vl, Q, v, part)


def uot_chunk_address(M, Kmat, a, vl, Q, u, part):
    """The ``jit_address`` of the chunk work for these arrays (``vl`` in the
    lanes' dtype; ``M``: the array in ``uot_pass_at``'s M slot, unused by
    the pass): ``uot_rows_chunk`` for a float64 K of narrow rows
    (``uot_rows_fit``), else ``uot_chunk``; compiled on the first request."""
    return address_for(uot_rows_chunk if uot_rows_fit(Kmat) else uot_chunk, _uot_chunk_signature,
                       M, Kmat, a, vl, Q, u, part)


@njit(**_PAR)
def uot_pass_at(item_addr, n_workers, M, c, Kmat, a, vl, fi1, n_chunks, chunk_rows, Q, u, check,
                part):
    """``uot_fused_pass`` with the chunk work (``uot_chunk`` or
    ``uot_rows_chunk``) called at its address ``item_addr``
    (``uot_chunk_address``) on consecutive chunks, once per worker
    (``n_workers``: the number of threads).  The parallel loop holds an
    indirect call, not the tile loops (``numbaot.cpu._pointer``: a shorter
    first compile).  The blocked solve's other parallel steps run through
    it too, with their chunk kernels (one signature: ``M``, ``c`` go to the
    chunk kernel as they are): K (``uot_prepare_chunk``) and the plan in
    place of K (``uot_plan_chunk``)."""
    nw = max(1, min(n_chunks, n_workers))
    per = (n_chunks + nw - 1) // nw
    for w in prange(nw):
        call_at(item_addr, _NONE, M, np.float64(c), Kmat, a, vl, np.float64(fi1),
                np.int64(w * per), np.int64(min(n_chunks, (w + 1) * per)),
                np.int64(chunk_rows), Q, u, np.bool_(check), part)


def _uot_pass_signature(M, Kmat, a, vl, Q, u, part):
    i64, f64 = nbtypes.int64, nbtypes.float64
    return nbtypes.none(i64, i64, typeof(M), f64, typeof(Kmat), typeof(a), typeof(vl), f64, i64,
                        i64, typeof(Q), typeof(u), nbtypes.boolean, typeof(part))


def uot_pass_address(M, Kmat, a, vl, Q, u, part):
    """The ``jit_address`` of ``uot_pass_at`` for these arrays."""
    return address_for(uot_pass_at, _uot_pass_signature, M, Kmat, a, vl, Q, u, part)


def uot_fused_pass(Kmat, a, vl, fi1, n_chunks, chunk_rows, Q, u, check, part):
    """One read of K: u[k, i] = (a[k, i] / (K v_k)_i)^fi1 and, per chunk of rows,
    Q[c, k, :] = K[rows of c]^T u_k (new u; summed over chunks by
    ``uot_col_chunk``).

    ``vl`` (n_hists, dim_b) is v in the lanes' dtype: K's dtype (float32 lanes
    for a float32 K) or float64 (float64 lanes for any K).  Tiles of R rows
    (``_uot_tile_rows``), columns in blocks of UOT_COL_BLOCK: the first sweep
    of a tile forms K v from memory, the second re-reads the tile from L2 and
    adds K_ij u_i into the chunk's accumulators (the chunk's first tile
    stores them: no zeroing pass).  Sums of float32 lanes are added into float64 per block of
    columns (rows) and per group of rows (columns).

    part[c] = (max |u_new - u_old|, max(|u_new|, |u_old|), 1 if every new u is
    finite, 1 if ``check`` is off or every (K v)_i lies in [UOT_LANE_SUM_MIN,
    UOT_LANE_SUM_MAX] and every u in the float32 lane range) over chunk c.

    The host entry (the distributed solver's loop); ``uot_run`` calls
    ``uot_pass_at`` itself.  (Kmat stands in for the unused M.)
    """
    uot_pass_at(uot_chunk_address(Kmat, Kmat, a, vl, Q, u, part), numba.get_num_threads(),
                Kmat, np.float64(1.0), Kmat, a, vl, fi1, n_chunks, chunk_rows, Q, u, check,
                part)


#: (problem, block of columns) work items of the column update (``uot_col_chunk``)
_COLS = UOT_MERGE_COLS


@njit(**_SER, **_INNER)
def uot_col_chunk(M, c, Kmat, a, vl, fi1, ch0, ch1, chunk_rows, Q, u, check, part):
    """The column update's work items [ch0, ch1), a chunk kernel of
    ``uot_pass_at`` (one thread's share, the items in place of its chunks):
    the targets b in the ``a`` slot, fi2 in ``fi1``'s, v in ``u``'s (updated
    in place) and its lane copy in ``vl``'s (v itself for a float64 K).  For
    item p = k * n_blocks + block, q_j = sum_c Q[c, k, j] over the block's
    columns (chunk order: bit-identical for any thread count), v[k, j] =
    (b[k, j] / q_j)^fi2 and vl[k, j] = v[k, j] (cast).

    part[p] = (1 if some q is 0 or some new v is not finite, max |v - v_old|,
    max(|v|, |v_old|), 1 if ``check`` is off or every q lies in
    [UOT_LANE_SUM_MIN, UOT_LANE_SUM_MAX], 1 if every new v lies in the float32
    lane range) over the item.  ``M``, ``c``, ``Kmat`` and ``chunk_rows``
    are unused.  Through ``uot_pass_at``: the column update has no parallel
    kernel of its own to compile (0.3 s of a first call).
    """
    b, fi2, v = a, fi1, u
    n_chunks, K, m = Q.shape
    shared_b = b.shape[0] == 1
    nb = (m + _COLS - 1) // _COLS
    xs = np.empty(_COLS)
    qs = np.empty(_COLS)
    for p in range(ch0, ch1):
        k = p // nb
        j0 = (p - k * nb) * _COLS
        j1 = min(m, j0 + _COLS)
        for j in range(j0, j1):
            qs[j - j0] = Q[0, k, j]
        for ch in range(1, n_chunks):
            for j in range(j0, j1):
                qs[j - j0] += Q[ch, k, j]
        bad = False
        ok = True
        vok = True
        dv = 0.0
        mv = 0.0
        kb = 0 if shared_b else k
        for j in range(j0, j1):
            xs[j - j0] = b[kb, j] / qs[j - j0]
        pow_inplace(xs, j1 - j0, fi2)
        for j in range(j0, j1):
            qkj = qs[j - j0]
            if qkj == 0.0:
                bad = True
            if check and not (qkj >= UOT_LANE_SUM_MIN and qkj <= UOT_LANE_SUM_MAX):
                ok = False
            x = xs[j - j0]
            old = v[k, j]
            v[k, j] = x
            vl[k, j] = x
            if not np.isfinite(x):
                bad = True
            if not _in_lane_range(x):
                vok = False
            dv = max(dv, abs(x - old))
            mv = max(mv, max(abs(x), abs(old)))
        part[p, 0] = 1.0 if bad else 0.0
        part[p, 1] = dv
        part[p, 2] = mv
        part[p, 3] = 1.0 if ok else 0.0
        part[p, 4] = 1.0 if vok else 0.0


@njit(**_SER, **_INNER)
def _copy2(dst, src):
    """dst[k, j] = src[k, j] for two arrays of one shape: an explicit loop
    (a slice assignment compiles NumPy's broadcasting and its shape-mismatch
    error path, seconds of first-call compile, issue 23)."""
    for k in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[k, j] = src[k, j]


@njit(**_SER, **_INNER)
def _all_set(part, col):
    for p in range(part.shape[0]):
        if part[p, col] == 0.0:
            return False
    return True


@njit(**_SER, **_INNER)
def _col_max(part, col):
    x = 0.0
    for p in range(part.shape[0]):
        x = max(x, part[p, col])
    return x


#: Verdicts of :func:`uot_rule`.
GO_ON = 0
CONVERGED = 1
FAILED = 2


@njit(**_SER)
def uot_rule(failed, du, mu, dv, mv, stopThr, errs, it):
    """POT's per-iteration stopping rule of the unbalanced solvers
    (``ot.unbalanced.sinkhorn_knopp_unbalanced``), once for every solver and
    both devices (the CPU loops call it inside their compiled loop, the CUDA
    launchers on the per-step parts read back from the device).

    Iteration ``it`` either ``failed`` (K^T u has a zero or the scalings got
    a NaN/inf): FAILED, no error is stored, the caller undoes the step and
    stops; or its error err = (err_u + err_v) / 2, err_x = max|x - x_prev| /
    max(max|x|, max|x_prev|, 1), from du = max|u - u_prev|, mu =
    max(max|u|, max|u_prev|) and the same for v, is stored in ``errs[it]``
    and the verdict is CONVERGED when err < stopThr, else GO_ON.
    """
    if failed:
        return FAILED
    err = 0.5 * (du / max(mu, 1.0) + dv / max(mv, 1.0))
    errs[it] = err
    if err < stopThr:
        return CONVERGED
    return GO_ON


@njit(**_SER)
def uot_run(addrs, n_workers, M, c, Kmat, a, b, u, v, vl, fi1, fi2,
            n_chunks, chunk_rows, Q, pu, n_steps, stopThr, errs):
    """Up to ``n_steps`` unbalanced Sinkhorn iterations in place (POT order).

    ``addrs`` (int64, 5) holds addresses (``numbaot.cpu._pointer``): the
    chunk kernel for the lane copy ``vl`` of v and for v itself
    (``uot_chunk_address``), ``uot_col_chunk`` (``uot_col_address``), then
    ``uot_pass_at`` for ``vl`` and for v (``uot_pass_address``): the run
    calls the parallel kernel at its address, so its module holds indirect
    calls, not its code to optimise and emit again.

    Each iteration: u = (a / K v)^fi1 and the chunk partials of K^T u in one
    read of K (``uot_pass_at`` with the chunk kernel, M and c passed on to
    it, which ignores them; ``n_workers`` threads; ``pu`` (n_chunks, 4) the
    chunks' flags), then q = K^T u and v = (b / q)^fi2 (``uot_pass_at``
    with ``uot_col_chunk`` on the (problem, block of columns) items); then
    POT's stopping rule (:func:`uot_rule`): an
    iteration where K^T u has a zero or u, v get a NaN/inf is undone and the
    run stops; otherwise its err is stored in ``errs[it]`` and the run stops
    once err < stopThr.

    A float32 K (``vl`` its lane copy of v, float32; None for a float64 K,
    whose lanes are v) runs float32 lanes (``uot_fused_pass``) while u, v, the sums
    K v, K^T u stay in the ranges where float32 products lose nothing
    (UOT_LANE_MIN..UOT_LANE_MAX, UOT_LANE_SUM_MIN..UOT_LANE_SUM_MAX); an
    iteration that leaves them is redone in float64 lanes, and so is every
    later one (results stay independent of the thread count).

    Returns (iterations run, failed): on failure the first value is the
    index of the failing iteration (no err stored for it).
    """
    K, m = v.shape
    uprev = np.empty_like(u)
    vprev = np.empty_like(v)
    narrow = False
    # ``vl`` None (a float64 K): Numba prunes the lane branches at compile
    # time (a float64 problem's first call compiles none of them)
    if vl is not None:
        narrow = True
        for k in range(K):
            for j in range(m):
                vl[k, j] = v[k, j]
                if not _in_lane_range(v[k, j]):
                    narrow = False
    n_items = K * ((m + _COLS - 1) // _COLS)
    pv = np.empty((n_items, 5))
    for it in range(n_steps):
        _copy2(uprev, u)
        _copy2(vprev, v)
        done = False
        if vl is not None:
            if narrow:
                # flags and columns as runtime values (np.bool_, np.int64),
                # not literals: one compile of each kernel, not two
                call_at(addrs[3], _NONE, addrs[0], n_workers, M, c, Kmat, a, vl, fi1, n_chunks,
                        chunk_rows, Q, u, np.bool_(True), pu)
                if _all_set(pu, np.int64(3)):
                    call_at(addrs[3], _NONE, addrs[2], n_workers, M, c, Kmat, b, vl, fi2,
                            n_items, np.int64(0), Q, v, np.bool_(True), pv)
                    done = _all_set(pv, np.int64(3))
                if not done:
                    narrow = False
                    _copy2(u, uprev)
                    _copy2(v, vprev)
        if not done:
            call_at(addrs[4], _NONE, addrs[1], n_workers, M, c, Kmat, a, v, fi1, n_chunks,
                    chunk_rows, Q, u, np.bool_(False), pu)
            if vl is None:
                call_at(addrs[4], _NONE, addrs[2], n_workers, M, c, Kmat, b, v, fi2, n_items,
                        np.int64(0), Q, v, np.bool_(False), pv)
            else:
                call_at(addrs[3], _NONE, addrs[2], n_workers, M, c, Kmat, b, vl, fi2, n_items,
                        np.int64(0), Q, v, np.bool_(False), pv)
        if vl is not None:
            if narrow and not _all_set(pv, np.int64(4)):
                narrow = False
        failed = not _all_set(pu, np.int64(2)) or _col_max(pv, np.int64(0)) != 0.0
        verdict = uot_rule(failed, _col_max(pu, np.int64(0)), _col_max(pu, np.int64(1)),
                           _col_max(pv, np.int64(1)), _col_max(pv, np.int64(2)), stopThr, errs,
                           it)
        if verdict == FAILED:
            _copy2(u, uprev)
            _copy2(v, vprev)
            return it, True
        if verdict == CONVERGED:
            return it + 1, False
    return n_steps, False


# --------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
def uot_stats_chunk(Kmat, M, u, v, C, ca, cb, use_mat, write_plan, plan, ch0, ch1, chunk_rows,
                    rows, Qcols, part):
    """The work of ``uot_plan_stats`` on the chunks [ch0, ch1) (one thread's
    share): the plan's rows (written into ``plan`` with ``write_plan``),
    their sums ``rows``, the chunk's column sums Qcols[ch, 0] and its
    partial <plan, M> and KL term in part[ch] (zero on entry)."""
    n, m = Kmat.shape
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Qcols[ch]
        Qc[0, :] = 0.0
        for i in range(i0, i1):
            ui = u[i]
            rs = 0.0
            lin = 0.0
            kl = 0.0
            for j in range(m):
                p = ui * Kmat[i, j] * v[j]
                if write_plan:
                    plan[i, j] = p
                cij = C[i, j] if use_mat else ca[i] * cb[j]
                rs += p
                lin += p * M[i, j]
                kl += p * math.log(p / cij + 1e-16) if p != 0.0 else 0.0
                Qc[0, j] += p
            rows[i] = rs
            part[ch, 0] += lin
            part[ch, 1] += kl


def _uot_stats_signature(Kmat, M, u, v, C, ca, cb, plan, rows, Qcols, part):
    b, i64 = nbtypes.boolean, nbtypes.int64
    return nbtypes.none(typeof(Kmat), typeof(M), typeof(u), typeof(v), typeof(C), typeof(ca),
                        typeof(cb), b, b, typeof(plan), i64, i64, i64, typeof(rows),
                        typeof(Qcols), typeof(part))


@njit(**_PAR)
def uot_stats_at(item_addr, n_workers, Kmat, M, u, v, C, ca, cb, use_mat, write_plan, plan,
                 n_chunks, chunk_rows, rows, Qcols, cols, out, part):
    """``uot_plan_stats`` with ``uot_stats_chunk`` called at its address
    ``item_addr`` once per worker (``numbaot.cpu._pointer``: the parallel
    loop holds an indirect call, not the chunk's loops), the column sums
    merged and the partials summed in chunk order on the calling thread."""
    m = Kmat.shape[1]
    nw = max(1, min(n_chunks, n_workers))
    per = (n_chunks + nw - 1) // nw
    for w in prange(nw):
        call_at(item_addr, _NONE, Kmat, M, u, v, C, ca, cb, np.bool_(use_mat),
                np.bool_(write_plan), plan, np.int64(w * per),
                np.int64(min(n_chunks, (w + 1) * per)), np.int64(chunk_rows), rows, Qcols, part)
    merge_chunks_serial(Qcols, np.ones(1, dtype=np.bool_), cols.reshape((1, m)))
    out[0] = 0.0
    out[1] = 0.0
    for ch in range(n_chunks):
        out[0] += part[ch, 0]
        out[1] += part[ch, 1]


def uot_plan_stats(Kmat, M, u, v, C, ca, cb, use_mat, write_plan, plan,
                   n_chunks, chunk_rows, rows, Qcols, cols, out):
    """plan = diag(u) K diag(v) (if ``write_plan``), its row sums ``rows``
    (dim_a,), column sums ``cols`` (dim_b,), and
    out[0] = <plan, M>, out[1] = sum plan log(plan / c + 1e-16) (POT's
    ``kl_div(plan, c)``), with c = C or ca cb^T.  One problem (u (dim_a,),
    v (dim_b,)); chunk partials merged in chunk order (``uot_stats_at``
    and its chunk kernel ``uot_stats_chunk``: a first call of
    ``sinkhorn_unbalanced2`` at 400^2 1.2 s shorter than with the loops in
    a ``prange`` body and a parallel merge; one-iteration calls 0.81-0.90x
    the time at 512^2-2048^2)."""
    part = np.zeros((n_chunks, 2))
    addr = address_for(uot_stats_chunk, _uot_stats_signature, Kmat, M, u, v, C, ca, cb, plan,
                       rows, Qcols, part)
    uot_stats_at(addr, numba.get_num_threads(), Kmat, M, u, v, C, ca, cb, np.bool_(use_mat),
                 np.bool_(write_plan), plan, n_chunks, chunk_rows, rows, Qcols, cols, out,
                 part)


# --------------------------------------------------------------------------
# Log domain (numbaot extension)
# --------------------------------------------------------------------------
@njit(**_PAR, **_INNER)
def uot_log_row_update(M0, c, gv, la, fi1, out):
    """out[k, i] = fi1 * (la[k, i] - LSE_j(c M0[i, j] + gv[k, j])), the
    row logsumexp max-shifted (two sweeps of a row that stays in cache);
    rows with la = -inf get -inf.  ``la`` may have one shared row."""
    n, m = M0.shape
    K = gv.shape[0]
    shared = la.shape[0] == 1
    for i in prange(n):
        for k in range(K):
            lai = la[0, i] if shared else la[k, i]
            if lai == -np.inf:
                out[k, i] = -np.inf
                continue
            mx = -np.inf
            for j in range(m):
                mx = max(mx, c * M0[i, j] + gv[k, j])
            if mx == -np.inf:
                out[k, i] = np.inf
                continue
            s = 0.0
            for j in range(m):
                s += fast_exp(c * M0[i, j] + gv[k, j] - mx)
            out[k, i] = fi1 * (lai - (mx + math.log(s)))


@njit(**_SER, **_INNER)
def _log_change(x, xprev):
    """(max|x - xprev|, max(max|x|, max|xprev|)) over the entries finite in
    both."""
    d = 0.0
    mx = 0.0
    for k in range(x.shape[0]):
        for j in range(x.shape[1]):
            if np.isfinite(x[k, j]) and np.isfinite(xprev[k, j]):
                d = max(d, abs(x[k, j] - xprev[k, j]))
                mx = max(mx, abs(x[k, j]), abs(xprev[k, j]))
    return d, mx


@njit(**_SER, **_INNER)
def _log_targets(la, lb, ga, gb):
    """(la - ga, lb - gb), -inf where la (lb) is -inf: the log-weights that
    the row (column) updates subtract their logsumexps from."""
    n = la.shape[1]
    m = lb.shape[1]
    lam = np.empty((la.shape[0], n))
    lbm = np.empty((lb.shape[0], m))
    for k in range(la.shape[0]):
        kg = min(k, ga.shape[0] - 1)
        for i in range(n):
            lam[k, i] = -np.inf if la[k, i] == -np.inf else la[k, i] - ga[kg, i]
    for k in range(lb.shape[0]):
        kg = min(k, gb.shape[0] - 1)
        for j in range(m):
            lbm[k, j] = -np.inf if lb[k, j] == -np.inf else lb[k, j] - gb[kg, j]
    return lam, lbm


@njit(**_SER, **_INNER)
def _shifted(g, x, out):
    """out[k, :] = g[min(k, last row of g), :] + x[k, :]."""
    for k in range(x.shape[0]):
        kg = min(k, g.shape[0] - 1)
        for j in range(x.shape[1]):
            out[k, j] = g[kg, j] + x[k, j]


@njit(**_SER, **_INNER)
def _log_col_finish(lbm, fi2, logu, logv):
    """logv = fi2 (lbm - logv) (-inf where lbm is -inf), logv holding the
    column logsumexps on entry; True if logu or the new logv has a NaN."""
    K, m = logv.shape
    n = logu.shape[1]
    shared = lbm.shape[0] == 1
    bad = False
    for k in range(K):
        for j in range(m):
            lbj = lbm[0, j] if shared else lbm[k, j]
            if lbj == -np.inf:
                logv[k, j] = -np.inf
            else:
                logv[k, j] = fi2 * (lbj - logv[k, j])
            if np.isnan(logv[k, j]):
                bad = True
        for i in range(n):
            if np.isnan(logu[k, i]):
                bad = True
    return bad


@njit(**_SER)
def uot_log_run(M0, c, ga, gb, la, lb, fi1, fi2, logu, logv, n_chunks, chunk_rows,
                n_steps, stopThr, errs):
    """Up to ``n_steps`` log-domain unbalanced iterations in place.

    With log-kernel c M0_ij + ga[k, i] + gb[k, j] (c = -1/reg):
    log u = fi1 (la - ga - LSE_j(c M0 + gb + log v)),
    log v = fi2 (lb - gb - LSE_i(c M0 + ga + log u)); then POT's stopping
    rule (:func:`uot_rule`) on the log-scalings (their finite entries): a
    step that gives a NaN fails and is undone.  Returns (iterations run,
    failed) as :func:`uot_run`.  Vector arrays may have one shared row
    (leading dimension 1).
    """
    K = logu.shape[0]
    n = logu.shape[1]
    m = logv.shape[1]
    uprev = np.empty_like(logu)
    vprev = np.empty_like(logv)
    gv = np.empty((K, m))
    gu = np.empty((K, n))
    lam, lbm = _log_targets(la, lb, ga, gb)
    for it in range(n_steps):
        _copy2(uprev, logu)
        _copy2(vprev, logv)
        _shifted(gb, logv, gv)
        uot_log_row_update(M0, c, gv, lam, fi1, logu)
        _shifted(ga, logu, gu)
        log_col_lse(M0, c, gu, n_chunks, chunk_rows, logv)
        bad = _log_col_finish(lbm, fi2, logu, logv)
        du, mu = _log_change(logu, uprev)
        dv, mv = _log_change(logv, vprev)
        verdict = uot_rule(bad, du, mu, dv, mv, stopThr, errs, it)
        if verdict == FAILED:
            _copy2(logu, uprev)
            _copy2(logv, vprev)
            return it, True
        if verdict == CONVERGED:
            return it + 1, False
    return n_steps, False


@njit(**_PAR)
def uot_log_plan_stats(M0, M, c, fu, fv, C, ca, cb, use_mat, write_plan, plan,
                       n_chunks, chunk_rows, rows, Qcols, cols, out):
    """``uot_plan_stats`` for the log domain: plan_ij = exp(c M0_ij + fu_i + fv_j)
    (fu, fv: log-scalings plus the rank-one log reference measure)."""
    n, m = M0.shape
    part = np.zeros((n_chunks, 2))
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Qcols[ch]
        Qc[0, :] = 0.0
        for i in range(i0, i1):
            fi = fu[i]
            rs = 0.0
            lin = 0.0
            kl = 0.0
            for j in range(m):
                p = fast_exp(c * M0[i, j] + fi + fv[j])
                if write_plan:
                    plan[i, j] = p
                cij = C[i, j] if use_mat else ca[i] * cb[j]
                rs += p
                lin += p * M[i, j]
                kl += p * math.log(p / cij + 1e-16) if p != 0.0 else 0.0
                Qc[0, j] += p
            rows[i] = rs
            part[ch, 0] += lin
            part[ch, 1] += kl
    merge_chunks_serial(Qcols, np.ones(1, dtype=np.bool_), cols.reshape((1, m)))
    out[0] = 0.0
    out[1] = 0.0
    for ch in range(n_chunks):
        out[0] += part[ch, 0]
        out[1] += part[ch, 1]


# --------------------------------------------------------------------------
# Small problems: the whole solve serially on the calling thread (issue 23)
# --------------------------------------------------------------------------
# A state of at most ``_config.SMALL_MAX_ENTRIES`` entries (dim_a x dim_b x
# n_problems) runs the kernels of this section and no others: no parallel
# region is launched (its wake-up of the worker threads costs more than an
# iteration's arithmetic there, and stalls behind any other busy thread
# pool), K is formed, iterated and read by plain loops, and the iterations
# keep POT's per-iteration rule (:func:`uot_rule`).  Same iterates as the
# blocked kernels to rounding (sums taken in another order; a float32 K is
# used in float64 lanes).  These kernels call no parallel kernel, so a first
# call on a small problem compiles none.

uot_gibbs_serial = serial_twin(uot_gibbs)
uot_log_row_update_serial = serial_twin(uot_log_row_update, inner=True)


@njit(**_SER, **_INNER)
def _uot_tile_ratios(Kmat, a, ka, v, k, t0, nt, w):
    """w[r] = a[ka, t0 + r] / (K v_k)_{t0 + r} for the ``nt`` rows of a tile
    starting at row t0, four rows at a time (each load of v_j serves four
    rows; sums in float64, a float32 K widened entry by entry).  A short
    last group repeats the tile's last row (its ratio lands past nt): no
    remainder loop to compile."""
    m = Kmat.shape[1]
    last = t0 + nt - 1
    for r in range(0, nt, 4):
        i = t0 + r
        i1 = min(i + 1, last)
        i2 = min(i + 2, last)
        i3 = min(i + 3, last)
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for j in range(m):
            vj = v[k, j]
            s0 += Kmat[i, j] * vj
            s1 += Kmat[i1, j] * vj
            s2 += Kmat[i2, j] * vj
            s3 += Kmat[i3, j] * vj
        w[r] = a[ka, i] / s0
        w[r + 1] = a[ka, i1] / s1
        w[r + 2] = a[ka, i2] / s2
        w[r + 3] = a[ka, i3] / s3


@njit(**_SER, **_INNER)
def _uot_tile_update(Kmat, w, u, q, k, t0, nt, acc):
    """The tile's new u[k, t0 + r] = w[r] (the ratios, raised to fi1 by the
    caller) and K_ij u_ki added into q_k four rows at a time while the tile
    is in L1/L2.  ``acc`` = [max |u - u_old|, max(|u|, |u_old|), not
    finite] (``uot_rule``'s inputs), updated."""
    m = Kmat.shape[1]
    T = w.shape[0]  # a multiple of 4
    last = t0 + nt - 1
    du = acc[0]
    mu = acc[1]
    bad = acc[2] != 0.0
    for r in range(nt):
        x = w[r]
        old = u[k, t0 + r]
        u[k, t0 + r] = x
        bad |= not np.isfinite(x)
        du = max(du, abs(x - old))
        mu = max(mu, max(abs(x), abs(old)))
    for r in range(nt, T):
        w[r] = 0.0
    for r in range(0, nt, 4):
        i = t0 + r
        i1 = min(i + 1, last)
        i2 = min(i + 2, last)
        i3 = min(i + 3, last)
        u0 = w[r]
        u1 = w[r + 1]
        u2 = w[r + 2]
        u3 = w[r + 3]
        for j in range(m):
            q[k, j] += (Kmat[i, j] * u0 + Kmat[i1, j] * u1) + (Kmat[i2, j] * u2
                                                              + Kmat[i3, j] * u3)
    acc[0] = du
    acc[1] = mu
    acc[2] = 1.0 if bad else 0.0


@njit(**_SER, inline="always")
def uot_small_run(Kmat, a, b, u, v, fi1, fi2, n_steps, stopThr, errs):
    """:func:`uot_run` on the calling thread: up to ``n_steps`` iterations
    u = (a / K v)^fi1, v = (b / K^T u)^fi2 in place under :func:`uot_rule`.

    Each row of K is read once per iteration, in tiles of rows
    (:func:`_uot_tile_ratios`, ``pow_inplace``, :func:`_uot_tile_update`,
    four rows at a time): (K v_k)_i, the new u_ki, and K_ij u_ki added into
    q_k = K^T u_k while the rows are in L1; then v from q.  Same returns
    and ``errs`` as :func:`uot_run`.  Inlined into :func:`uot_small_call`
    (Numba's ``inline="always"``; the launcher's calls compile it as a
    function): compiled on its own and then linked, its code was optimised
    twice on a first call (200^2: 2.67 -> 2.13 s of compile CPU, runs 0.90-1.0
    of before from 16^2 to 200^2, alternating pairs)."""
    n, m = Kmat.shape
    P = u.shape[0]
    T = _SMALL_ROW_TILE  # a multiple of 4
    shared_a = a.shape[0] == 1
    shared_b = b.shape[0] == 1
    uprev = np.empty_like(u)
    vprev = np.empty_like(v)
    q = np.empty((P, m))
    acc = np.empty(3)
    w = np.empty(_SMALL_ROW_TILE)
    x = np.empty(m)
    for it in range(n_steps):
        _copy2(uprev, u)
        _copy2(vprev, v)
        acc[0] = 0.0
        acc[1] = 0.0
        acc[2] = 0.0
        for k in range(P):
            for j in range(m):
                q[k, j] = 0.0
            ka = 0 if shared_a else k  # not in the calls (see partial._small_run)
            # each row of K read once per iteration, in tiles of w.shape[0]
            # rows: the tile's ratios a / (K v_k), their power fi1 in one
            # vectorised loop (``pow_inplace``; libm's scalar pow was a third
            # of the iteration at 64-256^2), then u and K^T u while the tile
            # is in L1/L2.  Three leaf calls, not one kernel calling
            # pow_inplace: a compiled function that passes an array to
            # another call keeps Numba's reference counts of all its array
            # arguments, 14 atomic operations per problem and iteration
            # (docs/performance-notes.md)
            t0 = np.int64(0)  # not the literal 0 (a second compile of the tiles)
            while t0 < n:
                nt = min(n, t0 + T) - t0
                _uot_tile_ratios(Kmat, a, ka, v, k, t0, nt, w)
                pow_inplace(w, nt, fi1)
                _uot_tile_update(Kmat, w, u, q, k, t0, nt, acc)
                t0 += T
        du = acc[0]
        mu = acc[1]
        bad = acc[2] != 0.0
        dv = 0.0
        mv = 0.0
        for k in range(P):
            kb = 0 if shared_b else k
            for j in range(m):
                bad |= q[k, j] == 0.0
                x[j] = b[kb, j] / q[k, j]
            pow_inplace(x, m, fi2)
            for j in range(m):
                old = v[k, j]
                v[k, j] = x[j]
                bad |= not np.isfinite(x[j])
                dv = max(dv, abs(x[j] - old))
                mv = max(mv, max(abs(x[j]), abs(old)))
        verdict = uot_rule(bad, du, mu, dv, mv, stopThr, errs, it)
        if verdict == FAILED:
            _copy2(u, uprev)
            _copy2(v, vprev)
            return it, True
        if verdict == CONVERGED:
            return it + 1, False
    return n_steps, False


@njit(**_SER, inline="always")
def uot_log_small_run(M0, c, ga, gb, la, lb, fi1, fi2, logu, logv, n_steps, stopThr, errs):
    """:func:`uot_log_run` on the calling thread (same arguments but the
    chunk layout, same returns).  Inlined into :func:`uot_log_small_call`,
    as :func:`uot_small_run` (64^2 ``sinkhorn_unbalanced(...,
    method='sinkhorn_log')``: first call 3.8 -> 3.1 s, runs 0.93-1.01)."""
    K = logu.shape[0]
    n = logu.shape[1]
    m = logv.shape[1]
    uprev = np.empty_like(logu)
    vprev = np.empty_like(logv)
    gv = np.empty((K, m))
    gu = np.empty((K, n))
    lam, lbm = _log_targets(la, lb, ga, gb)
    for it in range(n_steps):
        _copy2(uprev, logu)
        _copy2(vprev, logv)
        _shifted(gb, logv, gv)
        uot_log_row_update_serial(M0, c, gv, lam, fi1, logu)
        _shifted(ga, logu, gu)
        col_lse(M0, c, gu, logv)
        bad = _log_col_finish(lbm, fi2, logu, logv)
        du, mu = _log_change(logu, uprev)
        dv, mv = _log_change(logv, vprev)
        verdict = uot_rule(bad, du, mu, dv, mv, stopThr, errs, it)
        if verdict == FAILED:
            _copy2(logu, uprev)
            _copy2(logv, vprev)
            return it, True
        if verdict == CONVERGED:
            return it + 1, False
    return n_steps, False


@njit(**_SER)
def uot_small_plan_stats(Kmat, M, u, v, C, ca, cb, use_mat, write_plan, plan, rows, cols, out):
    """:func:`uot_plan_stats` on the calling thread (no chunk layout)."""
    n, m = Kmat.shape
    for j in range(m):
        cols[j] = 0.0
    lin = 0.0
    kl = 0.0
    for i in range(n):
        ui = u[i]
        rs = 0.0
        li = 0.0
        ki = 0.0
        for j in range(m):
            p = ui * Kmat[i, j] * v[j]
            if write_plan:
                plan[i, j] = p
            cij = C[i, j] if use_mat else ca[i] * cb[j]
            rs += p
            li += p * M[i, j]
            ki += p * math.log(p / cij + 1e-16) if p != 0.0 else 0.0
            cols[j] += p
        rows[i] = rs
        lin += li
        kl += ki
    out[0] = lin
    out[1] = kl


@njit(**_SER)
def uot_log_small_plan_stats(M0, M, c, fu, fv, C, ca, cb, use_mat, write_plan, plan, rows,
                             cols, out):
    """:func:`uot_log_plan_stats` on the calling thread (no chunk layout)."""
    n, m = M0.shape
    for j in range(m):
        cols[j] = 0.0
    lin = 0.0
    kl = 0.0
    for i in range(n):
        fi = fu[i]
        rs = 0.0
        li = 0.0
        ki = 0.0
        for j in range(m):
            p = fast_exp(c * M0[i, j] + fi + fv[j])
            if write_plan:
                plan[i, j] = p
            cij = C[i, j] if use_mat else ca[i] * cb[j]
            rs += p
            li += p * M[i, j]
            ki += p * math.log(p / cij + 1e-16) if p != 0.0 else 0.0
            cols[j] += p
        rows[i] = rs
        lin += li
        kl += ki
    out[0] = lin
    out[1] = kl


@njit(**_SER)
def uot_small_plan(Kmat, u, v, out):
    """out[i, j] = u[i] K[i, j] v[j] (``scaled_plan`` on the calling thread)."""
    n, m = Kmat.shape
    for i in range(n):
        ui = u[i]
        for j in range(m):
            out[i, j] = ui * Kmat[i, j] * v[j]


@njit(**_SER)
def uot_small_loss(Kmat, M, u, v, out):
    """out[k] = sum_ij M_ij u[k, i] K_ij v[k, j] (``scaled_loss`` on the
    calling thread)."""
    n, m = Kmat.shape
    for k in range(u.shape[0]):
        acc = 0.0
        for i in range(n):
            s = 0.0
            for j in range(m):
                s += M[i, j] * Kmat[i, j] * v[k, j]
            acc += s * u[k, i]
        out[k] = acc


@njit(**_SER)
def uot_log_small_loss(M, c, f, g, out):
    """out[k] = sum_ij M_ij exp(c M_ij + f[k, i] + g[k, j]) (``gibbs_loss``
    on the calling thread)."""
    n, m = M.shape
    for k in range(g.shape[0]):
        acc = 0.0
        for i in range(n):
            fi = f[k, i]
            if fi == -np.inf:
                continue
            s = 0.0
            for j in range(m):
                x = M[i, j]
                s += x * fast_exp(c * x + fi + g[k, j])
            acc += s
        out[k] = acc


# --------------------------------------------------------------------------
# The whole call of a plain small problem (1-D NumPy weights, no c, no warm
# start): input screen, solve and outputs in one compiled call
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
def _kl_div(p, q):
    """POT's ``kl_div(p, q)``: sum p log(p / q + 1e-16), a term with p = 0
    counted as 0 (POT's is NaN where q = 0 too, :func:`numbaot._loops.kl_div`)."""
    s = 0.0
    for i in range(p.shape[0]):
        s += p[i] * math.log(p[i] / q[i] + 1e-16) if p[i] != 0.0 else 0.0
    return s


@njit(**_SER, **_INNER)
def _split_stats(stats, n, m):
    """(rows (n,), cols (m,), out (4,)) views of one float64 buffer."""
    return stats[:n], stats[n:n + m], stats[n + m:n + m + 4]


@njit(**_SER)
def uot_small_call(M, flat, a, b, reg, fi1, fi2, entropy, n_steps, stopThr, scale_max, want_plan,
                   errs, plan, u1, v1):
    """``sinkhorn_knopp_unbalanced`` on 1-D weights a (dim_a,), b (dim_b,)
    of M's dtype, start to finish: the input screen (a, b finite, >= 0, of
    positive mass; M finite with max|M| / reg <= ``scale_max``,
    ``_small.screen_cost`` on M and its flat view ``flat``, which also forms
    K = exp(-M / reg) a b^T, or exp(-M / reg) with ``entropy``), initial scalings 1, :func:`uot_small_run`, then, with
    ``want_plan``, the plan in ``plan`` (M's dtype, which first holds K;
    without, K is left there for :func:`uot_small_stats`).  The scalings are
    left in ``u1`` (dim_a,), ``v1`` (dim_b,), float64.

    Returns (ok, iterations run, failed) as :func:`uot_run`; ``ok`` False
    when the screen failed (nothing was computed: the caller runs the full
    validation, which raises).  The statistics are a second call
    (:func:`uot_small_stats`), compiled only when a caller asks for them:
    a first plain call compiles less."""
    n, m = M.shape
    u = u1.reshape(1, n)
    v = v1.reshape(1, m)
    a2 = np.empty((1, n))
    b2 = np.empty((1, m))
    if not (copy_weights(a, a2)[0] and copy_weights(b, b2)[0]):
        return False, 0, False
    ca = np.ones(n) if entropy else a2[0]
    cb = np.ones(m) if entropy else b2[0]
    if not screen_cost(M, flat, reg, scale_max, np.bool_(True), ca, cb, plan):
        return False, 0, False
    for i in range(n):
        u1[i] = 1.0
    for j in range(m):
        v1[j] = 1.0
    nit, failed = uot_small_run(plan, a2, b2, u, v, fi1, fi2, n_steps, stopThr, errs)
    if want_plan:
        uot_small_plan(plan, u1, v1, plan)
    return True, nit, failed


@njit(**_SER)
def uot_small_stats(M, a, b, entropy, plan, u1, v1, stats):
    """After :func:`uot_small_call` without ``want_plan`` (K in ``plan``):
    the plan in ``plan`` and its statistics in ``stats`` (dim_a + dim_b +
    4,): row sums, column sums, [<plan, M>, KL(plan, c), KL(plan 1, a),
    KL(plan^T 1, b)] (a, b the screened weights of that call)."""
    n, m = M.shape
    a2 = np.empty((1, n))
    b2 = np.empty((1, m))
    copy_weights(a, a2)
    copy_weights(b, b2)
    ca = np.ones(n) if entropy else a2[0]
    cb = np.ones(m) if entropy else b2[0]
    rows, cols, out = _split_stats(stats, n, m)
    uot_small_plan_stats(plan, M, u1, v1, np.zeros((1, 1)), ca, cb, False, True, plan,
                         rows, cols, out)
    out[2] = _kl_div(rows, a2[0])
    out[3] = _kl_div(cols, b2[0])


@njit(**_SER)
def uot_log_small_call(M, flat, a, b, reg, fi1, fi2, entropy, n_steps, stopThr, scale_max, errs,
                       plan, u1, v1, stats):
    """``sinkhorn_unbalanced_log`` on 1-D weights, start to finish, as
    :func:`uot_small_call` (one pass over M screens it): log-kernel
    -M / reg + log a_i + log b_j (-M / reg with ``entropy``), initial
    log-scalings 0, :func:`uot_log_small_run`, then the plan and its
    statistics (always: ``plan``, ``stats``).  The log-scalings are left in
    ``u1``, ``v1``."""
    n, m = M.shape
    a2 = np.empty((1, n))
    b2 = np.empty((1, m))
    if not (copy_weights(a, a2)[0] and copy_weights(b, b2)[0]):
        return False, 0, False
    if not screen_cost(M, flat, reg, scale_max, np.bool_(False), a2[0], b2[0], plan):
        return False, 0, False
    c = -1.0 / reg
    la = np.empty((1, n))
    lb = np.empty((1, m))
    for i in range(n):
        la[0, i] = math.log(a2[0, i])
    for j in range(m):
        lb[0, j] = math.log(b2[0, j])
    ga = np.zeros((1, n)) if entropy else la
    gb = np.zeros((1, m)) if entropy else lb
    ca = np.ones(n) if entropy else a2[0]
    cb = np.ones(m) if entropy else b2[0]
    logu = u1.reshape(1, n)
    logv = v1.reshape(1, m)
    for i in range(n):
        u1[i] = 0.0
    for j in range(m):
        v1[j] = 0.0
    nit, failed = uot_log_small_run(M, c, ga, gb, la, lb, fi1, fi2, logu, logv, n_steps,
                                    stopThr, errs)
    fu = np.empty(n)
    fv = np.empty(m)
    for i in range(n):
        fu[i] = logu[0, i] + ga[0, i]
    for j in range(m):
        fv[j] = logv[0, j] + gb[0, j]
    rows, cols, out = _split_stats(stats, n, m)
    uot_log_small_plan_stats(M, M, c, fu, fv, np.zeros((1, 1)), ca, cb, False, True, plan,
                             rows, cols, out)
    out[2] = _kl_div(rows, a2[0])
    out[3] = _kl_div(cols, b2[0])
    return True, nit, failed


def is_small(dim_a, dim_b, n_problems, log_domain):
    """Whether a problem of this size runs the small-problem kernels: at
    most ``_config.SMALL_MAX_ENTRIES`` entries (dim_a x dim_b x n_problems),
    and for the log domain also at most ``_config.SMALL_MAX_ENTRIES_LOG``
    (read at call time, so that tests can move the thresholds)."""
    entries = dim_a * dim_b * n_problems
    if log_domain and entries > _config.SMALL_MAX_ENTRIES_LOG:
        return False
    return entries <= _config.SMALL_MAX_ENTRIES


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cuda.unbalanced
# --------------------------------------------------------------------------
def _run_steps(run, args, n_steps, errs):
    """Run a compiled loop ``run(*args, n_steps, ..., buffer)`` and append the
    errors of its completed iterations to the list ``errs``."""
    buf = np.empty(max(n_steps, 1))
    nit, failed = run(*args, buf)
    errs.extend(buf[:nit].tolist())
    return nit, failed


def _stats(kernel, args, shape, dtype, want_plan, small):
    """Plan (if wanted) and its statistics by ``kernel`` (``uot_plan_stats``
    or ``uot_log_plan_stats``, or their small-problem twins when ``small``),
    one problem."""
    dim_a, dim_b = shape
    plan = np.empty(shape, dtype=dtype) if want_plan else np.empty((1, 1), dtype=dtype)
    rows = np.empty(dim_a)
    cols = np.empty(dim_b)
    out = np.empty(2)
    if small:
        kernel(*args, want_plan, plan, rows, cols, out)
    else:
        n_chunks, chunk_rows = chunk_layout(dim_a, 1, dim_b)
        Qc = np.empty((n_chunks, 1, dim_b))
        kernel(*args, want_plan, plan, n_chunks, chunk_rows, rows, Qc, cols, out)
    return (plan if want_plan else None), rows, cols, out


class UotState:
    """State of a (batched) multiplicative unbalanced Sinkhorn run on the CPU.

    Parameters
    ----------
    M : ndarray (dim_a, dim_b), float32 or float64, C order
        Cost matrix (its dtype is K's: a float32 K runs float32 lanes).
    reg : float
        Entropic regularisation; K = exp(-M / reg) * (C or ca cb^T) is formed once.
    ca, cb : ndarray (dim_a,), (dim_b,), float64
        Rank-one reference measure (a b^T for 'kl', ones for 'entropy' and 2-D b).
    C : ndarray (dim_a, dim_b) float64, or a (1, 1) placeholder
        Explicit reference measure, used when ``use_mat``.
    use_mat : bool
    a : ndarray (1 or n_problems, dim_a), float64
        Source weights (one row shared by all problems, or one per problem).
    b : ndarray (1 or n_problems, dim_b), float64
        Target weights.
    u, v : ndarray (n_problems, dim_a), (n_problems, dim_b), float64
        Initial scalings; the state takes ownership.
    fi1, fi2 : float
        Exponents reg_m / (reg_m + reg) (1 for an infinite reg_m).
    reduction : object, optional
        Column-reduction hook for a matrix whose rows are split across
        processes (``numbaot.distributed``), as for
        ``numbaot.cpu.sinkhorn.KnoppState``: ``col_sum_max(q, x)`` sums the
        column accumulators ``q`` over the processes and takes the
        elementwise maximum of the small float64 vector ``x``, both in place
        (one round of messages); ``agree(x)`` returns the value (any
        picklable object) every process uses for a stopping decision.  With
        a hook the iterations run one by one from Python, in float64 lanes
        for any K, and v is formed on the host; a single problem only.

    Without a hook, a state of at most ``_config.SMALL_MAX_ENTRIES`` entries
    (dim_a x dim_b x n_problems) is *small*: K, the iterations (up to
    ``_config.SMALL_MAX_ITER`` per call) and the outputs run the serial
    kernels ``uot_gibbs_serial``, ``uot_small_run``, ``uot_small_plan``,
    ``uot_small_loss``, ``uot_small_plan_stats`` on the calling thread.
    """

    def __init__(self, M, reg, ca, cb, C, use_mat, a, b, u, v, fi1, fi2, reduction=None):
        dim_a, dim_b = M.shape
        self.M = M
        self.reduction = reduction
        self.ca, self.cb, self.C, self.use_mat = ca, cb, C, use_mat
        self.a, self.b, self.u, self.v = a, b, u, v
        self.fi1, self.fi2 = fi1, fi2
        self.c = -1.0 / reg
        self.small = reduction is None and is_small(dim_a, dim_b, u.shape[0], False)
        self.Q = None
        if not self.small:
            _blocked_layout(self)
        self.Kmat = None
        _ensure_kernel(self)


def _ensure_kernel(st):
    """Form the state's K = exp(c M) * (C or ca cb^T) unless it holds it
    (``uot_plan`` forms the plan in place of K).  Small: ``uot_gibbs_serial``;
    blocked with a rank-one reference: ``uot_prepare_chunk`` through
    ``uot_pass_at`` (ca and cb in the u and v slots, as rows of their
    types); an explicit reference matrix C: ``uot_gibbs``."""
    if st.Kmat is not None:
        return
    M = st.M
    st.Kmat = np.empty(M.shape, dtype=M.dtype)
    if st.small:
        uot_gibbs_serial(M, st.c, st.ca, st.cb, st.C, st.use_mat, st.Kmat)
    elif st.use_mat:
        uot_gibbs(M, st.c, st.ca, st.cb, st.C, st.use_mat, st.Kmat)
    else:
        ca = np.empty_like(st.u, shape=(1, M.shape[0]))
        cb = np.empty_like(st.v, shape=(1, M.shape[1]))
        ca[0] = st.ca
        cb[0] = st.cb
        _blocked_pass(st, _PREPARE, cb, ca, np.empty((st.n_chunks, 4)))


#: ``_blocked_pass``'s chunk kernels
_PREPARE, _PLAN, _LOSS = 0, 1, 2


def _blocked_pass(st, which, vl, u, part):
    """``uot_pass_at`` with the chunk kernel ``which`` (``_PREPARE``:
    ``uot_prepare_chunk``, ``_PLAN``: ``uot_plan_chunk``, ``_LOSS``:
    ``uot_loss_chunk``) on the state's arrays, ``vl`` and ``u`` in the
    slots of v and u (of their types), ``part`` a float64 (n_chunks, x)
    array (as the pass's flags)."""
    addr = address_for(uot_plan_chunk if which == _PLAN else
                       (uot_loss_chunk if which == _LOSS else uot_prepare_chunk),
                       _uot_chunk_signature, st.M, st.Kmat, st.a, vl, st.Q, u, part)
    uot_pass_at(addr, numba.get_num_threads(), st.M, np.float64(st.c), st.Kmat, st.a, vl,
                st.fi1, st.n_chunks, st.chunk_rows, st.Q, u, np.bool_(False), part)


def _blocked_layout(st):
    """The chunk layout and the column accumulators of the blocked kernels
    (a small state gets them only if it runs them: more than
    ``_config.SMALL_MAX_ITER`` iterations in one call)."""
    if st.Q is None:
        dim_a, dim_b = st.M.shape
        n_problems = st.u.shape[0]
        st.n_chunks, st.chunk_rows = chunk_layout(dim_a, n_problems, dim_b, memory_bound=True)
        st.Q = np.empty((st.n_chunks, n_problems, dim_b))
        st.q = np.empty((n_problems, dim_b))


def _uot_run_reduced(st, n_steps, stopThr, errs):
    """``uot_run`` one iteration at a time for rows split across processes:
    after each pass the chunk partials of K^T u are merged, summed over the
    processes together with the maxima of the u change and a flag for a
    non-finite u (``st.reduction.col_sum_max``), v = (b / K^T u)^fi2 is
    formed from the global sums (the same on every process), and
    :func:`uot_rule` decides on the values of ``st.reduction.agree``.  Same
    returns and ``errs`` buffer as ``uot_run``."""
    _ensure_kernel(st)
    u, v, q = st.u, st.v, st.q
    uprev, vprev = np.empty_like(u), np.empty_like(v)
    pu = np.empty((st.n_chunks, 4))
    every = np.ones(u.shape[0], dtype=np.bool_)
    loc = np.empty(3)
    for it in range(n_steps):
        uprev[:, :] = u
        vprev[:, :] = v
        uot_fused_pass(st.Kmat, st.a, v, st.fi1, st.n_chunks, st.chunk_rows, st.Q, u, False, pu)
        merge_chunks(st.Q, every, q)
        finite_u = bool(np.all(pu[:, 2] != 0.0))
        loc[0] = np.max(pu[:, 0]) if finite_u else 0.0
        loc[1] = np.max(pu[:, 1]) if finite_u else 0.0
        loc[2] = 0.0 if finite_u else 1.0
        st.reduction.col_sum_max(q, loc)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            v[:, :] = (st.b / q) if st.fi2 == 1.0 else (st.b / q) ** st.fi2
        failed = loc[2] != 0.0 or bool(np.any(q == 0.0)) or not np.isfinite(v).all()
        dv, mv = 0.0, 0.0
        if not failed:
            dv = float(np.max(np.abs(v - vprev)))
            mv = max(float(np.max(np.abs(v))), float(np.max(np.abs(vprev))))
        failed, du, mu, dv, mv = st.reduction.agree((failed, loc[0], loc[1], dv, mv))
        verdict = uot_rule(failed, du, mu, dv, mv, stopThr, errs, it)
        if verdict == FAILED:
            u[:, :] = uprev
            v[:, :] = vprev
            return it, True
        if verdict == CONVERGED:
            return it + 1, False
    return n_steps, False


def uot_steps(st, n_steps, stopThr, errs):
    """Up to ``n_steps`` iterations u = (a / K v)^fi1, v = (b / K^T u)^fi2
    under POT's per-iteration stopping rule (:func:`uot_rule`).  Appends the
    error of every completed iteration to the list ``errs``.  Returns
    (iterations run, failed); on failure the first value is the index of the
    failing iteration (undone, no error stored)."""
    if st.reduction is not None:
        return _run_steps(lambda *args: _uot_run_reduced(st, *args), (n_steps, stopThr),
                          n_steps, errs)
    _ensure_kernel(st)
    if st.small and n_steps <= _config.SMALL_MAX_ITER:
        return _run_steps(uot_small_run, (st.Kmat, st.a, st.b, st.u, st.v, st.fi1, st.fi2,
                                          n_steps, stopThr), n_steps, errs)
    _blocked_layout(st)
    # the lane copy of v (a float32 K: float32 lanes; None for a float64 K,
    # whose lanes are v itself) and the chunks' flags, made here so that
    # the chunk kernel's addresses are taken for their types
    vl = np.empty(st.v.shape, dtype=st.Kmat.dtype) if st.Kmat.itemsize < 8 else None
    pu = np.empty((st.n_chunks, 4))
    lanes = st.v if vl is None else vl
    addr_lanes = uot_chunk_address(st.M, st.Kmat, st.a, lanes, st.Q, st.u, pu)
    addr_64 = uot_chunk_address(st.M, st.Kmat, st.a, st.v, st.Q, st.u, pu)
    addr_col = uot_col_address(st.M, st.Kmat, st.b, lanes, st.Q, st.v, pu)
    addrs = np.array([addr_lanes, addr_64, addr_col,
                      uot_pass_address(st.M, st.Kmat, st.a, lanes, st.Q, st.u, pu),
                      uot_pass_address(st.M, st.Kmat, st.a, st.v, st.Q, st.u, pu)],
                     dtype=np.int64)
    return _run_steps(uot_run, (addrs, numba.get_num_threads(), st.M,
                                np.float64(st.c), st.Kmat, st.a, st.b, st.u, st.v, vl, st.fi1,
                                st.fi2, st.n_chunks, st.chunk_rows, st.Q, pu, n_steps,
                                stopThr), n_steps, errs)


def uot_scalings(st):
    """(u, v) as host arrays (n_problems, dim_a), (n_problems, dim_b), float64."""
    return st.u, st.v


def uot_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,) (the plans
    are not formed)."""
    _ensure_kernel(st)
    if st.small:
        loss = np.empty(st.u.shape[0])
        uot_small_loss(st.Kmat, st.M, st.u, st.v, loss)
        return loss
    part = np.empty((st.n_chunks, st.u.shape[0]))
    _blocked_pass(st, _LOSS, st.v, st.u, part)
    loss = part[0].copy()
    for ch in range(1, st.n_chunks):  # chunk order, as ``scaled_loss``
        loss += part[ch]
    return loss


def uot_plan(st):
    """The plan diag(u) K diag(v) of the first problem, (dim_a, dim_b), dtype
    of M.  On the blocked path it is formed in place of K (the state's last
    use in a solve; K is formed again if the state is used after it):
    no second array of n m entries to fault in, and no parallel kernel of
    its own to compile (``scaled_plan``, 0.3 s)."""
    _ensure_kernel(st)
    if st.small:
        plan = np.empty(st.Kmat.shape, dtype=st.Kmat.dtype)
        uot_small_plan(st.Kmat, st.u[0], st.v[0], plan)
        return plan
    _blocked_pass(st, _PLAN, st.v, st.u, np.empty((st.n_chunks, 4)))
    plan, st.Kmat = st.Kmat, None
    return plan


def uot_stats(st, want_plan):
    """The first problem's plan (dtype of M; None unless ``want_plan``), its
    row and column sums (host float64 (dim_a,), (dim_b,)) and host float64
    [<plan, M>, sum plan log(plan / c + 1e-16)] (POT's ``kl_div(plan, c)``)."""
    _ensure_kernel(st)
    return _stats(uot_small_plan_stats if st.small else uot_plan_stats,
                  (st.Kmat, st.M, st.u[0], st.v[0], st.C, st.ca, st.cb, st.use_mat),
                  st.M.shape, st.M.dtype, want_plan, st.small)


class UotLogState:
    """State of a (batched) log-domain unbalanced Sinkhorn run on the CPU.

    Same parameters as :class:`UotState`, except that ``u``, ``v`` are the
    initial log-scalings.  The log-kernel is c M0_ij + ga_i + gb_j with
    c = -1 / reg: M0 = M - reg log C (formed here) and ga = gb = 0 with an
    explicit C; else M0 = M, ga = log ca, gb = log cb.

    A state of at most ``_config.SMALL_MAX_ENTRIES`` entries runs the serial
    kernels ``uot_log_small_run``, ``uot_log_small_loss`` and
    ``uot_log_small_plan_stats`` (as :class:`UotState`).
    """

    def __init__(self, M, reg, ca, cb, C, use_mat, a, b, u, v, fi1, fi2):
        dim_a, dim_b = M.shape
        n_problems = u.shape[0]
        self.M = M
        self.c = -1.0 / reg
        self.ca, self.cb, self.C, self.use_mat = ca, cb, C, use_mat
        with np.errstate(divide="ignore"):
            if use_mat:
                self.M0 = np.ascontiguousarray(M - reg * np.log(C), dtype=M.dtype)
                ga, gb = np.zeros((1, dim_a)), np.zeros((1, dim_b))
            else:
                self.M0 = M
                ga, gb = np.log(ca).reshape(1, -1), np.log(cb).reshape(1, -1)
            self.la, self.lb = np.log(a), np.log(b)
        self.ga, self.gb = np.ascontiguousarray(ga), np.ascontiguousarray(gb)
        self.u, self.v = u, v
        self.fi1, self.fi2 = fi1, fi2
        self.small = is_small(dim_a, dim_b, n_problems, True)
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, n_problems, dim_b)


def uot_log_steps(st, n_steps, stopThr, errs):
    """Up to ``n_steps`` log-domain iterations log u = fi1 (log a - LSE_j(log K
    + log v)), log v = fi2 (log b - LSE_i(log K + log u)) under POT's
    stopping rule (:func:`uot_rule`) on the log-scalings.  ``errs`` and the
    returns as :func:`uot_steps`."""
    if st.small and n_steps <= _config.SMALL_MAX_ITER:
        return _run_steps(uot_log_small_run, (st.M0, st.c, st.ga, st.gb, st.la, st.lb, st.fi1,
                                              st.fi2, st.u, st.v, n_steps, stopThr),
                          n_steps, errs)
    return _run_steps(uot_log_run, (st.M0, st.c, st.ga, st.gb, st.la, st.lb, st.fi1, st.fi2,
                                    st.u, st.v, st.n_chunks, st.chunk_rows, n_steps, stopThr),
                      n_steps, errs)


def uot_log_potentials(st):
    """(log u, log v) as host arrays (n_problems, dim_a), (n_problems, dim_b), float64."""
    return st.u, st.v


def uot_log_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,)."""
    loss = np.empty(st.u.shape[0])
    f, g = np.ascontiguousarray(st.u + st.ga), np.ascontiguousarray(st.v + st.gb)
    if st.small:
        uot_log_small_loss(st.M, st.c, f, g, loss)
    else:
        gibbs_loss(st.M, st.c, f, g, st.n_chunks, st.chunk_rows, loss)
    return loss


def uot_log_stats(st, want_plan):
    """:func:`uot_stats` for the log domain: plan_ij = exp(c M0_ij + log u_i
    + ga_i + log v_j + gb_j)."""
    fu, fv = st.u[0] + st.ga[0], st.v[0] + st.gb[0]
    return _stats(uot_log_small_plan_stats if st.small else uot_log_plan_stats,
                  (st.M0, st.M, st.c, fu, fv, st.C, st.ca, st.cb, st.use_mat),
                  st.M.shape, st.M.dtype, want_plan, st.small)
