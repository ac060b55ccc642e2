"""Evaluators of single instructions on known scalar values, for following control flow.

Only what loop counters, bounds checks and guards are made of is understood: integer and
predicate arithmetic, comparisons, selects, conversions, moves, parameter loads, and float
arithmetic well enough for float-controlled loops. Anything else yields None ("unknown"), which
the path interpreter treats by its documented defaults. Each evaluator is a closure built once
per static instruction: `fn(vals, spec)` updates the register value list `vals` of one lane.
"""
import math
import struct

import numpy as np

from ..ir import types as T
from ..ir.semantics import COMPARE, PREDICATE, UNSIGNED_COMPARE, evaluation
from ..ir.values import Addr, Imm, PredPair, Reg, Special, Sym, Vec


def convert(v, t):
    """v read as a value of type t (ints wrap to width and signedness)."""
    if v is None or t is None:
        return v
    return converter(t)(v)


_CONVERTERS = {}


def converter(t):
    """convert(·, t) specialised once per type: the path walk converts every operand it
    reads (millions of calls when every lane is followed), so the type's kind, width and
    signedness are looked up here, not per value."""
    f = _CONVERTERS.get(t)
    if f is not None:
        return f
    if t is None:
        def f(v):
            return v
    elif t.kind == "pred":
        def f(v):
            return None if v is None else bool(v)
    elif t.is_float:
        def f(v):
            if v is None:
                return None
            try:
                return float(v)
            except (TypeError, ValueError, OverflowError):
                return None
    else:
        mask, top, signed = (1 << t.bits) - 1, 1 << (t.bits - 1), t.is_signed
        lo, hi = (-top, top - 1) if signed else (0, mask)

        def f(v):
            if v is None:
                return None
            if v.__class__ is int and lo <= v <= hi:
                return v                     # already in range: nothing to wrap
            if isinstance(v, float):
                if math.isnan(v) or math.isinf(v):
                    return None
                v = int(v)
            v = int(v) & mask
            if signed and v & top:
                v -= mask + 1
            return v
        f.bounds = (lo, hi)
    _CONVERTERS[t] = f
    return f


SYNTHETIC_BASE = 1 << 40        # pointer arguments without an address get distinct fake ones
SYNTHETIC_STRIDE = 1 << 36

_COMBINE = ("and", "or", "xor")         # setp's combining operations (ir/semantics.PREDICATE)


def _unsigned(t):
    return T.TYPES.get(f"u{t.bits}", t) if t is not None and t.is_int else t


class Env:
    """What operands that are not registers mean: parameter values and symbol addresses; and
    the contents of the arrays the caller gave with values (index arrays steer addresses)."""

    def __init__(self, params, symbols, memory=()):
        self.params = params          # parameter name → value (None: unknown)
        self.symbols = symbols        # variable name → synthetic address
        self.memory = list(memory)    # [(start address, bytes of a numpy array)]

    def read(self, addr, t):
        """The value of type t stored at addr in an array with values, or None."""
        if addr is None or t is None or t.bits not in (8, 16, 32, 64):
            return None
        n = t.bits // 8
        for start, data in self.memory:
            off = addr - start
            if 0 <= off and off + n <= len(data):
                if t.is_float and n in _FLOAT_FORMAT:   # (struct: no array per value)
                    return struct.unpack_from(_FLOAT_FORMAT[n], data, off)[0]
                raw = int.from_bytes(data[off:off + n], "little")
                if t.is_float:
                    return float(np.frombuffer(raw.to_bytes(n, "little"),
                                               dtype=f"<f{n}")[0])
                return convert(raw, t)
        return None


_FLOAT_FORMAT = {2: "<e", 4: "<f", 8: "<d"}


