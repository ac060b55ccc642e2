"""The access pilot of a simulated launch (sim/launch.py): the loop to sample, the first
warps' memory addresses followed lane by lane (each memory instruction's Access, global
atomics sampled across the grid), the passes a CTA makes over its data, and the L2/DRAM
bytes one warp's trace asks for."""
import numpy as np

from ..errors import PtxgenError
from . import access as access_mod
from .paths import PathPlan, follow
from .program import ALU, ATOM, LDG, STG
from .values import SYNTHETIC_STRIDE


def hot_loop(prog, pilot, sample):
    """The outermost loop that runs more than `sample` iterations in one entry, or None."""
    cands = [prog.loops[lid] for lid, n in pilot.loop_iters.items() if n > sample]
    if not cands:
        return None
    return max(cands, key=lambda lp: (lp.end - lp.header, -lp.header))


def traffic(prog, trace, access):
    """(bytes global loads ask of L2, bytes stores write) along one warp's trace."""
    nb = len(prog.blocks)
    loads = stores = 0.0
    for e in trace:
        blk = prog.blocks[e % nb]
        mask = e // nb
        for i in range(blk.start, blk.end):
            st = prog.instrs[i]
            if st.kind not in (LDG, STG) or (st.guard_bit >= 0 and (mask >> st.guard_bit) & 1):
                continue
            acc = access.get(i)
            if st.kind == STG:
                # the bytes of the footprint the store writes: its lanes' data, not its sectors
                # (a sector it shares with the next warp, or with the warp's own next store of
                # interleaved channels, is written once; counted per sector a misaligned row
                # kernel wrote more than its footprint and left its loads too little of DRAM)
                stores += (acc.bytes if acc.data_bytes < 0 else acc.data_bytes) \
                    if acc is not None else st.bytes
            elif acc is None or not acc.dram_miss:      # (scattered loads: their own miss)
                loads += acc.bytes * acc.miss * acc.share if acc is not None else st.bytes
    return loads, stores


# the access pilot follows 32 lanes; the first executions of each memory instruction are what
# it needs, so it stops after this many slice steps (later instructions keep default costs)
ACCESS_PILOT_STEPS = 20_000
ATOMIC_SAMPLE_WARPS = 62       # warps sampled across the grid for global atomics' addresses
ACCESS_PILOT_WARPS = 8          # warps of the first CTA whose addresses the pilot records


def access_pilot(prog, env, specs_all, warps, hot, trip, table, budget, n_ctas=1):
    """Per memory instruction, its Access (ptxgen.sim.access) from following the first warps
    of the first CTA lane by lane (specs_all(w, cta=0)); global atomics also in warps sampled
    across the grid (a fixed seed: the same sample on every run)."""
    idx = access_mod.memory_instrs(prog)
    if not idx:
        return {}, ""
    plan = PathPlan(prog, env, slice_=access_mod.address_slice(prog, idx), record=idx)

    def walk(p, specs):
        try:
            follow(p, specs, trip=trip, cap=(4,), hot_loop=hot.id if hot else None,
                   budget=budget, warnings={}, nested=True)
        except PtxgenError:
            pass                        # what was recorded before the budget ran out counts
    for w in range(min(ACCESS_PILOT_WARPS, warps)):
        plan.record_warp = w
        walk(plan, specs_all(w))
    atoms = [i for i in idx if prog.instrs[i].kind == ATOM]
    if atoms:
        sampled = PathPlan(prog, env, slice_=access_mod.address_slice(prog, atoms), record=atoms)
        rng = np.random.default_rng(0)
        for k in range(ATOMIC_SAMPLE_WARPS):
            sampled.record_warp = access_mod.SAMPLED_WARP + k
            walk(sampled, specs_all(int(rng.integers(warps)), int(rng.integers(n_ctas))))
        for i in atoms:
            plan.records.setdefault(i, {}).update(sampled.records.get(i, {}))
    # scalar shared loads ptxas merges into one vector load issue once: the others become
    # free moves that deliver with the leader
    lds = table.ops["LDS"].latency
    for i in access_mod.vector_merges(prog, plan.records):
        st = prog.instrs[i]
        st.kind, st.latency, st.interval = ALU, lds, 0.0
    sector = int((table.memory_model or {}).get("sector_bytes", 0))
    return access_mod.analyze(prog, table, plan.records, warps, plan.later), \
        (_passes(prog, plan.records, sector) if sector else "")


def _passes(prog, records, sector):
    """'read' when global loads in two different loops read the same sectors in the recorded
    warps of the first CTA: the CTA reads its data again in a later pass (a two-pass row
    kernel: max, then sum), so what it reads between the two stands between a byte's first
    read and its second. 'written' when loads in one loop read sectors that stores in another
    wrote (a forward sweep keeping its intermediates, a backward sweep reading them: the
    Thomas algorithm): everything the CTA touches in between stands between
    the write and the read. '' otherwise."""
    where, wrote, first = {}, {}, {}
    for i, rec in records.items():
        kind = prog.instrs[i].kind
        if kind not in (LDG, STG):
            continue
        loops = [lp for lp in prog.loops if lp.contains(i)]
        if not loops:
            continue
        lp = min(loops, key=lambda lp: lp.end - lp.header)              # the innermost
        first[lp.id] = lp.header
        got = (where if kind == LDG else wrote).setdefault(lp.id, set())
        for w, execs in rec.items():
            if w < access_mod.SAMPLED_WARP:
                got.update(a // sector for ex in execs for a in ex if a is not None)
    sets = list(where.values())
    if any(a & b for k, a in enumerate(sets) for b in sets[k + 1:]):
        return "read"
    # the pilot follows a long loop only in part, so the sweeps' recorded rows need not meet:
    # a later loop's loads in the array (a pointer argument's address range) an earlier
    # loop's stores wrote count
    arrays = {lid: {s * sector // SYNTHETIC_STRIDE for s in got} for lid, got in where.items()}
    if any(arrays[ld] & {s * sector // SYNTHETIC_STRIDE for s in got}
           for ld in arrays for st, got in wrote.items() if first[st] < first[ld]):
        return "written"
    return ""
