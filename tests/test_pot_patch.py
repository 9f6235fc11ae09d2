"""numbaot.pot: POT's own entry points, patched, give POT's results (POT
unpatched is the oracle, on the same inputs), and the patch is reversible."""
import importlib
import subprocess
import sys
import threading
import types
import warnings

import numpy as np
import pytest

from _helpers import ot

import numbaot
import numbaot.pot as npot


@pytest.fixture
def patched_pot():
    """POT patched for the test; restored (and the counts cleared) after."""
    npot.stats(reset=True)
    with npot.patched():
        yield
    npot.stats(reset=True)


def _clouds(rng, n=30, m=25, d=2):
    return rng.normal(size=(n, d)), rng.normal(size=(m, d)) + 1.0


def _ran_on_numbaot(name):
    return npot.stats().get(name, {}).get("numbaot", 0) > 0


def _both(fn):
    """fn() unpatched (POT) and patched (numbaot), with numbaot's counts."""
    assert not npot.is_patched()
    ref = fn()
    npot.stats(reset=True)
    with npot.patched():
        out = fn()
        counts = npot.stats(reset=True)
    return ref, out, counts


def test_import_numbaot_does_not_import_pot():
    code = "import sys, numbaot, numbaot.pot; print('ot' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_patch_is_idempotent_and_unpatch_restores_identity():
    originals = {(m, a): getattr(m, a) for m, a in [
        (ot, "sinkhorn"), (ot.bregman, "sinkhorn_log"), (ot.da, "sinkhorn"),
        (ot.gromov._bregman, "sinkhorn"), (ot.solvers._linear, "sinkhorn_log"),
        (ot.unbalanced, "sinkhorn_unbalanced"), (ot.da, "sinkhorn_lpl1_mm")]}
    first = npot.patch()
    try:
        assert "ot.da.sinkhorn" in first and "ot.bregman.sinkhorn_log" in first
        assert first["ot.da.sinkhorn"] == "numbaot.bregman._sinkhorn.sinkhorn"
        for (m, a), f in originals.items():
            assert getattr(m, a) is not f and getattr(m, a).__pot_original__ is f
        # one wrapper per function wherever POT holds it
        assert ot.da.sinkhorn is ot.sinkhorn is ot.bregman.sinkhorn
        assert npot.patch() == {}
        assert npot.is_patched()
    finally:
        restored = npot.unpatch()
    assert "ot.da.sinkhorn" in restored
    for (m, a), f in originals.items():
        assert getattr(m, a) is f
    assert not npot.is_patched() and npot.unpatch() == []


def test_context_manager_restores_after_an_exception():
    original = ot.sinkhorn
    with pytest.raises(RuntimeError):
        with npot.patched():
            assert ot.sinkhorn is not original
            raise RuntimeError("boom")
    assert ot.sinkhorn is original


def test_fallback_to_pot_for_inputs_numbaot_rejects(rng):
    # a cost with +inf entries: POT computes a plan (K = 0 there), numbaot refuses it
    a, b = np.full(4, 0.25), np.full(4, 0.25)
    M = rng.random((4, 4))
    M[0, 1] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, out, counts = _both(lambda: ot.sinkhorn(a, b, M, 1.0))
    assert counts["ot.bregman.sinkhorn"] == {"numbaot": 0, "pot": 1}
    np.testing.assert_array_equal(out, ref)


def test_fallback_to_pot_for_non_numpy_arrays(rng, patched_pot):
    a = [0.5, 0.5]
    M = np.ma.masked_array(rng.random((2, 2)))      # an ndarray subclass: POT's path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ot.sinkhorn(a, a, M, 1.0)
    assert npot.stats()["ot.bregman.sinkhorn"]["pot"] == 1


def test_dist_runs_on_numbaot_and_gives_pots_costs(rng):
    """``ot.dist`` (and the bindings POT's pipelines hold, e.g. ``ot.da.dist``)
    run numbaot.dist: POT's costs to POT's rounding of |x|^2 + |y|^2 - 2 x.y
    (absolute ~eps (|x|^2 + |y|^2)); a metric for SciPy runs there too."""
    xs, xt = _clouds(rng, d=3)
    scale = float(max((xs ** 2).sum(1).max(), (xt ** 2).sum(1).max()))
    ref, out, counts = _both(lambda: (ot.dist(xs, xt), ot.da.dist(xs, xt, metric="euclidean"),
                                      ot.dist(xs, xt, metric="chebyshev")))
    assert counts["ot.utils.dist"] == {"numbaot": 3, "pot": 0}
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(out[0], ref[0], rtol=10 * eps, atol=20 * eps * scale)
    np.testing.assert_allclose(out[1], ref[1], rtol=10 * eps, atol=10 * np.sqrt(eps * scale))
    np.testing.assert_array_equal(out[2], ref[2])
    assert ot.dist is ot.utils.dist and not hasattr(ot.dist, "__pot_original__")


