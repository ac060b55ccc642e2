"""The GPU's arithmetic the emulator reproduces bit for bit, probed on the device: wgmma's fp8
accumulation against candidate models of it (emu/tensor_math.Numerics), and the
special-function unit's ex2 / lg2 / rcp tables (emu/sfu.py).

    python benchmarks/numerics.py --out DIR          # on a GPU: run the fp8 probes, save
    python benchmarks/numerics.py --fit DIR/*.npz     # anywhere: score candidate models
    python benchmarks/numerics.py --recheck DIR/*.npz # anywhere: the emulator's MODEL_FP8
    python benchmarks/numerics.py --sfu-out DIR       # on a GPU: the SFU tables, DIR/sfu_*.npz
    python benchmarks/numerics.py --sfu-check FILE    # anywhere: the emulator against FILE

--fit and --recheck also take the whole fp8 GEMMs that `benchmarks/llm_gemms.py --parts fp8emu`
saves (DIR/small_gpu.npz, recognised by its caseN__ keys): each single-pass fp8 case (per-tensor
scales, no split-K; the grouped one per expert) is replayed as its kernel computes it: the
accumulator from zero through one m64nNk32 instruction per 32 k (K's zero padding changes
nothing), times the f32 product of the scales (mul.rn.f32), then rounded to nearest even into a
bf16 C. MODEL_FP8 was fitted this way (tests/test_fp8_gpu_replay.py replays it).

Kernel: tensor_probes.wgmma_probe with fp8 operands (one 64x128 tile per CTA, 128-byte swizzled
K-major A and B, `ksteps` wgmma m64n128k32 into f32 accumulators, which start at zero or at a
given C). Inputs are crafted to separate the models: products of normal values, every finite
fp8 byte (subnormals and the whole exponent range), pairs of products that cancel exactly
beside small ones, one product far above the rest, an accumulator C far above or below the
products, and C = -(the products' sum) so only the low bits survive. Inputs and GPU outputs go
to DIR/fp8_numerics_*.npz; --fit scores each candidate model by the fraction of output elements
bit-equal to the GPU's, over all cases: block 4/8/16/32, width 12-29, frac_bits none/12-16, C
aligned with the products or added after, then truncation/floor and rz/rn for the ten best
(about a minute on 2 cores for llm_gemms.py's small_gpu.npz). `benchmarks/llm_gemms.py --parts fp8emu` then checks whole fp8
GEMMs against the emulator bit for bit.
"""
import argparse
import itertools
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from ptxgen.arrays import from_fp8, to_fp8  # noqa: E402
from ptxgen.emu import tensor_math as TM  # noqa: E402
from ptxgen.ops import tensor_probes as P  # noqa: E402

N = 128
CTAS = 16
K = 128                              # one 128-byte row of fp8
GEMM_ROWS = 4                        # a GEMM case's sample: 4 of its rows per probe row


def finite_bytes(fmt):
    b = np.arange(256)
    v = from_fp8(b, fmt)
    return b[np.isfinite(v)].astype(np.uint8)


def gen(rng, kind, fmt, shape):
    """fp8 bytes of `shape` (..., K) for input kind."""
    if kind == "wide":
        return rng.choice(finite_bytes(fmt), shape)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
    if kind == "cancel":              # k and k+1 cancel (a: x, -x; b: the same y twice) ...
        x[..., 1::2] = -x[..., 0::2]
        small = rng.random(shape) < 0.25      # ... beside some small terms
        x = np.where(small, x * 2.0 ** -9, x)
    if kind == "onebig":
        x = x * 2.0 ** -5
        x[..., ::32] *= 2.0 ** 9
    return to_fp8(x, fmt)


def b_for(kind, a_bits, b_bits, fmt_b):
    """B for the cancelling pairs: the same value at k and k+1."""
    if kind == "cancel":
        b_bits[..., 1::2] = b_bits[..., 0::2]
    return b_bits


