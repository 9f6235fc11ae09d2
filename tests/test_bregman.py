"""numbaot.sinkhorn / sinkhorn2 / numbaot.bregman.* against POT 0.9.7 and
against closed forms.

Oracles: POT (same inputs, same parameters), float64 closed forms of the
entropic OT problem, and the optimality conditions of that problem.
"""
import inspect
import math

import numpy as np
import pytest

import numbaot
from _helpers import (
    F32,
    F64,
    METHODS,
    METHODS2,
    NOT_CONVERGED,
    SHAPES,
    assert_close,
    assert_log_matches,
    call_recording,
    make_problem,
    ot,
    random_hist,
    tol,
    up,
)

BREGMAN_FUNCS = [
    "sinkhorn_knopp",
    "sinkhorn_log",
    "greenkhorn",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
]

LOG_KEYS = {
    "sinkhorn": {"err", "niter", "u", "v"},
    "sinkhorn_log": {"err", "niter", "log_u", "log_v", "u", "v"},
    "greenkhorn": {"u", "v", "n_iter"},
    "sinkhorn_stabilized": {"err", "n_iter", "logu", "logv", "alpha", "beta", "warmstart"},
    "sinkhorn_epsilon_scaling": {"err", "alpha", "beta", "warmstart", "niter"},
}


def _seed(shape, extra=0):
    return 1000 * shape[0] + shape[1] + extra


def tight(method):
    """Keyword arguments that run `method` to (near) machine precision."""
    if method == "sinkhorn_epsilon_scaling":
        return dict(stopThr=1e-12, numItermax=200, warn=False)
    return dict(stopThr=1e-12, numItermax=20000, warn=False)


# ---------------------------------------------------------------------------
# POT parity, float64
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("reg", [0.05, 0.5])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", METHODS)
def test_sinkhorn_matches_pot_float64(method, shape, reg):
    a, b, M = make_problem(*shape, seed=_seed(shape))
    G_ref, w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method)
    G, w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method)
    assert isinstance(G, np.ndarray)
    assert G.dtype == np.float64
    assert_close(G, G_ref, **F64)
    assert w == w_ref

    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True)
    assert set(log) == LOG_KEYS[method]
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref


@pytest.mark.parametrize("shape", [(7, 13), (40, 25)])
@pytest.mark.parametrize("func", BREGMAN_FUNCS)
def test_bregman_functions_match_pot_with_defaults(func, shape):
    """The ot.bregman.* functions called directly (their own defaults:
    greenkhorn numItermax=10000, epsilon scaling numItermax=100 ...)."""
    a, b, M = make_problem(*shape, seed=_seed(shape, 1))
    reg = 0.1
    (G_ref, log_ref), w_ref = call_recording(getattr(ot.bregman, func), a, b, M, reg, log=True)
    (G, log), w = call_recording(getattr(numbaot.bregman, func), a, b, M, reg, log=True)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref
    G_ref = getattr(ot.bregman, func)(a, b, M, reg, warn=False)
    G = getattr(numbaot.bregman, func)(a, b, M, reg, warn=False)
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("func", ["sinkhorn", "sinkhorn2"] + BREGMAN_FUNCS)
def test_signature_matches_pot(func):
    """Same parameter names, order, kinds and defaults as ot.bregman.<func>."""
    assert inspect.signature(getattr(numbaot.bregman, func)) == inspect.signature(getattr(ot.bregman, func))


def test_top_level_aliases():
    assert numbaot.sinkhorn is numbaot.bregman.sinkhorn
    assert numbaot.sinkhorn2 is numbaot.bregman.sinkhorn2
    assert numbaot.dist is numbaot.utils.dist
    assert numbaot.unif is numbaot.utils.unif


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(method="sinkhorn_stabilized", tau=10.0),  # forces absorption steps
        dict(method="sinkhorn_stabilized", tau=1e3, print_period=7),
        dict(method="sinkhorn_epsilon_scaling", epsilon0=10.0, numInnerItermax=20, tau=50.0),
        dict(method="sinkhorn_epsilon_scaling", numItermax=40, print_period=3),
        dict(method="sinkhorn", stopThr=1e-12, numItermax=5000),
        dict(method="sinkhorn_log", stopThr=1e-12, numItermax=5000),
        dict(method="greenkhorn", stopThr=1e-6, numItermax=3000),
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_method_specific_parameters_match_pot(kwargs):
    a, b, M = make_problem(9, 14, seed=77)
    reg = 0.05
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, log=True, **kwargs)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, log=True, **kwargs)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref


