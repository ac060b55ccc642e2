"""Foundation benchmark (run on a GPU): saxpy bandwidth vs torch and Numba, compile speed.

    python benchmarks/foundation.py            # prints a table; writes $OUT/foundation.json

saxpy on 2^28 floats (3 GB touched per call, far beyond L2): ptxgen's kernel, torch.add(y, x,
alpha=a, out=o) and the Numba twin, each the median of CUDA-event timings after warm-up, in one
process. Compile speed: ptxgen (build IR + verify + emit + ptxas) and ptxgen (… + driver load)
against Numba compiling its twin with cuda.jit (NVVM + link + load), cold (first compile in the
process) and warm (after another kernel was compiled).
"""
import json
import os
import platform
import sys
import time

import numpy as np

# the driver's on-disk JIT cache would make repeated loads of the same PTX look free
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxgen import emit_module, toolchain  # noqa: E402
from ptxgen.ir.verify import verify_module  # noqa: E402
from ptxgen.ops import get_operator  # noqa: E402
from ptxgen.ops.saxpy import Saxpy  # noqa: E402


def events_median(fn, warmup=3, repeat=20):
    from numba import cuda
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    ts = []
    for _ in range(repeat):
        s, e = cuda.event(), cuda.event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cuda.event_elapsed_time(s, e))
    return float(np.median(ts))


def compile_speed():
    from numba import cuda

    from ptxgen.runtime import load_kernel
    from ptxgen.runtime.twins import _define
    op = get_operator("saxpy")
    shape = op.shape(n=1 << 20)
    res = {}
    t0 = time.perf_counter()
    # cold Numba: the first cuda.jit compile in this process
    fn, sig = _define()["saxpy"]
    cuda.jit(sig)(fn)
    res["numba_cold_ms"] = (time.perf_counter() - t0) * 1e3
    warm = []
    for _ in range(5):
        fn, sig = _define()["saxpy"]          # a new function object: no compile cache hit
        t0 = time.perf_counter()
        cuda.jit(sig)(fn)
        warm.append((time.perf_counter() - t0) * 1e3)
    res["numba_warm_ms"] = float(np.median(warm))
    ptxas, load = [], []
    for i in range(5):
        t0 = time.perf_counter()
        text = emit_module(verify_module(op.build(shape, "sm_90")), "sm_90")
        toolchain.assemble(text, "sm_90")
        t2 = time.perf_counter()
        ptxas.append((t2 - t0) * 1e3)
        text += f"\n// variant {i}\n"             # defeat the loader's cache
        t3 = time.perf_counter()
        text2 = emit_module(verify_module(op.build(shape, "sm_90")), "sm_90") + f"\n// {i}\n"
        load_kernel(text2, "saxpy", op.build(shape).kernel("saxpy").params)
        load.append((time.perf_counter() - t3) * 1e3)
    res["ptxgen_emit_ptxas_ms"] = float(np.median(ptxas))
    res["ptxgen_emit_load_ms"] = float(np.median(load))
    return res


