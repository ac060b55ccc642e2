"""Attention over packed variable-length sequences on the GPU (`python benchmarks/attention.py
varlen`): ptxgen's varlen forward (ops/attention_varlen.py: its sm_90a wgmma form, and its
mma.sync form) against
ptxgen's dense forward on equal-length sequences of the same total work, and flash-attn's
flash_attn_varlen_func on the same packed data where the flash_attn package is installed.

    python benchmarks/attention.py varlen [--tokens 32768] [--kv-heads 32,8] [--out DIR]

Shapes: sequences of mixed lengths 64 .. 4096 (log-uniform, a fixed seed; the last one trimmed
so that they hold --tokens tokens), H = 32, D = 128, bf16, causal; K/V heads 32 (MHA) and 8
(GQA). The dense comparison: B sequences of S tokens with S = Σ S_i² / Σ S_i (rounded to 64)
and B·S = the tokens, so both the tokens and the causal work (Σ S_i²/2 per head) match;
timed on the dense operator's mma.sync path (the varlen kernel's arithmetic and tiles) and
on its sm_90a wgmma path.

Correctness first: ptxgen's O and LSE of sampled query rows of the shortest, the longest and
one more sequence, one head each, against the float64 reference (attention_reference, the
operator's bounds). Timing: GPU time per call (harness.gpu_ms); TFLOP/s by FlashAttention's
count of each problem's own allowed (query, key) pairs (4·D per pair and head). Prints a
table last; writes varlen.json under --out.
"""
import argparse
import math

import numpy as np

import harness
from ptxgen.ops.attention import UNIT_ROUNDOFF, Attention, attention_reference
from ptxgen.ops.attention_varlen import AttentionVarlen, cu_seqlens
from ptxgen.runtime import load_steps
from ptxgen.schedule.defaults import choice
from ptxgen.schedule.mma_attention import MmaAttentionSchedule

ARCH = "sm_90a"
H, D, LO, HI = 32, 128, 64, 4096
TABLE = harness.Table([("problem", 34), ("impl", 14)],
                      [("ms", "ms", "8.3f"), ("tflops", "TFLOP/s", "8.1f"),
                       ("x_dense", "x dense", "8.3f"), ("check", "check", ">6")])


def mixed_lengths(tokens, seed=0):
    """Log-uniform lengths LO .. HI summing to `tokens` (the last one trimmed, >= LO)."""
    rng = np.random.default_rng(seed)
    out = []
    while sum(out) < tokens:
        n = int(round(math.exp(rng.uniform(math.log(LO), math.log(HI)))))
        out.append(min(n, tokens - sum(out)))
    if out[-1] < LO and len(out) > 1:
        out[-2] += out.pop()
    return out


