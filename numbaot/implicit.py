"""The Sinkhorn operator on batches of small square matrices, and its backward
pass without an autodiff framework (implicit differentiation by conjugate
gradient, or exact reverse mode through the iterations).

The Sinkhorn operator (Sinkhorn 1964 [1]_; Adams & Zemel 2011 [2]_; Mena et
al. 2018, "Learning latent permutations with Gumbel-Sinkhorn networks", eq. 3
[3]_) maps a square matrix X to the doubly-stochastic matrix

    S(X) = diag(alpha) exp(X) diag(beta),   S(X) 1 = 1,  S(X)^T 1 = 1,

the limit of alternating row and column normalisations of exp(X).  Batches of
small matrices (n = 4 ... 64) appear in Gumbel-Sinkhorn permutation learning
and in doubly-stochastic mixing layers.  The backward pass follows Eisenberger
et al. 2022 ("A unified framework for implicit Sinkhorn differentiation",
CVPR, Thm. 5) [4]_: with G = dL/dR, dL/dX = (G - u 1^T - 1 v^T) * R where
(u, v) solves a 2n x 2n linear system; eliminating u leaves a symmetric
positive semi-definite n x n system, solved by conjugate gradient with two
mat-vecs per iteration (R^T R is never formed).  The derivation and the
analysis of the CG solve (conditioning, convergence, tolerances) are in
``docs/implicit-backward.md``.

NumPy inputs run on parallel CPU kernels (``numbaot.cpu.implicit``); CUDA
device arrays (numba, CuPy) run on the mirror kernels in
``numbaot.cuda.implicit`` and results come back as device arrays.

References
----------
.. [1] R. Sinkhorn, "A relationship between arbitrary positive matrices and
   doubly stochastic matrices", Ann. Math. Statist. 35(2), 876-879, 1964.
.. [2] R. P. Adams, R. S. Zemel, "Ranking via Sinkhorn Propagation",
   arXiv:1106.1925 2011.
.. [3] G. Mena, D. Belanger, S. Linderman, J. Snoek, "Learning Latent
   Permutations with Gumbel-Sinkhorn Networks", ICLR 2018, eq. 3.
.. [4] M. Eisenberger, A. Toker, L. Leal-Taixe, F. Bernard, D. Cremers, "A
   Unified Framework for Implicit Sinkhorn Differentiation", CVPR 2022,
   Thm. 5.
"""
import numpy as np

from . import _checks
from ._dispatch import as_device_array, device_of, like_input, require_cuda

__all__ = ["sinkhorn_operator", "sinkhorn_operator_backward"]

_METHODS = ("implicit", "implicit_corrected", "unrolled")


_CPU_KERNELS = []


def _cpu():
    # imported on first use (its generated kernels are built at import); kept,
    # since even a cached import statement costs ~20 us after a gc.collect()
    if not _CPU_KERNELS:
        from .cpu import implicit as k

        _CPU_KERNELS.append(k)
    return _CPU_KERNELS[0]


def _cuda():
    require_cuda()
    from .cuda import implicit as k

    return k


def _float_dtype(*arrays):
    # every array votes, empty ones too: an empty float32 batch gives float32
    return _checks.float_dtype_of(*(x.dtype for x in arrays))


def _host_batch(x, dtype):
    """x as a C-contiguous (B, n, n) array of ``dtype`` (no copy when it
    already is one)."""
    n = x.shape[-1]
    if x.dtype != dtype:
        x = x.astype(dtype)
    return np.ascontiguousarray(x).reshape(-1, n, n)


def _device_batch(x, name):
    if not x.is_c_contiguous():
        raise ValueError(
            f"{name} is a non-contiguous GPU array; pass a C-contiguous one "
            "(e.g. cupy.ascontiguousarray)"
        )
    shape = tuple(x.shape)
    n = shape[-1]
    B = int(np.prod(shape[:-2], dtype=np.int64))
    return x.reshape(B, n, n)


def _check_values(k, x3, name, nonneg):
    """Raise for NaN/inf entries of x3 (or negative ones with ``nonneg``):
    one counting pass on the device holding it (``k.count_invalid``; on a
    GPU only two integers are copied back)."""
    bad, neg = k.count_invalid(x3, nonneg)
    _checks.check_value_counts(bad, neg, name)


