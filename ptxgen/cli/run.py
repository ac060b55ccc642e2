"""ptxgen run KERNEL [shape] [--backend gpu|emu|auto] [--engine auto|native|interp] [--check]
[--dtype bf16|f16 [--out-dtype]] [--quiet]

`run matmul --dtype bf16` is the tensor-core GEMM, built for the arch-specific target (sm_90a)
unless --arch says otherwise; on the emulator too (wgmma, TMA, mbarrier are emulated). `run
attention --B --H --S --D [--causal] [--dtype bf16|f16]` is the fused attention forward, likewise.
With --arch sm_80, sm_86, sm_89 or sm_90 both take their sm_80 path (mma.sync, ldmatrix,
cp.async)."""
import sys

from .. import arch as archmod
from ..reports.run import BACKENDS, run_operator
from .common import add_arch, add_dtype, add_shape, operator_from_args, shape_from_args
from .progress import CtaProgress


def add_parser(sub):
    p = sub.add_parser("run", help="run a library kernel on the GPU or the CPU emulator")
    p.add_argument("kernel")
    add_shape(p)
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    add_arch(p, default=None)
    p.add_argument("--check", action="store_true", help="compare with a float64 numpy reference")
    p.add_argument("--time", action="store_true", help="time the kernel (GPU backend)")
    p.add_argument("--seed", type=int, default=None)
    add_dtype(p)
    p.add_argument("--engine", choices=("auto", "native", "interp"), default="auto",
                   help="emulator engine: native (compiled for this CPU; bounds checks only), "
                        "interp (the interpreter: memcheck and racecheck), auto (native when "
                        "it supports the kernel)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress line on stderr while the emulator runs (there is none "
                        "when stderr is not a terminal)")
    return p


def run(args):
    if args.arch is not None:
        archmod.check_arch(args.arch)      # the emulator backend would otherwise ignore it
    op = operator_from_args(args)
    shape = shape_from_args(op, args)
    arch = args.arch
    if arch is None and (args.dtype or args.kernel == "attention" or getattr(args, "G", None)):
        # wgmma and setmaxnreg need the arch-specific target (the tensor-core GEMM, attention)
        arch = archmod.arch_specific_variant(archmod.DEFAULT_TARGET)
    with CtaProgress(enabled=not args.quiet) as progress:
        res = run_operator(op, shape, args.backend, arch=arch, check=args.check,
                           seed=args.seed, time_it=args.time, engine=args.engine,
                           progress=progress)
    dims = " ".join(f"{k}={v}" for k, v in shape.items())
    where = "the GPU" if res.backend == "gpu" else f"the CPU emulator ({res.engine} engine)"
    print(f"{op.label} {dims}: ran on {where} (backend {res.backend})")
    print(f"path: {res.path}; kernels {', '.join(res.kernels)}")
    if res.time_ms is not None:
        print(f"time: {res.time_ms:.4f} ms")
    elif args.time:
        print("run: --time needs a GPU; it ran on the CPU emulator, untimed", file=sys.stderr)
    if args.check:
        print(f"check: {'PASS' if res.ok else 'FAIL'} (max relative error "
              f"{res.max_rel_error:.2e} vs float64 reference)")
        return 0 if res.ok else 1
    return 0
