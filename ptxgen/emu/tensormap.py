"""Tensor maps for the emulator: the host-side description TMA copies (cp.async.bulk.tensor) use.

On the GPU a tensor map is a 128-byte opaque object the driver encodes (cuTensorMapEncodeTiled)
and the kernel receives as a `.param .align 64 .b8 tmap[128]` argument. The emulator cannot read
the driver's encoding, so a kernel run by `emulate` receives a `TensorMap` in that argument's
place: the same fields cuTensorMapEncodeTiled takes (data type from the array, rank, global
address, dimensions and byte strides, box, element strides, interleave, swizzle, out-of-bounds
fill), validated with the driver's rules, and written into the 128 parameter bytes in ptxgen's
own layout (magic, address, sizes), which is what the emulated copy decodes. A library
operator's `TiledMap` (ptxgen/arrays.py, what the GPU runtime encodes with the driver) is
accepted too: `from_tiled` turns it into the equivalent TensorMap.
"""
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import PtxgenError

MAGIC = b"PTXGTMAP"
SIZE = 128
_HEAD = struct.Struct("<8sQBBBBB3x")             # magic, address, esize, kind, rank, swizzle, oob
_SWIZZLE = {None: 0, 32: 1, 64: 2, 128: 3}
_KINDS = {"f": 0, "i": 1, "u": 2, "b": 2}
_OOB = {"zero": 0, "nan": 1}


@dataclass
class TensorMap:
    """A tiled tensor map over `array` (C-contiguous, or with explicit `dims`/`strides`).

    box: the box's extent per dimension, innermost first (cuTensorMapEncodeTiled's boxDim);
    dims: the tensor's extent per dimension, innermost first (default: the array's shape
    reversed); strides: byte strides of dimensions 1.. (default: the array's); swizzle: None,
    32, 64 or 128 bytes; oob: 'zero' (FLOAT_OOB_FILL_NONE) or 'nan'
    (FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)."""
    array: np.ndarray
    box: tuple
    swizzle: object = None
    oob: str = "zero"
    dims: tuple = None
    strides: tuple = None

    def __post_init__(self):
        a = self.array
        if not isinstance(a, np.ndarray) or a.dtype.itemsize not in (1, 2, 4, 8):
            raise PtxgenError("TensorMap needs a numpy array of 1-, 2-, 4- or 8-byte elements")
        self.dims = tuple(int(d) for d in (self.dims or a.shape[::-1]))
        rank = len(self.dims)
        if self.strides is None:
            if not a.flags.c_contiguous:
                raise PtxgenError("TensorMap: pass a C-contiguous array, or dims and strides")
            self.strides = tuple(int(s) for s in a.strides[::-1][1:])
        self.strides = tuple(int(s) for s in self.strides)
        self.box = tuple(int(b) for b in self.box)
        es = a.dtype.itemsize
        if not 1 <= rank <= 5:
            raise PtxgenError(f"TensorMap rank must be 1..5, not {rank}")
        if len(self.box) != rank or len(self.strides) != rank - 1:
            raise PtxgenError(f"TensorMap of rank {rank} needs {rank} box sizes and {rank - 1} "
                              f"strides, got {len(self.box)} and {len(self.strides)}")
        if any(not 1 <= b <= 256 for b in self.box):
            raise PtxgenError(f"TensorMap box sizes must be 1..256, got {self.box}")
        if (self.box[0] * es) % 16:
            raise PtxgenError(f"TensorMap inner box of {self.box[0] * es} bytes is not a "
                              f"multiple of 16")
        if any(s % 16 for s in self.strides):
            raise PtxgenError(f"TensorMap strides must be multiples of 16 bytes, got "
                              f"{self.strides}")
        if self.swizzle not in _SWIZZLE:
            raise PtxgenError(f"TensorMap swizzle must be None, 32, 64 or 128, not "
                              f"{self.swizzle!r}")
        if self.swizzle and self.box[0] * es != self.swizzle:
            raise PtxgenError(f"TensorMap with {self.swizzle}-byte swizzle: the inner box must "
                              f"be {self.swizzle} bytes (ptxgen's emulator models that case), "
                              f"got {self.box[0] * es}")
        if self.oob not in _OOB:
            raise PtxgenError(f"TensorMap oob must be 'zero' or 'nan', not {self.oob!r}")
        end = sum((d - 1) * s for d, s in zip(self.dims, (es,) + self.strides)) + es
        if end > a.nbytes:
            raise PtxgenError(f"TensorMap dims {self.dims} with strides {self.strides} reach "
                              f"byte {end}, past the array's {a.nbytes}")

    def encode(self, address):
        """The 128 parameter bytes for a tensor placed at global `address`."""
        a = self.array
        head = _HEAD.pack(MAGIC, address, a.dtype.itemsize, _KINDS[a.dtype.kind],
                          len(self.dims), _SWIZZLE[self.swizzle], _OOB[self.oob])
        body = struct.pack("<5Q4Q5H", *(self.dims + (0,) * (5 - len(self.dims))),
                           *(self.strides + (0,) * (4 - len(self.strides))),
                           *(self.box + (0,) * (5 - len(self.box))))
        data = head + body
        return data + bytes(SIZE - len(data))


def from_tiled(tm, address):
    """The TensorMap of TiledMap `tm` (a 2-D row-major array in box_rows x box_cols boxes, zeros
    outside), checked with the driver's rules for its array at `address`."""
    if not isinstance(tm.array, np.ndarray):
        raise PtxgenError(f"tensor map of a {tm.rows}x{tm.cols} {tm.dtype} array: the emulator "
                          f"needs a numpy array, got {type(tm.array).__name__}")
    tm.check(address)
    return TensorMap(tm.array, (tm.box_cols, tm.box_rows), swizzle=tm.swizzle or None,
                     dims=(tm.cols, tm.rows), strides=(tm.row_stride * tm.itemsize,))


@dataclass
class DecodedMap:
    address: int
    esize: int
    kind: int
    dims: tuple
    strides: tuple        # byte strides of every dimension, innermost (the element size) first
    box: tuple
    swizzle: object
    oob: str


def decode(data):
    """DecodedMap from 128 bytes, or None when they are not ptxgen's encoding."""
    data = bytes(data)
    if len(data) < SIZE or data[:8] != MAGIC:
        return None
    _, addr, es, kind, rank, sw, oob = _HEAD.unpack_from(data)
    vals = struct.unpack_from("<5Q4Q5H", data, _HEAD.size)
    dims, strides, box = vals[:rank], vals[5:5 + rank - 1], vals[9:9 + rank]
    return DecodedMap(addr, es, kind, tuple(dims), (es,) + tuple(strides), tuple(box),
                      {v: k for k, v in _SWIZZLE.items()}[sw],
                      {v: k for k, v in _OOB.items()}[oob])
