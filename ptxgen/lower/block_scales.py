"""Block-scaled fp8 for the sm_90a tensor-core GEMM (lower/tc_matmul.py): DeepSeek-style
fine-grained scales, one f32 per 1 x 128 block of A (a row's 128 k) and per 128 x 128 block of
B, instead of one per tensor.

    a_scales: f32 [ceil(K/128), M]      (k-block major: a warp's 16 rows are adjacent)
    b_scales: f32 [ceil(N/128), ceil(K/128)]

A pipeline stage is one k-block of 128 (BK = 128 fp8 elements), so each stage's four wgmma
m64nNk32 start from zero (scale-d 0 on the first) into a block accumulator, and once that
group is done the block is promoted into the f32 total: total = fma(block, a_scale[row] *
b_scale, total), a thread holding rows r and r + 8 of each m64 block
(fragments.wgmma_d_coord). So wgmma's short fp8 accumulation (tensor_math.MODEL_FP8) spans 128
products only, and each block is scaled before it is summed, as the scales require. Needs
wgmma_n = 128 (one B scale block per wgmma block), BN a multiple of it and split_k = 1. With
one m64n128 block per consumer (128 x 128 tiles of two consumers) the schedule's inflight picks
how a consumer warpgroup overlaps the promotion with its tensor-core work:

    inflight=0  serial: one block accumulator; wait for the stage's group (wait_group 0),
                promote, release the slot. The tensor core idles through each wait and
                promotion but for the other consumer warpgroup's groups.
    inflight=1  ping-pong: two block accumulators. The group of k-block kb + 1 is issued into
                one while k-block kb's, in the other, is waited for (wait_group 1: the older
                group only), promoted and its slot released; the last block drains with
                wait_group 0. The scales of a block are loaded when its group is issued, a
                block ahead of its promotion. 64 more f32 registers per m64n128 block.

A consumer owning several m64n128 blocks (128 x 256 or 256 x 128 tiles of two consumers) runs
them one at a time through one block accumulator (blockwise_k_loop): per slot, a block's group
is issued, waited for and promoted into that block's total before the next block's group; the
slot is released after its last group. Its registers: 64 per block accumulator plus 64 per
block of the total (two blocks: 192 per thread), where a 64 x 256 accumulator beside its
64 x 256 total would take 256, over the 255 a thread can address. Shared memory per SM and
k-block, at the tensor cores' 8192 fp8 FLOP per clock: 128 x 128 tiles read 2 x 4 x (2 + 4) KB
(two consumers' m64n128k32 A and B) and take (128 + 128) x 128 bytes of TMA writes in 512
clocks, 160 bytes per clock against the 128 the SM gives (at most 0.80 of peak); the two-block
tiles read twice that and take (256 + 128) x 128 bytes in 1024 clocks, 144 per clock (0.89);
the per-tensor kernel's m64n256k32 on 128 x 256 tiles 128 (80 read, 48 written). The slot
handovers per wgmma halve too.

All forms promote the blocks in k order with the same arithmetic: their C is bit-identical.
"""
from ..ir import Param, ptr
from ..ir import types as T
from ..schedule.tc_matmul import WGMMA_M

BLOCK = 128


def block_scale_params():
    return [Param("a_scales", T.u64, ptr(T.f32)), Param("b_scales", T.u64, ptr(T.f32))]


def check_block_scales(s, dtype, bad):
    if dtype not in ("e4m3", "e5m2"):
        bad(f"block scales take fp8 inputs, not {dtype}")
    if s.wgmma_n != BLOCK or s.BK != BLOCK or s.BN % BLOCK:
        bad(f"block scales need wgmma_n = BK = {BLOCK} and BN a multiple of it (one B scale "
            f"block per wgmma block and stage), got BN={s.BN}, wgmma_n={s.wgmma_n}, BK={s.BK}")
    if s.inflight and s.m_blocks * s.n_blocks > 1:
        bad(f"the ping-pong promotion (inflight=1) takes one m64n128 block per consumer, "
            f"got {s.m_blocks} x {s.n_blocks}: a second accumulator of each would not fit the "
            f"registers")
    if s.split_k != 1:
        bad("block scales promote every k-block of a tile in one consumer: split_k=1")


