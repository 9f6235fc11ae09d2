"""CUDA kernels of the discounted cumulative sums, mirroring ``numbaot/cpu/scan.py``.

Conventions (as on the CPU)
---------------------------
* A batch of ``B`` rows of length ``N`` is passed flat and C-contiguous:
  ``x``, ``out`` (B * N,), float32 or float64; arithmetic is float64 (as on
  the CPU, so both devices agree to the rounding of the output dtype).
* ``gamma`` (B,) float64; ``dones`` a flat uint8 array (nonzero: the last
  step of an episode) used when ``has_mask`` is 1 (else a 1-element dummy).
* ``reverse`` = 1 for the right-to-left scan; scan position p of a row is
  index t = N - 1 - p (reverse) or t = p; in scan order
  y_p = a_p y_{p-1} + x_p with a_p = gamma, or 0 across an episode boundary
  (d_t for the right scan, d_{t-1} for the left scan).
* Rows are cut into tiles ("chunks") of ``L = CUDA_SCAN_THREADS *
  CUDA_SCAN_ITEMS`` scan positions, ``nc`` per row; aggregates and carries
  are flat (B * nc,) float64 arrays.

Algorithms
----------
Many short rows (N <= ``CUDA_SCAN_ROW_MAX_N``): ``scan_rows``, one thread per
row (grid-stride over rows, any batch size).

Otherwise a work-efficient scan in three launches, whatever N (reduce, then
scan; Blelloch 1990, "Prefix sums and their applications", over the
operator (a1, s1) o (a2, s2) = (a1 a2, s1 a2 + s2), sec. 1.4):

1. ``chunk_aggregates``: one block per tile (grid-stride over all tiles of
   all rows): the tile is loaded coalesced into shared memory, each thread
   reduces its ``CUDA_SCAN_ITEMS`` consecutive positions serially, and the
   Blelloch up-sweep over the threads' pairs gives the tile's (A, S).
2. ``chunk_carries``: one block per row: a Blelloch exclusive scan of the
   row's tile pairs, ``blockDim`` tiles at a time with a running carry, gives
   the value entering every tile.
3. ``scan_chunks``: every tile again: serial reduction per thread, Blelloch
   up-sweep and down-sweep (exclusive prefix per thread), combined with the
   tile's carry; each thread rescans its positions from its prefix, and the
   tile is written back coalesced.

Shared memory is dynamic (sized at launch from the tunables); positions are
stored with one pad slot per ``CUDA_SCAN_ITEMS`` (index j + j // ITEMS), so
that the threads' serial passes do not all hit the same banks.

Non-finite values are found where they are written, as on the CPU: the
kernels that write an output (``scan_rows``, ``scan_chunks``,
``gae_returns``) test every value they store (|y| < ``lim``, the output
dtype's ``overflow_limit``) and set ``flag[0] = 1`` when one is not finite
(a NaN/inf input, or a sum that overflows the output dtype); the caller
reads the flag back and looks for NaN/inf in the inputs
(``count_nonfinite``) only to word the error.
"""

import numpy as np
from numba import cuda, float64

from .. import _config
from ..cpu.scan import overflow_limit
from ._registry import device, kernel

__all__ = [
    "scan_rows",
    "chunk_aggregates",
    "chunk_carries",
    "scan_chunks",
    "count_nonfinite_kernel",
    "gamma_grad_partials",
    "sum_rows",
    "gae_deltas",
    "gae_returns",
    "copy_flat",
]

_F = ("float32", "float64")
_A1 = "{}[::1]"


def _sigs(template):
    """``template`` with {T} replaced by float32 and by float64."""
    return [template.format(T=t) for t in _F]


def _sigs_io(template):
    """``template`` with ({X}, {T}) = (input, output) dtypes: float32 in and
    out, float64 in and out, and float64 in / float32 out (the float64 TD
    residuals of a float32 ``gae``)."""
    return [template.format(X=a, T=b) for a, b in
            (("float32", "float32"), ("float64", "float64"), ("float64", "float32"))]


