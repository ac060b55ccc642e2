"""The operators as functions on torch tensors and numpy arrays (docs/operators.md).

Each function takes the user's arrays as they are — a torch CUDA tensor runs on the GPU on
torch's current stream, a CPU tensor or a numpy array on the CPU emulator (or on the GPU with
backend="gpu") — allocates and returns the result, and picks the instruction path from the
target: wgmma on sm_90a, mma.sync on the other tensor-core targets, FFMA (SIMT) for fp32.
Kernels are compiled once per (operator, configuration, shape, target) and cached
(library/compiled.py); a cached GPU call only fills in addresses and launches.
"""
import math
import sys

import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..arrays import torch_stream
from ..errors import PtxgenError
from .inputs import emu_empty, emu_view, from_emu, operand, same_dtype, same_place
from .launch import run_emu, run_gpu

BACKENDS = ("auto", "gpu", "emu")
_OPS = {}
_DEVICE_ARCH = {}


def _op(factory, *config):
    """One operator object per configuration: its compiled kernels and plans are cached."""
    key = (factory, tuple(getattr(c, "key", c) for c in config))
    op = _OPS.get(key)
    if op is None:
        op = _OPS[key] = factory(*config)
    return op


def _backend(function, backend, on_gpu):
    if backend not in BACKENDS:
        raise PtxgenError(f"ptxgen.{function}: backend must be one of {', '.join(BACKENDS)}, "
                          f"got {backend!r}")
    if backend == "auto":
        return "gpu" if on_gpu else "emu"
    if backend == "emu" and on_gpu:
        raise PtxgenError(f"ptxgen.{function}: backend='emu' takes CPU tensors or numpy "
                          f"arrays; these are on the GPU (move them with .cpu())")
    return backend


def _target(function, target, backend, tensor_cores):
    """The target a call compiles for: the given one, else the GPU's own (its arch-specific
    variant sm_90a where it has one, for the tensor-core kernels), else on the emulator the
    sm_90a kernel the GPU would run (tensor cores) or the default target (SIMT)."""
    from .. import arch as archmod
    if target is not None:
        try:
            return archmod.check_arch(target)
        except PtxgenError as e:
            raise PtxgenError(f"ptxgen.{function}: target: {e}") from None
    if backend == "gpu":
        arch = _DEVICE_ARCH.get(0)
        if arch is None:
            from ..runtime import device_arch
            arch = _DEVICE_ARCH[0] = device_arch()
        if tensor_cores and arch + "a" == DEFAULT_ARCH_SPECIFIC_TARGET:
            return DEFAULT_ARCH_SPECIFIC_TARGET
        return arch
    return DEFAULT_ARCH_SPECIFIC_TARGET if tensor_cores else DEFAULT_TARGET


def _torch():
    return sys.modules.get("torch")


def _gpu_out(like, shape, dtype, out, function):
    """A result tensor on like's device (or the user's `out=` after checking it)."""
    torch = _torch()
    from .inputs import torch_dtype
    want = torch_dtype(dtype)
    if out is not None:
        if tuple(out.shape) != tuple(shape) or out.dtype != want or out.device != like.device \
                or not out.is_contiguous():
            raise PtxgenError(f"ptxgen.{function}: out must be a contiguous {want} tensor of "
                              f"shape {tuple(shape)} on {like.device}, got {out.dtype} "
                              f"{tuple(out.shape)} on {out.device}")
        return out
    return torch.empty(shape, dtype=want, device=like.device)


_TORCH_WS = {np.dtype(np.uint16): "int16", np.dtype(np.float16): "float16",
             np.dtype(np.float32): "float32", np.dtype(np.uint32): "int32",
             np.dtype(np.uint8): "uint8"}


_WORKSPACES = {}
WORKSPACES_KEPT = 32


def _gpu_workspace(op, shape, arch, like, stream):
    """op's workspace on like's device, initialised as the operator says (workspace_arrays:
    zeros, the fused copy's chunk order) and kept per (operator, shape, target, device,
    stream): the kernels leave it as they found it (split-K's counters back at zero, the pad
    copies rewriting their data, the fused copy's flags by epoch), so launches in one stream
    reuse it; another stream gets its own."""
    key = (id(op), tuple(shape.items()), arch, str(like.device), stream)
    hit = _WORKSPACES.get(key)
    if hit is None:
        torch = _torch()
        ws = {}
        for name, buf in op.workspace_arrays(shape, arch).items():
            kind = _TORCH_WS[np.dtype(buf.dtype)]
            host = buf.view(getattr(np, kind)) if kind in ("int16", "int32") else buf
            ws[name] = torch.from_numpy(np.ascontiguousarray(host)).to(like.device)
        if len(_WORKSPACES) >= WORKSPACES_KEPT:
            _WORKSPACES.pop(next(iter(_WORKSPACES)))
        hit = _WORKSPACES[key] = (op, ws)           # op kept alive: its id stays unique
    return hit[1]


