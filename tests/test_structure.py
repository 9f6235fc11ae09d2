"""The package's shape: layering, launcher parity, kernel options, docstrings.

These read the source (``ast``) and the imported modules; they test the
contracts that DESIGN.md section 2 states, so that the layout cannot drift
back by accretion:

* no import cycle among numbaot's modules (module-level imports);
* no module imports a private name (``_x``) from another numbaot module, or
  reaches one through a module alias (``mod._x``);
* every topic with a CPU and a CUDA launcher module lists the same launchers
  (``LAUNCHERS``) with the same signatures;
* every CPU kernel's options come from ``numbaot._config``;
* no Python code (the package's, the tests', the benchmarks', the
  examples') names a kernel compiled without a CPython wrapper
  (``_config.INNER``): calling one from Python crashes the interpreter;
* every public function's numpydoc ``Parameters`` names exactly its
  signature's parameters.
"""
import ast
import importlib
import inspect
import pathlib
import re

import pytest

import numbaot

PKG = pathlib.Path(numbaot.__file__).parent
MODULE_FILES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in MODULE_FILES}


def _resolve(current, node):
    """Absolute module named by an ImportFrom node inside module ``current``."""
    if node.level == 0:
        return node.module or ""
    is_pkg = MODULES[current].name == "__init__.py"
    base = current.split(".")
    drop = node.level - 1 if is_pkg else node.level
    base = base[: len(base) - drop] if drop else base
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name, module_level_only):
    """(imported module, imported names) pairs of module ``name``."""
    tree = ast.parse(MODULES[name].read_text())
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            out.append((_resolve(name, node), [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def _numbaot_targets(mod, names):
    """The numbaot modules an import statement loads: ``from pkg import sub``
    loads ``pkg.sub`` when that is a module."""
    targets = []
    if mod in MODULES:
        targets.append(mod)
    for n in names:
        if f"{mod}.{n}" in MODULES:
            targets.append(f"{mod}.{n}")
    return targets


def test_no_import_cycles():
    graph = {}
    for name in MODULES:
        deps = set()
        for mod, names in _imports(name, module_level_only=True):
            deps.update(t for t in _numbaot_targets(mod, names) if t != name)
        graph[name] = deps
    # a package's __init__ importing its own submodules is a re-export, not a cycle
    for name in graph:
        graph[name] = {d for d in graph[name] if not name.startswith(d + ".")}
    state = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for dep in graph.get(node, ()):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])
    assert not cycles, f"import cycles: {cycles}"


def test_no_private_names_across_modules():
    bad = []
    for name in MODULES:
        tree = ast.parse(MODULES[name].read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = _resolve(name, node)
                for a in node.names:
                    if f"{mod}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{mod}.{a.name}"
                    elif mod in MODULES and mod != name and a.name.startswith("_"):
                        bad.append(f"{name} imports {a.name} from {mod}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                bad.append(f"{name} uses {aliases[node.value.id]}.{node.attr}")
    assert not bad, "\n".join(sorted(set(bad)))


def _topics():
    cpu = {p.stem for p in (PKG / "cpu").glob("*.py") if not p.stem.startswith("_")}
    cuda = {p.stem for p in (PKG / "cuda").glob("*.py") if not p.stem.startswith("_")}
    return sorted(cpu & cuda)


#: Topics whose CPU and CUDA launchers do not yet share one contract, with
#: why; strict: the test fails as soon as one of them gains parity.
_PARITY_PENDING = {
}


@pytest.mark.parametrize("topic", [
    pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=_PARITY_PENDING[t]))
    if t in _PARITY_PENDING else t for t in _topics()])
def test_cpu_cuda_launcher_parity(topic):
    pytest.importorskip("numba.cuda")
    cpu = importlib.import_module(f"numbaot.cpu.{topic}")
    cuda = importlib.import_module(f"numbaot.cuda.{topic}")
    assert hasattr(cpu, "LAUNCHERS") and hasattr(cuda, "LAUNCHERS"), (
        f"numbaot.cpu.{topic} and numbaot.cuda.{topic} must both declare LAUNCHERS")
    assert cpu.LAUNCHERS == cuda.LAUNCHERS
    for launcher in cpu.LAUNCHERS:
        c, g = getattr(cpu, launcher), getattr(cuda, launcher)
        sig_c = inspect.signature(getattr(c, "py_func", c))
        sig_g = inspect.signature(getattr(g, "py_func", g))
        assert list(sig_c.parameters) == list(sig_g.parameters), (
            f"{topic}.{launcher}: cpu{sig_c} vs cuda{sig_g}")


def test_cpu_kernel_options_come_from_config():
    from numba.core.registry import CPUDispatcher

    from numbaot import _config

    checked = 0
    for p in sorted((PKG / "cpu").glob("*.py")):
        mod = importlib.import_module(f"numbaot.cpu.{p.stem}" if p.stem != "__init__" else "numbaot.cpu")
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__:
                opts = obj.targetoptions
                assert set(opts.get("fastmath", set())) == set(_config.FASTMATH), obj.py_func
                assert opts.get("error_model") == "numpy", obj.py_func
                assert obj._cache.__class__.__name__ == (
                    "FunctionCache" if _config.CACHE else "NullCache"), obj.py_func
                checked += 1
    assert checked > 20
    src = "\n".join(p.read_text() for p in (PKG / "cpu").glob("*.py"))
    assert not re.search(r"@n?jit\([^)]*\b(cache|fastmath)\s*=", src)


#: decorators whose functions are compiled code: their bodies may call the
#: kernels that have no CPython wrapper
_JIT_DECORATORS = {"njit", "jit", "overload", "overload_method", "intrinsic", "register_jitable"}
#: calls whose arguments name a kernel without calling it (its address, or
#: its source for a serial twin)
_REFERENCE_ONLY = {"address_for", "jit_address", "serial_twin"}


def _host_names(path):
    """(name, line) of every name or attribute read by Python code (outside
    compiled functions, and outside the arguments of ``_REFERENCE_ONLY``
    calls) in the file at ``path``."""
    out = []

    def decorators(fn):
        names = set()
        for d in fn.decorator_list:
            x = d.func if isinstance(d, ast.Call) else d
            while isinstance(x, ast.Attribute):
                names.add(x.attr)
                x = x.value
            if isinstance(x, ast.Name):
                names.add(x.id)
        return names

    def alias(node):
        # ``_x = kernel`` or ``_x = k1 if cond else k2`` at module level:
        # names it, calls nothing
        if node not in top or not isinstance(node, ast.Assign):
            return False
        v = node.value
        return isinstance(v, ast.Name) or (isinstance(v, ast.IfExp) and isinstance(
            v.body, ast.Name) and isinstance(v.orelse, ast.Name))

    def visit(node, compiled):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            compiled = compiled or bool(decorators(node) & _JIT_DECORATORS)
        if alias(node):
            return
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if fname in _REFERENCE_ONLY:
                visit(f, compiled)
                return
        if not compiled and isinstance(getattr(node, "ctx", None), ast.Load):
            if isinstance(node, ast.Name):
                out.append((node.id, node.lineno))
            elif isinstance(node, ast.Attribute):
                out.append((node.attr, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, compiled)

    tree = ast.parse(path.read_text())
    top = set(tree.body)
    visit(tree, False)
    return out


def test_kernels_without_cpython_wrapper_are_not_named_by_python_code():
    """A kernel compiled with ``_config.INNER`` (``no_cpython_wrapper``)
    has no entry point for the interpreter: a call from Python jumps into
    nothing and kills the process.  So no Python code may name one: only
    compiled functions, ``address_for`` / ``jit_address`` / ``serial_twin``
    and aliases (``_x = kernel``, whose name is then checked too) may
    refer to them."""
    from numba.core.registry import CPUDispatcher

    inner = set()
    for p in sorted((PKG / "cpu").glob("*.py")):
        mod = importlib.import_module(f"numbaot.cpu.{p.stem}" if p.stem != "__init__" else "numbaot.cpu")
        for name, obj in vars(mod).items():
            if (isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__
                    and obj.targetoptions.get("no_cpython_wrapper")):
                inner.add(obj.py_func.__name__)
                inner.add(name)
    assert len(inner) > 40
    root = PKG.parent
    files = [p for d in ("numbaot", "tests", "benchmarks", "examples")
             for p in sorted((root / d).rglob("*.py")) if "__pycache__" not in p.parts]
    bad = [f"{p.relative_to(root)}:{line}: {name}"
           for p in files for name, line in _host_names(p) if name in inner]
    assert not bad, "Python code names kernels without a CPython wrapper:\n" + "\n".join(bad)


def _public_functions():
    seen = {}
    for modname in ["numbaot"] + [f"numbaot.{m}" for m in ("bregman", "unbalanced", "utils",
                                                           "gradients", "scan", "implicit",
                                                           "distributed", "partial", "solvers",
                                                           "pot")]:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj):
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return sorted(seen.items())


def _documented_parameters(doc):
    """Names of the entries of a numpydoc Parameters section (``a, b : ...``
    documents both); None without one."""
    lines = inspect.cleandoc(doc).splitlines()
    if "Parameters" not in lines:
        return None
    i = lines.index("Parameters") + 2
    names = []
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1]):
            break
        if line and not line.startswith(" "):
            names.extend(n.strip() for n in line.split(" : ")[0].split(","))
        i += 1
    return names


@pytest.mark.parametrize("qualname,func", _public_functions(), ids=lambda x: x if isinstance(x, str) else "")
def test_docstring_parameters_match_signature(qualname, func):
    documented = _documented_parameters(func.__doc__ or "")
    sig = inspect.signature(func)
    if documented is None and not sig.parameters:
        return  # numpydoc: no Parameters section for a function without parameters
    assert documented is not None, f"{qualname} has no Parameters section"
    expected = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            expected.append(f"**{p.name}")
        elif p.kind is p.VAR_POSITIONAL:
            expected.append(f"*{p.name}")
        else:
            expected.append(p.name)
    assert sorted(documented) == sorted(expected), (
        f"{qualname}: documented {documented}, signature {expected}")
