"""Balanced entropic OT: ``sinkhorn``, ``sinkhorn2`` and their solvers.

The public functions of ``numbaot.bregman`` that run the Sinkhorn-Knopp and
log-domain kernels (``numbaot._balanced`` on either device) and greenkhorn;
conventions and the problem solved are in the ``numbaot.bregman`` docstring.
"""
import warnings

import numpy as np

from .. import _balanced, _checks, _dispatch, _loops
from .._checks import prepare_problem
from .._lazy import check_scaling
from .._dispatch import device_of
from ..cpu import sinkhorn as cpu_sinkhorn
from ._stabilized import (check_stabilized_args, sinkhorn_epsilon_scaling, sinkhorn_stabilized,
                          stabilized_solve)

__all__ = [
    "sinkhorn",
    "sinkhorn2",
    "sinkhorn_knopp",
    "sinkhorn_log",
    "greenkhorn",
]

_SINKHORN_METHODS = (
    "sinkhorn",
    "sinkhorn_log",
    "greenkhorn",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
)
_SINKHORN2_METHODS = ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized")


# --------------------------------------------------------------------------
# Sinkhorn-Knopp
# --------------------------------------------------------------------------
def sinkhorn_knopp(a, b, M, reg, numItermax=1000, stopThr=1e-9, verbose=False,
                   log=False, warn=True, warmstart=None, **kwargs):
    r"""Entropic OT by Sinkhorn-Knopp matrix scaling; mirrors ``ot.bregman.sinkhorn_knopp`` [2]_.

    Solves min_gamma <gamma, M>_F + reg * sum_ij gamma_ij log gamma_ij under
    gamma 1 = a, gamma^T 1 = b, gamma >= 0 (Cuturi 2013, "Sinkhorn Distances:
    Lightspeed Computation of Optimal Transport", Algorithm 1) [1]_, by the updates
    v <- b / (K^T u), u <- a / (K v), K = exp(-M / reg).  numbaot reads K once
    per iteration (the row pass that forms K v also accumulates K^T u).

    Parameters
    ----------
    a : array-like or CUDA device array, shape (dim_a,) or (dim_a, n_hists), float32 or float64
        Source weights (non-negative, mass per source point).  Empty (``[]``)
        means uniform.  2-D (numbaot extension): one source histogram per
        problem, with ``b`` 2-D of the same n_hists ("paired batch").
        Integer weights are computed in float64, float16 ones in float32.
    b : array-like or CUDA device array, shape (dim_b,) or (dim_b, n_hists), float32 or float64
        Target weights (same dtype rules as ``a``).  Empty means uniform.
        2-D: n_hists problems sharing ``M``; the losses are returned instead
        of the plans.  Each problem
        must have sum a = sum b, up to a relative 1.5e-6 (POT's ``ot.emd``
        test, ``decimal=6``; 3.8e-6 for float32, 0.031 for float16 weights).
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the loss; max|M| / reg must
        not exceed 2**52 (4.5e15).  A read-only ``M`` is copied once (Numba
        would compile every kernel again for read-only arrays).
    reg : float
        Entropic regularisation strength (> 0), in units of ``M``.
    numItermax : int, default 1000
        Maximum number of iterations (0 <= numItermax <= 2**62).
    stopThr : float, default 1e-9
        Stop when the 2-norm of the column-marginal violation, checked every
        10 iterations, falls below this (>= 0; ``inf`` stops at the first
        check).
    verbose : bool, default False
        Print the error table at each check.
    log : bool, default False
        Also return a dict with keys ``'err'`` (list of errors at checks),
        ``'niter'`` (last iteration index), ``'u'``, ``'v'`` (scalings, shape
        (dim,) or (dim, n_hists)).
    warn : bool, default True
        Warn (``UserWarning``) if ``numItermax`` is reached without convergence.
    warmstart : tuple of arrays, optional
        Initial log-scalings (log u, log v), shapes (dim_a,), (dim_b,) (or
        (dim_a, n_hists), (dim_b, n_hists)): a tuple or list of 2 host
        arrays of any real dtype (used as float64), finite except -inf where
        the weight is 0 (as in a previous ``log``).
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    gamma : ndarray or CUDA device array, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D ``b``
        Optimal plan (mass moved from source i to target j); or, for 2-D
        ``b``, the losses <gamma_k, M>_F.  float32 when every non-empty
        input among ``a``, ``b``, ``M`` is float32 (or float16), else
        float64.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError
        Non-numeric, boolean, complex or masked (``np.ma.MaskedArray``)
        arrays; non-numeric ``reg``, ``stopThr``; non-integer (or bool)
        ``numItermax``; ``warmstart`` not a tuple/list; host and device arrays
        mixed; a device ``M`` that is not float32/float64.
    ValueError
        ``reg`` <= 0 or not finite; ``M`` not 2-D or not finite; weights of the
        wrong length, negative, not finite or of zero mass; sum a != sum b
        (beyond the tolerance above, per problem); max|M| / reg > 2**52; 2-D
        ``a`` without a matching 2-D ``b``; ``numItermax`` < 0 or > 2**62;
        ``stopThr`` NaN or < 0; ``warmstart`` not of 2 arrays, of the wrong
        shapes, with NaN, +inf, or -inf at a positive weight.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``), and "Warning: numerical
        errors at iteration %d" when K^T u has a zero or u, v overflow (the
        previous iterate is then returned), exactly as POT.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013, Algorithm 1.
    .. [2] POT 0.9.7, ``ot.bregman.sinkhorn_knopp``.

    Examples
    --------
    Two source points at 0 and 1 (weights 0.4, 0.6), three uniform target
    points at 0, 0.5 and 1, squared Euclidean cost:

    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.bregman.sinkhorn_knopp(a, b, M, 0.1)
    >>> print(np.round(G, 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    """
    res = _balanced.fast_solve("sinkhorn", a, b, M, reg, numItermax, stopThr, verbose, log, warn,
                               warmstart, want_loss=False)
    if res is not None:
        return res
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    solved = _balanced.knopp_solve(P, reg, numItermax, stopThr, verbose, log, warn, warmstart)
    return _balanced.knopp_outputs(P, solved, log, want_loss=False)


