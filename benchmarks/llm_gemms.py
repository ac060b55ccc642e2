"""The GEMMs LLMs run, on the GPU, against torch's in the same run (issue 29).

    python benchmarks/llm_gemms.py [--parts fp8emu,fp8,skinny,square,grouped] [--out DIR]
                                   [--fp8-runs 4096:auto,8192:block_f1,...]
                                   [--square-runs 1024:auto,1024:t128x64c1,...]

fp8emu   the fp8 GEMM (ops/fp8_matmul.py) at small odd shapes on the GPU: checked against the
         float64 bound, inputs and C saved (DIR/small_gpu.npz) so the emulator can be
         compared bit for bit anywhere (--recheck DIR/small_gpu.npz)
fp8      e4m3 x e4m3, bf16 C at 4096^3 and 8192^3: ptxgen against torch._scaled_mm on the
         same inputs (sampled rows checked in float64), per-tensor scales ("auto") and 128 x 128
         block scales: the default block schedule ("block"), serial ("block_f0") and ping-pong
         ("block_f1", "block_f1s6": 6 stages; "block_f1x1"/"block_f1x2": without/with 2-CTA
         clusters, on request) promotion (lower/block_scales.py), and the opt-in tiles of two
         m64n128 blocks per consumer, promoted one block at a time ("block_m256": 256 x 128,
         "block_n256": 128 x 256; 3 stages; "block_m256x1" without clusters, on request);
         each row also as a fraction of the per-tensor GEMM's rate at its size (x_per_tensor)
skinny   bf16 M = 16, 64, 128 x N = K = 8192: ptxgen's auto schedule against torch.matmul
         (cuBLAS), the weights' read bandwidth, and a device copy's bandwidth (read + write)
square   bf16 1024^3 and 2048^3 against cuBLAS: the default ("auto") beside the candidate
         schedules of SQUARE (tiles that fill the SMs where 128x256 leaves most idle), each
         with its sampled float64 row checks and its rate over the default's (x_auto)
grouped  bf16 8 experts x 2048 tokens x 4096 -> 4096 and uneven experts (64..4096 tokens):
         torch._grouped_mm, torch.bmm (even only), ptxgen's dense GEMM of the same FLOPs, and
         ptxgen's grouped GEMM: its default (C stored from the fragments, 4 stages) beside the
         variants of GROUPED_VARIANTS (_tma: C staged and stored by TMA where a tile lies in
         its expert's rows, 3 stages), each with its sampled float64 row checks

Timing: triton.testing.do_bench, median, with the inputs rotated over sets that together
exceed L2 (do_bench also clears L2 between calls). Prints a table last; JSON under --out
(benchmarks/harness.py: the record, the timing, the sampled checks).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness                                                          # noqa: E402
from ptxgen.ops.fp8_matmul import Fp8Matmul                             # noqa: E402
from ptxgen.ops.tc_matmul import TcMatmul                               # noqa: E402

ARCH = "sm_90a"
ROTATE_BYTES = 200 << 20            # input sets rotated until they pass this (L2: 50-60 MB)
SMALL = [("e4m3", "e4m3", "bf16", (67, 45, 64)), ("e4m3", "e4m3", "f32", (130, 72, 200)),
         ("e5m2", "e4m3", "f32", (192, 256, 512)), ("e5m2", "e5m2", "bf16", (100, 300, 256))]
ROWS = []


def row(**r):
    ROWS.append(r)
    print(json.dumps(r), flush=True)
    return r


def median_ms(calls):
    """do_bench median of cycling through `calls` (one per input set)."""
    return harness.median_ms(calls, warmup=20, rep=120)


def sets_for(nbytes):
    return max(2, -(-ROTATE_BYTES // nbytes))


def ptxgen_calls(op, shape, sets, sms):
    """One bound callable per input set (dicts of torch tensors under the op's array names),
    all of op's steps, the workspace its own per set."""
    import torch
    from ptxgen.runtime import load_steps
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    calls = []
    for arrays in sets:
        arrays = dict(arrays)
        for name, arr in op.workspace_arrays(shape, ARCH).items():
            arrays[name] = torch.from_numpy(arr.view(np.int32) if arr.dtype == np.uint32
                                            else arr).to("cuda")
        calls.append(harness.step_calls(op, shape, kernels, arrays, ARCH, sms))
    return calls


def sampled_check(op, shape, A, Bt, C, scale=1.0, n=32, seed=0):
    """C's rows at n random indices against float64 (A: M x K, Bt: N x K float64-able torch
    tensors; harness.gemm_sample) within op.error_bound, the reference and bound times scale."""
    sample = harness.gemm_sample(A, Bt, np.random.default_rng(seed), n)
    return harness.gemm_sample_ok(C, sample, op, shape, scale)


# -- fp8 ---------------------------------------------------------------------------------------------
def small_cases():
    """(label, operator, shape) run on the GPU and saved for the emulator's bit comparison."""
    from ptxgen.ops.grouped_matmul import GroupedMatmul
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    out = [(f"fp8 {fa}x{fb}->{o} {M}x{N}x{K}", Fp8Matmul(fa, o, b_dtype=fb), dict(M=M, N=N, K=K))
           for fa, fb, o, (M, N, K) in SMALL]
    s64 = dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=4)
    out.append(("bf16 split-K 3 37x200x1000", TcMatmul("bf16", "bf16", TcMatmulSchedule(
        **s64, split_k=3)), dict(M=37, N=200, K=1000)))
    out.append(("fp8 split-K 2 16x130x520", Fp8Matmul("e4m3", "bf16", TcMatmulSchedule(
        **s64, split_k=2).for_dtype("e4m3")), dict(M=16, N=130, K=520)))
    out.append(("grouped bf16 offsets 300x136x72 G5", GroupedMatmul(
        "bf16", "bf16", TcMatmulSchedule(**dict(s64, stages=3))), dict(M=300, N=136, K=72, G=5)))
    out.append(("grouped e4m3 masked 192x80x64 G3", GroupedMatmul(
        "e4m3", "f32", TcMatmulSchedule(**dict(s64, stages=3)).for_dtype("e4m3"), "masked"),
        dict(M=192, N=80, K=64, G=3)))
    odd = dict(M=200, N=300, K=520)         # 5 k-blocks, the last partial
    out += [(f"fp8 block scales {v} 200x300x520", fp8_op(v, odd), odd)
            for v in ("block_f0", "block_f1", "block_m256", "block_n256")]
    return out


