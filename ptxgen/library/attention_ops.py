"""attention (forward, its backward for autograd, FlexAttention-style mods), attention_decode
over a K/V cache and kv_cache_append on torch tensors and numpy arrays (docs/operators.md)."""
import math

import numpy as np

from ..arrays import torch_stream
from ..errors import PtxgenError
from .common import (IMPLS, cached_op, contiguous, ensure_torch_ops, pick_backend, pick_target,
                     run_op, through_torch, torch_module, torch_op)
from .inputs import emu_view, from_emu, operand, same_dtype, same_place
from .launch import run_emu, run_gpu


# -- attention ---------------------------------------------------------------------------------
def attention(q, k, v, *, causal=False, scale=None, score_mod=None, mask_mod=None,
              block_mask=None, return_lse=False, backend="auto", target=None):
    """Fused attention forward O = softmax(scale · q kᵀ [causal]) v over (B, H, S, D) arrays
    (torch's scaled_dot_product_attention layout), bf16 or f16, D 64 or 128, any S. k and v
    may have fewer heads than q (grouped-query / multi-query attention: H a multiple of H_kv;
    query head h reads K/V head h // (H / H_kv)).
    scale defaults to 1/sqrt(D). return_lse: also return the per-row logsumexp (B, H, S), f32,
    natural log (what a backward pass needs).

    FlexAttention's programming model (ptxgen.mods): score_mod(score, b, h, q_idx, kv_idx)
    receives the scaled score, mask_mod(b, h, q_idx, kv_idx) returns True where attention is
    allowed; both are traced once into the kernel. block_mask (ptxgen.create_block_mask) is made
    from the mask_mod when not given: empty tiles are skipped, full ones skip the mask."""
    if score_mod is not None or mask_mod is not None or block_mask is not None:
        # traced mods: eager only (a Python function has no place in a custom op's schema)
        o, lse = attention_impl(q, k, v, causal, scale, backend, target, score_mod, mask_mod,
                                block_mask)
        if through_torch(q, k, v) and not torch_module().compiler.is_compiling():
            if mask_mod is None and block_mask is not None:
                mask_mod = block_mask.mask_mod
            o, lse = with_mod_backward(o, lse, q, k, v, (causal, scale, backend, target,
                                                         score_mod, mask_mod))
    elif through_torch(q, k, v):
        o, lse = torch_op("attention")(q, k, v, bool(causal), scale, backend, target)
    else:
        o, lse = attention_impl(q, k, v, causal, scale, backend, target)
    return (o, lse) if return_lse else o


_MOD_BACKWARD = []


def with_mod_backward(o, lse, q, k, v, config):
    """(o, lse) recorded by autograd as depending on q, k, v, with the backward of the traced
    mods in config = (causal, scale, backend, target, score_mod, mask_mod): a
    torch.autograd.Function (a Python function has no place in a custom op's schema) whose
    backward runs attention_backward_impl with the same mods."""
    if not _MOD_BACKWARD:
        torch = torch_module()

        class ModBackward(torch.autograd.Function):
            @staticmethod
            def forward(ctx, o, lse, q, k, v, config):
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.config = config
                return o.view_as(o), lse.view_as(lse)

            @staticmethod
            def backward(ctx, grad_o, grad_lse):
                if grad_lse is not None and bool((grad_lse != 0).any()):
                    raise PtxgenError("ptxgen.attention: backward through the LSE output not "
                                      "implemented (only O's gradient is)")
                q, k, v, o, lse = ctx.saved_tensors
                dq, dk, dv = attention_backward_impl(q, k, v, o, lse,
                                                     grad_o.to(q.dtype).contiguous(),
                                                     *ctx.config)
                return None, None, dq, dk, dv, None
        _MOD_BACKWARD.append(ModBackward)
    return _MOD_BACKWARD[0].apply(o, lse, q, k, v, config)


_MOD_ARRAYS = {}


