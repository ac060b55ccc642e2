"""PTX families of the model benchmark set: the kernels (text written by hand, HAND_WRITTEN,
and kernels built with ptxgen's Builder the way a user of the library writes a kernel, not
ptxgen's tuned operators, BUILT) and per family its sizes, its launch and its check as one
record (model_common.family).

model_set.py loads the text through cuda.core and launches it with raw addresses: Builder
pointer parameters are emitted as plain .u64 (what a PTX writer declares; the body still
converts them with cvta.to.global). A setup takes the array interface `g` and the case and
gives (args in the kernel's parameter order, grid, block, check, {argument index: init});
scalars are numpy scalars of the parameter's type.
"""
import re

import numpy as np

from model_common import cast, double, int_out, registry, rel, wrong
from ptxgen import emit_module
from ptxgen.ir import Addr, Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T


HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
COPY_V4 = HEAD + """.visible .entry copy_v4(.param .u64 src, .param .u64 dst, .param .u32 n4)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  ld.param.u32 %r1, [n4];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.u32 %rd5, %r5, 16;
  add.s64 %rd6, %rd3, %rd5;
  add.s64 %rd7, %rd4, %rd5;
  ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd6];
  st.global.v4.f32 [%rd7], {%f0, %f1, %f2, %f3};
DONE:
  ret;
}
"""
FMA_CHAIN = HEAD + """.visible .entry fma_chain(.param .u64 out, .param .u32 iters)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<20>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  cvt.rn.f32.u32 %f0, %r5;
  mov.f32 %f9, 0f3F800100;
  mov.f32 %f10, 0f3C23D70A;
  add.f32 %f1, %f0, 0f3F800000;
  add.f32 %f2, %f0, 0f40000000;
  add.f32 %f3, %f0, 0f40400000;
  add.f32 %f4, %f0, 0f40800000;
  add.f32 %f5, %f0, 0f40A00000;
  add.f32 %f6, %f0, 0f40C00000;
  add.f32 %f7, %f0, 0f40E00000;
  add.f32 %f8, %f0, 0f41000000;
  mov.u32 %r6, 0;
LOOP:
  fma.rn.f32 %f1, %f1, %f9, %f10;
  fma.rn.f32 %f2, %f2, %f9, %f10;
  fma.rn.f32 %f3, %f3, %f9, %f10;
  fma.rn.f32 %f4, %f4, %f9, %f10;
  fma.rn.f32 %f5, %f5, %f9, %f10;
  fma.rn.f32 %f6, %f6, %f9, %f10;
  fma.rn.f32 %f7, %f7, %f9, %f10;
  fma.rn.f32 %f8, %f8, %f9, %f10;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p1, %r6, %r1;
  @%p1 bra LOOP;
  add.f32 %f11, %f1, %f2;
  add.f32 %f12, %f3, %f4;
  add.f32 %f13, %f5, %f6;
  add.f32 %f14, %f7, %f8;
  add.f32 %f15, %f11, %f12;
  add.f32 %f16, %f13, %f14;
  add.f32 %f17, %f15, %f16;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.f32 [%rd2], %f17;
  ret;
}
"""


# lane l reads word (l * stride + k) mod 1024 of a 4 KB shared array, four loads per trip
SMEM_STRIDE = HEAD + """.visible .entry smem_stride(.param .u64 out, .param .u32 iters,
                                  .param .u32 stride)
{
  .reg .pred %p<2>;
  .reg .b32 %r<24>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<4>;
  .shared .align 16 .b8 buf[4096];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  ld.param.u32 %r2, [stride];
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, buf;
  and.b32 %r5, %r3, 1023;
  cvt.rn.f32.u32 %f0, %r3;
  shl.b32 %r6, %r5, 2;
  add.s32 %r6, %r4, %r6;
  st.shared.f32 [%r6], %f0;
  bar.sync 0;
  and.b32 %r7, %r3, 31;
  mul.lo.s32 %r8, %r7, %r2;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.u32 %r9, 0;
LOOP:
  add.s32 %r10, %r8, %r9;
  and.b32 %r11, %r10, 1023;
  shl.b32 %r11, %r11, 2;
  add.s32 %r11, %r4, %r11;
  ld.shared.f32 %f3, [%r11];
  add.s32 %r12, %r10, 1;
  and.b32 %r12, %r12, 1023;
  shl.b32 %r12, %r12, 2;
  add.s32 %r12, %r4, %r12;
  ld.shared.f32 %f4, [%r12];
  add.s32 %r13, %r10, 2;
  and.b32 %r13, %r13, 1023;
  shl.b32 %r13, %r13, 2;
  add.s32 %r13, %r4, %r13;
  ld.shared.f32 %f5, [%r13];
  add.s32 %r14, %r10, 3;
  and.b32 %r14, %r14, 1023;
  shl.b32 %r14, %r14, 2;
  add.s32 %r14, %r4, %r14;
  ld.shared.f32 %f6, [%r14];
  add.f32 %f1, %f1, %f3;
  add.f32 %f2, %f2, %f4;
  add.f32 %f1, %f1, %f5;
  add.f32 %f2, %f2, %f6;
  add.s32 %r9, %r9, 4;
  setp.lt.u32 %p1, %r9, %r1;
  @%p1 bra LOOP;
  add.f32 %f7, %f1, %f2;
  mov.u32 %r15, %ctaid.x;
  mov.u32 %r16, %ntid.x;
  mad.lo.s32 %r17, %r15, %r16, %r3;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r17, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.f32 [%rd2], %f7;
  ret;
}
"""


# every thread adds 1 to word (i & mask) of ptr: mask 0 is one address for the whole grid
ATOMIC_ADD = HEAD + """.visible .entry atomic_add(.param .u64 ptr, .param .u32 n, .param .u32 mask)
{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [ptr];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [mask];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r6, %r1;
  @%p1 bra DONE;
  and.b32 %r7, %r6, %r2;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r7, 4;
  add.s64 %rd4, %rd2, %rd3;
  red.global.add.u32 [%rd4], 1;
DONE:
  ret;
}
"""
EMPTY = HEAD + """.visible .entry empty()
{
  ret;
}
"""


def store_lanes_ptx(k, b=4):
    """Thread i writes the k b-byte words of out[k*i : k*i + k], each by its own scalar
    `st.global.u32` (what Triton writes when it cannot prove 16-byte alignment, and Numba for a
    row per thread): k = 1 whole sectors; k = 4 two lanes per sector, four stores fill it;
    k = 16 one lane per sector, eight stores fill it; k = 8 one lane and 4 bytes per sector and
    store, lanes 32 bytes apart; k = 2 16 bytes per sector and store; k = 32 one lane per
    128-byte line and store; b = 2 (`st.global.u16`, as Triton's float16 stores without a proof
    of alignment) with k = 8 two lanes and 4 bytes, k = 16 one lane and 2 bytes per sector and
    store. How L2 and DRAM take partial-sector stores that later stores of the same warp
    complete."""
    src = "%r6" if b == 4 else "%h1"
    stores = "\n".join(f"  st.global.u{8 * b} [%rd4+{b * j}], {src};" for j in range(k))
    name = f"store_lanes{k}" + ("" if b == 4 else f"_u{8 * b}")
    half = "" if b == 4 else "  .reg .b16 %h1;\n"
    narrow = "" if b == 4 else "  cvt.u16.u32 %h1, %r6;\n"
    return HEAD + f""".visible .entry {name}(.param .u64 out, .param .u32 n)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
{half}  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r6, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r6, %r1;
  @%p1 bra DONE;
{narrow}  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r6, {b * k};
  add.s64 %rd4, %rd2, %rd3;
{stores}
DONE:
  ret;
}}
"""


def gather_hash_ptx(k=8):
    """Thread i sums k floats of `table` at hashed places (h <- h * 0x9E3779B1 + 0x7F4A7C15,
    index (h >> 7) & mask): lone 4-byte loads spread over the table, whose addresses follow from
    the thread index alone (the simulator knows them). With a 4 MiB table every load is one
    sector of L2: what scattered L2 loads cost against streaming ones (pointer chasing's and
    gathers' misses)."""
    body = "\n".join("""  mad.lo.u32 %r5, %r5, -1640531535, 2135587861;
  shr.u32 %r6, %r5, 7;
  and.b32 %r6, %r6, %r2;
  mul.wide.u32 %rd3, %r6, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f2, %f1;""" for _ in range(k))
    return HEAD + f""".visible .entry gather_hash(.param .u64 table, .param .u64 out,
                                   .param .u32 n, .param .u32 mask)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [table];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [mask];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r7, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r7, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r5, %r7;
  mov.f32 %f2, 0f00000000;
{body}
  mul.wide.u32 %rd5, %r7, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.f32 [%rd6], %f2;
DONE:
  ret;
}}
"""


