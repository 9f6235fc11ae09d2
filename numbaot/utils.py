"""Utilities mirroring ``ot.utils``: cost matrices and uniform histograms."""
import numpy as np

from . import _config
from ._checks import as_real_array

__all__ = ["dist", "unif", "euclidean_distances"]


def unif(n, type_as=None):
    r"""Uniform histogram of length ``n``; mirrors ``ot.utils.unif`` [1]_.

    Parameters
    ----------
    n : int
        Number of bins (>= 1).
    type_as : ndarray, optional
        The result takes this array's dtype (float64 when omitted).

    Returns
    -------
    h : ndarray, shape (n,)
        h_i = 1 / n (a histogram of total mass 1).  float64, or the dtype of
        ``type_as`` when that is a floating dtype (float32, float16, ...);
        an integer ``type_as`` gives float64.

    Raises
    ------
    TypeError
        If ``n`` is not an integer.
    ValueError
        If ``n`` < 1.

    References
    ----------
    .. [1] POT 0.9.7, ``ot.utils.unif`` (R. Flamary et al., "POT: Python
       Optimal Transport", JMLR 22(78) 2021).

    Examples
    --------
    >>> import numbaot
    >>> print(numbaot.unif(4))
    [0.25 0.25 0.25 0.25]
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer; got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    if type_as is None:
        return np.ones((n,)) / n
    return np.ones((n,), dtype=np.asarray(type_as).dtype) / n


def euclidean_distances(X, Y, squared=False):
    r"""Pairwise Euclidean distances between the rows of X and Y; mirrors
    ``ot.utils.euclidean_distances`` [1]_.

    float32 / float64 samples of at most ``_config.DIST_DIRECT_MAX_FEATURES``
    (64) features: the squared differences summed feature by feature in a
    compiled loop (``numbaot.cpu.empirical.cost_matrix``, rows in parallel),
    with no BLAS product (OpenBLAS's workers would keep spinning on the cores
    of the solver that follows); exact where POT's formula cancels (zero
    between equal points), so within POT's rounding of it.  Otherwise POT's
    formula: |x|^2 + |y|^2 - 2 x.y with NumPy, clipped at 0, exact zeros on
    the diagonal when ``X is Y``.

    Parameters
    ----------
    X : ndarray, shape (n_samples_1, n_features), float32 or float64
        First samples, one per row, coordinates in the units of the
        features.  A NumPy array (not a list; no conversion here); other
        real dtypes take NumPy's formula in NumPy's promotion (float16 in
        float16, integers in their integer dtype).
    Y : ndarray, shape (n_samples_2, n_features), float32 or float64
        Second samples, one per row, same features and rules as ``X``.
    squared : bool, default False
        Return squared distances.

    Returns
    -------
    distances : ndarray, shape (n_samples_1, n_samples_2)
        distances[i, j] = |X_i - Y_j| (|X_i - Y_j|^2 with ``squared=True``),
        in the units of the features (squared units with ``squared=True``).
        dtype: NumPy's promotion of X's and Y's (float32 for two float32
        inputs, float64 for float32 with float64); for integer samples the
        integer dtype with ``squared=True``, float64 otherwise.

    Raises
    ------
    ValueError
        From NumPy, when X and Y have different numbers of features (no
        validation here, as POT; :func:`dist` validates).
    AttributeError
        ``X`` or ``Y`` not an array (e.g. a list).

    References
    ----------
    .. [1] POT 0.9.7, ``ot.utils.euclidean_distances``.

    Examples
    --------
    >>> import numpy as np
    >>> from numbaot.utils import euclidean_distances
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> print(np.round(euclidean_distances(X, np.array([[0.0, 1.0], [2.0, 0.0]])), 4))
    [[1.     2.    ]
     [1.4142 1.    ]]
    """
    direct = _direct_distances(X, Y, squared)
    if direct is not None:
        return direct
    a2 = np.einsum("ij,ij->i", X, X)
    b2 = np.einsum("ij,ij->i", Y, Y)
    c = -2 * np.dot(X, Y.T)
    c += a2[:, None]
    c += b2[None, :]
    c = np.maximum(c, 0)
    if not squared:
        c = np.sqrt(c)
    if X is Y:
        c = c * (1 - np.eye(X.shape[0], dtype=c.dtype))
    return c


def _direct_distances(X, Y, squared):
    """The distances by ``numbaot.cpu.empirical.cost_matrix`` (the squared
    differences summed feature by feature, in the inputs' float dtype) for
    float32 / float64 samples of at most ``_config.DIST_DIRECT_MAX_FEATURES``
    features; None otherwise (NumPy's formula then).  No BLAS product: its
    workers would spin on the cores of the solver that follows."""
    if not (isinstance(X, np.ndarray) and isinstance(Y, np.ndarray)) or X.ndim != 2 \
            or Y.ndim != 2 or X.shape[1] != Y.shape[1] \
            or X.shape[1] > _config.DIST_DIRECT_MAX_FEATURES or X.shape[1] == 0:
        return None
    dt = np.result_type(X.dtype, Y.dtype)
    if dt not in (np.float32, np.float64):
        return None
    from .cpu.empirical import cost_matrix, cost_matrix_serial

    out = np.empty((X.shape[0], Y.shape[0]), dtype=dt)
    kernel = cost_matrix_serial if out.size <= _config.DIST_SERIAL_MAX_ENTRIES else cost_matrix
    kernel(np.ascontiguousarray(X, dtype=dt), np.ascontiguousarray(Y.T, dtype=dt),
           np.int64(0 if squared else 1), out)
    return out


def cdist(x1, x2, **kwargs):
    """:func:`scipy.spatial.distance.cdist`, imported on first use (keeps
    ``import numbaot`` light)."""
    from scipy.spatial.distance import cdist as _cdist

    return _cdist(x1, x2, **kwargs)


def dist(x1, x2=None, metric="sqeuclidean", p=2, w=None, backend="auto", nx=None,
         use_tensor=False):
    r"""Cost matrix between two sets of samples; mirrors ``ot.dist`` [1]_.

    Parameters
    ----------
    x1 : array-like, shape (n1, d), float32 or float64
        Source samples, one per row (coordinates in the units of the
        features).  Any real dtype is accepted (float16, integers; see
        Returns for the result's dtype).
    x2 : array-like, shape (n2, d), float32 or float64, optional
        Target samples (``x1`` when omitted), same rules.
    metric : str or callable, default 'sqeuclidean'
        'sqeuclidean' and 'euclidean' by :func:`euclidean_distances`
        (compiled for at most 64 features, else POT's formula);
        'cityblock', 'minkowski', 'cosine' and 'correlation' with NumPy
        exactly as POT does; any other metric is passed to
        :func:`scipy.spatial.distance.cdist`.
    p : float, default 2
        Exponent of the Minkowski metric.
    w : array-like, shape (d,), float32 or float64, optional
        Non-negative weights of the features in the Minkowski metric (and
        the metrics of SciPy that take weights); any real dtype, which
        enters NumPy's promotion of the result ('minkowski': float64 ``w``
        with float32 samples gives float64).
    backend : str, default 'auto'
        'scipy' forces :func:`scipy.spatial.distance.cdist` for every metric.
    nx, use_tensor
        Accepted for compatibility with POT; NumPy is the only backend here.

    Returns
    -------
    M : ndarray, shape (n1, n2)
        M[i, j] = metric(x1[i], x2[j]), in the units of the features
        (squared units for 'sqeuclidean').  dtype: for the NumPy-computed
        metrics NumPy's promotion of the samples (float32 in, float32 out;
        float16 in, float16 out; float32 with float64, float64), where
        integer samples give float64, except 'sqeuclidean', which keeps
        their integer dtype; float64 from SciPy.

    Raises
    ------
    TypeError
        Non-numeric, boolean, complex or masked samples.
    ValueError
        Samples that are not 2-D, or whose numbers of features differ; an
        unknown metric name (from SciPy's ``cdist``).

    References
    ----------
    .. [1] POT 0.9.7, ``ot.dist`` (``ot.utils.dist``).

    Examples
    --------
    >>> import numpy as np
    >>> import numbaot
    >>> x1 = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> x2 = np.array([[0.0, 1.0], [2.0, 0.0]])
    >>> print(numbaot.dist(x1, x2))  # squared Euclidean
    [[1. 4.]
     [2. 1.]]
    >>> print(numbaot.dist(x1, x2, metric="cityblock"))
    [[1. 2.]
     [2. 1.]]
    """
    x1 = as_real_array(x1, "x1")
    x2 = x1 if x2 is None else as_real_array(x2, "x2")
    for name, x in (("x1", x1), ("x2", x2)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {x.shape}")
    if x1.shape[1] != x2.shape[1]:
        raise ValueError(
            f"x1 and x2 must have the same number of features; got {x1.shape[1]} and {x2.shape[1]}"
        )
    if backend == "scipy":
        if isinstance(metric, str) and metric.endswith("minkowski"):
            return cdist(x1, x2, metric=metric, p=p, w=w)
        if w is not None:
            return cdist(x1, x2, metric=metric, w=w)
        return cdist(x1, x2, metric=metric)
    if metric == "sqeuclidean":
        return euclidean_distances(x1, x2, squared=True)
    if metric == "euclidean":
        return euclidean_distances(x1, x2, squared=False)
    if metric == "cityblock":
        if use_tensor:
            return np.sum(np.abs(x1[:, None, :] - x2[None, :, :]), axis=2)
        M = 0.0
        for i in range(x1.shape[1]):
            M += np.abs(x1[:, i][:, None] - x2[:, i][None, :])
        return M
    if metric == "minkowski":
        M = 0.0
        for i in range(x1.shape[1]):
            term = np.abs(x1[:, i][:, None] - x2[:, i][None, :]) ** p
            M += term if w is None else w[i] * term
        return M ** (1 / p)
    if metric in ("cosine", "correlation"):
        if metric == "correlation":
            x1 = x1 - np.mean(x1, axis=1)[:, None]
            x2 = x2 - np.mean(x2, axis=1)[:, None]
        n1 = np.sqrt(np.einsum("ij,ij->i", x1, x1))
        n2 = np.sqrt(np.einsum("ij,ij->i", x2, x2))
        return 1.0 - (np.dot(x1, x2.T) / n1[:, None] / n2[None, :])
    if isinstance(metric, str) and metric.endswith("minkowski"):
        return cdist(x1, x2, metric=metric, p=p, w=w)
    if w is not None and metric in ["minkowski", "wminkowski"]:
        return cdist(x1, x2, metric=metric, w=w)
    return cdist(x1, x2, metric=metric)
