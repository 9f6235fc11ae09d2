"""Entropic OT between point clouds, drop-in for POT 0.9.7's empirical calls.

``empirical_sinkhorn``, ``empirical_sinkhorn2`` and
``empirical_sinkhorn_divergence`` mirror ``ot.bregman.empirical_sinkhorn*``
(signature, defaults, returns, log keys, warnings).  With ``isLazy=True`` the
cost between two points is recomputed inside numbaot's log-domain reduction
(``numbaot.cpu.empirical.lazy_lse``), so memory is O((n + m) d) and never
O(n m); POT builds the cost matrix block by block (``batchSize`` rows) instead.
``batchSize`` is validated as POT does but has no effect on numbaot's kernels.
With ``isLazy=False`` the cost matrix is formed with :func:`numbaot.dist` and
the problem is solved by :func:`numbaot.sinkhorn` / :func:`numbaot.sinkhorn2`.
"""
import numbers
import warnings

import numpy as np

from .. import _checks, _dispatch
from .. import _loops
from ._sinkhorn import sinkhorn, sinkhorn2
from ..cpu import empirical as _ke
from ..utils import dist

__all__ = ["empirical_sinkhorn", "empirical_sinkhorn2", "empirical_sinkhorn_divergence",
           "LazyPlan"]

LAZY_METRICS = {"sqeuclidean": 0, "euclidean": 1}


def check_points(X, name):
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
    hist, _ = _checks._histograms(w, name, n, "points", False, "the lazy empirical solver")
    return hist[0]


def _batch_size(batchSize):
    if isinstance(batchSize, numbers.Integral) and not isinstance(batchSize, bool):
        return
    if (isinstance(batchSize, tuple) and len(batchSize) == 2
            and all(isinstance(x, numbers.Integral) for x in batchSize)):
        return
    raise ValueError("Batch size must be in integer or a tuple of two integers")


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
        _ke.lazy_block(X, Yt, np.ascontiguousarray(self._f[i]),
                       np.ascontiguousarray(self._g[j]), self._c, self._metric, out)
        return out.astype(self._dtype, copy=False)


def row_marginal_l1(f, lse_f, a):
    """sum_i |exp(f_i + lse_f_i) - a_i|: POT's lazy stopping error, the L1
    violation of the row marginal (rows with f_i = -inf carry no mass)."""
    with np.errstate(invalid="ignore"):
        m1 = np.exp(f + lse_f)
    m1[np.isneginf(f)] = 0.0
    return float(np.sum(np.abs(m1 - a)))


def lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, batchSize, verbose, log, warn,
          warmstart):
    """POT's lazy loop, step for step; returns (f, g, log dict or None, state)."""
    reg = _checks.check_reg(reg)
    numIterMax = _checks.check_iter_count(numIterMax, "numIterMax")
    stopThr = _checks.check_real_scalar(stopThr, "stopThr")
    if metric not in LAZY_METRICS:
        raise ValueError(f"metric must be one of {sorted(LAZY_METRICS)} with isLazy=True; "
                         f"got {metric!r}")
    _batch_size(batchSize)
    on_dev = _dispatch.device_of(X_s=X_s, X_t=X_t, a=a, b=b) == "cuda"
    like = X_s
    if on_dev:  # validated on host copies (O((n + m) d)); the iterations run on the GPU
        _dispatch.require_cuda()
        X_s, X_t, a, b = (_dispatch.as_device_array(x).copy_to_host()
                          if _dispatch.is_device_array(x) else x for x in (X_s, X_t, a, b))
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
    if warmstart is None:
        f, g = np.zeros(ns), np.zeros(nt)
    else:
        try:
            f, g = warmstart
        except (TypeError, ValueError):
            raise ValueError("warmstart must be a pair (f, g) of log-scalings") from None
        f = _checks.as_real_array(f, "warmstart[0]").astype(np.float64).reshape(-1)
        g = _checks.as_real_array(g, "warmstart[1]").astype(np.float64).reshape(-1)
        if f.shape != (ns,) or g.shape != (nt,):
            raise ValueError(f"warmstart must have shapes ({ns},), ({nt},); got {f.shape}, {g.shape}")
    c = -1.0 / reg
    code = LAZY_METRICS[metric]
    eng = (_LazyCUDA if on_dev else _LazyCPU)(Xs, Xt, log_a, log_b, f, g, c, code, dtype)
    errs = []
    i_ot = 0
    converged = False
    for i_ot in range(numIterMax):
        eng.step()
        if (i_ot + 1) % 10 == 0:
            f_h, lse_f = eng.row_lse_for_error()
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
    f, g = eng.potentials()
    f_out, g_out = eng.outputs(like)
    lg = None
    if log:
        lg = {"err": errs, "u": f_out, "v": g_out, "niter": i_ot,
              "lazy_plan": LazyPlan(Xs, Xt, f, g, metric, reg, dtype)}
    state = dict(Xs=Xs, Xt_t=np.ascontiguousarray(Xt.T), f=f, g=g, c=c, code=code,
                 dtype=dtype, engine=eng)
    return f_out, g_out, lg, state


