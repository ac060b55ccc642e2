"""ptxgen banks KERNEL [shape] [--opt KEY=VALUE] | FILE.ptx [--kernel NAME] [--block X,Y,Z]
[--arch] [--conflicts] [--json]: shared-memory bank conflicts of every shared access, found
statically (ptxgen.analysis.banks_static)."""
import argparse
import json
import sys

from .. import arch as archmod
from ..errors import PtxgenError
from ..ops import OPERATORS, get_operator
from ..launch_shape import declared_block
from .common import (add_arch, add_shape, add_wide, fit, is_ptx_file, read_text, select_entry,
                     shape_from_args)


def _dims(text):
    try:
        v = tuple(int(x, 0) for x in text.split(","))
    except ValueError:
        v = ()
    if not 1 <= len(v) <= 3 or any(x <= 0 for x in v):
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}")
    return v


def _opt(text):
    name, eq, value = text.partition("=")
    if not eq or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    for conv in (lambda x: int(x, 0), float):
        try:
            return name, conv(value)
        except ValueError:
            pass
    return name, {"true": True, "false": False}.get(value.lower(), value)


def add_parser(sub):
    p = sub.add_parser("banks", help="shared-memory bank conflicts per access, from the IR")
    p.add_argument("kernel", help=f"a library kernel ({', '.join(sorted(OPERATORS))}) or a "
                                  f".ptx file")
    add_shape(p)
    p.add_argument("--opt", type=_opt, action="append", default=[], metavar="KEY=VALUE",
                   help="a library kernel's option (e.g. pad=0 for transpose; repeatable)")
    p.add_argument("--kernel", dest="entry", help="entry to analyse in a PTX file")
    p.add_argument("--block", type=_dims, help="block X[,Y[,Z]] (PTX files; default .reqntid "
                                               "or .maxntid)")
    add_arch(p, needs="model")
    p.add_argument("--conflicts", action="store_true", help="list only conflicted accesses")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_wide(p)
    return p


def _library(args):
    from ..emit import emit_module
    from ..parse import parse_ptx
    op = get_operator(args.kernel)
    if args.opt:
        try:
            op = type(op)(**dict(args.opt))
        except (TypeError, ValueError) as e:
            raise PtxgenError(f"{args.kernel}: bad --opt: {e}") from None
    shape = shape_from_args(op, args)
    # analysed as printed, so lines are those of `ptxgen emit` with the same options
    module = parse_ptx(emit_module(op.build(shape, args.arch), args.arch),
                       filename=f"ptxgen emit {args.kernel}")
    return module, module.kernel(op.kernel_name()), op.launch(shape).block, None


def _file(args):
    from ..parse import parse_ptx
    module = parse_ptx(read_text(args.kernel), filename=args.kernel)
    kernel = select_entry(module, args.entry, args.kernel)
    block, note = args.block, None
    if block is None:
        block = declared_block(kernel.directives)
        if block is None:
            block, note = (32,), "no --block and no .reqntid/.maxntid: one warp (32,1,1) assumed"
    return module, kernel, block, note


def run(args):
    archmod.check_arch(args.arch)
    from ..analysis.banks_static import static_bank_conflicts
    if is_ptx_file(args.kernel):
        if args.opt:
            raise PtxgenError("--opt applies to library kernels")
        module, kernel, block, note = _file(args)
    else:
        if args.entry or args.block:
            raise PtxgenError(f"--kernel and --block apply to PTX files; {args.kernel} is a "
                              f"library kernel (its launch gives the block)")
        module, kernel, block, note = _library(args)
    rep = static_bank_conflicts(kernel, block, arch=args.arch, module=module)
    if note:
        rep.assumptions.insert(0, note)
    if args.json:
        json.dump(rep.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(fit(rep.to_text(only_conflicts=args.conflicts), args.wide))
    return 0
