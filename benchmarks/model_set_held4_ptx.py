"""PTX kernels of the fourth held-out group (held4, benchmarks/model_set_held4.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators):
model_set.py loads the emitted text through cuda.core, as it does model_set_ptx.py's, and
launches it with raw addresses: the pointer parameters are emitted as plain .u64 (what a PTX
writer declares; the body still converts them with cvta.to.global).
"""
from ptxgen import emit_module
from ptxgen.ir import Builder, Instr, Module, Param, ptr
from ptxgen.ir import types as T


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
    return _plain_pointers(emit_module(m)), "dp4a_dot"


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
    return _plain_pointers(emit_module(m)), "xorshift_uniform"


def _plain_pointers(ptx):
    return ptx.replace(" .ptr .global .align 4", "")


# family: builder of (PTX text, entry)
KERNELS = {"ptx_dp4a_dot": dp4a_dot, "ptx_xorshift": xorshift_uniform}
