"""Generated straight-line kernels lowered to LLVM IR directly, as Numba
intrinsics.

Numba types and lowers a function statement by statement in Python: about
1.5 ms per statement of the generated implicit-backward kernels
(``numbaot.cpu._implicit_codegen``), 4.6 of the 5.4 s that ``_cg_16`` took
to compile (LLVM took the rest).  Those kernels use a small subset of
Python on flat float arrays, so ``lower_kernel`` translates their source
text (the same text, the one definition of the algorithm) to LLVM IR with
llvmlite, with no typing pass, and ``kernel_intrinsic`` wraps the result as
an ``@intrinsic``: a jitted caller defines the IR function in its own module
once and calls it.  LLVM then optimises and vectorises it as it did Numba's
lowering of the same text.

The subset (anything else raises ``NotImplementedError`` naming the
construct):

* one ``def`` whose parameters are float64 or float32 arrays, 1-D and
  contiguous (each a pointer to its first element), integers (int64),
  floats (float64) and booleans;
* statements: assignment to a name or to ``A[index]`` (``A`` an array
  parameter; a float64 value stored in a float32 array rounds, as
  NumPy's), augmented assignment (``+=``, ``-=``, ``*=``), ``for x in
  range(stop)``, ``while``, ``if``/``else``, ``return`` / ``return None``;
* expressions: int, float and bool literals, names, ``A[index]`` (an
  element of a float32 array only inside ``np.float64(...)``: no
  arithmetic runs in float32), ``+ - *
  /`` (Python's true division; int with float is float), ``&`` and ``|``
  on booleans or ints, ``and`` / ``or``, ``not``, unary ``-``, one
  comparison ``< <= > >= == !=`` (ordered on floats, as in Python: false
  with a NaN, except ``!=``), ``a if c else b``, ``math.sqrt``, ``abs``,
  ``min`` / ``max`` of two values, ``np.float64``.  ``and``, ``or`` and
  ``a if c else b`` short-circuit as in Python where an operand reads an
  array element (an index may be valid on one side only); elsewhere both
  sides are computed (they have no effects) into a plain and / or /
  select.

A name keeps the type of its first assignment (an int assigned to a float
name is converted; a float to an int name is refused).  Indices are
neither bounds-checked nor wrapped around when negative (Python would
wrap): the generated kernels index inside the work item's arrays, from 0
up, by construction (``numbaot.cpu._implicit_codegen``), which Numba's
own lowering (``boundscheck`` off) did not check either.  Floating-point
instructions carry ``_config.FASTMATH``, the flags of ``JIT_OPTIONS``.
``vectorize=False`` marks every ``for`` loop of a kernel not to be
vectorised (``llvm.loop.vectorize.enable``).
"""
import ast
import inspect

from llvmlite import ir
from numba.core import types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from .._config import FASTMATH

#: raise when the lowering changes: part of the digest that keys the cached
#: callers (``numbaot.cpu._implicit_unrolled._size_digest``), since Numba's
#: disk cache does not see an intrinsic's code
IR_VERSION = 3

_F64 = ir.DoubleType()
_F32 = ir.FloatType()
_I64 = ir.IntType(64)
_I1 = ir.IntType(1)
_KIND = {"f64": _F64, "i64": _I64, "i1": _I1, "p64": _F64.as_pointer(),
         "p32": _F32.as_pointer()}
_FLAGS = tuple(sorted(FASTMATH)) if not isinstance(FASTMATH, bool) else (
    ("fast",) if FASTMATH else ())


def _unsupported(node, what="construct"):
    return NotImplementedError(
        f"numbaot.cpu._irlower: unsupported {what} {ast.unparse(node)!r} "
        f"(line {getattr(node, 'lineno', '?')})")


