"""Kernel objects: one callable per kernel, on the GPU or the CPU emulator.

    k = ptxgen.kernel(module_or_ptx, "scale")       # a Builder Module or PTX text
    k[grid, block](n, s, x)                          # backend="auto": GPU if there is one
    k[grid, block](n, s, x, backend="emu")           # the same launch on the CPU emulator

Arguments are checked against the parameter list before anything runs (ptxgen.launch_shape's rules,
shared by both backends): pointer element types where the IR knows them, read-only arrays for
parameters the kernel writes, integer scalars of another type when the value fits.

Arrays: numpy arrays (on the GPU: copied in and back, synchronously); torch tensors (CUDA
tensors used in place on torch's current stream, asynchronously like any torch op; CPU tensors
run on the emulator in place); Numba device arrays and other `__cuda_array_interface__` objects
(in place, on the default stream or `stream=`). backend="auto" runs where the data lives: the
GPU when an argument is on it, the emulator for torch CPU tensors, else the GPU when Numba finds
one and the emulator otherwise.
"""

import numpy as np

from .arrays import array_info, is_tensor, torch_stream
from .errors import LaunchError, PtxgenError
from .ir.module import Module
from .launch_shape import check_launch_shape, launch_dims, written_params
from .names import display_name

BACKENDS = ("auto", "gpu", "emu")


def kernel(source, name=None, *, arch=None, verify=True):
    """A Kernel for entry `name` of `source` (a Module or PTX text). `name` may be the full
    name, the short name of a mangled Numba entry (`hist`) or a unique part of the name; with
    one entry it may be left out. A Builder-made module is verified here unless
    verify=False."""
    if isinstance(source, Module):
        module, text = source, None
    elif isinstance(source, (str, bytes)):
        text = source.decode() if isinstance(source, bytes) else source
        from .parse import parse_ptx
        module = parse_ptx(text)
    else:
        raise PtxgenError(f"ptxgen.kernel takes a Module or PTX text, not "
                          f"{type(source).__name__}")
    if name is None:
        entries = module.entries
        if len(entries) != 1:
            raise PtxgenError("ptxgen.kernel: name the kernel (entries: "
                              f"{', '.join(k.name for k in entries) or 'none'})")
        ir = entries[0]
    else:
        ir = module.kernel(name)
        if ir.kind != "entry":
            raise PtxgenError(f"{ir.name} is a .func, not an entry: it cannot be launched")
    if verify and not module.parsed:
        from .ir.verify import verify_kernel
        verify_kernel(ir)
    return Kernel(module, ir, text, arch or module.target, verify)


class Kernel:
    """A launchable kernel; `k[grid, block](*args, shared=0, backend="auto", stream=None)`."""

    def __init__(self, module, ir, ptx_text, arch, verify):
        self.module, self.ir, self.arch, self.verify = module, ir, arch, verify
        self.name = ir.name
        self.params = list(ir.params)
        self.written = written_params(ir)
        self._text = ptx_text
        self._gpu = None
        self._launchers = {}

    @property
    def short_name(self):
        return display_name(self.name)

    def __repr__(self):
        ps = ", ".join(f"{p.name}: {p.pointer.elem if p.pointer else p.type}"
                       f"{'*' if p.pointer else ''}" for p in self.params)
        return f"<ptxgen kernel {self.short_name}({ps})>"

    @property
    def ptx(self):
        """The PTX text the GPU loads (the original text for a kernel given as PTX)."""
        if self._text is None:
            from .emit import emit_module
            self._text = emit_module(self.module, self.arch, verify=self.verify)
        return self._text

    def __getitem__(self, config):
        launcher = None
        try:
            launcher = self._launchers.get(config)
        except TypeError:                 # unhashable (a list): checked below, not cached
            pass
        if launcher is None:
            if not isinstance(config, tuple) or len(config) != 2:
                raise LaunchError(f"kernel {self.short_name}: launch it as "
                                  f"k[grid, block](*args), got k[{config!r}]")
            grid = launch_dims(config[0], "grid", self.short_name)
            block = launch_dims(config[1], "block", self.short_name)
            check_launch_shape(self.short_name, grid, block, self.ir.directives)
            launcher = Launcher(self, grid, block)
            try:
                self._launchers[config] = launcher
            except TypeError:
                pass
        return launcher

    def __call__(self, *args, **kw):
        raise LaunchError(f"kernel {self.short_name}: give the launch shape first: "
                          f"k[grid, block](*args)")

    # -- backends ---------------------------------------------------------------------------
    def gpu_kernel(self):
        """The kernel loaded on the current GPU (ptxgen.runtime.GpuKernel), loaded once."""
        if self._gpu is None:
            from .runtime import load_kernel
            self._gpu = load_kernel(self.ptx, self.name, self.params, self.ir.directives,
                                    self.written)
        return self._gpu

    def pick_backend(self, backend, args):
        """'gpu' or 'emu' for these arguments (backend: 'auto', 'gpu' or 'emu')."""
        where = [(p, info.device) for p, a in zip(self.params, args)
                 if (info := array_info(a)) is not None]
        on_gpu = [p.name for p, d in where if d == "cuda"]
        if backend == "emu" and on_gpu:
            raise LaunchError(f"kernel {self.short_name}: parameter {on_gpu[0]} is on the GPU; "
                              f"the emulator takes host arrays")
        if backend != "auto":
            return backend
        if on_gpu:
            return "gpu"
        if any(is_tensor(a) for a in args):
            return "emu"
        from .runtime import gpu_available
        return "gpu" if gpu_available() else "emu"


