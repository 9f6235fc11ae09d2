"""Serial kernels passed to parallel ones as function pointers (first call).

Numba links the code of every compiled callee into its caller and optimises
the linked module again, then emits its machine code again; a ``prange``
loop adds three such layers of its own (the loop body's gufunc and two
wrappers).  A large serial work-item kernel called inside a ``prange`` loop
was therefore optimised and emitted five times on a first call: 4 x ~1.3 s
of the 11.8 s first call of ``sinkhorn_operator`` on 2 cores went to the
layers re-processing ``_forward_lanes`` (LLVM timings per library,
docs/performance-notes.md, "First call").

``call_at`` calls such a kernel through its address instead: the parallel
kernel then holds an indirect call, not the callee's code, and the callee
is compiled (or loaded from Numba's disk cache) once, on its own, when the
launcher asks for its address (``jit_address``).  The address travels as
an int64 argument (nothing is baked into the caller, which stays
cacheable; an int costs nothing to unbox) and the call uses Numba's own
calling convention, as a direct call does (no C wrapper, no reference
counts of the arguments; exceptions propagate).  Users: the operator's
work items (``_implicit_forward``: 12.5-13 -> 7.2 s), the implicit
backward's (``_implicit_unrolled``: 7.1 -> 3.8 s at n = 16, its generated
kernels lowered by ``_irlower``), the blocked log-domain pass
(``sinkhorn.log_chunk``: 7.0-7.4 -> 6.0 s at 200^2), the blocked
Knopp and unbalanced passes (``sinkhorn.knopp_chunk``,
``unbalanced.uot_chunk``: 7.6 -> 5.9-6.2 s at 400^2), the partial-OT pass
(``partial.partial_chunk``: 7.3 -> 4.5-4.7 s), the unbalanced column
update (``unbalanced.uot_col_items``: -0.6 s; now ``uot_col_chunk``, a
chunk kernel of the unbalanced pass's parallel loop ``uot_pass_at``: no
parallel kernel of its own, 0.84x the first call at 400^2) and every
other parallel step of the blocked Knopp solve through one parallel loop
(``sinkhorn.knopp_pass_at`` with the prepare, plan and loss chunk kernels:
``sinkhorn`` at 400^2 5.7 -> 2.7 s with the serial merge and the row
sweep in kernels of their own).  The blocked runs (``knopp_run``,
``uot_run``, ``partial_run``) call their parallel loop at its address
too.

What it costs: the callee no longer sees its caller's context.  LLVM
cannot inline it, so it cannot know that scratch arrays the caller just
allocated alias nothing else, nor fold the caller's constants into it:
the one-call Knopp run called this way from ``knopp_small_call`` ran 1.2-1.4
times slower at 128^2 (kept linked).  Call it once per thread or per work
item, where the callee does enough work for that not to matter, and time
the run against the linked version.

Rules: the caller's argument types must be exactly those of the signature
the address was compiled for (cast loop indices with ``np.int64``; build
array types with ``numba.typeof`` of the arrays the launcher holds, so that
read-only or non-contiguous inputs get their own address), and the return
type given to ``call_at`` must be the one ``jit_address`` compiled for.
"""
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["NONE", "address_for", "call_at", "jit_address"]

#: the return type of the work-item kernels that return nothing (``call_at``'s
#: ``ret``, referenced as a global of the calling kernel)
NONE = types.none

_ADDRESSES = {}


def jit_address(dispatcher, sig):
    """The address (int) of ``dispatcher``'s compiled function for the
    argument types of ``sig`` (a ``numba.core.typing.Signature``), in
    Numba's calling convention, compiling it or loading it from the disk
    cache on the first request; kept per (dispatcher, sig).

    Raises
    ------
    numba.core.errors.TypingError
        When the kernel does not compile for these types, or its result does
        not convert to ``sig``'s return type."""
    key = (dispatcher, sig)
    addr = _ADDRESSES.get(key)
    if addr is None:
        # compiled with ``sig``'s return type: Numba casts the kernel's
        # result to it, or raises TypingError when no conversion exists
        cres = dispatcher.get_compile_result(sig)
        addr = _ADDRESSES[key] = cres.library.get_pointer_to_function(
            cres.fndesc.llvm_func_name)
    return addr


_BY_FLAGS = {}


def address_for(kernel, signature, *arrays):
    """``jit_address(kernel, signature(*arrays))``, kept per kernel and per
    what the arrays' Numba types depend on (dtype, dimensions, and the
    flags word: contiguity, writeability, alignment), so that a launcher
    pays a dictionary lookup, not the arrays' ``typeof`` and the
    signature's hash (a few microseconds).  The key is built in a plain
    loop (0.48 µs for three arrays; a generator of per-flag tuples took
    0.83 µs)."""
    key = [kernel]
    for x in arrays:
        key += (x.dtype, x.ndim, x.flags.num)
    key = tuple(key)
    addr = _BY_FLAGS.get(key)
    if addr is None:
        addr = _BY_FLAGS[key] = jit_address(kernel, signature(*arrays))
    return addr


@intrinsic
def call_at(typingctx, addr, ret, *args):
    """``f(*args)`` inside a jitted kernel, for the compiled function f at
    ``addr`` (int64, from :func:`jit_address`) returning the type ``ret``
    (a Numba type referenced as a global of the kernel, e.g. ``types.none``);
    ``args`` exactly the argument types f was compiled for.  Passed as
    separate arguments, not as a tuple: a tuple built in the kernel counts
    each array in and out (72 against 6 ns per call with 7 arrays)."""
    rtype = ret.instance_type
    atypes = tuple(args)

    def codegen(context, builder, signature, llargs):
        # the star arguments arrive packed in one tuple value
        argvals = [builder.extract_value(llargs[2], i) for i in range(len(atypes))]
        fnty = context.call_conv.get_function_type(rtype, atypes)
        fptr = builder.inttoptr(llargs[0], fnty.as_pointer())
        status, res = context.call_conv.call_function(builder, fptr, rtype, atypes, argvals)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return res

    return rtype(addr, ret, types.StarArgTuple(atypes)), codegen
