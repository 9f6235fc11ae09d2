"""CUDA kernels of ``numbaot.gradients`` on device arrays: the entropic plan
with the value <P, M> + reg sum P log P in one pass, the centred dual
potentials, and the small reductions of the point-cloud value (the
point-cloud gradient itself is ``numbaot.cuda.empirical.lazy_grad``).

Per-problem vectors are problem-major (n_problems, dim) device arrays as in
``numbaot.cuda.sinkhorn``; problems on the grid's y axis (grid-stride).
Kernels are built per dtype (float32 problems compute in float32).  All
reductions run in a fixed order (block reductions, no atomics), so results
are deterministic.
"""
import math

import numpy as np
import numba
from numba import cuda

from ._launch import grid2, grid_problems, per_dtype, threads
from ._reduce import make_reductions
from ._registry import kernel
from . import sinkhorn as _sk

__all__ = ["plan_and_value", "log_of", "centred", "xlogy_mass"]


def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    ZERO = dt(0.0)
    ONE = dt(1.0)
    NINF = dt(-np.inf)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    A3 = f"{T}[:, :, ::1]"
    R = make_reductions(dt)
    block_sum, finite = R.block_sum, R.finite

    @kernel([f"void({A2}, {T}, {A2}, {A2}, {A3}, {A2})"], warp_shuffle=True, tag=tag)
    def plan_value_rows(M, c, lu, lv, plan, part):
        """plan[k, i, j] = P_ij = exp(c M_ij + lu[k, i] + lv[k, j]) and
        part[k, i] = sum_{j: P_ij > 0} P_ij (lu[k, i] + lv[k, j]), whose sum
        over i is sum_i r_i lu_i + sum_j col_j lv_j (0 log 0 = 0), i.e.
        (<P, M> + reg sum P log P) / reg; block per (i, k)."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, lu.shape[0], cuda.gridDim.y):
            li = lu[k, i]
            s = ZERO
            for j in range(tid, M.shape[1], cuda.blockDim.x):
                p = math.exp(c * M[i, j] + li + lv[k, j])
                plan[k, i, j] = p
                if p > ZERO:
                    s += p * (li + lv[k, j])
            s = block_sum(s, ss)
            if tid == 0:
                part[k, i] = s

    @kernel([f"void({A2}, {A2})"], tag=tag)
    def log_of(x, out):
        """out = log(x) elementwise (log 0 = -inf); 2-D grid over (j, i)."""
        j, i = cuda.grid(2)
        if i < x.shape[0] and j < x.shape[1]:
            out[i, j] = math.log(x[i, j])

    @kernel([f"void({A2}, {T}, {A2}, int64)"], warp_shuffle=True, tag=tag)
    def centred_rows(x, scale, out, col0):
        """out[i, col0 + k] = scale * (y_ki - mean of the finite x[k, :]) with
        y = x where finite, else 0 (numbaot's CPU ``centred``); block per k.
        ``out`` is (dim, n_cols): the (dim, n_hists) layout of the results."""
        ss = cuda.shared.array(32, dtype=T)
        mean_sh = cuda.shared.array(1, dtype=T)
        tid = cuda.threadIdx.x
        n = x.shape[1]
        for k in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
            s = ZERO
            cnt = ZERO
            for i in range(tid, n, cuda.blockDim.x):
                if finite(x[k, i]):
                    s += x[k, i]
                    cnt += ONE
            s = block_sum(s, ss)
            cnt = block_sum(cnt, ss)
            if tid == 0:
                mean_sh[0] = s / cnt if cnt > ZERO else ZERO
            cuda.syncthreads()
            mean = mean_sh[0]
            for i in range(tid, n, cuda.blockDim.x):
                y = x[k, i] if finite(x[k, i]) else ZERO
                out[i, col0 + k] = scale * (y - mean)
            cuda.syncthreads()  # mean_sh is rewritten for the next k

    @kernel([f"void({A1}, {A1}, {A1}, int64)"], warp_shuffle=True, tag=tag)
    def xlogy_mass(f, lse, out, slot):
        """out[slot] = sum_{i: f_i > -inf} exp(f_i + lse_i) f_i: the term
        sum_i r_i f_i of the value, with r_i = exp(f_i + lse_i) the plan's
        marginal; one block, fixed order."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        s = ZERO
        for i in range(tid, f.shape[0], cuda.blockDim.x):
            fi = f[i]
            if fi > NINF:
                s += math.exp(fi + lse[i]) * fi
        s = block_sum(s, ss)
        if tid == 0:
            out[slot] = s

    return dict(plan_value_rows=plan_value_rows, log_of=log_of, centred_rows=centred_rows,
                xlogy_mass=xlogy_mass)


_k = per_dtype(_build)


def plan_and_value(M, c, lu, lv):
    """Plans exp(c M + lu_k + lv_k^T) of every problem, shape (K, n, m), and
    the host float64 array (K,) of sum_ij P_ij (lu_i + lv_j) (value / reg)."""
    dt = M.dtype
    K = lu.shape[0]
    n, m = M.shape
    plan = cuda.device_array((K, n, m), dtype=dt)
    part = cuda.device_array((K, n), dtype=dt)
    _k("plan_value_rows", dt)[(n, grid_problems(K)), threads()](M, dt.type(c), lu, lv, plan,
                                                                 part)
    tot = cuda.device_array(K, dtype=dt)
    _sk._k("sum_rows", dt)[grid_problems(K), threads()](part, tot)
    return plan, tot.copy_to_host().astype(np.float64)


def log_of(x):
    """log(x) of a 2-D device array, as a new device array."""
    out = cuda.device_array(x.shape, dtype=x.dtype)
    grid, block = grid2(x.shape)
    _k("log_of", x.dtype)[grid, block](x, out)
    return out


def centred(x, scale, out, col0=0):
    """out[:, col0 + k] = scale * (x[k] - mean over its finite entries), the
    non-finite entries taken as 0 (device arrays; x (K, n), out (n, >= K))."""
    _k("centred_rows", x.dtype)[grid_problems(x.shape[0]), threads()](
        x, x.dtype.type(scale), out, col0)


def xlogy_mass(f, lse, out, slot):
    """out[slot] = sum_i exp(f_i + lse_i) f_i over f_i > -inf (device)."""
    _k("xlogy_mass", f.dtype)[1, threads()](f, lse, out, slot)
