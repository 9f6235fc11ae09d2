"""numbaot.unbalanced against POT 0.9.7 (the oracle) and closed forms."""
import warnings

import numpy as np
import pytest

import numbaot
from numbaot import unbalanced as nu

from _helpers import F32, F64, assert_close, call_recording, make_problem, ot, random_hist, up

INF = float("inf")
REG_MS = [1.0, 0.3, (0.5, INF), (INF, 0.7), [2.0], (INF, INF), 0.0]


def _unb_problem(n, m, seed=0, dtype=np.float64, mass_b=1.4):
    a, b, M = make_problem(n, m, seed)
    return a.astype(dtype), (b * mass_b).astype(dtype), M.astype(dtype)


def _pot(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _check_log(lg, ref, tol, keys=None):
    keys = keys or set(ref)
    assert set(lg) == set(ref)
    assert len(lg["err"]) == len(ref["err"])
    for k in keys:
        if k == "err":
            assert_close(np.asarray(lg[k], np.float64), np.asarray(ref[k], np.float64),
                         rtol=1e-6, atol=1e-12)
        else:
            assert_close(lg[k], ref[k], **tol)


# ---------------------------------------------------------------------------
# multiplicative solver vs POT
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("reg_m", REG_MS)
@pytest.mark.parametrize("reg_type", ["kl", "entropy"])
@pytest.mark.parametrize("shape", [(1, 5), (6, 1), (40, 25), (70, 33)])
def test_knopp_matches_pot(reg_m, reg_type, shape):
    # reg_m = inf on both sides is balanced OT: equal masses (unequal ones
    # raise, test_adversarial_unbalanced)
    a, b, M = _unb_problem(*shape, mass_b=1.0 if reg_m == (INF, INF) else 1.4)
    ref, lref = _pot(ot.unbalanced.sinkhorn_knopp_unbalanced, a, b, M, 0.05, reg_m,
                     reg_type=reg_type, log=True)
    (got, lg), rec = call_recording(nu.sinkhorn_knopp_unbalanced, a, b, M, 0.05, reg_m,
                                    reg_type=reg_type, log=True)
    assert got.dtype == np.float64 and got.shape == shape
    assert_close(got, ref, **F64)
    _check_log(lg, lref, dict(rtol=1e-7, atol=1e-9))
    if reg_type == "entropy":
        assert any("overwritten by the one matrix" in msg for _, msg in rec)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_explicit_c_and_warmstart(dtype):
    a, b, M = _unb_problem(30, 20, seed=3, dtype=dtype)
    rng = np.random.default_rng(1)
    c = rng.uniform(0.5, 2.0, size=M.shape).astype(dtype)
    ws = (rng.normal(size=30) * 0.1, rng.normal(size=20) * 0.1)
    ref, lref = _pot(ot.unbalanced.sinkhorn_knopp_unbalanced, *up(a, b, M), 0.1, (0.7, 1.3),
                     c=up(c)[0], warmstart=ws, log=True)
    got, lg = nu.sinkhorn_unbalanced(a, b, M, 0.1, (0.7, 1.3), c=c, warmstart=ws, log=True)
    assert got.dtype == dtype
    tol = F64 if dtype == np.float64 else F32
    assert_close(got, ref, **tol)
    assert_close(lg["cost"], lref["cost"], **tol)
    assert_close(lg["total_cost"], lref["total_cost"], **tol)
    if dtype == np.float64:
        assert len(lg["err"]) == len(lref["err"])


def test_2d_b_losses_and_log():
    a, _, M = _unb_problem(25, 18, seed=4)
    rng = np.random.default_rng(2)
    B = random_hist(rng, 18, 3) * np.array([0.5, 1.0, 2.0])
    ref, lref = _pot(ot.unbalanced.sinkhorn_unbalanced, a, B, M, 0.05, 0.8, log=True)
    got, lg = nu.sinkhorn_unbalanced(a, B, M, 0.05, 0.8, log=True)
    assert got.shape == (3,)
    assert_close(got, ref, **F64)
    _check_log(lg, lref, dict(rtol=1e-7, atol=1e-9))
    # sinkhorn_unbalanced2 with 2-D b: the same losses, POT's warning
    (got2, _), rec = call_recording(nu.sinkhorn_unbalanced2, a, B, M, 0.05, 0.8, log=True)
    assert_close(got2, ref, **F64)
    assert any("Reg_type not implemented yet" in msg for _, msg in rec)


@pytest.mark.parametrize("returnCost", ["linear", "total"])
@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_stabilized",
                                    "sinkhorn_translation_invariant", "sinkhorn_reg_scaling"])