# --------------------------------------------------------------------------
# device helpers
# --------------------------------------------------------------------------
@device
def _index(r, p, N, reverse):
    """Flat index of scan position p of row r."""
    if reverse:
        return r * N + (N - 1 - p)
    return r * N + p


@device
def _link(g, dones, has_mask, xi, reverse, rowstart):
    """Link coefficient of the scan position at flat index xi (see module)."""
    if not has_mask:
        return g
    if reverse:
        ki = xi
    else:
        ki = xi - 1 if xi > rowstart else xi
    return g if dones[ki] == 0 else 0.0


@device
def _pad(j, items):
    return j + j // items


@device
def _load_tile(x, gamma, dones, has_mask, reverse, N, r, P0, ln, T, items, xs, cs):
    """Coalesced load of the tile's positions into xs (values) and cs (links);
    positions past the row end hold the identity (1, 0)."""
    tid = cuda.threadIdx.x
    g = gamma[r]
    for j in range(tid, T, cuda.blockDim.x):
        q = _pad(j, items)
        if j < ln:
            xi = _index(r, P0 + j, N, reverse)
            xs[q] = x[xi]
            cs[q] = _link(g, dones, has_mask, xi, reverse, r * N)
        else:
            xs[q] = 0.0
            cs[q] = 1.0


@device
def _thread_reduce(xs, cs, items):
    """(A, S) of this thread's ``items`` consecutive positions."""
    a = 1.0
    s = 0.0
    base = cuda.threadIdx.x * items
    for k in range(items):
        q = _pad(base + k, items)
        c = cs[q]
        a = a * c
        s = s * c + xs[q]
    return a, s


@device
def _upsweep(sa, ss, n):
    """Blelloch up-sweep (reduce) over the n pairs (sa, ss); the total ends
    at index n - 1.  n is a power of two; every thread of the block calls."""
    tid = cuda.threadIdx.x
    d = 1
    while d < n:
        k = (tid + 1) * 2 * d - 1
        if k < n:
            l = k - d
            ar = sa[k]
            sa[k] = sa[l] * ar
            ss[k] = ss[l] * ar + ss[k]
        cuda.syncthreads()
        d *= 2


@device
def _downsweep(sa, ss, n):
    """Blelloch down-sweep: after ``_upsweep``, leaves at index i the
    exclusive prefix (combination of pairs 0..i-1; identity for i = 0)."""
    tid = cuda.threadIdx.x
    if tid == 0:
        sa[n - 1] = 1.0
        ss[n - 1] = 0.0
    cuda.syncthreads()
    d = n // 2
    while d >= 1:
        k = (tid + 1) * 2 * d - 1
        if k < n:
            l = k - d
            ta = sa[l]
            ts = ss[l]
            pa = sa[k]
            ps = ss[k]
            sa[l] = pa
            ss[l] = ps
            sa[k] = pa * ta
            ss[k] = ps * ta + ts
        cuda.syncthreads()
        d //= 2


# --------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------
_SCAN_ROWS = ("void({X}[::1], float64[::1], uint8[::1], int64, int64, int64, float64, "
              "{T}[::1], int32[::1])")


@kernel(_sigs_io(_SCAN_ROWS), hot=True)
def scan_rows(x, gamma, dones, has_mask, reverse, N, lim, out, flag):
    """One thread per row: the serial scan of the row (grid-stride over rows);
    flag[0] = 1 if a value written is not finite (|y| >= lim or NaN)."""
    B = gamma.shape[0]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    ok = True
    for r in range(start, B, stride):
        g = gamma[r]
        y = 0.0
        for p in range(N):
            xi = _index(r, p, N, reverse)
            y = _link(g, dones, has_mask, xi, reverse, r * N) * y + x[xi]
            out[xi] = y
            if not (abs(np.float64(y)) < lim):
                ok = False
    if not ok:
        flag[0] = 1


