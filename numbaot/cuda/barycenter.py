"""CUDA launchers and kernels of the entropic barycenters (``numbaot.bregman``'s
barycenters on device arrays), batched over the histograms.  The launchers
(``KnoppBaryState``, ``knopp_bary_step``, ``knopp_bary_result``, their
``log_`` and ``conv_`` counterparts and ``conv_bary_scalings``) have the same
names, constructor signatures and returns as ``numbaot.cpu.barycenter``:
the states take the cost ``M`` (or the images ``A``) as a device array, whose
dtype is the computation's, and the other inputs as host float64 arrays.

Layout as in ``numbaot.cuda.sinkhorn``: the cost ``M`` (or the Gibbs kernel
``Kmat``), shape (dim, dim), C order, only read; per-histogram vectors are
problem-major (n_hists, dim) device arrays.  The half-steps that treat every
histogram alike reuse the balanced Sinkhorn kernels with the histograms on
the grid's problem axis (one launch for all columns of ``A``):

* multiplicative (``barycenter_sinkhorn``, Benamou et al. 2015, eq. (12)):
  ``knopp_row_update`` gives A_k / (K u_k) and ``knopp_col_partial`` the
  chunked K^T of it; ``bary_knopp_finish`` (this module) merges the chunks,
  forms UKv_k = u_k * K^T(A_k / K u_k), the weighted geometric mean
  bar = exp(sum_k w_k log UKv_k) and the update u_k <- u_k bar / UKv_k;
* log domain (POT's ``_barycenter_sinkhorn_log``): ``log_row_lse`` gives
  f_k = log A_k - LSE_j(c M_ij + G_kj), ``log_col_partial`` the chunked
  column (max, scaled sum) pairs of c M_ij + f_ki; ``bary_log_finish``
  merges them into log KU_k, forms log_bar = sum_k w_k log KU_k and
  G_k <- log_bar - log KU_k.

``convolutional_barycenter2d`` (multiplicative, Solomon et al. 2015,
Alg. 2): the separable Gibbs kernel is applied to all images at once by
``conv_left`` (K1 X_h) and ``conv_right`` (X_h K2^T), a thread per output
pixel and images on the grid's z axis (the 1-D kernels are small and stay
in cache); ``bar_over``, ``ratio`` and ``conv_bar`` are the elementwise
steps and the weighted geometric mean over the images.

The two ``*_finish`` kernels run one thread per bin j looping over the
histograms (the coupling between histograms is the weighted sum over k);
consecutive threads read consecutive bins of a (n_hists, dim) array:
coalesced.  On stopping-test iterations they also write the per-bin
standard deviation across histograms (POT's error: its sum over bins), so
the host reads dim numbers per test, nothing per iteration.  Kernels are
built per dtype (float32 problems compute in float32).
"""
import math

import numpy as np
import numba
from numba import cuda

from .. import _config
from ._launch import col_launch, col_layout, grid_problems, per_dtype, threads
from ._reduce import make_reductions
from ._registry import kernel
from . import sinkhorn as cuda_sinkhorn

__all__ = ["col_sums", "matvec_rows", "geometric_scale", "exp_vec", "KnoppBaryState",
           "knopp_bary_step", "knopp_bary_result", "LogBaryState", "log_bary_step",
           "log_bary_result", "ConvBaryState", "conv_bary_step", "conv_bary_result",
           "conv_bary_scalings"]


