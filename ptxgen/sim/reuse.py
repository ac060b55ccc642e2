"""Where a warp's global loads find in L1 what earlier loads brought in (ptxgen.sim.access
prices each memory instruction from the access pilot's records; these are its reuse rules):
the step between two executions, loads whose lanes part as their loop runs, searches that
narrow on their answer, and which earlier instructions' sectors count (reuse_region)."""
from .program import BRANCH


def sectors(addrs, size, sector):
    out = set()
    for a in addrs:
        if a is not None:
            out.update(range(a // sector, (a + size - 1) // sector + 1))
    return out


def temporal_miss(a0, a1, sector):
    """Fraction of a warp's executions that need new sectors, from two consecutive ones: a lane
    moving d bytes per execution (d under a sector) enters a new sector every sector/d times."""
    steps = sorted(abs(b - a) for a, b in zip(a0, a1) if a is not None and b is not None)
    if not steps:
        return 1.0
    d = steps[len(steps) // 2]
    return min(1.0, d / sector)


def spreading(execs, size, sector):
    """True when a warp's executions of a load touch many more sectors later than at first
    (lanes that start together and part as the loop runs: a binary search's first probe is one
    element for every lane, its last ones a line per lane)."""
    n = [len(sectors(ex, size, sector)) for ex in execs]
    return len(n) > 2 and n[0] > 0 and max(n) >= 2 * n[0]


def spread_cost(acc, by_warp, size, sector, line):
    """Per-execution sectors and lines as the mean over every recorded execution, and the
    L1 miss rate as the share of sectors no earlier recorded execution (of any recorded warp,
    taken round by round: the warps run side by side) brought in."""
    execs = [ex for w in by_warp for ex in by_warp[w]]
    acc.bytes = int(round(sector * sum(len(sectors(ex, size, sector)) for ex in execs)
                          / len(execs)))
    if line:
        acc.l1_bytes = int(round(line * sum(len(sectors(ex, size, line)) for ex in execs)
                                 / len(execs)))
    acc.miss, acc.share = spread_miss(by_warp, size, sector), 1.0


def spread_miss(by_warp, size, sector):
    """The share of sectors no earlier recorded execution (of any recorded warp, taken round
    by round: the warps of a CTA run side by side) brought in. For a search steered by the
    values it loads (data_steered_loop) it is the L1 miss rate: its last probes fall in the
    sector of the one before, and the warps share the tree's top levels."""
    have, asked, new = set(), 0, 0
    for k in range(max(len(v) for v in by_warp.values())):
        for w in by_warp:
            if k < len(by_warp[w]):
                s = sectors(by_warp[w][k], size, sector)
                asked += len(s)
                new += len(s - have)
                have |= s
    return new / asked if asked else 1.0


def data_steered_loop(prog, i, loaded):
    """True when instruction i sits in a loop with a branch on loaded data (a search: which
    half comes next, and when to stop, depend on the values it read)."""
    if prog.loop_of[i] < 0:
        return False
    lp = prog.loops[prog.loop_of[i]]
    return any(prog.instrs[j].kind == BRANCH and prog.instrs[j].guard_id in loaded
               for j in range(lp.header, lp.end + 1))




def reuse_region(prog, i):
    """Where a memory instruction's first execution meets the earlier ones' in L1 and in the
    warp's write stream: its block inside a loop, all code outside loops (-1). Outside loops
    each instruction runs once per warp, so the first executions of all blocks are one pass
    (the unrolled steps of a merge, each in its own if/else blocks, read the sectors the step
    before read and write the sector the next completes); inside a loop two blocks' first
    executions may be iterations apart (a running sum's trailing load re-reads what its
    leading load read nine iterations before, when 64 warps' rows have gone through L1)."""
    return prog.block_of[i] if prog.loop_of[i] >= 0 else -1
