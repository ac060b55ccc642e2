"""Fused GEMM epilogues on the GPU (issue 27): bias + GELU(tanh) bf16 against ptxgen's plain GEMM,
torch eager and torch.compile(max-autotune-no-cudagraphs); a block-API bk.dot kernel with bias +
SiLU against the library GEMM with the same epilogue; emulator-vs-GPU bit equality.

    python benchmarks/tc_epilogue.py [--shapes 4096,8192] [--autotune 4096] [--budget-s S]

Correctness first, on fresh random inputs: each ptxgen result's sampled rows against float64
(TcMatmul.reference with rows=: the epilogue's float64 value and propagated bound, plus a bf16
C's rounding), torch's against the same rows. Times: triton.testing.do_bench medians, each
call on the next of several input sets (together larger than L2). Prints a table last; writes
JSON under --out.
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import harness                                                          # noqa: E402
from ptxgen.ops.tc_matmul import TcMatmul                              # noqa: E402
from ptxgen.runtime import load_steps                                   # noqa: E402
from ptxgen.runtime.device import sm_count                             # noqa: E402
from tc_matmul import resident_ctas                                     # noqa: E402

ARCH = "sm_90a"
SETS = {4096: 3, 8192: 2}       # input sets rotated: 3 x 64 MB, 2 x 256 MB of A and B (> L2)


def ptxgen_calls(op, shape, sets, sms):
    """One callable per input set (arrays: torch tensors by operator name) launching all of
    op's steps (harness.step_calls)."""
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    ctas = resident_ctas(op, shape, kernels[op.kernel_name()], sms)
    return [harness.step_calls(op, shape, kernels,
                               {k: harness.bits16(v) if hasattr(v, "element_size") else v
                                for k, v in arrays.items()}, ARCH, ctas)
            for arrays in sets]


def to_np_bits(t):
    import torch
    return t.view(torch.int16).cpu().numpy().view(np.uint16)


def check_rows(op, shape, arrays_t, C, idx):
    """C's rows idx against op's float64 reference (its epilogue and bound) on the same inputs."""
    import torch
    host = {k: to_np_bits(v) if v.dtype == torch.bfloat16 else v.cpu().numpy()
            for k, v in arrays_t.items() if k != "C"}
    ref = op.reference(shape, host, rows=idx)
    got = op.values(to_np_bits(C)[idx], op.out)
    err = np.abs(got - ref["C"])
    return bool(np.all(np.isfinite(got)) and np.all(err <= ref["bound"])), \
        float(np.max(err / ref["bound"])), ref


def torch_rows_ok(out, ref, idx):
    got = out[idx].double().cpu().numpy()
    return float(np.max(np.abs(got - ref["C"]) / np.maximum(np.abs(ref["C"]), 1e-3)))


def gemm_rows(rows, M, N, K, rng, sms, args, t0):
    import torch
    import torch.nn.functional as F
    flops = 2.0 * M * N * K
    nsets = SETS.get(M, 2)
    sets = []
    for _ in range(nsets):
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        Bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        # bf16 values held in f32: torch adds the same bias in bf16
        bias = torch.randn(N, device="cuda").to(torch.bfloat16).float()
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        sets.append(dict(A=A, Bt=Bt, bias=bias, C=C))
    idx = np.sort(rng.choice(M, size=32, replace=False))
    res = {}
    for name, epi in (("ptxgen plain", None), ("ptxgen bias_gelu", "bias_gelu"),
                      ("ptxgen bias_gelu:fast", "bias_gelu:fast")):
        op = TcMatmul("bf16", "bf16", epilogue=epi)
        shape = op.shape(M=M, N=N, K=K)
        calls = ptxgen_calls(op, shape, [{k: v for k, v in s.items()
                                          if k in op.inputs or k == "C"} for s in sets], sms)
        calls[0]()
        torch.cuda.synchronize()
        ok, worst, ref = check_rows(op, shape, sets[0], sets[0]["C"], idx)
        if epi == "bias_gelu":
            res["ref"] = ref
        ms = harness.median_ms(calls)
        res[name] = ms
        rows.append(dict(shape=M, impl=name, ms=ms, tflops=flops / ms / 1e9, ok=ok,
                         worst_over_bound=worst, schedule=str(op.schedule_for(shape))))
        print(rows[-1], flush=True)

    def f(a, b, bias):
        return F.gelu(a @ b + bias, approximate="tanh")
    bs = [(s["A"], s["Bt"].T, s["bias"].to(torch.bfloat16)) for s in sets]
    impls = [("torch eager", f)]
    if str(M) in args.autotune.split(","):
        impls.append(("torch max-autotune", None))
    for name, fn in impls:
        if fn is None:
            if time.time() - t0 > args.budget_s:
                rows.append(dict(shape=M, impl=name, skipped="budget"))
                print(rows[-1], flush=True)
                continue
            tc = time.time()
            fn = torch.compile(f, mode="max-autotune-no-cudagraphs")
            fn(*bs[0])
            torch.cuda.synchronize()
            compile_s = time.time() - tc
        else:
            compile_s = None
        out = fn(*bs[0])
        torch.cuda.synchronize()
        rel = torch_rows_ok(out, res["ref"], idx)
        state = [0]

        def go(fn=fn):
            fn(*bs[state[0] % len(bs)])
            state[0] += 1
        ms = harness.median_ms(go)
        rows.append(dict(shape=M, impl=name, ms=ms, tflops=flops / ms / 1e9,
                         max_rel_vs_f64=rel, compile_s=compile_s))
        print(rows[-1], flush=True)
    base = {r["impl"]: r["ms"] for r in rows if r["shape"] == M and "ms" in r}
    for variant in ("ptxgen bias_gelu", "ptxgen bias_gelu:fast"):
        fused = base.get(variant)
        for r in rows:
            if r["shape"] == M and "ms" in r and fused:
                r.setdefault("speedup_of", {})[variant] = r["ms"] / fused


