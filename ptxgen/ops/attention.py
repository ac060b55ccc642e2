"""Fused attention forward: O = softmax(scale · Q Kᵀ [+ causal mask]) V and the per-row
logsumexp LSE (what a backward pass needs), for Q, K, V of shape B x H x S x D.

Inputs bf16 (numpy uint16 bit patterns: numpy has no bfloat16) or f16; O in the input type; the
softmax statistics in f32. D is 64 or 128; S anything (not a tile multiple). The kernel is
lowered from an AttentionSchedule for sm_90a (ptxgen/schedule/lower_attention.py).

Reference: float64 of the exact 16-bit inputs. What the kernel rounds, and check()'s bound per
element of O: P = 2^(S' - m) is rounded to the input type before P·V (relative error u, the
type's unit roundoff: 2^-8 bf16, 2^-11 f16), the final O once more (u·|O|), and ex2.approx/rcp
and f32 accumulation add a few f32 ulps; so |ΔO| <= 2u · Σ p|v| / l + 2u · |O| + tiny. LSE is
f32 throughout: |ΔLSE| <= 2^-16 (1 + |LSE|) + scale · D · 2^-22 · max |q||k| sums.
"""
import math

import numpy as np

from ..arch import BASELINE_TARGET, DEFAULT_ARCH_SPECIFIC_TARGET
from ..arrays import TiledMap
from ..errors import Arg, PtxgenError, Spelled
from ..schedule.attention import (COL_BLOCK, DTYPES, HEAD_DIMS,
                                  default_attention_schedule, lower_attention)
from .base import Launch, Operator, sm_count_or_default
from .tc_matmul import TC_CHIP, bf16_bits, bf16_values

UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