def test_sinkhorn_unbalanced2(returnCost, method):
    a, b, M = _unb_problem(20, 15, seed=5)
    ref, lref = _pot(ot.unbalanced.sinkhorn_unbalanced2, a, b, M, 0.1, 0.5, method=method,
                     returnCost=returnCost, log=True)
    got, lg = _pot(nu.sinkhorn_unbalanced2, a, b, M, 0.1, 0.5, method=method,
                   returnCost=returnCost, log=True)
    assert np.ndim(got) == 0
    assert_close(got, ref, **F64)
    _check_log(lg, lref, dict(rtol=1e-7, atol=1e-9))


def test_total_cost_is_the_objective():
    """total_cost against the objective evaluated by hand (float64 NumPy)."""
    a, b, M = _unb_problem(12, 9, seed=6)
    reg, rm1, rm2 = 0.2, 0.6, 1.5
    G, lg = nu.sinkhorn_unbalanced(a, b, M, reg, (rm1, rm2), log=True, stopThr=1e-12)
    c = np.outer(a, b)

    def kl(p, q):
        return np.sum(p * np.log(p / q + 1e-16))

    obj = (G * M).sum() + reg * kl(G, c) + rm1 * kl(G.sum(1), a) + rm2 * kl(G.sum(0), b)
    assert_close(lg["total_cost"], obj, rtol=1e-12, atol=1e-14)
    assert_close(lg["cost"], (G * M).sum(), rtol=1e-12, atol=1e-14)


def test_fixed_point_conditions():
    """The returned plan satisfies the first-order conditions of the problem:
    reg log(G / K c) = -reg_m1 log(G 1 / a) (rows) etc., i.e.
    u = (a / K v)^fi1 at convergence."""
    a, b, M = _unb_problem(15, 11, seed=7)
    reg, rm = 0.1, 0.4
    G, lg = _pot(nu.sinkhorn_unbalanced, a, b, M, reg, rm, reg_type="entropy", log=True,
                 stopThr=1e-14, numItermax=20000)
    # optimality of the unbalanced objective: for each i,
    # reg * logu_i = -rm * log(sum_j G_ij / a_i)
    logu = lg["logu"]
    assert_close(reg * logu, -rm * np.log(G.sum(1) / a), rtol=1e-8, atol=1e-10)
    assert_close(reg * lg["logv"], -rm * np.log(G.sum(0) / b), rtol=1e-8, atol=1e-10)


def test_semi_relaxed_marginal_is_exact():
    a, b, M = _unb_problem(14, 10, seed=8)
    G = nu.sinkhorn_unbalanced(a, b, M, 0.1, (INF, 0.5), stopThr=1e-13, numItermax=10000)
    assert_close(G.sum(1), a, rtol=1e-9, atol=1e-12)


def test_numerical_errors_warning_matches_pot():
    a, b, M = _unb_problem(10, 8, seed=9)
    M = M * 2000.0
    ref, lref = _pot(ot.unbalanced.sinkhorn_knopp_unbalanced, a, b, M, 0.01, 1.0, log=True)
    (got, lg), rec = call_recording(nu.sinkhorn_knopp_unbalanced, a, b, M, 0.01, 1.0, log=True)
    (_, _), rec_pot = call_recording(ot.unbalanced.sinkhorn_knopp_unbalanced, a, b, M, 0.01,
                                     1.0, log=True)
    user = [m for cat, m in rec if issubclass(cat, UserWarning)]
    assert user == [m for cat, m in rec_pot if issubclass(cat, UserWarning)]
    assert user == ["Numerical errors at iteration 0"] or user[0].startswith("Numerical errors")
    assert len(lg["err"]) == len(lref["err"])
    assert np.all(np.isfinite(got))


