"""Barycenters: numbaot vs POT 0.9.7, same calls, fixed iteration counts
(stopThr=0), side by side.

* 1-D grid: n bins on [0, 1], 3 Gaussian histograms, squared distance:
  ``barycenter(method='sinkhorn')`` and ``method='sinkhorn_log'``.
  Floor per iteration: one read of the n x n kernel (multiplicative) or of M
  plus n^2 exponentials per histogram (log domain); POT's log version makes
  2 passes with 2 exps per entry per histogram, in NumPy.
* 2-D grid: ``convolutional_barycenter2d`` of 3 images (separable kernel),
  'sinkhorn' (both sides BLAS products) and 'sinkhorn_log'.

``--serial``: instead, the multiplicative barycenter's serial path (a state
of at most ``_config.SMALL_MAX_ENTRIES`` entries, dim^2 x n_hists) against
its chunked parallel kernels on the same problem (the bound set to 0 or to
2^40 in turn), 200 iterations, alternated in one process: the median of 11
pairwise ratios (the data behind the size rule).

Usage: python benchmarks/bench_barycenter.py [--quick] [--serial]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401


def _best(fn, reps):
    fn()
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def serial_vs_parallel():
    """Print time with the parallel kernels / time on the serial path."""
    import statistics

    import numbaot
    from numbaot import _config

    rng = np.random.default_rng(0)
    saved = _config.SMALL_MAX_ENTRIES
    print("| dim | n_hists | entries | parallel / serial (median) | min-max | serial ms |")
    print("|---|---|---|---|---|---|")
    for dim, H in ((64, 2), (128, 2), (200, 2), (200, 3), (256, 2), (362, 1)):
        x = np.linspace(0, 1, dim)[:, None]
        M = (x - x.T) ** 2
        M /= M.max()
        A = rng.uniform(0.5, 1.5, (dim, H))
        A /= A.sum(0)

        def call(small):
            _config.SMALL_MAX_ENTRIES = 1 << 40 if small else 0
            try:
                return numbaot.barycenter(A, M, 0.05, numItermax=200, stopThr=0.0, warn=False)
            finally:
                _config.SMALL_MAX_ENTRIES = saved

        ts, _, ratios = _common.time_pair(lambda: call(True), lambda: call(False), repeats=11)
        print(f"| {dim} | {H} | {dim * dim * H} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} | {ts['median'] * 1e3:.2f} |",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--serial", action="store_true",
                    help="the serial path against the parallel kernels (see the docstring)")
    args = ap.parse_args()
    if args.serial:
        serial_vs_parallel()
        return
    import ot

    import numbaot.bregman as nb

    warnings.simplefilter("ignore")
    reps = 1 if args.quick else 3
    print("| problem | method | iterations | numbaot | POT | x POT |")
    print("|---|---|---|---|---|---|")
    for n in (200, 1000):
        x = np.linspace(0, 1, n)
        A = np.stack([np.exp(-((x - mu) ** 2) / (2 * 0.05 ** 2)) for mu in (0.2, 0.5, 0.8)], 1)
        A /= A.sum(0)
        M = (x[:, None] - x[None]) ** 2
        for meth, reg, it in (("sinkhorn", 1e-2, 200), ("sinkhorn_log", 1e-3, 50)):
            kw = dict(method=meth, numItermax=it, stopThr=0.0)
            t = _best(lambda: nb.barycenter(A, M, reg, **kw), reps)
            tp = _best(lambda: ot.bregman.barycenter(A, M, reg, **kw), 1)
            print(f"| 1-D, {n} bins, 3 hists | {meth} (reg {reg}) | {it} | {t * 1e3:.1f} ms | "
                  f"{tp * 1e3:.1f} ms | {tp / t:.1f}x |")
    rng = np.random.default_rng(0)
    for side in (64, 200):
        imgs = rng.random((3, side, side)) ** 4
        imgs /= imgs.sum((1, 2), keepdims=True)
        for meth, it in (("sinkhorn", 100), ("sinkhorn_log", 20)):
            kw = dict(method=meth, numItermax=it, stopThr=0.0)
            t = _best(lambda: nb.convolutional_barycenter2d(imgs, 0.004, **kw), reps)
            tp = _best(lambda: ot.bregman.convolutional_barycenter2d(imgs, 0.004, **kw), 1)
            print(f"| 2-D, {side}x{side}, 3 images | {meth} | {it} | {t * 1e3:.1f} ms | "
                  f"{tp * 1e3:.1f} ms | {tp / t:.1f}x |")


if __name__ == "__main__":
    main()
