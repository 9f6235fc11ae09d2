"""Run all numbaot benchmarks in sequence, each in its own Python process.

Order: bench_compile (fresh processes, first-call latency), bench_sinkhorn,
bench_batch.  Output is streamed; ``--out FILE`` also writes it to FILE.

Usage::

    python benchmarks/run_all.py                   # full run (quiet machine!)
    python benchmarks/run_all.py --quick           # smoke: --sizes 200 and --quick everywhere
    python benchmarks/run_all.py --only sinkhorn --sizes 1000 2000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = ["compile", "sinkhorn", "batch"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: pass --quick to every script and --sizes 200 to "
                        "bench_sinkhorn (unless --sizes is given)")
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="passed to bench_sinkhorn")
    p.add_argument("--only", nargs="+", choices=SCRIPTS, default=None,
                   help="run only these benchmarks")
    p.add_argument("--skip", nargs="+", choices=SCRIPTS, default=[],
                   help="skip these benchmarks")
    p.add_argument("--skip-pot-log", action="store_true",
                   help="passed to bench_sinkhorn (skip POT's slow sinkhorn_log)")
    p.add_argument("--threads", type=int, default=None,
                   help="passed to bench_sinkhorn and bench_batch (numba threads)")
    p.add_argument("--out", default=None, help="also write all output to this file")
    args = p.parse_args(argv)

    todo = [s for s in (args.only or SCRIPTS) if s not in args.skip]
    out = open(args.out, "w") if args.out else None

    def emit(text):
        sys.stdout.write(text)
        sys.stdout.flush()
        if out:
            out.write(text)
            out.flush()

    failures = []
    t_all = time.perf_counter()
    for name in todo:
        cmd = [sys.executable, "-u", os.path.join(HERE, f"bench_{name}.py")]
        if args.quick:
            cmd.append("--quick")
        if name == "sinkhorn":
            sizes = args.sizes or ([200] if args.quick else None)
            if sizes:
                cmd += ["--sizes"] + [str(s) for s in sizes]
            if args.skip_pot_log:
                cmd.append("--skip-pot-log")
        if name in ("sinkhorn", "batch") and args.threads:
            cmd += ["--threads", str(args.threads)]
        shown = ["python"] + [os.path.relpath(c) if c.endswith(".py") else c for c in cmd[2:]]
        emit(f"\n$ {' '.join(shown)}\n\n")
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        for line in proc.stdout:
            emit(line)
        rc = proc.wait()
        emit(f"\n[bench_{name}: exit {rc}, {time.perf_counter() - t0:.1f} s]\n")
        if rc:
            failures.append(name)
    emit(f"\n[all done in {time.perf_counter() - t_all:.1f} s"
         + (f"; FAILED: {', '.join(failures)}]\n" if failures else "]\n"))
    if out:
        out.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
