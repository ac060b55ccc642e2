"""MmaAttentionSchedule: the sm_80-style fused attention forward (FlashAttention-2's form:
mma.sync + ldmatrix + cp.async), the comparison path of issue 17 beside AttentionSchedule's
sm_90a one (attention.py). A schedule class of its own for the reason the GEMM's is
(mma_matmul.py): warps owning 16 query rows each and a cp.async ring share nothing with
warpgroups, setmaxnreg budgets and an mbarrier ring.

    query block   BM = 16 · warps rows of one (batch, head) per CTA; each warp owns 16 rows,
                  its Q fragments held in registers for the whole kernel
    key block     BN keys per online-softmax step: S = Q·Kᵀ as BN/8 m16n8k16 accumulators per
                  warp, P·V into D/8 of them; P stays in registers (the accumulator layout of
                  S is the A fragment layout of P·V)
    pipeline      Q, then K and V tiles by cp.async.cg into `stages` slots, one commit group
                  per key block, stages-1 blocks in flight

`ptxgen.lower.lower_mma_attention(schedule, arch, shape, dtype, causal)` (lower/mma_attention.py) turns one
into a Module.
"""
from dataclasses import dataclass

from .. import arch as archmod
from ..errors import ScheduleError
from .attention import DTYPES, HEAD_DIMS
from .matmul import target_limits
from .mma_matmul import CHUNK, INSTRUCTION, MMA_M, WARP, check_ints_and_target


class MmaSyncAttentionTiles:
    """What the mma.sync attention schedules (forward, backward, decode) share: the
    instruction, 16-bit rows of D elements, and (with a `warps` field) the CTA's threads."""
    instruction = INSTRUCTION

    @property
    def threads(self):
        return WARP * self.warps

    @staticmethod
    def row_bytes(D):
        return 2 * D


@dataclass(frozen=True)
class MmaAttentionSchedule(MmaSyncAttentionTiles):
    """One sm_80-style attention-forward schedule (frozen, hashable; str gives a short name)."""
    BN: int = 64                 # keys per online-softmax step
    warps: int = 8               # BM = 16 · warps query rows per CTA
    stages: int = 2              # K/V slots (2: double-buffered)

    def __str__(self):
        return f"mma_attn{self.BM}x{self.BN}_w{self.warps}_s{self.stages}"

    @property
    def BM(self):
        return MMA_M * self.warps

    def pass_rows(self, D):
        """Rows one pass of 16-byte copies by every thread covers."""
        return self.threads * CHUNK // self.row_bytes(D)

    def q_bytes(self, D):
        return self.BM * self.row_bytes(D)

    def stage_bytes(self, D):
        """One slot: a K tile and a V tile of BN rows."""
        return 2 * self.BN * self.row_bytes(D)

    def shared_bytes(self, D):
        return self.q_bytes(D) + self.stages * self.stage_bytes(D)

    def validate(self, arch=archmod.BASELINE_TARGET, dtype="bf16", D=128):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"attention schedule {self}: {what}")

        check_ints_and_target(self, arch, bad)
        if dtype not in DTYPES:
            bad(f"input type must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if D not in HEAD_DIMS:
            bad(f"head dim D={D} must be one of {', '.join(map(str, HEAD_DIMS))}")
        if self.BN not in (32, 64, 128):
            bad(f"BN={self.BN} must be 32, 64 or 128 (whole k16 steps of P·V)")
        if self.warps not in (1, 2, 4, 8):
            bad(f"warps={self.warps} must be 1, 2, 4 or 8")
        rows = self.pass_rows(D)
        # rows of one copy pass must be a multiple of the 8-row swizzle period
        if rows < 8 or rows % 8 or self.BM % rows or self.BN % rows:
            bad(f"{self.threads} threads copy {rows} rows of D={D} per pass: needs a multiple "
                f"of 8 that divides BM={self.BM} and BN={self.BN}")
        if self.stages < 2:
            bad(f"stages={self.stages}: the pipeline needs at least 2")
        # Q, S, O and P per thread; ptxas 13.0 spills hundreds of bytes at 192 (D = BN = 128)
        # and none at 144 (D = 128, BN = 64 or D = 64, BN = 128) with 8 warps
        live = D // 4 + self.BN // 2 + D // 2 + self.BN // 4
        if live > 160:
            bad(f"{live} fragment registers per thread (Q, S, O, P) leave too few for "
                f"addresses")
        lim = target_limits(archmod.base_arch(arch))
        need = self.shared_bytes(D)
        if need > lim["max_shared_per_block"]:
            bad(f"Q and {self.stages} K/V stages need {need} bytes of shared memory, more than "
                f"{lim['max_shared_per_block']} per block on {arch}")
        return self
