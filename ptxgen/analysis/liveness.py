"""Register pressure: the most virtual registers live at once, per declaration class.

Backward liveness over the CFG (live_in = uses ∪ (live_out − kills)), then one backward walk per
block counting, at every instruction, the values live across it plus any it defines. A guarded
definition does not kill: where the guard is false the old value survives. Register sets are
Python ints used as bit sets so the fixed point is cheap on large functions.
"""
from ..emit.ptx import decl_type
from ..ir.instr import Verbatim

CLASSES = ("pred", "b16", "b32", "b64", "f32", "f64")
# 32-bit register slots a value of each class takes: 64-bit values two, predicates none (they
# live in predicate registers); 8-bit values, like 16-bit ones, take a whole slot
_SLOTS = {"pred": 0, "b8": 1, "b16": 1, "b32": 1, "f32": 1, "b64": 2, "f64": 2}


def reg_class(reg):
    """Declaration class of a register, as the emitter groups '.reg' lines."""
    return decl_type(reg.type)


def register_pressure(cfg, kernel=None, uses_defs=None):
    """{'max_live': {class: n}, 'max_live_total': n, 'max_live_32bit': n, 'peak_line': line,
    'declared': {class: n}, 'live_in_entry': [names]} for the CFG of a function.

    uses_defs: optional [(uses, defs)] per instruction in CFG order, when already computed."""
    blocks = cfg.blocks
    index, regs = {}, []
    if uses_defs is None:
        uses_defs = [(i.uses(), i.defs()) for b in blocks for i in b.instrs]

    # per-instruction use/def bit sets, and per-block upward-exposed uses and kills
    per_block = []
    n = 0
    for b in blocks:
        use = kill = 0
        steps = []
        for ins in b.instrs:
            us, ds = uses_defs[n]
            n += 1
            u = d = 0
            for r in us:
                i = index.get(r)
                if i is None:
                    i = index[r] = len(regs)
                    regs.append(r)
                u |= 1 << i
            for r in ds:
                i = index.get(r)
                if i is None:
                    i = index[r] = len(regs)
                    regs.append(r)
                d |= 1 << i
            k = d if ins.guard is None else 0
            steps.append((u, d, k, ins.line))
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

    names = list(CLASSES) + sorted({reg_class(r) for r in regs} - set(CLASSES))
    slot_of = [names.index(reg_class(r)) for r in regs]
    weight = [_SLOTS.get(c, 1) for c in names]
    peak = _Peak(len(names), weight)
    for bi, b in enumerate(blocks):
        live = live_out[bi]
        counts = [0] * len(names)
        _add(counts, live, slot_of)
        grew = True
        for u, d, k, line in reversed(per_block[bi][2]):
            # at the instruction: values live across it, plus its results (even dead ones);
            # only when something was added since the last look can a new maximum appear
            extra = d & ~live
            if extra:
                here = counts[:]
                _add(here, extra, slot_of)
                peak.see(here, line)
            elif grew:
                peak.see(counts, line)
            grew = False
            removed = live & k
            if removed:
                _add(counts, removed, slot_of, -1)
                live &= ~k
            added = u & ~live
            if added:
                _add(counts, added, slot_of)
                live |= u
                grew = True
        if grew:
            peak.see(counts, b.line)
    declared = {c: 0 for c in CLASSES}
    if kernel is not None:
        for r in _declared(kernel):
            c = reg_class(r)
            declared[c] = declared.get(c, 0) + 1
    entry_live = [regs[i].name for i in _bits(live_in[0])] if blocks else []
    return {
        "max_live": {c: peak.max[i] for i, c in enumerate(names)
                     if c in CLASSES or peak.max[i]},
        "max_live_total": peak.total,
        "max_live_32bit": peak.slots,
        "peak_line": peak.line,
        "declared": declared,
        "live_in_entry": sorted(entry_live),
    }


class _Peak:
    def __init__(self, n, weight):
        self.max = [0] * n
        self.weight = weight
        self.total = self.slots = self.line = 0

    def see(self, counts, line):
        m = self.max
        for i, c in enumerate(counts):
            if c > m[i]:
                m[i] = c
        total = sum(counts)
        slots = sum(c * w for c, w in zip(counts, self.weight))
        if slots > self.slots or (slots == self.slots and total > self.total):
            self.line = line
        self.total = max(self.total, total)
        self.slots = max(self.slots, slots)


def _declared(kernel):
    out = list(kernel.regs)
    for s in kernel.body:
        if isinstance(s, Verbatim) and s.regs:
            out.extend(s.regs)
    return out


def _bits(x):
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


def _add(counts, bits, slot_of, sign=1):
    while bits:
        low = bits & -bits
        counts[slot_of[low.bit_length() - 1]] += sign
        bits ^= low
