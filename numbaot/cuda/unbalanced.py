"""CUDA kernels of unbalanced entropic OT and their launchers, mirroring
``numbaot/cpu/unbalanced.py``: the launchers (``LAUNCHERS``) have the same
names, signatures and returns; POT's stopping rule is the CPU's
(``numbaot.cpu.unbalanced.uot_rule``), applied on the host to the per-step
parts the kernels leave on the device.

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
from ..cpu.unbalanced import CONVERGED, FAILED, GO_ON, uot_rule
from . import sinkhorn as cuda_sinkhorn
from ._launch import col_launch as _col_launch
from ._launch import col_layout as _col_layout
from ._launch import grid2, grid_problems, per_dtype, threads
from ._reduce import make_reductions
from ._registry import device, kernel

__all__ = ["uot_gibbs", "UotState", "uot_steps", "uot_scalings", "uot_loss", "uot_plan",
           "uot_stats", "UotLogState", "uot_log_steps", "uot_log_potentials", "uot_log_loss",
           "uot_log_stats"]

#: The launchers, the same in ``numbaot.cpu.unbalanced``.
LAUNCHERS = ("UotState", "uot_steps", "uot_scalings", "uot_loss", "uot_plan", "uot_stats",
             "UotLogState", "uot_log_steps", "uot_log_potentials", "uot_log_loss",
             "uot_log_stats")


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
        log(plan_ij / c_ij + 1e-16) (a zero plan_ij counted as 0); block per row."""
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
            kl += p * math.log(p / cij + EPS) if p != ZERO else ZERO
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
            kl += p * math.log(p / cij + EPS) if p != ZERO else ZERO
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
# host launchers (names, signatures and returns as numbaot.cpu.unbalanced)
# --------------------------------------------------------------------------
def _dev(x, dt):
    return cuda.to_device(np.ascontiguousarray(x, dtype=dt))


def uot_gibbs(M, c, ca, cb, C, use_mat, out):
    """out = exp(c M) * (C or ca cb^T) (device arrays of out's dtype)."""
    grid, block = _grid2(M.shape)
    _k("uot_gibbs", out.dtype)[grid, block](M, out.dtype.type(c), ca, cb, C, int(use_mat), out)


def _snapshot(st):
    snap = []
    for x in (st.u, st.v):
        y = cuda.device_array_like(x)
        y.copy_to_device(x)
        snap.append(y)
    return snap


def _restore(st, snap):
    for x, y in zip((st.u, st.v), snap):
        x.copy_to_device(y)


def _blocked_steps(st, run, n_steps, stopThr, errs):
    """Up to ``n_steps`` iterations under POT's per-iteration rule
    (``uot_rule``): blocks of up to 10 steps run on the device (``run(st, nb,
    fail, parts)``), which flags failing steps and stores each step's
    per-problem max-norm parts of err; the host reads them once per block,
    applies the rule step by step (all problems together, as POT) and, on a
    failure or on convergence inside a block, replays the block from a
    snapshot up to the right step.  Returns (iterations run, failed)."""
    K = st.v.shape[0]
    dt = st.v.dtype
    buf = np.empty(10)
    done = 0
    while done < n_steps:
        nb = min(10, n_steps - done)
        fail = cuda.to_device(np.zeros(nb, dtype=np.int32))
        parts = cuda.device_array((nb, K, 4), dtype=dt)
        snap = _snapshot(st)
        run(st, nb, fail, parts)
        flags = fail.copy_to_host()
        ph = parts.copy_to_host().astype(np.float64).max(axis=1)
        verdict = GO_ON
        s = nb
        for i in range(nb):
            verdict = uot_rule(bool(flags[i]), ph[i, 0], ph[i, 1], ph[i, 2], ph[i, 3], stopThr,
                               buf, i)
            if verdict != GO_ON:
                s = i
                break
        keep = s + 1 if verdict == CONVERGED else s
        errs.extend(buf[:keep])
        if verdict == GO_ON:
            done += nb
            continue
        if keep < nb:
            _restore(st, snap)
            if keep:
                run(st, keep, cuda.to_device(np.zeros(keep, dtype=np.int32)),
                    cuda.device_array((keep, K, 4), dtype=dt))
        return done + keep, verdict == FAILED
    return n_steps, False


def _plan_stats(rows_kernel, col_kernel, rows_args, col_args, shape, dt, want_plan):
    """The plan (a device array, None unless ``want_plan``) and its row sums,
    column sums and [<plan, M>, KL] (host float64) of one problem: a block per
    row, column sums by chunks of rows."""
    n, m = shape
    plan = cuda.device_array(shape if want_plan else (1, 1), dtype=dt)
    rowpart = cuda.device_array((3, n), dtype=dt)
    _k(rows_kernel, dt)[n, _tpb()](*rows_args, int(want_plan), plan, rowpart)
    n_chunks, chunk_rows = _col_layout(n)
    P = cuda.device_array((1, n_chunks, m), dtype=dt)
    grid, block = _col_launch(shape, 1, n_chunks)
    _k(col_kernel, dt)[grid, block](*col_args, chunk_rows, P)
    rp = rowpart.copy_to_host().astype(np.float64)
    cols = P.copy_to_host()[0].astype(np.float64).sum(axis=0)
    return (plan if want_plan else None), rp[0], cols, np.array([rp[1].sum(), rp[2].sum()])


