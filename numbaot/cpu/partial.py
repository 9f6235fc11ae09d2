"""CPU kernels of entropic partial OT, mirrored by name in ``numbaot/cuda/partial.py``.

The problem (Benamou et al. 2015, prop. 5; POT's
``ot.partial.entropic_partial_wasserstein``): min <gamma, M> + reg * Omega(gamma)
under gamma 1 <= a, gamma^T 1 <= b, 1^T gamma 1 = m, solved by iterated
Bregman projections with Dykstra's corrections, step for step as POT 0.9.7.

Collapsed iteration
-------------------
POT keeps three (dim_a, dim_b) correction matrices q1, q2, q3 and forms two
dense ``diag(.) @ K`` products per iteration.  With K0 the initial kernel
(exp(-M / reg) scaled to mass m), every iterate is K_t = s_t diag(u_t) K0
diag(v_t), and the corrections are q1 = 1 / u_t (a column of row factors),
q2 = 1 / v_t (a row of column factors), q3 = 1 / s_t (a scalar): with
(u_{-1}, v_{-1}, s_{-1}) = (1, 1, 1),

* K * q1 = s_{t-1} K0 diag(v_{t-1}), so u_t = min(a / (s_{t-1} K0 v_{t-1}), 1);
* K1 * q2 = s_{t-1} diag(u_t) K0, so v_t = min(b / (s_{t-1} K0^T u_t), 1);
* K2 * q3 = diag(u_t) K0 diag(v_t), so s_t = m / sum_j v_t,j (K0^T u_t)_j.

One iteration is therefore one read of K0 (``partial_pass_at``: a tile of
rows gives (K0 v)_i, hence u_i, and is re-read from L1/L2 to accumulate
K0^T u), plus O(dim_a + dim_b) work.  POT's error ||K_{t-1} - K_t||_F (every
10 iterations) is taken in the same read of K0 as the next iteration's pass
(``partial_pass_at`` with ``with_err``, run ahead by ``partial_error``: its result is
kept for the next ``partial_steps``, dropped if the loop stops), so every
iteration, checks included, reads K0 once.  The log-domain solver
(``entropic_partial_wasserstein_logscale``) collapses the same way, with
potentials Lu, Lv, Ls added to LK0 = -M / reg + log m - LSE(-M / reg); its
fused pass computes one exponential per entry and its error needs no read
of M at all (the difference of two iterates is (dLu_i + dLv_j + dLs)).

POT's numerical failure, reproduced
-----------------------------------
POT divides elementwise (q1 = q1 * Kprev / K1, ...): a zero in K0 (an entry
of exp(-M / reg) that underflowed), in u (a zero weight a_i), in v or in s
puts a NaN/inf into a correction, and the next iterate is NaN: POT prints
"Warning: numerical errors at iteration t" and stops.  The collapsed
iteration never divides elementwise, so ``partial_run`` flags that event
instead (a zero in the dtype of the computation: float32 values below half
its smallest subnormal count as zero).  Not reproduced: POT's elementwise
corrections of subnormal entries of K round differently from the exact
ones, and a product of them may later round to zero in POT (float32 with
exp(-M / reg) near 1e-40); numbaot's iterate, exact to rounding, stays
finite there.  The log-domain solver fails, as POT's, when a potential is
not finite (a zero weight, m = 0).

Paired batches: n_hists problems share K0 (or M).  Every per-problem array
has the problem first: u (n_hists, dim_a), v (n_hists, dim_b), ``scal``
(n_hists, ...), ``a`` (1 or n_hists, dim_a); problem k starts from
(m_k / m_ref) K0 with K0 scaled to the largest mass m_ref (its s_{-1}; 1 for
one problem), so one K0 serves all.  A pass streams K0 once for all problems
(a tile of rows is re-read from L1/L2 per problem).  Each problem fails on
its own (``active``, ``fail_at``: the others go on); the batch has one
error, summed over the problems still active, and one stopping rule.

Conventions: K0 and M are (dim_a, dim_b), C order, float32 or float64, only
read; vectors are float64; rows are split by ``numbaot.cpu.chunk_layout``
(fixed chunks, merged in chunk order: bit-identical for any thread count).
Small problems run serial twins of the kernels (no parallel region; see
"Small problems" below).
"""
import math

import numba
import numpy as np
from numba import njit, prange, typeof
from numba.core import types as nbtypes

from .. import _config
from .._config import INNER as _INNER
from .._config import (
    COL_BLOCK,
    JIT_OPTIONS,
    PARTIAL_SUM_FLOOR,
    ROW_SUM_FLOOR,
)
from . import chunk_layout, serial_twin
from ._math import fast_exp
from ._pointer import NONE, address_for, call_at

#: the return type of ``partial_pass_at`` called at its address (``call_at``)
_F64 = nbtypes.float64
from ._small import knopp_rows, row_exp_sum
from .sinkhorn import (
    axpy_rows,
    dot_rows,
    gibbs_kernel,
    gibbs_kernel_serial,
    gibbs_loss,
    gibbs_loss_serial,
    knopp_rows_fit,
    log_col_lse,
    merge_chunks,
    merge_chunks_serial,
    scaled_loss,
    scaled_loss_serial,
    scaled_plan,
    scaled_plan_serial,
    tile_rows,
)

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)


@njit(**_SER, **_INNER)
def _min1(x):
    """np.minimum(x, 1): NaN stays NaN."""
    return 1.0 if x > 1.0 else x


@njit(**_SER, **_INNER)
def _min0(x):
    """np.minimum(x, 0): NaN stays NaN."""
    return 0.0 if x > 0.0 else x


@njit(**_SER, **_INNER)
def _finite(x):
    """Not NaN nor inf.  (Under the kernels' fast-math flags, nsz with
    reassoc, LLVM folds both ``np.isfinite(x)`` and ``x - x == 0`` to True
    for a NaN x computed as a difference of infinities; ``isnan``/``isinf``
    survive.)"""
    return not (math.isnan(x) or math.isinf(x))


