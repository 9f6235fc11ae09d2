r"""Unbalanced entropic optimal transport, drop-in for ``ot.unbalanced``.

The problem (Chizat, Peyre, Schmitzer, Vialard 2018, "Scaling algorithms for
unbalanced optimal transport problems", eq. 1.2 with KL marginal penalties;
Frogner et al. 2015)

.. math::
    \gamma = \arg\min_{\gamma \ge 0} \langle \gamma, M \rangle_F
        + \mathrm{reg}\, \mathrm{KL}(\gamma, c)
        + \mathrm{reg\_m}_1\, \mathrm{KL}(\gamma 1, a)
        + \mathrm{reg\_m}_2\, \mathrm{KL}(\gamma^T 1, b)

with reference measure ``c = a b^T`` (``reg_type='kl'``), ``c = 1``
(``'entropy'``) or an explicit ``c``.  Its solution is
``gamma = diag(u) K diag(v)``, ``K = exp(-M / reg) * c``, reached by the
scaling iterations ``u = (a / K v)^fi1``, ``v = (b / K^T u)^fi2`` with
``fi = reg_m / (reg_m + reg)`` (``fi = 1`` for ``reg_m = inf``: that marginal
is then a hard constraint, "semi-relaxed").

numbaot's ``method='sinkhorn'`` reads K exactly once per iteration (MAP-UOT,
Sun, Hu, Jiang 2024, in the read-only scaling form): the row pass that forms
(K v)_i and the new u_i also accumulates K_ij u_i into per-chunk column sums,
merged in a fixed order (results independent of the thread count).

Every function mirrors the POT 0.9.7 function of the same name (arguments,
defaults, returns, ``log`` keys, stopping rules, warnings).  Differences:

* bad input raises ``ValueError``/``TypeError`` naming the argument
  (``reg <= 0``, ``reg_m < 0`` or of length > 2, unknown ``reg_type``, shape
  mismatches, NaN/inf data, negative weights);
* ``method='sinkhorn_log'`` (numbaot extension): a log-domain solver that
  stays finite at small ``reg`` where the multiplicative one overflows;
* 2-D ``a`` with 2-D ``b`` (method 'sinkhorn' / 'sinkhorn_log'): "paired
  batches", one source histogram per problem;
* vectors are kept in float64 whatever the input dtype; ``K`` keeps the
  input dtype (float32 in: half the memory traffic); with a float32 ``K``
  the CPU multiplicative solver forms the products and their partial sums
  over blocks of 2048 columns (8 rows) in float32, as POT's float32 mat-vecs
  do, and adds the partials in float64 (``numbaot.cpu.unbalanced``); results
  come back in the input dtype.
* GPU arrays (numba device arrays, CuPy) run ``method='sinkhorn'`` and
  ``'sinkhorn_log'`` on the GPU (``numbaot.cuda.unbalanced``,
  float32 problems in float32 arithmetic) and return device arrays; the other
  methods and the barycenters take host arrays (a GPU array raises
  ``TypeError``).
"""
import warnings

import numpy as np

from . import _checks, _dispatch, _loops
from ._checks import prepare_problem
from .cpu import chunk_layout
from .cpu import sinkhorn as _ks
from .cpu import unbalanced as _k

__all__ = [
    "sinkhorn_unbalanced",
    "sinkhorn_unbalanced2",
    "sinkhorn_knopp_unbalanced",
    "sinkhorn_unbalanced_log",
    "sinkhorn_stabilized_unbalanced",
    "sinkhorn_unbalanced_translation_invariant",
    "barycenter_unbalanced",
    "barycenter_unbalanced_sinkhorn",
    "barycenter_unbalanced_stabilized",
]

_METHODS = ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_translation_invariant",
            "sinkhorn_reg_scaling", "sinkhorn_log")


# --------------------------------------------------------------------------
# validated setup shared by the solvers
# --------------------------------------------------------------------------
class _Setup:
    """Validated unbalanced problem: P (numbaot._checks.Problem), reg,
    reg_m1/2, fi1/2, the reference measure (ca, cb rank one, or C), the
    initial scalings (log u0, log v0) or None, numItermax, stopThr."""


def _setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
           allow_paired=True, method_name=None, allow_cuda=False):
    P = prepare_problem(a, b, M, method_name=method_name)
    if P.device == "cuda" and not allow_cuda:
        raise TypeError(
            f"{method_name or 'this method'} takes host (NumPy) arrays only; GPU arrays are "
            "supported by methods 'sinkhorn' and 'sinkhorn_log'"
        )
    if P.paired and not allow_paired:
        raise ValueError(
            f"2-D a (paired batches) is supported by methods 'sinkhorn' and 'sinkhorn_log' "
            f"only, not by {method_name}"
        )
    S = _Setup()
    S.P = P
    S.reg = _checks.check_reg(reg)
    S.reg_m1, S.reg_m2 = _checks.check_reg_m(reg_m)
    S.reg_type = _checks.check_reg_type(reg_type)
    S.numItermax = _checks.check_iter_count(numItermax, "numItermax")
    S.stopThr = _checks.check_real_scalar(stopThr, "stopThr")
    S.fi1, S.fi2 = _loops.marginal_exponent(S.reg_m1, S.reg), _loops.marginal_exponent(S.reg_m2, S.reg)
    dim_a, dim_b = P.shape
    C = None
    if c is not None:
        if _dispatch.is_device_array(c):  # O(dim_a dim_b) copy: validated on the host
            c = _dispatch.as_device_array(c).copy_to_host()
        C = _checks.check_reference_measure(c, P.shape)
    if S.reg_type == "entropy":
        warnings.warn(_loops.ENTROPY_WARNING)
        C = None
        ca, cb = np.ones(dim_a), np.ones(dim_b)
    elif P.n_hists:
        C = None  # as POT: with 2-D b, K = exp(-M / reg) (no reference measure)
        ca, cb = np.ones(dim_a), np.ones(dim_b)
    else:
        ca, cb = P.a[0], P.b[0]
    S.ca, S.cb, S.C = ca, cb, C
    S.use_mat = C is not None
    S.Cmat = C if C is not None else np.zeros((1, 1))
    S.warm = None
    if warmstart is not None:
        S.warm = _checks.check_unbalanced_warmstart(warmstart, P.shape, P.n_hists)
    return S


