"""ptxgen emit KERNEL [shape] [--arch] [--via direct|llvm|nvvm] [--llvm-ir]
[--dtype bf16|f16 [--out-dtype f32|bf16]] [-o FILE] [--comments]

`emit matmul --dtype bf16 --arch sm_90a` is the tensor-core GEMM (ops/tc_matmul.py);
`emit attention --B --H --S --D --dtype bf16 [--causal] --arch sm_90a` the fused attention
forward (ops/attention.py)."""
from .. import arch as archmod
from ..emit import emit_module
from ..ir.verify import verify_module
from ..llvm import VIAS
from .common import add_arch, add_dtype, add_shape, operator_from_args, output, shape_from_args


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
    add_dtype(p)
    return p


def run(args):
    archmod.check_arch(args.arch)
    op = operator_from_args(args)
    shape = shape_from_args(op, args)
    module = op.build(shape, args.arch)
    if op.verify:
        verify_module(module)
    if args.llvm_ir:
        from ..llvm import llvm_ir
        text = llvm_ir(module, "nvvm" if args.via == "nvvm" else "llvm")
    elif args.via == "direct":
        text = emit_module(module, args.arch, comments=args.comments, verify=op.verify)
    else:
        from ..llvm import emit_via
        text = emit_via(module, args.arch, args.via)
    output(args.output, text)
    return 0
