"""The small-problem path of the unbalanced solvers (issue 23).

A problem of at most ``numbaot._config.SMALL_MAX_ENTRIES`` entries (dim_a x
dim_b x n_problems; for the log domain also at most
``SMALL_MAX_ENTRIES_LOG``) runs ``method='sinkhorn'`` and
``'sinkhorn_log'`` start to finish on the calling thread (serial kernels of
``numbaot.cpu.unbalanced``).  Oracles: POT 0.9.7 (``sinkhorn_knopp_unbalanced``;
POT has no log-domain unbalanced solver) and the blocked path, forced by
setting the threshold to 0: same plans and losses to 1e-12 relative in
float64, the same number of iterations, ``log['err']`` list, log keys and
warnings.
"""
import ast
import inspect
import textwrap

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import numbaot
from numbaot import _config
from numbaot import unbalanced as nu
from numbaot.cpu import unbalanced as cu

from _helpers import (ERR_TOL, F32, F64, assert_close, assert_raises_naming, call_recording,
                      make_problem, ot, up)

METHODS = ["sinkhorn", "sinkhorn_log"]
#: float64, small path against the blocked path: the same iterates up to the
#: order of the sums (a few ulps per iteration through a contractive map).
SAME = 1e-12
#: total_cost = <G, M> + reg KL(G, c) + reg_m KL(G 1, a) + ...: its terms are
#: O(1) on these problems and cancel down to ~1e-6, so it is compared with an
#: absolute tolerance of SAME times this scale.
TOTAL_SCALE = 1.0


def _problem(n, m, seed=0, dtype=np.float64, mass_b=1.4):
    a, b, M = make_problem(n, m, seed)
    return a.astype(dtype), (b * mass_b).astype(dtype), M.astype(dtype)


def _hists(m, k, seed):
    rng = np.random.default_rng(seed)
    h = rng.uniform(0.5, 1.5, size=(m, k))
    return h / h.sum(axis=0) * np.linspace(0.6, 1.8, k)


def _case(name, dtype=np.float64):
    """(args, kwargs) of ``sinkhorn_unbalanced`` for a named test case."""
    reg, reg_m = 0.05, 1.0
    kw = {}
    if name in ("1x7", "7x1", "13x9", "64x64"):
        n, m = map(int, name.split("x"))
        a, b, M = _problem(n, m, seed=n + m, dtype=dtype)
    elif name == "hists3":  # 2-D b: three problems sharing M, losses returned
        a, _, M = _problem(13, 9, seed=1, dtype=dtype)
        b = _hists(9, 3, 2).astype(dtype)
    elif name == "paired":  # 2-D a and b: numbaot's paired batch
        _, _, M = _problem(11, 8, seed=2, dtype=dtype)
        a, b = _hists(11, 4, 3).astype(dtype), _hists(8, 4, 4).astype(dtype)
    elif name == "c":
        a, b, M = _problem(12, 10, seed=3, dtype=dtype)
        kw["c"] = np.random.default_rng(5).uniform(0.5, 2.0, size=M.shape).astype(dtype)
        reg_m = (0.7, 1.3)
    elif name == "entropy":
        a, b, M = _problem(10, 14, seed=4, dtype=dtype)
        kw["reg_type"] = "entropy"
    elif name == "warm":
        a, b, M = _problem(15, 12, seed=5, dtype=dtype)
        rng = np.random.default_rng(6)
        kw["warmstart"] = (rng.normal(size=15) * 0.1, rng.normal(size=12) * 0.1)
    elif name == "hard":  # one hard marginal (exponent 1: no power taken)
        a, b, M = _problem(9, 12, seed=6, dtype=dtype)
        reg_m = (np.inf, 0.5)
    elif name == "noconv":  # runs out of iterations
        a, b, M = _problem(20, 16, seed=7, dtype=dtype)
        kw["numItermax"] = 5
    else:
        raise ValueError(name)
    return (a, b, M, reg, reg_m), kw


