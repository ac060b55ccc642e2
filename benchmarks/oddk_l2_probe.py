"""Odd K: can the pad copies' stores stay in L2 for the GEMM that reads them right after?

The operator at 4096x4096x4093 pad-copies A and Bt (67 MB read, 67 MB written) before the
GEMM. L2 is write-back: if the padded rows stay resident (an evict_last policy on the stores,
evict_first on the source loads, which are read once), the copy costs the DRAM reads and the
write-backs drain during the compute-bound GEMM. The pad kernel's PTX is edited here per variant
(createpolicy + .L2::cache_hint); everything else is the operator as shipped. One run: 4096^3
(nearest multiple) and each variant, GPU time per call (runtime.time_calls), pads alone too,
every variant's C compared with the base variant's bit for bit.

    python benchmarks/oddk_l2_probe.py [--shapes 4096x4096x4093,...] [--k-pack pad|fused1] [--out DIR]
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ptxgen.emit import emit_module                                   # noqa: E402
from ptxgen.ops.tc_matmul import TcMatmul                              # noqa: E402
from ptxgen.runtime import time_calls                                  # noqa: E402

ARCH = "sm_90a"
POLICIES = ("\t.reg .b64 %polF, %polL;\n"
            "\tcreatepolicy.fractional.L2::evict_first.b64 %polF, 1.0;\n"
            "\tcreatepolicy.fractional.L2::evict_last.b64 %polL, 1.0;\n")


def edit_pad(ptx, loads, stores):
    """The pad kernels' PTX with L2 cache hints: loads 'first' / None, stores 'last' / None."""
    out, inside = [], False
    for line in ptx.splitlines(keepends=True):
        if re.match(r"\.visible \.entry pad_copy", line):
            inside = True
        if inside and line.strip() == "{" and (loads or stores):
            out.append(line)
            out.append(POLICIES)
            continue
        if inside and loads == "first" and "ld.global.v4.b32" in line:
            line = line.replace("ld.global.v4.b32", "ld.global.L1::no_allocate.L2::cache_hint.v4.b32")
            line = re.sub(r"\];", "], %polF;", line)
        if inside and stores == "last" and "st.global.v2.b64" in line:
            line = line.replace("st.global.v2.b64", "st.global.L2::cache_hint.v2.b64")
            line = re.sub(r"\};", "}, %polL;", line)
        if inside and line.startswith("}"):
            inside = False
        out.append(line)
    return "".join(out)


def prepared(op, shape, ptx, A, Bt, C):
    """(all steps, the pad copies, the GEMM launch) as callables, on the PTX text `ptx`."""
    import torch
    from tc_matmul import ptxgen_call
    from ptxgen.runtime.device import sm_count
    go, _, pads = ptxgen_call(op, shape, A, Bt, C, sm_count(), ptx=ptx)
    torch.cuda.synchronize()
    return go, pads, go.launches[-1]


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096x4093,4095x4097x4093,8192x8192x8189")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--k-pack", default="pad", help="the odd shapes' k_pack: pad (both operands "
                    "pad-copied) or fused1 (one pad-copied, 33 MB: L2 could hold it)")
    a = ap.parse_args()
    variants = {"base": (None, None), "st_last": (None, "last"), "ld_first": ("first", None),
                "both": ("first", "last")}
    rows = []
    refs = {}
    for shp in a.shapes.split(","):
        M, N, K = map(int, shp.split("x"))
        Kr, Nr, Mr = -(-K // 8) * 8, -(-N // 8) * 8, -(-M // 8) * 8   # nearest multiple
        for (m, n, k) in ((Mr, Nr, Kr),):
            key = f"{m}x{n}x{k}"
            if key in refs:
                continue
            op = TcMatmul("bf16", out="bf16")
            shape = dict(M=m, N=n, K=k)
            A = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            Bt = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            C = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            go, _, _ = prepared(op, shape, emit_module(op.build(shape, ARCH), ARCH), A, Bt, C)
            t = time_calls(go)
            refs[key] = t
            rows.append(dict(shape=key, variant="multiple", ms=t, tflops=2 * m * n * k / t / 1e9))
            print(f"{key:>16} multiple   {t * 1e3:8.1f} us {rows[-1]['tflops']:6.1f} TFLOP/s",
                  flush=True)
        op = TcMatmul("bf16", out="bf16", k_pack=a.k_pack)
        shape = dict(M=M, N=N, K=K)
        A = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        Bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        ptx0 = emit_module(op.build(shape, ARCH), ARCH)
        base_c = None
        for name, (ld, st) in variants.items():
            C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            go, pads, gemm = prepared(op, shape, edit_pad(ptx0, ld, st), A, Bt, C)
            go()
            torch.cuda.synchronize()
            same = True if base_c is None else bool(torch.equal(C.view(torch.int16),
                                                                 base_c.view(torch.int16)))
            if base_c is None:
                base_c = C.clone()
                ref = (A[:64].double() @ Bt.double().T)
                err = float((C[:64].double() - ref).abs().max())
            t, tp, tg = time_calls(go), time_calls(pads), time_calls(gemm)
            ratio = (2 * M * N * K / t) / (2 * Mr * Nr * Kr / refs[f"{Mr}x{Nr}x{Kr}"])
            rows.append(dict(shape=shp, variant=name, ms=t, pads_ms=tp, gemm_ms=tg,
                             tflops=2 * M * N * K / t / 1e9, of_multiple=ratio, same_as_base=same,
                             base_err_rows64=err))
            print(f"{shp:>16} {name:10} {t * 1e3:8.1f} us (pads {tp * 1e3:6.1f}, gemm alone "
                  f"{tg * 1e3:6.1f}) {rows[-1]['tflops']:6.1f} TFLOP/s  of multiple {ratio:.3f}"
                  f"  same C {same}", flush=True)
    with open(os.path.join(a.out, f"oddk_l2_probe_{a.k_pack}.json"), "w") as f:
        json.dump(dict(rows=rows, torch=torch.__version__), f, indent=1)


if __name__ == "__main__":
    main()
