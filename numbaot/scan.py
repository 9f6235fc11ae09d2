r"""Discounted cumulative sums, their gradients, and generalized advantage estimation.

The calls and their names follow torch-discounted-cumsum (A. Obukhov, 2020),
for NumPy arrays (CPU) and CUDA device arrays (numba device arrays, CuPy),
without PyTorch:

* ``discounted_cumsum_right(x, gamma)``: y_t = sum_{k >= 0} gamma^k x_{t+k}
  (the discounted return of reinforcement learning, computed right to left);
* ``discounted_cumsum_left(x, gamma)``: y_t = sum_{k >= 0} gamma^k x_{t-k};
* ``discounted_cumsum_right_backward`` / ``discounted_cumsum_left_backward``:
  the gradients with respect to ``x`` and ``gamma``;
* ``gae``: generalized advantage estimation (Schulman et al. 2016).

Shapes and conventions shared by every call
-------------------------------------------
* Time runs along the last axis: ``x`` has shape (N,) or (batch, N) (one
  sequence per row).  float32 and float64 are both first class: the output
  dtype follows the input (integers give float64).  Sums are accumulated in
  float64 whatever the dtype, so float32 results carry one float32 rounding
  (for N = 10000 ones and gamma = 0.99 the L-inf error is about 4e-6, where a
  float32 accumulation has 1e-4 to 3e-4).
* ``gamma`` is a real number in [0, 1], or an array of shape (batch,) (one
  discount per row).  gamma = 1 is allowed (the plain cumulative sum) and so
  is gamma = 0 (y = x).  A scalar gamma serves every row.
* ``dones`` (optional) is a mask of the shape of ``x``: ``dones[..., t]``
  true marks t as the LAST step of an episode; no sum then crosses the
  boundary between t and t + 1, in either direction.  With masks the
  recurrences read

      right: y_t = x_t + gamma (1 - d_t) y_{t+1},
      left:  y_t = x_t + gamma (1 - d_{t-1}) y_{t-1}.

  On the host, ``dones`` may be bool or hold 0/1 values of any real dtype;
  on the GPU it must be a bool or uint8 array (nonzero means done).

Devices
-------
NumPy inputs run on the parallel CPU kernels (``numbaot.cpu.scan``); device
arrays run on the CUDA kernels (``numbaot.cuda.scan``) and results come back
as device arrays of the same kind.  All arrays of one call must be on the same
device (a ``TypeError`` otherwise); the O(batch) parameters ``gamma``,
``lam`` and ``last_value`` may be host or device arrays either way (they are
read on the host).

Algorithm
---------
The recurrence y_p = a_p y_{p-1} + x_p (in scan order) is a prefix scan over
the associative operator (a1, s1) o (a2, s2) = (a1 a2, s1 a2 + s2)
(Blelloch 1990, "Prefix sums and their applications", sec. 1.4).  CPU: one
task per row (four rows in lockstep), or, for a few long rows, chunks reduced
in parallel, a serial scan of the chunk pairs (a, s) = (gamma^len, local
sum) and a parallel rescan of every chunk from its carry.  CUDA: one thread
per row for many short rows, else a work-efficient (Blelloch) shared-memory
scan of tiles in three launches whatever N (tile reduction, scan of the tile
carries, rescan of every tile).
"""
import numpy as np

from . import _checks, _dispatch
from ._checks import float_dtype_of

__all__ = [
    "discounted_cumsum_right",
    "discounted_cumsum_left",
    "discounted_cumsum_right_backward",
    "discounted_cumsum_left_backward",
    "gae",
]


# --------------------------------------------------------------------------
# host helpers
# --------------------------------------------------------------------------
#: the CPU backend module, imported on the first call (importing numbaot
#: loads no kernel module)
_CPU = []


def _backend(device):
    if device == "cuda":
        _dispatch.require_cuda()
        from .cuda import scan as backend

        return backend
    if not _CPU:
        from .cpu import scan as cpu_scan

        _CPU.append(cpu_scan)
    return _CPU[0]


def _device(**arrays):
    """Device of the data arrays (None ignored).  The O(batch) parameters
    (gamma, lam, last_value) are not passed here: they may live on either
    device and are read on the host."""
    if all(v is None or type(v) is np.ndarray for v in arrays.values()):
        return "cpu"  # the common case, without device_of's per-array probes
    arrs = {k: v for k, v in arrays.items()
            if v is not None and (_dispatch.is_device_array(v) or isinstance(v, np.ndarray))}
    return _dispatch.device_of(**arrs)


