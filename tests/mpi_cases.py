"""Worker for tests/test_distributed.py, run as ``mpiexec -n N python tests/mpi_cases.py OUT``.

Every rank solves its block of each case with ``numbaot.distributed``; the
per-rank results are gathered in rank order and rank 0 compares them with the
single-process solvers (``numbaot.*``) and with POT, then writes the
measured differences (not verdicts) to the JSON file OUT for pytest to check.
Errors raised by bad input are recorded per rank.
"""
import json
import sys
import warnings

import numpy as np
import ot
from mpi4py import MPI

import numbaot
from numbaot import distributed as D

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
results = {}


def gather_rows(x):
    return np.concatenate(comm.allgather(np.asarray(x)))


def rel(x, y):
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300))


def problem(n, m, seed, zeros_a=(), zeros_b=()):
    rng = np.random.default_rng(seed)
    X, Y = rng.random((n, 2)), rng.random((m, 2))
    M = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    a, b = rng.random(n) + 0.1, rng.random(m) + 0.1
    a[list(zeros_a)] = 0.0
    b[list(zeros_b)] = 0.0
    return X, Y, M, a / a.sum(), b / b.sum()


def record(name, **values):
    if rank == 0:
        results[name] = values


def caught(fn):
    """Run fn collecting warnings; returns (result, list of warning texts)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(x.message) for x in w]


def balanced_case(name, n, m, reg, method, seed=0, dtype=np.float64, uniform=False,
                  warm=False, numItermax=1000, stopThr=1e-9, **zeros):
    X, Y, M, a, b = problem(n, m, seed, **zeros)
    M, a, b = M.astype(dtype), a.astype(dtype), b.astype(dtype)
    sl = D.local_rows(n, comm)
    a_loc, b_arg = (None, None) if uniform else (a[sl], b)
    a_full = [] if uniform else a
    b_full = [] if uniform else b
    kw = dict(method=method, numItermax=numItermax, stopThr=stopThr, log=True)
    warm_full = None
    if warm:
        rng = np.random.default_rng(seed + 1)
        warm_full = (rng.normal(size=n) * 0.1, rng.normal(size=m) * 0.1)
        kw_d = dict(kw, warmstart=(warm_full[0][sl], warm_full[1]))
    else:
        kw_d = kw
    (P, lg), wd = caught(lambda: D.sinkhorn(a_loc, b_arg, M[sl], reg, **kw_d))
    G = gather_rows(P)
    U = gather_rows(lg["u"])
    all_warn = comm.allgather(wd)
    if rank == 0:
        kw1 = dict(kw, warmstart=warm_full) if warm else kw
        (P0, lg0), w0 = caught(lambda: numbaot.sinkhorn(a_full, b_full, M, reg, **kw1))
        Pp = ot.sinkhorn(np.asarray(a_full, dtype=np.float64), np.asarray(b_full, dtype=np.float64),
                         M.astype(np.float64), reg, method=method, numItermax=numItermax,
                         stopThr=stopThr, warn=False,
                         warmstart=warm_full)
        record(name, plan_vs_single=float(np.max(np.abs(G - P0))), plan_rel_pot=rel(G, Pp),
               dtype=str(G.dtype), single_dtype=str(P0.dtype), shape=list(G.shape),
               niter=[lg["niter"], lg0["niter"]], n_err=[len(lg["err"]), len(lg0["err"])],
               err_diff=float(np.max(np.abs(np.subtract(lg["err"], lg0["err"])))) if lg0["err"] else 0.0,
               u_vs_single=rel(U, lg0["u"]), v_vs_single=rel(lg["v"], lg0["v"]),
               keys=sorted(lg), single_keys=sorted(lg0),
               warnings=all_warn, single_warnings=w0)


def unbalanced_case(name, n, m, reg, reg_m, seed=0, reg_type="kl", with_c=False, numItermax=1000,
                    **zeros):
    X, Y, M, a, b = problem(n, m, seed, **zeros)
    b = 1.5 * b
    sl = D.local_rows(n, comm)
    c = None
    if with_c:
        c = np.random.default_rng(seed + 2).random((n, m)) + 0.5
    kw = dict(reg_type=reg_type, numItermax=numItermax, log=True)
    (P, lg), wd = caught(lambda: D.sinkhorn_unbalanced(
        a[sl], b, M[sl], reg, reg_m, c=None if c is None else c[sl], **kw))
    G = gather_rows(P)
    LU = gather_rows(lg["logu"])
    all_warn = comm.allgather(wd)
    if rank == 0:
        (P0, lg0), w0 = caught(lambda: numbaot.sinkhorn_unbalanced(a, b, M, reg, reg_m, c=c, **kw))
        Pp = ot.unbalanced.sinkhorn_unbalanced(a, b, M, reg, reg_m, c=c, reg_type=reg_type,
                                               numItermax=numItermax)
        record(name, plan_vs_single=float(np.max(np.abs(G - P0))), plan_rel_pot=rel(G, Pp),
               n_err=[len(lg["err"]), len(lg0["err"])],
               err_diff=float(np.max(np.abs(np.subtract(lg["err"], lg0["err"])))),
               logu_vs_single=float(np.max(np.abs(LU - lg0["logu"]))),
               logv_vs_single=float(np.max(np.abs(lg["logv"] - lg0["logv"]))),
               cost=[float(lg["cost"]), float(lg0["cost"])],
               total_cost=[float(lg["total_cost"]), float(lg0["total_cost"])],
               keys=sorted(lg), single_keys=sorted(lg0), warnings=all_warn, single_warnings=w0)


def empirical_case(name, n, m, reg, metric, seed=0, uniform=False, numIterMax=10000):
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(n, 3)), rng.normal(size=(m, 3)) + 0.5
    a = rng.random(n) + 0.1
    a /= a.sum()
    b = rng.random(m) + 0.1
    b /= b.sum()
    if uniform:
        a = b = None
    sl = D.local_rows(n, comm)
    (f, g, lg), wd = caught(lambda: D.empirical_sinkhorn(
        X[sl], Y, reg, a_local=None if a is None else a[sl], b=b, metric=metric,
        numIterMax=numIterMax, log=True))
    F = gather_rows(f)
    gs = comm.allgather(g)
    all_warn = comm.allgather(wd)
    if rank == 0:
        (f0, g0, lg0), w0 = caught(lambda: numbaot.bregman.empirical_sinkhorn(
            X, Y, reg, a=a, b=b, metric=metric, numIterMax=numIterMax, isLazy=True, log=True))
        fp, gp = ot.bregman.empirical_sinkhorn(X, Y, reg, a=a, b=b, metric=metric,
                                               numIterMax=numIterMax, isLazy=True)
        record(name, f_vs_single=float(np.max(np.abs(F - f0))),
               g_vs_single=float(np.max(np.abs(g - g0))),
               f_vs_pot=float(np.max(np.abs(F - fp))), g_vs_pot=float(np.max(np.abs(g - gp))),
               g_same_on_ranks=all(np.array_equal(x, gs[0]) for x in gs),
               niter=[lg["niter"], lg0["niter"]], n_err=[len(lg["err"]), len(lg0["err"])],
               warnings=all_warn, single_warnings=w0)


def error_case(name, fn):
    """fn() must raise on every rank; record (type, message) per rank."""
    try:
        fn()
        out = None
    except Exception as exc:  # noqa: BLE001 - the type is what is recorded
        out = [type(exc).__name__, str(exc)]
    got = comm.allgather(out)
    record(name, errors=got)


class _Unhashable:
    """A ``metric`` whose hash fails with a RuntimeError (neither a
    ValueError nor a TypeError) when it is looked up."""

    def __hash__(self):
        raise RuntimeError("hash failed")


def adversarial_cases(X, M, a, b, sl):
    """Invalid input on the last rank only (the others' input is valid), or
    inputs that are each valid but disagree between ranks: every rank must
    raise (none may hang in a collective or return NaN)."""
    last = rank == size - 1
    n_loc, m = sl.stop - sl.start, M.shape[1]
    Y = np.random.default_rng(4).random((m, 2))

    def on_last(bad, good):
        return bad if last else good

    M_nan = M[sl].copy()
    X_nan = X[sl].copy()
    a_neg = a[sl].copy()
    if last:
        M_nan[0, 0] = np.nan
        X_nan[0, 0] = np.nan
        a_neg[0] = -0.1
    ub = 1.5 * b
    error_case("log_nan_on_last_rank", lambda: D.sinkhorn(a[sl], b, M_nan, 0.1,
                                                          method="sinkhorn_log"))
    error_case("uot_nan_on_last_rank", lambda: D.sinkhorn_unbalanced(a[sl], ub, M_nan, 0.1, 1.0))
    error_case("empirical_nan_on_last_rank", lambda: D.empirical_sinkhorn(X_nan, Y, 0.1))
    error_case("negative_weight_on_last_rank", lambda: D.sinkhorn(a_neg, b, M[sl], 0.1))
    error_case("uot_negative_weight_on_last_rank",
               lambda: D.sinkhorn_unbalanced(a_neg, ub, M[sl], 0.1, 1.0))
    error_case("empirical_negative_weight_on_last_rank",
               lambda: D.empirical_sinkhorn(X[sl], Y, 0.1, a_local=a_neg))
    # wrong shapes on one rank
    error_case("columns_differ_on_last_rank", lambda: D.sinkhorn(
        a[sl], on_last(b[:-1] / b[:-1].sum(), b), on_last(M[sl][:, :-1], M[sl]), 0.1))
    error_case("a_length_on_last_rank", lambda: D.sinkhorn(on_last(a[sl][:-1], a[sl]), b,
                                                           M[sl], 0.1))
    error_case("uot_c_shape_on_last_rank", lambda: D.sinkhorn_unbalanced(
        a[sl], ub, M[sl], 0.1, 1.0, c=np.ones((n_loc, m + last))))
    error_case("empirical_warmstart_shape_on_last_rank", lambda: D.empirical_sinkhorn(
        X[sl], Y, 0.1, warmstart=(np.zeros(n_loc), np.zeros(m + last))))
    # common inputs that differ between ranks
    b_rev = on_last(b[::-1].copy(), b)
    error_case("uot_b_differs", lambda: D.sinkhorn_unbalanced(a[sl], b_rev, M[sl], 0.1, 1.0))
    error_case("empirical_b_differs", lambda: D.empirical_sinkhorn(X[sl], Y, 0.1, b=b_rev))
    error_case("empirical_X_t_differs", lambda: D.empirical_sinkhorn(X[sl], Y + last, 0.1))
    # bad scalars on one rank
    error_case("bad_reg_on_last_rank", lambda: D.sinkhorn(a[sl], b, M[sl], on_last(-1.0, 0.1)))
    error_case("uot_bad_reg_on_last_rank", lambda: D.sinkhorn_unbalanced(
        a[sl], ub, M[sl], on_last(np.nan, 0.1), 1.0))
    error_case("empirical_bad_reg_on_last_rank", lambda: D.empirical_sinkhorn(
        X[sl], Y, on_last(0.0, 0.1)))
    error_case("uot_reg_type_on_last_rank", lambda: D.sinkhorn_unbalanced(
        a[sl], ub, M[sl], 0.1, 1.0, reg_type=on_last("l2", "kl")))
    # valid on every rank, but no representable solution: refused as the
    # single-process solvers refuse it (they used to return NaN here)
    error_case("huge_costs_on_last_rank", lambda: D.sinkhorn(
        a[sl], b, on_last(M[sl] * 1e300, M[sl]), 0.1, method="sinkhorn_log"))
    error_case("empirical_huge_points_on_last_rank", lambda: D.empirical_sinkhorn(
        on_last(X[sl] * 1e200, X[sl]), Y, 0.1))
    error_case("unequal_mass", lambda: D.sinkhorn(a[sl], ub, M[sl], 0.1))
    # a failure other than ValueError/TypeError on one rank
    error_case("exception_on_last_rank", lambda: D.empirical_sinkhorn(
        X[sl], Y, 0.1, metric=on_last(_Unhashable(), "sqeuclidean")))


def main(out_path):
    # balanced
    balanced_case("knopp", 41, 23, 0.05, "sinkhorn")
    balanced_case("log", 41, 23, 0.05, "sinkhorn_log")
    balanced_case("log_small_reg", 41, 23, 1e-3, "sinkhorn_log", numItermax=300)
    balanced_case("knopp_uniform", 40, 17, 0.1, "sinkhorn", uniform=True)
    balanced_case("log_float32", 33, 19, 0.05, "sinkhorn_log", dtype=np.float32)
    balanced_case("knopp_warmstart", 29, 31, 0.05, "sinkhorn", warm=True)
    balanced_case("log_zero_weights", 30, 20, 0.05, "sinkhorn_log",
                  zeros_a=tuple(range(0, 12)), zeros_b=(3, 7))
    balanced_case("knopp_not_converged", 41, 23, 0.01, "sinkhorn", numItermax=25)
    # K underflows to 0 for whole columns at this reg: POT's "numerical errors" path
    balanced_case("knopp_numerical_errors", 41, 23, 1e-4, "sinkhorn", numItermax=50)
    # unbalanced
    unbalanced_case("uot", 41, 23, 0.05, 1.0)
    unbalanced_case("uot_semi_relaxed", 41, 23, 0.05, (np.inf, 0.5))
    unbalanced_case("uot_entropy", 41, 23, 0.05, 0.7, reg_type="entropy")
    unbalanced_case("uot_explicit_c", 41, 23, 0.05, (0.3, 2.0), with_c=True)
    # point clouds
    empirical_case("empirical_sqeuclidean", 45, 31, 0.5, "sqeuclidean")
    empirical_case("empirical_euclidean_uniform", 45, 31, 0.3, "euclidean", uniform=True)
    # bad input on one rank only, inputs that differ between ranks
    X, Y, M, a, b = problem(30, 20, 3)
    sl = D.local_rows(30, comm)
    M_bad = M[sl].copy()
    if rank == size - 1:
        M_bad[0, 0] = np.nan
    error_case("nan_on_last_rank", lambda: D.sinkhorn(a[sl], b, M_bad, 0.1))
    b_bad = b.copy() if rank == 0 else b[::-1].copy()
    error_case("b_differs", lambda: D.sinkhorn(a[sl], b_bad, M[sl], 0.1))
    error_case("reg_differs", lambda: D.sinkhorn(a[sl], b, M[sl], 0.1 + rank))
    error_case("bad_method", lambda: D.sinkhorn(a[sl], b, M[sl], 0.1, method="greenkhorn"))
    error_case("uot_bad_reg_m", lambda: D.sinkhorn_unbalanced(a[sl], b, M[sl], 0.1, -1.0))
    error_case("empirical_bad_dim", lambda: D.empirical_sinkhorn(
        np.zeros((3, 2 + (rank == 0))), np.zeros((4, 2)), 0.1))
    warm = (np.zeros(sl.stop - sl.start), np.zeros(20)) if rank == 0 else None
    error_case("warmstart_on_one_rank", lambda: D.sinkhorn(a[sl], b, M[sl], 0.1, warmstart=warm))
    error_case("uot_log_differs", lambda: D.sinkhorn_unbalanced(a[sl], b, M[sl], 0.1, 1.0,
                                                                log=rank == 0))
    a_zero = np.zeros(sl.stop - sl.start)
    error_case("zero_total_mass", lambda: D.sinkhorn(a_zero, b, M[sl], 0.1))
    adversarial_cases(X, M, a, b, sl)
    # caller's arrays untouched
    a_c, b_c, M_c = a[sl].copy(), b.copy(), M[sl].copy()
    D.sinkhorn(a_c, b_c, M_c, 0.1, method="sinkhorn_log")
    D.sinkhorn_unbalanced(a_c, b_c, M_c, 0.1, 1.0)
    untouched = (np.array_equal(a_c, a[sl]) and np.array_equal(b_c, b)
                 and np.array_equal(M_c, M[sl]))
    record("untouched", all_ranks=comm.allgather(untouched))
    # an explicit communicator: halves of COMM_WORLD solving different problems
    sub = comm.Split(color=rank % 2, key=rank)
    Xs, Ys, Ms, as_, bs = problem(27, 15, 10 + rank % 2)
    sls = D.local_rows(27, sub)
    Ps = D.sinkhorn(as_[sls], bs, Ms[sls], 0.05, comm=sub)
    Gs = np.concatenate(sub.allgather(Ps))
    diff = float(np.max(np.abs(Gs - numbaot.sinkhorn(as_, bs, Ms, 0.05))))
    record("sub_communicator", diffs=comm.allgather(diff), sizes=comm.allgather(sub.Get_size()))
    sub.Free()
    # the row split
    blocks = comm.allgather(D.local_rows(10, comm))
    record("local_rows", blocks=[[s.start, s.stop] for s in blocks])
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump(dict(size=size, results=results), fh)


if __name__ == "__main__":
    main(sys.argv[1])
