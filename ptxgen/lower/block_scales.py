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
wgmma_n = 128 = BN (one B scale block per tile) and split_k = 1. The schedule's inflight picks
how a consumer warpgroup overlaps the promotion with its tensor-core work:

    inflight=0  serial: one block accumulator; wait for the stage's group (wait_group 0),
                promote, release the slot. The tensor core idles through each wait and
                promotion but for the other consumer warpgroup's groups.
    inflight=1  ping-pong: two block accumulators. The group of k-block kb + 1 is issued into
                one while k-block kb's, in the other, is waited for (wait_group 1: the older
                group only), promoted and its slot released; the last block drains with
                wait_group 0. The scales of a block are loaded when its group is issued, a
                block ahead of its promotion. 64 more f32 registers per m64n128 block.

Both promote the blocks in k order with the same arithmetic: their C is bit-identical.
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
    if s.BN != BLOCK or s.wgmma_n != BLOCK or s.BK != BLOCK:
        bad(f"block scales need BN = wgmma_n = BK = {BLOCK} (one B scale block per tile and "
            f"stage), got BN={s.BN}, wgmma_n={s.wgmma_n}, BK={s.BK}")
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
        nb = b.min(b.shr(n0, 7), self.last_nb, name="nblk")
        sb = b.ld("global", T.f32, self.a_b_index(nb, kb), name="sb")
        lane = b.and_(t, 31, name="lane")
        row = b.add(b.mad(cw, s.rows_per_consumer, m0),
                    b.add(b.shl(b.shr(t, 5), 4), b.shr(lane, 2)), name="prow")
        col = b.mul(kb, self.M, name="kbrow")
        factors = []
        for mb in range(s.m_blocks):
            f = []
            for h in (0, 8):
                r = b.min(b.add(row, mb * WGMMA_M + h), self.last_row, name="r")
                sa = b.ld("global", T.f32, b.element_addr(self.a_sc, b.add(col, r), 4), name="sa")
                f.append(b.mul(sa, sb, type=T.f32, name="f",
                               out=None if out is None else out[mb][h // 8]))
            factors.append(f)
        return factors

    def add_block(self, acc, total, factors):
        """total = fma(block, its row's factor, total), element by element."""
        for mb, f in enumerate(factors):
            for i, (x, tot) in enumerate(zip(acc[mb][0], total[mb][0])):
                self.b.fma(x, f[(i % 4) >> 1], tot, out=tot, type=T.f32)

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
