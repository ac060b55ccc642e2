"""ptxgen isa ARCH [--json] [--sources]: the machine model the analyses and the simulator use."""
import json
import sys

from .. import isa as isamod


def add_parser(sub):
    p = sub.add_parser("isa", help="show an architecture's latencies, throughputs and limits")
    p.add_argument("arch", help="target: " + ", ".join(isamod.available()))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--sources", action="store_true", help="print each number's source")
    return p


def run(args):
    table = isamod.load(args.arch)
    if args.json:
        json.dump(table.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(table.to_text(sources=args.sources))
    return 0
