"""Lowering rules for arithmetic, comparisons and moves: one function per instruction shape,
driven by the rows of ptxgen.llvm.table (memory and warp rules: rules_memory; conversions and
inline PTX: rules_convert).

Each rule gets the frame (builder, registers), the instruction and its table row, and writes the
instruction's results. Where PTX pins down behaviour LLVM leaves undefined (shift amounts past
the width, float→int overflow, NaN in min/max) the rule spells PTX's behaviour out or uses the
NVVM intrinsic that is exactly the PTX instruction.
"""
from llvmlite import ir

from ..ir import types as T
from ..ir.values import PredPair, Reg, Vec
from . import table
from .values import I1, from_bits, ltype, resize, to_bits

ROUNDINGS = tuple(table.ROUNDING)


def rounding_mod(ins):
    for m in ins.mods:
        if m in table.ROUNDING:
            return m
    return None


def ftz_mod(ins):
    return ".ftz" if "ftz" in ins.mods else ""


def _nvvm_float(f, stem, ins, t, values):
    """llvm.nvvm.<stem>.<rnd>[.ftz].<f|d>(values) for PTX's explicit rounding modes."""
    if t.bits not in (32, 64):
        f.fail(f"rounding .{rounding_mod(ins)} on .{t} has no LLVM intrinsic")
    rnd = table.ROUNDING[rounding_mod(ins) or "rn"]
    ftz = ftz_mod(ins) if t.bits == 32 else ""
    return f.call(f"llvm.nvvm.{stem}.{rnd}{ftz}.{table.FLOAT_STEM[t.bits]}", ltype(t), *values)


def _plain_float(ins, t):
    """Whether LLVM's own instruction is exact here: round-to-nearest, no flush-to-zero."""
    return rounding_mod(ins) in (None, "rn") and not (ftz_mod(ins) and t.bits == 32) \
        and "sat" not in ins.mods


def arith(f, ins, row):
    t = ins.type
    a, c = (f.read(x, t) for x in ins.operands[1:3])
    b = f.b
    if t.is_float:
        if _plain_float(ins, t) and row.data.get("float"):
            v = getattr(b, row.data["float"])(a, c)
        elif row.data.get("rounded"):
            if row.data.get("negate_b"):
                c = _fneg(f, c)
            v = _nvvm_float(f, row.data["rounded"], ins, t, (a, c))
        else:
            f.fail(f"no LLVM lowering for .{t}")
    else:
        op = row.data.get("int") or row.data.get("sint" if t.is_signed else "uint")
        if op is None:
            f.fail(f"no LLVM lowering for .{t}")
        v = getattr(b, op)(a, c)
    f.write(ins.operands[0], v, t)


def _fneg(f, v):
    if f.dialect == "nvvm":              # LLVM 7 (libNVVM's base) has no fneg instruction
        return f.b.fsub(ir.Constant(v.type, -0.0), v)
    return f.b.fneg(v)


def _int_mode(ins):
    for m in ("lo", "hi", "wide"):
        if m in ins.mods:
            return m
    return "lo"


def _mul_int(f, ins, t, a, c):
    """Integer product for mul/mad by mode: lo (t), hi (upper half of t), wide (2× t)."""
    b, mode = f.b, _int_mode(ins)
    if mode == "lo":
        return b.mul(a, c), t
    wide = ir.IntType(2 * t.bits)
    ext = b.sext if t.is_signed else b.zext
    p = b.mul(ext(a, wide), ext(c, wide))
    if mode == "wide":
        return p, T.TYPES[f"{t.name[0]}{2 * t.bits}"]
    return b.trunc(b.lshr(p, ir.Constant(wide, t.bits)), ltype(t)), t


def product(f, ins, row):
    """mul and mad: integer products by mode; floats go to arith (mul) or fma (mad)."""
    t = ins.type
    if t.is_float:
        return (fma if row.data.get("addend") else arith)(f, ins, row)
    a, c = (f.read(x, t) for x in ins.operands[1:3])
    v, rt = _mul_int(f, ins, t, a, c)
    if row.data.get("addend"):
        v = f.b.add(v, f.read(ins.operands[3], rt))
    f.write(ins.operands[0], v, rt)


def fma(f, ins, row):
    t = ins.type
    a, c, d = (f.read(x, t) for x in ins.operands[1:4])
    if _plain_float(ins, t):
        v = f.call(f"llvm.fma.{float_suffix(t)}", ltype(t), a, c, d)
    else:
        v = _nvvm_float(f, "fma", ins, t, (a, c, d))
    f.write(ins.operands[0], v, t)


def float_suffix(t):
    return {16: "f16", 32: "f32", 64: "f64"}[t.bits]


def minmax(f, ins, row):
    t = ins.type
    a, c = (f.read(x, t) for x in ins.operands[1:3])
    b = f.b
    if t.is_float:
        if t.bits in (32, 64):
            suffix = ftz_mod(ins) + "." + table.FLOAT_STEM[t.bits]
            v = f.call(f"llvm.nvvm.{row.data['nvvm']}{suffix}", ltype(t), a, c)
        else:
            v = f.call(f"{row.data['llvm']}.{float_suffix(t)}", ltype(t), a, c)
    else:
        cmp = b.icmp_signed if t.is_signed else b.icmp_unsigned
        v = b.select(cmp(row.data["cmp"], a, c), a, c)
    f.write(ins.operands[0], v, t)


def neg(f, ins, row):
    t = ins.type
    a = f.read(ins.operands[1], t)
    v = _fneg(f, a) if t.is_float else f.b.sub(ir.Constant(a.type, 0), a)
    f.write(ins.operands[0], v, t)


