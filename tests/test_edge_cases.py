"""Less common but valid inputs, against POT: larger and very elongated
problems, negative and large costs, extreme warm starts, numItermax=0,
zero-mass bins in multi-histogram problems."""
import numpy as np
import pytest

import numbaot
from _helpers import F64, METHODS, METHODS2, assert_close, assert_log_matches, call_recording, make_problem, ot, \
    random_hist


def _user(w):
    return [x for x in w if x[0] is not RuntimeWarning]


@pytest.mark.parametrize("shape", [(9, 600), (600, 9), (33, 520), (130, 70)])
@pytest.mark.parametrize("method", METHODS)
def test_larger_and_elongated_problems(method, shape):
    a, b, M = make_problem(*shape, seed=sum(shape))
    reg = 0.1
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref


@pytest.mark.parametrize("shape", [(9, 600), (600, 9)])
@pytest.mark.parametrize("method", METHODS2)
def test_larger_2d_b(method, shape):
    rng = np.random.default_rng(1)
    a, _, M = make_problem(*shape, seed=2)
    B = random_hist(rng, shape[1], 3)
    (l_ref, log_ref), w_ref = call_recording(ot.sinkhorn2, a, B, M, 0.1, method=method, log=True)
    (l, log), w = call_recording(numbaot.sinkhorn2, a, B, M, 0.1, method=method, log=True)
    assert_close(l, l_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref


@pytest.mark.parametrize("offset", [-0.5, -3.0])
@pytest.mark.parametrize("method", METHODS)
def test_negative_costs(method, offset):
    """Costs may be negative (K = exp(-M/reg) > 1)."""
    a, b, M = make_problem(8, 11, seed=3)
    M = M + offset
    reg = 0.1
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert _user(w) == _user(w_ref)
    # shifting M by a constant does not change the entropic plan
    G0 = numbaot.sinkhorn(a, b, M - offset, reg, method="sinkhorn_log", stopThr=1e-13, numItermax=10000)
    G1 = numbaot.sinkhorn(a, b, M, reg, method="sinkhorn_log", stopThr=1e-13, numItermax=10000)
    assert_close(G1, G0, **F64)


@pytest.mark.parametrize("method", ["sinkhorn_log", "sinkhorn_stabilized", "sinkhorn_epsilon_scaling"])
def test_large_costs(method):
    """M/reg up to 1e4: exp(-M/reg) underflows, the log-domain / stabilised
    solvers must still agree with POT."""
    a, b, M = make_problem(8, 11, seed=4)
    M = 1e3 * M
    reg = 0.5
    with np.errstate(all="ignore"):
        (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True,
                                                 numItermax=20000)
        (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True, numItermax=20000)
    assert np.all(np.isfinite(G))
    assert_close(G, G_ref, rtol=1e-7, atol=1e-10)
    assert_log_matches(log, log_ref)
    assert _user(w) == _user(w_ref)


@pytest.mark.parametrize("shift", [-800.0, 800.0, -5000.0])
def test_sinkhorn_log_extreme_warmstart(shift):
    """(log u + c, log v - c) is the same plan; the first v-update must absorb
    a huge c without under/overflow (POT's logsumexp does)."""
    a, b, M = make_problem(12, 9, seed=5)
    rng = np.random.default_rng(5)
    ws = (rng.normal(size=12) + shift, rng.normal(size=9) - shift)
    with np.errstate(all="ignore"):
        (G_ref, log_ref), w_ref = call_recording(ot.bregman.sinkhorn_log, a, b, M, 0.05, log=True, warmstart=ws)
        (G, log), w = call_recording(numbaot.bregman.sinkhorn_log, a, b, M, 0.05, log=True, warmstart=ws)
    assert np.all(np.isfinite(G))
    assert_close(G, G_ref, **F64)
    # log-potentials are O(|shift|): compare them relative to that size
    for key in ("log_u", "log_v"):
        assert_close(log[key], log_ref[key], rtol=1e-7, atol=1e-9 * abs(shift))
    assert log["niter"] == log_ref["niter"]
    assert_close(np.asarray(log["err"]), np.asarray(log_ref["err"]), rtol=1e-6, atol=1e-12)
    assert _user(w) == _user(w_ref)


@pytest.mark.parametrize("method", METHODS)
def test_numItermax_zero(method):
    """numItermax=0 is allowed (POT returns the initial plan and warns)."""
    a, b, M = make_problem(6, 8, seed=6)
    G_ref, w_ref = call_recording(ot.sinkhorn, a, b, M, 0.1, method=method, numItermax=0)
    G, w = call_recording(numbaot.sinkhorn, a, b, M, 0.1, method=method, numItermax=0)
    assert_close(G, G_ref, **F64)
    assert w == w_ref


@pytest.mark.parametrize("method", METHODS2)
def test_numItermax_one(method):
    a, b, M = make_problem(6, 8, seed=7)
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, 0.1, method=method, numItermax=1, log=True)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, 0.1, method=method, numItermax=1, log=True)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref


@pytest.mark.parametrize("n_hists", [3, 9])
@pytest.mark.parametrize("method", ["sinkhorn_log", "sinkhorn_stabilized"])
def test_2d_b_with_zero_mass_bins(method, n_hists):
    rng = np.random.default_rng(8)
    a, _, M = make_problem(7, 10, seed=8)
    B = random_hist(rng, 10, n_hists)
    B[[1, 4], 0] = 0.0
    B[7, 2] = 0.0
    B /= B.sum(axis=0)
    with np.errstate(all="ignore"):
        l_ref, w_ref = call_recording(ot.sinkhorn2, a, B, M, 0.1, method=method)
        l, w = call_recording(numbaot.sinkhorn2, a, B, M, 0.1, method=method)
    assert_close(l, l_ref, **F64)
    assert _user(w) == _user(w_ref)
    loop = [ot.bregman.sinkhorn_log(a[a > 0], B[B[:, k] > 0, k], M[:, B[:, k] > 0], 0.1, stopThr=1e-14,
                                    numItermax=10000) for k in range(n_hists)]
    loop = [np.sum(G * M[:, B[:, k] > 0]) for k, G in enumerate(loop)]
    assert_close(l, np.array(loop), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("n_hists", [3, 9])
@pytest.mark.parametrize("method", METHODS2)
def test_paired_with_zero_mass_bins(method, n_hists):
    rng = np.random.default_rng(9)
    _, _, M = make_problem(7, 10, seed=9)
    A = random_hist(rng, 7, n_hists)
    B = random_hist(rng, 10, n_hists)
    A[2, 1] = 0.0
    B[[0, 3], 2] = 0.0
    A /= A.sum(axis=0)
    B /= B.sum(axis=0)
    kw = dict(stopThr=1e-13, numItermax=20000)
    with np.errstate(all="ignore"):
        res = numbaot.sinkhorn2(A, B, M, 0.1, method=method, **kw)
        ref = [ot.sinkhorn2(A[:, k], B[:, k], M, 0.1, method=method, **kw) for k in range(n_hists)]
    assert np.all(np.isfinite(res))
    assert_close(res, np.array(ref), **F64)
