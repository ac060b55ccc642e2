"""The cycle-level event loop of one SM.

Warps are spread over the sub-partitions (warp i of the SM on scheduler i mod n). Each cycle,
each scheduler issues at most one instruction, from its ready warps, greedy-then-oldest: the warp
it issued last if that one is ready, else the oldest ready warp. A warp is ready when the
scoreboard says every register it reads or writes has arrived (latency from the isa table, or
the memory level's latency after its bandwidth queue), its pipe in that sub-partition has taken
no other instruction within the issue interval (a 32-bit integer add may take either the
integer or the FMA pipe, as ptxas spreads them: StaticInstr.alt), and it is not waiting at a
barrier; instructions ptxas folds away (StaticInstr.free) take no issue slot. bar.sync
releases the warps waiting at a barrier once every live warp of the CTA (or the thread count
the instruction names) has arrived; bar.arrive counts without waiting. A barrier id or count
in a register is the value the warp's path resolved (paths.Trace.barriers), so the warpgroups
of `bar.sync %id, 128` each wait at a barrier of their own.
Given more CTAs than the SM holds (`resident`), each further CTA starts in the warp slots
(sub-partitions) of the next CTA that ends, as the block scheduler refills them.

Time jumps straight to the next cycle in which anything can issue, so idle stretches (a memory
latency) cost nothing. Stall accounting is per warp, by intervals: from one issue to the next a
warp waits on a register (`dependency`, or `memory` when a load produced it), a pipe
(`throughput`), a barrier (`barrier`), or is ready while the scheduler picks another warp
(`not_selected`).
"""
import math
from dataclasses import dataclass, field

from .access import async_roles, shared_atomics
from .async_copy import ROLES as HOPPER_ROLES, AsyncState
from .async_copy import async_roles as hopper_roles
from .engine_loop import issue_loop, plain_issue, reference_loop
from .fork import path_splits, without_pending
from .program import ALU, ATOM, BAR, BRANCH, FIXED, LDG, LDS, STG, STS

STALLS = ("dependency", "memory", "throughput", "barrier", "not_selected")
_INF = float("inf")
_NEVER = 1 << 62


class _Warp:
    __slots__ = ("wid", "cta", "sched", "trace", "ti", "pc", "end", "mask", "regs", "memreg",
                 "ready", "cursor", "done", "finish", "events", "copies", "groups", "piped",
                 "named", "tracing", "split")

    def __init__(self, wid, cta, sched, trace, nregs):
        self.wid, self.cta, self.sched, self.trace = wid, cta, sched, trace
        self.ti, self.pc, self.end, self.mask = -1, 0, 0, 0
        self.regs = [0.0] * nregs
        self.memreg = [False] * nregs
        self.ready, self.cursor = 0.0, 0.0
        self.done, self.finish = False, 0.0
        self.events = None
        self.tracing = False        # events is a list not yet full (max_events)
        self.copies, self.groups = 0.0, []     # cp.async: the open group's and committed ends
        self.piped = {}             # register → arrival of the async tensor op that wrote it
        # bar index → (id, thread count) its path resolved from registers (None: as written)
        self.named = getattr(trace, "barriers", None) or {}
        self.split = _NEVER          # the first block its path in `Sm.alt` differs at


class _Cta:
    __slots__ = ("live", "bars", "start")

    def __init__(self, n):
        self.live = n
        self.bars = {}              # barrier id → [warps that arrived, warps waiting, count]
        self.start = 0.0            # when its warps took their slots


@dataclass
class SmResult:
    cycles: float
    issued: int
    unit_busy: list                 # pipe-cycles per unit, summed over sub-partitions
    stalls: dict                    # reason → warp-cycles
    warp_cycles: float              # sum of warp lifetimes
    events: list                    # per traced warp: [(kind, start, end, text)]
    loads: dict = field(default_factory=dict)
    bytes: dict = field(default_factory=dict)
    finish: float = 0.0             # the last warp's exit (cycles: also the memory drain)
    busy: dict = field(default_factory=dict)     # server → cycles it was serving
    cta_finish: list = field(default_factory=list)   # per CTA: its last warp's exit
    cta_start: list = field(default_factory=list)    # per CTA: when it took its slots