# ---------------------------------------------------------------------------
# float32
# ---------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge:UserWarning")
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", METHODS)
def test_sinkhorn_float32_in_float32_out(method, shape):
    a, b, M = make_problem(*shape, seed=_seed(shape, 2), dtype=np.float32)
    reg = 0.1
    G_ref, log_ref = ot.sinkhorn(*up(a, b, M), reg, method=method, log=True, warn=False)
    G, log = numbaot.sinkhorn(a, b, M, reg, method=method, log=True, warn=False)
    assert G.dtype == np.float32
    assert_close(G, G_ref, **F32)
    assert set(log) == set(log_ref)
    for key, val in log.items():
        if isinstance(val, np.ndarray):
            assert val.dtype == np.float32, key
    G = numbaot.sinkhorn(a, b, M, reg, method=method, warn=False)
    assert G.dtype == np.float32
    assert_close(G, G_ref, **F32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", METHODS2)
def test_sinkhorn2_float32(method, shape):
    a, b, M = make_problem(*shape, seed=_seed(shape, 3), dtype=np.float32)
    reg = 0.1
    loss_ref = ot.sinkhorn2(*up(a, b, M), reg, method=method)
    loss = numbaot.sinkhorn2(a, b, M, reg, method=method)
    assert np.ndim(loss) == 0
    assert np.asarray(loss).dtype == np.float32
    assert_close(loss, loss_ref, **F32)


# ---------------------------------------------------------------------------
# sinkhorn2
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("reg", [0.05, 0.5])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", METHODS2)
def test_sinkhorn2_matches_pot(method, shape, reg):
    a, b, M = make_problem(*shape, seed=_seed(shape, 4))
    loss_ref, w_ref = call_recording(ot.sinkhorn2, a, b, M, reg, method=method)
    loss, w = call_recording(numbaot.sinkhorn2, a, b, M, reg, method=method)
    assert np.ndim(loss) == 0
    assert np.asarray(loss).dtype == np.float64
    assert_close(loss, loss_ref, **F64)
    assert w == w_ref

    (loss_ref, log_ref), w_ref = call_recording(ot.sinkhorn2, a, b, M, reg, method=method, log=True)
    (loss, log), w = call_recording(numbaot.sinkhorn2, a, b, M, reg, method=method, log=True)
    assert_close(loss, loss_ref, **F64)
    assert set(log) == LOG_KEYS[method]
    assert_log_matches(log, log_ref)
    assert w == w_ref


@pytest.mark.parametrize("method", METHODS2)
def test_sinkhorn2_is_cost_of_sinkhorn_plan(method):
    """sinkhorn2 returns <gamma, M>_F (no entropy) of the plan sinkhorn returns."""
    a, b, M = make_problem(11, 8, seed=5)
    G = numbaot.sinkhorn(a, b, M, 0.1, method=method)
    loss = numbaot.sinkhorn2(a, b, M, 0.1, method=method)
    assert_close(loss, float(np.sum(G.astype(np.float64) * M)), rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------
# method dispatch
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spelling, method",
    [
        ("SINKHORN", "sinkhorn"),
        ("Sinkhorn_Log", "sinkhorn_log"),
        ("GreenKhorn", "greenkhorn"),
        ("sinkhorn_STABILIZED", "sinkhorn_stabilized"),
        ("Sinkhorn_Epsilon_Scaling", "sinkhorn_epsilon_scaling"),
    ],
)
def test_method_name_is_case_insensitive(spelling, method):
    a, b, M = make_problem(7, 13, seed=6)
    G1 = numbaot.sinkhorn(a, b, M, 0.1, method=spelling, warn=False)
    G2 = numbaot.sinkhorn(a, b, M, 0.1, method=method, warn=False)
    assert np.array_equal(G1, G2)
    if method in METHODS2:
        assert np.array_equal(numbaot.sinkhorn2(a, b, M, 0.1, method=spelling),
                              numbaot.sinkhorn2(a, b, M, 0.1, method=method))


@pytest.mark.parametrize("method", METHODS)
def test_dispatch_is_the_method_function(method):
    a, b, M = make_problem(7, 13, seed=7)
    func = "sinkhorn_knopp" if method == "sinkhorn" else method
    # ot.sinkhorn passes its own numItermax=1000 on to every method
    G1 = numbaot.sinkhorn(a, b, M, 0.2, method=method)
    G2 = getattr(numbaot.bregman, func)(a, b, M, 0.2, numItermax=1000)
    assert np.array_equal(G1, G2)


def _pot_error(fn, *args, **kwargs):
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return info


@pytest.mark.parametrize("method", ["foo", "emd", "sinkhorn_knopp", "Sinkhorn Log"])
def test_unknown_method_sinkhorn(method):
    a, b, M = make_problem(4, 5, seed=8)
    ref = _pot_error(ot.sinkhorn, a, b, M, 0.1, method=method)
    with pytest.raises(ValueError) as info:
        numbaot.sinkhorn(a, b, M, 0.1, method=method)
    assert ref.type is ValueError
    assert str(info.value) == str(ref.value) == "Unknown method '%s'." % method


@pytest.mark.parametrize("two_d_b", [False, True])
@pytest.mark.parametrize("method", ["foo", "greenkhorn", "sinkhorn_epsilon_scaling", "GREENKHORN"])
def test_unknown_method_sinkhorn2(method, two_d_b):
    """sinkhorn2 only knows sinkhorn, sinkhorn_log and sinkhorn_stabilized."""
    rng = np.random.default_rng(9)
    a, b, M = make_problem(4, 5, seed=9)
    if two_d_b:
        b = random_hist(rng, 5, 3)
    ref = _pot_error(ot.sinkhorn2, a, b, M, 0.1, method=method)
    with pytest.raises(ValueError) as info:
        numbaot.sinkhorn2(a, b, M, 0.1, method=method)
    assert ref.type is ValueError
    assert str(info.value) == str(ref.value) == "Unknown method '%s'." % method


# ---------------------------------------------------------------------------
# closed forms and optimality conditions (no POT)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_pot_docstring_example(method):
    """a = b = (1/2, 1/2), M = [[0, 1], [1, 0]], reg = 1: by symmetry the plan
    is [[p, q], [q, p]] with p + q = 1/2 and p / q = e, i.e.
    p = e / (2 (1 + e)), q = 1 / (2 (1 + e)); the cost is 2 q = 1 / (1 + e)."""
    e = math.e
    p, q = e / (2 * (1 + e)), 1 / (2 * (1 + e))
    G = numbaot.sinkhorn([0.5, 0.5], [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], 1, method=method)
    assert_close(G, np.array([[p, q], [q, p]]), rtol=1e-9, atol=1e-12)
    if method in METHODS2:
        loss = numbaot.sinkhorn2([0.5, 0.5], [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], 1, method=method)
        assert_close(loss, 1 / (1 + e), rtol=1e-9, atol=1e-12)


#: (method, shape, dtype), ids "method-shapeI-dtype"; marked slow: float32 with
#: sinkhorn, sinkhorn_log and sinkhorn_stabilized on SHAPES (3-45 CPU-seconds
#: each with a warm Numba cache, measured 2026-11-25; every other case < 2.6)
SEPARABLE_CASES = [
    pytest.param(method, shape, dtype, id=f"{method}-shape{i}-{np.dtype(dtype).name}",
                 marks=pytest.mark.slow if (dtype is np.float32 and method in METHODS2
                                            and i < len(SHAPES)) else ())
    for method in METHODS for i, shape in enumerate(SHAPES + [(13, 7)])
    for dtype in (np.float64, np.float32)]


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge:UserWarning")
@pytest.mark.parametrize("method, shape, dtype", SEPARABLE_CASES)
def test_separable_cost_gives_independent_coupling(method, shape, dtype):
    """M_ij = f_i + g_j makes K = exp(-M/reg) rank one; the entropic plan is
    then the product coupling a b^T whatever reg, and its cost is
    <a, f> + <b, g>."""
    n, m = shape
    rng = np.random.default_rng(_seed(shape, 10))
    f = rng.uniform(0, 0.5, n)
    g = rng.uniform(0, 0.5, m)
    a, b = random_hist(rng, n), random_hist(rng, m)
    M = f[:, None] + g[None, :]
    a_, b_, M_ = (x.astype(dtype) for x in (a, b, M))
    a64, b64, M64 = up(a_, b_, M_)
    expected = np.outer(a64, b64)
    G = numbaot.sinkhorn(a_, b_, M_, 0.1, method=method, **tight(method))
    assert G.dtype == dtype
    assert_close(G, expected, **tol(dtype))
    if method in METHODS2:
        loss = numbaot.sinkhorn2(a_, b_, M_, 0.1, method=method, **tight(method))
        assert_close(loss, np.sum(a64 * f.astype(dtype)) + np.sum(b64 * g.astype(dtype)), **tol(dtype))


@pytest.mark.parametrize("shape", [(6, 1), (1, 5), (1, 1)])
@pytest.mark.parametrize("method", METHODS)
def test_single_row_or_column(method, shape):
    """With one source (target) point all the mass goes to (comes from) it:
    gamma = a b^T whatever M."""
    a, b, M = make_problem(*shape, seed=_seed(shape, 11))
    G = numbaot.sinkhorn(a, b, M, 0.05, method=method, **tight(method))
    assert_close(G, np.outer(a, b), **F64)


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge:UserWarning")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
def test_optimality_conditions(method, dtype):
    """The entropic plan is the unique gamma with marginals (a, b) of the form
    gamma_ij = exp(f_i + g_j - M_ij / reg): log(gamma) + M / reg must be
    additive (all its 2x2 cross differences vanish)."""
    a, b, M = make_problem(12, 9, seed=12, dtype=dtype)
    reg = 0.2
    G = numbaot.sinkhorn(a, b, M, reg, method=method, **tight(method))
    assert G.dtype == dtype
    a64, b64, M64 = up(a, b, M)
    G64 = G.astype(np.float64)
    marg_tol = 1e-9 if dtype == np.float64 else 1e-6
    assert_close(G64.sum(axis=1), a64, rtol=0, atol=marg_tol)
    assert_close(G64.sum(axis=0), b64, rtol=0, atol=marg_tol)
    L = np.log(G64) + M64 / reg
    cross = L - L[:, :1] - L[:1, :] + L[0, 0]
    # rounding of log(gamma) (|L| <= ~20): 1e-13 in float64, 1e-6 in float32
    assert_close(cross, np.zeros_like(cross), rtol=0, atol=1e-9 if dtype == np.float64 else 1e-5)


# ---------------------------------------------------------------------------
# a, b given as [] (uniform), lists, other array kinds
# ---------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge:UserWarning")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("which", ["a", "b", "ab"])
@pytest.mark.parametrize("method", METHODS)
def test_empty_weights_mean_uniform(method, which, dtype):
    _, _, M = make_problem(7, 13, seed=13, dtype=dtype)
    n, m = M.shape
    a = [] if "a" in which else np.full(n, 1.0 / n, dtype=dtype)
    b = [] if "b" in which else np.full(m, 1.0 / m, dtype=dtype)
    G = numbaot.sinkhorn(a, b, M, 0.1, method=method, warn=False)
    assert G.dtype == dtype
    G_unif = numbaot.sinkhorn(np.full(n, 1.0 / n, dtype=dtype), np.full(m, 1.0 / m, dtype=dtype), M, 0.1,
                              method=method, warn=False)
    assert_close(G, G_unif, rtol=1e-12 if dtype == np.float64 else 1e-6, atol=0)
    if dtype == np.float64:
        G_ref = ot.sinkhorn(a, b, M, 0.1, method=method, warn=False)
        assert_close(G, G_ref, **F64)
    else:
        G_ref = ot.sinkhorn(np.ones(n) / n, np.ones(m) / m, M.astype(np.float64), 0.1, method=method, warn=False)
        assert_close(G, G_ref, **F32)
    if method in METHODS2:
        loss = numbaot.sinkhorn2(a, b, M, 0.1, method=method)
        assert np.asarray(loss).dtype == dtype
        loss_ref = ot.sinkhorn2(np.ones(n) / n, np.ones(m) / m, M.astype(np.float64), 0.1, method=method)
        assert_close(loss, loss_ref, **tol(dtype))


@pytest.mark.parametrize("method", METHODS)
def test_empty_ndarray_weights_mean_uniform(method):
    _, _, M = make_problem(5, 6, seed=14)
    G = numbaot.sinkhorn(np.array([]), np.array([]), M, 0.1, method=method, warn=False)
    G_ref = ot.sinkhorn(np.array([]), np.array([]), M, 0.1, method=method, warn=False)
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("method", METHODS)
def test_python_lists(method):
    a, b, M = make_problem(5, 6, seed=15)
    G = numbaot.sinkhorn(a.tolist(), b.tolist(), M.tolist(), 0.1, method=method, warn=False)
    G_ref = ot.sinkhorn(a.tolist(), b.tolist(), M.tolist(), 0.1, method=method, warn=False)
    assert isinstance(G, np.ndarray) and G.dtype == np.float64
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "greenkhorn"])
def test_integer_cost_matrix(method):
    """POT accepts an integer M (e.g. ot.dist of integer coordinates) for these
    methods (its stabilized solvers fail on one)."""
    rng = np.random.default_rng(16)
    x = rng.integers(0, 5, size=(6, 2))
    y = rng.integers(0, 5, size=(7, 2))
    M = ot.dist(x, y)
    assert M.dtype.kind == "i"
    a, b = random_hist(rng, 6), random_hist(rng, 7)
    G_ref = ot.sinkhorn(a, b, M, 5.0, method=method)
    G = numbaot.sinkhorn(a, b, M, 5.0, method=method)
    assert G.dtype == np.float64
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("layout", ["fortran", "transposed_view", "strided"])
@pytest.mark.parametrize("method", METHODS)
def test_non_contiguous_inputs(method, layout):
    a, b, M = make_problem(9, 11, seed=17)
    G_ref = ot.sinkhorn(a, b, M, 0.1, method=method, warn=False)
    if layout == "fortran":
        M2, a2, b2 = np.asfortranarray(M), a, b
    elif layout == "transposed_view":
        M2, a2, b2 = np.ascontiguousarray(M.T).T, a, b
    else:
        big = np.zeros((2 * M.shape[0], 3 * M.shape[1]))
        big[::2, ::3] = M
        M2 = big[::2, ::3]
        a2 = np.repeat(a, 2)[::2]
        b2 = np.repeat(b, 3)[::3]
    assert not M2.flags.c_contiguous
    G = numbaot.sinkhorn(a2, b2, M2, 0.1, method=method, warn=False)
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("method", METHODS)
def test_read_only_inputs(method):
    a, b, M = make_problem(9, 11, seed=18)
    for x in (a, b, M):
        x.flags.writeable = False
    G_ref = ot.sinkhorn(a, b, M, 0.1, method=method, warn=False)
    G = numbaot.sinkhorn(a, b, M, 0.1, method=method, warn=False)
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("method", METHODS)
def test_reg_types(method):
    """reg may be a Python int, a NumPy scalar or a 0-d array."""
    a, b, M = make_problem(6, 8, seed=19)
    G_ref = ot.sinkhorn(a, b, M, 1, method=method, warn=False)
    for reg in (1, 1.0, np.float64(1.0), np.float32(1.0), np.int64(1), np.array(1.0)):
        G = numbaot.sinkhorn(a, b, M, reg, method=method, warn=False)
        assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log", "greenkhorn", "sinkhorn_stabilized"])
