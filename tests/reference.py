"""Reference implementations (oracles) used by more than one test, defined once.

Each function is the plain-loop, SciPy or dense-NumPy version of something
numbaot computes, written from the textbook definition.  Nothing here imports
numbaot, and nothing here may: an oracle never shares code with what it
checks (DESIGN.md, section 4).  POT 0.9.7, the oracle of the POT-compatible
solvers, is imported by the tests themselves (``from _helpers import ot``).

The tests import these as ``from reference import ...`` (``tests/`` is on
``sys.path`` under pytest's default import mode, as for ``_helpers``).
"""
import numpy as np
from scipy.signal import lfilter
from scipy.special import logsumexp

__all__ = [
    # discounted cumulative sums and GAE (numbaot.scan)
    "lfilter_right", "lfilter_left", "loop_right", "loop_left", "loop_gae",
    # the Sinkhorn operator and its backward (numbaot.implicit)
    "ref_forward", "ref_forward_tol", "lstsq_grad", "batched_dense_grad", "fd_grad",
]


# ---------------------------------------------------------------------------
# discounted cumulative sums (numbaot.discounted_cumsum_right/left, numbaot.gae)
# ---------------------------------------------------------------------------
def lfilter_right(x, gamma):
    """Oracle of ``discounted_cumsum_right``: the right scan of every row of x
    (2-D, computed in float64) with per-row gammas, as the IIR filter
    y_t = x_t + gamma y_{t+1} (``scipy.signal.lfilter`` with b = [1],
    a = [1, -gamma]) on the reversed row.

    From tests/test_scan.py (``lfilter_right``) and tests/cuda/test_scan_cuda.py
    (``lfilter_rows(x, gamma, right=True)``)."""
    x = np.asarray(x, dtype=np.float64)
    return np.stack([lfilter([1.0], [1.0, -g], row[::-1])[::-1] for row, g in zip(x, gamma)])


def lfilter_left(x, gamma):
    """Oracle of ``discounted_cumsum_left``: y_t = x_t + gamma y_{t-1} on every
    row of x (2-D, float64) with per-row gammas, by ``scipy.signal.lfilter``.

    From tests/test_scan.py (``lfilter_left``) and tests/cuda/test_scan_cuda.py
    (``lfilter_rows(x, gamma, right=False)``)."""
    x = np.asarray(x, dtype=np.float64)
    return np.stack([lfilter([1.0], [1.0, -g], row) for row, g in zip(x, gamma)])


def loop_right(x, gamma, dones=None):
    """Oracle of ``discounted_cumsum_right`` with episode masks:
    y_t = x_t + gamma (1 - d_t) y_{t+1}, plain Python, float64.

    From tests/test_scan.py."""
    x = np.asarray(x, dtype=np.float64)
    y = np.zeros_like(x)
    for r in range(x.shape[0]):
        acc = 0.0
        for t in range(x.shape[1] - 1, -1, -1):
            keep = 1.0 if dones is None or not dones[r, t] else 0.0
            acc = x[r, t] + gamma[r] * keep * acc
            y[r, t] = acc
    return y


def loop_left(x, gamma, dones=None):
    """Oracle of ``discounted_cumsum_left`` with episode masks:
    y_t = x_t + gamma (1 - d_{t-1}) y_{t-1}, plain Python, float64.

    From tests/test_scan.py."""
    x = np.asarray(x, dtype=np.float64)
    y = np.zeros_like(x)
    for r in range(x.shape[0]):
        acc = 0.0
        for t in range(x.shape[1]):
            keep = 1.0 if t == 0 or dones is None or not dones[r, t - 1] else 0.0
            acc = x[r, t] + gamma[r] * keep * acc
            y[r, t] = acc
    return y


def loop_gae(rewards, values, dones, gamma, lam, last):
    """Oracle of ``numbaot.gae``: generalised advantage estimation by the
    textbook loop (as in CleanRL / SB3), float64; returns (advantages,
    returns).  ``values`` has at least N columns; ``last[r]`` bootstraps row r
    after its last step.

    From tests/test_scan.py."""
    B, N = rewards.shape
    adv = np.zeros((B, N))
    for r in range(B):
        a = 0.0
        for t in range(N - 1, -1, -1):
            v_next = values[r, t + 1] if t + 1 < N else last[r]
            nonterminal = 0.0 if dones[r, t] else 1.0
            delta = rewards[r, t] + gamma * nonterminal * v_next - values[r, t]
            a = delta + gamma * lam * nonterminal * a
            adv[r, t] = a
    return adv, adv + values[:, :N]