# --------------------------------------------------------------------------
# Log domain
# --------------------------------------------------------------------------
def sinkhorn_log(a, b, M, reg, numItermax=1000, stopThr=1e-9, verbose=False,
                 log=False, warn=True, warmstart=None, **kwargs):
    r"""Entropic OT by log-domain Sinkhorn; mirrors ``ot.bregman.sinkhorn_log`` [3]_.

    Same problem as :func:`sinkhorn_knopp`, iterated on the log-scalings
    (dual potentials divided by reg) so that any ``reg`` > 0 stays finite
    (Peyre & Cuturi 2019, "Computational Optimal Transport", Remark 4.23) [1]_:
    v <- log b - logsumexp_i(-M_ij/reg + u_i), u <- log a - logsumexp_j(-M_ij/reg + v_j).
    numbaot's kernel reads ``M`` once per iteration and computes one
    exponential per entry: the row logsumexp is shifted by a certified upper
    bound from the previous iterate, with Viehmann's single-pass online
    logsumexp (arXiv:1907.01729, sec. 4) [2]_ where that bound is not available;
    the row exponentials are reused for the column update.  It allocates no
    (dim_a, dim_b) temporary; 2-D ``b`` (and paired 2-D ``a``) are solved in
    one sweep over ``M`` per iteration for all problems.

    Parameters
    ----------
    a, b, M, reg, numItermax, stopThr, verbose, warn
        As in :func:`sinkhorn_knopp`.  For 2-D ``b`` each problem has its own
        stopping test (as POT, which loops over the columns of ``b``).
    log : bool, default False
        Also return a dict with keys ``'err'``, ``'niter'``, ``'log_u'``,
        ``'log_v'``, ``'u'``, ``'v'``; for 2-D ``b`` only ``'log_u'``,
        ``'log_v'``, ``'u'``, ``'v'``, of shape (dim, n_hists).
    warmstart : tuple, optional
        Initial log-scalings (log_u, log_v) of shapes (dim_a,), (dim_b,).  For
        2-D ``b``: POT's list of n_hists such pairs, or one pair of arrays of
        shapes (dim_a, n_hists), (dim_b, n_hists).
    **kwargs
        Ignored, as in POT, except numbaot's own keyword ``scaling`` (POT's
        ``sinkhorn_log`` has none; None, the default, gives POT's iterates
        exactly): a float in (0, 1) turns on epsilon scaling [4]_ first, one
        iteration (``_config.EPS_SCALING_STAGE_ITERS``) at each temperature
        eps_k = eps_0 scaling**k > reg from eps_0 = max |M_ij| (the
        annealing of ``solve_sample(method='geomloss*')``, the largest cost
        in the role of the squared diameter), each warm-started from the
        previous one's dual potentials; then POT's loop at ``reg`` from the
        annealed log-scalings (at most ``numItermax`` iterations, the same
        stopping test).  Ignored with a ``warmstart``.  The log then also has
        'eps_schedule' (the temperatures), 'niter_scaling' (the iterations
        made at them) and, for one problem, 'niter_total' (annealing
        included; 'niter' is the index of the last iteration at reg).  To a
        tight stopThr the iterations at reg dominate: on the colour-transfer
        problem at reg 1e-3 (2000 x 2000), 2037-2161 iterations in all
        against 2221 plain, in about the same time (BENCHMARKS.md).

    Returns
    -------
    gamma : ndarray or CUDA device array, shape (dim_a, dim_b); the losses, shape (n_hists,), for 2-D ``b``
        Optimal plan, or for 2-D ``b`` the losses <gamma_k, M>_F; of the
        result dtype of :func:`sinkhorn_knopp`.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp`; ValueError for ``scaling`` outside (0, 1).

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." per unconverged problem.  As POT, for
        2-D ``b`` with 1-D ``a`` this warning is issued even with
        ``warn=False`` (POT's loop over the columns of ``b`` does not pass
        ``warn`` on); paired batches respect ``warn``.

    References
    ----------
    .. [1] G. Peyre, M. Cuturi, "Computational Optimal Transport",
       Foundations and Trends in Machine Learning 11(5-6) 2019, Remark 4.23.
    .. [2] T. Viehmann, "Implementation of batched Sinkhorn iterations for
       entropy-regularized Wasserstein loss", arXiv:1907.01729 2019, sec. 4.
    .. [3] POT 0.9.7, ``ot.bregman.sinkhorn_log``.
    .. [4] B. Schmitzer, "Stabilized sparse scaling algorithms for entropy
       regularized transport problems", SIAM J. Sci. Comput. 41(3) 2019,
       sec. 3.2; J. Feydy, "Geometric data analysis, beyond convolutions",
       PhD thesis 2020, Alg. 3.5.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G, log = numbaot.bregman.sinkhorn_log(a, b, M, 0.1, log=True)
    >>> print(np.round(G, 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    >>> sorted(log)
    ['err', 'log_u', 'log_v', 'niter', 'u', 'v']
    """
    scaling = kwargs.get("scaling")
    if scaling is None:
        res = _balanced.fast_solve("sinkhorn_log", a, b, M, reg, numItermax, stopThr, verbose,
                                   log, warn, warmstart, want_loss=False)
        if res is not None:
            return res
    else:
        scaling = check_scaling(scaling)
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    solved = _balanced.log_solve(P, reg, numItermax, stopThr, warmstart, scaling)
    _loops.log_report(P, solved[2], verbose, _loops.log_warn(P, warn))
    return _balanced.log_outputs(P, solved, log, want_loss=False)


