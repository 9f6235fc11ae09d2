"""Unified OT solvers, drop-in for POT 0.9.7's ``ot.solve`` and ``ot.solve_sample``.

:func:`solve` (a cost matrix) and :func:`solve_sample` (two point clouds)
keep POT's signatures, defaults, solver choices and :class:`OTResult`
attributes, for every entropic case (``reg > 0``) that numbaot's kernels
solve:

* balanced, ``reg_type`` 'KL' or 'entropy': :func:`numbaot.bregman.sinkhorn_log`
  (POT's choice), value with POT's KL or entropy term;
* unbalanced or semi-relaxed (``unbalanced`` a scalar or a pair, ``inf`` on
  one side), ``reg_type`` 'KL', ``unbalanced_type`` 'KL':
  :func:`numbaot.unbalanced.sinkhorn_knopp_unbalanced` (POT's choice);
* point clouds: the cost by :func:`numbaot.dist`, or with ``lazy=True``
  recomputed on the fly by :func:`numbaot.bregman.empirical_sinkhorn2`
  (memory O((n_samples_a + n_samples_b) dim)); ``debias=True`` gives the
  Sinkhorn divergence as POT computes it;
* point clouds with ``method`` 'geomloss', 'geomloss_auto',
  'geomloss_online', 'geomloss_tensorized' or 'geomloss_multiscale' (POT
  delegates these to GeomLoss): natively, with epsilon scaling
  (``scaling``) on the same kernels, no torch ('geomloss_multiscale' runs
  the hot stages on voxel centroids and truncates the kernel on the points).

The other cases of POT's solvers (exact OT, 'L2'/'TV' penalties, custom
regularisers, the other large-scale methods of ``solve_sample``) raise
``NotImplementedError`` naming the POT call that solves them.  numbaot does
not import POT.
"""
import numpy as np

import warnings

from . import _checks, _dispatch
from ._config import GEOMLOSS_AUTO_DENSE_MAX_ENTRIES
from ._lazy import LAZY_METRICS, check_scaling, lazy_anneal, lazy_setup, lazy_solve
from ._result import OTResult
from .bregman import empirical_sinkhorn2, sinkhorn_log
from .cpu import host_dot, weighted_sum
from .unbalanced import sinkhorn_knopp_unbalanced
from .utils import dist

__all__ = ["solve", "solve_sample", "OTResult", "UnknownOptionError"]

#: POT 0.9.7's ``lst_valid_methods_solve``
_SOLVE_METHODS = ["sinkhorn", "sinkhorn_log", "mm", "lbfgsb"]
#: POT 0.9.7's ``lst_method_solve_sample``
_SAMPLE_METHODS = ["1d", "gaussian", "gaussian_hd", "lowrank", "nystroem", "factored",
                   "geomloss", "geomloss_auto", "geomloss_tensorized", "geomloss_online",
                   "geomloss_multiscale", "sliced", "max_sliced", "bsp"]
_ALL_SAMPLE_METHODS = _SOLVE_METHODS + _SAMPLE_METHODS
#: the POT call behind each method of ``solve_sample`` that numbaot lacks
_POT_SAMPLE_CALLS = {
    "1d": "ot.lp.wasserstein_1d",
    "gaussian": "ot.gaussian.empirical_bures_wasserstein_distance",
    "gaussian_hd": "ot.gaussian.empirical_bures_wasserstein_distance_hd",
    "lowrank": "ot.lowrank.lowrank_sinkhorn",
    "nystroem": "ot.bregman.empirical_sinkhorn_nystroem2",
    "factored": "ot.factored.factored_optimal_transport",
    "geomloss": "geomloss.ot.solve_sample",
    "sliced": "ot.sliced.sliced_wasserstein_distance",
    "max_sliced": "ot.sliced.max_sliced_wasserstein_distance",
    "bsp": "ot.bsp.compute_bspot_bijection",
}
_GRADS = ("autodiff", "envelope", "last_step", "detach")
#: numbaot's backends of the GeomLoss methods of ``solve_sample``
_GEOMLOSS_BACKENDS = ("auto", "online", "tensorized", "multiscale")
_REG_TYPES = ("kl", "entropy", "l2")
_UNBALANCED_TYPES = ("kl", "l2", "tv")


def _not_in_numbaot(case, pot_call):
    return NotImplementedError(
        f"{case} is not solved by numbaot; use POT: {pot_call} (pip install pot)")


def _check_reg(reg):
    """reg as a float (0.0 for None: POT's exact OT)."""
    if reg is None:
        return 0.0
    val = _checks.check_real_scalar(reg, "reg")
    if not np.isfinite(val) or val < 0:
        raise ValueError(f"reg must be None or a finite number >= 0; got {reg!r}")
    return val


class UnknownOptionError(NotImplementedError, ValueError):
    """An unknown ``reg_type`` or ``unbalanced_type``: POT raises
    ``NotImplementedError`` (caught as in POT), and it is a ``ValueError``
    (a bad argument) too.

    Raised by :func:`solve` and :func:`solve_sample` with POT's message
    followed by the valid values.

    References
    ----------
    .. [1] POT 0.9.7, ``ot.solve`` (``ot/solvers/_linear.py``), whose
       ``NotImplementedError`` for these options this class keeps (R.
       Flamary et al., "POT: Python Optimal Transport", JMLR 22(78) 2021).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> from numbaot.solvers import UnknownOptionError
    >>> try:
    ...     numbaot.solve(np.ones((2, 2)), reg=1.0, reg_type="foo")
    ... except UnknownOptionError as err:
    ...     print(isinstance(err, NotImplementedError), isinstance(err, ValueError))
    True True
    """


_VALID_REG_TYPES = "reg_type must be 'KL', 'entropy', 'L2' or a tuple (f, df)"
_VALID_UNBALANCED_TYPES = "unbalanced_type must be 'KL', 'L2' or 'TV'"


def _lower(name):
    """A type name lower-cased (None for a non-string: never a valid name)."""
    return name.lower() if isinstance(name, str) else None


def _check_reg_type(reg_type):
    """``reg_type`` of the balanced entropic case ('kl', 'entropy', 'l2' or a
    tuple); :class:`UnknownOptionError` with POT's message otherwise."""
    if isinstance(reg_type, tuple):
        return reg_type
    if _lower(reg_type) not in _REG_TYPES:
        raise UnknownOptionError('Not implemented reg_type="{}": {}'.format(
            reg_type, _VALID_REG_TYPES))
    return reg_type.lower()


def _check_unbalanced_type(unbalanced_type, pot_message):
    """``unbalanced_type`` of an unbalanced case ('kl', 'l2' or 'tv');
    :class:`UnknownOptionError` starting with POT's ``pot_message`` otherwise."""
    if _lower(unbalanced_type) not in _UNBALANCED_TYPES:
        raise UnknownOptionError("{}: {}".format(pot_message, _VALID_UNBALANCED_TYPES))
    return unbalanced_type.lower()


def _check_unbalanced_types(reg_type, unbalanced_type):
    """(reg_type, unbalanced_type) of the regularized unbalanced case, both
    known, else :class:`UnknownOptionError` with POT's message."""
    rt = reg_type if isinstance(reg_type, tuple) else _lower(reg_type)
    ut = _lower(unbalanced_type)
    if (isinstance(rt, tuple) or rt in _REG_TYPES) and ut in _UNBALANCED_TYPES:
        return rt, ut
    raise UnknownOptionError(
        'Not implemented reg_type="{}" and unbalanced_type="{}": {}, and {}'.format(
            reg_type, unbalanced_type, _VALID_REG_TYPES, _VALID_UNBALANCED_TYPES))


