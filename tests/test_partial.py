"""numbaot.partial (entropic partial OT) against POT 0.9.7 (the oracle).

The plans, ``log['err']``, ``log['partial_w_dist']``, the printed failure
message and its iteration, the log-domain warning, the verbose table and the
checks of ``m`` are compared with ``ot.partial`` on random problems; float32
inputs are compared with POT run in float64 on the upcast data.
"""
import contextlib
import io
import warnings

import numpy as np
import pytest

import numbaot
from numbaot import partial as npar
from numbaot._dispatch import num_threads
from numbaot.cpu import partial as cpu_partial

from _helpers import F32, assert_raises_naming, make_problem, ot, up

pytest.importorskip("ot.partial")

EXP = (ot.partial.entropic_partial_wasserstein, npar.entropic_partial_wasserstein)
LOG = (ot.partial.entropic_partial_wasserstein_logscale,
       npar.entropic_partial_wasserstein_logscale)
SOLVERS = {"exp": EXP, "log": LOG}

#: float64: both sides run the same iteration; only rounding differs (POT
#: accumulates its corrections q1, q2, q3 elementwise, numbaot keeps them as
#: vectors), propagated through a contractive iteration.
F64 = dict(rtol=1e-9, atol=1e-13)


def _force(monkeypatch, path):
    """Make the CPU backend take ``path``: 'auto' (what the size selects:
    on a small problem the whole loop in one compiled call), 'blocks' (the
    small path's serial kernels, the loop in Python by blocks of
    iterations) or 'parallel' (the parallel kernels, by blocks)."""
    if path == "auto":
        return
    monkeypatch.setattr(cpu_partial, "_is_small", lambda *args: path == "blocks")
    if path == "blocks":
        monkeypatch.setattr(cpu_partial, "partial_solve_small", lambda *args: None)
        monkeypatch.setattr(cpu_partial, "partial_log_solve_small", lambda *args: None)


@pytest.fixture(params=["auto", "blocks", "parallel"])
def path(request, monkeypatch):
    """Which CPU path runs (:func:`_force`); the tests' problems are small,
    so 'auto' is the one-call loop of ``numbaot.cpu.partial``."""
    _force(monkeypatch, request.param)
    return request.param


def _problem(n, m, seed=0, dtype=np.float64, mass_a=1.0, mass_b=1.3):
    a, b, M = make_problem(n, m, seed)
    return (a * mass_a).astype(dtype), (b * mass_b).astype(dtype), M.astype(dtype)


def _run(fn, *args, **kw):
    """(result, printed text, [non-RuntimeWarning messages])."""
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as rec, contextlib.redirect_stdout(out), \
            np.errstate(all="ignore"):
        warnings.simplefilter("always")
        res = fn(*args, **kw)
    msgs = [str(w.message) for w in rec if not issubclass(w.category, RuntimeWarning)]
    return res, out.getvalue(), msgs


def _check_errs(got, ref, rtol):
    """log['err'] entries above the noise floor agree; numbaot's iterate may
    reach its fixed point (err exactly 0, which stops the default
    stopThr=1e-100) a check earlier or later than POT's, so entries below the
    floor are only required to be below it.  The floor: 1e-8 (float32: 1e-4)
    of the first error, and at least 1e-11 (float32: 1e-5) absolute, the
    rounding of a difference of two log-iterates of size |M| / reg ~ 20
    summed over up to 70 x 33 entries (2.2e-16 * 20 * sqrt(2310) ~ 2e-13)."""
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    assert len(ref) >= 1 and len(got) >= 1
    floor = max(1e-8 * ref[0], 1e-11) if rtol < 1e-5 else max(1e-4 * ref[0], 1e-5)
    above = np.flatnonzero(ref > floor)
    assert len(got) > above.max(initial=-1)
    np.testing.assert_allclose(got[above], ref[above], rtol=rtol)
    assert np.all(got[len(above):] <= 10 * floor)


