"""Lazy (point-cloud) Sinkhorn on either device: POT's lazy loop over the launchers.

``lazy_solve`` validates a point-cloud problem and runs POT 0.9.7's lazy
log-domain loop (``ot.bregman.empirical_sinkhorn(isLazy=True)``: a stopping
test every 10 iterations on the L1 violation of the row marginal) over
``numbaot.cpu.empirical`` or ``numbaot.cuda.empirical``, which share one
launcher contract: ``LazyState``, ``lazy_steps``, ``lazy_row_lse``,
``lazy_potentials``, ``lazy_outputs``, ``lazy_transport_cost``.  Costs are
recomputed inside the kernels from the coordinates (memory O((n + m) d)).

Shared by ``numbaot.bregman`` (the empirical calls), ``numbaot.gradients``
(point-cloud values and gradients) and ``numbaot.distributed`` (which takes
:data:`LAZY_METRICS`, :func:`check_clouds`, :func:`lazy_loop` and
:func:`row_marginal_l1`).
"""
import numbers
import warnings

import numpy as np

from . import _checks, _dispatch, _loops
from .cpu import empirical as cpu_empirical

__all__ = ["LAZY_METRICS", "LazyPlan", "backend", "check_batch_size", "check_clouds",
           "check_point_scale", "check_points", "lazy_loop", "lazy_solve", "row_marginal_l1"]

#: the costs the lazy kernels recompute, by their kernel code
LAZY_METRICS = {"sqeuclidean": 0, "euclidean": 1}


def backend(device):
    """The launcher module of the device (``"cpu"`` or ``"cuda"``)."""
    if device == "cuda":
        from .cuda import empirical
    else:
        from .cpu import empirical
    return empirical


def check_points(X, name):
    """A point cloud as a finite real array of shape (n_samples, dim), n_samples >= 1."""
    X = _checks.as_real_array(X, name)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, dim); got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one point")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf")
    return X


def check_clouds(X_s, X_t, reg, metric, names=("X_s", "X_t")):
    """The two point clouds of a lazy problem, checked: each by
    :func:`check_points`, the same dimension, and :func:`check_point_scale`.
    ``names`` name them in the errors (the distributed solver's
    ``X_s_local``).  Returns (X_s, X_t) as real arrays."""
    X_s = check_points(X_s, names[0])
    X_t = check_points(X_t, names[1])
    if X_s.shape[1] != X_t.shape[1]:
        raise ValueError(f"{names[0]} and {names[1]} must have the same dimension; got "
                         f"{X_s.shape[1]} and {X_t.shape[1]}")
    check_point_scale(X_s, X_t, reg, metric)
    return X_s, X_t


def check_point_scale(X_s, X_t, reg, metric):
    """ValueError (naming X_s, X_t and reg) when an upper bound of
    max_ij cost(x_i, y_j) / reg exceeds ``numbaot._checks.COST_SCALE_MAX``
    (2**52) or overflows: the squared distances of points at 1e200 are inf,
    and beyond 2**52 the plan exp(f + g - cost / reg) has no correct digit
    (the lazy kernels returned NaN silently).  The bound is
    (max_i |x_i - c| + max_j |y_j - c|)^p, c the centre of the bounding box
    of both clouds, p = 2 for 'sqeuclidean' (1 for 'euclidean'): at most 4
    (2) times the largest cost, from O((n_samples_a + n_samples_b) dim)
    work.  Non-finite points are refused before (:func:`check_points`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        lo = np.minimum(X_s.min(axis=0), X_t.min(axis=0)).astype(np.float64)
        hi = np.maximum(X_s.max(axis=0), X_t.max(axis=0)).astype(np.float64)
        c = lo / 2 + hi / 2
        r = (np.sqrt(np.max(np.sum((X_s - c) ** 2, axis=1)))
             + np.sqrt(np.max(np.sum((X_t - c) ** 2, axis=1))))
        bound = r * r if metric == "sqeuclidean" else r
        scale = bound / reg
    if not scale <= _checks.COST_SCALE_MAX:
        coord = np.max(np.abs(np.r_[lo, hi]), initial=0.0)
        raise ValueError(
            f"X_s, X_t and reg give costs too large for entropic OT: {metric} costs up to "
            f"about {bound:.3g} (coordinates up to {coord:.3g}) "
            f"over reg = {reg:.3g} exceed 2**52 = 4.5e15 (or overflow), so the plan "
            f"exp(f + g - cost / reg) cannot be computed in floating point; rescale the "
            f"points (e.g. X / scale for X_s and X_t) or increase reg")
    return scale


def _weights(w, n, name):
    if w is None:
        return np.full(n, 1.0 / n)
    hist, _ = _checks.check_histograms(w, name, n, "points", False, "the lazy empirical solver")
    return hist[0]


def check_batch_size(batchSize):
    """POT's check of ``batchSize`` (an integer or a pair of integers)."""
    if isinstance(batchSize, numbers.Integral) and not isinstance(batchSize, bool):
        return
    if (isinstance(batchSize, tuple) and len(batchSize) == 2
            and all(isinstance(x, numbers.Integral) for x in batchSize)):
        return
    raise ValueError("Batch size must be in integer or a tuple of two integers")