_AGG = ("void({X}[::1], float64[::1], uint8[::1], int64, int64, int64, int64, int64, "
        "float64[::1], float64[::1])")


@kernel([_AGG.format(X=x) for x in _F], hot=True)
def chunk_aggregates(x, gamma, dones, has_mask, reverse, N, L, items, agg_a, agg_s):
    """(A, S) of every tile of L = blockDim * items positions (see module):
    agg_a, agg_s (B * nc,) float64, tile c of row r at r * nc + c."""
    n = cuda.blockDim.x
    T = n * items
    Tp = T + T // items
    sh = cuda.shared.array(0, dtype=float64)
    xs = sh[0:Tp]
    cs = sh[Tp:2 * Tp]
    sa = sh[2 * Tp:2 * Tp + n]
    ss = sh[2 * Tp + n:2 * Tp + 2 * n]
    B = gamma.shape[0]
    nc = (N + L - 1) // L
    tid = cuda.threadIdx.x
    for tile in range(cuda.blockIdx.x, B * nc, cuda.gridDim.x):
        r = tile // nc
        c = tile - r * nc
        P0 = c * L
        ln = min(N - P0, L)
        _load_tile(x, gamma, dones, has_mask, reverse, N, r, P0, ln, T, items, xs, cs)
        cuda.syncthreads()
        a, s = _thread_reduce(xs, cs, items)
        sa[tid] = a
        ss[tid] = s
        cuda.syncthreads()
        _upsweep(sa, ss, n)
        if tid == 0:
            agg_a[tile] = sa[n - 1]
            agg_s[tile] = ss[n - 1]
        cuda.syncthreads()


@kernel(["void(float64[::1], float64[::1], int64, float64[::1])"], hot=True)
def chunk_carries(agg_a, agg_s, nc, carry):
    """carry[r * nc + c] = value of row r's scan before tile c: a Blelloch
    exclusive scan of the row's tile pairs, blockDim tiles at a time with a
    running carry; one block per row (grid-stride over rows)."""
    n = cuda.blockDim.x
    sh = cuda.shared.array(0, dtype=float64)
    sa = sh[0:n]
    ss = sh[n:2 * n]
    B = agg_a.shape[0] // nc
    tid = cuda.threadIdx.x
    for r in range(cuda.blockIdx.x, B, cuda.gridDim.x):
        run = 0.0
        for c0 in range(0, nc, n):
            c = c0 + tid
            if c < nc:
                sa[tid] = agg_a[r * nc + c]
                ss[tid] = agg_s[r * nc + c]
            else:
                sa[tid] = 1.0
                ss[tid] = 0.0
            cuda.syncthreads()
            _upsweep(sa, ss, n)
            ta = sa[n - 1]
            ts = ss[n - 1]
            cuda.syncthreads()
            _downsweep(sa, ss, n)
            if c < nc:
                carry[r * nc + c] = sa[tid] * run + ss[tid]
            run = ta * run + ts
            cuda.syncthreads()


_SCAN = ("void({X}[::1], float64[::1], uint8[::1], int64, int64, int64, int64, int64, "
         "float64[::1], float64, {T}[::1], int32[::1])")