def _async_copy(memory, w, st, role, t, nxt):
    """cp.async: a copy fetches its bytes like a load (into the warp's open group); commit
    closes the group; a wait holds the warp until all but the newest n groups have landed.
    Returns the cycle the warp's next instruction can issue."""
    kind, n = role
    if kind == "copy":
        done = memory.load_global(t, st, through_l1="ca" in st.instr.mods)
        w.copies = max(w.copies, done)
    elif kind == "commit":
        w.groups.append(w.copies)
        w.copies = 0.0
    else:
        if kind == "wait_all":
            w.groups.append(w.copies)
            w.copies, n = 0.0, 0
        cut = len(w.groups) - n
        if cut > 0:
            nxt = max(nxt, max(w.groups[:cut]))
            del w.groups[:cut]
    return nxt


def run_sm(prog, cta_traces, table, memory, trace_warps=0, max_events=4000, resident=None):
    """Simulate one SM running the CTAs whose warps follow `cta_traces` (a list per CTA of a
    list per warp of path traces) from cycle 0 until the last warp exits. `resident`: how many
    CTAs the SM holds at once (default: all of them); each further CTA starts in the warp slots
    of the next CTA that ends, isa memory_model.cta_relaunch_cycles after it ended."""
    return Sm(prog, cta_traces, table, memory, trace_warps, max_events, resident).run()


