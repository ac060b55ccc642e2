"""Fused attention forward on the GPU: ptxgen's sm_90a kernel (ops/attention.py) against torch's
scaled_dot_product_attention with its FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION
backends and a Triton fused-attention kernel (benchmarks/triton_kernels.py), bf16, one run.

    python benchmarks/attention.py decode [...]: the decode over a K/V cache
                                   (benchmarks/attention_decode.py)
    python benchmarks/attention.py varlen [...]: packed variable-length sequences
                                   (benchmarks/attention_varlen.py)
    python benchmarks/attention.py [--configs ...] [--skip-small] [--budget-s S] [--out DIR]
                                   [--ranked K] [--no-triton] [--no-sm80]

--ranked K also times, per configuration, the K best schedules of the simulator's ranking
(ptxgen.tune.attention, static pruning on this machine's CPUs) not timed already. A row
"ptxgen-sm80" times the operator's sm_80 (mma.sync) path: the same operator built for the
sm_80-class target (ptxgen.arch.BASELINE_TARGET), whose PTX the driver compiles for the H200.

Correctness first, on fresh random inputs every run: small odd shapes on the GPU and on the CPU
emulator (same inputs; each against the float64 reference with Attention.check's bounds, and the
largest O difference between the two); then for every timed configuration and implementation a
float64 check of sampled query rows of sampled heads (O within the operator's bound, and
ptxgen's LSE). Timing: GPU time per call (ptxgen.runtime.time_calls, held batches); TFLOP/s by
FlashAttention's count (4·B·H·S²·D, halved when causal); ratios against FLASH and CUDNN from
this run. Prints a table last; writes the rows as JSON under --out (benchmarks/harness.py:
the record, the timing, the sampled checks).

    python benchmarks/attention.py train [--steps 50] [--out DIR]: a one-block transformer
                                   trained with ptxgen.attention and with SDPA, loss curves
    python benchmarks/attention.py backward [--configs ...] [--skip-small] [--budget-s S]
                                            [--out DIR]

The backward (ops/attention_backward.py: three mma.sync kernels, deterministic dQ) against
torch SDPA's FLASH_ATTENTION and CUDNN_ATTENTION backward, bf16 B=4 H=32 S=4096 D=128 and 64,
causal and not, and grouped-query (8 K/V heads) at D=128. Each implementation is timed the same way: forward alone and forward +
backward (torch.autograd.grad of O with a random dO, through ptxgen.attention's custom op for
ptxgen), the backward's time being the difference. First the operator on small odd shapes
(GQA too) on the GPU and the emulator from the same inputs (check and bit equality), then per
configuration a float64 check of one sampled head's dQ, dK, dV against
ops.attention_backward.backward_reference's bound (given that implementation's O). Table
last; JSON attention_backward.json under --out.
"""
import argparse
import dataclasses
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import harness                                                               # noqa: E402
from ptxgen import arch as archmod                                           # noqa: E402
from ptxgen.ops.attention import Attention                                   # noqa: E402
from ptxgen.runtime import load_steps, run_steps                             # noqa: E402
from ptxgen.schedule.attention import (AttentionSchedule,                   # noqa: E402
                                       default_attention_schedule)

ARCH = "sm_90a"
# (B, H, S, D, causal[, H_kv]): the shapes; H_kv < H: grouped-query attention (ptxgen,
# FLASH and CUDNN only)
CONFIGS = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 4096, 64, False),
           (4, 32, 4096, 64, True), (1, 32, 16384, 128, False), (1, 32, 16384, 128, True),
           (4, 32, 4096, 128, False, 8), (4, 32, 4096, 128, True, 8),
           (8, 16, 1024, 64, True), (2, 16, 2048, 128, True)]          # short prefills


def config_name(B, H, S, D, causal, H_kv):
    return f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}{f' Hkv{H_kv}' if H_kv != H else ''}"