def _mod_arrays(op, shape, device):
    """The mods' kernel arrays (block lists, extra tensors), made once per operator, shape and
    device (torch tensors on a GPU device, numpy arrays for the emulator)."""
    key = (id(op), tuple(shape.values()), str(device))
    hit = _MOD_ARRAYS.get(key)
    if hit is None:
        hit = op.mod_arrays(shape)
        if device is not None:
            torch = torch_module()
            hit = {n: torch.from_numpy(np.ascontiguousarray(a)).to(device)
                   for n, a in hit.items()}
        _MOD_ARRAYS[key] = hit
    return hit


def attention_impl(q, k, v, causal=False, scale=None, backend="auto", target=None,
                   score_mod=None, mask_mod=None, block_mask=None):
    """(O, LSE): the eager implementation (also the torch custom op's body)."""
    fn = "attention"
    Q, K, V = (operand(n, x, fn, ("bf16", "f16")) for n, x in (("q", q), ("k", k), ("v", v)))
    dtype = same_dtype(fn, Q, K, V)
    on_gpu = same_place(fn, Q, K, V)
    if len(Q.shape) != 4 or K.shape != V.shape or len(K.shape) != 4 or \
            K.shape[:1] + K.shape[2:] != Q.shape[:1] + Q.shape[2:] or Q.shape[1] % K.shape[1]:
        raise PtxgenError(f"ptxgen.{fn}: q must be (B, H, S, D) and k, v (B, H_kv, S, D) with H "
                          f"a multiple of H_kv; got q {Q.shape}, k {K.shape}, v {V.shape}")
    kv_group = Q.shape[1] // K.shape[1]                 # grouped-query (and multi-query) heads
    if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale)
                                  and scale > 0):
        raise PtxgenError(f"ptxgen.{fn}: scale must be a positive number, got {scale!r}")
    Bn, H, S, D = Q.shape
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    from ..ops.attention import Attention
    op = cached_op(Attention, dtype, bool(causal), None if scale is None else float(scale), "auto",
                   score_mod, mask_mod, block_mask, kv_group)
    try:
        shape = op.shape(B=Bn, H=H, S=S, D=D)
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix('attention: ')}") from None
    arrays = {"Q": contiguous(q), "K": contiguous(k), "V": contiguous(v)}
    extra = {}
    if score_mod is not None or mask_mod is not None or block_mask is not None:
        op.for_target(arch)
        device = (q.device if Q.is_torch else "cuda") if be == "gpu" else None
        extra = _mod_arrays(op, shape, device)
    res = run_op(fn, op, shape, arch, be, dtype, arrays,
                 {"O": ((Bn, H, S, D), dtype), "LSE": ((Bn, H, S), "f32")}, on_gpu, Q.is_torch,
                 scalars=extra)
    return res["O"], res["LSE"]


def _backward_operands(fn, q, k, v, o, lse, do):
    """The backward's operands after one-line checks: (q, k, v, o, grad operands, dtype,
    whether they are on the GPU); bf16 only."""
    ops = [operand(n, x, fn, ("bf16", "f16")) for n, x in
           (("q", q), ("k", k), ("v", v), ("o", o), ("grad", do))]
    dtype = same_dtype(fn, *ops)
    on_gpu = same_place(fn, *ops, operand("lse", lse, fn, ("f32",)))
    if dtype != "bf16":
        raise PtxgenError(f"ptxgen.{fn}: backward not implemented for {dtype} (bf16 only)")
    return ops, dtype, on_gpu


