"""Input validation and normalisation: the one place for both devices.

Public functions call these helpers before dispatching to a kernel; kernels
never validate.  Every error names the offending argument and says what was
expected.  Nothing here modifies the caller's arrays: normalised arrays are
either the caller's array itself (only ever read afterwards) or new copies.
"""
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = [
    "as_real_array",
    "check_reg",
    "check_iter_count",
    "check_method",
    "check_real_scalar",
    "result_dtype",
    "Problem",
    "prepare_problem",
]


def as_real_array(x, name):
    """Return ``x`` as a NumPy array of a real numeric dtype.

    Raises
    ------
    TypeError
        If ``x`` is complex, boolean, or not numeric.
    """
    if hasattr(x, "__cuda_array_interface__") and not isinstance(x, np.ndarray):
        raise TypeError(
            f"{name} is a GPU array; the CPU solvers take NumPy arrays "
            "(GPU support lands with the CUDA kernels)"
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


def check_iter_count(n, name="numItermax"):
    """Validate an iteration count: an integer >= 0."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer; got {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise ValueError(f"{name} must be >= 0; got {n}")
    return n


def check_method(method, allowed):
    """Return ``method.lower()``; as POT, an unknown name raises
    ``ValueError("Unknown method '<method>'.")``."""
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, one of {allowed}; got {method!r}")
    if method.lower() not in allowed:
        raise ValueError("Unknown method '%s'." % method)
    return method.lower()


def result_dtype(*arrays):
    """float32 when every non-empty input is float32 (or narrower), else float64."""
    dts = [x.dtype for x in arrays if x.size > 0]
    dt = np.result_type(*dts, np.float32) if dts else np.dtype(np.float64)
    return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)


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
    """

    M: np.ndarray
    a: np.ndarray
    b: np.ndarray
    dtype: np.dtype
    n_hists: int
    paired: bool

    @property
    def shape(self):
        return self.M.shape

    @property
    def n_problems(self):
        return max(self.n_hists, 1)


def _check_weights(w, name, dim, dim_name):
    if w.ndim == 0:
        raise ValueError(f"{name} must be 1-D (or 2-D for a batch); got a scalar")
    if w.ndim > 2:
        raise ValueError(f"{name} must be 1-D or 2-D; got shape {w.shape}")
    if w.shape[0] != dim:
        raise ValueError(
            f"{name} has {w.shape[0]} entries along its first axis but M has "
            f"{dim} {dim_name}; expected {name}.shape[0] == {dim}"
        )
    wf = w.astype(np.float64)
    if not np.all(np.isfinite(wf)):
        raise ValueError(f"{name} contains NaN or inf")
    if np.any(wf < 0):
        raise ValueError(f"{name} has negative entries; weights must be >= 0")
    sums = wf.sum(axis=0)
    if np.any(sums <= 0):
        raise ValueError(f"{name} must have a positive total mass (in every histogram)")
    return wf


def _histograms(w, name, dim, dim_name, allow_batch, method_name):
    """Weights as a C-contiguous float64 array (n, dim), and the number of
    histograms when ``w`` is 2-D (0 when 1-D).  Empty ``w`` means uniform."""
    if w.size == 0 and w.ndim <= 1:
        return np.full((1, dim), 1.0 / dim), 0
    wf = _check_weights(w, name, dim, dim_name)
    if wf.ndim == 1:
        return wf.reshape(1, -1), 0
    if not allow_batch:
        raise ValueError(f"{name} must be 1-D for {method_name or 'this method'}; got shape {w.shape}")
    if wf.shape[1] == 0:
        raise ValueError(f"{name} has shape ({dim}, 0): no histogram to solve")
    return np.ascontiguousarray(wf.T), wf.shape[1]


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

    Raises
    ------
    TypeError
        Non-numeric or complex arrays.
    ValueError
        M not 2-D or not finite; weights of the wrong shape, negative, not
        finite or of zero mass; 2-D ``a`` without a matching 2-D ``b``.
    """
    M = as_real_array(M, "M")
    if M.ndim != 2:
        raise ValueError(f"M must be a 2-D array of shape (dim_a, dim_b); got shape {M.shape}")
    if M.shape[0] == 0 or M.shape[1] == 0:
        raise ValueError(f"M must have at least one row and one column; got shape {M.shape}")
    a = as_real_array(a if a is not None else [], "a")
    b = as_real_array(b if b is not None else [], "b")
    dtype = result_dtype(a, b, M)
    if not np.all(np.isfinite(M)):
        raise ValueError("M contains NaN or inf; costs must be finite")
    dim_a, dim_b = M.shape

    b2, b_cols = _histograms(b, "b", dim_b, "columns", allow_batch, method_name)
    a2, a_cols = _histograms(a, "a", dim_a, "rows", allow_batch, method_name)
    n_hists = b_cols
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

    Mc = np.ascontiguousarray(M, dtype=dtype)
    return Problem(M=Mc, a=a2, b=b2, dtype=dtype, n_hists=n_hists, paired=bool(a_cols))
