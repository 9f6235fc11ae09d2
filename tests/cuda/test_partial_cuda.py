"""Entropic partial OT on CUDA device arrays (simulator in CI, or a real GPU),
compared with POT 0.9.7 (the oracle) and numbaot's CPU path.

Tiny problems (the simulator runs a Python thread per CUDA thread); the
conftest lowers the block/tile/chunk sizes so that multi-chunk column passes
and warp-shuffle block reductions run.
"""
import contextlib
import io
import warnings

import numpy as np
import pytest

from numbaot import partial as npar
from numbaot._dispatch import is_device_array

from _helpers import ot

F64 = dict(rtol=1e-9, atol=1e-14)
#: float32 problems run float32 arithmetic on the GPU (float64 on the CPU)
F32 = dict(rtol=2e-4, atol=2e-6)


def _problem(rng, n=6, m=9, dtype=np.float64):
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(m, 2)) + 0.5
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    a = rng.random(n) + 0.1
    a /= a.sum()
    w = rng.random(m) + 0.1
    b = 1.3 * w / w.sum()
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def _h(x):
    return x.copy_to_host() if is_device_array(x) else np.asarray(x)


def _run(fn, *args, **kw):
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as rec, contextlib.redirect_stdout(out), \
            np.errstate(all="ignore"):
        warnings.simplefilter("always")
        res = fn(*args, **kw)
    return res, out.getvalue(), [str(w.message) for w in rec
                                 if not issubclass(w.category, RuntimeWarning)]


SOLVERS = {
    "exp": (ot.partial.entropic_partial_wasserstein, npar.entropic_partial_wasserstein),
    "log": (ot.partial.entropic_partial_wasserstein_logscale,
            npar.entropic_partial_wasserstein_logscale),
}


@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("shape", [(1, 5), (5, 7), (11, 3)])
def test_plan_matches_pot_and_cpu(cuda, kind, shape):
    rng = np.random.default_rng(shape[0])
    a, b, M = _problem(rng, *shape)
    pot, ours = SOLVERS[kind]
    kw = dict(m=0.8, numItermax=11, log=True)
    G, lg = ours(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.1, **kw)
    assert is_device_array(G) and G.dtype == np.float64 and G.shape == M.shape
    Gc, lgc = ours(a, b, M, 0.1, **kw)
    Gp, lgp = pot(a, b, M, 0.1, **kw)
    np.testing.assert_allclose(_h(G), Gp, rtol=F64["rtol"], atol=F64["atol"])
    np.testing.assert_allclose(_h(G), Gc, rtol=F64["rtol"], atol=F64["atol"])
    assert len(lg["err"]) == len(lgc["err"]) == 2
    assert all(type(e) is np.float64 for e in lg["err"])
    np.testing.assert_allclose(lg["err"], lgc["err"], rtol=1e-7, atol=1e-13)
    np.testing.assert_allclose(lg["partial_w_dist"], lgp["partial_w_dist"], rtol=1e-9)


def test_multi_warp_blocks(cuda, multi_warp):
    rng = np.random.default_rng(3)
    a, b, M = _problem(rng, 5, 70)
    for pot, ours in SOLVERS.values():
        G = ours(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.1, m=0.7,
                 numItermax=5)
        Gp = pot(a, b, M, 0.1, m=0.7, numItermax=5)
        np.testing.assert_allclose(_h(G), Gp, rtol=F64["rtol"], atol=F64["atol"])


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_float32_computes_in_float32(cuda, kind):
    rng = np.random.default_rng(4)
    a, b, M = _problem(rng, 4, 6, dtype=np.float32)
    pot, ours = SOLVERS[kind]
    G, lg = ours(cuda.to_device(a), cuda.to_device(b), cuda.to_device(M), 0.2, m=0.6,
                 numItermax=15, log=True)
    assert G.dtype == np.float32 and type(lg["partial_w_dist"]) is np.float32
    Gp = pot(*(x.astype(np.float64) for x in (a, b, M)), 0.2, m=0.6, numItermax=15)
    np.testing.assert_allclose(_h(G), Gp, **F32)


def test_failures_like_pot(cuda):
    rng = np.random.default_rng(5)
    a, b, M = _problem(rng, 4, 5)
    Mu = M.copy()
    Mu[0, 0] = 200.0  # exp(-2000) underflows: POT's K has a zero
    a0 = a.copy()
    a0[2] = 0.0
    for args, kw in [((a, b, Mu, 0.1), dict(m=0.5)), ((a0, b, M, 0.1), dict(m=0.5)),
                     ((a, b, M, 0.1), dict(m=0.0))]:
        dev = [cuda.to_device(x) for x in args[:3]]
        for pot, ours in SOLVERS.values():
            (Gp, lp), outp, msgp = _run(pot, *args, numItermax=12, log=True, **kw)
            (G, lg), out, msg = _run(ours, *dev, args[3], numItermax=12, log=True, **kw)
            assert out == outp and msg == msgp
            np.testing.assert_allclose(_h(G), Gp, rtol=F64["rtol"], atol=F64["atol"],
                                       equal_nan=True)
            assert len(lg["err"]) == len(lp["err"])


