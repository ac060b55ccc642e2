"""PTX kernels of the sixth held-out group (held6, benchmarks/model_set_held6.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators);
model_set.py loads and launches them as it does held5's (raw addresses, pointer parameters
emitted as plain .u64).
"""
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T


def cvt_roundtrip():
    """y = f32(f16(x)) + f32(bf16(x)) + f32(bf16(f32(f16(x)))) on 4 floats per thread (16-byte
    vector load and store): five conversions per element; n4 is the number of float4s."""
    m = Module(target="sm_90")
    k = m.add_kernel("cvt_roundtrip", [Param("n4", T.u32),
                                       Param("x", T.u64, ptr(T.f32, align=16)),
                                       Param("y", T.u64, ptr(T.f32, align=16))])
    b = Builder(k)
    n4, x, y = (b.param(p) for p in ("n4", "x", "y"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n4)):
        xv = b.ld("global", T.f32, b.element_addr(x, i, 16, name="xa"), vec=4, name="xv")
        out = []
        for v in xv:
            a = b.cvt(T.f32, b.cvt(T.f16, v))
            c = b.cvt(T.f32, b.cvt(T.bf16, v))
            e = b.cvt(T.f32, b.cvt(T.bf16, a))
            out.append(b.add(b.add(a, c), e))
        b.st("global", b.element_addr(y, i, 16, name="ya"), tuple(out), type=T.f32)
    b.ret()
    return _plain_pointers(emit_module(m)), "cvt_roundtrip"


def _op(b, opcode, mods, t, *srcs):
    """opcode.mods d, srcs... into a new register of type t (prmt, bfe, bfi: no Builder
    method of their own)."""
    d = b.reg(t, "bx")
    b.emit(Instr(opcode, mods, (d,) + srcs))
    return d


def prmt_bits():
    """Byte and bit-field shuffling of 32-bit words: r = bswap(w) by prmt 0x0123, e = bits
    5..15 of r (bfe), z = r with e's low 7 bits inserted at bit 13 (bfi), out = z ^ (w with its
    16-bit halves swapped: prmt 0x1032)."""
    m = Module(target="sm_90")
    k = m.add_kernel("prmt_bits", [Param("n", T.u32), Param("w", T.u64, ptr(T.b32)),
                                   Param("o", T.u64, ptr(T.b32))])
    b = Builder(k)
    n, w, o = (b.param(p) for p in ("n", "w", "o"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        v = b.ld("global", T.b32, b.element_addr(w, i, 4), name="v")
        r = _op(b, "prmt", ("b32",), T.b32, v, Imm(0, T.b32), Imm(0x0123, T.b32))
        e = _op(b, "bfe", ("u32",), T.u32, r, Imm(5, T.u32), Imm(11, T.u32))
        z = _op(b, "bfi", ("b32",), T.b32, e, r, Imm(13, T.u32), Imm(7, T.u32))
        sw = _op(b, "prmt", ("b32",), T.b32, v, v, Imm(0x1032, T.b32))
        b.st("global", b.element_addr(o, i, 4), b.xor(z, sw))
    b.ret()
    return _plain_pointers(emit_module(m)), "prmt_bits"


def red_scatter():
    """index_add: out[idx[i]] += val[i] by red.global.add.f32 (no result, colliding indices
    serialise at the L2's atomic units)."""
    m = Module(target="sm_90")
    k = m.add_kernel("red_scatter", [Param("n", T.u32), Param("idx", T.u64, ptr(T.s32)),
                                     Param("val", T.u64, ptr(T.f32)),
                                     Param("out", T.u64, ptr(T.f32))])
    b = Builder(k)
    n, idx, val, out = (b.param(p) for p in ("n", "idx", "val", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        j = b.ld("global", T.s32, b.element_addr(idx, i, 4), name="j")
        v = b.ld("global", T.f32, b.element_addr(val, i, 4), name="v")
        b.red("global", "add", b.element_addr(out, j, 4, name="oa"), v)
    b.ret()
    return _plain_pointers(emit_module(m)), "red_scatter"


# family: builder of (PTX text, entry)
KERNELS = {"ptx_cvt_roundtrip": cvt_roundtrip, "ptx_prmt_bits": prmt_bits,
           "ptx_red_scatter": red_scatter}