@kernel(_sigs_io(_SCAN), hot=True)
def scan_chunks(x, gamma, dones, has_mask, reverse, N, L, items, carry, lim, out, flag):
    """out = the scan of every tile started from its carry (see module);
    flag[0] = 1 if a value written is not finite (|y| >= lim or NaN)."""
    n = cuda.blockDim.x
    T = n * items
    Tp = T + T // items
    sh = cuda.shared.array(0, dtype=float64)
    xs = sh[0:Tp]
    cs = sh[Tp:2 * Tp]
    sa = sh[2 * Tp:2 * Tp + n]
    ss = sh[2 * Tp + n:2 * Tp + 2 * n]
    B = gamma.shape[0]
    nc = (N + L - 1) // L
    tid = cuda.threadIdx.x
    ok = True
    for tile in range(cuda.blockIdx.x, B * nc, cuda.gridDim.x):
        r = tile // nc
        c = tile - r * nc
        P0 = c * L
        ln = min(N - P0, L)
        _load_tile(x, gamma, dones, has_mask, reverse, N, r, P0, ln, T, items, xs, cs)
        cuda.syncthreads()
        a, s = _thread_reduce(xs, cs, items)
        sa[tid] = a
        ss[tid] = s
        cuda.syncthreads()
        _upsweep(sa, ss, n)
        _downsweep(sa, ss, n)
        y = sa[tid] * carry[tile] + ss[tid]
        base = tid * items
        for k in range(items):
            q = _pad(base + k, items)
            y = cs[q] * y + xs[q]
            xs[q] = y
        cuda.syncthreads()
        for j in range(tid, ln, n):
            v = xs[_pad(j, items)]
            out[_index(r, P0 + j, N, reverse)] = v
            if not (abs(np.float64(v)) < lim):
                ok = False
        cuda.syncthreads()
    if not ok:
        flag[0] = 1


@kernel(_sigs("void({T}[::1], int64[::1])"))
def count_nonfinite_kernel(x, res):
    """res[0] += number of NaN/inf entries of x (one atomic per thread that
    found any)."""
    cnt = 0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i]
        if not (v - v == 0):
            cnt += 1
    if cnt:
        cuda.atomic.add(res, 0, cnt)


_GG = ("void({T}[::1], {T}[::1], uint8[::1], int64, int64, int64, int64, float64[::1])")


@kernel(_sigs(_GG))
def gamma_grad_partials(grad_input, output, dones, has_mask, reverse, N, L, part):
    """part[r * nc + c] = sum over the positions p >= 1 of tile c of row r of
    grad_input[t_p] * link_p * output[t_{p-1}] (link_p = 1, or 0 across an
    episode boundary); a shared-memory tree reduction per block, fixed order."""
    n = cuda.blockDim.x
    sh = cuda.shared.array(0, dtype=float64)
    acc_sh = sh[0:n]
    B = grad_input.shape[0] // N
    nc = part.shape[0] // B
    tid = cuda.threadIdx.x
    for tile in range(cuda.blockIdx.x, B * nc, cuda.gridDim.x):
        r = tile // nc
        c = tile - r * nc
        P0 = c * L
        ln = min(N - P0, L)
        acc = 0.0
        for j in range(tid, ln, n):
            p = P0 + j
            if p >= 1:
                xi = _index(r, p, N, reverse)
                prev = _index(r, p - 1, N, reverse)
                acc += grad_input[xi] * _link(1.0, dones, has_mask, xi, reverse, r * N) * output[prev]
        acc_sh[tid] = acc
        cuda.syncthreads()
        d = n // 2
        while d >= 1:
            if tid < d:
                acc_sh[tid] += acc_sh[tid + d]
            cuda.syncthreads()
            d //= 2
        if tid == 0:
            part[tile] = acc_sh[0]
        cuda.syncthreads()


@kernel(["void(float64[::1], int64, float64[::1])"])
def sum_rows(part, nc, res):
    """res[r] = sum_c part[r * nc + c] in tile order (one thread per row)."""
    for r in range(cuda.grid(1), res.shape[0], cuda.gridsize(1)):
        acc = 0.0
        for c in range(nc):
            acc += part[r * nc + c]
        res[r] = acc


_DELTAS = ("void({T}[::1], {T}[::1], int64, float64[::1], uint8[::1], int64, float64[::1], "
           "int64, float64[::1])")


