"""CPU kernels of the Sinkhorn operator on batches of small n x n matrices and
of its backward passes, behind the launchers (``LAUNCHERS``:
``count_invalid``, ``operator_forward``, ``implicit_backward``,
``unrolled_backward``) whose names, signatures and returns are those of
``numbaot/cuda/implicit.py``.  The launchers allocate their outputs, choose
the lane count (``lanes_for``, ``item_lanes``: a CPU-internal choice from
``_config``) and run each parallel kernel on no more threads than it has
work items (``_dispatch.threads_at_most``).

Where the kernels live
----------------------
* ``_implicit_forward``: the stabilised forward (``operator_forward``) and
  the unrolled backward through it (``unrolled_backward``);
* ``_implicit_cg``: the lane CG of the implicit backward, the generic path
  for n > max(IMPLICIT_UNROLL_SIZES), and the fused value checks;
* ``_implicit_unrolled``: the implicit backward for smaller n, one compiled
  specialisation per padded size, on kernels whose source
  ``_implicit_codegen`` generates and ``_irlower`` lowers to LLVM IR.

Conventions shared by every kernel
----------------------------------
* Inputs are C-contiguous (B, n, n) arrays (the flattened batch), float32 or
  float64, only ever read.  Arithmetic is float64 whatever the input dtype;
  outputs are cast to the output array's dtype on the final store.
* Parallelism: ``prange`` over work items of ``lanes_for(n)`` consecutive
  matrices, stored side by side in float64 workspaces W[i, j, lane]
  (batch-minor): every inner loop runs over the lanes and vectorises, with
  no horizontal reductions and no per-matrix overhead even for n = 4.  The
  implicit backward for n <= 16 runs generated straight-line kernels, one
  per padded size, on the same layout, each size compiled on its first use
  (``_implicit_unrolled``).  Lanes never mix: a lane's arithmetic is exactly
  that of its matrix alone (lanes that stop early are frozen, not
  averaged), so results are bit-identical for any thread count and any
  batch composition.
* Log-domain scalings: R = exp(X + f 1^T + 1 g^T), iterated log-stabilised
  (``_implicit_forward``).
"""
import math

import numba
import numpy as np
from numba import njit, prange

from .._config import (IMPLICIT_CG_BLOCK, IMPLICIT_CG_SCALE_BAND, IMPLICIT_CG_SCALE_BAND_F32,
                       IMPLICIT_CHECK_NUMPY_MAX, IMPLICIT_CHUNKS, IMPLICIT_LANES,
                       IMPLICIT_LANES_LARGE, IMPLICIT_LANES_MAX_N, IMPLICIT_LANES_MIN,
                       JIT_OPTIONS)
from .._dispatch import threads_at_most
from ._implicit_cg import implicit_lanes
from ._implicit_codegen import LANES
from ._implicit_forward import forward_item, forward_item_signature, forward_lanes_address
from ._implicit_forward import operator_forward as forward_kernel
from ._implicit_forward import unrolled_backward as unrolled_kernel
from ._implicit_forward import unrolled_item, unrolled_item_signature
from ._implicit_unrolled import (PADDED, UNROLL_MAX, UNROLLED_ITEMS, UNROLLED_KERNELS,
                                 item_signature)
from ._pointer import address_for

__all__ = ["LAUNCHERS", "lanes_for", "item_lanes", "count_invalid", "operator_forward",
           "implicit_backward", "unrolled_backward"]

_PAR = dict(JIT_OPTIONS, parallel=True)