CASES = [  # (name, A format, B format, kind, ksteps, C kind)
    ("e4m3_normal_k1", "e4m3", "e4m3", "normal", 1, None),
    ("e4m3_normal_k4", "e4m3", "e4m3", "normal", 4, None),
    ("e4m3_wide_k1", "e4m3", "e4m3", "wide", 1, None),
    ("e4m3_wide_k4", "e4m3", "e4m3", "wide", 4, None),
    ("e4m3_cancel_k1", "e4m3", "e4m3", "cancel", 1, None),
    ("e4m3_onebig_k1", "e4m3", "e4m3", "onebig", 1, None),
    ("e4m3_cwide_k1", "e4m3", "e4m3", "normal", 1, "wide"),
    ("e4m3_cneg_k1", "e4m3", "e4m3", "normal", 1, "neg"),
    ("e4m3_cneg_k4", "e4m3", "e4m3", "normal", 4, "wide"),
    ("e5m2_normal_k1", "e5m2", "e5m2", "normal", 1, None),
    ("e5m2_wide_k1", "e5m2", "e5m2", "wide", 1, None),
    ("e5m2_cancel_k1", "e5m2", "e5m2", "cancel", 1, None),
    ("e5m2_cneg_k1", "e5m2", "e5m2", "normal", 1, "neg"),
    ("e5m2_normal_k4", "e5m2", "e5m2", "normal", 4, None),
    ("e4m3e5m2_normal_k1", "e4m3", "e5m2", "normal", 1, None),
    ("e4m3e5m2_wide_k4", "e4m3", "e5m2", "wide", 4, "wide"),
]


def make_case(rng, spec):
    name, fa, fb, kind, ksteps, ckind = spec
    a_bits = gen(rng, kind, fa, (CTAS, 64, K))
    b_bits = b_for(kind, a_bits, gen(rng, kind, fb, (CTAS, N, K)), fb)
    a, b = from_fp8(a_bits, fa), np.swapaxes(from_fp8(b_bits, fb), 1, 2)
    if ckind == "wide":
        c = rng.standard_normal((CTAS, 64, N)) * np.exp2(rng.integers(-20, 21, (CTAS, 64, N)))
    elif ckind == "neg":               # C = -(the first k-step's exact sum), nudged
        s = a[..., :32] @ b[:, :32]
        c = -s * (1 + rng.standard_normal(s.shape) * 2.0 ** -12)
    else:
        c = None
    return dict(name=name, fa=fa, fb=fb, ksteps=ksteps, a=a_bits, b=b_bits,
                c=None if c is None else c.astype(np.float32))


def model_out(case, model):
    fa, fb, ks = str(case["fa"]), str(case["fb"]), int(case["ksteps"])
    a = from_fp8(case["a"], fa)
    b = np.swapaxes(from_fp8(case["b"], fb), 1, 2)
    d = np.zeros(a.shape[:2] + (N,)) if case.get("c") is None else \
        case["c"].astype(np.float64)
    for s in range(ks):
        sl = slice(32 * s, 32 * s + 32)
        d = TM.block_dot(a[..., sl], b[:, sl], d, "f32", model)
    return d.astype(np.float32)


def run(outdir):
    from ptxgen.runtime import driver
    from tensor_emu_vs_gpu import load_gpu
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    saved = {"seed": np.array(seed)}
    for spec in CASES:
        case = make_case(rng, spec)
        ab = (case["fa"], case["fb"])
        m = P.wgmma_probe(N, ksteps=case["ksteps"], ab=ab, c_in=case["c"] is not None)
        kern, _ = load_gpu(m, "wgmma_probe")
        args = [case["a"].view(np.uint32), case["b"].view(np.uint32)]
        if case["c"] is not None:
            args.append(case["c"].view(np.uint32))
        out = np.zeros((CTAS, 64, N), np.float32)
        o = out.view(np.uint32).copy()
        driver.launch(kern, (CTAS,), (128,), args + [o])
        g = o.view(np.float32)
        e = model_out(case, TM.MODEL_FP8)
        exact = model_out(case, TM.Numerics(block=32, width=200, final="rn"))
        print(f"{case['name']:22s} bit-equal to MODEL_FP8 {np.mean(g == e):8.4%}  to f32-rn of "
              f"the exact sum {np.mean(g == exact):8.4%}", flush=True)
        for k in ("a", "b", "c"):
            if case[k] is not None:
                saved[f"{case['name']}__{k}"] = case[k]
        saved[f"{case['name']}__gpu"] = g
        saved[f"{case['name']}__meta"] = np.array([case["fa"], case["fb"], str(case["ksteps"])])
    os.makedirs(outdir, exist_ok=True)
    np.savez_compressed(os.path.join(outdir, "fp8_numerics.npz"), **saved)


def load(paths):
    cases = []
    for p in paths:
        with np.load(p) as f:
            names = sorted({k.split("__")[0] for k in f.files if "__" in k})
            for n in names:
                fa, fb, ks = (str(x) for x in f[f"{n}__meta"])
                cases.append(dict(name=n, fa=fa, fb=fb, ksteps=int(ks), a=f[f"{n}__a"],
                                  b=f[f"{n}__b"], c=f[f"{n}__c"] if f"{n}__c" in f.files
                                  else None, gpu=f[f"{n}__gpu"]))
    return cases


