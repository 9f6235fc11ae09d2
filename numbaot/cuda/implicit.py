"""CUDA kernels of the Sinkhorn operator on batches of small n x n matrices and
its backward passes, mirroring ``numbaot/cpu/implicit.py``.

Host launchers (``LAUNCHERS``: the names, signatures and returns of
``numbaot/cpu/implicit.py``'s): ``count_invalid``, ``operator_forward``,
``implicit_backward``, ``unrolled_backward``; they allocate their outputs as
device arrays.

Conventions (as on the CPU)
---------------------------
* Inputs are C-contiguous (B, n, n) device arrays, float32 or float64, only
  read; arithmetic is float64; outputs are cast on the final store.
* Log-domain scalings, R = exp(X + f 1^T + 1 g^T); one iteration is a row
  normalisation then a column normalisation; each logsumexp is shifted by
  its exact max (a max pass, then an exp-sum pass), so nothing overflows.
  Stopping with tol and the iteration count K are as on the CPU.
* Large near-constant rows, then columns (entries within a factor 2 of a
  maximum beyond ``_config.IMPLICIT_SHIFT_MIN``) are shifted by their
  maximum, exactly, the columns with the initial potential g^0 = that
  maximum (the CPU's ``_shift_lines``): entries are read as
  (X_ij - rs_i) - cs_j.  The shifts are found by one extra read of the
  matrix before the iterations; a matrix (warp kernel: a warp) without such
  a line reads X_ij as before.

Kernels
-------
* One warp per matrix (``*_warp``; CUDA_IMPLICIT_WARP_MIN_N <= n <= 64):
  lane l owns row/column l and l + 32, its scalings and CG vectors live in
  registers; mat-vecs broadcast the vector one entry at a time with
  ``shfl.sync.idx`` (R p: lane i walks row i; R^T q: lane j walks column j,
  coalesced across lanes); dot products and the projection onto 1-perp use
  ``shfl.sync.bfly`` butterflies.  No shared memory, no block barrier.
* One thread per matrix (``*_thread``; small n, n > 64, and the unrolled
  backward): per-matrix vectors in a batch-minor float64 scratch array
  S[k, i, b] (adjacent threads touch adjacent addresses).  The unrolled
  backward keeps the log-scalings of every iteration in scratch
  (16 (n_iter + 1) n B bytes) plus an n x n float64 accumulator per matrix.

Simulator: the warp shuffles run on ``numbaot.cuda._sim``'s lane exchange
(installed by the registry in simulator mode).
"""
import math

import numpy as np
from numba import cuda

from .. import _config
from ._registry import device, kernel

__all__ = [
    "LAUNCHERS",
    "count_invalid",
    "operator_forward",
    "implicit_backward",
    "unrolled_backward",
    "use_warp",
]

_F = ("float32", "float64")
_FULL = 0xFFFFFFFF
_MAX_WARP_N = 64


def _sigs(template):
    return [template.format(T=t) for t in _F]


# --------------------------------------------------------------------------
# device helpers
# --------------------------------------------------------------------------
@device
def _bcast(va, vb, j):
    """Entry j of a warp-distributed vector (entry l in lane l's ``va``,
    entry l + 32 in its ``vb``); j must be the same in every lane."""
    v = va if j < 32 else vb
    return cuda.shfl_sync(_FULL, v, j & 31)


@device
def _wsum(x):
    x += cuda.shfl_xor_sync(_FULL, x, 16)
    x += cuda.shfl_xor_sync(_FULL, x, 8)
    x += cuda.shfl_xor_sync(_FULL, x, 4)
    x += cuda.shfl_xor_sync(_FULL, x, 2)
    x += cuda.shfl_xor_sync(_FULL, x, 1)
    return x


@device
def _wmax(x):
    x = max(x, cuda.shfl_xor_sync(_FULL, x, 16))
    x = max(x, cuda.shfl_xor_sync(_FULL, x, 8))
    x = max(x, cuda.shfl_xor_sync(_FULL, x, 4))
    x = max(x, cuda.shfl_xor_sync(_FULL, x, 2))
    x = max(x, cuda.shfl_xor_sync(_FULL, x, 1))
    return x


