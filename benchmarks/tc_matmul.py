"""Tensor-core GEMM on the GPU: ptxgen's sm_90a kernel (bf16, f16, tf32 inputs) against cuBLAS
(torch.matmul in bf16, f16, and tf32 with TF32 allowed) and an autotuned Triton tl.dot matmul in
bf16 (benchmarks/triton_kernels.py), one run.

    python benchmarks/tc_matmul.py [--shapes 4096,8192,odd] [--variants auto,...]
                                   [--dtypes bf16,f16,tf32] [--budget-s S] [--out DIR]

Correctness first, on fresh random inputs: small odd shapes on the GPU and on the CPU emulator
(same inputs; each against the float64 reference with TcMatmul.check's bound, and the fraction
of bit-equal elements between the two), and for each timed shape and implementation a float64
check of sampled rows (the operator's bound for that input and output type) plus the largest
difference from cuBLAS's result. Timing: GPU time per call (ptxgen.runtime.time_calls, held
batches) for every implementation; ratios against cuBLAS of the same input type in this run.
Prints a table last; writes the rows as JSON under --out (benchmarks/harness.py: the record,
the timing, the sampled checks).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness                                                        # noqa: E402
from ptxgen.ops.tc_matmul import TcMatmul                             # noqa: E402
from ptxgen.runtime import load_steps                                 # noqa: E402
from ptxgen.runtime.device import sm_count                            # noqa: E402
from ptxgen.runtime.tensormap import max_cluster_ctas                 # noqa: E402
from ptxgen.lower import fused_pad as fpad                       # noqa: E402
from ptxgen.schedule.tc_matmul import TcMatmulSchedule                # noqa: E402

ARCH = "sm_90a"
VARIANTS = {
    "default": TcMatmulSchedule(),
    "x2": TcMatmulSchedule(cluster_m=2),
    "x2f0": TcMatmulSchedule(cluster_m=2, inflight=0),
    "x2f0g4": TcMatmulSchedule(cluster_m=2, inflight=0, group_m=4),
    "tma": TcMatmulSchedule(epilogue="tma", stages=3),
    "x2tma": TcMatmulSchedule(cluster_m=2, epilogue="tma", stages=3),
    "x2f0tma": TcMatmulSchedule(cluster_m=2, inflight=0, epilogue="tma", stages=3),
    "n128": TcMatmulSchedule(BN=128, wgmma_n=128, stages=6),
    # C staged row-major and stored one TMA row segment at a time (any N; here also at even N)
    "rows": TcMatmulSchedule(epilogue="rows", stages=3),
    # 256x128 tiles (two consumers of 128 rows, wgmma n128): 16 x 33 = 528 = 4 x 132 tiles at
    # N = 4097 where 128x256 tiles make 32 x 17 = 544 (5 rounds)
    "t256": TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, epilogue="tma", stages=3),
    "t256x2f0": TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, epilogue="tma", stages=3,
                                 cluster_m=2, inflight=0),
    # the same 256x128 tiles with C stored from the fragments: at an N whose C rows are not
    # 16-byte aligned, what t256 / t256x2f0 did before "rows_st" (same run, same inputs)
    "t256d": TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=3),
    "t256x2f0d": TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=3, cluster_m=2,
                                  inflight=0),
    # an f32 C (tf32, or --out f32) staged too: its 128 KB tile leaves room for 2 stages of
    # 128x256 (with 3 or 4 stages an f32 C is stored from the fragments); n128: 4 stages
    "tma2": TcMatmulSchedule(epilogue="tma", stages=2),
    "x2f0tma2": TcMatmulSchedule(cluster_m=2, inflight=0, epilogue="tma", stages=2),
    "n128tma": TcMatmulSchedule(BN=128, wgmma_n=128, epilogue="tma", stages=4),
    "auto": "auto",                  # the operator's per-shape choice (default_tc_schedule)
}
# the operator's auto schedule on transposed operand layouts (bf16/f16 only): row-major B
# (K x N, N-major boxes, wgmma trans-b), column-major A (At, K x M), both
LAYOUTS = {"brow": dict(b_layout="row"), "acol": dict(a_layout="col"),
           "acolbrow": dict(a_layout="col", b_layout="row")}
# the operator's auto schedule with misaligned K-major operands (K % 8, tf32 K % 4) pad-copied
# then loaded by TMA, or loaded by the producer's ld.global (lower/ldg_producer.py)
# or pad-copied inside the GEMM by the producer's idle warps (lower/fused_pad.py);
# "fused4": the same with 4 staged rounds in flight per copier warp instead of 8, "fusedp1":
# with the TMA thread polling one k-block's flags at a time (fused_pad.STAGED_ROUNDS /
# POLL_AHEAD, set while that variant is built and launched)
K_PACK = {"pad": dict(k_pack="pad"), "ldg": dict(k_pack="ldg"), "fused": dict(k_pack="fused"),
          "fused4": dict(k_pack="fused"), "fused10": dict(k_pack="fused"),
          "fusedp1": dict(k_pack="fused"), "fused1": dict(k_pack="fused1")}
FUSED_KNOBS = {"fused4": dict(STAGED_ROUNDS=4), "fused10": dict(STAGED_ROUNDS=10),
               "fusedp1": dict(POLL_AHEAD=1)}
FUSED_DEFAULTS = dict(STAGED_ROUNDS=fpad.STAGED_ROUNDS, POLL_AHEAD=fpad.POLL_AHEAD)
SMALL = [(67, 45, 40), (200, 136, 72), (129, 257, 64), (300, 520, 136), (1000, 777, 1032)]
NAMED = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "6144": (6144, 6144, 6144),
         "odd": (4095, 4097, 4093), "oddn": (4096, 4097, 4096), "oddk": (4096, 4096, 4093),
         "oddm": (4095, 4096, 4096), "llm1": (16384, 4096, 4096), "llm2": (4096, 14336, 4096),
         "llm3": (128, 8192, 8192), "oddk8": (8192, 8192, 8189), "oddk2": (4096, 4096, 4094)}
NEAR = {"oddk8": "8192"}       # an odd shape's nearest multiple, where it is not "4096"


def resident_ctas(op, shape, kern, sms):
    """The persistent grid: every SM, or the CTAs of the clusters that fit at once."""
    s = op.schedule_for(shape)
    if s.cluster_m == 1:
        return sms
    L = op.launch(shape, sms)
    return max_cluster_ctas(kern, L.block, L.shared_bytes, s.cluster_m)


def emulator_agreement(rng, shapes=((67, 45, 40), (70, 131, 41))):
    """Small odd shapes on the GPU and on the CPU emulator, same fresh inputs: each against the
    float64 reference, and the fraction of C elements bit-equal between the two."""
    from ptxgen.emu import run_operator
    from ptxgen.runtime import run_steps
    rows = []
    for dtype in ("bf16", "f16", "tf32"):
        for M, N, K in shapes:
            op = TcMatmul(dtype, "f32")
            shape = op.shape(M=M, N=N, K=K)
            seed = int(rng.integers(2 ** 31))
            try:
                gpu = dict(op.make_inputs(shape, np.random.default_rng(seed)),
                           **op.workspace_arrays(shape, ARCH))
                kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
                run_steps(op, shape, kernels, gpu, ARCH)
                emu = op.make_inputs(shape, np.random.default_rng(seed))
                run_operator(op, shape, emu, ARCH)
            except Exception as e:                                  # report, keep going
                rows.append(dict(dtype=dtype, shape=(M, N, K), error=f"{type(e).__name__}: {e}"))
                continue
            same = gpu["C"].view(np.uint32) == emu["C"].view(np.uint32)
            rows.append(dict(dtype=dtype, shape=(M, N, K), gpu_ok=op.check(shape, gpu)[0],
                             emu_ok=op.check(shape, emu)[0], bit_equal=float(same.mean()),
                             max_abs_diff=float(np.max(np.abs(gpu["C"] - emu["C"])))))
    return rows


def _ptxgen_arrays(op, shape, A, Bt, C):
    """The operator's arrays as torch CUDA tensors (16-bit inputs as int16 bit patterns: the
    tensor maps and pointer checks look at element sizes), in its operand layouts (transposed
    copies made here, outside the timing), the workspace added (op.workspace_arrays)."""
    import torch
    bits = harness.bits16
    arrays = {"A": bits(A), "Bt": bits(Bt), "C": bits(C)}
    if "At" in op.inputs:
        arrays["At"] = bits(A.T.contiguous())
    if "B" in op.inputs:
        arrays["B"] = bits(Bt.T.contiguous())
    for name, arr in op.workspace_arrays(shape, ARCH).items():
        if arr.dtype == np.uint32:      # the fused copy's chunk order and flags, as filled
            arrays[name] = torch.from_numpy(arr.view(np.int32)).to("cuda")
        else:                           # padded operands: zeros of the inputs' element type
            arrays[name] = torch.zeros(arr.shape, device="cuda", dtype=bits(A).dtype)
    return arrays


def ptxgen_call(op, shape, A, Bt, C, sms, ptx=None):
    """A callable running all of op's steps (operand padding for unaligned K included; its
    `launches` attribute: one callable per step). ptx: the build's text, when edited."""
    arrays = _ptxgen_arrays(op, shape, A, Bt, C)
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH, ptx=ptx)
    ctas = resident_ctas(op, shape, kernels[op.kernel_name()], sms)
    go = harness.step_calls(op, shape, kernels, arrays, ARCH, ctas)

    def pads():
        for g in go.launches[:-1]:
            g()
    return go, ctas, (pads if len(go.launches) > 1 else None)


