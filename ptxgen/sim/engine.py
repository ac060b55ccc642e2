"""The cycle-level event loop of one SM.

Warps are spread over the sub-partitions (warp i of the SM on scheduler i mod n). Each cycle,
each scheduler issues at most one instruction, from its ready warps, greedy-then-oldest: the warp
it issued last if that one is ready, else the oldest ready warp. A warp is ready when the
scoreboard says every register it reads or writes has arrived (latency from the isa table, or
the memory level's latency after its bandwidth queue), its pipe in that sub-partition has taken
no other instruction within the issue interval, and it is not waiting at a barrier. bar.sync
releases a CTA's warps once every live warp of the CTA has arrived.

Time jumps straight to the next cycle in which anything can issue, so idle stretches (a memory
latency) cost nothing. Stall accounting is per warp, by intervals: from one issue to the next a
warp waits on a register (`dependency`, or `memory` when a load produced it), a pipe
(`throughput`), a barrier (`barrier`), or is ready while the scheduler picks another warp
(`not_selected`).
"""
import heapq
from dataclasses import dataclass, field

from ..errors import PtxgenError
from .program import ALU, ATOM, BAR, BRANCH, FIXED, LDG, LDS, STG, STS

STALLS = ("dependency", "memory", "throughput", "barrier", "not_selected")
_INF = float("inf")


class _Warp:
    __slots__ = ("wid", "cta", "sched", "age", "trace", "ti", "pc", "end", "mask", "regs",
                 "memreg", "ready", "reason", "cursor", "epoch", "in_ready", "done",
                 "finish", "events")

    def __init__(self, wid, cta, sched, age, trace, nregs):
        self.wid, self.cta, self.sched, self.age, self.trace = wid, cta, sched, age, trace
        self.ti, self.pc, self.end, self.mask = -1, 0, 0, 0
        self.regs = [0.0] * nregs
        self.memreg = [False] * nregs
        self.ready, self.reason, self.cursor = 0.0, "dependency", 0.0
        self.epoch, self.in_ready, self.done, self.finish = 0, False, False, 0.0
        self.events = None


class _Cta:
    __slots__ = ("live", "arrived")

    def __init__(self, n):
        self.live, self.arrived = n, []


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


