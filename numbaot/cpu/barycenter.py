"""CPU launchers and kernels of the entropic barycenters, batched over the
histograms: the same launchers (names, constructor signatures, returns) as
``numbaot.cuda.barycenter``, computed in float64.

* ``KnoppBaryState`` / ``knopp_bary_step`` / ``knopp_bary_result``:
  multiplicative Bregman projections (``barycenter_sinkhorn``), one fused
  sweep over the Gibbs kernel per iteration for all histograms
  (``numbaot.cpu.sinkhorn.knopp_fused_pass``);
* ``LogBaryState`` / ``log_bary_step`` / ``log_bary_result``: the log
  domain (POT's ``_barycenter_sinkhorn_log``), one fused sweep over M
  (``numbaot.cpu.sinkhorn.log_fused_pass``);
* ``ConvBaryState`` / ``conv_bary_step`` / ``conv_bary_result`` /
  ``conv_bary_scalings``: the multiplicative convolutional barycenter
  (separable Gibbs kernel, BLAS matrix products).

A state's constructor takes host float64 arrays (the CUDA one copies them to
the device); a step makes one iteration and returns POT's error when asked;
the result accessors take the result dtype (float32 or float64) and return
host arrays of it (device arrays on CUDA, where the state computes in it).
Host only (no CUDA counterpart): ``LogConvBaryState`` / ``log_conv_bary_step``
/ ``log_conv_bary_result``, the log-domain convolutional barycenter on the
separable log-domain convolution kernel ``log_convolve2d``, and
``geometric_bar`` (POT's geometricBar, also used by the stabilized
barycenter).  POT's control flow (stopping tests, log, warnings) is
``numbaot._loops.periodic_loop``, shared by both devices.
"""
import math

import numba
import numpy as np
from numba import njit, prange

from .. import _config
from .._config import JIT_OPTIONS
from .._dispatch import threads_at_most
from . import chunk_layout
from . import _small as cpu_small
from . import sinkhorn as cpu_sinkhorn
from ._math import fast_exp_ftz

__all__ = ["log_convolve2d", "geometric_bar", "KnoppBaryState", "knopp_bary_step",
           "knopp_bary_result", "LogBaryState", "log_bary_step", "log_bary_result",
           "ConvBaryState", "conv_bary_step", "conv_bary_result", "conv_bary_scalings",
           "LogConvBaryState", "log_conv_bary_step", "log_conv_bary_result"]

_PAR = dict(JIT_OPTIONS, parallel=True)


@njit(**_PAR)
def log_convolve2d(M1, M2, img, tmp, out):
    """out = log(K1 exp(img) K2^T) with K1 = exp(M1), K2 = exp(M2), in the log
    domain, max-shifted:

    tmp[i, l] = LSE_j (M1[i, j] + img[j, l])   (columns: vectorised over l)
    out[i, l] = LSE_j (M2[l, j] + tmp[i, j])   (rows)

    M1 (W, W), M2 (H, H), img/tmp/out (W, H), float64.
    """
    W, H = img.shape
    for i in prange(W):
        mx = np.full(H, -np.inf)
        s = np.zeros(H)
        for j in range(W):
            mij = M1[i, j]
            for l in range(H):
                mx[l] = max(mx[l], mij + img[j, l])
        for j in range(W):
            mij = M1[i, j]
            for l in range(H):
                if mx[l] > -np.inf:
                    s[l] += fast_exp_ftz(mij + img[j, l] - mx[l])
        for l in range(H):
            tmp[i, l] = mx[l] + math.log(s[l]) if mx[l] > -np.inf else -np.inf
    for i in prange(W):
        for l in range(H):
            m = -np.inf
            for j in range(H):
                m = max(m, M2[l, j] + tmp[i, j])
            if m == -np.inf:
                out[i, l] = -np.inf
                continue
            acc = 0.0
            for j in range(H):
                acc += fast_exp_ftz(M2[l, j] + tmp[i, j] - m)
            out[i, l] = m + math.log(acc)


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cuda.barycenter
# --------------------------------------------------------------------------
# The host-side products below are ``np.einsum`` loops, not BLAS (``@``):
# OpenBLAS runs a product of 10 000 entries or more on its thread pool, whose
# workers then spin for about 0.1 s on the cores of the parallel kernels of
# the next iterations (the start's K @ (A / K^T 1) made a 512^2 barycenter of
# three histograms 4.8x slower than with BLAS on one thread).
def geometric_bar(w, X):
    """exp(sum_k w_k log X[:, k]) (POT's geometricBar), X (dim, n_hists)."""
    with np.errstate(divide="ignore"):
        return np.exp(np.einsum("jk,k->j", np.log(X), w))


