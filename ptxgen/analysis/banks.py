"""Shared-memory bank conflicts of one warp-wide access: how many wavefronts it takes.

Model (cc 5.x and later; bank count and width from the isa header, 32 x 4 B):

- A wavefront moves at most one bank-width word per bank, i.e. banks x bank_bytes = 128 B.
  Lanes reading the same word share it (broadcast/multicast), so only *distinct* words
  mapped to one bank serialize.
- A lane's access of `width` bytes covers width/4 consecutive words (banks). Because one
  wavefront returns 128 B, a warp of 8-byte accesses is processed per half-warp (16 lanes x
  8 B) and one of 16-byte accesses per quarter-warp (8 lanes x 16 B); each lane group needs
  max over banks of its distinct words, and the groups' wavefronts add up. Accesses of 1, 2
  or 4 bytes are processed for the whole warp at once.

So `accesses - distinct banks` is not the count for wide accesses: 32 lanes reading
consecutive 16-byte vectors touch every bank four times yet take the ideal 4 wavefronts.
ideal is what the access needs without any conflict: one wavefront per lane group that has an
active lane. benchmarks/bank_ncu.py records what Nsight Compute measures for the same
patterns; tests/test_banks.py holds the model to it.
"""
from dataclasses import dataclass, field

from .. import isa as isamod
from ..errors import PtxgenError

WIDTHS = (1, 2, 4, 8, 16)


@dataclass
class BankConflicts:
    wavefronts: int
    ideal: int
    degree: float                    # wavefronts / ideal; 1.0 is conflict-free
    width: int
    active_lanes: int
    group_wavefronts: list = field(default_factory=list)   # per lane group (half/quarter warp)
    worst_bank: int = -1             # a bank that needed the most wavefronts (-1: no access)

    def to_dict(self):
        return dict(self.__dict__)


def _lanes(byte_addresses, warp_size):
    """[(lane, address)] from a list (None = inactive lane) or a {lane: address} dict."""
    if isinstance(byte_addresses, dict):
        items = sorted(byte_addresses.items())
    else:
        items = [(i, a) for i, a in enumerate(byte_addresses)]
    out = []
    for lane, a in items:
        if a is None:
            continue
        if isinstance(lane, bool) or not isinstance(lane, int) or not 0 <= lane < warp_size:
            raise PtxgenError(f"bank_conflicts: lane {lane!r} is not in 0..{warp_size - 1}")
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise PtxgenError(f"bank_conflicts: lane {lane}: address {a!r} is not a "
                              f"non-negative integer")
        out.append((lane, a))
    if len(items) > warp_size:
        raise PtxgenError(f"bank_conflicts: {len(items)} addresses for a warp of {warp_size}")
    return out


def bank_conflicts(byte_addresses, width=4, arch="sm_90"):
    """Wavefronts one warp's shared-memory access of `width` bytes per lane takes.

    byte_addresses: one shared-memory byte address per lane, lane i at index i; None (or a
    missing key, when a {lane: address} dict is given) marks an inactive lane.
    """
    if width not in WIDTHS:
        raise PtxgenError(f"bank_conflicts: width must be one of {WIDTHS}, got {width!r}")
    h = isamod.load(arch).header
    banks, bank_bytes, warp = h.shared_banks, h.shared_bank_bytes, h.warp_size
    lanes = _lanes(byte_addresses, warp)
    for lane, a in lanes:
        if a % width:
            raise PtxgenError(f"bank_conflicts: lane {lane}: address {a} is not aligned to "
                              f"the {width}-byte access")
    wavefront_bytes = banks * bank_bytes
    # lanes served by one wavefront when none conflict: 32 for <= 4 B, 16 for 8 B, 8 for 16 B
    group = min(warp, max(1, wavefront_bytes // width))
    words_per_lane = max(1, width // bank_bytes)

    groups = {}
    for lane, a in lanes:
        groups.setdefault(lane // group, []).append(a)
    per_group, worst_bank, worst = [], -1, 0
    for g in sorted(groups):
        words_in_bank = {}
        for a in groups[g]:
            first = a // bank_bytes
            for w in range(first, first + words_per_lane):
                words_in_bank.setdefault(w % banks, set()).add(w)
        need = max(len(s) for s in words_in_bank.values())
        per_group.append(need)
        if need > worst:
            worst = need
            worst_bank = min(b for b, s in words_in_bank.items() if len(s) == need)
    wavefronts = sum(per_group) if per_group else 0
    ideal = len(per_group)
    return BankConflicts(
        wavefronts=wavefronts,
        ideal=ideal,
        degree=(wavefronts / ideal) if ideal else 1.0,
        width=width,
        active_lanes=len(lanes),
        group_wavefronts=per_group,
        worst_bank=worst_bank,
    )
