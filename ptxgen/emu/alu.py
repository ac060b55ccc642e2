"""Integer arithmetic, logic, shifts, predicate, comparison and selection instructions.

numpy's fixed-width integer arithmetic wraps like PTX's; what needs care is spelled out here:
high halves of products (64-bit ones through 32-bit limbs), shifts by amounts >= the width
(PTX clamps; C and numpy do not), truncating division, saturation, carries. Float-typed forms of
the arithmetic opcodes are handed to floats.py.
"""
import numpy as np

from ..ir import types as T
from ..ir.values import PredPair
from . import floats
from .operands import int_type, make, sources
from .values import SIGNED, UNSIGNED, int_range, storage

_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def _float(ins):
    t = ins.type
    return t is not None and (t.is_float or t.name in ("f16x2", "bf16x2"))


# -- products -------------------------------------------------------------------------------------
def umulhi64(a, b):
    a = np.asarray(a, _U64)
    b = np.asarray(b, _U64)
    al, ah = a & _M32, a >> _S32
    bl, bh = b & _M32, b >> _S32
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> _S32) + (lh & _M32) + (hl & _M32)
    return hh + (lh >> _S32) + (hl >> _S32) + (mid >> _S32)


def mulhi(a, b, dt):
    bits = dt.itemsize * 8
    if bits <= 32:
        wide = (SIGNED if dt.kind == "i" else UNSIGNED)[dt.itemsize * 2]
        p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
        return (p >> wide.type(bits)).astype(dt)
    ua, ub = np.asarray(a).view(_U64), np.asarray(b).view(_U64)
    hi = umulhi64(ua, ub)
    if dt.kind == "i":
        hi = hi - np.where(np.asarray(a) < 0, ub, 0).astype(_U64) \
            - np.where(np.asarray(b) < 0, ua, 0).astype(_U64)
    return hi.view(dt)


def mulwide(a, b, dt):
    wide = (SIGNED if dt.kind == "i" else UNSIGNED)[dt.itemsize * 2]
    return np.asarray(a).astype(wide) * np.asarray(b).astype(wide)


def _saturate_s32(x64):
    return np.clip(x64, -2 ** 31, 2 ** 31 - 1).astype(np.int32)


# -- arithmetic builders ---------------------------------------------------------------------------
def _carry_out(st, m, c):
    c = np.broadcast_to(c, (st.n,)).astype(np.uint8)
    st.carry = c if m is None else np.where(m, c, st.carry)


def build_add(ctx, ins, sub=False):
    if _float(ins):
        return floats.build_addsub(ctx, ins, sub)
    t = int_type(ctx, ins)
    dt = storage(t)
    a, b = sources(ctx, ins, 2)
    w = ctx.write(ins.operands[0])
    mods = ctx.mods()
    if "sat" in mods:
        if t.name != "s32":
            ctx.fail(".sat needs .s32")
        op = np.subtract if sub else np.add
        return make(w, [a, b], lambda x, y: _saturate_s32(op(np.asarray(x, np.int64),
                                                              np.asarray(y, np.int64))))
    carry_in = ins.opcode in ("addc", "subc")
    carry_out = "cc" in mods
    if not carry_in and not carry_out:
        return make(w, [a, b], np.subtract if sub else np.add)
    ut = UNSIGNED[dt.itemsize]

    def fn(st, m):
        x = np.asarray(a(st)).view(ut)
        y = np.asarray(b(st)).view(ut)
        cin = st.carry.astype(ut) if carry_in else ut.type(0)
        if sub:
            r = x - y - cin
            c = (x < y) | ((x == y) & (cin > 0)) if carry_in else x < y
        else:
            r = x + y + cin
            c = (r < x) | ((r == x) & (cin > 0)) if carry_in else r < x   # r == x: y = 2^n-1
        if carry_out:
            _carry_out(st, m, c)
        w(st, m, r.view(dt))
    return fn


def build_sub(ctx, ins):
    return build_add(ctx, ins, sub=True)