def _dtype_of(*dtypes):
    """``float_dtype_of``, without its ``np.result_type`` call when every
    dtype already is float64, or every one float32 (native byte order)."""
    native = _NATIVE.get(dtypes[0])
    if native is not None and all(d == native for d in dtypes):
        return native
    return float_dtype_of(*dtypes)


_NATIVE = {np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64)}
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _as_2d(arr, on_device, dtype):
    """(flat C-contiguous array of ``dtype``, B, N) for a (N,) or (B, N) array."""
    if arr.ndim == 1:
        B, N = 1, arr.shape[0]
    else:
        B, N = arr.shape
    if on_device:
        from .cuda import scan as cuda_scan

        flat = cuda_scan.to_flat(arr, dtype)
    elif arr.dtype == dtype and arr.flags.c_contiguous:
        flat = arr.reshape(-1)  # a view: only ever read
    else:
        flat = np.ascontiguousarray(arr, dtype=dtype).reshape(-1)
    return flat, B, N


def _flat_dones(d, on_device):
    if d is None:
        return None
    if on_device:
        from .cuda import scan as cuda_scan

        return cuda_scan.to_flat(d, np.uint8)
    return np.ascontiguousarray(d).reshape(-1)


def _raise_nonfinite(backend, named, dtype, what):
    """A result had a non-finite value: name the input with NaN/inf, else
    report the overflow."""
    for name, arr in named:
        if arr is not None and backend.count_nonfinite(arr):
            raise ValueError(f"{name} contains NaN or inf; all entries must be finite")
    names = " and ".join(n for n, _ in named)
    raise ValueError(
        f"{names} are finite but {what} overflow(s) the range of {np.dtype(dtype)}"
    )


def _scan(x, gamma, dones, reverse, name="x"):
    """Validate and run one scan; returns (out in x's shape, per_row, device)."""
    if (type(x) is np.ndarray and dones is None and type(gamma) is float
            and (x.dtype is _F64 or x.dtype is _F32) and 0.0 <= gamma <= 1.0
            and 0 < x.ndim < 3):
        # The common case (a float64/float32 host array, one discount, no
        # mask), valid as it is: checked and run with as few Python and NumPy
        # calls as possible.  In a loop that does other work between calls
        # (an RL update), every call finds the interpreter's data out of
        # cache, and each call here then costs microseconds (bench_scan.py,
        # section 2).  Anything else takes the general path below.
        backend = _CPU[0] if _CPU else _backend("cpu")
        N = x.shape[-1]
        B = x.size // N if N else (x.shape[0] if x.ndim == 2 else 1)
        out = np.empty(x.shape, x.dtype)
        if B * N and backend.run_scan(x.ravel(), gamma, None, reverse, B, N, out.reshape(-1)):
            _raise_nonfinite(backend, [(name, x.ravel())], x.dtype, "the discounted sums")
        return out, False, "cpu", backend
    device = _device(x=x, dones=dones)
    on_dev = device == "cuda"
    backend = _backend(device)
    x = _checks.as_scan_array(x, name, on_device=on_dev)
    dtype = _dtype_of(x.dtype)
    xf, B, N = _as_2d(x, on_dev, dtype)
    g, per_row = _checks.check_discount(gamma, B, "gamma", on_device=on_dev)
    d = _flat_dones(_checks.check_dones(dones, x.shape, "dones", on_device=on_dev), on_dev)
    out = backend.empty(B * N, dtype)
    # the kernels test every value they store: a count of 0 means all finite
    if B * N and backend.run_scan(xf, g, d, reverse, B, N, out):
        _raise_nonfinite(backend, [(name, xf)], dtype, "the discounted sums")
    return out.reshape(x.shape), per_row, device, backend


def _wrap(out, like, device):
    return _dispatch.like_input(out, like) if device == "cuda" else out


