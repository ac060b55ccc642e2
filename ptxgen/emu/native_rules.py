"""Lowering rules that differ on the host (emu.native_lower): the interpreter's semantics where
PTX's differ from LLVM's, refusals where the host cannot match the interpreter bit for bit."""
from llvmlite import ir

from ..ir import types as T
from ..llvm import rules, rules_convert
from ..llvm.lower import RULES
from ..llvm.values import F64, from_bits, resize, to_bits
from .native_rounding import DIRECTED, directed, directed_f64, fma_f16, narrow_to_f16, to_f64


def _host_minmax(f, ins, row):
    """The interpreter's min/max: NaN loses to a number, -0.0 orders below +0.0."""
    t = ins.type
    if not t.is_float:
        return RULES["minmax"](f, ins, row)
    if "NaN" in ins.mods or "xorsign" in ins.mods or "ftz" in ins.mods or t.name == "bf16":
        # (bf16 values are i16 here: no float compare on them)
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
    rnd = rules.rounding_mod(ins)
    if t == T.f32 and rnd in DIRECTED and ins.opcode in ("add", "sub", "mul", "div"):
        return f.write(ins.operands[0], _directed_arith(f, ins, t), t)
    if t == T.f64 and rnd in DIRECTED and ins.opcode in ("add", "sub", "mul", "div"):
        a, c = (f.read(x, t) for x in ins.operands[1:3])
        return f.write(ins.operands[0], directed_f64(f, ins.opcode, a, c, rnd), t)
    if not t.is_float and ins.opcode in ("div", "rem"):
        return _host_int_div(f, ins, t)
    RULES["arith"](f, ins, row)


def _host_product(f, ins, row):
    """mul/mad: floats as arith (mul) or fma (mad) on the host, integers as everywhere."""
    if ins.type.is_float:
        return (_host_fma if row.data.get("addend") else _host_arith)(f, ins, row)
    RULES["product"](f, ins, row)


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
    if ins.type == T.f32 and rules.rounding_mod(ins) in DIRECTED and \
            not set(ins.mods) - {rules.rounding_mod(ins), "f32"}:
        return f.write(ins.operands[0], _directed_arith(f, ins, T.f32), T.f32)
    if ins.type == T.f16 and set(ins.mods) == {"rn", "f16"}:
        a, c, d = (f.read(x, T.f16) for x in ins.operands[1:4])
        return f.write(ins.operands[0], fma_f16(f, a, c, d), T.f16)
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
    if len(types) != 2 or {"ftz", "sat"} & set(ins.mods):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    dt, stp = types
    rnd = rules.rounding_mod(ins)
    if (dt, stp) == (T.f16, T.f64):     # x86 has no instruction (LLVM would call libgcc)
        if rnd not in DIRECTED + ("rn",):
            f.fail(f"{ins.full_opcode} is not available to the native engine")
        return f.write(ins.operands[0], narrow_to_f16(f, f.read(ins.operands[1], stp), None,
                                                      rnd), dt)
    if (dt, stp) == (T.bf16, T.f32) and rnd in ("rn", "rz"):
        return f.write(ins.operands[0], _f32_to_bf16(f, ins, rnd), dt)
    if T.bf16 in types and (dt, stp) != (T.f32, T.bf16):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    if stp.is_float and not dt.is_float:
        return f.write(ins.operands[0], _float_to_int(f, ins, dt, stp, rnd), dt)
    if dt.is_float and not stp.is_float and (rnd in DIRECTED or (dt == T.f16 and stp.bits > 16)):
        # an integer as an exact sum of two f64, rounded once (f16 through round-to-odd)
        x64, e64 = _int_as_f64_sum(f, f.read(ins.operands[1], stp), stp)
        r = narrow_to_f16(f, x64, e64, rnd or "rn") if dt == T.f16 else \
            directed(f, x64, e64, dt, rnd)
        return f.write(ins.operands[0], r, dt)
    if dt == T.f16 and rnd in DIRECTED and stp != T.f32 and not (stp.is_int and stp.bits <= 16):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    if dt.is_float and rnd in DIRECTED and dt.bits < 64 and \
            (stp.is_float or stp.bits <= 32) and not (dt.bits == stp.bits and stp.is_float):
        # the source is exact in f64 (a float, or an integer of at most 32 bits), and, for an
        # f16 result, in f32 (an f32, or an integer of at most 16 bits)
        b = f.b
        x = f.read(ins.operands[1], stp)
        if stp.is_float:
            x64 = to_f64(b, x)
        else:
            x64 = (b.sitofp if stp.is_signed else b.uitofp)(x, F64)
        return f.write(ins.operands[0], directed(f, x64, None, dt, rnd), dt)
    if (dt, stp) == (T.f64, T.f16):
        return f.write(ins.operands[0], to_f64(f.b, f.read(ins.operands[1], stp)), dt)
    if dt == T.f64 and not stp.is_float and stp.bits <= 32:     # exact: rounding is moot
        x = f.read(ins.operands[1], stp)
        return f.write(ins.operands[0], (f.b.sitofp if stp.is_signed else f.b.uitofp)(x, F64),
                       dt)
    if dt.is_float and rnd not in (None, "rn") and not (dt.bits == stp.bits and stp.is_float):
        f.fail(f"{ins.full_opcode} is not available to the native engine")
    rules_convert.cvt(f, ins, row)


