"""Shared-memory bank conflicts of one warp-wide access: how many wavefronts it takes.

Model (cc 5.x and later; bank count and width from the isa header, 32 x 4 B):

- A wavefront moves at most one bank-width word per bank, i.e. banks x bank_bytes = 128 B.
  Lanes reading the same word share it (broadcast/multicast), so only *distinct* words
  mapped to one bank serialize.
- A lane's access of `width` bytes covers width/4 consecutive words (banks). Because one
  wavefront returns 128 B, a warp of 8-byte accesses is processed per half-warp (16 lanes x
  8 B) and one of 16-byte accesses per quarter-warp (8 lanes x 16 B): each lane group needs
  max over banks of its distinct words, and the groups' wavefronts add up. Accesses of 1, 2
  or 4 bytes are processed for the whole warp at once.
- Wide accesses are handled in passes of two such lane groups (256 B requested: the whole warp
  for 8 B, a half-warp for 16 B). When all the distinct words a pass asks for fit in one
  wavefront (no bank holds two of them, which needs lanes sharing addresses, since the pass
  requests twice a wavefront's bytes), the pass takes one wavefront; otherwise each lane group
  of the pass is served on its own, as above.

Why the passes: Nsight Compute on the H200 (tests/data/bank_conflicts_ncu.json, 105 patterns)
counts 1 wavefront for an 8-byte broadcast and for 32 lanes reading 16 distinct consecutive
8-byte words in pairs, and 2 (not 4) for the 16-byte broadcast, pairs, quads and two-address
patterns: identical addresses in the two groups of a pass are merged, but never across passes
(a 16-byte broadcast still takes one wavefront per half-warp). Groups of distinct addresses
are not packed together even when their union would fit: a random permutation of 32 8-byte
words takes 4 wavefronts where packing the whole warp would give 2, and 16-byte random
patterns take the per-quarter sums. Every recorded pattern agrees with this rule.

So `accesses - distinct banks` is not the count for wide accesses: 32 lanes reading
consecutive 16-byte vectors touch every bank four times yet take the ideal 4 wavefronts.
ideal is what the access needs without any conflict: one wavefront per pass whose words fit
in one, else one per lane group with an active lane. benchmarks/bank_ncu.py records what
Nsight Compute measures for the same patterns; tests/test_banks.py holds the model to it.
"""
from dataclasses import dataclass, field

import numpy as np

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError

WIDTHS = (1, 2, 4, 8, 16)
GROUPS_PER_PASS = 2           # lane groups whose identical addresses the hardware merges


@dataclass
class BankConflicts:
    wavefronts: int
    ideal: int
    degree: float                    # wavefronts / ideal; 1.0 is conflict-free
    width: int
    active_lanes: int
    # per lane group (half/quarter warp), in lane order; a pass served by one wavefront
    # counts as one group
    group_wavefronts: list = field(default_factory=list)
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


