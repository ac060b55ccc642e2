"""The cluster instructions' ops (sm_90): mapa, getctarank, barrier.cluster, st.async and
red.async. The cluster's shape, addressing and barrier state are cluster.py's (which memops and
mbarrier use, so it imports neither)."""
import numpy as np

from ..errors import EmulationError
from ..ir.instr import Instr
from . import mbarrier, memops, memory
from .cluster import LOW, RANK_SHIFT, ClusterBarrier, rank_error
from .compiled_op import WAIT

_U64 = np.dtype(np.uint64)
_U32 = np.dtype(np.uint32)


def _fail_at(ctx, st, lane, why):
    ins = str(ctx.ins).split("  //")[0]
    where = f"PTX line {ctx.ins.line}" if ctx.ins.line else f"instruction {ctx.index}"
    raise EmulationError(f"kernel {ctx.prog.name}: `{ins}` at {where} by {st.block_name(lane)} "
                         f"{st.thread_name(lane)}: {why}")


def _lanes(st, m):
    return np.arange(st.n) if m is None else np.flatnonzero(m)


def _full(st, v, lanes):
    v = np.asarray(v)
    return (np.broadcast_to(v, (st.n,)) if v.ndim == 0 else v)[lanes]


def _on_addresses(ctx, af, generic, what, body):
    """The op fn that calls body(st, m, lanes, a) with the active lanes and their address
    operand `af` as shared-window addresses (a generic one must lie in the shared window)."""
    def fn(st, m):
        lanes = _lanes(st, m)
        if not lanes.size:
            return
        a = _full(st, af(st), lanes).astype(_U64)
        if generic:
            bad = (a >> np.uint64(memory.WINDOW_SHIFT)) != \
                memory.SHARED_WINDOW >> memory.WINDOW_SHIFT
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                _fail_at(ctx, st, lanes[i], f"{what} of {int(a[i]):#x}, which is not a generic "
                                            f"address of shared memory")
            a = a - np.uint64(memory.SHARED_WINDOW)
        body(st, m, lanes, a)
    return fn


