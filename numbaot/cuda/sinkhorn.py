"""CUDA kernels of balanced entropic OT (Sinkhorn), mirroring ``numbaot/cpu/sinkhorn.py``.

Conventions (as on the CPU)
---------------------------
* ``M`` (or the Gibbs kernel ``Kmat``) has shape (dim_a, dim_b), C order; it is
  only ever read.
* Per-problem vectors are problem-major device arrays: ``u`` (n_hists, dim_a),
  ``v``, ``q`` (n_hists, dim_b).  A weight array with a leading dimension of 1
  is shared by all problems.  Unlike the CPU kernels (float64 inside), the
  CUDA kernels compute in the dtype of the data: float32 problems run float32
  arithmetic (the PTX tests check that their kernels contain no float64
  arithmetic), float64 problems float64.  Every kernel exists in both dtypes
  (``_build`` makes one set per dtype, so that constants keep the dtype).
* Problems are spread over ``gridDim.y`` (grid-stride, so any number of
  problems); ``active[k] == 0`` freezes problem k.

Algorithms
----------
Log domain (Viehmann, arXiv:1907.01729, sec. 4 and the accompanying notebook),
c = -1/reg: u <- log a - LSE_j(c M_ij + v_j) by ``log_row_lse``: one block per
(problem, row); each thread keeps an online (max, scaled sum) pair over its
strided columns (one exp per entry), pairs are merged across the warp by
``shfl_xor_sync`` butterflies and across warps through shared memory.  A pair
with max -inf (zero weights, log 0 = -inf) merges as the empty sum.  The column
half-step v <- log b - LSE_i(c M_ij + u_i) must not walk down columns:
``log_col_partial`` gives each block 32 adjacent columns (one warp reads 32
consecutive entries of a row: coalesced) and a chunk of rows; the per-chunk
(max, sum) pairs are merged in chunk order by ``log_col_finish``
(deterministic: no atomics), which also forms the plan's column sums
q_j = exp(LSE_j + v_j) for the marginal error, free.

Multiplicative (Sinkhorn-Knopp): ``knopp_row_update`` (block per row, warp
shuffle sums) gives u = a / (K v); ``knopp_col_partial`` / ``knopp_col_finish``
give K^T u with the same coalesced tiles; ``knopp_v_update`` sets v = b / K^T u.

Small problems (at most ``_config.CUDA_FUSED_MAX_ENTRIES`` entries):
``log_fused_iterations`` / ``knopp_fused_iterations`` run a whole block of
iterations inside one launch, one thread block per problem (rows by warps with
shuffle reductions, columns by threads sweeping rows in memory order,
``syncthreads`` between half-steps), so a batch of small problems pays one
launch per 10 iterations, not several per iteration.

Convergence is checked on the device: ``marginal_error`` reduces
sum_j (q_j - b_j)^2 per problem, and the host reads n_hists numbers every 10
iterations (one round trip per check, none per iteration).
"""
import math

import numpy as np
import numba
from numba import cuda

from .. import _config
from ._launch import col_launch as _col_launch
from ._launch import col_layout as _col_layout
from ._launch import grid2, grid_problems, per_dtype, threads
from ._reduce import make_reductions
from ._registry import kernel