# ---------------------------------------------------------------------------
# against POT on random problems
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("reg", [0.05, 0.5])
@pytest.mark.parametrize("m_frac", [None, 0.3, 1.0])
@pytest.mark.parametrize("shape", [(1, 7), (7, 1), (6, 9), (40, 25), (70, 33)])
def test_matches_pot_float64(kind, reg, m_frac, shape, path):
    a, b, M = _problem(*shape, seed=shape[0] + 3 * shape[1])
    mm = None if m_frac is None else m_frac * min(a.sum(), b.sum())
    pot, ours = SOLVERS[kind]
    (ref, lref), _, _ = _run(pot, a, b, M, reg, m=mm, numItermax=300, log=True)
    (got, lg), out, msgs = _run(ours, a, b, M, reg, m=mm, numItermax=300, log=True)
    assert out == "" and msgs == []
    assert type(got) is np.ndarray and got.dtype == np.float64 and got.shape == shape
    np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"] * ref.max())
    assert list(lg) == list(lref) == ["err", "partial_w_dist"]
    _check_errs(lg["err"], lref["err"], rtol=1e-7)
    assert all(type(e) is np.float64 for e in lg["err"])
    assert type(lg["partial_w_dist"]) is np.float64
    np.testing.assert_allclose(lg["partial_w_dist"], lref["partial_w_dist"], rtol=1e-9)
    # the last projection of an iteration is onto the total mass m
    m_target = min(a.sum(), b.sum()) if mm is None else mm
    assert abs(got.sum() - m_target) < 1e-9 * m_target


@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("shape", [(1, 5), (9, 14), (40, 25)])
def test_float32_against_float64_oracle(kind, shape, path):
    a, b, M = _problem(*shape, seed=7, dtype=np.float32)
    mm = 0.5 * float(min(a.sum(), b.sum()))
    pot, ours = SOLVERS[kind]
    (ref, lref), _, _ = _run(pot, *up(a, b, M), 0.1, m=mm, numItermax=200, log=True)
    (got, lg), _, _ = _run(ours, a, b, M, 0.1, m=mm, numItermax=200, log=True)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=F32["rtol"], atol=F32["atol"] * ref.max())
    assert all(type(e) is np.float32 for e in lg["err"])
    assert type(lg["partial_w_dist"]) is np.float32
    _check_errs(lg["err"], lref["err"], rtol=1e-3)


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_wide_rows_and_many_chunks(kind, path):
    """More columns than a column block (512) and more rows than a chunk."""
    a, b, M = _problem(45, 700, seed=11)
    pot, ours = SOLVERS[kind]
    (ref, lref), _, _ = _run(pot, a, b, M, 0.05, m=0.6, numItermax=40, log=True)
    (got, lg), _, _ = _run(ours, a, b, M, 0.05, m=0.6, numItermax=40, log=True)
    np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"] * ref.max())
    _check_errs(lg["err"], lref["err"], rtol=1e-7)


def test_method_dispatch_matches_logscale():
    a, b, M = _problem(8, 6, seed=2)
    g1 = npar.entropic_partial_wasserstein(a, b, M, 0.1, 0.4, method="SINKHORN_LOG",
                                           numItermax=50)
    g2 = npar.entropic_partial_wasserstein_logscale(a, b, M, 0.1, 0.4, numItermax=50)
    np.testing.assert_array_equal(g1, g2)
    g3 = npar.entropic_partial_wasserstein(a, b, M, 0.1, 0.4, method="Sinkhorn",
                                           numItermax=50)
    ref = ot.partial.entropic_partial_wasserstein(a, b, M, 0.1, 0.4, numItermax=50)
    np.testing.assert_allclose(g3, ref, rtol=F64["rtol"], atol=F64["atol"] * ref.max())


def test_pot_docstring_example_and_lists():
    a, b, M = [.1, .2], [.1, .1], [[0., 1.], [2., 3.]]
    for pot, ours in (EXP, LOG):
        ref = pot(a, b, M, 1, 0.1)
        got = ours(a, b, M, 1, 0.1)
        np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=1e-15)


def test_empty_weights_mean_uniform():
    _, _, M = _problem(5, 8, seed=4)
    for pot, ours in (EXP, LOG):
        ref = pot([], [], M, 0.2, m=0.5, numItermax=60)
        got = ours([], [], M, 0.2, m=0.5, numItermax=60)
        np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"])


