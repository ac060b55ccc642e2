"""FP8 tensor-core matmul: C = scale_a * scale_b * (A @ B) with e4m3 or e5m2 A and B (each its
own format), f32 accumulation, f32 or bf16 C, on the sm_90a kernel of ops/tc_matmul.py.

Layouts: A row-major ("A", M x K) and B column-major ("Bt", N x K), both K-major: wgmma reads
8-bit operands only that way (no transpose, PTX ISA 9.0, 9.7.15.5). Inputs travel as numpy
uint8 arrays of fp8 bit patterns (ml_dtypes' float8_e4m3fn / float8_e5m2 arrays viewed as
uint8 are the same bytes); scale_a and scale_b are one-element float32 arrays (device scalars,
as torch._scaled_mm takes them), multiplied together and into the accumulators in the epilogue.
A K step is one 128-byte swizzled row: BK = 128 elements, four wgmma m64nNk32 per stage. K not a
multiple of 16 (rows not 16-byte aligned) goes through the zero-padded copy (pad_copy_b8).
scaling="block": DeepSeek-style scales instead, a_scales (f32 [ceil(K/128), M], one per 1 x 128
block of A) and b_scales (f32 [ceil(N/128), ceil(K/128)], one per 128 x 128 block of B); each
stage's block accumulator is promoted into an f32 total with its scales
(lower/block_scales.py), on 128 x 128 tiles; a schedule's inflight=1 promotes one block while
the next one's wgmma group runs (ping-pong), with the same C bit for bit; a schedule of
256 x 128 or 128 x 256 tiles (BM=256 or BN=256, opt-in) runs each consumer's two m64n128 blocks
one at a time through one block accumulator, again with the same C.

Numerics: the products are exact (4 x 4 significand bits) but wgmma's fp8 accumulation keeps
fewer bits than f32 (emu/tensor_math.MODEL_FP8, fitted to the H200: 13 fraction bits); error_bound
derives each element's bound in float64 from that model's fields (FP8_ACCUMULATION), so it
holds for the model the emulator runs, plus the two f32 roundings of the scales and a bf16 C's
rounding.
"""
import dataclasses

import numpy as np

from .. import arrays as fp8fmt
from ..errors import Arg, PtxgenError, Spelled
from ..schedule.defaults import choice
from ..schedule.tc_matmul import FP8
from .tc_matmul import BF16_ULP, F32_ULP, TcMatmul
from .tensor_path import WGMMA

SCALES = ("scale_a", "scale_b")
BLOCK_SCALES = ("a_scales", "b_scales")   # f32 [K/128, M] and [N/128, K/128] (block_scales)
SCALINGS = ("tensor", "block")
# (products per alignment block, bits kept below 2^(E+1), fraction bits of each rounded sum) of
# wgmma's fp8 accumulation: the emulator's emu/tensor_math.MODEL_FP8 (a test keeps them equal;
# operators do not import the emulator)
FP8_ACCUMULATION = (32, 14, 13)
BLOCK = 128


