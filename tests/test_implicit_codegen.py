"""The source generator of the CPU implicit backward (``numbaot.cpu._implicit_codegen``).

The generated text for one padded size (N = 4) is checked against pieces written
out here from the documented layout of the work item's array Z (rows of S =
IMPLICIT_UNROLL_LANES + 8 slots: W_ij in row 4 i + j, then v, res, p, rinv, cvec,
s_r, s_c, u, q, Ap, N rows each, then the lane scalars), compiled, and run as plain
Python against NumPy.  A last test imports the package from ``.pyc`` files alone.
"""
import ast
import compileall
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from numbaot._config import IMPLICIT_UNROLL_LANES, JIT_OPTIONS
from numbaot.cpu import _implicit_codegen as cg

#: one xdist worker runs every test sharing the sinkhorn_operator kernels (static
#: mark: see tests/conftest.py, compile groups)
pytestmark = pytest.mark.xdist_group("implicit")

N = 4
L = IMPLICIT_UNROLL_LANES
S = L + 8
O = N * N   # first row after W
ROW = dict(v=O, res=O + N, p=O + 2 * N, rinv=O + 3 * N, cvec=O + 4 * N, sr=O + 5 * N,
           sc=O + 6 * N, u=O + 7 * N)

EXPECTED_SIGNATURES = {
    "_cg_4": ["Z", "nb", "n", "inv_n", "max_iter"],
    "_cg_init_4": ["Z", "n", "inv_n", "cg_tol"],
    "_rhs_4": ["Z"],
    "_u_4": ["Z"],
    "_cg_at_4": ["N", "Z", "nb", "n", "inv_n", "max_iter"],
    "_cg_init_at_4": ["N", "Z", "n", "inv_n", "cg_tol"],
    "_rhs_at_4": ["N", "Z"],
    "_u_at_4": ["N", "Z"],
    "_setup_4": ["Rf", "Gf", "b0", "nl", "corrected", "Z"],
    "_dx_4": ["Rf", "Gf", "dXf", "b0", "nl", "Z"],
    "_setup_at_4": ["N", "Rf", "Gf", "b0", "nl", "corrected", "Z"],
    "_dx_at_4": ["N", "Rf", "Gf", "dXf", "b0", "nl", "Z"],
}


def z(row, k=0):
    return f"Z[{(ROW[row] + k) * S} + c]"


def w(i, j):
    return f"Z[{(i * N + j) * S} + c]"


def source():
    return cg.generated_source((N,), (N,))


def functions(src):
    return {f.name: f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef)}


def test_defines_the_functions_of_size_4():
    fns = functions(source())
    assert list(fns) == list(EXPECTED_SIGNATURES)  # in this order, nothing else
    for name, args in EXPECTED_SIGNATURES.items():
        assert [a.arg for a in fns[name].args.args] == args, name


def test_rhs_and_u_text():
    # rhs = s_c - W^T (rinv * s_r) and u = rinv * (s_r - W v), one lane loop each
    rhs = ["def _rhs_4(Z):", f"    for c in range({L}):"]
    rhs += [f"        s{i} = {z('rinv', i)} * {z('sr', i)}" for i in range(N)]
    for j in range(N):
        col = " + ".join(f"{w(i, j)} * s{i}" for i in range(N))
        rhs.append(f"        {z('u', j)} = {z('sc', j)} - ({col})")
    u = ["def _u_4(Z):", f"    for c in range({L}):"]
    u += [f"        v{j} = {z('v', j)}" for j in range(N)]
    for i in range(N):
        row = " + ".join(f"{w(i, j)} * v{j}" for j in range(N))
        u.append(f"        {z('u', i)} = {z('rinv', i)} * ({z('sr', i)} - ({row}))")
    src = source()
    assert "\n".join(rhs) + "\n" in src
    assert "\n".join(u) + "\n" in src


def test_bindings_text():
    src = source()
    assert ("def _cg_at_4(N, Z, nb, n, inv_n, max_iter):\n"
            "    return _cg_4(Z, nb, n, inv_n, max_iter)\n") in src
    assert "def _dx_at_4(N, Rf, Gf, dXf, b0, nl, Z):\n    return _dx_4(Rf, Gf, dXf, b0, nl, Z)\n" in src
    # a size not written out binds setup and dX to nothing
    src12 = cg.generated_source((12,), ())
    assert "def _setup_at_12(N, Rf, Gf, b0, nl, corrected, Z):\n    return None\n" in src12
    assert "def _setup_12(" not in src12 and "def _dx_12(" not in src12


def test_cg_is_unrolled_for_the_size():
    # N <= 8: one sweep per CG iteration, the whole iteration of one lane as
    # straight-line code in the lane loop inside the iteration loop: p and
    # the cvec * p start (2 N), per row N loads of W, q_i and N updates of Ap
    # (N (2 N + 1)), the mean, its N subtractions and p^T A p (N + 2), rs,
    # ok and alpha (3), the N updates of v, r and res (3 N), ||r||^2, cont
    # and beta (3), the N updates of p, then rs, its, act and the active
    # count (4): 2 N^2 + 8 N + 12
    fn = functions(source())["_cg_4"]
    loop = fn.body[-1]
    assert isinstance(loop, ast.While)
    lanes = [s for s in loop.body if isinstance(s, ast.For)]
    assert len(lanes) == 1
    body = lanes[0].body
    assert all(isinstance(s, (ast.Assign, ast.AugAssign)) for s in body)
    assert len(body) == 2 * N * N + 8 * N + 12
    # the entries of W are read at their literal offsets, each once
    loads = [ast.unparse(s.value) for s in body if isinstance(s, ast.Assign)
             and ast.unparse(s.targets[0]).startswith("w")]
    assert loads == [w(i, j) for i in range(N) for j in range(N)]


