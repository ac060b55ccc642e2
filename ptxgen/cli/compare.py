"""ptxgen compare KERNEL [shape] [--arch] [--no-gpu] [--via llvm,nvvm]"""
import sys

from .. import arch as archmod
from ..errors import PtxgenError
from ..reports.paths import VIAS
from ..reports.compare import compare
from ..ops import get_operator
from .common import WIDTH, add_arch, add_shape, add_wide, shape_from_args


def add_parser(sub):
    p = sub.add_parser("compare", help="ptxgen's kernel beside Numba's NVVM kernel")
    p.add_argument("kernel")
    add_shape(p)
    add_arch(p, needs="model")
    p.add_argument("--no-gpu", action="store_true", help="static comparison only")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--via", default="llvm,nvvm",
                   help="comma-separated paths shown beside ptxgen's own PTX: llvm (LLVM's "
                        "NVPTX back end), nvvm (libNVVM); '' for none")
    add_wide(p)
    return p


def run(args):
    archmod.check_arch(args.arch)
    op = get_operator(args.kernel)
    shape = shape_from_args(op, args)
    paths = tuple(p for p in args.via.split(",") if p)
    bad = [p for p in paths if p not in VIAS]
    if bad:
        raise PtxgenError(f"--via: unknown path {bad[0]!r}; known: {', '.join(VIAS)}")
    c = compare(op, shape, args.arch, gpu=False if args.no_gpu else None, seed=args.seed,
                paths=paths)
    print(c.to_text(width=None if args.wide else WIDTH))
    if not args.no_gpu and c.ours.time_ms is None:
        print("compare: no CUDA GPU, so results and times were not compared (static "
              "comparison only)", file=sys.stderr)
    return 1 if any(s.ok is False for s in c.sides) else 0