#: the shift threshold of large near-constant rows and columns
#: (``_config.IMPLICIT_SHIFT_MIN``, as on the CPU)
_SHIFT_MIN = float(_config.IMPLICIT_SHIFT_MIN)


@device
def _line_shift(mx, mn):
    """mx when |mx| > _SHIFT_MIN and every entry of the line (maximum mx,
    minimum mn) lies within a factor 2 of mx, so that x - mx is exact
    (Sterbenz), else 0 (the CPU's ``_line_shift``)."""
    if (mx > _SHIFT_MIN and mn >= 0.5 * mx) or (mx < -_SHIFT_MIN and mn >= 2.0 * mx):
        return mx
    return 0.0


#: the CG runs on a rhs scaled by a power of two when the marginals of G*R
#: leave [1/_BAND, _BAND] (``_config.IMPLICIT_CG_SCALE_BAND``, as on the CPU)
_BAND = float(_config.IMPLICIT_CG_SCALE_BAND)


@device
def _cg_scale(m):
    """(s, 1 / s): 1 inside [1/_BAND, _BAND] (or m = 0, NaN, inf), else the
    power of two with m s in [0.5, 1) (the CPU's ``cg_scale``): the CG runs
    on s * rhs and the solution is multiplied by 1 / s, both exactly."""
    if not ((m > _BAND) or ((m < 1.0 / _BAND) and (m > 0.0))) or m == math.inf:
        return 1.0, 1.0
    e = max(-1022, min(1022, math.frexp(m)[1]))
    return math.ldexp(1.0, -e), math.ldexp(1.0, e)


@device
def _warp_ids():
    """(matrix index of this warp, lane)."""
    wpb = cuda.blockDim.x // 32
    return cuda.blockIdx.x * wpb + cuda.threadIdx.x // 32, cuda.threadIdx.x & 31


# --------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------
@kernel(_sigs("void({T}[::1], int64, int64[::1])"))
def count_invalid_kernel(x, nonneg, res):
    """res[0] += number of NaN/inf entries of x; res[1] += number of negative
    entries (when ``nonneg``); one atomic per thread that found any."""
    bad = 0
    neg = 0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i]
        if not (v - v == 0):
            bad += 1
        if nonneg and v < 0:
            neg += 1
    if bad:
        cuda.atomic.add(res, 0, bad)
    if neg:
        cuda.atomic.add(res, 1, neg)


# --------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------
@device
def _thread_shifts(X, b, Sh):
    """The line shifts of matrix b (one thread): Sh[0, i, b] = row i's,
    Sh[1, j, b] = column j's after the row shifts (``_line_shift``; 0 for
    an ordinary line).  Returns True when any line is shifted."""
    n = X.shape[1]
    shifted = False
    for i in range(n):
        mx = -math.inf
        mn = math.inf
        for j in range(n):
            x = X[b, i, j]
            mx = max(mx, x)
            mn = min(mn, x)
        t = _line_shift(mx, mn)
        Sh[0, i, b] = t
        shifted = shifted or t != 0.0
    for j in range(n):
        mx = -math.inf
        mn = math.inf
        for i in range(n):
            x = X[b, i, j] - Sh[0, i, b]
            mx = max(mx, x)
            mn = min(mn, x)
        t = _line_shift(mx, mn)
        Sh[1, j, b] = t
        shifted = shifted or t != 0.0
    return shifted


@device
def _xs(X, b, i, j, Sh, shifted):
    """Entry (i, j) of matrix b, its line shifts subtracted when ``shifted``."""
    if shifted:
        return (X[b, i, j] - Sh[0, i, b]) - Sh[1, j, b]
    return X[b, i, j]