def row_marginal_l1(f, lse_f, a):
    """sum_i |exp(f_i + lse_f_i) - a_i|: POT's lazy stopping error, the L1
    violation of the row marginal (rows with f_i = -inf carry no mass)."""
    with np.errstate(invalid="ignore"):
        m1 = np.exp(f + lse_f)
    m1[np.isneginf(f)] = 0.0
    return float(np.sum(np.abs(m1 - a)))


def lazy_loop(run, error, dtype, numIterMax, stopThr, verbose, log, warn):
    """POT's lazy control flow (``ot.bregman.empirical_sinkhorn(isLazy=True)``)
    for both devices and ``numbaot.distributed``: ``run(n)`` makes n
    iterations; ``error()`` is the stopping error (:func:`row_marginal_l1`),
    tested after iterations 9, 19, ...  Returns the error list (empty
    without ``log``) and the last iteration index."""
    errs = []
    i_ot = 0
    converged = False
    for start in range(0, numIterMax, 10):
        stop = min(start + 10, numIterMax)
        run(stop - start)
        i_ot = stop - 1
        if (i_ot + 1) % 10 == 0:
            err = dtype.type(error())
            if log:
                errs.append(err)
            if verbose and (i_ot + 1) % 100 == 0:
                print("Error in marginal at iteration {} = {}".format(i_ot + 1, err))
            if err <= stopThr:
                converged = True
                break
    if not converged and warn:
        warnings.warn(_loops.NOT_CONVERGED)
    return errs, i_ot


class LazyPlan:
    """The entropic plan exp(f_i + g_j - cost(x_i, y_j) / reg), never stored:
    indexing computes the entries asked for, as POT's ``LazyTensor`` from
    ``get_sinkhorn_lazytensor``, with NumPy's semantics.

    ``plan[key]`` takes what ``np.empty(plan.shape)[key]`` takes, except
    ``None``: per axis an integer (negative counts from the end; out of range
    raises IndexError), a slice (any step, negative included), or a 1-D
    integer / boolean array (at most one axis), and ``...``; the result has
    the shape NumPy gives (an integer drops its axis: ``plan[i, j]`` is a
    scalar, ``plan[i]`` a row).  POT's LazyTensor differs: an integer keeps
    its axis (``plan[i]`` has shape (1, n_samples_b)) and a negative or
    out-of-range index gives an empty block.

    The points and potentials are copied when the plan is made (O((n + m) d)),
    so later changes to the caller's arrays do not change the plan.

    Attributes
    ----------
    shape : (n_samples_a, n_samples_b)
    ndim : 2
    """

    def __init__(self, X_s, X_t, f, g, metric, reg, dtype):
        self._X = np.array(X_s, dtype=np.float64, order="C")
        self._Yt = np.array(np.asarray(X_t, dtype=np.float64).T, order="C")
        self._f = np.array(f, dtype=np.float64)
        self._g = np.array(g, dtype=np.float64)
        self._metric = LAZY_METRICS[metric]
        self._c = -1.0 / reg
        self._dtype = dtype
        self.shape = (self._X.shape[0], self._Yt.shape[1])
        self.ndim = 2

    def _indices(self, key):
        """NumPy's reading of ``key``: per axis, the selected indices (1-D
        int64) and whether that axis is kept (False for an integer)."""
        key = key if isinstance(key, tuple) else (key,)
        if any(k is None for k in key):
            raise IndexError("a LazyPlan does not take None (np.newaxis) in an index")
        n_ell = sum(k is Ellipsis for k in key)
        if n_ell > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_ell:
            at = next(p for p, k in enumerate(key) if k is Ellipsis)
            key = key[:at] + (slice(None),) * (3 - len(key)) + key[at + 1:]
        if len(key) > 2:
            raise IndexError(f"too many indices for a LazyPlan: it is 2-dimensional, but "
                             f"{len(key)} were indexed")
        key = key + (slice(None),) * (2 - len(key))
        out = []
        for axis, (k, n) in enumerate(zip(key, self.shape)):
            if isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_)):
                k = int(k)
                if not -n <= k < n:
                    raise IndexError(f"index {k} is out of bounds for axis {axis} with size {n}")
                out.append((np.array([k % n]), False))
            elif isinstance(k, slice):
                out.append((np.arange(n)[k], True))
            else:
                arr = np.asarray(k)
                kind_ok = arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.integer)
                if arr.ndim != 1 or not (kind_ok or arr.size == 0):
                    raise IndexError("a LazyPlan takes integers, slices, '...' and 1-D integer "
                                     f"or boolean arrays; got {k!r}")
                out.append((np.arange(n)[arr.astype(np.intp) if arr.size == 0 else arr], None))
        if out[0][1] is None and out[1][1] is None:
            raise IndexError("a LazyPlan takes an array index on one axis at most")
        return out

    def __getitem__(self, key):
        (i, keep_i), (j, keep_j) = self._indices(key)
        X = np.ascontiguousarray(self._X[i])
        Yt = np.ascontiguousarray(self._Yt[:, j])
        out = np.empty((X.shape[0], Yt.shape[1]))
        cpu_empirical.lazy_block(X, Yt, np.ascontiguousarray(self._f[i]),
                                 np.ascontiguousarray(self._g[j]), self._c, self._metric, out)
        out = out.astype(self._dtype, copy=False)
        if keep_i is False and keep_j is False:
            return self._dtype.type(out[0, 0])
        if keep_i is False:
            return out[0]
        if keep_j is False:
            return out[:, 0]
        return out


