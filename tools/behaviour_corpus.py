"""Behaviour corpus: fingerprints of a fixed set of CPU calls of numbaot's public API.

A refactor that must not change behaviour is checked against the package's own
earlier self (not against POT, not with tolerances): before the change, record
the hash of every call's complete outcome; after it, the same corpus must give
the same hashes, bit for bit.

    python tools/behaviour_corpus.py --out corpus.json      # record {case_id: sha256}
    python tools/behaviour_corpus.py --compare corpus.json  # recompute, list differences
    python tools/behaviour_corpus.py --only sinkhorn_log --compare corpus.json
    python tools/behaviour_corpus.py --only gae --show      # print the outcomes themselves
    python tools/behaviour_corpus.py --list                 # case ids and counts per function

    mpiexec -n 2 python tools/behaviour_corpus.py --mpi --out corpus_mpi.json

``--compare`` prints every case whose hash differs (DIFF), that the baseline
has but this corpus does not produce (MISSING), or that is new (NEW, not a
failure), and exits 1 if any case differs or is missing.  ``--only SUBSTRING``
(repeatable) restricts the run (and the comparison) to the case ids that
contain one of the substrings.

A case is one call with fixed inputs (``np.random.default_rng(seed)``, every
input built afresh for each case, so a subset builds the same inputs).  Its
outcome is hashed from a canonical serialisation of:

* what the call returned: arrays as (dtype, shape, C-order bytes), NumPy
  scalars as (dtype, bytes), Python numbers as ``repr``, strings, None,
  lists/tuples recursively (tagged apart), dicts by sorted key, slices by
  ``repr``, a ``numbaot.empirical.LazyPlan`` by its shape and the blocks
  ``plan[:, :]``, ``plan[1]``, ``plan[2:5, 1:4]``;
* or, if it raised, the exception's type name and message;
* the warnings it issued (category name, message), in order, recorded with
  ``simplefilter('always')``; Numba's own warnings (``NumbaWarning``
  subclasses, compiler notes that appear only when a kernel is compiled, not
  when it is loaded from the cache) are left out;
* what it printed on stdout (verbose tables).

The function is looked up by name when the case runs: a public name that
disappears gives an ``AttributeError`` outcome (a DIFF), not a crash.  Every
binding of a public function is called at least once (``numbaot.X`` and
``numbaot.<module>.X`` of each module's ``__all__``); the ``api/<module>``
cases hash each module's ``__all__`` and the signatures of its names.

The corpus runs with ``numba.set_num_threads(2)`` and single-threaded BLAS
(``OPENBLAS_NUM_THREADS=1``, ``MKL_NUM_THREADS=1`` unless already set), so the
hashes depend on neither the core count nor the load.

Record and compare with a warm Numba cache.  A kernel compiled in the running
process can round differently (last bits) from the same kernel loaded from
the on-disk cache: at 0379b05 about 150 cases differ between a run that
compiles everything and a run that loads everything.  The tool says so on
stderr when a run compiled any cacheable kernel; run it again then.  The first
run after a change of the kernels' sources compiles them (several minutes);
a warm run takes two to three minutes on 2 cores.

``--mpi`` runs the corpus of ``numbaot.distributed`` instead; launch it with
``mpiexec -n 2``.  Every rank runs every case on its block of rows; rank 0
hashes each case from the per-rank outcome digests (in rank order) and writes
or compares the file.  The hashes depend on the number of ranks.

This is a developer tool, not a test: it is not under ``tests/`` and pytest
does not collect it.
"""
import argparse
import contextlib
import hashlib
import importlib
import inspect
import io
import json
import os
import pprint
import sys
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba.core import event as numba_event  # noqa: E402
from numba.core.errors import NumbaWarning  # noqa: E402

import numbaot  # noqa: E402

# which numbaot is fingerprinted (an installed copy shadows the checkout
# unless PYTHONPATH names one)
print(f"behaviour_corpus: numbaot from {os.path.dirname(numbaot.__file__)}", file=sys.stderr)

THREADS = 2

#: Batch sizes (problems sharing one matrix).  From numbaot._config.BATCH_MINOR_MIN
#: (8 at 0379b05) problems on, the solvers store their vectors problem-minor:
#: SMALL_BATCH and BIG_BATCH run both layouts.  Fixed here (the corpus must not
#: change with the package); main() says so if BIG_BATCH no longer reaches it.
SMALL_BATCH = 3
BIG_BATCH = 9

DTYPES = {"f32": np.float32, "f64": np.float64}
#: stopThr of the point-cloud cases: float32 weights sum to 1 only to ~1e-7,
#: so the lazy solvers' marginal error never reaches the default 1e-9 there.
STOP = {"f32": 1e-6, "f64": 1e-9}
LAYOUTS = ("C", "F", "strided")


