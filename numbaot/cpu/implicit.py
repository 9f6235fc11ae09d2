"""CPU kernels of the Sinkhorn operator on batches of small n x n matrices and
of its backward passes, mirrored by name in ``numbaot/cuda/implicit.py``.

Conventions shared by every kernel here
----------------------------------------
* Inputs are C-contiguous (B, n, n) arrays (the flattened batch), float32 or
  float64, only ever read.  Arithmetic is float64 whatever the input dtype;
  outputs are cast to the output array's dtype on the final store.
* Parallelism: ``prange`` over work items of ``lanes_for(n)`` consecutive
  matrices, stored side by side in float64 workspaces W[i, j, lane]
  (batch-minor): every inner loop runs over the lanes and vectorises, with
  no horizontal reductions and no per-matrix overhead even for n = 4.  The
  implicit backward for n <= 16 runs generated straight-line kernels, one
  per padded size, on the same layout, each size compiled on its first use
  (see "implicit backward, register-blocked" below).  Lanes never mix: a
  lane's arithmetic is exactly that of its matrix alone (lanes that stop
  early are frozen, not averaged), so results are bit-identical for any
  thread count and any batch composition.
* Log-domain scalings: R = exp(X + f 1^T + 1 g^T).  One Sinkhorn iteration is a
  row normalisation f_i <- -LSE_j(X_ij + g_j) followed by a column
  normalisation g_j <- -LSE_i(X_ij + f_i) (Mena et al. 2018, Gumbel-Sinkhorn,
  eq. 3: S^l = T_c(T_r(S^{l-1})), S^0 = exp X).  The forward computes it
  log-stabilised (``_forward_lanes``): f = fa + log u, g = ga + log v with
  u = 1 / (Kt v), v = 1 / (Kt^T u) on the kernel Kt = exp(X + fa 1^T + 1 ga^T),
  multiply-adds instead of exponentials; the shifted logsumexps below
  (``_row_pass``, ``_col_pass``) take over, per lane, the half-steps whose
  sums would underflow.  Each logsumexp is shifted by a bound (row max of
  X + max g; column max of X + max f) that needs no max pass; a sum below
  ``_SUM_FLOOR`` (possible only for |X| spreads beyond ~460) is recomputed
  with the exact max.
"""
import inspect
import math

import numpy as np
from numba import njit, prange

from .._config import (IMPLICIT_CG_BLOCK_BYTES, IMPLICIT_UNROLL_LANES, IMPLICIT_UNROLL_SIZES,
                       JIT_OPTIONS)
from ._math import fast_exp, fast_exp_ftz, fast_log

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)

