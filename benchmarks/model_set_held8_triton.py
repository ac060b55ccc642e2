"""Triton kernels of the eighth held-out group (held8, benchmarks/model_set_held8.py), written
as the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl


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
