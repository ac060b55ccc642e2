"""Triton's compiled bf16 `tl.dot` matmul: its PTX on ptxgen's emulator against Triton on the GPU.

    python benchmarks/triton_matmul_emu.py --out DIR               # GPU host (torch + triton 3.6)
    python benchmarks/triton_matmul_emu.py --save-ptx tests/data/ptx   # any machine with triton
    python benchmarks/triton_matmul_emu.py --emu-only [--ptx-dir tests/data/ptx]   # CPU, no triton

The kernel is the corpus' autotune-free matmul (benchmarks/triton_kernels.py `mm`:
masked loads and stores, the output in C's element type), compiled with
`triton.compile(ASTSource(...), target=GPUTarget(...))` for sm_90a (wgmma from shared memory,
cp.async loads, 3 stages) and for sm_80 (mma.sync + ldmatrix + cp.async), at block shapes and
matrix sizes that are not tile multiples. On the GPU: Triton launches its own compile (the sm_90a
cubin; the sm_80 form through the driver's JIT of its PTX, since an sm_80 cubin does not load
on sm_90), then the very same PTX text runs on ptxgen's emulator (parser + interpreter) with
the launch Triton used (grid, 32·num_warps threads, metadata.shared bytes of dynamic shared
memory) and its argument list (the non-constexpr arguments in order, then Triton 3.6's two
trailing scratch pointers, null when the kernel needs no scratch). Inputs are fresh random bf16
matrices. Reported per case: the fraction of C's elements bit-equal between GPU and emulator,
the largest difference in units in the last place of C's type, both against a float64 reference,
and whether the GPU-side PTX is byte-identical to the CPU-compiled copy in tests/data/ptx.

--save-ptx compiles the cases without a GPU (Triton targets an explicit GPUTarget) and writes
triton_mm_<case>.ptx plus triton_mm_cases.json (launch metadata) for tests/test_triton_emu.py.
"""
import argparse
import hashlib
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]
CORPUS = os.path.join(ROOT, "tests", "data", "ptx")
META = "triton_mm_cases.json"

# name, target arch, block shape, warps, stages, matrix shape, C's element type, how Triton
# stages A and B in shared memory. 131×80×96 has
# edge tiles in M and N with 16-byte aligned rows (vector cp.async loads); 131×77×72 has no
# aligned row (scalar loads) and a partial K step.
CASES = [
    dict(name="sm90a_64x64x32_w4", arch=90, BM=64, BN=64, BK=32, warps=4, stages=3,
         M=131, N=80, K=96, out="fp32", staging="cp.async"),
    dict(name="sm90a_128x128x64_w8", arch=90, BM=128, BN=128, BK=64, warps=8, stages=3,
         M=192, N=160, K=96, out="fp32", staging="cp.async"),
    dict(name="sm90a_64x64x32_w4_odd_bf16out", arch=90, BM=64, BN=64, BK=32, warps=4, stages=3,
         M=131, N=77, K=72, out="bf16", staging="st.shared"),
    dict(name="sm80_64x64x32_w4", arch=80, BM=64, BN=64, BK=32, warps=4, stages=3,
         M=131, N=80, K=96, out="fp32", staging="cp.async"),
    dict(name="sm80_64x64x32_w4_odd", arch=80, BM=64, BN=64, BK=32, warps=4, stages=3,
         M=131, N=77, K=72, out="fp32", staging="st.shared"),
]


def ptx_name(case):
    return f"triton_mm_{case['name']}.ptx"


