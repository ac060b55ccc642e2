"""Hopper's asynchronous work in the simulator's event loop (engine.Sm): TMA copies, mbarrier
phases and wgmma groups.

- A TMA load (cp.async.bulk.tensor global → shared, mbarrier::complete_tx) is a transfer: its
  bytes (the expect_tx count before it in its block, split over the copies it covers) are
  served by L2 (at memory_model.l2_tma_bandwidth_gbs), and by DRAM for the launch's first
  touches (`tma_dram_fraction`: the read
  footprint over all TMA bytes; none when no footprint is known), at this SM's share of their
  bandwidth (sim.memory servers);
  they land ops.TMA.latency after service starts, as a lone copy's measured latency. The issuing
  sub-partition's TMA pipe (ops.TMA.issue_interval per reference box) paces the copies too.
- mbarrier.arrive.expect_tx opens a transaction of the CTA (in issue order); it completes
  when all the copies it covers have landed.
- A consumer (a warp whose path issues no TMA copy) waiting on an mbarrier (try_wait, wait,
  test_wait) takes the CTA's transactions in order: its j-th wait holds it until transaction j
  has completed (stall reason `memory`).
- A plain mbarrier.arrive whose guard holds is a consumer's release: its i-th counts toward
  round i, complete once every warp of the CTA whose path releases (a guard that holds in
  some lane) has made its i-th (arrivals to another CTA's barrier, a cluster's, are not
  seen: each CTA's releases pace its own producer).
- A producer's (a TMA-issuing warp's) j-th wait passes at once for j < the ring's stages (the
  immediate a stage counter of the wait's address is compared with), else waits for release
  round j − stages; with no ring found, its waits pass at once.
- A barrier whose address is one register that a producer's wait and a consumer's arrive
  both name (a persistent CTA's buffer handed back once per tile: `barrier_channels`) is a
  one-stage ring of its own: the producer's j-th wait on it waits for its release round j − 1,
  and neither side counts toward the stage ring's waits and rounds.
- wgmma.mma_async's completion joins its warp's open group; commit_group closes it;
  wait_group N holds the warp until all but the N newest groups have completed.
When no producer of a CTA is left, its consumers' pending waits pass (and the other way round),
so a model mismatch costs time, never a deadlock.
"""
from ..ir.values import Imm, Reg

TMA, EXPECT, WAIT, RELEASE, WG_COMMIT, WG_WAIT = ("tma", "expect", "mbar_wait", "release",
                                                  "wg_commit", "wg_wait")
ROLES = (TMA, EXPECT, WAIT, RELEASE, WG_COMMIT, WG_WAIT)
_INF = float("inf")


def _is_tma_load(ins):
    return (ins.opcode == "cp" and "bulk" in ins.mods and "tensor" in ins.mods
            and any(m.startswith("mbarrier::complete_tx") for m in ins.mods))


def _imm(ins):
    return next((int(o.value) for o in ins.operands if isinstance(o, Imm)), None)


def async_roles(prog, default_box_bytes=16384):
    """{instruction index: (role, argument)}: (TMA, bytes), (EXPECT, copies it covers),
    (WAIT, 0), (RELEASE, 0), (WG_COMMIT, 0), (WG_WAIT, groups left in flight)."""
    out = {}
    for blk in prog.blocks:
        expect, copies = None, []
        for i in range(blk.start, blk.end + 1):
            ins = prog.instrs[i].instr if i < blk.end else None
            opens = ins is not None and ins.opcode == "mbarrier" and "expect_tx" in ins.mods
            if i == blk.end or opens:
                if expect is not None:
                    n, nbytes = len(copies), _imm(prog.instrs[expect].instr)
                    out[expect] = (EXPECT, n)
                    for c in copies:
                        out[c] = (TMA, nbytes / n if nbytes else default_box_bytes)
                elif copies:
                    for c in copies:
                        out[c] = (TMA, default_box_bytes)
                if i == blk.end:
                    break
                expect, copies = i, []
                continue
            if _is_tma_load(ins):
                copies.append(i)
            elif ins.opcode == "mbarrier" and ins.mods and ins.mods[0] in (
                    "try_wait", "wait", "test_wait"):
                out[i] = (WAIT, 0)
            elif ins.opcode == "mbarrier" and ins.mods and ins.mods[0] == "arrive":
                out[i] = (RELEASE, 0)
            elif ins.opcode == "wgmma" and ins.mods and ins.mods[0] == "commit_group":
                out[i] = (WG_COMMIT, 0)
            elif ins.opcode == "wgmma" and ins.mods and ins.mods[0] == "wait_group":
                out[i] = (WG_WAIT, _imm(ins) or 0)
    return out