def test_source_is_the_compiled_one():
    # the module that execs the text holds exactly what the generator gives
    from numbaot.cpu import _implicit_unrolled as un
    full = cg.generated_source(un.UNROLL_SIZES, un._WRITTEN_OUT_SIZES)
    assert un._GENERATED_SOURCE == full
    for piece in source().split("\n\n"):
        if piece.startswith("def _") and "_4(" in piece.split("\n")[0]:
            assert piece in full


def _run_generated(mode):
    """The size-4 kernels: run by CPython ("python"), jitted by Numba from
    the text ("numba") or as shipped ("ir": the package's intrinsics,
    ``numbaot.cpu._irlower``, called from one jitted driver)."""
    ns = {"math": math, "np": np}
    exec(compile(source(), "<generated N=4>", "exec"), ns)
    if mode == "numba":
        opts = dict(JIT_OPTIONS, cache=False)
        for name in EXPECTED_SIGNATURES:
            ns[name] = njit(**opts)(ns[name])
    if mode == "ir":
        from numbaot.cpu import _implicit_unrolled as un
        setup, rhs, cg_init, cg_at = un._setup_4, un._rhs_4, un._cg_init_4, un._cg_at_4
        u, dx = un._u_4, un._dx_4

        @njit(cache=False)
        def run(Rf, Gf, dXf, Z, inv_n):
            setup(Rf, Gf, 0, L, True, Z)
            rhs(Z)
            cg_init(Z, N, inv_n, 1e-13)
            cg_at(N, Z, L, N, inv_n, 100)
            u(Z)
            dx(Rf, Gf, dXf, 0, L, Z)
        return run
    return ns


@pytest.mark.parametrize("mode", ["python", "numba", "ir"])
def test_generated_kernels_solve_the_system(mode, rng):
    # one work item of L matrices of n = N: setup, rhs, CG, u, dX by the
    # generated functions; v against a dense solve of the projected Schur
    # complement system, dX against its formula
    ns = _run_generated(mode)
    n_rows = O + 10 * N + 8
    R = rng.uniform(0.1, 1.0, (L, N, N))
    G = rng.standard_normal((L, N, N))
    Z = np.zeros(n_rows * S)
    inv_n = 1.0 / N
    dX = np.zeros((L, N, N))
    if mode == "ir":
        ns(R.reshape(-1), G.reshape(-1), dX.reshape(-1), Z, inv_n)
    else:
        ns["_setup_4"](R.reshape(-1), G.reshape(-1), 0, L, True, Z)
        ns["_rhs_4"](Z)
        ns["_cg_init_4"](Z, N, inv_n, 1e-13)
        ns["_cg_at_4"](N, Z, L, N, inv_n, 100)
        ns["_u_4"](Z)
        ns["_dx_4"](R.reshape(-1), G.reshape(-1), dX.reshape(-1), 0, L, Z)

    def rows(name):
        return np.stack([Z[(ROW[name] + k) * S:(ROW[name] + k) * S + L] for k in range(N)])

    P = np.eye(N) - 1.0 / N
    for c in range(0, L, 7):
        Rc, Gc = R[c], G[c]
        r, col = Rc.sum(1), Rc.sum(0)
        sr, sc = (Gc * Rc).sum(1), (Gc * Rc).sum(0)
        A = np.diag(col) - Rc.T @ np.diag(1.0 / r) @ Rc
        b = sc - Rc.T @ (sr / r)
        v = np.linalg.lstsq(P @ A @ P, P @ b, rcond=None)[0]
        v = P @ v
        np.testing.assert_allclose(rows("v")[:, c], v, rtol=1e-9, atol=1e-12)
        u = (sr - Rc @ v) / r
        np.testing.assert_allclose(rows("u")[:, c], u, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(dX[c], (Gc - u[:, None] - v[None, :]) * Rc,
                                   rtol=1e-9, atol=1e-12)


def test_no_undefined_names():
    # the templates' per-size names have placeholders: static tools see them
    pyflakes = pytest.importorskip("pyflakes.api")
    from pyflakes.reporter import Reporter
    import io
    import numbaot.cpu as pkg
    d = os.path.dirname(pkg.__file__)
    out, err = io.StringIO(), io.StringIO()
    for f in ("implicit.py", "_implicit_forward.py", "_implicit_cg.py",
              "_implicit_codegen.py", "_implicit_unrolled.py"):
        pyflakes.checkPath(os.path.join(d, f), Reporter(out, err))
    assert "undefined name" not in out.getvalue(), out.getvalue()


def test_imports_and_runs_from_pyc_only(tmp_path):
    # a copy of the package with the .py files removed (legacy .pyc layout):
    # the generated kernels and the per-size templates are built from code
    # objects, never from source, and the disk cache turns itself off
    import numbaot
    src = os.path.dirname(numbaot.__file__)
    dst = tmp_path / "numbaot"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    assert compileall.compile_dir(str(dst), legacy=True, quiet=1)
    for root, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".py"):
                os.remove(os.path.join(root, f))
    code = (
        "import numpy as np, numbaot, numbaot._config as c\n"
        "from numbaot.cpu import _implicit_unrolled as u\n"
        "from numbaot.cpu._implicit_codegen import STRIDE, zrows\n"
        "assert numbaot.__file__.endswith('.pyc') and not c.CACHE\n"
        "from numba import njit\n"
        "Z = np.zeros(zrows(4)['rows'] * STRIDE)\n"
        "njit(lambda Z: u._rhs_at_4(4, Z))(Z)\n"   # compiles one generated kernel
        "print('ok', sorted(u.UNROLLED_KERNELS))\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("NUMBAOT_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok [4, 8, 12, 16]"