# ==========================================================================
# inputs: recipes, built afresh each time a case runs
# ==========================================================================
class Args:
    """Several arguments at once: positional ones, then keywords."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class Make:
    """A case input, built when the case runs.  ``spread``: what is built (a
    tuple, or an ``Args``) gives several arguments."""

    def __init__(self, build, *args, spread=False, **kwargs):
        self.build, self.args, self.kwargs, self.spread = build, args, kwargs, spread

    def __call__(self):
        return self.build(*self.args, **self.kwargs)


def make(build, *args, **kwargs):
    return Make(build, *args, **kwargs)


def spread(build, *args, **kwargs):
    return Make(build, *args, spread=True, **kwargs)


def _rng(seed):
    return np.random.default_rng(seed)


def _layout(M, layout):
    """M as a C-ordered, Fortran-ordered or non-contiguous (every other column
    of a wider array) array of the same values."""
    if layout == "C":
        return np.ascontiguousarray(M)
    if layout == "F":
        return np.asfortranarray(M)
    if layout == "strided":
        wide = np.zeros((M.shape[0], 2 * M.shape[1]), dtype=M.dtype)
        wide[:, ::2] = M
        return wide[:, ::2]
    raise ValueError(layout)


def _hists(rng, n, k=None):
    """A random histogram (n,), or k of them as the columns of (n, k)."""
    h = rng.random(n if k is None else (n, k)) + 0.1
    return h / h.sum(axis=0)


def _transport(n, m, seed, dtype="f64", layout="C", weights="given", k=SMALL_BATCH,
               mass_b=1.0):
    """(a, b, M): squared distances between random points of the unit square.

    weights: 'given' (1-D a, b), 'uniform' ([], []), 'none' (None, None),
    'b2d' (1-D a, b of shape (m, k)), 'paired' (a (n, k), b (m, k)), 'zeros'
    (some zero weights), 'mixed' (float64 weights whatever M's dtype), 'int'
    (integer M, float64 weights).
    """
    rng = _rng(seed)
    X, Y = rng.random((n, 2)), rng.random((m, 2))
    M = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    a, b = _hists(rng, n), _hists(rng, m) * mass_b
    A, B = _hists(rng, n, k), _hists(rng, m, k) * mass_b
    dt = DTYPES[dtype]
    if weights == "zeros":
        a[:3] = 0.0
        b[-2:] = 0.0
        a, b = a / a.sum(), b / b.sum() * mass_b
    if weights == "int":
        M = np.rint(10 * M).astype(np.int64)
    else:
        M = _layout(M.astype(dt), layout)
    w = np.float64 if weights in ("mixed", "int") else dt
    if weights in ("given", "zeros", "mixed", "int"):
        return a.astype(w), b.astype(w), M
    if weights == "uniform":
        return [], [], M
    if weights == "none":
        return None, None, M
    if weights == "b2d":
        return a.astype(w), B.astype(w), M
    if weights == "paired":
        return A.astype(w), B.astype(w), M
    raise ValueError(weights)


def problem(n, m, seed, dtype="f64", layout="C", weights="given", **kw):
    return spread(_transport, n, m, seed, dtype, layout, weights, **kw)


def _normal(shape, seed, scale=1.0, dtype="f64", shift=0.0):
    return (scale * _rng(seed).normal(size=shape) + shift).astype(DTYPES[dtype])


def normal(shape, seed, scale=1.0, dtype="f64", shift=0.0):
    return make(_normal, shape, seed, scale, dtype, shift)


def _pair(shape_a, shape_b, seed, scale):
    return _normal(shape_a, seed, scale), _normal(shape_b, seed + 1, scale)


def warm_pair(shape_a, shape_b, seed=99, scale=0.1):
    """A warmstart pair of small random vectors (log-scalings or potentials)."""
    return make(_pair, shape_a, shape_b, seed, scale)


def _per_hist_warm(n, m, k, seed):
    return [_pair((n,), (m,), seed + 2 * i, 0.1) for i in range(k)]


def _random(shape, seed, dtype="f64", low=0.0):
    return (_rng(seed).random(shape) + low).astype(DTYPES[dtype])


def random(shape, seed, dtype="f64", low=0.0):
    return make(_random, shape, seed, dtype, low)


def _grid_cost(dim, dtype):
    x = np.arange(dim, dtype=np.float64)
    M = (x[:, None] - x[None, :]) ** 2
    return (M / M.max()).astype(DTYPES[dtype])


def _bary_problem(dim, k, seed, dtype="f64", weights=False):
    """A, M (and the keyword weights) for barycenters: k random histograms on
    a 1-D grid."""
    A = _hists(_rng(seed), dim, k).astype(DTYPES[dtype])
    if not weights:
        return A, _grid_cost(dim, dtype)
    w = _rng(seed + 1).random(k) + 0.5
    return Args(A, _grid_cost(dim, dtype), weights=(w / w.sum()).astype(DTYPES[dtype]))


def bary(dim, k, seed, dtype="f64", weights=False):
    return spread(_bary_problem, dim, k, seed, dtype, weights)


def _images(k, w, h, seed, dtype="f64"):
    """k non-negative images of unit mass: smooth random blobs."""
    rng = _rng(seed)
    yy, xx = np.mgrid[0:w, 0:h] / max(w, h)
    imgs = []
    for _ in range(k):
        cy, cx = rng.random(2)
        img = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.02) + 1e-3 * rng.random((w, h))
        imgs.append(img / img.sum())
    return np.stack(imgs).astype(DTYPES[dtype])


def images(k, w, h, seed, dtype="f64"):
    return make(_images, k, w, h, seed, dtype)


def _clouds(n, m, d, seed, dtype="f64", weights="given", k=SMALL_BATCH):
    """(X_s, X_t, a, b) for the point-cloud solvers (b 2-D for 'b2d',
    a and b 2-D for 'paired', None for 'none')."""
    rng = _rng(seed)
    dt = DTYPES[dtype]
    X, Y = rng.normal(size=(n, d)).astype(dt), (rng.normal(size=(m, d)) + 0.5).astype(dt)
    a, b = _hists(rng, n).astype(dt), _hists(rng, m).astype(dt)
    A, B = _hists(rng, n, k).astype(dt), _hists(rng, m, k).astype(dt)
    return {"given": (X, Y, a, b), "none": (X, Y, None, None), "b2d": (X, Y, a, B),
            "paired": (X, Y, A, B)}[weights]


def _cloud_args(*args, **kwargs):
    """X_s, X_t and the keywords a, b (left out for uniform weights)."""
    X, Y, a, b = _clouds(*args, **kwargs)
    return Args(X, Y) if a is None else Args(X, Y, a=a, b=b)


def clouds(n, m, d, seed, dtype="f64", weights="given", **kw):
    return spread(_cloud_args, n, m, d, seed, dtype, weights, **kw)


# ==========================================================================
# the corpus
# ==========================================================================
class Case:
    def __init__(self, case_id, path, args, kwargs, raises):
        self.id, self.path, self.args, self.kwargs, self.raises = (
            case_id, path, args, kwargs, raises)
        self.thunk = False

    def call(self):
        args, kwargs = [], {}
        for x in self.args:
            if not isinstance(x, Make):
                args.append(x)
            elif not x.spread:
                args.append(x())
            else:
                built = x()
                if isinstance(built, Args):
                    args.extend(built.args)
                    kwargs.update(built.kwargs)
                else:
                    args.extend(built)
        kwargs.update({k: v() if isinstance(v, Make) else v for k, v in self.kwargs.items()})
        return resolve(self.path)(*args, **kwargs)


class Corpus:
    def __init__(self):
        self.cases = {}

    def add(self, path, variant, *args, raises=False, **kwargs):
        """Register the call numbaot.<path>(*args, **kwargs) as case
        '<path>/<variant>'; ``raises``: the call is meant to raise."""
        case_id = f"{path}/{variant}"
        if case_id in self.cases:
            raise ValueError(f"duplicate case id {case_id}")
        self.cases[case_id] = Case(case_id, path, args, kwargs, raises)

    def add_thunk(self, path, variant, thunk, raises=False):
        """A case whose call is ``thunk()`` (several steps, e.g. an MPI
        sub-communicator); ``path`` only names it."""
        self.add(path, variant, raises=raises)
        case = self.cases[f"{path}/{variant}"]
        case.call, case.thunk = thunk, True

    def first(self, path):
        """The first plain call of numbaot.<path> meant to succeed."""
        for case in self.cases.values():
            if case.path == path and not case.raises and not case.thunk:
                return case
        raise LookupError(f"no case calls numbaot.{path}")


# --------------------------------------------------------------------------
# balanced Sinkhorn (numbaot.bregman)
# --------------------------------------------------------------------------
SINKHORN_METHODS = ("sinkhorn", "sinkhorn_log", "greenkhorn", "sinkhorn_stabilized",
                    "sinkhorn_epsilon_scaling")
SINKHORN2_METHODS = ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized")
BATCHED_METHODS = ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized")

# warmstart convention of each method: log-scalings, or dual potentials
WARMSTART = {
    "sinkhorn": "log-scalings", "sinkhorn_log": "log-scalings", "greenkhorn": "log-scalings",
    "sinkhorn_stabilized": "potentials", "sinkhorn_epsilon_scaling": "potentials",
}

REG = 0.05
N, M_ = 24, 17          # the default problem size
BIG = (130, 70)         # several row chunks in the CPU kernels


def balanced_cases(c):
    # every method x dtype x layout of M, given weights, log
    for meth in SINKHORN_METHODS:
        for dt in DTYPES:
            for layout in LAYOUTS:
                c.add("sinkhorn", f"{meth}/{dt}/{layout}/given/log",
                      problem(N, M_, 1, dt, layout), REG, method=meth, log=True)
            c.add("sinkhorn", f"{meth}/{dt}/C/uniform/nolog",
                  problem(N, M_, 2, dt, weights="uniform"), REG, method=meth)
        c.add("sinkhorn", f"{meth}/f64/C/none", problem(N, M_, 3, weights="none"), REG,
              method=meth)
        c.add("sinkhorn", f"{meth}/f32-M-f64-weights", problem(N, M_, 4, "f32", weights="mixed"),
              REG, method=meth, log=True)
        c.add("sinkhorn", f"{meth}/int-M", problem(N, M_, 5, weights="int"), 2.0, method=meth)
        c.add("sinkhorn", f"{meth}/zero-weights", problem(N, M_, 6, weights="zeros"), REG,
              method=meth, log=True)
        c.add("sinkhorn", f"{meth}/big/f64", problem(*BIG, 7), REG, method=meth, log=True)
        c.add("sinkhorn", f"{meth}/big/f32/F", problem(*BIG, 7, "f32", "F"), REG, method=meth)
        # not converged (epsilon scaling: every inner call stops early)
        short = (dict(numItermax=3, numInnerItermax=3) if meth == "sinkhorn_epsilon_scaling"
                 else dict(numItermax=5))
        c.add("sinkhorn", f"{meth}/not-converged", problem(N, M_, 8), 0.01, method=meth,
              log=True, **short)
        c.add("sinkhorn", f"{meth}/not-converged/warn=False", problem(N, M_, 8), 0.01,
              method=meth, warn=False, **short)
        c.add("sinkhorn", f"{meth}/numItermax=0", problem(N, M_, 9), REG, method=meth,
              numItermax=0, log=True)
        c.add("sinkhorn", f"{meth}/stopThr=1", problem(N, M_, 9), REG, method=meth,
              stopThr=1.0, log=True)
        c.add("sinkhorn", f"{meth}/verbose", problem(N, M_, 10), REG, method=meth,
              numItermax=60, verbose=True, log=True)
        c.add("sinkhorn", f"{meth}/tiny-reg", problem(N, M_, 11), 1e-4, method=meth,
              numItermax=50, log=True)
        shape_b = (M_,)
        c.add("sinkhorn", f"{meth}/warmstart-{WARMSTART[meth]}", problem(N, M_, 12), REG,
              method=meth, warmstart=warm_pair((N,), shape_b), log=True)
        c.add("sinkhorn", f"{meth}/upper-case-name", problem(N, M_, 13), REG,
              method=meth.upper(), numItermax=20)
    # batches: 2-D b with 1-D a, and paired 2-D a, 2-D b; both vector layouts
    for meth in BATCHED_METHODS:
        for k in (SMALL_BATCH, BIG_BATCH):
            for mode in ("b2d", "paired"):
                c.add("sinkhorn", f"{meth}/{mode}/k={k}/f64/log",
                      problem(N, M_, 20 + k, weights=mode, k=k), REG, method=meth, log=True)
                c.add("sinkhorn", f"{meth}/{mode}/k={k}/f32/F/big",
                      problem(*BIG, 30 + k, "f32", "F", weights=mode, k=k), REG, method=meth)
            c.add("sinkhorn", f"{meth}/b2d/k={k}/not-converged",
                  problem(N, M_, 40 + k, weights="b2d", k=k), 0.01, method=meth, numItermax=5,
                  log=True)
        c.add("sinkhorn", f"{meth}/paired/verbose", problem(N, M_, 50, weights="paired"), REG,
              method=meth, numItermax=40, verbose=True, log=True)
    c.add("sinkhorn", "sinkhorn_log/b2d/warmstart-per-hist-list",
          problem(N, M_, 51, weights="b2d"), REG, method="sinkhorn_log", log=True,
          warmstart=make(_per_hist_warm, N, M_, SMALL_BATCH, 7))
    for meth in ("sinkhorn", "sinkhorn_log"):
        c.add("sinkhorn", f"{meth}/b2d/warmstart-2d-arrays", problem(N, M_, 52, weights="b2d"),
              REG, method=meth, log=True,
              warmstart=warm_pair((N, SMALL_BATCH), (M_, SMALL_BATCH)))
        c.add("sinkhorn", f"{meth}/paired-big/warmstart-1d",
              problem(N, M_, 53, weights="paired", k=BIG_BATCH), REG, method=meth, log=True,
              warmstart=warm_pair((N,), (M_,)))
    c.add("sinkhorn", "sinkhorn_stabilized/tau=10", problem(N, M_, 54), 0.01,
          method="sinkhorn_stabilized", tau=10.0, log=True)
    c.add("sinkhorn", "sinkhorn_stabilized/print_period=3", problem(N, M_, 54), REG,
          method="sinkhorn_stabilized", print_period=3, log=True, verbose=True, numItermax=30)
    c.add("sinkhorn", "sinkhorn/ignored-kwarg", problem(N, M_, 55), REG, foo=1)
    for meth in ("greenkhorn", "sinkhorn_epsilon_scaling"):
        c.add("sinkhorn", f"{meth}/b2d-refused", problem(N, M_, 56, weights="b2d"), REG,
              method=meth, raises=True)

    # sinkhorn2
    for meth in SINKHORN2_METHODS:
        for dt in DTYPES:
            c.add("sinkhorn2", f"{meth}/{dt}/C/given/log", problem(N, M_, 60, dt), REG,
                  method=meth, log=True)
            c.add("sinkhorn2", f"{meth}/{dt}/F/uniform", problem(N, M_, 61, dt, "F", "uniform"),
                  REG, method=meth)
            c.add("sinkhorn2", f"{meth}/{dt}/strided/given", problem(N, M_, 62, dt, "strided"),
                  REG, method=meth)
        for k in (SMALL_BATCH, BIG_BATCH):
            c.add("sinkhorn2", f"{meth}/b2d/k={k}", problem(N, M_, 63, weights="b2d", k=k), REG,
                  method=meth, log=True)
            c.add("sinkhorn2", f"{meth}/paired/k={k}/f32",
                  problem(N, M_, 64, "f32", weights="paired", k=k), REG, method=meth,
                  numItermax=300)
        c.add("sinkhorn2", f"{meth}/big/paired", problem(*BIG, 65, weights="paired", k=BIG_BATCH),
              REG, method=meth)
        c.add("sinkhorn2", f"{meth}/big/f32", problem(*BIG, 66, "f32"), REG, method=meth,
              log=True)
        c.add("sinkhorn2", f"{meth}/not-converged/default-warn", problem(N, M_, 67), 0.01,
              method=meth, numItermax=5)
        c.add("sinkhorn2", f"{meth}/not-converged/warn=True", problem(N, M_, 67), 0.01,
              method=meth, numItermax=5, warn=True, verbose=True)
        c.add("sinkhorn2", f"{meth}/warmstart", problem(N, M_, 68), REG, method=meth,
              warmstart=warm_pair((N,), (M_,)), log=True)
        c.add("sinkhorn2", f"{meth}/tiny-reg", problem(N, M_, 69), 1e-4, method=meth,
              numItermax=50, log=True)
    c.add("sinkhorn2", "sinkhorn_stabilized/kwargs", problem(N, M_, 70), 0.01,
          method="sinkhorn_stabilized", tau=10.0, print_period=7, log=True)
    c.add("sinkhorn2", "greenkhorn-refused", problem(N, M_, 71), REG, method="greenkhorn",
          raises=True)

    # the solvers called directly
    for fn in ("sinkhorn_knopp", "sinkhorn_log", "sinkhorn_stabilized",
               "sinkhorn_epsilon_scaling", "greenkhorn"):
        for dt in DTYPES:
            c.add(fn, f"{dt}/C/given/log", problem(N, M_, 80, dt), REG, log=True)
            c.add(fn, f"{dt}/F/uniform", problem(N, M_, 81, dt, "F", "uniform"), REG)
        c.add(fn, "strided/big", problem(*BIG, 82, layout="strided"), REG, log=True)
        c.add(fn, "warmstart", problem(N, M_, 83), REG, warmstart=warm_pair((N,), (M_,)))
        c.add(fn, "not-converged", problem(N, M_, 84), 0.01, numItermax=2, log=True)
    for fn in ("sinkhorn_knopp", "sinkhorn_log", "sinkhorn_stabilized"):
        c.add(fn, "b2d/big-batch", problem(N, M_, 85, weights="b2d", k=BIG_BATCH), REG, log=True)
        c.add(fn, "paired", problem(N, M_, 86, weights="paired"), REG, log=True)
    c.add("sinkhorn_knopp", "numerical-errors", problem(N, M_, 87), 1e-4, numItermax=50,
          log=True)
    c.add("sinkhorn_knopp", "numerical-errors/paired-big",
          problem(N, M_, 87, weights="paired", k=BIG_BATCH), 1e-4, numItermax=50, log=True)
    c.add("sinkhorn_log", "small-reg/big", problem(*BIG, 88), 1e-3, numItermax=300, log=True)
    c.add("sinkhorn_log", "small-reg/paired-big", problem(N, M_, 89, weights="paired",
          k=BIG_BATCH), 1e-3, numItermax=300, log=True)
    c.add("sinkhorn_stabilized", "numerical-errors", problem(N, M_, 90), 1e-4, tau=1e300,
          numItermax=50, log=True)
    c.add("sinkhorn_stabilized", "absorption/paired", problem(N, M_, 91, weights="paired"),
          0.005, tau=1e2, log=True)
    c.add("sinkhorn_epsilon_scaling", "verbose/print_period=5", problem(N, M_, 92), REG,
          verbose=True, print_period=5, log=True)
    c.add("greenkhorn", "verbose", problem(N, M_, 93), REG, verbose=True, log=True)

    # bad input: the exception type and message are part of the behaviour
    bad = [
        ("reg=0", (problem(N, M_, 100), 0.0), {}),
        ("reg=-1", (problem(N, M_, 100), -1.0), {}),
        ("reg=inf", (problem(N, M_, 100), np.inf), {}),
        ("reg-str", (problem(N, M_, 100), "0.1"), {}),
        ("method-unknown", (problem(N, M_, 100), REG), dict(method="foo")),
        ("method-not-str", (problem(N, M_, 100), REG), dict(method=3)),
        ("numItermax=-1", (problem(N, M_, 100), REG), dict(numItermax=-1)),
        ("numItermax-float", (problem(N, M_, 100), REG), dict(numItermax=2.5)),
        ("stopThr-str", (problem(N, M_, 100), REG), dict(stopThr="x")),
        ("M-nan", (make(lambda: np.ones(N)), make(lambda: np.ones(M_)),
                   make(lambda: np.full((N, M_), np.nan)), REG), {}),
        ("M-1d", ([], [], make(lambda: np.ones(N)), REG), {}),
        ("M-empty", ([], [], make(lambda: np.ones((0, 3))), REG), {}),
        ("M-complex", ([], [], make(lambda: np.ones((N, M_), complex)), REG), {}),
        ("M-bool", ([], [], make(lambda: np.ones((N, M_), bool)), REG), {}),
        ("a-wrong-length", (make(lambda: np.ones(N + 1) / (N + 1)), [],
                            make(lambda: np.ones((N, M_))), REG), {}),
        ("b-negative", (make(lambda: np.ones(N) / N), make(lambda: np.r_[-1.0, np.ones(M_ - 1)]),
                        make(lambda: np.ones((N, M_))), REG), {}),
        ("a-zero-mass", (make(lambda: np.zeros(N)), [], make(lambda: np.ones((N, M_))), REG), {}),
        ("a-2d-b-1d", (make(lambda: np.ones((N, 2)) / N), make(lambda: np.ones(M_) / M_),
                       make(lambda: np.ones((N, M_))), REG), {}),
        ("paired-mismatch", (make(lambda: np.ones((N, 2)) / N), make(lambda: np.ones((M_, 3)) / M_),
                             make(lambda: np.ones((N, M_))), REG), {}),
        ("warmstart-not-pair", (problem(N, M_, 100), REG), dict(warmstart=5)),
        ("warmstart-wrong-shape", (problem(N, M_, 100), REG),
         dict(warmstart=warm_pair((N + 1,), (M_,)))),
    ]
    for name, args, kw in bad:
        c.add("sinkhorn", f"bad/{name}", *args, raises=True, **kw)
    c.add("sinkhorn2", "bad/reg=0", problem(N, M_, 100), 0.0, raises=True)
    c.add("sinkhorn2", "bad/b-negative", make(lambda: np.ones(N) / N),
          make(lambda: np.r_[-1.0, np.ones(M_ - 1)]), make(lambda: np.ones((N, M_))), REG,
          method="sinkhorn_log", raises=True)
    c.add("sinkhorn_stabilized", "bad/print_period=0", problem(N, M_, 100), REG, print_period=0,
          raises=True)
    c.add("sinkhorn_stabilized", "bad/warmstart-shape", problem(N, M_, 100), REG,
          warmstart=warm_pair((N,), (M_ + 2,)), raises=True)
    c.add("sinkhorn_epsilon_scaling", "bad/epsilon0=0", problem(N, M_, 100), REG, epsilon0=0.0,
          raises=True)
    c.add("greenkhorn", "bad/b2d", problem(N, M_, 100, weights="b2d"), REG, raises=True)


# --------------------------------------------------------------------------
# barycenters (numbaot.bregman / numbaot.barycenters)
# --------------------------------------------------------------------------
def barycenter_cases(c):
    dim, k = 30, 3
    for meth in ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"):
        for dt in DTYPES:
            c.add("barycenter", f"{meth}/{dt}/log", bary(dim, k, 200, dt), 0.01, method=meth,
                  log=True)
        c.add("barycenter", f"{meth}/weights", bary(dim, k, 201, weights=True), 0.01,
              method=meth)
        c.add("barycenter", f"{meth}/verbose", bary(dim, k, 202), 0.01, method=meth,
              numItermax=40, stopThr=0.0, verbose=True, log=True)
        c.add("barycenter", f"{meth}/not-converged", bary(dim, k, 203), 0.01, method=meth,
              numItermax=5, log=True)
        c.add("barycenter", f"{meth}/small-reg", bary(dim, k, 204), 1e-3, method=meth,
              numItermax=200, log=True)
        c.add("barycenter", f"{meth}/big", bary(100, 5, 205), 0.01, method=meth)
    c.add("barycenter", "sinkhorn_stabilized/tau=10", bary(dim, k, 206), 0.005,
          method="sinkhorn_stabilized", tau=10.0, log=True)
    c.add("barycenter", "bad/method", bary(dim, k, 207), 0.01, method="foo", raises=True)
    c.add("barycenter", "bad/A-negative", make(lambda: -np.ones((5, 2))),
          make(lambda: np.ones((5, 5))), 0.1, raises=True)
    c.add("barycenter", "bad/M-shape", make(lambda: np.ones((5, 2))),
          make(lambda: np.ones((5, 4))), 0.1, raises=True)
    c.add("barycenter", "bad/weights-length", bary(dim, k, 207), 0.01,
          weights=make(lambda: np.ones(k + 1) / (k + 1)), raises=True)
    for fn in ("bregman.barycenter_sinkhorn", "bregman.barycenter_stabilized"):
        for dt in DTYPES:
            c.add(fn, f"{dt}/log", bary(dim, k, 208, dt), 0.01, log=True)
        c.add(fn, "weights", bary(dim, k, 209, weights=True), 0.01)
    c.add("bregman.barycenter_stabilized", "tau-positional", bary(dim, k, 210), 0.005, 10.0,
          log=True)

    for meth in ("sinkhorn", "sinkhorn_log"):
        for dt in DTYPES:
            c.add("bregman.convolutional_barycenter2d", f"{meth}/{dt}/log",
                  images(3, 12, 12, 220, dt), 0.004, method=meth, log=True)
        c.add("bregman.convolutional_barycenter2d", f"{meth}/non-square/weights",
              images(2, 12, 9, 221), 0.004, method=meth,
              weights=make(lambda: np.array([0.3, 0.7])))
        c.add("bregman.convolutional_barycenter2d", f"{meth}/verbose",
              images(3, 10, 10, 222), 0.004, method=meth, numItermax=30, stopThr=0.0,
              verbose=True, log=True)
        c.add("bregman.convolutional_barycenter2d", f"{meth}/not-converged",
              images(3, 10, 10, 223), 0.004, method=meth, numItermax=3)
    c.add("bregman.convolutional_barycenter2d", "sinkhorn/stabThr",
          images(3, 10, 10, 224), 0.004, stabThr=1e-10, log=True)
    c.add("bregman.convolutional_barycenter2d", "bad/A-2d", make(lambda: np.ones((5, 5))), 0.01,
          raises=True)
    c.add("bregman.convolutional_barycenter2d", "bad/method", images(2, 5, 5, 225), 0.01,
          method="sinkhorn_stabilized", raises=True)


# --------------------------------------------------------------------------
# unbalanced (numbaot.unbalanced)
# --------------------------------------------------------------------------
UOT_METHODS = ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_translation_invariant",
               "sinkhorn_reg_scaling", "sinkhorn_log")
PAIRED_UOT_METHODS = ("sinkhorn", "sinkhorn_log", "sinkhorn_reg_scaling")


def uproblem(n, m, seed, dtype="f64", layout="C", weights="given", **kw):
    return problem(n, m, seed, dtype, layout, weights, mass_b=1.5, **kw)


def unbalanced_cases(c):
    reg = 0.05
    for meth in UOT_METHODS:
        for reg_type in ("kl", "entropy"):
            for reg_m_name, reg_m in (("1", 1.0), ("pair-inf", (np.inf, 0.5))):
                for dt in DTYPES:
                    c.add("sinkhorn_unbalanced", f"{meth}/{reg_type}/reg_m={reg_m_name}/{dt}/log",
                          uproblem(N, M_, 300, dt), reg, reg_m, method=meth, reg_type=reg_type,
                          log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/reg_m-list1", uproblem(N, M_, 301), reg, [0.7],
              method=meth)
        c.add("sinkhorn_unbalanced", f"{meth}/reg_m-array-pair", uproblem(N, M_, 301), reg,
              make(lambda: np.array([0.3, 2.0])), method=meth)
        c.add("sinkhorn_unbalanced", f"{meth}/c-given", uproblem(N, M_, 302), reg, 1.0,
              method=meth, c=random((N, M_), 303, low=0.5), log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/c-given/entropy", uproblem(N, M_, 302), reg, 1.0,
              method=meth, c=random((N, M_), 303, low=0.5), reg_type="entropy")
        for layout in ("F", "strided"):
            c.add("sinkhorn_unbalanced", f"{meth}/{layout}", uproblem(N, M_, 304, layout=layout),
                  reg, 1.0, method=meth)
        c.add("sinkhorn_unbalanced", f"{meth}/uniform", uproblem(N, M_, 305, weights="uniform"),
              reg, 1.0, method=meth, log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/big/f32", uproblem(*BIG, 306, "f32"), reg, 1.0,
              method=meth, log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/big/f64", uproblem(*BIG, 306), reg, 1.0,
              method=meth)
        c.add("sinkhorn_unbalanced", f"{meth}/b2d", uproblem(N, M_, 307, weights="b2d"), reg, 1.0,
              method=meth, log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/warmstart", uproblem(N, M_, 308), reg, 1.0,
              method=meth, warmstart=warm_pair((N,), (M_,)), log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/verbose", uproblem(N, M_, 309), reg, 1.0,
              method=meth, numItermax=120, verbose=True, log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/not-converged", uproblem(N, M_, 310), reg, 1.0,
              method=meth, numItermax=4, log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/tiny-reg", uproblem(N, M_, 311), 1e-4, 1.0,
              method=meth, numItermax=50, log=True)
        c.add("sinkhorn_unbalanced", f"{meth}/small-reg/f32/big", uproblem(*BIG, 312, "f32"),
              0.005, 1.0, method=meth, numItermax=200)
        if meth != "sinkhorn_translation_invariant":   # there: ZeroDivisionError, as POT
            c.add("sinkhorn_unbalanced", f"{meth}/reg_m=0", uproblem(N, M_, 313), reg, 0.0,
                  method=meth, log=True)
        if meth in PAIRED_UOT_METHODS:
            for k in (SMALL_BATCH, BIG_BATCH):
                c.add("sinkhorn_unbalanced", f"{meth}/paired/k={k}",
                      uproblem(N, M_, 314, weights="paired", k=k), reg, 1.0, method=meth,
                      log=True)
                c.add("sinkhorn_unbalanced", f"{meth}/paired/k={k}/f32/big",
                      uproblem(*BIG, 315, "f32", weights="paired", k=k), reg, (0.5, 2.0),
                      method=meth)
            c.add("sinkhorn_unbalanced", f"{meth}/b2d/warmstart-2d",
                  uproblem(N, M_, 316, weights="b2d"), reg, 1.0, method=meth, log=True,
                  warmstart=warm_pair((N, SMALL_BATCH), (M_, SMALL_BATCH)))
        else:
            c.add("sinkhorn_unbalanced", f"{meth}/paired-refused",
                  uproblem(N, M_, 314, weights="paired"), reg, 1.0, method=meth, raises=True)
    c.add("sinkhorn_unbalanced", "sinkhorn_stabilized/tau=10", uproblem(N, M_, 317), 0.01, 1.0,
          method="sinkhorn_stabilized", tau=10.0, log=True)
    c.add("sinkhorn_unbalanced", "sinkhorn/f32-lanes-fallback", uproblem(N, M_, 318, "f32"),
          0.002, 1.0, numItermax=30, log=True)
    bad = [
        ("reg=0", (0.0, 1.0), {}),
        ("reg_m-negative", (reg, -1.0), {}),
        ("reg_m-nan", (reg, np.nan), {}),
        ("reg_m-length-3", (reg, [1.0, 1.0, 1.0]), {}),
        ("reg_m-str", (reg, "1"), {}),
        ("reg_type", (reg, 1.0), dict(reg_type="foo")),
        ("method", (reg, 1.0), dict(method="foo")),
        ("c-shape", (reg, 1.0), dict(c=random((N, M_ + 1), 1))),
        ("c-negative", (reg, 1.0), dict(c=normal((N, M_), 1))),
        ("warmstart-shape", (reg, 1.0), dict(warmstart=warm_pair((N,), (N,)))),
        ("tau=0", (reg, 1.0), dict(method="sinkhorn_stabilized", tau=0.0)),
    ]
    for name, args, kw in bad:
        c.add("sinkhorn_unbalanced", f"bad/{name}", uproblem(N, M_, 319), *args, raises=True, **kw)

    for meth in UOT_METHODS:
        for cost in ("linear", "total"):
            c.add("sinkhorn_unbalanced2", f"{meth}/{cost}", uproblem(N, M_, 320), reg, 1.0,
                  method=meth, returnCost=cost, log=cost == "total")
        c.add("sinkhorn_unbalanced2", f"{meth}/f32/entropy", uproblem(N, M_, 321, "f32"), reg,
              (0.5, 2.0), method=meth, reg_type="entropy")
        for reg_type in ("kl", "entropy"):
            c.add("sinkhorn_unbalanced2", f"{meth}/b2d/{reg_type}",
                  uproblem(N, M_, 322, weights="b2d"), reg, 1.0, method=meth, reg_type=reg_type,
                  log=True)
        if meth in PAIRED_UOT_METHODS:
            c.add("sinkhorn_unbalanced2", f"{meth}/paired/k={BIG_BATCH}",
                  uproblem(N, M_, 323, weights="paired", k=BIG_BATCH), reg, 1.0, method=meth)
    c.add("sinkhorn_unbalanced2", "bad/returnCost", uproblem(N, M_, 324), reg, 1.0,
          returnCost="foo", raises=True)
    c.add("sinkhorn_unbalanced2", "bad/method", uproblem(N, M_, 324), reg, 1.0, method="foo",
          raises=True)
    c.add("sinkhorn_unbalanced2", "bad/method-not-str", uproblem(N, M_, 324), reg, 1.0,
          method=None, raises=True)

    for fn in ("unbalanced.sinkhorn_knopp_unbalanced", "unbalanced.sinkhorn_unbalanced_log",
               "unbalanced.sinkhorn_stabilized_unbalanced",
               "unbalanced.sinkhorn_unbalanced_translation_invariant"):
        for dt in DTYPES:
            c.add(fn, f"{dt}/log", uproblem(N, M_, 330, dt), reg, 1.0, log=True)
            c.add(fn, f"{dt}/F/entropy", uproblem(N, M_, 331, dt, "F"), reg, (1.0, np.inf),
                  reg_type="entropy")
        c.add(fn, "b2d", uproblem(N, M_, 332, weights="b2d"), reg, 1.0)

    dim, k = 30, 3
    for meth in ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_reg_scaling",
                 "sinkhorn_translation_invariant"):
        for dt in DTYPES:
            c.add("barycenter_unbalanced", f"{meth}/{dt}/log", bary(dim, k, 340, dt), 0.01, 1.0,
                  method=meth, log=True)
    for meth in ("sinkhorn", "sinkhorn_stabilized"):
        c.add("barycenter_unbalanced", f"{meth}/weights", bary(dim, k, 341, weights=True), 0.01,
              0.5, method=meth)
        c.add("barycenter_unbalanced", f"{meth}/verbose", bary(dim, k, 342), 0.01, 1.0,
              method=meth, numItermax=60, stopThr=0.0, verbose=True, log=True)
        c.add("barycenter_unbalanced", f"{meth}/not-converged", bary(dim, k, 343), 0.01, 1.0,
              method=meth, numItermax=3)
        c.add("barycenter_unbalanced", f"{meth}/tiny-reg", bary(dim, k, 344), 1e-4, 1.0,
              method=meth, numItermax=50, log=True)
    c.add("barycenter_unbalanced", "sinkhorn_stabilized/tau=10", bary(dim, k, 345), 0.005, 1.0,
          method="sinkhorn_stabilized", tau=10.0, log=True)
    c.add("barycenter_unbalanced", "bad/reg_m-inf", bary(dim, k, 346), 0.01, np.inf, raises=True)
    c.add("barycenter_unbalanced", "bad/A-1d", make(lambda: np.ones(5)),
          make(lambda: np.ones((5, 5))), 0.01, 1.0, raises=True)
    c.add("barycenter_unbalanced", "bad/weights", bary(dim, k, 346), 0.01, 1.0,
          weights=make(lambda: np.ones(k + 1)), raises=True)
    c.add("barycenter_unbalanced", "bad/method", bary(dim, k, 346), 0.01, 1.0, method="foo",
          raises=True)
    for fn in ("unbalanced.barycenter_unbalanced_sinkhorn",
               "unbalanced.barycenter_unbalanced_stabilized"):
        for dt in DTYPES:
            c.add(fn, f"{dt}/log", bary(dim, k, 347, dt), 0.01, 1.0, log=True)
        c.add(fn, "weights", bary(dim, k, 348, weights=True), 0.01, 2.0)


# --------------------------------------------------------------------------
# point clouds and gradients
# --------------------------------------------------------------------------
def empirical_cases(c):
    n, m, d = 35, 28, 3
    for fn in ("bregman.empirical_sinkhorn", "bregman.empirical_sinkhorn2"):
        for metric in ("sqeuclidean", "euclidean"):
            for dt in DTYPES:
                c.add(fn, f"lazy/{metric}/{dt}/log", clouds(n, m, d, 400, dt), 0.5, metric=metric,
                      isLazy=True, log=True, stopThr=STOP[dt])
            c.add(fn, f"lazy/{metric}/uniform", clouds(n, m, d, 401, weights="none"), 0.5,
                  metric=metric, isLazy=True)
        for metric in ("sqeuclidean", "euclidean", "cityblock", "cosine"):
            c.add(fn, f"dense/{metric}/log", clouds(n, m, d, 402), 0.5, metric=metric, log=True)
        c.add(fn, "dense/f32/uniform", clouds(n, m, d, 403, "f32", weights="none"), 0.5,
              stopThr=STOP["f32"])
        c.add(fn, "dense/method=sinkhorn_log", clouds(n, m, d, 404), 0.05, method="sinkhorn_log",
              log=True)
        c.add(fn, "lazy/big", clouds(130, 70, 2, 405), 0.5, isLazy=True, log=True)
        c.add(fn, "lazy/warmstart", clouds(n, m, d, 406), 0.5, isLazy=True,
              warmstart=warm_pair((n,), (m,)), log=True)
        c.add(fn, "dense/warmstart", clouds(n, m, d, 406), 0.5,
              warmstart=warm_pair((n,), (m,)), log=True)
        c.add(fn, "lazy/verbose", clouds(n, m, d, 407), 0.05, isLazy=True, numIterMax=300,
              stopThr=0.0, verbose=True)
        c.add(fn, "lazy/not-converged", clouds(n, m, d, 408), 0.05, isLazy=True, numIterMax=20,
              log=True)
        c.add(fn, "lazy/batchSize-pair", clouds(n, m, d, 409), 0.5, isLazy=True,
              batchSize=(10, 20))
        c.add(fn, "bad/lazy-metric", clouds(n, m, d, 410), 0.5, isLazy=True, metric="cityblock",
              raises=True)
        c.add(fn, "bad/batchSize", clouds(n, m, d, 410), 0.5, isLazy=True, batchSize=2.5,
              raises=True)
        c.add(fn, "bad/dims", make(lambda: np.zeros((4, 2))), make(lambda: np.zeros((5, 3))), 0.5,
              isLazy=True, raises=True)
        c.add(fn, "bad/reg=0", clouds(n, m, d, 410), 0.0, isLazy=True, raises=True)
    c.add("bregman.empirical_sinkhorn2", "dense/b2d", clouds(n, m, d, 411, weights="b2d"), 0.5,
          log=True)
    c.add("bregman.empirical_sinkhorn", "lazy/lazy-plan-f32", clouds(n, m, d, 412, "f32"), 0.5,
          metric="euclidean", isLazy=True, log=True, stopThr=STOP["f32"])
    for lazy in (False, True):
        c.add("bregman.empirical_sinkhorn_divergence", f"isLazy={lazy}", clouds(n, m, d, 420),
              0.5, isLazy=lazy)
        c.add("bregman.empirical_sinkhorn_divergence", f"isLazy={lazy}/log/f32",
              clouds(n, m, d, 421, "f32"), 0.5, isLazy=lazy, log=True, stopThr=STOP["f32"])
        c.add("bregman.empirical_sinkhorn_divergence", f"isLazy={lazy}/euclidean/uniform",
              clouds(n, n, d, 422, weights="none"), 0.5, isLazy=lazy, metric="euclidean")
    c.add("bregman.empirical_sinkhorn_divergence", "lazy/warmstart",
          clouds(n, n, d, 423), 0.5, isLazy=True, warmstart=warm_pair((n,), (n,)),
          numIterMax=1000)
    c.add("bregman.empirical_sinkhorn_divergence", "bad/reg", clouds(n, m, d, 424), -1.0,
          raises=True)
    c.add("empirical.LazyPlan", "direct", normal((n, d), 425), normal((m, d), 426),
          normal((n,), 427), normal((m,), 428), "sqeuclidean", 0.5, np.dtype(np.float32))


def gradient_cases(c):
    for meth in ("sinkhorn", "sinkhorn_log"):
        for dt in DTYPES:
            c.add("sinkhorn2_value_and_grad", f"{meth}/{dt}/given", problem(N, M_, 500, dt), REG,
                  method=meth)
            c.add("sinkhorn2_value_and_grad", f"{meth}/{dt}/F/uniform",
                  problem(N, M_, 501, dt, "F", "uniform"), REG, method=meth)
        for k in (SMALL_BATCH, BIG_BATCH):
            for mode in ("b2d", "paired"):
                c.add("sinkhorn2_value_and_grad", f"{meth}/{mode}/k={k}",
                      problem(N, M_, 502, weights=mode, k=k), REG, method=meth)
        c.add("sinkhorn2_value_and_grad", f"{meth}/zero-weights",
              problem(N, M_, 503, weights="zeros"), REG, method=meth)
        c.add("sinkhorn2_value_and_grad", f"{meth}/warmstart", problem(N, M_, 504), REG,
              method=meth, warmstart=warm_pair((N,), (M_,)))
        c.add("sinkhorn2_value_and_grad", f"{meth}/not-converged/warn", problem(N, M_, 505), 0.01,
              method=meth, numItermax=5, warn=True, verbose=True)
        c.add("sinkhorn2_value_and_grad", f"{meth}/big", problem(*BIG, 506), REG, method=meth)
    c.add("sinkhorn2_value_and_grad", "sinkhorn_log/small-reg", problem(N, M_, 507), 1e-3,
          method="sinkhorn_log", numItermax=300)
    c.add("sinkhorn2_value_and_grad", "bad/method", problem(N, M_, 508), REG,
          method="sinkhorn_stabilized", raises=True)
    c.add("sinkhorn2_value_and_grad", "bad/reg", problem(N, M_, 508), 0.0, raises=True)

    n, m, d = 35, 28, 3
    fn = "empirical_sinkhorn2_value_and_grad"
    for metric in ("sqeuclidean", "euclidean"):
        for dt in DTYPES:
            c.add(fn, f"{metric}/{dt}", clouds(n, m, d, 510, dt), 0.5, metric=metric,
                  stopThr=STOP[dt])
        c.add(fn, f"{metric}/uniform", clouds(n, m, d, 511, weights="none"), 0.5, metric=metric)
    for k in (SMALL_BATCH, BIG_BATCH):
        for mode in ("b2d", "paired"):
            c.add(fn, f"{mode}/k={k}", clouds(n, m, d, 512, weights=mode, k=k), 0.5)
    c.add(fn, "warmstart", clouds(n, m, d, 513), 0.5, warmstart=warm_pair((n,), (m,)))
    c.add(fn, "not-converged/verbose", clouds(n, m, d, 514), 0.05, numIterMax=200, verbose=True)
    c.add(fn, "big/f32", clouds(130, 70, 2, 515, "f32"), 0.5, stopThr=STOP["f32"])
    c.add(fn, "bad/metric", clouds(n, m, d, 516), 0.5, metric="cityblock", raises=True)


# --------------------------------------------------------------------------
# discounted cumulative sums and GAE (numbaot.scan)
# --------------------------------------------------------------------------
def _dones(shape, seed, kind="bool"):
    d = _rng(seed).random(shape) < 0.15
    return d if kind == "bool" else d.astype(np.float32)


def dones(shape, seed, kind="bool"):
    return make(_dones, shape, seed, kind)


def gammas(batch, seed):
    return make(lambda: _rng(seed).uniform(0.8, 1.0, batch))


def scan_cases(c):
    shapes = {"1d": (37,), "2d": (5, 29), "many-rows": (80, 50), "long-1row": (70001,),
              "long-3rows": (3, 40000)}
    for fn in ("discounted_cumsum_right", "discounted_cumsum_left"):
        for sname, shape in shapes.items():
            for dt in DTYPES:
                c.add(fn, f"{sname}/{dt}", normal(shape, 600, dtype=dt), 0.9)
            c.add(fn, f"{sname}/dones", normal(shape, 601), 0.95, dones=dones(shape, 602))
            if len(shape) == 2:
                c.add(fn, f"{sname}/gamma-array/dones-float", normal(shape, 603),
                      gammas(shape[0], 604), dones=dones(shape, 605, "float"))
        for g in (0.0, 1.0):
            c.add(fn, f"gamma={g}", normal((5, 29), 606), g)
        c.add(fn, "int-x", make(lambda: np.arange(12).reshape(3, 4)), 0.5)
        c.add(fn, "empty-row", make(lambda: np.zeros((2, 0))), 0.5)
        c.add(fn, "list-x/np-gamma", [1.0, 2.0, 3.0], np.float32(0.5))
        for name, args, kw in [
            ("gamma=1.5", (normal((5,), 607), 1.5), {}),
            ("gamma-nan", (normal((5,), 607), np.nan), {}),
            ("gamma-shape", (normal((3, 5), 607), make(lambda: np.full(4, 0.9))), {}),
            ("x-nan", (make(lambda: np.array([1.0, np.nan])), 0.9), {}),
            ("x-3d", (make(lambda: np.ones((2, 2, 2))), 0.9), {}),
            ("x-complex", (make(lambda: np.ones(3, complex)), 0.9), {}),
            ("dones-shape", (normal((5,), 607), 0.9), dict(dones=make(lambda: np.zeros(4, bool)))),
            ("dones-values", (normal((5,), 607), 0.9), dict(dones=make(lambda: np.full(5, 2.0)))),
            ("overflow", (make(lambda: np.full(10, 3e38, np.float32)), 1.0), {}),
        ]:
            c.add(fn, f"bad/{name}", *args, raises=True, **kw)

    for fn, forward in (("discounted_cumsum_right_backward", "discounted_cumsum_right"),
                        ("discounted_cumsum_left_backward", "discounted_cumsum_left")):
        def fwd(shape, seed, gamma, d=None, dtype="f64", forward=forward):
            x = _normal(shape, seed, dtype=dtype)
            return getattr(numbaot, forward)(x, gamma, dones=d)

        for sname, shape in shapes.items():
            for dt in DTYPES:
                c.add(fn, f"{sname}/{dt}", normal(shape, 610, dtype=dt),
                      make(fwd, shape, 611, 0.9, dtype=dt), 0.9)
            if len(shape) == 2:
                c.add(fn, f"{sname}/gamma-array/dones", normal(shape, 612),
                      make(lambda shape=shape, fwd=fwd: fwd(shape, 613, _rng(614).uniform(
                          0.8, 1.0, shape[0]), _dones(shape, 615))),
                      gammas(shape[0], 614), dones=dones(shape, 615))
        c.add(fn, "1d/dones", normal((37,), 616),
              make(lambda fwd=fwd: fwd((37,), 617, 0.95, _dones((37,), 618))), 0.95,
              dones=dones((37,), 618))
        c.add(fn, "mixed-dtypes", normal((5, 29), 619, dtype="f32"),
              make(fwd, (5, 29), 620, 0.9), 0.9)
        c.add(fn, "gamma=1", normal((5, 29), 621), make(fwd, (5, 29), 622, 1.0), 1.0)
        c.add(fn, "bad/shape-mismatch", normal((5, 29), 623), normal((5, 28), 624), 0.9,
              raises=True)
        c.add(fn, "bad/gamma", normal((5, 29), 623), normal((5, 29), 624), -0.1, raises=True)

    fn = "gae"
    for sname, (B, T) in {"2d": (5, 29), "many-rows": (80, 50), "long-3rows": (3, 40000)}.items():
        for dt in DTYPES:
            c.add(fn, f"{sname}/values-N+1/{dt}", normal((B, T), 630, dtype=dt),
                  normal((B, T + 1), 631, dtype=dt), dones((B, T), 632), 0.99, 0.95)
    for dt in DTYPES:
        c.add(fn, f"1d/{dt}", normal((37,), 633, dtype=dt), normal((38,), 634, dtype=dt), None,
              0.99, 0.95)
    c.add(fn, "values-N/no-last", normal((5, 29), 635), normal((5, 29), 636), None, 0.99, 0.95)
    c.add(fn, "values-N/last-scalar", normal((5, 29), 635), normal((5, 29), 636),
          dones((5, 29), 637), 0.99, 0.95, last_value=1.5)
    c.add(fn, "values-N/last-array", normal((5, 29), 635), normal((5, 29), 636),
          dones((5, 29), 637, "float"), 0.99, 0.95, last_value=normal((5,), 638))
    c.add(fn, "gamma-lam-arrays", normal((5, 29), 639), normal((5, 30), 640), dones((5, 29), 641),
          gammas(5, 642), gammas(5, 643))
    c.add(fn, "lam=0/gamma=1", normal((5, 29), 639), normal((5, 30), 640), None, 1.0, 0.0)
    c.add(fn, "mixed-dtypes", normal((5, 29), 644, dtype="f32"), normal((5, 30), 645), None,
          0.9, 0.9)
    c.add(fn, "bad/last_value-with-N+1", normal((5, 29), 646), normal((5, 30), 647), None, 0.9,
          0.9, last_value=1.0, raises=True)
    c.add(fn, "bad/values-length", normal((5, 29), 646), normal((5, 31), 647), None, 0.9, 0.9,
          raises=True)
    c.add(fn, "bad/lam", normal((5, 29), 646), normal((5, 30), 647), None, 0.9, 1.1, raises=True)
    c.add(fn, "bad/rewards-nan", make(lambda: np.array([np.nan, 1.0])),
          make(lambda: np.zeros(3)), None, 0.9, 0.9, raises=True)


# --------------------------------------------------------------------------
# the Sinkhorn operator (numbaot.implicit)
# --------------------------------------------------------------------------
def _operator_pair(batch, n, seed, dtype, n_iter=20, tol=None, scale=2.0):
    """(R, grad_R) with R = sinkhorn_operator(X)."""
    X = _normal(batch + (n, n), seed, scale, dtype)
    R = numbaot.sinkhorn_operator(X, n_iter=n_iter, tol=tol)
    return R, _normal(batch + (n, n), seed + 1, 1.0, dtype)


def implicit_cases(c):
    sizes = (4, 5, 16, 20)
    batches = {"b3": (3,), "b2x35": (2, 35)}   # 70 matrices: several work items
    for n in sizes:
        for dt in DTYPES:
            for bname, batch in batches.items():
                c.add("sinkhorn_operator", f"n={n}/{dt}/{bname}",
                      normal(batch + (n, n), 700, 2.0, dt))
            c.add("sinkhorn_operator", f"n={n}/{dt}/tol/return_n_iter",
                  normal((40, n, n), 701, 2.0, dt), n_iter=60, tol=1e-6, return_n_iter=True)
        c.add("sinkhorn_operator", f"n={n}/single-matrix/n_iter=1", normal((n, n), 702), n_iter=1)
        c.add("sinkhorn_operator", f"n={n}/large-entries", normal((9, n, n), 703, 1e3),
              n_iter=30, return_n_iter=True)
        c.add("sinkhorn_operator", f"n={n}/tol=0", normal((9, n, n), 704), tol=0.0,
              return_n_iter=True)
    c.add("sinkhorn_operator", "n=1", normal((3, 1, 1), 705))
    c.add("sinkhorn_operator", "n=40", normal((3, 40, 40), 705))
    c.add("sinkhorn_operator", "int-X", make(lambda: np.arange(32).reshape(2, 4, 4) % 5))
    c.add("sinkhorn_operator", "empty-batch", make(lambda: np.zeros((0, 4, 4))),
          return_n_iter=True)
    for name, args, kw in [
        ("X-1d", (normal((4,), 706),), {}),
        ("not-square", (normal((2, 4, 5), 706),), {}),
        ("X-nan", (make(lambda: np.full((4, 4), np.nan)),), {}),
        ("n_iter=0", (normal((4, 4), 706),), dict(n_iter=0)),
        ("n_iter-float", (normal((4, 4), 706),), dict(n_iter=2.0)),
        ("tol-negative", (normal((4, 4), 706),), dict(tol=-1.0)),
        ("X-complex", (make(lambda: np.ones((4, 4), complex)),), {}),
    ]:
        c.add("sinkhorn_operator", f"bad/{name}", *args, raises=True, **kw)

    fn = "sinkhorn_operator_backward"
    for n in sizes:
        for dt in DTYPES:
            for meth in ("implicit", "implicit_corrected"):
                c.add(fn, f"{meth}/n={n}/{dt}", spread(_operator_pair, (70,), n, 710, dt), meth,
                      return_info=True)
            c.add(fn, f"unrolled/n={n}/{dt}", spread(_operator_pair, (70,), n, 710, dt),
                  "unrolled", X=normal((70, n, n), 710, 2.0, dt), return_info=True)
        for meth in ("implicit", "implicit_corrected"):
            c.add(fn, f"{meth}/n={n}/unconverged/b3",
                  spread(_operator_pair, (3,), n, 711, "f64", 3), meth, cg_tol=1e-8, max_cg_iter=3)
        c.add(fn, f"unrolled/n={n}/tol", spread(_operator_pair, (2, 5), n, 712, "f64", 50, 1e-6),
              "unrolled", X=normal((2, 5, n, n), 712, 2.0), n_iter=50, tol=1e-6, return_info=True)
        c.add(fn, f"unrolled/n={n}/n_iter=3/R=None", None, normal((3, n, n), 713), "unrolled",
              X=normal((3, n, n), 714), n_iter=3)
    c.add(fn, "implicit/default-method", spread(_operator_pair, (3,), 6, 715, "f64"))
    for name, args, kw in [
        ("method", (spread(_operator_pair, (3,), 4, 716, "f64"), "foo"), {}),
        ("unrolled-without-X", (spread(_operator_pair, (3,), 4, 716, "f64"), "unrolled"), {}),
        ("R-negative", (normal((4, 4), 717), normal((4, 4), 718)), {}),
        ("shape-mismatch", (random((3, 4, 4), 717), normal((2, 4, 4), 718)), {}),
        ("cg_tol=0", (spread(_operator_pair, (3,), 4, 716, "f64"),), dict(cg_tol=0.0)),
        ("max_cg_iter=0", (spread(_operator_pair, (3,), 4, 716, "f64"),), dict(max_cg_iter=0)),
    ]:
        c.add(fn, f"bad/{name}", *args, raises=True, **kw)


# --------------------------------------------------------------------------
# utilities (numbaot.utils)
# --------------------------------------------------------------------------
def utils_cases(c):
    x1, x2 = normal((13, 4), 800), normal((9, 4), 801)
    for metric in ("sqeuclidean", "euclidean", "cityblock", "minkowski", "cosine",
                   "correlation", "chebyshev", "seuclidean"):
        c.add("dist", f"{metric}", x1, x2, metric=metric)
    for dt in DTYPES:
        c.add("dist", f"sqeuclidean/{dt}", normal((13, 4), 802, dtype=dt),
              normal((9, 4), 803, dtype=dt))
        c.add("dist", f"cityblock/{dt}", normal((13, 4), 802, dtype=dt),
              normal((9, 4), 803, dtype=dt), metric="cityblock")
    c.add("dist", "x2=None", x1)
    c.add("dist", "x2=None/euclidean", x1, metric="euclidean")
    c.add("dist", "minkowski/p=3/w", x1, x2, metric="minkowski", p=3,
          w=make(lambda: np.array([1.0, 2.0, 0.5, 1.0])))
    c.add("dist", "cityblock/use_tensor", x1, x2, metric="cityblock", use_tensor=True)
    c.add("dist", "backend=scipy/sqeuclidean", x1, x2, backend="scipy")
    c.add("dist", "backend=scipy/minkowski", x1, x2, metric="minkowski", p=1.5, backend="scipy")
    c.add("dist", "callable-metric", x1, x2, metric=lambda u, v: float(np.abs(u - v).max()))
    c.add("dist", "int", make(lambda: np.arange(12).reshape(4, 3)),
          make(lambda: np.arange(6).reshape(2, 3)))
    c.add("dist", "list-input", [[0.0, 1.0], [2.0, 3.0]], [[1.0, 1.0]])
    c.add("dist", "bad/1d", make(lambda: np.ones(3)), raises=True)
    c.add("dist", "bad/features", x1, normal((9, 3), 804), raises=True)
    c.add("dist", "bad/complex", make(lambda: np.ones((2, 2), complex)), raises=True)

    c.add("unif", "n=7", 7)
    c.add("unif", "n=1", 1)
    c.add("unif", "np-int", np.int32(5))
    c.add("unif", "type_as-f32", 6, type_as=make(lambda: np.zeros(2, np.float32)))
    c.add("unif", "bad/n=0", 0, raises=True)
    c.add("unif", "bad/n-float", 2.5, raises=True)
    c.add("unif", "bad/n-bool", True, raises=True)

    fn = "utils.euclidean_distances"
    c.add(fn, "squared", x1, x2, squared=True)
    c.add(fn, "not-squared", x1, x2)
    c.add(fn, "f32", normal((13, 4), 805, dtype="f32"), normal((9, 4), 806, dtype="f32"))
    c.add_thunk(fn, "X-is-Y",
                lambda: resolve(fn)(*[_normal((8, 3), 807)] * 2))


# --------------------------------------------------------------------------
# the public surface: names and signatures
# --------------------------------------------------------------------------
#: The public functions of numbaot 0379b05 (``__all__`` of the package, less its
#: submodules, and of each public module), fixed here so that the corpus does
#: not depend on the package it checks.  Each is called at least once.
PUBLIC = {
    "numbaot": (
        "sinkhorn", "sinkhorn2", "dist", "unif", "sinkhorn_knopp", "sinkhorn_log",
        "sinkhorn_stabilized", "sinkhorn_epsilon_scaling", "greenkhorn", "barycenter",
        "sinkhorn2_value_and_grad", "empirical_sinkhorn2_value_and_grad",
        "discounted_cumsum_right", "discounted_cumsum_left", "discounted_cumsum_right_backward",
        "discounted_cumsum_left_backward", "gae", "sinkhorn_operator",
        "sinkhorn_operator_backward", "sinkhorn_unbalanced", "sinkhorn_unbalanced2",
        "barycenter_unbalanced"),
    "bregman": (
        "sinkhorn", "sinkhorn2", "sinkhorn_knopp", "sinkhorn_log", "sinkhorn_stabilized",
        "sinkhorn_epsilon_scaling", "greenkhorn", "empirical_sinkhorn", "empirical_sinkhorn2",
        "empirical_sinkhorn_divergence", "barycenter", "barycenter_sinkhorn",
        "barycenter_stabilized", "convolutional_barycenter2d"),
    "unbalanced": (
        "sinkhorn_unbalanced", "sinkhorn_unbalanced2", "sinkhorn_knopp_unbalanced",
        "sinkhorn_unbalanced_log", "sinkhorn_stabilized_unbalanced",
        "sinkhorn_unbalanced_translation_invariant", "barycenter_unbalanced",
        "barycenter_unbalanced_sinkhorn", "barycenter_unbalanced_stabilized"),
    "utils": ("dist", "unif", "euclidean_distances"),
    "gradients": ("sinkhorn2_value_and_grad", "empirical_sinkhorn2_value_and_grad"),
    "scan": ("discounted_cumsum_right", "discounted_cumsum_left",
             "discounted_cumsum_right_backward", "discounted_cumsum_left_backward", "gae"),
    "implicit": ("sinkhorn_operator", "sinkhorn_operator_backward"),
    "empirical": ("empirical_sinkhorn", "empirical_sinkhorn2", "empirical_sinkhorn_divergence",
                  "LazyPlan"),
    "barycenters": ("barycenter", "barycenter_sinkhorn", "barycenter_stabilized",
                    "convolutional_barycenter2d"),
    "distributed": ("local_rows", "sinkhorn", "sinkhorn_unbalanced", "empirical_sinkhorn"),
}


def resolve(path):
    """numbaot.<path>, importing the submodule as ``import numbaot.<module>`` does."""
    module, _, name = path.rpartition(".")
    mod = importlib.import_module(f"numbaot.{module}" if module else "numbaot")
    return getattr(mod, name)


def _surface(module_name):
    """A module's ``__all__`` and the signature of each of its names."""
    mod = importlib.import_module(module_name if module_name == "numbaot"
                                  else f"numbaot.{module_name}")
    out = {"__all__": list(mod.__all__)}
    for name in mod.__all__:
        obj = getattr(mod, name, None)
        if obj is None:
            out[name] = "missing"
        elif inspect.ismodule(obj):
            out[name] = "module"
        else:
            out[name] = ("class " if inspect.isclass(obj) else "") + str(inspect.signature(obj))
    return out


def public_paths():
    """(path, name) of every binding of a public function: 'X' for numbaot.X,
    '<module>.X' for numbaot.<module>.X."""
    return [(name if module == "numbaot" else f"{module}.{name}", name)
            for module, names in PUBLIC.items() for name in names]


def api_and_alias_cases(c, skip_modules=("distributed",)):
    """api/<module> cases, and one call through every binding of a public
    function that no other case calls (the call of the first case of the same
    name, through this binding)."""
    for module_name in PUBLIC:
        c.add_thunk("api", module_name, lambda m=module_name: _surface(m))
    called = {case.path for case in c.cases.values()}
    for path, name in public_paths():
        if path in called or path.split(".")[0] in skip_modules:
            continue
        sources = [p for p, nm in public_paths() if nm == name and p in called]
        if not sources:
            raise LookupError(f"no case calls the public function {name}")
        first = c.first(sources[0])
        c.add(path, "alias", *first.args, **first.kwargs)


def build_corpus():
    c = Corpus()
    balanced_cases(c)
    barycenter_cases(c)
    unbalanced_cases(c)
    empirical_cases(c)
    gradient_cases(c)
    scan_cases(c)
    implicit_cases(c)
    utils_cases(c)
    api_and_alias_cases(c)
    return c


# ==========================================================================
# MPI corpus (numbaot.distributed)
# ==========================================================================
def _comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _rows(n):
    """This rank's rows, computed here (not with the function under test)."""
    comm = _comm()
    q, r = divmod(n, comm.Get_size())
    rank = comm.Get_rank()
    start = rank * q + min(rank, r)
    return slice(start, start + q + (1 if rank < r else 0))


def _local_transport(n, m, seed, dtype="f64", weights="given", mass_b=1.0, bad=None):
    """(a_local, b, M_local) of the problem of _transport; ``bad`` spoils the
    input on some ranks (a NaN on the last, a b that differs on rank 0, ...)."""
    a, b, M = _transport(n, m, seed, dtype, "C", "given", mass_b=mass_b)
    sl = _rows(n)
    a_loc, M_loc = a[sl], M[sl]
    comm = _comm()
    rank, size = comm.Get_rank(), comm.Get_size()
    if bad == "nan-on-last-rank" and rank == size - 1:
        M_loc = M_loc.copy()
        M_loc[0, 0] = np.nan
    if bad == "b-differs" and rank == 0:
        b = b[::-1].copy()
    if bad == "zero-mass":
        a_loc = np.zeros_like(a_loc)
    if weights == "uniform":
        return None, None, M_loc
    if weights == "F":
        M_loc = np.asfortranarray(M_loc)
    return a_loc, b, M_loc


def local_problem(n, m, seed, dtype="f64", weights="given", **kw):
    return spread(_local_transport, n, m, seed, dtype, weights, **kw)


def local_rows_of(x, n):
    """Rows of a recipe's array owned by this rank."""
    return make(lambda: x()[_rows(n)])


def _local_clouds(n, m, d, seed, dtype="f64", weights="given", bad_dim=False):
    X, Y, a, b = _clouds(n, m, d, seed, dtype, "given")
    sl = _rows(n)
    if bad_dim and _comm().Get_rank() == 0:
        X = np.zeros((n, d + 1))
    if weights == "none":
        return Args(X[sl], Y)
    return Args(X[sl], Y, a_local=a[sl], b=b)


def local_clouds(n, m, d, seed, dtype="f64", weights="given", **kw):
    return spread(_local_clouds, n, m, d, seed, dtype, weights, **kw)


def _sub_communicator_case():
    """Each rank alone in its own communicator solves the whole problem."""
    comm = _comm()
    sub = comm.Split(color=comm.Get_rank(), key=0)
    try:
        a, b, M = _transport(27, 15, 1000 + comm.Get_rank())
        return numbaot.distributed.sinkhorn(a, b, M, REG, comm=sub, log=True)
    finally:
        sub.Free()


def _warm_on_one_rank(n, m, seed):
    sl = _rows(n)
    if _comm().Get_rank() == 0:
        return _pair((sl.stop - sl.start,), (m,), seed, 0.1)
    return None


def build_mpi_corpus():
    c = Corpus()
    D = "distributed"
    n, m = 41, 23

    def local_warm(seed=900):
        return make(lambda: tuple(w[_rows(n)] if i == 0 else w for i, w in
                                  enumerate(_pair((n,), (m,), seed, 0.1))))

    for k in (10, 7, 2):
        c.add(f"{D}.local_rows", f"n={k}", k)
    c.add(f"{D}.local_rows", "explicit-comm", 10, comm=make(_comm))
    c.add(f"{D}.local_rows", "bad/n=1", 1, raises=True)
    c.add(f"{D}.local_rows", "bad/n-float", 2.5, raises=True)
    c.add(f"{D}.local_rows", "bad/comm", 10, comm="world", raises=True)

    for meth in ("sinkhorn", "sinkhorn_log"):
        for dt in DTYPES:
            c.add(f"{D}.sinkhorn", f"{meth}/{dt}/log", local_problem(n, m, 901, dt), REG,
                  method=meth, log=True)
        c.add(f"{D}.sinkhorn", f"{meth}/uniform", local_problem(40, 17, 902, weights="uniform"),
              0.1, method=meth)
        c.add(f"{D}.sinkhorn", f"{meth}/F", local_problem(n, m, 903, weights="F"), REG,
              method=meth)
        c.add(f"{D}.sinkhorn", f"{meth}/big", local_problem(*BIG, 904), REG, method=meth,
              log=True)
        c.add(f"{D}.sinkhorn", f"{meth}/warmstart", local_problem(n, m, 905), REG, method=meth,
              warmstart=local_warm(), log=True)
        c.add(f"{D}.sinkhorn", f"{meth}/not-converged", local_problem(n, m, 906), 0.01,
              method=meth, numItermax=25, log=True)
        c.add(f"{D}.sinkhorn", f"{meth}/verbose", local_problem(n, m, 907), REG, method=meth,
              numItermax=60, verbose=True)
        c.add(f"{D}.sinkhorn", f"{meth}/tiny-reg", local_problem(n, m, 908), 1e-4, method=meth,
              numItermax=50, log=True)
        c.add(f"{D}.sinkhorn", f"{meth}/explicit-comm", local_problem(n, m, 909), REG,
              method=meth, comm=make(_comm))
    c.add(f"{D}.sinkhorn", "sinkhorn_log/small-reg", local_problem(n, m, 910), 1e-3,
          method="sinkhorn_log", numItermax=300, log=True)
    c.add_thunk(f"{D}.sinkhorn", "sub-communicator", _sub_communicator_case)

    for reg_type in ("kl", "entropy"):
        for reg_m_name, reg_m in (("1", 1.0), ("pair-inf", (np.inf, 0.5))):
            c.add(f"{D}.sinkhorn_unbalanced", f"{reg_type}/reg_m={reg_m_name}",
                  local_problem(n, m, 920, mass_b=1.5), REG, reg_m, reg_type=reg_type, log=True)
    c.add(f"{D}.sinkhorn_unbalanced", "c-given", local_problem(n, m, 921, mass_b=1.5), REG,
          (0.3, 2.0), c=local_rows_of(random((n, m), 922, low=0.5), n), log=True)
    c.add(f"{D}.sinkhorn_unbalanced", "f32", local_problem(n, m, 923, "f32", mass_b=1.5), REG, 1.0,
          log=True)
    c.add(f"{D}.sinkhorn_unbalanced", "uniform", local_problem(n, m, 924, weights="uniform"), REG,
          1.0)
    c.add(f"{D}.sinkhorn_unbalanced", "warmstart", local_problem(n, m, 925, mass_b=1.5), REG, 1.0,
          warmstart=local_warm(926), log=True)
    c.add(f"{D}.sinkhorn_unbalanced", "verbose", local_problem(n, m, 927, mass_b=1.5), REG, 1.0,
          verbose=True, log=True, numItermax=120)
    c.add(f"{D}.sinkhorn_unbalanced", "big", local_problem(*BIG, 928, mass_b=1.5), REG, 1.0)
    c.add(f"{D}.sinkhorn_unbalanced", "tiny-reg", local_problem(n, m, 929, mass_b=1.5), 1e-4, 1.0,
          numItermax=50, log=True)

    nn, mm, d = 45, 31, 3
    for metric in ("sqeuclidean", "euclidean"):
        for dt in DTYPES:
            c.add(f"{D}.empirical_sinkhorn", f"{metric}/{dt}/log", local_clouds(nn, mm, d, 940, dt),
                  0.5, metric=metric, log=True, stopThr=STOP[dt])
        c.add(f"{D}.empirical_sinkhorn", f"{metric}/uniform",
              local_clouds(nn, mm, d, 941, weights="none"), 0.3, metric=metric)
    c.add(f"{D}.empirical_sinkhorn", "warmstart", local_clouds(nn, mm, d, 942), 0.5,
          warmstart=make(lambda: tuple(w[_rows(nn)] if i == 0 else w for i, w in
                                       enumerate(_pair((nn,), (mm,), 943, 0.1)))), log=True)
    c.add(f"{D}.empirical_sinkhorn", "not-converged/verbose", local_clouds(nn, mm, d, 944), 0.05,
          numIterMax=200, verbose=True, log=True)

    # bad input, on one rank or on all: every rank raises
    a_b_M = local_problem(30, 20, 950)
    c.add(f"{D}.sinkhorn", "bad/nan-on-last-rank",
          local_problem(30, 20, 950, bad="nan-on-last-rank"), 0.1, raises=True)
    c.add(f"{D}.sinkhorn", "bad/b-differs", local_problem(30, 20, 950, bad="b-differs"), 0.1,
          raises=True)
    c.add(f"{D}.sinkhorn", "bad/reg-differs", a_b_M, make(lambda: 0.1 + _comm().Get_rank()),
          raises=True)
    c.add(f"{D}.sinkhorn", "bad/method", a_b_M, 0.1, method="greenkhorn", raises=True)
    c.add(f"{D}.sinkhorn", "bad/zero-total-mass", local_problem(30, 20, 950, bad="zero-mass"), 0.1,
          raises=True)
    c.add(f"{D}.sinkhorn", "bad/warmstart-on-one-rank", a_b_M, 0.1,
          warmstart=make(_warm_on_one_rank, 30, 20, 951), raises=True)
    c.add(f"{D}.sinkhorn", "bad/comm", a_b_M, 0.1, comm=3, raises=True)
    c.add(f"{D}.sinkhorn_unbalanced", "bad/reg_m", a_b_M, 0.1, -1.0, raises=True)
    c.add(f"{D}.sinkhorn_unbalanced", "bad/log-differs", a_b_M, 0.1, 1.0,
          log=make(lambda: _comm().Get_rank() == 0), raises=True)
    c.add(f"{D}.sinkhorn_unbalanced", "bad/method", a_b_M, 0.1, 1.0, method="sinkhorn_log",
          raises=True)
    c.add(f"{D}.empirical_sinkhorn", "bad/dim-on-rank-0",
          local_clouds(nn, mm, d, 952, bad_dim=True), 0.5, raises=True)
    c.add(f"{D}.empirical_sinkhorn", "bad/metric", local_clouds(nn, mm, d, 952), 0.5,
          metric="cityblock", raises=True)
    return c


# ==========================================================================
# running and hashing
# ==========================================================================
def _feed(h, x):
    """Canonical serialisation of x into the hash h (types tagged, lengths
    explicit, so two different outcomes never serialise alike)."""
    def tag(*parts):
        s = "\x00".join(str(p) for p in parts).encode()
        h.update(len(s).to_bytes(8, "little") + s)

    if isinstance(x, np.ndarray):
        if x.dtype == object:
            tag("object-array", x.shape)
            for item in x.ravel(order="C"):
                _feed(h, item)
        else:
            tag("ndarray", x.dtype.str, x.shape)
            h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, np.generic):
        tag("npscalar", x.dtype.str)
        h.update(x.tobytes())
    elif x is None or isinstance(x, (bool, int, float, str, slice, np.dtype)):
        tag(type(x).__name__, repr(x))
    elif isinstance(x, (list, tuple)):
        tag(type(x).__name__, len(x))
        for item in x:
            _feed(h, item)
    elif isinstance(x, dict):
        tag("dict", len(x))
        for key in sorted(x, key=lambda k: (type(k).__name__, repr(k))):
            _feed(h, key)
            _feed(h, x[key])
    elif type(x).__name__ == "LazyPlan":   # numbaot.empirical.LazyPlan
        tag("LazyPlan", x.shape)
        for block in (x[:, :], x[1], x[2:5, 1:4]):
            _feed(h, block)
    else:
        raise TypeError(f"the corpus cannot serialise a {type(x).__name__}; extend _feed")


