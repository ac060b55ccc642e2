"""Triton kernels of the seventh held-out group (held7, benchmarks/model_set_held7.py), written
as the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl


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
