"""numbaot.cpu._pointer.KernelPointer: a serial kernel passed to a parallel
one as a function pointer (the operator's work items)."""
import numpy as np
import pytest
from numba import njit, prange, typeof, types
from numba.core.errors import TypingError

from numbaot.cpu._pointer import KernelPointer


@njit
def _scale_row(A, i, c):
    s = 0.0
    for j in range(A.shape[1]):
        A[i, j] *= c
        s += A[i, j]
    return s


@njit(parallel=True)
def _rows(f, A, c):
    out = np.empty(A.shape[0])
    for i in prange(A.shape[0]):
        out[i] = f(A, np.int64(i), c)
    return out


def _sig(A, ret=types.float64):
    return ret(typeof(A), types.int64, types.float64)


def test_parallel_loop_calls_the_kernel_through_the_pointer():
    A = np.arange(12.0).reshape(4, 3)
    expected = A * 2.5
    out = _rows(KernelPointer(_scale_row, _sig(A)), A, 2.5)
    np.testing.assert_array_equal(A, expected)
    np.testing.assert_array_equal(out, expected.sum(axis=1))   # a plain sum per row


def test_type_is_built_once_and_compilation_waits_for_first_use():
    A = np.ones((2, 2))
    ptr = KernelPointer(_scale_row, _sig(A))
    assert typeof(ptr) is typeof(ptr)
    assert typeof(ptr) == types.FunctionType(_sig(A))
    assert ptr._address is None      # nothing compiled by construction
    _rows(ptr, A, 1.0)
    assert ptr._address is not None


def test_wrong_declared_return_type_is_refused():
    # calling code compiled to return float64 through an int64 signature
    # would be undefined: the compilation must refuse it
    A = np.ones((2, 2))
    ptr = KernelPointer(_scale_row, _sig(A, ret=types.int64))
    with pytest.raises(TypingError, match="mismatch of return type"):
        ptr.__wrapper_address__()
    assert ptr._address is None