def test_default_m_is_the_smaller_mass():
    a, b, M = _problem(6, 7, seed=5, mass_a=0.7)
    for pot, ours in (EXP, LOG):
        ref = pot(a, b, M, 0.1, numItermax=100)
        got = ours(a, b, M, 0.1, numItermax=100)
        np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"])
        assert abs(got.sum() - 0.7) < 1e-9


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_stopthr_at_least_one_runs_no_iteration(kind):
    a, b, M = _problem(6, 4, seed=6)
    pot, ours = SOLVERS[kind]
    ref, lref = pot(a, b, M, 0.3, m=0.2, stopThr=1.0, log=True)
    got, lg = ours(a, b, M, 0.3, m=0.2, stopThr=1.0, log=True)
    assert lg["err"] == lref["err"] == []
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)  # the scaled kernel itself


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_stops_on_stopthr_like_pot(kind):
    a, b, M = _problem(12, 10, seed=8)
    pot, ours = SOLVERS[kind]
    ref, lref = pot(a, b, M, 0.2, m=0.95, stopThr=1e-6, log=True)
    got, lg = ours(a, b, M, 0.2, m=0.95, stopThr=1e-6, log=True)
    assert len(lg["err"]) == len(lref["err"]) >= 3
    np.testing.assert_allclose(lg["err"], lref["err"], rtol=1e-7)
    np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"])


@pytest.mark.parametrize("numItermax", [0, 1, 10, 11, 25])
def test_iteration_counts(numItermax):
    a, b, M = _problem(9, 5, seed=9)
    for pot, ours in (EXP, LOG):
        ref, lref = pot(a, b, M, 0.1, m=0.9, numItermax=numItermax, log=True)
        got, lg = ours(a, b, M, 0.1, m=0.9, numItermax=numItermax, log=True)
        assert len(lg["err"]) == len(lref["err"])
        np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"])


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_verbose_table_like_pot(kind):
    a, b, M = _problem(6, 5, seed=10)
    pot, ours = SOLVERS[kind]
    _, ref_out, _ = _run(pot, a, b, M, 0.1, m=0.9, numItermax=25, verbose=True)
    _, out, _ = _run(ours, a, b, M, 0.1, m=0.9, numItermax=25, verbose=True)
    ref_lines, lines = ref_out.splitlines(), out.splitlines()
    assert len(lines) == len(ref_lines) == 5
    assert lines[:2] == ref_lines[:2] == ["It.  |Err         ", "-" * 11]
    for got, ref in zip(lines[2:], ref_lines[2:]):
        it, err, _ = got.split("|")
        rit, rerr, _ = ref.split("|")
        assert it == rit
        if float(rerr) > 1e-8:  # above the rounding noise
            np.testing.assert_allclose(float(err), float(rerr), rtol=2e-6)


# ---------------------------------------------------------------------------
# numerical failure, as POT
# ---------------------------------------------------------------------------
def _failure_cases():
    a, b, M = _problem(5, 4, seed=0)
    M_under = M.copy()
    M_under[0, 0] = 200.0  # exp(-200 / 0.1) underflows: POT's K has a zero
    a_zero = a.copy()
    a_zero[1] = 0.0
    b_zero = b.copy()
    b_zero[2] = 0.0
    rng = np.random.default_rng(1)
    M32 = rng.random((6, 7)).astype(np.float32)
    u6, u7 = np.full(6, 1 / 6, np.float32), np.full(7, 1 / 7, np.float32)
    return {
        "kernel_zero": ((a, b, M_under, 0.1), dict(m=0.5)),
        "kernel_zero_one_iteration": ((a, b, M_under, 0.1), dict(m=0.5, numItermax=1)),
        "a_zero": ((a_zero, b, M, 0.1), dict(m=0.5)),
        "b_zero": ((a, b_zero, M, 0.1), dict(m=0.5)),
        "m_zero": ((a, b, M, 0.1), dict(m=0.0)),
        "float32_small_reg": ((u6, u7, M32, 0.008), {}),
        "float64_small_reg": ((a, b, M, 0.0012), {}),
    }


@pytest.mark.parametrize("case", list(_failure_cases()))
def test_failures_like_pot_exp(case, path):
    args, kw = _failure_cases()[case]
    kw = dict(kw, log=True, numItermax=kw.get("numItermax", 60))
    (ref, lref), ref_out, _ = _run(EXP[0], *args, **kw)
    (got, lg), out, msgs = _run(EXP[1], *args, **kw)
    assert out == ref_out  # "Warning: numerical errors at iteration t\n", or nothing
    assert msgs == []
    assert got.dtype == ref.dtype
    if "Warning" in ref_out:
        assert np.isnan(ref).all() and np.isnan(got).all()
        assert np.isnan(lg["partial_w_dist"])
    else:
        np.testing.assert_allclose(got, ref, rtol=F64["rtol"], atol=F64["atol"])
    assert len(lg["err"]) == len(lref["err"])
    np.testing.assert_allclose(lg["err"], lref["err"], rtol=1e-6)


