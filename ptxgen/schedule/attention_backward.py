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
import dataclasses
from dataclasses import dataclass

from .. import arch as archmod
from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..errors import ScheduleError
from .attention import HEAD_DIMS
from .matmul import target_limits
from .mma_matmul import CHUNK, INSTRUCTION, MMA_M, WARP, check_ints_and_target
from .tc_matmul import SWIZZLE_ATOM_BYTES, WARPGROUP, WGMMA_M, check_register_split

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


@dataclass(frozen=True)
class WgmmaBackwardSchedule:
    """The sm_90a (wgmma) form of the two main backward kernels (lower/attention_backward_wgmma.py;
    the Delta pre-pass stays the mma.sync one). Each kernel: one producer warpgroup issuing TMA
    box loads into an mbarrier ring of `stages` slots, `consumers` consumer warpgroups of 64
    own rows each.

        dK/dV kernel  BK = 64 · consumers keys of one (batch, K/V head) per CTA; K and V loaded
                      once; Q and dO tiles of q_step query rows streamed
        dQ kernel     BQ = 64 · consumers query rows of one (batch, head) per CTA; Q and dO
                      loaded once; K and V tiles of kv_step keys streamed
    """
    consumers: int = 2           # consumer warpgroups (64 own rows each) of both kernels
    q_step: int = 32             # query rows per streamed step of the dK/dV kernel (wgmma N;
                                 # 64 fits the registers at D = 64 only)
    kv_step: int = 64            # keys per streamed step of the dQ kernel (wgmma N)
    stages: int = 2              # slots of both rings
    producer_regs: int = 24      # setmaxnreg.dec of the producer warpgroup
    consumer_regs: int = 240     # setmaxnreg.inc of the consumer warpgroups

    instruction = "wgmma"

    def __str__(self):
        return (f"attn_bwd_wgmma_kv{self.BK}q{self.q_step}_q{self.BQ}k{self.kv_step}"
                f"_s{self.stages}_c{self.consumers}")

    @property
    def BK(self):
        return WGMMA_M * self.consumers

    @property
    def BQ(self):
        return WGMMA_M * self.consumers

    @property
    def threads(self):
        return WARPGROUP * (1 + self.consumers)

    def kernel_tiles(self, D):
        """{kernel: (own rows, streamed rows)} of the two main kernels."""
        return {"dkdv": (self.BK, self.q_step), "dq": (self.BQ, self.kv_step)}

    def shared_bytes(self, kernel, D):
        """Two own tiles, `stages` slots of two streamed tiles, 1024 bytes of slack to align
        them to the swizzle atom, the own tiles' barrier and a full/empty pair per slot."""
        own, step = self.kernel_tiles(D)[kernel]
        return (2 * own * D * 2 + self.stages * 2 * step * D * 2 + SWIZZLE_ATOM_BYTES
                + 8 * (1 + 2 * self.stages))

    def entry_regs(self):
        """The register cap every thread starts with (.maxnreg), as the forward's."""
        return (target_limits(DEFAULT_TARGET)["regs_per_sm"] // self.threads) // 8 * 8

    def validate(self, arch=DEFAULT_ARCH_SPECIFIC_TARGET, dtype="bf16", D=128):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"attention backward schedule {self}: {what}")

        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool):
                bad(f"{f.name} must be an int, got {v!r}")
        if archmod.check_arch(arch) != DEFAULT_ARCH_SPECIFIC_TARGET:
            bad(f"needs target {DEFAULT_ARCH_SPECIFIC_TARGET} (wgmma, setmaxnreg), not {arch}")
        if dtype not in DTYPES:
            bad(f"input type must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if D not in HEAD_DIMS:
            bad(f"head dim D={D} must be one of {', '.join(map(str, HEAD_DIMS))}")
        if not (1 <= self.consumers <= 2):
            bad(f"consumers={self.consumers} must be 1 or 2 warpgroups")
        for name in ("q_step", "kv_step"):
            if getattr(self, name) not in (32, 64):
                bad(f"{name}={getattr(self, name)} must be 32 or 64 (wgmma N, a k16 multiple)")
        if self.stages < 2:
            bad(f"stages={self.stages}: the ring needs at least 2")
        lim = target_limits(DEFAULT_TARGET)
        for kernel in ("dkdv", "dq"):
            need = self.shared_bytes(kernel, D)
            if need > lim["max_shared_per_block"]:
                bad(f"{kernel}: {need} bytes of shared memory, more than "
                    f"{lim['max_shared_per_block']} per block")
        check_register_split(self, lim, bad)
        # dK and dV (D/2 f32 each), Sᵀ/P and dPᵀ/dS (q_step/2 each), P packed (q_step/4):
        # ptxas 13.0 spills at 208 of them (D = 128, 64-row steps, causal) under 240
        live = D + self.q_step + self.q_step // 4
        if live + 48 > self.consumer_regs:
            bad(f"dkdv: {live} fragment registers per thread do not fit "
                f"consumer_regs={self.consumer_regs}")
        return self


def default_wgmma_backward_schedule(D):
    """Two consumer warpgroups, a 2-slot ring, 64-key steps in the dQ kernel; the dK/dV
    kernel's query steps 64 rows at D = 64, 32 at D = 128 (dK and dV take 128 registers)."""
    return WgmmaBackwardSchedule(q_step=64 if D == 64 else 32)
