"""``OTResult``: the result object of :func:`numbaot.solve` and
:func:`numbaot.solve_sample`, with the attribute names and meanings of POT
0.9.7's ``ot.utils.OTResult`` (no POT import: numbaot does not depend on POT).

Arrays keep the device of the solve: NumPy arrays for NumPy inputs, CUDA
device arrays (numba or CuPy, as the input) for device inputs; reductions of
a device plan (``marginal_a``, ``marginal_b``) run on the device.
"""
import numpy as np

from . import _dispatch

__all__ = ["OTResult"]

_POT_CITATION = """POT library:

            POT Python Optimal Transport library, Journal of Machine Learning Research, 22(78):1−8, 2021.
            Website: https://pythonot.github.io/
            Rémi Flamary, Nicolas Courty, Alexandre Gramfort, Mokhtar Z. Alaya, Aurélie Boisbunon, Stanislas Chambon, Laetitia Chapel, Adrien Corenflos, Kilian Fatras, Nemo Fournier, Léo Gautheron, Nathalie T.H. Gayraud, Hicham Janati, Alain Rakotomamonjy, Ievgen Redko, Antoine Rolet, Antony Schutz, Vivien Seguy, Danica J. Sutherland, Romain Tavenard, Alexander Tong, Titouan Vayer;

            @article{flamary2021pot,
              author  = {R{'e}mi Flamary and Nicolas Courty and Alexandre Gramfort and Mokhtar Z. Alaya and Aur{'e}lie Boisbunon and Stanislas Chambon and Laetitia Chapel and Adrien Corenflos and Kilian Fatras and Nemo Fournier and L{'e}o Gautheron and Nathalie T.H. Gayraud and Hicham Janati and Alain Rakotomamonjy and Ievgen Redko and Antoine Rolet and Antony Schutz and Vivien Seguy and Danica J. Sutherland and Romain Tavenard and Alexander Tong and Titouan Vayer},
              title   = {{POT}: {Python} {Optimal} {Transport}},
              journal = {Journal of Machine Learning Research},
              year    = {2021},
              volume  = {22},
              number  = {78},
              pages   = {1-8},
              url     = {http://jmlr.org/papers/v22/20-451.html}
            }
        """


def _is_cupy(x):
    return type(x).__module__.split(".")[0] == "cupy"


def _plan_sum(plan, axis):
    """Row (axis=1) or column (axis=0) sums of a dense plan, on its device."""
    if not _dispatch.is_device_array(plan):
        return np.sum(plan, axis)
    if _is_cupy(plan):
        return plan.sum(axis)
    from .cuda import barycenter as cuda_barycenter
    from .cuda import sinkhorn as cuda_sinkhorn
    from .cuda._launch import grid_problems, threads

    P = _dispatch.device_contiguous(_dispatch.as_device_array(plan), plan.dtype)
    out = _dispatch.require_cuda().device_array(P.shape[1 - axis], dtype=P.dtype)
    if axis == 1:
        cuda_sinkhorn.kernel("sum_rows", P.dtype)[grid_problems(P.shape[0]), threads()](P, out)
    else:
        cuda_barycenter.col_sums(P, out)
    return out


def _lazy_sum(lp, axis, batch_size, like):
    """Marginal of a lazy plan, reduced over blocks of ``batch_size`` rows
    (memory O(batch_size n_samples_b)); a device array when ``like`` is one."""
    n = lp.shape[0]
    bs = max(1, int(batch_size))
    parts = []
    total = None
    for i in range(0, n, bs):
        blk = np.asarray(lp[i:i + bs, :])
        if axis == 1:
            parts.append(blk.sum(1))
        else:
            s = blk.sum(0)
            total = s if total is None else total + s
    out = np.concatenate(parts) if axis == 1 else total
    if like is not None and _dispatch.is_device_array(like):
        return _dispatch.result_to_device(out, like)
    return out


