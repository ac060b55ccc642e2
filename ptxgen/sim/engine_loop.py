"""The engine's event loop with its common case written out (ptxgen.sim.engine.Sm).

`Sm.pick` (which warp a scheduler issues), `Sm.step` (issue and move on) and `Sm.schedule`
(when the warp's next instruction can issue, and the stall that costs) say what one issue
does; `reference_loop` calls them once per scheduler and cycle. They are one Python call chain
per issued instruction (edit_distance_local 600011x32: 1.6 M issues, 2.4 M picks, 6.5 M warps
moved on by the scans), so `issue_loop` does the same with the call chain written out for the
instructions that are most of a kernel: an ALU op, a branch or a fixed-latency op of an
untraced warp that does not end its block (`plain_issue`). Everything else (memory
operations, barriers, block ends and exits, async ops, traced warps) goes through `Sm.step`.

The two loops do the same float operations in the same order: their results (cycles, stall
sums, traced warps' events) are identical to the last bit (tests/test_sim_engine.py runs
both)."""
import math
from itertools import chain
from operator import attrgetter

from ..errors import PtxgenError
from .program import ALU, BRANCH, FIXED

_INF = float("inf")
# Sm.plain: how issue_loop issues an instruction itself (SLOW: through Sm.step)
SLOW, ALU_OP, BRANCH_OP, FIXED_OP = -1, 0, 1, 2


def reference_loop(sm, now, s0, busy):
    """The event loop from scheduler s0's turn in the cycle at `now` (busy: a scheduler
    before it issued in this cycle), one `pick` and `step` call per issue."""
    sm.looping = True
    scheds = range(sm.nsched)
    order = range(s0, sm.nsched)
    queues, held = sm.queues, sm.held
    pick, step = sm.pick, sm.step
    while sm.live:
        end = now + 1.0
        for s in order:
            if not queues[s] or held[s] > now:
                continue
            w = pick(s, now, end)
            if w is None:
                continue
            busy = True
            step(w, s, now)
        order = scheds
        if busy or not sm.live:
            now, busy = now + 1, False
        else:
            now = _idle_jump(sm, now)
    return sm.result()


def _idle_jump(sm, now):
    """Nothing could issue: the first cycle something can."""
    nxt = min(map(attrgetter("ready"), chain.from_iterable(sm.queues)), default=_INF)
    if nxt == _INF and sm.hopper is not None and sm.hopper.unblock(sm, now + 1):
        return now + 1
    if nxt == _INF:
        stuck = [w.wid for w in sm.warps if not w.done]
        raise PtxgenError(f"simulation deadlock: warps {stuck[:8]} wait at a barrier "
                          f"no other warp of their CTA reaches")
    return max(now + 1, float(math.floor(nxt)))


