"""Balanced Sinkhorn on small problems: the whole solve in one serial call.

At minibatch sizes (a few hundred points) an iteration is a few microseconds
of arithmetic, while the blocked path of ``numbaot.cpu.sinkhorn`` pays a
Python round trip per block of ten iterations and a parallel-region launch
per pass (waking the worker threads, which stalls behind any other busy
thread pool).  The kernels here run every iteration, POT's convergence check
every 10 iterations and POT's failure rule inside one compiled function on
the calling thread, and return the record that ``numbaot._loops`` turns into
POT's ``log``, verbose table and warnings.  ``numbaot.cpu.sinkhorn`` uses
them for states of at most ``_config.SMALL_MAX_ENTRIES`` entries.

Same mathematics and the same iterates (to rounding: the sums are taken in
another order) as the blocked kernels:

* Sinkhorn-Knopp (Cuturi 2013, Algorithm 1): K = exp(c M) with c = -1/reg,
  then per iteration v = b / (K^T u), u = a / (K v); the pass that forms
  (K v)_i also accumulates K^T u for the next iteration and the marginal
  error ||v * K^T u - b||_2 (POT's ``sinkhorn_knopp``).
* log domain (Peyre & Cuturi 2019, Remark 4.23): v = log b - LSE_i(c M_ij +
  u_i), u = log a - LSE_j(c M_ij + v_j); the row pass keeps each row's
  exponentials and adds the new plan's entries into the column sums q_j,
  which give the error ||q - b||_2 and the next v_j = log b_j - log q_j + v_j
  (an exact column logsumexp where q_j underflowed).

Arrays are problem-major, float64 vectors: ``u`` (n_problems, dim_a), ``v``
(n_problems, dim_b); a weight array with one row is shared by all problems.
``M`` (dim_a, dim_b) is float32 or float64 and only read.
"""
import math

import numpy as np
from numba import njit

from .._config import INNER as _INNER
from .._config import JIT_OPTIONS, ROW_SUM_FLOOR, UNDERFLOW_RTOL
from ._math import fast_exp, fast_exp_ftz, fast_log, fmax, fmin

_SER = dict(JIT_OPTIONS)

#: the smallest normal float64 (``fast_log``'s domain starts there)
_NORMAL_MIN = 2.2250738585072014e-308

#: the status codes of a finished run (``numbaot._loops.knopp_report``)
RAN_OUT, CONVERGED, FAILED = 0, 1, 2


@njit(**_SER, **_INNER)
def _in_dtype_of(M, x):
    """x rounded to M's dtype (the result dtype), as a float64: the errors
    are compared with stopThr as POT's arithmetic would hold them (and as
    ``numbaot._loops`` compares them)."""
    if M.itemsize == 4:
        return np.float64(np.float32(x))
    return x