def _build(dt):
    T = numba.from_dtype(np.dtype(dt))
    tag = str(T)
    ZERO = dt(0.0)
    ONE = dt(1.0)
    NINF = dt(-np.inf)
    A1 = f"{T}[::1]"
    A2 = f"{T}[:, ::1]"
    A3 = f"{T}[:, :, ::1]"
    R = make_reductions(dt)
    block_sum, lse_merge = R.block_sum, R.lse_merge

    @kernel([f"void({A2}, {A1})"], tag=tag)
    def col_sums(Kmat, out):
        """out[j] = sum_i K[i, j]; a thread per column, rows in memory order."""
        j = cuda.grid(1)
        if j < Kmat.shape[1]:
            s = ZERO
            for i in range(Kmat.shape[0]):
                s += Kmat[i, j]
            out[j] = s

    @kernel([f"void({A2}, {A2}, {A2})"], warp_shuffle=True, tag=tag)
    def matvec_rows(Kmat, X, out):
        """out[k, i] = sum_j K[i, j] X[k, j]; block per (i, k)."""
        ss = cuda.shared.array(32, dtype=T)
        i = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        for k in range(cuda.blockIdx.y, X.shape[0], cuda.gridDim.y):
            s = ZERO
            for j in range(tid, Kmat.shape[1], cuda.blockDim.x):
                s += Kmat[i, j] * X[k, j]
            s = block_sum(s, ss)
            if tid == 0:
                out[k, i] = s

    @kernel([f"void({A2}, {A1}, {A2}, {A1})"], tag=tag)
    def geometric_scale(ukv, w, u, bar):
        """bar[j] = exp(sum_k w_k log ukv[k, j]) (POT's geometricBar) and
        u[k, j] <- u[k, j] * bar[j] / ukv[k, j]; a thread per bin."""
        j = cuda.grid(1)
        if j < ukv.shape[1]:
            lb = ZERO
            for k in range(ukv.shape[0]):
                lb += w[k] * math.log(ukv[k, j])
            b = math.exp(lb)
            bar[j] = b
            for k in range(ukv.shape[0]):
                u[k, j] = u[k, j] * b / ukv[k, j]

    @kernel([f"void({A3}, {A2}, {A1}, {A2}, {A1}, {A1}, int64)"], hot=True, tag=tag)
    def bary_knopp_finish(P, u, w, ukv, bar, errcol, want_err):
        """One bin j per thread, all histograms k: q = sum of the chunk
        partials P[k, :, j] (K^T (A_k / K u_k))_j, ukv[k, j] = u[k, j] q,
        bar[j] = exp(sum_k w_k log ukv[k, j]), u[k, j] <- u[k, j] bar[j] /
        ukv[k, j]; with ``want_err`` errcol[j] = std_k ukv[k, j] (ddof 0)."""
        j = cuda.grid(1)
        if j >= u.shape[1]:
            return
        H = u.shape[0]
        lb = ZERO
        for k in range(H):
            s = P[k, 0, j]
            for ch in range(1, P.shape[1]):
                s += P[k, ch, j]
            x = u[k, j] * s
            ukv[k, j] = x
            lb += w[k] * math.log(x)
        b = math.exp(lb)
        bar[j] = b
        for k in range(H):
            u[k, j] = u[k, j] * b / ukv[k, j]
        if want_err != 0:
            mean = ZERO
            cnt = ZERO  # H in the dtype (an int64 divisor would promote float32 to float64)
            for k in range(H):
                mean += ukv[k, j]
                cnt += ONE
            mean /= cnt
            var = ZERO
            for k in range(H):
                d = ukv[k, j] - mean
                var += d * d
            errcol[j] = math.sqrt(var / cnt)

    @kernel([f"void({A3}, {A3}, {A2}, {A1}, {A2}, {A1}, {A1}, int64)"], hot=True, tag=tag)
    def bary_log_finish(PM, PS, G, w, logku, logbar, errcol, want_err):
        """One bin j per thread, all histograms k: logku[k, j] = LSE_i(c M_ij
        + f_ki) from the chunk pairs (chunk order), logbar[j] = sum_k w_k
        logku[k, j]; with ``want_err`` errcol[j] = std_k exp(G[k, j] +
        logku[k, j]) (POT's error, with G before the update); then
        G[k, j] <- logbar[j] - logku[k, j]."""
        j = cuda.grid(1)
        if j >= G.shape[1]:
            return
        H = G.shape[0]
        lb = ZERO
        for k in range(H):
            m = PM[k, 0, j]
            s = PS[k, 0, j]
            for ch in range(1, PM.shape[1]):
                m, s = lse_merge(m, s, PM[k, ch, j], PS[k, ch, j])
            lse = m + math.log(s) if m > NINF else NINF
            logku[k, j] = lse
            lb += w[k] * lse
        logbar[j] = lb
        if want_err != 0:
            mean = ZERO
            cnt = ZERO
            for k in range(H):
                mean += math.exp(G[k, j] + logku[k, j])
                cnt += ONE
            mean /= cnt
            var = ZERO
            for k in range(H):
                d = math.exp(G[k, j] + logku[k, j]) - mean
                var += d * d
            errcol[j] = math.sqrt(var / cnt)
        for k in range(H):
            G[k, j] = lb - logku[k, j]

    @kernel([f"void({A1}, {A1})"], tag=tag)
    def exp_vec(x, out):
        """out = exp(x)."""
        j = cuda.grid(1)
        if j < x.shape[0]:
            out[j] = math.exp(x[j])

    # ------------------------------------------------------------------
    # convolutional barycenter (multiplicative): images (n_hists, W, H)
    # ------------------------------------------------------------------
    @kernel([f"void({A2}, {A3}, {A3})"], hot=True, tag=tag)
    def conv_left(K1, X, out):
        """out[h, i, l] = sum_j K1[i, j] X[h, j, l] (K1 X_h); a thread per
        (i, l), consecutive threads on consecutive l (coalesced), images on
        the grid's z axis."""
        l, i = cuda.grid(2)
        if i < out.shape[1] and l < out.shape[2]:
            for h in range(cuda.blockIdx.z, X.shape[0], cuda.gridDim.z):
                s = ZERO
                for j in range(K1.shape[1]):
                    s += K1[i, j] * X[h, j, l]
                out[h, i, l] = s

    @kernel([f"void({A3}, {A2}, {A3})"], hot=True, tag=tag)
    def conv_right(X, K2, out):
        """out[h, i, l] = sum_j X[h, i, j] K2[l, j] (X_h K2^T)."""
        l, i = cuda.grid(2)
        if i < out.shape[1] and l < out.shape[2]:
            for h in range(cuda.blockIdx.z, X.shape[0], cuda.gridDim.z):
                s = ZERO
                for j in range(K2.shape[1]):
                    s += X[h, i, j] * K2[l, j]
                out[h, i, l] = s

    @kernel([f"void({A1}, {A2}, {A2})"], hot=True, tag=tag)
    def bar_over(bar, KU, V):
        """V[h, p] = bar[p] / KU[h, p] (pixels p flattened)."""
        p = cuda.grid(1)
        if p < V.shape[1]:
            for h in range(V.shape[0]):
                V[h, p] = bar[p] / KU[h, p]

    @kernel([f"void({A2}, {A2}, {A2})"], hot=True, tag=tag)
    def ratio(A, KV, U):
        """U[h, p] = A[h, p] / KV[h, p]."""
        p = cuda.grid(1)
        if p < U.shape[1]:
            for h in range(U.shape[0]):
                U[h, p] = A[h, p] / KV[h, p]

    @kernel([f"void({A2}, {A2}, {A1}, {T}, {A1}, {A1}, int64)"], hot=True, tag=tag)
    def conv_bar(KU, V, w, stab, bar, errcol, want_err):
        """bar[p] = exp(sum_h w_h log(KU[h, p] + stab)); with ``want_err``
        errcol[p] = std_h (V[h, p] KU[h, p]) (ddof 0)."""
        p = cuda.grid(1)
        if p >= KU.shape[1]:
            return
        H = KU.shape[0]
        lb = ZERO
        for h in range(H):
            lb += w[h] * math.log(KU[h, p] + stab)
        bar[p] = math.exp(lb)
        if want_err != 0:
            mean = ZERO
            cnt = ZERO
            for h in range(H):
                mean += V[h, p] * KU[h, p]
                cnt += ONE
            mean /= cnt
            var = ZERO
            for h in range(H):
                d = V[h, p] * KU[h, p] - mean
                var += d * d
            errcol[p] = math.sqrt(var / cnt)

    return dict(col_sums=col_sums, matvec_rows=matvec_rows, geometric_scale=geometric_scale,
                bary_knopp_finish=bary_knopp_finish, bary_log_finish=bary_log_finish,
                exp_vec=exp_vec, conv_left=conv_left, conv_right=conv_right,
                bar_over=bar_over, ratio=ratio, conv_bar=conv_bar)


