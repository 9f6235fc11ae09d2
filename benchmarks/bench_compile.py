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

``--kernels`` (issue 23) instead measures, for each public function of
the issue's list (or those named), one first call in a fresh process with a
fresh, empty ``NUMBA_CACHE_DIR`` and then the same call in a second process
on that (now warm) cache, and prints

* per function: the cold first call (wall, and the CPU time of the child
  process from ``getrusage``), the number of Numba specialisations compiled
  and the main thread's CPU time spent compiling them, then the warm
  process's import and first call;
* per kernel: each compiled specialisation's own compile time (main-thread
  CPU, ``time.thread_time``; the time of the functions it compiles in turn,
  e.g. the helpers it calls, is subtracted and shown on their rows) and its
  inclusive time.  Numba's own overloads (``np.empty``, ``str``...) are
  grouped into one row.

Compile times are taken around ``numba.core.dispatcher.Dispatcher.compile``
(which also covers the disk-cache load and save).  On a loaded machine wall
times mean little: compare the CPU columns (the load average is printed).

Usage::

    python benchmarks/bench_compile.py
    python benchmarks/bench_compile.py --runs 3 --default-cache
    python benchmarks/bench_compile.py --kernels
    python benchmarks/bench_compile.py --kernels sinkhorn sinkhorn_log --top 8
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


# --------------------------------------------------------------------------
# --kernels: per-function and per-kernel compile profile (issue 23)
# --------------------------------------------------------------------------
#: the first calls of the issue's list: key -> (setup, call), code run in the child
KERNEL_CALLS = {
    "sinkhorn": ("", "lib.sinkhorn(a, b, M, 0.05, numItermax=100, stopThr=0.0)"),
    "sinkhorn_log": ("", "lib.sinkhorn(a, b, M, 0.05, method='sinkhorn_log', numItermax=100, "
                         "stopThr=0.0)"),
    "sinkhorn_unbalanced": ("", "lib.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=100, "
                                "stopThr=0.0)"),
    "empirical_sinkhorn": ("", "lib.bregman.empirical_sinkhorn(x, y, 0.05, numIterMax=100, "
                               "stopThr=0.0, isLazy=True)"),
    "barycenter": ("", "lib.barycenter(np.stack([a, b], 1), M, 0.05, numItermax=100, "
                       "stopThr=0.0)"),
    "discounted_cumsum_right": ("X = rng.random((4, 1000))",
                                "lib.discounted_cumsum_right(X, 0.99)"),
    "sinkhorn2_value_and_grad": ("", "lib.sinkhorn2_value_and_grad(a, b, M, 0.05, "
                                     "numItermax=100, stopThr=0.0)"),
    "entropic_partial_wasserstein": ("import numbaot.partial",
                                     "lib.partial.entropic_partial_wasserstein(a, b, M, 0.05, "
                                     "m=0.5, numItermax=100)"),
    "sinkhorn_operator": ("X = rng.uniform(0, 4, (64, 16, 16))",
                          "lib.sinkhorn_operator(X, n_iter=30)"),
    # the forward's kernels are compiled (and not counted) in the setup
    "sinkhorn_operator_backward": (
        "R = lib.sinkhorn_operator(rng.uniform(0, 4, (64, 16, 16)), n_iter=30); "
        "G = rng.standard_normal(R.shape); REC.clear()",
        "lib.sinkhorn_operator_backward(R, G)"),
}

KCHILD = r'''
import json, time
w0 = time.perf_counter()
from numba.core import dispatcher as _nd
REC, _STACK = [], []
_orig = _nd.Dispatcher.compile

def _compile(self, sig):
    misses = sum(self._cache_misses.values())
    had = len(self.overloads)
    frame = [0.0]
    _STACK.append(frame)
    c0 = time.thread_time()
    try:
        return _orig(self, sig)
    finally:
        dc = time.thread_time() - c0
        _STACK.pop()
        if _STACK:
            _STACK[-1][0] += dc
        if len(self.overloads) > had:
            REC.append(dict(k=self.py_func.__module__ + "." + self.py_func.__qualname__,
                            sig=str(sig), cpu=dc, own=dc - frame[0],
                            compiled=sum(self._cache_misses.values()) > misses))

_nd.Dispatcher.compile = _compile
import numbaot as lib
import numbaot.bregman
T = {"import": time.perf_counter() - w0}
import warnings
import numpy as np
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
n = {n}
x, y = rng.random((n, 2)), rng.random((n, 2))
M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
M /= M.max()
a = np.full(n, 1.0 / n)
b = np.full(n, 1.0 / n)
{setup}
w0 = time.perf_counter()
c0 = time.thread_time()
{call}
T["first"] = time.perf_counter() - w0
T["first_thread_cpu"] = time.thread_time() - c0
w0 = time.perf_counter()
{call}
T["second"] = time.perf_counter() - w0
print("RESULT " + json.dumps({"T": T, "rec": REC}))
'''


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def run_kernel_child(key, n, env):
    """One child process: (result dict, wall s, child CPU s (user + sys))."""
    setup, call = KERNEL_CALLS[key]
    code = KCHILD.replace("{n}", str(int(n))).replace("{setup}", setup).replace("{call}", call)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=C.REPO_ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), wall, cpu
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
    return {"error": f"rc={proc.returncode}: " + " / ".join(tail)}, wall, cpu


