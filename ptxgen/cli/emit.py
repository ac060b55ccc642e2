"""ptxgen emit KERNEL [shape] [--arch] [--via direct|llvm|nvvm] [--llvm-ir] [-o FILE]"""
import sys

from .. import arch as archmod
from ..emit import emit_module
from ..ir.verify import verify_module
from ..llvm import VIAS
from ..ops import get_operator
from .common import add_arch, add_shape, shape_from_args, write_text


def add_parser(sub):
    p = sub.add_parser("emit", help="print the PTX of a library kernel")
    p.add_argument("kernel")
    add_shape(p)
    add_arch(p)
    p.add_argument("--via", choices=VIAS, default="direct",
                   help="direct: ptxgen's own PTX; llvm: the IR lowered to LLVM and compiled by "
                        "LLVM's NVPTX back end; nvvm: the same LLVM IR compiled by libNVVM")
    p.add_argument("--llvm-ir", action="store_true",
                   help="print the lowered LLVM IR (for --via llvm or nvvm) instead of PTX")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.add_argument("--comments", action="store_true", help="annotate each instruction's class")
    return p


def run(args):
    archmod.check_arch(args.arch)
    op = get_operator(args.kernel)
    shape = shape_from_args(op, args)
    module = op.build(shape, args.arch)
    verify_module(module)
    if args.llvm_ir:
        from ..llvm import llvm_ir
        text = llvm_ir(module, "nvvm" if args.via == "nvvm" else "llvm")
    elif args.via == "direct":
        text = emit_module(module, args.arch, comments=args.comments)
    else:
        from ..llvm import emit_via
        text = emit_via(module, args.arch, args.via)
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
