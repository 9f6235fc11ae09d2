"""How much work can kernel truncation skip?  The floor of issue 21's multiscale scheme.

Kernel truncation (Schmitzer 2019; Feydy 2020, thesis ch. 3; GeomLoss's
``backend="multiscale"``) clusters both clouds and, at the fine scale, skips
the cluster pairs (I, J) whose plan is negligible.  Whatever rule picks the
pairs (GeomLoss tests the coarse potentials: F_I + G_J - C_IJ > -tau eps),
it cannot skip a pair that holds plan mass, so the best any such scheme can
do is set by the converged plan itself.  This script measures that bound:

* the clouds of ``bench_eps_scaling.py`` (X uniform in the unit cube, Y on a
  noisy sphere shell), uniform weights, cost |x - y|^2, eps = ``--eps``;
* the converged log-scalings (f, g) of numbaot's lazy solver
  (``empirical_sinkhorn(isLazy=True)``, stopThr 1e-7): the plan is
  P_ij = exp(f_i + g_j - C_ij / eps);
* voxel clusters of side h (``--cells``) on each cloud;
* for each threshold tau (``--taus``) the pairs that hold an entry with
  log(P_ij / (a_i b_j)) > -tau (GeomLoss's test, on the exact fine plan).

Printed per (h, tau): the fraction of cluster pairs kept, the fraction of the
n m entries in them (the work of a truncated iteration, relative to a full
one: 1 / work is the best speed-up per fine iteration) and the plan mass in
the pairs left out (total mass 1).  The plan is formed in blocks of 500 rows
with NumPy (float64), never whole.

Usage: python benchmarks/plan_sparsity.py [--n 10000] [--eps 0.05]
       [--cells 0.2 0.1] [--taus 5 10 20]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (puts the repository first on sys.path)
from bench_eps_scaling import clouds  # noqa: E402


def voxel_labels(X, h):
    """Cluster index (0 .. n_clusters - 1) of each point: its voxel of side h."""
    cells = np.floor(X / h).astype(np.int64)
    _, lab = np.unique(cells, axis=0, return_inverse=True)
    return lab.ravel()


def pair_stats(X, Y, f, g, eps, lx, ly, block=500):
    """Per cluster pair (I, J): the largest log(P_ij / (a_i b_j)) and the plan
    mass, from the plan formed block by block."""
    n, m = len(X), len(Y)
    NI, NJ = lx.max() + 1, ly.max() + 1
    best = np.full((NI, NJ), -np.inf)
    mass = np.zeros((NI, NJ))
    log_ab = -np.log(n) - np.log(m)
    for i0 in range(0, n, block):
        C = ((X[i0:i0 + block, None, :] - Y[None, :, :]) ** 2).sum(-1)
        L = f[i0:i0 + block, None] + g[None, :] - C / eps
        P = np.exp(L)
        rows = lx[i0:i0 + block]
        for I in np.unique(rows):
            sel = rows == I
            np.maximum.at(best[I], ly, L[sel].max(axis=0) - log_ab)
            np.add.at(mass[I], ly, P[sel].sum(axis=0))
    return best, mass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10000, help="points per cloud; default 10000")
    p.add_argument("--eps", type=float, default=0.05, help="reg on |x - y|^2; default 0.05")
    p.add_argument("--cells", type=float, nargs="+", default=[0.2, 0.1],
                   help="voxel sides h; default 0.2 0.1")
    p.add_argument("--taus", type=float, nargs="+", default=[5.0, 10.0, 20.0],
                   help="thresholds on log(P_ij / (a_i b_j)); default 5 10 20")
    args = p.parse_args(argv)
    import numbaot

    X, Y = clouds(args.n)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f, g, lg = numbaot.bregman.empirical_sinkhorn(X, Y, args.eps, isLazy=True,
                                                      numIterMax=100000, stopThr=1e-7, log=True)
    f, g = np.asarray(f), np.asarray(g)
    print(f"# {args.n} x {args.n} points in 3-D, eps = {args.eps}: converged in "
          f"{lg['niter']} iterations ({time.perf_counter() - t0:.1f} s)")
    print()
    print("| h | clusters X x Y | tau | pairs kept | work kept | best speed-up | mass left out |")
    print("|---|---|---|---|---|---|---|")
    for h in args.cells:
        lx, ly = voxel_labels(X, h), voxel_labels(Y, h)
        best, mass = pair_stats(X, Y, f, g, args.eps, lx, ly)
        work = np.outer(np.bincount(lx), np.bincount(ly)) / (len(X) * len(Y))
        for tau in args.taus:
            keep = best > -tau
            w = work[keep].sum()
            print(f"| {h} | {best.shape[0]} x {best.shape[1]} | {tau:g} | {keep.mean():.3f} | "
                  f"{w:.3f} | {1 / w:.2f} | {mass[~keep].sum():.2e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
