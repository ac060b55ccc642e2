"""cvt (every integer/float pairing, rounding modifiers, .sat/.relu/.satfinite) and mov
(values, special registers, symbol addresses, vector pack/unpack)."""
import numpy as np

from ..ir import types as T
from ..ir.values import Raw, Reg, Vec
from . import fp
from .operands import make
from .values import UNSIGNED, from_f64, int_range, storage, to_f64

FLOAT_ROUND = ("rn", "rz", "rm", "rp", "rna")
INT_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
_F64 = np.dtype(np.float64)
_U32 = np.dtype(np.uint32)


def _is_float(t):
    return t.is_float


def int_to_int(x, sdt, ddt, sat):
    x = np.asarray(x)
    if sat:
        slo, shi = int_range(sdt)
        dlo, dhi = int_range(ddt)
        lo, hi = max(slo, dlo), min(shi, dhi)
        x = np.clip(x, sdt.type(lo), sdt.type(hi))
    return x.astype(ddt)


def float_to_int(x64, ddt, rounding):
    """Rounded, NaN → 0, clamped to the destination range (PTX's default for cvt to int)."""
    r = INT_ROUND[rounding](x64)
    lo, hi = int_range(ddt)
    nan = np.isnan(r)
    big = r >= float(hi) + 1.0 if ddt.itemsize < 8 else r >= 2.0 ** (64 if ddt.kind == "u" else 63)
    small = r < float(lo)
    safe = np.where(nan | big | small, 0.0, r)
    out = safe.astype(ddt)
    out = np.where(big, ddt.type(hi), out)
    out = np.where(small, ddt.type(lo), out)
    return out.astype(ddt, copy=False)


def int_to_float(x, sdt, fmt, mode):
    x = np.asarray(x)
    if sdt.itemsize < 8:
        v = x.astype(_F64)                          # exact
        return from_f64(v, fmt, mode)
    r = x.astype(_F64)
    if mode == "rn" and fmt == "f64":
        return r
    limit = 2.0 ** (64 if sdt.kind == "u" else 63)
    at_limit = r >= limit
    back = np.where(at_limit, 0.0, r).astype(sdt)
    err = np.where(at_limit, -1, (x > back).astype(np.int8) - (x < back).astype(np.int8))
    err = err.astype(_F64)
    if fmt == "f64":
        return fp.directed_f64(r, err, mode)
    return from_f64(fp.round_to_odd(r, err), fmt, mode)


def _float_post(v64, fmt, mods):
    """.sat, .relu and .satfinite on a float64 value about to be rounded to fmt."""
    if "sat" in mods:
        v64 = fp.saturate(v64)
    if "relu" in mods:
        v64 = np.where(v64 < 0, 0.0, v64)
    return v64


def _satfinite(r, fmt):
    """Clamp infinities to the largest finite value of fmt (NaN stays NaN)."""
    v = to_f64(r, fmt)
    big = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": float(np.finfo(np.float32).max),
           "f64": float(np.finfo(np.float64).max)}[fmt]
    clipped = np.clip(v, -big, big)
    return np.where(np.isinf(v), from_f64(clipped, fmt), r)


def convert_fn(ctx, dtype_t, stype, mods):
    """Scalar conversion function x -> dest storage for one cvt."""
    sdt, ddt = storage(stype), storage(dtype_t)
    rnd = next((m for m in mods if m in FLOAT_ROUND or m in INT_ROUND), None)
    sat = "sat" in mods
    ftz = "ftz" in mods
    if not _is_float(stype) and not _is_float(dtype_t):
        return lambda x: int_to_int(x, sdt, ddt, sat)
    if _is_float(stype) and not _is_float(dtype_t):
        rounding = rnd if rnd in INT_ROUND else "rzi"

        def f(x):
            v = to_f64(x, stype.name)
            if ftz and stype.name == "f32":
                v = fp.flush_subnormal(v.astype(np.float32)).astype(_F64)
            return float_to_int(v, ddt, rounding)
        return f
    fmt = dtype_t.name
    if rnd == "rna":
        ctx.fail("cvt.rna is only emulated to .tf32")
    if not _is_float(stype):
        mode = rnd if rnd in FLOAT_ROUND else "rn"

        def f(x):
            if sat or "relu" in mods:
                v = _float_post(np.asarray(x).astype(_F64), fmt, mods)
                return from_f64(v, fmt, mode)
            return int_to_float(x, sdt, fmt, mode)
        return f
    # float → float
    sname = stype.name
    if rnd in INT_ROUND:
        g = INT_ROUND[rnd]

        def f(x):
            v = g(to_f64(x, sname))
            return from_f64(_float_post(v, fmt, mods), fmt, "rn")
        return f
    mode = rnd if rnd in FLOAT_ROUND else "rn"

    def f(x):
        v = to_f64(x, sname)
        if ftz and sname == "f32":
            v = fp.flush_subnormal(v.astype(np.float32)).astype(_F64)
        r = from_f64(_float_post(v, fmt, mods), fmt, mode)
        if ftz and fmt == "f32":
            r = fp.flush_subnormal(r)
        if "satfinite" in mods:
            r = _satfinite(r, fmt)
        return r
    return f


