"""How each memory instruction's warp-wide access meets the memory system.

The timing loop needs, per static memory instruction, what one warp's execution of it costs:

- global loads, stores, atomics and cp.async: how many 32-byte sectors the 32 lanes touch
  (coalescing), how often an execution finds its sectors already in L1 (the same warp read them
  on an earlier iteration: `miss`), and how much of a miss other warps of the CTA fetched
  already (`share`);
- shared loads, stores and atomics: how many bank wavefronts the access needs (conflicts);
- global atomics whose address is one for the whole grid: how many lanes serialize there.

The answers come from an access pilot: the first two warps of the first CTA followed lane by
lane (all 32 lanes) through the control slice widened by every address computation, recording
the addresses of each memory instruction's first two executions; global atomics are also
recorded in warps sampled across the grid (their contention depends on how the whole grid's
addresses spread). An address that depends on data loaded from memory (a gather, a histogram
bin) is `indirect`: when the caller gave the array's values (numpy arguments) the pilot reads
them and the addresses are known; otherwise it is taken as one sector per lane and, in shared
memory, the bank wavefronts 32 random lanes need on average. An address that no lane of the pilot could compute otherwise (no argument values)
keeps the default: a coalesced access of warp size x width bytes, every execution a miss.
"""
from dataclasses import dataclass

import numpy as np

from ..ir.opcodes import DATA_RESULT
from ..ir.values import Addr, Imm, Reg
from .levels import l2_keep_bytes
from .program import ATOM, FIXED, LDG, LDS, STG, STS, backward_closure
from . import atomics, thin_stores
from .reuse import (data_steered_loop, spread_cost, spreading, temporal_miss,
                    reuse_region, sectors, spread_miss)


SAMPLED_WARP = 1 << 20          # record keys from here on: warps sampled across the grid


@dataclass
class Access:
    """One static memory instruction's per-execution cost."""
    bytes: int                  # global: sectors x sector bytes; shared: wavefronts x 128
    l1_bytes: int = 0           # global: lines x line bytes the access touches (0: bytes)
    l1_data_bytes: float = 0.0  # global loads: L1 data-path cycles x line bytes (0: l1_bytes):
                                # bank wavefronts, no fewer than the tag stage's lines / rate
    miss: float = 1.0           # global loads: fraction of executions that reach L2
    share: float = 1.0          # fraction of a miss's sectors no other warp of the CTA fetched
    wavefronts: float = 1.0     # shared: bank passes
    serial_lanes: float = 0     # global atomics: lanes of a warp on its most used address
                                # (that address takes them one at a time)
    addr_share: float = 0.0     # fraction of the grid's warp executions that use that address
    atom_ops: float = 0.0       # atomic-unit operations per warp execution: per sector, the
                                # most lanes on one address (lanes on distinct words of a
                                # sector go together, lanes on one word one after another;
                                # a line's four sectors are four operations)
    atom_chunks: float = 0.0    # interleave chunks (L2 slices) the grid's addresses spread over
    atom_float: bool = False    # a floating-point atomic (its lanes on one address take the
                                # float operation's time each, not the integer one's)
    atom_reply: bool = True     # an atomic whose SASS returns the old value (not a reduction)
    partial_sectors: int = 0    # stores: sectors the warp writes only part of (L2 merges them
                                # into the sector it holds: a read-modify-write there)
    filled_thin: int = 0        # stores: of those, thin ones the warp's later stores complete
    filled_thin_lines: int = 0  # stores: lines holding such sectors (one L2 request each)
    merged: float = 0.0         # stores: fraction of its sectors an earlier store of the
                                # block wrote in the same warp (merged with it: no more DRAM)
    l2_sectors: int = -1        # stores: sectors L2 takes from this execution (-1: all)
    paced: bool = False         # stores: a global load of the warp comes before (store_sectors)
    dram_share: float = 1.0     # stores: fraction of the written sectors no other warp of the
                                # CTA writes too (L2 merges those before they leave for DRAM)
    data_bytes: int = -1        # stores: distinct bytes the lanes write (-1: `bytes`)
    dram_miss: float = 0.0      # data-dependent scattered addresses over a region larger than
                                # what L2 keeps: the fraction of sectors L2 does not have
    indirect: bool = False
    private: bool = False       # shared atomics: no word is used by two of the recorded warps
                                # (a per-warp privatised table): no read-modify-write hazard
                                # between warps, each wavefront one pass of the port
    pattern: str = "default"    # how it was decided, for reports and tests