@device
def _forward_thread(X, b, n_iter, tol, F, Gh, hist, Sh, shifted):
    """The iterations of one matrix by one thread; scalings in the
    batch-minor scratch F[slot, i, b], Gh[slot, j, b] (with ``hist`` every
    iteration's: F[k-1] = f^k, Gh[k] = g^k; else two alternating slots:
    f^k in F[(k-1) & 1], g^k in Gh[k & 1]), on the shifted entries
    (``_xs``; g^0 = the column shifts).  Returns K (as the CPU's
    ``_forward_lanes``)."""
    n = X.shape[1]
    for j in range(n):
        Gh[0, j, b] = Sh[1, j, b] if shifted else 0.0
    for it in range(n_iter):
        gs = it if hist else it & 1
        fo = (it - 1) if hist else (it - 1) & 1
        fs = it if hist else it & 1
        err = 0.0
        for i in range(n):
            m = -math.inf
            for j in range(n):
                m = max(m, _xs(X, b, i, j, Sh, shifted) + Gh[gs, j, b])
            s = 0.0
            for j in range(n):
                s += math.exp(_xs(X, b, i, j, Sh, shifted) + Gh[gs, j, b] - m)
            fni = -(m + math.log(s))
            if it > 0:
                err = max(err, abs(math.exp(F[fo, i, b] - fni) - 1.0))
            F[fs, i, b] = fni
        if tol >= 0.0 and it > 0 and err < tol:
            return it
        gn = (it + 1) if hist else (it + 1) & 1
        for j in range(n):
            m = -math.inf
            for i in range(n):
                m = max(m, _xs(X, b, i, j, Sh, shifted) + F[fs, i, b])
            s = 0.0
            for i in range(n):
                s += math.exp(_xs(X, b, i, j, Sh, shifted) + F[fs, i, b] - m)
            Gh[gn, j, b] = -(m + math.log(s))
    return n_iter


@kernel(_sigs("void({T}[:, :, ::1], int64, float64, float64[:, :, ::1], "
              "float64[:, :, ::1], float64[:, :, ::1], {T}[:, :, ::1], int64[::1])"), hot=True)
def operator_forward_thread(X, n_iter, tol, F, Gh, Sh, R, iters):
    """One thread per matrix: R[b] = exp(X + f^K 1^T + 1 g^K^T), iters[b] = K
    (Sh: the line shifts' scratch, ``_thread_shifts``)."""
    b = cuda.grid(1)
    if b >= X.shape[0]:
        return
    n = X.shape[1]
    shifted = _thread_shifts(X, b, Sh)
    K = _forward_thread(X, b, n_iter, tol, F, Gh, False, Sh, shifted)
    iters[b] = K
    fs = (K - 1) & 1
    gs = K & 1
    for i in range(n):
        fi = F[fs, i, b]
        for j in range(n):
            R[b, i, j] = math.exp(_xs(X, b, i, j, Sh, shifted) + fi + Gh[gs, j, b])


@device
def _row_lse_warp(X, w, ia, va, ga, gb, n, rs, csa, csb, shifted):
    """-LSE_j(x_j + g_j) for lane's row ia (0 when not va), x_j = X[w, ia, j]
    or, when ``shifted`` (warp-uniform), (X[w, ia, j] - rs) - cs_j with rs
    this row's shift and cs the column shifts (lane l: csa = cs_l,
    csb = cs_{l+32})."""
    m = -math.inf
    for j in range(n):
        gj = _bcast(ga, gb, j)
        cj = _bcast(csa, csb, j) if shifted else 0.0
        if va:
            x = X[w, ia, j]
            if shifted:
                x = (x - rs) - cj
            m = max(m, x + gj)
    s = 0.0
    for j in range(n):
        gj = _bcast(ga, gb, j)
        cj = _bcast(csa, csb, j) if shifted else 0.0
        if va:
            x = X[w, ia, j]
            if shifted:
                x = (x - rs) - cj
            s += math.exp(x + gj - m)
    return -(m + math.log(s)) if va else 0.0


@device
def _col_lse_warp(X, w, ja, va, fa, fb, n, rsa, rsb, cs, shifted):
    """-LSE_i(x_i + f_i) for lane's column ja (0 when not va), x_i =
    X[w, i, ja] or, when ``shifted``, (X[w, i, ja] - rs_i) - cs with cs this
    column's shift (rsa, rsb: the row shifts, distributed as f)."""
    m = -math.inf
    for i in range(n):
        fi = _bcast(fa, fb, i)
        ri = _bcast(rsa, rsb, i) if shifted else 0.0
        if va:
            x = X[w, i, ja]
            if shifted:
                x = (x - ri) - cs
            m = max(m, x + fi)
    s = 0.0
    for i in range(n):
        fi = _bcast(fa, fb, i)
        ri = _bcast(rsa, rsb, i) if shifted else 0.0
        if va:
            x = X[w, i, ja]
            if shifted:
                x = (x - ri) - cs
            s += math.exp(x + fi - m)
    return -(m + math.log(s)) if va else 0.0