def _check_max_iter_tol(max_iter, tol, default_iter, default_tol):
    max_iter = default_iter if max_iter is None else _checks.check_iter_count(max_iter, "max_iter")
    tol = default_tol if tol is None else _checks.check_real_scalar(tol, "tol")
    return max_iter, tol


def _host_vector(w, name, n, device):
    """The weights as a host float64 (n,) vector (uniform for None / empty),
    for the value computations; the solver has validated them already."""
    if device == "cuda" and _dispatch.is_device_array(w):
        w = _dispatch.to_host(w)
    if w is None or len(w) == 0:
        return np.full(n, 1.0 / n)
    return np.asarray(w, dtype=np.float64).reshape(-1)


def _check_1d(w, name):
    if w is None:
        return
    ndim = getattr(w, "ndim", None)
    if ndim is None:
        ndim = np.ndim(w)
    if ndim != 1:
        raise ValueError(f"{name} must be 1-D (one histogram) in solve; got {ndim}-D "
                         "(batches of histograms: numbaot.sinkhorn / numbaot.sinkhorn_unbalanced)")


def _kl_weights(a, b):
    """POT's stabilisation of the KL value for zero masses (and its message)."""
    if a.min() == 0 or b.min() == 0:  # (non-negative weights)
        a = a + 1e-15 * np.min(a)
        b = b + 1e-15 * np.min(b)
        print("Warning: a or b has 0 mass, adding small mass to avoid NaN in KL divergence.")
    return a, b


def _plan_stats_host(M, plan):
    """<plan, M>_F and the plan's row and column sums, float64 (one pass each).

    ``np.einsum``, not ``np.vdot``: vdot is BLAS's ddot, which OpenBLAS runs
    on its thread pool above 10 000 entries; its workers then spin for about
    0.1 s on the cores numbaot's parallel kernels use, right after the solve
    and through the caller's next calls (``solve`` at 1000^2 in a loop: 24 ms
    a call against 11; BENCHMARKS.md, "numbaot in a loop with NumPy's BLAS")."""
    P = np.asarray(plan).astype(np.float64, copy=False)
    Mh = np.asarray(M).astype(np.float64, copy=False)
    return float(np.einsum("ij,ij->", Mh, P)), P.sum(1), P.sum(0)


def _plan_stats_device(M, plan):
    """The same on the device (host results; O(dim_a + dim_b) copies)."""
    from .cuda import sinkhorn as cuda_sinkhorn

    cuda = _dispatch.require_cuda()
    dt = plan.dtype
    Md = _dispatch.device_contiguous(_dispatch.as_device_array(M), dt)
    Pd = _dispatch.device_contiguous(_dispatch.as_device_array(plan), dt)
    out = cuda.device_array(1, dtype=dt)
    ones_a = _dispatch.to_device(np.ones((1, Pd.shape[0])), dt)
    ones_b = _dispatch.to_device(np.ones((1, Pd.shape[1])), dt)
    cuda_sinkhorn.scaled_loss(Pd, Md, ones_a, ones_b, out)  # sum_ij M_ij P_ij
    res = OTResult(plan=Pd)  # its marginals are device reductions
    rows = res.marginal_a.copy_to_host().astype(np.float64)
    cols = res.marginal_b.copy_to_host().astype(np.float64)
    return float(out.copy_to_host()[0]), rows, cols


def _balanced_values(M, plan, lu, lv, a, b, reg, reg_type, device):
    """POT's value_linear = <plan, M>_F and value = value_linear + reg R(plan),
    R = sum plan log(plan + 1e-16) ('entropy') or KL(plan, a b^T + 1e-15)
    ('kl'), for the entropic plan plan_ij = exp(lu_i + lv_j - M_ij / reg):
    there log plan_ij is known, so with r, c the plan's row and column sums,

        sum plan log plan = sum_i r_i lu_i + sum_j c_j lv_j - <plan, M> / reg,
        KL(plan, a b^T) = sum plan log plan - sum_i r_i log a_i - sum_j c_j log b_j

    (rows and columns of zero mass left out).  This needs <plan, M> and the
    marginals only (no logarithm of dim_a dim_b entries; device reductions for
    a device plan).  POT's epsilons shift its 'kl' value by about
    reg * 1e-15 / min(a_i b_j) (relative 1e-8 at 4000 x 4000 uniform)."""
    if device == "cuda":
        value_linear, rows, cols = _plan_stats_device(M, plan)
    else:
        value_linear, rows, cols = _plan_stats_host(M, plan)
    lu = np.asarray(_dispatch.to_host(lu), dtype=np.float64)
    lv = np.asarray(_dispatch.to_host(lv), dtype=np.float64)
    neg_ent = weighted_sum(rows, lu) + weighted_sum(cols, lv) - value_linear / reg
    if reg_type == "kl":
        a, b = _kl_weights(a, b)
        neg_ent -= weighted_sum(rows, a, np.log) + weighted_sum(cols, b, np.log)
    return value_linear, value_linear + reg * neg_ent