_k = per_dtype(_build)


def _vec(n):
    t = threads()
    return (n + t - 1) // t, t


# --------------------------------------------------------------------------
# host launchers
# --------------------------------------------------------------------------
def col_sums(Kmat, out):
    """out = K^T 1 (device arrays)."""
    g, t = _vec(Kmat.shape[1])
    _k("col_sums", Kmat.dtype)[g, t](Kmat, out)


def matvec_rows(Kmat, X, out):
    """out[k] = K X[k] for every row k of X (device arrays)."""
    _k("matvec_rows", Kmat.dtype)[(Kmat.shape[0], grid_problems(X.shape[0])), threads()](
        Kmat, X, out)


def geometric_scale(ukv, w, u, bar):
    """bar = exp(sum_k w_k log ukv_k); u_k <- u_k * bar / ukv_k."""
    g, t = _vec(ukv.shape[1])
    _k("geometric_scale", ukv.dtype)[g, t](ukv, w, u, bar)


def exp_vec(x, out):
    g, t = _vec(x.shape[0])
    _k("exp_vec", x.dtype)[g, t](x, out)


def _active(H):
    return cuda.to_device(np.ones(H, dtype=np.uint8))


def _dev(x, dt):
    return cuda.to_device(np.ascontiguousarray(x, dtype=dt))