class _LazyCPU:
    """Lazy iterations on the CPU kernels (float64 inside)."""

    def __init__(self, Xs, Xt, log_a, log_b, f, g, c, code, dtype):
        self.Xs, self.Xt = Xs, Xt
        self.Xs_t, self.Xt_t = np.ascontiguousarray(Xs.T), np.ascontiguousarray(Xt.T)
        self.log_a, self.log_b, self.f, self.g = log_a, log_b, f, g
        self.c, self.code, self.dtype = c, code, dtype
        self.lse_f = np.empty(Xs.shape[0])
        self.lse_g = np.empty(Xt.shape[0])

    def step(self):
        _ke.lazy_lse(self.Xs, self.Xt_t, self.g, self.c, self.code, self.lse_f)
        self.f = self.log_a - self.lse_f
        _ke.lazy_lse(self.Xt, self.Xs_t, self.f, self.c, self.code, self.lse_g)
        self.g = self.log_b - self.lse_g

    def row_lse_for_error(self):
        _ke.lazy_lse(self.Xs, self.Xt_t, self.g, self.c, self.code, self.lse_f)
        return self.f, self.lse_f

    def potentials(self):
        return self.f, self.g

    def outputs(self, like):
        return self.f.astype(self.dtype), self.g.astype(self.dtype)

    def loss(self):
        return _ke.lazy_loss(self.Xs, self.Xt_t, self.f, self.g, self.c, self.code)


class _LazyCUDA:
    """Lazy iterations on the CUDA kernels (numbaot.cuda.empirical), in the
    dtype of the data; the potentials stay on the device, the host reads n
    numbers per stopping test (every 10 iterations)."""

    def __init__(self, Xs, Xt, log_a, log_b, f, g, c, code, dtype):
        from numba import cuda

        from ..cuda import empirical as cu

        def dev(x):
            return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))

        self.cu = cu
        self.Xs, self.Xt = dev(Xs), dev(Xt)
        self.Xs_t, self.Xt_t = dev(Xs.T), dev(Xt.T)
        self.log_a, self.log_b, self.f, self.g = dev(log_a), dev(log_b), dev(f), dev(g)
        self.c, self.code, self.dtype = c, code, dtype
        self.lse_f = cuda.device_array(Xs.shape[0], dtype=dtype)
        self.lse_g = cuda.device_array(Xt.shape[0], dtype=dtype)

    def step(self):
        cu = self.cu
        cu.lazy_lse(self.Xs, self.Xt_t, self.g, self.c, self.code, self.lse_f)
        cu.potential_update(self.log_a, self.lse_f, self.f)
        cu.lazy_lse(self.Xt, self.Xs_t, self.f, self.c, self.code, self.lse_g)
        cu.potential_update(self.log_b, self.lse_g, self.g)

    def row_lse_for_error(self):
        self.cu.lazy_lse(self.Xs, self.Xt_t, self.g, self.c, self.code, self.lse_f)
        return (self.f.copy_to_host().astype(np.float64),
                self.lse_f.copy_to_host().astype(np.float64))

    def potentials(self):
        return (self.f.copy_to_host().astype(np.float64),
                self.g.copy_to_host().astype(np.float64))

    def outputs(self, like):
        return _dispatch.like_input(self.f, like), _dispatch.like_input(self.g, like)

    def loss(self):
        return self.cu.lazy_loss(self.Xs, self.Xt_t, self.f, self.g, self.c, self.code)