def _build(dt):
    """Kernels for one dtype (float32 or float64)."""
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    NINF = dt(-np.inf)
    ZERO = dt(0.0)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    A3 = f"{T}[:, :, ::1]"
    U8 = "uint8[::1]"
    I32 = "int32[::1]"

    R = make_reductions(dt)
    lse_push, lse_merge, warp_lse, warp_sum = R.lse_push, R.lse_merge, R.warp_lse, R.warp_sum
    block_lse, block_sum, finite = R.block_lse, R.block_sum, R.finite

    # ------------------------------------------------------------------
    # elementwise and reductions shared by both algorithms
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {T}, {A1}, {A1}, {A2})"], hot=True, tag=tag)
    def gibbs_kernel(M, c, f, g, out):
        """out[i, j] = exp(c * M[i, j] + f[i] + g[j]); 2-D grid over (j, i)."""
        j, i = cuda.grid(2)
        if i < M.shape[0] and j < M.shape[1]:
            out[i, j] = math.exp(c * M[i, j] + f[i] + g[j])

    @kernel([f"void({A2}, {A1}, {A1}, {A2})"], hot=True, tag=tag)
    def scaled_plan(Kmat, u, v, out):
        """out[i, j] = u[i] * K[i, j] * v[j]."""
        j, i = cuda.grid(2)
        if i < Kmat.shape[0] and j < Kmat.shape[1]:
            out[i, j] = u[i] * Kmat[i, j] * v[j]

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A2})"], warp_shuffle=True, tag=tag)
    def scaled_loss_rows(Kmat, M, u, v, part):
        """part[k, i] = u[k, i] * sum_j M[i, j] K[i, j] v[k, j]; block per (i, k)."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            s = ZERO
            for j in range(tid, Kmat.shape[1], cuda.blockDim.x):
                s += M[i, j] * Kmat[i, j] * v[k, j]
            s = block_sum(s, ss)
            if tid == 0:
                part[k, i] = s * u[k, i] if s != ZERO else ZERO

    @kernel([f"void({A2}, {T}, {A2}, {A2}, {A2})"], warp_shuffle=True, tag=tag)
    def gibbs_loss_rows(M, c, f, g, part):
        """part[k, i] = sum_j M[i, j] exp(c M[i, j] + f[k, i] + g[k, j])."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, g.shape[0], cuda.gridDim.y):
            fi = f[k, i]
            s = ZERO
            if fi != NINF:  # an empty row adds 0; a NaN row makes the loss NaN (as the CPU)
                for j in range(tid, M.shape[1], cuda.blockDim.x):
                    x = M[i, j]
                    s += x * math.exp(c * x + fi + g[k, j])
            s = block_sum(s, ss)
            if tid == 0:
                part[k, i] = s

    @kernel([f"void({A2}, {A1})"], warp_shuffle=True, tag=tag)
    def sum_rows(X, out):
        """out[k] = sum_i X[k, i]; one block per k, fixed order."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            s = ZERO
            for i in range(tid, X.shape[1], cuda.blockDim.x):
                s += X[k, i]
            s = block_sum(s, ss)
            if tid == 0:
                out[k] = s

    @kernel([f"void({A2}, {A2}, {U8}, {A1})"], hot=True, warp_shuffle=True, tag=tag)
    def marginal_error(q, b, active, err2):
        """err2[k] = sum_j (q[k, j] - b[k, j])^2 for the active problems."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.x, q.shape[0], cuda.gridDim.x):
            if active[k] == 0:
                continue
            s = ZERO
            for j in range(tid, q.shape[1], cuda.blockDim.x):
                d = q[k, j] - b[k, j]
                s += d * d
            s = block_sum(s, ss)
            if tid == 0:
                err2[k] = s

    @kernel([f"void(float32[:, :], {A2})", f"void(float64[:, :], {A2})"], tag=tag)
    def copy_cast(src, dst):
        """dst[i, j] = src[i, j] (any layout in, C order and this dtype out)."""
        j, i = cuda.grid(2)
        if i < dst.shape[0] and j < dst.shape[1]:
            dst[i, j] = src[i, j]

    # ------------------------------------------------------------------
    # log domain
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {T}, {A2}, {A2}, {U8}, {A2})"], hot=True, warp_shuffle=True, tag=tag)
    def log_row_lse(M, c, v, loga, active, u):
        """u[k, i] = log a[k, i] - LSE_j(c M[i, j] + v[k, j]); block per (i, k)."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        shared_a = loga.shape[0] == 1
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if active[k] == 0:
                continue
            m = NINF
            s = ZERO
            for j in range(tid, M.shape[1], cuda.blockDim.x):
                m, s = lse_push(m, s, c * M[i, j] + v[k, j])
            m, s = block_lse(m, s, sm, ss)
            if tid == 0:
                la = loga[0, i] if shared_a else loga[k, i]
                u[k, i] = la - (m + math.log(s)) if la > NINF else NINF

    @kernel([f"void({A2}, {T}, {A2}, {U8}, int64, {A3}, {A3})"], hot=True, tag=tag)
    def log_col_partial(M, c, u, active, chunk_rows, PM, PS):
        """(PM, PS)[k, ch, j] = (max, scaled sum) of c M[i, j] + u[k, i] over the
        rows of chunk ch.  Block (32, R): threadIdx.x = column in a 32-wide
        tile (coalesced row reads), threadIdx.y = row within the chunk; the R
        row-partials are merged in order through shared memory."""
        sm = cuda.shared.array((32, 32), dtype=T)
        ss = cuda.shared.array((32, 32), dtype=T)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        R = cuda.blockDim.y
        j = cuda.blockIdx.x * 32 + tx
        ch = cuda.blockIdx.y
        i0 = ch * chunk_rows
        i1 = min(M.shape[0], i0 + chunk_rows)
        for k in range(cuda.blockIdx.z, u.shape[0], cuda.gridDim.z):
            if active[k] == 0:
                continue
            m = NINF
            s = ZERO
            if j < M.shape[1]:
                for i in range(i0 + ty, i1, R):
                    m, s = lse_push(m, s, c * M[i, j] + u[k, i])
            cuda.syncthreads()
            sm[ty, tx] = m
            ss[ty, tx] = s
            cuda.syncthreads()
            if ty == 0 and j < M.shape[1]:
                for r in range(1, R):
                    m, s = lse_merge(m, s, sm[r, tx], ss[r, tx])
                PM[k, ch, j] = m
                PS[k, ch, j] = s

    @kernel([f"void({A3}, {A3}, {A2}, {A2}, {U8}, {A2}, {A2})"], hot=True, tag=tag)
    def log_col_finish(PM, PS, v, logb, active, vnext, q):
        """LSE_j from the chunk pairs (chunk order); vnext = log b - LSE and
        q_j = exp(LSE_j + v_j), the column sums of the plan (u, v)."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= v.shape[1]:
            return
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if active[k] == 0:
                continue
            m = PM[k, 0, j]
            s = PS[k, 0, j]
            for ch in range(1, PM.shape[1]):
                m, s = lse_merge(m, s, PM[k, ch, j], PS[k, ch, j])
            lse = m + math.log(s)
            q[k, j] = math.exp(lse + v[k, j]) if v[k, j] > NINF else ZERO
            lb = logb[k, j]
            vnext[k, j] = lb - lse if lb > NINF else NINF

    @kernel([f"void({A2}, {A2}, {U8})"], hot=True, tag=tag)
    def log_v_update(vnext, v, active):
        """v = vnext for the active problems (start of an iteration)."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= v.shape[1]:
            return
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if active[k] != 0:
                v[k, j] = vnext[k, j]

    @kernel([f"void({A2}, {T}, {A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {U8}, int64, {A1})"],
            hot=True, warp_shuffle=True, tag=tag)
    def log_fused_iterations(M, c, loga, logb, b, u, v, vnext, q, active, n_iter, err2):
        """``n_iter`` log-domain iterations of one problem per block (small
        problems): v = vnext; u = log a - row LSE (a warp per row, shuffle
        merges); column LSE (a thread per column, rows in memory order) gives
        q and vnext.  err2[k] = sum_j (q_j - b_j)^2 at the end."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        nw = cuda.blockDim.x >> 5
        n = M.shape[0]
        m_ = M.shape[1]
        shared_a = loga.shape[0] == 1
        for k in range(cuda.blockIdx.x, v.shape[0], cuda.gridDim.x):
            if active[k] == 0:
                continue
            for it in range(n_iter):
                for j in range(tid, m_, cuda.blockDim.x):
                    v[k, j] = vnext[k, j]
                cuda.syncthreads()
                for i in range(w, n, nw):
                    m = NINF
                    s = ZERO
                    for j in range(lane, m_, 32):
                        m, s = lse_push(m, s, c * M[i, j] + v[k, j])
                    m, s = warp_lse(m, s)
                    if lane == 0:
                        la = loga[0, i] if shared_a else loga[k, i]
                        u[k, i] = la - (m + math.log(s)) if la > NINF else NINF
                cuda.syncthreads()
                for j in range(tid, m_, cuda.blockDim.x):
                    m = NINF
                    s = ZERO
                    for i in range(n):
                        m, s = lse_push(m, s, c * M[i, j] + u[k, i])
                    lse = m + math.log(s)
                    q[k, j] = math.exp(lse + v[k, j]) if v[k, j] > NINF else ZERO
                    lb = logb[k, j]
                    vnext[k, j] = lb - lse if lb > NINF else NINF
                cuda.syncthreads()
            e = ZERO
            for j in range(tid, m_, cuda.blockDim.x):
                d = q[k, j] - b[k, j]
                e += d * d
            e = block_sum(e, ss)
            if tid == 0:
                err2[k] = e

    # ------------------------------------------------------------------
    # multiplicative (Sinkhorn-Knopp)
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {A2}, {A2}, {U8}, {A2}, {I32}, int64)"],
            hot=True, warp_shuffle=True, tag=tag)
    def knopp_row_update(Kmat, a, v, active, u, fail, step):
        """u[k, i] = a[k, i] / sum_j K[i, j] v[k, j]; block per (i, k);
        fail[step] = 1 if u gets a NaN or inf."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        shared_a = a.shape[0] == 1
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if active[k] == 0:
                continue
            s = ZERO
            for j in range(tid, Kmat.shape[1], cuda.blockDim.x):
                s += Kmat[i, j] * v[k, j]
            s = block_sum(s, ss)
            if tid == 0:
                x = (a[0, i] if shared_a else a[k, i]) / s
                u[k, i] = x
                if not finite(x):
                    fail[step] = 1

    @kernel([f"void({A2}, {A2}, {U8}, int64, {A3})"], hot=True, tag=tag)
    def knopp_col_partial(Kmat, u, active, chunk_rows, P):
        """P[k, ch, j] = sum_{i in chunk ch} K[i, j] u[k, i]; (32, R) tiles as
        ``log_col_partial`` (coalesced), rows merged in order."""
        sp = cuda.shared.array((32, 32), dtype=T)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        R = cuda.blockDim.y
        j = cuda.blockIdx.x * 32 + tx
        ch = cuda.blockIdx.y
        i0 = ch * chunk_rows
        i1 = min(Kmat.shape[0], i0 + chunk_rows)
        for k in range(cuda.blockIdx.z, u.shape[0], cuda.gridDim.z):
            if active[k] == 0:
                continue
            s = ZERO
            if j < Kmat.shape[1]:
                for i in range(i0 + ty, i1, R):
                    s += Kmat[i, j] * u[k, i]
            cuda.syncthreads()
            sp[ty, tx] = s
            cuda.syncthreads()
            if ty == 0 and j < Kmat.shape[1]:
                for r in range(1, R):
                    s += sp[r, tx]
                P[k, ch, j] = s

    @kernel([f"void({A3}, {A2}, {U8}, {A2}, {A2})"], hot=True, tag=tag)
    def knopp_col_finish(P, v, active, q, qm):
        """q = K^T u (chunk sums in order) and qm = v * q, the column sums of
        the plan (u, v)."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= v.shape[1]:
            return
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if active[k] == 0:
                continue
            s = P[k, 0, j]
            for ch in range(1, P.shape[1]):
                s += P[k, ch, j]
            q[k, j] = s
            qm[k, j] = v[k, j] * s

    @kernel([f"void({A2}, {A2}, {U8}, {A2}, {I32}, int64)"], hot=True, tag=tag)
    def knopp_v_update(b, q, active, v, fail, step):
        """v = b / q (q = K^T u); fail[step] = 1 on a zero in q or a NaN/inf in v."""
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j >= v.shape[1]:
            return
        for k in range(cuda.blockIdx.y, v.shape[0], cuda.gridDim.y):
            if active[k] == 0:
                continue
            x = b[k, j] / q[k, j]
            v[k, j] = x
            if q[k, j] == ZERO or not finite(x):
                fail[step] = 1

    @kernel([f"void({A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {A2}, {U8}, int64, {I32}, {A1})"],
            hot=True, warp_shuffle=True, tag=tag)
    def knopp_fused_iterations(Kmat, a, b, u, v, q, qm, active, n_iter, fail, err2):
        """``n_iter`` Sinkhorn-Knopp iterations of one problem per block:
        v = b / q; u = a / (K v) (a warp per row); q = K^T u (a thread per
        column, rows in memory order); fail[s] = 1 when step s meets a zero in
        K^T u or a NaN/inf; err2[k] = sum_j (v_j q_j - b_j)^2 at the end."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        nw = cuda.blockDim.x >> 5
        n = Kmat.shape[0]
        m_ = Kmat.shape[1]
        shared_a = a.shape[0] == 1
        for k in range(cuda.blockIdx.x, v.shape[0], cuda.gridDim.x):
            if active[k] == 0:
                continue
            for it in range(n_iter):
                for j in range(tid, m_, cuda.blockDim.x):
                    x = b[k, j] / q[k, j]
                    v[k, j] = x
                    if q[k, j] == ZERO or not finite(x):
                        fail[it] = 1
                cuda.syncthreads()
                for i in range(w, n, nw):
                    s = ZERO
                    for j in range(lane, m_, 32):
                        s += Kmat[i, j] * v[k, j]
                    s = warp_sum(s)
                    if lane == 0:
                        x = (a[0, i] if shared_a else a[k, i]) / s
                        u[k, i] = x
                        if not finite(x):
                            fail[it] = 1
                cuda.syncthreads()
                for j in range(tid, m_, cuda.blockDim.x):
                    s = ZERO
                    for i in range(n):
                        s += Kmat[i, j] * u[k, i]
                    q[k, j] = s
                    qm[k, j] = v[k, j] * s
                cuda.syncthreads()
            e = ZERO
            for j in range(tid, m_, cuda.blockDim.x):
                d = qm[k, j] - b[k, j]
                e += d * d
            e = block_sum(e, ss)
            if tid == 0:
                err2[k] = e

    return dict(
        gibbs_kernel=gibbs_kernel, scaled_plan=scaled_plan, scaled_loss_rows=scaled_loss_rows,
        gibbs_loss_rows=gibbs_loss_rows, sum_rows=sum_rows, marginal_error=marginal_error,
        copy_cast=copy_cast,
        log_row_lse=log_row_lse, log_col_partial=log_col_partial, log_col_finish=log_col_finish,
        log_v_update=log_v_update, log_fused_iterations=log_fused_iterations,
        knopp_row_update=knopp_row_update, knopp_col_partial=knopp_col_partial,
        knopp_col_finish=knopp_col_finish, knopp_v_update=knopp_v_update,
        knopp_fused_iterations=knopp_fused_iterations,
    )


#: kernel(name, dtype): the compiled kernel of this module for ``dtype``
#: (the barycenter, unbalanced and gradient launchers reuse these kernels).
kernel = per_dtype(_build)
_k = kernel
_grid_k = grid_problems
_tpb = threads
_grid2 = grid2


# --------------------------------------------------------------------------
# host launchers (names as in numbaot/cpu/sinkhorn.py where they mirror it)
# --------------------------------------------------------------------------
def to_contiguous(M, dtype):
    """M as a C-contiguous device array of ``dtype`` (M itself when it is one)."""
    dtype = np.dtype(dtype)
    if M.dtype == dtype and M.is_c_contiguous():
        return M
    out = cuda.device_array(M.shape, dtype=dtype)
    grid, block = _grid2(M.shape)
    _k("copy_cast", dtype)[grid, block](M, out)
    return out


def gibbs_kernel(M, c, f, g, out):
    """out[i, j] = exp(c * M[i, j] + f[i] + g[j]) (f, g 1-D device arrays)."""
    grid, block = _grid2(M.shape)
    _k("gibbs_kernel", out.dtype)[grid, block](M, out.dtype.type(c), f, g, out)


def scaled_plan(Kmat, u, v, out):
    """out[i, j] = u[i] * K[i, j] * v[j]."""
    grid, block = _grid2(Kmat.shape)
    _k("scaled_plan", out.dtype)[grid, block](Kmat, u, v, out)


def scaled_loss(Kmat, M, u, v, out):
    """out[k] = sum_ij M[i, j] u[k, i] K[i, j] v[k, j] (row partials, then a
    fixed-order sum: deterministic)."""
    dt = Kmat.dtype
    part = cuda.device_array((v.shape[0], Kmat.shape[0]), dtype=dt)
    _k("scaled_loss_rows", dt)[(Kmat.shape[0], _grid_k(v.shape[0])), _tpb()](Kmat, M, u, v, part)
    _k("sum_rows", dt)[_grid_k(v.shape[0]), _tpb()](part, out)


def gibbs_loss(M, c, f, g, out):
    """out[k] = sum_ij M[i, j] exp(c M[i, j] + f[k, i] + g[k, j])."""
    dt = M.dtype
    part = cuda.device_array((g.shape[0], M.shape[0]), dtype=dt)
    _k("gibbs_loss_rows", dt)[(M.shape[0], _grid_k(g.shape[0])), _tpb()](
        M, dt.type(c), f, g, part)
    _k("sum_rows", dt)[_grid_k(g.shape[0]), _tpb()](part, out)


def marginal_error(q, b, active, err2):
    """err2[k] = sum_j (q[k, j] - b[k, j])^2 for the active problems."""
    _k("marginal_error", q.dtype)[_grid_k(q.shape[0]), _tpb()](q, b, active, err2)


def _fused(shape):
    return shape[0] * shape[1] <= _config.CUDA_FUSED_MAX_ENTRIES


def _vec_launch(m, n_problems):
    t = _tpb()
    return ((m + t - 1) // t, _grid_k(n_problems)), t


def _dev(x, dt):
    return cuda.to_device(np.ascontiguousarray(x, dtype=dt))


def _no_reduction(reduction):
    """The CPU launchers take a column-reduction hook (rows split across MPI
    processes, ``numbaot.distributed``); the GPU ones do not."""
    if reduction is not None:
        raise ValueError("reduction: the CUDA launchers do not support rows split across "
                         "processes; use NumPy arrays with numbaot.distributed")


class LogState:
    """Device state of a batched log-domain Sinkhorn run (problem-major).

    Same constructor as ``numbaot.cpu.sinkhorn.LogState``: ``M`` is the
    C-contiguous device cost matrix (float32/float64: the computation's
    dtype); ``loga``, ``logb``, ``b``, ``u``, ``v`` are host float64 arrays
    (n_problems or 1, dim), copied to the device in M's dtype."""

    def __init__(self, M, c, loga, logb, b, u, v, reduction=None):
        _no_reduction(reduction)
        dt = M.dtype
        self.M, self.c = M, dt.type(c)
        self.loga, self.logb, self.b = _dev(loga, dt), _dev(logb, dt), _dev(b, dt)
        self.u, self.v = _dev(u, dt), _dev(v, dt)
        K, m = v.shape
        self.vnext = cuda.device_array((K, m), dtype=dt)
        self.q = cuda.device_array((K, m), dtype=dt)
        self.err2 = cuda.to_device(np.zeros(K, dtype=dt))
        self.active_host = np.ones(K, dtype=np.uint8)
        self.active = cuda.to_device(self.active_host)
        self.n_chunks, self.chunk_rows = _col_layout(M.shape[0])
        self.PM = cuda.device_array((K, self.n_chunks, m), dtype=dt)
        self.PS = cuda.device_array((K, self.n_chunks, m), dtype=dt)
        self._col_pass(self.v)  # vnext = log b - LSE_i(c M_ij + u_i)

    def _col_pass(self, v):
        dt = self.M.dtype
        K, m = v.shape
        grid, block = _col_launch(self.M.shape, K, self.n_chunks)
        _k("log_col_partial", dt)[grid, block](self.M, self.c, self.u, self.active,
                                               self.chunk_rows, self.PM, self.PS)
        grid, block = _vec_launch(m, K)
        _k("log_col_finish", dt)[grid, block](self.PM, self.PS, v, self.logb, self.active,
                                              self.vnext, self.q)

    def set_active(self, active):
        self.active_host = np.asarray(active, dtype=np.uint8)
        self.active = cuda.to_device(self.active_host)


