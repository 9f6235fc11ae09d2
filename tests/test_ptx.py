"""Every registered CUDA kernel compiles to PTX for every signature it is
launched with, for real GPUs (no simulator), and its PTX shows the design
claims: warp-shuffle butterflies (``shfl.sync.bfly``) where the kernel says it
reduces with them, no local-memory spills (``.local``) in the hot kernels, and
no float64 arithmetic in kernels whose arguments are all float32.

Compilation needs NVVM/NVRTC only, which ``pip install 'numbaot[cuda]'``
(numba-cuda[cu13]) brings; no GPU.  It runs in a subprocess per compute
capability with the simulator off.  numba-cuda asks the driver for the
current device's compute capability when it compiles a *device* function
called by a kernel; without a driver the subprocess answers with the target
compute capability (the kernel's PTX is generated for that target anyway).
"""
import json
import os
import subprocess
import sys

import pytest

cuda_missing = None
try:
    from numba.cuda import compile_ptx  # noqa: F401

    from numbaot.cuda import load_all
except Exception as exc:  # numba-cuda not installed
    cuda_missing = f"numba-cuda not installed ({exc}); pip install '.[cuda]'"

#: the oldest target (7.0: CUDA 13 cannot, the tests say so and skip; 7.5: the
#: oldest it can) and Hopper (9.0, the GPUs the project is lent).  8.0 was
#: dropped on 2026-11-28 (about 60 s of CI per capability): it lies between
#: the two, and every check here passed for 7.5, 8.0 and 9.0 alike until then.
CCS = [(7, 0), (7, 5), (9, 0)]

_SCRIPT = r"""
import json, re, sys
cc = tuple(int(x) for x in sys.argv[1].split("."))
from numba import cuda
from numba.cuda.cudadrv.error import CCSupportError
import numba.cuda.dispatcher as _disp

class _TargetDevice:
    compute_capability = cc

if not cuda.is_available():
    _disp.get_current_device = lambda: _TargetDevice()
from numbaot.cuda import load_all
out = {}
for name, spec in load_all().items():
    for sig in spec.signatures:
        key = name + " :: " + str(sig)
        try:
            ptx, _ = cuda.compile_ptx(spec.pyfunc, sig, cc=cc,
                                      fastmath=spec.jit_options.get("fastmath", False))
        except CCSupportError as exc:
            print(json.dumps({"unsupported": str(exc)}))
            sys.exit(0)
        except Exception as exc:
            out[key] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            continue
        body = [l for l in ptx.splitlines() if not l.lstrip().startswith("//")]
        f64 = [l for l in body if re.search(r"\.f64\b", l)]
        out[key] = {"shfl": "shfl.sync.bfly" in ptx,
                    "local": any(".local" in l for l in body),
                    "f64": len(f64)}
print(json.dumps(out))
"""

_cache = {}


def _compile_all(cc):
    if cc not in _cache:
        env = dict(os.environ)
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        proc = subprocess.run([sys.executable, "-c", _SCRIPT, "%d.%d" % cc], env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        _cache[cc] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _cache[cc]


def _entries():
    if cuda_missing:
        return []
    return [(name, str(sig), spec) for name, spec in load_all().items()
            for sig in spec.signatures]


pytestmark = [pytest.mark.ptx,
              pytest.mark.skipif(cuda_missing is not None, reason=cuda_missing or "")]


def test_registry_is_populated():
    names = [e[0] for e in _entries()]
    assert any("log_row_lse" in n for n in names)
    assert any("knopp_row_update" in n for n in names)


#: slow as a group: the first test of each compute capability compiles every
#: kernel in a subprocess (32 s wall for cc 9.0, measured 2026-11-25), the
#: others read its result
@pytest.mark.slow
@pytest.mark.parametrize("cc", [pytest.param(cc, marks=pytest.mark.xdist_group("ptx-cc%d%d" % cc),
                                             id="cc%d%d" % cc) for cc in CCS])
@pytest.mark.parametrize("name,sig,spec", _entries(), ids=lambda x: x if isinstance(x, str) else "")
def test_kernel_compiles_to_ptx(cc, name, sig, spec):
    res = _compile_all(cc)
    if "unsupported" in res:
        pytest.skip(f"the installed NVVM cannot target cc {cc[0]}.{cc[1]}: {res['unsupported']} "
                    "(CUDA 13 dropped sm_70; numba-cuda[cu12] would be needed)")
    r = res[f"{name} :: {sig}"]
    assert "error" not in r, r.get("error")
    if spec.warp_shuffle:
        assert r["shfl"], f"{name}: no shfl.sync.bfly in the PTX"
    if spec.hot:
        assert not r["local"], f"{name}: local memory (register spill) in a hot kernel"
    if "float64" not in sig:
        assert r["f64"] == 0, f"{name}: {r['f64']} float64 instructions in a float32 kernel"