def block_rows(rows, rng, sms, quick=False):
    """The tutorial's block-API kernel (bias + SiLU) at 4096^3 against the library GEMM with
    the same epilogue, both B row-major (and the library's column-major B)."""
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "docs"))
    from ptxgen.frontends import block as bk

    @bk.kernel(num_warps=8)
    def mm_bias_silu(A: bk.pointer_to(bk.bf16), B: bk.pointer_to(bk.bf16),
                     C: bk.pointer_to(bk.bf16), bias: bk.pointer, M: bk.int32, N: bk.int32,
                     K: bk.int32, BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
        rm = bk.program_id(0) * BM + bk.arange(0, BM)
        rn = bk.program_id(1) * BN + bk.arange(0, BN)
        rk = bk.arange(0, BK)
        acc = bk.zeros([BM, BN])
        for k in bk.range(0, K, BK):
            a = bk.load(A + rm[:, None] * K + (k + rk)[None, :])
            b = bk.load(B + (k + rk)[:, None] * N + rn[None, :])
            acc += bk.dot(a, b)
        acc = acc + bk.load(bias + rn)[None, :]
        acc = acc * bk.sigmoid(acc)
        bk.store(C + rm[:, None] * N + rn[None, :], acc)

    # the kernel object's own GPU launch at a small odd shape (numpy arrays, bf16 as bits)
    try:
        op, _ = mm_bias_silu.tc_operator(BM=128, BN=256, BK=64)
        shape = op.shape(M=67, N=45, K=64)
        h = op.make_inputs(shape, np.random.default_rng(5))
        mm_bias_silu[(1,)](h["A"], h["B"], h["C"], h["bias"], np.int32(67), np.int32(45),
                           np.int32(64), BM=128, BN=256, BK=64)
        rows.append(dict(impl="block-API kernel[grid](...) launch 67x45x64",
                         ok=op.check(shape, h)[0]))
    except Exception as e:                                          # report, keep going
        rows.append(dict(impl="block-API kernel[grid](...) launch", error=f"{type(e).__name__}: "
                         f"{e}"[:300]))
    print(rows[-1], flush=True)
    M = N = K = 4096
    flops = 2.0 * M * N * K
    sets = []
    for _ in range(3):
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        B = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        sets.append(dict(A=A, B=B, Bt=B.T.contiguous(), bias=torch.randn(N, device="cuda"),
                         C=torch.full((M, N), float("nan"), device="cuda",
                                      dtype=torch.bfloat16)))
    idx = np.sort(rng.choice(M, size=32, replace=False))
    variants = []
    for math, suffix in (("ieee", ""), ("fast", ":fast")):
        blk, _ = mm_bias_silu.tc_operator(math=math, BM=128, BN=256, BK=64)
        variants += [(f"block-API bias_silu{suffix} (B row)", blk),
                     (f"library bias_silu{suffix} (B row)",
                      TcMatmul("bf16", "bf16", b_layout="row", epilogue="bias_silu" + suffix)),
                     (f"library bias_silu{suffix} (B col)",
                      TcMatmul("bf16", "bf16", epilogue="bias_silu" + suffix))]
    if quick:
        variants = [v for v in variants if "(B col)" not in v[0]]
    else:
        variants.append(("library plain (B row)", TcMatmul("bf16", "bf16", b_layout="row")))
    for name, op in variants:
        shape = op.shape(M=M, N=N, K=K)
        calls = ptxgen_calls(op, shape, [{k: v for k, v in s.items()
                                          if k in op.inputs or k == "C"} for s in sets], sms)
        calls[0]()
        torch.cuda.synchronize()
        ok, worst, _ = check_rows(op, shape, {k: v for k, v in sets[0].items()
                                              if k in op.inputs}, sets[0]["C"], idx)
        ms = harness.median_ms(calls)
        rows.append(dict(shape=M, impl=name, ms=ms, tflops=flops / ms / 1e9, ok=ok,
                         worst_over_bound=worst, schedule=str(op.schedule_for(shape))))
        print(rows[-1], flush=True)


def emulator_rows(rows, quick=False):
    """Same inputs on the GPU and the CPU emulator at small odd shapes: bit equality of C."""
    from ptxgen.emu import run_operator
    from ptxgen.runtime import run_steps
    for epi, out, (M, N, K), arch in (("bias_gelu", "bf16", (67, 45, 64), ARCH),
                                      ("bias_gelu", "f32", (67, 45, 41), ARCH),
                                      ("gelu_erf", "f32", (70, 131, 72), ARCH),
                                      ("bias_silu", "f32", (67, 45, 64), "sm_80"),
                                      ("bias_gelu:fast", "f32", (67, 45, 64), ARCH),
                                      ("bias_gelu:fast", "bf16", (67, 45, 64), ARCH))[
                                          ::(2 if quick else 1)]:
        op = TcMatmul("bf16", out, epilogue=epi)
        shape = op.shape(M=M, N=N, K=K)
        seed = 1234 + M
        try:
            gpu = dict(op.make_inputs(shape, np.random.default_rng(seed)))
            kernels = load_steps(op, shape, op.build(shape, arch), arch)
            gpu.update(op.workspace_arrays(shape, arch))
            run_steps(op, shape, kernels, gpu, arch)
            emu = op.make_inputs(shape, np.random.default_rng(seed))
            run_operator(op, shape, emu, arch)
            same = gpu["C"].view(np.uint8).reshape(M, N, -1) == \
                emu["C"].view(np.uint8).reshape(M, N, -1)
            rows.append(dict(impl=f"emu vs GPU {epi} {out} {arch}", shape=(M, N, K),
                             gpu_ok=op.check(shape, gpu)[0], emu_ok=op.check(shape, emu)[0],
                             bit_equal=float(same.all(axis=-1).mean())))
        except Exception as e:                                      # report, keep going
            rows.append(dict(impl=f"emu vs GPU {epi} {out} {arch}", shape=(M, N, K),
                             error=f"{type(e).__name__}: {e}"[:300]))
        print(rows[-1], flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096,8192")
    p.add_argument("--autotune", default="4096", help="shapes to run max-autotune at")
    p.add_argument("--budget-s", type=float, default=150.0,
                   help="start no max-autotune compile after this many seconds")
    p.add_argument("--skip", default="", help="parts to skip: emu,block,gemm")
    p.add_argument("--quick", action="store_true",
                   help="half the emulator cases, no column-major-B block comparison")
    harness.out_argument(p)
    args = p.parse_args()
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    sms = sm_count()
    info = harness.run_info(sms=sms)
    print(info, flush=True)
    rows = []
    skip = args.skip.split(",")
    parts = [("emu", lambda: emulator_rows(rows, args.quick)),
             ("block", lambda: block_rows(rows, rng, sms, args.quick))]
    # max-autotune's compile is the long part: its shapes last
    shapes = sorted(map(int, args.shapes.split(",")),
                    key=lambda s: str(s) in args.autotune.split(","))
    parts += [("gemm", lambda s=s: gemm_rows(rows, s, s, s, rng, sms, args, t0))
              for s in shapes]
    for name, fn in parts:
        if name in skip:
            continue
        try:
            fn()
        except Exception as e:                                      # report, keep going
            import traceback
            traceback.print_exc()
            rows.append(dict(impl=name, error=f"{type(e).__name__}: {e}"[:300]))
        harness.save_json(args.out, "tc_epilogue.json", dict(info=info, rows=rows))
    print(info)
    for r in rows:
        if "ms" in r:
            sp = " ".join(f"{k.split()[-1]}/this={v:.3f}"
                          for k, v in r.get("speedup_of", {}).items())
            print(f"{str(r['shape']):6} {r['impl']:32} {r['ms']:8.4f} ms {r['tflops']:7.1f} "
                  f"TFLOP/s ok={r.get('ok', '')} {sp} {r.get('schedule', '')}")
        else:
            print(r)
    print(f"wall {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
