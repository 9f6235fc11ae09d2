"""One compiled specialisation per kernel on a first call (issue 23).

Numba compiles a kernel again for every new tuple of argument types: a
literal argument (``0``, ``True``, an omitted default) next to a runtime one,
or a ``prange`` index (Numba types a ``prange`` body twice, with an int64 and
then a uint64 index) passed on to a helper, each cost a second compile of the
kernel and of everything it calls.  In a fresh process, the first calls of
the public solvers on float64 problems must leave every CPU dispatcher of
numbaot with a single signature; and a small partial-OT solve, the first
calls of the process, compiles no parallel kernel (its serial twins only).  The child compiles from an empty disk
cache (about a minute of compile on 2 cores).  (float32 problems compile the float32 lanes
and their float64 fallback on purpose.)
"""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = textwrap.dedent(r"""
    import importlib, json, pkgutil, warnings
    import numba
    import numpy as np
    import numbaot
    import numbaot.bregman
    import numbaot.cpu
    warnings.simplefilter("ignore")

    def problem(n):
        rng = np.random.default_rng(0)
        x, y = rng.random((n, 2)), rng.random((n, 2))
        M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        M /= M.max()
        return np.full(n, 1.0 / n), np.full(n, 1.0 / n), M, x, y

    # small partial OT runs serial twins only (numbaot.cpu.partial): first,
    # so that no other solver has compiled a parallel kernel yet
    a, b, M, x, y = problem(64)
    numbaot.partial.entropic_partial_wasserstein(a, b, M, 0.05, m=0.5, numItermax=50)
    numbaot.partial.entropic_partial_wasserstein_logscale(a, b, M, 0.05, m=0.5, numItermax=50)
    parallel = sorted(
        f"{mod.__name__}.{name}"
        for mod in (importlib.import_module("numbaot.cpu.partial"),
                    importlib.import_module("numbaot.cpu.sinkhorn"))
        for name, f in vars(mod).items()
        if isinstance(f, numba.core.registry.CPUDispatcher)
        and f.targetoptions.get("parallel") and f.signatures)
    print("PARALLEL " + json.dumps(parallel))

    # 64: the one-call small paths; 400: the blocked (chunked, parallel) paths
    for n in (64, 400):
        a, b, M, x, y = problem(n)
        numbaot.partial.entropic_partial_wasserstein(a, b, M, 0.05, m=0.5, numItermax=50)
        numbaot.partial.entropic_partial_wasserstein_logscale(a, b, M, 0.05, m=0.5,
                                                              numItermax=50)
        numbaot.sinkhorn(a, b, M, 0.05, numItermax=50)
        numbaot.sinkhorn(a, b, M, 0.05, method="sinkhorn_log", numItermax=50)
        numbaot.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=50)
        numbaot.bregman.empirical_sinkhorn(x, y, 0.05, numIterMax=50, isLazy=True)
        numbaot.barycenter(np.stack([a, b], 1), M, 0.05, numItermax=50)
        numbaot.sinkhorn2_value_and_grad(a, b, M, 0.05, numItermax=50)
    numbaot.discounted_cumsum_right(np.random.default_rng(1).random((4, 1000)), 0.99)

    dup = {}
    for info in pkgutil.iter_modules(numbaot.cpu.__path__):
        mod = importlib.import_module("numbaot.cpu." + info.name)
        for name, f in vars(mod).items():
            if (isinstance(f, numba.core.registry.CPUDispatcher)
                    and getattr(f, "__module__", None) == mod.__name__
                    and len(f.signatures) > 1):
                dup[mod.__name__ + "." + name] = [str(s) for s in f.signatures]
    print("RESULT " + json.dumps(dup))
""")


def test_first_calls_compile_each_kernel_once(tmp_path):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    # an empty disk cache: a kernel loaded from the cache does not type its
    # callees, so on a warm cache the callees' signatures would go unseen
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba_cache")
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, out.stdout[-2000:]
    dup = json.loads(line[-1][len("RESULT "):])
    par = [ln for ln in out.stdout.splitlines() if ln.startswith("PARALLEL ")]
    assert par and json.loads(par[-1][len("PARALLEL "):]) == [], par
    assert dup == {}, "kernels compiled for more than one signature:\n" + "\n".join(
        f"{k}: {v}" for k, v in dup.items())
