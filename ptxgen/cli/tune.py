"""ptxgen tune matmul --M --N --K | --shapes MxNxK,... [--dtype bf16|f16|tf32 [--out-dtype]]
[--arch] [--budget N] [--dry-run] [--plan FILE] [--jobs J] [--cache FILE] [--json]
[--no-progress]

Without --dtype: the FP32 SGEMM space (tune/space.py); with it, the sm_90a tensor-core GEMM's
(tune/tc_space.py, target sm_90a). --shapes tunes several shapes in one process (one GPU
context, one table of winners last). --plan (tensor-core GEMM): a dry run writes each shape's
static stages (ptxas, occupancy, simulator) to FILE, a GPU run reads them from it, so a
machine with a GPU spends its time on the trials alone.

ptxgen tune attention --B --H --S --D [--dtype bf16|f16] [--causal] --dry-run [--top K]: the
AttentionSchedule space pruned by the static models and ranked by the simulator (no GPU
rounds yet: benchmarks/attention.py --ranked K times the top K)."""
import argparse
import json
import sys

from .. import arch as archmod
from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..errors import PtxgenError
from .common import add_wide, fit, positive_int, read_text, write_text


CACHES = """caches (docs/api.md, "Caches"): one directory, $PTXGEN_CACHE_DIR (default
$XDG_CACHE_HOME/ptxgen, else ~/.cache/ptxgen; "off" keeps nothing on disk):
  tune/   the winners `ptxgen tune` writes, one JSON file per operator and target, read by
          the operators ($PTXGEN_TUNE_CACHE names another directory; PTXGEN_TUNE=off ignores it)
  ptxas/  ptxas's register counts by PTX hash, so a search assembles a kernel once
          (PTXGEN_PTXAS_CACHE=off: no such cache)"""


def add_parser(sub):
    p = sub.add_parser("tune", help="search schedules with the static models, time the best "
                                    "on the GPU, cache the winner for the shape's class",
                       epilog=CACHES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("operator", choices=("matmul", "attention"), help="the operator to tune")
    for name, default in (("M", 4096), ("N", 4096), ("K", 4096)):
        p.add_argument(f"--{name}", type=positive_int, default=default,
                       help=f"default {default}")
    for name, default in (("B", 4), ("H", 32), ("S", 4096), ("D", 128)):
        p.add_argument(f"--{name}", type=positive_int, default=default,
                       help=f"attention: default {default}")
    p.add_argument("--shapes", type=shape_list, default=None, metavar="MxNxK,...",
                   help="matmul: tune each of these shapes (instead of --M --N --K)")
    p.add_argument("--plan", metavar="FILE.json",
                   help="matmul --dtype: with --dry-run, write the static stages' results "
                        "here; without, take them from here for the shapes it holds")
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
                   help="simulated k-loop iterations before extrapolating (default 16; "
                        "fewer, at least 4, where an iteration is long)")
    p.add_argument("--cache", metavar="FILE.json",
                   help="tune cache file to write (default: the user's, below)")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    add_wide(p)
    return p


def shape_list(text):
    """'4096x4096x4096,128x8192x8192' -> [{M, N, K}, ...]."""
    out = []
    for item in text.split(","):
        dims = item.strip().lower().split("x")
        if len(dims) != 3:
            raise argparse.ArgumentTypeError(f"--shapes: {item!r} is not MxNxK")
        out.append(dict(zip("MNK", (positive_int(d) for d in dims))))
    return out


def plan_key(shape, dtype, out):
    return f"{dtype}/{out}/{shape['M']}x{shape['N']}x{shape['K']}"


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
    shapes = args.shapes or [{"M": args.M, "N": args.N, "K": args.K}]
    if args.dtype and archmod.check_arch(arch) != DEFAULT_ARCH_SPECIFIC_TARGET:
        raise PtxgenError(f"tune matmul --dtype: the tensor-core GEMM needs --arch "
                          f"{DEFAULT_ARCH_SPECIFIC_TARGET}, not {arch}")
    if args.plan and not args.dtype:
        raise PtxgenError("tune matmul --plan: only the tensor-core GEMM (--dtype) keeps plans")
    plans = _read_plans(args.plan) if args.plan and not args.dry_run else {}
    reps = []
    for shape in shapes:
        if args.dtype:
            key = plan_key(shape, args.dtype, args.out_dtype)
            rep = tune_tc_matmul(shape, arch, dtype=args.dtype, out=args.out_dtype,
                                 budget=args.budget, dry_run=args.dry_run, jobs=args.jobs,
                                 sample=args.sample, progress=not args.no_progress,
                                 cache_path=args.cache, cluster=args.cluster,
                                 plan=plans.get(key))
            plans[key] = rep.plan
        else:
            rep = tune_matmul(shape, arch=arch, budget=args.budget, dry_run=args.dry_run,
                              jobs=args.jobs, sample=args.sample,
                              progress=not args.no_progress, cache_path=args.cache,
                              cluster=args.cluster)
        reps.append(rep)
        if not args.json:
            print(fit(rep.to_text(), args.wide), flush=True)
    if args.plan and args.dry_run:
        write_text(args.plan, json.dumps({"format": 1, "plans": plans}, indent=1) + "\n")
    if args.json:
        json.dump(reps[0].to_dict() if len(reps) == 1 else [r.to_dict() for r in reps],
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif len(reps) > 1:
        print(fit(winners_table(reps), args.wide))
    return 0


def _read_plans(path):
    try:
        data = json.loads(read_text(path))
        return dict(data["plans"])
    except (ValueError, KeyError, TypeError) as e:
        raise PtxgenError(f"--plan {path}: not a plan file written by `ptxgen tune --dry-run "
                          f"--plan` ({e})") from None


def winners_table(reps):
    """One line per tuned shape: its class, the baseline and the winner (ms, TFLOP/s)."""
    lines = [f"{'shape':17} {'class':26} {'baseline':38} {'ms':>8} {'best':38} {'ms':>8} "
             f"{'TFLOP/s':>8} {'x base':>6}"]
    for r in reps:
        d = r.to_dict()
        base, best = d["baseline"] or {}, d["best"] or {}
        dims = "x".join(str(r.shape[k]) for k in "MNK")

        def ms(p):
            return f"{p['ms']:8.4f}" if p.get("ms") else f"{'-':>8}"
        tf = f"{best['tflops']:8.1f}" if best.get("tflops") else f"{'-':>8}"
        sp = d.get("speedup_vs_baseline")
        lines.append(f"{dims:17} {r.shape_class:26} {base.get('name', '-'):38} {ms(base)} "
                     f"{best.get('name', '-'):38} {ms(best)} {tf} "
                     f"{f'{sp:6.3f}' if sp else '-':>6}")
    return "\n".join(lines)


def _show(rep, args):
    if args.json:
        json.dump(rep.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(fit(rep.to_text(), args.wide))
    return 0
