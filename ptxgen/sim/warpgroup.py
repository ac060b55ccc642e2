"""wgmma as the warpgroup's instruction (engine.Sm, through async_copy.AsyncState).

`wgmma.mma_async.sync.aligned` is executed by the four warps of a warpgroup collectively (PTX
ISA: every thread of the warpgroup executes the same wgmma; the m64 tile's rows are spread over
the four warps, hence over the four sub-partitions' tensor cores, and the B operand is read
once for them). So the warpgroup's k-th wgmma starts only when every warp of the warpgroup has
issued its k-th one and the tensor pipe of each of their sub-partitions has finished the work
queued before it; each warp's share then occupies its sub-partition's pipe for its interval and
its accumulator arrives the op's latency after that common start. A warp goes on after issuing
(wgmma is asynchronous); it is `wgmma.wait_group` that holds it until its groups' ops are done.

Until its warpgroup's last warp issues, an op's accumulator holds a provisional arrival (the
warp's own pipe, as if alone); PTX reads the accumulator only after a wait_group that covers it,
and that wait holds the warp until the start is known. A warp of the warpgroup that never issues
wgmma (its path has none) is not waited for, nor is one that has exited; if the run would stop
with every warp held, the earliest pending op starts with the warps that have issued it.
"""
from ..schedule.tc_matmul import WARPGROUP

_INF = float("inf")


class _WarpMma:
    __slots__ = ("issued", "resolved", "done", "groups", "hold")

    def __init__(self):
        self.issued = self.resolved = 0     # wgmma ops issued / whose start is known
        self.done = []                      # (op number, completion) known, not yet waited on
        self.groups = []                    # committed groups: one past each group's last op
        self.hold = None                    # (ops needed, earliest next issue): held in a wait

    def copy(self):
        new = _WarpMma()
        new.issued, new.resolved, new.hold = self.issued, self.resolved, self.hold
        new.done, new.groups = list(self.done), list(self.groups)
        return new


class WarpgroupMma:
    """The wgmma state of one Sm's warps: per warp its ops and groups, per warpgroup the ops
    not all of whose warps have issued yet."""

    def __init__(self, sm, ops):
        self.ops = ops                      # the wgmma.mma_async instructions' indices
        nb = len(sm.prog.blocks)
        blocks = {b.id for b in sm.prog.blocks if any(i in ops for i in range(b.start, b.end))}
        per = max(1, WARPGROUP // sm.warp_size)
        self.warps = {w.wid: _WarpMma() for w in sm.warps}
        self.group = {}                     # wid → its warpgroup (CTA, index in the CTA)
        self.members = {}                   # warpgroup → its warps whose path issues wgmma
        for w in sm.warps:
            g = (w.cta, (w.wid - sm.cta_first[w.cta]) // per)
            self.group[w.wid] = g
            if any(e % nb in blocks for e in w.trace):
                self.members.setdefault(g, []).append(w.wid)
        self.pending = {}                   # (warpgroup, op number) → {wid: (st, dep, guess)}
        self.started = {}                   # warpgroup → how many of its ops have started

    def copy(self, nwarps):
        new = object.__new__(WarpgroupMma)
        new.__dict__.update(self.__dict__)
        new.warps = {k: v.copy() for k, v in self.warps.items() if k < nwarps}
        new.started = dict(self.started)
        new.pending = {key: dict(e) for key, e in self.pending.items()
                       if min(e) < nwarps}
        return new

    # -- the engine's hooks --------------------------------------------------------------------
    def issue(self, sm, w, st, t):
        """Warp w issued wgmma st at t (sim.engine.Sm.queue)."""
        ws = self.warps[w.wid]
        regs, piped = w.regs, w.piped
        dep = t         # an accumulator an ordinary instruction wrote (O rescaled): its arrival
        for d in st.defs:
            if piped.get(d) != regs[d] and regs[d] > dep:
                dep = regs[d]
        k = ws.issued
        ws.issued += 1
        uf = sm.unit_free[w.sched]
        guess = max(dep, uf[st.unit]) + st.latency
        for d in st.defs:
            regs[d] = piped[d] = guess
            w.memreg[d] = False
        g = self.group[w.wid]
        self.pending.setdefault((g, k), {})[w.wid] = (st, dep, guess)
        if k < self.started.get(g, 0):      # started without it (unblock): it goes alone
            self._start(sm, g, k)
        else:
            self._try(sm, g, k)

    def commit(self, w):
        ws = self.warps[w.wid]
        ws.groups.append(ws.issued)

    def wait(self, sm, w, left, nxt):
        """wait_group `left`: the cycle w's next instruction may issue (inf: held until the
        ops of its groups have started)."""
        ws = self.warps[w.wid]
        cut = len(ws.groups) - left
        if cut <= 0:
            return nxt
        need = ws.groups[cut - 1]
        del ws.groups[:cut]
        if ws.resolved < need:
            ws.hold = (need, nxt)
            return _INF
        return max(nxt, self._take(ws, need))

    def finished(self, sm, w):
        """Warp w has exited: its warpgroup's pending ops no longer wait for it."""
        g = self.group[w.wid]
        for key in sorted(k for k in self.pending if k[0] == g):
            self._try(sm, g, key[1])

    def unblock(self, sm):
        """Every warp is held: the earliest pending op starts with the warps that issued it.
        False when none is pending."""
        if not self.pending:
            return False
        g, k = min(self.pending, key=lambda key: (key[1], key[0]))
        self._start(sm, g, k)
        return True

    # -- parts -----------------------------------------------------------------------------------
    def _try(self, sm, g, k):
        entry = self.pending.get((g, k))
        if entry is None:
            return
        for v in self.members.get(g, ()):
            if v not in entry and not sm.warps[v].done:
                return
        self._start(sm, g, k)

    def _start(self, sm, g, k):
        """The warpgroup's k-th op starts: every issuing warp's pipe is free and its
        accumulator's inputs are there."""
        entry = self.pending.pop((g, k))
        self.started[g] = max(self.started.get(g, 0), k + 1)
        warps, unit_free = sm.warps, sm.unit_free
        start = 0.0
        for v, (st, dep, _guess) in entry.items():
            start = max(start, dep, unit_free[warps[v].sched][st.unit])
        for v, (st, _dep, guess) in entry.items():
            w = warps[v]
            unit_free[w.sched][st.unit] = start + st.interval
            done = start + st.latency
            for d in st.defs:
                if w.regs[d] == guess and w.piped.get(d) == guess:
                    w.regs[d] = w.piped[d] = done
            ws = self.warps[v]
            ws.done.append((k, done))
            ws.resolved = k + 1
            if ws.hold is not None and ws.resolved >= ws.hold[0] and not w.done:
                need, nxt = ws.hold
                ws.hold = None
                sm.schedule(w, max(nxt, self._take(ws, need)))

    @staticmethod
    def _take(ws, need):
        """The completion of ops before `need`, taken off the warp's list."""
        at, done = 0.0, ws.done
        n = 0
        while n < len(done) and done[n][0] < need:
            at = max(at, done[n][1])
            n += 1
        del done[:n]
        return at
