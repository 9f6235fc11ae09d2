"""Lazy (point-cloud) Sinkhorn on either device: POT's lazy loop over the launchers.

``lazy_solve`` validates a point-cloud problem and runs POT 0.9.7's lazy
log-domain loop (``ot.bregman.empirical_sinkhorn(isLazy=True)``: a stopping
test every 10 iterations on the L1 violation of the row marginal) over
``numbaot.cpu.empirical`` or ``numbaot.cuda.empirical``, which share one
launcher contract: ``LazyState``, ``lazy_steps``, ``lazy_row_lse``,
``lazy_potentials``, ``lazy_outputs``, ``lazy_transport_cost``.  Costs are
recomputed inside the kernels from the coordinates (memory O((n + m) d)).

With ``scaling`` (epsilon scaling, :func:`lazy_anneal`), the iterations at
the target reg are preceded by one annealing stage per temperature of the
schedule :func:`eps_schedule` (from the diameter of the data down to reg),
each warm-started from the previous stage's dual potentials, on the same
launchers.  With ``multiscale`` (:func:`multiscale_anneal`, GeomLoss's
coarse-to-fine scheme) the stages hotter than the voxel scale run on the
voxel centroids of both clouds, and the half-steps on the points skip the
voxel pairs that bounds rule out (kernel truncation, within
``_config.LAZY_TRUNCATION_TOL``).

Shared by ``numbaot.bregman`` (the empirical calls), ``numbaot.gradients``
(point-cloud values and gradients) and ``numbaot.distributed`` (which takes
:data:`LAZY_METRICS`, :func:`check_clouds`, :func:`lazy_loop` and
:func:`row_marginal_l1`).
"""
import numbers
import warnings

import numpy as np

from . import _checks, _config, _dispatch, _loops
from ._config import EPS_SCALING_STAGE_ITERS, MULTISCALE_CLUSTERS
from .cpu import empirical as cpu_empirical

__all__ = ["LAZY_METRICS", "LazyIndexError", "LazyPlan", "backend", "check_batch_size",
           "check_clouds", "check_point_scale", "check_points", "check_scaling", "cluster_scale",
           "eps_schedule", "lazy_anneal", "lazy_loop", "lazy_setup", "lazy_solve", "max_diameter",
           "multiscale_anneal", "rescaled", "row_marginal_l1", "set_temperature",
           "truncation_clusters", "voxel_clusters"]

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
    hist, _ = _checks.check_histograms(w, name, n, "points", False, "the lazy empirical solver",
                                       owner="X_s" if name == "a" else "X_t")
    return hist[0]


def check_batch_size(batchSize):
    """POT's check of ``batchSize`` (an integer or a pair of integers, with
    its message), and each at least 1 (POT's loops over range(0, n,
    batchSize) fail on 0 and skip every row below)."""
    if isinstance(batchSize, numbers.Integral) and not isinstance(batchSize, bool):
        sizes = (batchSize,)
    elif (isinstance(batchSize, tuple) and len(batchSize) == 2
            and all(isinstance(x, numbers.Integral) for x in batchSize)):
        sizes = batchSize
    else:
        raise ValueError("Batch size must be in integer or a tuple of two integers")
    if min(sizes) < 1:
        raise ValueError(f"batchSize must be >= 1 (each of a pair); got {batchSize!r}")


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


def check_scaling(scaling, name="scaling"):
    """The epsilon-scaling factor as a float in the open interval (0, 1):
    ValueError naming ``name`` otherwise (1 would never reach the target,
    0 or less is no schedule)."""
    val = _checks.check_real_scalar(scaling, name)
    if not (0.0 < val < 1.0):
        raise ValueError(f"{name} must be a number in the open interval (0, 1) (the factor "
                         f"by which eps shrinks at each annealing stage); got {scaling!r}")
    return val


def max_diameter(X_s, X_t):
    """GeomLoss's diameter of a pair of point clouds (``max_diameter``): the
    length of the diagonal of the bounding box of both, an upper bound of
    every distance |x_i - y_j| (float, host arrays)."""
    lo = np.minimum(X_s.min(axis=0), X_t.min(axis=0)).astype(np.float64)
    hi = np.maximum(X_s.max(axis=0), X_t.max(axis=0)).astype(np.float64)
    return float(np.sqrt(np.sum((hi - lo) ** 2)))


