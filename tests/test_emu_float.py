"""Floating-point semantics of the emulator against exact rational references (an oracle
independent of ptxgen.emu.fp) and numpy's IEEE arithmetic: single rounding of fma, directed
roundings, conversions, f16/bf16, NaN comparisons, signed zeros and overflow."""
import math
from fractions import Fraction

import numpy as np
import pytest

from ptxgen.emu import emulate
from test_emu_semantics import HEAD, NP, run_op

# overflow to infinity is among the cases checked, not an accident
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


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


@pytest.mark.parametrize("t", ["f32", "f64", "f16"])
def test_min_max_order_negative_zero_below_positive_zero(t):
    a = np.array([-0.0, 0.0, -0.0, 0.0, 1.0], NP[t])
    b = np.array([0.0, -0.0, -0.0, 0.0, -0.0], NP[t])
    lo = run_op(f"min.{t} %d, %a, %b;", t, (t, a), (t, b))
    hi = run_op(f"max.{t} %d, %a, %b;", t, (t, a), (t, b))
    np.testing.assert_array_equal(np.signbit(lo), [True, True, True, False, True])
    np.testing.assert_array_equal(np.signbit(hi), [False, False, True, False, False])


@pytest.mark.parametrize("t, reg, snan", [("f16", "b16", 0xFCE6), ("f32", "b32", 0xFF800001),
                                          ("f64", "b64", 0x7FF0000000000001)])
def test_min_max_a_signalling_nan_loses_to_a_number(t, reg, snan):
    """min/max without .NaN return the number when one input is NaN, a signalling NaN too. The
    interpreter once returned the quieted NaN for min.f16 of an sNaN and a register set by
    `mov.b16 %h1, 0` (numpy's fmin against a broadcast scalar gives NaN for a signalling NaN);
    the random-program test between the two compilers found it."""
    bits = {"b16": np.uint16, "b32": np.uint32, "b64": np.uint64}[reg]
    size = np.dtype(bits).itemsize
    text = HEAD + f""".visible .entry k(.param .u64 inp, .param .u64 out)
{{
    .reg .{reg} %h<6>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [inp];
    ld.param.u64 %rd1, [out];
    ld.global.{reg} %h0, [%rd0];
    mov.{reg} %h1, 0;
    min.{t} %h2, %h0, %h1;
    max.{t} %h3, %h0, %h1;
    min.{t} %h4, %h1, %h0;
    max.{t} %h5, %h1, %h0;
    st.global.{reg} [%rd1], %h2;
    st.global.{reg} [%rd1+{size}], %h3;
    st.global.{reg} [%rd1+{2 * size}], %h4;
    st.global.{reg} [%rd1+{3 * size}], %h5;
    ret;
}}
"""
    for engine in ("interp", "native"):
        out = np.full(4, 7, bits)
        emulate(text, "k", 1, 1, np.array([snan], bits), out, engine=engine)
        assert (out == 0).all(), (engine, [hex(x) for x in out])
