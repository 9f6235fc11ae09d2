"""CPU kernels of the discounted cumulative sums, mirrored by name in ``numbaot/cuda/scan.py``.

Conventions shared by every kernel here
----------------------------------------
* A batch of ``B`` rows of length ``N`` is passed flat: ``x`` and ``out`` have
  shape (B * N,), C order (row ``r`` is ``x[r * N:(r + 1) * N]``), dtype float32
  or float64.  Arithmetic is float64 whatever the dtype; results are cast to
  ``out.dtype`` when stored.
* ``gamma`` has shape (B,), float64: the discount of each row.
* ``dones`` is ``None`` (no episode boundaries) or a flat uint8 array (B * N,):
  ``dones[t] != 0`` marks t as the last step of an episode, so no sum crosses
  the boundary between t and t + 1 (in either direction).
* Scan order: ``reverse=True`` is the right-to-left scan (the RL return,
  y_t = x_t + gamma (1 - d_t) y_{t+1}); ``reverse=False`` the left-to-right
  scan (y_t = x_t + gamma (1 - d_{t-1}) y_{t-1}).  Scan position p of a row is
  index t = N - 1 - p (reverse) or t = p.  Every kernel is written in scan
  order: y_p = a_p y_{p-1} + x_p with the link coefficient a_p = gamma, or 0
  where the link crosses an episode boundary.
* Long rows are split into ``nc`` chunks of ``L`` scan positions (the last
  one possibly shorter; ``nc = 1, L = N`` for the row-per-task path).  The
  split depends only on the shape (``numbaot.scan`` chooses it), never on the
  thread count, so results are bit-identical for any number of threads.

Algorithm (reduce, then scan)
-----------------------------
The recurrence is a scan over the associative operator
(a1, s1) o (a2, s2) = (a1 a2, s1 a2 + s2) (Blelloch 1990, "Prefix sums and
their applications", sec. 1.4: first-order linear recurrences).  For a row
split into chunks: ``chunk_aggregates`` reduces every chunk to its pair
(A_c, S_c) = (product of its links, its local scan from 0) in parallel;
``chunk_carries`` scans these pairs serially per row (O(N / L) work) into the
value entering each chunk; ``scan_chunks`` rescans every chunk in parallel
from its carry and writes the results.  Work 2N, depth 2L + N / L.

The recurrence is a chain of dependent fused multiply-adds, bound by their
latency (4 cycles each): a task therefore advances four segments in lockstep
(four chains in flight per core): four rows, or four consecutive chunks of a
split row (four streams 4 L entries apart; on one core at N = 10^7 this
measured 8-22 % faster than one chain per chunk).
``chunk_aggregates`` needs no chain at all: S is a polynomial in gamma over
the chunk's entries after its last episode boundary, evaluated by vectorised
dot products with a table of powers (``_poly``).

Non-finite values are found by the kernels that write them (``scan_chunks``,
``gae_returns``), which return a count that is 0 iff every value stored is
finite: NaN and inf are absorbing in the recurrence (0 * inf = nan), so in
float64 a segment's last value tells; a float32 output can also overflow in
the cast between two finite float64 sums, so there each segment, still in
cache, is read back once (vectorised).  A NaN or inf input and a sum that
overflows the output dtype are therefore caught without another pass over
the data from memory; the caller then looks for NaN/inf in the inputs
(``count_nonfinite``) only to word the error.
"""
import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from .. import _config
from .._config import INNER as _INNER
from .._config import JIT_OPTIONS, SCAN_POLY_BLOCK
from .._dispatch import threads_at_most

__all__ = [
    "scan_rows",
    "chunk_aggregates",
    "chunk_carries",
    "scan_chunks",
    "count_nonfinite",
    "gamma_grad_partials",
    "sum_rows",
    "gae_deltas",
    "gae_returns",
]