def _address_reg(ins):
    return next((o.base.name for o in ins.operands
                 if hasattr(o, "base") and isinstance(o.base, Reg)), None)


def barrier_channels(prog, roles):
    """{wait or release instruction: its barrier's address register} for the barriers one
    register names in both a wait and a release (a single barrier, not a slot of the ring:
    a slot's address is computed from the stage where it is used)."""
    named = {}
    for i, (kind, _) in roles.items():
        if kind in (WAIT, RELEASE):
            reg = _address_reg(prog.instrs[i].instr)
            if reg is not None:
                named.setdefault(reg, []).append((kind, i))
    return {i: reg for reg, uses in named.items() if {k for k, _ in uses} == {WAIT, RELEASE}
            for _, i in uses}


RING = ""           # the channel of the stage ring's waits and releases


def ring_stages(prog, roles):
    """The stages of the producer's ring: the immediate a register feeding a producer wait's
    address (through mad/mul/shl/add, two definitions deep) is compared with by setp; None
    when not found."""
    defs = {}
    for st in prog.instrs:
        ins = st.instr
        for o in ins.operands[:ins.n_dests]:
            if isinstance(o, Reg):
                defs.setdefault(o.name, []).append(ins)
    waits = [st.instr for st in prog.instrs if roles.get(st.index, (None,))[0] == WAIT]
    feeding = set()
    for w in waits:
        frontier = [o.base.name for o in w.operands
                    if hasattr(o, "base") and isinstance(o.base, Reg)]
        for _ in range(2):
            nxt = []
            for name in frontier:
                for d in defs.get(name, []):
                    if d.opcode in ("mad", "mul", "shl", "add", "mov", "cvt"):
                        nxt += [o.name for o in d.operands[d.n_dests:] if isinstance(o, Reg)]
            feeding.update(nxt)
            frontier = nxt
    for st in prog.instrs:
        ins = st.instr
        if ins.opcode != "setp" or not ins.mods or ins.mods[0] not in ("eq", "ge", "lt"):
            continue
        regs = [o.name for o in ins.operands[ins.n_dests:] if isinstance(o, Reg)]
        k = _imm(ins)
        if k and k > 1 and any(r in feeding for r in regs):
            return k
    return None


class _CtaState:
    __slots__ = ("tx_left", "tx_done", "open", "waiting", "rounds", "round_done",
                 "pwaiting", "producers", "consumers", "releasers")

    def __init__(self):
        self.releasers = {}         # channel → warps whose path releases on it (a guard
                                    # holding in a lane)
        self.tx_left = []           # per transaction: copies still to be issued
        self.tx_done = []           # per transaction: the latest landing so far
        self.open = None            # the transaction the producer's copies go to
        self.waiting = {}           # transaction → [(wid, dest registers)]
        self.rounds = {}            # channel → per release round: arrivals so far
        self.round_done = {}        # channel → per release round: when it completed (or None)
        self.pwaiting = {}          # (channel, release round) → [(wid, dest registers)]
        self.producers = self.consumers = 0

    def copy(self):
        new = object.__new__(_CtaState)
        for a in _CtaState.__slots__:
            v = getattr(self, a)
            setattr(new, a, ({k: (list(x) if isinstance(x, list) else x)
                              for k, x in v.items()} if isinstance(v, dict)
                             else list(v) if isinstance(v, list) else v))
        return new


class _WarpState:
    __slots__ = ("producer", "waits", "releases", "wg_open", "wg_groups")

    def __init__(self, producer):
        self.producer = producer
        self.waits, self.releases = {}, {}      # per channel
        self.wg_open, self.wg_groups = 0.0, []

    def copy(self):
        new = _WarpState(self.producer)
        new.waits, new.releases = dict(self.waits), dict(self.releases)
        new.wg_open, new.wg_groups = self.wg_open, list(self.wg_groups)
        return new