def _to_torch_gpu(function, ops):
    """numpy operands sent to the GPU (backend='gpu'): as torch CUDA tensors."""
    torch = _torch()
    if torch is None:
        try:
            import torch
        except ImportError:
            raise PtxgenError(f"ptxgen.{function}: backend='gpu' with numpy arrays needs "
                              f"PyTorch (pip install 'ptxgen[torch]')") from None
    out = []
    for o in ops:
        v = o.value
        if not o.is_torch:
            t = torch.from_numpy(np.ascontiguousarray(emu_view(v, o.dtype)))
            from .inputs import torch_dtype
            if o.dtype in ("bf16", "e4m3", "e5m2"):
                t = t.view(torch.int16 if o.dtype == "bf16" else torch.uint8).view(
                    torch_dtype(o.dtype))
            v = t.cuda()
        out.append(v)
    return out


# -- matmul ------------------------------------------------------------------------------------
def _layout(x, rows, cols):
    """'row' when x (rows x cols) is row-major, 'col' when its transpose is, else None."""
    s = x.stride() if hasattr(x, "stride") and callable(x.stride) else \
        tuple(v // x.itemsize for v in x.strides)
    if s[1] == 1 and (s[0] == cols or rows == 1):
        return "row"
    if s[0] == 1 and (s[1] == rows or cols == 1):
        return "col"
    return None


def _contiguous(x):
    return x.contiguous() if hasattr(x, "contiguous") else np.ascontiguousarray(x)


def matmul(a, b, *, epilogue=None, out=None, precision="highest", scale_a=None, scale_b=None,
           backend="auto", target=None, **tensors):
    """C = a @ b, or epilogue(a @ b). a: (..., K) (leading dimensions are rows), b: (K, N); torch
    tensors or numpy arrays of bf16, f16 or f32 (numpy bf16: ml_dtypes.bfloat16). bf16 gives a
    bf16 C, f16 and f32 an f32 C (the kernels store f32 or bf16). f32 runs the FP32 SIMT GEMM,
    or with precision="tf32" the tensor cores on tf32. A row-major or transposed (column-major)
    a and b are read in place (a transposed view of b is the kernel's other layout, not a copy).

    epilogue: fused into the tensor-core GEMM's C store — a name ("bias_gelu", "silu", ...:
    ptxgen.epilogues) or a function fn(acc, row, col, **tensors) traced once into IR; `tensors`
    are its extra arrays: 1-D of length N per column (bias[col]), of length M per row, (M, N)
    per element, a Python float a scalar (a 1-D array with M == N is per column).

    FP8 (e4m3 / e5m2, torch.float8_e4m3fn / ml_dtypes.float8_e4m3fn ...): C = scale_a ·
    scale_b · (a @ b) in bf16, a row-major and b column-major (b.T contiguous, as
    torch._scaled_mm takes it); scale_a, scale_b: Python floats (default 1); an epilogue applies
    to the scaled product."""
    if A_FP8.intersection((_kind(a), _kind(b))):
        return fp8_matmul_impl(a, b, scale_a, scale_b, backend, target, out, epilogue, tensors)
    if scale_a is not None or scale_b is not None:
        raise PtxgenError("ptxgen.matmul: scale_a and scale_b apply to fp8 operands")
    if epilogue is not None or tensors:
        # fused epilogues: eager only for now (the custom op's schema has no place for a
        # traced function); autograd through them is not defined
        return matmul_impl(a, b, out, precision, backend, target, epilogue, tensors)
    if _through_torch(a, b) and out is None:
        return _torch_op("matmul")(a, b, precision, backend, target)
    return matmul_impl(a, b, out, precision, backend, target)


def _epilogue_parts(fn, epilogue, tensors, M, N):
    """(the traced Epilogue or None, its kernel arrays, its scalars as numpy scalars)."""
    if epilogue is None and not tensors:
        return None, {}, {}
    epi, extra = _epilogue(fn, epilogue, tensors or {}, M, N)
    scalars = {k: v for k, v in extra.items() if isinstance(v, np.generic)}
    return epi, {k: v for k, v in extra.items() if k not in scalars}, scalars


def _epilogue(fn, epilogue, tensors, M, N):
    """The traced Epilogue of a user's epilogue argument and the kernel arrays of its tensors."""
    from ..schedule.epilogue import Epilogue, Tensor, named_epilogue, trace_epilogue
    from .inputs import kernel_dtype
    specs, arrays = {}, {}
    for name, t in tensors.items():
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            specs[name], arrays[name] = Tensor("scalar"), np.float32(t)
            continue
        dt = kernel_dtype(t) if hasattr(t, "dtype") else None
        if dt not in ("f32", "bf16", "f16"):
            raise PtxgenError(f"ptxgen.{fn}: epilogue tensor {name} must be an f32, bf16 or "
                              f"f16 array or a float, got {getattr(t, 'dtype', type(t).__name__)}")
        shape = tuple(t.shape)
        if shape == (N,):
            kind = "col"
        elif shape == (M,):
            kind = "row"
        elif shape == (M, N):
            kind = "elem"
        elif shape in ((), (1,)):
            specs[name], arrays[name] = Tensor("scalar"), np.float32(float(t.reshape(())))
            continue
        else:
            raise PtxgenError(f"ptxgen.{fn}: epilogue tensor {name} has shape {shape}; want "
                              f"({N},) per column, ({M},) per row or ({M}, {N}) per element")
        specs[name], arrays[name] = Tensor(kind, dt), _contiguous(t)
    if isinstance(epilogue, Epilogue):
        epi = epilogue
    elif isinstance(epilogue, str):
        epi = named_epilogue(epilogue)
    elif callable(epilogue):
        epi = trace_epilogue(epilogue, getattr(epilogue, "__name__", None), **specs)
    else:
        raise PtxgenError(f"ptxgen.{fn}: epilogue must be a name, a function or None, got "
                          f"{type(epilogue).__name__}")
    missing = sorted(set(epi.tensors) - set(arrays))
    extra = sorted(set(arrays) - set(epi.tensors))
    if missing or extra:
        raise PtxgenError(f"ptxgen.{fn}: epilogue {epi.name} takes tensors "
                          f"{', '.join(sorted(epi.tensors)) or 'none'}; "
                          + (f"missing {', '.join(missing)}" if missing else
                             f"unexpected {', '.join(extra)}"))
    for name, spec in epi.tensors.items():
        if spec.kind != specs[name].kind and specs[name].kind != "scalar" \
                and not (spec.kind == "row" and specs[name].kind == "col" and M == N):
            raise PtxgenError(f"ptxgen.{fn}: epilogue tensor {name} must be per {spec.kind}, "
                              f"got shape {tuple(getattr(tensors[name], 'shape', ()))}")
        if spec.dtype != specs[name].dtype and specs[name].kind != "scalar":
            raise PtxgenError(f"ptxgen.{fn}: epilogue tensor {name} must be {spec.dtype}, got "
                              f"{specs[name].dtype}")
    return epi, arrays


A_FP8 = frozenset(("e4m3", "e5m2"))


def _kind(x):
    from .inputs import kernel_dtype
    try:
        return kernel_dtype(x)
    except Exception:                              # noqa: BLE001 - bad input: matmul_impl says
        return None


def fp8_matmul_impl(a, b, scale_a=None, scale_b=None, backend="auto", target=None, out=None,
                    epilogue=None, tensors=None):
    """ptxgen.matmul on fp8 operands: the sm_90a wgmma FP8 GEMM with per-tensor scales (and
    an epilogue on the scaled product)."""
    fn = "matmul"
    A = operand("a", a, fn, tuple(A_FP8))
    B = operand("b", b, fn, tuple(A_FP8))
    on_gpu = same_place(fn, A, B)
    if len(A.shape) != 2 or len(B.shape) != 2 or A.shape[1] != B.shape[0]:
        raise PtxgenError(f"ptxgen.{fn}: fp8 operands must be a (M, K) and b (K, N); got a "
                          f"{A.shape}, b {B.shape}")
    (M, K), N = A.shape, B.shape[1]
    be = _backend(fn, backend, on_gpu)
    arch = _target(fn, target, be, True)
    if not arch.endswith("a"):
        raise PtxgenError(f"ptxgen.{fn}: fp8 runs on the sm_90a wgmma kernel, not {arch}")
    if _layout(a, M, K) != "row":
        a = _contiguous(a)
    if _layout(b, K, N) != "col":                   # K-major B: b.T contiguous
        b = _contiguous(b.T).T
    from ..ops.fp8_matmul import Fp8Matmul
    epi, arrays, scales = _epilogue_parts(fn, epilogue, tensors, M, N)
    op = _op(Fp8Matmul, A.dtype, "bf16", "auto", B.dtype, "pad", "tensor", epi)
    shape = op.shape(M=M, N=N, K=K)
    for name, v in (("scale_a", scale_a), ("scale_b", scale_b)):
        x = np.array([1.0 if v is None else _scalar(fn, name, v)], np.float32)
        scales[name] = _torch().from_numpy(x).to(a.device if A.is_torch else "cuda") \
            if be == "gpu" else x
    return _run(fn, op, shape, arch, be, A.dtype, dict(arrays, A=a, Bt=b.T),
                {"C": ((M, N), "bf16")}, on_gpu, A.is_torch, out, scales)["C"]


def matmul_impl(a, b, out=None, precision="highest", backend="auto", target=None,
                epilogue=None, tensors=None):
    """The eager implementation (also the torch custom op's body)."""
    fn = "matmul"
    A = operand("a", a, fn, ("bf16", "f16", "f32"))
    B = operand("b", b, fn, ("bf16", "f16", "f32"))
    dtype = same_dtype(fn, A, B)
    on_gpu = same_place(fn, A, B)
    if precision not in ("highest", "tf32"):
        raise PtxgenError(f"ptxgen.{fn}: precision must be 'highest' or 'tf32', got "
                          f"{precision!r}")
    if len(A.shape) < 2 or len(B.shape) != 2:
        raise PtxgenError(f"ptxgen.{fn}: a must be (..., K) with at least 2 dimensions and b "
                          f"(K, N); got a {A.shape}, b {B.shape}")
    lead, K = A.shape[:-1], A.shape[-1]
    if B.shape[0] != K:
        raise PtxgenError(f"ptxgen.{fn}: a is {A.shape} and b is {B.shape}: inner dimensions "
                          f"{K} and {B.shape[0]} differ")
    M, N = int(np.prod(lead)), B.shape[1]
    if min(M, N, K) == 0:
        raise PtxgenError(f"ptxgen.{fn}: empty operand (M={M}, N={N}, K={K})")
    av = a if len(A.shape) == 2 else _flatten(a, M, K)
    be = _backend(fn, backend, on_gpu)
    tensor_cores = dtype != "f32" or precision == "tf32"
    arch = _target(fn, target, be, tensor_cores)
    if tensor_cores:
        from ..ops.tc_matmul import TcMatmul
        tc_dtype = "tf32" if dtype == "f32" else dtype
        al, bl = _layout(av, M, K), _layout(b, K, N)
        mma_sync = not arch.endswith("a")
        if al is None or (tc_dtype == "tf32" or mma_sync) and al != "row":
            av, al = _contiguous(av), "row"
        if bl is None or (tc_dtype == "tf32" or mma_sync) and bl != "col":
            b, bl = _contiguous(b.T).T if hasattr(b, "contiguous") else \
                np.ascontiguousarray(b.T).T, "col"
        c_dtype = "bf16" if dtype == "bf16" else "f32"
        epi, arrays, scalars = _epilogue_parts(fn, epilogue, tensors, M, N)
        op = _op(TcMatmul, tc_dtype, c_dtype, "auto", al, bl, "auto", epi)
        arrays.update({("A" if al == "row" else "At"): av if al == "row" else av.T,
                       ("Bt" if bl == "col" else "B"): b.T if bl == "col" else b})
    else:
        if epilogue is not None or tensors:
            raise PtxgenError(f"ptxgen.{fn}: epilogues run on the tensor-core GEMM: pass bf16 "
                              f"or f16 operands, or f32 with precision='tf32'")
        from ..ops.matmul import Matmul
        c_dtype = "f32"
        op = _op(Matmul)
        arrays = {"A": _contiguous(av), "B": _contiguous(b)}
        scalars = {}
    shape = op.shape(M=M, N=N, K=K)
    result = _run(fn, op, shape, arch, be, dtype, arrays, {"C": ((M, N), c_dtype)}, on_gpu,
                  A.is_torch, out, scalars)["C"]
    return result.reshape(*lead, N) if len(lead) != 1 else result


def _flatten(x, M, K):
    try:
        return x.reshape(M, K)
    except Exception:                                  # noqa: BLE001 - torch or numpy
        return _contiguous(x).reshape(M, K)


def _run(fn, op, shape, arch, backend, dtype, arrays, outputs, on_gpu, is_torch, out=None,
         scalars=None):
    """Launch op with input `arrays` (name -> user array) and fresh outputs
    ({name: (shape, kernel dtype)}); returns {name: result in the user's kind}. `scalars`:
    arguments passed as they are (numpy scalars; arrays already in the backend's memory)."""
    scalars = scalars or {}
    if backend == "gpu":
        ins = dict(arrays)
        if not on_gpu:
            ins = dict(zip(ins, _to_torch_gpu(fn, [operand(n, v, fn, (_dt(v),))
                                                   for n, v in ins.items()])))
        like = next(iter(ins.values()))
        outs = {n: _gpu_out(like, s, d, out if len(outputs) == 1 else None, fn)
                for n, (s, d) in outputs.items()}
        stream = torch_stream(like)
        dev = dict(ins, **outs, **_gpu_workspace(op, shape, arch, like, stream), **scalars)
        run_gpu(fn, op, shape, arch, dtype, dev, stream, like.get_device())
        if on_gpu:
            return outs
        return {n: _back_to_numpy(t, outputs[n][1]) for n, t in outs.items()}
    host = {n: emu_view(v, _dt(v)) for n, v in arrays.items()}
    outs = {n: emu_empty(s, d) for n, (s, d) in outputs.items()}
    run_emu(fn, op, shape, arch, dtype, dict(host, **outs, **scalars))
    res = {n: from_emu(o, outputs[n][1], is_torch) for n, o in outs.items()}
    if out is not None and len(res) == 1:
        (name, r), = res.items()
        out[...] = r if not is_torch else r.to(out.dtype)
        res[name] = out
    return res


def _dt(v):
    from .inputs import kernel_dtype
    return kernel_dtype(v)


def _back_to_numpy(t, dtype):
    from .inputs import ml_dtype
    torch = _torch()
    t = t.cpu()
    if dtype in ("bf16", "e4m3", "e5m2"):
        return t.view(torch.int16 if dtype == "bf16" else torch.uint8).numpy().view(
            ml_dtype(dtype))
    return t.numpy()


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
        if _through_torch(q, k, v) and not _torch().compiler.is_compiling():
            from .torch_ops import no_backward
            o, lse = no_backward(o, lse, q, k, v)
    elif _through_torch(q, k, v):
        o, lse = _torch_op("attention")(q, k, v, bool(causal), scale, backend, target)
    else:
        o, lse = attention_impl(q, k, v, causal, scale, backend, target)
    return (o, lse) if return_lse else o


_MOD_ARRAYS = {}


def _mod_arrays(op, shape, device):
    """The mods' kernel arrays (block lists, extra tensors), made once per operator, shape and
    device (torch tensors on a GPU device, numpy arrays for the emulator)."""
    key = (id(op), tuple(shape.values()), str(device))
    hit = _MOD_ARRAYS.get(key)
    if hit is None:
        hit = op.mod_arrays(shape)
        if device is not None:
            torch = _torch()
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
    be = _backend(fn, backend, on_gpu)
    arch = _target(fn, target, be, True)
    from ..ops.attention import Attention
    op = _op(Attention, dtype, bool(causal), None if scale is None else float(scale), "auto",
             score_mod, mask_mod, block_mask, kv_group)
    try:
        shape = op.shape(B=Bn, H=H, S=S, D=D)
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix('attention: ')}") from None
    arrays = {"Q": _contiguous(q), "K": _contiguous(k), "V": _contiguous(v)}
    extra = {}
    if score_mod is not None or mask_mod is not None or block_mask is not None:
        op.for_target(arch)
        device = (q.device if Q.is_torch else "cuda") if be == "gpu" else None
        extra = _mod_arrays(op, shape, device)
    res = _run(fn, op, shape, arch, be, dtype, arrays,
               {"O": ((Bn, H, S, D), dtype), "LSE": ((Bn, H, S), "f32")}, on_gpu, Q.is_torch,
               scalars=extra)
    return res["O"], res["LSE"]


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
    torch = _torch()
    if torch is not None and isinstance(q, torch.Tensor):
        if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False)
                                           for t in (q, k_cache, v_cache)):
            raise PtxgenError("ptxgen.attention_decode: inference only, no gradient: call it "
                              "under torch.no_grad() or on detached tensors")
        if not _TORCH_OPS:
            _register_torch_ops()
        if torch.compiler.is_compiling():
            o, lse = _torch_op("attention_decode")(q, k_cache, v_cache, cache_seqlens,
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
            torch = _torch()
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
    be = _backend(fn, backend, on_gpu)
    arch = _target(fn, target, be, True)
    from ..ops.attention_decode import AttentionDecode
    op = _op(AttentionDecode, dtype, page, None if softmax_scale is None
             else float(softmax_scale))
    try:
        shape = op.shape(B=Bn, S_q=S_q, H=H, H_kv=H_kv, D=D, S_max=S_max,
                         **({"pages": pages} if page else {}))
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix(fn + ': ')}") from None
    arrays = {"Q": _contiguous(q), "K": k_cache, "V": v_cache}
    extra = _index_arrays(be, on_gpu, q, seqlens=cache_seqlens, block_table=block_table)
    res = _run(fn, op, shape, arch, be, dtype, arrays,
               {"O": ((Bn, S_q, H, D), dtype), "LSE": ((Bn, S_q, H), "f32")}, on_gpu,
               Q.is_torch, scalars=extra)
    return res["O"], res["LSE"]


