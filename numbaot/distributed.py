r"""Entropic OT on several processes with MPI (mpi4py): each rank owns a block of rows.

For problems whose cost matrix (or point cloud) does not fit one machine, the
rows of ``M`` (the source points) are split across the ranks of an MPI
communicator, as in MAP-UOT's distributed version (Sun, Hu, Jiang 2024, sec. 5:
"each process owns a block of rows and the column sums are combined with
MPI_Allreduce once per iteration").  Every rank passes its block of rows of
``M`` (and the matching slice of ``a``), the full target weights ``b``, and
gets back its block of rows of the plan; column quantities (``v``, the errors,
the iteration count) are global and identical on every rank.

Per iteration each rank makes one sweep over its rows with numbaot's CPU
kernels (the same fused passes as the single-process solvers: the row update
and the partial column sums in one read of the local block), then the ranks
combine their partial column sums with one ``Allreduce`` of a length-``dim_b``
vector.  The iterations are the CPU launchers' (``numbaot.cpu.sinkhorn``,
``numbaot.cpu.unbalanced``, ``numbaot.cpu.empirical``), whose states take a
column-reduction hook (:class:`_RowBlocks` here) that makes these reductions:

* ``sinkhorn(method='sinkhorn')``: the partial K^T u (plus one slot that flags a
  non-finite u on any rank), summed;
* ``sinkhorn(method='sinkhorn_log')``: the partial column sums of the new plan.
  The kernel's certified shift makes every entry of the new plan at most a_i,
  so each rank's partial is a finite number in [0, sum(a)] and a plain sum is
  safe.  Columns whose total underflows (far from convergence, tiny ``reg``)
  are recomputed by a max-shifted column logsumexp whose per-rank values are
  combined by a ``logaddexp`` reduction, i.e. by merging the per-rank
  (max, scaled sum) pairs;
* ``empirical_sinkhorn``: the per-rank column logsumexp of the lazily computed
  costs, combined by the same ``logaddexp`` reduction;
* ``sinkhorn_unbalanced``: the partial K^T u, summed, together with (in a
  second, non-blocking reduction of 3 numbers waited on with the first) the
  maxima that POT's relative-change stopping test needs.

Stopping decisions are taken on rank 0's value of the (global) error and
broadcast, so every rank stops at the same iteration whatever the MPI
library's reduction order.  Invalid input on any rank raises on every rank (the
failing rank raises its own error; the others a ``ValueError``/``TypeError``
naming the rank), so no rank is left waiting in a collective call; checks of
global values (total masses, max|M| / reg) are made on reduced values, so
every rank takes the same decision.

Threads: every rank runs numbaot's parallel CPU kernels.  Give each rank its
share of the cores (``NUMBA_NUM_THREADS``), e.g. one thread per rank when
there are as many ranks as cores; numbaot never changes the thread count.

``import numbaot`` does not import mpi4py; the first call of a function here
does (and so initialises MPI).  Install with ``pip install 'numbaot[mpi]'``
(mpi4py and the MPICH wheels from PyPI: no system MPI needed) and run with
``mpiexec -n 4 python script.py``.  See ``docs/distributed.md`` for the
scaling model.
"""
import warnings
import zlib
from types import SimpleNamespace

import numpy as np

from . import _checks
from . import _loops
from .cpu import empirical as cpu_empirical
from .cpu import sinkhorn as cpu_sinkhorn
from .cpu import unbalanced as cpu_unbalanced
from ._lazy import LAZY_METRICS, check_clouds, lazy_loop, row_marginal_l1

__all__ = ["local_rows", "sinkhorn", "sinkhorn_unbalanced", "empirical_sinkhorn"]

_METHODS = ("sinkhorn", "sinkhorn_log")


# --------------------------------------------------------------------------
# MPI plumbing
# --------------------------------------------------------------------------
def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "numbaot.distributed needs mpi4py and an MPI library; install them with "
            "pip install 'numbaot[mpi]'"
        ) from exc
    return MPI


def _get_comm(comm):
    MPI = _mpi()
    if comm is None:
        return MPI, MPI.COMM_WORLD
    for attr in ("Allreduce", "Iallreduce", "allgather", "bcast", "Get_rank", "Get_size"):
        if not hasattr(comm, attr):
            raise TypeError(f"comm must be an mpi4py communicator (or None for "
                            f"MPI.COMM_WORLD); got {type(comm).__name__}")
    return MPI, comm


_LSE_OP = []


