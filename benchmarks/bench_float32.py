"""float32 against float64 in numbaot's log-domain solver (issue 23, float32 lanes).

The same problem in both dtypes: n x n squared distances of uniform points in
[0, 1]^3 divided by their max, uniform weights (n a power of two, so that
the float32 weights sum exactly to 1), ``--reg`` (0.05), POT's default
stopThr 1e-9 (``--stopThr``), 2 threads by default.  The two calls
alternate (f64, f32, f64, ...) and the ratio printed is the median of the
pairwise ratios float64 time / float32 time; niter is printed for both.
Floor: the float32 M is half the bytes of the float64 one, and the
exponentials run in eight float32 lanes where float64 has four, so 2x is
the ceiling on an exp-bound pass.  The float32 lanes run until the marginal
error reaches ``_config.LOG_F32_SWITCH_ERR`` (1e-6); the iterations after
that take float64 lanes (``--stopThr 1e-6`` times the lanes alone).

Usage::

    python benchmarks/bench_float32.py --sizes 1024 2048 4096
"""
import argparse
import statistics
import time
import warnings

import numpy as np

import numbaot


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2000])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--reg", type=float, default=0.05)
    p.add_argument("--stopThr", type=float, default=1e-9)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    print(f"reg {args.reg}, stopThr {args.stopThr:g}")
    print()
    print("| n | float64 ms (niter) | float32 ms (niter) | float64 / float32 (median of pairs) |")
    print("|---|---|---|---|")
    for n in args.sizes:
        rng = np.random.default_rng(0)
        x, y = rng.random((n, 3)), rng.random((n, 3))
        M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        M /= M.max()
        a = np.full(n, 1 / n)
        calls, niter = {}, {}
        for dt in (np.float64, np.float32):
            aa, MM = a.astype(dt), M.astype(dt)
            calls[dt] = (lambda aa=aa, MM=MM: numbaot.sinkhorn(
                aa, aa, MM, args.reg, method="sinkhorn_log", stopThr=args.stopThr))
            niter[dt] = numbaot.sinkhorn(aa, aa, MM, args.reg, method="sinkhorn_log",
                                         stopThr=args.stopThr, log=True)[1]["niter"]
        t = {dt: [] for dt in calls}
        for _ in range(args.repeats):
            for dt, f in calls.items():
                t0 = time.perf_counter()
                f()
                t[dt].append(time.perf_counter() - t0)
        ratio = statistics.median(x / y for x, y in zip(t[np.float64], t[np.float32]))
        print(f"| {n} | {1e3 * statistics.median(t[np.float64]):.1f} ({niter[np.float64]}) | "
              f"{1e3 * statistics.median(t[np.float32]):.1f} ({niter[np.float32]}) | "
              f"{ratio:.2f} |")


if __name__ == "__main__":
    main()