def kv_cache_append(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table=None, *,
                    backend="auto", target=None):
    """Write the new tokens' keys and values into the cache, in place: k_new, v_new
    (B, S_q, H_kv, D) go to positions cache_seqlens[b] .. + S_q - 1 (the lengths before the
    append) of k_cache, v_cache, laid out as attention_decode takes them (contiguous, or
    pages through block_table). Positions past the cache are skipped. Returns None."""
    torch = _torch()
    if torch is not None and isinstance(k_cache, torch.Tensor):
        if not _TORCH_OPS:
            _register_torch_ops()
        if torch.compiler.is_compiling():
            return _torch_op("kv_cache_append")(k_cache, v_cache, k_new, v_new, cache_seqlens,
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
    be = _backend(fn, backend, on_gpu)
    if be == "gpu" and not on_gpu:
        raise PtxgenError(f"ptxgen.{fn}: backend='gpu' writes the caches in place: pass torch "
                          f"CUDA tensors")
    arch = _target(fn, target, be, True)
    from ..ops.attention_decode import KvCacheAppend
    op = _op(KvCacheAppend, dtype, page)
    try:
        shape = op.shape(B=Bn, S_q=S_q, H_kv=H_kv, D=D, S_max=S_max,
                         **({"pages": pages} if page else {}))
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix(fn + ': ')}") from None
    extra = _index_arrays(be, on_gpu, k_cache, seqlens=cache_seqlens, block_table=block_table)
    if be == "gpu":
        arrays = dict(K=k_cache, V=v_cache, K_new=_contiguous(k_new), V_new=_contiguous(v_new),
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


def _write_back(x, bits, dtype):
    if hasattr(x, "copy_"):
        x.copy_(from_emu(bits, dtype, True))
    else:
        x[...] = from_emu(bits, dtype, False)
def attention_backward_impl(q, k, v, o, lse, do, causal=False, scale=None, backend="auto",
                            target=None):
    """(dQ, dK, dV) of attention from the forward's inputs, its O and LSE and dO
    (ops/attention_backward.py): the body of the torch custom op attention's autograd calls."""
    fn = "attention"
    ops = [operand(n, x, fn, ("bf16", "f16")) for n, x in
           (("q", q), ("k", k), ("v", v), ("o", o), ("grad", do))]
    dtype = same_dtype(fn, *ops)
    L = operand("lse", lse, fn, ("f32",))
    on_gpu = same_place(fn, *ops, L)
    if dtype != "bf16":
        raise PtxgenError(f"ptxgen.{fn}: backward not implemented for {dtype} (bf16 only)")
    Q, K = ops[0], ops[1]
    Bn, H, S, D = Q.shape
    be = _backend(fn, backend, on_gpu)
    arch = _target(fn, target, be, True)
    from ..ops.attention_backward import AttentionBackward
    op = _op(AttentionBackward, dtype, bool(causal), None if scale is None else float(scale),
             "auto", H // K.shape[1])
    try:
        shape = op.shape(B=Bn, H=H, S=S, D=D)
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix('attention backward: ')}") \
            from None
    arrays = {n: _contiguous(x) for n, x in
              (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do), ("LSE", lse))}
    res = _run(fn, op, shape, arch, be, dtype, arrays,
               {"dQ": (Q.shape, dtype), "dK": (K.shape, dtype), "dV": (K.shape, dtype)},
               on_gpu, Q.is_torch)
    return res["dQ"], res["dK"], res["dV"]


