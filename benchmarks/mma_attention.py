"""The attention forward's sm_80 path (FlashAttention-2's form on mma.sync, ops/mma_attention.py)
on the GPU against torch's scaled_dot_product_attention FLASH_ATTENTION backend
(FlashAttention-2) and ptxgen's own sm_90a kernel, bf16, one run.

    python benchmarks/mma_attention.py [--configs 0,1,2,3] [--arch sm_80] [--out DIR]

Correctness first, on fresh random inputs: small odd shapes (causal and not) on the GPU and on
the CPU emulator from the same inputs (each against the float64 reference with Attention.check's
bounds, and the fraction of bit-equal O elements); then for every timed configuration and
implementation a float64 check of sampled query rows of sampled heads (benchmarks/attention.py's
helpers: O within the operator's bound, and ptxgen's LSE). Timing: ptxgen.runtime.time_calls
(GPU time per call); TFLOP/s by FlashAttention's count; ratios against FLASH from this run.
Prints a table last; writes mma_attention.json under --out.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ptxgen.ops.attention import Attention                                   # noqa: E402
from ptxgen.runtime import time_calls                                         # noqa: E402
from ptxgen.schedule.mma_attention import MmaAttentionSchedule               # noqa: E402

CONFIGS = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 4096, 64, False),
           (4, 32, 4096, 64, True)]
# sm_80-path schedules timed besides the default (8 warps, 64-key steps, 2 stages)
VARIANTS = {"s3": MmaAttentionSchedule(stages=3), "n128": MmaAttentionSchedule(BN=128),
            "w4": MmaAttentionSchedule(warps=4)}
SMALL = [(1, 2, 77, 64), (1, 3, 201, 128)]
SM90A = "sm_90a"


def small_checks(arch, rng):
    """attention.py's emulator agreement on this script's small shapes, for `arch`."""
    from attention import emulator_agreement
    rows = emulator_agreement(rng, arch, SMALL)
    for row in rows:
        print("small", row, flush=True)
    return rows


def bench(cfg, arch, rng):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from attention import ptxgen_call, sampled_ok, sampled_reference
    B, H, S, D, causal = cfg
    flops = Attention("bf16", causal=causal).flops(dict(B=B, H=H, S=S, D=D))
    torch.manual_seed(int(rng.integers(2 ** 31)))
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    refs = sampled_reference(q, k, v, causal, rng)
    name = f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}"
    impls = [("flash", None, None), ("sm80", "auto", arch)] + \
        [(f"sm80-{n}", s, arch) for n, s in VARIANTS.items()] + [("sm90a", "auto", SM90A)]
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
                go = ptxgen_call(op, shape, q, k, v, O, LSE, arch=where)
                row["schedule"] = str(op.schedule_for(shape))
            else:
                def go():
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            res = go()
            if res is not None:
                O.copy_(res)
            torch.cuda.synchronize()
            row["ok"] = sampled_ok(O, refs, LSE)
            t = time_calls(go, repeat=3, target_ms=15.0)
        except Exception as e:                                      # report, keep going
            rows.append(dict(row, error=f"{type(e).__name__}: {e}"[:300]))
            print_row(rows[-1])
            continue
        t_flash = t if impl == "flash" else t_flash
        rows.append(dict(row, ms=t, tflops=flops / t / 1e9,
                         x_flash=t_flash / t if t_flash else None))
        print_row(rows[-1])
    return rows


def print_row(r):
    head = f"{r['config']:28} {r['impl']:10}"
    if "error" in r:
        print(f"{head} ERROR {r['error']}", flush=True)
        return
    xf = f"{r['x_flash']:7.3f}" if r.get("x_flash") else f"{'-':>7}"
    print(f"{head} {r['ms']:8.3f} {r['tflops']:8.1f} {xf} {str(r['ok']):>5} "
          f"{r.get('schedule', '')}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", default="0,1,2,3", help="indices into CONFIGS")
    p.add_argument("--arch", default="sm_80")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--skip-small", action="store_true")
    args = p.parse_args()
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    import torch
    info = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                cuda=torch.version.cuda, arch=args.arch,
                date=time.strftime("%Y-%m-%d %H:%M"), command=" ".join(sys.argv))
    print(info, flush=True)
    result = dict(info=info, small=[] if args.skip_small else small_checks(args.arch, rng),
                  rows=[])
    path = os.path.join(args.out, "mma_attention.json")
    for i in args.configs.split(","):
        result["rows"] += bench(CONFIGS[int(i)], args.arch, rng)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    print(f"{'config':28} {'impl':10} {'ms':>8} {'TFLOP/s':>8} {'xFLASH':>7} {'ok':>5} schedule")
    for r in result["rows"]:
        print_row(r)
    bad = [r for r in result["small"] if "error" in r or not (r["gpu_ok"] and r["emu_ok"])]
    print(f"small odd shapes: {len(result['small']) - len(bad)}/{len(result['small'])} ok",
          *(f"\n  {r}" for r in bad))
    print(f"wall {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