def part_fp8emu(outdir):
    from ptxgen.runtime import load_steps, run_steps
    saved = {}
    for i, (label, op, shape) in enumerate(small_cases()):
        arrays = op.make_inputs(shape, np.random.default_rng(1000 + i))
        inputs = {k: v.copy() for k, v in arrays.items()}
        arrays.update(op.workspace_arrays(shape, ARCH))
        run_steps(op, shape, load_steps(op, shape, op.build(shape, ARCH), ARCH), arrays, ARCH)
        ok, worst = op.check(shape, arrays)
        row(part="fp8emu", case=label, gpu_ok=ok, worst=worst)
        for k, v in inputs.items():
            saved[f"case{i}__{k}"] = v
        saved[f"case{i}__gpu"] = arrays["C"]
    np.savez_compressed(os.path.join(outdir, "small_gpu.npz"), **saved)


def recheck(path):
    """The emulator on the saved inputs of part_fp8emu, bit for bit against the GPU's C."""
    from ptxgen.emu import run_operator
    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    for i, (label, op, shape) in enumerate(small_cases()):
        if f"case{i}__gpu" not in data:
            continue
        arrays = {k.split("__")[1]: v.copy() for k, v in data.items()
                  if k.startswith(f"case{i}__") and not k.endswith("__gpu")}
        run_operator(op, shape, arrays, ARCH)
        g, e = data[f"case{i}__gpu"], arrays["C"]
        same = (g == e) | (np.isnan(g) & np.isnan(e)) if g.dtype.kind == "f" else g == e
        print(f"{label}: emulator bit-equal to the GPU on {np.mean(same):.4%} of C "
              f"(emulator within the bound: {op.check(shape, arrays)[0]})")