def test_reg_scaling_warns_and_unknown_method():
    a, b, M = _unb_problem(6, 5)
    _, rec = call_recording(nu.sinkhorn_unbalanced, a, b, M, 0.1, 1.0, method="sinkhorn_reg_scaling")
    assert any("Method not implemented yet" in m for _, m in rec)
    with pytest.raises(ValueError, match="Unknown method 'foo'"):
        nu.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method="foo")
    with pytest.raises(ValueError, match="Unknown method foo"):
        nu.sinkhorn_unbalanced2(a, b, M, 0.1, 1.0, method="foo")
    with pytest.raises(ValueError, match="Unknown returnCost"):
        nu.sinkhorn_unbalanced2(a, b, M, 0.1, 1.0, returnCost="bar")


def test_float32_matches_float64_pot():
    a, b, M = _unb_problem(60, 45, seed=10, dtype=np.float32)
    ref = _pot(ot.unbalanced.sinkhorn_unbalanced, *up(a, b, M), 0.05, 1.0, stopThr=1e-9)
    got = nu.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, stopThr=1e-9)
    assert got.dtype == np.float32
    assert_close(got, ref, **F32)


def test_float32_lanes_fall_back_to_float64_out_of_range():
    # c = 1e-22 puts K v and u outside the range where float32 products are
    # exact enough: the solver must redo those iterations in float64 lanes
    a, b, M = _unb_problem(60, 45, seed=12, dtype=np.float32)
    c = np.full(M.shape, 1e-22, dtype=np.float32)
    ref = _pot(ot.unbalanced.sinkhorn_unbalanced, *up(a, b, M), 0.05, 1.0, c=c.astype(np.float64),
               stopThr=1e-9)
    got = nu.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, c=c, stopThr=1e-9)
    assert got.dtype == np.float32
    assert np.all(np.isfinite(got))
    assert_close(got, ref, **F32)


def test_float32_thread_count_invariance(restore_num_threads):
    a, b, M = _unb_problem(300, 70, seed=13, dtype=np.float32)
    restore_num_threads(1)
    g1 = nu.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=50)
    restore_num_threads(2)
    g2 = nu.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=50)
    assert np.array_equal(g1, g2)


def test_empty_weights_are_uniform():
    _, _, M = _unb_problem(8, 6)
    ref = _pot(ot.unbalanced.sinkhorn_unbalanced, [], [], M, 0.1, 1.0)
    got = nu.sinkhorn_unbalanced([], [], M, 0.1, 1.0)
    assert_close(got, ref, **F64)


def test_thread_count_invariance(restore_num_threads):
    a, b, M = _unb_problem(300, 70, seed=11)
    restore_num_threads(1)
    g1 = nu.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=50)
    restore_num_threads(2)
    g2 = nu.sinkhorn_unbalanced(a, b, M, 0.05, 1.0, numItermax=50)
    assert np.array_equal(g1, g2)


def test_inputs_not_modified():
    a, b, M = _unb_problem(9, 7)
    c = np.ones_like(M)
    saved = [x.copy() for x in (a, b, M, c)]
    nu.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, c=c, log=True)
    nu.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method="sinkhorn_log")
    for x, s in zip((a, b, M, c), saved):
        assert np.array_equal(x, s)


# ---------------------------------------------------------------------------
# paired batches
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_paired_batch_equals_loop(method):
    _, _, M = _unb_problem(20, 14, seed=12)
    rng = np.random.default_rng(3)
    A = random_hist(rng, 20, 3)
    B = random_hist(rng, 14, 3) * 1.7
    got = nu.sinkhorn_unbalanced(A, B, M, 0.1, 0.6, method=method, reg_type="entropy",
                                 stopThr=1e-12, numItermax=5000)
    for k in range(3):
        G = _pot(ot.unbalanced.sinkhorn_unbalanced, A[:, k], B[:, k], M, 0.1, 0.6,
                 reg_type="entropy", stopThr=1e-12, numItermax=5000)
        assert_close(got[k], (G * M).sum(), rtol=1e-7, atol=1e-10)


