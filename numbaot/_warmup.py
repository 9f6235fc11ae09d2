"""Ahead-of-time compilation of numbaot's CPU kernels (``numbaot.warmup``).

numbaot's kernels are compiled by Numba on their first call and kept in
Numba's on-disk cache (next to the installed sources, or under
``NUMBA_CACHE_DIR``).  ``warmup`` makes those first calls on tiny problems,
so that a container build or an install script pays the compilation once and
later processes only load the cached machine code.  ``python -m numbaot
warmup`` does the same from a shell.
"""
import contextlib
import math
import sys
import time
import warnings

import numpy as np

__all__ = ["warmup", "WARMUP_FUNCTIONS"]


def _problem(dtype, n=5, m=4, n_hists=None):
    rng = np.random.default_rng(0)
    x, y = rng.random((n, 2)), rng.random((m, 2))
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    M /= M.max()
    if n_hists is None:
        a, b = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
    else:
        a, b = rng.random((n, n_hists)) + 0.1, rng.random((m, n_hists)) + 0.1
        a /= a.sum(0)
        b /= b.sum(0)
    return a.astype(dtype), b.astype(dtype), M.astype(dtype), x.astype(dtype), y.astype(dtype)


@contextlib.contextmanager
def _blocked_path(wide=False):
    """Every problem takes the blocked (parallel) path for a while: the
    warm-up's tiny problems otherwise only reach the small-problem kernels
    (``_config.SMALL_MAX_ENTRIES``), and the blocked log-domain solver's
    first column update its serial pass (``LOG_INIT_SERIAL_MAX_ENTRIES``).
    With ``wide``, the blocked multiplicative passes take the tiles of wide
    rows (``_config.KNOPP_ROWS_MAX_BYTES``), not the four-row sweep of
    narrow ones: a kernel of its own each."""
    from . import _config
    saved = (_config.SMALL_MAX_ENTRIES, _config.LOG_INIT_SERIAL_MAX_ENTRIES,
             _config.KNOPP_ROWS_MAX_BYTES)
    _config.SMALL_MAX_ENTRIES = -1
    _config.LOG_INIT_SERIAL_MAX_ENTRIES = -1
    if wide:
        _config.KNOPP_ROWS_MAX_BYTES = -1
    try:
        yield
    finally:
        (_config.SMALL_MAX_ENTRIES, _config.LOG_INIT_SERIAL_MAX_ENTRIES,
         _config.KNOPP_ROWS_MAX_BYTES) = saved


def _blocked_wide():
    return _blocked_path(wide=True)


@contextlib.contextmanager
def _columns_underflow():
    """Every column sum of the blocked log-domain solver counts as
    underflowed for a while (``numbaot.cpu.sinkhorn.UNDERFLOW_RTOL``), so
    that its recomputation pass, compiled only when a step needs it, is
    compiled too."""
    from .cpu import sinkhorn as cpu_sinkhorn
    saved = cpu_sinkhorn.UNDERFLOW_RTOL
    cpu_sinkhorn.UNDERFLOW_RTOL = 1e300
    try:
        yield
    finally:
        cpu_sinkhorn.UNDERFLOW_RTOL = saved


def _sinkhorn(dtype, method):
    import numbaot
    from ._config import BATCH_MINOR_MIN
    # paired batches: a few problems (problem-major kernels) and
    # BATCH_MINOR_MIN of them (the problem-minor ``*_pm`` kernels)
    batches = (None, 3, BATCH_MINOR_MIN)
    paths = (contextlib.nullcontext, _blocked_path)
    if method == "sinkhorn":
        paths += (_blocked_wide,)
    for path in paths:
        with path():
            for n_hists in batches:
                a, b, M, _, _ = _problem(dtype, n_hists=n_hists)
                numbaot.sinkhorn(a, b, M, 0.5, method=method, numItermax=20, log=True)
                numbaot.sinkhorn2(a, b, M, 0.5, method=method, numItermax=20)
            numbaot.sinkhorn(list(a), list(b), M, 0.5, method=method, numItermax=20)
    if method == "sinkhorn_log":
        with _blocked_path(), _columns_underflow():
            for n_hists in (None, BATCH_MINOR_MIN):
                a, b, M, _, _ = _problem(dtype, n_hists=n_hists)
                numbaot.sinkhorn(a, b, M, 0.5, method=method, numItermax=2)


