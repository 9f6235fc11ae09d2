"""sinkhorn_log at very small regularisation (reg = 1e-4 with M in [0, 1]):
exp(-M/reg) underflows to 0 for most entries, the log-domain solver must not.

Oracles: the problem's constraints (marginals) and POT's sinkhorn_log on the
problems where POT converges.
"""
import numpy as np
import pytest

import numbaot
from _helpers import F32, assert_log_matches, assert_close, call_recording, make_problem, ot, random_hist, up

REG = 1e-4


def _user_warnings(w):
    # POT's exp(log_u) overflows to inf (NumPy RuntimeWarning); that is not an
    # API warning
    return [x for x in w if x[0] is not RuntimeWarning]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 5), (6, 1), (7, 13), (40, 25), (90, 70)])
def test_tiny_reg_is_finite_and_feasible(shape, dtype):
    a, b, M = make_problem(*shape, seed=shape[0] * 31 + shape[1], dtype=dtype)
    numItermax = 50000
    stopThr = 1e-9 if dtype == np.float64 else 1e-6
    (G, log), w = call_recording(numbaot.bregman.sinkhorn_log, a, b, M, REG, log=True, numItermax=numItermax,
                                 stopThr=stopThr)
    assert G.dtype == dtype
    assert np.all(np.isfinite(G)) and np.all(G >= 0)
    assert np.all(np.isfinite(log["log_u"])) and np.all(np.isfinite(log["log_v"]))
    # u = exp(log u) may overflow to +inf (as in POT) but never be NaN
    assert not np.any(np.isnan(log["u"])) and not np.any(np.isnan(log["v"]))
    assert not any(np.isnan(e) for e in log["err"])
    converged = log["niter"] < numItermax - 1
    assert converged, "this problem is expected to converge"
    assert _user_warnings(w) == []
    a64, b64 = up(a, b)
    G64 = G.astype(np.float64)
    if dtype == np.float64:
        # the last update fits the rows exactly; the columns are within stopThr
        assert_close(G64.sum(axis=1), a64, rtol=1e-12, atol=1e-15)
        assert np.linalg.norm(G64.sum(axis=0) - b64) < stopThr
    else:
        assert_close(G64.sum(axis=1), a64, rtol=1e-5, atol=1e-7)
        assert np.linalg.norm(G64.sum(axis=0) - b64) < 10 * stopThr


@pytest.mark.parametrize("shape, seed", [((5, 4), 2), ((4, 6), 3), ((5, 7), 0), ((3, 4), 0)])
def test_tiny_reg_matches_pot_where_pot_converges(shape, seed):
    a, b, M = make_problem(*shape, seed=seed)
    with np.errstate(all="ignore"):
        (G_ref, log_ref), w_ref = call_recording(ot.bregman.sinkhorn_log, a, b, M, REG, log=True,
                                                 numItermax=20000)
        (G, log), w = call_recording(numbaot.bregman.sinkhorn_log, a, b, M, REG, log=True, numItermax=20000)
    assert log_ref["niter"] < 20000 - 1, "POT converges on this problem"
    assert _user_warnings(w) == _user_warnings(w_ref) == []
    assert np.all(np.isfinite(G))
    assert_close(G, G_ref, rtol=1e-7, atol=1e-10)
    assert_log_matches(log, log_ref)


def test_tiny_reg_through_sinkhorn_and_sinkhorn2():
    """method='sinkhorn_log' through the dispatchers, and the 2-D b path."""
    method = "sinkhorn_log"
    a, b, M = make_problem(5, 7, seed=0)
    G = numbaot.sinkhorn(a, b, M, REG, method=method, numItermax=20000)
    G_ref = ot.sinkhorn(a, b, M, REG, method=method, numItermax=20000)
    assert_close(G, G_ref, rtol=1e-7, atol=1e-10)
    loss = numbaot.sinkhorn2(a, b, M, REG, method=method, numItermax=20000)
    assert_close(loss, np.sum(G_ref * M), rtol=1e-7, atol=1e-10)
    rng = np.random.default_rng(1)
    B = np.column_stack([b, random_hist(rng, 7)])
    losses = numbaot.sinkhorn2(a, B, M, REG, method=method, numItermax=50000, warn=False)
    assert losses.shape == (2,) and np.all(np.isfinite(losses))
    assert_close(losses[0], loss, rtol=1e-7, atol=1e-10)