def solve(M, a=None, b=None, reg=None, c=None, reg_type="KL", unbalanced=None,
          unbalanced_type="KL", method=None, n_threads=1, max_iter=None, plan_init=None,
          potentials_init=None, tol=None, verbose=False, grad="autodiff"):
    r"""Solve the discrete (entropic) optimal transport problem and return an
    :class:`OTResult`; mirrors ``ot.solve`` of POT 0.9.7 [1]_.

    The general problem is

        min_{T >= 0} <T, M>_F + reg R(T) + lambda_1 U(T 1, a) + lambda_2 U(T^T 1, b),

    with the regularisation R chosen by ``reg_type`` and the marginal
    penalties U by ``unbalanced`` = (lambda_1, lambda_2) and
    ``unbalanced_type``.  numbaot solves the entropic cases (``reg > 0``)
    with POT's solver choice:

    * balanced (``unbalanced=None``), ``reg_type`` 'KL' (R = KL(T, a b^T)) or
      'entropy' (R = sum T log T): log-domain Sinkhorn
      (:func:`numbaot.bregman.sinkhorn_log`, Cuturi 2013 [2]_; the plan is the
      same for both, only ``value`` differs; as POT, ``c``, ``plan_init`` and
      ``potentials_init`` are not used in this case);
    * unbalanced / semi-relaxed, ``reg_type`` 'KL', ``unbalanced_type`` 'KL':
      scaling iterations (:func:`numbaot.unbalanced.sinkhorn_knopp_unbalanced`,
      Chizat et al. 2018 [3]_), reference measure ``c`` (default a b^T),
      warm start from ``potentials_init``.

    Parameters
    ----------
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Loss matrix (finite), in the units of the objective.  A host ``M``
        may have any real dtype (float16 computed as float32, integers as
        float64); a device ``M`` must be float32 or float64.
    a : array-like or CUDA device array, shape (dim_a,), float32 or float64, optional
        Samples weights in the source domain (mass per point, >= 0; default
        is uniform).  Any real dtype (float16 computed as float32, integers
        as float64); 1-D only.
    b : array-like or CUDA device array, shape (dim_b,), float32 or float64, optional
        Samples weights in the target domain (default is uniform), same
        rules; balanced OT needs sum b = sum a.
    reg : float, optional
        Regularization weight lambda_r (> 0), in units of ``M``; by default
        None (no reg., exact OT: not solved by numbaot).
    c : array-like, shape (dim_a, dim_b), optional (default=None)
        Reference measure for the regularization of the unbalanced problem
        (>= 0, finite); any real dtype, used as float64 (a device ``c`` is
        copied to the host).  If None, then use c = a b^T.  Not used by the
        balanced solver (as POT).
    reg_type : str, optional
        Type of regularization R, either "KL", "entropy" (solved), "L2" or a
        tuple (f, df) (POT's solvers), by default "KL" (case-insensitive).
        As POT, not used for exact OT (``reg`` None or 0).
    unbalanced : float or indexable object of length 1 or 2, optional
        Marginal relaxation term (>= 0).  If it is a scalar or an indexable
        object of length 1, then the same relaxation is applied to both
        marginal relaxations.  The balanced OT can be recovered using
        unbalanced=float("inf").  For the semi-relaxed case, use either
        unbalanced=(float("inf"), scalar) or unbalanced=(scalar, float("inf")).
    unbalanced_type : str, optional
        Type of unbalanced penalization function U, either "KL" (solved), "L2"
        or "TV" (POT's solvers), by default "KL" (case-insensitive).  As POT,
        not used (any value, None included) when ``unbalanced`` is None.
    method : str, optional
        One of POT's "sinkhorn", "sinkhorn_log", "mm", "lbfgsb" (validated;
        as POT, the entropic solvers above are used whatever its value).
    n_threads : int, optional
        Number of OMP threads for POT's exact OT solver; not used.
    max_iter : int, optional
        Maximum number of iterations, by default None (1000, as POT).
    plan_init : array-like, shape (dim_a, dim_b), optional
        Initialization of the OT plan for POT's iterative plan solvers; not
        used (not read, any dtype) by the entropic solvers (as POT).
    potentials_init : (array-like (dim_a,), array-like (dim_b,)), optional
        Initial log-scalings (log u, log v) of the unbalanced solver, e.g. the
        ``potentials`` of an earlier result: arrays of any real dtype, used
        as float64 (device arrays are copied to the host); finite except
        -inf where the weight is 0.  Not used by the balanced solver (as
        POT).  By default None.
    tol : float, optional
        Tolerance for solution precision, by default None (1e-9, as POT): the
        balanced solver stops when the column-marginal violation (2-norm,
        checked every 10 iterations) is below it, the unbalanced one when the
        relative change of the scalings is.
    verbose : bool, optional
        Print information in the solver, by default False.
    grad : str, optional
        POT's gradient mode: 'autodiff', 'envelope', 'detach' (the same numbers
        without an autodiff framework) or 'last_step' (``max_iter - 1``
        iterations, then one last iteration, as POT).

    Returns
    -------
    res : OTResult
        ``res.plan`` (dim_a, dim_b), the entropic plan, float32 when every
        given input among ``M``, ``a``, ``b`` is float32 (or float16), else
        float64 (a device array for device inputs); ``res.potentials`` the
        log-scalings (log u (dim_a,), log v (dim_b,)) as POT, of the same
        dtype; ``res.value``
        the objective (with the regularisation and marginal terms; for the
        balanced solver computed exactly from the potentials and marginals,
        where POT adds 1e-15 to a_i b_j: the two differ by about
        reg * 1e-15 / min(a_i b_j)),
        ``res.value_linear`` = <plan, M>_F (host scalars of the input dtype);
        ``res.marginals``; ``res.status`` and ``res.log`` are None (as POT).

    Raises
    ------
    NotImplementedError
        Cases that numbaot does not solve, naming POT's call: exact OT
        (``reg`` None or 0: ``ot.emd2``, ``ot.unbalanced.mm_unbalanced``,
        ``ot.unbalanced.lbfgsb_unbalanced``), ``reg_type`` 'L2'
        (``ot.smooth.smooth_ot_dual``) or a tuple (``ot.optim.cg``), unbalanced
        with ``reg_type`` 'entropy'/'L2' or ``unbalanced_type`` 'L2'/'TV'
        (``ot.unbalanced.lbfgsb_unbalanced``).
    UnknownOptionError
        (a ``NotImplementedError``, as POT raises, and a ``ValueError``), with
        POT's message followed by the valid values: an unknown ``reg_type``
        (not 'KL', 'entropy', 'L2' or a tuple; any case) with ``reg`` > 0; an
        unknown ``unbalanced_type`` (not 'KL', 'L2' or 'TV') with
        ``unbalanced`` given; a non-string one there too (POT: AttributeError).
    ValueError
        Unknown ``method`` (POT's message) or ``grad``; ``reg`` < 0 or not
        finite; 2-D ``a`` or ``b``; ``grad='last_step'`` with ``max_iter=0``;
        and the errors of the solvers (shapes, non-finite or negative
        entries, ``unbalanced`` < 0, ...).
    TypeError
        Non-numeric arrays or scalars; host and device arrays mixed; a
        device ``M`` that is not float32/float64.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        The solvers' warnings ("Sinkhorn did not converge. ...", "Numerical
        errors at iteration %s").

    References
    ----------
    .. [1] POT 0.9.7, ``ot.solve`` (``ot/solvers/_linear.py``; R. Flamary et
       al., "POT: Python Optimal Transport", JMLR 22(78) 2021).
    .. [2] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [3] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2018.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> M = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> res = numbaot.solve(M, reg=1.0)
    >>> print(np.round(res.plan, 4))
    [[0.3655 0.1345]
     [0.1345 0.3655]]
    >>> print(round(float(res.value_linear), 4), round(float(res.value), 4))
    0.2689 0.3799
    >>> res_u = numbaot.solve(M, reg=1.0, unbalanced=1.0)
    >>> print(round(float(res_u.plan.sum()), 4))
    0.8811
    """
    if method is not None and method not in _SOLVE_METHODS:
        raise ValueError("Unknown method={} for solve, must be in {}".format(
            method, _SOLVE_METHODS))
    reg = _check_reg(reg)
    if grad not in _GRADS:
        raise ValueError(f"grad must be one of {_GRADS}; got {grad!r}")
    _check_1d(a, "a")
    _check_1d(b, "b")

    if reg == 0:
        if unbalanced is None:  # (as POT, reg_type and unbalanced_type are not used)
            raise _not_in_numbaot("Exact OT (reg None or 0)", "ot.solve(M, a, b), i.e. ot.emd2")
        unbalanced_type = _check_unbalanced_type(
            unbalanced_type, 'Unknown unbalanced_type="{}"'.format(unbalanced_type))
        if unbalanced_type in ("kl", "l2"):
            raise _not_in_numbaot(f"Exact unbalanced OT (unbalanced_type={unbalanced_type!r})",
                                  "ot.solve(M, a, b, unbalanced=...), i.e. "
                                  "ot.unbalanced.mm_unbalanced")
        raise _not_in_numbaot("Exact unbalanced OT (unbalanced_type='tv')",
                              "ot.solve(M, a, b, unbalanced=..., unbalanced_type='TV'), i.e. "
                              "ot.unbalanced.lbfgsb_unbalanced")
    if unbalanced is None:  # (as POT, unbalanced_type is not used)
        reg_type = _check_reg_type(reg_type)
        if isinstance(reg_type, tuple):
            raise _not_in_numbaot("A custom regularization (reg_type=(f, df))",
                                  "ot.solve(M, a, b, reg, reg_type=(f, df)), i.e. ot.optim.cg")
        if reg_type == "l2":
            raise _not_in_numbaot("Quadratic regularization (reg_type='L2')",
                                  "ot.solve(M, a, b, reg, reg_type='L2'), i.e. "
                                  "ot.smooth.smooth_ot_dual")
        return _solve_balanced(M, a, b, reg, reg_type, max_iter, tol, verbose, grad)
    reg_type, unbalanced_type = _check_unbalanced_types(reg_type, unbalanced_type)
    if isinstance(reg_type, tuple) or reg_type != "kl" or unbalanced_type != "kl":
        rt = reg_type if isinstance(reg_type, str) else "(f, df)"
        raise _not_in_numbaot(
            f"Regularized unbalanced OT with reg_type={rt!r} and "
            f"unbalanced_type={unbalanced_type!r}",
            "ot.solve(M, a, b, reg, unbalanced=..., reg_type=..., unbalanced_type=...), i.e. "
            "ot.unbalanced.lbfgsb_unbalanced")
    max_iter, tol = _check_max_iter_tol(max_iter, tol, 1000, 1e-9)
    if isinstance(potentials_init, (tuple, list)):  # e.g. a device result's potentials
        potentials_init = tuple(_dispatch.to_host(p) for p in potentials_init)
    a, b = _uniform_weights(M, a, b)
    plan, lg = sinkhorn_knopp_unbalanced(
        a, b, M, reg, unbalanced,
        reg_type="kl", c=c, warmstart=potentials_init, numItermax=max_iter, stopThr=tol,
        verbose=verbose, log=True)
    return OTResult(potentials=(lg["logu"], lg["logv"]), value=lg["total_cost"],
                    value_linear=lg["cost"], plan=plan)


