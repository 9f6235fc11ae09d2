"""Results are bit-identical whatever the number of Numba threads."""
import numba
import numpy as np
import pytest

import numbaot
from _helpers import METHODS, METHODS2, make_problem, random_hist

pytestmark = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                                reason="needs NUMBA_NUM_THREADS >= 2 to compare 1 and 2 threads")

# big enough for the parallel kernels to split rows and columns into several
# chunks, small enough to stay fast
N, Mcols = 150, 110


#: above _config.SMALL_MAX_ENTRIES: 5 memory-bound chunks of 110 rows
_BLOCKED = (520, 300)


def _problem(dtype):
    return make_problem(N, Mcols, seed=4242, dtype=dtype)


def _cases():
    cases = []
    for dtype in (np.float64, np.float32):
        dt = np.dtype(dtype).name
        for m in METHODS:
            kw = dict(method=m, log=True, warn=False)
            if m == "greenkhorn":
                kw["numItermax"] = 3000
            cases.append((f"sinkhorn-{m}-{dt}",
                          lambda m=m, kw=kw, dtype=dtype: numbaot.sinkhorn(*_problem(dtype), 0.05, **kw)))
        for m in METHODS2:
            cases.append((f"2d-b-{m}-{dt}", lambda m=m, dtype=dtype: numbaot.sinkhorn2(
                _problem(dtype)[0], random_hist(np.random.default_rng(1), Mcols, 4).astype(dtype),
                _problem(dtype)[2], 0.05, method=m, log=True, warn=False)))
            cases.append((f"paired-{m}-{dt}", lambda m=m, dtype=dtype: numbaot.sinkhorn2(
                random_hist(np.random.default_rng(2), N, 4).astype(dtype),
                random_hist(np.random.default_rng(3), Mcols, 4).astype(dtype),
                _problem(dtype)[2], 0.05, method=m, log=True, warn=False)))
        cases.append((f"sinkhorn_log-tiny-reg-{dt}", lambda dtype=dtype: numbaot.bregman.sinkhorn_log(
            *_problem(dtype), 1e-4, numItermax=300, log=True, warn=False)))
        # the blocked multiplicative passes (above SMALL_MAX_ENTRIES) with
        # several memory-bound chunks of at least MIN_CHUNK_ENTRIES entries
        cases.append((f"sinkhorn-blocked-{dt}", lambda dtype=dtype: numbaot.sinkhorn(
            *make_problem(*_BLOCKED, seed=7, dtype=dtype), 0.05, numItermax=40, log=True,
            warn=False)))
        cases.append((f"unbalanced-blocked-{dt}", lambda dtype=dtype: numbaot.sinkhorn_unbalanced(
            *make_problem(*_BLOCKED, seed=8, dtype=dtype), 0.05, 1.0, numItermax=40, log=True,
            warn=False)))
        for metric in ("sqeuclidean", "euclidean", "cityblock"):
            cases.append((f"dist-{metric}-{dt}", lambda metric=metric, dtype=dtype: numbaot.dist(
                np.random.default_rng(5).normal(size=(N, 3)).astype(dtype),
                np.random.default_rng(6).normal(size=(Mcols, 3)).astype(dtype), metric=metric)))
    return cases


CASES = _cases()


def _flatten(res):
    """Every array / number in a result (plans, losses, log dicts, tuples)."""
    if isinstance(res, dict):
        out = []
        for k in sorted(res):
            out += [(k, x) for _, x in _flatten(res[k])]
        return out
    if isinstance(res, (tuple, list)):
        out = []
        for x in res:
            out += _flatten(x)
        return out
    return [("", np.asarray(res))]


@pytest.mark.parametrize("case", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_bit_identical_for_1_and_2_threads(case, restore_num_threads):
    set_threads = restore_num_threads
    with np.errstate(over="ignore"):  # exp(log_u) may overflow at tiny reg, as in POT
        set_threads(1)
        assert numba.get_num_threads() == 1
        r1 = _flatten(case())
        set_threads(2)
        assert numba.get_num_threads() == 2
        r2 = _flatten(case())
    assert len(r1) == len(r2)
    for (k1, x1), (k2, x2) in zip(r1, r2):
        assert k1 == k2
        assert x1.dtype == x2.dtype, k1
        assert np.array_equal(x1, x2, equal_nan=True), f"{k1!r} differs between 1 and 2 threads"


def test_chunk_layout_rule():
    """The split depends on the sizes only, covers every row once, and keeps
    a memory-bound chunk at MIN_CHUNK_ENTRIES entries or more."""
    from numbaot import _config
    from numbaot.cpu import chunk_layout

    assert _BLOCKED[0] * _BLOCKED[1] > _config.SMALL_MAX_ENTRIES
    assert chunk_layout(*_BLOCKED[:1], 1, _BLOCKED[1], memory_bound=True)[0] > 1
    for n_rows, n_hists, n_cols in [(1, 1, 1), (100, 1, 100), (512, 1, 512), (520, 1, 300),
                                    (1024, 1, 1024), (4096, 1, 4096), (512, 20, 512),
                                    (10**5, 3, 7), (37, 1, 10**6)]:
        for memory_bound in (False, True):
            n_chunks, chunk_rows = chunk_layout(n_rows, n_hists, n_cols, memory_bound)
            rows = [min(n_rows, (c + 1) * chunk_rows) - c * chunk_rows for c in range(n_chunks)]
            assert all(r > 0 for r in rows) and sum(rows) == n_rows
            assert n_chunks <= _config.MAX_ROW_CHUNKS
            if n_chunks > 1:
                assert chunk_rows >= _config.MIN_CHUNK_ROWS
                if memory_bound:
                    assert chunk_rows * n_hists * n_cols >= _config.MIN_CHUNK_ENTRIES
    # 512²: 8 chunks of 64 rows for the multiplicative passes, 32 of 16 for the log domain
    assert chunk_layout(512, 1, 512, memory_bound=True) == (8, 64)
    assert chunk_layout(512, 1, 512) == (32, 16)
