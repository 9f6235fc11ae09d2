"""Command line of numbaot: ``python -m numbaot warmup [--functions ...] [--dtypes ...]``."""
import argparse
import sys

from ._warmup import WARMUP_FUNCTIONS, warmup


def main(argv=None):
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m numbaot",
        description="numbaot command line.")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser(
        "warmup",
        help="compile numbaot's CPU kernels ahead of time into Numba's disk cache",
        description="Compile numbaot's CPU kernels ahead of time (Numba's on-disk cache), so "
                    "that later processes start without compiling. Functions: "
                    + ", ".join(WARMUP_FUNCTIONS) + ".")
    w.add_argument("--functions", nargs="+", metavar="NAME", default=None,
                   help="functions to compile (default: all)")
    w.add_argument("--dtypes", nargs="+", metavar="DTYPE", default=["float64", "float32"],
                   help="float64 and/or float32 (default: both)")
    w.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    try:
        warmup(args.functions, args.dtypes, verbose=not args.quiet)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
