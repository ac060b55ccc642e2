"""Bit-field and byte instructions: popc, clz, brev, bfind, bfe, bfi, prmt, lop3, shf (funnel
shifts), dp4a/dp2a. Bit positions and lengths follow the PTX ISA's pseudo-code, including its
clamps (a field reaching past the register, shift amounts past the width)."""
import numpy as np

from ..ir import types as T
from .operands import int_type, make, sources
from .values import UNSIGNED, storage

_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)


def build_unary_bits(ctx, ins):
    op = ins.opcode
    t = int_type(ctx, ins)
    dt = storage(t)
    a, = sources(ctx, ins, 1)
    w = ctx.write(ins.operands[0])
    if op == "popc":
        return make(w, [a], lambda x: np.bitwise_count(x).astype(_U32))
    if op == "clz":
        bits = dt.itemsize * 8
        return make(w, [a], lambda x: (bits - bit_length(x)).astype(_U32))
    if op == "brev":
        return make(w, [a], lambda x: brev(x, dt))
    shift = "shiftamt" in ins.mods
    return make(w, [a], lambda x: bfind(x, dt, shift))


def bit_length(x):
    """Bits needed for unsigned x (0 for 0), as uint32."""
    u = np.asarray(x).view(UNSIGNED[np.asarray(x).dtype.itemsize]).astype(_U64)
    for s in (1, 2, 4, 8, 16, 32):
        u = u | (u >> np.uint64(s))
    return np.bitwise_count(u).astype(_U32)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def brev(x, dt):
    b = np.ascontiguousarray(np.asarray(x)).view(np.uint8).reshape(np.shape(x) + (dt.itemsize,))
    return np.ascontiguousarray(_REV8[b][..., ::-1]).view(dt).reshape(np.shape(x))


def bfind(x, dt, shiftamt):
    bits = dt.itemsize * 8
    x = np.asarray(x)
    v = np.where(x < 0, ~x, x) if dt.kind == "i" else x
    n = bit_length(v).astype(np.int64)
    pos = n - 1
    if shiftamt:
        pos = np.where(n > 0, bits - 1 - pos, -1)
    return np.where(n > 0, pos, -1).astype(np.int64).astype(_U64).astype(_U32)


def build_bfe(ctx, ins):
    t = int_type(ctx, ins)
    dt = storage(t)
    a, = sources(ctx, ins, 1)
    b, c = sources(ctx, ins, 2, dt=_U32, t=T.u32, start=2)
    w = ctx.write(ins.operands[0])
    bits = dt.itemsize * 8
    ut = UNSIGNED[dt.itemsize]
    signed = dt.kind == "i"

    def compute(x, pos, ln):
        pos = (np.asarray(pos) & 0xFF).astype(np.int64)
        ln = (np.asarray(ln) & 0xFF).astype(np.int64)
        u = np.asarray(x).view(ut).astype(_U64)
        sh = np.minimum(pos, 63).astype(_U64)
        field = np.where(pos >= bits, np.uint64(0), u >> sh)
        n = np.minimum(ln, 64)
        mask = np.where(n >= 64, ~np.uint64(0), (np.uint64(1) << n.astype(_U64)) - np.uint64(1))
        field &= mask
        if signed:
            msb = np.minimum(pos + ln - 1, bits - 1)
            sbit = np.where(ln == 0, 0, (u >> np.maximum(msb, 0).astype(_U64)) & np.uint64(1))
            ext = np.where((sbit == 1) & (ln < bits), ~mask, np.uint64(0))
            field |= ext
        return field.astype(ut).view(dt)
    return make(w, [a, b, c], compute)


def build_bfi(ctx, ins):
    t = int_type(ctx, ins)
    dt = storage(t)
    ut = UNSIGNED[dt.itemsize]
    f, b = sources(ctx, ins, 2, dt=ut)
    c, d = sources(ctx, ins, 2, dt=_U32, t=T.u32, start=3)
    w = ctx.write(ins.operands[0])
    bits = dt.itemsize * 8

    def compute(fv, bv, pos, ln):
        pos = (np.asarray(pos) & 0xFF).astype(np.int64)
        ln = (np.asarray(ln) & 0xFF).astype(np.int64)
        n = np.clip(np.minimum(ln, bits - pos), 0, 64)
        mask = np.where(n >= 64, ~np.uint64(0), (np.uint64(1) << n.astype(_U64)) - np.uint64(1))
        sh = np.minimum(pos, 63).astype(_U64)
        mask = np.where(pos >= bits, np.uint64(0), mask << sh)
        fv = np.asarray(fv).astype(_U64)
        bv = np.asarray(bv).astype(_U64)
        return ((bv & ~mask) | ((fv << sh) & mask)).astype(ut)
    return make(w, [f, b, c, d], compute)