# --------------------------------------------------------------------------
# Launchers: the same names, signatures and returns as numbaot.cpu.barycenter
# (the states take host float64 arrays and copy them to the device in the
# computation's dtype, that of the device array M or A)
# --------------------------------------------------------------------------
class KnoppBaryState:
    """Device state of the multiplicative barycenter iterations.

    Same constructor as ``numbaot.cpu.barycenter.KnoppBaryState``: ``M``
    (dim, dim) the C-contiguous device cost matrix (its dtype is the
    computation's; the Gibbs kernel K = exp(c M) is formed on the device),
    ``c`` = -1/reg, ``A`` (dim, n_hists) the histograms and ``w``
    (n_hists,) the weights as host float64 arrays (validated there;
    uploaded once).  The start is POT's: UKv = K (A / K^T 1),
    u = geometricMean(UKv) / UKv, i.e. the geometric scaling with uniform
    weights applied to u = 1.
    """

    def __init__(self, M, c, A, w):
        dt = M.dtype
        dim, H = A.shape
        AT = A.T
        self.M, self.w = M, _dev(w, dt)
        self.Kmat = Kmat = cuda.device_array((dim, dim), dtype=dt)
        z = _dev(np.zeros(dim), dt)
        cuda_sinkhorn.gibbs_kernel(M, c, z, z, Kmat)
        self.AT = _dev(AT, dt)
        self.u = cuda.to_device(np.ones((H, dim), dtype=dt))
        self.unew = cuda.device_array((H, dim), dtype=dt)
        self.ukv = cuda.device_array((H, dim), dtype=dt)
        self.bar = cuda.device_array(dim, dtype=dt)
        self.errcol = cuda.device_array(dim, dtype=dt)
        self.active = _active(H)
        self.fail = cuda.to_device(np.zeros(1, dtype=np.int32))
        self.n_chunks, self.chunk_rows = col_layout(dim)
        self.P = cuda.device_array((H, self.n_chunks, dim), dtype=dt)
        cs = cuda.device_array(dim, dtype=dt)
        col_sums(Kmat, cs)
        with np.errstate(divide="ignore", invalid="ignore"):
            X = AT / cs.copy_to_host().astype(np.float64)[None, :]
        matvec_rows(Kmat, cuda.to_device(np.ascontiguousarray(X, dtype=dt)), self.ukv)
        geometric_scale(self.ukv, cuda.to_device(np.full(H, 1.0 / H, dtype=dt)), self.u,
                        self.bar)
        # the barycenter of the start (returned when no iteration runs)
        geometric_scale(self.ukv, self.w, cuda.device_array((H, dim), dtype=dt),
                        self.bar)