def _total_cost(S, lin, kl_plan, rows, cols):
    total = lin + S.reg * kl_plan
    if S.reg_m1 != np.inf:
        total += S.reg_m1 * _loops.kl_div(rows, S.P.a[0])
    if S.reg_m2 != np.inf:
        total += S.reg_m2 * _loops.kl_div(cols, S.P.b[0])
    return total


def _plan_outputs(S, log, lg, stats_fn, want_plan=True):
    """Plan (if wanted) and, when ``log``, lg['cost'] and lg['total_cost'] (1-D b)."""
    P = S.P
    dim_a, dim_b = P.shape
    n_chunks, chunk_rows = chunk_layout(dim_a, 1, dim_b)
    plan = np.empty(P.shape, dtype=P.dtype) if want_plan else np.empty((1, 1), dtype=P.dtype)
    rows = np.empty(dim_a)
    cols = np.empty(dim_b)
    Qc = np.empty((n_chunks, 1, dim_b))
    out = np.empty(2)
    stats_fn(want_plan, plan, n_chunks, chunk_rows, rows, Qc, cols, out)
    if log:
        lg["cost"] = P.dtype.type(out[0])
        lg["total_cost"] = P.dtype.type(_total_cost(S, out[0], out[1], rows, cols))
    return plan if want_plan else None


def _vec_out(x, P):
    """(K, dim) float64 -> (dim,) or (dim, n_hists) in the result dtype."""
    return np.asarray(x[0] if not P.n_hists else x.T, dtype=P.dtype)


def _errs_out(errs, n, dtype):
    return [dtype.type(e) for e in errs[:n]]


# --------------------------------------------------------------------------
# multiplicative solver (one read of K per iteration)
# --------------------------------------------------------------------------
def _knopp(S, verbose, log, want_plan=True):
    P = S.P
    if P.device == "cuda":
        return _knopp_cuda(S, verbose, log, want_plan)
    dim_a, dim_b = P.shape
    K = P.n_problems
    Kmat = np.empty(P.shape, dtype=P.dtype)
    _k.uot_gibbs(P.M, -1.0 / S.reg, S.ca, S.cb, S.Cmat, S.use_mat, Kmat)
    if S.warm is None:
        u, v = np.ones((K, dim_a)), np.ones((K, dim_b))
    else:
        u, v = np.exp(S.warm[0]), np.exp(S.warm[1])
    n_chunks, chunk_rows = chunk_layout(dim_a, K, dim_b)
    Q = np.empty((n_chunks, K, dim_b))
    q = np.empty((K, dim_b))
    errs = np.empty(max(S.numItermax, 1))
    nit, failed = _k.uot_steps(Kmat, P.a, P.b, u, v, S.fi1, S.fi2, n_chunks, chunk_rows,
                               Q, q, S.numItermax, S.stopThr, errs)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    lg = {"err": _errs_out(errs, nit, P.dtype)} if log else None
    if log and verbose:
        _loops.print_errs(lg["err"])
    if log:
        with np.errstate(divide="ignore"):
            lg["logu"] = _vec_out(np.log(u + 1e-300), P)
            lg["logv"] = _vec_out(np.log(v + 1e-300), P)
    if P.n_hists:
        loss = np.empty(K)
        _ks.scaled_loss(Kmat, P.M, u, v, n_chunks, chunk_rows, loss)
        res = np.asarray(loss, dtype=P.dtype)
    else:
        def stats(wp, plan, nc, cr, rows, Qc, cols, out):
            _k.uot_plan_stats(Kmat, P.M, u[0], v[0], S.Cmat, S.ca, S.cb, S.use_mat, wp, plan,
                              nc, cr, rows, Qc, cols, out)

        if log or not want_plan:
            res = _plan_outputs(S, log, lg, stats, want_plan)
        else:
            res = np.empty(P.shape, dtype=P.dtype)
            _ks.scaled_plan(Kmat, u[0], v[0], res)
    return (res, lg) if log else res


def _dev(x, dtype):
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(x, dtype=dtype))


def _knopp_cuda(S, verbose, log, want_plan=True):
    """The multiplicative solver on the GPU (numbaot.cuda.unbalanced); the
    matrix stays on the device, vectors (O(dim)) are copied."""
    from numba import cuda

    from .cuda import sinkhorn as cs
    from .cuda import unbalanced as cu

    P = S.P
    dt = P.dtype
    dim_a, dim_b = P.shape
    K = P.n_problems
    ca, cb = _dev(S.ca, dt), _dev(S.cb, dt)
    Cd = _dev(S.Cmat, dt)
    Kmat = cuda.device_array(P.shape, dtype=dt)
    cu.uot_gibbs(P.M, -1.0 / S.reg, ca, cb, Cd, S.use_mat, Kmat)
    if S.warm is None:
        u, v = np.ones((K, dim_a)), np.ones((K, dim_b))
    else:
        u, v = np.exp(S.warm[0]), np.exp(S.warm[1])
    st = cu.UotState(Kmat, _dev(P.a, dt), _dev(P.b, dt), _dev(u, dt), _dev(v, dt), S.fi1, S.fi2)
    errs = []
    nit, failed = cu.uot_steps(st, S.numItermax, S.stopThr, errs)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    lg = {"err": _errs_out(errs, len(errs), dt)} if log else None
    if log and verbose:
        _loops.print_errs(lg["err"])
    uh = st.u.copy_to_host().astype(np.float64)
    vh = st.v.copy_to_host().astype(np.float64)
    if log:
        with np.errstate(divide="ignore"):
            lg["logu"] = _dispatch.like_input(_dev(_vec_out(np.log(uh + 1e-300), P), dt), P.like)
            lg["logv"] = _dispatch.like_input(_dev(_vec_out(np.log(vh + 1e-300), P), dt), P.like)
    if P.n_hists:
        loss = cuda.device_array(K, dtype=dt)
        cs.scaled_loss(Kmat, P.M, st.u, st.v, loss)
        res = _dispatch.like_input(loss, P.like)
    else:
        plan = cuda.device_array(P.shape if want_plan else (1, 1), dtype=dt)
        rows, cols, out = cu.uot_plan_stats(Kmat, P.M, st.u[0], st.v[0], Cd, ca, cb,
                                            S.use_mat, want_plan, plan)
        if log:
            lg["cost"] = dt.type(out[0])
            lg["total_cost"] = dt.type(_total_cost(S, out[0], out[1], rows, cols))
        res = _dispatch.like_input(plan, P.like) if want_plan else None
    return (res, lg) if log else res