def block_check(op, shape, A, Bt, C, sa, sb, n=16, seed=0):
    """Block-scaled C's sampled rows against float64 (op.reference's sum and bound)."""
    import torch
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(shape["M"], n, replace=False))
    ti = torch.tensor(idx, device=A.device)
    arrays = dict(A=A[ti].view(torch.uint8).cpu().numpy(), Bt=Bt.view(torch.uint8).cpu().numpy(),
                  a_scales=sa[:, ti].cpu().numpy(), b_scales=sb.cpu().numpy())
    ref = op.reference(dict(shape, M=n), arrays)
    got = C[ti].double().cpu().numpy()
    return bool(np.isfinite(got).all() and (np.abs(got - ref["C"]) <= ref["bound"]).all())


FP8_VARIANTS = {"auto": "auto",
                "x2f0tma": dict(cluster_m=2, inflight=0, epilogue="tma", stages=3),
                "tma": dict(epilogue="tma", stages=3)}
# block scales: fields replacing those of the block-scaled operator's own schedule (the
# ping-pong's third accumulator leaves no registers for more m blocks or consumers; the
# m256/n256 tiles run their two blocks per consumer through one block accumulator, serially)
BLOCK_VARIANTS = {"block": {}, "block_f0": dict(inflight=0), "block_f1": dict(inflight=1),
                  "block_f1s6": dict(inflight=1, stages=6),
                  "block_f1x1": dict(inflight=1, cluster_m=1),
                  "block_f1x2": dict(inflight=1, cluster_m=2),
                  "block_m256": dict(BM=256, stages=3), "block_n256": dict(BN=256, stages=3),
                  "block_m256x1": dict(BM=256, stages=3, cluster_m=1)}
# per size, the per-tensor row first: the block rows' x_per_tensor divides by it
FP8_RUNS = ((4096, "auto"), (4096, "block_f0"), (4096, "block_f1"), (4096, "block_m256"),
            (8192, "auto"), (8192, "block_f0"), (8192, "block_f1"), (8192, "block_f1s6"),
            (8192, "block_m256"), (8192, "block_n256"))


def size_runs(spec, known):
    """"4096:auto,8192:block_f1" -> ((4096, "auto"), (8192, "block_f1")), each variant one of
    `known`."""
    runs = []
    for item in spec.split(","):
        n, _, v = item.partition(":")
        if v not in known:
            raise argparse.ArgumentTypeError(f"unknown variant {v!r} (one of {', '.join(known)})")
        runs.append((int(n), v))
    return tuple(runs)


def fp8_runs(spec):
    """--fp8-runs: SIZE:VARIANT of FP8_VARIANTS or BLOCK_VARIANTS."""
    return size_runs(spec, [*FP8_VARIANTS, *BLOCK_VARIANTS])


def fp8_op(v, shape):
    """The operator of fp8 variant v: per-tensor (FP8_VARIANTS) or block-scaled
    (BLOCK_VARIANTS, over the block operator's schedule for shape)."""
    import dataclasses
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    if v in BLOCK_VARIANTS:
        sched = Fp8Matmul("e4m3", "bf16", scaling="block").schedule_for(shape)
        return Fp8Matmul("e4m3", "bf16", dataclasses.replace(sched, **BLOCK_VARIANTS[v]),
                         scaling="block")
    sched = FP8_VARIANTS[v]
    return Fp8Matmul("e4m3", "bf16", sched if sched == "auto" else
                     TcMatmulSchedule(**sched).for_dtype("e4m3"))