def test_solve(rng):
    xs, xt = _clouds(rng)
    M = ot.dist(xs, xt)
    M /= M.max()
    ref, out, counts = _both(lambda: ot.solve(M, reg=0.1))
    assert counts["ot.solvers.solve"]["numbaot"] == 1
    np.testing.assert_allclose(out.plan, ref.plan, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(out.value, ref.value, rtol=1e-7)
    ref, out, counts = _both(lambda: ot.solve_sample(xs, xt, reg=0.5))
    assert counts["ot.solvers.solve_sample"]["numbaot"] == 1
    np.testing.assert_allclose(out.value, ref.value, rtol=1e-7)


@pytest.mark.parametrize("cls, kw", [
    ("SinkhornTransport", dict(reg_e=0.5)),
    ("SinkhornLpl1Transport", dict(reg_e=0.5, reg_cl=0.1)),
    ("UnbalancedSinkhornTransport", dict(reg_e=0.5, reg_m=1.0)),
])
def test_domain_adaptation(rng, cls, kw):
    xs, xt = _clouds(rng)
    ys = (xs[:, 0] > 0).astype(int)

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            T = getattr(ot.da, cls)(**kw).fit(Xs=xs, ys=ys, Xt=xt)
            return T.coupling_, T.transform(Xs=xs)

    (G_ref, X_ref), (G, X), counts = _both(fit)
    assert sum(c["numbaot"] for c in counts.values()) >= 1
    np.testing.assert_allclose(G, G_ref, rtol=1e-5, atol=1e-10)
    np.testing.assert_allclose(X, X_ref, rtol=1e-5, atol=1e-8)


def _blas_threads():
    from threadpoolctl import threadpool_info
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


def test_lpl1_loop_runs_with_blas_on_one_thread_above_the_small_bound(rng, monkeypatch):
    # the wrapper itself: one BLAS thread inside for a cost above
    # SMALL_MAX_ENTRIES, untouched below it, restored after (and after an error)
    from numbaot import _config
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", 100)
    seen = []

    def loop(a, labels_a, b, M, reg, fail=False):
        seen.append(_blas_threads())
        if fail:
            raise RuntimeError("boom")
        return M.sum()

    before = _blas_threads()
    assert before                                     # NumPy's OpenBLAS is loaded
    wrapped = npot._blas_one_thread(loop)
    assert wrapped.__pot_original__ is loop
    M = rng.random((11, 10))
    assert wrapped(None, None, None, M, 1.0) == M.sum()
    assert wrapped(None, None, None, M=M[:5], reg=1.0) == M[:5].sum()
    with pytest.raises(RuntimeError, match="boom"):
        wrapped(None, None, None, M, 1.0, fail=True)
    assert seen[0] == [1] * len(before) and seen[2] == [1] * len(before)
    assert seen[1] == before
    assert _blas_threads() == before

    # the patched POT loop gives POT's plan
    xs, xt = _clouds(rng, n=12, m=11)
    ys = (xs[:, 0] > 0).astype(int)
    M = ot.dist(xs, xt)
    M /= M.max()
    a, b = np.full(12, 1 / 12), np.full(11, 1 / 11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, out, counts = _both(lambda: ot.da.sinkhorn_lpl1_mm(a, ys, b, M, 0.5, eta=0.1))
    assert counts["ot.bregman.sinkhorn"]["numbaot"] == 10
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-12)
    assert _blas_threads() == before


def test_entropic_gromov_and_fused(rng):
    xs, xt = _clouds(rng, n=12, m=10)
    C1, C2 = ot.dist(xs, xs), ot.dist(xt, xt)
    C1 /= C1.max()
    C2 /= C2.max()
    p, q = ot.unif(12), ot.unif(10)
    M = ot.dist(xs, xt)
    M /= M.max()

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            G = ot.gromov.entropic_gromov_wasserstein(C1, C2, p, q, "square_loss", epsilon=0.1,
                                                      solver="PGD", max_iter=20)
            F = ot.gromov.entropic_fused_gromov_wasserstein(M, C1, C2, p, q, "square_loss",
                                                            epsilon=0.1, solver="PGD",
                                                            max_iter=20)
        return G, F

    (G_ref, F_ref), (G, F), counts = _both(run)
    assert counts["ot.bregman.sinkhorn"]["numbaot"] >= 2
    np.testing.assert_allclose(G, G_ref, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(F, F_ref, rtol=1e-5, atol=1e-9)


def test_co_optimal_transport(rng):
    # ``import ot`` does not import ot.coot (POT 0.9.7): without this the
    # test depended on an earlier patch() in its worker having imported it
    importlib.import_module("ot.coot")
    X, Y = rng.random((8, 4)), rng.random((7, 3))

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ot.coot.co_optimal_transport(X, Y, epsilon=(0.1, 0.1), nits_bcd=5)

    (pi_s_ref, pi_f_ref), (pi_s, pi_f), counts = _both(run)
    assert counts["ot.bregman.sinkhorn"]["numbaot"] >= 2
    np.testing.assert_allclose(pi_s, pi_s_ref, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(pi_f, pi_f_ref, rtol=1e-5, atol=1e-9)


def test_free_support_sinkhorn_barycenter(rng):
    measures = [rng.normal(size=(15, 2)) + k for k in range(2)]
    weights = [ot.unif(15)] * 2
    X_init = rng.normal(size=(10, 2))

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ot.bregman.free_support_sinkhorn_barycenter(measures, weights, X_init,
                                                               reg=0.5, numItermax=5)

    ref, out, counts = _both(run)
    assert sum(c["numbaot"] for c in counts.values()) >= 1
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-8)


def test_entropic_partial_wasserstein(rng):
    xs, xt = _clouds(rng, n=10, m=8)
    M = ot.dist(xs, xt)
    M /= M.max()
    a, b = ot.unif(10), ot.unif(8)

    def run():
        return ot.partial.entropic_partial_wasserstein(a, b, M, 0.1, m=0.6, numItermax=50)

    ref, out, counts = _both(run)
    assert counts["ot.partial.entropic_partial_wasserstein"]["numbaot"] == 1
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-12)


# ---------------------------------------------------------------------------
# audit of the accelerator (bindings made while patched, device arrays, POT's
# result types, inputs only POT takes, threads, the version warning)
# ---------------------------------------------------------------------------

_LATE = "ot._numbaot_test_late_import"


def _import_late_module(monkeypatch):
    """A POT submodule imported now, binding at import as ``ot.dr`` does
    (``from .bregman import sinkhorn as sinkhorn_bregman``, ``from .utils
    import dist as dist_utils``) and as ``ot.gnn._utils`` (``dist``)."""
    mod = types.ModuleType(_LATE)
    monkeypatch.setitem(sys.modules, _LATE, mod)
    exec("from ot.bregman import sinkhorn as sinkhorn_bregman\n"
         "from ot.utils import dist as dist_utils\n"
         "from ot.utils import dist\n", mod.__dict__)
    return mod


def test_module_imported_while_patched_is_restored(monkeypatch):
    sinkhorn, dist = ot.bregman.sinkhorn, ot.utils.dist
    npot.patch()
    try:
        mod = _import_late_module(monkeypatch)
        assert mod.sinkhorn_bregman is ot.bregman.sinkhorn is not sinkhorn
        assert mod.dist_utils is mod.dist is ot.utils.dist is not dist
        assert npot.patch() == {}          # nothing replaced: the bindings are the wrappers
    finally:
        restored = npot.unpatch()
    assert mod.sinkhorn_bregman is sinkhorn
    assert mod.dist_utils is dist and mod.dist is dist
    assert {f"{_LATE}.sinkhorn_bregman", f"{_LATE}.dist_utils", f"{_LATE}.dist"} <= set(restored)

    with npot.patched():
        mod = _import_late_module(monkeypatch)
        assert mod.sinkhorn_bregman is not sinkhorn
    assert mod.sinkhorn_bregman is sinkhorn and mod.dist_utils is dist and mod.dist is dist
    assert ot.bregman.sinkhorn is sinkhorn and ot.utils.dist is dist


@pytest.mark.parametrize("device", ["cuda"], indirect=True)
def test_numba_device_arrays_run_on_numbaot(device):
    rng = np.random.default_rng(3)
    a, b = np.full(6, 1 / 6), np.full(5, 1 / 5)
    M = rng.random((6, 5))
    ref = ot.sinkhorn(a, b, M, 0.5)                        # POT, host arrays
    da, db, dM = device.put(a), device.put(b), device.put(M)
    with pytest.raises(ValueError, match="backend"):       # POT does not take them
        ot.sinkhorn(da, db, dM, 0.5)
    npot.stats(reset=True)
    with npot.patched():
        G = ot.sinkhorn(da, db, dM, 0.5)
        counts = npot.stats(reset=True)
    assert counts["ot.bregman.sinkhorn"] == {"numbaot": 1, "pot": 0}
    np.testing.assert_allclose(device.get(G), ref, rtol=1e-7, atol=1e-12)


def test_numpy_calls_do_not_import_numba_cuda():
    code = ("import sys, numpy as np, numbaot.pot, ot; numbaot.pot.patch(); "
            "ot.sinkhorn(np.full(2, .5), np.full(2, .5), np.eye(2), 1.0); "
            "print(numbaot.pot.stats()['ot.bregman.sinkhorn']['numbaot'], "
            "'numba.cuda' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["1", "False"]


def _quiet(fn):
    """fn with POT's and numbaot's convergence warnings silenced (both sides
    stop at the same iteration)."""
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    return run


def _assert_same_lazy(out, ref, atol=1e-12):
    assert type(out) is ot.utils.LazyTensor
    assert repr(out) == repr(ref) and out.shape == ref.shape
    n, m = ref.shape
    for key in [slice(None), slice(2, 5), 3, -1, (slice(1, 4), slice(0, 3)), (2, 3),
                (slice(None), 4), slice(n - 2, n + 5)]:
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-6, atol=atol)
    np.testing.assert_array_equal(out.X_a, ref.X_a)
    np.testing.assert_array_equal(out.X_b, ref.X_b)
    np.testing.assert_allclose(out.f, ref.f, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out.g, ref.g, rtol=1e-6, atol=1e-9)
    assert (out.metric, out.reg) == (ref.metric, ref.reg)


def test_results_are_pots_otresult_and_lazytensor(rng):
    xs, xt = _clouds(rng, n=13, m=11)
    M = ot.dist(xs, xt)
    M /= M.max()

    ref, out, counts = _both(_quiet(lambda: ot.solve(M, reg=0.1)))
    assert counts["ot.solvers.solve"]["numbaot"] == 1
    assert type(out) is ot.utils.OTResult and isinstance(out, ot.utils.OTResult)
    np.testing.assert_allclose(out.plan, ref.plan, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(out.value, ref.value, rtol=1e-7)
    np.testing.assert_allclose(out.value_linear, ref.value_linear, rtol=1e-7)
    for o, r in zip(out.potentials, ref.potentials):
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-9)
    for o, r in zip(out.marginals, ref.marginals):
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-12)

    ref, out, counts = _both(_quiet(
        lambda: ot.solve_sample(xs, xt, reg=0.5, lazy=True, batch_size=4)))
    assert counts["ot.solvers.solve_sample"]["numbaot"] == 1
    assert type(out) is ot.utils.OTResult
    _assert_same_lazy(out.lazy_plan, ref.lazy_plan)
    np.testing.assert_allclose(out.value_linear, ref.value_linear, rtol=1e-7)
    np.testing.assert_allclose(out.marginal_a, ref.marginal_a, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(out.marginal_b, ref.marginal_b, rtol=1e-6, atol=1e-12)
    assert out.log["lazy_plan"] is out.lazy_plan

    ref, out, counts = _both(_quiet(lambda: ot.solve_sample(xs, xt, reg=0.5, debias=True)))
    assert counts["ot.solvers.solve_sample"]["numbaot"] == 1
    assert type(out) is ot.utils.OTResult
    assert all(type(out.log[k]) is ot.utils.OTResult for k in ("res_aa", "res_bb", "res_ab"))
    np.testing.assert_allclose(out.value, ref.value, rtol=1e-6, atol=1e-12)

    def lazy_sinkhorn():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ot.bregman.empirical_sinkhorn(xs, xt, 0.5, isLazy=True, log=True,
                                                 batchSize=5)

    (f_ref, g_ref, log_ref), (f, g, log), counts = _both(lazy_sinkhorn)
    assert counts["ot.bregman.empirical_sinkhorn"]["numbaot"] == 1
    np.testing.assert_allclose(f, f_ref, rtol=1e-6, atol=1e-9)
    _assert_same_lazy(log["lazy_plan"], log_ref["lazy_plan"])


def test_inputs_only_pot_takes_go_to_pot(rng):
    xs, xt = _clouds(rng, n=7, m=6)
    M = ot.dist(xs, xt)
    M /= M.max()
    a, b = ot.unif(7), ot.unif(6)

    # lists where POT takes arrays: POT's own answer, here its error
    with pytest.raises(ValueError) as exc_ref:
        ot.solve(M.tolist(), a.tolist(), b.tolist(), reg=0.1)
    npot.stats(reset=True)
    with npot.patched():
        with pytest.raises(ValueError) as exc:
            ot.solve(M.tolist(), a.tolist(), b.tolist(), reg=0.1)
        counts = npot.stats(reset=True)
    assert str(exc.value) == str(exc_ref.value)
    assert counts["ot.solvers.solve"] == {"numbaot": 0, "pot": 1}

    # and POT's list_to_array where it takes lists
    ref, out, counts = _both(lambda: ot.sinkhorn(a.tolist(), b.tolist(), M, 1.0))
    assert counts["ot.bregman.sinkhorn"] == {"numbaot": 0, "pot": 1}
    np.testing.assert_array_equal(out, ref)

    # other dtypes than float32/float64: POT's dtype and values
    for dt in (np.float16, np.longdouble):
        ref, out, counts = _both(_quiet(lambda: ot.sinkhorn(a.astype(dt), b.astype(dt),
                                                            M.astype(dt), 1.0)))
        assert counts["ot.bregman.sinkhorn"] == {"numbaot": 0, "pot": 1}
        assert out.dtype == ref.dtype == dt
        np.testing.assert_array_equal(out, ref)
    xi, yi = np.arange(6).reshape(3, 2), np.arange(4).reshape(2, 2)
    ref, out, counts = _both(lambda: ot.dist(xi, yi))
    assert counts["ot.utils.dist"] == {"numbaot": 0, "pot": 1}
    assert out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)

    # tuples and lists that are options stay on numbaot
    def options():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (ot.solve(M, a, b, reg=0.1, unbalanced=(1.0, 2.0)).plan,
                    ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, [1.0, 2.0]),
                    ot.solve_sample(xs, xt, reg=0.5, lazy=True,
                                    batch_size=(3, 4)).lazy_plan[:],
                    ot.sinkhorn(a, b, M, 0.5, warmstart=(np.zeros(7), np.zeros(6))))

    ref, out, counts = _both(options)
    for name in ("ot.solvers.solve", "ot.unbalanced.sinkhorn_unbalanced",
                 "ot.solvers.solve_sample", "ot.bregman.sinkhorn"):
        assert counts[name] == {"numbaot": 1, "pot": 0}, name
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-12)


