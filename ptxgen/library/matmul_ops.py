"""matmul (bf16, f16, f32 and tf32; fp8 with per-tensor scales; fused epilogues) and
grouped_matmul (mixture of experts) on torch tensors and numpy arrays (docs/operators.md)."""
import numpy as np

from ..errors import PtxgenError
from .common import (IMPLS, back_to_numpy, cached_op, contiguous, pick_backend, pick_target,
                     run_op, scalar_arg, through_torch, torch_module, torch_op)
from .inputs import from_emu, operand, same_dtype, same_place


def _layout(x, rows, cols):
    """'row' when x (rows x cols) is row-major, 'col' when its transpose is, else None."""
    s = x.stride() if hasattr(x, "stride") and callable(x.stride) else \
        tuple(v // x.itemsize for v in x.strides)
    if s[1] == 1 and (s[0] == cols or rows == 1):
        return "row"
    if s[0] == 1 and (s[1] == rows or cols == 1):
        return "col"
    return None


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
    if through_torch(a, b) and out is None:
        return torch_op("matmul")(a, b, precision, backend, target)
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
    from ..schedule.epilogue import Epilogue, Tensor, trace_epilogue
    from ..schedule.named_epilogues import named_epilogue
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
        specs[name], arrays[name] = Tensor(kind, dt), contiguous(t)
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
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    if not arch.endswith("a"):
        raise PtxgenError(f"ptxgen.{fn}: fp8 runs on the sm_90a wgmma kernel, not {arch}")
    if _layout(a, M, K) != "row":
        a = contiguous(a)
    if _layout(b, K, N) != "col":                   # K-major B: b.T contiguous
        b = contiguous(b.T).T
    from ..ops.fp8_matmul import Fp8Matmul
    epi, arrays, scales = _epilogue_parts(fn, epilogue, tensors, M, N)
    op = cached_op(Fp8Matmul, A.dtype, "bf16", "auto", B.dtype, "pad", "tensor", epi)
    shape = op.shape(M=M, N=N, K=K)
    for name, v in (("scale_a", scale_a), ("scale_b", scale_b)):
        x = np.array([1.0 if v is None else scalar_arg(fn, name, v)], np.float32)
        # on the GPU a fill kernel, not a host copy: no wait for the GPU, graph-capturable
        scales[name] = torch_module().full((1,), float(x[0]), dtype=torch_module().float32,
                                           device=a.device if A.is_torch else "cuda") \
            if be == "gpu" else x
    return run_op(fn, op, shape, arch, be, A.dtype, dict(arrays, A=a, Bt=b.T),
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
    be = pick_backend(fn, backend, on_gpu)
    tensor_cores = dtype != "f32" or precision == "tf32"
    arch = pick_target(fn, target, be, tensor_cores)
    if tensor_cores:
        from ..ops.tc_matmul import TcMatmul
        tc_dtype = "tf32" if dtype == "f32" else dtype
        al, bl = _layout(av, M, K), _layout(b, K, N)
        mma_sync = not arch.endswith("a")
        if al is None or (tc_dtype == "tf32" or mma_sync) and al != "row":
            av, al = contiguous(av), "row"
        if bl is None or (tc_dtype == "tf32" or mma_sync) and bl != "col":
            b, bl = contiguous(b.T).T if hasattr(b, "contiguous") else \
                np.ascontiguousarray(b.T).T, "col"
        c_dtype = "bf16" if dtype == "bf16" else "f32"
        epi, arrays, scalars = _epilogue_parts(fn, epilogue, tensors, M, N)
        op = cached_op(TcMatmul, tc_dtype, c_dtype, "auto", al, bl, "auto", epi)
        arrays.update({("A" if al == "row" else "At"): av if al == "row" else av.T,
                       ("Bt" if bl == "col" else "B"): b.T if bl == "col" else b})
    else:
        if epilogue is not None or tensors:
            raise PtxgenError(f"ptxgen.{fn}: epilogues run on the tensor-core GEMM: pass bf16 "
                              f"or f16 operands, or f32 with precision='tf32'")
        from ..ops.matmul import Matmul
        c_dtype = "f32"
        op = cached_op(Matmul)
        arrays = {"A": contiguous(av), "B": contiguous(b)}
        scalars = {}
    shape = op.shape(M=M, N=N, K=K)
    result = run_op(fn, op, shape, arch, be, dtype, arrays, {"C": ((M, N), c_dtype)}, on_gpu,
                    A.is_torch, out, scalars)["C"]
    return result.reshape(*lead, N) if len(lead) != 1 else result


def _flatten(x, M, K):
    try:
        return x.reshape(M, K)
    except Exception:                                  # noqa: BLE001 - torch or numpy
        return contiguous(x).reshape(M, K)


# -- grouped matmul (mixture of experts) -------------------------------------------------------
def grouped_matmul(x, w, offs, *, backend="auto", target=None):
    """Each expert's tokens times its weights in one persistent launch, as torch._grouped_mm:
    x (M, K) holds every expert's tokens in order, w (G, K, N) the experts' weights, offs (G,)
    the end row of each expert's tokens (ascending, the last at most M). bf16 gives a bf16
    result, f16 an f32 one; rows after offs[-1] are zero. w may be contiguous (G, K, N) (read
    through wgmma's transpose; K a multiple of 64) or a transposed view of a contiguous
    (G, N, K) array (nn.Linear's layout, read K-major in place). offs on the GPU are passed to
    the kernel unread (no wait for the GPU; the call captures in a CUDA graph), so their values
    are not checked there; host offsets are."""
    fn = "grouped_matmul"
    X = operand("x", x, fn, ("bf16", "f16"))
    W = operand("w", w, fn, ("bf16", "f16"))
    dtype = same_dtype(fn, X, W)
    on_gpu = same_place(fn, X, W)
    if len(X.shape) != 2 or len(W.shape) != 3 or W.shape[1] != X.shape[1]:
        raise PtxgenError(f"ptxgen.{fn}: x must be (M, K) and w (G, K, N); got x {X.shape}, "
                          f"w {W.shape}")
    (M, K), (G, _, N) = X.shape, W.shape
    on_device = getattr(offs, "is_cuda", False)
    if on_device:
        # offsets on the GPU go to the kernel as they are: checking their values would make
        # every call wait for the GPU (and break CUDA-graph capture)
        kind = str(offs.dtype).removeprefix("torch.")
        if tuple(offs.shape) != (G,) or kind not in ("int32", "int64") or not on_gpu:
            raise PtxgenError(f"ptxgen.{fn}: offs must be {G} int32/int64 end rows on x's "
                              f"device, got {kind} {tuple(offs.shape)} on {offs.device}")
        rows = np.zeros(G, np.int64)               # stands in for the shape checks below
    else:
        rows = np.asarray(offs.detach() if hasattr(offs, "detach") else offs)
    if rows.shape != (G,) or rows.dtype.kind not in "iu" or np.any(np.diff(rows) < 0) \
            or (G and (rows[0] < 0 or rows[-1] > M)):
        raise PtxgenError(f"ptxgen.{fn}: offs must be {G} ascending integer end rows within "
                          f"M={M}, got {rows.tolist() if rows.size < 16 else rows.shape}")
    be = pick_backend(fn, backend, on_gpu)
    arch = pick_target(fn, target, be, True)
    ws = W.strides()
    if ws[1] == 1 and ws[2] == K:                       # a transposed view of (G, N, K)
        w_layout, warr = "nk", w.transpose(1, 2) if W.is_torch else np.swapaxes(w, 1, 2)
    else:
        w_layout, warr = "kn", contiguous(w)
    x = contiguous(x)
    out = "bf16" if dtype == "bf16" else "f32"
    from ..ops.grouped_matmul import GroupedMatmul
    op = cached_op(GroupedMatmul, dtype, out, "auto", "offsets", None, w_layout)
    try:
        shape = op.shape(M=M, N=N, K=K, G=G)
    except PtxgenError as e:
        raise PtxgenError(f"ptxgen.{fn}: {str(e).removeprefix('grouped_matmul: ')}") from None
    rows = rows.astype(np.uint32)
    if be == "gpu":
        torch = torch_module()
        from .inputs import torch_dtype
        dev = x.device if X.is_torch else "cuda"
        extra = {"rows": offs.to(torch.int32).contiguous() if on_device else
                 torch.from_numpy(rows.view(np.int32)).to(dev),
                 "C": torch.zeros((M, N), dtype=torch_dtype(out), device=dev)}
    else:
        extra = {"rows": rows, "C": np.zeros((M, N), np.uint16 if out == "bf16" else np.float32)}
    run_op(fn, op, shape, arch, be, dtype, {"X": x, "W": warr}, {}, on_gpu, X.is_torch,
           scalars=extra)
    c = extra["C"]
    if be == "gpu":
        return c if on_gpu else back_to_numpy(c, out)
    return from_emu(c, out, X.is_torch)


IMPLS.update(matmul=matmul_impl)
