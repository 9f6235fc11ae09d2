"""CPU kernels of the Sinkhorn operator's forward, R = S_K(X), and of the
unrolled backward (reverse mode through the same K iterations): the entry
kernels ``operator_forward`` and ``unrolled_backward`` (re-exported by
``numbaot.cpu.implicit``) and the lane helpers they share.

Log-domain scalings: R = exp(X + f 1^T + 1 g^T).  One Sinkhorn iteration is a
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
with the exact max.  Layout and lane conventions: ``numbaot.cpu.implicit``.

Rows and columns at a large near-constant value (``_shift_lines``): a row
whose entries all lie within a factor 2 of its maximum x, |x| > _SHIFT_MIN
(a row at -1e14), is shifted by x before the iterations (exactly, and S_K
is invariant under it); then likewise a column, with the initial column
potential g^0 = x instead of 0, which leaves every iterate as it was.  The
potentials then stay O(1) instead of ~ -x, whose rounding (|x| * 1.1e-16)
cost R its double stochasticity (5 % of its sums at -1e15).  The test rides
on the load pass's maxima: only a work item with a row or column maximum
beyond _SHIFT_MIN in magnitude takes a minimum pass, and only one with such
a line the shifts; the others run as before, bit for bit.
"""
import numpy as np
from numba import njit, prange, typeof, types

from .._config import INNER as _INNER
from .._config import (IMPLICIT_ABSORB, IMPLICIT_LOG_ONLY, IMPLICIT_SHIFT_MIN,
                       IMPLICIT_SUM_FLOOR, JIT_OPTIONS)
from ._math import fast_exp, fast_exp_ftz, fast_log
from ._pointer import NONE as _NONE
from ._pointer import call_at, jit_address

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)

#: a shifted exp-sum below this is recomputed with the exact max shift
#: (``_config.IMPLICIT_SUM_FLOOR``)
_SUM_FLOOR = IMPLICIT_SUM_FLOOR

#: scalings u, v leaving [1/_ABSORB, _ABSORB] are absorbed into the log
#: potentials (``_config.IMPLICIT_ABSORB``)
_ABSORB = IMPLICIT_ABSORB

#: lanes whose absorbed potentials exceed this run the log-domain half-steps
#: (``_config.IMPLICIT_LOG_ONLY``)
_LOG_ONLY = IMPLICIT_LOG_ONLY

#: rows/columns whose maximum exceeds this in magnitude, entries within a
#: factor 2 of it, are shifted by it (``_config.IMPLICIT_SHIFT_MIN``)
_SHIFT_MIN = IMPLICIT_SHIFT_MIN


# --------------------------------------------------------------------------
# lane layout: a work item holds L = lanes_for(n) matrices side by side
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
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


@njit(**_SER)
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


@njit(**_SER, **_INNER)
def _maybe_shift_lines(W, xr, xc, rn, cn, g0):
    """``_shift_lines`` for the work items that may hold a line to shift:
    one whose row or column maximum exceeds _SHIFT_MIN in magnitude (an
    ordinary item pays 2 n L comparisons).  Returns True when a column was
    shifted (g0 then holds the shifts; g0 is not written otherwise).

    Called at the top of ``_forward_lanes``, not in the work item's body of
    ``operator_forward``: there (inlined or not) the test alone made the
    whole forward 15-20 % slower at n = 16 (measured, 1 thread, CPU time),
    through the code generated for that body, not through its own work."""
    L = g0.shape[1]
    n = W.shape[0]
    n_big = 0
    for i in range(n):
        for c in range(L):
            n_big += max(abs(xr[i, c]), abs(xc[i, c])) > _SHIFT_MIN
    if n_big == 0:
        return False
    return _shift_lines(W, xr, xc, rn, cn, g0)


@njit(**_SER)
def _line_shift(mx, mn):
    """The shift of a row (column) with maximum mx and minimum mn: mx when
    |mx| > _SHIFT_MIN and every entry lies within a factor 2 of mx, so that
    each x - mx is exact (Sterbenz's lemma), else 0."""
    big = ((mx > _SHIFT_MIN) and (mn >= 0.5 * mx)) or ((mx < -_SHIFT_MIN) and (mn >= 2.0 * mx))
    return mx if big else 0.0


