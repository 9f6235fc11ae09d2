"""Paired batches: many small OT problems sharing one cost matrix.

numbaot extends POT's ``sinkhorn2``: a 2-D ``a`` (dim_a, n_hists) with a 2-D
``b`` (dim_b, n_hists) and one ``M`` solves the n_hists problems
(a[:, k], b[:, k], M) and returns the n_hists losses <T_k, M>.  POT has no
such mode (its 2-D ``b`` pairs every b[:, k] with a single ``a``), so the
baselines are

* ``ot.batch.solve_batch`` (POT >= 0.9.6) with M broadcast to (B, n, m),
  a (B, n), b (B, m), method 'sinkhorn' or 'log_sinkhorn'; its loss is
  ``res.value_linear`` (= <T, M>; ``res.value`` adds the entropy term);
* a Python loop of ``ot.sinkhorn2(a[:, k], b[:, k], M, ...)``.

Equal work: every solver runs the SAME FIXED number of iterations
(``stopThr=0`` / ``tol=0``; all three check the marginal error every 10th
iteration, and with a zero threshold never stop early).

Agreement: losses are compared (max relative difference) (1) at the timed
iteration count against the ot.sinkhorn2 loop (same update order as numbaot,
so these should match to rounding) and against solve_batch (different update
order and initialisation, so not identical before convergence), and (2) after
``--verify-iters`` iterations, when all should have converged to the same
values.

Usage::

    python benchmarks/bench_batch.py            # 100 problems of 100 x 100
    python benchmarks/bench_batch.py --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

POT_LOOP_METHOD = {"sinkhorn": "sinkhorn", "sinkhorn_log": "sinkhorn_log"}
POT_BATCH_METHOD = {"sinkhorn": "sinkhorn", "sinkhorn_log": "log_sinkhorn"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100, help="problem size n (n x n); default 100")
    p.add_argument("--n-hists", type=int, default=None,
                   help="number of problems; default 100 (quick: 20)")
    p.add_argument("--reg", type=float, default=0.05,
                   help="entropic regularisation (M normalised to max 1); default 0.05")
    p.add_argument("--iters", type=int, default=None,
                   help="fixed iteration count for the timed runs; default 100 (quick: 30)")
    p.add_argument("--verify-iters", type=int, default=None,
                   help="iterations of the converged agreement check; default 500 "
                        "(quick: 100); 0 skips it")
    p.add_argument("--methods", nargs="+", default=["sinkhorn", "sinkhorn_log"],
                   choices=["sinkhorn", "sinkhorn_log"])
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                   help="note: POT's solve_batch 'sinkhorn' builds its scalings in float64")
    p.add_argument("--repeats", type=int, default=5,
                   help="timed repeats (best is reported); default 5 (quick: 2)")
    p.add_argument("--max-time", type=float, default=20.0,
                   help="cut repeats of a measurement expected to take longer (s)")
    p.add_argument("--no-loop", action="store_true", help="skip the ot.sinkhorn2 loop baseline")
    p.add_argument("--threads", type=int, default=None, help="numba.set_num_threads(...)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke mode")
    args = p.parse_args(argv)

    quick = args.quick
    iters = args.iters or (30 if quick else 100)
    verify_iters = args.verify_iters if args.verify_iters is not None else (100 if quick else 500)
    n_hists = args.n_hists or (20 if quick else 100)
    repeats = 2 if (quick and args.repeats == 5) else args.repeats

    import numba
    import ot
    import ot.batch

    numbaot = C.import_numbaot()
    if args.threads:
        numba.set_num_threads(args.threads)

    dtype = np.dtype(args.dtype)
    n, B, reg = args.n, n_hists, args.reg
    a, b, M = C.make_batch_problem(n, n_hists=B, dtype=dtype, seed=args.seed)
    Mb = np.broadcast_to(M, (B, n, n))  # shared M, no copy
    aB = np.ascontiguousarray(a.T)  # (B, n)
    bB = np.ascontiguousarray(b.T)

    C.start_report("bench_batch")
    print(f"{B} paired problems of {n}x{n} ({args.dtype}), random a_k, b_k, shared M "
          f"(sqeuclidean, max 1), reg={reg}; timed runs: exactly {iters} iterations "
          f"each (stopThr=0 / tol=0), best of {repeats}; numba threads={numba.get_num_threads()}")
    print()

    def run_nb(method, k):
        return lambda: numbaot.sinkhorn2(a, b, M, reg, method=method, numItermax=k,
                                         stopThr=0.0, warn=False)

    def run_batch(method, k):
        return lambda: ot.batch.solve_batch(Mb, reg, a=aB, b=bB, max_iter=k, tol=0.0,
                                            method=POT_BATCH_METHOD[method],
                                            reg_type="entropy", grad="detach").value_linear

    def run_loop(method, k):
        def f():
            return np.array([
                ot.sinkhorn2(a[:, j], b[:, j], M, reg, method=POT_LOOP_METHOD[method],
                             numItermax=k, stopThr=0.0, warn=False)
                for j in range(B)
            ])
        return f

    time_rows, agree_rows = [], []
    for method in args.methods:
        print(f"... {method}", file=sys.stderr, flush=True)
        kw = dict(repeats=repeats, max_time=args.max_time)
        try:
            t_nb = C.time_call(run_nb(method, iters), **kw)
        except Exception as exc:  # noqa: BLE001 - report, don't die
            print(f"numbaot.sinkhorn2 (paired, {method}) FAILED: {type(exc).__name__}: {exc}")
            continue
        L_nb = np.asarray(t_nb["result"])
        t_b = C.time_call(run_batch(method, iters), **kw)
        L_b = np.asarray(t_b["result"])
        t_l = None if args.no_loop else C.time_call(run_loop(method, iters), **kw)
        L_l = None if t_l is None else np.asarray(t_l["result"])

        per = B * iters
        tn = t_nb["best"]
        time_rows.append([method, "numbaot.sinkhorn2 (2-D a, b)", 1e3 * tn, 1e6 * tn / per, 1.0])
        time_rows.append([method, f"ot.batch.solve_batch ('{POT_BATCH_METHOD[method]}')",
                          1e3 * t_b["best"], 1e6 * t_b["best"] / per, t_b["best"] / tn])
        if t_l is not None:
            time_rows.append([method, f"loop of ot.sinkhorn2 ('{POT_LOOP_METHOD[method]}')",
                              1e3 * t_l["best"], 1e6 * t_l["best"] / per, t_l["best"] / tn])

        shape_ok = L_nb.shape == (B,)
        agree_rows.append([method, iters, "ot.sinkhorn2 loop",
                           "-" if L_l is None else C.rel_diff(L_nb, L_l),
                           str(L_nb.shape) + ("" if shape_ok else " (expected (%d,)!)" % B),
                           str(L_nb.dtype), bool(np.all(np.isfinite(L_nb)))])
        agree_rows.append([method, iters, "solve_batch (other update order)",
                           C.rel_diff(L_nb, L_b), "", "", ""])

        if verify_iters:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                V_nb = np.asarray(run_nb(method, verify_iters)())
                V_b = np.asarray(run_batch(method, verify_iters)())
                V_l = np.asarray(run_loop(method, verify_iters)())
            agree_rows.append([method, verify_iters, "ot.sinkhorn2 loop",
                               C.rel_diff(V_nb, V_l), "", "", bool(np.all(np.isfinite(V_nb)))])
            agree_rows.append([method, verify_iters, "solve_batch",
                               C.rel_diff(V_nb, V_b), "", "", ""])
            agree_rows.append([method, verify_iters, "(POT: solve_batch vs loop)",
                               C.rel_diff(V_b, V_l), "", "", ""])

    print("## Time for all problems (best of k); ratio = baseline / numbaot (> 1: numbaot faster)")
    print()
    C.print_table(["method", "solver", "ms per call", "µs per problem·iteration",
                   "time / numbaot"], time_rows)
    print()
    print("## Loss agreement: max |L_numbaot - L_other| / max |L_other|")
    print()
    C.print_table(["method", "iterations", "numbaot vs", "max rel diff", "numbaot shape",
                   "numbaot dtype", "finite"], agree_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