# ptxgen schedules timed besides the operator's default (3 K/V stages, overlap): without the
# S/P·V overlap; 2 stages; three consumer warpgroups (192 query rows; 160 registers each, so
# 64-key steps for D = 128); the per-D schedule without the measured forms ("plain"), made
# persistent (one CTA per SM walking the tiles), peeled (the key blocks that need no mask in a
# loop without its code), or both
VARIANTS = {"plain": lambda D: default_attention_schedule(D, forms=False),
            "p": lambda D: dataclasses.replace(default_attention_schedule(D, forms=False),
                                               persistent=True),
            "peel": lambda D: dataclasses.replace(default_attention_schedule(D, forms=False),
                                                  peel=True),
            "p-peel": lambda D: dataclasses.replace(default_attention_schedule(D, forms=False),
                                                    persistent=True, peel=True),
            # D = 64's default (3 consumers, 160 registers) spills a few registers persistent
            "p-peel-c2": lambda D: AttentionSchedule(persistent=True, peel=True)
            if D == 64 else None,
            # D = 64: the SFU bounds the step; every 4th exp2 on the FMA pipe
            "sx4": lambda D: dataclasses.replace(default_attention_schedule(D), soft_ex2_every=4)
            if D == 64 else None,
            "p-peel-c2-sx4": lambda D: AttentionSchedule(persistent=True, peel=True,
                                                         soft_ex2_every=4) if D == 64 else None,
            "serial": lambda D: AttentionSchedule(overlap=False),
            "s2": lambda D: AttentionSchedule(stages=2),
            "c3": lambda D: AttentionSchedule(consumers=3, consumer_regs=160,
                                              BN=128 if D == 64 else 64)}
SMALL = [(1, 2, 77, 64), (1, 3, 201, 128), (2, 1, 130, 64)]


def emulator_agreement(rng, arch=ARCH, shapes=SMALL):
    """Small odd shapes, causal and not, on the GPU and the emulator from the same inputs."""
    from ptxgen.emu import run_operator
    rows = []
    for B, H, S, D in shapes:
        for causal in (False, True):
            op = Attention("bf16", causal=causal)
            shape = op.shape(B=B, H=H, S=S, D=D)
            seed = int(rng.integers(2 ** 31))
            try:
                gpu = op.make_inputs(shape, np.random.default_rng(seed))
                run_steps(op, shape, load_steps(op, shape, op.build(shape, arch), arch), gpu,
                          arch)
                emu = op.make_inputs(shape, np.random.default_rng(seed))
                run_operator(op, shape, emu, arch)
            except Exception as e:                                  # report, keep going
                rows.append(dict(shape=(B, H, S, D), causal=causal,
                                 error=f"{type(e).__name__}: {e}"[:300]))
                continue
            rows.append(dict(shape=(B, H, S, D), causal=causal, gpu_ok=op.check(shape, gpu)[0],
                             emu_ok=op.check(shape, emu)[0],
                             o_bit_equal=float((gpu["O"] == emu["O"]).mean()),
                             lse_bit_equal=float((gpu["LSE"] == emu["LSE"]).mean()),
                             max_o_diff=float(np.max(np.abs(op.values(gpu["O"]) -
                                                            op.values(emu["O"]))))))
    return rows


SM80 = archmod.BASELINE_TARGET          # the sm_80-class (mma.sync) target


def sm80_operator(causal):
    """Attention for the sm_80 (mma.sync) path: the operator picks it when built for SM80."""
    return Attention("bf16", causal=causal)


def ranked_schedules(cfg, k, taken):
    """The k best predicted schedules for cfg (the simulator's ranking) not in `taken`."""
    from ptxgen.tune.attention import tune_attention
    B, H, S, D, causal = cfg
    rep = tune_attention({"B": B, "H": H, "S": S, "D": D}, causal=causal, arch=ARCH)
    picks = [r for r in rep.ranked if r.predicted_us and str(r.schedule) not in taken][:k]
    return picks, rep


