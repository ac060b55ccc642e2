"""C stored from the staged shared tile by rows with st.global (TcMatmulSchedule.c_store
"rows_st"): for C rows that are not 16-byte aligned, where TMA cannot store (a TMA box starting
off a 16-byte boundary along the row is an illegal instruction on the H200).

A mixin of the sm_90a GEMM lowering (tc_matmul._Lowering): it provides self.b, self.s,
self.out, self.even_n, self.cbuf, self.M, self.N and stage_bf16 / stage_f32, which write a
consumer's C rows into swizzled boxes of 128-byte rows (the layout the "tile" kind stores by TMA).

Each warp stores exactly the rows its own stmatrix / 8-byte shared stores wrote (rows 16w..16w+15
of every 64-row wgmma block), so a warp barrier orders the staging and the reads, and the next
tile's staging after the reads: the consumer warpgroup never waits on its other warps. A warp
walks one row at a time, each lane storing pairs of adjacent elements (4 bytes bf16, 8 bytes f32:
128 or 256 contiguous bytes per warp instruction). A pair is aligned when the row's first element
is: C's base holds whole pairs, so row r starts on a pair boundary where r*N is even. At odd N
every other row starts half a pair off: there lane 0 stores element 0 alone, pairs start at
element 1, and the row's last element is stored alone (lane 1). Rows within the warp's 16
alternate, so whether a row is shifted is known when the kernel is built (N's parity is part of
the shape the kernel is specialized for).
"""
import contextlib

from ..ir.builder import pow2_exponent
from ..ir import Addr, Imm, Vec
from ..ir import types as T
from ..ir.instr import Instr
from ..schedule.tc_matmul import OUT_BYTES, SWIZZLE_BYTES, WGMMA_M

ROWS_PER_WARP = 16         # rows of a 64-row wgmma block one warp's fragments (and stmatrix) hold
PAIRS_PER_STEP = 32        # one pair per lane: 64 elements of a row per warp instruction
FULL_MASK = 0xFFFFFFFF


