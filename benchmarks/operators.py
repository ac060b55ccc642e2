"""Operator benchmark (run on a GPU): ptxgen vs its Numba twin vs torch vs Triton, one process.

    python benchmarks/operators.py [--only OPS] [--out DIR]   # one table; DIR/operators.json

For saxpy, add, scale, transpose, row_reduce (sum), row_max, softmax at a few shapes (some not
multiples of any tile), each implementation runs on the same fresh random inputs with its output
poisoned with NaN first and is checked against a float64 reference computed with torch on the
device (the operator's own tolerances). Timing, the same for every implementation: ptxgen.runtime.time_calls,
CUDA events around a batch of back-to-back calls (~20 ms of GPU work) queued behind a kernel
that spins until the host has enqueued them all, so the events see GPU time only, not the
host's launch latency (which exceeds a short kernel's run time); median of 5 batches; the implementations of a case (and its
bandwidth reference) take turns over ROUNDS rounds, and each figure is the median over rounds,
so slow drifts of the device hit all of them alike.

Bandwidth references, timed the same way in the same rounds: for a transpose, torch's copy_ of
a tensor of the same size (bytes = read + write); for a row reduction, torch's x.sum() of the
very same x (bytes read). Besides, a 1 GiB copy and a 1 GiB read (torch x.sum() and ptxgen's
row sum, the faster of the two) are measured once at the start. "x ref" is against the same-size
reference, "x 1GiB" against the 1 GiB one. Shapes whose data fit in L2 (8192×1000) run from L2
after the first launch, for everyone alike.
"""
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from ptxgen import emit_module  # noqa: E402
from ptxgen.ir.verify import verify_module  # noqa: E402
from ptxgen.ops import get_operator  # noqa: E402
from ptxgen.ops.elementwise import Add, Scale  # noqa: E402
from ptxgen.ops.reduce import RowReduce  # noqa: E402
from ptxgen.ops.saxpy import Saxpy  # noqa: E402
from ptxgen.ops.softmax import Softmax  # noqa: E402
from ptxgen.ops.transpose import Transpose  # noqa: E402

# -- Triton versions of the library operators: the straightforward Triton program (masked block
# loads and stores, tl.sum/tl.max), autotuned over a few block sizes and warp counts;
# `triton_launcher(name, shape, d)` returns a callable writing d['out'], or None without triton
try:
    import triton  # noqa: E402
    import triton.language as tl  # noqa: E402
except Exception:            # not installed, or no usable backend
    triton = None


def triton_version():
    return getattr(triton, "__version__", None)


if triton is not None:
    def _cfgs(pairs, **fixed):
        return [triton.Config(dict(fixed, BLOCK=b), num_warps=w) for b, w in pairs]

    _EW = _cfgs(((1024, 4), (2048, 8), (4096, 8)))

    @triton.autotune(configs=_EW, key=["n"])
    @triton.jit
    def saxpy_kernel(x, y, out, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, a * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.autotune(configs=_EW, key=["n"])
    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    @triton.autotune(configs=_EW, key=["n"])
    @triton.jit
    def scale_kernel(x, out, s, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, s * tl.load(x + offs, mask=m), mask=m)

    @triton.autotune(configs=[triton.Config({"BM": bm, "BN": bn}, num_warps=w)
                              for bm, bn, w in ((32, 32, 4), (64, 64, 4), (64, 64, 8))],
                     key=["M", "N"])
    @triton.jit
    def transpose_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        m = (rm[:, None] < M) & (rn[None, :] < N)
        t = tl.load(x + rm[:, None].to(tl.int64) * N + rn[None, :], mask=m)
        tl.store(out + rn[:, None].to(tl.int64) * M + rm[None, :], tl.trans(t),
                 mask=tl.trans(m))

    _RED = _cfgs(((1024, 4), (2048, 8), (4096, 8)))

    @triton.autotune(configs=_RED, key=["N"])
    @triton.jit
    def row_sum_kernel(x, out, N, BLOCK: tl.constexpr):
        row = x + tl.program_id(0).to(tl.int64) * N
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(row + cols, mask=cols < N, other=0.0)
        tl.store(out + tl.program_id(0), tl.sum(acc, axis=0))

    @triton.autotune(configs=_RED, key=["N"])
    @triton.jit
    def row_max_kernel(x, out, N, BLOCK: tl.constexpr):
        row = x + tl.program_id(0).to(tl.int64) * N
        acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc = tl.maximum(acc, tl.load(row + cols, mask=cols < N, other=float("-inf")))
        tl.store(out + tl.program_id(0), tl.max(acc, axis=0))

    @triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (4, 8, 16)], key=["N"])
    @triton.jit
    def softmax_kernel(x, out, N, BLOCK: tl.constexpr):
        # the fused-softmax tutorial: one program per row, the row in registers
        off = tl.program_id(0).to(tl.int64) * N
        cols = tl.arange(0, BLOCK)
        v = tl.load(x + off + cols, mask=cols < N, other=float("-inf"))
        v = v - tl.max(v, axis=0)
        e = tl.exp(v)
        tl.store(out + off + cols, e / tl.sum(e, axis=0), mask=cols < N)