# --------------------------------------------------------------------------
# Sinkhorn-Knopp
# --------------------------------------------------------------------------
@njit(**_SER, inline="always")
def knopp_small_run(M, c, a, b, u, v, numItermax, stopThr, errs, Kmat, q, kernel_ready=False):
    """POT's ``sinkhorn_knopp`` loop, start to finish, in place.

    Forms K = exp(c M) in ``Kmat`` (dim_a, dim_b, M's dtype) and iterates
    v = b / q, u = a / (K v), q = K^T u from the scalings ``u``, ``v``.  At
    ii % 10 == 0 the error ||v * q - b||_2 over all problems is stored in
    ``errs`` (>= numItermax // 10 + 1 entries) and the run stops when it is
    below ``stopThr``.  As POT, an iteration that meets a zero in K^T u or a
    NaN/inf in u, v is undone and the run stops.

    Returns (ii, n_errs, status): the last iteration index (0 when
    numItermax is 0), the number of errors stored and RAN_OUT, CONVERGED
    or FAILED (then ii is the failing iteration).  ``q`` (n_problems, dim_b)
    holds K^T u of the final u.  With ``kernel_ready`` K is already in
    ``Kmat``.  Inlined into :func:`knopp_small_call` (Numba's
    ``inline="always"``; a call from Python compiles it as a function): linked
    instead, its code was optimised twice on a first call (200^2: 2.25 -> 1.9
    s of compile CPU, runs 0.90-1.0 of before from 16^2 to 200^2, alternating
    pairs).  ``log_small_run`` is not inlined: 0.25 s less to compile, but
    its calls ran 1.5-4 % slower."""
    n, m = M.shape
    P = u.shape[0]
    shared_a = a.shape[0] == 1
    if not kernel_ready:
        for i in range(n):
            for j in range(m):
                Kmat[i, j] = fast_exp(c * M[i, j])
    uprev = np.empty((P, n))
    vprev = np.empty((P, m))
    for k in range(P):
        for j in range(m):
            q[k, j] = 0.0
        for i in range(n):
            uki = u[k, i]
            for j in range(m):
                q[k, j] += Kmat[i, j] * uki
    ne = 0
    ii = 0
    for ii in range(numItermax):
        failed = False
        for k in range(P):
            ka = 0 if shared_a else k
            for i in range(n):
                uprev[k, i] = u[k, i]
            for j in range(m):
                vprev[k, j] = v[k, j]
                if q[k, j] == 0.0:
                    failed = True
                v[k, j] = b[k, j] / q[k, j]
                q[k, j] = 0.0
            knopp_rows(Kmat, a, ka, v, u, q, k, np.float64(1.0), np.bool_(False), np.int64(0),
                       Kmat.shape[0])
        if not failed:
            failed = not (_all_finite(u) and _all_finite(v))
        if failed:
            for k in range(P):
                for i in range(n):
                    u[k, i] = uprev[k, i]
                for j in range(m):
                    v[k, j] = vprev[k, j]
            return ii, ne, FAILED
        if ii % 10 == 0:
            acc = 0.0
            for k in range(P):
                for j in range(m):
                    d = v[k, j] * q[k, j] - b[k, j]
                    acc += d * d
            err = _in_dtype_of(M, math.sqrt(acc))
            errs[ne] = err
            ne += 1
            if err < stopThr:
                return ii, ne, CONVERGED
    return ii, ne, RAN_OUT


@njit(**_SER, **_INNER)
def _row_scaling(a, s, clamp):
    """a / s, with ``clamp`` at most 1 (np.minimum's rule: NaN stays NaN)."""
    x = a / s
    return 1.0 if clamp and x > 1.0 else x


@njit(**_SER, **_INNER)
def knopp_rows(Kmat, a, ka, v, u, q, k, scale, clamp, i0, i1):
    """For the rows i0 <= i < i1: u[k, i] = a[ka, i] / (scale (K v_k)_i)
    (with ``clamp``: at most 1) and q[k] += the sums over these rows of
    K_ij u_ki (q zeroed before), rows four at a time: each load of v_j and
    each load/store of q_j serves four rows (the loop is bound by loads and
    stores, not by arithmetic).  Balanced Sinkhorn: scale 1, no clamp;
    entropic partial OT (``numbaot.cpu.partial``): scale s, clamped.  The
    one-call paths pass every row; the blocked ``knopp_fused_pass`` a
    chunk's rows."""
    m = Kmat.shape[1]
    i = i0
    while i + 4 <= i1:
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for j in range(m):
            vj = v[k, j]
            s0 += Kmat[i, j] * vj
            s1 += Kmat[i + 1, j] * vj
            s2 += Kmat[i + 2, j] * vj
            s3 += Kmat[i + 3, j] * vj
        u0 = _row_scaling(a[ka, i], scale * s0, clamp)
        u1 = _row_scaling(a[ka, i + 1], scale * s1, clamp)
        u2 = _row_scaling(a[ka, i + 2], scale * s2, clamp)
        u3 = _row_scaling(a[ka, i + 3], scale * s3, clamp)
        u[k, i] = u0
        u[k, i + 1] = u1
        u[k, i + 2] = u2
        u[k, i + 3] = u3
        for j in range(m):
            q[k, j] += (Kmat[i, j] * u0 + Kmat[i + 1, j] * u1) + (Kmat[i + 2, j] * u2
                                                                 + Kmat[i + 3, j] * u3)
        i += 4
    while i < i1:
        s0 = 0.0
        for j in range(m):
            s0 += Kmat[i, j] * v[k, j]
        u0 = _row_scaling(a[ka, i], scale * s0, clamp)
        u[k, i] = u0
        for j in range(m):
            q[k, j] += Kmat[i, j] * u0
        i += 1


