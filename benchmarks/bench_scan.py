"""Discounted cumulative sums: numbaot vs scipy.signal.lfilter and a @njit loop.

The task is the RL return y_t = x_t + gamma y_{t+1} (``discounted_cumsum_right``)
of every row of a (batch, N) float64 array, gamma = 0.99.  Baselines, timed in
the same run:

* ``scipy.signal.lfilter([1], [1, -gamma], x[:, ::-1], axis=-1)[:, ::-1]``,
  the usual NumPy idiom (a C loop, one row after the other);
* a sequential ``@numba.njit`` loop over rows and steps, as tianshou writes
  its return computations (compiled, one thread).

Floor: the scan must read x and write y once: 2 * 8 * batch * N bytes at the
machine's copy bandwidth (measured here with a parallel NumPy-free copy
kernel).  numbaot reads x twice when it splits long rows (reduce, then scan),
so its own floor there is 3 passes.

Usage::

    python benchmarks/bench_scan.py            # the issue's five shapes
    python benchmarks/bench_scan.py --quick    # smaller shapes, fewer repeats
    python benchmarks/bench_scan.py --gpu      # also time device arrays (needs a GPU)
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SHAPES = [(1, 10**5), (1, 10**7), (256, 10**4), (4096, 1000), (8192, 16)]
QUICK = [(1, 10**5), (1, 10**6), (64, 10**4), (1024, 1000), (8192, 16)]
TARGETS = {(1, 10**7): 5.0, (4096, 1000): 3.0}


def _kernels():
    import numba
    from numba import prange

    @numba.njit(cache=True)
    def seq_right(x, gamma, out):
        for r in range(x.shape[0]):
            acc = 0.0
            for t in range(x.shape[1] - 1, -1, -1):
                acc = x[r, t] + gamma * acc
                out[r, t] = acc

    @numba.njit(parallel=True, cache=True, fastmath=True)
    def pcopy(src, dst):
        for i in prange(src.shape[0]):
            dst[i] = src[i]

    return seq_right, pcopy


def copy_bandwidth(pcopy, nbytes=512 * 2**20, repeats=5):
    """GB/s of a parallel copy (read + write) of ``nbytes`` float64 bytes."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    t = C.time_call(lambda: pcopy(src, dst), repeats, 1)["best"]
    return 2 * src.nbytes / t / 1e9


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller shapes, 2 repeats")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gpu", action="store_true", help="also time CUDA device arrays")
    p.add_argument("--threads", type=int, default=None, help="numba.set_num_threads(...)")
    args = p.parse_args(argv)

    import numba
    from scipy.signal import lfilter

    if args.threads:
        numba.set_num_threads(args.threads)
    nb = C.import_numbaot("scan")
    C.start_report("discounted_cumsum_right: numbaot vs scipy.signal.lfilter vs @njit loop")
    shapes = QUICK if args.quick else SHAPES
    repeats = 2 if args.quick else args.repeats
    g = args.gamma
    seq_right, pcopy = _kernels()
    bw = copy_bandwidth(pcopy)
    print(f"gamma = {g}; float64 unless noted; best of {repeats}; "
          f"copy bandwidth {bw:.1f} GB/s (read + write)")
    print()

    rows = []
    for B, N in shapes:
        rng = np.random.default_rng(0)
        x = rng.random((B, N))
        x32 = x.astype(np.float32)
        out = np.empty_like(x)
        f_nb = lambda: nb.discounted_cumsum_right(x, g)  # noqa: E731
        f_nb32 = lambda: nb.discounted_cumsum_right(x32, g)  # noqa: E731
        f_lf = lambda: lfilter([1.0], [1.0, -g], x[:, ::-1], axis=-1)[:, ::-1]  # noqa: E731
        f_seq = lambda: seq_right(x, g, out)  # noqa: E731
        mt = 20.0
        t_nb = C.time_call(f_nb, repeats, 1, mt)
        t_nb32 = C.time_call(f_nb32, repeats, 1, mt)
        t_lf = C.time_call(f_lf, max(2, repeats // 2), 1, mt)
        t_seq = C.time_call(f_seq, max(2, repeats // 2), 1, mt)
        agree = C.rel_diff(t_nb["result"], t_lf["result"])
        floor = 2 * x.nbytes / (bw * 1e9)
        target = TARGETS.get((B, N))
        ratio = t_lf["best"] / t_nb["best"]
        rows.append([
            f"({B}, {N:.0e})" if N >= 10**5 else f"({B}, {N})",
            t_lf["best"] * 1e3, t_seq["best"] * 1e3, t_nb["best"] * 1e3, t_nb32["best"] * 1e3,
            ratio, t_seq["best"] / t_nb["best"],
            f"{floor * 1e3:.2f} ({floor / t_nb['best'] * 100:.0f}%)",
            f"{agree:.1e}",
            "-" if target is None else ("%s (>= %g)" % ("yes" if ratio >= target else "NO", target)),
        ])
    C.print_table(
        ["(batch, N)", "lfilter ms", "@njit loop ms", "numbaot ms", "numbaot f32 ms",
         "lfilter / numbaot", "loop / numbaot", "floor ms (of numbaot)", "max rel diff",
         "target"], rows)

    if args.gpu:
        _gpu(nb, shapes, g, repeats)


def _gpu(nb, shapes, g, repeats):
    from numba import cuda

    if not cuda.is_available():
        print("\nno CUDA GPU: GPU figures unmeasured")
        return
    print()
    print(f"GPU: {cuda.get_current_device().name.decode() if isinstance(cuda.get_current_device().name, bytes) else cuda.get_current_device().name}")
    rows = []
    for B, N in shapes:
        x = np.random.default_rng(0).random((B, N))
        xd = cuda.to_device(x)
        xd32 = cuda.to_device(x.astype(np.float32))

        def run(xx):
            y = nb.discounted_cumsum_right(xx, g)
            cuda.synchronize()
            return y

        t64 = C.time_call(lambda: run(xd), repeats, 2)
        t32 = C.time_call(lambda: run(xd32), repeats, 2)
        ref = nb.discounted_cumsum_right(x, g)
        agree = C.rel_diff(t64["result"].copy_to_host(), ref)
        gbs = 2 * x.nbytes / t64["best"] / 1e9
        rows.append([f"({B}, {N})", t64["best"] * 1e3, t32["best"] * 1e3, gbs, f"{agree:.1e}"])
    C.print_table(["(batch, N)", "f64 ms", "f32 ms", "f64 GB/s (x read + y written)",
                   "rel diff vs CPU"], rows)


if __name__ == "__main__":
    main()