def test_inputs_unchanged(cuda):
    rng = np.random.default_rng(6)
    a, b, M = _problem(rng, 5, 4)
    da, db, dM = cuda.to_device(a), cuda.to_device(b), cuda.to_device(M)
    for _, ours in SOLVERS.values():
        ours(da, db, dM, 0.1, m=0.5, numItermax=3)
    np.testing.assert_array_equal(da.copy_to_host(), a)
    np.testing.assert_array_equal(db.copy_to_host(), b)
    np.testing.assert_array_equal(dM.copy_to_host(), M)


def test_mixed_devices_rejected(cuda):
    rng = np.random.default_rng(7)
    a, b, M = _problem(rng, 3, 4)
    with pytest.raises(TypeError, match="same device"):
        npar.entropic_partial_wasserstein(a, b, cuda.to_device(M), 0.1)


@pytest.mark.parametrize("kind", ["exp", "log"])
@pytest.mark.parametrize("paired", [True, False])
def test_batch_matches_pot_per_problem_and_cpu(cuda, kind, paired):
    """A paired batch (a (dim_a, n_hists) or shared, b (dim_b, n_hists), one
    m per problem): plans (n_hists, dim_a, dim_b) on the device, each
    problem POT's alone; errors and losses those of the CPU batch."""
    rng = np.random.default_rng(8)
    n, m, K = 5, 7, 3
    _, _, M = _problem(rng, n, m)
    A = rng.random((n, K)) + 0.1
    A /= A.sum(0)
    B = rng.random((m, K)) + 0.1
    B *= 1.2 / B.sum(0)
    if not paired:
        A = np.ascontiguousarray(A[:, 0])
    ms = np.array([0.3, 0.6, 0.9])
    pot, ours = SOLVERS[kind]
    G, lg = ours(cuda.to_device(A), cuda.to_device(B), cuda.to_device(M), 0.1, m=ms,
                 numItermax=21, log=True)
    assert is_device_array(G) and G.shape == (K, n, m)
    Gc, lgc = ours(A, B, M, 0.1, m=ms, numItermax=21, log=True)
    for k in range(K):
        Gp = pot(A[:, k] if paired else A, B[:, k], M, 0.1, m=float(ms[k]), numItermax=21)
        np.testing.assert_allclose(_h(G)[k], Gp, rtol=F64["rtol"], atol=F64["atol"])
    np.testing.assert_allclose(_h(G), Gc, rtol=F64["rtol"], atol=F64["atol"])
    assert len(lg["err"]) == len(lgc["err"]) == 3
    np.testing.assert_allclose(lg["err"], lgc["err"], rtol=1e-7, atol=1e-13)
    np.testing.assert_allclose(lg["partial_w_dist"], lgc["partial_w_dist"], rtol=1e-9)


@pytest.mark.parametrize("kind", ["exp", "log"])
def test_batch_failures_per_problem(cuda, kind):
    """Problem 1 has a zero weight, problem 2 m = 0: each fails as it would
    alone (the CPU batch's messages and plans), problem 0 goes on."""
    rng = np.random.default_rng(9)
    a, b, M = _problem(rng, 4, 5)
    a0 = a.copy()
    a0[2] = 0.0
    A = np.stack([a, a0, a], axis=1)
    B = np.stack([b, b, b], axis=1)
    ms = np.array([0.95, 0.6, 0.0])
    ours = SOLVERS[kind][1]
    (G, lg), out, msg = _run(ours, *(cuda.to_device(x) for x in (A, B, M)), 0.1, m=ms,
                             numItermax=22, log=True)
    (Gc, lgc), outc, msgc = _run(ours, A, B, M, 0.1, m=ms, numItermax=22, log=True)
    assert out == outc and msg == msgc and (out + "".join(msg)).count("problem") == 2
    np.testing.assert_allclose(_h(G), Gc, rtol=F64["rtol"], atol=F64["atol"], equal_nan=True)
    assert len(lg["err"]) == len(lgc["err"]) == 3
    np.testing.assert_allclose(lg["err"], lgc["err"], rtol=1e-7, atol=1e-13)
    # the losses too: NaN for the failed problems (m = 0 in the log domain:
    # NaN potentials), as the CPU's and POT's
    np.testing.assert_allclose(lg["partial_w_dist"], lgc["partial_w_dist"], rtol=1e-9,
                               equal_nan=True)
    assert np.isnan(lg["partial_w_dist"][2])

