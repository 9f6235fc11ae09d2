"""GeomLoss (PyTorch + KeOps, CPU) against numbaot's multiscale epsilon scaling,
side by side on the same entropic OT problem (issue 21's targets).

The clouds of ``bench_eps_scaling.py`` (``clouds(n)``: X uniform in the unit
cube, Y on a noisy sphere shell of radius 0.4 around its centre), n = 10000
points each in 3-D, uniform weights.  Issue 21's targets: the time to a
relative error <= 2e-4 of the entropic OT value should be at most 0.5x
GeomLoss multiscale's, and to <= 3.5e-2 at most 1x.

The problem, matched exactly
----------------------------
numbaot solves, for ``reg`` = eps (``--eps``, 0.05 by default),

    OT_eps = min_{P 1 = a, P^T 1 = b} <P, C> + eps KL(P | a b^T),  C_ij = |x_i - y_j|^2,

whose plan is a_i b_j exp((F_i + G_j - C_ij) / eps).  GeomLoss's
``SamplesLoss("sinkhorn", p=2, blur=..., debias=False)`` solves the same
problem with the cost |x - y|^2 / 2 and the temperature blur**p = blur**2;
halving both the cost and the temperature halves the objective, so the same
problem is ``blur = sqrt(eps / 2)`` and numbaot's OT_eps is **2x GeomLoss's
value**.  With ``debias=False`` GeomLoss returns (``sinkhorn_cost``, balanced
case) the dual value sum_i a_i F_i + sum_j b_j G_j of its last potentials
(after a final symmetric half-step), i.e. the entropic OT value itself, the
entropic term included, not the linear part <P, C>.  The script checks this
before timing (``--check-n``, 500 points): GeomLoss tensorized in float64 at
scaling 0.999, times 2, against numbaot's value converged to tol 1e-10 (the
two agree to ~1e-7 relative; a factor or an entropic term left out would
show as O(1) or O(1e-1)).

GeomLoss's ``scaling`` is a factor on blur = eps**(1/2): GeomLoss scaling s is
numbaot scaling s**2 on eps (GeomLoss 0.5 = numbaot 0.25).  Its schedule
runs one symmetric iteration per temperature from diameter**2 (in its units)
down to blur**2, then one final extrapolation, whatever the accuracy: its
error is set by ``scaling`` (and, for the multiscale backend, by its voxel
clustering, side ``diameter / (sqrt(3) 2000**(1/3))`` = 0.079 here, and
kernel truncation ``truncate=5``, both GeomLoss's defaults).  Note: at eps
0.05 (blur 0.158 > 0.079) GeomLoss's multiscale runs every iteration on the
voxel centroids and only extrapolates to the points at the end.

Measured
--------
* The points: ``clouds(n)`` rounded to float32, so that every solver, float32
  or float64, gets exactly the same points.
* Reference: ``numbaot.solve_sample(X, Y, reg=eps, method='geomloss_online',
  scaling=0.7, tol=1e-7, max_iter=100000)`` on those points in float64; its
  dual value mean(F) + mean(G) (as ``bench_eps_scaling.py``).
* GeomLoss: ``SamplesLoss("sinkhorn", p=2, blur=sqrt(eps/2), scaling=s,
  debias=False, backend="multiscale")`` on float32 torch tensors (as its users
  run it) for each s of ``--gl-scalings``; ``backend="online"`` for
  ``--online-scalings`` (a setting whose predicted time exceeds 60 s is
  skipped; a setting is timed as many times as fit in 60 s, at least once).
  Time per call after a warm-up call (which compiles KeOps's formula); error:
  |2 value - ref| / ref.
* numbaot, to each threshold: as ``bench_eps_scaling.run(..., multiscale=True)``
  (``_lazy.multiscale_anneal``, then ``lazy_steps`` one iteration at a time;
  the dual value sum_i a_i F_i + sum_j b_j G_j after each, not timed) the time
  to the first iterate within the threshold, for numbaot scalings
  ``--nb-scalings`` (0.25 and 0.5 on eps), on the float32 points and on the
  float64 points.  Unlike ``bench_eps_scaling.py`` the time here also counts
  ``_lazy.lazy_setup`` (validation, diameter, state; printed apart), as
  GeomLoss's call counts its own setup.
* numbaot public call: the wall time of one whole
  ``numbaot.solve_sample(X32, Y32, reg=eps, method='geomloss_multiscale',
  scaling=s, tol=1e-3)`` (POT's stopping rule: the first test after 10
  iterations on the points) and of the same call with ``max_iter=1`` (one
  iteration on the points, no stopping test; GeomLoss has none either; it
  warns "did not converge", silenced), error of its ``res.value`` (and of the
  dual value of its potentials); for comparison only, not in the per-threshold
  best.  (The runs above stop at the first iterate within the threshold, known
  from the reference; GeomLoss's accuracy is fixed by its schedule, and the
  ``max_iter=1`` call is numbaot's fixed schedule without that knowledge.)

Threads: 2 everywhere (``OMP_NUM_THREADS=2`` for KeOps's OpenMP loops, set
before torch is imported unless already set; ``torch.set_num_threads(2)``;
numbaot: Numba's default, the core count).  The solvers are interleaved
(GeomLoss, numbaot, GeomLoss, ...: every setting once per round, ``--repeats``
timed rounds after one warm-up round), and the median of the repeats is
reported; the ratio is numbaot's best median / GeomLoss's best median.

Needs torch, geomloss and pykeops (the ``bench`` extra) plus g++ and cmake
for KeOps's CPU kernels (compiled on first use into its cache; set
``KEOPS_CACHE_DIR`` to move it, e.g. under /tmp).

Usage: python benchmarks/bench_geomloss.py [--n 10000] [--eps 0.05] [--repeats 3]
       [--gl-scalings 0.5 0.7 0.8 0.9 0.95] [--online-scalings 0.5 0.9]
       [--nb-scalings 0.25 0.5]
"""
import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "2")  # KeOps's CPU loops; before torch

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (puts the repository first on sys.path)
from bench_eps_scaling import THRESHOLDS, clouds, dual_value  # noqa: E402