def log_steps(st, n_steps, active):
    """Run ``n_steps`` log-domain iterations (POT order: v = vnext, then
    u = log a - row LSE, then the column LSE gives q and the next v) of the
    problems flagged in ``active`` (host bool (n_problems,)); the others are
    left untouched.  The marginal errors are kept for :func:`log_errors`."""
    if not np.array_equal(st.active_host, active):
        st.set_active(active)
    dt = st.M.dtype
    K, m = st.v.shape
    n = st.M.shape[0]
    if _fused(st.M.shape):
        _k("log_fused_iterations", dt)[_grid_k(K), _tpb()](
            st.M, st.c, st.loga, st.logb, st.b, st.u, st.v, st.vnext, st.q,
            st.active, n_steps, st.err2)
        st.err2_host = st.err2.copy_to_host()
        return
    vgrid, vblock = _vec_launch(m, K)
    row = _k("log_row_lse", dt)[(n, _grid_k(K)), _tpb()]
    vup = _k("log_v_update", dt)[vgrid, vblock]
    for _ in range(n_steps):
        vup(st.vnext, st.v, st.active)
        row(st.M, st.c, st.v, st.loga, st.active, st.u)
        st._col_pass(st.v)
    marginal_error(st.q, st.b, st.active, st.err2)
    st.err2_host = st.err2.copy_to_host()