class AsyncState:
    """The asynchronous state of one Sm's CTAs and warps (copied with the Sm: sim/fork.py)."""

    def __init__(self, sm, roles, table, tma_dram_fraction):
        self.roles = roles
        prog = sm.prog
        nb = len(prog.blocks)
        self.tma_blocks = {b.id for b in prog.blocks
                           if any(roles.get(i, (None,))[0] in (TMA, EXPECT)
                                  for i in range(b.start, b.end))}
        self.nb = nb
        self.channel = barrier_channels(prog, roles)
        self.release_at = {}        # block → [(guard bit or -1, channel)] of its releases
        for b in prog.blocks:
            for i in range(b.start, b.end):
                if roles.get(i, (None,))[0] == RELEASE:
                    self.release_at.setdefault(b.id, []).append(
                        (prog.instrs[i].guard_bit, self.channel.get(i, RING)))
        self.stages = ring_stages(prog, roles)
        tma = table.ops.get("TMA")
        self.latency = tma.latency if tma is not None else 0.0
        self.dram_fraction = tma_dram_fraction
        self.ctas = [_CtaState() for _ in sm.ctas]
        self.warps = {}
        for w in sm.warps:
            ws = self.warps[w.wid] = _WarpState(self._issues_tma(w.trace))
            c = self.ctas[w.cta]
            if ws.producer:
                c.producers += 1
            else:
                c.consumers += 1
                for ch in self._releases(w.trace):
                    c.releasers[ch] = c.releasers.get(ch, 0) + 1

    def _releases(self, trace):
        """The channels on which a path reaches a release whose guard holds in some lane."""
        nb, out = self.nb, set()
        for e in trace:
            for g, ch in self.release_at.get(e % nb, ()):
                if g < 0 or not (e // nb >> g) & 1:
                    out.add(ch)
        return out

    def _issues_tma(self, trace):
        nb, blocks = self.nb, self.tma_blocks
        return any(e % nb in blocks for e in trace)

    def copy(self, nwarps, nctas):
        new = object.__new__(AsyncState)
        new.__dict__.update(self.__dict__)
        new.ctas = [c.copy() for c in self.ctas[:nctas]]
        new.warps = {k: v.copy() for k, v in self.warps.items() if k < nwarps}
        return new

    # -- the engine's hooks --------------------------------------------------------------------
    def issue(self, sm, w, st, role, t, nxt):
        """What instruction st (role) issued by warp w at t does; the cycle w's next
        instruction may issue (inf: w waits until a release)."""
        kind, arg = role
        ws, c = self.warps[w.wid], self.ctas[w.cta]
        if kind == TMA:
            done = self._transfer(sm.memory, t, arg)
            k = c.open
            if k is None:               # a copy without expect_tx: a transaction of its own
                c.tx_left.append(1)
                c.tx_done.append(0.0)
                k = len(c.tx_left) - 1
            c.tx_done[k] = max(c.tx_done[k], done)
            c.tx_left[k] -= 1
            if c.tx_left[k] <= 0:
                c.open = None
                self._wake(sm, c.waiting.pop(k, ()), c.tx_done[k])
            return nxt
        if kind == EXPECT:
            c.tx_left.append(arg)
            c.tx_done.append(t)
            c.open = len(c.tx_left) - 1 if arg else None
            if not arg:
                self._wake(sm, c.waiting.pop(c.open, ()), t)
            return nxt
        if kind == WAIT:
            return self._wait(sm, w, ws, c, st, t, nxt)
        if kind == RELEASE:
            if ws.producer:
                return nxt
            ch = self.channel.get(st.index, RING)
            i = ws.releases.get(ch, 0)
            ws.releases[ch] = i + 1
            rounds, done = c.rounds.setdefault(ch, []), c.round_done.setdefault(ch, [])
            while len(rounds) <= i:
                rounds.append(0)
                done.append(None)
            rounds[i] += 1
            if rounds[i] >= c.releasers.get(ch, 0) and done[i] is None:
                done[i] = t
                self._wake(sm, c.pwaiting.pop((ch, i), ()), t)
            return nxt
        if kind == WG_COMMIT:
            ws.wg_groups.append(ws.wg_open)
            ws.wg_open = 0.0
            return nxt
        if kind == WG_WAIT:
            cut = len(ws.wg_groups) - arg
            if cut > 0:
                nxt = max(nxt, max(ws.wg_groups[:cut]))
                del ws.wg_groups[:cut]
            return nxt
        return nxt

    def unblock(self, sm, now):
        """The run would stop with every warp held: the earliest pending wait passes now (a
        dependency the model does not see, e.g. a cluster peer's). False when none is held
        here."""
        for c in self.ctas:
            for pending in (c.waiting, c.pwaiting):
                if pending:
                    k = min(pending)
                    self._wake(sm, pending.pop(k), now)
                    return True
        return False

    def wgmma_done(self, w, done):
        ws = self.warps.get(w.wid)
        if ws is not None:
            ws.wg_open = max(ws.wg_open, done)

    def finished(self, sm, w, now):
        """Warp w has exited: with no producer (consumer) of its CTA left, the other side's
        pending waits pass."""
        ws, c = self.warps[w.wid], self.ctas[w.cta]
        if ws.producer:
            c.producers -= 1
            if c.producers <= 0:
                for k in list(c.waiting):
                    self._wake(sm, c.waiting.pop(k), now)
        else:
            c.consumers -= 1
            if c.consumers <= 0:
                for k in list(c.pwaiting):
                    self._wake(sm, c.pwaiting.pop(k), now)

    # -- parts -----------------------------------------------------------------------------------
    def _transfer(self, memory, t, nbytes):
        servers = memory.servers
        start = servers["L2"].request(t, nbytes * memory.cfg.l2_tma_scale) \
            if "L2" in servers else t
        if self.dram_fraction > 0 and "DRAM" in servers:
            start = max(start, servers["DRAM"].request(t, nbytes * self.dram_fraction))
        return start + self.latency

    def _wait(self, sm, w, ws, c, st, t, nxt):
        dests = st.defs
        if ws.producer:
            ch = self.channel.get(st.index, RING)
            stages = self.stages if ch == RING else 1
            j = ws.waits.get(ch, 0)
            ws.waits[ch] = j + 1
            if stages is None or j < stages:
                return nxt
            r = j - stages
            rounds = c.round_done.get(ch, ())
            done = rounds[r] if r < len(rounds) else None
            if done is not None or c.consumers <= 0:
                return self._ready(w, dests, max(nxt, done or t))
            c.pwaiting.setdefault((ch, r), []).append((w.wid, dests))
            return _INF
        j = ws.waits.get(RING, 0)
        ws.waits[RING] = j + 1
        if j < len(c.tx_left) and c.tx_left[j] <= 0:
            return self._ready(w, dests, max(nxt, c.tx_done[j]))
        if c.producers <= 0:
            return nxt
        c.waiting.setdefault(j, []).append((w.wid, dests))
        return _INF

    @staticmethod
    def _ready(w, dests, at):
        for d in dests:
            w.regs[d] = at
            w.memreg[d] = True
        return at

    def _wake(self, sm, waiters, at):
        for wid, dests in waiters:
            v = sm.warps[wid]
            if v.done:
                continue
            self._ready(v, dests, at)
            sm.schedule(v, at)


def tma_dram_fraction(prog, trace, n_ctas, read_footprint):
    """The share of TMA bytes DRAM serves: the launch's read footprint over the TMA bytes all
    CTAs load (a CTA's along `trace`, its TMA-issuing warp's whole path); None without TMA."""
    roles = async_roles(prog)
    per_byte = {i: a for i, (k, a) in roles.items() if k == TMA}
    if not per_byte or not read_footprint:
        return None
    nb = len(prog.blocks)
    total = 0.0
    for e in trace:
        b = prog.blocks[e % nb]
        total += sum(per_byte.get(i, 0.0) for i in range(b.start, b.end))
    if total <= 0:
        return None
    return min(1.0, read_footprint / (total * n_ctas))
