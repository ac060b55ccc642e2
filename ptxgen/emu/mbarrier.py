"""mbarrier: phases, arrival counts and transaction bytes, and threads that wait on them.

A barrier is keyed by its byte in the batch's shared buffer (so one per CTA and address); an
address may be another CTA's of the cluster (a shared::cluster address from mapa: a remote
arrive, or a multicast TMA completing on each destination CTA — emu.cluster). Its
state is the one the PTX ISA describes (9.7.13.15.1): the expected arrival count, the pending
arrivals and transaction count of the phase in progress, and the number of completed phases. A
phase completes when its pending arrivals and its transaction count are both zero; then the
next phase starts with the expected count again. The 64-bit state token arrive returns is the
phase number it arrived in.

try_wait (and try_wait.parity) by a thread whose phase has not completed makes the thread wait
at the instruction (the executor's WAIT op kind): it leaves the runnable lanes and comes back,
to execute the try_wait again, when the phase completes — what the hardware's suspend and retry
loop amounts to. When no thread can run and some wait on a barrier, that is a deadlock, reported
with the barrier, its state and the waiting threads (never a hang).
"""
import numpy as np

from ..errors import EmulationError
from ..ir.values import Reg
from . import cluster, memops
from .compiled_op import WAIT

_U64 = np.dtype(np.uint64)


class Barrier:
    __slots__ = ("expected", "pending", "tx", "phase", "addr")

    def __init__(self, count, addr):
        self.expected = self.pending = int(count)
        self.tx, self.phase, self.addr = 0, 0, addr

    def settle(self, st):
        """Complete the phase when nothing is pending. Completion orders the arrivers' earlier
        accesses before the waiters' later ones, so the racecheck forgets the accesses since its
        last barrier (leniently: of every thread of the batch)."""
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected
            if st.shadow is not None:
                st.shadow.barrier()

    def describe(self):
        return (f"phase {self.phase}: {self.pending} of {self.expected} arrivals pending, "
                f"{self.tx} transaction bytes pending")


def barriers(st):
    b = getattr(st, "mbarriers", None)
    if b is None:
        b = st.mbarriers = {}
    return b


def _fail(ctx, st, lane, why):
    raise EmulationError(f"kernel {ctx.prog.name}: `{str(ctx.ins).split('  //')[0]}` at "
                         f"{_where(ctx)} by {st.block_name(lane)} {st.thread_name(lane)}: {why}")


def _where(ctx):
    return f"PTX line {ctx.ins.line}" if ctx.ins.line else f"instruction {ctx.index}"


def key_of(ctx, st, lane, addr):
    """The barrier's key: its byte in the batch's shared buffer, for a shared::cta address of
    lane's CTA or a shared::cluster address of any CTA of its cluster (emu.cluster)."""
    base, off = cluster.split(st, lane, addr, lambda why: _fail(ctx, st, lane, why))
    return base + off


def lookup(ctx, st, lane, addr):
    """The Barrier at shared address `addr` of `lane` (EmulationError if uninitialized)."""
    b = barriers(st).get(key_of(ctx, st, lane, addr))
    if b is None:
        _fail(ctx, st, lane, f"no mbarrier initialized at shared address {int(addr):#x}")
    return b


def _addresses(ctx, ins, a):
    # .shared / .shared::cta: a shared-window address; no space: a generic one
    generic = not any(m.startswith("shared") for m in ins.mods)
    f = memops.address_fetch(ctx, a, "generic" if generic else "shared")

    def get(st, lanes):
        v = np.asarray(f(st))
        v = np.broadcast_to(v, (st.n,))[lanes] if v.ndim == 0 else v[lanes]
        v = v.astype(_U64)
        if generic:
            from .memory import SHARED_WINDOW
            v = v - np.uint64(SHARED_WINDOW)
        return v
    return get


def _lanes(st, m):
    return np.arange(st.n) if m is None else np.flatnonzero(m)


def build_mbarrier(ctx, ins):
    sub = ins.mods[0] if ins.mods else ""
    ops = ins.operands
    if sub == "init":
        return _build_init(ctx, ins, ops)
    if sub == "inval":
        addr = _addresses(ctx, ins, ops[0])

        def inval(st, m):
            lanes = _lanes(st, m)
            for lane, a in zip(lanes, addr(st, lanes)):
                barriers(st).pop(key_of(ctx, st, lane, a), None)
        return inval
    if sub == "expect_tx":
        return _build_arrive(ctx, ins, None, ops[0], None, ops[1])
    if sub == "arrive":
        if "expect_tx" in ins.mods:
            return _build_arrive(ctx, ins, ops[0], ops[1], None, ops[2], arrive=True)
        count = ops[2] if len(ops) > 2 else None
        return _build_arrive(ctx, ins, ops[0], ops[1], count, None, arrive=True)
    if sub in ("try_wait", "test_wait"):
        return _build_wait(ctx, ins, ops, blocking=sub == "try_wait")
    ctx.fail(f"mbarrier.{sub} is not emulated")


def _build_init(ctx, ins, ops):
    addr = _addresses(ctx, ins, ops[0])
    count = ctx.read(ops[1], np.uint32)

    def init(st, m):
        lanes = _lanes(st, m)
        c = np.broadcast_to(np.asarray(count(st)), (st.n,))[lanes]
        for lane, a, k in zip(lanes, addr(st, lanes), c):
            if int(a) % 8:
                _fail(ctx, st, lane, f"mbarrier address {int(a):#x} is not 8-byte aligned")
            if not 1 <= int(k) < (1 << 20):
                _fail(ctx, st, lane, f"mbarrier count {int(k)} is outside 1..2^20-1")
            barriers(st)[key_of(ctx, st, lane, a)] = Barrier(k, int(a))
    return init