def empirical_sinkhorn(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean", numIterMax=10000,
                       stopThr=1e-9, isLazy=False, batchSize=100, verbose=False, log=False,
                       warn=True, warmstart=None, **kwargs):
    r"""Entropic OT between two point clouds; mirrors ``ot.bregman.empirical_sinkhorn``.

    Solves min_gamma <gamma, M>_F + reg * sum gamma log gamma under
    gamma 1 = a, gamma^T 1 = b, with M_ij = cost(x_i, y_j) (Cuturi 2013).
    With ``isLazy=True`` the log-domain iterations (Peyre & Cuturi 2019,
    Remark 4.23) recompute every cost inside the reduction: memory
    O((n_samples_a + n_samples_b) dim), never an (n_samples_a, n_samples_b)
    matrix; the result is the pair of log-scalings (f, g).

    Parameters
    ----------
    X_s : array-like, shape (n_samples_a, dim), float
        Source points.
    X_t : array-like, shape (n_samples_b, dim), float
        Target points (same dim).
    reg : float
        Entropic regularisation (> 0), in units of the cost.
    a, b : array-like, shapes (n_samples_a,), (n_samples_b,), optional
        Point weights (non-negative, positive mass); None = uniform.
    metric : str, default 'sqeuclidean'
        Cost: with ``isLazy=True`` 'sqeuclidean' or 'euclidean'; otherwise
        any metric of :func:`numbaot.dist`.
    numIterMax : int, default 10000
        Maximum number of iterations.
    stopThr : float, default 1e-9
        Lazy: stop when sum_i |(gamma 1)_i - a_i| <= stopThr, checked every
        10 iterations (POT's rule); otherwise as :func:`numbaot.sinkhorn`.
    isLazy : bool, default False
        Costs on the fly (see above).
    batchSize : int or tuple of two ints, default 100
        Validated as in POT; numbaot's lazy kernels need no batches.
    verbose, log, warn, warmstart, **kwargs
        As POT: lazy ``warmstart`` = (f, g) log-scalings; ``**kwargs`` go to
        :func:`numbaot.sinkhorn` when ``isLazy=False``.

    Returns
    -------
    isLazy=True: f, g : ndarray (n_samples_a,), (n_samples_b,), input dtype
        Log-scalings (dual potentials / reg); the plan is exp(f_i + g_j - M_ij / reg).
        With ``log``: also a dict with 'err' (marginal errors at checks),
        'u' (= f), 'v' (= g), 'niter', 'lazy_plan' (a :class:`LazyPlan`,
        sliceable like POT's LazyTensor).
    isLazy=False: gamma : ndarray (n_samples_a, n_samples_b) (and the log of
        :func:`numbaot.sinkhorn`).

    Raises
    ------
    TypeError
        Non-numeric inputs.
    ValueError
        reg <= 0; points not 2-D, empty, of different dim or not finite;
        bad weights; unknown lazy metric; malformed batchSize or warmstart.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``).
    """
    if isLazy:
        f, g, lg, _ = lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, batchSize,
                            verbose, log, warn, warmstart)
        return (f, g, lg) if log else (f, g)
    M = dist(X_s, X_t, metric=metric)
    if a is None:
        a = np.full(M.shape[0], 1.0 / M.shape[0], dtype=M.dtype)
    if b is None:
        b = np.full(M.shape[1], 1.0 / M.shape[1], dtype=M.dtype)
    return sinkhorn(a, b, M, reg, numItermax=numIterMax, stopThr=stopThr, verbose=verbose,
                    log=log, warmstart=warmstart, **kwargs)


