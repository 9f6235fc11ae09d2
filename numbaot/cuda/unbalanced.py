"""CUDA kernels of unbalanced entropic OT, mirroring ``numbaot/cpu/unbalanced.py``.

Conventions (as ``numbaot.cuda.sinkhorn``)
------------------------------------------
* ``Kmat``/``M`` (dim_a, dim_b), C order, only read by the iterations.
* Vectors are problem-major device arrays in the dtype of the data (float32
  problems run float32 arithmetic): ``u`` (n_hists, dim_a), ``v``/``q``
  (n_hists, dim_b); weights with leading dimension 1 are shared.
* Every kernel exists for float32 and float64 (``_build`` per dtype).

Algorithm (multiplicative, POT's ``sinkhorn_knopp_unbalanced`` order)
---------------------------------------------------------------------
u = (a / K v)^fi1 by ``uot_row_update`` (one block per (row, problem),
warp-shuffle block sums); K^T u by ``numbaot.cuda.sinkhorn.knopp_col_partial``: blocks of 32 adjacent
columns x CUDA_TILE_ROWS rows of threads (each warp reads 32 consecutive
entries of a row: coalesced) over a chunk of CUDA_COL_CHUNK_ROWS rows, one
partial per chunk; ``uot_col_finish`` merges the chunk partials in chunk
order (deterministic, no atomics) and sets v = (b / K^T u)^fi2.  POT's
stopping error (relative sup-norm changes of u and v) is reduced on the
device per problem and per iteration by ``uot_err_parts`` (block max with
warp shuffles); the host reads them once per block of iterations.

Small problems (<= CUDA_FUSED_MAX_ENTRIES entries): ``uot_fused_iterations``
runs a block of iterations in one launch, one thread block per problem (rows
by warps with shuffle sums, columns by threads sweeping the rows in memory
order, ``syncthreads`` between the half-steps).

On the GPU K is read twice per iteration (row pass, column pass); the
single-read fusion of the CPU kernel would need grid-wide synchronisation
between the u and the K^T u halves of an iteration.
"""
import math

import numba
import numpy as np
from numba import cuda

from .. import _config
from ._launch import col_launch as _col_launch
from ._launch import col_layout as _col_layout
from ._launch import grid2, grid_problems, per_dtype, threads
from ._reduce import make_reductions
from ._registry import device, kernel