def test_same_total_mass_not_one(method):
    """Balanced problems need equal masses, not unit masses."""
    a, b, M = make_problem(7, 13, seed=20)
    a, b = 3 * a, 3 * b
    (G_ref, log_ref), _ = call_recording(ot.sinkhorn, a, b, M, 0.1, method=method, log=True)
    (G, log), _ = call_recording(numbaot.sinkhorn, a, b, M, 0.1, method=method, log=True)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert_close(G.sum(), 3.0, rtol=1e-9)


# ---------------------------------------------------------------------------
# zero-mass bins
# ---------------------------------------------------------------------------
def _reduced_problem_oracle(a, b, M, reg):
    """Drop the zero-mass bins, solve the smaller problem tightly with POT's
    log-domain solver, put zeros back."""
    ia, ib = a > 0, b > 0
    G = np.zeros_like(M)
    G[np.ix_(ia, ib)] = ot.bregman.sinkhorn_log(a[ia], b[ib], M[np.ix_(ia, ib)], reg, stopThr=1e-14,
                                                numItermax=100000, warn=False)
    return G


ZERO_CASES = [
    ("sinkhorn", "a"),
    ("sinkhorn", "b"),  # POT's knopp fails (NaN -> "numerical errors") with zeros in both
    ("sinkhorn_log", "a"),
    ("sinkhorn_log", "b"),
    ("sinkhorn_log", "ab"),
    ("greenkhorn", "ab"),
    ("sinkhorn_stabilized", "a"),
    ("sinkhorn_stabilized", "ab"),
]


