"""ptxgen occupancy --threads T --regs R --smem S [--arch] [--carveout PCT] [--json]"""
import json
import sys

from .. import arch as archmod
from ..analysis.occupancy import invalid_launch, occupancy
from ..errors import PtxgenError
from .common import add_arch, non_negative_int, positive_int


def add_parser(sub):
    p = sub.add_parser("occupancy", help="blocks and warps per SM for a kernel's resources")
    p.add_argument("--threads", type=positive_int, required=True, help="threads per block")
    p.add_argument("--regs", type=non_negative_int, required=True, help="registers per thread")
    p.add_argument("--smem", type=non_negative_int, default=0,
                   help="shared memory per block in bytes, static + dynamic (default 0)")
    p.add_argument("--carveout", type=non_negative_int, default=None,
                   help="preferred shared-memory carveout in percent (default: no preference)")
    add_arch(p, needs="limits")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def run(args):
    archmod.check_arch(args.arch)
    why = invalid_launch(args.threads, args.regs, args.smem, args.arch)
    if why:
        raise PtxgenError(f"invalid launch configuration: {why}")
    r = occupancy(args.threads, args.regs, args.smem, arch=args.arch, carveout=args.carveout)
    if args.json:
        json.dump(r.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    lim = r.to_dict()["block_limits"]
    print(f"{args.arch}: {args.threads} threads, {args.regs} registers, {args.smem} B shared "
          f"per block")
    print(f"  active blocks per SM  {r.active_blocks_per_sm}")
    print(f"  active warps per SM   {r.active_warps_per_sm}")
    print(f"  occupancy             {r.occupancy:.1%}")
    print(f"  limited by            {', '.join(r.limiters)}")
    print("  blocks allowed by     " + ", ".join(
        f"{k} {'-' if v is None else v}" for k, v in lim.items()))
    print(f"  allocated per block   {r.registers_per_block} registers, "
          f"{r.shared_per_block} B shared (of a {r.shared_per_sm // 1024} KB carveout)")
    return 0
