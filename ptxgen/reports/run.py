"""Run a library operator on the GPU or on the CPU emulator and check it.

`auto` picks the GPU when Numba finds one, else the emulator, and reports which it used.
"""
import importlib.util
import os
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
    engine: str = None             # the emulator's engine (interp or native)
    path: str = None               # the instruction path and target, e.g. "wgmma (sm_90a)"
    kernels: tuple = ()            # the kernels launched, in order


def resolve_backend(name):
    if name not in BACKENDS:
        raise PtxgenError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        from ..runtime import gpu_available
        return "gpu" if gpu_available() else "emu"
    if name == "emu" and importlib.util.find_spec("ptxgen.emu") is None:
        raise PtxgenError("the emulator backend is not available in this build")
    return name


# numpy arrays in float32 (1x), plus float64 random draws and the float64 reference (2x)
HOST_BYTES_PER_ARRAY_BYTE = 3


def check_memory(op, shape, backend):
    """Refuse, in one line, a shape whose arrays cannot fit in host (or GPU) memory, before
    anything is allocated."""
    need = op.bytes_moved(shape)
    dims = " ".join(f"{k}={v}" for k, v in shape.items())
    host = available_host_bytes()
    if host is not None and need * HOST_BYTES_PER_ARRAY_BYTE > host:
        raise PtxgenError(f"{op.label} {dims}: its arrays and float64 reference need about "
                          f"{_gib(need * HOST_BYTES_PER_ARRAY_BYTE)} of host memory; "
                          f"{_gib(host)} is available")
    if backend == "gpu":
        from ..runtime.device import free_device_bytes
        free = free_device_bytes()
        if need > free:
            raise PtxgenError(f"{op.label} {dims}: its arrays need {_gib(need)} of GPU memory; "
                              f"{_gib(free)} is free")


def _gib(n):
    return f"{n / 2 ** 30:.1f} GiB"


def available_host_bytes():
    """Memory the OS can give this process now (MemAvailable on Linux), None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def run_operator(op, shape, backend="auto", arch=None, check=True, seed=None, time_it=False,
                 engine="interp", progress=None):
    """Build, emit, run and (optionally) check one operator on fresh random inputs. On the
    emulator, `engine` picks its engine: 'interp' (with memcheck and racecheck), 'auto'
    (native when it supports the kernel: faster on large launches, but each new kernel text
    costs a compilation of about a second; `ptxgen run` uses it), 'native'; `progress` is
    emulate()'s (CTAs done, per kernel)."""
    backend = resolve_backend(backend)
    check_memory(op, shape, backend)
    rng = np.random.default_rng(seed)
    arrays = op.make_inputs(shape, rng)
    res = RunResult(op.label, dict(shape), backend)
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
        res.engine = emu_run(op, shape, arrays, arch or DEFAULT_TARGET, engine=engine,
                             progress=progress).engine
    from ..ops.tensor_path import describe_path
    ran_on = arch or (device_arch() if backend == "gpu" else DEFAULT_TARGET)
    res.path = describe_path(op, ran_on)
    res.kernels = tuple(s.kernel for s in op.steps(shape, ran_on))
    if check:
        res.ok, res.max_rel_error = op.check(shape, arrays)
    return res