def build_prmt(ctx, ins):
    if set(ins.mods) - {"b32"}:
        ctx.fail("only the default prmt mode is emulated")
    a, b, c = sources(ctx, ins, 3, dt=_U32, t=T.b32)
    w = ctx.write(ins.operands[0])

    def compute(x, y, sel):
        src = (np.asarray(y).astype(_U64) << np.uint64(32)) | np.asarray(x).astype(_U64)
        sel = np.asarray(sel).astype(_U64)
        out = np.zeros(np.broadcast(src, sel).shape, _U64)
        for i in range(4):
            s = (sel >> np.uint64(4 * i)) & np.uint64(0xF)
            byte = (src >> ((s & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            byte = np.where(s & np.uint64(8), np.where(byte & np.uint64(0x80),
                                                       np.uint64(0xFF), np.uint64(0)), byte)
            out |= byte << np.uint64(8 * i)
        return out.astype(_U32)
    return make(w, [a, b, c], compute)


def build_lop3(ctx, ins):
    t = int_type(ctx, ins)
    dt = storage(t)
    a, b, c = sources(ctx, ins, 3)
    lut_op = ins.operands[4] if len(ins.operands) > 4 else None
    if lut_op is None or not hasattr(lut_op, "value"):
        ctx.fail("lop3 needs a constant lookup table")
    lut = int(lut_op.value) & 0xFF
    w = ctx.write(ins.operands[0])

    def compute(x, y, z):
        x, y, z = np.asarray(x), np.asarray(y), np.asarray(z)
        r = np.zeros(np.broadcast(x, y, z).shape, dt)
        for i in range(8):
            if lut >> i & 1:
                r |= (x if i & 4 else ~x) & (y if i & 2 else ~y) & (z if i & 1 else ~z)
        return r
    return make(w, [a, b, c], compute)


def build_shf(ctx, ins):
    """shf.l/.r.wrap/.clamp.b32 d, a, b, c: shift the 64-bit b:a left (keeping the upper half)
    or right (keeping the lower half) by c, taken mod 32 (.wrap) or capped at 32 (.clamp)."""
    mods = set(ins.mods)
    if not {"l", "r"} & mods or not {"wrap", "clamp"} & mods:
        ctx.fail("shf needs .l or .r and .wrap or .clamp")
    left, clamp = "l" in mods, "clamp" in mods
    a, b = sources(ctx, ins, 2, dt=_U32, t=T.b32)
    c, = sources(ctx, ins, 1, dt=_U32, t=T.u32, start=3)

    def compute(lo, hi, n):
        n = np.minimum(n, 32) if clamp else np.asarray(n) & _U32.type(31)
        v = (np.asarray(hi).astype(_U64) << np.uint64(32)) | np.asarray(lo).astype(_U64)
        n = np.asarray(n).astype(_U64)
        if left:
            return ((v << n) >> np.uint64(32)).astype(_U32)
        return (v >> n).astype(_U32)
    return make(ctx.write(ins.operands[0]), [a, b, c], compute)


def build_dp(ctx, ins):
    """dp4a.atype.btype d, a, b, c: c + the four byte products of a and b; dp2a.lo/.hi: c +
    the two 16-bit halves of a times two bytes of b (the low or high pair)."""
    types = ins.types
    if len(types) != 2:
        ctx.fail(f"{ins.opcode} needs the types of a and b")
    ta, tb = types
    d_signed = ta.kind == "sint" or tb.kind == "sint"
    a, = sources(ctx, ins, 1, dt=_U32, t=T.u32)
    b, = sources(ctx, ins, 1, dt=_U32, t=T.u32, start=2)
    c, = sources(ctx, ins, 1, dt=np.int32 if d_signed else _U32, t=T.s32 if d_signed else T.u32,
               start=3)
    four = ins.opcode == "dp4a"
    hi = "hi" in ins.mods

    def parts(x, size, signed, count, first=0):
        x = np.asarray(x).astype(np.int64)
        out = []
        for k in range(first, first + count):
            v = (x >> (8 * size * k)) & ((1 << (8 * size)) - 1)
            if signed:
                v = np.where(v >= 1 << (8 * size - 1), v - (1 << (8 * size)), v)
            out.append(v)
        return out

    def compute(x, y, z):
        if four:
            pa = parts(x, 1, ta.kind == "sint", 4)
            pb = parts(y, 1, tb.kind == "sint", 4)
        else:
            pa = parts(x, 2, ta.kind == "sint", 2)
            pb = parts(y, 1, tb.kind == "sint", 2, 2 if hi else 0)
        acc = np.asarray(z).astype(np.int64) + sum(p * q for p, q in zip(pa, pb))
        return acc.astype(np.int64).astype(np.uint64).astype(_U32).view(
            np.int32 if d_signed else _U32)
    return make(ctx.write(ins.operands[0]), [a, b, c], compute)


BUILDERS = {"popc": build_unary_bits, "clz": build_unary_bits, "brev": build_unary_bits,
            "bfind": build_unary_bits, "bfe": build_bfe, "bfi": build_bfi, "prmt": build_prmt,
            "lop3": build_lop3, "shf": build_shf, "dp4a": build_dp, "dp2a": build_dp}