def value_getter(o, t, reg_index, env):
    """fn(vals, spec) → the operand's value read as type t."""
    if isinstance(o, Reg):
        r, conv = reg_index[o], converter(t)
        # the common case (a value already of the type's kind and range) without a call
        if t is not None and t.kind != "pred" and t.is_float:
            def get(vals, spec):
                v = vals[r]
                return v if v.__class__ is float else conv(v)
            return get
        if t is not None and t.kind != "pred":
            lo, hi = conv.bounds

            def get(vals, spec):
                v = vals[r]
                return v if v.__class__ is int and lo <= v <= hi else conv(v)
            return get
        return lambda vals, spec: conv(vals[r])
    if isinstance(o, Imm):
        c = convert(o.value, t)
        return lambda vals, spec: c
    if isinstance(o, Special):
        name = o.name
        return lambda vals, spec: convert(spec.get(name), t)
    if isinstance(o, Sym):
        c = convert(env.symbols.get(o.name, env.params.get(o.name)), t)
        return lambda vals, spec: c
    if isinstance(o, Addr):
        base = value_getter(o.base, T.u64, reg_index, env)
        off = o.offset

        def addr(vals, spec):
            b = base(vals, spec)
            return None if b is None else b + off
        return addr
    return lambda vals, spec: None


# Data the walk has not got (a float loaded from an array given without values, or computed
# from one) is taken to be of ordinary magnitude: finite and within the range of float16 (the
# half-precision format much data is kept in: an assumption about data). A comparison of such a value with a constant beyond
# that range (an infinity test, or libdevice's sinf/cosf switch to Payne-Hanek argument
# reduction above |x| = 105615) is then decided as every ordinary value decides it, so the
# walk follows the common path instead of the exceptional one (the haversine case).
DATA_MAGNITUDE = float(np.finfo(np.float16).max)


def _ordinary(get, other, t):
    """get, or where the operand it reads is unknown and `other` is a float constant beyond
    DATA_MAGNITUDE: a getter giving 0.0, a value that every ordinary value compares with that
    constant like (any |x| <= DATA_MAGNITUDE is on the same side of it; not NaN)."""
    if t is None or not t.is_float or not isinstance(other, Imm):
        return get
    c = convert(other.value, t)
    if c is None or math.isnan(c) or abs(c) <= DATA_MAGNITUDE:
        return get

    def ordinary(vals, spec):
        v = get(vals, spec)
        return 0.0 if v is None else v
    return ordinary


def _absorbing(op, mods, t):
    """The operand value that decides a two-operand integer or predicate op whatever the other
    operand is (and: 0 / false, mul.lo and mul.wide: 0, or of predicates: true), else None.
    Not for floats: 0 * NaN is NaN."""
    if t is None or t.is_float:
        return None
    if t.kind == "pred":
        return {"and": False, "or": True}.get(op)
    if op == "and" or (op == "mul" and ("lo" in mods or "wide" in mods)):
        return 0
    return None


def _param_load(ins, env):
    a = ins.operands[1]
    if isinstance(a, Addr) and isinstance(a.base, Sym) and a.offset == 0:
        return convert(env.params.get(a.base.name), ins.type)
    return None


