"""SGEMM benchmark (run on a GPU): ptxgen's MatmulSchedule candidates vs cuBLAS vs Triton, fp32.

    python benchmarks/sgemm.py                      # all shapes and candidates; ~2-4 minutes
    python benchmarks/sgemm.py --shapes 4096x4096x4096 --schedules 128x128x8,128x128x16

For each shape (M x N x K: C[M,N] = A[M,K] @ B[K,N], row-major) every candidate schedule of
ptxgen.schedule.CANDIDATES is lowered, emitted as PTX, loaded through Numba's driver
(ctx.create_module_ptx) and launched with cuda.core; cuBLAS runs as torch.matmul with TF32 off,
Triton as an autotuned blocked tl.dot(input_precision="ieee") kernel when triton imports. Every
output starts as NaN and is checked against a float64 product on the device (the matmul
operator's tolerance: 4*sqrt(K)*(1e-5 + 1e-5*|ref|) per element). Timing: ptxgen.runtime.time_calls
for every implementation alike: CUDA events around a batch of back-to-back launches (~25 ms of
GPU work) queued behind a kernel that spins until the host has enqueued them all, so no host
launch latency is measured; median of 10 batches after warm-up.

A failing schedule gives an error row and the run goes on. Results go to DIR/sgemm.json with
--out DIR (default $OUT, when set); the summary table is printed last.
"""
import argparse
import ctypes
import dataclasses
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import harness  # noqa: E402
from ptxgen import emit_module  # noqa: E402
from ptxgen.ops.matmul import Matmul  # noqa: E402
from ptxgen.lower import lower_matmul  # noqa: E402
from ptxgen.schedule import CANDIDATES, default_schedule  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1000, 1000, 1000), (4095, 4097, 513),
          (4096, 4096, 512)]
# (odd shape, nearest tile multiple): the odd one should keep >= 90 % of the multiple's speed
PAIRS = [((4095, 4097, 513), (4096, 4096, 512))]
TARGET = 0.92                       # of cuBLAS, issue 6
BATCH_MS, REPEAT = 25.0, 10
STAGE_C = False              # --stage-c


# -- loading PTX ---------------------------------------------------------------------------------
class NumbaLoader:
    """PTX → module through Numba's driver; launches through cuda.core on Numba's default
    stream (the legacy stream 0, which torch's events also use)."""
    name = "numba"

    def __init__(self):
        import cuda.core as core
        from numba import cuda
        from numba.cuda.cudadrv.driver import _to_core_stream
        self.core, self.cuda = core, cuda
        self.stream = _to_core_stream(cuda.default_stream())

    def load(self, ptx, name):
        mod = self.cuda.current_context().create_module_ptx(ptx)
        fn = mod.get_function(name)
        return fn, {"regs": fn.attrs.regs, "local_bytes": fn.attrs.local}

    def launcher(self, fn, grid, block, args):
        cfg = self.core.LaunchConfig(grid=grid, block=block, shmem_size=0)
        kernel, core, stream = fn.kernel, self.core, self.stream
        return lambda: core.launch(stream, cfg, kernel, *args)


class DriverLoader:
    """The same through libcuda with ctypes, for machines where Numba does not import (the
    primary context torch made current; stream 0)."""
    name = "libcuda"
    _REGS, _LOCAL = 4, 3                     # CU_FUNC_ATTRIBUTE_NUM_REGS, _LOCAL_SIZE_BYTES

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._modules = []
        # the device's primary context (the one torch uses), current on this thread
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuInit(0), "cuInit")
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "primary context")
        self._check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def _check(self, rc, what):
        if rc != 0:
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(msg))
            raise RuntimeError(f"{what}: CUDA error {rc} {msg.value.decode() if msg.value else ''}")

    def load(self, ptx, name):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cuModuleLoadData(ctypes.byref(mod), ptx.encode() + b"\0"),
                    "cuModuleLoadData")
        self._modules.append(mod)
        self._check(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()),
                    "cuModuleGetFunction")
        attrs = {}
        for key, attr in (("regs", self._REGS), ("local_bytes", self._LOCAL)):
            v = ctypes.c_int()
            self._check(self.lib.cuFuncGetAttribute(ctypes.byref(v), attr, fn), "attribute")
            attrs[key] = v.value
        return fn, attrs

    def launcher(self, fn, grid, block, args):
        vals = [ctypes.c_uint64(a) if isinstance(a, int) else
                np.ctypeslib.as_ctypes_type(a.dtype)(a.item()) for a in args]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        lib, check = self.lib, self._check

        def go():
            check(lib.cuLaunchKernel(fn, *grid, *block, 0, None, params, None), "launch")
        go.keep = (vals, params)
        return go


