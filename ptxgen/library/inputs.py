"""What the user handed an operator: torch tensors or numpy arrays, their device, element type
and layout, turned into the arrays a kernel takes (and back) without the user seeing bit
patterns. bf16 and fp8 numpy arrays are `ml_dtypes` types (ml_dtypes.bfloat16, float8_e4m3fn,
float8_e5m2), as JAX uses them; torch's own dtypes for tensors."""
from dataclasses import dataclass

import numpy as np

from ..arrays import is_tensor
from ..errors import PtxgenError

# element type names of the kernels, from torch dtype names and numpy dtype names
_TORCH = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float8_e4m3fn": "e4m3",
          "float8_e5m2": "e5m2"}
_NUMPY = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float8_e4m3fn": "e4m3",
          "float8_e5m2": "e5m2"}
# how the emulator holds each type: the kernels' parameters are bits or plain floats
_EMU_VIEW = {"bf16": np.uint16, "f16": np.float16, "f32": np.float32, "e4m3": np.uint8,
             "e5m2": np.uint8}


@dataclass(frozen=True)
class Operand:
    """One user array: `value` as given, its kernel element type, where it lives."""
    name: str                # the Python argument's name, for errors
    value: object
    dtype: str               # "bf16", "f16", "f32", "e4m3", "e5m2"
    on_gpu: bool
    is_torch: bool

    @property
    def shape(self):
        return tuple(self.value.shape)

    def strides(self):
        """Strides in elements."""
        if self.is_torch:
            return tuple(self.value.stride())
        return tuple(s // self.value.itemsize for s in self.value.strides)


def operand(name, value, function, allowed):
    """The Operand of argument `name` of `function`, or a one-line PtxgenError."""
    if is_tensor(value):
        dt = _TORCH.get(str(value.dtype).removeprefix("torch."))
        on_gpu = bool(value.is_cuda)
        is_torch = True
    elif isinstance(value, np.ndarray):
        dt = _NUMPY.get(value.dtype.name)
        on_gpu, is_torch = False, False
    else:
        raise PtxgenError(f"ptxgen.{function}: {name} must be a torch tensor or a numpy array, "
                          f"got {type(value).__name__}")
    if dt not in allowed:
        kind = value.dtype if is_torch else value.dtype.name
        raise PtxgenError(f"ptxgen.{function}: {name} has dtype {kind}; supported: "
                          f"{', '.join(allowed)}")
    return Operand(name, value, dt, on_gpu, is_torch)


def kernel_dtype(value):
    """The kernel element type of a torch tensor or numpy array (None if it has none)."""
    if is_tensor(value):
        return _TORCH.get(str(value.dtype).removeprefix("torch."))
    return _NUMPY.get(np.asarray(value).dtype.name)


def same_dtype(function, *ops):
    first = ops[0]
    for o in ops[1:]:
        if o.dtype != first.dtype:
            raise PtxgenError(f"ptxgen.{function}: {o.name} is {o.dtype} but {first.name} is "
                              f"{first.dtype}; pass both in one type")
    return first.dtype


def same_place(function, *ops):
    """All on the GPU or all on the host; torch and numpy not mixed."""
    if len({o.on_gpu for o in ops}) > 1:
        where = ", ".join(f"{o.name} on {'cuda' if o.on_gpu else 'cpu'}" for o in ops)
        raise PtxgenError(f"ptxgen.{function}: inputs on different devices ({where})")
    if len({o.is_torch for o in ops}) > 1:
        raise PtxgenError(f"ptxgen.{function}: mix of torch tensors and numpy arrays; pass "
                          f"one kind")
    return ops[0].on_gpu


def emu_view(value, dtype):
    """A host numpy array as the emulator's kernel parameters hold `dtype` (bf16 as uint16
    bits ...), sharing memory where it can."""
    if is_tensor(value):
        value = value.detach()
        if value.is_cuda:
            value = value.cpu()
        if dtype in ("bf16", "e4m3", "e5m2"):
            import torch
            bits = {"bf16": torch.int16, "e4m3": torch.uint8, "e5m2": torch.uint8}[dtype]
            value = value.contiguous().view(bits)
        value = value.contiguous().numpy()
    value = np.ascontiguousarray(value)
    return value.view(_EMU_VIEW[dtype])


def emu_empty(shape, dtype):
    """An emulator output array of `dtype`, poisoned (NaN) so an unwritten element shows."""
    if dtype == "bf16":
        return np.full(shape, 0x7FC0, dtype=np.uint16)
    if dtype in ("e4m3", "e5m2"):
        return np.full(shape, 0x7F, dtype=np.uint8)
    return np.full(shape, np.nan, dtype=_EMU_VIEW[dtype])


def ml_dtype(dtype):
    """The numpy dtype users see for a kernel element type."""
    if dtype in ("f16", "f32"):
        return np.dtype(np.float16 if dtype == "f16" else np.float32)
    import ml_dtypes
    return np.dtype({"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
                     "e5m2": ml_dtypes.float8_e5m2}[dtype])


def torch_dtype(dtype):
    import torch
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
            "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[dtype]


def from_emu(bits, dtype, like_torch, device=None):
    """The emulator's output array as the user's kind: a numpy array of the ml_dtypes type, or
    a torch tensor (on `device`)."""
    arr = np.asarray(bits).view(ml_dtype(dtype)) if dtype in ("bf16", "e4m3", "e5m2") \
        else np.asarray(bits)
    if not like_torch:
        return arr
    import torch
    if dtype in ("bf16", "e4m3", "e5m2"):
        raw = torch.from_numpy(np.ascontiguousarray(bits).view(
            np.int16 if dtype == "bf16" else np.uint8))
        t = raw.view(torch_dtype(dtype))
    else:
        t = torch.from_numpy(np.ascontiguousarray(arr))
    return t if device is None else t.to(device)