@pytest.mark.parametrize("case", list(_failure_cases()))
def test_failures_like_pot_log(case, path):
    args, kw = _failure_cases()[case]
    kw = dict(kw, log=True, numItermax=kw.get("numItermax", 60))
    (ref, lref), ref_out, ref_msgs = _run(LOG[0], *args, **kw)
    (got, lg), out, msgs = _run(LOG[1], *args, **kw)
    assert out == ref_out == ""
    assert msgs == ref_msgs
    assert got.dtype == ref.dtype
    tol = F64 if ref.dtype == np.float64 else dict(rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(got, ref, rtol=tol["rtol"], atol=tol["atol"] * np.nanmax(
        np.abs(ref), initial=1.0), equal_nan=True)
    if ref_msgs:
        assert lg["err"] == lref["err"] == []


def test_log_failure_warning_text_and_category():
    a, b, M = _problem(5, 4, seed=0)
    a[1] = 0.0
    with pytest.warns(UserWarning, match=r"^Numerical errors at iteration 0 of "
                      r"entropic_partial_wasserstein_logscale$"):
        G = npar.entropic_partial_wasserstein_logscale(a, b, M, 0.1, m=0.5)
    assert np.all(G[1] == 0) and np.isfinite(G).all()


@pytest.mark.parametrize("reg", [1e-3, 1e-4])
def test_small_reg_log_domain_stays_finite(reg):
    """reg so small that exp(-M / reg) underflows: the multiplicative solver
    fails (as POT's) and the log-domain one does not.  At 1e-4 some columns
    of POT's K1 underflow in the exponential domain (numbaot then recomputes
    their logsumexp: checked on the CPU launcher below)."""
    a, b, M = _problem(20, 30, seed=12)
    ref = ot.partial.entropic_partial_wasserstein_logscale(a, b, M, reg, m=0.5,
                                                           numItermax=50)
    got = npar.entropic_partial_wasserstein_logscale(a, b, M, reg, m=0.5, numItermax=50)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-12 * ref.max())
    (_, out, _) = _run(npar.entropic_partial_wasserstein, a, b, M, reg, m=0.5)
    assert out == "Warning: numerical errors at iteration 1\n"
    if reg == 1e-4:
        from numbaot.cpu import partial as cpu_partial

        st = cpu_partial.PartialLogState(M, reg, a[None], b[None], np.array([0.5]))
        cpu_partial.partial_log_steps(st, 3)
        assert (st.q <= 1e-200).any()  # the recomputed-column path ran


# ---------------------------------------------------------------------------
# checks of m and of the input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [EXP[1], LOG[1]])
def test_m_checks_like_pot(fn):
    a, b, M = _problem(4, 5, seed=1, mass_a=0.8)
    for bad, msg in [(-0.1, "Parameter m should be greater than 0"),
                     (0.81, r"Parameter m should lower or equal than min\(\|a\|_1, \|b\|_1\)")]:
        with pytest.raises(ValueError, match=msg) as ours:
            fn(a, b, M, 0.1, m=bad)
        pot = EXP[0] if fn is EXP[1] else LOG[0]
        with pytest.raises(ValueError) as theirs:
            pot(a, b, M, 0.1, m=bad)
        assert str(ours.value) == str(theirs.value)
    fn(a, b, M, 0.1, m=float(a.sum()), numItermax=2)  # equality is allowed
    assert_raises_naming(ValueError, "m", fn, a, b, M, 0.1, m=float("nan"))
    assert_raises_naming(TypeError, "m", fn, a, b, M, 0.1, m="0.5")
    assert_raises_naming(TypeError, "m", fn, a, b, M, 0.1, m=np.ones(2))


def test_m_equal_to_float32_mass_is_allowed():
    """POT compares m with |a|_1 summed in a's dtype: m = a.sum() of float32
    weights is feasible."""
    a, b, M = _problem(7, 9, seed=3, dtype=np.float32)
    m = float(a.sum())
    got = npar.entropic_partial_wasserstein(a, b, M, 0.1, m=m, numItermax=5)
    assert np.isfinite(got).all()