def attention_backward_impl(q, k, v, o, lse, do, causal=False, scale=None, backend="auto",
                            target=None, score_mod=None, mask_mod=None):
    """(dQ, dK, dV) of attention from the forward's inputs, its O and LSE and dO
    (ops/attention_backward.py): the body of the torch custom op attention's autograd calls,
    and with score_mod / mask_mod (traced mods, eager) of the autograd Function of
    torch_ops.with_mod_backward."""
    fn = "attention"
    ops, dtype, on_gpu = _backward_operands(fn, q, k, v, o, lse, do)
    Q, K = ops[0], ops[1]
    Bn, H, S, D = Q.shape
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    from ..ops.attention_backward import AttentionBackward
    try:
        op = cached_op(AttentionBackward, dtype, bool(causal),
                       None if scale is None else float(scale), "auto", H // K.shape[1],
                       score_mod, mask_mod)
        shape = op.shape(B=Bn, H=H, S=S, D=D)
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix('attention backward: ')}") \
            from None
    extra = {}
    if score_mod is not None or mask_mod is not None:
        device = (q.device if Q.is_torch else "cuda") if be == "gpu" else None
        extra = _mod_arrays(op, shape, device)
    arrays = {n: contiguous(x) for n, x in
              (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do), ("LSE", lse))}
    res = run_op(fn, op, shape, arch, be, dtype, arrays,
                 {"dQ": (Q.shape, dtype), "dK": (K.shape, dtype), "dV": (K.shape, dtype)},
                 on_gpu, Q.is_torch, scalars=extra)
    return res["dQ"], res["dK"], res["dV"]


# -- decode over a K/V cache -------------------------------------------------------------------
def attention_decode(q, k_cache, v_cache, cache_seqlens, block_table=None, softmax_scale=None,
                     *, return_lse=False, backend="auto", target=None):
    """Attention of the S_q (1..16) newest tokens of each sequence against its K/V cache
    (inference only). q: (B, S_q, H, D); k_cache, v_cache: (B, S_max, H_kv, D), or with
    block_table (B, max_pages) int32 a page pool (num_pages, page_size, H_kv, D), page_size a
    multiple of 16 up to 256; cache_seqlens: (B,) int32, the keys of each sequence with the
    S_q new ones (appended first: kv_cache_append), which are its last: token t sees keys
    < cache_seqlens[b] - S_q + 1 + t. bf16 or f16, D 64 or 128, H a multiple of H_kv.
    Returns O (B, S_q, H, D) in q's type, and with return_lse the logsumexp (B, S_q, H), f32."""
    torch = torch_module()
    if torch is not None and isinstance(q, torch.Tensor):
        if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False)
                                           for t in (q, k_cache, v_cache)):
            raise PtxgenError("ptxgen.attention_decode: inference only, no gradient: call it "
                              "under torch.no_grad() or on detached tensors")
        ensure_torch_ops()
        if torch.compiler.is_compiling():
            o, lse = torch_op("attention_decode")(q, k_cache, v_cache, cache_seqlens,
                                                  block_table, softmax_scale, backend, target)
            return (o, lse) if return_lse else o
    o, lse = attention_decode_impl(q, k_cache, v_cache, cache_seqlens, block_table,
                                   softmax_scale, backend, target)
    return (o, lse) if return_lse else o


def _cache_operands(fn, k, v, lens, table, B, S_q, new=None):
    """Checks of the cache arguments shared by attention_decode and kv_cache_append:
    (K operand, page_size or None, S_max, pages or None) after one-line errors."""
    K = operand("k_cache", k, fn, ("bf16", "f16"))
    V = operand("v_cache", v, fn, ("bf16", "f16"))
    if K.shape != V.shape or len(K.shape) != 4:
        raise PtxgenError(f"ptxgen.{fn}: k_cache and v_cache must have one 4-D shape; got "
                          f"{K.shape} and {V.shape}")
    for name, x in (("k_cache", k), ("v_cache", v)):
        if not _is_contiguous(x):
            raise PtxgenError(f"ptxgen.{fn}: {name} must be contiguous")
    _index_check(fn, "cache_seqlens", lens, (B,))
    if table is None:
        if K.shape[0] != B:
            raise PtxgenError(f"ptxgen.{fn}: k_cache has batch {K.shape[0]}, want {B} "
                              f"(B, S_max, H_kv, D) without block_table")
        if K.shape[1] < S_q:
            raise PtxgenError(f"ptxgen.{fn}: k_cache holds {K.shape[1]} positions, fewer "
                              f"than the {S_q} new tokens")
        return K, None, K.shape[1], None
    tshape = tuple(table.shape)
    if len(tshape) != 2 or tshape[0] != B:
        raise PtxgenError(f"ptxgen.{fn}: block_table must be (B={B}, max_pages) int32, got "
                          f"shape {tshape}")
    _index_check(fn, "block_table", table, tshape)
    from ..ops.attention_decode import check_page_size
    page = check_page_size(K.shape[1], f"ptxgen.{fn}: k_cache (num_pages, page_size, H_kv, D)")
    pages = K.shape[0]
    host = _host_ints(table)
    if host is not None and host.size and (host.min() < 0 or host.max() >= pages):
        raise PtxgenError(f"ptxgen.{fn}: block_table holds page ids outside 0..{pages - 1}")
    return K, page, tshape[1] * page, pages