_PAR = dict(JIT_OPTIONS, parallel=True)
#: O(B * nc) bookkeeping kernels run serially: a parallel launch costs more
_SER = dict(JIT_OPTIONS)
#: Numba-inlined helpers: only the hot per-entry ones (``_link``, ``_run``,
#: ``_lockstep4``, ``_dot``).  ``_segment``, ``_poly`` and ``_scan_group``
#: are plain compiled functions that LLVM inlines: typed and lowered once
#: instead of once per call site.  First-call compile of
#: ``discounted_cumsum_right`` 4.9-5.8 -> 3.2-3.3 s, run times unchanged in
#: three process pairs (BENCHMARKS.md, "First-call (compile) latency"); all
#: helpers plain compiled 2.8-2.9 s but (8192, 16) and (4096, 1000) ran
#: 1.1-1.15x slower.
_INL = dict(JIT_OPTIONS, inline="always")

#: segments advanced in lockstep by one task
LANES = 4

#: least entries of a task of whole rows in ``scan_chunks`` (rows are
#: independent: the split changes no result)
_ROW_TASK_ENTRIES = 1 << 14


@njit(**JIT_OPTIONS, **_INNER)
def _segment(s, nc, N, L, reverse):
    """(row, chunk, flat index of the first scan position, step, length) of
    segment s = row * nc + chunk."""
    r = s // nc
    c = s - r * nc
    p0 = c * L
    ln = min(N - p0, L)
    if reverse:
        return r, c, r * N + (N - 1 - p0), -1, ln
    return r, c, r * N + p0, 1, ln


@njit(**_INL)
def _link(g, dones, xi, reverse):
    """Link coefficient of scan position at flat index xi (uint64): gamma, or
    0 where the link crosses an episode boundary (d_t for the right scan,
    d_{t-1} for the left scan; at a row start the link multiplies the zero
    initial value, so the previous row's entry read there does not matter)."""
    if dones is None:
        return g
    if reverse:
        ki = xi
    else:
        ki = xi - np.uint64(1) if xi > 0 else xi
    return g if dones[ki] == 0 else 0.0


@njit(**_INL, **_INNER)
def _lockstep4(x, dones, out, reverse, st, i, b0, b1, b2, b3, g0, g1, g2, g3, y0, y1, y2,
               y3):
    """Scan position i of four segments in lockstep (flat index b + st i,
    unsigned: no negative-index wraparound code); writes out, returns the
    four new values."""
    i0 = np.uint64(b0 + st * i)
    i1 = np.uint64(b1 + st * i)
    i2 = np.uint64(b2 + st * i)
    i3 = np.uint64(b3 + st * i)
    y0 = _link(g0, dones, i0, reverse) * y0 + np.float64(x[i0])
    y1 = _link(g1, dones, i1, reverse) * y1 + np.float64(x[i1])
    y2 = _link(g2, dones, i2, reverse) * y2 + np.float64(x[i2])
    y3 = _link(g3, dones, i3, reverse) * y3 + np.float64(x[i3])
    out[i0] = y0
    out[i1] = y1
    out[i2] = y2
    out[i3] = y3
    return y0, y1, y2, y3


@njit(**_INL)
def _run(x, dones, out, g, base, step, reverse, i0, i1, y):
    """Serial scan of positions i0..i1-1 of one segment from value y; writes
    out; returns the last value."""
    for i in range(i0, i1):
        xi = np.uint64(base + step * i)
        y = _link(g, dones, xi, reverse) * y + np.float64(x[xi])
        out[xi] = y
    return y


def _stored_float32_finite(out, s0, s1, nc, N, L, reverse):
    """True iff every value of segments s0..s1-1 of ``out`` is finite as
    stored: ``_group_finite`` for a float32 ``out``, True (no code) for a
    float64 one, where the segment ends tell (see ``scan_chunks``).  Chosen when the kernel is typed (``overload``), so the
    float64 kernels neither compile nor run the read-back."""
    raise NotImplementedError("called from the kernels only")


@overload(_stored_float32_finite, inline="always")
def _stored_float32_finite_impl(out, s0, s1, nc, N, L, reverse):
    if out.dtype.bitwidth < 64:
        return lambda out, s0, s1, nc, N, L, reverse: _group_finite(out, s0, s1, nc, N, L,
                                                                    reverse)
    return lambda out, s0, s1, nc, N, L, reverse: True


def _stored_float32_range_finite(out, lo, hi):
    """``_stored_float32_finite`` of the flat range out[lo:hi]: True iff
    every value there is finite as stored (no code for a float64 ``out``)."""
    raise NotImplementedError("called from the kernels only")


