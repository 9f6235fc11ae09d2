"""Whole-call speed of numbaot's Sinkhorn solvers against POT, n = 32 ... 4096.

Where users are: one n x n problem per call, solved to POT's default
stopping threshold, as a training loop (minibatch OT) or a script calls it.
For each size n (doubling; square problems) and dtype (float64, float32)
this times, against POT's same function on the same inputs:

* ``sinkhorn``      ``numbaot.sinkhorn(a, b, M, reg)`` (default method)
                    vs ``ot.sinkhorn(a, b, M, reg)``
* ``sinkhorn_log``  ``numbaot.sinkhorn(..., method='sinkhorn_log')``
                    vs ``ot.sinkhorn(..., method='sinkhorn_log')``
* ``unbalanced``    ``numbaot.sinkhorn_unbalanced(a, b, M, reg, reg_m)``
                    vs ``ot.sinkhorn_unbalanced(a, b, M, reg, reg_m)``
* ``lazy``          ``numbaot.bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True)``
                    vs ``ot.bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True)``

and ``ot.emd(a, b, M)`` (exact OT, what small-problem users pick today) for
reference.  Problem: X, Y uniform random points in [0, 1]^2 (seeded),
M = sqeuclidean(X, Y) / max, uniform a and b, reg = 0.05, reg_m = 1, every
solver's default stopThr and numItermax.  Neither library scales the lazy
cost, so the lazy solvers get the points divided by sqrt(max): their
on-the-fly cost is the same M.  float32 inputs go to both libraries as the
same float32 arrays (POT then computes in float32; numbaot, today, in
float64 inside; the iteration counts show what that does).

Timing (time.perf_counter, garbage collector off while timing): warm-up
calls (compile, then until two calls agree) before anything is timed, then

1. back to back: k numbaot calls, then k POT calls; medians and their ratio;
2. interleaved: numbaot, POT, numbaot, POT, ...; the median of the pairwise
   ratios POT / numbaot.

k adapts to the call time (``--target-time`` of calls per cell and mode, at
least ``--min-reps``).  POT runs once per mode at n >= ``--pot-once-n`` or
when a call takes longer than ``--pot-once-s``; POT's sinkhorn_log and lazy
solvers are skipped above ``--pot-max-n``, and any POT call (ot.emd too)
whose time, extrapolated from the previous size as n^2, exceeds
``--pot-max-call`` is skipped: the table says "skipped", no number is made up.
Iteration counts come from one separate, untimed ``log=True`` call of each
library.

Floors (per size and dtype, measured here on the same matrix, so the cache
level that holds it is the one measured): numbaot's Knopp and unbalanced
kernels read K once per iteration, dim_a * dim_b * itemsize bytes; the
bandwidth is the best of ``M.sum()`` (NumPy, one thread) and a compiled
multi-pass read of M (Numba, 1 thread and all threads).  The log-domain
kernel also takes dim_a * dim_b exps per iteration, the lazy one 2 * dim_a *
dim_b exps (and as many costs) and reads no matrix; the ns per exp is
measured by a compiled loop of numbaot's polynomial exp
(``numbaot.cpu._math.fast_exp_ftz``; ``np.exp`` if that is not exposed) over
M.  floor fraction = iterations * floor per iteration / numbaot's time per
call (1.0: at the floor; the per-call overhead counts against it).

Usage::

    python benchmarks/bench_sizes.py                        # 32 ... 4096, float64 and float32
    python benchmarks/bench_sizes.py --quick                # 32 ... 512
    python benchmarks/bench_sizes.py --sizes 32 64 --dtypes float64 --threads 2
    python benchmarks/bench_sizes.py --overhead-only --threads 2   # per-call costs
"""

from __future__ import annotations

import argparse
import datetime
import gc
import glob
import math
import os
import shlex
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SOLVERS = ("sinkhorn", "sinkhorn_log", "unbalanced", "lazy")
SOLVER_TITLES = {
    "sinkhorn": "`sinkhorn` (default method 'sinkhorn')",
    "sinkhorn_log": "`sinkhorn(method='sinkhorn_log')`",
    "unbalanced": "`sinkhorn_unbalanced` (reg_m = {reg_m}, reg_type 'kl')",
    "lazy": "lazy point clouds: `bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True)`",
}
ALL_SIZES = [32, 64, 128, 256, 512, 1024, 2048, 4096]
QUICK_SIZES = [32, 64, 128, 256, 512]
MAX_REPS = 100_000


