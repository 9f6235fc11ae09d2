"""Run unchanged POT code on numbaot: ``numbaot.pot.patch()``.

``patch()`` replaces POT's entropic solvers (and ``ot.dist``, which forms
their costs) by numbaot's, everywhere POT holds them: the public names
(``ot.sinkhorn``, ``ot.bregman.sinkhorn_log``,
``ot.unbalanced.sinkhorn_unbalanced``, ``ot.solve``, ``ot.dist``, ...) and
the bindings POT's own modules made at import time (``ot.da``, ``ot.gromov``,
``ot.coot``, ``ot.solvers``, ``ot.partial``, ``ot.optim``, ...), so that
``ot.da.SinkhornTransport().fit(...)`` or an entropic Gromov-Wasserstein run
spend their Sinkhorn time in numbaot's kernels without a changed line.
``unpatch()`` puts every original binding back; ``with patched(): ...``
does both around a block.

What runs where
---------------
Every replaced binding is a thin wrapper that calls numbaot's function of
the same name and signature (POT 0.9.7's) when its arguments are

* exact NumPy arrays of float32 or float64, NumPy and Python scalars,
  strings, ``None`` and callables (a metric), and lists, tuples and dicts of
  those as options (``unbalanced=(1., 2.)``, ``batch_size=(10, 10)``,
  ``warmstart=(u, v)``);
* or numba CUDA device arrays (``numba.cuda.to_device``, the simulator's
  too), which POT does not take: these calls run on numbaot's CUDA kernels,
  and numbaot's errors are raised as they are.

It calls POT's original instead, unchanged, when

* an array argument is anything else: a torch, JAX, CuPy or TensorFlow
  tensor (POT's backends), an ndarray subclass (masked array, memmap,
  matrix, numba's mapped arrays), an array of another dtype (integers,
  float16, longdouble, complex...), or a list or tuple passed where POT
  takes an array (``a``, ``b``, ``M``, ``X_s``, ``x1``, ...): POT's own
  dtype rules and list handling (or its error) apply;
* the call sets ``solve_sample``'s ``scaler``: POT 0.9.7 applies it to
  ``X_a`` only, numbaot to both point clouds;
* numbaot rejects a host call with ``ValueError``, ``TypeError`` or
  ``NotImplementedError`` (an option numbaot does not implement, or an input
  numbaot refuses by design but POT accepts, such as a cost with ``inf``
  entries or histograms of unequal mass): a patched POT pipeline never fails
  where the unpatched one works.

These are the places where numbaot's strictness yields to POT's behaviour.
The results of host calls are POT's types: ``ot.solve`` and
``ot.solve_sample`` return ``ot.utils.OTResult`` (numbaot's values), and
lazy plans (``res.lazy_plan``, ``log['lazy_plan']`` of the empirical
solvers) are POT's ``ot.utils.LazyTensor``, made by POT's
``get_sinkhorn_lazytensor`` from numbaot's points, log-scalings, metric and
``reg``.  Device calls return numbaot's own objects (POT's ``OTResult``
reduces its plan with NumPy).

``stats()`` counts the calls that ran on numbaot and those that went back to
POT, per function.

BLAS on one thread inside POT loops that alternate it with Sinkhorn
-------------------------------------------------------------------
``ot.da.sinkhorn_lpl1_mm`` (``SinkhornLpl1Transport.fit``) multiplies two
matrices with NumPy's BLAS before each of its Sinkhorn solves.  OpenBLAS's
worker threads keep spinning for about 0.1 s after such a product, and
numbaot's parallel kernels then share the cores with them: on 2 cores the
patched fit at 1000 samples took 1.2-1.45x POT's own time.  While patched,
these POT functions (``BLAS_ONE_THREAD``) run with BLAS limited to one
thread (``threadpoolctl``, restored on return and on an exception) when the
cost ``M`` has more entries than ``numbaot._config.SMALL_MAX_ENTRIES``
(below it numbaot's solve runs on one thread and meets no contention).
Their BLAS products are thin (the label matrix has one column per class),
so one thread costs them little.
BLAS outside these calls is untouched (the limit, like any BLAS thread
setting, is process-wide while such a call runs); to limit it around a loop
of your own, see the README ("numbaot in a loop with NumPy's BLAS").

Limits
------
* Names bound before ``patch()`` in the user's own modules
  (``from ot import sinkhorn``) keep POT's function: ``patch()`` replaces
  the bindings held by POT's modules (the ones loaded when it runs; it
  imports the usual subpackages first), not copies held elsewhere.  A POT
  module imported while patched copies the wrappers (``ot.dr``'s
  ``sinkhorn_bregman``): ``unpatch()`` restores those too (every ``ot.*``
  module is searched for the wrappers); copies in the user's modules keep
  the wrapper, which still works.
* ``import numbaot`` never imports POT; ``patch()`` does.
* It was written against POT 0.9.7; with another version it warns once and
  replaces what it finds with the same names.
"""
import contextlib
import functools
import importlib
import inspect
import sys
import threading
import warnings

