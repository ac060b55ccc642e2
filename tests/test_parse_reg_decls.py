"""Every spelling of a register declaration the PTX ISA allows (section 5.1 'Register state
space' and 5.4 'Variables': type and vector modifiers separated or joined, lists, parameterized
names, nested scopes), parsed to the same registers, and the one the issue found dropped:
'.reg.b16 i,r,t;' as cuda_fp16.h's inline asm writes it."""
import numpy as np
import pytest

from ptxgen.emu import emulate
from ptxgen.errors import ParseError
from ptxgen.ir import types as T
from ptxgen.parse import parse_ptx

HEAD = ".version 7.8\n.target sm_90\n.address_size 64\n"


def _kernel(decls, body="ret;"):
    text = HEAD + ".visible .entry k()\n{\n" + decls + "\n" + body + "\n}\n"
    return parse_ptx(text, "decl.ptx").kernel("k")


def _declared(k):
    regs = {r.name: r.type for r in k.regs}
    for s in k.body:
        regs.update({r.name: r.type for r in getattr(s, "regs", ())})
    return regs


@pytest.mark.parametrize("decl,want", [
    (".reg .b32 %r;", {"%r": T.b32}),
    (".reg .b32 %a, %b;", {"%a": T.b32, "%b": T.b32}),
    (".reg .b16 a,b;", {"a": T.b16, "b": T.b16}),
    (".reg.b16 a,b;", {"a": T.b16, "b": T.b16}),
    (".reg.b16 i,r,t;", {"i": T.b16, "r": T.b16, "t": T.b16}),
    (".reg .f32 %f<3>;", {"%f0": T.f32, "%f1": T.f32, "%f2": T.f32}),
    (".reg.f32 %f<2>;", {"%f0": T.f32, "%f1": T.f32}),
    (".reg .u64 %rd<2>, %x;", {"%rd0": T.u64, "%rd1": T.u64, "%x": T.u64}),
    (".reg .pred %p, %q;", {"%p": T.pred, "%q": T.pred}),
    (".reg.pred p;", {"p": T.pred}),
    (".reg .f16x2 %h;", {"%h": T.TYPES["f16x2"]}),
    (".reg .v4 .f32 %v;", {"%v": T.f32}),
    (".reg .v2.b64 %w;", {"%w": T.b64}),
    (".reg.v4.f32 %v;", {"%v": T.f32}),
    (".reg\t.s32\t%s ,\n %t ;", {"%s": T.s32, "%t": T.s32}),
])
def test_declaration_spellings(decl, want):
    got = _declared(_kernel(decl))
    assert {n: got.get(n) for n in want} == want


def test_nested_scope_declarations_without_space():
    k = _kernel(".reg .b32 %r<2>;", "{\n.reg.b16 lo,hi;\nmov.b32 {lo,hi}, %r0;\n"
                "mov.b32 %r1, {hi,lo};\n}\nret;")
    assert _declared(k)["lo"] == T.b16


@pytest.mark.parametrize("decl,message", [
    (".reg .q32 %r;", "decl.ptx:6:6: unknown register type .q32"),
    (".reg.q32 %r;", "decl.ptx:6:1: unknown register type .q32"),
    (".reg %r;", "decl.ptx:6:6: expected a register type, found '%r'"),
    (".reg.b32 %r", "decl.ptx:7:1: expected ',' or ';' in a register declaration, found 'ret'"),
])
def test_bad_declarations_are_one_line_errors(decl, message):
    with pytest.raises(ParseError) as e:
        _kernel(decl)
    assert str(e.value) == message


def test_fp16_inline_asm_block_runs():
    """The shape of cuda_fp16.h's __hadd inline asm (registers declared '.reg.b16'), which the
    emulator used to fail with 'destination r is not a register'."""
    text = HEAD + """.visible .entry k(.param .u64 p)
{
  .reg .b16 %rs<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  ld.global.b16 %rs1, [%rd1];
  { .reg.b16 i,r,t;
    mov.b16 i, %rs1;
    mov.b16 t, 0x3C00;
    add.rn.f16 r, i, t;
    mov.b16 %rs2, r; }
  st.global.b16 [%rd1+2], %rs2;
  ret;
}
"""
    a = np.array([1.5, 0], np.float16)
    emulate(text, "k", 1, 1, a.view(np.uint16))
    assert a[1] == np.float16(2.5)
