"""Attention decode on the GPU (`python benchmarks/attention.py decode`): ptxgen's split-KV
decode (ops/attention_decode.py: the split and combine kernels) against torch's
scaled_dot_product_attention (each backend that accepts the call, enable_gqa=True, on the
contiguous cache transposed to B x H_kv x S x D as SDPA takes it) and against a device copy.

    python benchmarks/attention.py decode [--kv-lens 4096,32768] [--out DIR]

Shapes: batch 16, 32 query heads, 8 K/V heads, D = 128, bf16, one new token, every sequence
at the full KV length; the cache contiguous and paged (64-key pages, shuffled block table).
Correctness first: ptxgen's O and LSE of sampled sequences against the float64 reference
(AttentionDecode.reference's bounds). Timing: GPU time per call (harness.gpu_ms); K/V
bandwidth = the K and V bytes read / time, against the copy's (bytes read + written / time of
one device copy of as many bytes). Prints a table last; writes decode.json under --out.
"""
import argparse

import numpy as np

import harness
from ptxgen.ops.attention_decode import AttentionDecode
from ptxgen.runtime import load_steps

ARCH = "sm_90a"
B, H, H_KV, D, PAGE = 16, 32, 8, 128, 64
SDPA = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
TABLE = harness.Table([("layout", 10), ("kv", 6)],
                      [("ptxgen_ms", "ptxgen ms", "9.4f"), ("kv_gbs", "K/V GB/s", "9.0f"),
                       ("of_copy", "% copy", "7.1f"), ("check", "check", ">6"),
                       ("FLASH_ATTENTION", "flash ms", "9.4f"),
                       ("EFFICIENT_ATTENTION", "effic ms", "9.4f"),
                       ("CUDNN_ATTENTION", "cudnn ms", "9.4f"), ("MATH", "math ms", "9.4f")])


