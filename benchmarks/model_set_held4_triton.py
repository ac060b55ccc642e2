"""Triton kernels of the fourth held-out group (held4, benchmarks/model_set_held4.py), written as
the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice


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
