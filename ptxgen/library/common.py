"""What every public operator function shares (docs/operators.md): the operand's backend and
target, one cached operator object per configuration, the launch of an operator on the GPU or
the CPU emulator with its results in the user's kind of array (run_op), the GPU workspaces
kept per stream, and the way a public call goes: straight to its implementation or through the
registered torch custom op.

The functions themselves live by family — matmul_ops.py (matmul with its fp8 scales and
epilogues, grouped_matmul), attention_ops.py (attention and its backward, attention_decode,
kv_cache_append), elementwise_ops.py (softmax, transpose, row_sum, row_max, saxpy, add,
scale) — and each adds its implementations to IMPLS when it is imported (ptxgen/library's
__init__ imports them all), so the torch custom ops (library/torch_ops.py) wrap every one while
no module here imports a family back.

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
from .inputs import emu_empty, emu_view, from_emu, operand
from .launch import run_emu, run_gpu

BACKENDS = ("auto", "gpu", "emu")
_OPS = {}
_DEVICE_ARCH = {}


def cached_op(factory, *config):
    """One operator object per configuration: its compiled kernels and plans are cached."""
    key = (factory, tuple(getattr(c, "key", c) for c in config))
    op = _OPS.get(key)
    if op is None:
        op = _OPS[key] = factory(*config)
    return op


def pick_backend(function, backend, on_gpu):
    if backend not in BACKENDS:
        raise PtxgenError(f"ptxgen.{function}: backend must be one of {', '.join(BACKENDS)}, "
                          f"got {backend!r}")
    if backend == "auto":
        return "gpu" if on_gpu else "emu"
    if backend == "emu" and on_gpu:
        raise PtxgenError(f"ptxgen.{function}: backend='emu' takes CPU tensors or numpy "
                          f"arrays; these are on the GPU (move them with .cpu())")
    return backend


def pick_target(function, target, backend, tensor_cores):
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


def torch_module():
    return sys.modules.get("torch")


def _gpu_out(like, shape, dtype, out, function):
    """A result tensor on like's device (or the user's `out=` after checking it)."""
    torch = torch_module()
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
        torch = torch_module()
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
    torch = torch_module()
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


def contiguous(x):
    """A contiguous input; a torch tensor detached (inside a custom op it may still require
    grad, and such a tensor refuses __cuda_array_interface__)."""
    return x.detach().contiguous() if hasattr(x, "detach") else np.ascontiguousarray(x)


def run_op(fn, op, shape, arch, backend, dtype, arrays, outputs, on_gpu, is_torch, out=None,
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
        return {n: back_to_numpy(t, outputs[n][1]) for n, t in outs.items()}
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


def back_to_numpy(t, dtype):
    from .inputs import ml_dtype
    torch = torch_module()
    t = t.cpu()
    if dtype in ("bf16", "e4m3", "e5m2"):
        return t.view(torch.int16 if dtype == "bf16" else torch.uint8).numpy().view(
            ml_dtype(dtype))
    return t.numpy()


def scalar_arg(function, name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(v)):
        raise PtxgenError(f"ptxgen.{function}: {name} must be a finite number, got {v!r}")
    return float(v)


# -- which way a public call goes ---------------------------------------------------------------
# Straight to the implementation (numpy arrays, and torch tensors in eager code that needs no
# gradient: the fewest microseconds of Python), or through the registered torch custom op
# (library/torch_ops.py) when torch.compile traces the call or autograd must record it.
def public_call(name, args, backend, target):
    tensors = [a for a in args if hasattr(a, "shape")]
    if through_torch(*tensors):
        return torch_op(name)(*args, backend, target)
    return IMPLS[name](*args, backend=backend, target=target)


def through_torch(*tensors):
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if not _TORCH_OPS:              # register the custom ops before any torch.compile trace
        ensure_torch_ops()
    if not isinstance(tensors[0], torch.Tensor):
        return False
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def torch_op(name):
    """torch.ops.ptxgen.<name>: the custom op over the name's implementation in IMPLS
    (registered by ensure_torch_ops)."""
    return getattr(sys.modules["torch"].ops.ptxgen, name)


def ensure_torch_ops():
    """Register the torch custom ops (library/torch_ops.py) over IMPLS, once."""
    if not _TORCH_OPS:
        from . import torch_ops
        torch_ops.register(IMPLS)
        _TORCH_OPS.append(True)


_TORCH_OPS = []
IMPLS = {}      # name -> eager implementation: each family module adds its own on import
