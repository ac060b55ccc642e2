"""The special-function unit's ex2 / lg2 / rcp (.approx.ftz.f32) on the GPU, for the emulator's
tables (emu/sfu.py).

    python benchmarks/sfu_numerics.py --out DIR        # on a GPU: probe, save DIR/sfu_gpu.npz
    python benchmarks/sfu_numerics.py --check FILE     # anywhere: the emulator against FILE

The probe runs one PTX kernel that applies ex2.approx.ftz.f32, lg2.approx.ftz.f32 and
rcp.approx.ftz.f32 to each input: every f32 of [-1, 1) on the 2^-23 grid (ex2's fraction
table), every significand of [1, 2) (lg2's and rcp's), and random inputs of every exponent
(the held-out check of how the tables extend). Tables are saved as the difference in units of
the last place from the correctly rounded result.
"""
import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PTX = """.version 8.0
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


def inputs(rng, random_count=1 << 16):
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


def run(backend, x):
    import ptxgen
    k = ptxgen.kernel(PTX)
    outs = [np.zeros_like(x) for _ in range(3)]
    n = x.size
    k[(n + 255) // 256, 256](x, *outs, np.uint32(n), backend=backend)
    return outs


def probe(out):
    rng = np.random.default_rng(2026)
    sets = inputs(rng)
    e, _, _ = run("gpu", sets["ex2_grid"])
    _, l, r = run("gpu", sets["mant"])
    _, lh, _ = run("gpu", sets["half"])
    re, rl, rr = run("gpu", sets["random"])
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


def check(path):
    d = np.load(path)
    x = d["random"]
    e, l, r = run("emu", x)
    for name, got, want in (("ex2", e, d["random_ex2"]), ("lg2", l, d["random_lg2"]),
                            ("rcp", r, d["random_rcp"])):
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        print(f"{name}: {same.mean() * 100:.4f} % of {x.size} random inputs bit-equal")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--check")
    a = ap.parse_args()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        probe(a.out)
    if a.check:
        check(a.check)
