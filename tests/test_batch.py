"""Paired batches (beyond POT): 2-D a (dim_a, n_hists) with 2-D b
(dim_b, n_hists) solve n_hists independent problems that share M.

Oracle: a loop of per-problem POT calls with 1-D a and b.
"""
import numpy as np
import pytest

import numbaot
from _helpers import F32, F64, METHODS2, NOT_CONVERGED, SHAPES, assert_close, call_recording, make_problem, ot, \
    random_hist, tol, up

#: the potentials each method reports in its log, and whether they live on
#: the source (a) side or the target (b) side
POTENTIALS = {
    "sinkhorn": {"u": 0, "v": 1},
    "sinkhorn_log": {"log_u": 0, "log_v": 1, "u": 0, "v": 1},
    "sinkhorn_stabilized": {"logu": 0, "logv": 1, "alpha": 0, "beta": 1},
}


def _batch(shape, n_hists, seed, dtype=np.float64, spread=False):
    n, m = shape
    rng = np.random.default_rng(seed)
    _, _, M = make_problem(n, m, seed=seed)
    if spread:
        # columns from very peaked to nearly uniform: very different
        # convergence speeds inside one batch
        conc = np.geomspace(0.3, 30.0, n_hists)
        A = np.column_stack([rng.dirichlet(np.full(n, c)) for c in conc]) + 1e-6
        B = np.column_stack([rng.dirichlet(np.full(m, c)) for c in conc[::-1]]) + 1e-6
        A /= A.sum(axis=0)
        B /= B.sum(axis=0)
    else:
        A = random_hist(rng, n, n_hists)
        B = random_hist(rng, m, n_hists)
    return A.astype(dtype), B.astype(dtype), M.astype(dtype)


def _pot_loop(method, A, B, M, reg, **kw):
    losses, logs = [], []
    for k in range(A.shape[1]):
        loss, log = ot.sinkhorn2(A[:, k], B[:, k], M, reg, method=method, log=True, **kw)
        losses.append(loss)
        logs.append(log)
    return np.array(losses), logs


def _check_potentials(method, log, logs_ref, n, m, n_hists, dtype=np.float64):
    for key, side in POTENTIALS[method].items():
        assert key in log, key
        assert np.shape(log[key]) == ((n, n_hists) if side == 0 else (m, n_hists)), key
        for k in range(n_hists):
            assert_close(np.asarray(log[key])[:, k], logs_ref[k][key], **tol(dtype, "pot"))


# 12 problems take numbaot's problem-minor batch kernels (8 or more problems)
@pytest.mark.parametrize("n_hists", [1, 3, 12])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", METHODS2)
def test_paired_fixed_iterations_equal_per_problem_pot(method, shape, n_hists):
    """stopThr=0: every problem runs exactly numItermax iterations on both sides."""
    n, m = shape
    A, B, M = _batch(shape, n_hists, seed=100 + n + m)
    reg = 0.1
    kw = dict(stopThr=0.0, numItermax=47, warn=False)
    ref, logs_ref = _pot_loop(method, A, B, M, reg, **kw)
    for fn in (numbaot.sinkhorn2, numbaot.sinkhorn):
        res, log = fn(A, B, M, reg, method=method, log=True, **kw)
        assert res.shape == (n_hists,) and res.dtype == np.float64
        assert_close(res, ref, **F64)
        _check_potentials(method, log, logs_ref, n, m, n_hists)
        res = fn(A, B, M, reg, method=method, **kw)
        assert_close(res, ref, **F64)


@pytest.mark.parametrize("n_hists", [4, 12])
@pytest.mark.parametrize("shape", [(7, 13), (40, 25), (13, 7)])
@pytest.mark.parametrize("method", METHODS2)
def test_paired_converged_equal_per_problem_pot(method, shape, n_hists):
    """Tight stopThr on both sides, problems of different difficulty (each
    problem of the log-domain batch stops at its own check, as POT's loop)."""
    n, m = shape
    A, B, M = _batch(shape, n_hists, seed=200 + n + m, spread=True)
    reg = 0.1
    kw = dict(stopThr=1e-13, numItermax=20000)
    ref, logs_ref = _pot_loop(method, A, B, M, reg, **kw)
    res, log = numbaot.sinkhorn2(A, B, M, reg, method=method, log=True, **kw)
    assert_close(res, ref, **F64)
    _check_potentials(method, log, logs_ref, n, m, n_hists)