THREADS = 2
ONLINE_MAX_S = 60.0  # GeomLoss online: skip a setting predicted to take longer per call,
# and time a setting only as many times as fit in this many seconds (at least once)


def import_geomloss():
    """torch (2 threads), pykeops and geomloss's SamplesLoss, or exit."""
    try:
        import torch

        torch.set_num_threads(THREADS)
        import pykeops

        cache = os.environ.get("KEOPS_CACHE_DIR")
        if cache:
            pykeops.set_build_folder(cache)
        import geomloss
        from geomloss import SamplesLoss
    except Exception as exc:  # noqa: BLE001
        sys.exit(f"torch / pykeops / geomloss not importable ({type(exc).__name__}: {exc}); "
                 "pip install '.[bench]'")
    return torch, pykeops, geomloss, SamplesLoss


def gl_schedule(x, y, blur, scaling):
    """GeomLoss's own schedule for these clouds: (iterations of one
    multiscale call, voxel side, where they run, iterations of one online or
    tensorized call)."""
    from geomloss._legacy.sinkhorn_divergence import epsilon_schedule, max_diameter

    diameter = max_diameter(x, y)
    eps_list = epsilon_schedule(2, diameter, blur, scaling)
    h = diameter / (np.sqrt(x.shape[1]) * 2000 ** (1 / x.shape[1]))
    jump = len(eps_list) - 1
    for i, e in enumerate(eps_list[2:]):
        if h ** 2 > e:
            jump = i + 1
            break
    # one iteration per temperature, then one final half-step pair (not
    # after a last-iteration jump, which is itself the extrapolation)
    n_it = len(eps_list) + (0 if jump == len(eps_list) - 1 else 1)
    where = "centroids only, then extrapolated" if jump == len(eps_list) - 1 else \
        f"{jump + 1} on centroids, {n_it - jump - 1} on the points"
    return n_it, h, where, len(eps_list) + 1


def numbaot_run(X, Y, reg, scaling, ref, max_iter):
    """bench_eps_scaling.run(..., multiscale=True), lazy_setup included in
    the time: {threshold: (seconds, total iterations, error)} (None where
    not reached), the setup time and the last error."""
    from numbaot import _lazy

    t0 = time.perf_counter()
    pb, _, _ = _lazy.lazy_setup(X, Y, reg, None, None, "sqeuclidean", 10, 0.0, 100, None,
                                scaling=scaling)
    t_setup = time.perf_counter() - t0
    n_coarse, n_fine, _ = _lazy.multiscale_anneal(pb)
    elapsed = time.perf_counter() - t0
    out = {thr: None for thr in THRESHOLDS}
    err = np.inf
    for k in range(1, max_iter + 1):
        t1 = time.perf_counter()
        pb.be.lazy_steps(pb.st, 1)
        elapsed += time.perf_counter() - t1
        err = abs(dual_value(pb.st, pb, reg) - ref) / abs(ref)
        for thr in THRESHOLDS:
            if out[thr] is None and err <= thr:
                out[thr] = (elapsed, n_coarse + n_fine + k, err)
        if all(v is not None for v in out.values()):
            break
    return out, t_setup, err


