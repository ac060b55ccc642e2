"""Triton's Hopper PTX for the test corpus, compiled on a CPU machine (no GPU needed).

    pip install triton==3.6.0 && python benchmarks/collect_triton_hopper_ptx.py tests/data/ptx

Triton compiles for an explicit GPUTarget without a driver, so the corpus can be regenerated
anywhere. The kernels are this project's own: a bf16 `tl.dot` matmul (wgmma on sm_90a), a
persistent matmul through device-side tensor descriptors (TMA, mbarrier, stmatrix), and a
FlashAttention-style forward (causal on sm_90a; non-causal on sm_80, where it becomes
mma.sync + ldmatrix).
"""
import os
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HOPPER = GPUTarget("cuda", 90, 32)    # Triton picks sm_90a for wgmma
AMPERE = GPUTarget("cuda", 80, 32)


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbk, scm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mm_tma(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NSM: tl.constexpr):
    a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), tiles_m * tiles_n, NSM, flatten=True):
        om = (t // tiles_n) * BM
        on = (t % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = a_d.load([om, k * BK])
            b = b_d.load([on, k * BK])
            acc = tl.dot(a, b.T, acc)
        c_d.store([om, on], acc.to(tl.bfloat16))


@triton.jit
def attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    pid = tl.program_id(0); bh = tl.program_id(1)
    base = bh * S * D
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, (pid + 1) * BM)
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        kt = tl.load(k_ptr + base + rn[None, :] * D + rd[:, None], mask=rn[None, :] < S, other=0.0)
        s = tl.dot(q, kt) * scale
        valid = rn[None, :] < S
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], acc.to(tl.bfloat16), mask=rm[:, None] < S)
    tl.store(lse_ptr + bh * S + rm, m_i + tl.log(l_i), mask=rm < S)


MM_SIG = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
          "sam": "i32", "sbk": "i32", "scm": "i32",
          "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
TMA_SIG = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "NSM": "constexpr"}
ATTN_SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "lse_ptr": "*fp32",
            "S": "i32", "scale": "fp32",
            "D": "constexpr", "BM": "constexpr", "BN": "constexpr", "CAUSAL": "constexpr"}

CASES = [
    ("triton_matmul_bf16_sm90a.ptx", mm, MM_SIG, {"BM": 128, "BN": 128, "BK": 64}, HOPPER, 8, 3),
    ("triton_matmul_tma_persistent_sm90a.ptx", mm_tma, TMA_SIG,
     {"BM": 128, "BN": 128, "BK": 64, "NSM": 132}, HOPPER, 8, 3),
    ("triton_attention_causal_d64_sm90a.ptx", attn_fwd, ATTN_SIG,
     {"D": 64, "BM": 128, "BN": 64, "CAUSAL": True}, HOPPER, 8, 2),
    ("triton_attention_d64_sm80.ptx", attn_fwd, ATTN_SIG,
     {"D": 64, "BM": 64, "BN": 64, "CAUSAL": False}, AMPERE, 4, 2),
]


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, fn, sig, constexprs, target, warps, stages in CASES:
        k = triton.compile(ASTSource(fn, sig, constexprs=constexprs), target=target,
                           options={"num_warps": warps, "num_stages": stages})
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(k.asm["ptx"])
        print("saved", name)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "triton_hopper_ptx")