import numpy as np

from ._lazy import LazyPlan as _LazyPlan
from ._result import OTResult as _OTResult

__all__ = ["patch", "unpatch", "patched", "is_patched", "stats"]

#: POT subpackages imported before patching (so their import-time bindings
#: exist and are replaced); missing optional ones are skipped.
POT_MODULES = ("ot.bregman", "ot.unbalanced", "ot.partial", "ot.solvers", "ot.da", "ot.gromov",
               "ot.coot", "ot.optim", "ot.lowrank", "ot.factored", "ot.smooth", "ot.utils")

#: (numbaot module, POT module[, names]) whose public functions of the same
#: name (those in ``names`` only, when given) are paired; numbaot names POT
#: lacks are skipped.  ``ot.utils.dist``: POT's pipelines form their costs
#: with it (``BaseTransport.fit``, ``ot.solve_sample``'s callers, ...) right
#: before a Sinkhorn solve, and its BLAS product left OpenBLAS's workers
#: spinning on the cores of numbaot's parallel kernels (``numbaot.dist``
#: uses no BLAS for up to 64 features).
_PAIRS = (("numbaot.bregman", "ot.bregman"), ("numbaot.unbalanced", "ot.unbalanced"),
          ("numbaot.partial", "ot.partial"), ("numbaot.solvers", "ot.solvers"),
          ("numbaot.utils", "ot.utils", ("dist",)))

#: POT functions that alternate a multi-threaded BLAS product with a
#: Sinkhorn solve on a cost ``M``: while patched they run with BLAS on one
#: thread for costs above SMALL_MAX_ENTRIES entries (module docstring)
BLAS_ONE_THREAD = (("ot.da", "sinkhorn_lpl1_mm"),)

_TESTED_POT = "0.9.7"
_lock = threading.RLock()
_replaced = []            # (module, attribute, original) in patch order
_recorded = set()         # (module name, attribute) of the entries of _replaced
_wrappers = {}            # POT original -> its wrapper (one per function, kept across patches)
_wrapper_ids = {}         # id(wrapper) -> wrapper (the wrappers are kept alive: ids are unique)
_counts = {}              # name -> {"numbaot": n, "pot": n}
_blocks = 0               # patched() blocks open, in all threads
_explicit = False         # patch() called directly since the last unpatch()

#: dtypes of the NumPy arrays numbaot takes from POT's callers (others go to POT)
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: parameter names under which POT 0.9.7's replaced functions take arrays:
#: a list or tuple there is POT's (its ``list_to_array``, or its error)
_ARRAY_PARAMS = frozenset(("a", "b", "M", "A", "weights", "c", "X_s", "X_t", "X_a", "X_b",
                           "x1", "x2", "w", "plan_init", "X_init", "projections"))

