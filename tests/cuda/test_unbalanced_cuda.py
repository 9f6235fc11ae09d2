"""Unbalanced Sinkhorn on CUDA device arrays (simulator in CI, or a real GPU),
compared with POT 0.9.7 (the oracle) and numbaot's CPU path.

Tiny problems (the simulator runs a Python thread per CUDA thread); the
conftest lowers the block/tile/chunk sizes so multi-block, multi-chunk and
warp-shuffle paths run; the ``path`` fixture runs the fused (one launch per
block of iterations) and the multi-launch kernels.
"""
import warnings

import numpy as np
import pytest

from numbaot import _config
from numbaot import unbalanced as nu
from numbaot._dispatch import is_device_array

from _helpers import ot

F64 = dict(rtol=1e-7, atol=1e-10)
#: float32 problems run float32 arithmetic on the GPU (float64 on the CPU)
F32 = dict(rtol=2e-4, atol=2e-6)


def _problem(rng, n=6, m=9, k=None, dtype=np.float64):
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(m, 2)) + 0.5
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    a = rng.random(n) + 0.1
    a /= a.sum()
    if k is None:
        b = 1.5 * (rng.random(m) + 0.1)
        b /= b.sum()
    else:
        b = rng.random((m, k)) + 0.1
        b /= b.sum(0)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def _h(x):
    return x.copy_to_host() if is_device_array(x) else np.asarray(x)


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@pytest.fixture(params=["fused", "multi_launch"])
def path(request, monkeypatch):
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES",
                        10**9 if request.param == "fused" else 0)
    return request.param


@pytest.mark.parametrize("kind, reg_m", [("fused", (2.0, 0.3)), ("multi_launch", (0.5, float("inf")))])
def test_plan_matches_pot_and_cpu(cuda, rng, monkeypatch, kind, reg_m):
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES", 10**9 if kind == "fused" else 0)
    a, b, M = _problem(rng, n=5, m=7)
    kw = dict(numItermax=11, stopThr=1e-14, log=True)
    G, lg = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M),
                                   0.2, reg_m, **kw)
    assert is_device_array(G) and G.dtype == np.float64 and G.shape == M.shape
    Gc, lgc = nu.sinkhorn_unbalanced(a, b, M, 0.2, reg_m, **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, reg_m, **kw)
    np.testing.assert_allclose(_h(G), Gp, **F64)
    np.testing.assert_allclose(_h(G), Gc, **F64)
    assert len(lg["err"]) == len(lgp["err"]) == 11
    np.testing.assert_allclose(np.asarray(lg["err"], np.float64), lgp["err"], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(_h(lg["logu"]), lgp["logu"], **F64)
    np.testing.assert_allclose(lg["cost"], lgp["cost"], **F64)
    np.testing.assert_allclose(lg["total_cost"], lgp["total_cost"], **F64)


def test_stops_inside_a_block_like_pot(cuda, rng):
    """Convergence at an iteration that is not a multiple of 10: the block is
    replayed up to it (same err list, same plan as POT)."""
    a, b, M = _problem(rng, n=3, m=4)
    kw = dict(numItermax=40, stopThr=1e-3, log=True)  # POT stops after 5 iterations
    G, lg = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M),
                                   0.5, 0.5, **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.5, 0.5, **kw)
    assert len(lg["err"]) == len(lgp["err"])
    assert len(lgp["err"]) % 10 != 0
    np.testing.assert_allclose(_h(G), Gp, **F64)


def test_batch_losses_and_float32(cuda, rng, path):
    a, B, M = _problem(rng, n=4, m=5, k=2)
    kw = dict(numItermax=4, stopThr=0.0)
    loss = _quiet(nu.sinkhorn_unbalanced, cuda.to_device(a), cuda.to_device(B),
                  cuda.to_device(M), 0.3, 0.7, **kw)
    ref = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, B, M, 0.3, 0.7, **kw)
    np.testing.assert_allclose(_h(loss), ref, **F64)
    a32, b32, M32 = (x.astype(np.float32) for x in _problem(rng, n=3, m=5))
    G = nu.sinkhorn_unbalanced(cuda.to_device(a32), cuda.to_device(b32), cuda.to_device(M32),
                               0.3, 0.7, **kw)
    assert G.dtype == np.float32
    Gp = _quiet(ot.unbalanced.sinkhorn_unbalanced, *(x.astype(np.float64) for x in (a32, b32, M32)),
                0.3, 0.7, **kw)
    np.testing.assert_allclose(_h(G), Gp, **F32)


def test_numerical_errors_replayed(cuda, rng, path):
    a, b, M = _problem(rng, n=3, m=4)
    M = M * 2000.0
    kw = dict(numItermax=3, log=True)
    (G, lg) = _quiet(nu.sinkhorn_unbalanced, cuda.to_device(a), cuda.to_device(b),
                     cuda.to_device(M), 0.01, 1.0, **kw)
    Gc, lgc = _quiet(nu.sinkhorn_unbalanced, a, b, M, 0.01, 1.0, **kw)
    assert len(lg["err"]) == len(lgc["err"])
    np.testing.assert_allclose(_h(G), Gc, **F64)