# --------------------------------------------------------------------------
# multiplicative domain
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
def partial_chunk(K0, a, v, scal, vpp, upp, spp, active, ch0, ch1, chunk_rows, Q, u, part,
                  with_err):
    """The work of one iteration's pass on the chunks of rows [ch0, ch1) (one
    thread's share), for every active problem k: u[k, i] = min(a[k, i] /
    (sp_k (K0 v_k)_i), 1) for their rows, with sp_k = scal[k, 1], and
    Q[ch, k, :] = K0[rows of ch]^T u_k (new u).  With ``with_err``, also
    POT's error of the current iterate against (spp, upp, vpp), summed over
    the active problems and the chunk's rows into part[ch]: sum_ij (K0_ij
    (spp_k upp_ki vpp_kj - sp_k u_ki v_kj))^2 (old u), from the same read of
    the tile; without it ``vpp``, ``upp`` and ``spp`` are unused and
    part[ch] = 0.

    ``a`` is (1 or n_hists, dim_a) (one shared row or one per problem),
    ``v`` (n_hists, dim_b), ``u`` (n_hists, dim_a), ``Q`` (n_chunks,
    n_hists, dim_b) the chunks' column accumulators.  Tiles of rows
    (register-blocked dot products against a block of v_k held in L1), then
    the same tile re-read from L1/L2 for the column accumulation, problem by
    problem (``numbaot.cpu.sinkhorn``'s row helpers; a chunk's first tile
    stores its accumulators): K0 streams from memory once for all problems.
    One problem of narrow rows runs ``partial_rows_chunk`` instead.  Called
    at its address (``partial_chunk_address``) by ``partial_pass_at``, once
    per thread (``numbaot.cpu._pointer``).
    """
    n, m = K0.shape
    n_hists = v.shape[0]
    shared_a = a.shape[0] == 1
    R = tile_rows(m, K0.itemsize)
    s = np.empty(R)
    w = np.empty(R)
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        if i1 <= i0:
            Qc[:, :] = 0.0
        acc = 0.0
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            for k in range(n_hists):
                if not active[k]:
                    continue
                ka = 0 if shared_a else k
                sp = scal[k, 1]
                s[:] = 0.0
                for j0 in range(0, m, COL_BLOCK):
                    dot_rows(K0, t0, nr, v, k, j0, min(m, j0 + COL_BLOCK) - j0, s)
                if with_err:
                    for r in range(nr):
                        i = t0 + r
                        a0 = spp[k] * upp[k, i]
                        a1 = sp * u[k, i]
                        e = 0.0
                        for j in range(m):
                            d = K0[i, j] * (a0 * vpp[k, j] - a1 * v[k, j])
                            e += d * d
                        acc += e
                for r in range(nr):
                    x = _min1(a[ka, t0 + r] / (sp * s[r]))
                    w[r] = x
                    u[k, t0 + r] = x
                for j0 in range(0, m, COL_BLOCK):
                    axpy_rows(w, K0, t0, nr, Qc, k, j0, min(m, j0 + COL_BLOCK) - j0,
                              t0 == i0)
        part[ch] = acc


@njit(**_SER, **_INNER)
def partial_rows_chunk(K0, a, v, scal, vpp, upp, spp, active, ch0, ch1, chunk_rows, Q, u, part,
                       with_err):
    """``partial_chunk`` for one problem whose four rows of K0 fit
    ``_config.KNOPP_ROWS_MAX_BYTES`` (``sinkhorn.knopp_rows_fit``): each
    chunk's rows swept four at a time by the one-call path's loop
    (``_small.knopp_rows`` with the scale sp and the clamp at 1), as
    ``sinkhorn.knopp_rows_chunk``; with ``with_err``, each group of four
    rows gives its error terms just before the sweep reads it (the rows are
    then in L1).  No tile helpers to compile (1.5 s of a first call at
    400^2)."""
    n, m = K0.shape
    sp = scal[0, 1]
    for ch in range(ch0, ch1):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        acc = 0.0
        if active[0]:
            if with_err:
                for g0 in range(i0, i1, 4):
                    g1 = min(i1, g0 + 4)
                    for i in range(g0, g1):
                        a0 = spp[0] * upp[0, i]
                        a1 = sp * u[0, i]
                        e = 0.0
                        for j in range(m):
                            d = K0[i, j] * (a0 * vpp[0, j] - a1 * v[0, j])
                            e += d * d
                        acc += e
                    knopp_rows(K0, a, np.int64(0), v, u, Qc, np.int64(0), sp, np.bool_(True),
                               np.int64(g0), np.int64(g1))
            else:
                knopp_rows(K0, a, np.int64(0), v, u, Qc, np.int64(0), sp, np.bool_(True),
                           np.int64(i0), np.int64(i1))
        part[ch] = acc


def _partial_chunk_signature(K0, a, v, scal, vpp, upp, spp, active, Q, u):
    i64 = nbtypes.int64
    return nbtypes.none(typeof(K0), typeof(a), typeof(v), typeof(scal), typeof(vpp),
                        typeof(upp), typeof(spp), typeof(active), i64, i64, i64, typeof(Q),
                        typeof(u), nbtypes.float64[::1], nbtypes.boolean)


def partial_chunk_address(K0, a, v, scal, vpp, upp, spp, active, Q, u):
    """The ``jit_address`` of the chunk work for these arrays (the first
    argument of ``partial_pass_at`` and ``partial_run``):
    ``partial_rows_chunk`` for one problem of narrow rows
    (``sinkhorn.knopp_rows_fit``), else ``partial_chunk``; compiled on the
    first request."""
    rows = v.shape[0] == 1 and knopp_rows_fit(K0)
    return address_for(partial_rows_chunk if rows else partial_chunk, _partial_chunk_signature,
                       K0, a, v, scal, vpp, upp, spp, active, Q, u)


@njit(**_PAR)
def partial_pass_at(item_addr, n_workers, K0, a, v, scal, vpp, upp, spp, active, n_chunks,
                    chunk_rows, Q, u, q, with_err):
    """One read of K0 for every active problem k (``partial_chunk`` called
    at its address ``item_addr`` on consecutive chunks, once per worker;
    ``n_workers``: the number of threads): u[k, i] = min(a[k, i] / (sp_k
    (K0 v_k)_i), 1) and q[k] = K0^T u_k, with sp_k = scal[k, 1], the
    chunks' column sums merged in chunk order.  Returns POT's error of the
    current iterate against (spp, upp, vpp) summed over the active problems
    (chunk partials summed in order) with ``with_err``, else 0.

    The parallel loop holds an indirect call, not the tile loops
    (``numbaot.cpu._pointer``), as ``knopp_pass_at``, and the chunks merge
    on the calling thread (one parallel region per pass: 0.88-0.92x the
    time per pass at 400^2-512^2, 1.00-1.02x at 1024^2-4000^2).  The first
    call of a 400^2 problem: 7.3 -> 4.5-4.7 s with the chunk work at its
    address, 2.7-2.9 s with the serial merge and the four-row sweep of a
    narrow K0 in a kernel of its own (``partial_rows_chunk``: no tile
    helpers to compile; 0.90x the time per pass at 1024^2)."""
    part = np.zeros(n_chunks)
    nw = max(1, min(n_chunks, n_workers))
    per = (n_chunks + nw - 1) // nw
    for wk in prange(nw):
        call_at(item_addr, NONE, K0, a, v, scal, vpp, upp, spp, active, np.int64(wk * per),
                np.int64(min(n_chunks, (wk + 1) * per)), np.int64(chunk_rows), Q, u, part,
                with_err)
    merge_chunks_serial(Q, active, q)
    tot = 0.0
    for ch in range(n_chunks):
        tot += part[ch]
    return tot


def _partial_pass_signature(K0, a, v, scal, vpp, upp, spp, active, Q, u, q):
    i64 = nbtypes.int64
    return nbtypes.float64(i64, i64, typeof(K0), typeof(a), typeof(v), typeof(scal),
                           typeof(vpp), typeof(upp), typeof(spp), typeof(active), i64, i64,
                           typeof(Q), typeof(u), typeof(q), nbtypes.boolean)


def partial_pass_address(K0, a, v, scal, vpp, upp, spp, active, Q, u, q):
    """The ``jit_address`` of ``partial_pass_at`` for these arrays (the
    second argument of ``partial_run``)."""
    return address_for(partial_pass_at, _partial_pass_signature, K0, a, v, scal, vpp, upp, spp,
                       active, Q, u, q)