@kernel(_sigs(_DELTAS))
def gae_deltas(rewards, values, Nv, last, dones, has_mask, gamma, N, out):
    """delta_t = r_t + gamma (1 - d_t) V_{t+1} - V_t (see the CPU kernel);
    one thread per entry."""
    for i in range(cuda.grid(1), rewards.shape[0], cuda.gridsize(1)):
        r = i // N
        t = i - r * N
        if t + 1 < N or Nv > N:
            vn = np.float64(values[r * Nv + t + 1])
        else:
            vn = last[r]
        k = 1.0
        if has_mask:
            k = 1.0 if dones[i] == 0 else 0.0
        out[i] = rewards[i] + gamma[r] * k * vn - np.float64(values[r * Nv + t])


@kernel(_sigs("void({T}[::1], {T}[::1], int64, int64, float64, {T}[::1], int32[::1])"))
def gae_returns(adv, values, Nv, N, lim, out, flag):
    """out[r, t] = adv[r, t] + V[r, t]; one thread per entry, in the dtype of
    the data (one rounding, as the CPU's float64 sum cast to float32);
    flag[0] = 1 if a value written is not finite."""
    ok = True
    for i in range(cuda.grid(1), adv.shape[0], cuda.gridsize(1)):
        r = i // N
        t = i - r * N
        v = adv[i] + values[r * Nv + t]
        out[i] = v
        if not (abs(np.float64(v)) < lim):
            ok = False
    if not ok:
        flag[0] = 1


_COPY = [f"void({s}[{dims}], {d}[::1])" for s in ("float32", "float64", "uint8", "bool")
         for d in (("float32", "float64") if s.startswith("float") else ("uint8",))
         for dims in (":", "::1", ":, :", ":, ::1")]


