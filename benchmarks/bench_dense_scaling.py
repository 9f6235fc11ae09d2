"""Dense ``sinkhorn_log`` with epsilon scaling (issue 21): total iterations
and time to POT's stopping test at small reg, on the colour-transfer problem.

The problem of ``examples/color_transfer.py``: n RGB colours sampled from
matplotlib's grace_hopper.jpg and n from scikit-image's coffee.png (seed 0),
squared Euclidean costs divided by their maximum, uniform weights, reg 1e-3
by default, stopThr 1e-9 (POT's default: the 2-norm of the column-marginal
violation, tested every 10 iterations).

Rows: numbaot's ``sinkhorn_log`` plain (POT's iterates) and with
``scaling=s`` (one iteration at each temperature eps_0 s**k > reg from
eps_0 = max M = 1, then POT's loop at reg from the annealed potentials);
the total counts every iteration, the annealing's included.  Each solver is
timed ``--repeats`` times, interleaved, after a warm-up (compilation); the
median is printed with the plan's largest difference from the plain
solver's plan and the transport cost <P, M>.  POT's own ``sinkhorn_log`` is
not timed at this size (about 35 ms per iteration at 2000^2 on this machine,
minutes to converge); ``--pot`` runs it once for its iteration count.

Usage: python benchmarks/bench_dense_scaling.py [--n 2000] [--reg 1e-3]
       [--scalings 0.5 0.7 0.9] [--repeats 3] [--max-iter 100000] [--pot]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts the repository first on sys.path)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
from color_transfer import (default_source, default_target, load_rgb,  # noqa: E402
                            sample_pixels)


def problem(n, seed=0):
    """(a, b, M) of the colour-transfer example with n colours per image."""
    import numbaot

    rng = np.random.default_rng(seed)
    src, src_mask = load_rgb(default_source())
    tgt, tgt_mask = load_rgb(default_target())
    Xs = sample_pixels(src, src_mask, n, rng)
    Xt = sample_pixels(tgt, tgt_mask, n, rng)
    M = numbaot.dist(Xs, Xt)
    M /= M.max()
    return numbaot.unif(n), numbaot.unif(n), M


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="colours per image")
    ap.add_argument("--reg", type=float, default=1e-3)
    ap.add_argument("--stop-thr", type=float, default=1e-9)
    ap.add_argument("--scalings", type=float, nargs="+", default=[0.5, 0.7, 0.9])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=100000)
    ap.add_argument("--pot", action="store_true", help="POT's sinkhorn_log once (slow)")
    args = ap.parse_args()

    import numbaot

    warnings.simplefilter("ignore")
    a, b, M = problem(args.n)
    _common.start_report(f"dense sinkhorn_log with epsilon scaling, colour transfer {args.n} x "
                         f"{args.n}, reg {args.reg:g}, stopThr {args.stop_thr:g}")
    solvers = [None] + list(args.scalings)

    def solve(s):
        return numbaot.sinkhorn_log(a, b, M, args.reg, numItermax=args.max_iter,
                                    stopThr=args.stop_thr, log=True, scaling=s)

    for s in solvers:  # warm-up: compilation
        numbaot.sinkhorn_log(a[:50] / a[:50].sum(), b[:50] / b[:50].sum(), M[:50, :50],
                             args.reg, numItermax=20, scaling=s)
    times = {s: [] for s in solvers}
    out = {}
    for _ in range(args.repeats):
        for s in solvers:
            t0 = time.perf_counter()
            out[s] = solve(s)
            times[s].append(time.perf_counter() - t0)
    G0 = out[None][0]
    print("| solver | iterations at reg | annealing iterations | total | time (s, median) | "
          "final error | max |P - P_plain| | <P, M> |")
    print("|---|---|---|---|---|---|---|---|")
    for s in solvers:
        G, lg = out[s]
        n_reg = lg["niter"] + 1
        n_ann = lg.get("niter_scaling", 0)
        name = "plain" if s is None else f"scaling {s}"
        print(f"| {name} | {n_reg} | {n_ann} | {n_reg + n_ann} | {np.median(times[s]):.3f} | "
              f"{lg['err'][-1]:.1e} | {np.abs(G - G0).max():.1e} | {float(np.sum(G * M)):.10f} |")
    if args.pot:
        import ot

        t0 = time.perf_counter()
        G, lg = ot.bregman.sinkhorn_log(a, b, M, args.reg, numItermax=args.max_iter,
                                        stopThr=args.stop_thr, log=True)
        print(f"\nPOT sinkhorn_log: {lg['niter'] + 1} iterations, {time.perf_counter() - t0:.1f} s, "
              f"max |P - P_plain| {np.abs(G - G0).max():.1e}")


if __name__ == "__main__":
    main()