def _warm_potentials(warmstart, a, b):
    """The log-scalings (f, g) to start from: zeros, or the warm start
    checked by the one rule, ``numbaot._checks.check_warmstart``."""
    if warmstart is None:
        return np.zeros(a.size), np.zeros(b.size)
    f, g = _checks.check_warmstart(warmstart, (a.size, b.size), 0, (a[None], b[None]))
    return f[0], g[0]


def lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, batchSize, verbose, log, warn,
               warmstart, device=None):
    """Validate a point-cloud problem and run POT's lazy loop, step for step.

    Arguments as ``numbaot.bregman.empirical_sinkhorn(isLazy=True)``.
    ``device`` is the device when the caller has resolved it (``"cpu"`` or
    ``"cuda"``; the weights may then be host arrays next to device points);
    by default it is that of the arrays.  Device arrays are validated on
    host copies (O((n + m) d)); the iterations run on the device.

    Returns
    -------
    f, g : the log-scalings as results (input dtype; device arrays on the GPU)
    log : POT's log dict (``err``, ``u``, ``v``, ``niter``, ``lazy_plan``), or None
    be : the launcher module that ran (``numbaot.cpu.empirical`` or ``numbaot.cuda.empirical``)
    st : its ``LazyState`` after the last iteration
    """
    reg = _checks.check_reg(reg)
    numIterMax = _checks.check_iter_count(numIterMax, "numIterMax")
    stopThr = _checks.check_stop_thr(stopThr)
    if metric not in LAZY_METRICS:
        raise ValueError(f"metric must be one of {sorted(LAZY_METRICS)} with isLazy=True; "
                         f"got {metric!r}")
    check_batch_size(batchSize)
    if device is None:
        device = _dispatch.device_of(X_s=X_s, X_t=X_t, a=a, b=b)
    like = X_s
    if device == "cuda":  # validated on host copies; the iterations run on the GPU
        _dispatch.require_cuda()
        X_s, X_t, a, b = (_dispatch.to_host(x) for x in (X_s, X_t, a, b))
    X_s, X_t = check_clouds(X_s, X_t, reg, metric)
    ns, nt = X_s.shape[0], X_t.shape[0]
    a_in = None if a is None else _checks.as_real_array(a, "a")
    b_in = None if b is None else _checks.as_real_array(b, "b")
    dtype = _checks.result_dtype(*(x for x in (a_in, b_in, X_s, X_t) if x is not None))
    a = _weights(a_in, ns, "a")
    b = _weights(b_in, nt, "b")
    Xs = np.ascontiguousarray(X_s, dtype=np.float64)
    Xt = np.ascontiguousarray(X_t, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_a, log_b = np.log(a), np.log(b)
    f, g = _warm_potentials(warmstart, a, b)
    be = backend(device)
    st = be.LazyState(Xs, Xt, log_a, log_b, f, g, -1.0 / reg, LAZY_METRICS[metric], dtype)
    errs, i_ot = lazy_loop(lambda n_steps: be.lazy_steps(st, n_steps),
                           lambda: row_marginal_l1(*be.lazy_row_lse(st), a),
                           dtype, numIterMax, stopThr, verbose, log, warn)
    f_out, g_out = be.lazy_outputs(st, like)
    lg = None
    if log:
        f, g = be.lazy_potentials(st)
        lg = {"err": errs, "u": f_out, "v": g_out, "niter": i_ot,
              "lazy_plan": LazyPlan(Xs, Xt, f, g, metric, reg, dtype)}
    return f_out, g_out, lg, be, st
