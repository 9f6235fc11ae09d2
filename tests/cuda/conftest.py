"""CUDA tests: numbaot's public calls on device arrays, compared with the CPU.

They run in the Numba CUDA simulator (CI, no GPU) or on a real GPU:

    NUMBA_ENABLE_CUDASIM=1 python -m pytest -m cuda -n 4   # simulator (all CUDA tests)
    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda     # simulator, this folder only
    python -m pytest tests/cuda                            # on a machine with a GPU

The simulator must be switched on before numba is imported, so in a plain
``python -m pytest`` run without a GPU these tests are reported as skipped,
with the reason, and the README's test command runs them in a second
process with the simulator on.  tests/conftest.py marks everything here
``cuda``, skips it where CUDA cannot run, and lowers the block sizes in the
simulator (``small_blocks``); the same rules apply to the ``[cuda]`` case of
the suites that take the ``device`` fixture.
"""
import pytest

from numbaot import _config


@pytest.fixture
def multi_warp(monkeypatch):
    """Two warps per block (block reductions through shared memory)."""
    monkeypatch.setattr(_config, "CUDA_THREADS", 64)


@pytest.fixture
def cuda():
    from numba import cuda as _cuda

    return _cuda