@pytest.mark.parametrize("method, which", ZERO_CASES)
def test_zero_mass_bins(method, which):
    a, b, M = make_problem(7, 13, seed=21)
    if "a" in which:
        a[2] = 0.0
        a /= a.sum()
    if "b" in which:
        b[[0, 5]] = 0.0
        b /= b.sum()
    reg = 0.1
    expected = _reduced_problem_oracle(a, b, M, reg)
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True)
    assert np.all(np.isfinite(G))
    # the zero bins carry exactly no mass
    assert np.all(G[a == 0, :] == 0) and np.all(G[:, b == 0] == 0)
    # converged to stopThr=1e-9 (greenkhorn: max violation <= 1e-9)
    assert_close(G, expected, rtol=0, atol=1e-8)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    # POT's own RuntimeWarnings (log(0), 1/0 in NumPy) are incidental
    assert [x for x in w if x[0] is not RuntimeWarning] == [x for x in w_ref if x[0] is not RuntimeWarning]


# ---------------------------------------------------------------------------
# warmstart
# ---------------------------------------------------------------------------
def _scaling_warmstart(rng, n, m):
    return rng.normal(scale=0.5, size=n), rng.normal(scale=0.5, size=m)


@pytest.mark.parametrize("method", METHODS)
def test_warmstart_matches_pot(method):
    """knopp / sinkhorn_log / greenkhorn take log-scalings (log u, log v);
    stabilized / epsilon scaling take dual potentials (alpha, beta). Any pair
    is a valid start: the iterates (and so niter, err, potentials) depend on it."""
    rng = np.random.default_rng(22)
    a, b, M = make_problem(8, 12, seed=22)
    reg = 0.1
    if method in ("sinkhorn_stabilized", "sinkhorn_epsilon_scaling"):
        ws = (reg * rng.normal(size=8), reg * rng.normal(size=12))
    else:
        ws = _scaling_warmstart(rng, 8, 12)
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True, warmstart=ws)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True, warmstart=ws)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref
    # warmstart changes the trajectory, not the solution (for the ones that converge)
    if method != "greenkhorn":
        G_cold = numbaot.sinkhorn(a, b, M, reg, method=method, **tight(method))
        G_warm = numbaot.sinkhorn(a, b, M, reg, method=method, warmstart=ws, **tight(method))
        assert_close(G_warm, G_cold, **F64)