def run_case(case):
    """Run one case: (outcome dict, sha256 hex digest of it)."""
    stdout = io.StringIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.redirect_stdout(stdout):
            try:
                outcome = {"returned": case.call()}
            except Exception as exc:  # noqa: BLE001 - the exception is the outcome
                outcome = {"raised": [type(exc).__name__, str(exc)]}
            result_hash = hashlib.sha256()
            _feed(result_hash, outcome)   # in here: a LazyPlan computes its blocks now
    outcome["warnings"] = [[w.category.__name__, str(w.message)] for w in caught
                           if not issubclass(w.category, NumbaWarning)]
    outcome["stdout"] = stdout.getvalue()
    h = hashlib.sha256()
    _feed(h, [result_hash.hexdigest(), outcome["warnings"], outcome["stdout"]])
    return outcome, h.hexdigest()


def select(cases, only):
    return [c for c in cases.values() if not only or any(s in c.id for s in only)]


def check_expectation(case, outcome):
    """Say on stderr when a case meant to raise does not, or the reverse
    (a corpus-authoring aid; the outcome is hashed either way)."""
    raised = "raised" in outcome
    if raised != case.raises:
        what = f"raised {outcome['raised'][0]}: {outcome['raised'][1]}" if raised else "returned"
        print(f"note: {case.id} {what}{'' if raised else ' (expected to raise)'}",
              file=sys.stderr)