def load_gemms(path):
    """The single-pass fp8 GEMMs of llm_gemms.py's small_gpu.npz as cases: name, a (M x K) and
    b (K x N) exact values, scale (the kernel's f32 scale_a * scale_b), out ('f32' or 'bf16')
    and gpu (C's values, float64); a grouped case gives one case per expert."""
    from llm_gemms import small_cases
    from ptxgen.emu import fp
    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    cases = []
    for i, (label, op, shape) in enumerate(small_cases()):
        key = f"case{i}__"
        dense = getattr(op, "dense", op)
        sched = getattr(op, "schedule", "auto")
        if key + "gpu" not in data or getattr(dense, "scaling", None) != "tensor" or \
                getattr(sched, "split_k", 1) != 1:
            continue
        scale = float(np.float32(data[key + "scale_a"][0]) * np.float32(data[key + "scale_b"][0]))
        gpu = data[key + "gpu"]
        gpu = fp.bf16_to_f64(gpu) if dense.out == "bf16" else gpu.astype(np.float64)
        fa, fb = dense.dtype, dense.b_dtype
        if "X" in {k.split("__")[1] for k in data if k.startswith(key)}:
            parts = [(f"{label} expert {g}", data[key + "X"][lo:hi], data[key + "W"][g],
                      gpu[lo:hi]) for g, (lo, hi) in
                     enumerate(op.expert_rows(shape, data[key + "rows"])) if hi > lo]
        else:
            parts = [(label, data[key + "A"], data[key + "Bt"], gpu)]
        for name, a, bt, g in parts:
            cases.append(dict(kind="gemm", name=name, out=dense.out, scale=scale, gpu=g,
                              a=from_fp8(a, fa), b=from_fp8(bt, fb).T))
    return cases


def gemm_out(case, model):
    """C of a GEMM case under `model`, as the kernel forms it (float64 values of C's format)."""
    from ptxgen.emu import fp
    a, b = case["a"], case["b"]
    d = np.zeros((a.shape[0], b.shape[1]))
    for k0 in range(0, a.shape[1], 32):
        d = TM.block_dot(a[:, k0:k0 + 32], b[k0:k0 + 32], d, "f32", model)
    c = fp.to_f32(d * case["scale"]).astype(np.float64)           # exact product, one rounding
    return fp.bf16_to_f64(fp.to_bf16(c)) if case["out"] == "bf16" else c


def subset(c, tiles=None, rows=None):
    """The first `tiles` CTAs' first `rows` rows of a case (all of it by default); a GEMM's
    first `rows` x GEMM_ROWS rows."""
    if c.get("kind") == "gemm":
        r = slice(None if rows is None else rows * GEMM_ROWS)
        return dict(c, a=c["a"][r], gpu=c["gpu"][r])
    t, r = slice(tiles), slice(rows)
    return dict(c, a=c["a"][t, r], b=c["b"][t], c=None if c["c"] is None else c["c"][t, r],
                gpu=c["gpu"][t, r])


def score(cases, model, tiles=None, rows=None):
    out = {}
    for c in cases:
        cc = subset(c, tiles, rows)
        got = gemm_out(cc, model) if c.get("kind") == "gemm" else model_out(cc, model)
        out[c["name"]] = float(np.mean(got == cc["gpu"]))
    return out


def load_any(paths):
    """Probe files (this script's) and GEMM files (llm_gemms.py's small_gpu.npz) alike."""
    cases = []
    for p in paths:
        with np.load(p) as f:
            gemm = any(k.startswith("case") and k.endswith("__gpu") for k in f.files)
        cases += load_gemms(p) if gemm else load([p])
    return cases


def fit(paths, tiles=1, rows=8, top=10):
    """Two rounds on a sample (`tiles` CTAs' first `rows` rows of each case): block size,
    width, fraction bits and where C is aligned with truncation and rounding toward zero;
    then both alignments and roundings for the `top` of those; the best on every sampled
    element of every case first. Then the winner on all the data."""
    cases = load_any(paths)

    def rank(models):
        res = []
        for model in models:
            s = score(cases, model, tiles, rows)
            res.append((min(s.values()), float(np.mean(list(s.values()))), model, s))
        return sorted(res, key=lambda r: (-r[0], -r[1]))
    first = rank(TM.Numerics(block, width, "trunc", "rz", frac, calign)
                 for block, width, frac, calign in itertools.product(
                     (4, 8, 16, 32), range(12, 30), (None, 12, 13, 14, 15, 16),
                     ("block", "after")))
    second = rank(TM.Numerics(m.block, m.width, align, final, m.frac_bits, m.c_align)
                  for _, _, m, _ in first[:top]
                  for align, final in itertools.product(("trunc", "floor"), ("rz", "rn")))
    for worst, mean, model, s in second[:top]:
        print(f"worst {worst:8.4%} mean {mean:8.4%} {model}")
        print("    " + " ".join(f"{k}={v:.3%}" for k, v in s.items()))
    best = second[0][2]
    full = score(cases, best)
    print(f"best on all the data: worst {min(full.values()):.4%} {best}")
    return second