def sinkhorn_knopp_unbalanced(a, b, M, reg, reg_m, reg_type="kl", c=None, warmstart=None,
                              numItermax=1000, stopThr=1e-6, verbose=False, log=False,
                              **kwargs):
    r"""Unbalanced entropic OT by scaling iterations; mirrors ``ot.unbalanced.sinkhorn_knopp_unbalanced``.

    Chizat et al. 2018, Algorithm 2 (KL divergences): u = (a / K v)^fi1,
    v = (b / K^T u)^fi2, K = exp(-M / reg) * c, fi = reg_m / (reg_m + reg).
    One read of K per iteration (see the module docstring).

    Parameters
    ----------
    a : array-like, shape (dim_a,) or (dim_a, n_hists), float
        Source masses (>= 0); empty means uniform 1/dim_a.  2-D (numbaot
        extension, needs 2-D ``b`` with the same n_hists): paired batch.
    b : array-like, shape (dim_b,) or (dim_b, n_hists), float
        Target masses (>= 0); empty means uniform.  2-D: n_hists problems
        sharing ``M`` (then, as POT, ``K = exp(-M / reg)`` with no reference
        measure, and the losses are returned).
    M : array-like, shape (dim_a, dim_b), float32 or float64
        Cost matrix (finite).
    reg : float
        Entropic regularisation (> 0), units of ``M``.
    reg_m : float or indexable of length 1 or 2
        Marginal relaxation (>= 0) of the source and target KL penalties;
        ``inf`` on one side makes that marginal a hard constraint.
    reg_type : {'kl', 'entropy'}
        'kl': reference measure ``c = a b^T`` (or the given ``c``);
        'entropy': ``c = 1`` (a warning says ``c`` is overwritten, as POT).
    c : array-like, shape (dim_a, dim_b), optional
        Explicit reference measure (>= 0, finite), used with 'kl' and 1-D b.
    warmstart : tuple (log u, log v), optional
        Initial log-scalings, shapes (dim_a,), (dim_b,) (or (dim, n_hists)).
    numItermax : int, default 1000
    stopThr : float, default 1e-6
        Stop once err = (err_u + err_v) / 2 < stopThr, err_x =
        max|x - x_prev| / max(max|x|, max|x_prev|, 1), checked every iteration.
    verbose : bool
        With ``log``, print the err table (after the run).
    log : bool
        Also return a dict: ``'err'`` (list, one per iteration), ``'logu'``,
        ``'logv'`` (log(u + 1e-300), shape (dim,) or (dim, n_hists)); for 1-D b
        also ``'cost'`` (<gamma, M>) and ``'total_cost'`` (the objective above).

    Returns
    -------
    gamma : ndarray, shape (dim_a, dim_b), dtype of the inputs
        Unbalanced plan; for 2-D ``b`` the losses <gamma_k, M>, shape (n_hists,).
    log : dict
        Only if ``log``.

    GPU
    ---
    With ``M`` a GPU array (numba device array or CuPy), the iterations run on
    the GPU (``numbaot.cuda.unbalanced``) in the dtype of the data, and the plan
    / losses / ``logu``, ``logv`` come back as device arrays of the caller's
    kind (``cost``, ``total_cost`` and ``err`` as host scalars).  An explicit
    ``c`` on the GPU is copied to the host to be validated.

    Raises
    ------
    TypeError
        Non-numeric/complex arrays, non-numeric scalars.
    ValueError
        ``reg`` <= 0 or not finite; ``reg_m`` < 0, NaN, or of length > 2;
        ``reg_type`` not 'kl'/'entropy'; ``M`` not 2-D or not finite; weights
        of the wrong length, negative, not finite or of zero mass; ``c`` of the
        wrong shape, negative or not finite; malformed ``warmstart``.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" when K^T u has a zero or u, v get a
        NaN/inf (the previous iterate is returned), and the 'entropy' warning.
    """
    S = _setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
               allow_cuda=True)
    return _knopp(S, verbose, log)


# --------------------------------------------------------------------------
# log-domain solver (numbaot extension)
# --------------------------------------------------------------------------
def _log_parts(S):
    """M0 (dim_a, dim_b), log reference vectors ga (1, dim_a), gb (1, dim_b):
    log K = -M0 / reg + ga_i + gb_j."""
    P = S.P
    dim_a, dim_b = P.shape
    with np.errstate(divide="ignore"):
        if S.use_mat:
            M0 = np.ascontiguousarray(P.M - S.reg * np.log(S.C), dtype=P.dtype)
            ga, gb = np.zeros((1, dim_a)), np.zeros((1, dim_b))
        else:
            M0 = P.M
            ga, gb = np.log(S.ca).reshape(1, -1), np.log(S.cb).reshape(1, -1)
    return M0, np.ascontiguousarray(ga), np.ascontiguousarray(gb)


def _log_solve(S, verbose, log, want_plan=True):
    P = S.P
    if P.device == "cuda":
        return _log_solve_cuda(S, verbose, log, want_plan)
    dim_a, dim_b = P.shape
    K = P.n_problems
    M0, ga, gb = _log_parts(S)
    with np.errstate(divide="ignore"):
        la, lb = np.log(P.a), np.log(P.b)
    if S.warm is None:
        logu, logv = np.zeros((K, dim_a)), np.zeros((K, dim_b))
    else:
        logu, logv = S.warm[0].copy(), S.warm[1].copy()
    n_chunks, chunk_rows = chunk_layout(dim_a, K, dim_b)
    errs = np.empty(max(S.numItermax, 1))
    c = -1.0 / S.reg
    nit, failed = _k.uot_log_steps(M0, c, ga, gb, la, lb, S.fi1, S.fi2, logu, logv,
                                   n_chunks, chunk_rows, S.numItermax, S.stopThr, errs)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    lg = {"err": _errs_out(errs, nit, P.dtype)} if log else None
    if log and verbose:
        _loops.print_errs(lg["err"])
    if log:
        lg["logu"], lg["logv"] = _vec_out(logu, P), _vec_out(logv, P)
    if P.n_hists:
        loss = np.empty(K)
        _ks.gibbs_loss(P.M, c, np.ascontiguousarray(logu + ga), np.ascontiguousarray(logv + gb),
                       n_chunks, chunk_rows, loss)
        res = np.asarray(loss, dtype=P.dtype)
    else:
        fu, fv = logu[0] + ga[0], logv[0] + gb[0]

        def stats(wp, plan, nc, cr, rows, Qc, cols, out):
            _k.uot_log_plan_stats(M0, P.M, c, fu, fv, S.Cmat, S.ca, S.cb, S.use_mat, wp, plan,
                                  nc, cr, rows, Qc, cols, out)

        res = _plan_outputs(S, log, lg if log else {}, stats, want_plan)
    return (res, lg) if log else res