def _int_as_f64_sum(f, x, t):
    """(hi, lo) f64 with hi + lo == x exactly and hi == x rounded to nearest (None for lo when
    x has at most 32 bits, which f64 holds exactly): the halves of a 64-bit integer are exact
    in f64, and TwoSum adds them without loss."""
    from .native_rounding import two_sum
    b = f.b
    conv = b.sitofp if t.is_signed else b.uitofp
    if t.bits <= 32:
        return conv(x, F64), None
    i64 = ir.IntType(64)
    hi = (b.ashr if t.is_signed else b.lshr)(x, ir.Constant(i64, 32))
    lo = b.and_(x, ir.Constant(i64, 0xFFFFFFFF))
    hi64 = b.fmul(conv(hi, F64), ir.Constant(F64, 2.0 ** 32))
    return two_sum(b, hi64, b.uitofp(lo, F64))


def _directed_arith(f, ins, t):
    """add/sub/mul/div/fma.{rz,rm,rp}.f32 in f64 with the exact error: products of f32 are
    exact in f64, TwoSum gives a sum's error, fma the division's remainder."""
    b = f.b
    ops = [b.fpext(f.read(x, t), F64) for x in ins.operands[1:1 + (3 if ins.opcode == "fma"
                                                                     else 2)]]
    a, c = ops[0], ops[1]
    if ins.opcode == "sub":
        c = b.fsub(ir.Constant(F64, -0.0), c)
    err = None
    if ins.opcode == "mul":
        x = b.fmul(a, c)
    elif ins.opcode == "div":
        x = b.fdiv(a, c)
        rem = f.call("llvm.fma.f64", F64, b.fsub(ir.Constant(F64, -0.0), x), c, a)
        err = b.fdiv(rem, c)
    else:
        if ins.opcode == "fma":
            a, c = b.fmul(a, c), ops[2]
        x = b.fadd(a, c)
        bb = b.fsub(x, a)
        err = b.fadd(b.fsub(a, b.fsub(x, bb)), b.fsub(c, bb))     # NaN for infinite terms
        if rules.rounding_mod(ins) == "rm":    # an exact zero sum is -0 rounding down (IEEE)
            i64 = ir.IntType(64)
            both_plus = b.icmp_unsigned("==", b.or_(b.bitcast(a, i64), b.bitcast(c, i64)),
                                        ir.Constant(i64, 0))
            x = b.select(b.and_(b.fcmp_ordered("==", x, ir.Constant(F64, 0.0)),
                                b.not_(both_plus)), ir.Constant(F64, -0.0), x)
    return directed(f, x, err, t, rules.rounding_mod(ins))


def _f32_to_bf16(f, ins, rnd):
    """bf16 is the upper half of an f32: truncation (rz) or round-half-even on the bits (rn,
    overflow to infinity included); NaN stays a (quiet) NaN."""
    b = f.b
    x = f.read(ins.operands[1], T.f32)
    bits = to_bits(b, x)
    c = lambda v: ir.Constant(bits.type, v)   # noqa: E731
    if rnd == "rn":
        odd = b.and_(b.lshr(bits, c(16)), c(1))
        rounded = b.lshr(b.add(bits, b.add(c(0x7FFF), odd)), c(16))
    else:
        rounded = b.lshr(bits, c(16))
    nan = b.or_(b.lshr(bits, c(16)), c(0x40))
    v = b.select(b.fcmp_unordered("uno", x, x), nan, rounded)
    return b.trunc(v, ir.IntType(16))


def _float_to_int(f, ins, dt, stp, rnd):
    """Round, then saturate to dt's range; NaN converts to 0."""
    b = f.b
    from ..llvm.table import ROUND_INTEGRAL
    if rnd not in ROUND_INTEGRAL:
        f.fail("float to integer conversion without an integer rounding")
    x = to_f64(b, f.read(ins.operands[1], stp)) if stp.bits < 64 else \
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
              "product": _host_product,
              "nvvm_math": _host_math, "cvt": _host_cvt, "cvta": _host_cvta,
              "asm": _refuse, "shuffle": _refuse, "vote": _refuse, "cp_async": _refuse,
              "membar": lambda f, ins, row: None}    # one thread at a time: nothing to order
