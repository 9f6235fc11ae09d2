"""Launch geometry shared by the CUDA host launchers (one place):

* ``per_dtype(build)``: build a module's kernels once per dtype and return
  the lookup ``k(name, dtype)``;
* ``grid_problems(n)``: blocks along a problem axis (grid y/z are capped at
  65535; the kernels grid-stride over the rest);
* ``threads()``: ``_config.CUDA_THREADS``, read at launch time;
* ``grid2(shape)``: a 2-D launch over (columns, rows) of 32 x 8 threads;
* ``col_layout(n_rows)``, ``col_launch(shape, n_problems, n_chunks)``: the
  row chunks and the (32, CUDA_TILE_ROWS) tiles of the coalesced column passes.
"""
import numpy as np

from .. import _config

__all__ = ["per_dtype", "grid_problems", "threads", "grid2", "col_layout", "col_launch",
           "MAX_GRID_Y"]

MAX_GRID_Y = 65535


def per_dtype(build):
    table = {np.dtype(np.float32): build(np.float32), np.dtype(np.float64): build(np.float64)}

    def k(name, dtype):
        return table[np.dtype(dtype)][name]

    return k


def grid_problems(n):
    return max(1, min(int(n), MAX_GRID_Y))


def threads():
    return int(_config.CUDA_THREADS)


def grid2(shape):
    n, m = shape
    return ((m + 31) // 32, (n + 7) // 8), (32, 8)


def col_layout(n_rows):
    """(n_chunks, chunk_rows) of the column passes (CUDA_COL_CHUNK_ROWS rows each)."""
    chunk = max(1, int(_config.CUDA_COL_CHUNK_ROWS))
    return -(-n_rows // chunk), chunk


def col_launch(shape, n_problems, n_chunks):
    """Grid and block of a column pass: 32 adjacent columns x CUDA_TILE_ROWS
    rows of threads per block, one block row per chunk, problems on z."""
    R = max(1, min(32, int(_config.CUDA_TILE_ROWS)))
    return ((shape[1] + 31) // 32, n_chunks, grid_problems(n_problems)), (32, R)
