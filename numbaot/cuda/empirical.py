"""CUDA kernels for point clouds with costs computed on the fly, mirroring
``numbaot/cpu/empirical.py`` (``lazy_lse``, ``lazy_loss``, ``lazy_grad``).

Points: ``X`` (n, d) and ``Yt`` (d, m) C-contiguous device arrays (Y stored
transposed: a warp reads 32 consecutive targets of one coordinate,
coalesced).  The cost of (x_i, y_j) is formed in registers (metric 0:
squared Euclidean, 1: Euclidean) inside the reduction; nothing of size n m
is ever stored.  ``lazy_lse`` is Viehmann's block per row: each thread keeps
an online (max, scaled sum) pair over its strided targets, merged by warp
shuffles and then across warps.  ``lazy_grad`` (the gradient of the entropic
value w.r.t. the points) also runs a block per row: each tile of blockDim
targets first gets its plan weights in shared memory (a thread per target,
coalesced reads of ``Yt``), then the threads sweep the tile along the
coordinates (a thread per coordinate k).  One kernel set per dtype (float32
problems compute in float32).

The launchers at the end (``LazyState``, ``lazy_steps``, ...) have the same
names, signatures and returns as those of ``numbaot.cpu.empirical``: host
float64 arrays in, device copies in the problem's dtype inside.
"""
import math

import numpy as np
import numba
from numba import cuda

from .. import _config, _dispatch
from ._launch import per_dtype
from ._reduce import make_reductions
from ._registry import kernel

__all__ = ["lazy_lse", "lazy_loss", "lazy_grad", "potential_update",
           "LazyState", "lazy_steps", "lazy_row_lse", "lazy_note_error", "lazy_potentials",
           "lazy_outputs", "lazy_transport_cost"]

#: the launcher contract shared with numbaot.cpu.empirical
LAUNCHERS = ("LazyState", "lazy_steps", "lazy_row_lse", "lazy_note_error", "lazy_potentials",
             "lazy_outputs", "lazy_transport_cost")

#: size of the shared weight tile of ``lazy_grad_rows``: the largest block
#: (CUDA_THREADS must not exceed it); ``_config.CUDA_MAX_BLOCK_THREADS``.
_MAX_THREADS = int(_config.CUDA_MAX_BLOCK_THREADS)


