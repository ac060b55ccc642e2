"""Arithmetic of the emulated tensor cores, and the small float formats around them.

Tensor cores do not compute a dot product as a chain of fma: a block of products is summed in one
step. The model (`Numerics`), fitted to the H200 (docs/EMULATOR.md, "Tensor cores"):

1. every product of two inputs is exact (bf16/f16/tf32 significands multiply into at most 22
   bits);
2. per block of `block` products (a whole m16n8k16 / m64nNk16 instruction), the products and
   the accumulator C are aligned to the largest exponent E among them, where a product's
   exponent is the sum of its factors' exponents (its significand, in [1, 4), has two integer
   bits) and C's is its own; every term keeps the bits of weight >= 2^(E + 1 - width) and loses
   the rest toward zero (`align` 'trunc'; 'floor' would be two's complement truncation);
3. the kept bits are summed exactly and the sum rounded into the accumulator format by `final`:
   toward zero into f32 accumulators, to nearest even into f16 ones (MODEL_F16).

fp8 wgmma (m64nNk32) uses MODEL_FP8: the same steps with a 32-product block and the sum kept
to `frac_bits` fraction bits before it is stored as f32 (see its comment: not yet measured).

Blocks follow in k order. Integer shapes are exact (s32 wraps, or saturates with .satfinite).
"""
from dataclasses import dataclass

import numpy as np

from . import fp

F64 = np.dtype(np.float64)
_NONE = -100_000                   # exponent of a zero term: never the largest


@dataclass
class Numerics:
    block: int = 16         # products summed together before a rounding
    width: int = 26         # bits kept from the weight of 2^(E+1) down
    align: str = "trunc"    # how aligned terms lose their low bits: trunc or floor
    final: str = "rz"       # rounding of each block's sum into the accumulator: rz or rn
    frac_bits: int = None   # fraction bits the rounded sum keeps (None: the accumulator's)
    c_align: str = "block"  # "block": C aligned with the products; "after": the products'
                            # kept sum first, then added to C and rounded (by final, frac_bits)


MODEL = Numerics()
MODEL_F16 = Numerics(final="rn")      # f16 accumulators: the same sum, rounded to nearest even
# wgmma m64nNk32 with e4m3/e5m2 inputs into f32 accumulators: the 32 products of one
# instruction (exact: 4 x 4 significand bits) and C aligned to the largest exponent, each cut
# toward zero below 2^(E+1-25), the kept bits summed and the sum truncated to 13 fraction bits
# (the f32 result's low 10 bits zero). A prior from public reports (DeepSeek-V3: Hopper's fp8
# accumulation keeps "around 14 bits"), not yet measured here: benchmarks/fp8_numerics.py
# measures and fits it on the GPU (docs/EMULATOR.md, "fp8 wgmma").
MODEL_FP8 = Numerics(block=32, width=25, frac_bits=13)
FP8_TYPES = ("e4m3", "e5m2")


def _exponent(x):
    """IEEE exponent e of x = 1.f·2^e (frexp's minus one); zeros get _NONE."""
    _, e = np.frexp(x)
    return np.where(x == 0, _NONE, e - 1)


def block_dot(a, b, c, acc="f32", model=None):
    """D = A·B + C with the tensor-core summation model.

    a: (..., M, K), b: (..., K, N) exact float64 input values; c: (..., M, N) float64 (values of
    the acc format). Returns float64 values of the acc format ('f32' or 'f16')."""
    model = model or (MODEL if acc == "f32" else MODEL_F16)
    K = a.shape[-1]
    d = np.asarray(c, F64)
    bt = np.swapaxes(b, -1, -2)
    prods = a[..., :, None, :] * bt[..., None, :, :]                     # (..., M, N, K)
    pexp = _exponent(a)[..., :, None, :] + _exponent(bt)[..., None, :, :]
    pexp = np.where(prods == 0, _NONE, pexp)
    cut = np.trunc if model.align == "trunc" else np.floor
    for k0 in range(0, K, model.block):
        p = prods[..., k0:k0 + model.block]
        top = pexp[..., k0:k0 + model.block].max(-1)
        if model.c_align == "block":
            top = np.maximum(top, _exponent(d))
        shift = np.clip(top + 1 - model.width, -1100, 1100)
        kept = cut(np.ldexp(p, -shift[..., None])).sum(-1)
        if model.c_align == "block":
            s = np.ldexp(kept + cut(np.ldexp(d, -shift)), shift)
        else:
            s = np.ldexp(kept, shift) + d          # exact in float64 for the widths fitted
        finite = np.isfinite(p).all(-1) & np.isfinite(d)
        if not finite.all():
            s = np.where(finite, s, p.sum(-1) + d)
        d = _round(s, acc, model.final, model.frac_bits)
    return d


