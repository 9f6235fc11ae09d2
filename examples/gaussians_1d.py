"""Entropic OT between 1-D Gaussian histograms, batched, in the log domain.

The classic POT example: 100 bins on x = 0..99, a source histogram
``a = gauss(m=20, s=5)`` and two targets ``b1 = gauss(m=60, s=10)``,
``b2 = gauss(m=40, s=8)``; squared Euclidean ground cost normalised to
max 1 and a small regularisation ``reg = 1e-3`` (so small that the plain
Sinkhorn kernel ``exp(-M/reg)`` underflows: the log-domain solver is needed).

With numbaot the script

* solves a -> b1 and a -> b2 in ONE call by passing ``b = [b1, b2]`` as a
  (100, 2) array with ``method='sinkhorn_log'``: it returns the two losses,
  and with ``log=True`` the dual potentials ``log_u``, ``log_v`` of shape
  (100, 2);
* solves the *paired* batch (2-D ``a`` and 2-D ``b``): problem k transports
  ``A[:, k]`` to ``B[:, k]``, here a -> b1 and b1 -> b2;
* computes the per-problem plans (1-D ``a`` and ``b``).

Each problem is also solved with POT's ``ot.bregman.sinkhorn_stabilized``;
the script prints times, losses <G, M> and the max abs difference between the
plans. ``--out FILE`` saves a figure of the plans.

Run from the repository root::

    python examples/gaussians_1d.py
    python examples/gaussians_1d.py --out gaussians_1d.png

Exit status: 0 on success, 1 if any numbaot result is not finite.
"""

import argparse
import os
import sys
import time

import numpy as np

try:
    import numbaot
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import numbaot


def gauss(x, m, s):
    """Normalised 1-D Gaussian histogram on the bins x (as ot.datasets.make_1D_gauss)."""
    h = np.exp(-((x - m) ** 2) / (2 * s ** 2))
    return h / h.sum()


def timed(fn, *args, repeat=1, **kwargs):
    """Call fn `repeat` times; return the last result and the best time."""
    best = np.inf
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        res = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return res, best