CASES = ["1x7", "7x1", "13x9", "64x64", "hists3", "paired", "c", "entropy", "warm", "hard",
         "noconv"]


def _run(monkeypatch, small, fn, *args, **kw):
    """``fn(*args, **kw)`` on the small path (``small``) or the blocked one;
    returns (result, warnings)."""
    with monkeypatch.context() as mp:
        if not small:
            mp.setattr(_config, "SMALL_MAX_ENTRIES", 0)
        return call_recording(fn, *args, **kw)


def _rel(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    assert x.shape == y.shape
    return np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300)


def _same_log(lg, ref, rtol):
    assert set(lg) == set(ref)
    assert len(lg["err"]) == len(ref["err"])
    assert all(type(e) is type(r) for e, r in zip(lg["err"], ref["err"]))
    assert_close(np.asarray(lg["err"], np.float64), np.asarray(ref["err"], np.float64),
                 **ERR_TOL)
    for key in set(lg) - {"err"}:
        assert np.asarray(lg[key]).dtype == np.asarray(ref[key]).dtype, key
        if key == "total_cost":  # a sum of O(1) terms that cancel: absolute
            assert abs(lg[key] - ref[key]) <= rtol * TOTAL_SCALE, key
        else:
            assert _rel(lg[key], ref[key]) <= rtol, key


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("method", METHODS)
def test_small_path_matches_blocked_path(monkeypatch, method, name):
    args, kw = _case(name)
    (G, lg), w_small = _run(monkeypatch, True, nu.sinkhorn_unbalanced, *args, method=method,
                            log=True, **kw)
    (R, lr), w_blocked = _run(monkeypatch, False, nu.sinkhorn_unbalanced, *args, method=method,
                              log=True, **kw)
    assert G.dtype == R.dtype and G.shape == R.shape
    assert _rel(G, R) <= SAME
    _same_log(lg, lr, SAME)
    assert w_small == w_blocked
    if name == "noconv":
        assert len(lg["err"]) == 5
    # the loss (sinkhorn_unbalanced2) and the plan without a log
    if not name.startswith(("hists", "paired")):
        for rc in ("linear", "total"):
            l_s, _ = _run(monkeypatch, True, nu.sinkhorn_unbalanced2, *args, method=method,
                          returnCost=rc, **kw)
            l_b, _ = _run(monkeypatch, False, nu.sinkhorn_unbalanced2, *args, method=method,
                          returnCost=rc, **kw)
            assert abs(l_s - l_b) <= SAME * (abs(l_b) if rc == "linear" else TOTAL_SCALE)
        G2, _ = _run(monkeypatch, True, nu.sinkhorn_unbalanced, *args, method=method, **kw)
        assert _rel(G2, R) <= SAME


@pytest.mark.parametrize("name", [c for c in CASES if c != "paired"])
def test_small_knopp_matches_pot(name):
    """POT's sinkhorn_knopp_unbalanced on the same problem: plan (or losses),
    log (err list of the same length, logu, logv, costs) and warnings."""
    args, kw = _case(name)
    ref, rec_ref = call_recording(ot.unbalanced.sinkhorn_unbalanced, *args, log=True, **kw)
    got, rec = call_recording(nu.sinkhorn_unbalanced, *args, log=True, **kw)
    assert_close(got[0], ref[0], **F64)
    assert set(got[1]) == set(ref[1])
    assert len(got[1]["err"]) == len(ref[1]["err"])
    for key in ref[1]:
        if key != "err":
            assert_close(got[1][key], ref[1][key], rtol=1e-7, atol=1e-9)
    assert rec == rec_ref


