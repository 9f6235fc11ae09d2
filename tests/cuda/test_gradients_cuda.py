"""Entropic OT values and gradients on CUDA device arrays (simulator in CI,
or a GPU).  Oracles: POT 0.9.7's plans and potentials with the value and the
gradients formed here by float64 closed forms and plain loops, and numbaot's
CPU path (same iterations)."""
import numpy as np
import pytest

from _helpers import ot

from numbaot._dispatch import is_device_array
from numbaot.gradients import empirical_sinkhorn2_value_and_grad, sinkhorn2_value_and_grad

F64 = dict(rtol=1e-9, atol=1e-12)
#: float32 problems are computed in float32 on the device (float64 on the CPU)
F32 = dict(rtol=2e-4, atol=2e-5)


def _dense(rng, n=4, m=5, k=None, dtype=np.float64):
    M = rng.random((n, m))
    a = rng.random(n) + 0.1
    a /= a.sum()
    if k is None:
        b = rng.random(m) + 0.1
        b /= b.sum()
    else:
        b = rng.random((m, k)) + 0.1
        b /= b.sum(0)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def _h(x):
    return x.copy_to_host()


def _oracle_value(P, M, reg):
    """<P, M> + reg sum P log P (0 log 0 = 0), float64 closed form."""
    Pl = np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0)
    return float(np.sum(P * M) + reg * np.sum(Pl))


def _centred(x, reg):
    return reg * (x - x.mean())


def test_dense_paired_batch_and_float32(cuda, rng):
    a, B, M = _dense(rng, k=2)
    A = np.stack([a, a[::-1]], axis=1)
    reg = 0.5
    kw = dict(method="sinkhorn_log", numItermax=3, stopThr=0.0)
    val, g = sinkhorn2_value_and_grad(cuda.to_device(A), cuda.to_device(B), cuda.to_device(M),
                                      reg, **kw)
    assert is_device_array(val) and val.shape == (2,)
    assert g["a"].shape == (4, 2) and g["b"].shape == (5, 2) and g["M"].shape == (2, 4, 5)
    valc, gc = sinkhorn2_value_and_grad(A, B, M, reg, **kw)
    np.testing.assert_allclose(_h(val), valc, **F64)
    for k in gc:
        np.testing.assert_allclose(_h(g[k]), gc[k], **F64)
    a32, b32, M32 = (x.astype(np.float32) for x in (a, B[:, 0], M))
    v32, g32 = sinkhorn2_value_and_grad(cuda.to_device(a32), cuda.to_device(b32),
                                        cuda.to_device(M32), reg, **kw)
    assert v32.dtype == np.float32 and g32["M"].dtype == np.float32
    v64, g64 = sinkhorn2_value_and_grad(a32.astype(float), b32.astype(float),
                                        M32.astype(float), reg, **kw)
    np.testing.assert_allclose(v32, v64, **F32)
    for k in g64:
        np.testing.assert_allclose(_h(g32[k]), g64[k], **F32)


def _cloud_oracle(Xs, Xt, f, g, reg, metric):
    """Value and point gradients from POT's log-scalings by plain loops."""
    n, m = len(Xs), len(Xt)
    gx, gy = np.zeros_like(Xs), np.zeros_like(Xt)
    val = 0.0
    for i in range(n):
        for j in range(m):
            diff = Xs[i] - Xt[j]
            d2 = float(diff @ diff)
            cost = d2 if metric == "sqeuclidean" else np.sqrt(d2)
            p = np.exp(f[i] + g[j] - cost / reg)
            val += p * cost + reg * p * np.log(p)
            if metric == "sqeuclidean":
                gr = 2.0 * diff
            else:
                gr = diff / np.sqrt(d2) if d2 > 0 else 0.0 * diff
            gx[i] += p * gr
            gy[j] -= p * gr
    return val, gx, gy


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_cloud_value_and_grad(cuda, rng, metric):
    Xs = rng.normal(size=(3, 2))
    Xt = rng.normal(size=(4, 2)) + 0.3
    Xt[1] = Xs[0]  # coincident points: the euclidean subgradient 0
    reg = 0.5
    kw = dict(metric=metric, numIterMax=2, stopThr=0.0, warn=False)
    dXs, dXt = cuda.to_device(Xs), cuda.to_device(Xt)
    val, g = empirical_sinkhorn2_value_and_grad(dXs, dXt, reg, **kw)
    assert isinstance(val, np.float64)
    assert g["X_s"].shape == (3, 2) and g["X_t"].shape == (4, 2)
    assert g["a"].shape == (3,) and g["b"].shape == (4,)
    f, gg = ot.bregman.empirical_sinkhorn(Xs, Xt, reg, isLazy=True, **kw)
    v_o, gx_o, gy_o = _cloud_oracle(Xs, Xt, f, gg, reg, metric)
    np.testing.assert_allclose(val, v_o, **F64)
    np.testing.assert_allclose(_h(g["X_s"]), gx_o, **F64)
    np.testing.assert_allclose(_h(g["X_t"]), gy_o, **F64)
    np.testing.assert_allclose(_h(g["a"]), _centred(f, reg), **F64)
    np.testing.assert_allclose(_h(g["b"]), _centred(gg, reg), **F64)
    np.testing.assert_array_equal(dXs.copy_to_host(), Xs)
    np.testing.assert_array_equal(dXt.copy_to_host(), Xt)


