"""What a kernel argument is, without importing the library it comes from.

numpy arrays live on the host; torch tensors live where their device says; objects with
`__cuda_array_interface__` (Numba device arrays, CuPy, ...) on the GPU. torch is recognised by
its type's module, so ptxgen never imports torch unless the user passed a tensor.
"""
from dataclasses import dataclass

import numpy as np

from .errors import PtxgenError


@dataclass(frozen=True)
class ArrayInfo:
    pointer: int
    dtype: np.dtype
    writeable: bool
    device: str              # "host" or "cuda"
    contiguous: bool
    nbytes: int


def is_tensor(a):
    """A torch.Tensor (recognised without importing torch)."""
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


# torch dtype names (str(t.dtype) without 'torch.') to numpy; bfloat16 has no numpy type: a
# 2-byte void stands in (a bf16 pointer accepts any 2-byte element).
_TORCH_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16",
                 "bfloat16": "V2", "int8": "int8", "int16": "int16", "int32": "int32",
                 "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
                 "uint64": "uint64", "bool": "bool"}


def torch_dtype(t):
    name = str(t.dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise PtxgenError(f"tensors of {t.dtype} cannot be kernel arguments")
    return np.dtype(_TORCH_DTYPES[name])


def array_info(a):
    """ArrayInfo of an array-like argument, None for anything else (a scalar)."""
    if isinstance(a, np.ndarray):
        if a.ndim == 0:
            return None
        return ArrayInfo(a.ctypes.data if a.size else 0, a.dtype, bool(a.flags.writeable),
                         "host", bool(a.flags.c_contiguous or a.flags.f_contiguous), a.nbytes)
    if is_tensor(a):
        dt = torch_dtype(a)
        return ArrayInfo(a.data_ptr(), dt, True, "cuda" if a.is_cuda else "host",
                         a.is_contiguous(), a.numel() * dt.itemsize)
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        dt = np.dtype(cai["typestr"])
        shape = tuple(cai.get("shape", ()))
        n = int(np.prod(shape)) if shape else 1
        strides = cai.get("strides")
        contiguous = strides is None or tuple(strides) == tuple(
            int(np.prod(shape[i + 1:])) * dt.itemsize for i in range(len(shape)))
        return ArrayInfo(int(cai["data"][0]), dt, not cai["data"][1], "cuda", contiguous,
                         n * dt.itemsize)
    return None