@pytest.mark.parametrize("name", ["13x9", "hists3", "paired", "c", "warm"])
@pytest.mark.parametrize("method", METHODS)
def test_small_float32(monkeypatch, method, name):
    """float32 data: float32 results within float32 tolerance of POT's
    float64 solve (the log domain's fixed point is the same) and of the
    blocked path, with the same err list to float32 tolerance.

    The iteration counts may differ only where the stopping test is decided
    by float32 rounding: the blocked path sums a float32 K in float32 lanes
    (``uot_fused_pass``), the small path in float64, so their errs differ by
    float32 noise (about 1e-7 absolute here) and an err within that noise of
    stopThr (1e-6) can stop one path earlier (seen on an AVX-512 machine:
    9.90e-7 against 1.003e-6 at iteration 105; near stopThr the err falls
    by about 1e-7 per iteration, as much as the noise).  Every
    iteration the longer run has beyond the shorter must have an err within
    F32's absolute tolerance of stopThr."""
    args, kw = _case(name, np.float32)
    (G, lg), _ = _run(monkeypatch, True, nu.sinkhorn_unbalanced, *args, method=method,
                      log=True, **kw)
    (R, lr), _ = _run(monkeypatch, False, nu.sinkhorn_unbalanced, *args, method=method,
                      log=True, **kw)
    assert G.dtype == np.float32 and all(type(e) is np.float32 for e in lg["err"])
    es, eb = np.asarray(lg["err"], np.float64), np.asarray(lr["err"], np.float64)
    k = min(es.size, eb.size)
    assert_close(es[:k], eb[:k], **F32)
    longer = es if es.size > eb.size else eb
    stop_thr = 1e-6  # sinkhorn_unbalanced's default
    assert np.all(longer[k - 1:] < stop_thr + F32["atol"]), longer[k - 1:]
    assert_close(G, R, **F32)
    if name != "paired":
        kw64 = dict(kw)
        if "c" in kw64:
            kw64["c"] = up(kw64["c"])[0]
        ref = ot.unbalanced.sinkhorn_unbalanced(*up(*args[:3]), *args[3:], stopThr=1e-9,
                                                numItermax=5000, **kw64)
        G9 = nu.sinkhorn_unbalanced(*args, method=method, stopThr=1e-9, numItermax=5000, **kw)
        assert_close(G9, ref, **F32)


@pytest.mark.parametrize("method", METHODS)
def test_small_numerical_failure(monkeypatch, method):
    """A column of K underflows to 0 (K^T u = 0): the multiplicative solver
    stops at iteration 0 with POT's warning; both paths agree (the log
    domain does not fail)."""
    a, b, M = _problem(6, 5, seed=9)
    M = M.copy()
    M[:, 2] = 1.0 + np.arange(6) * 0.01
    args = (a, b, M, 1e-3, 1.0)
    (G, lg), w_s = _run(monkeypatch, True, nu.sinkhorn_unbalanced, *args, method=method,
                        log=True)
    (R, lr), w_b = _run(monkeypatch, False, nu.sinkhorn_unbalanced, *args, method=method,
                        log=True)
    assert w_s == w_b
    assert len(lg["err"]) == len(lr["err"])
    np.testing.assert_array_equal(np.isnan(G), np.isnan(R))
    assert _rel(np.nan_to_num(G), np.nan_to_num(R)) <= SAME
    if method == "sinkhorn":
        ref, w_pot = call_recording(ot.unbalanced.sinkhorn_knopp_unbalanced, *args, log=True)
        # POT's own NumPy divide-by-zero RuntimeWarning aside, the same warnings
        assert w_s == [w for w in w_pot if w[0] is UserWarning]
        assert any("Numerical errors" in m for _, m in w_s)
        assert len(lg["err"]) == len(ref[1]["err"])
        assert_close(G, ref[0], **F64)


def test_small_log_domain_reaches_pot_fixed_point():
    """The log-domain small path converges to POT's (multiplicative) fixed point."""
    args, kw = _case("c")
    ref = ot.unbalanced.sinkhorn_knopp_unbalanced(*args, stopThr=1e-12, numItermax=10000, **kw)
    got = nu.sinkhorn_unbalanced(*args, method="sinkhorn_log", stopThr=1e-12,
                                 numItermax=10000, **kw)
    assert_close(got, ref, rtol=1e-8, atol=1e-12)


