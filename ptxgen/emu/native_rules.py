"""Lowering rules that differ on the host (emu.native_lower): the interpreter's semantics where
PTX's differ from LLVM's, refusals where the host cannot match the interpreter bit for bit."""
from llvmlite import ir

from ..ir import types as T
from ..llvm import rules, rules_convert
from ..llvm.lower import RULES
from ..llvm.values import F64, from_bits, resize, to_bits


def _host_minmax(f, ins, row):
    """The interpreter's min/max: NaN loses to a number, -0.0 orders below +0.0."""
    t = ins.type
    if not t.is_float:
        return RULES["minmax"](f, ins, row)
    if "NaN" in ins.mods or "xorsign" in ins.mods or "ftz" in ins.mods:
        f.fail("this min/max variant is not available to the native engine")
    b = f.b
    a, c = (f.read(x, t) for x in ins.operands[1:3])
    is_min = ins.opcode == "min"
    less = b.fcmp_ordered("<" if is_min else ">", a, c)
    more = b.fcmp_ordered(">" if is_min else "<", a, c)
    ab, cb = to_bits(b, a), to_bits(b, c)
    equal = from_bits(b, b.or_(ab, cb) if is_min else b.and_(ab, cb), t)
    v = b.select(less, a, b.select(more, c, equal))
    v = b.select(b.fcmp_unordered("uno", a, a), c, b.select(b.fcmp_unordered("uno", c, c), a, v))
    f.write(ins.operands[0], v, t)


def _host_arith(f, ins, row):
    t = ins.type
    if t.is_float and ({"approx", "full", "ftz", "sat"} & set(ins.mods) or
                       (t.bits == 16 and ins.opcode == "div")):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    if not t.is_float and ins.opcode in ("div", "rem"):
        return _host_int_div(f, ins, t)
    RULES["arith"](f, ins, row)


def _host_int_div(f, ins, t):
    """PTX on the interpreter: x/0 is all ones (unsigned) or -1, x%0 is x; MIN/-1 wraps."""
    b = f.b
    a, d = (f.read(x, t) for x in ins.operands[1:3])
    zero = ir.Constant(a.type, 0)
    d0 = b.icmp_unsigned("==", d, zero)
    unsafe = d0
    if t.is_signed:
        lo = ir.Constant(a.type, -(1 << (t.bits - 1)))
        unsafe = b.or_(d0, b.and_(b.icmp_signed("==", a, lo),
                                  b.icmp_signed("==", d, ir.Constant(a.type, -1))))
    dd = b.select(unsafe, ir.Constant(a.type, 1), d)
    if ins.opcode == "div":
        q = (b.sdiv if t.is_signed else b.udiv)(a, dd)
        v = b.select(d0, ir.Constant(a.type, -1), q)
    else:
        r = (b.srem if t.is_signed else b.urem)(a, dd)
        v = b.select(d0, a, r)
    f.write(ins.operands[0], v, t)


def _host_fma(f, ins, row):
    if ins.type.bits == 16 or set(ins.mods) - {"rn", ins.type.name}:
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    RULES["fma"](f, ins, row)


def _host_math(f, ins, row):
    """rcp.rn and sqrt.rn are IEEE operations the host has; the approximations are not."""
    t = ins.type
    if set(ins.mods) - {"rn", t.name} or t.bits not in (32, 64):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    a = f.read(ins.operands[1], t)
    if ins.opcode == "rcp":
        v = f.b.fdiv(ir.Constant(a.type, 1.0), a)
    elif ins.opcode == "sqrt":
        v = f.call(f"llvm.sqrt.f{t.bits}", a.type, a)
    else:
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    f.write(ins.operands[0], v, t)


def _host_cvt(f, ins, row):
    types = ins.types
    if len(types) != 2 or {"ftz", "sat"} & set(ins.mods) or T.bf16 in types:
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    dt, stp = types
    rnd = rules._rounding(ins)
    if stp.is_float and not dt.is_float:
        return f.write(ins.operands[0], _float_to_int(f, ins, dt, stp, rnd), dt)
    if dt.is_float and rnd not in (None, "rn") and not (dt.bits == stp.bits and stp.is_float):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    rules_convert.cvt(f, ins, row)


def _float_to_int(f, ins, dt, stp, rnd):
    """Round, then saturate to dt's range; NaN converts to 0."""
    b = f.b
    from ..llvm.table import ROUND_INTEGRAL
    if rnd not in ROUND_INTEGRAL:
        f.fail("float to integer conversion without an integer rounding")
    x = b.fpext(f.read(ins.operands[1], stp), F64) if stp.bits < 64 else \
        f.read(ins.operands[1], stp)
    r = f.call(f"{ROUND_INTEGRAL[rnd]}.f64", F64, x)
    it = ir.IntType(dt.bits)
    if dt.is_signed:
        lo, hi = -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
        conv = b.fptosi
    else:
        lo, hi = 0, (1 << dt.bits) - 1
        conv = b.fptoui
    too_big = b.fcmp_ordered(">=", r, ir.Constant(F64, float(hi) + 1.0))
    too_small = b.fcmp_ordered("<", r, ir.Constant(F64, float(lo)))
    safe = b.select(b.or_(too_big, b.or_(too_small, b.fcmp_unordered("uno", r, r))),
                    ir.Constant(F64, 0.0), r)
    v = conv(safe, it)
    v = b.select(too_big, ir.Constant(it, hi), v)
    return b.select(too_small, ir.Constant(it, lo), v)


def _refuse(f, ins, row):
    f.fail(f"{ins.opcode} is not available to the native engine")


def _host_cvta(f, ins, row):
    """Generic addresses are host addresses: shared/local windows are offsets in their
    buffers, so cvta adds or subtracts the buffer's base; global is the identity."""
    from ..llvm.values import ADDRSPACE
    space = next(m for m in ins.mods if m in ADDRSPACE)
    t = ins.type
    b = f.b
    v = resize(b, to_bits(b, f.read(ins.operands[1], t)), 64, False)
    if space in ("shared", "local", "const"):
        base = f._space_base(space)
        v = b.sub(v, base) if "to" in ins.mods else b.add(v, base)
    elif space != "global":
        f.fail(f"cvta .{space} is not available to the native engine")
    f.write(ins.operands[0], resize(b, v, t.bits, False), t)


HOST_RULES = {"minmax": _host_minmax, "arith": _host_arith, "fma": _host_fma,
              "nvvm_math": _host_math, "cvt": _host_cvt, "cvta": _host_cvta,
              "asm": _refuse, "shuffle": _refuse, "vote": _refuse, "cp_async": _refuse,
              "membar": lambda f, ins, row: None}    # one thread at a time: nothing to order
