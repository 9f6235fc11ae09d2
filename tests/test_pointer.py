"""numbaot.cpu._pointer: a serial kernel called from a parallel one through
its address (the operator's work items, the blocked log-domain pass)."""
import numpy as np
import pytest
from numba import njit, prange, typeof, types
from numba.core.errors import TypingError

from numbaot.cpu._pointer import call_at, jit_address

_F8 = types.float64


@njit
def _scale_row(A, i, c):
    s = 0.0
    for j in range(A.shape[1]):
        A[i, j] *= c
        s += A[i, j]
    return s


@njit
def _raises(A, i, c):
    if c < 0.0:
        raise ValueError("negative scale")
    return 0.0


@njit(parallel=True)
def _rows(addr, A, c):
    out = np.empty(A.shape[0])
    for i in prange(A.shape[0]):
        out[i] = call_at(addr, _F8, A, np.int64(i), c)
    return out


@njit
def _once(addr, A, c):
    return call_at(addr, _F8, A, np.int64(0), c)


def _sig(A, ret=types.float64):
    return ret(typeof(A), types.int64, types.float64)


def test_parallel_loop_calls_the_kernel_at_its_address():
    A = np.arange(12.0).reshape(4, 3)
    expected = A * 2.5
    out = _rows(jit_address(_scale_row, _sig(A)), A, 2.5)
    np.testing.assert_array_equal(A, expected)
    np.testing.assert_array_equal(out, expected.sum(axis=1))   # a plain sum per row


def test_address_is_kept_per_kernel_and_signature():
    A = np.ones((2, 2))
    assert jit_address(_scale_row, _sig(A)) == jit_address(_scale_row, _sig(A))
    B = np.ones((2, 2), dtype=np.float32)
    assert jit_address(_scale_row, _sig(B)) != jit_address(_scale_row, _sig(A))


def test_return_type_without_conversion_is_refused():
    # the address is compiled for the declared return type: a float result
    # cannot become a pair, so no address is handed out
    A = np.ones((2, 2))
    with pytest.raises(TypingError):
        jit_address(_scale_row, _sig(A, ret=types.UniTuple(types.int64, 2)))


def test_exceptions_propagate_through_the_call():
    # the call uses Numba's calling convention, which carries the exception
    A = np.ones((2, 2))
    addr = jit_address(_raises, _sig(A))
    assert _once(addr, A, 1.0) == 0.0
    with pytest.raises(ValueError, match="negative scale"):
        _once(addr, A, -1.0)
