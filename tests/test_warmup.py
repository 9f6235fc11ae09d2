"""numbaot.warmup and ``python -m numbaot warmup``: argument checks, what a
step compiles, and the command line."""
import os
import subprocess
import sys

import numpy as np
import pytest

import numbaot
from numbaot._warmup import WARMUP_FUNCTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_name_is_public_numbaot():
    # a warm-up step is named after the public function it compiles
    from numbaot import bregman, partial
    for name in WARMUP_FUNCTIONS:
        assert any(hasattr(mod, name) for mod in (numbaot, bregman, partial)), name


def test_warmup_compiles_the_kernels_it_names():
    # in a fresh process: no float32 scan kernel before, some after (compiled
    # or loaded from Numba's cache, either way ready for the first call)
    code = (
        "import numbaot\n"
        "from numbaot.cpu import scan\n"
        "def f32():\n"
        "    return sum('float32' in str(s) for fn in vars(scan).values()\n"
        "               if hasattr(fn, 'signatures') for s in fn.signatures)\n"
        "before = f32()\n"
        "sec = numbaot.warmup(['gae'], dtypes=('float32',), verbose=False)\n"
        "print(before, f32(), sorted(sec))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    before, after, keys = run.stdout.split(" ", 2)
    assert int(before) == 0 and int(after) > 0
    assert keys.strip() == "[('gae', 'float32')]"


def test_progress_lines(capsys):
    numbaot.warmup("gae", dtypes="float64")
    err = capsys.readouterr().err
    assert "[ 1/1] gae float64" in err and "1 steps in" in err


@pytest.mark.parametrize("functions, exc, match", [
    (["sinkhorn", "nope"], ValueError, "functions: unknown name"),
    ([3], ValueError, "functions: unknown name"),
    (7, TypeError, "functions must be None or a list"),
])
def test_bad_functions(functions, exc, match):
    with pytest.raises(exc, match=match):
        numbaot.warmup(functions, verbose=False)


@pytest.mark.parametrize("dtypes", [("float16",), ("int64",), (), ("complex128",)])
def test_bad_dtypes(dtypes):
    with pytest.raises(ValueError, match="dtypes"):
        numbaot.warmup(["gae"], dtypes=dtypes, verbose=False)


def test_numpy_dtypes_accepted():
    seconds = numbaot.warmup(["gae"], dtypes=(np.float64, np.dtype("float32")), verbose=False)
    assert set(seconds) == {("gae", "float64"), ("gae", "float32")}


def test_command_line():
    run = subprocess.run([sys.executable, "-m", "numbaot", "warmup", "--functions", "gae",
                          "--dtypes", "float64"], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    assert "gae float64" in run.stderr
    bad = subprocess.run([sys.executable, "-m", "numbaot", "warmup", "--functions", "nope"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "unknown name" in bad.stderr


#: code run in a child process after its warm-up: every kernel compiled from
#: here on is recorded in ``compiled`` (qualified names)
_RECORD_COMPILES = (
    "from numba.core.dispatcher import Dispatcher\n"
    "compiled = []\n"
    "orig = Dispatcher.compile\n"
    "def rec(self, sig):\n"
    "    n0 = len(self.overloads)\n"
    "    out = orig(self, sig)\n"
    "    if len(self.overloads) > n0:\n"
    "        compiled.append(self.py_func.__qualname__)\n"
    "    return out\n"
    "Dispatcher.compile = rec\n")


def _assert_compiles_nothing(code, tmp_path):
    """Run ``code`` (a warm-up, then ``_RECORD_COMPILES``, then the calls) in
    a fresh process with an empty Numba cache; assert that the calls
    compiled no kernel."""
    code += "print('COMPILED', sorted(set(compiled)))\n"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "COMPILED []" in run.stdout, run.stdout[-2000:]


def test_after_warmup_larger_and_batched_calls_compile_nothing(tmp_path):
    """A warmed-up process (fresh, empty Numba cache) then solves larger
    problems than the warm-up's (the blocked path, the parallel first column
    update of the log domain), batches of BATCH_MINOR_MIN problems (the
    problem-minor kernels), a log-domain solve whose column sums underflow
    (the recomputation pass), and unbalanced problems with several targets
    (their losses): none of them compiles a kernel."""
    code = (
        "import numpy as np, numbaot, warnings\n"
        "from numbaot.cpu import sinkhorn as cs\n"
        "warnings.simplefilter('ignore')\n"
        "numbaot.warmup(['sinkhorn_log', 'sinkhorn_unbalanced'], dtypes=('float64',),\n"
        "               verbose=False)\n"
        + _RECORD_COMPILES +
        "rng = np.random.default_rng(0)\n"
        "n = 600\n"
        "x = rng.random((n, 2))\n"
        "M = ((x[:, None] - x[None]) ** 2).sum(-1); M /= M.max()\n"
        "a = np.full(n, 1 / n); B = rng.random((n, 9)); B /= B.sum(0)\n"
        "for b in (a, B):\n"
        "    numbaot.sinkhorn(a, b, M, 0.05, method='sinkhorn_log', numItermax=5)\n"
        "    numbaot.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=5)\n"
        "    numbaot.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, method='sinkhorn_log',\n"
        "                                numItermax=5)\n"
        "cs.UNDERFLOW_RTOL = 1e300\n"
        "for b in (a, B):\n"
        "    numbaot.sinkhorn(a, b, M, 0.05, method='sinkhorn_log', numItermax=3)\n"
    )
    _assert_compiles_nothing(code, tmp_path)


def test_after_warmup_narrow_and_wide_blocked_passes_compile_nothing(tmp_path):
    """The blocked multiplicative passes run one chunk kernel for rows
    that fit four in ``_config.KNOPP_ROWS_MAX_BYTES`` and another (tiles)
    for wider rows; the warm-up compiles both.  A warmed-up process (fresh,
    empty Numba cache) then solves balanced and unbalanced problems of
    narrow rows (one problem and a batch of three: the problem-major
    kernels), of wide rows (1100 float64 columns: 35 KB per four rows), the
    losses and a barycenter of both widths, and partial OT of both widths:
    none of them compiles a kernel."""
    code = (
        "import numpy as np, numbaot, numbaot.partial, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "numbaot.warmup(['sinkhorn', 'barycenter', 'entropic_partial_wasserstein',\n"
        "                'sinkhorn_unbalanced'],\n"
        "               dtypes=('float64',), verbose=False)\n"
        + _RECORD_COMPILES +
        "rng = np.random.default_rng(0)\n"
        "for n, m in ((600, 500), (400, 1100)):\n"
        "    x, y = rng.random((n, 2)), rng.random((m, 2))\n"
        "    M = ((x[:, None] - y[None]) ** 2).sum(-1); M /= M.max()\n"
        "    a = np.full(n, 1 / n); b = np.full(m, 1 / m)\n"
        "    B = rng.random((m, 3)); B /= B.sum(0)\n"
        "    for bb in (b, B):\n"
        "        numbaot.sinkhorn(a, bb, M, 0.05, numItermax=5, warn=False)\n"
        "        numbaot.sinkhorn2(a, bb, M, 0.05, numItermax=5, warn=False)\n"
        "        numbaot.sinkhorn_unbalanced(a, bb, M, 0.05, 1.0, numItermax=5)\n"
        "    numbaot.partial.entropic_partial_wasserstein(a, 1.5 * b, M, 0.05, m=0.5,\n"
        "                                                 numItermax=25)\n"
        "    z = rng.random((m, 2)); Mz = ((z[:, None] - z[None]) ** 2).sum(-1)\n"
        "    A = rng.random((m, 2)); A /= A.sum(0)\n"
        "    numbaot.barycenter(A, Mz / Mz.max(), 0.05, numItermax=5)\n"
    )
    _assert_compiles_nothing(code, tmp_path)