@njit(**_SER)
def knopp_small_pass(Kmat, a, v, u, q):
    """``numbaot.cpu.sinkhorn.knopp_fused_pass`` of a small K on the calling
    thread: u[k, i] = a[k, i] / (K v_k)_i and q = K^T u for every problem k
    (``a`` may have one shared row), by :func:`knopp_rows` (no chunks, no
    parallel region; the same iterate to rounding)."""
    shared_a = a.shape[0] == 1
    for k in range(v.shape[0]):
        for j in range(q.shape[1]):
            q[k, j] = 0.0
        ka = 0 if shared_a else k  # not in the call (see partial._small_run)
        knopp_rows(Kmat, a, ka, v, u, q, k, np.float64(1.0), np.bool_(False), np.int64(0),
                   Kmat.shape[0])


@njit(**_SER, **_INNER)
def _all_finite(x):
    ok = True
    for k in range(x.shape[0]):
        for j in range(x.shape[1]):
            ok &= np.isfinite(x[k, j])
    return ok


# --------------------------------------------------------------------------
# log domain
# --------------------------------------------------------------------------
@njit(**_SER)
def col_lse(M, c, u, out):
    """out[k, j] = LSE_i (c M[i, j] + u[k, i]) for every problem k and
    column j (``numbaot.cpu.sinkhorn.log_col_lse`` on the calling thread):
    the column maxima in one sweep of the rows, then the shifted
    exponentials in a second, so that the loops run along the rows of M and
    vectorise across the columns (each column summed in row order; a
    column at a time read M with the stride of a row and stayed scalar, 18
    of a 64^2 ``sinkhorn_log`` call's 24 µs); -inf for a column of -inf
    terms.  The one-call log-domain solvers' column updates: the first one,
    and a column whose sum underflowed (balanced), every one (unbalanced)."""
    n, m = M.shape
    K = u.shape[0]
    mx = np.empty(m)
    sm = np.empty(m)
    for k in range(K):
        for j in range(m):
            mx[j] = -np.inf
            sm[j] = 0.0
        for i in range(n):
            g = u[k, i]
            for j in range(m):
                mx[j] = max(mx[j], c * M[i, j] + g)
        for i in range(n):
            g = u[k, i]
            if g == -np.inf:
                continue
            for j in range(m):
                sh = mx[j]
                e = fast_exp(c * M[i, j] + g - sh)
                sm[j] += e if sh > -np.inf else 0.0
        for j in range(m):
            out[k, j] = -np.inf if mx[j] == -np.inf else mx[j] + math.log(sm[j])


@njit(**_SER, **_INNER)
def row_exp_sum(M, i, c, v, k, sh, E, r):
    """E[r, j] = exp(c M_ij + v_kj - sh); returns their sum."""
    S = 0.0
    for j in range(M.shape[1]):
        e = fast_exp_ftz(c * M[i, j] + v[k, j] - sh)
        E[r, j] = e
        S += e
    return S