def partial_fused_pass(K0, a, v, scal, active, n_chunks, chunk_rows, Q, u, q):
    """One read of K0 for every active problem k: u[k, i] = min(a[k, i] /
    (sp_k (K0 v_k)_i), 1) and q[k] = K0^T u_k, with sp_k = scal[k, 1]
    (``partial_pass_at`` on ``numba.get_num_threads()`` threads; ``Q``
    (n_chunks, n_hists, dim_b) the chunks' column accumulators).  For host
    callers (benchmarks); ``partial_run`` calls ``partial_pass_at``."""
    spp = np.zeros(v.shape[0])  # the error's arrays, unused: (v, u, spp) stand in
    partial_pass_at(partial_chunk_address(K0, a, v, scal, v, u, spp, active, Q, u),
                    numba.get_num_threads(), K0, a, v, scal, v, u, spp, active, n_chunks,
                    chunk_rows, Q, u, q, np.bool_(False))


def _err_pass(pass_at, n_workers):
    """The launcher's ``err_pass`` around ``pass_at`` (the parallel kernel
    or its serial twin): ``partial_pass_at`` of the next iteration (u is
    overwritten with u_next, q = K0^T u_next) that also returns POT's error
    of the current one, summed over the active problems: sum_k sum_ij (K0_ij
    (spp_k upp_ki vpp_kj - s_k u_ki v_kj))^2, from the same read of K0,
    with s_k = scal[k, 1] the current s (the next iteration's s_prev)."""
    def err_pass(K0, a, v, scal, vpp, upp, spp, active, n_chunks, chunk_rows, Q, u, q):
        addr = partial_chunk_address(K0, a, v, scal, vpp, upp, spp, active, Q, u)
        return pass_at(addr, n_workers(), K0, a, v, scal, vpp, upp, spp, active, n_chunks,
                       chunk_rows, Q, u, q, np.bool_(True))
    return err_pass


@njit(inline="always", **_SER)
def _finish_problem(b, mass, u, v, scal, kmin, zero_below, q, k):
    """The O(dim_a + dim_b) end of problem k's iteration, whose fused pass
    left u_k and q_k = K0^T u_k: v_k = min(b_k / (sp q_k), 1), s_k = m_k /
    sum_j v_kj q_kj, the failure tests.  Returns True when the iterate is
    not finite (POT's K is NaN/inf); sets scal[k, 2] (broken) when K0, u, v
    or s has a zero in the dtype.

    u and v lie in [0, 1] or are NaN (clamped at 1), and a NaN anywhere
    reaches s: a NaN u_i makes every q_j NaN (NaN times any K0_ij), a NaN
    v_j (or an inf q_j, whose v_j is 0) makes the sum NaN, so the iterate
    is finite exactly when s is.  The loops only count zeros (integer
    reductions, vectorised; inlined into the run loop: no call per
    iteration).  :func:`_small_run` has this code and :func:`_begin_step`'s
    written out (keep them in step; the tests compare the serial and
    parallel paths)."""
    n = u.shape[1]
    m = v.shape[1]
    sp = scal[k, 1]
    tot = 0.0
    zeros = 0
    for j in range(m):
        x = _min1(b[k, j] / (sp * q[k, j]))
        v[k, j] = x
        tot += x * q[k, j]
        zeros += x <= zero_below
    s = mass[k] / tot
    scal[k, 0] = s
    if not _finite(s):
        return True
    for i in range(n):
        zeros += u[k, i] <= zero_below
    if not (kmin[k] > zero_below and zeros == 0 and s > zero_below):
        scal[k, 2] = 1.0
    return False


@njit(inline="always", **_SER)
def _finish_step(b, mass, u, v, scal, kmin, zero_below, q, active, fail_at, it):
    """:func:`_finish_problem` for every active problem; a problem whose
    iterate is not finite fails at iteration ``it`` (fail_at[k] = it, no
    longer active).  Returns the number of problems still active."""
    left = 0
    for k in range(v.shape[0]):
        if not active[k]:
            continue
        if _finish_problem(b, mass, u, v, scal, kmin, zero_below, q, k):
            active[k] = False
            fail_at[k] = it
        else:
            left += 1
    return left


@njit(inline="always", **_SER)
def _begin_step(u, v, up, vp, scal, active, fail_at, it, save):
    """The start of iteration ``it``: a problem whose corrections broke
    (scal[k, 2]) fails here; every other active problem keeps s_prev =
    scal[k, 1] and, with ``save``, its iterate (up, vp: only POT's error
    reads them, after the last iteration of a run).  Returns the number
    still active."""
    left = 0
    for k in range(v.shape[0]):
        if not active[k]:
            continue
        if scal[k, 2] != 0.0:
            active[k] = False
            fail_at[k] = it
            continue
        scal[k, 1] = scal[k, 0]
        if save:
            for i in range(u.shape[1]):
                up[k, i] = u[k, i]
            for j in range(v.shape[1]):
                vp[k, j] = v[k, j]
        left += 1
    return left


@njit(**_SER)
def partial_run(item_addr, pass_addr, n_workers, K0, a, b, mass, u, v, up, vp, scal, kmin,
                zero_below, active, fail_at, cnt, n_chunks, chunk_rows, Q, q, n_steps):
    """Up to ``n_steps`` iterations of every active problem, in place; each
    iteration's pass is ``partial_pass_at``, called at its address
    ``pass_addr`` (``partial_pass_address``: the run's module then holds
    an indirect call, not the parallel kernel's code to optimise and emit
    again; ``numbaot.cpu._pointer``), with ``item_addr`` =
    ``partial_chunk_address(K0, a, v, scal, vp, up, kmin, active, Q, u)``
    (the error's arrays unused: ``vp``, ``up``, ``kmin`` stand in for them)
    and ``n_workers`` threads.

    ``scal`` (n_hists, 3) = [s, s_prev, broken] per problem: ``broken`` is
    set when POT's corrections would hold a NaN/inf (a zero in K0, u, v or
    s, in the dtype: POT divides by it elementwise, and its next iterate is
    NaN).  A problem that fails (its iterate not finite, or the iteration
    after a broken one) records the global iteration index ``cnt[0]`` in
    ``fail_at`` and leaves ``active``; the others go on.  (up, vp) hold
    the iterate before the last one run, for POT's error.  Returns (steps
    run, stopped): stopped is True once no problem is active."""
    for t in range(n_steps):
        it = cnt[0]
        if _begin_step(u, v, up, vp, scal, active, fail_at, it, t == n_steps - 1) == 0:
            return t, True
        call_at(pass_addr, _F64, item_addr, n_workers, K0, a, v, scal, vp, up, kmin, active,
                n_chunks, chunk_rows, Q, u, q, np.bool_(False))
        cnt[0] = it + 1
        if _finish_step(b, mass, u, v, scal, kmin, zero_below, q, active, fail_at, it) == 0:
            return t, True
    return n_steps, False


