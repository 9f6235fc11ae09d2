"""Input validation and normalisation: the one place for both devices.

Public functions call these helpers before dispatching to a kernel; kernels
never validate.  Every error names the offending argument and says what was
expected.  Nothing here modifies the caller's arrays: normalised arrays are
either the caller's array itself (only ever read afterwards) or new copies.
"""
import numbers
from dataclasses import dataclass

import numpy as np

from . import _dispatch

__all__ = [
    "as_real_array",
    "check_reg",
    "check_iter_count",
    "check_method",
    "check_real_scalar",
    "result_dtype",
    "Problem",
    "prepare_problem",
    "check_stop_thr",
    "check_cost_scale",
    "check_balanced",
    "check_length",
    "check_equal_mass",
    "check_warmstart",
    "warmstart_items",
]


def as_real_array(x, name):
    """Return ``x`` as a NumPy array of a real numeric dtype.

    Raises
    ------
    TypeError
        If ``x`` is complex, boolean, or not numeric; a masked array
        (``np.ma.MaskedArray``: its mask would be silently dropped).
    """
    if type(x) is np.ndarray:  # the common case: only the dtype to check
        if x.dtype.kind in "fiu":
            return x
    elif isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array (np.ma.MaskedArray): its mask would be ignored; "
            f"pass {name}.filled(...) or {name}.compressed() as a plain ndarray"
        )
    if _dispatch.is_device_array(x):
        raise TypeError(
            f"{name} is a GPU array where a host (NumPy) array is expected"
        )
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and other non-arrays
        raise TypeError(f"{name} must be array-like of real numbers: {exc}") from None
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real; got complex dtype {arr.dtype}")
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        if arr.size == 0 and arr.dtype == object:
            return np.zeros(arr.shape)
        raise TypeError(
            f"{name} must hold real numbers (integer or floating dtype); "
            f"got dtype {arr.dtype}"
        )
    return arr