# --------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------
def discounted_cumsum_right(x, gamma, dones=None):
    r"""Discounted cumulative sum from the right: y_t = sum_{k >= 0} gamma^k x_{t+k}.

    The discounted return of reinforcement learning (Sutton & Barto 2018,
    eq. 3.8: G_t = R_{t+1} + gamma G_{t+1}) [2]_, computed by the recurrence
    y_t = x_t + gamma (1 - d_t) y_{t+1}, y_N = 0, as a parallel prefix scan
    (Blelloch 1990, sec. 1.4) [3]_.  Mirrors torch-discounted-cumsum's
    ``discounted_cumsum_right`` [1]_; same result as
    ``scipy.signal.lfilter([1], [1, -gamma], x[..., ::-1])[..., ::-1]``.

    Parameters
    ----------
    x : array (N,) or (batch, N), float32 or float64 (integers: float64; float16: float32)
        Sequences along the last axis, e.g. the rewards r_t of ``batch``
        trajectories of N steps.  NumPy array, or a device array for the GPU.
    gamma : float in [0, 1], or array (batch,)
        Discount factor, one for all rows or one per row (1 gives the plain
        reversed cumulative sum, 0 gives y = x).
    dones : array of x's shape (bool, or 0/1 values), optional
        Episode boundaries: ``dones[..., t]`` true marks t as the last step of
        an episode, so y_t does not include x_{t+1}, x_{t+2}, ... .

    Returns
    -------
    y : array of x's shape and dtype (float64 for integer x, float32 for float16 x)
        The discounted sums (a device array of x's kind on the GPU).

    Raises
    ------
    TypeError
        ``x`` not numeric (complex, bool, object; on the GPU not
        float32/float64), ``gamma`` not a real number or real array,
        ``dones`` of a wrong dtype, or host and device arrays mixed.
    ValueError
        ``x`` not 1-D or 2-D; ``gamma`` outside [0, 1], NaN/inf, or an array
        whose shape is not (batch,); ``dones`` of another shape than ``x``, or
        (host) with values other than 0/1; ``x`` containing NaN or inf; sums
        that overflow the output dtype (any partial sum y_t, not only the
        last: every element returned is finite).
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but no usable GPU.

    References
    ----------
    .. [1] A. Obukhov, "torch-discounted-cumsum: fast discounted cumulative
       sums in PyTorch", software, 2020, ``discounted_cumsum_right``.
    .. [2] R. S. Sutton, A. G. Barto, "Reinforcement Learning: An
       Introduction", 2nd ed., MIT Press 2018, eq. 3.8.
    .. [3] G. E. Blelloch, "Prefix Sums and Their Applications", Technical
       Report CMU-CS-90-190, Carnegie Mellon University 1990, sec. 1.4.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> print(numbaot.discounted_cumsum_right(np.array([1.0, 1.0, 1.0]), 0.5))
    [1.75 1.5  1.  ]
    >>> print(numbaot.discounted_cumsum_right(np.array([1.0, 1.0, 1.0]), 0.5,
    ...                                       dones=np.array([True, False, False])))
    [1.  1.5 1. ]
    """
    out, _, device, _ = _scan(x, gamma, dones, True)
    return _wrap(out, x, device)


def discounted_cumsum_left(x, gamma, dones=None):
    r"""Discounted cumulative sum from the left: y_t = sum_{k >= 0} gamma^k x_{t-k}.

    The recurrence y_t = x_t + gamma (1 - d_{t-1}) y_{t-1}, y_{-1} = 0 (an
    exponential moving sum; ``scipy.signal.lfilter([1], [1, -gamma], x)``),
    computed as a parallel prefix scan (Blelloch 1990, sec. 1.4) [2]_.
    Mirrors torch-discounted-cumsum's ``discounted_cumsum_left`` [1]_.

    Parameters
    ----------
    x : array (N,) or (batch, N), float32 or float64 (integers: float64; float16: float32)
        Sequences along the last axis.
    gamma : float in [0, 1], or array (batch,)
        Discount factor, one for all rows or one per row.
    dones : array of x's shape (bool, or 0/1 values), optional
        ``dones[..., t]`` true marks t as the last step of an episode, so y_t
        for t after the boundary does not include x_t' of t' <= t.

    Returns
    -------
    y : array of x's shape and dtype (float64 for integer x, float32 for float16 x)
        The discounted sums (a device array of x's kind on the GPU).

    Raises
    ------
    TypeError, ValueError, CudaUnavailableError
        As :func:`discounted_cumsum_right`.

    References
    ----------
    .. [1] A. Obukhov, "torch-discounted-cumsum: fast discounted cumulative
       sums in PyTorch", software, 2020, ``discounted_cumsum_left``.
    .. [2] G. E. Blelloch, "Prefix Sums and Their Applications", Technical
       Report CMU-CS-90-190, Carnegie Mellon University 1990, sec. 1.4.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> print(numbaot.discounted_cumsum_left(np.array([1.0, 2.0, 3.0]), 0.5))
    [1.   2.5  4.25]
    """
    out, _, device, _ = _scan(x, gamma, dones, False)
    return _wrap(out, x, device)