# -- Triton side (needs triton; the GPU part torch too) ------------------------------------------
def compile_case(case):
    """Triton's compiled kernel for a case (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton_kernels import MM_SIG, mm
    sig = dict(MM_SIG, c_ptr=f"*{case['out']}")
    consts = {k: case[k] for k in ("BM", "BN", "BK")}
    # what Triton's JIT would specialise on: torch's pointers and the ints divisible by 16
    ints = [case[k] for k in ("M", "N", "K")] + [case["K"], case["N"], case["N"]]
    attrs = {(i,): [["tt.divisibility", 16]] for i, v in enumerate([16] * 3 + ints) if v % 16 == 0}
    return triton.compile(ASTSource(mm, sig, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", case["arch"], 32),
                          options={"num_warps": case["warps"], "num_stages": case["stages"]})


def launch_meta(case, k):
    md = k.metadata
    return dict(case, kernel=k.name, ptx=ptx_name(case), shared=int(md.shared),
                global_scratch=int(md.global_scratch_size),
                profile_scratch=int(getattr(md, "profile_scratch_size", 0) or 0),
                sha256=hashlib.sha256(k.asm["ptx"].encode()).hexdigest(),
                triton=__import__("triton").__version__)


def save_ptx(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    metas = []
    for case in CASES:
        k = compile_case(case)
        with open(os.path.join(out_dir, ptx_name(case)), "w") as f:
            f.write(k.asm["ptx"])
        metas.append(launch_meta(case, k))
        print("saved", ptx_name(case), "shared", metas[-1]["shared"])
    with open(os.path.join(out_dir, META), "w") as f:
        json.dump(metas, f, indent=1)


def gpu_run(case, a_bits, b_bits):
    """C from Triton's own launch of the case, and the launch metadata."""
    import torch
    k = compile_case(case)
    if case["arch"] < 90:
        # an sm_80 cubin does not load on sm_90: have the driver JIT the sm_80 PTX instead
        k.kernel = k.asm["ptx"].encode() + b"\0"
    dev = torch.device("cuda")
    a = torch.from_numpy(a_bits.view(np.int16)).view(torch.bfloat16).to(dev)
    b = torch.from_numpy(b_bits.view(np.int16)).view(torch.bfloat16).to(dev)
    cdt = torch.float32 if case["out"] == "fp32" else torch.bfloat16
    c = torch.full((case["M"], case["N"]), float("nan"), dtype=cdt, device=dev)
    M, N, K = case["M"], case["N"], case["K"]
    k[grid_of(case)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                     case["BM"], case["BN"], case["BK"])
    torch.cuda.synchronize()
    host = c.cpu()
    bits = host.view(torch.int16 if case["out"] == "bf16" else torch.int32).numpy()
    return bits.view(np.uint16 if case["out"] == "bf16" else np.float32), k