def _unbalanced(dtype):
    import numbaot
    a, b, M, _, _ = _problem(dtype)
    B = _problem(dtype, n_hists=3)[1]      # several targets: the losses' kernels
    for path in (contextlib.nullcontext, _blocked_path, _blocked_wide):
        with path():
            for method in ("sinkhorn", "sinkhorn_log"):
                numbaot.sinkhorn_unbalanced(a, b, M, 0.5, 1.0, method=method, numItermax=20,
                                            log=True)
                numbaot.sinkhorn_unbalanced2(a, b, M, 0.5, 1.0, method=method, numItermax=20)
                numbaot.sinkhorn_unbalanced(a, B, M, 0.5, 1.0, method=method, numItermax=20)
                # the state path (lists skip the one-call path of plain arrays)
                numbaot.sinkhorn_unbalanced(list(a), list(b), M, 0.5, 1.0, method=method,
                                            numItermax=20)


def _barycenter(dtype):
    import numbaot
    rng = np.random.default_rng(0)
    A = (rng.random((5, 3)) + 0.1).astype(dtype)
    A /= A.sum(0)
    M = _problem(dtype, n=5, m=5)[2]
    for path in (contextlib.nullcontext, _blocked_path, _blocked_wide):
        with path():
            for method in ("sinkhorn", "sinkhorn_log"):
                numbaot.barycenter(A, M, 0.5, method=method, numItermax=20)


def _partial(dtype):
    from numbaot import partial
    # 5 x 4: the one-call serial path; 400 x 400: above the small bounds
    # (SMALL_MAX_ENTRIES, SMALL_MAX_ENTRIES_LOG), the parallel kernels
    rng = np.random.default_rng(0)
    for n in (5, 400):
        M = _problem(dtype, n=n, m=n - 1 if n == 5 else n)[2]
        # uneven weights: with uniform ones the plan's first iterate is
        # already feasible, the error at the first check can be exactly 0
        # (rounding decides) and the loop then stops before the steps
        # that finish a checked iteration (``cpu.partial._finish_step``)
        a, b = (rng.random(k).astype(dtype) + 0.5 for k in M.shape)
        a /= a.sum()
        b *= 1.5 / b.sum()
        for fn in (partial.entropic_partial_wasserstein,
                   partial.entropic_partial_wasserstein_logscale):
            fn(a, b, M, 0.5, m=0.5, numItermax=20, log=True)
            # a paired batch (two problems): its plans' kernels
            fn(a, np.stack([b, b], axis=1), M, 0.5, m=0.5, numItermax=20)
        if n > 5:  # one problem of wide rows: the tiles' kernel
            with _blocked_wide():
                partial.entropic_partial_wasserstein(a, b, M, 0.5, m=0.5, numItermax=20)


def _empirical(dtype):
    from numbaot import bregman
    _, _, _, x, y = _problem(dtype)
    bregman.empirical_sinkhorn(x, y, 0.5, numIterMax=20, isLazy=True)
    bregman.empirical_sinkhorn2(x, y, 0.5, numIterMax=20, isLazy=True)


def _dist(dtype):
    import numbaot
    from numbaot import _config
    _, _, _, x, y = _problem(dtype)
    numbaot.dist(x, y)
    # a matrix above DIST_SERIAL_MAX_ENTRIES: the parallel kernel
    z = np.linspace(0.0, 1.0, math.isqrt(_config.DIST_SERIAL_MAX_ENTRIES) + 1, dtype=dtype)
    numbaot.dist(z[:, None], z[:, None])


def _value_and_grad(dtype):
    import numbaot
    a, b, M, _, _ = _problem(dtype)
    for path in (contextlib.nullcontext, _blocked_path, _blocked_wide):
        with path():
            numbaot.sinkhorn2_value_and_grad(a, b, M, 0.5, numItermax=20)


def _empirical_value_and_grad(dtype):
    import numbaot
    _, _, _, x, y = _problem(dtype)
    numbaot.empirical_sinkhorn2_value_and_grad(x, y, 0.5, numIterMax=20)