# --------------------------------------------------------------------------
# backward
# --------------------------------------------------------------------------
def _backward(grad_output, output, gamma, dones, reverse):
    """Gradients of a scan in direction ``reverse`` (True: right)."""
    device = _device(grad_output=grad_output, output=output, dones=dones)
    on_dev = device == "cuda"
    backend = _backend(device)
    go = _checks.as_scan_array(grad_output, "grad_output", on_device=on_dev)
    y = _checks.as_scan_array(output, "output", on_device=on_dev)
    if tuple(y.shape) != tuple(go.shape):
        raise ValueError(
            f"output must have the shape of grad_output; got output.shape = {tuple(y.shape)} "
            f"and grad_output.shape = {tuple(go.shape)}"
        )
    dtype = _dtype_of(go.dtype, y.dtype)
    gof, B, N = _as_2d(go, on_dev, dtype)
    yf, _, _ = _as_2d(y, on_dev, dtype)
    g, per_row = _checks.check_discount(gamma, B, "gamma", on_device=on_dev)
    d = _flat_dones(_checks.check_dones(dones, go.shape, "dones", on_device=on_dev), on_dev)
    gi = backend.empty(B * N, dtype)
    if B * N:
        # the transpose of the scan is the scan in the other direction; the
        # kernels test every value they store (a count of 0: all finite)
        if backend.run_scan(gof, g, d, not reverse, B, N, gi):
            _raise_nonfinite(backend, [("grad_output", gof)], dtype, "the scanned gradients")
        gg = backend.run_gamma_grad(gi, yf, d, reverse, B, N)
    else:
        gg = np.zeros(B)
    # float64 partials, then the result in ``dtype``: the test follows the
    # cast, so a float32 gradient beyond 3.4e38 (or a sum over the rows that
    # overflows) is an error, not an inf
    with np.errstate(over="ignore", invalid="ignore"):
        grad_gamma = gg.astype(dtype) if per_row else dtype.type(np.sum(gg))
    if not np.all(np.isfinite(grad_gamma)):
        _raise_nonfinite(backend, [("output", yf), ("grad_output", gof)], dtype,
                         "the gamma gradient")
    if on_dev:
        grad_gamma = _dispatch.like_input(backend.from_host(np.asarray(grad_gamma)), grad_output)
    return _wrap(gi.reshape(go.shape), grad_output, device), grad_gamma


