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


def _num(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


def render_text(table, sources=False):
    d = table.to_dict()
    out = [f"{table.arch}: {table.name}", "", "limits"]
    w = max(len(k) for k in d["header"])
    for k, v in d["header"].items():
        line = f"  {k:<{w}}  {_num(v) if not isinstance(v, list) else v}"
        if sources:
            line += f"   [{d['header_sources'][k]}]"
        out.append(line)
    out += ["", f"{'op':<8} {'latency':>8} {'issue':>6}  unit"]
    for k, o in d["ops"].items():
        line = f"{k:<8} {_num(o['latency']):>8} {_num(o['issue_interval']):>6}  {o['unit']}"
        if sources:
            line += f"   [{o['source']}] [{o['issue_source']}]"
        out.append(line)
    out += ["", f"{'memory':<8} {'latency':>8} {'GB/s':>8}"]
    for k, m in d["memory"].items():
        line = f"{k:<8} {_num(m['latency']):>8} {_num(m['bandwidth_gbs']):>8}"
        if sources:
            line += f"   [{m['source']}] [{m['bandwidth_source']}]"
        out.append(line)
    estimates = sum(1 for s in table.sources.values() if s.startswith("estimate"))
    out += ["", f"{len(table.sources)} numbers, {estimates} of them estimates "
                f"(--sources shows where each comes from)"]
    return "\n".join(out) + "\n"


def run(args):
    table = isamod.load(args.arch)
    if args.json:
        json.dump(table.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(table, sources=args.sources))
    return 0
