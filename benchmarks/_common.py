"""Shared helpers for the numbaot benchmark scripts.

Nothing in here asserts on timings: the scripts print tables, a person reads
them.  Everything is plain NumPy / Numba so the helpers work even while
``numbaot`` itself is not importable.
"""

from __future__ import annotations

import datetime
import gc
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np

# Benchmark the in-tree package: put the repository root ahead of site-packages
# (scripts run as ``python benchmarks/x.py`` only get benchmarks/ on sys.path).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(1, REPO_ROOT)

# --------------------------------------------------------------------------- #
# timing
# --------------------------------------------------------------------------- #


def time_call(fn, repeats=5, warmup=1, max_time=None):
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed ones.

    Returns a dict with ``best``, ``median`` and ``all`` (seconds) and
    ``result`` (the return value of the last call).  Warnings raised by ``fn``
    (e.g. "Sinkhorn did not converge") are silenced.  With ``max_time`` (s),
    the number of repeats is cut (to no fewer than 2) when the warm-up call
    says ``repeats`` calls would take longer than that.
    """
    result = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_warm = None
        for _ in range(warmup):
            t0 = time.perf_counter()
            result = fn()
            t_warm = time.perf_counter() - t0
        if max_time is not None and t_warm is not None and t_warm * repeats > max_time:
            repeats = max(2, min(repeats, int(max_time / max(t_warm, 1e-9))))
        times = []
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
    return {
        "best": min(times),
        "median": statistics.median(times),
        "all": times,
        "result": result,
    }


def time_pair(fa, fb, repeats=5, warmup=1, max_time=None):
    """Time ``fa()`` and ``fb()`` alternately (a, b, a, b, ...), so that a
    slow or fast phase of the machine falls on both alike.

    Returns ``(ta, tb, ratios)``: ``ta`` and ``tb`` as ``time_call`` returns
    them (``best``, ``median``, ``all``, ``result``) and ``ratios`` the
    per-pair ``tb / ta`` (``len == repeats``).  With ``max_time`` (s) the
    number of pairs is cut (to no fewer than 2) when the warm-up calls say
    they would take longer.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_warm = 0.0
        for _ in range(warmup):
            t0 = time.perf_counter()
            fa()
            fb()
            t_warm = time.perf_counter() - t0
        if max_time is not None and warmup and t_warm * repeats > max_time:
            repeats = max(2, min(repeats, int(max_time / max(t_warm, 1e-9))))
        out = ({"all": []}, {"all": []})
        for _ in range(repeats):
            for fn, rec in zip((fa, fb), out):
                gc.collect()
                t0 = time.perf_counter()
                rec["result"] = fn()
                rec["all"].append(time.perf_counter() - t0)
    for rec in out:
        rec["best"] = min(rec["all"])
        rec["median"] = statistics.median(rec["all"])
    ratios = [b / a for a, b in zip(out[0]["all"], out[1]["all"])]
    return out[0], out[1], ratios


def per_iteration(make_fn, n1, n2, repeats=5, warmup=1, max_time=None):
    """Per-iteration cost from two iteration counts.

    ``make_fn(n)`` must return a zero-argument callable running exactly ``n``
    iterations.  The per-iteration time is ``(t(n2) - t(n1)) / (n2 - n1)``
    computed on the best-of-``repeats`` times (the setup cost, e.g. forming
    ``K = exp(-M/reg)`` and the final plan, cancels).  The setup estimate is
    ``t(n1) - n1 * per_iter``.  The n1 and n2 calls are interleaved so that a
    burst of other load affects both alike.  With ``max_time`` (s) the number
    of repeats is cut (to no fewer than 2) when the warm-up calls say the
    measurement would take longer.

    Returns a dict: ``per_iter`` (s), ``per_iter_median``, ``setup`` (s),
    ``t1``, ``t2`` (lists of times) and ``n1``, ``n2``.
    """
    if not n2 > n1 >= 0:
        raise ValueError("need n2 > n1 >= 0")
    r1, r2, _ = time_pair(make_fn(n1), make_fn(n2), repeats, warmup, max_time)
    t1, t2 = r1["all"], r2["all"]
    per = (min(t2) - min(t1)) / (n2 - n1)
    per_med = (statistics.median(t2) - statistics.median(t1)) / (n2 - n1)
    return {
        "per_iter": per,
        "per_iter_median": per_med,
        "setup": min(t1) - n1 * per,
        "t1": t1,
        "t2": t2,
        "n1": n1,
        "n2": n2,
        "repeats": len(t1),
    }


# --------------------------------------------------------------------------- #
# problems
# --------------------------------------------------------------------------- #