def discounted_cumsum_right_backward(grad_output, output, gamma, dones=None):
    r"""Gradients of ``y = discounted_cumsum_right(x, gamma, dones)``.

    With y_t = x_t + gamma k_t y_{t+1} (k_t = 1 - d_t) and an upstream
    gradient g = dL/dy:

    * dL/dx = the LEFT scan of g: z_t = g_t + gamma k_{t-1} z_{t-1}
      (the transpose of the right scan; same ``dones``; a parallel scan
      [2]_);
    * dL/dgamma = sum_t z_t k_t y_{t+1}: differentiating the recurrence,
      dy/dgamma is the right scan of u_t = k_t y_{t+1}, so
      <g, R u> = <R^T g, u> = <z, u>.  O(N) from the forward output, no
      second scan.

    Mirrors the backward of torch-discounted-cumsum's
    ``discounted_cumsum_right`` [1]_ (which gives dL/dx only).

    Parameters
    ----------
    grad_output : array (N,) or (batch, N), float32 or float64
        dL/dy, the upstream gradient.  Host arrays of any real dtype are
        accepted (float16 computed as float32, integers as float64); device
        arrays must be float32 or float64.
    output : array of grad_output's shape, float32 or float64
        The forward result y (only y_{t+1}, t < N - 1, is read: y_0 of each
        row does not enter the gradient and is not inspected).  Same dtype
        rules as ``grad_output``.
    gamma : float in [0, 1], or array (batch,)
        The forward discount(s); an array of any real dtype, read as
        float64 (host or device).
    dones : array of grad_output's shape, optional
        The forward episode mask: on the host bool, or 0/1 values of any
        real dtype; on the GPU a bool or uint8 device array (nonzero: done).

    Returns
    -------
    grad_input : array of grad_output's shape, float32 or float64
        dL/dx; float32 when ``grad_output`` and ``output`` are both float32
        (or float16), else float64 (a device array of grad_output's kind on
        the GPU).
    grad_gamma : scalar, or array of shape (batch,), of grad_input's dtype
        dL/dgamma: a NumPy scalar for a scalar ``gamma`` (summed over the
        rows), an array (batch,) for a per-row ``gamma``.  On the GPU: a
        device array of shape (batch,), or of shape () for a scalar gamma.

    Raises
    ------
    TypeError, ValueError, CudaUnavailableError
        As :func:`discounted_cumsum_right`, for ``grad_output`` and
        ``output``; ValueError also when their shapes differ, and when
        ``grad_input`` or ``grad_gamma`` overflows the output dtype.

    References
    ----------
    .. [1] A. Obukhov, "torch-discounted-cumsum: fast discounted cumulative
       sums in PyTorch", software, 2020, ``discounted_cumsum_right``.
    .. [2] G. E. Blelloch, "Prefix Sums and Their Applications", Technical
       Report CMU-CS-90-190, Carnegie Mellon University 1990, sec. 1.4 (the
       scan run for dL/dx).

    Examples
    --------
    L = sum(y), so dL/dy = 1: dL/dx_t counts the discounted copies of x_t,
    dL/dgamma = dy_0/dgamma + dy_1/dgamma = (1 + 2 gamma) + 1.

    >>> import numpy as np
    >>> import numbaot
    >>> y = numbaot.discounted_cumsum_right(np.array([1.0, 1.0, 1.0]), 0.5)
    >>> grad_x, grad_gamma = numbaot.discounted_cumsum_right_backward(np.ones(3), y, 0.5)
    >>> print(grad_x, float(grad_gamma))
    [1.   1.5  1.75] 3.0
    """
    return _backward(grad_output, output, gamma, dones, True)


def discounted_cumsum_left_backward(grad_output, output, gamma, dones=None):
    r"""Gradients of ``y = discounted_cumsum_left(x, gamma, dones)``.

    With y_t = x_t + gamma k_{t-1} y_{t-1} (k_t = 1 - d_t): dL/dx is the
    RIGHT scan of g = dL/dy, z_t = g_t + gamma k_t z_{t+1} (a parallel scan
    [2]_), and
    dL/dgamma = sum_t z_t k_{t-1} y_{t-1} (O(N) from the output).  Mirrors
    the backward of torch-discounted-cumsum's ``discounted_cumsum_left``
    [1]_ (which gives dL/dx only).

    Parameters
    ----------
    grad_output : array (N,) or (batch, N), float32 or float64
        dL/dy, the upstream gradient.  Host arrays of any real dtype are
        accepted (float16 computed as float32, integers as float64); device
        arrays must be float32 or float64.
    output : array of grad_output's shape, float32 or float64
        The forward result y (only y_{t-1}, t >= 1, is read: the last entry
        of each row does not enter the gradient and is not inspected).  Same
        dtype rules as ``grad_output``.
    gamma : float in [0, 1], or array (batch,)
        The forward discount(s); an array of any real dtype, read as
        float64 (host or device).
    dones : array of grad_output's shape, optional
        The forward episode mask: on the host bool, or 0/1 values of any
        real dtype; on the GPU a bool or uint8 device array (nonzero: done).

    Returns
    -------
    grad_input : array of grad_output's shape, float32 or float64
        dL/dx; float32 when ``grad_output`` and ``output`` are both float32
        (or float16), else float64 (a device array of grad_output's kind on
        the GPU).
    grad_gamma : scalar, or array of shape (batch,), of grad_input's dtype
        dL/dgamma: a NumPy scalar for a scalar ``gamma`` (summed over the
        rows), an array (batch,) for a per-row ``gamma``.  On the GPU: a
        device array of shape (batch,), or of shape () for a scalar gamma.

    Raises
    ------
    TypeError, ValueError, CudaUnavailableError
        As :func:`discounted_cumsum_right`, for ``grad_output`` and
        ``output``; ValueError also when their shapes differ, and when
        ``grad_input`` or ``grad_gamma`` overflows the output dtype.

    References
    ----------
    .. [1] A. Obukhov, "torch-discounted-cumsum: fast discounted cumulative
       sums in PyTorch", software, 2020, ``discounted_cumsum_left``.
    .. [2] G. E. Blelloch, "Prefix Sums and Their Applications", Technical
       Report CMU-CS-90-190, Carnegie Mellon University 1990, sec. 1.4 (the
       scan run for dL/dx).

    Examples
    --------
    L = sum(y) with y = [x0, x1 + gamma x0, x2 + gamma x1 + gamma^2 x0]:
    dL/dgamma = x0 + x1 + 2 gamma x0 = 4 for x = [1, 2, 3], gamma = 0.5.

    >>> import numpy as np
    >>> import numbaot
    >>> y = numbaot.discounted_cumsum_left(np.array([1.0, 2.0, 3.0]), 0.5)
    >>> grad_x, grad_gamma = numbaot.discounted_cumsum_left_backward(np.ones(3), y, 0.5)
    >>> print(grad_x, float(grad_gamma))
    [1.75 1.5  1.  ] 4.0
    """
    return _backward(grad_output, output, gamma, dones, False)