def evaluator(st, reg_index, env, atomic_old=()):
    """fn(vals, spec) that applies st's instruction to one lane's values (or None when the
    instruction defines nothing we track). `atomic_old`: registers holding the old value a
    global atomic other than a compare-and-swap returned, which the walker cannot know; a test
    of one for equality with a constant (a sentinel) is taken as false (`setp.eq` false,
    `setp.ne` true): many lanes share an atomic's address and at most one of them sees a given
    value. (A CAS is left out: its old value usually equals the value the lane expected, and a
    CAS loop or a spin lock exits on that equality.)"""
    ins = st.instr
    op, mods, t = ins.opcode, ins.mods, ins.type
    defs = st.defs
    if not defs:
        return None
    dst_t = ins.dests[0].type if ins.dests and isinstance(ins.dests[0], Reg) else t
    # Triton writes every load through inline asm as `ld.global.b32 { %r7 }, [...]`: a vector
    # of one register is that register (an index array read so stays known: a gather's rows)
    one = ins.dests and isinstance(ins.dests[0], Vec) and len(ins.dests[0].items) == 1
    if one and isinstance(ins.dests[0].items[0], Reg):
        dst_t = ins.dests[0].items[0].type
    srcs = ins.sources
    # direct(d): the unguarded one-destination evaluator storing into register d without a
    # tuple (the commonest instructions; the walk runs them once per lane)
    compute = direct = None
    if op == "ld" and ins.space == "param":
        c = _param_load(ins, env)
        compute = lambda vals, spec: (c,)
    elif op in ("ld", "ldu") and env.memory and ins.space in (None, "global", "generic") and \
            len(srcs) == 1 and isinstance(srcs[0], Addr) and (one or not isinstance(ins.dests[0], Vec)):
        # a load from an array whose values the caller gave (an index array): the value
        ga = value_getter(srcs[0], T.u64, reg_index, env)
        compute = lambda vals, spec: (convert(env.read(ga(vals, spec), t), dst_t),)
    elif op in ("ld", "ldu") and env.memory and ins.space in (None, "global", "generic") and \
            len(srcs) == 1 and isinstance(srcs[0], Addr) and \
            all(isinstance(r, Reg) for r in ins.dests[0].items) and t.bits in (8, 16, 32, 64):
        # a vector load of such an array (a block list's counts as one v2): its elements
        ga = value_getter(srcs[0], T.u64, reg_index, env)
        items, step = ins.dests[0].items, t.bits // 8

        def compute(vals, spec):
            a = ga(vals, spec)
            return tuple(None if a is None else convert(env.read(a + k * step, t), r.type)
                         for k, r in enumerate(items))
    elif op in ("mov", "cvta") and len(srcs) == 1 and not isinstance(ins.dests[0], Vec):
        g = value_getter(srcs[0], dst_t, reg_index, env)
        compute = lambda vals, spec: (g(vals, spec),)
        direct = lambda d: _move_fn(d, g)
    elif op == "cvt" and len(srcs) == 1:
        src_t = ins.types[-1] if ins.types else t
        g = value_getter(srcs[0], src_t, reg_index, env)
        to = ins.types[0] if ins.types else t
        rnd = {"rzi": math.trunc, "rni": round, "rmi": math.floor, "rpi": math.ceil}
        f = next((rnd[m] for m in mods if m in rnd), None)

        def compute(vals, spec):
            v = g(vals, spec)
            if v is None:
                return (None,)
            if to.is_int and isinstance(v, float):
                if math.isnan(v) or math.isinf(v):
                    return (None,)
                v = (f or math.trunc)(v)
            return (convert(v, to),)
    elif op == "setp" and len(srcs) == 2 and not isinstance(ins.dests[0], PredPair) and \
            ("eq" in mods or "ne" in mods) and any(isinstance(o, Imm) for o in srcs) and any(
                isinstance(o, Reg) and reg_index[o] in atomic_old for o in srcs):
        known = "ne" in mods
        compute = lambda vals, spec: (known,)
    elif op == "setp" and len(srcs) >= 2:
        cmp = next((COMPARE[m] for m in mods if m in COMPARE), None)
        comb = next((PREDICATE[m] for m in mods if m in _COMBINE), None)
        ct = _unsigned(t) if any(m in UNSIGNED_COMPARE for m in mods) else t
        a, b = (_ordinary(value_getter(o, ct, reg_index, env), other, ct)
                for o, other in ((srcs[0], srcs[1]), (srcs[1], srcs[0])))
        c = value_getter(srcs[2], T.pred, reg_index, env) if len(srcs) > 2 else None
        pair = isinstance(ins.dests[0], PredPair)
        if c is None and not pair and cmp is not None:
            direct = lambda d: _compare_fn(d, cmp, a, b)

        def compute(vals, spec):
            x, y = a(vals, spec), b(vals, spec)
            r = None if cmp is None or x is None or y is None else bool(cmp(x, y))
            if c is not None:
                z = c(vals, spec)
                r = None if comb is None or r is None or z is None else bool(comb(r, z))
            if pair:
                return (r, None if r is None else not r)
            return (r,)
    elif op == "selp" and len(srcs) == 3:
        a, b = (value_getter(o, t, reg_index, env) for o in srcs[:2])
        p = value_getter(srcs[2], T.pred, reg_index, env)

        def compute(vals, spec):
            c = p(vals, spec)
            return (None if c is None else (a(vals, spec) if c else b(vals, spec)),)
    else:
        f = evaluation(op, mods, t)
        if f is not None and not isinstance(ins.dests[0], (Vec, PredPair)):
            wide = "wide" in mods
            ts = [t] * len(srcs)
            if op in ("shl", "shr") and len(srcs) == 2:
                ts[1] = T.u32
            if op == "mad" and wide and len(srcs) == 3:
                ts[2] = dst_t
            getters = [value_getter(o, tt, reg_index, env) for o, tt in zip(srcs, ts)]
            conv_dst = converter(dst_t)
            zero = _absorbing(op, mods, t) if len(srcs) == 2 else None
            direct = (lambda d: _arith_fn(d, f, getters, conv_dst)) if zero is None else \
                (lambda d: _absorbing_fn(d, f, *getters, zero, conv_dst))

            def compute(vals, spec):
                xs = [g(vals, spec) for g in getters]
                if any(x is None for x in xs):
                    # x & 0, x * 0, p and false, p or true: known whatever x is (an address
                    # offset by loaded bits masked with a zero parameter stays known)
                    if zero is not None and any(x is not None and x == zero for x in xs):
                        return (conv_dst(zero),)
                    return (None,)
                try:
                    return (conv_dst(f(*xs)),)
                except (ArithmeticError, ValueError, TypeError):
                    return (None,)

    if compute is None:
        def compute(vals, spec):
            return (None,) * len(defs)

    if ins.guard is None:
        if len(defs) == 1:
            d0 = defs[0]
            if direct is not None:
                return direct(d0)

            def fn(vals, spec):
                vals[d0] = compute(vals, spec)[0]
            return fn

        def fn(vals, spec):
            for d, v in zip(defs, compute(vals, spec)):
                vals[d] = v
        return fn
    # (not `g`: the mov/cvt closures above read a `g` of their own from this scope)
    guard = reg_index[ins.guard]
    neg = ins.guard_negated

    def guarded(vals, spec):
        c = vals[guard]
        if c is not None and bool(c) == neg:
            return                          # guard false: the old values stay
        new = compute(vals, spec)
        for d, v in zip(defs, new):
            vals[d] = v if c is not None or v == vals[d] else None
    return guarded