@overload(_stored_float32_range_finite, inline="always")
def _stored_float32_range_finite_impl(out, lo, hi):
    if out.dtype.bitwidth < 64:
        return lambda out, lo, hi: _stored_finite(out, lo, hi)
    return lambda out, lo, hi: True


@njit(**JIT_OPTIONS, **_INNER)
def _group_finite(out, s0, s1, nc, N, L, reverse):
    """True iff the float32 entries of segments s0..s1-1 are all finite
    (``_stored_finite`` on the memory of each)."""
    for s in range(s0, s1):
        r, c, b, st, ln = _segment(s, nc, N, L, reverse)
        lo = b - (ln - 1) if reverse else b
        if not _stored_finite(out, lo, lo + ln):
            return False
    return True


@njit(**JIT_OPTIONS, **_INNER)
def _stored_finite(out, lo, hi):
    """True iff the float32 entries out[lo:hi] are all finite: none has the
    all-ones exponent of inf/NaN.  Integer tests on the bits of entries just
    written (still in cache), vectorised (a slice indexed from 0); float
    tests would not do: fast-math's reassociation may fold v - v to 0."""
    bits = out[lo:hi].view(np.uint32)
    n = 0
    for k in range(bits.shape[0]):
        n += (bits[k] & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return n == 0


#: block length of the vectorised chunk reduction ``_poly``
#: (``_config.SCAN_POLY_BLOCK``)
_PB = SCAN_POLY_BLOCK


@njit(**_INL, **_INNER)
def _dot(w, xs, n):
    """sum_q w[q] xs[q], q < n (vectorises: slices indexed from 0)."""
    acc = 0.0
    for q in range(n):
        acc += w[q] * np.float64(xs[q])
    return acc


@njit(**JIT_OPTIONS, **_INNER)
def _poly(x, lo, n, g, right, w):
    """S of an unmasked chunk occupying x[lo:lo + n] (memory order), without
    the serial chain: right scan S = sum_i g^i x[lo + i], left scan
    S = sum_i g^(n-1-i) x[lo + i].  Blocks of _PB entries are reduced by dot
    products with a table of powers (vectorised), and combined with the
    powers g^(_PB m) (one step per block).  Blocks are read in memory order.  ``w`` is a (_PB,) work array.
    A NaN/inf entry still makes S non-finite (0 * inf = nan)."""
    nb = n // _PB
    rem = n - nb * _PB
    p = 1.0
    if right:
        for q in range(_PB):  # w[q] = g^q
            w[q] = p
            p *= g
        gB = p
        # blocks in memory order (a plain forward stream for the prefetcher),
        # block m weighted by P = g^(_PB m): at most n / _PB roundings in P
        acc = 0.0
        P = 1.0
        for m in range(nb):
            k = lo + m * _PB
            acc += P * _dot(w, x[k:k + _PB], _PB)
            P *= gB
        return acc + P * _dot(w, x[lo + nb * _PB:lo + n], rem)  # the partial top block
    for q in range(_PB - 1, -1, -1):  # w[q] = g^(_PB - 1 - q)
        w[q] = p
        p *= g
    gB = p
    acc = _dot(w[_PB - rem:], x[lo:lo + rem], rem)  # the first entries, partial
    for m in range(nb):
        k = lo + rem + m * _PB
        acc = acc * gB + _dot(w, x[k:k + _PB], _PB)
    return acc


@njit(**JIT_OPTIONS, **_INNER)
def _scan_group(grp, x, gamma, dones, reverse, N, L, carry, lim, out):
    """Scan the segments of task ``grp`` (four in lockstep, fewer in the last
    task) from their carries; returns 1 if a value written is not finite
    once stored, else 0 (see ``scan_chunks``)."""
    B = gamma.shape[0]
    nc = 1 if carry is None else carry.shape[1]
    S = B * nc
    s0 = grp * LANES
    if s0 + LANES <= S:
        r0, c0, b0, st, l0 = _segment(s0, nc, N, L, reverse)
        r1, c1, b1, st, l1 = _segment(s0 + 1, nc, N, L, reverse)
        r2, c2, b2, st, l2 = _segment(s0 + 2, nc, N, L, reverse)
        r3, c3, b3, st, l3 = _segment(s0 + 3, nc, N, L, reverse)
        g0, g1, g2, g3 = gamma[r0], gamma[r1], gamma[r2], gamma[r3]
        if carry is None:
            y0 = y1 = y2 = y3 = 0.0
        else:
            y0, y1, y2, y3 = carry[r0, c0], carry[r1, c1], carry[r2, c2], carry[r3, c3]
        m = min(min(l0, l1), min(l2, l3))
        for i in range(m):
            y0, y1, y2, y3 = _lockstep4(x, dones, out, reverse, st, i, b0, b1, b2, b3,
                                        g0, g1, g2, g3, y0, y1, y2, y3)
        y0 = _run(x, dones, out, g0, b0, st, reverse, m, l0, y0)
        y1 = _run(x, dones, out, g1, b1, st, reverse, m, l1, y1)
        y2 = _run(x, dones, out, g2, b2, st, reverse, m, l2, y2)
        y3 = _run(x, dones, out, g3, b3, st, reverse, m, l3, y3)
        ok = abs(y0) < lim and abs(y1) < lim and abs(y2) < lim and abs(y3) < lim
        if ok:
            ok = _stored_float32_finite(out, s0, s0 + LANES, nc, N, L, reverse)
        return 0 if ok else 1
    bad = 0
    for s in range(s0, S):
        r, c, b, st, ln = _segment(s, nc, N, L, reverse)
        y = _run(x, dones, out, gamma[r], b, st, reverse, 0, ln,
                 0.0 if carry is None else carry[r, c])
        ok = abs(y) < lim
        if ok:
            ok = _stored_float32_finite(out, s, s + 1, nc, N, L, reverse)
        if not ok:
            bad = 1
    return bad


@njit(**JIT_OPTIONS, **_INNER)
def _scan_rows4(x, gamma, dones, reverse, N, r0, r4, lim, out):
    """Rows r0..r4-1 (r4 - r0 a multiple of four) of :func:`_scan_rows`,
    four in lockstep; returns the count of groups whose last values are not
    finite.  The groups' loop is this function's own, with each group's
    offsets computed directly, and its bounds come from the caller: the
    same loop ran about twice as slow behind a bounds test or a remainder
    computed in the same function, and through ``_scan_group`` per group
    (``scan_rows_serial`` at (8192, 16): 92 or 60-67 us against 34 us)."""
    st = -1 if reverse else 1
    off = N - 1 if reverse else 0
    bad = 0
    for s0 in range(r0, r4, LANES):
        b0 = s0 * N + off
        b1 = b0 + N
        b2 = b1 + N
        b3 = b2 + N
        g0, g1, g2, g3 = gamma[s0], gamma[s0 + 1], gamma[s0 + 2], gamma[s0 + 3]
        y0 = y1 = y2 = y3 = 0.0
        for i in range(N):
            y0, y1, y2, y3 = _lockstep4(x, dones, out, reverse, st, i, b0, b1, b2, b3,
                                        g0, g1, g2, g3, y0, y1, y2, y3)
        ok = abs(y0) < lim and abs(y1) < lim and abs(y2) < lim and abs(y3) < lim
        bad += 0 if ok else 1
    return bad


@njit(**JIT_OPTIONS, **_INNER)
def _scan_rows(x, gamma, dones, reverse, N, r0, r1, lim, out):
    """Scan rows r0..r1-1, whole rows of N positions from 0: four in
    lockstep (:func:`_scan_rows4`), the last (r1 - r0) % 4 one by one;
    returns 0 iff every value stored is finite (as ``_scan_group``).  A
    float32 ``out`` is read back once, after all rows (one vectorised pass
    over rows still in cache, not one per group)."""
    r4 = r1 - (r1 - r0) % LANES
    bad = _scan_rows4(x, gamma, dones, reverse, N, r0, r4, lim, out)
    st = -1 if reverse else 1
    off = N - 1 if reverse else 0
    for r in range(r4, r1):
        y = _run(x, dones, out, gamma[r], r * N + off, st, reverse, 0, N, 0.0)
        bad += 0 if abs(y) < lim else 1
    if bad == 0 and not _stored_float32_range_finite(out, r0 * N, r1 * N):
        bad = 1
    return bad


@njit(**_PAR)
def scan_chunks(x, gamma, dones, reverse, N, L, carry, lim, out):
    """out = the scan of every chunk started from ``carry``; returns a count
    that is 0 iff every value written is finite (it counts the tasks that
    wrote a value that is not).

    x, out : (B * N,) float32/float64.  gamma : (B,) float64.
    dones : None or (B * N,) uint8.  carry : (B, nc) float64, the value of the
    scan just before each chunk (0 for the first chunk of a row), or None:
    one chunk per row (L = N), started from 0.
    lim : float64, the smallest magnitude that is not finite once stored in
    out's dtype (``overflow_limit``: inf for float64).

    The test of the values written costs no work in the chain of dependent
    multiply-adds: NaN and inf are absorbing in y_p = a_p y_{p-1} + x_p
    (0 * inf = nan), so a segment wrote a non-finite float64 value iff its
    last value is not finite (|y| < inf fails).  A float32 output can
    also overflow in the cast between two finite float64 sums (6e38 between
    3e38 and 3e38): there the segments just written, still in cache, are read
    back once, vectorised (``_stored_finite``).
    """
    B = gamma.shape[0]
    if carry is None:
        # whole rows: tasks of ``_ROW_TASK_ENTRIES`` entries or more (a
        # multiple of four rows), each looping over its rows in ``_scan_rows``
        # (not one ``_scan_group`` call per group of four)
        rb = max(LANES, _ROW_TASK_ENTRIES // max(N, 1) // LANES * LANES)
        bad = 0
        for t in prange((B + rb - 1) // rb):
            bad += _scan_rows(x, gamma, dones, reverse, N, t * rb, min(B, (t + 1) * rb), lim,
                              out)
        return bad
    nc = carry.shape[1]
    ng = (B * nc + LANES - 1) // LANES
    bad = 0
    for grp in prange(ng):
        bad += _scan_group(grp, x, gamma, dones, reverse, N, L, carry, lim, out)
    return bad


#: ``overflow_limit(float32)``
_LIM32 = 2.0 ** 128 - 2.0 ** 103


def _limit(out):
    """``overflow_limit(out.dtype)`` inside a kernel (chosen when it is typed)."""
    raise NotImplementedError("called from the kernels only")


@overload(_limit, inline="always")
def _limit_impl(out):
    if out.dtype.bitwidth < 64:
        return lambda out: _LIM32
    return lambda out: math.inf


def _per_row(gamma, B):
    """gamma as a (B,) array inside a kernel: a float is broadcast."""
    raise NotImplementedError("called from the kernels only")


@overload(_per_row, inline="always")
def _per_row_impl(gamma, B):
    if isinstance(gamma, types.Float):
        return lambda gamma, B: np.full(B, gamma)
    return lambda gamma, B: gamma


@njit(**_SER)
def scan_rows_serial(x, gamma, dones, reverse, B, out):
    """``scan_rows`` on the calling thread, no parallel region: for batches
    too small to be worth a second thread (``_threads``).  N = out.size / B.
    gamma : (B,) float64, or a float (every row).  No thread count is
    changed and the discounts need no host array: a call costs little also
    when the interpreter's and Numba's data are out of cache (a call after
    other work, bench_scan.py section 2)."""
    g = _per_row(gamma, B)
    N = out.shape[0] // B
    return _scan_rows(x, g, dones, reverse, N, 0, B, _limit(out), out)


def scan_rows(x, gamma, dones, reverse, N, lim, out):
    """out = the scan of every row (one task per row, four rows in lockstep):
    ``scan_chunks`` with one chunk per row started from 0 (no carry array);
    returns its count (0 iff every value written is finite)."""
    return scan_chunks(x, gamma, dones, reverse, N, N, None, lim, out)


@njit(**_PAR)
def chunk_aggregates(x, gamma, dones, reverse, N, L, agg_a, agg_s):
    """The pair (A, S) of every chunk: A = product of its links (gamma^len,
    or 0 when an episode boundary cuts it), S = its scan from 0 at its last
    scan position.  agg_a, agg_s : (B, nc) float64.

    S is a polynomial in gamma over the chunk's entries after its last cut
    (``_poly``, vectorised); the last cut is found by a search of the mask."""
    B = gamma.shape[0]
    nc = agg_a.shape[1]
    for s in prange(B * nc):
        w = np.empty(_PB)
        r, c, b, st, ln = _segment(s, nc, N, L, reverse)
        g = gamma[r]
        lo = b - (ln - 1) if reverse else b
        hi = lo + ln - 1
        cut = False
        if dones is not None:
            if reverse:
                # link at t is cut by d_t; the last cut in scan order is the lowest t
                for t in range(lo, hi + 1):
                    if dones[t] != 0:
                        cut = True
                        hi = t
                        break
            else:
                # link at t is cut by d_{t-1} (t > row start); the last cut is the highest t
                for t in range(hi, max(lo, r * N + 1) - 1, -1):
                    if dones[t - 1] != 0:
                        cut = True
                        lo = t
                        break
        agg_s[r, c] = _poly(x, lo, hi - lo + 1, g, reverse, w)
        agg_a[r, c] = 0.0 if cut else math.pow(g, ln)


@njit(**_SER)
def chunk_carries(agg_a, agg_s, carry):
    """carry[r, c] = value of the scan of row r just before chunk c: the
    exclusive scan of the chunk pairs, Y <- A_c Y + S_c, serial per row."""
    B, nc = agg_a.shape
    for r in range(B):
        y = 0.0
        for c in range(nc):
            carry[r, c] = y
            y = agg_a[r, c] * y + agg_s[r, c]


@njit(**_PAR)
def count_nonfinite(x):
    """Number of NaN/inf entries of the flat array x."""
    n = 0
    for i in prange(x.shape[0]):
        if not np.isfinite(x[i]):
            n += 1
    return n


@njit(**_PAR)
def gamma_grad_partials(grad_input, output, dones, reverse, N, L, part):
    """part[r, c] = sum over the scan positions p >= 1 of chunk c of row r of
    grad_input[t_p] * link_p * output[t_{p-1}], with link_p = 1, or 0 across an
    episode boundary: the chunk's share of dL/dgamma_r = <grad_input, dy/dgamma
    source> (see ``numbaot.scan``).  part : (B, nc) float64."""
    B, nc = part.shape
    for s in prange(B * nc):
        r, c, b, st, ln = _segment(s, nc, N, L, reverse)
        i0 = 1 if c == 0 else 0
        acc = 0.0
        for i in range(i0, ln):
            xi = b + st * i
            acc += (np.float64(grad_input[xi]) * _link(1.0, dones, xi, reverse)
                    * np.float64(output[xi - st]))
        part[r, c] = acc


@njit(**_SER)
def sum_rows(part, res):
    """res[r] = sum_c part[r, c], in chunk order (deterministic)."""
    B, nc = part.shape
    for r in range(B):
        acc = 0.0
        for c in range(nc):
            acc += part[r, c]
        res[r] = acc


@njit(**_PAR)
def gae_deltas(rewards, values, Nv, last, dones, gamma, N, out):
    """TD residuals delta_t = r_t + gamma (1 - d_t) V_{t+1} - V_t.

    rewards, out : (B * N,).  values : (B * Nv,) with Nv = N (then
    V_N = last[r]) or Nv = N + 1 (V_N = values[r, N]).  last : (B,) float64.
    dones : None or (B * N,) uint8.  gamma : (B,) float64.
    """
    B = gamma.shape[0]
    for r in prange(B):
        g = gamma[r]
        for t in range(N):
            if t + 1 < N or Nv > N:
                vn = np.float64(values[r * Nv + t + 1])
            else:
                vn = last[r]
            k = 1.0
            if dones is not None:
                k = 1.0 if dones[r * N + t] == 0 else 0.0
            # a multiplication (not a select): a non-finite V_{t+1} stays visible
            out[r * N + t] = (np.float64(rewards[r * N + t]) + g * k * vn
                              - np.float64(values[r * Nv + t]))


@njit(**_PAR)
def gae_returns(adv, values, Nv, N, lim, out):
    """out[r, t] = adv[r, t] + V[r, t] (the lambda-returns); returns the
    number of rows with a value that is not finite once stored (|v| >= lim,
    or NaN; see ``scan_chunks``)."""
    B = adv.shape[0] // N if N > 0 else 0
    bad = 0
    for r in prange(B):
        ok = True
        for t in range(N):
            v = np.float64(adv[r * N + t]) + np.float64(values[r * Nv + t])
            out[r * N + t] = v
            ok &= abs(v) < lim
        if not ok:
            bad += 1
    return bad


# --------------------------------------------------------------------------
# host drivers (the same names and meaning in numbaot/cuda/scan.py)
# --------------------------------------------------------------------------
def layout(B, N):
    """(nc, L): chunks per row and scan positions per chunk.  Rows are split
    only when they are longer than ``_config.SCAN_CHUNK`` and the batch has
    fewer than ``_config.SCAN_SPLIT_MAX_ROWS`` rows; the split depends on the
    shape alone."""
    L = _config.SCAN_CHUNK
    if N > L and B < _config.SCAN_SPLIT_MAX_ROWS:
        return -(-N // L), L
    return 1, max(N, 1)


def _threads(B, N):
    """Threads worth waking for B * N entries (``_config.SCAN_MIN_THREAD_WORK``
    each), for ``threads_at_most``."""
    return -(-(B * N) // _config.SCAN_MIN_THREAD_WORK)


def empty(n, dtype):
    return np.empty(n, dtype=dtype)


def overflow_limit(dtype):
    """The smallest float64 magnitude that is not finite once stored in
    ``dtype``: a finite float64 y is stored finite iff |y| < overflow_limit.
    float64: inf.  float32: 2^128 - 2^103, halfway between FLT_MAX =
    2^128 - 2^104 and 2^128 (round to nearest even takes it up, FLT_MAX's
    last significand bit being 1)."""
    if np.dtype(dtype) == np.float32:
        return _LIM32
    return math.inf


def run_scan(x, gamma, dones, reverse, B, N, out):
    """out = the scan of every row of x (flat (B * N,)); returns a count that
    is 0 iff every value of out is finite (non-zero when the input has
    NaN/inf or a sum overflows out's dtype).  gamma: (B,) float64, or (on
    the CPU) a float for every row."""
    if B * N < _config.SCAN_MIN_THREAD_WORK and N <= _config.SCAN_CHUNK:
        # one task per row (``layout``: nc = 1), one thread; tested first,
        # without ``layout``'s call: a short call costs little also cold
        return scan_rows_serial(x, gamma, dones, reverse, B, out)
    nc, L = layout(B, N)
    if not isinstance(gamma, np.ndarray):
        gamma = np.full(B, gamma)
    lim = overflow_limit(out.dtype)
    with threads_at_most(_threads(B, N)):
        if nc == 1:
            return scan_rows(x, gamma, dones, reverse, N, lim, out)
        agg_a = np.empty((B, nc))
        agg_s = np.empty((B, nc))
        chunk_aggregates(x, gamma, dones, reverse, N, L, agg_a, agg_s)
        carry = np.empty((B, nc))
        chunk_carries(agg_a, agg_s, carry)
        return scan_chunks(x, gamma, dones, reverse, N, L, carry, lim, out)


def run_gamma_grad(grad_input, output, dones, reverse, B, N):
    """dL/dgamma of every row, (B,) float64 (see ``gamma_grad_partials``)."""
    nc, L = layout(B, N)
    part = np.empty((B, nc))
    with threads_at_most(_threads(B, N)):
        gamma_grad_partials(grad_input, output, dones, reverse, N, L, part)
    res = np.empty(B)
    sum_rows(part, res)
    return res


def run_gae_deltas(rewards, values, Nv, last, dones, gamma, B, N, dtype):
    out = np.empty(B * N, dtype=np.float64)
    with threads_at_most(_threads(B, N)):
        gae_deltas(rewards, values, Nv, last, dones, gamma, N, out)
    return out


def run_gae_returns(adv, values, Nv, B, N, out):
    """out = adv + values (the returns); returns a count that is 0 iff every
    value of out is finite."""
    with threads_at_most(_threads(B, N)):
        return gae_returns(adv, values, Nv, N, overflow_limit(out.dtype), out)


#: The launcher contract shared with numbaot.cuda.scan (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("layout", "empty", "run_scan", "count_nonfinite", "run_gamma_grad",
             "run_gae_deltas", "run_gae_returns")