def build_mul(ctx, ins):
    if _float(ins):
        return floats.build_mul(ctx, ins)
    t = int_type(ctx, ins)
    dt = storage(t)
    a, b = sources(ctx, ins, 2)
    w = ctx.write(ins.operands[0])
    mods = ctx.mods()
    if "wide" in mods:
        if dt.itemsize == 8:
            ctx.fail("mul.wide on 64-bit operands")
        return make(w, [a, b], lambda x, y: mulwide(x, y, dt))
    if "hi" in mods:
        return make(w, [a, b], lambda x, y: mulhi(x, y, dt))
    return make(w, [a, b], np.multiply)


def build_mad(ctx, ins):
    if _float(ins):
        return floats.build_fma(ctx, ins)
    t = int_type(ctx, ins)
    dt = storage(t)
    mods = ctx.mods()
    a, b = sources(ctx, ins, 2)
    wide = "wide" in mods
    if wide and dt.itemsize == 8:
        ctx.fail("mad.wide on 64-bit operands")
    ct = T.TYPES[t.name[0] + str(t.bits * 2)] if wide else t     # c is as wide as d
    c, = sources(ctx, ins, 1, dt=storage(ct), t=ct, start=3)
    w = ctx.write(ins.operands[0])
    if wide:
        return make(w, [a, b, c], lambda x, y, z: mulwide(x, y, dt) + z)
    hi = "hi" in mods
    carry_in, carry_out = ins.opcode == "madc", "cc" in mods
    if carry_in or carry_out:
        # extended-precision chains (mad.lo.cc, madc.hi, …): the half of the product, plus c,
        # plus the carry flag, with the carry out of that sum when .cc
        ut = UNSIGNED[dt.itemsize]

        def fn(st, m):
            x, y = a(st), b(st)
            p = np.asarray(mulhi(x, y, dt) if hi else np.multiply(x, y)).view(ut)
            z = np.asarray(c(st)).view(ut)
            cin = st.carry.astype(ut) if carry_in else ut.type(0)
            r = p + z + cin
            if carry_out:
                _carry_out(st, m, (r < p) | ((r == p) & ((z > 0) | (cin > 0))))
            w(st, m, r.view(dt))
        return fn
    if hi:
        if "sat" in mods:
            return make(w, [a, b, c], lambda x, y, z: _saturate_s32(
                mulhi(x, y, dt).astype(np.int64) + np.asarray(z, np.int64)))
        return make(w, [a, b, c], lambda x, y, z: mulhi(x, y, dt) + z)
    return make(w, [a, b, c], lambda x, y, z: x * y + z)


def _mul24(x, y, dt, hi):
    if dt.kind == "i":
        x = (np.asarray(x).astype(np.int64) << 40) >> 40
        y = (np.asarray(y).astype(np.int64) << 40) >> 40
    else:
        x = np.asarray(x).astype(np.int64) & 0xFFFFFF
        y = np.asarray(y).astype(np.int64) & 0xFFFFFF
    p = x * y
    return ((p >> 16) if hi else p).astype(np.int64).astype(np.uint64).astype(_U32).view(dt)


def build_mul24(ctx, ins):
    t = int_type(ctx, ins)
    dt = storage(t)
    a, b = sources(ctx, ins, 2)
    hi = "hi" in ctx.mods()
    w = ctx.write(ins.operands[0])
    if ins.opcode == "mad24":
        c, = sources(ctx, ins, 1, start=3)
        return make(w, [a, b, c], lambda x, y, z: _mul24(x, y, dt, hi) + z)
    return make(w, [a, b], lambda x, y: _mul24(x, y, dt, hi))


def _div(x, y, dt):
    x, y = np.asarray(x), np.asarray(y)
    zero = y == 0
    ys = np.where(zero, dt.type(1), y)
    if dt.kind == "u":
        q = x // ys
        return np.where(zero, dt.type(np.iinfo(dt).max), q).astype(dt)
    # truncating division (PTX, C) from numpy's floor division
    q = np.floor_divide(x, ys)
    r = x - q * ys
    q = q + ((r != 0) & ((x < 0) != (ys < 0))).astype(dt)
    return np.where(zero, dt.type(-1), q).astype(dt)


