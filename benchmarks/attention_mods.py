"""Programmable attention on the GPU: ptxgen's sm_90a kernel with score_mod / mask_mod / block
masks (ops/attention_mods.py) against torch.compile'd FlexAttention with the same mods and block
mask, and against ptxgen's unmodified kernel, bf16, one run.

    python benchmarks/attention_mods.py [--budget-s S] [--out DIR] [--flex-order a,b,...]

Soft-cap is also timed with every k-th exp2 of the softmax on the FMA pipe for the k of
SOFT_EX2_TRIED (rows soft_cap_sx<k>; score_mods.SOFT_EX2_EVERY is the default's k), and the
variants of FORMS with the per-D schedule made persistent (rows <variant>_p: one CTA per SM
walking the tiles, the next tile's loads under this one's epilogue), with the block mask's full
blocks apart (<variant>_fa: partial blocks first, then the full ones in a loop without the
mask_mod) or both (_p_fa).

Correctness first, on fresh random inputs: for every ptxgen variant the sampled query rows of
two heads (the last row included) against float64 (O within the operator's bound, LSE too);
FlexAttention's output against the same reference (its largest error, informative). Timing:
triton.testing.do_bench, median. FLOP rates on the FLOPs each variant does (4·D per allowed
(query, key) pair, FlashAttention's count). FlexAttention variants are compiled one by one
(each compile is long) until --budget-s has passed; those left are reported as skipped. Rates
also on the FLOPs of the tiles computed (column "tiles": FlexAttention's own benchmarks' count,
4·D·(1 - block sparsity)·S² per head).
Prints a table last; writes the rows as JSON under --out.
"""
import argparse
import dataclasses
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness                                                           # noqa: E402
from ptxgen.ops import attention_mods as am                              # noqa: E402
from ptxgen.ops.attention import Attention                               # noqa: E402
from ptxgen.schedule import score_mods                                   # noqa: E402
from ptxgen.schedule.attention import default_attention_schedule        # noqa: E402

ARCH = "sm_90a"
B, H, S, D = 4, 32, 4096, 128
LONG = (1, 32, 16384, 128)
WINDOW, DOC, PREFIX, CAP = 1024, 1000, 1024, 30.0
SOFT_EX2_TRIED = (0, 2, 4)      # soft-cap also timed with these shares of exp2 on the FMA pipe
FORMS = ("none", "causal", "sliding", "document", "prefix_lm")   # also timed in other forms