def _caches(torch, S, page, rng):
    """K, V (contiguous B x S x H_kv x D, or the page pool) and the block table."""
    if page is None:
        dims, table = (B, S, H_KV, D), None
    else:
        mp = S // page
        dims = (B * mp, page, H_KV, D)
        table = torch.from_numpy(rng.permutation(B * mp).reshape(B, mp).astype(np.int32))
    k, v = (torch.randn(dims, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return k, v, None if table is None else table.cuda()


def sampled_check(op, shape, q, k, v, lens, table, O, LSE, rng, n=3):
    """ptxgen's O and LSE of n sampled sequences against the float64 reference."""
    import torch

    def bits(t):
        return t.view(torch.int16).cpu().numpy().view(np.uint16)
    host = {"Q": bits(q), "K": bits(k), "V": bits(v), "O": bits(O), "LSE": LSE.cpu().numpy(),
            "seqlens": lens.cpu().numpy().view(np.uint32)}
    if table is not None:
        host["block_table"] = table.cpu().numpy().view(np.uint32)
    one = op.shape(**dict(shape, B=1))
    ok = True
    for b in rng.choice(B, n, replace=False):
        sub = {name: a if name in ("K", "V") and table is not None else a[b:b + 1]
               for name, a in host.items()}
        ok &= op.check(one, sub)[0]
    return ok


def bench(torch, S, page, rng, schedule="auto", references=True):
    op = AttentionDecode("bf16", page_size=page, schedule=schedule)
    shape = op.shape(B=B, S_q=1, H=H, H_kv=H_KV, D=D, S_max=S,
                     **({"pages": B * S // page} if page else {}))
    k, v, table = _caches(torch, S, page, rng)
    q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.bfloat16)
    lens = torch.full((B,), S, dtype=torch.int32, device="cuda")
    O = torch.empty_like(q)
    LSE = torch.empty(B, 1, H, device="cuda", dtype=torch.float32)
    arrays = {"Q": q.view(torch.int16), "K": k.view(torch.int16), "V": v.view(torch.int16),
              "seqlens": lens, "O": O.view(torch.int16), "LSE": LSE}
    if table is not None:
        arrays["block_table"] = table
    for name, (dims, dt) in op.workspace(shape, ARCH).items():
        arrays[name] = torch.empty(dims, dtype=torch.float32, device="cuda")
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    go = harness.step_calls(op, shape, kernels, arrays, ARCH)
    go()
    torch.cuda.synchronize()
    row = dict(layout="paged64" if page else "contiguous", kv=S,
               schedule=str(op.schedule_for(shape)))
    row["check"] = "ok" if sampled_check(op, shape, q, k, v, lens, table, O, LSE, rng) \
        else "FAIL"
    row["ptxgen_ms"] = harness.gpu_ms(go)
    kv_bytes = 2 * B * S * H_KV * D * 2
    row["kv_gbs"] = kv_bytes / row["ptxgen_ms"] / 1e6
    if not references:
        return row
    src = torch.empty(kv_bytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = harness.gpu_ms(lambda: dst.copy_(src))
    row["copy_gbs"] = 2 * kv_bytes / copy_ms / 1e6
    row["of_copy"] = 100 * row["kv_gbs"] / row["copy_gbs"]
    del src, dst
    if page is None:                     # SDPA on the same cache, as it takes it
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        qs = q.transpose(1, 2)
        ks, vs = (x.transpose(1, 2).contiguous() for x in (k, v))
        want = O.float().transpose(1, 2)
        for name in SDPA:
            try:
                def call(be=getattr(SDPBackend, name)):
                    with sdpa_kernel(be):
                        return F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True)
                got = call()
                row[f"{name}_maxdiff"] = float((got.float() - want).abs().max())
                row[name] = harness.gpu_ms(call)
            except Exception as e:                          # noqa: BLE001 - backend refused
                row[f"{name}_error"] = f"{type(e).__name__}: {str(e)[:120]}"
    return row


def main(argv=None):
    p = argparse.ArgumentParser(prog="attention.py decode")
    p.add_argument("--kv-lens", default="4096,32768")
    p.add_argument("--sweep", action="store_true",
                   help="also time the split / stage candidates on the contiguous cache")
    harness.out_argument(p)
    args = p.parse_args(argv)
    import torch
    info = harness.run_info(cuda=torch.version.cuda, sms=torch.cuda.get_device_properties(0)
                            .multi_processor_count)
    print(info, flush=True)
    rng = np.random.default_rng(0)
    rows = []
    for S in (int(x) for x in args.kv_lens.split(",")):
        for page in (None, PAGE):
            try:
                rows.append(bench(torch, S, page, rng))
            except Exception as e:                          # report, keep going
                rows.append(dict(layout="paged64" if page else "contiguous", kv=S,
                                 error=f"{type(e).__name__}: {e}"))
            print(rows[-1], flush=True)
            torch.cuda.empty_cache()
            harness.save_json(args.out, "decode.json", dict(info=info, rows=rows))
    TABLE.print(rows, note=f"B={B} H={H} H_kv={H_KV} D={D} bf16, one new token")
    if args.sweep:
        swept = sweep(torch, [int(x) for x in args.kv_lens.split(",")], rng)
        harness.save_json(args.out, "decode.json", dict(info=info, rows=rows, sweep=swept))


def sweep(torch, lens, rng):
    """GPU time of the split / stage candidates at each KV length (contiguous cache), fastest
    first per length; the default schedule's row is marked."""
    from ptxgen.schedule.attention_decode import DecodeSchedule
    out = []
    for S in lens:
        rows = []
        for splits, stages in ((sp, st) for sp in (8, 12, 16, 20, 24, 32, 40, 48, 64)
                               for st in (2, 3, 4)):
            sched = DecodeSchedule(splits=splits, warps=4, stages=stages)
            try:
                r = bench(torch, S, None, rng, sched, references=False)
            except Exception as e:                          # noqa: BLE001 - report, go on
                r = dict(kv=S, schedule=str(sched), error=f"{type(e).__name__}: {e}"[:120])
            rows.append(r)
        default = str(bench(torch, S, None, rng, references=False)["schedule"])
        rows.sort(key=lambda r: r.get("ptxgen_ms", 1e9))
        for r in rows:
            r["default"] = r["schedule"] == default
            print(f"kv {S:6d} {r['schedule']:22s} {r.get('ptxgen_ms', float('nan')):8.4f} ms "
                  f"{r.get('kv_gbs', float('nan')):7.0f} GB/s{'  default' if r['default'] else ''}"
                  f"{'  ' + r['error'] if 'error' in r else ''}", flush=True)
        out += rows
    return out
