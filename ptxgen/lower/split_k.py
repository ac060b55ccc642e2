"""Split-K for the sm_90a tensor-core GEMM (lower/tc_matmul.py): skinny shapes (decode, M of a
few rows against wide weights) have fewer C tiles than SMs, so each tile's K loop is cut into
`split_k` pieces and the persistent CTAs walk (tile, piece) units, all SMs streaming weights.

Reduction, deterministic and in the same launch (no second kernel): every warp of a consumer
stores its piece's accumulators to a workspace of f32 partials in its own fragment order (lane
after lane, 16 bytes each: coalesced), then counts itself on a counter of its (tile, consumer,
warp) with atom.add.acq_rel.gpu; the warp that sees split_k - 1 arrivals before it is the last
of the tile's pieces: it reads all split_k partials back in piece order 0, 1, ... and sums them
(so the result never depends on which piece finished last), zeroes the counter for the next
launch and stores C with the usual epilogue. Warps whose rows all lie past M store and read no
partials. Each lane fences its stores (fence.acq_rel.gpu) before the warp syncs and lane 0
counts, and fences again after the count before reading (bar.warp.sync carries the order
between lanes), the partials bypass L1 (.cg).

Workspace: partials (f32, units x consumers x 4 warps x acc_regs x 32 lanes) and counters (u32,
tiles x consumers x 4, zero before the first launch; the kernel leaves them zero).
"""
from ..ir import Addr, Imm
from ..ir import types as T
from ..ir.instr import Instr
from ..schedule.tc_matmul import WARPGROUP, WGMMA_M

FULL_MASK = 0xFFFFFFFF


def split_k_params(s):
    from ..ir import Param, ptr
    if getattr(s, "split_k", 1) == 1:
        return []
    return [Param("partials", T.u64, ptr(T.f32, align=16)), Param("counters", T.u64, ptr(T.u32))]


def split_k_workspace(s, tiles):
    """{name: (shape, numpy dtype name)} of split-K's workspace for `tiles` C tiles (none for
    a schedule without split_k, an sm_80 one included)."""
    if getattr(s, "split_k", 1) == 1:
        return {}
    warps = tiles * s.consumers * (WARPGROUP // 32)
    return {"partials": ((warps * s.split_k, s.acc_regs * 32), "float32"),
            "counters": ((warps,), "uint32")}


class SplitK:
    """Mixin of the lowering: self.b, self.s, self.M, self.kblocks, self.ntiles."""

    def units(self):
        """Work units the persistent CTAs walk: tiles x split_k pieces."""
        s = self.s
        return self.ntiles if s.split_k == 1 else self.b.mul(self.ntiles, s.split_k,
                                                            name="units")

    def unit_tile(self, unit):
        """(tile, piece) of a work unit (the piece is None without split-K)."""
        s = self.s
        if s.split_k == 1:
            return unit, None
        tile = self.b.div(unit, s.split_k, name="utile")
        return tile, self.b.sub(unit, self.b.mul(tile, s.split_k), name="piece")

    def k_range(self, piece):
        """[lo, hi) of the k-blocks of a piece: ceil(kblocks / split_k) each, the last ones
        possibly short or empty."""
        b, s = self.b, self.s
        if piece is None:
            return 0, self.kblocks
        per = b.div(b.add(self.kblocks, s.split_k - 1), s.split_k, name="kper")
        lo = b.min(b.mul(piece, per), self.kblocks, name="klo")
        return lo, b.min(b.add(lo, per), self.kblocks, name="khi")

    def split_k_fixup(self, acc, cw, t, tile, piece, m0, skip):
        """Store this warp's partials, count it, and branch to `skip` unless it is the tile's
        last piece; the last one leaves the sum of all pieces (in piece order) in acc."""
        b, s = self.b, self.s
        lane = b.and_(t, 31, name="lane")
        warp = b.shr(t, 5, name="warp")
        slot = b.mad(b.mad(tile, s.consumers, cw, name="tcw"), WARPGROUP // 32, warp,
                     name="wslot")
        regs = [r for mb in acc for nb in mb for r in nb]
        per_mb = len(regs) // s.m_blocks
        stride = s.acc_regs * 32 * 4                   # bytes of one warp's partials
        first_row = b.add(b.mad(cw, s.rows_per_consumer, m0), b.shl(warp, 4), name="wrow")
        live = [b.setp("lt", b.add(first_row, mb * WGMMA_M), self.M, name="live")
                for mb in range(s.m_blocks)]
        lane_off = b.shl(lane, 4, name="loff")
        parts = b.param("partials")

        def base(pc):
            """Address of (this warp, piece pc)'s partials, this lane's first 16 bytes."""
            w = b.mad(slot, s.split_k, pc, name="pslot")
            return b.add(b.add(parts, b.mul(w, stride, mode="wide", type=T.u32), type=T.u64),
                         b.cvt(T.u64, lane_off), type=T.u64, name="pbase")

        def each_quad(fn):
            for mb in range(s.m_blocks):
                with b.predicated(live[mb]):
                    for q in range(per_mb // 4):
                        j = mb * per_mb + 4 * q
                        fn(j, regs[j:j + 4])

        mine = base(piece)
        each_quad(lambda j, quad: b.st("global", Addr(mine, (j // 4) * 512), quad, cache="cg"))
        b.emit(Instr("fence", ("acq_rel", "gpu")))
        b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))
        counter = b.element_addr(b.param("counters"), slot, 4, name="ctr")
        old = b.reg(T.u32, "arrived")
        b.mov(0, type=T.u32, out=old)
        with b.predicated(b.setp("eq", lane, 0)):
            b.emit(Instr("atom", ("acq_rel", "gpu", "global", "add", "u32"),
                         (old, Addr(counter), Imm(1, T.u32))))
        seen = b.reg(T.u32, "seen")
        b.emit(Instr("shfl", ("sync", "idx", "b32"),
                     (seen, old, Imm(0, T.b32), Imm(0x1F, T.b32), Imm(FULL_MASK, T.b32))))
        b.branch(skip, b.setp("ne", seen, s.split_k - 1))
        with b.predicated(b.setp("eq", lane, 0)):
            b.st("global", Addr(counter), Imm(0, T.u32), type=T.u32)    # for the next launch
        b.emit(Instr("fence", ("acq_rel", "gpu")))
        for pc in range(s.split_k):
            src = base(pc)

            def add(j, quad, src=src, pc=pc):
                got = b.ld("global", T.f32, Addr(src, (j // 4) * 512), vec=4, cache="cg",
                           name="part")
                for r, g in zip(quad, got):
                    if pc == 0:
                        b.mov(g, type=T.f32, out=r)
                    else:
                        b.add(r, g, type=T.f32, out=r)
            each_quad(add)
