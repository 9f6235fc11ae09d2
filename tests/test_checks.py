"""Input validation (ValueError / TypeError naming the bad argument) and the
guarantee that no call modifies its inputs."""
import numpy as np
import pytest

import numbaot
from _helpers import METHODS, METHODS2, assert_raises_naming, make_problem, names_argument, random_hist

EITHER = (ValueError, TypeError)

# every public solver entry point: (id, callable(a, b, M, reg, **kw))
ENTRIES = (
    [(f"sinkhorn[{m}]", lambda a, b, M, reg, m=m, **kw: numbaot.sinkhorn(a, b, M, reg, method=m, **kw))
     for m in METHODS]
    + [(f"sinkhorn2[{m}]", lambda a, b, M, reg, m=m, **kw: numbaot.sinkhorn2(a, b, M, reg, method=m, **kw))
       for m in METHODS2]
    + [(f"bregman.{f}", getattr(numbaot.bregman, f)) for f in
       ("sinkhorn_knopp", "sinkhorn_log", "greenkhorn", "sinkhorn_stabilized", "sinkhorn_epsilon_scaling")]
)
ENTRY_IDS = [e[0] for e in ENTRIES]
ENTRY_FUNCS = [e[1] for e in ENTRIES]

# entries that accept 2-D b (POT) and paired 2-D a, b (numbaot)
ENTRIES_2D = (
    [(f"sinkhorn[{m}]", lambda a, b, M, reg, m=m, **kw: numbaot.sinkhorn(a, b, M, reg, method=m, **kw))
     for m in METHODS2]
    + [(f"sinkhorn2[{m}]", lambda a, b, M, reg, m=m, **kw: numbaot.sinkhorn2(a, b, M, reg, method=m, **kw))
       for m in METHODS2]
)


@pytest.fixture
def problem():
    return make_problem(5, 7, seed=1)


def entries(ids=ENTRY_IDS, funcs=ENTRY_FUNCS):
    return pytest.mark.parametrize("fn", funcs, ids=ids)


# ---------------------------------------------------------------------------
# reg
# ---------------------------------------------------------------------------
@entries()
@pytest.mark.parametrize("reg", [0.0, -0.1, -np.inf, np.nan, np.inf, np.float32(np.nan)], ids=str)
def test_bad_reg_value(fn, reg, problem):
    a, b, M = problem
    assert_raises_naming(ValueError, "reg", fn, a, b, M, reg)


@entries()
@pytest.mark.parametrize("reg", ["0.1", None, [0.1], {"reg": 0.1}], ids=["str", "None", "list", "dict"])
def test_reg_not_a_number(fn, reg, problem):
    a, b, M = problem
    assert_raises_naming(TypeError, "reg", fn, a, b, M, reg)


@entries()
def test_complex_reg(fn, problem):
    a, b, M = problem
    assert_raises_naming(EITHER, "reg", fn, a, b, M, 0.1 + 0.1j)


# ---------------------------------------------------------------------------
# M
# ---------------------------------------------------------------------------
@entries()
@pytest.mark.parametrize("kind", ["1d", "3d", "scalar"])
def test_M_not_2d(fn, kind, problem):
    a, b, M = problem
    bad = {"1d": M[0], "3d": M[None], "scalar": np.float64(1.0)}[kind]
    assert_raises_naming(EITHER, "M", fn, [], [], bad, 0.1)
    assert_raises_naming(EITHER, "M", fn, a, b, bad, 0.1)


@entries()
@pytest.mark.parametrize("shape", [(0, 0), (0, 4), (3, 0)], ids=str)
def test_empty_M(fn, shape):
    """An empty M with empty (uniform) weights: the ValueError naming M
    (the one-call path's uniform weights divided by a zero dimension)."""
    with pytest.raises(ValueError, match="M must have at least one row and one column"):
        fn([], [], np.zeros(shape), 0.1)
    with pytest.raises(ValueError, match="M must have at least one row and one column"):
        fn(np.array([]), np.array([]), np.zeros(shape), 0.1)