def test_tiny_reg_paired_batch_finite():
    rng = np.random.default_rng(2)
    _, _, M = make_problem(30, 20, seed=2)
    A = random_hist(rng, 30, 3)
    B = random_hist(rng, 20, 3)
    with np.errstate(over="ignore"):  # u = exp(log_u) overflows, as in POT
        losses, log = numbaot.sinkhorn2(A, B, M, REG, method="sinkhorn_log", numItermax=50000, log=True,
                                        warn=False)
    assert losses.shape == (3,) and np.all(np.isfinite(losses))
    assert np.all(np.isfinite(log["log_u"])) and np.all(np.isfinite(log["log_v"]))
    for k in range(3):
        # a plan's cost lies between min M and max M (mass 1)
        assert M.min() - 1e-12 <= losses[k] <= M.max() + 1e-12
        # each problem is solved with its own weights: rebuild its plan
        logG = -M / REG + log["log_u"][:, k][:, None] + log["log_v"][:, k][None, :]
        G = np.exp(logG)
        assert_close(G.sum(axis=1), A[:, k], rtol=1e-9, atol=1e-12)
        assert np.linalg.norm(G.sum(axis=0) - B[:, k]) < 1e-8
        assert_close(np.sum(G * M), losses[k], rtol=1e-9, atol=1e-12)


def test_tiny_reg_float32_close_to_float64():
    a, b, M = make_problem(5, 4, seed=2, dtype=np.float32)
    G32 = numbaot.bregman.sinkhorn_log(a, b, M, REG, numItermax=50000, stopThr=1e-7, warn=False)
    G64 = ot.bregman.sinkhorn_log(*up(a, b, M), REG, numItermax=50000, stopThr=1e-12, warn=False)
    assert G32.dtype == np.float32
    assert_close(G32, G64, **F32)


@pytest.mark.parametrize("reg", [0.05, 0.01, 0.002])
def test_float32_lanes_against_pot(reg):
    """A float32 M above the small-problem size takes the blocked pass, whose
    row exponentials run in float32 lanes while |shift| + max |v| <=
    LOG_F32_MAX_SCALE (all three regs here: the potentials stay small on
    this cost scaled to [0, 1]).  The plan stays within the float32
    tolerance of POT's float64 plan, and no further from it than POT's own
    float32 computation on the same float32 data."""
    rng = np.random.default_rng(7)
    n = 150  # 22500 entries > SMALL_MAX_ENTRIES_LOG
    x, y = rng.random((n, 2)), rng.random((n, 2)) + 0.2
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    a32 = np.full(n, 1 / n, np.float32)
    M32 = M.astype(np.float32)
    ref = ot.sinkhorn(*up(a32, a32, M32), reg, method="sinkhorn_log", stopThr=1e-8)
    got = numbaot.sinkhorn(a32, a32, M32, reg, method="sinkhorn_log", stopThr=1e-8)
    pot32 = ot.sinkhorn(a32, a32, M32, reg, method="sinkhorn_log", stopThr=1e-8)
    assert got.dtype == np.float32
    assert_close(got, ref, **F32)
    scale = ref + 1e-6 * ref.max()
    assert np.max(np.abs(got - ref) / scale) <= np.max(np.abs(pot32 - ref) / scale)