@pytest.mark.parametrize("method", METHODS2)
def test_warmstart_sinkhorn2_matches_pot(method):
    rng = np.random.default_rng(23)
    a, b, M = make_problem(8, 12, seed=23)
    reg = 0.1
    if method == "sinkhorn_stabilized":
        ws = (reg * rng.normal(size=8), reg * rng.normal(size=12))
    else:
        ws = _scaling_warmstart(rng, 8, 12)
    (l_ref, log_ref) = ot.sinkhorn2(a, b, M, reg, method=method, log=True, warmstart=ws)
    (l, log) = numbaot.sinkhorn2(a, b, M, reg, method=method, log=True, warmstart=ws)
    assert_close(l, l_ref, **F64)
    assert_log_matches(log, log_ref)


@pytest.mark.parametrize(
    "method, key_u, key_v, is_log",
    [
        ("sinkhorn", "u", "v", False),
        ("sinkhorn_log", "log_u", "log_v", True),
        ("sinkhorn_stabilized", "alpha", "beta", True),
        ("sinkhorn_epsilon_scaling", "alpha", "beta", True),
    ],
)
def test_warmstart_from_converged_solution_stops_at_first_check(method, key_u, key_v, is_log):
    a, b, M = make_problem(10, 7, seed=24)
    reg = 0.1
    G0, log0 = ot.sinkhorn(a, b, M, reg, method=method, log=True, stopThr=1e-12, numItermax=10000)
    u, v = log0[key_u], log0[key_v]
    ws = (u, v) if is_log else (np.log(u), np.log(v))
    (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True, warmstart=ws)
    (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True, warmstart=ws)
    assert_close(G, G_ref, **F64)
    assert_close(G, G0, rtol=1e-7, atol=1e-10)
    assert_log_matches(log, log_ref)
    assert w == w_ref
    if method in ("sinkhorn", "sinkhorn_log"):
        assert log["niter"] == 0


