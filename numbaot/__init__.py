"""numbaot: fast Numba kernels for entropic optimal transport behind a NumPy API.

POT-compatible calls keep POT 0.9.7's names, signatures, defaults, returns,
``log`` keys and warnings (``ot.X`` -> ``numbaot.X`` changes nothing but
speed); bad input raises a clear ``ValueError``/``TypeError``.  Importing
numbaot compiles nothing and never touches a GPU driver.
"""
from . import bregman, utils
from .bregman import (
    barycenter,
    greenkhorn,
    sinkhorn,
    sinkhorn2,
    sinkhorn_epsilon_scaling,
    sinkhorn_knopp,
    sinkhorn_log,
    sinkhorn_stabilized,
)
from .utils import dist, unif
from . import gradients
from .gradients import empirical_sinkhorn2_value_and_grad, sinkhorn2_value_and_grad
from . import scan
from .scan import (
    discounted_cumsum_left,
    discounted_cumsum_left_backward,
    discounted_cumsum_right,
    discounted_cumsum_right_backward,
    gae,
)
from . import implicit
from .implicit import sinkhorn_operator, sinkhorn_operator_backward
from . import unbalanced
from .unbalanced import barycenter_unbalanced, sinkhorn_unbalanced, sinkhorn_unbalanced2
from ._warmup import warmup
from . import distributed  # imports mpi4py only when one of its functions is called
from . import partial
from . import solvers
from .solvers import OTResult, solve, solve_sample
from . import pot  # imports POT only when numbaot.pot.patch() runs

__version__ = "0.1.0"

__all__ = [
    "bregman",
    "utils",
    "sinkhorn",
    "sinkhorn2",
    "dist",
    "unif",
    # numbaot.bregman also exports these (POT keeps them in ot.bregman only)
    "sinkhorn_knopp",
    "sinkhorn_log",
    "sinkhorn_stabilized",
    "sinkhorn_epsilon_scaling",
    "greenkhorn",
    "barycenter",
    # gradients without autodiff (numbaot.gradients)
    "gradients",
    "sinkhorn2_value_and_grad",
    "empirical_sinkhorn2_value_and_grad",
    # discounted cumulative sums (numbaot.scan)
    "scan",
    "discounted_cumsum_right",
    "discounted_cumsum_left",
    "discounted_cumsum_right_backward",
    "discounted_cumsum_left_backward",
    "gae",
    # numbaot.implicit: the Sinkhorn operator on batches of small matrices
    "implicit",
    "sinkhorn_operator",
    "sinkhorn_operator_backward",
    # unbalanced OT (numbaot.unbalanced; POT has these top-level aliases)
    "unbalanced",
    "sinkhorn_unbalanced",
    "sinkhorn_unbalanced2",
    "barycenter_unbalanced",
    # ahead-of-time compilation (python -m numbaot warmup)
    "warmup",
    # MPI (mpi4py): solvers over row blocks on several processes
    "distributed",
    # entropic partial OT (numbaot.partial; POT keeps it in ot.partial only)
    "partial",
    # unified solvers (POT's ot.solve, ot.solve_sample) and their result object
    "solvers",
    "solve",
    "solve_sample",
    "OTResult",
    # run unchanged POT code on numbaot (numbaot.pot.patch())
    "pot",
]
