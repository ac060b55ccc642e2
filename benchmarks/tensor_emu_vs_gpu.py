"""Tensor cores on the GPU against ptxgen's emulator, on the same random inputs.

    python benchmarks/tensor_emu_vs_gpu.py [--out DIR]      # on a GPU: run, compare, save
    python benchmarks/tensor_emu_vs_gpu.py --fit DIR/*.npz  # anywhere: fit the numerics model
    python benchmarks/tensor_emu_vs_gpu.py --recheck DIR/*.npz  # anywhere: emulator vs saved GPU

Kernels (ptxgen/ops/tensor_probes.py, built with the builder API): mma.sync m16n8k16 bf16→f32,
f16→f32, f16→f16, m16n8k8 tf32→f32, m16n8k32 s8→s32 (four chained k-steps each, one 16×8 tile
per warp), ldmatrix .x4 and .x4.trans, wgmma m64n{64,128,256}k16 bf16→f32 from shared memory
with the 128-byte swizzle (four k-steps, one 64×n tile per CTA).
Inputs are normal values scaled by 2^-3..2^3 ('wide': by 2^-20..2^20, to stress the alignment
of products). For each: the fraction of output elements bit-equal between GPU and emulator and
the largest difference in units in the last place of the output format. Inputs and GPU outputs
of the floating-point cases go to DIR/tensor_{mma,wgmma}.npz, which --fit reads to score
candidate summation models (tensor_math.Numerics) against the GPU without it.
"""
import argparse
import itertools
import json
import os
import platform
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ptxgen.emu import emulate, fp, tensor_math as TM  # noqa: E402
from ptxgen.emit.ptx import emit_module  # noqa: E402
from ptxgen.ir import fragments as F  # noqa: E402
from ptxgen.ops import tensor_probes as P  # noqa: E402

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


def compare(gpu, emu):
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
def gpu_run(case):
    from ptxgen.runtime import driver
    m = case["module"]
    ptx = emit_module(m)
    k = m.kernel(case["kernel"])
    try:
        kern = driver.load_kernel(ptx, case["kernel"], k.params, k.directives)
        how = "PTX (driver JIT)"
    except Exception as e:                    # the driver's JIT may refuse sm_90a: use ptxas
        from numba import cuda
        from ptxgen.toolchain import assemble
        cubin = assemble(ptx, m.target).cubin
        fn = cuda.current_context().create_module_image(cubin).get_function(case["kernel"])
        kern = driver.GpuKernel(case["kernel"], fn, k.params, ptx, k.directives)
        how = f"cubin from ptxas ({str(e)[:60]})"
    args = [np.ascontiguousarray(a).view(np.uint32) for a in case["inputs"]]
    out = case["out"].view(np.uint32).copy()
    driver.launch(kern, case["grid"], case["block"], args + [out])
    return out.view(case["out"].dtype).reshape(case["out"].shape), how


def emu_run(case):
    out = case["out"].copy()
    t0 = time.perf_counter()
    emulate(case["module"], case["kernel"], case["grid"], case["block"], *case["inputs"], out)
    return out, time.perf_counter() - t0


def run(outdir):
    from ptxgen.runtime import gpu_available
    if not gpu_available():
        sys.exit("no GPU: run with --fit DIR/*.npz to use saved results")
    rng = np.random.default_rng(20261201)
    rows, saved = [], {}
    for case in cases(rng):
        g, how = gpu_run(case)
        e, secs = emu_run(case)
        frac, ulp = compare(g, e)
        rows.append(dict(case=case["name"], elements=int(g.size), bit_equal=frac, max_ulp=ulp,
                         emu_seconds=round(secs, 2), loaded=how))
        if case["name"].startswith(("mma_bf16", "mma_f16", "mma_tf32", "wgmma")):
            group = saved.setdefault(case["name"].split("_")[0], {})
            for i, a in enumerate(case["inputs"]):
                group[f"{case['name']}__in{i}"] = a
            group[f"{case['name']}__gpu"] = g
    for group, arrays in saved.items():            # one file per group: under 16 MB each
        np.savez_compressed(os.path.join(outdir, f"tensor_{group}.npz"), **arrays)
    info = device_info()
    with open(os.path.join(outdir, "tensor_emu_vs_gpu.json"), "w") as f:
        json.dump(dict(device=info, model=vars(TM.MODEL), rows=rows), f, indent=1)
    print(json.dumps(info))
    print(f"model: {vars(TM.MODEL)}")
    table(rows)


def device_info():
    from numba import cuda
    d = cuda.get_current_device()
    return dict(device=d.name.decode() if isinstance(d.name, bytes) else d.name,
                cc=d.compute_capability, driver=cuda.cudadrv.driver.driver.get_version(),
                numba=__import__("numba").__version__, numpy=np.__version__,
                python=platform.python_version())


def table(rows):
    print(f"{'case':28s} {'elements':>9s} {'bit-equal':>10s} {'max ulp':>8s}")
    for r in rows:
        print(f"{r['case']:28s} {r['elements']:9d} {r['bit_equal']:10.4%} {r['max_ulp']:8d}")


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
    args = ap.parse_args()
    if args.fit:
        fit(args.fit)
    elif args.recheck:
        recheck(args.recheck)
    else:
        run(args.out)


if __name__ == "__main__":
    main()
