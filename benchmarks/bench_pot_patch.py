"""POT's own pipelines, unpatched and under ``numbaot.pot.patched()``.

Side by side in one run, interleaved (unpatched, patched, unpatched, ...;
``patch()``/``unpatch()`` between the calls, outside the timed region),
median of the pairwise ratios:

* ``ot.solve(M, reg=0.05)`` at 1000 x 1000 (squared-Euclidean cost of
  2-D Gaussian clouds divided by its max; POT's defaults otherwise);
* ``ot.da.SinkhornTransport(reg_e=0.1).fit`` on 2000 source and 2000 target
  samples (3-D, Gaussian);
* ``ot.gromov.entropic_gromov_wasserstein`` with n = 300 (epsilon 0.05,
  square loss, PGD solver, max_iter 20), and the share of its time that
  POT's ``sinkhorn`` takes unpatched (the rest, the O(n^3) tensor products
  of the gradient, numbaot does not touch).

``--da-only`` times instead the DA estimators whose loops call POT's
``sinkhorn`` with little else to accelerate, at minibatch to medium sizes
(``--da-sizes``, default 64 256 1000 samples per side; 5-D Gaussian
clouds, the second shifted by 1, 3 classes; POT's defaults otherwise):
``SinkhornLpl1Transport(reg_e=0.1, reg_cl=0.1).fit`` (ten Sinkhorn solves,
each after a BLAS product: ``numbaot.pot`` runs that loop with BLAS on one
thread above the one-call bound) and
``UnbalancedSinkhornTransport(reg_e=0.1, reg_m=1).fit``; each side fits
three times in a row per round (median), five rounds (three with
``--quick``).

Usage::

    python benchmarks/bench_pot_patch.py            # all
    python benchmarks/bench_pot_patch.py --quick    # fewer repeats
    python benchmarks/bench_pot_patch.py --da-only --da-sizes 64 256 1000
"""
import argparse
import cProfile
import gc
import os
import pstats
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

import ot  # noqa: E402

import numbaot.pot as npot  # noqa: E402


def _timed(fn, back_to_back):
    """(median time of ``back_to_back`` calls of fn() in a row, last result)."""
    times = []
    for _ in range(back_to_back):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def _pair(fn, repeats, back_to_back=1):
    """Time fn() unpatched and patched alternately (patch()/unpatch() between
    the calls, outside the timed region), after one untimed patched call
    (compilation, or loading numbaot's kernels from the cache).  With
    ``back_to_back`` > 1 each side runs that many calls in a row per round
    (their median is the round's time), as a script fitting one estimator
    after another does: a call then starts while the previous one's thread
    pools still spin.
    Returns (POT times, patched times, POT / patched per pair, last results)."""
    t_pot, t_nb = [], []
    with npot.patched():
        fn()
    for _ in range(repeats):
        gc.collect()
        t, ref = _timed(fn, back_to_back)
        t_pot.append(t)
        npot.patch()
        try:
            gc.collect()
            t, out = _timed(fn, back_to_back)
            t_nb.append(t)
        finally:
            npot.unpatch()
    return t_pot, t_nb, [p / q for p, q in zip(t_pot, t_nb)], ref, out


def _quiet(fn):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    return run


def _row(name, t_pot, t_nb, ratios):
    print(f"| {name} | {np.median(t_pot) * 1e3:.1f} | {np.median(t_nb) * 1e3:.1f} | "
          f"{np.median(ratios):.2f}x |")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--da-only", action="store_true")
    p.add_argument("--da-sizes", type=int, nargs="+", default=[64, 256, 1000])
    args = p.parse_args(argv)
    reps = 3 if args.quick else 5
    rng = np.random.default_rng(0)
    C.start_report("POT pipelines, unpatched vs numbaot.pot.patched()")
    print("| workload | POT (ms, median) | POT + numbaot.pot (ms) | speed-up (median of pairs) |")
    print("|---|---|---|---|")
    if args.da_only:
        for n in args.da_sizes:
            Xs, Xt = rng.normal(size=(n, 5)), rng.normal(size=(n, 5)) + 1.0
            ys = rng.integers(0, 3, n)
            for name, est in (("SinkhornLpl1Transport(reg_e=0.1, reg_cl=0.1)",
                               lambda: ot.da.SinkhornLpl1Transport(reg_e=0.1, reg_cl=0.1)),
                              ("UnbalancedSinkhornTransport(reg_e=0.1, reg_m=1)",
                               lambda: ot.da.UnbalancedSinkhornTransport(reg_e=0.1, reg_m=1))):
                fit = _quiet(lambda: est().fit(Xs=Xs, ys=ys, Xt=Xt).coupling_)
                t_pot, t_nb, ratios, ref, out = _pair(fit, reps, back_to_back=3)
                _row(f"ot.da.{name}.fit, {n} + {n} samples", t_pot, t_nb, ratios)
                np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-12)
        return

    xs, xt = rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2)) + 1.0
    M = ot.dist(xs, xt)
    M /= M.max()
    solve = _quiet(lambda: ot.solve(M, reg=0.05))
    t_pot, t_nb, ratios, ref, out = _pair(solve, reps)
    _row("ot.solve(M, reg=0.05), 1000 x 1000", t_pot, t_nb, ratios)
    np.testing.assert_allclose(out.plan, ref.plan, rtol=1e-5, atol=1e-12)

    Xs, Xt = rng.normal(size=(2000, 3)), rng.normal(size=(2000, 3)) + 1.0
    fit = _quiet(lambda: ot.da.SinkhornTransport(reg_e=0.1).fit(Xs=Xs, Xt=Xt).coupling_)
    t_pot, t_nb, ratios, ref, out = _pair(fit, min(reps, 2))  # POT: 1-2 min per fit
    _row("ot.da.SinkhornTransport(reg_e=0.1).fit, 2000 + 2000 samples", t_pot, t_nb, ratios)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-12)

    n = 300
    x1, x2 = rng.normal(size=(n, 2)), rng.normal(size=(n, 3))
    C1, C2 = ot.dist(x1, x1), ot.dist(x2, x2)
    C1 /= C1.max()
    C2 /= C2.max()
    p_, q_ = ot.unif(n), ot.unif(n)
    egw = _quiet(lambda: ot.gromov.entropic_gromov_wasserstein(
        C1, C2, p_, q_, "square_loss", epsilon=0.05, solver="PGD", max_iter=20))
    t_pot, t_nb, ratios, ref, out = _pair(egw, reps)
    _row(f"ot.gromov.entropic_gromov_wasserstein, n = {n}", t_pot, t_nb, ratios)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-12)
    prof = cProfile.Profile()
    prof.runcall(egw)
    stats = pstats.Stats(prof)
    total = max(v[3] for v in stats.stats.values())
    sink = sum(v[3] for k, v in stats.stats.items()
               if k[2] == "sinkhorn" and k[0].endswith(os.path.join("bregman", "_sinkhorn.py")))
    print(f"\nentropic GW, unpatched: POT's sinkhorn takes {100 * sink / total:.0f} % of the "
          "time (the rest is the O(n^3) gradient, unchanged by the patch)")


if __name__ == "__main__":
    main()
