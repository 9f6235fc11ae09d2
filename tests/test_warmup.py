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
