"""The inlined scalar math of the CPU kernels (``numbaot.cpu._math``) against
NumPy's float64 ``exp``/``log`` (the oracle), and the property that makes
them worth having: loops over them vectorise without scalar conversions."""
import platform
import re

import numpy as np
import pytest
from numba import njit

from numbaot._config import JIT_OPTIONS
from numbaot.cpu._math import (fast_exp, fast_exp_f32_ftz, fast_exp_ftz, fast_log, fmax, fmin,
                               pow_inplace)

#: the kernels' options (fast-math flags as in every CPU kernel), not cached
_OPTS = dict(JIT_OPTIONS, cache=False)


@njit(**_OPTS)
def _apply_exp(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


@njit(**_OPTS)
def _apply_exp_ftz(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_exp_ftz(x[i])


@njit(**_OPTS)
def _apply_log(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_log(x[i])


@njit(**_OPTS)
def _apply_exp_f32(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_exp_f32_ftz(x[i])


def _run(f, x):
    out = np.empty_like(x)
    f(x, out)
    return out


def test_fast_exp_against_numpy():
    rng = np.random.default_rng(0)
    # every binade of the result: a dense grid plus random points, and the
    # ends of each reduction interval (k ln2 +- ln2/2)
    k = np.arange(-1021, 1024)
    x = np.concatenate([np.linspace(-708.0, 709.0, 200001), rng.uniform(-708, 709, 100000),
                        k * np.log(2) + np.log(2) / 2, k * np.log(2) - np.log(2) / 2,
                        [0.0, -0.0, 1e-300, -1e-300, 1.0, -1.0]])
    x = x[(x >= -708.0) & (x <= 709.0)]
    got, ref = _run(_apply_exp, x), np.exp(x)
    assert np.max(np.abs(got - ref) / ref) < 1e-13


def test_fast_exp_special_values():
    x = np.array([np.nan, -np.inf, np.inf, -746.0, -745.2, 710.0, 709.8])
    got = _run(_apply_exp, x)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], [0.0, np.inf, 0.0, 0.0, np.inf, np.inf])
    # subnormal results, as np.exp gives them: one rounding to the subnormal
    # grid (spacing 5e-324) on top of the relative error
    xs = np.linspace(-745.0, -708.5, 20001)
    got, ref = _run(_apply_exp, xs), np.exp(xs)
    assert np.all(np.abs(got - ref) <= 1e-13 * ref + 5e-324)


def test_fast_exp_ftz_against_numpy():
    x = np.concatenate([np.linspace(-708.0, 709.0, 100001), [-708.5, -800.0, -np.inf]])
    got = _run(_apply_exp_ftz, x)
    ref = np.exp(x[:-3])
    assert np.max(np.abs(got[:-3] - ref) / ref) < 1e-13
    np.testing.assert_array_equal(got[-3:], 0.0)


def test_fast_exp_f32_ftz_against_numpy():
    """float32 in, float32 out, float32 arithmetic: a few float32 ulp
    (2^-24 = 6e-8) against the float64 exponential of the same float32
    arguments, over every binade of a normal float32 result; 0 below the
    flush bound -87.33 (exp(-87.33) = 1.2e-38, the smallest normal float32)."""
    rng = np.random.default_rng(2)
    k = np.arange(-125, 127)
    x = np.concatenate([np.linspace(-87.33, 88.0, 400001), rng.uniform(-87.33, 88.0, 100000),
                        k * np.log(2) + np.log(2) / 2, k * np.log(2) - np.log(2) / 2,
                        [0.0, 1e-30, -1e-30, 1.0, -1.0]]).astype(np.float32)
    x = x[(x >= np.float32(-87.33)) & (x <= 88.0)]
    got = _run(_apply_exp_f32, x)
    ref = np.exp(x.astype(np.float64))
    assert got.dtype == np.float32
    assert np.max(np.abs(got - ref) / ref) < 4e-7
    low = np.array([-87.34, -100.0, -1e30, -np.inf], np.float32)
    np.testing.assert_array_equal(_run(_apply_exp_f32, low), 0.0)


def test_fast_log_against_numpy():
    rng = np.random.default_rng(1)
    x = np.concatenate([np.exp(rng.uniform(-700, 700, 200000)),
                        np.nextafter(np.sqrt(2), [0, 3]), [2.2250738585072014e-308, 1.0, 2.0,
                                                          0.5, 1.7976931348623157e308]])
    got, ref = _run(_apply_log, x), np.log(x)
    err = np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)
    assert np.max(err) < 1e-14
    assert got[np.flatnonzero(x == 1.0)[0]] == 0.0


@pytest.mark.parametrize("e", [1 / 1.05, 0.5, 0.999, 1e-3, 1.0, 0.0])
def test_pow_inplace_against_numpy(e):
    """The unbalanced solvers' (a / K v) ** fi, fi in [0, 1]: NumPy's power
    (libm) as the oracle over the whole float64 range, subnormals, 0, inf
    and NaN; 2e-13 relative (|e log x| <= 745 amplifies exp's error)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([10.0 ** rng.uniform(-307, 308, 20000), rng.uniform(0.5, 2.0, 1000),
                        [0.0, np.inf, np.nan, 5e-324, 1e-310, 2.2250738585072014e-308, 1.0]])
    got = x.copy()
    pow_inplace(got, got.shape[0] - 3, e)  # the last 3 entries are left alone
    with np.errstate(all="ignore"):
        ref = x ** e
    np.testing.assert_array_equal(got[-3:], x[-3:])
    got, ref = got[:-3], ref[:-3]
    pos = np.isfinite(ref) & (ref > 0)
    np.testing.assert_allclose(got[pos], ref[pos], rtol=2e-13, atol=0)
    np.testing.assert_array_equal(got[~pos], ref[~pos])  # 0, inf, NaN as pow
    if e == 1.0:
        np.testing.assert_array_equal(got, ref)  # exact


@njit(**_OPTS)
def _minmax_reduce(x):
    lo = np.inf
    hi = -np.inf
    for i in range(x.shape[0]):
        v = np.float64(x[i])  # as the screen of M
        lo = fmin(lo, v)
        hi = fmax(hi, v)
    return lo, hi


@njit(**_OPTS)
def _minmax_pairs(x, y, lo, hi):
    for i in range(x.shape[0]):
        lo[i] = fmin(x[i], y[i])
        hi[i] = fmax(x[i], y[i])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fmin_fmax_against_numpy(dtype):
    """``fmin`` / ``fmax`` are NumPy's ``fmin`` / ``fmax`` (a NaN argument
    ignored), pair by pair and as reductions (the vectorised form the
    screen of M uses), with infinities, NaN and lengths that leave a
    remainder after the vector loop."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=1003).astype(dtype) * 1e3
    y = rng.normal(size=1003).astype(dtype) * 1e3
    x[[5, 77]] = np.inf, -np.inf
    y[[9, 77, 500]] = np.nan, np.nan, -np.inf
    x[[9, 11]] = np.nan, np.nan
    lo, hi = np.empty_like(x), np.empty_like(x)
    _minmax_pairs(x, y, lo, hi)
    np.testing.assert_array_equal(lo, np.fmin(x, y))
    np.testing.assert_array_equal(hi, np.fmax(x, y))
    for n in (1, 7, 31, 33, 1003):
        assert _minmax_reduce(x[:n]) == (np.nanmin(x[:n]), np.nanmax(x[:n]))
    assert _minmax_reduce(np.full(4, np.nan, dtype)) == (np.inf, -np.inf)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 assembly")
@pytest.mark.parametrize("kernel", [_apply_exp, _apply_exp_ftz, _apply_log, _apply_exp_f32])
def test_loops_have_no_scalar_int_float_conversions(kernel):
    """No cvt(t)sd2si / cvtsi2sd in a loop over the helpers: AVX2 has no
    vector int64 <-> float64 conversion, and one such conversion made LLVM
    compute the whole exponential lane by lane (2.9 against 1.7 ns per
    element on the project's AVX2 machine)."""
    x = np.ones(8, np.float32 if kernel is _apply_exp_f32 else np.float64)
    _run(kernel, x)
    asm = "\n".join(kernel.inspect_asm().values())
    assert not re.findall(r"\bv?cvtt?s[sd]2si|\bv?cvtsi2s[sd]", asm)