def _log_solve_cuda(S, verbose, log, want_plan=True):
    """The log-domain solver on the GPU (numbaot.cuda.unbalanced).  With an
    explicit ``c``, M0 = M - reg log c is formed on the host (``c`` was
    validated there) and copied to the device."""
    from numba import cuda

    from .cuda import sinkhorn as cs
    from .cuda import unbalanced as cu

    P = S.P
    dt = P.dtype
    dim_a, dim_b = P.shape
    K = P.n_problems
    c = -1.0 / S.reg
    with np.errstate(divide="ignore"):
        if S.use_mat:
            M0 = _dev(P.M.copy_to_host() - S.reg * np.log(S.C), dt)
            ga, gb = np.zeros((1, dim_a)), np.zeros((1, dim_b))
        else:
            M0 = P.M
            ga, gb = np.log(S.ca).reshape(1, -1), np.log(S.cb).reshape(1, -1)
        la = np.log(P.a) - ga
        la[np.log(P.a) == -np.inf] = -np.inf
        lb = np.broadcast_to(np.log(P.b) - gb, (K, dim_b)).copy()
        lb[np.broadcast_to(P.b, (K, dim_b)) == 0] = -np.inf
    if S.warm is None:
        logu, logv = np.zeros((K, dim_a)), np.zeros((K, dim_b))
    else:
        logu, logv = S.warm[0], S.warm[1]
    st = cu.UotLogState(M0, c, _dev(ga, dt), _dev(gb, dt), _dev(la, dt), _dev(lb, dt),
                        _dev(logu, dt), _dev(logv, dt), S.fi1, S.fi2)
    errs = []
    nit, failed = cu.uot_log_steps(st, S.numItermax, S.stopThr, errs)
    if failed:
        warnings.warn(_loops.NUMERICAL_ERRORS % nit)
    lg = {"err": _errs_out(errs, len(errs), dt)} if log else None
    if log and verbose:
        _loops.print_errs(lg["err"])
    uh = st.u.copy_to_host().astype(np.float64)
    vh = st.v.copy_to_host().astype(np.float64)
    if log:
        lg["logu"] = _dispatch.like_input(_dev(_vec_out(uh, P), dt), P.like)
        lg["logv"] = _dispatch.like_input(_dev(_vec_out(vh, P), dt), P.like)
    fu, fv = uh + ga, vh + gb
    if P.n_hists:
        loss = cuda.device_array(K, dtype=dt)
        cs.gibbs_loss(P.M, c, _dev(fu, dt), _dev(fv, dt), loss)
        res = _dispatch.like_input(loss, P.like)
    else:
        plan = cuda.device_array(P.shape if want_plan else (1, 1), dtype=dt)
        rows, cols, out = cu.uot_log_plan_stats(M0, P.M, c, _dev(fu[0], dt), _dev(fv[0], dt),
                                                _dev(S.Cmat, dt), _dev(S.ca, dt), _dev(S.cb, dt),
                                                S.use_mat, want_plan, plan)
        if log:
            lg["cost"] = dt.type(out[0])
            lg["total_cost"] = dt.type(_total_cost(S, out[0], out[1], rows, cols))
        res = _dispatch.like_input(plan, P.like) if want_plan else None
    return (res, lg) if log else res


def sinkhorn_unbalanced_log(a, b, M, reg, reg_m, reg_type="kl", c=None, warmstart=None,
                            numItermax=1000, stopThr=1e-6, verbose=False, log=False,
                            **kwargs):
    r"""Log-domain unbalanced Sinkhorn (numbaot extension, ``method='sinkhorn_log'``).

    The iterations of :func:`sinkhorn_knopp_unbalanced` on the log-scalings
    (Chizat et al. 2018, sec. 4.1; Schmitzer 2019, log-domain stabilisation):

        log u = fi1 (log a - LSE_j(log K_ij + log v_j)),
        log v = fi2 (log b - LSE_i(log K_ij + log u_i)),

    each logsumexp max-shifted, so nothing overflows at small ``reg`` where
    u = exp(log u) would.  Same fixed point as the multiplicative solver.

    Parameters and returns are those of :func:`sinkhorn_knopp_unbalanced`,
    except: ``log['logu']``/``log['logv']`` are the log-scalings themselves,
    and the stopping error is err = (err_logu + err_logv) / 2 with err_x =
    max|x - x_prev| / max(max|x|, max|x_prev|, 1) on the log-scalings
    (finite entries), checked every iteration.

    GPU arrays run on the GPU (``numbaot.cuda.unbalanced.uot_log_steps``)
    and return device arrays, as :func:`sinkhorn_knopp_unbalanced`; with an
    explicit ``c`` there, M - reg log c is formed on the host (one
    dim_a x dim_b copy each way).

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp_unbalanced`.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s" if a NaN appears (the previous
        iterate is returned); the 'entropy' warning.
    """
    S = _setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
               allow_cuda=True)
    return _log_solve(S, verbose, log)


# --------------------------------------------------------------------------
# stabilized and translation-invariant solvers (host loops, POT's algorithms)
# --------------------------------------------------------------------------
def _pot_layout(S):
    """a (dim_a,), b (dim_b,) or (dim_b, n_hists), M float64, the M0 of POT
    (M - reg log c for 1-D b), n_hists."""
    P = S.P
    a = P.a[0]
    b = P.b[0] if not P.n_hists else np.ascontiguousarray(P.b.T)
    M = P.M.astype(np.float64)
    if P.n_hists:
        return a, b, M, M, None
    c = S.C if S.use_mat else np.outer(S.ca, S.cb)
    with np.errstate(divide="ignore"):
        M0 = M - S.reg * np.log(c)
    return a, b, M, M0, c


