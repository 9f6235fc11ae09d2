"""Scalar math helpers of the CPU kernels (LLVM inlines them into the loops).

``fast_exp`` is a vectorisable exponential: Cody-Waite range reduction
x = k ln2 + r with |r| <= ln2/2, a degree-11 Taylor polynomial for e^r (Estrin),
and the scaling 2^k built directly in the exponent bits.  Without Intel SVML,
Numba's ``math.exp`` is a scalar libm call (~3 ns/element on this project's
machines); this one vectorises (AVX-512: ~0.4 ns/element; AVX2: 1.2 ns in
L1 on the 2-core Zen 3 VM, where it took 2.9 ns before the scalar
conversions described below were removed and Horner's form replaced)
with a relative error below 1e-13 on [-708, 709], subnormal results below
-708 as ``np.exp``, 0 below about -745.13 (and for -inf), NaN propagated.

No int64 <-> float64 conversions: AVX2 has no vector instruction for them
(``vcvttpd2qq``/``vcvtqq2pd`` are AVX-512DQ), and one such conversion makes
LLVM extract every lane and convert it with scalar code.  The exponent k is
moved between the two domains with the "magic number" trick instead:
k + (2^52 + 1023) is exact for the integers |k| <= 2^51, its low mantissa
bits hold k + 1023, and a shift puts them in the exponent field (and back:
OR-ing a biased exponent into the bits of 2^52 and subtracting 2^52 + 1023).
With the conversions alone the results were the same bits.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .._config import INNER as _INNER
from .._config import JIT_OPTIONS

#: the shared kernel options (``_config.JIT_OPTIONS``: fast-math flags, disk
#: cache, error model).  The helpers are plain compiled functions: LLVM
#: inlines them into each loop and vectorises it (the same ns per exp as an
#: IR-inlined copy, timed interleaved in one process), while Numba types and
#: lowers each once instead of once per call site (``inline="always"``):
#: compile CPU of a first call -15 to -22 % (``sinkhorn_log``,
#: ``sinkhorn_unbalanced``, ``sinkhorn_operator``, lazy ``empirical_sinkhorn``;
#: BENCHMARKS.md, "First-call (compile) latency")
_HELPER = dict(JIT_OPTIONS)


def _bitcast(src, dst, llvm_type):
    """An intrinsic reinterpreting the bits of a ``src`` value as a ``dst``
    value of the same width (no conversion)."""

    @intrinsic
    def bitcast(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_type)

        return dst(src), codegen

    return bitcast


def _minmax_intrinsic(name):
    """An intrinsic f(x, y) for two floats of one type calling LLVM's
    ``llvm.<name>`` (``maxnum`` / ``minnum``: a NaN argument is ignored, as
    ``np.fmax`` / ``np.fmin``)."""

    @intrinsic
    def f(typingctx, x, y):
        if not (isinstance(x, types.Float) and x == y):
            return None

        def codegen(context, builder, signature, args):
            lty = args[0].type
            fn = builder.module.declare_intrinsic(f"llvm.{name}", [lty],
                                                  ir.FunctionType(lty, [lty, lty]))
            return builder.call(fn, args)

        return x(x, y), codegen

    return f


#: max / min of two floats that a reduction loop can vectorise: Python's
#: ``max`` / ``min`` compile to a compare and select, which LLVM vectorises
#: as a reduction only under the no-NaN flag (not in the kernels' flags);
#: ``maxnum`` / ``minnum`` it does (``vmaxpd`` / ``vminpd``).  The same value
#: when neither argument is NaN.
fmax = _minmax_intrinsic("maxnum")
fmin = _minmax_intrinsic("minnum")


_bits_to_float64 = _bitcast(types.int64, types.float64, ir.DoubleType())
_float64_to_bits = _bitcast(types.float64, types.int64, ir.IntType(64))
_bits_to_float32 = _bitcast(types.int32, types.float32, ir.FloatType())
_float32_to_bits = _bitcast(types.float32, types.int32, ir.IntType(32))


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_EXP_LO = -746.0
_EXP_HI = 710.0
_FTZ_LO = -708.0
#: 2^52 + 1023: k + _EXP_MAGIC has the bits of 2^52 with k + 1023 in the low
#: mantissa bits (k an integer, |k| <= 2^51); _MAGIC_BITS are 2^52's bits
_EXP_MAGIC = 4503599627371519.0
_MAGIC_BITS = 0x4330000000000000


#: 1/i!, the Taylor coefficients of e^r (i = 0..11)
_C = [1.0]
for _i in range(1, 12):
    _C.append(_C[-1] / _i)
_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11 = _C
del _i, _C


@njit(**_HELPER, **_INNER)
def _exp_reduced(xc):
    """(p, k) with exp(xc) = p * 2^k: Cody-Waite reduction xc = k ln2 + r,
    |r| <= ln2/2, and sum_{i<=11} r^i / i! (truncation < 7e-15 relative) in
    Estrin's form: pairs c_i + c_{i+1} r combined with r^2, r^4, r^8, a
    dependency chain of 5 multiply-adds instead of Horner's 12 (the loops
    were bound by that chain's latency: 1.44 -> 1.18 ns per element in L1 on
    the AVX2 VM, the same maximum error against np.exp)."""
    kf = np.floor(xc * _LOG2E + 0.5)
    r = (xc - kf * _LN2_HI) - kf * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    p03 = (_C0 + _C1 * r) + r2 * (_C2 + _C3 * r)
    p47 = (_C4 + _C5 * r) + r2 * (_C6 + _C7 * r)
    p811 = (_C8 + _C9 * r) + r2 * (_C10 + _C11 * r)
    return p03 + r4 * (p47 + r4 * p811), kf


@njit(**_HELPER, **_INNER)
def fast_exp(x):
    """exp(x) for float64 x; vectorisable; subnormal results as np.exp, 0
    below about -745.13, inf above about 709.78, NaN propagates."""
    p, kf = _exp_reduced(min(max(x, _EXP_LO), _EXP_HI))
    # 2^k = 2^k1 * 2^k2 with both factors normal, so that subnormal results
    # (k < -1022) and the overflow to inf come out of the multiplications.
    k1 = np.floor(kf * 0.5)
    k2 = kf - k1
    s1 = _bits_to_float64(_float64_to_bits(k1 + _EXP_MAGIC) << 52)
    s2 = _bits_to_float64(_float64_to_bits(k2 + _EXP_MAGIC) << 52)
    res = (p * s1) * s2
    if x != x:
        res = x
    return res


@njit(**_HELPER, **_INNER)
def fast_exp_ftz(x):
    """exp(x) flushed to 0 below -708 (no subnormal results, no NaN test):
    ~25% cheaper than ``fast_exp``.  For the log-domain reductions, whose
    terms are only ever compared with a sum >= 1e-200."""
    p, kf = _exp_reduced(max(x, _FTZ_LO))
    res = p * _bits_to_float64(_float64_to_bits(kf + _EXP_MAGIC) << 52)
    return res if x >= _FTZ_LO else 0.0


_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951


@njit(**_HELPER, **_INNER)
def fast_log(x):
    """log(x) for a positive, normal, finite float64 x (callers pass
    shifted exp-sums above a floor, never 0, subnormals or inf); vectorisable.  x = 2^e m with
    m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(t), t = (m-1)/(m+1),
    |t| <= 0.1716, by its series to t^19 (truncation < 3e-17 relative)."""
    bits = _float64_to_bits(x)
    e = _bits_to_float64((bits >> 52) | _MAGIC_BITS) - _EXP_MAGIC
    m = _bits_to_float64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1.0 if big else e
    t = (m - 1.0) / (m + 1.0)
    t2 = t * t
    p = 1.0 / 19.0
    p = p * t2 + 1.0 / 17.0
    p = p * t2 + 1.0 / 15.0
    p = p * t2 + 1.0 / 13.0
    p = p * t2 + 1.0 / 11.0
    p = p * t2 + 1.0 / 9.0
    p = p * t2 + 1.0 / 7.0
    p = p * t2 + 1.0 / 5.0
    p = p * t2 + 1.0 / 3.0
    p = p * t2 + 1.0
    return e * _LN2_HI + (e * _LN2_LO + 2.0 * t * p)


#: 2^54 and 54 ln 2: subnormal arguments of ``pow_inplace`` are scaled by 2^54
_TWO54 = 18014398509481984.0
_LN2_54_HI = 54.0 * _LN2_HI
_LN2_54_LO = 54.0 * _LN2_LO
_TINY = 2.2250738585072014e-308  # the smallest normal float64


@njit(**_HELPER)
def pow_inplace(w, n, e):
    """w[:n] = w[:n] ** e for entries >= 0 (or NaN, inf) and 0 <= e <= 1
    (the unbalanced exponents reg_m / (reg_m + reg)): exp(e log x) by
    :func:`fast_exp` and :func:`fast_log` in one vectorised loop (1.6 ns
    per entry against libm's scalar pow, 5-8 ns); relative error below
    about 2e-13 (|e log x| <= 745).  As pow: e = 1 leaves w unchanged, e = 0
    gives ones, x = 0, inf and NaN stay as they are (e > 0); subnormal x is
    scaled by 2^54 first.  (The loop is written here, not as a scalar
    ``fast_pow``: composed in one helper, fast_log and fast_exp make it too
    large for LLVM to inline into a caller's loop, which then stays scalar,
    16 ns per entry, measured.)"""
    if e == 1.0:
        return
    if e == 0.0:
        for r in range(n):
            w[r] = 1.0
        return
    for r in range(n):
        x = w[r]
        tiny = x < _TINY
        xs = x * (_TWO54 if tiny else 1.0)
        lg = (fast_log(xs) - (_LN2_54_HI if tiny else 0.0)) - (_LN2_54_LO if tiny else 0.0)
        y = fast_exp(e * lg)
        ok = (x > 0.0) & (x < np.inf)
        w[r] = y if ok else x


# --------------------------------------------------------------------------
# float32 lanes
# --------------------------------------------------------------------------
#: float32 constants (typed float32 where the kernels use them): ln 2 split
#: for Cody-Waite (_F32_LN2_HI has 16 significant bits: k * _F32_LN2_HI is
#: exact for |k| < 256), 2^23 + 127 (the float32 magic number), the flush
#: bound -87.33 (exp of it is 1.2e-38, the smallest normal float32), and
#: the degree-6 polynomial of e^r on [-ln2/2, ln2/2]: the least-squares fit
#: at 2000 Chebyshev nodes (numpy.polynomial.chebyshev.chebfit, then
#: cheb2poly), 1.9e-8 relative error with its float32 coefficients (a third
#: of a float32 ulp; Taylor needs degree 7 for that)
_F32_LOG2E = np.float32(1.4426950408889634)
_F32_LN2_HI = np.float32(0.693145751953125)
_F32_LN2_LO = np.float32(1.428606765330187045e-06)
_F32_MAGIC = np.float32(8388608.0 + 127.0)
_F32_FTZ_LO = np.float32(-87.33)
_F32_HALF = np.float32(0.5)
_F32_ZERO = np.float32(0.0)
_D0, _D1, _D2, _D3, _D4, _D5, _D6 = (np.float32(v) for v in (
    0.9999999999595485, 1.0000000377274487, 0.5000000107749407, 0.16666415477234786,
    0.04166621827432465, 0.008375128890497229, 0.0013948580823962865))


@njit(**_HELPER, **_INNER)
def fast_exp_f32_ftz(x):
    """exp(x) for a float32 x <= 88, in float32 arithmetic (eight lanes of
    an AVX2 register where ``fast_exp_ftz`` has four), flushed to 0 below
    -87.33 (no subnormal results).  Relative error below 5e-7 (a few
    float32 ulp) on [-87.33, 88].  Cody-Waite reduction x = k ln2 + r,
    |r| <= ln2/2, a degree-6 polynomial of e^r in Estrin's form (2e-8
    relative), 2^k built in the exponent bits with the magic number
    2^23 + 127.  NaN gives 0 (the kernels' inputs are finite)."""
    xc = max(x, _F32_FTZ_LO)
    kf = np.floor(xc * _F32_LOG2E + _F32_HALF)
    r = (xc - kf * _F32_LN2_HI) - kf * _F32_LN2_LO
    r2 = r * r
    r4 = r2 * r2
    p = ((_D0 + _D1 * r) + r2 * (_D2 + _D3 * r)) + r4 * ((_D4 + _D5 * r) + r2 * _D6)
    res = p * _bits_to_float32(_float32_to_bits(kf + _F32_MAGIC) << 23)
    return res if x >= _F32_FTZ_LO else _F32_ZERO
