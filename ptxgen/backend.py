"""Run a library operator on the GPU or on the CPU emulator and check it.

`auto` picks the GPU when Numba finds one, else the emulator, and reports which it used.
"""
import importlib.util
from dataclasses import dataclass

import numpy as np

from .emit import emit_module
from .errors import PtxgenError
from .ir.verify import verify_module

BACKENDS = ("auto", "gpu", "emu")


@dataclass
class RunResult:
    operator: str
    shape: dict
    backend: str
    ok: bool = None
    max_rel_error: float = None
    time_ms: float = None
    registers: int = None


def resolve_backend(name):
    if name not in BACKENDS:
        raise PtxgenError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        from .runtime import gpu_available
        return "gpu" if gpu_available() else "emu"
    if name == "emu" and importlib.util.find_spec("ptxgen.emu") is None:
        raise PtxgenError("the emulator backend is not available in this build")
    return name


def _workspace(op, shape, arch):
    """The operator's scratch arrays, zero-filled."""
    return {n: np.zeros(dims, dtype) for n, (dims, dtype) in op.workspace(shape, arch).items()}


def run_operator(op, shape, backend="auto", arch=None, check=True, seed=None, time_it=False):
    """Build, emit, run and (optionally) check one operator on fresh random inputs."""
    backend = resolve_backend(backend)
    rng = np.random.default_rng(seed)
    arrays = op.make_inputs(shape, rng)
    res = RunResult(op.name, dict(shape), backend)
    if backend == "gpu":
        from .runtime import bound_launch, launch, load_kernel, time_calls
        from .runtime.device import device_arch
        arch = arch or device_arch()
        module = verify_module(op.build(shape, arch))
        arrays.update(_workspace(op, shape, arch))
        ptx, kernels = emit_module(module, arch), {}
        steps = op.steps(shape, arch)
        for step in steps:
            if step.kernel not in kernels:
                kir = module.kernel(step.kernel)
                kernels[step.kernel] = load_kernel(ptx, kir.name, kir.params, kir.directives)
        for step in steps:          # numpy arrays go to the device and back at every launch
            cfg = step.launch
            launch(kernels[step.kernel], cfg.grid, cfg.block, step.args(arrays),
                   cfg.shared_bytes)
        res.registers = kernels[op.kernel_name()].registers
        if time_it:
            from numba import cuda
            dev = {n: (cuda.to_device(v) if isinstance(v, np.ndarray) else v)
                   for n, v in arrays.items()}
            go = [bound_launch(kernels[s.kernel], s.launch.grid, s.launch.block, s.args(dev),
                               s.launch.shared_bytes) for s in steps]
            res.time_ms = time_calls(lambda: [g() for g in go])
    else:
        from .emu.backend import run_operator as emu_run
        emu_run(op, shape, arrays, arch or "sm_90")
    if check:
        res.ok, res.max_rel_error = op.check(shape, arrays)
    return res