@device
def _warp_shifts(X, w, ia, ib, va, vb, n):
    """The line shifts of matrix w (one warp; the CPU's ``_shift_lines``):
    (rsa, rsb, csa, csb, shifted): the row shifts of the lane's rows ia,
    ib, the column shifts of its columns ia, ib (after the row shifts;
    0 for an ordinary line or an idle slot) and whether any line of the
    matrix is shifted (the same in every lane)."""
    rsa = 0.0
    rsb = 0.0
    for slot in range(2):
        i = ia if slot == 0 else ib
        if (va if slot == 0 else vb):
            mx = -math.inf
            mn = math.inf
            for j in range(n):
                x = X[w, i, j]
                mx = max(mx, x)
                mn = min(mn, x)
            if slot == 0:
                rsa = _line_shift(mx, mn)
            else:
                rsb = _line_shift(mx, mn)
    mxa = -math.inf
    mna = math.inf
    mxb = -math.inf
    mnb = math.inf
    for i in range(n):
        ri = _bcast(rsa, rsb, i)
        if va:
            x = X[w, i, ia] - ri
            mxa = max(mxa, x)
            mna = min(mna, x)
        if vb:
            x = X[w, i, ib] - ri
            mxb = max(mxb, x)
            mnb = min(mnb, x)
    csa = _line_shift(mxa, mna) if va else 0.0
    csb = _line_shift(mxb, mnb) if vb else 0.0
    any_ = 1.0 if (rsa != 0.0 or rsb != 0.0 or csa != 0.0 or csb != 0.0) else 0.0
    return rsa, rsb, csa, csb, _wmax(any_) > 0.0


@kernel(_sigs("void({T}[:, :, ::1], int64, float64, {T}[:, :, ::1], int64[::1])"),
        hot=True, warp_shuffle=True)
def operator_forward_warp(X, n_iter, tol, R, iters):
    """One warp per matrix (n <= 64): lane l owns rows/columns l and l + 32."""
    w, lane = _warp_ids()
    if w >= X.shape[0]:
        return
    n = X.shape[1]
    ia = lane
    ib = lane + 32
    va = ia < n
    vb = ib < n
    rsa, rsb, csa, csb, shifted = _warp_shifts(X, w, ia, ib, va, vb, n)
    fa = 0.0
    fb = 0.0
    ga = csa  # g^0: the column shifts (0 for ordinary columns)
    gb = csb
    K = n_iter
    for it in range(n_iter):
        fna = _row_lse_warp(X, w, ia, va, ga, gb, n, rsa, csa, csb, shifted)
        fnb = _row_lse_warp(X, w, ib, vb, ga, gb, n, rsb, csa, csb, shifted)
        if tol >= 0.0 and it > 0:
            e = 0.0
            if va:
                e = abs(math.exp(fa - fna) - 1.0)
            if vb:
                e = max(e, abs(math.exp(fb - fnb) - 1.0))
            if _wmax(e) < tol:
                K = it
                break
        fa = fna
        fb = fnb
        ga = _col_lse_warp(X, w, ia, va, fa, fb, n, rsa, rsb, csa, shifted)
        gb = _col_lse_warp(X, w, ib, vb, fa, fb, n, rsa, rsb, csb, shifted)
    if lane == 0:
        iters[w] = K
    for i in range(n):
        fi = _bcast(fa, fb, i)
        ri = _bcast(rsa, rsb, i) if shifted else 0.0
        if va:
            x = X[w, i, ia]
            if shifted:
                x = (x - ri) - csa
            R[w, i, ia] = math.exp(x + fi + ga)
        if vb:
            x = X[w, i, ib]
            if shifted:
                x = (x - ri) - csb
            R[w, i, ib] = math.exp(x + fi + gb)