#: a shifted exp-sum below this is recomputed with the exact max shift
_SUM_FLOOR = 1e-200


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
    result."""
    L = 64 if n <= 16 else 32
    if B is not None and B < L:
        L = max(8, -(-B // 8) * 8)
    return L


# --------------------------------------------------------------------------
# input checks (one read pass, no temporary)
# --------------------------------------------------------------------------
@njit(**_PAR)
def count_invalid(x, nonneg, out):
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


# --------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------
# --------------------------------------------------------------------------
# lane layout: a work item holds L = lanes_for(n) matrices side by side
# --------------------------------------------------------------------------
@njit(inline="always", **_SER)
def _gather(A, b0, B, W):
    """W[i, j, c] = float64(A[b0 + c, i, j]) for the lanes with b0 + c < B, 0
    in the padding lanes.  Lanes innermost: the reads walk L matrices at
    once (L cache lines, reused for consecutive j), the writes are
    contiguous."""
    L = W.shape[2]
    n = W.shape[0]
    nl = min(L, B - b0)
    if nl < L:
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    W[i, j, c] = 0.0
    for i in range(n):
        for j in range(n):
            for c in range(nl):
                W[i, j, c] = np.float64(A[b0 + c, i, j])


@njit(inline="always", **_SER)
def _load(X, b0, B, W, xr, xc):
    """W[i, j, c] = float64(X[b0 + c, i, j]) for the lanes c with b0 + c < B
    (0 in the padding lanes); xr[i, c], xc[j, c] = row and column maxima."""
    L = W.shape[2]
    n = W.shape[0]
    _gather(X, b0, B, W)
    for i in range(n):
        for c in range(L):
            xr[i, c] = -np.inf
            xc[i, c] = -np.inf
    for i in range(n):
        for j in range(n):
            for c in range(L):
                w = W[i, j, c]
                xr[i, c] = max(xr[i, c], w)
                xc[j, c] = max(xc[j, c], w)


@njit(inline="always", **_SER)
def _lane_max(v, out):
    """out[c] = max_k v[k, c]."""
    L = out.shape[0]
    for c in range(L):
        out[c] = -np.inf
    for k in range(v.shape[0]):
        for c in range(L):
            out[c] = max(out[c], v[k, c])


@njit(**_SER)
def _row_pass(W, g, xr, acc, vmax, out):
    """out[i, c] = -LSE_j(W[i, j, c] + g[j, c]) (the new row scaling f).

    Shift xr_i + max_j g_j >= the row max, so nothing overflows; a sum below
    _SUM_FLOOR (only for |X| spreads beyond ~460) is recomputed with the
    exact row max."""
    L = acc.shape[0]
    n = W.shape[0]
    _lane_max(g, vmax)
    for i in range(n):
        for c in range(L):
            acc[c] = 0.0
        for j in range(n):
            for c in range(L):
                acc[c] += fast_exp(W[i, j, c] + g[j, c] - xr[i, c] - vmax[c])
        for c in range(L):
            s = acc[c]
            m = xr[i, c] + vmax[c]
            if s < _SUM_FLOOR:
                m = -np.inf
                for j in range(n):
                    m = max(m, W[i, j, c] + g[j, c])
                s = 0.0
                for j in range(n):
                    s += fast_exp(W[i, j, c] + g[j, c] - m)
            out[i, c] = -(m + fast_log(s))


@njit(**_SER)
def _col_pass(W, f, xc, acc2, vmax, out):
    """out[j, c] = -LSE_i(W[i, j, c] + f[i, c]) (the new column scaling g),
    rows swept in memory order into the accumulators acc2[j, c]; shift and
    underflow fallback as in ``_row_pass``."""
    L = vmax.shape[0]
    n = W.shape[0]
    _lane_max(f, vmax)
    for j in range(n):
        for c in range(L):
            acc2[j, c] = 0.0
    for i in range(n):
        for j in range(n):
            for c in range(L):
                acc2[j, c] += fast_exp(W[i, j, c] + f[i, c] - xc[j, c] - vmax[c])
    for j in range(n):
        for c in range(L):
            s = acc2[j, c]
            m = xc[j, c] + vmax[c]
            if s < _SUM_FLOOR:
                m = -np.inf
                for i in range(n):
                    m = max(m, W[i, j, c] + f[i, c])
                s = 0.0
                for i in range(n):
                    s += fast_exp(W[i, j, c] + f[i, c] - m)
            out[j, c] = -(m + fast_log(s))


#: Scalings u, v of the stabilised forward are absorbed into the log
#: potentials (and the kernel recomputed) once they leave [1/_ABSORB, _ABSORB]
_ABSORB = 1e30

#: A lane whose absorbed potentials exceed this in magnitude runs the plain
#: log-domain half-steps: f = fa + log u could no longer hold the scalings'
#: updates (its rounding, |fa| * 2.2e-16, would reach 2e-10), while the
#: log-domain iterates stay consistent with their own rounding (|X| ~ 1e6
#: and beyond: temperatures so low that R is a permutation to rounding)
_LOG_ONLY = 1e6


@njit(inline="always", **_SER)
def _stabilised_kernel(W, fa, ga, flag, Kt):
    """Kt = exp(W + fa 1^T + 1 ga^T) (flushed to 0 below e^-708) in the lanes
    c with flag[c] > 0; the other lanes are left as they are (a lane's
    arithmetic never depends on a neighbour's).  (fa, ga) are always the
    potentials of a row- or column-normalised iterate, whose entries are
    <= 1: exponents above 0 are rounding (of |X| ~ 1e17 and beyond, where it
    can be large) and are clamped to 0."""
    L = flag.shape[0]
    n = W.shape[0]
    for i in range(n):
        for j in range(n):
            for c in range(L):
                e = fast_exp_ftz(min(W[i, j, c] + fa[i, c] + ga[j, c], 0.0))
                Kt[i, j, c] = e if flag[c] > 0.0 else Kt[i, j, c]


@njit(inline="always", **_SER)
def _flag_log_only(fa, ga, bad):
    """bad[c] = 1 for the lanes whose potentials exceed _LOG_ONLY in
    magnitude, else 0."""
    L = bad.shape[0]
    for c in range(L):
        bad[c] = 0.0
    for i in range(fa.shape[0]):
        for c in range(L):
            big = max(abs(fa[i, c]), abs(ga[i, c])) > _LOG_ONLY
            bad[c] = 1.0 if big else bad[c]


@njit(inline="always", **_SER)
def _flag_bad_lanes(fa, ga, s, bad):
    """bad[c] = 1 for the lanes that take the log-domain half-step: their
    potentials exceed _LOG_ONLY or one of their sums s[:, c] fell below
    _SUM_FLOOR; returns their count."""
    _flag_log_only(fa, ga, bad)
    L = bad.shape[0]
    for i in range(s.shape[0]):
        for c in range(L):
            bad[c] = 1.0 if s[i, c] < _SUM_FLOOR else bad[c]
    n_bad = 0
    for c in range(L):
        n_bad += bad[c] > 0.0
    return n_bad


@njit(inline="always", **_SER)
def _restart_lanes(W, f, g, bad, fa, ga, u, v, Kt):
    """In the lanes c with bad[c] > 0: fa = f, ga = g, u = v = 1, and the
    kernel recomputed (after a log-domain half-step, f and g are its
    potentials; to absorb scalings that left their range, fa + log u and
    ga + log v)."""
    L = bad.shape[0]
    for i in range(f.shape[0]):
        for c in range(L):
            if bad[c] > 0.0:
                fa[i, c] = f[i, c]
                ga[i, c] = g[i, c]
                u[i, c] = 1.0
                v[i, c] = 1.0
    _stabilised_kernel(W, fa, ga, bad, Kt)


@njit(inline="always", **_SER)
def _absorb_out_of_range(W, fa, ga, u, v, bad, f, g, Kt):
    """Restart the lanes with a scaling outside [1/_ABSORB, _ABSORB] from
    f = fa + log u, g = ga + log v (f, g: workspaces).  Run after each
    half-step, so that the next one multiplies K by scalings <= _ABSORB:
    a K entry flushed to 0 (< e^-708) then stands for a term < 1e-277,
    against sums >= _SUM_FLOOR."""
    L = bad.shape[0]
    for c in range(L):
        bad[c] = 0.0
    for i in range(fa.shape[0]):
        for c in range(L):
            x = max(u[i, c], v[i, c])
            y = min(u[i, c], v[i, c])
            bad[c] = 1.0 if (x > _ABSORB or y < 1.0 / _ABSORB) else bad[c]
    n_bad = 0
    for c in range(L):
        n_bad += bad[c] > 0.0
    if n_bad:
        _log_scaling(fa, u, f)
        _log_scaling(ga, v, g)
        _restart_lanes(W, f, g, bad, fa, ga, u, v, Kt)


@njit(inline="always", **_SER)
def _log_scaling(a, s, out):
    """out = a + log s (the log potential of an absorbed part a and a
    scaling s)."""
    for i in range(a.shape[0]):
        for c in range(a.shape[1]):
            out[i, c] = a[i, c] + fast_log(s[i, c])


@njit(**_SER)
def _forward_lanes(W, xr, xc, n_iter, tol, F, Gh, hist, Kt, fa, ga, u, v, s, lg, acc, acc2,
                   vmax, bad, Kc, ff, gf):
    """Run the Sinkhorn iterations on the L matrices of a work item.

    The log-domain iteration f <- -LSE_j(X_ij + g_j), g <- -LSE_i(X_ij + f_i)
    computed in its log-stabilised multiplicative form (Schmitzer 2019,
    "Stabilized sparse scaling algorithms for entropy regularized transport
    problems", SIAM J. Sci. Comput. 41(3), Alg. 2, absorption): the
    potentials are f = fa + log u, g = ga + log v with the absorbed parts fa,
    ga in the log domain and the kernel Kt = exp(X + fa 1^T + 1 ga^T) (entries
    <= 1), so that one iteration is u = 1 / (Kt v), v = 1 / (Kt^T u): two
    multiply-add passes over Kt instead of two exponentials per entry.  Per
    lane: a half-step whose sums fall below ``_SUM_FLOOR`` (an iterate far
    from balanced, e.g. |X| spreads beyond ~700) is computed by the
    log-domain pass instead (``_row_pass``/``_col_pass``, shifted
    logsumexps) and the lane restarted from it; u or v outside
    [1/_ABSORB, _ABSORB] are absorbed after each half-step.  Kt then holds
    the iterate itself.

    With ``hist`` the log-scalings of every iteration are kept: F[k-1] = f^k
    (k = 1..K), Gh[k] = g^k (k = 0..K, g^0 = 0).  Kc[c] = K, the iteration
    count of lane c's result; ff[:, c], gf[:, c] = its f^K, g^K.

    Stopping (tol >= 0; tol < 0: never): before iteration k+1 (k >= 1) the
    row half-step yields the row sums of R^k, sum_j R^k_ij = u^k_i / u^{k+1}_i
    (= exp(f^k_i - f^{k+1}_i)); a lane whose max_i |sum_j R^k_ij - 1| < tol
    keeps R^k (its column sums are 1 up to rounding: every iteration ends
    with the column normalisation).  Stopped lanes keep iterating (their
    later iterates are discarded; the history stays finite) until every lane
    has stopped.
    """
    L = acc.shape[0]
    n = W.shape[0]
    for i in range(n):
        for c in range(L):
            fa[i, c] = -xr[i, c]
            ga[i, c] = 0.0
            u[i, c] = 1.0
            v[i, c] = 1.0
    for i in range(n):
        for j in range(n):
            for c in range(L):
                Kt[i, j, c] = fast_exp_ftz(W[i, j, c] - xr[i, c])
    if hist:
        for j in range(n):
            for c in range(L):
                Gh[0, j, c] = 0.0
    for c in range(L):
        Kc[c] = -1
    n_done = 0
    for it in range(n_iter):
        # ---- row half-step: s = Kt v, f^{it+1} = fa - log s --------------
        for i in range(n):
            for c in range(L):
                acc[c] = 0.0
            for j in range(n):
                for c in range(L):
                    acc[c] += Kt[i, j, c] * v[j, c]
            for c in range(L):
                s[i, c] = acc[c]
        n_bad = _flag_bad_lanes(fa, ga, s, bad)
        if n_bad:
            # the log-domain row pass for every lane (taken where bad):
            # lg = g = ga + log v, acc2 = f^{it+1}
            _log_scaling(ga, v, lg)
            _row_pass(W, lg, xr, acc, vmax, acc2)
        if tol >= 0.0 and it > 0:
            # row error of R^it
            for c in range(L):
                acc[c] = 0.0
            for i in range(n):
                for c in range(L):
                    acc[c] = max(acc[c], abs(u[i, c] * s[i, c] - 1.0))
            if n_bad:
                for i in range(n):
                    for c in range(L):
                        if bad[c] > 0.0:
                            e = abs(fast_exp(fa[i, c] + fast_log(u[i, c]) - acc2[i, c]) - 1.0)
                            acc[c] = e if i == 0 else max(acc[c], e)
            for c in range(L):
                if Kc[c] < 0 and acc[c] < tol:
                    Kc[c] = it
                    n_done += 1
                    for i in range(n):
                        ff[i, c] = fa[i, c] + fast_log(u[i, c])
                        gf[i, c] = ga[i, c] + fast_log(v[i, c])
            if n_done == L:
                return
        for i in range(n):
            for c in range(L):
                u[i, c] = 1.0 / s[i, c]
        if n_bad:
            _restart_lanes(W, acc2, lg, bad, fa, ga, u, v, Kt)
        _absorb_out_of_range(W, fa, ga, u, v, bad, lg, acc2, Kt)
        if hist:
            _log_scaling(fa, u, F[it])
        # ---- column half-step: s = Kt^T u, g^{it+1} = ga - log s ---------
        for j in range(n):
            for c in range(L):
                s[j, c] = 0.0
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    s[j, c] += Kt[i, j, c] * u[i, c]
        n_bad = _flag_bad_lanes(fa, ga, s, bad)
        for j in range(n):
            for c in range(L):
                v[j, c] = 1.0 / s[j, c]
        if n_bad:
            # lg = f = fa + log u, acc2 = g^{it+1} by the log-domain pass
            _log_scaling(fa, u, lg)
            _col_pass(W, lg, xc, s, vmax, acc2)
            _restart_lanes(W, lg, acc2, bad, fa, ga, u, v, Kt)
        _absorb_out_of_range(W, fa, ga, u, v, bad, lg, acc2, Kt)
        if hist:
            _log_scaling(ga, v, Gh[it + 1])
    for c in range(L):
        if Kc[c] < 0:
            Kc[c] = n_iter
            for i in range(n):
                ff[i, c] = fa[i, c] + fast_log(u[i, c])
                gf[i, c] = ga[i, c] + fast_log(v[i, c])


@njit(**_PAR)
def operator_forward(X, n_iter, tol, lanes, R, iters):
    """R[b] = S_K(X[b]) = exp(X + f 1^T + 1 g^T) after K Sinkhorn iterations,
    K = n_iter, or fewer when tol >= 0 (see ``_forward_lanes``); iters[b] = K.

    X, R: (B, n, n); iters: (B,) int64.
    """
    L = lanes
    B = X.shape[0]
    n = X.shape[1]
    n_items = (B + L - 1) // L
    for t in prange(n_items):
        W = np.empty((n, n, L))
        Kt = np.empty((n, n, L))
        F = np.empty((1, n, L))     # the history (unused here)
        Gh = np.empty((1, n, L))
        xr = np.empty((n, L))
        xc = np.empty((n, L))
        fa = np.empty((n, L))
        ga = np.empty((n, L))
        u = np.empty((n, L))
        v = np.empty((n, L))
        s = np.empty((n, L))
        lg = np.empty((n, L))
        acc2 = np.empty((n, L))
        ff = np.empty((n, L))
        gf = np.empty((n, L))
        acc = np.empty(L)
        vmax = np.empty(L)
        bad = np.empty(L)
        Kc = np.empty(L, dtype=np.int64)
        b0 = t * L
        _load(X, b0, B, W, xr, xc)
        _forward_lanes(W, xr, xc, n_iter, tol, F, Gh, False, Kt, fa, ga, u, v, s, lg, acc,
                       acc2, vmax, bad, Kc, ff, gf)
        nl = min(L, B - b0)
        for c in range(nl):
            iters[b0 + c] = Kc[c]
        for i in range(n):
            for j in range(n):
                for c in range(nl):
                    R[b0 + c, i, j] = fast_exp(W[i, j, c] + ff[i, c] + gf[j, c])


# --------------------------------------------------------------------------
# implicit backward (conjugate gradient)
# --------------------------------------------------------------------------
@njit(inline="always", **_SER)
def _project(x, tmp):
    """x[:, c] <- x[:, c] - mean(x[:, c]) (projection onto 1-perp)."""
    L = tmp.shape[0]
    n = x.shape[0]
    for c in range(L):
        tmp[c] = 0.0
    for k in range(n):
        for c in range(L):
            tmp[c] += x[k, c]
    for c in range(L):
        tmp[c] /= n
    for k in range(n):
        for c in range(L):
            x[k, c] -= tmp[c]


@njit(inline="always", **_SER)
def _dot(x, y, out):
    L = out.shape[0]
    for c in range(L):
        out[c] = 0.0
    for k in range(x.shape[0]):
        for c in range(L):
            out[c] += x[k, c] * y[k, c]


@njit(inline="always", **_SER)
def _any_nonfinite(Zf, start, stop):
    """1 if Zf[start:stop] holds a NaN or inf, else 0.

    The backward's value checks are fused into its read pass: a NaN or inf
    anywhere in R or G makes an entry of G*R, hence one of its row sums s_r
    and column sums s_c, non-finite (a non-finite sum with finite inputs
    means G*R overflows), and a non-finite solution (u, v) means an overflow
    inside the solve.  Only the caller's error path counts the entries of R
    and G themselves.  The rows to check are consecutive in the lane arrays
    (spare and padding slots hold zeros), so this is one flat vectorised
    loop with one horizontal reduction, not one per row.  (A sum of x - x
    would be cheaper, but LLVM's reassociation folds it to 0; the comparison
    survives.)  The loop runs over a view with indices from 0: an index
    start + k of unknown sign costs a wrap-around select per access, and
    LLVM then vectorises the loop with gathers (a quarter of the kernel's
    time at n = 4)."""
    Zs = Zf[start:stop]
    nf = 0
    for k in range(Zs.shape[0]):
        x = Zs[k]
        nf += not (x - x == 0.0)
    return 1 if nf > 0 else 0


@njit(inline="always", **_SER)
def _any_negative(Zf, start, stop):
    """1 if Zf[start:stop] (R's lane copy) holds a negative entry (an error),
    else 0.  A count of comparisons vectorises (Numba's NaN-aware ``min``
    does not); indices from 0 as in ``_any_nonfinite``."""
    Zs = Zf[start:stop]
    neg = 0
    for k in range(Zs.shape[0]):
        neg += Zs[k] < 0.0
    return 1 if neg > 0 else 0


@njit(**_SER)
def _apply_schur(W, rinv, cvec, p, q, out, tmp):
    """out = diag(cvec) p - W^T (rinv * (W p)), projected onto 1-perp
    (q: workspace); two mat-vecs per lane, W^T W is never formed."""
    L = tmp.shape[0]
    n = W.shape[0]
    for i in range(n):
        for c in range(L):
            tmp[c] = 0.0
        for j in range(n):
            for c in range(L):
                tmp[c] += W[i, j, c] * p[j, c]
        for c in range(L):
            q[i, c] = rinv[i, c] * tmp[c]
    for j in range(n):
        for c in range(L):
            out[j, c] = cvec[j, c] * p[j, c]
    for i in range(n):
        for j in range(n):
            for c in range(L):
                out[j, c] -= W[i, j, c] * q[i, c]
    _project(out, tmp)


@njit(**_SER)
def _cg_lanes(W, rinv, cvec, rhs, x, res, p, Ap, q, max_iter, cg_tol,
              rs, thr, pAp, active, its, relres, tmp):
    """Projected conjugate gradient, lane by lane, for A x = rhs with
    A = diag(cvec) - W^T diag(rinv) W restricted to 1-perp (rhs projected
    first; x0 = 0).  A lane stops when ||res||_2 <= cg_tol ||rhs||_2, after
    max_iter iterations, or when p^T A p <= 0 (no positive curvature:
    breakdown); a stopped lane is frozen (its x never changes again), so
    each lane's result is that of CG run on its matrix alone.
    its[c] = iterations, relres[c] = final ||res|| / ||rhs||."""
    L = tmp.shape[0]
    n = W.shape[0]
    _project(rhs, tmp)
    for k in range(n):
        for c in range(L):
            x[k, c] = 0.0
            res[k, c] = rhs[k, c]
            p[k, c] = rhs[k, c]
    _dot(res, res, rs)
    n_active = 0
    for c in range(L):
        bn = math.sqrt(rs[c])
        thr[c] = cg_tol * bn
        relres[c] = bn  # ||rhs||, divided out at the end
        its[c] = 0
        active[c] = bn > 0.0
        n_active += active[c]
    it = 0
    while it < max_iter and n_active > 0:
        _apply_schur(W, rinv, cvec, p, q, Ap, tmp)
        _dot(p, Ap, pAp)
        for c in range(L):
            if active[c] and not (pAp[c] > 0.0):
                active[c] = False
                n_active -= 1
            pAp[c] = rs[c] / pAp[c] if active[c] else 0.0   # alpha
        for k in range(n):
            for c in range(L):
                x[k, c] += pAp[c] * p[k, c]
                res[k, c] -= pAp[c] * Ap[k, c]
        _dot(res, res, tmp)
        for c in range(L):
            if active[c]:
                its[c] += 1
                beta = tmp[c] / rs[c]
                rs[c] = tmp[c]
                if math.sqrt(tmp[c]) <= thr[c]:
                    active[c] = False
                    n_active -= 1
                pAp[c] = beta
            else:
                pAp[c] = 0.0
        for k in range(n):
            for c in range(L):
                if active[c]:
                    p[k, c] = res[k, c] + pAp[c] * p[k, c]
        it += 1
    for c in range(L):
        relres[c] = math.sqrt(rs[c]) / relres[c] if relres[c] > 0.0 else 0.0


# --------------------------------------------------------------------------
# implicit backward, register-blocked: n padded to N in IMPLICIT_UNROLL_SIZES
# --------------------------------------------------------------------------
# For n <= max(IMPLICIT_UNROLL_SIZES) a whole CG iteration of one lane is
# straight-line code written out for the padded size N (generated below and
# compiled once per N): the loop over the lanes is then the innermost loop
# and vectorises (8 lanes per AVX-512 register).  The CG runs block by block
# (8 lanes at N >= 12, more at smaller N: ``_gen_cg``), start to finish, so
# that the block's W stays in L1 for all its iterations; at N <= 8 one loop
# per iteration holds p, Ap and a row of W in registers, at N >= 12 four
# loops (q = rinv * (W p), Ap = cvec * p - W^T q, updates, p) keep the live
# vectors under AVX-512's 32 registers.  The vector updates, the projection
# and both dot products happen in the same passes.  Measured at N = 16 on
# Zen 4: ~750 cycles per 8-lane iteration (512 multiply-adds, W loaded twice
# from L1), half the time of one pass over 64 lanes whose W sat in L2.
# Padding rows and columns of W
# (n < N) are 0, so the padded entries of every vector stay 0 and add exact
# zeros to the sums; the projection's mean divides by n and is subtracted
# from the first n entries only.  The workspace starts on a 64-byte boundary
# (Numba's allocations are only 32-byte aligned): with rows a multiple of
# 8 slots long, a block's 8 lanes of a row are one cache line, not two
# (otherwise W of an 8-lane block takes all of a 32 KiB L1 at N = 16 and the
# CG runs at half speed).
#
# Layout of a work item: ONE float64 array Z of rows of _US slots, the first
# _UL of them used (one per lane), Z[row _US + c]; _UL and _US compile-time
# constants: every access in the generated loops is the loop index plus a
# literal offset into the same array, so LLVM proves them independent
# (distinct rows are further apart than the trip count) and vectorises
# without runtime alias checks (with W and the vectors in separate arrays it
# gives up from n = 12 on: too many pointer groups to check).  The row stride
# _US = _UL + 8 (576 bytes, 9 cache lines) spreads one lane-column of the
# rows over all L1 sets; a 512-byte stride maps the 256 rows of W (n = 16)
# onto 8 of the 64 sets and every access misses L1.  Rows (i N + j) hold
# W_ij = R_ij; the lane state follows (``_zrows``).
_UL = IMPLICIT_UNROLL_LANES
_CG_BLOCK_BYTES = IMPLICIT_CG_BLOCK_BYTES
_CG_ONE_SWEEP_MAX = 8
_US = IMPLICIT_UNROLL_LANES + 8


def _zrows(N):
    """Row offsets (in units of _US) in the work item's array for padded
    size N: W (N N rows, W_ij in row i N + j), then v (the CG iterate), res,
    p, rinv, cvec, s_r, s_c, rhs/u, q = rinv * (W p), Ap (N rows each), then
    rs = ||res||^2, thr, act (1.0 / 0.0), its (float), bn = ||rhs||, pap =
    p^T A p, beta."""
    o = N * N
    r = dict(v=o, res=o + N, p=o + 2 * N, rinv=o + 3 * N, cvec=o + 4 * N, sr=o + 5 * N,
             sc=o + 6 * N, u=o + 7 * N, q=o + 8 * N, ap=o + 9 * N)
    for k, name in enumerate(("rs", "thr", "act", "its", "bn", "pap", "m", "beta")):
        r[name] = o + 10 * N + k
    r["rows"] = o + 10 * N + 8
    return r


def _sum(terms):
    """Source of the sum of ``terms`` as four interleaved chains added
    pairwise: dependency chains of about len/4 multiply-adds instead of one of
    len (a chain of 16 FMAs is latency-bound, 64 cycles)."""
    if len(terms) <= 4:
        return "(" + " + ".join(terms) + ")"
    ch = ["(" + " + ".join(terms[k::4]) + ")" for k in range(4)]
    return f"(({ch[0]} + {ch[1]}) + ({ch[2]} + {ch[3]}))"


def _gen_cg(N):
    """Source of ``_cg_N(Z, nb, n, inv_n, max_iter)``: projected CG on lanes
    0 .. nb-1 of ``Z`` (the caller passes the work item's array starting at
    the block's first lane) until none is active or max_iter iterations
    (alpha = rs / p^T A p, x += alpha p, res -= alpha A p, beta = rs' / rs,
    p = res + beta p); the lanes' state (v, res, p, rs, thr, act, its) is set
    up by ``_cg_init_N``.  A lane stops at p^T A p <= 0 (no update) or when
    ||res|| <= thr; a stopped lane never changes again.

    nb is a multiple of 8 (8 at N >= 12: one AVX-512 vector of float64
    lanes) and a run-time value: LLVM would fully unroll a constant trip
    count of 8 into scalar code.  The lanes' W (N N rows of 64 bytes: 16 KiB
    at N = 16) then stays in L1 for the whole CG.  N <= _CG_ONE_SWEEP_MAX:
    one loop per iteration, p, Ap and a row of W in registers (W read
    once).  Larger N: that would need 3 N
    vector registers (AVX-512 has 32) and spills, so the iteration is four
    loops over the lanes, the values flowing through Z: q = rinv * (W p)
    (p in registers), Ap = cvec * p - W^T q (q in registers) with the sums
    for the projection and p^T A p, the updates of v and res with ||res||^2,
    and the update of p.  Separate loops also keep LLVM from merging the two
    reads of W_ij into one value held across the sweeps."""
    z = _zrows(N)

    def at(row, k=0):
        return f"Z[{(z[row] + k) * _US} + c]"

    def w(i, j):
        return f"Z[{(i * N + j) * _US} + c]"

    ln = [f"def _cg_{N}(Z, nb, n, inv_n, max_iter):",
          "    n_act = 0",
          "    for c in range(nb):",
          f"        n_act += 1 if {at('act')} > 0.0 else 0",
          "    it = 0",
          "    while it < max_iter and n_act > 0:",
          "        n_act = 0",
          "        for c in range(nb):"]
    a = ln.append
    I3 = " " * 12
    if N <= _CG_ONE_SWEEP_MAX:
        for j in range(N):
            a(f"{I3}p{j} = {at('p', j)}")
        # row by row: q_i = rinv_i (W p)_i, then Ap -= W[i, :] q_i with the
        # same loaded W_ij (each entry of W loaded once per iteration)
        for j in range(N):
            a(f"{I3}a{j} = {at('cvec', j)} * p{j}")
        for i in range(N):
            for j in range(N):
                a(f"{I3}w{j} = {w(i, j)}")
            s = _sum([f"w{j} * p{j}" for j in range(N)])
            a(f"{I3}qi = {at('rinv', i)} * {s}")
            for j in range(N):
                a(f"{I3}a{j} -= w{j} * qi")
        a(f"{I3}m = " + _sum([f"a{j}" for j in range(N)]) + " * inv_n")
        for j in range(N):
            a(f"{I3}a{j} -= m if {j} < n else 0.0")
        a(f"{I3}pap = " + _sum([f"p{j} * a{j}" for j in range(N)]))
    else:
        for j in range(N):
            a(f"{I3}p{j} = {at('p', j)}")
        for i in range(N):
            a(f"{I3}{at('q', i)} = {at('rinv', i)} * "
              + _sum([f"{w(i, j)} * p{j}" for j in range(N)]))
        a("        for c in range(nb):")
        for i in range(N):
            a(f"{I3}q{i} = {at('q', i)}")
        a(f"{I3}sa = 0.0")
        a(f"{I3}spa = 0.0")
        a(f"{I3}sp = 0.0")
        for j in range(N):
            a(f"{I3}pj = {at('p', j)}")
            a(f"{I3}aj = {at('cvec', j)} * pj - " + _sum([f"{w(i, j)} * q{i}" for i in range(N)]))
            a(f"{I3}{at('ap', j)} = aj")
            a(f"{I3}sa += aj")
            a(f"{I3}spa += pj * aj")
            a(f"{I3}sp += pj")
        # p^T (Ap - m 1_n) with m = the mean of the first n entries of Ap
        # (the padding entries j >= n of p and Ap are exact zeros, so the sums
        # run over all N: conditional sums would keep LLVM from vectorising)
        a(f"{I3}m = sa * inv_n")
        a(f"{I3}{at('m')} = m")
        a(f"{I3}{at('pap')} = spa - m * sp")
        a("        for c in range(nb):")
        a(f"{I3}m = {at('m')}")
        a(f"{I3}pap = {at('pap')}")
    a(f"{I3}rsc = {at('rs')}")
    a(f"{I3}ok = ({at('act')} > 0.0) & (pap > 0.0)")
    a(f"{I3}alpha = rsc / pap if ok else 0.0")
    for j in range(N):
        if N <= _CG_ONE_SWEEP_MAX:
            a(f"{I3}{at('v', j)} += alpha * p{j}")
            a(f"{I3}r{j} = {at('res', j)} - alpha * a{j}")
        else:
            a(f"{I3}{at('v', j)} += alpha * {at('p', j)}")
            a(f"{I3}r{j} = {at('res', j)} - alpha * ({at('ap', j)} - (m if {j} < n else 0.0))")
        a(f"{I3}{at('res', j)} = r{j}")
    a(f"{I3}rr = " + _sum([f"r{j} * r{j}" for j in range(N)]))
    a(f"{I3}cont = ok & (not (math.sqrt(rr) <= {at('thr')}))")
    a(f"{I3}beta = rr / rsc")
    if N <= _CG_ONE_SWEEP_MAX:
        for j in range(N):
            a(f"{I3}{at('p', j)} = r{j} + beta * p{j} if cont else p{j}")
    else:
        a(f"{I3}{at('beta')} = beta if cont else 0.0")
    a(f"{I3}{at('rs')} = rr if ok else rsc")
    a(f"{I3}{at('its')} += 1.0 if ok else 0.0")
    a(f"{I3}{at('act')} = 1.0 if cont else 0.0")
    a(f"{I3}n_act += 1 if cont else 0")
    if N > _CG_ONE_SWEEP_MAX:
        a("        for c in range(nb):")
        a(f"{I3}if {at('act')} > 0.0:")
        a(f"{I3}    beta = {at('beta')}")
        for j in range(N):
            a(f"{I3}    {at('p', j)} = {at('res', j)} + beta * {at('p', j)}")
    a("        it += 1")
    return "\n".join(ln) + "\n"


def _gen_cg_init(N):
    """Source of ``_cg_init_N(Z, n, inv_n, cg_tol)``: the CG's start on every
    lane from v0 = 0: res = p = rhs - mean(rhs) (rhs in the u rows; its
    padding entries are 0, so the sum runs over all N), v = 0, rs =
    ||res||^2, bn = ||res||, thr = cg_tol bn, its = 0, act = (bn > 0).
    Flat literal offsets into Z, as in the CG: the lanes loop vectorises (row
    views of Z would be distinct pointers LLVM cannot prove disjoint)."""
    z = _zrows(N)
    S = _US

    def at(row, k=0):
        return f"Z[{(z[row] + k) * S} + c]"

    ln = [f"def _cg_init_{N}(Z, n, inv_n, cg_tol):", f"    for c in range({_UL}):"]
    a = ln.append
    a("        m = " + _sum([at("u", j) for j in range(N)]) + " * inv_n")
    for j in range(N):
        a(f"        r{j} = {at('u', j)} - (m if {j} < n else 0.0)")
        a(f"        {at('res', j)} = r{j}")
        a(f"        {at('p', j)} = r{j}")
        a(f"        {at('v', j)} = 0.0")
    a("        b = math.sqrt(" + _sum([f"r{j} * r{j}" for j in range(N)]) + ")")
    a(f"        {at('rs')} = b * b")
    a(f"        {at('bn')} = b")
    a(f"        {at('thr')} = cg_tol * b")
    a(f"        {at('its')} = 0.0")
    a(f"        {at('act')} = 1.0 if b > 0.0 else 0.0")
    return "\n".join(ln) + "\n"


def _gen_rhs(N):
    """Source of ``_rhs_N(Z)``: rhs = s_c - W^T (rinv * s_r) on every lane."""
    z = _zrows(N)
    L = _UL
    S = _US
    ln = [f"def _rhs_{N}(Z):", f"    for c in range({L}):"]
    for i in range(N):
        ln.append(f"        s{i} = Z[{(z['rinv'] + i) * S} + c] * Z[{(z['sr'] + i) * S} + c]")
    for j in range(N):
        s = _sum([f"Z[{(i * N + j) * S} + c] * s{i}" for i in range(N)])
        ln.append(f"        Z[{(z['u'] + j) * S} + c] = Z[{(z['sc'] + j) * S} + c] - {s}")
    return "\n".join(ln) + "\n"


def _gen_u(N):
    """Source of ``_u_N(Z)``: u = rinv * (s_r - W v) on every lane."""
    z = _zrows(N)
    L = _UL
    S = _US
    ln = [f"def _u_{N}(Z):", f"    for c in range({L}):"]
    for j in range(N):
        ln.append(f"        v{j} = Z[{(z['v'] + j) * S} + c]")
    for i in range(N):
        s = _sum([f"Z[{(i * N + j) * S} + c] * v{j}" for j in range(N)])
        ln.append(f"        Z[{(z['u'] + i) * S} + c] = Z[{(z['rinv'] + i) * S} + c] * "
                  f"(Z[{(z['sr'] + i) * S} + c] - {s})")
    return "\n".join(ln) + "\n"


def _gen_setup(N):
    """Source of ``_setup_N(Rf, Gf, b0, nl, corrected, Z)`` for n == N (Rf,
    Gf: R and G flattened): the lane copy W of R and the marginals s_r, s_c
    of G*R (and, ``corrected``, 1 / (R 1) and R^T 1) of matrices b0 .. b0 +
    nl - 1 in lanes 0 .. nl-1 and again of the last one in lanes nl ..
    _UL-1; one matrix at a time in memory order (the reads stream), written
    out for the size: no loop overhead per row, sums in registers, and the
    entries at constant offsets from one base (one index computation per
    matrix; still scalar code: Numba does not run LLVM's SLP vectoriser)."""
    z = _zrows(N)
    S = _US
    NN = N * N
    ln = [f"def _setup_{N}(Rf, Gf, b0, nl, corrected, Z):", f"    for c in range({_UL}):",
          f"        e = (b0 + min(c, nl - 1)) * {NN}"]
    a = ln.append
    for i in range(N):
        for j in range(N):
            a(f"        w{j} = np.float64(Rf[e + {i * N + j}])")
            a(f"        Z[{(i * N + j) * S} + c] = w{j}")
            a(f"        h{j} = np.float64(Gf[e + {i * N + j}]) * w{j}")
        a(f"        Z[{(z['sr'] + i) * S} + c] = " + _sum([f"h{j}" for j in range(N)]))
        for j in range(N):
            a(f"        t{j} = h{j}" if i == 0 else f"        t{j} += h{j}")
        a("        if corrected:")
        a("            r = " + _sum([f"w{j}" for j in range(N)]))
        a(f"            Z[{(z['rinv'] + i) * S} + c] = 1.0 / r if r > 0.0 else 0.0")
        for j in range(N):
            a(f"            k{j} = w{j}" if i == 0 else f"            k{j} += w{j}")
    for j in range(N):
        a(f"        Z[{(z['sc'] + j) * S} + c] = t{j}")
    a("        if corrected:")
    for j in range(N):
        a(f"            Z[{(z['cvec'] + j) * S} + c] = k{j}")
    return "\n".join(ln) + "\n"


def _gen_dx(N):
    """Source of ``_dx_N(Rf, Gf, dXf, b0, nl, Z)`` for n == N (flattened
    arrays): dX[b] = (G - u 1^T - 1 v^T) * R for the matrices b = b0 + c of
    lanes c < nl, written out for the size (constant offsets from one base:
    one index computation per matrix; scalar code, as ``_gen_setup``)."""
    z = _zrows(N)
    S = _US
    NN = N * N
    ln = [f"def _dx_{N}(Rf, Gf, dXf, b0, nl, Z):", "    for c in range(nl):",
          f"        e = (b0 + c) * {NN}"]
    for j in range(N):
        ln.append(f"        v{j} = Z[{(z['v'] + j) * S} + c]")
    for i in range(N):
        ln.append(f"        ui = Z[{(z['u'] + i) * S} + c]")
        for j in range(N):
            q = i * N + j
            ln.append(f"        dXf[e + {q}] = (np.float64(Gf[e + {q}]) - ui - v{j}) * "
                      f"np.float64(Rf[e + {q}])")
    return "\n".join(ln) + "\n"


def _gen_at(name, args, N, target=None):
    """Source of ``_name_at_N(N, args)``, which calls ``_target(args)``
    (default ``_name_N``; None: does nothing): the size-N binding of the
    name ``_name`` used by the work-item function (``_compile_for_size``)."""
    call = "None" if target is None else f"_{target}({args})"
    return f"def _{name}_at_{N}(N, {args}):\n    return {call}\n"


def _compile_generated():
    """exec the generated sources into this module's namespace and jit them.
    The code objects carry this file's name, so Numba's disk cache (keyed by
    module, function name and this file's time stamp) keeps them like the
    hand-written kernels; the text is in ``_GENERATED_SOURCE``."""
    srcs = []
    for N in _UNROLL_SIZES:
        srcs += [_gen_cg(N), _gen_cg_init(N), _gen_rhs(N), _gen_u(N)]
        srcs += [_gen_at("cg", "Z, nb, n, inv_n, max_iter", N, f"cg_{N}"),
                 _gen_at("cg_init", "Z, n, inv_n, cg_tol", N, f"cg_init_{N}"),
                 _gen_at("rhs", "Z", N, f"rhs_{N}"), _gen_at("u", "Z", N, f"u_{N}")]
        written = N in _WRITTEN_OUT_SIZES
        if written:
            srcs += [_gen_setup(N), _gen_dx(N)]
        srcs += [_gen_at("setup", "Rf, Gf, b0, nl, corrected, Z", N,
                         f"setup_{N}" if written else None),
                 _gen_at("dx", "Rf, Gf, dXf, b0, nl, Z", N, f"dx_{N}" if written else None)]
    src = "\n\n".join(srcs)
    ns = {}
    exec(compile(src, __file__, "exec"), globals(), ns)
    for name, fn in ns.items():
        globals()[name] = njit(**_SER)(fn)
    return src


#: the padded size N inside the templates below; ``_compile_for_size`` binds
#: it to a constant per size (the templates never run as Python)
_N_PAD = None
_UNROLL_SIZES = tuple(sorted(IMPLICIT_UNROLL_SIZES))
_UNROLL_MAX = _UNROLL_SIZES[-1]
#: n == N for these N: the setup and dX passes written out for the size too
#: (per-row loop overhead dominates at small n; at N = 12, 16 the loops are
#: long enough and writing them out would add minutes of first compilation)
_WRITTEN_OUT_SIZES = tuple(N for N in _UNROLL_SIZES if N <= 8) or _UNROLL_SIZES[:1]
_WRITTEN_OUT_MAX = _WRITTEN_OUT_SIZES[-1]
_GENERATED_SOURCE = _compile_generated()


def _backward_item_unrolled(R, G, Rf, Gf, corrected, max_iter, cg_tol, b0, nl, block, Z,
                            t1, t2, dX, dXf, iters, relres):
    """The implicit backward of matrices b0 .. b0 + nl - 1 on the _UL lanes of
    one work item (lanes nl .. _UL-1 repeat the last matrix; their results
    are dropped), with the generated kernels of the padded size N.  A
    template, compiled once per size by ``_compile_for_size`` (there the
    names ``_cg``, ``_rhs``, ... are those of size N alone).
    Z: ((N N + 10 N + 8) _US,) float64 workspace (``_zrows``) whose padding
    (rows and columns n .. N-1 of W, rows n .. N-1 of rinv, cvec, s_r, s_c)
    is 0 on entry and stays 0, and whose rows 0 .. n-1 of rinv and cvec are 1
    on entry when not ``corrected`` (set once per workspace); t1, t2: (n,)
    scratch; Rf, Gf, dXf: R, G, dX flattened, for the written-out sizes (the
    generic loops index R, G, dX in 3-D: with flat indices and N an argument
    LLVM vectorised their row loop with gathers, 35 % slower at 65536 x 16;
    with N a constant it vectorises the setup's row loop with one scatter
    into Z per 8 entries, 1.06-1.14 times faster than the scalar loop)."""
    N = _N_PAD
    L = _UL
    n = R.shape[1]
    o = N * N
    # flat row offsets (no reshaped views: their set-up costs as much as a
    # small item's arithmetic)
    r_v = o * _US
    r_rinv = (o + 3 * N) * _US
    r_cvec = (o + 4 * N) * _US
    r_sr = (o + 5 * N) * _US
    r_sc = (o + 6 * N) * _US
    r_u = (o + 7 * N) * _US
    # one pass over R and G, matrix by matrix in memory order (the reads
    # stream): the lane copy W of R and the marginals of G*R (and of R)
    if n == N and N <= _WRITTEN_OUT_MAX:
        _setup(N, Rf, Gf, b0, nl, corrected, Z)
    elif corrected:
        for c in range(L):
            b = b0 + min(c, nl - 1)
            for j in range(n):
                t1[j] = 0.0
                t2[j] = 0.0
            for i in range(n):
                s = 0.0
                r = 0.0
                for j in range(n):
                    w = np.float64(R[b, i, j])
                    h = np.float64(G[b, i, j]) * w
                    Z[(i * N + j) * _US + c] = w
                    s += h
                    r += w
                    t1[j] += h
                    t2[j] += w
                Z[r_sr + i * _US + c] = s
                Z[r_rinv + i * _US + c] = 1.0 / r if r > 0.0 else 0.0
            for j in range(n):
                Z[r_sc + j * _US + c] = t1[j]
                Z[r_cvec + j * _US + c] = t2[j]
    else:
        for c in range(L):
            b = b0 + min(c, nl - 1)
            for j in range(n):
                t1[j] = 0.0
            for i in range(n):
                s = 0.0
                for j in range(n):
                    w = np.float64(R[b, i, j])
                    h = np.float64(G[b, i, j]) * w
                    Z[(i * N + j) * _US + c] = w
                    s += h
                    t1[j] += h
                Z[r_sr + i * _US + c] = s
            for j in range(n):
                Z[r_sc + j * _US + c] = t1[j]
    # W; s_r and s_c (consecutive rows); their spare lanes and padding rows are 0
    neg = _any_negative(Z, 0, o * _US)
    nf = _any_nonfinite(Z, r_sr, r_sc + N * _US)
    _rhs(N, Z)
    # projected CG from v0 = 0: res = p = rhs - mean(rhs)
    inv_n = 1.0 / n
    _cg_init(N, Z, n, inv_n, cg_tol)
    # lanes per CG block: ``block``, doubled while the block's W stays
    # within _CG_BLOCK_BYTES (N = 4: all 64 lanes at once)
    blk = block
    while 2 * blk <= L and L % (2 * blk) == 0 and 2 * blk * N * N * 8 <= _CG_BLOCK_BYTES:
        blk *= 2
    for cb in range(0, L, blk):
        _cg(N, Z[cb:], blk, n, inv_n, max_iter)
    _u(N, Z)
    nf += _any_nonfinite(Z, r_u, r_u + N * _US) + _any_nonfinite(Z, r_v, r_v + N * _US)
    it_out = iters[b0:b0 + nl]
    rr_out = relres[b0:b0 + nl]
    r_rs = (o + 10 * N) * _US
    rs_z = Z[r_rs:r_rs + nl]   # views: indices from 0 (see _any_nonfinite)
    its_z = Z[r_rs + 3 * _US:r_rs + 3 * _US + nl]
    bn_z = Z[r_rs + 4 * _US:r_rs + 4 * _US + nl]
    for c in range(nl):
        it_out[c] = np.int64(its_z[c])
        bnc = bn_z[c]
        rr_out[c] = math.sqrt(rs_z[c]) / bnc if bnc > 0.0 else 0.0
    # dX = (G - u 1^T - 1 v^T) * R, matrix by matrix in memory order
    if n == N and N <= _WRITTEN_OUT_MAX:
        _dx(N, Rf, Gf, dXf, b0, nl, Z)
        return nf, neg
    for c in range(nl):
        b = b0 + c
        for j in range(n):
            t1[j] = Z[r_v + j * _US + c]
        for i in range(n):
            ui = Z[r_u + i * _US + c]
            for j in range(n):
                dX[b, i, j] = (np.float64(G[b, i, j]) - ui - t1[j]) * np.float64(R[b, i, j])
    return nf, neg


def _implicit_unrolled(R, G, corrected, max_iter, cg_tol, block, chunks, dX):
    """``implicit_backward`` for n <= N, N in IMPLICIT_UNROLL_SIZES (the
    padded size): work items of _UL matrices on ``chunks`` workspaces.  A
    template: ``_compile_for_size(N)`` compiles it with the size-N kernels
    only, and with N = _N_PAD a compile-time constant (the index arithmetic
    folds; with N an argument every access to Z paid a wrap-around select)."""
    N = _N_PAD
    B = R.shape[0]
    n = R.shape[1]
    iters = np.zeros(B, dtype=np.int64)
    relres = np.zeros(B)
    # ``chunks`` workspaces, each serving every n_chunks-th work item
    # (items are independent: which chunk or thread runs an item changes
    # no result)
    n_items = (B + _UL - 1) // _UL
    n_chunks = max(1, min(chunks, n_items))
    Rf = R.reshape(-1)
    Gf = G.reshape(-1)
    dXf = dX.reshape(-1)
    o = N * N
    n_nf = 0
    n_neg = 0
    for th in prange(n_chunks):
        # spare slots c >= _UL stay 0; rows start on a cache line (_US
        # is a multiple of 8), so a CG block's 8 lanes of a row are one
        # line: 16 KiB of W in L1 at N = 16, not 32
        Zraw = np.zeros((o + 10 * N + 8) * _US + 8)
        a0 = (-(Zraw.ctypes.data % 64) % 64) // 8
        Z = Zraw[a0:a0 + (o + 10 * N + 8) * _US]
        if not corrected:   # rinv = cvec = 1 (rows n .. N-1 stay 0)
            for k in range(2):
                for i in range(n):
                    for c in range(_UL):
                        Z[(o + (3 + k) * N + i) * _US + c] = 1.0
        t1 = np.empty(n)
        t2 = np.empty(n)
        for t in range(th, n_items, n_chunks):
            b0 = t * _UL
            nf, ng = _backward_item_unrolled(R, G, Rf, Gf, corrected, max_iter, cg_tol,
                                             b0, min(_UL, B - b0), block, Z, t1, t2,
                                             dX, dXf, iters, relres)
            n_nf += nf
            n_neg += ng
    return iters, relres, n_nf, n_neg


@njit(**_PAR)
def _implicit_lanes(R, G, corrected, max_iter, cg_tol, lanes, dX):
    """``implicit_backward`` for n > max(IMPLICIT_UNROLL_SIZES): ``_cg_lanes``
    on work items of ``lanes`` matrices."""
    L = lanes
    B = R.shape[0]
    n = R.shape[1]
    iters = np.zeros(B, dtype=np.int64)
    relres = np.zeros(B)
    n_items = (B + L - 1) // L
    n_nf = 0
    n_neg = 0
    for t in prange(n_items):
        W = np.empty((n, n, L))
        t1 = np.empty(n)
        t2 = np.empty(n)
        sr = np.empty((n, L))
        sc = np.empty((n, L))
        rinv = np.empty((n, L))
        cvec = np.empty((n, L))
        rhs = np.empty((n, L))
        v = np.empty((n, L))
        res = np.empty((n, L))
        p = np.empty((n, L))
        Ap = np.empty((n, L))
        q = np.empty((n, L))
        rs = np.empty(L)
        thr = np.empty(L)
        pAp = np.empty(L)
        tmp = np.empty(L)
        rr = np.empty(L)
        its = np.empty(L, dtype=np.int64)
        active = np.empty(L, dtype=np.bool_)
        b0 = t * L
        nl = min(L, B - b0)
        if nl < L:
            for i in range(n):
                for j in range(n):
                    for c in range(L):
                        W[i, j, c] = 0.0
        for i in range(n):
            for c in range(L):
                sr[i, c] = 0.0
                sc[i, c] = 0.0
                rinv[i, c] = 0.0
                cvec[i, c] = 0.0
        # marginals of G*R and of R, matrix by matrix in memory order, and
        # the lane copy W of R (one pass over R and G)
        for c in range(nl):
            b = b0 + c
            for j in range(n):
                t1[j] = 0.0
                t2[j] = 0.0
            for i in range(n):
                s = 0.0
                r = 0.0
                for j in range(n):
                    w = np.float64(R[b, i, j])
                    h = np.float64(G[b, i, j]) * w
                    W[i, j, c] = w
                    s += h
                    r += w
                    t1[j] += h
                    t2[j] += w
                sr[i, c] = s
                rinv[i, c] = r
            for j in range(n):
                sc[j, c] = t1[j]
                cvec[j, c] = t2[j]
        for i in range(n):
            for c in range(L):
                if corrected:
                    r = rinv[i, c]
                    rinv[i, c] = 1.0 / r if r > 0.0 else 0.0
                else:
                    rinv[i, c] = 1.0
                    cvec[i, c] = 1.0
        ng = _any_negative(W.reshape(-1), 0, n * n * L)
        nf = (_any_nonfinite(sr.reshape(-1), 0, n * L)
              + _any_nonfinite(sc.reshape(-1), 0, n * L))
        # rhs = s_c - R^T diag(rinv) s_r
        for j in range(n):
            for c in range(L):
                rhs[j, c] = sc[j, c]
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    rhs[j, c] -= W[i, j, c] * (rinv[i, c] * sr[i, c])
        _cg_lanes(W, rinv, cvec, rhs, v, res, p, Ap, q, max_iter, cg_tol,
                  rs, thr, pAp, active, its, rr, tmp)
        # u = diag(rinv) (s_r - R v), kept in q
        for i in range(n):
            for c in range(L):
                tmp[c] = 0.0
            for j in range(n):
                for c in range(L):
                    tmp[c] += W[i, j, c] * v[j, c]
            for c in range(L):
                q[i, c] = rinv[i, c] * (sr[i, c] - tmp[c])
        nf += (_any_nonfinite(q.reshape(-1), 0, n * L)
               + _any_nonfinite(v.reshape(-1), 0, n * L))
        n_nf += nf
        n_neg += ng
        for c in range(nl):
            iters[b0 + c] = its[c]
            relres[b0 + c] = rr[c]
        for c in range(nl):
            b = b0 + c
            for j in range(n):
                t1[j] = v[j, c]
            for i in range(n):
                ui = q[i, c]
                for j in range(n):
                    dX[b, i, j] = (np.float64(G[b, i, j]) - ui - t1[j]) * np.float64(R[b, i, j])
    return iters, relres, n_nf, n_neg


def _compile_for_size(N):
    """``_implicit_unrolled`` and ``_backward_item_unrolled`` compiled
    again (as ``_implicit_unrolled_N``, ``_backward_item_unrolled_N``), with
    the names of the generated kernels bound to those of size N alone
    (``_gen_at``): the first call at one size compiles that size's kernels
    only (on 2 cores 23 s at n = 16, 10 s at n = 4; one kernel for all four
    sizes took 70-75 s, BENCHMARKS.md).  The templates' code, compiled in a
    smaller context (LLVM may inline and round differently: results can
    move by an ulp against the all-sizes build).  Same file and line
    numbers, distinct names: Numba's disk cache keeps each size apart."""
    ns = dict(globals())
    ns["_N_PAD"] = N
    for name in ("cg", "cg_init", "rhs", "u", "setup", "dx"):
        ns["_" + name] = globals()[f"_{name}_at_{N}"]
    for fn, opts in ((_backward_item_unrolled, _SER), (_implicit_unrolled, _PAR)):
        name = fn.__name__
        src = inspect.getsource(fn).replace(f"def {name}(", f"def {name}_{N}(", 1)
        src = "\n" * (fn.__code__.co_firstlineno - 1) + src
        exec(compile(src, __file__, "exec"), ns)
        ns[name] = njit(**opts)(ns[f"{name}_{N}"])
    return ns["_implicit_unrolled"]


_UNROLLED_KERNELS = {N: _compile_for_size(N) for N in _UNROLL_SIZES}
#: the padded size of n = 0 .. max(IMPLICIT_UNROLL_SIZES)
_PADDED = tuple(min(N for N in _UNROLL_SIZES if N >= n) for n in range(_UNROLL_MAX + 1))


def item_lanes(n, B=None):
    """Matrices per work item of ``implicit_backward`` at size n for a batch
    of B (the caller runs no more threads than there are work items, and
    passes ``lanes_for(n, B)`` as ``lanes``)."""
    return _UL if n <= _UNROLL_MAX else lanes_for(n, B)


def implicit_backward(R, G, corrected, max_iter, cg_tol, lanes, block, chunks, dX):
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
    IMPLICIT_UNROLL_LANES matrices, CG on blocks of at least ``block``
    lanes, ``chunks`` workspaces; ``lanes`` is not used); larger n:
    ``_implicit_lanes``, ``_cg_lanes`` on work items of ``lanes``
    matrices.  Either way each lane's arithmetic is that of its
    matrix alone, so results do not depend on the thread count or the batch.

    The values are checked in the same pass (``_any_nonfinite``,
    ``_any_negative``): n_nonfinite counts the work items with a non-finite
    marginal of G*R or solution entry (NaN/inf in R or G, or an overflow),
    n_negative those with a negative entry of R; dX is meaningless unless
    both are 0.

    R, G, dX: (B, n, n), C-contiguous, one dtype (dX is allocated by the
    caller: NumPy asks for huge pages for large arrays, and the first touch
    of a 128 MiB output costs 12 ms instead of 45 here).  Returns (iters,
    relres, n_nonfinite, n_negative): iters (B,) int64 CG iterations, relres
    (B,) float64 final relative residual (allocated here: fewer Python-level
    steps per call, which matter for small batches).
    """
    n = R.shape[1]
    if n <= _UNROLL_MAX:
        N = _PADDED[n]
        return _UNROLLED_KERNELS[N](R, G, corrected, max_iter, cg_tol, block, chunks, dX)
    return _implicit_lanes(R, G, corrected, max_iter, cg_tol, lanes, dX)


# --------------------------------------------------------------------------
# unrolled backward (exact gradient of the finite-iteration forward)
# --------------------------------------------------------------------------
@njit(**_PAR)
def unrolled_backward(X, G, n_iter, tol, lanes, dX, iters):
    """dX[b] = d<G[b], S_K(X[b])>/dX[b]: reverse mode through the K Sinkhorn
    iterations of ``operator_forward`` (same n_iter and tol, so the same K;
    iters[b] = K).

    The forward is recomputed from X keeping only the log-scalings f^k, g^k
    (2 n float64 per iteration per matrix, in the work item's workspace);
    the reverse sweep recomputes each iterate's entries from them.  With
    P^k = exp(X + f^k 1^T + 1 g^k^T) (column-normalised; P^K = R) and
    Q^k = exp(X + f^k 1^T + 1 g^{k-1}^T) (row-normalised), the adjoints are
    gbar^K = s_c, fbar^K = s_r - P^K gbar^K, fbar^k = -P^k gbar^k (k < K),
    gbar^{k-1} = -Q^k^T fbar^k, and dX = G*R - sum_k (1 gbar^k^T * P^k +
    fbar^k 1^T * Q^k).  Two exponentials per entry per iteration in the
    reverse sweep (P and Q, both <= 1); the forward recomputation is
    ``operator_forward``'s own (``_forward_lanes``: multiply-adds, plus 2 n
    logarithms per iteration for the history).  Lanes with different
    K (tol) are masked: lane c joins the sweep at k = K_c.
    """
    L = lanes
    B = X.shape[0]
    n = X.shape[1]
    n_items = (B + L - 1) // L
    for t in prange(n_items):
        W = np.empty((n, n, L))
        GW = np.empty((n, n, L))
        D = np.empty((n, n, L))
        F = np.empty((n_iter, n, L))
        Gh = np.empty((n_iter + 1, n, L))
        xr = np.empty((n, L))
        xc = np.empty((n, L))
        acc2 = np.empty((n, L))
        ff = np.empty((n, L))
        gf = np.empty((n, L))
        fb = np.empty((n, L))
        gb = np.empty((n, L))
        gbn = np.empty((n, L))
        acc = np.empty(L)
        vmax = np.empty(L)
        act = np.empty(L)
        first = np.empty(L)
        fbi = np.empty(L)
        Kc = np.empty(L, dtype=np.int64)
        b0 = t * L
        nl = min(L, B - b0)
        _load(X, b0, B, W, xr, xc)
        _gather(G, b0, B, GW)
        Kt = np.empty((n, n, L))
        fa = np.empty((n, L))
        ga = np.empty((n, L))
        u = np.empty((n, L))
        v = np.empty((n, L))
        s = np.empty((n, L))
        lg = np.empty((n, L))
        bad = np.empty(L)
        _forward_lanes(W, xr, xc, n_iter, tol, F, Gh, True, Kt, fa, ga, u, v, s, lg, acc,
                       acc2, vmax, bad, Kc, ff, gf)
        Kmax = 0
        for c in range(L):
            Kmax = max(Kmax, Kc[c])
        for j in range(n):
            for c in range(L):
                gb[j, c] = 0.0
        for i in range(n):
            for c in range(L):
                fb[i, c] = 0.0
            for j in range(n):
                for c in range(L):
                    h = GW[i, j, c] * fast_exp(W[i, j, c] + ff[i, c] + gf[j, c])
                    D[i, j, c] = h
                    fb[i, c] += h
                    gb[j, c] += h
        for k in range(Kmax, 0, -1):
            f = F[k - 1]
            g = Gh[k]
            gp = Gh[k - 1]
            for c in range(L):
                act[c] = 1.0 if k <= Kc[c] else 0.0
                first[c] = 1.0 if k == Kc[c] else 0.0
            for j in range(n):
                for c in range(L):
                    gbn[j, c] = 0.0
            for i in range(n):
                # column step k: P_ij = exp(W_ij + f_i + g_j)
                for c in range(L):
                    acc[c] = 0.0
                for j in range(n):
                    for c in range(L):
                        P = fast_exp(W[i, j, c] + f[i, c] + g[j, c])
                        acc[c] += P * gb[j, c]
                        D[i, j, c] -= act[c] * (gb[j, c] * P)
                for c in range(L):
                    fbi[c] = first[c] * fb[i, c] - acc[c]
                # row step k: Q_ij = exp(W_ij + f_i + g^{k-1}_j) (a second
                # exponential: P_ij exp(g^{k-1}_j - g^k_j) can overflow as inf * 0
                # when a column scaling moves by more than ~700 in one iteration)
                for j in range(n):
                    for c in range(L):
                        Q = fast_exp(W[i, j, c] + f[i, c] + gp[j, c])
                        D[i, j, c] -= act[c] * (fbi[c] * Q)
                        gbn[j, c] -= Q * fbi[c]
            for j in range(n):
                for c in range(L):
                    if act[c] > 0.0:
                        gb[j, c] = gbn[j, c]
        for c in range(nl):
            iters[b0 + c] = Kc[c]
        for i in range(n):
            for j in range(n):
                for c in range(nl):
                    dX[b0 + c, i, j] = D[i, j, c]