def saxpy_bandwidth(n, rounds=7):
    """Each implementation is checked once, then timed in `rounds` interleaved rounds (every
    implementation once per round, events median within a round), so slow drifts of the device
    hit all of them alike. Returned: median time over rounds and the median of the per-round
    ratios to torch."""
    import torch
    from numba import cuda

    from ptxgen.runtime import load_kernel, time_kernel
    from ptxgen.runtime.twins import twin_kernel
    rng = np.random.default_rng()
    x = torch.from_numpy(rng.standard_normal(n, dtype=np.float32)).cuda()
    y = torch.from_numpy(rng.standard_normal(n, dtype=np.float32)).cuda()
    a = np.float32(rng.uniform(0.5, 2.0))
    ref = (a * x.double() + y.double())
    o = torch.full_like(x, float("nan"))
    bytes_moved = 12 * n

    def correct():
        ok = bool(torch.allclose(o.double(), ref, rtol=1e-5, atol=1e-5))
        o.fill_(float("nan"))
        return ok

    impls = [("torch.add", lambda: events_median(lambda: torch.add(y, x, alpha=float(a), out=o)))]
    variants = [("ptxgen saxpy (default)", get_operator("saxpy")),
                ("saxpy 2 chunks/thread", Saxpy(chunks=2)),
                ("saxpy 2 chunks, 128 thr, .nc loads", Saxpy(chunks=2, threads=128, cache=None,
                                                            load_cache="nc")),
                ("saxpy grid stride, 8 CTAs/SM", Saxpy(ctas_per_sm=8))]
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    for label, op in variants:
        shape = op.shape(n=n)
        m = verify_module(op.build(shape, "sm_90"))
        k = load_kernel(emit_module(m, "sm_90"), "saxpy", m.kernel("saxpy").params)
        cfg = op.launch(shape, sm_count=sms)
        args = [np.uint32(n), a, x, y, o]
        impls.append((label, lambda k=k, cfg=cfg, args=args: time_kernel(
            k, cfg.grid, cfg.block, args, warmup=2, repeat=10)))
    tk = twin_kernel("saxpy")
    dx, dy, do = (cuda.as_cuda_array(v) for v in (x, y, o))
    blocks = min(-(-n // 256), sms * 32)
    impls.append(("numba twin", lambda: events_median(
        lambda: tk[blocks, 256](n, a, dx, dy, do), warmup=2, repeat=10)))
    ok = {}
    for label, fn in impls:
        fn()
        ok[label] = correct()
    times = {label: [] for label, _ in impls}
    for _ in range(rounds):
        for label, fn in impls:
            times[label].append(fn())
    o.fill_(0)
    t_torch = np.array(times["torch.add"])
    rows = []
    for label, _ in impls:
        t = np.array(times[label])
        rows.append((label, float(np.median(t)), bytes_moved / float(np.median(t)) / 1e6,
                     float(np.median(t_torch / t)), float(np.min(t_torch / t)),
                     float(np.max(t_torch / t)), ok[label]))
    return rows


def main():
    import torch
    from numba import cuda
    import numba
    n = 1 << 28
    info = {"date": time.strftime("%Y-%m-%d"), "device": cuda.get_current_device().name.decode()
            if isinstance(cuda.get_current_device().name, bytes) else
            cuda.get_current_device().name, "torch": torch.__version__,
            "numba": numba.__version__, "python": platform.python_version(),
            "numpy": np.__version__}
    try:
        import numba_cuda
        info["numba_cuda"] = numba_cuda.__version__
    except Exception:
        pass
    comp = compile_speed()
    rows = saxpy_bandwidth(n)
    out = {"info": info, "saxpy_n": n, "saxpy": [
        {"kernel": l, "ms": t, "GB/s": g, "ratio_to_torch_median": r, "ratio_min": lo,
         "ratio_max": hi, "correct": ok} for l, t, g, r, lo, hi, ok in rows], "compile": comp}
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "foundation.json"), "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(info))
    print(f"compile: numba cold {comp['numba_cold_ms']:.1f} ms, numba warm "
          f"{comp['numba_warm_ms']:.1f} ms, ptxgen emit+ptxas {comp['ptxgen_emit_ptxas_ms']:.1f} ms,"
          f" ptxgen emit+load {comp['ptxgen_emit_load_ms']:.1f} ms; ratios cold "
          f"{comp['numba_cold_ms'] / comp['ptxgen_emit_ptxas_ms']:.1f}x / warm "
          f"{comp['numba_warm_ms'] / comp['ptxgen_emit_ptxas_ms']:.1f}x (emit+ptxas)")
    print(f"{'saxpy n=2^28, 7 interleaved rounds':40s} {'ms':>7s} {'GB/s':>6s} "
          f"{'x torch (median, min-max of rounds)':>36s} ok")
    for l, t, g, r, lo, hi, ok in rows:
        print(f"{l:40s} {t:7.3f} {g:6.0f} {r:12.3f} ({lo:.3f}-{hi:.3f}) {ok}")


if __name__ == "__main__":
    main()
