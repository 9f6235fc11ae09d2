"""Small problems in one compiled call (issue 23, items 1 and 2).

Below ``numbaot._config.SMALL_MAX_ENTRIES`` the balanced solvers run the
whole POT loop inside one serial compiled function (``numbaot.cpu._small``);
plain 1-D problems also skip the Python validation (the compiled screen sends
anything doubtful to the full path, which raises).  These tests check that
the path changes nothing a user sees: results, iteration counts, ``log['err']``,
warnings and verbose output against the blocked path (threshold forced to 0)
and against POT, on the shapes of the other suites; that bad input still
raises the full path's errors; and that no parallel kernel runs on the path.
"""
import numpy as np
import pytest

import numbaot
from numbaot import _config
from numbaot.cpu import _small
from numbaot.cpu import sinkhorn as cpu_sinkhorn

from _helpers import (F32, F64, SHAPES, assert_close, assert_log_matches, call_recording,
                      make_problem, ot, random_hist, tol, up)

METHODS = ["sinkhorn", "sinkhorn_log"]


@pytest.fixture
def blocked(monkeypatch):
    """A context in which every problem takes the blocked (parallel) path."""
    class _Blocked:
        def __enter__(self):
            monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", -1)

        def __exit__(self, *exc):
            monkeypatch.undo()
    return _Blocked()


def _both(blocked, fn, *args, **kwargs):
    """(result, warnings) of fn on the small path, then on the blocked path."""
    small = call_recording(fn, *args, **kwargs)
    with blocked:
        big = call_recording(fn, *args, **kwargs)
    return small, big


def _assert_same(small, big, dtype, method=None):
    lanes32 = dtype == np.float32 and method == "sinkhorn_log"
    (rs, ws), (rb, wb) = small, big
    assert ws == wb
    if isinstance(rs, tuple):
        (rs, ls), (rb, lb) = rs, rb
        assert set(ls) == set(lb)
        for key in lb:
            if key == "niter":
                assert ls[key] == lb[key]
            elif key == "err":
                assert len(ls[key]) == len(lb[key])
                assert all(type(e) is type(f) for e, f in zip(ls[key], lb[key]))
                assert_close(np.asarray(ls[key], np.float64), np.asarray(lb[key], np.float64),
                             rtol=1e-6, atol=1e-13 if dtype == np.float64 else 1e-7)
            else:
                assert ls[key].dtype == lb[key].dtype
                assert_close(ls[key], lb[key],
                             **_tight(dtype, lanes32, log_space=key.startswith("log_")))
    assert type(rs) is type(rb)
    assert np.asarray(rs).dtype == np.asarray(rb).dtype
    assert_close(rs, rb, **_tight(dtype, lanes32))


#: ``sinkhorn_log`` on a float32 M: the blocked pass takes its row
#: exponentials in float32 lanes, whose exponents carry up to
#: 3 * LOG_F32_MAX_SCALE * 2^-24 = 2.3e-5 absolute error (numbaot/_config.py),
#: while the small path computes in float64
LANES32 = 3 * 128 * 2.0 ** -24


def _tight(dtype, lanes32=False, log_space=False):
    """Small path vs blocked path: the same iterates up to summation order
    (and, with ``lanes32``, up to the float32 exponents of the blocked path:
    that error, absolute for log-scalings, relative for the plan, u and v)."""
    if dtype == np.float64:
        return dict(rtol=1e-11, atol=1e-15)
    if lanes32:
        return dict(rtol=0.0, atol=LANES32) if log_space else dict(rtol=LANES32, atol=1e-9)
    return dict(rtol=2e-6, atol=1e-9)


# --------------------------------------------------------------------------
# the small path against the blocked path and POT
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES + [(64, 48)])
@pytest.mark.parametrize("method", METHODS)
def test_plan_and_log_match_blocked_and_pot(blocked, method, shape, dtype):
    a, b, M = make_problem(*shape, seed=3, dtype=dtype)
    small, big = _both(blocked, numbaot.sinkhorn, a, b, M, 0.05, method=method, log=True)
    _assert_same(small, big, dtype, method)
    G, lg = small[0]
    Gp, lgp = ot.sinkhorn(*up(a, b, M), 0.05, method=method, log=True)
    assert_close(G, Gp, **tol(dtype))
    if dtype == np.float64:
        assert_log_matches(lg, lgp)


