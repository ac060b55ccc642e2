"""C stored through shared memory and TMA (the staged epilogue of the sm_90a GEMM): each
consumer writes its rows of the C tile into swizzled boxes of 128-byte rows and the boxes are
stored by TMA, which clips the tile at M and N (TcMatmulSchedule.epilogue "tma").

A mixin of the sm_90a GEMM lowering (tc_matmul._Lowering): it uses self.b, self.s, self.out,
self.cbuf, self.M, self.N and the row-store path of c_row_stores.RowStores for C rows that are
not 16-byte aligned."""
import contextlib

from ..ir import Addr, Imm
from ..ir import types as T
from ..ir.instr import Instr
from ..schedule.tc_matmul import OUT_BYTES, SWIZZLE_BYTES, WARPGROUP, WGMMA_M


class StagedStores:
    def staged_epilogue(self, acc, cw, t, leader, m0, n0):
        """C through shared memory: each consumer writes its rows of the C tile into boxes of
        128-byte rows (64 bf16 or 32 f32 columns) in the 128-byte swizzle C's tensor map reads
        (a bf16 C rounded to pairs and written with stmatrix, an f32 C pair by pair with 8-byte
        stores: 2 wavefronts per warp store, the minimum) and stores the boxes with TMA, which
        also clips the tile at M and N. "tile": one thread stores 2-D boxes. "rows" (C's rows
        not 16-byte aligned, so no 2-D map): every thread stores its row's 128-byte pieces
        through the flat view of C (start element row*N + col: TMA takes unaligned
        coordinates; the shared source, 128-byte aligned, swizzled by its address bits as the
        2-D boxes are); tiles of the last, partial tile column go the fragment way. The stores
        run on while the next tile's loop starts; the buffer is reused only once they have
        been read (wait_group.read)."""
        b, s = self.b, self.s
        by_rows = self.staged == "rows"
        if by_rows:
            full, done = b.new_label("rowsfull"), b.new_label("rowsdone")
            b.branch(full, b.setp("le", b.add(n0, s.BN), self.N))
            self.epilogue(acc, cw, t, m0, n0)
            b.branch(done)
            b.label(full)
        rows, ob = s.rows_per_consumer, OUT_BYTES[self.out]
        box_cols = SWIZZLE_BYTES // ob                            # C columns per box row
        box_bytes = rows * SWIZZLE_BYTES
        region = b.mad(cw, rows * s.BN * ob, self.cbuf, name="creg")
        threads = Imm(WARPGROUP, T.u32)
        bar_id = b.add(cw, 1, name="cbar")       # named barrier 1 + cw: this warpgroup only
        with (contextlib.nullcontext() if by_rows else b.predicated(leader)):
            b.cp_async_bulk_wait_group(0, read=True)              # the last stores have read
        b.emit(Instr("bar", ("sync",), (bar_id, threads)))
        if self.out == "bf16":
            self.stage_bf16(acc, t, region, box_bytes)
        else:
            self.stage_f32(acc, t, region, box_bytes)
        b.fence_proxy_async()                    # shared writes before the async-proxy reads
        b.emit(Instr("bar", ("sync",), (bar_id, threads)))
        r0 = b.mad(cw, rows, m0, name="crow")
        if not by_rows:
            with b.predicated(leader):
                for cb in range(s.BN // box_cols):
                    b.cp_async_bulk_tensor_store(
                        self.cmap, (b.add(n0, cb * box_cols, name="ccol"), r0),
                        b.add(region, cb * box_bytes, name="csrc"))
                b.cp_async_bulk_commit_group()
            return
        zero = b.const(0, T.u32, name="z")
        for r in range(0, rows, WARPGROUP):         # thread t stores rows t, t + 128, ...
            part = rows - r < WARPGROUP
            with (b.predicated(b.setp("lt", t, rows - r)) if part else contextlib.nullcontext()):
                tr = b.add(t, r, name="tr")
                flat = b.mad(b.add(r0, tr, name="grow"), self.N, n0, name="flat")
                src = b.mad(tr, SWIZZLE_BYTES, region, name="rsrc")
                for cb in range(s.BN // box_cols):
                    b.cp_async_bulk_tensor_store(self.cmap, (b.add(flat, cb * box_cols), zero),
                                                 b.add(src, cb * box_bytes, name="csrc"))
        b.cp_async_bulk_commit_group()
        b.label(done)

    def stage_bf16(self, acc, t, region, box_bytes):
        """stmatrix.x4 of bf16 pairs: 16 columns (two 16-byte chunks) of 16 rows per warp."""
        b, s = self.b, self.s
        lane = b.and_(t, 31, name="lane")
        q = b.shr(lane, 3, name="q")                              # the matrix this lane addresses
        r8 = b.and_(lane, 7, name="r8")
        # row of the addressed matrix: 16 per warp, +8 for matrices 1 and 3
        row = b.add(b.shl(b.shr(t, 5), 4), b.add(b.shl(b.and_(q, 1), 3), r8), name="srow")
        rowbase = b.mad(row, SWIZZLE_BYTES, region, name="rowb")
        sw = b.xor(b.shr(q, 1), r8, name="sw")                    # chunk bit 0 and the row's XOR
        chunk_addr = {c0: b.add(rowbase, b.shl(b.xor(sw, c0), 4), name="caddr")
                      for c0 in range(0, 8, 2)}
        for mb in range(s.m_blocks):
            for nb in range(s.n_blocks):
                for j in range(0, s.wgmma_n // 8, 2):
                    col = nb * s.wgmma_n + 8 * j
                    regs = [b.cvt_pack("bf16x2", acc[mb][nb][i + 1], acc[mb][nb][i])
                            for jj in (j, j + 1) for i in (4 * jj, 4 * jj + 2)]
                    off = (col // 64) * box_bytes + mb * WGMMA_M * SWIZZLE_BYTES
                    b.stmatrix(Addr(chunk_addr[(col % 64) // 8], off), regs)

    def stage_f32(self, acc, t, region, box_bytes):
        """8-byte shared stores of f32 pairs: thread t holds rows 16*(t/32) + (t%32)/4 (+8) and
        columns 8j + 2*(t%4) + {0,1}, i.e. 16-byte chunk 2*(j%4) + (t%4)/2 of a 32-column box
        row, XORed with the row's low 3 bits (the lane's (t%32)/4)."""
        b, s = self.b, self.s
        lane = b.and_(t, 31, name="lane")
        r8 = b.shr(lane, 2, name="r8")
        rowbase = b.mad(b.add(b.shl(b.shr(t, 5), 4), r8), SWIZZLE_BYTES,
                        b.add(region, b.shl(b.and_(lane, 1), 3)), name="rowb")
        half = b.shr(b.and_(lane, 3), 1, name="half")
        chunk_addr = [b.add(rowbase, b.shl(b.xor(b.add(half, 2 * c), r8), 4), name="caddr")
                      for c in range(4)]
        for mb in range(s.m_blocks):
            for nb in range(s.n_blocks):
                for j in range(s.wgmma_n // 8):
                    col = nb * s.wgmma_n + 8 * j
                    for h in (0, 1):
                        off = (col // 32) * box_bytes + (mb * WGMMA_M + 8 * h) * SWIZZLE_BYTES
                        pair = acc[mb][nb][4 * j + 2 * h: 4 * j + 2 * h + 2]
                        b.st("shared", Addr(chunk_addr[j % 4], off), pair)


# the lowering other kernels of the family extend (grouped_matmul.py)
