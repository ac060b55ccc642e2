"""Tensor-core GEMM on the GPU: ptxgen's sm_90a kernel against cuBLAS (torch.matmul), one run.

    python benchmarks/tc_matmul.py [--shapes 4096,8192] [--variants default,...] [--out DIR]

Correctness first, on fresh random inputs: small odd shapes against the float64 reference
(every element, TcMatmul.check's accumulation bound), and for each timed shape a float64 check
of sampled rows plus the largest difference from cuBLAS's own result. Timing: GPU time per call
(ptxgen.runtime.time_calls, held batches) for both sides, bf16 C (torch.matmul's output type).
Prints a table last; writes the rows as JSON under --out.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ptxgen.emit import emit_module                                   # noqa: E402
from ptxgen.ops.tc_matmul import TcMatmul                             # noqa: E402
from ptxgen.runtime import (bound_launch, launch, load_kernel, load_steps,  # noqa: E402
                            time_calls)
from ptxgen.runtime.device import sm_count                            # noqa: E402
from ptxgen.runtime.tensormap import max_cluster_ctas                 # noqa: E402
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
    "auto": "auto",                  # the operator's per-shape choice (default_tc_schedule)
}
SMALL = [(67, 45, 40), (200, 136, 72), (129, 257, 64), (300, 520, 136), (1000, 777, 1032)]
NAMED = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "6144": (6144, 6144, 6144),
         "odd": (4095, 4097, 4093), "llm1": (16384, 4096, 4096), "llm2": (4096, 14336, 4096),
         "llm3": (128, 8192, 8192)}


def load(op, shape):
    m = op.build(shape, ARCH)
    k = m.kernel(op.kernel_name())
    return load_kernel(emit_module(m, ARCH), k.name, k.params, k.directives)


def resident_ctas(op, shape, kern, sms):
    """The persistent grid: every SM, or the CTAs of the clusters that fit at once."""
    s = op.schedule_for(shape)
    if s.cluster_m == 1:
        return sms
    L = op.launch(shape, sms)
    return max_cluster_ctas(kern, L.block, L.shared_bytes, s.cluster_m)


def check_small(rng, sms):
    rows = []
    cases = [(dtype, out, sched, mnk) for out in ("f32", "bf16") for dtype in ("bf16", "f16")
             for sched in (VARIANTS["default"], VARIANTS["x2"], VARIANTS["x2f0tma"])
             for mnk in SMALL]
    for dtype, out, sched, (M, N, K) in cases:
        op = TcMatmul(dtype=dtype, out=out, schedule=sched)
        shape = op.shape(M=M, N=N, K=K)
        arrays = op.make_inputs(shape, rng)
        L = op.launch(shape, sms)
        launch(load(op, shape), L.grid, L.block, op.kernel_args(shape, arrays), L.shared_bytes)
        ok, worst = op.check(shape, arrays)
        rows.append(dict(dtype=dtype, out=out, shape=(M, N, K), schedule=str(sched), ok=ok,
                         worst=worst))
    return rows


def sampled_reference(op, shape, A, Bt, rng, n=48):
    """(row indices, float64 rows of A @ B, their error bounds) for n random rows of C."""
    import torch
    idx = np.sort(rng.choice(shape["M"], size=min(n, shape["M"]), replace=False))
    a = A[torch.tensor(idx, device=A.device)].double().cpu().numpy()
    bt = Bt.double().cpu().numpy()
    return idx, a @ bt.T, op.error_bound(shape, np.abs(a) @ np.abs(bt).T)


def sampled_ok(C, ref):
    import torch
    idx, want, bound = ref
    got = C[torch.tensor(idx, device=C.device)].double().cpu().numpy()
    return bool(np.all(np.isfinite(got)) and np.all(np.abs(got - want) <= bound))


def bench(shape_names, variants, rng, sms):
    """cuBLAS and each variant on the same fresh inputs per shape (all of the operator's steps:
    operand padding for K not a multiple of 8 included)."""
    import torch
    rows = []
    for sname in shape_names:
        M, N, K = NAMED[sname]
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        Bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * M * N * K
        t_cublas = time_calls(lambda: torch.matmul(A, Bt.T, out=ref))
        rows.append(dict(shape=sname, impl="cublas", ms=t_cublas, tflops=flops / t_cublas / 1e9))
        ref_rows = None
        for vname in variants:
            op = TcMatmul("bf16", "bf16", VARIANTS[vname])
            shape = op.shape(M=M, N=N, K=K)
            if ref_rows is None:
                ref_rows = sampled_reference(op, shape, A, Bt, rng)
            C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            arrays = {"A": A.view(torch.int16), "Bt": Bt.view(torch.int16),
                      "C": C.view(torch.int16)}
            for name, (dims, _) in op.workspace(shape, ARCH).items():
                arrays[name] = torch.zeros(dims, device="cuda", dtype=torch.int16)
            try:
                module = op.build(shape, ARCH)
                kernels = load_steps(op, shape, module, ARCH)
                ctas = resident_ctas(op, shape, kernels[op.kernel_name()], sms)
                gos = [bound_launch(kernels[st.kernel], st.launch.grid, st.launch.block,
                                    st.args(arrays), st.launch.shared_bytes)
                       for st in op.steps(shape, ARCH, ctas)]

                def go():
                    for g in gos:
                        g()
                go()
                torch.cuda.synchronize()
                ok = sampled_ok(C, ref_rows)
                diff = float((C.float() - ref.float()).abs().max())
                t = time_calls(go)
            except Exception as e:                                  # report, keep going
                rows.append(dict(shape=sname, impl=vname, error=str(e)[:200]))
                continue
            rows.append(dict(shape=sname, impl=vname, ms=t, tflops=flops / t / 1e9, ok=ok,
                             max_diff_vs_cublas=diff, ratio=t_cublas / t, ctas=ctas,
                             schedule=str(op.schedule_for(shape))))
    return rows


def print_row(r):
    if "error" in r:
        print(f"{r['shape']:8} {r['impl']:12} ERROR {r['error']}", flush=True)
        return
    print(f"{r['shape']:8} {r['impl']:12} {r['ms']:8.4f} {r['tflops']:8.1f} "
          f"{r.get('ratio', 1.0):8.3f} {str(r.get('ok', '')):>5} "
          f"{r.get('max_diff_vs_cublas', 0.0):8.3g}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096,8192")
    p.add_argument("--variants", default="default")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--skip-small", action="store_true")
    args = p.parse_args()
    rng = np.random.default_rng(int(time.time()))
    sms = sm_count()
    import torch
    info = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                cuda=torch.version.cuda, sms=sms, date=time.strftime("%Y-%m-%d %H:%M"))
    print(info, flush=True)
    result = dict(info=info, rows=[], small=[])
    path = os.path.join(args.out, "tc_matmul.json")
    # timed shapes first (their rows are written as they come), the small odd shapes last
    for sname in args.shapes.split(","):
        rows = bench([sname], args.variants.split(","), rng, sms)
        for r in rows:
            print_row(r)
        result["rows"] += rows
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    if not args.skip_small:
        result["small"] = check_small(rng, sms)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        bad = [r for r in result["small"] if not r["ok"]]
        print(f"small odd shapes: {len(result['small']) - len(bad)}/{len(result['small'])} "
              f"correct" + "".join(f"\n  FAIL {r}" for r in bad))
    print(f"{'shape':8} {'impl':12} {'ms':>8} {'TFLOP/s':>8} {'x cuBLAS':>8} {'ok':>5} "
          f"{'maxdiff':>8}")
    for r in result["rows"]:
        print_row(r)


if __name__ == "__main__":
    main()