# -- the fp32 memory-bound operators -----------------------------------------------------------
def _f32_call(fn, factory, named, shape_of, outputs, scalars=None, backend="auto", target=None):
    """Run one of the fp32 SIMT operators: `named` {kernel array name: (argument name, value)},
    shape_of(first operand's shape) -> the operator's shape, outputs {name: shape function}."""
    ops = [operand(arg, v, fn, ("f32",)) for arg, v in named.values()]
    on_gpu = same_place(fn, *ops) if len(ops) > 1 else ops[0].on_gpu
    be = _backend(fn, backend, on_gpu)
    arch = _target(fn, target, be, False)
    op = _op(factory)
    try:
        shape = op.shape(**shape_of(ops[0].shape))
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {e}") from None
    arrays = {name: _contiguous(v) for name, (_, v) in named.items()}
    scal = {k: np.float32(v) for k, v in (scalars or {}).items()}
    res = _run(fn, op, shape, arch, be, "f32", arrays,
               {n: (f(shape), "f32") for n, f in outputs.items()}, on_gpu, ops[0].is_torch,
               scalars=scal)
    return res["out"]


def _rows(function, shape):
    if len(shape) != 2:
        raise PtxgenError(f"ptxgen.{function}: x must be 2-D (rows, cols), got shape {shape}")
    return {"M": shape[0], "N": shape[1]}


