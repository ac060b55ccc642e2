"""Tensor cores on the GPU against ptxgen's emulator, on the same random inputs.

    python benchmarks/tensor_emu_vs_gpu.py [--out DIR]      # on a GPU: run, compare, save
    python benchmarks/tensor_emu_vs_gpu.py --emu-only       # anywhere: emulator + ptxas only
    python benchmarks/tensor_emu_vs_gpu.py --fit DIR/*.npz  # anywhere: fit the numerics model
    python benchmarks/tensor_emu_vs_gpu.py --recheck DIR/*.npz  # anywhere: emulator vs saved GPU

Kernels (ptxgen/ops/tensor_probes.py, built with the builder API): mma.sync m16n8k16 bf16→f32,
f16→f32, f16→f16, m16n8k8 tf32→f32, m16n8k32 s8→s32 (four chained k-steps each, one 16×8 tile
per warp), ldmatrix .x4 and .x4.trans, wgmma m64n{64,128,256}k16 bf16→f32 from shared memory
with the 128-byte swizzle (four k-steps, one 64×n tile per CTA); and Hopper's async machinery
(ptxgen/ops/async_probes.py, tensor_probes.tma_probe): TMA 2-D loads and stores whose boxes
cross the tensor's edges (bf16 with the 128-byte swizzle, f32 with the 64-byte one: the OOB fill
and the swizzled shared image are both compared, and the clipped store), a 3-stage TMA +
mbarrier ring (parity waits, a producer thread, a consumer warpgroup), a 2-CTA cluster with a
multicast TMA and distributed shared memory (mapa, st/red.shared::cluster, a remote mbarrier
arrive, getctarank, barrier.cluster), and the tensor-core GEMM's 2-CTA cluster variant (x2:
multicast B, remote empty-slot arrivals) at an odd shape.
Inputs are normal values scaled by 2^-3..2^3 ('wide': by 2^-20..2^20, to stress the alignment
of products). For each: the fraction of output elements bit-equal between GPU and emulator and
the largest difference in units in the last place of the output format. Inputs and GPU outputs
of the floating-point cases go to DIR/tensor_{mma,wgmma}.npz, which --fit reads to score
candidate summation models (tensor_math.Numerics) against the GPU without it. The async cases
are also checked against numpy (or, for the GEMM, the float64 bound): column `emu_vs_numpy`.
--emu-only runs every case on the emulator and assembles every kernel with ptxas (what the GPU
run needs short of a launch); it needs no GPU.
"""
import argparse
import itertools
import json
import os
import platform
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ptxgen.emu import emulate, fp, tensor_math as TM  # noqa: E402
from ptxgen.emit.ptx import emit_module  # noqa: E402
from ptxgen.ir import fragments as F  # noqa: E402
from ptxgen.ops import async_probes as AP, tensor_probes as P  # noqa: E402
from ptxgen.arrays import TiledMap  # noqa: E402

MMA = [("mma_bf16", "m16n8k16", "bf16", "f32", 3), ("mma_bf16_wide", "m16n8k16", "bf16", "f32",
                                                      20),
       ("mma_f16", "m16n8k16", "f16", "f32", 3), ("mma_f16_f16acc", "m16n8k16", "f16", "f16", 3),
       ("mma_tf32", "m16n8k8", "tf32", "f32", 3), ("mma_s8", "m16n8k32", "s8", "s32", 0)]
KSTEPS = 4
WARPS = 512                     # mma tiles (64 CTAs of 256 threads)
WG_CTAS = 48                    # wgmma tiles
WGMMA_N = (64, 128, 256)


def operands(rng, ab, shape, spread):
    if ab in ("s8", "u8"):
        return P.random_bits(rng, ab, shape)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
    if ab == "bf16":
        bits = fp.to_bf16(x)
        return bits, fp.bf16_to_f64(bits)
    if ab == "f16":
        bits = np.clip(x, -6e4, 6e4).astype(np.float16).view(np.uint16)
        return bits, bits.view(np.float16).astype(np.float64)
    bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits, bits.view(np.float32).astype(np.float64)


