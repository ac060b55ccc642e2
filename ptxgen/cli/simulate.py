"""ptxgen simulate KERNEL [shape] | FILE.ptx [--kernel NAME --grid X,Y,Z --block X,Y,Z]
[--arg NAME=VALUE ...] [--trip N] [--arch] [--json] [--trace FILE.json] [--png FILE.png]"""
import argparse
import json
import sys

from .. import arch as archmod
from ..errors import PtxgenError, cli_text
from ..ops import OPERATORS
from ..launch_shape import declared_block
from .common import (add_arch, add_dtype, add_shape, add_wide, fit, is_ptx_file, non_negative_int,
                     operator_from_args, positive_int, read_text, select_entry, shape_from_args)


def _dims(text):
    try:
        v = tuple(int(x, 0) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}") \
            from None
    if not 1 <= len(v) <= 3 or any(x <= 0 for x in v):
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}")
    return v


def _arg(text):
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, int(value, 0)
    except ValueError:
        pass
    try:
        return name, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: not a number: {value!r}") from None


def add_parser(sub):
    p = sub.add_parser("simulate", help="predict a launch's cycles with the SM simulator")
    p.add_argument("kernel", help=f"a library kernel ({', '.join(sorted(OPERATORS))}, "
                                  f"attention) or a .ptx file")
    add_shape(p)
    add_dtype(p)
    p.add_argument("--kernel", dest="entry", help="entry to simulate in a PTX file")
    p.add_argument("--grid", type=_dims, help="grid X[,Y[,Z]] (PTX files)")
    p.add_argument("--block", type=_dims, help="block X[,Y[,Z]] (PTX files; default .reqntid)")
    p.add_argument("--shared", type=non_negative_int, default=0,
                   help="dynamic shared memory per block in bytes (PTX files)")
    p.add_argument("--arg", type=_arg, action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar argument's value (PTX files; repeatable)")
    p.add_argument("--trip", type=positive_int, help="iterations of every loop (overrides "
                                                     "values)")
    add_arch(p, default=None, needs="model")
    p.add_argument("--level", choices=("auto", "L1", "L2", "DRAM"), default="auto",
                   help="memory level serving global loads (default: the reuse model)")
    p.add_argument("--footprint", type=positive_int,
                   help="distinct bytes the launch touches, for the reuse model")
    p.add_argument("--regs", type=positive_int, help="registers per thread (default: ptxas)")
    p.add_argument("--sample", type=positive_int, default=16,
                   help="loop iterations simulated before extrapolating (default 16; fewer, "
                        "at least 4, where an iteration is long)")
    p.add_argument("--schedule", action="store_true",
                   help="list-schedule the kernel's basic blocks first (ptxgen.reorder)")
    p.add_argument("--ptx-order", action="store_true",
                   help="simulate the instructions in the PTX's own order (by default each "
                        "basic block is list-scheduled first, as ptxas schedules it again)")
    p.add_argument("--warps", type=non_negative_int, default=8,
                   help="warps shown in --trace/--png (default 8)")
    p.add_argument("--launch-path", choices=("cuda.core", "numba", "triton"),
                   default="cuda.core", help="whose measured launch overhead time_us adds "
                   "(device_us is the kernel alone)")
    p.add_argument("--explain", action="store_true",
                   help="say which resource bounds the time (issue, a pipe, a memory level, "
                   "latency, barriers, the tail wave), with each one's share")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_wide(p)
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace")
    p.add_argument("--png", metavar="FILE.png", help="write a timeline of the first warps")
    return p


def _simulate_file(args, common):
    from ..parse import parse_ptx
    module = parse_ptx(read_text(args.kernel), filename=args.kernel)
    kernel = select_entry(module, args.entry, args.kernel)
    if args.grid is None:
        raise PtxgenError(f"{args.kernel}: give the launch grid with --grid X[,Y[,Z]]")
    if args.schedule:
        from ..reorder import schedule_module
        module = schedule_module(module, args.arch)
        kernel = module.kernel(kernel.name)
    block = args.block or declared_block(kernel.directives, (".reqntid",))
    if block is None:
        raise PtxgenError(f"{args.kernel}: give the block shape with --block X[,Y[,Z]]")
    from ..sim import simulate
    return simulate(kernel, args.grid, block, args=dict(args.arg), shared_bytes=args.shared,
                    module=module, **common)


def run(args):
    if args.arch is None:
        # wgmma and setmaxnreg need the arch-specific target (the tensor-core GEMM, attention)
        tensor = getattr(args, "dtype", None) or args.kernel == "attention"
        args.arch = archmod.arch_specific_variant(archmod.DEFAULT_TARGET) if tensor \
            else archmod.DEFAULT_TARGET
    archmod.check_arch(args.arch)
    common = dict(arch=args.arch, trip=args.trip, level=args.level, footprint=args.footprint,
                  registers=args.regs, sample=args.sample, trace_warps=args.warps,
                  launch_path=args.launch_path, ptxas_order=not args.ptx_order)
    if args.sample < 4:
        raise PtxgenError(f"--sample must be at least 4, got {args.sample}")
    if is_ptx_file(args.kernel):
        report = _simulate_file(args, common)
    else:
        for opt in ("entry", "grid", "block", "arg"):
            if getattr(args, opt):
                raise PtxgenError(f"--{'kernel' if opt == 'entry' else opt} applies to PTX "
                                  f"files; {args.kernel} is a library kernel (use its shape "
                                  f"options)")
        op = operator_from_args(args)
        from ..sim import simulate_operator
        report = simulate_operator(op, shape_from_args(op, args), schedule=args.schedule,
                                   **common)
    if args.trace:
        report.write_trace(args.trace)
    if args.png:
        report.write_png(args.png)
    # assumptions first, where they are read before the figures they change
    warnings = [cli_text(w) for w in report.warnings]
    for w in warnings:
        print(f"ptxgen: warning: {w}", file=sys.stderr)
    sys.stderr.flush()
    if args.json:
        json.dump(dict(report.to_dict(), warnings=warnings), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.explain:
        print(fit(report.explain_text(), args.wide))
    else:
        print(fit(report.to_text(warnings=False), args.wide))
        if args.trace:
            print(f"  trace: {args.trace} (open in ui.perfetto.dev)")
        if args.png:
            print(f"  timeline: {args.png}")
    return 0