def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    ZERO = dt(0.0)
    ONE = dt(1.0)
    EPS = dt(1e-16)
    NINF = dt(-np.inf)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    A3 = f"{T}[:, :, ::1]"
    I32 = "int32[::1]"

    R = make_reductions(dt)
    warp_sum, block_sum, finite = R.warp_sum, R.block_sum, R.finite
    block_max = R.block_max

    @device
    def power(x, e):
        if e == ONE:
            return x
        return x ** e

    @kernel([f"void({A2}, {T}, {A1}, {A1}, {A2}, int64, {A2})"], hot=True, tag=tag)
    def uot_gibbs(M, c, ca, cb, C, use_mat, out):
        """out[i, j] = exp(c M[i, j]) * (C[i, j] if use_mat else ca[i] cb[j])."""
        j, i = cuda.grid(2)
        if i < M.shape[0] and j < M.shape[1]:
            e = math.exp(c * M[i, j])
            if use_mat:
                out[i, j] = e * C[i, j]
            else:
                out[i, j] = e * ca[i] * cb[j]

    @kernel([f"void({A2}, {A2}, {A2}, {T}, {A2}, {I32}, int64)"],
            hot=True, warp_shuffle=True, tag=tag)
    def uot_row_update(Kmat, a, v, fi1, u, fail, step):
        """u[k, i] = (a[k, i] / sum_j K[i, j] v[k, j])^fi1; block per (i, k);
        fail[step] = 1 if u gets a NaN or inf."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        shared_a = a.shape[0] == 1
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            s = ZERO
            for j in range(tid, Kmat.shape[1], cuda.blockDim.x):
                s += Kmat[i, j] * v[k, j]
            s = block_sum(s, ss)
            if tid == 0:
                x = power((a[0, i] if shared_a else a[k, i]) / s, fi1)
                u[k, i] = x
                if not finite(x):
                    fail[step] = 1

    @kernel([f"void({A3}, {A2}, {T}, {A2}, {A2}, {I32}, int64)"], hot=True, tag=tag)
    def uot_col_finish(P, b, fi2, q, v, fail, step):
        """q = K^T u (chunk partials in chunk order), v = (b / q)^fi2;
        fail[step] = 1 on a zero in q or a NaN/inf in v."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= v.shape[1]:
            return
        shared_b = b.shape[0] == 1
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            s = P[k, 0, j]
            for ch in range(1, P.shape[1]):
                s += P[k, ch, j]
            q[k, j] = s
            x = power((b[0, j] if shared_b else b[k, j]) / s, fi2)
            v[k, j] = x
            if s == ZERO or not finite(x):
                fail[step] = 1

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A3}, int64)"], warp_shuffle=True, tag=tag)
    def uot_err_parts(u, uprev, v, vprev, parts, step):
        """parts[step, k] = (max|u - uprev|, max(|u|, |uprev|), same for v)
        for problem k = blockIdx.x (grid-stride)."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.x, u.shape[0], cuda.gridDim.x):
            du = ZERO
            mu = ZERO
            for i in range(tid, u.shape[1], cuda.blockDim.x):
                du = max(du, abs(u[k, i] - uprev[k, i]))
                mu = max(mu, max(abs(u[k, i]), abs(uprev[k, i])))
            dv = ZERO
            mv = ZERO
            for j in range(tid, v.shape[1], cuda.blockDim.x):
                dv = max(dv, abs(v[k, j] - vprev[k, j]))
                mv = max(mv, max(abs(v[k, j]), abs(vprev[k, j])))
            du = block_max(du, ss)
            mu = block_max(mu, ss)
            dv = block_max(dv, ss)
            mv = block_max(mv, ss)
            if tid == 0:
                parts[step, k, 0] = du
                parts[step, k, 1] = mu
                parts[step, k, 2] = dv
                parts[step, k, 3] = mv

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {T}, {T}, int64, {I32}, {A3})"],
            hot=True, warp_shuffle=True, tag=tag)
    def uot_fused_iterations(Kmat, a, b, u, v, uprev, vprev, q, fi1, fi2, n_iter, fail, parts):
        """``n_iter`` unbalanced iterations of one problem per block: u =
        (a / K v)^fi1 (a warp per row), q = K^T u (a thread per column, rows in
        memory order), v = (b / q)^fi2; fail[s] and parts[s, k] as the
        multi-launch kernels."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        nw = cuda.blockDim.x >> 5
        n = Kmat.shape[0]
        m_ = Kmat.shape[1]
        shared_a = a.shape[0] == 1
        shared_b = b.shape[0] == 1
        for k in range(cuda.blockIdx.x, v.shape[0], cuda.gridDim.x):
            for it in range(n_iter):
                for i in range(tid, n, cuda.blockDim.x):
                    uprev[k, i] = u[k, i]
                for j in range(tid, m_, cuda.blockDim.x):
                    vprev[k, j] = v[k, j]
                cuda.syncthreads()
                for i in range(w, n, nw):
                    s = ZERO
                    for j in range(lane, m_, 32):
                        s += Kmat[i, j] * v[k, j]
                    s = warp_sum(s)
                    if lane == 0:
                        x = power((a[0, i] if shared_a else a[k, i]) / s, fi1)
                        u[k, i] = x
                        if not finite(x):
                            fail[it] = 1
                cuda.syncthreads()
                for j in range(tid, m_, cuda.blockDim.x):
                    s = ZERO
                    for i in range(n):
                        s += Kmat[i, j] * u[k, i]
                    q[k, j] = s
                    x = power((b[0, j] if shared_b else b[k, j]) / s, fi2)
                    v[k, j] = x
                    if s == ZERO or not finite(x):
                        fail[it] = 1
                cuda.syncthreads()
                du = ZERO
                mu = ZERO
                for i in range(tid, n, cuda.blockDim.x):
                    du = max(du, abs(u[k, i] - uprev[k, i]))
                    mu = max(mu, max(abs(u[k, i]), abs(uprev[k, i])))
                dv = ZERO
                mv = ZERO
                for j in range(tid, m_, cuda.blockDim.x):
                    dv = max(dv, abs(v[k, j] - vprev[k, j]))
                    mv = max(mv, max(abs(v[k, j]), abs(vprev[k, j])))
                du = block_max(du, ss)
                mu = block_max(mu, ss)
                dv = block_max(dv, ss)
                mv = block_max(mv, ss)
                if tid == 0:
                    parts[it, k, 0] = du
                    parts[it, k, 1] = mu
                    parts[it, k, 2] = dv
                    parts[it, k, 3] = mv
                cuda.syncthreads()

    @kernel([f"void({A2}, {A2}, {A1}, {A1}, {A2}, {A1}, {A1}, int64, int64, {A2}, {A2})"],
            warp_shuffle=True, tag=tag)
    def uot_plan_rows(Kmat, M, u, v, C, ca, cb, use_mat, write_plan, plan, rowpart):
        """Row i of plan = u_i K_i v (if ``write_plan``); rowpart[0, i] = its
        sum, rowpart[1, i] = <plan_i, M_i>, rowpart[2, i] = sum_j plan_ij
        log(plan_ij / c_ij + 1e-16); block per row."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        ui = u[i]
        rs = ZERO
        lin = ZERO
        kl = ZERO
        for j in range(tid, Kmat.shape[1], cuda.blockDim.x):
            p = ui * Kmat[i, j] * v[j]
            if write_plan:
                plan[i, j] = p
            cij = C[i, j] if use_mat else ca[i] * cb[j]
            rs += p
            lin += p * M[i, j]
            kl += p * math.log(p / cij + EPS)
        rs = block_sum(rs, ss)
        lin = block_sum(lin, ss)
        kl = block_sum(kl, ss)
        if tid == 0:
            rowpart[0, i] = rs
            rowpart[1, i] = lin
            rowpart[2, i] = kl

    @kernel([f"void({A2}, {A1}, {A1}, int64, {A3})"], hot=True, tag=tag)
    def uot_plan_col_partial(Kmat, u, v, chunk_rows, P):
        """P[0, ch, j] = v_j sum_{i in chunk ch} K[i, j] u_i (plan column sums
        by chunk), tiles as ``knopp_col_partial``."""
        sp = cuda.shared.array((32, 32), dtype=T)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        R = cuda.blockDim.y
        j = cuda.blockIdx.x * 32 + tx
        ch = cuda.blockIdx.y
        i0 = ch * chunk_rows
        i1 = min(Kmat.shape[0], i0 + chunk_rows)
        s = ZERO
        if j < Kmat.shape[1]:
            for i in range(i0 + ty, i1, R):
                s += u[i] * Kmat[i, j] * v[j]
        cuda.syncthreads()
        sp[ty, tx] = s
        cuda.syncthreads()
        if ty == 0 and j < Kmat.shape[1]:
            for r in range(1, R):
                s += sp[r, tx]
            P[0, ch, j] = s

    # ------------------------------------------------------------------
    # log domain (the logsumexp passes are numbaot.cuda.sinkhorn's
    # log_row_lse / log_col_partial / log_col_finish)
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {A2}, {A2})"], hot=True, tag=tag)
    def uot_log_shift(x, g, out):
        """out[k, j] = g[k or 0, j] + x[k, j] (log-scalings plus the log of a
        rank-one reference measure)."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= x.shape[1]:
            return
        shared = g.shape[0] == 1
        for k in range(cuda.blockIdx.y, x.shape[0], cuda.gridDim.y):
            out[k, j] = (g[0, j] if shared else g[k, j]) + x[k, j]

    @kernel([f"void({A2}, {T}, {A2}, {I32}, int64)"], hot=True, tag=tag)
    def uot_log_scale(x, f, out, fail, step):
        """out = f * x (-inf kept: a zero-mass entry stays zero);
        fail[step] = 1 on a NaN."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= x.shape[1]:
            return
        for k in range(cuda.blockIdx.y, x.shape[0], cuda.gridDim.y):
            y = x[k, j]
            if y > NINF:
                y = f * y
            out[k, j] = y
            if y != y:
                fail[step] = 1

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A3}, int64)"], warp_shuffle=True, tag=tag)
    def uot_log_err_parts(u, uprev, v, vprev, parts, step):
        """``uot_err_parts`` over the entries finite in both iterates."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.x, u.shape[0], cuda.gridDim.x):
            du = ZERO
            mu = ZERO
            for i in range(tid, u.shape[1], cuda.blockDim.x):
                x = u[k, i]
                y = uprev[k, i]
                if finite(x) and finite(y):
                    du = max(du, abs(x - y))
                    mu = max(mu, max(abs(x), abs(y)))
            dv = ZERO
            mv = ZERO
            for j in range(tid, v.shape[1], cuda.blockDim.x):
                x = v[k, j]
                y = vprev[k, j]
                if finite(x) and finite(y):
                    dv = max(dv, abs(x - y))
                    mv = max(mv, max(abs(x), abs(y)))
            du = block_max(du, ss)
            mu = block_max(mu, ss)
            dv = block_max(dv, ss)
            mv = block_max(mv, ss)
            if tid == 0:
                parts[step, k, 0] = du
                parts[step, k, 1] = mu
                parts[step, k, 2] = dv
                parts[step, k, 3] = mv

    @kernel([f"void({A2}, {A2}, {T}, {A1}, {A1}, {A2}, {A1}, {A1}, int64, int64, {A2}, {A2})"],
            warp_shuffle=True, tag=tag)
    def uot_log_plan_rows(M0, M, c, fu, fv, C, ca, cb, use_mat, write_plan, plan, rowpart):
        """``uot_plan_rows`` with plan_ij = exp(c M0_ij + fu_i + fv_j)."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        fi = fu[i]
        rs = ZERO
        lin = ZERO
        kl = ZERO
        for j in range(tid, M0.shape[1], cuda.blockDim.x):
            p = math.exp(c * M0[i, j] + fi + fv[j])
            if write_plan:
                plan[i, j] = p
            cij = C[i, j] if use_mat else ca[i] * cb[j]
            rs += p
            lin += p * M[i, j]
            kl += p * math.log(p / cij + EPS)
        rs = block_sum(rs, ss)
        lin = block_sum(lin, ss)
        kl = block_sum(kl, ss)
        if tid == 0:
            rowpart[0, i] = rs
            rowpart[1, i] = lin
            rowpart[2, i] = kl

    @kernel([f"void({A2}, {T}, {A1}, {A1}, int64, {A3})"], tag=tag)
    def uot_log_plan_col_partial(M0, c, fu, fv, chunk_rows, P):
        """P[0, ch, j] = sum_{i in chunk ch} exp(c M0_ij + fu_i + fv_j)."""
        sp = cuda.shared.array((32, 32), dtype=T)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        R = cuda.blockDim.y
        j = cuda.blockIdx.x * 32 + tx
        ch = cuda.blockIdx.y
        i0 = ch * chunk_rows
        i1 = min(M0.shape[0], i0 + chunk_rows)
        s = ZERO
        if j < M0.shape[1]:
            for i in range(i0 + ty, i1, R):
                s += math.exp(c * M0[i, j] + fu[i] + fv[j])
        cuda.syncthreads()
        sp[ty, tx] = s
        cuda.syncthreads()
        if ty == 0 and j < M0.shape[1]:
            for r in range(1, R):
                s += sp[r, tx]
            P[0, ch, j] = s

    return dict(
        uot_log_shift=uot_log_shift, uot_log_scale=uot_log_scale,
        uot_log_err_parts=uot_log_err_parts, uot_log_plan_rows=uot_log_plan_rows,
        uot_log_plan_col_partial=uot_log_plan_col_partial,
        uot_gibbs=uot_gibbs, uot_row_update=uot_row_update, uot_col_finish=uot_col_finish, uot_err_parts=uot_err_parts,
        uot_fused_iterations=uot_fused_iterations, uot_plan_rows=uot_plan_rows,
        uot_plan_col_partial=uot_plan_col_partial,
    )


_k = per_dtype(_build)
_gk = grid_problems
_tpb = threads
_grid2 = grid2


def _fused(shape):
    return shape[0] * shape[1] <= _config.CUDA_FUSED_MAX_ENTRIES


# --------------------------------------------------------------------------
# host launchers (names as in numbaot/cpu/unbalanced.py)
# --------------------------------------------------------------------------
def uot_gibbs(M, c, ca, cb, C, use_mat, out):
    """out = exp(c M) * (C or ca cb^T) (device arrays of out's dtype)."""
    grid, block = _grid2(M.shape)
    _k("uot_gibbs", out.dtype)[grid, block](M, out.dtype.type(c), ca, cb, C, int(use_mat), out)


class UotState:
    """Device state of a (batched) unbalanced multiplicative run."""

    def __init__(self, Kmat, a, b, u, v, fi1, fi2):
        dt = Kmat.dtype
        self.Kmat, self.a, self.b, self.u, self.v = Kmat, a, b, u, v
        self.fi1, self.fi2 = dt.type(fi1), dt.type(fi2)
        K, m = v.shape
        self.uprev = cuda.device_array_like(u)
        self.vprev = cuda.device_array_like(v)
        self.q = cuda.device_array((K, m), dtype=dt)
        self.n_chunks, self.chunk_rows = _col_layout(Kmat.shape[0])
        self.P = cuda.device_array((K, self.n_chunks, m), dtype=dt)

    def snapshot(self):
        snap = []
        for x in (self.u, self.v):
            y = cuda.device_array_like(x)
            y.copy_to_device(x)
            snap.append(y)
        return snap

    def restore(self, snap):
        for x, y in zip((self.u, self.v), snap):
            x.copy_to_device(y)


def _run(st, n_steps, fail, parts):
    dt = st.Kmat.dtype
    K, m = st.v.shape
    n = st.Kmat.shape[0]
    if _fused(st.Kmat.shape):
        _k("uot_fused_iterations", dt)[_gk(K), _tpb()](
            st.Kmat, st.a, st.b, st.u, st.v, st.uprev, st.vprev, st.q, st.fi1, st.fi2,
            n_steps, fail, parts)
        return
    t = _tpb()
    row = _k("uot_row_update", dt)[(n, _gk(K)), t]
    cgrid, cblock = _col_launch(st.Kmat.shape, K, st.n_chunks)
    # K^T u: the balanced solver's coalesced chunk-partial kernel (all active)
    from . import sinkhorn as _cs

    colp = _cs._k("knopp_col_partial", dt)[cgrid, cblock]
    all_active = cuda.to_device(np.ones(K, dtype=np.uint8))
    colf = _k("uot_col_finish", dt)[((m + t - 1) // t, _gk(K)), t]
    errk = _k("uot_err_parts", dt)[_gk(K), t]
    for s in range(n_steps):
        st.uprev.copy_to_device(st.u)
        st.vprev.copy_to_device(st.v)
        row(st.Kmat, st.a, st.v, st.fi1, st.u, fail, s)
        colp(st.Kmat, st.u, all_active, st.chunk_rows, st.P)
        colf(st.P, st.b, st.fi2, st.q, st.v, fail, s)
        errk(st.u, st.uprev, st.v, st.vprev, parts, s)


def _blocked_steps(st, run, n_steps, stopThr, errs):
    """Host side of POT's per-iteration stopping rule: blocks of up to 10
    steps run on the device (``run(st, nb, fail, parts)``), which flags
    failing steps and stores the per-problem max-norm parts of each step's
    err; the host reads them once per block, appends err = (err_u + err_v) / 2
    (all problems together, as POT) to ``errs`` and, on a failure or on
    convergence inside a block, replays the block from a snapshot up to the
    right step.  Returns (iterations run, failed)."""
    K = st.v.shape[0]
    dt = st.v.dtype
    done = 0
    while done < n_steps:
        nb = min(10, n_steps - done)
        fail = cuda.to_device(np.zeros(nb, dtype=np.int32))
        parts = cuda.device_array((nb, K, 4), dtype=dt)
        snap = st.snapshot()
        run(st, nb, fail, parts)
        flags = fail.copy_to_host()
        ph = parts.copy_to_host().astype(np.float64)
        first_fail = int(np.flatnonzero(flags)[0]) if flags.any() else nb
        stop = None
        for s in range(first_fail):
            err = 0.5 * (ph[s, :, 0].max() / max(ph[s, :, 1].max(), 1.0)
                         + ph[s, :, 2].max() / max(ph[s, :, 3].max(), 1.0))
            errs.append(err)
            if err < stopThr:
                stop = s + 1
                break
        if stop is not None or first_fail < nb:
            keep = stop if stop is not None else first_fail
            if keep < nb:
                st.restore(snap)
                if keep:
                    run(st, keep, cuda.to_device(np.zeros(keep, dtype=np.int32)),
                        cuda.device_array((keep, K, 4), dtype=dt))
            if stop is not None:
                return done + stop, False
            return done + first_fail, True
        done += nb
    return n_steps, False


def uot_steps(st, n_steps, stopThr, errs):
    """Up to ``n_steps`` multiplicative iterations (mirror of
    ``numbaot.cpu.unbalanced.uot_steps``; see ``_blocked_steps``).  Returns
    (iterations run, failed) as the CPU kernel; ``errs`` (a list) gets one
    err per completed iteration."""
    return _blocked_steps(st, _run, n_steps, stopThr, errs)


class UotLogState:
    """Device state of a (batched) log-domain unbalanced run: log-kernel
    c M0_ij + ga_i + gb_j; la = log a - ga, lb = log b - gb (-inf where the
    weight is 0); log-scalings u (K, dim_a), v (K, dim_b)."""

    def __init__(self, M0, c, ga, gb, la, lb, u, v, fi1, fi2):
        dt = M0.dtype
        self.M0, self.c = M0, dt.type(c)
        self.ga, self.gb, self.la, self.lb = ga, gb, la, lb
        self.u, self.v = u, v
        self.fi1, self.fi2 = dt.type(fi1), dt.type(fi2)
        K, m = v.shape
        n = u.shape[1]
        self.uprev = cuda.device_array_like(u)
        self.vprev = cuda.device_array_like(v)
        self.gu = cuda.device_array((K, n), dtype=dt)
        self.gv = cuda.device_array((K, m), dtype=dt)
        self.vnext = cuda.device_array((K, m), dtype=dt)
        self.q = cuda.device_array((K, m), dtype=dt)
        self.active = cuda.to_device(np.ones(K, dtype=np.uint8))
        self.n_chunks, self.chunk_rows = _col_layout(M0.shape[0])
        self.PM = cuda.device_array((K, self.n_chunks, m), dtype=dt)
        self.PS = cuda.device_array((K, self.n_chunks, m), dtype=dt)

    snapshot = UotState.snapshot
    restore = UotState.restore


def _log_run(st, n_steps, fail, parts):
    from . import sinkhorn as _cs

    dt = st.M0.dtype
    K, m = st.v.shape
    n = st.M0.shape[0]
    t = _tpb()
    ugrid = ((n + t - 1) // t, _gk(K))
    vgrid = ((m + t - 1) // t, _gk(K))
    shift = _k("uot_log_shift", dt)
    scale = _k("uot_log_scale", dt)
    row = _cs._k("log_row_lse", dt)[(n, _gk(K)), t]
    cgrid, cblock = _col_launch(st.M0.shape, K, st.n_chunks)
    colp = _cs._k("log_col_partial", dt)[cgrid, cblock]
    colf = _cs._k("log_col_finish", dt)[vgrid, t]
    errk = _k("uot_log_err_parts", dt)[_gk(K), t]
    for s in range(n_steps):
        st.uprev.copy_to_device(st.u)
        st.vprev.copy_to_device(st.v)
        shift[vgrid, t](st.v, st.gb, st.gv)
        row(st.M0, st.c, st.gv, st.la, st.active, st.u)
        scale[ugrid, t](st.u, st.fi1, st.u, fail, s)
        shift[ugrid, t](st.u, st.ga, st.gu)
        colp(st.M0, st.c, st.gu, st.active, st.chunk_rows, st.PM, st.PS)
        colf(st.PM, st.PS, st.v, st.lb, st.active, st.vnext, st.q)
        scale[vgrid, t](st.vnext, st.fi2, st.v, fail, s)
        errk(st.u, st.uprev, st.v, st.vprev, parts, s)


def uot_log_steps(st, n_steps, stopThr, errs):
    """Up to ``n_steps`` log-domain iterations (mirror of
    ``numbaot.cpu.unbalanced.uot_log_steps``): log u = fi1 (la - LSE_j(c M0
    + gb + log v)), log v = fi2 (lb - LSE_i(c M0 + ga + log u)), the
    logsumexps by numbaot.cuda.sinkhorn's row (block per row, warp-shuffle
    (max, sum) merges) and coalesced column-tile kernels (chunk pairs merged
    in chunk order).  err on the finite log-scalings, as the CPU."""
    return _blocked_steps(st, _log_run, n_steps, stopThr, errs)


def uot_log_plan_stats(M0, M, c, fu, fv, C, ca, cb, use_mat, write_plan, plan):
    """``uot_plan_stats`` for plan_ij = exp(c M0_ij + fu_i + fv_j)."""
    dt = M0.dtype
    n, m = M0.shape
    rowpart = cuda.device_array((3, n), dtype=dt)
    _k("uot_log_plan_rows", dt)[n, _tpb()](M0, M, dt.type(c), fu, fv, C, ca, cb, int(use_mat),
                                           int(write_plan), plan, rowpart)
    n_chunks, chunk_rows = _col_layout(n)
    P = cuda.device_array((1, n_chunks, m), dtype=dt)
    grid, block = _col_launch(M0.shape, 1, n_chunks)
    _k("uot_log_plan_col_partial", dt)[grid, block](M0, dt.type(c), fu, fv, chunk_rows, P)
    rp = rowpart.copy_to_host().astype(np.float64)
    cols = P.copy_to_host()[0].astype(np.float64).sum(axis=0)
    return rp[0], cols, np.array([rp[1].sum(), rp[2].sum()])


def uot_plan_stats(Kmat, M, u, v, C, ca, cb, use_mat, write_plan, plan):
    """Mirror of the CPU ``uot_plan_stats`` for one problem (u (dim_a,),
    v (dim_b,) device arrays).  Returns host float64 (rows, cols, [<plan, M>,
    sum plan log(plan / c + 1e-16)]); rows/cols are O(dim) copies."""
    dt = Kmat.dtype
    n, m = Kmat.shape
    rowpart = cuda.device_array((3, n), dtype=dt)
    _k("uot_plan_rows", dt)[n, _tpb()](Kmat, M, u, v, C, ca, cb, int(use_mat),
                                       int(write_plan), plan, rowpart)
    n_chunks, chunk_rows = _col_layout(n)
    P = cuda.device_array((1, n_chunks, m), dtype=dt)
    grid, block = _col_launch(Kmat.shape, 1, n_chunks)
    _k("uot_plan_col_partial", dt)[grid, block](Kmat, u, v, chunk_rows, P)
    rp = rowpart.copy_to_host().astype(np.float64)
    cols = P.copy_to_host()[0].astype(np.float64).sum(axis=0)
    return rp[0], cols, np.array([rp[1].sum(), rp[2].sum()])