def _build_arrive(ctx, ins, dst, a, count, tx, arrive=False):
    addr = _addresses(ctx, ins, a)
    cf = ctx.read(count, np.uint32) if count is not None else None
    tf = ctx.read(tx, np.uint32) if tx is not None else None
    w = ctx.write_lanes(dst) if isinstance(dst, Reg) else None

    def fn(st, m):
        lanes = _lanes(st, m)
        if not lanes.size:
            return
        addrs = addr(st, lanes)
        cs = np.broadcast_to(np.asarray(cf(st)), (st.n,))[lanes] if cf else None
        ts = np.broadcast_to(np.asarray(tf(st)), (st.n,))[lanes] if tf else None
        tokens = np.zeros(lanes.size, _U64)
        for j, lane in enumerate(lanes):
            b = lookup(ctx, st, lane, addrs[j])
            if ts is not None:
                b.tx += int(ts[j])
            tokens[j] = b.phase
            if arrive:
                b.pending -= int(cs[j]) if cs is not None else 1
                if b.pending < 0:
                    _fail(ctx, st, lane, f"more arrivals than the mbarrier at "
                                         f"{b.addr:#x} expects ({b.describe()})")
            b.settle(st)
        if w is not None:
            w(st, lanes, tokens)
    return fn


def complete_tx(ctx, st, lane, addr, nbytes):
    """An asynchronous copy delivered nbytes for the mbarrier at CTA shared address addr."""
    b = lookup(ctx, st, lane, addr)
    b.tx -= int(nbytes)
    b.settle(st)


def _build_wait(ctx, ins, ops, blocking):
    parity = "parity" in ins.mods
    addr = _addresses(ctx, ins, ops[1])
    token = ctx.read(ops[2], np.uint32 if parity else np.uint64)
    w = ctx.write_lanes(ops[0])

    def done(b, t):
        if parity:                     # the phase of that parity has completed
            return (b.phase & 1) != (int(t) & 1)
        return b.phase > int(t)

    def fn(st, m):
        lanes = _lanes(st, m)
        if not lanes.size:
            return
        addrs = addr(st, lanes)
        ts = np.broadcast_to(np.asarray(token(st)), (st.n,))[lanes]
        ok = np.zeros(lanes.size, bool)
        keys = np.zeros(lanes.size, np.int64)
        for j, lane in enumerate(lanes):
            b = lookup(ctx, st, lane, addrs[j])
            ok[j] = done(b, ts[j])
            keys[j] = key_of(ctx, st, lane, addrs[j])
        w(st, lanes, ok)
        if blocking and not ok.all():
            blocked = np.zeros(st.n, bool)
            blocked[lanes[~ok]] = True
            st.wait_blocked = blocked
            waits = wait_table(st)
            for lane, key, t in zip(lanes[~ok], keys[~ok], ts[~ok]):
                waits[int(lane)] = (int(key), lambda b, t=t: done(b, t), ctx)
    if blocking:
        fn.op_kind = WAIT
    return fn


def wait_table(st):
    t = getattr(st, "mbarrier_waits", None)
    if t is None:
        t = st.mbarrier_waits = {}
    return t


def release_ready(st):
    """Lanes whose awaited phase has completed (bool per lane), forgotten from the table."""
    waits = wait_table(st)
    out = np.zeros(st.n, bool)
    table = barriers(st)
    for lane, (key, ready, _) in list(waits.items()):
        b = table.get(key)
        if b is not None and ready(b):
            out[lane] = True
            del waits[lane]
    return out


def deadlock(st, blocked):
    """The EmulationError for lanes that wait forever."""
    waits = wait_table(st)
    lanes = np.flatnonzero(blocked)
    by_key = {}
    for lane in lanes:
        key, _, ctx = waits[int(lane)]
        by_key.setdefault(key, []).append(int(lane))
    parts = []
    for key, ls in by_key.items():
        b = barriers(st).get(key)
        ctx = waits[ls[0]][2]
        if isinstance(b, cluster.ClusterBarrier):
            what, state = b.name, b.describe(st)
        else:
            state = b.describe() if b is not None else "invalidated"
            addr = b.addr if b is not None else key - int(st.shared.base[ls[0]])
            what = f"the mbarrier at shared address {addr:#x}"
        parts.append(f"{len(ls)} thread(s) — {st.block_name(ls[0])} {st.thread_name(ls[0])}"
                     f"{' and others' if len(ls) > 1 else ''} — wait at "
                     f"`{str(ctx.ins).split('  //')[0]}` ({_where(ctx)}) on {what} ({state})")
    return EmulationError(f"kernel {st.prog.name}: deadlock: no thread can run and "
                          + "; ".join(parts) + "; nothing left can complete the phase")


# every mbarrier row of the opcode table (ptxgen/ir/opcodes.py) has its own key; one builder
# dispatches on the operation
BUILDERS = {key: build_mbarrier for key in (
    "mbarrier.init", "mbarrier.inval", "mbarrier.arrive", "mbarrier.expect_tx",
    "mbarrier.complete_tx", "mbarrier.test_wait", "mbarrier.try_wait", "mbarrier.pending_count")}
