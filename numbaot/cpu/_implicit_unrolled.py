"""CPU implicit backward for n <= max(IMPLICIT_UNROLL_SIZES): the
register-blocked kernels, one specialisation per padded size N.

Two parts:

* the straight-line kernels of each N, generated as source text by
  ``numbaot.cpu._implicit_codegen`` and made Numba intrinsics here at
  import, their text lowered to LLVM IR by ``numbaot.cpu._irlower``
  (``_compile_generated``);
* two templates, ``_backward_item_unrolled`` (one work item) and
  ``_implicit_unrolled`` (the parallel loop over work items), plain Python
  functions compiled once per N by ``_compile_for_size``: their code object
  is re-bound (``types.FunctionType``) to a copy of this module's namespace
  in which ``_N_PAD`` is N and the kernel names ``_cg``, ``_cg_init``,
  ``_rhs``, ``_u``, ``_setup``, ``_dx`` are the size-N bindings
  ``_<name>_at_N``.  Their placeholders below make the names visible to
  static tools; the templates never run as Python.

Nothing here reads a ``.py`` file (no ``inspect.getsource``): Numba compiles
from the code objects, so this works where only ``.pyc`` files ship (with
Numba's disk cache off there: ``_config.CACHE``).  Layout and lane
conventions: ``numbaot.cpu.implicit``; the work item's array Z:
``numbaot.cpu._implicit_codegen``.
"""
import hashlib
import math
import types

import numpy as np
from numba import njit, prange, typeof
from numba.core import types as nbtypes

from .._config import IMPLICIT_CG_BLOCK_BYTES, IMPLICIT_UNROLL_SIZES, JIT_OPTIONS
from ._implicit_cg import any_negative, any_nonfinite, cg_scale
from ._implicit_codegen import LANES as _UL
from ._implicit_codegen import STRIDE as _US
from ._implicit_codegen import generated_source
from ._irlower import IR_VERSION, kernel_intrinsic
from ._pointer import call_at

_PAR = dict(JIT_OPTIONS, parallel=True)
_SER = dict(JIT_OPTIONS)

_CG_BLOCK_BYTES = IMPLICIT_CG_BLOCK_BYTES
UNROLL_SIZES = tuple(sorted(IMPLICIT_UNROLL_SIZES))
UNROLL_MAX = UNROLL_SIZES[-1]
#: n == N for these N: the setup and dX passes written out for the size too
#: (per-row loop overhead dominates at small n; at N = 12, 16 the loops are
#: long enough and writing them out would add minutes of first compilation)
_WRITTEN_OUT_SIZES = tuple(N for N in UNROLL_SIZES if N <= 8) or UNROLL_SIZES[:1]
_WRITTEN_OUT_MAX = _WRITTEN_OUT_SIZES[-1]


# --------------------------------------------------------------------------
# names bound per padded size by ``_compile_for_size``
# --------------------------------------------------------------------------
#: the padded size N inside the templates; a compile-time constant per size
_N_PAD = None


def _bound_per_size(*args):
    """Placeholder of the template names ``_cg``, ``_cg_init``, ``_rhs``,
    ``_u``, ``_setup``, ``_dx``: ``_compile_for_size`` replaces them, in the
    templates' namespace, by the size-N bindings ``_<name>_at_N(N, ...)``
    generated in ``numbaot.cpu._implicit_codegen`` (``_gen_at``)."""
    raise RuntimeError("a template of numbaot.cpu._implicit_unrolled ran as Python; "
                       "its kernel names are bound per size by _compile_for_size")


_cg = _cg_init = _rhs = _u = _setup = _dx = _bound_per_size
_BOUND_NAMES = ("cg", "cg_init", "rhs", "u", "setup", "dx")


