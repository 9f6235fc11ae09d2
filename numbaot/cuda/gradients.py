"""CUDA launchers of ``numbaot.gradients`` on device arrays: the entropic plan
with the value <P, M> + reg sum P log P in one pass, the centred dual
potentials, and the point-cloud value and gradients from a lazy state
(``numbaot.cuda.empirical.LazyState``; the point gradient itself is
``numbaot.cuda.empirical.lazy_grad``).

Same launcher names, signatures and returns as ``numbaot.cpu.gradients``.
Work arrays are device arrays in the problem's dtype (float32 problems
compute in float32); :func:`result` hands them over as the caller's array
kind.  Per-problem vectors are problem-major (n_problems, dim) device arrays
as in ``numbaot.cuda.sinkhorn``; problems on the grid's y axis
(grid-stride).  All reductions run in a fixed order (block reductions, no
atomics), so results are deterministic.
"""
import math

import numpy as np
import numba
from numba import cuda

from .. import _dispatch
from ._launch import grid2, grid_problems, per_dtype, threads
from ._reduce import make_reductions
from ._registry import kernel
from . import empirical as cuda_empirical
from . import sinkhorn as cuda_sinkhorn

__all__ = ["log_scalings", "plan_and_value", "centred", "centred_support", "work_array",
           "result", "values_result", "cloud_value", "cloud_grads", "cloud_centred"]

#: the launcher contract shared with numbaot.cpu.gradients
LAUNCHERS = tuple(__all__)


def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    ZERO = dt(0.0)
    ONE = dt(1.0)
    NINF = dt(-np.inf)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    A3 = f"{T}[:, :, ::1]"
    U8_2 = "uint8[:, ::1]"
    R = make_reductions(dt)
    block_sum, finite = R.block_sum, R.finite
    lse_push, block_lse = R.lse_push, R.block_lse

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
            xij = x[i, j]
            # log 0 = -inf spelled out: the CUDA simulator's math.log raises there
            out[i, j] = math.log(xij) if xij != ZERO else NINF

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

    @kernel([f"void({A2}, {T}, {A2}, {U8_2}, {T}, {A2})"], warp_shuffle=True, tag=tag)
    def zero_rows_ctransform(M, c, lv, za, scale, ga):
        """ga[i, k] += scale * t_ki, t_ki = -LSE_j(c M_ij + lv[k, j]), at the
        rows with za[k, i] != 0 (za of 1 row: shared); block per (i, k)."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        shared = za.shape[0] == 1
        for k in range(cuda.blockIdx.y, lv.shape[0], cuda.gridDim.y):
            z = za[0, i] if shared else za[k, i]
            if z != 0:  # uniform over the block
                m = NINF
                s = ZERO
                for j in range(tid, M.shape[1], cuda.blockDim.x):
                    m, s = lse_push(m, s, c * M[i, j] + lv[k, j])
                m, s = block_lse(m, s, sm, ss)
                if tid == 0:
                    ga[i, k] -= scale * (m + math.log(s))

    @kernel([f"void({A2}, {T}, {A2}, {U8_2}, {T}, {A2})"], warp_shuffle=True, tag=tag)
    def zero_cols_ctransform(M, c, lu, zb, scale, gb):
        """gb[j, k] += scale * t_kj, t_kj = -LSE_i(c M_ij + lu[k, i]), at the
        columns with zb[k, j] != 0; block per (j, k) (strided column reads:
        zero-weight columns only)."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        j = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        shared = zb.shape[0] == 1
        for k in range(cuda.blockIdx.y, lu.shape[0], cuda.gridDim.y):
            z = zb[0, j] if shared else zb[k, j]
            if z != 0:
                m = NINF
                s = ZERO
                for i in range(tid, M.shape[0], cuda.blockDim.x):
                    m, s = lse_push(m, s, c * M[i, j] + lu[k, i])
                m, s = block_lse(m, s, sm, ss)
                if tid == 0:
                    gb[j, k] -= scale * (m + math.log(s))

    @kernel([f"void({A1}, {A1}, {T}, {A2}, int64)"], tag=tag)
    def zero_points_ctransform(logw, lse, scale, out, col):
        """out[i, col] -= scale * lse[i] at the points with logw[i] = -inf
        (zero weight): after ``centred_rows`` (which gives them scale *
        (0 - mean)) they hold scale * (t_i - mean), t_i = -lse[i] the soft
        c-transform (point clouds); one thread per point."""
        i = cuda.grid(1)
        if i < out.shape[0] and logw[i] == NINF:
            out[i, col] -= scale * lse[i]

    return dict(plan_value_rows=plan_value_rows, log_of=log_of,
                centred_rows=centred_rows, xlogy_mass=xlogy_mass,
                zero_rows_ctransform=zero_rows_ctransform,
                zero_cols_ctransform=zero_cols_ctransform,
                zero_points_ctransform=zero_points_ctransform)