#: options whose POT 0.9.7 behaviour numbaot does not copy: a call that sets
#: one goes to POT.  ``scaler`` of ``solve_sample``: POT 0.9.7 applies it to
#: ``X_a`` only (its code reads ``X_a, Xb = apply_scaler(...)``), numbaot
#: to both point clouds
_POT_OPTIONS = frozenset(("scaler",))

_HOST, _DEVICE, _POT = 0, 1, 2      # where an argument sends a call (the largest wins)


def _is_numba_device_array(x):
    """A numba CUDA device array (the simulator's ``FakeCUDAArray`` too),
    recognised by its type's module, without importing ``numba.cuda``."""
    module = getattr(type(x), "__module__", None) or ""
    if not (module.startswith("numba.cuda.") or module.startswith("numba_cuda.")):
        return False
    return hasattr(x, "__cuda_array_interface__") or bool(getattr(x, "__cuda_ndarray__", False))


def _where(x, array_param=False, nested=False):
    """Where the argument ``x`` sends a call: ``_HOST`` (numbaot, POT's
    original if numbaot refuses), ``_DEVICE`` (numbaot) or ``_POT`` (module
    docstring).  ``array_param``: POT takes an array there; ``nested``: an
    item of an option list, tuple or dict."""
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        return _HOST
    if isinstance(x, np.generic):           # a longdouble scalar makes POT's result longdouble
        return _POT if isinstance(x, np.inexact) and x.dtype not in _FLOAT_DTYPES else _HOST
    if type(x) is np.ndarray:
        return _HOST if x.dtype in _FLOAT_DTYPES else _POT
    if isinstance(x, np.ndarray):           # a subclass: masked array, matrix, memmap, mapped...
        return _POT
    if _is_numba_device_array(x):
        return _DEVICE
    if isinstance(x, (list, tuple, dict)):
        if array_param or nested:           # numbers where POT takes an array
            return _POT
        return max((_where(v, nested=True) for v in (x.values() if isinstance(x, dict) else x)),
                   default=_HOST)
    if callable(x) and not hasattr(x, "__array__"):
        return _HOST
    return _POT


def _positional_names(function):
    """Names of the parameters ``function`` takes by position, in order."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in inspect.signature(function).parameters.values()
                 if p.kind in kinds)


def _call_where(names, args, kwargs):
    """Where a call goes (``_HOST``, ``_DEVICE`` or ``_POT``): the largest
    of its arguments' :func:`_where`."""
    where = _HOST
    for i, value in enumerate(args):
        name = names[i] if i < len(names) else None
        if name in _POT_OPTIONS and value is not None:
            return _POT
        w = _where(value, name in _ARRAY_PARAMS)
        if w == _POT:
            return _POT
        where = max(where, w)
    for name, value in kwargs.items():
        if name in _POT_OPTIONS and value is not None:
            return _POT
        w = _where(value, name in _ARRAY_PARAMS)
        if w == _POT:
            return _POT
        where = max(where, w)
    return where


#: the attributes of numbaot's LazyPlan that POT's get_sinkhorn_lazytensor takes
_LAZY_KEYS = ("X_a", "X_b", "f", "g", "metric", "reg")


def _pot_lazy(plan):
    """POT's ``LazyTensor`` of numbaot's lazy plan: POT's own
    ``get_sinkhorn_lazytensor`` (what POT's empirical solvers return) on the
    plan's points, log-scalings, metric and ``reg``; the plan itself when
    POT or the plan lacks them."""
    kwargs = getattr(plan, "kwargs", None)
    if not isinstance(kwargs, dict) or not all(k in kwargs for k in _LAZY_KEYS):
        return plan
    try:
        helper = importlib.import_module("ot.bregman._empirical").get_sinkhorn_lazytensor
    except (ImportError, AttributeError):
        return plan
    return helper(*(kwargs[k] for k in _LAZY_KEYS))