def _is_contiguous(x):
    return x.is_contiguous() if hasattr(x, "is_contiguous") else x.flags.c_contiguous


def _index_check(fn, name, x, shape):
    kind = str(getattr(x, "dtype", type(x).__name__)).removeprefix("torch.")
    if not hasattr(x, "shape") or kind != "int32" or tuple(x.shape) != tuple(shape):
        raise PtxgenError(f"ptxgen.{fn}: {name} must be an int32 array of shape "
                          f"{tuple(shape)}, got {kind} {tuple(getattr(x, 'shape', ()))}")


def _host_ints(x):
    """An int32 array's values when it is in host memory (None for a CUDA tensor)."""
    if getattr(x, "is_cuda", False):
        return None
    return np.asarray(x.detach().contiguous().numpy() if hasattr(x, "detach") else x)


def _index_arrays(be, on_gpu, like, **named):
    """int32 kernel arrays in the backend's memory: u32 numpy views for the emulator, int32
    torch tensors on like's device for the GPU."""
    out = {}
    for name, x in named.items():
        if x is None:
            continue
        if be == "gpu":
            torch = torch_module()
            out[name] = x if getattr(x, "is_cuda", False) else \
                torch.from_numpy(np.ascontiguousarray(_host_ints(x))).to(
                    like.device if on_gpu else "cuda")
        else:
            out[name] = np.ascontiguousarray(_host_ints(x)).view(np.uint32)
    return out


def attention_decode_impl(q, k_cache, v_cache, cache_seqlens, block_table=None,
                          softmax_scale=None, backend="auto", target=None):
    """(O, LSE): the eager implementation (also the torch custom op's body)."""
    fn = "attention_decode"
    Q = operand("q", q, fn, ("bf16", "f16"))
    if len(Q.shape) != 4:
        raise PtxgenError(f"ptxgen.{fn}: q must be (B, S_q, H, D), got shape {Q.shape}")
    Bn, S_q, H, D = Q.shape
    K, page, S_max, pages = _cache_operands(fn, k_cache, v_cache, cache_seqlens, block_table,
                                            Bn, S_q)
    V = operand("v_cache", v_cache, fn, ("bf16", "f16"))
    dtype = same_dtype(fn, Q, K, V)
    on_gpu = same_place(fn, Q, K, V)
    H_kv = K.shape[2]
    if K.shape[3] != D or H % H_kv:
        raise PtxgenError(f"ptxgen.{fn}: the cache's heads and head dim (H_kv, D) = "
                          f"{K.shape[2:]} do not fit q's (H, D) = ({H}, {D}): H must be a "
                          f"multiple of H_kv")
    if softmax_scale is not None and not (isinstance(softmax_scale, (int, float)) and
                                          math.isfinite(softmax_scale) and softmax_scale > 0):
        raise PtxgenError(f"ptxgen.{fn}: softmax_scale must be a positive number, got "
                          f"{softmax_scale!r}")
    lens = _host_ints(cache_seqlens)
    if lens is not None and lens.size and (lens.min() < S_q or lens.max() > S_max):
        raise PtxgenError(f"ptxgen.{fn}: cache_seqlens must lie in {S_q}..{S_max} (the "
                          f"{S_q} new tokens included), got {lens.min()}..{lens.max()}")
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    from ..ops.attention_decode import AttentionDecode
    op = cached_op(AttentionDecode, dtype, page, None if softmax_scale is None
                   else float(softmax_scale))
    try:
        shape = op.shape(B=Bn, S_q=S_q, H=H, H_kv=H_kv, D=D, S_max=S_max,
                         **({"pages": pages} if page else {}))
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix(fn + ': ')}") from None
    arrays = {"Q": contiguous(q), "K": k_cache, "V": v_cache}
    extra = _index_arrays(be, on_gpu, q, seqlens=cache_seqlens, block_table=block_table)
    res = run_op(fn, op, shape, arch, be, dtype, arrays,
                 {"O": ((Bn, S_q, H, D), dtype), "LSE": ((Bn, S_q, H), "f32")}, on_gpu,
                 Q.is_torch, scalars=extra)
    return res["O"], res["LSE"]


