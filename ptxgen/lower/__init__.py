"""IR lowering: a schedule (ptxgen.schedule) turned into a Module through the IR builder, one
module per kernel family (sgemm, tc_matmul, mma_matmul, attention, mma_attention) and the
lowering pieces they share, each named for what it adds (online_softmax, c_pair_stores,
c_row_stores, cp_async_ring, pad_rows, fused_pad, ldg_producer, raster, epilogue, split_k,
block_scales; grouped_matmul: the tensor-core GEMM over many experts' row ranges)."""
from ..arch import DEFAULT_TARGET
from . import attention, mma_attention, mma_matmul, sgemm, tc_matmul


def lower_matmul(schedule, arch=DEFAULT_TARGET, shape=None, name="matmul"):
    """The SGEMM kernel for `schedule` as a Module. With `shape`, global accesses narrow to
    scalars where K or N is not a multiple of 4 (rows would not be 16-byte aligned); without it
    the kernel assumes K and N are multiples of vec_global."""
    return sgemm.lower(schedule, arch, shape, name)


def lower_tc_matmul(schedule, arch, shape, dtype="bf16", out="f32", name="tc_matmul",
                    a_major=True, b_major=True, ldg=(False, False), fused=(False, False),
                    epilogue=None, b_dtype=None, scales=False, block_scales=False):
    """The sm_90a wgmma/TMA GEMM. a_major / b_major: A (B) is K-major in global memory
    (row-major A, column-major B); False: M- (N-) major, read through wgmma's transpose bit.
    ldg: (A, B) loaded by the producer warpgroup with ld.global from a raw pointer instead of
    TMA (K-major rows that are not 16-byte aligned; ldg_producer.py). fused: (A, B) loaded by
    TMA from a padded workspace the kernel fills itself (fused_pad.py). epilogue: a traced
    Epilogue (schedule/epilogue.py) applied to the accumulators before C is stored; its
    tensors are parameters after the others. b_dtype: B's type where it differs from A's
    (fp8 only: e4m3 x e5m2). scales: parameters scale_a and scale_b (one f32 each) whose
    product multiplies the accumulators before C is stored (fp8's per-tensor scales).
    block_scales: a_scales and b_scales instead, one f32 per 1 x 128 block of A and per
    128 x 128 block of B (block_scales.py). A schedule with split_k > 1 adds the split-K
    workspace's parameters (split_k.py)."""
    return tc_matmul.lower(schedule, arch, shape, dtype=dtype, out=out, name=name,
                           a_major=a_major, b_major=b_major, ldg=ldg, fused=fused,
                           epilogue=epilogue, b_dtype=b_dtype, scales=scales,
                           block_scales=block_scales)


def lower_mma_matmul(schedule, arch, shape, dtype="bf16", out="f32", name="tc_matmul",
                     epilogue=None):
    """The sm_80 mma.sync GEMM (epilogue: as lower_tc_matmul's)."""
    return mma_matmul.lower(schedule, arch, shape, dtype=dtype, out=out, name=name,
                            epilogue=epilogue)


def lower_attention(schedule, arch, shape, dtype="bf16", causal=False, name="attention",
                    mods=None, kv_group=1):
    """The sm_90a wgmma attention forward (mods: an AttentionMods, schedule/score_mods.py, for
    score_mod / mask_mod / a block mask; kv_group: query heads per K/V head)."""
    return attention.lower(schedule, arch, shape, dtype=dtype, causal=causal, name=name,
                           mods=mods, kv_group=kv_group)


def lower_mma_attention(schedule, arch, shape, dtype="bf16", causal=False, name="attention",
                        mods=None, kv_group=1):
    """The sm_80 mma.sync attention forward (mods, kv_group: as lower_attention's)."""
    return mma_attention.lower(schedule, arch, shape, dtype=dtype, causal=causal, name=name,
                               mods=mods, kv_group=kv_group)


__all__ = ["lower_matmul", "lower_tc_matmul", "lower_mma_matmul", "lower_attention",
           "lower_mma_attention"]