def _init_uv(S, n_hists, dim_a, dim_b, u_cols):
    if S.warm is None:
        if n_hists:
            return np.ones((dim_a, u_cols)), np.ones((dim_b, n_hists))
        return np.ones(dim_a), np.ones(dim_b)
    if n_hists:
        return np.exp(S.warm[0]).T.copy(), np.exp(S.warm[1]).T.copy()
    return np.exp(S.warm[0][0]), np.exp(S.warm[1][0])


def _bad(Ktu, u, v):
    return (np.any(Ktu == 0.0) or not np.all(np.isfinite(u)) or not np.all(np.isfinite(v)))


def _rel(x, xprev):
    return np.max(np.abs(x - xprev)) / max(np.max(np.abs(x)), np.max(np.abs(xprev)), 1.0)


def _finish_host(S, u, v, K, M, c, logu, logv, log, lg, n_hists, want_plan=True):
    """POT's outputs from float64 u, v (or log-scalings) on the host."""
    dt = S.P.dtype
    if log:
        lg["logu"], lg["logv"] = np.asarray(logu, dt), np.asarray(logv, dt)
    if n_hists:
        res = np.asarray(np.einsum("ik,ij,jk,ij->k", u, K, v, M), dt)
        return (res, lg) if log else res
    plan = u[:, None] * K * v[None, :]
    if log:
        lin = float(np.sum(plan * M))
        lg["cost"] = dt.type(lin)
        lg["total_cost"] = dt.type(_total_cost(S, lin, _loops.kl_div(plan, c), plan.sum(1), plan.sum(0)))
    plan = np.asarray(plan, dt)
    return (plan, lg) if log else plan


