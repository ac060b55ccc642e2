"""PTX kernels of the fifth held-out group (held5, benchmarks/model_set_held5.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators);
model_set.py loads and launches them as it does held4's (raw addresses, pointer parameters
emitted as plain .u64).
"""
import re

from ptxgen import emit_module
from ptxgen.ir import Builder, Instr, Module, Param, ptr
from ptxgen.ir import types as T


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
    return _plain_pointers(emit_module(m)), "hfma2_axpy"


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
        r = _rem(b, i, hw)
        yy = b.div(r, w, name="y")
        xx = _rem(b, r, w)
        sz = _rem(b, b.add(z, dz), d)
        sy = _rem(b, b.add(yy, dy), h)
        sx = _rem(b, b.add(xx, dx), w)
        s = b.mad(b.mad(sz, h, sy), w, sx, name="s")
        v = b.ld("global", T.f32, b.element_addr(src, s, 4), name="v")
        b.st("global", b.element_addr(dst, i, 4), v)
    b.ret()
    return _plain_pointers(emit_module(m)), "divmod_roll"


def _plain_pointers(ptx):
    return re.sub(r" \.ptr \.global \.align \d+", "", ptx)


def _rem(b, x, y):
    out = b.reg(T.u32, "rm")
    b.emit(Instr("rem", ("u32",), (out, x, y)))
    return out


# family: builder of (PTX text, entry)
KERNELS = {"ptx_hfma2_axpy": hfma2_axpy, "ptx_divmod_roll": divmod_roll}
