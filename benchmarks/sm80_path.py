"""The sm_80 path (mma.sync + ldmatrix + cp.async) of the tensor-core GEMM (ops/mma_matmul.py) and
of the attention forward (FlashAttention-2's form, ops/mma_attention.py) on the GPU, bf16, one run.

    python benchmarks/sm80_path.py matmul [--shapes 4096,8192] [--variants auto,...]
                                          [--arch sm_80] [--skip-small] [--out DIR]
    python benchmarks/sm80_path.py attention [--configs 0,1,2,3] [--arch sm_80] [--skip-small]
                                             [--out DIR]

matmul: against cuBLAS bf16 (torch.matmul with a bf16 C, timed in the same run). Correctness
first, on fresh random inputs: small odd shapes for bf16, f16 and tf32 on the GPU against
float64 (TcMatmul.check's bound), one of them on the CPU emulator too (same inputs, the fraction
of bit-equal elements); for each timed shape and schedule a float64 check of sampled rows.
Writes mma_matmul.json under --out.

attention: against torch's scaled_dot_product_attention FLASH_ATTENTION backend
(FlashAttention-2) and ptxgen's own sm_90a kernel. Correctness first: small odd shapes (causal
and not) on the GPU and on the CPU emulator from the same inputs (benchmarks/attention.py's
emulator agreement); then for every timed configuration and implementation a float64 check of
sampled query rows of sampled heads (O within the operator's bound, and ptxgen's LSE). TFLOP/s
by FlashAttention's count; ratios against FLASH from this run. Writes mma_attention.json under
--out.

Timing: GPU time per call (ptxgen.runtime.time_calls, held batches; benchmarks/harness.py with
the sampled checks and the record). Prints a table last.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness                                                               # noqa: E402
from ptxgen.ops.attention import Attention                                   # noqa: E402
from ptxgen.ops.tc_matmul import TcMatmul                                    # noqa: E402
from ptxgen.runtime import load_steps, run_steps                             # noqa: E402
from ptxgen.schedule.mma_attention import MmaAttentionSchedule               # noqa: E402
from ptxgen.schedule.mma_matmul import MmaMatmulSchedule                     # noqa: E402

# -- the GEMM --------------------------------------------------------------------------------------
MATMUL_VARIANTS = {
    "auto": "auto",                                       # 128x256, 8 warps, 3 stages
    "s4": MmaMatmulSchedule(stages=4),
    "256x128": MmaMatmulSchedule(BM=256, BN=128, warps_m=4, warps_n=2),
    "128x128": MmaMatmulSchedule(BN=128, warps_n=2),      # 96 KB: 2 CTAs per SM
    "g4": MmaMatmulSchedule(group_m=4),
}
NAMED = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "6144": (6144, 6144, 6144),
         "odd": (4095, 4097, 4093)}
MATMUL_SMALL = [(67, 45, 40), (200, 136, 72), (300, 520, 136), (1000, 777, 1032)]


def matmul_small_checks(arch, rng):
    from ptxgen.emu import run_operator
    rows = []
    for dtype in ("bf16", "f16", "tf32"):
        for i, (M, N, K) in enumerate(MATMUL_SMALL):
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


def matmul_bench(sname, variants, arch, rng):
    import torch
    M, N, K = NAMED[sname]
    flops = 2.0 * M * N * K
    torch.manual_seed(int(rng.integers(2 ** 31)))
    A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    Bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    ref = harness.gemm_sample(A, Bt, rng)
    C_ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    go = harness.cublas(A, Bt, C_ref)
    go()
    t_ref = harness.gpu_ms(go)
    rows = [dict(shape=sname, impl="cublas", ms=t_ref, tflops=flops / t_ref / 1e9, ratio=1.0)]
    MATMUL_TABLE.show(rows[-1])
    for v in variants:
        op = TcMatmul("bf16", "bf16", MATMUL_VARIANTS[v])
        shape = op.shape(M=M, N=N, K=K)
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        row = dict(shape=sname, impl=f"ptxgen-{v}")
        try:
            kernels = load_steps(op, shape, op.build(shape, arch), arch)
            arrays = {"A": A.view(torch.int16), "Bt": Bt.view(torch.int16),
                      "C": C.view(torch.int16)}
            call = harness.step_calls(op, shape, kernels, arrays, arch)
            call()
            torch.cuda.synchronize()
            ok = harness.gemm_sample_ok(C, ref, op, shape)
            diff = float((C.float() - C_ref.float()).abs().max())
            t = harness.gpu_ms(call)
            k = kernels[op.kernel_name()]
            row.update(ms=t, tflops=flops / t / 1e9, ratio=t_ref / t, ok=ok,
                       max_diff_vs_cublas=diff, schedule=str(op.schedule_for(shape)),
                       regs=getattr(getattr(k, "fn", None), "attrs", None) and k.fn.attrs.regs)
        except Exception as e:                                      # report, keep going
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        MATMUL_TABLE.show(row)
    return rows


MATMUL_TABLE = harness.Table([("shape", 6), ("impl", 16)],
                             [("ms", "ms", "8.4f"), ("tflops", "TFLOP/s", "8.1f"),
                              ("ratio", "xcuBLAS", "7.3f"), ("ok", "ok", ">5"),
                              ("schedule", "schedule", "")])


def matmul_main(args, rng):
    import triton
    info = harness.run_info(triton=triton.__version__, **_info(args))
    print(info, flush=True)
    result = dict(info=info, small=[] if args.skip_small else matmul_small_checks(args.arch, rng),
                  rows=[])
    for sname in args.shapes.split(","):
        result["rows"] += matmul_bench(sname, args.variants.split(","), args.arch, rng)
        harness.save_json(args.out, "mma_matmul.json", result)
    harness.save_json(args.out, "mma_matmul.json", result)
    MATMUL_TABLE.print(result["rows"], "cuBLAS: torch.matmul bf16, bf16 C")
    return [r for r in result["small"] if "error" in r or not r.get("gpu_ok")
            or r.get("emu_ok") is False], len(result["small"])


# -- attention -------------------------------------------------------------------------------------
CONFIGS = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 4096, 64, False),
           (4, 32, 4096, 64, True)]
# sm_80-path schedules timed besides the default (8 warps, 64-key steps, 2 stages)
ATTENTION_VARIANTS = {"s3": MmaAttentionSchedule(stages=3), "n128": MmaAttentionSchedule(BN=128),
                      "w4": MmaAttentionSchedule(warps=4)}
ATTENTION_SMALL = [(1, 2, 77, 64), (1, 3, 201, 128)]
SM90A = "sm_90a"


def attention_bench(cfg, arch, rng):
    import torch
    B, H, S, D, causal = cfg
    flops = Attention("bf16", causal=causal).flops(dict(B=B, H=H, S=S, D=D))
    torch.manual_seed(int(rng.integers(2 ** 31)))
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    refs = harness.attention_sample(q, k, v, rng, causal)
    name = f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}"
    impls = [("flash", None, None), ("sm80", "auto", arch)] + \
        [(f"sm80-{n}", s, arch) for n, s in ATTENTION_VARIANTS.items()] + \
        [("sm90a", "auto", SM90A)]
    rows, t_flash = [], None
    for impl, sched, where in impls:
        row = dict(config=name, impl=impl)
        try:
            O = torch.full_like(q, float("nan"))
            LSE = None
            if sched is not None:
                op = Attention("bf16", causal=causal, schedule=sched)
                shape = op.shape(B=B, H=H, S=S, D=D)
                LSE = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
                go = harness.attention_call(op, shape, q, k, v, O, LSE, where)
                row["schedule"] = str(op.schedule_for(shape))
            else:
                go = harness.sdpa_call(q, k, v, causal, "flash")
            row["ok"] = harness.attention_first_call(go, O, refs, LSE)[0]
            t = harness.gpu_ms(go)
        except Exception as e:                                      # report, keep going
            rows.append(dict(row, error=f"{type(e).__name__}: {e}"[:300]))
            ATTENTION_TABLE.show(rows[-1])
            continue
        t_flash = t if impl == "flash" else t_flash
        rows.append(dict(row, ms=t, tflops=flops / t / 1e9,
                         x_flash=t_flash / t if t_flash else None))
        ATTENTION_TABLE.show(rows[-1])
    return rows


ATTENTION_TABLE = harness.Table([("config", 28), ("impl", 10)],
                                [("ms", "ms", "8.3f"), ("tflops", "TFLOP/s", "8.1f"),
                                 ("x_flash", "xFLASH", "7.3f"), ("ok", "ok", ">5"),
                                 ("schedule", "schedule", "")])


def attention_main(args, rng):
    from attention import emulator_agreement
    info = harness.run_info(**_info(args))
    print(info, flush=True)
    small = []
    if not args.skip_small:
        small = emulator_agreement(rng, args.arch, ATTENTION_SMALL)
        for row in small:
            print("small", row, flush=True)
    result = dict(info=info, small=small, rows=[])
    for i in args.configs.split(","):
        result["rows"] += attention_bench(CONFIGS[int(i)], args.arch, rng)
        harness.save_json(args.out, "mma_attention.json", result)
    ATTENTION_TABLE.print(result["rows"])
    return [r for r in small if "error" in r or not (r["gpu_ok"] and r["emu_ok"])], len(small)


# -- both ------------------------------------------------------------------------------------------
def _info(args):
    import torch
    return dict(cuda=torch.version.cuda, arch=args.arch)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="kernel", required=True)
    mm = sub.add_parser("matmul", help="the GEMM against cuBLAS")
    mm.add_argument("--shapes", default="4096,8192", help=f"names from {', '.join(NAMED)}")
    mm.add_argument("--variants", default="auto",
                    help=f"schedules from {', '.join(MATMUL_VARIANTS)}")
    at = sub.add_parser("attention", help="the attention forward against FlashAttention-2")
    at.add_argument("--configs", default="0,1,2,3", help="indices into CONFIGS")
    for sp in (mm, at):
        sp.add_argument("--arch", default="sm_80")
        harness.out_argument(sp)
        sp.add_argument("--skip-small", action="store_true")
    args = p.parse_args(argv)
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    bad, n = (matmul_main if args.kernel == "matmul" else attention_main)(args, rng)
    print(f"small odd shapes: {n - len(bad)}/{n} ok", *(f"\n  {r}" for r in bad))
    print(f"wall {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
