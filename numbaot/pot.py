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
the same name and signature (POT 0.9.7's), and calls POT's original instead,
unchanged, when

* an array argument is not a plain NumPy array (a torch, JAX, CuPy or
  TensorFlow tensor through POT's backends, a masked array, ...);
* numbaot rejects the call with ``ValueError``, ``TypeError`` or
  ``NotImplementedError`` (an option numbaot does not implement, or an input
  numbaot refuses by design but POT accepts, such as a cost with ``inf``
  entries or histograms of unequal mass): a patched POT pipeline never fails
  where the unpatched one works.  This is the one place where numbaot's
  strictness yields to POT's behaviour.

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
  imports the usual subpackages first), not copies held elsewhere.
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
_wrappers = {}            # POT original -> its wrapper (one per function while patched)
_counts = {}              # name -> {"numbaot": n, "pot": n}


def _plain(x, depth=0):
    """Whether ``x`` is something numbaot takes as POT's NumPy backend does:
    exact NumPy arrays, NumPy and Python scalars, strings, None, callables
    and (nested) lists/tuples/dicts of those."""
    if x is None or isinstance(x, (bool, int, float, complex, str, np.generic)):
        return True
    if type(x) is np.ndarray:
        return True
    if depth < 3 and isinstance(x, (list, tuple)):
        return all(_plain(v, depth + 1) for v in x)
    if depth < 3 and isinstance(x, dict):
        return all(_plain(v, depth + 1) for v in x.values())
    if isinstance(x, np.ndarray):           # a subclass: masked array, matrix, memmap...
        return False
    return callable(x) and not hasattr(x, "__array__")


def _count(name, where):
    with _lock:
        _counts.setdefault(name, {"numbaot": 0, "pot": 0})[where] += 1


def _wrapper(name, ours, original):
    @functools.wraps(original)
    def accelerated(*args, **kwargs):
        if all(_plain(a) for a in args) and all(_plain(v) for v in kwargs.values()):
            try:
                out = ours(*args, **kwargs)
            except (ValueError, TypeError, NotImplementedError):
                pass
            else:
                _count(name, "numbaot")
                return out
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


def _check_version(ot):
    version = getattr(ot, "__version__", "unknown")
    if not str(version).startswith(_TESTED_POT):
        warnings.warn(f"numbaot.pot was written against POT {_TESTED_POT}; POT {version} is "
                      "installed: functions are replaced by name where they exist, and POT's "
                      "own results are the reference for any difference", stacklevel=3)


def patch(verbose=False):
    """Make POT's entropic solvers run numbaot's implementations.

    Replaces, in every loaded POT module (after importing ``POT_MODULES``),
    each binding of a POT function that numbaot provides under the same
    name (``ot.bregman``, ``ot.unbalanced``, ``ot.partial``, ``ot.solvers``,
    and ``ot.dist``)
    by a wrapper that runs numbaot's function and falls back to POT's
    original for non-NumPy arrays and for calls numbaot rejects (module
    docstring); and the POT loops of ``BLAS_ONE_THREAD`` by a wrapper that
    runs POT's own loop with BLAS on one thread for a large cost (module
    docstring).  Idempotent: bindings already replaced are left alone.

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
        Once per call when the installed POT is not 0.9.7.

    References
    ----------
    .. [1] R. Flamary et al., "POT: Python Optimal Transport", JMLR 22(78),
       2021 (the library whose functions are replaced).

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
    import ot

    _check_version(ot)
    for mod in POT_MODULES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # optional-dependency notices of POT
                importlib.import_module(mod)
        except ImportError:
            continue
    with _lock:
        pairs = _pairs()
        pipelines = _pipelines()
        replaced = {}
        for modname, module in sorted(sys.modules.items()):
            if module is None or not (modname == "ot" or modname.startswith("ot.")):
                continue
            for attr, value in list(vars(module).items()):
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
                        _wrappers[value] = _wrapper(qualname, ours, value)
                else:
                    what = f"{pipelines[value]}, BLAS on one thread"
                    if value not in _wrappers:
                        _wrappers[value] = _blas_one_thread(value)
                setattr(module, attr, _wrappers[value])
                _replaced.append((module, attr, value))
                replaced[f"{modname}.{attr}"] = what
        if verbose:
            for where, what in replaced.items():
                print(f"numbaot.pot: {where} -> {what}")
        return replaced


def unpatch():
    """Put back every POT binding that :func:`patch` replaced.

    Returns
    -------
    restored : list of str
        ``"module.attribute"`` of each restored binding (empty when nothing
        was patched).

    Examples
    --------
    >>> import numbaot.pot
    >>> numbaot.pot.unpatch()
    []
    """
    with _lock:
        restored = []
        while _replaced:
            module, attr, original = _replaced.pop()
            setattr(module, attr, original)
            restored.append(f"{module.__name__}.{attr}")
        _wrappers.clear()
        return restored[::-1]


def is_patched():
    """Whether POT's bindings are currently replaced by numbaot's."""
    return bool(_replaced)


@contextlib.contextmanager
def patched(verbose=False):
    """``with patched(): ...`` runs the block with POT patched, and restores
    POT on exit (also after an exception).  Nested blocks are fine: the
    outermost one restores.

    Parameters
    ----------
    verbose : bool, default False
        Print each replaced binding (see :func:`patch`).

    Yields
    ------
    replaced : dict
        What :func:`patch` replaced on entry.
    """
    was = is_patched()
    replaced = patch(verbose=verbose)
    try:
        yield replaced
    finally:
        if not was:
            unpatch()


def stats(reset=False):
    """Calls since the first patch, per POT function: ``{name: {"numbaot":
    calls run by numbaot, "pot": calls sent back to POT's original}}``.

    Parameters
    ----------
    reset : bool, default False
        Clear the counts after reading them.
    """
    with _lock:
        out = {k: dict(v) for k, v in _counts.items()}
        if reset:
            _counts.clear()
        return out