def convention_check(numbaot, torch, SamplesLoss, n, reg):
    """GeomLoss tensorized (float64, scaling 0.999) x 2 against numbaot's
    converged value on n points: prints both and returns the relative gap."""
    X, Y = clouds(n)
    res = numbaot.solve_sample(X, Y, reg=reg, method="geomloss_online", scaling=0.7,
                               tol=1e-10, max_iter=100000)
    ref = float(np.mean(res.potentials[0]) + np.mean(res.potentials[1]))
    loss = SamplesLoss("sinkhorn", p=2, blur=float(np.sqrt(reg / 2)), scaling=0.999,
                       debias=False, backend="tensorized")
    v = float(loss(torch.from_numpy(X), torch.from_numpy(Y)))
    gap = abs(2 * v - ref) / abs(ref)
    print(f"unit check ({n} x {n} points, eps {reg}): numbaot OT_eps {ref:.10f} (res.value "
          f"{float(res.value):.10f}, <P, C> {float(res.value_linear):.10f}); GeomLoss "
          f"tensorized float64 scaling 0.999, blur sqrt(eps/2): value {v:.10f}, x 2 = "
          f"{2 * v:.10f}, relative gap {gap:.1e}")
    return gap


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000, help="points per cloud")
    ap.add_argument("--eps", type=float, nargs="+", default=[0.05],
                    help="numbaot's reg (GeomLoss blur = sqrt(eps / 2))")
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds")
    ap.add_argument("--gl-scalings", type=float, nargs="+",
                    default=[0.5, 0.7, 0.8, 0.9, 0.95],
                    help="GeomLoss multiscale scalings (on blur)")
    ap.add_argument("--online-scalings", type=float, nargs="*", default=[0.5, 0.9],
                    help="GeomLoss online scalings (on blur); none: skip online")
    ap.add_argument("--nb-scalings", type=float, nargs="+", default=[0.25, 0.5],
                    help="numbaot multiscale scalings (on eps)")
    ap.add_argument("--max-iter", type=int, default=200,
                    help="numbaot: iterations on the points at most, to the thresholds")
    ap.add_argument("--public-tol", type=float, default=1e-3,
                    help="tol of the public solve_sample call")
    ap.add_argument("--check-n", type=int, default=500,
                    help="points of the unit-convention check (0: skip)")
    args = ap.parse_args()

    import numbaot

    torch, pykeops, geomloss, SamplesLoss = import_geomloss()
    warnings.simplefilter("ignore")

    # warm-up (compilation): numbaot's kernels in both dtypes, KeOps's formula
    Xw, Yw = clouds(64, seed=1)
    for dt in ("float64", "float32"):
        for method in ("geomloss_online", "geomloss_multiscale"):
            numbaot.solve_sample(Xw.astype(dt), Yw.astype(dt), reg=0.05, method=method,
                                 scaling=0.5, tol=1e-6)
    gl_backend = "multiscale"
    try:
        SamplesLoss("sinkhorn", p=2, blur=0.1, debias=False, backend="multiscale")(
            torch.from_numpy(Xw.astype(np.float32)), torch.from_numpy(Yw.astype(np.float32)))
    except Exception as exc:  # noqa: BLE001
        print(f"GeomLoss multiscale (KeOps) failed: {type(exc).__name__}: {exc}")
        print("FALLBACK: GeomLoss backend='tensorized' (dense torch, no KeOps) instead")
        gl_backend = "tensorized"
        args.online_scalings = []

    # every solver gets the same points: the float32-rounded clouds (exact in float64)
    X32, Y32 = (x.astype(np.float32) for x in clouds(args.n))
    X64, Y64 = X32.astype(np.float64), Y32.astype(np.float64)
    x32, y32 = torch.from_numpy(X32), torch.from_numpy(Y32)
    _common.start_report(
        f"GeomLoss against numbaot, {args.n} x {args.n} points in 3-D, |x - y|^2, "
        f"eps {' '.join(map(str, args.eps))}")
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads) | geomloss "
          f"{geomloss.__version__} | pykeops {pykeops.__version__} (CPU, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}) | repeats {args.repeats}")
    print()
    if args.check_n:
        convention_check(numbaot, torch, SamplesLoss, args.check_n, args.eps[0])
        print()

    for reg in args.eps:
        one_eps(args, reg, numbaot, torch, SamplesLoss, gl_backend, X64, Y64, X32, Y32,
                x32, y32)


