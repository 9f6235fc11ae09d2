"""numbaot.distributed under MPI: ``mpiexec -n 2`` and ``-n 3`` (uneven row
splits) run tests/mpi_cases.py, which solves each case on its ranks and
reports, from rank 0, the gathered results against the single-process
solvers and POT; the assertions are made here.

Needs mpi4py and an ``mpiexec`` (``pip install 'numbaot[mpi]'``: the MPICH
wheels); without them the tests are skipped with that reason.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

pytest.importorskip("mpi4py", reason="mpi4py not installed (pip install 'numbaot[mpi]')")


def _mpiexec():
    # the launcher of the MPI that mpi4py was built against: the mpich wheel puts
    # it next to the interpreter
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.path.exists(local) else shutil.which("mpiexec")


NOT_CONVERGED = ("Sinkhorn did not converge. You might want to increase the number of "
                 "iterations `numItermax` or the regularization parameter `reg`.")


#: every test that takes ``run`` launches mpiexec (marked ``mpi``) and is
#: ``slow``: one launch per rank count, 15-18 CPU-seconds (19-32 s wall) with
#: a warm Numba cache, measured 2026-11-25
_MPI_MARKS = [pytest.mark.mpi, pytest.mark.slow]


@pytest.fixture(scope="module", params=[pytest.param(2, id="2ranks", marks=_MPI_MARKS),
                                        pytest.param(3, id="3ranks", marks=_MPI_MARKS)])
def run(request, tmp_path_factory):
    exe = _mpiexec()
    if exe is None:
        pytest.skip("no mpiexec on PATH (pip install 'numbaot[mpi]')")
    n = request.param
    out = tmp_path_factory.mktemp(f"mpi{n}") / "out.json"
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.path.dirname(HERE))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([exe, "-n", str(n), sys.executable, os.path.join(HERE, "mpi_cases.py"),
                           str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["size"] == n
    return n, data["results"]


BALANCED = ["knopp", "log", "log_small_reg", "knopp_uniform", "log_float32", "knopp_warmstart",
            "log_zero_weights", "knopp_not_converged", "knopp_numerical_errors"]


@pytest.mark.parametrize("case", BALANCED)
def test_balanced_matches_single_process(run, case):
    n, res = run
    r = res[case]
    assert r["plan_vs_single"] <= 1e-10            # the acceptance point
    # and the oracle (float32 results are the float64 plan rounded: 6e-8 relative)
    assert r["plan_rel_pot"] <= (1e-6 if r["dtype"] == "float32" else 1e-9)
    assert r["niter"][0] == r["niter"][1]
    assert r["n_err"][0] == r["n_err"][1]
    assert r["err_diff"] <= 1e-10
    assert r["u_vs_single"] <= 1e-9 and r["v_vs_single"] <= 1e-9
    assert r["keys"] == r["single_keys"]
    assert r["dtype"] == r["single_dtype"]
    # every rank warns as the single-process call does
    assert r["warnings"] == [r["single_warnings"]] * n


def test_float32_stays_float32(run):
    _, res = run
    assert res["log_float32"]["dtype"] == "float32"


def test_warnings_are_pot_texts(run):
    n, res = run
    assert res["knopp_not_converged"]["warnings"] == [[NOT_CONVERGED]] * n
    assert res["log_small_reg"]["warnings"] == [[NOT_CONVERGED]] * n
    assert res["knopp_numerical_errors"]["warnings"] == [
        ["Warning: numerical errors at iteration 0"]] * n


@pytest.mark.parametrize("case", ["uot", "uot_semi_relaxed", "uot_entropy", "uot_explicit_c"])
def test_unbalanced_matches_single_process(run, case):
    n, res = run
    r = res[case]
    assert r["plan_vs_single"] <= 1e-10
    assert r["plan_rel_pot"] <= 1e-9
    assert r["n_err"][0] == r["n_err"][1] and r["err_diff"] <= 1e-10
    assert r["logu_vs_single"] <= 1e-9 and r["logv_vs_single"] <= 1e-9
    assert r["cost"][0] == pytest.approx(r["cost"][1], rel=1e-12, abs=1e-15)
    assert r["total_cost"][0] == pytest.approx(r["total_cost"][1], rel=1e-8, abs=1e-15)
    assert r["keys"] == r["single_keys"]
    assert r["warnings"] == [r["single_warnings"]] * n


@pytest.mark.parametrize("case", ["empirical_sqeuclidean", "empirical_euclidean_uniform"])
def test_point_clouds_match_single_process(run, case):
    n, res = run
    r = res[case]
    assert r["f_vs_single"] <= 1e-10 and r["g_vs_single"] <= 1e-10
    assert r["f_vs_pot"] <= 1e-10 and r["g_vs_pot"] <= 1e-10
    assert r["g_same_on_ranks"]
    assert r["niter"][0] == r["niter"][1] and r["n_err"][0] == r["n_err"][1]
    assert r["warnings"] == [r["single_warnings"]] * n


@pytest.mark.parametrize("case, kind, text", [
    ("nan_on_last_rank", "ValueError", "M_local contains NaN or inf"),
    ("b_differs", "ValueError", "b must be the same on every rank"),
    ("reg_differs", "ValueError", "reg must be the same on every rank"),
    ("bad_method", "ValueError", "method must be one of"),
    ("uot_bad_reg_m", "ValueError", "reg_m values must be >= 0"),
    ("empirical_bad_dim", "ValueError", "must have the same dimension"),
    ("zero_total_mass", "ValueError", "positive total mass over all ranks"),
    ("warmstart_on_one_rank", "ValueError", "warmstart_given must be the same on every rank"),
    ("uot_log_differs", "ValueError", "log must be the same on every rank"),
    # the adversarial pass (issue 22): invalid input on the last rank only
    ("log_nan_on_last_rank", "ValueError", "M_local contains NaN or inf"),
    ("uot_nan_on_last_rank", "ValueError", "M_local contains NaN or inf"),
    ("empirical_nan_on_last_rank", "ValueError", "X_s_local contains NaN or inf"),
    ("negative_weight_on_last_rank", "ValueError", "a_local has negative entries"),
    ("uot_negative_weight_on_last_rank", "ValueError", "a_local has negative entries"),
    ("empirical_negative_weight_on_last_rank", "ValueError", "a_local has negative entries"),
    ("columns_differ_on_last_rank", "ValueError", "dim_b must be the same on every rank"),
    ("a_length_on_last_rank", "ValueError", "a_local has"),
    ("uot_c_shape_on_last_rank", "ValueError", "c must have the shape of M"),
    ("empirical_warmstart_shape_on_last_rank", "ValueError", "warmstart[1] must have shape"),
    ("uot_b_differs", "ValueError", "b must be the same on every rank"),
    ("empirical_b_differs", "ValueError", "b must be the same on every rank"),
    ("empirical_X_t_differs", "ValueError", "X_t must be the same on every rank; differs"),
    ("bad_reg_on_last_rank", "ValueError", "reg must be a finite number > 0"),
    ("uot_bad_reg_on_last_rank", "ValueError", "reg must be a finite number > 0"),
    ("empirical_bad_reg_on_last_rank", "ValueError", "reg must be a finite number > 0"),
    ("uot_reg_type_on_last_rank", "ValueError", "reg_type must be 'kl' or 'entropy'"),
    ("huge_costs_on_last_rank", "ValueError", "M / reg is too large"),
    ("empirical_huge_points_on_last_rank", "ValueError", "costs too large for entropic OT"),
    ("unequal_mass", "ValueError", "must have the same (finite) total mass"),
])
def test_bad_input_raises_on_every_rank(run, case, kind, text):
    n, res = run
    errors = res[case]["errors"]
    assert len(errors) == n
    for err in errors:
        assert err is not None, f"{case}: a rank did not raise"
        assert err[0] == kind and text in err[1]


@pytest.mark.parametrize("case", ["nan_on_last_rank", "log_nan_on_last_rank",
                                  "negative_weight_on_last_rank", "bad_reg_on_last_rank",
                                  "empirical_nan_on_last_rank", "uot_c_shape_on_last_rank"])
def test_other_ranks_name_the_failing_rank(run, case):
    n, res = run
    errors = res[case]["errors"]
    assert "invalid input on rank" not in errors[-1][1]
    for err in errors[:-1]:
        assert err[1].startswith(f"invalid input on rank {n - 1}: ")
        assert err[1].endswith(errors[-1][1])


def test_any_exception_on_one_rank_raises_everywhere(run):
    # the last rank's validation fails with a RuntimeError (its ``metric``
    # cannot be hashed): that rank raises it, the others a ValueError that
    # names the rank and the failure (they used to wait forever)
    n, res = run
    errors = res["exception_on_last_rank"]["errors"]
    assert errors[-1] == ["RuntimeError", "hash failed"]
    for err in errors[:-1]:
        assert err == ["ValueError", f"invalid input on rank {n - 1}: RuntimeError: hash failed"]


def test_caller_arrays_untouched(run):
    n, res = run
    assert res["untouched"]["all_ranks"] == [True] * n


def test_sub_communicator(run):
    n, res = run
    r = res["sub_communicator"]
    assert max(r["diffs"]) <= 1e-10
    assert r["sizes"] == [len(range(k % 2, n, 2)) for k in range(n)]


def test_local_rows_split(run):
    n, res = run
    blocks = res["local_rows"]["blocks"]
    sizes = [b - a for a, b in blocks]
    assert blocks[0][0] == 0 and blocks[-1][1] == 10
    assert all(blocks[k][1] == blocks[k + 1][0] for k in range(n - 1))
    assert max(sizes) - min(sizes) <= 1 and sorted(sizes, reverse=True) == sizes


def test_import_numbaot_does_not_import_mpi4py():
    code = "import sys, numbaot, numbaot.distributed; assert 'mpi4py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_local_rows_rejects_more_ranks_than_rows():
    from mpi4py import MPI  # a singleton COMM_WORLD in this process

    from numbaot.distributed import local_rows
    assert local_rows(5, MPI.COMM_SELF) == slice(0, 5)
    with pytest.raises(ValueError, match="cannot be split"):
        local_rows(0, MPI.COMM_SELF)
    with pytest.raises(TypeError, match="communicator"):
        local_rows(5, comm="world")