class RowStores:
    def rows_st_epilogue(self, acc, cw, t, m0, n0):
        """Stage this consumer's rows of the tile, then copy them to C. The stores are issued
        and left to drain while the consumer goes on to the next tile's mainloop (the producer
        is already filling its slots); the warp barrier before the next staging orders it
        after this tile's shared reads."""
        b, s = self.b, self.s
        rows, ob = s.rows_per_consumer, OUT_BYTES[self.out]
        box_bytes = rows * SWIZZLE_BYTES
        region = b.mad(cw, rows * s.BN * ob, self.cbuf, name="creg")
        self._warp_sync()                        # every lane has read the last tile's rows
        if self.out == "bf16":
            self.stage_bf16(acc, t, region, box_bytes)
        else:
            self.stage_f32(acc, t, region, box_bytes)
        self._warp_sync()                        # the warp's rows are in shared memory
        self._copy_rows(cw, t, m0, n0, region, box_bytes)

    def _warp_sync(self):
        self.b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))

    def _copy_rows(self, cw, t, m0, n0, region, box_bytes):
        b, s = self.b, self.s
        ob = OUT_BYTES[self.out]
        box_cols = SWIZZLE_BYTES // ob
        lane = b.and_(t, 31, name="lane")
        wrow = b.shl(b.shr(t, 5), pow2_exponent(ROWS_PER_WARP), name="wrow")   # the warp's first row
        rbase = b.mad(wrow, SWIZZLE_BYTES, region, name="rbase")
        two_l = b.shl(lane, 1, name="twol")

        def unswizzled(c):
            """Shared address of element c (a register) of the warp's first row before the
            swizzle: its box, then its byte in the box row."""
            x = b.shl(b.and_(c, box_cols - 1), pow2_exponent(ob))
            return b.add(rbase, b.mad(b.shr(c, pow2_exponent(box_cols)), box_bytes, x), name="sel")

        odd = not self.even_n
        bases = {0: unswizzled(two_l)}           # pair of elements 2L, 2L+1 (one 16-byte chunk)
        grow0 = b.add(b.mad(cw, s.rows_per_consumer, m0), wrow, name="grow0")
        C = b.param("C")
        g = b.element_addr(C, b.mad(grow0, self.N, b.add(n0, two_l)), ob, name="gpair")
        nv = b.min(b.sub(self.N, n0), s.BN, name="nv")        # the tile's columns inside C
        if odd:
            bases[2] = unswizzled(b.add(two_l, 2))           # element 2L+2: a shifted pair's end
            bases["2w"] = unswizzled(b.and_(b.add(two_l, 2), 2 * PAIRS_PER_STEP - 1))
            # lane 0: element 0 of a shifted row; lane 1: the row's last element when alone
            lane1 = b.setp("eq", lane, 1)
            ex = b.selp(b.sub(nv, 1), 0, lane1, type=T.u32, name="ex")
            bases["x"] = unswizzled(ex)
            gx = b.element_addr(C, b.mad(grow0, self.N, b.add(n0, ex)), ob, name="gx")
            nv_odd = b.setp("ne", b.and_(nv, 1), 0, name="nvodd")
            nv_even = b.setp("eq", b.and_(nv, 1), 0, name="nveven")
            lane0 = b.setp("eq", lane, 0)
            # unshifted rows: a last element alone when nv is odd; shifted: element 0, and the
            # last one when nv is even
            self._alone = (b.and_(lane1, nv_odd),
                           b.or_(lane0, b.and_(lane1, nv_even)))
        else:
            gx = None
        ldc = b.mul(self.N, ob, mode="wide", type=T.u32, name="ldc")
        inside = b.and_(b.setp("le", b.add(m0, s.BM), self.M),
                        b.setp("le", b.add(n0, s.BN), self.N), name="inside")
        edge, done = b.new_label("redge"), b.new_label("rdone")
        b.branch(edge, inside, negate=True)
        last = b.setp("ne", lane, 31, name="notlast") if odd else None
        self._row_pass(bases, g, gx, ldc, box_bytes, last=last)
        b.branch(done)
        b.label(edge)
        q = b.sub(b.sub(nv, two_l), 1, type=T.s32, name="q")   # pair u fits: q > 64i + shift
        row_left = b.sub(self.M, grow0, type=T.s32, name="rleft")
        self._row_pass(bases, g, gx, ldc, box_bytes, q=q, row_left=row_left, done=done)
        b.label(done)

    def _row_pass(self, bases, g, gx, ldc, box_bytes, last=None, q=None, row_left=None,
                  done=None):
        """Every row of the warp: full tiles (last: lane 31's pair of a shifted row is past
        the row) or edge tiles (q: the pairs inside C's columns; rows from row_left on end
        the pass)."""
        b, s = self.b, self.s
        ob = OUT_BYTES[self.out]
        step = (2 * PAIRS_PER_STEP // (SWIZZLE_BYTES // ob)) * box_bytes   # 64 elements on
        steps = s.BN // (2 * PAIRS_PER_STEP)
        odd = not self.even_n
        # grow: the row's first pair; a shifted row's pairs start one element later
        down, up = (b.sub(ldc, ob, name="ldcdn"), b.add(ldc, ob, name="ldcup")) if odd else \
            (ldc, ldc)
        for mb in range(s.m_blocks):
            base_row = mb * WGMMA_M
            grow = b.add(g, b.mul(ldc, base_row, type=T.u64), name="grow") if mb else \
                b.mov(g, name="grow")
            gxr = (b.add(gx, b.mul(ldc, base_row, type=T.u64), name="gxrow") if mb else
                   b.mov(gx, name="gxrow")) if odd else None
            # a loop over the warp's rows two at a time (unshifted, shifted): unrolled, the
            # swizzled addresses of 8 rows would be hoisted out of the tile loop by ptxas and
            # spill the accumulators
            with b.for_range(0, ROWS_PER_WARP // 2, type=T.u32, name="rp") as rp:
                soff = b.mad(rp, 2 * SWIZZLE_BYTES, base_row * SWIZZLE_BYTES, name="soff")
                # the 128-byte swizzle XORs the 16-byte chunk with the row's low 3 bits (the
                # region is 1024-byte aligned, the warp's first row a multiple of 8; fragments.
                # swizzle): bits 4-6 of the row's offset, applied after adding it
                mask = b.and_(b.shr(soff, 3), 0x70, name="swm")
                for e in (0, 1):
                    rs = b.add(b.shl(rp, 1), base_row + e, name="rs")
                    if row_left is not None:           # rows past M: none of the rest is in C
                        b.branch(done, b.setp("le", row_left, rs, type=T.s32))
                    if e:
                        b.add(grow, up, out=grow)
                        if odd:
                            b.add(gxr, ldc, out=gxr)
                    shift = e if odd else 0
                    xored = {key: b.xor(b.add(base, soff), mask if not e else
                                        b.or_(mask, 0x10), name="sa")
                             for key, base in bases.items() if shift or key in (0, "x")}
                    roff = e * SWIZZLE_BYTES
                    for i in range(steps):
                        ok = None
                        if q is not None:
                            ok = b.setp("gt", q, 2 * PAIRS_PER_STEP * i + shift, type=T.s32)
                        elif shift and i == steps - 1:
                            ok = last
                        # lane 31's last shifted pair would end past the row: its load
                        # wraps to the row's start (read, not stored)
                        hi = "2w" if i == steps - 1 else 2
                        self._pair(xored, hi, roff + i * step, shift, grow,
                                   2 * PAIRS_PER_STEP * i * ob, ok)
                    if odd:
                        v = b.ld("shared", self._elem_t(), Addr(xored["x"], roff), name="cv")
                        with b.predicated(self._alone[shift]):
                            b.st("global", Addr(gxr, 0), v)
                b.add(grow, down, out=grow)
                if odd:
                    b.add(gxr, ldc, out=gxr)

    def _elem_t(self):
        return T.b16 if self.out == "bf16" else T.f32

    def _pair(self, xored, hi_key, soff, shift, grow, goff, ok):
        """One lane's pair: unshifted, one shared load of both elements; shifted, the two
        elements (one chunk's last, the next element's chunk) loaded apart and packed. The
        loads stay inside the warp's own staged row whether or not the pair is stored (ok),
        so only the store is predicated: no divergent branch around them."""
        b = self.b
        ob = OUT_BYTES[self.out]
        if not shift:
            a = Addr(xored[0], soff)
            v = b.ld("shared", T.b32, a, name="cp") if self.out == "bf16" else \
                b.ld("shared", T.f32, a, vec=2, name="cp")
        else:
            lo = b.ld("shared", self._elem_t(), Addr(xored[0], soff + ob), name="cl")
            hi = b.ld("shared", self._elem_t(), Addr(xored[hi_key], soff), name="ch")
            v = b.mov(Vec((lo, hi)), type=T.b32, name="cp") if self.out == "bf16" else \
                (lo, hi)
        with (b.predicated(ok) if ok is not None else contextlib.nullcontext()):
            b.st("global", Addr(grow, goff), v)
