"""What the GPU operator benchmarks share: the --out argument, the run's record and the JSON
written under --out, GPU time per call, sampled float64 checks of GEMM and attention results,
bound launches of an operator's steps, cuBLAS and torch's SDPA as references, and the short
table printed last.

A benchmark runs as `python benchmarks/NAME.py`, so this folder is on its import path and it
imports this module as `harness`; nothing here imports torch, triton or the GPU runtime before
a function that needs them is called.

    p = argparse.ArgumentParser()
    harness.out_argument(p)                      # --out DIR, default $OUT or "."
    info = harness.run_info(sms=sms)             # device, torch, sms, date, command
    t = harness.gpu_ms(go)                       # GPU ms per call, held batches
    harness.save_json(args.out, "name.json", dict(info=info, rows=rows))
    TABLE.print(rows)                            # harness.Table: the final short table
"""
import json
import math
import os
import re
import sys
import time

import numpy as np


# -- the run's record and its JSON -----------------------------------------------------------------
def out_argument(parser, default="."):
    """--out DIR, where the JSON goes: $OUT when set, else `default` (None: no file unless
    --out or $OUT is given)."""
    parser.add_argument("--out", default=os.environ.get("OUT", default),
                        help="directory for the results (default: $OUT, else "
                             f"{default or 'none'})")


def run_info(date_format="%Y-%m-%d %H:%M", command=True, **extra):
    """What a result file records about its run: the GPU's name, torch's version, `extra`
    (versions, SM count, target ...), the date, and the command line (command=False: not)."""
    import torch
    info = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, **extra,
                date=time.strftime(date_format))
    if command:
        info["command"] = " ".join(sys.argv)
    return info


def save_json(out, name, obj):
    """Write obj as out/name (indented; what JSON cannot hold as text); the path, or None when
    out is None."""
    if out is None:
        return None
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    return path


# -- timing ----------------------------------------------------------------------------------------
def gpu_ms(fn, repeat=3, target_ms=15.0):
    """GPU milliseconds per call of fn (which enqueues work on the default stream):
    ptxgen.runtime.time_calls, the median of `repeat` held batches of back-to-back calls
    (about target_ms each) queued behind a hold kernel, so no host launch latency is seen."""
    from ptxgen.runtime import time_calls
    return time_calls(fn, repeat=repeat, target_ms=target_ms)