@njit(**_SER, **_INNER)
def _shift_lines(W, xr, xc, rn, cn, g0):
    """Shift the large near-constant rows, then columns, of the lanes of W
    by their maxima (``_line_shift``), in place and exactly.

    S_K(X) = S_K(X - s 1^T) for any row shift s (each row step recomputes
    f); a column shift t changes the iterates unless the iteration starts
    from g^0 = t instead of 0: g0[j, c] = t_j (0 for the other columns).
    xr, xc (the row and column maxima of W on entry) are updated to the
    maxima of the shifted W (a shifted line's is 0); rn, cn: workspaces
    (the row and column minima).  Returns True when a column was shifted."""
    L = g0.shape[1]
    n = W.shape[0]
    for i in range(n):
        for c in range(L):
            rn[i, c] = np.inf
            cn[i, c] = np.inf
    for i in range(n):
        for j in range(n):
            for c in range(L):
                w = W[i, j, c]
                rn[i, c] = min(rn[i, c], w)
                cn[j, c] = min(cn[j, c], w)
    n_rows = 0
    for i in range(n):
        for c in range(L):
            t = _line_shift(xr[i, c], rn[i, c])
            rn[i, c] = t
            n_rows += t != 0.0
    if n_rows:
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    W[i, j, c] -= rn[i, c]
        for i in range(n):
            for c in range(L):
                xr[i, c] -= rn[i, c]
                xc[i, c] = -np.inf
                cn[i, c] = np.inf
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    w = W[i, j, c]
                    xc[j, c] = max(xc[j, c], w)
                    cn[j, c] = min(cn[j, c], w)
    n_cols = 0
    for j in range(n):
        for c in range(L):
            t = _line_shift(xc[j, c], cn[j, c])
            g0[j, c] = t
            n_cols += t != 0.0
    if n_cols:
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    W[i, j, c] -= g0[j, c]
        for j in range(n):
            for c in range(L):
                xc[j, c] -= g0[j, c]
                xr[j, c] = -np.inf
        for i in range(n):
            for j in range(n):
                for c in range(L):
                    xr[i, c] = max(xr[i, c], W[i, j, c])
    return n_cols > 0


@njit(**_SER, **_INNER)
def _lane_max(v, out):
    """out[c] = max_k v[k, c]."""
    L = out.shape[0]
    for c in range(L):
        out[c] = -np.inf
    for k in range(v.shape[0]):
        for c in range(L):
            out[c] = max(out[c], v[k, c])


@njit(**_SER, **_INNER)
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



@njit(**_SER, **_INNER)
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


@njit(**_SER, **_INNER)
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


@njit(**_SER, **_INNER)
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


@njit(**_SER, **_INNER)
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


@njit(**_SER, **_INNER)
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


@njit(**_SER, **_INNER)
def _log_scaling(a, s, out):
    """out = a + log s (the log potential of an absorbed part a and a
    scaling s)."""
    for i in range(a.shape[0]):
        for c in range(a.shape[1]):
            out[i, c] = a[i, c] + fast_log(s[i, c])


@njit(**_SER, **_INNER)
def _forward_lanes(W, xr, xc, g0, n_iter, tol, F, Gh, hist, Kt, fa, ga, u, v, s,
                   lg, acc, acc2, vmax, bad, Kc, ff, gf):
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

    First W's large near-constant lines are shifted, in place
    (``_maybe_shift_lines``: xr, xc updated; g0, a workspace, receives the
    column shifts): the iteration starts from g^0 = 0, or g^0 = g0 when a
    column was shifted.

    With ``hist`` the log-scalings of every iteration are kept: F[k-1] = f^k
    (k = 1..K), Gh[k] = g^k (k = 0..K, g^0 = 0 or g0).  Kc[c] = K, the iteration
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
    col_shift = _maybe_shift_lines(W, xr, xc, lg, acc2, g0)
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
    if col_shift:
        # g^0 = g0 (zero in the unshifted columns and lanes):
        # fa = -max_j (W_ij + g0_j), ga = g0, Kt = exp(W + fa 1^T + 1 ga^T)
        for i in range(n):
            for c in range(L):
                acc[c] = -np.inf
            for j in range(n):
                for c in range(L):
                    acc[c] = max(acc[c], W[i, j, c] + g0[j, c])
            for c in range(L):
                fa[i, c] = -acc[c]
                ga[i, c] = g0[i, c]
                bad[c] = 1.0
        _stabilised_kernel(W, fa, ga, bad, Kt)
        if hist:
            for j in range(n):
                for c in range(L):
                    Gh[0, j, c] = g0[j, c]
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


_A1 = types.Array(types.float64, 1, "C")
_A2 = types.Array(types.float64, 2, "C")
_A3 = types.Array(types.float64, 3, "C")
#: the signature of ``_forward_lanes`` on the workspaces the work items
#: allocate (``forward_item``, ``unrolled_item``), for its address
FORWARD_LANES_SIGNATURE = types.none(
    _A3, _A2, _A2, _A2, types.int64, types.float64, _A3, _A3, types.boolean, _A3, _A2, _A2,
    _A2, _A2, _A2, _A2, _A1, _A2, _A1, _A1, types.Array(types.int64, 1, "C"), _A2, _A2)


_LANES_ADDRESS = []


