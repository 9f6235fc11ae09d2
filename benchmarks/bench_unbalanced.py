"""Per-iteration cost of numbaot's unbalanced Sinkhorn against POT.

Times, side by side, ``numbaot.unbalanced.sinkhorn_unbalanced`` and
``ot.unbalanced.sinkhorn_unbalanced`` (method 'sinkhorn', reg_type 'kl',
reg_m = 1) at the shapes of the issue (1000^2, 2000^2, 4000^2 and MAP-UOT's
rectangular 1024x10240, 10240x1024), float64 and float32.  ``stopThr=0`` so
exactly numItermax iterations run; each solver is timed at two iteration
counts N1 < N2 and

    ms/iteration = (t(N2) - t(N1)) / (N2 - N1)     (best-of-k times)

so the setup (K = exp(-M/reg) * a b^T, the final plan) cancels.

Floor: one iteration must read K once, dim_a * dim_b * itemsize bytes
(numbaot reads it exactly once; POT reads it twice: K v and K^T u).  The
script measures the machine's read bandwidth (parallel Numba prange sum over
a 1 GiB float64 array) and prints the achieved read bandwidth of numbaot,
(bytes of K) / (time per iteration), next to it, as a fraction of that
bandwidth and of one parallel read pass over this very K (which is faster
than the 1 GiB figure when part of K stays in the 32 MiB L3).

Usage::

    python benchmarks/bench_unbalanced.py                 # full
    python benchmarks/bench_unbalanced.py --quick         # smoke run
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_unbalanced.py --threads 1   # one core each
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SHAPES = [(1000, 1000), (2000, 2000), (4000, 4000), (1024, 10240), (10240, 1024)]


def problem(n, m, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 2))
    y = rng.random((m, 2))
    M = C.sqeuclidean(x, y)
    M /= M.max()
    a = C.random_hist(rng, n)
    b = C.random_hist(rng, m) * 1.5
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=None,
                   help="shapes as NxM (default: the five of the issue)")
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    p.add_argument("--iters", type=int, nargs=2, default=None, metavar=("N1", "N2"))
    p.add_argument("--reg", type=float, default=0.05)
    p.add_argument("--reg-m", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-time", type=float, default=30.0)
    p.add_argument("--threads", type=int, default=None,
                   help="numba.set_num_threads(...) before timing (set OPENBLAS_NUM_THREADS "
                        "/ OMP_NUM_THREADS in the environment to pin POT's BLAS too)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)

    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(t) for t in s.lower().split("x")) for s in args.shapes]
    if args.quick and not args.shapes:
        shapes = [(300, 300), (200, 900)]
    n1, n2 = args.iters or ((3, 13) if args.quick else (5, 35))
    repeats = 2 if args.quick else args.repeats

    import numba
    import ot

    numbaot = C.import_numbaot("unbalanced")
    if args.threads:
        numba.set_num_threads(args.threads)

    C.start_report("bench_unbalanced")
    bw = C.measure_bandwidth(0.25 if args.quick else 1.0, repeats=3 if args.quick else 5)
    bw_gbs = max(bw["numba_nt"], bw["numpy_1t"], bw["numba_1t"])
    print(f"Measured read bandwidth ({bw['bytes'] / 2**30:.2f} GiB float64 array): "
          f"numpy sum 1 thread {bw['numpy_1t']:.1f} GB/s, numba prange sum 1 thread "
          f"{bw['numba_1t']:.1f} GB/s, {bw['nthreads']} threads {bw['numba_nt']:.1f} GB/s; "
          f"reference: {bw_gbs:.1f} GB/s")
    print(f"reg={args.reg}, reg_m={args.reg_m}, reg_type='kl', method='sinkhorn', stopThr=0, "
          f"N1,N2=({n1},{n2}), repeats={repeats} (best), numba threads={numba.get_num_threads()}")
    print()

    rows, checks = [], []
    for shape in shapes:
        for dtname in args.dtypes:
            dtype = np.dtype(dtname)
            a, b, M = problem(*shape, dtype)
            kbytes = M.size * dtype.itemsize

            def mk_nb(n):
                return lambda: numbaot.unbalanced.sinkhorn_unbalanced(
                    a, b, M, args.reg, args.reg_m, numItermax=n, stopThr=0.0)

            def mk_pot(n):
                return lambda: ot.unbalanced.sinkhorn_unbalanced(
                    a, b, M, args.reg, args.reg_m, numItermax=n, stopThr=0.0)

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Gn = mk_nb(n1)()
                Gp = mk_pot(n1)()
            checks.append([f"{shape[0]}x{shape[1]}", dtname, str(Gn.dtype),
                           C.rel_diff(Gn.astype(np.float64), Gp.astype(np.float64))])
            tn = C.per_iteration(mk_nb, n1, n2, repeats=repeats, max_time=args.max_time)
            tp = C.per_iteration(mk_pot, n1, n2, repeats=repeats, max_time=args.max_time)
            read = C.one_pass_read_time(M)
            nb_ms, pot_ms = tn["per_iter"] * 1e3, tp["per_iter"] * 1e3
            achieved = kbytes / tn["per_iter"] / 1e9
            rows.append([f"{shape[0]}x{shape[1]}", dtname, pot_ms, nb_ms, pot_ms / nb_ms,
                         kbytes / 1e6, achieved, kbytes / read / 1e9, achieved / bw_gbs,
                         read / tn["per_iter"]])
    print("## ms per iteration (numbaot reads K once per iteration)")
    print()
    C.print_table(["shape", "dtype", "POT ms/it", "numbaot ms/it", "speed-up",
                   "K MB", "numbaot GB/s", "1-pass read GB/s (this K)", "of measured bw",
                   "of 1-pass read (this K)"], rows)
    print()
    print("## agreement after N1 iterations (max |G_nb - G_pot| / max |G_pot|)")
    print()
    C.print_table(["shape", "dtype", "result dtype", "rel diff"], checks)


if __name__ == "__main__":
    main()