@pytest.mark.parametrize("reg", [0.05, 0.5])
@pytest.mark.parametrize("method", METHODS2)
def test_paired_default_parameters(method, reg):
    """Default stopThr=1e-9: the batch may stop each problem at a different
    check than POT does; the losses of two solutions that both meet
    stopThr=1e-9 differ by ~1e-11 here (POT at 1e-9 vs 1e-14), within F64."""
    A, B, M = _batch((40, 25), 5, seed=300, spread=True)
    ref, _ = _pot_loop(method, A, B, M, reg)
    res = numbaot.sinkhorn2(A, B, M, reg, method=method)
    assert_close(res, ref, **F64)
    res = numbaot.sinkhorn(A, B, M, reg, method=method)
    assert_close(res, ref, **F64)


@pytest.mark.parametrize("method", METHODS2)
def test_paired_float32(method):
    A, B, M = _batch((40, 25), 3, seed=400, dtype=np.float32)
    reg = 0.1
    # float32 histograms do not have exactly equal masses (their float64
    # copies differ by ~1e-8): the marginal error cannot go below that, so the
    # reference stops at 1e-7, well inside the float32 tolerance
    ref, logs_ref = _pot_loop(method, *up(A, B, M), reg, stopThr=1e-7, numItermax=20000)
    res, log = numbaot.sinkhorn2(A, B, M, reg, method=method, log=True, warn=False)
    assert res.dtype == np.float32 and res.shape == (3,)
    assert_close(res, ref, **F32)
    for key, val in log.items():
        if isinstance(val, np.ndarray):
            assert val.dtype == np.float32, key
    res = numbaot.sinkhorn(A, B, M, reg, method=method, warn=False)
    assert res.dtype == np.float32
    assert_close(res, ref, **F32)


@pytest.mark.parametrize("method", METHODS2)
def test_paired_identical_columns_give_identical_results(method):
    """n_hists copies of one problem: every column equals the 1-D result."""
    a, b, M = make_problem(9, 6, seed=500)
    A = np.tile(a[:, None], (1, 3))
    B = np.tile(b[:, None], (1, 3))
    res = numbaot.sinkhorn2(A, B, M, 0.1, method=method, stopThr=1e-13, numItermax=20000)
    ref = ot.sinkhorn2(a, b, M, 0.1, method=method, stopThr=1e-13, numItermax=20000)
    assert_close(res, np.full(3, ref), **F64)


@pytest.mark.parametrize("method", METHODS2)
def test_paired_columns_are_independent(method):
    """Changing one problem of the batch does not change the others."""
    A, B, M = _batch((12, 9), 3, seed=600)
    kw = dict(stopThr=0.0, numItermax=30, warn=False)
    res1 = numbaot.sinkhorn2(A, B, M, 0.1, method=method, **kw)
    A2, B2 = A.copy(), B.copy()
    rng = np.random.default_rng(601)
    A2[:, 1] = random_hist(rng, 12)
    B2[:, 1] = random_hist(rng, 9)
    res2 = numbaot.sinkhorn2(A2, B2, M, 0.1, method=method, **kw)
    assert_close(res2[[0, 2]], res1[[0, 2]], rtol=1e-12, atol=1e-15)
    assert not np.isclose(res2[1], res1[1], rtol=1e-6)


@pytest.mark.parametrize("warn", [True, False])
@pytest.mark.parametrize("method", METHODS2)
def test_paired_not_converged_warning(method, warn):
    A, B, M = _batch((7, 13), 3, seed=700)
    _, w = call_recording(numbaot.sinkhorn2, A, B, M, 0.05, method=method, numItermax=5, warn=warn)
    if warn:
        assert w and set(w) == {(UserWarning, NOT_CONVERGED)}
    else:
        assert w == []
    _, w = call_recording(numbaot.sinkhorn2, A, B, M, 0.5, method=method, warn=True)
    assert w == []


@pytest.mark.parametrize("method", METHODS2)
def test_paired_empty_list_a_is_not_a_batch(method):
    """a = [] still means uniform (then b 2-D is POT's multi-target case)."""
    A, B, M = _batch((7, 13), 2, seed=800)
    res = numbaot.sinkhorn2([], B, M, 0.1, method=method)
    ref = ot.sinkhorn2(np.full(7, 1 / 7), B, M, 0.1, method=method)
    assert_close(res, ref, **F64)
