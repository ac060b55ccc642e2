"""Attention over packed variable-length sequences (flash-attn's flash_attn_varlen_func):

    Q, O           total_q x H x D: every sequence's query tokens, one after the other
    K, V           total_k x H_kv x D (grouped-query attention: H a multiple of H_kv)
    cu_seqlens_q   B + 1 int32: sequence b's query tokens are rows cu_seqlens_q[b] ..
    cu_seqlens_k   cu_seqlens_q[b+1]-1 (the same for keys); zero-length sequences allowed
    LSE            H x total_q f32, natural log (flash-attn's varlen softmax_lse layout)

Inputs bf16 (numpy uint16 bit patterns) or f16; O in the input type; D 64 or 128. Each
sequence attends only to its own keys. causal=True aligns the mask to the bottom-right corner
(flash-attn >= 2.1): query i of a sequence with S_q queries and S_k keys sees keys
j <= i + S_k - S_q, so equal lengths give the usual causal mask. A row that sees no key
(S_k = 0, or causal with S_q > S_k for its first S_q - S_k rows) gets O = 0 and LSE = -inf.

One kernel per instruction path (PATHS, lower/attention_varlen.py): on sm_90a the dense wgmma
forward (TMA maps over the packed rows, a producer warpgroup), elsewhere or for an
MmaAttentionSchedule the dense sm_80 forward's arithmetic on mma.sync; on sequences of equal
length either gives O and LSE bit-equal to the dense Attention operator's same path on the same
data. Grid (ceil(max_seqlen_q / BM), H, B): CTAs whose query block starts past their
sequence's length return at once.

Shape: B, H, D, max_seqlen_q, max_seqlen_k, and the lengths: shape(seqlens_q=[...],
seqlens_k=[...]) (keys default to the queries' lengths; B and the maxima follow), or without
them lengths drawn from 1 .. max_seqlen (the last one the maximum) by a generator seeded with
the shape, so a shape always names one set of lengths. The shape also holds total_q, total_k
and the two length tuples.

Reference: ops/attention.py's attention_reference per sequence (its bounds: P and O rounded
to the input type, f32 statistics).
"""
import math

import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET
from ..arrays import TiledMap
from ..errors import PtxgenError
from ..lower.attention_varlen import lower, lower_wgmma
from ..schedule.attention import COL_BLOCK, DTYPES
from .attention import (UNIT_ROUNDOFF, HalfArrays, WgmmaAttentionPath, attention_reference,
                        check_heads, check_scale_and_group)
from .base import Launch, Operator, Step
from .mma_attention import MmaSyncAttentionPath
from .tensor_path import INSTRUCTIONS, MMA_SYNC, WGMMA, InstructionPaths


