"""Where the fused pad copy's time goes (an experiment: the variants below are built by patching
the lowering in this process only; their C is wrong where said, and only times are kept).

At 4096x4096x4093 and 8192x8192x8189 (bf16 in and out), one run, GPU time per call:
  pad        the operator's pad copies + GEMM (k_pack="pad"), and its GEMM launch alone
  pad208     that GEMM launch alone with the fused mode's register split (producer 80,
             consumers 208) instead of 40 / 232
  fused      k_pack="fused" as shipped
  nocopy     fused, the copier warps only add their flags (nothing copied; C wrong): the cost of
             the flags, polls and fences without the copies
  nofence    fused, the copiers' per-thread fence.proxy.async.global dropped
  noload     fused, no cp.async (the realignment reads stale staging; C wrong): the stores' and
             the realignment's cost
  nostore    fused, the cp.asyncs only (no realignment, no stores; C wrong): the loads' cost
    python benchmarks/fused_pad_probe.py [--out DIR]
    python benchmarks/fused_pad_probe.py --sweep [--out DIR]

--sweep: the fused copy with more bytes in flight, where a C stored from the fragments
("direct" epilogue) leaves the staged C tile's 64 KB of shared memory to the copy's staging
(STAGED_ROUNDS 8-32 at 3 and 4 stages), or where 2 pipeline stages leave 48 KB (TMA-stored C,
16 and 32 rounds), against the same schedules at 4096^3 / 8192^3 and the operator's auto
(pad copies, TMA-stored C).
"""
import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ptxgen.ops.tc_matmul import TcMatmul                              # noqa: E402
from ptxgen.lower import fused_pad as fpad                       # noqa: E402
from ptxgen.runtime import time_calls                                 # noqa: E402

ARCH = "sm_90a"


def main():
    import torch
    from tc_matmul import ptxgen_call
    from ptxgen.runtime.device import sm_count
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--sweep", action="store_true")
    a = ap.parse_args()
    if a.sweep:
        return sweep(a.out)
    sms = sm_count()
    rows = []
    orig_copy = fpad.FusedPad._copy_chunk_staged
    for M, N, K in ((4096, 4096, 4093), (8192, 8192, 8189)):
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        Bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        C = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        shape = dict(M=M, N=N, K=K)

        def timed(name, op, gemm_only=False):
            go, ctas, pads = ptxgen_call(op, shape, A, Bt, C, sms)
            t = time_calls(go)
            row = dict(shape=f"{M}x{N}x{K}", variant=name, ms=t,
                       tflops=2 * M * N * K / t / 1e9, schedule=str(op.schedule_for(shape)))
            if pads is not None:
                tp = time_calls(pads)
                row.update(pads_ms=tp, gemm_ms=t - tp)
            rows.append(row)
            print(f"{row['shape']:>16} {name:8} {t * 1e3:8.1f} us  {row['tflops']:6.1f} TFLOP/s"
                  + (f"  (pads {tp * 1e3:.1f} us, GEMM {(t - tp) * 1e3:.1f})"
                     if pads is not None else ""), flush=True)

        timed("pad", TcMatmul("bf16", "bf16", k_pack="pad"))
        base = TcMatmul("bf16", "bf16", k_pack="pad").schedule_for(shape)
        timed("pad208", TcMatmul("bf16", "bf16", dataclasses.replace(
            base, cluster_m=1, producer_regs=80, consumer_regs=208), k_pack="pad"))
        timed("pad_x1", TcMatmul("bf16", "bf16", dataclasses.replace(base, cluster_m=1),
                                 k_pack="pad"))
        timed("fused", TcMatmul("bf16", "bf16", k_pack="fused"))
        fpad.FusedPad._copy_chunk_staged = lambda self, *args: None
        try:
            timed("nocopy", TcMatmul("bf16", "bf16", k_pack="fused"))
        finally:
            fpad.FusedPad._copy_chunk_staged = orig_copy
        for name, meth in (("noload", "_staged_issue"), ("nostore", "_staged_store")):
            orig = getattr(fpad.FusedPad, meth)
            if meth == "_staged_issue":     # the commit stays: wait_group counts groups
                def patched(self, *args):
                    self.b.cp_async_commit()
            else:
                def patched(self, *args):
                    return None
            setattr(fpad.FusedPad, meth, patched)
            try:
                timed(name, TcMatmul("bf16", "bf16", k_pack="fused"))
            finally:
                setattr(fpad.FusedPad, meth, orig)
        # drop the per-thread proxy fence of the copier loop: patch Builder.fence_proxy_async
        # while the copier is lowered (the TMA thread's fences stay: they come from fused_wait)
        from ptxgen.ir.builder_tensor import TensorOps as TB
        b_fence = TB.fence_proxy_async
        orig_copier = fpad.FusedPad.fused_copier

        def copier(self, tid):
            TB.fence_proxy_async = lambda b, *x, **k: None
            try:
                orig_copier(self, tid)
            finally:
                TB.fence_proxy_async = b_fence
        fpad.FusedPad.fused_copier = copier
        try:
            timed("nofence", TcMatmul("bf16", "bf16", k_pack="fused"))
        finally:
            fpad.FusedPad.fused_copier = orig_copier
    with open(os.path.join(a.out, "fused_pad_probe.json"), "w") as f:
        json.dump(dict(rows=rows, torch=torch.__version__), f, indent=1)


