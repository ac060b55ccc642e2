"""Block-scaled fp8 for the sm_90a tensor-core GEMM (lower/tc_matmul.py): DeepSeek-style
fine-grained scales, one f32 per 1 x 128 block of A (a row's 128 k) and per 128 x 128 block of
B, instead of one per tensor.

    a_scales: f32 [ceil(K/128), M]      (k-block major: a warp's 16 rows are adjacent)
    b_scales: f32 [ceil(N/128), ceil(K/128)]

A pipeline stage is one k-block of 128 (BK = 128 fp8 elements), so each stage's four wgmma
m64nNk32 start from zero (scale-d 0 on the first) into a block accumulator, wait for it, and
promote it into the f32 total: total = fma(block, a_scale[row] * b_scale, total), a thread
holding rows r and r + 8 of each m64 block (fragments.wgmma_d_coord). So wgmma's short fp8
accumulation (tensor_math.MODEL_FP8) spans 128 products only, and each block is scaled before
it is summed, as the scales require. Needs wgmma_n = 128 = BN (one B scale block per tile) and
inflight = 0 (the block accumulator is read every stage); the two consumer warpgroups overlap
one's promotion with the other's wgmma.
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
    if s.inflight != 0 or s.split_k != 1:
        bad("block scales read each stage's accumulator: inflight=0, split_k=1")


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
        b, s = self.b, self.s
        nb = b.min(b.shr(n0, 7), self.last_nb, name="nblk")
        sb = b.ld("global", T.f32, self.a_b_index(nb, kb), name="sb")
        lane = b.and_(t, 31, name="lane")
        row = b.add(b.mad(cw, s.rows_per_consumer, m0),
                    b.add(b.shl(b.shr(t, 5), 4), b.shr(lane, 2)), name="prow")
        col = b.mul(kb, self.M, name="kbrow")
        for mb in range(s.m_blocks):
            f = []
            for h in (0, 8):
                r = b.min(b.add(row, mb * WGMMA_M + h), self.last_row, name="r")
                sa = b.ld("global", T.f32, b.element_addr(self.a_sc, b.add(col, r), 4), name="sa")
                f.append(b.mul(sa, sb, type=T.f32, name="f"))
            for i, (x, tot) in enumerate(zip(acc[mb][0], total[mb][0])):
                b.fma(x, f[(i % 4) >> 1], tot, out=tot, type=T.f32)

    def a_b_index(self, nb, kb):
        """Address of b_scales[nb][kb]."""
        b = self.b
        return b.element_addr(self.b_sc, b.mad(nb, self.kb_count, kb, name="sbi"), 4)