def _logaddexp(inbuf, inoutbuf, datatype):
    """MPI user operation: inoutbuf = log(exp(inbuf) + exp(inoutbuf)), elementwise,
    float64 (commutative and exact in the order of its arguments)."""
    x = np.frombuffer(inbuf, dtype=np.float64)
    y = np.frombuffer(inoutbuf, dtype=np.float64)
    np.logaddexp(x, y, out=y)


def _allreduce_lse(MPI, comm, x):
    """In place: x_j <- log sum_ranks exp(x_j) (x float64, C-contiguous)."""
    if not _LSE_OP:
        _LSE_OP.append(MPI.Op.Create(_logaddexp, commute=True))
    comm.Allreduce(MPI.IN_PLACE, x, op=_LSE_OP[0])


def _agree(comm, x):
    """Rank 0's value of x on every rank (stopping decisions are identical)."""
    return comm.bcast(x, root=0)


def _collective(comm, fn):
    """Run the local validation ``fn()`` on every rank; if it raises on any
    rank, raise on every rank: the failing rank its own exception, the others
    a TypeError (for a TypeError) or ValueError naming the first failing rank.
    Any ``Exception`` counts (e.g. an array-like whose conversion raises a
    RuntimeError): a rank left out would wait forever in the next collective."""
    err = None
    out = None
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
        err = exc
    msgs = comm.allgather(None if err is None else (type(err).__name__, str(err)))
    if err is not None:
        raise err
    for rank, msg in enumerate(msgs):
        if msg is not None:
            if msg[0] == "TypeError":
                raise TypeError(f"invalid input on rank {rank}: {msg[1]}")
            what = msg[1] if msg[0] == "ValueError" else f"{msg[0]}: {msg[1]}"
            raise ValueError(f"invalid input on rank {rank}: {what}")
    return out


def _same_on_all_ranks(comm, **values):
    gathered = comm.allgather(values)
    for key, val in values.items():
        seen = [g[key] for g in gathered]
        if any(s != seen[0] for s in seen):
            what = "differs between ranks" if key in ("b", "X_t") else f"got {seen}"
            raise ValueError(f"{key} must be the same on every rank; {what}")


def local_rows(n, comm=None):
    """This rank's block of ``n`` rows: ``slice(start, stop)``.

    The blocks are contiguous, in rank order, and differ in size by at most one
    row (the first ``n % size`` ranks get one more), as ``numpy.array_split``
    [2]_: the row split of MAP-UOT's distributed solver [1]_.

    Parameters
    ----------
    n : int
        Total number of rows (source points), ``n >= size`` of the communicator.
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD``.

    Returns
    -------
    slice
        Rows ``start:stop`` of ``M`` / ``a`` / ``X_s`` owned by this rank.

    Raises
    ------
    ValueError
        ``n`` smaller than the number of ranks (a rank would own no row).
    TypeError
        ``n`` not an integer; ``comm`` not a communicator.
    ImportError
        mpi4py is not installed.

    References
    ----------
    .. [1] C. Sun, J. Hu, H. Jiang, "MAP-UOT: A Memory-Efficient Approach to
       Unbalanced Optimal Transport Implementation", arXiv:2412.11079 2024,
       sec. 5.
    .. [2] NumPy, ``numpy.array_split``.

    Examples
    --------
    With ``mpiexec -n 4``, ``local_rows(10)`` is ``slice(0, 3)``,
    ``slice(3, 6)``, ``slice(6, 8)``, ``slice(8, 10)`` on ranks 0 to 3; in a
    plain (single-process) run the one rank owns every row:

    >>> from numbaot import distributed
    >>> distributed.local_rows(10)
    slice(0, 10, None)
    """
    _, comm = _get_comm(comm)
    n = _checks.check_iter_count(n, "n")
    size, rank = comm.Get_size(), comm.Get_rank()
    if n < size:
        raise ValueError(f"n = {n} rows cannot be split over {size} ranks (each needs >= 1 row)")
    q, r = divmod(n, size)
    start = rank * q + min(rank, r)
    return slice(start, start + q + (1 if rank < r else 0))


def _global_a(comm, a, n_local):
    """The local weights (uniform over all ranks' rows when None), the global
    number of rows and the total mass over all ranks (1 when uniform), which
    must be positive."""
    n_global = comm.allreduce(n_local)
    if a is None:
        return np.full(n_local, 1.0 / n_global), n_global, 1.0
    mass = comm.allreduce(float(a.sum()))
    if not mass > 0:
        raise ValueError("a_local must have a positive total mass over all ranks")
    return a, n_global, mass