# --------------------------------------------------------------------------
# implicit backward (conjugate gradient)
# --------------------------------------------------------------------------
# scratch rows of the one-thread-per-matrix CG: S[k, i, b]
_SR, _SC, _RINV, _CVEC, _V, _RES, _P, _AP, _Q = range(9)


@device
def _project_thread(S, k, b, n):
    s = 0.0
    for i in range(n):
        s += S[k, i, b]
    s /= n
    for i in range(n):
        S[k, i, b] -= s


@device
def _schur_thread(R, S, b, n):
    """S[AP] = diag(c) p - R^T (rinv * (R p)), projected onto 1-perp."""
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += R[b, i, j] * S[_P, j, b]
        S[_Q, i, b] = S[_RINV, i, b] * s
    for j in range(n):
        s = S[_CVEC, j, b] * S[_P, j, b]
        for i in range(n):
            s -= R[b, i, j] * S[_Q, i, b]
        S[_AP, j, b] = s
    _project_thread(S, _AP, b, n)


@kernel(_sigs("void({T}[:, :, ::1], {T}[:, :, ::1], int64, int64, float64, "
              "float64[:, :, ::1], {T}[:, :, ::1], int64[::1], float64[::1])"), hot=True)
def implicit_backward_thread(R, G, corrected, max_iter, cg_tol, S, dX, iters, relres):
    """One thread per matrix: the CPU's ``implicit_backward`` for matrix b."""
    b = cuda.grid(1)
    if b >= R.shape[0]:
        return
    n = R.shape[1]
    for i in range(n):
        s = 0.0
        r = 0.0
        c = 0.0
        t = 0.0
        for j in range(n):
            s += G[b, i, j] * R[b, i, j]
            r += R[b, i, j]
            t += G[b, j, i] * R[b, j, i]
            c += R[b, j, i]
        S[_SR, i, b] = s
        S[_SC, i, b] = t
        if corrected:
            S[_RINV, i, b] = 1.0 / r if r > 0.0 else 0.0
            S[_CVEC, i, b] = c
        else:
            S[_RINV, i, b] = 1.0
            S[_CVEC, i, b] = 1.0
    # rhs (in RES) = s_c - R^T (rinv * s_r), scaled (``_cg_scale``)
    m = 0.0
    for i in range(n):
        m = max(m, max(abs(S[_SR, i, b]), abs(S[_SC, i, b])))
    scale, inv_scale = _cg_scale(m)
    for j in range(n):
        s = S[_SC, j, b]
        for i in range(n):
            s -= R[b, i, j] * (S[_RINV, i, b] * S[_SR, i, b])
        S[_RES, j, b] = s * scale
    _project_thread(S, _RES, b, n)
    rs = 0.0
    for i in range(n):
        S[_V, i, b] = 0.0
        S[_P, i, b] = S[_RES, i, b]
        rs += S[_RES, i, b] * S[_RES, i, b]
    bnorm = math.sqrt(rs)
    thr = cg_tol * bnorm
    it = 0
    while bnorm > 0.0 and it < max_iter:
        _schur_thread(R, S, b, n)
        pAp = 0.0
        for i in range(n):
            pAp += S[_P, i, b] * S[_AP, i, b]
        if not (pAp > 0.0):
            break
        alpha = rs / pAp
        rs_new = 0.0
        for i in range(n):
            S[_V, i, b] += alpha * S[_P, i, b]
            r_ = S[_RES, i, b] - alpha * S[_AP, i, b]
            S[_RES, i, b] = r_
            rs_new += r_ * r_
        it += 1
        beta = rs_new / rs
        rs = rs_new
        if math.sqrt(rs_new) <= thr:
            break
        for i in range(n):
            S[_P, i, b] = S[_RES, i, b] + beta * S[_P, i, b]
    iters[b] = it
    relres[b] = math.sqrt(rs) / bnorm if bnorm > 0.0 else 0.0
    for i in range(n):
        S[_V, i, b] *= inv_scale
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += R[b, i, j] * S[_V, j, b]
        ui = S[_RINV, i, b] * (S[_SR, i, b] - s)
        for j in range(n):
            dX[b, i, j] = (G[b, i, j] - ui - S[_V, j, b]) * R[b, i, j]