#: generated kernels lowered to LLVM IR directly (``numbaot.cpu._irlower``)
#: instead of by Numba: Numba's typing and lowering took about 1.5 ms per
#: statement, 9.4 of the 16.7 s of the first backward call at n = 16
_IR_KERNELS = ("cg", "cg_init", "rhs", "u", "setup", "dx")
#: of those, the ones whose lane loop stays scalar: it reads R and G (and
#: writes dX) matrix by matrix, N^2 entries apart between lanes, so
#: vectorised across lanes it gathers and scatters: 1.3 times slower at
#: 4096 x 8 (Zen 4).  Numba's lowering had kept them scalar by accident
#: (its negative-index wrap-around on those indices).
_SCALAR = ("setup", "dx")


def _compile_generated():
    """The generated functions in this module's namespace: the kernels
    ``_IR_KERNELS`` and their size bindings ``_<name>_at_N`` as intrinsics
    (``kernel_intrinsic``, which parses a kernel's text when a caller first
    compiles; a binding drops its ``N``), the few others (bindings that do
    nothing) exec'd and jitted.  Their code objects carry this file's name,
    so Numba's disk cache (keyed by module, function name and this file's
    time stamp, and by each function's bytecode) keeps them like the
    hand-written kernels; the whole text is in ``_GENERATED_SOURCE``."""
    src = generated_source(UNROLL_SIZES, _WRITTEN_OUT_SIZES)
    # one function per piece ("def _name(...):" and its lines, no blank line)
    pieces = {}
    for p in src.split("\n\n"):
        p = p.strip("\n") + "\n"
        pieces[p[4:p.index("(")]] = p
    ns = {}
    for name, text in pieces.items():
        base, size = name[1:].rsplit("_", 1)
        target = f"_{base[:-3]}_{size}"
        if base in _IR_KERNELS:
            globals()[name] = kernel_intrinsic(text, vectorize=base not in _SCALAR)
        elif base.endswith("_at") and base[:-3] in _IR_KERNELS and target in pieces:
            globals()[name] = kernel_intrinsic(pieces[target], drop=1,
                                               vectorize=base[:-3] not in _SCALAR, name=name)
        else:
            exec(compile(text, __file__, "exec"), globals(), ns)
            globals()[name] = njit(**_SER)(ns[name])
    return src


_GENERATED_SOURCE = _compile_generated()


