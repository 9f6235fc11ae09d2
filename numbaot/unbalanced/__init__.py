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
  mismatches, NaN/inf data, negative weights, max|M| / reg > 2**52, a
  reference measure ``c`` with an all-zero row or column where the
  marginal has mass, ``reg_m = 0`` for 'sinkhorn_translation_invariant',
  barycentric weights not summing to 1, a histogram of zero mass in a
  barycenter), where POT returns NaN, zeros or raises ZeroDivisionError;
* 'sinkhorn_translation_invariant' warns "Numerical errors at iteration
  %s: the translation step overflowed ..." (and returns the previous
  iterate) where POT's translation overflows at huge ``reg_m / reg`` and
  returns a NaN plan silently;
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

Layout (as POT's ``ot.unbalanced``): ``_sinkhorn`` holds the kernel-backed
solvers (``sinkhorn_knopp_unbalanced``, ``sinkhorn_unbalanced_log``) and the
method dispatchers, which call the launchers of ``numbaot.cpu.unbalanced`` or
``numbaot.cuda.unbalanced`` (the same contract on both devices);
``_stabilized`` and ``_barycenter`` are NumPy ports of POT's host loops;
``_common`` holds the validated problem and the objective.

References
----------
.. [1] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard, "Scaling
   algorithms for unbalanced optimal transport problems", Mathematics of
   Computation 87(314), 2563-2609, 2018.
.. [2] C. Frogner, C. Zhang, H. Mobahi, M. Araya-Polo, T. Poggio, "Learning
   with a Wasserstein Loss", NeurIPS 2015.
.. [3] C. Sun, J. Hu, H. Jiang, "MAP-UOT: A Memory-Efficient Approach to
   Unbalanced Optimal Transport Implementation", arXiv:2412.11079 2024.
.. [4] POT 0.9.7, ``ot.unbalanced``.

Examples
--------
>>> import numpy as np
>>> import numbaot
>>> a, b = np.array([0.4, 0.6]), numbaot.unif(3)
>>> M = numbaot.dist(np.array([[0.0], [1.0]]), np.array([[0.0], [0.5], [1.0]]))
>>> G = numbaot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, 1.0)
>>> print(np.round(G.sum(axis=1), 4))  # row marginals, relaxed from a
[0.3897 0.5505]
"""
from ._barycenter import (
    barycenter_unbalanced,
    barycenter_unbalanced_sinkhorn,
    barycenter_unbalanced_stabilized,
)
from ._sinkhorn import (
    sinkhorn_knopp_unbalanced,
    sinkhorn_unbalanced,
    sinkhorn_unbalanced2,
    sinkhorn_unbalanced_log,
)
from ._stabilized import sinkhorn_stabilized_unbalanced, sinkhorn_unbalanced_translation_invariant

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