def test_threshold_boundary(monkeypatch):
    """The threshold counts dim_a x dim_b x n_problems: at it the small path,
    above it the blocked one (seen through the state's ``small``)."""
    a, _, M = _problem(13, 9, seed=1)
    b = _hists(9, 3, 2)
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", 13 * 9 * 3)
    P = (M, 0.05, np.ones(13), np.ones(9), np.zeros((1, 1)), False, a.reshape(1, -1),
         np.ascontiguousarray(b.T))
    assert cu.UotState(*P, np.ones((3, 13)), np.ones((3, 9)), 0.9, 0.9).small
    assert cu.UotLogState(*P, np.zeros((3, 13)), np.zeros((3, 9)), 0.9, 0.9).small
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", 13 * 9 * 3 - 1)
    assert not cu.UotState(*P, np.ones((3, 13)), np.ones((3, 9)), 0.9, 0.9).small
    assert not cu.UotLogState(*P, np.zeros((3, 13)), np.zeros((3, 9)), 0.9, 0.9).small
    # the log domain's own, lower limit
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", 1 << 17)
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES_LOG", 13 * 9 * 3 - 1)
    assert cu.UotState(*P, np.ones((3, 13)), np.ones((3, 9)), 0.9, 0.9).small
    assert not cu.UotLogState(*P, np.zeros((3, 13)), np.zeros((3, 9)), 0.9, 0.9).small
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES_LOG", 13 * 9 * 3)
    assert cu.UotLogState(*P, np.zeros((3, 13)), np.zeros((3, 9)), 0.9, 0.9).small
    # more iterations than SMALL_MAX_ITER: the blocked iterations, same result
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", 1 << 17)
    args, kw = _case("13x9")
    G = nu.sinkhorn_unbalanced(*args)
    monkeypatch.setattr(_config, "SMALL_MAX_ITER", 10)
    assert _rel(nu.sinkhorn_unbalanced(*args), G) <= SAME


# --------------------------------------------------------------------------
# the one-call path (plain 1-D NumPy problems): no Setup, no state
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
def test_one_call_path_matches_state_path(monkeypatch, method, dtype):
    """A plain problem runs in one compiled call (``setup`` is never
    reached); the same problem with reg_m given as a pair takes the state
    path (validation, ``UotState``, the same small kernels): same results,
    log and warnings, for both reg_types, with and without the log, and for
    sinkhorn_unbalanced2."""
    from numbaot.unbalanced import _sinkhorn

    (a, b, M, reg, reg_m), _ = _case("13x9", dtype)
    setup = _sinkhorn.setup
    tol = SAME if dtype == np.float64 else 1e-6
    for reg_type in ("kl", "entropy"):
        for log in (False, True):
            kw = dict(method=method, reg_type=reg_type, log=log)
            with monkeypatch.context() as mp:
                mp.setattr(_sinkhorn, "setup", None)  # the full path would fail
                got, w_got = call_recording(nu.sinkhorn_unbalanced, a, b, M, reg, reg_m, **kw)
                tot, _ = call_recording(nu.sinkhorn_unbalanced2, a, b, M, reg, reg_m,
                                        method=method, reg_type=reg_type, returnCost="total")
            assert _sinkhorn.setup is setup
            ref, w_ref = call_recording(nu.sinkhorn_unbalanced, a, b, M, reg, (reg_m, reg_m),
                                        **kw)
            ref_tot, _ = call_recording(nu.sinkhorn_unbalanced2, a, b, M, reg, [reg_m],
                                        method=method, reg_type=reg_type, returnCost="total")
            assert w_got == w_ref
            if log:
                (got, lg), (ref, lr) = got, ref
                _same_log(lg, lr, tol)
            assert got.dtype == ref.dtype == dtype
            assert _rel(got, ref) <= tol
            assert abs(tot - ref_tot) <= tol * TOTAL_SCALE