def interleaved_ms(calls, rounds=5):
    """{name: GPU ms per call} for several implementations of one problem: gpu_ms of each in
    turn, the order rotated every round, the median per name. Clocks drift under sustained
    tensor-core load (power), so timing each implementation once, one after another, would
    charge the drift to whichever comes last."""
    names = list(calls)
    times = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            times[n].append(gpu_ms(calls[n], repeat=1))
    return {n: sorted(t)[len(t) // 2] for n, t in times.items()}


def rotating(calls):
    """A callable that runs the next of `calls` each time it is called (one per input set,
    so a timing loop does not find its inputs in L2)."""
    state = [0]

    def go():
        calls[state[0] % len(calls)]()
        state[0] += 1
    return go


def median_ms(fn, warmup=25, rep=200):
    """triton.testing.do_bench's median milliseconds of fn (a list of callables: each call
    runs the next, rotating). do_bench clears L2 between calls."""
    import triton.testing
    if isinstance(fn, (list, tuple)):
        fn = rotating(fn)
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def host_us(fn, n=300, sync=None, warmup=3, fewer=(100, 30)):
    """host_cost_us with n calls, then with `fewer` where the calls waited for the GPU: a
    launch with large parameters (tensor maps) fills the driver's queue of pending work after
    fewer launches."""
    for count in (n, *fewer):
        try:
            return host_cost_us(fn, count, sync, warmup)
        except RuntimeError as e:
            if count == (fewer[-1] if fewer else n):
                raise
            print(f"host_us: {e}; again with fewer calls", flush=True)


def host_cost_us(fn, n=300, sync=None, warmup=3):
    """Wall microseconds per call of n back-to-back calls while the GPU is busy (a hold kernel
    in front), so the host never waits for the GPU: the host's cost of a call. n stays well
    below the driver's queue of pending launches (about a thousand): past it, a launch waits
    for the GPU and the figure becomes the hold's length over n. sync: what waits for the
    device (default torch.cuda.synchronize). Raises if the calls outlasted the hold."""
    from ptxgen.runtime.timing import hold
    if sync is None:
        import torch
        sync = torch.cuda.synchronize
    for _ in range(warmup):
        fn()
    sync()
    hold_ms = 30.0 + n * 1.0          # 1 ms of hold per call: longer than any call's host cost
    hold(hold_ms)
    t = time.perf_counter()
    for _ in range(n):
        fn()
    total = time.perf_counter() - t
    sync()
    if total * 1e3 > 0.9 * hold_ms:
        raise RuntimeError(f"host_us: {n} calls took {total * 1e3:.1f} ms, about the hold's "
                           f"{hold_ms:.0f} ms: the host waited for the GPU")
    return total / n * 1e6


def host_profile(fn, n=200, top=14):
    """cProfile's table (by own time) of n calls of fn, the GPU synchronised after."""
    import cProfile
    import io
    import pstats
    import torch
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return "\n".join(line[:150] for line in text.getvalue().splitlines() if line.strip())


# -- launching ptxgen's kernels on torch tensors ---------------------------------------------------
def bits16(t):
    """A 16-bit tensor as int16 bit patterns (the tensor maps and pointer checks look at
    element sizes); any other tensor as it is."""
    import torch
    return t.view(torch.int16) if t.element_size() == 2 else t


def step_calls(op, shape, kernels, arrays, arch, ctas=None):
    """A no-argument callable that launches all of op's steps on device `arrays` (by operator
    name), each launch bound once (ptxgen.runtime.bound_launch); ctas: the persistent grid
    op.steps takes (None: its default). Its `launches`: one callable per step."""
    from ptxgen.runtime import bound_launch
    gos = [bound_launch(kernels[st.kernel], st.launch.grid, st.launch.block, st.args(arrays),
                        st.launch.shared_bytes)
           for st in op.steps(shape, arch, ctas)]

    def go():
        for g in gos:
            g()
    go.launches = gos
    return go


def attention_call(op, shape, q, k, v, O, LSE, arch, extra=None):
    """A callable launching an Attention operator's kernel on torch tensors (16-bit as int16
    bit patterns); extra: more kernel arrays by name (a score_mod's tensors, block lists)."""
    import torch

    from ptxgen.runtime import bound_launch, load_steps
    arrays = {"Q": q.view(torch.int16), "K": k.view(torch.int16), "V": v.view(torch.int16),
              "O": O.view(torch.int16), "LSE": LSE, **(extra or {})}
    for name, a in op.workspace_arrays(shape, arch).items():      # a persistent tile plan
        arrays.setdefault(name, torch.from_numpy(a.view(np.int32)).to(q.device))
    kern = load_steps(op, shape, op.build(shape, arch), arch)[op.kernel_name()]
    L = op.launch(shape)
    return bound_launch(kern, L.grid, L.block, op.kernel_args(shape, arrays), L.shared_bytes)


def sdpa_call(q, k, v, causal, backend="flash", gqa=False):
    """A callable running torch's scaled_dot_product_attention with one backend ("flash":
    FlashAttention-2, "cudnn"; gqa: k, v with fewer heads than q); it returns O."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    def go():
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    return go


def cublas(A, Bt, C, tf32=False):
    """A callable running torch.matmul(A, Bt.T) into C (cuBLAS); tf32=True allows TF32 tensor
    cores for f32 inputs (off otherwise, so an f32 GEMM elsewhere stays IEEE)."""
    import torch

    def go():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.matmul(A, Bt.T, out=C)
    return go


# -- sampled float64 checks ------------------------------------------------------------------------
def gemm_sample(A, Bt, rng, n=48):
    """(row indices, float64 rows of A @ Bt.T, their sums of |a||b|) for n random rows of C;
    A (M x K) and Bt (N x K) torch tensors on the GPU, the products taken there in float64."""
    import torch
    M = A.shape[0]
    idx = np.sort(rng.choice(M, size=min(n, M), replace=False))
    a = A[torch.tensor(idx, device=A.device)].double()
    bt = Bt.double()
    want = (a @ bt.T).cpu().numpy()
    absprod = (a.abs() @ bt.abs().T).cpu().numpy()
    del bt
    return idx, want, absprod


def gemm_sample_ok(C, sample, op, shape, scale=1.0):
    """C's sampled rows within op.error_bound (op's output type: a bf16 C adds its rounding),
    the reference and the bound times `scale` (fp8's per-tensor scales)."""
    import torch
    idx, want, absprod = sample
    got = C[torch.tensor(idx, device=C.device)].double().cpu().numpy()
    bound = scale * op.error_bound(shape, absprod)
    return bool(np.all(np.isfinite(got)) and np.all(np.abs(got - scale * want) <= bound))


def attention_sample(q, k, v, rng, causal=False, mods=None, heads=2, nrows=24):
    """[(b, h, rows, reference)] for a few random heads and query rows (the last row always
    among them): ptxgen.ops.attention.attention_reference in float64 on the CPU, bf16 rounding;
    mods: the operator's traced score_mod / mask_mod (op._mods.graphs())."""
    import torch

    from ptxgen.ops.attention import UNIT_ROUNDOFF, attention_reference
    B, H, S, D = q.shape
    out = []
    for _ in range(heads):
        b, h = int(rng.integers(B)), int(rng.integers(H))
        rows = np.sort(rng.choice(S, size=min(nrows, S), replace=False))
        rows[-1] = S - 1                                  # the last (partial-tile) row too
        qq = q[b, h, torch.tensor(rows, device=q.device)].double().cpu().numpy()
        hk = h // (H // k.shape[1])                     # grouped-query: the head's K/V head
        kk, vv = (t[b, hk].double().cpu().numpy() for t in (k, v))
        out.append((b, h, rows, attention_reference(qq, kk, vv, 1 / math.sqrt(D), causal,
                                                     UNIT_ROUNDOFF["bf16"], rows=rows,
                                                     mods=mods, bh=(b, h))))
    return out


def attention_first_call(go, O, sample, lse=None):
    """Run go once (what it returns, if anything, is O and copied there) and check O (and
    LSE) on the sampled rows: attention_check's (ok, worst)."""
    import torch
    res = go()
    if res is not None:
        O.copy_(res)
    torch.cuda.synchronize()
    return attention_check(O, sample, lse)


def attention_check(O, sample, lse=None):
    """(ok, largest |error| / bound) of O (and LSE: within its bound or equal, as a row with
    no allowed key gives -inf) on the sampled rows."""
    ok, worst = True, 0.0
    for b, h, rows, ref in sample:
        got = O[b, h, rows].double().cpu().numpy()
        r = np.abs(got - ref["O"]) / ref["O_bound"]
        worst = max(worst, float(np.nanmax(r)))
        ok &= bool(np.isfinite(got).all() and (r <= 1).all())
        if lse is not None:
            g = lse[b, h, rows].double().cpu().numpy()
            same = g == ref["LSE"]
            ok &= bool((same | (np.abs(g - ref["LSE"]) <= ref["LSE_bound"])).all())
    return ok, worst


# -- the final table -------------------------------------------------------------------------------
class Table:
    """The short table a benchmark prints last, one line per result row (a dict).

    head: (key, width[, title]) columns, left-aligned text; cols: (key, title, format)
    columns: a number format ("8.3f"), a text width (">5": str() of the value), or "" for
    trailing text; a missing or None value prints '-'. A row with an "error" prints ERROR and
    the message after its head columns."""

    def __init__(self, head, cols):
        self.head, self.cols = head, cols

    @staticmethod
    def _width(fmt):
        return int(re.match(r"[<>^]?(\d*)", fmt).group(1) or 0)

    def header(self):
        parts = [f"{(h[2] if len(h) > 2 else h[0]):{h[1]}}" for h in self.head]
        parts += [f"{title:>{self._width(fmt)}}" for _, title, fmt in self.cols]
        return " ".join(parts).rstrip()

    def line(self, r):
        text = " ".join(f"{str(r.get(h[0], '')):{h[1]}}" for h in self.head)
        if "error" in r:
            return f"{text} ERROR {r['error']}"
        parts = [text]
        for key, _, fmt in self.cols:
            v, w = r.get(key), self._width(fmt)
            if v is None:
                parts.append(f"{'-':>{w}}" if w else "")
            elif fmt and fmt[-1] in "eEfgG%d":
                parts.append(f"{v:{fmt}}")
            else:
                parts.append(f"{str(v):{fmt}}")
        return " ".join(parts).rstrip()

    def show(self, r):
        """Print one row's line as it comes."""
        print(self.line(r), flush=True)

    def print(self, rows, note=""):
        """The header (and a note after it), then every row."""
        print(self.header() + (f"  ({note})" if note else ""))
        for r in rows:
            self.show(r)