def knopp_bary_step(st, want_err):
    """One multiplicative iteration for all histograms (3 launches); returns
    POT's error sum_j std_k UKv[k, j] (a host float) when ``want_err``."""
    dt = st.Kmat.dtype
    H, dim = st.u.shape
    cuda_sinkhorn.kernel("knopp_row_update", dt)[(dim, grid_problems(H)), threads()](
        st.Kmat, st.AT, st.u, st.active, st.unew, st.fail, 0)
    grid, block = col_launch(st.Kmat.shape, H, st.n_chunks)
    cuda_sinkhorn.kernel("knopp_col_partial", dt)[grid, block](st.Kmat, st.unew, st.active, st.chunk_rows,
                                                 st.P)
    g, t = _vec(dim)
    _k("bary_knopp_finish", dt)[g, t](st.P, st.u, st.w, st.ukv, st.bar, st.errcol,
                                      1 if want_err else 0)
    if want_err:
        return float(np.sum(st.errcol.copy_to_host(), dtype=np.float64))
    return None


def knopp_bary_result(st, dtype):
    """The barycenter of the last iteration (of the start when none ran),
    a device array (dim,) of the computation's dtype (the result dtype
    ``dtype``: the state computes in it)."""
    return st.bar


class LogBaryState:
    """Device state of the log-domain barycenter iterations.  Same
    constructor as ``numbaot.cpu.barycenter.LogBaryState``: ``M`` (dim, dim)
    the C-contiguous device cost matrix (the computation's dtype),
    ``c`` = -1/reg, ``A`` (dim, n_hists) and ``w`` (n_hists,) host float64
    arrays (log(A + 1e-16) is formed on the host and uploaded); G = 0 and
    log_bar = 0 at the start (POT)."""

    def __init__(self, M, c, A, w):
        dt = M.dtype
        dim, H = A.shape
        logA = _dev(np.log(A + 1e-16).T, dt)
        self.M, self.c, self.logA, self.w = M, dt.type(c), logA, _dev(w, dt)
        zeros = np.zeros((H, dim), dtype=dt)
        self.G = cuda.to_device(zeros)
        self.f = cuda.device_array((H, dim), dtype=dt)
        self.logku = cuda.device_array((H, dim), dtype=dt)
        self.logbar = cuda.to_device(np.zeros(dim, dtype=dt))
        self.errcol = cuda.device_array(dim, dtype=dt)
        self.active = _active(H)
        self.n_chunks, self.chunk_rows = col_layout(dim)
        self.PM = cuda.device_array((H, self.n_chunks, dim), dtype=dt)
        self.PS = cuda.device_array((H, self.n_chunks, dim), dtype=dt)


def log_bary_step(st, want_err):
    """One log-domain iteration for all histograms (3 launches); returns
    POT's error sum_j std_k exp(G + log KU)[k, j] when ``want_err``."""
    dt = st.M.dtype
    H, dim = st.G.shape
    cuda_sinkhorn.kernel("log_row_lse", dt)[(dim, grid_problems(H)), threads()](
        st.M, st.c, st.G, st.logA, st.active, st.f)
    grid, block = col_launch(st.M.shape, H, st.n_chunks)
    cuda_sinkhorn.kernel("log_col_partial", dt)[grid, block](st.M, st.c, st.f, st.active, st.chunk_rows,
                                               st.PM, st.PS)
    g, t = _vec(dim)
    _k("bary_log_finish", dt)[g, t](st.PM, st.PS, st.G, st.w, st.logku, st.logbar, st.errcol,
                                    1 if want_err else 0)
    if want_err:
        return float(np.sum(st.errcol.copy_to_host(), dtype=np.float64))
    return None


def log_bary_result(st, dtype):
    """The barycenter exp(log_bar), a new device array (dim,) of the
    computation's dtype (= the result dtype ``dtype``)."""
    bar = cuda.device_array(st.logbar.shape[0], dtype=st.M.dtype)
    exp_vec(st.logbar, bar)
    return bar


