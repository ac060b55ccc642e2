"""A Triton fused-attention forward for benchmarks/attention.py: the FlashAttention-2 scheme in
Triton's tile language (online softmax over key blocks in exp2, P·V accumulated in f32, the
logsumexp saved per row), the comparison the issue asks for besides torch's SDPA backends.

    o, lse = attention(q, k, v, causal)      # q, k, v: B x H x S x D bf16/f16 CUDA tensors

Causal: a query block stops at its last row's key block, and only the blocks that straddle the
diagonal (or the end of the sequence) pay for the mask. Tiles: 128 query rows, 64 keys (D=128)
or 128 keys (D=64), 8 warps, 3 pipeline stages. `compile_only(D, causal)` builds it for sm_90a
without a GPU (the CPU check of this file).
"""
import math

import triton
import triton.language as tl

LN2 = math.log(2.0)
TILES = {64: (128, 128, 8, 3), 128: (128, 64, 8, 3)}    # D → BLOCK_M, BLOCK_N, warps, stages


@triton.jit
def _block(acc, m_i, l_i, q, K, V, base, start, offs_m, offs_d, S, qk_scale,
           BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr, MASK: tl.constexpr,
           CAUSAL: tl.constexpr):
    """One key block of the online softmax: scores, new maxima, rescale, P·V."""
    offs_n = start + tl.arange(0, BLOCK_N)
    kt = tl.load(K + base + offs_n[None, :] * HEAD_D + offs_d[:, None],
                 mask=offs_n[None, :] < S, other=0.0)
    s = tl.dot(q, kt) * qk_scale
    if MASK:
        keep = offs_n[None, :] < S
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(V + base + offs_n[:, None] * HEAD_D + offs_d[None, :],
                mask=offs_n[:, None] < S, other=0.0)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, m_new, l_i


@triton.jit
def attention_fwd(Q, K, V, O, LSE, S, qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  HEAD_D: tl.constexpr, CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * S * HEAD_D
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_D + offs_d[None, :],
                mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    # blocks wholly below the diagonal and inside the sequence need no mask (causal: the
    # last query block's keys past S are masked too, and the blocks past them load nothing)
    if CAUSAL:
        hi = (pid_m + 1) * BLOCK_M
        clean = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N
    else:
        hi = S
        clean = S // BLOCK_N * BLOCK_N
    for start in range(0, clean, BLOCK_N):
        acc, m_i, l_i = _block(acc, m_i, l_i, q, K, V, base, start, offs_m, offs_d, S,
                               qk_scale, BLOCK_N, HEAD_D, False, CAUSAL)
    for start in range(clean, hi, BLOCK_N):
        acc, m_i, l_i = _block(acc, m_i, l_i, q, K, V, base, start, offs_m, offs_d, S,
                               qk_scale, BLOCK_N, HEAD_D, True, CAUSAL)
    out = acc / l_i[:, None]
    rows = offs_m < S
    tl.store(O + base + offs_m[:, None] * HEAD_D + offs_d[None, :],
             out.to(O.dtype.element_ty), mask=rows[:, None])
    tl.store(LSE + bh.to(tl.int64) * S + offs_m, (m_i + tl.math.log2(l_i)) * 0.6931471805599453,
             mask=rows)


def launch(q, k, v, o, lse, causal, scale=None):
    """Run the kernel on contiguous B x H x S x D tensors into o (same shape) and lse (B x H x
    S, f32)."""
    B, H, S, D = q.shape
    bm, bn, warps, stages = TILES[D]
    sc = (1.0 / math.sqrt(D) if scale is None else scale) / LN2        # scale · log2 e
    attention_fwd[(triton.cdiv(S, bm), B * H)](q, k, v, o, lse, S, sc, BLOCK_M=bm, BLOCK_N=bn,
                                               HEAD_D=D, CAUSAL=bool(causal), num_warps=warps,
                                               num_stages=stages)
    return o, lse


def attention(q, k, v, causal=False, scale=None):
    import torch
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    return launch(q.contiguous(), k.contiguous(), v.contiguous(), o, lse, causal, scale)


def compile_only(D, causal, arch=90):
    """The kernel compiled for sm_{arch}(a) without a GPU: Triton's compiled object (its PTX in
    .asm['ptx'])."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    bm, bn, warps, stages = TILES[D]
    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "LSE": "*fp32", "S": "i32",
           "qk_scale": "fp32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "HEAD_D": "constexpr", "CAUSAL": "constexpr"}
    src = ASTSource(attention_fwd, sig, constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "HEAD_D": D,
                                                    "CAUSAL": bool(causal)})
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps, "num_stages": stages})