@pytest.mark.parametrize("fn", [EXP[1], LOG[1]])
def test_bad_input(fn):
    a, b, M = _problem(4, 5, seed=1)
    assert_raises_naming(ValueError, "M", fn, a, b, M[:, :, None], 0.1)
    Mn = M.copy()
    Mn[1, 1] = np.nan
    assert_raises_naming(ValueError, "M", fn, a, b, Mn, 0.1)
    for bad in (np.inf, -np.inf):  # refused by the plain route too: the full checks name M
        Mn[1, 1] = bad
        assert_raises_naming(ValueError, "M", fn, a, b, Mn, 0.1)
    assert_raises_naming(ValueError, "a", fn, a[:3], b, M, 0.1)
    assert_raises_naming(ValueError, "b", fn, a, -b, M, 0.1)
    # batches: 2-D a needs a 2-D b with as many columns; m one per problem
    assert_raises_naming(ValueError, "b", fn, np.stack([a, a], 1), b, M, 0.1)
    assert_raises_naming(ValueError, "a", fn, np.stack([a, a], 1), np.stack([b] * 3, 1), M,
                         0.1)
    assert_raises_naming(ValueError, "m", fn, a, np.stack([b, b], 1), M, 0.1, m=[0.1] * 3)
    assert_raises_naming(TypeError, "m", fn, a, b, M, 0.1, m=[0.1])
    assert_raises_naming(TypeError, "m", fn, a, np.stack([b, b], 1), M, 0.1, m=["x", "y"])
    assert_raises_naming(ValueError, "b", fn, a, b[:, None, None], M, 0.1)
    assert_raises_naming(ValueError, "reg", fn, a, b, M, 0.0)
    assert_raises_naming(ValueError, "reg", fn, a, b, M, np.inf)
    assert_raises_naming(TypeError, "reg", fn, a, b, M, "1")
    assert_raises_naming(ValueError, "numItermax", fn, a, b, M, 0.1, numItermax=-1)
    assert_raises_naming(TypeError, "numItermax", fn, a, b, M, 0.1, numItermax=1.5)
    assert_raises_naming(TypeError, "stopThr", fn, a, b, M, 0.1, stopThr="x")
    assert_raises_naming(TypeError, "a", fn, a.astype(complex), b, M, 0.1)


def test_unknown_method():
    a, b, M = _problem(4, 5, seed=1)
    with pytest.raises(ValueError, match=r"^Unknown method 'foo'\.$"):
        npar.entropic_partial_wasserstein(a, b, M, 0.1, method="foo")
    with pytest.raises(TypeError, match="method"):
        npar.entropic_partial_wasserstein(a, b, M, 0.1, method=1)


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_inputs_unchanged_and_deterministic(kind, path):
    a, b, M = _problem(50, 37, seed=13)
    M = np.asfortranarray(M)  # a layout the solver must copy, not modify
    copies = [x.copy() for x in (a, b, M)]
    fn = SOLVERS[kind][1]
    g1, l1 = fn(a, b, M, 0.07, m=0.6, numItermax=40, log=True)
    for x, c in zip((a, b, M), copies):
        np.testing.assert_array_equal(x, c)
    with num_threads(1):
        g2, l2 = fn(a, b, M, 0.07, m=0.6, numItermax=40, log=True)
    np.testing.assert_array_equal(g1, g2)  # bit-identical for any thread count
    assert l1["err"] == l2["err"]


def test_module_exported():
    assert "partial" in numbaot.__all__
    assert numbaot.partial is npar
    assert set(npar.__all__) == {"entropic_partial_wasserstein",
                                 "entropic_partial_wasserstein_logscale"}


def test_cpu_error_read_ahead_changes_no_iterate(path):
    """numbaot.cpu.partial takes POT's error in the same read of K0 as the
    next iteration's pass (kept for the next steps, dropped when the loop
    stops): the iterates are bit-identical to a run without error checks,
    and asking twice gives the same error."""
    a, b, M = _problem(33, 21, seed=14)
    K = cpu_partial.PartialState
    st1, st2 = (K(M, 0.1, a[None], b[None], np.array([0.9])) for _ in range(2))
    assert cpu_partial.partial_steps(st1, 11) == (11, False)
    e1 = cpu_partial.partial_error(st1)
    assert cpu_partial.partial_error(st1) == pytest.approx(e1, rel=1e-12)
    assert cpu_partial.partial_steps(st1, 4) == (4, False)
    e2 = cpu_partial.partial_error(st1)
    assert cpu_partial.partial_steps(st2, 15) == (15, False)
    np.testing.assert_array_equal(cpu_partial.partial_plan(st1), cpu_partial.partial_plan(st2))
    np.testing.assert_array_equal(cpu_partial.partial_loss(st1), cpu_partial.partial_loss(st2))
    assert cpu_partial.partial_error(st2) == pytest.approx(e2, rel=1e-12)
    ref, lref = ot.partial.entropic_partial_wasserstein(a, b, M, 0.1, m=0.9, numItermax=11,
                                                        log=True)
    assert e1 == pytest.approx(float(lref["err"][-1]), rel=1e-7)


