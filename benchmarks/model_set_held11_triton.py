"""Triton kernels of the eleventh held-out group (held11, benchmarks/model_set_held11.py),
written as the Triton tutorials write them (GPU machine, or /work/tvenv to compile for sm_90 on
the CPU).
"""
import triton
import triton.language as tl


@triton.jit
def swiglu_f16_kernel(x_ptr, y_ptr, H, BLOCK: tl.constexpr):
    # the SwiGLU gate of a LLaMA-style MLP on float16 activations: each row holds the gate
    # and the up projection side by side (2H), y = silu(gate) * up in float32, stored as
    # float16; a program per (row, BLOCK columns)
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < H
    base = row.to(tl.int64) * 2 * H
    gate = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + base + H + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate * tl.sigmoid(gate) * up
    tl.store(y_ptr + row.to(tl.int64) * H + cols, y.to(tl.float16), mask=mask)


@triton.jit
def kl_div_rows_kernel(s_ptr, t_ptr, out_ptr, N, BLOCK: tl.constexpr):
    # knowledge distillation's loss per row: KL(softmax(t) || softmax(s)) of teacher and
    # student logits, sum p_t (log p_t - log p_s), two max and two log-sum-exp row
    # reductions and a third sum over one load of each row; one program per row
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    base = row.to(tl.int64) * N
    s = tl.load(s_ptr + base + cols, mask=mask, other=-float("inf"))
    t = tl.load(t_ptr + base + cols, mask=mask, other=-float("inf"))
    s = s - tl.max(s, axis=0)
    t = t - tl.max(t, axis=0)
    es = tl.exp(s)
    et = tl.exp(t)
    zs = tl.sum(es, axis=0)
    zt = tl.sum(et, axis=0)
    diff = (t - tl.log(zt)) - (s - tl.log(zs))
    kl = tl.sum(tl.where(mask, et * diff, 0.0), axis=0) / zt
    tl.store(out_ptr + row, kl)


@triton.jit
def paged_kv_write_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, D, BS: tl.constexpr,
                          BLOCK: tl.constexpr):
    # a serving engine's KV-cache write (vLLM's reshape_and_cache_flash): each new token's key
    # and value rows (D = heads x head_dim float16) go to its slot of a paged cache
    # (blocks, BS, D), slot = block * BS + offset from the slot mapping; one program per token
    tok = tl.program_id(0)
    slot = tl.load(slot_ptr + tok).to(tl.int64)
    dst = (slot // BS) * BS * D + (slot % BS) * D
    d = tl.arange(0, BLOCK)
    mask = d < D
    src = tok.to(tl.int64) * D
    tl.store(kc_ptr + dst + d, tl.load(k_ptr + src + d, mask=mask), mask=mask)
    tl.store(vc_ptr + dst + d, tl.load(v_ptr + src + d, mask=mask), mask=mask)