@device
def _row_dot_warp(R, w, ia, va, xa, xb, n):
    """sum_j R[w, ia, j] x_j (0 when not va)."""
    s = 0.0
    for j in range(n):
        xj = _bcast(xa, xb, j)
        if va:
            s += R[w, ia, j] * xj
    return s


@device
def _col_dot_warp(R, w, ja, va, ya, yb, n):
    """sum_i R[w, i, ja] y_i (0 when not va)."""
    s = 0.0
    for i in range(n):
        yi = _bcast(ya, yb, i)
        if va:
            s += R[w, i, ja] * yi
    return s


@kernel(_sigs("void({T}[:, :, ::1], {T}[:, :, ::1], int64, int64, float64, "
              "{T}[:, :, ::1], int64[::1], float64[::1])"), hot=True, warp_shuffle=True)
def implicit_backward_warp(R, G, corrected, max_iter, cg_tol, dX, iters, relres):
    """One warp per matrix (n <= 64): the CPU's ``implicit_backward``; lane l
    owns entries l and l + 32 of every n-vector (registers)."""
    w, lane = _warp_ids()
    if w >= R.shape[0]:
        return
    n = R.shape[1]
    ia = lane
    ib = lane + 32
    va = ia < n
    vb = ib < n
    # row sums (rows ia, ib) and column sums (columns ia, ib)
    sra = 0.0
    srb = 0.0
    ra = 0.0
    rb = 0.0
    sca = 0.0
    scb = 0.0
    ca = 0.0
    cb = 0.0
    for k in range(n):
        if va:
            x = R[w, ia, k]
            sra += G[w, ia, k] * x
            ra += x
            y = R[w, k, ia]
            sca += G[w, k, ia] * y
            ca += y
        if vb:
            x = R[w, ib, k]
            srb += G[w, ib, k] * x
            rb += x
            y = R[w, k, ib]
            scb += G[w, k, ib] * y
            cb += y
    if corrected:
        ria = 1.0 / ra if ra > 0.0 else 0.0
        rib = 1.0 / rb if rb > 0.0 else 0.0
    else:
        ria = 1.0 if va else 0.0
        rib = 1.0 if vb else 0.0
        ca = 1.0 if va else 0.0
        cb = 1.0 if vb else 0.0
    # rhs = s_c - R^T (rinv * s_r), scaled (``_cg_scale``), projected
    scale, inv_scale = _cg_scale(_wmax(max(max(abs(sra), abs(srb)), max(abs(sca), abs(scb)))))
    resa = (sca - _col_dot_warp(R, w, ia, va, ria * sra, rib * srb, n)) * scale
    resb = (scb - _col_dot_warp(R, w, ib, vb, ria * sra, rib * srb, n)) * scale
    mean = _wsum(resa + resb) / n
    resa = resa - mean if va else 0.0
    resb = resb - mean if vb else 0.0
    pa = resa
    pb = resb
    xa = 0.0
    xb = 0.0
    rs = _wsum(resa * resa + resb * resb)
    bnorm = math.sqrt(rs)
    thr = cg_tol * bnorm
    it = 0
    while bnorm > 0.0 and it < max_iter:
        qa = ria * _row_dot_warp(R, w, ia, va, pa, pb, n)
        qb = rib * _row_dot_warp(R, w, ib, vb, pa, pb, n)
        apa = ca * pa - _col_dot_warp(R, w, ia, va, qa, qb, n)
        apb = cb * pb - _col_dot_warp(R, w, ib, vb, qa, qb, n)
        mean = _wsum(apa + apb) / n
        apa = apa - mean if va else 0.0
        apb = apb - mean if vb else 0.0
        pAp = _wsum(pa * apa + pb * apb)
        if not (pAp > 0.0):
            break
        alpha = rs / pAp
        xa += alpha * pa
        xb += alpha * pb
        resa -= alpha * apa
        resb -= alpha * apb
        rs_new = _wsum(resa * resa + resb * resb)
        it += 1
        beta = rs_new / rs
        rs = rs_new
        if math.sqrt(rs_new) <= thr:
            break
        pa = resa + beta * pa
        pb = resb + beta * pb
    if lane == 0:
        iters[w] = it
        relres[w] = math.sqrt(rs) / bnorm if bnorm > 0.0 else 0.0
    xa *= inv_scale
    xb *= inv_scale
    ua = ria * (sra - _row_dot_warp(R, w, ia, va, xa, xb, n))
    ub = rib * (srb - _row_dot_warp(R, w, ib, vb, xa, xb, n))
    for i in range(n):
        ui = _bcast(ua, ub, i)
        if va:
            dX[w, i, ia] = (G[w, i, ia] - ui - xa) * R[w, i, ia]
        if vb:
            dX[w, i, ib] = (G[w, i, ib] - ui - xb) * R[w, i, ib]


