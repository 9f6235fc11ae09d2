"""numbaot inside a loop that also calls NumPy's BLAS (a training step).

After a multi-threaded BLAS call, OpenBLAS's worker threads keep spinning
for a while (about 0.1 s: ``OPENBLAS_THREAD_TIMEOUT``), and after a numbaot
parallel kernel Numba's OpenMP workers spin for a few milliseconds (GNU
OpenMP's ``GOMP_SPINCOUNT``).  On a machine with few cores the two pools
then take the cores from each other: the parallel kernels wait at every
region for their slowest thread, and a BLAS call waits for its workers.
This script runs one loop per mode, each step one BLAS call (``M @ x``, a
matrix-vector product on the problem's M) and one ``numbaot.sinkhorn``
call, and prints the median time of each part and of the step:

* ``numbaot alone``: no BLAS call in the loop (the reference);
* ``default``: both with their default thread counts;
* ``BLAS limited``: the loop under
  ``threadpoolctl.threadpool_limits(1, "blas")`` (no OpenBLAS workers; the
  context around the loop, not around each call: entering it costs about
  2 ms);
* ``numbaot 1 thread``: the numbaot call under
  ``numbaot._dispatch.num_threads(1)``.

A second table times loops of numbaot's own higher-level calls alone
(``solve``, ``solve_sample``, ``barycenter`` of three histograms, dense
``empirical_sinkhorn``), with BLAS at its default thread count and limited
to one thread: a BLAS call of numbaot's own host code (NumPy's ``vdot``,
``@``, the product of |x|^2 + |y|^2 - 2 x.y) would make the default loop
slower than the limited one (before 2026-11-29 they did: ``solve`` at 1000^2
24 ms a call against 11).

Usage::

    python benchmarks/bench_loop.py
    python benchmarks/bench_loop.py --sizes 512 1024 2048 --steps 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings

from _common import import_numbaot, make_problem, print_table, start_report


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--steps", type=int, default=11)
    p.add_argument("--iters", type=int, default=50, help="Sinkhorn iterations per call")
    p.add_argument("--reg", type=float, default=0.05)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-own", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(run_size(args.sizes[0], args)))
        return
    if args.child_own:
        print(json.dumps(run_own(args.sizes[0], args)))
        return
    start_report("bench_loop: numbaot.sinkhorn in a loop with NumPy BLAS calls")
    rows = []
    for n in args.sizes:
        # one process per size: a loop's spinning threads and caches do not
        # reach the next size's loops
        out = subprocess.run([sys.executable, __file__, "--child", "--sizes", str(n), "--steps",
                              str(args.steps), "--iters", str(args.iters), "--reg",
                              str(args.reg)], capture_output=True, text=True, check=True)
        rows += json.loads(out.stdout.strip().splitlines()[-1])
    print(f"numbaot.sinkhorn, {args.iters} iterations (stopThr=0), reg {args.reg}; "
          f"median ms over {args.steps} steps of each loop (one process per n)")
    print_table(["n", "loop", "numbaot.sinkhorn ms", "M @ x ms", "step ms"], rows)
    rows = []
    for n in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--child-own", "--sizes", str(n),
                              "--steps", str(args.steps), "--reg", str(args.reg)],
                             capture_output=True, text=True, check=True)
        rows += json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\nnumbaot's own calls in a loop, nothing else (default stopThr, reg {args.reg}; "
          f"median ms over {args.steps} calls; BLAS at its default thread count, then "
          "limited to 1 thread around the loop; one process per n)")
    print_table(["n", "call", "default BLAS ms", "BLAS on 1 thread ms", "default / limited"],
                rows)


def run_size(n, args):
    """The four loops at size n: table rows."""
    from threadpoolctl import threadpool_limits

    numbaot = import_numbaot()
    from numbaot._dispatch import num_threads

    rows = []
    a, b, M = make_problem(n)
    x = b.copy()

    def solve():
        return numbaot.sinkhorn(a, b, M, args.reg, numItermax=args.iters, stopThr=0.0)

    def blas():
        return M @ x

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def one_thread_solve():
        with num_threads(1):
            return solve()

    def step(blas_fn, solve_fn, out):
        out["blas"].append(timed(blas_fn) if blas_fn is not None else 0.0)
        out["solve"].append(timed(solve_fn))

    # (BLAS limits around the whole loop: threadpoolctl's context costs
    # about 2 ms per entry, more than the BLAS call here)
    modes = {"numbaot alone": (None, solve, False), "default": (blas, solve, False),
             "BLAS limited": (blas, solve, True),
             "numbaot 1 thread": (blas, one_thread_solve, False)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solve()
        one_thread_solve()
        for mode, (blas_fn, solve_fn, limit) in modes.items():
            time.sleep(0.3)  # the previous loop's spinning workers go to sleep
            out = {"blas": [], "solve": []}
            with threadpool_limits(1 if limit else None, "blas"):
                for _ in range(2):  # settle into the loop's state
                    step(blas_fn, solve_fn, {"blas": [], "solve": []})
                for _ in range(args.steps):
                    step(blas_fn, solve_fn, out)
            tb = statistics.median(out["blas"]) * 1e3
            ts = statistics.median(out["solve"]) * 1e3
            tt = statistics.median([p + q for p, q in zip(out["blas"], out["solve"])]) * 1e3
            rows.append([n, mode, f"{ts:.2f}", f"{tb:.3f}" if blas_fn else "-", f"{tt:.2f}"])
    return rows


def run_own(n, args):
    """Loops of numbaot's own higher-level calls at size n, BLAS at its
    default thread count and on one thread: table rows."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    numbaot = import_numbaot()
    a, b, M = make_problem(n)
    rng = np.random.default_rng(0)
    xs, xt = rng.random((n, 2)), rng.random((n, 2))
    H = rng.random((n, 3))
    H /= H.sum(0)
    calls = {
        "solve(M, a, b, reg)": lambda: numbaot.solve(M, a, b, reg=args.reg),
        "solve_sample(xs, xt, reg=reg)": lambda: numbaot.solve_sample(xs, xt, reg=args.reg),
        "barycenter(A, M, reg), 3 histograms": lambda: numbaot.barycenter(H, M, args.reg),
        "bregman.empirical_sinkhorn(xs, xt, reg)":
            lambda: numbaot.bregman.empirical_sinkhorn(xs, xt, args.reg),
    }
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in calls.items():
            # a process's first half second of calls runs about 1.4x slower
            # (solve_sample at 1024, BLAS limited or not): not timed
            t_end = time.perf_counter() + 0.5
            while time.perf_counter() < t_end:
                fn()
            med = {}
            for limit in (None, 1):
                time.sleep(0.3)  # the previous loop's spinning workers go to sleep
                with threadpool_limits(limit, "blas"):
                    fn()
                    fn()
                    ts = []
                    for _ in range(args.steps):
                        t0 = time.perf_counter()
                        fn()
                        ts.append(time.perf_counter() - t0)
                med[limit] = statistics.median(ts) * 1e3
            rows.append([n, name, f"{med[None]:.2f}", f"{med[1]:.2f}",
                         f"{med[None] / med[1]:.2f}"])
    return rows


if __name__ == "__main__":
    main()
