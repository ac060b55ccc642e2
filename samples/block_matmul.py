"""A Triton-style block matmul: the kernel is written over tiles with ptxgen.frontends.block
(program ids, aranges, masked loads, `acc += bk.dot(a, b)`), lowered to ptxgen's SGEMM
schedule, printed as PTX statistics, run and compared with numpy.

    python samples/block_matmul.py [M N K]
"""
import sys
import time

import numpy as np
from _common import backend, gpu_arch, run_kernel, say_backend

from ptxgen.frontends import block as bk
from ptxgen.ir.instr import instructions

BM, BN, BK = 64, 64, 8


@bk.kernel(num_warps=4)
def matmul(A: bk.pointer, B: bk.pointer, C: bk.pointer, M: bk.int32, N: bk.int32, K: bk.int32,
           BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
    rm = bk.program_id(0) * BM + bk.arange(0, BM)            # this program's rows of C
    rn = bk.program_id(1) * BN + bk.arange(0, BN)            # and columns
    rk = bk.arange(0, BK)
    acc = bk.zeros([BM, BN])
    for k in bk.range(0, K, BK):
        a = bk.load(A + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K))
        b = bk.load(B + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N))
        acc += bk.dot(a, b)
    bk.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def main(argv):
    where = backend()
    M, N, K = (int(x) for x in argv[:3]) if len(argv) >= 3 else \
        ((1024, 1024, 1024) if where == "gpu" else (150, 100, 70))
    arch = gpu_arch()
    # K and N promised multiples of 4 (Triton's divisibility hints) allow 128-bit tile loads
    hints = {"K": 4, "N": 4} if K % 4 == 0 and N % 4 == 0 else None
    module = matmul.build(arch, BM=BM, BN=BN, BK=BK, hints=hints)
    s = matmul.dot_schedule
    body = instructions(module.kernel("matmul").body)
    count = {}
    for i in body:
        count[i.full_opcode] = count.get(i.full_opcode, 0) + 1
    print(f"block matmul C[{M},{N}] = A[{M},{K}] @ B[{K},{N}] with {BM}x{BN}x{BK} tiles, "
          f"4 warps, on {say_backend(where)}")
    print(f"  `acc += bk.dot(a, b)` lowered to the SGEMM schedule {s}: {s.threads} threads, "
          f"{s.TM}x{s.TN} accumulators per thread, {s.shared_bytes} B of shared memory")
    print(f"  {len(body)} PTX instructions; " + ", ".join(
        f"{op} x{count[op]}" for op in ("fma.rn.f32", "ld.shared.v4.f32", "ld.global.v4.f32",
                                        "ld.global.f32", "bar.sync") if op in count))
    print(f"  why: each thread keeps a {s.TM}x{s.TN} tile of C in registers, so each A value it "
          f"reads from shared memory feeds {s.TN} FMAs and each B value {s.TM}")

    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.full((M, N), np.nan, np.float32)
    programs = (-(-M // BM), -(-N // BN))
    sizes = (np.int32(M), np.int32(N), np.int32(K))
    if where == "gpu":
        # Triton's way: kernel[grid](args..., constexprs); arrays are copied in and back
        t0 = time.perf_counter()
        matmul[programs](A, B, C, *sizes, BM=BM, BN=BN, BK=BK, hints=hints)
        grid, seconds = programs, time.perf_counter() - t0
    else:
        grid, args = matmul.dot_launch(programs, [A, B, C, *sizes])
        where, seconds = run_kernel(module, "matmul", grid, (matmul.threads(),), args)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    err = float(np.max(np.abs(C - ref)))
    bound = 1e-5 * 4 * np.sqrt(K) * max(1.0, float(np.max(np.abs(ref))))
    ok = bool(np.all(np.isfinite(C)) and err <= bound)
    print(f"  ran on {where} in {seconds:.2f} s (grid {grid}); max |C - A@B| = {err:.2e} "
          f"(float64 numpy reference, tolerance {bound:.1e} for fp32 sums of {K} terms): "
          f"{'ok' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
