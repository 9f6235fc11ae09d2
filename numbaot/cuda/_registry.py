"""Registry of every CUDA kernel numbaot launches, with its signatures.

Kernels are declared with :func:`kernel` instead of ``numba.cuda.jit``.  The
decorator returns a lazily compiled ``cuda.jit`` dispatcher (nothing is
compiled at import, and no CUDA driver is touched) and records the Python
function, the signatures it is launched with, and the design claims the PTX
tests check (``tests/test_ptx.py`` compiles every entry for every signature
with ``numba.cuda.compile_ptx``):

* ``warp_shuffle=True``: the kernel reduces with ``shfl.sync.bfly`` butterflies;
* ``hot=True``: the kernel is on a per-iteration path and must not spill
  registers to local memory (no ``.local`` in its PTX).
"""
from dataclasses import dataclass, field

from numba import cuda

from .._config import CUDA_FASTMATH
from .._dispatch import simulator_enabled

if simulator_enabled():
    from . import _sim

    _sim.install()

__all__ = ["KernelSpec", "REGISTRY", "kernel", "device"]


@dataclass
class KernelSpec:
    name: str
    pyfunc: object
    signatures: list
    hot: bool = False
    warp_shuffle: bool = False
    jit_options: dict = field(default_factory=dict)


#: qualified name ("numbaot.cuda.<module>.<kernel>") -> KernelSpec
REGISTRY = {}


def kernel(signatures, *, hot=False, warp_shuffle=False, tag=None, **jit_options):
    """Declare a CUDA kernel (``@kernel([sig, ...], hot=..., warp_shuffle=...)``).

    ``signatures`` lists every signature the host launchers use (as strings or
    numba types), so the PTX tests cover exactly what runs on a GPU.  ``tag``
    tells apart kernels built more than once by a factory (e.g. one per
    dtype): the registry name becomes ``module.name[tag]``.
    """
    jit_options.setdefault("fastmath", CUDA_FASTMATH)

    def deco(pyfunc):
        name = f"{pyfunc.__module__}.{pyfunc.__name__}"
        if tag is not None:
            name += f"[{tag}]"
        if name in REGISTRY and REGISTRY[name].pyfunc is not pyfunc:
            raise RuntimeError(f"CUDA kernel {name} registered twice")
        REGISTRY[name] = KernelSpec(name, pyfunc, list(signatures), hot, warp_shuffle,
                                    dict(jit_options))
        return cuda.jit(**jit_options)(pyfunc)

    return deco


def device(pyfunc=None, **jit_options):
    """``cuda.jit(device=True)`` with numbaot's fast-math policy; inlined into
    the kernels that call it, so it is checked through them."""
    jit_options.setdefault("fastmath", CUDA_FASTMATH)
    if pyfunc is None:
        return lambda f: cuda.jit(device=True, **jit_options)(f)
    return cuda.jit(device=True, **jit_options)(pyfunc)