class KnoppBaryState:
    """State of the multiplicative barycenter iterations on the CPU (float64).

    Parameters
    ----------
    M : ndarray (dim, dim), float64, C order
        Cost matrix; the Gibbs kernel K = exp(c M) is formed once.
    c : float
        -1 / reg.
    A : ndarray (dim, n_hists), float64
        The histograms (validated).
    w : ndarray (n_hists,), float64
        Barycentric weights.

    The start is POT's: UKv = K (A / K^T 1), u = geometricMean(UKv) / UKv.
    The scalings u are problem-major (n_hists, dim).
    """

    def __init__(self, M, c, A, w):
        dim, H = A.shape
        self.w = w
        # small (``_config.SMALL_MAX_ENTRIES``, as the dense solvers): every
        # kernel on the calling thread (no parallel region; the iterations'
        # pass is numbaot.cpu._small's tight loop)
        self.small = dim * dim * H <= _config.SMALL_MAX_ENTRIES
        self.n_chunks, self.chunk_rows = chunk_layout(dim, H, dim, memory_bound=True)
        self.Kmat = np.empty((dim, dim))
        if self.small:
            cpu_sinkhorn.gibbs_kernel_serial(M, c, np.zeros(dim), np.zeros(dim), self.Kmat)
            col_sums = self.Kmat.sum(0)
        else:
            # K and K^T 1 in one parallel pass (the blocked Knopp solver's:
            # ``sinkhorn.knopp_prepare_chunk`` through ``knopp_pass_at``)
            ones = np.ones((1, dim))
            Q1 = np.empty((self.n_chunks, 1, dim))
            q1 = np.empty((1, dim))
            cpu_sinkhorn.knopp_pass_at(
                cpu_sinkhorn.knopp_prepare_address(M, self.Kmat, ones, ones, Q1, ones),
                numba.get_num_threads(), M, np.float64(c), self.Kmat, ones, ones,
                self.n_chunks, self.chunk_rows, Q1, ones, q1)
            col_sums = q1[0]
        self.AT = np.ascontiguousarray(A.T)
        with np.errstate(divide="ignore", invalid="ignore"):
            UKv = np.einsum("ij,kj->ik", self.Kmat, A.T / col_sums)  # K (A / K^T 1)
            gm = np.exp(np.mean(np.log(UKv), axis=1))
            self.u = np.ascontiguousarray((gm / UKv.T))
        self.UKvT = UKv.T
        self.Q = np.empty((self.n_chunks, H, dim))
        self.q = np.empty((H, dim))
        self.unew = np.empty((H, dim))


