"""Tensor maps (TMA descriptors) encoded by the driver, and launches that pass them by value.

cp.async.bulk.tensor copies a box of a global array into shared memory as a 128-byte tensor map
describes it: the array's address, sizes and strides, the box, the shared-memory swizzle and what
fills elements outside the array (zeros here, which is how a GEMM's M, N and K edges are
handled). The driver's cuTensorMapEncodeTiled (through cuda.bindings) writes that map; kernels
take it as a `.param .align 64 .b8 name[128]` parameter, by value.

A kernel argument is a `TiledMap`: the array plus the box. It is encoded only at launch, once the
array's device address is known (launch() copies numpy arrays to the device first).

cuda.core's launch packs only its own argument types (scalars, device pointers, its own
descriptor class, whose presence depends on the installed cuda.core), so kernels with tensor-map
parameters or a cluster shape are launched through the driver's cuLaunchKernelEx from
cuda.bindings: one host pointer per argument, the cluster as a launch attribute.
"""
import ctypes
from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
# Bytes of one shared-memory row each swizzle mode permutes within (the box's inner extent may
# not exceed it). Source: CUDA Driver API, cuTensorMapEncodeTiled: "when interleave is
# CU_TENSOR_MAP_INTERLEAVE_NONE and swizzle is used, boxDim[0] * elementSize must be <= the
# swizzle size".
SWIZZLE_BYTES = {0: None, 32: 32, 64: 64, 128: 128}
DTYPES = ("bf16", "f16", "f32")
_ITEMSIZE = {"bf16": 2, "f16": 2, "f32": 4}


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

    def encode(self, address):
        """The 128 bytes of the tensor map for the array at device `address`."""
        self.check(address)
        from cuda.bindings import driver as cu
        dtypes = {"bf16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                  "f16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                  "f32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}
        swizzles = {0: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
                    32: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
                    64: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
                    128: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B}
        # dimension 0 is the contiguous one; strides are given for dimensions 1.. in bytes
        u32, u64 = cu.cuuint32_t, cu.cuuint64_t
        err, tmap = cu.cuTensorMapEncodeTiled(
            dtypes[self.dtype], 2, address, [u64(self.cols), u64(self.rows)],
            [u64(self.row_stride * self.itemsize)], [u32(self.box_cols), u32(self.box_rows)],
            [u32(1), u32(1)],
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzles[self.swizzle],
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"tensor map of a {self.rows}x{self.cols} {self.dtype} array, box "
                              f"{self.box_rows}x{self.box_cols}: cuTensorMapEncodeTiled "
                              f"failed ({err.name})")
        return ctypes.string_at(tmap.getPtr(), TENSOR_MAP_BYTES)


def _shape_of(a):
    cai = getattr(a, "__cuda_array_interface__", None)
    return tuple(cai["shape"]) if cai is not None else tuple(np.shape(a))


def _dtype_of(a):
    cai = getattr(a, "__cuda_array_interface__", None)
    return np.dtype(cai["typestr"]) if cai is not None else a.dtype


def needs_driver_launch(raw_args, cluster):
    """Whether a launch must go through cuLaunchKernelEx (tensor maps or a cluster shape)."""
    return cluster is not None or any(isinstance(a, bytes) for a in raw_args)


def driver_launch(fn, grid, block, raw_args, shared_bytes, cluster=None, stream=0):
    """cuLaunchKernelEx on `stream` (a raw handle; 0: the legacy default stream, the one
    Numba's default_stream() and its events use). raw_args: ints (device pointers, 64-bit), numpy scalars, or bytes (a tensor
    map, copied by value). grid counts blocks; cluster: blocks per cluster (x, y, z) or None."""
    from numba.cuda.cudadrv.driver import binding as cu
    bufs = []
    for a in raw_args:
        if isinstance(a, bytes):
            bufs.append(ctypes.create_string_buffer(a, len(a)))
        elif isinstance(a, np.generic):
            bufs.append(ctypes.create_string_buffer(a.tobytes(), a.nbytes))
        else:                                               # a device address
            bufs.append(ctypes.c_uint64(int(a)))
    ptrs = (ctypes.c_void_p * max(1, len(bufs)))(*[ctypes.addressof(b) for b in bufs])
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (int(g) for g in grid)
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (int(b) for b in block)
    cfg.sharedMemBytes = int(shared_bytes)
    cfg.hStream = cu.CUstream(int(stream))
    if cluster is not None:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = \
            (int(c) for c in cluster)
        cfg.attrs = [attr]
        cfg.numAttrs = 1
    else:
        cfg.numAttrs = 0
    err, = cu.cuLaunchKernelEx(cfg, _function(fn), ctypes.addressof(ptrs), 0)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"cuLaunchKernelEx failed ({err.name})")


def max_cluster_ctas(kernel, block, shared_bytes, cluster):
    """CTAs in the clusters of `cluster` CTAs that can be resident at once (the driver's
    cuOccupancyMaxActiveClusters x cluster size): the grid of a persistent clustered kernel.
    Not every GPC holds a whole number of clusters, so this can be below the SM count."""
    from numba.cuda.cudadrv.driver import binding as cu
    kernel.max_dynamic_shared(shared_bytes)
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = int(cluster), 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (int(b) for b in block)
    cfg.sharedMemBytes = int(shared_bytes)
    cfg.hStream = cu.CUstream(int(stream))
    cfg.numAttrs = 0
    err, n = cu.cuOccupancyMaxActiveClusters(_function(kernel.fn), cfg)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"kernel {kernel.name}: cuOccupancyMaxActiveClusters failed "
                          f"({err.name})")
    return int(n) * int(cluster)


def _function(fn):
    """The CUfunction of a Numba kernel (whose handle is cuda.core's CUkernel)."""
    from numba.cuda.cudadrv.driver import binding as cu
    handle = fn.handle
    if isinstance(handle, cu.CUfunction):
        return handle
    kern = handle if isinstance(handle, cu.CUkernel) else cu.CUkernel(int(handle))
    err, f = cu.cuKernelGetFunction(kern)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"cuKernelGetFunction failed ({err.name})")
    return f
