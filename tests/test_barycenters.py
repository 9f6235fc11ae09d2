"""Barycenters (numbaot.bregman.barycenter*, convolutional_barycenter2d)
against POT 0.9.7, step for step."""
import warnings

import numpy as np
import pytest

from _helpers import ot

import numbaot
import numbaot.bregman as nb


def _gaussians(n=100):
    x = np.linspace(0, 1, n)
    hs = [np.exp(-((x - mu) ** 2) / (2 * s ** 2)) for mu, s in ((0.2, 0.05), (0.5, 0.08),
                                                                (0.8, 0.04))]
    A = np.stack([h / h.sum() for h in hs], 1)
    return A, (x[:, None] - x[None]) ** 2


def _run(fn, *args, **kw):
    with warnings.catch_warnings(record=True) as wr:
        warnings.simplefilter("always")
        out = fn(*args, **kw)
    return out, [str(w.message) for w in wr if w.category is UserWarning]


@pytest.mark.parametrize("method,reg", [("sinkhorn", 1e-2), ("sinkhorn_log", 1e-2),
                                        ("sinkhorn_log", 1e-3), ("sinkhorn_stabilized", 1e-2),
                                        ("sinkhorn_stabilized", 1e-3)])
@pytest.mark.parametrize("weights", [None, [0.2, 0.5, 0.3]])
@pytest.mark.parametrize("small", [True, False])
def test_barycenter_matches_pot(method, reg, weights, small, monkeypatch):
    """``small``: the multiplicative state's serial path (100^2 x 3 entries
    <= SMALL_MAX_ENTRIES), or the chunked parallel kernels (the bound set
    to 0)."""
    if not small:
        monkeypatch.setattr(numbaot._config, "SMALL_MAX_ENTRIES", 0)
    A, M = _gaussians()
    kw = dict(weights=weights, method=method, log=True, numItermax=300)
    (b, lg), w1 = _run(nb.barycenter, A, M, reg, **kw)
    (bp, lgp), w2 = _run(ot.bregman.barycenter, A, M, reg, **kw)
    np.testing.assert_allclose(b, bp, rtol=1e-9, atol=1e-15)
    assert set(lg) == set(lgp) and lg["niter"] == lgp["niter"]
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-7, atol=1e-15)
    assert w1 == w2


def test_log_barycenter_at_reg_1e_3_is_a_distribution():
    A, M = _gaussians()
    b = nb.barycenter(A, M, 1e-3, method="sinkhorn_log", numItermax=2000, stopThr=1e-10)
    assert np.all(np.isfinite(b)) and abs(b.sum() - 1) < 1e-6
    # the 1-D W2 barycenter of Gaussians is (close to) the Gaussian of mean 0.5
    x = np.linspace(0, 1, 100)
    assert abs(np.sum(b * x) - np.mean([0.2, 0.5, 0.8])) < 5e-3


def test_named_functions_and_positional_tau():
    A, M = _gaussians(40)
    np.testing.assert_allclose(nb.barycenter_sinkhorn(A, M, 0.05, numItermax=50, warn=False),
                               ot.bregman.barycenter_sinkhorn(A, M, 0.05, numItermax=50,
                                                              warn=False), rtol=1e-9)
    np.testing.assert_allclose(nb.barycenter_stabilized(A, M, 0.05, 1e3, numItermax=50),
                               ot.bregman.barycenter_stabilized(A, M, 0.05, 1e3, numItermax=50),
                               rtol=1e-9)
    assert numbaot.barycenter is nb.barycenter


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
def test_convolutional_barycenter_non_square(method):
    rng = np.random.default_rng(0)
    imgs = rng.random((3, 12, 9))
    imgs /= imgs.sum((1, 2), keepdims=True)
    kw = dict(method=method, log=True, numItermax=60, weights=np.array([0.5, 0.3, 0.2]))
    (b, lg), w1 = _run(nb.convolutional_barycenter2d, imgs, 0.004, **kw)
    (bp, lgp), w2 = _run(ot.bregman.convolutional_barycenter2d, imgs, 0.004, **kw)
    np.testing.assert_allclose(b, bp, rtol=1e-9, atol=1e-15)
    assert set(lg) == set(lgp) and lg["niter"] == lgp["niter"] and w1 == w2
    np.testing.assert_allclose(lg["err"], lgp["err"], rtol=1e-7)


def test_bad_input():
    A, M = _gaussians(20)
    with pytest.raises(ValueError, match="Unknown method 'foo'"):
        nb.barycenter(A, M, 0.1, method="foo")
    with pytest.raises(ValueError, match="M must have shape"):
        nb.barycenter(A, M[:-1], 0.1)
    # too few rows in A: the shape is named first, not the masses the cut
    # histograms no longer share
    with pytest.raises(ValueError, match="M must have shape"):
        nb.barycenter(A[:-3] * np.arange(1, A.shape[1] + 1), M, 0.1)
    with pytest.raises(ValueError, match="weights"):
        nb.barycenter(A, M, 0.1, weights=[0.5, 0.5])
    with pytest.raises(ValueError, match="negative"):
        nb.barycenter(-A, M, 0.1)
    with pytest.raises(ValueError, match="reg"):
        nb.barycenter(A, M, 0.0)
    with pytest.raises(ValueError, match="3-D"):
        nb.convolutional_barycenter2d(A, 0.1)


def test_caller_arrays_unchanged():
    A, M = _gaussians(30)
    A0, M0 = A.copy(), M.copy()
    for meth in ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"):
        nb.barycenter(A, M, 0.05, method=meth, numItermax=20, warn=False)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(M, M0)


@pytest.mark.parametrize("kind", ["knopp", "log"])
def test_cpu_launchers_give_the_public_result(kind):
    """numbaot.cpu.barycenter's launchers (the contract shared with
    numbaot.cuda.barycenter) driven by hand give the public result, bit for bit."""
    from numbaot.cpu import barycenter as cb

    A, M = _gaussians(40)
    w = np.array([0.2, 0.5, 0.3])
    State = cb.KnoppBaryState if kind == "knopp" else cb.LogBaryState
    st = State(np.ascontiguousarray(M), -1.0 / 0.05, A, w)
    step = cb.knopp_bary_step if kind == "knopp" else cb.log_bary_step
    for ii in range(20):
        err = step(st, ii % 10 == 1)
        assert (err is None) == (ii % 10 != 1)
    res = (cb.knopp_bary_result if kind == "knopp" else cb.log_bary_result)(st, np.float64)
    method = "sinkhorn" if kind == "knopp" else "sinkhorn_log"
    ref = nb.barycenter(A, M, 0.05, weights=w, method=method, numItermax=20, stopThr=0.0,
                        warn=False)
    np.testing.assert_array_equal(res, ref)
