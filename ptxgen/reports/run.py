"""Run a library operator on the GPU or on the CPU emulator and check it.

`auto` picks the GPU when Numba finds one, else the emulator, and reports which it used.
"""
import importlib.util
from dataclasses import dataclass

import numpy as np

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir.verify import verify_module

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
        from ..runtime import gpu_available
        return "gpu" if gpu_available() else "emu"
    if name == "emu" and importlib.util.find_spec("ptxgen.emu") is None:
        raise PtxgenError("the emulator backend is not available in this build")
    return name


def run_operator(op, shape, backend="auto", arch=None, check=True, seed=None, time_it=False):
    """Build, emit, run and (optionally) check one operator on fresh random inputs."""
    backend = resolve_backend(backend)
    rng = np.random.default_rng(seed)
    arrays = op.make_inputs(shape, rng)
    res = RunResult(op.name, dict(shape), backend)
    if backend == "gpu":
        from ..runtime import (bound_steps, device_arch, load_steps, run_steps, time_calls,
                               to_device)
        arch = arch or device_arch()
        module = verify_module(op.build(shape, arch))
        arrays.update(op.workspace_arrays(shape, arch))
        kernels = load_steps(op, shape, module, arch)
        run_steps(op, shape, kernels, arrays, arch)
        res.registers = kernels[op.kernel_name()].registers
        if time_it:
            res.time_ms = time_calls(bound_steps(op, shape, kernels, to_device(arrays), arch))
    else:
        from ..emu import run_operator as emu_run
        emu_run(op, shape, arrays, arch or DEFAULT_TARGET)
    if check:
        res.ok, res.max_rel_error = op.check(shape, arrays)
    return res
