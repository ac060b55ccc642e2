"""Tensor maps (TMA descriptors) encoded by the driver, and launches that pass them by value.

cp.async.bulk.tensor copies a box of a global array into shared memory as a 128-byte tensor map
describes it: the array's address, sizes and strides, the box, the shared-memory swizzle and what
fills elements outside the array (zeros here, which is how a GEMM's M, N and K edges are
handled). The driver's cuTensorMapEncodeTiled (through cuda.bindings) writes that map; kernels
take it as a `.param .align 64 .b8 name[128]` parameter, by value.

A kernel argument is a `TiledMap` (ptxgen/arrays.py: the array plus the box, checked with the
driver's rules). It is encoded here only at launch, once the array's device address is known
(launch() copies numpy arrays to the device first); the emulator reads the same TiledMap.

cuda.core's launch packs only its own argument types (scalars, device pointers, its own
descriptor class, whose presence depends on the installed cuda.core), so kernels with tensor-map
parameters or a cluster shape are launched through the driver's cuLaunchKernelEx from
cuda.bindings: one host pointer per argument, the cluster as a launch attribute.
"""
import ctypes

import numpy as np

from ..arrays import TENSOR_MAP_BYTES
from ..errors import LaunchError


def encode_tiled(tm, address):
    """The 128 bytes of the driver's tensor map for TiledMap `tm` of the array at device
    `address`."""
    tm.check(address)
    from cuda.bindings import driver as cu
    dtypes = {"bf16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
              "f16": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
              "f32": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
              "u8": cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8}
    swizzles = {0: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
                32: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
                64: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
                128: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B}
    # dimension 0 is the contiguous one; strides are given for dimensions 1.. in bytes
    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        dtypes[tm.dtype], 2, address, [u64(tm.cols), u64(tm.rows)],
        [u64(tm.row_stride * tm.itemsize)], [u32(tm.box_cols), u32(tm.box_rows)],
        [u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzles[tm.swizzle],
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"tensor map of a {tm.rows}x{tm.cols} {tm.dtype} array, box "
                          f"{tm.box_rows}x{tm.box_cols}: cuTensorMapEncodeTiled "
                          f"failed ({err.name})")
    return ctypes.string_at(tmap.getPtr(), TENSOR_MAP_BYTES)


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
    err, = cu.cuLaunchKernelEx(cfg, cu_function(fn), ctypes.addressof(ptrs), 0)
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
    cfg.hStream = cu.CUstream(0)
    cfg.numAttrs = 0
    err, n = cu.cuOccupancyMaxActiveClusters(cu_function(kernel.fn), cfg)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"kernel {kernel.name}: cuOccupancyMaxActiveClusters failed "
                          f"({err.name})")
    return int(n) * int(cluster)


def cu_function(fn):
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
