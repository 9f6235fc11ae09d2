"""Warp and block reductions shared by the CUDA kernels, built per dtype.

``make_reductions(dt)`` returns device functions whose constants have the
dtype ``dt`` (so float32 kernels do no float64 arithmetic):

* ``lse_push(m, s, x)``: add exp(x) to an online (max, scaled sum) pair
  (Viehmann, arXiv:1907.01729, sec. 4), one exponential;
* ``lse_merge``: merge two pairs, symmetric (every lane of a butterfly ends
  with the same bits); a -inf max is the empty sum;
* ``warp_lse``, ``warp_sum``, ``warp_max``: ``shfl_xor_sync`` butterflies;
* ``block_lse``, ``block_sum``, ``block_max``: across the warps of a block through 32-slot
  shared arrays (result valid in warp 0);
* ``finite(x)``: x is neither NaN nor inf.

and one kernel of its own, the device twin of ``numbaot._checks.finite_absmax``:

* ``finite_absmax(X)`` (launcher): max |X_ij| of a 2-D device array as a
  Python float, ``inf`` when X holds a NaN or inf -- the finiteness check of
  a device cost matrix and the max|M| that ``_checks.check_cost_scale``
  compares with reg, in one read of X (kernel ``finite_absmax_rows``).
"""
import math
from types import SimpleNamespace

import numba
import numpy as np
from numba import cuda

from .. import _config
from ._launch import per_dtype, threads
from ._registry import device, kernel

__all__ = ["make_reductions", "finite_absmax"]

_FULL = 0xFFFFFFFF
_CACHE = {}


def make_reductions(dt):
    """Device reduction helpers for dtype ``dt`` (float32 or float64)."""
    key = np.dtype(dt)
    if key in _CACHE:
        return _CACHE[key]
    dt = key.type
    NINF = dt(-np.inf)
    ZERO = dt(0.0)
    ONE = dt(1.0)

    @device
    def lse_push(m, s, x):
        """Add exp(x) to the pair (m, s) (value s * exp(m)); one exp."""
        if x > m:
            return x, s * math.exp(m - x) + ONE
        if x > NINF:
            return m, s + math.exp(x - m)
        return m, s

    @device
    def lse_merge(m1, s1, m2, s2):
        """Merge two (max, scaled sum) pairs; symmetric, so every lane of a
        butterfly ends with the same bits.  A -inf max is the empty sum."""
        if m2 > m1:
            m1, s1, m2, s2 = m2, s2, m1, s1
        if m2 == NINF:
            return m1, s1
        return m1, s1 + s2 * math.exp(m2 - m1)

    @device
    def warp_lse(m, s):
        off = 16
        while off > 0:
            m2 = cuda.shfl_xor_sync(_FULL, m, off)
            s2 = cuda.shfl_xor_sync(_FULL, s, off)
            m, s = lse_merge(m, s, m2, s2)
            off //= 2
        return m, s

    @device
    def warp_sum(s):
        off = 16
        while off > 0:
            s += cuda.shfl_xor_sync(_FULL, s, off)
            off //= 2
        return s

    @device
    def block_lse(m, s, sm, ss):
        """Block-wide (max, sum) merge; the result is valid in warp 0."""
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        nw = (cuda.blockDim.x + 31) >> 5
        m, s = warp_lse(m, s)
        cuda.syncthreads()  # the shared slots may still be read from a previous call
        if lane == 0:
            sm[w] = m
            ss[w] = s
        cuda.syncthreads()
        if w == 0:
            if lane < nw:
                m = sm[lane]
                s = ss[lane]
            else:
                m = NINF
                s = ZERO
            m, s = warp_lse(m, s)
        return m, s

    @device
    def block_sum(s, ss):
        """Block-wide sum; the result is valid in warp 0."""
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        nw = (cuda.blockDim.x + 31) >> 5
        s = warp_sum(s)
        cuda.syncthreads()
        if lane == 0:
            ss[w] = s
        cuda.syncthreads()
        if w == 0:
            s = ss[lane] if lane < nw else ZERO
            s = warp_sum(s)
        return s

    @device
    def finite(x):
        return x - x == ZERO

    @device
    def warp_max(s):
        off = 16
        while off > 0:
            s = max(s, cuda.shfl_xor_sync(_FULL, s, off))
            off //= 2
        return s

    @device
    def block_max(s, ss):
        """Block-wide max; the result is valid in warp 0."""
        tid = cuda.threadIdx.x
        lane = tid & 31
        w = tid >> 5
        nw = (cuda.blockDim.x + 31) >> 5
        s = warp_max(s)
        cuda.syncthreads()
        if lane == 0:
            ss[w] = s
        cuda.syncthreads()
        if w == 0:
            s = ss[lane] if lane < nw else NINF
            s = warp_max(s)
        return s

    ns = SimpleNamespace(lse_push=lse_push, lse_merge=lse_merge, warp_lse=warp_lse,
                         warp_sum=warp_sum, block_lse=block_lse, block_sum=block_sum,
                         warp_max=warp_max, block_max=block_max, finite=finite)
    _CACHE[key] = ns
    return ns


# --------------------------------------------------------------------------
# max |X| with the finiteness check, one pass (numbaot._checks on device M)
# --------------------------------------------------------------------------
def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    ZERO = dt(0.0)
    INF = dt(np.inf)
    R = make_reductions(dt)
    block_max, finite = R.block_max, R.finite

    # C-contiguous M (the common case) and any other layout: the check runs
    # on the caller's array, before any copy or cast
    @kernel([f"void({T}[:, ::1], {T}[::1])", f"void({T}[:, :], {T}[::1])"],
            warp_shuffle=True, tag=tag)
    def finite_absmax_rows(X, out):
        """out[blockIdx.x] = max |X_ij| over the rows i this block strides
        (threads stride the columns), +inf where an entry is NaN or inf, 0
        for a block without rows.  A NaN never enters ``max``: it is
        mapped to +inf first, so no NaN semantics of max are relied on."""
        ss = cuda.shared.array(32, dtype=T)
        tid = cuda.threadIdx.x
        mx = ZERO
        for i in range(cuda.blockIdx.x, X.shape[0], cuda.gridDim.x):
            for j in range(tid, X.shape[1], cuda.blockDim.x):
                x = X[i, j]
                mx = max(mx, abs(x) if finite(x) else INF)
        mx = block_max(mx, ss)
        if tid == 0:
            out[cuda.blockIdx.x] = mx

    return dict(finite_absmax_rows=finite_absmax_rows)


_k = per_dtype(_build)


def finite_absmax(X):
    """max |X_ij| of the 2-D float32/float64 device array ``X`` (any layout)
    as a Python float; ``inf`` when X has a NaN or inf (0.0 when empty).

    One read of X: blocks stride the rows (at most
    ``_config.CUDA_CHECK_MAX_BLOCKS`` of them), threads the columns; each
    block writes its maximum and the host reads back those few numbers
    (max is exact and order-free: deterministic)."""
    G = max(1, min(int(X.shape[0]), int(_config.CUDA_CHECK_MAX_BLOCKS)))
    out = cuda.device_array(G, dtype=X.dtype)
    _k("finite_absmax_rows", X.dtype)[G, threads()](X, out)
    return float(out.copy_to_host().max())
