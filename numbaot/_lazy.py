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
:data:`LAZY_METRICS`, :func:`check_points` and :func:`row_marginal_l1`).
"""
import numbers
import warnings

import numpy as np

from . import _checks, _dispatch, _loops
from .cpu import empirical as cpu_empirical

__all__ = ["LAZY_METRICS", "LazyPlan", "backend", "check_batch_size", "check_points",
           "lazy_solve", "row_marginal_l1"]

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


class LazyPlan:
    """The entropic plan exp(f_i + g_j - cost(x_i, y_j) / reg), never stored:
    slicing (``plan[i0:i1, j0:j1]``, integers, slices) computes the block
    asked for, as POT's ``LazyTensor`` from ``get_sinkhorn_lazytensor``.

    Attributes
    ----------
    shape : (n_samples_a, n_samples_b)
    """

    def __init__(self, X_s, X_t, f, g, metric, reg, dtype):
        self._X = np.ascontiguousarray(X_s, dtype=np.float64)
        self._Yt = np.ascontiguousarray(np.asarray(X_t, dtype=np.float64).T)
        self._f = np.asarray(f, dtype=np.float64)
        self._g = np.asarray(g, dtype=np.float64)
        self._metric = LAZY_METRICS[metric]
        self._c = -1.0 / reg
        self._dtype = dtype
        self.shape = (self._X.shape[0], self._Yt.shape[1])
        self.ndim = 2

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key, slice(None))
        if len(key) != 2:
            raise IndexError("a LazyPlan takes two indices (rows, columns)")
        i, j = (slice(k, k + 1) if isinstance(k, numbers.Integral) else k for k in key)
        X = np.ascontiguousarray(self._X[i])
        Yt = np.ascontiguousarray(self._Yt[:, j])
        out = np.empty((X.shape[0], Yt.shape[1]))
        cpu_empirical.lazy_block(X, Yt, np.ascontiguousarray(self._f[i]),
                       np.ascontiguousarray(self._g[j]), self._c, self._metric, out)
        return out.astype(self._dtype, copy=False)


def _warm_potentials(warmstart, ns, nt):
    if warmstart is None:
        return np.zeros(ns), np.zeros(nt)
    try:
        f, g = warmstart
    except (TypeError, ValueError):
        raise ValueError("warmstart must be a pair (f, g) of log-scalings") from None
    f = _checks.as_real_array(f, "warmstart[0]").astype(np.float64).reshape(-1)
    g = _checks.as_real_array(g, "warmstart[1]").astype(np.float64).reshape(-1)
    if f.shape != (ns,) or g.shape != (nt,):
        raise ValueError(f"warmstart must have shapes ({ns},), ({nt},); got {f.shape}, {g.shape}")
    return f, g


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
    stopThr = _checks.check_real_scalar(stopThr, "stopThr")
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
    X_s = check_points(X_s, "X_s")
    X_t = check_points(X_t, "X_t")
    if X_s.shape[1] != X_t.shape[1]:
        raise ValueError(f"X_s and X_t must have the same dimension; got {X_s.shape[1]} "
                         f"and {X_t.shape[1]}")
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
    f, g = _warm_potentials(warmstart, ns, nt)
    be = backend(device)
    st = be.LazyState(Xs, Xt, log_a, log_b, f, g, -1.0 / reg, LAZY_METRICS[metric], dtype)
    errs = []
    i_ot = 0
    converged = False
    for start in range(0, numIterMax, 10):  # a test after iterations 9, 19, ... (POT's)
        stop = min(start + 10, numIterMax)
        be.lazy_steps(st, stop - start)
        i_ot = stop - 1
        if (i_ot + 1) % 10 == 0:
            f_h, lse_f = be.lazy_row_lse(st)
            err = dtype.type(row_marginal_l1(f_h, lse_f, a))
            if log:
                errs.append(err)
            if verbose and (i_ot + 1) % 100 == 0:
                print("Error in marginal at iteration {} = {}".format(i_ot + 1, err))
            if err <= stopThr:
                converged = True
                break
    if not converged and warn:
        warnings.warn(_loops.NOT_CONVERGED)
    f_out, g_out = be.lazy_outputs(st, like)
    lg = None
    if log:
        f, g = be.lazy_potentials(st)
        lg = {"err": errs, "u": f_out, "v": g_out, "niter": i_ot,
              "lazy_plan": LazyPlan(Xs, Xt, f, g, metric, reg, dtype)}
    return f_out, g_out, lg, be, st
