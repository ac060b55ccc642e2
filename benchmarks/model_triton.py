"""Triton kernels of the model benchmark set (benchmarks/model_set.py), written as the Triton
tutorials write them (GPU machine, or a Triton install to compile for sm_90 on the CPU).

The fp32 matmul uses input_precision="ieee" (FMA, no tensor cores) and num_stages=3, so its
global loads become cp.async into shared memory.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=offs < n_cols)


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    inv = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + row * stride + offs, d * inv * w + b, mask=mask)


@triton.jit
def fused_chain_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    z = x * y + 0.5 * x
    z = z / (1.0 + tl.exp(-z)) + 0.25 * tl.abs(y)
    tl.store(out_ptr + offs, z, mask=mask)


@triton.jit
def rowmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, sx, sy, BM: tl.constexpr, BN: tl.constexpr):
    # y (N x M) = x (M x N) transposed, one BM x BN tile per program through tl.trans
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * sx + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[:, None] * sy + rm[None, :], tl.trans(x), mask=tl.trans(mask))


@triton.jit
def colsum_kernel(x_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    # column sums: each program walks all rows of BN columns, BM rows at a time
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for m0 in range(0, M, BM):
        rm = m0 + tl.arange(0, BM)
        x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :],
                    mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
        acc += tl.sum(x, axis=0)
    tl.store(out_ptr + rn, acc, mask=rn < N)


@triton.jit
def bmm_small_kernel(a_ptr, b_ptr, c_ptr, S: tl.constexpr):
    # a batch of small S x S fp32 matrix products, one per program (FMA, no tensor cores)
    r = tl.arange(0, S)
    off = tl.program_id(0) * S * S + r[:, None] * S + r[None, :]
    c = tl.dot(tl.load(a_ptr + off), tl.load(b_ptr + off), input_precision="ieee")
    tl.store(c_ptr + off, c)


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, w_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    # RMSNorm of one row per program: x / sqrt(mean(x^2) + eps) * w
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + offs, mask=mask)
    tl.store(y_ptr + row * stride + offs, x * inv * w, mask=mask)


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # GELU, tanh approximation, elementwise (libdevice's tanhf)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + libdevice.tanh(u)), mask=mask)


@triton.jit
def argmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    # top-1: the column of each row's largest element (an int32 per row)
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.argmax(x, axis=0).to(tl.int32))


@triton.jit
def embbag_kernel(idx_ptr, table_ptr, out_ptr, L, D, BLOCK_D: tl.constexpr):
    # embedding bag: the sum of the L table rows a bag's indices name, one bag per program
    bag = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for k in range(0, L):
        r = tl.load(idx_ptr + bag * L + k)
        acc += tl.load(table_ptr + r.to(tl.int64) * D + cols, mask=mask, other=0.0)
    tl.store(out_ptr + bag * D + cols, acc, mask=mask)


@triton.jit
def logsumexp_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    # log(sum(exp(x))) of each row, stabilised by the row's maximum
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    m = tl.max(x, axis=0)
    tl.store(out_ptr + row, m + tl.log(tl.sum(tl.exp(x - m), axis=0)))


@triton.jit
def dropout_kernel(x_ptr, y_ptr, n, p, seed, BLOCK: tl.constexpr):
    # inverted dropout with Triton's own counter-based RNG (tl.rand: Philox): an element is
    # kept with probability 1 - p and scaled by 1 / (1 - p)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(y_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@triton.jit
def xent_kernel(x_ptr, lab_ptr, loss_ptr, stride, n_cols, BLOCK: tl.constexpr):
    # cross-entropy of one row of logits against its integer label: logsumexp(x) - x[label],
    # the row read in BLOCK-wide chunks twice (its maximum, then the sum of exponentials)
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(base + offs, mask=offs < n_cols, other=-float("inf")))
    mx = tl.max(m, axis=0)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(base + offs, mask=offs < n_cols, other=-float("inf"))
        s += tl.exp(v - mx)
    lab = tl.load(lab_ptr + row)
    xl = tl.load(base + lab)
    tl.store(loss_ptr + row, mx + tl.log(tl.sum(s, axis=0)) - xl)


@triton.jit
def swish_f16_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # swish (SiLU) x * sigmoid(x) on half-precision data, computed in fp32
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x / (1.0 + tl.exp(-x))).to(tl.float16), mask=mask)


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


@triton.jit
def add_layernorm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, h_ptr, y_ptr, cols, eps,
                         BLOCK: tl.constexpr):
    # the residual add fused with layer norm, one row per program: h = x + r is written
    # (the next residual) and y = LN(h) w + b
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    base = row.to(tl.int64) * cols
    h = tl.load(x_ptr + base + offs, mask=mask, other=0.0) + \
        tl.load(r_ptr + base + offs, mask=mask, other=0.0)
    tl.store(h_ptr + base + offs, h, mask=mask)
    mean = tl.sum(h, axis=0) / cols
    d = tl.where(mask, h - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + eps)
    w = tl.load(w_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + base + offs, d * rstd * w + b, mask=mask)


@triton.jit
def l2dist_kernel(x_ptr, y_ptr, o_ptr, n, m, D: tl.constexpr, BM: tl.constexpr,
                  BN: tl.constexpr):
    # squared Euclidean distances of n by m short vectors (D floats each), one BM x BN tile
    # of the output per program
    i = tl.program_id(0) * BM + tl.arange(0, BM)
    j = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.static_range(D):
        a = tl.load(x_ptr + i * D + k, mask=i < n, other=0.0)
        b = tl.load(y_ptr + j * D + k, mask=j < m, other=0.0)
        d = a[:, None] - b[None, :]
        acc += d * d
    out = o_ptr + i.to(tl.int64)[:, None] * m + j[None, :]
    tl.store(out, acc, mask=(i < n)[:, None] & (j < m)[None, :])


@triton.jit
def masked_mean_kernel(x_ptr, len_ptr, o_ptr, L, D, BLOCK_L: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    # the mean over the valid rows of a padded batch: x is (B, L, D), sequence b holds
    # lens[b] rows; program (b, d-block) loops over those rows only
    bi = tl.program_id(0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    n = tl.load(len_ptr + bi)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    base = x_ptr + bi.to(tl.int64) * L * D
    for l0 in range(0, n, BLOCK_L):
        rows = l0 + tl.arange(0, BLOCK_L)
        v = tl.load(base + rows[:, None] * D + d[None, :],
                    mask=(rows < n)[:, None] & (d < D)[None, :], other=0.0)
        acc += tl.sum(v, axis=0)
    tl.store(o_ptr + bi * D + d, acc / n.to(tl.float32), mask=d < D)


@triton.jit
def transpose_add_kernel(a_ptr, b_ptr, o_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    # o = a + b^T with a and o (R, C) and b (C, R), one BR x BC tile per program: a is read
    # along rows, b across them (Triton turns the tile round through shared memory)
    i = tl.program_id(0) * BR + tl.arange(0, BR)
    j = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (i < R)[:, None] & (j < C)[None, :]
    rows = i.to(tl.int64)[:, None]
    cols = j.to(tl.int64)[None, :]
    a = tl.load(a_ptr + rows * C + cols, mask=mask)
    b = tl.load(b_ptr + cols * R + rows, mask=mask)
    tl.store(o_ptr + rows * C + cols, a + b, mask=mask)


@triton.jit
def scale_bias_relu_kernel(x_ptr, s_ptr, b_ptr, y_ptr, R, C, BR: tl.constexpr,
                           BC: tl.constexpr):
    # y = relu(x * s + b) on an (R, C) array, s and b per column (broadcast down the rows),
    # one BR x BC tile per program
    i = tl.program_id(0) * BR + tl.arange(0, BR)
    j = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (i < R)[:, None] & (j < C)[None, :]
    off = i.to(tl.int64)[:, None] * C + j[None, :]
    s = tl.load(s_ptr + j, mask=j < C, other=0.0)
    b = tl.load(b_ptr + j, mask=j < C, other=0.0)
    x = tl.load(x_ptr + off, mask=mask, other=0.0)
    tl.store(y_ptr + off, tl.maximum(x * s[None, :] + b[None, :], 0.0), mask=mask)


@triton.jit
def top2_kernel(x_ptr, o_ptr, C, BLOCK: tl.constexpr):
    # the two largest values of each row, one row per program: the max, then the max of the
    # row with the first position holding it masked out
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * C + offs, mask=offs < C, other=float("-inf"))
    m1 = tl.max(x, axis=0)
    first = tl.min(tl.where(x == m1, offs, BLOCK), axis=0)
    m2 = tl.max(tl.where(offs == first, float("-inf"), x), axis=0)
    tl.store(o_ptr + row * 2, m1)
    tl.store(o_ptr + row * 2 + 1, m2)


@triton.jit
def cosine_rows_kernel(a_ptr, b_ptr, o_ptr, D, BLOCK: tl.constexpr):
    # the cosine similarity of row pairs a[r], b[r] (D floats each), one row per program:
    # three dot products (a.b, a.a, b.b) in one pass
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    base = row.to(tl.int64) * D
    a = tl.load(a_ptr + base + offs, mask=offs < D, other=0.0)
    b = tl.load(b_ptr + base + offs, mask=offs < D, other=0.0)
    ab = tl.sum(a * b, axis=0)
    na = tl.sum(a * a, axis=0)
    nb = tl.sum(b * b, axis=0)
    tl.store(o_ptr + row, ab / tl.sqrt(na * nb))


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


@triton.jit
def layernorm_bwd_kernel(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, N,
                         BLOCK: tl.constexpr):
    # LayerNorm's input gradient, one program per row (the forward's saved mean and rstd):
    # dx = rstd (w dy - xhat mean(xhat w dy) - mean(w dy)), two row sums over one load
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    base = row.to(tl.int64) * N
    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + base + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = w * dy
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(dx_ptr + base + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)


@triton.jit
def cumsum_rows_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    # the inclusive prefix sum of each row (tl.cumsum: an associative scan across the
    # program's warps), one program per row of N <= BLOCK floats
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    base = row.to(tl.int64) * N
    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
    tl.store(y_ptr + base + cols, tl.cumsum(x, axis=0), mask=mask)


@triton.jit
def causal_dwconv_silu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, L, W: tl.constexpr,
                              BLOCK: tl.constexpr):
    # a causal depthwise 1-D convolution of width W with bias, then SiLU (Mamba's short
    # convolution) over (batch, channel, length) rows: a program per (row, BLOCK positions)
    # loads W shifted, masked windows of its row (zero before the start)
    row = tl.program_id(0)
    ch = row % C
    t = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    base = row.to(tl.int64) * L
    acc = tl.zeros([BLOCK], dtype=tl.float32) + tl.load(b_ptr + ch)
    for k in tl.static_range(W):
        src = t - (W - 1) + k
        xv = tl.load(x_ptr + base + src, mask=(src >= 0) & (src < L), other=0.0)
        acc += tl.load(w_ptr + ch * W + k) * xv
    tl.store(y_ptr + base + t, acc * tl.sigmoid(acc), mask=t < L)


@triton.jit
def swiglu_f16_kernel(x_ptr, y_ptr, H, BLOCK: tl.constexpr):
    # the SwiGLU gate of a LLaMA-style MLP on float16 activations: each row holds the gate
    # and the up projection side by side (2H), y = silu(gate) * up in float32, stored as
    # float16; a program per (row, BLOCK columns)
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < H
    base = row.to(tl.int64) * 2 * H
    gate = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + base + H + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(y_ptr + row.to(tl.int64) * H + cols, y.to(tl.float16), mask=mask)


@triton.jit
def kl_div_rows_kernel(s_ptr, t_ptr, out_ptr, N, BLOCK: tl.constexpr):
    # knowledge distillation's loss per row: KL(softmax(t) || softmax(s)) of teacher and
    # student logits, sum p_t (log p_t - log p_s), two max and two log-sum-exp row
    # reductions and a third sum over one load of each row; one program per row
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    base = row.to(tl.int64) * N
    s = tl.load(s_ptr + base + cols, mask=mask, other=-float("inf"))
    t = tl.load(t_ptr + base + cols, mask=mask, other=-float("inf"))
    s = s - tl.max(s, axis=0)
    t = t - tl.max(t, axis=0)
    es = tl.exp(s)
    et = tl.exp(t)
    zs = tl.sum(es, axis=0)
    zt = tl.sum(et, axis=0)
    diff = (t - tl.log(zt)) - (s - tl.log(zs))
    kl = tl.sum(tl.where(mask, et * diff, 0.0), axis=0) / zt
    tl.store(out_ptr + row, kl)


@triton.jit
def paged_kv_write_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, D, BS: tl.constexpr,
                          BLOCK: tl.constexpr):
    # a serving engine's KV-cache write (vLLM's reshape_and_cache_flash): each new token's key
    # and value rows (D = heads x head_dim float16) go to its slot of a paged cache
    # (blocks, BS, D), slot = block * BS + offset from the slot mapping; one program per token
    tok = tl.program_id(0)
    slot = tl.load(slot_ptr + tok).to(tl.int64)
    dst = (slot // BS) * BS * D + (slot % BS) * D
    d = tl.arange(0, BLOCK)
    mask = d < D
    src = tok.to(tl.int64) * D
    tl.store(kc_ptr + dst + d, tl.load(k_ptr + src + d, mask=mask), mask=mask)
    tl.store(vc_ptr + dst + d, tl.load(v_ptr + src + d, mask=mask), mask=mask)


None