def show(case, outcome, rank=None):
    with np.printoptions(threshold=12, edgeitems=3, precision=6):
        print(f"== {case.id}" + ("" if rank is None else f" (rank {rank})"))
        print(pprint.pformat(outcome, width=100))


def compare(base, current, only):
    """Print the differences; return their number (NEW cases do not count)."""
    wanted = {k for k in base if not only or any(s in k for s in only)}
    n_bad = 0
    for key in sorted(wanted | set(current)):
        if key not in current:
            print(f"MISSING {key}")
            n_bad += 1
        elif key not in base:
            print(f"NEW     {key}")
        elif base[key] != current[key]:
            print(f"DIFF    {key}")
            n_bad += 1
    print(f"{len(current)} cases run, {n_bad} differ or missing", file=sys.stderr)
    return n_bad


def counts(cases):
    out = {}
    for case in cases:
        out[case.path] = out.get(case.path, 0) + 1
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write {case_id: sha256} to this JSON file")
    p.add_argument("--compare", metavar="BASE", help="compare with this JSON file; exit 1 on "
                   "any difference")
    p.add_argument("--only", action="append", default=[], metavar="SUBSTRING",
                   help="run only the cases whose id contains SUBSTRING (repeatable)")
    p.add_argument("--show", action="store_true", help="print each outcome (not its hash)")
    p.add_argument("--list", action="store_true", help="list the case ids and the number of "
                   "cases per function; run nothing")
    p.add_argument("--mpi", action="store_true", help="the numbaot.distributed corpus (run "
                   "under mpiexec)")
    return p.parse_args(argv)