def bench(cfg, rng, opts):
    import torch
    B, H, S, D, causal, *kv = cfg
    H_kv = kv[0] if kv else H
    group = H // H_kv
    op = Attention("bf16", causal=causal, kv_group=group)
    shape = op.shape(B=B, H=H, S=S, D=D)
    flops = op.flops(shape)
    torch.manual_seed(int(rng.integers(2 ** 31)))
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, H_kv, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    refs = harness.attention_sample(q, k, v, rng, causal)
    rows, t_ref = [], {}
    name = config_name(B, H, S, D, causal, H_kv)
    scheds = {"ptxgen": op.schedule_for(shape)}
    if group == 1:
        scheds.update((f"ptxgen-{n}", f(D)) for n, f in VARIANTS.items() if f(D) is not None)
    impls = ["flash", "cudnn"] + (["triton"] if opts.triton and group == 1 else []) + \
        list(scheds)
    if opts.ranked and group == 1:
        picks, rep = opts.rankings[cfg]
        picks = [r for r in picks if str(r.schedule) not in {str(x) for x in scheds.values()}]
        picks = picks[:opts.ranked]
        pred = {str(r.schedule): r.predicted_us for r in rep.ranked}
        for i, r in enumerate(picks):
            scheds[f"ptxgen-rank{i + 1}"] = r.schedule
        impls += [f"ptxgen-rank{i + 1}" for i in range(len(picks))]
    sm80 = sm80_operator(causal) if opts.sm80 and group == 1 else None
    if sm80 is not None:
        impls.append("ptxgen-sm80")
    for impl in impls:
        row = dict(config=name, impl=impl)
        try:
            O = torch.full_like(q, float("nan"))
            LSE = None
            if impl.startswith("ptxgen"):
                arch = ARCH
                if impl == "ptxgen-sm80":
                    op, arch = sm80, SM80
                else:
                    op = Attention("bf16", causal=causal, schedule=scheds[impl],
                                   kv_group=group)
                    row["schedule"] = str(scheds[impl])
                    if opts.ranked and group == 1 and str(scheds[impl]) in pred:
                        row["predicted_us"] = pred[str(scheds[impl])]
                LSE = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
                go = harness.attention_call(op, shape, q, k, v, O, LSE, arch)
            elif impl == "triton":
                import triton_kernels
                LSE = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)

                def go():
                    triton_kernels.launch_attention(q, k, v, O, LSE, causal)
            else:
                go = harness.sdpa_call(q, k, v, causal, impl, gqa=group > 1)
            row["ok"] = harness.attention_first_call(go, O, refs, LSE)[0]
            t = harness.gpu_ms(go)
        except Exception as e:                                      # report, keep going
            rows.append(dict(row, error=f"{type(e).__name__}: {e}"[:200]))
            TABLE.show(rows[-1])
            continue
        rows.append(timed(row, t, t_ref, flops))
        TABLE.show(rows[-1])
    return rows


def timed(row, t, t_ref, flops, **extra):
    """row with its time t (ms), TFLOP/s and its speed against the references timed so far in
    t_ref (which records t under the row's impl)."""
    t_ref[row["impl"]] = t
    return dict(row, **extra, ms=t, tflops=flops / t / 1e9,
                **{f"x_{r}": t_ref[r] / t if r in t_ref else None
                   for r in ("flash", "cudnn", "triton")})


def run_configs(configs, bench_one, args, t0, result, json_name):
    """bench_one(cfg) for each configuration while the budget lasts, the rows saved after each."""
    for cfg in configs:
        if time.time() - t0 > args.budget_s:
            print(f"budget: skipped {cfg}", flush=True)
            continue
        try:
            result["rows"] += bench_one(cfg)
        except Exception as e:                                      # report, keep going
            print(f"{cfg}: {type(e).__name__}: {e}", flush=True)
        harness.save_json(args.out, json_name, result)


TABLE = harness.Table([("config", 28), ("impl", 13)],
                      [("ms", "ms", "8.3f"), ("tflops", "TFLOP/s", "8.1f"),
                       ("x_flash", "xFLASH", "7.3f"), ("x_cudnn", "xCUDNN", "7.3f"),
                       ("x_triton", "xTRITON", "7.3f"), ("ok", "ok", ">5")])