# (implementation, input type, C type): ptxgen's operator, cuBLAS, Triton. The 16-bit GEMMs
# write a 16-bit C (cuBLAS's f16 GEMM an f16 one, ptxgen's a bf16 one: the same bytes); tf32
# GEMMs read and write f32.
IMPLS = [("cublas", "bf16", "bf16"), ("ptxgen", "bf16", "bf16"), ("triton", "bf16", "bf16"),
         ("cublas", "f16", "f16"), ("ptxgen", "f16", "bf16"),
         ("cublas", "tf32", "f32"), ("ptxgen", "tf32", "f32")]
TORCH_IN = {"bf16": "bfloat16", "f16": "float16", "tf32": "float32"}
TORCH_OUT = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def bench(sname, variants, rng, sms, impls, rows):
    """Every implementation on the same fresh inputs per input type; ptxgen and Triton checked
    against float64 on sampled rows (the operator's bound); each ratio is against cuBLAS of the
    same input type, timed in this run. Rows are appended to `rows` as they come (a fault
    that ends the shape keeps the rows before it)."""
    import torch
    import triton_kernels
    M, N, K = NAMED[sname]
    flops = 2.0 * M * N * K
    inputs, t_ref = {}, {}
    for impl, dtype, out in impls:
        if dtype not in inputs:
            torch.manual_seed(int(rng.integers(2 ** 31)))
            dt = getattr(torch, TORCH_IN[dtype])
            A = torch.randn(M, K, device="cuda", dtype=dt)
            Bt = torch.randn(N, K, device="cuda", dtype=dt)
            inputs[dtype] = (A, Bt, harness.gemm_sample(A, Bt, rng), {})
        A, Bt, ref_rows, outs = inputs[dtype]
        for vname in (variants if impl == "ptxgen" else [None]):
            if vname in LAYOUTS and dtype == "tf32":       # tf32 wgmma has no transpose
                continue
            pack, _, sname_v = (vname or "").rpartition(":")   # "ldg:n128": k_pack, schedule
            if (vname in K_PACK or pack) and K % (16 // (4 if dtype == "tf32" else 2)) == 0:
                continue                                   # aligned K: nothing to choose
            C = torch.full((M, N), float("nan"), device="cuda",
                           dtype=getattr(torch, TORCH_OUT[out]))
            row = dict(shape=sname, impl=impl if vname in (None, "auto") else f"ptxgen-{vname}",
                       dtype=dtype, out=out)
            try:
                extra = {}
                if impl == "cublas":
                    go = harness.cublas(A, Bt, C, tf32=dtype == "tf32")
                elif impl == "triton":
                    go = triton_kernels.triton_bf16(A, Bt, C)
                else:
                    if vname in LAYOUTS or vname in K_PACK:
                        op = TcMatmul(dtype, out, "auto", **{**LAYOUTS, **K_PACK}[vname])
                    elif pack:
                        op = TcMatmul(dtype, out, VARIANTS[sname_v].for_dtype(dtype),
                                      **K_PACK[pack])
                    else:
                        sched = VARIANTS[vname]
                        op = TcMatmul(dtype, out, sched if sched == "auto" else sched.for_dtype(dtype))
                    shape = op.shape(M=M, N=N, K=K)
                    knobs = dict(FUSED_DEFAULTS, **FUSED_KNOBS.get(pack or vname, {}))
                    for k, v in knobs.items():
                        setattr(fpad, k, v)
                    try:
                        go, ctas, pads = ptxgen_call(op, shape, A, Bt, C, sms)
                    finally:
                        for k, v in FUSED_DEFAULTS.items():
                            setattr(fpad, k, v)
                    extra = dict(ctas=ctas, schedule=str(op.schedule_for(shape)),
                                 ldg=op.ldg(shape), fused=op.fused(shape),
                                 fused_knobs=knobs
                                 if any(op.fused(shape)) else None,
                                 c_store=op.schedule_for(shape).c_store(out, M, N))
                    if pads is not None:      # odd K: the operand pad copies on their own
                        extra["pad_ms"] = harness.gpu_ms(pads, target_ms=10.0)
                go()
                torch.cuda.synchronize()
                if impl == "triton":
                    extra["config"] = triton_kernels.triton_config(M, N, K)
                if impl != "cublas":
                    extra["ok"] = harness.gemm_sample_ok(C, ref_rows, TcMatmul(dtype, out),
                                                         dict(M=M, N=N, K=K))
                    extra["max_diff_vs_cublas"] = float(
                        (C.float() - outs["cublas"].float()).abs().max()) \
                        if "cublas" in outs else None
                t = harness.gpu_ms(go)
            except Exception as e:                                  # report, keep going
                rows.append(dict(row, error=f"{type(e).__name__}: {e}"[:200]))
                TABLE.show(rows[-1])
                continue
            if impl == "cublas":
                t_ref[dtype] = t
                outs["cublas"] = C
            rows.append(dict(row, ms=t, tflops=flops / t / 1e9,
                             ratio=t_ref[dtype] / t if dtype in t_ref else None, **extra))
            TABLE.show(rows[-1])
    return rows


def against_multiple(rows, default_near="4096"):
    """Issue 13's odd-shape measure: each odd shape's TFLOP/s over its nearest multiple's
    (NEAR, else default_near) in this run, per implementation, and the best ptxgen row over the
    best ptxgen row there."""
    def ok(r):
        return "tflops" in r and r.get("ok", True) is not False
    base = {(r["shape"], r["impl"], r["dtype"]): r["tflops"] for r in rows if ok(r)}
    best = {}
    for r in rows:
        if ok(r) and r["impl"].startswith("ptxgen"):
            key = (r["shape"], r["dtype"])
            best[key] = max(best.get(key, 0.0), r["tflops"])
    out = []
    for r in rows:
        near = NEAR.get(r["shape"], default_near)
        if r["shape"].startswith("odd") and ok(r) and (near, r["impl"], r["dtype"]) in base:
            out.append(f"{r['shape']:6} {r['impl']:10} {r['dtype']:5} {r['tflops']:8.1f} TFLOP/s "
                       f"= {r['tflops'] / base[(near, r['impl'], r['dtype'])]:.3f} of {near}'s")
    for (shape, dt), tf in sorted(best.items()):
        near = NEAR.get(shape, default_near)
        if shape.startswith("odd") and (near, dt) in best:
            pad = max((r.get("pad_ms") or 0.0 for r in rows if r["shape"] == shape), default=0)
            out.append(f"{shape:6} best ptxgen {dt}: {tf / best[(near, dt)]:.3f} of {near}'s "
                       f"best{f' (operand pad copies {pad:.4f} ms of it)' if pad else ''}")
    return out


TABLE = harness.Table([("shape", 6), ("impl", 8), ("dtype", 5, "in"), ("out", 5, "C")],
                      [("ms", "ms", "8.4f"), ("tflops", "TFLOP/s", "8.1f"),
                       ("ratio", "x cuBLAS", "8.3f"), ("ok", "ok", ">5"),
                       ("max_diff_vs_cublas", "maxdiff", "8.3g"), ("pad_ms", "pad ms", "7.4f"),
                       ("schedule", "schedule", "")])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096,8192,odd")
    p.add_argument("--variants", default="auto",
                   help="ptxgen schedules (VARIANTS), 'auto' = the operator's choice, operand "
                        "layouts (LAYOUTS: brow, acol, acolbrow; auto schedule) or how "
                        "misaligned K-major operands are loaded (K_PACK: pad, ldg), or "
                        "K_PACK:VARIANT (e.g. ldg:n128: that schedule with the cp.async "
                        "producer)")
    p.add_argument("--dtypes", default="bf16,f16,tf32")
    p.add_argument("--impls", default="cublas,ptxgen,triton",
                   help="implementations to time (cuBLAS is each ratio's reference)")
    harness.out_argument(p)
    p.add_argument("--skip-small", action="store_true")
    p.add_argument("--tag", default="", help="suffix of the JSON file's name")
    p.add_argument("--budget-s", type=float, default=1e9,
                   help="start no further shape after this many seconds")
    args = p.parse_args()
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    sms = sm_count()
    import torch
    import triton
    info = harness.run_info(triton=triton.__version__, cuda=torch.version.cuda, sms=sms)
    print(info, flush=True)
    result = dict(info=info, rows=[], emulator=[])
    name = f"tc_matmul{args.tag}.json"
    if not args.skip_small:
        result["emulator"] = emulator_agreement(rng)
        for r in result["emulator"]:
            print("emu vs GPU", r, flush=True)
        harness.save_json(args.out, name, result)
    dtypes = args.dtypes.split(",")
    impls = [i for i in IMPLS if i[1] in dtypes and i[0] in args.impls.split(",")]
    for sname in args.shapes.split(","):
        if time.time() - t0 > args.budget_s:
            print(f"budget: skipped {sname}", flush=True)
            continue
        try:
            bench(sname, args.variants.split(","), rng, sms, impls, result["rows"])
        except Exception as e:                                      # report, keep going
            print(f"{sname}: {type(e).__name__}: {e}", flush=True)
            result.setdefault("errors", []).append(f"{sname}: {type(e).__name__}: {e}")
        harness.save_json(args.out, name, result)
    harness.save_json(args.out, name, result)
    TABLE.print(result["rows"], "x cuBLAS: against cuBLAS of the same input type")
    for line in against_multiple(result["rows"]):
        print(line)
    for r in result["emulator"]:
        if "error" in r:
            print(f"emu vs GPU {r['dtype']:5} {str(r['shape']):15} ERROR {r['error'][:200]}")
            continue
        print(f"emu vs GPU {r['dtype']:5} {str(r['shape']):15} gpu_ok={r['gpu_ok']} "
              f"emu_ok={r['emu_ok']} bit_equal={r['bit_equal']:.4f} "
              f"max|diff|={r['max_abs_diff']:.3g}")
    print(f"wall {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