def knopp_bary_step(st, want_err):
    """One multiplicative iteration for all histograms: UKv_k = u_k *
    K^T (A_k / K u_k) (one fused sweep over K), u_k <- u_k bar / UKv_k with
    bar = geometricBar(w, UKv).  Returns POT's error sum_j std_k UKv[k, j]
    when ``want_err``, else None."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if st.small:
            cpu_small.knopp_small_pass(st.Kmat, st.AT, st.u, st.unew, st.q)
        else:
            # one thread per chunk (no thread woken to find no work)
            with threads_at_most(st.n_chunks):
                cpu_sinkhorn.knopp_fused_pass(st.Kmat, st.AT, st.u, st.n_chunks,
                                              st.chunk_rows, st.Q, st.unew, st.q)
        UKvT = st.u * st.q
        bar = geometric_bar(st.w, UKvT.T)
        st.u = np.ascontiguousarray(st.u * bar[None, :] / UKvT)
    st.UKvT = UKvT
    return np.sum(np.std(UKvT.T, axis=1)) if want_err else None


def knopp_bary_result(st, dtype):
    """The barycenter geometricBar(w, UKv) of the last iteration (of the
    start when none ran), host array (dim,) of the result dtype ``dtype``."""
    return geometric_bar(st.w, np.asarray(st.UKvT).T).astype(dtype)


class LogBaryState:
    """State of the log-domain barycenter iterations on the CPU (float64):
    ``M`` (dim, dim) float64 C order, ``c`` = -1/reg, ``A`` (dim, n_hists)
    and ``w`` (n_hists,) float64; G = 0 and log_bar = 0 at the start (POT)."""

    def __init__(self, M, c, A, w):
        dim, H = A.shape
        self.M, self.c, self.w = M, c, w
        self.logA = np.ascontiguousarray(np.log(A + 1e-16).T)  # (H, dim)
        self.G_old = np.zeros((H, dim))
        self.f = np.zeros((H, dim))
        self.q = np.empty((H, dim))
        self.n_chunks, self.chunk_rows = chunk_layout(dim, H, dim)
        self.Q = np.empty((self.n_chunks, H, dim))
        self.active = np.ones(H, dtype=np.bool_)
        self.lse = np.empty((H, dim))
        self.G = np.zeros((H, dim))
        self.shift_ok = False
        self.dv = np.zeros(H)
        self.log_bar = np.zeros(dim)
        self.chunk_address = None   # ``log_chunk_address``, made on the first step
        self.no_plan = np.empty((0, 0), M.dtype)   # (``log_fused_pass`` forms no plan)


def log_bary_step(st, want_err):
    """One log-domain iteration for all histograms (one fused sweep over M):
    f_k = log A_k - LSE_j(c M_ij + G_kj), log KU_k = LSE_i(c M_ij + f_ki),
    log_bar = sum_k w_k log KU_k, G_k <- log_bar - log KU_k.  Returns POT's
    error sum_j std_k exp(G + log KU)[k, j] (G before the update) when
    ``want_err``, else None."""
    G = st.G
    if st.shift_ok:
        st.dv = np.max(G - st.G_old, axis=1)
    if st.chunk_address is None:
        # G is replaced each step, always by a C-contiguous float64 (H, dim)
        # array: the same type, so the address stays valid (``call_at``
        # does not check the types it passes)
        st.chunk_address = cpu_sinkhorn.log_chunk_address(st.M, st.logA, G, st.active, st.Q, st.f)
    cpu_sinkhorn.log_fused_pass(st.chunk_address, numba.get_num_threads(), st.M, st.c, st.logA,
                                G, st.shift_ok, st.dv, st.active, st.n_chunks, st.chunk_rows,
                                st.Q, st.f, st.q, st.no_plan)
    st.shift_ok = True
    st.G_old[:, :] = G
    if np.all(st.q > 1e-290):
        log_KU = np.log(st.q) - G
    else:  # some column sums underflowed: the safe tiled column logsumexp
        cpu_sinkhorn.log_col_lse(st.M, st.c, st.f, st.n_chunks, st.chunk_rows, st.lse)
        log_KU = st.lse.copy()
    log_bar = np.einsum("k,kj->j", st.w, log_KU)
    st.log_bar = log_bar
    err = np.exp(G + log_KU).std(axis=0).sum() if want_err else None
    st.G = np.ascontiguousarray(log_bar[None, :] - log_KU)
    return err


def log_bary_result(st, dtype):
    """The barycenter exp(log_bar), host array (dim,) of the result dtype."""
    return np.exp(st.log_bar).astype(dtype)


class ConvBaryState:
    """State of the multiplicative convolutional barycenter on the CPU
    (float64): ``A`` (n_hists, W, H) images, ``K1`` (W, W), ``K2`` (H, H)
    the 1-D Gibbs kernels, ``w`` (n_hists,), ``stab`` POT's ``stabThr``.
    POT's start: bar = 1 / (W H), U = V = 1, KU = K(U), with
    K(X)_h = K1 X_h K2^T (BLAS matrix products)."""

    def __init__(self, A, K1, K2, w, stab):
        n, W, H = A.shape
        self.A, self.K1, self.K2, self.w, self.stab = A, K1, K2, w, stab
        self.bar = np.ones((W, H)) / (W * H)
        self.U = np.ones(A.shape)
        self.V = np.ones(A.shape)
        self.KU = self.conv(self.U)

    def conv(self, imgs):
        return np.matmul(np.matmul(self.K1, imgs), self.K2.T)


def conv_bary_step(st, want_err):
    """One iteration (POT order): V = bar / KU, KV = K(V), U = A / KV,
    KU = K(U), bar = exp(sum_h w_h log(KU_h + stabThr)); returns POT's error
    sum_p std_h (V KU)[h, p] when ``want_err``, else None."""
    with np.errstate(divide="ignore", invalid="ignore"):
        st.V = st.bar[None] / st.KU
        KV = st.conv(st.V)
        st.U = st.A / KV
        st.KU = st.conv(st.U)
        st.bar = np.exp(np.sum(st.w[:, None, None] * np.log(st.KU + st.stab), axis=0))
    return np.sum(np.std(st.V * st.KU, axis=0)) if want_err else None


def conv_bary_result(st, dtype):
    """The barycenter image, host array (W, H) of the result dtype."""
    return st.bar.astype(dtype)


def conv_bary_scalings(st, dtype):
    """(U, V), host arrays (n_hists, W, H) of the result dtype (POT's log
    'U', 'V')."""
    U = st.U.astype(dtype)
    V = st.V.astype(dtype)
    return U, V


# --------------------------------------------------------------------------
# Host-only launchers (no CUDA counterpart: numbaot.bregman runs them on
# host copies of device inputs)
# --------------------------------------------------------------------------
class LogConvBaryState:
    """State of the log-domain convolutional barycenter (float64): ``A``
    (n_hists, W, H) images, ``M1`` (W, W), ``M2`` (H, H) the 1-D log-kernels
    -(t_i - t_j)^2 / reg, ``w`` (n_hists,), ``stab`` POT's ``stabThr``
    (log A = log(A + stabThr)).  G = 0 and log_bar = 0 at the start (POT)."""

    def __init__(self, A, M1, M2, w, stab):
        n, W, H = A.shape
        self.M1, self.M2 = np.ascontiguousarray(M1), np.ascontiguousarray(M2)
        self.w = w
        self.tmp = np.empty((W, H))
        self.logA = np.log(A + stab)
        self.log_KU = np.zeros(A.shape)
        self.lc = np.empty((W, H))
        self.G = np.zeros(A.shape)
        self.log_bar = np.zeros((W, H))

    def log_conv(self, img, out):
        """out = log(K1 exp(img) K2^T)."""
        log_convolve2d(self.M1, self.M2, img, self.tmp, out)


def log_conv_bary_step(st, want_err):
    """One log-domain iteration (POT order, image by image): f_h = log A_h -
    logconv(G_h), log KU_h = logconv(f_h), log_bar = sum_h w_h log KU_h,
    G_h <- log_bar - log KU_h.  Returns POT's error sum_p std_h exp(G +
    log KU)[h, p] (G before the update) when ``want_err``, else None."""
    G = st.G
    W, H = st.log_bar.shape
    log_bar = np.zeros((W, H))
    for k in range(G.shape[0]):
        st.log_conv(np.ascontiguousarray(G[k]), st.lc)
        f = st.logA[k] - st.lc
        st.log_conv(np.ascontiguousarray(f), st.log_KU[k])
        log_bar = log_bar + st.w[k] * st.log_KU[k]
    st.log_bar = log_bar
    err = np.exp(G + st.log_KU).std(axis=0).sum() if want_err else None
    st.G = log_bar[None, :, :] - st.log_KU
    return err


def log_conv_bary_result(st, dtype):
    """The barycenter image exp(log_bar), host array (W, H) of the result dtype."""
    return np.exp(st.log_bar).astype(dtype)


#: The launcher contract shared with numbaot.cuda.barycenter (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("KnoppBaryState", "knopp_bary_step", "knopp_bary_result", "LogBaryState",
             "log_bary_step", "log_bary_result", "ConvBaryState", "conv_bary_step",
             "conv_bary_result", "conv_bary_scalings")