def sinkhorn_stabilized_unbalanced(a, b, M, reg, reg_m, reg_type="kl", c=None, warmstart=None,
                                   tau=1e5, numItermax=1000, stopThr=1e-6, verbose=False,
                                   log=False, **kwargs):
    r"""Log-stabilized unbalanced Sinkhorn with absorption; mirrors
    ``ot.unbalanced.sinkhorn_stabilized_unbalanced``.

    Schmitzer 2019 ("Stabilized sparse scaling algorithms for entropy
    regularized transport problems", Algorithm 2) for the unbalanced problem
    (Chizat et al. 2018): scalings above ``tau`` are absorbed into the dual
    potentials (alpha, beta) and K is rebuilt.  Host loop in float64 (NumPy
    mat-vecs), POT's control flow: err on u only, checked at iteration 0 and
    every 10th iteration without absorption.

    Parameters
    ----------
    a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        As :func:`sinkhorn_knopp_unbalanced` (no paired batches).
    tau : float, default 1e5
        Absorption threshold (> 0).

    Returns
    -------
    gamma : ndarray (dim_a, dim_b), or losses (n_hists,) for 2-D b
    log : dict
        ``'err'``, ``'logu'``, ``'logv'`` (alpha/reg + log u, ...), and for 1-D
        b ``'cost'``, ``'total_cost'``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sinkhorn_knopp_unbalanced`; ``tau`` <= 0 or not finite; 2-D ``a``.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s"; "Stabilized Unbalanced Sinkhorn did
        not converge..." when err > stopThr at the end; the 'entropy' warning.
    """
    S = _setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
               allow_paired=False, method_name="sinkhorn_stabilized_unbalanced")
    tau = _checks.check_reg(tau, "tau")
    a, b, M, M0, c = _pot_layout(S)
    n_hists = S.P.n_hists
    dim_a, dim_b = M.shape
    reg, reg_m1, reg_m2, fi_1, fi_2 = S.reg, S.reg_m1, S.reg_m2, S.fi1, S.fi2
    lg = {"err": []} if log else None
    u, v = _init_uv(S, n_hists, dim_a, dim_b, n_hists)
    if n_hists:
        a = a.reshape(dim_a, 1)
    K = np.exp(-M0 / reg)
    cpt = 0
    err = 1.0
    alpha = np.zeros(dim_a)
    beta = np.zeros(dim_b)
    ones_a, ones_b = np.ones(dim_a), np.ones(dim_b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        while err > S.stopThr and cpt < S.numItermax:
            uprev, vprev = u, v
            Kv = K.dot(v)
            f_alpha = np.exp(-alpha / (reg + reg_m1)) if reg_m1 != np.inf else ones_a
            f_beta = np.exp(-beta / (reg + reg_m2)) if reg_m2 != np.inf else ones_b
            if n_hists:
                f_alpha, f_beta = f_alpha[:, None], f_beta[:, None]
            u = ((a / (Kv + 1e-16)) ** fi_1) * f_alpha
            Ktu = K.T.dot(u)
            v = ((b / (Ktu + 1e-16)) ** fi_2) * f_beta
            absorbing = False
            if np.any(u > tau) or np.any(v > tau):
                absorbing = True
                if n_hists:
                    alpha = alpha + reg * np.log(np.max(u, 1))
                    beta = beta + reg * np.log(np.max(v, 1))
                else:
                    alpha = alpha + reg * np.log(np.max(u))
                    beta = beta + reg * np.log(np.max(v))
                K = np.exp((alpha[:, None] + beta[None, :] - M0) / reg)
                v = np.ones(v.shape)
            if _bad(Ktu, u, v):
                warnings.warn(_loops.NUMERICAL_ERRORS % cpt)
                u, v = uprev, vprev
                break
            if (cpt % 10 == 0 and not absorbing) or cpt == 0:
                err = _rel(u, uprev)
                if log:
                    lg["err"].append(S.P.dtype.type(err))
                if verbose:
                    _loops.print_header_and_row(cpt, err, 200)
            cpt = cpt + 1
        if err > S.stopThr:
            warnings.warn(_loops.STAB_UNBALANCED_NOT_CONVERGED)
        if n_hists:
            logu = alpha[:, None] / reg + np.log(u)
            logv = beta[:, None] / reg + np.log(v)
        else:
            logu = alpha / reg + np.log(u)
            logv = beta / reg + np.log(v)
        dt = S.P.dtype
        if log:
            lg["logu"], lg["logv"] = np.asarray(logu, dt), np.asarray(logv, dt)
        if n_hists:
            # POT: exp(logsumexp(log(M + 1e-100) + logu + logv - M0 / reg))
            res = np.einsum("ij,ik,jk->k", (M + 1e-100) * np.exp(-M0 / reg),
                            np.exp(logu), np.exp(logv))
            res = np.asarray(res, dt)
            return (res, lg) if log else res
        plan = np.exp(logu[:, None] + logv[None, :] - M0 / reg)
        if log:
            lin = float(np.sum(plan * M))
            lg["cost"] = dt.type(lin)
            lg["total_cost"] = dt.type(_total_cost(S, lin, _loops.kl_div(plan, c), plan.sum(1), plan.sum(0)))
        plan = np.asarray(plan, dt)
        return (plan, lg) if log else plan


def sinkhorn_unbalanced_translation_invariant(a, b, M, reg, reg_m, reg_type="kl", c=None,
                                              warmstart=None, numItermax=1000, stopThr=1e-6,
                                              verbose=False, log=False, **kwargs):
    r"""Translation-invariant unbalanced Sinkhorn; mirrors
    ``ot.unbalanced.sinkhorn_unbalanced_translation_invariant``.

    Séjourné, Vialard, Peyré 2022 ("Faster unbalanced optimal transport:
    translation invariant Sinkhorn and 1-D Frank-Wolfe", Algorithm 2): the
    scaling updates are followed by the optimal translation of the dual pair.
    Host loop in float64 (NumPy mat-vecs), POT's control flow and err.

    Parameters, returns, raises and warnings as
    :func:`sinkhorn_knopp_unbalanced` (no paired batches).
    """
    S = _setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
               allow_paired=False, method_name="sinkhorn_unbalanced_translation_invariant")
    a, b, M, M0, c = _pot_layout(S)
    n_hists = S.P.n_hists
    dim_a, dim_b = M.shape
    reg, reg_m1, reg_m2, fi_1, fi_2 = S.reg, S.reg_m1, S.reg_m2, S.fi1, S.fi2
    inf = np.inf
    lg = {"err": []} if log else None
    u, v = _init_uv(S, n_hists, dim_a, dim_b, 1)
    if n_hists:
        a = a.reshape(dim_a, 1)
    u_, v_ = u, v
    K = np.exp(-M0 / reg)
    k1 = reg * reg_m1 / ((reg + reg_m1) * (reg_m1 + reg_m2)) if reg_m1 != inf else 0
    k2 = reg * reg_m2 / ((reg + reg_m2) * (reg_m1 + reg_m2)) if reg_m2 != inf else 0
    k_rho1 = k1 * reg_m1 / reg if reg_m1 != inf else 0
    k_rho2 = k2 * reg_m2 / reg if reg_m2 != inf else 0
    if reg_m1 == inf and reg_m2 == inf:
        xi1, xi2, fi_12 = 0, 0, 1
    elif reg_m1 == inf:
        xi1, xi2, fi_12 = 0, reg / reg_m2, reg_m2
    elif reg_m2 == inf:
        xi1, xi2, fi_12 = reg / reg_m1, 0, reg_m1
    else:
        xi1 = (reg_m2 * reg) / (reg_m1 * (reg + reg_m1 + reg_m2))
        xi2 = (reg_m1 * reg) / (reg_m2 * (reg + reg_m1 + reg_m2))
        fi_12 = reg_m1 * reg_m2 / (reg_m1 + reg_m2)
    xi_rho1 = xi1 * reg_m1 / reg if reg_m1 != inf else 0
    xi_rho2 = xi2 * reg_m2 / reg if reg_m2 != inf else 0
    reg_ratio1 = reg / reg_m1 if reg_m1 != inf else 0
    reg_ratio2 = reg / reg_m2 if reg_m2 != inf else 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(S.numItermax):
            uprev, vprev = u, v
            Kv = K.dot(v_)
            u_hat = (a / Kv) ** fi_1 * np.sum(b * v_ ** reg_ratio2) ** k_rho2
            u_ = u_hat * np.sum(a * u_hat ** (-reg_ratio1)) ** (-xi_rho1)
            Ktu = K.T.dot(u_)
            v_hat = (b / Ktu) ** fi_2 * np.sum(a * u_ ** (-reg_ratio1)) ** k_rho1
            v_ = v_hat * np.sum(b * v_hat ** (-reg_ratio2)) ** (-xi_rho2)
            if _bad(Ktu, u_, v_):
                warnings.warn(_loops.NUMERICAL_ERRORS % i)
                u, v = uprev, vprev
                break
            t = (np.sum(a * u_ ** (-reg_ratio1)) / np.sum(b * v_ ** (-reg_ratio2))) ** (fi_12 / reg)
            u = u_ * t
            v = v_ / t
            err = 0.5 * (_rel(u, uprev) + _rel(v, vprev))
            if log:
                lg["err"].append(S.P.dtype.type(err))
                if verbose:
                    _loops.print_header_and_row(i, err, 50)
            if err < S.stopThr:
                break
        logu, logv = np.log(u + 1e-300), np.log(v + 1e-300)
    return _finish_host(S, u, v, K, M, c, logu, logv, log, lg, n_hists)


# --------------------------------------------------------------------------
# dispatchers
# --------------------------------------------------------------------------
def _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
           verbose, log, kwargs, want_plan=True):
    if method == "sinkhorn_reg_scaling":
        warnings.warn(_loops.REG_SCALING_WARNING)
        method = "sinkhorn"
    if method == "sinkhorn_stabilized":
        return sinkhorn_stabilized_unbalanced(a, b, M, reg, reg_m, reg_type, c, warmstart,
                                              numItermax=numItermax, stopThr=stopThr,
                                              verbose=verbose, log=log, **kwargs)
    if method == "sinkhorn_translation_invariant":
        return sinkhorn_unbalanced_translation_invariant(
            a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax=numItermax,
            stopThr=stopThr, verbose=verbose, log=log, **kwargs)
    S = _setup(a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
               allow_cuda=method in ("sinkhorn", "sinkhorn_log"), method_name=f"method={method!r}")
    if method == "sinkhorn_log":
        return _log_solve(S, verbose, log, want_plan)
    return _knopp(S, verbose, log, want_plan)