def _flat(function, *shapes):
    if len({tuple(s) for s in shapes}) > 1:
        raise PtxgenError(f"ptxgen.{function}: operands differ in shape: "
                          f"{', '.join(str(tuple(s)) for s in shapes)}")
    return {"n": int(np.prod(shapes[0]))}


def softmax(x, *, backend="auto", target=None):
    """Row-wise softmax of a 2-D f32 array (rows, cols)."""
    return _public("softmax", (x,), backend, target)


def softmax_impl(x, *, backend="auto", target=None):
    from ..ops.softmax import Softmax
    return _f32_call("softmax", Softmax, {"x": ("x", x)}, lambda s: _rows("softmax", s),
                     {"out": lambda sh: (sh["M"], sh["N"])}, backend=backend, target=target)


def transpose(x, *, backend="auto", target=None):
    """The transpose of a 2-D f32 array, as a new (cols, rows) array."""
    return _public("transpose", (x,), backend, target)


def transpose_impl(x, *, backend="auto", target=None):
    from ..ops.transpose import Transpose
    return _f32_call("transpose", Transpose, {"x": ("x", x)}, lambda s: _rows("transpose", s),
                     {"out": lambda sh: (sh["N"], sh["M"])}, backend=backend, target=target)


def row_sum(x, *, backend="auto", target=None):
    """The sum of each row of a 2-D f32 array."""
    return _public("row_sum", (x,), backend, target)