class Attention(Operator):
    name = "attention"
    shape_names = ("B", "H", "S", "D")
    defaults = {"B": 1, "H": 2, "S": 77, "D": 64}
    inputs = ("Q", "K", "V")
    outputs = ("O", "LSE")
    def __init__(self, dtype="bf16", causal=False, scale=None, schedule="auto"):
        if dtype not in DTYPES:
            raise PtxgenError(Spelled("attention: ", Arg("dtype", "--dtype"),
                                      f" must be one of {', '.join(DTYPES)}, got {dtype!r}"))
        if scale is not None and not (isinstance(scale, (int, float)) and scale > 0
                                      and math.isfinite(scale)):
            raise PtxgenError(f"attention: scale must be a positive number, got {scale!r}")
        if schedule != "auto" and getattr(schedule, "instruction", None) not in ("wgmma",
                                                                              "mma.sync"):
            raise PtxgenError(f"attention: schedule must be 'auto', an AttentionSchedule or an "
                              f"MmaAttentionSchedule, got {schedule!r}")
        self.dtype, self.causal, self.scale, self.schedule = dtype, bool(causal), scale, schedule
        self._sm80 = None       # the sm_80-path operator the last build/steps handed over to
        if getattr(schedule, "instruction", None) == "mma.sync":
            self.handover(None)

    def handover(self, arch):
        """For a target without wgmma (or an MmaAttentionSchedule) the sm_80 path's operator
        (ops/mma_attention.py), which then also answers launch() and kernel_args(); else
        None."""
        from .mma_attention import MmaAttention
        from .mma_matmul import uses_mma_sync
        self._sm80 = MmaAttention(self.dtype, self.causal, self.scale, self.schedule,
                                  arch or BASELINE_TARGET) \
            if uses_mma_sync(arch, self.schedule) else None
        return self._sm80

    def shape(self, **given):
        shape = super().shape(**given)
        if shape["D"] not in HEAD_DIMS:
            raise PtxgenError(f"attention: head dim D={shape['D']} must be one of "
                              f"{', '.join(map(str, HEAD_DIMS))}")
        return shape

    def schedule_for(self, shape):
        if self._sm80:
            return self._sm80.schedule_for(shape)
        if self.schedule == "auto":
            return default_attention_schedule(shape["D"], self.causal)
        return self.schedule

    def softmax_scale(self, shape):
        return 1.0 / math.sqrt(shape["D"]) if self.scale is None else float(self.scale)

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        if self.handover(arch):
            return self._sm80.build(shape, arch)
        return lower_attention(self.schedule_for(shape), arch, shape, dtype=self.dtype,
                               causal=self.causal, name=self.kernel_name())

    def steps(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET, sm_count=None):
        if self.handover(arch):
            return self._sm80.steps(shape, arch, sm_count)
        # sm_90a has no isa model of its own: the chip's (sm_90) SM count
        return super().steps(shape, arch, sm_count_or_default(sm_count, TC_CHIP))

    def launch(self, shape, sm_count=None):
        if self._sm80:
            return self._sm80.launch(shape, sm_count)
        s = self.schedule_for(shape)
        return Launch(grid=(-(-shape["S"] // s.BM), shape["B"] * shape["H"], 1),
                      block=(s.threads, 1, 1), shared_bytes=s.shared_bytes(shape["D"]))

    # -- arrays --------------------------------------------------------------------------------
    def _np_in(self):
        return np.uint16 if self.dtype == "bf16" else np.float16

    def to_input(self, x):
        return bf16_bits(x) if self.dtype == "bf16" else np.asarray(x, dtype=np.float16)

    def values(self, a):
        return bf16_values(a) if self.dtype == "bf16" else np.asarray(a).astype(np.float64)

    def make_inputs(self, shape, rng):
        dims = (shape["B"], shape["H"], shape["S"], shape["D"])
        nan = 0x7FC0 if self.dtype == "bf16" else np.nan              # unwritten → fails
        return {"Q": self.to_input(rng.standard_normal(dims)),
                "K": self.to_input(rng.standard_normal(dims)),
                "V": self.to_input(rng.standard_normal(dims)),
                "O": np.full(dims, nan, dtype=self._np_in()),
                "LSE": np.full(dims[:3], np.nan, dtype=np.float32)}

    def kernel_args(self, shape, arrays):
        if self._sm80:
            return self._sm80.kernel_args(shape, arrays)
        s = self.schedule_for(shape)
        rows = shape["B"] * shape["H"] * shape["S"]
        mt = "bf16" if self.dtype == "bf16" else "f16"

        def tmap(name, box_rows):
            return TiledMap(arrays[name], mt, box_rows, COL_BLOCK, rows=rows, cols=shape["D"])
        return [tmap("Q", s.BM), tmap("K", s.BN), tmap("V", s.BN), arrays["O"], arrays["LSE"],
                np.uint32(shape["S"]), np.float32(self.softmax_scale(shape) * math.log2(math.e))]

    # -- reference -----------------------------------------------------------------------------
    def reference(self, shape, arrays):
        """float64 O and LSE, and the per-element bounds (see the module docstring)."""
        q, k, v = (self.values(arrays[n]) for n in ("Q", "K", "V"))
        return attention_reference(q, k, v, self.softmax_scale(shape), self.causal,
                                   UNIT_ROUNDOFF[self.dtype])

    def check(self, shape, arrays, reference=None):
        ref = reference or self.reference(shape, arrays)
        got_o = self.values(arrays["O"])
        got_l = np.asarray(arrays["LSE"], dtype=np.float64)
        err_o, err_l = np.abs(got_o - ref["O"]), np.abs(got_l - ref["LSE"])
        ok = bool(np.isfinite(got_o).all() and np.isfinite(got_l).all()
                  and (err_o <= ref["O_bound"]).all() and (err_l <= ref["LSE_bound"]).all())
        worst = max(float(np.max(err_o / np.maximum(np.abs(ref["O"]), 1.0))),
                    float(np.max(err_l / np.maximum(np.abs(ref["LSE"]), 1.0))))
        return ok, worst

    def flops(self, shape):
        """4·B·H·S²·D (two matrix products), halved when causal: FlashAttention's count."""
        f = 4 * shape["B"] * shape["H"] * shape["S"] ** 2 * shape["D"]
        return f // 2 if self.causal else f

    def bytes_moved(self, shape):
        return 4 * shape["B"] * shape["H"] * shape["S"] * shape["D"] * 2 + \
            4 * shape["B"] * shape["H"] * shape["S"]


def attention_reference(q, k, v, scale, causal, u, rows=None):
    """float64 attention of arrays (..., S, D): O, LSE (natural log) and bounds for a kernel
    that rounds P and O to a type of unit roundoff u and keeps the statistics in f32.
    rows: the sequence positions of q's rows when q holds only some of them (default: all)."""
    s = scale * np.einsum("...qd,...kd->...qk", q, k)
    if causal:
        pos = np.arange(q.shape[-2]) if rows is None else np.asarray(rows)
        s = np.where(np.arange(k.shape[-2])[None, :] <= pos[:, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    o = (p @ v) / l
    lse = (m + np.log(l))[..., 0]
    pv_abs = (p @ np.abs(v)) / l
    qk_abs = scale * np.einsum("...qd,...kd->...qk", np.abs(q), np.abs(k)).max(axis=-1)
    f32 = 2.0 ** -22
    return {"O": o, "LSE": lse,
            "O_bound": 2 * u * pv_abs + 2 * u * np.abs(o) + 64 * f32 * (pv_abs + 1e-30),
            "LSE_bound": 2.0 ** -16 * (1 + np.abs(lse)) + q.shape[-1] * f32 * qk_abs}