def memory_operand(ins):
    """The Addr operand whose memory the instruction reads or writes in global memory (cp.async:
    its source), else its only Addr."""
    addrs = [o for o in ins.operands if isinstance(o, Addr)]
    if not addrs:
        return None
    return addrs[1] if ins.opcode == "cp" and len(addrs) > 1 else addrs[0]


def lane_bytes(ins):
    """Bytes one lane moves: element x vector width (cp.async: its copy size)."""
    if ins.opcode == "cp":
        sizes = [o for o in ins.operands if isinstance(o, Imm)]
        return int(sizes[0].value) if sizes else 16
    t = ins.type
    return (t.nbytes if t is not None else 4) * ins.vector_width


def is_async_copy(ins):
    return ins.opcode == "cp" and "async" in ins.mods and "shared" in ins.mods and \
        any(o for o in ins.operands if isinstance(o, Addr))


def memory_instrs(prog):
    """Indices of the instructions the access model prices."""
    out = []
    for st in prog.instrs:
        ins = st.instr
        if st.kind in (LDG, STG, LDS, STS, ATOM) or is_async_copy(ins) or (
                st.kind == FIXED and ins.opcode in ("atom", "red") and ins.space == "shared"):
            if memory_operand(ins) is not None:
                out.append(st.index)
    return out


def address_slice(prog, indices):
    """The control slice widened by every instruction the addresses of `indices` depend on."""
    needed = set()
    for i in indices:
        a = memory_operand(prog.instrs[i].instr)
        if isinstance(a.base, Reg):
            needed.add(prog.reg_index[a.base])
    return backward_closure(prog, prog.slice, needed)[0]


def tainted(prog, sources):
    """Register ids whose value depends on an instruction in `sources` (by data flow, any
    order: loops carry values backwards)."""
    out = set()
    for i in sources:
        out.update(prog.instrs[i].defs)
    changed = True
    while changed:
        changed = False
        for st in prog.instrs:
            if st.defs and any(u in out for u in st.uses if u != st.guard_id) and \
                    not all(d in out for d in st.defs):
                out.update(st.defs)
                changed = True
    return out


def _loads(prog):
    """Instructions whose result is data from memory (not parameters or constants)."""
    out = []
    for st in prog.instrs:
        ins = st.instr
        if st.defs and (st.kind in (LDG, LDS, ATOM) or (
                ins.opcode in DATA_RESULT and ins.space not in ("param", "const"))):
            out.append(st.index)
    return out


def expected_wavefronts(banks, lanes=32, trials=4000):
    """Mean of the largest bank load when `lanes` lanes pick banks at random (a shared access
    whose addresses are data): a fixed-seed estimate, the same on every run."""
    rng = np.random.default_rng(0)
    picks = rng.integers(0, banks, size=(trials, lanes))
    counts = np.zeros((trials, banks), dtype=np.int64)
    np.add.at(counts, (np.arange(trials)[:, None], picks), 1)
    return float(counts.max(axis=1).mean())


