"""Per-instruction semantics of the emulator against independent references (Python integers
and the PTX ISA's definitions), through small hand-written PTX kernels: integer arithmetic,
shifts, bit fields, predicates, moves, carries. `run_op` is shared with test_emu_float.py."""
import math

import numpy as np
import pytest

from ptxgen.emu import emulate

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


def test_mad_wide_immediate_addend_has_the_wide_type():
    v = np.array([3, -3, 0], np.int16)
    got = run_op("mad.wide.s16 %d, %a, 2, -2147483648;", "s32", ("s16", v))
    np.testing.assert_array_equal(got, (v.astype(np.int64) * 2 - 2 ** 31).astype(np.int32))
    u = np.array([3, 65535], np.uint16)
    got = run_op("mad.wide.u16 %d, %a, 2, 4000000000;", "u32", ("u16", u))
    np.testing.assert_array_equal(got, (u.astype(np.int64) * 2 + 4000000000).astype(np.uint32))


def test_funnel_shifts():
    rng = np.random.default_rng(14)
    lo = rng.integers(0, 2 ** 32, 80, dtype=np.uint32)
    hi = rng.integers(0, 2 ** 32, 80, dtype=np.uint32)
    n = np.arange(80, dtype=np.uint32) % 70
    both = [(int(h) << 32) | int(lw) for h, lw in zip(hi, lo)]
    for mode in ("wrap", "clamp"):
        k = [min(int(x), 32) if mode == "clamp" else int(x) % 32 for x in n]
        got = run_op(f"shf.l.{mode}.b32 %d, %a, %b, %c;", "u32", ("u32", lo), ("u32", hi),
                     ("u32", n))
        np.testing.assert_array_equal(got, [((v << s) >> 32) & 0xFFFFFFFF
                                            for v, s in zip(both, k)], err_msg=mode)
        got = run_op(f"shf.r.{mode}.b32 %d, %a, %b, %c;", "u32", ("u32", lo), ("u32", hi),
                     ("u32", n))
        np.testing.assert_array_equal(got, [(v >> s) & 0xFFFFFFFF for v, s in zip(both, k)],
                                      err_msg=mode)


def test_dot_products_of_bytes():
    rng = np.random.default_rng(15)
    a = rng.integers(0, 2 ** 32, 60, dtype=np.uint32)
    b = rng.integers(0, 2 ** 32, 60, dtype=np.uint32)
    c = rng.integers(-2 ** 20, 2 ** 20, 60).astype(np.int32)

    def lanes(x, size, signed):
        v = [(int(x) >> (8 * size * k)) & ((1 << 8 * size) - 1) for k in range(4 // size)]
        return [wrap(e, 8 * size, signed) for e in v]
    got = run_op("dp4a.s32.u32 %d, %a, %b, %c;", "s32", ("u32", a), ("u32", b), ("s32", c))
    want = [wrap(int(z) + sum(p * q for p, q in zip(lanes(x, 1, True), lanes(y, 1, False))),
                 32, True) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(got, want)
    got = run_op("dp2a.hi.u32.s32 %d, %a, %b, %c;", "s32", ("u32", a), ("u32", b), ("s32", c))
    want = [wrap(int(z) + sum(p * q for p, q in zip(lanes(x, 2, False),
                                                    lanes(y, 1, True)[2:])), 32, True)
            for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(got, want)
