"""Per-instruction semantics of the emulator against independent references (Python integers,
exact rationals, numpy's IEEE arithmetic), through small hand-written PTX kernels."""
import math
from fractions import Fraction

import numpy as np
import pytest

from ptxgen.emu import emulate

# overflow to infinity is among the cases checked, not an accident
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
NP = {"u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "b16": np.uint16,
      "u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64, "s64": np.int64,
      "b64": np.uint64, "f16": np.float16, "bf16": np.uint16, "f32": np.float32,
      "f64": np.float64}
SIZE = {t: np.dtype(d).itemsize for t, d in NP.items()}


def _reg_decl(t):
    return {"bf16": "b16", "f16": "b16"}.get(t, t)


def run_op(lines, out_type, *inputs, n=None):
    """Run `lines` (PTX using %a, %b, %c as inputs and %d as the result) once per element.
    inputs: (ptx type, array) pairs. A 'pred' result comes back as 0/1 uint32."""
    names = "abc"[:len(inputs)]
    n = n or len(inputs[0][1])
    params = ", ".join([f".param .u64 p{x}" for x in names] + [".param .u64 pout",
                                                               ".param .u32 n"])
    regs = [".reg .pred %p<2>;", ".reg .b32 %r<8>;", ".reg .b64 %rd<16>;"]
    regs += [f".reg .{_reg_decl(t)} %{x};" for x, (t, _) in zip(names, inputs)]
    regs.append(f".reg .{_reg_decl(out_type)} %d;")
    body = ["mov.u32 %r0, %tid.x;", "mov.u32 %r1, %ctaid.x;", "mov.u32 %r2, %ntid.x;",
            "mad.lo.u32 %r3, %r1, %r2, %r0;", "ld.param.u32 %r4, [n];",
            "setp.ge.u32 %p0, %r3, %r4;", "@%p0 bra $done;"]
    for k, (x, (t, _)) in enumerate(zip(names, inputs)):
        body += [f"ld.param.u64 %rd{k}, [p{x}];", f"mul.wide.u32 %rd{k + 4}, %r3, {SIZE[t]};",
                 f"add.u64 %rd{k + 8}, %rd{k}, %rd{k + 4};",
                 f"ld.global.{'b16' if t in ('f16', 'bf16') else t} %{x}, [%rd{k + 8}];"]
    body += lines if isinstance(lines, list) else [lines]
    osize = 4 if out_type == "pred" else SIZE[out_type]
    body += ["ld.param.u64 %rd12, [pout];", f"mul.wide.u32 %rd13, %r3, {osize};",
             "add.u64 %rd14, %rd12, %rd13;"]
    if out_type == "pred":
        body += ["selp.u32 %r5, 1, 0, %d;", "st.global.u32 [%rd14], %r5;"]
        out = np.zeros(n, np.uint32)
    else:
        st_t = "b16" if out_type in ("f16", "bf16") else out_type
        body += [f"st.global.{st_t} [%rd14], %d;"]
        out = np.zeros(n, NP[out_type])
    body.append("$done:\nret;")
    text = HEAD + f".visible .entry k({params})\n{{\n" + "\n".join(regs + body) + "\n}\n"
    arrays = [np.ascontiguousarray(a, NP[t]) for t, a in inputs]
    emulate(text, "k", -(-n // 128), 128, *arrays, out, np.uint32(n))
    return out


def wrap(v, bits, signed):
    v &= (1 << bits) - 1
    if signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


EDGE32 = [0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 12345, 0x10000, 0xFFFF]


def _ints(rng, bits, n=200):
    edge = [e & ((1 << bits) - 1) for e in EDGE32 + [(1 << bits) - 1, 1 << (bits - 1)]]
    r = [int(x) for x in rng.integers(0, 1 << bits, n - len(edge), dtype=np.uint64)]
    return edge + r


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64", "u16", "s16"])
def test_integer_wraparound(t):
    rng = np.random.default_rng(1)
    bits = SIZE[t] * 8
    signed = t[0] == "s"
    a = [wrap(v, bits, signed) for v in _ints(rng, bits)]
    b = [wrap(v, bits, signed) for v in reversed(_ints(rng, bits))]
    A, B = np.array(a, NP[t]), np.array(b, NP[t])
    for op, f in [("add", lambda x, y: x + y), ("sub", lambda x, y: x - y),
                  ("mul.lo", lambda x, y: x * y)]:
        got = run_op(f"{op}.{t} %d, %a, %b;", t, (t, A), (t, B))
        want = np.array([wrap(f(x, y), bits, signed) for x, y in zip(a, b)], NP[t])
        np.testing.assert_array_equal(got, want, err_msg=f"{op}.{t}")


@pytest.mark.parametrize("t", ["u32", "s32", "u64", "s64"])
def test_mul_hi_wide_and_mad(t):
    rng = np.random.default_rng(2)
    bits = SIZE[t] * 8
    signed = t[0] == "s"
    a = [wrap(v, bits, signed) for v in _ints(rng, bits)]
    b = [wrap(v, bits, signed) for v in _ints(rng, bits)[::-1]]
    c = [wrap(v, bits, signed) for v in _ints(rng, bits)[3:] + [7, 8, 9]]
    A, B, C = (np.array(x, NP[t]) for x in (a, b, c))
    got = run_op(f"mul.hi.{t} %d, %a, %b;", t, (t, A), (t, B))
    want = [wrap((x * y) >> bits, bits, signed) for x, y in zip(a, b)]
    np.testing.assert_array_equal(got, np.array(want, NP[t]))
    got = run_op(f"mad.lo.{t} %d, %a, %b, %c;", t, (t, A), (t, B), (t, C))
    np.testing.assert_array_equal(got, np.array([wrap(x * y + z, bits, signed)
                                                 for x, y, z in zip(a, b, c)], NP[t]))
    got = run_op(f"mad.hi.{t} %d, %a, %b, %c;", t, (t, A), (t, B), (t, C))
    np.testing.assert_array_equal(got, np.array([wrap(((x * y) >> bits) + z, bits, signed)
                                                 for x, y, z in zip(a, b, c)], NP[t]))
    if bits == 32:
        wt = t[0] + "64"
        got = run_op(f"mul.wide.{t} %d, %a, %b;", wt, (t, A), (t, B))
        np.testing.assert_array_equal(got, np.array([x * y for x, y in zip(a, b)], NP[wt]))
        C64 = np.array([wrap(z * 977, 64, signed) for z in c], NP[wt])
        got = run_op(f"mad.wide.{t} %d, %a, %b, %c;", wt, (t, A), (t, B), (wt, C64))
        np.testing.assert_array_equal(got, np.array(
            [wrap(x * y + int(z), 64, signed) for x, y, z in zip(a, b, C64)], NP[wt]))


def test_mul_wide_16():
    a = np.array([0xFFFF, 0x8000, 3, 0x7FFF], np.uint16)
    got = run_op("mul.wide.u16 %d, %a, %b;", "u32", ("u16", a), ("u16", a))
    np.testing.assert_array_equal(got, a.astype(np.uint64) ** 2)
    s = a.view(np.int16)
    got = run_op("mul.wide.s16 %d, %a, %b;", "s32", ("s16", s), ("s16", s))
    np.testing.assert_array_equal(got, s.astype(np.int64) ** 2)


@pytest.mark.parametrize("t", ["b32", "b64", "u32", "s32", "u64", "s64", "b16"])
def test_shifts_clamp_amounts(t):
    bits = SIZE[t] * 8
    vals = [1, 0x80000001, 0xFFFFFFFF, 0x12345678, (1 << bits) - 1, 1 << (bits - 1), 6]
    amts = list(range(0, bits + 9, 3)) + [bits - 1, bits, bits + 1, 0xFFFFFFFF, 0x80000000]
    a = [wrap(v, bits, False) for v in vals for _ in amts]
    s = [x for _ in vals for x in amts]
    A = np.array(a, np.uint64).astype(NP["b" + str(bits)])
    S = np.array(s, np.uint32)
    if t[0] in "bu" or t == "b16":
        got = run_op(f"shl.b{bits} %d, %a, %b;", f"b{bits}", (f"b{bits}", A), ("u32", S))
        want = [(x << min(k, bits)) & ((1 << bits) - 1) for x, k in zip(a, s)]
        np.testing.assert_array_equal(got, np.array(want, np.uint64).astype(got.dtype))
    got = run_op(f"shr.{t} %d, %a, %b;", t, (t, A.view(NP[t])), ("u32", S))
    if t[0] == "s":
        want = [wrap(wrap(x, bits, True) >> min(k, bits), bits, True) for x, k in zip(a, s)]
        np.testing.assert_array_equal(got, np.array(want, NP[t]))
    else:
        want = [x >> min(k, bits) for x, k in zip(a, s)]
        np.testing.assert_array_equal(got, np.array(want, np.uint64).astype(got.dtype))


def test_integer_division_truncates():
    a = np.array([7, -7, 7, -7, 0, -2 ** 31, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 7, 0], np.int32)
    q = run_op("div.s32 %d, %a, %b;", "s32", ("s32", a), ("s32", b))
    r = run_op("rem.s32 %d, %a, %b;", "s32", ("s32", a), ("s32", b))
    np.testing.assert_array_equal(q[:6], [int(x / y) for x, y in zip(a[:6], b[:6])])
    np.testing.assert_array_equal(r[:6], [int(math.fmod(x, y)) for x, y in zip(a[:6], b[:6])])
    u = run_op("div.u32 %d, %a, %b;", "u32", ("u32", a.view(np.uint32)), ("u32", b.view(
        np.uint32)))
    np.testing.assert_array_equal(u[:6], a.view(np.uint32)[:6] // b.view(np.uint32)[:6])


# -- floating point --------------------------------------------------------------------------------
def round_exact(q, fmt, mode="rn"):
    """Exact rational q rounded to float32/float64 by mode: an oracle independent of fp.py."""
    dt = np.float32 if fmt == "f32" else np.float64
    info = np.finfo(dt)
    if q == 0:
        return dt(0)
    big = Fraction(float(info.max))
    ulp_max = Fraction(2) ** (int(info.maxexp) - int(info.nmant) - 1)
    if mode == "rn" and abs(q) >= big + ulp_max / 2:
        return dt(math.copysign(math.inf, q))
    try:
        c = dt(float(q))
    except OverflowError:
        c = dt(math.copysign(math.inf, q))
    cands = {c}
    for _ in range(2):
        cands |= {np.nextafter(x, dt(np.inf)) for x in cands} | \
            {np.nextafter(x, dt(-np.inf)) for x in cands}
    finite = sorted((x for x in cands if np.isfinite(x)), key=float)
    fr = [(Fraction(float(x)), x) for x in finite]
    if mode == "rn":
        best = min(fr, key=lambda t: (abs(t[0] - q), int(np.array(t[1]).view(
            np.uint32 if fmt == "f32" else np.uint64)) & 1))
        return best[1]
    if mode == "rz":
        mode = "rm" if q > 0 else "rp"
    if mode == "rm":
        below = [x for f, x in fr if f <= q]
        return below[-1] if below else dt(-np.inf)
    above = [x for f, x in fr if f >= q]
    return above[0] if above else dt(np.inf)


def _bits(x):
    x = np.asarray(x)
    return x.view({4: np.uint32, 8: np.uint64, 2: np.uint16}[x.dtype.itemsize])


def _fma_cases(rng, dt, n):
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(dt)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(dt)
    c = (rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)).astype(dt)
    # c = -RN(a*b): the result is the product's rounding error, which only a fused op keeps
    c[: n // 4] = -(a[: n // 4] * b[: n // 4])
    return a, b, c


def test_fma_f32_single_rounding():
    rng = np.random.default_rng(3)
    a, b, c = _fma_cases(rng, np.float32, 400)
    # a*b = 1 + 2^-11 + 2^-24 lies on a float32 midpoint; a tiny c decides the rounding, which
    # float64 evaluation followed by rounding to float32 gets wrong (double rounding)
    one = np.float32(1 + 2.0 ** -12)
    a = np.concatenate([a, [one, one, one, -one]]).astype(np.float32)
    b = np.concatenate([b, [one, one, one, one]]).astype(np.float32)
    c = np.concatenate([c, [2.0 ** -80, -2.0 ** -80, 0.0, 2.0 ** -80]]).astype(np.float32)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"fma.{mode}.f32 %d, %a, %b, %c;", "f32", ("f32", a), ("f32", b),
                     ("f32", c))
        want = np.array([round_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(
            float(z)), "f32", mode) for x, y, z in zip(a, b, c)], np.float32)
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=mode)
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    rn = run_op("fma.rn.f32 %d, %a, %b, %c;", "f32", ("f32", a), ("f32", b), ("f32", c))
    assert rn[-4] == np.float32(1 + 2.0 ** -11 + 2.0 ** -23)     # double rounding gives 1+2^-11
    assert naive[-4] == np.float32(1 + 2.0 ** -11)
    assert rn[-3] == np.float32(1 + 2.0 ** -11)
    # mad.rn.f32 is the same fused operation
    mad = run_op("mad.rn.f32 %d, %a, %b, %c;", "f32", ("f32", a), ("f32", b), ("f32", c))
    np.testing.assert_array_equal(_bits(mad), _bits(rn))