# --------------------------------------------------------------------------
# unrolled backward
# --------------------------------------------------------------------------
_FB, _GB, _GBN = range(3)


@kernel(_sigs("void({T}[:, :, ::1], {T}[:, :, ::1], int64, float64, float64[:, :, ::1], "
              "float64[:, :, ::1], float64[:, :, ::1], float64[:, :, ::1], float64[:, :, ::1], "
              "{T}[:, :, ::1], int64[::1])"), hot=True)
def unrolled_backward_thread(X, G, n_iter, tol, F, Gh, Sh, V, D, dX, iters):
    """One thread per matrix: the CPU's ``unrolled_backward`` for matrix b
    (history F, Gh, the line shifts Sh, the adjoint vectors V and the n x n
    float64 accumulator D[i, j, b] in batch-minor scratch).  The sweep runs
    on the shifted entries, as the forward: the shifts are constants of the
    iteration (S_K does not depend on them), so dX is the gradient w.r.t.
    the shifted entries."""
    b = cuda.grid(1)
    if b >= X.shape[0]:
        return
    n = X.shape[1]
    shifted = _thread_shifts(X, b, Sh)
    K = _forward_thread(X, b, n_iter, tol, F, Gh, True, Sh, shifted)
    iters[b] = K
    for j in range(n):
        V[_GB, j, b] = 0.0
    for i in range(n):
        s = 0.0
        fi = F[K - 1, i, b]
        for j in range(n):
            h = G[b, i, j] * math.exp(_xs(X, b, i, j, Sh, shifted) + fi + Gh[K, j, b])
            D[i, j, b] = h
            s += h
            V[_GB, j, b] += h
        V[_FB, i, b] = s
    for k in range(K, 0, -1):
        for j in range(n):
            V[_GBN, j, b] = 0.0
        for i in range(n):
            fi = F[k - 1, i, b]
            s = 0.0
            for j in range(n):
                P = math.exp(_xs(X, b, i, j, Sh, shifted) + fi + Gh[k, j, b])
                s += P * V[_GB, j, b]
                D[i, j, b] -= V[_GB, j, b] * P
            fbi = (V[_FB, i, b] if k == K else 0.0) - s
            for j in range(n):
                Q = math.exp(_xs(X, b, i, j, Sh, shifted) + fi + Gh[k - 1, j, b])
                D[i, j, b] -= fbi * Q
                V[_GBN, j, b] -= Q * fbi
        for j in range(n):
            V[_GB, j, b] = V[_GBN, j, b]
    for i in range(n):
        for j in range(n):
            dX[b, i, j] = D[i, j, b]


