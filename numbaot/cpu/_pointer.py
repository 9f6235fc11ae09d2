"""Serial kernels passed to parallel ones as function pointers (first call).

Numba links the code of every compiled callee into its caller and optimises
the linked module again, then emits its machine code again; a ``prange``
loop adds three such layers of its own (the loop body's gufunc and two
wrappers).  A large serial work-item kernel called inside a ``prange`` loop
was therefore optimised and emitted five times on a first call: 4 x ~1.3 s
of the 11.8 s first call of ``sinkhorn_operator`` on 2 cores went to the
layers re-processing ``_forward_lanes`` (LLVM timings per library,
docs/performance-notes.md, "First call").

``KernelPointer`` hands such a kernel to the parallel one as an argument of
Numba's first-class function type: the parallel kernel then holds an
indirect call, not the callee's code, and the callee is compiled (or loaded
from Numba's disk cache) once, on its own.  Nothing is baked into the
caller but the signature, so both stay cacheable.  Users: the operator's
work items (``_implicit_forward``: 11.8 -> 7 s) and the blocked log-domain
pass (``sinkhorn.log_chunk``: 8 -> 6 s at 200^2).

Costs: the argument's unboxing, a few microseconds per call of the
parallel kernel; per indirect call, the kernel's C wrapper (it counts the
array arguments in and out), a fraction of a microsecond: call it once per
thread or per work item, not per row.  Where the callee is small, the
saving is too: the blocked Knopp pass gained 0.4 s of its 8 s first call
and seemed to lose run time (not kept).

Rules for a kernel called this way:

* its signature is given in full (``numba.core.typing.Signature``): the
  caller's argument types must match it exactly (cast loop indices with
  ``np.int64``; build array types with ``numba.typeof`` of the arrays the
  launcher holds, so that read-only or non-contiguous inputs get their own
  pointer);
* it must not raise: the call goes through the kernel's C wrapper, which
  cannot carry a Python exception back (numbaot's kernels do not raise;
  ``error_model='numpy'``).
"""
from numba.core import types
from numba.core.types.function_type import WrapperAddressProtocol
from numba.core.typing.typeof import typeof_impl

__all__ = ["KernelPointer"]


class KernelPointer(WrapperAddressProtocol):
    """``dispatcher``'s compilation for ``sig``, passed to a jitted function
    as a first-class function (Numba's wrapper address protocol).  The
    compilation happens on first use (when the caller's argument is unboxed),
    not at construction: building one costs nothing."""

    def __init__(self, dispatcher, sig):
        self._dispatcher = dispatcher
        self._sig = sig
        self._address = None
        self._numba_type = types.FunctionType(sig)

    def signature(self):
        return self._sig

    def __wrapper_address__(self):
        if self._address is None:
            # compiles for the signature's argument types; Numba's typing
            # refuses a kernel whose return type differs from the declared one
            cres = self._dispatcher.get_compile_result(self._sig)
            self._address = cres.library.get_pointer_to_function(
                cres.fndesc.llvm_cfunc_wrapper_name)
        return self._address

    def __repr__(self):
        return f"KernelPointer({self._dispatcher.py_func.__name__}, {self._sig})"


@typeof_impl.register(KernelPointer)
def _typeof_kernel_pointer(val, c):
    # the type built once: Numba's generic rule for the protocol builds a
    # FunctionType of the whole signature on every call (~20 us for 23
    # arguments)
    return val._numba_type