def gather_hash_ref(table, n, mask, k=8):
    """gather_hash's sums on the host (numpy arrays), for the check."""
    import numpy as np
    h = np.arange(n, dtype=np.uint32)
    s = np.zeros(n, dtype=np.float64)
    for _ in range(k):
        h = h * np.uint32(0x9E3779B1) + np.uint32(0x7F4A7C15)
        s += table[(h >> np.uint32(7)) & np.uint32(mask)]
    return s


# name: (PTX text, entry)
HAND_WRITTEN = {
    **{f"store_lanes{k}": (store_lanes_ptx(k), f"store_lanes{k}") for k in (1, 2, 4, 8, 16, 32)},
    **{f"store_lanes{k}_u16": (store_lanes_ptx(k, 2), f"store_lanes{k}_u16") for k in (8, 16)},
    "copy_v4": (COPY_V4, "copy_v4"),
    "gather_hash": (gather_hash_ptx(), "gather_hash"),
    "fma_chain": (FMA_CHAIN, "fma_chain"),
    "smem_stride": (SMEM_STRIDE, "smem_stride"),
    "atomic_add": (ATOMIC_ADD, "atomic_add"),
    "empty": (EMPTY, "empty"),
}


def hfma2_axpy():
    """z = a x + y on half-precision vectors, 8 halves per thread: 16-byte vector loads and
    stores, four packed fma.rn.f16x2 (a is passed as one f16x2 word holding a twice); n8 is
    the number of 8-half groups."""
    m = Module(target="sm_90")
    k = m.add_kernel("hfma2_axpy", [Param("n8", T.u32), Param("a2", T.b32),
                                    Param("x", T.u64, ptr(T.b32, align=16)),
                                    Param("y", T.u64, ptr(T.b32, align=16)),
                                    Param("z", T.u64, ptr(T.b32, align=16))])
    b = Builder(k)
    n8, a2, x, y, z = (b.param(p) for p in ("n8", "a2", "x", "y", "z"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n8)):
        xa = b.element_addr(x, i, 16, name="xa")
        ya = b.element_addr(y, i, 16, name="ya")
        xv = b.ld("global", T.b32, xa, vec=4, name="xv")
        yv = b.ld("global", T.b32, ya, vec=4, name="yv")
        out = []
        for xw, yw in zip(xv, yv):
            d = b.reg(T.TYPES["f16x2"], "h")
            b.emit(Instr("fma", ("rn", "f16x2"), (d, a2, xw, yw)))
            out.append(d)
        b.st("global", b.element_addr(z, i, 16, name="za"), tuple(out), type=T.b32)
    b.ret()
    return plain_pointers(emit_module(m)), "hfma2_axpy"


def divmod_roll():
    """out = numpy.roll of a (d, h, w) float array by (-dz, -dy, -dx): each thread splits its
    linear index into z, y, x by 32-bit division and remainder by extents known only at run
    time (no powers of two), wraps the shifted coordinates with rem and gathers."""
    m = Module(target="sm_90")
    names = ("d", "h", "w", "dz", "dy", "dx")
    k = m.add_kernel("divmod_roll", [Param(n, T.u32) for n in names]
                     + [Param("src", T.u64, ptr(T.f32)), Param("dst", T.u64, ptr(T.f32))])
    b = Builder(k)
    d, h, w, dz, dy, dx = (b.param(n) for n in names)
    src, dst = b.param("src"), b.param("dst")
    hw = b.mul(h, w, name="hw")
    total = b.mul(d, hw, name="total")
    i = b.global_index()
    with b.if_(b.setp("lt", i, total)):
        z = b.div(i, hw, name="z")
        r = rem(b, i, hw)
        yy = b.div(r, w, name="y")
        xx = rem(b, r, w)
        sz = rem(b, b.add(z, dz), d)
        sy = rem(b, b.add(yy, dy), h)
        sx = rem(b, b.add(xx, dx), w)
        s = b.mad(b.mad(sz, h, sy), w, sx, name="s")
        v = b.ld("global", T.f32, b.element_addr(src, s, 4), name="v")
        b.st("global", b.element_addr(dst, i, 4), v)
    b.ret()
    return plain_pointers(emit_module(m)), "divmod_roll"


def plain_pointers(ptx):
    return re.sub(r" \.ptr \.global \.align \d+", "", ptx)


def rem(b, x, y):
    out = b.reg(T.u32, "rm")
    b.emit(Instr("rem", ("u32",), (out, x, y)))
    return out


def dp4a_dot():
    """out[r] = the int8 dot product of vector r with one query: vectors of 4*kw bytes stored
    interleaved (word k of vector r at db[k * rows + r], so a warp's loads are coalesced), four
    byte products per dp4a, the query words the same for every lane."""
    m = Module(target="sm_90")
    k = m.add_kernel("dp4a_dot", [Param("rows", T.u32), Param("kw", T.u32),
                                  Param("db", T.u64, ptr(T.s32)), Param("q", T.u64, ptr(T.s32)),
                                  Param("out", T.u64, ptr(T.s32))])
    b = Builder(k)
    rows, kw, db, q, out = (b.param(p) for p in ("rows", "kw", "db", "q", "out"))
    r = b.global_index()
    with b.if_(b.setp("lt", r, rows)):
        acc = b.const(0, T.s32, name="acc")
        with b.for_range(0, kw, type=T.u32, name="k") as i:
            a = b.ld("global", T.s32, b.element_addr(db, b.mad(i, rows, r), 4), name="a")
            w = b.ld("global", T.s32, b.element_addr(q, i, 4), name="w")
            b.emit(Instr("dp4a", ("s32", "s32"), (acc, a, w, acc)))
        b.st("global", b.element_addr(out, r, 4), acc)
    b.ret()
    return plain_pointers(emit_module(m)), "dp4a_dot"


def xorshift_uniform():
    """`per` uniform floats in [0, 1) per thread from a xorshift32 stream seeded by the thread's
    index (x ^= x << 13, x >> 17, x << 5; the top 24 bits scaled by 2^-24), number j of every
    thread stored together (out[j * threads + gid]: coalesced)."""
    m = Module(target="sm_90")
    k = m.add_kernel("xorshift_uniform", [Param("per", T.u32), Param("out", T.u64, ptr(T.f32))])
    b = Builder(k)
    per, out = b.param("per"), b.param("out")
    gid = b.global_index()
    threads = b.mul(b.special("nctaid.x"), b.special("ntid.x"), mode="lo", name="threads")
    x = b.mad(gid, 0x9E3779B9, 0x6A09E667, name="x")
    with b.for_range(0, per, type=T.u32, name="j") as j:
        b.xor(x, b.shl(x, 13, type=T.b32), out=x, type=T.b32)
        b.xor(x, b.shr(x, 17, type=T.b32), out=x, type=T.b32)
        b.xor(x, b.shl(x, 5, type=T.b32), out=x, type=T.b32)
        u = b.cvt(T.f32, b.shr(x, 8, type=T.u32), rounding="rn", name="u")
        b.st("global", b.element_addr(out, b.mad(j, threads, gid), 4),
             b.mul(u, 1.0 / (1 << 24), type=T.f32))
    b.ret()
    return plain_pointers(emit_module(m)), "xorshift_uniform"


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
    return plain_pointers(emit_module(m)), "cvt_roundtrip"


def op(b, opcode, mods, t, *srcs):
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
        r = op(b, "prmt", ("b32",), T.b32, v, Imm(0, T.b32), Imm(0x0123, T.b32))
        e = op(b, "bfe", ("u32",), T.u32, r, Imm(5, T.u32), Imm(11, T.u32))
        z = op(b, "bfi", ("b32",), T.b32, e, r, Imm(13, T.u32), Imm(7, T.u32))
        sw = op(b, "prmt", ("b32",), T.b32, v, v, Imm(0x1032, T.b32))
        b.st("global", b.element_addr(o, i, 4), b.xor(z, sw))
    b.ret()
    return plain_pointers(emit_module(m)), "prmt_bits"


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
    return plain_pointers(emit_module(m)), "red_scatter"