def _geom(op, shape):
    return {"D": shape["D"], "H": shape["H"], "H_kv": shape["H"] // op.kv_group}


def _scalars(op, shape):
    return [np.uint32(shape["total_q"]), np.float32(op.softmax_scale(shape) * math.log2(math.e))]


class WgmmaVarlenPath:
    """sm_90a: the dense wgmma forward's schedule and kernel over the packed rows."""
    instruction = WGMMA

    @staticmethod
    def schedule_for(op, shape):
        return WgmmaAttentionPath.schedule_for(op, shape)

    @staticmethod
    def build(op, shape):
        return lower_wgmma(op.schedule_for(shape), op.built_arch, _geom(op, shape),
                           dtype=op.dtype, causal=op.causal, name=op.kernel_name())

    @staticmethod
    def kernel_args(op, shape, arrays):
        s = op.schedule_for(shape)
        mt = "bf16" if op.dtype == "bf16" else "f16"
        hd = shape["H"] * shape["D"]

        def tmap(name, box_rows, rows, cols):       # tokens x (heads · D), one box per head
            return TiledMap(arrays[name], mt, box_rows, COL_BLOCK, rows=rows, cols=cols)
        kv = (shape["total_k"], hd // op.kv_group)
        return [tmap("Q", s.BM, shape["total_q"], hd), tmap("K", s.BN, *kv),
                tmap("V", s.BN, *kv)] + [arrays[n] for n in ("O", "LSE", "cu_seqlens_q",
                                                             "cu_seqlens_k")] + _scalars(op, shape)


class MmaVarlenPath:
    """Every target from sm_80: the sm_80 forward's arithmetic with cp.async loads."""
    instruction = MMA_SYNC

    @staticmethod
    def schedule_for(op, shape):
        return MmaSyncAttentionPath.schedule_for(op, shape)

    @staticmethod
    def build(op, shape):
        return lower(op.schedule_for(shape), MmaSyncAttentionPath.arch(op), _geom(op, shape),
                     dtype=op.dtype, causal=op.causal, name=op.kernel_name())

    @staticmethod
    def kernel_args(op, shape, arrays):
        return [arrays[n] for n in ("Q", "K", "V", "O", "LSE", "cu_seqlens_q",
                                    "cu_seqlens_k")] + _scalars(op, shape)


class AttentionVarlen(HalfArrays, InstructionPaths, Operator):
    """The attention forward over packed sequences (module docstring); schedule "auto", an
    AttentionSchedule (wgmma, sm_90a) or an MmaAttentionSchedule (mma.sync). launch() and
    kernel_args() follow the last build()/steps() target (built_arch)."""
    name = "attention_varlen"
    shape_names = ("B", "H", "D", "max_seqlen_q", "max_seqlen_k")
    defaults = {"B": 4, "H": 2, "D": 64, "max_seqlen_q": 130, "max_seqlen_k": None}
    inputs = ("Q", "K", "V", "cu_seqlens_q", "cu_seqlens_k")
    outputs = ("O", "LSE")
    PATHS = {WGMMA: WgmmaVarlenPath, MMA_SYNC: MmaVarlenPath}

    def __init__(self, dtype="bf16", causal=False, scale=None, kv_group=1, schedule="auto"):
        if dtype not in DTYPES:
            raise PtxgenError(f"attention varlen: dtype must be one of {', '.join(DTYPES)}, "
                              f"got {dtype!r}")
        check_scale_and_group("attention varlen", scale, kv_group)
        if schedule != "auto" and getattr(schedule, "instruction", None) not in INSTRUCTIONS:
            raise PtxgenError(f"attention varlen: schedule must be 'auto', an AttentionSchedule "
                              f"or an MmaAttentionSchedule, got {schedule!r}")
        self.dtype, self.causal, self.scale, self.schedule = dtype, bool(causal), scale, schedule
        self.kv_group = kv_group

    @property
    def label(self):
        return "attention varlen"

    # -- shape ---------------------------------------------------------------------------------
    def shape(self, seqlens_q=None, seqlens_k=None, **given):
        if seqlens_q is None and seqlens_k is not None:
            raise PtxgenError("attention varlen: seqlens_k needs seqlens_q")
        if seqlens_q is not None:
            lq = self._lengths("seqlens_q", seqlens_q)
            lk = lq if seqlens_k is None else self._lengths("seqlens_k", seqlens_k)
            if len(lk) != len(lq):
                raise PtxgenError(f"attention varlen: {len(lq)} query sequences but "
                                  f"{len(lk)} key sequences")
            derived = {"B": len(lq), "max_seqlen_q": max(max(lq), 1),
                       "max_seqlen_k": max(max(lk), 1)}
            for k, v in derived.items():
                if given.get(k) is not None and given[k] != v:
                    raise PtxgenError(f"attention varlen: {k}={given[k]} disagrees with the "
                                      f"lengths given ({v})")
            given.update(derived)
        elif given.get("max_seqlen_k") is None:
            given["max_seqlen_k"] = given.get("max_seqlen_q") or self.defaults["max_seqlen_q"]
        shape = check_heads("attention varlen", super().shape(**given), self.kv_group)
        if seqlens_q is None:
            lq, lk = self._drawn(shape)
        shape.update(seqlens_q=lq, seqlens_k=lk, total_q=sum(lq), total_k=sum(lk))
        if shape["total_q"] == 0:
            raise PtxgenError("attention varlen: every sequence is empty (no query token)")
        if shape["total_q"] * shape["H"] * shape["D"] >= 2 ** 31:
            raise PtxgenError(f"attention varlen: {shape['total_q']} tokens x H x D is too "
                              f"large (limit 2^31-1 elements)")
        return shape

    @staticmethod
    def _lengths(name, lens):
        try:
            out = tuple(int(n) for n in lens)
        except (TypeError, ValueError):
            raise PtxgenError(f"attention varlen: {name} must be a list of lengths, got "
                              f"{lens!r}") from None
        if not out or min(out) < 0 or any(n != x for n, x in zip(out, lens)):
            raise PtxgenError(f"attention varlen: {name} must be one or more non-negative "
                              f"integers, got {lens!r}")
        return out

    @staticmethod
    def _drawn(shape):
        """Lengths 1 .. max_seqlen (the last one the maximum) seeded by the shape; the keys'
        the queries' when the maxima agree."""
        B, mq, mk = shape["B"], shape["max_seqlen_q"], shape["max_seqlen_k"]
        rng = np.random.default_rng([B, mq, mk])
        lq = rng.integers(1, mq + 1, B)
        lq[-1] = mq
        lk = lq.copy() if mq == mk else rng.integers(1, mk + 1, B)
        lk[-1] = mk
        return tuple(int(n) for n in lq), tuple(int(n) for n in lk)

    def schedule_for(self, shape):
        return self.path().schedule_for(self, shape)

    def softmax_scale(self, shape):
        return 1.0 / math.sqrt(shape["D"]) if self.scale is None else float(self.scale)

    # -- kernel --------------------------------------------------------------------------------
    @staticmethod
    def kernel_shape(shape):
        """What the kernel's code depends on (H and D; H_kv is the operator's kv_group): the
        lengths, B, the maxima and the totals are launch parameters, so one compiled kernel
        serves every batch of sequences."""
        return {"H": shape["H"], "D": shape["D"]}

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        return self.for_target(arch).build(self, shape)

    def launch(self, shape, sm_count=None):
        """One CTA per BM query rows of the longest sequence, per head and sequence."""
        s = self.schedule_for(shape)
        return Launch(grid=(-(-shape["max_seqlen_q"] // s.BM), shape["H"], shape["B"]),
                      block=(s.threads, 1, 1), shared_bytes=s.shared_bytes(shape["D"]))

    def steps(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET, sm_count=None):
        self.for_target(arch)
        return [Step(self.kernel_name(), self.launch(shape),
                     lambda a: self.kernel_args(shape, a))]

    def kernel_args(self, shape, arrays):
        return self.path().kernel_args(self, shape, arrays)

    def sim_arrays(self, shape):
        """The index arrays a simulation reads: the shape's sequence boundaries."""
        return {"cu_seqlens_q": cu_seqlens(shape["seqlens_q"]).view(np.uint32),
                "cu_seqlens_k": cu_seqlens(shape["seqlens_k"]).view(np.uint32)}

    # -- arrays --------------------------------------------------------------------------------
    def make_inputs(self, shape, rng):
        """Random Q, K, V over the shape's lengths, cu_seqlens, NaN-poisoned O and LSE."""
        H, D = shape["H"], shape["D"]
        nan = 0x7FC0 if self.dtype == "bf16" else np.nan              # unwritten → fails
        kv = (shape["total_k"], H // self.kv_group, D)
        return {"Q": self.to_input(rng.standard_normal((shape["total_q"], H, D))),
                "K": self.to_input(rng.standard_normal(kv)),
                "V": self.to_input(rng.standard_normal(kv)),
                "cu_seqlens_q": cu_seqlens(shape["seqlens_q"]),
                "cu_seqlens_k": cu_seqlens(shape["seqlens_k"]),
                "O": np.full((shape["total_q"], H, D), nan, dtype=self._np_in()),
                "LSE": np.full((H, shape["total_q"]), np.nan, dtype=np.float32)}

    # -- reference -----------------------------------------------------------------------------
    def reference(self, shape, arrays):
        """float64 O (total_q x H x D) and LSE (H x total_q) with their bounds, sequence by
        sequence; rows without keys: O = 0, LSE = -inf (bounds 0)."""
        q, k, v = (self.values(arrays[n]) for n in ("Q", "K", "V"))
        out = {"O": np.zeros(q.shape), "O_bound": np.zeros(q.shape),
               "LSE": np.full(q.shape[1::-1], -np.inf), "LSE_bound": np.zeros(q.shape[1::-1])}
        cq, ck = (np.asarray(arrays[n]).view(np.int32) for n in ("cu_seqlens_q",
                                                                 "cu_seqlens_k"))
        for b in range(len(cq) - 1):
            q0, q1, k0, k1 = int(cq[b]), int(cq[b + 1]), int(ck[b]), int(ck[b + 1])
            rows = np.arange(q1 - q0) + ((k1 - k0) - (q1 - q0) if self.causal else 0)
            seen = rows >= 0 if self.causal and k1 > k0 else np.full(q1 - q0, k1 > k0)
            if not seen.any():
                continue
            first = q0 + int(np.argmax(seen))                  # rows that see a key
            kb, vb = (np.repeat(x[k0:k1].transpose(1, 0, 2), self.kv_group, axis=0)
                      for x in (k, v))
            r = attention_reference(q[first:q1].transpose(1, 0, 2), kb, vb,
                                    self.softmax_scale(shape), self.causal,
                                    UNIT_ROUNDOFF[self.dtype], rows=rows[seen])
            for name in ("O", "O_bound"):
                out[name][first:q1] = r[name].transpose(1, 0, 2)
            for name in ("LSE", "LSE_bound"):
                out[name][:, first:q1] = r[name]
        return out

    def check(self, shape, arrays, reference=None):
        return self.check_o_lse(arrays, reference or self.reference(shape, arrays))

    def pairs(self, shape):
        """(query, key) pairs the mask allows, summed over sequences (per head)."""
        total = 0
        for sq, sk in zip(shape["seqlens_q"], shape["seqlens_k"]):
            if self.causal:
                total += int(np.clip(np.arange(sq) + sk - sq + 1, 0, sk).sum())
            else:
                total += sq * sk
        return total

    def flops(self, shape):
        """4·D per allowed (query, key) pair and head (FlashAttention's count)."""
        return 4 * shape["D"] * shape["H"] * self.pairs(shape)

    def bytes_moved(self, shape):
        """Q and O, K and V of H / kv_group heads, LSE, cu_seqlens."""
        hd = shape["H"] * shape["D"]
        return 2 * shape["total_q"] * hd * 2 + 2 * shape["total_k"] * (hd // self.kv_group) * 2 \
            + 4 * shape["H"] * shape["total_q"] + 8 * (shape["B"] + 1)


def cu_seqlens(lengths):
    """The B + 1 int32 prefix sums of sequence lengths."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