def _uniform_weights(M, a, b):
    """``ot.solve``'s weights for ``a`` or ``b`` None: ones / n in M's
    dtype (POT builds them so) for a float NumPy M, which the one-call path
    then takes for a float32 M too (``solve(M, reg=..., max_iter=1)`` at
    16 x 16: 48 -> 24 us); else [] (uniform, on M's device)."""
    plain = type(M) is np.ndarray and M.ndim == 2 and M.dtype in (np.float32, np.float64)
    if a is None:
        a = np.ones(M.shape[0], M.dtype) / M.shape[0] if plain else []
    if b is None:
        b = np.ones(M.shape[1], M.dtype) / M.shape[1] if plain else []
    return a, b


def _solve_balanced(M, a, b, reg, reg_type, max_iter, tol, verbose, grad):
    """POT's balanced entropic branch: sinkhorn_log, then the values."""
    max_iter, tol = _check_max_iter_tol(max_iter, tol, 1000, 1e-9)
    if grad == "last_step":
        if max_iter == 0:
            raise ValueError("The maximum number of iterations must be greater than 0 when "
                             "using grad=last_step.")
        max_iter -= 1
    a_arg, b_arg = _uniform_weights(M, a, b)
    plan, lg = sinkhorn_log(a_arg, b_arg, M, reg, numItermax=max_iter, stopThr=tol, log=True,
                            verbose=verbose)
    potentials = (lg["log_u"], lg["log_v"])
    device = _dispatch.device_of(M=M, a=a, b=b)
    if grad == "last_step":
        plan, potentials = _last_step(M, a_arg, b_arg, reg, potentials, plan.dtype, device)
    dim_a, dim_b = plan.shape
    a_h = _host_vector(a_arg, "a", dim_a, device)
    b_h = _host_vector(b_arg, "b", dim_b, device)
    value_linear, value = _balanced_values(M, plan, potentials[0], potentials[1], a_h, b_h, reg,
                                           reg_type, device)
    dt = plan.dtype.type
    return OTResult(potentials=potentials, value=dt(value), value_linear=dt(value_linear),
                    plan=plan)


def _last_step(M, a, b, reg, potentials, dtype, device):
    """POT's ``grad='last_step'`` step from (u, v): v' = log b - lse_i(-M/reg + u),
    u' = log a - lse_j(-M/reg + v) (both from the previous potentials), plan =
    exp(-M/reg + u' + v').  Each half is the first half-step of one
    :func:`sinkhorn_log` iteration warm-started from (u, v), on M and on M^T."""
    u, v = (_dispatch.to_host(p) for p in potentials)  # the solver takes host warm starts
    _, lg = sinkhorn_log(a, b, M, reg, numItermax=1, stopThr=0.0, log=True, warn=False,
                         warmstart=(u, v))
    Mt = M.T if device == "cuda" else np.asarray(M).T
    _, lgt = sinkhorn_log(b, a, Mt, reg, numItermax=1, stopThr=0.0, log=True, warn=False,
                          warmstart=(v, u))
    u, v = lgt["log_v"], lg["log_v"]
    if device == "cuda":
        from .cuda import sinkhorn as cuda_sinkhorn

        Md = _dispatch.device_contiguous(_dispatch.as_device_array(M), dtype)
        plan = _dispatch.require_cuda().device_array(Md.shape, dtype=dtype)
        cuda_sinkhorn.gibbs_kernel(Md, -1.0 / reg, _dispatch.as_device_array(u),
                                   _dispatch.as_device_array(v), plan)
        plan = _dispatch.like_input(plan, M)
    else:
        Mh = np.asarray(M, dtype=np.float64)
        plan = np.exp(-Mh / reg + np.asarray(u, np.float64)[:, None]
                      + np.asarray(v, np.float64)[None, :]).astype(dtype, copy=False)
    return plan, (u, v)


def _apply_scaler(X_a, X_b, scaler):
    if hasattr(scaler, "transform") and callable(scaler.transform):
        return scaler.transform(X_a), scaler.transform(X_b)
    if callable(scaler):
        return scaler(X_a), scaler(X_b)
    raise ValueError("scaler must be None, an object with a .transform() method, "
                     "or a callable. Got type: {}".format(type(scaler).__name__))


def _debiased(x_ab, x_aa, x_bb):
    if x_ab is None or x_aa is None or x_bb is None:
        return None
    return x_ab - 0.5 * (x_aa + x_bb)


