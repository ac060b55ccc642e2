"""Triton kernels of the model benchmark set (benchmarks/model_set.py; GPU machine only).

Written as the Triton tutorials write them. The fp32 matmul uses input_precision="ieee" (FMA,
no tensor cores) and num_stages=3, so its global loads become cp.async into shared memory.
"""
import triton
import triton.language as tl


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


# -- the second held-out group (held2, see model_set_numba.py)
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


# -- the third held-out group (held3, see model_set_numba.py)
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