# --------------------------------------------------------------------------
# Greenkhorn
# --------------------------------------------------------------------------
#: greenkhorn's warning when a scaling overflowed (POT returns the NaN plan
#: with at most "Sinkhorn did not converge").
GREENKHORN_NUMERICAL_ERRORS = (
    "greenkhorn: numerical errors, the plan holds NaN or inf: the Gibbs kernel "
    "exp(-M/reg) underflows (entries of M/reg are too large), so a scaling u or v "
    "overflowed; use method='sinkhorn_log' or a larger reg"
)


def _check_gibbs_kernel(K, a, b):
    """ValueError when a row (column) of the Gibbs kernel K = exp(-M/reg)
    underflowed to 0 everywhere while its weight a_i (b_j) is positive: no
    scaling can then move that mass, and greenkhorn's u_i = a_i / (K v)_i
    is a division by zero (POT returns a NaN plan)."""
    for w, sums, what, name in ((a, K.sum(axis=1), "row", "a"), (b, K.sum(axis=0), "column", "b")):
        bad = np.flatnonzero((sums == 0) & (w > 0))
        if bad.size:
            raise ValueError(
                f"the Gibbs kernel exp(-M/reg) underflows to 0 on the whole {what} {bad[0]} of M "
                f"(where {name} > 0): greenkhorn cannot move that mass (POT returns a NaN plan); "
                f"use method='sinkhorn_log', a larger reg, or M shifted by its {what} minimum"
            )

