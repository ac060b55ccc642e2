"""Directed and double-step roundings for the native engine (emu.native_rules), bit-identical to
the interpreter's exact arithmetic (emu.fp) without any library call.

The host rounds to nearest only. A result with another rounding is the round-to-nearest result
stepped by one ulp where that went the wrong way; the direction comes from the sign of the exact
error, which these rules get without loss:

- sums: TwoSum's error term (exact for any two doubles, subnormal results included);
- f64 products and quotients: the error's sign from one fma on the operands scaled by powers of
  two to [1, 2) (exact scaling, so the fma cannot underflow where the unscaled one could);
- narrowing to f16 from f64 or from an exact f64 sum: round-to-odd to f32 first (the rounding
  toward zero, with its last bit set when inexact), then the f32 → f16 rounding the host does in
  hardware; with 13 more bits than f16, round-to-odd makes the second rounding correct for
  every rounding mode (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
  proved algorithms using rounding to odd", IEEE Trans. Computers 2008).
"""
from llvmlite import ir

from ..ir import types as T
from ..llvm.values import F32, F64, from_bits, ltype, to_bits

DIRECTED = ("rz", "rm", "rp")
I64 = ir.IntType(64)


def to_f64(b, x):
    """x (f16, f32 or f64) as f64, exactly; f16 through f32, which x86 converts in hardware
    (f16→f64 directly would be a libgcc call the JIT may not resolve)."""
    if x.type == F64:
        return x
    if x.type == ir.HalfType():
        x = b.fpext(x, F32)
    return b.fpext(x, F64)


def directed(f, x64, e64, t, mode):
    """The value x64 + e64 (exact; e64 None for 0) rounded toward zero / -inf / +inf to the
    float type t (f64, f32, or f16 from at most 24 significant bits: narrow_to_f16 handles
    wider sources): round to nearest, then step one ulp where that went the wrong way. For f64,
    x64 is already the rounded value and only the sign of e64 is used. (x64 - back) + e64 has
    the sign of exact - back: both terms are exact or smaller than half an ulp of f64 where the
    other is not zero."""
    b = f.b
    zero64 = ir.Constant(F64, 0.0)
    if t.bits == 64:
        r = back = x64
        delta = e64 if e64 is not None else zero64
    else:
        lt = ltype(t)
        r = b.fptrunc(x64, lt) if t.bits != 16 else b.fptrunc(b.fptrunc(x64, F32), lt)
        back = to_f64(b, r)
        delta = b.fsub(x64, back)
        if e64 is not None:
            delta = b.fadd(delta, e64)
    bits = to_bits(b, r)
    it = bits.type
    one = ir.Constant(it, 1)
    pos = b.fcmp_ordered(">", back, zero64)
    neg = b.fcmp_ordered("<", back, zero64)
    sign_one = ir.Constant(it, (1 << (t.bits - 1)) | 1)     # the smallest subnormal below 0
    if mode == "rz":
        step = b.or_(b.and_(pos, b.fcmp_ordered("<", delta, zero64)),
                     b.and_(neg, b.fcmp_ordered(">", delta, zero64)))
        new = b.sub(bits, one)
    elif mode == "rm":
        step = b.fcmp_ordered("<", delta, zero64)
        new = b.select(pos, b.sub(bits, one), b.select(neg, b.add(bits, one), sign_one))
    else:
        step = b.fcmp_ordered(">", delta, zero64)
        new = b.select(neg, b.sub(bits, one), b.select(pos, b.add(bits, one), one))
    return from_bits(b, b.select(step, new, bits), t)


def narrow_to_f16(f, x64, e64, mode):
    """x64 + e64 (exact; e64 None for 0) rounded to f16 with `mode` (rn or directed): first to
    f32 by round-to-odd, then to f16 (see the module's note)."""
    b = f.b
    r = directed(f, x64, e64, T.f32, "rz")
    delta = b.fsub(x64, to_f64(b, r))
    if e64 is not None:
        delta = b.fadd(delta, e64)
    inexact = b.fcmp_ordered("!=", delta, ir.Constant(F64, 0.0))     # NaN, inf: exact
    bits = to_bits(b, r)
    odd = from_bits(b, b.or_(bits, b.zext(inexact, bits.type)), T.f32)
    if mode in DIRECTED:
        return directed(f, b.fpext(odd, F64), None, T.f16, mode)
    return b.fptrunc(odd, ir.HalfType())


def two_sum(b, a, c):
    """(a + c rounded, its exact error); the error is NaN when a term is infinite."""
    x = b.fadd(a, c)
    bb = b.fsub(x, a)
    return x, b.fadd(b.fsub(a, b.fsub(x, bb)), b.fsub(c, bb))