class Launcher:
    """k[grid, block]: call it with the kernel's arguments."""

    def __init__(self, kernel, grid, block):
        self.kernel, self.grid, self.block = kernel, grid, block
        self._prepared = {}             # shared bytes → runtime.prepared.PreparedLaunch

    def __call__(self, *args, shared=0, backend="auto", stream=None, check="error"):
        """Launch. shared: dynamic shared-memory bytes. stream (GPU): a CUDA stream (handle,
        torch or Numba stream); default torch's current stream when a torch CUDA tensor is
        passed, else the default stream. check (emulator): 'error', 'warn' or 'off', as in
        ptxgen.emulate. Returns the EmulationResult on the emulator, None on the GPU."""
        k = self.kernel
        if not isinstance(shared, (int, np.integer)) or shared < 0:
            raise LaunchError(f"kernel {k.short_name}: shared must be a non-negative int "
                              f"(bytes of dynamic shared memory), got {shared!r}")
        if backend not in BACKENDS:
            raise PtxgenError(f"kernel {k.short_name}: unknown backend {backend!r}; choose one "
                              f"of {', '.join(BACKENDS)}")
        if backend != "emu" and self._fast(args, int(shared), stream):
            return None
        backend = k.pick_backend(backend, args)
        if backend == "gpu":
            return self._gpu(args, int(shared), stream)
        from .emu import emulate
        host = [_host_view(k, p, a) for p, a in zip(k.params, args)]
        return emulate(k.module, k.name, self.grid, self.block, *host, shared_bytes=shared,
                       check=check, verify=k.verify)

    def _fast(self, args, shared, stream):
        """The GPU fast path for arguments all in device memory (or scalars), with a signature
        seen before or checked now (runtime.prepared); False: take the general path."""
        if len(args) != len(self.kernel.params):
            return False
        keys, raws, tensor, arrays = [], [], None, False
        for a in args:
            key, raw, kind = _arg_key(a)
            if key is None:
                return False
            if kind != "scalar":
                arrays = True
                if kind == "tensor" and tensor is None:
                    tensor = a
            keys.append(key)
            raws.append(raw)
        if not arrays:
            return False
        prepared = self._prepared.get(shared)
        if prepared is None:
            from .runtime.prepared import PreparedLaunch
            prepared = self._prepared[shared] = PreparedLaunch(
                self.kernel.gpu_kernel(), self.grid, self.block, shared)
        if stream is None and tensor is not None:
            stream = torch_stream(tensor)
        return prepared.try_launch(keys, raws, args, stream)

    def _gpu(self, args, shared, stream):
        from .runtime import launch
        k = self.kernel
        gk = k.gpu_kernel()
        tensors = [a for a in args if is_tensor(a)]
        cuda_tensors = [t for t in tensors if t.is_cuda]
        if stream is None and cuda_tensors:
            stream = torch_stream(cuda_tensors[0])
        args = [_host_view(k, p, a) if is_tensor(a) and not a.is_cuda else a
                for p, a in zip(k.params, args)]
        copies = any(isinstance(a, np.ndarray) and a.ndim for a in args)
        launch(gk, self.grid, self.block, args, shared, sync=copies, stream=stream)


def _arg_key(a):
    # runtime.prepared imported on first use (it imports the runtime, not numba)
    global _arg_key
    from .runtime.prepared import arg_key
    _arg_key = arg_key
    return arg_key(a)


def _host_view(kernel, p, a):
    """A torch CPU tensor as a numpy array sharing its memory (results land in the tensor)."""
    if not is_tensor(a):
        return a
    if a.is_cuda:
        raise LaunchError(f"kernel {kernel.short_name}: parameter {p.name} is a CUDA tensor; "
                          f"the emulator takes host tensors")
    if not a.is_contiguous():
        raise LaunchError(f"kernel {kernel.short_name}: parameter {p.name}: the tensor is not "
                          f"contiguous; pass t.contiguous() (a kernel sees one flat buffer)")
    if a.ndim == 0:
        return a.detach().numpy()[()]
    return a.detach().numpy()
