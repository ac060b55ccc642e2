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
3. the kept bits are summed exactly (as integers: a zero sum is +0) and the sum rounded into
   the accumulator format by `final`: toward zero into f32 accumulators, to nearest even into
   f16 ones (MODEL_F16).

fp8 wgmma (m64nNk32) uses MODEL_FP8, fitted to the H200 too: the same steps with a 32-product
block, terms cut 14 bits below 2^(E+1) (13 fraction bits of the largest exponent), and the sum
truncated to 13 fraction bits before it is stored as f32.

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
# instruction (exact: 4 x 4 significand bits) and C aligned to the largest exponent E (a
# product's: its factors' exponents summed), each cut toward zero below 2^(E+1-14) (13
# fraction bits at E), the kept bits summed and the sum truncated to 13 fraction bits.
# Fitted to an NVIDIA H200's small fp8 GEMMs (docs/EMULATOR.md, item 4; the data:
# tests/data/fp8_gemm_h200.npz, replayed by tests/test_fp8_matmul.py): the only candidate of
# `benchmarks/numerics.py --fit` bit-equal on every element (e4m3, e5m2, f32 and bf16 C,
# split-K, grouped). Unmeasured: a C input with more than 13 fraction bits (a GEMM's C starts
# at zero and carries wgmma's own sums).
MODEL_FP8 = Numerics(block=32, width=14, frac_bits=13)
FP8_TYPES = ("e4m3", "e5m2")


def _exponent(x):
    """IEEE exponent e of x = 1.f·2^e (frexp's minus one); zeros get _NONE."""
    _, e = np.frexp(x)
    return np.where(x == 0, _NONE, e - 1)


# products per chunk of block_dot's work: its temporaries stay in the CPU's caches
CHUNK_PRODUCTS = 1 << 17


def block_dot(a, b, c, acc="f32", model=None):
    """D = A·B + C with the tensor-core summation model.

    a: (..., M, K), b: (..., K, N) exact float64 input values; c: (..., M, N) float64 (values of
    the acc format). Returns float64 values of the acc format ('f32' or 'f16')."""
    model = model or (MODEL if acc == "f32" else MODEL_F16)
    a, b = np.asarray(a, F64), np.asarray(b, F64)
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], np.shape(c)[:-2])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    a = np.broadcast_to(a, lead + (M, K)).reshape(-1, M, K)
    b = np.broadcast_to(b, lead + (K, N)).reshape(-1, K, N)
    c = np.broadcast_to(np.asarray(c, F64), lead + (M, N)).reshape(-1, M, N)
    live = _live_columns(a, b)
    if len(live) == N:
        return _chunked(a, b, c, acc, model).reshape(lead + (M, N))
    d = np.empty(c.shape, F64)
    dead = np.setdiff1d(np.arange(N), live)
    d[..., dead] = _without_products(c[..., dead], acc, model)
    if len(live):
        d[..., live] = _chunked(a, b[..., live], c[..., live], acc, model)
    return d.reshape(lead + (M, N))


def _chunked(a, b, c, acc, model):
    """block_dot over the leading axis in chunks whose temporaries fit the caches."""
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    step = max(1, CHUNK_PRODUCTS // max(1, M * N * min(K, model.block)))
    if step >= a.shape[0]:
        return _dot(a, b, c, acc, model)
    out = np.empty(c.shape, F64)
    for g in range(0, a.shape[0], step):
        out[g:g + step] = _dot(a[g:g + step], b[g:g + step], c[g:g + step], acc, model)
    return out


def _dot(a, b, c, acc, model):
    K = a.shape[-1]
    d = c
    bt = np.swapaxes(b, -1, -2)
    ea, eb = _exponent(a).astype(np.int32), _exponent(bt).astype(np.int32)
    inputs_finite = np.isfinite(a).all() and np.isfinite(b).all()
    cut = np.trunc if model.align == "trunc" else np.floor
    for k0 in range(0, K, model.block):
        ks = slice(k0, k0 + model.block)
        p = a[..., :, None, ks] * bt[..., None, :, ks]                     # (G, M, N, k)
        pexp = ea[..., :, None, ks] + eb[..., None, :, ks]
        pexp[p == 0] = _NONE
        top = pexp.max(-1)
        if model.c_align == "block":
            top = np.maximum(top, _exponent(d))
        # every term scaled by one power of two per output (exact: the terms' exponents, from
        # 16-bit and tf32 inputs, stay far inside float64's range)
        shift = np.clip(top + 1 - model.width, -1000, 1000)
        scale = np.ldexp(1.0, -shift)
        kept = cut(p * scale[..., None]).sum(-1)
        if model.c_align == "block":
            s = (kept + cut(d * scale)) / scale
        else:                                   # exact in float64 for the widths fitted
            s = kept / scale + d
        finite = np.isfinite(d) if inputs_finite else np.isfinite(p).all(-1) & np.isfinite(d)
        if not finite.all():
            s = np.where(finite, s, p.sum(-1) + d)
        d = _round(s, acc, model.final, model.frac_bits)
    return d


def _live_columns(a, b):
    """The columns of B with a non-zero element (all of them when A has a non-finite value,
    whose product with zero is NaN)."""
    N = b.shape[-1]
    if not np.isfinite(a).all():
        return np.arange(N)
    return np.flatnonzero((b != 0).reshape(-1, N).any(0))


def _without_products(c, acc, model):
    """D where every product is zero: C's value (it keeps all its bits: model.width exceeds the
    accumulator's significand, and rounding a value of the acc format changes nothing; a model
    with frac_bits rounds it to those), a zero C as +0 (the kept bits are summed as integers)."""
    c = np.where(c == 0, 0.0, c)
    return c if model.frac_bits is None else _round(c, acc, model.final, model.frac_bits)


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

