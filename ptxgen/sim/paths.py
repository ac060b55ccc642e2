"""Each warp's path through the kernel: the basic blocks it executes, in order.

A warp is followed through two representative lanes, its first and its last thread, running only
the control slice (the instructions whose values reach a branch or a memory guard) on known
values: parameters, special registers, constants. Branches follow the lanes:

- all active lanes agree: the warp goes that way;
- they disagree on a forward branch: the warp runs the fall-through code and the lanes that
  branched wait at the target; on a backward branch the warp loops and the lanes that left wait
  after the branch (the warp runs a code path while any of its lanes needs it);
- a lane's condition is unknown (it depends on loaded data): a loop's exit test or back-edge
  follows the trip count (the user's `trip`, or 1 with a warning); any other branch is assumed
  not taken, so a guarded body runs (the interior-CTA assumption of bounds checks).

With `trip` given, every loop's exit test and back-edge follow it, known values or not.

The trace of a warp is a list of ints: block id + n_blocks * mask, where mask has a bit set for
each guarded memory instruction of the block whose guard is false in every active lane.

Loops can be sampled: the hottest loop keeps its first `cap` iterations in the trace and the rest
are counted in `skipped`, for the simulator to extrapolate from the steady state it measures.
"""
from dataclasses import dataclass, field

from ..errors import PtxgenError
from .program import BRANCH, EXIT
from .values import evaluator


@dataclass
class WarpPath:
    trace: list
    skipped: int = 0                # iterations of the sampled loop left out of the trace
    steps: int = 0                  # slice instructions evaluated
    loop_iters: dict = field(default_factory=dict)   # loop id → most iterations in one entry


class PathPlan:
    """Per-block work of the path interpreter, built once per program and environment."""

    def __init__(self, prog, env):
        self.prog = prog
        nb = len(prog.blocks)
        self.events = []
        for blk in prog.blocks:
            ev = []
            for i in range(blk.start, blk.end):
                st = prog.instrs[i]
                if i in prog.slice:
                    fn = evaluator(st, prog.reg_index, env)
                    if fn is not None:
                        ev.append((0, fn, None))
                if st.guard_bit >= 0:
                    ev.append((1, prog.reg_index[st.instr.guard],
                               (st.instr.guard_negated, st.guard_bit)))
            self.events.append(ev)
        self.nb = nb
        self.start_block = {blk.start: blk.id for blk in prog.blocks}
        # loops whose header starts each block
        self.headed = {}
        for lp in prog.loops:
            self.headed.setdefault(self.start_block.get(lp.header), []).append(lp.id)
        self.header_block = {lp.id: self.start_block.get(lp.header) for lp in prog.loops}


def follow(plan, specs, trip=None, cap=None, hot_loop=None, budget=None, warnings=None):
    """The WarpPath of one warp whose representative lanes have special registers `specs`."""
    prog = plan.prog
    instrs, blocks, loops = prog.instrs, prog.blocks, prog.loops
    nb = plan.nb
    lanes = range(len(specs))
    vals = [[None] * prog.nregs for _ in lanes]
    active = [True for _ in lanes]
    wait_at = [None for _ in lanes]
    iters = [0] * len(loops)
    best = {}
    trace, held = [], None          # held: the current sampled-out iteration's blocks
    steps = skipped = 0
    hot = loops[hot_loop] if hot_loop is not None else None
    b = 0
    while True:
        blk = blocks[b]
        for lane in lanes:
            if wait_at[lane] == blk.start:
                active[lane], wait_at[lane] = True, None
        mask = 0
        for kind, a, c in plan.events[b]:
            if kind == 0:
                for lane in lanes:
                    if active[lane]:
                        a(vals[lane], specs[lane])
                steps += 1
            else:
                neg, bit = c
                if not any(active[lane] and (vals[lane][a] is None or
                                             bool(vals[lane][a]) != neg) for lane in lanes):
                    mask |= 1 << bit
        if budget is not None and steps > budget:
            raise PtxgenError(f"kernel {prog.kernel.name}: following the control flow took more "
                              f"than {budget} steps; give a trip count (--trip N)")
        (trace if held is None else held).append(b + nb * mask)
        last = instrs[blk.end - 1]
        nxt = b + 1
        back = None
        if last.kind == EXIT:
            for lane in lanes:             # lanes whose guard holds leave; the rest go on
                if active[lane] and _lane_takes(last, vals[lane]):
                    active[lane] = False
        elif last.kind == BRANCH:
            target = prog.targets[last.index]
            if _branch(plan, last, target, vals, active, wait_at, lanes, iters, trip,
                       warnings):
                nxt = plan.start_block[target]
                if target <= last.index:
                    back = target
        if not any(active):
            # every lane has left or waits elsewhere: resume at the earliest waiting point
            pending = [w for w in wait_at if w is not None]
            if not pending:
                break
            w = min(pending)
            nxt = plan.start_block[w]
        elif nxt >= nb:
            break
        # loop bookkeeping: back-edges count iterations, other entries into a header reset it
        for lid in plan.headed.get(nxt, ()):
            lp = loops[lid]
            if back == lp.header and lp.contains(last.index):
                iters[lid] += 1
                best[lid] = max(best.get(lid, 0), iters[lid])
                if hot is not None and lid == hot.id and iters[lid] >= cap:
                    if held is not None:
                        skipped += 1          # a whole iteration between two back-edges
                    held = []
            else:
                iters[lid] = 0
                best.setdefault(lid, 0)
        if held is not None and not hot.contains(blocks[nxt].start):
            trace.extend(held)                # the loop's last, partial iteration stays
            held = None
        b = nxt
    if held:
        trace.extend(held)
    return WarpPath(trace, skipped, steps, best)


def _lane_takes(st, vals):
    if st.guard_id < 0:
        return True
    v = vals[st.guard_id]
    return v is None or bool(v) != st.instr.guard_negated


def _branch(plan, st, target, vals, active, wait_at, lanes, iters, trip, warnings):
    """Whether the warp takes the branch; updates which lanes wait where."""
    prog = plan.prog
    ins = st.instr
    if ins.guard is None:
        return True
    lid = prog.loop_of[st.index]
    lp = prog.loops[lid] if lid >= 0 else None
    backward = target <= st.index
    control = lp is not None and ((backward and target == lp.header) or
                                  not lp.contains(target))
    decisions = []
    for lane in lanes:
        if active[lane]:
            v = vals[lane][st.guard_id]
            decisions.append((lane, None if v is None else bool(v) != ins.guard_negated))
    unknown = any(d is None for _, d in decisions)
    if control and (trip is not None or unknown):
        n = trip
        if n is None:
            n = 1
            if warnings is not None:
                warnings.setdefault(
                    f"loop at instruction {lp.header}",
                    f"loop at instruction {lp.header} (line {lp.line}): trip count unknown "
                    f"(it depends on values the simulator does not have); assumed 1 — pass "
                    f"argument values or --trip N")
        in_head = prog.block_of[st.index] == prog.block_of[lp.header]
        if backward:
            return iters[lid] + 1 < n
        return iters[lid] >= n if in_head else iters[lid] + 1 >= n
    takes = [lane for lane, d in decisions if d]
    stays = [lane for lane, d in decisions if not d]     # unknown: not taken
    if not takes:
        return False
    if not stays:
        return True
    if backward:
        for lane in stays:
            active[lane], wait_at[lane] = False, st.index + 1
        return True
    for lane in takes:
        active[lane], wait_at[lane] = False, target
    return False
