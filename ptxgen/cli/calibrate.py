"""ptxgen calibrate [--arch] [-o isa/ARCH.toml] [--json FILE] [--only GROUPS] [--raw FILE]"""
import json
import sys

from .. import arch as archmod
from .. import isa as isamod
from ..errors import PtxgenError
from .common import add_arch, read_text, write_text

GROUPS = ("latency", "throughput", "memory", "barrier", "bandwidth", "peak", "launch",
          "tensor", "tma")


def add_parser(sub):
    p = sub.add_parser("calibrate", help="measure latencies, throughputs and bandwidths on "
                                         "the GPU and update the machine model")
    add_arch(p, needs="model")
    p.add_argument("-o", "--output", metavar="FILE.toml",
                   help="write the measured values into this machine-model file")
    p.add_argument("--json", metavar="FILE", help="write raw and derived numbers as JSON")
    p.add_argument("--only", metavar="GROUPS",
                   help="comma-separated subset of: " + ", ".join(GROUPS))
    p.add_argument("--raw", metavar="FILE",
                   help="derive from a --json file written earlier instead of measuring")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def run(args):
    archmod.check_arch(args.arch)
    table = isamod.load(args.arch)
    only = None
    if args.only:
        only = tuple(g.strip() for g in args.only.split(",") if g.strip())
        bad = [g for g in only if g not in GROUPS]
        if bad or not only:
            raise PtxgenError(f"--only: unknown group {bad[0] if bad else args.only!r}; "
                              f"choose from {', '.join(GROUPS)}")
    from ..calibrate import derive, measure, update_file
    if args.raw:
        try:
            raw = json.loads(read_text(args.raw))["raw"]
        except (ValueError, KeyError, TypeError):
            raise PtxgenError(f"{args.raw}: not a file written by `ptxgen calibrate --json`") \
                from None
        if raw.get("arch") != args.arch:
            raise PtxgenError(f"{args.raw} holds a calibration of {raw.get('arch')}, not "
                              f"{args.arch}")
    else:
        from ..runtime import gpu_available
        if not gpu_available():
            raise PtxgenError("calibrate measures the GPU, and Numba finds no CUDA GPU here "
                              "(--raw FILE derives from an earlier run's --json)")
        log = None if args.quiet else (lambda text: print(f"  {text}", file=sys.stderr))
        raw = measure(args.arch, only=only, log=log)
    cal = derive(raw, table)
    print(cal.to_text())
    if args.json:
        write_text(args.json, json.dumps({"raw": raw, **cal.to_dict()}, indent=2) + "\n")
    if args.output:
        updates = cal.updates()
        if not updates:
            raise PtxgenError("no measurement succeeded; nothing written")
        update_file(args.output, updates)
        print(f"updated {len(updates)} entries in {args.output}")
    return 1 if cal.errors else 0