def sinkhorn_unbalanced(a, b, M, reg, reg_m, method="sinkhorn", reg_type="kl", c=None,
                        warmstart=None, numItermax=1000, stopThr=1e-6, verbose=False,
                        log=False, **kwargs):
    r"""Unbalanced entropic OT plan; mirrors ``ot.unbalanced.sinkhorn_unbalanced``.

    Parameters
    ----------
    a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        See :func:`sinkhorn_knopp_unbalanced`.
    method : str, default 'sinkhorn'
        'sinkhorn' (:func:`sinkhorn_knopp_unbalanced`), 'sinkhorn_stabilized'
        (:func:`sinkhorn_stabilized_unbalanced`), 'sinkhorn_translation_invariant'
        (:func:`sinkhorn_unbalanced_translation_invariant`), 'sinkhorn_reg_scaling'
        (warns, then 'sinkhorn', as POT) and, numbaot extension, 'sinkhorn_log'
        (:func:`sinkhorn_unbalanced_log`, stable at small ``reg``).
    **kwargs
        Passed to the solver (e.g. ``tau`` for 'sinkhorn_stabilized').

    Returns
    -------
    gamma : ndarray (dim_a, dim_b), or the losses (n_hists,) for 2-D b
    log : dict, only if ``log``

    Raises
    ------
    ValueError
        "Unknown method '<method>'." and the solvers' errors.
    TypeError
        ``method`` not a string, and the solvers' errors.
    """
    method = _checks.check_method(method, _METHODS)
    return _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                  verbose, log, kwargs)


def sinkhorn_unbalanced2(a, b, M, reg, reg_m, method="sinkhorn", reg_type="kl", c=None,
                         warmstart=None, returnCost="linear", numItermax=1000, stopThr=1e-6,
                         verbose=False, log=False, **kwargs):
    r"""Unbalanced entropic OT loss; mirrors ``ot.unbalanced.sinkhorn_unbalanced2``.

    Parameters
    ----------
    a, b, M, reg, reg_m, method, reg_type, c, warmstart, numItermax, stopThr, verbose, log
        See :func:`sinkhorn_unbalanced`.
    returnCost : {'linear', 'total'}
        1-D b: return <gamma, M> ('linear') or the full objective ('total').
        2-D b: the linear losses <gamma_k, M> (as POT, which also warns
        "Reg_type not implemented yet. Use entropy." when reg_type == 'kl').

    Returns
    -------
    loss : float (dtype of the inputs) for 1-D b, ndarray (n_hists,) for 2-D b
    log : dict, only if ``log``

    Raises
    ------
    ValueError
        "Unknown method <method>."; "Unknown returnCost = <value>"; the solvers' errors.
    """
    if not isinstance(method, str) or method.lower() not in _METHODS:
        if not isinstance(method, str):
            raise TypeError(f"method must be a string, one of {_METHODS}; got {method!r}")
        raise ValueError("Unknown method %s." % method)
    method = method.lower()
    b_arr = b if b is None else np.asarray(b) if not hasattr(b, "__cuda_array_interface__") else b
    two_d = b_arr is not None and getattr(b_arr, "ndim", 1) >= 2
    if not two_d:
        if returnCost not in ("linear", "total"):
            raise ValueError("Unknown returnCost = {}".format(returnCost))
        res = _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                     verbose, True, kwargs, want_plan=False)
        lg = res[1]
        cost = lg["cost"] if returnCost == "linear" else lg["total_cost"]
        return (cost, lg) if log else cost
    if reg_type == "kl":
        warnings.warn("Reg_type not implemented yet. Use entropy.")
    return _solve(method, a, b, M, reg, reg_m, reg_type, c, warmstart, numItermax, stopThr,
                  verbose, log, kwargs)