def greenkhorn(a, b, M, reg, numItermax=10000, stopThr=1e-9, verbose=False,
               log=False, warn=True, warmstart=None):
    r"""Greedy coordinate Sinkhorn; mirrors ``ot.bregman.greenkhorn`` [2]_.

    Same problem as :func:`sinkhorn_knopp`, solved by updating at each step
    only the row or column with the largest marginal violation (Altschuler,
    Weed & Rigollet 2017, "Near-linear time approximation algorithms for
    optimal transport via Sinkhorn iteration", Algorithm 2) [1]_, step for step as
    POT 0.9.7, compiled (one step costs O(dim_a + dim_b)).

    Parameters
    ----------
    a : array-like, shape (dim_a,), float32 or float64
        Source weights (>= 0, finite; empty = uniform); float16 is computed
        as float32, integers as float64.  1-D only.
    b : array-like, shape (dim_b,), float32 or float64
        Target weights (empty = uniform), same rules; sum b = sum a.
    M, reg, stopThr, warn
        As in :func:`sinkhorn_knopp`; stops when the largest absolute
        marginal violation is <= ``stopThr``.
    numItermax : int, default 10000
        Maximum number of coordinate updates.
    verbose : bool
        Accepted for compatibility; POT prints nothing either.
    log : bool
        Also return a dict with keys ``'u'``, ``'v'`` (the scalings, of the
        result dtype), ``'n_iter'``.
    warmstart : tuple of 2 arrays, optional
        Initial log-scalings (log u, log v), shapes (dim_a,), (dim_b,): host
        arrays of any real dtype (used as float64), finite except -inf where
        the weight is 0.

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b)
        The plan; float32 when every non-empty input among ``a``, ``b``,
        ``M`` is float32 (or float16), else float64.  Device inputs run on
        host copies and get a device array back.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError
        As :func:`sinkhorn_knopp`.
    ValueError
        As :func:`sinkhorn_knopp`; 2-D ``a`` or ``b``; a whole row (column)
        of the Gibbs kernel exp(-M/reg) underflows to 0 where a (b) is
        positive: no scaling can move that mass (POT returns a NaN plan);
        the message suggests ``method='sinkhorn_log'``.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge. ..." (if ``warn``); "greenkhorn:
        numerical errors, ..." when a scaling overflowed and the plan holds
        NaN or inf (a nearly underflowing kernel).

    References
    ----------
    .. [1] J. Altschuler, J. Weed, P. Rigollet, "Near-linear time
       approximation algorithms for optimal transport via Sinkhorn
       iteration", NeurIPS 2017, Algorithm 2.
    .. [2] POT 0.9.7, ``ot.bregman.greenkhorn``.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> print(np.round(numbaot.greenkhorn(a, b, M, 0.1), 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    """
    if device_of(a=a, b=b, M=M) == "cuda":
        return _dispatch.via_host(
            greenkhorn, (a, b, M, reg, numItermax, stopThr, verbose, log, warn, warmstart), {}, M)
    P = prepare_problem(a, b, M, allow_batch=False, method_name="greenkhorn")
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    _checks.check_balanced(P, reg)
    dt = P.dtype
    dim_a, dim_b = P.shape
    if warmstart is None:
        u = np.full(dim_a, 1.0 / dim_a, dtype=dt)
        v = np.full(dim_b, 1.0 / dim_b, dtype=dt)
    else:
        w_a, w_b = _checks.check_warmstart(warmstart, P.shape, 0, (P.a, P.b))
        u, v = np.exp(w_a[0]).astype(dt), np.exp(w_b[0]).astype(dt)
    Kmat = np.empty(P.shape, dtype=dt)
    cpu_sinkhorn.gibbs_kernel(P.M, -1.0 / reg, np.zeros(dim_a), np.zeros(dim_b), Kmat)
    _check_gibbs_kernel(Kmat, P.a[0], P.b[0])
    G = np.empty(P.shape, dtype=dt)
    ii, converged = cpu_sinkhorn.greenkhorn_loop(
        Kmat, P.a[0].astype(dt), P.b[0].astype(dt), u, v, G, numItermax, stopThr
    )
    if not np.all(np.isfinite(G)):
        warnings.warn(GREENKHORN_NUMERICAL_ERRORS)
    elif not converged and warn:
        warnings.warn(_loops.NOT_CONVERGED)
    if log:
        return G, {"u": u, "v": v, "n_iter": ii}
    return G


