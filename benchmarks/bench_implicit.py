"""The Sinkhorn operator's implicit backward on batches of small matrices:
numbaot vs the same conjugate gradient written with batched NumPy einsums
(the seed's algorithm) and vs a dense batched solve.

For each (batch, n, dtype): X ~ U(0, 4), R = sinkhorn_operator(X, 48),
G ~ N(0, 1).  Timed, side by side in one run (each best of repeats, then
again alternately, numbaot and NumPy CG call after call, reported as the
median of the per-pair ratios: a slow phase of a shared machine then falls
on both, and numbaot's worker threads have fallen asleep before each call):

* ``numbaot``: ``sinkhorn_operator_backward(R, G)`` ('implicit': projected CG
  on (I - R^T R) v = s_c - R^T s_r, at most n iterations, cg_tol 1e-12);
* ``numpy CG``: the seed's algorithm, batched: every CG iteration is two
  ``einsum`` mat-vecs over the whole batch plus vector updates (matrices
  that have converged are frozen), same cap and tolerance, in the input
  dtype;
* ``dense solve``: ``numpy.linalg.solve`` of the 2n x 2n systems
  [[I, R], [R^T, I]] + w w^T / (2n), w = [1; -1] (non-singular, same
  solution), batched.

Also reported: the corrected and unrolled backward and the forward
(numbaot vs a NumPy/SciPy logsumexp loop), the agreement between methods,
peak Python-visible memory (``tracemalloc``: NumPy temporaries; numbaot's
per-thread workspaces are not visible to it and are given analytically), and
the floor: bytes to move (read R and G, write dX) at the measured
bandwidth (the CG's multiply-adds, n^2 per mat-vec and two mat-vecs per
iteration, are compared in BENCHMARKS.md).

Usage::

    python benchmarks/bench_implicit.py            # both shapes, both dtypes
    python benchmarks/bench_implicit.py --quick
    python benchmarks/bench_implicit.py --backward-only --no-dense
"""
from __future__ import annotations

import argparse
import os
import sys
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def numpy_cg_backward(R, G, max_iter=None, tol=1e-12):
    """The seed's batched CG (einsum mat-vecs), plain (no projection)."""
    n = R.shape[-1]
    max_iter = n if max_iter is None else max_iter
    H = G * R
    sr = H.sum(-1)
    sc = H.sum(-2)
    b = sc - np.einsum("bij,bi->bj", R, sr)
    v = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rs = np.einsum("bi,bi->b", r, r)
    thr = tol * np.sqrt(rs)
    active = rs > 0
    for _ in range(max_iter):
        if not active.any():
            break
        Rp = np.einsum("bij,bj->bi", R, p)
        Sp = p - np.einsum("bij,bi->bj", R, Rp)
        pSp = np.einsum("bi,bi->b", p, Sp)
        active &= pSp > 0
        alpha = np.where(active, rs / np.where(active, pSp, 1), 0).astype(R.dtype)
        v += alpha[:, None] * p
        r -= alpha[:, None] * Sp
        rs_new = np.einsum("bi,bi->b", r, r)
        beta = np.where(active, rs_new / np.where(rs > 0, rs, 1), 0).astype(R.dtype)
        rs = np.where(active, rs_new, rs)
        active &= np.sqrt(rs_new) > thr
        p = np.where(active[:, None], r + beta[:, None] * p, p)
    u = sr - np.einsum("bij,bj->bi", R, v)
    return (G - u[:, :, None] - v[:, None, :]) * R


def dense_backward(R, G):
    """Batched dense solve of the 2n x 2n system (w w^T removes its null
    direction)."""
    B, n, _ = R.shape
    eye = np.broadcast_to(np.eye(n, dtype=R.dtype), (B, n, n))
    A = np.concatenate([np.concatenate([eye, R], 2),
                        np.concatenate([np.swapaxes(R, 1, 2), eye], 2)], 1)
    w = np.r_[np.ones(n), -np.ones(n)].astype(R.dtype)
    A += np.outer(w, w) / (2 * n)
    H = G * R
    z = np.linalg.solve(A, np.concatenate([H.sum(2), H.sum(1)], 1)[..., None])[..., 0]
    return (G - z[:, :n, None] - z[:, None, n:]) * R


def numpy_forward(X, n_iter):
    from scipy.special import logsumexp

    g = np.zeros(X.shape[:-1], dtype=X.dtype)
    for _ in range(n_iter):
        f = -logsumexp(X + g[..., None, :], axis=-1)
        g = -logsumexp(X + f[..., :, None], axis=-2)
    return np.exp(X + f[..., :, None] + g[..., None, :])