def build_mapa(ctx, ins):
    """mapa[.shared::cluster].{u32,u64} d, a, r: a's address in CTA r of the cluster (generic
    when no state space is named)."""
    generic = not any(m.startswith("shared") for m in ins.mods)
    t = ins.type
    if t is None or t.name not in ("u32", "u64", "b32", "b64"):
        ctx.fail("mapa takes a .u32 or .u64 type")
    dt = np.dtype(np.uint32 if t.bits == 32 else np.uint64)
    ops = ins.operands
    if len(ops) != 3:
        ctx.fail("mapa takes d, a, rank")
    af, rf = ctx.read(ops[1], dt), ctx.read(ops[2], _U32)
    w = ctx.write_lanes(ops[0])

    def fn(st, m, lanes, a):
        r = _full(st, rf(st), lanes).astype(np.int64)
        hi = (a >> np.uint64(RANK_SHIFT)).astype(np.int64)
        low = (a & np.uint64(LOW)).astype(np.int64)
        bad = (hi > st.csize) | (low >= max(st.shared.size, 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail_at(ctx, st, lanes[i], f"mapa of {int(a[i]):#x}, which is not a shared "
                                        f"memory address (this CTA has {st.shared.size} bytes "
                                        f"of shared memory)")
        bad = (r < 0) | (r >= st.csize)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail_at(ctx, st, lanes[i], f"mapa to CTA rank {int(r[i])}, but the cluster has "
                                        f"{st.csize} CTA{'s' if st.csize > 1 else ''}")
        out = ((r + 1) << RANK_SHIFT) | low        # cluster.address, per lane
        out = out.astype(_U64) + (np.uint64(memory.SHARED_WINDOW) if generic else np.uint64(0))
        w(st, None if m is None else lanes, out.astype(dt))
    return _on_addresses(ctx, af, generic, "mapa", fn)


def build_getctarank(ctx, ins):
    """getctarank[.shared::cluster].u32 d, a: the rank of the CTA whose shared memory a is."""
    generic = not any(m.startswith("shared") for m in ins.mods)
    ops = ins.operands
    if len(ops) != 2:
        ctx.fail("getctarank takes d, a")
    af = ctx.read(ops[1], _U64)
    w = ctx.write_lanes(ops[0])

    def fn(st, m, lanes, a):
        hi = (a >> np.uint64(RANK_SHIFT)).astype(np.int64)
        bad = hi > st.csize
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail_at(ctx, st, lanes[i], rank_error(st, int(hi[i]) - 1, int(a[i])))
        own = (st.lane_cta[lanes] % st.csize).astype(np.int64)
        w(st, None if m is None else lanes, np.where(hi == 0, own, hi - 1).astype(_U32))
    return _on_addresses(ctx, af, generic, "getctarank", fn)


def _cluster_bar(st, lane):
    k = int(st.lane_cta[lane]) // st.csize
    table = mbarrier.barriers(st)
    b = table.get(("cluster", k))
    if b is None:
        b = table[("cluster", k)] = ClusterBarrier(st, k)
    return b


def build_barrier_cluster(ctx, ins):
    mods = ins.mods
    if "arrive" in mods:
        return _build_arrive(ctx)
    if "wait" in mods:
        return _build_wait(ctx)
    ctx.fail("barrier.cluster is .arrive or .wait")


def _build_arrive(ctx):
    def fn(st, m):
        phases = arrive_phase(st)
        for lane in _lanes(st, m):
            b = _cluster_bar(st, lane)
            if b.arrived[lane]:
                _fail_at(ctx, st, lane, "barrier.cluster.arrive twice without a "
                                        "barrier.cluster.wait between")
            b.arrived[lane] = True
            phases[lane] = b.phase
    return fn


def arrive_phase(st):
    p = getattr(st, "cluster_arrived", None)
    if p is None:
        p = st.cluster_arrived = np.full(st.n, -1, np.int64)
    return p


def _build_wait(ctx):
    def fn(st, m):
        lanes = _lanes(st, m)
        phases = arrive_phase(st)
        blocked = np.zeros(st.n, bool)
        for lane in lanes:
            p = int(phases[lane])
            if p < 0:
                _fail_at(ctx, st, lane, "barrier.cluster.wait without a barrier.cluster.arrive "
                                        "before it")
            b = _cluster_bar(st, lane)
            if b.phase == p:
                b.try_complete(st)
            if b.phase > p:
                phases[lane] = -1
                continue
            blocked[lane] = True
            mbarrier.wait_table(st)[int(lane)] = (("cluster", b.k),
                                         lambda b, p=p: _done(st, b, p), ctx)
        if blocked.any():
            st.wait_blocked = blocked
            return
        # every waiter of this group passed: their arrivals are consumed
    fn.op_kind = WAIT
    return fn


def _done(st, b, p):
    if b.phase == p:
        b.try_complete(st)
    return b.phase > p


# -- st.async / red.async: stores and reductions into a CTA of the cluster that complete bytes
# on that CTA's mbarrier -----------------------------------------------------------------------
def build_st_async(ctx, ins):
    """st.async[.weak].shared::cluster.mbarrier::complete_tx::bytes[.v2|.v4].type [a], b, [mbar]:
    the store lands at once and its bytes complete on the mbarrier (normally in the same CTA)."""
    ops = ins.operands
    if len(ops) != 3:
        ctx.fail("st.async takes [address], value, [mbarrier]")
    plain = Instr("st", tuple(m for m in ins.mods if m not in _ASYNC_MODS), ops[:2])
    return _completing(ctx, ins, memops.build_st(ctx, plain), ops[2],
                       plain.type.nbytes * plain.vector_width)


def build_red_async(ctx, ins):
    """red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [a], b,
    [mbar]: the reduction, then its bytes complete on the mbarrier."""
    ops = ins.operands
    if len(ops) != 3:
        ctx.fail("red.async takes [address], value, [mbarrier]")
    plain = Instr("red", tuple(m for m in ins.mods if m not in _ASYNC_MODS), ops[:2])
    return _completing(ctx, ins, memops.build_red(ctx, plain), ops[2], plain.type.nbytes)


_ASYNC_MODS = ("async", "weak", "relaxed", "cluster", "mbarrier::complete_tx::bytes")


def _completing(ctx, ins, access, bar, nbytes):
    if "mbarrier::complete_tx::bytes" not in ins.mods:
        ctx.fail(f"{ins.opcode}.async completes on an mbarrier (.mbarrier::complete_tx::bytes)")
    bf = memops.address_fetch(ctx, bar, "shared")

    def fn(st, m):
        access(st, m)
        lanes = _lanes(st, m)
        for lane, b in zip(lanes, _full(st, bf(st), lanes)):
            mbarrier.complete_tx(ctx, st, lane, int(b), nbytes)
    return fn


BUILDERS = {"mapa": build_mapa, "getctarank": build_getctarank,
            "barrier.cluster": build_barrier_cluster, "st.async": build_st_async,
            "red.async": build_red_async}