def eps_schedule(eps_0, reg, scaling):
    """The annealing temperatures above the target: eps_k = eps_0 scaling**k
    for k = 0, 1, ... while eps_k > reg (empty when eps_0 <= reg).  The
    iterations at reg itself follow (GeomLoss's ``annealing_parameters``
    floors the same geometric sequence at reg; Feydy 2020, sec. 3.3.3)."""
    if not eps_0 > reg:
        return []
    n = int(np.floor(np.log(reg / eps_0) / np.log(scaling))) + 1
    eps = eps_0 * scaling ** np.arange(n + 1)
    return [float(e) for e in eps if e > reg]


def rescaled(x, log_w, ratio):
    """log w + ratio (x - log w), -inf where w = 0 (host float64)."""
    x = np.asarray(_dispatch.to_host(x), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(log_w), -np.inf, log_w + ratio * (x - log_w))


def _store(st, name, x):
    """Set the state's ``f`` or ``g`` to host float64 ``x`` (copied into the
    device array on the GPU, in its dtype)."""
    cur = getattr(st, name)
    if _dispatch.is_device_array(cur):
        cur.copy_to_device(np.ascontiguousarray(x, dtype=cur.dtype))
    else:
        setattr(st, name, x)


def set_temperature(st, log_a, log_b, eps, eps_new):
    """Move the state from temperature eps (st.c = -1 / eps) to eps_new keeping
    the dual potentials F = eps (f - log a), G = eps (g - log b) (the
    potentials, not the log-scalings, carry across temperatures: Feydy 2020,
    sec. 3.3.3): f <- log a + (eps / eps_new) (f - log a), the same for g,
    -inf at zero weights, and st.c = -1 / eps_new.  O(n + m) host work (and
    copies on the GPU)."""
    ratio = eps / eps_new
    _store(st, "f", rescaled(st.f, log_a, ratio))
    _store(st, "g", rescaled(st.g, log_b, ratio))
    st.c = -1.0 / eps_new


def lazy_anneal(be, st, log_a, log_b, schedule, reg, stage_iters=None):
    """Epsilon scaling on the launchers of ``be``: ``stage_iters``
    iterations (default ``_config.EPS_SCALING_STAGE_ITERS``) at each
    temperature of ``schedule`` (non-empty, decreasing, all > reg; the
    state's f, g are taken at ``schedule[0]``), each stage warm-started from
    the previous one's potentials (:func:`set_temperature`); the state is
    then moved to the target ``reg``.  Returns the number of iterations made,
    ``len(schedule) * stage_iters`` (Schmitzer 2019, sec. 3.2; Feydy 2020,
    Alg. 3.5)."""
    stage_iters = EPS_SCALING_STAGE_ITERS if stage_iters is None else stage_iters
    eps_now = schedule[0]
    st.c = -1.0 / eps_now
    for eps in schedule:
        if eps != eps_now:
            set_temperature(st, log_a, log_b, eps_now, eps)
            eps_now = eps
        be.lazy_steps(st, stage_iters)
    set_temperature(st, log_a, log_b, eps_now, reg)
    return len(schedule) * stage_iters


def cluster_scale(Xs, Xt):
    """GeomLoss's default voxel side of the multiscale scheme: diameter /
    (sqrt(d) MULTISCALE_CLUSTERS ** (1 / d)), ``_config.MULTISCALE_CLUSTERS``
    voxels in the bounding box of both clouds (d: the point dimension)."""
    d = Xs.shape[1]
    return max_diameter(Xs, Xt) / (np.sqrt(d) * MULTISCALE_CLUSTERS ** (1.0 / d))