def grid_of(case):
    return (-(-case["M"] // case["BM"]), -(-case["N"] // case["BN"]), 1)


# -- ptxgen side ----------------------------------------------------------------------------------
def inputs(case, rng):
    from ptxgen.emu.fp import to_bf16
    a = to_bf16(rng.standard_normal((case["M"], case["K"])))
    b = to_bf16(rng.standard_normal((case["K"], case["N"])))
    return a, b


def emu_args(module, meta, a, b, c):
    """Triton's launch arguments in PTX parameter order: a, b, c, M, N, K and the three row
    strides (unit strides are not arguments of this kernel), then the two scratch pointers."""
    M, N, K = meta["M"], meta["N"], meta["K"]
    args = [a, b, c] + [np.int32(v) for v in (M, N, K, K, N, N)]
    ctas = int(np.prod(grid_of(meta)))
    for size in (meta["global_scratch"], meta["profile_scratch"]):      # per CTA, as Triton's
        args.append(np.zeros(size * ctas, np.uint8) if size else np.uint64(0))   # launcher
    params = module.kernel(meta["kernel"]).params
    if len(params) != len(args):
        raise SystemExit(f"{meta['ptx']}: the kernel takes {len(params)} parameters, "
                         f"the launch has {len(args)}")
    return args


def emu_run(ptx, meta, a, b):
    """C from the emulator running the PTX text with Triton's launch."""
    from ptxgen.emu import as_module, emulate
    module = as_module(ptx)
    c = np.full((meta["M"], meta["N"]), np.nan, np.float32)
    if meta["out"] == "bf16":
        c = np.full((meta["M"], meta["N"]), 0x7FC0, np.uint16)
    t0 = time.perf_counter()
    emulate(module, meta["kernel"], grid_of(meta), (32 * meta["warps"],),
            *emu_args(module, meta, a, b, c), shared_bytes=meta["shared"])
    return c, time.perf_counter() - t0


def reference_error(meta, a, b, c):
    """Largest |C - A·B| over |A|·|B| (float64): what the accumulation order can explain."""
    from ptxgen.emu.fp import bf16_to_f64
    fa, fb = bf16_to_f64(a), bf16_to_f64(b)
    got = bf16_to_f64(c) if meta["out"] == "bf16" else c.astype(np.float64)
    return float((np.abs(got - fa @ fb) / (np.abs(fa) @ np.abs(fb))).max())


def compare(gpu, emu):
    from tensor_emu_vs_gpu import compare as bitwise
    if gpu.dtype == np.uint16:             # bf16 bits: compare as the f32 they widen to
        gpu, emu = [(x.astype(np.uint32) << 16).view(np.float32) for x in (gpu, emu)]
        frac, ulp = bitwise(gpu, emu)
        return frac, ulp >> 16
    return bitwise(gpu, emu)


def row(meta, a, b, c_emu, secs, c_gpu=None, gpu_sha=None):
    r = dict(case=meta["name"], target=f"sm_{meta['arch']}{'a' if meta['arch'] == 90 else ''}",
             shape=[meta["M"], meta["N"], meta["K"]], block=[meta["BM"], meta["BN"], meta["BK"]],
             warps=meta["warps"], shared=meta["shared"], out=meta["out"],
             elements=int(c_emu.size), emu_seconds=round(secs, 3),
             emu_rel_err=reference_error(meta, a, b, c_emu))
    if c_gpu is not None:
        frac, ulp = compare(c_gpu, c_emu)
        r.update(bit_equal=frac, max_ulp=int(ulp), gpu_rel_err=reference_error(meta, a, b, c_gpu),
                 ptx_same_as_corpus=gpu_sha == meta.get("corpus_sha256"))
    return r


def table(rows):
    print(f"{'case':30s} {'target':7s} {'elements':>8s} {'bit-equal':>10s} {'max ulp':>8s} "
          f"{'emu err':>9s} {'gpu err':>9s} {'emu s':>6s}")
    for r in rows:
        gpu = "bit_equal" in r
        print(f"{r['case']:30s} {r['target']:7s} {r['elements']:8d} "
              f"{format(r['bit_equal'], '.4%') if gpu else '-':>10s} "
              f"{r['max_ulp'] if gpu else '-':>8} {r['emu_rel_err']:9.2e} "
              f"{format(r['gpu_rel_err'], '.2e') if gpu else '-':>9s} {r['emu_seconds']:6.2f}")


def corpus_meta(ptx_dir):
    path = os.path.join(ptx_dir, META)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {m["name"]: m for m in json.load(f)}


def run_gpu(out_dir, seed):
    import torch
    import triton
    saved = corpus_meta(CORPUS)
    rng = np.random.default_rng(seed)
    rows, arrays = [], {}
    errors = {}
    for case in CASES:
        a, b = inputs(case, rng)
        try:
            c_gpu, k = gpu_run(case, a, b)
            meta = launch_meta(case, k)
            meta["corpus_sha256"] = saved.get(case["name"], {}).get("sha256")
            c_emu, secs = emu_run(k.asm["ptx"], meta, a, b)
        except Exception as e:          # one case failing must not lose the others
            errors[case["name"]] = f"{type(e).__name__}: {e}"
            continue
        rows.append(row(meta, a, b, c_emu, secs, c_gpu, meta["sha256"]))
        arrays.update({f"{case['name']}__a": a, f"{case['name']}__b": b,
                       f"{case['name']}__gpu": c_gpu, f"{case['name']}__emu": c_emu})
    np.savez_compressed(os.path.join(out_dir, "triton_matmul_emu.npz"), **arrays)
    info = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                triton=triton.__version__, numpy=np.__version__,
                python=platform.python_version(), seed=seed,
                date=time.strftime("%Y-%m-%d", time.gmtime()))
    with open(os.path.join(out_dir, "triton_matmul_emu.json"), "w") as f:
        json.dump(dict(info=info, rows=rows, errors=errors), f, indent=1)
    print(json.dumps(info))
    for name, e in errors.items():
        print(f"failed: {name}: {e}")
    table(rows)


def run_emu_only(ptx_dir, seed):
    """The saved CPU-compiled PTX on the emulator against float64 (no GPU, no triton)."""
    metas = corpus_meta(ptx_dir)
    if not metas:
        raise SystemExit(f"no {META} in {ptx_dir}: run --save-ptx there first")
    rng = np.random.default_rng(seed)
    rows = []
    for meta in metas.values():
        a, b = inputs(meta, rng)
        with open(os.path.join(ptx_dir, meta["ptx"])) as f:
            c, secs = emu_run(f.read(), meta, a, b)
        rows.append(row(meta, a, b, c, secs))
    table(rows)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--save-ptx", metavar="DIR")
    ap.add_argument("--emu-only", action="store_true")
    ap.add_argument("--ptx-dir", default=CORPUS)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    if args.save_ptx:
        save_ptx(args.save_ptx)
    elif args.emu_only:
        run_emu_only(args.ptx_dir, args.seed)
    else:
        os.makedirs(args.out, exist_ok=True)
        run_gpu(args.out, args.seed)


if __name__ == "__main__":
    main()