def log_solve_small(st, numItermax, stopThr):
    """As :func:`knopp_solve_small`, for the log domain
    (``numbaot.cpu.sinkhorn.log_solve_small``): None, the caller runs
    :func:`log_steps` / :func:`log_errors` under ``numbaot._loops``."""
    return None


def log_errors(st):
    """Each problem's column-marginal violation ||q_k - b_k||_2 after the
    last :func:`log_steps`, host float64 array (n_problems,)."""
    return np.sqrt(st.err2_host.astype(np.float64))


def log_potentials(st):
    """(log_u, log_v) as host arrays (n_problems, dim_a), (n_problems, dim_b),
    in the computation's dtype."""
    return st.u.copy_to_host(), st.v.copy_to_host()


def log_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,), in the
    computation's dtype (the plans are not formed)."""
    loss = cuda.device_array(st.v.shape[0], dtype=st.M.dtype)
    gibbs_loss(st.M, st.c, st.u, st.v, loss)
    return loss.copy_to_host()


def log_plan(st):
    """The plan exp(c M + log_u 1^T + 1 log_v^T) of the first problem, a
    device array (dim_a, dim_b) of M's dtype."""
    plan = cuda.device_array(st.M.shape, dtype=st.M.dtype)
    gibbs_kernel(st.M, st.c, st.u[0], st.v[0], plan)
    return plan


