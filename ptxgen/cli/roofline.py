"""ptxgen roofline KERNEL... [shape] [--arch] [--time auto|sim|gpu] [--counts auto|operator|emulator]
[--png FILE] [--json]: kernels against the compute and memory ceilings of the machine model."""
import json
import sys

from .. import arch as archmod
from ..errors import PtxgenError
from ..ops import OPERATORS
from .common import add_arch, add_shape, add_wide, fit


def add_parser(sub):
    p = sub.add_parser("roofline", help="kernels on a roofline: FLOP/byte vs GFLOP/s against "
                                        "the machine model's ceilings")
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help=f"library kernels ({', '.join(sorted(OPERATORS))})")
    add_shape(p)
    add_arch(p, needs="model")
    p.add_argument("--time", choices=("auto", "sim", "gpu"), default="auto",
                   help="measured on the GPU (auto: when one is present) or simulated")
    p.add_argument("--counts", choices=("auto", "operator", "emulator"), default="auto",
                   help="FLOPs and bytes from the operator, or counted on the CPU emulator "
                        "(auto: the emulator only where the operator gives none)")
    p.add_argument("--png", metavar="FILE.png", help="write the chart (matplotlib, Agg)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_wide(p)
    return p


def run(args):
    archmod.check_arch(args.arch)
    unknown = [k for k in args.kernels if k not in OPERATORS]
    if unknown:
        raise PtxgenError(f"unknown kernel {unknown[0]!r}; known: {', '.join(sorted(OPERATORS))}")
    from ..reports.roofline import roofline
    shape = {k: getattr(args, k) for k in ("M", "N", "K", "n") if getattr(args, k) is not None}
    r = roofline(args.kernels, arch=args.arch, time=args.time, shape=shape, counts=args.counts)
    if args.png:
        r.write_png(args.png)
    if args.json:
        d = r.to_dict()
        if args.png:
            d["png"] = args.png
        json.dump(d, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(fit(r.to_text(), args.wide))
        if args.png:
            print(f"  chart: {args.png}")
    return 0