def issue_loop(sm, now, s0, busy):
    """reference_loop with pick, the plain instructions' step and their schedule written out
    (the same operations in the same order). The stall sums and the issue count are kept in
    locals, written back before anything else reads them (`Sm.step`, a traced warp's
    `Sm.stall`, the end)."""
    sm.looping = True
    scheds = range(sm.nsched)
    order = range(s0, sm.nsched)
    queues, held, last, unit_free = sm.queues, sm.held, sm.last, sm.unit_free
    plain = sm.plain
    pipes = list(zip(sm.pipe_a, sm.pipe_b))
    unit_busy, stalls = sm.unit_busy, sm.stalls
    branch_latency = sm.branch_latency
    step, stall = sm.step, sm.stall
    dp, me, th, ns = (stalls["dependency"], stalls["memory"], stalls["throughput"],
                      stalls["not_selected"])
    issued = sm.issued
    while sm.live:
        end = now + 1.0
        for s in order:
            q = queues[s]
            if not q or held[s] > now:
                continue
            uf = unit_free[s]
            # -- pick: the warp issued last if it can go, else the oldest that can; a warp
            # whose pipe was taken is moved on to when it frees (stall(c, "not_selected",
            # now) then stall(c, "throughput", u), written out)
            w = last[s]
            # (uf[-1], the pipe of an async tensor op, is never busy)
            if w is not None and w.ready < end:
                a, b = pipes[w.pc]
                u, ub = uf[a], uf[b]
                if (ub if ub < u else u) >= end:
                    w = None
            else:
                w = None
            if w is None:
                for c in q:
                    if c.ready < end:
                        a, b = pipes[c.pc]
                        u, ub = uf[a], uf[b]
                        if ub < u:
                            u = ub
                        if u < end:
                            w = c
                            break
                        if c.tracing:
                            stalls["throughput"], stalls["not_selected"] = th, ns
                            stall(c, "not_selected", max(now, c.cursor))
                            stall(c, "throughput", u)
                            th, ns = stalls["throughput"], stalls["not_selected"]
                        else:
                            cur = c.cursor
                            if now > cur:
                                ns += now - cur
                                cur = now
                            if u > cur:
                                th += u - cur
                                cur = u
                            c.cursor = cur
                        c.ready = u
                if w is None:
                    continue
            busy = True
            pc = w.pc
            (code, a, b, unit, interval, alt, extra, lat, out, g, waits, na, nb) = plain[pc]
            if code < 0 or w.tracing or pc + 1 >= w.end:
                sm.issued = issued
                stalls["dependency"], stalls["memory"] = dp, me
                stalls["throughput"], stalls["not_selected"] = th, ns
                step(w, s, now)
                dp, me, th, ns = (stalls["dependency"], stalls["memory"],
                                  stalls["throughput"], stalls["not_selected"])
                issued = sm.issued
                continue
            # -- step: issue a plain instruction
            last[s] = w
            pf, ub = uf[a], uf[b]
            if ub < pf:
                pf = ub
            t = w.ready
            if now > t:
                t = now
            if pf > t:
                t = pf
            if t > w.cursor:
                ns += t - w.cursor
            cursor = nxt = t + 1
            issued += 1
            if alt is not None and uf[alt[0]] < uf[unit]:
                unit, interval = alt
            unit_busy[unit] += interval
            if extra:
                # ptxas's SASS beyond this PTX instruction: the scheduler issues it first
                n = 0.0
                for k, xu, xi in extra:
                    n += k
                    uf[xu] = max(uf[xu], t) + k * xi
                    unit_busy[xu] += k * xi
                cursor = nxt = held[s] = t + 1 + n
            uf[unit] = t + interval
            regs = w.regs
            if code == ALU_OP:              # its results arrive after its latency
                done = t + lat
                memreg = w.memreg
                for d in out:
                    regs[d] = done
                    memreg[d] = False
            elif code == BRANCH_OP:
                nxt = t + branch_latency
            elif g < 0 or not (w.mask >> g) & 1:    # fixed latency, its guard holds
                done = t + lat
                memreg = w.memreg
                for d in out:
                    regs[d] = done
                    memreg[d] = True
            w.pc = pc + 1
            # -- schedule: when the next instruction can issue, and the stall that costs
            tn = nxt
            reason = -1
            for r in waits:
                if regs[r] > tn:
                    tn, reason = regs[r], r
            u, ub = uf[na], uf[nb]
            if ub < u:
                u = ub
            if u > tn:
                tn, reason = u, -2
            if tn > cursor:
                if reason == -2:
                    th += tn - cursor
                elif reason >= 0 and w.memreg[reason]:
                    me += tn - cursor
                else:
                    dp += tn - cursor
                cursor = tn
            w.cursor = cursor
            w.ready = tn
        order = scheds
        if not sm.live:
            break
        if busy:
            now += 1
            busy = False
            continue
        now = _idle_jump(sm, now)
    sm.issued = issued
    stalls["dependency"], stalls["memory"] = dp, me
    stalls["throughput"], stalls["not_selected"] = th, ns
    return sm.result()


def plain_issue(sm):
    """Per instruction of Sm `sm`, what issue_loop reads to issue it without `Sm.step`: (how:
    ALU_OP, BRANCH_OP, FIXED_OP or SLOW, its pipe and the other pipe that takes it, its unit
    and issue interval, the alternative (unit, interval), ptxas's extra SASS, its latency, the
    registers it writes, its guard bit; then the next instruction's scoreboard registers and
    pipes, for its schedule). SLOW: an async tensor op, a memory op, cp.async, a shared-memory
    atomic, an exit, or one after which `Sm.advance` has work (a barrier, a folded one next)."""
    out = []
    n = len(sm.instrs)
    for i, st in enumerate(sm.instrs):
        if st.queued or sm.stops[i]:
            how = SLOW
        elif st.kind == ALU:
            how = ALU_OP
        elif st.kind == BRANCH:
            how = BRANCH_OP
        elif st.kind == FIXED and st.index not in sm.roles and st.index not in sm.shared_atoms:
            how = FIXED_OP
        else:
            how = SLOW
        nxt = (sm.waits_on[i + 1], sm.pipe_a[i + 1], sm.pipe_b[i + 1]) if i + 1 < n else \
            ((), -1, -1)
        out.append((how, sm.pipe_a[i], sm.pipe_b[i], st.unit, st.interval, st.alt, st.extra,
                    st.latency, st.defs, st.guard_bit) + nxt)
    return out