@njit(**_PAR)
def partial_err2(K0, u, v, sv, up, vp, active, n_chunks, chunk_rows):
    """sum_k sum_ij (K0_ij (sp_k up_ki vp_kj - s_k u_ki v_kj))^2 over the
    active problems, with (s_k, sp_k) = sv[k, :2]; chunk partials summed in
    order."""
    n, m = K0.shape
    part = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        acc = 0.0
        for i in range(i0, i1):
            for k in range(v.shape[0]):
                if not active[k]:
                    continue
                a0 = sv[k, 1] * up[k, i]
                a1 = sv[k, 0] * u[k, i]
                r = 0.0
                for j in range(m):
                    d = K0[i, j] * (a0 * vp[k, j] - a1 * v[k, j])
                    r += d * d
                acc += r
        part[ch] = acc
    tot = 0.0
    for ch in range(n_chunks):
        tot += part[ch]
    return tot


# --------------------------------------------------------------------------
# log domain
# --------------------------------------------------------------------------
@njit(**_PAR, **_INNER)
def partial_log_fused_pass(M, c, La, v, C0, scal, rmax, active, n_chunks, chunk_rows, Q, u,
                           q):
    """One read of M, one exponential per entry and active problem k
    (off_k = scal[k, 1] + C0[k]):

    u_ki = min(La_ki - off_k - LSE_j(c M_ij + v_kj), 0)      (row projection)
    q_kj = sum_i exp(c M_ij + u_ki + v_kj + off_k)           (columns of POT's K1)

    Each row i is shifted by r_ki >= max_j (c M_ij + v_kj) (E_ij = exp(c
    M_ij + v_kj - r_ki) <= 1, kept in a per-thread tile buffer).  When
    scal[k, 2] (shift_ok) is set, r_ki = rmax_ki + dv_max_k (scal[k, 3]) is
    certified from the previous iterate (rmax_ki its shift, dv_max_k =
    max_j (v_kj - v_prev_kj)), so no max pass is needed; a row whose sum
    falls below ROW_SUM_FLOOR, and every row of the first iteration, takes
    the exact row maximum.  q accumulates E_ij w_ki with w_ki = exp(u_ki +
    r_ki + off_k) (POT's K1 has row sums <= a_i): nothing overflows; a
    column whose q underflows is redone by the caller.  ``La`` is (1 or
    n_hists, dim_a); the tile's rows of M are re-read from L1/L2 for each
    problem.
    """
    n, m = M.shape
    n_hists = v.shape[0]
    shared_a = La.shape[0] == 1
    R = tile_rows(m, np.int64(8))  # tiles of the float64 row buffer E
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        E = np.empty((R, m))
        w = np.empty(R)
        Qc = Q[ch]
        Qc[:, :] = 0.0
        for t0 in range(i0, i1, R):
            nr = min(i1, t0 + R) - t0
            for k in range(n_hists):
                if not active[k]:
                    continue
                ka = 0 if shared_a else k
                off = scal[k, 1] + C0[k]
                shift_ok = scal[k, 2] != 0.0
                dv_max = scal[k, 3]
                for r in range(nr):
                    i = t0 + r
                    la = La[ka, i]
                    if la == -np.inf:
                        u[k, i] = -np.inf
                        w[r] = 0.0
                        E[r, :] = 0.0
                        continue
                    S = 0.0
                    mx = rmax[k, i] + dv_max
                    if shift_ok:
                        S = row_exp_sum(M, i, c, v, k, mx, E, r)
                    if not S > ROW_SUM_FLOOR:
                        mx = -np.inf
                        for j in range(m):
                            mx = max(mx, c * M[i, j] + v[k, j])
                        S = row_exp_sum(M, i, c, v, k, mx, E, r)
                    rmax[k, i] = mx
                    x = la - off - (mx + math.log(S))
                    if x > 0.0:  # clamped: u_i = 0
                        u[k, i] = 0.0
                        w[r] = fast_exp(mx + off)
                    else:
                        u[k, i] = x
                        w[r] = fast_exp(la) / S
                for j0 in range(0, m, COL_BLOCK):
                    axpy_rows(w, E, np.int64(0), nr, Qc, k, j0,
                              min(m, j0 + COL_BLOCK) - j0, np.bool_(False))
    merge_chunks(Q, active, q)


@njit(**_SER, **_INNER)
def _log_finish_problem(Lb, C0, logm, u, v, vp, scal, floor, q, colL, k):
    """The end of problem k's log-domain iteration (its fused pass left u_k
    and q_k): v_k, Ls_k and the certified shift data of the next pass.
    Returns False when a potential is not finite (POT's LK then has a
    -inf/NaN)."""
    n = u.shape[1]
    m = v.shape[1]
    off = scal[k, 1] + C0[k]
    # colLSE_j = LSE_i(c M_ij + u_i) = log q_j - off - vp_j
    g = np.empty(m)
    gmax = -np.inf
    ok = True
    for j in range(m):
        if q[k, j] > floor:
            lq = math.log(q[k, j])
            x = _min0(Lb[k, j] - lq + vp[k, j])
            g[j] = x + lq - off - vp[k, j]
        else:
            cl = colL[k, j]
            x = _min0(Lb[k, j] - off - cl)
            g[j] = x + cl
        v[k, j] = x
        ok = ok and _finite(x)
        gmax = max(gmax, g[j])
    S = 0.0
    for j in range(m):
        S += math.exp(g[j] - gmax)
    s = logm[k] - C0[k] - (gmax + math.log(S))
    scal[k, 0] = s
    dv = -np.inf
    for j in range(m):
        dv = max(dv, v[k, j] - vp[k, j])
    scal[k, 2] = 1.0
    scal[k, 3] = dv
    for i in range(n):
        ok = ok and _finite(u[k, i])
    return ok and _finite(s)


@njit(**_SER)
def partial_log_run(M, c, C0, logm, La, Lb, u, v, up, vp, scal, rmax, floor, active,
                    fail_at, cnt, n_chunks, chunk_rows, Q, q, colL, n_steps):
    """Up to ``n_steps`` log-domain iterations of every active problem, in
    place; ``scal`` (n_hists, 4) = [Ls, Ls_prev, shift_ok, dv_max] per
    problem (the certified row shifts ``rmax`` of ``partial_log_fused_pass``
    are valid when shift_ok is 1), ``C0``, ``logm`` (n_hists,).  A problem
    fails, as POT's, when a potential is not finite: it records ``cnt[0]``
    in ``fail_at`` and keeps that iterate (no longer active).  Returns
    (steps run, stopped): stopped once no problem is active."""
    n = u.shape[1]
    m = v.shape[1]
    n_hists = v.shape[0]
    for t in range(n_steps):
        it = cnt[0]
        left = 0
        for k in range(n_hists):
            if active[k]:
                scal[k, 1] = scal[k, 0]
                for i in range(n):
                    up[k, i] = u[k, i]
                for j in range(m):
                    vp[k, j] = v[k, j]
                left += 1
        if left == 0:
            return t, True
        partial_log_fused_pass(M, c, La, v, C0, scal, rmax, active, n_chunks, chunk_rows, Q,
                               u, q)
        redo = False
        for k in range(n_hists):
            if active[k]:
                for j in range(m):
                    if not q[k, j] > floor:
                        redo = True
        if redo:  # columns of K1 that underflowed: their exact column LSE
            log_col_lse(M, c, u, n_chunks, chunk_rows, colL)
        cnt[0] = it + 1
        left = 0
        for k in range(n_hists):
            if not active[k]:
                continue
            if _log_finish_problem(Lb, C0, logm, u, v, vp, scal, floor, q, colL, k):
                left += 1
            else:
                active[k] = False
                fail_at[k] = it
        if left == 0:
            return t, True
    return n_steps, False