@pytest.mark.parametrize("fn", [numbaot.sinkhorn_unbalanced, numbaot.sinkhorn_unbalanced2])
@pytest.mark.parametrize("shape", [(0, 0), (0, 4)], ids=str)
def test_empty_M_unbalanced(fn, shape):
    with pytest.raises(ValueError, match="M must have at least one row and one column"):
        fn(np.array([]), np.array([]), np.zeros(shape), 0.1, 1.0)


@entries()
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=str)
def test_M_not_finite(fn, value, problem):
    a, b, M = problem
    M = M.copy()
    M[2, 3] = value
    assert_raises_naming(ValueError, "M", fn, a, b, M, 0.1)


@entries()
def test_M_not_finite_float32(fn, problem):
    a, b, M = (x.astype(np.float32) for x in problem)
    M[4, 6] = np.nan
    assert_raises_naming(ValueError, "M", fn, a, b, M, 0.1)


@entries()
def test_complex_M(fn, problem):
    a, b, M = problem
    assert_raises_naming(TypeError, "M", fn, a, b, M.astype(np.complex128), 0.1)


@entries()
def test_non_numeric_M(fn, problem):
    a, b, M = problem
    bad = np.array([["x"] * 7] * 5)
    assert_raises_naming(EITHER, "M", fn, a, b, bad, 0.1)


# ---------------------------------------------------------------------------
# a, b
# ---------------------------------------------------------------------------
def _names_one_of(exc_types, names, fn, *args, **kwargs):
    with pytest.raises(exc_types) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert any(names_argument(msg, n) for n in names), f"message names none of {names}: {msg!r}"


@entries()
def test_a_shape_mismatch(fn, problem):
    a, b, M = problem
    _names_one_of(ValueError, ("a",), fn, np.append(a, 0.1) / 1.1, b, M, 0.1)
    _names_one_of(ValueError, ("a",), fn, a[:-1] / a[:-1].sum(), b, M, 0.1)
    # M transposed: a no longer matches M.shape[0]
    _names_one_of(ValueError, ("a", "b", "M"), fn, a, b, M.T, 0.1)


@entries()
def test_b_shape_mismatch(fn, problem):
    a, b, M = problem
    _names_one_of(ValueError, ("b",), fn, a, np.append(b, 0.1) / 1.1, M, 0.1)
    _names_one_of(ValueError, ("b",), fn, a, b[:-1] / b[:-1].sum(), M, 0.1)


@entries()
@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("value", [-0.1, np.nan, np.inf, -np.inf], ids=str)
def test_bad_weights(fn, which, value, problem):
    a, b, M = problem
    a, b = a.copy(), b.copy()
    (a if which == "a" else b)[1] = value
    assert_raises_naming(ValueError, which, fn, a, b, M, 0.1)


@entries()
@pytest.mark.parametrize("which", ["a", "b"])
def test_weights_3d(fn, which, problem):
    a, b, M = problem
    if which == "a":
        a = a[:, None, None]
    else:
        b = b[:, None, None]
    assert_raises_naming(EITHER, which, fn, a, b, M, 0.1)


@entries()
@pytest.mark.parametrize("which", ["a", "b"])
def test_complex_weights(fn, which, problem):
    a, b, M = problem
    if which == "a":
        a = a.astype(np.complex128)
    else:
        b = b.astype(np.complex128)
    assert_raises_naming(EITHER, which, fn, a, b, M, 0.1)


@pytest.mark.parametrize("fn", [e[1] for e in ENTRIES_2D], ids=[e[0] for e in ENTRIES_2D])
def test_2d_a_with_1d_b(fn, problem):
    a, b, M = problem
    A = np.tile(a[:, None], (1, 3))
    _names_one_of(ValueError, ("a", "b"), fn, A, b, M, 0.1)


@pytest.mark.parametrize("fn", [e[1] for e in ENTRIES_2D], ids=[e[0] for e in ENTRIES_2D])
def test_paired_n_hists_mismatch(fn, problem):
    a, b, M = problem
    rng = np.random.default_rng(3)
    A = random_hist(rng, 5, 3)
    B = random_hist(rng, 7, 2)
    _names_one_of(ValueError, ("a", "b"), fn, A, B, M, 0.1)


