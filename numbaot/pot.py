"""Run unchanged POT code on numbaot: ``numbaot.pot.patch()``.

``patch()`` replaces POT's entropic solvers by numbaot's, everywhere POT
holds them: the public names (``ot.sinkhorn``, ``ot.bregman.sinkhorn_log``,
``ot.unbalanced.sinkhorn_unbalanced``, ``ot.solve``, ...) and the bindings
POT's own modules made at import time (``ot.da``, ``ot.gromov``,
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
import sys
import threading
import warnings

import numpy as np

__all__ = ["patch", "unpatch", "patched", "is_patched", "stats"]

#: POT subpackages imported before patching (so their import-time bindings
#: exist and are replaced); missing optional ones are skipped.
POT_MODULES = ("ot.bregman", "ot.unbalanced", "ot.partial", "ot.solvers", "ot.da", "ot.gromov",
               "ot.coot", "ot.optim", "ot.lowrank", "ot.factored", "ot.smooth", "ot.utils")

#: (numbaot module, POT module) whose public functions of the same name are
#: paired; numbaot names POT lacks are skipped.
_PAIRS = (("numbaot.bregman", "ot.bregman"), ("numbaot.unbalanced", "ot.unbalanced"),
          ("numbaot.partial", "ot.partial"), ("numbaot.solvers", "ot.solvers"))

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


def _pairs():
    """{POT function object: (qualified name, numbaot function)}."""
    out = {}
    for ours_mod, pot_mod in _PAIRS:
        try:
            ours = importlib.import_module(ours_mod)
            pot = importlib.import_module(pot_mod)
        except ImportError:
            continue
        for name in getattr(ours, "__all__", ()):
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
    name (``ot.bregman``, ``ot.unbalanced``, ``ot.partial``, ``ot.solvers``)
    by a wrapper that runs numbaot's function and falls back to POT's
    original for non-NumPy arrays and for calls numbaot rejects (module
    docstring).  Idempotent: bindings already replaced are left alone.

    Parameters
    ----------
    verbose : bool, default False
        Print each replaced binding.

    Returns
    -------
    replaced : dict
        ``{"module.attribute": "numbaot function"}`` for the bindings this
        call replaced (empty when everything was already patched).

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
        replaced = {}
        for modname, module in sorted(sys.modules.items()):
            if module is None or not (modname == "ot" or modname.startswith("ot.")):
                continue
            for attr, value in list(vars(module).items()):
                try:
                    hit = value in pairs
                except TypeError:                 # unhashable
                    continue
                if not hit:
                    continue
                qualname, ours = pairs[value]
                if value not in _wrappers:
                    _wrappers[value] = _wrapper(qualname, ours, value)
                setattr(module, attr, _wrappers[value])
                _replaced.append((module, attr, value))
                replaced[f"{modname}.{attr}"] = f"{ours.__module__}.{ours.__name__}"
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
