"""Python launch overhead per path on the GPU: ptxgen kernel objects, Numba, Triton, a torch op
and a ptxgen kernel registered as a torch custom op (eager, torch.compile, CUDA graph replay).

Every path launches the same work (out = a*x + y on n float32, a ~1 µs kernel on an H200), so
the GPU time is nearly equal and the difference is the host's cost. Per path:
  host us   : host time per launch while the GPU is kept busy (200 back-to-back launches
              queued behind a hold kernel, timed on the host): the cost of the Python call
  GPU us    : GPU time per launch, runtime.time_calls (held batches, no host cost)
  wall us   : one launch from an idle GPU to its completion (synchronize after), median of 200
  overhead  : wall - GPU: what a lone eager call costs beyond the kernel (goal <= 10 us); it
              includes the synchronize round trip, shown in the `synchronize alone` row
Prints a table; writes launch_overhead.md and launch_overhead.json under --out (default $OUT,
else .).

    python benchmarks/launch_overhead.py [--n 262144] [--out DIR]
"""
import argparse
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402

HOST_BATCH = 200
WALL_REPEAT = 200


def measure(fn, sync):
    """(host us, GPU us, wall us) of one launch by `fn` (which enqueues it on the default
    stream, the one torch's current stream is here)."""
    from ptxgen.runtime import time_calls
    host = harness.host_us(fn, HOST_BATCH, sync, warmup=20)     # the GPU busy: the host alone
    gpu = time_calls(fn) * 1e3
    walls = []
    for _ in range(WALL_REPEAT):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        walls.append(time.perf_counter() - t0)
    return host, gpu, statistics.median(walls) * 1e6


