"""Floating-point rounding that numpy's round-to-nearest arithmetic does not give directly.

numpy computes f32/f64 add, mul, div and sqrt with IEEE round-to-nearest-even, which is PTX's
`.rn`. Everything else is built here from exact pieces:

* fused multiply-add must round once. For f32 (and f16/bf16) operands the product is exact in
  float64 (24+24 bits < 53); the sum with c is not, so it is done with TwoSum (s + e == p + c
  exactly) and rounded *to odd* in float64 before the final rounding to f32. Rounding to odd at
  precision p >= 2q+2 followed by any rounding to precision q equals rounding the exact value once
  (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
  rounding to odd", IEEE TC 2008); 53 >= 2*24+2. For f64, Dekker's TwoProduct gives the exact
  product as a pair and the same paper's algorithm finishes the job; operands where the pair
  would overflow or underflow go through exact rational arithmetic instead.
* directed roundings (.rz/.rm/.rp) start from the round-to-nearest result and step one unit
  toward the exact value when they overshot; which side the exact value lies on comes from an
  exact residual (TwoSum error, TwoProduct error, a - q*b, a - r*r).
* f16 uses numpy's float16 (its float64 -> float16 cast rounds once, to nearest even); bf16 has
  no numpy type and lives as uint16 bit patterns.
"""
from fractions import Fraction

import numpy as np

_SPLIT = 134217729.0                  # 2**27 + 1, Veltkamp's splitter for float64
_SAFE_HI = 2.0 ** 995                 # |x| below this: x * _SPLIT cannot overflow
_SAFE_LO = 2.0 ** -960                # |product| above this: its error term cannot underflow

F16, F32, F64 = np.float16, np.float32, np.float64


def two_sum(a, b):
    """s, e with s = fl(a+b) and s + e == a + b exactly. Where the sum of finite operands
    overflows, e is only a sign: -1 toward the finite exact value (directed roundings then
    step back to the largest finite number); where an operand is infinite or NaN, e = 0."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    fin = np.isfinite(s)
    if np.all(fin):
        return s, e
    over = np.isfinite(a) & np.isfinite(b)
    return s, np.where(fin, e, np.where(over, -np.sign(s), 0.0))


def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a, b):
    """p, e with p = fl(a*b) and p + e == a*b exactly, for operands in the safe range."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, np.where(np.isfinite(p), e, 0.0)