# ---------------------------------------------------------------------------
# the Sinkhorn operator (numbaot.sinkhorn_operator, sinkhorn_operator_backward)
# ---------------------------------------------------------------------------
def ref_forward(X, n_iter, r=None, c=None):
    """Oracle of ``sinkhorn_operator``: ``n_iter`` alternating row/column
    normalisations in the log domain (a SciPy ``logsumexp`` loop), float64;
    optional target row sums r and column sums c (default: ones).

    From tests/test_implicit.py and tests/cuda/test_implicit_cuda.py (the
    latter without r and c)."""
    X = np.asarray(X, dtype=np.float64)
    lr = 0.0 if r is None else np.log(r)
    lc = 0.0 if c is None else np.log(c)
    g = np.zeros(X.shape[:-1])
    for _ in range(n_iter):
        f = lr - logsumexp(X + g[..., None, :], axis=-1)
        g = lc - logsumexp(X + f[..., :, None], axis=-2)
    return np.exp(X + f[..., :, None] + g[..., None, :])


def ref_forward_tol(X, n_iter, tol):
    """Oracle of ``sinkhorn_operator`` with a stopping tolerance: per matrix,
    the iterate of the first K >= 1 with max_i |row sum - 1| < tol (or
    K = n_iter); returns (R, K).

    From tests/test_implicit.py."""
    X = np.asarray(X, dtype=np.float64)
    g = np.zeros(X.shape[:-1])
    R = np.empty_like(X)
    ks = np.zeros(X.shape[:-2], dtype=int)
    for K in range(1, n_iter + 1):
        f = -logsumexp(X + g[..., None, :], axis=-1)
        g = -logsumexp(X + f[..., :, None], axis=-2)
        RK = np.exp(X + f[..., :, None] + g[..., None, :])
        stop = (ks == 0) & ((np.abs(RK.sum(-1) - 1).max(-1) < tol) | (K == n_iter))
        R[stop] = RK[stop]
        ks[stop] = K
    return R, ks


def lstsq_grad(R, G, r=None, c=None):
    """Oracle of the implicit backward of one matrix: dL/dX = (G - u 1^T -
    1 v^T) * R with [u; v] the least-squares solution (``numpy.linalg.lstsq``)
    of [[diag(r), R], [R^T, diag(c)]] [u; v] = [(G*R) 1; (G*R)^T 1]
    (r, c default to ones).

    From tests/test_implicit.py and tests/cuda/test_implicit_cuda.py."""
    n = R.shape[0]
    r = np.ones(n) if r is None else r
    c = np.ones(n) if c is None else c
    H = G * R
    A = np.block([[np.diag(r), R], [R.T, np.diag(c)]])
    z = np.linalg.lstsq(A, np.r_[H.sum(1), H.sum(0)], rcond=None)[0]
    return (G - z[:n, None] - z[None, n:]) * R


def batched_dense_grad(R, G, corrected=False):
    """Oracle of the implicit backward of a whole batch: ``lstsq_grad`` for
    every matrix at once.  K = [[diag(r), R], [R^T, diag(c)]] + w w^T / (2n)
    with w = [1; -1] (the null vector of K for r = R 1, c = R^T 1, or of
    [[I, R], [R^T, I]] for a doubly-stochastic R) is non-singular and has the
    same solution on the complement of w (``numpy.linalg.solve``).

    From tests/test_implicit.py."""
    B, n, _ = R.shape
    if corrected:
        Dr = R.sum(2)[:, :, None] * np.eye(n)
        Dc = R.sum(1)[:, :, None] * np.eye(n)
    else:
        Dr = Dc = np.broadcast_to(np.eye(n), (B, n, n))
    A = np.concatenate([np.concatenate([Dr, R], 2),
                        np.concatenate([np.swapaxes(R, 1, 2), Dc], 2)], 1)
    w = np.r_[np.ones(n), -np.ones(n)]
    A = A + np.outer(w, w) / (2 * n)
    H = G * R
    z = np.linalg.solve(A, np.concatenate([H.sum(2), H.sum(1)], 1)[..., None])[..., 0]
    return (G - z[:, :n, None] - z[:, None, n:]) * R


def fd_grad(L, X, h=1e-5):
    """Oracle of every Sinkhorn-operator gradient: central finite differences
    of L(Y) = sum(G * S(Y)) at the matrix X (float64).  ``L`` maps a batch
    (k, n, n) of matrices to k values; all 2 n^2 perturbed matrices go in one
    batch.

    From tests/test_implicit.py."""
    X = np.asarray(X, dtype=np.float64)
    E = np.eye(X.size).reshape(X.size, *X.shape) * h
    vals = L(np.concatenate([X + E, X - E]))
    return ((vals[:X.size] - vals[X.size:]) / (2 * h)).reshape(X.shape)