# ---------------------------------------------------------------------------
# log-domain solver
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("reg_m", [1.0, (0.5, INF), (INF, 2.0)])
@pytest.mark.parametrize("reg_type", ["kl", "entropy"])
def test_log_solver_same_fixed_point(reg_m, reg_type):
    a, b, M = _unb_problem(30, 22, seed=13)
    kw = dict(reg_type=reg_type, stopThr=1e-13, numItermax=20000, log=True)
    ref, lref = _pot(ot.unbalanced.sinkhorn_knopp_unbalanced, a, b, M, 0.05, reg_m, **kw)
    got, lg = _pot(nu.sinkhorn_unbalanced, a, b, M, 0.05, reg_m, method="sinkhorn_log", **kw)
    assert_close(got, ref, rtol=1e-7, atol=1e-12)
    assert_close(lg["cost"], lref["cost"], rtol=1e-8)
    assert_close(lg["total_cost"], lref["total_cost"], rtol=1e-7, atol=1e-12)
    assert_close(lg["logu"], lref["logu"], rtol=1e-6, atol=1e-8)


def test_log_solver_explicit_c_and_2d_b():
    a, b, M = _unb_problem(16, 12, seed=14)
    rng = np.random.default_rng(4)
    c = rng.uniform(0.5, 2.0, size=M.shape)
    kw = dict(stopThr=1e-13, numItermax=20000)
    ref = _pot(ot.unbalanced.sinkhorn_knopp_unbalanced, a, b, M, 0.05, 0.8, c=c, **kw)
    got = nu.sinkhorn_unbalanced(a, b, M, 0.05, 0.8, c=c, method="sinkhorn_log", **kw)
    assert_close(got, ref, rtol=1e-7, atol=1e-12)
    B = np.stack([b, 2 * b], axis=1)
    ref2 = _pot(ot.unbalanced.sinkhorn_knopp_unbalanced, a, B, M, 0.05, 0.8, **kw)
    got2 = nu.sinkhorn_unbalanced(a, B, M, 0.05, 0.8, method="sinkhorn_log", **kw)
    assert_close(got2, ref2, rtol=1e-7, atol=1e-12)


def test_log_solver_small_reg_stays_finite():
    """At reg = 1e-3 exp(-M/reg) underflows: POT's multiplicative solver hits
    numerical errors, the log solver converges; the result satisfies the
    first-order conditions reg log u = -reg_m log(G 1 / a) (entropy)."""
    a, b, M = _unb_problem(25, 20, seed=15)
    M = M + 0.8  # every exp(-M / reg) underflows to 0 in float64
    reg, rm = 1e-3, 0.5
    _, rec = call_recording(ot.unbalanced.sinkhorn_knopp_unbalanced, a, b, M, reg, rm,
                            reg_type="entropy")
    assert any("Numerical errors" in m for _, m in rec)
    G, lg = _pot(nu.sinkhorn_unbalanced, a, b, M, reg, rm, method="sinkhorn_log",
                 reg_type="entropy", log=True, numItermax=20000, stopThr=1e-13)
    assert np.all(np.isfinite(G))
    assert_close(reg * lg["logu"], -rm * np.log(G.sum(1) / a), rtol=1e-6, atol=1e-9)
    assert_close(reg * lg["logv"], -rm * np.log(G.sum(0) / b), rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------
# stabilized, translation invariant, barycenters
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("reg_m", [1.0, (0.5, INF)])
@pytest.mark.parametrize("fn", ["sinkhorn_stabilized_unbalanced",
                                "sinkhorn_unbalanced_translation_invariant"])
def test_host_solvers_match_pot(fn, reg_m):
    a, b, M = _unb_problem(20, 16, seed=16)
    ref, lref = _pot(getattr(ot.unbalanced, fn), a, b, M, 0.01, reg_m, log=True)
    got, lg = _pot(getattr(nu, fn), a, b, M, 0.01, reg_m, log=True)
    assert_close(got, ref, **F64)
    _check_log(lg, lref, dict(rtol=1e-7, atol=1e-9))
    B = np.stack([b, 0.5 * b], axis=1)
    ref2 = _pot(getattr(ot.unbalanced, fn), a, B, M, 0.05, reg_m)
    got2 = _pot(getattr(nu, fn), a, B, M, 0.05, reg_m)
    assert_close(got2, ref2, **F64)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_stabilized",
                                    "sinkhorn_translation_invariant"])