def run_all(cases, comm, show_outcomes):
    """{case_id: hash} (on rank 0 under MPI: the hash of every rank's
    digest), {case_id: seconds}, and the cacheable kernels compiled meanwhile."""
    hashes, seconds = {}, {}
    rank = comm.Get_rank() if comm is not None else 0
    with numba_event.install_recorder("numba:compile") as compiles:
        for case in cases:
            t0 = time.perf_counter()
            outcome, digest = run_case(case)
            seconds[case.id] = time.perf_counter() - t0
            if comm is not None:
                digests = comm.gather(digest, root=0)
                if rank == 0:
                    h = hashlib.sha256()
                    _feed(h, digests)
                    digest = h.hexdigest()
            hashes[case.id] = digest
            if rank == 0:
                check_expectation(case, outcome)
            if show_outcomes:
                show(case, outcome, rank if comm is not None else None)
    compiled = set()
    for _, event in compiles.buffer:
        disp = event.data["dispatcher"]
        if event.is_start and type(getattr(disp, "_cache", None)).__name__ != "NullCache":
            compiled.add(f"{disp.py_func.__module__}.{disp.py_func.__qualname__}")
    return hashes, seconds, sorted(compiled)


def check_batch_minor_min():
    try:
        from numbaot._config import BATCH_MINOR_MIN
    except ImportError:
        print("note: numbaot._config.BATCH_MINOR_MIN not found", file=sys.stderr)
        return
    if BIG_BATCH < BATCH_MINOR_MIN:
        print(f"note: BIG_BATCH = {BIG_BATCH} < BATCH_MINOR_MIN = {BATCH_MINOR_MIN}: the "
              "problem-minor batch path is no longer covered", file=sys.stderr)


