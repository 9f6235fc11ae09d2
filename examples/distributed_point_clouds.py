"""Color transfer with the source pixels split across MPI ranks (numbaot.distributed).

The colours of a photograph are 3-D points; here each MPI rank holds only its
share of the source colours, the target palette is known to all, and the
entropic OT problem between the two point clouds is solved with
``numbaot.distributed.empirical_sinkhorn``: costs are recomputed on the fly
(no rank ever stores a cost matrix) and the ranks exchange one vector of
``--n-target`` numbers per iteration.

1. Source ``grace_hopper.jpg`` (matplotlib's sample photograph) and target
   ``coffee.png`` (scikit-image's data directory; matplotlib's
   ``Minduka_Present_Blue_Pack.png`` without scikit-image), read from installed
   packages with the loader of ``examples/color_transfer.py``; ``--n-source``
   and ``--n-target`` pixels sampled (seeded, identical on every rank).
2. Rank r takes rows ``numbaot.distributed.local_rows(n_source)`` of the
   source sample and calls ``empirical_sinkhorn(Xs_local, Xt, reg)``.
3. Each rank maps its colours to their barycentric images
   ``sum_j P_ij y_j / sum_j P_ij`` (plan rows formed block by block from the
   potentials); rank 0 gathers them, recolours every pixel from its nearest
   sampled colour and writes the figure ``--out``.
4. With ``--check`` rank 0 also solves the whole problem in one process
   (``numbaot.bregman.empirical_sinkhorn(..., isLazy=True)``) and prints the
   agreement of the potentials.

Run (from the repository root; ``pip install "numbaot[mpi,examples]"``)::

    mpiexec -n 2 python examples/distributed_point_clouds.py
    mpiexec -n 2 python examples/distributed_point_clouds.py --n-source 40000 --check

Give each rank its share of the cores, e.g. ``NUMBA_NUM_THREADS=1`` with as
many ranks as cores.  Exit status 1 if the potentials are not finite or (with
``--check``) disagree with the single-process solution by more than 1e-8.
"""
import argparse
import os
import sys
import time

import numpy as np
from mpi4py import MPI
from scipy.spatial import cKDTree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from color_transfer import (  # noqa: E402  (also puts a source checkout on sys.path)
    default_source, default_target, load_rgb, numbaot, plt, sample_pixels)

from numbaot import distributed  # noqa: E402


def barycentric_map(Xs, Xt, f, g, reg, block=2048):
    """sum_j P_ij y_j / sum_j P_ij with P_ij = exp(f_i + g_j - |x_i - y_j|^2 / reg),
    row blocks of ``block`` x n_target (the plan is never stored whole)."""
    out = np.empty_like(Xs)
    for i0 in range(0, len(Xs), block):
        C = numbaot.dist(Xs[i0:i0 + block], Xt)
        logP = f[i0:i0 + block, None] + g[None, :] - C / reg
        logP -= logP.max(axis=1, keepdims=True)
        P = np.exp(logP)
        out[i0:i0 + block] = (P @ Xt) / P.sum(axis=1, keepdims=True)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", default=None)
    p.add_argument("--target", default=None)
    p.add_argument("--n-source", type=int, default=10000)
    p.add_argument("--n-target", type=int, default=2000)
    p.add_argument("--reg", type=float, default=0.02)
    p.add_argument("--iters", type=int, default=200, help="numIterMax")
    p.add_argument("--check", action="store_true", help="compare with one process on rank 0")
    p.add_argument("--out", default="distributed_point_clouds.png")
    args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()

    src, src_mask = load_rgb(args.source or default_source())
    tgt, tgt_mask = load_rgb(args.target or default_target())
    rng = np.random.default_rng(0)
    Xs = sample_pixels(src, src_mask, args.n_source, rng)
    Xt = sample_pixels(tgt, tgt_mask, args.n_target, rng)
    rows = distributed.local_rows(args.n_source, comm)

    distributed.empirical_sinkhorn(Xs[rows], Xt, args.reg, numIterMax=10, warn=False)  # compile
    comm.Barrier()
    t0 = time.perf_counter()
    f, g, log = distributed.empirical_sinkhorn(Xs[rows], Xt, args.reg, numIterMax=args.iters,
                                               stopThr=1e-6, log=True, warn=False)
    t_solve = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    ok = comm.allreduce(bool(np.isfinite(f).all() and np.isfinite(g).all()), op=MPI.LAND)
    mapped = barycentric_map(Xs[rows], Xt, f, g, args.reg)
    mapped_all = comm.gather(mapped, root=0)
    f_all = comm.gather(f, root=0)
    if rank != 0:
        return 0 if ok else 1

    mapped_all = np.concatenate(mapped_all)
    print(f"{size} ranks, {args.n_source} source x {args.n_target} target colours "
          f"({args.n_source * args.n_target * 8 / 1e9:.2f} GB as a float64 cost matrix: never formed)")
    print(f"numbaot.distributed.empirical_sinkhorn: {t_solve:.2f} s, {log['niter'] + 1} iterations, "
          f"final marginal error {log['err'][-1]:.2e}")
    status = 0 if ok else 1
    if args.check:
        t0 = time.perf_counter()
        f1, g1 = numbaot.bregman.empirical_sinkhorn(Xs, Xt, args.reg, numIterMax=args.iters,
                                                    stopThr=1e-6, isLazy=True, warn=False)
        t1 = time.perf_counter() - t0
        diff = max(np.abs(np.concatenate(f_all) - f1).max(), np.abs(g - g1).max())
        print(f"one process (rank 0 alone): {t1:.2f} s; max |potential difference| = {diff:.1e}")
        if not diff <= 1e-8:
            status = 1
    tree = cKDTree(Xs)
    _, idx = tree.query(src.reshape(-1, 3))
    result = mapped_all[idx].reshape(src.shape)
    fig, ax = plt.subplots(1, 3, figsize=(12, 4))
    for a_, im, title in zip(ax, (src, tgt, result), ("source", "target", f"result ({size} ranks)")):
        a_.imshow(im)
        a_.set_title(title)
        a_.axis("off")
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f"figure written to {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