# --------------------------------------------------------------------------- #
# problem
# --------------------------------------------------------------------------- #


def make_problem(n, dtype, seed=0):
    """The n x n problem of every solver, and the points of the lazy one.

    Same random stream as ``_common.make_problem(n, dtype=dtype, seed=seed)``
    (so the same M): X, Y uniform in [0, 1]^2, M = sqeuclidean / max, uniform
    a, b.  The points returned are scaled by 1 / sqrt(max), so that their
    sqeuclidean cost is M.
    """
    rng = np.random.default_rng(seed)
    xs = rng.random((n, 2))
    xt = rng.random((n, 2))
    M = C.sqeuclidean(xs, xt)
    mx = M.max()
    M /= mx
    s = 1.0 / math.sqrt(mx)
    X = np.ascontiguousarray(xs * s, dtype=dtype)
    Y = np.ascontiguousarray(xt * s, dtype=dtype)
    err = np.max(np.abs(C.sqeuclidean(xs * s, xt * s) - M))
    assert err < 1e-12, f"scaled points do not reproduce M ({err})"
    a = np.full(n, 1.0 / n, dtype=dtype)
    b = np.full(n, 1.0 / n, dtype=dtype)
    return {"a": a, "b": b, "M": np.ascontiguousarray(M, dtype=dtype), "X": X, "Y": Y}


def solver_calls(name, nb, ot, P, reg, reg_m):
    """(numbaot call, POT call), each ``f(log=False)``, on the same inputs."""
    a, b, M, X, Y = P["a"], P["b"], P["M"], P["X"], P["Y"]
    if name == "sinkhorn":
        return (lambda log=False: nb.sinkhorn(a, b, M, reg, log=log),
                lambda log=False: ot.sinkhorn(a, b, M, reg, log=log))
    if name == "sinkhorn_log":
        return (lambda log=False: nb.sinkhorn(a, b, M, reg, method="sinkhorn_log", log=log),
                lambda log=False: ot.sinkhorn(a, b, M, reg, method="sinkhorn_log", log=log))
    if name == "unbalanced":
        return (lambda log=False: nb.sinkhorn_unbalanced(a, b, M, reg, reg_m, log=log),
                lambda log=False: ot.sinkhorn_unbalanced(a, b, M, reg, reg_m, log=log))
    if name == "lazy":
        return (lambda log=False: nb.bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True,
                                                                 log=log),
                lambda log=False: ot.bregman.empirical_sinkhorn2(X, Y, reg, isLazy=True,
                                                                 log=log))
    raise ValueError(name)


def iterations_run(name, lg):
    """Iterations a solve ran, from its log dict.  Balanced and lazy solvers
    (both libraries) store ``niter`` = the index of the last iteration, so they
    ran niter + 1; the unbalanced ones have no ``niter`` and append to ``err``
    every iteration."""
    if not isinstance(lg, dict):
        return None
    if name == "unbalanced":
        return len(lg["err"]) if "err" in lg else None
    v = lg.get("niter")
    return None if v is None else int(v) + 1


# --------------------------------------------------------------------------- #
# timing
# --------------------------------------------------------------------------- #


class _Quiet:
    """No warnings and no garbage collector while timing (one collection
    before), so that a collection does not land inside a microsecond call."""

    def __enter__(self):
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")
        gc.collect()
        self._gc = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self._gc:
            gc.enable()
        self._w.__exit__(*exc)
        return False


def warm(fn, max_calls=20, budget=3.0):
    """One call (compilation, the disk-cache load), then calls until two
    consecutive ones agree within 25 % (at most ``max_calls`` calls or
    ``budget`` s after the first); return the time of the last call, the
    estimate that sets the repetitions.  Covers the first parallel-region
    launches and other first-call effects."""
    times = []
    with _Quiet():
        fn()
        t_start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
            if len(times) >= 2 and max(times[-2:]) <= 1.25 * min(times[-2:]):
                break
            if len(times) >= max_calls or time.perf_counter() - t_start > budget:
                break
    return times[-1]