def empirical_sinkhorn2(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean", numIterMax=10000,
                        stopThr=1e-9, isLazy=False, batchSize=100, verbose=False, log=False,
                        warn=True, warmstart=None, **kwargs):
    r"""Transport cost <gamma, M>_F of the entropic plan between two point
    clouds (without the entropic term); mirrors ``ot.bregman.empirical_sinkhorn2``.

    Parameters are those of :func:`empirical_sinkhorn`.  With ``isLazy=True``
    the cost is reduced on the fly after the iterations (no (n, m) matrix).

    Returns
    -------
    W : float (input dtype), or for 2-D ``b`` with ``isLazy=False`` an ndarray (n_hists,)
    log : dict, only if ``log=True`` (that of :func:`empirical_sinkhorn` or
        :func:`numbaot.sinkhorn2`).

    Raises
    ------
    TypeError, ValueError
        As :func:`empirical_sinkhorn`.
    """
    if isLazy:
        _, _, lg, st = lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, batchSize,
                             verbose, log, warn, warmstart)
        loss = st["dtype"].type(st["engine"].loss())
        return (loss, lg) if log else loss
    M = dist(X_s, X_t, metric=metric)
    if a is None:
        a = np.full(M.shape[0], 1.0 / M.shape[0], dtype=M.dtype)
    if b is None:
        b = np.full(M.shape[1], 1.0 / M.shape[1], dtype=M.dtype)
    return sinkhorn2(a, b, M, reg, numItermax=numIterMax, stopThr=stopThr, verbose=verbose,
                     log=log, warn=warn, warmstart=warmstart, **kwargs)


def empirical_sinkhorn_divergence(X_s, X_t, reg, a=None, b=None, metric="sqeuclidean",
                                  numIterMax=10000, stopThr=1e-9, verbose=False, log=False,
                                  warn=True, warmstart=None, **kwargs):
    r"""Sinkhorn divergence between point clouds as POT 0.9.7 computes it:
    max(0, W_ab - (W_aa + W_bb) / 2) with W the transport costs of
    :func:`empirical_sinkhorn2` (Genevay, Peyre & Cuturi 2018, eq. 2, without
    the entropic terms, as ``ot.bregman.empirical_sinkhorn_divergence``).

    Parameters
    ----------
    X_s, X_t, reg, a, b, metric, numIterMax, stopThr, verbose, log, warn, **kwargs
        As :func:`empirical_sinkhorn2` (``isLazy`` may be passed in kwargs).
    warmstart : pair (u, v), optional
        As POT: (u, v) for the cross term, (u, u) and (v, v) for the others.

    Returns
    -------
    S : float, >= 0
    log : dict, only if ``log=True``: 'sinkhorn_loss_ab', 'sinkhorn_loss_a',
        'sinkhorn_loss_b', 'log_sinkhorn_ab', 'log_sinkhorn_a', 'log_sinkhorn_b'.

    Raises
    ------
    TypeError, ValueError
        As :func:`empirical_sinkhorn2`.
    """
    if warmstart is None:
        warmstart_a, warmstart_b = None, None
    else:
        u, v = warmstart
        warmstart_a, warmstart_b = (u, u), (v, v)
    kw = dict(metric=metric, numIterMax=numIterMax, stopThr=stopThr, verbose=verbose, log=log,
              warn=warn, **kwargs)
    r_ab = empirical_sinkhorn2(X_s, X_t, reg, a, b, warmstart=warmstart, **kw)
    r_a = empirical_sinkhorn2(X_s, X_s, reg, a, a, warmstart=warmstart_a, **kw)
    r_b = empirical_sinkhorn2(X_t, X_t, reg, b, b, warmstart=warmstart_b, **kw)
    if not log:
        return np.maximum(0, r_ab - 0.5 * (r_a + r_b))
    div = np.maximum(0, r_ab[0] - 0.5 * (r_a[0] + r_b[0]))
    lg = {"sinkhorn_loss_ab": r_ab[0], "sinkhorn_loss_a": r_a[0], "sinkhorn_loss_b": r_b[0],
          "log_sinkhorn_ab": r_ab[1], "log_sinkhorn_a": r_a[1], "log_sinkhorn_b": r_b[1]}
    return div, lg