def test_cloud_batch_multi_warp(cuda, rng, multi_warp):
    """A batch (2-D b) with zero weights (-inf potentials), on 64-thread
    blocks (block reductions across two warps)."""
    Xs = rng.normal(size=(2, 2))
    Xt = rng.normal(size=(3, 2))
    b = np.array([[0.5, 0.2], [0.5, 0.0], [0.0, 0.8]])
    kw = dict(numIterMax=1, stopThr=0.0, warn=False)
    val, g = empirical_sinkhorn2_value_and_grad(cuda.to_device(Xs), cuda.to_device(Xt), 0.5,
                                                b=cuda.to_device(b), **kw)
    valc, gc = empirical_sinkhorn2_value_and_grad(Xs, Xt, 0.5, b=b, **kw)
    assert is_device_array(val) and g["X_s"].shape == (2, 2, 2) and g["b"].shape == (3, 2)
    np.testing.assert_allclose(_h(val), valc, **F64)
    for k in gc:
        np.testing.assert_allclose(_h(g[k]), gc[k], **F64)


def test_cloud_float32_two_tiles(cuda, rng):
    """float32 points; 34 targets on 32-thread blocks: two weight tiles in
    lazy_grad for the source points."""
    kw = dict(numIterMax=1, stopThr=0.0, warn=False)
    Xs32 = rng.normal(size=(2, 2)).astype(np.float32)
    Xt32 = rng.normal(size=(34, 2)).astype(np.float32)
    v32, g32 = empirical_sinkhorn2_value_and_grad(cuda.to_device(Xs32), cuda.to_device(Xt32),
                                                  1.0, **kw)
    assert v32.dtype == np.float32 and g32["X_t"].dtype == np.float32
    v64, g64 = empirical_sinkhorn2_value_and_grad(Xs32.astype(float), Xt32.astype(float),
                                                  1.0, **kw)
    np.testing.assert_allclose(v32, v64, **F32)
    for k in g64:
        np.testing.assert_allclose(_h(g32[k]), g64[k], **F32)


def test_bad_device_input(cuda, rng):
    a, b, M = _dense(rng)
    with pytest.raises(TypeError, match="on the host"):
        sinkhorn2_value_and_grad(cuda.to_device(a), b, cuda.to_device(M), 0.5)
    Mb = M.copy()
    Mb[1, 1] = np.nan
    with pytest.raises(ValueError, match="M contains NaN"):
        sinkhorn2_value_and_grad(cuda.to_device(a), cuda.to_device(b), cuda.to_device(Mb), 0.5)
    with pytest.raises(ValueError, match="Unknown method"):
        sinkhorn2_value_and_grad(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.5,
                                 method="greenkhorn")
    Xs = rng.normal(size=(3, 2))
    with pytest.raises(TypeError, match="on the host"):
        empirical_sinkhorn2_value_and_grad(cuda.to_device(Xs), Xs, 0.5)
    bad = Xs.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="X_t contains NaN or inf"):
        empirical_sinkhorn2_value_and_grad(cuda.to_device(Xs), cuda.to_device(bad), 0.5)
    with pytest.raises(ValueError, match="b has negative"):
        empirical_sinkhorn2_value_and_grad(cuda.to_device(Xs), cuda.to_device(Xs), 0.5,
                                           b=cuda.to_device(np.array([0.5, 0.7, -0.2])))


_LAUNCHERS = ("log_scalings", "plan_and_value", "centred", "work_array", "result",
              "values_result", "cloud_value", "cloud_grads", "cloud_centred")


