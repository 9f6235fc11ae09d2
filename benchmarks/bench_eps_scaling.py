"""Epsilon scaling on point clouds: time and iterations to a given accuracy.

10000 x 10000 points in 3-D (X uniform in the unit cube, Y on a noisy sphere
shell of radius 0.4 around the cube's centre), cost |x - y|^2, eps = 0.05 and
0.01.  For each solver, the time and the total number of iterations (annealing
included) until the relative error of the entropic OT value against a fully
converged reference is <= 3.5e-2 and <= 2e-4 (the accuracies of issue 21's
GeomLoss comparison):

* plain: numbaot's lazy solver (``empirical_sinkhorn(isLazy=True)``'s
  iterations), from zero potentials at the target eps;
* scaling s (0.25, 0.5, 0.7, 0.9; 0.25 on eps is GeomLoss's ``scaling=0.5``,
  a factor on blur = eps**(1/2)): ``solve_sample(method='geomloss_online',
  scaling=s)``'s iterations: one iteration at each eps_k = diameter**2 s**k
  > eps (diameter**2 = 3 here), then iterations at eps;
* multiscale s: ``solve_sample(method='geomloss_multiscale', scaling=s)``'s:
  the same temperatures, those above h**2 on the voxel centroids (h =
  ``numbaot._lazy.cluster_scale``, 0.079 here: about 10^3 and 4 10^2
  centroids), the coarse potentials carried to the points, the rest on the
  points.

The value after each iteration at the target eps is the dual objective
sum_i a_i F_i + sum_j b_j G_j (exact for the plan of the current potentials
after the g-update, whose columns sum to b; O(n + m), not timed); it
increases monotonically to the entropic OT value OT_eps, so the first
iteration under a threshold is the answer.  Timed: the launcher calls and the
temperature changes only (``numbaot._lazy.lazy_anneal`` and
``lazy_steps``), after a warm-up.  The reference is the epsilon-scaling
solver run to a marginal error (L1) of 1e-7.

``--dtype float32`` runs the solvers on the float32-rounded points (their
half-steps in float32 lanes where ``numbaot.cpu.empirical.lanes32_ok``
allows: eps >= 0.041 here), against the float64 reference of the same
points.

Usage: python benchmarks/bench_eps_scaling.py [--n 10000] [--quick] [--eps 0.05 0.01]
       [--scalings 0.25 0.5 0.7 0.9] [--stage-iters 1] [--max-iter 3000]
       [--dtype float64|float32]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts the repository first on sys.path)

THRESHOLDS = (3.5e-2, 2e-4)


def clouds(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    Y = 0.5 + d * (0.4 + 0.02 * rng.normal(size=(n, 1)))
    return X, Y


def dual_value(st, pb, reg):
    """sum_i a_i F_i + sum_j b_j G_j with F = reg (f - log a) (uniform
    weights: no zero weight), on the host."""
    f, g = pb.be.lazy_potentials(st)
    return reg * (np.dot(pb.a, f - pb.log_a) + np.dot(pb.b, g - pb.log_b))


def run(X, Y, reg, scaling, ref, max_iter, stage_iters, multiscale=False):
    """{threshold: (seconds, total iterations)} (None where not reached in
    max_iter iterations at eps) and the last relative error.  With
    ``multiscale`` the annealing is ``_lazy.multiscale_anneal``'s (the
    voxel clustering timed with it; the total counts the iterations on the
    centroids too)."""
    from numbaot import _lazy

    pb, _, _ = _lazy.lazy_setup(X, Y, reg, None, None, "sqeuclidean", 10, 0.0, 100, None,
                                scaling=scaling)
    st = pb.st
    t0 = time.perf_counter()
    if multiscale:
        n_coarse, n_fine, _ = _lazy.multiscale_anneal(pb, stage_iters)
        n_anneal = n_coarse + n_fine
    else:
        n_anneal = (_lazy.lazy_anneal(pb.be, st, pb.log_a, pb.log_b, pb.schedule, reg,
                                      stage_iters) if pb.schedule else 0)
    elapsed = time.perf_counter() - t0
    out = {thr: None for thr in THRESHOLDS}
    err = np.inf
    for k in range(1, max_iter + 1):
        t0 = time.perf_counter()
        pb.be.lazy_steps(st, 1)
        elapsed += time.perf_counter() - t0
        err = abs(dual_value(st, pb, reg) - ref) / abs(ref)
        for thr in THRESHOLDS:
            if out[thr] is None and err <= thr:
                out[thr] = (elapsed, n_anneal + k)
        if all(v is not None for v in out.values()):
            break
    return out, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000, help="points per cloud")
    ap.add_argument("--quick", action="store_true", help="3000 points per cloud")
    ap.add_argument("--eps", type=float, nargs="+", default=[0.05, 0.01])
    ap.add_argument("--scalings", type=float, nargs="+", default=[0.25, 0.5, 0.7, 0.9],
                    help="0.25 on eps is GeomLoss's scaling 0.5 on blur = eps**(1/2)")
    ap.add_argument("--stage-iters", type=int, default=None,
                    help="iterations per annealing stage (default: _config's)")
    ap.add_argument("--max-iter", type=int, default=3000,
                    help="iterations at the target eps, at most")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="dtype of the points the solvers get (the reference: float64)")
    args = ap.parse_args()
    n = 3000 if args.quick else args.n

    import numbaot
    from numbaot import _config

    warnings.simplefilter("ignore")
    stage_iters = args.stage_iters or _config.EPS_SCALING_STAGE_ITERS
    Xw, Yw = clouds(64, seed=1)  # warm-up (compilation)
    for dt in {"float64", args.dtype}:
        for method in ("geomloss_online", "geomloss_multiscale"):
            numbaot.solve_sample(Xw.astype(dt), Yw.astype(dt), reg=0.05, method=method,
                                 scaling=0.5, tol=1e-6)
    X, Y = (x.astype(args.dtype) for x in clouds(n))
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    _common.start_report(f"epsilon scaling, {n} x {n} points in 3-D ({args.dtype}), |x - y|^2, "
                         f"diameter**2 = {numbaot._lazy.max_diameter(X, Y) ** 2:.3f}, "
                         f"{stage_iters} iteration(s) per annealing stage")
    rows = []
    for reg in args.eps:
        t0 = time.perf_counter()
        res = numbaot.solve_sample(X64, Y64, reg=reg, method="geomloss_online", scaling=0.7,
                                   tol=1e-7, max_iter=100000)
        t_ref = time.perf_counter() - t0
        ref = float(np.mean(res.potentials[0]) + np.mean(res.potentials[1]))  # dual value
        print(f"# eps {reg}: reference OT_eps = {ref:.10f} (value {float(res.value):.10f}), "
              f"{res.log['niter_total']} iterations, {t_ref:.1f} s")
        cases = [(None, False)] + [(s, ms) for s in args.scalings for ms in (False, True)]
        for scaling, ms in cases:
            out, last = run(X, Y, reg, scaling, ref, args.max_iter, stage_iters, ms)
            cells = []
            for thr in THRESHOLDS:
                cells.append("not reached" if out[thr] is None else
                             f"{out[thr][0]:7.3f} s {out[thr][1]:5d} it")
            name = ("plain" if scaling is None else
                    f"{'multiscale' if ms else 'scaling'} {scaling}")
            rows.append((reg, name, cells))
            print(f"  eps {reg:<5} {name:<15} | " + " | ".join(cells), flush=True)
    print()
    print(f"| eps | solver | error <= {THRESHOLDS[0]:g} | error <= {THRESHOLDS[1]:g} |")
    print("|---|---|---|---|")
    for reg, name, cells in rows:
        print(f"| {reg} | {name} | " + " | ".join(c.replace("  ", " ").strip() for c in cells)
              + " |")


if __name__ == "__main__":
    main()