def _rem(x, y, dt):
    x, y = np.asarray(x), np.asarray(y)
    zero = y == 0
    return np.where(zero, x, x - _div(x, y, dt) * np.where(zero, 0, y).astype(dt)).astype(dt)


def build_div(ctx, ins):
    if _float(ins):
        return floats.build_div(ctx, ins)
    t = int_type(ctx, ins)
    dt = storage(t)
    a, b = sources(ctx, ins, 2)
    w = ctx.write(ins.operands[0])
    f = _div if ins.opcode == "div" else _rem
    return make(w, [a, b], lambda x, y: f(x, y, dt))


def build_unary_int(ctx, ins):
    op = ins.opcode
    if _float(ins):
        return floats.build_unary(ctx, ins)
    t = int_type(ctx, ins)
    dt = storage(t)
    a, = sources(ctx, ins, 1)
    w = ctx.write(ins.operands[0])
    if op == "abs":
        return make(w, [a], np.abs)
    if op == "neg":
        return make(w, [a], np.negative)
    if op == "not":
        return make(w, [a], np.invert)
    if op == "cnot":
        return make(w, [a], lambda x: (np.asarray(x) == 0).astype(dt))
    ctx.fail(f"{op} not emulated")


def build_minmax(ctx, ins):
    if _float(ins):
        return floats.build_minmax(ctx, ins)
    t = int_type(ctx, ins)
    a, b = sources(ctx, ins, 2)
    w = ctx.write(ins.operands[0])
    f = np.minimum if ins.opcode == "min" else np.maximum
    if "relu" in ctx.mods():
        return make(w, [a, b], lambda x, y: np.maximum(f(x, y), 0).astype(storage(t)))
    return make(w, [a, b], f)


def build_logic(ctx, ins):
    int_type(ctx, ins)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.opcode]
    a, b = sources(ctx, ins, 2)
    return make(ctx.write(ins.operands[0]), [a, b], f)


def build_shift(ctx, ins):
    t = int_type(ctx, ins)
    dt = storage(t)
    if ins.opcode == "shr" and t.kind == "sint":
        dt_op = dt
    else:
        dt_op = UNSIGNED[dt.itemsize]
    a, = sources(ctx, ins, 1, dt=dt_op)
    b, = sources(ctx, ins, 1, dt=_U32, t=T.u32, start=2)
    w = ctx.write(ins.operands[0])
    bits = dt.itemsize * 8
    top = dt_op.type(bits - 1)
    arithmetic = dt_op.kind == "i"
    left = ins.opcode == "shl"

    def compute(x, s):
        s = np.asarray(s)
        amt = np.minimum(s, bits - 1).astype(dt_op) if s.dtype != dt_op else np.minimum(s, top)
        if left:
            r = np.left_shift(x, amt)
        else:
            r = np.right_shift(x, amt)
        if arithmetic:
            return r                      # amount >= width: all sign bits, as (bits-1) gives
        return np.where(s >= bits, dt_op.type(0), r)
    return make(w, [a, b], compute)


def build_sad(ctx, ins):
    t = int_type(ctx, ins)
    dt = storage(t)
    a, b, c = sources(ctx, ins, 3)
    w = ctx.write(ins.operands[0])
    return make(w, [a, b, c], lambda x, y, z: np.where(x > y, x - y, y - x).astype(dt) + z)


# -- comparisons and selection ---------------------------------------------------------------------
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
        "hi": np.greater, "hs": np.greater_equal}
_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def comparison(ctx, ins):
    """(compare(a, b) -> bool array, dtype to read a and b as)."""
    cmp = ins.mods[0] if ins.mods else ""
    t = ins.types[-1] if ins.types else None
    if t is None:
        ctx.fail("comparison without a type")
    if t.is_float:
        return floats.float_compare(ctx, cmp, t), storage(t), t
    dt = storage(t)
    if cmp in ("lo", "ls", "hi", "hs") or t.kind == "bits":
        dt = UNSIGNED[dt.itemsize]
    if cmp not in _CMP:
        ctx.fail(f"comparison {cmp!r} on integers")
    return _CMP[cmp], dt, t


