"""CPU kernels of the implicit backward's conjugate gradient on lanes: the
generic path for n > max(IMPLICIT_UNROLL_SIZES) (``implicit_lanes``, CG in
``_cg_lanes``), and the fused value checks (``any_nonfinite``,
``any_negative``) that the generated kernels of smaller n use too
(``numbaot.cpu._implicit_unrolled``).  Layout and lane conventions:
``numbaot.cpu.implicit``.
"""
import math

import numpy as np
from numba import njit, prange

from .._config import INNER as _INNER
from .._config import JIT_OPTIONS

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)



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
def any_nonfinite(Zf, start, stop):
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
def any_out_of_band(Zf, start, stop, band):
    """1 if Zf[start:stop] holds an entry of magnitude above ``band`` or
    below 1 / band but not 0 (a matrix whose CG needs a scaled rhs: see
    ``cg_scale``, and whose dX may overflow), else 0.  One flat vectorised
    loop, as ``any_nonfinite`` (NaN compares false: not counted here)."""
    lo = 1.0 / band
    Zs = Zf[start:stop]
    ob = 0
    for k in range(Zs.shape[0]):
        a = abs(Zs[k])
        ob += (a > band) | ((a < lo) & (a > 0.0))
    return 1 if ob > 0 else 0


@njit(inline="always", **_SER)
def cg_scale(m, band):
    """(s, 1 / s) for the largest magnitude m of a matrix's marginals of
    G*R: (1, 1) inside [1 / band, band] (or m = 0, NaN, inf), else the power
    of two s with m s in [0.5, 1) (exponent clamped to +-1022, so that s and
    1 / s are finite).  The implicit backward is linear in G: the CG runs
    on s * rhs, whose squared norms then neither underflow nor overflow, and
    the solution is multiplied by 1 / s; both products are exact (powers of
    two) unless they leave float64's normal range."""
    if not ((m > band) or ((m < 1.0 / band) and (m > 0.0))) or m == np.inf:
        return 1.0, 1.0
    e = max(-1022, min(1022, math.frexp(m)[1]))
    return math.ldexp(1.0, -e), math.ldexp(1.0, e)


@njit(inline="always", **_SER)
def any_negative(Zf, start, stop):
    """1 if Zf[start:stop] (R's lane copy) holds a negative entry (an error),
    else 0.  A count of comparisons vectorises (Numba's NaN-aware ``min``
    does not); indices from 0 as in ``any_nonfinite``."""
    Zs = Zf[start:stop]
    neg = 0
    for k in range(Zs.shape[0]):
        neg += Zs[k] < 0.0
    return 1 if neg > 0 else 0


@njit(**_SER, **_INNER)
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


@njit(**_SER, **_INNER)
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



@njit(**_PAR)
def implicit_lanes(R, G, corrected, max_iter, cg_tol, band, lanes, dX):
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
        ng = any_negative(W.reshape(-1), 0, n * n * L)
        nf = (any_nonfinite(sr.reshape(-1), 0, n * L)
              + any_nonfinite(sc.reshape(-1), 0, n * L))
        # rhs = s_c - R^T diag(rinv) s_r
        for j in range(n):
            for c in range(L):
                rhs[j, c] = sc[j, c]
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    rhs[j, c] -= W[i, j, c] * (rinv[i, c] * sr[i, c])
        # the CG on a rhs scaled by a power of two in the lanes whose
        # marginals leave the band (``cg_scale``)
        ob = (any_out_of_band(sr.reshape(-1), 0, n * L, band)
              + any_out_of_band(sc.reshape(-1), 0, n * L, band))
        if ob:
            for c in range(L):
                m = 0.0
                for i in range(n):
                    m = max(m, abs(sr[i, c]), abs(sc[i, c]))
                scale = cg_scale(m, band)[0]
                for j in range(n):
                    rhs[j, c] *= scale
        _cg_lanes(W, rinv, cvec, rhs, v, res, p, Ap, q, max_iter, cg_tol,
                  rs, thr, pAp, active, its, rr, tmp)
        if ob:
            # the solution scaled back (1 / s again from the marginals)
            for c in range(L):
                m = 0.0
                for i in range(n):
                    m = max(m, abs(sr[i, c]), abs(sc[i, c]))
                inv_s = cg_scale(m, band)[1]
                for j in range(n):
                    v[j, c] *= inv_s
        # u = diag(rinv) (s_r - R v), kept in q
        for i in range(n):
            for c in range(L):
                tmp[c] = 0.0
            for j in range(n):
                for c in range(L):
                    tmp[c] += W[i, j, c] * v[j, c]
            for c in range(L):
                q[i, c] = rinv[i, c] * (sr[i, c] - tmp[c])
        nf += (any_nonfinite(q.reshape(-1), 0, n * L)
               + any_nonfinite(v.reshape(-1), 0, n * L))
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
        if ob:   # large marginals: dX itself may overflow (also in its dtype)
            nf += any_nonfinite(dX.reshape(-1), b0 * n * n, (b0 + nl) * n * n)
        n_nf += nf
        n_neg += ng
    return iters, relres, n_nf, n_neg
