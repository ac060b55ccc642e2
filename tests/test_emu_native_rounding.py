"""The native engine's exact roundings (emu.native_rounding) against the interpreter, bit for
bit, on operands chosen where they are hard: fma.rn.f16 (products and sums near ties), f64 → f16
conversions in every rounding (ties, f16 subnormals, overflow, NaN, infinities), f64 add, sub,
mul and div with directed rounding (subnormal and overflowing results, zeros, infinities), and
64-bit integers to f32/f64/f16 with directed rounding."""
from fractions import Fraction

import numpy as np
import pytest

from ptxgen.emu import emulate
from ptxgen.parse import parse_ptx

N = 4096
SEED = np.random.SeedSequence().entropy

KERNEL = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{{
    .reg .b32 %r<3>;
    .reg .b64 %rd<12>;
    .reg .{t} %a, %b, %c;
    .reg .{d} %o;
    mov.u32 %r0, %ctaid.x;
    mov.u32 %r1, %ntid.x;
    mov.u32 %r2, %tid.x;
    mad.lo.u32 %r0, %r0, %r1, %r2;
    ld.param.u64 %rd0, [pa];
    ld.param.u64 %rd1, [pb];
    ld.param.u64 %rd2, [pc];
    ld.param.u64 %rd3, [pd];
    mul.wide.u32 %rd4, %r0, {ts};
    add.u64 %rd5, %rd0, %rd4;
    add.u64 %rd6, %rd1, %rd4;
    add.u64 %rd7, %rd2, %rd4;
    ld.global.{t} %a, [%rd5];
    ld.global.{t} %b, [%rd6];
    ld.global.{t} %c, [%rd7];
    {body}
    mul.wide.u32 %rd8, %r0, {ds};
    add.u64 %rd9, %rd3, %rd8;
    st.global.{d} [%rd9], %o;
    ret;
}}
"""


def _run(t, d, body, a, b, c, out_dtype):
    ts, ds = np.dtype(a.dtype).itemsize, np.dtype(out_dtype).itemsize
    m = parse_ptx(KERNEL.format(t=t, d=d, ts=ts, ds=ds, body=body))
    outs = []
    for engine in ("interp", "native"):
        out = np.zeros(len(a), out_dtype)
        r = emulate(m, "k", len(a) // 128, 128, a, b, c, out, check="off", engine=engine)
        assert r.engine == engine
        outs.append(out)
    # NaN equals NaN (payloads are not compared, as in the property tests)
    differ = outs[0].view(f"u{ds}") != outs[1].view(f"u{ds}")
    if d.startswith("f") or d == "b16":
        fl = [o.view(np.float16) if d == "b16" else o for o in outs]
        differ &= ~(np.isnan(fl[0]) & np.isnan(fl[1]))
    bad = np.flatnonzero(differ)
    assert bad.size == 0, (f"{body}: native differs at {bad[:5]}: operands "
                           f"{a[bad[:3]]} {b[bad[:3]]} {c[bad[:3]]}: interpreter "
                           f"{outs[0][bad[:3]]}, native {outs[1][bad[:3]]} (seed {SEED})")


def _f64_hard(rng, n, scale_exp):
    """f64 values: random magnitudes around 2**scale_exp with low bits chosen to sit near
    rounding boundaries, plus zeros, infinities, NaN, subnormals and the extremes."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                        1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0])
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-scale_exp, scale_exp, n)
    bits = x.view(np.uint64)
    # half of them: clear or set the low bits, so they lie on or next to a narrower format's
    # tie or representable value
    lowmask = np.uint64((1 << 29) - 1)
    pick = rng.integers(0, 4, n)
    bits = np.where(pick == 0, bits & ~lowmask, bits)
    bits = np.where(pick == 1, (bits & ~lowmask) | np.uint64(1 << 28), bits)
    bits = np.where(pick == 2, (bits & ~lowmask) | np.uint64(1 << 28) | np.uint64(1), bits)
    x = bits.view(np.float64)
    x[: len(special)] = special
    return x


