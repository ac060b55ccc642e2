"""Floating-point arithmetic: add/sub/mul/fma/div/sqrt/rcp, the .approx functions, min/max,
abs/neg, comparisons, testp and copysign, for f16, bf16, f32, f64 and the packed f16x2/bf16x2.

`.rn` f32/f64 add, sub, mul, div, sqrt are numpy's own IEEE operations. fma and every directed
rounding go through fp.py so each result is rounded exactly once. The .approx functions (ex2, lg2,
sin, cos, rsqrt, tanh, and approximate div/sqrt) return the correctly rounded value, which
is within the hardware's documented error bound but not bit-identical to the hardware's MUFU;
ex2, lg2 and rcp .approx.ftz.f32 give the unit's own results (sfu.py's measured tables).
"""
import numpy as np

from . import fp, sfu
from .operands import make, sources
from .values import from_f64, storage, to_f64

ROUNDINGS = ("rn", "rz", "rm", "rp")
_F64 = np.dtype(np.float64)
_U16 = np.dtype(np.uint16)
_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
# f64 bits below an f32 / f16 significand, and the pattern of a midpoint between two of them
_LOW = {"f32": (np.uint64((1 << 29) - 1), np.uint64(1 << 28), 2.0 ** -126),
        "f16": (np.uint64((1 << 42) - 1), np.uint64(1 << 41), 2.0 ** -14)}


def _mode(ins):
    return next((m for m in ins.mods if m in ROUNDINGS), "rn")


def _split_x2(v):
    u = np.asarray(v).view(_U32)
    return (u & _U32.type(0xFFFF)).astype(_U16), (u >> _U32.type(16)).astype(_U16)


def _pack_x2(lo, hi):
    return np.asarray(lo).view(_U16).astype(_U32) | (np.asarray(hi).view(_U16).astype(_U32)
                                                     << _U32.type(16))


def float_unit(ctx, ins, nsrc, exact, native=None, out=None):
    """Builder core: reads nsrc operands of the instruction's float type, computes, writes.

    exact(*float64 values, fmt, mode) returns the result in the type's storage; native(*values)
    is used for f32/f64 round-to-nearest when given."""
    t = ins.type
    name = t.name
    mods = set(ins.mods)
    mode = _mode(ins)
    ftz = "ftz" in mods and name == "f32"
    sat = "sat" in mods
    relu = "relu" in mods
    half = {"f16x2": "f16", "bf16x2": "bf16"}.get(name)
    fmt = half or name
    if native is not None and mode == "rn" and fmt in ("f32", "f64"):
        core = native
    else:
        def core(*xs):
            return exact(*[to_f64(x, fmt) for x in xs], fmt, mode)
    if ftz:
        inner = core

        def core(*xs):
            return fp.flush_subnormal(np.asarray(inner(*[fp.flush_subnormal(np.asarray(x))
                                                         for x in xs])))
    if sat or relu:
        inner2 = core

        def core(*xs):
            r = inner2(*xs)
            v = to_f64(r, fmt)
            if sat:
                v = fp.saturate(v)
            else:
                v = np.where(v < 0, 0.0, v)         # NaN stays NaN
            return from_f64(v, fmt)
    if half:
        scalar = core

        def core(*xs):
            halves = [_split_x2(x) for x in xs]
            conv = (lambda h: h.view(np.float16)) if half == "f16" else (lambda h: h)
            lo = scalar(*[conv(h[0]) for h in halves])
            hi = scalar(*[conv(h[1]) for h in halves])
            return _pack_x2(lo, hi)
        srcs = sources(ctx, ins, nsrc, dt=_U32)
    else:
        srcs = sources(ctx, ins, nsrc, dt=storage(t))
    w = ctx.write(ins.operands[0])
    return make(w, srcs, core)


def build_addsub(ctx, ins, sub):
    if sub:
        return float_unit(ctx, ins, 2, lambda a, b, f, m: fp.sum_rounded(a, -b, f, m),
                          np.subtract)
    return float_unit(ctx, ins, 2, fp.sum_rounded, np.add)


def build_mul(ctx, ins):
    return float_unit(ctx, ins, 2, fp.product_rounded, np.multiply)


def _fma_exact(a, b, c, fmt, mode):
    if fmt in _LOW and mode == "rn":
        # a*b is exact in float64; s = fl64(a*b + c) rounds correctly to fmt unless s sits on a
        # midpoint of fmt or in fmt's subnormal range, where double rounding could bite
        p = a * b
        s = p + c
        low, mid, tiny = _LOW[fmt]
        risky = ((s.view(_U64) & low) == mid) | (np.abs(s) < tiny)
        if not risky.any():
            return fp.to_format(s, fmt, "rn")
        return np.where(risky, fp.fma_rounded(a, b, c, fmt, mode), fp.to_format(s, fmt, "rn"))
    return fp.fma_rounded(a, b, c, fmt, mode)