class KnoppState:
    """Device state of a batched Sinkhorn-Knopp run (problem-major).

    Same constructor as ``numbaot.cpu.sinkhorn.KnoppState``: ``M`` is the
    C-contiguous device cost matrix (its dtype is the computation's); the
    Gibbs kernel K = exp(c M) is formed on the device; ``a``, ``b``, ``u``,
    ``v`` are host float64 arrays, copied to the device in M's dtype."""

    def __init__(self, M, c, a, b, u, v, reduction=None):
        _no_reduction(reduction)
        dt = M.dtype
        self.M = M
        self.Kmat = cuda.device_array(M.shape, dtype=dt)
        gibbs_kernel(M, c, _dev(np.zeros(M.shape[0]), dt), _dev(np.zeros(M.shape[1]), dt),
                     self.Kmat)
        self.a, self.b, self.u, self.v = _dev(a, dt), _dev(b, dt), _dev(u, dt), _dev(v, dt)
        K, m = v.shape
        self.q = cuda.device_array((K, m), dtype=dt)
        self.qm = cuda.device_array((K, m), dtype=dt)
        self.err2 = cuda.to_device(np.zeros(K, dtype=dt))
        self.err2_host = None
        self.active = cuda.to_device(np.ones(K, dtype=np.uint8))
        self.n_chunks, self.chunk_rows = _col_layout(M.shape[0])
        self.P = cuda.device_array((K, self.n_chunks, m), dtype=dt)
        knopp_col_sums(self)  # q = K^T u

    def snapshot(self):
        """Device-side copies of (u, v, q)."""
        snap = []
        for x in (self.u, self.v, self.q):
            y = cuda.device_array_like(x)
            y.copy_to_device(x)
            snap.append(y)
        return snap

    def restore(self, snap):
        for x, y in zip((self.u, self.v, self.q), snap):
            x.copy_to_device(y)