def sqeuclidean(x, y):
    """Squared Euclidean distance matrix, float64, clipped at 0."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    d = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * (x @ y.T)
    np.maximum(d, 0.0, out=d)
    return d


def random_hist(rng, n, n_hists=None, uniform=False, dtype=np.float64):
    """A histogram (n,) or a stack of histograms (n, n_hists), positive, sums to 1."""
    shape = (n,) if n_hists is None else (n, n_hists)
    if uniform:
        h = np.full(shape, 1.0 / n)
    else:
        h = rng.random(shape) + 0.1  # bounded away from 0
        h /= h.sum(axis=0, keepdims=True)
    return np.ascontiguousarray(h, dtype=dtype)


def make_problem(n, m=None, dtype=np.float64, seed=0, uniform=True, dim=2):
    """Random OT problem: points in ``dim``-D, M = sqeuclidean / max(M).

    Returns ``(a, b, M)`` as C-contiguous arrays of ``dtype``; a, b are uniform
    (``uniform=True``) or random positive histograms.
    """
    m = n if m is None else m
    rng = np.random.default_rng(seed)
    xs = rng.random((n, dim))
    xt = rng.random((m, dim))
    M = sqeuclidean(xs, xt)
    M /= M.max()
    a = random_hist(rng, n, uniform=uniform, dtype=dtype)
    b = random_hist(rng, m, uniform=uniform, dtype=dtype)
    return a, b, np.ascontiguousarray(M, dtype=dtype)


def make_batch_problem(n, m=None, n_hists=100, dtype=np.float64, seed=0, dim=2):
    """Paired batch: a (n, n_hists), b (m, n_hists) random positive, one shared M."""
    m = n if m is None else m
    rng = np.random.default_rng(seed)
    xs = rng.random((n, dim))
    xt = rng.random((m, dim))
    M = sqeuclidean(xs, xt)
    M /= M.max()
    a = random_hist(rng, n, n_hists, dtype=dtype)
    b = random_hist(rng, m, n_hists, dtype=dtype)
    return a, b, np.ascontiguousarray(M, dtype=dtype)


def rel_diff(x, y):
    """max |x - y| / max |y| (0 when both are 0); NaN-aware (returns nan)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    den = np.max(np.abs(y))
    num = np.max(np.abs(x - y))
    if den == 0:
        return float(num)
    return float(num / den)


# --------------------------------------------------------------------------- #
# machine info
# --------------------------------------------------------------------------- #


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
    except OSError:
        return platform.processor() or "unknown CPU", ""
    model, flags = "unknown CPU", ""
    for line in txt.splitlines():
        if line.startswith("model name") and model == "unknown CPU":
            model = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = line.split(":", 1)[1]
    simd = [f for f in ("avx2", "avx512f", "fma") if f in flags.split()]
    return model, "+".join(simd)


def _version(modname, where=False):
    try:
        mod = __import__(modname)
        v = getattr(mod, "__version__", "?")
        if where:
            v += f" ({os.path.dirname(getattr(mod, '__file__', '') or '?')})"
        return v
    except Exception as exc:  # noqa: BLE001 - reporting only
        return f"not importable ({type(exc).__name__})"


def machine_info():
    """One line describing the machine and the software versions."""
    model, simd = _cpu_model()
    try:
        import numba

        nthreads = numba.get_num_threads()
        layer = numba.config.THREADING_LAYER
    except Exception:  # noqa: BLE001
        nthreads, layer = "?", "?"
    env = {
        k: os.environ[k]
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
        if k in os.environ
    }
    parts = [
        f"CPU: {model} ({simd})",
        f"cores: {os.cpu_count()}",
        f"numba threads: {nthreads} ({layer})",
        f"python {platform.python_version()}",
        f"numpy {np.__version__}",
        f"numba {_version('numba')}",
        f"POT {_version('ot')}",
        f"numbaot {_version('numbaot', where=True)}",
        f"date {datetime.datetime.now().isoformat(timespec='seconds')}",
    ]
    if env:
        parts.append("env " + " ".join(f"{k}={v}" for k, v in env.items()))
    try:
        parts.append("load avg %.2f %.2f %.2f" % os.getloadavg())
    except OSError:
        pass
    return " | ".join(parts)


# --------------------------------------------------------------------------- #
# bandwidth / floors
# --------------------------------------------------------------------------- #

_KERNELS = {}


def _kernels():
    """Compile (lazily) the Numba reference kernels used for the floors."""
    if not _KERNELS:
        import numba
        from numba import prange

        # the same vectorised exp as numbaot's log-domain kernels, so that the
        # exp floor measures exactly the arithmetic those kernels perform
        from numbaot.cpu._math import fast_exp_ftz as vexp

        @numba.njit(parallel=True, fastmath=True)
        def psum(x):
            s = 0.0
            for i in prange(x.size):
                s += x[i]
            return s

        @numba.njit(parallel=True, fastmath=True)
        def pexpsum_libm(x, scale):
            s = 0.0
            for i in prange(x.size):
                s += np.exp(np.float64(x[i]) * scale)
            return s

        @numba.njit(parallel=True, fastmath=True)
        def pexpsum(x, scale):
            # one read of x and x.size vectorised float64 exps
            s = 0.0
            for i in prange(x.size):
                s += vexp(np.float64(x[i]) * scale)
            return s

        _KERNELS["vexp"] = vexp
        _KERNELS["psum"] = psum
        _KERNELS["pexpsum"] = pexpsum
        _KERNELS["pexpsum_libm"] = pexpsum_libm
    return _KERNELS