def _setup(comm, a_local, b, M_local, balanced=False, **scalars):
    """Validated (M, a, b, dtype, n_global) of one rank, checked across ranks.

    ``balanced`` (with ``reg`` among the scalars): also the checks of the
    single-process balanced solvers (``numbaot._checks.check_balanced``) on
    the global values: sum a = sum b within the tolerance of the weights'
    dtypes, and max|M| / reg <= 2**52 (the largest |M_ij| over all ranks)."""
    M, a, bf, dtype, absmax, mass_tol = _collective(
        comm, lambda: _checks.check_local_block(M_local, a_local, b))
    _same_on_all_ranks(comm, dim_b=M.shape[1], dtype=dtype.str, uniform_a=a is None,
                       b=zlib.crc32(bf.tobytes()), **scalars)
    a, n_global, mass = _global_a(comm, a, M.shape[0])
    if balanced:
        MPI = _mpi()
        maxima = np.array([absmax, mass_tol])
        comm.Allreduce(MPI.IN_PLACE, maxima, op=MPI.MAX)
        _checks.check_equal_mass([mass], [bf.sum()], maxima[1])
        _checks.check_cost_scale(M, scalars["reg"], "M", absmax=float(maxima[0]))
    return M, a, bf, dtype, n_global


def _warm(comm, warmstart, shape):
    """Validated (log u_local, log v) as (1, dim) float64 arrays, or None; given
    on every rank or on none (checked)."""
    _same_on_all_ranks(comm, warmstart_given=warmstart is not None)
    if warmstart is None:
        return None
    return _collective(comm, lambda: _checks.check_unbalanced_warmstart(warmstart, shape, 0))


# --------------------------------------------------------------------------
# balanced: Sinkhorn-Knopp and log domain
# --------------------------------------------------------------------------
def sinkhorn(a_local, b, M_local, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
             verbose=False, log=False, warn=True, warmstart=None, comm=None, **kwargs):
    r"""Balanced entropic OT with the rows of ``M`` split across MPI ranks.

    Distributed twin of :func:`numbaot.sinkhorn` (which mirrors
    ``ot.sinkhorn`` [3]_): same problem (Cuturi 2013 [1]_), same iterations, stopping
    rule (column-marginal 2-norm every 10 iterations), warnings and ``log``
    keys; called collectively by every rank of ``comm``.  Gathering the
    per-rank plans in rank order gives the single-process plan (to rounding:
    the column sums are added in another order).  The rows are split as in
    MAP-UOT's distributed solver [2]_: one ``Allreduce`` of the column sums
    per iteration.

    Parameters
    ----------
    a_local : array-like or None, shape (n_local,), float32 or float64
        This rank's slice of the source weights (>= 0, finite; the total mass
        over all ranks must be positive).  ``None`` or empty on every rank:
        uniform, 1 / (sum of n_local over the ranks).  Host arrays of any
        real dtype (float16 computed as float32, integers as float64).
    b : array-like or None, shape (dim_b,), float32 or float64
        Target weights, the same on every rank (checked).  Empty: uniform.
        Same dtype rules as ``a_local``.
    M_local : array-like, shape (n_local, dim_b), float32 or float64
        This rank's rows of the cost matrix (finite, n_local >= 1), in the
        units of the loss; e.g. rows ``local_rows(dim_a)`` of the full
        matrix.  A host array of any real dtype (float16 computed as
        float32, integers as float64).
    reg : float
        Entropic regularisation (> 0), in units of ``M``; same on every rank.
    method : {'sinkhorn', 'sinkhorn_log'}, default 'sinkhorn'
        Multiplicative Sinkhorn-Knopp, or the log domain (any ``reg``);
        case-insensitive.
    numItermax, stopThr, verbose, warn
        As :func:`numbaot.sinkhorn`; the same on every rank (checked).
        ``verbose`` prints on rank 0 only.
    log : bool, default False
        Also return a dict with ``'err'`` (global errors at the checks),
        ``'niter'``, and the scalings: for 'sinkhorn' ``'u'`` (this rank's
        rows, shape (n_local,)) and ``'v'`` (global, (dim_b,)); for
        'sinkhorn_log' ``'log_u'``, ``'u'`` (local) and ``'log_v'``, ``'v'``
        (global); arrays of the result dtype.
    warmstart : tuple (log_u_local, log_v), optional
        Initial log-scalings, shapes (n_local,) and (dim_b,): finite host
        arrays of any real dtype, used as float64.  Given on every rank or
        on none.
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD``.
    **kwargs
        Ignored, as in POT.

    Returns
    -------
    plan_local : ndarray, shape (n_local, dim_b)
        This rank's rows of the optimal plan (mass moved from source i to
        target j); float32 when every non-empty input among ``a_local``,
        ``b``, ``M_local`` is float32 (or float16), else float64 (the same
        on every rank: checked).
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError
        Non-numeric arrays or scalars, GPU arrays; ``warmstart`` not a
        tuple/list; ``comm`` not a communicator.
    ValueError
        As :func:`numbaot.sinkhorn`, on any rank (then raised on every rank);
        ``method`` not 'sinkhorn' or 'sinkhorn_log'; 2-D ``b``; ``b``, ``reg``,
        ``method``, ``numItermax``, ``stopThr``, dtypes or ``dim_b`` that differ
        between ranks; zero total mass of ``a``; sum of ``a`` over all ranks
        other than sum of ``b``; max|M| / reg > 2**52 on any rank (as
        :func:`numbaot.sinkhorn`: the plan is not representable).
    ImportError
        mpi4py is not installed.

    Warns
    -----
    UserWarning
        POT's texts ("Sinkhorn did not converge...", "Warning: numerical
        errors at iteration %d"), on every rank.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013, Algorithm 1.
    .. [2] C. Sun, J. Hu, H. Jiang, "MAP-UOT: A Memory-Efficient Approach to
       Unbalanced Optimal Transport Implementation", arXiv:2412.11079 2024,
       sec. 5.
    .. [3] POT 0.9.7, ``ot.sinkhorn`` (``ot.bregman.sinkhorn_knopp``,
       ``ot.bregman.sinkhorn_log``).

    Examples
    --------
    Run as a plain script, ``MPI.COMM_WORLD`` has one rank, which owns
    every row; under ``mpiexec -n 2`` each rank would print its own row.

    >>> import numpy as np
    >>> import numbaot
    >>> from numbaot import distributed
    >>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
    >>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
    >>> rows = distributed.local_rows(2)  # this rank's rows: all of them on one process
    >>> plan_local = distributed.sinkhorn(a[rows], b, M[rows], 0.1)
    >>> print(np.round(plan_local, 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    """
    MPI, comm = _get_comm(comm)
    def check_method():
        if not isinstance(method, str) or method.lower() not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS} for the distributed sinkhorn; "
                             f"got {method!r}")
        return method.lower()

    meth = _collective(comm, check_method)
    reg, numItermax, stopThr = _collective(comm, lambda: _checks.check_common(reg, numItermax, stopThr))
    M, a, b, dtype, n_global = _setup(comm, a_local, b, M_local, True, reg=reg, method=meth,
                                      numItermax=numItermax, stopThr=stopThr)
    warm = _warm(comm, warmstart, M.shape)
    verbose = bool(verbose) and comm.Get_rank() == 0
    if meth == "sinkhorn":
        return _knopp(MPI, comm, M, a, b, dtype, n_global, reg, numItermax, stopThr, verbose,
                      log, warn, warm)
    return _log(MPI, comm, M, a, b, dtype, reg, numItermax, stopThr, verbose, log, warn, warm)