@pytest.mark.parametrize("shape, dtype", [((24, 1100), np.float64), ((12, 2100), np.float32)])
def test_wide_cost_blocked_tiles_as_small_path_and_pot(blocked, shape, dtype):
    """The blocked Knopp pass sweeps whole rows four at a time while four
    rows of K fit ``_config.KNOPP_ROWS_MAX_BYTES`` (every other problem of
    this file) and tiles of COL_BLOCK columns beyond: these widths take the
    tiles (35 KB and 34 KB of four rows), against the one-call path and
    POT."""
    a, b, M = make_problem(*shape, seed=12, dtype=dtype)
    assert 4 * shape[1] * np.dtype(dtype).itemsize > _config.KNOPP_ROWS_MAX_BYTES
    small, big = _both(blocked, numbaot.sinkhorn, a, b, M, 0.05, log=True)
    _assert_same(small, big, dtype)
    Gp = ot.sinkhorn(*up(a, b, M), 0.05)
    assert_close(small[0][0], Gp, **tol(dtype))


@pytest.mark.parametrize("reg", [1e-3, 5e-3])
def test_log_small_path_at_tiny_reg_as_blocked_and_pot(blocked, reg):
    """The one-call ``sinkhorn_log`` shifts each row's logsumexp by the
    certified bound log a_i - u_old_i + max_j (v_j - v_old_j) after its
    first iteration (which takes the exact row maxima): at reg 1e-3 and
    5e-3 (costs up to 1, so c M reaches -1000) a row's terms span hundreds
    of orders of magnitude and the potentials move by hundreds in the first
    iterations.  The same plan and log as the blocked path and POT.  (The
    fallback to the exact maximum for a row whose shifted sum falls below
    ``ROW_SUM_FLOOR`` did not trigger in 240 random problems with weights
    spanning 250 orders of magnitude, counted in the pure-Python run of the
    kernel: the bound is tight; the fallback runs the first iteration's
    exact code.)"""
    a, b, M = make_problem(40, 30, seed=9)
    small, big = _both(blocked, numbaot.sinkhorn, a, b, M, reg, method="sinkhorn_log",
                       log=True, numItermax=300)
    _assert_same(small, big, np.float64, "sinkhorn_log")
    G, lg = small[0]
    Gp, lgp = ot.sinkhorn(a, b, M, reg, method="sinkhorn_log", log=True, numItermax=300)
    assert_close(G, Gp, **F64)
    assert_log_matches(lg, lgp)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
def test_loss_matches_blocked_and_pot(blocked, method, dtype):
    a, b, M = make_problem(30, 20, seed=4, dtype=dtype)
    small, big = _both(blocked, numbaot.sinkhorn2, a, b, M, 0.1, method=method)
    _assert_same(small, big, dtype, method)
    assert type(small[0]) is np.dtype(dtype).type
    ref = ot.sinkhorn2(*up(a, b, M), 0.1, method=method)
    assert_close(small[0], ref, **(F64 if dtype == np.float64 else F32))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("paired", [False, True])
def test_batches_match_blocked_and_pot(blocked, method, paired):
    rng = np.random.default_rng(5)
    a, _, M = make_problem(12, 9, seed=5)
    B = random_hist(rng, 9, 3)
    A = random_hist(rng, 12, 3) if paired else a
    for fn in (numbaot.sinkhorn, numbaot.sinkhorn2):
        small, big = _both(blocked, fn, A, B, M, 0.1, method=method, log=True)
        _assert_same(small, big, np.float64)
    losses = numbaot.sinkhorn2(A, B, M, 0.1, method=method)
    ref = [ot.sinkhorn2(A[:, k] if paired else a, B[:, k], M, 0.1, method=method)
           for k in range(3)]
    assert_close(losses, ref, **F64)


@pytest.mark.parametrize("method", METHODS)
def test_warm_start_and_lists(blocked, method):
    """Warm starts and list inputs take the small state path (not the one-call
    path); both agree with the blocked path."""
    a, b, M = make_problem(10, 8, seed=6)
    _, lg = ot.sinkhorn(a, b, M, 0.1, method="sinkhorn_log", log=True, numItermax=3, warn=False)
    warm = (lg["log_u"], lg["log_v"])
    small, big = _both(blocked, numbaot.sinkhorn, a, b, M, 0.1, method=method, log=True,
                       warmstart=warm)
    _assert_same(small, big, np.float64)
    small, big = _both(blocked, numbaot.sinkhorn, list(a), list(b), M, 0.1, method=method,
                       log=True)
    _assert_same(small, big, np.float64)
    # the one-call path (arrays) and the small state path (lists): same values
    assert_close(numbaot.sinkhorn(a, b, M, 0.1, method=method),
                 numbaot.sinkhorn(list(a), list(b), M, 0.1, method=method), **_tight(np.float64))