_k = per_dtype(_build)


def log_scalings(st, dtype):
    """(log u, log v) of a finished Sinkhorn run (a ``numbaot.cuda.sinkhorn``
    ``KnoppState`` or ``LogState``): device arrays (n_problems, dim_a),
    (n_problems, dim_b) in the computation's dtype (``dtype``, the result
    dtype, is that dtype already)."""
    if isinstance(st, cuda_sinkhorn.KnoppState):
        return log_of(st.u), log_of(st.v)
    return st.u, st.v


def plan_and_value(M, c, lu, lv):
    """Plans exp(c M + lu_k 1^T + 1 lv_k^T) of every problem, a device array
    (K, n, m), and the host float64 array (K,) of sum_ij P_ij (lu_i + lv_j)
    (= value / reg)."""
    dt = M.dtype
    K = lu.shape[0]
    n, m = M.shape
    plan = cuda.device_array((K, n, m), dtype=dt)
    part = cuda.device_array((K, n), dtype=dt)
    _k("plan_value_rows", dt)[(n, grid_problems(K)), threads()](M, dt.type(c), lu, lv, plan,
                                                                 part)
    tot = cuda.device_array(K, dtype=dt)
    cuda_sinkhorn.kernel("sum_rows", dt)[grid_problems(K), threads()](part, tot)
    return plan, tot.copy_to_host().astype(np.float64)


def log_of(x):
    """log(x) of a 2-D device array, as a new device array."""
    out = cuda.device_array(x.shape, dtype=x.dtype)
    grid, block = grid2(x.shape)
    _k("log_of", x.dtype)[grid, block](x, out)
    return out


def centred(x, scale, out=None, col0=0):
    """Column col0 + k of ``out`` (dim, >= K) = scale * (x[k] - the mean of
    its finite entries), the non-finite entries taken as 0 (device arrays,
    x (K, dim)).  Returns ``out``; without it a new (dim, K) device array."""
    if out is None:
        out = cuda.device_array((x.shape[1], x.shape[0]), dtype=x.dtype)
    _k("centred_rows", x.dtype)[grid_problems(x.shape[0]), threads()](
        x, x.dtype.type(scale), out, col0)
    return out


def centred_support(M, c, lu, lv, za, zb, scale):
    """numbaot.cpu.gradients.centred_support on the device: (ga (dim_a, K),
    gb (dim_b, K)) device arrays; ``za``, ``zb`` host bool (1 or K, dim).
    The log-scalings (O(K dim)) make one round trip to set the zero bins to
    -inf; M stays on the device."""
    dt = M.dtype
    lu_h = np.where(np.broadcast_to(za, lu.shape), -np.inf, lu.copy_to_host())
    lv_h = np.where(np.broadcast_to(zb, lv.shape), -np.inf, lv.copy_to_host())
    lu_d = cuda.to_device(np.ascontiguousarray(lu_h, dtype=dt))
    lv_d = cuda.to_device(np.ascontiguousarray(lv_h, dtype=dt))
    ga, gb = centred(lu_d, scale), centred(lv_d, scale)
    K = lu.shape[0]
    n, m = M.shape
    za_d = cuda.to_device(np.ascontiguousarray(za, dtype=np.uint8))
    zb_d = cuda.to_device(np.ascontiguousarray(zb, dtype=np.uint8))
    _k("zero_rows_ctransform", dt)[(n, grid_problems(K)), threads()](
        M, dt.type(c), lv_d, za_d, dt.type(scale), ga)
    _k("zero_cols_ctransform", dt)[(m, grid_problems(K)), threads()](
        M, dt.type(c), lu_d, zb_d, dt.type(scale), gb)
    return ga, gb