# --------------------------------------------------------------------------
# host launchers (the contract of numbaot/cpu/implicit.py)
# --------------------------------------------------------------------------
def _grid(n, tpb):
    return max(1, -(-n // tpb))


def use_warp(n):
    """True when matrices of size n run one warp per matrix."""
    return int(_config.CUDA_IMPLICIT_WARP_MIN_N) <= n <= _MAX_WARP_N


def _warp_launch(B):
    wpb = max(1, int(_config.CUDA_IMPLICIT_WARPS_PER_BLOCK))
    return _grid(B, wpb), 32 * wpb


def _thread_launch(B):
    tpb = int(_config.CUDA_IMPLICIT_THREADS)
    return _grid(B, tpb), tpb


def count_invalid(x, nonneg):
    """(number of NaN/inf entries, number of negative entries if ``nonneg``
    else 0) of the C-contiguous device array x (any shape); a device
    reduction, only the two counts come back."""
    if x.size == 0:
        return 0, 0
    res = cuda.to_device(np.zeros(2, dtype=np.int64))
    tpb = int(_config.CUDA_THREADS)
    grid = max(1, min(int(_config.CUDA_CHECK_MAX_BLOCKS), -(-x.size // tpb)))
    count_invalid_kernel[grid, tpb](x.reshape(x.size), int(bool(nonneg)), res)
    out = res.copy_to_host()
    return int(out[0]), int(out[1])


def operator_forward(X, n_iter, tol):
    """R = S_K(X) for the (B, n, n) device array X; returns (R, iters)."""
    B, n, _ = X.shape
    R = cuda.device_array((B, n, n), dtype=X.dtype)
    iters = cuda.device_array(B, dtype=np.int64)
    if B == 0:
        return R, iters
    if use_warp(n):
        grid, block = _warp_launch(B)
        operator_forward_warp[grid, block](X, n_iter, float(tol), R, iters)
    else:
        F = cuda.device_array((2, n, B), dtype=np.float64)
        Gh = cuda.device_array((2, n, B), dtype=np.float64)
        Sh = cuda.device_array((2, n, B), dtype=np.float64)
        grid, block = _thread_launch(B)
        operator_forward_thread[grid, block](X, n_iter, float(tol), F, Gh, Sh, R, iters)
    return R, iters


def implicit_backward(R, G, corrected, max_iter, cg_tol):
    """dX, iters, relres, n_nonfinite, n_negative of the implicit backward
    (see the CPU launcher): the values of R and G are counted on the device
    first (the kernel is not run when they are invalid), then the result's
    (a non-finite dX: an overflow); dX is meaningless unless both counts
    are 0."""
    B, n, _ = R.shape
    dX = cuda.device_array((B, n, n), dtype=R.dtype)
    iters = cuda.device_array(B, dtype=np.int64)
    relres = cuda.device_array(B, dtype=np.float64)
    if B == 0:
        return dX, iters, relres, 0, 0
    if G.dtype != R.dtype:
        raise TypeError(f"grad_R must have R's dtype on the GPU; got {G.dtype} and {R.dtype}")
    bad_r, neg_r = count_invalid(R, True)
    bad_g, _ = count_invalid(G, False)
    if bad_r or bad_g or neg_r:
        return dX, iters, relres, bad_r + bad_g, neg_r
    if use_warp(n):
        grid, block = _warp_launch(B)
        implicit_backward_warp[grid, block](R, G, int(bool(corrected)), int(max_iter),
                                            float(cg_tol), dX, iters, relres)
    else:
        S = cuda.device_array((9, n, B), dtype=np.float64)
        grid, block = _thread_launch(B)
        implicit_backward_thread[grid, block](R, G, int(bool(corrected)), int(max_iter),
                                              float(cg_tol), S, dX, iters, relres)
    return dX, iters, relres, count_invalid(dX, False)[0], 0


def unrolled_backward(X, G, n_iter, tol):
    """dX, iters of the unrolled backward (one thread per matrix; scratch
    16 (n_iter + 1) n B + 8 n^2 B + 40 n B bytes)."""
    B, n, _ = X.shape
    dX = cuda.device_array((B, n, n), dtype=X.dtype)
    iters = cuda.device_array(B, dtype=np.int64)
    if B == 0:
        return dX, iters
    if G.dtype != X.dtype:
        raise TypeError(f"grad_R must have X's dtype on the GPU; got {G.dtype} and {X.dtype}")
    F = cuda.device_array((n_iter, n, B), dtype=np.float64)
    Gh = cuda.device_array((n_iter + 1, n, B), dtype=np.float64)
    Sh = cuda.device_array((2, n, B), dtype=np.float64)
    V = cuda.device_array((3, n, B), dtype=np.float64)
    D = cuda.device_array((n, n, B), dtype=np.float64)
    grid, block = _thread_launch(B)
    unrolled_backward_thread[grid, block](X, G, n_iter, float(tol), F, Gh, Sh, V, D, dX,
                                          iters)
    return dX, iters


#: The launcher contract shared with numbaot.cpu.implicit (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("count_invalid", "operator_forward", "implicit_backward", "unrolled_backward")