def ptxgen_variants(S):
    """name -> Attention keywords."""
    return {
        "none": {},
        "causal": dict(causal=True),
        "causal_mask_mod": dict(mask_mod=am.causal()),
        "sliding": dict(mask_mod=am.sliding_window(WINDOW)),
        "document": dict(mask_mod=am.document(np.arange(S) // DOC)),
        "prefix_lm": dict(mask_mod=am.prefix_lm(PREFIX)),
        "alibi": dict(score_mod=am.alibi(am.alibi_slopes(H))),
        "soft_cap": dict(score_mod=am.soft_cap(CAP)),
    }


def flex_mods(name, S, device):
    """(score_mod, mask_mod) in torch for FlexAttention, the same functions as ptxgen's."""
    import torch
    if name == "causal":
        return None, lambda b, h, q, kv: q >= kv
    if name == "sliding":
        return None, lambda b, h, q, kv: (q - kv >= 0) & (q - kv < WINDOW)
    if name == "document":
        doc = torch.arange(S, device=device) // DOC
        return None, lambda b, h, q, kv: doc[q] == doc[kv]
    if name == "prefix_lm":
        return None, lambda b, h, q, kv: (kv <= q) | (kv < PREFIX)
    if name == "alibi":
        slopes = torch.tensor(am.alibi_slopes(H), device=device, dtype=torch.float32)
        return (lambda score, b, h, q, kv: score + slopes[h] * (kv - q)), None
    if name == "soft_cap":
        return (lambda score, b, h, q, kv: torch.tanh(score / CAP) * CAP), None
    return None, None


SCHEDULE_FORMS = {"_p": dict(persistent=True), "_fa": dict(full_apart=True),
                  "_p_fa": dict(persistent=True, full_apart=True)}


def form_variants(S):
    """name<form> -> Attention keywords: the FORMS variants on the default schedule in each of
    SCHEDULE_FORMS."""
    out = {}
    for suffix, fields in SCHEDULE_FORMS.items():
        sched = dataclasses.replace(default_attention_schedule(D, forms=False), **fields)
        out.update((f"{n}{suffix}", dict(kw, schedule=sched))
                   for n, kw in ptxgen_variants(S).items() if n in FORMS)
    return out


def base_variant(name):
    """The FlexAttention row a ptxgen variant compares with (soft_cap_sx2 -> soft_cap,
    sliding_p_fa -> sliding)."""
    name = name.split("_sx")[0]
    for suffix in sorted(SCHEDULE_FORMS, key=len, reverse=True):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def tile_flops(op, shape):
    """4·D per (q, kv) pair of the tiles the block mask leaves (all of them without a mask;
    causal: the tiles on and below the diagonal)."""
    s = op.schedule_for(shape)
    bm = op._mods.block_mask(shape, s.BM, s.BN)
    heads = shape["B"] * shape["H"]
    if bm is not None:
        return 4 * shape["D"] * bm.computed_pairs() * heads // (bm.B * bm.H)
    nq, nk = -(-shape["S"] // s.BM), -(-shape["S"] // s.BN)
    tiles = sum(min(nk, -(-min(shape["S"], (i + 1) * s.BM) // s.BN)) for i in range(nq)) \
        if op.causal else nq * nk
    return 4 * shape["D"] * tiles * s.BM * s.BN * heads


def sampled_refs(op, q, k, v, rng):
    """The float64 reference of sampled rows, with op's mods (harness.attention_sample)."""
    return harness.attention_sample(q, k, v, rng, op.causal, op._mods.graphs())


def ptxgen_launcher(op, shape, q, k, v, O, LSE):
    import torch
    mods = {}
    for n, a in op.mod_arrays(shape).items():
        a = a.view(np.int32) if a.dtype == np.uint32 else a
        mods[n] = torch.from_numpy(np.ascontiguousarray(a)).cuda()
    return harness.attention_call(op, shape, q, k, v, O, LSE, ARCH, mods)


def main():
    p = argparse.ArgumentParser()
    harness.out_argument(p)
    p.add_argument("--budget-s", type=float, default=170.0,
                   help="start no further FlexAttention compile after this many seconds")
    p.add_argument("--flex-order", default="alibi,prefix_lm,causal,sliding,soft_cap,document,"
                                           "none")
    args = p.parse_args()
    t0 = time.time()
    import torch
    import triton
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    dev = "cuda"
    info = harness.run_info(triton=triton.__version__)
    print(info, flush=True)
    rng = np.random.default_rng(int(time.time()))
    torch.manual_seed(int(rng.integers(2 ** 31)))

    def bench(fn):
        return harness.median_ms(fn, warmup=10, rep=60)

    rows, result = [], dict(info=info, rows=[])

    def emit(r):
        rows.append(r)
        print(fmt(r), flush=True)

    # -- ptxgen: every variant at B=4 H=32 S=4096 D=128, then sliding at S=16384 ----------------
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    variants = list(ptxgen_variants(S).items())
    variants += [(f"soft_cap_sx{k}", dict(score_mod=am.soft_cap(CAP), sx=k))
                 for k in SOFT_EX2_TRIED if k != score_mods.SOFT_EX2_EVERY]
    variants += list(form_variants(S).items())
    default_sx = score_mods.SOFT_EX2_EVERY
    for name, kw in variants:
        kw = dict(kw)
        score_mods.SOFT_EX2_EVERY = kw.pop("sx", default_sx)
        try:
            op = Attention("bf16", **kw)
            shape = op.shape(B=B, H=H, S=S, D=D)
            O = torch.full_like(q, float("nan"))
            LSE = torch.full((B, H, S), float("nan"), device=dev, dtype=torch.float32)
            go = ptxgen_launcher(op, shape, q, k, v, O, LSE)
            go()
            torch.cuda.synchronize()
            ok, worst = harness.attention_check(O, sampled_refs(op, q, k, v, rng), LSE)
            ms = bench(go)
            emit(dict(config=f"S{S}", variant=name, impl="ptxgen", ok=ok, err_vs_bound=worst,
                      ms=ms, tflops=op.flops(shape) / ms / 1e9,
                      tile_tflops=tile_flops(op, shape) / ms / 1e9))
        except Exception as e:                                      # report, keep going
            emit(dict(config=f"S{S}", variant=name, impl="ptxgen",
                      error=f"{type(e).__name__}: {e}"[:300]))
    score_mods.SOFT_EX2_EVERY = default_sx
    Bl, Hl, Sl, Dl = LONG
    ql, kl, vl = (torch.randn(Bl, Hl, Sl, Dl, device=dev, dtype=torch.bfloat16)
                  for _ in range(3))
    sliding = dict(mask_mod=am.sliding_window(WINDOW))
    long_forms = [(f"{n}{suffix}", dict(kw, schedule=dataclasses.replace(
        default_attention_schedule(Dl, forms=False), **fields)))
        for suffix, fields in SCHEDULE_FORMS.items() for n, kw in (("none", {}),
                                                                    ("sliding", sliding))]
    for name, kw in [("none", {}), ("sliding", sliding)] + long_forms:
        try:
            op = Attention("bf16", **kw)
            shape = op.shape(B=Bl, H=Hl, S=Sl, D=Dl)
            O = torch.full_like(ql, float("nan"))
            LSE = torch.full((Bl, Hl, Sl), float("nan"), device=dev, dtype=torch.float32)
            go = ptxgen_launcher(op, shape, ql, kl, vl, O, LSE)
            go()
            torch.cuda.synchronize()
            ok, worst = harness.attention_check(O, sampled_refs(op, ql, kl, vl, rng), LSE)
            ms = bench(go)
            emit(dict(config=f"S{Sl}", variant=name, impl="ptxgen", ok=ok, err_vs_bound=worst,
                      ms=ms, tflops=op.flops(shape) / ms / 1e9,
                      tile_tflops=tile_flops(op, shape) / ms / 1e9))
        except Exception as e:
            emit(dict(config=f"S{Sl}", variant=name, impl="ptxgen",
                      error=f"{type(e).__name__}: {e}"[:300]))
    del ql, kl, vl
    result["rows"] = rows
    harness.save_json(args.out, "attention_mods.json", result)

    # -- FlexAttention, compiled once per variant, same mods and block mask ---------------------
    torch._dynamo.config.cache_size_limit = 64
    flex = torch.compile(flex_attention)
    for name in args.flex_order.split(","):
        if time.time() - t0 > args.budget_s:
            emit(dict(config=f"S{S}", variant=name, impl="flex", error="skipped: budget"))
            continue
        try:
            tc = time.time()
            score_mod, mask_mod = flex_mods(name, S, dev)
            bm = create_block_mask(mask_mod, None, None, S, S, device=dev) \
                if mask_mod is not None else None
            O = flex(q, k, v, score_mod=score_mod, block_mask=bm)
            torch.cuda.synchronize()
            compile_s = time.time() - tc
            op = Attention("bf16", **ptxgen_variants(S)[name])
            ok, worst = harness.attention_check(O, sampled_refs(op, q, k, v, rng))
            ms = bench(lambda: flex(q, k, v, score_mod=score_mod, block_mask=bm))
            flops = op.flops(op.shape(B=B, H=H, S=S, D=D))
            emit(dict(config=f"S{S}", variant=name, impl="flex", ok=ok, err_vs_bound=worst,
                      ms=ms, tflops=flops / ms / 1e9, compile_s=round(compile_s, 1),
                      tile_tflops=tile_flops(op, op.shape(B=B, H=H, S=S, D=D)) / ms / 1e9))
        except Exception as e:
            emit(dict(config=f"S{S}", variant=name, impl="flex",
                      error=f"{type(e).__name__}: {e}"[:300]))
        result["rows"] = rows
        harness.save_json(args.out, "attention_mods.json", result)

    # -- the ratios the issue asks for ----------------------------------------------------------
    by = {(r["config"], r["variant"], r["impl"]): r for r in rows if "ms" in r}
    summary = []
    base = by.get((f"S{S}", "none", "ptxgen"))
    for (cfg, name, impl), r in by.items():
        if cfg != f"S{S}" or impl != "ptxgen":
            continue
        f = by.get((f"S{S}", base_variant(name), "flex"))
        summary.append(dict(variant=name, tflops=r["tflops"], tile_tflops=r["tile_tflops"],
                            x_flex=f["ms"] / r["ms"] if f else None,
                            rate_vs_unmodified=r["tflops"] / base["tflops"] if base else None,
                            tile_rate_vs_unmodified=r["tile_tflops"] / base["tflops"]
                            if base else None))
    c, cm = by.get((f"S{S}", "causal", "ptxgen")), by.get((f"S{S}", "causal_mask_mod", "ptxgen"))
    if c and cm:
        summary.append(dict(variant="causal_mask_mod / causal time", ratio=cm["ms"] / c["ms"]))
    for suffix in [""] + list(SCHEDULE_FORMS):
        ln = by.get((f"S{Sl}", "none" + suffix, "ptxgen"))
        name = "sliding" + suffix
        ls = by.get((f"S{Sl}", name, "ptxgen"))
        if ln and ls:
            summary.append(dict(variant=f"{name} S{Sl} rate / full rate",
                                ratio=ls["tflops"] / ln["tflops"],
                                tile_ratio=ls["tile_tflops"] / ln["tflops"]))
    result["rows"], result["summary"] = rows, summary
    result["total_s"] = round(time.time() - t0, 1)
    harness.save_json(args.out, "attention_mods.json", result)
    print(f"{'config':7} {'variant':16} {'impl':7} {'ms':>8} {'TFLOP/s':>8} {'tiles':>8} "
          f"{'ok':>5} {'err/bound':>9}")
    for r in rows:
        print(fmt(r))
    for s in summary:
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in s.items()))
    print(f"total {time.time() - t0:.1f} s")


def fmt(r):
    head = f"{r['config']:7} {r['variant']:16} {r['impl']:7}"
    if "error" in r:
        return f"{head} ERROR {r['error']}"
    extra = f" compile {r['compile_s']} s" if "compile_s" in r else ""
    return (f"{head} {r['ms']:8.3f} {r['tflops']:8.1f} {r['tile_tflops']:8.1f} "
            f"{str(r['ok']):>5} {r['err_vs_bound']:9.3f}{extra}")


if __name__ == "__main__":
    main()