def test_fma_f64_single_rounding():
    rng = np.random.default_rng(4)
    a, b, c = _fma_cases(rng, np.float64, 200)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"fma.{mode}.f64 %d, %a, %b, %c;", "f64", ("f64", a), ("f64", b),
                     ("f64", c))
        want = np.array([round_exact(Fraction(x) * Fraction(y) + Fraction(z), "f64", mode)
                         for x, y, z in zip(a, b, c)])
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=mode)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_f32_arithmetic_rounding_modes(op):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(300) * 2.0 ** rng.integers(-30, 30, 300)).astype(np.float32)
    b = (rng.standard_normal(300) * 2.0 ** rng.integers(-30, 30, 300)).astype(np.float32)
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "div": lambda x, y: x / y}[op]
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"{op}.{mode}.f32 %d, %a, %b;", "f32", ("f32", a), ("f32", b))
        want = np.array([round_exact(f(Fraction(float(x)), Fraction(float(y))), "f32", mode)
                         for x, y in zip(a, b)], np.float32)
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{op}.{mode}")
    np.testing.assert_array_equal(run_op(f"{op}.rn.f32 %d, %a, %b;", "f32", ("f32", a),
                                         ("f32", b)), f(a, b))


def test_sqrt_rcp_rounding():
    rng = np.random.default_rng(6)
    a = np.abs(rng.standard_normal(200) * 2.0 ** rng.integers(-30, 30, 200)).astype(np.float32)
    np.testing.assert_array_equal(run_op("sqrt.rn.f32 %d, %a;", "f32", ("f32", a)), np.sqrt(a))
    np.testing.assert_array_equal(run_op("rcp.rn.f32 %d, %a;", "f32", ("f32", a)),
                                  np.float32(1) / a)
    got = run_op("sqrt.rz.f32 %d, %a;", "f32", ("f32", a))
    assert np.all(got.astype(np.float64) ** 2 <= a.astype(np.float64))
    assert np.all(np.nextafter(got, np.float32(np.inf)).astype(np.float64) ** 2 > a)
    approx = run_op("ex2.approx.f32 %d, %a;", "f32", ("f32", np.float32([0, 1, -1, 10])))
    np.testing.assert_allclose(approx, [1, 2, 0.5, 1024], rtol=1e-6)


