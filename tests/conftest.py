import numba
import numpy as np
import pytest


@pytest.fixture
def restore_num_threads():
    """Yield numba.set_num_threads; restore the thread count afterwards."""
    saved = numba.get_num_threads()
    try:
        yield numba.set_num_threads
    finally:
        numba.set_num_threads(saved)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