def per_tensor_ratio(n, tflops):
    """tflops over this run's per-tensor ("auto") rate at size n, None before that row."""
    ref = [r["ptxgen_tflops"] for r in ROWS if r.get("part") == "fp8" and r.get("n") == n
           and r.get("variant") == "auto" and "ptxgen_tflops" in r]
    return tflops / ref[0] if ref else None


def part_fp8(sms, runs=FP8_RUNS):
    import torch
    for n, v in runs:
        try:
            fp8_case(sms, n, v)
        except Exception as e:                      # report, go on with the next variant
            row(part="fp8", n=n, variant=v, error=f"{type(e).__name__}: {e}"[:300])
        torch.cuda.empty_cache()


def fp8_case(sms, n, v):
    import torch
    M = N = K = n
    block = v in BLOCK_VARIANTS
    shape = Fp8Matmul("e4m3", "bf16").shape(M=M, N=N, K=K)
    op = fp8_op(v, shape)
    nsets = sets_for((M + N) * K + 2 * M * N)
    sets = []
    for s in range(nsets):
        g = torch.Generator(device="cuda").manual_seed(100 + s)
        A = torch.randn(M, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
        Bt = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
        sa = torch.tensor([0.75], device="cuda")
        sb = torch.tensor([1.25], device="cuda")
        if block:
            sa = torch.rand(K // 128, M, device="cuda", generator=g) + 0.5
            sb = torch.rand(N // 128, K // 128, device="cuda", generator=g) + 0.5
        sets.append(dict(A=A, Bt=Bt, sa=sa, sb=sb,
                         C=torch.full((M, N), float("nan"), device="cuda",
                                      dtype=torch.bfloat16),
                         Cref=torch.empty((M, N), device="cuda", dtype=torch.bfloat16)))
    names = ("scale_a", "scale_b") if not block else ("a_scales", "b_scales")
    try:
        ours = ptxgen_calls(op, shape, [dict({names[0]: x["sa"], names[1]: x["sb"]},
                                             A=x["A"].view(torch.uint8),
                                             Bt=x["Bt"].view(torch.uint8),
                                             C=harness.bits16(x["C"]))
                                        for x in sets], sms)
    except Exception as e:
        return row(part="fp8", n=n, variant=v, error=f"{type(e).__name__}: {e}"[:300])

    one = torch.tensor([1.0], device="cuda")

    def scaled(x):
        def go():
            torch._scaled_mm(x["A"], x["Bt"].t(), x["sa"] if not block else one,
                             x["sb"] if not block else one, out_dtype=torch.bfloat16,
                             out=x["Cref"])
        return go
    theirs = [scaled(x) for x in sets]
    ours[0]()
    theirs[0]()
    torch.cuda.synchronize()
    x = sets[0]
    sc = float(np.float32(0.75) * np.float32(1.25))
    if block:
        ok = block_check(op, shape, x["A"], x["Bt"], x["C"], x["sa"], x["sb"])
        ok_ref, diff = None, None
    else:
        ok = sampled_check(op, shape, x["A"].float(), x["Bt"].float(), x["C"], sc)
        ok_ref = sampled_check(op, shape, x["A"].float(), x["Bt"].float(), x["Cref"], sc)
        diff = float((x["C"].float() - x["Cref"].float()).abs().max())
    t_ours, t_ref = median_ms(ours), median_ms(theirs)
    fl = 2.0 * M * N * K
    row(part="fp8", n=n, variant=v, schedule=str(op.schedule_for(shape)), sets=nsets,
        ptxgen_ms=t_ours, scaled_mm_ms=t_ref, ptxgen_tflops=fl / t_ours / 1e9,
        scaled_mm_tflops=fl / t_ref / 1e9, ratio=t_ref / t_ours,
        x_per_tensor=per_tensor_ratio(n, fl / t_ours / 1e9), ok=ok,
        scaled_mm_within_bound=ok_ref, max_diff_vs_scaled_mm=diff)
    del sets, ours, theirs


# -- bf16 skinny and square ----------------------------------------------------------------------------
def copy_bandwidth():
    import torch
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = median_ms([lambda: dst.copy_(src)])
    del src, dst
    return 2.0 * (1 << 30) / t / 1e6          # GB/s, read + write


def bf16_vs_cublas(part, M, N, K, sms, op=None, label=None):
    import torch
    op = op or TcMatmul("bf16", "bf16")
    shape = op.shape(M=M, N=N, K=K)
    nsets = sets_for(2 * ((M + N) * K + M * N))
    sets = []
    for s in range(nsets):
        g = torch.Generator(device="cuda").manual_seed(200 + s)
        A = torch.randn(M, K, device="cuda", generator=g, dtype=torch.bfloat16)
        Bt = torch.randn(N, K, device="cuda", generator=g, dtype=torch.bfloat16)
        sets.append(dict(A=A, Bt=Bt, C=torch.full((M, N), float("nan"), device="cuda",
                                                   dtype=torch.bfloat16),
                         Cref=torch.empty((M, N), device="cuda", dtype=torch.bfloat16)))
    try:
        bits = harness.bits16
        ours = ptxgen_calls(op, shape, [dict(A=bits(x["A"]), Bt=bits(x["Bt"]), C=bits(x["C"]))
                                        for x in sets], sms)
    except Exception as e:
        return row(part=part, M=M, N=N, K=K, impl=label, error=f"{type(e).__name__}: {e}"[:300])

    def cub(x):
        return lambda: torch.matmul(x["A"], x["Bt"].T, out=x["Cref"])
    theirs = [cub(x) for x in sets]
    ours[0]()
    torch.cuda.synchronize()
    x = sets[0]
    ok = sampled_check(op, shape, x["A"].float(), x["Bt"].float(), x["C"])
    t_ours, t_ref = median_ms(ours), median_ms(theirs)
    fl = 2.0 * M * N * K
    return row(part=part, M=M, N=N, K=K, impl=label or "auto",
               schedule=str(op.schedule_for(shape)), ptxgen_ms=t_ours, cublas_ms=t_ref,
               ptxgen_tflops=fl / t_ours / 1e9, cublas_tflops=fl / t_ref / 1e9,
               ratio=t_ref / t_ours, ok=ok,
               ptxgen_weight_gbs=2.0 * N * K / t_ours / 1e6,
               cublas_weight_gbs=2.0 * N * K / t_ref / 1e6)


SPLITS = {"k2_64": dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=8, split_k=2),
          "k2_128": dict(BM=128, BN=128, wgmma_n=128, stages=6, split_k=2),
          "k4_64": dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=8, split_k=4),
          "k3_128": dict(BM=128, BN=128, wgmma_n=128, stages=6, split_k=3),
          "n64k1_64": dict(BM=64, BN=64, wgmma_n=64, consumers=1, stages=8)}


# small squares: 1024^3 has 32 tiles of 128x256 and 64 of the default's 128x128 for 132 SMs,
# 2048^3 256 of 128x128 (a second round of 124); candidates that change the count or the round
# (simulated, emulated at 200x328x200 and ptxas-clean without spills before a GPU ran them)
TMA = dict(epilogue="tma")
SQUARE = {
    # 1024^3: 128 tiles of 64 x 128 in one round
    "t128x64c1": dict(BM=128, BN=64, wgmma_n=64, consumers=1, stages=4, **TMA),
    "t128x64c1f0": dict(BM=128, BN=64, wgmma_n=64, consumers=1, stages=4, inflight=0, **TMA),
    "t64x128c1": dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=4, **TMA),
    "t128x64c2d": dict(BM=128, BN=64, wgmma_n=64, consumers=2, stages=4),
    "t128x64c2x2": dict(BM=128, BN=64, wgmma_n=64, consumers=2, stages=4, cluster_m=2,
                        inflight=0, **TMA),
    # 128x128 as the default, the tune cache's quarter-wave form (TMA stores, no group in flight)
    "t128f0s6": dict(BM=128, BN=128, wgmma_n=128, stages=6, inflight=0, **TMA),
    # 2048^3: 128x128 in two rounds, or 128 larger tiles in one
    "t128s4": dict(BM=128, BN=128, wgmma_n=128, stages=4, **TMA),
    "t128c1": dict(BM=128, BN=128, wgmma_n=128, consumers=1, stages=3, **TMA),
    "t128x2f0": dict(BM=128, BN=128, wgmma_n=128, stages=4, cluster_m=2, inflight=0, **TMA),
    "t256x128": dict(BM=256, BN=128, wgmma_n=128, stages=3, **TMA),
    "t128x256f0": dict(stages=3, inflight=0, **TMA),
}
SQUARE_RUNS = tuple((1024, v) for v in ("auto", "t128x64c1", "t128x64c1f0", "t64x128c1",
                                        "t128x64c2d", "t128x64c2x2", "t128f0s6")) + \
    tuple((2048, v) for v in ("auto", "t128s4", "t128f0s6", "t128c1", "t128x2f0", "t256x128",
                              "t128x256f0"))