def recheck(paths):
    cases = load_any(paths)
    s = score(cases, TM.MODEL_FP8)
    print(f"MODEL_FP8 = {TM.MODEL_FP8}")
    for c in cases:
        print(f"{c['name']:22s} {s[c['name']]:9.4%} bit-equal ({c['gpu'].size} elements)")
    return s


# -- the special-function unit ---------------------------------------------------------------------
# One PTX kernel applies ex2.approx.ftz.f32, lg2.approx.ftz.f32 and rcp.approx.ftz.f32 to each
# input: every f32 of [-1, 1) on the 2^-23 grid (ex2's tables), every significand of [1, 2) and
# of [0.5, 1) (lg2's and rcp's), and random inputs of every exponent (the held-out check of how
# the tables extend). Tables are saved as the difference in units of the last place from the
# correctly rounded result; isa/sm_90_sfu.npz is made from them.
SFU_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry sfu(.param .u64 px, .param .u64 pe, .param .u64 pl, .param .u64 pr,
                    .param .u32 n)
{
  .reg .pred %p;
  .reg .b32 %r<6>;
  .reg .f32 %f<5>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  ld.param.u32 %r5, [n];
  setp.ge.u32 %p, %r4, %r5;
  @%p bra DONE;
  mul.wide.u32 %rd1, %r4, 4;
  ld.param.u64 %rd2, [px];
  ld.param.u64 %rd3, [pe];
  ld.param.u64 %rd4, [pl];
  ld.param.u64 %rd5, [pr];
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  cvta.to.global.u64 %rd4, %rd4;
  cvta.to.global.u64 %rd5, %rd5;
  add.s64 %rd6, %rd2, %rd1;
  add.s64 %rd7, %rd3, %rd1;
  add.s64 %rd8, %rd4, %rd1;
  add.s64 %rd9, %rd5, %rd1;
  ld.global.f32 %f1, [%rd6];
  ex2.approx.ftz.f32 %f2, %f1;
  lg2.approx.ftz.f32 %f3, %f1;
  rcp.approx.ftz.f32 %f4, %f1;
  st.global.f32 [%rd7], %f2;
  st.global.f32 [%rd8], %f3;
  st.global.f32 [%rd9], %f4;
DONE:
  ret;
}
"""


def sfu_inputs(rng, random_count=1 << 16):
    k = np.arange(1 << 23, dtype=np.float64)
    ex2_grid = np.concatenate([-k[::-1] - 1, k]) * 2.0 ** -23      # [-1, 1) on 2^-23
    mant = 1.0 + k * 2.0 ** -23                                     # [1, 2)
    bits = rng.integers(0, 1 << 32, random_count, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    wide = rng.uniform(-140, 140, random_count).astype(np.float32)
    small = (rng.choice([-1.0, 1.0], random_count) * rng.uniform(1, 2, random_count)
             * np.exp2(rng.integers(-40, 1, random_count))).astype(np.float32)
    rand = np.concatenate([x, wide, small])
    return {"ex2_grid": ex2_grid.astype(np.float32), "mant": mant.astype(np.float32),
            "half": (mant / 2).astype(np.float32),
            "random": rand}


def ulp_delta(got, ref64):
    """got (f32) minus ref64 rounded to f32, in steps of the f32 grid away from zero."""
    ref = ref64.astype(np.float32)
    d = got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64)
    return np.where(np.signbit(ref), -d, d)


def sfu_run(backend, x):
    import ptxgen
    k = ptxgen.kernel(SFU_PTX)
    outs = [np.zeros_like(x) for _ in range(3)]
    n = x.size
    k[(n + 255) // 256, 256](x, *outs, np.uint32(n), backend=backend)
    return outs


def sfu_probe(out):
    rng = np.random.default_rng(2026)
    sets = sfu_inputs(rng)
    e, _, _ = sfu_run("gpu", sets["ex2_grid"])
    _, l, r = sfu_run("gpu", sets["mant"])
    _, lh, _ = sfu_run("gpu", sets["half"])
    re, rl, rr = sfu_run("gpu", sets["random"])
    ex2_d = ulp_delta(e, np.exp2(sets["ex2_grid"].astype(np.float64)))
    lg2_d = ulp_delta(l, np.log2(sets["mant"].astype(np.float64)))
    rcp_d = ulp_delta(r, 1.0 / sets["mant"].astype(np.float64))
    for name, d in (("ex2", ex2_d), ("lg2", lg2_d), ("rcp", rcp_d)):
        v, c = np.unique(d, return_counts=True)
        print(name, "ulp deltas:", dict(zip(v.tolist()[:12], c.tolist()[:12])))
    # lg2 of [0.5, 1) = -1 + the unit's fixed-point log of the significand: its low bits show
    lg2h_d = ulp_delta(lh, np.log2(sets["half"].astype(np.float64)))
    for name, d in (("ex2", ex2_d), ("lg2", lg2_d), ("rcp", rcp_d), ("lg2_half", lg2h_d)):
        np.savez_compressed(os.path.join(out, f"sfu_{name}.npz"), delta=d.astype(
            np.int8 if np.abs(d).max() < 128 else np.int32))
    np.savez_compressed(os.path.join(out, "sfu_gpu.npz"), random=sets["random"],
                        random_ex2=re, random_lg2=rl, random_rcp=rr)
    tanh_probe(out, rng)


TANH_PTX = SFU_PTX.replace("sfu(", "sfu_tanh(").replace(
    "  ex2.approx.ftz.f32 %f2, %f1;\n  lg2.approx.ftz.f32 %f3, %f1;\n"
    "  rcp.approx.ftz.f32 %f4, %f1;\n",
    "  tanh.approx.f32 %f2, %f1;\n  mov.f32 %f3, %f2;\n  mov.f32 %f4, %f2;\n")


def tanh_probe(out, rng):
    """tanh.approx.f32 (MUFU.TANH; fast epilogues, soft-capping) on every 8th significand of
    [1, 2), on each binade from 2^-24 to 2^4 at 2^14 points (whether the unit reads only the
    significand's high bits), and on the random inputs: what a table of it needs."""
    import ptxgen
    k = ptxgen.kernel(TANH_PTX)

    def run(x):
        outs = [np.zeros_like(x) for _ in range(3)]
        k[(x.size + 255) // 256, 256](x, *outs, np.uint32(x.size), backend="gpu")
        return outs[0]
    mant = (1.0 + np.arange(0, 1 << 23, 8) * 2.0 ** -23).astype(np.float32)   # files < 4 MB
    hi = (1.0 + np.arange(1 << 14) * 2.0 ** -14)
    binades = np.concatenate([hi * 2.0 ** e for e in range(-24, 5)]).astype(np.float32)
    rand = sfu_inputs(rng)["random"]
    for name, x in (("tanh_mant", mant), ("tanh_binades", binades)):
        d = ulp_delta(run(x), np.tanh(x.astype(np.float64)))
        v, c = np.unique(d, return_counts=True)
        print(name, "ulp deltas from", int(v.min()), "to", int(v.max()), f"({v.size} values)")
        np.savez_compressed(os.path.join(out, f"sfu_{name}.npz"), x=x, delta=d.astype(
            np.int16 if np.abs(d).max() < 2 ** 15 else np.int32))
    np.savez_compressed(os.path.join(out, "sfu_tanh_random.npz"), random=rand,
                        random_tanh=run(rand))


def sfu_check(path):
    d = np.load(path)
    x = d["random"]
    e, l, r = sfu_run("emu", x)
    for name, got, want in (("ex2", e, d["random_ex2"]), ("lg2", l, d["random_lg2"]),
                            ("rcp", r, d["random_rcp"])):
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        print(f"{name}: {same.mean() * 100:.4f} % of {x.size} random inputs bit-equal")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.out_argument(ap)
    ap.add_argument("--fit", nargs="+")
    ap.add_argument("--recheck", nargs="+")
    ap.add_argument("--sfu-out", help="probe the special-function unit, save under this folder")
    ap.add_argument("--sfu-check", help="the emulator against a saved sfu_gpu.npz")
    args = ap.parse_args()
    if args.sfu_out or args.sfu_check:
        if args.sfu_out:
            os.makedirs(args.sfu_out, exist_ok=True)
            sfu_probe(args.sfu_out)
        if args.sfu_check:
            sfu_check(args.sfu_check)
    elif args.fit:
        fit(args.fit)
    elif args.recheck:
        recheck(args.recheck)
    else:
        run(args.out)


if __name__ == "__main__":
    main()