def row_sum_impl(x, *, backend="auto", target=None):
    from ..ops.reduce import RowReduce
    return _f32_call("row_sum", lambda: RowReduce("sum"), {"x": ("x", x)},
                     lambda s: _rows("row_sum", s), {"out": lambda sh: (sh["M"],)},
                     backend=backend, target=target)


def row_max(x, *, backend="auto", target=None):
    """The largest element of each row of a 2-D f32 array."""
    return _public("row_max", (x,), backend, target)


def row_max_impl(x, *, backend="auto", target=None):
    from ..ops.reduce import RowReduce
    return _f32_call("row_max", lambda: RowReduce("max"), {"x": ("x", x)},
                     lambda s: _rows("row_max", s), {"out": lambda sh: (sh["M"],)},
                     backend=backend, target=target)


def saxpy(a, x, y, *, backend="auto", target=None):
    """a·x + y for a float a and f32 arrays x, y of one shape."""
    return _public("saxpy", (a, x, y,), backend, target)


def saxpy_impl(a, x, y, *, backend="auto", target=None):
    from ..ops.saxpy import Saxpy
    shape = getattr(x, "shape", ())
    out = _f32_call("saxpy", Saxpy, {"x": ("x", x), "y": ("y", y)},
                    lambda s: _flat("saxpy", s, getattr(y, "shape", ())),
                    {"out": lambda sh: (sh["n"],)}, {"a": _scalar("saxpy", "a", a)},
                    backend, target)
    return out.reshape(shape)


