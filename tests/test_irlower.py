"""The lowering of generated kernels to LLVM IR (``numbaot.cpu._irlower``).

Oracle: CPython running the same source text.  Each construct of the
documented subset is run through an intrinsic (called from a small jitted
driver) and by CPython on the same inputs; unsupported constructs must fail
with a message naming them.  The shipped kernels themselves are checked
against dense solves in tests/test_implicit_codegen.py and, through
``sinkhorn_operator_backward``, in tests/test_implicit.py.
"""
import math

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from numbaot.cpu._irlower import kernel_intrinsic

SEMANTICS = '''
def k(Z, X, Y, n, t, flag):
    m = 0
    for i in range(n):
        Z[i] = Z[i] * 2.0 + i
        m += 1 if Z[i] > t else 0
    Z[n] = m
    Z[n + 1] = 7 / 2
    Z[n + 2] = (n - 3) * (n + 1)
    Z[n + 3] = min(n, 2) + max(n, 2) * 10
    Z[n + 4] = min(Z[0], t)
    Z[n + 5] = max(Z[0], t)
    Z[n + 6] = abs(-t) + abs(2 - n)
    Z[n + 7] = math.sqrt(Z[1] * Z[1])
    Z[n + 8] = 1.0 if not (Z[2] <= t) else 0.0
    Z[n + 9] = 1.0 if (Z[3] != Z[3]) else 0.0
    Z[n + 10] = 1.0 if (t > 0.0) & flag else 0.0
    Z[n + 11] = 1.0 if (t > 0.0) and (n > 2) or flag else 0.0
    Z[n + 12] = -Z[4] + (-n)
    s = 0.0
    j = 0
    while j < n and s < 1e300:
        s += np.float64(X[j])
        j += 1
    Z[n + 13] = s
    if flag:
        Z[n + 14] = 1.5
    else:
        Z[n + 14] = -1.5
    for i in range(n):
        Y[i] = Z[i] / 3.0
    x = 1.5
    x += 2
    x = n
    Z[n + 15] = x + (flag + 1) * 100 + (1 if flag == (n > 2) else 0) * 1000
    i = 0
    while i < n and Z[i] > -1e300:   # Z[n] is past the data: never read
        i += 1
    Z[n + 17] = i
    Z[n + 18] = Z[n - 1] if n > 0 else -2.0
    Z[n + 19] = 3.0 if n == 0 or Z[0] > 0.0 else 4
    if n > 100:
        return
    Z[n + 16] = 42.0
'''


def test_short_circuits_read_only_when_taken():
    # an operand that reads an array is lowered in a block of its own, entered
    # only when Python would evaluate it; plain operands become and / select
    from llvmlite import ir

    from numbaot.cpu._irlower import lower_kernel, parse_kernel
    src = ("def k(Z, n):\n"
           "    Z[0] = Z[n] if n > 0 else 0.0\n"
           "    Z[1] = 1.0 if n > 0 and Z[n] > 0.0 else 0.0\n"
           "    Z[2] = 1.0 if n > 0 and n < 5 else 0.0\n")
    text = str(lower_kernel(ir.Module(), parse_kernel(src), ["p64", "i64"], "k"))
    assert "ifexp.then" in text and "bool.rhs" in text
    # the entry block (up to its branch on n > 0) loads no element
    entry = text.split("entry:")[1].split("ifexp.then")[0]
    assert "load double" not in entry, entry
    assert text.count("bool.rhs") >= 2 and text.count(" and i1 ") == 1


def _driver(kernel):
    @njit(cache=False)
    def run(Z, X, Y, n, t, flag):
        kernel(Z, X, Y, n, t, flag)
    return run


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("n", [0, 1, 5, 33])
def test_constructs_match_cpython(n, flag, vectorize, rng):
    ns = {"math": math, "np": np}
    exec(SEMANTICS, ns)
    run = _driver(kernel_intrinsic(SEMANTICS, vectorize=vectorize))
    Z0 = rng.standard_normal(n + 20)
    Z0[3] = np.nan if n > 3 else Z0[3]
    X = rng.standard_normal(n + 1).astype(np.float32)
    Zp, Yp = Z0.copy(), np.zeros(n + 1, np.float32)
    Zi, Yi = Z0.copy(), np.zeros(n + 1, np.float32)
    ns["k"](Zp, X, Yp, n, 0.25, flag)
    run(Zi, X, Yi, n, 0.25, flag)
    # fastmath (reassoc, arcp, contract: as JIT_OPTIONS) may move a result by
    # an ulp or two; NaNs and infinities are kept (no nnan / ninf)
    np.testing.assert_allclose(Zi, Zp, rtol=4e-16, atol=0)
    np.testing.assert_array_equal(np.isnan(Zi), np.isnan(Zp))
    # float64 values stored into the float32 array round as NumPy rounds
    np.testing.assert_allclose(Yi, Yp, rtol=1.2e-7, atol=0)


def test_int_and_float_arguments_convert(rng):
    # an int32 count and a float32 threshold are accepted (as int64, float64)
    src = "def k(Z, n, t):\n    for i in range(n):\n        Z[i] = t * i\n"
    k = kernel_intrinsic(src)

    @njit(cache=False)
    def run(Z):
        k(Z, np.int32(3), np.float32(0.5))
    Z = np.zeros(4)
    run(Z)
    np.testing.assert_array_equal(Z, [0.0, 0.5, 1.0, 0.0])


def test_drop_ignores_leading_arguments():
    src = "def k(Z):\n    Z[0] = 3.0\n"
    k = kernel_intrinsic(src, drop=1)

    @njit(cache=False)
    def run(Z):
        k(16, Z)
    Z = np.zeros(2)
    run(Z)
    assert Z.tolist() == [3.0, 0.0]


@pytest.mark.parametrize("bad", [np.zeros((2, 2)), np.zeros(4, np.int64), np.zeros(8)[::2]],
                         ids=["2-D", "int64", "strided"])
def test_other_arrays_fail_to_type(bad):
    k = kernel_intrinsic("def k(Z):\n    Z[0] = 1.0\n")

    @njit(cache=False)
    def run(Z):
        k(Z)
    with pytest.raises(TypingError, match="C-contiguous float64 or float32"):
        run(bad)


@pytest.mark.parametrize("body, what", [
    ("Z[0] = Z[0] ** 2", "binary operator"),
    ("for i in range(0, 3):\n        Z[i] = 1.0", "for loop"),
    ("Z[0] = 1.0 if 0.0 < Z[0] < 1.0 else 0.0", "chained comparison"),
    ("Z[0] = Z[1:2]", "expression"),
    ("W[0] = 1.0", "subscript"),
    ("Z[0] = q", "not assigned before use"),
    ("Z[0] = math.exp(Z[1])", "call"),
    ("x = Z[0]\n    x = 1\n    y = 2.5\n    y = True\n    k = 1\n    k = 0.5", "conversion"),
    ("x = Y[0]", "float32"),
    ("Z[0] = Y[0] * 2.0", "conversion"),
    ("return 1.0", "return value"),
    ("Z = 1.0", "assignment to an array parameter"),
    ("with open('f'):\n        pass", "statement"),
])
def test_unsupported_constructs_are_named(body, what):
    src = f"def k(Z, Y):\n    {body}\n"
    k = kernel_intrinsic(src)

    @njit(cache=False)
    def run(Z, Y):
        k(Z, Y)
    with pytest.raises(Exception) as info:
        run(np.zeros(4), np.zeros(4, np.float32))
    # Numba wraps what the codegen raises; the lowering's message survives
    assert what in str(info.value), str(info.value)[-2000:]