def build_fma(ctx, ins):
    if ins.type is not None and ins.type.name == "f32" and _mode(ins) == "rn" and \
            not set(ins.mods) & {"ftz", "sat", "relu"}:
        return _fma_f32_rn(ctx, ins)
    return float_unit(ctx, ins, 3, lambda a, b, c, f, m: _fma_exact(
        np.asarray(a), np.asarray(b), np.asarray(c), f, m))


def _fma_f32_rn(ctx, ins):
    """The common fma.rn.f32 with as few numpy calls as possible (it dominates matmul-like
    kernels); same result as _fma_exact. Every float32 midpoint, normal or subnormal, has the
    low 28 bits of its float64 significand clear, so one cheap test clears almost every call;
    only sums that pass it (exact float32 values, zeros, midpoints) get _fma_exact's checks."""
    a, b, c = sources(ctx, ins, 3)
    w = ctx.write(ins.operands[0])
    low, mid, tiny = _LOW["f32"]
    low28 = np.uint64((1 << 28) - 1)

    def fn(st, m):
        x, y, z = a(st), b(st), c(st)
        s = np.multiply(x, y, dtype=_F64)              # exact product
        s = np.add(s, z, dtype=_F64)
        if not (np.asarray(s).view(_U64) & low28).all():
            small = np.abs(s) < tiny
            bits = np.asarray(s).view(_U64)
            if ((bits & low) == mid).any() or (small & (s != 0)).any():
                s = _fma_exact(np.asarray(x, _F64), np.asarray(y, _F64), np.asarray(z, _F64),
                               "f32", "rn")
        w(st, m, s.astype(np.float32))
    return fn


def fusable_fma(ins):
    """Whether ins can join a fused run of fma.rn.f32 (unguarded, registers or immediates)."""
    return (ins.opcode in ("fma", "mad") and ins.guard is None and ins.type is not None
            and ins.type.name == "f32" and _mode(ins) == "rn"
            and not set(ins.mods) & {"ftz", "sat", "relu"} and len(ins.operands) == 4)


def build_fused_fma(ctxs, instrs):
    """One op for a run of independent fma.rn.f32 (no instruction reads a register an earlier
    one of the run writes): the operands are stacked into (run, lanes) arrays and computed
    together, with _fma_f32_rn's screen and exact fallback, then written in program order.
    Reading every operand before writing any result is what sequential execution gives when
    no instruction depends on another of the run."""
    from ..ir.values import Reg
    fetch = [sources(c, ins, 3) for c, ins in zip(ctxs, instrs)]
    writers = [c.write(ins.operands[0]) for c, ins in zip(ctxs, instrs)]
    cols = [[f[k] for f in fetch] for k in range(3)]
    # a column of registers only is one concatenate; immediates need broadcasting row by row
    regs_only = [all(isinstance(ins.operands[1 + k], Reg) for ins in instrs) for k in range(3)]
    low28 = np.uint64((1 << 28) - 1)
    f32 = np.dtype(np.float32)
    k = len(instrs)

    def stacked(st, fs, regs):
        if regs:
            return np.concatenate([f(st) for f in fs]).reshape(k, st.n)
        out = np.empty((k, st.n), f32)
        for i, f in enumerate(fs):
            out[i] = f(st)
        return out

    def fn(st, m):
        x, y, z = (stacked(st, c, r) for c, r in zip(cols, regs_only))
        s = np.multiply(x, y, dtype=_F64)
        s += z
        if not (s.view(_U64) & low28).all():
            s = _fma_exact(x.astype(_F64), y.astype(_F64), z.astype(_F64), "f32", "rn")
        r = s.astype(f32)
        for i, w in enumerate(writers):
            w(st, m, r[i])
    return fn


def build_div(ctx, ins):
    mods = set(ins.mods)
    if mods & {"approx", "full"}:
        # approximate division: the exact quotient is within its error bound
        return float_unit(ctx, ins, 2, lambda a, b, f, m: fp.quotient_rounded(a, b, f, "rn"),
                          np.divide)
    return float_unit(ctx, ins, 2, fp.quotient_rounded, np.divide)


_APPROX = {
    "sin": np.sin, "cos": np.cos, "lg2": np.log2, "ex2": np.exp2, "tanh": np.tanh,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}


_SFU = {"ex2": sfu.ex2, "lg2": sfu.lg2, "rcp": sfu.rcp}