def _pot_result(res, memo):
    """POT's ``ot.utils.OTResult`` with the fields of numbaot's ``res``."""
    from ot.utils import OTResult

    def field(name):
        return _to_pot(getattr(res, "_" + name, None), memo)

    return OTResult(potentials=field("potentials"), value=field("value"),
                    value_linear=field("value_linear"), value_quad=field("value_quad"),
                    plan=field("plan"), log=field("log"), sparse_plan=field("sparse_plan"),
                    lazy_plan=field("lazy_plan"), status=field("status"),
                    batch_size=getattr(res, "_batch_size", 100))


def _to_pot(out, memo, depth=0):
    """numbaot's result ``out`` of a host call with its ``OTResult`` and
    ``LazyPlan`` objects (also inside returned tuples and log dicts) replaced
    by POT's (one POT object per numbaot object, through ``memo``)."""
    if out is None or type(out) is np.ndarray or depth > 6:
        return out
    if id(out) in memo:
        return memo[id(out)][1]
    if isinstance(out, _OTResult):
        new = _pot_result(out, memo)
    elif isinstance(out, _LazyPlan):
        new = _pot_lazy(out)
    elif type(out) is tuple:
        items = [_to_pot(v, memo, depth + 1) for v in out]
        new = out if all(n is v for n, v in zip(items, out)) else tuple(items)
    elif type(out) is dict:                 # numbaot's log, returned to the caller only
        new = out
        for key, value in list(out.items()):
            converted = _to_pot(value, memo, depth + 1)
            if converted is not value:
                out[key] = converted
    else:
        return out
    memo[id(out)] = (out, new)              # out is kept alive: its id stays unique
    return new


def _count(name, where):
    with _lock:
        _counts.setdefault(name, {"numbaot": 0, "pot": 0})[where] += 1


def _register(original, wrapper):
    _wrappers[original] = wrapper
    _wrapper_ids[id(wrapper)] = wrapper
    return wrapper


def _original_of(value):
    """POT's function if ``value`` is one of the wrappers made here, else None."""
    wrapper = _wrapper_ids.get(id(value))
    return wrapper.__pot_original__ if wrapper is not None and wrapper is value else None


def _wrapper(name, ours, original):
    names = _positional_names(original)

    @functools.wraps(original)
    def accelerated(*args, **kwargs):
        where = _call_where(names, args, kwargs)
        if where == _DEVICE:                # POT does not take them: numbaot's errors stand
            out = ours(*args, **kwargs)
            _count(name, "numbaot")
            return out
        if where == _HOST:
            try:
                out = ours(*args, **kwargs)
            except (ValueError, TypeError, NotImplementedError):
                pass
            else:
                _count(name, "numbaot")
                return _to_pot(out, {})
        _count(name, "pot")
        return original(*args, **kwargs)

    accelerated.__numbaot__ = ours
    accelerated.__pot_original__ = original
    return accelerated


_controller = []          # one threadpoolctl.ThreadpoolController, made at first use


def _blas_controller():
    """The process's ThreadpoolController (its library scan costs about
    1 ms, so it is made once; limiting through it then costs ~20 us)."""
    if not _controller:
        from threadpoolctl import ThreadpoolController
        _controller.append(ThreadpoolController())
    return _controller[0]


def _blas_one_thread(original):
    """POT's ``original`` itself, run with BLAS on one thread when its
    argument ``M`` is a NumPy array of more than SMALL_MAX_ENTRIES entries."""
    from . import _config

    signature = inspect.signature(original)

    @functools.wraps(original)
    def accelerated(*args, **kwargs):
        try:
            M = signature.bind_partial(*args, **kwargs).arguments.get("M")
        except TypeError:                         # POT raises its own error
            M = None
        if type(M) is np.ndarray and M.size > _config.SMALL_MAX_ENTRIES:
            with _blas_controller().limit(limits=1, user_api="blas"):
                return original(*args, **kwargs)
        return original(*args, **kwargs)

    accelerated.__pot_original__ = original
    return accelerated


