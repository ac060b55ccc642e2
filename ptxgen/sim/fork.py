"""A copy of one SM's run in progress, for the launch's `again` run (ptxgen.sim.launch).

The wave's run and its `again` run (the same CTAs twice, the second set starting in the slots
of the first set's CTAs as they end) are the same simulation until the first CTA ends: up to
then the pending CTAs do nothing. The engine copies its state at that moment, without the
pending CTAs, and finishes the copy as the wave's own run, so the shared stretch (most of the
wave) is simulated once instead of twice. Every number is copied, none recomputed: the copy's
result is the one a separate run gives, to the last bit."""
import copy


def _copy_slots(obj):
    new = object.__new__(type(obj))
    for a in type(obj).__slots__:
        setattr(new, a, getattr(obj, a))
    return new


def without_pending(sm):
    """A copy of Sm `sm` (engine.Sm, before its first pending CTA starts) holding only its
    resident CTAs: its warps, scoreboards, pipes, barriers, stall sums and memory servers are
    copies; the program, paths and memory configuration are shared (nothing writes them)."""
    n = len(sm.ctas) - len(sm.pending)
    nw = sm.cta_first[n] if n < len(sm.cta_first) else len(sm.warps)
    new = object.__new__(type(sm))
    new.__dict__.update(sm.__dict__)
    same = {}
    warps = []
    for w in sm.warps[:nw]:
        c = _copy_slots(w)
        c.regs, c.memreg = list(w.regs), list(w.memreg)
        c.events = None if w.events is None else list(w.events)
        c.groups, c.piped = list(w.groups), dict(w.piped)
        same[id(w)] = c
        warps.append(c)
    ctas = []
    for cta in sm.ctas[:n]:
        c = _copy_slots(cta)
        c.bars = {bid: (k, [same[id(v)] for v in waiting], count)
                  for bid, (k, waiting, count) in cta.bars.items()}
        ctas.append(c)
    new.warps, new.ctas = warps, ctas
    new.cta_first, new.cta_traces = sm.cta_first[:n], sm.cta_traces[:n]
    new.pending, new.slots = [], dict(sm.slots)
    new.queues = [[same[id(w)] for w in q] for q in sm.queues]
    new.last = [None if w is None else same[id(w)] for w in sm.last]
    new.held, new.unit_busy, new.stalls = list(sm.held), list(sm.unit_busy), dict(sm.stalls)
    new.unit_free = [list(u) for u in sm.unit_free]
    new.live = sm.live - (len(sm.warps) - nw)
    new.memory = copy.deepcopy(sm.memory, {id(sm.memory.cfg): sm.memory.cfg})
    if sm.hopper is not None:
        new.hopper = sm.hopper.copy(nw, n)
    return new


def path_splits(sm, traces):
    """Per resident warp of Sm `sm`, the first block at which its path and the one in
    `traces` (one per resident warp, in order) differ (None: the same path), for
    Sm.set_alternative; None when they cannot share a run: a different warp count, barriers
    named differently, or a path that differs from its first block."""
    if len(traces) != len(sm.warps) - sum(len(sm.cta_traces[c]) for c in sm.pending):
        return None
    out = []
    for w, tr in zip(sm.warps, traces):
        if (getattr(tr, "barriers", None) or {}) != w.named:
            return None
        n = next((i for i, (a, b) in enumerate(zip(w.trace, tr)) if a != b),
                 min(len(w.trace), len(tr)))
        if n == 0:
            return None
        out.append(None if n == len(w.trace) == len(tr) else n)
    return out