def reps_for(t_call, target, min_reps):
    return int(min(MAX_REPS, max(min_reps, target / max(t_call, 1e-7))))


def run_k(fn, k):
    """``k`` timed calls of ``fn`` (seconds each)."""
    out = []
    with _Quiet():
        for _ in range(k):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def run_pairs(f_nb, f_pot, k):
    """``k`` pairs (numbaot call, POT call), alternating; times of each."""
    t_nb, t_pot = [], []
    with _Quiet():
        for _ in range(k):
            t0 = time.perf_counter()
            f_nb()
            t1 = time.perf_counter()
            f_pot()
            t2 = time.perf_counter()
            t_nb.append(t1 - t0)
            t_pot.append(t2 - t1)
    return t_nb, t_pot


def log_call(fn):
    """One untimed ``fn(log=True)``: (result, log, wall s, warning texts)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        res, lg = fn(log=True)
        dt = time.perf_counter() - t0
    return res, lg, dt, [str(x.message) for x in w]


# --------------------------------------------------------------------------- #
# floors
# --------------------------------------------------------------------------- #

_K = {}


def _kernels():
    """Compiled multi-pass read and exp loops, sequential (one thread, no
    parallel launch) and parallel (one chunk per thread).  Each call sweeps
    the array (each chunk its contiguous slice) ``reps`` times, so the slice
    stays in whatever cache level holds it; the accumulator is carried across
    passes, so no pass can be hoisted out of the loop."""
    if _K:
        return _K
    import numba
    from numba import prange

    try:
        from numbaot.cpu._math import fast_exp_ftz as vexp
        _K["exp_name"] = "numbaot.cpu._math.fast_exp_ftz (float64 polynomial)"
    except Exception:  # noqa: BLE001 - fall back to Numba's np.exp
        vexp = numba.njit(inline="always")(lambda x: np.exp(x))
        _K["exp_name"] = "np.exp (Numba, libm)"

    @numba.njit(fastmath=True, cache=False)
    def read_seq(x, reps):
        s = x[0] - x[0]  # zero in x's own dtype: float32 is summed in float32
        for _ in range(reps):
            for i in range(x.size):
                s += x[i]
        return s

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def read_par(x, reps, nchunks):
        n = x.size
        out = np.zeros(nchunks)
        for t in prange(nchunks):
            lo = t * n // nchunks
            hi = (t + 1) * n // nchunks
            xs = x[lo:hi]  # a view from 0: a loop from a signed, non-constant
            s = x[0] - x[0]  # start keeps Numba's wrap-around and does not vectorise
            for _ in range(reps):
                for i in range(xs.size):
                    s += xs[i]
            out[t] = s
        return out.sum()

    @numba.njit(fastmath=True, cache=False)
    def exp_seq(x, scale, reps):
        s = 0.0
        for _ in range(reps):
            for i in range(x.size):
                s += vexp(np.float64(x[i]) * scale)
        return s

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def exp_par(x, scale, reps, nchunks):
        n = x.size
        out = np.zeros(nchunks)
        for t in prange(nchunks):
            lo = t * n // nchunks
            hi = (t + 1) * n // nchunks
            xs = x[lo:hi]  # (see read_par)
            s = 0.0
            for _ in range(reps):
                for i in range(xs.size):
                    s += vexp(np.float64(xs[i]) * scale)
            out[t] = s
        return out.sum()

    _K.update(read_seq=read_seq, read_par=read_par, exp_seq=exp_seq, exp_par=exp_par)
    return _K


def per_pass(call, reps, calls=3):
    """Seconds per pass of ``call(r)`` (r passes in one compiled call), from
    the difference of r and 3 r passes (best of ``calls`` each, interleaved),
    so that the call and parallel-launch overhead cancel; t(3 r) / (3 r) if
    noise makes the difference non-positive."""
    call(1)
    t1 = t3 = math.inf
    with _Quiet():
        for _ in range(calls):
            for r in (reps, 3 * reps):
                t0 = time.perf_counter()
                call(r)
                dt = time.perf_counter() - t0
                if r == reps:
                    t1 = min(t1, dt)
                else:
                    t3 = min(t3, dt)
    d = (t3 - t1) / (2 * reps)
    return d if d > 0 else t3 / (3 * reps)


def cache_levels():
    """[(level name, bytes, private?)] of cpu0's data caches, from sysfs."""
    out = []
    for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(os.path.join(d, "type")) as f:
                typ = f.read().strip()
            if typ == "Instruction":
                continue
            with open(os.path.join(d, "level")) as f:
                lvl = int(f.read())
            with open(os.path.join(d, "size")) as f:
                sz = f.read().strip()
            with open(os.path.join(d, "shared_cpu_list")) as f:
                shared = f.read().strip()
        except OSError:
            continue
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(sz[-1:], 1)
        nbytes = int(sz.rstrip("KMG")) * mult
        private = ("," not in shared) and ("-" not in shared)
        out.append((f"L{lvl}", nbytes, private))
    return out