def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    NINF = dt(-np.inf)
    ZERO = dt(0.0)
    TWO = dt(2.0)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    R = make_reductions(dt)
    lse_push, block_lse, block_sum = R.lse_push, R.block_lse, R.block_sum

    @kernel([f"void({A2}, {A2}, {A1}, {T}, int64, {A1})"], hot=True, warp_shuffle=True, tag=tag)
    def lazy_lse_rows(X, Yt, w, c, metric, out):
        """out[i] = LSE_j (w[j] + c cost(x_i, y_j)); block per row i."""
        sm = cuda.shared.array(32, dtype=T)
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        d = X.shape[1]
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            m = NINF
            s = ZERO
            for j in range(tid, Yt.shape[1], cuda.blockDim.x):
                cost = ZERO
                for k in range(d):
                    diff = X[i, k] - Yt[k, j]
                    cost += diff * diff
                if metric == 1:
                    cost = math.sqrt(cost)
                m, s = lse_push(m, s, w[j] + c * cost)
            m, s = block_lse(m, s, sm, ss)
            if tid == 0:
                out[i] = m + math.log(s) if m > NINF else NINF

    @kernel([f"void({A2}, {A2}, {A1}, {A1}, {T}, int64, {A1})"], warp_shuffle=True, tag=tag)
    def lazy_loss_rows(X, Yt, f, g, c, metric, part):
        """part[i] = sum_j cost_ij exp(f_i + g_j + c cost_ij)."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        d = X.shape[1]
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            acc = ZERO
            if f[i] > NINF:
                for j in range(tid, Yt.shape[1], cuda.blockDim.x):
                    cost = ZERO
                    for k in range(d):
                        diff = X[i, k] - Yt[k, j]
                        cost += diff * diff
                    if metric == 1:
                        cost = math.sqrt(cost)
                    acc += cost * math.exp(f[i] + g[j] + c * cost)
            acc = block_sum(acc, ss)
            if tid == 0:
                part[i] = acc

    @kernel([f"void({A2}, {A2}, {A1}, {A1}, {T}, int64, {A2})"], tag=tag)
    def lazy_grad_rows(X, Yt, f, g, c, metric, out):
        """out[i, :] = sum_j P_ij grad_x cost(x_i, y_j), P_ij = exp(f_i + g_j +
        c cost_ij); sqeuclidean: grad = 2 (x_i - y_j), euclidean:
        (x_i - y_j) / ||x_i - y_j|| (0 for coincident points).  Block per row
        i; per tile of blockDim targets: weights W_j (2 P_ij, or P_ij / cost_ij)
        into shared memory, then thread k adds sum_j W_j (x_ik - y_jk) to
        out[i, k] (each out[i, k] owned by one thread: no atomics)."""
        wt = cuda.shared.array(_MAX_THREADS, dtype=T)
        tid = cuda.threadIdx.x
        bd = cuda.blockDim.x
        d = X.shape[1]
        m = Yt.shape[1]
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            fi = f[i]
            for k in range(tid, d, bd):
                out[i, k] = ZERO
            if fi > NINF:  # the same for the whole block
                for j0 in range(0, m, bd):
                    j = j0 + tid
                    wj = ZERO
                    if j < m:
                        cost = ZERO
                        for k in range(d):
                            diff = X[i, k] - Yt[k, j]
                            cost += diff * diff
                        if metric == 1:
                            cost = math.sqrt(cost)
                        p = math.exp(fi + g[j] + c * cost)
                        if metric == 1:
                            wj = p / cost if cost > ZERO else ZERO
                        else:
                            wj = TWO * p
                    cuda.syncthreads()  # the previous tile is no longer read
                    wt[tid] = wj
                    cuda.syncthreads()
                    ln = min(bd, m - j0)
                    for k in range(tid, d, bd):
                        xk = X[i, k]
                        s = ZERO
                        for t in range(ln):
                            s += wt[t] * (xk - Yt[k, j0 + t])
                        out[i, k] += s

    @kernel([f"void({A1}, {A1}, {A1})"], hot=True, tag=tag)
    def potential_update(base, lse, out):
        """out = base - lse, -inf where base is -inf (zero weights)."""
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = base[i] - lse[i] if base[i] > NINF else NINF

    return dict(lazy_lse_rows=lazy_lse_rows, lazy_loss_rows=lazy_loss_rows,
                lazy_grad_rows=lazy_grad_rows, potential_update=potential_update)


_k = per_dtype(_build)


def _grid(n):
    return max(1, min(int(n), 65535 * 32))


def lazy_lse(X, Yt, w, c, metric, out):
    """out[i] = LSE_j (w[j] + c cost(x_i, y_j)) (device arrays)."""
    dt = X.dtype
    _k("lazy_lse_rows", dt)[_grid(X.shape[0]), int(_config.CUDA_THREADS)](
        X, Yt, w, dt.type(c), metric, out)


def potential_update(base, lse, out):
    """out = base - lse (log-weights minus a logsumexp), on the device."""
    t = int(_config.CUDA_THREADS)
    _k("potential_update", out.dtype)[(out.shape[0] + t - 1) // t, t](base, lse, out)


def lazy_loss(X, Yt, f, g, c, metric):
    """sum_ij cost_ij exp(f_i + g_j + c cost_ij) (row partials summed on the
    host in row order: n numbers)."""
    dt = X.dtype
    part = cuda.device_array(X.shape[0], dtype=dt)
    _k("lazy_loss_rows", dt)[_grid(X.shape[0]), int(_config.CUDA_THREADS)](
        X, Yt, f, g, dt.type(c), metric, part)
    return float(np.sum(part.copy_to_host(), dtype=np.float64))


def lazy_grad(X, Yt, f, g, c, metric, out):
    """out[i, :] = sum_j P_ij grad_x cost(x_i, y_j) (device arrays; X (n, d),
    Yt (d, m), out (n, d)); mirror of ``numbaot.cpu.empirical.lazy_grad``."""
    t = int(_config.CUDA_THREADS)
    if t > _MAX_THREADS:
        raise ValueError(f"CUDA_THREADS must be at most {_MAX_THREADS} for lazy_grad; got {t}")
    dt = X.dtype
    _k("lazy_grad_rows", dt)[_grid(X.shape[0]), t](X, Yt, f, g, dt.type(c), metric, out)


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cpu.empirical
# --------------------------------------------------------------------------
class LazyState:
    """Device state of a lazy log-domain Sinkhorn run, in the result dtype.

    Same constructor as ``numbaot.cpu.empirical.LazyState``: the host
    float64 arrays ``Xs``, ``Xt``, ``log_a``, ``log_b``, ``f``, ``g`` are
    copied to the device in ``dtype`` (float32 problems compute in float32).
    The potentials stay on the device; the host reads n numbers per stopping
    test (every 10 iterations).

    The column-reduction hook ``reduction`` (points split across processes)
    is CPU-only: ValueError if given.

    Attributes read by ``numbaot.cuda.gradients``: ``Xs``, ``Xt``, ``Xs_t``,
    ``Xt_t``, ``f``, ``g`` (device arrays), ``c``, ``metric``, ``dtype``.
    """

    def __init__(self, Xs, Xt, log_a, log_b, f, g, c, metric, dtype, reduction=None):
        if reduction is not None:
            raise ValueError("reduction: the CUDA launchers do not support points split across "
                             "processes; use NumPy arrays with numbaot.distributed")
        def dev(x):
            return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))

        self.Xs, self.Xt = dev(Xs), dev(Xt)
        self.Xs_t, self.Xt_t = dev(Xs.T), dev(Xt.T)
        self.log_a, self.log_b, self.f, self.g = dev(log_a), dev(log_b), dev(f), dev(g)
        self.c, self.metric, self.dtype = c, metric, dtype
        self.lse_f = cuda.device_array(Xs.shape[0], dtype=dtype)
        self.lse_g = cuda.device_array(Xt.shape[0], dtype=dtype)


def lazy_steps(st, n_steps):
    """Run ``n_steps`` iterations in POT's order: f = log a - LSE_j(g_j + c
    cost_ij), then g = log b - LSE_i(f_i + c cost_ij)."""
    for _ in range(n_steps):
        lazy_lse(st.Xs, st.Xt_t, st.g, st.c, st.metric, st.lse_f)
        potential_update(st.log_a, st.lse_f, st.f)
        lazy_lse(st.Xt, st.Xs_t, st.f, st.c, st.metric, st.lse_g)
        potential_update(st.log_b, st.lse_g, st.g)


def lazy_row_lse(st):
    """(f, LSE_j(g_j + c cost_ij)) as host float64 arrays (n,), (n,): the
    row marginal of the current plan is exp(f + LSE) (POT's stopping test)."""
    lazy_lse(st.Xs, st.Xt_t, st.g, st.c, st.metric, st.lse_f)
    return (st.f.copy_to_host().astype(np.float64),
            st.lse_f.copy_to_host().astype(np.float64))


def lazy_note_error(st, err):
    """The host loop's stopping error after :func:`lazy_row_lse` (float): a
    no-op here (a float32 problem computes in float32 throughout on the GPU;
    the CPU launcher of this name ends its float32 lanes near convergence)."""


def lazy_potentials(st):
    """(f, g) as host float64 arrays (n,), (m,)."""
    return st.f.copy_to_host().astype(np.float64), st.g.copy_to_host().astype(np.float64)


def lazy_outputs(st, like):
    """(f, g) as the caller's results: the device arrays, as the array kind
    of ``like`` (the caller's ``X_s``)."""
    return _dispatch.like_input(st.f, like), _dispatch.like_input(st.g, like)


def lazy_transport_cost(st):
    """sum_ij cost_ij P_ij of the current plan (float), the plan never formed."""
    return lazy_loss(st.Xs, st.Xt_t, st.f, st.g, st.c, st.metric)
