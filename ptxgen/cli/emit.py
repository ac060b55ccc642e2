"""ptxgen emit KERNEL|FILE.ptx [shape] [--arch] [-o FILE] [--comments] [--schedule]"""
import sys

from .. import arch as archmod
from ..emit import emit_module
from ..ir.verify import verify_module
from ..ops import get_operator
from .common import add_arch, add_shape, is_ptx_file, read_text, shape_from_args, write_text


def add_parser(sub):
    p = sub.add_parser("emit", help="print the PTX of a library kernel (or re-emit a PTX file)")
    p.add_argument("kernel", help="a library kernel, or a .ptx file to parse and re-emit")
    add_shape(p)
    add_arch(p)
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.add_argument("--comments", action="store_true", help="annotate each instruction's class")
    p.add_argument("--schedule", action="store_true",
                   help="list-schedule every basic block first (ptxgen.sched: critical path "
                   "by the isa model's latencies); off by default: ptxas schedules again and "
                   "benchmarks/sched_effect.py measured what it changes")
    return p


def run(args):
    archmod.check_arch(args.arch)
    if is_ptx_file(args.kernel):
        from ..parse import parse_ptx
        module = parse_ptx(read_text(args.kernel), filename=args.kernel)
    else:
        op = get_operator(args.kernel)
        shape = shape_from_args(op, args)
        module = op.build(shape, args.arch)
        verify_module(module)
    if args.schedule:
        from ..sched import schedule_module
        module = schedule_module(module, args.arch)
    text = emit_module(module, args.arch, comments=args.comments)
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