def one_eps(args, reg, numbaot, torch, SamplesLoss, gl_backend, X64, Y64, X32, Y32, x32, y32):
    blur = float(np.sqrt(reg / 2))
    t0 = time.perf_counter()
    res = numbaot.solve_sample(X64, Y64, reg=reg, method="geomloss_online", scaling=0.7,
                               tol=1e-7, max_iter=100000)
    ref = float(np.mean(res.potentials[0]) + np.mean(res.potentials[1]))  # dual value
    print(f"## eps {reg} (GeomLoss blur {blur:.5f})")
    print()
    print(f"reference OT_eps = {ref:.10f} (res.value {float(res.value):.10f}), "
          f"{res.log['niter_total']} iterations, {time.perf_counter() - t0:.1f} s")

    # the settings: (kind, label, dtype, scaling on blur, scaling on eps, fn)
    gl, nb = [], []
    for s in args.gl_scalings:
        loss = SamplesLoss("sinkhorn", p=2, blur=blur, scaling=s, debias=False,
                           backend=gl_backend)
        n_it, h, where, n_single = gl_schedule(x32, y32, blur, s)
        if gl_backend != "multiscale":
            n_it, where = n_single, "on the points"
        gl.append(dict(kind="gl", label=f"GeomLoss {gl_backend}", dtype="float32", s_blur=s,
                       s_eps=s * s, fn=lambda loss=loss: float(loss(x32, y32)),
                       info=f"{n_it} it ({where})", main=True))
    print(f"GeomLoss voxel side {h:.4f} (h**2 {h * h:.5f} in its cost |x-y|^2/2, against "
          f"eps/2 = {reg / 2:g})")
    for dt, (X, Y) in (("float32", (X32, Y32)), ("float64", (X64, Y64))):
        for s in args.nb_scalings:
            nb.append(dict(kind="nb", label="numbaot multiscale", dtype=dt, s_blur=np.sqrt(s),
                           s_eps=s, fn=lambda X=X, Y=Y, s=s: numbaot_run(
                               X, Y, reg, s, ref, args.max_iter)))
    for s in args.nb_scalings:
        for label, kw in ((f"numbaot solve_sample tol {args.public_tol:g}",
                           dict(tol=args.public_tol)),
                          ("numbaot solve_sample max_iter=1", dict(tol=args.public_tol,
                                                                    max_iter=1))):
            nb.append(dict(kind="pub", label=label, dtype="float32", s_blur=np.sqrt(s), s_eps=s,
                           fn=lambda s=s, kw=kw: numbaot.solve_sample(
                               X32, Y32, reg=reg, method="geomloss_multiscale", scaling=s,
                               **kw)))
    order = []
    for i in range(max(len(gl), len(nb))):  # GeomLoss, numbaot, GeomLoss, ...
        order += ([gl[i]] if i < len(gl) else []) + ([nb[i]] if i < len(nb) else [])

    for rnd in range(args.repeats + 1):  # round 0: warm-up, not recorded
        for c in order:
            t0 = time.perf_counter()
            out = c["fn"]()
            dt = time.perf_counter() - t0
            if rnd == 0:
                c.update(times=[], t_thr={thr: [] for thr in THRESHOLDS}, setup=[])
                if c["kind"] == "gl":
                    print(f"  {c['label']} scaling {c['s_blur']}: {c['info']}, warm-up "
                          f"{dt:.2f} s", flush=True)
                continue
            c["times"].append(dt)
            if c["kind"] == "gl":
                c["err"] = abs(2 * out - ref) / abs(ref)
            elif c["kind"] == "pub":
                c["err"] = abs(float(out.value) - ref) / abs(ref)
                dual = float(np.mean(out.potentials[0], dtype=np.float64)
                             + np.mean(out.potentials[1], dtype=np.float64))
                c["err_dual"] = abs(dual - ref) / abs(ref)
                c["iters"] = out.log["niter_total"]
            else:
                thr_out, t_setup, c["err"] = out
                c["setup"].append(t_setup)
                c["reached"] = thr_out
                for thr in THRESHOLDS:
                    if thr_out[thr] is not None:
                        c["t_thr"][thr].append(thr_out[thr][0])
        if rnd:
            print(f"  round {rnd}/{args.repeats} done", flush=True)

    online = []
    if args.online_scalings:
        t_first, it_first = None, None
        for s in args.online_scalings:
            n_it = gl_schedule(x32, y32, blur, s)[3]
            loss = SamplesLoss("sinkhorn", p=2, blur=blur, scaling=s, debias=False,
                               backend="online")
            c = dict(kind="gl", label="GeomLoss online", dtype="float32", s_blur=s, s_eps=s * s,
                     times=[])
            if t_first is not None and t_first / it_first * n_it > ONLINE_MAX_S:
                print(f"  GeomLoss online scaling {s}: skipped (predicted "
                      f"{t_first / it_first * n_it:.0f} s per call > {ONLINE_MAX_S:.0f} s)")
                continue
            reps = args.repeats
            for _ in range(reps + (1 if t_first is None else 0)):
                t0 = time.perf_counter()
                v = float(loss(x32, y32))
                dt = time.perf_counter() - t0
                if t_first is None:  # the warm-up call: KeOps's online formula
                    t_first, it_first = dt, n_it
                    continue
                c["times"].append(dt)
                if sum(c["times"]) + dt > ONLINE_MAX_S:
                    break  # another call would take this setting past ONLINE_MAX_S
            c["err"] = abs(2 * v - ref) / abs(ref)
            print(f"  GeomLoss online scaling {s}: {n_it} it, "
                  f"{', '.join(f'{t:.2f}' for t in c['times'])} s", flush=True)
            online.append(c)

    report(args, reg, gl + online, nb, gl_backend)


