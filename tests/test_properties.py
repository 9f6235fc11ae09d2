"""Issue 22 acceptance: property-based tests (hypothesis) of the public
solvers on random valid problems.

The property: every array a call returns is finite, or the call warned
(a warning other than NumPy's incidental RuntimeWarnings), or it raised a
ValueError with a message.  Never a silent NaN or inf.

Problems: shapes 1..40, float32 / float64, max(M) / reg over 1e-3 .. 1e6,
zero bins in a and b, 2-D b (n_hists problems) and paired 2-D a / b.
The solvers run with few iterations and ``warn=False`` where they take it:
"did not converge" is then not emitted, so a warning that excuses a
non-finite result is one about the numerics.  Examples are drawn from a
fixed seed (``derandomize=True``), bounded in number, and no example
database is written.
"""
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import numbaot  # noqa: E402
from numbaot.gradients import sinkhorn2_value_and_grad  # noqa: E402

SETTINGS = dict(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
ITERS = 20


def _arrays(out):
    """Every NumPy array / scalar inside a result (tuples, lists, dicts)."""
    if isinstance(out, dict):
        for v in out.values():
            yield from _arrays(v)
    elif isinstance(out, (tuple, list)):
        for v in out:
            yield from _arrays(v)
    elif out is not None:
        yield np.asarray(out)


def assert_finite_or_warned(fn):
    """Run ``fn``: a ValueError with a message, or finite outputs, or a
    (non-RuntimeWarning) warning.  Returns the outputs (None on ValueError)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn()
        except ValueError as e:
            assert str(e), "a ValueError without a message"
            return None
    warned = [w for w in caught if not issubclass(w.category, RuntimeWarning)]
    for x in _arrays(out):
        if x.dtype.kind in "fc" and not np.all(np.isfinite(x)):
            assert warned, f"non-finite output returned silently: {x!r}"
    return out


def _histogram(rng, dim, zero_frac, n_hists):
    """Weights (dim,) or (dim, n_hists), each column of mass 1, about
    ``zero_frac`` of the bins 0 (never all)."""
    cols = max(n_hists, 1)
    w = rng.random((dim, cols)) + 1e-3
    zero = rng.random((dim, cols)) < zero_frac
    zero[rng.integers(dim), :] = False
    w[zero] = 0.0
    w /= w.sum(axis=0)
    return w if n_hists else w[:, 0]


@st.composite
def problems(draw, square=False, batches=True):
    """(a, b, M, reg) of a random valid balanced problem."""
    n = draw(st.integers(1, 40))
    m = n if square else draw(st.integers(1, 40))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    log_scale = draw(st.floats(-3.0, 6.0))  # log10 of max(M) / reg
    reg = draw(st.sampled_from([1e-3, 0.1, 10.0]))
    zero_a = draw(st.sampled_from([0.0, 0.3, 0.8]))
    zero_b = draw(st.sampled_from([0.0, 0.3, 0.8]))
    n_hists = draw(st.sampled_from([0, 0, 1, 3])) if batches else 0
    paired = bool(n_hists) and draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    M = rng.random((n, m)) * (10.0 ** log_scale) * reg
    a = _histogram(rng, n, zero_a, n_hists if paired else 0)
    b = _histogram(rng, m, zero_b, n_hists)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype), reg


def _unchanged(fn, *arrays):
    copies = [x.copy() for x in arrays]
    out = fn()
    for x, x0 in zip(arrays, copies):
        np.testing.assert_array_equal(x, x0)
    return out


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"])
@settings(max_examples=10, **SETTINGS)
@given(p=problems())
def test_sinkhorn_and_sinkhorn2(p, method):
    a, b, M, reg = p
    kw = dict(method=method, numItermax=ITERS, warn=False)
    _unchanged(lambda: assert_finite_or_warned(lambda: numbaot.sinkhorn(a, b, M, reg, **kw)),
               a, b, M)
    assert_finite_or_warned(lambda: numbaot.sinkhorn2(a, b, M, reg, **kw))


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
@settings(max_examples=10, **SETTINGS)
@given(p=problems())
def test_value_and_grad(p, method):
    a, b, M, reg = p
    _unchanged(lambda: assert_finite_or_warned(
        lambda: sinkhorn2_value_and_grad(a, b, M, reg, method=method, numItermax=ITERS)),
        a, b, M)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
@settings(max_examples=10, **SETTINGS)
@given(p=problems(), reg_m=st.sampled_from([1e-2, 1.0, 1e3]))
def test_sinkhorn_unbalanced(p, method, reg_m):
    a, b, M, reg = p
    kw = dict(method=method, numItermax=ITERS)
    _unchanged(lambda: assert_finite_or_warned(
        lambda: numbaot.sinkhorn_unbalanced(a, b, M, reg, reg_m, **kw)), a, b, M)
    assert_finite_or_warned(lambda: numbaot.sinkhorn_unbalanced2(a, b, M, reg, reg_m, **kw))


@settings(max_examples=10, **SETTINGS)
@given(p=problems(square=True, batches=False), n_hists=st.integers(1, 4),
       method=st.sampled_from(["sinkhorn", "sinkhorn_log"]))
def test_barycenter(p, n_hists, method):
    a, _, M, reg = p
    rng = np.random.default_rng(int(M.size))
    A = _histogram(rng, M.shape[0], 0.3, n_hists).astype(a.dtype)
    A[:, 0] = a
    _unchanged(lambda: assert_finite_or_warned(
        lambda: numbaot.barycenter(A, M, reg, method=method, numItermax=ITERS, warn=False)),
        A, M)