_OVERFLOW = ("grad_R * R overflows float64 (its row or column sums, or the solution "
             "of the linear system, are not finite although R and grad_R are): "
             "rescale grad_R")
_UNROLLED_OVERFLOW = ("the unrolled gradient overflows (NaN or inf entries although X "
                      "and grad_R are finite): rescale grad_R")


def _check_result(k, out3, what):
    """Raise instead of returning a gradient with NaN/inf entries (finite
    inputs whose products overflow): one counting pass over the output."""
    if k.count_invalid(out3, False)[0]:
        raise ValueError(what)


def sinkhorn_operator(X, n_iter=20, tol=None, return_n_iter=False):
    """The Sinkhorn operator: alternating row and column normalisation of
    exp(X), in the log domain, for a batch of square matrices.

    R = exp(X + f 1^T + 1 g^T) where one iteration is the row normalisation
    f_i <- -log sum_j exp(X_ij + g_j) followed by the column normalisation
    g_j <- -log sum_i exp(X_ij + f_i), starting from g = 0 (Sinkhorn 1964
    [1]_; Mena et al. 2018, eq. 3: S^l(X) = T_c(T_r(S^{l-1}(X))) [2]_;
    Cuturi 2013 [3]_).  After every iteration
    the column sums of R are 1 (up to rounding); the row sums converge to 1.
    The potentials f, g are kept in the log domain (float64), so any finite X
    (e.g. |X| ~ 1e4, a low temperature) is safe: nothing overflows, and R
    agrees with the plain logsumexp iteration to the rounding of X (about
    |X| * 1e-15 where |X| is the spread within a row or column).  A row, or
    a column, at a large near-constant value c (|c| > 64, every entry
    within a factor 2 of the line's maximum: a row at -1e14, or -1e14 +
    O(1)) is shifted by its maximum before the iterations, exactly (the
    columns with the compensating initial potential), so R is as exact as
    for an ordinary X; without the shift its potential would hold -c and R's
    sums would lose |c| * 1e-16.  Known limit: a column at a large
    *positive* constant (every row's maximum) drags every potential to
    +-c, and R keeps |c| * 1e-16 of rounding.  Entries whose differences
    exceed the float64 range give NaN.

    Parameters
    ----------
    X : array_like, shape (..., n, n), float32 or float64 (integers: float64)
        Log-potentials ("scores") of a batch of n x n matrices; any number of
        leading batch dimensions; n >= 1.  Must be finite.  Not modified.
    n_iter : int, default 20
        Number of (row, column) normalisation pairs, >= 1.
    tol : float or None, default None
        If given (>= 0), each matrix stops early, after the first iteration
        K >= 1 whose result R^K has marginal error < tol, where the marginal
        error is max(max_i |sum_j R_ij - 1|, max_j |sum_i R_ij - 1|) =
        max_i |sum_j R_ij - 1| (the column sums are 1 up to rounding after a
        column normalisation).  The row error is computed in float64 from
        the scalings (|exp(f_i^K - f_i^(K+1)) - 1|), exact up to rounding:
        a tol below ~1e-14 (float64) or ~1e-7 (a float32 result) can stop
        a matrix whose re-summed R has an error of that rounding size.
        Checking costs nothing but one extra row pass at the stopping
        iteration.  None: always n_iter iterations.
    return_n_iter : bool, default False
        Also return the number of iterations each matrix ran.

    Returns
    -------
    R : ndarray, shape (..., n, n), dtype of X (float64 for integer X,
        float32 for float16 X)
        The (approximately) doubly-stochastic matrices; a CUDA device array
        for device input.
    n_iters : ndarray, shape (...), int64
        Only with ``return_n_iter``: iterations run per matrix (n_iter when
        ``tol`` is None).

    Raises
    ------
    TypeError
        X not real-valued (complex, boolean, object); n_iter not an integer;
        tol not a real number.
    ValueError
        X with fewer than 2 dimensions, non-square last two dimensions or
        n = 0; X containing NaN or inf; n_iter < 1 or > 2**62 (an int64
        count); tol negative or not finite.
    CudaUnavailableError
        Device input but no usable GPU / numba-cuda.

    Notes
    -----
    CPU: ``prange`` over work items of 64 matrices (32 for n > 16; a
    smaller batch fills one item of B rounded up to a multiple of 8)
    processed side by side, vectorised across the matrices; float64
    arithmetic whatever the input dtype.  The iterations run log-stabilised
    (Schmitzer 2019, "Stabilized sparse scaling algorithms for entropy
    regularized transport problems", SIAM J. Sci. Comput. 41(3), A1443,
    Alg. 2 [4]_): f = fa + log u, g = ga + log v, u = 1 / (K v), v = 1 / (K^T u)
    on K = exp(X + fa 1^T + 1 ga^T), i.e. 2 n^2 multiply-adds per matrix per
    iteration instead of 2 n^2 exponentials, with u, v absorbed into fa, ga
    (and K recomputed) when they leave [1e-30, 1e30]; per matrix, a
    half-step whose sums would underflow (|X| spreads beyond ~700) runs as
    shifted logsumexps instead, and so does every half-step once the
    potentials exceed 1e6 in magnitude.  2 n^2 exponentials per matrix at
    the start and the end.  The large near-constant lines are found from
    the row and column minima and maxima of the load pass; only the work
    items holding one take the shift passes.  CUDA: the plain log-domain
    iteration (2 n^2 exponentials per iteration; the line shifts by one
    extra read of each matrix), one thread per matrix for
    n < ``_config.CUDA_IMPLICIT_WARP_MIN_N`` (and n > 64), one warp per
    matrix otherwise.  Device inputs are validated on the device (a
    counting kernel; only two integers are copied back).

    References
    ----------
    .. [1] R. Sinkhorn, "A relationship between arbitrary positive matrices
       and doubly stochastic matrices", Ann. Math. Statist. 35(2), 876-879,
       1964.
    .. [2] G. Mena, D. Belanger, S. Linderman, J. Snoek, "Learning Latent
       Permutations with Gumbel-Sinkhorn Networks", ICLR 2018, eq. 3.
    .. [3] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
       Transport", NeurIPS 2013.
    .. [4] B. Schmitzer, "Stabilized Sparse Scaling Algorithms for Entropy
       Regularized Transport Problems", SIAM J. Sci. Comput. 41(3),
       A1443-A1481, 2019, Algorithm 2.

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> X = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> print(np.round(numbaot.sinkhorn_operator(X), 4))
    [[0.8808 0.1192]
     [0.1192 0.8808]]
    >>> R, n_iters = numbaot.sinkhorn_operator(np.stack([X, 2 * X]), tol=1e-9, return_n_iter=True)
    >>> print(R.shape, n_iters)  # a symmetric X is balanced after one iteration
    (2, 2, 2) [1 1]
    """
    dev = device_of(X=X)
    X = _checks.as_square_batch(X, "X", on_device=(dev == "cuda"))
    n_iter = _checks.check_positive_int(n_iter, "n_iter")
    tol_v = _checks.check_optional_tol(tol, "tol")
    shape = tuple(X.shape)
    if dev == "cuda":
        k = _cuda()
        X3 = _device_batch(as_device_array(X), "X")
    else:
        k = _cpu()
        X3 = _host_batch(X, _float_dtype(X))
    _check_values(k, X3, "X", False)
    R3, iters = k.operator_forward(X3, n_iter, tol_v)
    R = _shaped(R3, shape, X, dev)
    if return_n_iter:
        return R, _shaped(iters, shape[:-2], X, dev)
    return R