def abs_(f, ins, row):
    t = ins.type
    a = f.read(ins.operands[1], t)
    b = f.b
    if t.is_float:
        bits = to_bits(b, a)
        v = from_bits(b, b.and_(bits, ir.Constant(bits.type, (1 << (t.bits - 1)) - 1)), t)
    else:
        v = b.select(b.icmp_signed("<", a, ir.Constant(a.type, 0)),
                     b.sub(ir.Constant(a.type, 0), a), a)
    f.write(ins.operands[0], v, t)


def not_(f, ins, row):
    t = ins.type
    f.write(ins.operands[0], f.b.not_(f.read(ins.operands[1], t)), t)


def shift(f, ins, row):
    """PTX clamps shift amounts: past the width, shl and shr.u give 0 and shr.s the sign."""
    t = ins.type
    b = f.b
    a = f.read(ins.operands[1], t)
    n = resize(b, f.read(ins.operands[2], T.u32), max(32, t.bits), False)
    limit = ir.Constant(n.type, t.bits - 1)
    big = b.icmp_unsigned(">", n, limit)
    n = resize(b, b.select(big, limit, n), t.bits, False)
    if row.data["left"]:
        v = b.select(big, ir.Constant(a.type, 0), b.shl(a, n))
    elif t.is_signed:
        v = b.ashr(a, n)
    else:
        v = b.select(big, ir.Constant(a.type, 0), b.lshr(a, n))
    f.write(ins.operands[0], v, t)


def bitcount(f, ins, row):
    t = ins.type
    a = f.read(ins.operands[1], t)
    args = (a, ir.Constant(I1, 0)) if row.data["fn"] == "llvm.ctlz" else (a,)
    v = f.call(f"{row.data['fn']}.i{t.bits}", a.type, *args)
    if row.data.get("same_width"):
        return f.write(ins.operands[0], v, t)
    f.write(ins.operands[0], resize(f.b, v, 32, False), T.u32)


def nvvm_math(f, ins, row):
    """rcp/sqrt/rsqrt/sin/cos/lg2/ex2: llvm.nvvm.<op>.<approx|rn|…>[.ftz].<f|d>."""
    t = ins.type
    a = f.read(ins.operands[1], t)
    mode = "approx" if "approx" in ins.mods else table.ROUNDING.get(rounding_mod(ins) or "", "")
    if t.bits not in (32, 64) or not mode:
        f.fail(f"no NVVM intrinsic for {ins.full_opcode}")
    name = f"llvm.nvvm.{ins.opcode}.{mode}{ftz_mod(ins)}.{table.FLOAT_STEM[t.bits]}"
    f.write(ins.operands[0], f.call(name, ltype(t), a), t)


def _compare(f, cmp, t, a, c):
    b = f.b
    if t.is_float:
        ordered, op = table.FLOAT_CMP[cmp]
        return (b.fcmp_ordered if ordered else b.fcmp_unordered)(op, a, c)
    signed = t.is_signed and cmp not in table.UNSIGNED_ONLY
    return (b.icmp_signed if signed else b.icmp_unsigned)(table.INT_CMP[cmp], a, c)


def setp(f, ins, row):
    """setp.cmp[.bool].t d[|q], a, b[, c]: q gets the complement, both combined with c."""
    t = ins.type
    cmp = next((m for m in ins.mods if m in table.INT_CMP or m in table.FLOAT_CMP), None)
    if cmp is None:
        f.fail("setp without a comparison")
    b = f.b
    v = _compare(f, cmp, t, f.read(ins.operands[1], t), f.read(ins.operands[2], t))
    dest = ins.operands[0]
    second = None
    if isinstance(dest, PredPair):
        dest, second = dest.first, dest.second
    combine = next((m for m in ins.mods if m in ("and", "or", "xor")), None)
    outs = [(dest, v)] + ([(second, b.not_(v))] if second is not None else [])
    for reg, val in outs:
        if combine:
            val = getattr(b, combine + ("_" if combine != "xor" else ""))(
                val, f.read(ins.operands[3], T.pred))
        f.write(reg, val, T.pred)


def selp(f, ins, row):
    t = ins.type
    a, c = (f.read(x, t) for x in ins.operands[1:3])
    p = f.read(ins.operands[3], T.pred)
    f.write(ins.operands[0], f.b.select(p, a, c), t)


def mov(f, ins, row):
    t = ins.type
    dst, src = ins.operands[0], ins.operands[1]
    b = f.b
    if isinstance(dst, Vec):            # unpack: mov.b64 {lo, hi}, %rd
        whole = to_bits(b, f.read(src, t))
        step = t.bits // len(dst.items)
        for i, r in enumerate(dst.items):
            part = b.trunc(b.lshr(whole, ir.Constant(whole.type, i * step)), ir.IntType(step))
            if isinstance(r, Reg):
                f.write(r, part, T.TYPES[f"b{step}"])
        return
    if isinstance(src, Vec):            # pack: mov.b64 %rd, {lo, hi}
        step = t.bits // len(src.items)
        acc = ir.Constant(ir.IntType(t.bits), 0)
        for i, x in enumerate(src.items):
            part = b.zext(to_bits(b, f.read(x, T.TYPES[f"b{step}"])), acc.type)
            acc = b.or_(acc, b.shl(part, ir.Constant(acc.type, i * step)))
        return f.write(dst, acc, t)
    f.write(dst, f.read(src, t), t)