def square_runs(spec):
    """--square-runs: SIZE:VARIANT of "auto", SPLITS or SQUARE."""
    return size_runs(spec, ["auto", *SPLITS, *SQUARE])


def variants(part, M, N, K, sms, names):
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    for v in names:
        op = TcMatmul("bf16", "bf16", "auto" if v == "auto" else
                      TcMatmulSchedule(**SPLITS.get(v) or SQUARE[v]))
        bf16_vs_cublas(part, M, N, K, sms, op, v)


def part_skinny(sms):
    row(part="copy", copy_gbs=copy_bandwidth())
    for M in (16, 64, 128):
        variants("skinny", M, 8192, 8192, sms,
                 {16: ("auto", "k2_64", "k2_128"), 64: ("auto", "k2_64")}.get(M,
                                                                            ("auto", "k2_128")))


def part_square(sms, runs=SQUARE_RUNS):
    """Each (size, variant) of runs (split-K 2 on 128x128, k2_128, was 0.616x cuBLAS at
    1024^3: docs/data/llm_gemms_2026-12-07.json)."""
    import torch
    for n, v in runs:
        try:
            variants("square", n, n, n, sms, (v,))
        except Exception as e:                      # report, go on with the next candidate
            row(part="square", M=n, N=n, K=n, impl=v, error=f"{type(e).__name__}: {e}"[:300])
        torch.cuda.empty_cache()