class UotState:
    """Device state of a (batched) multiplicative unbalanced run.

    Same constructor as ``numbaot.cpu.unbalanced.UotState``: ``M`` is the
    C-contiguous device cost matrix (its dtype is the computation's: float32
    problems run float32 arithmetic); ``ca``, ``cb``, ``C``, ``a``, ``b``,
    ``u``, ``v`` are host float64 arrays, copied to the device in M's dtype;
    K = exp(-M / reg) * (C or ca cb^T) is formed on the device.  The
    column-reduction hook ``reduction`` (rows split across processes) is
    CPU-only: ValueError if given.
    """

    def __init__(self, M, reg, ca, cb, C, use_mat, a, b, u, v, fi1, fi2, reduction=None):
        if reduction is not None:
            raise ValueError("reduction: the CUDA launchers do not support rows split across "
                             "processes; use NumPy arrays with numbaot.distributed")
        dt = M.dtype
        self.M = M
        self.use_mat = use_mat
        self.ca, self.cb, self.C = _dev(ca, dt), _dev(cb, dt), _dev(C, dt)
        self.Kmat = cuda.device_array(M.shape, dtype=dt)
        uot_gibbs(M, -1.0 / reg, self.ca, self.cb, self.C, use_mat, self.Kmat)
        self.a, self.b, self.u, self.v = _dev(a, dt), _dev(b, dt), _dev(u, dt), _dev(v, dt)
        self.fi1, self.fi2 = dt.type(fi1), dt.type(fi2)
        K, m = v.shape
        self.uprev = cuda.device_array_like(self.u)
        self.vprev = cuda.device_array_like(self.v)
        self.q = cuda.device_array((K, m), dtype=dt)
        self.n_chunks, self.chunk_rows = _col_layout(M.shape[0])
        self.P = cuda.device_array((K, self.n_chunks, m), dtype=dt)


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
    colp = cuda_sinkhorn.kernel("knopp_col_partial", dt)[cgrid, cblock]
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


def uot_steps(st, n_steps, stopThr, errs):
    """Up to ``n_steps`` multiplicative iterations u = (a / K v)^fi1 (a block
    per (row, problem)), K^T u (coalesced column tiles, chunk partials merged
    in chunk order), v = (b / K^T u)^fi2, or one launch per block of steps
    for small problems, under POT's per-iteration rule (``_blocked_steps``).
    ``errs`` and the returns as ``numbaot.cpu.unbalanced.uot_steps``."""
    return _blocked_steps(st, _run, n_steps, stopThr, errs)


def uot_scalings(st):
    """(u, v) as host arrays (n_problems, dim_a), (n_problems, dim_b), float64."""
    return st.u.copy_to_host().astype(np.float64), st.v.copy_to_host().astype(np.float64)


def uot_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,) in the
    computation's dtype (the plans are not formed)."""
    loss = cuda.device_array(st.v.shape[0], dtype=st.M.dtype)
    cuda_sinkhorn.scaled_loss(st.Kmat, st.M, st.u, st.v, loss)
    return loss.copy_to_host()


def uot_plan(st):
    """The plan diag(u) K diag(v) of the first problem, a device array
    (dim_a, dim_b) of M's dtype."""
    plan = cuda.device_array(st.M.shape, dtype=st.M.dtype)
    cuda_sinkhorn.scaled_plan(st.Kmat, st.u[0], st.v[0], plan)
    return plan


def uot_stats(st, want_plan):
    """The first problem's plan (a device array; None unless ``want_plan``),
    its row and column sums (host float64 (dim_a,), (dim_b,); O(dim) copies)
    and host float64 [<plan, M>, sum plan log(plan / c + 1e-16)]."""
    u, v = st.u[0], st.v[0]
    return _plan_stats("uot_plan_rows", "uot_plan_col_partial",
                       (st.Kmat, st.M, u, v, st.C, st.ca, st.cb, int(st.use_mat)),
                       (st.Kmat, u, v), st.M.shape, st.M.dtype, want_plan)