def work_array(shape, dtype):
    """An uninitialised work array for results of ``dtype`` (a device array of ``dtype``)."""
    return cuda.device_array(shape, dtype=dtype)


def result(x, dtype, like):
    """A work array as the caller's result: the device array itself (already
    of ``dtype``), as the array kind of ``like`` (CuPy or numba)."""
    return _dispatch.like_input(x, like)


def values_result(vals, dtype, like):
    """A host vector of values (n_problems,) as the caller's result: a device
    array of ``dtype``, of the array kind of ``like``."""
    return _dispatch.result_to_device(np.asarray(vals, dtype=dtype), like)


def xlogy_mass(f, lse, out, slot):
    """out[slot] = sum_i exp(f_i + lse_i) f_i over f_i > -inf (device)."""
    _k("xlogy_mass", f.dtype)[1, threads()](f, lse, out, slot)


# --------------------------------------------------------------------------
# point clouds (a finished numbaot.cuda.empirical.LazyState)
# --------------------------------------------------------------------------
def cloud_value(st):
    """The value <P, M> + reg sum P log P of the lazy plan (float), as
    reg (sum_i r_i f_i + sum_j col_j g_j), reg = -1 / c: the two sums
    reduced on the device, two numbers read back."""
    dt = st.dtype
    n, m = st.Xs.shape[0], st.Xt.shape[0]
    parts = cuda.device_array(2, dtype=dt)
    lse = cuda.device_array(n, dtype=dt)
    cuda_empirical.lazy_lse(st.Xs, st.Xt_t, st.g, st.c, st.metric, lse)
    xlogy_mass(st.f, lse, parts, 0)
    lse_c = cuda.device_array(m, dtype=dt)
    cuda_empirical.lazy_lse(st.Xt, st.Xs_t, st.f, st.c, st.metric, lse_c)
    xlogy_mass(st.g, lse_c, parts, 1)
    return (-1.0 / st.c) * float(np.sum(parts.copy_to_host(), dtype=np.float64))


def cloud_grads(st, gX, gY):
    """gX[i] = sum_j P_ij grad_x cost(x_i, y_j) (n, d) and gY[j] = sum_i
    P_ij grad_y cost(x_i, y_j) (m, d), into the given device work arrays."""
    cuda_empirical.lazy_grad(st.Xs, st.Xt_t, st.f, st.g, st.c, st.metric, gX)
    cuda_empirical.lazy_grad(st.Xt, st.Xs_t, st.g, st.f, st.c, st.metric, gY)


def _cloud_zero_points(logw, X, Yt, w, c, metric, scale, out, col):
    """At the zero-weight points (logw = -inf; the host reads logw, O(n)):
    out[i, col] += scale * t_i, t_i = -LSE_j(w_j + c cost(x_i, y_j)) the
    soft c-transform, by one lazy logsumexp pass over X on the device."""
    if not np.isneginf(logw.copy_to_host()).any():
        return
    dt = X.dtype
    lse = cuda.device_array(X.shape[0], dtype=dt)
    cuda_empirical.lazy_lse(X, Yt, w, c, metric, lse)
    t = threads()
    _k("zero_points_ctransform", dt)[(X.shape[0] + t - 1) // t, t](
        logw, lse, dt.type(scale), out, col)


def cloud_centred(st, out_a, out_b, col):
    """Column ``col`` of out_a (n, K), out_b (m, K) = reg * (f - mean),
    reg * (g - mean), the means over the points of positive weight (the
    finite potentials; 0 when none is finite); at a point of zero weight
    reg * (t - mean), t the soft c-transform of the other side's final
    potential, the costs recomputed from the points (numbaot.cpu.gradients)."""
    scale = -1.0 / st.c
    centred(st.f.reshape(1, st.f.shape[0]), scale, out_a, col)
    centred(st.g.reshape(1, st.g.shape[0]), scale, out_b, col)
    _cloud_zero_points(st.log_a, st.Xs, st.Xt_t, st.g, st.c, st.metric, scale, out_a, col)
    _cloud_zero_points(st.log_b, st.Xt, st.Xs_t, st.f, st.c, st.metric, scale, out_b, col)