def knopp_col_sums(st):
    """st.q = K^T u and st.qm = v * K^T u (chunk partials merged in order)."""
    dt = st.Kmat.dtype
    K, m = st.v.shape
    grid, block = _col_launch(st.Kmat.shape, K, st.n_chunks)
    _k("knopp_col_partial", dt)[grid, block](st.Kmat, st.u, st.active, st.chunk_rows, st.P)
    grid, block = _vec_launch(m, K)
    _k("knopp_col_finish", dt)[grid, block](st.P, st.v, st.active, st.q, st.qm)


def _knopp_run(st, n_steps, fail):
    dt = st.Kmat.dtype
    K, m = st.v.shape
    n = st.Kmat.shape[0]
    if _fused(st.Kmat.shape):
        _k("knopp_fused_iterations", dt)[_grid_k(K), _tpb()](
            st.Kmat, st.a, st.b, st.u, st.v, st.q, st.qm, st.active, n_steps, fail, st.err2)
        return
    vgrid, vblock = _vec_launch(m, K)
    vup = _k("knopp_v_update", dt)[vgrid, vblock]
    row = _k("knopp_row_update", dt)[(n, _grid_k(K)), _tpb()]
    for s in range(n_steps):
        vup(st.b, st.q, st.active, st.v, fail, s)
        row(st.Kmat, st.a, st.v, st.active, st.u, fail, s)
        knopp_col_sums(st)
    marginal_error(st.qm, st.b, st.active, st.err2)


