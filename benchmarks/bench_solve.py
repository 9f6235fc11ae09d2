"""``numbaot.solve`` against POT's ``ot.solve``, whole calls side by side.

For each size n (an n x n problem: points uniform in the unit square, M the
squared Euclidean cost divided by its max, uniform weights) and each case
this times complete calls with POT's defaults (``max_iter=1000``,
``tol=1e-9``), POT and numbaot alternately (``_common.time_pair``), and
prints the best times, the per-pair speed-up (POT time / numbaot time,
median over the pairs), the iteration counts where they can be read, and the
agreement of the results (relative difference of ``value`` and of ``plan``).

Cases: balanced ``reg=0.05`` (POT: ``ot.bregman.sinkhorn_log``; the brief's
case), and unbalanced ``reg=0.05, unbalanced=1.0`` (POT:
``ot.unbalanced.sinkhorn_knopp_unbalanced``) with ``--unbalanced``.

POT's ``sinkhorn_log`` costs ~35 ms per iteration at 1000^2 and ~0.4 s at
4000^2 on the project's 2-core machines, so at 4000 one POT call can take
minutes: the number of pairs is cut there (``--max-time``).

Usage::

    python benchmarks/bench_solve.py                       # 1000 and 4000
    python benchmarks/bench_solve.py --sizes 300 --quick   # smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def _case_kwargs(case):
    if case == "balanced":
        return dict(reg=0.05)
    return dict(reg=0.05, unbalanced=1.0)


def run(sizes, cases, dtypes, repeats, max_time):
    import ot

    import numbaot

    rows, checks = [], []
    for n in sizes:
        for dtype in dtypes:
            a, b, M = C.make_problem(n, dtype=dtype, seed=0, uniform=True)
            for case in cases:
                kw = _case_kwargs(case)
                # compile outside the timings (first numbaot call, any size)
                numbaot.solve(M[:8, :8], a[:8] * n / 8, b[:8] * n / 8, **kw)
                tp, tn, ratios = C.time_pair(lambda: ot.solve(M, a, b, **kw),
                                             lambda: numbaot.solve(M, a, b, **kw),
                                             repeats=repeats, warmup=0, max_time=max_time)
                r_pot, r_nb = tp["result"], tn["result"]
                speedups = [1.0 / r for r in ratios]
                rows.append([f"{n}x{n}", np.dtype(dtype).name, case, tp["best"] * 1e3,
                             tn["best"] * 1e3, statistics.median(speedups), len(ratios)])
                checks.append([f"{n}x{n}", np.dtype(dtype).name, case,
                               C.rel_diff(r_nb.value, r_pot.value),
                               C.rel_diff(r_nb.value_linear, r_pot.value_linear),
                               C.rel_diff(r_nb.plan, r_pot.plan)])
    print()
    C.print_table(["shape", "dtype", "case", "POT ms", "numbaot ms", "speed-up", "pairs"], rows)
    print()
    C.print_table(["shape", "dtype", "case", "rel diff value", "rel diff value_linear",
                   "rel diff plan"], checks)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    p.add_argument("--repeats", type=int, default=5, help="pairs (POT, numbaot) per case")
    p.add_argument("--max-time", type=float, default=240.0,
                   help="seconds per case before the number of pairs is cut (min 2)")
    p.add_argument("--unbalanced", action="store_true", help="also the unbalanced case")
    p.add_argument("--float32", action="store_true", help="also float32")
    p.add_argument("--quick", action="store_true", help="2 pairs")
    args = p.parse_args(argv)
    C.start_report("numbaot.solve vs ot.solve (whole calls, POT's defaults)")
    cases = ["balanced"] + (["unbalanced"] if args.unbalanced else [])
    dtypes = [np.float64] + ([np.float32] if args.float32 else [])
    run(args.sizes, cases, dtypes, 2 if args.quick else args.repeats, args.max_time)


if __name__ == "__main__":
    main()