def build_unary(ctx, ins):
    op = ins.opcode
    name = ins.type.name
    if op in ("abs", "neg"):
        bits = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f16x2": 32, "bf16x2": 32}[name]
        ut = {16: _U16, 32: _U32, 64: _U64}[bits]
        if name.endswith("x2"):
            sign = ut.type(0x80008000)
        else:
            sign = ut.type(1 << (bits - 1))
        a, = sources(ctx, ins, 1, dt=ut)
        w = ctx.write(ins.operands[0])
        ftz = "ftz" in ins.mods and name == "f32"
        if op == "abs":
            f = lambda x: x & ~sign       # noqa: E731  (clears the sign of NaN too, as PTX)
        else:
            f = lambda x: x ^ sign        # noqa: E731
        if ftz:
            g = f
            f = lambda x: fp.flush_subnormal(g(x).view(np.float32)).view(_U32)  # noqa: E731
        return make(w, [a], f)
    if op == "sqrt":
        if "approx" in ins.mods:
            return float_unit(ctx, ins, 1, lambda a, f, m: fp.sqrt_rounded(a, f, "rn"), np.sqrt)
        return float_unit(ctx, ins, 1, fp.sqrt_rounded, np.sqrt)
    if op in _SFU and {"approx", "ftz"} <= set(ins.mods) and name == "f32":
        # the special-function unit's own results, measured (emu/sfu.py)
        g = _SFU[op]
        return float_unit(ctx, ins, 1, lambda a, f, m: g(np.asarray(a, np.float32)),
                          lambda x: g(np.asarray(x, np.float32)))
    if op == "rcp":
        def exact(a, f, m):
            return fp.quotient_rounded(np.ones_like(a), a, f, m)
        if "approx" in ins.mods:
            return float_unit(ctx, ins, 1, lambda a, f, m: exact(a, f, "rn"),
                              lambda x: np.divide(x.dtype.type(1), x))
        return float_unit(ctx, ins, 1, exact, lambda x: np.divide(np.asarray(x).dtype.type(1), x))
    if op in _APPROX:
        g = _APPROX[op]
        return float_unit(ctx, ins, 1, lambda a, f, m: from_f64(g(a), f, "rn"))
    ctx.fail(f"{op}.{name} is not emulated")


def build_minmax(ctx, ins):
    name = ins.type.name
    propagate = "NaN" in ins.mods
    is_min = ins.opcode == "min"
    if propagate:
        g = np.minimum if is_min else np.maximum
    else:
        g = np.fmin if is_min else np.fmax      # NaN loses to a number
    if "xorsign" in ins.mods:
        ctx.fail(".xorsign.abs is not emulated")

    def f(a, b):
        # min/max order -0.0 below +0.0 (numpy returns either zero)
        r = g(a, b)
        if not propagate:
            # a NaN loses to a number, signalling ones too (C's fmin, under numpy's fmin, gives
            # NaN for a signalling NaN: an f16 sNaN widened to f64 stays signalling)
            a, b = np.asarray(a), np.asarray(b)
            r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, r))
        zero = np.asarray(r) == 0
        if not zero.any():
            return r
        neg = np.signbit(a) | np.signbit(b) if is_min else np.signbit(a) & np.signbit(b)
        z = np.where(neg, -0.0, 0.0).astype(np.asarray(r).dtype)
        return np.where(zero & (np.asarray(a) == 0) & (np.asarray(b) == 0), z, r)

    def exact(a, b, fmt, mode):
        return from_f64(f(a, b), fmt)
    return float_unit(ctx, ins, 2, exact, f if name in ("f32", "f64") else None)


def float_compare(ctx, cmp, t):
    base = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}
    conv = (lambda x: to_f64(x, "bf16")) if t.name == "bf16" else (lambda x: x)
    if cmp in base:
        f = base[cmp]
        if cmp == "ne":
            return lambda a, b: f(conv(a), conv(b)) & ~np.isnan(conv(a)) & ~np.isnan(conv(b))
        return lambda a, b: f(conv(a), conv(b))
    if cmp.endswith("u") and cmp[:-1] in base:
        f = base[cmp[:-1]]
        return lambda a, b: f(conv(a), conv(b)) | np.isnan(conv(a)) | np.isnan(conv(b))
    if cmp == "num":
        return lambda a, b: ~np.isnan(conv(a)) & ~np.isnan(conv(b))
    if cmp == "nan":
        return lambda a, b: np.isnan(conv(a)) | np.isnan(conv(b))
    ctx.fail(f"comparison {cmp!r} on floats")


def build_testp(ctx, ins):
    t = ins.type
    test = next((m for m in ins.mods if m in ("finite", "infinite", "number", "notanumber",
                                              "normal", "subnormal")), None)
    if test is None:
        ctx.fail("testp without a test")
    a, = sources(ctx, ins, 1)
    tiny = np.finfo(storage(t)).tiny

    def f(x):
        x = to_f64(x, t.name)
        if test == "finite":
            return np.isfinite(x)
        if test == "infinite":
            return np.isinf(x)
        if test == "number":
            return ~np.isnan(x)
        if test == "notanumber":
            return np.isnan(x)
        ax = np.abs(x)
        if test == "normal":
            return np.isfinite(x) & (ax >= tiny)
        return (ax < tiny) & (ax > 0)
    return make(ctx.write(ins.operands[0]), [a], f)


def build_copysign(ctx, ins):
    # copysign.f32 d, a, b: b's magnitude with a's sign
    return float_unit(ctx, ins, 2, lambda a, b, f, m: from_f64(np.copysign(b, a), f),
                      lambda a, b: np.copysign(b, a))


BUILDERS = {"sqrt": build_unary, "rcp": build_unary, "rsqrt": build_unary, "sin": build_unary,
            "cos": build_unary, "lg2": build_unary, "ex2": build_unary, "tanh": build_unary,
            "testp": build_testp, "copysign": build_copysign}
