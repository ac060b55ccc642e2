"""Launch plans: an operator's launches prepared once, then replayed for new tensors with only
their addresses filled in — the cached path of ptxgen's public functions (ptxgen/library).

A plan records, per kernel argument, where its value comes from: a named array's address, a
tensor map of a named array (encoded by the driver once per address and cached), or a fixed
scalar. Each launch then writes the addresses into argument buffers allocated once and calls
cuLaunchKernelEx on the caller's stream: no validation, no allocation, nothing that grows with
the problem size. The first launch of a plan goes through runtime.driver's full checks."""
import ctypes

import numpy as np

from ..arrays import TENSOR_MAP_BYTES, TiledMap, is_tensor
from ..errors import LaunchError
from .cuda import numba_cuda
from .driver import GpuKernel, checked_launch, first_line
from .tensormap import cu_function, encode_tiled

_MAP_CACHE_LIMIT = 4096


def load_image(cubin, name, params, directives=(), written=()):
    """A GpuKernel from a cubin (the kernel cache's disk copy: no PTX JIT in a new process)."""
    cuda = numba_cuda()
    from cuda.core import ObjectCode
    try:
        mod = cuda.current_context().create_module_image(ObjectCode.from_cubin(cubin))
        fn = mod.get_function(name)
    except Exception as e:
        raise LaunchError(f"kernel {name}: the driver rejected the cached cubin: "
                          f"{first_line(e)}") from None
    return GpuKernel(name, fn, list(params), None, directives, written)


def _source(arg, arrays):
    """How one argument of a step is made from `arrays` (name -> array)."""
    if isinstance(arg, TiledMap):
        for name, a in arrays.items():
            if a is arg.array:
                return ("map", name, arg)
        raise LaunchError("a tensor map of an array the plan does not know")
    if isinstance(arg, np.generic):
        for name, a in arrays.items():
            if a is arg:
                return ("scalar", name)
        return ("value", arg)
    if is_tensor(arg) or hasattr(arg, "__cuda_array_interface__"):
        for name, a in arrays.items():
            if a is arg:
                return ("ptr", name)
        raise LaunchError("an array the plan does not know")
    return ("value", arg)


class StepPlan:
    """One launch of `kernel` (GpuKernel) with fixed grid, block, shared bytes and cluster."""

    def __init__(self, kernel, grid, block, shared, args, arrays):
        self.kernel = kernel
        grid, block, _ = checked_launch(kernel, grid, block, args, shared)
        self.sources = [_source(a, arrays) for a in args]
        self.maps = {}
        self.bufs = []
        for src in self.sources:
            if src[0] == "map":
                self.bufs.append(ctypes.create_string_buffer(TENSOR_MAP_BYTES))
            elif src[0] == "ptr":
                self.bufs.append(ctypes.c_uint64(0))
            else:
                v = src[1] if src[0] == "value" else arrays[src[1]]
                raw = v.tobytes() if isinstance(v, np.generic) else np.int64(v).tobytes()
                self.bufs.append(ctypes.create_string_buffer(raw, len(raw)))
        self.ptrs = (ctypes.c_void_p * max(1, len(self.bufs)))(
            *[ctypes.addressof(b) for b in self.bufs])
        from numba.cuda.cudadrv.driver import binding as cu
        self._cu = cu
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (int(g) for g in grid)
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (int(b) for b in block)
        cfg.sharedMemBytes = int(shared)
        cfg.numAttrs = 0
        self.cfg = cfg
        self.fn = cu_function(kernel.fn)
        self.stream = None

    def _map_bytes(self, i, tm, address):
        """The tensor map of argument i's array at `address` (the same sizes every call: the
        plan belongs to one shape), encoded once per address."""
        key = (i, address)
        b = self.maps.get(key)
        if b is None:
            if len(self.maps) > _MAP_CACHE_LIMIT:
                self.maps.clear()
            b = self.maps[key] = encode_tiled(tm, address)
        return b

    def launch(self, addresses, stream):
        """Launch with arrays at `addresses` (name -> device address; a scalar argument's name
        -> its numpy scalar) on the raw stream handle `stream`."""
        for i, src in enumerate(self.sources):
            kind = src[0]
            if kind == "ptr":
                self.bufs[i].value = addresses[src[1]]
            elif kind == "map":
                ctypes.memmove(self.bufs[i], self._map_bytes(i, src[2], addresses[src[1]]),
                               TENSOR_MAP_BYTES)
            elif kind == "scalar":
                raw = addresses[src[1]].tobytes()
                ctypes.memmove(self.bufs[i], raw, len(raw))
        cu = self._cu
        if stream != self.stream:
            self.cfg.hStream = cu.CUstream(int(stream))
            self.stream = stream
        err, = cu.cuLaunchKernelEx(self.cfg, self.fn, ctypes.addressof(self.ptrs), 0)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"kernel {self.kernel.name}: launch failed ({err.name})")
