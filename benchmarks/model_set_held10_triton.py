"""Triton kernels of the tenth held-out group (held10, benchmarks/model_set_held10.py), written
as the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl


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
