"""The attention forward's sm_80 path: the Attention operator (same inputs, outputs, reference
and bounds; ops/attention.py) with the kernel lowered from an MmaAttentionSchedule —
FlashAttention-2's form on mma.sync, ldmatrix and cp.async (schedule/lower_mma_attention.py) —
which runs on every target from sm_80. Attention hands itself over to this class for targets
without wgmma (or for an MmaAttentionSchedule). Q, K, V, O are passed as plain pointers.
"""
import math

import numpy as np

from .. import arch as archmod
from ..errors import PtxgenError
from ..schedule.mma_attention import MmaAttentionSchedule, lower_mma_attention
from .attention import Attention
from .base import Launch


class MmaAttention(Attention):
    def __init__(self, dtype="bf16", causal=False, scale=None, schedule="auto",
                 arch=archmod.BASELINE_TARGET, mods=None):
        super().__init__(dtype, causal, scale)
        if mods is not None:                # the sm_90a operator's, traced already
            self._mods = mods
        if schedule != "auto" and not isinstance(schedule, MmaAttentionSchedule):
            raise PtxgenError(f"attention: the sm_80 path takes 'auto' or an "
                              f"MmaAttentionSchedule, got {schedule!r}")
        self.schedule, self.arch = schedule, archmod.check_arch(arch)

    def handover(self, arch):
        return None                     # this is the sm_80 path already

    def schedule_for(self, shape):
        """128 query rows (8 warps of 16), double-buffered K/V, and 64-key steps at D = 128
        (FlashAttention-2's 128 x 64 forward tile, Dao 2023), 128-key steps at D = 64: on the
        H200 on 2026-12-01 (docs/PERF.md) 128 keys ran D = 64 at 1.02x / 0.94x torch's FLASH
        backend (non-causal / causal) where 64 keys gave 0.92x / 0.86x; at D = 128 the Q, S, O
        and P fragments of 128 keys do not fit the registers. 4 warps (64 rows) copy twice the
        K/V rows per thread, and ptxas 13.0 spills at D = 128 (24-112 bytes)."""
        if self.schedule != "auto":
            return self.schedule
        return MmaAttentionSchedule(BN=128 if shape["D"] == 64 else 64)

    def build(self, shape, arch=None):
        self.arch = archmod.check_arch(arch or self.arch)
        return lower_mma_attention(self.schedule_for(shape), self.arch, shape, dtype=self.dtype,
                                   causal=self.causal, name=self.kernel_name(),
                                   mods=self.mod_spec(shape))

    def launch(self, shape, sm_count=None):
        s = self.schedule_for(shape)
        return Launch(grid=(-(-shape["S"] // s.BM), shape["B"] * shape["H"], 1),
                      block=(s.threads, 1, 1), shared_bytes=s.shared_bytes(shape["D"]))

    def kernel_args(self, shape, arrays):
        return [arrays["Q"], arrays["K"], arrays["V"], arrays["O"], arrays["LSE"],
                np.uint32(shape["S"]), np.float32(self.softmax_scale(shape) * math.log2(math.e))
                ] + self.mod_args(shape, arrays)