def shared_wavefronts(addrs, size, banks, bank_bytes):
    """Bank passes of one warp's shared access: lanes go in phases of 128 bytes of data, and in
    each phase a bank serves one distinct word per pass (lanes reading the same word share)."""
    per_phase = max(1, (banks * bank_bytes) // max(size, 1))
    total = 0
    for p in range(0, len(addrs), per_phase):
        words = {}
        for a in addrs[p:p + per_phase]:
            if a is None:
                continue
            for w in range(a // bank_bytes, (a + max(size, bank_bytes) - 1) // bank_bytes + 1):
                words.setdefault(w % banks, set()).add(w)
        if words:
            total += max(len(v) for v in words.values())
    return max(total, 1)


def l1_data_bytes(execs, size, line, banks, bank_bytes, tag_lines_per_cycle):
    """A global load's L1 data-path time per execution (mean over `execs`, each a list of lane
    addresses) in line-bytes: L1 shares its data array with shared memory, so a warp's lanes
    take bank wavefronts as there (per bank, one distinct 128-byte line's word per pass; a
    whole-line access is one pass a line), but the tag stage looks up no more than
    `tag_lines_per_cycle` lines a cycle. The fitting case fit14a_pitch (H200): 16 lines of two
    bytes a load, at the same offset of each line (pitch 128 .. 4096 bytes: one bank, 16
    passes) 40.0 us; 4099 bytes apart (offsets spread over the banks: 2 passes) 12.1 us.
    Without the tag figure the line count (one line a cycle) stands."""
    if not tag_lines_per_cycle:
        return 0.0
    total = 0.0
    for ex in execs:
        lines = len(sectors(ex, size, line))
        wf = shared_wavefronts(ex, size, banks, bank_bytes) if lines else 0
        total += max(wf, lines / tag_lines_per_cycle) * line
    return total / max(len(execs), 1)


def _last_def(prog, i, reg):
    """The instruction of i's block that last defines `reg` before i, else None."""
    rid = prog.reg_index.get(reg)
    blk = prog.blocks[prog.block_of[i]]
    for j in range(i - 1, blk.start - 1, -1):
        if rid in prog.instrs[j].defs:
            return prog.instrs[j].instr
    return None


def masked_offsets(prog, i, most=1024):
    """The byte offsets a data-dependent shared address can take when it is a base plus a
    loaded value masked by an `and` with a constant (a radix digit's counter: `base + ((key
    >> shift) << 2 & 60)`): the mask's submasks, plus the address's own offset. None when
    the address is not of that form (or the mask allows more than `most` values)."""
    a = memory_operand(prog.instrs[i].instr)
    add = _last_def(prog, i, a.base) if isinstance(a.base, Reg) else None
    if add is None or add.opcode != "add":
        return None
    for r in add.operands[1:3]:
        d = _last_def(prog, i, r) if isinstance(r, Reg) else None
        imm = [o for o in d.operands[1:] if isinstance(o, Imm)] if d is not None and \
            d.opcode == "and" else []
        if imm and 0 < bin(int(imm[0].value)).count("1") <= most.bit_length() - 1:
            m, subs = int(imm[0].value), [0]
            for bit in (1 << k for k in range(m.bit_length()) if m >> k & 1):
                subs += [x | bit for x in subs]
            return sorted(x + int(a.offset or 0) for x in subs)
    return None


def expected_word_wavefronts(offsets, banks, bank_bytes, lanes=32, trials=2000):
    """Mean bank passes of `lanes` lanes picking among `offsets` at random: per bank the
    distinct words, as shared_wavefronts counts known addresses (lanes on one word share a
    pass); a fixed-seed estimate."""
    rng = np.random.default_rng(0)
    words = np.asarray(offsets) // bank_bytes
    picks = words[rng.integers(0, len(words), size=(trials, lanes))]
    return float(np.mean([max(len(set(row[row % banks == b])) for b in set(row % banks))
                          for row in picks]))


def _warp_private(rec, word):
    """Whether the recorded warps' shared-memory words are disjoint (at least two warps with
    addresses, none of their words in common)."""
    seen, warps = {}, 0
    for w, execs in rec.items():
        if w >= SAMPLED_WARP:
            continue
        words = {a // word for ex in execs for a in ex if a is not None}
        if not words:
            continue
        warps += 1
        for x in words:
            if seen.setdefault(x, w) != w:
                return False
    return warps >= 2


def analyze(prog, table, records, warps_per_cta, later=None):
    """{instruction index: Access} from the pilot's `records` ({index: {warp: [[address per
    lane] per execution]}}); `later`: the same for the executions after those (loads whose
    lanes spread out over a loop are priced over all of them)."""
    h, mm = table.header, table.memory_model or {}
    sector = int(mm.get("sector_bytes", 0)) or None
    banks, bank_bytes = h.shared_banks, h.shared_bank_bytes
    loaded = tainted(prog, _loads(prog))
    line = int(mm.get("l1_line_bytes", 0)) or None
    random_wf = None
    seen = {}                           # reuse_region → sector sets of its earlier global loads
    cta_seen = {}                       # block → {warp: its sectors, "all": every warp's}
    groups, written = None, {}          # stores: (region, warp) → bytes per sector, sectors so far
    first_load = next((st.index for st in prog.instrs if st.kind == LDG), None)
    out = {}
    for i in memory_instrs(prog):
        st = prog.instrs[i]
        ins = st.instr
        a = memory_operand(ins)
        base = prog.reg_index.get(a.base) if isinstance(a.base, Reg) else None
        size = lane_bytes(ins)
        shared = ins.space == "shared" and not is_async_copy(ins)
        indirect = base is not None and base in loaded
        rec = records.get(i, {})
        # the first recorded warp with an active lane there stands for the warp (the first
        # warp of the first CTA may be all outside a stencil's bounds)
        live = [w for w in sorted(rec) if w < SAMPLED_WARP and rec[w]
                and any(x is not None for x in rec[w][0])]
        ex0 = rec[live[0]] if live else []
        first = [x for x in ex0[0] if x is not None] if ex0 else []
        if shared:
            offsets = masked_offsets(prog, i) if indirect else None
            if offsets:
                wf, pattern = expected_word_wavefronts(offsets, banks, bank_bytes,
                                                       h.warp_size), "masked"
            elif indirect:
                if random_wf is None:
                    random_wf = expected_wavefronts(banks, h.warp_size)
                wf, pattern = random_wf, "indirect"
            elif first:
                wf, pattern = shared_wavefronts(ex0[0], size, banks, bank_bytes), "lanes"
            else:
                wf, pattern = max(1.0, size / bank_bytes), "default"
            out[i] = Access(bytes=int(wf * banks * bank_bytes), wavefronts=wf,
                            indirect=indirect, pattern=pattern,
                            private=ins.opcode in ("atom", "red") and _warp_private(rec, bank_bytes))
            continue
        if sector is None:
            continue                    # no sector size in the model: the default costs
        if indirect and not first:
            out[i] = Access(bytes=h.warp_size * max(sector, size),
                            l1_bytes=h.warp_size * (line or sector), indirect=True,
                            pattern="indirect")
            if st.kind == ATOM:
                atomics.unknown_scatter(out[i], st.instr, h.warp_size, size, sector)
                out[i].atom_reply = atomics.replies(prog, st)
            continue
        if not first:
            continue
        s0 = sectors(ex0[0], size, sector)
        acc = Access(bytes=len(s0) * sector, pattern="data" if indirect else "lanes",
                     indirect=indirect)
        if line:
            acc.l1_bytes = len(sectors(ex0[0], size, line)) * line
            acc.l1_data_bytes = l1_data_bytes([ex0[0]], size, line, banks, bank_bytes,
                                              mm.get("l1_tag_lines_per_cycle"))
        if st.kind == LDG or is_async_copy(ins):
            if len(ex0) > 1:
                acc.miss = temporal_miss(ex0[0], ex0[1], sector)
            blk = prog.block_of[i]
            # sectors an earlier load of the same block (outside loops: of an earlier block)
            # brought in: a stencil's neighbours, the sectors a merge's step before read
            region = reuse_region(prog, i)
            before = set()
            for j in seen.get(region, ()):
                before |= j
            if s0 and before:
                acc.miss *= len(s0 - before) / len(s0)
            seen.setdefault(region, []).append(s0)
            ws = live
            if len(ws) > 1:
                # the CTA's recorded warps in order: of what a warp asks beyond its own
                # earlier loads of the block, what no earlier load of any warp and no earlier
                # warp's same load brought in (a 2-D stencil's rows above and below are other
                # warps' rows)
                have = cta_seen.setdefault(blk, {"all": set()})
                new = asked = 0
                for w in ws:
                    sw = sectors(rec[w][0], size, sector)
                    own = have.setdefault(w, set())
                    asked += len(sw - own)
                    new += len(sw - have["all"])
                    own |= sw
                    have["all"] |= sw
                # a warp finds what others brought in in L1 (they run side by side)
                acc.miss *= new / asked if asked else 1.0
            else:
                w1 = rec.get(1, [])         # (one warp recorded: nothing to compare)
                if w1 and warps_per_cta > 1:
                    o = sectors(w1[0], size, sector)
                    f = len(o - s0) / len(o) if o else 1.0
                    acc.share = (1 + (warps_per_cta - 1) * f) / warps_per_cta
            allx = {w: rec[w] + (later or {}).get(i, {}).get(w, []) for w in live}
            if live and spreading(allx[live[0]], size, sector):
                spread_cost(acc, allx, size, sector, line)
                if line:
                    acc.l1_data_bytes = l1_data_bytes(
                        [ex for w in allx for ex in allx[w]], size, line, banks, bank_bytes,
                        mm.get("l1_tag_lines_per_cycle"))
                s0 = set(range(acc.bytes // sector))    # (its mean size, for the rule below)
            elif live and indirect and len(allx[live[0]]) > 2 and \
                    data_steered_loop(prog, i, loaded):
                # a search's probes narrow on its answer and come back to sectors earlier
                # probes read: its miss rate over every recorded execution
                acc.miss = min(acc.miss, spread_miss(allx, size, sector))
            if any(m in ins.mods for m in ("cg", "cs", "cv", "lu")):
                acc.miss, acc.share = 1.0, 1.0     # not cached in L1
        if st.kind == STG:
            w = live[0] if live else None
            blk = reuse_region(prog, i)
            if groups is None:
                groups = store_groups(prog, records, sector)
            done = written.setdefault((blk, w), set())
            store_sectors(acc, rec, live, size, sector, groups.get((blk, w)), done,
                          int(mm.get("l2_partial_write_min_bytes", 0)), line or 4 * sector,
                          paced=first_load is not None and first_load < i
                          and thin_stores.paced_by(prog, records, i, sector, mm, lane_bytes))
        if st.kind in (LDG, STG) and len(s0) * 2 >= h.warp_size:
            # scattered lanes (data-dependent or hashed addresses, as gather_hash's
            # 256 MiB table): L2 holds the part of the region they spread over it can keep
            addrs = [x for w in live for x in rec[w][0] if x is not None]
            region = max(addrs) + size - min(addrs)
            keep = l2_keep_bytes(table)
            if region > keep:
                acc.dram_miss = 1.0 - keep / region
        if st.kind == ATOM:
            atomics.contention(acc, rec, line or sector,
                               int(mm.get("atomic_interleave_bytes", 0)), sector)
            acc.partial_sectors = atomics.partial_sectors(ex0[0], size, sector) if ex0 else 0
            acc.atom_float = atomics.is_float(st.instr)
            acc.atom_reply = atomics.replies(prog, st)
        out[i] = acc
    return out



def written_bytes(addrs, size, sector):
    """{sector: bytes the lanes write in it}."""
    out = {}
    for a in addrs:
        if a is None:
            continue
        for b in range(a, a + size):
            out[b // sector] = out.get(b // sector, 0) + 1
    return out


def store_groups(prog, records, sector):
    """{(region, warp): {sector: bytes written}} over all of a region's (reuse_region) global
    stores in one recorded warp's first execution: scalar stores whose lanes are 16 bytes apart
    (Triton's `st.global.b32` ×4 when it cannot prove 16-byte alignment; SASS: four STG.E at
    +0x0..+0xc) together fill the sectors each of them writes only part of."""
    out = {}
    for st in prog.instrs:
        if st.kind != STG:
            continue
        a = memory_operand(st.instr)
        if a is None:
            continue
        size = lane_bytes(st.instr)
        for w, ex in records.get(st.index, {}).items():
            if w >= SAMPLED_WARP or not ex:
                continue
            g = out.setdefault((reuse_region(prog, st.index), w), {})
            for x in ex[0]:
                if x is not None:
                    for b in range(x, x + size):
                        g.setdefault(b // sector, set()).add(b)
    return {k: {s: len(b) for s, b in v.items()} for k, v in out.items()}


def store_sectors(acc, rec, live, size, sector, group=None, done=None, min_bytes=0,
                  line=128, paced=False):
    """A global store's partial sectors (per warp execution) and, over the CTA's recorded
    warps, the fraction of its sectors no earlier warp wrote (the rest merge in L2).

    The warp's stores of one block are one write stream (`group`: bytes per sector over all of
    them; `done`: sectors earlier ones wrote, updated here): a sector that they fill together
    is partial for none of them, and one an earlier store already wrote merges with it before
    it costs DRAM anything more (`merged`; L2 still takes each write). Except a
    *thin* sector, into which the
    instruction writes fewer than `min_bytes` (one lane's 4-byte word): that one costs L2 the
    read-modify-write every time. Measured on the H200 (fitting part, store_lanes): four scalar
    stores filling sectors two lanes at a time take the time of whole-sector stores, sixteen
    filling them one lane at a time ~96 bytes of L2 per sector and store (scatter: 106).
    Branch sim7 measured more of them: a thin sector the warp's later stores complete costs
    L2 per sector and per line of them (`filled_thin`, `filled_thin_lines`; lanes 32, 64 and
    128 bytes apart take 1201, 1479 and 2101 us for the same 2^27 thin writes), one nothing
    completes (scatter) the read-modify-write of l2_partial_write_bytes."""
    if not live:
        return
    w0 = written_bytes(rec[live[0]][0], size, sector)
    acc.data_bytes = len({b for a in rec[live[0]][0] if a is not None for b in range(a, a + size)})
    # L2 takes every sector the instruction writes, merged or not: each store is its own write
    # there (store_lanes k=4, fitting part: four stores, 8 bytes per sector each, take 276 us
    # for 512 MiB, 2^26 sector writes at L2's bandwidth 262 us; counting only a sector's first
    # write said 131 us). Merging spares DRAM only (`merged`).
    acc.l2_sectors = len(w0)
    if group is not None and done is not None:
        thin = {s for s, b in w0.items() if b < min_bytes}
        new = [s for s in w0 if s not in done]
        acc.paced = paced
        if paced:
            # the fitting case fit10a_store_ld: stores that follow a global load
            # reach L2 merged: a sector the warp's earlier store wrote (not thin) is no new L2
            # write. k = 4 scalar stores after one coalesced load wrote 256 MiB in 84.4 us,
            # the time of whole-sector stores (the same stores alone: 143.7 us, each its own
            # write); thin sectors keep their read-modify-write (k = 8: 544 vs 595 us).
            acc.l2_sectors = len([s for s in w0 if s not in done or s in thin])
        acc.merged = 1.0 - len(new) / len(w0) if w0 else 0.0
        fresh = [s for s in new if s not in thin]
        acc.partial_sectors = len(thin) + sum(1 for s in fresh if group.get(s, 0) < sector)
        filled = [s for s in thin if group.get(s, 0) >= sector]
        acc.filled_thin = len(filled)
        acc.filled_thin_lines = len({s * sector // line for s in filled})
        done.update(w0)
    else:
        acc.partial_sectors = sum(1 for b in w0.values() if b < sector)
    have, new, asked = set(), 0, 0
    for w in live:
        s = set(written_bytes(rec[w][0], size, sector))
        asked += len(s)
        new += len(s - have)
        have |= s
    acc.dram_share = new / asked if asked else 1.0


def async_roles(prog):
    """{instruction index: (role, n)} of cp.async instructions: ("copy", 0) moves bytes into
    shared memory, ("commit", 0) closes the warp's open group, ("wait", n) waits until at most
    n groups are pending, ("wait_all", 0) for every copy."""
    out = {}
    for st in prog.instrs:
        ins = st.instr
        if ins.opcode != "cp" or "async" not in ins.mods or "bulk" in ins.mods:
            continue
        if is_async_copy(ins):
            out[st.index] = ("copy", 0)
        elif "commit_group" in ins.mods:
            out[st.index] = ("commit", 0)
        elif "wait_group" in ins.mods:
            n = [o for o in ins.operands if isinstance(o, Imm)]
            out[st.index] = ("wait", int(n[0].value) if n else 0)
        elif "wait_all" in ins.mods:
            out[st.index] = ("wait_all", 0)
    return out


def shared_atomics(prog):
    """Indices of atomics on shared memory (the timing loop prices their bank wavefronts)."""
    return {st.index for st in prog.instrs
            if st.instr.opcode in ("atom", "red") and st.instr.space == "shared"}


def vector_merges(prog, records):
    """{follower index: leader index} of scalar shared loads ptxas merges into one 64- or
    128-bit load (LDS.64/LDS.128): same block, same base register, same type, offsets that
    continue each other with no shared store or barrier between, and every lane's address of
    the run aligned to the run's size in the pilot. The simulator issues the run once."""
    out = {}
    for blk in prog.blocks:
        groups = {}                     # (base register, type) → [(offset, index)]
        for i in range(blk.start, blk.end):
            st = prog.instrs[i]
            ins = st.instr
            bases = {prog.reg_index[b] for b, _t in groups}
            if st.kind in (STS, ATOM) or st.barrier is not None or (
                    st.kind == FIXED and ins.space == "shared") or bases & set(st.defs):
                # a shared write, a barrier or a new base value ends every open run
                _close(groups, prog, records, out)
                groups = {}
                if st.kind != LDS:
                    continue
            if st.kind != LDS or ins.opcode != "ld" or ins.vector_width != 1 or \
                    ins.guard is not None:
                continue
            a = memory_operand(ins)
            if not isinstance(a.base, Reg) or ins.type is None:
                continue
            groups.setdefault((a.base, ins.type.name), []).append((a.offset, i))
        _close(groups, prog, records, out)
    return out


def _close(groups, prog, records, out):
    for (_base, _t), items in groups.items():
        items = sorted(items)
        size = prog.instrs[items[0][1]].instr.type.nbytes
        k = 0
        while k < len(items):
            for width in (4, 2):
                run = items[k:k + width]
                span = width * size
                if len(run) == width and span <= 16 and all(
                        run[j][0] == run[0][0] + j * size for j in range(width)) and \
                        _aligned(records.get(run[0][1], {}), span):
                    lead = min(i for _o, i in run)
                    for _o, i in run:
                        if i != lead:
                            out[i] = lead
                    k += width
                    break
            else:
                k += 1


def _aligned(rec, span):
    ex = rec.get(0, [])
    addrs = [a for a in ex[0] if a is not None] if ex else []
    return bool(addrs) and all(a % span == 0 for a in addrs)
