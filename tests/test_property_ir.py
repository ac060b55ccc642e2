"""Property tests over random well-typed IR programs (tests/irgen.py).

(a) every program passes the verifier and ptxas accepts it for sm_80 and sm_90;
(b) ptxgen's CPU emulator computes what the reference interpreter (tests/ref_interp.py) does;
(c) list scheduling for sm_90 never changes a result (on the reference interpreter, and on the
    emulator once it exists);
(d) emitting PTX and parsing it back never changes a result.

The oracle is itself checked first, against numpy's IEEE arithmetic and hand-worked cases.
CI runs a small sample; `python benchmarks/reliability_cpu.py properties` runs >= 10 000
programs.
"""
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irgen
import ref_interp as R
from ptxgen import toolchain
from ptxgen.ir import Instr, Label
from ptxgen.ir import types as T

needs_emulator = pytest.mark.skipif(irgen.emulator() is None,
                                    reason="ptxgen.emu (ptxgen.emulate) is not there yet")

# PTXGEN_PROPERTY_SCALE multiplies the example counts (1 in CI)
SCALE = float(os.environ.get("PTXGEN_PROPERTY_SCALE", "1"))


def examples(n):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


# -- the oracle ---------------------------------------------------------------------------------
def np_bits(x, dtype, utype):
    return int(np.array([x], dtype=dtype).view(utype)[0])


def np_val(bits, dtype, utype):
    return np.array([bits], dtype=utype).view(dtype)[0]


def same_float(a, b, fmt):
    return a == b or (R.decode(a, fmt).kind == "nan" and R.decode(b, fmt).kind == "nan")


FORMATS = [("f16", np.float16, np.uint16, 16), ("f32", np.float32, np.uint32, 32),
           ("f64", np.float64, np.uint64, 64)]


@pytest.mark.parametrize("name,dtype,utype,bits", FORMATS)
@examples(300)
@given(data=st.data())
def test_oracle_add_sub_mul_match_numpy(name, dtype, utype, bits, data):
    x = data.draw(st.integers(0, (1 << bits) - 1))
    y = data.draw(st.integers(0, (1 << bits) - 1))
    fmt = R.FMTS[name]
    a, b = np_val(x, dtype, utype), np_val(y, dtype, utype)
    with np.errstate(all="ignore"):
        for fn, want in ((R.f_add, a + b), (R.f_sub, a - b), (R.f_mul, a * b)):
            got = fn(x, y, fmt, "rn")
            assert same_float(got, np_bits(want, dtype, utype), fmt), (fn.__name__, hex(x), hex(y))


@pytest.mark.parametrize("src,dst", [(np.float64, np.float32), (np.float32, np.float16),
                                     (np.float64, np.float16), (np.float16, np.float32)])
@examples(300)
@given(data=st.data())
def test_oracle_float_conversions_match_numpy(src, dst, data):
    names = {np.float16: ("f16", np.uint16), np.float32: ("f32", np.uint32),
             np.float64: ("f64", np.uint64)}
    (sn, su), (dn, du) = names[src], names[dst]
    x = data.draw(st.integers(0, (1 << (8 * np.dtype(src).itemsize)) - 1))
    with np.errstate(all="ignore"):
        want = np_bits(np_val(x, src, su).astype(dst), dst, du)
    got = R.convert(x, T.TYPES[dn], T.TYPES[sn], "rn")
    assert same_float(got, want, R.FMTS[dn]), hex(x)


@examples(200)
@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_oracle_int_to_float_matches_numpy(v):
    assert R.convert(v & ((1 << 64) - 1), T.f64, T.s64, "rn") == np_bits(np.float64(v),
                                                                         np.float64, np.uint64)
    assert R.convert(v & ((1 << 64) - 1), T.f32, T.s64, "rn") == np_bits(
        np.float32(v), np.float32, np.uint32)