def sinkhorn_operator_backward(R, grad_R, method="implicit", *, X=None, n_iter=20,
                               tol=None, cg_tol=1e-12, max_cg_iter=None,
                               return_info=False):
    """Gradient dL/dX of a loss L through R = sinkhorn_operator(X), given
    grad_R = dL/dR, without an autodiff framework.

    Three methods, each the exact gradient of a different map X -> R:

    ``'implicit'`` (default)
        The gradient of the exact Sinkhorn operator S (the doubly-stochastic
        limit) at a point where S(X) = R, by implicit differentiation of the
        fixed point (Eisenberger et al. 2022, Thm. 5) [1]_: with H = G * R,
        s_r = H 1, s_c = H^T 1, solve (I - R^T R) v = s_c - R^T s_r by
        conjugate gradient (R^T R never formed), u = s_r - R v,
        dL/dX = (G - u 1^T - 1 v^T) * R.  Needs only R; exact when R is
        doubly stochastic, else off by about R's marginal error divided by
        the gap 1 - sigma_2(R)^2.
    ``'implicit_corrected'``
        The exact gradient of the Sinkhorn projection onto R's actual
        marginals r = R 1, c = R^T 1 (held fixed): consistent for any
        positive R = diag(a) exp(X) diag(b), e.g. an unconverged iterate.
        Solves (diag(c) - R^T diag(r)^-1 R) v = s_c - R^T diag(r)^-1 s_r by
        CG, u = diag(r)^-1 (s_r - R v).  Equals ``'implicit'`` when R is
        doubly stochastic.
    ``'unrolled'``
        The exact gradient of the finite-iteration forward X ->
        sinkhorn_operator(X, n_iter, tol) (reverse mode through the
        iterations [2]_), recomputed from X keeping only the log-scalings (no
        memory proportional to batch x n_iter x n^2).  Needs ``X`` and the
        forward's ``n_iter`` and ``tol`` (with ``tol``, each matrix's
        iteration count K is the forward's, held fixed); ``R`` is only
        checked for its shape (it may be None).

    Parameters
    ----------
    R : array_like, shape (..., n, n), float32 or float64
        The forward output (entries >= 0, finite).  Not modified.  Host
        arrays of any real dtype are accepted (float16 computed as float32,
        integers as float64); device arrays must be float32 or float64.
    grad_R : array_like, shape (..., n, n) (same shape as R), float32 or float64
        G = dL/dR, finite, in units of L per unit of R.  Not modified.  Same
        dtype rules as ``R`` (on the GPU: R's dtype).
    method : {'implicit', 'implicit_corrected', 'unrolled'}, default 'implicit'
        See above.
    X : array_like, shape (..., n, n), float32 or float64, keyword-only
        The forward input (the log-potentials given to
        :func:`sinkhorn_operator`, finite); required by (and only used by)
        ``'unrolled'``.  Same dtype rules as ``R`` (on the GPU: grad_R's
        dtype).
    n_iter : int, default 20, keyword-only
        ``'unrolled'``: the forward's n_iter (must be the value the forward
        used; the default matches ``sinkhorn_operator``'s).
    tol : float or None, default None, keyword-only
        ``'unrolled'``: the forward's tol.
    cg_tol : float, default 1e-12, keyword-only
        CG stops when ||residual||_2 <= cg_tol * ||rhs||_2 (relative
        residual of the projected n x n system, see Notes); > 0.
    max_cg_iter : int or None, keyword-only
        CG iteration cap per matrix; default n (the projected system has
        dimension n - 1, so exact arithmetic needs at most n - 1).
    return_info : bool, default False
        Also return a dict: for the implicit methods ``'cg_iters'`` (shape
        (...), int64, CG iterations per matrix) and ``'residual'`` (shape
        (...), float64, final relative residual); for ``'unrolled'``
        ``'n_iters'`` (iterations differentiated per matrix).

    Returns
    -------
    grad_X : ndarray, shape (..., n, n)
        dL/dX; float32 when the arrays used are float32 (or float16): R and
        grad_R for the implicit methods, grad_R and X for 'unrolled' (which
        only checks R's shape); else float64.  A CUDA device array for
        device inputs.
    info : dict
        Only with ``return_info``.

    Raises
    ------
    TypeError
        Non-real arrays; method not a string; n_iter or max_cg_iter not an
        integer; tol, cg_tol not real numbers; host and device arrays mixed;
        on the GPU, grad_R (or X) of another dtype than R.
    ValueError
        Unknown method; R, grad_R (or X) with fewer than 2 dimensions or not
        square in their last two; grad_R's (or X's) shape different from
        R's; NaN or inf in R, grad_R or X; negative entries in R; X missing
        for 'unrolled'; n_iter < 1; tol < 0; cg_tol <= 0; max_cg_iter < 1;
        n_iter or max_cg_iter > 2**62 (an int64 count);
        finite R and grad_R whose product overflows float64 (row or column
        sums of grad_R * R, the solution, G - u - v or, on the CPU, the
        gradient in its dtype not finite, e.g. |grad_R| ~ 1e308; for
        'unrolled', the gradient not finite).  On the CPU the
        implicit methods check the values inside their own read pass and
        raise after it (the output is discarded); inputs are never changed.
    CudaUnavailableError
        Device inputs but no usable GPU / numba-cuda.

    Notes
    -----
    The CG system matrix A = diag(c) - R^T diag(r)^-1 R is positive
    semi-definite and, for R > 0, singular exactly along 1, with a
    right-hand side orthogonal to 1; CG runs projected onto the complement
    of 1 and terminates in at most n - 1 iterations in exact arithmetic,
    with condition number <= 1 / (1 - sigma_2(R)^2) for ``'implicit'``:
    close to a permutation matrix (low temperature) it needs more iterations
    (raise ``max_cg_iter``) and the gradient becomes large.  The gradient is
    linear in grad_R: a matrix whose sums of grad_R * R leave
    [2^-256, 2^256] (on the CPU 2^-64 .. 2^64 for a float32 result;
    ``_config.IMPLICIT_CG_SCALE_BAND``) runs the CG on its right-hand side
    scaled by a power of two, exactly, so any scale of grad_R (1e-300 ...
    1e300) gives the right gradient (the CG's squared norms would underflow
    below |grad_R| ~ 1e-154 and overflow above 1e154).  For an R far
    from doubly stochastic, ``'implicit'`` is the gradient of nothing in
    particular (a large ``info['residual']`` shows it): use
    ``'implicit_corrected'`` or ``'unrolled'``.  Computation is in float64
    whatever the input dtype and deterministic; the CPU kernels for
    n <= 16 are generated per padded size (4, 8, 12, 16), so the first call
    at a size compiles them (10-25 s on 2 cores, cached on disk).  The
    derivation, the convergence and conditioning analysis, the meaning of
    ``cg_tol``, ``max_cg_iter`` and ``info``, and the costs on each device
    are in ``docs/implicit-backward.md``.

    References
    ----------
    .. [1] M. Eisenberger, A. Toker, L. Leal-Taixe, F. Bernard, D. Cremers, "A
       Unified Framework for Implicit Sinkhorn Differentiation", CVPR 2022, Thm. 5.
    .. [2] G. Mena, D. Belanger, S. Linderman, J. Snoek, "Learning Latent
       Permutations with Gumbel-Sinkhorn Networks", ICLR 2018 (the Sinkhorn operator differentiated through its
       iterations).

    Examples
    --------
    L = R[0, 0], so grad_R is 1 at (0, 0) and 0 elsewhere; the implicit and
    the unrolled gradients agree for a converged R:

    >>> import numpy as np
    >>> import numbaot
    >>> X = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> R = numbaot.sinkhorn_operator(X)
    >>> grad_R = np.array([[1.0, 0.0], [0.0, 0.0]])
    >>> print(np.round(numbaot.sinkhorn_operator_backward(R, grad_R), 4))
    [[ 0.0525 -0.0525]
     [-0.0525  0.0525]]
    >>> print(np.round(numbaot.sinkhorn_operator_backward(R, grad_R, "unrolled", X=X), 4))
    [[ 0.0525 -0.0525]
     [-0.0525  0.0525]]
    """
    if (X is None and type(method) is str and method in ("implicit", "implicit_corrected")
            and max_cg_iter is None
            and type(cg_tol) is float and 0.0 < cg_tol < np.inf
            and _checks.is_float_square_pair(R, grad_R)):
        # NumPy float arrays as they come from sinkhorn_operator: nothing to
        # convert, so only the kernel's own value checks remain
        shape = R.shape
        n = shape[-1]
        if len(shape) != 3:
            R = R.reshape(-1, n, n)
            grad_R = grad_R.reshape(-1, n, n)
        return _implicit(_cpu(), R, grad_R, method == "implicit_corrected", n, cg_tol, shape,
                         return_info)
    dev = device_of(R=R, grad_R=grad_R, X=X)
    on_dev = dev == "cuda"
    method = _checks.check_method(method, _METHODS)
    G = _checks.as_square_batch(grad_R, "grad_R", on_device=on_dev)
    if R is None and method != "unrolled":
        raise ValueError(f"R is required by method='{method}'")
    if R is not None:
        R = _checks.as_square_batch(R, "R", on_device=on_dev)
        _checks.check_same_shape(R, G, "R", "grad_R")
    # cg_tol and max_cg_iter are checked for every method (the unrolled
    # backward does not use them, but a bad value is a bad argument)
    cg_tol = _checks.check_real_scalar(cg_tol, "cg_tol")
    if not np.isfinite(cg_tol) or cg_tol <= 0:
        raise ValueError(f"cg_tol must be a finite number > 0; got {cg_tol!r}")
    if max_cg_iter is not None:
        max_cg_iter = _checks.check_positive_int(max_cg_iter, "max_cg_iter")
    if method == "unrolled":
        if X is None:
            raise ValueError(
                "method='unrolled' needs the forward input: pass X=... (and the "
                "forward's n_iter and tol)"
            )
        X = _checks.as_square_batch(X, "X", on_device=on_dev)
        _checks.check_same_shape(G, X, "grad_R", "X")
        n_iter = _checks.check_positive_int(n_iter, "n_iter")
        tol_v = _checks.check_optional_tol(tol, "tol")
    elif max_cg_iter is None:
        max_cg_iter = tuple(G.shape)[-1]
    shape = tuple(G.shape)
    corrected = method == "implicit_corrected"

    if method != "unrolled":
        if on_dev:
            k = _cuda()
            R3 = _device_batch(as_device_array(R), "R")
            G3 = _device_batch(as_device_array(G), "grad_R")
        else:
            k = _cpu()
            dtype = _float_dtype(R, G)
            R3 = _host_batch(R, dtype)
            G3 = _host_batch(G, dtype)
        return _implicit(k, R3, G3, corrected, max_cg_iter, cg_tol, shape, return_info,
                         dev, G)
    if on_dev:
        k = _cuda()
        X3 = _device_batch(as_device_array(X), "X")
        G3 = _device_batch(as_device_array(G), "grad_R")
    else:
        k = _cpu()
        dtype = _float_dtype(G, X)
        X3 = _host_batch(X, dtype)
        G3 = _host_batch(G, dtype)
    _check_values(k, X3, "X", False)
    _check_values(k, G3, "grad_R", False)
    dX3, iters = k.unrolled_backward(X3, G3, n_iter, tol_v)
    _check_result(k, dX3, _UNROLLED_OVERFLOW)
    out = _shaped(dX3, shape, G, dev)
    if return_info:
        return out, {"n_iters": _shaped(iters, shape[:-2], G, dev)}
    return out


