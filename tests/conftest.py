"""Fixtures and collection rules shared by the whole suite.

Devices
-------
A test that takes the ``device`` fixture runs twice: ``[cpu]`` with NumPy
arrays and ``[cuda]`` with CUDA device arrays (the Numba CUDA simulator, or a
GPU).  ``device.put(x)`` moves a host array there (NumPy arrays only; ``None``,
scalars and lists pass through), ``device.get(y)`` brings a result back as a
NumPy array and checks that it came back on that device.  A test that only
makes sense on one device asks for it with
``@pytest.mark.parametrize("device", ["cuda"], indirect=True)``.

Every CUDA test (the ``[cuda]`` case of a ``device`` test, and everything
under tests/cuda) is marked ``cuda`` here, and skipped, with the reason, unless
the simulator is on or a GPU is present.  The simulator must be switched on
before Numba is imported, hence the README's second command, which runs
exactly the tests marked ``cuda`` in a simulator process:

    python -m pytest                                       # CPU (CUDA skipped without a GPU)
    NUMBA_ENABLE_CUDASIM=1 python -m pytest -m cuda -n 4   # the CUDA tests, simulator
"""
import os
import sys

#: The suite runs as two pytest-xdist workers (README), each with Numba's
#: default thread count: on a 2-core machine four OpenMP threads share two
#: cores.  With libgomp's default wait policy every parallel region then
#: waits for a thread the other process keeps busy: a partial-OT test at
#: 40 x 25 (300 iterations, a region per pass) took 7.7 s instead of 0.23 s
#: (measured 2026-11-28, -n 2; OMP_WAIT_POLICY=PASSIVE 0.23 s, ACTIVE
#: 1.1 s).  Idle workers sleep instead.  libgomp reads the variable when it
#: is loaded (``import ot`` loads it), hence here, before any import of the
#: tests; a value the caller set is kept.  Results do not depend on it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
_CUDA_DIR = os.path.join(_HERE, "cuda") + os.sep


def simulator_on():
    """True when ``numba.cuda`` is the CUDA simulator (NUMBA_ENABLE_CUDASIM=1
    when Numba was imported)."""
    return bool(numba.config.ENABLE_CUDASIM)


_reason = []


def cuda_unavailable_reason():
    """Why CUDA tests cannot run in this process (None when they can): they
    run in the simulator or on a GPU.  Probed once, and only when a CUDA test
    was collected."""
    if not _reason:
        _reason.append(_probe_cuda())
    return _reason[0]


def _probe_cuda():
    if simulator_on():
        return None
    try:
        from numba import cuda
    except Exception as exc:
        return f"numba-cuda not installed ({exc}); pip install '.[cuda]'"
    if not cuda.is_available():
        return ("no CUDA GPU and the simulator is off: run "
                "NUMBA_ENABLE_CUDASIM=1 python -m pytest -m cuda")
    return None


def _is_cuda_test(item):
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("device") == "cuda":
        return True
    return str(item.fspath).startswith(_CUDA_DIR)