@pytest.mark.parametrize("name", ["f16", "f32", "f64"])
@examples(200)
@given(data=st.data())
def test_oracle_directed_roundings_bracket_the_exact_result(name, data):
    fmt = R.FMTS[name]
    x = data.draw(st.integers(0, (1 << fmt.bits) - 1))
    y = data.draw(st.integers(0, (1 << fmt.bits) - 1))
    z = data.draw(st.integers(0, (1 << fmt.bits) - 1))
    a, b, c = R.decode(x, fmt), R.decode(y, fmt), R.decode(z, fmt)
    if "nan" in (a.kind, b.kind, c.kind) or "inf" in (a.kind, b.kind, c.kind):
        return
    exact = a.value * b.value + c.value
    r = {m: R.decode(R.f_fma(x, y, z, fmt, m), fmt) for m in ("rn", "rz", "rm", "rp")}
    val = {m: (v.value if v.kind == "num" else (-1 if v.sign else 1) * (2 ** 20000))
           for m, v in r.items()}
    assert val["rm"] <= exact <= val["rp"]
    assert abs(val["rz"]) <= abs(exact)
    assert val["rn"] in (val["rm"], val["rp"])
    # one unit apart at most: nothing representable lies strictly between rm and rp
    if val["rm"] != val["rp"]:
        assert R.f_fma(x, y, z, fmt, "rm") != R.f_fma(x, y, z, fmt, "rp")


def test_oracle_hand_worked_cases():
    f32 = R.FMTS["f32"]
    one_ulp = 0x3F800001                      # 1 + 2^-23
    minus = 0xBF800002                        # -(1 + 2^-22)
    # fma rounds once: (1+2^-23)^2 - (1+2^-22) = 2^-46 exactly; mul then add loses it
    assert R.f_fma(one_ulp, one_ulp, minus, f32, "rn") == 0x28800000
    assert R.f_add(R.f_mul(one_ulp, one_ulp, f32, "rn"), minus, f32, "rn") == 0
    # signed zeros: -0 + -0 = -0, x - x = +0 (and -0 when rounding down)
    assert R.f_add(0x80000000, 0x80000000, f32, "rn") == 0x80000000
    assert R.f_sub(0x3F800000, 0x3F800000, f32, "rn") == 0
    assert R.f_sub(0x3F800000, 0x3F800000, f32, "rm") == 0x80000000
    # min/max: NaN loses, -0 < +0
    assert R.f_minmax(0x7FC00000, 0x3F800000, f32, True) == 0x3F800000
    assert R.f_minmax(0x00000000, 0x80000000, f32, True) == 0x80000000
    assert R.f_minmax(0x80000000, 0x00000000, f32, False) == 0x00000000
    # overflow: rn -> inf, rz -> largest finite
    assert R.f_mul(0x7F7FFFFF, 0x40000000, f32, "rn") == 0x7F800000
    assert R.f_mul(0x7F7FFFFF, 0x40000000, f32, "rz") == 0x7F7FFFFF
    assert R.f_mul(0xFF7FFFFF, 0x40000000, f32, "rp") == 0xFF7FFFFF
    # subnormals survive: 2^-149 / 2 rounds to even (0), 3*2^-149 / 2 rounds up to 2*2^-149
    assert R.f_mul(0x00000001, 0x3F000000, f32, "rn") == 0
    assert R.f_mul(0x00000003, 0x3F000000, f32, "rn") == 0x00000002
    # float -> integer saturates, NaN -> 0, rounding modes
    assert R.convert(0x4F800000, T.s32, T.f32, "rzi") == 0x7FFFFFFF          # 2^32
    assert R.convert(0xCF800000, T.u32, T.f32, "rzi") == 0                   # -2^32
    assert R.convert(0x7FC00000, T.s32, T.f32, "rzi") == 0
    assert R.convert(0xBFC00000, T.s32, T.f32, "rni") == 0xFFFFFFFE          # -1.5 -> -2
    assert R.convert(0x40200000, T.s32, T.f32, "rni") == 2                   # 2.5 -> 2
    assert R.convert(0xBF800001, T.s32, T.f32, "rmi") == 0xFFFFFFFE          # -1.0000001
    assert R.convert(0x3F800001, T.u16, T.f32, "rpi") == 2
    # bf16: round to nearest even on the dropped 16 bits
    assert R.convert(0x3F808000, T.bf16, T.f32, "rn") == 0x3F80
    assert R.convert(0x3F818000, T.bf16, T.f32, "rn") == 0x3F82
    assert R.convert(0x3F80, T.f32, T.bf16, None) == 0x3F800000
    # integers: extension, chopping
    assert R.convert(0xFFFF, T.s64, T.s16, None) == (1 << 64) - 1
    assert R.convert(0xFFFF, T.u64, T.u16, None) == 0xFFFF
    assert R.convert(0x12345678, T.u16, T.u32, None) == 0x5678