def test_barycenter_matches_pot(method):
    rng = np.random.default_rng(5)
    A = random_hist(rng, 30, 3) * np.array([1.0, 2.0, 0.5])
    x = np.arange(30, dtype=np.float64).reshape(-1, 1)
    M = ot.dist(x, x)
    M /= M.max()
    w = np.array([0.2, 0.5, 0.3])
    ref, lref = _pot(ot.unbalanced.barycenter_unbalanced, A, M, 0.01, 1.0, method=method,
                     weights=w, log=True)
    got, lg = _pot(nu.barycenter_unbalanced, A, M, 0.01, 1.0, method=method, weights=w, log=True)
    assert_close(got, ref, **F64)
    _check_log(lg, lref, dict(rtol=1e-7, atol=1e-9))


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kw, exc, pat", [
    (dict(reg=0.0), ValueError, "reg"),
    (dict(reg=-1.0), ValueError, "reg"),
    (dict(reg=np.nan), ValueError, "reg"),
    (dict(reg_m=-0.5), ValueError, "reg_m"),
    (dict(reg_m=(1.0, 2.0, 3.0)), ValueError, "reg_m"),
    (dict(reg_m=(1.0, np.nan)), ValueError, "reg_m"),
    (dict(reg_m="a"), TypeError, "reg_m"),
    (dict(reg_type="l2"), ValueError, "reg_type"),
    (dict(c=np.ones((3, 3))), ValueError, "c"),
    (dict(c=-np.ones((6, 5))), ValueError, "c"),
    (dict(warmstart=(np.zeros(6), np.zeros(4))), ValueError, "warmstart"),
    (dict(numItermax=-1), ValueError, "numItermax"),
])
def test_bad_arguments(kw, exc, pat):
    a, b, M = _unb_problem(6, 5)
    args = dict(reg=0.1, reg_m=1.0)
    args.update(kw)
    reg, reg_m = args.pop("reg"), args.pop("reg_m")
    with pytest.raises(exc, match=pat):
        nu.sinkhorn_unbalanced(a, b, M, reg, reg_m, **args)


def test_bad_arrays():
    a, b, M = _unb_problem(6, 5)
    with pytest.raises(ValueError, match="b"):
        nu.sinkhorn_unbalanced(a, b[:4], M, 0.1, 1.0)
    Mn = M.copy()
    Mn[0, 0] = np.nan
    with pytest.raises(ValueError, match="M"):
        nu.sinkhorn_unbalanced(a, b, Mn, 0.1, 1.0)
    with pytest.raises(ValueError, match="a"):
        nu.sinkhorn_unbalanced(-a, b, M, 0.1, 1.0)
    with pytest.raises(ValueError, match="paired"):
        nu.sinkhorn_stabilized_unbalanced(np.stack([a, a], 1), np.stack([b, b], 1), M, 0.1, 1.0)
    with pytest.raises(ValueError, match="A"):
        nu.barycenter_unbalanced(np.ones(5), M, 0.1, 1.0)
    with pytest.raises(ValueError, match="weights"):
        nu.barycenter_unbalanced(np.ones((6, 2)), np.ones((6, 6)), 0.1, 1.0, weights=[1.0])


def test_top_level_exports():
    for name in ("sinkhorn_unbalanced", "sinkhorn_unbalanced2", "barycenter_unbalanced"):
        assert getattr(numbaot, name) is getattr(nu, name)


# ---------------------------------------------------------------------------
# the launcher contract (numbaot.cpu.unbalanced; the CUDA launchers are
# compared with these in tests/cuda/test_unbalanced_cuda.py)
# ---------------------------------------------------------------------------
def test_stopping_rule():
    """``uot_rule``: POT's per-iteration rule, once for every solver."""
    from numbaot.cpu import unbalanced as ku

    errs = np.full(3, -1.0)
    assert ku.uot_rule(True, 1.0, 1.0, 1.0, 1.0, 0.5, errs, 0) == ku.FAILED
    assert errs[0] == -1.0  # a failed step stores no error
    # err = (du / max(mu, 1) + dv / max(mv, 1)) / 2
    assert ku.uot_rule(False, 0.4, 0.5, 3.0, 2.0, 0.5, errs, 1) == ku.GO_ON
    assert errs[1] == 0.5 * (0.4 + 1.5)
    assert ku.uot_rule(False, 0.1, 4.0, 0.0, 0.0, 0.5, errs, 2) == ku.CONVERGED
    assert errs[2] == 0.5 * 0.025