class UotLogState:
    """Device state of a (batched) log-domain unbalanced run.

    Same constructor as ``numbaot.cpu.unbalanced.UotLogState`` (``u``, ``v``:
    initial log-scalings).  Log-kernel c M0_ij + ga_i + gb_j; with an explicit
    ``C``, M0 = M - reg log C is formed on the host (one dim_a x dim_b copy
    each way); la = log a - ga, lb = log b - gb (-inf where the weight is 0).
    """

    def __init__(self, M, reg, ca, cb, C, use_mat, a, b, u, v, fi1, fi2):
        dt = M.dtype
        K = u.shape[0]
        dim_a, dim_b = M.shape
        self.M = M
        self.c = dt.type(-1.0 / reg)
        self.use_mat = use_mat
        with np.errstate(divide="ignore"):
            if use_mat:
                self.M0 = _dev(M.copy_to_host() - reg * np.log(C), dt)
                ga, gb = np.zeros((1, dim_a)), np.zeros((1, dim_b))
            else:
                self.M0 = M
                ga, gb = np.log(ca).reshape(1, -1), np.log(cb).reshape(1, -1)
            la = np.log(a) - ga
            la[np.log(a) == -np.inf] = -np.inf
            lb = np.broadcast_to(np.log(b) - gb, (K, dim_b)).copy()
            lb[np.broadcast_to(b, (K, dim_b)) == 0] = -np.inf
        self.ga_host, self.gb_host = ga, gb
        self.ga, self.gb, self.la, self.lb = _dev(ga, dt), _dev(gb, dt), _dev(la, dt), _dev(lb, dt)
        self.ca, self.cb, self.C = _dev(ca, dt), _dev(cb, dt), _dev(C, dt)
        self.u, self.v = _dev(u, dt), _dev(v, dt)
        self.fi1, self.fi2 = dt.type(fi1), dt.type(fi2)
        m = dim_b
        self.uprev = cuda.device_array_like(self.u)
        self.vprev = cuda.device_array_like(self.v)
        self.gu = cuda.device_array((K, dim_a), dtype=dt)
        self.gv = cuda.device_array((K, m), dtype=dt)
        self.vnext = cuda.device_array((K, m), dtype=dt)
        self.q = cuda.device_array((K, m), dtype=dt)
        self.active = cuda.to_device(np.ones(K, dtype=np.uint8))
        self.n_chunks, self.chunk_rows = _col_layout(dim_a)
        self.PM = cuda.device_array((K, self.n_chunks, m), dtype=dt)
        self.PS = cuda.device_array((K, self.n_chunks, m), dtype=dt)


def _log_run(st, n_steps, fail, parts):
    dt = st.M0.dtype
    K, m = st.v.shape
    n = st.M0.shape[0]
    t = _tpb()
    ugrid = ((n + t - 1) // t, _gk(K))
    vgrid = ((m + t - 1) // t, _gk(K))
    shift = _k("uot_log_shift", dt)
    scale = _k("uot_log_scale", dt)
    row = cuda_sinkhorn.kernel("log_row_lse", dt)[(n, _gk(K)), t]
    cgrid, cblock = _col_launch(st.M0.shape, K, st.n_chunks)
    colp = cuda_sinkhorn.kernel("log_col_partial", dt)[cgrid, cblock]
    colf = cuda_sinkhorn.kernel("log_col_finish", dt)[vgrid, t]
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
    """Up to ``n_steps`` log-domain iterations log u = fi1 (la - LSE_j(c M0
    + gb + log v)), log v = fi2 (lb - LSE_i(c M0 + ga + log u)), the
    logsumexps by numbaot.cuda.sinkhorn's row (block per row, warp-shuffle
    (max, sum) merges) and coalesced column-tile kernels (chunk pairs merged
    in chunk order), under POT's per-iteration rule on the finite
    log-scalings.  ``errs`` and the returns as
    ``numbaot.cpu.unbalanced.uot_log_steps``."""
    return _blocked_steps(st, _log_run, n_steps, stopThr, errs)


def uot_log_potentials(st):
    """(log u, log v) as host arrays (n_problems, dim_a), (n_problems, dim_b), float64."""
    return st.u.copy_to_host().astype(np.float64), st.v.copy_to_host().astype(np.float64)


def _log_shifted(st):
    """Host float64 log u + ga, log v + gb (n_problems, dim)."""
    u, v = uot_log_potentials(st)
    return u + st.ga_host, v + st.gb_host


def uot_log_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,) in the
    computation's dtype."""
    dt = st.M.dtype
    fu, fv = _log_shifted(st)
    loss = cuda.device_array(st.v.shape[0], dtype=dt)
    cuda_sinkhorn.gibbs_loss(st.M, st.c, _dev(fu, dt), _dev(fv, dt), loss)
    return loss.copy_to_host()


def uot_log_stats(st, want_plan):
    """``uot_stats`` for the log domain: plan_ij = exp(c M0_ij + log u_i + ga_i
    + log v_j + gb_j)."""
    dt = st.M.dtype
    fu, fv = _log_shifted(st)
    fu, fv = _dev(fu[0], dt), _dev(fv[0], dt)
    return _plan_stats("uot_log_plan_rows", "uot_log_plan_col_partial",
                       (st.M0, st.M, st.c, fu, fv, st.C, st.ca, st.cb, int(st.use_mat)),
                       (st.M0, st.c, fu, fv), st.M.shape, dt, want_plan)
