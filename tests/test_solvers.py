"""numbaot.solve / numbaot.solve_sample / numbaot.OTResult against POT 0.9.7.

Oracle: POT's ``ot.solve`` / ``ot.solve_sample`` on the same problem (float64;
for float32 inputs, POT on the float64 copy, with a float32 tolerance).
Every entropic case numbaot covers is compared attribute by attribute; the
cases it leaves to POT must raise NotImplementedError naming POT's call.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import numbaot
from numbaot import OTResult

ot = pytest.importorskip("ot")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INF = float("inf")


def _problem(n, m, seed, dtype=np.float64, uniform=False, dim=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    y = rng.normal(size=(m, dim)) + 0.5
    M = ot.dist(x, y)
    M /= M.max()
    if uniform:
        a, b = None, None
    else:
        a = rng.random(n) + 0.1
        b = rng.random(m) + 0.1
        a /= a.sum()
        b /= b.sum()
        a, b = a.astype(dtype), b.astype(dtype)
    return x.astype(dtype), y.astype(dtype), M.astype(dtype), a, b


def _f64(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def _tols(dtype):
    # float64: both converge to tol=1e-9 of the same fixed point; float32:
    # numbaot's float32 result against POT's float64 solve
    return dict(rtol=1e-7, atol=1e-10) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-6)


def _pot_solve(M, a, b, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ot.solve(_f64(M), _f64(a), _f64(b), **kw)


def _check_result(res, ref, dtype, potentials=True):
    tol = _tols(dtype)
    assert isinstance(res, OTResult)
    assert res.plan.dtype == dtype
    np.testing.assert_allclose(res.plan, ref.plan, **tol)
    np.testing.assert_allclose(float(res.value), float(ref.value), **tol)
    np.testing.assert_allclose(float(res.value_linear), float(ref.value_linear), **tol)
    assert np.asarray(res.value).dtype == dtype
    assert np.asarray(res.value_linear).dtype == dtype
    if potentials:
        ptol = dict(rtol=1e-6, atol=1e-8) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-3)
        for p, q in zip(res.potentials, ref.potentials):
            np.testing.assert_allclose(p, q, **ptol)
        np.testing.assert_allclose(res.potential_a, ref.potential_a, **ptol)
        np.testing.assert_allclose(res.potential_b, ref.potential_b, **ptol)
    for p, q in zip(res.marginals, ref.marginals):
        np.testing.assert_allclose(p, q, **tol)
    np.testing.assert_allclose(res.marginal_a, ref.marginal_a, **tol)
    np.testing.assert_allclose(res.marginal_b, ref.marginal_b, **tol)
    assert res.status == ref.status
    assert res.log is None and ref.log is None
    assert res.value_quad is None and res.lazy_plan is None


# --------------------------------------------------------------------------
# solve: balanced entropic (POT: sinkhorn_log)
# --------------------------------------------------------------------------
# float32 cannot reach POT's default tol=1e-9 (POT's float32 solve warns as well)
@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("reg_type", ["KL", "kl", "entropy"])
@pytest.mark.parametrize("shape,uniform", [((6, 4), False), ((11, 13), True), ((1, 3), False)])
def test_solve_balanced_matches_pot(shape, uniform, reg_type, dtype):
    _, _, M, a, b = _problem(*shape, seed=sum(shape), dtype=dtype, uniform=uniform)
    ref = _pot_solve(M, a, b, reg=0.2, reg_type=reg_type)
    res = numbaot.solve(M, a, b, reg=0.2, reg_type=reg_type)
    _check_result(res, ref, dtype)


def test_solve_balanced_kl_and_entropy_share_the_plan():
    _, _, M, a, b = _problem(5, 7, seed=1)
    r_kl = numbaot.solve(M, a, b, reg=0.3)
    r_ent = numbaot.solve(M, a, b, reg=0.3, reg_type="entropy")
    np.testing.assert_array_equal(r_kl.plan, r_ent.plan)
    # float64 closed forms of the two values from the (shared) plan
    P = r_kl.plan
    lin = np.sum(P * M)
    np.testing.assert_allclose(r_kl.value, lin + 0.3 * np.sum(P * np.log(P / np.outer(a, b))),
                               rtol=1e-12)
    np.testing.assert_allclose(r_ent.value, lin + 0.3 * np.sum(P * np.log(P)), rtol=1e-12)


def test_solve_balanced_zero_mass_kl_value(capsys):
    _, _, M, a, b = _problem(5, 4, seed=2)
    a = a.copy()
    a[1] = 0.0
    a /= a.sum()
    ref = _pot_solve(M, a, b, reg=0.2)
    pot_out = capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no log(0) of the zero bin
        res = numbaot.solve(M, a, b, reg=0.2)
    assert capsys.readouterr().out == pot_out  # POT's message about the 0 mass
    _check_result(res, ref, np.float64, potentials=False)
    assert np.all(res.plan[1] == 0)


@pytest.mark.parametrize("max_iter,tol", [(7, None), (30, 1e-3), (None, 1e-2)])
def test_solve_balanced_max_iter_tol(max_iter, tol):
    _, _, M, a, b = _problem(8, 6, seed=3)
    ref = _pot_solve(M, a, b, reg=0.05, max_iter=max_iter, tol=tol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = numbaot.solve(M, a, b, reg=0.05, max_iter=max_iter, tol=tol)
    _check_result(res, ref, np.float64)


def test_solve_balanced_not_converged_warns():
    _, _, M, a, b = _problem(8, 6, seed=3)
    with pytest.warns(UserWarning, match="Sinkhorn did not converge"):
        numbaot.solve(M, a, b, reg=0.01, max_iter=3)


@pytest.mark.parametrize("max_iter", [2, 4, None])
def test_solve_grad_last_step_matches_pot(max_iter):
    _, _, M, a, b = _problem(7, 5, seed=4)
    ref = _pot_solve(M, a, b, reg=0.1, grad="last_step", max_iter=max_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = numbaot.solve(M, a, b, reg=0.1, grad="last_step", max_iter=max_iter)
    _check_result(res, ref, np.float64)


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
def test_solve_grad_last_step_one_iteration():
    # POT fails here (numItermax=0 in sinkhorn_log); the step from zero
    # potentials, in float64 closed form:
    from scipy.special import logsumexp

    _, _, M, a, b = _problem(7, 5, seed=4)
    res = numbaot.solve(M, a, b, reg=0.1, grad="last_step", max_iter=1)
    u = np.log(a) - logsumexp(-M / 0.1, axis=1)
    v = np.log(b) - logsumexp(-M / 0.1, axis=0)
    np.testing.assert_allclose(res.potentials[0], u, rtol=1e-12)
    np.testing.assert_allclose(res.potentials[1], v, rtol=1e-12)
    np.testing.assert_allclose(res.plan, np.exp(-M / 0.1 + u[:, None] + v[None, :]), rtol=1e-12)


@pytest.mark.parametrize("grad", ["envelope", "detach"])
def test_solve_grad_modes_same_numbers(grad):
    _, _, M, a, b = _problem(6, 5, seed=5)
    ref = _pot_solve(M, a, b, reg=0.1, grad=grad)
    res = numbaot.solve(M, a, b, reg=0.1, grad=grad)
    _check_result(res, ref, np.float64)


def test_solve_balanced_ignores_c_plan_init_potentials_init_like_pot():
    _, _, M, a, b = _problem(6, 5, seed=6)
    extra = dict(c=np.ones((6, 5)), plan_init=np.full((6, 5), 1 / 30),
                 potentials_init=(np.ones(6), -np.ones(5)), n_threads=4, method="sinkhorn")
    ref = _pot_solve(M, a, b, reg=0.1, **extra)
    res = numbaot.solve(M, a, b, reg=0.1, **extra)
    _check_result(res, ref, np.float64)
    np.testing.assert_array_equal(res.plan, numbaot.solve(M, a, b, reg=0.1).plan)


def test_solve_verbose_prints_like_pot(capsys):
    _, _, M, a, b = _problem(6, 5, seed=7)
    _pot_solve(M, a, b, reg=0.1, verbose=True)
    pot_out = capsys.readouterr().out
    numbaot.solve(M, a, b, reg=0.1, verbose=True)
    out = capsys.readouterr().out
    assert pot_out and out.splitlines()[:2] == pot_out.splitlines()[:2]


# --------------------------------------------------------------------------
# solve: unbalanced / semi-relaxed (POT: sinkhorn_knopp_unbalanced)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("unbalanced", [1.0, [0.7], (0.5, 2.0), (INF, 1.0), (1.0, INF),
                                        np.array([2.0, 0.4])])
@pytest.mark.parametrize("shape,uniform", [((6, 4), False), ((9, 12), True)])
def test_solve_unbalanced_matches_pot(shape, uniform, unbalanced, dtype):
    _, _, M, a, b = _problem(*shape, seed=10 + sum(shape), dtype=dtype, uniform=uniform)
    ref = _pot_solve(M, a, b, reg=0.1, unbalanced=unbalanced)
    res = numbaot.solve(M, a, b, reg=0.1, unbalanced=unbalanced, unbalanced_type="KL")
    _check_result(res, ref, dtype)


def test_solve_unbalanced_semi_relaxed_keeps_the_hard_marginal():
    _, _, M, a, b = _problem(7, 5, seed=11)
    res = numbaot.solve(M, a, b, reg=0.1, unbalanced=(INF, 0.5))
    np.testing.assert_allclose(res.marginal_a, a, rtol=1e-9)
    assert not np.allclose(res.marginal_b, b, rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_solve_unbalanced_reference_measure_c(dtype):
    _, _, M, a, b = _problem(6, 5, seed=12, dtype=dtype)
    c = (np.random.default_rng(0).random((6, 5)) + 0.5).astype(dtype)
    ref = _pot_solve(M, a, b, reg=0.2, unbalanced=1.0, c=_f64(c))
    res = numbaot.solve(M, a, b, reg=0.2, unbalanced=1.0, c=c)
    _check_result(res, ref, dtype)


def test_solve_unbalanced_warm_start():
    _, _, M, a, b = _problem(8, 7, seed=13)
    first = numbaot.solve(M, a, b, reg=0.05, unbalanced=1.0, max_iter=5)
    init = tuple(np.array(p) for p in first.potentials)
    ref = _pot_solve(M, a, b, reg=0.05, unbalanced=1.0, potentials_init=init, max_iter=3)
    res = numbaot.solve(M, a, b, reg=0.05, unbalanced=1.0, potentials_init=init, max_iter=3)
    _check_result(res, ref, np.float64)
    cold = numbaot.solve(M, a, b, reg=0.05, unbalanced=1.0, max_iter=3)
    assert not np.allclose(cold.plan, res.plan)
    np.testing.assert_array_equal(init[0], np.array(first.potentials[0]))  # not modified


@pytest.mark.parametrize("max_iter,tol", [(4, None), (None, 1e-4)])
def test_solve_unbalanced_max_iter_tol(max_iter, tol):
    _, _, M, a, b = _problem(6, 8, seed=14)
    ref = _pot_solve(M, a, b, reg=0.05, unbalanced=0.5, max_iter=max_iter, tol=tol)
    res = numbaot.solve(M, a, b, reg=0.05, unbalanced=0.5, max_iter=max_iter, tol=tol)
    _check_result(res, ref, np.float64)


def test_solve_unbalanced_inf_is_balanced():
    _, _, M, a, b = _problem(6, 5, seed=15)
    res = numbaot.solve(M, a, b, reg=0.1, unbalanced=INF)
    ref = _pot_solve(M, a, b, reg=0.1, unbalanced=INF)
    _check_result(res, ref, np.float64)
    np.testing.assert_allclose(res.marginal_a, a, rtol=1e-6)


def test_solve_does_not_modify_inputs():
    _, _, M, a, b = _problem(6, 5, seed=16)
    a[2] = 0.0
    a /= a.sum()
    copies = [M.copy(), a.copy(), b.copy()]
    numbaot.solve(M, a, b, reg=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT's "Numerical errors" too: c = a b^T has a 0 row
        numbaot.solve(M, a, b, reg=0.1, unbalanced=1.0, potentials_init=(np.zeros(6),
                                                                         np.zeros(5)))
    for x, y in zip((M, a, b), copies):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------
# solve_sample
# --------------------------------------------------------------------------
# float32 cannot reach POT's default tol=1e-9 (POT's float32 solve warns as well)
@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean", "cityblock"])
@pytest.mark.parametrize("kw", [dict(reg=0.5), dict(reg=0.5, reg_type="entropy"),
                                dict(reg=0.5, unbalanced=(2.0, 1.0))])
def test_solve_sample_dense_matches_pot(kw, metric, dtype):
    x, y, _, a, b = _problem(7, 5, seed=20, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ot.solve_sample(_f64(x), _f64(y), _f64(a), _f64(b), metric=metric, **kw)
    res = numbaot.solve_sample(x, y, a, b, metric=metric, **kw)
    _check_result(res, ref, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("how", [dict(lazy=True), dict(lazy=True, batch_size=3),
                                 dict(method="sinkhorn_log"), dict(lazy=True, max_iter=20,
                                                                   tol=1e-4)])
def test_solve_sample_lazy_matches_pot(how, metric, dtype):
    x, y, _, a, b = _problem(9, 7, seed=21, dtype=dtype, dim=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ot.solve_sample(_f64(x), _f64(y), _f64(a), _f64(b), reg=1.0, metric=metric, **how)
        res = numbaot.solve_sample(x, y, a, b, reg=1.0, metric=metric, **how)
    tol = _tols(dtype)
    assert res.value is None and ref.value is None
    assert res.plan is None and res.marginals is None and res.status is None
    np.testing.assert_allclose(float(res.value_linear), float(ref.value_linear), **tol)
    ptol = dict(rtol=1e-6, atol=1e-8) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-3)
    for p, q in zip(res.potentials, ref.potentials):
        np.testing.assert_allclose(p, q, **ptol)
    assert res.lazy_plan.shape == (9, 7)
    np.testing.assert_allclose(res.lazy_plan[:, :], ref.lazy_plan[:], **tol)
    np.testing.assert_allclose(res.lazy_plan[2:5, 1:3], ref.lazy_plan[2:5, 1:3], **tol)
    np.testing.assert_allclose(res.marginal_a, ref.marginal_a, **tol)
    np.testing.assert_allclose(res.marginal_b, ref.marginal_b, **tol)
    assert sorted(res.log) == sorted(ref.log)
    assert res.log["niter"] == ref.log["niter"]
    np.testing.assert_allclose(res.log["err"], ref.log["err"], rtol=1e-3, atol=1e-7)


def test_solve_sample_lazy_uniform_weights():
    x, y, _, _, _ = _problem(6, 8, seed=22)
    ref = ot.solve_sample(x, y, reg=0.5, lazy=True)
    res = numbaot.solve_sample(x, y, reg=0.5, lazy=True)
    np.testing.assert_allclose(res.value_linear, ref.value_linear, rtol=1e-7)
    np.testing.assert_allclose(res.marginal_a, np.full(6, 1 / 6), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
@pytest.mark.parametrize("reg_type", ["KL", "entropy"])
@pytest.mark.parametrize("uniform", [False, True])
def test_solve_sample_debias_matches_pot(uniform, reg_type):
    x, y, _, a, b = _problem(6, 5, seed=23, uniform=uniform)
    kw = dict(reg=0.5, reg_type=reg_type, debias=True)
    ref = ot.solve_sample(x, y, a, b, **kw)
    res = numbaot.solve_sample(x, y, a, b, **kw)
    np.testing.assert_allclose(res.value, ref.value, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(res.value_linear, ref.value_linear, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(res.plan, ref.plan, rtol=1e-7, atol=1e-12)
    assert sorted(res.log) == ["res_aa", "res_ab", "res_bb"] == sorted(ref.log)
    for k in res.log:
        np.testing.assert_allclose(res.log[k].value, ref.log[k].value, rtol=1e-7, atol=1e-10)
    # the divergence of a measure with itself is 0
    self_div = numbaot.solve_sample(x, x, a, a, **kw)
    assert abs(float(self_div.value)) < 1e-12


def test_solve_sample_debias_lazy_gives_debiased_value_linear():
    # POT fails here (value None - None); numbaot debiases what there is
    x, y, _, a, b = _problem(6, 5, seed=24)
    res = numbaot.solve_sample(x, y, a, b, reg=1.0, lazy=True, debias=True)
    parts = [ot.solve_sample(p, q, u, v, reg=1.0, lazy=True).value_linear
             for p, q, u, v in ((x, y, a, b), (x, x, a, a), (y, y, b, b))]
    assert res.value is None
    np.testing.assert_allclose(res.value_linear, parts[0] - 0.5 * (parts[1] + parts[2]),
                               rtol=1e-7)


def test_solve_sample_scaler():
    x, y, _, a, b = _problem(6, 5, seed=25)
    res = numbaot.solve_sample(x, y, a, b, reg=0.5, scaler=lambda z: 2.0 * z)
    ref = ot.solve(ot.dist(2.0 * x, 2.0 * y), a, b, reg=0.5)
    np.testing.assert_allclose(res.value, ref.value, rtol=1e-7)
    with pytest.raises(ValueError, match="scaler"):
        numbaot.solve_sample(x, y, reg=0.5, scaler=3)


# --------------------------------------------------------------------------
# OTResult
# --------------------------------------------------------------------------
def test_otresult_matches_pot_attributes():
    P = np.array([[0.2, 0.0, 0.1], [0.05, 0.25, 0.4]])
    pots = (np.array([1.0, 2.0]), np.array([0.0, -1.0, 3.0]))
    kw = dict(potentials=pots, value=1.5, value_linear=1.25, plan=P, status="Converged",
              log={"k": 1})
    res, ref = OTResult(**kw), ot.utils.OTResult(**kw)
    for name in ("value", "value_linear", "value_quad", "status", "log", "lazy_plan",
                 "potential_a", "potential_b", "marginal_a", "marginal_b"):
        x, y = getattr(res, name), getattr(ref, name)
        if isinstance(y, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y, name
    assert res.potentials is pots
    np.testing.assert_array_equal(res.sparse_plan.toarray(), ref.sparse_plan.toarray())
    assert res.sparse_plan.format == "csr"
    assert res.citation == ref.citation
    assert repr(res) == repr(ref)
    for name in ("a_to_b", "b_to_a"):
        with pytest.raises(NotImplementedError):
            getattr(res, name)
        with pytest.raises(NotImplementedError):
            getattr(ref, name)


def test_otresult_empty_and_sparse_only():
    res, ref = OTResult(), ot.utils.OTResult()
    for name in ("plan", "sparse_plan", "potentials", "potential_a", "marginals", "marginal_a",
                 "marginal_b", "value", "status", "log"):
        assert getattr(res, name) is None and getattr(ref, name) is None, name
    assert repr(res) == repr(ref) == "OTResult()"
    from scipy.sparse import csr_matrix

    S = csr_matrix(np.array([[0.0, 0.5], [0.5, 0.0]]))
    np.testing.assert_array_equal(OTResult(sparse_plan=S).plan,
                                  ot.utils.OTResult(sparse_plan=S).plan)


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------
M0 = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0]])


@pytest.mark.parametrize("kw,pot_call", [
    (dict(), "ot.emd2"),
    (dict(reg=0.0), "ot.emd2"),
    (dict(unbalanced=1.0), "mm_unbalanced"),
    (dict(unbalanced=1.0, unbalanced_type="L2"), "mm_unbalanced"),
    (dict(unbalanced=1.0, unbalanced_type="TV"), "lbfgsb_unbalanced"),
    (dict(reg=0.1, reg_type="L2"), "smooth_ot_dual"),
    (dict(reg=0.1, reg_type=(np.sum, np.sign)), "ot.optim.cg"),
    (dict(reg=0.1, unbalanced=1.0, reg_type="entropy"), "lbfgsb_unbalanced"),
    (dict(reg=0.1, unbalanced=1.0, reg_type="L2"), "lbfgsb_unbalanced"),
    (dict(reg=0.1, unbalanced=1.0, unbalanced_type="L2"), "lbfgsb_unbalanced"),
    (dict(reg=0.1, unbalanced=1.0, unbalanced_type="tv"), "lbfgsb_unbalanced"),
])
def test_solve_not_implemented_names_pot(kw, pot_call):
    with pytest.raises(NotImplementedError, match=pot_call):
        numbaot.solve(M0, **kw)


@pytest.mark.parametrize("kw,pot_call", [
    (dict(reg=0.1, method="1d"), "wasserstein_1d"),
    (dict(reg=0.1, method="lowrank"), "lowrank_sinkhorn"),
    (dict(reg=0.1, method="nystroem"), "empirical_sinkhorn_nystroem2"),
    (dict(method="sliced"), "sliced_wasserstein_distance"),
    (dict(lazy=True), "emd2_lazy"),
    (dict(), "ot.emd2"),
    (dict(reg=0.1, lazy=True, metric="cityblock"), "empirical_sinkhorn2"),
    (dict(reg=0.1, debias="split"), "debias='split'"),
    (dict(reg=0.1, lazy=True, unbalanced=1.0), "with regularization"),
])
def test_solve_sample_not_implemented_names_pot(kw, pot_call):
    x = np.array([[0.0], [1.0]])
    with pytest.raises(NotImplementedError, match=pot_call):
        numbaot.solve_sample(x, x + 0.5, **kw)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(reg=0.1, method="foo"), ValueError, "Unknown method"),
    (dict(reg=-0.1), ValueError, "reg"),
    (dict(reg=np.nan), ValueError, "reg"),
    (dict(reg="a"), TypeError, "reg"),
    (dict(reg=0.1, reg_type="foo"), ValueError, "reg_type"),
    (dict(reg=0.1, reg_type=3), ValueError, "reg_type"),
    (dict(reg=0.1, unbalanced=1.0, unbalanced_type="foo"), ValueError, "unbalanced_type"),
    (dict(reg=0.1, grad="foo"), ValueError, "grad"),
    (dict(reg=0.1, grad="last_step", max_iter=0), ValueError, "greater than 0"),
    (dict(reg=0.1, max_iter=-1), ValueError, "max_iter"),
    (dict(reg=0.1, max_iter=2.5), TypeError, "max_iter"),
    (dict(reg=0.1, tol="x"), TypeError, "tol"),
    (dict(reg=0.1, unbalanced=-1.0), ValueError, "reg_m"),
    (dict(reg=0.1, unbalanced=(1.0, 2.0, 3.0)), ValueError, "length"),
    (dict(reg=0.1, a=np.ones((2, 2)) / 4), ValueError, "1-D"),
    (dict(reg=0.1, a=np.array([0.5, 0.25, 0.25])), ValueError, "a"),
    (dict(reg=0.1, b=np.array([-0.5, 1.0, 0.5])), ValueError, "b"),
    (dict(reg=0.1, unbalanced=1.0, c=np.ones((3, 2))), ValueError, "c"),
    (dict(reg=0.1, unbalanced=1.0, potentials_init=(np.zeros(2),)), ValueError, "warmstart"),
])
def test_solve_bad_input(kw, exc, match):
    with pytest.raises(exc, match=match):
        numbaot.solve(M0, **kw)


@pytest.mark.parametrize("M,exc", [(np.array([0.0, 1.0]), ValueError),
                                   (np.array([[0.0, np.nan], [1.0, 0.0]]), ValueError),
                                   (np.array([["a", "b"]]), TypeError)])
def test_solve_bad_cost(M, exc):
    with pytest.raises(exc, match="M"):
        numbaot.solve(M, reg=0.1)


def test_solve_sample_bad_input():
    x = np.array([[0.0], [1.0]])
    with pytest.raises(ValueError, match="Unknown method"):
        numbaot.solve_sample(x, x, reg=0.1, method="bar")
    with pytest.raises(ValueError, match="dimension|dim"):
        numbaot.solve_sample(x, np.ones((2, 2)), reg=0.1, lazy=True)
    with pytest.raises(ValueError, match="[Bb]atch"):
        numbaot.solve_sample(x, x, reg=0.1, lazy=True, batch_size="big")


# --------------------------------------------------------------------------
# reg_type / unbalanced_type as POT: ignored where POT ignores them, unknown
# ones NotImplementedError (POT's message first), also a ValueError
# --------------------------------------------------------------------------
@pytest.mark.parametrize("unbalanced_type", [None, "foo", "TV", "L2", "kl", 3])
def test_solve_balanced_ignores_unbalanced_type_like_pot(unbalanced_type):
    _, _, M, a, b = _problem(5, 4, seed=40)
    kw = dict(reg=0.2, unbalanced_type=unbalanced_type)
    _check_result(numbaot.solve(M, a, b, **kw), _pot_solve(M, a, b, **kw), np.float64)


@pytest.mark.parametrize("how", [dict(), dict(lazy=True)])
@pytest.mark.parametrize("unbalanced_type", [None, "foo", "TV"])
def test_solve_sample_balanced_ignores_unbalanced_type_like_pot(unbalanced_type, how):
    x, y, _, a, b = _problem(5, 4, seed=41)
    kw = dict(reg=0.5, unbalanced_type=unbalanced_type, **how)
    ref = ot.solve_sample(x, y, a, b, **kw)
    res = numbaot.solve_sample(x, y, a, b, **kw)
    np.testing.assert_allclose(float(res.value_linear), float(ref.value_linear), rtol=1e-7)
    if ref.value is not None:
        np.testing.assert_allclose(float(res.value), float(ref.value), rtol=1e-7)
    for p, q in zip(res.potentials, ref.potentials):
        np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-8)


def _pot_error(fn, *args, **kw):
    with pytest.raises(Exception) as info:
        fn(*args, **kw)
    return info.value


@pytest.mark.parametrize("kw", [
    dict(reg=0.1, reg_type="foo"),
    dict(reg=0.1, reg_type="foo", unbalanced_type="foo"),
    dict(reg=0.1, unbalanced=1.0, unbalanced_type="foo"),
    dict(reg=0.1, unbalanced=1.0, reg_type="foo"),
    dict(reg=0.1, unbalanced=(1.0, INF), reg_type="bar", unbalanced_type="L1"),
    dict(unbalanced=1.0, unbalanced_type="foo"),
    dict(reg=0.0, unbalanced=1.0, unbalanced_type="foo"),
])
@pytest.mark.parametrize("sample", [False, True])
def test_unknown_types_raise_not_implemented_like_pot(kw, sample):
    if sample:  # solve_sample (lazy=False) hands them to solve, as POT
        x = np.array([[0.0], [1.0]])
        args, fns = (x, x + 0.5), (ot.solve_sample, numbaot.solve_sample)
    else:
        args, fns = (M0,), (ot.solve, numbaot.solve)
    pot_exc = _pot_error(fns[0], *args, **kw)
    assert type(pot_exc) is NotImplementedError
    with pytest.raises(NotImplementedError) as info:
        fns[1](*args, **kw)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, numbaot.solvers.UnknownOptionError)
    msg = str(info.value)
    assert msg.startswith(str(pot_exc) + ": "), (msg, str(pot_exc))
    names = [n for n in ("reg_type", "unbalanced_type") if n + '="' in str(pot_exc)]
    for name in names:  # the argument and its valid values
        assert f"{name} must be" in msg
    if "reg_type" in names:
        assert "'KL', 'entropy', 'L2' or a tuple (f, df)" in msg
    if "unbalanced_type" in names:
        assert "'KL', 'L2' or 'TV'" in msg


@pytest.mark.parametrize("kw", [dict(reg_type="foo"), dict(reg=0.0, reg_type="foo",
                                                           unbalanced_type="foo")])
def test_exact_balanced_ignores_types_like_pot(kw):
    # POT solves (ot.emd2, reg_type and unbalanced_type unused); numbaot names that call
    ref = ot.solve(M0, **kw)
    assert ref.plan is not None
    with pytest.raises(NotImplementedError, match="ot.emd2") as info:
        numbaot.solve(M0, **kw)
    assert not isinstance(info.value, ValueError)


# --------------------------------------------------------------------------
# the lazy plan: POT's LazyTensor indexing, attributes and repr
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lazy_pair():
    x, y, _, a, b = _problem(6, 5, seed=42, dim=2)
    kw = dict(reg=0.5, lazy=True, max_iter=30, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = numbaot.solve_sample(x, y, a, b, **kw)
        ref = ot.solve_sample(x, y, a, b, **kw)
    return x, y, res, ref


_ARR = np.array([0, 2, 5])
_LAZY_KEYS = [
    1, 0, 5, -2, -6, True, False,
    slice(1, 3), slice(None), slice(None, None, -1), slice(-2, None), slice(10, 20),
    slice(4, 1, -2), slice(2, 2),
    (), (1,), (1, 2), (5, 4), (-2, -3), (slice(None), 2),
    (slice(None), -2), (slice(1, 4), slice(0, 5, 2)),
    (slice(None, None, -1), slice(-1, -6, -2)), (Ellipsis,), (Ellipsis, 2), (2, Ellipsis),
    (Ellipsis, Ellipsis), (Ellipsis, slice(1, 3)), (_ARR,), (_ARR, slice(None)),
    (slice(None), np.array([4, 0])), (_ARR, np.array([1, 3])), (_ARR, 1), (3, np.array([-1, 0])),
    ([0, 2],), (slice(None), [0, 2]), (np.array([True, False, True, False, True, False]),),
    (slice(None), np.array([False, True, True, False, True])), (np.array([], dtype=int),),
    (np.array([0, 2], dtype=np.int32), slice(1, 2)), (np.array([-1, -6]),),
]


def test_lazy_plan_indexes_as_pot(lazy_pair):
    _, _, res, ref = lazy_pair
    lp, pot_lp = res.lazy_plan, ref.lazy_plan
    for key in _LAZY_KEYS:
        got, want = lp[key], pot_lp[key]
        assert isinstance(got, np.ndarray) and got.shape == want.shape, (key, got.shape)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300, err_msg=repr(key))
    # the shapes of the audit, against POT's
    assert lp[1].shape == pot_lp[1].shape == (1, 5)
    assert lp[:, 2].shape == pot_lp[:, 2].shape == (6, 1)
    assert lp[2, 3].shape == pot_lp[2, 3].shape == (1, 1)
    # -1 and out-of-range integers: POT's k:k + 1 slices are empty there;
    # numbaot counts -1 from the end and raises IndexError, as NumPy
    assert pot_lp[-1].shape == (0, 5)
    np.testing.assert_allclose(lp[-1], pot_lp[5], rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(lp[2, -1], pot_lp[2, 4], rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(lp[:, -1], pot_lp[:, 4], rtol=1e-9, atol=1e-300)
    for key in (6, 7, -7, (0, 5), (6, 0), (slice(None, 2), 7), (1, -6)):
        assert pot_lp[key].size == 0
        with pytest.raises(IndexError, match="out of bounds"):
            lp[key]


def test_lazy_plan_errors_and_extensions(lazy_pair):
    _, _, res, ref = lazy_pair
    lp, pot_lp = res.lazy_plan, ref.lazy_plan
    # keys POT refuses alone; numbaot reads them as the 1-tuple POT takes
    for key in [_ARR, [0, 2], np.int64(2), Ellipsis, np.array([True] * 6)]:
        with pytest.raises(NotImplementedError):
            pot_lp[key]
        np.testing.assert_allclose(lp[key], pot_lp[(key,)] if not isinstance(key, np.integer)
                                   else pot_lp[int(key)], rtol=1e-9, atol=1e-300)
    # NumPy integers inside a tuple: as Python ints (POT fails on them)
    np.testing.assert_allclose(lp[np.int64(1), np.int32(2)], pot_lp[1, 2], rtol=1e-9)
    # other keys alone: POT's NotImplementedError and message
    for key in [None, 1.5, "a", np.bool_(True)]:
        pot_exc = _pot_error(pot_lp.__getitem__, key)
        with pytest.raises(NotImplementedError) as info:
            lp[key]
        assert type(pot_exc) is NotImplementedError and str(info.value) == str(pot_exc)
    # out-of-range index arrays and float entries: IndexError, as POT (NumPy's)
    for key in [(np.array([7]),), (slice(None), [0, 5]), (1.5,), (np.array([0.0, 1.0]),),
                (np.array([True, False]),)]:
        assert isinstance(_pot_error(pot_lp.__getitem__, key), IndexError)
        with pytest.raises(IndexError):
            lp[key]
    # three indices: POT's TypeError (also an IndexError)
    assert isinstance(_pot_error(pot_lp.__getitem__, (1, 2, 3)), TypeError)
    for exc in (TypeError, IndexError):
        with pytest.raises(exc, match="too many indices"):
            lp[1, 2, 3]
    for key in [(None,), (1, None), (np.zeros((1, 2), dtype=int),)]:  # POT: einsum errors
        _pot_error(pot_lp.__getitem__, key)
        with pytest.raises(IndexError):
            lp[key]


def test_lazy_plan_attributes_and_repr_as_pot(lazy_pair):
    x, y, res, ref = lazy_pair
    lp, pot_lp = res.lazy_plan, ref.lazy_plan
    assert type(lp).__name__ == "LazyPlan"
    assert lp.shape == pot_lp.shape == (6, 5) and type(lp.shape) is tuple
    assert lp.ndim == pot_lp.ndim == 2
    assert list(lp.kwargs) == list(pot_lp.kwargs) == ["X_a", "X_b", "f", "g", "metric", "reg"]
    assert lp.X_a is x and pot_lp.X_a is x and lp.X_b is y and pot_lp.X_b is y
    assert lp.f is res.log["u"] and lp.g is res.log["v"]
    assert pot_lp.f is ref.log["u"] and pot_lp.g is ref.log["v"]
    for name in ("f", "g"):
        np.testing.assert_allclose(getattr(lp, name), getattr(pot_lp, name), rtol=1e-9)
        assert lp.kwargs[name] is getattr(lp, name)
    assert lp.metric == pot_lp.metric == "sqeuclidean" and lp.reg == pot_lp.reg == 0.5
    assert repr(lp) == repr(pot_lp)
    assert repr(lp) == "LazyTensor(shape=(6, 5),attributes=(X_a,X_b,f,g,metric,reg))"
    assert repr(OTResult(lazy_plan=lp)) == repr(ot.utils.OTResult(lazy_plan=pot_lp))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_empirical_sinkhorn_lazy_plan_is_pots(dtype):
    x, y, _, a, b = _problem(7, 4, seed=43, dtype=dtype, dim=3)
    kw = dict(isLazy=True, log=True, numIterMax=20, stopThr=0.0, warn=False,
              metric="euclidean")
    # float64: X_s as a list, which POT's list_to_array turns into an array
    xs = x.tolist() if dtype == np.float64 else x
    lp = numbaot.bregman.empirical_sinkhorn(xs, y, 0.3, a, b, **kw)[2]["lazy_plan"]
    pot_lp = ot.bregman.empirical_sinkhorn(xs, y, 0.3, a, b, **kw)[2]["lazy_plan"]
    assert type(lp) is type(numbaot.solve_sample(x, y, reg=0.3, lazy=True).lazy_plan)
    assert type(lp.X_a) is type(pot_lp.X_a) is np.ndarray
    np.testing.assert_array_equal(lp.X_a, pot_lp.X_a)
    assert lp.X_b is y and pot_lp.X_b is y
    assert lp.metric == pot_lp.metric == "euclidean" and lp.reg == pot_lp.reg == 0.3
    assert lp.f.dtype == pot_lp.f.dtype == dtype
    assert repr(lp) == repr(pot_lp)
    tol = dict(rtol=1e-9, atol=1e-300) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-7)
    for key in [3, (slice(None), 1), (2, 3), -2, (Ellipsis, -3)]:
        got, want = lp[key], pot_lp[key]
        assert got.shape == want.shape and got.dtype == want.dtype == dtype
        np.testing.assert_allclose(got, want, **tol)


def test_lazy_plan_reduces_with_pots_reduce_lazytensor(lazy_pair):
    # POT's own reductions (OTResult.marginal_a/b use them) take numbaot's plan
    _, _, res, ref = lazy_pair
    for axis in (None, 0, 1):
        got = ot.utils.reduce_lazytensor(res.lazy_plan, np.sum, axis=axis, batch_size=4)
        want = ot.utils.reduce_lazytensor(ref.lazy_plan, np.sum, axis=axis, batch_size=4)
        np.testing.assert_allclose(got, want, rtol=1e-9)
    np.testing.assert_allclose(res.marginal_a, ref.marginal_a, rtol=1e-9)
    np.testing.assert_allclose(res.marginal_b, ref.marginal_b, rtol=1e-9)


# --------------------------------------------------------------------------
# import: no POT at run time
# --------------------------------------------------------------------------
def test_import_does_not_import_pot():
    code = ("import sys, numbaot; numbaot.solve; numbaot.OTResult; "
            "assert 'ot' not in sys.modules and not any(m.startswith('ot.') for m in sys.modules)"
            ", sorted(m for m in sys.modules if m == 'ot' or m.startswith('ot.'))")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# --------------------------------------------------------------------------
# devices (CUDA: the simulator or a GPU)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(reg=0.5), dict(reg=0.5, reg_type="entropy"),
                                dict(reg=0.5, unbalanced=(1.0, INF), tol=1e-6),
                                dict(reg=0.5, grad="last_step", max_iter=3)])
def test_solve_on_device(device, kw):
    _, _, M, a, b = _problem(5, 4, seed=30)
    ref = _pot_solve(M, a, b, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = numbaot.solve(device.put(M), device.put(a), device.put(b), **kw)
    tol = dict(rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(device.get(res.plan), ref.plan, **tol)
    for p, q in zip(res.potentials, ref.potentials):
        np.testing.assert_allclose(device.get(p), q, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(device.get(res.marginal_a), ref.marginal_a, **tol)
    np.testing.assert_allclose(device.get(res.marginal_b), ref.marginal_b, **tol)
    np.testing.assert_allclose(float(res.value), float(ref.value), **tol)
    np.testing.assert_allclose(float(res.value_linear), float(ref.value_linear), **tol)


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
def test_solve_sample_on_device(device):
    x, y, _, a, b = _problem(5, 4, seed=31)
    x, y = x / 4, y / 4  # costs of order 0.1-1: few iterations (the simulator is slow)
    ref = ot.solve_sample(x, y, a, b, reg=0.5)
    res = numbaot.solve_sample(device.put(x), device.put(y), device.put(a), device.put(b),
                               reg=0.5)
    np.testing.assert_allclose(device.get(res.plan), ref.plan, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(float(res.value), float(ref.value), rtol=1e-7)
    kw = dict(reg=0.5, lazy=True, max_iter=20, tol=1e-5)
    ref = ot.solve_sample(x, y, a, b, **kw)
    res = numbaot.solve_sample(device.put(x), device.put(y), device.put(a), device.put(b), **kw)
    assert res.log["niter"] == ref.log["niter"]
    np.testing.assert_allclose(device.get(res.potentials[0]), ref.potentials[0], rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(device.get(res.marginal_a), ref.marginal_a, rtol=1e-7,
                               atol=1e-10)
    np.testing.assert_allclose(float(res.value_linear), float(ref.value_linear), rtol=1e-7)