class _Lowering:
    """One function's lowering: locals in entry-block allocas (LLVM's
    mem2reg makes them registers), values as (llvm value, kind) pairs with
    kind 'f64', 'i64' or 'i1'."""

    def __init__(self, fn, node, kinds, vectorize=True):
        self.fn = fn
        self.vectorize = vectorize
        self.entry = fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)
        self.arrays = {}
        self.vars = {}
        for (arg, kind), name in zip(zip(fn.args, kinds), (a.arg for a in node.args.args)):
            if kind in ("p64", "p32"):
                self.arrays[name] = (arg, kind)
            else:
                slot = self.b.alloca(_KIND[kind], name=name)
                self.b.store(arg, slot)
                self.vars[name] = (slot, kind)

    # -- helpers ----------------------------------------------------------
    def _fp(self, inst):
        for f in _FLAGS:
            inst.flags.append(f)
        return inst

    def _slot(self, name, kind):
        """The alloca of ``name`` (made in the entry block at first use)."""
        if name not in self.vars:
            if kind not in ("f64", "i64", "i1"):
                raise NotImplementedError(
                    f"numbaot.cpu._irlower: {name!r} would hold a {kind} value; wrap float32 "
                    "array elements in np.float64(...)")
            with self.b.goto_block(self.entry):
                self.b.position_at_start(self.entry)
                slot = self.b.alloca(_KIND[kind], name=name)
            self.vars[name] = (slot, kind)
        return self.vars[name]

    def _to(self, val, kind, node):
        """``val`` as ``kind``: int and bool to float, bool to int; a
        float32 value (an element of a float32 array) only inside
        ``np.float64(...)`` (``_call``), so no arithmetic runs in float32."""
        v, k = val
        if k == kind:
            return v
        if kind == "f64" and k in ("i64", "i1"):
            return self.b.sitofp(v, _F64) if k == "i64" else self.b.uitofp(v, _F64)
        if kind == "i64" and k == "i1":
            return self.b.zext(v, _I64)
        raise _unsupported(node, f"conversion {k} -> {kind} in")

    def _ptr(self, node):
        """Address of ``A[index]`` and the element's kind ('f64' or 'f32')
        for a Subscript node on an array parameter ``A``."""
        if not isinstance(node.value, ast.Name) or node.value.id not in self.arrays:
            raise _unsupported(node, "subscript")
        ptr, kind = self.arrays[node.value.id]
        idx = self._to(self.expr(node.slice), "i64", node)
        return self.b.gep(ptr, [idx], inbounds=True), "f" + kind[1:]

    # -- expressions --------------------------------------------------------
    def expr(self, node):
        b = self.b
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return ir.Constant(_I1, int(v)), "i1"
            if isinstance(v, int):
                return ir.Constant(_I64, v), "i64"
            if isinstance(v, float):
                return ir.Constant(_F64, v), "f64"
            raise _unsupported(node, "literal")
        if isinstance(node, ast.Name):
            if node.id not in self.vars:
                raise _unsupported(node, "name (not assigned before use)")
            slot, kind = self.vars[node.id]
            return b.load(slot), kind
        if isinstance(node, ast.Subscript):
            ptr, kind = self._ptr(node)
            return b.load(ptr), kind
        if isinstance(node, ast.BinOp):
            return self._binop(node.op, self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            acc = self._to(self.expr(node.values[0]), "i1", node)
            for v in node.values[1:]:
                if _reads_memory(v):   # Python's short circuit: read only when needed
                    acc = self._branches(acc, lambda: self._to(self.expr(v), "i1", node),
                                         is_and)
                else:   # both sides: no effects, and LLVM gets a plain and / or
                    acc = (b.and_ if is_and else b.or_)(acc, self._to(self.expr(v), "i1", node))
            return acc, "i1"
        if isinstance(node, ast.UnaryOp):
            val = self.expr(node.operand)
            if isinstance(node.op, ast.Not):
                return b.xor(self._to(val, "i1", node), ir.Constant(_I1, 1)), "i1"
            if isinstance(node.op, ast.USub):
                if val[1] == "i64":
                    return b.neg(val[0]), "i64"
                return self._fp(b.fsub(ir.Constant(_F64, -0.0), self._to(val, "f64", node))), "f64"
            raise _unsupported(node, "unary operator")
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise _unsupported(node, "chained comparison")
            return self._compare(node.ops[0], self.expr(node.left),
                                 self.expr(node.comparators[0]), node)
        if isinstance(node, ast.IfExp):
            cond = self._to(self.expr(node.test), "i1", node)
            if _reads_memory(node.body) or _reads_memory(node.orelse):
                # only the arm taken runs (an index may be valid on one side only)
                return self._if_else(cond, node.body, node.orelse, node)
            x, y = self.expr(node.body), self.expr(node.orelse)
            kind = x[1] if x[1] == y[1] else "f64"
            return b.select(cond, self._to(x, kind, node), self._to(y, kind, node)), kind
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _unsupported(node, "expression")

    def _branches(self, left, right, is_and):
        """``left and right()`` / ``left or right()`` on i1 values with
        Python's short circuit: ``right`` is lowered in a block entered only
        when ``left`` does not decide."""
        b = self.b
        start = b.block
        rhs = b.append_basic_block("bool.rhs")
        end = b.append_basic_block("bool.end")
        if is_and:
            b.cbranch(left, rhs, end)
        else:
            b.cbranch(left, end, rhs)
        b.position_at_end(rhs)
        r = right()
        rhs_end = b.block
        b.branch(end)
        b.position_at_end(end)
        phi = b.phi(_I1)
        phi.add_incoming(left, start)
        phi.add_incoming(r, rhs_end)
        return phi

    def _if_else(self, cond, body, orelse, node):
        """``body if cond else orelse`` (expressions), each arm lowered in its
        own blocks (run only when taken), the result a phi of their values
        converted to a common kind (equal kinds, else float64)."""
        b = self.b
        t_blk = b.append_basic_block("ifexp.then")
        o_blk = b.append_basic_block("ifexp.else")
        end = b.append_basic_block("ifexp.end")
        b.cbranch(cond, t_blk, o_blk)
        b.position_at_end(t_blk)
        x = self.expr(body)
        t_last = b.block   # an arm may have opened blocks of its own
        b.position_at_end(o_blk)
        y = self.expr(orelse)
        o_last = b.block
        kind = x[1] if x[1] == y[1] else "f64"
        # the conversions at the end of each arm, then the jumps to the join
        b.position_at_end(t_last)
        xv = self._to(x, kind, node)
        t_end = b.block
        b.branch(end)
        b.position_at_end(o_last)
        yv = self._to(y, kind, node)
        o_end = b.block
        b.branch(end)
        b.position_at_end(end)
        phi = b.phi(_KIND[kind])
        phi.add_incoming(xv, t_end)
        phi.add_incoming(yv, o_end)
        return phi, kind

    def _binop(self, op, x, y, node):
        b = self.b
        if isinstance(op, (ast.BitAnd, ast.BitOr)):
            if x[1] != y[1] or x[1] not in ("i1", "i64"):
                raise _unsupported(node, "operands of & / |")
            return (b.and_ if isinstance(op, ast.BitAnd) else b.or_)(x[0], y[0]), x[1]
        if isinstance(op, ast.Div):
            kind = "f64"
        else:   # bools count as ints (True + 1 == 2), as in Python
            kind = "i64" if x[1] in ("i64", "i1") and y[1] in ("i64", "i1") else "f64"
        u, v = self._to(x, kind, node), self._to(y, kind, node)
        if kind == "i64":
            ops = {ast.Add: b.add, ast.Sub: b.sub, ast.Mult: b.mul}
        else:
            ops = {ast.Add: b.fadd, ast.Sub: b.fsub, ast.Mult: b.fmul, ast.Div: b.fdiv}
        if type(op) not in ops:
            raise _unsupported(node, "binary operator")
        res = ops[type(op)](u, v)
        return (self._fp(res) if kind == "f64" else res), kind

    _CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}

    def _compare(self, op, x, y, node):
        if type(op) not in self._CMP:
            raise _unsupported(node, "comparison")
        sym = self._CMP[type(op)]
        if x[1] in ("i64", "i1") and y[1] in ("i64", "i1"):
            u, v = self._to(x, "i64", node), self._to(y, "i64", node)
            return self.b.icmp_signed(sym, u, v), "i1"
        u, v = self._to(x, "f64", node), self._to(y, "f64", node)
        if sym == "!=":
            return self._fp(self.b.fcmp_unordered(sym, u, v)), "i1"
        return self._fp(self.b.fcmp_ordered(sym, u, v)), "i1"

    def _call(self, node):
        b = self.b
        name = ast.unparse(node.func)
        args = [self.expr(a) for a in node.args]
        if node.keywords:
            raise _unsupported(node, "call")
        if name in ("math.sqrt", "abs") and len(args) == 1:
            if name == "abs" and args[0][1] == "i64":
                v = args[0][0]
                return b.select(b.icmp_signed("<", v, ir.Constant(_I64, 0)), b.neg(v), v), "i64"
            which = "llvm.sqrt.f64" if name == "math.sqrt" else "llvm.fabs.f64"
            fnty = ir.FunctionType(_F64, [_F64])
            f = b.module.globals.get(which) or ir.Function(b.module, fnty, which)
            call = b.call(f, [self._to(args[0], "f64", node)])
            call.fastmath.update(_FLAGS)
            return call, "f64"
        if name in ("min", "max") and len(args) == 2:
            kind = "i64" if args[0][1] == args[1][1] == "i64" else "f64"
            u, v = self._to(args[0], kind, node), self._to(args[1], kind, node)
            # Python's min(u, v): v if v < u else u; max(u, v): v if v > u else u
            sym = "<" if name == "min" else ">"
            if kind == "i64":
                c = b.icmp_signed(sym, v, u)
            else:
                c = self._fp(b.fcmp_ordered(sym, v, u))
            return b.select(c, v, u), kind
        if name == "np.float64" and len(args) == 1:
            if args[0][1] == "f32":
                return b.fpext(args[0][0], _F64), "f64"
            return self._to(args[0], "f64", node), "f64"
        raise _unsupported(node, "call")

    def _no_vectorize(self, latch):
        """Unless vectorising, mark the loop whose back edge is ``latch``
        not to be vectorised (a distinct ``llvm.loop`` node per loop)."""
        if self.vectorize:
            return
        m = self.b.module
        off = m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.enable"),
                              ir.Constant(_I1, 0)])
        tag = ir.MetaDataString(m, f"numbaot.loop.{len(m.metadata)}")
        loop = m.add_metadata([None, off, tag])
        loop.operands = (loop, off, tag)
        latch.set_metadata("llvm.loop", loop)

    # -- statements ---------------------------------------------------------
    def _store(self, target, val, node):
        if isinstance(target, ast.Name) and target.id in self.arrays:
            raise _unsupported(node, "assignment to an array parameter in")
        if isinstance(target, ast.Name):
            slot, kind = self._slot(target.id, val[1])
            self.b.store(self._to(val, kind, node), slot)
        elif isinstance(target, ast.Subscript):
            ptr, kind = self._ptr(target)
            v = self._to(val, "f64", node)
            # a float64 value stored in a float32 array rounds (as Numba's setitem)
            self.b.store(self.b.fptrunc(v, _F32) if kind == "f32" else v, ptr)
        else:
            raise _unsupported(node, "assignment target")

    def body(self, stmts):
        for s in stmts:
            if self.b.block.is_terminated:
                return
            self.stmt(s)

    def stmt(self, node):
        b = self.b
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                raise _unsupported(node, "assignment")
            self._store(node.targets[0], self.expr(node.value), node)
        elif isinstance(node, ast.AugAssign):
            target = node.target
            load = ast.Name(target.id, ast.Load()) if isinstance(target, ast.Name) else \
                ast.Subscript(target.value, target.slice, ast.Load())
            val = self._binop(node.op, self.expr(load), self.expr(node.value), node)
            self._store(target, val, node)
        elif isinstance(node, ast.For):
            it = node.iter
            if (node.orelse or not isinstance(node.target, ast.Name)
                    or not isinstance(it, ast.Call) or ast.unparse(it.func) != "range"
                    or len(it.args) != 1 or it.keywords):
                raise _unsupported(node, "for loop (only `for x in range(stop)`)")
            stop = self._to(self.expr(it.args[0]), "i64", node)
            slot, _ = self._slot(node.target.id, "i64")
            if self.vars[node.target.id][1] != "i64":
                raise _unsupported(node, "loop variable of a float name in")
            # the counter in its own slot: the body may not change the sequence
            ctr = self._slot(f".ctr{id(node)}", "i64")[0]
            b.store(ir.Constant(_I64, 0), ctr)
            head = b.append_basic_block("for.head")
            loop = b.append_basic_block("for.body")
            end = b.append_basic_block("for.end")
            b.branch(head)
            b.position_at_end(head)
            i = b.load(ctr)
            b.cbranch(b.icmp_signed("<", i, stop), loop, end)
            b.position_at_end(loop)
            b.store(i, slot)
            b.store(b.add(i, ir.Constant(_I64, 1)), ctr)
            self.body(node.body)
            if not b.block.is_terminated:
                self._no_vectorize(b.branch(head))
            b.position_at_end(end)
        elif isinstance(node, ast.While):
            if node.orelse:
                raise _unsupported(node, "while ... else")
            head = b.append_basic_block("while.head")
            loop = b.append_basic_block("while.body")
            end = b.append_basic_block("while.end")
            b.branch(head)
            b.position_at_end(head)
            b.cbranch(self._to(self.expr(node.test), "i1", node), loop, end)
            b.position_at_end(loop)
            self.body(node.body)
            if not b.block.is_terminated:
                b.branch(head)
            b.position_at_end(end)
        elif isinstance(node, ast.If):
            cond = self._to(self.expr(node.test), "i1", node)
            then = b.append_basic_block("if.then")
            other = b.append_basic_block("if.else")
            end = b.append_basic_block("if.end")
            b.cbranch(cond, then, other)
            for blk, stmts in ((then, node.body), (other, node.orelse)):
                b.position_at_end(blk)
                self.body(stmts)
                if not b.block.is_terminated:
                    b.branch(end)
            b.position_at_end(end)
        elif isinstance(node, ast.Return):
            if node.value is not None and not (isinstance(node.value, ast.Constant)
                                               and node.value.value is None):
                raise _unsupported(node, "return value")
            b.ret_void()
        elif isinstance(node, ast.Pass):
            pass
        else:
            raise _unsupported(node, "statement")