def build_setp(ctx, ins):
    cmp, dt, t = comparison(ctx, ins)
    boolop = next((m for m in ins.mods[1:] if m in _BOOL), None)
    dst = ins.operands[0]
    a, b = sources(ctx, ins, 2, dt=dt, t=t)
    c = ctx.read(ins.operands[3], bool, T.pred) if boolop else None
    if isinstance(dst, PredPair):
        wp, wq = ctx.write(dst.first), ctx.write(dst.second)
    else:
        wp, wq = ctx.write(dst), None
    bop = _BOOL.get(boolop)

    def fn(st, m):
        r = cmp(a(st), b(st))
        if np.ndim(r) == 0:
            r = np.full(st.n, bool(r))
        if bop is not None:
            cv = c(st)
            p, q = bop(r, cv), bop(~r, cv)
        else:
            p, q = r, ~r
        wp(st, m, p)
        if wq is not None:
            wq(st, m, q)
    return fn


def build_set(ctx, ins):
    # set.CmpOp[.BoolOp].dtype.stype d, a, b[, c]
    types = ins.types
    if len(types) != 2:
        ctx.fail("set needs destination and source types")
    dtype_t, stype = types
    cmp = ins.mods[0]
    fake = type(ins)(ins.opcode, (cmp, stype.name), ins.operands)
    f, dt, t = comparison(ctx, fake)
    boolop = next((m for m in ins.mods[1:] if m in _BOOL), None)
    a, b = sources(ctx, ins, 2, dt=dt, t=stype)
    c = ctx.read(ins.operands[3], bool, T.pred) if boolop else None
    w = ctx.write(ins.operands[0])
    out_dt = storage(dtype_t)
    true = np.float32(1.0) if dtype_t.is_float else out_dt.type(int_range(out_dt)[1]
                                                                  if out_dt.kind == "u" else -1)
    bop = _BOOL.get(boolop)

    def fn(st, m):
        r = f(a(st), b(st))
        if bop is not None:
            r = bop(r, c(st))
        w(st, m, np.where(r, true, out_dt.type(0)).astype(out_dt))
    return fn


def build_selp(ctx, ins):
    t = ins.type
    dt = storage(t)
    a, b = sources(ctx, ins, 2)
    c = ctx.read(ins.operands[3], bool, T.pred)
    return make(ctx.write(ins.operands[0]), [a, b, c],
                lambda x, y, p: np.where(p, x, y).astype(dt, copy=False))


def build_slct(ctx, ins):
    types = ins.types
    if len(types) != 2:
        ctx.fail("slct needs two types")
    t, ct = types
    dt, cdt = storage(t), storage(ct)
    a, b = sources(ctx, ins, 2, dt=dt, t=t)
    c, = sources(ctx, ins, 1, dt=cdt, t=ct, start=3)
    return make(ctx.write(ins.operands[0]), [a, b, c],
                lambda x, y, z: np.where(np.asarray(z) >= 0, x, y).astype(dt, copy=False))


BUILDERS = {
    "add": build_add, "sub": build_sub, "addc": build_add,
    "subc": lambda ctx, ins: build_add(ctx, ins, sub=True),
    "mul": build_mul, "mad": build_mad, "madc": build_mad, "fma": floats.build_fma,
    "mul24": build_mul24, "mad24": build_mul24, "div": build_div, "rem": build_div,
    "abs": build_unary_int, "neg": build_unary_int, "not": build_unary_int,
    "cnot": build_unary_int, "min": build_minmax, "max": build_minmax,
    "and": build_logic, "or": build_logic, "xor": build_logic,
    "shl": build_shift, "shr": build_shift, "sad": build_sad,
    "setp": build_setp, "set": build_set, "selp": build_selp, "slct": build_slct,
}