def check_real_scalar(x, name):
    """Return ``x`` as a Python float; TypeError if it is not a real number."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.ndarray)):
        raise TypeError(f"{name} must be a real number; got {type(x).__name__}")
    if isinstance(x, np.ndarray):
        if x.ndim != 0 or np.iscomplexobj(x) or x.dtype == np.bool_:
            raise TypeError(f"{name} must be a real scalar; got an array of shape {x.shape}")
    return float(x)


def check_reg(reg, name="reg"):
    """Validate an entropic regularisation strength: finite and > 0."""
    val = check_real_scalar(reg, name)
    if not np.isfinite(val) or val <= 0:
        raise ValueError(f"{name} must be a finite number > 0; got {reg!r}")
    return val


def check_common(reg, numItermax, stopThr, iter_name="numItermax"):
    """The scalars every Sinkhorn-family solver takes: ``(reg, numItermax,
    stopThr)`` checked by :func:`check_reg`, :func:`check_iter_count` (under
    the name ``iter_name``, e.g. POT's ``numIterMax`` of the empirical
    solvers) and :func:`check_stop_thr`."""
    return (check_reg(reg), check_iter_count(numItermax, iter_name),
            check_stop_thr(stopThr))


def check_stop_thr(stopThr, name="stopThr"):
    """A stopping threshold: a real number >= 0 (``inf`` allowed: stop at the
    first check), returned as a float.  NaN never compares, so a NaN
    threshold would silently run every iteration; a negative one too.

    Raises
    ------
    TypeError
        Not a real number.
    ValueError
        NaN or negative.
    """
    if type(stopThr) is float and stopThr >= 0.0:  # the common case (NaN fails here)
        return stopThr
    val = check_real_scalar(stopThr, name)
    if not val >= 0.0:
        raise ValueError(f"{name} must be a number >= 0 (inf allowed); got {stopThr!r}")
    return val


#: The largest iteration count accepted (:func:`check_iter_count`): counts are
#: passed to compiled kernels as int64, where iteration indices plus a block
#: offset must not overflow; 2**62 iterations would take centuries anyway.
MAX_ITER_COUNT = 2 ** 62


def check_iter_count(n, name="numItermax"):
    """Validate an iteration count: an integer in [0, 2**62] (Python int or
    NumPy integer; ``bool`` is refused), returned as a Python int.

    Raises
    ------
    TypeError
        Not an integer, or a bool.
    ValueError
        Negative, or larger than :data:`MAX_ITER_COUNT` (a kernel's int64
        would overflow).
    """
    if type(n) is int and 0 <= n <= MAX_ITER_COUNT:  # the common case
        return n
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise ValueError(f"{name} must be >= 0; got {n}")
    if n > MAX_ITER_COUNT:
        raise ValueError(f"{name} must be <= 2**62 (an int64 iteration count); got {n}")
    return n


def check_method(method, allowed):
    """Return ``method.lower()``; as POT, an unknown name raises
    ``ValueError("Unknown method '<method>'.")``."""
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, one of {allowed}; got {method!r}")
    if method.lower() not in allowed:
        raise ValueError("Unknown method '%s'." % method)
    return method.lower()


_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_AS_F32 = (np.dtype(np.float16), _F32)


def float_dtype_of(*dtypes):
    """The compute/result dtype of inputs of these dtypes: float32 when every
    dtype is float32 or float16, else float64 (and float64 for none).

    Integers of any width give float64, as POT (whose arithmetic promotes
    integer arrays to float64); float16 gives float32, the nearest dtype the
    kernels have (POT would return float16)."""
    if dtypes and all(np.dtype(d) in _AS_F32 for d in dtypes):
        return _F32
    return _F64


def result_dtype(*arrays):
    """float32 when every non-empty input is float32 or float16, else
    float64 (integers give float64): empty inputs do not vote (POT's empty
    a, b mean uniform weights).  Where an empty array's dtype must count (an
    empty batch), use :func:`float_dtype_of` on the dtypes."""
    return float_dtype_of(*(x.dtype for x in arrays if x.size > 0))


@dataclass
class Problem:
    """A validated balanced OT problem.

    Attributes
    ----------
    M : ndarray (dim_a, dim_b), C-contiguous, dtype ``dtype`` (read only).
    a : ndarray (n_a, dim_a) float64, n_a = 1 (shared) or n_hists (paired).
    b : ndarray (max(n_hists, 1), dim_b) float64.
    dtype : float32 or float64, the dtype of the results.
    n_hists : 0 for a single problem (1-D b), else the number of problems.
    paired : True when ``a`` is 2-D (one source histogram per problem).
    device : "cpu", or "cuda" when ``M`` is a numba device array (the
        histograms ``a``, ``b`` are still validated host arrays: O(dim)).
    like : the caller's ``M`` (CUDA results are returned as its array kind).
    absmax : max |M_ij| as a float, found by the finiteness scan of
        :func:`prepare_problem` (for a device ``M`` by the device reduction
        ``numbaot.cuda._reduce.finite_absmax``); read by
        :func:`check_cost_scale`.
    mass_tol : relative tolerance of :func:`check_equal_mass` for the dtypes
        of the caller's ``a`` and ``b`` (:func:`mass_tolerance`).
    """

    M: np.ndarray
    a: np.ndarray
    b: np.ndarray
    dtype: np.dtype
    n_hists: int
    paired: bool
    device: str = "cpu"
    like: object = None
    absmax: float = None
    mass_tol: float = 1.5e-6

    @property
    def shape(self):
        return self.M.shape

    @property
    def n_problems(self):
        return max(self.n_hists, 1)


def check_length(length, name, dim, dim_name, owner="M"):
    """ValueError when weights ``name`` of ``length`` entries along their
    first axis do not match ``owner``'s ``dim`` ``dim_name`` (rows,
    columns, points)."""
    if length != dim:
        raise ValueError(
            f"{name} has {length} entries along its first axis but {owner} has "
            f"{dim} {dim_name}; expected {name}.shape[0] == {dim}"
        )


def _check_weights(w, name, dim, dim_name, require_mass=True, owner="M"):
    if w.ndim == 0:
        raise ValueError(f"{name} must be 1-D (or 2-D for a batch); got a scalar")
    if w.ndim > 2:
        raise ValueError(f"{name} must be 1-D or 2-D; got shape {w.shape}")
    check_length(w.shape[0], name, dim, dim_name, owner)
    wf = w.astype(np.float64)
    sums = wf.sum(axis=0)
    if wf.ndim == 1 and wf.size:  # the common case: two reductions, no temporary
        total = float(sums)
        if wf.min() >= 0 and total < np.inf and (total > 0 or not require_mass):
            return wf  # NaN fails ``min() >= 0``; an inf total takes the exact path
    if not np.all(np.isfinite(wf)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(wf < 0):
        raise ValueError(f"{name} has negative entries; weights must be >= 0")
    if require_mass and np.any(sums <= 0):
        raise ValueError(f"{name} must have a positive total mass (in every histogram)")
    return wf


def check_histograms(w, name, dim, dim_name, allow_batch, method_name, owner="M"):
    """Weights as a C-contiguous float64 array (n, dim), and the number of
    histograms when ``w`` is 2-D (0 when 1-D).  Empty ``w`` means uniform.
    ``owner``: the argument whose ``dim`` ``dim_name`` the weights must
    match (named in the error)."""
    if w.size == 0 and w.ndim <= 1:
        return np.full((1, dim), 1.0 / dim), 0
    wf = _check_weights(w, name, dim, dim_name, owner=owner)
    if wf.ndim == 1:
        return wf.reshape(1, -1), 0
    if not allow_batch:
        raise ValueError(f"{name} must be 1-D for {method_name or 'this method'}; got shape {w.shape}")
    if wf.shape[1] == 0:
        raise ValueError(f"{name} has shape ({dim}, 0): no histogram to solve")
    return np.ascontiguousarray(wf.T), wf.shape[1]


def _check_pairing(a, b, a_cols, b_cols):
    """2-D ``a`` (paired batch) needs a 2-D ``b`` with as many histograms."""
    if a_cols:
        if not b_cols:
            raise ValueError(
                f"a is 2-D (dim_a, n_hists) = {a.shape}, so b must be 2-D "
                f"(dim_b, n_hists) too; got b of shape {b.shape}"
            )
        if a_cols != b_cols:
            raise ValueError(
                f"paired batch: a has {a_cols} histograms (columns) but b has "
                f"{b_cols}; expected a.shape[1] == b.shape[1]"
            )


def prepare_problem(a, b, M, allow_batch=True, method_name=None):
    """Validate and normalise (a, b, M) as POT does (empty a/b = uniform).

    Parameters
    ----------
    a, b, M : array-like
        Source weights (dim_a,) or (dim_a, n_hists), target weights (dim_b,)
        or (dim_b, n_hists), cost matrix (dim_a, dim_b).
    allow_batch : bool
        Whether 2-D ``b`` (and paired 2-D ``a``) are accepted.
    method_name : str, optional
        Used in the error message when a batch is refused.

    Returns a ``Problem`` on the device of the inputs: a CUDA ``M`` (and
    device or empty weights) gives ``device="cuda"`` (see
    ``_prepare_device_problem``).

    Raises
    ------
    TypeError
        Non-numeric or complex arrays; host and device arrays mixed; a device
        ``M`` that is not float32/float64.
    ValueError
        M not 2-D or not finite; weights of the wrong shape, negative, not
        finite or of zero mass; 2-D ``a`` without a matching 2-D ``b``.
    CudaUnavailableError
        Device arrays without numba-cuda or a usable GPU.
    """
    if type(M) is np.ndarray and type(a) is np.ndarray and type(b) is np.ndarray:
        P = _plain_problem(a, b, M)
        if P is not None:
            return P
    if _dispatch.device_of(a=a, b=b, M=M) == "cuda":
        return _prepare_device_problem(a, b, M, allow_batch, method_name)
    M = as_real_array(M, "M")
    if M.ndim != 2:
        raise ValueError(f"M must be a 2-D array of shape (dim_a, dim_b); got shape {M.shape}")
    if M.shape[0] == 0 or M.shape[1] == 0:
        raise ValueError(f"M must have at least one row and one column; got shape {M.shape}")
    a = as_real_array(a if a is not None else [], "a")
    b = as_real_array(b if b is not None else [], "b")
    dtype = result_dtype(a, b, M)
    absmax = finite_absmax(M, "M", "costs must be finite")
    dim_a, dim_b = M.shape

    b2, b_cols = check_histograms(b, "b", dim_b, "columns", allow_batch, method_name)
    a2, a_cols = check_histograms(a, "a", dim_a, "rows", allow_batch, method_name)
    n_hists = b_cols
    _check_pairing(a, b, a_cols, b_cols)

    return Problem(M=kernel_array(M, dtype), a=a2, b=b2, dtype=dtype, n_hists=n_hists,
                   paired=bool(a_cols), absmax=absmax, mass_tol=mass_tolerance(a.dtype, b.dtype))


_PLAIN_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _plain_problem(a, b, M):
    """:func:`prepare_problem` of the common case in a few reductions: a,
    b, M NumPy arrays of one float dtype (float64 or float32), 1-D weights
    of M's lengths, M finite, weights finite and >= 0 with a positive finite
    mass.  None for anything else: the full checks then take the input (and
    raise where it is bad).  At 16^2 the full checks cost 10.6 µs, these 6."""
    dt = M.dtype
    if (dt not in _PLAIN_DTYPES or a.dtype != dt or b.dtype != dt or M.ndim != 2
            or a.ndim != 1 or b.ndim != 1 or a.shape[0] != M.shape[0]
            or b.shape[0] != M.shape[1] or M.size == 0):
        return None
    lo, hi = np.minimum.reduce(M, axis=None), np.maximum.reduce(M, axis=None)
    a2, b2 = a.astype(np.float64), b.astype(np.float64)
    sa, sb = np.add.reduce(a2), np.add.reduce(b2)
    # NaN fails every comparison
    if not (-np.inf < lo and hi < np.inf and 0 < sa < np.inf and 0 < sb < np.inf
            and np.minimum.reduce(a2) >= 0 and np.minimum.reduce(b2) >= 0):
        return None
    return Problem(M=kernel_array(M, dt), a=a2.reshape(1, -1), b=b2.reshape(1, -1), dtype=dt,
                   n_hists=0, paired=False, absmax=max(float(hi), -float(lo)),
                   mass_tol=mass_tolerance(dt, dt))


def finite_absmax(x, name, what="entries must be finite"):
    """max |x| as a float, ValueError if ``x`` (a non-empty host array) has
    a NaN or inf.  One min and one max reduction (NaN propagates through
    both), no temporary array: the cost of the finiteness test alone."""
    lo, hi = x.min(), x.max()
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{name} contains NaN or inf; {what}")
    return max(float(hi), -float(lo))


def kernel_array(x, dtype):
    """``x`` as a C-contiguous, writeable array of ``dtype`` for the kernels:
    ``x`` itself when it already is one, else a copy (never a writeable
    alias of the caller's memory).

    A read-only array (``x.flags.writeable`` False: ``np.load(mmap_mode='r')``,
    ``np.broadcast_to``, a frozen array) is copied because Numba types it
    apart from a writeable one and would compile every kernel again for it
    (7-12 s per public function on this machine kind, cached on disk per
    signature); the copy is one pass over ``x``, less than one iteration of a
    solver that reads ``x`` at least ten times."""
    out = np.ascontiguousarray(x, dtype=dtype)
    if not out.flags.writeable:
        out = out.copy()
    return out


#: Largest max|M| / reg accepted (:func:`check_cost_scale`): 2**52, the
#: reciprocal of float64's relative precision.  Beyond it the exponents
#: -M/reg + f + g of the plan are sums of terms whose rounding error exceeds
#: 1, so no digit of the plan is meaningful, and from about 1e19 the
#: log-domain kernels overflow to inf/NaN (they did so silently before).
COST_SCALE_MAX = 2.0 ** 52


def check_cost_scale(M, reg, name="M", absmax=None):
    """ValueError (naming ``name`` and ``reg``) when max |M| / reg exceeds
    :data:`COST_SCALE_MAX` (2**52, about 4.5e15) or overflows.

    ``M`` is a host array (or a :class:`Problem`, on either device, whose
    ``absmax`` from the finiteness scan is reused: no pass over the matrix);
    ``absmax`` may be given directly (e.g. max |x - y|^2 bounded from point
    clouds, or max |M| of a device ``M`` from
    ``_dispatch.device_finite_absmax``).  A ``Problem`` without ``absmax``
    (None) is not checked.  Returns ``max|M| / reg``.

    Raises
    ------
    ValueError
        max |M| / reg > 2**52 (or not finite): the entropic problem is not
        representable in floating point (exp(-M/reg) underflows everywhere
        but at the minimum; log-domain potentials lose every digit).
    """
    if isinstance(M, Problem):
        absmax = M.absmax
        if absmax is None:
            return None
    elif absmax is None:
        absmax = finite_absmax(M, name) if np.size(M) else 0.0
    scale = absmax / reg
    if not scale <= COST_SCALE_MAX:
        raise ValueError(
            f"{name} / reg is too large: max|{name}| / reg = {scale:.3g} "
            f"(max|{name}| = {absmax:.3g}, reg = {reg:.3g}) exceeds 2**52 = 4.5e15; the "
            f"entropic plan exp(-{name}/reg + f + g) cannot be computed in floating point "
            f"(rescale {name}, e.g. {name} / max|{name}|, or increase reg)"
        )
    return scale


def mass_tolerance(*dtypes):
    """Relative tolerance of :func:`check_equal_mass` for weights of these
    dtypes: POT's ``ot.emd`` test (``decimal=6``: 1.5e-6 on masses near 1),
    made relative, widened to 32 ulps of the coarsest floating input
    (float32: 3.8e-6, float16: 0.031), whose normalised histograms can be
    that far from their nominal mass."""
    tol = 1.5e-6
    for dt in dtypes:
        tol = max(tol, _MASS_TOL.get(dt, 1.5e-6))
    return tol


_MASS_TOL = {np.dtype(t): max(1.5e-6, 32 * float(np.finfo(t).eps))
             for t in (np.float16, np.float32, np.float64, np.longdouble)}


def check_equal_mass(a_mass, b_mass, tol, names=("a", "b"),
                     remedy="use numbaot.unbalanced"):
    """ValueError when the masses of the balanced problems differ: for each
    problem k, |a_mass[k] - b_mass[k]| > tol * max(a_mass[k], b_mass[k])
    (``a_mass`` may have one entry shared by every problem).

    A balanced plan (gamma 1 = a, gamma^T 1 = b) exists only if
    sum a = sum b; POT runs anyway and returns a plan that meets neither
    marginal (with a "did not converge" warning from ``sinkhorn``, none from
    ``sinkhorn2``).  ``remedy`` ends the message (what else the caller can
    do).
    """
    a_mass = np.asarray(a_mass, dtype=np.float64)
    b_mass = np.asarray(b_mass, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        big = np.maximum(a_mass, b_mass)
        bad = ~((np.abs(a_mass - b_mass) <= tol * big) & (big < np.inf))  # inf mass: bad
    if np.any(bad):
        k = int(np.flatnonzero(np.broadcast_to(bad, np.broadcast(a_mass, b_mass).shape))[0])
        sa = float(np.broadcast_to(a_mass, bad.shape)[k])
        sb = float(np.broadcast_to(b_mass, bad.shape)[k])
        where = f" (histogram {k})" if bad.size > 1 else ""
        na, nb = names
        with np.errstate(invalid="ignore"):
            rel = abs(sa - sb) / max(sa, sb)
        raise ValueError(
            f"{na} and {nb} must have the same (finite) total mass for balanced OT{where}: "
            f"sum {na} = {sa!r}, sum {nb} = {sb!r} (relative difference {rel:.2g}, tolerance "
            f"{tol:.2g}); normalise both (e.g. {na} / {na}.sum()) or {remedy}"
        )


def check_balanced(P, reg):
    """The checks of a balanced entropic problem ``P`` (a :class:`Problem`)
    with regularisation ``reg``, after :func:`prepare_problem` and
    :func:`check_common`: :func:`check_equal_mass` per problem (column of
    2-D weights; tolerance ``P.mass_tol``) and :func:`check_cost_scale` on
    ``P.absmax`` (no pass over ``M``).  O(n_problems * dim).

    Raises
    ------
    ValueError
        sum a != sum b (beyond the tolerance), naming a and b; max|M| / reg
        too large, naming M and reg.
    """
    a_mass, b_mass = P.a.sum(axis=1), P.b.sum(axis=1)
    if a_mass.size == 1 and b_mass.size == 1:  # one problem: Python floats
        sa, sb = float(a_mass[0]), float(b_mass[0])
        if not (abs(sa - sb) <= P.mass_tol * max(sa, sb) < np.inf):
            check_equal_mass(a_mass, b_mass, P.mass_tol)
    else:
        check_equal_mass(a_mass, b_mass, P.mass_tol)
    check_cost_scale(P, reg)


# --------------------------------------------------------------------------
# Sinkhorn operator on batches of square matrices (numbaot.implicit)
# --------------------------------------------------------------------------
def as_square_batch(x, name, on_device=False):
    """Return ``x`` (shape (..., n, n), n >= 1) as an array of a real dtype.

    Host inputs go through :func:`as_real_array` (integers are accepted and
    computed in float64); device inputs must already be float32/float64 (only
    ``.shape``/``.dtype`` are read, nothing is copied).

    Raises
    ------
    TypeError
        Non-numeric, complex or boolean dtype (device: not float32/float64).
    ValueError
        Fewer than 2 dimensions, last two dimensions unequal, or n == 0.
    """
    if on_device:
        dt = np.dtype(x.dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"{name} must be float32 or float64 on the GPU; got dtype {dt}")
        arr = x
    else:
        arr = as_real_array(x, name)
    shape = tuple(arr.shape)
    if len(shape) < 2:
        raise ValueError(
            f"{name} must have shape (..., n, n) (at least 2 dimensions); got shape {shape}"
        )
    if shape[-1] != shape[-2]:
        raise ValueError(
            f"{name} must be a (batch of) square matrices, shape (..., n, n); got shape {shape}"
        )
    if shape[-1] == 0:
        raise ValueError(f"{name} must have n >= 1 (shape (..., n, n)); got shape {shape}")
    return arr


_HOST_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def is_float_square_pair(x, y):
    """True when ``x`` and ``y`` are C-contiguous NumPy arrays of one dtype,
    float32 or float64, and one non-empty shape (..., n, n) with n >= 1:
    inputs that :func:`as_square_batch`, :func:`check_same_shape` and
    :func:`result_dtype` would pass through unchanged.  A few attribute
    reads, so that a call on such inputs can skip those checks (they cost
    more than a small batch's arithmetic, mostly as cold code after a
    garbage collection).  Never raises; False means "take the general path"."""
    if type(x) is not np.ndarray or type(y) is not np.ndarray:
        return False
    shape = x.shape
    return (x.dtype == y.dtype and x.dtype in _HOST_FLOATS and shape == y.shape
            and len(shape) >= 2 and shape[-1] == shape[-2] and x.size > 0
            and x.flags.c_contiguous and y.flags.c_contiguous)


def check_same_shape(x, y, name_x, name_y):
    """ValueError unless ``x.shape == y.shape`` (naming both arguments)."""
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(
            f"{name_y} must have the shape of {name_x}; got {name_y}.shape = "
            f"{tuple(y.shape)} and {name_x}.shape = {tuple(x.shape)}"
        )


def check_positive_int(n, name):
    """Validate an integer >= 1 (TypeError if not an integer)."""
    if (isinstance(n, (numbers.Integral, np.integer)) and not isinstance(n, (bool, np.bool_))
            and int(n) < 1):
        raise ValueError(f"{name} must be >= 1; got {int(n)}")
    return check_iter_count(n, name)


def check_optional_tol(tol, name="tol"):
    """``None`` (never stop early) or a finite number >= 0; returned as a float
    (``-1.0`` for ``None``, the kernels' "no tolerance" value)."""
    if tol is None:
        return -1.0
    val = check_real_scalar(tol, name)
    if not np.isfinite(val) or val < 0:
        raise ValueError(f"{name} must be None or a finite number >= 0; got {tol!r}")
    return val


def check_value_counts(n_nonfinite, n_negative, name):
    """Raise for the counts of bad entries of ``name`` found by a counting
    kernel (``count_invalid`` of numbaot.cpu/cuda.implicit, one read pass, no
    temporary the size of the array): ValueError if any entry is NaN/inf, or
    negative where counted (``n_negative`` may be 0 when not checked)."""
    if n_nonfinite:
        raise ValueError(
            f"{name} contains NaN or inf ({int(n_nonfinite)} entries); all entries must be finite"
        )
    if n_negative:
        raise ValueError(
            f"{name} has {int(n_negative)} negative entries; a Sinkhorn operator output is >= 0"
        )


def _host_weights(w, name):
    """Histograms are O(dim): device ones are copied to the host and
    validated there, by the same code as host ones."""
    if w is None:
        return as_real_array([], name)
    return as_real_array(_dispatch.to_host(w), name)


def _prepare_device_problem(a, b, M, allow_batch, method_name):
    """``prepare_problem`` for a cost matrix on the GPU.

    Same checks and messages as on the host.  ``M`` stays on the device: its
    finiteness and max |M| (``Problem.absmax``, for :func:`check_cost_scale`)
    come from one device reduction (``numbaot.cuda._reduce.finite_absmax``,
    a few numbers read back) and it is copied only when it is not
    C-contiguous or not of the result dtype.  Histograms are validated on
    the host (O(dim) copies).
    """
    Md = _dispatch.as_device_array(M)
    if np.dtype(Md.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"M on the GPU must be float32 or float64; got dtype {Md.dtype}")
    if Md.ndim != 2:
        raise ValueError(f"M must be a 2-D array of shape (dim_a, dim_b); got shape {tuple(Md.shape)}")
    if Md.shape[0] == 0 or Md.shape[1] == 0:
        raise ValueError(f"M must have at least one row and one column; got shape {tuple(Md.shape)}")
    a = _host_weights(a, "a")
    b = _host_weights(b, "b")
    dtype = result_dtype(a, b, np.empty(1, dtype=Md.dtype))
    absmax = _dispatch.device_finite_absmax(Md)
    if not absmax < np.inf:
        raise ValueError("M contains NaN or inf; costs must be finite")
    dim_a, dim_b = Md.shape
    b2, b_cols = check_histograms(b, "b", dim_b, "columns", allow_batch, method_name)
    a2, a_cols = check_histograms(a, "a", dim_a, "rows", allow_batch, method_name)
    _check_pairing(a, b, a_cols, b_cols)
    Mc = _dispatch.device_contiguous(Md, dtype)
    return Problem(M=Mc, a=a2, b=b2, dtype=dtype, n_hists=b_cols, paired=bool(a_cols),
                   device="cuda", like=M, absmax=absmax,
                   mass_tol=mass_tolerance(a.dtype, b.dtype))


# --------------------------------------------------------------------------
# Discounted cumulative sums, GAE (numbaot.scan)
# --------------------------------------------------------------------------
_SCAN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def as_scan_array(x, name, on_device=False):
    """``x`` of shape (N,) or (batch, N) as an array of a real dtype.

    Host inputs go through :func:`as_real_array` (integers are accepted and
    computed in float64); device inputs must be float32/float64 (only
    ``.shape``/``.dtype`` are read here).

    Raises
    ------
    TypeError
        Non-numeric, complex or boolean dtype (device: not float32/float64).
    ValueError
        ``x`` is not 1-D or 2-D.
    """
    if type(x) is np.ndarray and x.dtype in _SCAN_DTYPES and x.ndim in (1, 2) and not on_device:
        return x  # the common case, without as_real_array's dtype probes
    if on_device:
        arr = _dispatch.as_device_array(x)
        if np.dtype(arr.dtype) not in _SCAN_DTYPES:
            raise TypeError(f"{name} must be float32 or float64 on the GPU; got dtype {arr.dtype}")
    else:
        arr = as_real_array(x, name)
    if arr.ndim not in (1, 2):
        raise ValueError(
            f"{name} must have shape (N,) or (batch, N) (time along the last axis); "
            f"got shape {tuple(arr.shape)}"
        )
    return arr


def check_discount(gamma, batch, name="gamma", on_device=False):
    """A discount factor: a real scalar, or one value per row (shape (batch,)),
    every value finite and in [0, 1] (1 included: the plain cumulative sum).

    Returns ``(values, per_row)``: ``values`` a float64 NumPy array (batch,)
    (a scalar broadcast to every row), ``per_row`` False for a scalar (also a
    0-d array).  A device array (per-row discounts of a GPU call) is copied to
    the host: it is O(batch).

    Raises
    ------
    TypeError
        Not a real number / array of real numbers.
    ValueError
        Wrong shape, NaN/inf, or a value outside [0, 1].
    """
    if type(gamma) is float or type(gamma) is np.float64 or type(gamma) is np.float32:
        if 0.0 <= gamma <= 1.0:  # the common case (NaN fails here too)
            return np.full(batch, float(gamma)), False
    if _dispatch.is_device_array(gamma):
        gamma = _dispatch.as_device_array(gamma).copy_to_host()
    if isinstance(gamma, np.ndarray) and gamma.ndim == 0:
        gamma = gamma[()]
    if isinstance(gamma, (numbers.Real, np.generic)) and not isinstance(gamma, (bool, np.bool_)):
        g = np.full(batch, check_real_scalar(gamma, name))
        per_row = False
    else:
        if isinstance(gamma, (bool, np.bool_)):
            raise TypeError(f"{name} must be a real number or an array of shape ({batch},); got a bool")
        g = as_real_array(gamma, name)
        if g.shape != (batch,):
            raise ValueError(
                f"{name} must be a scalar or have one value per row, shape ({batch},); "
                f"got shape {g.shape}"
            )
        g = g.astype(np.float64)
        per_row = True
    if not np.all(np.isfinite(g)):
        raise ValueError(f"{name} contains NaN or inf; expected values in [0, 1]")
    if np.any(g < 0) or np.any(g > 1):
        bad = g[(g < 0) | (g > 1)][0]
        raise ValueError(f"{name} must lie in [0, 1] (1 allowed); got {bad!r}")
    return np.ascontiguousarray(g), per_row


def check_dones(dones, shape, name="dones", on_device=False):
    """An episode-boundary mask of ``shape``: ``None`` (no boundary) or an
    array whose nonzero entries mark the last step of an episode.

    Host: bool arrays are used as they are (viewed as uint8, no copy); other
    real dtypes must hold only 0 and 1 (they are converted to uint8).
    Device: bool or uint8 arrays are viewed as uint8; nonzero means done (the
    values of a uint8 mask are not checked, that would need a pass).

    Returns ``None`` or a uint8 array of ``shape``.

    Raises
    ------
    TypeError
        Wrong dtype (complex / not numeric; on the GPU: not bool or uint8).
    ValueError
        Shape different from ``shape``; host values other than 0 and 1.
    """
    if dones is None:
        return None
    if on_device:
        if not _dispatch.is_device_array(dones):
            raise TypeError(f"{name} must be on the GPU like the other arrays")
        d = _dispatch.as_device_array(dones)
        if np.dtype(d.dtype) not in (np.dtype(np.bool_), np.dtype(np.uint8)):
            raise TypeError(f"{name} on the GPU must be a bool or uint8 array; got dtype {d.dtype}")
    else:
        d = np.asarray(dones) if not _dispatch.is_device_array(dones) else dones
        if _dispatch.is_device_array(d):
            raise TypeError(f"{name} is a GPU array where a host (NumPy) array is expected")
        if d.dtype != np.bool_:
            d = as_real_array(d, name)
    if tuple(d.shape) != tuple(shape):
        raise ValueError(f"{name} must have the shape of the data, {tuple(shape)}; got {tuple(d.shape)}")
    if on_device:
        return d.view(np.uint8) if np.dtype(d.dtype) == np.bool_ else d
    if d.dtype == np.bool_:
        return d.view(np.uint8)
    if not np.all((d == 0) | (d == 1)):
        raise ValueError(f"{name} must hold only 0/1 (or True/False) values")
    return d.astype(np.uint8)


# --------------------------------------------------------------------------
# Unbalanced OT (numbaot.unbalanced)
# --------------------------------------------------------------------------
def check_reg_m(reg_m, name="reg_m"):
    """POT's ``get_parameter_pair``: a scalar, or an indexable of length 1 or 2,
    gives (reg_m1, reg_m2); each value a real number >= 0 (``inf`` allowed: a
    hard marginal constraint on that side).  Returned as Python floats.

    Raises
    ------
    TypeError
        Not a real number nor an indexable of real numbers.
    ValueError
        Length other than 1 or 2; a value < 0 or NaN.
    """
    if isinstance(reg_m, np.ndarray) and reg_m.ndim == 0:
        reg_m = reg_m[()]
    if isinstance(reg_m, (numbers.Real, np.generic)) and not isinstance(reg_m, (bool, np.bool_)):
        pair = (reg_m, reg_m)
    else:
        if isinstance(reg_m, (bool, np.bool_, str)):
            raise TypeError(f"{name} must be a real number or a pair of them; got {reg_m!r}")
        try:
            n = len(reg_m)
        except TypeError:
            raise TypeError(
                f"{name} must be a real number or an indexable of length 1 or 2; "
                f"got {type(reg_m).__name__}"
            ) from None
        if n == 1:
            pair = (reg_m[0], reg_m[0])
        elif n == 2:
            pair = (reg_m[0], reg_m[1])
        else:
            raise ValueError(
                f"{name} must be a scalar or an indexable object of length 1 or 2; got length {n}"
            )
    out = []
    for k, x in enumerate(pair):
        val = check_real_scalar(x, f"{name}[{k}]")
        if np.isnan(val) or val < 0:
            raise ValueError(f"{name} values must be >= 0 (inf allowed); got {x!r}")
        out.append(val)
    return out[0], out[1]


def check_reg_type(reg_type):
    """'kl' or 'entropy' (any case), returned lower-cased."""
    if not isinstance(reg_type, str) or reg_type.lower() not in ("kl", "entropy"):
        raise ValueError(f"reg_type must be 'kl' or 'entropy'; got {reg_type!r}")
    return reg_type.lower()


def check_reference_measure(c, shape):
    """An explicit reference measure ``c`` of ``shape`` (dim_a, dim_b): finite
    and >= 0; returned as a float64 C-contiguous array (a copy if needed).

    Raises
    ------
    TypeError
        Non-numeric or complex ``c``.
    ValueError
        Wrong shape, NaN/inf or negative entries.
    """
    c = as_real_array(c, "c")
    if c.shape != tuple(shape):
        raise ValueError(f"c must have the shape of M, {tuple(shape)}; got {c.shape}")
    cf = np.ascontiguousarray(c, dtype=np.float64)
    if not np.all(np.isfinite(cf)):
        raise ValueError("c contains NaN or inf")
    if np.any(cf < 0):
        raise ValueError("c has negative entries; a reference measure is >= 0")
    return cf


def check_warmstart(warmstart, shape, n_hists=0, weights=None, name="warmstart",
                    per_hist_pairs=False):
    """The one warm-start rule of every solver that takes ``warmstart``.

    A warm start is a pair (tuple or list) of two real arrays: initial
    log-scalings (log u, log v), or dual potentials (alpha, beta) for the
    stabilized solvers, of shapes (dim_a,), (dim_b,) (shared by all
    problems) or, when ``n_hists`` > 0, (dim_a, n_hists), (dim_b, n_hists).
    Values must be finite, except -inf where the weight is zero (what a
    solver's ``log`` holds there: u_i = 0 because a_i = 0), so that a log
    can be fed back.  With ``per_hist_pairs`` (the log-domain solvers) and
    ``n_hists`` > 0, POT's list of n_hists per-histogram pairs of 1-D
    arrays is accepted too.

    Parameters
    ----------
    warmstart : pair of array-like
    shape : (dim_a, dim_b)
    n_hists : int
        Number of problems (0: one problem).
    weights : pair of float64 arrays (n, dim_a), (n, dim_b), optional
        The problem's weights (``Problem.a``, ``Problem.b``; n = 1 or
        n_problems), where a zero allows -inf.  None: -inf is refused.
    name : str
        The argument's name in the messages.
    per_hist_pairs : bool
        Accept POT's per-histogram list for n_hists > 0.

    Returns
    -------
    w_a, w_b : float64 C-contiguous new arrays, shapes (max(n_hists, 1), dim_a)
        and (max(n_hists, 1), dim_b).

    Raises
    ------
    TypeError
        Not a tuple/list; non-numeric, boolean or complex arrays.
    ValueError
        Not exactly 2 items; wrong shapes; NaN, +inf, or -inf where the
        weight is positive (log u_i = -inf there makes every later iterate
        NaN in the log domain).
    """
    dims = (shape[0], shape[1])
    n_problems = max(n_hists, 1)
    if (per_hist_pairs and n_hists and isinstance(warmstart, (tuple, list))
            and len(warmstart) == n_hists and all(
                isinstance(w, (tuple, list)) and len(w) == 2 and np.ndim(w[0]) == 1
                and np.ndim(w[1]) == 1 for w in warmstart)):
        warmstart = tuple(np.stack([as_real_array(w[k], f"{name}[{i}][{k}]").astype(np.float64)
                                    for i, w in enumerate(warmstart)], axis=1) for k in (0, 1))
    hint = f", or a list of {n_hists} such pairs" if per_hist_pairs and n_hists else ""
    warmstart = warmstart_items(warmstart, name, hint)
    out = []
    for k in (0, 1):
        item = f"{name}[{k}]"
        w = as_real_array(warmstart[k], item)
        dim = dims[k]
        if n_hists and w.shape == (dim, n_hists):
            w = np.ascontiguousarray(w.T, dtype=np.float64)
        elif w.shape == (dim,):
            w = np.array(np.broadcast_to(np.asarray(w, dtype=np.float64), (n_problems, dim)))
        else:
            expect = f"({dim},)" + (f" or ({dim}, {n_hists})" if n_hists else "")
            raise ValueError(f"{item} must have shape {expect}; got {w.shape}")
        if not np.all(np.isfinite(w)):
            bad = np.isnan(w) | (w == np.inf)
            if weights is None:
                bad |= np.isneginf(w)
            else:
                bad = bad | (np.isneginf(w) & (weights[k] > 0))
            if np.any(bad):
                raise ValueError(
                    f"{item} must be finite (-inf only where the weight is 0); got NaN, "
                    f"+inf or -inf at a positive weight"
                )
        out.append(w)
    return out[0], out[1]


def warmstart_items(warmstart, name="warmstart", hint=""):
    """The two items of a warm start: ``warmstart`` must be a tuple or list
    of length 2 (the structural part of :func:`check_warmstart`, for callers
    that pass the items on, e.g. ``empirical_sinkhorn_divergence``).

    Raises
    ------
    TypeError
        Not a tuple or list.
    ValueError
        Not exactly 2 items.
    """
    if not isinstance(warmstart, (tuple, list)):
        raise TypeError(f"{name} must be a pair (tuple or list) of 2 arrays{hint}; got "
                        f"{type(warmstart).__name__}")
    if len(warmstart) != 2:
        raise ValueError(f"{name} must be a pair of 2 arrays (e.g. (log u, log v)){hint}; "
                         f"got {len(warmstart)} items")
    return warmstart[0], warmstart[1]


def check_unbalanced_warmstart(warmstart, shape, n_hists, weights=None):
    """:func:`check_warmstart` (the one rule) under the name the unbalanced
    and distributed solvers use."""
    return check_warmstart(warmstart, shape, n_hists, weights)


# --------------------------------------------------------------------------
# Distributed solvers (numbaot.distributed): one rank's block of rows
# --------------------------------------------------------------------------
def check_local_weights(a_local, n_local, name="a_local"):
    """One rank's slice of the source weights: ``None`` (empty or None: uniform
    over all ranks, filled in by the caller) or float64 (n_local,), finite and
    >= 0.  A slice may have zero mass (the total is checked across ranks).

    Raises
    ------
    TypeError
        Non-numeric, boolean or complex weights.
    ValueError
        Not 1-D, wrong length, negative or not finite.
    """
    a = as_real_array(a_local if a_local is not None else [], name)
    if a.size == 0 and a.ndim <= 1:
        return None
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n_local,); got shape {a.shape}")
    return _check_weights(a, name, n_local, "rows on this rank", require_mass=False)


def check_target_weights(b, dim_b):
    """The full target weights of a distributed problem: float64 (dim_b,),
    uniform when empty or None.

    Raises
    ------
    TypeError
        Non-numeric weights.
    ValueError
        Not 1-D, wrong length, negative, not finite or of zero mass.
    """
    b = as_real_array(b if b is not None else [], "b")
    if b.size == 0 and b.ndim <= 1:
        return np.full(dim_b, 1.0 / dim_b)
    if b.ndim != 1:
        raise ValueError(f"b must be 1-D (dim_b,) for the distributed solvers; got shape {b.shape}")
    return _check_weights(b, "b", dim_b, "columns")


def check_local_block(M_local, a_local, b):
    """Validate one rank's share of a distributed problem (local checks only).

    Parameters
    ----------
    M_local : array-like, shape (n_local, dim_b)
        This rank's rows of the cost matrix (finite, at least one row).
    a_local : array-like or None, shape (n_local,)
        See :func:`check_local_weights`.
    b : array-like or None, shape (dim_b,)
        See :func:`check_target_weights`.

    Returns ``(M, a, b, dtype, absmax, mass_tol)``: M C-contiguous and
    writeable in the result dtype (:func:`kernel_array`), ``a`` float64
    (n_local,) or None (uniform), ``b`` float64 (dim_b,), max |M_local| (from
    the finiteness scan, for :func:`check_cost_scale` over all ranks) and the
    tolerance of :func:`check_equal_mass` for the dtypes of the weights.

    Raises
    ------
    TypeError
        Non-numeric, boolean or complex arrays.
    ValueError
        ``M_local`` not 2-D, without rows or columns, or not finite; bad weights.
    """
    M = as_real_array(M_local, "M_local")
    if M.ndim != 2 or M.shape[0] == 0 or M.shape[1] == 0:
        raise ValueError(f"M_local must be a 2-D array (n_local, dim_b) with at least one row "
                         f"and one column; got shape {M.shape}")
    absmax = finite_absmax(M, "M_local", "costs must be finite")
    a_arr = as_real_array(a_local if a_local is not None else [], "a_local")
    b_arr = as_real_array(b if b is not None else [], "b")
    dtype = result_dtype(a_arr, b_arr, M)
    a = check_local_weights(a_arr, M.shape[0])
    bf = check_target_weights(b_arr, M.shape[1])
    return (kernel_array(M, dtype), a, bf, dtype, absmax,
            mass_tolerance(a_arr.dtype, b_arr.dtype))


# --------------------------------------------------------------------------
# Barycenters (numbaot.bregman, numbaot.unbalanced)
# --------------------------------------------------------------------------
def check_barycenter_weights(weights, n_hists, name="weights"):
    """Barycentric weights as float64 (n_hists,): uniform 1/n_hists for
    ``None``; else finite, >= 0 and summing to 1 (within
    :func:`mass_tolerance` of their dtype).  POT does not normalise them:
    weights summing to s != 1 give a barycenter of the wrong mass (s = 0: a
    vector of ones; s = 3: inf/NaN), so they are refused, not rescaled.

    Raises
    ------
    TypeError
        Non-numeric weights.
    ValueError
        Wrong shape, NaN/inf, negative entries, or a sum other than 1.
    """
    if weights is None:
        return np.full(n_hists, 1.0 / n_hists)
    w_in = as_real_array(weights, name)
    w = w_in.astype(np.float64)
    if w.shape != (n_hists,):
        raise ValueError(f"{name} must have shape ({n_hists},) (one per histogram); got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    total = float(w.sum())
    tol = mass_tolerance(w_in.dtype)
    if not abs(total - 1.0) <= tol:
        raise ValueError(f"{name} must sum to 1 (barycentric weights); got sum {total!r}; "
                         f"normalise them, e.g. {name} / {name}.sum()")
    return w


def check_barycenter_masses(A, masses, equal, name="A", item="A[:, {}]"):
    """The masses (float64 (n_hists,)) of the histograms of ``A`` (the
    caller's array, for its dtype): ValueError on a histogram of zero mass
    (the scaling iterations divide by its K^T u = 0: NaN, or "Numerical
    errors"), and with ``equal`` (balanced barycenters) on masses that differ
    by more than :func:`mass_tolerance` relatively (no balanced barycenter
    exists: POT's iterations drift to NaN or stop unconverged).  ``item``
    formats the name of histogram k ("A[:, {}]" or "A[{}]")."""
    zero = np.flatnonzero(~(masses > 0))
    if zero.size:
        raise ValueError(f"{name} has a histogram of zero mass, {item.format(int(zero[0]))}; "
                         f"every histogram needs a positive mass")
    if equal:
        lo, hi = int(np.argmin(masses)), int(np.argmax(masses))
        tol = mass_tolerance(A.dtype)
        if masses[hi] - masses[lo] > tol * masses[hi]:
            hint = (f" ({name} holds integer counts: divide each histogram by its sum)"
                    if np.issubdtype(A.dtype, np.integer) else "")
            raise ValueError(
                f"the histograms of {name} must have the same total mass for a balanced "
                f"barycenter: sum {item.format(lo)} = {float(masses[lo])!r}, sum "
                f"{item.format(hi)} = {float(masses[hi])!r} (relative difference "
                f"{(masses[hi] - masses[lo]) / masses[hi]:.2g} > {tol:.2g}){hint}; normalise "
                f"each histogram, or use numbaot.unbalanced.barycenter_unbalanced")