def x_auto(r):
    """r's ptxgen rate over the default's ("auto") at its shape in this run, or None."""
    ref = [x["ptxgen_ms"] for x in ROWS if x["part"] == r["part"] and x.get("impl") == "auto"
           and "ptxgen_ms" in x and (x["M"], x["N"], x["K"]) == (r["M"], r["N"], r["K"])]
    return ref[0] / r["ptxgen_ms"] if ref else None


# -- grouped --------------------------------------------------------------------------------------------
UNEVEN = [64, 4096, 256, 3072, 1536, 4096, 1024, 2240]
# the grouped GEMM's schedules timed beside the default ("auto"): key suffix, schedule fields
GROUPED_VARIANTS = (("_tma", dict(epilogue="tma", stages=3)),
                    ("_tma_f0", dict(epilogue="tma", stages=3, inflight=0)))


def part_grouped(sms):
    import torch
    G, K, N = 8, 4096, 4096
    for name, counts in (("even", [2048] * G), ("uneven", UNEVEN)):
        T_ = sum(counts)
        offs = torch.tensor(np.cumsum(counts), device="cuda", dtype=torch.int32)
        nsets = sets_for(2 * (T_ * K + G * K * N + T_ * N))
        sets = []
        for s in range(nsets):
            g = torch.Generator(device="cuda").manual_seed(300 + s)
            x = torch.randn(T_, K, device="cuda", generator=g, dtype=torch.bfloat16)
            w = torch.randn(G, N, K, device="cuda", generator=g, dtype=torch.bfloat16)
            sets.append(dict(x=x, w=w, out=torch.empty(T_, N, device="cuda",
                                                       dtype=torch.bfloat16)))
        fl = 2.0 * T_ * K * N
        r = dict(part="grouped", case=name, tokens=T_, counts=counts)
        try:
            def gm(s):
                return lambda: torch._grouped_mm(s["x"], s["w"].transpose(-2, -1), offs=offs,
                                                 out_dtype=torch.bfloat16)
            t = median_ms([gm(s) for s in sets])
            r.update(grouped_mm_ms=t, grouped_mm_tflops=fl / t / 1e9)
        except Exception as e:
            r["grouped_mm_error"] = f"{type(e).__name__}: {e}"[:200]
        if name == "even":
            def bm(s):
                return lambda: torch.bmm(s["x"].view(G, -1, K), s["w"].transpose(-2, -1),
                                         out=s["out"].view(G, -1, N))
            t = median_ms([bm(s) for s in sets])
            r.update(bmm_ms=t, bmm_tflops=fl / t / 1e9)
        # ptxgen's dense GEMM of the same FLOPs: T x K times K x N
        dense = bf16_vs_cublas("grouped-dense", T_, N, K, sms)
        r.update(dense_ptxgen_ms=dense.get("ptxgen_ms"), dense_cublas_ms=dense.get("cublas_ms"),
                 dense_ptxgen_tflops=dense.get("ptxgen_tflops"))
        from ptxgen.ops.grouped_matmul import GroupedMatmul
        from ptxgen.schedule.tc_matmul import TcMatmulSchedule
        for v, sched in (("", "auto"),) + tuple((v, TcMatmulSchedule(**f))
                                                for v, f in GROUPED_VARIANTS):
            try:
                got = grouped_ptxgen(GroupedMatmul, sets, counts, offs, G, K, N, sms, sched)
                r.update({k + v: x for k, x in got.items()})
            except Exception as e:
                r["ptxgen_error" + v] = f"{type(e).__name__}: {e}"[:300]
        row(**r)
        del sets
        torch.cuda.empty_cache()