def _voxel_labels(X, h):
    """The voxel of each point of X (n, d) float64 for voxels of side h > 0
    (point i in voxel floor(X_i / h)): labels (n,) int64 numbering the
    occupied voxels 0, 1, ... in lexicographic order of their integer
    coordinates."""
    cells = np.floor(X / h)
    cells -= cells.min(axis=0)
    extent = cells.max(axis=0) + 1.0
    if np.prod(extent) < 2.0 ** 62:  # one int64 key per voxel (C order = lexicographic)
        key = np.ravel_multi_index(tuple(cells.T.astype(np.int64)), extent.astype(np.int64))
        _, label = np.unique(key, return_inverse=True)
    else:  # too many voxels in the bounding box for one key: rows as keys (slower)
        _, label = np.unique(cells, axis=0, return_inverse=True)
    return label.ravel().astype(np.int64)


def voxel_clusters(X, w, h):
    """The clouds' coarse version: X (n >= 1, d) float64 with weights w (n,) >= 0,
    grouped by voxels of side h > 0 (point i in voxel floor(X_i / h)).
    Returns the weighted centroids (k, d) and masses (k,) of the k voxels of
    positive mass (a voxel of zero mass has no part in the coarse problem),
    float64, voxels in lexicographic order of their integer coordinates."""
    label = _voxel_labels(X, h)
    mass = np.bincount(label, weights=w)
    keep = mass > 0
    centroid = np.empty((mass.size, X.shape[1]))
    for k in range(X.shape[1]):
        centroid[:, k] = np.bincount(label, weights=w * X[:, k], minlength=mass.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        centroid /= mass[:, None]
    return np.ascontiguousarray(centroid[keep]), mass[keep]


class Clusters:
    """A cloud cut into voxels for kernel truncation
    (:func:`truncation_clusters`).

    Attributes
    ----------
    perm : ndarray (n,), int64
        The points in voxel order: voxel k holds the points
        ``perm[ptr[k]:ptr[k + 1]]``.
    ptr : ndarray (k + 1,), int64
        Voxel boundaries in that order.
    center : ndarray (k, d), float64
        Each voxel's mean point.
    radius : ndarray (k,), float64
        The largest distance from a voxel's centre to its points (rounded up
        by a relative 1e-12, so that the bounds built on it hold in floating
        point).
    label : ndarray (n,), int64
        The voxel of each point in voxel order (``label[ptr[k]:ptr[k + 1]] == k``).
    """


def truncation_clusters(X, points=None):
    """Cut the cloud X (n >= 1, d) float64 into voxels of about ``points``
    points each (default ``_config.LAZY_TRUNCATION_CLUSTER_POINTS``): the
    side h is chosen for n / points voxels in the bounding box, then
    rescaled once by the occupancy found (a cloud on a surface fills fewer
    voxels than its box).  Returns :class:`Clusters`."""
    points = _config.LAZY_TRUNCATION_CLUSTER_POINTS if points is None else points
    n, d = X.shape
    span = np.maximum(X.max(axis=0) - X.min(axis=0), 0.0)
    diam = float(np.sqrt(np.sum(span ** 2)))
    target = max(1.0, n / points)
    if diam == 0.0 or target <= 1.0:
        label = np.zeros(n, np.int64)
    else:
        vol = float(np.prod(np.maximum(span, diam * 1e-3)))
        h = (vol / target) ** (1.0 / d)
        label = _voxel_labels(X, h)
        found = label.max() + 1
        if found < 0.5 * target or found > 2.0 * target:  # one rescale by the occupancy
            h *= (found / target) ** (1.0 / d)
            label = _voxel_labels(X, h)
    cl = Clusters()
    cl.perm = np.argsort(label, kind="stable").astype(np.int64)
    counts = np.bincount(label)
    cl.ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    cl.label = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    P = X[cl.perm]
    cl.center = np.empty((counts.size, d))
    for k in range(d):
        cl.center[:, k] = np.bincount(cl.label, weights=P[:, k]) / counts
    dist = np.sqrt(np.sum((P - cl.center[cl.label]) ** 2, axis=1))
    cl.radius = np.zeros(counts.size)
    np.maximum.at(cl.radius, cl.label, dist)
    cl.radius = cl.radius * (1.0 + 1e-12) + 1e-300
    return cl


def _soft_c_transform(be, pb, Ys, Yt, log_w, h, eps):
    """log_w - LSE_j (h_j - cost(y_i, t_j) / eps) for the points Ys (n, d)
    against the points Yt (k, d) with log-scalings h (k,): one half-step of
    Sinkhorn onto another cloud (the coarse dual potentials extrapolated to
    the fine points, as GeomLoss does; Feydy 2020, ch. 3), on the launchers
    of ``be``;
    -inf at zero weights.  Host float64 (n,)."""
    st = be.LazyState(Ys, Yt, log_w, np.zeros(Yt.shape[0]), np.zeros(Ys.shape[0]), h,
                      -1.0 / eps, LAZY_METRICS[pb.metric], pb.dtype)
    lse = np.asarray(_dispatch.to_host(be.lazy_row_lse(st)[1]), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(log_w), -np.inf, log_w - lse)


def multiscale_anneal(pb, stage_iters=None, truncate=True):
    """GeomLoss's multiscale epsilon scaling (Schmitzer 2019; Feydy 2020,
    ch. 3) on the problem ``pb`` (:func:`lazy_setup` with
    ``scaling``): both clouds grouped by voxels of side h =
    :func:`cluster_scale`; the temperatures of ``pb.schedule`` above h**p
    (p = 2 for 'sqeuclidean', 1 for 'euclidean') run on the voxel centroids
    with the voxels' masses; then the coarse log-scalings are extrapolated to
    the points by one soft c-transform each way (:func:`_soft_c_transform`,
    at the first temperature at or below h**p) and the remaining stages run
    on the points (:func:`lazy_anneal`), which leaves ``pb.st`` at reg.

    With ``truncate`` (the default) and at least
    ``_config.LAZY_TRUNCATION_MIN_PAIRS`` point pairs, kernel truncation is on for every
    half-step on the points from then on, the iterations at reg included
    (the launchers' ``lazy_truncate`` on :func:`truncation_clusters` of both
    clouds): a half-step skips the voxel pairs whose terms bounds place below
    ``log(m / _config.LAZY_TRUNCATION_TOL)`` under the row's largest, so
    every logsumexp is within ``LAZY_TRUNCATION_TOL`` (1e-10) of the
    untruncated one (Schmitzer 2019, sec. 3.3, with bounds instead of the
    coarse plan: the truncation is exact to that tolerance, not a heuristic).
    It pays at small eps (measured per iteration on bench_eps_scaling's
    clouds: 3.0x at eps 2e-3 and 4.0x at 5e-4 on 2 10^4 points, 5.7x at
    1e-3 on 10^5; BENCHMARKS.md); a half-step that would keep most pairs
    runs untruncated (``_config.LAZY_TRUNCATION_MAX_KEPT``).

    Returns (iterations on the centroids, iterations on the points, (k_a,
    k_b) voxels of positive mass)."""
    stage_iters = EPS_SCALING_STAGE_ITERS if stage_iters is None else stage_iters
    p = 2 if pb.metric == "sqeuclidean" else 1
    h = cluster_scale(pb.Xs, pb.Xt)
    coarse = [e for e in pb.schedule if e > h ** p]
    fine = [e for e in pb.schedule if e <= h ** p]
    be, st = pb.be, pb.st
    if truncate and pb.Xs.shape[0] * pb.Xt.shape[0] >= _config.LAZY_TRUNCATION_MIN_PAIRS:
        be.lazy_truncate(st, truncation_clusters(pb.Xs), truncation_clusters(pb.Xt))
    if not coarse:  # the voxels are as coarse as the hottest temperature: no coarse stage
        return 0, lazy_anneal(be, st, pb.log_a, pb.log_b, fine, pb.reg, stage_iters), (0, 0)
    Xc, A = voxel_clusters(pb.Xs, pb.a, h)
    Yc, B = voxel_clusters(pb.Xt, pb.b, h)
    log_A, log_B = np.log(A), np.log(B)
    eps_f = fine[0] if fine else pb.reg
    cst = be.LazyState(Xc, Yc, log_A, log_B, np.zeros(A.size), np.zeros(B.size),
                       -1.0 / coarse[0], LAZY_METRICS[pb.metric], pb.dtype)
    n_coarse = lazy_anneal(be, cst, log_A, log_B, coarse, eps_f, stage_iters)
    fc, gc = (np.asarray(_dispatch.to_host(x), dtype=np.float64)
              for x in be.lazy_potentials(cst))
    _store(st, "f", _soft_c_transform(be, pb, pb.Xs, Yc, pb.log_a, gc, eps_f))
    _store(st, "g", _soft_c_transform(be, pb, pb.Xt, Xc, pb.log_b, fc, eps_f))
    st.c = -1.0 / eps_f
    n_fine = lazy_anneal(be, st, pb.log_a, pb.log_b, fine, pb.reg, stage_iters) if fine else 0
    return n_coarse, n_fine, (A.size, B.size)


#: POT's message for a key that is not an integer, a slice or a tuple
_POT_KEY_MESSAGE = "Only integer, slice, and tuple indexing is supported"


class LazyIndexError(IndexError, TypeError):
    """More than two indices for a :class:`LazyPlan` (an ``IndexError`` as in
    NumPy, and a ``TypeError`` as POT's ``LazyTensor`` raises)."""


class LazyPlan:
    """The entropic plan exp(f_i + g_j - cost(x_i, y_j) / reg), never stored:
    indexing computes the block asked for; mirrors POT 0.9.7's ``LazyTensor``
    from ``ot.bregman.get_sinkhorn_lazytensor``.

    Indexing follows POT: ``plan[key]`` is always a 2-D block, one axis of the
    result per axis of the plan.  ``key`` is a tuple of at most two per-axis
    indices (missing ones are ``:``), or one index for the first axis.  Per
    axis:

    * an integer ``k`` keeps its axis, as the slice ``k:k + 1`` (POT's
      reading): ``plan[1]`` has shape (1, n_samples_b), ``plan[:, 2]``
      (n_samples_a, 1), ``plan[2, 3]`` (1, 1).  A negative ``k`` counts from
      the end (``plan[-1]`` is the last row) and an out-of-range one raises
      ``IndexError``, as NumPy; there POT's ``LazyTensor`` gives an empty
      block (its ``-1:0`` slice, or a slice past the end);
    * a slice, as NumPy (any step, negative included; an empty block when
      it selects nothing);
    * ``...``: the whole axis (as POT, in any position of the tuple);
    * a 1-D integer or boolean array or list: those rows (columns), as
      NumPy's index arrays (negative entries count from the end, out of
      range raises ``IndexError``); arrays on both axes select the block of
      their outer product (``np.ix_``), as POT.

    numbaot's extension: a key that is not a tuple is read as ``(key,)`` for
    NumPy integers, ``...``, lists and arrays too, where POT raises
    ``NotImplementedError`` (it takes a Python ``int`` or a slice alone);
    keys of other types (``None``, a float, a string alone) raise
    ``NotImplementedError`` with POT's message.  Inside a tuple, ``None``
    (np.newaxis), floats and arrays of other dimensions raise
    ``IndexError``; more than two indices :class:`LazyIndexError` (an
    ``IndexError`` and a ``TypeError``).

    The block has the result dtype of the solve (float32 for float32 inputs;
    a NumPy array, also for device inputs).  The points and potentials are
    copied (to host float64) when the plan is made (O((n + m) d)), so later
    changes to the caller's arrays do not change the plan (POT's reads
    them at each index).

    Parameters
    ----------
    X_s : array-like, shape (n_samples_a, dim)
        Source points (host or device array).
    X_t : array-like, shape (n_samples_b, dim)
        Target points.
    f : array-like, shape (n_samples_a,)
        First log-scaling (dual potential / reg).
    g : array-like, shape (n_samples_b,)
        Second log-scaling.
    metric : str
        'sqeuclidean' or 'euclidean'.
    reg : float
        Regularization (> 0).
    dtype : numpy.dtype
        dtype of the blocks.
    attributes : dict, optional
        Values of POT's attributes ``X_a``, ``X_b``, ``f``, ``g``, ``reg`` to
        expose instead of the arguments (the solvers pass the caller's
        points and the returned log-scalings, as POT).

    Attributes
    ----------
    shape : tuple (n_samples_a, n_samples_b)
    ndim : int
        2.
    X_a, X_b, f, g, metric, reg
        POT's keyword attributes: the points, log-scalings, cost name and
        regularization the plan is made from (for the solvers: the caller's
        ``X_s``, ``X_t`` (lists as arrays), ``log['u']``, ``log['v']``,
        ``metric``, ``reg``).  Changing them does not change the plan.
    kwargs : dict
        The same six, by name (POT's ``kwargs``).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X = np.array([[0.0], [1.0]])
    >>> plan = numbaot.solve_sample(X, X, reg=0.1, lazy=True).lazy_plan
    >>> plan
    LazyTensor(shape=(2, 2),attributes=(X_a,X_b,f,g,metric,reg))
    >>> plan[1].shape, plan[:, 0].shape, plan[1, 1].shape, plan[-1].shape
    ((1, 2), (2, 1), (1, 1), (1, 2))
    >>> print(np.round(plan[:], 3))
    [[0.5 0. ]
     [0.  0.5]]
    """

    #: the class name in ``repr`` (this one and ``OTResult``'s), POT's
    _pot_class_name = "LazyTensor"

    def __init__(self, X_s, X_t, f, g, metric, reg, dtype, attributes=None):
        self._X = np.array(_dispatch.to_host(X_s), dtype=np.float64, order="C")
        self._Yt = np.array(np.asarray(_dispatch.to_host(X_t), dtype=np.float64).T, order="C")
        self._f = np.array(_dispatch.to_host(f), dtype=np.float64)
        self._g = np.array(_dispatch.to_host(g), dtype=np.float64)
        self._metric = LAZY_METRICS[metric]
        self._c = -1.0 / float(reg)
        self._dtype = np.dtype(dtype)
        self.shape = (self._X.shape[0], self._Yt.shape[1])
        self.ndim = len(self.shape)
        self.kwargs = dict(X_a=X_s, X_b=X_t, f=f, g=g, metric=metric, reg=reg)
        unknown = set(attributes or ()) - set(self.kwargs)
        if unknown:
            raise ValueError(f"unknown LazyPlan attributes {sorted(unknown)}")
        self.kwargs.update(attributes or {})
        for name, value in self.kwargs.items():
            setattr(self, name, value)

    def __repr__(self):
        return "{}(shape={},attributes=({}))".format(self._pot_class_name, self.shape,
                                                     ",".join(self.kwargs))

    def _axis(self, k, axis):
        """The rows (axis 0) or columns (axis 1) that the index ``k`` selects (1-D int)."""
        n = self.shape[axis]
        if isinstance(k, numbers.Integral):  # int, bool, NumPy integers: POT's k:k + 1
            k = int(k)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {axis} with size {n}")
            return np.array([k % n])
        if isinstance(k, slice):  # no arange(n) per row or column read
            return np.arange(*k.indices(n))
        if k is Ellipsis:
            return np.arange(n)
        if k is None:
            raise IndexError("a LazyPlan does not take None (np.newaxis) in an index")
        arr = np.asarray(k)
        if arr.ndim != 1:
            raise IndexError("a LazyPlan takes per axis an integer, a slice, '...' or a 1-D "
                             f"integer or boolean array; got {k!r}")
        if arr.size == 0:
            arr = arr.astype(np.intp)
        elif not (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.integer)):
            raise IndexError(f"arrays used as indices must be of integer (or boolean) type; "
                             f"got {arr.dtype} for axis {axis}")
        return np.arange(n)[arr]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            keys = key
        elif (isinstance(key, (numbers.Integral, slice, list, np.ndarray))
              or key is Ellipsis):
            keys = (key,)
        else:
            raise NotImplementedError(_POT_KEY_MESSAGE)
        if len(keys) > self.ndim:
            raise LazyIndexError(f"too many indices for a LazyPlan: it is 2-dimensional, but "
                                 f"{len(keys)} were indexed")
        keys = keys + (slice(None),) * (self.ndim - len(keys))
        i, j = self._axis(keys[0], 0), self._axis(keys[1], 1)
        X = np.ascontiguousarray(self._X[i])
        Yt = np.ascontiguousarray(self._Yt[:, j])
        out = np.empty((X.shape[0], Yt.shape[1]))
        cpu_empirical.lazy_block(X, Yt, np.ascontiguousarray(self._f[i]),
                                 np.ascontiguousarray(self._g[j]), self._c, self._metric, out)
        return out.astype(self._dtype, copy=False)