def main(argv=None):
    args = parse_args(argv)
    corpus = build_mpi_corpus() if args.mpi else build_corpus()
    cases = select(corpus.cases, args.only)
    if args.list:
        for case in cases:
            print(case.id)
        for path, k in sorted(counts(cases).items()):
            print(f"{k:5d}  {path}", file=sys.stderr)
        print(f"{len(cases):5d}  cases", file=sys.stderr)
        return 0
    comm = _comm() if args.mpi else None
    rank = comm.Get_rank() if comm is not None else 0
    if rank == 0:
        print(f"numbaot: {numbaot.__file__}", file=sys.stderr)
    numba.set_num_threads(THREADS)
    if rank == 0:
        check_batch_minor_min()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    hashes, seconds, compiled = run_all(cases, comm, args.show)
    if comm is not None:
        compiled = sorted(set().union(*comm.gather(compiled, root=0) or [compiled]))
    rc = 0
    if rank == 0:
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:5]
        print(f"{len(cases)} cases in {wall:.1f} s ({cpu:.1f} s CPU, all threads, rank 0); "
              "slowest: " + ", ".join(f"{k} {v:.2f} s" for k, v in slowest), file=sys.stderr)
        if compiled:
            print(f"WARNING: {len(compiled)} kernels were compiled in this run instead of being "
                  "loaded from Numba's cache (e.g. " + ", ".join(compiled[:3]) + "). A freshly "
                  "compiled kernel can round differently from the same kernel loaded from the "
                  "cache, so the hashes of this run may differ from those of a warm run: run "
                  "again before recording or comparing.", file=sys.stderr)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(hashes, fh, indent=1, sort_keys=True)
                fh.write("\n")
        if args.compare:
            with open(args.compare) as fh:
                base = json.load(fh)
            rc = 1 if compare(base, hashes, args.only) else 0
    if comm is not None:
        rc = comm.bcast(rc, root=0)
    return rc


if __name__ == "__main__":
    sys.exit(main())
