"""AttentionSchedule: how the fused attention forward O = softmax(scale · Q Kᵀ) V is tiled and
specialized on sm_90a (FlashAttention-style: the S x S scores never leave registers).

    query block   BM = 64 · consumers rows of one (batch, head) per CTA; each consumer
                  warpgroup owns 64 rows (one wgmma M block)
    key block     BN keys per step of the online softmax: S = Q·Kᵀ is one m64nBNk16 wgmma chain
                  per consumer (K tile as the K-major B operand), P·V one m64n64k16 chain per
                  64-column half of D (V tile as the MN-major B operand, P from registers)
    pipeline      Q loaded once by TMA; K and V tiles by TMA into `stages` slots handed over
                  through a full/empty mbarrier pair, filled by one producer thread
    warpgroups    one producer warpgroup and `consumers` consumer warpgroups; setmaxnreg moves
                  registers from the producer to the consumers
    persistent    one CTA per SM walking the (query block, head) tiles instead of one per tile
    peel          the key blocks the built-in mask leaves whole (keys < S; causal: at or below
                  the CTA's first row) in a loop of their own without the mask's code
    full_apart    a block mask's full key blocks in a loop of their own without the mask_mod,
                  after its partial ones (the lists hold partial blocks first)
    soft_ex2_every every k-th softmax exp2 on the FMA pipe instead of the SFU (which bounds
                  the step at D = 64)

Every shared tile is stored as 64-column (128-byte) column blocks in the 128-byte swizzle, the
layout the GEMM's schedule (tc_matmul.py) uses; D = 128 is two such blocks.
`ptxgen.lower.lower_attention(schedule, arch, shape, dtype)` (lower/attention.py) turns one into a Module.
"""
import dataclasses
from dataclasses import dataclass

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from .. import arch as archmod
from ..errors import ScheduleError
from .defaults import choice
from .matmul import target_limits
from .tc_matmul import (SWIZZLE_ATOM_BYTES, SWIZZLE_BYTES, WARPGROUP, WGMMA_M,
                        check_register_split)

HEAD_DIMS = (64, 128)
FLAGS = ("overlap", "persistent", "peel", "full_apart")   # the schedule's True/False fields
DTYPES = ("bf16", "f16")
COL_BLOCK = SWIZZLE_BYTES // 2          # 16-bit elements in one swizzled 128-byte row


