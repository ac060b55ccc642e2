"""ptxgen compare KERNEL [shape] [--arch] [--no-gpu]"""
import sys

from .. import arch as archmod
from ..compare import compare, format_table
from ..ops import get_operator
from .common import add_arch, add_shape, shape_from_args


def add_parser(sub):
    p = sub.add_parser("compare", help="ptxgen's kernel beside Numba's NVVM kernel")
    p.add_argument("kernel")
    add_shape(p)
    add_arch(p, needs="model")
    p.add_argument("--no-gpu", action="store_true", help="static comparison only")
    p.add_argument("--seed", type=int, default=None)
    return p


def run(args):
    archmod.check_arch(args.arch)
    op = get_operator(args.kernel)
    shape = shape_from_args(op, args)
    ours, theirs = compare(op, shape, args.arch, gpu=False if args.no_gpu else None,
                           seed=args.seed)
    print(format_table(ours, theirs, op, shape))
    if not args.no_gpu and ours.time_ms is None:
        print("compare: no CUDA GPU, so results and times were not compared (static "
              "comparison only)", file=sys.stderr)
    if ours.ok is False or theirs.ok is False:
        return 1
    return 0