def _pipelines():
    """{POT function object: qualified name} of the BLAS_ONE_THREAD loops."""
    out = {}
    for modname, name in BLAS_ONE_THREAD:
        try:
            theirs = getattr(importlib.import_module(modname), name, None)
        except ImportError:
            continue
        theirs = getattr(theirs, "__pot_original__", theirs)   # already patched
        if callable(theirs):
            out[theirs] = f"{modname}.{name}"
    return out


def _pairs():
    """{POT function object: (qualified name, numbaot function)}."""
    out = {}
    for ours_mod, pot_mod, *names in _PAIRS:
        try:
            ours = importlib.import_module(ours_mod)
            pot = importlib.import_module(pot_mod)
        except ImportError:
            continue
        for name in (names[0] if names else getattr(ours, "__all__", ())):
            theirs = getattr(pot, name, None)
            theirs = getattr(theirs, "__pot_original__", theirs)   # already patched
            if callable(theirs):
                out[theirs] = (f"{pot_mod}.{name}", getattr(ours, name))
    return out


def _check_version(ot, stacklevel):
    """Warn for a POT other than 0.9.7; ``stacklevel`` counts from here
    (the caller of ``patch()`` or of ``with patched():``)."""
    version = getattr(ot, "__version__", "unknown")
    if not str(version).startswith(_TESTED_POT):
        warnings.warn(f"numbaot.pot was written against POT {_TESTED_POT}; POT {version} is "
                      "installed: functions are replaced by name where they exist, and POT's "
                      "own results are the reference for any difference",
                      stacklevel=stacklevel)


def _pot_modules():
    """(name, module) of the loaded ``ot`` and ``ot.*`` modules, by name."""
    return [(name, module) for name, module in sorted(sys.modules.items())
            if module is not None and (name == "ot" or name.startswith("ot."))]


def _record(module, modname, attr, original):
    if (modname, attr) not in _recorded:
        _recorded.add((modname, attr))
        _replaced.append((module, attr, original))


def _replace():
    """Replace the bindings (with ``_lock`` held); what :func:`patch` returns."""
    pairs = _pairs()
    pipelines = _pipelines()
    replaced = {}
    for modname, module in _pot_modules():
        for attr, value in list(vars(module).items()):
            original = _original_of(value)
            if original is not None:          # a wrapper, e.g. copied by a module imported
                _record(module, modname, attr, original)     # while patched: restore it too
                continue
            try:
                hit = value in pairs or value in pipelines
            except TypeError:                 # unhashable
                continue
            if not hit:
                continue
            if value in pairs:
                qualname, ours = pairs[value]
                what = f"{ours.__module__}.{ours.__name__}"
                if value not in _wrappers:
                    _register(value, _wrapper(qualname, ours, value))
            else:
                what = f"{pipelines[value]}, BLAS on one thread"
                if value not in _wrappers:
                    _register(value, _blas_one_thread(value))
            setattr(module, attr, _wrappers[value])
            _record(module, modname, attr, value)
            replaced[f"{modname}.{attr}"] = what
    return replaced


def _patch(verbose, block, stacklevel):
    """:func:`patch` (``block`` False) or the entry of :func:`patched`
    (``block`` True: one more open block)."""
    global _blocks, _explicit
    import ot

    _check_version(ot, stacklevel)
    for mod in POT_MODULES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # optional-dependency notices of POT
                importlib.import_module(mod)
        except ImportError:
            continue
    with _lock:
        replaced = _replace()
        if block:
            _blocks += 1
        else:
            _explicit = True
    if verbose:
        for where, what in replaced.items():
            print(f"numbaot.pot: {where} -> {what}")
    return replaced