@njit(**_PAR)
def partial_log_err2(u, v, sv, up, vp, active, n_chunks, chunk_rows):
    """sum_k sum_ij ((up_ki - u_ki) + (vp_kj - v_kj) + (sp_k - s_k))^2 over
    the active problems, (s_k, sp_k) = sv[k, :2] (no read of M)."""
    n = u.shape[1]
    m = v.shape[1]
    part = np.zeros(n_chunks)
    for ch in prange(n_chunks):
        i0 = ch * chunk_rows
        i1 = min(n, i0 + chunk_rows)
        acc = 0.0
        for i in range(i0, i1):
            for k in range(v.shape[0]):
                if not active[k]:
                    continue
                x = (up[k, i] - u[k, i]) + (sv[k, 1] - sv[k, 0])
                r = 0.0
                for j in range(m):
                    d = x + (vp[k, j] - v[k, j])
                    r += d * d
                acc += r
        part[ch] = acc
    tot = 0.0
    for ch in range(n_chunks):
        tot += part[ch]
    return tot


# --------------------------------------------------------------------------
# Small problems: the same kernels compiled for the calling thread alone
# --------------------------------------------------------------------------
# Small problems run these twins (``serial_twin``: the same code, prange as
# range, the parallel kernels it calls replaced by their twins; the
# multiplicative run by ``_small_run``, written out): no parallel
# region is launched, per iteration or at the end, and a first call on a
# small problem compiles no parallel kernel.  The same results as the
# parallel kernels to rounding (sums in another order; LLVM may contract or
# vectorise the serial code differently); the choice depends on the size
# alone, so results stay bit-identical for any thread count.
# Small: at most ``_config.SMALL_MAX_ENTRIES`` entries (dim_a x dim_b x
# n_hists), or ``SMALL_MAX_ENTRIES_LOG`` in the log domain, the dense
# solvers' bounds: ``benchmarks/bench_partial.py --twins`` (BENCHMARKS.md,
# "Entropic partial OT") measured the small path faster at every size up to
# 256^2 in every run (parallel / small time 1.13-2.85) and 0.88-1.41 at
# 362^2; log domain 1.04-1.31 at 64-128 (the whole loop) against 0.78 at 181.
partial_pass_at_serial = serial_twin(partial_pass_at)
partial_err2_serial = serial_twin(partial_err2)
partial_log_fused_pass_serial = serial_twin(partial_log_fused_pass, inner=True,
                                            merge_chunks=merge_chunks_serial)
_log_col_lse_serial = serial_twin(log_col_lse)
partial_log_run_serial = serial_twin(partial_log_run,
                                     partial_log_fused_pass=partial_log_fused_pass_serial,
                                     log_col_lse=_log_col_lse_serial)
partial_log_err2_serial = serial_twin(partial_log_err2)


@njit(**_SER, **_INNER)
def _small_run(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, active, fail_at, cnt,
               n_chunks, chunk_rows, q, n_steps, stopThr, f32, errs):
    """The serial run of a small K0: up to ``n_steps`` iterations, the steps
    of :func:`partial_run` (:func:`_begin_step`, the pass,
    :func:`_finish_step`) written out in one loop, the pass as
    ``numbaot.cpu._small.knopp_rows`` over all the rows, four at a time,
    with the scale sp_k = scal[k, 1] and the clamp at 1 (no tiles, column
    blocks or chunk merge; the same iterate to rounding: sums in another
    order, a float32 K0 widened entry by entry).  With a non-empty ``errs``
    (the one-call solve, :func:`partial_small_loop`), POT's check after
    each iteration ii with ii % 10 == 0: its error ||K_prev - K||_F (over
    the problems still active, ``partial_err2``) is stored in ``errs`` and
    the run stops when it is not above stopThr.  Returns (steps run,
    stopped, errors stored): stopped once no problem is active.

    Written out, and the checks inside the loop, because Numba's reference
    counting made helpers cost more than the arithmetic at small sizes:
    inlined (``inline="always"``) or called, each array they take was
    counted in and out with an atomic operation per iteration, 60 % of an
    iteration's time at 16^2 (``perf``: ``NRT_incref``/``NRT_decref``);
    written out 0.27 -> 0.12-0.14 us per iteration at 16^2 and 0.59-0.74
    -> 0.47-0.63 at 64^2 (docs/performance-notes.md)."""
    P = v.shape[0]
    n = u.shape[1]
    m = v.shape[1]
    shared_a = a.shape[0] == 1
    check = errs.shape[0] > 0
    n_err = 0
    for t in range(n_steps):
        it = cnt[0]
        save = t == n_steps - 1 or (check and it % 10 == 0)
        left = 0
        for k in range(P):                    # _begin_step
            if not active[k]:
                continue
            if scal[k, 2] != 0.0:
                active[k] = False
                fail_at[k] = it
                continue
            scal[k, 1] = scal[k, 0]
            if save:
                for i in range(n):
                    up[k, i] = u[k, i]
                for j in range(m):
                    vp[k, j] = v[k, j]
            left += 1
        if left == 0:
            return t, True, n_err
        for k in range(P):                    # the fused pass
            if not active[k]:
                continue
            for j in range(m):
                q[k, j] = 0.0
            # the row of a in a variable: a conditional expression among the
            # call's arguments made Numba count K0 and a in and out per call
            ka = 0 if shared_a else k
            knopp_rows(K0, a, ka, v, u, q, k, scal[k, 1], np.bool_(True), np.int64(0), n)
        cnt[0] = it + 1
        left = 0
        for k in range(P):                    # _finish_step (_finish_problem)
            if not active[k]:
                continue
            sp = scal[k, 1]
            tot = 0.0
            zeros = 0
            for j in range(m):
                x = _min1(b[k, j] / (sp * q[k, j]))
                v[k, j] = x
                tot += x * q[k, j]
                zeros += x <= zero_below
            s = mass[k] / tot
            scal[k, 0] = s
            if not _finite(s):
                active[k] = False
                fail_at[k] = it
                continue
            for i in range(n):
                zeros += u[k, i] <= zero_below
            if not (kmin[k] > zero_below and zeros == 0 and s > zero_below):
                scal[k, 2] = 1.0
            left += 1
        if left == 0:
            return t, True, n_err
        if check and it % 10 == 0:
            e2 = partial_err2_serial(K0, u, v, scal, up, vp, active, n_chunks, chunk_rows)
            n_err += 1
            if _check_stops(e2, f32, errs, n_err - 1, stopThr):
                return t + 1, False, n_err
    return n_steps, False, n_err


