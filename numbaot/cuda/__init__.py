"""CUDA kernels and their host launchers, mirroring ``numbaot.cpu`` name for name.

Imported lazily by the public modules on the first call with GPU arrays (never
by ``import numbaot``).  Every kernel is declared through
``numbaot.cuda._registry.kernel``; :func:`load_all` imports every kernel
module so that the registry is complete (the PTX tests use it).

``_sim`` is a simulator-only shim, not GPU code: when the Numba CUDA
simulator is on (NUMBA_ENABLE_CUDASIM=1), ``_registry`` installs into the
simulator the warp shuffles (``shfl_xor_sync``, ``shfl_sync``) that numbaot's
warp-reduction kernels call and the stock simulator lacks, and a lock that
makes its ``cuda.shared.array`` lookup thread-safe.  With the simulator off
(a real GPU) it is never imported.  Details in ``_sim``'s docstring.
"""
import importlib
import pkgutil

__all__ = ["load_all"]


def load_all():
    """Import every kernel module of this package; returns the registry."""
    from ._registry import REGISTRY

    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    return REGISTRY
