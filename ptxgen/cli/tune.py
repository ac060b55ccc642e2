"""ptxgen tune matmul --M --N --K [--dtype bf16|f16|tf32 [--out-dtype]] [--arch] [--budget N]
[--dry-run] [--jobs J] [--cache FILE] [--json] [--no-progress]

Without --dtype: the FP32 SGEMM space (tune/space.py); with it, the sm_90a tensor-core GEMM's
(tune/tc_space.py, target sm_90a).

ptxgen tune attention --B --H --S --D [--dtype bf16|f16] [--causal] --dry-run [--top K]: the
AttentionSchedule space pruned by the static models and ranked by the simulator (no GPU
rounds yet: benchmarks/attention.py --ranked K times the top K)."""
import json
import sys

from .. import arch as archmod
from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..errors import PtxgenError
from .common import positive_int


def add_parser(sub):
    p = sub.add_parser("tune", help="search schedules with the static models, time the best "
                                    "on the GPU, cache the winner for the shape's class")
    p.add_argument("operator", choices=("matmul", "attention"), help="the operator to tune")
    for name, default in (("M", 4096), ("N", 4096), ("K", 4096)):
        p.add_argument(f"--{name}", type=positive_int, default=default,
                       help=f"default {default}")
    for name, default in (("B", 4), ("H", 32), ("S", 4096), ("D", 128)):
        p.add_argument(f"--{name}", type=positive_int, default=default,
                       help=f"attention: default {default}")
    p.add_argument("--dtype", choices=("bf16", "f16", "tf32"), default=None,
                   help="matmul: tune the tensor-core GEMM for these inputs (target sm_90a); "
                        "attention: its inputs (bf16 or f16, default bf16)")
    p.add_argument("--out-dtype", choices=("f32", "bf16"), default="bf16",
                   help="matmul with --dtype: type of C (default bf16)")
    p.add_argument("--causal", action="store_true", help="attention: causal mask")
    p.add_argument("--top", type=positive_int, default=None,
                   help="attention: show only the K best predicted schedules")
    p.add_argument("--arch", default=None,
                   help=f"target (default: the GPU's, or {DEFAULT_TARGET} for --dry-run without one)")
    p.add_argument("--budget", type=positive_int, default=12,
                   help="GPU trials at most, the baseline included (default 12, at least 2)")
    p.add_argument("--dry-run", action="store_true",
                   help="prune with the static models only; time nothing, cache nothing")
    p.add_argument("--jobs", type=positive_int, default=None,
                   help="processes for ptxas and the simulator (default: CPU count)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run ptxas and the simulator on a Ray cluster ('auto', "
                        "'ray://host:10001', or 'local' for a private one; needs ptxgen[ray])")
    p.add_argument("--sample", type=positive_int, default=16,
                   help="simulated k-loop iterations before extrapolating (default 16)")
    p.add_argument("--cache", metavar="FILE.json",
                   help="tune cache to write (default: the user cache, see ptxgen.schedule.tuned)")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    return p


def run_attention(args):
    from ..arch import arch_specific_variant
    from ..tune.attention import tune_attention
    if not args.dry_run:
        raise PtxgenError("tune attention: only --dry-run (static pruning and the simulator's "
                          "ranking) exists; time the top schedules with benchmarks/attention.py "
                          "--ranked K")
    if args.D not in (64, 128):
        raise PtxgenError(f"tune attention: --D must be 64 or 128, got {args.D}")
    arch = args.arch or arch_specific_variant(DEFAULT_TARGET)
    archmod.check_arch(arch)
    shape = {"B": args.B, "H": args.H, "S": args.S, "D": args.D}
    dtype = args.dtype or "bf16"
    if dtype not in ("bf16", "f16"):
        raise PtxgenError(f"tune attention: --dtype must be bf16 or f16, got {dtype}")
    rep = tune_attention(shape, dtype=dtype, causal=args.causal, arch=arch,
                         jobs=args.jobs, sample=args.sample, cluster=args.cluster)
    if args.top:
        rep.ranked = rep.ranked[:args.top]
    return _show(rep, args)


def run(args):
    if args.operator == "attention":
        return run_attention(args)
    from ..tune import tune_matmul, tune_tc_matmul
    arch = args.arch
    if arch is None and args.dtype:
        arch = DEFAULT_ARCH_SPECIFIC_TARGET
    if arch is None:
        from ..runtime import gpu_available
        if gpu_available():
            from ..runtime.device import device_arch
            arch = device_arch()
        elif args.dry_run:
            arch = DEFAULT_TARGET
        else:
            raise PtxgenError("tune: no CUDA GPU is available (use --dry-run to prune with the "
                              "static models only)")
    archmod.check_arch(arch)
    if args.budget < 2:
        raise PtxgenError(f"--budget must be at least 2 (the baseline and one candidate), got "
                          f"{args.budget}")
    if args.sample < 4:
        raise PtxgenError(f"--sample must be at least 4, got {args.sample}")
    shape = {"M": args.M, "N": args.N, "K": args.K}
    if args.dtype:
        if archmod.check_arch(arch) != DEFAULT_ARCH_SPECIFIC_TARGET:
            raise PtxgenError(f"tune matmul --dtype: the tensor-core GEMM needs --arch "
                              f"{DEFAULT_ARCH_SPECIFIC_TARGET}, not {arch}")
        rep = tune_tc_matmul(shape, arch, dtype=args.dtype, out=args.out_dtype,
                             budget=args.budget, dry_run=args.dry_run, jobs=args.jobs,
                             sample=args.sample, progress=not args.no_progress,
                             cache_path=args.cache, cluster=args.cluster)
    else:
        rep = tune_matmul(shape, arch=arch, budget=args.budget, dry_run=args.dry_run,
                          jobs=args.jobs, sample=args.sample, progress=not args.no_progress,
                          cache_path=args.cache, cluster=args.cluster)
    return _show(rep, args)


def _show(rep, args):
    if args.json:
        json.dump(rep.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(rep.to_text())
    return 0