@njit(**_SER)
def log_small_run(M, c, loga, logb, b, u, v, q, numItermax, stopThr, errs, n_errs, niter,
                  converged):
    """POT's ``sinkhorn_log`` loop (a stopping test per problem), start to
    finish, in place.

    ``loga`` (1 or n_problems, dim_a), ``logb``, ``b`` (n_problems, dim_b):
    log weights (-inf for empty bins) and weights; ``u``, ``v``: the initial
    log-scalings, left as POT leaves them (u from the last v).  For each
    problem k still iterating, at ii % 10 == 0 the error ||q_k - b_k||_2
    (q = column sums of the plan exp(c M + u + v)) is stored in
    ``errs[k, n_errs[k]]`` (errs: (n_problems, >= numItermax // 10 + 1)) and
    the problem stops (``converged[k]``) when it is below ``stopThr``;
    ``niter[k]`` is its last iteration index; ``q`` (n_problems, dim_b)
    is left with each problem's last column sums.  Returns nothing.

    A row's logsumexp is shifted, after the first iteration, by the
    certified bound of ``numbaot.cpu.sinkhorn.log_fused_pass``: r_i = log
    a_i - u_old_i + max_j (v_j - v_old_j) >= LSE_j (c M_ij + v_j), so one
    pass with one exponential per entry suffices (no max pass: it cost
    0.4-0.6 ns per entry, as much as the exponentials); a row whose sum
    falls below ``ROW_SUM_FLOOR``, and every row of the first iteration,
    takes the exact row maximum."""
    n, m = M.shape
    P = u.shape[0]
    shared_a = loga.shape[0] == 1
    tiny = UNDERFLOW_RTOL
    vnext = np.empty((P, m))
    E = np.empty((1, m))
    # per row: the sum s and shift of its exponentials; per column: log q.
    # Their logarithms are taken after the sweep in loops that vectorise
    # (fast_log): a libm log per row and per column cost a quarter of an
    # iteration at 64^2
    rs = np.empty(n)
    rsh = np.empty(n)
    lq = np.empty(m)
    col_scratch = np.empty((P, m))
    # exp(log a_i), the row weights of the column sums, once (not a libm
    # exp per row and iteration)
    ea = np.empty(loga.shape)
    for ka in range(loga.shape[0]):
        for i in range(n):
            ea[ka, i] = math.exp(loga[ka, i])
    col_lse(M, c, u, vnext)
    for k in range(P):
        for j in range(m):  # logb - LSE; -inf for an empty bin, +inf for an empty column
            lse = vnext[k, j]
            vnext[k, j] = -np.inf if logb[k, j] == -np.inf else logb[k, j] - lse
        n_errs[k] = 0
        niter[k] = 0
        converged[k] = False
    n_active = P
    for ii in range(numItermax):
        for k in range(P):
            if converged[k]:
                continue
            ka = 0 if shared_a else k
            dv_max = -np.inf
            for j in range(m):
                x = vnext[k, j]
                if x > -np.inf:
                    dv_max = max(dv_max, x - v[k, j])
                v[k, j] = x
                q[k, j] = 0.0
            shift_ok = ii > 0 and dv_max > -np.inf
            for i in range(n):
                la = loga[ka, i]
                if la == -np.inf:
                    rs[i] = 1.0
                    rsh[i] = np.inf  # u = -inf below
                    continue
                s = 0.0
                mx = la - u[k, i] + dv_max
                if shift_ok:
                    s = row_exp_sum(M, i, c, v, k, mx, E, np.int64(0))
                if not s > ROW_SUM_FLOOR:
                    mx = -np.inf
                    for j in range(m):  # fmax: a reduction that vectorises
                        mx = fmax(mx, c * M[i, j] + v[k, j])
                    s = row_exp_sum(M, i, c, v, k, mx, E, np.int64(0))
                rs[i] = s  # in [ROW_SUM_FLOOR, m]: fast_log's domain
                rsh[i] = mx - la
                alpha = ea[ka, i] / s
                for j in range(m):
                    q[k, j] += E[0, j] * alpha
            for i in range(n):
                u[k, i] = -rsh[i] - fast_log(rs[i])
            # log q where it is a normal number (fast_log's domain)
            for j in range(m):
                lq[j] = fast_log(max(q[k, j], _NORMAL_MIN))
            redo = False
            for j in range(m):
                if logb[k, j] == -np.inf:
                    vnext[k, j] = -np.inf
                elif q[k, j] > tiny * b[k, j] and q[k, j] >= _NORMAL_MIN:
                    vnext[k, j] = logb[k, j] - lq[j] + v[k, j]
                else:
                    redo = True
            if redo:  # a column sum underflowed (rare): its exact logsumexp
                col_lse(M, c, u, col_scratch)  # (every problem's: one kernel to compile)
                for j in range(m):
                    if logb[k, j] > -np.inf and not (q[k, j] > tiny * b[k, j]
                                                     and q[k, j] >= _NORMAL_MIN):
                        vnext[k, j] = logb[k, j] - col_scratch[k, j]
            niter[k] = ii
            if ii % 10 == 0:
                acc = 0.0
                for j in range(m):
                    d = q[k, j] - b[k, j]
                    acc += d * d
                err = _in_dtype_of(M, math.sqrt(acc))
                errs[k, n_errs[k]] = err
                n_errs[k] += 1
                if err < stopThr:
                    converged[k] = True
                    n_active -= 1
        if n_active == 0:
            break