class ConvBaryState:
    """Device state of the multiplicative convolutional barycenter.  Same
    constructor as ``numbaot.cpu.barycenter.ConvBaryState``: ``A``
    (n_hists, W, H) the images, a C-contiguous device array (its dtype is
    the computation's; only read); ``K1`` (W, W), ``K2`` (H, H) the 1-D
    Gibbs kernels and ``w`` (n_hists,) host float64 arrays (uploaded);
    ``stab`` POT's ``stabThr``.  POT's start: bar = 1 / (W H), U = V = 1,
    KU = K(U)."""

    def __init__(self, A, K1, K2, w, stab):
        dt = A.dtype
        n, W, H = A.shape
        K1, K2, w = _dev(K1, dt), _dev(K2, dt), _dev(w, dt)
        self.A, self.K1, self.K2, self.w, self.stab = A, K1, K2, w, dt.type(stab)
        ones = np.ones((n, W, H), dtype=dt)
        self.U = cuda.to_device(ones)
        self.V = cuda.to_device(ones)
        self.KU = cuda.device_array((n, W, H), dtype=dt)
        self.KV = cuda.device_array((n, W, H), dtype=dt)
        self.tmp = cuda.device_array((n, W, H), dtype=dt)
        self.bar = cuda.to_device(np.full(W * H, 1.0 / (W * H), dtype=dt))
        self.errcol = cuda.device_array(W * H, dtype=dt)
        flat = (n, W * H)
        self.A2, self.U2, self.V2 = A.reshape(*flat), self.U.reshape(*flat), self.V.reshape(*flat)
        self.KU2, self.KV2 = self.KU.reshape(*flat), self.KV.reshape(*flat)
        self.conv(self.U, self.KU)

    def conv(self, X, out):
        """out_h = K1 X_h K2^T for every image (two launches)."""
        dt = X.dtype
        n, W, H = X.shape
        R = max(1, min(32, int(_config.CUDA_TILE_ROWS)))
        grid = ((H + 31) // 32, (W + R - 1) // R, grid_problems(n))
        _k("conv_left", dt)[grid, (32, R)](self.K1, X, self.tmp)
        _k("conv_right", dt)[grid, (32, R)](self.tmp, self.K2, out)


def conv_bary_step(st, want_err):
    """One iteration (POT order): V = bar / KU, KV = K(V), U = A / KV,
    KU = K(U), bar = exp(sum_h w_h log(KU_h + stabThr)); returns POT's error
    sum_p std_h (V KU)[h, p] when ``want_err``."""
    dt = st.A.dtype
    g, t = _vec(st.bar.shape[0])
    _k("bar_over", dt)[g, t](st.bar, st.KU2, st.V2)
    st.conv(st.V, st.KV)
    _k("ratio", dt)[g, t](st.A2, st.KV2, st.U2)
    st.conv(st.U, st.KU)
    _k("conv_bar", dt)[g, t](st.KU2, st.V2, st.w, st.stab, st.bar, st.errcol,
                             1 if want_err else 0)
    if want_err:
        return float(np.sum(st.errcol.copy_to_host(), dtype=np.float64))
    return None


def conv_bary_result(st, dtype):
    """The barycenter image, a device array (W, H) of the computation's
    dtype (= the result dtype ``dtype``; a view of the state)."""
    return st.bar.reshape(*st.A.shape[1:])


def conv_bary_scalings(st, dtype):
    """(U, V), device arrays (n_hists, W, H) of the computation's dtype
    (= ``dtype``; POT's log 'U', 'V'; the state's own arrays)."""
    return st.U, st.V


#: The launcher contract shared with numbaot.cpu.barycenter (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("KnoppBaryState", "knopp_bary_step", "knopp_bary_result", "LogBaryState",
             "log_bary_step", "log_bary_result", "ConvBaryState", "conv_bary_step",
             "conv_bary_result", "conv_bary_scalings")