def test_warmstart_2d_b_knopp_matches_pot():
    """knopp with 2-D b takes (dim_a, n_hists) / (dim_b, n_hists) log-scalings."""
    rng = np.random.default_rng(25)
    a, _, M = make_problem(6, 9, seed=25)
    B = random_hist(rng, 9, 3)
    ws = (rng.normal(scale=0.3, size=(6, 3)), rng.normal(scale=0.3, size=(9, 3)))
    l_ref, log_ref = ot.sinkhorn2(a, B, M, 0.1, log=True, warmstart=ws)
    l, log = numbaot.sinkhorn2(a, B, M, 0.1, log=True, warmstart=ws)
    assert_close(l, l_ref, **F64)
    assert_log_matches(log, log_ref)


# ---------------------------------------------------------------------------
# 2-D b: several target histograms, one loss each
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_hists", [2, 4])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", METHODS2)
def test_2d_b_matches_pot(method, shape, n_hists):
    n, m = shape
    rng = np.random.default_rng(_seed(shape, 26))
    a, _, M = make_problem(n, m, seed=_seed(shape, 26))
    B = random_hist(rng, m, n_hists)
    reg = 0.1
    for fn_nb, fn_pot in ((numbaot.sinkhorn, ot.sinkhorn), (numbaot.sinkhorn2, ot.sinkhorn2)):
        res_ref, w_ref = call_recording(fn_pot, a, B, M, reg, method=method)
        res, w = call_recording(fn_nb, a, B, M, reg, method=method)
        assert res.shape == (n_hists,)
        assert res.dtype == np.float64
        assert_close(res, res_ref, **F64)
        assert w == w_ref
        (res_ref, log_ref), w_ref = call_recording(fn_pot, a, B, M, reg, method=method, log=True)
        (res, log), w = call_recording(fn_nb, a, B, M, reg, method=method, log=True)
        assert_close(res, res_ref, **F64)
        if method == "sinkhorn_log":
            assert set(log) == {"log_u", "log_v", "u", "v"}
        else:
            assert set(log) == LOG_KEYS[method]
        for key in ("u", "log_u", "logu", "alpha"):
            if key in log:
                assert np.shape(log[key]) == (n, n_hists), key
        for key in ("v", "log_v", "logv", "beta"):
            if key in log:
                assert np.shape(log[key]) == (m, n_hists), key
        assert_log_matches(log, log_ref)
        assert w == w_ref