class _RowBlocks:
    """The column-reduction hook of the CPU launchers (``numbaot.cpu.sinkhorn``,
    ``numbaot.cpu.unbalanced``, ``numbaot.cpu.empirical``) for a matrix whose
    rows are split across the ranks of ``comm``: column sums and logsumexps
    are reduced with ``Allreduce``, stopping errors are rank 0's."""

    def __init__(self, MPI, comm, m):
        self.MPI, self.comm = MPI, comm
        self.buf = np.empty(m + 1)

    def col_sum(self, q):
        self.comm.Allreduce(self.MPI.IN_PLACE, q)

    def col_sum_flag(self, q, flag):
        m = q.shape[1]
        self.buf[:m] = q[0]
        self.buf[m] = flag
        self.comm.Allreduce(self.MPI.IN_PLACE, self.buf)
        q[0] = self.buf[:m]
        return self.buf[m]

    def col_sum_max(self, q, x):
        MPI = self.MPI
        MPI.Request.Waitall([self.comm.Iallreduce(MPI.IN_PLACE, q, op=MPI.SUM),
                             self.comm.Iallreduce(MPI.IN_PLACE, x, op=MPI.MAX)])

    def col_logsumexp(self, x):
        _allreduce_lse(self.MPI, self.comm, x)

    def agree(self, x):
        return _agree(self.comm, x)

    def total(self, x):
        """The sum of the scalar x over the ranks, rank 0's value."""
        return _agree(self.comm, self.comm.allreduce(x))