def _bad(kind):
    a, b, M = _problem(7, 5, seed=11)
    a, b, M = a.copy(), b.copy(), M.copy()
    if kind == "M nan":
        M[2, 3] = np.nan
    elif kind == "M inf":
        M[0, 0] = np.inf
    elif kind == "M scale":
        M *= 1e17
    elif kind == "a negative":
        a[1] = -0.1
    elif kind == "a zero mass":
        a[:] = 0.0
    elif kind == "b nan":
        b[4] = np.nan
    elif kind == "b inf":
        b[0] = np.inf
    return a, b, M


@pytest.mark.parametrize("kind", ["M nan", "M inf", "M scale", "a negative", "a zero mass",
                                  "b nan", "b inf"])
@pytest.mark.parametrize("method", METHODS)
def test_one_call_path_screens_bad_input(method, kind):
    """Bad values in a plain small problem fail the compiled screen and take
    the full validation, which raises naming the argument."""
    a, b, M = _bad(kind)
    assert_raises_naming(ValueError, kind.split()[0], nu.sinkhorn_unbalanced, a, b, M, 0.05,
                         1.0, method=method)
    assert_raises_naming(ValueError, kind.split()[0], nu.sinkhorn_unbalanced2, a, b, M, 0.05,
                         1.0, method=method)


# --------------------------------------------------------------------------
# no parallel region on the small path
# --------------------------------------------------------------------------
SMALL_KERNELS = ("uot_gibbs_serial", "uot_small_run", "uot_small_plan", "uot_small_loss",
                 "uot_small_plan_stats", "uot_log_small_run", "uot_log_small_loss",
                 "uot_log_small_plan_stats", "uot_small_call", "uot_small_stats",
                 "uot_log_small_call")


def _callees(disp):
    """The numba dispatchers that ``disp``'s Python source calls by a global name."""
    f = disp.py_func
    tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return [f.__globals__[x] for x in sorted(names)
            if isinstance(f.__globals__.get(x), CPUDispatcher)]


@pytest.mark.parametrize("kernel", SMALL_KERNELS)
def test_small_kernels_reach_no_parallel_kernel(kernel):
    """Static call graph: neither a small-path kernel nor anything it calls
    is compiled with ``parallel=True``."""
    seen, todo = set(), [getattr(cu, kernel)]
    while todo:
        d = todo.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        assert not d.targetoptions.get("parallel"), (kernel, d.py_func.__qualname__)
        todo.extend(_callees(d))
    assert len(seen) >= 1


@pytest.mark.filterwarnings("ignore:If reg_type = entropy")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", ["13x9", "hists3", "paired", "c", "entropy"])
def test_small_path_launches_no_parallel_kernel(monkeypatch, method, name):
    """At run time: every parallel kernel the launchers of
    ``numbaot.cpu.unbalanced`` can call is replaced by one that raises, and
    the small path still solves (log, plan, losses)."""
    args, kw = _case(name)
    ref = nu.sinkhorn_unbalanced(*args, method=method, log=True, **kw)

    def banned(*a, **k):
        raise AssertionError("a parallel kernel was launched on the small path")

    n_banned = 0
    for attr, obj in list(vars(cu).items()):
        if isinstance(obj, CPUDispatcher) and obj.targetoptions.get("parallel"):
            monkeypatch.setattr(cu, attr, banned)
            n_banned += 1
    assert n_banned >= 8
    got = nu.sinkhorn_unbalanced(*args, method=method, log=True, **kw)
    assert _rel(got[0], ref[0]) == 0.0
    if not name.startswith(("hists", "paired")):
        nu.sinkhorn_unbalanced(*args, method=method, **kw)
        nu.sinkhorn_unbalanced2(*args, method=method, **kw)
    with monkeypatch.context() as mp:  # and the blocked path does call them
        mp.setattr(_config, "SMALL_MAX_ENTRIES", 0)
        with pytest.raises(AssertionError, match="parallel kernel"):
            nu.sinkhorn_unbalanced(*args, method=method, **kw)