# --------------------------------------------------------------------------
# dispatchers
# --------------------------------------------------------------------------
def sinkhorn(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
             verbose=False, log=False, warn=True, warmstart=None, **kwargs):
    r"""Entropic OT plan; mirrors ``ot.sinkhorn`` / ``ot.bregman.sinkhorn`` [2]_.

    Solves min_gamma <gamma, M>_F + reg * sum gamma log gamma subject to
    gamma 1 = a, gamma^T 1 = b, gamma >= 0 (Cuturi 2013) [1]_ with the solver
    named by ``method``.

    Parameters
    ----------
    a : array-like or CUDA device array, shape (dim_a,) or (dim_a, n_hists), float32 or float64
        Source weights: mass at each source point (>= 0, finite, positive
        total).  Empty (``[]``) or None means uniform 1 / dim_a.  2-D: a
        paired batch, with 2-D ``b`` of the same n_hists ('sinkhorn',
        'sinkhorn_log' and 'sinkhorn_stabilized' only).  Other real dtypes
        are accepted: float16 is computed as float32, integers as float64.
    b : array-like or CUDA device array, shape (dim_b,) or (dim_b, n_hists), float32 or float64
        Target weights, same rules; sum b = sum a per problem (relative
        tolerance 1.5e-6; 3.8e-6 for float32, 0.031 for float16 weights).
        2-D: n_hists problems sharing ``M`` (not for 'greenkhorn' and
        'sinkhorn_epsilon_scaling'); the losses are returned.
    M : array-like or CUDA device array, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite), in the units of the loss; max|M| / reg <=
        2**52.  Host ``M`` may have any real dtype (float16 computed as
        float32, integers as float64); a device ``M`` must be float32 or
        float64.
    reg : float
        Entropic regularisation strength (finite, > 0), in units of ``M``.
    method : str, default 'sinkhorn'
        'sinkhorn' (:func:`sinkhorn_knopp`), 'sinkhorn_log'
        (:func:`sinkhorn_log`), 'greenkhorn' (:func:`greenkhorn`),
        'sinkhorn_stabilized' (:func:`sinkhorn_stabilized`) or
        'sinkhorn_epsilon_scaling' (:func:`sinkhorn_epsilon_scaling`);
        case-insensitive.
    numItermax, stopThr, verbose, log, warn, **kwargs
        Passed to the solver (see each one).
    warmstart : tuple of 2 host arrays, optional
        Follows the solver's convention: initial log-scalings (log u, log v)
        for 'sinkhorn', 'sinkhorn_log' and 'greenkhorn', dual potentials
        (alpha, beta) in units of ``M`` for 'sinkhorn_stabilized' and
        'sinkhorn_epsilon_scaling'; shapes (dim_a,), (dim_b,), or for a batch
        ('sinkhorn', 'sinkhorn_log') (dim_a, n_hists), (dim_b, n_hists).  Any
        real dtype (NumPy arrays or lists, also for device problems), used
        as float64.

    Returns
    -------
    gamma : ndarray or CUDA device array, shape (dim_a, dim_b); for 2-D ``b`` the losses, shape (n_hists,)
        The entropic plan (mass moved from source i to target j), or the
        losses <gamma_k, M>_F.  dtype float32 when every non-empty input
        among ``a``, ``b``, ``M`` is float32 (or float16), else float64; a
        device array of the caller's kind for device inputs.
    log : dict
        Only if ``log=True``: the chosen solver's log.

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."`` for any other method, and everything
        the solver raises (see :func:`sinkhorn_knopp`: bad shapes, values,
        masses, scalars or ``warmstart``; 2-D weights for 'greenkhorn' and
        'sinkhorn_epsilon_scaling').
    TypeError
        ``method`` not a string, and everything the solver raises
        (non-numeric arrays or scalars, host and device arrays mixed, a
        device ``M`` not float32/float64, a device ``warmstart``).
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [2] POT 0.9.7, ``ot.bregman.sinkhorn`` (``ot.sinkhorn``).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> G = numbaot.sinkhorn(a, b, M, 0.1, method="sinkhorn_log")
    >>> print(np.round(G, 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    >>> print(np.round(G.sum(axis=0), 4))  # the target marginal b
    [0.3333 0.3333 0.3333]
    """
    meth = _checks.check_method(method, _SINKHORN_METHODS)
    if meth == "sinkhorn":
        return sinkhorn_knopp(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                              verbose=verbose, log=log, warn=warn, warmstart=warmstart, **kwargs)
    if meth == "sinkhorn_log":
        return sinkhorn_log(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                            verbose=verbose, log=log, warn=warn, warmstart=warmstart, **kwargs)
    if meth == "greenkhorn":
        return greenkhorn(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                          verbose=verbose, log=log, warn=warn, warmstart=warmstart)
    if meth == "sinkhorn_stabilized":
        return sinkhorn_stabilized(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                                   warmstart=warmstart, verbose=verbose, log=log,
                                   warn=warn, **kwargs)
    return sinkhorn_epsilon_scaling(a, b, M, reg, numItermax=numItermax, stopThr=stopThr,
                                    warmstart=warmstart, verbose=verbose, log=log,
                                    warn=warn, **kwargs)