class Fp8Matmul(TcMatmul):
    """dtype: A's fp8 format ("e4m3" or "e5m2"); b_dtype: B's (default: A's); out: "f32" or
    "bf16"; schedule: "auto" or a TcMatmulSchedule (BK = 128, for_dtype gives it); epilogue:
    as TcMatmul's, applied to the scaled accumulators."""
    dtypes = FP8
    scale_inputs = SCALES

    def __init__(self, dtype="e4m3", out="bf16", schedule="auto", b_dtype=None, k_pack="pad",
                 scaling="tensor", epilogue=None):
        b_dtype = b_dtype or dtype
        if scaling not in SCALINGS:
            raise PtxgenError(f"matmul: scaling must be one of {', '.join(SCALINGS)}, got "
                              f"{scaling!r}")
        for what, v in (("dtype", dtype), ("b_dtype", b_dtype)):
            if v not in FP8:
                raise PtxgenError(f"matmul: {what} must be e4m3 or e5m2 for the fp8 GEMM, got "
                                  f"{v!r}")
        if k_pack not in ("auto", "pad"):
            raise PtxgenError(f"matmul: fp8 operands with misaligned rows are pad-copied "
                              f"(k_pack='pad'), got k_pack={k_pack!r}")
        if getattr(schedule, "instruction", "wgmma") != "wgmma" and schedule != "auto":
            raise PtxgenError("matmul: the fp8 GEMM runs on wgmma only (sm_90a): schedule must "
                              "be 'auto' or a TcMatmulSchedule")
        self.b_dtype, self.scaling = b_dtype, scaling
        super().__init__(dtype, out, schedule, "row", "col", "pad", epilogue=epilogue)
        self.scale_inputs = SCALES if scaling == "tensor" else BLOCK_SCALES
        extra = tuple(self.epilogue.tensors) if self.epilogue is not None else ()
        if set(extra) & set(self.scale_inputs):
            raise PtxgenError(f"matmul: epilogue tensor name "
                              f"{sorted(set(extra) & set(self.scale_inputs))[0]!r} is taken by "
                              f"the fp8 GEMM's scales; rename it")
        self.inputs = ("A", "Bt") + self.scale_inputs + extra

    def schedule_for(self, shape):
        """Per-tensor scales: the bf16 GEMM's choice (tune cache, else default_tc_schedule).
        Block scales: that choice turned into 128x128 tiles with one k-block per stage, the
        promotion (inflight: serial or ping-pong, lower/block_scales.py) and stages the measured
        default's (defaults.json, fp8_matmul.block_schedule)."""
        s = super().schedule_for(shape)
        if self.scaling == "tensor" or self.schedule != "auto":
            return s
        return dataclasses.replace(s, BM=128, BN=128, wgmma_n=128, consumers=2, split_k=1,
                                   epilogue="tma" if s.epilogue == "direct" else s.epilogue,
                                   **choice("fp8_matmul.block_schedule"))

    def check_path(self, path):
        if path.instruction != WGMMA:
            raise PtxgenError(Spelled("matmul: the fp8 GEMM needs wgmma (",
                                      Arg("arch='sm_90a'", "--arch sm_90a"), "), not ",
                                      str(self.built_arch)))

    def _np_in(self):
        return np.uint8

    def to_input(self, x, fmt=None):
        """float array -> fp8 bytes of `fmt` (A's format by default), nearest even, saturated."""
        return fp8fmt.to_fp8(x, fmt or self.dtype)

    def values(self, a, dtype):
        return fp8fmt.from_fp8(a, dtype) if dtype in FP8 else super().values(a, dtype)

    def make_inputs(self, shape, rng):
        M, N, K = shape["M"], shape["N"], shape["K"]
        arrays = super().make_inputs(shape, rng)
        arrays["Bt"] = self.to_input(rng.standard_normal((N, K)), self.b_dtype)
        if self.scaling == "tensor":
            for s in SCALES:
                arrays[s] = np.array([rng.uniform(0.25, 2.0)], np.float32)
        else:
            kb, nb = -(-K // BLOCK), -(-N // BLOCK)
            arrays["a_scales"] = rng.uniform(0.25, 2.0, (kb, M)).astype(np.float32)
            arrays["b_scales"] = rng.uniform(0.25, 2.0, (nb, kb)).astype(np.float32)
        return arrays

    def matrices(self, arrays):
        return self.values(arrays["A"], self.dtype), self.values(arrays["Bt"], self.b_dtype).T

    def scale(self, arrays):
        """The scales' product as the kernel forms it (an f32 multiply), float64."""
        return float(np.float32(arrays["scale_a"][0]) * np.float32(arrays["scale_b"][0]))

    def product(self, shape, arrays, rows, out):
        """The scaled float64 product (only `rows` of it) and its bound stored as `out` (the
        epilogue, if any, follows: TcMatmul.reference)."""
        a, b = self.matrices(arrays)
        if rows is not None:
            a = a[np.asarray(rows)]
        if self.scaling == "block":
            sa = arrays["a_scales"] if rows is None else arrays["a_scales"][:, np.asarray(rows)]
            return self._block_product(shape, dict(arrays, a_scales=sa), a, b, out)
        s = self.scale(arrays)
        return s * (a @ b), s * self.error_bound(shape, np.abs(a) @ np.abs(b), out=out)

    def _block_product(self, shape, arrays, a, b, out):
        """C = sum over k-blocks of a_scale[row] * b_scale[column block] * (A_kb @ B_kb); the
        bound: each block's wgmma sum (error_bound for K = 128) scaled, the scales' product
        and each promotion fma rounded in f32 (2^-24 of the running sum's sum |terms|
        each), a bf16 C's rounding."""
        M, N, K = a.shape[0], shape["N"], shape["K"]
        sa = arrays["a_scales"].astype(np.float32)
        sb = arrays["b_scales"].astype(np.float32)
        cols = np.arange(N) // BLOCK
        want, scaled = np.zeros((M, N)), np.zeros((M, N))
        per_block = self.error_bound(dict(M=M, N=N, K=BLOCK), 1.0, out="f32") - 1e-30
        kbs = -(-K // BLOCK)
        for kb in range(kbs):
            ks = slice(kb * BLOCK, (kb + 1) * BLOCK)
            f = (sa[kb][:, None] * sb[cols, kb][None, :]).astype(np.float64)   # f32 products
            want += f * (a[:, ks] @ b[ks])
            scaled += np.abs(f) * (np.abs(a[:, ks]) @ np.abs(b[ks]))
        bound = (per_block + (kbs + 1) * 2.0 ** -24 + (BF16_ULP if out == "bf16" else 0)) \
            * scaled
        return want, bound + 1e-30

    def error_bound(self, shape, abs_products, out=None):
        """Per element, of the unscaled sum S = sum |a||b| (reference() scales it): each block of
        `block` products and the accumulator are cut at 2^(E+1-width), E the largest exponent,
        below which each term loses < 2^(1-width) of the largest term (<= S), and the block sum
        is rounded to frac_bits (< 2^-frac_bits of S); K/block blocks; then the scale multiply
        (an f32 rounding, 2^-24) and a bf16 C's rounding."""
        block, width, frac = FP8_ACCUMULATION
        blocks = -(-shape["K"] // block)
        per_block = (block + 1) * 2.0 ** (1 - width) + 2.0 ** -frac
        bound = (blocks * per_block * 1.01 + F32_ULP) * abs_products
        if (out or self.out) == "bf16":
            bound += BF16_ULP * abs_products
        return bound + 1e-30

    def bytes_moved(self, shape):
        return (shape["M"] + shape["N"]) * shape["K"] + \
            (4 if self.out == "f32" else 2) * shape["M"] * shape["N"]