def test_launchers_same_contract_as_cpu(cuda, rng):
    """numbaot.cpu.gradients and numbaot.cuda.gradients expose the same
    launchers (names and signatures); on the same finished Sinkhorn and lazy
    states (same host inputs) they give the same work arrays and values."""
    import inspect

    from numbaot.cpu import empirical as cpu_e
    from numbaot.cpu import gradients as cpu_g
    from numbaot.cpu import sinkhorn as cpu_s
    from numbaot.cuda import empirical as gpu_e
    from numbaot.cuda import gradients as gpu_g
    from numbaot.cuda import sinkhorn as gpu_s

    for name in _LAUNCHERS:
        assert inspect.signature(getattr(cpu_g, name)) == inspect.signature(getattr(gpu_g, name))
    a, B, M = _dense(rng, k=2)
    A, dt = a[None, :], np.dtype(np.float64)
    c = -2.0
    for kind in ("knopp", "log"):
        if kind == "knopp":
            u0, v0 = np.full((2, 4), 0.25), np.full((2, 5), 0.2)
            st_c = cpu_s.KnoppState(M, c, A, B.T.copy(), u0.copy(), v0.copy())
            st_g = gpu_s.KnoppState(cuda.to_device(M), c, A, B.T.copy(), u0, v0)
            cpu_s.knopp_steps(st_c, 3)
            gpu_s.knopp_steps(st_g, 3)
        else:
            la, lb = np.log(A), np.log(B.T)
            st_c = cpu_s.LogState(M, c, la, lb.copy(), B.T.copy(), np.zeros((2, 4)),
                                  np.zeros((2, 5)))
            st_g = gpu_s.LogState(cuda.to_device(M), c, la, lb, B.T.copy(), np.zeros((2, 4)),
                                  np.zeros((2, 5)))
            cpu_s.log_steps(st_c, 3, np.ones(2, dtype=np.bool_))
            gpu_s.log_steps(st_g, 3, np.ones(2, dtype=np.bool_))
        lu_c, lv_c = cpu_g.log_scalings(st_c, dt)
        lu_g, lv_g = gpu_g.log_scalings(st_g, dt)
        np.testing.assert_allclose(_h(lu_g), lu_c, **F64)
        np.testing.assert_allclose(_h(lv_g), lv_c, **F64)
        plan_c, val_c = cpu_g.plan_and_value(M, c, lu_c, lv_c)
        plan_g, val_g = gpu_g.plan_and_value(cuda.to_device(M), c, lu_g, lv_g)
        assert plan_c.shape == (2, 4, 5) and isinstance(val_g, np.ndarray)
        np.testing.assert_allclose(_h(plan_g), plan_c, **F64)
        np.testing.assert_allclose(val_g, val_c, **F64)
        ga_c, ga_g = cpu_g.centred(lu_c, 0.5), gpu_g.centred(lu_g, 0.5)
        assert ga_c.shape == (4, 2)
        np.testing.assert_allclose(_h(ga_g), ga_c, **F64)
    like = cuda.to_device(M)
    assert isinstance(cpu_g.result(plan_c, np.dtype(np.float32), M), np.ndarray)
    assert cpu_g.result(plan_c, np.dtype(np.float32), M).dtype == np.float32
    assert is_device_array(gpu_g.result(plan_g, dt, like))
    assert is_device_array(gpu_g.values_result(val_g, dt, like))
    assert cpu_g.values_result(val_c, np.dtype(np.float32), M).dtype == np.float32
    # point clouds: the same finished lazy states
    Xs, Xt = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)) + 0.3
    Xt[1] = Xs[0]  # coincident points
    la, lb = np.log(np.full(3, 1 / 3)), np.log(np.full(4, 0.25))
    for metric in (0, 1):
        sts = [be.LazyState(Xs, Xt, la.copy(), lb.copy(), np.zeros(3), np.zeros(4), c, metric,
                            dt) for be in (cpu_e, gpu_e)]
        cpu_e.lazy_steps(sts[0], 2)
        gpu_e.lazy_steps(sts[1], 2)
        np.testing.assert_allclose(gpu_g.cloud_value(sts[1]), cpu_g.cloud_value(sts[0]), **F64)
        outs = []
        for g, st in zip((cpu_g, gpu_g), sts):
            gX, gY = g.work_array((2, 3, 2), dt), g.work_array((2, 4, 2), dt)
            ga, gb = g.work_array((3, 2), dt), g.work_array((4, 2), dt)
            for k in range(2):
                g.cloud_grads(st, gX[k], gY[k])
                g.cloud_centred(st, ga, gb, k)
            outs.append([_h(x) if is_device_array(x) else x for x in (gX, gY, ga, gb)])
        for x_c, x_g in zip(*outs):
            np.testing.assert_allclose(x_g, x_c, **F64)
