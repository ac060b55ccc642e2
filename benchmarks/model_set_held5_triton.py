"""Triton kernels of the fifth held-out group (held5, benchmarks/model_set_held5.py), written as
the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on the CPU).
"""
import triton
import triton.language as tl


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