@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("shape", [(1, 7), (40, 25), (90, 91), (300, 90), (45, 700),
                                   (362, 362), (363, 362)])
def test_small_paths_match_the_parallel_kernels(kind, shape, monkeypatch):
    """Small problems run the whole loop in one compiled call on serial
    kernels (twins of the parallel ones, and a tight multiplicative pass).
    Against the same kernels driven by blocks from Python (whose error
    check runs the next pass ahead with the tiled twin) and against the
    parallel kernels: plans, errors and losses to rounding (sums in another
    order; LLVM may contract or vectorise serial code differently).  The
    size rule: dim_a x dim_b <= SMALL_MAX_ENTRIES (log domain:
    SMALL_MAX_ENTRIES_LOG)."""
    from numbaot import _config

    a, b, M = _problem(*shape, seed=sum(shape))
    fn = SOLVERS[kind][1]
    bound = _config.SMALL_MAX_ENTRIES_LOG if kind == "log" else _config.SMALL_MAX_ENTRIES
    small = shape[0] * shape[1] <= bound
    assert cpu_partial._is_small(*shape, kind == "log") is small
    runs = {}
    for path in ("auto", "blocks", "parallel"):
        with monkeypatch.context() as mp:
            _force(mp, path)
            runs[path] = fn(a, b, M, 0.05, m=0.6, numItermax=40, log=True)
    (g0, l0), (g1, l1), (g2, l2) = runs["auto"], runs["blocks"], runs["parallel"]
    if not small:  # the parallel kernels
        np.testing.assert_array_equal(g0, g2)
    np.testing.assert_allclose(g0, g1, rtol=1e-13, atol=1e-16 * g2.max())
    np.testing.assert_allclose(g1, g2, rtol=1e-13, atol=1e-16 * g2.max())
    assert len(l0["err"]) == len(l1["err"]) == len(l2["err"]) == 4
    _check_errs(l0["err"], l1["err"], rtol=1e-7)  # above the rounding floor
    _check_errs(l1["err"], l2["err"], rtol=1e-7)
    assert l1["partial_w_dist"] == pytest.approx(l2["partial_w_dist"], rel=1e-13)


# ---------------------------------------------------------------------------
# paired batches (numbaot's own: POT solves one problem per call), each
# problem against POT run on it alone
# ---------------------------------------------------------------------------
def _batch_problem(n, m, n_hists, seed, dtype=np.float64, paired=True):
    """Histograms (n, n_hists), (m, n_hists) of different masses (0.5-1.5)
    and a cost (n, m); ``paired=False``: one shared a (n,)."""
    rng = np.random.default_rng(seed)
    _, _, M = _problem(n, m, seed=seed)
    A = rng.random((n, n_hists)) + 0.1
    A *= rng.uniform(0.5, 1.5, n_hists) / A.sum(0)
    B = rng.random((m, n_hists)) + 0.1
    B *= rng.uniform(0.5, 1.5, n_hists) / B.sum(0)
    if not paired:
        A = A[:, 0]
    return A.astype(dtype), B.astype(dtype), M.astype(dtype)


def _column(A, k):
    return A[:, k] if A.ndim == 2 else A


def _pot_each(pot, A, B, M, reg, ms, **kw):
    """POT on each problem of a batch alone: [((plan, log), printed, warnings)]."""
    return [_run(pot, _column(A, k), B[:, k], M, reg, m=float(ms[k]), log=True, **kw)
            for k in range(B.shape[1])]