def _round(x, acc, mode, frac_bits=None):
    if frac_bits is not None:                   # to frac_bits fraction bits, then (exactly) acc
        x = np.asarray(x, F64)
        _, e = np.frexp(np.where(np.isfinite(x) & (x != 0), x, 1.0))
        q = np.ldexp(1.0, e - 1 - frac_bits)
        r = x / q
        r = np.trunc(r) if mode == "rz" else np.rint(r)
        x = np.where(np.isfinite(x), r * q, x)
    out = fp.to_f32(x, mode) if acc == "f32" else fp.to_f16(x, mode)
    return out.astype(F64)


def int_dot(a, b, c, satfinite=False):
    """Integer D = A·B + C, exact, then wrapped to s32 (or clamped with .satfinite)."""
    d = np.einsum("...mk,...kn->...mn", a.astype(np.int64), b.astype(np.int64)) + \
        c.astype(np.int64)
    if satfinite:
        return np.clip(d, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    return d.astype(np.int32)            # wraps modulo 2**32


# -- element formats -----------------------------------------------------------------------------
def unpack(words, ab):
    """32-bit register values (uint32 array, last axis = registers) → exact float64 (or int64)
    elements in fragment order, the low bits first."""
    w = np.asarray(words, np.uint32)
    if ab in ("bf16", "f16"):
        halves = np.stack([w & np.uint32(0xFFFF), w >> np.uint32(16)], -1).astype(np.uint16)
        halves = halves.reshape(w.shape[:-1] + (-1,))
        if ab == "bf16":
            return fp.bf16_to_f64(halves)
        return halves.view(np.float16).astype(F64)
    if ab == "tf32":
        # the tensor core reads only the top 19 bits (sign, 8 exponent, 10 fraction)
        return (w & np.uint32(0xFFFFE000)).view(np.float32).astype(F64)
    if ab in ("s8", "u8"):
        sh = np.arange(4, dtype=np.uint32) * np.uint32(8)
        b = ((w[..., None] >> sh) & np.uint32(0xFF)).astype(np.uint8)
        b = b.reshape(w.shape[:-1] + (-1,))
        return (b.view(np.int8) if ab == "s8" else b).astype(np.int64)
    raise ValueError(ab)


def pack_halves(lo, hi):
    return (np.asarray(hi, np.uint32) << np.uint32(16)) | np.asarray(lo, np.uint32)


# -- fp8 (e4m3, e5m2) ------------------------------------------------------------------------------
FP8 = {"e4m3": (4, 3, 7, 448.0), "e5m2": (5, 2, 15, 57344.0)}     # exp bits, frac bits, bias, max


def to_fp8(x, fmt, relu=False):
    """float64 → fp8 bytes (uint8), round to nearest even, .satfinite (|x| > max → ±max, NaN →
    the format's NaN 0x7F), as cvt.rn.satfinite.{e4m3x2,e5m2x2} does."""
    eb, fb, bias, top = FP8[fmt]
    x = np.asarray(x, F64)
    if relu:
        x = np.where(x < 0, 0.0, x)
    sign = np.signbit(x)
    a = np.abs(x)
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    _, e = np.frexp(np.where(a == 0, 1.0, a))
    e = np.maximum(e - 1, 1 - bias)                      # exponent of the binade (normal or not)
    quantum = np.ldexp(1.0, e - fb)
    q = np.minimum(np.rint(a / quantum) * quantum, top)
    _, e2 = np.frexp(np.where(q == 0, 1.0, q))
    e2 = e2 - 1
    normal = q >= np.ldexp(1.0, 1 - bias)
    frac = np.where(normal, q / np.ldexp(1.0, e2 - fb) - (1 << fb), q / np.ldexp(1.0, 1 - bias - fb))
    expf = np.where(normal, e2 + bias, 0)
    bits = (expf.astype(np.int64) << fb) | np.rint(frac).astype(np.int64)
    bits = np.where(sign, bits | 0x80, bits)
    bits = np.where(nan, 0x7F, bits)
    return bits.astype(np.uint8)


def from_fp8(bits, fmt):
    """fp8 bytes → exact float64 (e4m3's 0x7F/0xFF are NaN and it has no infinities; e5m2
    follows IEEE: exponent all ones is inf or NaN)."""
    eb, fb, bias, _ = FP8[fmt]
    b = np.asarray(bits, np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    expf = (b >> fb) & ((1 << eb) - 1)
    frac = b & ((1 << fb) - 1)
    val = np.where(expf == 0, np.ldexp(frac.astype(F64), 1 - bias - fb),
                   np.ldexp((frac + (1 << fb)).astype(F64), expf - bias - fb))
    if fmt == "e4m3":
        nan = (b & 0x7F) == 0x7F
        inf = np.zeros_like(nan)
    else:
        nan = (expf == 31) & (frac != 0)
        inf = (expf == 31) & (frac == 0)
    val = np.where(inf, np.inf, val)
    val = np.where(nan, np.nan, val)
    return sign * val