def test_log_solver_matches_pot_and_cpu(cuda, rng):
    """The log-domain iterations are the multiplicative ones in log space:
    after N iterations the plan equals POT's (and the CPU log solver's)."""
    a, b, M = _problem(rng, n=4, m=5)
    kw = dict(numItermax=3, stopThr=0.0, log=True)
    G, lg = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M),
                                   0.2, (0.5, 2.0), method="sinkhorn_log", **kw)
    Gc, lgc = nu.sinkhorn_unbalanced(a, b, M, 0.2, (0.5, 2.0), method="sinkhorn_log", **kw)
    Gp, lgp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, (0.5, 2.0), **kw)
    np.testing.assert_allclose(_h(G), Gp, **F64)
    np.testing.assert_allclose(_h(G), Gc, **F64)
    np.testing.assert_allclose(np.asarray(lg["err"]), lgc["err"], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(_h(lg["logu"]), lgc["logu"], **F64)
    np.testing.assert_allclose(lg["total_cost"], lgp["total_cost"], **F64)
    # 2-D b (losses) and an explicit reference measure
    B = np.stack([b, 0.5 * b], axis=1)
    loss = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(B), cuda.to_device(M), 0.2,
                                  0.7, method="sinkhorn_log", numItermax=2, stopThr=0.0)
    ref = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, B, M, 0.2, 0.7, numItermax=2, stopThr=0.0)
    np.testing.assert_allclose(_h(loss), ref, **F64)
    C = rng.uniform(0.5, 2.0, size=M.shape)
    Gx = nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.2,
                                0.7, c=C, method="sinkhorn_log", numItermax=2, stopThr=0.0)
    Gxp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.2, 0.7, c=C, numItermax=2,
                 stopThr=0.0)
    np.testing.assert_allclose(_h(Gx), Gxp, **F64)


def test_unsupported_method_on_gpu(cuda, rng):
    a, b, M = _problem(rng, n=3, m=3)
    with pytest.raises(TypeError, match="host"):
        nu.sinkhorn_unbalanced(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.1, 1.0,
                               method="sinkhorn_stabilized")


def _launch_pair(log_domain, a, b, M, reg, reg_m, C=None, n_problems=None):
    """The CPU and the CUDA launcher state of one problem, from the same host
    float64 inputs (the contract: same constructor, same launchers)."""
    from numba import cuda

    from numbaot.cpu import unbalanced as ku
    from numbaot.cuda import unbalanced as gu

    fi = [r / (r + reg) for r in reg_m]
    use_mat = C is not None
    Cm = C if use_mat else np.zeros((1, 1))
    bb = b.reshape(1, -1) if b.ndim == 1 else np.ascontiguousarray(b.T)
    K = bb.shape[0]
    init = np.zeros if log_domain else np.ones
    states = []
    for mod, Mx in ((ku, M), (gu, cuda.to_device(M))):
        cls = mod.UotLogState if log_domain else mod.UotState
        ca, cb = (a, b) if b.ndim == 1 else (np.ones(a.size), np.ones(M.shape[1]))
        states.append((mod, cls(Mx, reg, ca, cb, Cm, use_mat, a.reshape(1, -1), bb,
                                init((K, M.shape[0])), init((K, M.shape[1])), *fi)))
    return states


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("log_domain", [False, True])
def test_launcher_contract_matches_cpu(cuda, rng, path, log_domain):
    """The same launchers on both devices: (iterations, failed), the error
    list (appended per completed iteration, convergence inside a block of 10
    replayed to the right step), scalings, losses, plan statistics."""
    a, b, M = _problem(rng, n=5, m=6)
    C = rng.uniform(0.5, 2.0, size=M.shape)
    # reg 0.5: converges 8 iterations into the second call (12 in all; 18 at
    # reg 0.3), inside a block of 10: the simulator takes seconds per iteration
    pair = _launch_pair(log_domain, a, b, M, 0.5, (0.7, 1.5), C=C)
    res = []
    for mod, st in pair:
        steps = mod.uot_log_steps if log_domain else mod.uot_steps
        scal = mod.uot_log_potentials if log_domain else mod.uot_scalings
        stats = mod.uot_log_stats if log_domain else mod.uot_stats
        errs = []
        first = steps(st, 4, 0.0, errs)
        second = steps(st, 100, 1e-4, errs)
        u, v = scal(st)
        plan, rows, cols, out = stats(st, True)
        assert stats(st, False)[0] is None
        res.append((first, second, errs, u, v, _h(plan), rows, cols, out))
    (f0, s0, e0, u0, v0, p0, r0, c0, o0), (f1, s1, e1, u1, v1, p1, r1, c1, o1) = res
    assert f0 == f1 == (4, False)
    assert s0 == s1 and not s0[1] and 0 < s0[0] < 100 and s0[0] % 10 != 0
    assert len(e0) == len(e1) == 4 + s0[0]
    np.testing.assert_allclose(e1, e0, rtol=1e-9, atol=1e-14)
    assert u1.dtype == v1.dtype == np.float64 and u1.shape == (1, 5) and v1.shape == (1, 6)
    for x, y in ((u1, u0), (v1, v0), (p1, p0), (r1, r0), (c1, c0), (o1, o0)):
        np.testing.assert_allclose(x, y, **F64)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_launcher_losses_and_failure_match_cpu(cuda, rng, path):
    """2-D b (shared M, one loss per problem) and a failing step (undone:
    its index, True, the scalings before it) on both devices."""
    a, B, M = _problem(rng, n=4, m=5, k=2)
    for log_domain in (False, True):
        pair = _launch_pair(log_domain, a, B, M, 0.3, (0.5, 0.9))
        out = []
        for mod, st in pair:
            steps = mod.uot_log_steps if log_domain else mod.uot_steps
            loss = mod.uot_log_loss if log_domain else mod.uot_loss
            errs = []
            assert steps(st, 5, 0.0, errs) == (5, False) and len(errs) == 5
            out.append((errs, np.asarray(loss(st), np.float64)))
        np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(out[1][1], out[0][1], **F64)
    a, b, M = _problem(rng, n=3, m=4)
    pair = _launch_pair(False, a, b, M * 2000.0, 0.01, (1.0, 1.0))
    out = []
    for mod, st in pair:
        errs = []
        nit, failed = mod.uot_steps(st, 12, 0.0, errs)
        out.append((nit, failed, len(errs), *mod.uot_scalings(st)))
    assert out[0][:3] == out[1][:3] and out[0][1] and out[0][0] == out[0][2]
    np.testing.assert_allclose(out[1][3], out[0][3], **F64)
    np.testing.assert_allclose(out[1][4], out[0][4], **F64)


