"""Source generator of the register-blocked implicit backward (n <= 16).

Pure text: this module imports neither Numba nor NumPy and compiles nothing.
``generated_source`` returns the Python source of the straight-line kernels
for the padded sizes N; ``numbaot.cpu._implicit_unrolled`` lowers that text to
LLVM IR (``numbaot.cpu._irlower``: a subset of Python, no Numba typing pass),
and its work-item templates call the kernels through the per-size bindings
``_cg_at_N`` etc. (``_gen_at``).  The generated text is
built at import from these functions, never read back from a ``.py`` file,
so it works where only ``.pyc`` files ship.

Functions generated per padded size N (every one takes the work item's flat
array Z described below; ``_setup_N`` and ``_dx_N`` only for the sizes
written out in full):

* ``_cg_N(Z, nb, n, inv_n, max_iter)``: the projected CG on one lane block;
* ``_cg_init_N(Z, n, inv_n, cg_tol)``: its start from v0 = 0;
* ``_rhs_N(Z)``: rhs = s_c - W^T (rinv * s_r);
* ``_u_N(Z)``: u = rinv * (s_r - W v);
* ``_setup_N(Rf, Gf, b0, nl, corrected, Z)``: lane copy and marginals;
* ``_dx_N(Rf, Gf, dXf, b0, nl, Z)``: dX = (G - u 1^T - 1 v^T) * R;
* ``_<name>_at_N(N, ...)``: the size-N binding of the template name
  ``_<name>`` (calls ``_<name>_N``, or does nothing).

Free names of the text: ``math``, ``np`` (NumPy) and the generated functions
themselves (the bindings call ``_<name>_N``): exec it with globals that hold
``math`` and ``np`` and into which the jitted functions are then stored.
"""
from .._config import IMPLICIT_UNROLL_LANES

# --------------------------------------------------------------------------
# implicit backward, register-blocked: n padded to N in IMPLICIT_UNROLL_SIZES
# --------------------------------------------------------------------------
# For n <= max(IMPLICIT_UNROLL_SIZES) a whole CG iteration of one lane is
# straight-line code written out for the padded size N (generated here,
# compiled once per N by ``numbaot.cpu._implicit_unrolled``): the loop over
# the lanes is then the innermost loop and vectorises (8 lanes per AVX-512
# register).  The CG runs block by block (8 lanes at N >= 12, more at
# smaller N: ``_gen_cg``), start to finish, so that the block's W stays in
# L1 for all its iterations; at N <= 8 one loop
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
# W_ij = R_ij; the lane state follows (``zrows``).
#: lanes per work item (``_config.IMPLICIT_UNROLL_LANES``) and the row stride
#: of Z in slots (the lanes plus 8 spare slots: see above)
LANES = IMPLICIT_UNROLL_LANES
STRIDE = IMPLICIT_UNROLL_LANES + 8
_UL = LANES
_US = STRIDE
#: padded sizes up to this run one sweep per CG iteration (p, Ap and a row of
#: W in registers); larger ones four (``_gen_cg``)
_CG_ONE_SWEEP_MAX = 8


def zrows(N):
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
    z = zrows(N)

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
    z = zrows(N)
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
    z = zrows(N)
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
    z = zrows(N)
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
    z = zrows(N)
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
    z = zrows(N)
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


def generated_source(sizes, written_sizes):
    """The source of every generated function for the padded sizes ``sizes``
    (``_setup_N`` and ``_dx_N`` only for N in ``written_sizes``; the others'
    bindings ``_setup_at_N``, ``_dx_at_N`` do nothing), one text in the
    order size by size: CG, CG start, rhs, u, their bindings, then setup and
    dX with theirs."""
    srcs = []
    for N in sizes:
        srcs += [_gen_cg(N), _gen_cg_init(N), _gen_rhs(N), _gen_u(N)]
        srcs += [_gen_at("cg", "Z, nb, n, inv_n, max_iter", N, f"cg_{N}"),
                 _gen_at("cg_init", "Z, n, inv_n, cg_tol", N, f"cg_init_{N}"),
                 _gen_at("rhs", "Z", N, f"rhs_{N}"), _gen_at("u", "Z", N, f"u_{N}")]
        written = N in written_sizes
        if written:
            srcs += [_gen_setup(N), _gen_dx(N)]
        srcs += [_gen_at("setup", "Rf, Gf, b0, nl, corrected, Z", N,
                         f"setup_{N}" if written else None),
                 _gen_at("dx", "Rf, Gf, dXf, b0, nl, Z", N, f"dx_{N}" if written else None)]
    return "\n\n".join(srcs)