@pytest.mark.parametrize("n_hists", [1, 3])
@pytest.mark.parametrize("method", METHODS2)
def test_2d_b_equals_loop_of_1d_problems(method, n_hists):
    """Oracle: one POT call per column of b (POT's sinkhorn_log itself crashes
    on a single-column 2-D b, so this is the reference for n_hists=1)."""
    rng = np.random.default_rng(27)
    a, _, M = make_problem(12, 10, seed=27)
    B = random_hist(rng, 10, n_hists)
    losses = numbaot.sinkhorn2(a, B, M, 0.1, method=method, stopThr=1e-13, numItermax=20000)
    expected = [ot.sinkhorn2(a, B[:, k], M, 0.1, method=method, stopThr=1e-13, numItermax=20000)
                for k in range(n_hists)]
    assert losses.shape == (n_hists,)
    assert_close(losses, np.array(expected), **F64)


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge:UserWarning")
@pytest.mark.parametrize("method", METHODS2)
def test_2d_b_float32(method):
    rng = np.random.default_rng(28)
    a, _, M = make_problem(12, 10, seed=28, dtype=np.float32)
    B = random_hist(rng, 10, 3).astype(np.float32)
    res = numbaot.sinkhorn2(a, B, M, 0.1, method=method)
    assert res.dtype == np.float32 and res.shape == (3,)
    ref = ot.sinkhorn2(*up(a, B, M), 0.1, method=method)
    assert_close(res, ref, **F32)


# ---------------------------------------------------------------------------
# warnings
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("warn", [True, False])
@pytest.mark.parametrize("method", METHODS)
def test_not_converged_warning(method, warn):
    a, b, M = make_problem(7, 13, seed=29)
    kw = dict(method=method, numItermax=5, warn=warn)
    G_ref, w_ref = call_recording(ot.sinkhorn, a, b, M, 0.05, **kw)
    G, w = call_recording(numbaot.sinkhorn, a, b, M, 0.05, **kw)
    assert w == w_ref
    if warn:
        assert (UserWarning, NOT_CONVERGED) in w
    elif method != "sinkhorn_epsilon_scaling":  # its inner calls always warn (as in POT)
        assert (UserWarning, NOT_CONVERGED) not in w
    assert_close(G, G_ref, **F64)