def patch(verbose=False):
    """Make POT's entropic solvers run numbaot's implementations.

    Replaces, in every loaded POT module (after importing ``POT_MODULES``),
    each binding of a POT function that numbaot provides under the same
    name (``ot.bregman``, ``ot.unbalanced``, ``ot.partial``, ``ot.solvers``,
    and ``ot.dist``)
    by a wrapper that runs numbaot's function on NumPy float32/float64 and
    numba CUDA device arrays and calls POT's original for other inputs and
    for host calls numbaot rejects (module docstring), returning POT's
    ``OTResult`` and ``LazyTensor`` for host calls; and the POT loops of
    ``BLAS_ONE_THREAD`` by a wrapper that runs POT's own loop with BLAS on
    one thread for a large cost (module docstring).  Idempotent: bindings
    already replaced are left alone (and bindings of the wrappers made by
    POT modules imported since are recorded, for :func:`unpatch`).  POT
    stays patched until :func:`unpatch`, also after ``with patched():``
    blocks close.

    Parameters
    ----------
    verbose : bool, default False
        Print each replaced binding.

    Returns
    -------
    replaced : dict
        ``{"module.attribute": "numbaot function"}`` for the bindings this
        call replaced (``"POT function, BLAS on one thread"`` for the loops
        of ``BLAS_ONE_THREAD``; empty when everything was already patched).

    Raises
    ------
    ImportError
        If POT is not installed.

    Warns
    -----
    UserWarning
        Once per call when the installed POT is not 0.9.7 (pointing at the
        caller's line).

    References
    ----------
    .. [1] POT 0.9.7: R. Flamary et al., "POT: Python Optimal Transport",
       JMLR 22(78), 2021 (the library whose functions are replaced).

    Examples
    --------
    >>> import numpy as np, ot, numbaot.pot
    >>> a = b = np.full(3, 1 / 3); M = 1.0 - np.eye(3)
    >>> with numbaot.pot.patched():
    ...     G = ot.sinkhorn(a, b, M, 1.0)
    >>> ot.sinkhorn is ot.bregman._sinkhorn.sinkhorn    # restored
    True
    >>> bool(np.allclose(G, ot.sinkhorn(a, b, M, 1.0)))
    True
    """
    # stacklevel: _check_version, _patch, patch, the caller
    return _patch(verbose, block=False, stacklevel=4)


def _unpatch():
    """Restore every binding (with ``_lock`` held); what :func:`unpatch` returns."""
    global _explicit
    restored = []
    while _replaced:
        module, attr, original = _replaced.pop()
        setattr(module, attr, original)
        restored.append(f"{module.__name__}.{attr}")
    restored.reverse()
    _recorded.clear()
    for modname, module in _pot_modules():   # wrappers bound since the last patch()
        for attr, value in list(vars(module).items()):
            original = _original_of(value)
            if original is not None:
                setattr(module, attr, original)
                restored.append(f"{modname}.{attr}")
    _explicit = False
    return restored


def unpatch():
    """Put back every POT binding that :func:`patch` replaced, and POT's
    function wherever a loaded ``ot`` / ``ot.*`` module holds one of the
    wrappers (a POT module imported while patched copies them).

    Returns
    -------
    restored : list of str
        ``"module.attribute"`` of each restored binding (empty when nothing
        was patched).

    References
    ----------
    .. [1] POT 0.9.7: R. Flamary et al., "POT: Python Optimal Transport",
       JMLR 22(78), 2021 (the library whose bindings are restored).

    Examples
    --------
    >>> import numbaot.pot
    >>> numbaot.pot.unpatch()
    []
    """
    with _lock:
        return _unpatch()


def is_patched():
    """Whether POT's bindings are currently replaced by numbaot's.

    Returns
    -------
    patched : bool
        True while some binding replaced by :func:`patch` or
        :func:`patched` has not been restored; False otherwise (also when
        POT is not installed: nothing is imported here).

    References
    ----------
    .. [1] POT 0.9.7: R. Flamary et al., "POT: Python Optimal Transport",
       JMLR 22(78), 2021 (the library whose bindings are replaced).

    Examples
    --------
    >>> import numbaot.pot
    >>> numbaot.pot.is_patched()
    False
    >>> with numbaot.pot.patched():
    ...     print(numbaot.pot.is_patched())
    True
    >>> numbaot.pot.is_patched()
    False
    """
    return bool(_replaced)