def knopp_steps(st, n_steps):
    """Run up to ``n_steps`` Sinkhorn-Knopp iterations (v = b / K^T u,
    u = a / K v).  As POT (and ``numbaot.cpu.sinkhorn.knopp_steps``), an
    iteration that meets a zero in K^T u or a NaN/inf in u, v is undone and
    the run stops: the kernels flag the failing step on the device; the block
    is then replayed from a snapshot up to the step before it.  Returns
    (steps completed, failed flag); on failure the first value is the index
    of the failing step."""
    if n_steps == 0:
        return 0, False
    fail = cuda.to_device(np.zeros(n_steps, dtype=np.int32))
    snap = st.snapshot()
    _knopp_run(st, n_steps, fail)
    flags = fail.copy_to_host()
    if not flags.any():
        st.err2_host = st.err2.copy_to_host()
        return n_steps, False
    s = int(np.flatnonzero(flags)[0])
    st.restore(snap)
    if s:
        _knopp_run(st, s, cuda.to_device(np.zeros(s, dtype=np.int32)))
    return s, True


def knopp_solve_small(st, numItermax, stopThr):
    """The CPU's whole-solve-in-one-call path for small problems
    (``numbaot.cpu.sinkhorn.knopp_solve_small``): none on the GPU yet, where
    problems of at most ``_config.CUDA_FUSED_MAX_ENTRIES`` entries already
    run blocks of iterations in one launch.  Returns None: the caller runs
    :func:`knopp_steps` / :func:`knopp_error` under ``numbaot._loops``."""
    return None


