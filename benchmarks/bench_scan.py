"""Discounted cumulative sums: numbaot vs scipy.signal.lfilter and a @njit loop.

The task is the RL return y_t = x_t + gamma y_{t+1} (``discounted_cumsum_right``)
of every row of a (batch, N) float64 array, gamma = 0.99.  Baselines, timed in
the same run:

* ``scipy.signal.lfilter([1], [1, -gamma], x[:, ::-1], axis=-1)[:, ::-1]``,
  the usual NumPy idiom (a C loop, one row after the other);
* a sequential ``@numba.njit`` loop over rows and steps, as tianshou writes
  its return computations (compiled, one thread), returning a new array as
  numbaot does (``loop``), and writing into a preallocated one
  (``loop, out given``).

Sections, in one run:

1. the floor: bytes moved and the machine's copy bandwidth (a parallel copy
   kernel, read + write);
2. many short rows, (8192, 16): numbaot vs the @njit loop, interleaved
   (a, b, a, b, ...), the median of the pairwise ratios;
3. one long row, (1, 10^7): numbaot vs lfilter, back to back (each function
   repeated alone) and interleaved (lfilter, numbaot, lfilter, ...), the
   median of the pairwise ratios;
4. the first touch of fresh memory (why single calls on one long row can be
   slow here: see "Fresh memory" below);
5. the table of the issue's five shapes (best of ``--repeats``).

Fresh memory.  Every call returns a new (batch, N) array; at N = 10^7 that is
80 MB of pages the kernel must map and zero on first touch, by whichever
function allocates them (lfilter's output too).  In a virtual machine that
returns free memory to its host (virtio free page reporting: Firecracker's
``page_reporting.page_reporting_order=11`` on the kernel command line), a page
freed for a couple of seconds goes back to the host, and its next first
touch takes a host-side fault as well: section 4 shows this costing 10 to 20
times the touch of recycled memory.  Back-to-back calls recycle the previous
call's pages at once; interleaved with another large allocation, or on the
first calls of a process, a call may instead land on reported memory.  That
cost belongs to the machine, not to the scan: numbaot's own time is the
"out given" column of section 3.

Usage::

    python benchmarks/bench_scan.py            # all sections, the issue's shapes
    python benchmarks/bench_scan.py --quick    # smaller shapes, fewer repeats
    python benchmarks/bench_scan.py --gpu      # also time device arrays (needs a GPU)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

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

    @numba.njit(cache=True)
    def touch(a):
        for i in range(0, a.shape[0], 512):
            a[i] = 0.0

    return seq_right, pcopy, touch


def copy_bandwidth(pcopy, nbytes=512 * 2**20, repeats=5):
    """GB/s of a parallel copy (read + write) of ``nbytes`` float64 bytes
    (destination already mapped: the copy moves data, it maps no page)."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    t = C.time_call(lambda: pcopy(src, dst), repeats, 1)["best"]
    return 2 * src.nbytes / t / 1e9


def _median_ratio(a, b):
    """Median of the pairwise ratios b[i] / a[i]."""
    return statistics.median(y / x for x, y in zip(a, b))


def floor_section(bw, N):
    nbytes = 8 * N
    moved = 4 * nbytes  # x read twice (reduce, then scan), y written, y's pages zeroed
    print("## 1. Floor")
    print()
    print(f"Copy bandwidth: {bw:.1f} GB/s (read + write, parallel).  One row of N = {N:.0e} "
          f"float64: x is {nbytes / 1e6:.0f} MB.  numbaot splits the row (reduce, then scan): "
          f"it reads x twice and writes y once, and the kernel zeroes y's fresh pages on first "
          f"touch: {moved / 1e6:.0f} MB, {moved / (bw * 1e9) * 1e3:.1f} ms at that bandwidth "
          f"({3 * nbytes / (bw * 1e9) * 1e3:.1f} ms without the zeroing; lfilter moves "
          f"{3 * nbytes / 1e6:.0f} MB but runs one dependent chain, about 1 ns per step).")
    print()


def short_rows_section(nb, seq_right, g, repeats, shape=(8192, 16)):
    x = np.random.default_rng(0).random(shape)
    out = np.empty_like(x)

    def loop_new():
        y = np.empty_like(x)
        seq_right(x, g, y)
        return y

    f_nb = lambda: nb.discounted_cumsum_right(x, g)  # noqa: E731
    reps = max(repeats, 50) * 4
    t_nb, t_loop, r_loop = C.time_pair(f_nb, loop_new, reps, 5)
    t_nb2, t_pre, r_pre = C.time_pair(f_nb, lambda: seq_right(x, g, out), reps, 5)
    agree = C.rel_diff(t_nb["result"], t_loop["result"])
    print(f"## 2. Many short rows {shape}, float64: numbaot vs the @njit loop, interleaved "
          f"({reps} pairs)")
    print()
    C.print_table(
        ["baseline", "baseline us (median)", "numbaot us (median)", "baseline / numbaot "
         "(median of pairs)", "max rel diff"],
        [["@njit loop", t_loop["median"] * 1e6, t_nb["median"] * 1e6,
          _median_ratio(t_nb["all"], t_loop["all"]), f"{agree:.1e}"],
         ["@njit loop, out given", t_pre["median"] * 1e6, t_nb2["median"] * 1e6,
          _median_ratio(t_nb2["all"], t_pre["all"]), "-"]])
    print()