def sampled_check(op, shape, q, k, v, O, LSE, rng, nrows=24):
    """ptxgen's O and LSE on sampled rows of three sequences (one head each) against the
    float64 reference: (ok, worst error / bound)."""
    lens = np.asarray(shape["seqlens_q"])
    starts = np.concatenate([[0], np.cumsum(lens)])
    G = op.kv_group
    ok, worst = True, 0.0
    picks = {int(np.argmin(lens)), int(np.argmax(lens)), int(rng.integers(len(lens)))}
    for b in sorted(picks):
        s0, n, h = int(starts[b]), int(lens[b]), int(rng.integers(H))
        rows = np.sort(rng.choice(n, size=min(nrows, n), replace=False))
        rows[-1] = n - 1
        qq = q[s0 + rows, h].double().cpu().numpy()
        kk, vv = (t[s0:s0 + n, h // G].double().cpu().numpy() for t in (k, v))
        ref = attention_reference(qq, kk, vv, op.softmax_scale(shape), op.causal,
                                  UNIT_ROUNDOFF["bf16"], rows=rows)
        got = O[s0 + rows, h].double().cpu().numpy()
        r = np.abs(got - ref["O"]) / ref["O_bound"]
        worst = max(worst, float(np.nanmax(r)))
        lse = LSE[h, s0 + rows].double().cpu().numpy()
        ok &= bool(np.isfinite(got).all() and (r <= 1).all()
                   and (np.abs(lse - ref["LSE"]) <= ref["LSE_bound"]).all())
    return ok, worst


def varlen_rows(torch, lens, kv_heads, rng):
    rows = []
    mma = MmaAttentionSchedule(**choice("mma_attention.schedule").get(str(D), {}))
    for impl, sched in (("varlen-wgmma", "auto"), ("varlen-mma.sync", mma)):
        rows += varlen_impl(torch, lens, kv_heads, rng, impl, sched)
    return rows


def varlen_impl(torch, lens, kv_heads, rng, impl, sched):
    op = AttentionVarlen("bf16", causal=True, kv_group=H // kv_heads, schedule=sched)
    shape = op.shape(H=H, D=D, seqlens_q=lens)
    T = shape["total_q"]
    q = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(T, kv_heads, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    O = torch.full_like(q, float("nan"))
    LSE = torch.full((H, T), float("nan"), device="cuda", dtype=torch.float32)
    cu = torch.from_numpy(cu_seqlens(lens)).cuda()
    arrays = {"Q": q.view(torch.int16), "K": k.view(torch.int16), "V": v.view(torch.int16),
              "O": O.view(torch.int16), "LSE": LSE, "cu_seqlens_q": cu, "cu_seqlens_k": cu}
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    go = harness.step_calls(op, shape, kernels, arrays, ARCH)
    go()
    torch.cuda.synchronize()
    name = f"{len(lens)} seqs {LO}..{HI} Hkv{kv_heads}"
    ok, worst = sampled_check(op, shape, q, k, v, O, LSE, rng)
    flops = op.flops(shape)
    rows = [dict(problem=name, impl=impl, check="ok" if ok else "FAIL",
                 worst=worst, ms=harness.gpu_ms(go), flops=flops)]
    if impl != "varlen-wgmma":
        return rows
    try:
        from flash_attn import flash_attn_varlen_func
        mx = max(lens)

        def fa():
            return flash_attn_varlen_func(q, k, v, cu, cu, mx, mx, causal=True)
        rows.append(dict(problem=name, impl="flash-varlen", ms=harness.gpu_ms(fa), flops=flops))
    except ImportError:
        pass
    return rows


def dense_rows(torch, lens, kv_heads, rng):
    """The dense operator on B x S with the same tokens and causal work as `lens`."""
    tokens = sum(lens)
    S = max(64, int(round(sum(n * n for n in lens) / tokens / 64)) * 64)
    B = max(1, round(tokens / S))
    name = f"dense B{B} S{S} Hkv{kv_heads}"
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, kv_heads, S, D, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    refs = harness.attention_sample(q, k, v, rng, True)
    mma = MmaAttentionSchedule(**choice("mma_attention.schedule").get(str(D), {}))
    rows = []
    for impl, sched in (("dense-mma.sync", mma), ("dense-wgmma", "auto")):
        op = Attention("bf16", causal=True, kv_group=H // kv_heads, schedule=sched)
        shape = op.shape(B=B, H=H, S=S, D=D)
        O = torch.full_like(q, float("nan"))
        LSE = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
        go = harness.attention_call(op, shape, q, k, v, O, LSE, ARCH)
        ok = harness.attention_first_call(go, O, refs, LSE)[0]
        rows.append(dict(problem=name, impl=impl, check="ok" if ok else "FAIL",
                         ms=harness.gpu_ms(go), flops=op.flops(shape)))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="attention.py varlen")
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--kv-heads", default="32,8")
    harness.out_argument(p)
    args = p.parse_args(argv)
    import torch
    info = harness.run_info(cuda=torch.version.cuda, sms=torch.cuda.get_device_properties(0)
                            .multi_processor_count)
    lens = mixed_lengths(args.tokens)
    info["lengths"] = lens
    print(info, flush=True)
    rng = np.random.default_rng(0)
    rows = []
    for kv in (int(x) for x in args.kv_heads.split(",")):
        new = []
        for make in (varlen_rows, dense_rows):
            try:
                new += make(torch, lens, kv, rng)
            except Exception as e:                          # report, keep going
                new.append(dict(problem=f"Hkv{kv}", impl=make.__name__,
                                error=f"{type(e).__name__}: {e}"[:200]))
            torch.cuda.empty_cache()
        for r in new:
            if "ms" in r:
                r["tflops"] = r["flops"] / r["ms"] / 1e9
        dense = next((r for r in new if r["impl"] == "dense-wgmma" and "ms" in r), None)
        for r in new:
            if "ms" in r and dense is not None:
                r["x_dense"] = r["tflops"] / dense["tflops"]
            print(r, flush=True)
        rows += new
        harness.save_json(args.out, "varlen.json", dict(info=info, rows=rows))
    TABLE.print(rows, note=f"H={H} D={D} bf16 causal, {args.tokens} tokens; x dense: TFLOP/s "
                           f"against dense-wgmma's")
