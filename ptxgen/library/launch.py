"""One operator launch from the public functions: on the GPU through a cached launch plan on
the caller's stream, or on the CPU emulator; and the record of which path ran
(`ptxgen.last_launch()`, also logged at INFO on the "ptxgen" logger)."""
import logging
from dataclasses import dataclass

import numpy as np

from ..arrays import is_tensor
from .compiled import compiled, gpu_kernel

log = logging.getLogger("ptxgen")
_LAST = [None]
_SM_COUNT = {}


@dataclass(frozen=True)
class LaunchRecord:
    """What the last public-function call ran."""
    function: str            # the public function, e.g. "matmul"
    kernel: str              # the operator's main kernel, e.g. "tc_matmul"
    path: str                # "wgmma (sm_90a)", "mma.sync (sm_80)", "SIMT (sm_90)"
    backend: str             # "gpu" or "emu"
    target: str
    dtype: str
    shape: dict
    schedule: str
    launches: tuple          # the kernels launched, in order
    cache: str               # where the kernels came from: "built", "disk" or "memory"

    def __str__(self):
        dims = " ".join(f"{k}={v}" for k, v in self.shape.items())
        return (f"ptxgen.{self.function}: {self.kernel} {self.dtype} {dims} on the "
                f"{self.backend}; path: {self.path}; kernels {', '.join(self.launches)}; "
                f"{self.cache}")


def _record(function, op, shape, arch, backend, dtype, entry, launches):
    try:
        sched = op.schedule_for(shape) if hasattr(op, "schedule_for") else None
    except Exception:                      # noqa: BLE001 - the record never fails a call
        sched = None
    from ..ops.tensor_path import describe_path
    rec = LaunchRecord(function, op.kernel_name(), describe_path(op, arch),
                       backend, arch, dtype, dict(shape), repr(sched) if sched else "default",
                       tuple(launches), entry.source)
    _LAST[0] = rec
    if log.isEnabledFor(logging.INFO):
        log.info("%s", rec)
    return rec


def _sm_count(device_index):
    n = _SM_COUNT.get(device_index)
    if n is None:
        from ..runtime import sm_count
        n = _SM_COUNT[device_index] = sm_count()
    return n


def _address(a):
    if is_tensor(a):
        return a.data_ptr()
    if isinstance(a, np.generic):
        return a
    return int(a.__cuda_array_interface__["data"][0])


PLANS_KEPT = 64


def run_gpu(function, op, shape, arch, dtype, arrays, stream, device_index=0):
    """Launch op's steps for `shape` on device `arrays` (inputs, outputs and workspace: torch
    CUDA tensors or device arrays; scalars as numpy scalars) on raw stream `stream`."""
    from ..runtime.plan import StepPlan
    entry = compiled(op, shape, arch)
    sm = _sm_count(device_index)
    # one entry serves several shapes when the operator names a kernel_shape: their grids and
    # scalar arguments differ, so the plans go by the whole shape (the oldest dropped past
    # PLANS_KEPT)
    key = sm if getattr(op, "kernel_shape", None) is None else (sm, tuple(shape.items()))
    plans = entry.plans.get(key)
    if plans is None:
        if len(entry.plans) >= PLANS_KEPT:
            entry.plans.pop(next(iter(entry.plans)))
        steps = op.steps(shape, arch, sm)
        plans = entry.plans[key] = [
            StepPlan(gpu_kernel(entry, s.kernel), s.launch.grid, s.launch.block,
                     s.launch.shared_bytes, s.args(arrays), arrays) for s in steps]
        entry.step_names = tuple(s.kernel for s in steps)
    addresses = {n: _address(a) for n, a in arrays.items()}
    for p in plans:
        p.launch(addresses, stream)
    _record_lazy(function, op, shape, arch, "gpu", dtype, entry)


def _record_lazy(function, op, shape, arch, backend, dtype, entry):
    """The record is built when asked for (last_launch) or logged: a cached call pays nothing."""
    _LAST[0] = _Lazy(function, op, shape, arch, backend, dtype, entry)
    if log.isEnabledFor(logging.INFO):
        _LAST[0] = _LAST[0].record()
        log.info("%s", _LAST[0])


class _Lazy:
    __slots__ = ("args",)

    def __init__(self, *args):
        self.args = args

    def record(self):
        function, op, shape, arch, backend, dtype, entry = self.args
        names = getattr(entry, "step_names", ())
        return _record(function, op, shape, arch, backend, dtype, entry, names)


def run_emu(function, op, shape, arch, dtype, arrays, check="off"):
    """Run op's steps on the CPU emulator on host numpy `arrays` (outputs written in place)."""
    from ..emu import emulate
    entry = compiled(op, shape, arch)
    module = entry.ir()
    for name, buf in op.workspace_arrays(shape, arch).items():
        arrays.setdefault(name, buf)
    steps = op.steps(shape, arch)
    for step in steps:
        cfg = step.launch
        emulate(module, step.kernel, cfg.grid, cfg.block, *step.args(arrays),
                shared_bytes=cfg.shared_bytes, check=check, verify=False,
                engine="auto" if check == "off" else "interp")
    entry.step_names = tuple(s.kernel for s in steps)
    _LAST[0] = _record(function, op, shape, arch, "emu", dtype, entry, entry.step_names)


def last_launch():
    """The LaunchRecord of the last call of a public operator function (None before any)."""
    rec = _LAST[0]
    if isinstance(rec, _Lazy):
        rec = _LAST[0] = rec.record()
    return rec
