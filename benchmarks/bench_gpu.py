"""numbaot's CUDA Sinkhorn kernels against POT on the same problem.

Needs an NVIDIA GPU and ``pip install ".[cuda,bench]"``.  For n x n problems
(default 4096 and 8192), float32 and float64, the log-domain
(``method='sinkhorn_log'``) and multiplicative (``method='sinkhorn'``) solvers
run on device arrays; POT 0.9.7 (NumPy backend, the host CPU) runs the same
call.  Times are per iteration from two iteration counts (setup cancels,
``stopThr=0`` so exactly numItermax iterations run); POT uses few iterations
at the large sizes.

Floor: one iteration reads the matrix twice (row pass, column pass: n*m*
itemsize bytes each), so achieved bandwidth = 2*n*m*itemsize / time, printed
next to the device's measured read bandwidth (one pass of ``sum_rows`` over a
1 GiB array).  A third table times a batch of small paired problems (one
launch per 10 iterations, ``*_fused_iterations`` kernels) against POT's loop.

The published bar on the same problem: FastSinkhorn, 12x POT at 8192^2.

Section ``bary`` (issue 5): ``numbaot.barycenter`` ('sinkhorn' and
'sinkhorn_log') on device arrays against POT's ``ot.bregman.barycenter`` on
the host, dim x dim cost, n_hists histograms, per iteration.  Floor: one
iteration is a row pass and a column pass over the dim x dim matrix for all
histograms; if each pass read the matrix once for all histograms, 2 dim^2
itemsize bytes per iteration (printed as GB/s against that floor).  The
kernels read it once per histogram per pass (L2-resident when it fits), so
the ratio to the floor shows what batching the histograms inside one block
would gain.

Section ``grad`` (issue 5): ``sinkhorn2_value_and_grad`` (dense, log
domain) and ``empirical_sinkhorn2_value_and_grad`` (point clouds, costs on
the fly) on device arrays against the same numbaot calls on NumPy arrays
(the CPU path; POT has no counterpart without an autodiff backend), whole
call (fixed number of iterations, ``stopThr=0``).

Usage::

    python benchmarks/bench_gpu.py [--sizes 4096 8192] [--quick]
                                   [--sections sinkhorn batch bary grad]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import make_batch_problem, make_problem, per_iteration  # noqa: E402


def _device_read_bandwidth(cuda, dtype):
    from numbaot.cuda import sinkhorn as cu

    n = (1 << 30) // np.dtype(dtype).itemsize // 8192
    X = cuda.device_array((8192, n), dtype=dtype)
    out = cuda.device_array(8192, dtype=dtype)
    cu._k("sum_rows", dtype)[8192, 256](X, out)
    cuda.synchronize()
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        cu._k("sum_rows", dtype)[8192, 256](X, out)
        cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return X.size * X.dtype.itemsize / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sections", nargs="+", default=["sinkhorn", "batch", "bary", "grad"],
                    choices=["sinkhorn", "batch", "bary", "grad"])
    args = ap.parse_args()
    from numba import cuda

    import ot

    import numbaot

    if not cuda.is_available():
        sys.exit("no CUDA GPU available: this benchmark needs one")
    dev = cuda.get_current_device()
    print(f"# GPU: {dev.name.decode() if isinstance(dev.name, bytes) else dev.name}, "
          f"cc {dev.compute_capability}")
    bw = {dt: _device_read_bandwidth(cuda, dt) for dt in (np.float32, np.float64)}
    print(f"# measured read bandwidth: {bw[np.float32] / 1e9:.0f} GB/s (f32 pass), "
          f"{bw[np.float64] / 1e9:.0f} GB/s (f64 pass)")
    reps = 2 if args.quick else 5
    if "sinkhorn" in args.sections:
        _bench_sinkhorn(cuda, ot, numbaot, bw, reps, args.sizes)
    if "batch" in args.sections:
        _bench_batch(cuda, ot, numbaot, reps)
    if "bary" in args.sections:
        _bench_barycenter(cuda, ot, numbaot, bw, reps)
    if "grad" in args.sections:
        _bench_gradients(cuda, numbaot, reps)


def _bench_sinkhorn(cuda, ot, numbaot, bw, reps, sizes):
    print("\n| n | dtype | method | numbaot ms/it | GB/s (2 reads) | % of read bw | POT ms/it | x POT |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for dt in (np.float32, np.float64):
            a, b, M = make_problem(n, dtype=dt)
            da, db, dM = cuda.to_device(a), cuda.to_device(b), cuda.to_device(M)
            for method in ("sinkhorn_log", "sinkhorn"):
                reg = 0.05 if method == "sinkhorn_log" else 0.5

                def ours(k, method=method, reg=reg):
                    return lambda: numbaot.sinkhorn(da, db, dM, reg, method=method, numItermax=k,
                                                    stopThr=0.0, warn=False)

                def pot(k, method=method, reg=reg):
                    return lambda: ot.sinkhorn(a, b, M, reg, method=method, numItermax=k,
                                               stopThr=0.0, warn=False)

                r = per_iteration(ours, 10, 110, repeats=reps)
                k2 = 4 if (method == "sinkhorn_log" or n > 4096) else 20
                rp = per_iteration(pot, 1, 1 + k2, repeats=2)
                t = r["per_iter"]
                gbs = 2 * M.nbytes / t
                print(f"| {n} | {np.dtype(dt).name} | {method} | {t * 1e3:.3f} | {gbs / 1e9:.0f} | "
                      f"{100 * gbs / bw[dt]:.0f}% | {rp['per_iter'] * 1e3:.1f} | "
                      f"{rp['per_iter'] / t:.0f}x |")


def _bench_batch(cuda, ot, numbaot, reps):
    print("\n| batch | n | dtype | method | numbaot ms/it (all problems) | POT loop ms/it | x POT |")
    print("|---|---|---|---|---|---|---|")
    for n_hists, n in ((1000, 64), (100, 128)):
        for dt in (np.float32, np.float64):
            A, B, M = make_batch_problem(n, n_hists=n_hists, dtype=dt)
            dA, dB, dM = cuda.to_device(A), cuda.to_device(B), cuda.to_device(M)
            for method in ("sinkhorn_log", "sinkhorn"):
                def ours(k, method=method):
                    return lambda: numbaot.sinkhorn2(dA, dB, dM, 0.1, method=method,
                                                     numItermax=k, stopThr=0.0, warn=False)

                def pot(k, method=method):
                    return lambda: [ot.sinkhorn2(A[:, j], B[:, j], M, 0.1, method=method,
                                                 numItermax=k, stopThr=0.0, warn=False)
                                    for j in range(n_hists)]

                r = per_iteration(ours, 10, 110, repeats=reps)
                rp = per_iteration(pot, 10, 30, repeats=2)
                print(f"| {n_hists} | {n} | {np.dtype(dt).name} | {method} | "
                      f"{r['per_iter'] * 1e3:.3f} | {rp['per_iter'] * 1e3:.1f} | "
                      f"{rp['per_iter'] / r['per_iter']:.0f}x |")


def _bary_problem(dim, n_hists, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, dim)
    M = (x[:, None] - x[None, :]) ** 2
    A = rng.random((dim, n_hists)) + 0.1
    A /= A.sum(0)
    return A.astype(dtype), np.ascontiguousarray(M, dtype=dtype)


def _bench_barycenter(cuda, ot, numbaot, bw, reps):
    print("\n| dim | n_hists | dtype | method | numbaot ms/it | GB/s vs floor (2 dim^2) | "
          "POT ms/it | x POT |")
    print("|---|---|---|---|---|---|---|---|")
    for dim, H in ((1024, 8), (2048, 8), (2048, 32)):
        for dt in (np.float32, np.float64):
            A, M = _bary_problem(dim, H, dt)
            dA, dM = cuda.to_device(A), cuda.to_device(M)
            for method in ("sinkhorn_log", "sinkhorn"):
                reg = 1e-2 if method == "sinkhorn_log" else 5e-2

                def ours(k, method=method, reg=reg):
                    def f():
                        numbaot.barycenter(dA, dM, reg, method=method, numItermax=k,
                                           stopThr=0.0, warn=False)
                        cuda.synchronize()
                    return f

                def pot(k, method=method, reg=reg):
                    return lambda: ot.bregman.barycenter(A, M, reg, method=method,
                                                         numItermax=k, stopThr=0.0, warn=False)

                r = per_iteration(ours, 10, 60, repeats=reps)
                k2 = 2 if (method == "sinkhorn_log" or dim > 1024) else 10
                rp = per_iteration(pot, 1, 1 + k2, repeats=2)
                t = r["per_iter"]
                gbs = 2 * M.nbytes / t
                print(f"| {dim} | {H} | {np.dtype(dt).name} | {method} | {t * 1e3:.3f} | "
                      f"{gbs / 1e9:.0f} ({100 * gbs / bw[dt]:.0f}% of read bw) | "
                      f"{rp['per_iter'] * 1e3:.1f} | {rp['per_iter'] / t:.0f}x |")


def _best(fn, reps):
    fn()
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _bench_gradients(cuda, numbaot, reps):
    from numbaot.gradients import (empirical_sinkhorn2_value_and_grad,
                                   sinkhorn2_value_and_grad)

    print("\n| call | size | dtype | numbaot GPU ms | numbaot CPU ms | x CPU |")
    print("|---|---|---|---|---|---|")
    for n in (1024, 4096):
        for dt in (np.float32, np.float64):
            a, b, M = make_problem(n, dtype=dt)
            da, db, dM = cuda.to_device(a), cuda.to_device(b), cuda.to_device(M)
            kw = dict(method="sinkhorn_log", numItermax=100, stopThr=0.0)

            def gpu():
                sinkhorn2_value_and_grad(da, db, dM, 0.05, **kw)
                cuda.synchronize()

            t = _best(gpu, reps)
            tc = _best(lambda: sinkhorn2_value_and_grad(a, b, M, 0.05, **kw), 2)
            print(f"| sinkhorn2_value_and_grad (100 it) | {n}^2 | {np.dtype(dt).name} | "
                  f"{t * 1e3:.1f} | {tc * 1e3:.1f} | {tc / t:.1f}x |")
    for n in (4096, 16384):
        for dt in (np.float32, np.float64):
            rng = np.random.default_rng(0)
            Xs = rng.normal(size=(n, 3)).astype(dt)
            Xt = rng.normal(size=(n, 3)).astype(dt)
            dXs, dXt = cuda.to_device(Xs), cuda.to_device(Xt)
            kw = dict(numIterMax=20, stopThr=0.0, warn=False)

            def gpu():
                empirical_sinkhorn2_value_and_grad(dXs, dXt, 0.1, **kw)
                cuda.synchronize()

            t = _best(gpu, reps)
            tc = _best(lambda: empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.1, **kw), 1)
            print(f"| empirical_sinkhorn2_value_and_grad (20 it, d=3) | {n} | "
                  f"{np.dtype(dt).name} | {t * 1e3:.1f} | {tc * 1e3:.1f} | {tc / t:.1f}x |")


if __name__ == "__main__":
    main()