def test_float32_lanes_reach_default_stopThr():
    """The float32 lanes leave a floor of about 1e-8 under the marginal
    error; the solver switches to float64 lanes below LOG_F32_SWITCH_ERR, so
    a float32 problem converges to POT's default stopThr 1e-9 in as many
    iterations as the float64 one, without a warning (before the switch it
    ran all 1000 iterations)."""
    rng = np.random.default_rng(8)
    n = 256  # weights 1/256 exact in float32: both marginals sum to 1
    x, y = rng.random((n, 3)), rng.random((n, 3))
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    a = np.full(n, 1 / n)
    logs = {}
    for dt in (np.float64, np.float32):
        (G, logs[dt]), w = call_recording(numbaot.sinkhorn, a.astype(dt), a.astype(dt),
                                          M.astype(dt), 0.01, method="sinkhorn_log", log=True)
        assert w == []
        assert logs[dt]["err"][-1] < 1e-9
    assert logs[np.float32]["niter"] == logs[np.float64]["niter"] < 999


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(203, 197), (37, 9001), (2001, 13)])
def test_blocked_pass_tile_shapes_match_pot(shape, dtype):
    """The blocked pass adds a tile's rows into the column sums in groups of
    ``ROW_TILE`` and the rest row by row: (203, 197) ends its chunks on
    partial tiles; rows of 9001 float64 entries leave fewer than
    ``ROW_TILE`` rows per tile (``TILE_BYTES``), so every tile goes row by
    row; (1001, 13) has many chunks of narrow rows.  The first pass (no
    certified shift) takes each row's exact maximum.  Against POT's float64
    ``sinkhorn_log``: plan, iteration count and err history."""
    n, m = shape
    assert n * m > numbaot._config.SMALL_MAX_ENTRIES_LOG  # the blocked path
    a, b, M = make_problem(n, m, seed=n + m, dtype=dtype)
    G_ref, log_ref = ot.sinkhorn(*up(a, b, M), 0.05, method="sinkhorn_log", log=True,
                                 numItermax=60, stopThr=1e-7)
    G, log = numbaot.sinkhorn(a, b, M, 0.05, method="sinkhorn_log", log=True, numItermax=60,
                              stopThr=1e-7)
    assert G.dtype == dtype
    if dtype == np.float64:
        assert_log_matches(log, log_ref)
        assert_close(G, G_ref, rtol=1e-12, atol=1e-15 * G_ref.max())
    else:
        assert_close(G, G_ref, **F32)


@pytest.mark.parametrize("start, reg", [("constant", 0.05), ("spread", 0.05),
                                        ("one row far above", 0.0005)])
def test_blocked_first_column_update_from_a_warm_start_matches_pot(monkeypatch, start, reg):
    """The blocked run forms POT's first column update, v = log b -
    LSE_i(c M_ij + u_i), by its fused pass shifted by c min_i M_ij + max_i
    u_i: exact for a constant u, an upper bound for a warm start.  u spread
    over [-30, 30] leaves the bound loose but the sums representable; one
    row 800 above the others, at reg = 0.0005, puts the column sums of the
    columns that row pays much for below 1e-200 of b, and those columns are
    recomputed by the safe pass (``_log_redo_columns``, at least once).
    Against POT's ``sinkhorn_log`` from the same warm start: plan,
    log-scalings, err, and the warning (POT's "did not converge" at
    stopThr = 0, nothing else)."""
    from numbaot.cpu import sinkhorn as cpu_sinkhorn

    monkeypatch.setattr(numbaot._config, "SMALL_MAX_ENTRIES_LOG", -1)
    calls = []
    redo = cpu_sinkhorn._log_redo_columns
    monkeypatch.setattr(cpu_sinkhorn, "_log_redo_columns",
                        lambda *args: (calls.append(1), redo(*args))[1])
    rng = np.random.default_rng(11)
    a, b, M = make_problem(70, 90, seed=11)
    u0 = {"constant": np.full(70, 3.0), "spread": rng.uniform(-30.0, 30.0, 70),
          "one row far above": np.where(np.arange(70) == 0, 800.0, 0.0)}[start]
    v0 = rng.uniform(-5.0, 5.0, 90)
    (ref, log_ref), w_ref = call_recording(ot.sinkhorn, a, b, M, reg, method="sinkhorn_log",
                                           numItermax=30, stopThr=0.0, log=True,
                                           warmstart=(u0.copy(), v0.copy()))
    (out, log), w = call_recording(numbaot.sinkhorn, a, b, M, reg, method="sinkhorn_log",
                                   numItermax=30, stopThr=0.0, log=True,
                                   warmstart=(u0.copy(), v0.copy()))
    # stopThr = 0: both warn that they did not converge, once
    assert [x for x in w if x[0] is UserWarning] == [x for x in w_ref if x[0] is UserWarning]
    assert len(w) == 1
    assert (len(calls) >= 1) == (start == "one row far above")
    assert_close(out, ref, rtol=1e-9, atol=1e-13 * ref.max())
    assert_close(log["log_u"], log_ref["log_u"], rtol=1e-9, atol=1e-9)
    assert_close(log["log_v"], log_ref["log_v"], rtol=1e-9, atol=1e-9)
    assert_close(np.asarray(log["err"]), np.asarray(log_ref["err"]), rtol=1e-6, atol=1e-14)