def forward_lanes_address():
    """The ``jit_address`` of ``_forward_lanes`` (``lanes_addr`` of the
    work items); compiles it on the first request (kept here: hashing its
    23-argument signature for ``jit_address``'s table costs microseconds)."""
    if not _LANES_ADDRESS:
        _LANES_ADDRESS.append(jit_address(_forward_lanes, FORWARD_LANES_SIGNATURE))
    return _LANES_ADDRESS[0]


@njit(**_SER, **_INNER)
def forward_item(lanes_addr, X, b0, n_iter, tol, L, R, iters):
    """``operator_forward``'s work item: matrices b0 .. b0 + L - 1 of X (the
    lanes past B repeat the last one; their results are dropped), run by
    ``_forward_lanes`` at ``lanes_addr`` (its ``jit_address`` for
    ``FORWARD_LANES_SIGNATURE``: its code is then not linked and optimised
    again here); R[b], iters[b] written for those matrices.  Called through
    its address (``numbaot.cpu._pointer``): its signature is
    ``forward_item_signature``'s."""
    B = X.shape[0]
    n = X.shape[1]
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
    g0 = np.empty((n, L))
    acc = np.empty(L)
    vmax = np.empty(L)
    bad = np.empty(L)
    Kc = np.empty(L, dtype=np.int64)
    _load(X, b0, B, W, xr, xc)
    call_at(lanes_addr, _NONE, W, xr, xc, g0, n_iter, tol, F, Gh, np.bool_(False), Kt, fa, ga,
            u, v, s, lg, acc, acc2, vmax, bad, Kc, ff, gf)
    nl = min(L, B - b0)
    for c in range(nl):
        iters[b0 + c] = Kc[c]
    for i in range(n):
        for j in range(n):
            for c in range(nl):
                R[b0 + c, i, j] = fast_exp(W[i, j, c] + ff[i, c] + gf[j, c])


def forward_item_signature(X, R, iters):
    """The Numba signature of ``forward_item`` for these arrays (their
    exact types: dtype, layout, read-only flag)."""
    return types.none(types.int64, typeof(X), types.int64, types.int64, types.float64,
                      types.int64, typeof(R), typeof(iters))


@njit(**_PAR)
def operator_forward(item_addr, lanes_addr, X, n_iter, tol, lanes, R, iters):
    """R[b] = S_K(X[b]) = exp(X + f 1^T + 1 g^T) after K Sinkhorn iterations,
    K = n_iter, or fewer when tol >= 0 (see ``_forward_lanes``); iters[b] = K.
    ``item_addr``: the ``jit_address`` of ``forward_item`` for the
    signature ``forward_item_signature(X, R, iters)`` (its code is not
    linked into this parallel loop's three gufunc layers:
    ``numbaot.cpu._pointer``); ``lanes_addr``: that of ``_forward_lanes``
    for ``FORWARD_LANES_SIGNATURE``.

    X, R: (B, n, n); iters: (B,) int64.
    """
    L = lanes
    B = X.shape[0]
    n_items = (B + L - 1) // L
    for t in prange(n_items):
        call_at(item_addr, _NONE, lanes_addr, X, np.int64(t * L), np.int64(n_iter),
                np.float64(tol), np.int64(L), R, iters)


# --------------------------------------------------------------------------
# unrolled backward (exact gradient of the finite-iteration forward)
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
def unrolled_item(lanes_addr, X, G, b0, n_iter, tol, L, dX, iters):
    """``unrolled_backward``'s work item: matrices b0 .. b0 + L - 1 (the
    lanes past B repeat the last one; their results are dropped); dX[b],
    iters[b] written for those matrices; ``lanes_addr``: see
    ``forward_item``.  Called through its address
    (``numbaot.cpu._pointer``): its signature is
    ``unrolled_item_signature``'s."""
    B = X.shape[0]
    n = X.shape[1]
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
    g0 = np.empty((n, L))
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
    call_at(lanes_addr, _NONE, W, xr, xc, g0, n_iter, tol, F, Gh, np.bool_(True), Kt, fa, ga,
            u, v, s, lg, acc, acc2, vmax, bad, Kc, ff, gf)
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


def unrolled_item_signature(X, G, dX, iters):
    """The Numba signature of ``unrolled_item`` for these arrays."""
    return types.none(types.int64, typeof(X), typeof(G), types.int64, types.int64,
                      types.float64, types.int64, typeof(dX), typeof(iters))


@njit(**_PAR)
def unrolled_backward(item_addr, lanes_addr, X, G, n_iter, tol, lanes, dX, iters):
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
    ``item_addr``: the ``jit_address`` of ``unrolled_item`` for
    ``unrolled_item_signature(X, G, dX, iters)``; ``lanes_addr``: see
    ``operator_forward``.
    """
    L = lanes
    B = X.shape[0]
    n_items = (B + L - 1) // L
    for t in prange(n_items):
        call_at(item_addr, _NONE, lanes_addr, X, G, np.int64(t * L), np.int64(n_iter),
                np.float64(tol), np.int64(L), dX, iters)