# splitmix64's constants (Steele, Lea, Flood 2014): the golden-ratio step and two multipliers
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix64():
    """out[i] = splitmix64(seed + (i + 1) GOLDEN), then xor-folded with its 128-bit product's
    high half: z ^ mul.hi(z, GOLDEN). The index goes 64-bit by mul.wide.u32; three 64-bit
    multiplies (mul.lo / mul.hi .u64) per element, an 8-byte store."""
    m = Module(target="sm_90")
    k = m.add_kernel("splitmix64", [Param("n", T.u32), Param("seed", T.u64),
                                    Param("out", T.u64, ptr(T.u64))])
    b = Builder(k)
    n, seed, out = (b.param(p) for p in ("n", "seed", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        i1 = b.add(i, 1, name="i1")
        step = b.mul(i1, 1, mode="wide", type=T.u32, name="i64")      # u32 -> u64
        z = b.mad(step, Imm(GOLDEN, T.u64), seed, type=T.u64, name="z")
        for sh, mul in ((30, MIX1), (27, MIX2)):
            z = b.mul(b.xor(z, b.shr(z, Imm(sh, T.u32), type=T.u64)), Imm(mul, T.u64),
                      type=T.u64)
        z = b.xor(z, b.shr(z, Imm(31, T.u32), type=T.u64))
        hi = b.mul(z, Imm(GOLDEN, T.u64), mode="hi", type=T.u64, name="hi")
        b.st("global", b.element_addr(out, i, 8), b.xor(z, hi))
    b.ret()
    return plain_pointers(emit_module(m)), "splitmix64"


def tanh_ex2():
    """y = tanh.approx(x) + ex2.approx(x) on 4 floats per thread (16-byte vector load and
    store): two SFU approximations per element; n4 is the number of float4s."""
    m = Module(target="sm_90")
    k = m.add_kernel("tanh_ex2", [Param("n4", T.u32),
                                  Param("x", T.u64, ptr(T.f32, align=16)),
                                  Param("y", T.u64, ptr(T.f32, align=16))])
    b = Builder(k)
    n4, x, y = (b.param(p) for p in ("n4", "x", "y"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n4)):
        xv = b.ld("global", T.f32, b.element_addr(x, i, 16, name="xa"), vec=4, name="xv")
        out = [b.add(b.unary("tanh", v, mods=("approx",)),
                     b.unary("ex2", v, mods=("approx", "ftz"))) for v in xv]
        b.st("global", b.element_addr(y, i, 16, name="ya"), tuple(out), type=T.f32)
    b.ret()
    return plain_pointers(emit_module(m)), "tanh_ex2"


def axpy_v2f64():
    """z = a x + y in float64, two doubles per thread: x through the read-only path
    (ld.global.nc.v2.f64), y by ld.global.v2.f64, one fma.rn.f64 each, st.global.v2.f64;
    n2 is the number of pairs."""
    m = Module(target="sm_90")
    k = m.add_kernel("axpy_v2f64", [Param("n2", T.u32), Param("a", T.f64),
                                    Param("x", T.u64, ptr(T.f64, align=16)),
                                    Param("y", T.u64, ptr(T.f64, align=16)),
                                    Param("z", T.u64, ptr(T.f64, align=16))])
    b = Builder(k)
    n2, a, x, y, z = (b.param(p) for p in ("n2", "a", "x", "y", "z"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n2)):
        xv = b.ld("global", T.f64, b.element_addr(x, i, 16, name="xa"), vec=2, cache="nc",
                  name="xv")
        yv = b.ld("global", T.f64, b.element_addr(y, i, 16, name="ya"), vec=2, name="yv")
        out = tuple(b.fma(a, xe, ye) for xe, ye in zip(xv, yv))
        b.st("global", b.element_addr(z, i, 16, name="za"), out, type=T.f64)
    b.ret()
    return plain_pointers(emit_module(m)), "axpy_v2f64"


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
            return op(b, "shf", ("l", "wrap", "b32"), T.b32, x, x, Imm(r, T.u32))
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
    return plain_pointers(emit_module(m)), "quarter_round"


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
    return plain_pointers(emit_module(m)), "round_sat"


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
                top = op(b, "bfe", ("u32",), T.u32, word, Imm(8 * byte + 6, T.u32),
                          Imm(2, T.u32))
                for j in range(4):
                    hit = b.selp(Imm(1, T.u32), Imm(0, T.u32), b.setp("eq", top, Imm(j, T.u32)),
                                 type=T.u32)
                    counts[j] = b.add(counts[j], hit, type=T.u32)
        b.st("global", b.element_addr(o, i, 16, name="oa"), tuple(counts), type=T.u32)
    b.ret()
    return plain_pointers(emit_module(m)), "byte_bins"


FP_WORDS = 16                # tanimoto: 512-bit fingerprints, four 16-byte loads each
PRIME = 2013265921           # modinv_fermat: the prime 15 2^27 + 1 (fits 31 bits)
BARRETT_MU = (1 << 62) // PRIME    # floor(2^62 / PRIME) < 2^32: the quotient estimate's factor
FULL = -1                    # shfl.sync member mask: all 32 lanes


def tanimoto():
    """sim[i] = popc(db_i & q) / popc(db_i | q) for 512-bit fingerprints: each thread reads its
    64 bytes by four ld.global.v4.u32 (a warp's loads 64 bytes apart), the query's 64 bytes
    (the same address in every lane), two popc.b32 per word pair, one div.rn.f32."""
    m = Module(target="sm_90")
    k = m.add_kernel("tanimoto", [Param("n", T.u32), Param("q", T.u64, ptr(T.u32, align=16)),
                                  Param("db", T.u64, ptr(T.u32, align=16)),
                                  Param("sim", T.u64, ptr(T.f32))])
    b = Builder(k)
    n, q, db, sim = (b.param(p) for p in ("n", "q", "db", "sim"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        fa = b.element_addr(db, i, 4 * FP_WORDS, name="fa")
        inter, union = b.const(0, T.u32, name="inter"), b.const(0, T.u32, name="union")
        for c in range(FP_WORDS // 4):
            words = b.ld("global", T.u32, Addr(fa, 16 * c), vec=4, name="w")
            qw = b.ld("global", T.u32, Addr(q, 16 * c), vec=4, name="qw")
            for w, v in zip(words, qw):
                inter = b.add(inter, b.unary("popc", b.and_(w, v, type=T.b32), type=T.u32))
                union = b.add(union, b.unary("popc", b.or_(w, v, type=T.b32), type=T.u32))
        s = b.div(b.cvt(T.f32, inter), b.cvt(T.f32, union), name="s")
        b.st("global", b.element_addr(sim, i, 4, name="sa"), s)
    b.ret()
    return plain_pointers(emit_module(m)), "tanimoto"


def _modmul(b, u, v):
    """u v mod PRIME for u, v < PRIME by Barrett reduction: the 62-bit product (mul.wide.u32),
    a quotient estimate from its top 32 bits (mul.hi.u32 by BARRETT_MU) short by at most 2,
    and two conditional subtractions (setp/selp on u64)."""
    prod = b.mul(u, v, mode="wide", type=T.u32, name="prod")
    top = b.cvt(T.u32, b.shr(prod, Imm(30, T.u32), type=T.u64), name="top")
    quo = b.mul(top, Imm(BARRETT_MU, T.u32), mode="hi", type=T.u32, name="quo")
    r = b.sub(prod, b.mul(quo, Imm(PRIME, T.u32), mode="wide", type=T.u32), type=T.u64)
    for _ in range(2):
        over = b.setp("ge", r, Imm(PRIME, T.u64), type=T.u64)
        r = b.selp(b.sub(r, Imm(PRIME, T.u64), type=T.u64), r, over, type=T.u64)
    return b.cvt(T.u32, r, name="mm")


def modinv_fermat():
    """out[i] = a[i]^(PRIME-2) mod PRIME, the modular inverse by Fermat's little theorem (batch
    inversion in number-theoretic transforms): left-to-right square-and-multiply over the
    exponent's 31 bits, unrolled (30 squares and 29 multiplies, each a Barrett reduction)."""
    m = Module(target="sm_90")
    k = m.add_kernel("modinv_fermat", [Param("n", T.u32), Param("a", T.u64, ptr(T.u32)),
                                       Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, a, out = (b.param(p) for p in ("n", "a", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        x = b.ld("global", T.u32, b.element_addr(a, i, 4, name="xa"), name="x")
        r = x
        for bit in bin(PRIME - 2)[3:]:
            r = _modmul(b, r, r)
            if bit == "1":
                r = _modmul(b, r, x)
        b.st("global", b.element_addr(out, i, 4, name="oa"), r)
    b.ret()
    return plain_pointers(emit_module(m)), "modinv_fermat"


def _shfl_up(b, value, delta):
    """shfl.sync.up.b32: the value of the lane `delta` below ours (our own in lanes < delta)."""
    dst = b.reg(value.type, "up")
    b.emit(Instr("shfl", ("sync", "up", "b32"),
                 (dst, value, Imm(delta, T.b32), Imm(0, T.b32), Imm(FULL, T.b32))))
    return dst


def seg_scan_warp():
    """y = the inclusive sums of x over runs of equal keys, within each warp's 32 elements (a
    run also starts at lane 0): the head flags from the key of the lane below (shfl.sync.up),
    then five Hillis-Steele steps that shuffle value and flag up by 1, 2, 4, 8, 16 lanes and
    add only where no head lies between. Every lane of the last warp shuffles (its loads are
    clamped to element n - 1); only lanes i < n store."""
    m = Module(target="sm_90")
    k = m.add_kernel("seg_scan_warp", [Param("n", T.u32), Param("x", T.u64, ptr(T.f32)),
                                       Param("keys", T.u64, ptr(T.s32)),
                                       Param("y", T.u64, ptr(T.f32))])
    b = Builder(k)
    n, x, keys, y = (b.param(p) for p in ("n", "x", "keys", "y"))
    i = b.global_index()
    lane = b.and_(b.special("tid.x"), 31, type=T.u32, name="lane")
    j = b.min(i, b.sub(n, 1, type=T.u32), type=T.u32, name="j")
    v = b.ld("global", T.f32, b.element_addr(x, j, 4, name="xa"), name="v")
    key = b.ld("global", T.s32, b.element_addr(keys, j, 4, name="ka"), name="key")
    one, zero = Imm(1, T.u32), Imm(0, T.u32)
    f = b.selp(one, zero, b.setp("ne", _shfl_up(b, key, 1), key), type=T.u32, name="head")
    f = b.or_(f, b.selp(one, zero, b.setp("eq", lane, zero), type=T.u32), type=T.u32)
    for d in (1, 2, 4, 8, 16):
        vu, fu = _shfl_up(b, v, d), (_shfl_up(b, f, d) if d < 16 else None)
        inside = b.setp("ge", lane, Imm(d, T.u32), type=T.u32)
        stop = b.selp(f, one, inside, type=T.u32)        # a lane below d: nothing to add
        v = b.selp(v, b.add(v, vu), b.setp("ne", stop, zero), type=T.f32)
        if d < 16:                                     # the last step's flags are not read
            f = b.or_(f, b.selp(fu, zero, inside, type=T.u32), type=T.u32)
    with b.if_(b.setp("lt", i, n)):
        b.st("global", b.element_addr(y, i, 4, name="ya"), v)
    b.ret()
    return plain_pointers(emit_module(m)), "seg_scan_warp"


# rgb10a2_unpack: (bit position, width, scale) of R, G, B (10 bits) and A (2 bits)
FIELDS = ((0, 10, 1 / 1023), (10, 10, 1 / 1023), (20, 10, 1 / 1023), (30, 2, 1 / 3))
QUERY_WORDS = 4        # sad_match: a 16-byte query patch per thread
SHIFTS = 9             # sad_match: candidates at byte offsets 0, 4, .. 32 of the reference
REF_PAD = 8            # sad_match: words past 4 n the reference holds (the last candidates)
BINS = 32              # match_hist: bins of the histogram (keys drawn from [0, BINS))


def rgb10a2_unpack():
    """Packed RGB10A2 pixels (one 32-bit word each) to normalised float4: four bfe.u32 field
    extracts, cvt.rn.f32.u32 and a multiply by 1/1023 (1/3 for alpha) each, one 16-byte
    st.global.v4.f32 per pixel (four bytes read, sixteen written)."""
    m = Module(target="sm_90")
    k = m.add_kernel("rgb10a2_unpack", [Param("n", T.u32), Param("src", T.u64, ptr(T.u32)),
                                        Param("dst", T.u64, ptr(T.f32, align=16))])
    b = Builder(k)
    n, src, dst = (b.param(p) for p in ("n", "src", "dst"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        w = b.ld("global", T.u32, b.element_addr(src, i, 4, name="sa"), name="w")
        out = []
        for pos, bits, scale in FIELDS:
            f = op(b, "bfe", ("u32",), T.u32, w, Imm(pos, T.u32), Imm(bits, T.u32))
            out.append(b.mul(b.cvt(T.f32, f), Imm(scale, T.f32)))
        b.st("global", b.element_addr(dst, i, 16, name="da"), tuple(out), type=T.f32)
    b.ret()
    return plain_pointers(emit_module(m)), "rgb10a2_unpack"


def _bytes(b, words):
    """The bytes of 32-bit words, lowest first, each by bfe.u32 into its own register."""
    return [op(b, "bfe", ("u32",), T.u32, w, Imm(8 * j, T.u32), Imm(8, T.u32))
            for w in words for j in range(4)]


def sad_match():
    """Block matching (motion search along a row): each thread's 16-byte query patch against
    SHIFTS candidates of the reference starting 0, 4, .. 32 bytes after its own position; per
    candidate sixteen sad.u32 (|a - b| + c) on bytes split out by bfe; out = the smallest
    16 SAD + shift (min.u32: the lowest shift wins ties). Query and reference by 16-byte loads
    (the reference's 48 bytes overlap the next two threads')."""
    m = Module(target="sm_90")
    k = m.add_kernel("sad_match", [Param("n", T.u32), Param("q", T.u64, ptr(T.u32, align=16)),
                                   Param("ref", T.u64, ptr(T.u32, align=16)),
                                   Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, q, ref, out = (b.param(p) for p in ("n", "q", "ref", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        qa = b.element_addr(q, i, 4 * QUERY_WORDS, name="qa")
        ra = b.element_addr(ref, i, 4 * QUERY_WORDS, name="ra")
        qb = _bytes(b, b.ld("global", T.u32, Addr(qa), vec=4, name="qw"))
        rw = []
        for c in range(3):
            rw += b.ld("global", T.u32, Addr(ra, 16 * c), vec=4, name="rw")
        rb = _bytes(b, rw)
        best = None
        for s in range(SHIFTS):
            acc = b.const(0, T.u32, name="acc")
            for j in range(4 * QUERY_WORDS):
                acc = op(b, "sad", ("u32",), T.u32, qb[j], rb[4 * s + j], acc)
            key = b.add(b.shl(acc, 4, type=T.u32), s, type=T.u32)
            best = key if best is None else b.min(best, key, type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), best)
    b.ret()
    return plain_pointers(emit_module(m)), "sad_match"


def match_hist():
    """A histogram with warp-aggregated atomics: match.any.sync.b32 gives each lane the lanes
    holding its key, the lowest of them (no peer under %lanemask_lt) adds their popc with one
    red.global.add.u32. Every lane of the last warp takes part (lanes past n hold key -1 and
    add nothing)."""
    m = Module(target="sm_90")
    k = m.add_kernel("match_hist", [Param("n", T.u32), Param("keys", T.u64, ptr(T.u32)),
                                    Param("bins", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, keys, bins = (b.param(p) for p in ("n", "keys", "bins"))
    i = b.global_index()
    valid = b.setp("lt", i, n, name="valid")
    j = b.min(i, b.sub(n, 1, type=T.u32), type=T.u32, name="j")
    key = b.ld("global", T.u32, b.element_addr(keys, j, 4, name="ka"), name="key")
    key = b.selp(key, Imm(0xFFFFFFFF, T.u32), valid, type=T.u32, name="key")
    peers = b.reg(T.b32, "peers")
    b.emit(Instr("match", ("any", "sync", "b32"), (peers, key, Imm(FULL, T.b32))))
    below = b.and_(peers, b.special("lanemask_lt"), type=T.b32, name="below")
    with b.if_(valid):
        with b.if_(b.setp("eq", below, Imm(0, T.b32), type=T.b32)):
            count = b.unary("popc", peers, type=T.b32, name="count")
            b.red("global", "add", b.element_addr(bins, key, 4, name="ba"), count,
                  type=T.u32)
    b.ret()
    return plain_pointers(emit_module(m)), "match_hist"


CRC_POLY = 0x82F63B78   # crc32c: Castagnoli's polynomial, bit-reflected (iSCSI, ext4, SSE4.2)
RECORD_WORDS = 8        # crc32c: a 32-byte record per thread, two 16-byte loads
CRC_BLOCK = 256         # crc32c: threads a block = entries of the table they build together
MORTON_BITS = 10        # morton3d: bits per axis (a 30-bit code)
VEC_DIM = 128           # warp_l2norm: floats per vector, four per lane
L2_EPS = 1e-12          # warp_l2norm: added to the sum of squares (a zero vector stays finite)


# morton3d: (shift, mask) steps that spread 10 bits to every third bit of a 30-bit word
SPREAD = ((16, 0x030000FF), (8, 0x0300F00F), (4, 0x030C30C3), (2, 0x09249249))


def crc32c():
    """CRC-32C of each thread's 32-byte record by a 256-entry table in shared memory: the block
    first builds the table (thread t its entry t, eight shift/xor steps by the reflected
    polynomial; bar.sync), then each thread folds its eight words in, four table look-ups a
    word (crc ^= w; 4x crc = T[crc & 0xff] ^ (crc >> 8)): 32 dependent ld.shared a thread at
    data-dependent banks. Initial value and final xor 0xffffffff, as the standard has it."""
    m = Module(target="sm_90")
    k = m.add_kernel("crc32c", [Param("n", T.u32), Param("rec", T.u64, ptr(T.u32, align=16)),
                                Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, rec, out = (b.param(p) for p in ("n", "rec", "out"))
    table = b.address_of(b.shared("crc_table", T.u32, CRC_BLOCK))
    tid = b.special("tid.x")
    c = tid
    for _ in range(8):
        half = b.shr(c, 1, type=T.u32)
        odd = b.setp("ne", b.and_(c, 1, type=T.u32), Imm(0, T.u32), type=T.u32)
        c = b.selp(b.xor(half, Imm(CRC_POLY, T.u32), type=T.u32), half, odd, type=T.u32)
    b.st("shared", b.add(table, b.shl(tid, 2, type=T.u32), type=T.u32, name="ta"), c)
    b.bar_sync()
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        ra = b.element_addr(rec, i, 4 * RECORD_WORDS, name="ra")
        words = []
        for q in range(RECORD_WORDS // 4):
            words += b.ld("global", T.u32, Addr(ra, 16 * q), vec=4, name="w")
        crc = b.const(0xFFFFFFFF, T.u32, name="crc")
        for w in words:
            crc = b.xor(crc, w, type=T.u32)
            for _ in range(4):
                idx = b.shl(b.and_(crc, 0xFF, type=T.u32), 2, type=T.u32)
                t = b.ld("shared", T.u32, Addr(b.add(table, idx, type=T.u32)), name="t")
                crc = b.xor(t, b.shr(crc, 8, type=T.u32), type=T.u32)
        crc = b.xor(crc, Imm(0xFFFFFFFF, T.u32), type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), crc)
    b.ret()
    return plain_pointers(emit_module(m)), "crc32c"


def morton3d():
    """30-bit Morton codes of points (x, y, z, w float4; w unused) for a linear BVH build:
    each axis (p - lo) * scale (sub then mul, no fused rounding), cvt.rzi.u32.f32 (saturating:
    below the box gives 0), min 1023, its 10 bits spread to every third bit by four
    shift-or-and steps, code = x << 2 | y << 1 | z. One ld.global.v4.f32 and one 4-byte store a
    point."""
    m = Module(target="sm_90")
    k = m.add_kernel("morton3d", [Param("n", T.u32), Param("lo", T.f32),
                                  Param("scale", T.f32),
                                  Param("pts", T.u64, ptr(T.f32, align=16)),
                                  Param("code", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, lo, scale, pts, code = (b.param(p) for p in ("n", "lo", "scale", "pts", "code"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        p = b.ld("global", T.f32, b.element_addr(pts, i, 16, name="pa"), vec=4, name="p")
        spread = []
        for axis in range(3):
            q = b.cvt(T.u32, b.mul(b.sub(p[axis], lo), scale), rounding="rzi")
            x = b.min(q, (1 << MORTON_BITS) - 1, type=T.u32)
            for s, mask in SPREAD:
                x = b.and_(b.or_(x, b.shl(x, s, type=T.u32), type=T.u32), Imm(mask, T.u32),
                           type=T.u32)
            spread.append(x)
        c = b.or_(b.shl(spread[0], 2, type=T.u32), b.shl(spread[1], 1, type=T.u32),
                  type=T.u32)
        c = b.or_(c, spread[2], type=T.u32)
        b.st("global", b.element_addr(code, i, 4, name="ca"), c)
    b.ret()
    return plain_pointers(emit_module(m)), "morton3d"


def warp_l2norm():
    """Embedding vectors of VEC_DIM floats scaled to unit length, one warp a vector: each lane
    loads four floats (16 bytes), squares them into a partial sum, five shfl.sync.bfly.b32
    steps (xor 16 .. 1) leave the whole sum in every lane, rsqrt.approx.f32 of sum + eps, four
    multiplies, one 16-byte store. A warp past the last vector skips everything (the branch is
    the same in all its lanes, so the full-mask shuffles stay whole)."""
    m = Module(target="sm_90")
    k = m.add_kernel("warp_l2norm", [Param("n", T.u32),
                                     Param("x", T.u64, ptr(T.f32, align=16)),
                                     Param("y", T.u64, ptr(T.f32, align=16))])
    b = Builder(k)
    n, x, y = (b.param(p) for p in ("n", "x", "y"))
    i = b.global_index()
    vec = b.shr(i, 5, type=T.u32, name="vec")
    with b.if_(b.setp("lt", vec, n)):
        xa = b.element_addr(x, i, 16, name="xa")      # vec * 512 + lane * 16
        v = b.ld("global", T.f32, xa, vec=4, name="v")
        s = b.mul(v[0], v[0])
        for e in v[1:]:
            s = b.fma(e, e, s)
        for d in (16, 8, 4, 2, 1):
            other = b.reg(T.f32, "o")
            b.emit(Instr("shfl", ("sync", "bfly", "b32"),
                         (other, s, Imm(d, T.b32), Imm(31, T.b32), Imm(FULL, T.b32))))
            s = b.add(s, other)
        r = b.unary("rsqrt", b.add(s, Imm(L2_EPS, T.f32)), mods=("approx",), name="r")
        b.st("global", b.element_addr(y, i, 16, name="ya"), tuple(b.mul(e, r) for e in v))
    b.ret()
    return plain_pointers(emit_module(m)), "warp_l2norm"


# family: () -> (PTX text, entry)
BUILT = {
    "ptx_hfma2_axpy": hfma2_axpy,
    "ptx_divmod_roll": divmod_roll,
    "ptx_dp4a_dot": dp4a_dot,
    "ptx_xorshift": xorshift_uniform,
    "ptx_cvt_roundtrip": cvt_roundtrip,
    "ptx_prmt_bits": prmt_bits,
    "ptx_red_scatter": red_scatter,
    "ptx_splitmix64": splitmix64,
    "ptx_tanh_ex2": tanh_ex2,
    "ptx_axpy_v2f64": axpy_v2f64,
    "ptx_quarter_round": quarter_round,
    "ptx_round_sat": round_sat,
    "ptx_byte_bins": byte_bins,
    "ptx_tanimoto": tanimoto,
    "ptx_modinv_fermat": modinv_fermat,
    "ptx_seg_scan_warp": seg_scan_warp,
    "ptx_rgb10a2_unpack": rgb10a2_unpack,
    "ptx_sad_match": sad_match,
    "ptx_match_hist": match_hist,
    "ptx_crc32c": crc32c,
    "ptx_morton3d": morton3d,
    "ptx_warp_l2norm": warp_l2norm,
}


# -- the families' records ------------------------------------------------------------------------
def built(c):
    """(PTX text, entry) of a Builder-made family's kernel."""
    return BUILT[c["family"]]()


def hand_written(c):
    """(PTX text, entry) of a hand-written kernel (the case names it where families share one)."""
    return HAND_WRITTEN[c.get("kernel", c["family"])]


family = registry("ptx", kernel=built)

def _bf16(a):
    """float32 -> bfloat16 -> float32, rounding to nearest even (finite inputs)."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def cvt_ref(x):
    """cvt_roundtrip's result in float32 arithmetic, the kernel's order of additions."""
    x = np.asarray(x, np.float32)
    a = x.astype(np.float16).astype(np.float32)
    return (a + _bf16(x)) + _bf16(a)


def prmt_ref(w):
    """prmt_bits's result on uint32 words."""
    w = np.asarray(w).view(np.uint32).astype(np.uint64)
    r = ((w & 0xFF) << 24) | ((w & 0xFF00) << 8) | ((w >> 8) & 0xFF00) | (w >> 24)
    e = (r >> 5) & 0x7FF
    z = (r & ~np.uint64(0x7F << 13)) | ((e & 0x7F) << 13)
    sw = ((w << 16) | (w >> 16)) & 0xFFFFFFFF
    return ((z ^ sw) & 0xFFFFFFFF).astype(np.uint32)


SEED = 0x243F6A8885A308D3   # ptx_splitmix64's seed (below 2^63: a plain int everywhere)


def splitmix_ref(n, seed=SEED):
    """splitmix64's kernel result for indices 0..n-1 (uint64, wrapping arithmetic)."""
    u = np.uint64
    with np.errstate(over="ignore"):
        z = u(seed) + (np.arange(1, n + 1, dtype=np.uint64) * u(GOLDEN))
        z = (z ^ (z >> u(30))) * u(MIX1)
        z = (z ^ (z >> u(27))) * u(MIX2)
        z = z ^ (z >> u(31))
    hi = np.array([(int(v) * GOLDEN) >> 64 for v in z], dtype=np.uint64)
    return z ^ hi


def byte_bins_ref(w):
    """ptx_byte_bins' result for int32 words w: per 16 bytes, the count of bytes in each of
    [0, 64), [64, 128), [128, 192), [192, 256)."""
    top = np.asarray(w, np.int32).view(np.uint8).reshape(-1, 16) >> 6
    return (top[:, :, None] == np.arange(4)).sum(1).astype(np.int32).reshape(-1)


def quarter_round_ref(s):
    """ptx_quarter_round's result for int32 states s (4 words each), in uint32 arithmetic."""
    a, b, c, d = (np.asarray(s).reshape(-1, 4).view(np.uint32)[:, j].copy() for j in range(4))

    def rotl(x, r):
        return (x << np.uint32(r)) | (x >> np.uint32(32 - r))
    for _ in range(ROUNDS):
        a += b
        d = rotl(d ^ a, 16)
        c += d
        b = rotl(b ^ c, 12)
        a += b
        d = rotl(d ^ a, 8)
        c += d
        b = rotl(b ^ c, 7)
    return np.stack([a, b, c, d], 1).reshape(-1).view(np.int32)


def round_sat_ref(x):
    """ptx_round_sat's result: float32 QUANT x, rounded half to even, clamped to int8's range."""
    v = np.asarray(x, np.float32) * np.float32(QUANT)
    return np.clip(np.rint(v), -128, 127).astype(np.int32)


KEYS = 4               # ptx_seg_scan_warp: keys drawn from [0, KEYS); a run of equal keys


def modinv_ref(a):
    """a^(PRIME-2) mod PRIME for each a (square-and-multiply in uint64), as int32."""
    x = np.asarray(a).astype(np.uint64)
    p, r = np.uint64(PRIME), x.copy()
    for bit in bin(PRIME - 2)[3:]:
        r = r * r % p
        if bit == "1":
            r = r * x % p
    return r.astype(np.int32)


def seg_scan_ref(x, keys):
    """ptx_seg_scan_warp's result: inclusive sums over runs of equal keys within each 32-element
    window, float64 (a partial last window padded past the end)."""
    n = len(x)
    pad = -n % 32
    x = np.pad(np.asarray(x, np.float64), (0, pad)).reshape(-1, 32)
    k = np.pad(np.asarray(keys), (0, pad), mode="edge").reshape(-1, 32)
    out = x.copy()
    for lane in range(1, 32):
        same = k[:, lane] == k[:, lane - 1]
        out[:, lane] += np.where(same, out[:, lane - 1], 0.0)
    return out.reshape(-1)[:n]


def tanimoto_ref(q, db):
    """popc(f & q) / popc(f | q) in float32 for each 512-bit fingerprint f of db (int32 words)."""
    f = np.asarray(db, np.int32).reshape(-1, FP_WORDS)
    qq = np.asarray(q, np.int32)[None, :]

    def pop(w):
        return np.unpackbits(np.ascontiguousarray(w).view(np.uint8), axis=1).sum(1)
    return (pop(f & qq).astype(np.float32) / pop(f | qq).astype(np.float32)).astype(np.float32)


def rgb10a2_ref(words):
    """The float4 (n, 4) of packed RGB10A2 words, in float32 as the kernel rounds (exact)."""
    w = np.asarray(words).view(np.uint32)
    return np.stack([((w >> np.uint32(pos)) & np.uint32((1 << bits) - 1)).astype(np.float32)
                     * np.float32(scale) for pos, bits, scale in FIELDS], 1)


def sad_match_ref(q, ref):
    """min over shifts s of 16 SAD(query patch, reference bytes 16 i + 4 s ..) + s, per patch;
    q holds 4 words a patch, ref 4 words a patch plus REF_PAD."""
    qb = np.asarray(q, np.int32).view(np.uint8).reshape(-1, 16).astype(np.int32)
    rb = np.asarray(ref, np.int32).view(np.uint8).astype(np.int32)
    n = len(qb)
    idx = 16 * np.arange(n)[:, None] + np.arange(16)[None, :]
    keys = [16 * np.abs(qb - rb[idx + 4 * s]).sum(1) + s for s in range(SHIFTS)]
    return np.min(keys, 0).astype(np.int32)


MORTON_LO, MORTON_SCALE = -0.05, 1023.0 / 1.1    # ptx_morton3d: the box [-0.05, 1.05)^3


def _spread10(v):
    out = np.zeros_like(v)
    for bit in range(10):
        out |= ((v >> np.uint32(bit)) & np.uint32(1)) << np.uint32(3 * bit)
    return out


def crc32c_ref(records):
    """CRC-32C of each row of bytes (n, length) uint8."""
    table, rec = crc32c_table(), np.asarray(records, np.uint8)
    crc = np.full(len(rec), 0xFFFFFFFF, np.uint32)
    for j in range(rec.shape[1]):
        crc = table[(crc ^ rec[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def crc32c_table():
    """The 256-entry CRC-32C table (reflected polynomial), as the kernel's blocks build it."""
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        c = np.where(c & 1, (c >> np.uint32(1)) ^ np.uint32(CRC_POLY), c >> np.uint32(1))
    return c.astype(np.uint32)


def morton_ref(pts):
    """30-bit Morton codes of float32 points (n, 4) in the box: float32 (p - lo) * scale,
    truncated and clamped to [0, 1023], bits interleaved x above y above z."""
    p = np.asarray(pts, np.float32)[:, :3]
    q = (p - np.float32(MORTON_LO)) * np.float32(MORTON_SCALE)
    q = np.clip(np.trunc(q.astype(np.float64)), 0, 1023).astype(np.uint32)
    return (_spread10(q[:, 0]) << np.uint32(2)) | (_spread10(q[:, 1]) << np.uint32(1)) \
        | _spread10(q[:, 2])


@family(sizes=[('n=16777216', {'n': 16777216}), ('n=67108864', {'n': 67108864})],
        kernel=hand_written)
def copy_v4(g, c):
    x, y = g.randn(c["n"]), g.empty(c["n"])
    check = lambda: float((y - x).norm() / x.norm())  # noqa: E731
    return [x, y, np.uint32(c["n"] // 4)], (c["n"] // 4 // 256,), (256,), check, {}


@family(sizes=[('iters=512', {'iters': 512}), ('iters=4096', {'iters': 4096})],
        kernel=hand_written)
def fma_chain(g, c):
    out = g.empty(132 * 8 * 256)
    return [out, np.uint32(c["iters"])], (132 * 8,), (256,), None, {}


@family(name="smem_stride32", sizes=[('stride=32', {'stride': 32, 'kernel': 'smem_stride'})],
        kernel=hand_written)
@family(name="smem_stride8", sizes=[('stride=8', {'stride': 8, 'kernel': 'smem_stride'})],
        kernel=hand_written)
@family(sizes=[('stride=1', {'stride': 1, 'kernel': 'smem_stride'})], kernel=hand_written)
def smem_stride(g, c):
    out = g.empty(132 * 8 * 256)
    return [out, np.uint32(1024), np.uint32(c["stride"])], (132 * 8,), (256,), None, {}


@family(name="atomic_spread",
        sizes=[('n=4194304', {'n': 4194304, 'mask': 4095, 'kernel': 'atomic_add'})],
        kernel=hand_written)
@family(name="atomic_one", sizes=[('n=1048576', {'n': 1048576, 'mask': 0, 'kernel': 'atomic_add'})],
        kernel=hand_written)
def atomic_add(g, c):
    buf = g.torch.zeros(max(c["mask"] + 1, 1), device="cuda", dtype=g.torch.int32)
    args = [buf, np.uint32(c["n"]), np.uint32(c["mask"])]
    return args, (c["n"] // 256,), (256,), None, {}


# partial-sector stores a warp completes: k words of b bytes per thread
@family(sizes=[
        ('k=1 16MiB', {'k': 1, 'b': 4, 'n': 4194304, 'kernel': 'store_lanes1'}),
        ('k=1 512MiB', {'k': 1, 'b': 4, 'n': 134217728, 'kernel': 'store_lanes1'}),
        ('k=2 16MiB', {'k': 2, 'b': 4, 'n': 2097152, 'kernel': 'store_lanes2'}),
        ('k=2 512MiB', {'k': 2, 'b': 4, 'n': 67108864, 'kernel': 'store_lanes2'}),
        ('k=4 16MiB', {'k': 4, 'b': 4, 'n': 1048576, 'kernel': 'store_lanes4'}),
        ('k=4 512MiB', {'k': 4, 'b': 4, 'n': 33554432, 'kernel': 'store_lanes4'}),
        ('k=8 16MiB', {'k': 8, 'b': 4, 'n': 524288, 'kernel': 'store_lanes8'}),
        ('k=8 512MiB', {'k': 8, 'b': 4, 'n': 16777216, 'kernel': 'store_lanes8'}),
        ('k=16 16MiB', {'k': 16, 'b': 4, 'n': 262144, 'kernel': 'store_lanes16'}),
        ('k=16 512MiB', {'k': 16, 'b': 4, 'n': 8388608, 'kernel': 'store_lanes16'}),
        ('k=32 16MiB', {'k': 32, 'b': 4, 'n': 131072, 'kernel': 'store_lanes32'}),
        ('k=32 512MiB', {'k': 32, 'b': 4, 'n': 4194304, 'kernel': 'store_lanes32'}),
        ('k=8 u16 16MiB', {'k': 8, 'b': 2, 'n': 1048576, 'kernel': 'store_lanes8_u16'}),
        ('k=8 u16 512MiB', {'k': 8, 'b': 2, 'n': 33554432, 'kernel': 'store_lanes8_u16'}),
        ('k=16 u16 16MiB', {'k': 16, 'b': 2, 'n': 524288, 'kernel': 'store_lanes16_u16'}),
        ('k=16 u16 512MiB', {'k': 16, 'b': 2, 'n': 16777216, 'kernel': 'store_lanes16_u16'})],
        kernel=hand_written)
def store_lanes(g, c):
    torch = g.torch
    b = c.get("b", 4)                   # int32 storage, read back as b-byte words
    out = g.zeros(c["n"] * c["k"] * b // 4, integer=True)
    words = out.view(torch.int32 if b == 4 else torch.int16).view(-1, c["k"])
    want = (torch.arange(c["n"], device="cuda", dtype=torch.int64) % (1 << (8 * b)))
    check = lambda: float((words.long() % (1 << (8 * b)) != want[:, None]).sum())  # noqa
    return [out, np.uint32(c["n"])], (c["n"] // 256,), (256,), check, {}


# scattered loads from a table of 4 MiB (L2) or 256 MiB (DRAM)
@family(sizes=[
        ('n=1048576 table=4MiB', {'n': 1048576, 'mask': 1048575}),
        ('n=4194304 table=4MiB', {'n': 4194304, 'mask': 1048575}),
        ('n=4194304 table=256MiB', {'n': 4194304, 'mask': 67108863})],
        kernel=hand_written)
def gather_hash(g, c):
    table, out = g.randn(c["mask"] + 1), g.empty(c["n"])
    args = [table, out, np.uint32(c["n"]), np.uint32(c["mask"])]

    def check():
        ref = gather_hash_ref(g.host(table).astype(np.float64), c["n"], c["mask"])
        return float(np.abs(g.host(out) - ref).max() / np.abs(ref).max())
    return args, (c["n"] // 256,), (256,), check, {}



@family(sizes=[
        ('rows=1000003 bytes=256', {'rows': 1000003, 'kw': 64}),
        ('rows=200000 bytes=2048', {'rows': 200000, 'kw': 512})], small={'rows': 300, 'kw': 9})
def ptx_dp4a_dot(g, c):
    r, kw = c["rows"], c["kw"]
    db = g.randint(-2 ** 31, 2 ** 31, kw * r).reshape(kw, r)
    q, out = g.randint(-2 ** 31, 2 ** 31, kw), int_out(g, r)
    args, grid = [np.uint32(r), np.uint32(kw), db, q, out], ((r + 255) // 256,)

    def check():                      # the first 4096 vectors, exactly (int64 numpy)
        k = min(r, 4096)
        v = np.ascontiguousarray(g.host(db[:, :k]).T).view(np.int8).astype(np.int64)
        qq = np.ascontiguousarray(g.host(q)).view(np.int8).astype(np.int64)
        return wrong(g.host(out[:k]), (v @ qq).astype(np.int32))
    return args, grid, (256,), check, {}


@family(sizes=[
        ('threads=256000 per=111', {'blocks': 1000, 'per': 111}),
        ('threads=1280000 per=250', {'blocks': 5000, 'per': 250})], small={'blocks': 3, 'per': 7})
def ptx_xorshift(g, c):
    threads, per = c["blocks"] * 256, c["per"]
    out = g.empty(per, threads)
    args, grid = [np.uint32(per), out], (c["blocks"],)

    def check():                      # every number of the first 4096 threads, exactly
        k = min(threads, 4096)
        x = (np.arange(k, dtype=np.uint32) * np.uint32(0x9E3779B9)
             + np.uint32(0x6A09E667))
        ref = np.empty((per, k), np.float32)
        for j in range(per):
            x ^= x << np.uint32(13)
            x ^= x >> np.uint32(17)
            x ^= x << np.uint32(5)
            ref[j] = (x >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
        return wrong(g.host(out[:, :k]), ref)
    return args, grid, (256,), check, {}


@family(sizes=[('n=20000008', {'n': 20000008}), ('n=300000056', {'n': 300000056})],
        small={'n': 2056}, tolerance=0.002)
def ptx_hfma2_axpy(g, c):
    n, a = c["n"], 1.7
    x, y = cast(g.randn(n), "float16"), cast(g.randn(n), "float16")
    z = cast(g.empty(n), "float16")
    a2 = np.array([a, a], np.float16).view(np.uint32)[0]
    args, grid = [np.uint32(n // 8), a2, x, y, z], ((n // 8 + 255) // 256,)

    def check():                      # the first 2^20 elements
        xh, yh = (g.host(v[:1 << 20]).astype(np.float64) for v in (x, y))
        return rel(g.host(z[:1 << 20]), float(np.float16(a)) * xh + yh)
    return args, grid, (256,), check, {}


@family(sizes=[
        ('97x301x503', {'shape': (97, 301, 503), 'shift': (5, 17, 250)}),
        ('301x1001x999', {'shape': (301, 1001, 999), 'shift': (300, 1, 998)})],
        small={'shape': (3, 7, 11), 'shift': (1, 9, 4)})
def ptx_divmod_roll(g, c):
    (d, h, w), (dz, dy, dx) = c["shape"], c["shift"]
    src, dst = g.randn(d, h, w), g.empty(d, h, w)
    args = [np.uint32(v) for v in (d, h, w, dz, dy, dx)] + [src, dst]
    grid = ((d * h * w + 255) // 256,)

    def check():                      # the first two planes, exactly
        ref = np.roll(g.host(src), (-dz, -dy, -dx), axis=(0, 1, 2))[:2]
        return wrong(g.host(dst[:2]), ref)
    return args, grid, (256,), check, {}


@family(sizes=[('n=12000004', {'n': 12000004}), ('n=250000012', {'n': 250000012})],
        small={'n': 2052})
def ptx_cvt_roundtrip(g, c):
    n = c["n"]
    x, y = g.randn(n) * 300, g.empty(n)
    args, grid = [np.uint32(n // 4), x, y], ((n // 4 + 255) // 256,)

    def check():                      # the first 2^20 elements, exactly
        return wrong(g.host(y[:1 << 20]), cvt_ref(g.host(x[:1 << 20])))
    return args, grid, (256,), check, {}


@family(sizes=[('n=6000011', {'n': 6000011}), ('n=180000001', {'n': 180000001})], small={'n': 1999})
def ptx_prmt_bits(g, c):
    n = c["n"]
    w, o = g.randint(-2 ** 31, 2 ** 31 - 1, n), int_out(g, n)
    args, grid = [np.uint32(n), w, o], ((n + 255) // 256,)

    def check():                      # the first 2^20 words, exactly
        return wrong(g.host(o[:1 << 20]).view(np.uint32),
                      prmt_ref(g.host(w[:1 << 20])))
    return args, grid, (256,), check, {}


@family(sizes=[
        ('n=4000037 bins=100003', {'n': 4000037, 'bins': 100003}),
        ('n=50000017 bins=1000003', {'n': 50000017, 'bins': 1000003})],
        small={'n': 3001, 'bins': 37}, tolerance=1e-05)
def ptx_red_scatter(g, c):
    n, nb = c["n"], c["bins"]
    idx, val, out = g.randint(0, nb, n), g.rand(n), g.zeros(nb)
    args, grid = [np.uint32(n), idx, val, out], ((n + 255) // 256,)
    inits = {1: dict(kind="randint", low=0, high=nb)}

    def check():
        # the sums accumulate over every launch before the check (the collect's first go,
        # a warm-up): compare with the reference times the launches the total shows
        ref = np.bincount(g.host(idx), g.host(val).astype(np.float64), minlength=nb)
        oh = g.host(out).astype(np.float64)
        runs = round(oh.sum() / ref.sum())
        return 1.0 if runs < 1 else rel(oh, runs * ref)
    return args, grid, (256,), check, inits


@family(sizes=[('n=5000011', {'n': 5000011}), ('n=300000007', {'n': 300000007})], small={'n': 1999})
def ptx_splitmix64(g, c):
    n = c["n"]
    out = cast(int_out(g, n), "int64")
    args, grid = [np.uint32(n), np.uint64(SEED), out], ((n + 255) // 256,)

    def check():                      # the first 2^16 words, exactly
        k = min(n, 1 << 16)
        return wrong(g.host(out[:k]).view(np.uint64), splitmix_ref(k))
    return args, grid, (256,), check, {}


@family(sizes=[('n=6000004', {'n': 6000004}), ('n=200000012', {'n': 200000012})], small={'n': 2052},
        tolerance=0.002)
def ptx_tanh_ex2(g, c):
    n = c["n"]
    x, y = g.randn(n), g.empty(n)
    args, grid = [np.uint32(n // 4), x, y], ((n // 4 + 255) // 256,)

    def check():                      # the first 2^20 elements
        xh = double(g.host(x[:1 << 20]))
        return rel(g.host(y[:1 << 20]), np.tanh(xh) + np.exp2(xh))
    return args, grid, (256,), check, {}


@family(sizes=[('n=4000002', {'n': 4000002}), ('n=120000002', {'n': 120000002})], small={'n': 2002},
        tolerance=1e-12)
def ptx_axpy_v2f64(g, c):
    n = c["n"]
    x, y = cast(g.randn(n), "float64"), cast(g.randn(n), "float64")
    z = cast(g.empty(n), "float64")
    a = 1.7182818284590453
    args, grid = [np.uint32(n // 2), np.float64(a), x, y, z], ((n // 2 + 255) // 256,)

    def check():                      # the first 2^20 elements
        xh, yh = g.host(x[:1 << 20]), g.host(y[:1 << 20])
        return rel(g.host(z[:1 << 20]), a * xh + yh)
    return args, grid, (256,), check, {}


@family(name='ptx_byte_bins', sizes=[
        ('groups=2000003', {'n4': 2000003}),
        ('groups=50000017', {'n4': 50000017})], small={'n4': 1001})
@family(name='ptx_quarter_round', sizes=[
        ('states=1500007', {'n4': 1500007}),
        ('states=40000003', {'n4': 40000003})], small={'n4': 999})
def ptx_quarter_round_byte_bins(g, c):
    fam = c["family"]
    n4 = c["n4"]
    w, o = g.randint(-2 ** 31, 2 ** 31 - 1, 4 * n4), int_out(g, 4 * n4)
    args, grid = [np.uint32(n4), w, o], ((n4 + 255) // 256,)
    ref = quarter_round_ref if fam == "ptx_quarter_round" else byte_bins_ref

    def check():                      # the first 2^16 threads' words, exactly
        k = 4 << 16
        return wrong(g.host(o[:k]), ref(g.host(w[:k])))
    return args, grid, (256,), check, {}


@family(sizes=[('n=5000011', {'n': 5000011}), ('n=150000001', {'n': 150000001})], small={'n': 2001})
def ptx_round_sat(g, c):
    n = c["n"]
    x, y = g.randn(n), int_out(g, n)
    args, grid = [np.uint32(n), x, y], ((n + 255) // 256,)

    def check():                      # the first 2^20 elements, exactly
        k = 1 << 20
        return wrong(g.host(y[:k]), round_sat_ref(g.host(x[:k])))
    return args, grid, (256,), check, {}


@family(sizes=[('n=1000003', {'n': 1000003}), ('n=12000007', {'n': 12000007})], small={'n': 1001})
def ptx_tanimoto(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    q = g.randint(-2 ** 31, 2 ** 31 - 1, FP_WORDS)
    db, sim = g.randint(-2 ** 31, 2 ** 31 - 1, FP_WORDS * n), g.empty(n)

    def check():                      # the first 2^16 fingerprints, exactly
        k = 1 << 16
        return wrong(g.host(sim[:k]), tanimoto_ref(g.host(q), g.host(db[:FP_WORDS * k])))
    return [np.uint32(n), q, db, sim], grid, (256,), check, {}


@family(sizes=[('n=300007', {'n': 300007}), ('n=4000037', {'n': 4000037})], small={'n': 301})
def ptx_modinv_fermat(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    a, out = g.randint(1, PRIME, n), int_out(g, n)

    def check():                      # the first 2^16 inverses, exactly
        return wrong(g.host(out[:1 << 16]), modinv_ref(g.host(a[:1 << 16])))
    return [np.uint32(n), a, out], grid, (256,), check, {}


@family(sizes=[('n=3000017', {'n': 3000017}), ('n=80000023', {'n': 80000023})], small={'n': 2001},
        tolerance=1e-06)
def ptx_seg_scan_warp(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    x, keys, y = g.randn(n), g.randint(0, KEYS, n), g.empty(n)

    def check():                      # the first 2^20 elements
        k = 1 << 20
        return rel(g.host(y[:k]), seg_scan_ref(g.host(x[:k]), g.host(keys[:k])))
    return [np.uint32(n), x, keys, y], grid, (256,), check, {}


@family(sizes=[('n=4000037', {'n': 4000037}), ('n=40000003', {'n': 40000003})], small={'n': 1001})
def ptx_rgb10a2_unpack(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    words, out = g.randint(-2 ** 31, 2 ** 31 - 1, n), g.empty(n, 4)

    def check():                      # the first 2^20 pixels, exactly
        k = 1 << 20
        return wrong(g.host(out[:k]), rgb10a2_ref(g.host(words[:k])))
    return [np.uint32(n), words, out], grid, (256,), check, {}


@family(sizes=[('n=1000003', {'n': 1000003}), ('n=8000009', {'n': 8000009})], small={'n': 301})
def ptx_sad_match(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    q = g.randint(-2 ** 31, 2 ** 31 - 1, QUERY_WORDS * n)
    ref = g.randint(-2 ** 31, 2 ** 31 - 1, QUERY_WORDS * n + REF_PAD)
    out = g.zeros(n, integer=True) - 1

    def check():                      # the first 2^16 patches, exactly
        k = 1 << 16
        return wrong(g.host(out[:k]), sad_match_ref(
            g.host(q[:QUERY_WORDS * k]), g.host(ref[:QUERY_WORDS * k + REF_PAD])))
    return [np.uint32(n), q, ref, out], grid, (256,), check, {}


@family(sizes=[('n=2000003', {'n': 2000003}), ('n=20000003', {'n': 20000003})], small={'n': 2001})
def ptx_match_hist(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    keys, bins = g.randint(0, BINS, n), g.zeros(BINS, integer=True)

    def check():                      # every bin, exactly
        return wrong(g.host(bins), np.bincount(g.host(keys), minlength=BINS))
    return [np.uint32(n), keys, bins], grid, (256,), check, \
        {1: dict(kind="randint", low=0, high=BINS)}


@family(sizes=[('n=1000003', {'n': 1000003}), ('n=8000009', {'n': 8000009})], small={'n': 301})
def ptx_crc32c(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    rec = g.randint(-2 ** 31, 2 ** 31 - 1, RECORD_WORDS * n)
    out = g.zeros(n, integer=True)

    def check():                      # the first 2^16 records, exactly
        k = 1 << 16
        words = np.asarray(g.host(rec[:RECORD_WORDS * k]), np.int32)
        ref = crc32c_ref(words.view(np.uint8).reshape(-1, 4 * RECORD_WORDS))
        return wrong(np.asarray(g.host(out[:k])).view(np.uint32), ref)
    return [np.uint32(n), rec, out], grid, (CRC_BLOCK,), check, {}


@family(sizes=[('n=4000037', {'n': 4000037}), ('n=30000001', {'n': 30000001})], small={'n': 1001})
def ptx_morton3d(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    pts, code = g.rand(n, 4) * 1.2 - 0.1, g.zeros(n, integer=True) - 1

    def check():                      # the first 2^20 points, exactly
        k = 1 << 20
        return wrong(np.asarray(g.host(code[:k])).view(np.uint32),
                      morton_ref(g.host(pts[:k])))
    return [np.uint32(n), np.float32(MORTON_LO), np.float32(MORTON_SCALE), pts, code], \
        grid, (256,), check, {}


@family(sizes=[('n=100003', {'n': 100003}), ('n=600001', {'n': 600001})], small={'n': 21},
        tolerance=1e-05)
def ptx_warp_l2norm(g, c):
    n = c['n']
    grid = ((n + 255) // 256,)
    x, y = g.randn(n, VEC_DIM), g.empty(n, VEC_DIM)

    def check():                      # the first 4096 vectors
        xh = double(g.host(x[:4096]))
        return rel(g.host(y[:4096]), xh / np.sqrt((xh * xh).sum(1, keepdims=True)
                                                   + L2_EPS))
    return [np.uint32(n), x, y], ((32 * n + 255) // 256,), (256,), check, {}
