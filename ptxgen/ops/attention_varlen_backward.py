"""The attention backward over packed variable-length sequences (flash-attn's
flash_attn_varlen_func backward): from Q, K, V, the forward's O and LSE (ops/attention_varlen.py)
and dO, the gradients

    dQ         total_q x H x D
    dK, dV     total_k x H_kv x D (grouped-query attention: each K/V head's group summed)

with the varlen forward's conventions: cu_seqlens_q / cu_seqlens_k (B + 1 int32 prefix sums,
zero-length sequences allowed), LSE H x total_q f32 (natural log, -inf for rows that see no
key), causal bottom-right aligned (query i of a sequence sees keys j <= i + S_k - S_q). Rows
and keys that take part in nothing get zero gradients (an empty sequence's, a key no query
sees, a query that sees no key).

The dense backward's three mma.sync kernels (ops/attention_backward.py) with per-sequence
bounds (lower/attention_varlen_backward.py): Delta over total_q·H rows, dK/dV per BK keys of a
(sequence, K/V head), dQ per BQ queries of a (sequence, head); CTAs past their sequence's
length return at once. Deterministic (no atomics). bf16 only; D 64 or 128. On sequences of
equal length the gradients are bit-equal to the dense AttentionBackward's on the same data.

A WgmmaBackwardSchedule (sm_90a only) selects the dense wgmma backward's two main kernels
(lower/attention_backward_wgmma.py) over the packed rows: TMA maps of Q, K, V, dO as
tokens x (heads · D), one box column block per head (the wgmma varlen forward's maps); bit-equal
to the dense AttentionBackward with the same schedule at equal lengths. "auto" stays mma.sync.

Shape: AttentionVarlen's (B, H, D, max_seqlen_q, max_seqlen_k, seqlens_q=[...],
seqlens_k=[...]). Reference: backward_reference per sequence (its bounds), float64.
"""
import math

import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET
from ..lower.attention_backward import PRE_THREADS
from ..arrays import TiledMap
from ..lower.attention_varlen_backward import KERNELS, lower, lower_wgmma
from ..schedule.attention import COL_BLOCK
from ..schedule.attention_backward import (DTYPES, AttentionBackwardSchedule,
                                           WgmmaBackwardSchedule, default_backward_schedule)
from .attention import UNIT_ROUNDOFF, check_options
from .attention_backward import AttentionBackward, backward_reference
from .attention_varlen import AttentionVarlen
from .base import Launch, Step
from .tc_matmul import bf16_bits, bf16_values
from .tensor_path import MMA_SYNC, WGMMA