class Sm:
    """One SM's warps, schedulers and pipes. The parts of the event loop are methods so each
    can be driven and checked alone: `pick` (which warp a scheduler issues), `issue` (what an
    instruction does to the scoreboard and the memory system), `schedule` (when a warp can
    issue next, and the stall that costs), `arrive`/`release` (barriers), `finish`."""

    inline = True       # the event loop with its common case written out (engine_loop.py)

    def __init__(self, prog, cta_traces, table, memory, trace_warps=0, max_events=4000,
                 resident=None):
        h = table.header
        self.prog, self.memory, self.max_events = prog, memory, max_events
        self.nsched = h.schedulers_per_sm
        self.instrs, self.blocks = prog.instrs, prog.blocks
        # per instruction, what the issue loop reads on every scan (plain lists, not
        # attributes): its pipe and the other pipe that takes it (the same when none; -1 for
        # an async tensor op, which only joins its pipe's queue), and the registers the
        # scoreboard waits on (what it reads, then what it writes unless the pipe orders it)
        self.pipe_a = [-1 if st.queued else st.unit for st in self.instrs]
        self.pipe_b = [-1 if st.queued else st.unit if st.alt is None else st.alt[0]
                       for st in self.instrs]
        self.waits_on = [st.uses if st.queued else st.uses + st.defs for st in self.instrs]
        # after the instruction, `advance` has work: a barrier, or a folded one next
        self.stops = [st.kind == BAR or (i + 1 < len(self.instrs) and self.instrs[i + 1].free)
                      for i, st in enumerate(self.instrs)]
        # what issue_loop reads to issue an instruction itself (engine_loop.plain_issue)
        self.roles = async_roles(prog)
        hop = hopper_roles(prog)
        self.roles.update(hop)
        self.shared_atoms = shared_atomics(prog)
        self.plain = plain_issue(self)
        self.nb = len(prog.blocks)
        nunits = len(prog.units)
        self.bar_latency = table.ops["BAR"].latency
        self.warp_size = h.warp_size
        self.branch_latency = table.ops["BRANCH"].latency
        self.lds_latency = table.ops["LDS"].latency
        self.atom_latency = table.ops["ATOM"].latency
        self.warps, self.ctas, self.cta_first = [], [], []
        n = len(cta_traces) if resident is None else min(resident, len(cta_traces))
        self.pending = list(range(len(cta_traces)))[n:]      # CTAs waiting for a free slot
        self.slots = {}                                      # CTA → its warps' slots
        self.cta_traces = cta_traces
        self.relaunch = float((table.memory_model or {}).get("cta_relaunch_cycles") or 0.0)
        for c, traces in enumerate(cta_traces):
            self.ctas.append(_Cta(len(traces)))
            self.cta_first.append(len(self.warps))
            for tr in traces:
                wid = len(self.warps)
                if c < n:
                    self.slots.setdefault(c, []).append(wid)
                w = _Warp(wid, c, wid % self.nsched, tr, prog.nregs)
                if wid < trace_warps:
                    w.events = []
                    w.tracing = max_events > 0
                self.warps.append(w)
        # each scheduler's live warps, oldest first (a warp's age is its position on the SM)
        self.queues = [[w for w in self.warps if w.sched == s and w.cta < n]
                       for s in range(self.nsched)]
        self.last = [None] * self.nsched
        self.held = [0.0] * self.nsched      # a scheduler issuing ptxas's extra SASS
        # per scheduler, when each pipe frees; the last entry, read as pipe -1 (an async
        # tensor op, which only joins its pipe's queue), is never busy
        self.unit_free = [[0.0] * nunits + [-_INF] for _ in range(self.nsched)]
        self.unit_busy = [0.0] * nunits
        self.stalls = dict.fromkeys(STALLS, 0.0)
        self.issued = 0
        self.live = 0
        self.fork = False           # run(fork=True): copy the run at its first relaunch
        self.looping = False        # in the event loop (not placing the first warps)
        self.forked = None          # ... that copy's result: the run without pending CTAs
        self.relaunched = False     # a pending CTA has started
        self.alt = self.alt_result = None     # set_alternative: other paths, their run
        # TMA transactions, mbarrier waits and wgmma groups (sim/async_copy.py)
        self.hopper = AsyncState(self, hop, table, getattr(memory.cfg, "tma_dram_fraction",
                                                           0.0)) if hop else None

    def set_alternative(self, cta_traces):
        """Also simulate the resident CTAs along other paths (`cta_traces`: the shorter loop
        sample, the same paths up to where its iterations stop) into `alt_result`. The runs
        are one simulation until the first warp leaves the blocks the paths share: the engine
        copies its state there (sim/fork.py) and finishes the copy along the other paths, so
        the shared stretch runs once. alt_result stays None where nothing is shared."""
        warps = [tr for traces in cta_traces for tr in traces]
        splits = path_splits(self, warps)
        if splits is not None:
            for w, n in zip(self.warps, splits):
                w.split = _NEVER if n is None else n
            self.alt = warps

    # -- warps ----------------------------------------------------------------------------------
    def load_block(self, w):
        """Move w to the next block of its path; False at its end."""
        w.ti += 1
        if w.ti >= len(w.trace):
            return False
        e = w.trace[w.ti]
        w.mask = e // self.nb
        blk = self.blocks[e % self.nb]
        w.pc, w.end = blk.start, blk.end
        return True

    def skip_free(self, w):
        """Move w past instructions ptxas folds into a neighbour (StaticInstr.free): they take
        no issue slot, their results are ready when their operands are. False at the path's
        end."""
        instrs, regs, memreg = self.instrs, w.regs, w.memreg
        while True:
            if w.pc >= w.end:
                if not self.load_block(w):
                    return False
                continue
            st = instrs[w.pc]
            if not st.free:
                return True
            ready = max((regs[u] for u in st.uses), default=0.0)
            mem = any(memreg[u] for u in st.uses)
            for d in st.defs:
                regs[d], memreg[d] = ready, mem
            w.pc += 1

    def note(self, w, kind, start, end, text):
        if len(w.events) < self.max_events and end > start:
            w.events.append((kind, start, end, text))
            # full: no more calls (the hot loop checks `tracing`, not the list)
            w.tracing = len(w.events) < self.max_events

    def stall(self, w, why, until):
        """Account w's wait from its cursor until `until` to `why`."""
        if until > w.cursor:
            self.stalls[why] += until - w.cursor
            if w.tracing:
                self.note(w, why, w.cursor, until, why)
            w.cursor = until

    def schedule(self, w, t):
        """Work out when w's next instruction can issue (t: the earliest)."""
        pc = w.pc
        reason = -1
        regs = w.regs
        for r in self.waits_on[pc]:
            if regs[r] > t:
                t, reason = regs[r], r
        why = None
        a = self.pipe_a[pc]
        if a >= 0:                      # when its pipe (or the other one) frees
            uf = self.unit_free[w.sched]
            u, ub = uf[a], uf[self.pipe_b[pc]]
            if ub < u:
                u = ub
            if u > t:
                t, why = u, "throughput"
        if t == _INF:                   # held until an mbarrier phase (async_copy.py)
            w.ready = t
            return
        if t > w.cursor:
            if why is None:
                why = "memory" if reason >= 0 and w.memreg[reason] else "dependency"
            if w.tracing:
                self.stall(w, why, t)
            else:                       # stall, written out
                self.stalls[why] += t - w.cursor
                w.cursor = t
        w.ready = t

    def finish(self, w, now):
        w.done, w.finish = True, now + 1
        w.ready = _INF
        self.queues[w.sched].remove(w)
        cta = self.ctas[w.cta]
        cta.live -= 1
        if self.hopper is not None:
            self.hopper.finished(self, w, now)
        for bid, (n, _waiting, count) in list(cta.bars.items()):
            if n and n >= (count or cta.live):
                self.release(cta, bid, now)
        if not cta.live and self.pending:
            if self.fork and self.looping and self.forked is None:
                self.forked = self.run_forked(w, now)
            self.relaunched = True
            self.start_cta(self.pending.pop(0), self.slots.pop(w.cta), now + 1 + self.relaunch)

    def start_cta(self, c, slots, now):
        """CTA c takes the warp slots (and so the sub-partitions) of a CTA that has just ended;
        its warps are the youngest on the SM."""
        first = self.cta_first[c]
        self.slots[c] = slots
        self.ctas[c].start = now
        for k, w in enumerate(self.warps[first:first + len(self.cta_traces[c])]):
            w.sched = slots[k % len(slots)] % self.nsched
            self.queues[w.sched].append(w)
            w.cursor = now
            if self.load_block(w) and self.skip_free(w):
                self.schedule(w, now)
            else:
                self.finish(w, now - 1)
                self.live -= 1

    # -- barriers -------------------------------------------------------------------------------
    def arrive(self, w, st, now):
        bid, threads, waits = st.barrier
        named = w.named.get(st.index)
        if named is not None:
            bid = bid if named[0] is None else named[0]
            threads = threads if named[1] is None else named[1]
        cta = self.ctas[w.cta]
        n, waiting, count = cta.bars.get(bid) or (0, [], -(-threads // self.warp_size))
        if waits:
            w.ready = _INF
            waiting.append(w)
        cta.bars[bid] = (n + 1, waiting, count)
        if n + 1 >= (count or cta.live):
            self.release(cta, bid, now)

    def release(self, cta, bid, now):
        t = now + self.bar_latency
        for v in cta.bars.pop(bid)[1]:
            self.stall(v, "barrier", t)
            self.schedule(v, t)

    # -- one cycle of one scheduler -------------------------------------------------------------
    def pick(self, s, now, end):
        """The warp scheduler s issues in the cycle [now, end): the warp it issued last if that
        one can go, else the oldest that can. Readiness is continuous time (latencies and issue
        intervals are measured averages such as 4.1 or 1.02), so whatever becomes ready within
        the cycle issues in it, at that moment. A warp whose pipe was taken since it became
        ready is moved on to when the pipe frees."""
        pipe_a, pipe_b = self.pipe_a, self.pipe_b
        uf = self.unit_free[s]
        w = self.last[s]
        if w is not None and w.ready < end:
            a = pipe_a[w.pc]            # when its pipe (or the other one) frees
            if a < 0:
                return w
            u, ub = uf[a], uf[pipe_b[w.pc]]
            if (ub if ub < u else u) < end:
                return w
        # (engine_loop.issue_loop writes this scan out)
        for c in self.queues[s]:
            if c.ready < end:
                pc = c.pc
                a = pipe_a[pc]
                if a < 0:
                    return c
                u, ub = uf[a], uf[pipe_b[pc]]
                if ub < u:
                    u = ub
                if u < end:
                    return c
                # its pipe was taken: waiting since the cycle began, then for the pipe
                self.stall(c, "not_selected", max(now, c.cursor))
                self.stall(c, "throughput", u)
                c.ready = u
        return None

    def step(self, w, s, now):
        """Issue w's next instruction on scheduler s (in the cycle starting at now), move w on
        to its next instruction and work out when that can issue (issue and advance in one;
        engine_loop.issue_loop writes the common case out). Returns the issue time."""
        self.last[s] = w
        pc = w.pc
        st = self.instrs[pc]
        uf = self.unit_free[s]
        a = self.pipe_a[pc]
        pf = 0.0 if a < 0 else min(uf[a], uf[self.pipe_b[pc]])
        t = max(w.ready, now, pf)
        if w.tracing:
            if t > w.cursor:
                self.stall(w, "not_selected", t)
            self.note(w, "issue", t, t + 1, st.text)
        elif t > w.cursor:
            self.stalls["not_selected"] += t - w.cursor
        w.cursor = nxt = t + 1
        self.issued += 1
        unit, interval = st.unit, st.interval
        alt = st.alt
        if alt is not None and uf[alt[0]] < uf[unit]:
            unit, interval = alt            # the other pipe that takes it frees first
        self.unit_busy[unit] += interval
        kind = st.kind
        if st.extra:
            # ptxas's SASS beyond this PTX instruction: the scheduler issues it first (no other
            # warp issues meanwhile) and its pipes do its work
            n = 0.0
            for k, xu, xi in st.extra:
                n += k
                uf[xu] = max(uf[xu], t) + k * xi
                self.unit_busy[xu] += k * xi
            w.cursor = nxt = self.held[s] = t + 1 + n
        if a < 0:
            self.queue(w, st, uf, t)
        else:
            uf[unit] = t + interval
        regs = w.regs
        if kind == ALU:
            done = t + st.latency
            memreg = w.memreg
            for d in st.defs:
                regs[d] = done
                memreg[d] = False
        elif kind == BRANCH:
            nxt = t + self.branch_latency
        elif a >= 0 and (st.guard_bit < 0 or not (w.mask >> st.guard_bit) & 1):
            nxt = self.memory_op(w, st, t, nxt)   # memory and fixed-latency instructions
        w.pc = pc + 1
        if pc + 1 >= w.end or self.stops[pc]:
            self.advance(w, s, st, t, nxt)
            return t
        self.schedule(w, nxt)
        return t

    def queue(self, w, st, uf, t):
        """An async tensor op issued at t: it starts when its pipe has finished the work
        queued before it, occupies the pipe for its interval, and its results arrive its
        latency after the start. Its accumulator, when the previous tensor op wrote it, is
        chained inside the pipe; when an ordinary instruction wrote it (O rescaled between two
        P·V), the op starts once that value is there."""
        start = max(t, uf[st.unit])
        for d in st.defs:
            if w.piped.get(d) != w.regs[d]:
                start = max(start, w.regs[d])
        uf[st.unit] = start + st.interval
        done = start + st.latency
        for d in st.defs:
            w.regs[d] = w.piped[d] = done
            w.memreg[d] = False
        if self.hopper is not None:
            self.hopper.wgmma_done(w, done)

    def memory_op(self, w, st, t, nxt):
        """A memory or fixed-latency instruction whose guard holds, issued at t."""
        kind, memory = st.kind, self.memory
        if kind == STG:
            memory.store_global(t, st)
            return nxt
        if kind == STS:
            memory.shared(t, st, 0.0)
            return nxt
        if kind == FIXED and st.index in self.roles:
            role = self.roles[st.index]
            if role[0] in HOPPER_ROLES:
                return self.hopper.issue(self, w, st, role, t, nxt)
            return _async_copy(memory, w, st, role, t, nxt)
        if kind == LDG:
            done = memory.load_global(t, st)
        elif kind == LDS:
            done = memory.shared(t, st, self.lds_latency)
        elif kind == ATOM:
            done = memory.atomic(t, st, self.atom_latency)
        elif kind == FIXED and st.index in self.shared_atoms:
            done = memory.shared(t, st, st.latency, atomic=True)
        elif kind == FIXED:
            done = t + st.latency
        else:
            return nxt
        for d in st.defs:
            w.regs[d] = done
            w.memreg[d] = True
        return nxt

    def advance(self, w, s, st, t, nxt):
        """After w issued st at t (its pc already past st): the next block, exit or barrier,
        and when its next instruction can issue."""
        if w.ti + 1 >= w.split and self.alt is not None and not self.relaunched:
            self.alt_result = self.run_alternative(w, s, st, t, nxt)
        # an exit ends its block: the path says whether lanes go on (the next instruction
        # in the same block and not folded away: nothing to skip)
        if (w.pc >= w.end or self.instrs[w.pc].free) and not self.skip_free(w):
            self.finish(w, t)
            self.live -= 1
            self.last[s] = None
            return
        if st.kind == BAR:
            self.arrive(w, st, t)
            if st.barrier[2]:
                return                  # the barrier schedules it when it releases
        self.schedule(w, nxt)

    # -- the loop -------------------------------------------------------------------------------
    def run_alternative(self, w, s, st, t, nxt):
        """The run along the paths of `set_alternative`, from the moment w (which issued st at
        t) is about to load the first block where its two paths differ: a copy of the run so
        far (without pending CTAs, none of which has started) whose warps take the other
        paths, finishing this advance and going on with the next scheduler of this cycle."""
        alt, self.alt = self.alt, None
        new = without_pending(self)
        new.fork = False
        for v, tr in zip(new.warps, alt):
            v.trace, v.split = tr, _NEVER
            v.events, v.tracing = None, False       # the separate run traces no warps
        new.advance(new.warps[w.wid], s, st, t, nxt)
        return new.loop(float(math.floor(t)), s + 1, True)

    def run_forked(self, w, t):
        """The run without the pending CTAs, from the moment w's CTA (the first to end) ends
        in advance() (w issued its exit at t, in the cycle floor(t): cycles are whole
        numbers): the copy does what advance does after finish, then goes on with the next
        scheduler of this cycle."""
        new = without_pending(self)
        new.fork = False
        new.live -= 1
        new.last[w.sched] = None
        result = new.loop(float(math.floor(t)), w.sched + 1, True)
        if new.alt_result is not None:      # the copy reached the paths' split first
            self.alt, self.alt_result = None, new.alt_result
        return result

    def run(self, fork=False):
        """The run's SmResult. fork: with pending CTAs, also the result of the run without
        them (`forked`, None when the first CTA ended before the event loop started)."""
        self.fork = fork
        self.live = len(self.warps)
        for w in self.warps:
            if w.cta in self.pending:
                continue
            if self.load_block(w) and self.skip_free(w):
                self.schedule(w, 0.0)
            else:
                self.finish(w, -1.0)
                self.live -= 1
        return self.loop(0.0, 0, False)

    def loop(self, now, s0, busy):
        """The event loop from scheduler s0's turn in the cycle at `now` (busy: a scheduler
        before it issued in this cycle); sim/engine_loop.py."""
        return (issue_loop if self.inline else reference_loop)(self, now, s0, busy)

    def result(self):
        # the launch is over when the last warp has exited and the memory system has
        # delivered what it queued (stores in flight still draw bandwidth after their warp)
        warps, memory = self.warps, self.memory
        finish_at = max((w.finish for w in warps), default=0.0)
        return SmResult(cycles=max(finish_at, memory.drained()), issued=self.issued,
                        unit_busy=self.unit_busy, stalls=self.stalls,
                        warp_cycles=sum(w.finish for w in warps),
                        events=[w.events for w in warps if w.events is not None],
                        loads=dict(memory.loads),
                        bytes={k: sv.bytes for k, sv in memory.servers.items()},
                        finish=finish_at,
                        busy={k: sv.busy for k, sv in memory.servers.items()},
                        cta_finish=[max((w.finish for w in warps if w.cta == c), default=0.0)
                                    for c in range(len(self.ctas))],
                        cta_start=[cta.start for cta in self.ctas])
