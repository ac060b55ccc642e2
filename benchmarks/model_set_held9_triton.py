"""Triton kernels of the ninth held-out group (held9, benchmarks/model_set_held9.py), written
as the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl


@triton.jit
def group_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, HW, G, eps, BLOCK: tl.constexpr):
    # GroupNorm of an (N, C, HW) array in G groups, one program per (sample, group): a group's
    # C/G channels are contiguous, so the program loops twice over one span (sums, then
    # normalise with a per-channel scale and shift)
    pid = tl.program_id(0)
    grp = pid % G
    cpg = C // G
    size = cpg * HW
    base = pid.to(tl.int64) * size
    offs = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    ss = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, size, BLOCK):
        o = start + offs
        v = tl.load(x_ptr + base + o, mask=o < size, other=0.0)
        s += v
        ss += v * v
    mean = tl.sum(s, axis=0) / size
    var = tl.sum(ss, axis=0) / size - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, size, BLOCK):
        o = start + offs
        mask = o < size
        v = tl.load(x_ptr + base + o, mask=mask, other=0.0)
        ch = grp * cpg + o // HW
        w = tl.load(w_ptr + ch, mask=mask, other=0.0)
        b = tl.load(b_ptr + ch, mask=mask, other=0.0)
        tl.store(y_ptr + base + o, (v - mean) * rstd * w + b, mask=mask)


@triton.jit
def bce_fused_kernel(x_ptr, t_ptr, g_ptr, part_ptr, n, inv_n, BLOCK: tl.constexpr):
    # binary cross-entropy with logits, forward and backward fused: each program writes the
    # gradient (sigmoid(x) - t) / n of its BLOCK elements and the sum of their losses
    # max(x, 0) - x t + log(1 + exp(-|x|)) (one partial sum per program)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0)
    e = tl.exp(-tl.abs(x))
    loss = tl.maximum(x, 0.0) - x * t + tl.log(1.0 + e)
    sig = tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(g_ptr + offs, (sig - t) * inv_n, mask=mask)
    tl.store(part_ptr + pid, tl.sum(tl.where(mask, loss, 0.0), axis=0))


@triton.jit
def decode_gqa_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, scale, G: tl.constexpr, BH: tl.constexpr,
                      D: tl.constexpr, BS: tl.constexpr):
    # single-token decode attention with grouped queries: one program per KV head streams its
    # float16 K and V caches (S x D) in BS-row chunks for the G query heads sharing them
    # (padded to BH rows for tl.dot), with an online softmax per query head
    kvh = tl.program_id(0)
    h = tl.arange(0, BH)
    d = tl.arange(0, D)
    hmask = h < G
    qo = (kvh * G + h)[:, None] * D + d[None, :]
    q = tl.load(q_ptr + qo, mask=hmask[:, None], other=0.0)
    base = kvh.to(tl.int64) * S * D
    m = tl.full([BH], float("-inf"), tl.float32)
    den = tl.zeros([BH], dtype=tl.float32)
    acc = tl.zeros([BH, D], dtype=tl.float32)
    for start in range(0, S, BS):
        rows = start + tl.arange(0, BS)
        mask = rows < S
        off = base + rows[:, None] * D + d[None, :]
        k = tl.load(k_ptr + off, mask=mask[:, None], other=0.0)
        s = tl.where(mask[None, :], tl.dot(q, tl.trans(k)) * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        v = tl.load(v_ptr + off, mask=mask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        den = den * alpha + tl.sum(p, axis=1)
        m = m_new
    tl.store(o_ptr + qo, acc / den[:, None], mask=hmask[:, None])