@pytest.mark.parametrize("empty", [[], (), np.empty(0)], ids=["list", "tuple", "array"])
@pytest.mark.parametrize("method", METHODS)
def test_empty_weights_take_the_one_call_path(blocked, monkeypatch, method, empty):
    """POT's empty a, b (uniform weights) with a float64 M run the one-call
    path, with the blocked path's and POT's plan and log."""
    _, _, M = make_problem(10, 8, seed=9)
    ref, lref = ot.sinkhorn([], [], M, 0.1, method=method, log=True)
    small, big = _both(blocked, numbaot.sinkhorn, empty, empty, M, 0.1, method=method, log=True)
    _assert_same(small, big, np.float64)
    (G, lg), _ = small
    assert_close(G, ref, **F64)
    assert_log_matches(lg, lref)
    name = "knopp_small_call" if method == "sinkhorn" else "log_small_call"
    calls, orig = [], getattr(_small, name)
    monkeypatch.setattr(_small, name, lambda *args: calls.append(1) or orig(*args))
    numbaot.sinkhorn(empty, empty, M, 0.1, method=method)
    assert calls == [1]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("numItermax", [0, 1, 5, 11])
def test_not_converged_warns_as_blocked(blocked, method, numItermax):
    a, b, M = make_problem(9, 7, seed=7)
    small, big = _both(blocked, numbaot.sinkhorn, a, b, M, 0.01, method=method, log=True,
                       numItermax=numItermax)
    _assert_same(small, big, np.float64)
    assert any("did not converge" in msg for _, msg in small[1])
    if numItermax == 0:
        return  # POT 0.9.7 raises UnboundLocalError there (its loop variable)
    (_, lg), (_, lgp) = small[0], call_recording(ot.sinkhorn, a, b, M, 0.01, method=method,
                                                  log=True, numItermax=numItermax)[0]
    assert lg["niter"] == lgp["niter"] and len(lg["err"]) == len(lgp["err"])


def test_knopp_failure_rule_as_blocked_and_pot(blocked):
    """A column of K = exp(-M/reg) underflows to 0: POT undoes the iteration
    and warns "numerical errors at iteration 0"; so do both paths."""
    a, b, M = make_problem(6, 5, seed=8)
    M[:, 2] += 800.0
    small, big = _both(blocked, numbaot.sinkhorn, a, b, M, 1.0, log=True)
    _assert_same(small, big, np.float64)
    (G, lg), ws = small
    (Gp, lgp), wp = call_recording(ot.sinkhorn, a, b, M, 1.0, log=True)
    # (POT also lets NumPy's divide-by-zero RuntimeWarnings through)
    assert [m for c, m in ws] == [m for c, m in wp if c is UserWarning]
    assert lg["niter"] == lgp["niter"] == 0
    assert_close(G, Gp, **F64)


@pytest.mark.parametrize("method", METHODS)
def test_verbose_table_as_blocked(blocked, method, capsys):
    a, b, M = make_problem(8, 8, seed=9)
    numbaot.sinkhorn(a, b, M, 0.05, method=method, verbose=True)
    small = capsys.readouterr().out
    with blocked:
        numbaot.sinkhorn(a, b, M, 0.05, method=method, verbose=True)
    big = capsys.readouterr().out
    assert "It." in small
    rows_s, rows_b = small.splitlines(), big.splitlines()
    assert len(rows_s) == len(rows_b)
    for rs, rb in zip(rows_s, rows_b):  # the error's last printed digit may differ
        if rs.count("|") == 2 and rs[0] != "I":
            its, errs = rs.split("|")[:2]
            itb, errb = rb.split("|")[:2]
            assert its == itb
            assert_close(float(errs), float(errb), rtol=1e-5, atol=1e-15)
        else:
            assert rs == rb