class AttentionVarlenBackward(AttentionVarlen):
    """dQ, dK, dV over packed sequences (module docstring). Inputs Q, K, V, O, dO (bf16 bit
    patterns), LSE (f32), cu_seqlens_q, cu_seqlens_k; outputs dQ, dK, dV; workspace Delta."""
    name = "attention_varlen_backward"
    inputs = ("Q", "K", "V", "O", "dO", "LSE", "cu_seqlens_q", "cu_seqlens_k")
    outputs = ("dQ", "dK", "dV")

    def __init__(self, dtype="bf16", causal=False, scale=None, kv_group=1, schedule="auto"):
        # a WgmmaBackwardSchedule selects the sm_90a wgmma kernels; "auto" stays mma.sync
        wgmma = isinstance(schedule, WgmmaBackwardSchedule)
        check_options("attention varlen backward", dtype, DTYPES, scale, kv_group, schedule,
                      WgmmaBackwardSchedule if wgmma else AttentionBackwardSchedule)
        self.dtype, self.causal, self.scale, self.schedule = dtype, bool(causal), scale, schedule
        self.kv_group = kv_group

    @property
    def instruction(self):
        return WGMMA if isinstance(self.schedule, WgmmaBackwardSchedule) else MMA_SYNC

    @property
    def wgmma(self):
        return self.instruction == WGMMA

    @property
    def label(self):
        return "attention varlen backward"

    def schedule_for(self, shape):
        return default_backward_schedule(shape["D"]) if self.schedule == "auto" \
            else self.schedule

    def kernel_name(self):
        return KERNELS[1]

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        geom = {"D": shape["D"], "H": shape["H"], "H_kv": shape["H"] // self.kv_group}
        return (lower_wgmma if self.wgmma else lower)(self.schedule_for(shape), arch, geom,
                                                      causal=self.causal)

    # -- launches ------------------------------------------------------------------------------
    def launches(self, shape):
        s, D, H, B = self.schedule_for(shape), shape["D"], shape["H"], shape["B"]
        rows = shape["total_q"] * H
        pre = Launch(grid=(-(-rows * (D // 8) // PRE_THREADS), 1, 1), block=(PRE_THREADS, 1, 1))
        kv_threads, q_threads = (s.threads, s.threads) if self.wgmma else \
            (32 * s.kv_warps, 32 * s.q_warps)
        dkdv = Launch(grid=(-(-shape["max_seqlen_k"] // s.BK), H // self.kv_group, B),
                      block=(kv_threads, 1, 1), shared_bytes=s.shared_bytes("dkdv", D))
        dq = Launch(grid=(-(-shape["max_seqlen_q"] // s.BQ), H, B),
                    block=(q_threads, 1, 1), shared_bytes=s.shared_bytes("dq", D))
        return dict(zip(KERNELS, (pre, dkdv, dq)))

    def launch(self, shape, sm_count=None):
        return self.launches(shape)[KERNELS[1]]

    def steps(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET, sm_count=None):
        """Delta, then dK/dV, then dQ."""
        L = self.launches(shape)
        rows = np.uint32(shape["total_q"] * shape["H"])
        return [Step(KERNELS[0], L[KERNELS[0]], lambda a: [a["O"], a["dO"], a["Delta"], rows]),
                Step(KERNELS[1], L[KERNELS[1]], lambda a: self._main_args(shape, a, ["dK", "dV"])),
                Step(KERNELS[2], L[KERNELS[2]], lambda a: self._main_args(shape, a, ["dQ"]))]

    def _main_args(self, shape, a, outs):
        sc = self.softmax_scale(shape)
        return self._inputs_args(shape, a, outs) + [a[n] for n in ("LSE", "Delta")] + \
            [a[n] for n in outs] + \
            [a["cu_seqlens_q"], a["cu_seqlens_k"], np.uint32(shape["total_q"]),
             np.float32(sc * math.log2(math.e)), np.float32(sc)]

    def _inputs_args(self, shape, a, outs):
        """Q, K, V, dO: the arrays, or (wgmma) tensor maps of tokens x (heads · D) in boxes of
        the kernel's own or streamed rows x 64 columns."""
        names = ("Q", "K", "V", "dO")
        if not self.wgmma:
            return [a[n] for n in names]
        own, step = self.schedule.kernel_tiles(shape["D"])["dq" if outs == ["dQ"] else "dkdv"]
        q_box, kv_box = (own, step) if outs == ["dQ"] else (step, own)
        hd = shape["H"] * shape["D"]

        def tmap(name):
            if name in ("Q", "dO"):
                return TiledMap(a[name], "bf16", q_box, COL_BLOCK, rows=shape["total_q"],
                                cols=hd)
            return TiledMap(a[name], "bf16", kv_box, COL_BLOCK, rows=shape["total_k"],
                            cols=hd // self.kv_group)
        return [tmap(n) for n in names]

    def kernel_args(self, shape, arrays):
        return self._main_args(shape, arrays, ["dK", "dV"])

    def workspace(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        return {"Delta": ((shape["total_q"] * shape["H"],), np.float32)}

    # -- arrays --------------------------------------------------------------------------------
    def make_inputs(self, shape, rng):
        """Random Q, K, V, dO; O and LSE of the float64 forward (O rounded to bf16, LSE to f32,
        -inf for rows without keys); NaN-poisoned gradients."""
        fwd = AttentionVarlen(self.dtype, self.causal, self.scale, self.kv_group)
        a = fwd.make_inputs(shape, rng)
        a["dO"] = bf16_bits(rng.standard_normal(a["Q"].shape))
        ref = fwd.reference(shape, a)
        a["O"], a["LSE"] = bf16_bits(ref["O"]), ref["LSE"].astype(np.float32)
        for n, like in (("dQ", "Q"), ("dK", "K"), ("dV", "V")):
            a[n] = np.full(a[like].shape, 0x7FC0, np.uint16)
        return a

    # -- reference -----------------------------------------------------------------------------
    def reference(self, shape, arrays):
        """float64 dQ, dK, dV and their bounds, sequence by sequence (backward_reference with
        each sequence's bottom-right causal rows); zero where nothing takes part."""
        q, k, v, do, o = (bf16_values(arrays[n]) for n in ("Q", "K", "V", "dO", "O"))
        lse = np.asarray(arrays["LSE"], np.float64)
        out = {}
        for n, like in (("dQ", q), ("dK", k), ("dV", v)):
            out[n], out[n + "_bound"] = np.zeros(like.shape), np.zeros(like.shape)
        cq, ck = (np.asarray(arrays[n]).view(np.int32) for n in ("cu_seqlens_q",
                                                                 "cu_seqlens_k"))
        G = self.kv_group
        for b in range(len(cq) - 1):
            q0, q1, k0, k1 = int(cq[b]), int(cq[b + 1]), int(ck[b]), int(ck[b + 1])
            if q1 == q0 or k1 == k0:
                continue
            heads = lambda x, i0, i1: x[i0:i1].transpose(1, 0, 2)        # noqa: E731
            kb, vb = (np.repeat(heads(x, k0, k1), G, axis=0) for x in (k, v))
            r = backward_reference(heads(q, q0, q1), kb, vb, heads(do, q0, q1),
                                   self.softmax_scale(shape), self.causal, heads(o, q0, q1),
                                   lse[:, q0:q1], UNIT_ROUNDOFF[self.dtype],
                                   rows=np.arange(q1 - q0) + (k1 - k0) - (q1 - q0))
            for n in ("dQ", "dQ_bound"):
                out[n][q0:q1] = r[n].transpose(1, 0, 2)
            for n in ("dK", "dV", "dK_bound", "dV_bound"):
                x = r[n]
                x = x.reshape((-1, G) + x.shape[1:]).sum(1)             # the group's sum
                out[n][k0:k1] = x.transpose(1, 0, 2)
        return out

    def check(self, shape, arrays, reference=None):
        return AttentionBackward.check(self, shape, arrays, reference or
                                       self.reference(shape, arrays))

    def flops(self, shape):
        """2.5x the forward's (FlashAttention-2's count)."""
        return 10 * shape["D"] * shape["H"] * self.pairs(shape)

    def bytes_moved(self, shape):
        """Q, O, dO, dQ; K, V, dK, dV of H / kv_group heads; LSE and Delta; cu_seqlens."""
        hd = shape["H"] * shape["D"]
        return 4 * shape["total_q"] * hd * 2 + 4 * shape["total_k"] * (hd // self.kv_group) * 2 \
            + 8 * shape["H"] * shape["total_q"] + 8 * (shape["B"] + 1)
