"""Save Triton's PTX for a vector add, an fp32 matmul (tl.dot, ieee) and a softmax (GPU needed).

    python benchmarks/collect_triton_ptx.py DIR
"""
import os
import sys

import torch
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


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    o = torch.empty_like(x)
    k = add_kernel[(4,)](x, y, o, 4096, BLOCK=1024)
    open(os.path.join(out_dir, "triton_add.ptx"), "w").write(k.asm["ptx"])
    a = torch.randn(256, 128, device="cuda")
    b = torch.randn(128, 192, device="cuda")
    c = torch.empty(256, 192, device="cuda")
    k = matmul_kernel[(4, 3)](a, b, c, 256, 192, 128, a.stride(0), a.stride(1), b.stride(0),
                               b.stride(1), c.stride(0), c.stride(1), BM=64, BN=64, BK=32)
    assert torch.allclose(c, a @ b, atol=1e-3)
    open(os.path.join(out_dir, "triton_matmul.ptx"), "w").write(k.asm["ptx"])
    s = torch.randn(64, 1000, device="cuda")
    so = torch.empty_like(s)
    k = softmax_kernel[(64,)](so, s, s.stride(0), 1000, BLOCK=1024)
    assert torch.allclose(so, torch.softmax(s, 1), atol=1e-5)
    open(os.path.join(out_dir, "triton_softmax.ptx"), "w").write(k.asm["ptx"])
    print("saved", sorted(os.listdir(out_dir)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "triton_ptx")
