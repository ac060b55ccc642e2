"""What a global atomic costs L2 beyond its sectors: the read-modify-write of a partial sector.

An atomic is performed in L2: the slice reads the sector, applies the operation and writes it
back. When the warp's lanes cover a whole sector (a coalesced `red` over consecutive words) that
is the sector's ordinary write; when they cover only part of it (a scatter-add or a histogram:
one lane, four bytes, per sector) it is the same read-modify-write a partial-sector store pays
(`memory_model.l2_partial_write_bytes`, measured on the fitting part's scatter). This module
counts those sectors from the access pilot's recorded addresses; `memory.SmMemory.atomic`
charges them. It also estimates, from the same records, how the grid's atomics contend: the
busiest address and its share of the grid, and how many L2 interleave chunks they spread over.
"""
import math


def is_float(ins):
    """Whether a global atomic operates on floating-point words (atom/red .f16/.f32/.f64...):
    one address takes a float operation's time per lane (fitting case fitd_atom: red.add.f32
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


def unknown_scatter(acc, ins, lanes, size, sector):
    """Fill acc for a global atomic whose addresses come from data the pilot does not know
    (a particle's cell from its loaded position): taken as scattered, as its
    bytes already are, each lane on its own sector, so a lane narrower than a sector is the
    read-modify-write of a partial one (the fitting part's fitd_atom on 1000003 hashed buckets
    costs what its partial sectors do); no address shared, so no queue behind one."""
    acc.partial_sectors = lanes if size < sector else 0
    acc.atom_float = is_float(ins)


def replies(prog, st):
    """Whether the atomic's SASS returns the old value to the SM. ptxas 13.0 (sm_90) makes
    `red` a REDG, and `atom.global` whose old value no instruction reads a REDG too; a generic
    `atom` stays an ATOM (with RZ as destination when unread: the address may be shared
    memory's, Numba's form), as does one whose old value is read (fit15b_atom's SASS), and
    exch / cas, which have no reduction form (PTX ISA: red takes and, or, xor, add, inc, dec,
    min, max; an unread atom.global.exch stays ATOMG with RZ, ptxas 13.0)."""
    ins = st.instr
    if ins.opcode == "red":
        return False
    if ins.space == "global" and st.defs and not {"exch", "cas"} & set(ins.mods):
        return any(d in o.uses for o in prog.instrs for d in st.defs)
    return True


def l2_bytes(acc, sector, partial_write, red_partial=0.0):
    """L2 bytes of one warp execution of a global atomic with Access `acc`: its sectors, a
    partial one at the read-modify-write's figure instead of a sector's (a reduction's figure
    when its SASS returns nothing: the fitting case fit15b_atom, 0.75 of the returning form's
    time on the same scattered words)."""
    if acc is None or not partial_write:
        return acc.bytes if acc is not None else 0
    per = red_partial if red_partial and not acc.atom_reply else partial_write
    return acc.bytes + acc.partial_sectors * (per - sector)


def chao1(incidence):
    """Estimated number of distinct items from how many samples saw each item (Chao's
    bias-corrected richness estimator: the unseen are guessed from the seen-once and -twice)."""
    k = len(incidence)
    f1 = sum(1 for c in incidence.values() if c == 1)
    f2 = sum(1 for c in incidence.values() if c == 2)
    return k + (f1 * f1 / (2 * f2) if f2 else f1 * (f1 - 1) / 2)


def hot_share(touched, lines, n, per_req, lines_per_req):
    """Fraction of the grid's warp executions that use the busiest address. `touched`: address
    → sampled executions (of n) that used it; `lines`: the same per line; per_req and
    lines_per_req: distinct addresses and lines per execution. When the lines look uniformly
    used (the busiest line's count is what the largest of that many binomial counts reaches
    by chance, at the 0.1 % level; chao1 estimates how many lines there are), the uniform share
    per_req / addresses, else the observed share of the busiest address."""
    est_lines = max(chao1(lines), 1.0)
    p = min(1.0, lines_per_req / est_lines)
    top = max(lines.values())
    tail = sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(top, n + 1))
    if tail * est_lines >= 1e-3:
        return min(1.0, per_req / max(chao1(touched), 1.0))
    return max(touched.values()) / n


def contention(acc, rec, line, interleave, op_bytes=0):
    """Fill acc's atomic figures from every recorded warp execution (`rec`: warp → executions →
    lane addresses; warps sampled across the grid): the most used address and how much of the
    grid uses it, the atomic-unit operations per execution (one per `op_bytes` block the lanes
    touch, default a line; the simulator passes the sector: the fitting atomics (fitd_atom)
    take a sector each, so a coalesced warp on one line is four operations and a scatter over
    a 4 KiB table about one per lane), and how many interleave chunks (L2 slices serve the
    address space in chunks) the grid's addresses spread over."""
    reqs = [[x for x in ex[0] if x is not None] for ex in rec.values() if ex]
    reqs = [r for r in reqs if r]
    if not reqs:
        return
    touched, lanes_on, ops, chunks = {}, {}, 0, {}
    for r in reqs:
        count = {}
        for x in r:
            count[x] = count.get(x, 0) + 1
        per_op = {}
        for x, c in count.items():
            touched[x] = touched.get(x, 0) + 1
            lanes_on[x] = lanes_on.get(x, 0) + c
            k = x // (op_bytes or line)
            per_op[k] = max(per_op.get(k, 0), c)
        ops += sum(per_op.values())
        for k in {x // max(interleave, line) for x in count}:
            chunks[k] = chunks.get(k, 0) + 1
    top = max(touched, key=lambda x: (touched[x], lanes_on[x]))
    acc.serial_lanes = lanes_on[top] / touched[top]
    lines = {}
    for r in reqs:
        for k in {x // line for x in r}:
            lines[k] = lines.get(k, 0) + 1
    acc.addr_share = hot_share(touched, lines, len(reqs),
                               sum(len(set(r)) for r in reqs) / len(reqs),
                               sum(len({x // line for x in r}) for r in reqs) / len(reqs))
    acc.atom_ops = ops / len(reqs)
    acc.atom_chunks = chao1(chunks) if interleave else 0.0
    acc.pattern = ("one address" if len(touched) == 1 else
                   f"{len(touched)} addresses in {len(chunks)} chunks ({len(reqs)} warps sampled)")