@pytest.mark.parametrize("fn", [e[1] for e in ENTRIES_2D], ids=[e[0] for e in ENTRIES_2D])
@pytest.mark.parametrize("which", ["a", "b"])
def test_paired_bad_weights(fn, which, problem):
    a, b, M = problem
    rng = np.random.default_rng(4)
    A = random_hist(rng, 5, 3)
    B = random_hist(rng, 7, 3)
    (A if which == "a" else B)[2, 1] = -1.0
    assert_raises_naming(ValueError, which, fn, A, B, M, 0.1)
    (A if which == "a" else B)[2, 1] = np.nan
    assert_raises_naming(ValueError, which, fn, A, B, M, 0.1)


@pytest.mark.parametrize("fn", [e[1] for e in ENTRIES_2D], ids=[e[0] for e in ENTRIES_2D])
def test_2d_b_shape_mismatch(fn, problem):
    a, b, M = problem
    B = random_hist(np.random.default_rng(5), 6, 3)
    _names_one_of(ValueError, ("b",), fn, a, B, M, 0.1)


# ---------------------------------------------------------------------------
# method, numItermax
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [numbaot.sinkhorn, numbaot.sinkhorn2])
@pytest.mark.parametrize("method", ["foo", "", "sinkhorn-log"])
def test_unknown_method_names_method(fn, method, problem):
    a, b, M = problem
    assert_raises_naming(ValueError, "method", fn, a, b, M, 0.1, method=method)


@entries()
@pytest.mark.parametrize("n", [-1, -1000])
def test_negative_numItermax(fn, n, problem):
    a, b, M = problem
    assert_raises_naming(ValueError, "numItermax", fn, a, b, M, 0.1, numItermax=n)


@pytest.mark.parametrize("fn", [numbaot.sinkhorn, numbaot.sinkhorn2])
def test_validation_before_dispatch(fn, problem):
    """A bad reg is reported even with an otherwise valid call, whatever the method."""
    a, b, M = problem
    for method in METHODS2:
        assert_raises_naming(ValueError, "reg", fn, a, b, M, -1.0, method=method)


# ---------------------------------------------------------------------------
# inputs are never modified
# ---------------------------------------------------------------------------
def _snapshot(*xs):
    out = []
    for x in xs:
        if isinstance(x, (tuple, list)):
            out.append(type(x)(np.array(y, copy=True) for y in x))
        else:
            out.append(np.array(x, copy=True))
    return out


def _assert_unchanged(before, after):
    for x0, x1 in zip(before, after):
        if isinstance(x0, (tuple, list)):
            assert len(x0) == len(x1)
            for y0, y1 in zip(x0, x1):
                assert np.array_equal(y0, y1, equal_nan=True)
        else:
            assert np.asarray(x1).dtype == x0.dtype
            assert np.array_equal(x0, x1, equal_nan=True)