def main():
    if sys.argv[1:2] == ["decode"]:
        import attention_decode
        return attention_decode.main(sys.argv[2:])
    if sys.argv[1:2] == ["varlen"]:
        import attention_varlen
        return attention_varlen.main(sys.argv[2:])
    p = argparse.ArgumentParser()
    p.add_argument("--configs", default="all", help="'all' or indices into CONFIGS, e.g. 0,1")
    harness.out_argument(p)
    p.add_argument("--skip-small", action="store_true")
    p.add_argument("--budget-s", type=float, default=1e9,
                   help="start no further configuration after this many seconds")
    p.add_argument("--ranked", type=int, default=0,
                   help="also time the K best schedules of the simulator's ranking")
    p.add_argument("--no-triton", dest="triton", action="store_false")
    p.add_argument("--no-sm80", dest="sm80", action="store_false")
    args = p.parse_args()
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    configs = CONFIGS if args.configs == "all" else [CONFIGS[int(i)]
                                                       for i in args.configs.split(",")]
    # the simulator's rankings first, on the CPUs, before this process holds a CUDA context
    # (the tuner's workers are forked); the default and the variants are left out later
    args.rankings = {cfg: ranked_schedules(cfg, args.ranked + 1 + len(VARIANTS), set())
                     for cfg in configs if len(cfg) == 5} if args.ranked else {}
    t_rank = time.time() - t0
    import torch
    info = harness.run_info(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    if args.triton:
        import triton
        info["triton"] = triton.__version__
    info["ranking_s"] = round(t_rank, 1)
    print(info, flush=True)
    result = dict(info=info, rows=[], emulator=[])
    result["rankings"] = {str(cfg): rep.to_dict() for cfg, (_, rep) in args.rankings.items()}
    if not args.skip_small:
        result["emulator"] = emulator_agreement(rng)
        for r in result["emulator"]:
            print("GPU vs emu", r, flush=True)
    run_configs(configs, lambda cfg: bench(cfg, rng, args), args, t0, result, "attention.json")
    TABLE.print(result["rows"])
    print(f"total {time.time() - t0:.1f} s")


# -- the backward ---------------------------------------------------------------------------------
BWD_CONFIGS = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 4096, 64, False),
               (4, 32, 4096, 64, True), (4, 32, 4096, 128, False, 8), (4, 32, 4096, 128, True, 8)]
BWD_SMALL = [(1, 2, 77, 64, 1), (1, 4, 130, 128, 2), (2, 4, 45, 64, 4)]      # (..., kv_group)


def backward_agreement(rng, arch=ARCH, shapes=BWD_SMALL):
    """The backward operator on small odd shapes, causal and not, on the GPU and the emulator
    from the same inputs: both against float64, and the fraction of bit-equal gradients."""
    from ptxgen.emu import run_operator
    from ptxgen.ops.attention_backward import AttentionBackward
    rows = []
    for B, H, S, D, g in shapes:
        for causal in (False, True):
            op = AttentionBackward(causal=causal, kv_group=g)
            shape = op.shape(B=B, H=H, S=S, D=D)
            seed = int(rng.integers(2 ** 31))
            row = dict(shape=(B, H, S, D), kv_group=g, causal=causal)
            try:
                gpu = op.make_inputs(shape, np.random.default_rng(seed))
                gpu.update(op.workspace_arrays(shape, arch))
                run_steps(op, shape, load_steps(op, shape, op.build(shape, arch), arch), gpu,
                          arch)
                emu = op.make_inputs(shape, np.random.default_rng(seed))
                run_operator(op, shape, emu, arch)
            except Exception as e:                                  # report, keep going
                rows.append(dict(row, error=f"{type(e).__name__}: {e}"[:300]))
                continue
            rows.append(dict(row, gpu_ok=op.check(shape, gpu)[0], emu_ok=op.check(shape, emu)[0],
                             **{f"{n}_bit_equal": float((gpu[n] == emu[n]).mean())
                                for n in op.outputs}))
    return rows