def _shaped(x3, shape, like, dev):
    """A launcher's output x3 in the caller's ``shape`` (a device array of
    ``like``'s kind for device input)."""
    if dev == "cuda":
        return like_input(x3.reshape(*shape) if shape else x3.reshape(()), like)
    return x3 if x3.shape == shape else x3.reshape(shape)


def _implicit(k, R3, G3, corrected, max_cg_iter, cg_tol, shape, return_info, dev="cpu",
              like=None):
    """The implicit backward on backend ``k``: R3, G3 (B, n, n) C-contiguous,
    one float dtype; the result has ``shape`` and that dtype.  The launcher
    checks the values itself (on the CPU inside the kernel's read pass: see
    ``cpu._implicit_cg.any_nonfinite``, ``any_negative``); only a suspect
    result pays the exact counts, which raise the usual messages (else the
    overflow one)."""
    dX3, iters, relres, n_nonfinite, n_negative = k.implicit_backward(
        R3, G3, corrected, max_cg_iter, cg_tol)
    if n_nonfinite or n_negative:
        _check_values(k, R3, "R", True)
        _check_values(k, G3, "grad_R", False)
        raise ValueError(_OVERFLOW)
    out = dX3 if dX3.shape == shape and dev == "cpu" else _shaped(dX3, shape, like, dev)
    if return_info:
        return out, {"cg_iters": _shaped(iters, shape[:-2], like, dev),
                     "residual": _shaped(relres, shape[:-2], like, dev)}
    return out