# --------------------------------------------------------------------------
# the whole call for plain 1-D weights: screen, solve, outputs
# --------------------------------------------------------------------------
@njit(**_SER, **_INNER)
def copy_weights(w, out):
    """out[0, :] = w (1-D, any float dtype) as float64; returns (every entry
    finite and >= 0 with a positive, finite sum, the sum): the checks of
    ``numbaot._checks`` on one weight vector."""
    ok = True
    s = 0.0
    for i in range(w.shape[0]):
        x = np.float64(w[i])
        ok &= (x >= 0.0) & (x < np.inf)
        s += x
        out[0, i] = x
    return ok and 0.0 < s < np.inf, s


@njit(**_SER, **_INNER)
def screen_weights(a, b, mass_tol, a2, b2):
    """The checks of ``numbaot._checks`` on 1-D weights a, b, in one call:
    finite, >= 0, positive mass, equal masses within ``mass_tol`` (relative,
    ``_checks.mass_tolerance``); copies them into a2 (1, dim_a), b2 (1, dim_b)
    as float64.  False sends the caller to the full validation, which raises
    with the message."""
    oka, sa = copy_weights(a, a2)
    okb, sb = copy_weights(b, b2)
    return oka and okb and abs(sa - sb) <= mass_tol * max(sa, sb)


@njit(**_SER, **_INNER)
def screen_cost(M, flat, reg, scale_max, form_K, ca, cb, Kmat):
    """The screen of M (dim_a, dim_b): True when every entry is finite and
    max|M| / reg <= ``scale_max`` (``_checks.COST_SCALE_MAX``).  With
    ``form_K`` the same call writes Kmat[i, j] = exp(-M_ij / reg) ca[i] cb[j]
    (the Gibbs kernel, scaled for the unbalanced solvers; ca, cb are ones
    for the balanced one); without it Kmat, ca and cb are not touched.
    ``flat`` is M.reshape(-1), the caller's view of the C-ordered M (Numba's
    ``ravel`` added 0.1 s of compile to each first call).  A False answer
    sends the caller to the full validation, which raises."""
    n, m = M.shape
    c = -1.0 / reg
    # the screen over M as one flat vector, in two loops that vectorise:
    # the finiteness test, then min and max by ``fmin`` / ``fmax``
    # (Python's min / max do not vectorise without the no-NaN flag; one
    # loop holding all three reductions stayed scalar too): 0.64 -> 0.13 ns
    # per entry at 128^2.  A row at a time left each row's last m % 32
    # entries to a scalar remainder loop (m = 90: 4x slower).  Neither fmin
    # nor fmax sees a NaN that counts: ``finite`` rejects it.
    finite = True
    for t in range(flat.shape[0]):
        finite &= np.isfinite(flat[t])
    lo = np.inf
    hi = -np.inf
    for t in range(flat.shape[0]):
        x = np.float64(flat[t])
        lo = fmin(lo, x)
        hi = fmax(hi, x)
    if form_K:
        for i in range(n):
            cai = ca[i]
            for j in range(m):
                Kmat[i, j] = fast_exp(c * M[i, j]) * cai * cb[j]
    return finite and max(hi, -lo) / reg <= scale_max