def _kernel_rows(rec, top):
    """Per-kernel rows (name, specialisations, own CPU, inclusive CPU) of the
    compiled records, numba's internals grouped, largest own time first."""
    agg = {}
    for r in rec:
        if not r["compiled"]:
            continue
        k = r["k"]
        if k.startswith("numba."):
            k = "(numba internals)"
        elif k.startswith("numbaot."):
            k = k[len("numbaot."):]
        a = agg.setdefault(k, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += r["own"]
        a[2] += r["cpu"]
    rows = sorted(agg.items(), key=lambda kv: -kv[1][1])
    shown = rows[:top] if top else rows
    rest = rows[len(shown):]
    out = [[k, n_, own, inc] for k, (n_, own, inc) in shown]
    if rest:
        out.append([f"({len(rest)} more)", sum(v[0] for _, v in rest),
                    sum(v[1] for _, v in rest), "-"])
    return out


def main_kernels(args):
    keys = args.kernels or list(KERNEL_CALLS)
    bad = [k for k in keys if k not in KERNEL_CALLS]
    if bad:
        raise SystemExit(f"--kernels: unknown {bad}; known: {list(KERNEL_CALLS)}")
    print(f"first call of each function on a {args.n}x{args.n} float64 problem (numItermax=100, "
          f"stopThr=0), in a fresh process with a fresh, empty NUMBA_CACHE_DIR, then the same "
          f"call in a second process on that warm cache; load average (1 min) at the start: "
          f"{_loadavg():.1f} on {os.cpu_count()} CPUs")
    print()
    summary, details, errors = [], [], []
    for key in keys:
        print(f"... {key}", file=sys.stderr, flush=True)
        tmp = tempfile.mkdtemp(prefix="numbaot-bench-cache-")
        env = dict(os.environ, NUMBA_CACHE_DIR=tmp)
        try:
            load = _loadavg()
            cold, wall, cpu = run_kernel_child(key, args.n, env)
            warm, wwall, _ = run_kernel_child(key, args.n, env)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for label, res in (("cold", cold), ("warm", warm)):
            if "error" in res:
                errors.append(f"{key} ({label}): {res['error']}")
        if "error" in cold:
            continue
        rec = cold["rec"]
        comp = [r for r in rec if r["compiled"]]
        T, W = cold["T"], warm.get("T", {})
        warm_compiled = sum(1 for r in warm.get("rec", []) if r["compiled"])
        summary.append([key, T["first"], cpu, len(comp), sum(r["own"] for r in comp),
                        W.get("import", "-"), W.get("first", "-"),
                        W.get("first_thread_cpu", "-"), warm_compiled, load])
        for row in _kernel_rows(rec, args.top):
            details.append([key] + row)
    C.print_table(["function", "cold 1st call wall (s)", "cold child CPU (s)",
                   "specialisations compiled", "compile CPU, main thread (s)",
                   "warm import (s)", "warm 1st call (s)", "warm 1st call CPU, main thread (s)",
                   "compiled in warm run",
                   "load avg"], summary)
    print()
    C.print_table(["function", "kernel", "specialisations", "own compile CPU (s)",
                   "incl. callees (s)"], details)
    if errors:
        print()
        print("Errors:")
        for e in errors:
            print("  " + e)
    print()
    print("'cold child CPU' is the child's user + system time (all threads, import included); "
          "the compile columns are main-thread CPU time (time.thread_time) inside "
          "Dispatcher.compile.")
    return 0


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
    p.add_argument("--kernels", nargs="*", default=None, metavar="FUNCTION",
                   help="per-function and per-kernel compile profile (cold, then warm cache) "
                        f"of these functions; none named: all of {list(KERNEL_CALLS)}")
    p.add_argument("--top", type=int, default=12,
                   help="--kernels: kernels shown per function (0: all); default 12")
    args = p.parse_args(argv)

    C.start_report("bench_compile")
    if args.kernels is not None:
        return main_kernels(args)

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