def knopp_error(st):
    """2-norm of the column-marginal violation v * K^T u - b after the last
    successful :func:`knopp_steps`, all problems together."""
    return np.sqrt(np.sum(st.err2_host, dtype=np.float64))


def knopp_scalings(st):
    """(u, v) as host arrays (n_problems, dim_a), (n_problems, dim_b), in the
    computation's dtype."""
    return st.u.copy_to_host(), st.v.copy_to_host()


def knopp_loss(st):
    """<plan_k, M>_F of every problem, host array (n_problems,), in the
    computation's dtype (the plans are not formed)."""
    loss = cuda.device_array(st.v.shape[0], dtype=st.M.dtype)
    scaled_loss(st.Kmat, st.M, st.u, st.v, loss)
    return loss.copy_to_host()


def knopp_plan(st):
    """The plan diag(u) K diag(v) of the first problem, a device array
    (dim_a, dim_b) of M's dtype."""
    plan = cuda.device_array(st.M.shape, dtype=st.M.dtype)
    scaled_plan(st.Kmat, st.u[0], st.v[0], plan)
    return plan


#: The launcher contract shared with numbaot.cpu.sinkhorn (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("KnoppState", "knopp_steps", "knopp_solve_small", "knopp_error",
             "knopp_scalings", "knopp_loss", "knopp_plan", "LogState", "log_steps",
             "log_solve_small", "log_errors", "log_potentials", "log_loss", "log_plan")