def run_one(build, grid=1, block=1, args=None):
    """Build a one-thread kernel with `build(b, out_addr)` and return the output slab bytes."""
    from ptxgen.ir import Builder, Module, Param, ptr
    m = Module()
    k = m.add_kernel("k", [Param("out", T.u64, ptr(T.b8, align=16))])
    b = Builder(k)
    out = b.param("out")
    build(b, out)
    b.ret()
    res = R.run_kernel(k, grid, block, {"out": bytes(64), **(args or {})})
    return res["out"]


def test_oracle_integer_instructions():
    from ptxgen.ir import Addr, Imm

    def build(b, out):
        m1 = b.const(-1, T.s32)
        seven = b.const(7, T.s32)
        b.st("global", Addr(out, 0), b.mul(m1, seven, mode="hi", type=T.s32))    # -1
        b.st("global", Addr(out, 4), b.mul(m1, seven, mode="hi", type=T.u32))    # 6
        b.st("global", Addr(out, 8), b.shr(m1, Imm(40, T.u32), type=T.s32))     # -1 (clamped)
        b.st("global", Addr(out, 12), b.shl(seven, Imm(33, T.u32), type=T.s32))  # 0
        b.st("global", Addr(out, 16), b.mul(m1, seven, mode="wide", type=T.s32))  # -7 (s64)
        b.st("global", Addr(out, 24), b.mad(m1, seven, b.const(3, T.u32), mode="hi",
                                             type=T.u32))                           # 6 + 3
        b.st("global", Addr(out, 28), b.min(m1, seven, type=T.u32))              # 7
        b.st("global", Addr(out, 32), b.max(m1, seven, type=T.s32))              # 7
        b.st("global", Addr(out, 36), b.shr(m1, Imm(4, T.u32), type=T.u32))      # 0x0FFFFFFF

    got = run_one(build)
    want = struct.pack("<iIiiqIIiI", -1, 6, -1, 0, -7, 9, 7, 7, 0x0FFFFFFF)
    assert got[:len(want)] == want


def test_oracle_barrier_exchange_and_divergence_checks():
    """bar.sync makes a shared-memory exchange well defined; a barrier only some threads reach
    is reported."""
    from ptxgen.ir import Addr, Builder, Module, Param, ptr
    m = Module()
    k = m.add_kernel("k", [Param("out", T.u64, ptr(T.b8, align=16))])
    b = Builder(k)
    out = b.param("out")
    tid = b.special("tid.x")
    sh = b.shared("sh", T.u32, 4)
    base = b.address_of(sh)
    b.st("shared", Addr(b.mad(tid, 4, base, type=T.u32)), b.mul(tid, 10, type=T.u32))
    b.bar_sync()
    partner = b.and_(b.add(tid, 1, type=T.u32), 3, type=T.u32)
    v = b.ld("shared", T.u32, Addr(b.mad(partner, 4, base, type=T.u32)))
    b.st("global", b.element_addr(out, tid, 4), v)
    b.ret()
    res = R.run_kernel(k, 1, 4, {"out": bytes(16)})
    assert struct.unpack("<4I", res["out"]) == (10, 20, 30, 0)

    k2 = m.add_kernel("k2", [Param("out", T.u64, ptr(T.b8, align=16))])
    b = Builder(k2)
    tid = b.special("tid.x")
    with b.if_(b.setp("eq", tid, 0)):
        b.bar_sync()
    b.ret()
    with pytest.raises(R.RefError, match="bar.sync"):
        R.run_kernel(k2, 1, 2, {"out": bytes(16)})


# -- the properties -----------------------------------------------------------------------------
@pytest.mark.needs_ptxas
@examples(8)
@given(st.lists(irgen.programs(), min_size=3, max_size=6))
def test_programs_verify_and_assemble(cases):
    irgen.check_assembles(cases)


@examples(60)
@given(irgen.programs())
def test_scheduling_preserves_results_reference(case):
    irgen.check_schedule(case)


@examples(60)
@given(irgen.programs())
def test_emit_parse_round_trip_preserves_results(case):
    irgen.check_round_trip(case)


@needs_emulator
@examples(60)
@given(irgen.programs(), st.booleans())
def test_emulator_matches_reference(case, via_text):
    irgen.check_emulator(case, via_text=via_text)


@needs_emulator
@examples(30)
@given(irgen.programs())
def test_scheduling_preserves_results_emulator(case):
    irgen.check_schedule(case, run=lambda c, k: irgen.run_emulator(c, k))


