"""Run a library operator on the GPU or on the CPU emulator and check it.

`auto` picks the GPU when Numba finds one, else the emulator, and reports which it used.
"""
import importlib.util
from dataclasses import dataclass

import numpy as np

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
    engine: str = None             # the emulator's engine (interp or native)


def resolve_backend(name):
    if name not in BACKENDS:
        raise PtxgenError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        from .runtime import gpu_available
        return "gpu" if gpu_available() else "emu"
    if name == "emu" and importlib.util.find_spec("ptxgen.emu") is None:
        raise PtxgenError("the emulator backend is not available in this build")
    return name


def run_operator(op, shape, backend="auto", arch=None, check=True, seed=None, time_it=False,
                 engine="interp"):
    """Build, emit, run and (optionally) check one operator on fresh random inputs. On the
    emulator, `engine` picks its engine: 'interp' (with memcheck and racecheck), 'auto'
    (native when it supports the kernel: faster on large launches, but each new kernel text
    costs a compilation of about a second; `ptxgen run` uses it), 'native'."""
    backend = resolve_backend(backend)
    rng = np.random.default_rng(seed)
    arrays = op.make_inputs(shape, rng)
    res = RunResult(op.name, dict(shape), backend)
    if backend == "gpu":
        from .runtime import bound_steps, launch, load_steps, time_calls
        from .runtime.device import device_arch
        arch = arch or device_arch()
        module = verify_module(op.build(shape, arch))
        arrays.update(op.workspace_arrays(shape, arch))
        kernels = load_steps(op, shape, module, arch)
        for step in op.steps(shape, arch):  # numpy arrays go to the device and back each time
            cfg = step.launch
            launch(kernels[step.kernel], cfg.grid, cfg.block, step.args(arrays),
                   cfg.shared_bytes)
        res.registers = kernels[op.kernel_name()].registers
        if time_it:
            from numba import cuda
            dev = {n: (cuda.to_device(v) if isinstance(v, np.ndarray) else v)
                   for n, v in arrays.items()}
            res.time_ms = time_calls(bound_steps(op, shape, kernels, dev, arch))
    else:
        from .emu.backend import run_operator as emu_run
        res.engine = emu_run(op, shape, arrays, arch or "sm_90", engine=engine).engine
    if check:
        res.ok, res.max_rel_error = op.check(shape, arrays)
    return res