@njit(**_SER)
def knopp_small_call(M, flat, a, b, reg, numItermax, stopThr, mass_tol, scale_max, want_loss,
                     errs, plan, u, v):
    """``sinkhorn_knopp`` on 1-D weights a (dim_a,), b (dim_b,) of M's dtype,
    start to finish: the input screen of :func:`screen_weights` and of M
    (finite, max|M| / reg <= ``scale_max``, :func:`screen_cost`, which also
    forms K; ``flat`` is M.reshape(-1)),
    POT's uniform initial scalings, :func:`knopp_small_run`, then the plan
    (M's dtype, (dim_a, dim_b), in ``plan``, which first holds K) or, with
    ``want_loss``, the loss <plan, M>.  The scalings are left in ``u``
    (1, dim_a), ``v`` (1, dim_b), float64.

    Returns (ok, ii, n_errs, status, loss): ``ok`` False when the screen
    failed (nothing was computed; the caller runs the full validation,
    which raises).  Outputs come in as arguments: boxing returned arrays
    costs microseconds per call."""
    n, m = M.shape
    Kmat = plan
    # (loops, not ``u[:] = x`` or ``reshape``: Numba compiles their error
    # messages, seconds of string formatting on the first call)
    for i in range(n):
        u[0, i] = 1.0 / n
    for j in range(m):
        v[0, j] = 1.0 / m
    a2 = np.empty((1, n))
    b2 = np.empty((1, m))
    if not (screen_weights(a, b, mass_tol, a2, b2)
            and screen_cost(M, flat, reg, scale_max, np.bool_(True), np.ones(n), np.ones(m),
                            Kmat)):
        return False, 0, 0, RAN_OUT, 0.0
    c = -1.0 / reg
    q = np.empty((1, m))
    ii, ne, status = knopp_small_run(M, c, a2, b2, u, v, numItermax, stopThr, errs, Kmat, q,
                                     np.bool_(True))
    acc = 0.0
    if want_loss:
        for i in range(n):
            s = 0.0
            for j in range(m):
                s += M[i, j] * Kmat[i, j] * v[0, j]
            acc += s * u[0, i]
    else:
        for i in range(n):
            ui = u[0, i]
            for j in range(m):
                Kmat[i, j] = ui * Kmat[i, j] * v[0, j]
    return True, ii, ne, status, acc


@njit(**_SER)
def log_small_call(M, flat, a, b, reg, numItermax, stopThr, mass_tol, scale_max, want_loss, errs,
                   plan, u, v):
    """``sinkhorn_log`` on 1-D weights a (dim_a,), b (dim_b,) of M's dtype,
    start to finish, as :func:`knopp_small_call`: the screen (M's before
    the first column logsumexp; ``flat`` is M.reshape(-1)), zero initial
    log-scalings,
    :func:`log_small_run`, then the plan exp(c M + u + v) (M's dtype) or,
    with ``want_loss``, the loss; the log-scalings are left in ``u``
    (1, dim_a), ``v`` (1, dim_b), float64; ``errs`` is (1, numItermax // 10
    + 1).

    Returns (ok, niter, n_errs, converged, loss)."""
    n, m = M.shape
    for i in range(n):
        u[0, i] = 0.0
    for j in range(m):
        v[0, j] = 0.0
    la = np.empty((1, n))
    b2 = np.empty((1, m))
    if not (screen_weights(a, b, mass_tol, la, b2)
            and screen_cost(M, flat, reg, scale_max, np.bool_(False), la[0], b2[0], plan)):
        return False, 0, 0, False, 0.0
    c = -1.0 / reg
    lb = np.empty((1, m))
    for i in range(n):
        la[0, i] = math.log(la[0, i]) if la[0, i] > 0 else -np.inf
    for j in range(m):
        lb[0, j] = math.log(b2[0, j]) if b2[0, j] > 0 else -np.inf
    q = np.empty((1, m))
    n_errs = np.empty(1, dtype=np.int64)
    niter = np.empty(1, dtype=np.int64)
    conv = np.empty(1, dtype=np.bool_)
    log_small_run(M, c, la, lb, b2, u, v, q, numItermax, stopThr, errs, n_errs, niter, conv)
    acc = 0.0
    for i in range(n):
        fi = u[0, i]
        for j in range(m):
            x = M[i, j]
            e = fast_exp(c * x + fi + v[0, j])
            if want_loss:
                acc += x * e
            else:
                plan[i, j] = e
    return True, niter[0], n_errs[0], conv[0], acc

