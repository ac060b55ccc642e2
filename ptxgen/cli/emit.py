"""ptxgen emit KERNEL|FILE.ptx [shape] [--arch] [--via direct|llvm|nvvm] [--llvm-ir]
[--dtype bf16|f16 [--out-dtype f32|bf16]] [--schedule] [-o FILE] [--comments]

`emit matmul --dtype bf16 --arch sm_90a` is the tensor-core GEMM (ops/tc_matmul.py);
`emit attention --B --H --S --D --dtype bf16 [--causal] --arch sm_90a` the fused attention
forward (ops/attention.py). For any other --arch (sm_90, the default, included) both are their
sm_80 path: mma.sync, ldmatrix, cp.async (ops/mma_matmul.py, ops/mma_attention.py)."""
from .. import arch as archmod
from ..emit import emit_module
from ..ir.verify import verify_module
from ..reports.paths import VIAS
from .common import (add_arch, add_dtype, add_shape, is_ptx_file, operator_from_args, output,
                     read_text, shape_from_args)


def add_parser(sub):
    p = sub.add_parser("emit", help="print the PTX of a library kernel (or re-emit a PTX file)")
    p.add_argument("kernel", help="a library kernel, or a .ptx file to parse and re-emit")
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
    p.add_argument("--schedule", action="store_true",
                   help="list-schedule every basic block first (ptxgen.reorder: critical path "
                   "by the isa model's latencies); off by default: ptxas schedules again and "
                   "benchmarks/sched_effect.py measured what it changes")
    return p


def run(args):
    archmod.check_arch(args.arch)
    if is_ptx_file(args.kernel):
        from ..parse import parse_ptx
        module = parse_ptx(read_text(args.kernel), filename=args.kernel)
    else:
        op = operator_from_args(args)
        shape = shape_from_args(op, args)
        module = verify_module(op.build(shape, args.arch))
    if args.schedule:
        from ..reorder import schedule_module
        module = schedule_module(module, args.arch)
    if args.llvm_ir:
        from ..reports.paths import llvm_ir
        text = llvm_ir(module, "nvvm" if args.via == "nvvm" else "llvm")
    elif args.via == "direct":
        text = emit_module(module, args.arch, comments=args.comments,
                           verify=False)    # verified above; parsed PTX is ptxas's to judge
    else:
        from ..reports.paths import emit_via
        text = emit_via(module, args.arch, args.via)
    output(args.output, text)
    return 0