def _reads_memory(node):
    """Whether the expression ``node`` reads an array element."""
    return any(isinstance(n, ast.Subscript) for n in ast.walk(node))


def parse_kernel(source):
    """The ``ast.FunctionDef`` of the one function defined in ``source``."""
    mod = ast.parse(source)
    fns = [n for n in mod.body if isinstance(n, ast.FunctionDef)]
    if len(fns) != 1 or len(mod.body) != 1:
        raise ValueError("lower_kernel: source must define exactly one function")
    return fns[0]


def lower_kernel(module, node, kinds, name, vectorize=True):
    """Define ``name`` in the llvmlite ``module`` from the function ``node``
    (``parse_kernel``): void, internal linkage, parameters of the kinds
    ``kinds`` ('p64' / 'p32' for a float64 / float32 array, 'i64', 'f64',
    'i1', in the order of ``node``'s parameters).  ``vectorize=False``
    marks its ``for`` loops not to be vectorised.  Returns the ``ir.Function``; when the
    module already defines ``name``, that one."""
    if name in module.globals:
        return module.globals[name]
    if len(kinds) != len(node.args.args) or not set(kinds) <= set(_KIND):
        raise ValueError(f"lower_kernel: kinds {kinds} do not fit {node.name}'s parameters")
    fnty = ir.FunctionType(ir.VoidType(), [_KIND[k] for k in kinds])
    fn = ir.Function(module, fnty, name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    low = _Lowering(fn, node, kinds, vectorize)
    low.body(node.body)
    if not low.b.block.is_terminated:
        low.b.ret_void()
    return fn


def _kind_of(ty):
    if isinstance(ty, types.Array):
        if ty.ndim == 1 and ty.layout == "C" and ty.dtype in (types.float64, types.float32):
            return "p64" if ty.dtype == types.float64 else "p32"
        return None
    if isinstance(ty, types.Boolean):
        return "i1"
    if isinstance(ty, types.Integer):
        return "i64"
    if isinstance(ty, types.Float):
        return "f64"
    return None


_CAST = {"i64": types.int64, "f64": types.float64, "i1": types.boolean}


def kernel_intrinsic(source, drop=0, vectorize=True, name=None):
    """A Numba intrinsic running the function defined in ``source`` (the
    subset above), lowered by ``lower_kernel``.  The text is parsed when a
    caller first compiles (only its ``def`` line before: importing the
    kernels of every size parses nothing big).  Its first ``drop``
    arguments are accepted and ignored (the per-size bindings' ``N``).
    Arguments: 1-D C-contiguous float64 or float32 arrays
    where the source has arrays, integers, floats and booleans where it has
    scalars (converted to int64, float64, bool); returns None; a call with
    other types fails to type (Numba's ``TypingError``).  ``vectorize``: as
    in ``lower_kernel``.  ``name``: the intrinsic's name (default: the
    function's); the result's ``kernel_name`` is the lowered function's."""
    # the parameters from the def line alone; the body when a caller compiles
    node = parse_kernel(source.lstrip().split("\n", 1)[0] + "\n    pass\n")
    n_args = len(node.args.args)
    symbol = f"numbaot_ir.{node.name}"
    parsed = []

    def tree():
        if not parsed:
            parsed.append(parse_kernel(source))
        return parsed[0]

    def typer(typingctx, *args):
        if len(args) != n_args + drop:
            raise TypingError(f"{node.name} takes {n_args + drop} arguments, got {len(args)}")
        kinds = [_kind_of(t) for t in args[drop:]]
        if None in kinds:
            raise TypingError(f"{node.name}: expected 1-D C-contiguous float64 or float32 "
                              f"arrays, integers, floats and booleans, got {args}")
        sig = types.none(*args)

        def codegen(context, builder, signature, llargs):
            vals = []
            for ty, kind, v in zip(signature.args[drop:], kinds, llargs[drop:]):
                if kind in ("p64", "p32"):
                    vals.append(context.make_array(ty)(context, builder, v).data)
                else:
                    vals.append(context.cast(builder, v, ty, _CAST[kind]))
            fn = lower_kernel(builder.module, tree(), kinds, symbol + "." + "_".join(kinds),
                              vectorize)
            builder.call(fn, vals)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = name or node.name
    # explicit parameters: Numba folds a call's arguments by the typer's
    # signature (a *args typer would take them as one tuple)
    P = inspect.Parameter
    typer.__signature__ = inspect.Signature(
        [P("typingctx", P.POSITIONAL_OR_KEYWORD)]
        + [P(f"a{k}", P.POSITIONAL_OR_KEYWORD) for k in range(n_args + drop)])
    intr = intrinsic(typer)
    intr.kernel_name = node.name
    return intr
