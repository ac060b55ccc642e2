"""Load PTX through Numba's CUDA driver, check launches before they happen, launch, time.

numba.cuda is imported inside functions so `import ptxgen` works on machines with no GPU or no
CUDA driver. Launches go through cuda.core exactly as numba-cuda launches its own kernels.
"""
import hashlib

import numpy as np

from .. import isa
from ..errors import Arg, LaunchError, PtxgenError, Spelled
from ..arrays import TiledMap, array_info, is_tensor
from ..launch_shape import (check_array_arg, check_launch_shape, check_takes_array, launch_dims,
                            scalar_arg)
from .cuda import numba_cuda
from .device import sm_count
from .tensormap import TENSOR_MAP_BYTES, driver_launch, encode_tiled, needs_driver_launch

EMULATE = Arg("ptxgen.emulate", "--backend emu")      # the CPU emulator, where there is no GPU


def default_dynamic_shared_limit():
    """Dynamic shared memory a kernel may use without opting in (isa/targets.toml [launch])."""
    return isa.launch_limits()["shared_per_block"]


class GpuKernel:
    """A kernel loaded from PTX: its Numba function object and its parameter list."""

    def __init__(self, name, fn, params, ptx, directives=(), written=()):
        self.name, self.fn, self.params, self.ptx = name, fn, params, ptx
        self.directives = tuple(directives)     # .reqntid/.maxntid, checked before launch
        self.written = frozenset(written)       # pointer parameters stored through

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


def load_kernel(ptx_text, name, params, directives=(), written=()):
    """Load PTX (cached by text) and return the named kernel. `params` (the IR parameter list),
    `directives` (the kernel's performance directives) and `written` (pointer parameters the
    kernel stores through: launch.written_params) are checked before each launch."""
    cuda = numba_cuda()
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
        _loaded[key] = GpuKernel(name, fn, list(params), ptx_text, directives, written)
    return _loaded[key]


def validate_launch(kernel_name, params, grid, block, args, shared_bytes=0,
                    shared_limit=None, directives=(), written=()):
    """Check a launch against the kernel's parameters (ptxgen.launch_shape's argument rules) and
    the device limits; raise a PtxgenError naming the kernel (and parameter) on the first
    problem. Returns (grid, block, args) with scalars converted to the parameters' types.
    shared_limit: the kernel's dynamic shared-memory limit (None: the default without opting
    in). `written`: names of pointer parameters the kernel stores through (read-only arrays are
    refused for them)."""
    if shared_limit is None:
        shared_limit = default_dynamic_shared_limit()
    grid = launch_dims(grid, "grid", kernel_name)
    block = launch_dims(block, "block", kernel_name)
    if len(args) != len(params):
        raise PtxgenError(f"kernel {kernel_name} takes {len(params)} arguments "
                          f"({', '.join(p.name for p in params)}), got {len(args)}")
    out = []
    for p, a in zip(params, args):
        if p.array:
            if not isinstance(a, TiledMap) or p.nbytes != TENSOR_MAP_BYTES:
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} is a "
                                  f"{p.nbytes}-byte array; pass a runtime.TiledMap (tensor "
                                  f"map), got {type(a).__name__}")
            out.append(a)
            continue
        info = array_info(a)
        if info is None:
            if p.pointer is not None:
                raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} is a pointer; "
                                  f"pass an array, not {type(a).__name__}")
            out.append(scalar_arg(kernel_name, p, a))
            continue
        check_takes_array(kernel_name, p)
        if not info.contiguous:
            raise PtxgenError(f"kernel {kernel_name}: parameter {p.name}: the array is not "
                              f"contiguous; pass a contiguous copy (a kernel sees one flat "
                              f"buffer)")
        align = p.pointer.align if p.pointer is not None else 1
        if info.pointer % align:
            raise PtxgenError(f"kernel {kernel_name}: parameter {p.name} must be "
                              f"{align}-byte aligned (address {info.pointer:#x})")
        check_array_arg(kernel_name, p, info.dtype, info.writeable, written)
        out.append(a)
    check_launch_shape(kernel_name, grid, block, directives)
    if shared_bytes < 0 or shared_bytes > shared_limit:
        raise PtxgenError(f"kernel {kernel_name}: {shared_bytes} bytes of dynamic shared memory "
                          f"exceed the limit of {shared_limit} (pass a larger shared_limit to "
                          f"raise the kernel's limit, up to the device maximum)")
    return grid, block, out