def holding_level(nbytes, nthreads, levels):
    """The smallest cache level that holds ``nbytes`` split over ``nthreads``
    (per core for private levels), else 'DRAM'."""
    for name, size, private in levels:
        need = nbytes / max(1, nthreads) if private else nbytes
        if need <= size:
            return name
    return "DRAM" if levels else "?"


def measure_floors(M, reg, nthreads, levels, pass_time=0.01):
    """Bandwidth and exp cost on the matrix M itself (see module docstring)."""
    import numba

    K = _kernels()
    flat = np.ascontiguousarray(M).ravel()
    nbytes = flat.nbytes
    scale = -1.0 / reg
    # NumPy M.sum(), one thread: best of enough calls for ~pass_time
    M.sum()
    t0 = time.perf_counter()
    M.sum()
    t_one = max(time.perf_counter() - t0, 1e-7)
    t_np = min(run_k(M.sum, reps_for(t_one, pass_time, 5)))
    # compiled passes: ~pass_time per call at 20 GB/s and 1 ns per exp
    reps = max(1, int(pass_time * 20e9 / max(nbytes, 1)))
    ereps = max(1, int(pass_time / (1e-9 * flat.size)))
    t_read = {1: per_pass(lambda r: K["read_seq"](flat, r), reps)}
    t_exp = {1: per_pass(lambda r: K["exp_seq"](flat, scale, r), ereps)}
    if nthreads > 1:
        t_read[nthreads] = per_pass(lambda r: K["read_par"](flat, r, nthreads), reps)
        t_exp[nthreads] = per_pass(lambda r: K["exp_par"](flat, scale, r, nthreads), ereps)
    assert numba.get_num_threads() == nthreads
    t_pass = min(t_np, *t_read.values())
    t_exp_best = min(t_exp.values())
    return {
        "bytes": nbytes,
        "level": holding_level(nbytes, nthreads, levels),
        "t_numpy": t_np,
        "t_read_1t": t_read[1],
        "t_read_nt": t_read.get(nthreads),
        "bw": nbytes / t_pass,
        "floor_read": t_pass,  # one read of the matrix (= of K: same size)
        "t_exp_1t": t_exp[1],
        "t_exp_nt": t_exp.get(nthreads),
        "ns_per_exp": 1e9 * t_exp_best / flat.size,
        "floor_exp": t_exp_best,  # one read of M + dim_a * dim_b exps
    }


# --------------------------------------------------------------------------- #
# one cell
# --------------------------------------------------------------------------- #


def _err(exc):
    return f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"


def _rel(res_nb, res_pot):
    try:
        return C.rel_diff(np.asarray(res_nb), np.asarray(res_pot))
    except Exception:  # noqa: BLE001
        return None