@pytest.mark.parametrize("method", METHODS2)
def test_sinkhorn2_does_not_warn_by_default(method):
    a, b, M = make_problem(7, 13, seed=30)
    _, w_ref = call_recording(ot.sinkhorn2, a, b, M, 0.05, method=method, numItermax=5)
    _, w = call_recording(numbaot.sinkhorn2, a, b, M, 0.05, method=method, numItermax=5)
    assert w == w_ref == []
    _, w_ref = call_recording(ot.sinkhorn2, a, b, M, 0.05, method=method, numItermax=5, warn=True)
    _, w = call_recording(numbaot.sinkhorn2, a, b, M, 0.05, method=method, numItermax=5, warn=True)
    assert w == w_ref == [(UserWarning, NOT_CONVERGED)]


@pytest.mark.parametrize("warn", [True, False])
@pytest.mark.parametrize("method", METHODS2)
def test_2d_b_not_converged_warnings(method, warn):
    """Same warnings as POT for 2-D b (POT's sinkhorn_log loops over the
    columns and warns for each one)."""
    rng = np.random.default_rng(31)
    a, _, M = make_problem(7, 13, seed=31)
    B = random_hist(rng, 13, 3)
    res_ref, w_ref = call_recording(ot.sinkhorn2, a, B, M, 0.05, method=method, numItermax=5, warn=warn)
    res, w = call_recording(numbaot.sinkhorn2, a, B, M, 0.05, method=method, numItermax=5, warn=warn)
    assert w == w_ref
    assert_close(res, res_ref, **F64)


@pytest.mark.parametrize("numItermax", [5, 36, 37, 60])
def test_epsilon_scaling_iteration_floor_and_warning(numItermax):
    """POT runs at least 35 outer iterations and needs ii > 35 to stop."""
    a, b, M = make_problem(7, 13, seed=32)
    (G_ref, log_ref), w_ref = call_recording(ot.bregman.sinkhorn_epsilon_scaling, a, b, M, 0.1,
                                             numItermax=numItermax, log=True)
    (G, log), w = call_recording(numbaot.bregman.sinkhorn_epsilon_scaling, a, b, M, 0.1,
                                 numItermax=numItermax, log=True)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)
    assert w == w_ref


@pytest.mark.parametrize("seed, reg, niter", [(30, 1e-4, 0), (34, 3e-4, 283), (38, 3e-4, 99)])
def test_knopp_numerical_errors_warning(seed, reg, niter):
    """reg so small that K = exp(-M/reg) underflows and K^T u gets zeros: POT's
    knopp warns "Warning: numerical errors at iteration <ii>" and returns the
    previous iterate (and does not warn about convergence)."""
    a, b, M = make_problem(7, 13, seed=seed)
    with np.errstate(all="ignore"):
        (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, log=True)
        (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, log=True)
    assert log_ref["niter"] == niter  # the scenario this test is about
    w_ref = [x for x in w_ref if x[0] is not RuntimeWarning]
    w = [x for x in w if x[0] is not RuntimeWarning]
    assert w == w_ref == [(UserWarning, "Warning: numerical errors at iteration %d" % niter)]
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)


@pytest.mark.parametrize("method", ["sinkhorn", "greenkhorn"])
def test_subnormal_kernel_entries_like_pot(method):
    """exp(-M/reg) for M/reg in (708, 745) is a subnormal number (> 0) in NumPy,
    hence in POT. In this problem a column of K has only tiny entries, so such
    an entry changes the iterates: the err history must still be POT's."""
    a, b, M = make_problem(7, 13, seed=33)
    reg = 1e-4
    assert np.any((M / reg > 708) & (M / reg < 745))
    with np.errstate(all="ignore"):
        (G_ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method=method, log=True,
                                                 numItermax=31)
        (G, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method=method, log=True, numItermax=31)
    assert_close(G, G_ref, **F64)
    assert_log_matches(log, log_ref)


@pytest.mark.parametrize("method", METHODS)
def test_verbose_output_like_pot(method, capsys):
    a, b, M = make_problem(7, 13, seed=34)
    ot.sinkhorn(a, b, M, 0.05, method=method, verbose=True)
    out_ref = capsys.readouterr().out.splitlines()
    numbaot.sinkhorn(a, b, M, 0.05, method=method, verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(out_ref)
    assert (len(out) > 0) == (method != "greenkhorn")  # POT's greenkhorn prints nothing
    # header lines identical; iteration numbers identical (the err digits may
    # differ in the last printed place)
    for line, line_ref in zip(out, out_ref):
        assert line.split("|")[0] == line_ref.split("|")[0]
