"""Load PTX through Numba's CUDA driver, check launches before they happen, launch, time.

numba.cuda is imported inside functions so `import ptxgen` works on machines with no GPU or no
CUDA driver. Launches go through cuda.core exactly as numba-cuda launches its own kernels.
"""
import functools
import hashlib

import numpy as np

from ..errors import LaunchError, PtxgenError
from ..launch import check_launch_shape, launch_dims
from .tensormap import TENSOR_MAP_BYTES, TiledMap, driver_launch, needs_driver_launch

DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024


@functools.lru_cache(maxsize=1)
def gpu_available():
    """True when Numba finds a usable CUDA GPU (never raises)."""
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:
        return False


def _cuda():
    if not gpu_available():
        raise LaunchError("no CUDA GPU is available (use --backend emu to run on the CPU)")
    from numba import cuda
    return cuda


class GpuKernel:
    """A kernel loaded from PTX: its Numba function object and its parameter list."""

    def __init__(self, name, fn, params, ptx, directives=()):
        self.name, self.fn, self.params, self.ptx = name, fn, params, ptx
        self.directives = tuple(directives)     # .reqntid/.maxntid, checked before launch

    @property
    def registers(self):
        return self.fn.attrs.regs

    def max_dynamic_shared(self, nbytes):
        """Raise the kernel's dynamic shared-memory limit (needed above 48 KB)."""
        from numba.cuda.cudadrv.driver import binding, driver
        attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        try:
            driver.cuKernelSetAttribute(attr, int(nbytes), self.fn.handle, self.fn.device.id)
        except Exception as e:
            raise LaunchError(f"kernel {self.name}: cannot allow {nbytes} bytes of dynamic "
                              f"shared memory: {e}") from None


_loaded = {}


def load_kernel(ptx_text, name, params, directives=()):
    """Load PTX (cached by text) and return the named kernel. `params` (the IR parameter list)
    and `directives` (the kernel's performance directives) are checked before each launch."""
    cuda = _cuda()
    key = (hashlib.sha1(ptx_text.encode()).hexdigest(), name)
    if key not in _loaded:
        ctx = cuda.current_context()
        try:
            mod = ctx.create_module_ptx(ptx_text)
            fn = mod.get_function(name)
        except Exception as e:
            raise LaunchError(f"kernel {name}: the driver rejected the PTX: "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") \
                from None
        _loaded[key] = GpuKernel(name, fn, list(params), ptx_text, directives)
    return _loaded[key]


def validate_launch(kernel_name, params, grid, block, args, shared_bytes=0,
                    shared_limit=DEFAULT_DYNAMIC_SHARED_LIMIT, directives=()):
    """Check a launch against the kernel's parameters and the device limits; raise a
    PtxgenError naming the kernel (and parameter) on the first problem."""
    grid = launch_dims(grid, "grid", kernel_name)
    block = launch_dims(block, "block", kernel_name)
    if len(args) != len(params):
        raise PtxgenError(f"kernel {kernel_name} takes {len(params)} arguments "
                          f"({', '.join(p.name for p in params)}), got {len(args)}")
    for p, a in zip(params, args):
        if p.array:
            if not isinstance(a, TiledMap) or p.nbytes != TENSOR_MAP_BYTES:
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} is a "
                                  f"{p.nbytes}-byte array; pass a runtime.TiledMap (tensor "
                                  f"map), got {type(a).__name__}")
        elif p.pointer is not None:
            ptr = _pointer_value(a)
            if ptr is None:
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} is a pointer; "
                                  f"pass an array, not {type(a).__name__}")
            if ptr % p.pointer.align:
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} must be "
                                  f"{p.pointer.align}-byte aligned (address {ptr:#x})")
            dt = _array_dtype(a)
            if dt is not None and dt.itemsize != p.pointer.elem.nbytes:
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} points to "
                                  f"{p.pointer.elem}, got an array of {dt}")
        else:
            want = np.dtype(_NUMPY_OF[p.type.name])
            if not isinstance(a, np.generic) or a.dtype != want:
                got = a.dtype if isinstance(a, np.generic) else type(a).__name__
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} is {p.type}; pass "
                                  f"np.{want}(...), got {got}")
    check_launch_shape(kernel_name, grid, block, directives)
    if shared_bytes < 0 or shared_bytes > shared_limit:
        raise PtxgenError(f"kernel {kernel_name}: {shared_bytes} bytes of dynamic shared memory "
                          f"exceed the limit of {shared_limit} (pass a larger shared_limit to "
                          f"raise the kernel's limit, up to the device maximum)")
    return grid, block


_NUMPY_OF = {"u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "s8": "int8",
             "s16": "int16", "s32": "int32", "s64": "int64", "f32": "float32",
             "f64": "float64", "b8": "uint8", "b16": "uint16", "b32": "uint32", "b64": "uint64",
             "f16": "float16"}


def _pointer_value(a):
    if isinstance(a, np.ndarray):
        return a.ctypes.data if a.size else 0
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    return None


def _array_dtype(a):
    if isinstance(a, np.ndarray):
        return a.dtype
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        return np.dtype(cai["typestr"])
    return None