@kernel(_COPY)
def copy_flat(src, dst):
    """dst (flat, C order) = src (1-D or 2-D, any strides), cast to dst's
    dtype (bool masks become uint8)."""
    if src.ndim == 1:
        for i in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
            dst[i] = src[i]
    else:
        n1 = src.shape[1]
        for i in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
            dst[i] = src[i // n1, i - (i // n1) * n1]


# --------------------------------------------------------------------------
# host launchers (the same names and meaning as in numbaot/cpu/scan.py)
# --------------------------------------------------------------------------
def _grid(n, tpb):
    return max(1, min(65535, -(-n // tpb)))


def _row_tpb():
    return int(_config.CUDA_SCAN_ROW_THREADS)


def _block():
    """(threads, items, tile length) of the block-scan kernels."""
    n = int(_config.CUDA_SCAN_THREADS)
    if n < 1 or n & (n - 1):
        raise ValueError(f"_config.CUDA_SCAN_THREADS must be a power of two; got {n}")
    items = max(1, int(_config.CUDA_SCAN_ITEMS))
    return n, items, n * items


def layout(B, N):
    """(nc, L): tiles per row and positions per tile; (1, N) for the
    one-thread-per-row path (N <= CUDA_SCAN_ROW_MAX_N)."""
    if N <= int(_config.CUDA_SCAN_ROW_MAX_N):
        return 1, max(N, 1)
    _, _, L = _block()
    return -(-N // L), L


def empty(n, dtype):
    return cuda.device_array(n, dtype=dtype)


def to_flat(arr, dtype):
    """A flat C-contiguous device array of ``dtype`` with arr's entries
    (a view when arr already is one; else ``copy_flat``)."""
    arr = cuda.as_cuda_array(arr) if not getattr(arr, "__cuda_ndarray__", False) else arr
    if np.dtype(arr.dtype) == np.dtype(dtype) and arr.is_c_contiguous():
        return arr.reshape(arr.size)
    dst = cuda.device_array(arr.size, dtype=dtype)
    if arr.size:
        tpb = _row_tpb()
        copy_flat[_grid(arr.size, tpb), tpb](arr, dst)
    return dst


def _mask_args(dones):
    if dones is None:
        return cuda.device_array(1, dtype=np.uint8), 0
    return dones, 1


def _new_flag():
    return cuda.to_device(np.zeros(1, dtype=np.int32))


def run_scan(x, gamma, dones, reverse, B, N, out):
    """out = the scan of every row of x; returns a count that is 0 iff every
    value of out is finite (the kernels' flag, read back)."""
    d, has_mask = _mask_args(dones)
    g = cuda.to_device(np.ascontiguousarray(gamma, dtype=np.float64))
    rev = int(bool(reverse))
    lim = overflow_limit(out.dtype)
    flag = _new_flag()
    nc, L = layout(B, N)
    if N <= int(_config.CUDA_SCAN_ROW_MAX_N):
        tpb = _row_tpb()
        scan_rows[_grid(B, tpb), tpb](x, g, d, has_mask, rev, N, lim, out, flag)
    else:
        n, items, L = _block()
        shmem = 8 * (2 * (L + L // items) + 2 * n)
        tiles = B * nc
        agg_a = cuda.device_array(tiles, dtype=np.float64)
        agg_s = cuda.device_array(tiles, dtype=np.float64)
        carry = cuda.device_array(tiles, dtype=np.float64)
        grid = max(1, min(tiles, 65535))
        chunk_aggregates[grid, n, 0, shmem](x, g, d, has_mask, rev, N, L, items, agg_a, agg_s)
        chunk_carries[max(1, min(B, 65535)), n, 0, 16 * n](agg_a, agg_s, nc, carry)
        scan_chunks[grid, n, 0, shmem](x, g, d, has_mask, rev, N, L, items, carry, lim, out,
                                       flag)
    return int(flag.copy_to_host()[0])


def count_nonfinite(x):
    """Number of NaN/inf entries of the flat device array x (device
    reduction; only the count comes back)."""
    res = cuda.to_device(np.zeros(1, dtype=np.int64))
    if x.size:
        tpb = _row_tpb()
        count_nonfinite_kernel[_grid(x.size, tpb), tpb](x, res)
    return int(res.copy_to_host()[0])


def run_gamma_grad(grad_input, output, dones, reverse, B, N):
    """dL/dgamma of every row, as a host (B,) float64 array."""
    d, has_mask = _mask_args(dones)
    nc, L = layout(B, N)
    n = int(_config.CUDA_SCAN_THREADS)
    part = cuda.device_array(B * nc, dtype=np.float64)
    gamma_grad_partials[max(1, min(B * nc, 65535)), n, 0, 8 * n](
        grad_input, output, d, has_mask, int(bool(reverse)), N, L, part)
    res = cuda.device_array(B, dtype=np.float64)
    tpb = _row_tpb()
    sum_rows[_grid(B, tpb), tpb](part, nc, res)
    return res.copy_to_host()


def run_gae_deltas(rewards, values, Nv, last, dones, gamma, B, N, dtype):
    d, has_mask = _mask_args(dones)
    out = cuda.device_array(B * N, dtype=np.float64)
    tpb = _row_tpb()
    gae_deltas[_grid(B * N, tpb), tpb](
        rewards, values, Nv, cuda.to_device(np.ascontiguousarray(last, dtype=np.float64)),
        d, has_mask, cuda.to_device(np.ascontiguousarray(gamma, dtype=np.float64)), N, out)
    return out


def run_gae_returns(adv, values, Nv, B, N, out):
    """out = adv + values (the returns); returns a count that is 0 iff every
    value of out is finite (the kernel's flag, read back)."""
    flag = _new_flag()
    tpb = _row_tpb()
    gae_returns[_grid(B * N, tpb), tpb](adv, values, Nv, N, overflow_limit(out.dtype), out,
                                        flag)
    return int(flag.copy_to_host()[0])


def from_host(arr):
    """A device copy of a small host array (0-d arrays stay 0-d)."""
    return cuda.to_device(np.array(arr, order="C"))


#: The launcher contract shared with numbaot.cpu.scan (same names,
#: signatures and returns; tests/test_structure.py checks it).
LAUNCHERS = ("layout", "empty", "run_scan", "count_nonfinite", "run_gamma_grad",
             "run_gae_deltas", "run_gae_returns")
