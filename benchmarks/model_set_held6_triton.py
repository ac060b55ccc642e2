"""Triton kernels of the sixth held-out group (held6, benchmarks/model_set_held6.py), written as
the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq, heads, HALF: tl.constexpr,
                BLOCK_H: tl.constexpr):
    # rotary position embedding ("rotate half") of one token's heads: x is (tokens, heads,
    # 2 HALF), the angle tables (seq, HALF) are indexed by the token's position tok % seq
    tok = tl.program_id(0)
    pos = tok % seq
    h = tl.arange(0, BLOCK_H)[:, None]
    d = tl.arange(0, HALF)[None, :]
    mask = h < heads
    base = tok.to(tl.int64) * heads * (2 * HALF) + h * (2 * HALF) + d
    x1 = tl.load(x_ptr + base, mask=mask)
    x2 = tl.load(x_ptr + base + HALF, mask=mask)
    c = tl.load(cos_ptr + pos * HALF + d)
    s = tl.load(sin_ptr + pos * HALF + d)
    tl.store(y_ptr + base, x1 * c - x2 * s, mask=mask)
    tl.store(y_ptr + base + HALF, x2 * c + x1 * s, mask=mask)


@triton.jit
def causal_softmax_kernel(x_ptr, y_ptr, seq, BLOCK: tl.constexpr):
    # softmax of one row of attention scores (seq, seq) per batch under a causal mask: query
    # q = row % seq sees keys 0..q, the rest of the row is written 0
    row = tl.program_id(0)
    q = row % seq
    offs = tl.arange(0, BLOCK)
    base = row.to(tl.int64) * seq
    v = tl.load(x_ptr + base + offs, mask=offs <= q, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + base + offs, e / tl.sum(e, axis=0), mask=offs < seq)


@triton.jit
def adam_kernel(p_ptr, g_ptr, m_ptr, v_ptr, po_ptr, mo_ptr, vo_ptr, n, lr, beta1, beta2, eps,
                bc1, bc2, BLOCK: tl.constexpr):
    # one Adam step written to new arrays: m' = b1 m + (1-b1) g, v' = b2 v + (1-b2) g^2,
    # p' = p - lr (m'/bc1) / (sqrt(v'/bc2) + eps)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = beta1 * tl.load(m_ptr + offs, mask=mask) + (1 - beta1) * g
    v = beta2 * tl.load(v_ptr + offs, mask=mask) + (1 - beta2) * g * g
    tl.store(mo_ptr + offs, m, mask=mask)
    tl.store(vo_ptr + offs, v, mask=mask)
    tl.store(po_ptr + offs, p - lr * (m / bc1) / (tl.sqrt(v / bc2) + eps), mask=mask)