def lanes_for(n, B=None):
    """Matrices per work item, stored side by side (batch-minor, W[i, j,
    lane]): every inner loop runs over the lanes and vectorises whatever n,
    with no horizontal reductions.  A run-time value on purpose: LLVM fully
    unrolls loops of small constant trip count into scalar code instead of
    vectorising them.  64 lanes (two unrolled AVX-512 bodies) up to n = 16,
    then 32 (an n = 64 work item's matrix copy is 1 MiB); a batch of B
    smaller than that gets B rounded up to a multiple of 8 (a forward on
    4 matrices of n = 16 cost as much as on 64: 1.9 ms, now 0.3 ms).  Each
    lane's arithmetic is its matrix's alone, so the lane count changes no
    result.  (The counts: ``_config.IMPLICIT_LANES*``.)"""
    L = IMPLICIT_LANES if n <= IMPLICIT_LANES_MAX_N else IMPLICIT_LANES_LARGE
    if B is not None and B < L:
        L = max(IMPLICIT_LANES_MIN, -(-B // IMPLICIT_LANES_MIN) * IMPLICIT_LANES_MIN)
    return L


# --------------------------------------------------------------------------
# input checks (one read pass, no temporary)
# --------------------------------------------------------------------------
@njit(**_PAR)
def count_invalid_kernel(x, nonneg, out):
    """out[0] = number of non-finite entries of the flat array ``x``;
    out[1] = number of negative entries (counted only when ``nonneg``).
    Unsigned indices and branch-free counts: the loop vectorises (memory
    bound)."""
    N = x.size
    n_items = (N + 65535) // 65536
    n_bad = 0
    n_neg = 0
    for t in prange(n_items):
        lo = np.uint64(t) * np.uint64(65536)
        cnt = min(np.uint64(65536), np.uint64(N) - lo)
        bad = 0
        neg = 0
        if nonneg:
            for k in range(cnt):
                v = np.float64(x[lo + k])
                bad += not (v - v == 0.0)
                neg += v < 0.0
        else:
            for k in range(cnt):
                v = np.float64(x[lo + k])
                bad += not (v - v == 0.0)
        n_bad += bad
        n_neg += neg
    out[0] = n_bad
    out[1] = n_neg


def item_lanes(n, B=None):
    """Matrices per work item of ``implicit_backward`` at size n for a batch
    of B (its kernel runs on no more threads than there are work items)."""
    return LANES if n <= UNROLL_MAX else lanes_for(n, B)


# --------------------------------------------------------------------------
# launchers (the contract of numbaot/cuda/implicit.py)
# --------------------------------------------------------------------------
def count_invalid(x, nonneg):
    """(number of NaN/inf entries, number of negative entries if ``nonneg``
    else 0) of the C-contiguous array x (any shape): one parallel counting
    pass, no temporary; up to ``_config.IMPLICIT_CHECK_NUMPY_MAX`` entries
    NumPy's min and max (NaN and inf show in them), exact counts only when
    they are not finite or the minimum is negative (no kernel to compile)."""
    if x.size == 0:
        return 0, 0
    if x.size <= IMPLICIT_CHECK_NUMPY_MAX:
        xf = x.reshape(-1)
        lo, hi = xf.min(), xf.max()
        if math.isfinite(lo) and math.isfinite(hi):
            return 0, (int(np.count_nonzero(xf < 0)) if nonneg and lo < 0 else 0)
        bad = xf.size - int(np.count_nonzero(np.isfinite(xf)))
        return bad, (int(np.count_nonzero(xf < 0)) if nonneg else 0)
    cnt = np.zeros(2, dtype=np.int64)
    count_invalid_kernel(x.reshape(-1), nonneg, cnt)
    return int(cnt[0]), int(cnt[1])


def operator_forward(X, n_iter, tol):
    """R[b] = S_K(X[b]) = exp(X + f 1^T + 1 g^T) after K Sinkhorn iterations,
    K = n_iter, or fewer when tol >= 0 (tol < 0: never stop early; see
    ``_implicit_forward._forward_lanes``).

    X: (B, n, n) C-contiguous, float32 or float64, finite (checked by the
    caller).  Returns (R, iters): R (B, n, n) of X's dtype, iters (B,) int64
    the iteration count K of each matrix."""
    B, n, _ = X.shape
    R = np.empty((B, n, n), dtype=X.dtype)
    iters = np.zeros(B, dtype=np.int64)
    if B:
        lanes = lanes_for(n, B)
        with threads_at_most(-(-B // lanes)):
            item = address_for(forward_item, forward_item_signature, X, R, iters)
            forward_kernel(item, forward_lanes_address(), X, n_iter, tol, lanes, R, iters)
    return R, iters


def implicit_backward(R, G, corrected, max_iter, cg_tol):
    """dX[b] = (G - u 1^T - 1 v^T) * R for every matrix of the batch, where
    (u, v) solves [[diag(r), R], [R^T, diag(c)]] [u; v] = [s_r; s_c] with
    s_r = (G*R) 1, s_c = (G*R)^T 1; r = c = 1 (``corrected`` False, the
    doubly-stochastic system [[I, R], [R^T, I]]) or r, c the actual row and
    column sums of R (``corrected`` True).  v is the solution in 1-perp of the
    Schur complement system (diag(c) - R^T diag(r)^-1 R) v = s_c - R^T
    diag(r)^-1 s_r (projected CG from v0 = 0: rhs and every A p projected onto
    1-perp; a lane stops when ||res||_2 <= cg_tol ||rhs||_2, after max_iter
    iterations, or at p^T A p <= 0), u = diag(r)^-1 (s_r - R v); a zero row
    sum gives r_i^-1 := 0 (that row of dX is 0 anyway).

    n <= max(IMPLICIT_UNROLL_SIZES): the generated register-blocked kernels
    of the padded size N (``_implicit_unrolled_N``: work items of
    IMPLICIT_UNROLL_LANES matrices, CG on blocks of at least
    IMPLICIT_CG_BLOCK lanes, IMPLICIT_CHUNKS workspaces per thread); larger
    n: ``implicit_lanes``, ``_cg_lanes`` on work items of ``lanes_for(n, B)``
    matrices.  Either way each lane's arithmetic is that of its matrix
    alone, so results do not depend on the thread count or the batch.

    The values are checked in the same pass (``any_nonfinite``,
    ``any_negative``), not before it.  A matrix whose marginals of G*R
    (n <= 16: whose rhs norm) leave [1 / band, band] (band: ``_config.IMPLICIT_CG_SCALE_BAND``, or
    ``IMPLICIT_CG_SCALE_BAND_F32`` for a float32 dX) runs its CG on the
    right-hand side scaled by a power of two, the solution scaled back
    (``_implicit_cg.cg_scale``: exact, so the gradient is right at any scale
    of G), and its dX is checked for overflow (in dX's dtype).

    R, G: (B, n, n), C-contiguous, one dtype.  Returns (dX, iters, relres,
    n_nonfinite, n_negative): dX (B, n, n) of R's dtype (allocated here
    with NumPy, which asks for huge pages for large arrays: the first touch
    of a 128 MiB output costs 12 ms instead of 45); iters (B,) int64 CG
    iterations; relres (B,) float64 final relative residual; n_nonfinite
    counts the work items with a non-finite marginal of G*R or solution
    entry (NaN/inf in R or G, or an overflow), n_negative those with a
    negative entry of R: dX is meaningless unless both are 0 (the caller
    then counts the entries of R and G to say which).
    """
    B, n, _ = R.shape
    dX = np.empty_like(R)
    band = IMPLICIT_CG_SCALE_BAND_F32 if dX.dtype == np.float32 else IMPLICIT_CG_SCALE_BAND
    with threads_at_most(-(-B // item_lanes(n, B))):
        if n <= UNROLL_MAX:
            N = PADDED[n]
            item = address_for(UNROLLED_ITEMS[N], item_signature, R, G, dX)
            iters, relres, n_nonfinite, n_negative = UNROLLED_KERNELS[N](
                item, R, G, corrected, max_iter, cg_tol, band, IMPLICIT_CG_BLOCK,
                IMPLICIT_CHUNKS * numba.get_num_threads(), dX)
        else:
            iters, relres, n_nonfinite, n_negative = implicit_lanes(
                R, G, corrected, max_iter, cg_tol, band, lanes_for(n, B), dX)
    return dX, iters, relres, n_nonfinite, n_negative


def unrolled_backward(X, G, n_iter, tol):
    """dX[b] = d<G[b], S_K(X[b])>/dX[b]: reverse mode through the K Sinkhorn
    iterations of ``operator_forward`` (same n_iter and tol, so the same K;
    see ``_implicit_forward.unrolled_backward``).

    X, G: (B, n, n) C-contiguous, one dtype.  Returns (dX, iters): dX
    (B, n, n) of X's dtype, iters (B,) int64 the K differentiated."""
    B, n, _ = X.shape
    dX = np.empty((B, n, n), dtype=X.dtype)
    iters = np.zeros(B, dtype=np.int64)
    if B:
        lanes = lanes_for(n, B)
        with threads_at_most(-(-B // lanes)):
            item = address_for(unrolled_item, unrolled_item_signature, X, G, dX, iters)
            unrolled_kernel(item, forward_lanes_address(), X, G, n_iter, tol, lanes, dX, iters)
    return dX, iters


#: The launcher contract shared with numbaot.cuda.implicit (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("count_invalid", "operator_forward", "implicit_backward", "unrolled_backward")