def paths(n, a, torch, cuda):
    """[(name, make, note)]: make() returns (launch, result) — `launch` enqueues out = a*x + y
    once, `result` returns out as a numpy array. Built one at a time, in this order (the CUDA
    graph last: a capture that failed could spoil what follows)."""
    import ptxgen
    from ptxgen.ops import get_operator
    from ptxgen.runtime import bound_launch
    rng = np.random.default_rng(0)
    xh = rng.standard_normal(n).astype(np.float32)
    yh = rng.standard_normal(n).astype(np.float32)
    op = get_operator("saxpy")
    shape = op.shape(n=n)
    cfg = op.launch(shape)
    k = ptxgen.kernel(op.build(shape, "sm_90"), "saxpy")
    launcher = k[cfg.grid, cfg.block]
    na, nn = np.float32(a), np.uint32(n)
    dx, dy = cuda.to_device(xh), cuda.to_device(yh)
    table = []

    def numba_arrays():
        o = cuda.device_array(n, np.float32)
        return (lambda: launcher(nn, na, dx, dy, o)), o.copy_to_host
    table.append(("ptxgen kernel object, Numba arrays", numba_arrays,
                  "k[grid, block](n, a, x, y, out)"))

    def bound():
        o = cuda.device_array(n, np.float32)
        return bound_launch(k.gpu_kernel(), cfg.grid, cfg.block, [nn, na, dx, dy, o]), \
            o.copy_to_host
    table.append(("ptxgen runtime.bound_launch", bound, "arguments checked once, before"))

    def numba_jit():
        @cuda.jit("void(float32, float32[:], float32[:], float32[:])")
        def numba_saxpy(a, x, y, o):
            i = cuda.grid(1)
            if i < x.size:
                o[i] = a * x[i] + y[i]
        o = cuda.device_array(n, np.float32)
        grid = (n + 255) // 256
        return (lambda: numba_saxpy[grid, 256](na, dx, dy, o)), o.copy_to_host
    table.append(("Numba @cuda.jit", numba_jit, "device arrays, eager signature"))
    if torch is None:
        return table
    tx, ty = torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda()

    def tensors():
        o = torch.empty_like(tx)
        return (lambda: launcher(nn, na, tx, ty, o)), (lambda: o.cpu().numpy())
    table.append(("ptxgen kernel object, torch tensors", tensors, "torch's current stream"))

    def torch_add():
        o = torch.empty_like(tx)
        return (lambda: torch.add(ty, tx, alpha=a, out=o)), (lambda: o.cpu().numpy())
    table.append(("torch op: torch.add(y, x, alpha=a, out=)", torch_add, "torch's kernel"))

    def triton_jit():
        import triton
        import triton.language as tl

        @triton.jit
        def triton_saxpy(x, y, o, a, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(o + offs, a * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m),
                     mask=m)
        o = torch.empty_like(tx)
        grid = (triton.cdiv(n, 1024),)
        return (lambda: triton_saxpy[grid](tx, ty, o, a, n, BLOCK=1024)), \
            (lambda: o.cpu().numpy())
    table.append(("Triton @triton.jit", triton_jit, "BLOCK=1024"))

    ops = {}

    def custom_op():
        if "op" not in ops:
            ops["op"] = ptxgen.torch_op(
                "ptxgen_bench::saxpy", k, schema="(float a, Tensor x, Tensor y) -> Tensor",
                outputs=lambda a, x, y: torch.empty_like(x),
                launch=lambda a_, x, y, o: (cfg.grid, cfg.block,
                                            (np.uint32(x.numel()), np.float32(a_), x, y, o)))
        return ops["op"]

    def eager():
        cop = custom_op()
        return (lambda: cop(a, tx, ty)), (lambda: cop(a, tx, ty).cpu().numpy())
    table.append(("ptxgen custom op, eager", eager, "allocates its output"))

    def compiled():
        cop = custom_op()
        f = torch.compile(lambda x, y: cop(a, x, y), fullgraph=True)
        return (lambda: f(tx, ty)), (lambda: f(tx, ty).cpu().numpy())
    table.append(("ptxgen custom op, torch.compile", compiled, "inductor calls the op"))

    def graph():
        cop = custom_op()
        cop(a, tx, ty)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            o = cop(a, tx, ty)
        return g.replay, (lambda: o.cpu().numpy())
    table.append(("ptxgen custom op, CUDA graph replay", graph, "a one-kernel graph"))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 18)
    harness.out_argument(ap)
    args = ap.parse_args()
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        print("launch_overhead: no CUDA GPU (this benchmark measures GPU launches)",
              file=sys.stderr)
        return 1
    from numba import cuda
    try:
        import torch
        torch.cuda.init()
    except Exception:
        torch = None
    sync = torch.cuda.synchronize if torch is not None else cuda.synchronize
    a = 1.5
    table = paths(args.n, a, torch, cuda)
    rng = np.random.default_rng(0)              # the inputs paths() made
    xh = rng.standard_normal(args.n).astype(np.float32)
    want = a * xh.astype(np.float64) + rng.standard_normal(args.n).astype(np.float32)
    t0 = time.perf_counter()
    sync_walls = []
    for _ in range(WALL_REPEAT):
        t = time.perf_counter()
        sync()
        sync_walls.append(time.perf_counter() - t)
    rows = [{"path": "synchronize alone", "host_us": None, "gpu_us": None,
             "wall_us": statistics.median(sync_walls) * 1e6, "overhead_us": None,
             "note": "the round trip included in every wall figure"}]
    failed = 0
    for name, make, note in table:
        row = {"path": name, "host_us": None, "gpu_us": None, "wall_us": None,
               "overhead_us": None, "note": note}
        try:
            fn, result = make()
            fn()
            sync()
            got = np.asarray(result(), np.float64)
            err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-6)))
            if not err < 1e-5:
                raise RuntimeError(f"wrong result: max rel error {err:.2e}")
            host, gpu, wall = measure(fn, sync)
            row.update(host_us=host, gpu_us=gpu, wall_us=wall, overhead_us=wall - gpu)
        except Exception as e:
            failed += 1
            msg = str(e).strip().splitlines()[0][:120] if str(e).strip() else ""
            row["note"] = f"FAILED {type(e).__name__}: {msg}"
            traceback.print_exc()
        rows.append(row)
        print(f"{name}: {row['note'] if row['wall_us'] is None else 'done'}", flush=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "device": cuda.get_current_device().name
            if not isinstance(cuda.get_current_device().name, bytes)
            else cuda.get_current_device().name.decode(),
            "n": args.n, "python": platform.python_version(), "numpy": np.__version__,
            "torch": getattr(torch, "__version__", None),
            "numba_cuda": _version("numba-cuda"), "cuda_core": _version("cuda-core"),
            "triton": _version("triton"), "seconds": round(time.perf_counter() - t0, 1),
            "command": "python benchmarks/launch_overhead.py --n %d" % args.n}
    md = render(rows, meta)
    print(md)
    harness.save_json(args.out, "launch_overhead.json", {"meta": meta, "rows": rows})
    (Path(args.out) / "launch_overhead.md").write_text(md)
    return 1 if failed else 0


def _version(dist):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def render(rows, meta):
    def f(v):
        return "-" if v is None else f"{v:.1f}"
    lines = [f"Launch overhead, {meta['device']}, {meta['date']}, n={meta['n']} "
             f"(torch {meta['torch']}, numba-cuda {meta['numba_cuda']}, cuda-core "
             f"{meta['cuda_core']}, triton {meta['triton']}); `{meta['command']}`", "",
             "| path | host us/launch | GPU us | wall us | overhead us (wall - GPU) | note |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['path']} | {f(r['host_us'])} | {f(r['gpu_us'])} | "
                     f"{f(r['wall_us'])} | {f(r['overhead_us'])} | {r['note']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
