"""The tensor-core matmul's sm_80 path (mma.sync + ldmatrix + cp.async, ops/mma_matmul.py) on the
GPU against cuBLAS bf16 (torch.matmul), one run.

    python benchmarks/mma_matmul.py [--shapes 4096,8192] [--variants auto,...] [--arch sm_80]
                                    [--out DIR]

Correctness first, on fresh random inputs: small odd shapes for bf16, f16 and tf32 on the GPU
against float64 (TcMatmul.check's bound), one of them on the CPU emulator too (same inputs, the
fraction of bit-equal elements); for each timed shape and schedule a float64 check of sampled
rows (benchmarks/tc_matmul.py's helpers). Timing: ptxgen.runtime.time_calls for both; the
ratio is against cuBLAS bf16 with a bf16 C timed in the same run. Prints a table last; writes
the rows as JSON (mma_matmul.json) under --out.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ptxgen.ops.tc_matmul import TcMatmul                             # noqa: E402
from ptxgen.runtime import bound_launch, load_steps, run_steps, time_calls   # noqa: E402
from ptxgen.schedule.mma_matmul import MmaMatmulSchedule              # noqa: E402

VARIANTS = {
    "auto": "auto",                                       # 128x256, 8 warps, 3 stages
    "s4": MmaMatmulSchedule(stages=4),
    "256x128": MmaMatmulSchedule(BM=256, BN=128, warps_m=4, warps_n=2),
    "128x128": MmaMatmulSchedule(BN=128, warps_n=2),      # 96 KB: 2 CTAs per SM
    "g4": MmaMatmulSchedule(group_m=4),
}
NAMED = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "6144": (6144, 6144, 6144),
         "odd": (4095, 4097, 4093)}
SMALL = [(67, 45, 40), (200, 136, 72), (300, 520, 136), (1000, 777, 1032)]


def small_checks(arch, rng):
    from ptxgen.emu import run_operator
    rows = []
    for dtype in ("bf16", "f16", "tf32"):
        for i, (M, N, K) in enumerate(SMALL):
            op = TcMatmul(dtype, "f32" if i % 2 == 0 else "bf16")
            shape = op.shape(M=M, N=N, K=K + (1 if dtype == "tf32" else 0))
            seed = int(rng.integers(2 ** 31))
            try:
                gpu = dict(op.make_inputs(shape, np.random.default_rng(seed)),
                           **op.workspace_arrays(shape, arch))
                run_steps(op, shape, load_steps(op, shape, op.build(shape, arch), arch), gpu,
                          arch)
                row = dict(dtype=dtype, out=op.out, shape=(M, N, shape["K"]),
                           gpu_ok=op.check(shape, gpu)[0])
                if i == 0:
                    emu = op.make_inputs(shape, np.random.default_rng(seed))
                    run_operator(op, shape, emu, arch)
                    same = gpu["C"].view(np.uint32 if op.out == "f32" else np.uint16) == \
                        emu["C"].view(np.uint32 if op.out == "f32" else np.uint16)
                    row.update(emu_ok=op.check(shape, emu)[0], bit_equal=float(same.mean()))
            except Exception as e:                                  # report, keep going
                row = dict(dtype=dtype, shape=(M, N, K), error=f"{type(e).__name__}: {e}"[:300])
            rows.append(row)
            print("small", row, flush=True)
    return rows


def bench(sname, variants, arch, rng):
    import torch
    import tc_baselines as base
    from tc_matmul import sampled_ok, sampled_reference
    M, N, K = NAMED[sname]
    flops = 2.0 * M * N * K
    torch.manual_seed(int(rng.integers(2 ** 31)))
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    Bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    ref = sampled_reference(A, Bt, rng)
    C_ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    go = base.cublas(A, Bt, C_ref)
    go()
    t_ref = time_calls(go, repeat=3, target_ms=15.0)
    rows = [dict(shape=sname, impl="cublas", ms=t_ref, tflops=flops / t_ref / 1e9, ratio=1.0)]
    print_row(rows[-1])
    for v in variants:
        op = TcMatmul("bf16", "bf16", VARIANTS[v])
        shape = op.shape(M=M, N=N, K=K)
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        row = dict(shape=sname, impl=f"ptxgen-{v}")
        try:
            kernels = load_steps(op, shape, op.build(shape, arch), arch)
            arrays = {"A": A.view(torch.int16), "Bt": Bt.view(torch.int16),
                      "C": C.view(torch.int16)}
            gos = [bound_launch(kernels[st.kernel], st.launch.grid, st.launch.block,
                                st.args(arrays), st.launch.shared_bytes)
                   for st in op.steps(shape, arch)]

            def call():
                for g in gos:
                    g()
            call()
            torch.cuda.synchronize()
            ok = sampled_ok(C, ref, op, M, N, K)
            diff = float((C.float() - C_ref.float()).abs().max())
            t = time_calls(call, repeat=3, target_ms=15.0)
            k = kernels[op.kernel_name()]
            row.update(ms=t, tflops=flops / t / 1e9, ratio=t_ref / t, ok=ok,
                       max_diff_vs_cublas=diff, schedule=str(op.schedule_for(shape)),
                       regs=getattr(getattr(k, "fn", None), "attrs", None) and k.fn.attrs.regs)
        except Exception as e:                                      # report, keep going
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        print_row(row)
    return rows


def print_row(r):
    head = f"{r['shape']:6} {r['impl']:16}"
    if "error" in r:
        print(f"{head} ERROR {r['error']}", flush=True)
        return
    print(f"{head} {r['ms']:8.4f} {r['tflops']:8.1f} {r['ratio']:7.3f} {str(r.get('ok', '')):>5}"
          f" {r.get('schedule', '')}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096,8192")
    p.add_argument("--variants", default="auto")
    p.add_argument("--arch", default="sm_80")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--skip-small", action="store_true")
    args = p.parse_args()
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    import torch
    import triton
    info = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                triton=triton.__version__, cuda=torch.version.cuda, arch=args.arch,
                date=time.strftime("%Y-%m-%d %H:%M"), command=" ".join(sys.argv))
    print(info, flush=True)
    result = dict(info=info, small=[] if args.skip_small else small_checks(args.arch, rng),
                  rows=[])
    path = os.path.join(args.out, "mma_matmul.json")
    for sname in args.shapes.split(","):
        result["rows"] += bench(sname, args.variants.split(","), args.arch, rng)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{'shape':6} {'impl':16} {'ms':>8} {'TFLOP/s':>8} {'xcuBLAS':>7} {'ok':>5} schedule"
          f"  (cuBLAS: torch.matmul bf16, bf16 C)")
    for r in result["rows"]:
        print_row(r)
    bad = [r for r in result["small"] if "error" in r or not r.get("gpu_ok")
           or r.get("emu_ok") is False]
    print(f"small odd shapes: {len(result['small']) - len(bad)}/{len(result['small'])} ok",
          *(f"\n  {r}" for r in bad))
    print(f"wall {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
