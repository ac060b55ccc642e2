"""The cycle-level event loop of one SM.

Warps are spread over the sub-partitions (warp i of the SM on scheduler i mod n). Each cycle,
each scheduler issues at most one instruction, from its ready warps, greedy-then-oldest: the warp
it issued last if that one is ready, else the oldest ready warp. A warp is ready when the
scoreboard says every register it reads or writes has arrived (latency from the isa table, or
the memory level's latency after its bandwidth queue), its pipe in that sub-partition has taken
no other instruction within the issue interval, and it is not waiting at a barrier. bar.sync
releases the warps waiting at a barrier once every live warp of the CTA (or the thread count
the instruction names) has arrived; bar.arrive counts without waiting.

Time jumps straight to the next cycle in which anything can issue, so idle stretches (a memory
latency) cost nothing. Stall accounting is per warp, by intervals: from one issue to the next a
warp waits on a register (`dependency`, or `memory` when a load produced it), a pipe
(`throughput`), a barrier (`barrier`), or is ready while the scheduler picks another warp
(`not_selected`).
"""
import math
from dataclasses import dataclass, field

from ..errors import PtxgenError
from .access import async_roles, shared_atomics
from .program import ALU, ATOM, BAR, BRANCH, FIXED, LDG, LDS, STG, STS

STALLS = ("dependency", "memory", "throughput", "barrier", "not_selected")
_INF = float("inf")


class _Warp:
    __slots__ = ("wid", "cta", "sched", "trace", "ti", "pc", "end", "mask", "regs", "memreg",
                 "ready", "cursor", "done", "finish", "events", "copies", "groups")

    def __init__(self, wid, cta, sched, trace, nregs):
        self.wid, self.cta, self.sched, self.trace = wid, cta, sched, trace
        self.ti, self.pc, self.end, self.mask = -1, 0, 0, 0
        self.regs = [0.0] * nregs
        self.memreg = [False] * nregs
        self.ready, self.cursor = 0.0, 0.0
        self.done, self.finish = False, 0.0
        self.events = None
        self.copies, self.groups = 0.0, []     # cp.async: the open group's and committed ends


class _Cta:
    __slots__ = ("live", "bars")

    def __init__(self, n):
        self.live = n
        self.bars = {}              # barrier id → [warps that arrived, warps waiting, count]


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