def _need(addresses, width, banks, bank_bytes):
    """(wavefronts, a worst bank) for one set of lanes served together: the most distinct
    words any bank must deliver."""
    words_in_bank = {}
    for a in set(addresses):
        first = a // bank_bytes
        for w in range(first, first + max(1, width // bank_bytes)):
            words_in_bank.setdefault(w % banks, set()).add(w)
    need = max(len(s) for s in words_in_bank.values())
    return need, min(b for b, s in words_in_bank.items() if len(s) == need)


def bank_conflicts(byte_addresses, width=4, arch=DEFAULT_TARGET):
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
    per_pass = min(warp, group * GROUPS_PER_PASS) if group < warp else warp

    passes = {}
    for lane, a in lanes:
        passes.setdefault(lane // per_pass, {}).setdefault(lane // group, []).append(a)
    per_group, worst_bank, worst, ideal = [], -1, 0, 0
    for p in sorted(passes):
        groups = passes[p]
        merged, bank = _need([a for g in groups.values() for a in g], width, banks, bank_bytes)
        if merged == 1:
            served = [(1, bank)]
        else:
            served = [_need(groups[g], width, banks, bank_bytes) for g in sorted(groups)]
        ideal += len(served)
        for need, bank in served:
            per_group.append(need)
            if need > worst:
                worst, worst_bank = need, bank
    wavefronts = sum(per_group)
    return BankConflicts(
        wavefronts=wavefronts,
        ideal=ideal,
        degree=(wavefronts / ideal) if ideal else 1.0,
        width=width,
        active_lanes=len(lanes),
        group_wavefronts=per_group,
        worst_bank=worst_bank,
    )


# -- layouts that remove conflicts -------------------------------------------------------------
MAX_PAD_UNITS = 8            # paddings tried: 1..8 units of the widest access


def warp_addresses(addresses, warp_size=32, active=None):
    """Per warp, its lanes' addresses (None where `active` switches a lane off)."""
    out = []
    for i in range(0, len(addresses), warp_size):
        lanes = [int(x) for x in addresses[i:i + warp_size]]
        if active is not None:
            lanes = [x if m else None for x, m in zip(lanes, active[i:i + warp_size])]
        out.append(lanes)
    return out


def normalise(lanes, width):
    """Lane addresses made non-negative and aligned without changing their banks: a common
    shift by a multiple of 128 B, then the common misalignment left by a dropped uniform term."""
    live = [x for x in lanes if x is not None]
    if not live:
        return list(lanes)
    low = min(live)
    shift = -(low // 128) * 128 if low < 0 else 0
    mis = live[0] % width
    return [None if x is None else x + shift - mis for x in lanes]


class _Counter:
    """Wavefronts of a set of accesses, each (per-thread addresses, active mask or None,
    width), under an address remapping; memoised per warp pattern."""

    def __init__(self, accesses, arch):
        self.accesses, self.arch = accesses, arch
        self.warp_size = isamod.load(arch).header.warp_size
        self.memo = {}

    def total(self, remap=None):
        n = ideal = 0
        for vec, active, width in self.accesses:
            v = vec if remap is None else remap(vec)
            for lanes in warp_addresses(v, self.warp_size, active):
                if all(x is None for x in lanes):
                    continue
                key = (tuple(normalise(lanes, width)), width)
                r = self.memo.get(key)
                if r is None:
                    r = self.memo[key] = bank_conflicts(list(key[0]), width, self.arch)
                n, ideal = n + r.wavefronts, ideal + r.ideal
        return n, ideal


def _pitches(accesses, unit):
    """Row lengths in bytes worth trying: strides between consecutive threads' addresses (a
    row pitch shows up as one), then powers of two."""
    out = []
    for vec, active, _w in accesses:
        d = np.abs(np.diff(vec if active is None else vec[active]))
        out += [x for x in sorted({int(v) for v in d if v >= 2 * unit and v % unit == 0})
                if x not in out]
    p = 2 * unit
    while p <= 8192:
        out += [p] if p not in out else []
        p *= 2
    return out[:24]


def layout_remedies(accesses, offset=0, element_bytes=4, arch=DEFAULT_TARGET):
    """How to lay out one shared array so its accesses stop conflicting.

    accesses: [(per-thread byte addresses (numpy ints, every thread of the block), active mask
    or None, access width)] of every access to the array, which starts at byte `offset`.
    Returns {wavefronts, ideal} per block, and when they differ `padding` (the smallest row
    padding reaching the fewest wavefronts) and `swizzle` (the best XOR swizzle of access-wide
    columns), each {wavefronts, row_bytes, …, change}. Both keep every access aligned: they
    move data in units of the widest access."""
    counter = _Counter(accesses, arch)
    current, ideal = counter.total()
    out = {"wavefronts": current, "ideal": ideal}
    if current <= ideal:
        return out
    h = isamod.load(arch).header
    unit = max(h.shared_bank_bytes, max(w for _v, _a, w in accesses))
    pitches = _pitches(accesses, unit)
    best = None
    for pad in range(unit, unit * MAX_PAD_UNITS + 1, unit):
        for pitch in pitches:
            def padded(vec, pitch=pitch, pad=pad):
                rel = vec - offset
                return offset + (rel // pitch) * (pitch + pad) + rel % pitch
            n, _ = counter.total(padded)
            if best is None or n < best[0]:
                best = (n, pitch, pad)
        if best[0] <= ideal:
            break
    n, pitch, pad = best
    e = element_bytes
    out["padding"] = {"wavefronts": n, "row_bytes": pitch, "pad_bytes": pad,
                      "change": f"pad each {pitch}-byte row ({pitch // e} elements of {e} B) by "
                                f"{pad // e} element{'s' if pad // e > 1 else ''} (row pitch "
                                f"{pitch + pad} B)"}
    window = h.shared_banks * h.shared_bank_bytes
    best = None
    for pitch in pitches:
        chunks = pitch // unit
        if pitch % unit or chunks < 2 or chunks & (chunks - 1):
            continue
        mod = min(chunks, window // unit)

        def swizzled(vec, pitch=pitch, mod=mod):
            rel = vec - offset
            row, col = rel // pitch, rel % pitch
            return offset + row * pitch + ((col // unit) ^ (row % mod)) * unit + col % unit
        n, _ = counter.total(swizzled)
        if best is None or n < best[0]:
            best = (n, pitch, mod)
    if best is not None:
        n, pitch, mod = best
        out["swizzle"] = {"wavefronts": n, "row_bytes": pitch, "rows_mod": mod,
                          "change": f"XOR each {pitch}-byte row's {unit}-byte column index "
                                    f"with (row mod {mod})"}
    picks = [c for c in (out.get("padding"), out.get("swizzle"))
             if c and c["wavefronts"] < current]
    if picks:
        low = min(c["wavefronts"] for c in picks)
        out["suggestion"] = (" or ".join(c["change"] for c in picks if c["wavefronts"] == low)
                             + f": {current} → {low} wavefronts per block (ideal {ideal})")
    return out