def backward_calls(impl, q, k, v, do, causal):
    gqa = k.shape[1] != q.shape[1]
    """(forward, forward + backward) callables of one implementation; the second returns
    (O, dQ, dK, dV)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import ptxgen
    if impl == "ptxgen":
        def fwd():
            return ptxgen.attention(q, k, v, causal=causal)
    else:
        be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[impl]

        def fwd():
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                      enable_gqa=gqa)

    def both():
        o = fwd()
        return (o, *torch.autograd.grad(o, (q, k, v), do))
    return fwd, both


def backward_check(res, q, k, v, do, causal, rng, lse=None):
    """(ok, largest |error| / bound) of dQ of one sampled head and dK, dV of its K/V head (the
    sum over the query heads of its group) against float64."""
    from ptxgen.ops.attention_backward import backward_reference
    B, H, S, D = q.shape
    group = H // k.shape[1]
    b, h = int(rng.integers(B)), int(rng.integers(H))
    hk = h // group
    refs = {}
    for hq in range(hk * group, (hk + 1) * group):
        f64 = [t[b, i].detach().double().cpu().numpy()
               for t, i in ((q, hq), (k, hk), (v, hk), (do, hq), (res[0], hq))]
        one = backward_reference(*f64[:4], 1 / D ** 0.5, causal, f64[4],
                                 None if lse is None else lse[b, hq].double().cpu().numpy())
        if hq == h:
            refs["dQ"], refs["dQ_bound"] = one["dQ"], one["dQ_bound"]
        for n in ("dK", "dV", "dK_bound", "dV_bound"):
            refs[n] = refs.get(n, 0) + one[n]
    ok, worst = True, 0.0
    for name, got, head in zip(("dQ", "dK", "dV"), res[1:], (h, hk, hk)):
        g = got[b, head].double().cpu().numpy()
        r = np.abs(g - refs[name]) / refs[name + "_bound"]
        ok &= bool(np.isfinite(g).all() and (r <= 1).all())
        worst = max(worst, float(np.nanmax(r)))
    return ok, worst


def bench_backward(cfg, rng):
    import torch
    import ptxgen
    from ptxgen.ops.attention_backward import AttentionBackward
    B, H, S, D, causal, *kv = cfg
    H_kv = kv[0] if kv else H
    op = AttentionBackward(causal=causal, kv_group=H // H_kv)
    flops = op.flops(op.shape(B=B, H=H, S=S, D=D))
    torch.manual_seed(int(rng.integers(2 ** 31)))
    q, k, v = (torch.randn(B, h, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for h in (H, H_kv, H_kv))
    do = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    name = config_name(B, H, S, D, causal, H_kv)
    rows, t_ref = [], {}
    for impl in ("flash", "cudnn", "ptxgen"):
        row = dict(config=name, impl=impl)
        try:
            fwd, both = backward_calls(impl, q, k, v, do, causal)
            res = both()
            lse = None
            if impl == "ptxgen":
                lse = ptxgen.attention(q.detach(), k.detach(), v.detach(), causal=causal,
                                       return_lse=True)[1]
            torch.cuda.synchronize()
            row["ok"], row["worst"] = backward_check(res, q, k, v, do, causal, rng, lse)
            del res
            t_f, t_fb = harness.gpu_ms(fwd), harness.gpu_ms(both)
        except Exception as e:                                      # report, keep going
            rows.append(dict(row, error=f"{type(e).__name__}: {e}"[:200]))
            BWD_TABLE.show(rows[-1])
            continue
        rows.append(timed(row, t_fb - t_f, t_ref, flops, fwd_ms=t_f, fwd_bwd_ms=t_fb))
        BWD_TABLE.show(rows[-1])
    from dataclasses import replace
    from ptxgen.schedule.attention_backward import default_wgmma_backward_schedule
    base = default_wgmma_backward_schedule(D)
    for sched in (base, replace(base, stages=3)):           # the default and a deeper ring
        rows.append(bench_wgmma_backward(q, k, v, do, causal, rng, name, t_ref, flops, sched))
        BWD_TABLE.show(rows[-1])
    return rows


def bench_wgmma_backward(q, k, v, do, causal, rng, name, t_ref, flops, schedule):
    """The sm_90a wgmma backward (a WgmmaBackwardSchedule; not the library's default yet),
    its three launches timed alone (the backward's time, as the others' difference)."""
    import torch
    import ptxgen
    from ptxgen.ops.attention_backward import AttentionBackward
    from ptxgen.runtime import load_steps
    B, H, S, D = q.shape
    row = dict(config=name, impl=f"wgmma-s{schedule.stages}")
    try:
        op = AttentionBackward(causal=causal, kv_group=H // k.shape[1], schedule=schedule)
        shape = op.shape(B=B, H=H, S=S, D=D)
        o, lse = ptxgen.attention(q.detach(), k.detach(), v.detach(), causal=causal,
                                  return_lse=True)
        grads = {n: torch.full_like(x, float("nan")) for n, x in
                 (("dQ", q), ("dK", k), ("dV", v))}
        arrays = {"Q": q.detach(), "K": k.detach(), "V": v.detach(), "O": o, "dO": do,
                  **grads}
        arrays = {n: harness.bits16(t) for n, t in arrays.items()}
        arrays["LSE"] = lse
        for n, (dims, dt) in op.workspace(shape, ARCH).items():
            arrays[n] = torch.empty(dims, dtype=torch.float32, device="cuda")
        go = harness.step_calls(op, shape, load_steps(op, shape, op.build(shape, ARCH), ARCH),
                                arrays, ARCH)
        go()
        torch.cuda.synchronize()
        row["ok"], row["worst"] = backward_check((o, grads["dQ"], grads["dK"], grads["dV"]),
                                                 q, k, v, do, causal, rng, lse)
        return timed(row, harness.gpu_ms(go), t_ref, flops, schedule=str(op.schedule))
    except Exception as e:                                          # report, keep going
        return dict(row, error=f"{type(e).__name__}: {e}"[:200])


BWD_TABLE = harness.Table([("config", 28), ("impl", 8)],
                          [("fwd_ms", "fwd ms", "8.3f"), ("fwd_bwd_ms", "f+b ms", "8.3f"),
                           ("ms", "bwd ms", "8.3f"), ("tflops", "TFLOP/s", "8.1f"),
                           ("x_flash", "xFLASH", "7.3f"), ("x_cudnn", "xCUDNN", "7.3f"),
                           ("worst", "err/bd", "7.3f"), ("ok", "ok", ">5")])


def main_backward(argv):
    p = argparse.ArgumentParser(prog="attention.py backward")
    p.add_argument("--configs", default="all",
                   help="'all' or indices into BWD_CONFIGS, e.g. 0,1")
    harness.out_argument(p)
    p.add_argument("--skip-small", action="store_true")
    p.add_argument("--budget-s", type=float, default=1e9,
                   help="start no further configuration after this many seconds")
    args = p.parse_args(argv)
    t0 = time.time()
    rng = np.random.default_rng(int(time.time()))
    configs = BWD_CONFIGS if args.configs == "all" else [BWD_CONFIGS[int(i)]
                                                           for i in args.configs.split(",")]
    import torch
    info = harness.run_info(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    print(info, flush=True)
    result = dict(info=info, rows=[], emulator=[])
    if not args.skip_small:
        result["emulator"] = backward_agreement(rng)
        for r in result["emulator"]:
            print("GPU vs emu", r, flush=True)
    run_configs(configs, lambda cfg: bench_backward(cfg, rng), args, t0, result,
                "attention_backward.json")
    BWD_TABLE.print(result["rows"], "bwd = (forward + backward) - forward, FA2's 2.5x flops")
    print(f"total {time.time() - t0:.1f} s")


# -- training: a small transformer block, ptxgen.attention against SDPA ------------------------
def train_losses(impl, steps, dims, device, seed=0):
    """Per-step losses of a one-block causal transformer (pre-LN attention + GELU MLP, bf16
    autocast, AdamW) trained on a fixed random Markov-chain language, every run from the same
    initial weights and batches; impl picks the attention: 'ptxgen', 'sdpa' (its default
    backend) or 'sdpa-math' (the math backend: the yardstick of bf16 noise)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import ptxgen
    vocab, d, heads, S, B = dims
    g = torch.Generator().manual_seed(seed)
    chain = torch.softmax(3 * torch.randn(vocab, vocab, generator=g), -1)

    def batch():
        t = torch.empty(B, S + 1, dtype=torch.long)
        t[:, 0] = torch.randint(vocab, (B,), generator=g)
        for i in range(S):
            t[:, i + 1] = torch.multinomial(chain[t[:, i]], 1, generator=g)[:, 0]
        return t.to(device)
    data = [batch() for _ in range(steps)]
    torch.manual_seed(seed)
    emb, pos = torch.nn.Embedding(vocab, d), torch.nn.Parameter(0.02 * torch.randn(S, d))
    ln1, ln2, ln3 = (torch.nn.LayerNorm(d) for _ in range(3))
    qkv, proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
    up, down, head = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d), torch.nn.Linear(d, vocab)
    mods = torch.nn.ModuleList([emb, ln1, ln2, ln3, qkv, proj, up, down, head]).to(device)
    pos = torch.nn.Parameter(pos.detach().to(device))
    opt = torch.optim.AdamW(list(mods.parameters()) + [pos], lr=3e-3)

    def attend(q, k, v):
        if impl == "ptxgen":
            return ptxgen.attention(q, k, v, causal=True)
        with sdpa_kernel(SDPBackend.MATH if impl == "sdpa-math" else
                         [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                          SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    losses = []
    for t in data:
        with torch.autocast(device_type=device if device != "cpu" else "cpu",
                            dtype=torch.bfloat16):
            x = emb(t[:, :-1]) + pos
            q, k, v = qkv(ln1(x)).view(B, S, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = attend(q.to(torch.bfloat16).contiguous(), k.to(torch.bfloat16).contiguous(),
                       v.to(torch.bfloat16).contiguous())
            x = x + proj(a.transpose(1, 2).reshape(B, S, d))
            x = x + down(F.gelu(up(ln2(x))))
            loss = F.cross_entropy(head(ln3(x)).float().reshape(-1, vocab), t[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def main_train(argv):
    p = argparse.ArgumentParser(prog="attention.py train")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--dims", default="512,256,4,256,8",
                   help="vocabulary, model width, heads (head dim = width / heads), S, B")
    p.add_argument("--device", default="cuda")
    harness.out_argument(p)
    args = p.parse_args(argv)
    dims = [int(x) for x in args.dims.split(",")]
    runs = {impl: train_losses(impl, args.steps, dims, args.device)
            for impl in ("sdpa", "sdpa-math", "ptxgen")}
    ptx = max(abs(a - b) for a, b in zip(runs["ptxgen"], runs["sdpa"]))
    noise = max(abs(a - b) for a, b in zip(runs["sdpa-math"], runs["sdpa"]))
    ok = ptx <= max(2 * noise, 1e-2)
    for i in range(0, args.steps, max(1, args.steps // 10)):
        print(f"step {i:3d}  " + "  ".join(f"{k} {v[i]:.4f}" for k, v in runs.items()))
    print("last  " + "  ".join(f"{k} {v[-1]:.4f}" for k, v in runs.items()))
    print(f"largest |ptxgen - sdpa| {ptx:.4f}; |sdpa-math - sdpa| (bf16 noise) {noise:.4f}; "
          f"{'within' if ok else 'beyond'} twice the noise (or 0.01)")
    harness.save_json(args.out, "attention_train.json",
                      dict(info=harness.run_info() if args.device == "cuda" else {},
                           dims=dims, losses=runs, largest=ptx,
                           noise=noise, within=ok))


if __name__ == "__main__":
    if sys.argv[1:2] == ["backward"]:
        main_backward(sys.argv[2:])
    elif sys.argv[1:2] == ["train"]:
        main_train(sys.argv[2:])
    else:
        main()