def kv_cache_append(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table=None, *,
                    backend="auto", target=None):
    """Write the new tokens' keys and values into the cache, in place: k_new, v_new
    (B, S_q, H_kv, D) go to positions cache_seqlens[b] .. + S_q - 1 (the lengths before the
    append) of k_cache, v_cache, laid out as attention_decode takes them (contiguous, or
    pages through block_table). Positions past the cache are skipped. Returns None."""
    torch = torch_module()
    if torch is not None and isinstance(k_cache, torch.Tensor):
        ensure_torch_ops()
        if torch.compiler.is_compiling():
            return torch_op("kv_cache_append")(k_cache, v_cache, k_new, v_new, cache_seqlens,
                                               block_table, backend, target)
    return kv_cache_append_impl(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table,
                                backend, target)


def kv_cache_append_impl(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table=None,
                         backend="auto", target=None):
    """The eager implementation (also the torch custom op's body)."""
    fn = "kv_cache_append"
    Kn = operand("k_new", k_new, fn, ("bf16", "f16"))
    Vn = operand("v_new", v_new, fn, ("bf16", "f16"))
    if len(Kn.shape) != 4 or Kn.shape != Vn.shape:
        raise PtxgenError(f"ptxgen.{fn}: k_new and v_new must be (B, S_q, H_kv, D), one shape; "
                          f"got {Kn.shape} and {Vn.shape}")
    Bn, S_q, H_kv, D = Kn.shape
    K, page, S_max, pages = _cache_operands(fn, k_cache, v_cache, cache_seqlens, block_table,
                                            Bn, S_q)
    V = operand("v_cache", v_cache, fn, ("bf16", "f16"))
    dtype = same_dtype(fn, K, V, Kn, Vn)
    on_gpu = same_place(fn, K, V, Kn, Vn)
    if K.shape[2:] != (H_kv, D):
        raise PtxgenError(f"ptxgen.{fn}: the cache's (H_kv, D) = {K.shape[2:]} differ from "
                          f"k_new's {(H_kv, D)}")
    be = pick_backend(fn, backend, on_gpu)
    if be == "gpu" and not on_gpu:
        raise PtxgenError(f"ptxgen.{fn}: backend='gpu' writes the caches in place: pass torch "
                          f"CUDA tensors")
    arch = pick_target(fn, target, be, True)
    from ..ops.attention_decode import KvCacheAppend
    op = cached_op(KvCacheAppend, dtype, page)
    try:
        shape = op.shape(B=Bn, S_q=S_q, H_kv=H_kv, D=D, S_max=S_max,
                         **({"pages": pages} if page else {}))
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix(fn + ': ')}") from None
    extra = _index_arrays(be, on_gpu, k_cache, seqlens=cache_seqlens, block_table=block_table)
    if be == "gpu":
        arrays = dict(K=k_cache, V=v_cache, K_new=contiguous(k_new), V_new=contiguous(v_new),
                      **extra)
        run_gpu(fn, op, shape, arch, dtype, arrays, torch_stream(k_cache),
                k_cache.get_device())
        return None
    host = {n: emu_view(x, dtype) for n, x in (("K", k_cache), ("V", v_cache),
                                               ("K_new", k_new), ("V_new", v_new))}
    run_emu(fn, op, shape, arch, dtype, dict(host, **extra))
    for name, x in (("K", k_cache), ("V", v_cache)):         # where the view was a copy
        if not np.shares_memory(host[name], emu_view(x, dtype)):
            _write_back(x, host[name], dtype)
    return None