def round_to_odd(s, e):
    """The float64 nearest to s+e in the 'round to odd' sense, given s = fl(s+e)."""
    s = np.asarray(s, F64)
    e = np.asarray(e, F64)
    inexact = (e != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0) & np.isfinite(s)
    if not inexact.any():
        return s
    return np.where(inexact, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def directed_f64(s, e, mode):
    """Round s + e (s its nearest float64) to float64 with a directed mode; e only by sign."""
    if mode == "rn":
        return s
    s = np.asarray(s, F64)
    if mode == "rz":
        step = ((s > 0) & (e < 0)) | ((s < 0) & (e > 0))
        toward = 0.0
    elif mode == "rm":
        step, toward = e < 0, -np.inf
    elif mode == "rp":
        step, toward = e > 0, np.inf
    else:
        raise ValueError(mode)
    if not np.any(step):
        return s
    return np.where(step, np.nextafter(s, toward), s)


# -- float64 (exact or rounded to odd) → narrower formats ----------------------------------------
def _directed_fix(r, r64, x, mode, step_fn):
    if mode == "rn":
        return r
    if mode == "rz":
        step, up = np.abs(r64) > np.abs(x), r64 < 0
    elif mode == "rm":
        step, up = r64 > x, np.zeros(np.shape(r64), bool)
    elif mode == "rp":
        step, up = r64 < x, np.ones(np.shape(r64), bool)
    else:
        raise ValueError(mode)
    if not np.any(step):
        return r
    return np.where(step, step_fn(r, up), r)


def to_f32(x, mode="rn"):
    """float64 array → float32, rounded by mode (x is taken as the exact value)."""
    x = np.asarray(x, F64)
    r = x.astype(F32)
    return _directed_fix(r, r.astype(F64), x, mode,
                         lambda r, up: np.nextafter(r, np.where(up, F32(np.inf), F32(-np.inf))))


def to_f16(x, mode="rn"):
    x = np.asarray(x, F64)
    r = x.astype(F16)
    return _directed_fix(r, r.astype(F64), x, mode,
                         lambda r, up: np.nextafter(r, np.where(up, F16(np.inf), F16(-np.inf))))


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(F32)


def bf16_to_f64(bits):
    return bf16_to_f32(bits).astype(F64)


def _f32_bits_to_bf16_rn(u):
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (u >> np.uint32(16)) | np.uint32(0x40)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def step_bits16(bits, up):
    """The next sign-magnitude 16-bit float toward +inf (up) or -inf."""
    bits = np.asarray(bits, np.uint16).astype(np.int32)
    neg = (bits & 0x8000) != 0
    mag = bits & 0x7FFF
    zero = mag == 0
    away = np.where(up, ~neg, neg)
    new_mag = np.where(away | zero, mag + 1, mag - 1)
    sign = np.where(zero, np.where(up, 0, 0x8000), bits & 0x8000)
    return (sign | new_mag).astype(np.uint16)


def to_bf16(x, mode="rn"):
    """float64 array → bf16 bit patterns (uint16), rounded by mode."""
    x = np.asarray(x, F64)
    r32 = x.astype(F32)
    # round to odd at f32 (24 bits >= 2*8+2), then once to bf16
    r64 = r32.astype(F64)
    inexact = (r64 != x) & np.isfinite(x)
    odd_fix = inexact & ((r32.view(np.uint32) & np.uint32(1)) == 0)
    if odd_fix.any():
        r32 = np.where(odd_fix, np.nextafter(r32, np.where(x > r64, F32(np.inf), F32(-np.inf))),
                       r32)
    r = _f32_bits_to_bf16_rn(r32.view(np.uint32))
    return _directed_fix(r, bf16_to_f64(r), x, mode, step_bits16)


def to_format(x, fmt, mode="rn"):
    """float64 (exact value, or already rounded to odd) → 'f16' | 'bf16' | 'f32' | 'f64'."""
    if fmt == "f32":
        return to_f32(x, mode)
    if fmt == "f16":
        return to_f16(x, mode)
    if fmt == "bf16":
        return to_bf16(x, mode)
    return np.asarray(x, F64)


# -- arithmetic with one rounding ------------------------------------------------------------------
def exact_zero_sign(s, a, b, mode):
    """The sign IEEE 754 (6.3) gives an exact zero sum a + b: the operands' sign when both are
    zeros of one sign, otherwise +0, or -0 when rounding toward negative. (Error-free
    transformations lose the signs of zeros, so they are set here from the rule.)"""
    zero = s == 0
    if not np.any(zero):
        return s
    same = (a == 0) & (b == 0) & (np.signbit(a) == np.signbit(b))
    z = np.where(same, np.copysign(0.0, a), -0.0 if mode == "rm" else 0.0)
    return np.where(zero, z, s)


def sum_rounded(a64, b64, fmt, mode):
    """a + b rounded once to fmt (a64, b64 float64 values of the operands)."""
    s, e = two_sum(a64, b64)
    s = exact_zero_sign(s, a64, b64, mode)
    if fmt == "f64":
        return directed_f64(s, e, mode)
    return to_format(round_to_odd(s, e), fmt, mode)


def _safe(*xs):
    ok = np.ones(np.broadcast(*xs).shape, bool)
    for x in xs:
        ax = np.abs(x)
        ok &= np.isfinite(x) & (ax < _SAFE_HI) & ((ax > _SAFE_LO) | (ax == 0))
    return ok


def product_rounded(a64, b64, fmt, mode):
    """a * b rounded once to fmt."""
    if fmt != "f64":
        return to_format(a64 * b64, fmt, mode)          # exact in float64 for <= 26-bit inputs
    if mode == "rn":
        return a64 * b64
    p, e = two_prod(a64, b64)
    # a zero product is exact only when an operand is zero; a nonzero product that underflowed
    # to zero must go the exact way (.rp/.rm then give the smallest subnormal or -0)
    exact_zero = (a64 == 0) | (b64 == 0)
    p_ok = _safe(a64, b64) & np.isfinite(p) & ((np.abs(p) > _SAFE_LO) | exact_zero)
    out = directed_f64(p, np.where(p_ok, e, 0.0), mode)
    if not p_ok.all():
        out = _exact_slow(out, ~p_ok & np.isfinite(a64) & np.isfinite(b64),
                          lambda a, b: a * b, mode, a64, b64)
    return out


def fma_rounded(a64, b64, c64, fmt, mode):
    """a * b + c with a single rounding to fmt (float64 operand values)."""
    a64, b64, c64 = np.broadcast_arrays(np.asarray(a64, F64), np.asarray(b64, F64),
                                        np.asarray(c64, F64))
    if fmt != "f64":
        p = a64 * b64                                   # exact: <= 24-bit significands
        s, e = two_sum(p, c64)
        s = exact_zero_sign(s, p, c64, mode)
        return to_format(round_to_odd(s, e), fmt, mode)
    ph, pl = two_prod(a64, b64)
    th, tl = two_sum(c64, ph)
    v = round_to_odd(*two_sum(tl, pl))
    r, re = two_sum(th, v)
    r = exact_zero_sign(r, ph, c64, mode)
    out = directed_f64(r, re, mode) if mode != "rn" else r
    # overflowing partial sums and tiny products go the exact way
    ok = _safe(a64, b64, c64) & np.isfinite(ph) & np.isfinite(th) & np.isfinite(r) & \
        ((np.abs(ph) > _SAFE_LO) | (a64 == 0) | (b64 == 0))
    if not ok.all():
        plain = a64 * b64 + c64
        # a*b overflowing while c is infinite: the exact product is finite, c decides
        plain = np.where(np.isinf(c64) & np.isfinite(a64) & np.isfinite(b64), c64, plain)
        out = np.where(ok, out, plain)
        finite = ~ok & np.isfinite(a64) & np.isfinite(b64) & np.isfinite(c64)
        out = _exact_slow(out, finite, lambda a, b, c: a * b + c, mode, a64, b64, c64)
    return out


def _exact_slow(out, where, fn, mode, *args):
    """Exact rational evaluation for the rare float64 operands outside the fast path's range
    (products a*b, or a*b + c with three operands)."""
    if not np.any(where):
        return out
    shape = np.broadcast(out, where, *args).shape
    out = np.array(np.broadcast_to(out, shape), F64)      # a writable copy
    args = [np.broadcast_to(a, shape) for a in args]
    for i in np.flatnonzero(np.broadcast_to(where, shape)):
        xs = [float(a.flat[i]) for a in args]
        exact = fn(*(Fraction(x) for x in xs))
        out.flat[i] = _fraction_to_f64(exact, mode) if exact != 0 else _zero(xs, mode)
    return out


def _zero(xs, mode):
    """The signed zero IEEE 754 gives an exact zero a*b (sign of the product) or a*b + c (a
    zero addend pair of one sign keeps it; a cancellation is +0, or -0 rounding down)."""
    a, b = xs[0], xs[1]
    p_neg = (np.signbit(a) != np.signbit(b))
    if len(xs) == 2:
        return -0.0 if p_neg else 0.0
    c = xs[2]
    if (a == 0 or b == 0) and c == 0 and p_neg == bool(np.signbit(c)):
        return c
    return -0.0 if mode == "rm" else 0.0


def _fraction_to_f64(q, mode):
    try:
        r = float(q)                                    # correctly rounded to nearest
    except OverflowError:
        r = float("inf") if q > 0 else float("-inf")
    if mode == "rn":
        return r
    if np.isinf(r):                                     # |q| beyond the largest double
        if mode == "rz" or (mode == "rm") == (q > 0):
            return float(np.copysign(np.finfo(F64).max, r))
        return r
    rq = Fraction(r)
    if rq == q:
        return r
    down = (q > 0) if mode == "rz" else (mode == "rm")
    if down and rq > q:
        return float(np.nextafter(r, -np.inf))
    if not down and rq < q:
        return float(np.nextafter(r, np.inf))
    return r


def quotient_rounded(a64, b64, fmt, mode):
    """a / b rounded once to fmt."""
    q = a64 / b64
    if mode == "rn":
        # double rounding of a quotient is innocuous when 53 >= 2p+2 (Figueroa 1995)
        return to_format(q, fmt, "rn")
    p, pe = two_prod(q, b64)
    # a dividend near the largest double makes q*b overflow; a quotient below _SAFE_LO (zero
    # included) has an error term that underflows
    ok = _safe(q, b64, a64) & np.isfinite(q) & (q != 0) & np.isfinite(p)
    # remainder a - q*b is exact in sign (Sterbenz for a - p, then one rounding)
    rem = np.where(ok, (a64 - p) - pe, 0.0)
    err = np.sign(rem) * np.sign(b64)
    # a finite quotient too large for the format: the exact value lies inside infinity
    over = np.isinf(q) & np.isfinite(a64) & (b64 != 0)
    err = np.where(over, -np.sign(q), err)
    if fmt == "f64":
        out = directed_f64(q, err, mode)
        slow = ~ok & ~over & np.isfinite(a64) & np.isfinite(b64) & (a64 != 0) & (b64 != 0)
        return _exact_slow(out, slow, lambda a, b: a / b, mode, a64, b64)
    return to_format(round_to_odd(q, err), fmt, mode)


def sqrt_rounded(a64, fmt, mode):
    r = np.sqrt(a64)
    if mode == "rn":
        return to_format(r, fmt, "rn") if fmt != "f64" else r
    p, pe = two_prod(r, r)
    ok = _safe(r) & np.isfinite(r) & (r != 0)
    err = np.sign(np.where(ok, (a64 - p) - pe, 0.0))
    if fmt == "f64":
        return directed_f64(r, err, mode)
    return to_format(round_to_odd(r, err), fmt, mode)


def flush_subnormal(x):
    """.ftz: f32 subnormals become zero of the same sign."""
    tiny = (np.abs(x) < np.finfo(F32).tiny) & (x != 0)
    if not np.any(tiny):
        return x
    return np.where(tiny, np.copysign(np.zeros((), x.dtype), x), x)


def saturate(x):
    """.sat on floats: clamp to [0, 1], NaN → 0."""
    x = np.where(np.isnan(x), np.zeros((), x.dtype), x)
    return np.clip(x, 0, 1).astype(x.dtype, copy=False)