def bench_cell(name, n, f_nb, f_pot, args, pot_state):
    """Time one solver at one size and dtype.  ``pot_state`` carries POT's
    last measured call time per (solver, dtype) for the extrapolation."""
    r = {"name": name, "n": n}
    # numbaot: log call (iterations, compile of the log variant), warm-up
    try:
        res_nb, lg_nb, _, w_nb = log_call(f_nb)
        r["it_nb"] = iterations_run(name, lg_nb)
        r["nc_nb"] = any("converge" in s for s in w_nb)
        t_nb = warm(f_nb)
    except Exception as exc:  # noqa: BLE001 - report, don't die
        r["error_nb"] = _err(exc)
        return r
    # POT: skip rules, then a log call (iterations; it is also POT's warm-up)
    prev = pot_state.get("last")
    pot_skip = None
    if name in ("sinkhorn_log", "lazy") and n > args.pot_max_n:
        pot_skip = f"skipped (n > --pot-max-n {args.pot_max_n})"
    elif prev is not None:
        est = prev[1] * (n / prev[0]) ** 2
        if est > args.pot_max_call:
            pot_skip = f"skipped (~{est:.0f} s/call est.)"
    if pot_skip is None:
        try:
            res_pot, lg_pot, t_log, w_pot = log_call(f_pot)
        except Exception as exc:  # noqa: BLE001
            pot_skip = _err(exc)
        else:
            r["it_pot"] = iterations_run(name, lg_pot)
            r["nc_pot"] = any("converge" in s for s in w_pot)
            r["rel"] = _rel(res_nb, res_pot)
            pot_state["last"] = (n, t_log)
            if t_log > args.pot_max_call:
                pot_skip = f"skipped (log call took {t_log:.0f} s)"
    if pot_skip is not None:
        r["pot_skip"] = pot_skip
        k = reps_for(t_nb, args.target_time, args.min_reps)
        r["t_nb"] = statistics.median(run_k(f_nb, k))
        r["k"] = (k, 0, 0)
        return r
    once = n >= args.pot_once_n or t_log > args.pot_once_s
    t_pot = t_log if once else warm(f_pot, max_calls=4, budget=1.0)
    pot_state["last"] = (n, t_pot)
    k_nb = reps_for(t_nb, args.target_time, args.min_reps)
    k_pot = 1 if once else reps_for(t_pot, args.target_time, args.min_reps)
    k_pair = 1 if once else reps_for(t_nb + t_pot, args.target_time, args.min_reps)
    # (1) back to back
    r["t_nb"] = statistics.median(run_k(f_nb, k_nb))
    r["t_pot"] = statistics.median(run_k(f_pot, k_pot))
    # (2) interleaved
    p_nb, p_pot = run_pairs(f_nb, f_pot, k_pair)
    r["ratio_il"] = statistics.median([tp / tn for tn, tp in zip(p_nb, p_pot)])
    r["t_nb_il"] = statistics.median(p_nb)
    r["t_pot_il"] = statistics.median(p_pot)
    r["k"] = (k_nb, k_pot, k_pair)
    return r


def bench_emd(P, n, args, emd_state):
    import ot

    a, b, M = P["a"], P["b"], P["M"]
    prev = emd_state.get("last")
    if prev is not None:
        est = prev[1] * (n / prev[0]) ** 2
        if est > args.pot_max_call:
            return f"skipped (~{est:.0f} s est.)"
    f = lambda: ot.emd(a, b, M)  # noqa: E731
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        f()
        t = time.perf_counter() - t0
    emd_state["last"] = (n, t)
    flag = " (numItermax reached)" if any("numItermax" in str(x.message) for x in w) else ""
    if n >= args.pot_once_n or t > args.pot_once_s:
        return f"{C.fmt(1e3 * t)}{flag}"
    t = warm(f, max_calls=4, budget=1.0)
    t = statistics.median(run_k(f, reps_for(t, args.target_time, args.min_reps)))
    emd_state["last"] = (n, t)
    return f"{C.fmt(1e3 * t)}{flag}"


# --------------------------------------------------------------------------- #
# report
# --------------------------------------------------------------------------- #


def _ratio(x, y):
    return None if (x is None or y is None or y <= 0) else x / y


def table_row(r, dtname, fl, emd_ms):
    name, n = r["name"], r["n"]
    if "error_nb" in r:
        return [n, dtname, "-", r["error_nb"]] + ["-"] * 10
    t_nb = r["t_nb"]
    t_pot = r.get("t_pot")
    pot_ms = r.get("pot_skip") or 1e3 * t_pot

    def it(v, nc):
        return "-" if v is None else f"{v}{'!' if nc else ''}"

    iters = f"{it(r.get('it_nb'), r.get('nc_nb'))} / {it(r.get('it_pot'), r.get('nc_pot'))}"
    nit = r.get("it_nb") or None
    per_it = None if not nit else t_nb / nit
    size = n * n
    if name == "lazy":
        floor_rd = None
        floor_exp = 2.0 * fl["ns_per_exp"] * 1e-9 * size
    else:
        floor_rd = fl["floor_read"]
        floor_exp = fl["floor_exp"] if name == "sinkhorn_log" else None

    def us(v):
        return None if v is None else 1e6 * v

    k_nb, k_pot, k_pair = r["k"]
    row = [
        n, dtname, pot_ms, 1e3 * t_nb,
        _ratio(t_pot, t_nb), r.get("ratio_il"),
        iters, us(per_it), us(floor_rd),
        _ratio(floor_rd, per_it) if floor_rd else "-",
    ]
    if name in ("sinkhorn_log", "lazy"):
        row += [us(floor_exp), _ratio(floor_exp, per_it)]
    row += [emd_ms, r.get("rel"), f"{k_nb} / {k_pot} / {k_pair}"]
    return row