def make_loader():
    try:
        return NumbaLoader()
    except Exception as e:                   # numba or cuda.core missing or broken
        print(f"# numba driver unavailable ({type(e).__name__}: {e}); using libcuda directly")
        return DriverLoader()


# -- measuring -----------------------------------------------------------------------------------
def time_ms(fn):
    """Median GPU milliseconds per call (harness.gpu_ms: held batches of back-to-back calls
    between CUDA events, ~BATCH_MS each)."""
    return harness.gpu_ms(fn, repeat=REPEAT, target_ms=BATCH_MS)


def check(C, ref, K):
    """(ok, worst |error| / (4 sqrt(K) (1 + |ref|))): ok when every element is within bound."""
    import torch
    scale = 4.0 * float(np.sqrt(K))
    err = (C.double() - ref).abs()
    bound = scale * 1e-5 * (1.0 + ref.abs())
    finite = bool(torch.isfinite(C).all())
    worst = float((err / bound).max()) if finite else float("inf")
    return finite and worst <= 1.0, worst


# -- implementations -----------------------------------------------------------------------------
def run_schedule(loader, label, sched, shape, arch, A, B, C, ref):
    """One candidate schedule: Matmul(sched) for this shape."""
    return run_operator(loader, label, Matmul(sched), shape, arch, A, B, C, ref)


def run_operator(loader, label, op, shape, arch, A, B, C, ref):
    """The matmul operator's steps as the library runs them (one kernel, or the packing
    steps too); the time covers every launch."""
    import torch
    M, N, K = shape
    dims = {"M": M, "N": N, "K": K}
    t0 = time.perf_counter()
    module = op.build(dims, arch)
    ptx = emit_module(module, arch)
    loaded = {k.name: loader.load(ptx, k.name) for k in module.entries}
    build_s = round(time.perf_counter() - t0, 2)
    work = {n: torch.zeros(d, device="cuda") for n, (d, _) in op.workspace(dims, arch).items()}
    ptrs = {"A": A.data_ptr(), "B": B.data_ptr(), "C": C.data_ptr(),
            **{n: t.data_ptr() for n, t in work.items()}}
    steps = op.steps(dims, arch)
    gos = [loader.launcher(loaded[st.kernel][0], st.launch.grid, st.launch.block,
                           st.args(ptrs))
           for st in steps]

    def go():
        for g in gos:
            g()
    C.fill_(float("nan"))
    go()
    torch.cuda.synchronize()
    ok, worst = check(C, ref, K)
    ms = time_ms(go)
    sched = op.schedule_for(dims, arch)
    name = f"{sched} packed" if op.packs(dims, arch) else str(sched)
    return dict(impl=label, schedule=name, ms=ms, ok=ok, err=worst, build_s=build_s,
                steps=len(steps), **loaded["matmul"][1])


def run_cublas(A, B, C, ref, K):
    import torch
    C.fill_(float("nan"))
    go = lambda: torch.matmul(A, B, out=C)      # noqa: E731
    go()
    torch.cuda.synchronize()
    ok, worst = check(C, ref, K)
    return dict(impl="cublas", schedule="torch.matmul fp32 (tf32 off)", ms=time_ms(go), ok=ok,
                err=worst)


_triton = None