def _as_array(x):
    """POT's ``list_to_array``: a list as a NumPy array, anything else unchanged."""
    return np.array(x) if isinstance(x, list) else x


def _warm_potentials(warmstart, a, b):
    """The log-scalings (f, g) to start from: zeros, or the warm start
    checked by the one rule, ``numbaot._checks.check_warmstart``."""
    if warmstart is None:
        return np.zeros(a.size), np.zeros(b.size)
    f, g = _checks.check_warmstart(warmstart, (a.size, b.size), 0, (a[None], b[None]))
    return f[0], g[0]


class LazyProblem:
    """A validated point-cloud problem and its launcher state, made by
    :func:`lazy_setup`.

    Attributes
    ----------
    be : the launcher module (``numbaot.cpu.empirical`` or ``numbaot.cuda.empirical``)
    st : its ``LazyState`` (at temperature ``-1 / st.c``)
    a, b : host float64 weights (n,), (m,); log_a, log_b their logs (-inf at zeros)
    Xs, Xt : host float64 points (n, d), (m, d), C order
    reg, metric, dtype, like : target reg, cost name, result dtype, the caller's X_s
    schedule : the annealing temperatures (empty without ``scaling``)
    """


def lazy_setup(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, batchSize, warmstart,
               device=None, scaling=None):
    """Validate a point-cloud problem (arguments as :func:`lazy_solve`) and
    make its launcher state, at the first annealing temperature with
    ``scaling`` (and no ``warmstart``), else at ``reg``.  Returns
    (:class:`LazyProblem`, numIterMax, stopThr)."""
    reg = _checks.check_reg(reg)
    numIterMax = _checks.check_iter_count(numIterMax, "numIterMax")
    stopThr = _checks.check_stop_thr(stopThr)
    if metric not in LAZY_METRICS:
        raise ValueError(f"metric must be one of {sorted(LAZY_METRICS)} with isLazy=True; "
                         f"got {metric!r}")
    check_batch_size(batchSize)
    if scaling is not None:
        scaling = check_scaling(scaling)
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
    # balanced OT needs sum a = sum b, as the dense solvers check
    # (POT's lazy loop runs anyway and warns that it did not converge)
    _checks.check_equal_mass([a.sum()], [b.sum()], _checks.mass_tolerance(
        *(x.dtype for x in (a_in, b_in) if x is not None)))
    Xs = np.ascontiguousarray(X_s, dtype=np.float64)
    Xt = np.ascontiguousarray(X_t, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_a, log_b = np.log(a), np.log(b)
    f, g = _warm_potentials(warmstart, a, b)
    schedule = []
    if scaling is not None and warmstart is None:
        schedule = eps_schedule(max_diameter(Xs, Xt) ** (2 if metric == "sqeuclidean" else 1),
                                reg, scaling)
    pb = LazyProblem()
    pb.be = backend(device)
    c0 = -1.0 / (schedule[0] if schedule else reg)
    pb.st = pb.be.LazyState(Xs, Xt, log_a, log_b, f, g, c0, LAZY_METRICS[metric], dtype)
    pb.a, pb.b, pb.log_a, pb.log_b, pb.Xs, pb.Xt = a, b, log_a, log_b, Xs, Xt
    pb.reg, pb.metric, pb.dtype, pb.like, pb.schedule = reg, metric, dtype, like, schedule
    return pb, numIterMax, stopThr


def lazy_solve(X_s, X_t, reg, a, b, metric, numIterMax, stopThr, batchSize, verbose, log, warn,
               warmstart, device=None, scaling=None, problem=False, multiscale=False):
    """Validate a point-cloud problem and run POT's lazy loop, step for step.

    Arguments as ``numbaot.bregman.empirical_sinkhorn(isLazy=True)``.
    ``device`` is the device when the caller has resolved it (``"cpu"`` or
    ``"cuda"``; the weights may then be host arrays next to device points);
    by default it is that of the arrays.  Device arrays are validated on
    host copies (O((n + m) d)); the iterations run on the device.

    ``scaling`` (numbaot's, None by default: POT's iterates exactly), a
    float in (0, 1): epsilon scaling first (:func:`lazy_anneal` over
    :func:`eps_schedule` from eps_0 = diameter**p, p = 2 for 'sqeuclidean'
    and 1 for 'euclidean', :func:`max_diameter`: len(schedule) iterations,
    fixed by the data, on top of ``numIterMax``), then POT's loop at reg
    (at most ``numIterMax`` iterations, the stopping test every 10).  A
    ``warmstart`` replaces the annealing (it starts at reg).  The log then also has
    'eps_schedule' (the annealing temperatures), 'niter_scaling' (the
    iterations made at them) and 'niter_total' (every iteration, annealing
    included; POT's 'niter' is the index of the last one at reg).  With
    ``multiscale`` (and ``scaling``) the annealing is
    :func:`multiscale_anneal`'s, and the log also has 'niter_coarse' (the
    iterations on the voxel centroids, counted in 'niter_scaling'),
    'n_clusters' (the voxels of positive mass of each cloud) and
    'kept_fraction' (the fraction of the n m point pairs in the voxel pairs
    that the last truncation pattern of each half-step kept, source rows then
    target rows; above ``_config.LAZY_TRUNCATION_MAX_KEPT`` the untruncated
    kernel ran instead; 1.0 before any pattern).

    Returns
    -------
    f, g : the log-scalings as results (input dtype; device arrays on the GPU)
    log : POT's log dict (``err``, ``u``, ``v``, ``niter``, ``lazy_plan``: a
        :class:`LazyPlan` whose ``X_a``, ``X_b``, ``f``, ``g``, ``metric``,
        ``reg`` are the caller's ``X_s``, ``X_t``, ``u``, ``v``, ``metric``
        and ``reg``, as POT's), or None
    be : the launcher module that ran (``numbaot.cpu.empirical`` or ``numbaot.cuda.empirical``)
    st : its ``LazyState`` after the last iteration (with ``problem=True``:
        the :class:`LazyProblem` instead, whose ``st`` it is)
    """
    pb, numIterMax, stopThr = lazy_setup(X_s, X_t, reg, a, b, metric, numIterMax, stopThr,
                                         batchSize, warmstart, device, scaling)
    be, st, a, dtype = pb.be, pb.st, pb.a, pb.dtype
    n_anneal = n_coarse = 0
    n_clusters = (0, 0)
    if pb.schedule and multiscale:
        n_coarse, n_fine, n_clusters = multiscale_anneal(pb)
        n_anneal = n_coarse + n_fine
    elif pb.schedule:
        n_anneal = lazy_anneal(be, st, pb.log_a, pb.log_b, pb.schedule, pb.reg)
    def error():
        err = row_marginal_l1(*be.lazy_row_lse(st), a)
        be.lazy_note_error(st, err)
        return err

    errs, i_ot = lazy_loop(lambda n_steps: be.lazy_steps(st, n_steps), error,
                           dtype, numIterMax, stopThr, verbose, log, warn)
    f_out, g_out = be.lazy_outputs(st, pb.like)
    lg = None
    if log:
        f, g = be.lazy_potentials(st)
        given = dict(X_a=_as_array(X_s), X_b=_as_array(X_t), f=f_out, g=g_out, reg=reg)
        lg = {"err": errs, "u": f_out, "v": g_out, "niter": i_ot,
              "lazy_plan": LazyPlan(pb.Xs, pb.Xt, f, g, pb.metric, pb.reg, dtype,
                                    attributes=given)}
        if scaling is not None:
            n_final = 0 if numIterMax == 0 else i_ot + 1
            lg.update(eps_schedule=pb.schedule, niter_scaling=n_anneal,
                      niter_total=n_anneal + n_final)
            if multiscale:
                lg.update(niter_coarse=n_coarse, n_clusters=n_clusters,
                          kept_fraction=be.lazy_kept_fraction(st))
    return f_out, g_out, lg, be, (pb if problem else st)