def _arith_fn(d, f, getters, conv):
    """The unguarded one-destination arithmetic evaluator, written out per operand count:
    the walk runs it once per lane and instruction (millions of times when every lane is
    followed), so it stores its value directly instead of going through a tuple and a list
    of operands; same result as `compute` above (None when an operand is unknown or the
    operation fails)."""
    errors = (ArithmeticError, ValueError, TypeError)
    if len(getters) == 1:
        g0, = getters

        def fn(vals, spec):
            x = g0(vals, spec)
            if x is None:
                vals[d] = None
                return
            try:
                vals[d] = conv(f(x))
            except errors:
                vals[d] = None
    elif len(getters) == 2:
        g0, g1 = getters

        def fn(vals, spec):
            x, y = g0(vals, spec), g1(vals, spec)
            if x is None or y is None:
                vals[d] = None
                return
            try:
                vals[d] = conv(f(x, y))
            except errors:
                vals[d] = None
    elif len(getters) == 3:
        g0, g1, g2 = getters

        def fn(vals, spec):
            x, y, z = g0(vals, spec), g1(vals, spec), g2(vals, spec)
            if x is None or y is None or z is None:
                vals[d] = None
                return
            try:
                vals[d] = conv(f(x, y, z))
            except errors:
                vals[d] = None
    else:
        def fn(vals, spec):
            xs = [g(vals, spec) for g in getters]
            if any(x is None for x in xs):
                vals[d] = None
                return
            try:
                vals[d] = conv(f(*xs))
            except errors:
                vals[d] = None
    return fn


def _absorbing_fn(d, f, g0, g1, zero, conv):
    """_arith_fn for a two-operand op with an absorbing value (`_absorbing`): known when
    either operand is it, the other unknown (as `compute` does it)."""
    errors = (ArithmeticError, ValueError, TypeError)

    def fn(vals, spec):
        x, y = g0(vals, spec), g1(vals, spec)
        if x is None or y is None:
            vals[d] = conv(zero) if (x is not None and x == zero) or \
                (y is not None and y == zero) else None
            return
        try:
            vals[d] = conv(f(x, y))
        except errors:
            vals[d] = None
    return fn


def _move_fn(d, g):
    def fn(vals, spec):
        vals[d] = g(vals, spec)
    return fn


def _compare_fn(d, cmp, a, b):
    """setp without a combining predicate or a second destination, stored directly (as
    `compute` does it: None when an operand is unknown)."""
    def fn(vals, spec):
        x, y = a(vals, spec), b(vals, spec)
        vals[d] = None if x is None or y is None else bool(cmp(x, y))
    return fn
