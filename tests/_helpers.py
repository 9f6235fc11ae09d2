"""Shared helpers for the numbaot test suite.

Nothing here imports numbaot's internals: the oracles are POT 0.9.7, float64
closed forms and plain Python/NumPy loops.
"""
import re
import warnings

import numpy as np
import pytest

ot = pytest.importorskip("ot", reason="POT (the reference implementation) is not installed")

# ---------------------------------------------------------------------------
# tolerances
# ---------------------------------------------------------------------------
#: float64, both sides converged to the same fixed point with the same stopping
#: rule (same iteration count): the only differences are rounding differences
#: (~1e-16 relative per operation; numbaot's vectorised exp is good to 1e-14),
#: propagated through a contractive iteration.
F64 = dict(rtol=1e-7, atol=1e-10)
#: float32 inputs compared with a float64 reference on the same (upcast) data:
#: float32 rounding of the inputs/outputs (6e-8 relative) and, if computed in
#: float32, the ~1e-6 relative noise floor of a float32 Sinkhorn fixed point
#: (POT float32 vs POT float64 measured at <= 1.4e-6 relative, 1e-8 absolute on
#: these problems).
F32 = dict(rtol=1e-4, atol=1e-6)
#: log-domain potentials (log u, alpha, ...) are O(1..1e3) numbers; relative
#: tolerance as above, absolute scaled to their size.
F64_POT = dict(rtol=1e-7, atol=1e-9)
F32_POT = dict(rtol=1e-4, atol=1e-4)
#: the marginal-violation values in log['err']: they are differences of
#: nearly equal O(1/m) numbers, so they carry an absolute rounding error of a few
#: 1e-16 times the amplification of the iteration; 1e-12 is still 1000 times
#: smaller than the default stopThr=1e-9 they are compared against.
ERR_TOL = dict(rtol=1e-6, atol=1e-12)

METHODS = [
    "sinkhorn",
    "sinkhorn_log",
    "greenkhorn",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
]
METHODS2 = ["sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"]

#: (dim_a, dim_b) shapes: degenerate rows/columns, non-square, larger than the
#: 8-row chunks of the parallel kernels.
SHAPES = [(1, 5), (6, 1), (7, 13), (40, 25)]

NOT_CONVERGED = (
    "Sinkhorn did not converge. You might want to "
    "increase the number of iterations `numItermax` "
    "or the regularization parameter `reg`."
)


def tol(dtype, kind="plan"):
    """Tolerance dict for `dtype` (np.float32 / np.float64)."""
    if np.dtype(dtype) == np.float32:
        return F32_POT if kind == "pot" else F32
    return F64_POT if kind == "pot" else F64


# ---------------------------------------------------------------------------
# problems
# ---------------------------------------------------------------------------
def random_hist(rng, n, k=None):
    """Random strictly positive histogram(s) summing to one (columns if k)."""
    shape = (n,) if k is None else (n, k)
    h = rng.uniform(0.5, 1.5, size=shape)
    return h / h.sum(axis=0)


def make_problem(n, m, seed=0, dtype=np.float64):
    """a (n,), b (m,), M (n, m) in [0, 1] (squared Euclidean, normalised)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = rng.normal(size=(m, 2))
    M = ot.dist(x, y)
    M /= M.max()
    a = random_hist(rng, n)
    b = random_hist(rng, m)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype)


def up(*arrays):
    """Exact float64 copies (the float64 oracle runs on the upcast data)."""
    return tuple(np.asarray(x, dtype=np.float64) for x in arrays)


# ---------------------------------------------------------------------------
# warnings
# ---------------------------------------------------------------------------
def call_recording(fn, *args, **kwargs):
    """Call fn, return (result, [(category, message), ...]) of every warning."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = fn(*args, **kwargs)
    return res, [(w.category, str(w.message)) for w in rec]


# ---------------------------------------------------------------------------
# logs
# ---------------------------------------------------------------------------
ITER_KEYS = ("niter", "n_iter")


def assert_close(actual, desired, **kw):
    actual = np.asarray(actual)
    desired = np.asarray(desired)
    assert actual.shape == desired.shape, (actual.shape, desired.shape)
    np.testing.assert_allclose(actual, desired, **kw)


def assert_log_matches(log_nb, log_pot, dtype=np.float64, check_err=True):
    """numbaot's log dict against POT's: same keys, same iteration counts,
    same err history (float64), same potentials."""
    assert set(log_nb) == set(log_pot)
    for key, ref in log_pot.items():
        got = log_nb[key]
        if key in ITER_KEYS:
            assert int(got) == int(ref), (key, got, ref)
        elif key == "err":
            assert len(got) == len(ref), (len(got), len(ref))
            if check_err:
                assert_close(np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64), **ERR_TOL)
        elif key == "warmstart":
            assert len(got) == 2
            for g, r in zip(got, ref):
                assert_close(g, r, **tol(dtype, "pot"))
        else:
            assert_close(got, ref, **tol(dtype, "pot"))


# ---------------------------------------------------------------------------
# error messages
# ---------------------------------------------------------------------------
def names_argument(message, name):
    """True if `message` names the argument `name`.

    For every name but 'a' a whole-word match is enough. 'a' is also the
    English article, so only unambiguous mentions count: at the start of the
    message, quoted, or followed by a verb / an attribute / punctuation."""
    if name != "a":
        return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) is not None
    patterns = [
        r"^a\b",
        r"[`'\"]a[`'\"]",
        r"(?<![\w])a(\.shape|\.ndim|\[|=|\)|:|,)",
        r"(?<![\w])a\s+(must|has|have|is|contains|and|or|should|with|of shape)\b",
        r"\b(argument|parameter|weights?|histograms?)\s+a\b",
    ]
    return any(re.search(p, message) for p in patterns)


def assert_raises_naming(exc_types, name, fn, *args, **kwargs):
    with pytest.raises(exc_types) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert names_argument(msg, name), f"message does not name {name!r}: {msg!r}"
    return info
