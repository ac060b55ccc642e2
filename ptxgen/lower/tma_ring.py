"""A warp-specialized sm_90a kernel's shared-memory ring and roles (the attention forward,
lower/attention.py, and backward, lower/attention_backward_wgmma.py): one producer warpgroup
loads a CTA's own tiles once and streams tiles into `stages` slots by TMA; consumer warpgroups
wait on a slot's full barrier and hand it back on its empty barrier.

A mixin. The lowering provides b (the Builder), s (a schedule with stages, consumers,
producer_regs and consumer_regs), producer() and consumer(cw, t)."""
from ..ir import Addr
from ..ir import types as T
from ..schedule.attention import COL_BLOCK
from ..schedule.tc_matmul import SWIZZLE_ATOM_BYTES, WARPGROUP


class TmaRing:
    def ring_layout(self, tid, own_bytes, slot_bytes, ring_name, own_release=False):
        """self.base (1024-byte aligned for the swizzle), the own tiles there, self.stage0 (the
        slots, slot_bytes each) and self.bars: the own tiles' barrier, then a full and an
        empty barrier per slot, initialised by thread 0; own_release: after them the barrier
        on which the consumers hand the own tiles back (self.own_empty, a persistent CTA's)."""
        b, s = self.b, self.s
        raw = b.address_of(b.dynamic_shared("smem", align=SWIZZLE_ATOM_BYTES))
        self.base = b.and_(b.add(raw, SWIZZLE_ATOM_BYTES - 1), -SWIZZLE_ATOM_BYTES & 0xFFFFFFFF,
                           name="base")
        self.stage0 = b.add(self.base, own_bytes, name=ring_name)
        self.bars = b.add(self.stage0, s.stages * slot_bytes, name="bars")
        with b.if_(b.setp("eq", tid, 0)):
            b.mbarrier_init(self.bars, 1)                             # own tiles arrived
            for st in range(s.stages):
                b.mbarrier_init(Addr(self.bars, 8 + 8 * st), 1)
                b.mbarrier_init(Addr(self.bars, 8 * (1 + s.stages + st)), s.consumers)
            if own_release:
                b.mbarrier_init(Addr(self.bars, 8 * (1 + 2 * s.stages)), s.consumers)
            b.fence_mbarrier_init()
        if own_release:
            self.own_empty = b.add(self.bars, 8 * (1 + 2 * s.stages), name="qempty")

    def split_roles(self, tid, wg):
        """Warpgroup 0's thread 0 produces (the others of it leave), the rest consume, each
        with its setmaxnreg share."""
        b, s = self.b, self.s
        consumer, end = b.new_label("consumer"), b.new_label("done")
        b.branch(consumer, b.setp("ne", wg, 0))
        b.setmaxnreg(s.producer_regs, inc=False)
        b.branch(end, b.setp("ne", tid, 0))
        self.producer()
        b.branch(end)
        b.label(consumer)
        b.setmaxnreg(s.consumer_regs, inc=True)
        self.consumer(b.sub(wg, 1, name="cw"), b.and_(tid, WARPGROUP - 1, name="t"))
        b.label(end)
        b.ret()

    def full_bar(self, stage):
        return self.b.mad(stage, 8, self.b.add(self.bars, 8), name="full")

    def empty_bar(self, stage):
        return self.b.mad(stage, 8, self.b.add(self.bars, 8 * (1 + self.s.stages)),
                          name="empty")

    def advance(self, stage, phase):
        """The next slot, and the phase flipped when the ring wraps."""
        b = self.b
        b.add(stage, 1, out=stage)
        with b.predicated(b.setp("eq", stage, self.s.stages)):
            b.mov(0, type=T.u32, out=stage)
            b.xor(phase, 1, out=phase)

    def map_col(self, col0, h):
        """The maps' column coordinate of D's column block h (col0: a register added for
        packed rows, or None)."""
        return h * COL_BLOCK if col0 is None else self.b.add(col0, h * COL_BLOCK, name="mcol")