def launch(kernel, grid, block, args, shared_bytes=0, sync=True, cluster=None):
    """Launch a loaded kernel. numpy arrays are copied to the device and back after the
    launch; Numba device arrays and __cuda_array_interface__ objects are used in place.
    A TiledMap argument is encoded for its array's device copy. cluster: CTAs per cluster."""
    cuda = _cuda()
    grid, block = _checked(kernel, grid, block, args, shared_bytes)
    copies, raw = {}, []

    def device(a):
        if not isinstance(a, np.ndarray):
            return a
        if id(a) not in copies:              # one device copy per array, maps included
            copies[id(a)] = (a, cuda.to_device(a))
        return copies[id(a)][1]

    for a in args:
        if isinstance(a, TiledMap):
            raw.append(a.encode(_raw_arg(device(a.array))))
        else:
            d = device(a)
            raw.append(d.device_ctypes_pointer.value if d is not a else _raw_arg(a))
    _raw_launch(kernel, grid, block, raw, shared_bytes, cluster)
    if sync or copies:
        synchronize(kernel.name)
    for host, dev in copies.values():
        dev.copy_to_host(host)
    return kernel


def _checked(kernel, grid, block, args, shared_bytes):
    """Validated (grid, block); dynamic shared memory above 48 KB enabled on the kernel."""
    limit = max(shared_bytes, DEFAULT_DYNAMIC_SHARED_LIMIT)
    grid, block = validate_launch(kernel.name, kernel.params, grid, block, list(args),
                                  shared_bytes, limit, kernel.directives)
    if shared_bytes > DEFAULT_DYNAMIC_SHARED_LIMIT:
        kernel.max_dynamic_shared(shared_bytes)
    return grid, block


def _raw_arg(a):
    """A device array's address, a tensor map's bytes (TiledMap of a device array), or the
    scalar itself."""
    if isinstance(a, TiledMap):
        return a.encode(_raw_arg(a.array))
    cai = getattr(a, "__cuda_array_interface__", None)
    return int(cai["data"][0]) if cai is not None else a


def _raw_launch(kernel, grid, block, raw_args, shared_bytes, cluster=None):
    from numba import cuda
    from numba.cuda.cudadrv.driver import _to_core_stream
    import cuda.core as core
    try:
        if needs_driver_launch(raw_args, cluster):
            driver_launch(kernel.fn, grid, block, raw_args, shared_bytes, cluster)
            return
        core.launch(_to_core_stream(cuda.default_stream()),
                    core.LaunchConfig(grid=grid, block=block, shmem_size=int(shared_bytes)),
                    kernel.fn.kernel, *raw_args)
    except Exception as e:
        raise LaunchError(f"kernel {kernel.name}: launch failed: {_first_line(e)}") from None


def synchronize(name):
    from numba import cuda
    try:
        cuda.synchronize()
    except Exception as e:
        raise LaunchError(f"kernel {name} faulted: {_first_line(e)} (rerun with --backend emu "
                          f"to see the thread and address)") from None


def _first_line(e):
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def bound_launch(kernel, grid, block, args, shared_bytes=0, cluster=None):
    """A no-argument callable that launches `kernel` with these arguments, checked once here
    (device arrays or raw pointers only: nothing is copied; tensor maps encoded once), for
    timing loops."""
    _cuda()
    if any(isinstance(a, np.ndarray) or isinstance(getattr(a, "array", None), np.ndarray)
           for a in args):
        raise LaunchError(f"kernel {kernel.name}: bound_launch takes device arrays, not numpy "
                          f"arrays (they would be copied on every launch)")
    grid, block = _checked(kernel, grid, block, args, shared_bytes)
    raw = [_raw_arg(a) for a in args]
    return lambda: _raw_launch(kernel, grid, block, raw, shared_bytes, cluster)


def load_steps(op, shape, module, arch, ptx=None):
    """{kernel name: GpuKernel} of every kernel op.steps(shape) launches, from `module` (the
    op's build for shape and arch; `ptx`: its text when already emitted), loaded once each."""
    from ..emit import emit_module
    ptx, kernels = ptx or emit_module(module, arch), {}
    for step in op.steps(shape, arch):
        if step.kernel not in kernels:
            kir = module.kernel(step.kernel)
            kernels[step.kernel] = load_kernel(ptx, kir.name, kir.params, kir.directives)
    return kernels


def bound_steps(op, shape, kernels, arrays, arch):
    """A no-argument callable that launches all of op's steps for `shape` on device `arrays`
    (inputs, outputs and workspace), each checked once (bound_launch)."""
    gos = [bound_launch(kernels[s.kernel], s.launch.grid, s.launch.block, s.args(arrays),
                        s.launch.shared_bytes) for s in op.steps(shape, arch)]

    def run():
        for go in gos:
            go()
    return run


def time_kernel(kernel, grid, block, args, shared_bytes=0, warmup=3, repeat=20):
    """Median milliseconds of one launch, CUDA events around each. Arguments must already be
    on the device (device arrays or raw pointers). The figure includes the host's launch
    latency (the stream is idle when the start event fires), as a lone call sees it;
    runtime.time_calls measures GPU time alone."""
    cuda = _cuda()
    grid = launch_dims(grid, "grid", kernel.name)
    block = launch_dims(block, "block", kernel.name)
    raw = [_raw_arg(a) for a in args]
    for _ in range(warmup):
        _raw_launch(kernel, grid, block, raw, shared_bytes)
    synchronize(kernel.name)
    times = []
    for _ in range(repeat):
        start, stop = cuda.event(), cuda.event()
        start.record()
        _raw_launch(kernel, grid, block, raw, shared_bytes)
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
    synchronize(kernel.name)
    return float(np.median(times))