# -- packed variable-length sequences ----------------------------------------------------------
def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                     causal=False, scale=None, return_lse=False, backend="auto", target=None):
    """Attention over packed sequences, as flash-attn's flash_attn_varlen_func. q: (total_q, H, D); k, v: (total_k, H_kv, D), H a multiple of H_kv; cu_seqlens_q,
    cu_seqlens_k: (B + 1,) int32 prefix sums of the sequences' lengths (zero-length
    sequences allowed); max_seqlen_q, max_seqlen_k: Python ints at least the longest lengths
    (as flash-attn takes them: no device-to-host read). causal aligns each sequence's mask to
    its bottom-right corner (query i of S_q sees keys j <= i + S_k - S_q). bf16 or f16, D 64
    or 128. Returns O (total_q, H, D) in q's type, and with return_lse the logsumexp
    (H, total_q), f32 (-inf where a row sees no key, whose O is 0). One compiled kernel serves
    every batch (its lengths are launch arguments). Differentiable in q, k, v (bf16):
    ops/attention_varlen_backward.py."""
    torch = torch_module()
    if torch is not None and isinstance(q, torch.Tensor):
        ensure_torch_ops()
        if torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(
                getattr(t, "requires_grad", False) for t in (q, k, v))):
            o, lse = torch_op("attention_varlen")(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                                  int(max_seqlen_q), int(max_seqlen_k),
                                                  bool(causal), scale, backend, target)
            return (o, lse) if return_lse else o
    o, lse = attention_varlen_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, scale, backend, target)
    return (o, lse) if return_lse else o