def test_warn_false_and_zero_weights(blocked):
    a, b, M = make_problem(8, 6, seed=10)
    a[2] = 0.0
    a /= a.sum()
    b[0] = 0.0
    b /= b.sum()
    for method in METHODS:
        small, big = _both(blocked, numbaot.sinkhorn, a, b, M, 0.05, method=method, log=True,
                           numItermax=3, warn=False)
        _assert_same(small, big, np.float64)
        assert small[1] == []
        if method == "sinkhorn_log":  # POT's Knopp divides by a: 1/0 * 0 = NaN, then it stops
            Gp = ot.sinkhorn(a, b, M, 0.05, method=method, numItermax=3, warn=False)
            assert_close(small[0][0], Gp, **F64)


# --------------------------------------------------------------------------
# bad input: the compiled screen sends it to the full validation
# --------------------------------------------------------------------------
def _bad_inputs():
    a, b, M = make_problem(6, 5, seed=11)
    nan_a = a.copy()
    nan_a[1] = np.nan
    neg_b = b.copy()
    neg_b[0] = -0.1
    heavy_b = b * 1.5
    nan_M = M.copy()
    nan_M[2, 3] = np.nan
    inf_M = M.copy()
    inf_M[0, 0] = np.inf
    return [
        ("a", (nan_a, b, M, 0.1)),
        ("b", (a, neg_b, M, 0.1)),
        ("b", (a, heavy_b, M, 0.1)),
        ("M", (a, b, nan_M, 0.1)),
        ("M", (a, b, inf_M, 0.1)),
        ("M", (a, b, M * 1e17, 0.1)),
        ("reg", (a, b, M, 0.0)),
        ("reg", (a, b, M, -1.0)),
        ("reg", (a, b, M, np.nan)),
        ("stopThr", (a, b, M, 0.1, {"stopThr": -1.0})),
        ("numItermax", (a, b, M, 0.1, {"numItermax": -3})),
    ]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name,args", _bad_inputs())
def test_bad_input_raises_as_full_path(blocked, method, name, args):
    kw = args[-1] if isinstance(args[-1], dict) else {}
    args = args[:4]
    copies = [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in args]
    with pytest.raises(ValueError) as small:
        numbaot.sinkhorn(*args, method=method, **kw)
    with blocked, pytest.raises(ValueError) as big:
        numbaot.sinkhorn(*args, method=method, **kw)
    assert str(small.value) == str(big.value)
    assert name in str(small.value)
    for x, c in zip(args, copies):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, c)


# --------------------------------------------------------------------------
# no parallel region, no thread dependence
# --------------------------------------------------------------------------
_PARALLEL = ("gibbs_kernel", "scaled_plan", "scaled_loss", "gibbs_loss", "knopp_run",
             "knopp_run_pm", "log_run", "log_run_pm", "log_col_lse", "knopp_col_sums",
             "knopp_col_sums_pm", "merge_chunks", "knopp_pass_at")


@pytest.mark.parametrize("method", METHODS)
def test_no_parallel_kernel_on_the_small_path(monkeypatch, method):
    """Every launcher-level use of a parallel kernel (or of the blocked runs
    that launch them) is replaced by a stub that fails: the small path,
    batches and warm starts included, never reaches one."""
    def _forbidden(*args, **kwargs):
        raise AssertionError("a parallel kernel ran on the small path")
    for name in _PARALLEL:
        monkeypatch.setattr(cpu_sinkhorn, name, _forbidden)
    rng = np.random.default_rng(12)
    a, b, M = make_problem(20, 15, seed=12)
    B = random_hist(rng, 15, 4)
    numbaot.sinkhorn(a, b, M, 0.1, method=method, log=True)
    numbaot.sinkhorn2(a, b, M, 0.1, method=method)
    numbaot.sinkhorn(list(a), list(b), M, 0.1, method=method, log=True)
    numbaot.sinkhorn2(a, B, M, 0.1, method=method, log=True)
    numbaot.sinkhorn(a, b, M, 0.1, method=method, numItermax=0, warn=False)
    with pytest.raises(AssertionError, match="parallel kernel"):
        monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", -1)
        numbaot.sinkhorn(a, b, M, 0.1, method=method)


@pytest.mark.parametrize("method", METHODS)
def test_thread_count_changes_no_bit(method, restore_num_threads):
    import numba
    a, b, M = make_problem(40, 25, seed=13)
    numba.set_num_threads(1)
    one = numbaot.sinkhorn(a, b, M, 0.05, method=method)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    many = numbaot.sinkhorn(a, b, M, 0.05, method=method)
    np.testing.assert_array_equal(one, many)