def solve_sample(X_a, X_b, a=None, b=None, metric="sqeuclidean", reg=None, c=None,
                 reg_type="KL", unbalanced=None, unbalanced_type="KL", lazy=False,
                 batch_size=None, method=None, n_threads=1, max_iter=None, plan_init=None,
                 rank=100, scaling=0.95, potentials_init=None, X_init=None, tol=None,
                 verbose=False, grad="autodiff", random_state=None, debias=False,
                 n_projections=50, projections=None, scaler=None):
    r"""Solve (entropic) OT between two point clouds; mirrors ``ot.solve_sample`` of POT 0.9.7 [1]_.

    Returns an :class:`OTResult`.  The cost is M_ij = d(x_i, y_j) with d
    given by ``metric``.  Without ``lazy`` the cost matrix is formed by
    :func:`numbaot.dist` and the problem solved by :func:`solve` (every case
    it solves).  With ``lazy=True`` (or a
    ``method`` of POT's ``solve`` list, as POT) the balanced entropic problem is
    solved by :func:`numbaot.bregman.empirical_sinkhorn2` with
    ``isLazy=True``: costs recomputed on the fly, memory O((n_samples_a +
    n_samples_b) dim); the result then has ``lazy_plan``, ``potentials``
    (log-scalings), ``value_linear`` and ``log`` and, as POT, ``value`` None.
    ``debias=True`` returns the Sinkhorn divergence as POT computes it [2]_:
    value(a, b) - (value(a, a) + value(b, b)) / 2 (the same for
    ``value_linear``), the plan and potentials of the (a, b) problem, and the
    three results in ``log`` ('res_ab', 'res_aa', 'res_bb').

    ``method`` 'geomloss', 'geomloss_auto', 'geomloss_online' or
    'geomloss_tensorized' (POT hands these to GeomLoss [3]_; numbaot solves
    them natively, no torch) solves the same balanced entropic problem,

        OT_reg(a, b) = min_{P 1 = a, P^T 1 = b} <P, C>_F + reg KL(P | a b^T),

    with epsilon scaling [4]_ [5]_: one iteration at each temperature
    eps_k = eps_0 scaling**k > reg, from eps_0 = diameter**p (GeomLoss's
    convention: the diagonal of the bounding box of both clouds, p = 2 for
    'sqeuclidean' and 1 for 'euclidean'), each stage warm-started from the
    previous one's dual potentials, then iterations at ``reg`` to the
    stopping rule below.  ``reg`` is POT's: in units of the cost, the
    temperature eps itself (GeomLoss's ``blur`` is reg**(1/p); POT passes
    ``reg`` to GeomLoss unchanged).  The answer is the converged entropic OT
    at ``reg`` (that of ``lazy=True`` to the tolerance); ``scaling`` trades
    the number of stages, ceil(log(reg / eps_0) / log(scaling)), for the
    quality of each warm start.  At small reg (reg / eps_0 <~ 1e-3) the
    annealing saves iterations (measured: 893 instead of 1530 to tol 1e-3 at
    reg 1e-3 on unit 2-D clouds, scaling 0.9); at large reg plain Sinkhorn
    converges fast and the stages are pure overhead (72 stages at the
    default 0.95 for 110 iterations at reg 0.05), so use a smaller
    ``scaling`` (0.5-0.7) there.  'geomloss_online' recomputes the costs
    inside the kernels (memory O((n_samples_a + n_samples_b) dim); the
    stopping rule of ``lazy=True``: L1 violation of the row marginal every
    10 iterations); 'geomloss_tensorized' anneals the same way, then
    iterates :func:`numbaot.bregman.sinkhorn_log` on the dense cost matrix
    (its stopping rule: 2-norm violation of the column marginal every 10
    iterations) and returns the dense ``plan``; 'geomloss_auto' and
    'geomloss' with ``lazy`` False or None take the dense matrix up to
    ``_config.GEOMLOSS_AUTO_DENSE_MAX_ENTRIES`` entries (8.4e6) and the
    online kernels above ('geomloss' with ``lazy=True``: online).
    'geomloss_multiscale' is 'geomloss_online' with GeomLoss's coarse-to-fine
    schedule [5]_: both clouds are grouped by voxels of side h = diameter /
    (sqrt(dim) 2000**(1/dim)) (GeomLoss's default ``cluster_scale``), the
    stages with eps > h**p run on the voxels' weighted centroids with the
    voxels' masses, the coarse potentials are carried to the points by one
    soft c-transform each way, and the remaining stages and the iterations
    at ``reg`` run on the points: the same converged answer, the hot stages
    almost free (10^4 points in 3-D, reg 0.05: relative error 2e-4 in 0.21-
    0.33 s against 0.74-2.7 s for 'geomloss_online', BENCHMARKS.md).  Its
    log adds 'niter_coarse' (iterations on the centroids, counted in
    'niter_scaling'), 'n_clusters' (voxels of positive mass per cloud) and
    'kept_fraction'.  On the points, its half-steps skip the pairs of
    voxels (of about 32 points) whose terms bounds from the voxels' centres,
    radii and largest potentials place more than log(m / 1e-10) below each
    row's largest (kernel truncation [5]_, exact to
    ``_config.LAZY_TRUNCATION_TOL`` = 1e-10 per logsumexp, recomputed at
    every half-step; 'kept_fraction': the pairs the last patterns kept).  It
    pays at small ``reg`` relative to the squared diameter (an iteration on
    2 10^4 points in 3-D 3.0x faster at reg 2e-3, 4.0x at 5e-4; 5.7x on
    10^5 points at 1e-3); at reg 0.05 on the unit cube nothing can be
    skipped and the untruncated kernel runs.

    Parameters
    ----------
    X_a : array-like or CUDA device array, shape (n_samples_a, dim), float32 or float64
        Samples in the source domain (finite), coordinates in the units of
        the features.  Any real dtype: float16 is computed as float32,
        integers as float64.
    X_b : array-like or CUDA device array, shape (n_samples_b, dim), float32 or float64
        Samples in the target domain (same dim), same rules.
    a : array-like or CUDA device array, shape (n_samples_a,), float32 or float64, optional
        Samples weights in the source domain (mass per point, >= 0; default
        is uniform); any real dtype, as :func:`solve`.
    b : array-like or CUDA device array, shape (n_samples_b,), float32 or float64, optional
        Samples weights in the target domain (default is uniform), same
        rules.
    metric : str, optional
        Metric of :func:`numbaot.dist`, by default 'sqeuclidean'; with
        ``lazy=True``, 'sqeuclidean' or 'euclidean'.
    reg : float, optional
        Regularization weight lambda_r (> 0), by default None (exact OT: not
        solved by numbaot).
    c : array-like, shape (n_samples_a, n_samples_b), optional (default=None)
        Reference measure of the unbalanced regularization (>= 0; any real
        dtype, used as float64; see :func:`solve`).
    reg_type : str, optional
        Type of regularization R, either "KL" or "entropy" (see :func:`solve`),
        by default "KL".  Not used with ``lazy=True`` or a "geomloss*" method
        (as POT).
    unbalanced : float or indexable object of length 1 or 2, optional
        Marginal relaxation term (see :func:`solve`); not with ``lazy=True``.
    unbalanced_type : str, optional
        Type of unbalanced penalization function U, by default "KL" (see
        :func:`solve`; as POT, not used when ``unbalanced`` is None).
    lazy : bool, optional
        Costs on the fly and a lazy plan (see above), by default False.
    batch_size : int, optional
        Batch size of POT's lazy solver (validated; numbaot's lazy kernels need
        none), and rows per block when the marginals of the lazy plan are
        reduced; by default None (100).
    method : str, optional
        POT's method names: "sinkhorn", "sinkhorn_log", "mm", "lbfgsb" select
        the lazy entropic solver (as POT); "geomloss", "geomloss_auto",
        "geomloss_online", "geomloss_tensorized", "geomloss_multiscale" the
        epsilon-scaling solvers above; the other large-scale methods ("1d",
        "gaussian", "gaussian_hd", "lowrank", "nystroem", "factored",
        "sliced", "max_sliced", "bsp") raise NotImplementedError.
    n_threads : int, optional
        Number of OMP threads for POT's exact OT solver; not used.
    max_iter : int, optional
        Maximum number of iterations, by default None (1000, as POT); for
        the "geomloss*" methods, of the iterations at ``reg`` (the annealing
        stages come on top).
    plan_init : array-like, shape (n_samples_a, n_samples_b), optional
        As :func:`solve`: not used (not read, any dtype) by the entropic
        solvers.
    rank : int, optional
        Rank of POT's low-rank / factored / Nystroem methods; not used.
    scaling : float in (0, 1), optional
        Epsilon-scaling factor of the "geomloss*" methods, by default 0.95
        (POT's): eps is multiplied by ``scaling`` at each annealing stage.
        Closer to 1: more stages, better warm starts; smaller: fewer stages.
        Not used by the other methods (as POT).
    potentials_init : (array-like (n_samples_a,), array-like (n_samples_b,)), optional
        As :func:`solve`: initial log-scalings of the unbalanced solver, any
        real dtype, used as float64; not used by the balanced, lazy and
        "geomloss*" solvers (as POT).
    X_init : array-like, shape (rank, dim), optional
        Initial support of the intermediate distribution of POT's factored
        method; not used (not read).
    tol : float, optional
        Tolerance for solution precision, by default None (1e-9, as POT); the
        lazy solver stops when the L1 violation of the row marginal, checked
        every 10 iterations, is below it.
    verbose : bool, optional
        Print information in the solver, by default False.
    grad : str, optional
        As :func:`solve`.
    random_state : int, optional
        Seed of POT's randomised methods; not used.
    debias : bool, optional
        Return the debiased (Sinkhorn divergence) values, by default False.
        POT's ``debias='split'`` raises NotImplementedError.
    n_projections : int, optional
        Number of projections of POT's sliced methods; not used.
    projections : array-like, shape (dim, n_projections), optional
        Projection matrix of POT's sliced methods; not used (not read).
    scaler : None, object with .transform(), or callable, optional
        Preprocessing applied to ``X_a`` and to ``X_b`` before the solve.
        POT 0.9.7 applies it to ``X_a`` only (its code assigns the scaled
        ``X_b`` to an unused name), so its results differ there; under
        :mod:`numbaot.pot` a call with a ``scaler`` runs POT's own.

    Returns
    -------
    res : OTResult
        As :func:`solve`; for the lazy solver ``res.lazy_plan`` (a
        ``numbaot.bregman.LazyPlan``, indexed as POT's LazyTensor: every
        block is 2-D, ``lazy_plan[i]`` of shape (1, n_samples_b),
        ``lazy_plan[:, j]`` (n_samples_a, 1)), ``res.potentials`` =
        (f, g) log-scalings ((n_samples_a,), (n_samples_b,); float32 when
        every given input among ``X_a``, ``X_b``, ``a``, ``b`` is float32 or
        float16, else float64), ``res.value_linear``, ``res.log`` (POT's keys
        'err', 'u', 'v', 'niter', 'lazy_plan'), ``res.value`` None.
        For the "geomloss*" methods: ``res.value`` = GeomLoss's value, as
        POT returns it: the dual objective sum_i a_i F_i + sum_j b_j G_j of
        the returned potentials, which equals OT_reg(a, b) above (<P, C>_F +
        reg KL(P | a b^T)) at convergence and is a lower bound of it before
        (closer to it than the plan's primal value at a loose ``tol``), and
        ``res.value_linear`` = <P, C>_F (POT's GeomLoss result has None
        there), in units of the cost;
        ``res.potentials`` = GeomLoss's dual potentials (F (n_samples_a,),
        G (n_samples_b,)) in units of the cost, P_ij = a_i b_j
        exp((F_i + G_j - C_ij) / reg) (the log-scalings are
        u = log a + F / reg, v = log b + G / reg; a potential is defined up
        to a constant moved between F and G); 'geomloss_online':
        ``res.lazy_plan`` and ``res.plan`` None, 'geomloss_tensorized':
        ``res.plan`` (n_samples_a, n_samples_b); ``res.log``: the solver's
        log plus 'eps_schedule' (the annealing temperatures), 'niter_scaling'
        (iterations made at them) and 'niter_total' (all iterations).

    Raises
    ------
    NotImplementedError
        Cases that numbaot does not solve, naming POT's call: those of
        :func:`solve`; exact OT with ``lazy=True`` (``ot.lp.emd2_lazy``);
        unbalanced with ``lazy=True``; a lazy or "geomloss*" metric other
        than 'sqeuclidean' or 'euclidean'; exact or unbalanced OT with
        "geomloss*"; the other large-scale methods (e.g. "sliced");
        ``debias='split'``.
    UnknownOptionError
        (a ``NotImplementedError`` and a ``ValueError``) As :func:`solve`, for
        ``lazy=False`` without a method.
    ValueError
        Unknown ``method`` (POT's message); a bad ``scaler``; ``scaling``
        not in (0, 1) (a "geomloss*" method); ``X_a`` and ``X_b`` of
        different dimensions; the errors of
        :func:`solve`, :func:`numbaot.dist` and the lazy solver (points not
        2-D, of different dim or not finite, bad ``batch_size``, ...).
    TypeError
        Non-numeric arrays or scalars; host and device arrays mixed.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        The solvers' warnings ("Sinkhorn did not converge. ..."); for
        'geomloss' with ``lazy=None``, POT's "geomloss backend is set to ..."
        warning.

    References
    ----------
    .. [1] POT 0.9.7, ``ot.solve_sample`` (``ot/solvers/_linear.py``; R.
       Flamary et al., "POT: Python Optimal Transport", JMLR 22(78) 2021).
    .. [2] A. Genevay, G. Peyre, M. Cuturi, "Learning Generative Models with
       Sinkhorn Divergences", AISTATS 2018.
    .. [3] J. Feydy, T. Sejourne, F.-X. Vialard, S. Amari, A. Trouve, G.
       Peyre, "Interpolating between Optimal Transport and MMD using
       Sinkhorn Divergences", AISTATS 2019 (GeomLoss).
    .. [4] J. Feydy, "Geometric data analysis, beyond convolutions", PhD
       thesis, Universite Paris-Saclay 2020, sec. 3.3.3, Alg. 3.5
       (symmetric updates there; numbaot keeps POT's alternate ones).
    .. [5] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3) 2019,
       sec. 3.2 (epsilon scaling).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X_a, X_b = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> res = numbaot.solve_sample(X_a, X_b, reg=0.1)
    >>> print(np.round(res.plan, 3))
    [[0.333 0.167 0.   ]
     [0.    0.167 0.333]]
    >>> res_lazy = numbaot.solve_sample(X_a, X_b, reg=0.1, lazy=True)
    >>> print(np.round(res_lazy.lazy_plan[:, :], 3))
    [[0.333 0.167 0.   ]
     [0.    0.167 0.333]]
    >>> print(round(float(res_lazy.value_linear), 4), res_lazy.value)
    0.0834 None
    >>> res_gl = numbaot.solve_sample(X_a, X_b, reg=0.1, method="geomloss_online",
    ...                               scaling=0.7)
    >>> print(round(float(res_gl.value_linear), 4), round(float(res_gl.value), 4))
    0.0834 0.1295
    >>> F, G = res_gl.potentials  # dual potentials, in units of the cost
    >>> print(np.round(res_gl.lazy_plan[:, :], 3))
    [[0.333 0.167 0.   ]
     [0.    0.167 0.333]]
    """
    if method is not None and (not isinstance(method, str)
                               or method.lower() not in _ALL_SAMPLE_METHODS):
        raise ValueError("Unknown method={} for solve_sample. Available methods are: {}".format(
            method, _ALL_SAMPLE_METHODS))
    if scaler is not None:
        X_a, X_b = _apply_scaler(X_a, X_b, scaler)
    if isinstance(debias, str) and debias == "split":
        raise _not_in_numbaot("debias='split'", "ot.solve_sample(..., debias='split')")
    if debias:
        params = dict(metric=metric, reg=reg, c=c, reg_type=reg_type, unbalanced=unbalanced,
                      unbalanced_type=unbalanced_type, lazy=lazy, batch_size=batch_size,
                      method=method, n_threads=n_threads, max_iter=max_iter,
                      plan_init=plan_init, rank=rank, scaling=scaling,
                      potentials_init=potentials_init, X_init=X_init, tol=tol,
                      verbose=verbose, grad=grad, random_state=random_state, debias=False)
        res_aa = solve_sample(X_a, X_a, a=a, b=a, **params)
        res_bb = solve_sample(X_b, X_b, a=b, b=b, **params)
        res_ab = solve_sample(X_a, X_b, a=a, b=b, **params)
        return OTResult(value=_debiased(res_ab.value, res_aa.value, res_bb.value),
                        value_linear=_debiased(res_ab.value_linear, res_aa.value_linear,
                                               res_bb.value_linear),
                        plan=res_ab.plan, potentials=res_ab.potentials,
                        lazy_plan=res_ab.lazy_plan, status=res_ab.status,
                        log={"res_aa": res_aa, "res_bb": res_bb, "res_ab": res_ab},
                        batch_size=100 if batch_size is None else batch_size)
    if method is not None:
        m = method.lower()
        if m.startswith("geomloss"):
            return _solve_sample_geomloss(X_a, X_b, a, b, metric, reg, unbalanced, lazy, m,
                                          max_iter, tol, verbose, scaling, batch_size)
        if m not in _SOLVE_METHODS:
            key = m
            raise _not_in_numbaot(f"solve_sample(method={method!r})",
                                  f"ot.solve_sample(..., method={method!r}), i.e. "
                                  f"{_POT_SAMPLE_CALLS[key]}")
        lazy = True  # as POT: a method of solve selects the lazy solver
    if not lazy:
        device = _dispatch.device_of(X_a=X_a, X_b=X_b, a=a, b=b)
        if device == "cuda":  # the cost on the host (O((n + m) dim) copies), M to the device
            M = dist(_dispatch.to_host(X_a), _dispatch.to_host(X_b), metric)
            M = _dispatch.to_device(M, M.dtype)
        else:
            M = dist(X_a, X_b, metric)
        return solve(M, a, b, reg, c, reg_type, unbalanced, unbalanced_type, method, n_threads,
                     max_iter, plan_init, potentials_init, tol, verbose, grad)
    reg_given = reg  # the lazy plan's reg attribute, as POT's
    reg = _check_reg(reg)
    if reg == 0:
        if unbalanced is None:
            raise _not_in_numbaot("Exact OT with lazy=True",
                                  "ot.solve_sample(X_a, X_b, lazy=True), i.e. ot.lp.emd2_lazy")
        raise NotImplementedError(
            'Non regularized lazy solver with unbalanced_type="{}" not implemented'.format(
                unbalanced_type))
    if unbalanced is not None:
        raise NotImplementedError(
            'Not implemented unbalanced_type="{}" with regularization'.format(unbalanced_type))
    if metric not in LAZY_METRICS:
        raise _not_in_numbaot(f"The lazy solver with metric={metric!r}",
                              "ot.solve_sample(..., lazy=True), i.e. "
                              "ot.bregman.empirical_sinkhorn2(isLazy=True)")
    max_iter, tol = _check_max_iter_tol(max_iter, tol, 1000, 1e-9)
    if batch_size is None:
        batch_size = 100
    value_linear, lg = empirical_sinkhorn2(X_a, X_b, reg_given, a, b, metric=metric,
                                           numIterMax=max_iter, stopThr=tol, isLazy=True,
                                           batchSize=batch_size, verbose=verbose, log=True)
    rows = batch_size[0] if isinstance(batch_size, tuple) else batch_size
    return OTResult(potentials=(lg["u"], lg["v"]), value_linear=value_linear,
                    lazy_plan=lg["lazy_plan"], log=lg, batch_size=rows)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _check_sample_dims(X_a, X_b):
    """ValueError naming X_a and X_b for point clouds of different dimension
    (from the shapes only: host or device arrays)."""
    sa, sb = _shape(X_a), _shape(X_b)
    if len(sa) == 2 and len(sb) == 2 and sa[1] != sb[1]:
        raise ValueError(f"X_a and X_b must have the same dimension (columns); got X_a of "
                         f"shape {sa} and X_b of shape {sb}")


