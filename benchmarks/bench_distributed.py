"""Scaling of ``numbaot.distributed`` on this machine: 1, 2, ... MPI ranks.

For each configuration (ranks x Numba threads per rank) the script launches
itself under ``mpiexec -n R`` with ``NUMBA_NUM_THREADS=T`` and reports, per
solver:

* ms per iteration: (t(n_long) - t(n_short)) / (n_long - n_short) of whole
  calls with ``stopThr=0`` (the set-up, e.g. forming K, cancels out), best of
  ``--repeats``;
* communication ms per iteration and share: time spent inside the MPI calls
  (Allreduce, the stopping-test broadcasts), measured by a timing wrapper
  around the communicator: per kind of call, the median duration times the
  calls per iteration (maximum over the ranks).  It includes waiting for the
  slower rank; the unbalanced solver's two non-blocking reductions are timed
  as two blocking ones by the wrapper;
* speed-up against 1 rank x 1 thread, and single-process ``numbaot`` (all
  threads, no MPI) for reference.

Problems (float64): ``sinkhorn`` and ``sinkhorn_log`` and
``sinkhorn_unbalanced`` on a dense n x m cost matrix (each rank builds only its
rows), ``empirical_sinkhorn`` on n x m points in 3-D (costs on the fly).

Usage::

    python benchmarks/bench_distributed.py                 # 1x1, 1x2, 2x1 on 2 cores
    python benchmarks/bench_distributed.py --configs 1x1 2x1 4x1 --n 8000 --m 4000
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402,F401  (puts the repository root on sys.path)


SOLVERS = ("sinkhorn", "sinkhorn_log", "sinkhorn_unbalanced", "empirical_sinkhorn")


class TimedComm:
    """Delegates to an mpi4py communicator, recording the duration of every
    collective numbaot.distributed calls (per kind of call)."""

    def __init__(self, comm, MPI):
        self._comm, self._MPI = comm, MPI
        self.calls = {}

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def _timed(self, kind, fn, *args, **kw):
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        self.calls.setdefault(kind, []).append(time.perf_counter() - t0)
        return out

    def Allreduce(self, *a, **kw):
        return self._timed("Allreduce", self._comm.Allreduce, *a, **kw)

    def Iallreduce(self, *a, **kw):  # timed as a blocking reduction
        self._timed("Iallreduce", self._comm.Allreduce, *a, **kw)
        return self._MPI.REQUEST_NULL

    def allreduce(self, *a, **kw):
        return self._timed("allreduce", self._comm.allreduce, *a, **kw)

    def bcast(self, *a, **kw):
        return self._timed("bcast", self._comm.bcast, *a, **kw)


def comm_per_iteration(short, long, d):
    """Communication seconds per iteration: for each kind of call, the median
    duration times the number of calls the d extra iterations added (the
    medians leave out the first reduction, which also waits for the slowest
    rank's set-up)."""
    t = 0.0
    for kind, durs in long.calls.items():
        extra = len(durs) - len(short.calls.get(kind, []))
        if extra > 0:
            t += float(np.median(durs)) * extra / d
    return t


def _problems(n, m, seed=0):
    rng = np.random.default_rng(seed)
    X, Y = rng.random((n, 3)), rng.random((m, 3))
    a = rng.random(n) + 0.5
    b = rng.random(m) + 0.5
    return X, Y, a / a.sum(), b / b.sum()


def worker(args):
    from mpi4py import MPI

    import numbaot
    from numbaot import distributed as D
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    X, Y, a, b = _problems(args.n, args.m)
    sl = D.local_rows(args.n, comm)
    Ml = numbaot.dist(X[sl], Y)
    Ml /= 3.0
    calls = {
        "sinkhorn": lambda c, it: D.sinkhorn(a[sl], b, Ml, 0.05, numItermax=it, stopThr=0,
                                             warn=False, comm=c),
        "sinkhorn_log": lambda c, it: D.sinkhorn(a[sl], b, Ml, 0.01, method="sinkhorn_log",
                                                 numItermax=it, stopThr=0, warn=False, comm=c),
        "sinkhorn_unbalanced": lambda c, it: D.sinkhorn_unbalanced(
            a[sl], 1.5 * b, Ml, 0.05, 1.0, numItermax=it, stopThr=0, comm=c),
        "empirical_sinkhorn": lambda c, it: D.empirical_sinkhorn(
            X[sl], Y, 0.05, a_local=a[sl], b=b, numIterMax=it, stopThr=0, warn=False, comm=c),
    }
    out = {}
    for name, fn in calls.items():
        if name not in args.solvers:
            continue
        n_short, n_long = (10, 10 + args.iters) if name != "empirical_sinkhorn" else (10, 30)
        best = {}
        for it in (n_short, n_long):
            runs = []
            for _ in range(args.repeats + 1):  # the first call compiles / warms up
                tc = TimedComm(comm, MPI)
                comm.Barrier()
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fn(tc, it)
                runs.append((comm.allreduce(time.perf_counter() - t0, op=MPI.MAX), tc))
            best[it] = min(runs[1:], key=lambda r: r[0])
        d = n_long - n_short
        comm_it = comm.allreduce(comm_per_iteration(best[n_short][1], best[n_long][1], d),
                                 op=MPI.MAX)
        out[name] = dict(ms_it=1e3 * (best[n_long][0] - best[n_short][0]) / d,
                         comm_ms_it=1e3 * comm_it)
    if rank == 0:
        with open(args.json, "w") as fh:
            json.dump(out, fh)


def single_process(args):
    """numbaot without MPI (all threads), same problems, same timing rule."""
    import numbaot
    X, Y, a, b = _problems(args.n, args.m)
    M = numbaot.dist(X, Y) / 3.0
    calls = {
        "sinkhorn": lambda it: numbaot.sinkhorn(a, b, M, 0.05, numItermax=it, stopThr=0, warn=False),
        "sinkhorn_log": lambda it: numbaot.sinkhorn(a, b, M, 0.01, method="sinkhorn_log",
                                                    numItermax=it, stopThr=0, warn=False),
        "sinkhorn_unbalanced": lambda it: numbaot.sinkhorn_unbalanced(
            a, 1.5 * b, M, 0.05, 1.0, numItermax=it, stopThr=0),
        "empirical_sinkhorn": lambda it: numbaot.bregman.empirical_sinkhorn(
            X, Y, 0.05, a=a, b=b, numIterMax=it, stopThr=0, isLazy=True, warn=False),
    }
    out = {}
    for name, fn in calls.items():
        if name not in args.solvers:
            continue
        n_short, n_long = (10, 10 + args.iters) if name != "empirical_sinkhorn" else (10, 30)
        t = {it: C.time_call(lambda: fn(it), repeats=args.repeats)["best"] for it in (n_short, n_long)}
        out[name] = 1e3 * (t[n_long] - t[n_short]) / (n_long - n_short)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=6000, help="source points / rows of M")
    p.add_argument("--m", type=int, default=4000, help="target points / columns of M")
    p.add_argument("--iters", type=int, default=40, help="extra iterations timed")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--configs", nargs="+", default=["1x1", "1x2", "2x1"],
                   help="RANKSxTHREADS per rank")
    p.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=SOLVERS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    print(f"n = {args.n}, m = {args.m} (M: {args.n * args.m * 8 / 1e6:.0f} MB float64), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()}")
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    res = {}
    for cfg in args.configs:
        r, t = (int(x) for x in cfg.split("x"))
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            env = dict(os.environ, NUMBA_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS="1")
            cmd = [exe, "-n", str(r), sys.executable, os.path.abspath(__file__), "--worker",
                   "--json", out, "--n", str(args.n), "--m", str(args.m),
                   "--iters", str(args.iters), "--repeats", str(args.repeats),
                   "--solvers", *args.solvers]
            subprocess.run(cmd, env=env, check=True)
            with open(out) as fh:
                res[cfg] = json.load(fh)
    single = single_process(args)
    base = res.get("1x1")
    print(f"\n| solver | ranks x threads | ms/it | comm ms/it | comm share | speed-up vs 1x1 |")
    print("|---|---|---|---|---|---|")
    for name in single:
        for cfg, r in res.items():
            x = r[name]
            sp = base[name]["ms_it"] / x["ms_it"] if base else float("nan")
            print(f"| {name} | {cfg} | {x['ms_it']:.2f} | {x['comm_ms_it']:.3f} | "
                  f"{x['comm_ms_it'] / x['ms_it']:.1%} | {sp:.2f}x |")
        print(f"| {name} | no MPI, {os.cpu_count()} threads | {single[name]:.2f} | - | - | "
              f"{base[name]['ms_it'] / single[name] if base else float('nan'):.2f}x |")


if __name__ == "__main__":
    main()