def _batch_errs(refs):
    """The batch's error at each check from POT's per-problem errors: the
    Frobenius norm over the problems still running (a problem's errors stop
    when it fails or, at err = 0, stops)."""
    errs = [np.asarray(r[0][1]["err"], dtype=np.float64) for r in refs]
    return [float(np.sqrt(sum(e[c] ** 2 for e in errs if len(e) > c)))
            for c in range(max(len(e) for e in errs))]


def _masses(A, B, m_kind):
    sums = [[np.sum(_column(X, k)) for k in range(B.shape[1])] for X in (A, B)]
    bound = np.minimum(*sums)  # POT's bound: the sum of each histogram alone
    if m_kind is None:
        return None, bound
    if m_kind == "scalar":
        m = 0.4 * float(bound.min())
        return m, np.full(B.shape[1], m)
    m = np.linspace(0.2, 1.0, B.shape[1]) * bound
    return m, m


@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("m_kind", [None, "scalar", "array"])
@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("shape", [(1, 7), (6, 9), (40, 25)])
def test_batch_matches_pot_per_problem(kind, m_kind, paired, shape, path):
    A, B, M = _batch_problem(*shape, 3, seed=sum(shape), paired=paired)
    m, ms = _masses(A, B, m_kind)
    pot, ours = SOLVERS[kind]
    refs = _pot_each(pot, A, B, M, 0.1, ms, numItermax=200)
    (got, lg), out, msgs = _run(ours, A, B, M, 0.1, m=m, numItermax=200, log=True)
    assert out == "" and msgs == []
    assert type(got) is np.ndarray and got.shape == (3, *shape) and got.dtype == np.float64
    for k, ((ref, lref), _, _) in enumerate(refs):
        np.testing.assert_allclose(got[k], ref, rtol=F64["rtol"], atol=F64["atol"] * ref.max())
        assert abs(got[k].sum() - ms[k]) < 1e-9 * ms[k]
    assert list(lg) == ["err", "partial_w_dist"]
    assert lg["partial_w_dist"].shape == (3,) and lg["partial_w_dist"].dtype == np.float64
    np.testing.assert_allclose(lg["partial_w_dist"], [r[0][1]["partial_w_dist"] for r in refs],
                               rtol=1e-9)
    _check_errs(lg["err"], _batch_errs(refs), rtol=1e-7)
    assert all(type(e) is np.float64 for e in lg["err"])


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_batch_stops_on_the_batch_error(kind, path):
    """One stopping rule for the batch: POT's test on the error of the whole
    batch (the Frobenius norm of the stacked differences).  Every problem
    makes the iterations the batch made: POT run alone for that many
    iterations gives each plan."""
    A, B, M = _batch_problem(40, 25, 4, seed=3)
    pot, ours = SOLVERS[kind]
    ms = 0.7 * np.minimum(A.sum(0), B.sum(0))
    got, lg = ours(A, B, M, 0.02, m=ms, stopThr=1e-7, log=True)
    errs = np.asarray(lg["err"])
    assert 3 <= len(errs) < 100
    assert errs[-1] <= 1e-7 and np.all(errs[:-1] > 1e-7)
    refs = _pot_each(pot, A, B, M, 0.02, ms, numItermax=10 * (len(errs) - 1) + 1, stopThr=0.0)
    for k, ((ref, _), _, _) in enumerate(refs):
        np.testing.assert_allclose(got[k], ref, rtol=F64["rtol"], atol=F64["atol"] * ref.max())
    _check_errs(errs, _batch_errs(refs), rtol=1e-7)


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_batch_float32_against_float64_oracle(kind, path):
    A, B, M = _batch_problem(9, 14, 3, seed=4, dtype=np.float32)
    ms = 0.5 * np.minimum(A.sum(0), B.sum(0)).astype(np.float64)
    pot, ours = SOLVERS[kind]
    got = ours(A, B, M, 0.1, m=ms, numItermax=100)
    assert got.dtype == np.float32 and got.shape == (3, 9, 14)
    for k in range(3):
        ref = pot(*up(A[:, k], B[:, k], M), 0.1, m=ms[k], numItermax=100)
        np.testing.assert_allclose(got[k], ref, rtol=F32["rtol"], atol=F32["atol"] * ref.max())


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_batch_of_one_and_shared_a(kind, path):
    """A batch of one is the 1-D call (same iterates, bit for bit); a shared
    1-D a is a paired batch with a repeated."""
    A, B, M = _batch_problem(30, 20, 3, seed=5)
    fn = SOLVERS[kind][1]
    single = fn(A[:, 0], B[:, 0], M, 0.1, m=0.5, numItermax=50)
    one = fn(A[:, :1], B[:, :1], M, 0.1, m=0.5, numItermax=50)
    assert one.shape == (1, 30, 20)
    np.testing.assert_array_equal(one[0], single)
    shared = fn(A[:, 0], B, M, 0.1, m=0.5, numItermax=50)
    paired = fn(np.repeat(A[:, :1], 3, axis=1), B, M, 0.1, m=0.5, numItermax=50)
    np.testing.assert_array_equal(shared, paired)