class BlockScales:
    """Mixin of the lowering: self.b, self.s, self.M, self.N, self.K."""

    def block_scale_setup(self):
        b = self.b
        self.kb_count = b.shr(b.add(self.K, BLOCK - 1), 7, name="kbs")
        self.a_sc, self.b_sc = b.param("a_scales"), b.param("b_scales")
        self.last_row = b.sub(self.M, 1, name="mlast")
        self.last_nb = b.shr(b.sub(self.N, 1), 7, name="nblast")

    def promote(self, acc, total, kb, m0, n0, cw, t):
        """total += block accumulator x its scales (this thread's rows r, r + 8 per m block)."""
        self.add_block(acc, total, self.block_factors(kb, m0, n0, cw, t))

    def block_factors(self, kb, m0, n0, cw, t, out=None):
        """a_scale[row] * b_scale of k-block kb for this thread's rows r and r + 8 of each m
        block: [[f_r, f_r8] per m block], into the registers `out` where given."""
        b, s = self.b, self.s
        sb = self.b_scale(kb, n0, 0)
        row, col = self.scale_rows(kb, m0, cw, t)
        factors = []
        for mb in range(s.m_blocks):
            f = []
            for h in (0, 8):
                f.append(b.mul(self.a_scale(row, col, mb, h), sb, type=T.f32, name="f",
                               out=None if out is None else out[mb][h // 8]))
            factors.append(f)
        return factors

    def b_scale(self, kb, n0, nb):
        """b_scales of k-block kb for the tile's 128-column block nb (clamped at N's last)."""
        b = self.b
        first = b.shr(n0, 7)
        nblk = b.min(b.add(first, nb) if nb else first, self.last_nb, name="nblk")
        return b.ld("global", T.f32, self.a_b_index(nblk, kb), name="sb")

    def scale_rows(self, kb, m0, cw, t):
        """This thread's first row of the tile (rows r, r + 8 of each m block follow) and
        a_scales' row of k-block kb."""
        b, s = self.b, self.s
        lane = b.and_(t, 31, name="lane")
        row = b.add(b.mad(cw, s.rows_per_consumer, m0),
                    b.add(b.shl(b.shr(t, 5), 4), b.shr(lane, 2)), name="prow")
        return row, b.mul(kb, self.M, name="kbrow")

    def a_scale(self, row, col, mb, h):
        """a_scales of row `row` + 64 mb + h (clamped at M's last) at k-block row `col`."""
        b = self.b
        r = b.min(b.add(row, mb * WGMMA_M + h), self.last_row, name="r")
        return b.ld("global", T.f32, b.element_addr(self.a_sc, b.add(col, r), 4), name="sa")

    def add_block(self, acc, total, factors):
        """total = fma(block, its row's factor, total), element by element."""
        for mb, f in enumerate(factors):
            for i, (x, tot) in enumerate(zip(acc[mb][0], total[mb][0])):
                self.b.fma(x, f[(i % 4) >> 1], tot, out=tot, type=T.f32)

    # -- one wgmma block at a time (tiles of several m64n128 blocks per consumer) ----------------
    def blockwise_k_loop(self, blk, total, klo, khi, stage, phase, leader, operands, where):
        """The K loop of a consumer owning several m64n128 blocks: per slot, each block's group
        is issued into the one block accumulator blk, waited for and promoted into its total
        before the next block's; the slot is released once the last group is done. The other
        consumer warpgroup's groups keep the tensor core busy through each wait and
        promotion."""
        b, s = self.b, self.s
        desc_a, desc_b, scale_d, trans = operands
        m0, n0, cw, t = where
        blocks = [(mb, nb) for mb in range(s.m_blocks) for nb in range(s.n_blocks)]
        into = [[blk] * s.n_blocks for _ in range(s.m_blocks)]
        with b.for_range(klo, khi, type=T.u32, name="kb") as kb:
            descs = self.slot_descriptors(stage, phase, desc_a, desc_b)
            sa = sb = None
            for i, (mb, nb) in enumerate(blocks):
                self.issue_group(descs, into, scale_d, trans, block=(mb, nb))
                if sa is None:          # the scales load while the first group runs
                    row, col = self.scale_rows(kb, m0, cw, t)
                    sa = [[self.a_scale(row, col, m, h) for h in (0, 8)]
                          for m in range(s.m_blocks)]
                    sb = [self.b_scale(kb, n0, n) for n in range(s.n_blocks)]
                f = [b.mul(x, sb[nb], type=T.f32, name="f") for x in sa[mb]]
                b.wgmma_wait_group(0)
                if i == len(blocks) - 1:    # the slot's last reader is done
                    with b.predicated(leader):
                        self.release(stage)
                self.add_block([[blk]], [[total[mb][nb]]], [f])
            self.advance(stage, phase)

    def a_b_index(self, nb, kb):
        """Address of b_scales[nb][kb]."""
        b = self.b
        return b.element_addr(self.b_sc, b.mad(nb, self.kb_count, kb, name="sbi"), 4)

    # -- ping-pong (inflight=1) -------------------------------------------------------------------
    def pingpong_k_loop(self, next_group, accs, total, klo, khi, oldest, leader, where):
        """The K loop with two block accumulators: while k-block kb + 1's group runs into one,
        kb's (the other) is promoted. Unrolled by two so each accumulator has its own code;
        where no next block is left, the last one drains. next_group(acc): wait for the next
        slot, issue its group into acc, advance. oldest: the slot of the block to promote."""
        b = self.b
        factors = [[[b.reg(T.f32, "fpp") for _ in (0, 8)] for _ in range(self.s.m_blocks)]
                   for _ in accs]
        kb = b.reg(T.u32, "kb")
        b.mov(klo, out=kb)
        done = b.new_label("kdone")
        b.branch(done, b.setp("ge", kb, khi))          # no k-block: no group to wait for
        self.issue_block(next_group, accs[0], factors[0], kb, where)
        head, drain = b.new_label("pingpong"), [b.new_label("drain") for _ in accs]
        b.label(head)
        for cur in (0, 1):
            nxt = b.add(kb, 1, name="nkb")
            b.branch(drain[cur], b.setp("ge", nxt, khi))
            self.issue_block(next_group, accs[1 - cur], factors[1 - cur], nxt, where)
            b.wgmma_wait_group(1)       # the older group (block kb) is done, kb + 1 runs on
            self.retire_block(accs[cur], total, factors[cur], oldest, leader)
            b.mov(nxt, out=kb)
        b.branch(head)
        for cur in (0, 1):
            b.label(drain[cur])
            b.wgmma_wait_group(0)
            self.retire_block(accs[cur], total, factors[cur], oldest, leader)
            if cur == 0:
                b.branch(done)
        b.label(done)

    def issue_block(self, next_group, acc, factors, kb, where):
        """k-block kb's group into acc, then its scale factors (loaded while it runs)."""
        next_group(acc)
        self.block_factors(kb, *where, out=factors)

    def retire_block(self, acc, total, factors, oldest, leader):
        """Promote a finished block and release its slot to the producer."""
        b = self.b
        self.add_block(acc, total, factors)
        with b.predicated(leader):
            self.release(oldest)
        b.add(oldest, 1, out=oldest)
        with b.predicated(b.setp("eq", oldest, self.s.stages)):
            b.mov(0, type=T.u32, out=oldest)