def long_row_section(nb, g, repeats, N=10**7):
    from scipy.signal import lfilter

    x = np.random.default_rng(0).random((1, N))
    out = np.empty_like(x)
    out.fill(0.0)  # mapped once
    f_nb = lambda: nb.discounted_cumsum_right(x, g)  # noqa: E731
    f_lf = lambda: lfilter([1.0], [1.0, -g], x[:, ::-1], axis=-1)[:, ::-1]  # noqa: E731
    from numbaot.cpu import scan as cpu_scan

    xf = x.reshape(-1)
    gv = np.full(1, g)
    f_given = lambda: cpu_scan.run_scan(xf, gv, None, True, 1, N, out.reshape(-1))  # noqa: E731
    reps = max(repeats, 9)
    b2b_nb = C.time_call(f_nb, reps, 2)
    b2b_lf = C.time_call(f_lf, reps, 1)
    t_lf, t_nb, _ = C.time_pair(f_lf, f_nb, reps, 1)
    t_given = C.time_call(f_given, reps, 1)
    print(f"## 3. One long row (1, {N:.0e}), float64: numbaot vs lfilter ({reps} calls each)")
    print()
    C.print_table(
        ["timing", "lfilter ms (median)", "numbaot ms (median)",
         "lfilter / numbaot (median of pairs)", "target"],
        [["back to back", b2b_lf["median"] * 1e3, b2b_nb["median"] * 1e3,
          _median_ratio(b2b_nb["all"], b2b_lf["all"]), ">= 5"],
         ["interleaved", t_lf["median"] * 1e3, t_nb["median"] * 1e3,
          _median_ratio(t_nb["all"], t_lf["all"]), ">= 5"],
         ["numbaot, out given (mapped)", "-", t_given["median"] * 1e3,
          b2b_lf["median"] / t_given["median"], "-"]])
    print()
    print("numbaot interleaved, every call (ms): "
          + " ".join(f"{t * 1e3:.0f}" for t in t_nb["all"]))
    print("lfilter interleaved, every call (ms): "
          + " ".join(f"{t * 1e3:.0f}" for t in t_lf["all"]))
    print()


def fresh_memory_section(touch, N=10**7, count=6):
    """First touch of count buffers of N float64 kept alive (memory this
    process has not used: the kernel hands out pages, possibly ones the VM
    returned to its host), then of one buffer freed and allocated again
    (the pages just freed are recycled)."""
    keep, fresh = [], []
    for _ in range(count):
        a = np.empty(N)
        t0 = time.perf_counter()
        touch(a)
        fresh.append(time.perf_counter() - t0)
        keep.append(a)
    del keep
    recycled = []
    for _ in range(count):
        a = np.empty(N)
        t0 = time.perf_counter()
        touch(a)
        recycled.append(time.perf_counter() - t0)
        del a
    cmdline = ""
    try:
        with open("/proc/cmdline") as f:
            cmdline = " ".join(w for w in f.read().split() if "page_reporting" in w)
    except OSError:
        pass
    print(f"## 4. First touch of {8 * N / 1e6:.0f} MB (one write per 4 KiB page, one thread)")
    print()
    print(f"fresh (kept alive, {count} buffers) ms: " + " ".join(f"{t * 1e3:.0f}" for t in fresh))
    print("recycled (freed, then allocated) ms:   "
          + " ".join(f"{t * 1e3:.0f}" for t in recycled))
    print(f"free page reporting on the kernel command line: {cmdline or 'none'}")
    print()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller shapes, 2 repeats")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gpu", action="store_true", help="also time CUDA device arrays")
    p.add_argument("--threads", type=int, default=None, help="numba.set_num_threads(...)")
    p.add_argument("--no-table", action="store_true", help="sections 1-4 only")
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
    seq_right, pcopy, touch = _kernels()
    bw = copy_bandwidth(pcopy)
    print(f"numbaot: {os.path.dirname(nb.__file__)}; threads: {numba.get_num_threads()}; "
          f"gamma = {g}")
    print()
    n_long = 10**6 if args.quick else 10**7
    floor_section(bw, n_long)
    short_rows_section(nb, seq_right, g, repeats)
    long_row_section(nb, g, repeats, n_long)
    fresh_memory_section(touch, n_long)
    if args.no_table:
        return

    print(f"## 5. The issue's shapes (float64 unless noted; best of {repeats})")
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
        ["(batch, N)", "lfilter ms", "@njit loop ms (out given)", "numbaot ms", "numbaot f32 ms",
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
