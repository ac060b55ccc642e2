"""The public functions on the GPU (docs/PERF.md, "Operators through the public API"):
ptxgen.matmul and ptxgen.attention on torch tensors against the operators' own kernels launched
directly (the plans the benchmarks use) and against torch, in one process on one GPU.

    python benchmarks/public_api.py [--out DIR] [--quick] [--no-first-call] [--host-only]

Correctness first (fresh random inputs; sampled rows against float64), then GPU time per call
(ptxgen.runtime.time_calls: held batches, so host launch latency is excluded), host cost of a
cached call (wall time of back-to-back calls, the GPU kept busy by one long kernel in front so the
host never waits), the first call in a fresh process with a cold and a warm kernel cache,
torch.compile(fullgraph=True) of a two-layer MLP block and CUDA-graph capture. Prints a table
last; writes JSON under --out.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch                                                                 # noqa: E402
import torch.nn.functional as F                                              # noqa: E402

import harness                                                               # noqa: E402
import ptxgen                                                                # noqa: E402
from ptxgen.runtime import bound_steps, load_steps, time_calls               # noqa: E402

ARCH = "sm_90a"


def direct_matmul(a, b, b_layout):
    """The operator's kernel launched as the operator benchmarks do: A row-major, B given as
    Bt (N x K, b_layout "col") or as B (K x N, "row")."""
    from ptxgen.ops.tc_matmul import TcMatmul
    M, K = a.shape
    N = b.shape[0] if b_layout == "col" else b.shape[1]
    op = TcMatmul("bf16", "bf16", b_layout=b_layout)
    shape = op.shape(M=M, N=N, K=K)
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    arrays = {"A": a, "Bt" if b_layout == "col" else "B": b,
              "C": torch.empty(M, N, dtype=torch.bfloat16, device="cuda")}
    return bound_steps(op, shape, kernels, arrays, ARCH), arrays["C"]


def direct_attention(q, k, v, causal):
    from ptxgen.ops.attention import Attention
    B, H, S, D = q.shape
    op = Attention("bf16", causal=causal)
    shape = op.shape(B=B, H=H, S=S, D=D)
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    arrays = {"Q": q, "K": k, "V": v, "O": torch.empty_like(q),
              "LSE": torch.empty(B, H, S, dtype=torch.float32, device="cuda")}
    return bound_steps(op, shape, kernels, arrays, ARCH), arrays["O"]


def sampled_matmul_error(c, a, b, rows=64):
    idx = torch.randperm(a.shape[0], device=a.device)[:rows]
    ref = a[idx].double() @ b.double()
    got = c[idx].double()
    bound = 2 * a.shape[1] * 2.0 ** -23 * (a[idx].double().abs() @ b.double().abs()) + \
        2.0 ** -8 * (a[idx].double().abs() @ b.double().abs())
    return float(((got - ref).abs() / bound).max())          # <= 1: within the bound


def sampled_attention_error(o, q, k, v, causal, heads=4):
    B, H, S, D = q.shape
    worst = 0.0
    for _ in range(heads):
        b, h = int(torch.randint(B, ())), int(torch.randint(H, ()))
        qs = torch.randperm(S, device=q.device)[:32]
        s = (q[b, h, qs].double() @ k[b, h].double().T) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.arange(S, device=q.device)[None, :] > qs[:, None], -math.inf)
        p = torch.softmax(s, -1)
        ref = p @ v[b, h].double()
        worst = max(worst, float((o[b, h, qs].double() - ref).abs().max()))
    return worst


FIRST_CALL = """
import time, torch
t0 = time.perf_counter()
import ptxgen
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t = time.perf_counter()
c = ptxgen.matmul(a, b)
torch.cuda.synchronize()
first = time.perf_counter() - t
t = time.perf_counter()
c = ptxgen.matmul(a, b)
torch.cuda.synchronize()
print(first, time.perf_counter() - t, ptxgen.last_launch().cache)
"""


def first_calls():
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PTXGEN_CACHE_DIR=d)
        for label in ("cold cache", "warm cache"):
            p = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True,
                               text=True)
            if p.returncode:
                out[label] = {"error": p.stderr.strip().splitlines()[-1]}
                continue
            first, second, _ = p.stdout.split()
            out[label] = {"first_call_s": float(first), "second_call_s": float(second)}
    return out


def mlp_block(x, w1, w2):
    return ptxgen.matmul(F.silu(ptxgen.matmul(x, w1)), w2)


def compile_and_graph():
    x = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(4096, 11008, device="cuda", dtype=torch.bfloat16) / 64
    w2 = torch.randn(11008, 4096, device="cuda", dtype=torch.bfloat16) / 100
    eager = mlp_block(x, w1, w2)
    torch._dynamo.reset()
    explain = torch._dynamo.explain(mlp_block)(x, w1, w2)
    compiled = torch.compile(mlp_block, fullgraph=True)
    got = compiled(x, w1, w2)
    res = {"graph_breaks": explain.graph_break_count, "graphs": explain.graph_count,
           "compiled_equals_eager": bool(torch.equal(got, eager))}
    static_x = x.clone()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mlp_block(static_x, w1, w2)                      # warm-up on the capture stream
        with torch.cuda.graph(g):
            static_out = mlp_block(static_x, w1, w2)
    torch.cuda.current_stream().wait_stream(s)
    x2 = torch.randn_like(x)
    static_x.copy_(x2)
    g.replay()
    torch.cuda.synchronize()
    res["graph_equals_eager"] = bool(torch.equal(static_out, mlp_block(x2, w1, w2)))
    res["graph_ms"] = time_calls(g.replay)
    res["eager_ms"] = time_calls(lambda: mlp_block(x, w1, w2))
    return res


def main():
    ap = argparse.ArgumentParser()
    harness.out_argument(ap)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--host-only", action="store_true",
                    help="only the host cost of cached calls (no GPU timing, compile or graph)")
    ap.add_argument("--no-first-call", action="store_true",
                    help="skip the fresh-process first calls (two subprocesses)")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows, meta = [], harness.run_info(date_format="%Y-%m-%d", command=False)
    meta["ptxgen"] = ptxgen.__version__
    for n in (() if args.host_only else (4096,) if args.quick else (4096, 8192)):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        bt = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)       # N x K
        b_view = bt.T                                                      # K x N, transposed
        b_plain = bt.T.contiguous()                                        # K x N, row-major
        run_col, c_col = direct_matmul(a, bt, "col")
        run_row, c_row = direct_matmul(a, b_plain, "row")
        flops = 2 * n ** 3
        c1 = ptxgen.matmul(a, b_plain)
        c2 = ptxgen.matmul(a, b_view)
        run_col()
        run_row()
        torch.cuda.synchronize()
        errs = [sampled_matmul_error(c, a, b_plain) for c in (c1, c2, c_row, c_col)]
        ptxgen.matmul(a, b_plain)
        rec_plain = str(ptxgen.last_launch())
        ptxgen.matmul(a, b_view)
        rec_view = str(ptxgen.last_launch())
        t = harness.interleaved_ms({"row": run_row, "col": run_col,
                                    "plain": lambda: ptxgen.matmul(a, b_plain),
                                    "view": lambda: ptxgen.matmul(a, b_view),
                                    "torch": lambda: torch.matmul(a, b_plain)})
        t_row, t_col, t_plain, t_view, t_torch = (t[k] for k in ("row", "col", "plain", "view",
                                                                  "torch"))
        for label, t, kt, err, rec in (
                ("kernel, B row-major", t_row, t_row, errs[2], ""),
                ("ptxgen.matmul(a, b)", t_plain, t_row, errs[0], rec_plain),
                ("kernel, B column-major", t_col, t_col, errs[3], ""),
                ("ptxgen.matmul(a, bt.T)", t_view, t_col, errs[1], rec_view),
                ("torch.matmul (cuBLAS)", t_torch, t_row, None, "")):
            rows.append({"case": f"matmul bf16 {n}^3", "impl": label, "ms": t,
                         "tflops": flops / t / 1e9, "vs_kernel": kt / t,
                         "vs_torch": t_torch / t, "err_over_bound": err, "record": rec})
    B, H, S, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (() if args.host_only else (False, True)):
        run_direct, o_direct = direct_attention(q, k, v, causal)
        o = ptxgen.attention(q, k, v, causal=causal)
        run_direct()
        torch.cuda.synchronize()
        flops = 4 * B * H * S * S * D // (2 if causal else 1)
        ptxgen.attention(q, k, v, causal=causal)
        rec = str(ptxgen.last_launch())
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def sdpa(be):
            def call():
                with sdpa_kernel(be):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return call
        res = harness.interleaved_ms({"direct": run_direct,
                                      "api": lambda: ptxgen.attention(q, k, v, causal=causal),
                                      "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
                                      "flash": sdpa(SDPBackend.FLASH_ATTENTION)})
        t_direct, t_api = res["direct"], res["api"]
        errs = (sampled_attention_error(o, q, k, v, causal),
                sampled_attention_error(o_direct, q, k, v, causal))
        for label, t, err in (("kernel", t_direct, errs[1]),
                              ("ptxgen.attention", t_api, errs[0]),
                              ("SDPA CUDNN", res["cudnn"], None),
                              ("SDPA FLASH", res["flash"], None)):
            rows.append({"case": f"attention B4 H32 S4096 D128 causal={causal}", "impl": label,
                         "ms": t, "tflops": flops / t / 1e9, "vs_kernel": t_direct / t,
                         "vs_cudnn": res["cudnn"] / t, "vs_flash": res["flash"] / t,
                         "max_abs_err": err, "record": rec if label == "ptxgen.attention" else ""})
    # host cost of a cached call, small problems so the GPU side is short
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    calls = {"ptxgen.matmul": lambda: ptxgen.matmul(a, b),
             "torch.matmul": lambda: torch.matmul(a, b),
             "ptxgen.attention": lambda: ptxgen.attention(q, k, v, causal=True),
             "F.scaled_dot_product_attention":
                 lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
    host = {}

    def measure(name, fn):
        try:
            host[name] = harness.host_us(fn)
        except RuntimeError as e:                       # recorded, the table still comes
            print(name, e)
            # the calls waited for the GPU behind the hold: time them unheld instead, beside
            # their GPU time (the loop's time is the host's cost where that is the larger)
            import time
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(300):
                fn()
            loop = (time.perf_counter() - t0) / 300 * 1e6
            torch.cuda.synchronize()
            gpu = harness.gpu_ms(fn) * 1e3
            host[name] = loop if loop > 1.5 * gpu else float("nan")
            host[name + " (unheld loop us, gpu us)"] = [loop, gpu]
            print(f"{name}: unheld loop {loop:.1f} us per call, GPU {gpu:.1f} us per call")
    for name, fn in calls.items():
        measure(name, fn)
    with torch.no_grad():
        measure("ptxgen.matmul (no_grad)", calls["ptxgen.matmul"])
    a.requires_grad_()
    measure("ptxgen.matmul (custom op, grad)", calls["ptxgen.matmul"])
    for name in ("ptxgen.matmul", "ptxgen.attention"):     # where a cached call's host time goes
        print(f"profile of 200 cached {name} calls (tottime, top 14):")
        print(harness.host_profile(calls[name], 200, 14))
    report = {"meta": meta, "rows": rows, "host_us": host}

    def save():
        harness.save_json(args.out, "public_api.json", report)
    save()
    print_table(meta, rows, host)
    # the fresh-process and compile parts come after the table, so a failure there loses nothing
    for key, part in (("first_call", None if args.no_first_call or args.host_only else
                       first_calls),
                      ("compile_and_graph", None if args.host_only else compile_and_graph)):
        if part is None:
            continue
        try:
            report[key] = part()
        except Exception as e:                                  # recorded, not hidden
            report[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        save()
        print(key, json.dumps(report[key]))


def print_table(meta, rows, host):
    print(f"{meta['device']}  torch {meta['torch']}  {meta['date']}")
    print("host us per cached call: " + ", ".join(f"{k} {v:.1f}" for k, v in host.items()))
    print(f"{'case':44s} {'impl':26s} {'ms':>8s} {'TFLOP/s':>8s} {'/kernel':>8s} "
          f"{'/torch':>7s} {'err':>8s}")
    for r in rows:
        err = r.get("err_over_bound", r.get("max_abs_err"))
        ref = r.get("vs_torch", r.get("vs_cudnn"))       # cuBLAS, or SDPA's cuDNN backend
        print(f"{r['case']:44s} {r['impl']:26s} {r['ms']:8.3f} {r['tflops']:8.1f} "
              f"{r['vs_kernel']:8.3f} {'' if ref is None else f'{ref:7.3f}'} "
              f"{'' if err is None else f'{err:8.3g}'}")

if __name__ == "__main__":
    main()