def _calls():
    """(id, builder) pairs; builder(rng) -> (callable, args tuple, kwargs)."""
    cases = []
    for dtype in (np.float64, np.float32):
        dt = np.dtype(dtype).name
        for m in METHODS:
            for log in (False, True):
                cases.append((f"sinkhorn-{m}-log={log}-{dt}",
                              lambda rng, m=m, log=log, dtype=dtype: (
                                  numbaot.sinkhorn, make_problem(6, 9, seed=7, dtype=dtype) + (0.1,),
                                  dict(method=m, log=log, warn=False))))
        for m in METHODS2:
            cases.append((f"sinkhorn2-{m}-{dt}",
                          lambda rng, m=m, dtype=dtype: (numbaot.sinkhorn2,
                                                         make_problem(6, 9, seed=8, dtype=dtype) + (0.1,),
                                                         dict(method=m, log=True))))
            cases.append((f"sinkhorn2-2d-b-{m}-{dt}",
                          lambda rng, m=m, dtype=dtype: (numbaot.sinkhorn2,
                                                         (make_problem(6, 9, seed=9, dtype=dtype)[0],
                                                          random_hist(rng, 9, 3).astype(dtype),
                                                          make_problem(6, 9, seed=9, dtype=dtype)[2], 0.1),
                                                         dict(method=m, log=True, warn=False))))
            cases.append((f"sinkhorn2-paired-{m}-{dt}",
                          lambda rng, m=m, dtype=dtype: (numbaot.sinkhorn2,
                                                         (random_hist(rng, 6, 3).astype(dtype),
                                                          random_hist(rng, 9, 3).astype(dtype),
                                                          make_problem(6, 9, seed=10, dtype=dtype)[2], 0.1),
                                                         dict(method=m, log=True, warn=False))))
            cases.append((f"sinkhorn-paired-{m}-{dt}",
                          lambda rng, m=m, dtype=dtype: (numbaot.sinkhorn,
                                                         (random_hist(rng, 6, 3).astype(dtype),
                                                          random_hist(rng, 9, 3).astype(dtype),
                                                          make_problem(6, 9, seed=10, dtype=dtype)[2], 0.1),
                                                         dict(method=m, log=False, warn=False))))
        for m in METHODS:
            cases.append((f"warmstart-{m}-{dt}",
                          lambda rng, m=m, dtype=dtype: (numbaot.sinkhorn,
                                                         make_problem(6, 9, seed=11, dtype=dtype) + (0.1,),
                                                         dict(method=m, log=True, warn=False,
                                                              warmstart=(0.1 * rng.normal(size=6).astype(dtype),
                                                                         0.1 * rng.normal(size=9).astype(dtype))))))
    cases.append(("zero-weights-log", lambda rng: (
        numbaot.sinkhorn, (np.array([0.5, 0.0, 0.5]), np.array([0.0, 0.25, 0.75]),
                           make_problem(3, 3, seed=12)[2], 0.1), dict(method="sinkhorn_log", log=True))))
    cases.append(("dist", lambda rng: (numbaot.dist, (rng.normal(size=(6, 3)), rng.normal(size=(4, 3))), {})))
    cases.append(("dist-self", lambda rng: (numbaot.dist, (rng.normal(size=(6, 3)),), dict(metric="euclidean"))))
    cases.append(("dist-cityblock-f32", lambda rng: (
        numbaot.dist, (rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)),
        dict(metric="cityblock"))))
    cases.append(("dist-minkowski-w", lambda rng: (
        numbaot.dist, (rng.normal(size=(6, 3)), rng.normal(size=(4, 3))),
        dict(metric="minkowski", p=3, w=np.array([1.0, 2.0, 0.5])))))
    cases.append(("unif-type_as", lambda rng: (numbaot.unif, (5,), dict(type_as=np.ones(3, dtype=np.float32)))))
    return cases


CALLS = _calls()


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge:UserWarning")
@pytest.mark.parametrize("builder", [c[1] for c in CALLS], ids=[c[0] for c in CALLS])
def test_inputs_not_modified(builder):
    rng = np.random.default_rng(13)
    fn, args, kwargs = builder(rng)
    arrays = [x for x in args if isinstance(x, np.ndarray)]
    kw_arrays = {k: v for k, v in kwargs.items() if isinstance(v, (np.ndarray, tuple))}
    before = _snapshot(*arrays)
    kw_before = dict(zip(kw_arrays, _snapshot(*kw_arrays.values())))
    fn(*args, **kwargs)
    _assert_unchanged(before, arrays)
    for k, v in kw_arrays.items():
        _assert_unchanged([kw_before[k]], [v])
    # a second call on the same objects gives the same result (no hidden state)
    r1 = fn(*args, **kwargs)
    r2 = fn(*args, **kwargs)
    r1 = r1[0] if isinstance(r1, tuple) else r1
    r2 = r2[0] if isinstance(r2, tuple) else r2
    assert np.array_equal(r1, r2)


@pytest.mark.parametrize("fn", ENTRY_FUNCS, ids=ENTRY_IDS)
def test_failed_validation_does_not_modify_inputs(fn, problem):
    a, b, M = problem
    a = a.copy()
    a[0] = -1.0
    before = _snapshot(a, b, M)
    with pytest.raises(ValueError):
        fn(a, b, M, 0.1)
    _assert_unchanged(before, [a, b, M])


@pytest.mark.parametrize("method", METHODS)
def test_outputs_do_not_alias_inputs(method, problem):
    """Writing into the returned plan / log arrays must not touch the inputs."""
    a, b, M = problem
    before = _snapshot(a, b, M)
    G, log = numbaot.sinkhorn(a, b, M, 0.1, method=method, log=True)
    G[...] = -7.0
    for v in log.values():
        if isinstance(v, np.ndarray) and v.flags.writeable:
            v[...] = -7.0
    _assert_unchanged(before, [a, b, M])