# -- the properties can fail --------------------------------------------------------------------
def swap_last_dependent_pair(kernel):
    """A wrong 'schedule': the last instruction that reads its predecessor's result moves above
    it (inside one straight-line stretch), so it sees a stale or undefined value."""
    import dataclasses
    body = list(kernel.body)
    for i in range(len(body) - 2, -1, -1):
        a, b = body[i], body[i + 1]
        if (isinstance(a, Instr) and isinstance(b, Instr)
                and not (a.is_terminator or b.is_terminator or a.is_barrier or b.is_barrier)
                and set(a.defs()) & set(b.uses())):
            body[i], body[i + 1] = b, a
            return dataclasses.replace(kernel, body=body)
    return kernel


def test_schedule_property_detects_a_broken_scheduler():
    from hypothesis import find

    def detected(case):
        try:
            irgen.check_schedule(case, schedule=swap_last_dependent_pair)
        except AssertionError:
            return True
        return False

    find(irgen.programs(max_stmts=12), detected,
         settings=settings(max_examples=100, database=None, deadline=None,
                           suppress_health_check=list(HealthCheck)))


def test_output_comparison_detects_one_flipped_bit_and_ignores_nan_payloads():
    from hypothesis import find
    case = find(irgen.programs(max_stmts=8), lambda c: any(n == 1 for _, n in c.slot_types.values())
                and c.slot_types, settings=settings(database=None, max_examples=200))
    ref = case.run_reference()
    slot = next(s for s, (_, n) in case.slot_types.items() if n == 1)
    bad = bytearray(ref["out"])
    bad[slot * irgen.SLOT] ^= 1
    assert case.outputs_equal(ref, {**ref, "out": bytes(bad)}) is not None
    case.slot_types[slot] = (T.f32, 1)
    a, b = bytearray(ref["out"]), bytearray(ref["out"])
    a[slot * 8:slot * 8 + 4] = (0x7FC00000).to_bytes(4, "little")
    b[slot * 8:slot * 8 + 4] = (0x7FFFFFFF).to_bytes(4, "little")
    assert case.outputs_equal({**ref, "out": bytes(a)}, {**ref, "out": bytes(b)}) is None
    b[slot * 8:slot * 8 + 4] = (0x7F800000).to_bytes(4, "little")             # inf is no NaN
    assert case.outputs_equal({**ref, "out": bytes(a)}, {**ref, "out": bytes(b)}) is not None


def test_generated_programs_cover_the_instruction_set():
    """The generator reaches every opcode, type and construct the brief asks for (checked over a
    fixed sample, so a generator change that drops one is noticed)."""
    from hypothesis import given as _given
    seen_ops, seen_types, labels = set(), set(), 0
    cases = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @_given(irgen.programs())
    def collect(case):
        cases.append(case)
    collect()
    for c in cases:
        for s in c.kernel.body:
            if isinstance(s, Instr):
                seen_ops.add(".".join((s.opcode,) + tuple(m for m in s.mods if m in (
                    "lo", "hi", "wide", "global", "shared", "sync"))))
                seen_types.update(t.name for t in s.types)
            elif isinstance(s, Label):
                labels += 1
    for op in ("add", "sub", "mul.lo", "mul.hi", "mul.wide", "mad.lo", "mad.hi", "mad.wide",
               "shl", "shr", "and", "or", "xor", "min", "max", "fma", "setp", "selp", "cvt",
               "mov", "ld.global", "st.global", "ld.shared", "st.shared", "bar.sync", "bra"):
        assert op in seen_ops, op
    for t in ("pred", "b16", "b32", "b64", "u32", "s32", "u64", "s64", "f16", "bf16", "f32",
              "f64"):
        assert t in seen_types, t
    assert labels > 0


# -- regressions: bugs the properties found -------------------------------------------------------
def _one_kernel(build, target="sm_80"):
    from ptxgen.ir import Builder, Module, Param, ptr
    m = Module(target=target)
    k = m.add_kernel("k", [Param("x", T.u64, ptr(T.b8, align=16))])
    b = Builder(k)
    build(b, b.param("x"))
    b.ret()
    return m


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("arch", irgen.ARCHS)
def test_cvt_from_bf16_picks_a_ptx_version_that_has_it(arch):
    """cvt.f32.bf16 needs PTX ISA 7.1; for sm_80 the emitter used to pick 7.0 and ptxas
    refused the module."""
    from ptxgen import emit_module

    def build(b, x):
        bf = b.cvt(T.bf16, b.ld("global", T.f32, x))
        b.st("global", x, b.cvt(T.f32, bf))
    m = _one_kernel(build)
    toolchain.assemble(emit_module(m, arch), arch)


