"""PTX kernels of the seventh held-out group (held7, benchmarks/model_set_held7.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators);
model_set.py loads and launches them as it does held5's (raw addresses, pointer parameters
emitted as plain .u64).
"""
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Module, Param, ptr
from ptxgen.ir import types as T

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
    return _plain_pointers(emit_module(m)), "splitmix64"


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
    return _plain_pointers(emit_module(m)), "tanh_ex2"


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
    return _plain_pointers(emit_module(m)), "axpy_v2f64"


# family: builder of (PTX text, entry)
KERNELS = {"ptx_splitmix64": splitmix64, "ptx_tanh_ex2": tanh_ex2,
           "ptx_axpy_v2f64": axpy_v2f64}
