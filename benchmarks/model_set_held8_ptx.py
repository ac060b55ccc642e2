"""PTX kernels of the eighth held-out group (held8, benchmarks/model_set_held8.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators);
model_set.py loads and launches them as it does held5's (raw addresses, pointer parameters
emitted as plain .u64).
"""
from model_set_held5_ptx import _plain_pointers
from model_set_held6_ptx import _op
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Module, Param, ptr
from ptxgen.ir import types as T

ROUNDS = 8          # quarter_round: ChaCha quarter rounds applied to each 4-word state
QUANT = 300.0       # round_sat: y = clamp(rni(QUANT x), -128, 127)


def quarter_round():
    """Each thread's 16-byte state (a, b, c, d) by ld.global.v4.u32 goes through ROUNDS ChaCha
    quarter rounds (add, xor, rotate left by 16, 12, 8, 7 with shf.l.wrap.b32) and is stored
    back by st.global.v4.u32 to the output; n4 is the number of states."""
    m = Module(target="sm_90")
    k = m.add_kernel("quarter_round", [Param("n4", T.u32),
                                       Param("s", T.u64, ptr(T.u32, align=16)),
                                       Param("o", T.u64, ptr(T.u32, align=16))])
    b = Builder(k)
    n4, s, o = (b.param(p) for p in ("n4", "s", "o"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n4)):
        a, bb, c, d = b.ld("global", T.u32, b.element_addr(s, i, 16, name="sa"), vec=4,
                           name="st")

        def rotl(x, r):
            return _op(b, "shf", ("l", "wrap", "b32"), T.b32, x, x, Imm(r, T.u32))
        for _ in range(ROUNDS):
            a = b.add(a, bb, type=T.u32)
            d = rotl(b.xor(d, a, type=T.b32), 16)
            c = b.add(c, d, type=T.u32)
            bb = rotl(b.xor(bb, c, type=T.b32), 12)
            a = b.add(a, bb, type=T.u32)
            d = rotl(b.xor(d, a, type=T.b32), 8)
            c = b.add(c, d, type=T.u32)
            bb = rotl(b.xor(bb, c, type=T.b32), 7)
        b.st("global", b.element_addr(o, i, 16, name="oa"), (a, bb, c, d), type=T.u32)
    b.ret()
    return _plain_pointers(emit_module(m)), "quarter_round"


def round_sat():
    """y = min(max(cvt.rni.s32.f32(QUANT x), -128), 127): float to int8 range by round to
    nearest even, stored as int32 (one 4-byte load and store per element)."""
    m = Module(target="sm_90")
    k = m.add_kernel("round_sat", [Param("n", T.u32), Param("x", T.u64, ptr(T.f32)),
                                   Param("y", T.u64, ptr(T.s32))])
    b = Builder(k)
    n, x, y = (b.param(p) for p in ("n", "x", "y"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        v = b.ld("global", T.f32, b.element_addr(x, i, 4, name="xa"), name="v")
        q = b.cvt(T.s32, b.mul(v, Imm(QUANT, T.f32)), rounding="rni", name="q")
        q = b.min(b.max(q, Imm(-128, T.s32)), Imm(127, T.s32))
        b.st("global", b.element_addr(y, i, 4, name="ya"), q)
    b.ret()
    return _plain_pointers(emit_module(m)), "round_sat"


def byte_bins():
    """A 4-bin histogram of each thread's 16 bytes kept in registers: one ld.global.v4.u32, each
    byte's top two bits taken by bfe.u32 and counted into four registers by setp/selp/add,
    the four counts stored by one st.global.v4.u32; n4 is the number of 16-byte groups."""
    m = Module(target="sm_90")
    k = m.add_kernel("byte_bins", [Param("n4", T.u32), Param("w", T.u64, ptr(T.u32, align=16)),
                                   Param("o", T.u64, ptr(T.u32, align=16))])
    b = Builder(k)
    n4, w, o = (b.param(p) for p in ("n4", "w", "o"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n4)):
        words = b.ld("global", T.u32, b.element_addr(w, i, 16, name="wa"), vec=4, name="wv")
        counts = [b.const(0, T.u32, name=f"c{j}") for j in range(4)]
        for word in words:
            for byte in range(4):
                top = _op(b, "bfe", ("u32",), T.u32, word, Imm(8 * byte + 6, T.u32),
                          Imm(2, T.u32))
                for j in range(4):
                    hit = b.selp(Imm(1, T.u32), Imm(0, T.u32), b.setp("eq", top, Imm(j, T.u32)),
                                 type=T.u32)
                    counts[j] = b.add(counts[j], hit, type=T.u32)
        b.st("global", b.element_addr(o, i, 16, name="oa"), tuple(counts), type=T.u32)
    b.ret()
    return _plain_pointers(emit_module(m)), "byte_bins"


# family: builder of (PTX text, entry)
KERNELS = {"ptx_quarter_round": quarter_round, "ptx_round_sat": round_sat,
           "ptx_byte_bins": byte_bins}