F32_ROUND_CASES = [2.5, -2.5, 1.5, -0.5, 0.5, 3.7, -3.7, 1e10, -1e10, np.nan, np.inf, -np.inf,
                   2147483520.0, -2147483648.0, 0.0, -0.0]


@pytest.mark.parametrize("mode,fn", [("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor),
                                     ("rpi", np.ceil)])
def test_cvt_float_to_int_rounding_and_saturation(mode, fn):
    a = np.array(F32_ROUND_CASES, np.float32)
    got = run_op(f"cvt.{mode}.s32.f32 %d, %a;", "s32", ("f32", a))
    r = fn(a.astype(np.float64))
    want = np.where(np.isnan(r), 0, np.clip(np.nan_to_num(r, posinf=2 ** 31, neginf=-2 ** 32),
                                            -2 ** 31, 2 ** 31 - 1)).astype(np.int64)
    np.testing.assert_array_equal(got, want)
    got = run_op(f"cvt.{mode}.u8.f32 %d, %a;", "u16", ("f32", a))
    want = np.where(np.isnan(r), 0, np.clip(np.nan_to_num(r, posinf=999, neginf=-9), 0, 255))
    np.testing.assert_array_equal(got, want.astype(np.int64))


def test_cvt_float_to_float_and_int_to_float():
    x = np.array([1 + 2.0 ** -24, 1 + 3 * 2.0 ** -25, -(1 + 2.0 ** -24), 1e39, -1e39, 1e-46,
                  np.nan, 0.1, 16777217.0], np.float64)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"cvt.{mode}.f32.f64 %d, %a;", "f32", ("f64", x))
        want = [round_exact(Fraction(v), "f32", mode) if np.isfinite(v) else np.float32(v)
                for v in x]
        np.testing.assert_array_equal(_bits(got), _bits(np.array(want, np.float32)),
                                      err_msg=mode)
    ints = np.array([16777217, 16777219, -16777217, 2 ** 31 - 1, 3], np.int32)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"cvt.{mode}.f32.s32 %d, %a;", "f32", ("s32", ints))
        want = [round_exact(Fraction(int(v)), "f32", mode) for v in ints]
        np.testing.assert_array_equal(got, np.array(want, np.float32), err_msg=mode)
    big = np.array([2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1, -(2 ** 60) - 3], np.int64)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"cvt.{mode}.f64.s64 %d, %a;", "f64", ("s64", big))
        want = [round_exact(Fraction(int(v)), "f64", mode) for v in big]
        np.testing.assert_array_equal(got, np.array(want), err_msg=mode)