def run_sm(prog, cta_traces, table, memory, trace_warps=0, max_events=4000):
    """Simulate one SM running the CTAs whose warps follow `cta_traces` (a list per CTA of a
    list per warp of path traces) from cycle 0 until the last warp exits."""
    h = table.header
    nsched = h.schedulers_per_sm
    instrs, blocks = prog.instrs, prog.blocks
    nb = len(blocks)
    nunits = len(prog.units)
    bar_latency = table.ops["BAR"].latency
    branch_latency = table.ops["BRANCH"].latency
    lds_latency = table.ops["LDS"].latency
    atom_latency = table.ops["ATOM"].latency

    warps, ctas = [], []
    for c, traces in enumerate(cta_traces):
        ctas.append(_Cta(len(traces)))
        for tr in traces:
            wid = len(warps)
            w = _Warp(wid, c, wid % nsched, wid, tr, prog.nregs)
            if wid < trace_warps:
                w.events = []
            warps.append(w)
    pending = [[] for _ in range(nsched)]       # heaps of (time, age, epoch, wid)
    ready = [[] for _ in range(nsched)]         # heaps of (age, epoch, wid)
    last = [None] * nsched
    unit_free = [[0.0] * nunits for _ in range(nsched)]
    unit_busy = [0.0] * nunits
    stalls = dict.fromkeys(STALLS, 0.0)
    issued = 0

    def load_block(w):
        w.ti += 1
        if w.ti >= len(w.trace):
            return False
        e = w.trace[w.ti]
        b = e % nb
        w.mask = e // nb
        w.pc, w.end = blocks[b].start, blocks[b].end
        return True

    def note(w, kind, start, end, text):
        if w.events is not None and len(w.events) < max_events and end > start:
            w.events.append((kind, start, end, text))

    def schedule(w, t0):
        """Work out when w's next instruction can issue (t0: the earliest) and queue it."""
        st = instrs[w.pc]
        t, reason = t0, None
        regs = w.regs
        for r in st.uses:
            if regs[r] > t:
                t, reason = regs[r], r
        for r in st.defs:
            if regs[r] > t:
                t, reason = regs[r], r
        why = "dependency" if reason is None or not w.memreg[reason] else "memory"
        uf = unit_free[w.sched][st.unit]
        if uf > t:
            t, why = uf, "throughput"
        if t > w.cursor:
            stalls[why] += t - w.cursor
            note(w, why, w.cursor, t, why)
            w.cursor = t
        w.ready = t
        w.epoch += 1
        w.in_ready = False
        heapq.heappush(pending[w.sched], (t, w.age, w.epoch, w.wid))

    def finish(w, now):
        w.done, w.finish = True, now + 1
        cta = ctas[w.cta]
        cta.live -= 1
        if cta.arrived and len(cta.arrived) >= cta.live:
            release(cta, now)

    def release(cta, now):
        t = now + bar_latency
        for v in cta.arrived:
            stalls["barrier"] += t - v.cursor
            note(v, "barrier", v.cursor, t, "barrier")
            v.cursor = t
            schedule(v, t)
        cta.arrived = []

    for w in warps:
        if load_block(w):
            schedule(w, 0.0)
        else:
            finish(w, -1.0)
    live = sum(not w.done for w in warps)
    now = 0.0
    while live:
        for s in range(nsched):
            pq, rq = pending[s], ready[s]
            while pq and pq[0][0] <= now:
                _t, age, ep, wid = heapq.heappop(pq)
                w = warps[wid]
                if ep == w.epoch and not w.done:
                    w.in_ready = True
                    heapq.heappush(rq, (age, ep, wid))
            w = None
            g = last[s]
            if g is not None and warps[g].in_ready:
                w = warps[g]
            while True:
                if w is None:
                    while rq:
                        _a, ep, wid = heapq.heappop(rq)
                        cand = warps[wid]
                        if cand.in_ready and ep == cand.epoch:
                            w = cand
                            break
                    if w is None:
                        break
                st = instrs[w.pc]
                uf = unit_free[s][st.unit]
                if uf > now:
                    # the pipe was taken since the warp became ready
                    stalls["not_selected"] += now - w.cursor
                    note(w, "not_selected", w.cursor, now, "not_selected")
                    w.cursor = now
                    schedule(w, uf)
                    w = None
                    continue
                break
            if w is None:
                continue
            # -- issue --------------------------------------------------------------------
            w.in_ready = False
            w.epoch += 1
            last[s] = w.wid
            stalls["not_selected"] += now - w.cursor
            note(w, "not_selected", w.cursor, now, "not_selected")
            note(w, "issue", now, now + 1, st.text)
            w.cursor = now + 1
            issued += 1
            unit_free[s][st.unit] = now + st.interval
            unit_busy[st.unit] += st.interval
            kind = st.kind
            on = st.guard_bit < 0 or not (w.mask >> st.guard_bit) & 1
            nxt = now + 1
            if kind == ALU:
                done = now + st.latency
                for d in st.defs:
                    w.regs[d] = done
                    w.memreg[d] = False
            elif kind == LDG or kind == LDS or kind == FIXED or kind == ATOM:
                if on:
                    if kind == LDG:
                        done = memory.load_global(now, st.bytes)
                    elif kind == LDS:
                        done = memory.shared(now, st.bytes, lds_latency)
                    elif kind == ATOM:
                        done = memory.atomic(now, st.bytes, atom_latency)
                    else:
                        done = now + st.latency
                    for d in st.defs:
                        w.regs[d] = done
                        w.memreg[d] = True
            elif kind == STG:
                if on:
                    memory.store_global(now, st.bytes)
            elif kind == STS:
                if on:
                    memory.shared(now, st.bytes, 0.0)
            elif kind == BRANCH:
                nxt = now + branch_latency
            # -- advance ----------------------------------------------------------------------
            w.pc += 1
            alive = True
            if w.pc >= w.end:       # an exit ends its block: the path says whether lanes go on
                alive = load_block(w)
            if not alive:
                finish(w, now)
                live -= 1
                continue
            if kind == BAR:
                cta = ctas[w.cta]
                cta.arrived.append(w)
                if len(cta.arrived) >= cta.live:
                    release(cta, now)
                continue
            schedule(w, nxt)
        if not live:
            break
        # next cycle with work: the next one if a scheduler still has ready warps, else the
        # earliest queued warp
        if any(ready[s] for s in range(nsched)):
            now += 1
            continue
        nxt = min((pending[s][0][0] for s in range(nsched) if pending[s]), default=_INF)
        if nxt == _INF:
            stuck = [w.wid for w in warps if not w.done]
            raise PtxgenError(f"simulation deadlock: warps {stuck[:8]} wait at a barrier "
                               f"no other warp of their CTA reaches")
        now = max(now + 1, nxt)
    cycles = max((w.finish for w in warps), default=0.0)
    return SmResult(cycles=cycles, issued=issued, unit_busy=unit_busy, stalls=stalls,
                    warp_cycles=sum(w.finish for w in warps),
                    events=[w.events for w in warps if w.events is not None],
                    loads=dict(memory.loads),
                    bytes={k: s.bytes for k, s in memory.servers.items()})