def _states(S_args, log_domain):
    from numbaot.cpu import unbalanced as ku

    M, reg, ca, cb, C, use_mat, a, b, fi1, fi2 = S_args
    shape_u, shape_v = (b.shape[0], M.shape[0]), (b.shape[0], M.shape[1])
    init = np.zeros if log_domain else np.ones
    cls = ku.UotLogState if log_domain else ku.UotState
    return cls(M, reg, ca, cb, C, use_mat, a, b, init(shape_u), init(shape_v), fi1, fi2)


@pytest.mark.parametrize("log_domain", [False, True])
def test_launchers_make_the_public_result(log_domain):
    """The public solver is its launchers under POT's loop: the same errors,
    scalings and plan as driving ``UotState`` / ``uot_steps`` by hand, and
    ``uot_steps`` run in pieces continues where it stopped."""
    from numbaot.cpu import unbalanced as ku

    a, b, M = _unb_problem(9, 7, seed=21)
    reg, reg_m = 0.1, (0.6, 2.0)
    fi1, fi2 = reg_m[0] / (reg_m[0] + reg), reg_m[1] / (reg_m[1] + reg)
    args = (M, reg, a, b, np.zeros((1, 1)), False, a.reshape(1, -1), b.reshape(1, -1), fi1, fi2)
    steps = ku.uot_log_steps if log_domain else ku.uot_steps
    method = "sinkhorn_log" if log_domain else "sinkhorn"
    G, lg = nu.sinkhorn_unbalanced(a, b, M, reg, reg_m, method=method, numItermax=25,
                                   stopThr=0.0, log=True)
    st = _states(args, log_domain)
    errs = []
    assert steps(st, 25, 0.0, errs) == (25, False)
    assert errs == lg["err"]
    st2 = _states(args, log_domain)
    errs2 = []
    assert steps(st2, 10, 0.0, errs2) == (10, False)
    assert steps(st2, 15, 0.0, errs2) == (15, False)
    assert errs2 == errs
    stats = ku.uot_log_stats if log_domain else ku.uot_stats
    for s in (st, st2):
        plan, rows, cols, out = stats(s, True)
        assert np.array_equal(plan, G)
        assert_close(rows, G.sum(1), rtol=1e-13, atol=0)
        assert_close(cols, G.sum(0), rtol=1e-13, atol=0)
        assert out[0] == lg["cost"]
        assert stats(s, False)[0] is None
    if not log_domain:  # the same products, possibly associated otherwise
        assert_close(ku.uot_plan(st), G, rtol=1e-14, atol=0)
        u, v = ku.uot_scalings(st)
        assert u.shape == (1, 9) and v.shape == (1, 7) and u.dtype == np.float64
    # convergence: the iteration count is the number of errors, the last below stopThr
    st3 = _states(args, log_domain)
    errs3 = []
    nit, failed = steps(st3, 1000, 1e-6, errs3)
    assert not failed and nit == len(errs3) < 1000 and errs3[-1] < 1e-6 <= errs3[-2]


def test_launcher_failure_undoes_the_step():
    """A step that breaks (K^T u underflows to 0) is undone: (its index,
    True), no error stored for it, the scalings of the step before."""
    from numbaot.cpu import unbalanced as ku

    a, b, M = _unb_problem(6, 5, seed=22)
    M = M * 2000.0
    args = (M, 0.01, a, b, np.zeros((1, 1)), False, a.reshape(1, -1), b.reshape(1, -1),
            1.0 / 1.01, 1.0 / 1.01)
    st = _states(args, False)
    errs = []
    nit, failed = ku.uot_steps(st, 50, 0.0, errs)
    assert failed and len(errs) == nit
    u, v = (x.copy() for x in ku.uot_scalings(st))
    st2 = _states(args, False)
    assert ku.uot_steps(st2, nit, 0.0, []) == (nit, False)
    assert np.array_equal(ku.uot_scalings(st2)[0], u)
    assert np.array_equal(ku.uot_scalings(st2)[1], v)
