"""Tune the SGEMM schedule on the GPU for the 4096³ and 1000³ shape classes (~1-3 minutes).

    python benchmarks/tune_matmul.py                 # writes the cache and $OUT/tune.json
    python benchmarks/tune_matmul.py --dry-run       # static pruning only (no GPU)

Runs ptxgen.tune.tune_matmul for each shape: the full schedule space, pruned by validate,
ptxas (spills), occupancy and the simulator, then the survivors checked on a small odd shape
and timed with CUDA events. The winners go to ptxgen/schedule/data/matmul_<arch>.json (the cache
shipped with the package; commit it) and, when OUT is set, to $OUT/matmul_<arch>.json as well,
with the full reports in $OUT/tune.json. When torch imports, cuBLAS (TF32 off) is timed at
each shape for reference.
"""
import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxgen.schedule import tuned as cachemod  # noqa: E402
from ptxgen.tune.tuner import tune_matmul  # noqa: E402

SHAPES = [(4096, 4096, 4096), (1000, 1000, 1000)]
BUDGET = 12


def cublas_ms(M, N, K):
    """Median ms of torch.matmul (TF32 off), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c = torch.empty(M, N, device="cuda")
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b, out=c)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--budget", type=int, default=BUDGET)
    p.add_argument("--arch", default=None)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--shapes", default=None,
                   help="comma-separated MxNxK to tune (default: 4096x4096x4096,1000x1000x1000)")
    a = p.parse_args(argv)
    shapes = SHAPES
    if a.shapes:
        try:
            shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
            assert all(len(s) == 3 and min(s) > 0 for s in shapes)
        except (ValueError, AssertionError):
            p.error(f"--shapes: expected MxNxK[,MxNxK...] of positive integers, got {a.shapes!r}")
    t_start = time.perf_counter()
    arch = a.arch
    if arch is None:
        if a.dry_run:
            arch = "sm_90"
        else:
            from ptxgen.runtime.device import device_arch
            arch = device_arch()
    out_dir = os.environ.get("OUT")
    cache_path = cachemod.package_path("matmul", arch)
    reports = []
    for M, N, K in shapes:
        shape = {"M": M, "N": N, "K": K}
        rep = tune_matmul(shape, arch=arch, budget=a.budget, dry_run=a.dry_run, jobs=a.jobs,
                          cache_path=cache_path)
        d = rep.to_dict()
        if not a.dry_run and rep.best is not None:
            ms = cublas_ms(M, N, K)
            if ms:
                d["cublas_ms"] = ms
                d["best_x_cublas"] = ms / rep.best.ms
                base = next((t for t in rep.trials if t.baseline and t.ms), None)
                if base:
                    d["baseline_x_cublas"] = ms / base.ms
        reports.append(d)
        print(rep.to_text())
        if "best_x_cublas" in d:
            print(f"  cuBLAS {d['cublas_ms']:.3f} ms: best {d['best_x_cublas']:.3f}x cuBLAS"
                  + (f", baseline {d['baseline_x_cublas']:.3f}x" if "baseline_x_cublas" in d
                     else ""))
        print(flush=True)
    seconds = round(time.perf_counter() - t_start, 1)
    summary = {"arch": arch, "budget": a.budget, "dry_run": a.dry_run, "seconds": seconds,
               "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M"),
               "reports": reports}
    if out_dir:
        with open(os.path.join(out_dir, "tune.json"), "w") as f:
            json.dump(summary, f, indent=1, default=str)
        if not a.dry_run and cache_path.exists():
            shutil.copy(cache_path, os.path.join(out_dir, cache_path.name))
    for d in reports:
        print(f"{d['shape_class']}: exhaustive {d['exhaustive_trials']} trials, timed "
              f"{d['gpu_trials']} ({d['trials_saved_fraction']:.1%} saved)"
              + (f"; best {d['best']['name']}" if d.get("best") else ""))
    print(f"# {seconds} s" + (f"; cache {cache_path}" if not a.dry_run else ""))


if __name__ == "__main__":
    main()