def test_cvt_integer_widths_and_saturation():
    v = np.array([-1, 300, -300, 127, 128, 0x12345678], np.int32)
    np.testing.assert_array_equal(run_op("cvt.u8.s32 %d, %a;", "u16", ("s32", v)),
                                  v.astype(np.uint8).astype(np.uint16))
    np.testing.assert_array_equal(run_op("cvt.s8.s32 %d, %a;", "u16", ("s32", v)),
                                  v.astype(np.int8).astype(np.uint16))
    np.testing.assert_array_equal(run_op("cvt.sat.u8.s32 %d, %a;", "u16", ("s32", v)),
                                  np.clip(v, 0, 255))
    np.testing.assert_array_equal(run_op("cvt.sat.s8.s32 %d, %a;", "u16", ("s32", v)),
                                  np.clip(v, -128, 127).astype(np.int16).view(np.uint16))
    np.testing.assert_array_equal(run_op("cvt.s64.s32 %d, %a;", "s64", ("s32", v)), v)
    np.testing.assert_array_equal(run_op("cvt.u64.u32 %d, %a;", "u64", ("u32", v.view(
        np.uint32))), v.view(np.uint32))


def _bf16_reference(x32):
    """Round-to-nearest-even float32 → bf16 bits, written out bit by bit from the definition."""
    out = []
    for u in np.asarray(x32, np.float32).view(np.uint32):
        u = int(u)
        if (u & 0x7FFFFFFF) > 0x7F800000:
            out.append((u >> 16) | 0x40)
            continue
        hi, lo = u >> 16, u & 0xFFFF
        if lo > 0x8000 or (lo == 0x8000 and hi & 1):
            hi += 1
        out.append(hi)
    return np.array(out, np.uint16)


def test_f16_and_bf16_conversions():
    rng = np.random.default_rng(7)
    x = np.concatenate([(rng.standard_normal(300) * 2.0 ** rng.integers(-26, 18, 300)),
                        [65504, 65520, 65519.99, 1e-8, -0.0, np.inf, np.nan, 1 + 2.0 ** -11,
                         1 + 3 * 2.0 ** -11]]).astype(np.float32)
    h = run_op("cvt.rn.f16.f32 %d, %a;", "f16", ("f32", x))
    np.testing.assert_array_equal(_bits(h), _bits(x.astype(np.float16)))
    back = run_op("cvt.f32.f16 %d, %a;", "f32", ("f16", h))
    np.testing.assert_array_equal(_bits(back), _bits(h.astype(np.float32)))
    rz = run_op("cvt.rz.f16.f32 %d, %a;", "f16", ("f32", x))
    fin = np.isfinite(x)
    assert np.all(np.abs(rz[fin].astype(np.float64)) <= np.abs(x[fin].astype(np.float64)))
    assert rz[list(x).index(np.float32(65520))] == np.float16(65504)
    b = run_op("cvt.rn.bf16.f32 %d, %a;", "bf16", ("f32", x))
    np.testing.assert_array_equal(b, _bf16_reference(x))
    back = run_op("cvt.f32.bf16 %d, %a;", "f32", ("bf16", b))
    np.testing.assert_array_equal(_bits(back), b.astype(np.uint32) << 16)
    # f16 arithmetic rounds once from the exact result
    y = x[:300].astype(np.float16)
    s = run_op("add.rn.f16 %d, %a, %b;", "f16", ("f16", y), ("f16", y[::-1].copy()))
    np.testing.assert_array_equal(_bits(s), _bits((y.astype(np.float64) + y[::-1]).astype(
        np.float16)))


def test_setp_ordered_and_unordered_with_nan():
    nan = np.float32(np.nan)
    a = np.array([1, 2, nan, 1, nan, 3], np.float32)
    b = np.array([2, 2, 1, nan, nan, 1], np.float32)
    isn = np.isnan(a) | np.isnan(b)
    with np.errstate(invalid="ignore"):
        table = {"eq": a == b, "ne": (a != b) & ~isn, "lt": a < b, "le": a <= b, "gt": a > b,
                 "ge": a >= b, "equ": (a == b) | isn, "neu": (a != b) | isn,
                 "ltu": (a < b) | isn, "leu": (a <= b) | isn, "gtu": (a > b) | isn,
                 "geu": (a >= b) | isn, "num": ~isn, "nan": isn}
    for cmp, want in table.items():
        got = run_op(f"setp.{cmp}.f32 %d, %a, %b;", "pred", ("f32", a), ("f32", b))
        np.testing.assert_array_equal(got, want.astype(np.uint32), err_msg=cmp)