@dataclass(frozen=True)
class AttentionSchedule:
    """One sm_90a attention-forward schedule (frozen, hashable; str gives a short name)."""
    BN: int = 128                # keys per online-softmax step (N of the Q·Kᵀ wgmma)
    consumers: int = 2           # consumer warpgroups: BM = 64 · consumers query rows per CTA
    stages: int = 3              # K/V slots of the mbarrier ring (with overlap, slot n-1 is
                                 # held until P·V(n-1) ends: 2 leave no slot to prefetch into)
    producer_regs: int = 24      # setmaxnreg.dec of the producer warpgroup
    consumer_regs: int = 240     # setmaxnreg.inc of the consumer warpgroups
    overlap: bool = True         # issue S(n) = Q·K(n) with P(n-1)·V(n-1): softmax(n) runs
                                 # while the tensor cores do P·V (FlashAttention-3, sec. 3.2)
    persistent: bool = False     # one CTA per SM walking the (query block, head) tiles: the
                                 # next tile's Q and K/V load while this one's O is stored
    peel: bool = False           # key blocks that need no mask in a loop of their own, so the
                                 # mask's selects (ptxas predicates them) leave the hot loop
    full_apart: bool = False     # a block mask's full blocks after its partial ones, in a loop
                                 # without the mask_mod (FlexAttention's two block lists)
    soft_ex2_every: int = 0      # k: every k-th P element's exp2 on the FMA pipe (a polynomial,
                                 # lower/online_softmax.soft_exp2) where the SFU bounds the step

    instruction = "wgmma"        # the operator's path (schedule/mma_attention.py: "mma.sync")

    def __str__(self):
        regs = "" if (self.producer_regs, self.consumer_regs) == (24, 240) else \
            f"_r{self.producer_regs}-{self.consumer_regs}"
        return (f"attn{self.BM}x{self.BN}_s{self.stages}_c{self.consumers}"
                f"{'' if self.overlap else '_serial'}{regs}{'_p' if self.persistent else ''}"
                f"{'_peel' if self.peel else ''}{'_fa' if self.full_apart else ''}"
                f"{f'_sx{self.soft_ex2_every}' if self.soft_ex2_every else ''}")

    @property
    def BM(self):
        return WGMMA_M * self.consumers

    @property
    def threads(self):
        return WARPGROUP * (1 + self.consumers)

    @staticmethod
    def col_blocks(D):
        return D // COL_BLOCK

    def q_bytes(self, D):
        return self.BM * D * 2

    def kv_tile_bytes(self, D):
        """One K (or V) tile: BN rows of D 16-bit elements."""
        return self.BN * D * 2

    def stage_bytes(self, D):
        return 2 * self.kv_tile_bytes(D)

    def shared_bytes(self, D):
        """Dynamic shared memory: Q, the K/V slots, 1024 bytes of slack to align them to the
        swizzle atom, then the Q barrier, a full and an empty barrier per slot and (persistent)
        the barrier on which the consumers hand Q's buffer back."""
        return (self.q_bytes(D) + self.stages * self.stage_bytes(D) + SWIZZLE_ATOM_BYTES
                + 8 * (1 + 2 * self.stages + self.persistent))

    def validate(self, arch=DEFAULT_ARCH_SPECIFIC_TARGET, dtype="bf16", D=128):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"attention schedule {self}: {what}")

        for flag in FLAGS:
            if not isinstance(getattr(self, flag), bool):
                bad(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name not in FLAGS and \
                    (not isinstance(v, int) or isinstance(v, bool)):
                bad(f"{f.name} must be an int, got {v!r}")
        if archmod.check_arch(arch) != DEFAULT_ARCH_SPECIFIC_TARGET:
            bad(f"needs target sm_90a (wgmma, setmaxnreg), not {arch}")
        if dtype not in DTYPES:
            bad(f"input type must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if D not in HEAD_DIMS:
            bad(f"head dim D={D} must be one of {', '.join(map(str, HEAD_DIMS))}")
        if not (1 <= self.consumers <= 3):
            bad(f"consumers={self.consumers} must be 1, 2 or 3 warpgroups")
        if self.BN not in (32, 64, 128, 192, 256) or self.BN % 16:
            bad(f"BN={self.BN} must be 32, 64, 128, 192 or 256 (a k16 multiple, one TMA box)")
        if self.stages < 2:
            bad(f"stages={self.stages}: the ring needs at least 2")
        if self.soft_ex2_every == 1 or self.soft_ex2_every < 0:
            bad(f"soft_ex2_every={self.soft_ex2_every} must be 0 (none) or at least 2")
        lim = target_limits(DEFAULT_TARGET)
        need = self.shared_bytes(D)
        if need > lim["max_shared_per_block"]:
            bad(f"Q and {self.stages} K/V stages need {need} bytes of shared memory, more than "
                f"{lim['max_shared_per_block']} per block")
        check_register_split(self, lim, bad)
        # S accumulators, O accumulators and P packed to 16 bits, per consumer thread (with
        # overlap, S(n) and P(n-1) are live together)
        live = self.BN // 2 + D // 2 + self.BN // 4
        if live + 32 > self.consumer_regs:
            bad(f"{live} fragment registers per thread (S, O, P) do not fit "
                f"consumer_regs={self.consumer_regs}")
        return self

    def entry_regs(self):
        """The register cap every thread starts with (.maxnreg), as the GEMM's."""
        return (target_limits(DEFAULT_TARGET)["regs_per_sm"] // self.threads) // 8 * 8


def default_attention_schedule(D, causal=False, forms=True, heads_seq=None, sm_count=None):
    """128-key steps (FlashAttention-3's tile for D = 128, Shah et al. 2024), 3 K/V stages and
    the S/P·V overlap, with the measured default per head dim "attention.schedule"
    (schedule/data/defaults.json, docs/PERF.md#fused-attention-forward-sm_90a): two consumer
    warpgroups at D = 128, three at D = 64. The simulator's ranking does not separate these at
    D = 64, so the choice follows the measurement.
    With `forms` (kernels without score/mask mods), the measured forms "attention.forms" on
    top: the peeled key loop, and for a causal grid of at most a few waves of (query block,
    head) tiles over `sm_count` SMs (heads_seq: B·H and S) the persistent form, whose host
    tile plan evens out the triangle's unequal tiles."""
    fields = dict(choice("attention.schedule").get(str(D), {}))
    if not forms:
        return AttentionSchedule(**fields)
    forms = choice("attention.forms")
    short = forms["short_causal"]
    if causal and heads_seq is not None and sm_count:
        heads, S = heads_seq
        tiles = heads * -(-S // AttentionSchedule(**fields).BM)
        if tiles <= short["max_waves"] * sm_count:
            fields.update(short["schedule"].get(str(D), {}))
    fields["peel"] = forms["peel_without_mods"]
    return AttentionSchedule(**fields)