def launch(kernel, grid, block, args, shared_bytes=0, sync=True, stream=None, cluster=None):
    """Launch a loaded kernel. numpy arrays are copied to the device and back after the
    launch; Numba device arrays, torch CUDA tensors and __cuda_array_interface__ objects are
    used in place; a TiledMap argument is encoded for its array's device copy. `stream`: a
    CUDA stream handle (int) or an object with one (a torch or Numba stream); default: the
    default stream. cluster: CTAs per cluster."""
    cuda = numba_cuda()
    grid, block, args = checked_launch(kernel, grid, block, args, shared_bytes)
    copies, raw = {}, []

    def device(a):
        if not (isinstance(a, np.ndarray) and a.ndim):
            return a
        if id(a) not in copies:              # one device copy per array, maps included
            copies[id(a)] = (a, cuda.to_device(a))
        return copies[id(a)][1]

    for a in args:
        if isinstance(a, TiledMap):
            raw.append(encode_tiled(a, _raw_arg(device(a.array))))
        else:
            d = device(a)
            raw.append(d.device_ctypes_pointer.value if d is not a else _raw_arg(a))
    raw_launch(kernel, grid, block, raw, shared_bytes, stream, cluster)
    if sync or copies:
        synchronize(kernel.name)
    for host, dev in copies.values():
        dev.copy_to_host(host)
    return kernel


def checked_launch(kernel, grid, block, args, shared_bytes):
    """Validated (grid, block, args); dynamic shared memory above the default limit (48 KB)
    enabled on the kernel."""
    default = default_dynamic_shared_limit()
    limit = max(shared_bytes, default)
    grid, block, args = validate_launch(kernel.name, kernel.params, grid, block, list(args),
                                        shared_bytes, limit, kernel.directives, kernel.written)
    if shared_bytes > default:
        kernel.max_dynamic_shared(shared_bytes)
    return grid, block, args


def _raw_arg(a):
    """A device array's or tensor's address, a tensor map's bytes (TiledMap of a device array),
    or the scalar itself."""
    if isinstance(a, TiledMap):
        return encode_tiled(a, _raw_arg(a.array))
    if is_tensor(a):
        return a.data_ptr()
    cai = getattr(a, "__cuda_array_interface__", None)
    return int(cai["data"][0]) if cai is not None else a