def table_headers(name):
    h = ["n", "dtype", "POT ms", "numbaot ms", "ratio back-to-back", "ratio interleaved",
         "iters numbaot / POT", "numbaot µs/it", "floor µs/it (read)", "floor fraction"]
    if name in ("sinkhorn_log", "lazy"):
        h += ["exp floor µs/it", "exp floor fraction"]
    h += ["ot.emd ms", "result rel diff", "calls nb / POT / pairs"]
    return h


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="problem sizes n (n x n); default 32 64 ... 4096 (doubling)")
    p.add_argument("--quick", action="store_true",
                   help="sizes 32 64 128 256 512 (unless --sizes is given)")
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"],
                   choices=["float64", "float32"], help="default: float64 float32")
    p.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=SOLVERS,
                   help="default: all four")
    p.add_argument("--threads", type=int, default=None,
                   help="numba.set_num_threads(N) for numbaot and the floors; "
                        "default: all (NUMBA_NUM_THREADS). POT's BLAS threads are not "
                        "touched (set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS for that)")
    p.add_argument("--reg", type=float, default=0.05,
                   help="entropic regularisation (M has max 1); default 0.05")
    p.add_argument("--reg-m", type=float, default=1.0,
                   help="marginal relaxation of sinkhorn_unbalanced; default 1.0")
    p.add_argument("--target-time", type=float, default=0.3,
                   help="seconds of calls per cell and timing mode (sets the repetitions); "
                        "default 0.3")
    p.add_argument("--min-reps", type=int, default=3,
                   help="fewest timed calls per library and mode (unless POT runs once); "
                        "default 3")
    p.add_argument("--pot-once-n", type=int, default=1024,
                   help="from this n on, POT (and ot.emd) is timed with one call per mode; "
                        "default 1024")
    p.add_argument("--pot-once-s", type=float, default=1.0,
                   help="POT (and ot.emd) is also timed once when one call takes longer "
                        "than this (s); default 1.0")
    p.add_argument("--pot-max-n", type=int, default=2048,
                   help="skip POT's sinkhorn_log and lazy solver above this n; default 2048")
    p.add_argument("--pot-max-call", type=float, default=10.0,
                   help="skip a POT call (ot.emd too) whose time, extrapolated as n^2 from "
                        "the previous size, exceeds this (s); default 10")
    p.add_argument("--no-emd", action="store_true", help="do not time ot.emd")
    p.add_argument("--seed", type=int, default=0, help="seed of the random points; default 0")
    p.add_argument("--overhead-only", action="store_true",
                   help="only the per-call costs at n = 16, 64, 128 (first section)")
    args = p.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else ALL_SIZES)

    import numba
    import ot

    nb = C.import_numbaot("bregman")
    if args.threads:
        numba.set_num_threads(args.threads)
    nthreads = numba.get_num_threads()

    C.start_report("bench_sizes")
    now = datetime.datetime.now(datetime.timezone.utc)
    cmd = "python " + shlex.join(sys.argv) if argv is None else \
        "python benchmarks/bench_sizes.py " + shlex.join(argv)
    print(f"Measured {now:%Y-%m-%d, %H:%M} UTC, {nthreads} numba thread"
          f"{'s' if nthreads != 1 else ''}. `{cmd}`")
    print()
    levels = cache_levels()
    print("Problem: X, Y uniform in [0,1]^2 (seed %d), M = sqeuclidean / max, uniform a, b; "
          "reg = %g, reg_m = %g (unbalanced); default stopThr and numItermax of every solver; "
          "lazy solvers on X, Y / sqrt(max) (the same M). float32 rows: the same float32 "
          "arrays go to POT and numbaot. Data caches: %s."
          % (args.seed, args.reg, args.reg_m,
             ", ".join(f"{nm} {sz // 1024} KiB{' per core' if pr else ' shared'}"
                       for nm, sz, pr in levels) or "unknown"))
    print()

    print_overhead(nb, ot)
    if args.overhead_only:
        return 0

    results = {s: [] for s in args.solvers}
    states = {}  # POT's (and ot.emd's) last measured call time, per solver and dtype
    floor_rows = []
    for n in sizes:
        for dtname in args.dtypes:
            P = make_problem(n, np.dtype(dtname), args.seed)
            fl = measure_floors(P["M"], args.reg, nthreads, levels)
            floor_rows.append([n, dtname, fl["bytes"] / 1e3, fl["level"],
                               1e6 * fl["t_numpy"], 1e6 * fl["t_read_1t"],
                               fl["t_read_nt"] and 1e6 * fl["t_read_nt"], fl["bw"] / 1e9, 1e6 * fl["floor_read"],
                               fl["ns_per_exp"], 1e6 * fl["floor_exp"]])
            emd_ms = "-" if args.no_emd else bench_emd(P, n, args,
                                                       states.setdefault(("emd", dtname), {}))
            for name in args.solvers:
                print(f"... n={n} {dtname} {name}", file=sys.stderr, flush=True)
                f_nb, f_pot = solver_calls(name, nb, ot, P, args.reg, args.reg_m)
                state = states.setdefault((name, dtname), {})
                r = bench_cell(name, n, f_nb, f_pot, args, state)
                row = table_row(r, dtname, fl, emd_ms)
                results[name].append(row)
                print("    " + " | ".join(C.fmt(c) for c in row), file=sys.stderr, flush=True)
            del P

    print("## Floors per iteration, measured on each M (K has the same size)")
    print()
    C.print_table(["n", "dtype", "KB of M", "held in", "M.sum() µs", "compiled read µs (1 thr)",
                   f"compiled read µs ({nthreads} thr)", "GB/s used", "read floor µs",
                   "ns per exp", "exp floor µs (n² exps)"], floor_rows)
    print()
    print(f"Compiled passes: r and 3r sweeps of M inside one call, time per pass from the "
          f"difference (call and parallel-launch overhead cancel); 1 thread: a sequential "
          f"loop, {nthreads} threads: a prange over {nthreads} chunks. Exp: "
          f"{_kernels()['exp_name']} of M / -reg (float32 M converted to float64), best of "
          f"1 and {nthreads} threads. Read floor: the best of M.sum() (one call, its call "
          f"overhead included) and the compiled read passes.")
    print()
    for name in args.solvers:
        print("## " + SOLVER_TITLES[name].format(reg_m=args.reg_m))
        print()
        C.print_table(table_headers(name), results[name])
        print()
    print("Notes: times are medians per call (ms). ratio = POT time / numbaot time "
          "(> 1: numbaot faster); back-to-back: k numbaot calls then k POT calls; "
          "interleaved: median of the per-pair ratios of alternating calls. iters: "
          "iterations run, from a separate untimed log=True call (balanced and lazy: "
          "log['niter'] + 1; unbalanced: len(log['err'])); '!' = that call warned "
          "that it did not converge. floor µs/it (read) = one read of K (numbaot's Knopp "
          "and unbalanced kernels; the log kernel reads M) at the bandwidth measured on "
          "this M; exp floor = n² exps per iteration (sinkhorn_log) or 2·n² (lazy, "
          "costs not counted) at the measured ns per exp; floor fraction = floor "
          "µs/it / numbaot µs/it (per-call overhead included). POT's sinkhorn reads K "
          "twice per iteration (two gemv), its log and lazy solvers take 2·n² libm exps. "
          "result rel diff: max|nb - POT| / max|POT| of the plans (lazy: of the losses) "
          "from the log=True calls. calls: timed calls of numbaot and POT back to back, "
          "and interleaved pairs. float32: POT computes in float32, numbaot in float64 "
          "inside, so their iteration counts can differ. 'skipped': POT not run "
          "(--pot-max-n, --pot-max-call); no figure is estimated.")
    return 0