def attention_varlen_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          causal=False, scale=None, backend="auto", target=None):
    """(O, LSE): the eager implementation (also the torch custom op's body)."""
    fn = "attention_varlen"
    Q, K, V = (operand(n, x, fn, ("bf16", "f16")) for n, x in (("q", q), ("k", k), ("v", v)))
    dtype = same_dtype(fn, Q, K, V)
    on_gpu = same_place(fn, Q, K, V)
    if len(Q.shape) != 3 or len(K.shape) != 3 or K.shape != V.shape or \
            K.shape[2] != Q.shape[2] or Q.shape[1] % K.shape[1]:
        raise PtxgenError(f"ptxgen.{fn}: q must be (total_q, H, D) and k, v (total_k, H_kv, D) "
                          f"with H a multiple of H_kv; got q {Q.shape}, k {K.shape}, "
                          f"v {V.shape}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not _is_contiguous(x):
            raise PtxgenError(f"ptxgen.{fn}: {name} must be contiguous (packed rows)")
    (total_q, H, D), (total_k, H_kv, _) = Q.shape, K.shape
    n = tuple(getattr(cu_seqlens_q, "shape", ()))
    if len(n) != 1 or n[0] < 2:
        raise PtxgenError(f"ptxgen.{fn}: cu_seqlens_q must be (B + 1,) int32, got shape {n}")
    B = n[0] - 1
    for name, x in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _index_check(fn, name, x, (B + 1,))
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise PtxgenError(f"ptxgen.{fn}: {name} must be a positive int, got {m!r}")
    for name, x, total, most in (("cu_seqlens_q", cu_seqlens_q, total_q, max_seqlen_q),
                                 ("cu_seqlens_k", cu_seqlens_k, total_k, max_seqlen_k)):
        host = _host_ints(x)                        # checked where it is in host memory
        if host is not None and (host[0] != 0 or host[-1] != total or
                                 np.any(np.diff(host) < 0) or np.diff(host).max() > most):
            raise PtxgenError(f"ptxgen.{fn}: {name} must rise from 0 to {total} by steps of "
                              f"at most max_seqlen ({most}), got {host.tolist()}")
    if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale)
                                  and scale > 0):
        raise PtxgenError(f"ptxgen.{fn}: scale must be a positive number, got {scale!r}")
    if D not in (64, 128):
        raise PtxgenError(f"ptxgen.{fn}: head dim D must be 64 or 128, got {D}")
    if total_q * H * D >= 2 ** 31:
        raise PtxgenError(f"ptxgen.{fn}: total_q x H x D = {total_q * H * D} elements is over "
                          f"the kernel's 2^31 - 1")
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    from ..ops.attention_varlen import AttentionVarlen
    op = cached_op(AttentionVarlen, dtype, bool(causal), None if scale is None
                   else float(scale), H // H_kv)
    shape = {"B": B, "H": H, "D": D, "max_seqlen_q": int(max_seqlen_q),
             "max_seqlen_k": int(max_seqlen_k), "total_q": total_q, "total_k": total_k}
    arrays = {"Q": q, "K": k, "V": v}
    extra = _index_arrays(be, on_gpu, q, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    res = run_op(fn, op, shape, arch, be, dtype, arrays,
                 {"O": ((total_q, H, D), dtype), "LSE": ((H, total_q), "f32")}, on_gpu,
                 Q.is_torch, scalars=extra)
    return res["O"], res["LSE"]


def attention_varlen_backward_impl(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k,
                                   max_seqlen_q, max_seqlen_k, causal=False, scale=None,
                                   backend="auto", target=None):
    """(dQ, dK, dV) of attention_varlen from its inputs, O, LSE (H, total_q) and dO
    (ops/attention_varlen_backward.py): the body of the custom op its autograd calls."""
    fn = "attention_varlen"
    ops, dtype, on_gpu = _backward_operands(fn, q, k, v, o, lse, do)
    (total_q, H, D), (total_k, H_kv, _) = ops[0].shape, ops[1].shape
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    from ..ops.attention_varlen_backward import AttentionVarlenBackward
    op = cached_op(AttentionVarlenBackward, dtype, bool(causal),
                   None if scale is None else float(scale), H // H_kv)
    shape = {"B": int(cu_seqlens_q.shape[0]) - 1, "H": H, "D": D,
             "max_seqlen_q": int(max_seqlen_q), "max_seqlen_k": int(max_seqlen_k),
             "total_q": total_q, "total_k": total_k}
    arrays = {n: contiguous(x) for n, x in
              (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do), ("LSE", lse))}
    extra = _index_arrays(be, on_gpu, q, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    res = run_op(fn, op, shape, arch, be, dtype, arrays,
                 {"dQ": ((total_q, H, D), dtype), "dK": ((total_k, H_kv, D), dtype),
                  "dV": ((total_k, H_kv, D), dtype)}, on_gpu, ops[0].is_torch, scalars=extra)
    return res["dQ"], res["dK"], res["dV"]


def _write_back(x, bits, dtype):
    if hasattr(x, "copy_"):
        x.copy_(from_emu(bits, dtype, True))
    else:
        x[...] = from_emu(bits, dtype, False)


IMPLS.update(attention=attention_impl, attention_backward=attention_backward_impl,
             attention_decode=attention_decode_impl, kv_cache_append=kv_cache_append_impl,
             attention_varlen=attention_varlen_impl,
             attention_varlen_backward=attention_varlen_backward_impl)