def test_setp_integer_signedness_and_pred_logic():
    a = np.array([-1, 1, 5, 0], np.int32)
    b = np.array([1, -1, 5, 0], np.int32)
    np.testing.assert_array_equal(run_op("setp.lt.s32 %d, %a, %b;", "pred", ("s32", a),
                                         ("s32", b)), [1, 0, 0, 0])
    np.testing.assert_array_equal(run_op("setp.lt.u32 %d, %a, %b;", "pred", ("s32", a),
                                         ("s32", b)), [0, 1, 0, 0])
    np.testing.assert_array_equal(run_op("setp.hi.u32 %d, %a, %b;", "pred", ("s32", a),
                                         ("s32", b)), [1, 0, 0, 0])
    lines = ["setp.gt.s32 %p0|%p1, %a, 0;", "setp.eq.s32 %d, %b, 5;",
             "xor.pred %d, %d, %p1;", "not.pred %p1, %d;", "or.pred %d, %p1, %p0;"]
    got = run_op(lines, "pred", ("s32", a), ("s32", b))
    p0 = a > 0
    d = (b == 5) ^ ~p0
    np.testing.assert_array_equal(got, (~d | p0).astype(np.uint32))
    # %p0 is false in every thread that gets here, so !%p0 is true
    got = run_op("setp.lt.and.s32 %d, %a, %b, !%p0;", "pred", ("s32", a), ("s32", b))
    np.testing.assert_array_equal(got, [1, 0, 0, 0])
    got = run_op("setp.lt.or.s32 %d, %a, %b, %p0;", "pred", ("s32", a), ("s32", b))
    np.testing.assert_array_equal(got, [1, 0, 0, 0])


def test_selp_min_max_nan():
    nan = np.float32(np.nan)
    a = np.array([1, nan, nan, -0.0, 3], np.float32)
    b = np.array([2, 5, nan, 1, -3], np.float32)
    mn = run_op("min.f32 %d, %a, %b;", "f32", ("f32", a), ("f32", b))
    np.testing.assert_array_equal(mn[[0, 1, 3, 4]], [1, 5, -0.0, -3])
    assert np.isnan(mn[2])
    mx = run_op("max.NaN.f32 %d, %a, %b;", "f32", ("f32", a), ("f32", b))
    assert np.isnan(mx[1]) and mx[0] == 2
    s = run_op(["setp.gt.f32 %p1, %a, %b;", "selp.f32 %d, %a, %b, %p1;"], "f32", ("f32", a),
               ("f32", b))
    np.testing.assert_array_equal(s[[0, 4]], [2, 3])
    mi = run_op("min.s32 %d, %a, %b;", "s32", ("s32", np.int32([-5, 7])), ("s32", np.int32(
        [3, -9])))
    np.testing.assert_array_equal(mi, [-5, -9])
    mu = run_op("max.u32 %d, %a, %b;", "u32", ("s32", np.int32([-5, 7])), ("s32", np.int32(
        [3, -9])))
    np.testing.assert_array_equal(mu, np.int32([-5, -9]).view(np.uint32))


def test_bit_manipulation():
    rng = np.random.default_rng(8)
    v = np.concatenate([[0, 1, 0xFFFFFFFF, 0x80000000], rng.integers(0, 2 ** 32, 60)]).astype(
        np.uint32)
    np.testing.assert_array_equal(run_op("popc.b32 %d, %a;", "u32", ("u32", v)),
                                  [bin(int(x)).count("1") for x in v])
    np.testing.assert_array_equal(run_op("clz.b32 %d, %a;", "u32", ("u32", v)),
                                  [32 - int(x).bit_length() for x in v])
    np.testing.assert_array_equal(run_op("brev.b32 %d, %a;", "u32", ("u32", v)),
                                  [int(f"{int(x):032b}"[::-1], 2) for x in v])
    pos = (v % 40).astype(np.uint32)
    got = run_op("bfe.u32 %d, %a, %b, 8;", "u32", ("u32", v), ("u32", pos))
    want = [(int(x) >> p) & 0xFF if p < 32 else 0 for x, p in zip(v, pos)]
    np.testing.assert_array_equal(got, want)
    got = run_op("bfe.s32 %d, %a, 4, 8;", "s32", ("s32", v.view(np.int32)))
    want = [wrap(((int(x) >> 4) & 0xFF) | (-256 if (int(x) >> 11) & 1 else 0), 32, True)
            for x in v]
    np.testing.assert_array_equal(got, want)
    got = run_op("prmt.b32 %d, %a, %b, 0x3210;", "u32", ("u32", v), ("u32", v[::-1].copy()))
    np.testing.assert_array_equal(got, v)
    got = run_op("prmt.b32 %d, %a, %b, 0x4567;", "u32", ("u32", v), ("u32", v[::-1].copy()))
    w = v[::-1].copy()
    want = [int.from_bytes(int(y).to_bytes(4, "little")[::-1], "little") for y in w]
    np.testing.assert_array_equal(got, want)
    got = run_op("bfi.b32 %d, %a, %b, 8, 4;", "u32", ("u32", v), ("u32", w))
    want = [(int(y) & ~0xF00) | ((int(x) << 8) & 0xF00) for x, y in zip(v, w)]
    np.testing.assert_array_equal(got, want)
    got = run_op("lop3.b32 %d, %a, %b, %c, 0x96;", "u32", ("u32", v), ("u32", w), ("u32", pos))
    np.testing.assert_array_equal(got, v ^ w ^ pos)


def test_mov_pack_unpack_and_immediates():
    a = np.array([0x11112222, 0xFFFFFFFF], np.uint32)
    b = np.array([0x33334444, 1], np.uint32)
    got = run_op(["mov.b64 %d, {%a, %b};"], "b64", ("u32", a), ("u32", b))
    np.testing.assert_array_equal(got, a.astype(np.uint64) | (b.astype(np.uint64) << 32))
    got = run_op([".reg .b32 %lo, %hi;", "mov.b64 {%lo, %hi}, %a;", "sub.u32 %d, %hi, %lo;"],
                 "u32", ("u64", got))
    np.testing.assert_array_equal(got, b - a)
    got = run_op("mov.b32 %d, 0f3F800000;", "u32", ("u32", a))
    np.testing.assert_array_equal(got, [0x3F800000] * 2)
    got = run_op("and.b64 %d, %a, -9223372036854775808;", "u64", ("u64", np.uint64([2 ** 63 + 5,
                                                                                        5])))
    np.testing.assert_array_equal(got, [2 ** 63, 0])


