"""ptxgen run KERNEL [shape] [--backend gpu|emu|auto] [--engine auto|native|interp] [--check]"""
from .. import arch as archmod
from ..backend import BACKENDS, run_operator
from ..ops import get_operator
from .common import add_arch, add_shape, shape_from_args


def add_parser(sub):
    p = sub.add_parser("run", help="run a library kernel on the GPU or the CPU emulator")
    p.add_argument("kernel")
    add_shape(p)
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    add_arch(p, default=None)
    p.add_argument("--check", action="store_true", help="compare with a float64 numpy reference")
    p.add_argument("--time", action="store_true", help="time the kernel (GPU backend)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--engine", choices=("auto", "native", "interp"), default="auto",
                   help="emulator engine: native (compiled for this CPU; bounds checks only), "
                        "interp (the interpreter: memcheck and racecheck), auto (native when "
                        "it supports the kernel)")
    return p


def run(args):
    if args.arch is not None:
        archmod.check_arch(args.arch)      # the emulator backend would otherwise ignore it
    op = get_operator(args.kernel)
    shape = shape_from_args(op, args)
    res = run_operator(op, shape, args.backend, arch=args.arch, check=args.check,
                       seed=args.seed, time_it=args.time, engine=args.engine)
    dims = " ".join(f"{k}={v}" for k, v in shape.items())
    where = "the GPU" if res.backend == "gpu" else f"the CPU emulator ({res.engine} engine)"
    print(f"{op.name} {dims}: ran on {where} (backend {res.backend})")
    if res.time_ms is not None:
        print(f"time: {res.time_ms:.4f} ms")
    if args.check:
        print(f"check: {'PASS' if res.ok else 'FAIL'} (max relative error "
              f"{res.max_rel_error:.2e} vs float64 reference)")
        return 0 if res.ok else 1
    return 0