def _knopp(MPI, comm, M, a, b, dtype, n_global, reg, numItermax, stopThr, verbose, log, warn,
           warm):
    n, m = M.shape
    if warm is None:
        u, v = np.full((1, n), 1.0 / n_global), np.full((1, m), 1.0 / m)
    else:
        u, v = np.exp(warm[0]), np.exp(warm[1])
    st = cpu_sinkhorn.KnoppState(M, -1.0 / reg, a.reshape(1, n), b.reshape(1, m), u, v,
                                 reduction=_RowBlocks(MPI, comm, m))
    errs, ii = _loops.knopp_loop(lambda n_steps: cpu_sinkhorn.knopp_steps(st, n_steps),
                                 lambda: cpu_sinkhorn.knopp_error(st), dtype, numItermax,
                                 stopThr, verbose, log, warn)
    plan = cpu_sinkhorn.knopp_plan(st)
    if not log:
        return plan
    u, v = cpu_sinkhorn.knopp_scalings(st)
    return plan, {"err": errs, "niter": ii, "u": u[0].astype(dtype), "v": v[0].astype(dtype)}


def _log(MPI, comm, M, a, b, dtype, reg, numItermax, stopThr, verbose, log, warn, warm):
    n, m = M.shape
    with np.errstate(divide="ignore"):
        loga, logb = np.log(a).reshape(1, n), np.log(b).reshape(1, m)
    if warm is None:
        u, v = np.zeros((1, n)), np.zeros((1, m))
    else:
        u, v = warm[0].copy(), warm[1].copy()
    st = cpu_sinkhorn.LogState(M, -1.0 / reg, loga, logb, b.reshape(1, m), u, v,
                               reduction=_RowBlocks(MPI, comm, m))
    res = _loops.log_loop(lambda n_steps, active: cpu_sinkhorn.log_steps(st, n_steps, active),
                          lambda: cpu_sinkhorn.log_errors(st), 1, dtype, numItermax, stopThr)
    _loops.log_report(SimpleNamespace(n_problems=1), res, verbose, warn)
    plan = cpu_sinkhorn.log_plan(st)
    if not log:
        return plan
    u, v = cpu_sinkhorn.log_potentials(st)
    lg = {"err": res["errs"][0], "niter": res["niter"][0],
          "log_u": u[0].astype(dtype), "log_v": v[0].astype(dtype)}
    lg["u"], lg["v"] = np.exp(lg["log_u"]), np.exp(lg["log_v"])
    return plan, lg