def test_narrow_loads_and_stores_extend_and_truncate():
    v = np.array([0x80, 0x7F, 0xFF, 0x01], np.uint8)
    got = run_op(["cvt.u32.u8 %d, %a;"], "u32", ("u8", v))
    np.testing.assert_array_equal(got, v)
    got = run_op([".reg .b32 %w;", "ld.global.s8 %w, [%rd8];", "mov.b32 %d, %w;"], "u32",
                 ("u8", v))
    np.testing.assert_array_equal(got, v.view(np.int8).astype(np.int32).view(np.uint32))
    got = run_op([".reg .b16 %h;", "ld.global.u8 %h, [%rd8];", "cvt.u32.u16 %d, %h;"], "u32",
                 ("u8", v))
    np.testing.assert_array_equal(got, v)


def test_packed_half_arithmetic():
    rng = np.random.default_rng(9)
    h = rng.standard_normal((64, 2)).astype(np.float16)
    g = rng.standard_normal((64, 2)).astype(np.float16)
    a, b = h.view(np.uint32).ravel(), g.view(np.uint32).ravel()
    got = run_op("add.rn.f16x2 %d, %a, %b;", "u32", ("u32", a), ("u32", b))
    want = (h.astype(np.float64) + g).astype(np.float16)
    np.testing.assert_array_equal(got.view(np.float16).reshape(64, 2), want)
    got = run_op("fma.rn.f16x2 %d, %a, %b, %a;", "u32", ("u32", a), ("u32", b))
    want = (h.astype(np.float64) * g + h).astype(np.float16)
    np.testing.assert_array_equal(got.view(np.float16).reshape(64, 2), want)
    f = rng.standard_normal(64).astype(np.float32)
    got = run_op("cvt.rn.f16x2.f32 %d, %a, %b;", "u32", ("f32", f), ("f32", f[::-1].copy()))
    pair = got.view(np.float16).reshape(64, 2)
    np.testing.assert_array_equal(pair[:, 1], f.astype(np.float16))      # a: upper half
    np.testing.assert_array_equal(pair[:, 0], f[::-1].astype(np.float16))


def test_float_sign_ops_and_classification():
    x = np.array([1.5, -2.0, 0.0, -0.0, np.inf, np.nan, 1e-40, -3e-39], np.float32)
    np.testing.assert_array_equal(_bits(run_op("neg.f32 %d, %a;", "f32", ("f32", x))),
                                  _bits(x) ^ 0x80000000)
    np.testing.assert_array_equal(_bits(run_op("abs.f32 %d, %a;", "f32", ("f32", x))),
                                  _bits(x) & 0x7FFFFFFF)
    np.testing.assert_array_equal(run_op("testp.subnormal.f32 %d, %a;", "pred", ("f32", x)),
                                  [0, 0, 0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(run_op("testp.finite.f32 %d, %a;", "pred", ("f32", x)),
                                  [1, 1, 1, 1, 0, 0, 1, 1])
    got = run_op("copysign.f32 %d, %a, %b;", "f32", ("f32", x), ("f32", np.full(8, 2,
                                                                                np.float32)))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x))
    ftz = run_op("mul.ftz.f32 %d, %a, 0f3F800000;", "f32", ("f32", x))
    assert ftz[6] == 0 and ftz[7] == 0 and np.signbit(ftz[7])     # flushed keeping the sign
    plain = run_op("mul.f32 %d, %a, 0f3F800000;", "f32", ("f32", x))
    np.testing.assert_array_equal(plain[6:], x[6:])


def test_carry_chain_and_mul24():
    rng = np.random.default_rng(10)
    a = rng.integers(0, 2 ** 64, 50, dtype=np.uint64)
    b = rng.integers(0, 2 ** 64, 50, dtype=np.uint64)
    # 128-bit addition of (a, a) + (b, b) from 32-bit pieces through the carry flag
    lines = [".reg .b32 %a0, %a1, %b0, %b1, %s0, %s1;", "mov.b64 {%a0, %a1}, %a;",
             "mov.b64 {%b0, %b1}, %b;", "add.cc.u32 %s0, %a0, %b0;", "addc.u32 %s1, %a1, %b1;",
             "mov.b64 %d, {%s0, %s1};"]
    got = run_op(lines, "u64", ("u64", a), ("u64", b))
    np.testing.assert_array_equal(got, a + b)
    lines = [".reg .b32 %a0, %a1, %b0, %b1, %s0, %s1;", "mov.b64 {%a0, %a1}, %a;",
             "mov.b64 {%b0, %b1}, %b;", "sub.cc.u32 %s0, %a0, %b0;", "subc.u32 %s1, %a1, %b1;",
             "mov.b64 %d, {%s0, %s1};"]
    np.testing.assert_array_equal(run_op(lines, "u64", ("u64", a), ("u64", b)), a - b)
    x = rng.integers(-2 ** 23, 2 ** 23, 50).astype(np.int32)
    y = rng.integers(-2 ** 23, 2 ** 23, 50).astype(np.int32)
    got = run_op("mul24.lo.s32 %d, %a, %b;", "s32", ("s32", x), ("s32", y))
    np.testing.assert_array_equal(got, (x.astype(np.int64) * y).astype(np.int32))
    got = run_op("mul24.hi.s32 %d, %a, %b;", "s32", ("s32", x), ("s32", y))
    np.testing.assert_array_equal(got, ((x.astype(np.int64) * y) >> 16).astype(np.int32))