def _geomloss_backend(method, lazy, shape_a, shape_b):
    """The backend of a GeomLoss method: its suffix ('online', 'tensorized',
    'auto', 'multiscale'), else, for 'geomloss', 'online' with ``lazy=True``
    and 'auto' otherwise, with POT's warning for ``lazy=None``.  (POT maps
    ``lazy=False`` to 'tensorized' but passes no backend to GeomLoss, whose
    'auto' picks the dense or the on-the-fly cost; numbaot's 'auto' picks by
    size, ``_config.GEOMLOSS_AUTO_DENSE_MAX_ENTRIES``, so that large clouds
    never form an n_samples_a x n_samples_b matrix.)"""
    parts = method.split("_")
    if len(parts) == 2:
        backend = parts[1]
    else:
        backend = "online" if lazy else "auto"
    if backend not in _GEOMLOSS_BACKENDS:  # unreachable through POT's method list
        raise ValueError(f"unknown GeomLoss backend {backend!r} in method={method!r}")
    if lazy is None:
        warnings.warn(f"geomloss backend is set to '{backend}' but is not yet supported by "
                      "unified geomloss API yet.")
    if backend == "auto":
        n = shape_a[0] * shape_b[0] if len(shape_a) == 2 and len(shape_b) == 2 else 0
        backend = "tensorized" if n <= GEOMLOSS_AUTO_DENSE_MAX_ENTRIES else "online"
    return backend