def triton_launcher(name, shape, d):
    if triton is None:
        return None
    x, o = d["x"], d["out"]
    if name in ("saxpy", "add", "scale"):
        n = shape["n"]

        def grid(meta):
            return (triton.cdiv(n, meta["BLOCK"]),)
        if name == "saxpy":
            a = float(d["a"])
            return lambda: saxpy_kernel[grid](x, d["y"], o, a, n)
        if name == "add":
            return lambda: add_kernel[grid](x, d["y"], o, n)
        s = float(d["s"])
        return lambda: scale_kernel[grid](x, o, s, n)
    M, N = shape["M"], shape["N"]
    if name == "transpose":
        def grid2(meta):
            return (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
        return lambda: transpose_kernel[grid2](x, o, M, N)
    if name == "row_reduce":
        return lambda: row_sum_kernel[(M,)](x, o, N)
    if name == "row_max":
        return lambda: row_max_kernel[(M,)](x, o, N)
    if name == "softmax":
        block = triton.next_power_of_2(N)
        return lambda: softmax_kernel[(M,)](x, o, N, BLOCK=block)
    return None


CASES = [
    ("saxpy", {"n": 1 << 28}), ("add", {"n": 1 << 28}), ("scale", {"n": 1 << 28}),
    ("transpose", {"M": 8192, "N": 8192}), ("transpose", {"M": 16384, "N": 16384}),
    ("transpose", {"M": 8191, "N": 8193}),
    ("row_reduce", {"M": 16384, "N": 8192}), ("row_reduce", {"M": 32768, "N": 8192}),
    ("row_reduce", {"M": 8192, "N": 1000}),
    ("row_max", {"M": 16384, "N": 8192}), ("row_max", {"M": 8192, "N": 1000}),
    ("softmax", {"M": 16384, "N": 1024}), ("softmax", {"M": 4096, "N": 4096}),
]
# Other configurations of the same operators, timed beside the library default.
VARIANTS = {
    "saxpy": [("grid stride ctas/sm=8", Saxpy(ctas_per_sm=8)), ("chunks=2", Saxpy(chunks=2))],
    "add": [("chunks=2", Add(chunks=2)), ("v2", Add(vec=2))],
    "scale": [("grid stride ctas/sm=8", Scale(ctas_per_sm=8)), ("v1", Scale(vec=1))],
    # pad=0 (bank conflicts) is left out: 0.35x copy on the H200, half the default.
    # float4 variants: chunks per thread in flight 2 (32x32 rows=4), 4 (64x64 rows=8)
    # group=0: the 2-D grid in row-major order; the default is float4 (aligned rows) or scalar,
    # 64x64 tile, 32x8 threads, group=64
    "transpose": [("scalar 32x32 rows=4 2-D grid", Transpose(tile=32, block_rows=4, vec=1,
                                                             group=0)),
                  ("scalar 64x64 rows=8 2-D grid", Transpose(vec=1, group=0)),
                  ("scalar 64x64 rows=8 group=32", Transpose(vec=1, group=32)),
                  ("scalar 64x64 rows=8 group=64", Transpose(vec=1)),
                  ("scalar 64x64 rows=8 group=128", Transpose(vec=1, group=128)),
                  ("v4 32x32 rows=4 2-D grid", Transpose(vec=4, tile=32, block_rows=4,
                                                         group=0)),
                  ("v4 64x64 rows=8 2-D grid", Transpose(vec=4, group=0)),
                  ("v4 64x64 rows=8 group=32", Transpose(vec=4, group=32)),
                  ("v4 64x64 rows=8 group=128", Transpose(vec=4, group=128))],
    "row_reduce": [("unroll=8 ld.nc", RowReduce("sum", cache="nc")),
                   ("unroll=4 ld.nc", RowReduce("sum", unroll=4, cache="nc")),
                   ("unroll=4 ld.nc.L1::no_allocate", RowReduce("sum", unroll=4, cache="nc",
                                                                evict="no_allocate")),
                   ("threads=512 unroll=4 ld.nc", RowReduce("sum", threads=512, unroll=4,
                                                            cache="nc")),
                   ("threads=512 unroll=2 ld.nc", RowReduce("sum", threads=512, unroll=2,
                                                            cache="nc")),
                   ("unroll=8 rows/cta=2 ld.nc", RowReduce("sum", rows_per_cta=2,
                                                           cache="nc"))],
    "row_max": [("unroll=4 ld.nc.L1::no_allocate", RowReduce("max", unroll=4, cache="nc",
                                                             evict="no_allocate")),
                ("threads=512 unroll=4 ld.nc", RowReduce("max", threads=512, unroll=4,
                                                         cache="nc"))],
    "softmax": [("threads=512", Softmax(threads=512)),
                ("warp rows<=512", Softmax(warp_cols=512))],
}
BATCH_MS, REPEAT, ROUNDS = 20.0, 5, 5
GIB = 1 << 30


def timer(fn):
    """A callable returning fn's GPU ms per call: ptxgen.runtime.time_calls (a hold kernel,
    then a batch of back-to-back calls between CUDA events), batch sized on first use."""
    from ptxgen.runtime import time_calls
    from ptxgen.runtime.timing import batch_for
    n = batch_for(fn, BATCH_MS)
    return lambda: time_calls(fn, batch=n, repeat=REPEAT)


# -- inputs and references ----------------------------------------------------------------------
def device_inputs(op, shape, rng):
    """The operator's own random inputs on the device (torch tensors; scalars stay numpy)."""
    import torch
    host = op.make_inputs(shape, rng)
    return {k: torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else v
            for k, v in host.items()}


def reference(name, d):
    """float64 result on the device."""
    import torch
    x = d["x"].double()
    if name == "saxpy":
        return float(d["a"]) * x + d["y"].double()
    if name == "add":
        return x + d["y"].double()
    if name == "scale":
        return float(d["s"]) * x
    if name == "transpose":
        return x.t()
    if name == "row_reduce":
        return x.sum(1)
    if name == "row_max":
        return x.amax(1)
    if name == "softmax":
        return torch.softmax(x, 1)
    raise KeyError(name)


def check(op, shape, got, want):
    """The operator's tolerance rule (Operator.check) evaluated on the device."""
    import torch
    g = got.double()
    scale = op.tolerance_scale(shape)
    bound = op.atol * scale + op.rtol * scale * want.abs()
    return bool(torch.isfinite(g).all()) and bool(((g - want).abs() <= bound).all())


# -- implementations ----------------------------------------------------------------------------
def ptxgen_impl(op, shape, d, arch, sms):
    from ptxgen.runtime import bound_launch, load_kernel
    from ptxgen.runtime.driver import launch
    m = verify_module(op.build(shape, arch))
    kir = m.kernel(op.kernel_name())
    k = load_kernel(emit_module(m, arch), kir.name, kir.params)
    cfg = op.launch(shape, sm_count=sms)
    args = op.kernel_args(shape, d)
    launch(k, cfg.grid, cfg.block, args, cfg.shared_bytes)
    return timer(bound_launch(k, cfg.grid, cfg.block, args, cfg.shared_bytes)), k.registers


def numba_impl(name, shape, d):
    from numba import cuda

    from ptxgen.runtime.twins import twin_kernel, twin_launch_args
    dn = {k: cuda.as_cuda_array(v) if hasattr(v, "data_ptr") else v for k, v in d.items()}
    tk = twin_kernel(name)
    grid, block, args = twin_launch_args(name, shape, dn)
    run = tk[grid, block]
    run(*args)
    cuda.synchronize()
    return timer(lambda: run(*args))


def torch_impl(name, d):
    """A callable that writes the result into d['out'] (through torch's own out= when it has
    one; softmax has none, so its result is copied after timing)."""
    import torch
    x, o = d["x"], d["out"]
    fns = {
        "saxpy": lambda: torch.add(d["y"], x, alpha=float(d["a"]), out=o),
        "add": lambda: torch.add(x, d["y"], out=o),
        "scale": lambda: torch.mul(x, float(d["s"]), out=o),
        "transpose": lambda: o.copy_(x.t()),
        "row_reduce": lambda: torch.sum(x, 1, out=o),
        "row_max": lambda: torch.amax(x, 1, out=o),
        "softmax": lambda: torch.softmax(x, 1),
    }
    fn = fns[name]
    res = fn()
    if name == "softmax":
        o.copy_(res)
    return timer(fn)


def triton_impl(name, shape, d):
    fn = triton_launcher(name, shape, d)
    if fn is None:
        return None
    fn()                        # autotunes on the first call, then writes the output
    return timer(fn)


# -- bandwidth references -----------------------------------------------------------------------
def references(arch, sms):
    import torch
    n = GIB // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    rows = []
    t = timer(lambda: dst.copy_(src))()
    assert torch.equal(dst, src)
    rows.append(("copy", "torch copy_ 1 GiB", t, 2 * GIB / t / 1e6))
    t = timer(lambda: src.sum())()
    rows.append(("read", "torch x.sum() 1 GiB", t, GIB / t / 1e6))
    op = RowReduce("sum")
    shape = op.shape(M=n // 8192, N=8192)
    d = {"x": src.view(shape["M"], shape["N"]), "out": torch.full((shape["M"],), float("nan"),
                                                                  device="cuda")}
    time_it, _ = ptxgen_impl(op, shape, d, arch, sms)
    ok = check(op, shape, d["out"], d["x"].double().sum(1))
    t = time_it()
    rows.append(("read", f"ptxgen row sum 1 GiB{'' if ok else ' (WRONG)'}", t,
                 op.bytes_moved(shape) / t / 1e6))
    copy_bw = max(r[3] for r in rows if r[0] == "copy")
    read_bw = max(r[3] for r in rows if r[0] == "read" and "WRONG" not in r[1])
    return rows, copy_bw, read_bw


def same_size_reference(name, d):
    """(label, bytes, callable) of the case's bandwidth reference, or None."""
    import torch
    x = d["x"]
    if name == "transpose":
        dst = torch.empty_like(x)
        return "torch copy_ same size", 2 * 4 * x.numel(), lambda: dst.copy_(x)
    if name in ("row_reduce", "row_max"):
        return "torch x.sum() same x", 4 * x.numel(), lambda: x.sum()
    return None


# -- one case -----------------------------------------------------------------------------------
def run_case(name, dims, rng, arch, sms):
    import torch
    op = get_operator(name)
    shape = op.shape(**dims)
    d = device_inputs(op, shape, rng)
    want = reference(name, d)
    nbytes = op.bytes_moved(shape)
    impls = [("ptxgen", lambda: ptxgen_impl(op, shape, d, arch, sms))]
    for label, v in VARIANTS.get(name, []):
        impls.append((f"ptxgen {label}", lambda v=v: ptxgen_impl(v, shape, d, arch, sms)))
    impls += [("numba twin", lambda: (numba_impl(name, shape, d), None)),
              ("torch", lambda: (torch_impl(name, d), None)),
              ("triton", lambda: (triton_impl(name, shape, d), None))]
    rows, timers = [], {}
    for label, make in impls:
        d["out"].fill_(float("nan"))
        try:
            time_it, regs = make()
            if time_it is None:
                continue                      # triton not installed
            torch.cuda.synchronize()
            ok = check(op, shape, d["out"], want)
            err = None
            timers[label] = time_it
        except Exception as e:               # one failing implementation must not hide the rest
            ok, regs, err = False, None, f"{type(e).__name__}: {e}"[:200]
        rows.append({"operator": name, "shape": _dims(shape), "impl": label, "ms": float("nan"),
                     "correct": ok, "registers": regs, "error": err})
    ref = same_size_reference(name, d)
    if ref:
        timers["__ref__"] = timer(ref[2])
    times = {label: [] for label in timers}
    for _ in range(ROUNDS):                   # every implementation once per round
        for label, time_it in timers.items():
            times[label].append(time_it())
    for r in rows:
        t = times.get(r["impl"])
        if t:
            r["ms"] = float(np.median(t))
            r["ms_rounds"] = t
        r["GB/s"] = nbytes / r["ms"] / 1e6 if r["ms"] == r["ms"] else float("nan")
        if ref and t:
            ratios = [(nbytes / a) / (ref[1] / b) for a, b in zip(t, times["__ref__"])]
            r["x_ref"] = float(np.median(ratios))
            r["x_ref_range"] = [float(min(ratios)), float(max(ratios))]
        else:
            r["x_ref"] = None
    if ref:
        tr = float(np.median(times["__ref__"]))
        rows.append({"operator": name, "shape": _dims(shape), "impl": f"[ref] {ref[0]}",
                     "ms": tr, "GB/s": ref[1] / tr / 1e6, "correct": True, "registers": None,
                     "error": None, "x_ref": 1.0, "ms_rounds": times["__ref__"]})
    return rows


def _dims(shape):
    return "x".join(str(v) for v in shape.values())


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None,
                   help="comma-separated operators to run (default: all)")
    harness.out_argument(p, default=None)
    a = p.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    import numba
    import torch
    from numba import cuda

    from ptxgen.runtime.device import device_arch
    t_start = time.perf_counter()
    arch = device_arch()
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    info = harness.run_info(
        date_format="%Y-%m-%d", arch=arch, sms=sms, numba=numba.__version__,
        triton=triton_version(), python=platform.python_version(), numpy=np.__version__,
        timing=f"ptxgen.runtime.time_calls: held batches of back-to-back calls "
               f"(~{BATCH_MS:g} ms), median of {REPEAT} batches, median over {ROUNDS} "
               f"interleaved rounds")
    try:
        import numba_cuda
        info["numba_cuda"] = numba_cuda.__version__
    except Exception:
        pass
    refs, copy_bw, read_bw = references(arch, sms)
    torch.cuda.empty_cache()
    rng = np.random.default_rng()
    rows = []
    for name, dims in CASES:
        if only and name not in only:
            continue
        rows.extend(run_case(name, dims, rng, arch, sms))
        torch.cuda.empty_cache()          # the case's buffers died with run_case
    for r in rows:
        torch_row = next((t for t in rows if t["operator"] == r["operator"]
                          and t["shape"] == r["shape"] and t["impl"] == "torch"), None)
        r["x_torch"] = r["GB/s"] / torch_row["GB/s"] if torch_row else float("nan")
        ref = {"transpose": copy_bw, "row_reduce": read_bw, "row_max": read_bw}.get(r["operator"])
        r["x_1gib"] = r["GB/s"] / ref if ref else None
    info["seconds"] = round(time.perf_counter() - t_start, 1)
    out = {"info": info, "references": [{"kind": k, "impl": l, "ms": t, "GB/s": g}
                                        for k, l, t, g in refs],
           "copy_GBps": copy_bw, "read_GBps": read_bw, "rows": rows}
    harness.save_json(a.out, "operators.json", out)
    print(json.dumps(info))
    print(_table(refs, rows, copy_bw, read_bw))


def _table(refs, rows, copy_bw, read_bw):
    head = (f"{'operator':11s} {'shape':12s} {'implementation':38s} {'ms':>8s} {'GB/s':>7s} "
            f"{'x torch':>7s} {'x ref':>6s} {'x 1GiB':>6s} {'regs':>4s} ok")
    lines = [head, "-" * len(head)]
    for kind, label, t, g in refs:
        ref = copy_bw if kind == "copy" else read_bw
        lines.append(f"{'[' + kind + ']':11s} {'1 GiB':12s} {label:38s} {t:8.3f} {g:7.0f} "
                     f"{'':>7s} {'':>6s} {g / ref:6.3f}")
    for r in rows:
        xr = f"{r['x_ref']:6.3f}" if r.get("x_ref") is not None else ""
        xg = f"{r['x_1gib']:6.3f}" if r.get("x_1gib") is not None else ""
        regs = str(r["registers"]) if r["registers"] else ""
        ok = "yes" if r["correct"] else ("NO " + (r["error"] or "wrong result"))
        lines.append(f"{r['operator']:11s} {r['shape']:12s} {r['impl'][:38]:38s} "
                     f"{r['ms']:8.3f} {r['GB/s']:7.0f} {r['x_torch']:7.3f} {xr:>6s} {xg:>6s} "
                     f"{regs:>4s} {ok}")
    lines.append(f"x ref: transpose vs torch copy_ of the same size, row reductions vs torch "
                 f"x.sum() of the same x (same rounds); x 1GiB: vs the 1 GiB copy "
                 f"({copy_bw:.0f} GB/s) / read ({read_bw:.0f} GB/s). Targets: saxpy >= 0.97 x "
                 f"torch, transpose >= 0.90 x copy, row reduction >= 0.90 x read.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
