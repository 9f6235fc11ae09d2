"""Large point clouds (issue 21's 10^5 and 10^6 targets): multiscale epsilon
scaling, then iterations on the points, timed one by one, with memory.

The clouds of ``bench_eps_scaling.py`` (X uniform in the unit cube, Y on a
noisy sphere shell), n points each in 3-D, |x - y|^2, eps 0.05 by default.
Timed: ``numbaot._lazy.lazy_setup`` and ``multiscale_anneal`` (voxel
clustering, the stages hotter than the voxel scale on the centroids, the
extrapolation to the points), then ``--iters`` iterations on the points
(``lazy_steps``), each followed by the dual value sum_i a_i F_i + sum_j b_j
G_j (exact after a g-update; not timed).  No converged reference is computed
at these sizes (each iteration is 2 n^2 costs and exponentials): the printed
change of the dual value between iterates, which increases monotonically to
the entropic OT value, shows how far each iterate still is from the last.
Peak resident memory (``ru_maxrss``) is printed against the process's
before the problem was set up.

``--truncate both`` runs the problem twice, with kernel truncation (the
default of the multiscale path) and without (``multiscale_anneal(...,
truncate=False)``), and prints the two runs' times side by side, their ratio
and the largest difference of their dual values (truncation changes each
logsumexp by at most ``_config.LAZY_TRUNCATION_TOL``).

Usage: python benchmarks/bench_large_clouds.py [--n 100000] [--dtype float32]
       [--eps 0.05] [--scaling 0.5] [--iters 4] [--truncate on|off|both]
"""
import argparse
import os
import resource
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts the repository first on sys.path)
from bench_eps_scaling import clouds, dual_value  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000, help="points per cloud")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float32")
    ap.add_argument("--eps", type=float, default=0.05)
    ap.add_argument("--scaling", type=float, default=0.5)
    ap.add_argument("--iters", type=int, default=4, help="iterations on the points")
    ap.add_argument("--truncate", choices=("on", "off", "both"), default="on",
                    help="kernel truncation on the points (both: two runs side by side)")
    args = ap.parse_args()

    import numbaot

    warnings.simplefilter("ignore")
    Xw, Yw = clouds(64, seed=1)  # warm-up (compilation)
    numbaot.solve_sample(Xw.astype(args.dtype), Yw.astype(args.dtype), reg=args.eps,
                         method="geomloss_multiscale", scaling=args.scaling, tol=1e-6)
    X, Y = (x.astype(args.dtype) for x in clouds(args.n))
    _common.start_report(f"large clouds: {args.n} x {args.n} points in 3-D ({args.dtype}), "
                         f"|x - y|^2, eps {args.eps}, multiscale scaling {args.scaling}")
    runs = {"on": [True], "off": [False], "both": [True, False]}[args.truncate]
    results = {}
    for truncate in runs:
        label = "truncated" if truncate else "untruncated"
        print(f"-- {label}", flush=True)
        results[truncate] = one_run(X, Y, args, truncate)
    if len(results) == 2:
        (ta, va, ka), (tb, vb, _) = results[True], results[False]
        print("\n| | truncated (s) | untruncated (s) | ratio |")
        print("|---|---|---|---|")
        print(f"| setup and annealing | {ta[0]:.2f} | {tb[0]:.2f} | {tb[0] / ta[0]:.2f} |")
        it_a, it_b = np.diff(ta), np.diff(tb)
        print(f"| one iteration on the points (median) | {np.median(it_a):.2f} | "
              f"{np.median(it_b):.2f} | {np.median(it_b) / np.median(it_a):.2f} |")
        print(f"| to iterate {len(ta) - 1} | {ta[-1]:.2f} | {tb[-1]:.2f} | "
              f"{tb[-1] / ta[-1]:.2f} |")
        print(f"\nlargest relative difference of the dual values: "
              f"{np.max(np.abs(va - vb) / np.abs(vb)):.1e}; pairs kept by the last truncated "
              f"patterns: {ka[0]:.3f} (source rows), {ka[1]:.3f} (target rows)")


def one_run(X, Y, args, truncate):
    """Set up, anneal and iterate; prints the table.  Returns (times since
    the start: after the annealing, then after each iteration), the dual
    values and the last kept fractions."""
    from numbaot import _lazy

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    pb, _, _ = _lazy.lazy_setup(X, Y, args.eps, None, None, "sqeuclidean", 10, 0.0, 100, None,
                                scaling=args.scaling)
    n_coarse, n_fine, ncl = _lazy.multiscale_anneal(pb, truncate=truncate)
    t_anneal = time.perf_counter() - t0
    print(f"setup and multiscale annealing: {t_anneal:.2f} s ({n_coarse} "
          f"iterations on {ncl[0]} x {ncl[1]} centroids, {n_fine} on the points)", flush=True)
    vals, elapsed = [], []
    for k in range(args.iters):
        t1 = time.perf_counter()
        pb.be.lazy_steps(pb.st, 1)
        dt = time.perf_counter() - t1
        elapsed.append(time.perf_counter() - t0)
        vals.append(dual_value(pb.st, pb, args.eps))
        print(f"iteration {k + 1} on the points: {dt:.2f} s, {elapsed[-1]:.2f} s since the "
              f"start, dual value {vals[-1]:.10f}", flush=True)
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    v = np.array(vals)
    print()
    print("| iterate | time since the start (s) | dual value | relative change to the last |")
    print("|---|---|---|---|")
    for k in range(len(v)):
        print(f"| {k + 1} | {elapsed[k]:.2f} | {v[k]:.10f} | {abs(v[k] - v[-1]) / abs(v[-1]):.2e} |")
    print(f"\npeak resident memory {rss1:.0f} MB, {rss1 - rss0:.0f} MB above the process's before "
          f"the problem (inputs {(X.nbytes + Y.nbytes) / 1e6:.1f} MB)", flush=True)
    return np.array([t_anneal] + elapsed), v, pb.be.lazy_kept_fraction(pb.st)


if __name__ == "__main__":
    main()