def _dual_potentials(u, v, log_a, log_b, reg, lse_a, lse_b):
    """GeomLoss's dual potentials (cost units) from the log-scalings:
    F = reg (u - log a), G = reg (v - log b), with F_i = -reg lse_a_i at a
    zero weight (the soft c-transform's value there), G alike."""
    with np.errstate(invalid="ignore"):
        F = reg * (u - log_a)
        G = reg * (v - log_b)
    if lse_a is not None:
        za = np.isneginf(log_a)
        F[za] = -reg * lse_a()[za]
    if lse_b is not None:
        zb = np.isneginf(log_b)
        G[zb] = -reg * lse_b()[zb]
    return F, G


def _solve_sample_geomloss(X_a, X_b, a, b, metric, reg, unbalanced, lazy, method, max_iter,
                           tol, verbose, scaling, batch_size):
    """``solve_sample(method='geomloss*')``: entropic OT between point clouds
    with epsilon scaling (see :func:`solve_sample`)."""
    scaling = check_scaling(scaling)
    reg = _check_reg(reg)
    _check_sample_dims(X_a, X_b)
    if reg == 0:
        raise _not_in_numbaot(f"Exact OT (reg=None or 0) with method={method!r}",
                              f"ot.solve_sample(..., method={method!r}), i.e. "
                              f"{_POT_SAMPLE_CALLS['geomloss']}")
    if unbalanced is not None:
        raise _not_in_numbaot(f"Unbalanced OT with method={method!r}",
                              f"ot.solve_sample(..., unbalanced=..., method={method!r}), i.e. "
                              f"{_POT_SAMPLE_CALLS['geomloss']}")
    if metric not in LAZY_METRICS:
        raise _not_in_numbaot(f"method={method!r} with metric={metric!r} (numbaot: "
                              f"{sorted(LAZY_METRICS)})",
                              f"ot.solve_sample(..., method={method!r}), i.e. "
                              f"{_POT_SAMPLE_CALLS['geomloss']}")
    backend = _geomloss_backend(method, lazy, _shape(X_a), _shape(X_b))
    max_iter, tol = _check_max_iter_tol(max_iter, tol, 1000, 1e-9)
    rows = 100 if batch_size is None else batch_size
    rows = rows[0] if isinstance(rows, tuple) else rows
    if backend in ("online", "multiscale"):
        return _geomloss_online(X_a, X_b, a, b, metric, reg, max_iter, tol, verbose, scaling,
                                rows, multiscale=backend == "multiscale")
    return _geomloss_tensorized(X_a, X_b, a, b, metric, reg, max_iter, tol, verbose, scaling)