def stream_handle(stream):
    """The raw CUDA stream handle of `stream`: None or 0 (the default stream), an int, a torch
    stream (.cuda_stream) or a Numba stream (.handle)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "handle"):
        h = getattr(stream, attr, None)
        if h is not None:
            h = getattr(h, "value", h)            # a ctypes handle
            return int(h or 0)
    raise LaunchError(f"stream must be a CUDA stream handle, a torch or a Numba stream, not "
                      f"{type(stream).__name__}")


_core_streams = {}


def core_stream(stream):
    h = stream_handle(stream)
    s = _core_streams.get(h)
    if s is None:
        import cuda.core as core
        s = _core_streams[h] = core.Stream.from_handle(h)
    return s


def raw_launch(kernel, grid, block, raw_args, shared_bytes, stream=None, cluster=None):
    import cuda.core as core
    try:
        if needs_driver_launch(raw_args, cluster):
            driver_launch(kernel.fn, grid, block, raw_args, shared_bytes, cluster,
                          stream_handle(stream))
            return
        core.launch(core_stream(stream),
                    core.LaunchConfig(grid=grid, block=block, shmem_size=int(shared_bytes)),
                    kernel.fn.kernel, *raw_args)
    except Exception as e:
        raise LaunchError(f"kernel {kernel.name}: launch failed: {first_line(e)}") from None


def synchronize(name):
    from numba import cuda
    try:
        cuda.synchronize()
    except Exception as e:
        raise LaunchError(Spelled(f"kernel {name} faulted: {first_line(e)} (", EMULATE,
                                  " runs it on the CPU and names the thread and address)")) \
            from None


def first_line(e):
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def bound_launch(kernel, grid, block, args, shared_bytes=0, cluster=None):
    """A no-argument callable that launches `kernel` with these arguments, checked once here
    (device arrays or raw pointers only: nothing is copied; tensor maps encoded once), for
    timing loops."""
    numba_cuda()
    if any(isinstance(a, np.ndarray) or isinstance(getattr(a, "array", None), np.ndarray)
           for a in args):
        raise LaunchError(f"kernel {kernel.name}: bound_launch takes device arrays, not numpy "
                          f"arrays (they would be copied on every launch)")
    grid, block, args = checked_launch(kernel, grid, block, args, shared_bytes)
    raw = [_raw_arg(a) for a in args]

    def launch():
        return raw_launch(kernel, grid, block, raw, shared_bytes, None, cluster)
    # raw holds bare addresses: the callable keeps their owners alive, or a tensor the caller
    # dropped goes back to torch's caching allocator and the next launch writes (or reads an
    # index table from) whatever reuses it (a fused pad copy's chunk order did: wild addresses)
    launch.arrays = tuple(args)
    return launch


def load_steps(op, shape, module, arch, ptx=None):
    """{kernel name: GpuKernel} of every kernel op.steps(shape) launches, from `module` (the
    op's build for shape and arch; `ptx`: its text when already emitted), loaded once each."""
    from ..emit import emit_module
    ptx, kernels = ptx or emit_module(module, arch), {}
    for step in op.steps(shape, arch):          # which kernels, not their launch shapes
        if step.kernel not in kernels:
            kir = module.kernel(step.kernel)
            kernels[step.kernel] = load_kernel(ptx, kir.name, kir.params, kir.directives)
    return kernels


def run_steps(op, shape, kernels, arrays, arch):
    """Launch all of op's steps for `shape` once, in order, on host `arrays` (numpy arrays go
    to the device and back at each launch)."""
    for step in op.steps(shape, arch, sm_count()):
        cfg = step.launch
        launch(kernels[step.kernel], cfg.grid, cfg.block, step.args(arrays), cfg.shared_bytes)


def bound_steps(op, shape, kernels, arrays, arch):
    """A no-argument callable that launches all of op's steps for `shape` on device `arrays`
    (inputs, outputs and workspace), each checked once (bound_launch)."""
    gos = [bound_launch(kernels[s.kernel], s.launch.grid, s.launch.block, s.args(arrays),
                        s.launch.shared_bytes) for s in op.steps(shape, arch, sm_count())]

    def run():
        for go in gos:
            go()
    return run


def time_kernel(kernel, grid, block, args, shared_bytes=0, warmup=3, repeat=20):
    """Median milliseconds of one launch, CUDA events around each. Arguments must already be
    on the device (device arrays or raw pointers). The figure includes the host's launch
    latency (the stream is idle when the start event fires), as a lone call sees it;
    runtime.time_calls measures GPU time alone."""
    cuda = numba_cuda()
    grid = launch_dims(grid, "grid", kernel.name)
    block = launch_dims(block, "block", kernel.name)
    raw = [_raw_arg(a) for a in args]
    for _ in range(warmup):
        raw_launch(kernel, grid, block, raw, shared_bytes)
    synchronize(kernel.name)
    times = []
    for _ in range(repeat):
        start, stop = cuda.event(), cuda.event()
        start.record()
        raw_launch(kernel, grid, block, raw, shared_bytes)
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
    synchronize(kernel.name)
    return float(np.median(times))
