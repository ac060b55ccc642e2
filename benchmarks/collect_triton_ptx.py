"""Save Triton's PTX for a vector add, an fp32 matmul (tl.dot, ieee) and a softmax (GPU needed).

    python benchmarks/collect_triton_ptx.py DIR
"""
import os
import sys

import torch


# the same kernels the model benchmark set times (one definition of each)
from model_triton import add_kernel, matmul_kernel, softmax_kernel  # noqa: E402


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