def _with_threads(n, fn):
    from numbaot._dispatch import num_threads

    with num_threads(n):
        return fn()


def measure_bandwidth(gib=1.0, repeats=5):
    """Read bandwidth (GB/s, 1e9 B/s) of a ``gib`` GiB float64 array.

    Returns a dict: ``numpy_1t`` (``arr.sum()``, one thread), ``numba_1t`` and
    ``numba_nt`` (``@njit(parallel=True)`` prange sum with 1 and with
    ``numba.config.NUMBA_NUM_THREADS`` threads), ``nthreads``, ``bytes``.
    """
    import numba

    n = int(gib * 2**30) // 8
    arr = np.ones(n, dtype=np.float64)  # pages touched
    nbytes = arr.nbytes
    psum = _kernels()["psum"]
    psum(arr[:16])  # compile
    nmax = numba.config.NUMBA_NUM_THREADS
    out = {"bytes": nbytes, "nthreads": nmax}
    out["numpy_1t"] = nbytes / time_call(arr.sum, repeats, 1)["best"] / 1e9
    out["numba_1t"] = nbytes / _with_threads(1, lambda: time_call(lambda: psum(arr), repeats, 1))["best"] / 1e9
    out["numba_nt"] = nbytes / _with_threads(nmax, lambda: time_call(lambda: psum(arr), repeats, 1))["best"] / 1e9
    del arr
    return out


def one_pass_read_time(x, repeats=5):
    """Best time (s) for one parallel read pass (prange sum) over array ``x``.

    This is the practical floor for any kernel that must stream ``x`` once,
    including cache effects at this size (an 8 MB matrix fits in L3).
    """
    psum = _kernels()["psum"]
    flat = np.ascontiguousarray(x).ravel()
    return time_call(lambda: psum(flat), repeats, 1)["best"]


def one_pass_exp_time(x, scale=-1.0, repeats=5, libm=False):
    """Best time (s) for a parallel pass computing ``sum(exp(scale * x))``.

    One read of ``x`` plus ``x.size`` float64 exps (a vectorisable polynomial
    exp; ``libm=True``: Numba's scalar ``np.exp``): a practical floor for one
    log-domain (logsumexp) sweep of the cost matrix.  ``scale * x`` must lie
    in [-708, 0].
    """
    k = _kernels()["pexpsum_libm" if libm else "pexpsum"]
    flat = np.ascontiguousarray(x).ravel()
    return time_call(lambda: k(flat, float(scale)), repeats, 1)["best"]


# --------------------------------------------------------------------------- #
# output
# --------------------------------------------------------------------------- #


def fmt(v, digits=3):
    """Format numbers compactly for tables."""
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "NO"
    if isinstance(v, str):
        return v
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    v = float(v)
    if v != v:
        return "nan"
    if v == 0:
        return "0"
    av = abs(v)
    if av >= 1e5 or av < 1e-3:
        return f"{v:.{digits - 1}e}"
    if av >= 100:
        return f"{v:.0f}"
    if av >= 10:
        return f"{v:.1f}"
    return f"{v:.{digits - 1}f}" if av >= 1 else f"{v:.{digits}g}"


def print_table(headers, rows, file=None):
    """Print a GitHub-markdown table; numbers go through ``fmt``."""
    file = sys.stdout if file is None else file
    cells = [[fmt(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def line(items):
        return "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths)) + " |"

    print(line(headers), file=file)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=file)
    for r in cells:
        print(line(r), file=file)
    file.flush()


def start_report(title):
    """Line-buffer stdout, print the title, the machine line and a load warning."""
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except AttributeError:
        pass
    print(f"# {title}")
    print()
    print(machine_info())
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = 0.0
    if load1 > 0.5:
        print()
        print(f"WARNING: 1-minute load average is {load1:.2f} on {os.cpu_count()} cores: "
              "other work is running, timings (especially multi-threaded ones) are unreliable.")
    print()


def import_numbaot(*submodules):
    """Import numbaot (and ``numbaot.<sub>`` for each name given, unless the
    package already exposes it as an attribute) or exit with a clear message."""
    import importlib

    try:
        mod = importlib.import_module("numbaot")
        for sub in submodules:
            if not hasattr(mod, sub):
                importlib.import_module(f"numbaot.{sub}")
    except Exception as exc:  # noqa: BLE001
        sys.exit(f"numbaot is not importable: {type(exc).__name__}: {exc}")
    return mod