def build_cvt(ctx, ins):
    if any(m in ("e4m3x2", "e5m2x2") for m in ins.mods):
        from .tensor import build_fp8_cvt          # fp8 pairs: the tensor-core formats
        return build_fp8_cvt(ctx, ins)
    types = ins.types
    mods = set(ins.mods)
    if types[:1] == (T.tf32,) and len(types) == 2 and len(ins.operands) == 2:
        f = _to_tf32(ctx, types[1], mods)          # a tf32 value is the bits of an f32
        a = ctx.read(ins.operands[1], storage(types[1]), types[1])
        return make(ctx.write(ins.operands[0]), [a], f)
    if len(types) != 2:
        ctx.fail("cvt needs a destination and a source type")
    dtype_t, stype = types
    if dtype_t.name in ("f16x2", "bf16x2"):
        half = dtype_t.name[:-2]
        f = convert_fn(ctx, T.TYPES[half], stype, mods)
        if len(ins.operands) != 3:
            ctx.fail(f"cvt to {dtype_t.name} takes two sources")
        a = ctx.read(ins.operands[1], storage(stype), stype)
        b = ctx.read(ins.operands[2], storage(stype), stype)

        def pack(x, y):
            hi = np.asarray(f(x)).view(np.uint16).astype(_U32)
            lo = np.asarray(f(y)).view(np.uint16).astype(_U32)
            return (hi << _U32.type(16)) | lo
        return make(ctx.write(ins.operands[0]), [a, b], pack)
    if dtype_t.name in ("f16x2", "bf16x2") or stype.name in ("f16x2", "bf16x2") or \
            dtype_t.name.startswith("e") or stype.name.startswith("e"):
        ctx.fail(f"cvt {dtype_t.name} <- {stype.name} is not emulated")
    if len(ins.operands) != 2:
        ctx.fail("cvt takes a destination and a source")
    f = convert_fn(ctx, dtype_t, stype, mods)
    a = ctx.read(ins.operands[1], storage(stype), stype)
    return make(ctx.write(ins.operands[0]), [a], f)


def _to_tf32(ctx, stype, mods):
    """cvt.{rna,rn,rz}{.satfinite}.tf32.f32: keep 10 fraction bits of the f32."""
    mode = next((m for m in ("rna", "rn", "rz") if m in mods), None)
    if stype.name != "f32" or mode is None:
        ctx.fail("cvt to tf32 takes an f32 and .rna, .rn or .rz")
    sat = "satfinite" in mods
    return lambda x: tf32_bits(x, mode, sat)


def tf32_bits(x, mode, satfinite):
    """f32 values → tf32 bit patterns (an f32 with 13 low bits zero). rna: nearest, ties away
    from zero (sign-magnitude bits: add half the dropped range, truncate); rn: nearest even;
    rz: truncate. NaN stays NaN (the canonical one with .satfinite, which also turns overflow
    into the largest finite tf32)."""
    u = np.asarray(x, np.float32).view(_U32)
    nan = (u & _U32.type(0x7FFFFFFF)) > _U32.type(0x7F800000)
    if mode == "rz":
        r = u & _U32.type(0xFFFFE000)
    elif mode == "rn":
        r = (u + _U32.type(0xFFF) + ((u >> _U32.type(13)) & _U32.type(1))) & _U32.type(0xFFFFE000)
    else:
        r = (u + _U32.type(0x1000)) & _U32.type(0xFFFFE000)
    if not satfinite:
        return np.where(nan, u, r).astype(_U32)
    big = (r & _U32.type(0x7FFFFFFF)) >= _U32.type(0x7F800000)
    r = np.where(big & ~nan, (u & _U32.type(0x80000000)) | _U32.type(0x7F7FE000), r)
    return np.where(nan, _U32.type(0x7FFFFFFF), r).astype(_U32)


# -- mov ----------------------------------------------------------------------------------------
def build_mov(ctx, ins):
    t = ins.type
    if t is None or len(ins.operands) != 2:
        ctx.fail("mov needs a type, a destination and a source")
    dst, src = ins.operands
    dt = storage(t)
    if isinstance(src, Vec) and not isinstance(dst, Vec):
        return _pack(ctx, dst, src, dt)
    if isinstance(dst, Vec):
        return _unpack(ctx, dst, src, dt)
    a = ctx.read(src, dt, t)
    w = ctx.write(dst)
    return lambda st, m: w(st, m, a(st))


def _pack(ctx, dst, src, dt):
    n = len(src.items)
    width = dt.itemsize
    if width % n:
        ctx.fail(f"cannot pack {n} values into {width} bytes")
    part = UNSIGNED[width // n]
    whole = UNSIGNED[width]
    fetch = [ctx.read(o, part) for o in src.items]
    w = ctx.write(dst)
    bits = 8 * (width // n)

    def fn(st, m):
        out = None
        for k, f in enumerate(fetch):
            v = np.asarray(f(st)).astype(whole) << whole.type(bits * k)
            out = v if out is None else out | v
        w(st, m, out.view(dt) if out.ndim else out.astype(whole).view(dt))
    return fn


def _unpack(ctx, dst, src, dt):
    n = len(dst.items)
    width = dt.itemsize
    if width % n:
        ctx.fail(f"cannot unpack {width} bytes into {n} values")
    part = UNSIGNED[width // n]
    whole = UNSIGNED[width]
    a = ctx.read(src, whole)
    writers = [ctx.write(o) if isinstance(o, Reg) or isinstance(o, Raw) else None
               for o in dst.items]
    bits = 8 * (width // n)
    mask = whole.type((1 << bits) - 1)

    def fn(st, m):
        v = np.asarray(a(st))
        for k, w in enumerate(writers):
            if w is not None:
                w(st, m, ((v >> whole.type(bits * k)) & mask).astype(part))
    return fn


BUILDERS = {"cvt": build_cvt, "mov": build_mov}