def grouped_ptxgen(cls, sets, counts, offs, G, K, N, sms, sched="auto"):
    import torch
    T_ = sum(counts)
    op = cls("bf16", "bf16", sched)
    shape = op.shape(M=T_, N=N, K=K, G=G)
    outs = [torch.full((T_, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            for _ in sets]
    bits = harness.bits16
    calls = ptxgen_calls(op, shape, [dict(X=bits(s["x"]), W=bits(s["w"]), rows=offs, C=bits(o))
                                     for s, o in zip(sets, outs)], sms)
    calls[0]()
    torch.cuda.synchronize()
    ok = True
    ends = np.cumsum(counts)
    for gi in range(G):
        lo, hi = int(ends[gi] - counts[gi]), int(ends[gi])
        if hi == lo:
            continue
        sub = dict(M=hi - lo, N=N, K=K)
        ok &= sampled_check(TcMatmul("bf16", "bf16"), sub, sets[0]["x"][lo:hi].float(),
                            sets[0]["w"][gi].float(), outs[0][lo:hi], n=4, seed=gi)
    t = median_ms(calls)
    return dict(ptxgen_ms=t, ptxgen_tflops=2.0 * T_ * K * N / t / 1e9, ptxgen_ok=ok,
                ptxgen_schedule=str(op.schedule_for(shape)))


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def table():
    print("\n--- summary ---")
    for r in ROWS:
        if "error" in r:
            print(f"{r['part']:8} ERROR {r['error']}")
        elif r["part"] == "fp8":
            vs = r.get("x_per_tensor")
            print(f"fp8 e4m3 {r['n']}^3 bf16 C {r['variant']:10}: ptxgen "
                  f"{r['ptxgen_tflops']:.0f} TFLOP/s, _scaled_mm {r['scaled_mm_tflops']:.0f}: "
                  f"{r['ratio']:.3f}x, x per-tensor {'-' if vs is None else f'{vs:.3f}'} "
                  f"ok={r['ok']} {r['schedule']}")
        elif r["part"] in ("skinny", "square", "grouped-dense"):
            print(f"{r['part']:8} {r['M']}x{r['N']}x{r['K']} {r['impl']}: ptxgen "
                  f"{r['ptxgen_ms'] * 1e3:.1f} us ({r['ptxgen_tflops']:.0f} TFLOP/s, weights "
                  f"{r['ptxgen_weight_gbs']:.0f} GB/s), cuBLAS {r['cublas_ms'] * 1e3:.1f} us "
                  f"({r['cublas_weight_gbs']:.0f} GB/s): {r['ratio']:.3f}x cuBLAS, "
                  f"{fmt(x_auto(r))}x auto ok={r['ok']} {r['schedule']}")
        elif r["part"] == "fp8emu":
            print(f"small    {r['case']}: GPU within the float64 bound: {r['gpu_ok']}")
        elif r["part"] == "grouped":
            dense, gm = r.get("dense_ptxgen_tflops"), r.get("grouped_mm_tflops")
            for v in [""] + [v for v, _ in GROUPED_VARIANTS]:
                tf = r.get("ptxgen_tflops" + v)
                if tf is None:
                    print(f"grouped  {r['case']}{v}: {r.get('ptxgen_error' + v)}")
                    continue
                than = [f"{tf / x:.3f}x {what} ({x:.0f})"
                        for x, what in ((dense, "dense"), (gm, "_grouped_mm")) if x]
                print(f"grouped  {r['case']}{v or ' (default)'}: {tf:.0f} TFLOP/s, "
                      f"{', '.join(than)} ok={r['ptxgen_ok' + v]} {r['ptxgen_schedule' + v]}")
        elif r["part"] == "copy":
            print(f"copy     {r['copy_gbs']:.0f} GB/s (read + write)")
        else:
            print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="fp8emu,fp8,skinny,square,grouped")
    ap.add_argument("--fp8-runs", type=fp8_runs, default=FP8_RUNS,
                    help="the fp8 part's SIZE:VARIANT list (default: "
                         + ",".join(f"{n}:{v}" for n, v in FP8_RUNS) + ")")
    ap.add_argument("--square-runs", type=square_runs, default=SQUARE_RUNS,
                    help="the square part's SIZE:VARIANT list (default: "
                         + ",".join(f"{n}:{v}" for n, v in SQUARE_RUNS) + ")")
    harness.out_argument(ap)
    ap.add_argument("--recheck", metavar="NPZ")
    args = ap.parse_args()
    if args.recheck:
        return recheck(args.recheck)
    from ptxgen.runtime.device import sm_count
    sms = sm_count()
    info = harness.run_info(sms=sms)
    print(json.dumps(info), flush=True)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    for part in args.parts.split(","):
        try:
            if part == "fp8emu":
                part_fp8emu(args.out)
            elif part == "fp8":
                part_fp8(sms, args.fp8_runs)
            elif part == "square":
                part_square(sms, args.square_runs)
            else:
                globals()[f"part_{part}"](sms)
        except Exception as e:
            import traceback
            traceback.print_exc()
            row(part=part, error=f"{type(e).__name__}: {e}"[:300])
        print(f"[{part} done at {time.time() - t0:.0f} s]", flush=True)
        harness.save_json(args.out, "llm_gemms.json", dict(info=info, rows=ROWS))
    table()


if __name__ == "__main__":
    main()