def run_sm(prog, cta_traces, table, memory, trace_warps=0, max_events=4000):
    """Simulate one SM running the CTAs whose warps follow `cta_traces` (a list per CTA of a
    list per warp of path traces) from cycle 0 until the last warp exits."""
    h = table.header
    nsched = h.schedulers_per_sm
    instrs, blocks = prog.instrs, prog.blocks
    nb = len(blocks)
    nunits = len(prog.units)
    bar_latency = table.ops["BAR"].latency
    warp_size = h.warp_size
    branch_latency = table.ops["BRANCH"].latency
    lds_latency = table.ops["LDS"].latency
    atom_latency = table.ops["ATOM"].latency
    roles = async_roles(prog)
    shared_atoms = shared_atomics(prog)

    warps, ctas = [], []
    for c, traces in enumerate(cta_traces):
        ctas.append(_Cta(len(traces)))
        for tr in traces:
            wid = len(warps)
            w = _Warp(wid, c, wid % nsched, tr, prog.nregs)
            if wid < trace_warps:
                w.events = []
            warps.append(w)
    # each scheduler's live warps, oldest first (a warp's age is its position on the SM)
    queues = [[w for w in warps if w.sched == s] for s in range(nsched)]
    last = [None] * nsched
    unit_free = [[0.0] * nunits for _ in range(nsched)]
    unit_busy = [0.0] * nunits
    stalls = dict.fromkeys(STALLS, 0.0)
    issued = 0
    INF = _INF

    def load_block(w):
        w.ti += 1
        if w.ti >= len(w.trace):
            return False
        e = w.trace[w.ti]
        b = e % nb
        w.mask = e // nb
        blk = blocks[b]
        w.pc, w.end = blk.start, blk.end
        return True

    def note(w, kind, start, end, text):
        if len(w.events) < max_events and end > start:
            w.events.append((kind, start, end, text))

    def schedule(w, t):
        """Work out when w's next instruction can issue (t: the earliest)."""
        st = instrs[w.pc]
        reason = -1
        regs = w.regs
        for r in st.uses:
            if regs[r] > t:
                t, reason = regs[r], r
        for r in st.defs:
            if regs[r] > t:
                t, reason = regs[r], r
        why = "memory" if reason >= 0 and w.memreg[reason] else "dependency"
        uf = unit_free[w.sched][st.unit]
        if uf > t:
            t, why = uf, "throughput"
        if t > w.cursor:
            stalls[why] += t - w.cursor
            if w.events is not None:
                note(w, why, w.cursor, t, why)
            w.cursor = t
        w.ready = t

    def finish(w, now):
        w.done, w.finish = True, now + 1
        w.ready = INF
        queues[w.sched].remove(w)
        cta = ctas[w.cta]
        cta.live -= 1
        for bid, (n, waiting, count) in list(cta.bars.items()):
            if n and n >= (count or cta.live):
                release(cta, bid, now)

    def arrive(w, st, now):
        bid, threads, waits = st.barrier
        cta = ctas[w.cta]
        n, waiting, count = cta.bars.get(bid) or (0, [], -(-threads // warp_size))
        if waits:
            w.ready = INF
            waiting.append(w)
        cta.bars[bid] = (n + 1, waiting, count)
        if n + 1 >= (count or cta.live):
            release(cta, bid, now)

    def release(cta, bid, now):
        t = now + bar_latency
        for v in cta.bars.pop(bid)[1]:
            stalls["barrier"] += t - v.cursor
            if v.events is not None:
                note(v, "barrier", v.cursor, t, "barrier")
            v.cursor = t
            schedule(v, t)

    live = len(warps)
    for w in warps:
        if load_block(w):
            schedule(w, 0.0)
        else:
            finish(w, -1.0)
            live -= 1
    now = 0.0
    while live:
        busy = False
        end = now + 1.0
        for s in range(nsched):
            q = queues[s]
            if not q:
                continue
            uf = unit_free[s]
            # greedy: the warp issued last, if it can go in this cycle; else the oldest that
            # can. Readiness is continuous time (latencies and issue intervals are measured
            # averages such as 4.1 or 1.02), so whatever becomes ready within the cycle issues
            # in it, at that moment.
            w = last[s]
            if w is None or w.ready >= end or uf[instrs[w.pc].unit] >= end:
                w = None
                for c in q:
                    if c.ready < end:
                        u = uf[instrs[c.pc].unit]
                        if u >= end:
                            # its pipe was taken since it became ready
                            t = max(now, c.cursor)
                            stalls["not_selected"] += t - c.cursor
                            if c.events is not None:
                                note(c, "not_selected", c.cursor, t, "not_selected")
                            stalls["throughput"] += u - t
                            if c.events is not None:
                                note(c, "throughput", t, u, "throughput")
                            c.cursor = c.ready = u
                            continue
                        w = c
                        break
                if w is None:
                    continue
            busy = True
            # -- issue --------------------------------------------------------------------
            last[s] = w
            st = instrs[w.pc]
            t = max(now, w.ready, uf[st.unit])
            if t > w.cursor:
                stalls["not_selected"] += t - w.cursor
                if w.events is not None:
                    note(w, "not_selected", w.cursor, t, "not_selected")
            if w.events is not None:
                note(w, "issue", t, t + 1, st.text)
            w.cursor = t + 1
            issued += 1
            uf[st.unit] = t + st.interval
            unit_busy[st.unit] += st.interval
            kind = st.kind
            nxt = t + 1
            if kind == ALU:
                done = t + st.latency
                for d in st.defs:
                    w.regs[d] = done
                    w.memreg[d] = False
            elif kind == BRANCH:
                nxt = t + branch_latency
            elif st.guard_bit < 0 or not (w.mask >> st.guard_bit) & 1:
                # memory and fixed-latency instructions whose guard holds
                if kind == STG:
                    memory.store_global(t, st)
                elif kind == STS:
                    memory.shared(t, st, 0.0)
                elif kind == FIXED and w.pc in roles:
                    nxt = _async_copy(memory, w, st, roles[w.pc], t, nxt)
                elif kind == LDG or kind == LDS or kind == FIXED or kind == ATOM:
                    if kind == LDG:
                        done = memory.load_global(t, st)
                    elif kind == LDS:
                        done = memory.shared(t, st, lds_latency)
                    elif kind == ATOM:
                        done = memory.atomic(t, st, atom_latency)
                    elif w.pc in shared_atoms:
                        done = memory.shared(t, st, st.latency, atomic=True)
                    else:
                        done = t + st.latency
                    for d in st.defs:
                        w.regs[d] = done
                        w.memreg[d] = True
            # -- advance ----------------------------------------------------------------------
            w.pc += 1
            # an exit ends its block: the path says whether lanes go on
            if w.pc >= w.end and not load_block(w):
                finish(w, t)
                live -= 1
                last[s] = None
                continue
            if kind == BAR:
                arrive(w, st, t)
                if st.barrier[2]:
                    continue            # the barrier schedules it when it releases
            schedule(w, nxt)
        if not live:
            break
        if busy:
            now += 1
            continue
        # nothing could issue: jump to the first cycle something can
        nxt = min((w.ready for q in queues for w in q), default=INF)
        if nxt == INF:
            stuck = [w.wid for w in warps if not w.done]
            raise PtxgenError(f"simulation deadlock: warps {stuck[:8]} wait at a barrier "
                              f"no other warp of their CTA reaches")
        now = max(now + 1, float(math.floor(nxt)))
    # the launch is over when the last warp has exited and the memory system has delivered
    # what it queued (stores in flight still draw bandwidth after their warp is gone)
    finish_at = max((w.finish for w in warps), default=0.0)
    cycles = max(finish_at, memory.drained())
    return SmResult(cycles=cycles, issued=issued, unit_busy=unit_busy, stalls=stalls,
                    warp_cycles=sum(w.finish for w in warps),
                    events=[w.events for w in warps if w.events is not None],
                    loads=dict(memory.loads),
                    bytes={k: s.bytes for k, s in memory.servers.items()},
                    finish=finish_at, busy={k: s.busy for k, s in memory.servers.items()})