def triton_kernel():
    """The autotuned Triton matmul, or None when triton does not import."""
    global _triton
    if _triton is not None:
        return _triton or None
    try:
        import triton
        import triton.language as tl
    except Exception:
        _triton = False
        return None

    def cfg(bm, bn, bk, stages, warps):
        return triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=stages,
                             num_warps=warps)

    @triton.autotune(configs=[cfg(128, 128, 32, 3, 8), cfg(128, 256, 32, 3, 8),
                              cfg(256, 128, 32, 3, 8), cfg(128, 128, 16, 4, 4),
                              cfg(128, 64, 32, 4, 4), cfg(64, 128, 32, 4, 4),
                              cfg(64, 64, 32, 5, 4), cfg(128, 128, 64, 2, 8)],
                     key=["M", "N", "K"])
    @triton.jit
    def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        width = GROUP * tiles_n
        first = (pid // width) * GROUP
        size = min(tiles_m - first, GROUP)
        pid_m = first + (pid % width) % size
        pid_n = (pid % width) // size
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        ap = a + rm[:, None] * sam + rk[None, :] * sak
        bp = b + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            left = K - k * BK
            at = tl.load(ap, mask=rk[None, :] < left, other=0.0)
            bt = tl.load(bp, mask=rk[:, None] < left, other=0.0)
            acc = tl.dot(at, bt, acc, input_precision="ieee")
            ap += BK * sak
            bp += BK * sbk
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        tl.store(c + cm[:, None] * scm + cn[None, :] * scn, acc,
                 mask=(cm[:, None] < M) & (cn[None, :] < N))

    _triton = (triton, mm)
    return _triton


def run_triton(A, B, C, ref, shape):
    import torch
    tk = triton_kernel()
    if tk is None:
        return None
    triton, mm = tk
    M, N, K = shape

    def go():
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa
        mm[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                 C.stride(0), C.stride(1))
    C.fill_(float("nan"))
    go()                                     # autotunes on first call for this (M, N, K)
    torch.cuda.synchronize()
    C.fill_(float("nan"))
    go()
    torch.cuda.synchronize()
    ok, worst = check(C, ref, K)
    best = getattr(mm, "best_config", None)
    return dict(impl="triton", schedule=f"triton {triton.__version__} {best}"[:80],
                ms=time_ms(go), ok=ok, err=worst)


# -- driver --------------------------------------------------------------------------------------
def run_shape(loader, shape, names, arch, use_triton, seed):
    import torch
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.randn(M, K, device="cuda", generator=g)
    B = torch.randn(K, N, device="cuda", generator=g)
    C = torch.empty(M, N, device="cuda")
    ref = A.double() @ B.double()
    default = default_schedule({"M": M, "N": N, "K": K})
    impls = [("cublas", lambda: run_cublas(A, B, C, ref, K))]
    for name in names:
        label = name + (" *" if CANDIDATES[name] == default else "")
        impls.append((label, lambda n=name, lb=label: run_schedule(
            loader, lb, CANDIDATES[n], shape, arch, A, B, C, ref)))
        if STAGE_C and not CANDIDATES[name].stage_c:
            sc = dataclasses.replace(CANDIDATES[name], stage_c=True)
            impls.append((name + "_sc", lambda s=sc, lb=name + "_sc": run_schedule(
                loader, lb, s, shape, arch, A, B, C, ref)))
    # what the matmul operator runs for this shape: its schedule (tuned cache entry of the
    # class, else the default), on packed operands when the shape packs (three launches)
    impls.append(("library", lambda: run_operator(loader, "library", Matmul(), shape, arch,
                                                  A, B, C, ref)))
    if use_triton:
        impls.append(("triton", lambda: run_triton(A, B, C, ref, shape)))
    rows = []
    for label, make in impls:
        try:
            r = make()
            if r is None:
                continue
        except Exception as e:               # one failure must not hide the other rows
            r = dict(impl=label, schedule="", ms=float("nan"), ok=False, err=float("nan"),
                     error=f"{type(e).__name__}: {e}"[:300])
        r["shape"] = f"{M}x{N}x{K}"
        r["tflops"] = 2.0 * M * N * K / (r["ms"] * 1e9) if r["ms"] == r["ms"] else float("nan")
        rows.append(r)
        print(_row(r), flush=True)
    cub = next((r for r in rows if r["impl"] == "cublas" and r["ms"] == r["ms"]), None)
    for r in rows:
        r["x_cublas"] = cub["ms"] / r["ms"] if cub and r["ms"] == r["ms"] else float("nan")
    return rows


def _row(r):
    regs = f"{r['regs']:>4d} {r['local_bytes']:>5d}" if "regs" in r else f"{'':4s} {'':5s}"
    ok = "yes" if r["ok"] else "NO " + (r.get("error") or f"error {r['err']:.2g} x bound")
    x = f"{r['x_cublas']:8.3f}" if r.get("x_cublas", float("nan")) == r.get("x_cublas") \
        else f"{'':8s}"
    return (f"{r.get('shape', ''):15s} {r['impl'][:18]:18s} {r['ms']:9.3f} {r['tflops']:7.2f} "
            f"{x} {regs} {ok}")


def summary(rows):
    head = (f"{'shape':15s} {'implementation':18s} {'ms':>9s} {'TFLOP/s':>7s} {'x cuBLAS':>8s} "
            f"{'regs':>4s} {'local':>5s} correct")
    lines = ["", head, "-" * len(head)]
    lines += [_row(r) for r in rows]
    lines.append("* = the schedule Matmul picks by default for the shape; local = spill bytes")
    best = {}
    for r in rows:
        if r["ok"] and r["impl"] not in ("cublas", "triton"):
            cur = best.get(r["shape"])
            if cur is None or r["ms"] < cur["ms"]:
                best[r["shape"]] = r
    for shp, r in best.items():
        lines.append(f"best ptxgen {shp}: {r['impl']} {r['tflops']:.2f} TFLOP/s = "
                     f"{r['x_cublas']:.3f} x cuBLAS (target {TARGET})")
    for odd, mult in PAIRS:
        o, m = (best.get("x".join(map(str, s))) for s in (odd, mult))
        if o and m:
            lines.append(f"odd {o['shape']} vs multiple {m['shape']}: "
                         f"{o['tflops'] / m['tflops']:.3f} of the throughput (target >= 0.90)")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", help="comma-separated MxNxK (default: the issue's five)")
    p.add_argument("--schedules", help=f"comma-separated names from {', '.join(CANDIDATES)}")
    p.add_argument("--no-triton", action="store_true")
    p.add_argument("--stage-c", action="store_true",
                   help="also run each schedule with stage_c=True (C through shared memory)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true",
                   help="only lower and emit every kernel (no GPU needed)")
    harness.out_argument(p, default=None)
    a = p.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")] \
        if a.shapes else SHAPES
    names = a.schedules.split(",") if a.schedules else list(CANDIDATES)
    global STAGE_C
    STAGE_C = a.stage_c
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        p.error(f"unknown schedules {unknown}; known: {', '.join(CANDIDATES)}")

    if a.dry_run:
        for m, n, k in shapes:
            dims = {"M": m, "N": n, "K": k}
            for name in names:
                ptx = emit_module(lower_matmul(CANDIDATES[name], "sm_90", dims), "sm_90")
                print(f"{m}x{n}x{k} {name:16s} {len(ptx.splitlines()):6d} PTX lines")
        return

    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    t_start = time.perf_counter()
    torch.zeros(1, device="cuda")            # the primary context, current on this thread
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}" if (major, minor) in ((8, 0), (8, 6), (8, 9), (9, 0)) \
        else "sm_90"                          # newer GPUs JIT sm_90 PTX
    loader = make_loader()
    props = torch.cuda.get_device_properties(0)
    info = harness.run_info(
        arch=arch, sms=props.multi_processor_count, cuda=torch.version.cuda,
        loader=loader.name, python=platform.python_version(), numpy=np.__version__,
        default_schedules={f"{m}x{n}x{k}": str(Matmul().schedule_for({"M": m, "N": n, "K": k}))
                           for m, n, k in shapes},
        timing=f"ptxgen.runtime.time_calls: median of {REPEAT} held batches "
               f"(~{BATCH_MS:g} ms each) after warm-up")
    print(json.dumps(info), flush=True)
    rows = []
    for shape in shapes:
        rows.extend(run_shape(loader, shape, names, arch, not a.no_triton, a.seed))
        torch.cuda.empty_cache()              # the shape's buffers died with run_shape
    info["seconds"] = round(time.perf_counter() - t_start, 1)
    harness.save_json(a.out, "sgemm.json", {"info": info, "rows": rows})
    print(summary(rows))
    print(f"# {info['seconds']} s")


if __name__ == "__main__":
    main()
