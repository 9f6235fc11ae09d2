"""Balanced entropic optimal transport (Sinkhorn), drop-in for ``ot.bregman``.

Every function here mirrors the POT 0.9.7 function of the same name [3]_: argument
order, keywords and defaults, returns, ``log`` keys, stopping rules and warning
texts.  Where numbaot deliberately differs:

* bad input raises a ``ValueError``/``TypeError`` naming the argument (POT
  returns garbage or fails deep inside);
* 2-D ``a`` of shape (dim_a, n_hists) together with 2-D ``b`` of shape
  (dim_b, n_hists) solves n_hists independent problems that share ``M``
  ("paired batches", which POT cannot do);
* arithmetic is carried out in float64 whatever the input dtype on the CPU;
  results are returned in the input dtype (float32 in, float32 out).

GPU: every function also takes CUDA device arrays (numba device arrays, CuPy
arrays: anything with ``__cuda_array_interface__``) for ``a``, ``b``, ``M``
(``[]``/None weights allowed) and then returns device arrays of the input
dtype (plans, vectors of losses, the arrays in ``log``; a single loss stays a
NumPy scalar).  ``sinkhorn_knopp`` and ``sinkhorn_log`` (and ``sinkhorn``,
``sinkhorn2`` with these methods) run on the CUDA kernels of
``numbaot.cuda.sinkhorn`` and compute in the input dtype;
``sinkhorn_stabilized``, ``sinkhorn_epsilon_scaling`` and ``greenkhorn`` copy
the inputs to the host, run there and copy the results back.  Mixing host
and device arrays raises ``TypeError``; without numba-cuda or a usable GPU,
``numbaot._dispatch.CudaUnavailableError`` (a ``RuntimeError``) names the fix
(``pip install 'numbaot[cuda]'``).

The problem solved is (Cuturi 2013 [1]_; Peyre & Cuturi 2019, eq. 4.2 [2]_)

    gamma = argmin_{gamma 1 = a, gamma^T 1 = b, gamma >= 0} <gamma, M>_F + reg * sum gamma log gamma,

whose solution is gamma = diag(u) K diag(v) with K = exp(-M / reg).

References
----------
.. [1] M. Cuturi, "Sinkhorn Distances: Lightspeed Computation of Optimal
   Transport", NeurIPS 2013.
.. [2] G. Peyre, M. Cuturi, "Computational Optimal Transport", Foundations
   and Trends in Machine Learning 11(5-6) 2019, eq. 4.2.
.. [3] POT 0.9.7, module ``ot.bregman`` (R. Flamary et al., "POT: Python
   Optimal Transport", JMLR 22(78) 2021).

Examples
--------
Replacing ``ot.bregman.sinkhorn`` by ``numbaot.bregman.sinkhorn`` changes
nothing but speed:

>>> import numpy as np
>>> import numbaot
>>> M = np.array([[0.0, 1.0], [1.0, 0.0]])
>>> print(np.round(numbaot.bregman.sinkhorn([0.5, 0.5], [0.5, 0.5], M, 1.0), 4))
[[0.3655 0.1345]
 [0.1345 0.3655]]
"""
from ._barycenter import (
    barycenter,
    barycenter_sinkhorn,
    barycenter_stabilized,
    convolutional_barycenter2d,
)
from ._empirical import empirical_sinkhorn, empirical_sinkhorn2, empirical_sinkhorn_divergence
from ._sinkhorn import greenkhorn, sinkhorn, sinkhorn2, sinkhorn_knopp, sinkhorn_log
from ._stabilized import sinkhorn_epsilon_scaling, sinkhorn_stabilized

__all__ = [
    "sinkhorn",
    "sinkhorn2",
    "sinkhorn_knopp",
    "sinkhorn_log",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
    "greenkhorn",
    "empirical_sinkhorn",
    "empirical_sinkhorn2",
    "empirical_sinkhorn_divergence",
    "barycenter",
    "barycenter_sinkhorn",
    "barycenter_stabilized",
    "convolutional_barycenter2d",
]