#: Compile groups (``--dist loadgroup``, setup.cfg): the tests of one
#: xdist_group run on one worker, which compiles the kernels they share once
#: and then loads them from Numba's disk cache, instead of every worker
#: compiling them, often at the same time.  Groups: "implicit" (the files
#: of the sinkhorn_operator kernels: test_implicit.py,
#: test_adversarial_implicit.py, test_implicit_codegen.py) and one per
#: compute capability of tests/test_ptx.py (the first test of a capability
#: in a process compiles every kernel for it in a subprocess, the others
#: read the result).  The marks are static (module ``pytestmark``, the
#: parameters' marks).  pytest-xdist 3.8 groups by renaming the node ids,
#: which pytest 9.2 ignores: the test extra pins pytest < 9 (measured
#: 2026-11-28 with 9.2: the tests of a group ran on both workers and the PTX
#: kernels compiled twice per capability, 56 s each time).


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark every CUDA test ``cuda``; skip them where CUDA cannot run."""
    for item in items:
        if _is_cuda_test(item):
            item.add_marker(pytest.mark.cuda)
            reason = cuda_unavailable_reason()
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


class Device:
    """One value of the ``device`` fixture (``"cpu"`` or ``"cuda"``)."""

    def __init__(self, name):
        self.name = name
        self.is_cuda = name == "cuda"

    def __repr__(self):
        return f"Device({self.name!r})"

    def put(self, x):
        """``x`` on this device: a NumPy array is copied to the GPU for
        ``cuda``; anything else (and everything for ``cpu``) is returned as it
        is."""
        if self.is_cuda and isinstance(x, np.ndarray):
            from numba import cuda

            return cuda.to_device(x)
        return x

    def get(self, y):
        """The result ``y`` on the host, after checking it lives on this
        device (a CUDA call that returned a host array fails here)."""
        on_device = hasattr(y, "copy_to_host")
        if self.is_cuda:
            assert on_device, f"expected a CUDA device array, got {type(y).__name__}"
            return y.copy_to_host()
        assert not on_device, f"expected a host result, got {type(y).__name__}"
        return y


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """Run the test on the CPU and on CUDA (simulator or GPU): see the module
    docstring."""
    return Device(request.param)


#: sha256 (first 16 hex digits) of the source of numba-cuda's
#: ``simulator.kernel.BlockManager.run`` that :func:`_polling_block_manager`
#: reproduces (numba-cuda 0.30.4); another version keeps its own loop.
_STOCK_BLOCK_RUN = "54626c6819f55d51"

#: seconds the simulator's block manager sleeps between two polls of its
#: threads, and the thread switch interval of the simulator pass (measured
#: on tests/cuda/test_partial_cuda.py, -n 2, 2 cores, wall: stock manager
#: 224 s at interval 1e-4; sleep 1e-4: 161 s, 1e-3: 136 s, 4e-3: 133 s at
#: 1e-4; sleep 1e-3 at interval 2e-3: 85 s, 5e-3: 95 s, 2e-2: 85 s; sleep
#: 2e-4 / 3e-3 at 2e-3: 92 / 100 s)
_POLL_SLEEP = 1e-3
_SWITCH_INTERVAL = 2e-3


def _polling_block_manager():
    """numba-cuda's ``BlockManager.run`` (one simulated thread block), with
    one change: the manager sleeps ``_POLL_SLEEP`` seconds between two polls
    of its threads.  The stock loop polls without pause while holding the
    GIL, and the simulated threads, which need the GIL to run, wait behind
    it (most of a simulator test's time).  What a block computes is
    unchanged: the same threads, the same syncthreads rule (released when
    every live thread is blocked in it), the same exception handling.
    Applied only to the version whose source it copies (``_STOCK_BLOCK_RUN``);
    returns the (class, stock run) to restore, or None."""
    import hashlib
    import inspect
    import time

    from numba.cuda.simulator import kernel as K

    stock = K.BlockManager.run
    digest = hashlib.sha256(inspect.getsource(stock).encode()).hexdigest()[:16]
    if digest != _STOCK_BLOCK_RUN:
        return None

    def run(self, grid_point, *args):
        threads = set()
        livethreads = set()
        blockedthreads = set()
        for block_point in np.ndindex(*self._block_dim):

            def target():
                self._f(*args)

            t = K.BlockThread(target, self, grid_point, block_point, self._debug)
            t.start()
            threads.add(t)
            livethreads.add(t)
        while livethreads:
            time.sleep(_POLL_SLEEP)  # the one change: let the threads run
            for t in livethreads:
                if t.syncthreads_blocked:
                    blockedthreads.add(t)
                elif t.exception:
                    for t_other in threads:
                        t_other.abort = True
                        t_other.syncthreads_blocked = False
                        t_other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
            if livethreads == blockedthreads:
                for t in blockedthreads:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                blockedthreads = set()
            livethreads = set([t for t in livethreads if t.is_alive()])
        for t in threads:
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    K.BlockManager.run = run
    return K.BlockManager, stock


@pytest.fixture(autouse=True, scope="session")
def fast_simulator():
    """Two speed-ups of the CUDA simulator (one Python thread per CUDA
    thread), restored after the session: a block manager that does not poll
    its threads without pause (:func:`_polling_block_manager`) and a thread
    switch interval of ``_SWITCH_INTERVAL`` (Python's default is 5e-3): 2.6x
    faster together on tests/cuda/test_partial_cuda.py.  (With the stock
    manager a short interval, 1e-4, was the faster one: it cut into its
    polling.)"""
    old = sys.getswitchinterval()
    patched = None
    if simulator_on():
        sys.setswitchinterval(_SWITCH_INTERVAL)
        patched = _polling_block_manager()
    yield
    sys.setswitchinterval(old)
    if patched is not None:
        patched[0].run = patched[1]


@pytest.fixture(autouse=True)
def small_blocks(request, monkeypatch):
    """In the simulator (one Python thread per CUDA thread, slow) every CUDA
    test uses one-warp blocks, 2-row column tiles and 4-row column chunks, so
    that multi-block, multi-chunk and warp-shuffle paths run on tiny problems;
    tests of the multi-warp paths ask for the ``multi_warp`` fixture
    (tests/cuda/conftest.py)."""
    if simulator_on() and request.node.get_closest_marker("cuda") is not None:
        from numbaot import _config

        monkeypatch.setattr(_config, "CUDA_THREADS", 32)
        monkeypatch.setattr(_config, "CUDA_TILE_ROWS", 2)
        monkeypatch.setattr(_config, "CUDA_COL_CHUNK_ROWS", 4)
    yield


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


@pytest.fixture
def abM():
    """The setup of the adversarial pass (issue 22): a (6,) and b (5,)
    random normalised histograms, M (6, 5) uniform in [0, 1)."""
    rng = np.random.default_rng(0)
    a = rng.random(6)
    a /= a.sum()
    b = rng.random(5)
    b /= b.sum()
    M = rng.random((6, 5))
    return a, b, M