def sinkhorn2(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
              verbose=False, log=False, warn=False, warmstart=None, **kwargs):
    r"""Entropic OT loss <gamma, M>_F; mirrors ``ot.sinkhorn2`` / ``ot.bregman.sinkhorn2`` [2]_.

    The plan gamma is the solution of :func:`sinkhorn` [1]_; the returned value is
    its transport cost <gamma, M>_F (without the entropic term), as POT.  The
    plan itself is never formed (the cost is reduced on the fly).

    Parameters
    ----------
    a, b, M, reg, numItermax, stopThr, verbose, log, warmstart, **kwargs
        As in :func:`sinkhorn`.
    method : str, default 'sinkhorn'
        'sinkhorn', 'sinkhorn_log' or 'sinkhorn_stabilized' (case-insensitive).
    warn : bool, default False
        Note the default differs from :func:`sinkhorn`, as in POT.

    Returns
    -------
    W : numpy.float32 or numpy.float64, or ndarray (or device array) of shape (n_hists,) for 2-D ``b``
        Transport cost <gamma, M>_F of the entropic plan, in units of ``M``;
        of the result dtype of :func:`sinkhorn` (float32 when every non-empty
        input is float32 or float16, else float64).  A single loss is a
        NumPy scalar also for device inputs.
    log : dict
        Only if ``log=True``: the keys of the chosen solver.

    Raises
    ------
    ValueError
        ``"Unknown method '<method>'."`` and everything the solver raises.
    TypeError
        ``method`` not a string, and everything the solver raises.
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but numba-cuda or a CUDA GPU is missing.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [2] POT 0.9.7, ``ot.bregman.sinkhorn2`` (``ot.sinkhorn2``).

    Examples
    --------
    One loss, then a 2-D ``b`` holding two target histograms (two losses):

    >>> import numpy as np
    >>> import numbaot
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> print(round(float(numbaot.sinkhorn2(a, b, M, 0.1)), 4))
    0.0834
    >>> B = np.stack([b, [0.2, 0.3, 0.5]], axis=1)
    >>> print(np.round(numbaot.sinkhorn2(a, B, M, 0.1), 4))
    [0.0834 0.075 ]
    """
    meth = _checks.check_method(method, _SINKHORN2_METHODS)
    scaling = kwargs.get("scaling") if meth == "sinkhorn_log" else None
    if scaling is not None:
        scaling = check_scaling(scaling)
    if meth == "sinkhorn" or (meth == "sinkhorn_log" and scaling is None):
        res = _balanced.fast_solve(meth, a, b, M, reg, numItermax, stopThr, verbose, log, warn,
                                   warmstart, want_loss=True)
        if res is not None:
            return res
    P = prepare_problem(a, b, M)
    reg, numItermax, stopThr = _checks.check_common(reg, numItermax, stopThr)
    if meth == "sinkhorn":
        solved = _balanced.knopp_solve(P, reg, numItermax, stopThr, verbose, log, warn, warmstart)
        return _balanced.knopp_outputs(P, solved, log, want_loss=True)
    if meth == "sinkhorn_log":
        solved = _balanced.log_solve(P, reg, numItermax, stopThr, warmstart, scaling)
        _loops.log_report(P, solved[2], verbose, _loops.log_warn(P, warn))
        return _balanced.log_outputs(P, solved, log, want_loss=True)
    _checks.check_balanced(P, reg)
    tau, print_period = check_stabilized_args(kwargs.get("tau", 1e3),
                                              kwargs.get("print_period", 20))
    return stabilized_solve(P, reg, numItermax, tau, stopThr, warmstart, verbose, print_period,
                       log, warn, want_loss=True)