class OTResult:
    """Result of an OT solve; mirrors ``ot.utils.OTResult`` of POT 0.9.7 [1]_.

    Parameters
    ----------
    potentials : tuple of 2 arrays, shapes (dim_a,), (dim_b,), float32 or float64, optional
        Dual potentials, i.e. Lagrange multipliers for the marginal
        constraints (for the entropic solvers: the log-scalings, dual
        potentials divided by ``reg``, as POT; for the "geomloss*" methods
        of :func:`numbaot.solve_sample` the potentials in units of the
        cost).  Stored as given: the solvers pass NumPy or device arrays of
        their result dtype (float32 for float32 inputs, else float64).
    value : float, optional
        Full transport cost, including possible regularization terms.
    value_linear : float, optional
        The linear part of the transport cost, <plan, M>_F.
    value_quad : float, optional
        The quadratic part of the transport cost (Gromov-Wasserstein; not
        computed by numbaot).
    plan : array-like, shape (dim_a, dim_b), float32 or float64, optional
        Transport plan (mass moved from source i to target j), encoded as a
        dense array: a NumPy array, or a device array for device solves;
        stored as given (the solvers' result dtype).
    log : dict, optional
        Dictionary containing potential information about the solver.
    backend : object, optional
        Accepted for compatibility with POT's signature; numbaot picks its
        array operations from the arrays themselves.
    sparse_plan : scipy.sparse matrix, shape (dim_a, dim_b), optional
        Transport plan, encoded as a sparse array (any dtype; its
        ``toarray()`` gives ``plan`` when no dense plan is given).
    lazy_plan : object, optional
        Transport plan, encoded as a lazy object sliceable as ``plan[i0:i1, :]``
        (numbaot's ``LazyPlan``, in place of POT's ``LazyTensor``, with its
        indexing, attributes and ``repr``; ``repr`` of the result names it
        ``LazyTensor`` too).
    status : int or str, optional
        Status of the solver.
    batch_size : int, default 100
        Rows per block when the marginals of ``lazy_plan`` are reduced.

    Attributes
    ----------
    potentials, potential_a, potential_b, value, value_linear, value_quad,
    plan, sparse_plan, lazy_plan, marginals, marginal_a, marginal_b, status,
    log, citation
        As POT: ``potential_a``/``potential_b`` are the two potentials;
        ``marginals`` = (``marginal_a``, ``marginal_b``), the row and column
        sums of the plan (of the lazy plan too, reduced block by block);
        ``None`` where the solver did not produce the quantity.
    a_to_b, b_to_a
        Raise ``NotImplementedError``, as POT.

    Raises
    ------
    NotImplementedError
        On access to ``a_to_b``/``b_to_a`` (as POT), and to ``sparse_plan`` of
        a numba CUDA device plan (no sparse device format without CuPy).

    References
    ----------
    .. [1] POT 0.9.7, ``ot.utils.OTResult`` (R. Flamary et al., "POT: Python
       Optimal Transport", JMLR 22(78) 2021).

    Examples
    --------
    >>> import numpy as np
    >>> from numbaot import OTResult
    >>> res = OTResult(plan=np.array([[0.5, 0.0], [0.25, 0.25]]), value=1.0)
    >>> res.marginal_a, res.marginal_b
    (array([0.5, 0.5]), array([0.75, 0.25]))
    >>> res.potentials is None
    True
    """

    def __init__(self, potentials=None, value=None, value_linear=None, value_quad=None,
                 plan=None, log=None, backend=None, sparse_plan=None, lazy_plan=None,
                 status=None, batch_size=100):
        self._potentials = potentials
        self._value = value
        self._value_linear = value_linear
        self._value_quad = value_quad
        self._plan = plan
        self._log = log
        self._backend = backend
        self._sparse_plan = sparse_plan
        self._lazy_plan = lazy_plan
        self._status = status
        self._batch_size = batch_size

    def __repr__(self):
        s = "OTResult("
        if self._value is not None:
            s += "value={},".format(self._value)
        if self._value_linear is not None:
            s += "value_linear={},".format(self._value_linear)
        if self._plan is not None:
            s += "plan={}(shape={}),".format(self._plan.__class__.__name__, self._plan.shape)
        if self._lazy_plan is not None:  # numbaot's LazyPlan by POT's name, LazyTensor
            name = getattr(type(self._lazy_plan), "_pot_class_name",
                           self._lazy_plan.__class__.__name__)
            s += "lazy_plan={}(shape={}),".format(name, self._lazy_plan.shape)
        if s[-1] != "(":
            s = s[:-1] + ")"
        else:
            s = s + ")"
        return s

    # Dual potentials --------------------------------------------
    @property
    def potentials(self):
        """Dual potentials (potential_a, potential_b), or None."""
        return self._potentials

    @property
    def potential_a(self):
        """First dual potential, associated to the "source" measure "a"."""
        return None if self._potentials is None else self._potentials[0]

    @property
    def potential_b(self):
        """Second dual potential, associated to the "target" measure "b"."""
        return None if self._potentials is None else self._potentials[1]

    # Transport plan -------------------------------------------
    @property
    def plan(self):
        """Transport plan, encoded as a dense array."""
        if self._plan is not None:
            return self._plan
        if self._sparse_plan is not None:
            sp = self._sparse_plan
            return sp.toarray() if hasattr(sp, "toarray") else sp
        return None

    @property
    def sparse_plan(self):
        """Transport plan, encoded as a sparse array (SciPy CSR for a NumPy plan)."""
        if self._sparse_plan is not None:
            return self._sparse_plan
        if self._plan is None:
            return None
        if _dispatch.is_device_array(self._plan):
            if _is_cupy(self._plan):
                import cupyx.scipy.sparse

                return cupyx.scipy.sparse.csr_matrix(self._plan)
            raise NotImplementedError(
                "sparse_plan of a numba CUDA device plan: there is no sparse device format "
                "without CuPy; use plan, or scipy.sparse.csr_matrix(plan.copy_to_host())")
        from scipy.sparse import csr_matrix

        return csr_matrix(self._plan)

    @property
    def lazy_plan(self):
        """Transport plan, encoded as a lazy (sliceable) object."""
        return self._lazy_plan

    # Loss values --------------------------------
    @property
    def value(self):
        """Full transport cost, including possible regularization terms."""
        return self._value

    @property
    def value_linear(self):
        """The linear part of the transport cost, <plan, M>_F."""
        return self._value_linear

    @property
    def value_quad(self):
        """The quadratic part of the transport cost (Gromov-Wasserstein)."""
        return self._value_quad

    # Marginal constraints -------------------------
    @property
    def marginals(self):
        """Marginals of the transport plan: should be very close to "a" and
        "b" for balanced OT."""
        if self._plan is not None:
            return self.marginal_a, self.marginal_b
        return None

    def _lazy_like(self):
        return None if self._potentials is None else self._potentials[0]

    @property
    def marginal_a(self):
        """First marginal of the transport plan, with the same shape as "a"."""
        if self._plan is not None:
            return _plan_sum(self._plan, 1)
        if self._lazy_plan is not None:
            return _lazy_sum(self._lazy_plan, 1, self._batch_size, self._lazy_like())
        return None

    @property
    def marginal_b(self):
        """Second marginal of the transport plan, with the same shape as "b"."""
        if self._plan is not None:
            return _plan_sum(self._plan, 0)
        if self._lazy_plan is not None:
            return _lazy_sum(self._lazy_plan, 0, self._batch_size, self._lazy_like())
        return None

    @property
    def status(self):
        """Optimization status of the solver."""
        return self._status

    @property
    def log(self):
        """Dictionary containing potential information about the solver."""
        return self._log

    # Barycentric mappings -------------------------
    @property
    def a_to_b(self):
        """Displacement vectors from the first to the second measure."""
        raise NotImplementedError()

    @property
    def b_to_a(self):
        """Displacement vectors from the second to the first measure."""
        raise NotImplementedError()

    # Miscellaneous --------------------------------
    @property
    def citation(self):
        """Appropriate citation(s) for this result, in plain text and BibTex formats."""
        return _POT_CITATION