def add(x, y, *, backend="auto", target=None):
    """x + y for f32 arrays of one shape."""
    return _public("add", (x, y,), backend, target)


def add_impl(x, y, *, backend="auto", target=None):
    from ..ops.elementwise import Add
    shape = getattr(x, "shape", ())
    out = _f32_call("add", Add, {"x": ("x", x), "y": ("y", y)},
                    lambda s: _flat("add", s, getattr(y, "shape", ())),
                    {"out": lambda sh: (sh["n"],)}, backend=backend, target=target)
    return out.reshape(shape)


def scale(s, x, *, backend="auto", target=None):
    """s·x for a float s and an f32 array x."""
    return _public("scale", (s, x,), backend, target)


def scale_impl(s, x, *, backend="auto", target=None):
    from ..ops.elementwise import Scale
    shape = getattr(x, "shape", ())
    out = _f32_call("scale", Scale, {"x": ("x", x)}, lambda sh: _flat("scale", sh),
                    {"out": lambda sh: (sh["n"],)}, {"s": _scalar("scale", "s", s)},
                    backend, target)
    return out.reshape(shape)


def _scalar(function, name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(v)):
        raise PtxgenError(f"ptxgen.{function}: {name} must be a finite number, got {v!r}")
    return float(v)


# -- which way a public call goes ---------------------------------------------------------------
# Straight to the implementation (numpy arrays, and torch tensors in eager code that needs no
# gradient: the fewest microseconds of Python), or through the registered torch custom op
# (library/torch_ops.py) when torch.compile traces the call or autograd must record it.
def _public(name, args, backend, target):
    tensors = [a for a in args if hasattr(a, "shape")]
    if _through_torch(*tensors):
        return _torch_op(name)(*args, backend, target)
    return IMPLS[name](*args, backend=backend, target=target)