# --------------------------------------------------------------------------
# GAE
# --------------------------------------------------------------------------
def gae(rewards, values, dones, gamma, lam, last_value=None):
    r"""Generalized advantage estimation (Schulman et al. 2016, "High-dimensional
    continuous control using generalized advantage estimation", eq. 16) [1]_.

    For a rollout of N steps, with d_t = ``dones[..., t]``:

        delta_t = r_t + gamma (1 - d_t) V(s_{t+1}) - V(s_t),
        A_t = delta_t + gamma lam (1 - d_t) A_{t+1},  A_N = 0,
        returns_t = A_t + V(s_t)   (the lambda-returns, value targets).

    A_t = sum_k (gamma lam)^k delta_{t+k} within the episode: a right
    discounted cumulative sum of the TD residuals with discount gamma * lam
    (:func:`discounted_cumsum_right`, a parallel scan [2]_).

    Bootstrap convention: ``dones[..., t]`` true means s_{t+1} is terminal
    (V(s_{t+1}) is taken as 0 and nothing after t is summed).  The value of
    the state after the LAST step, V(s_N), bootstraps an unfinished rollout;
    give it either as the extra last column of ``values`` (N + 1 entries) or
    as ``last_value``.  With N values and no ``last_value`` V(s_N) = 0 (the
    rollout is treated as ending in a terminal state).  A time-limit
    truncation inside the rollout is not a termination: it cannot be expressed
    with one mask (bootstrap it by adding gamma V(s_{t+1}) to r_t and marking
    it done).

    Parameters
    ----------
    rewards : array (N,) or (batch, N), float32 or float64
        r_t, the reward received after the action at step t.  Host arrays
        of any real dtype are accepted (float16 computed as float32,
        integers as float64); device arrays must be float32 or float64.
    values : array (N + 1,) / (batch, N + 1), or (N,) / (batch, N), float32 or float64
        V(s_t), the critic's values of the visited states (and V(s_N)), in
        the units of the rewards; same dtype rules as ``rewards``.
    dones : None or array of rewards' shape
        Episode terminations (see above): on the host bool, or 0/1 values of
        any real dtype; on the GPU a bool or uint8 device array.
    gamma : float in [0, 1], or array (batch,)
        Discount factor.
    lam : float in [0, 1], or array (batch,)
        The GAE lambda (0: one-step TD residuals; 1: Monte-Carlo returns
        minus V).
    last_value : None, float, or array (batch,)
        V(s_N) when ``values`` has N entries per row (host scalar/array; on
        the GPU a per-row array is a device array or a host sequence).

    Returns
    -------
    advantages : array of rewards' shape
        A_t, the generalized advantage estimates (units of the rewards);
        float32 when rewards and values are both float32 (or float16), else
        float64; a device array of ``rewards``' kind on the GPU.
    returns : array of rewards' shape
        returns_t = A_t + V(s_t), the lambda-returns (value targets); same
        dtype and kind as ``advantages``.

    Raises
    ------
    TypeError
        Non-numeric arrays, wrong ``dones`` dtype, mixed devices.
    ValueError
        Wrong shapes (values not N or N + 1 entries per row, batch mismatch,
        ``last_value`` given together with N + 1 values), gamma or lam
        outside [0, 1], NaN/inf in rewards, values or last_value;
        advantages or returns that overflow the output dtype (every
        element returned is finite).
    numbaot._dispatch.CudaUnavailableError
        Device arrays given but no usable GPU.

    References
    ----------
    .. [1] J. Schulman, P. Moritz, S. Levine, M. I. Jordan, P. Abbeel,
       "High-Dimensional Continuous Control Using Generalized Advantage
       Estimation", ICLR 2016, eq. 16.
    .. [2] G. E. Blelloch, "Prefix Sums and Their Applications", Technical
       Report CMU-CS-90-190, Carnegie Mellon University 1990, sec. 1.4.

    Examples
    --------
    Three steps, the episode ends after step 1, V(s_3) = 1 bootstraps the
    last one: delta = [0.95, -0.5, 2.4] and A_0 = 0.95 + 0.9 * 0.8 * (-0.5).

    >>> import numpy as np
    >>> import numbaot
    >>> adv, ret = numbaot.gae(np.array([1.0, 0.0, 2.0]), np.array([0.5, 0.5, 0.5, 1.0]),
    ...                        np.array([False, True, False]), gamma=0.9, lam=0.8)
    >>> print(np.round(adv, 4), np.round(ret, 4))
    [ 0.59 -0.5   2.4 ] [1.09 0.   2.9 ]
    """
    device = _device(rewards=rewards, values=values, dones=dones)
    on_dev = device == "cuda"
    backend = _backend(device)
    r = _checks.as_scan_array(rewards, "rewards", on_device=on_dev)
    v = _checks.as_scan_array(values, "values", on_device=on_dev)
    if v.ndim != r.ndim or (r.ndim == 2 and v.shape[0] != r.shape[0]):
        raise ValueError(
            f"values must have shape {tuple(r.shape[:-1]) + ('N + 1 or N',)} for rewards of shape "
            f"{tuple(r.shape)}; got values.shape = {tuple(v.shape)}"
        )
    N = r.shape[r.ndim - 1]
    Nv = v.shape[v.ndim - 1]
    if Nv not in (N, N + 1):
        raise ValueError(
            f"values must have N + 1 = {N + 1} (with V(s_N)) or N = {N} entries per row; "
            f"got values.shape = {tuple(v.shape)}"
        )
    dtype = _dtype_of(r.dtype, v.dtype)
    rf, B, _ = _as_2d(r, on_dev, dtype)
    vf, _, _ = _as_2d(v, on_dev, dtype)
    g, _ = _checks.check_discount(gamma, B, "gamma", on_device=on_dev)
    lm, _ = _checks.check_discount(lam, B, "lam", on_device=on_dev)
    if Nv == N + 1:
        if last_value is not None:
            raise ValueError("last_value must be None when values has N + 1 entries per row "
                             "(its last column is V(s_N))")
        last = np.zeros(B)
    elif last_value is None:
        last = np.zeros(B)
    else:
        lv = last_value
        if _dispatch.is_device_array(lv):
            lv = _dispatch.as_device_array(lv).copy_to_host()
        if isinstance(lv, np.ndarray) and lv.ndim == 0:
            lv = lv[()]
        if np.ndim(lv) == 0:
            last = np.full(B, _checks.check_real_scalar(lv, "last_value"))
        else:
            last = _checks.as_real_array(lv, "last_value").astype(np.float64)
            if last.shape != (B,):
                raise ValueError(f"last_value must be a scalar or have shape ({B},); "
                                 f"got shape {last.shape}")
        if not np.all(np.isfinite(last)):
            raise ValueError("last_value contains NaN or inf")
    d = _flat_dones(_checks.check_dones(dones, r.shape, "dones", on_device=on_dev), on_dev)
    adv = backend.empty(B * N, dtype)
    ret = backend.empty(B * N, dtype)
    if B * N:
        delta = backend.run_gae_deltas(rf, vf, Nv, last, d, g, B, N, dtype)
        # the kernels test every value they store (a count of 0: all finite)
        if backend.run_scan(delta, g * lm, d, True, B, N, adv):
            _raise_nonfinite(backend, [("rewards", rf), ("values", vf)], dtype, "the advantages")
        if backend.run_gae_returns(adv, vf, Nv, B, N, ret):
            _raise_nonfinite(backend, [("rewards", rf), ("values", vf)], dtype, "the returns")
    return (_wrap(adv.reshape(r.shape), rewards, device),
            _wrap(ret.reshape(r.shape), rewards, device))