@pytest.mark.needs_ptxas
def test_mov_of_16_bit_float_registers_assembles():
    """Builder.mov of an f16/bf16 register printed mov.f16 / mov.bf16, which PTX lacks."""
    from ptxgen import emit_module
    from ptxgen.ir import Imm

    def build(b, x):
        h = b.reg(T.f16)
        b.mov(Imm(0x3C00, T.b16), type=T.b16, out=h)
        hb = b.cvt(T.bf16, b.ld("global", T.f32, x))
        b.st("global", x, b.mov(h), type=T.b16)
        b.st("global", x, b.mov(hb), type=T.b16)
    m = _one_kernel(build)
    text = emit_module(m, "sm_80")
    assert "mov.f16" not in text and "mov.bf16" not in text
    toolchain.assemble(text, "sm_80")


# Emulator disagreements the properties found (fixed in ptxgen/emu since); each snippet leaves
# its result in %rd9, which is stored; the reference interpreter says what it must be.
EMU_REGRESSIONS = {
    # an exact zero sum of opposite signs is -0 under .rm (IEEE 754 section 6.3)
    "add_rm_zero": ("add.rm.f32 %f2, %f0, %f1;", "mov.b32 %r9, %f2;"),
    "sub_rm_zero": ("sub.rm.f32 %f2, %f1, %f1;", "mov.b32 %r9, %f2;"),
    "fma_rm_zero": ("fma.rm.f32 %f2, %f0, %f1, %f1;", "mov.b32 %r9, %f2;"),
    # min/max order -0.0 below +0.0
    "min_signed_zeros": ("min.f32 %f2, %f0, %f1;", "mov.b32 %r9, %f2;"),
    "min_signed_zeros_swapped": ("min.f32 %f2, %f1, %f0;", "mov.b32 %r9, %f2;"),
    "max_signed_zeros": ("max.f32 %f2, %f0, %f1;", "mov.b32 %r9, %f2;"),
    "max_signed_zeros_swapped": ("max.f32 %f2, %f1, %f0;", "mov.b32 %r9, %f2;"),
    # mad.wide's addend immediate has the wide type
    "mad_wide_s16_imm": ("mov.u16 %rs0, 0;", "mad.wide.s16 %r9, %rs0, 3, 2147483647;"),
}


# Found by the nightly run: an f64 product below the smallest subnormal rounded to zero under .rp
# instead of to 2^-1074 (a = 4.384326716431338e-211, a*a ~ 1.9e-421); also through fma.
EMU_REGRESSIONS["mul_rp_f64_underflow"] = (
    "mov.b64 %rd1, 0d14427321142B21F0;", "mov.b64 %fd1, %rd1;", "mul.rp.f64 %fd2, %fd1, %fd1;",
    "mov.b64 %rd2, %fd2;", "cvt.u32.u64 %r9, %rd2;")
EMU_REGRESSIONS["fma_rp_f64_underflow"] = (
    "mov.b64 %rd1, 0d14427321142B21F0;", "mov.b64 %fd1, %rd1;", "mov.b64 %fd3, 0d0000000000000000;",
    "fma.rp.f64 %fd2, %fd1, %fd1, %fd3;", "mov.b64 %rd2, %fd2;", "cvt.u32.u64 %r9, %rd2;")


@needs_emulator
@pytest.mark.parametrize("name", sorted(EMU_REGRESSIONS))
def test_emulator_regressions_agree_with_reference(name):
    from ptxgen.parse import parse_ptx
    lines = "\n\t".join(EMU_REGRESSIONS[name])
    text = f""".version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 .ptr .global .align 8 out, .param .f32 a, .param .f32 b)
{{
\t.reg .b16 %rs<2>;
\t.reg .b32 %r<10>;
\t.reg .b64 %rd<10>;
\t.reg .f32 %f<4>;
\t.reg .f64 %fd<4>;
\tld.param.u64 %rd0, [out];
\tld.param.f32 %f0, [a];
\tld.param.f32 %f1, [b];
\tmov.u32 %r9, 0;
\t{lines}
\tst.global.u32 [%rd0], %r9;
\tret;
}}
"""
    kernel = parse_ptx(text).kernels[0]
    args = {"out": bytes(8), "a": -0.0, "b": 0.0}
    case = irgen.Case(parse_ptx(text), kernel, 1, 1, args)
    want = case.run_reference()
    got = irgen.run_emulator(case)
    assert got["out"] == want["out"], (name, want["out"].hex(), got["out"].hex())
