"""Row-chunk layouts of the memory-bound passes, timed side by side.

``numbaot.cpu.chunk_layout`` splits the rows of K into fixed chunks (a
function of the sizes only, so results are bit-identical for any thread
count); the multiplicative passes (``memory_bound=True``: balanced Knopp,
unbalanced, partial OT, Knopp barycenter) use chunks of at least
``_config.MIN_CHUNK_ENTRIES`` entries.  This script prints

1. the partial-OT pass alone (``numbaot.cpu.partial.partial_fused_pass``) at
   n x n for 2 ... 64 chunks, µs per pass, best of ``--rounds`` rounds with
   every layout interleaved in one process;
2. whole calls with the old rule (``MIN_CHUNK_ENTRIES`` = 0: chunks of
   ``MIN_CHUNK_ROWS`` rows, up to ``MAX_ROW_CHUNKS``) and the current one,
   alternated in one process: median ms of ``--pairs`` pairs and the ratio
   old / new (> 1: the current rule is faster).  ``sinkhorn_log`` keeps its
   layout under both (a control for the machine's drift).

Problem: points uniform in [0, 1]^2, M = squared distances / max, uniform
weights, reg 0.05 (reg_m 1; partial: b scaled by 1.5, 200 iterations,
stopThr 0).

Usage::

    python benchmarks/bench_chunks.py                 # n = 256, 512, 1024, 2 threads
    python benchmarks/bench_chunks.py --sizes 512 --threads 1
"""

from __future__ import annotations

import argparse
import time
import warnings

import numba
import numpy as np

import numbaot
import numbaot.cpu as cpu
import numbaot.partial
from numbaot import _config
from numbaot.cpu.partial import partial_fused_pass


def problem(n, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.random((n, 2)), rng.random((n, 2))
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    return np.full(n, 1.0 / n), np.full(n, 1.0 / n), M


def pass_table(sizes, rounds):
    print("## 1. partial-OT pass alone, µs per pass (best of %d interleaved rounds)\n" % rounds)
    counts = (2, 4, 8, 16, 32, 64)
    print("| n | " + " | ".join(f"{c} chunks" for c in counts) + " | current layout |")
    print("|---|" + "---|" * (len(counts) + 1))
    for n in sizes:
        rng = np.random.default_rng(0)
        K = rng.random((n, n))
        a = np.full((1, n), 1.0 / n)
        v = rng.random((1, n))
        scal = np.ones((1, 3))  # s, s_prev, broken
        active = np.ones(1, dtype=np.bool_)
        reps = max(10, 100 * 512 * 512 // (n * n))
        layouts = [(c, -(-n // c)) for c in counts if n // c >= 8]
        best = {}
        for _ in range(rounds):
            for nch, cr in layouts:
                Q = np.empty((nch, 1, n))
                u = np.empty((1, n))
                q = np.empty((1, n))
                partial_fused_pass(K, a, v, scal, active, nch, cr, Q, u, q)
                t = time.perf_counter()
                for _ in range(reps):
                    partial_fused_pass(K, a, v, scal, active, nch, cr, Q, u, q)
                best[nch] = min(best.get(nch, np.inf), (time.perf_counter() - t) / reps * 1e6)
        cur = cpu.chunk_layout(n, 1, n, memory_bound=True)
        cells = [f"{best[c]:.1f}" if c in best else "-" for c in counts]
        print(f"| {n} | " + " | ".join(cells) + f" | {cur[0]} x {cur[1]} rows |")
    print()


def calls_table(sizes, pairs):
    print("## 2. whole calls, old rule (MIN_CHUNK_ENTRIES = 0) / current rule, "
          "median of %d alternated pairs\n" % pairs)
    print("| n | call | old ms | current ms | old / current |")
    print("|---|---|---|---|---|")
    saved = cpu.MIN_CHUNK_ENTRIES
    calls = {
        "sinkhorn": lambda a, b, M: numbaot.sinkhorn(a, b, M, 0.05),
        "sinkhorn_unbalanced": lambda a, b, M: numbaot.sinkhorn_unbalanced(a, b, M, 0.05, 1.0),
        "partial (200 it.)": lambda a, b, M: numbaot.partial.entropic_partial_wasserstein(
            a, b * 1.5, M, 0.05, numItermax=200, stopThr=0),
        "sinkhorn_log (control)": lambda a, b, M: numbaot.sinkhorn(
            a, b, M, 0.05, method="sinkhorn_log"),
    }
    try:
        for n in sizes:
            a, b, M = problem(n)
            for name, f in calls.items():
                times = {0: [], saved: []}
                for rule in times:
                    cpu.MIN_CHUNK_ENTRIES = rule
                    f(a, b, M)
                for _ in range(pairs):
                    for rule in times:
                        cpu.MIN_CHUNK_ENTRIES = rule
                        t = time.perf_counter()
                        f(a, b, M)
                        times[rule].append(time.perf_counter() - t)
                old, new = np.median(times[0]) * 1e3, np.median(times[saved]) * 1e3
                print(f"| {n} | {name} | {old:.2f} | {new:.2f} | {old / new:.2f} |", flush=True)
    finally:
        cpu.MIN_CHUNK_ENTRIES = saved
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--pairs", type=int, default=9)
    args = p.parse_args()
    numba.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    print(f"# bench_chunks: {args.threads} threads, MIN_CHUNK_ENTRIES = "
          f"{_config.MIN_CHUNK_ENTRIES}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    pass_table(args.sizes, args.rounds)
    calls_table(args.sizes, args.pairs)


if __name__ == "__main__":
    main()