def print_overhead(nb, ot, sizes=(16, 64, 128), rounds=5, round_time=0.1):
    """Per-call costs at minibatch sizes (float64, n x n, uniform weights, M
    uniform in [0, 1), reg 0.05): ``sinkhorn`` and ``sinkhorn2`` with
    ``numItermax=1`` (``sinkhorn`` also with POT's empty weights ``[]``),
    ``sinkhorn(method='sinkhorn_log')`` to the default
    stopThr, ``solve`` (default, and ``max_iter=1`` with and without the
    weights, and unbalanced),
    ``sinkhorn2_value_and_grad`` with ``numItermax=1`` and
    ``partial.entropic_partial_wasserstein`` (m = 0.8) with ``numItermax=1``
    and with POT's defaults (1000 iterations).  numbaot and POT (where POT
    has the call and it takes less than 50 ms) alternate by rounds of at
    least ``round_time`` seconds; the best round's mean per call (the least
    disturbed by other work on the machine)."""
    import warnings

    import importlib

    importlib.import_module("numbaot.partial")  # nb.partial below
    importlib.import_module("ot.partial")

    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        a = np.full(n, 1.0 / n)
        M = rng.random((n, n))
        calls = [
            ("sinkhorn(numItermax=1)", lambda L: L.sinkhorn(a, a, M, 0.05, numItermax=1), True),
            ("sinkhorn2(numItermax=1)", lambda L: L.sinkhorn2(a, a, M, 0.05, numItermax=1),
             True),
            ("sinkhorn([], [], M, numItermax=1)",
             lambda L: L.sinkhorn([], [], M, 0.05, numItermax=1), True),
            ("sinkhorn(method='sinkhorn_log')",
             lambda L: L.sinkhorn(a, a, M, 0.05, method="sinkhorn_log"), True),
            ("solve(M, a, b, reg)", lambda L: L.solve(M, a, a, reg=0.05), True),
            ("solve(M, a, b, reg, max_iter=1)",
             lambda L: L.solve(M, a, a, reg=0.05, max_iter=1), True),
            ("solve(M, reg, max_iter=1) (uniform weights)",
             lambda L: L.solve(M, reg=0.05, max_iter=1), True),
            ("solve(M, reg, unbalanced=1, max_iter=1)",
             lambda L: L.solve(M, reg=0.05, unbalanced=1.0, max_iter=1), True),
            ("sinkhorn2_value_and_grad(numItermax=1)",
             lambda L: L.sinkhorn2_value_and_grad(a, a, M, 0.05, numItermax=1), False),
            ("partial.entropic_partial_wasserstein(numItermax=1)",
             lambda L: L.partial.entropic_partial_wasserstein(a, a, M, 0.05, m=0.8,
                                                              numItermax=1), True),
            ("partial.entropic_partial_wasserstein (1000 iterations)",
             lambda L: L.partial.entropic_partial_wasserstein(a, a, M, 0.05, m=0.8), True),
        ]
        for label, call, with_pot in calls:
            libs = [nb] + ([ot] if with_pot else [])
            best, reps = {}, {}
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                for lib in list(libs):
                    call(lib)
                    t0 = time.perf_counter()
                    call(lib)
                    t1 = time.perf_counter() - t0
                    if lib is ot and t1 > 0.05:
                        libs.remove(ot)
                    reps[lib] = max(3, int(round_time / max(t1, 1e-7)))
                for _ in range(rounds):
                    for lib in libs:
                        t0 = time.perf_counter()
                        for _ in range(reps[lib]):
                            call(lib)
                        best[lib] = min(best.get(lib, np.inf),
                                        (time.perf_counter() - t0) / reps[lib])
            pot_us = 1e6 * best[ot] if ot in best else None
            rows.append([f"{label}, n = {n}", "-" if pot_us is None else pot_us,
                         1e6 * best[nb], "-" if pot_us is None else best[ot] / best[nb]])
    print("## Per-call cost at minibatch sizes")
    print()
    C.print_table(["call", "POT µs", "numbaot µs", "ratio"], rows)
    print()
    print(f"Best of {rounds} rounds of at least {round_time} s each, the two libraries "
          "alternating by rounds ('-': POT has no such call, or a call takes over 50 ms).")
    print()


if __name__ == "__main__":
    sys.exit(main())
