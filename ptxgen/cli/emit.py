"""ptxgen emit KERNEL [shape] [--arch] [-o FILE] [--comments]"""
from .. import arch as archmod
from ..emit import emit_module
from ..ir.verify import verify_module
from ..ops import get_operator
from .common import add_arch, add_shape, output, shape_from_args


def add_parser(sub):
    p = sub.add_parser("emit", help="print the PTX of a library kernel")
    p.add_argument("kernel")
    add_shape(p)
    add_arch(p)
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.add_argument("--comments", action="store_true", help="annotate each instruction's class")
    return p


def run(args):
    archmod.check_arch(args.arch)
    op = get_operator(args.kernel)
    shape = shape_from_args(op, args)
    module = op.build(shape, args.arch)
    verify_module(module)
    text = emit_module(module, args.arch, comments=args.comments)
    output(args.output, text)
    return 0
