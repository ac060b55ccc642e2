"""AttentionBackwardSchedule: the tiles of the attention backward (FlashAttention-2's form on
mma.sync m16n8k16, ops/attention_backward.py, lower/attention_backward.py).

    dK/dV kernel  16 · kv_warps keys of one (batch, K/V head) per CTA, each warp owning 16
                  keys; Q and dO tiles of q_step query rows stream through a cp.async ring of
                  `stages` slots; dK and dV stay in registers (D/2 f32 each per thread)
    dQ kernel     16 · q_warps query rows of one (batch, head) per CTA; K and V tiles of
                  kv_step keys stream through the ring; dQ in registers

The dK/dV kernel's streamed step is small (16 query rows at D = 128) because each thread holds
two D-wide accumulators (dK and dV) besides two q_step-wide ones (Sᵀ and dPᵀ) and P: ptxas
13.0 spills at D = 128 with 32-row steps (176 fragment registers) and at none of the defaults
(at most 245 registers for sm_90a, 0 spill bytes).
"""
from dataclasses import dataclass

from .. import arch as archmod
from ..errors import ScheduleError
from .attention import HEAD_DIMS
from .matmul import target_limits
from .mma_matmul import CHUNK, INSTRUCTION, MMA_M, WARP, check_ints_and_target

DTYPES = ("bf16",)


@dataclass(frozen=True)
class AttentionBackwardSchedule:
    """One attention-backward schedule (frozen, hashable; str gives a short name)."""
    kv_warps: int = 8            # dK/dV kernel: 16 keys per warp
    q_step: int = 16             # query rows per step of the dK/dV kernel
    q_warps: int = 8             # dQ kernel: 16 query rows per warp
    kv_step: int = 32            # keys per step of the dQ kernel
    stages: int = 2              # cp.async slots of both rings

    instruction = INSTRUCTION

    def __str__(self):
        return (f"attn_bwd_kv{self.BK}q{self.q_step}_q{self.BQ}k{self.kv_step}"
                f"_s{self.stages}")

    @property
    def BK(self):
        """Keys per CTA of the dK/dV kernel."""
        return MMA_M * self.kv_warps

    @property
    def BQ(self):
        """Query rows per CTA of the dQ kernel."""
        return MMA_M * self.q_warps

    @staticmethod
    def row_bytes(D):
        return 2 * D

    def kernel_tiles(self, D):
        """{kernel: (warps, own rows, streamed rows)} of the two main kernels."""
        return {"dkdv": (self.kv_warps, self.BK, self.q_step),
                "dq": (self.q_warps, self.BQ, self.kv_step)}

    def pass_rows(self, warps, D):
        """Rows one pass of 16-byte copies by every thread of a CTA covers."""
        return WARP * warps * CHUNK // self.row_bytes(D)

    def shared_bytes(self, kernel, D):
        """Two own tiles (K, V or Q, dO) and `stages` slots of two streamed tiles."""
        _, own, step = self.kernel_tiles(D)[kernel]
        return 2 * own * self.row_bytes(D) + self.stages * 2 * step * self.row_bytes(D)

    def validate(self, arch=archmod.BASELINE_TARGET, dtype="bf16", D=128):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"attention backward schedule {self}: {what}")

        check_ints_and_target(self, arch, bad)
        if dtype not in DTYPES:
            bad(f"input type must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if D not in HEAD_DIMS:
            bad(f"head dim D={D} must be one of {', '.join(map(str, HEAD_DIMS))}")
        for name in ("q_step", "kv_step"):
            if getattr(self, name) not in (16, 32, 64):
                bad(f"{name}={getattr(self, name)} must be 16, 32 or 64")
        for name in ("kv_warps", "q_warps"):
            if getattr(self, name) not in (1, 2, 4, 8):
                bad(f"{name}={getattr(self, name)} must be 1, 2, 4 or 8")
        if self.stages < 2:
            bad(f"stages={self.stages}: the pipeline needs at least 2")
        lim = target_limits(archmod.base_arch(arch))
        for kernel, (warps, own, step) in self.kernel_tiles(D).items():
            rows = self.pass_rows(warps, D)
            if rows < 8 or rows % 8 or own % rows or step % rows:
                bad(f"{kernel}: {WARP * warps} threads copy {rows} rows of D={D} per pass: "
                    f"needs a multiple of 8 that divides {own} and {step}")
            need = self.shared_bytes(kernel, D)
            if need > lim["max_shared_per_block"]:
                bad(f"{kernel}: {need} bytes of shared memory, more than "
                    f"{lim['max_shared_per_block']} per block on {arch}")
        # dK + dV (D/2 each), Sᵀ and dPᵀ (q_step/2 each) and P, dS packed per thread
        live = D + self.q_step + self.q_step // 2
        if live > 160:
            bad(f"dkdv: {live} fragment registers per thread leave too few for addresses")
        return self


def default_backward_schedule(D):
    """128 keys and 128 query rows per CTA (FlashAttention-2's sm_80 backward tiles); steps
    of 16 query rows and 32 keys at D = 128 (dK and dV take 128 registers per thread), of 64
    at D = 64."""
    return AttentionBackwardSchedule() if D == 128 else \
        AttentionBackwardSchedule(q_step=64, kv_step=64)