@njit(**_SER)
def partial_run_serial(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, active, fail_at,
                       cnt, n_chunks, chunk_rows, Q, q, n_steps):
    """:func:`partial_run` of a small K0 on the calling thread
    (:func:`_small_run` without checks; ``n_chunks``, ``chunk_rows`` and
    ``Q`` unused).  Returns (steps run, stopped)."""
    t, stopped, _ = _small_run(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, active,
                               fail_at, cnt, n_chunks, chunk_rows, q, n_steps, 0.0, False,
                               np.empty(0))
    return t, stopped


@njit(**_SER, **_INNER)
def _check_stops(e2, f32, errs, n_err, stopThr):
    """POT's check: err = sqrt(e2) in the result dtype (``f32``: rounded to
    float32, as ``numbaot._loops.err_scalar``), stored in errs[n_err];
    True when the loop stops (not err > stopThr).  A float32 err is compared
    in float32, as the host loop's NumPy scalar is with a Python float
    (NumPy 2's promotion rules)."""
    err = math.sqrt(e2)
    if f32:
        e32 = np.float32(err)
        errs[n_err] = np.float64(e32)
        return not e32 > np.float32(stopThr)
    errs[n_err] = err
    return not err > stopThr


@njit(**_SER, **_INNER)
def _next_check(ii, numItermax):
    """The end (exclusive) of the run of iterations from ``ii`` up to and
    including the next one that POT checks (index % 10 == 0), within
    numItermax: the small loops call the run kernel once per such block
    (a call per iteration cost 0.25 µs at 64^2, a quarter of it: the
    reference counts of ~15 array arguments)."""
    if ii % 10 == 0:
        return ii + 1
    return min((ii // 10 + 1) * 10 + 1, numItermax)


@njit(**_SER)
def partial_small_loop(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, active, fail_at,
                       cnt, n_chunks, chunk_rows, Q, q, numItermax, stopThr, f32, errs):
    """``numbaot.partial._partial_loop`` with ``partial_steps`` and
    ``partial_error`` in one serial compiled call (small problems;
    :func:`_small_run` with its checks): after each iteration ii with
    ii % 10 == 0, POT's error ||K_prev - K||_F (over the problems still
    active, ``partial_err2``) is stored in ``errs`` (>= numItermax // 10 +
    1 entries) and the loop stops when it is not above stopThr, or once
    every problem failed (``fail_at``).  Returns the number of errors
    stored."""
    if not 1.0 > stopThr:
        return 0
    return _small_run(K0, a, b, mass, u, v, up, vp, scal, kmin, zero_below, active, fail_at,
                      cnt, n_chunks, chunk_rows, q, numItermax, stopThr, f32, errs)[2]


@njit(**_SER)
def partial_log_small_loop(M, c, C0, logm, La, Lb, u, v, up, vp, scal, rmax, floor, active,
                           fail_at, cnt, n_chunks, chunk_rows, Q, q, colL, numItermax, stopThr,
                           f32, errs):
    """:func:`partial_small_loop` for the log domain (``partial_log_run``,
    ``partial_log_err2``)."""
    n_err = 0
    if not 1.0 > stopThr:
        return n_err
    ii = np.int64(0)  # not the literal 0 (a second compile of _next_check)
    while ii < numItermax:
        stop = _next_check(ii, numItermax)
        if partial_log_run_serial(M, c, C0, logm, La, Lb, u, v, up, vp, scal, rmax, floor,
                                  active, fail_at, cnt, n_chunks, chunk_rows, Q, q, colL,
                                  stop - ii)[1]:
            return n_err
        ii = stop
        if (ii - 1) % 10 == 0:
            e2 = partial_log_err2_serial(u, v, scal, up, vp, active, n_chunks, chunk_rows)
            n_err += 1
            if _check_stops(e2, f32, errs, n_err - 1, stopThr):
                break
    return n_err


@njit(**_PAR)
def partial_plans(K0, us, v, out):
    """out[k, i, j] = us[k, i] K0[i, j] v[k, j]: the plans of a batch."""
    n, m = K0.shape
    for i in prange(n):
        for k in range(v.shape[0]):
            uk = us[k, i]
            for j in range(m):
                out[k, i, j] = uk * K0[i, j] * v[k, j]


@njit(**_PAR)
def partial_log_plans(M, c, f, g, out):
    """out[k, i, j] = exp(c M[i, j] + f[k, i] + g[k, j]): the log-domain
    plans of a batch."""
    n, m = M.shape
    for i in prange(n):
        for k in range(g.shape[0]):
            fk = f[k, i]
            for j in range(m):
                out[k, i, j] = fast_exp(c * M[i, j] + fk + g[k, j])


#: (parallel kernel, its serial twin) of each launcher's call
_KERNELS = {
    "err_pass": (_err_pass(partial_pass_at, numba.get_num_threads),
                 _err_pass(partial_pass_at_serial, lambda: 1)),
    "err2": (partial_err2, partial_err2_serial),
    "plan": (scaled_plan, scaled_plan_serial),
    "plans": (partial_plans, serial_twin(partial_plans)),
    "loss": (scaled_loss, scaled_loss_serial),
    "log_run": (partial_log_run, partial_log_run_serial),
    "log_col_lse": (log_col_lse, _log_col_lse_serial),
    "log_err2": (partial_log_err2, partial_log_err2_serial),
    "gibbs": (gibbs_kernel, gibbs_kernel_serial),
    "log_plans": (partial_log_plans, serial_twin(partial_log_plans)),
    "gibbs_loss": (gibbs_loss, gibbs_loss_serial),
}


def _is_small(dim_a, dim_b, log_domain, n_hists=1):
    """Whether a state runs the small path (the rule above)."""
    bound = _config.SMALL_MAX_ENTRIES_LOG if log_domain else _config.SMALL_MAX_ENTRIES
    return dim_a * dim_b * n_hists <= bound


#: small -> {name: the kernel each launcher calls}: the serial twins for a
#: small problem, else the parallel kernels
_KERNELS_BY_SIZE = {small: {name: pair[small] for name, pair in _KERNELS.items()}
                    for small in (False, True)}


def _kernels(small):
    """name -> the kernel each launcher calls (:data:`_KERNELS_BY_SIZE`)."""
    return _KERNELS_BY_SIZE[bool(small)]


#: dtype -> half its smallest subnormal: the zero of the failure test
_ZERO_BELOW = {np.dtype(t): float(np.finfo(t).smallest_subnormal) / 2
               for t in (np.float32, np.float64)}


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cuda.partial
# --------------------------------------------------------------------------
def _masses(m):
    """(mass per problem as a float64 array, the largest)."""
    mass = np.ascontiguousarray(m, dtype=np.float64).reshape(-1)
    return mass, float(mass.max())


class _Batch:
    """The per-problem bookkeeping shared by both states: ``active`` (bool),
    ``fail_at`` (int64, -1 while a problem has not failed) and the global
    iteration counter ``cnt``."""

    def _setup_batch(self, n_hists):
        self.n_hists = n_hists
        self.active = np.ones(n_hists, dtype=np.bool_)
        self.fail_at = np.full(n_hists, -1, dtype=np.int64)
        self.cnt = np.zeros(1, dtype=np.int64)
        self.stopped = False
        self.started = False


class PartialState(_Batch):
    """State of an entropic partial OT run (multiplicative domain) on the
    CPU: one problem, or a paired batch of n_hists problems sharing ``M``.

    Parameters
    ----------
    M : ndarray (dim_a, dim_b), float32 or float64, C order
        Cost matrix (read only).  K0 = exp(-M / reg) * m_ref / sum(exp(-M /
        reg)), with m_ref the largest mass, is formed once, in M's dtype,
        with POT's NumPy operations (so its zeros, which decide POT's
        failures, are POT's); problem k starts from (m_k / m_ref) K0 (its
        s_{-1}), which is exactly K0 for one problem.
    reg : float
        Regularisation (> 0).
    a : ndarray (1 or n_hists, dim_a) float64
        Source weights (one row shared by every problem, or one per problem).
    b : ndarray (n_hists, dim_b) float64
        Target weights.
    m : ndarray (n_hists,) float64
        Mass to transport in each problem.
    """

    def __init__(self, M, reg, a, b, m):
        dim_a, dim_b = M.shape
        n_hists = b.shape[0]
        self._setup_batch(n_hists)
        dt = M.dtype
        mass, mref = _masses(m)
        K0 = np.empty(M.shape, dtype=dt)
        np.divide(M, -reg, out=K0)
        np.exp(K0, out=K0)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.multiply(K0, mref / np.sum(K0), out=K0)
        ratio = mass / mref if mref > 0 else np.ones(n_hists)
        self.M, self.K0, self.mass = M, K0, mass
        self.a = np.ascontiguousarray(a, dtype=np.float64)
        self.b = np.ascontiguousarray(b, dtype=np.float64)
        self.u = np.ones((n_hists, dim_a))
        self.v = np.ones((n_hists, dim_b))
        self.up = np.ones((n_hists, dim_a))
        self.vp = np.ones((n_hists, dim_b))
        self.scal = np.zeros((n_hists, 3))  # s, s_prev, broken
        self.scal[:, 0] = ratio
        self.scal[:, 1] = ratio
        self.zero_below = _ZERO_BELOW[dt]
        # problem k's K0 is ratio_k K0: its smallest entry, and whether all
        # of it is zero in the dtype (m_k = 0: POT's first iterate is NaN)
        self.kmin = float(K0.min()) * ratio
        dead = float(K0.max()) * ratio <= self.zero_below
        if mref > 0:
            self.scal[dead, 2] = 1.0
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, n_hists, dim_b, memory_bound=True)
        self.small = _is_small(dim_a, dim_b, False, n_hists)
        self.k = _kernels(self.small)
        self.Q = np.empty((self.n_chunks, n_hists, dim_b))
        self.q = np.empty((n_hists, dim_b))
        # the iterate before the last (kept while partial_error runs the next
        # iteration's pass ahead: ``pending``)
        self.upp = np.ones((n_hists, dim_a))
        self.vpp = np.ones((n_hists, dim_b))
        self.spp = np.ones(n_hists)
        self.pending = False


def partial_steps(st, n_steps):
    """Run up to ``n_steps`` iterations of every problem not yet failed.
    Returns (steps run, stopped): stopped is True once every problem has
    failed (:func:`partial_failed_at` tells where).  An iteration started
    by :func:`partial_error` (its fused pass done) is finished first and
    counts as the first step."""
    if st.stopped:
        return 0, True
    if n_steps == 0:
        return 0, False
    done = 0
    with np.errstate(all="ignore"):
        if st.pending:
            st.pending = False
            done = 1
            it = st.cnt[0]
            st.cnt[0] = it + 1
            if _finish_step(st.b, st.mass, st.u, st.v, st.scal, st.kmin, st.zero_below, st.q,
                            st.active, st.fail_at, it) == 0:
                st.stopped = True
                return 0, True
        args = (st.K0, st.a, st.b, st.mass, st.u, st.v, st.up, st.vp, st.scal, st.kmin,
                st.zero_below, st.active, st.fail_at, st.cnt, st.n_chunks, st.chunk_rows, st.Q,
                st.q, n_steps - done)
        if st.small:
            more, stopped = partial_run_serial(*args)
        else:
            addr = partial_chunk_address(st.K0, st.a, st.v, st.scal, st.vp, st.up, st.kmin,
                                         st.active, st.Q, st.u)
            pass_addr = partial_pass_address(st.K0, st.a, st.v, st.scal, st.vp, st.up, st.kmin,
                                             st.active, st.Q, st.u, st.q)
            more, stopped = partial_run(addr, pass_addr, numba.get_num_threads(), *args)
    st.started = True
    st.stopped = bool(stopped)
    return done + int(more), bool(stopped)


def partial_solve_small(st, numItermax, stopThr):
    """The whole loop of ``numbaot.partial._partial_loop`` in one serial
    compiled call (:func:`partial_small_loop`) for a small state not yet
    iterated; else None (the caller then alternates :func:`partial_steps`
    and :func:`partial_error`).  Returns POT's errors at the checks,
    float64 (n_checks,) holding the result dtype's values; the failures are
    read by :func:`partial_failed_at`."""
    if not st.small or st.started or st.stopped or numItermax > _config.SMALL_MAX_ITER:
        return None
    errs = np.empty(numItermax // 10 + 1)
    with np.errstate(all="ignore"):
        n_err = partial_small_loop(
            st.K0, st.a, st.b, st.mass, st.u, st.v, st.up, st.vp, st.scal, st.kmin,
            st.zero_below, st.active, st.fail_at, st.cnt, st.n_chunks, st.chunk_rows, st.Q,
            st.q, numItermax, stopThr, st.K0.dtype == np.float32, errs)
    st.started = numItermax > 0 and 1 > stopThr
    st.stopped = not st.active.any()
    return errs[:n_err]


def partial_failed_at(st):
    """The iteration at which each problem failed (POT's iterate NaN/inf,
    or in the log domain a potential not finite), -1 where it did not:
    int64 (n_hists,), a host array (either state)."""
    return st.fail_at.copy()


def _undo_pending(st):
    """Forget the speculative next iteration of :func:`partial_error`."""
    if st.pending:
        st.u[:, :] = st.up
        st.scal[:, 0] = st.scal[:, 1]
        st.up[:, :] = st.upp
        st.vp[:, :] = st.vpp
        st.scal[:, 1] = st.spp
        st.pending = False


def partial_error(st):
    """POT's error of the last iteration, ||K_prev - K||_F over the problems
    not failed (float).

    It is taken in the same read of K0 as the next iteration's fused pass
    (whose result is kept for the next :func:`partial_steps`, or dropped by
    :func:`partial_plan` / :func:`partial_loss` when the loop stops): one
    read of K0 per iteration, checks included."""
    if st.pending:  # asked again: the error between the saved iterates
        sv = np.stack([st.scal[:, 1], st.spp], axis=1)
        e2 = st.k["err2"](st.K0, st.up, st.vp, sv, st.upp, st.vpp, st.active, st.n_chunks,
                          st.chunk_rows)
        return math.sqrt(e2)
    if st.stopped or not st.started or np.any(st.scal[st.active, 2] != 0.0):
        e2 = st.k["err2"](st.K0, st.u, st.v, st.scal, st.up, st.vp, st.active, st.n_chunks,
                          st.chunk_rows)
        return math.sqrt(e2)
    st.upp[:, :] = st.up
    st.vpp[:, :] = st.vp
    st.spp[:] = st.scal[:, 1]
    st.scal[:, 1] = st.scal[:, 0]
    st.up[:, :] = st.u
    st.vp[:, :] = st.v
    with np.errstate(all="ignore"):
        e2 = st.k["err_pass"](st.K0, st.a, st.v, st.scal, st.vpp, st.upp, st.spp, st.active,
                              st.n_chunks, st.chunk_rows, st.Q, st.u, st.q)
    st.pending = True
    return math.sqrt(e2)


def partial_plan(st):
    """The current iterates s_k diag(u_k) K0 diag(v_k), (n_hists, dim_a,
    dim_b), M's dtype (all NaN for a problem that failed, as POT's)."""
    _undo_pending(st)
    n, m = st.K0.shape
    plans = np.empty((st.n_hists, n, m), dtype=st.K0.dtype)
    us = st.u * st.scal[:, :1]
    if st.n_hists == 1:
        st.k["plan"](st.K0, us[0], st.v[0], plans[0])
    else:
        st.k["plans"](st.K0, us, st.v, plans)
    plans[st.fail_at >= 0] = np.nan
    return plans


def partial_loss(st):
    """<K_k, M>_F of the current iterates, float64 (n_hists,) (NaN for a
    problem that failed)."""
    _undo_pending(st)
    out = np.empty(st.n_hists)
    st.k["loss"](st.K0, st.M, st.u * st.scal[:, :1], st.v, st.n_chunks, st.chunk_rows, out)
    out[st.fail_at >= 0] = np.nan
    return out


class PartialLogState(_Batch):
    """State of an entropic partial OT run in the log domain on the CPU.

    Same parameters as :class:`PartialState`.  The kernel is never formed:
    LK0_k = -M / reg + log m_k - LSE(-M / reg) is read from M on the fly
    (C0_k = log m_k - LSE(-M / reg) is a scalar per problem); the iterate is
    LK0_k + Lu_k 1^T + 1 Lv_k^T + Ls_k.
    """

    def __init__(self, M, reg, a, b, m):
        dim_a, dim_b = M.shape
        n_hists = b.shape[0]
        self._setup_batch(n_hists)
        mass, _ = _masses(m)
        self.M, self.c = M, -1.0 / reg
        self.n_chunks, self.chunk_rows = chunk_layout(dim_a, n_hists, dim_b)
        self.small = _is_small(dim_a, dim_b, True, n_hists)
        self.k = _kernels(self.small)
        lse = np.empty((1, dim_b))
        self.k["log_col_lse"](M, self.c, np.zeros((1, dim_a)), self.n_chunks, self.chunk_rows,
                              lse)
        mx = lse.max()
        lse_all = mx + math.log(np.exp(lse - mx).sum())
        self.logm = np.array([math.log(x) if x > 0 else -np.inf for x in mass])
        with np.errstate(divide="ignore", invalid="ignore"):
            self.C0 = self.logm - lse_all
            self.La = np.log(np.ascontiguousarray(a, dtype=np.float64))
            self.Lb = np.log(np.ascontiguousarray(b, dtype=np.float64))
        self.u = np.zeros((n_hists, dim_a))
        self.v = np.zeros((n_hists, dim_b))
        self.up = np.zeros((n_hists, dim_a))
        self.vp = np.zeros((n_hists, dim_b))
        self.scal = np.zeros((n_hists, 4))  # Ls, Ls_prev, shift_ok, dv_max
        self.rmax = np.zeros((n_hists, dim_a))
        self.Q = np.empty((self.n_chunks, n_hists, dim_b))
        self.q = np.empty((n_hists, dim_b))
        self.colL = np.empty((n_hists, dim_b))


def partial_log_steps(st, n_steps):
    """As :func:`partial_steps`, in the log domain (a problem fails when a
    potential is not finite; its state then holds that step's iterate)."""
    if st.stopped:
        return 0, True
    st.started = True
    with np.errstate(all="ignore"):
        done, stopped = st.k["log_run"](st.M, st.c, st.C0, st.logm, st.La, st.Lb, st.u, st.v,
                                        st.up, st.vp, st.scal, st.rmax, PARTIAL_SUM_FLOOR,
                                        st.active, st.fail_at, st.cnt, st.n_chunks,
                                        st.chunk_rows, st.Q, st.q, st.colL, n_steps)
    st.stopped = bool(stopped)
    return int(done), bool(stopped)


def partial_log_solve_small(st, numItermax, stopThr):
    """:func:`partial_solve_small` for the log domain
    (:func:`partial_log_small_loop`)."""
    if not st.small or st.started or st.stopped or numItermax > _config.SMALL_MAX_ITER:
        return None
    errs = np.empty(numItermax // 10 + 1)
    with np.errstate(all="ignore"):
        n_err = partial_log_small_loop(
            st.M, st.c, st.C0, st.logm, st.La, st.Lb, st.u, st.v, st.up, st.vp, st.scal,
            st.rmax, PARTIAL_SUM_FLOOR, st.active, st.fail_at, st.cnt, st.n_chunks,
            st.chunk_rows, st.Q, st.q, st.colL, numItermax, stopThr,
            st.M.dtype == np.float32, errs)
    st.started = numItermax > 0 and 1 > stopThr
    st.stopped = not st.active.any()
    return errs[:n_err]


def partial_log_error(st):
    """POT's error of the last iteration, ||LK_prev - LK||_F over the
    problems not failed (float)."""
    e2 = st.k["log_err2"](st.u, st.v, st.scal, st.up, st.vp, st.active, st.n_chunks,
                          st.chunk_rows)
    return math.sqrt(e2)


def _log_rows(st):
    """f_k = Lu_k + C0_k + Ls_k, (n_hists, dim_a)."""
    with np.errstate(invalid="ignore"):
        return st.u + (st.C0 + st.scal[:, 0])[:, None]


def partial_log_plan(st):
    """exp(LK_k) of the current iterates, (n_hists, dim_a, dim_b), M's dtype
    (zeros where a potential is -inf, NaN where it is NaN, as POT's)."""
    n, m = st.M.shape
    plans = np.empty((st.n_hists, n, m), dtype=st.M.dtype)
    f = _log_rows(st)
    if st.n_hists == 1:
        st.k["gibbs"](st.M, st.c, f[0], st.v[0], plans[0])
    else:
        st.k["log_plans"](st.M, st.c, f, st.v, plans)
    return plans


def partial_log_loss(st):
    """<exp(LK_k), M>_F of the current iterates, float64 (n_hists,)."""
    out = np.empty(st.n_hists)
    st.k["gibbs_loss"](st.M, st.c, _log_rows(st), st.v, st.n_chunks, st.chunk_rows, out)
    return out


#: The launcher contract shared with numbaot.cuda.partial (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("PartialState", "partial_steps", "partial_solve_small", "partial_error",
             "partial_failed_at", "partial_plan", "partial_loss", "PartialLogState",
             "partial_log_steps", "partial_log_solve_small", "partial_log_error",
             "partial_log_plan", "partial_log_loss")