def all_finite(*arrays):
    return all(np.all(np.isfinite(np.asarray(x))) for x in arrays)


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Batched log-domain Sinkhorn on 1-D Gaussians (numbaot vs POT).")
    p.add_argument("--n", type=int, default=100, help="number of bins (default: 100)")
    p.add_argument("--reg", type=float, default=1e-3,
                   help="entropic regularisation (default: 1e-3)")
    p.add_argument("--num-itermax", type=int, default=1000)
    p.add_argument("--stop-thr", type=float, default=1e-9)
    p.add_argument("--repeat", type=int, default=5,
                   help="warm timings are the best of this many calls (default: 5)")
    p.add_argument("--out", default=None,
                   help="save a figure of the plans to this file (default: none)")
    p.add_argument("--no-pot", action="store_true",
                   help="skip the comparison with POT")
    args = p.parse_args(argv)

    n, reg = args.n, args.reg
    x = np.arange(n, dtype=np.float64)
    a = gauss(x, 0.20 * n, 0.05 * n)
    b1 = gauss(x, 0.60 * n, 0.10 * n)
    b2 = gauss(x, 0.40 * n, 0.08 * n)
    M = numbaot.dist(x.reshape(-1, 1), x.reshape(-1, 1))
    M /= M.max()
    kw = dict(method="sinkhorn_log", numItermax=args.num_itermax,
              stopThr=args.stop_thr)
    print(f"{n} bins, reg={reg:g}, method='sinkhorn_log', stopThr={args.stop_thr:g}; "
          f"warm times: best of {args.repeat}")

    # --- numbaot -----------------------------------------------------------
    B = np.stack([b1, b2], axis=1)              # (n, 2): targets b1, b2
    (losses, log), t_first = timed(numbaot.sinkhorn, a, B, M, reg, log=True, **kw)
    (losses, log), t_batch = timed(numbaot.sinkhorn, a, B, M, reg, log=True,
                                   repeat=args.repeat, **kw)
    losses = np.asarray(losses)
    log_u, log_v = np.asarray(log["log_u"]), np.asarray(log["log_v"])
    print(f"numbaot batch  a -> [b1, b2]: losses = {np.array2string(losses, precision=6)}, "
          f"log_u {log_u.shape}, log_v {log_v.shape}")
    print(f"               first call {t_first * 1e3:.1f} ms (incl. JIT compile / cache load), "
          f"warm {t_batch * 1e3:.2f} ms")

    pairs = [("a", "b1", a, b1), ("b1", "b2", b1, b2)]
    A_p = np.stack([pr[2] for pr in pairs], axis=1)
    B_p = np.stack([pr[3] for pr in pairs], axis=1)
    numbaot.sinkhorn(A_p, B_p, M, reg, **kw)    # compile this variant first
    losses_p, t_paired = timed(numbaot.sinkhorn, A_p, B_p, M, reg,
                               repeat=args.repeat, **kw)
    losses_p = np.asarray(losses_p)
    print(f"numbaot paired [a, b1] -> [b1, b2]: losses = "
          f"{np.array2string(losses_p, precision=6)}, warm {t_paired * 1e3:.2f} ms")

    problems = [("a", "b1", a, b1), ("a", "b2", a, b2), ("b1", "b2", b1, b2)]
    numbaot.sinkhorn(a, b1, M, reg, **kw)       # compile the 1-D variant first
    plans, t_plans = [], 0.0
    for _, _, src, tgt in problems:
        G, dt = timed(numbaot.sinkhorn, src, tgt, M, reg, repeat=args.repeat, **kw)
        plans.append(np.asarray(G))
        t_plans += dt
    print(f"numbaot plans (3 problems, one call each): warm {t_plans * 1e3:.2f} ms total")

    if not all_finite(losses, log_u, log_v, losses_p, *plans):
        print("ERROR: numbaot returned non-finite values")
        return 1

    # batch / paired / plan consistency inside numbaot
    plan_losses = np.array([np.sum(G * M) for G in plans])
    print(f"numbaot consistency: |batch - plan losses| = "
          f"{np.abs(losses - plan_losses[:2]).max():.1e}, "
          f"|paired - plan losses| = {np.abs(losses_p - plan_losses[[0, 2]]).max():.1e}")

    # --- POT ---------------------------------------------------------------
    pot_plans = None
    if args.no_pot:
        print("POT: skipped (--no-pot)")
    else:
        try:
            import ot
        except ImportError as exc:
            print(f"POT: not available ({exc}); comparison skipped")
        else:
            pot_plans, t_pot = [], 0.0
            for _, _, src, tgt in problems:
                G, dt = timed(ot.bregman.sinkhorn_stabilized, src, tgt, M, reg,
                              repeat=args.repeat,
                              numItermax=args.num_itermax, stopThr=args.stop_thr)
                pot_plans.append(np.asarray(G))
                t_pot += dt
            print(f"POT {ot.__version__} sinkhorn_stabilized (3 problems): "
                  f"{t_pot * 1e3:.2f} ms total  "
                  f"(numbaot: batch of 2 {t_batch * 1e3:.2f} ms, "
                  f"3 plans {t_plans * 1e3:.2f} ms)")
            nb_loss = {("a", "b1"): [losses[0], losses_p[0]],
                       ("a", "b2"): [losses[1]],
                       ("b1", "b2"): [losses_p[1]]}
            print(f"{'problem':9s} {'POT <G,M>':>12s} {'numbaot':>12s} "
                  f"{'max rel diff':>13s} {'max|G - G_pot|':>15s}")
            worst_rel = worst_dG = 0.0
            for (sn, tn, _, _), G, Gp in zip(problems, plans, pot_plans):
                lp = float(np.sum(Gp * M))
                cands = nb_loss[(sn, tn)] + [np.sum(G * M)]
                rel = max(abs(c - lp) for c in cands) / abs(lp)
                dG = np.abs(G - Gp).max()
                worst_rel, worst_dG = max(worst_rel, rel), max(worst_dG, dG)
                print(f"{sn + '->' + tn:9s} {lp:12.6g} {cands[0]:12.6g} "
                      f"{rel:13.1e} {dG:15.1e}")
            if worst_rel > 1e-6 or worst_dG > 1e-3 * max(G.max() for G in pot_plans):
                print("WARNING: numbaot and POT disagree more than expected "
                      "(rel. loss diff > 1e-6 or plan diff > 1e-3 * max plan)")

    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(problems), figsize=(4.2 * len(problems), 4.8),
                                 layout="constrained")
        for ax, (sn, tn, src, tgt), G in zip(axes, problems, plans):
            ax.imshow(G, origin="lower", cmap="viridis", interpolation="nearest")
            ax.set_title(f"plan {sn} -> {tn}")
            ax.set_xlabel(f"target bin ({tn})")
            ax.set_ylabel(f"source bin ({sn})")
        fig.suptitle(f"numbaot sinkhorn_log plans, reg={reg:g}")
        fig.savefig(args.out, dpi=100, bbox_inches="tight")
        plt.close(fig)
        print(f"figure written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