def sweep(out):
    import torch
    from tc_matmul import ptxgen_call
    from ptxgen.runtime.device import sm_count
    sms = sm_count()
    rows = []
    for (M, N, K), near in (((4096, 4096, 4093), (4096, 4096, 4096)),
                            ((8192, 8192, 8189), (8192, 8192, 8192))):
        for (m, n, k), kind in ((near, "multiple"), ((M, N, K), "odd")):
            A = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            Bt = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            C = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            shape = dict(M=m, N=n, K=k)
            auto = TcMatmul("bf16", "bf16").schedule_for(shape)
            cases = [("auto", TcMatmul("bf16", "bf16"), 8)]
            for st, epi in ((3, "direct"), (4, "direct"), (2, auto.epilogue)):
                d = dataclasses.replace(auto, epilogue=epi, stages=st, cluster_m=1)
                if epi != "direct":
                    tag = f"{epi}_s{st}"
                    if kind == "multiple":
                        cases.append((tag, TcMatmul("bf16", "bf16", d), 8))
                        continue
                    for R in (16, 32):
                        cases.append((f"fused_{tag}_r{R}",
                                      TcMatmul("bf16", "bf16", d, k_pack="fused"), R))
                    cases.append((f"fused1_{tag}_r32",
                                  TcMatmul("bf16", "bf16", d, k_pack="fused1"), 32))
                    continue
                if kind == "multiple":
                    cases.append((f"direct_s{st}", TcMatmul("bf16", "bf16", d), 8))
                    continue
                for R in ((8, 16, 24, 32) if st == 3 else (8, 16)):
                    cases.append((f"fused_direct_s{st}_r{R}",
                                  TcMatmul("bf16", "bf16", d, k_pack="fused"), R))
                cases.append((f"fused1_direct_s{st}_r16",
                              TcMatmul("bf16", "bf16", d, k_pack="fused1"), 16))
            for name, op, R in cases:
                fpad.STAGED_ROUNDS = R
                try:
                    if not any(op.fused(shape)) and "fused" in name:
                        print(f"{m}x{n}x{k} {name}: no room for the staging", flush=True)
                        continue
                    go, _, _ = ptxgen_call(op, shape, A, Bt, C, sms)
                    go()
                    torch.cuda.synchronize()
                    ref = A[:32].double() @ Bt.double().T
                    err = float((C[:32].double() - ref).abs().max() / ref.abs().max())
                    t = time_calls(go)
                finally:
                    fpad.STAGED_ROUNDS = 8
                rows.append(dict(shape=f"{m}x{n}x{k}", variant=name, ms=t,
                                 tflops=2 * m * n * k / t / 1e9, rel_err_rows32=err,
                                 schedule=str(op.schedule_for(shape))))
                print(f"{m}x{n}x{k} {name:22} {t * 1e3:8.1f} us {rows[-1]['tflops']:6.1f} TFLOP/s"
                      f"  err {err:.1e}", flush=True)
    with open(os.path.join(out, "fused_pad_sweep.json"), "w") as f:
        json.dump(dict(rows=rows, torch=torch.__version__), f, indent=1)


if __name__ == "__main__":
    main()
