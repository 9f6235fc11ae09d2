"""First-call latency of numbaot in a fresh Python process (JIT / cache cost).

Each run is a new ``python -c`` subprocess (cwd = repository root, so the
in-tree package is imported) that times, in order:

(a) ``import numbaot``  (includes importing numpy/numba; what a user sees)
(b) the first ``numbaot.sinkhorn(a, b, M, reg, method='sinkhorn')`` on a
    200x200 float64 problem (numItermax=100, stopThr=0)
(c) the first ``numbaot.sinkhorn(..., method='sinkhorn_log')``
(d) a second call of each (steady state)
plus, as extras, the first float32 call, the first paired-batch call (2-D a,
b of 20 histograms), and (numbaot only) the first
``sinkhorn_operator_backward`` on 64 matrices of n = 16, then of n = 4 (its
kernels are compiled per padded size).

The subprocess is run ``--runs`` times (default 2).  By default every run
gets the same fresh, empty ``NUMBA_CACHE_DIR`` (a temporary folder), so run 1
is a guaranteed cold start that compiles and fills the on-disk cache, and
run 2 shows the cached start; nothing in the repository's __pycache__ is
touched.  ``--default-cache`` uses whatever cache numbaot normally uses
instead.  A POT process doing the same calls is timed for reference.

Usage::

    python benchmarks/bench_compile.py
    python benchmarks/bench_compile.py --runs 3 --default-cache
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

CHILD = r'''
import json, sys, time
T = {}
t0 = time.perf_counter()
import {mod} as lib
T["import"] = time.perf_counter() - t0
import numpy as np

def problem(n, dtype, n_hists=None):
    rng = np.random.default_rng(0)
    x, y = rng.random((n, 2)), rng.random((n, 2))
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    if n_hists is None:
        a = np.full(n, 1.0 / n)
        b = np.full(n, 1.0 / n)
    else:
        a = rng.random((n, n_hists)) + 0.1
        b = rng.random((n, n_hists)) + 0.1
        a /= a.sum(0)
        b /= b.sum(0)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)

N = {n}
REG = 0.05
a, b, M = problem(N, np.float64)
a32, b32, M32 = problem(N, np.float32)
aB, bB, MB = problem(N, np.float64, n_hists=20)
KW = dict(numItermax=100, stopThr=0.0, warn=False)

def timed(key, fn):
    t0 = time.perf_counter()
    try:
        fn()
        T[key] = time.perf_counter() - t0
    except Exception as exc:
        T[key] = "ERR " + type(exc).__name__ + ": " + str(exc)[:200]

import warnings
warnings.simplefilter("ignore")
timed("first_sinkhorn", lambda: lib.sinkhorn(a, b, M, REG, method="sinkhorn", **KW))
timed("first_sinkhorn_log", lambda: lib.sinkhorn(a, b, M, REG, method="sinkhorn_log", **KW))
timed("second_sinkhorn", lambda: lib.sinkhorn(a, b, M, REG, method="sinkhorn", **KW))
timed("second_sinkhorn_log", lambda: lib.sinkhorn(a, b, M, REG, method="sinkhorn_log", **KW))
timed("first_sinkhorn_f32", lambda: lib.sinkhorn(a32, b32, M32, REG, method="sinkhorn", **KW))
if {batch}:
    timed("first_batch", lambda: lib.sinkhorn2(aB, bB, MB, REG, method="sinkhorn", **KW))
if hasattr(lib, "sinkhorn_operator_backward"):
    # the implicit backward's kernels are compiled per padded size: the first
    # call at n = 16, then the first at n = 4 (64 matrices each)
    for n_op in (16, 4):
        rng = np.random.default_rng(1)
        R_op = lib.sinkhorn_operator(rng.uniform(0, 4, (64, n_op, n_op)), n_iter=30)
        G_op = rng.standard_normal((64, n_op, n_op))
        timed(f"first_backward_{n_op}", lambda: lib.sinkhorn_operator_backward(R_op, G_op))
print("RESULT " + json.dumps(T))
'''

COLUMNS = [
    ("import", "import (ms)"),
    ("first_sinkhorn", "1st sinkhorn (ms)"),
    ("first_sinkhorn_log", "1st sinkhorn_log (ms)"),
    ("second_sinkhorn", "2nd sinkhorn (ms)"),
    ("second_sinkhorn_log", "2nd sinkhorn_log (ms)"),
    ("first_sinkhorn_f32", "1st sinkhorn f32 (ms)"),
    ("first_batch", "1st paired batch (ms)"),
    ("first_backward_16", "1st operator backward n=16 (ms)"),
    ("first_backward_4", "then 1st at n=4 (ms)"),
]


def run_child(mod, n, env, batch):
    code = (CHILD.replace("{mod}", mod)
            .replace("{n}", str(int(n)))
            .replace("{batch}", str(bool(batch))))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=C.REPO_ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    res = None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
    if res is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        res = {"error": f"rc={proc.returncode}: " + " / ".join(tail)}
    res["wall"] = wall
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=2, help="fresh processes to run; default 2")
    p.add_argument("--n", type=int, default=200, help="problem size; default 200")
    p.add_argument("--default-cache", action="store_true",
                   help="do not isolate NUMBA_CACHE_DIR (use numbaot's normal on-disk cache)")
    p.add_argument("--no-pot", action="store_true", help="skip the POT reference process")
    p.add_argument("--quick", action="store_true", help="accepted for run_all; same as default")
    args = p.parse_args(argv)

    C.start_report("bench_compile")

    env = dict(os.environ)
    tmp = None
    if not args.default_cache:
        tmp = tempfile.mkdtemp(prefix="numbaot-bench-cache-")
        env["NUMBA_CACHE_DIR"] = tmp
        cache_note = f"NUMBA_CACHE_DIR={tmp} (fresh, empty before run 1)"
    else:
        cache_note = f"NUMBA_CACHE_DIR={env.get('NUMBA_CACHE_DIR', '(default: next to the sources)')}"
    print(f"{args.n}x{args.n} float64 problem, reg=0.05, numItermax=100, stopThr=0; "
          f"paired batch: 20 histograms; {cache_note}")
    print()

    rows = []
    try:
        for r in range(1, args.runs + 1):
            print(f"... numbaot run {r}", file=sys.stderr, flush=True)
            res = run_child("numbaot", args.n, env, batch=True)
            rows.append((f"numbaot run {r}" + (" (cold)" if r == 1 and tmp else ""), res))
        if not args.no_pot:
            print("... POT", file=sys.stderr, flush=True)
            res = run_child("ot", args.n, dict(os.environ), batch=False)
            rows.append(("POT (reference)", res))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    table = []
    errors = []
    for label, res in rows:
        if "error" in res:
            errors.append(f"{label}: {res['error']}")
        row = [label]
        for key, _ in COLUMNS:
            v = res.get(key)
            if isinstance(v, (int, float)):
                row.append(1e3 * v)
            elif isinstance(v, str):
                row.append("ERR")
                errors.append(f"{label} {key}: {v}")
            else:
                row.append("-")
        row.append(1e3 * res["wall"])
        table.append(row)

    C.print_table(["process"] + [h for _, h in COLUMNS] + ["process wall (ms)"], table)
    if errors:
        print()
        print("Errors:")
        for e in errors:
            print("  " + e)
    print()
    print("'process wall' includes interpreter start-up and exit.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