@pytest.mark.parametrize("rnd", ["rn", "rz", "rm", "rp"])
def test_cvt_f16_from_f64(rnd):
    rng = np.random.default_rng([SEED, 1])
    a = _f64_hard(rng, N, 26)
    a[N // 2:] = np.clip(a[N // 2:], -65504.0, 65504.0)
    _run("f64", "f16", f"cvt.{rnd}.f16.f64 %o, %a;", a, a, a, np.float16)


def test_fma_rn_f16():
    rng = np.random.default_rng([SEED, 2])
    bits = rng.integers(0, 1 << 16, (3, N), dtype=np.uint16)
    a, b, c = (x.view(np.float16) for x in bits)
    # products and sums that tie or nearly tie: small integers and halves
    k = N // 4
    a[:k] = rng.integers(-64, 64, k) + rng.choice([0.0, 0.5, 0.25], k)
    b[:k] = rng.integers(-64, 64, k) + rng.choice([0.0, 0.5, 0.125], k)
    c[:k] = np.float16(2048.0) * rng.choice([-1, 1], k) + rng.choice([0, 1, 0.5], k)
    _run("b16", "b16", "fma.rn.f16 %o, %a, %b, %c;", a.view(np.uint16), b.view(np.uint16),
         c.view(np.uint16), np.uint16)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("rnd", ["rz", "rm", "rp"])
def test_f64_directed_arithmetic(op, rnd):
    rng = np.random.default_rng([SEED, 3, "add sub mul div".split().index(op)])
    a, b = _f64_hard(rng, N, 1000), _f64_hard(rng, N, 1000)[::-1].copy()
    # sums that cancel, products and quotients in the subnormal range or overflowing
    k = N // 8
    b[k:2 * k] = -a[k:2 * k] * (1 + 2.0 ** -rng.integers(1, 60, k))
    a[2 * k:3 * k] = rng.standard_normal(k) * 2.0 ** -540
    b[2 * k:3 * k] = rng.standard_normal(k) * 2.0 ** (-500 if op == "mul" else 540)
    a[3 * k:4 * k] = rng.standard_normal(k) * 2.0 ** 520
    b[3 * k:4 * k] = rng.standard_normal(k) * 2.0 ** (510 if op == "mul" else -510)
    _run("f64", "f64", f"{op}.{rnd}.f64 %o, %a, %b;", a, b, a, np.float64)


@pytest.mark.parametrize("src", ["s64", "u64", "s32"])
@pytest.mark.parametrize("dst,rnd", [("f32", "rz"), ("f32", "rm"), ("f32", "rp"),
                                     ("f64", "rz"), ("f64", "rp"), ("f16", "rn"),
                                     ("f16", "rm")])
def test_integer_to_float_directed(src, dst, rnd):
    rng = np.random.default_rng([SEED, 4])
    dtype = {"s64": np.int64, "u64": np.uint64, "s32": np.int32}[src]
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    x[: N // 4] >>= rng.integers(0, 8 * x.itemsize - 1, N // 4).astype(dtype)
    x[:4] = [info.min, info.max, 0, 1]
    if dst == "f16":
        x = np.clip(x, -65504, 65504).astype(dtype)
    out = {"f32": np.float32, "f64": np.float64, "f16": np.float16}[dst]
    _run(src, dst, f"cvt.{rnd}.{dst}.{src} %o, %a;", x, x, x, out)


def _rounded(q, mode):
    """The exact rational q rounded to f64 toward zero / -inf / +inf."""
    r = float(q)                                    # to nearest
    if Fraction(r) == q:
        return r
    down = (q > 0) if mode == "rz" else (mode == "rm")
    if down and Fraction(r) > q:
        return float(np.nextafter(r, -np.inf))
    if not down and Fraction(r) < q:
        return float(np.nextafter(r, np.inf))
    return r


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_f64_division_near_the_largest_double_is_exact(mode):
    # q * b overflowed in the interpreter's error term when |a| was near the largest double
    rng = np.random.default_rng([SEED, 5])
    a = np.float64(np.finfo(np.float64).max) * rng.uniform(0.5, 1, 128) * rng.choice([-1, 1], 128)
    b = rng.uniform(1, 2, 128) * 2.0 ** rng.integers(0, 900, 128) * rng.choice([-1, 1], 128)
    m = parse_ptx(KERNEL.format(t="f64", d="f64", ts=8, ds=8, body=f"div.{mode}.f64 %o, %a, %b;"))
    want = [_rounded(Fraction(float(x)) / Fraction(float(y)), mode) for x, y in zip(a, b)]
    for engine in ("interp", "native"):
        out = np.zeros(128)
        emulate(m, "k", 1, 128, a, b, a, out, check="off", engine=engine)
        assert out.tolist() == want, (engine, SEED)
