"""CPU kernels of the barycenter solvers (the dense ones reuse
``numbaot.cpu.sinkhorn``): the separable log-domain convolution of 2-D images
used by ``convolutional_barycenter2d(method='sinkhorn_log')``."""
import math

import numpy as np
from numba import njit, prange

from .._config import JIT_OPTIONS
from ._math import fast_exp_ftz

__all__ = ["log_convolve2d"]

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
