"""CUDA tests: numbaot's public calls on device arrays, compared with the CPU.

They run in the Numba CUDA simulator (CI, no GPU) or on a real GPU:

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda     # simulator
    python -m pytest tests/cuda                            # on a machine with a GPU

The simulator must be switched on before numba is imported, so in a plain
``python -m pytest`` run without a GPU these tests are reported as skipped,
with the reason, and the README's test command runs them in a second
process with the simulator on.
"""
import os

import pytest

from numbaot import _config
from numbaot._dispatch import simulator_enabled


def _cuda_reason():
    if simulator_enabled():
        return None
    try:
        from numba import cuda
    except Exception as exc:
        return f"numba-cuda not installed ({exc}); pip install '.[cuda]'"
    if not cuda.is_available():
        return ("no CUDA GPU and the simulator is off: run "
                "NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda")
    return None


_REASON = _cuda_reason()


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason=_REASON)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def fast_thread_switches():
    """The simulator's block manager busy-polls its threads while holding the
    GIL; a shorter switch interval lets the simulated threads run sooner
    (about 25 % faster here).  Restored after the session."""
    import sys

    old = sys.getswitchinterval()
    if simulator_enabled():
        sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """In the simulator (one Python thread per CUDA thread, slow) use one-warp
    blocks, 2-row column tiles and 4-row column chunks, so that multi-block,
    multi-chunk and warp-shuffle paths run on tiny problems; tests of the
    multi-warp paths ask for the ``multi_warp`` fixture."""
    if simulator_enabled():
        monkeypatch.setattr(_config, "CUDA_THREADS", 32)
        monkeypatch.setattr(_config, "CUDA_TILE_ROWS", 2)
        monkeypatch.setattr(_config, "CUDA_COL_CHUNK_ROWS", 4)
    yield


@pytest.fixture
def multi_warp(monkeypatch):
    """Two warps per block (block reductions through shared memory)."""
    monkeypatch.setattr(_config, "CUDA_THREADS", 64)


@pytest.fixture
def cuda():
    from numba import cuda as _cuda

    return _cuda
