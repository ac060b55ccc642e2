"""ptxgen analyze FILE.ptx [--arch sm_90] [--kernel NAME] [--sass] [--json]"""
import json
import sys

from .. import isa as isamod
from ..analysis import analyze
from ..arch import DEFAULT_TARGET
from .common import add_wide, fit, read_text


def add_parser(sub):
    p = sub.add_parser("analyze", help="static analysis of any PTX file: instruction mix, "
                                       "loops, throughput, register pressure, memory traffic")
    p.add_argument("file", help="PTX file ('-' reads standard input)")
    p.add_argument("--arch", default=DEFAULT_TARGET,
                   help="machine model and ptxas target (models: "
                        + ", ".join(isamod.available()) + "; sm_90a uses sm_90's)")
    p.add_argument("--kernel", help="analyze only this function (default: all)")
    p.add_argument("--sass", action="store_true",
                   help="also assemble with ptxas: resources and SASS mix beside the PTX counts")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_wide(p)
    return p


def run(args):
    if args.file == "-":
        text, name = sys.stdin.read(), "<stdin>"
    else:
        text, name = read_text(args.file), args.file
    result = analyze(text, arch=args.arch, kernel=args.kernel, sass=args.sass, filename=name)
    if args.json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(fit(result.to_text(), args.wide))
    return 0
