"""The attention forward's sm_80 path (Attention's "mma.sync" entry, ops/attention.py): the
kernel lowered from an MmaAttentionSchedule — FlashAttention-2's form on mma.sync, ldmatrix and
cp.async (lower/mma_attention.py) — which runs on every target from sm_80. Same inputs,
outputs, reference and bounds as the sm_90a path; Q, K, V, O are passed as plain pointers.
"""
import math

import numpy as np

from .. import arch as archmod
from ..lower import lower_mma_attention
from ..schedule.defaults import choice
from ..schedule.mma_attention import MmaAttentionSchedule
from .tensor_path import MMA_SYNC


class MmaSyncAttentionPath:
    instruction = MMA_SYNC

    @staticmethod
    def arch(op):
        """The target: the operator's last build's, else the sm_80 baseline."""
        return archmod.check_arch(op.built_arch or archmod.BASELINE_TARGET)

    @staticmethod
    def schedule_for(op, shape):
        """128 query rows (8 warps of 16: 4 warps copy twice the K/V rows per thread and spill
        at D = 128), double-buffered K/V, and the key steps per head dim of the measured
        default "mma_attention.schedule" (docs/PERF.md#attention-sm_80-path): 64 keys at
        D = 128 (FlashAttention-2's 128 x 64 forward tile, Dao 2023), 128 at D = 64."""
        if op.schedule != "auto":
            return op.schedule
        return MmaAttentionSchedule(**choice("mma_attention.schedule").get(str(shape["D"]), {}))

    @staticmethod
    def build(op, shape):
        return lower_mma_attention(op.schedule_for(shape), MmaSyncAttentionPath.arch(op), shape,
                                   dtype=op.dtype, causal=op.causal, name=op.kernel_name(),
                                   mods=op.mod_spec(shape), kv_group=op.kv_group)

    @staticmethod
    def kernel_args(op, shape, arrays):
        return [arrays["Q"], arrays["K"], arrays["V"], arrays["O"], arrays["LSE"],
                np.uint32(shape["S"]), np.float32(op.softmax_scale(shape) * math.log2(math.e))
                ] + op.mod_args(shape, arrays)