# --------------------------------------------------------------------------
# barycenters (host loops, POT's algorithms)
# --------------------------------------------------------------------------
def _bary_setup(A, M, reg, reg_m, weights, numItermax, stopThr):
    A = _checks.as_real_array(A, "A")
    M = _checks.as_real_array(M, "M")
    dt = _checks.result_dtype(A, M)
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"A must be a 2-D array (dim, n_hists) with dim, n_hists >= 1; got shape {A.shape}")
    dim, n_hists = A.shape
    if M.shape != (dim, dim):
        raise ValueError(f"M must have shape (dim, dim) = {(dim, dim)}; got {M.shape}")
    A = A.astype(np.float64)
    M = M.astype(np.float64)
    if not np.all(np.isfinite(A)) or np.any(A < 0):
        raise ValueError("A must be finite and >= 0")
    if not np.all(np.isfinite(M)):
        raise ValueError("M contains NaN or inf; costs must be finite")
    reg = _checks.check_reg(reg)
    reg_m = _checks.check_real_scalar(reg_m, "reg_m")
    if not np.isfinite(reg_m) or reg_m < 0:
        raise ValueError(f"reg_m must be a finite number >= 0 for barycenters; got {reg_m!r}")
    if weights is None:
        weights = np.ones(n_hists) / n_hists
    else:
        weights = _checks.as_real_array(weights, "weights").astype(np.float64)
        if weights.shape != (n_hists,):
            raise ValueError(f"weights must have shape (n_hists,) = ({n_hists},); got {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("weights must be finite and >= 0")
    numItermax = _checks.check_iter_count(numItermax, "numItermax")
    stopThr = _checks.check_real_scalar(stopThr, "stopThr")
    return A, M, dt, reg, reg_m, weights, numItermax, stopThr


def barycenter_unbalanced_sinkhorn(A, M, reg, reg_m, weights=None, numItermax=1000,
                                   stopThr=1e-6, verbose=False, log=False):
    r"""Entropic unbalanced barycenter; mirrors ``ot.unbalanced.barycenter_unbalanced_sinkhorn``.

    Chizat et al. 2018, Algorithm 2 with the barycentric proximal step:
    q = (sum_k w_k (K^T u_k)^(1 - fi))^(1 / (1 - fi)), fi = reg_m / (reg_m + reg).
    Host loop in float64, POT's control flow (err on q, stop when err < stopThr
    after more than 10 iterations).

    Parameters
    ----------
    A : array-like, shape (dim, n_hists)
        Histograms (finite, >= 0).
    M : array-like, shape (dim, dim)
        Ground cost (finite).
    reg : float
        Entropic regularisation (> 0).
    reg_m : float
        Marginal relaxation (finite, >= 0).
    weights : array-like, shape (n_hists,), optional
        Barycentric weights (>= 0); uniform by default.
    numItermax, stopThr, verbose, log
        As POT.

    Returns
    -------
    q : ndarray, shape (dim,), dtype of the inputs
    log : dict with 'err', 'niter', 'logu', 'logv', only if ``log``

    Raises
    ------
    TypeError, ValueError
        Malformed A, M, weights; reg <= 0; reg_m < 0 or infinite.

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s".
    """
    A, M, dt, reg, reg_m, weights, numItermax, stopThr = _bary_setup(
        A, M, reg, reg_m, weights, numItermax, stopThr)
    dim, n_hists = A.shape
    lg = {"err": []} if log else None
    K = np.exp(-M / reg)
    fi = reg_m / (reg_m + reg)
    v = np.ones((dim, n_hists))
    u = np.ones((dim, 1))
    q = np.ones(dim)
    i = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(numItermax):
            uprev, vprev, qprev = u.copy(), v.copy(), q.copy()
            Kv = K.dot(v)
            u = (A / Kv) ** fi
            Ktu = K.T.dot(u)
            q = (Ktu ** (1 - fi)).dot(weights)
            q = q ** (1 / (1 - fi))
            v = (q[:, None] / Ktu) ** fi
            if _bad(Ktu, u, v):
                warnings.warn(_loops.NUMERICAL_ERRORS % i)
                u, v, q = uprev, vprev, qprev
                break
            err = _rel(q, qprev)
            if log:
                lg["err"].append(dt.type(err))
            if err < stopThr and i > 10:
                break
            if verbose:
                _loops.print_header_and_row(i, err, 10)
        if log:
            lg["niter"] = i
            lg["logu"] = np.asarray(np.log(u + 1e-300), dt)
            lg["logv"] = np.asarray(np.log(v + 1e-300), dt)
    q = np.asarray(q, dt)
    return (q, lg) if log else q


def barycenter_unbalanced_stabilized(A, M, reg, reg_m, weights=None, tau=1e3, numItermax=1000,
                                     stopThr=1e-6, verbose=False, log=False):
    r"""Stabilized entropic unbalanced barycenter; mirrors
    ``ot.unbalanced.barycenter_unbalanced_stabilized`` (absorption of
    scalings above ``tau``, Schmitzer 2019).  Parameters, returns and errors as
    :func:`barycenter_unbalanced_sinkhorn`, plus ``tau`` (> 0).

    Warns
    -----
    UserWarning
        "Numerical errors at iteration %s"; "Stabilized Unbalanced Sinkhorn did
        not converge..." when err > stopThr at the end.
    """
    A, M, dt, reg, reg_m, weights, numItermax, stopThr = _bary_setup(
        A, M, reg, reg_m, weights, numItermax, stopThr)
    tau = _checks.check_reg(tau, "tau")
    dim, n_hists = A.shape
    lg = {"err": []} if log else None
    fi = reg_m / (reg_m + reg)
    u = np.ones((dim, n_hists)) / dim
    v = np.ones((dim, n_hists)) / dim
    K = np.exp(-M / reg)
    err = 1.0
    alpha = np.zeros(dim)
    beta = np.zeros(dim)
    q = np.ones(dim) / dim
    i = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(numItermax):
            qprev = q.copy()
            Kv = K.dot(v)
            f_alpha = np.exp(-alpha / (reg + reg_m))[:, None]
            f_beta = np.exp(-beta / (reg + reg_m))[:, None]
            u = ((A / (Kv + 1e-16)) ** fi) * f_alpha
            Ktu = K.T.dot(u)
            q = (Ktu ** (1 - fi)) * f_beta
            q = q.dot(weights) ** (1 / (1 - fi))
            v = ((q[:, None] / (Ktu + 1e-16)) ** fi) * f_beta
            absorbing = False
            if np.any(u > tau) or np.any(v > tau):
                absorbing = True
                alpha = alpha + reg * np.log(np.max(u, 1))
                beta = beta + reg * np.log(np.max(v, 1))
                K = np.exp((alpha[:, None] + beta[None, :] - M) / reg)
                v = np.ones(v.shape)
            if _bad(Ktu, u, v):
                warnings.warn(_loops.NUMERICAL_ERRORS % i)
                q = qprev
                break
            if (i % 10 == 0 and not absorbing) or i == 0:
                err = _rel(q, qprev)
                if log:
                    lg["err"].append(dt.type(err))
                if verbose:
                    _loops.print_header_and_row(i, err, 50)
                if err < stopThr:
                    break
        if err > stopThr:
            warnings.warn(_loops.STAB_UNBALANCED_NOT_CONVERGED)
        if log:
            lg["niter"] = i
            lg["logu"] = np.asarray(np.log(u + 1e-300), dt)
            lg["logv"] = np.asarray(np.log(v + 1e-300), dt)
    q = np.asarray(q, dt)
    return (q, lg) if log else q


def barycenter_unbalanced(A, M, reg, reg_m, method="sinkhorn", weights=None, numItermax=1000,
                          stopThr=1e-6, verbose=False, log=False, **kwargs):
    r"""Entropic unbalanced barycenter; mirrors ``ot.unbalanced.barycenter_unbalanced``.

    ``method``: 'sinkhorn' (:func:`barycenter_unbalanced_sinkhorn`),
    'sinkhorn_stabilized' (:func:`barycenter_unbalanced_stabilized`);
    'sinkhorn_reg_scaling' and 'sinkhorn_translation_invariant' warn
    "Method not implemented yet. Using classic Sinkhorn Knopp" and use
    'sinkhorn', as POT.  Other parameters, returns and errors: see
    :func:`barycenter_unbalanced_sinkhorn`.

    Raises
    ------
    ValueError
        "Unknown method '<method>'." and the solvers' errors.
    """
    method = _checks.check_method(method, ("sinkhorn", "sinkhorn_stabilized",
                                           "sinkhorn_reg_scaling",
                                           "sinkhorn_translation_invariant"))
    if method == "sinkhorn_stabilized":
        return barycenter_unbalanced_stabilized(A, M, reg, reg_m, weights=weights,
                                                numItermax=numItermax, stopThr=stopThr,
                                                verbose=verbose, log=log, **kwargs)
    if method != "sinkhorn":
        warnings.warn("Method not implemented yet. Using classic Sinkhorn Knopp")
    return barycenter_unbalanced_sinkhorn(A, M, reg, reg_m, weights=weights,
                                          numItermax=numItermax, stopThr=stopThr,
                                          verbose=verbose, log=log, **kwargs)