def _geomloss_online(X_a, X_b, a, b, metric, reg, max_iter, tol, verbose, scaling, rows,
                     multiscale=False):
    """'geomloss_online' (and 'geomloss_multiscale': the coarse stages on
    voxel centroids, ``numbaot._lazy.multiscale_anneal``): the lazy solver
    with epsilon scaling, then the values from two more passes (row
    marginal, transport cost)."""
    _, _, lg, be, pb = lazy_solve(X_a, X_b, reg, a, b, metric, max_iter, tol, 100, verbose,
                                  True, True, None, scaling=scaling, problem=True,
                                  multiscale=multiscale)
    st = pb.st
    value_linear = float(be.lazy_transport_cost(st))
    u, v = (np.array(x, dtype=np.float64) for x in be.lazy_potentials(st))

    def lse_a():  # LSE_j (v_j - C_ij / reg), for source points of zero weight
        return np.array(be.lazy_row_lse(st)[1], dtype=np.float64)

    def lse_b():  # LSE_i (u_i - C_ij / reg), for target points of zero weight
        be.lazy_lse(st.Xt, st.Xs_t, st.f, st.c, st.metric, st.lse_g)
        return np.asarray(_dispatch.to_host(st.lse_g), dtype=np.float64)

    F, G = _dual_potentials(u, v, pb.log_a, pb.log_b, reg,
                            lse_a if np.any(pb.a == 0) else None,
                            lse_b if np.any(pb.b == 0) else None)
    value = _dual_value(pb.a, pb.b, F, G)
    dt = pb.dtype
    F, G = F.astype(dt), G.astype(dt)
    if _dispatch.is_device_array(pb.like):
        F, G = _dispatch.result_to_device(F, pb.like), _dispatch.result_to_device(G, pb.like)
    return OTResult(potentials=(F, G), value=dt.type(value), value_linear=dt.type(value_linear),
                    lazy_plan=lg["lazy_plan"], log=lg, batch_size=rows)


def _dual_value(a, b, F, G):
    """GeomLoss's value (``sinkhorn_cost``, balanced; POT's for the
    "geomloss*" methods): the dual objective sum_i a_i F_i + sum_j b_j G_j of
    the returned potentials (host float64), exact there because the plan of
    the last half-step has mass 1; at most OT_reg and equal to it at
    convergence (Feydy 2020, eq. 3.207)."""
    return host_dot(a, F) + host_dot(b, G)


def _logsumexp_rows(A):
    mx = np.max(A, axis=1)
    mx[~np.isfinite(mx)] = 0.0
    with np.errstate(divide="ignore"):
        return mx + np.log(np.sum(np.exp(A - mx[:, None]), axis=1))


def _geomloss_tensorized(X_a, X_b, a, b, metric, reg, max_iter, tol, verbose, scaling):
    """'geomloss_tensorized': the annealing stages on the point-cloud kernels
    (the same iterations as 'geomloss_online'), then :func:`sinkhorn_log` on
    the dense cost matrix at reg, warm-started, to its stopping rule."""
    pb, _, _ = lazy_setup(X_a, X_b, reg, a, b, metric, max_iter, tol, 100, None,
                          scaling=scaling)
    n_anneal = lazy_anneal(pb.be, pb.st, pb.log_a, pb.log_b, pb.schedule, reg) \
        if pb.schedule else 0
    u0, v0 = (np.array(x, dtype=np.float64) for x in pb.be.lazy_potentials(pb.st))
    device = "cuda" if _dispatch.is_device_array(pb.like) else "cpu"
    Xa = pb.Xs.astype(pb.dtype, copy=False)
    Xb = pb.Xt.astype(pb.dtype, copy=False)
    M = dist(Xa, Xb, metric)
    a_arg = pb.a.astype(pb.dtype)
    b_arg = pb.b.astype(pb.dtype)
    if device == "cuda":
        M = _dispatch.to_device(M, M.dtype)
        a_arg, b_arg = (_dispatch.to_device(x, x.dtype) for x in (a_arg, b_arg))
    plan, lg = sinkhorn_log(a_arg, b_arg, M, reg, numItermax=max_iter, stopThr=tol,
                            verbose=verbose, log=True, warmstart=(u0, v0))
    lu = np.asarray(_dispatch.to_host(lg["log_u"]), dtype=np.float64)
    lv = np.asarray(_dispatch.to_host(lg["log_v"]), dtype=np.float64)
    value_linear, _ = _balanced_values(M, plan, lu, lv, pb.a, pb.b, reg, "kl", device)
    Mh = np.asarray(_dispatch.to_host(M), dtype=np.float64)
    F, G = _dual_potentials(lu, lv, pb.log_a, pb.log_b, reg,
                            (lambda: _logsumexp_rows(lv[None, :] - Mh / reg))
                            if np.any(pb.a == 0) else None,
                            (lambda: _logsumexp_rows(lu[None, :] - Mh.T / reg))
                            if np.any(pb.b == 0) else None)
    value = _dual_value(pb.a, pb.b, F, G)
    dt = pb.dtype
    F, G = F.astype(dt), G.astype(dt)
    if device == "cuda":
        F, G = _dispatch.result_to_device(F, pb.like), _dispatch.result_to_device(G, pb.like)
    lg = dict(lg, eps_schedule=pb.schedule, niter_scaling=n_anneal,
              niter_total=n_anneal + lg["niter"] + 1)
    return OTResult(potentials=(F, G), value=dt.type(value), value_linear=dt.type(value_linear),
                    plan=plan, log=lg)