# --------------------------------------------------------------------------
# unbalanced (KL marginals), multiplicative
# --------------------------------------------------------------------------
def sinkhorn_unbalanced(a_local, b, M_local, reg, reg_m, method="sinkhorn", reg_type="kl",
                        c=None, warmstart=None, numItermax=1000, stopThr=1e-6, verbose=False,
                        log=False, comm=None, **kwargs):
    r"""Unbalanced entropic OT (KL marginals) with the rows of ``M`` split across MPI ranks.

    Distributed twin of :func:`numbaot.sinkhorn_unbalanced` with
    ``method='sinkhorn'`` (which mirrors ``ot.unbalanced.sinkhorn_knopp_unbalanced`` [1]_,
    Chizat et al. 2018 [2]_): u = (a / K v)^(reg_m1 / (reg_m1 + reg)),
    v = (b / K^T u)^(reg_m2 / (reg_m2 + reg)), POT's stopping rule (mean of the
    relative sup-norm changes of u and v, every iteration), warnings and
    ``log`` keys.  Each rank reads its block of K once per iteration (the
    MAP-UOT pass [3]_); the partial K^T u are summed by one Allreduce, and
    the iterations are those of ``numbaot.cpu.unbalanced`` (``uot_steps``
    with a column-reduction hook).

    Parameters
    ----------
    a_local : array-like or None, shape (n_local,), float32 or float64
        This rank's slice of the source weights (>= 0; positive total mass).
        ``None``/empty on every rank: uniform over all rows.  Host arrays of
        any real dtype (float16 computed as float32, integers as float64).
    b : array-like or None, shape (dim_b,), float32 or float64
        Target weights, the same on every rank; same dtype rules.
    M_local : array-like, shape (n_local, dim_b), float32 or float64
        This rank's rows of the cost matrix (finite), in the units of the
        loss; a host array of any real dtype, as ``a_local``.
    reg : float
        Entropic regularisation (> 0).
    reg_m : float or indexable of 1 or 2 floats
        Marginal relaxations (>= 0, ``inf`` = hard constraint on that side).
    method : {'sinkhorn'}, default 'sinkhorn'
        Only the multiplicative solver is distributed (case-insensitive).
    reg_type : {'kl', 'entropy'}, default 'kl'
        'kl': KL to the reference measure c = a b^T (or the given ``c``);
        'entropy': c = 1 (POT's warning about ``c`` being overwritten is
        issued); case-insensitive.
    c : array-like, shape (n_local, dim_b), optional
        This rank's rows of an explicit reference measure (>= 0, finite);
        any real dtype, used as float64.
    warmstart : tuple (log_u_local, log_v), optional
        Initial log-scalings, shapes (n_local,), (dim_b,): finite host
        arrays of any real dtype, used as float64.
    numItermax, stopThr, verbose
        As POT; the same on every rank.  ``verbose`` prints on rank 0.
    log : bool
        Also return a dict with ``'err'`` (global), ``'logu'`` (local rows),
        ``'logv'`` (global), ``'cost'`` (<plan, M> over all ranks) and
        ``'total_cost'`` (the unbalanced objective over all ranks), of the
        result dtype.
    comm, **kwargs
        As :func:`sinkhorn`: the communicator (default ``MPI.COMM_WORLD``);
        other keywords are ignored, as in POT.

    Returns
    -------
    plan_local : ndarray, shape (n_local, dim_b)
        This rank's rows of the plan; float32 when every non-empty input
        among ``a_local``, ``b``, ``M_local`` is float32 (or float16), else
        float64.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn` (on any rank, then on every rank); ``reg_m`` < 0,
        NaN or of length other than 1 or 2; ``reg_type`` not 'kl' or
        'entropy'; ``c`` of the wrong shape, negative or not finite;
        ``method`` other than 'sinkhorn' (ValueError).
    ImportError
        mpi4py is not installed.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" (POT's text) when K^T u has a zero
        or u, v overflow; the previous iterate is returned.

    References
    ----------
    .. [1] POT 0.9.7, ``ot.unbalanced.sinkhorn_knopp_unbalanced``: the
       iterations, stopping rule, warnings and ``log`` keys mirrored here.
    .. [2] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
       algorithms for unbalanced optimal transport problems", Mathematics of
       Computation 87(314), 2563-2609, 2018.
    .. [3] C. Sun, J. Hu, H. Jiang, "MAP-UOT: A Memory-Efficient Approach to
       Unbalanced Optimal Transport Implementation", arXiv:2412.11079 2024,
       sec. 5 (the row split and the one Allreduce per iteration).

    Examples
    --------
    Each rank forms only its own rows of the cost matrix, from its source
    points; in a plain (single-process) run the one rank owns both rows:

    >>> import numpy as np
    >>> import numbaot
    >>> from numbaot import distributed
    >>> X_s, X_t = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> mine = distributed.local_rows(len(X_s))
    >>> M_local = numbaot.dist(X_s[mine], X_t)
    >>> a_local = np.array([0.4, 0.6])[mine]
    >>> plan_local = distributed.sinkhorn_unbalanced(a_local, numbaot.unif(3), M_local, 0.1,
    ...                                              reg_m=1.0)
    >>> print(np.round(plan_local, 3))  # total mass 0.94 < 1: the marginals are relaxed
    [[0.314 0.076 0.   ]
     [0.    0.206 0.344]]
    """
    MPI, comm = _get_comm(comm)

    def scalars():
        if not isinstance(method, str) or method.lower() != "sinkhorn":
            raise ValueError("method must be 'sinkhorn' for the distributed sinkhorn_unbalanced; "
                             f"got {method!r}")
        reg_c, nit, thr = _checks.check_common(reg, numItermax, stopThr)
        return reg_c, _checks.check_reg_m(reg_m), _checks.check_reg_type(reg_type), nit, thr

    reg, (reg_m1, reg_m2), reg_type, numItermax, stopThr = _collective(comm, scalars)
    M, a, b, dtype, _ = _setup(comm, a_local, b, M_local, reg=reg, reg_m=(reg_m1, reg_m2),
                               reg_type=reg_type, numItermax=numItermax, stopThr=stopThr,
                               c_given=c is not None, log=bool(log))
    n, m = M.shape
    C = None
    if c is not None:
        C = _collective(comm, lambda: _checks.check_reference_measure(c, M.shape))
    if reg_type == "entropy":
        warnings.warn(_loops.ENTROPY_WARNING)
        C = None
        ca, cb = np.ones(n), np.ones(m)
    else:
        ca, cb = a, b
    use_mat = C is not None
    Cmat = C if use_mat else np.zeros((1, 1))
    warm = _warm(comm, warmstart, M.shape)
    fi1, fi2 = _loops.marginal_exponent(reg_m1, reg), _loops.marginal_exponent(reg_m2, reg)
    if warm is None:
        u, v = np.ones((1, n)), np.ones((1, m))
    else:
        u, v = np.exp(warm[0]), np.exp(warm[1])
    rows_hook = _RowBlocks(MPI, comm, m)
    st = cpu_unbalanced.UotState(M, reg, ca, cb, Cmat, use_mat, a.reshape(1, n), b.reshape(1, m),
                                 u, v, fi1, fi2, reduction=rows_hook)
    errs = []
    nit, failed = cpu_unbalanced.uot_steps(st, numItermax, stopThr, errs)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    errs = [dtype.type(e) for e in errs]
    if log and verbose and comm.Get_rank() == 0:
        _loops.print_errs(errs)
    if not log:
        return cpu_unbalanced.uot_plan(st)
    plan, rows, cols, out = cpu_unbalanced.uot_stats(st, True)
    # column sums, <plan, M>, KL(plan, c) and KL(plan 1, a) over all ranks: one message
    sums = np.empty((1, m + 3))
    sums[0, :m] = cols
    sums[0, m:m + 2] = out
    sums[0, m + 2] = _loops.kl_div(rows, a) if reg_m1 != np.inf else 0.0
    rows_hook.col_sum(sums)
    lin, kl_plan, kl_rows = sums[0, m:]
    total = lin + reg * kl_plan + (reg_m1 * kl_rows if reg_m1 != np.inf else 0.0)
    if reg_m2 != np.inf:
        total += reg_m2 * _loops.kl_div(sums[0, :m], b)
    u, v = cpu_unbalanced.uot_scalings(st)
    with np.errstate(divide="ignore"):
        lg = {"err": errs, "logu": np.log(u[0] + 1e-300).astype(dtype),
              "logv": np.log(v[0] + 1e-300).astype(dtype),
              "cost": dtype.type(lin), "total_cost": dtype.type(total)}
    return plan, lg


