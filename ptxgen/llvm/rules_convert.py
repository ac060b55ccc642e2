"""Lowering rules for conversions (cvt) and, for what LLVM lacks, inline PTX (see rules.py)."""
from llvmlite import ir

from ..ir import types as T
from ..ir.values import Addr, Imm, Reg
from . import table
from .rules import float_suffix, ftz_mod, rounding_mod
from .values import F32, I32, I64, ltype, resize, to_bits


def cvt(f, ins, row):
    types = ins.types
    if len(types) != 2:
        f.fail("cvt needs a destination and a source type")
    dt, stp = types
    rnd = rounding_mod(ins)
    b = f.b
    a = f.read(ins.operands[1], stp)
    if "sat" in ins.mods or ("ftz" in ins.mods and dt.is_float and stp.is_float):
        return asm(f, ins, row)
    if stp == T.bf16 and dt == T.f32:   # exact: bf16 is the upper half of an f32
        v = b.bitcast(b.shl(b.zext(a, I32), ir.Constant(I32, 16)), F32)
    elif T.bf16 in (dt, stp):
        return asm(f, ins, row)
    elif dt.is_float and stp.is_float:
        v = _cvt_float(f, ins, dt, stp, a, rnd)
    elif stp.is_float:
        v = _cvt_to_int(f, ins, dt, stp, a, rnd)
    elif dt.is_float:
        v = _cvt_to_float(f, ins, dt, stp, a, rnd)
    else:                               # integer → integer: the source's sign extends
        v = resize(b, a, dt.bits, stp.is_signed)
    if v is None:
        return asm(f, ins, row)
    f.write(ins.operands[0], v, dt)


def _cvt_float(f, ins, dt, stp, a, rnd):
    b = f.b
    if dt.bits == stp.bits:
        if rnd in table.ROUND_INTEGRAL:
            return f.call(f"{table.ROUND_INTEGRAL[rnd]}.{float_suffix(dt)}", ltype(dt), a)
        return a
    if dt.bits > stp.bits:
        return b.fpext(a, ltype(dt))
    if rnd in (None, "rn"):
        return b.fptrunc(a, ltype(dt))
    if (stp.bits, dt.bits) == (64, 32):
        return f.call(f"llvm.nvvm.d2f.{table.ROUNDING[rnd]}", F32, a)
    return None


def _cvt_to_int(f, ins, dt, stp, a, rnd):
    """float → int saturates in PTX (NaN → 0): NVVM's f2i/d2ll… are exactly that cvt; results
    narrower than 32 bits are clamped to their range after."""
    b = f.b
    if rnd not in ("rni", "rzi", "rmi", "rpi"):
        return None
    if stp.bits == 16:
        a, stp = b.fpext(a, F32), T.f32
    bits = max(32, dt.bits)
    stem = table.INT_STEM[(dt.is_signed, bits)]
    ftz = ftz_mod(ins) if stp.bits == 32 else ""
    name = f"llvm.nvvm.{table.FLOAT_STEM[stp.bits][0]}2{stem}.{table.ROUNDING[rnd]}{ftz}"
    v = f.call(name, ir.IntType(bits), a)
    if dt.bits < bits:
        lo, hi = ((-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.is_signed
                  else (0, (1 << dt.bits) - 1))
        cmp = b.icmp_signed if dt.is_signed else b.icmp_unsigned
        v = b.select(cmp("<", v, ir.Constant(v.type, lo)), ir.Constant(v.type, lo), v)
        v = b.select(cmp(">", v, ir.Constant(v.type, hi)), ir.Constant(v.type, hi), v)
        v = b.trunc(v, ir.IntType(dt.bits))
    return v


def _cvt_to_float(f, ins, dt, stp, a, rnd):
    b = f.b
    if stp.bits < 32:
        a, stp = resize(b, a, 32, stp.is_signed), T.TYPES[f"{stp.name[0]}32"]
    exact = dt.bits == 64 and stp.bits == 32
    if rnd in (None, "rn") or exact:
        return (b.sitofp if stp.is_signed else b.uitofp)(a, ltype(dt))
    if dt.bits == 16:
        return None
    stem = table.INT_STEM[(stp.is_signed, stp.bits)]
    return f.call(f"llvm.nvvm.{stem}2{table.FLOAT_STEM[dt.bits]}.{table.ROUNDING[rnd]}",
                  ltype(dt), a)


# -- inline PTX for what LLVM lacks ----------------------------------------------------------
_CONSTRAINT = {16: "h", 32: "r", 64: "l"}


def asm(f, ins, row):
    """The instruction as inline PTX: registers pass as integers of their width ('h', 'r',
    'l'), memory operands as 64-bit addresses. Predicates cannot cross an asm boundary in
    libNVVM, so instructions reading or writing them do not lower this way."""
    b = f.b
    n_dest = ins.n_dests
    dests = ins.operands[:n_dest]
    outs, ins_c, args, texts = [], [], [], []
    types = ins.types
    for k, d in enumerate(dests):
        if not isinstance(d, Reg) or d.type.kind == "pred":
            f.fail("no LLVM lowering (inline PTX cannot write this destination)")
        outs.append(d)
    pos = len(outs)
    for x in ins.operands[n_dest:]:
        if isinstance(x, Addr):
            ptr = f.pointer(x, "generic", ir.IntType(8))
            args.append(b.ptrtoint(ptr, I64))
            ins_c.append("l")
            texts.append(f"[${pos}]")
            pos += 1
        elif isinstance(x, Imm):
            texts.append(str(x))
        elif isinstance(x, Reg) and x.type.kind != "pred":
            src_t = types[-1] if types else x.type
            if src_t.bits != x.type.bits:
                src_t = x.type
            bits = T.TYPES[f"b{src_t.bits}"] if src_t.bits in (16, 32, 64) else None
            if bits is None:
                f.fail("no LLVM lowering (inline PTX needs 16/32/64-bit operands)")
            args.append(to_bits(b, f.read(x, bits)))
            ins_c.append(_CONSTRAINT[src_t.bits])
            texts.append(f"${pos}")
            pos += 1
        else:
            f.fail("no LLVM lowering (inline PTX cannot read this operand)")
    out_texts = [f"${i}" for i in range(len(outs))]
    text = ins.full_opcode + " " + ", ".join(out_texts + texts) + ";"
    if not outs and not texts:
        text = ins.full_opcode + ";"
    cons = ",".join([f"={_CONSTRAINT.get(o.type.bits, 'r')}" for o in outs] + ins_c)
    if not outs:
        ret = ir.VoidType()
    elif len(outs) == 1:
        ret = ir.IntType(outs[0].type.bits)
    else:
        ret = ir.LiteralStructType([ir.IntType(o.type.bits) for o in outs])
    if any(o.type.bits not in _CONSTRAINT for o in outs):
        f.fail("no LLVM lowering (inline PTX needs 16/32/64-bit destinations)")
    fty = ir.FunctionType(ret, [a.type for a in args])
    r = b.asm(fty, text, cons, args, not outs or ins.opcode not in ("cvt", "tanh"))
    for i, o in enumerate(outs):
        v = r if len(outs) == 1 else b.extract_value(r, i)
        f.write(o, v, T.TYPES[f"b{o.type.bits}"])