def test_fma_f32_subnormal_results():
    rng = np.random.default_rng(11)
    a = (rng.standard_normal(100) * 2.0 ** -70).astype(np.float32)
    b = (rng.standard_normal(100) * 2.0 ** -70).astype(np.float32)
    c = (rng.standard_normal(100) * 2.0 ** -140).astype(np.float32)
    got = run_op("fma.rn.f32 %d, %a, %b, %c;", "f32", ("f32", a), ("f32", b), ("f32", c))
    want = np.array([round_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)),
                                 "f32") for x, y, z in zip(a, b, c)], np.float32)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_nan_payload_literals():
    x = np.zeros(2, np.float32)
    got = run_op("mov.f32 %d, 0f7FC00001;", "f32", ("f32", x))
    np.testing.assert_array_equal(_bits(got), 0x7FC00001)
    got = run_op("add.f32 %d, %a, -0f7F800000;", "f32", ("f32", x))
    assert np.all(np.isneginf(got))


def test_cvt_rna_tf32():
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -11), 1 + 2.0 ** -12,
                  np.inf, 3.0], np.float32)
    got = run_op("cvt.rna.tf32.f32 %d, %a;", "u32", ("f32", x)).view(np.float32)
    # 10 fraction bits kept; a tie (2^-11 past 1.0) rounds away from zero
    np.testing.assert_array_equal(got, np.float32([1 + 2.0 ** -10, 1 + 2.0 ** -9,
                                                   -(1 + 2.0 ** -10), 1, np.inf, 3]))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_exact_zero_sum_sign_under_directed_rounding(t):
    # IEEE 754: x + (-x) is -0 when rounding toward -inf, +0 otherwise; +0 + +0 stays +0
    a = np.array([-0.0, 0.0, 1.5, 0.0, -0.0], NP[t])
    b = np.array([0.0, 0.0, -1.5, -0.0, -0.0], NP[t])
    for mode in ("rn", "rz", "rm", "rp"):
        want = np.signbit(a + b) if mode != "rm" else [True, False, True, True, True]
        got = run_op(f"add.{mode}.{t} %d, %a, %b;", t, (t, a), (t, b))
        np.testing.assert_array_equal(np.signbit(got), want, err_msg=f"add.{mode}")
        got = run_op(f"fma.{mode}.{t} %d, %a, 0f3F800000, %b;" if t == "f32" else
                     f"fma.{mode}.{t} %d, %a, 0d3FF0000000000000, %b;", t, (t, a), (t, b))
        np.testing.assert_array_equal(np.signbit(got), want, err_msg=f"fma.{mode}")
    got = run_op(f"sub.rm.{t} %d, %a, %a;", t, (t, b))
    assert np.all(np.signbit(got))


def test_f64_directed_rounding_outside_the_fast_range():
    # operands whose TwoProduct error terms would overflow or underflow take exact arithmetic
    a = np.array([1e300, -1e300, 3e-300, 1.0000000000000002e200], np.float64)
    two_thirds = 0.6666666666666666
    for mode in ("rz", "rm", "rp", "rn"):
        got = run_op(f"mul.{mode}.f64 %d, %a, 0d3FE5555555555555;", "f64", ("f64", a))
        want = [round_exact(Fraction(float(x)) * Fraction(two_thirds), "f64", mode) for x in a]
        np.testing.assert_array_equal(got, want, err_msg=mode)
        got = run_op(f"fma.{mode}.f64 %d, %a, 0d3FE5555555555555, %a;", "f64", ("f64", a))
        want = [round_exact(Fraction(float(x)) * Fraction(two_thirds) + Fraction(float(x)),
                            "f64", mode) for x in a]
        np.testing.assert_array_equal(got, want, err_msg=mode)


FMA_RUN = HEAD + """.visible .entry run(.param .u64 pa, .param .u64 pout)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;
    .reg .f32 %fa, %fb, %fc, %f<7>;
    ld.param.u64 %rd0, [pa];
    ld.param.u64 %rd1, [pout];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd2, %r0, 16;
    add.u64 %rd3, %rd0, %rd2;
    ld.global.v4.f32 {%fa, %fb, %fc, %f6}, [%rd3];
    fma.rn.f32 %f1, %fa, %fb, %fc;
    fma.rn.f32 %f2, %fb, %fc, %fa;
    fma.rn.f32 %f3, %f1, %fa, %fb;            // reads %f1 of the run: a new run starts
    fma.rn.f32 %f1, %fc, 0f3F800000, %f2;     // writes a register the run read (WAR)
    fma.rn.f32 %f4, %f1, %f1, %fc;
    fma.rn.f32 %f5, %fa, %fa, 0f40000000;
    fma.rn.f32 %f5, %fb, %fb, %fa;            // writes %f5 twice in one run (WAW)
    fma.rn.f32 %fa, %fc, %fc, %fb;            // overwrites an operand of earlier ones
    mul.wide.u32 %rd4, %r0, 32;
    add.u64 %rd5, %rd1, %rd4;
    st.global.v4.f32 [%rd5], {%f1, %f2, %f3, %f4};
    st.global.v4.f32 [%rd5+16], {%f5, %fa, %fb, %fc};
    ret;
}
"""