@pytest.mark.parametrize(
    "message, name, expected",
    [
        ("a must be 1-D or 2-D; got shape (5, 1, 1)", "a", True),
        ("weights `a` contain NaN", "a", True),
        ("expected a.shape[0] == 5", "a", True),
        ("b must be a 1-D array", "a", False),
        ("got a scalar", "a", False),
        ("reg must be a finite number > 0", "reg", True),
        ("regularization must be > 0", "reg", False),
        ("M contains NaN or inf", "M", True),
        ("Unknown method 'foo'.", "method", True),
        ("numItermax must be >= 0", "numItermax", True),
    ],
)
def test_names_argument_helper(message, name, expected):
    """The helper the checks above rely on (in particular for 'a', which is
    also an English article)."""
    assert names_argument(message, name) is expected


class _FakeDeviceArray:
    """Stands in for a numba/CuPy device array: exposes __cuda_array_interface__."""

    __cuda_array_interface__ = {"shape": (3, 3), "typestr": "<f8", "data": (0, False), "version": 3}


@pytest.mark.parametrize("where", ["a", "b", "M"])
def test_mixed_host_and_gpu_arrays_are_refused_with_a_clear_error(where):
    a, b, M = make_problem(3, 3, seed=1)
    args = {"a": a, "b": b, "M": M}
    args[where] = _FakeDeviceArray()
    with pytest.raises(TypeError, match=rf"^{where} on the GPU but .* on the host"):
        numbaot.sinkhorn(args["a"], args["b"], args["M"], 0.1)


# ---------------------------------------------------------------------------
# prepare_problem's route for plain inputs
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_plain_route_gives_the_full_checks_problem(dtype, layout, monkeypatch):
    """Host arrays of one float dtype with 1-D weights are checked by a few
    reductions (``numbaot._checks._plain_problem``): the Problem is the one
    the full checks build, field by field (a zero weight included)."""
    import dataclasses

    from numbaot import _checks

    a, b, M = (x.astype(dtype) for x in make_problem(6, 9, seed=4))
    a[2] = 0.0
    M = np.asarray(M, order=layout)
    assert _checks._plain_problem(a, b, M) is not None
    P1 = _checks.prepare_problem(a, b, M)
    monkeypatch.setattr(_checks, "_plain_problem", lambda *args: None)
    P2 = _checks.prepare_problem(a, b, M)
    for field in dataclasses.fields(_checks.Problem):
        x1, x2 = getattr(P1, field.name), getattr(P2, field.name)
        if isinstance(x2, np.ndarray):
            assert x1.dtype == x2.dtype and x1.shape == x2.shape and x1.flags.c_contiguous
            np.testing.assert_array_equal(x1, x2)
        elif field.name == "like":
            assert x1 is x2
        else:
            assert type(x1) is type(x2) and x1 == x2, field.name
    assert P1.M is M if layout == "C" else P1.M is not M  # no copy unless needed


def test_plain_route_declines_what_it_does_not_check(problem):
    """Anything but valid plain input takes the full checks (which raise,
    or accept lists, batches, integer or mixed dtypes)."""
    from numbaot import _checks

    a, b, M = problem
    assert _checks._plain_problem(a, b, M) is not None
    Mn, Mi, an, az = M.copy(), M.copy(), a.copy(), np.zeros_like(a)
    Mn[0, 1] = np.nan
    Mi[1, 0] = -np.inf
    an[0] = np.nan
    declined = [
        (a, b.astype(np.float32), M), (a, b, M.astype(np.float32)), (a, b, M.astype(np.int64)),
        (a.astype(np.float16), b.astype(np.float16), M.astype(np.float16)),
        (a[:, None], b[:, None], M), (a, np.stack([b, b], 1), M), (a[:-1], b, M),
        (a, b[:-1], M), (np.empty(0), b, M), (a, b, M[:, :, None]), (a, b, Mn), (a, b, Mi),
        (an, b, M), (-a, b, M), (az, b, M), (a, np.full_like(b, np.inf), M),
    ]
    for args in declined:
        assert _checks._plain_problem(*args) is None