def _backward_item_unrolled(R, G, Rf, Gf, corrected, max_iter, cg_tol, band, b0, nl, block, Z,
                            t1, t2, dX, dXf, iters, relres):
    """The implicit backward of matrices b0 .. b0 + nl - 1 on the _UL lanes of
    one work item (lanes nl .. _UL-1 repeat the last matrix; their results
    are dropped), with the generated kernels of the padded size N.  A
    template, compiled once per size by ``_compile_for_size`` (there the
    names ``_cg``, ``_rhs``, ... are those of size N alone).
    Z: ((N N + 10 N + 8) _US,) float64 workspace (``zrows``) whose padding
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
    neg = any_negative(Z, 0, o * _US)
    nf = any_nonfinite(Z, r_sr, r_sc + N * _US)
    _rhs(N, Z)
    # projected CG from v0 = 0: res = p = rhs - mean(rhs)
    inv_n = 1.0 / n
    _cg_init(N, Z, n, inv_n, cg_tol)
    # a lane whose ||rhs|| left [1 / band, band] (0 included: its square
    # underflowed; inf: it overflowed) may need its CG on a scaled rhs
    r_bn = (o + 10 * N + 4) * _US
    ob = 0
    for c in range(L):
        bnc = Z[r_bn + c]
        ob += (bnc > band) | (bnc < 1.0 / band)
    if ob:
        # then every lane whose marginals leave the band runs the CG on its
        # rhs (in the u rows) scaled by a power of two (``cg_scale``; the
        # others by 1: their start is recomputed unchanged)
        for c in range(L):
            m = 0.0
            for k in range(2 * N):
                m = max(m, abs(Z[r_sr + k * _US + c]))
            scale = cg_scale(m, band)[0]
            for j in range(N):
                Z[r_u + j * _US + c] *= scale
        _cg_init(N, Z, n, inv_n, cg_tol)
    # lanes per CG block: ``block``, doubled while the block's W stays
    # within _CG_BLOCK_BYTES (N = 4: all 64 lanes at once)
    blk = block
    while 2 * blk <= L and L % (2 * blk) == 0 and 2 * blk * N * N * 8 <= _CG_BLOCK_BYTES:
        blk *= 2
    for cb in range(0, L, blk):
        _cg(N, Z[cb:], blk, n, inv_n, max_iter)
    if ob:
        # the solution v scaled back
        for c in range(L):
            m = 0.0
            for k in range(2 * N):
                m = max(m, abs(Z[r_sr + k * _US + c]))
            inv_s = cg_scale(m, band)[1]
            for j in range(N):
                Z[r_v + j * _US + c] *= inv_s
    _u(N, Z)
    nf += any_nonfinite(Z, r_u, r_u + N * _US) + any_nonfinite(Z, r_v, r_v + N * _US)
    it_out = iters[b0:b0 + nl]
    rr_out = relres[b0:b0 + nl]
    r_rs = (o + 10 * N) * _US
    rs_z = Z[r_rs:r_rs + nl]   # views: indices from 0 (see any_nonfinite)
    its_z = Z[r_rs + 3 * _US:r_rs + 3 * _US + nl]
    bn_z = Z[r_rs + 4 * _US:r_rs + 4 * _US + nl]
    for c in range(nl):
        it_out[c] = np.int64(its_z[c])
        bnc = bn_z[c]
        rr_out[c] = math.sqrt(rs_z[c]) / bnc if bnc > 0.0 else 0.0
    # dX = (G - u 1^T - 1 v^T) * R, matrix by matrix in memory order
    if n == N and N <= _WRITTEN_OUT_MAX:
        _dx(N, Rf, Gf, dXf, b0, nl, Z)
        if ob:   # large marginals: dX itself may overflow (also in its dtype)
            nf += any_nonfinite(dXf, b0 * n * n, (b0 + nl) * n * n)
        return nf, neg
    for c in range(nl):
        b = b0 + c
        for j in range(n):
            t1[j] = Z[r_v + j * _US + c]
        for i in range(n):
            ui = Z[r_u + i * _US + c]
            for j in range(n):
                dX[b, i, j] = (np.float64(G[b, i, j]) - ui - t1[j]) * np.float64(R[b, i, j])
    if ob:
        nf += any_nonfinite(dXf, b0 * n * n, (b0 + nl) * n * n)
    return nf, neg


#: the work item's return type (n_nonfinite, n_negative), for ``call_at``
_ITEM_RET = nbtypes.UniTuple(nbtypes.int64, 2)
_VEC = nbtypes.Array(nbtypes.float64, 1, "C")


def item_signature(R, G, dX):
    """The Numba signature of the work item ``UNROLLED_ITEMS[N]`` as
    ``_implicit_unrolled_N`` calls it for these arrays: their exact types
    (dtype, read-only flag), their flat views (``reshape(-1)`` in the
    kernel: 1-D, C, the same flags) and the workspaces the kernel
    allocates (float64 and int64 vectors)."""
    tR, tG, tdX = typeof(R), typeof(G), typeof(dX)
    return _ITEM_RET(tR, tG, tR.copy(ndim=1), tG.copy(ndim=1), nbtypes.boolean, nbtypes.int64,
                     nbtypes.float64, nbtypes.float64, nbtypes.int64, nbtypes.int64,
                     nbtypes.int64, _VEC, _VEC, _VEC, tdX, tdX.copy(ndim=1),
                     nbtypes.Array(nbtypes.int64, 1, "C"), _VEC)


def _implicit_unrolled(item_addr, R, G, corrected, max_iter, cg_tol, band, block, chunks, dX):
    """``implicit_backward`` for n <= N, N in IMPLICIT_UNROLL_SIZES (the
    padded size): work items of _UL matrices on ``chunks`` workspaces.  A
    template: ``_compile_for_size(N)`` compiles it with the size-N kernels
    only, and with N = _N_PAD a compile-time constant (the index arithmetic
    folds; with N an argument every access to Z paid a wrap-around select).
    ``item_addr``: the ``jit_address`` of ``UNROLLED_ITEMS[N]`` for
    ``item_signature(R, G, dX)``: the work item is compiled once on its
    own, not linked and optimised again in this loop's three gufunc layers
    (``numbaot.cpu._pointer``)."""
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
            nf, ng = call_at(item_addr, _ITEM_RET, R, G, Rf, Gf, corrected,
                             np.int64(max_iter), np.float64(cg_tol), np.float64(band),
                             np.int64(b0), np.int64(min(_UL, B - b0)), np.int64(block), Z,
                             t1, t2, dX, dXf, iters, relres)
            n_nf += nf
            n_neg += ng
    return iters, relres, n_nf, n_neg


def _size_digest(N):
    """A digest of what size N's compiled templates depend on beyond their
    own bytecode: the generated kernels of size N, the constants the
    templates freeze and the version of their lowering to IR.  Numba's
    disk cache keys a function by its own bytecode and its file's time
    stamp only, and the cached templates carry
    the generated kernels linked in; with the digest in their qualified
    name (the cache's file name) an edit of the generator or of these
    tunables cannot bring back a stale kernel.  (Edits of callees in other
    files, ``_implicit_cg`` or ``_math``, remain Numba's usual blind spot:
    while editing them, clear the cache or set NUMBAOT_CACHE=0.)"""
    text = generated_source((N,), _WRITTEN_OUT_SIZES)
    text += repr((_UL, _US, _CG_BLOCK_BYTES, _WRITTEN_OUT_MAX, _IR_KERNELS, _SCALAR, IR_VERSION))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _compile_for_size(N):
    """``_implicit_unrolled`` and ``_backward_item_unrolled`` compiled
    again (as ``_implicit_unrolled_N``, ``_backward_item_unrolled_N``), with
    the names of the generated kernels bound to those of size N alone
    (``_gen_at``): the first call at one size compiles that size's kernels
    only (on 2 cores 23 s at n = 16, 10 s at n = 4; one kernel for all four
    sizes took 70-75 s, docs/performance-notes.md).  The templates' code, compiled in a
    smaller context (LLVM may inline and round differently: results can
    move by an ulp against the all-sizes build).  The templates' own code
    objects (same file and line numbers) on a namespace of their size,
    distinct names: Numba's disk cache keeps each size apart.  Returns the
    parallel kernel and the work item (called at its address)."""
    ns = dict(globals())
    ns["_N_PAD"] = N
    for name in _BOUND_NAMES:
        ns["_" + name] = globals()[f"_{name}_at_{N}"]
    digest = _size_digest(N)
    for fn, opts in ((_backward_item_unrolled, _SER), (_implicit_unrolled, _PAR)):
        name = fn.__name__
        sized = types.FunctionType(fn.__code__, ns, f"{name}_{N}")
        sized.__qualname__ = f"{name}_{N}_{digest}"
        ns[name] = njit(**opts)(sized)
    return ns["_implicit_unrolled"], ns["_backward_item_unrolled"]


_COMPILED = {N: _compile_for_size(N) for N in UNROLL_SIZES}
#: the parallel kernel of each padded size N (its first argument: the work
#: item's address)
UNROLLED_KERNELS = {N: k[0] for N, k in _COMPILED.items()}
#: the work item of each padded size N (``item_signature``)
UNROLLED_ITEMS = {N: k[1] for N, k in _COMPILED.items()}
#: the padded size of n = 0 .. max(IMPLICIT_UNROLL_SIZES)
PADDED = tuple(min(N for N in UNROLL_SIZES if N >= n) for n in range(UNROLL_MAX + 1))