def test_fused_fma_runs_match_one_at_a_time(monkeypatch):
    from ptxgen.emu import api, floats
    from ptxgen.parse import parse_ptx
    rng = np.random.default_rng(12)
    a = (rng.standard_normal((96, 4)) * 2.0 ** rng.integers(-8, 8, (96, 4))).astype(np.float32)
    m = parse_ptx(FMA_RUN)
    prog = api.compile_kernel(m, "run")
    assert max(op.span for op in prog.code) >= 3          # runs were fused
    fused = np.zeros((96, 8), np.float32)
    emulate(m, "run", 1, 96, a, fused)
    monkeypatch.setattr(floats, "fusable_fma", lambda ins: False)
    single = np.zeros((96, 8), np.float32)
    emulate(parse_ptx(FMA_RUN), "run", 1, 96, a, single)
    np.testing.assert_array_equal(_bits(fused), _bits(single))
    x, y, z = (a[:, i].astype(np.float64) for i in range(3))
    f1 = (x * y + z).astype(np.float32)
    f2 = (y * z + x).astype(np.float32)
    np.testing.assert_array_equal(single[:, 2], (f1.astype(np.float64) * x + y).astype(
        np.float32))
    np.testing.assert_array_equal(single[:, 4], (y * y + x).astype(np.float32))
    np.testing.assert_array_equal(single[:, 5], (z * z + y).astype(np.float32))
    np.testing.assert_array_equal(single[:, 0], (z + f2).astype(np.float32))


def test_mad_carry_chain_with_high_halves():
    # (a1:a0) * b as a 96-bit product from 32-bit pieces; keep its upper 64 bits
    rng = np.random.default_rng(13)
    a = np.concatenate([np.array([2 ** 64 - 1, 2 ** 32 - 1], np.uint64),
                        rng.integers(0, 2 ** 64, 60, dtype=np.uint64)])
    b = np.concatenate([np.array([2 ** 32 - 1, 2 ** 32 - 1], np.uint32),
                        rng.integers(0, 2 ** 32, 60, dtype=np.uint32)])
    lines = [".reg .b32 %a0, %a1, %t, %q1, %q2;", "mov.b64 {%a0, %a1}, %a;",
             "mul.hi.u32 %t, %a0, %b;", "mad.lo.cc.u32 %q1, %a1, %b, %t;",
             "madc.hi.u32 %q2, %a1, %b, 0;", "mov.b64 %d, {%q1, %q2};"]
    got = run_op(lines, "u64", ("u64", a), ("u32", b))
    np.testing.assert_array_equal(got, [(int(x) * int(y)) >> 32 for x, y in zip(a, b)])


def test_f64_zero_products_keep_their_sign_in_every_mode():
    tiny = np.array([5e-324, -5e-324, 1e-310, 0.0], np.float64)     # outside the fast range
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_op(f"mul.{mode}.f64 %d, %a, 0d8000000000000000;", "f64", ("f64", tiny))
        np.testing.assert_array_equal(np.signbit(got), [True, False, True, True], err_msg=mode)
        got = run_op(f"fma.{mode}.f64 %d, %a, 0dBFF0000000000000, %a;", "f64",
                     ("f64", tiny))
        # x*(-1) + x cancels exactly: +0, or -0 rounding toward negative (0*(-1) + 0 alike)
        np.testing.assert_array_equal(np.signbit(got), [mode == "rm"] * 4, err_msg=mode)


def test_f64_sum_overflow_under_directed_rounding():
    big = np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max], np.float64)
    mx = np.finfo(np.float64).max
    want = {"rn": [np.inf, -np.inf], "rz": [mx, -mx], "rm": [mx, -np.inf], "rp": [np.inf, -mx]}
    for mode, w in want.items():
        got = run_op(f"add.{mode}.f64 %d, %a, %a;", "f64", ("f64", big))
        np.testing.assert_array_equal(got, w, err_msg=mode)
    f32max = np.finfo(np.float32).max
    got = run_op("add.rz.f32 %d, %a, %a;", "f32", ("f32", np.float32([f32max, -f32max])))
    np.testing.assert_array_equal(got, [f32max, -f32max])


def test_f64_product_overflow_under_directed_rounding():
    x = np.array([2.0 ** 600, -(2.0 ** 600)], np.float64)
    mx = np.finfo(np.float64).max
    want = {"rn": [np.inf, -np.inf], "rz": [mx, -mx], "rm": [mx, -np.inf], "rp": [np.inf, -mx]}
    for mode, w in want.items():
        np.testing.assert_array_equal(run_op(f"mul.{mode}.f64 %d, %a, 0d5F30000000000000;",
                                             "f64", ("f64", x)), w, err_msg=mode)
        np.testing.assert_array_equal(run_op(f"fma.{mode}.f64 %d, %a, 0d5F30000000000000, %a;",
                                             "f64", ("f64", x)), w, err_msg=mode)


def test_f64_quotient_and_fma_sum_overflow_under_directed_rounding():
    mx = np.finfo(np.float64).max
    x = np.array([mx, -mx], np.float64)
    want = {"rn": [np.inf, -np.inf], "rz": [mx, -mx], "rm": [mx, -np.inf], "rp": [np.inf, -mx]}
    for mode, w in want.items():
        got = run_op(f"div.{mode}.f64 %d, %a, 0d3FE0000000000000;", "f64", ("f64", x))
        np.testing.assert_array_equal(got, w, err_msg=f"div.{mode}")
        got = run_op(f"fma.{mode}.f64 %d, %a, 0d3FF8000000000000, %a;", "f64", ("f64", x))
        np.testing.assert_array_equal(got, w, err_msg=f"fma.{mode}")


def test_mad_wide_immediate_addend_has_the_wide_type():
    v = np.array([3, -3, 0], np.int16)
    got = run_op("mad.wide.s16 %d, %a, 2, -2147483648;", "s32", ("s16", v))
    np.testing.assert_array_equal(got, (v.astype(np.int64) * 2 - 2 ** 31).astype(np.int32))
    u = np.array([3, 65535], np.uint16)
    got = run_op("mad.wide.u16 %d, %a, 2, 4000000000;", "u32", ("u16", u))
    np.testing.assert_array_equal(got, (u.astype(np.int64) * 2 + 4000000000).astype(np.uint32))
