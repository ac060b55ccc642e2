"""ptxgen emit KERNEL [shape] [--arch] [--dtype bf16|f16 [--out-dtype f32|bf16]] [-o FILE]
[--comments]

`emit matmul --dtype bf16 --arch sm_90a` is the tensor-core GEMM (ops/tc_matmul.py)."""
import sys

from .. import arch as archmod
from ..emit import emit_module
from ..ir.verify import verify_module
from ..errors import PtxgenError
from ..ops import get_operator
from ..ops.tc_matmul import TcMatmul
from .common import add_arch, add_shape, shape_from_args, write_text


def add_parser(sub):
    p = sub.add_parser("emit", help="print the PTX of a library kernel")
    p.add_argument("kernel")
    add_shape(p)
    add_arch(p)
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.add_argument("--comments", action="store_true", help="annotate each instruction's class")
    p.add_argument("--dtype", choices=("bf16", "f16"),
                   help="matmul: 16-bit inputs on the tensor cores (needs --arch sm_90a)")
    p.add_argument("--out-dtype", choices=("f32", "bf16"), default="f32",
                   help="matmul with --dtype: type of C")
    return p


def run(args):
    archmod.check_arch(args.arch)
    op = get_operator(args.kernel)
    if args.dtype:
        if args.kernel != "matmul":
            raise PtxgenError(f"--dtype applies to matmul only, not {args.kernel}")
        op = TcMatmul(dtype=args.dtype, out=args.out_dtype)
    shape = shape_from_args(op, args)
    module = op.build(shape, args.arch)
    if not args.dtype:          # the verifier does not know the tensor-core instructions yet
        verify_module(module)
    text = emit_module(module, args.arch, comments=args.comments)
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