def peak_mem(fn):
    """Peak bytes allocated through Python/NumPy during fn() (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller batches, fewer repeats")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-dense", action="store_true", help="skip the dense solve")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--backward-only", action="store_true",
                   help="skip the other modes and the forward (the NumPy/SciPy forward "
                        "takes minutes at 65536 x 16)")
    args = p.parse_args(argv)
    numbaot = C.import_numbaot("implicit")
    import numba
    from numbaot._config import IMPLICIT_CHUNKS
    from numbaot.cpu._implicit_codegen import STRIDE as _US
    from numbaot.cpu._implicit_codegen import zrows as _zrows
    from numbaot.cpu._implicit_unrolled import UNROLL_SIZES as _UNROLL_SIZES

    if args.threads:
        numba.set_num_threads(args.threads)
    C.start_report("Sinkhorn operator: implicit backward (numbaot vs NumPy CG vs dense solve)")
    bw = C.measure_bandwidth(0.25, repeats=3)["numba_nt"]
    print(f"measured read bandwidth: {bw:.1f} GB/s ({numba.get_num_threads()} threads)\n")

    shapes = [(65536, 16), (10001, 4)]
    if args.quick:
        shapes = [(8192, 16), (10001, 4)]
    reps = 2 if args.quick else args.repeats
    rows, mem_rows, extra_rows = [], [], []
    for B, n in shapes:
        for dt in (np.float64, np.float32):
            rng = np.random.default_rng(0)
            X = rng.uniform(0, 4, size=(B, n, n)).astype(dt)
            G = rng.normal(size=X.shape).astype(dt)
            R = numbaot.sinkhorn_operator(X, n_iter=48)
            t_nb = C.time_call(lambda: numbaot.sinkhorn_operator_backward(R, G), reps, 1)
            t_np = C.time_call(lambda: numpy_cg_backward(R, G), reps, 1, max_time=30)
            # and alternating (every call of one follows a call of the other,
            # so a slow phase of a shared machine falls on both, and numbaot's
            # worker threads have gone to sleep during the NumPy call)
            _, _, pair = C.time_pair(lambda: numbaot.sinkhorn_operator_backward(R, G),
                                     lambda: numpy_cg_backward(R, G), reps, 1, max_time=30)
            d_nb, info = numbaot.sinkhorn_operator_backward(R, G, return_info=True)
            d_np = t_np["result"]
            if args.no_dense:
                t_de = None
            else:
                t_de = C.time_call(lambda: dense_backward(R, G), max(2, reps // 2), 1, max_time=30)
            ref = (t_de["result"] if t_de else dense_backward(R[:512], G[:512]))
            ok = np.abs(R.astype(np.float64).sum(-1) - 1).max(-1) < 1e-5
            k = len(ref)
            agree_dense = C.rel_diff(d_nb[:k][ok[:k]], ref[ok[:k]])
            agree_np = C.rel_diff(d_nb[ok], d_np[ok])
            it_mean = float(info["cg_iters"].mean())
            isz = np.dtype(dt).itemsize
            floor_mem = 3 * B * n * n * isz / (bw * 1e9)
            rows.append([f"{B} x {n}", np.dtype(dt).name, t_np["best"] * 1e3,
                         (t_de["best"] * 1e3 if t_de else None), t_nb["best"] * 1e3,
                         t_np["best"] / t_nb["best"], float(np.median(pair)),
                         (t_de["best"] / t_nb["best"] if t_de else None),
                         it_mean, floor_mem * 1e3, agree_np, agree_dense])
            # memory
            m_np = peak_mem(lambda: numpy_cg_backward(R, G))
            m_de = None if args.no_dense else peak_mem(lambda: dense_backward(R, G))
            m_nb = peak_mem(lambda: numbaot.sinkhorn_operator_backward(R, G))
            if n <= max(_UNROLL_SIZES):   # generated kernels: n padded to N,
                N = min(sz for sz in _UNROLL_SIZES if sz >= n)   # IMPLICIT_CHUNKS
                ws = (IMPLICIT_CHUNKS * numba.get_num_threads()   # workspaces per thread
                      * _zrows(N)["rows"] * _US * 8)
            else:
                ws = numba.get_num_threads() * 32 * (n * n + 12 * n + 8) * 8
            mem_rows.append([f"{B} x {n}", np.dtype(dt).name, R.nbytes / 2**20,
                             m_np / 2**20, (m_de / 2**20 if m_de else None), m_nb / 2**20,
                             ws / 2**20])
            # other methods and the forward
            if args.backward_only:
                print(f"done {B} x {n} {np.dtype(dt).name}", flush=True)
                continue
            t_c = C.time_call(lambda: numbaot.sinkhorn_operator_backward(
                R, G, "implicit_corrected"), reps, 1)
            t_u = C.time_call(lambda: numbaot.sinkhorn_operator_backward(
                R, G, "unrolled", X=X, n_iter=48), max(2, reps // 2), 1)
            t_f = C.time_call(lambda: numbaot.sinkhorn_operator(X, n_iter=48), max(2, reps // 2), 1)
            t_fnp = C.time_call(lambda: numpy_forward(X, 48), 2, 1, max_time=30)
            extra_rows.append([f"{B} x {n}", np.dtype(dt).name, t_c["best"] * 1e3,
                               t_u["best"] * 1e3, t_f["best"] * 1e3, t_fnp["best"] * 1e3,
                               t_fnp["best"] / t_f["best"],
                               B * 48 * 2 * n * n / t_f["best"] / 1e9])
            print(f"done {B} x {n} {np.dtype(dt).name}", flush=True)

    print(f"\n## implicit backward (ms, best of {reps} repeats, gc.collect() before every "
          "call; then alternating calls, median of the per-pair ratios)\n")
    C.print_table(["batch x n", "dtype", "numpy CG", "dense solve", "numbaot",
                   "numpy CG / numbaot", "alternating: median ratio", "dense / numbaot",
                   "CG iters (mean)",
                   "memory floor ms", "rel diff vs numpy CG", "rel diff vs dense"], rows)
    print("\n## memory (MiB): R itself; peak NumPy temporaries (tracemalloc); "
          "numbaot per-thread workspace (analytic)\n")
    C.print_table(["batch x n", "dtype", "R", "numpy CG peak", "dense peak", "numbaot peak",
                   "numbaot workspaces"], mem_rows)
    if args.backward_only:
        return
    print("\n## other modes and the forward (ms; 48 iterations)\n")
    C.print_table(["batch x n", "dtype", "implicit_corrected", "unrolled (incl. forward)",
                   "forward", "numpy/scipy forward", "forward ratio",
                   "G entry-updates/s (2 n^2 per iteration)"],
                  extra_rows)


if __name__ == "__main__":
    main()
