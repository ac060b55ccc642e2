"""The multi-stage cp.async pipeline of the sm_80-style lowerings (mma_matmul.py,
mma_attention.py): `stages` shared-memory slots, one commit group per block.

The prologue issues blocks 0 .. stages-2 (one group each, an empty one past the last block);
block kb waits until at most stages-2 groups are pending (block kb has landed), bar.syncs (every
warp is done with block kb-1, whose slot is refilled next), issues block kb+stages-1 into that
slot and commits (an empty group past the end keeps the count), then computes block kb. Slots
are byte offsets from the start of shared memory: slot0, slot0 + slot_bytes, ...
"""
from ..ir import types as T


def cp_async_ring(b, stages, nblocks, slot0, slot_bytes, load, compute, after_prologue=None,
                  sync=None, guard_load=True):
    """Emit the pipeline over `nblocks` (a u32 register) blocks. load(kb, slot) issues block
    kb's copies into the slot at byte offset `slot` (registers; called predicated on kb being
    a real block); compute(kb, slot) consumes it; after_prologue() runs between the prologue
    and the loop. guard_load=False: load(kb, slot, live) is called unguarded with the
    predicate `live` (kb is a real block) and guards its own copies. sync() replaces the CTA's bar.sync (a warp's own ring: bar.warp.sync).
    Leaves no copy in flight."""
    for st in range(stages - 1):
        live = b.setp("lt", b.const(st, T.u32, name="kp"), nblocks)
        if guard_load:
            with b.predicated(live):
                load(b.const(st, T.u32, name="kb"), b.const(slot0 + st * slot_bytes, T.u32,
                                                            name="slot"))
        else:
            load(b.const(st, T.u32, name="kb"), b.const(slot0 + st * slot_bytes, T.u32,
                                                        name="slot"), live)
        b.cp_async_commit()
    if after_prologue is not None:
        after_prologue()
    rd = b.const(slot0, T.u32, name="rd")                                  # slot read
    wr = b.const(slot0 + (stages - 1) * slot_bytes, T.u32, name="wr")     # slot written
    with b.for_range(0, nblocks, type=T.u32, name="kb") as kb:
        b.cp_async_wait(stages - 2)
        if sync is None:
            b.bar_sync(0)
        else:
            sync()
        nxt = b.add(kb, stages - 1, name="knext")
        live = b.setp("lt", nxt, nblocks)
        if guard_load:
            with b.predicated(live):
                load(nxt, wr)
        else:
            load(nxt, wr, live)
        b.cp_async_commit()
        compute(kb, rd)
        for r in (rd, wr):
            b.add(r, slot_bytes, out=r)
            with b.predicated(b.setp("eq", r, slot0 + stages * slot_bytes)):
                b.mov(slot0, type=T.u32, out=r)
    b.cp_async_wait(0)