# --------------------------------------------------------------------------
# point clouds, costs on the fly
# --------------------------------------------------------------------------
def empirical_sinkhorn(X_s_local, X_t, reg, a_local=None, b=None, metric="sqeuclidean",
                       numIterMax=10000, stopThr=1e-9, verbose=False, log=False, warn=True,
                       warmstart=None, comm=None, **kwargs):
    r"""Entropic OT between point clouds, source points split across MPI ranks.

    Distributed twin of ``numbaot.bregman.empirical_sinkhorn(..., isLazy=True)``
    (which mirrors POT's ``ot.bregman.empirical_sinkhorn`` with ``isLazy=True``
    [3]_), with the source points split as in MAP-UOT [2]_: the log-domain
    iterations [1]_ f <- log a - LSE_j(g_j - cost_ij / reg),
    g <- log b - LSE_i(f_i - cost_ij / reg), the row-marginal L1 error every
    10 iterations, POT's warning.  The costs are recomputed from the
    coordinates inside numbaot's kernels, so no rank ever holds an
    (n_local, dim_b) array: memory O((n_local + dim_b) d) per rank.  The
    per-rank column logsumexps are combined by one Allreduce of dim_b values
    (a ``logaddexp`` reduction) per iteration.

    Parameters
    ----------
    X_s_local : array-like, shape (n_local, d), float32 or float64
        This rank's source points (finite, n_local >= 1).  Host arrays of
        any real dtype (float16 computed as float32, integers as float64).
    X_t : array-like, shape (dim_b, d), float32 or float64
        All target points, the same on every rank; same dtype rules.
    reg : float
        Entropic regularisation (> 0), in units of the cost.
    a_local : array-like, shape (n_local,), float32 or float64, optional
        This rank's source weights (>= 0); ``None`` on every rank: uniform
        over all source points.  Any real dtype, as the points.
    b : array-like, shape (dim_b,), float32 or float64, optional
        Target weights (default uniform), the same on every rank.
    metric : {'sqeuclidean', 'euclidean'}, default 'sqeuclidean'
        Cost between points: |x - y|^2 or |x - y|.
    numIterMax, stopThr, verbose, warn
        As POT; the same on every rank.  ``verbose`` prints on rank 0.
    log : bool
        Also return a dict with ``'err'`` (global), ``'niter'``, ``'u'``
        (= f, this rank's rows) and ``'v'`` (= g, global), as POT's lazy call.
    warmstart : tuple (f_local, g), optional
        Initial log-scalings, shapes (n_local,), (dim_b,): finite host
        arrays of any real dtype, used as float64.
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD``.
    **kwargs
        Ignored (e.g. POT's ``isLazy``/``batchSize``: this call is always lazy).

    Returns
    -------
    f_local : ndarray, shape (n_local,)
        Log-scalings of this rank's source points (the dual potential / reg);
        the plan is exp(f_i + g_j - cost_ij / reg).  float32 when every
        given input among ``X_s_local``, ``X_t``, ``a_local``, ``b`` is
        float32 (or float16), else float64.
    g : ndarray, shape (dim_b,)
        Log-scalings of the target points, identical on every rank; same
        dtype.
    log : dict
        Only if ``log=True``.

    Raises
    ------
    TypeError, ValueError
        Non-numeric or non-finite points, points of different dimensions,
        weights of the wrong length or negative, ``reg`` <= 0, unknown
        ``metric``, costs / reg that may exceed 2**52 (points too far apart
        for ``reg``); values that differ between ranks (on any rank, raised on
        every rank).
    ImportError
        mpi4py is not installed.

    Warns
    -----
    UserWarning
        "Sinkhorn did not converge..." (if ``warn``), on every rank.

    References
    ----------
    .. [1] G. Peyre, M. Cuturi, "Computational Optimal Transport",
       Foundations and Trends in Machine Learning 11(5-6) 2019, Remark 4.23.
    .. [2] C. Sun, J. Hu, H. Jiang, "MAP-UOT: A Memory-Efficient Approach to
       Unbalanced Optimal Transport Implementation", arXiv:2412.11079 2024,
       sec. 5.
    .. [3] POT 0.9.7, ``ot.bregman.empirical_sinkhorn`` (``isLazy=True``).

    Examples
    --------
    The plan is never formed by the solver; here it is rebuilt from the
    log-scalings for display.

    >>> import numpy as np
    >>> import numbaot
    >>> from numbaot import distributed
    >>> X_s, X_t = np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]])
    >>> rows = distributed.local_rows(2)  # all rows on one process
    >>> f, g = distributed.empirical_sinkhorn(X_s[rows], X_t, 0.1, a_local=np.array([0.4, 0.6]))
    >>> print(np.round(np.exp(f[:, None] + g[None, :] - numbaot.dist(X_s[rows], X_t) / 0.1), 3))
    [[0.333 0.067 0.   ]
     [0.    0.267 0.333]]
    """
    MPI, comm = _get_comm(comm)

    def local():
        reg_c, nit, thr = _checks.check_common(reg, numIterMax, stopThr, "numIterMax")
        if metric not in LAZY_METRICS:
            raise ValueError(f"metric must be one of {sorted(LAZY_METRICS)}; got {metric!r}")
        Xs, Xt = check_clouds(X_s_local, X_t, reg_c, metric, ("X_s_local", "X_t"))
        af = _checks.check_local_weights(a_local, Xs.shape[0])
        bf = _checks.check_target_weights(b, Xt.shape[0])
        dtype = _checks.result_dtype(*(_checks.as_real_array(x, name) for x, name in
                                       ((a_local, "a_local"), (b, "b"), (X_s_local, "X_s_local"),
                                        (X_t, "X_t")) if x is not None))
        return reg_c, nit, thr, Xs, Xt, af, bf, dtype

    reg, numIterMax, stopThr, Xs, Xt, a, b, dtype = _collective(comm, local)
    _same_on_all_ranks(comm, reg=reg, numIterMax=numIterMax, stopThr=stopThr, metric=metric,
                       dtype=dtype.str, uniform_a=a is None, b=zlib.crc32(b.tobytes()),
                       X_t=zlib.crc32(np.ascontiguousarray(Xt, dtype=np.float64).tobytes()))
    n, m = Xs.shape[0], Xt.shape[0]
    a, _, _ = _global_a(comm, a, n)
    warm = _warm(comm, warmstart, (n, m))
    Xs = np.ascontiguousarray(Xs, dtype=np.float64)
    Xt = np.ascontiguousarray(Xt, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_a, log_b = np.log(a), np.log(b)
    f, g = (np.zeros(n), np.zeros(m)) if warm is None else (warm[0][0].copy(), warm[1][0].copy())
    rows_hook = _RowBlocks(MPI, comm, m)
    st = cpu_empirical.LazyState(Xs, Xt, log_a, log_b, f, g, -1.0 / reg, LAZY_METRICS[metric],
                                 dtype, reduction=rows_hook)
    errs, i_ot = lazy_loop(lambda n_steps: cpu_empirical.lazy_steps(st, n_steps),
                           lambda: rows_hook.total(row_marginal_l1(*cpu_empirical.lazy_row_lse(st),
                                                                   a)),
                           dtype, numIterMax, stopThr, verbose and comm.Get_rank() == 0, log, warn)
    f_out, g_out = cpu_empirical.lazy_outputs(st, None)
    if not log:
        return f_out, g_out
    return f_out, g_out, {"err": errs, "u": f_out, "v": g_out, "niter": i_ot}
