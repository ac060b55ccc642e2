"""What a global atomic costs L2 beyond its sectors: the read-modify-write of a partial sector.

An atomic is performed in L2: the slice reads the sector, applies the operation and writes it
back. When the warp's lanes cover a whole sector (a coalesced `red` over consecutive words) that
is the sector's ordinary write; when they cover only part of it (a scatter-add or a histogram:
one lane, four bytes, per sector) it is the same read-modify-write a partial-sector store pays
(`memory_model.l2_partial_write_bytes`, measured on the fitting part's scatter). This module
counts those sectors from the access pilot's recorded addresses; `memory.SmMemory.atomic`
charges them.
"""


def is_float(ins):
    """Whether a global atomic operates on floating-point words (atom/red .f16/.f32/.f64...):
    one address takes a float operation's time per lane (fitd_atom, round sim10b: red.add.f32
    on one word 1.76 ns a lane, atom.add / atom.max .u32 0.74 ns)."""
    return any(m[:1] == "f" and m[1:].isdigit() or m in ("bf16", "bf16x2", "f16x2")
               for m in ins.mods)


def serial_ns(acc, int_ns, float_ns):
    """ns one lane takes at an address other lanes wait behind: the operation's own time."""
    return float_ns if acc.atom_float and float_ns else int_ns


def partial_sectors(lanes, size, sector):
    """Sectors one warp execution's lane addresses (None: inactive) touch fewer than `sector`
    bytes of, each lane `size` bytes (a word touched by several lanes counts once: they are
    one after another on one word, not more of the sector)."""
    words = {a for a in lanes if a is not None}
    per = {}
    for a in words:
        for b in range(a, a + size):
            per[b // sector] = per.get(b // sector, 0) + 1
    return sum(1 for n in per.values() if n < sector)


def l2_bytes(acc, sector, partial_write):
    """L2 bytes of one warp execution of a global atomic with Access `acc`: its sectors, a
    partial one at the read-modify-write's figure instead of a sector's."""
    if acc is None or not partial_write:
        return acc.bytes if acc is not None else 0
    return acc.bytes + acc.partial_sectors * (partial_write - sector)