@contextlib.contextmanager
def patched(verbose=False):
    """``with patched(): ...`` runs the block with POT patched, and restores
    POT on exit (also after an exception).

    Blocks may nest, and overlap in several threads: POT stays patched
    while any block is open, and the last one to close restores it, unless
    :func:`patch` was called directly (before or inside a block): POT then
    stays patched until :func:`unpatch`.

    Parameters
    ----------
    verbose : bool, default False
        Print each replaced binding (see :func:`patch`).

    Yields
    ------
    replaced : dict
        What :func:`patch` replaced on entry: ``{"module.attribute":
        "numbaot function"}`` (empty when POT was already patched).

    Raises
    ------
    ImportError
        On entry, if POT is not installed.

    Warns
    -----
    UserWarning
        On entry, when the installed POT is not 0.9.7 (pointing at the
        ``with`` line).

    References
    ----------
    .. [1] POT 0.9.7: R. Flamary et al., "POT: Python Optimal Transport",
       JMLR 22(78), 2021 (the library whose bindings are replaced).

    Examples
    --------
    Unchanged POT code inside the block runs on numbaot; POT is restored on
    exit:

    >>> import numpy as np, ot, numbaot.pot
    >>> a = b = np.full(2, 0.5); M = 1.0 - np.eye(2)
    >>> with numbaot.pot.patched() as replaced:
    ...     G = ot.sinkhorn(a, b, M, 1.0)
    ...     print("ot.sinkhorn" in replaced, numbaot.pot.is_patched())
    True True
    >>> numbaot.pot.is_patched()
    False
    >>> print(np.round(G, 4))
    [[0.3655 0.1345]
     [0.1345 0.3655]]
    """
    global _blocks
    # stacklevel: _check_version, _patch, this generator, contextlib's __enter__, the caller
    replaced = _patch(verbose, block=True, stacklevel=5)
    try:
        yield replaced
    finally:
        with _lock:
            _blocks -= 1
            if _blocks == 0 and not _explicit:
                _unpatch()


def stats(reset=False):
    """Calls since the first patch, per POT function: ``{name: {"numbaot":
    calls run by numbaot, "pot": calls sent back to POT's original}}``.

    Parameters
    ----------
    reset : bool, default False
        Clear the counts after reading them.

    Returns
    -------
    counts : dict
        ``{"module.function": {"numbaot": int, "pot": int}}``, keyed by the
        POT function's qualified name (e.g. ``"ot.bregman.sinkhorn"``, also
        for calls through ``ot.sinkhorn``); a new dict, the counts as they
        were before any ``reset``.  Only functions called while patched
        appear.

    References
    ----------
    .. [1] POT 0.9.7: R. Flamary et al., "POT: Python Optimal Transport",
       JMLR 22(78), 2021 (the library whose bindings are replaced).

    Examples
    --------
    A call on NumPy float64 arrays runs on numbaot; lists where POT takes
    arrays go to POT's original:

    >>> import numpy as np, ot, numbaot.pot
    >>> _ = numbaot.pot.stats(reset=True)
    >>> M = 1.0 - np.eye(2)
    >>> with numbaot.pot.patched():
    ...     _ = ot.sinkhorn(np.full(2, 0.5), np.full(2, 0.5), M, 1.0)
    ...     _ = ot.sinkhorn([0.5, 0.5], [0.5, 0.5], M, 1.0)
    >>> numbaot.pot.stats(reset=True)["ot.bregman.sinkhorn"]
    {'numbaot': 1, 'pot': 1}
    """
    with _lock:
        out = {k: dict(v) for k, v in _counts.items()}
        if reset:
            _counts.clear()
        return out
