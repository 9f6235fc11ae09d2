"""CUDA kernels and their host launchers, mirroring ``numbaot.cpu`` name for name.

Imported lazily by the public modules on the first call with GPU arrays (never
by ``import numbaot``).  Every kernel is declared through
``numbaot.cuda._registry.kernel``; :func:`load_all` imports every kernel
module so that the registry is complete (the PTX tests use it).
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
