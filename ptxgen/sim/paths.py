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
  not taken, so a guarded body runs (the interior-CTA assumption of bounds checks). A float
  the walk does not know is of ordinary magnitude, though: compared with a constant beyond it
  (an infinity test, libdevice sinf's switch to Payne-Hanek reduction) it is decided as ordinary
  data decides it (values._ordinary).

With `trip` given, every loop's exit test and back-edge follow it, known values or not.

The trace of a warp is a list of ints: block id + n_blocks * mask, where mask has a bit set for
each guarded memory instruction of the block whose guard is false in every active lane. A named
barrier whose id or thread count is a register (`bar.sync %r, 128`: one barrier per warpgroup)
is resolved per warp: the registers it reads join the slice, and the trace (a `Trace`) carries
the values the warp's first execution named (`Trace.barriers`), for the engine to synchronize
only the warps that name the same barrier.

Loops can be sampled: the hottest loop keeps its first `cap` iterations in the trace and the rest
are counted in `skipped`, for the simulator to extrapolate from the steady state it measures.
Counting does not mean running: once three consecutive iterations show every value moving by a
constant step (loop counters, addresses) the walker jumps ahead, finding where the loop ends by
running single probe iterations from extrapolated states (exponential, then binary search).
"""
from dataclasses import dataclass, field

from ..errors import Arg, PtxgenError, Spelled
from ..ir.values import Imm, PredPair, Reg
from .program import ATOM, BRANCH, EXIT, backward_closure
from .values import value_getter, evaluator
from .fastforward import advance_state, affine_step, skippable
from ..ir import types as T
from ..ir.types import u64 as U64


class Trace(list):
    """A warp's blocks (see above) and `barriers`: bar instruction index → (id, thread count)
    the warp named in registers (None where that operand is an immediate)."""
    barriers = {}


@dataclass
class WarpPath:
    trace: list                     # with the first cap (of caps) sampled iterations
    skipped: int = 0                # iterations of the sampled loop left out of `trace`
    steps: int = 0                  # slice instructions evaluated
    loop_iters: dict = field(default_factory=dict)   # loop id → most iterations in one entry
    samples: list = field(default_factory=list)      # [(trace, skipped)] for every cap
    left_out: list = field(default_factory=list)     # per cap: instructions of the iterations
                                                     # left out (their work, when they differ)


LATER_EXECUTIONS = 30            # executions per warp recorded after the first two


class PathPlan:
    """Per-block work of the path interpreter, built once per program and environment."""

    def __init__(self, prog, env, slice_=None, record=()):
        """slice_: the instructions to evaluate (default: the control slice); record: indices
        of memory instructions whose per-lane addresses `self.records` collects (the first two
        executions per warp, under `self.record_warp`)."""
        self.prog = prog
        nb = len(prog.blocks)
        self.events = []
        self.records, self.record_warp = {}, 0
        # executions after the first two (a loop whose lanes' addresses spread out as it runs:
        # a binary search starts with every lane on one element)
        self.later = {}
        # named barriers with register operands: resolved on the control walk only
        self.named = named_barriers(prog) if slice_ is None else {}
        active_slice = prog.slice if slice_ is None else slice_
        if self.named:
            active_slice = backward_closure(prog, active_slice, {
                prog.reg_index[o] for ops in self.named.values() for o in ops
                if isinstance(o, Reg)})[0]
        # registers only addresses need (not control): the fast-forward may leave them stale,
        # since only the first executions are recorded
        control = {d for i in prog.slice for d in prog.instrs[i].defs}
        self.free_regs = frozenset(d for i in active_slice for d in prog.instrs[i].defs
                                   if d not in control)
        # where a loop leaves depends only on the registers its own branches read (and what
        # they are computed from): the key of `exits`, loop state → iterations left
        self.loop_regs = {lp.id: _loop_control(prog, lp) for lp in prog.loops}
        self.exits = {}
        record = set(record)
        # the old values global atomics return (unknown to the walk, see values.evaluator)
        atomic_old = {d for st in prog.instrs if st.kind == ATOM and st.instr.dests
                      and "cas" not in st.instr.mods for d in st.defs}
        for blk in prog.blocks:
            ev = []
            for i in range(blk.start, blk.end):
                st = prog.instrs[i]
                if i in record:
                    from .access import memory_operand
                    getter = value_getter(memory_operand(st.instr), U64, prog.reg_index, env)
                    ev.append((2, getter, (i, st.guard_id, st.instr.guard_negated)))
                cross = _cross_lane(st.instr) if i in active_slice else None
                if cross is not None:
                    # a warp-wide vote or match: its result comes from every lane (kind 3)
                    ins = st.instr
                    src_t = T.pred if cross == "ballot" else ins.type
                    dests = ins.operands[0]
                    dests = (dests.first, dests.second) if isinstance(dests, PredPair) \
                        else (dests,)
                    ev.append((3, (cross, value_getter(ins.operands[1], src_t, prog.reg_index,
                                                       env)),
                               tuple(prog.reg_index[d] for d in dests)))
                elif i in active_slice:
                    fn = evaluator(st, prog.reg_index, env, atomic_old)
                    if fn is not None:
                        ev.append((0, fn, None))
                if i in self.named:
                    ev.append((4, [None if o is None else
                                   value_getter(o, T.u32, prog.reg_index, env)
                                   for o in self.named[i]], i))
                if st.guard_bit >= 0:
                    ev.append((1, prog.reg_index[st.instr.guard],
                               (st.instr.guard_negated, st.guard_bit)))
            self.events.append(_fuse(ev))
        # a vote or match in the slice: known only to walks that follow every lane
        self.votes = any(e[0] == 3 for ev in self.events for e in ev)
        self.nb = nb
        self.start_block = {blk.start: blk.id for blk in prog.blocks}
        # loops whose header starts each block
        self.headed = {}
        for lp in prog.loops:
            self.headed.setdefault(self.start_block.get(lp.header), []).append(lp.id)
        self.header_block = {lp.id: self.start_block.get(lp.header) for lp in prog.loops}
        self.no_skip = set()        # loops whose fast-forward found no exit: walked instead


class _Walker:
    """One warp's interpreter state and the step from one block to the next."""

    def __init__(self, plan, specs, trip, warnings, budget):
        prog = plan.prog
        self.plan, self.prog, self.specs = plan, prog, specs
        self.trip, self.warnings, self.budget = trip, warnings, budget
        self.lanes = range(len(specs))
        self.vals = [[None] * prog.nregs for _ in self.lanes]
        self.active = [True for _ in self.lanes]
        self.wait_at = [None for _ in self.lanes]
        self.iters = [0] * len(prog.loops)
        self.best = {}
        self.steps = 0
        self.barriers = {}              # bar index → (id, count) named in registers

    def step(self, b):
        """Run block b: (trace entry, next block or None at the end, loop ids whose back-edge
        was taken)."""
        plan, prog, lanes = self.plan, self.prog, self.lanes
        vals, active, wait_at, specs = self.vals, self.active, self.wait_at, self.specs
        blk = prog.blocks[b]
        for lane in lanes:
            if wait_at[lane] == blk.start:
                active[lane], wait_at[lane] = True, None
        mask = 0
        for kind, a, c in plan.events[b]:
            if kind == 0:
                # a run of c evaluators, lane by lane (each touches only its own lane's values)
                for lane in lanes:
                    if active[lane]:
                        v, s = vals[lane], specs[lane]
                        for f in a:
                            f(v, s)
                self.steps += c
            elif kind == 2:
                # (a guard the pilot cannot know counts as true: guarded bodies run)
                i, g, neg = c
                execs = plan.records.setdefault(i, {}).setdefault(plan.record_warp, [])
                more = plan.later.setdefault(i, {}).setdefault(plan.record_warp, [])
                if len(execs) < 2 or len(more) < LATER_EXECUTIONS:
                    ex = [a(vals[lane], specs[lane]) if active[lane] and (
                        g < 0 or vals[lane][g] is None or bool(vals[lane][g]) != neg)
                        else None for lane in lanes]
                    (execs if len(execs) < 2 else more).append(ex)
            elif kind == 3:
                self.cross_lane(a[0], a[1], c)
            elif kind == 4:
                self.named_barrier(a, c)
            else:
                neg, bit = c
                if not any(active[lane] and (vals[lane][a] is None or
                                             bool(vals[lane][a]) != neg) for lane in lanes):
                    mask |= 1 << bit
        if self.budget is not None and self.steps > self.budget:
            raise PtxgenError(Spelled(f"kernel {prog.kernel.name}: following the control flow "
                                      f"took more than {self.budget} steps; give a trip count "
                                      f"(", Arg("trip=N", "--trip N"), ")"))
        last = prog.instrs[blk.end - 1]
        nxt, back = b + 1, None
        if last.kind == EXIT:
            for lane in lanes:             # lanes whose guard holds leave; the rest go on
                if active[lane] and _lane_takes(last, vals[lane]):
                    active[lane] = False
        elif last.kind == BRANCH and last.index in prog.tables:
            # brx.idx: the first active lane's index picks the table entry (the first when
            # the index is unknown or out of range)
            table = prog.tables[last.index]
            lane = next(lane for lane in lanes if active[lane])
            r = last.instr.operands[0]
            i = vals[lane][prog.reg_index[r]] if isinstance(r, Reg) else None
            target = table[i] if isinstance(i, int) and 0 <= i < len(table) else table[0]
            nxt = plan.start_block[target]
            if target <= last.index:
                back = target
        elif last.kind == BRANCH:
            target = prog.targets[last.index]
            if _branch(plan, last, target, vals, active, wait_at, lanes, self.iters, self.trip,
                       self.warnings):
                nxt = plan.start_block[target]
                if target <= last.index:
                    back = target
        if not any(active):
            # every lane has left or waits elsewhere: resume at the earliest waiting point
            pending = [w for w in wait_at if w is not None]
            if not pending:
                return b + plan.nb * mask, None, ()
            nxt = plan.start_block[min(pending)]
        elif nxt >= plan.nb:
            return b + plan.nb * mask, None, ()
        else:
            # the active lanes jump past a point where other lanes wait (an if/else laid out
            # as `@p bra THEN; bra JOIN; THEN: …; JOIN:`): the hardware runs the waiting side
            # up to the join before going on (SASS: BSSY/BSYNC around both sides), so the
            # lowest waiting point runs first and the active lanes wait where they were going
            start = prog.blocks[nxt].start
            pending = [w for w in wait_at if w is not None and w < start]
            if pending and back is None:
                for lane in lanes:
                    if active[lane]:
                        active[lane], wait_at[lane] = False, start
                nxt = plan.start_block[min(pending)]
        # loop bookkeeping: back-edges count iterations, other entries into a header reset it
        taken = []
        for lid in plan.headed.get(nxt, ()):
            lp = prog.loops[lid]
            if back == lp.header and lp.contains(last.index):
                self.iters[lid] += 1
                self.best[lid] = max(self.best.get(lid, 0), self.iters[lid])
                taken.append(lid)
            else:
                self.iters[lid] = 0
                self.best.setdefault(lid, 0)
        return b + plan.nb * mask, nxt, taken

    def named_barrier(self, getters, i):
        """bar with its id or thread count in registers: the values of the first active lane
        (they are warp-uniform in valid PTX), kept from the warp's first execution; a warp that
        names another barrier later is warned about (the first is kept)."""
        lane = next((lane for lane in self.lanes if self.active[lane]), None)
        if lane is None:
            return
        got = tuple(None if g is None else g(self.vals[lane], self.specs[lane])
                    for g in getters)
        if any(v is None for v, g in zip(got, getters) if g is not None):
            return                      # not known: the barrier the program text gives
        first = self.barriers.setdefault(i, got)
        if first != got and self.warnings is not None:
            def name(v):
                return " of ".join(f"{x}" + (" threads" if k else "") for k, x in
                                   enumerate(v) if x is not None) or "?"
            self.warnings.setdefault(
                f"barrier at instruction {i}",
                f"bar at instruction {i} (line {self.prog.instrs[i].instr.line}) names barrier "
                f"{name(first)} in a warp's first execution and {name(got)} later; the "
                f"simulator keeps the first")

    def cross_lane(self, what, get, dests):
        """A warp-wide vote or match, for walks that follow every lane (else unknown).
        vote.ballot: bit k of the mask is lane k's predicate; a predicate the walker cannot
        know counts as true, as guarded bodies run. match.any: each lane gets the mask of the
        active lanes holding its value (a warp-aggregated atomic elects one leader per value:
        only the leaders reach the atomic); match.all: the active lanes' mask when they all
        hold one value, else 0 (and the optional predicate says which). A match over a value
        some lane does not know is unknown. Inactive lanes contribute nothing."""
        lanes, vals, specs, active = self.lanes, self.vals, self.specs, self.active
        every = len(specs) > 1 and all(s.get("laneid") == k for k, s in enumerate(specs))
        out = {}
        if every and what == "ballot":
            mask = 0
            for lane in lanes:
                if active[lane]:
                    v = get(vals[lane], specs[lane])
                    if v is None or v:
                        mask |= 1 << lane
            out = {lane: (mask,) for lane in lanes}
        elif every:
            got = {lane: get(vals[lane], specs[lane]) for lane in lanes if active[lane]}
            if None not in got.values():
                peers = {}
                for lane, v in got.items():
                    peers[v] = peers.get(v, 0) | 1 << lane
                if what == "any":
                    out = {lane: (peers[v],) for lane, v in got.items()}
                else:
                    one = len(peers) == 1
                    mask = next(iter(peers.values())) if one else 0
                    out = {lane: (mask, one) for lane in got}
        for lane in lanes:
            if active[lane]:
                res = out.get(lane, ())
                for k, d in enumerate(dests):
                    vals[lane][d] = res[k] if k < len(res) else None

    # -- fast-forward of a loop whose state advances by the same step every iteration ---------
    def state(self):
        return ([list(v) for v in self.vals], list(self.iters))

    def set_state(self, st):
        self.vals = [list(v) for v in st[0]]
        self.iters = list(st[1])

    def probe(self, lp, st, budget=20000):
        """From state st at lp's header: does the next iteration come back (True), leave the
        loop (False), or neither within the budget (None)? The walker is left unchanged.
        Loops nested in lp are fast-forwarded on the way (only control matters here)."""
        saved = (self.state(), list(self.active), list(self.wait_at), dict(self.best),
                 self.steps)
        self.set_state(st)
        b, result, nested = self.plan.start_block[lp.header], None, {}
        try:
            for _ in range(budget):
                _e, b, taken = self.step(b)
                if b is None or not lp.contains(self.prog.blocks[b].start):
                    result = False
                    break
                if lp.id in taken:
                    result = True
                    break
                for lid in taken:
                    self.skip_nested(lid, nested, self.plan.free_regs)
        finally:
            st0, self.active, self.wait_at, self.best, self.steps = saved
            self.set_state(st0)
        return result


    def skip_nested(self, lid, recent, free):
        """At a back-edge of loop lid (not the sampled one): once three consecutive iterations
        of this entry move by a constant step, jump to the loop's last iteration, as the hot
        loop does. `recent` keeps the states per loop; registers in `free` may go stale.
        Returns the iterations jumped over."""
        if lid in self.plan.no_skip or not all(self.active) or \
                any(w is not None for w in self.wait_at):
            recent.pop(lid, None)
            return 0
        st = self.state()
        rec = (recent.get(lid, []) + [st])[-3:]
        if any(b[1][lid] != a[1][lid] + 1 for a, b in zip(rec, rec[1:])):
            rec = [st]                  # a new entry into the loop: start again
        recent[lid] = rec
        if len(rec) < 3:
            return 0
        step = affine_step(rec, free)
        if step is None:
            return 0
        lp = self.prog.loops[lid]
        regs, plan = self.plan.loop_regs[lid], self.plan
        key = (lid, tuple(tuple(v[r] for r in regs) for v in st[0]),
               tuple(tuple(d[r] for r in regs) for d in step), self.trip)
        if self.trip is not None or None in key[1][0] or any(None in k for k in key[1]):
            key += (tuple(st[1]),)      # a trip-count decision reads the iteration counters
        n = plan.exits.get(key)
        if n is None:
            n = plan.exits[key] = skippable(self, lp, st, step)
        if n:
            self.set_state(advance_state(st, step, n, lid))
            self.best[lid] = max(self.best.get(lid, 0), self.iters[lid])
        recent[lid] = []
        return n


def named_barriers(prog):
    """bar/barrier instructions (the engine's BAR kind) whose id or thread count is a register:
    index → (id operand, count operand or None), an operand None where it is an immediate or
    absent (program.py's `_barrier` reads those)."""
    out = {}
    for st in prog.instrs:
        if st.barrier is None:
            continue
        ops = [o for o in st.instr.operands if isinstance(o, (Imm, Reg))]
        if st.instr.mods and st.instr.mods[0] == "red":
            ops = ops[1:-1]             # bar.red d, a{, b}, {!}c: destination and predicate
        ops = (ops + [None, None])[:2]
        if any(isinstance(o, Reg) for o in ops):
            out[st.index] = tuple(o if isinstance(o, Reg) else None for o in ops)
    return out


def _cross_lane(ins):
    """'ballot', 'any' or 'all' for the warp-wide instructions the walk evaluates across
    lanes (vote.ballot, match.any, match.all), else None."""
    if len(ins.operands) < 2:
        return None
    d = ins.operands[0]
    if ins.opcode == "vote" and "ballot" in ins.mods and isinstance(d, Reg):
        return "ballot"
    if ins.opcode == "match" and isinstance(d, (Reg, PredPair)):
        return next((m for m in ("any", "all") if m in ins.mods), None)
    return None


def _loop_control(prog, lp):
    """Registers whose values decide lp's control flow: the backward closure of the guards of
    its branches and exits (and brx indices) over every definition in the program."""
    needed = set()
    for i in range(lp.header, lp.end + 1):
        st = prog.instrs[i]
        if st.kind in (BRANCH, EXIT):
            if st.guard_id >= 0:
                needed.add(st.guard_id)
            if i in prog.tables and isinstance(st.instr.operands[0], Reg):
                needed.add(prog.reg_index[st.instr.operands[0]])
    return tuple(sorted(backward_closure(prog, (), needed)[1]))


def follow(plan, specs, trip=None, cap=None, hot_loop=None, budget=None, warnings=None,
           nested=False):
    """The WarpPath of one warp whose representative lanes have special registers `specs`.
    `cap` (an int or a tuple of them) is how many iterations of loop `hot_loop` the trace
    keeps; one pass gives the trace of every cap (WarpPath.samples). Iterations beyond every
    cap are only counted: once the loop state moves by a constant step per iteration, the
    remaining count is found by probing single iterations ahead, not by running them all.
    `nested`: other loops are fast-forwarded the same way (every register must then move by a
    constant step), for walks that only record addresses and need no complete trace."""
    prog = plan.prog
    walker = _Walker(plan, specs, trip, warnings, budget)
    caps = (cap,) if isinstance(cap, int) or cap is None else tuple(cap)
    ncaps = range(len(caps))
    traces = [Trace() for _ in caps]
    held = [None for _ in caps]     # per cap: the current sampled-out iteration's blocks
    skipped = [0 for _ in caps]
    left_out = [0 for _ in caps]
    last_iteration = [0 for _ in caps]  # instructions of the last iteration left out
    hot = prog.loops[hot_loop] if hot_loop is not None else None
    recent = []                     # loop states at the last back-edges beyond every cap
    inner = {}                      # the same for other loops (with `nested`)
    b = 0
    while b is not None:
        e, nxt, taken = walker.step(b)
        if nested:
            for lid in taken:
                if hot is None or lid != hot.id:
                    walker.skip_nested(lid, inner, frozenset())
        for k in ncaps:
            (traces[k] if held[k] is None else held[k]).append(e)
        if hot is not None and hot.id in taken:
            for k in ncaps:
                if walker.iters[hot.id] >= caps[k]:
                    if held[k] is not None:
                        skipped[k] += 1     # a whole iteration between back-edges
                        last_iteration[k] = _instructions(prog, held[k])
                        left_out[k] += last_iteration[k]
                    held[k] = []
            if all(h is not None for h in held) and all(walker.active) and \
                    not any(w is not None for w in walker.wait_at):
                recent = (recent + [walker.state()])[-3:]
                step = affine_step(recent, plan.free_regs) if len(recent) == 3 else None
                if step is not None and hot.id not in plan.no_skip:
                    n = skippable(walker, hot, recent[-1], step)
                    if not n:
                        plan.no_skip.add(hot.id)    # walk it: probing again costs more
                    if n:
                        walker.set_state(advance_state(recent[-1], step, n, hot.id))
                        walker.best[hot.id] = max(walker.best.get(hot.id, 0),
                                                  walker.iters[hot.id])
                        skipped = [x + n for x in skipped]
                        left_out = [x + n * i for x, i in zip(left_out, last_iteration)]
                    recent = []
            else:
                recent = []
        elif nxt is not None and hot is not None and not hot.contains(prog.blocks[nxt].start):
            recent = []
            for k in ncaps:
                if held[k] is not None:
                    traces[k].extend(held[k])   # the loop's last, partial iteration stays
                    held[k] = None
        b = nxt
    for k in ncaps:
        if held[k]:
            traces[k].extend(held[k])
        if walker.barriers:
            traces[k].barriers = walker.barriers
    return WarpPath(traces[0], skipped[0], walker.steps, walker.best,
                    list(zip(traces, skipped)), left_out)


def _instructions(prog, entries):
    nb = len(prog.blocks)
    return sum(prog.blocks[e % nb].end - prog.blocks[e % nb].start for e in entries)


def _fuse(events):
    """Consecutive evaluators (kind 0) merged into one event (0, [fn, ...], count): the walk
    then runs each lane through the whole run at once, which is the same result (an evaluator
    reads and writes only its own lane's registers) with one lane loop instead of one per
    instruction."""
    out = []
    for kind, a, c in events:
        if kind == 0 and out and out[-1][0] == 0:
            out[-1][1].append(a)
            out[-1] = (0, out[-1][1], out[-1][2] + 1)
        elif kind == 0:
            out.append((0, [a], 1))
        else:
            out.append((kind, a, c))
    return out


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
                    Spelled(f"loop at instruction {lp.header} (line {lp.line}): trip count "
                            f"unknown (it depends on values the simulator does not have); "
                            f"assumed 1 — pass ", Arg("argument values (args=) or trip=N",
                                                      "--arg NAME=VALUE or --trip N")))
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