def report(args, reg, gl, nb, gl_backend):
    print()
    rows = []
    best = {thr: {"gl": None, "nb": None} for thr in THRESHOLDS}

    def consider(thr, side, t, name):
        if t is not None and (best[thr][side] is None or t < best[thr][side][0]):
            best[thr][side] = (t, name)

    for c in gl:
        t = statistics.median(c["times"])
        name = f"{c['label']} {c['dtype']} scaling {c['s_blur']:g}"
        rows.append((c["label"], c["dtype"], f"{c['s_blur']:g} ({c['s_eps']:.4g})", "call",
                     t, c["err"], " ".join(f"{x:.3f}" for x in c["times"])))
        for thr in THRESHOLDS:
            if c["err"] <= thr and c.get("main"):
                consider(thr, "gl", t, name)
    for c in nb:
        sc = f"{c['s_blur']:.3g} ({c['s_eps']:g})"
        name = f"{c['label']} {c['dtype']} scaling {c['s_eps']:g} (on eps)"
        if c["kind"] == "pub":
            t = statistics.median(c["times"])
            rows.append((c["label"], c["dtype"], sc, f"call, {c['iters']} it", t,
                         f"{c['err']:.2e} (dual {c['err_dual']:.2e})",
                         " ".join(f"{x:.3f}" for x in c["times"])))
            continue  # for comparison only: the best numbaot time is the runs' above
        setup = statistics.median(c["setup"])
        for thr in THRESHOLDS:
            r = c["reached"][thr]
            if r is None or len(c["t_thr"][thr]) < len(c["times"]):
                rows.append((c["label"], c["dtype"], sc, f"to <= {thr:g}", None,
                             f"not reached ({c['err']:.2e})", ""))
                continue
            t = statistics.median(c["t_thr"][thr])
            rows.append((c["label"], c["dtype"], sc, f"to <= {thr:g}, {r[1]} it", t, r[2],
                         " ".join(f"{x:.3f}" for x in c["t_thr"][thr])
                         + f" (setup {setup * 1e3:.1f} ms)"))
            consider(thr, "nb", t, name)
    print(f"### eps {reg}: n = {args.n}, medians of {args.repeats} interleaved repeats")
    print()
    print("scaling: the solver's own (GeomLoss: on blur; numbaot: on eps), the other "
          "convention in parentheses (GeomLoss s = numbaot s**2); error: relative to the "
          "reference OT_eps (GeomLoss: 2 x its value; numbaot multiscale: the dual value of "
          "the first iterate within the threshold; solve_sample: its res.value, and in "
          "parentheses the dual value mean(F) + mean(G) of its potentials); it: every "
          "iteration, those on the voxel centroids included")
    print()
    _common.print_table(["solver", "dtype", "scaling blur (eps)", "timed", "time (s)",
                         "error reached", "all times (s)"], rows)
    print()
    targets = {3.5e-2: 1.0, 2e-4: 0.5}
    srows = []
    for thr in THRESHOLDS:
        g, n = best[thr]["gl"], best[thr]["nb"]
        ratio = n[0] / g[0] if g and n else None
        srows.append((f"<= {thr:g}", f"{g[0]:.3f} s ({g[1]})" if g else "not reached",
                      f"{n[0]:.3f} s ({n[1]})" if n else "not reached", ratio,
                      f"<= {targets[thr]:g}", None if ratio is None else ratio <= targets[thr]))
    _common.print_table(["error", f"best GeomLoss {gl_backend}", "best numbaot multiscale",
                         "numbaot / GeomLoss", "target", "met"], srows)
    print()


if __name__ == "__main__":
    main()
