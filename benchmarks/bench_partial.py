"""Per-iteration cost of numbaot's entropic partial OT against POT.

Times, side by side, ``numbaot.partial.entropic_partial_wasserstein`` and
``ot.partial.entropic_partial_wasserstein`` (and both ``..._logscale``
solvers) at n x n = 128, 512, 2048, with ``numbaot.sinkhorn`` (balanced
Sinkhorn-Knopp) on the same matrix for comparison.  ``stopThr=0``: the
loops run while the error is > 0, i.e. all numItermax iterations unless an
iterate repeats exactly (the script checks that numbaot ran them all); each solver is timed at two iteration
counts N1 < N2 and

    ms/iteration = (t(N2) - t(N1)) / (N2 - N1)     (best-of-k, interleaved)

so the setup (the kernel, the final plan) cancels.  POT is timed with fewer
iterations than numbaot (its iterations cost ~1000x more); the counts used
are printed.

Floor.  POT forms two dense products diag(.) @ K per iteration,
2 (n^2 m + n m^2) flops (4 n^3 for n = m), plus about 15 elementwise passes
over (n, m) arrays.  numbaot's iteration (corrections collapsed to vectors,
see ``numbaot/cpu/partial.py``) reads K0 once (8 n m bytes in float64:
0.13 MB at 128, 2.1 MB at 512, 33.6 MB at 2048), a tile of rows being
re-read from L2 for the column sums; POT's error, every 10th iteration, is
taken in the same read as the next iteration's pass: one read of K per
iteration, as balanced Sinkhorn-Knopp (``numbaot.sinkhorn``).  The log-domain solver reads M once and computes
one exponential per entry (its error needs no read of M).

``--twins``: instead, the small path (``numbaot.cpu.partial``: the whole
loop in one compiled call on serial kernels) against the parallel kernels
on the same problem, each forced in turn (``numbaot.cpu.partial._is_small``),
alternated in one process: the median of the pairwise ratios of whole
calls (200 iterations, m = 0.7; the data behind the size rule).

``--batch K``: instead, a paired batch of K problems sharing M (b of shape
(n, K), a shared, one m per problem) in one call against K single calls of
numbaot (alternated in one process, median of the pairwise ratios) and
against K calls of POT (timed once): whole calls of ``--iters`` iterations
(stopThr = 0); and ``numbaot.sinkhorn`` on the same batch (balanced, the
weights normalised) against it.  The batch reads K0 once per iteration for all problems.

Usage::

    python benchmarks/bench_partial.py --batch 8 32 --sizes 64 128 256 512
    python benchmarks/bench_partial.py --twins --sizes 32 64 90 128 181 256 362
    python benchmarks/bench_partial.py                # n = 128, 512, 2048, float64
    python benchmarks/bench_partial.py --quick        # n = 128, 512
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_partial.py --threads 1   # one core each
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def problem(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 2))
    y = rng.random((n, 2))
    M = C.sqeuclidean(x, y)
    M /= M.max()
    a = C.random_hist(rng, n)
    b = C.random_hist(rng, n) * 1.5
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


#: (N1, N2) iteration counts: POT, numbaot
#: (at 64^2 an iteration takes under a microsecond: 500 iterations between
#: the two counts keep the difference well above the timing noise)
ITERS = {64: ((2, 6), (20, 520)), 128: ((5, 25), (20, 220)), 512: ((2, 6), (20, 220)),
         2048: ((1, 3), (10, 60))}


def full_run_counts(solver, a, b, M, reg, n1, n2):
    """Iteration counts (n1, n2) at which ``solver`` runs every iteration.

    With ``stopThr=0`` the loop still stops when the error is exactly 0: the
    log-domain iterates reach an exact fixed point in floating point (at
    n = 128, reg 0.05: after about 50 iterations, in POT too).  The error is
    recorded at iterations 0, 10, 20, ..., so a run whose list has k entries
    stopped after iteration 10 (k - 1); every count <= 10 (k - 1) runs in full.
    The counts are lowered to stay inside that window (checked again after).
    """
    _, lg = solver(a, b, M, reg, m=0.8, numItermax=n2, stopThr=0.0, log=True)
    if len(lg["err"]) < (n2 + 9) // 10:
        n2 = 10 * (len(lg["err"]) - 1)
        n1 = min(n1, n2 // 5)
        if n2 < 20 or n1 < 1:
            raise RuntimeError(f"exact fixed point after {n2} iterations: too few to time")
        _, lg = solver(a, b, M, reg, m=0.8, numItermax=n2, stopThr=0.0, log=True)
    assert len(lg["err"]) == (n2 + 9) // 10, "stopped early: timing invalid"
    return n1, n2


def twins(sizes, reg, pairs=11):
    """Print, per size and solver, time with the parallel kernels / time
    on the small path (median of ``pairs`` alternated pairs of calls)."""
    import statistics

    from numbaot import partial as npar
    from numbaot.cpu import partial as cpu_partial

    real = cpu_partial._is_small
    print("| n | solver | parallel / serial (median) | min-max | serial ms per call |")
    print("|---|---|---|---|---|")
    for n in sizes:
        a, b, M = problem(n, np.float64, seed=1)
        for name, fn in (("exp", npar.entropic_partial_wasserstein),
                         ("log", npar.entropic_partial_wasserstein_logscale)):
            def call(small, fn=fn):
                cpu_partial._is_small = lambda *args: small
                try:
                    return fn(a, b, M, reg, m=0.7, numItermax=200)
                finally:
                    cpu_partial._is_small = real

            ts, _, ratios = C.time_pair(lambda: call(True), lambda: call(False),
                                        repeats=pairs)
            print(f"| {n} | {name} | {statistics.median(ratios):.2f} | {min(ratios):.2f}-"
                  f"{max(ratios):.2f} | {ts['median'] * 1e3:.3f} |", flush=True)


def batches(sizes, counts, reg, iters, pairs=7, pot_budget=8 * 256 ** 3):
    """Print, per size and batch size K, a batch call against K single
    calls (numbaot) and K POT calls (exp solver, whole calls; POT only
    where K n^3 <= ``pot_budget``, about 6 s)."""
    import statistics

    import ot

    import numbaot
    from numbaot import partial as npar

    print(f"exp solver, reg={reg}, {iters} iterations per problem (stopThr=0), "
          f"m = 0.8 min(|a|, |b_k|)")
    print()
    print("| n | K | batch ms | K single calls ms | singles / batch (median, min-max) "
          "| numbaot.sinkhorn batch / partial batch | K POT calls ms | POT / batch |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for K in counts:
            rng = np.random.default_rng(n + K)
            a, _, M = problem(n, np.float64, seed=n)
            B = np.stack([C.random_hist(rng, n) * rng.uniform(1.0, 1.5) for _ in range(K)],
                         axis=1)
            ms = 0.8 * np.minimum(a.sum(), B.sum(0))
            Bc = [np.ascontiguousarray(B[:, k]) for k in range(K)]

            def batch():
                return npar.entropic_partial_wasserstein(a, B, M, reg, m=ms,
                                                         numItermax=iters, stopThr=0.0)

            def singles():
                return [npar.entropic_partial_wasserstein(a, Bc[k], M, reg, m=float(ms[k]),
                                                          numItermax=iters, stopThr=0.0)
                        for k in range(K)]

            A = np.repeat((a / a.sum())[:, None], K, axis=1)
            Bn = B / B.sum(0)

            def balanced():  # the same batch, balanced (paired weights of mass 1)
                return numbaot.sinkhorn(A, Bn, M, reg, numItermax=iters, stopThr=0.0,
                                        warn=False)

            tb, ts, ratios = C.time_pair(batch, singles, repeats=pairs)
            _, _, bal = C.time_pair(batch, balanced, repeats=pairs)
            G, G1 = batch(), singles()
            diff = max(C.rel_diff(G[k], G1[k]) for k in range(K))
            assert diff < 1e-10, diff
            pot_ms, pot_ratio = "-", "-"
            if K * n ** 3 <= pot_budget:  # POT's time grows as n^3 per problem
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    tp = C.time_call(lambda: [
                        ot.partial.entropic_partial_wasserstein(
                            a, Bc[k], M, reg, m=float(ms[k]), numItermax=iters, stopThr=0.0)
                        for k in range(K)], repeats=1, warmup=0)
                pot_ms = f"{tp['best'] * 1e3:.1f}"
                pot_ratio = f"{tp['best'] / tb['median']:.0f}"
            print(f"| {n} | {K} | {tb['median'] * 1e3:.3f} | {ts['median'] * 1e3:.3f} | "
                  f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
                  f"{statistics.median(bal):.2f} | {pot_ms} | {pot_ratio} |", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 2048])
    p.add_argument("--dtypes", nargs="+", default=["float64"])
    p.add_argument("--reg", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-time", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=None,
                   help="numba.set_num_threads(...) before timing (set OPENBLAS_NUM_THREADS "
                        "in the environment to pin POT's BLAS too)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--batch", type=int, nargs="+", default=None, metavar="K",
                   help="paired batches of K problems against K calls (see the docstring)")
    p.add_argument("--iters", type=int, default=100, help="iterations per call (--batch)")
    p.add_argument("--twins", action="store_true",
                   help="serial twins against the parallel kernels (see the docstring)")
    args = p.parse_args(argv)
    sizes = [128, 512] if args.quick else args.sizes
    repeats = 2 if args.quick else args.repeats

    import numba
    import ot

    numbaot = C.import_numbaot("partial")
    if args.threads:
        numba.set_num_threads(args.threads)
    C.start_report("bench_partial")
    if args.twins:
        twins(args.sizes, args.reg)
        return
    if args.batch:
        batches(args.sizes, args.batch, args.reg, args.iters)
        return
    print(f"reg={args.reg}, m = 0.8, stopThr=0 (every iteration runs), repeats={repeats} "
          f"(best), numba threads={numba.get_num_threads()}")
    print()

    solvers = [
        ("exp", ot.partial.entropic_partial_wasserstein,
         numbaot.partial.entropic_partial_wasserstein),
        ("log", ot.partial.entropic_partial_wasserstein_logscale,
         numbaot.partial.entropic_partial_wasserstein_logscale),
    ]
    rows, checks = [], []
    for n in sizes:
        (p1, p2), (q1, q2) = ITERS.get(n, ((2, 6), (10, 60)))
        for dtname in args.dtypes:
            dtype = np.dtype(dtname)
            a, b, M = problem(n, dtype)
            kbytes = M.size * dtype.itemsize

            def mk_sk(k):
                return lambda: numbaot.sinkhorn(a, b / b.sum(), M, args.reg, numItermax=k,
                                                stopThr=0.0, warn=False)

            t_sk = C.per_iteration(mk_sk, q1, q2, repeats=repeats, max_time=args.max_time)
            for name, pot, ours in solvers:
                def mk_nb(k, ours=ours):
                    return lambda: ours(a, b, M, args.reg, m=0.8, numItermax=k, stopThr=0.0)

                def mk_pot(k, pot=pot):
                    return lambda: pot(a, b, M, args.reg, m=0.8, numItermax=k, stopThr=0.0)

                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    Gn = mk_nb(p1)()
                    Gp = mk_pot(p1)()
                checks.append([n, dtname, name, p1, C.rel_diff(Gn.astype(np.float64),
                                                               Gp.astype(np.float64))])
                n1, n2 = full_run_counts(ours, a, b, M, args.reg, q1, q2)
                tn = C.per_iteration(mk_nb, n1, n2, repeats=repeats, max_time=args.max_time)
                tp = C.per_iteration(mk_pot, p1, p2, repeats=repeats, max_time=args.max_time)
                nb_ms, pot_ms = tn["per_iter"] * 1e3, tp["per_iter"] * 1e3
                sk_ms = t_sk["per_iter"] * 1e3
                rows.append([n, dtname, name, f"{p1},{p2}", pot_ms, f"{n1},{n2}", nb_ms,
                             pot_ms / nb_ms, sk_ms, nb_ms / sk_ms, kbytes / 1e6,
                             kbytes / tn["per_iter"] / 1e9])
                print(f"  n={n} {dtname} {name}: POT {pot_ms:.3f} ms/it, numbaot "
                      f"{nb_ms:.4f} ms/it, x{pot_ms / nb_ms:.0f}; sinkhorn {sk_ms:.4f} ms/it",
                      flush=True)
    print()
    print("## ms per iteration (POT and numbaot at their own iteration counts N1,N2)")
    print()
    C.print_table(["n", "dtype", "solver", "POT N1,N2", "POT ms/it", "numbaot N1,N2",
                   "numbaot ms/it", "speed-up", "numbaot.sinkhorn ms/it",
                   "partial / sinkhorn", "K MB", "numbaot K GB/s"], rows)
    print()
    print("## agreement after N1 (POT) iterations (max |G_nb - G_pot| / max |G_pot|)")
    print()
    C.print_table(["n", "dtype", "solver", "iterations", "rel diff"], checks)


if __name__ == "__main__":
    main()
