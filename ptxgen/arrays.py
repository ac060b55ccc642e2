"""What a kernel argument is, without importing the library it comes from.

numpy arrays live on the host; torch tensors live where their device says; objects with
`__cuda_array_interface__` (Numba device arrays, CuPy, ...) on the GPU. torch is recognised by
its type's module, so ptxgen never imports torch unless the user passed a tensor.

A `TiledMap` describes a tensor-map argument (a 2-D array read by TMA in boxes): the GPU runtime
encodes it with the driver at launch (runtime/tensormap.py), the emulator reads the same object.
"""
from dataclasses import dataclass

import numpy as np

from .errors import LaunchError, PtxgenError


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
                 "uint64": "uint64", "bool": "bool",
                 "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}     # fp8: their bytes


def torch_stream(t):
    """The raw handle of torch's current stream on CUDA tensor t's device (torch is imported
    already: t is its tensor)."""
    import sys
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)   # no Stream object: faster
    if raw is not None:
        return raw(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


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


TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
# Bytes of one shared-memory row each swizzle mode permutes within (the box's inner extent may
# not exceed it). Source: CUDA Driver API, cuTensorMapEncodeTiled: "when interleave is
# CU_TENSOR_MAP_INTERLEAVE_NONE and swizzle is used, boxDim[0] * elementSize must be <= the
# swizzle size".
SWIZZLE_BYTES = {0: None, 32: 32, 64: 64, 128: 128}
DTYPES = ("bf16", "f16", "f32", "u8")
_ITEMSIZE = {"bf16": 2, "f16": 2, "f32": 4, "u8": 1}       # u8: fp8 bytes


@dataclass(frozen=True, eq=False)
class TiledMap:
    """A row-major 2-D array (rows x cols, `row_stride` elements apart; default cols) read in
    box_rows x box_cols boxes, swizzled `swizzle` bytes wide, zeros outside the array.
    `array`: a numpy array (launch() copies it to the device) or a device array."""
    array: object
    dtype: str
    box_rows: int
    box_cols: int
    swizzle: int = 128
    rows: int = None
    cols: int = None
    row_stride: int = None

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise LaunchError(f"tensor map: element type must be one of {', '.join(DTYPES)}, "
                              f"got {self.dtype!r}")
        shape = _shape_of(self.array)
        if self.rows is None or self.cols is None:
            if len(shape) != 2:
                raise LaunchError(f"tensor map: the array must be 2-D (rows, cols), got shape "
                                  f"{shape}")
            object.__setattr__(self, "rows", self.rows or shape[0])
            object.__setattr__(self, "cols", self.cols or shape[1])
        if self.row_stride is None:
            object.__setattr__(self, "row_stride", self.cols)

    @property
    def itemsize(self):
        return _ITEMSIZE[self.dtype]

    @property
    def box_bytes(self):
        return self.box_rows * self.box_cols * self.itemsize

    def check(self, address):
        """One-line LaunchError for what cuTensorMapEncodeTiled would refuse."""
        what = f"tensor map of a {self.rows}x{self.cols} {self.dtype} array"
        if np.dtype(_dtype_of(self.array)).itemsize != self.itemsize:
            raise LaunchError(f"{what}: the array's elements are "
                              f"{np.dtype(_dtype_of(self.array)).itemsize} bytes, not "
                              f"{self.itemsize}")
        if address % 16:
            raise LaunchError(f"{what}: the address {address:#x} is not 16-byte aligned")
        if (self.row_stride * self.itemsize) % 16:
            raise LaunchError(f"{what}: rows are {self.row_stride * self.itemsize} bytes apart, "
                              f"not a multiple of 16 (pad the rows)")
        if not (1 <= self.box_rows <= 256 and 1 <= self.box_cols <= 256):
            raise LaunchError(f"{what}: box {self.box_rows}x{self.box_cols} exceeds 256 per "
                              f"dimension")
        if self.swizzle not in SWIZZLE_BYTES:
            raise LaunchError(f"{what}: swizzle must be 0, 32, 64 or 128 bytes, got "
                              f"{self.swizzle}")
        if self.swizzle and self.box_cols * self.itemsize > self.swizzle:
            raise LaunchError(f"{what}: box rows of {self.box_cols * self.itemsize} bytes exceed "
                              f"the {self.swizzle}-byte swizzle")

def _shape_of(a):
    cai = getattr(a, "__cuda_array_interface__", None)
    return tuple(cai["shape"]) if cai is not None else tuple(np.shape(a))


def _dtype_of(a):
    cai = getattr(a, "__cuda_array_interface__", None)
    return np.dtype(cai["typestr"]) if cai is not None else a.dtype


# -- fp8 (e4m3, e5m2): numpy has no such types, so their bytes travel as uint8 -------------------
F64 = np.dtype(np.float64)
FP8 = {"e4m3": (4, 3, 7, 448.0), "e5m2": (5, 2, 15, 57344.0)}   # exp bits, frac bits, bias, max


def to_fp8(x, fmt, relu=False):
    """float64 → fp8 bytes (uint8), round to nearest even, .satfinite (|x| > max → ±max, NaN →
    the format's NaN 0x7F), as cvt.rn.satfinite.{e4m3x2,e5m2x2} does."""
    eb, fb, bias, top = FP8[fmt]
    x = np.asarray(x, F64)
    if relu:
        x = np.where(x < 0, 0.0, x)
    sign = np.signbit(x)
    a = np.abs(x)
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    _, e = np.frexp(np.where(a == 0, 1.0, a))
    e = np.maximum(e - 1, 1 - bias)                      # exponent of the binade (normal or not)
    quantum = np.ldexp(1.0, e - fb)
    q = np.minimum(np.rint(a / quantum) * quantum, top)
    _, e2 = np.frexp(np.where(q == 0, 1.0, q))
    e2 = e2 - 1
    normal = q >= np.ldexp(1.0, 1 - bias)
    frac = np.where(normal, q / np.ldexp(1.0, e2 - fb) - (1 << fb), q / np.ldexp(1.0, 1 - bias - fb))
    expf = np.where(normal, e2 + bias, 0)
    bits = (expf.astype(np.int64) << fb) | np.rint(frac).astype(np.int64)
    bits = np.where(sign, bits | 0x80, bits)
    bits = np.where(nan, 0x7F, bits)
    return bits.astype(np.uint8)


def from_fp8(bits, fmt):
    """fp8 bytes → exact float64 (e4m3's 0x7F/0xFF are NaN and it has no infinities; e5m2
    follows IEEE: exponent all ones is inf or NaN)."""
    eb, fb, bias, _ = FP8[fmt]
    b = np.asarray(bits, np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    expf = (b >> fb) & ((1 << eb) - 1)
    frac = b & ((1 << fb) - 1)
    val = np.where(expf == 0, np.ldexp(frac.astype(F64), 1 - bias - fb),
                   np.ldexp((frac + (1 << fb)).astype(F64), expf - bias - fb))
    if fmt == "e4m3":
        nan = (b & 0x7F) == 0x7F
        inf = np.zeros_like(nan)
    else:
        nan = (expf == 31) & (frac != 0)
        inf = (expf == 31) & (frac == 0)
    val = np.where(inf, np.inf, val)
    val = np.where(nan, np.nan, val)
    return sign * val
