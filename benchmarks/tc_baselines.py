"""The references benchmarks/tc_matmul.py measures ptxgen's tensor-core GEMM against, in the same
run: cuBLAS through torch.matmul (bf16, f16, and tf32 on f32 inputs with TF32 allowed), and an
autotuned Triton `tl.dot` matmul (this project's own kernel) in bf16.

All take A (M x K) and Bt (N x K) as torch CUDA tensors (B column-major, as ptxgen's operator
takes it) and write C (M x N); each returns a no-argument callable that enqueues one GEMM.
"""
import torch
import triton
import triton.language as tl

# A handful of Hopper tilings (block M, N, K, warps, pipeline stages), the kind Triton's own
# tutorials tune over; the autotuner keeps the fastest per (M, N, K).
TRITON_CONFIGS = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4),
                  (128, 128, 64, 8, 4), (128, 64, 64, 4, 4)]
GROUP_M = tl.constexpr(8)


@triton.autotune(configs=[triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w,
                                        num_stages=s)
                          for bm, bn, bk, w, s in TRITON_CONFIGS],
                 key=["M", "N", "K"])
@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbn, scm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ Bt.T, bf16 in and out, f32 accumulation; rows of A and Bt `sam`/`sbn` apart;
    tiles walked GROUP_M tile rows per tile column (L2 reuse); edges masked."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pm = first_m + (pid % group) % rows
    pn = (pid % group) // rows
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :]
    b_ptrs = b_ptr + rn[None, :] * sbn + rk[:, None]            # K x N view of Bt
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK
    c = c_ptr + rm[:, None] * scm + rn[None, :]
    tl.store(c, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def triton_bf16(A, Bt, C):
    M, K = A.shape
    N = Bt.shape[0]

    def grid(meta):
        return (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)

    def go():
        _mm[grid](A, Bt, C, M, N, K, A.stride(0), Bt.stride(0), C.stride(0))
    return go


def triton_config(M, N, K):
    """The configuration the autotuner chose for this shape (after a first call), as text."""
    for key, cfg in _mm.cache.items():
        if tuple(key[:3]) == (M, N, K):
            return str(cfg)
    return "?"


def cublas(A, Bt, C, tf32=False):
    """torch.matmul into C; tf32=True allows TF32 tensor cores for f32 inputs (off otherwise,
    so an f32 GEMM elsewhere stays IEEE)."""
    def go():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.matmul(A, Bt.T, out=C)
    return go
