"""DecodeSchedule: how the attention decode (ops/attention_decode.py) splits its work.

    M             the query rows of one K/V head: its G = H_q / H_kv query heads times the S_q
                  new tokens, 16 per mma.sync m16n8k16 tile (rows past G·S_q are padding); a
                  key read once serves every row of the tile. More than 16 rows: one CTA per
                  16-row tile (grid z).
    split         one warp's range of the keys of one (batch, kv head): its own cp.async ring of
                  `stages` slots of BN keys (K and V tiles, no barrier but the warp's own); its
                  softmax partial (O, LSE) goes to a workspace the combine kernel reduces
    CTA           `warps` splits of one (batch, kv head) side by side, sharing the Q tile
                  in shared memory

Not measured yet (no GPU run of this operator): the defaults below are chosen from the shape
and the target's SM count, each with its reason.
"""
from dataclasses import dataclass

from .. import arch as archmod
from .. import isa
from ..errors import ScheduleError
from .attention import HEAD_DIMS
from .matmul import target_limits
from .mma_attention import MmaSyncAttentionTiles
from .mma_matmul import MMA_M

BLOCK_KEYS = 16          # keys per block: one k16 step of P·V; a page holds whole blocks
MIN_SPLIT_BLOCKS = 4     # a split shorter than 64 keys costs more in partials than it saves
MAX_SPLITS = 128         # the combine kernel's loop over one row's partials
WAVES = 2                # CTAs for two full waves: the last, partial wave is a smaller share


@dataclass(frozen=True)
class DecodeSchedule(MmaSyncAttentionTiles):
    """One attention-decode schedule (frozen, hashable; str gives a short name)."""
    splits: int = 4          # key ranges per (batch, kv head, 16-row tile), one warp each
    warps: int = 4           # splits per CTA
    stages: int = 3          # K/V slots of each warp's ring (2 in flight while one is read)
    BN: int = BLOCK_KEYS

    def __str__(self):
        return f"decode_sp{self.splits}_w{self.warps}_s{self.stages}"

    def stage_bytes(self, D):
        """One slot: a K tile and a V tile of BN rows."""
        return 2 * self.BN * self.row_bytes(D)

    def warp_bytes(self, D):
        return self.stages * self.stage_bytes(D)

    def q_bytes(self, D):
        """The CTA's 16-row Q tile, read by every warp's ldmatrix."""
        return MMA_M * self.row_bytes(D)

    def shared_bytes(self, D):
        return self.q_bytes(D) + self.warps * self.warp_bytes(D)

    def validate(self, arch=archmod.BASELINE_TARGET, D=128):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"decode schedule {self}: {what}")

        for name in ("splits", "warps", "stages", "BN"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                bad(f"{name} must be a positive int, got {v!r}")
        if D not in HEAD_DIMS:
            bad(f"head dim D={D} must be one of {', '.join(map(str, HEAD_DIMS))}")
        if self.BN != BLOCK_KEYS:
            bad(f"BN={self.BN} must be {BLOCK_KEYS} (pages hold whole key blocks)")
        if self.warps not in (1, 2, 4, 8):
            bad(f"warps={self.warps} must be 1, 2, 4 or 8")
        if self.splits % self.warps or self.splits > MAX_SPLITS:
            bad(f"splits={self.splits} must be a multiple of warps={self.warps} and at most "
                f"{MAX_SPLITS}")
        if self.stages < 2:
            bad(f"stages={self.stages}: the ring needs at least 2")
        lim = target_limits(archmod.base_arch(arch))
        if self.shared_bytes(D) > lim["max_shared_per_block"]:
            bad(f"{self.warps} warps of {self.stages} K/V slots need {self.shared_bytes(D)} "
                f"bytes of shared memory, more than {lim['max_shared_per_block']} per block")
        return self


def m_tiles(rows):
    """16-row mma tiles of `rows` query rows (G·S_q) of one K/V head."""
    return -(-rows // MMA_M)


def default_decode_schedule(B, H_kv, rows, kv_len, D, arch=archmod.BASELINE_TARGET):
    """Splits from the work and the target's SM count (not measured): enough CTAs for WAVES
    full waves (CTAs per SM by shared memory), no split under MIN_SPLIT_BLOCKS key blocks;
    4 warps (splits) per CTA and 3 slots per warp keep 2 x 2 x BN x D x 2 bytes in flight
    per warp, ~64-128 KB per SM: above the latency-bandwidth product of HBM3 per SM."""
    base = archmod.base_arch(arch)
    s = DecodeSchedule()
    lim = target_limits(base)
    per_sm = max(1, min(lim["shared_per_sm"] // (s.shared_bytes(D) + lim[
        "reserved_shared_per_block"]), lim["max_threads_per_sm"] // s.threads))
    pairs = B * H_kv * m_tiles(rows)
    cta_splits = -(-WAVES * isa.sm_count(base) * per_sm // pairs)
    blocks = -(-kv_len // BLOCK_KEYS)
    most = max(1, min(MAX_SPLITS, blocks // MIN_SPLIT_BLOCKS))
    splits = min(cta_splits * s.warps, most)
    warps = next(w for w in (4, 2, 1) if w <= splits)
    return DecodeSchedule(splits=splits // warps * warps, warps=warps)