@pytest.mark.parametrize("init_serial_max", [None, -1])
@pytest.mark.parametrize("n_hists", [0, 2, 9])
def test_blocked_solver_recomputes_underflowed_columns(monkeypatch, n_hists, init_serial_max):
    """The blocked log-domain run stops at a step whose column sums
    underflowed (q <= UNDERFLOW_RTOL * b), the launcher recomputes those
    columns exactly and runs on.  With the bound raised to 1e300 every column
    of every step counts as underflowed: each step is then one run plus one
    safe column pass, and the plans, potentials and errors are still POT's
    (single problem, a paired batch below and above BATCH_MINOR_MIN).  Below
    it the first column update is a pass of the run too (``col_first``), and
    is redone as well: 41 recomputations.  Above it, the first update is on
    the calling thread, and with ``init_serial_max`` = -1 by the parallel
    pass."""
    from numbaot import _config
    from numbaot.cpu import sinkhorn as cpu_sinkhorn

    rng = np.random.default_rng(5)
    a, b, M = make_problem(60, 50, seed=5)
    if n_hists:
        b = random_hist(rng, 50, n_hists)
    monkeypatch.setattr(_config, "SMALL_MAX_ENTRIES", -1)
    if init_serial_max is not None:
        monkeypatch.setattr(_config, "LOG_INIT_SERIAL_MAX_ENTRIES", init_serial_max)
    calls = []
    redo = cpu_sinkhorn._log_redo_columns
    monkeypatch.setattr(cpu_sinkhorn, "_log_redo_columns",
                        lambda *args: (calls.append(1), redo(*args))[1])
    monkeypatch.setattr(cpu_sinkhorn, "UNDERFLOW_RTOL", 1e300)
    out, log = numbaot.sinkhorn(a, b, M, 0.05, method="sinkhorn_log", numItermax=40,
                                stopThr=0.0, log=True)
    ref, log_ref = ot.sinkhorn(a, b, M, 0.05, method="sinkhorn_log", numItermax=40,
                               stopThr=0.0, log=True)
    pm = n_hists >= _config.BATCH_MINOR_MIN
    assert len(calls) == (40 if pm else 41)
    assert_close(out, ref, rtol=1e-9, atol=1e-13)
    if n_hists == 0:        # (POT's log of a batch holds other keys)
        assert_close(np.asarray(log["err"]), np.asarray(log_ref["err"]), rtol=1e-6,
                     atol=1e-14)
        assert_close(log["log_v"], log_ref["log_v"], rtol=1e-9, atol=1e-9)