def _through_torch(*tensors):
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if not _TORCH_OPS:              # register the custom ops before any torch.compile trace
        _register_torch_ops()
    if not isinstance(tensors[0], torch.Tensor):
        return False
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _torch_op(name):
    """torch.ops.ptxgen.<name>: the custom op over this module's implementation (registered
    by _through_torch)."""
    return getattr(sys.modules["torch"].ops.ptxgen, name)


def _register_torch_ops():
    from . import torch_ops
    torch_ops.register(IMPLS)
    _TORCH_OPS.append(True)


_TORCH_OPS = []
IMPLS = {"matmul": matmul_impl, "attention": attention_impl,
         "attention_backward": attention_backward_impl, "softmax": softmax_impl,
         "attention_decode": attention_decode_impl, "kv_cache_append": kv_cache_append_impl,
         "transpose": transpose_impl, "row_sum": row_sum_impl, "row_max": row_max_impl,
         "saxpy": saxpy_impl, "add": add_impl, "scale": scale_impl}


# -- grouped matmul (mixture of experts) -------------------------------------------------------
def grouped_matmul(x, w, offs, *, backend="auto", target=None):
    """Each expert's tokens times its weights in one persistent launch, as torch._grouped_mm:
    x (M, K) holds every expert's tokens in order, w (G, K, N) the experts' weights, offs (G,)
    the end row of each expert's tokens (ascending, the last at most M). bf16 gives a bf16
    result, f16 an f32 one; rows after offs[-1] are zero. w may be contiguous (G, K, N) (read
    through wgmma's transpose; K a multiple of 64) or a transposed view of a contiguous
    (G, N, K) array (nn.Linear's layout, read K-major in place)."""
    fn = "grouped_matmul"
    X = operand("x", x, fn, ("bf16", "f16"))
    W = operand("w", w, fn, ("bf16", "f16"))
    dtype = same_dtype(fn, X, W)
    on_gpu = same_place(fn, X, W)
    if len(X.shape) != 2 or len(W.shape) != 3 or W.shape[1] != X.shape[1]:
        raise PtxgenError(f"ptxgen.{fn}: x must be (M, K) and w (G, K, N); got x {X.shape}, "
                          f"w {W.shape}")
    (M, K), (G, _, N) = X.shape, W.shape
    rows = np.asarray(offs.detach().cpu() if hasattr(offs, "detach") else offs)
    if rows.shape != (G,) or rows.dtype.kind not in "iu" or np.any(np.diff(rows) < 0) \
            or (G and (rows[0] < 0 or rows[-1] > M)):
        raise PtxgenError(f"ptxgen.{fn}: offs must be {G} ascending integer end rows within "
                          f"M={M}, got {rows.tolist() if rows.size < 16 else rows.shape}")
    be = _backend(fn, backend, on_gpu)
    arch = _target(fn, target, be, True)
    ws = W.strides()
    if ws[1] == 1 and ws[2] == K:                       # a transposed view of (G, N, K)
        w_layout, warr = "nk", w.transpose(1, 2) if W.is_torch else np.swapaxes(w, 1, 2)
    else:
        w_layout, warr = "kn", _contiguous(w)
    x = _contiguous(x)
    out = "bf16" if dtype == "bf16" else "f32"
    from ..ops.grouped_matmul import GroupedMatmul
    op = _op(GroupedMatmul, dtype, out, "auto", "offsets", None, w_layout)
    try:
        shape = op.shape(M=M, N=N, K=K, G=G)
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix('grouped_matmul: ')}") from None
    rows = rows.astype(np.uint32)
    if be == "gpu":
        torch = _torch()
        from .inputs import torch_dtype
        dev = x.device if X.is_torch else "cuda"
        extra = {"rows": torch.from_numpy(rows.view(np.int32)).to(dev),
                 "C": torch.zeros((M, N), dtype=torch_dtype(out), device=dev)}
    else:
        extra = {"rows": rows, "C": np.zeros((M, N), np.uint16 if out == "bf16" else np.float32)}
    _run(fn, op, shape, arch, be, dtype, {"X": x, "W": warr}, {}, on_gpu, X.is_torch,
         scalars=extra)
    c = extra["C"]
    if be == "gpu":
        return c if on_gpu else _back_to_numpy(c, out)
    from .inputs import from_emu
    return from_emu(c, out, X.is_torch)