@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("case", list(_failure_cases()))
def test_batch_failures_per_problem(kind, case, path):
    """A problem that fails in a batch fails as it would alone (POT's
    message, naming the problem, at POT's iteration; its plan POT's) while
    the others go on; the batch error counts the problems still running."""
    (a, b, M, reg), kw = _failure_cases()[case]
    kw = dict(kw)
    numItermax = kw.pop("numItermax", 60)
    a2, b2 = np.full_like(a, 1.0 / len(a)), np.full_like(b, 0.9 / len(b))
    A = np.stack([a2, a, a2 * 0.8], axis=1)
    B = np.stack([b2, b, b2], axis=1)
    m_case = kw.get("m", float(min(a.sum(), b.sum())))
    ms = np.array([0.5, m_case, 0.6])
    pot, ours = SOLVERS[kind]
    refs = _pot_each(pot, A, B, M, reg, ms, numItermax=numItermax)
    (got, lg), out, msgs = _run(ours, A, B, M, reg, m=ms, numItermax=numItermax, log=True)
    want_out = "".join(r[1].replace("\n", f" (problem {k})\n") for k, r in enumerate(refs))
    want_msgs = [msg + f" (problem {k})" for k, r in enumerate(refs) for msg in r[2]]
    assert out == want_out and msgs == want_msgs
    for k, ((ref, lref), _, _) in enumerate(refs):
        if kind == "exp" and "Warning" in refs[k][1]:
            assert np.isnan(got[k]).all() and np.isnan(lg["partial_w_dist"][k])
            continue
        # (POT's log-domain plan is float64 for float32 inputs with m a float)
        tol = F64 if got.dtype == np.float64 else dict(rtol=1e-3, atol=1e-6)
        np.testing.assert_allclose(got[k], ref, rtol=tol["rtol"], atol=tol["atol"] * np.nanmax(
            np.abs(ref), initial=1.0), equal_nan=True)
    want = _batch_errs(refs)
    assert len(lg["err"]) == len(want)
    if want:
        _check_errs(lg["err"], want, rtol=1e-6)


def test_batch_mass_bound_takes_any_summation_order():
    """A batch's masses are checked per problem against POT's bound for that
    problem alone (the histogram's own sum), with the rounding of another
    summation order allowed: the natural ``np.minimum(A.sum(0),
    B.sum(0))`` (NumPy's column sums) is accepted; a mass above the bound
    by more raises POT's message naming the problem."""
    rng = np.random.default_rng(21)
    for _ in range(50):
        A = rng.random((300, 4))
        B = rng.random((200, 4)) * 1.3
        M = rng.random((300, 200))
        ms = np.minimum(A.sum(0), B.sum(0))
        G = npar.entropic_partial_wasserstein(A, B, M, 0.5, m=ms, numItermax=1)
        assert G.shape == (4, 300, 200)
    over = ms.copy()
    over[2] *= 1 + 1e-9
    with pytest.raises(ValueError, match=r"^Problem infeasible\. Parameter m should lower or "
                       r"equal than min\(\|a\|_1, \|b\|_1\)\. \(problem 2\)$"):
        npar.entropic_partial_wasserstein(A, B, M, 0.5, m=over, numItermax=1)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_cost_scale_beyond_2_52_raises(method):
    """max|M| / reg above 2**52: the ValueError of every other solver (POT
    returns a NaN plan, or in the log domain a plan of mass 1 that breaks
    the row bounds, without a warning)."""
    rng = np.random.default_rng(6)
    M = rng.random((5, 4)) * 1e20
    with pytest.raises(ValueError, match="M / reg is too large"):
        numbaot.partial.entropic_partial_wasserstein(np.full(5, 0.2), np.full(4, 0.25), M, 1.0,
                                                     m=0.5, method=method)