def test_solve_sample_with_a_scaler_runs_pots_own(rng):
    """POT 0.9.7 applies ``scaler`` to X_a only (numbaot to both clouds):
    a patched call with a scaler gives POT's answer."""
    xs, xt = _clouds(rng, n=7, m=6)
    ref, out, counts = _both(lambda: ot.solve_sample(xs, xt, reg=1.0,
                                                     scaler=lambda X: 2.0 * X).value)
    assert counts["ot.solvers.solve_sample"] == {"numbaot": 0, "pot": 1}
    # POT's solve_sample then calls ot.solve, which runs on numbaot
    np.testing.assert_allclose(out, ref, rtol=1e-10)
    both = numbaot.solve_sample(xs, xt, reg=1.0, scaler=lambda X: 2.0 * X).value
    assert abs(both - ref) > 0.1 * abs(ref)     # the difference this routing avoids


def test_overlapping_blocks_in_two_threads():
    original = ot.sinkhorn
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen, errors = {}, []

    def first():
        try:
            with npot.patched():
                a_in.set()
                assert b_in.wait(60)
            a_out.set()
        except BaseException as exc:  # noqa: B902 - reported by the main thread
            errors.append(exc)
            a_out.set()

    def second():
        try:
            assert a_in.wait(60)
            with npot.patched():
                b_in.set()
                assert a_out.wait(60)
                seen["inside after the other block closed"] = ot.sinkhorn is not original
            seen["after"] = ot.sinkhorn is original
        except BaseException as exc:  # noqa: B902
            errors.append(exc)
            b_in.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert seen == {"inside after the other block closed": True, "after": True}
    assert not npot.is_patched()

    # an outer patch() of the user outlives the blocks
    npot.patch()
    try:
        with npot.patched():
            pass
        assert ot.sinkhorn is not original
    finally:
        npot.unpatch()
    assert ot.sinkhorn is original


def _version_warnings(record):
    """The files the version warnings of ``record`` point at."""
    return [w.filename for w in record if "written against POT" in str(w.message)]


def test_version_warning_points_at_the_caller(monkeypatch):
    monkeypatch.setattr(npot, "_TESTED_POT", "0.0.0-not-installed")
    try:
        with pytest.warns(UserWarning, match="written against POT") as record:
            npot.patch()
        assert _version_warnings(record) == [__file__]
    finally:
        npot.unpatch()
    with pytest.warns(UserWarning, match="written against POT") as record:
        with npot.patched():
            pass
    assert _version_warnings(record) == [__file__]
    assert not npot.is_patched()