def ordered(x):
    """Integers whose differences count units in the last place (sign-magnitude → linear)."""
    it = {2: np.int16, 4: np.int32}[x.dtype.itemsize]
    i = x.view(it).astype(np.int64)
    return np.where(i < 0, -(i & ((1 << (8 * x.dtype.itemsize - 1)) - 1)), i)


def compare(gpu, emu, float_bits=False):
    """(fraction bit-equal, largest difference in ulps); float_bits: unsigned arrays holding
    float bit patterns of their width (bf16 words, f32 words)."""
    if float_bits:
        g, e = ordered(gpu), ordered(emu)
        return float((g == e).mean()), int(np.abs(g - e).max(initial=0))
    if gpu.dtype.kind == "f":
        g, e = ordered(gpu), ordered(emu)
        same = (g == e) | (np.isnan(gpu) & np.isnan(emu))
        ulp = int(np.abs(g - e)[~(np.isnan(gpu) & np.isnan(emu))].max(initial=0))
    else:
        same, ulp = gpu == emu, int(np.abs(gpu.astype(np.int64) - emu.astype(np.int64)).max())
    return float(same.mean()), ulp


# -- the cases: (name, module, kernel, grid, block, inputs, output template, views) ---------------
def cases(rng):
    out = []
    for name, shape, ab, acc, spread in MMA:
        m, K = P.mma_probe(shape, ab, acc, ksteps=KSTEPS)
        ab_bits, _ = operands(rng, ab, (WARPS, 16, K), spread)
        bb_bits, _ = operands(rng, ab, (WARPS, 8, K), spread)
        if acc == "f16":
            c = rng.standard_normal((WARPS, 16, 8)).astype(np.float16)
        elif acc == "s32":
            c = rng.integers(-10 ** 6, 10 ** 6, (WARPS, 16, 8)).astype(np.int32)
        else:
            c = (rng.standard_normal((WARPS, 16, 8)) *
                 np.exp2(rng.integers(-spread, spread + 1, (WARPS, 16, 8)))).astype(np.float32)
        out.append(dict(name=name, module=m, kernel="mma_probe", grid=(WARPS // 8,),
                        block=(256,), inputs=[ab_bits, bb_bits, c], out=np.zeros_like(c),
                        meta=dict(shape=shape, ab=ab, acc=acc)))
    for trans in (False, True):
        src = rng.integers(0, 1 << 16, (WARPS, 32, 8)).astype(np.uint16)
        out.append(dict(name=f"ldmatrix_x4{'_trans' if trans else ''}",
                        module=P.ldmatrix_probe(4, trans), kernel="ldmatrix_probe",
                        grid=(WARPS // 8,), block=(256,), inputs=[src],
                        out=np.zeros((WARPS, 32, 4), np.uint32), meta={}))
    for n in WGMMA_N:
        ga, gb, _, _ = P.wgmma_operands(rng, WG_CTAS, n)
        out.append(dict(name=f"wgmma_m64n{n}k16_bf16_sw128", module=P.wgmma_probe(n),
                        kernel="wgmma_probe", grid=(WG_CTAS,), block=(128,), inputs=[ga, gb],
                        out=np.zeros((WG_CTAS, 64, n), np.float32), meta=dict(n=n)))
    return out


# -- GPU ---------------------------------------------------------------------------------------
def load_gpu(m, name):
    """(GpuKernel, how it was loaded) for kernel `name` of module m."""
    from ptxgen.runtime import driver
    ptx = emit_module(m)
    k = m.kernel(name)
    try:
        return driver.load_kernel(ptx, name, k.params, k.directives), "PTX (driver JIT)"
    except Exception as e:                    # the driver's JIT may refuse sm_90a: use ptxas
        from numba import cuda
        from ptxgen.toolchain import assemble
        cubin = assemble(ptx, m.target).cubin
        fn = cuda.current_context().create_module_image(cubin).get_function(name)
        return (driver.GpuKernel(name, fn, k.params, ptx, k.directives),
                f"cubin from ptxas ({str(e)[:60]})")


def gpu_run(case):
    from ptxgen.runtime import driver
    kern, how = load_gpu(case["module"], case["kernel"])
    args = [np.ascontiguousarray(a).view(np.uint32) for a in case["inputs"]]
    out = case["out"].view(np.uint32).copy()
    driver.launch(kern, case["grid"], case["block"], args + [out])
    return out.view(case["out"].dtype).reshape(case["out"].shape), how


def emu_run(case):
    out = case["out"].copy()
    t0 = time.perf_counter()
    emulate(case["module"], case["kernel"], case["grid"], case["block"], *case["inputs"], out)
    return out, time.perf_counter() - t0


# -- async cases: tensor maps, mbarriers, clusters ------------------------------------------------
# each has `make` (fresh argument lists, one per launch: the same inputs, zeroed outputs),
# `outputs` (launches -> [(array, holds float bits)]) and `expected` (the same from numpy)
TMA_SHAPES = [("tma_2d_bf16_sw128_edges", 2, (64, 32), 128, (75, 117, 120)),
              ("tma_2d_f32_sw64_edges", 4, (16, 8), 64, (37, 29, 32))]     # H, W, row stride
PIPE = dict(H=121, W=181, Wp=184, ctas=6, steps=8)      # boxes past the bottom and right edges
CLUSTERS = dict(H=40, W=50, Wp=52, clusters=16, x0=32, y0=36)     # boxes over 2 edges
GEMM_X2 = dict(M=777, N=392, K=328)


def _tma_case(rng, name, esize, box, swizzle, dims):
    H, W, Wp = dims
    dt, tname = (np.uint16, "bf16") if esize == 2 else (np.uint32, "f32")
    if esize == 2:
        x = fp.to_bf16(rng.standard_normal((H, Wp)))
    else:
        x = rng.standard_normal((H, Wp)).astype(np.float32).view(np.uint32)
    bw, bh = box
    # innermost coordinates on 16-byte boundaries: a box starting off one there was an
    # illegal instruction on the H200 (2026-12-01: x = 39 bf16 faulted, 8, 16, 32, -8 did not);
    # edges in x come from W not being a multiple of the box width and from x < 0
    xr = (W // bw) * bw                                     # the box over the right edge
    xl = -(16 // esize)                                     # 16 bytes left of the array
    corners = [(xr, 0, 0, H - bh + 1), (xl, H - bh // 2, xr, 0),
               (bw * (W // 3 // bw), H // 4, 0, H // 3)]    # edges, the other edges, inside
    nbytes = bw * bh * esize

    def tmap(a):
        return TiledMap(a, tname, bh, bw, swizzle, rows=H, cols=W, row_stride=Wp)

    def make():
        return [[tmap(x), tmap(np.zeros((H, Wp), dt)), np.zeros(nbytes // 4, np.uint32),
                 *map(np.int32, c)] for c in corners]

    def outputs(launches):
        return [(np.concatenate([L[2].view(dt) for L in launches]), True),
                (np.concatenate([L[1].array.ravel() for L in launches]), True)]

    def expected():
        raws, outs = [], []
        for x0, y0, x1, y1 in corners:
            ys, xs = np.meshgrid(np.arange(bh), np.arange(bw), indexing="ij")
            inside = (ys + y0 >= 0) & (ys + y0 < H) & (xs + x0 >= 0) & (xs + x0 < W)
            tile = np.where(inside, x[np.clip(ys + y0, 0, H - 1), np.clip(xs + x0, 0, W - 1)], 0)
            smem = np.zeros(tile.size, dt)
            smem[F.swizzle(np.arange(tile.size) * esize, swizzle) // esize] = tile.ravel()
            o = np.zeros((H, Wp), dt)
            oy, ox = ys + y1, xs + x1
            wst = -(-W * esize // 16) * 16 // esize      # stores fill rows to 16 bytes
            keep = (oy >= 0) & (oy < H) & (ox >= 0) & (ox < wst)
            o[oy[keep], ox[keep]] = tile[keep]
            raws.append(smem)
            outs.append(o.ravel())
        return [(np.concatenate(raws), True), (np.concatenate(outs), True)]
    return dict(name=name, module=P.tma_probe(box, esize), kernel="tma_probe", grid=(1,),
                block=(128,), make=make, outputs=outputs, expected=expected)


def async_cases(rng):
    out = [_tma_case(rng, *spec) for spec in TMA_SHAPES]
    p = PIPE
    x = rng.standard_normal((p["H"], p["Wp"])).astype(np.float32)
    w = rng.standard_normal(p["steps"]).astype(np.float32)
    out.append(dict(
        name="mbarrier_tma_ring_3stage", module=AP.pipeline_tma_probe(p["steps"]),
        kernel="pipeline_tma_probe", grid=(p["ctas"],), block=(AP.PIPE_THREADS,),
        make=lambda: [[TiledMap(x, "f32", *AP.PIPE_BOX, rows=p["H"], cols=p["W"],
                                row_stride=p["Wp"]), w, np.zeros((p["ctas"], 512), np.float32)]],
        outputs=lambda L: [(L[0][2].view(np.uint32), True)],
        expected=lambda: [(AP.pipeline_tma_expected(x[:, :p["W"]], w, p["ctas"], p["steps"])
                           .view(np.uint32), True)]))
    c = CLUSTERS
    xc = rng.standard_normal((c["H"], c["Wp"])).astype(np.float32)
    n = 2 * c["clusters"]

    def cluster_out(L):
        raw, words = L[0][1], L[0][2]
        return [(raw, True), (words[:, :128], True), (words[:, 128:], False)]

    def cluster_expected():
        raw, words = AP.cluster_expected(xc[:, :c["W"]], c["clusters"], c["x0"], c["y0"])
        return [(raw, True), (words[:, :128], True), (words[:, 128:], False)]
    out.append(dict(
        name="cluster2_multicast_dsmem", module=AP.cluster_probe(), kernel="cluster_probe",
        grid=(n,), block=(AP.CLUSTER_THREADS,), outputs=cluster_out, expected=cluster_expected,
        make=lambda: [[TiledMap(xc, "f32", *AP.CLUSTER_BOX, rows=c["H"], cols=c["W"],
                                row_stride=c["Wp"]), np.zeros((n, 512), np.uint32),
                       np.zeros((n, 131), np.uint32), np.int32(c["x0"]), np.int32(c["y0"])]]))
    from ptxgen.ops.tc_matmul import TcMatmul
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    op = TcMatmul("bf16", "f32", TcMatmulSchedule(BM=64, BN=128, wgmma_n=128, consumers=1,
                                                  stages=3, cluster_m=2))
    shape = op.shape(**GEMM_X2)
    out.append(dict(name="tc_matmul_x2_bf16", op=op, shape=shape,
                    inputs=op.make_inputs(shape, rng)))
    return out


def run_async(case, emu_only, saved=None):
    """One async case on the emulator (and the GPU): its row."""
    if "op" in case:
        return _run_op(case, emu_only)
    return _run_launches(case, emu_only, saved)


def _run_launches(case, emu_only, saved):
    m = case["module"]
    emu = case["make"]()
    t0 = time.perf_counter()
    for args in emu:
        emulate(m, case["kernel"], case["grid"], case["block"], *args)
    row = dict(case=case["name"], emu_seconds=round(time.perf_counter() - t0, 2))
    e_out = case["outputs"](emu)
    row["elements"] = int(sum(a.size for a, _ in e_out))
    row["emu_vs_numpy"] = all(np.array_equal(a, b) for (a, _), (b, _) in
                              zip(e_out, case["expected"]()))
    if emu_only:
        row["ptxas"] = assembled(m)
        return row
    from ptxgen.runtime import driver
    kern, row["loaded"] = load_gpu(m, case["kernel"])
    gpu = case["make"]()
    t0 = time.perf_counter()
    for args in gpu:
        driver.launch(kern, case["grid"], case["block"], args)
    row["gpu_seconds"] = round(time.perf_counter() - t0, 2)
    g_out = case["outputs"](gpu)
    if saved is not None:           # every launch's arrays, the GPU's and the emulator's
        saved.setdefault("async", {}).update(
            {f"{case['name']}_{i}_{j}_{who}": np.asarray(getattr(a, "array", a))
             for who, launches in (("gpu", gpu), ("emu", emu))
             for i, L in enumerate(launches) for j, a in enumerate(L)
             if isinstance(getattr(a, "array", a), np.ndarray)})
    return _scored(row, g_out, e_out)


def _scored(row, g_out, e_out):
    same = sum(int((g == e).sum()) for (g, _), (e, _) in zip(g_out, e_out))
    row["bit_equal"] = same / row["elements"]
    row["max_ulp"] = max(compare(g, e, fl)[1] for (g, fl), (e, _) in zip(g_out, e_out))
    return row


def _run_op(case, emu_only):
    """The 2-CTA GEMM through the operator's own steps: emulator (run_operator) and GPU
    (runtime.load_steps/run_steps), each on a copy of the same inputs."""
    from ptxgen.emu import run_operator
    op, shape = case["op"], case["shape"]
    arch = "sm_90a"
    emu = {k: v.copy() for k, v in case["inputs"].items()}
    t0 = time.perf_counter()
    run_operator(op, shape, emu, arch)
    row = dict(case=case["name"], emu_seconds=round(time.perf_counter() - t0, 2),
               shape=dict(shape), schedule=str(op.schedule_for(shape)))
    a, bt = op.values(emu["A"], op.dtype), op.values(emu["Bt"], op.dtype)
    bound = op.error_bound(shape, np.abs(a) @ np.abs(bt).T)
    c = op.values(emu["C"], op.out)
    row["elements"] = int(c.size)
    row["emu_vs_numpy"] = bool(np.isfinite(c).all() and (np.abs(c - a @ bt.T) <= bound).all())
    m = op.build(shape, arch)
    if emu_only:
        row["ptxas"] = assembled(m)
        return row
    from ptxgen.runtime import driver
    gpu = {k: v.copy() for k, v in case["inputs"].items()}
    gpu.update(op.workspace_arrays(shape, arch))
    t0 = time.perf_counter()
    driver.run_steps(op, shape, driver.load_steps(op, shape, m, arch), gpu, arch)
    row["gpu_seconds"] = round(time.perf_counter() - t0, 2)
    return _scored(row, [(gpu["C"].view(np.uint32), True)], [(emu["C"].view(np.uint32), True)])


CASE_LIMIT_S = 150              # a case that runs longer hangs (a wait on the GPU that never ends)


def run(outdir, emu_only=False, only=None):
    from ptxgen.runtime import gpu_available
    if not emu_only and not gpu_available():
        sys.exit("no GPU: run with --emu-only (emulator and ptxas only), or --fit DIR/*.npz to "
                 "use saved results")
    seed = int.from_bytes(os.urandom(4), "little")             # fresh inputs, recorded
    rng = np.random.default_rng(seed)
    rows, saved = [], {}
    info = {"mode": "emu-only (no GPU launch)"} if emu_only else device_info()
    info["seed"] = seed
    t_start = time.perf_counter()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "tensor_emu_only.json" if emu_only else "tensor_emu_vs_gpu.json")

    def save(status):
        info["wall_seconds"] = round(time.perf_counter() - t_start, 1)
        info["status"] = status
        with open(path, "w") as f:
            json.dump(dict(device=info, model=vars(TM.MODEL), rows=rows), f, indent=1)

    for case in cases(rng) + async_cases(rng):
        if only and not any(o in case["name"] for o in only):
            continue
        dog = threading.Timer(CASE_LIMIT_S, _hung, (case["name"], save))
        dog.daemon = True
        dog.start()
        try:
            row = run_case(case, emu_only, saved)
        except Exception as e:                   # one line in the row; the other cases go on
            row = dict(case=case["name"], elements=0, error=f"{type(e).__name__}: "
                       f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300])
        dog.cancel()
        rows.append(row)
        print(f"{case['name']}: {row}", flush=True)
        save("running")
    for group, arrays in saved.items():            # one file per group: under 16 MB each
        np.savez_compressed(os.path.join(outdir, f"tensor_{group}.npz"), **arrays)
    save("done")
    print(json.dumps(info))
    print(f"model: {vars(TM.MODEL)}")
    table(rows)
    bad = [r["case"] for r in rows if r.get("emu_vs_numpy") is False or "error" in r]
    if bad:
        sys.exit(f"errors, or the emulator differs from numpy, in: {', '.join(bad)}")


def _hung(name, save):
    save(f"case {name} did not finish in {CASE_LIMIT_S} s")
    print(f"case {name} did not finish in {CASE_LIMIT_S} s (a wait on the GPU that never "
          f"ends?): results so far saved", flush=True)
    os._exit(3)


def run_case(case, emu_only, saved):
    if "outputs" in case or "op" in case:
        return run_async(case, emu_only, saved)
    e, secs = emu_run(case)
    if emu_only:
        return dict(case=case["name"], elements=int(e.size), emu_seconds=round(secs, 2),
                    ptxas=assembled(case["module"]))
    g, how = gpu_run(case)
    frac, ulp = compare(g, e)
    if case["name"].startswith(("mma_bf16", "mma_f16", "mma_tf32", "wgmma")):
        group = saved.setdefault(case["name"].split("_")[0], {})
        for i, a in enumerate(case["inputs"]):
            group[f"{case['name']}__in{i}"] = a
        group[f"{case['name']}__gpu"] = g
    return dict(case=case["name"], elements=int(g.size), bit_equal=frac, max_ulp=ulp,
                emu_seconds=round(secs, 2), loaded=how)


def assembled(m):
    """Whether ptxas accepts the module for its target (what the GPU run loads)."""
    from ptxgen.toolchain import assemble
    assemble(emit_module(m), m.target)          # raises with ptxas's message when it refuses
    return True


def device_info():
    from numba import cuda
    d = cuda.get_current_device()
    return dict(device=d.name.decode() if isinstance(d.name, bytes) else d.name,
                cc=d.compute_capability, driver=cuda.cudadrv.driver.driver.get_version(),
                numba=__import__("numba").__version__, numpy=np.__version__,
                python=platform.python_version())


def table(rows):
    print(f"{'case':30s} {'elements':>9s} {'bit-equal':>10s} {'max ulp':>8s} {'emu s':>6s} "
          f"{'vs numpy':>8s}")
    for r in rows:
        eq = f"{r['bit_equal']:10.4%}" if "bit_equal" in r else f"{'-':>10s}"
        ulp = f"{r['max_ulp']:8d}" if "max_ulp" in r else f"{'-':>8s}"
        ref = "ERROR" if "error" in r else \
            {True: "equal", False: "DIFFERS", None: "-"}[r.get("emu_vs_numpy")]
        print(f"{r['case']:30s} {r['elements']:9d} {eq} {ulp} {r.get('emu_seconds', 0):6.2f} "
              f"{ref:>8s}")


# -- fitting the summation model offline -------------------------------------------------------------
def model_outputs(name, data, model=None):
    """The model's output for a saved case, computed from the float matrices (the emulator's
    layout plumbing is tested to equal this exactly)."""
    spec = next(c for c in MMA if c[0] == name) if name.startswith("mma") else None
    if spec is not None:
        _, shape, ab, acc, _ = spec
        kind = F.mma_kind(shape, ab)
        a = _values(data[f"{name}__in0"], ab)
        b = _values(data[f"{name}__in1"], ab)
        c = data[f"{name}__in2"]
        d = c.astype(np.float64)
        for s in range(KSTEPS):
            ks = slice(s * kind.k, (s + 1) * kind.k)
            d = TM.block_dot(a[..., ks], np.swapaxes(b[..., ks], 1, 2), d, acc, model)
        return d.astype(c.dtype)
    n = int(name.split("n")[1].split("k")[0])
    a = fp.bf16_to_f64(data[f"{name}__in0"])                        # ctas, 64 m, 64 k
    b = np.swapaxes(fp.bf16_to_f64(data[f"{name}__in1"]), 1, 2)     # ctas, 64 k, n
    d = np.zeros((a.shape[0], 64, n))
    for s in range(KSTEPS):
        ks = slice(16 * s, 16 * s + 16)
        d = TM.block_dot(a[..., ks], b[:, ks], d, "f32", model)
    return d.astype(np.float32)


def _values(bits, ab):
    if ab == "bf16":
        return fp.bf16_to_f64(bits)
    if ab == "f16":
        return bits.view(np.float16).astype(np.float64)
    return bits.view(np.float32).astype(np.float64)


def fit(paths, tiles=64):
    """Score candidate models on the first `tiles` tiles of every saved case."""
    data = {}
    for p in paths:
        with np.load(p) as f:
            data.update({k: f[k][:tiles] for k in f.files})
    names = sorted({k.split("__")[0] for k in data})
    results = []
    for block, width, align, final in itertools.product((8, 16), range(22, 30),
                                                         ("trunc", "floor"), ("rz", "rn")):
        model = TM.Numerics(block, width, align, final)
        scores = {n: compare(data[f"{n}__gpu"], model_outputs(n, data, model)) for n in names}
        worst = min(s[0] for s in scores.values())
        results.append((worst, vars(model), scores))
    results.sort(key=lambda r: -r[0])
    for worst, model, scores in results[:8]:
        print(f"{worst:8.4%}  {model}  " + "  ".join(f"{n}={s[0]:.4%}/{s[1]}"
                                                      for n, s in scores.items()))
    return results


def recheck(paths):
    """Run the emulator again on the saved inputs and compare with the saved GPU outputs."""
    data = {}
    for p in paths:
        with np.load(p) as f:
            data.update({k: f[k] for k in f.files})
    rows = []
    for case in cases(np.random.default_rng(0)):
        name = case["name"]
        if f"{name}__gpu" not in data:
            continue
        case["inputs"] = [data[f"{name}__in{i}"] for i in range(len(case["inputs"]))]
        g = data[f"{name}__gpu"]
        e, secs = emu_run(case)
        frac, ulp = compare(g, e)
        rows.append(dict(case=name, elements=int(g.size), bit_equal=frac, max_ulp=ulp,
                         emu_seconds=round(secs, 2)))
    print(f"model: {vars(TM.MODEL)}, f16 accumulators: {vars(TM.MODEL_F16)}")
    table(rows)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--fit", metavar="NPZ", nargs="+")
    ap.add_argument("--recheck", metavar="NPZ", nargs="+")
    ap.add_argument("--emu-only", action="store_true",
                    help="no GPU: run the emulator (checked against numpy) and ptxas only")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="cases whose name contains one")
    args = ap.parse_args()
    if args.fit:
        fit(args.fit)
    elif args.recheck:
        recheck(args.recheck)
    else:
        run(args.out, args.emu_only, args.only)


if __name__ == "__main__":
    main()