def _scan(dtype, name):
    import numbaot
    x = np.linspace(-1.0, 1.0, 24, dtype=dtype).reshape(2, 12)
    fn = getattr(numbaot, name)
    y = fn(x, 0.9)
    getattr(numbaot, name + "_backward")(np.ones_like(y), y, 0.9)


def _gae(dtype):
    import numbaot
    rewards = np.linspace(0.0, 1.0, 24, dtype=dtype).reshape(2, 12)
    dones = np.zeros((2, 12), dtype=bool)
    numbaot.gae(rewards, rewards[:, ::-1].copy(), dones, 0.99, 0.95)


def _operator(dtype, backward):
    import numbaot
    from numbaot import _config
    X = np.random.default_rng(0).standard_normal((4, 16, 16)).astype(dtype)
    R = numbaot.sinkhorn_operator(X)
    # a batch above _config.IMPLICIT_CHECK_NUMPY_MAX entries: its value check
    # runs the counting kernel (smaller ones use NumPy)
    numbaot.sinkhorn_operator(np.zeros((_config.IMPLICIT_CHECK_NUMPY_MAX // 256 + 1, 16, 16),
                                       dtype=dtype), n_iter=1)
    if backward:
        numbaot.sinkhorn_operator_backward(R, np.ones_like(R))


#: What ``warmup`` can compile: name -> (what it covers, function of the dtype).
WARMUP_FUNCTIONS = {
    "sinkhorn": ("sinkhorn/sinkhorn2, method='sinkhorn' (one problem and paired batches)",
                 lambda dt: _sinkhorn(dt, "sinkhorn")),
    "sinkhorn_log": ("sinkhorn/sinkhorn2, method='sinkhorn_log' (one problem and paired batches)",
                     lambda dt: _sinkhorn(dt, "sinkhorn_log")),
    "sinkhorn_unbalanced": ("sinkhorn_unbalanced/sinkhorn_unbalanced2, methods 'sinkhorn' and "
                            "'sinkhorn_log'", _unbalanced),
    "barycenter": ("barycenter, methods 'sinkhorn' and 'sinkhorn_log'", _barycenter),
    "entropic_partial_wasserstein": ("partial.entropic_partial_wasserstein and "
                                     "entropic_partial_wasserstein_logscale", _partial),
    "empirical_sinkhorn": ("bregman.empirical_sinkhorn/empirical_sinkhorn2 with isLazy=True "
                           "(costs on the fly)", _empirical),
    "dist": ("dist / euclidean_distances, 'sqeuclidean' and 'euclidean' with at most 64 "
             "features (the compiled cost matrix)", _dist),
    "sinkhorn2_value_and_grad": ("sinkhorn2_value_and_grad", _value_and_grad),
    "empirical_sinkhorn2_value_and_grad": ("empirical_sinkhorn2_value_and_grad",
                                           _empirical_value_and_grad),
    "discounted_cumsum_right": ("discounted_cumsum_right and its backward",
                                lambda dt: _scan(dt, "discounted_cumsum_right")),
    "discounted_cumsum_left": ("discounted_cumsum_left and its backward",
                               lambda dt: _scan(dt, "discounted_cumsum_left")),
    "gae": ("gae", _gae),
    "sinkhorn_operator": ("sinkhorn_operator (16 x 16 matrices)",
                          lambda dt: _operator(dt, backward=False)),
    "sinkhorn_operator_backward": ("sinkhorn_operator_backward, method='implicit' "
                                   "(16 x 16 matrices)", lambda dt: _operator(dt, backward=True)),
}

_DTYPES = {"float64": np.float64, "float32": np.float32}


def _check_functions(functions):
    if functions is None:
        return list(WARMUP_FUNCTIONS)
    if isinstance(functions, str):
        functions = [functions]
    try:
        names = list(functions)
    except TypeError:
        raise TypeError("functions must be None or a list of function names, got "
                        f"{type(functions).__name__}") from None
    unknown = [f for f in names if not isinstance(f, str) or f not in WARMUP_FUNCTIONS]
    if unknown:
        raise ValueError(f"functions: unknown name(s) {unknown!r}; expected names from "
                         f"{sorted(WARMUP_FUNCTIONS)}")
    return list(dict.fromkeys(names))


def _check_dtypes(dtypes):
    if isinstance(dtypes, (str, type, np.dtype)):
        dtypes = [dtypes]
    out = []
    for d in dtypes:
        try:
            name = np.dtype(d).name
        except TypeError:
            name = None
        if name not in _DTYPES:
            raise ValueError(f"dtypes: expected 'float64' and/or 'float32', got {d!r}")
        out.append(name)
    if not out:
        raise ValueError("dtypes: expected at least one of 'float64', 'float32'")
    return list(dict.fromkeys(out))


def warmup(functions=None, dtypes=("float64", "float32"), verbose=True):
    """Compile numbaot's CPU kernels ahead of time (fill Numba's disk cache).

    Calls each public function on a tiny problem of each dtype, so that the
    kernels it needs are compiled and written to Numba's on-disk cache.  A
    later process loads them from the cache instead of compiling: run this
    once in a container build or an install script (``python -m numbaot
    warmup`` from a shell).  Where the cache is off (``NUMBAOT_CACHE=0``) it
    only warms the current process.

    Parameters
    ----------
    functions : str, list of str or None, default None
        Names from ``numbaot._warmup.WARMUP_FUNCTIONS`` (the keys of that
        dict, e.g. ``["sinkhorn", "sinkhorn_log"]``), or a single name as a
        string; duplicates are compiled once.  ``None`` compiles all of
        them.
    dtypes : str, dtype or sequence of them, default ('float64', 'float32')
        Floating-point types to compile for: 'float64' and/or 'float32', as
        names, NumPy dtypes or types (``np.float32``); a single one needs no
        sequence.
    verbose : bool, default True
        Print one progress line per (function, dtype) to standard error, with
        the seconds it took.

    Returns
    -------
    seconds : dict
        ``{(name, dtype_name): seconds}``, the wall time of each step
        (compilation, or loading from the cache when it is already filled).

    Raises
    ------
    ValueError
        If a name in ``functions`` is unknown (or not a string), a dtype is
        not float64 or float32, or ``dtypes`` is empty.
    TypeError
        If ``functions`` is neither None, a string nor an iterable of names,
        or ``dtypes`` is neither a string, a dtype or type, nor an iterable.

    Notes
    -----
    Balanced and unbalanced Sinkhorn, barycenters and entropic partial OT
    run small problems through serial kernels and larger ones through the
    blocked parallel kernels; the warm-up compiles both.  The kernels are
    specialised on dtype, dimensionality and memory layout:
    the warm-up covers C-contiguous NumPy inputs of the listed dtypes (what
    the solvers see after their own conversion of any other layout).  The
    Sinkhorn operator's kernels are also specialised on the matrix size; the
    warm-up compiles them for 16 x 16 matrices.  CUDA kernels are compiled on
    first use on the GPU and are not warmed here.

    References
    ----------
    .. [1] Numba documentation, "Cache compiled functions": ``cache=True``
       and ``NUMBA_CACHE_DIR``.

    Examples
    --------
    >>> import numbaot
    >>> seconds = numbaot.warmup(["discounted_cumsum_right"], dtypes=["float64"], verbose=False)
    >>> sorted(seconds)
    [('discounted_cumsum_right', 'float64')]
    >>> sorted(numbaot.warmup("discounted_cumsum_right", dtypes="float64", verbose=False))
    [('discounted_cumsum_right', 'float64')]
    >>> "sinkhorn_log" in numbaot._warmup.WARMUP_FUNCTIONS
    True
    """
    names = _check_functions(functions)
    dts = _check_dtypes(dtypes)
    steps = [(name, dt) for name in names for dt in dts]
    seconds = {}
    start = time.perf_counter()
    for i, (name, dt) in enumerate(steps, 1):
        if verbose:
            print(f"numbaot warmup [{i:>2}/{len(steps)}] {name} {dt} ...", end="",
                  file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            # tiny problems stopped after a few iterations: "did not converge" is expected
            warnings.simplefilter("ignore")
            WARMUP_FUNCTIONS[name][1](_DTYPES[dt])
        seconds[(name, dt)] = time.perf_counter() - t0
        if verbose:
            print(f" {seconds[(name, dt)]:.1f} s", file=sys.stderr, flush=True)
    if verbose:
        print(f"numbaot warmup: {len(steps)} steps in {time.perf_counter() - start:.1f} s",
              file=sys.stderr, flush=True)
    return seconds