def fma_f16(f, a, c, d):
    """fma.rn.f16: the product of two f16 is exact in f64, the sum's error comes from TwoSum,
    and the exact value is narrowed once."""
    b = f.b
    p = b.fmul(to_f64(b, a), to_f64(b, c))
    x, err = two_sum(b, p, to_f64(b, d))
    return narrow_to_f16(f, x, err, "rn")


# -- f64 with directed rounding -----------------------------------------------------------------

def _pow2(b, k):
    """2**k as f64 for an i64 k in [-1022, 1023]."""
    return b.bitcast(b.shl(b.add(k, ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)


def _scale(b, x, k, parts):
    """x * 2**k exactly, for a result that is normal or zero: `parts` multiplications by 2**(k/
    parts) or so, each intermediate lying between x and the result."""
    for i in range(parts, 0, -1):
        step = b.sdiv(k, ir.Constant(I64, i))
        x = b.fmul(x, _pow2(b, step))
        k = b.sub(k, step)
    return x


def _normal_exponent(b, x):
    """k with x * 2**k in [1, 2) for finite nonzero x (subnormals included); 1087 for 0."""
    def biased(v):
        return b.and_(b.lshr(b.bitcast(v, I64), ir.Constant(I64, 52)), ir.Constant(I64, 0x7FF))
    e = biased(x)
    e_sub = b.sub(biased(b.fmul(x, ir.Constant(F64, 2.0 ** 64))), ir.Constant(I64, 64))
    e = b.select(b.icmp_unsigned("==", e, ir.Constant(I64, 0)), e_sub, e)
    return b.sub(ir.Constant(I64, 1023), e)


def _finite(f, v):
    return f.b.fcmp_ordered("<", f.call("llvm.fabs.f64", F64, v), ir.Constant(F64, float("inf")))


def directed_f64(f, op, a, c, mode):
    """add/sub/mul/div.{rz,rm,rp}.f64 of the f64 values a, c."""
    b = f.b
    nan = ir.Constant(F64, float("nan"))
    if op == "sub":
        c = b.fsub(ir.Constant(F64, -0.0), c)
    if op in ("add", "sub"):
        x, err = two_sum(b, a, c)
        if mode == "rm":            # an exact zero sum is -0 rounding down (IEEE)
            both_plus = b.icmp_unsigned("==", b.or_(b.bitcast(a, I64), b.bitcast(c, I64)),
                                        ir.Constant(I64, 0))
            x = b.select(b.and_(b.fcmp_ordered("==", x, ir.Constant(F64, 0.0)),
                                b.not_(both_plus)), ir.Constant(F64, -0.0), x)
        overflow_ok = ir.Constant(ir.IntType(1), 1)
    else:
        ka, kc = _normal_exponent(b, a), _normal_exponent(b, c)
        a1, c1 = _scale(b, a, ka, 2), _scale(b, c, kc, 2)
        if op == "mul":
            x = b.fmul(a, c)
            x1 = _scale(b, x, b.add(ka, kc), 4)
            err = f.call("llvm.fma.f64", F64, a1, c1, b.fsub(ir.Constant(F64, -0.0), x1))
            zero_in = b.or_(b.fcmp_ordered("==", a, ir.Constant(F64, 0.0)),
                            b.fcmp_ordered("==", c, ir.Constant(F64, 0.0)))
            overflow_ok = ir.Constant(ir.IntType(1), 1)
        else:
            x = b.fdiv(a, c)
            x1 = _scale(b, x, b.sub(ka, kc), 4)
            rem = f.call("llvm.fma.f64", F64, b.fsub(ir.Constant(F64, -0.0), x1), c1, a1)
            err = b.fmul(rem, c1)                     # the sign of rem / c
            zero_in = b.or_(b.fcmp_ordered("==", a, ir.Constant(F64, 0.0)),
                            b.fcmp_ordered("==", c, ir.Constant(F64, 0.0)))
            overflow_ok = b.fcmp_ordered("!=", c, ir.Constant(F64, 0.0))
        # zeros, infinities and NaNs in, or x not finite: exact, no step
        err = b.select(b.or_(zero_in, b.not_(b.and_(_finite(f, x), b.and_(_finite(f, a),
                                                                          _finite(f, c))))),
                       nan, err)
    # finite operands whose rounded result overflowed: the exact value is finite, below x
    overflow = b.and_(b.and_(b.not_(_finite(f, x)), b.fcmp_ordered("==", x, x)),
                      b.and_(b.and_(_finite(f, a), _finite(f, c)), overflow_ok))
    err = b.select(overflow, b.fsub(ir.Constant(F64, -0.0), x), err)
    return directed(f, x, err, T.f64, mode)