@pytest.mark.parametrize("path_kind", ["fused", "multi_launch"])
def test_total_cost_with_zero_weights_is_the_reduced_problems(cuda, monkeypatch, path_kind):
    """As the CPU test: a zero weight adds nothing to the total cost (0 log
    0 = 0 in the plan's KL term, computed on the device); POT on the problem
    without those rows is the oracle, after three iterations (the total is
    O(1) there; at convergence it cancels for any data)."""
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES",
                        10**9 if path_kind == "fused" else 0)
    rng = np.random.default_rng(8)
    M = rng.random((6, 5))
    a, b = rng.random(6) + 0.1, rng.random(5) + 0.1
    a[::3] = 0.0
    a, b = a / a.sum(), 1.5 * b / b.sum()
    ka = a > 0
    kw = dict(numItermax=3, stopThr=0.0)
    ref = _quiet(ot.unbalanced.sinkhorn_unbalanced2, a[ka], b, M[ka], 0.5, 1.0,
                 returnCost="total", **kw)
    got = _quiet(nu.sinkhorn_unbalanced2, cuda.to_device(a), cuda.to_device(b),
                 cuda.to_device(M), 0.5, 1.0, method="sinkhorn_log", returnCost="total", **kw)
    assert abs(ref) > 0.01
    np.testing.assert_allclose(float(_h(got)), ref, rtol=1e-9)


@pytest.mark.parametrize("path_kind", ["fused", "multi_launch"])
def test_total_cost_after_a_failed_first_iteration_is_finite(cuda, monkeypatch, path_kind):
    """The multiplicative solver on the device stops at iteration 0 on a
    zero in b, as POT's; its total counts the zero-mass KL terms as 0: POT's
    plan in the cost formula with 0 log 0 = 0 is the oracle."""
    monkeypatch.setattr(_config, "CUDA_FUSED_MAX_ENTRIES",
                        10**9 if path_kind == "fused" else 0)
    rng = np.random.default_rng(9)
    M = rng.random((6, 5))
    a, b = rng.random(6) + 0.1, rng.random(5) + 0.1
    b[1] = 0.0
    a, b = a / a.sum(), 1.5 * b / b.sum()
    Gp = _quiet(ot.unbalanced.sinkhorn_unbalanced, a, b, M, 0.5, 1.0)
    got = _quiet(nu.sinkhorn_unbalanced2, cuda.to_device(a), cuda.to_device(b),
                 cuda.to_device(M), 0.5, 1.0, returnCost="total")

    def kl0(p, q):
        p, q = np.ravel(p), np.ravel(q)
        keep = p != 0
        return float(np.sum(p[keep] * np.log(p[keep] / q[keep] + 1e-16)))

    ref = (np.sum(Gp * M) + 0.5 * kl0(Gp, np.outer(a, b)) + kl0(Gp.sum(1), a)
           + kl0(Gp.sum(0), b))
    assert abs(ref) > 0.01
    np.testing.assert_allclose(float(_h(got)), ref, rtol=1e-9)
