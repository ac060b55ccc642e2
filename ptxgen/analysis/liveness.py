"""Register pressure: the most virtual registers live at once, per declaration class.

Backward liveness over the CFG (live_in = uses ∪ (live_out − kills)), then one backward walk per
block counting, at every instruction, the values live across it plus any it defines. A guarded
definition does not kill: where the guard is false the old value survives. Register sets are
Python ints used as bit sets so the fixed point is cheap on large functions.
"""
from ..emit.ptx import decl_type

CLASSES = ("pred", "b16", "b32", "b64", "f32", "f64")


def reg_class(reg):
    """Declaration class of a register, as the emitter groups '.reg' lines."""
    return decl_type(reg.type)


def _width32(counts):
    """32-bit register slots a set of live values needs (64-bit values take two, predicates
    none: they live in predicate registers)."""
    total = 0
    for c, n in counts.items():
        if c == "pred":
            continue
        total += 2 * n if c in ("b64", "f64") else n
    return total


def register_pressure(cfg, kernel=None):
    """{'max_live': {class: n}, 'max_live_total': n, 'max_live_32bit': n, 'peak_line': line,
    'declared': {class: n}, 'live_in_entry': [names]} for the CFG of a function."""
    blocks = cfg.blocks
    index, regs = {}, []

    def bit(r):
        i = index.get(r)
        if i is None:
            i = index[r] = len(regs)
            regs.append(r)
        return 1 << i

    # per-instruction use/def bit sets, and per-block upward-exposed uses and kills
    per_block = []
    for b in blocks:
        use = kill = 0
        steps = []
        for ins in b.instrs:
            u = 0
            for r in ins.uses():
                u |= bit(r)
            d = 0
            for r in ins.defs():
                d |= bit(r)
            k = d if ins.guard is None else 0
            steps.append((u, d, k, ins))
            use |= u & ~kill
            kill |= k
        per_block.append((use, kill, steps))

    live_in = [0] * len(blocks)
    live_out = [0] * len(blocks)
    order = list(reversed(cfg._rpo)) + [b.index for b in blocks if not b.reachable]
    changed = True
    while changed:
        changed = False
        for bi in order:
            out = 0
            for s in blocks[bi].succs:
                out |= live_in[s]
            use, kill, _ = per_block[bi]
            new_in = use | (out & ~kill)
            if out != live_out[bi] or new_in != live_in[bi]:
                live_out[bi], live_in[bi] = out, new_in
                changed = True

    cls = [reg_class(r) for r in regs]
    max_live = {c: 0 for c in CLASSES}
    best_total, best_32, peak_line = 0, 0, 0
    for bi, b in enumerate(blocks):
        live = live_out[bi]
        counts = _count(live, cls)
        for u, d, k, ins in reversed(per_block[bi][2]):
            # at the instruction: values live across it, plus its results (even dead ones)
            extra = _count(d & ~live, cls)
            here = _merge(counts, extra)
            best_total, best_32, peak_line = _track(here, max_live, best_total, best_32,
                                                    peak_line, ins.line)
            removed = live & k
            if removed:
                _sub(counts, removed, cls)
            live &= ~k
            added = u & ~live
            if added:
                _add(counts, added, cls)
            live |= u
        best_total, best_32, peak_line = _track(counts, max_live, best_total, best_32,
                                                peak_line, b.line)
    declared = {c: 0 for c in CLASSES}
    if kernel is not None:
        for r in _declared(kernel):
            c = reg_class(r)
            declared[c] = declared.get(c, 0) + 1
    entry_live = [regs[i].name for i in _bits(live_in[0])] if blocks else []
    return {
        "max_live": max_live,
        "max_live_total": best_total,
        "max_live_32bit": best_32,
        "peak_line": peak_line,
        "declared": declared,
        "live_in_entry": sorted(entry_live),
    }


def _declared(kernel):
    from ..ir.instr import Verbatim
    out = list(kernel.regs)
    for s in kernel.body:
        if isinstance(s, Verbatim) and s.regs:
            out.extend(s.regs)
    return out


def _bits(x):
    i = 0
    while x:
        if x & 1:
            yield i
        x >>= 1
        i += 1


def _count(bits, cls):
    counts = {}
    while bits:
        low = bits & -bits
        c = cls[low.bit_length() - 1]
        counts[c] = counts.get(c, 0) + 1
        bits ^= low
    return counts


def _add(counts, bits, cls):
    for c, n in _count(bits, cls).items():
        counts[c] = counts.get(c, 0) + n


def _sub(counts, bits, cls):
    for c, n in _count(bits, cls).items():
        counts[c] -= n


def _merge(a, b):
    if not b:
        return a
    out = dict(a)
    for c, n in b.items():
        out[c] = out.get(c, 0) + n
    return out


def _track(counts, max_live, best_total, best_32, peak_line, line):
    for c, n in counts.items():
        if n > max_live.get(c, 0):
            max_live[c] = n
    total = sum(counts.values())
    w = _width32(counts)
    if w > best_32 or (w == best_32 and total > best_total):
        peak_line = line
    return max(best_total, total), max(best_32, w), peak_line
