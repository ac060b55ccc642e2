"""Repeated launches of one kernel with one shape, at a few microseconds of Python each.

A kernel object's k[grid, block](...) call checks its arguments in full (driver.validate_launch)
the first time it sees an argument signature — which kinds of argument, their dtypes, devices,
read-only flags and contiguity — and remembers what the check depends on. Later calls with the
same signature only read the device pointers, re-check pointer alignment and convert scalars
whose type differs from the parameter's (their value must still fit), then launch with a
launch configuration built once.
"""
import numpy as np

from ..arrays import is_tensor
from ..launch_shape import scalar_arg
from ..errors import LaunchError
from .driver import checked_launch, core_stream, first_line


def arg_key(a):
    """(key, raw, kind) of one argument. key: what validation depends on (None: no fast path
    for it); raw: the value passed to the driver; kind: 'scalar', 'tensor' (torch CUDA) or
    'device' (another __cuda_array_interface__ object)."""
    if isinstance(a, np.generic):
        return type(a), a, "scalar"
    if is_tensor(a):
        if not a.is_cuda:
            return None, None, None
        return (type(a), a.dtype, a.is_contiguous()), a.data_ptr(), "tensor"
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None and cai.get("strides") is None:       # C-contiguous by the protocol
        return (type(a), cai["typestr"], bool(cai["data"][1])), int(cai["data"][0]), "device"
    return None, None, None        # numpy arrays, strided device arrays, anything else


class PreparedLaunch:
    """Launches of `kernel` (a GpuKernel) with a fixed grid, block and dynamic shared size."""

    def __init__(self, kernel, grid, block, shared):
        self.kernel, self.grid, self.block, self.shared = kernel, grid, block, int(shared)
        self._plans = {}
        self._config = None

    def try_launch(self, keys, raws, args, stream):
        """Launch if this signature is known or checks out now; False when the arguments need
        the general path (host arrays, strided device arrays)."""
        key = tuple(keys)
        plan = self._plans.get(key)
        if plan is None:
            if any(k is None for k in keys):
                return False
            _, _, converted = checked_launch(self.kernel, self.grid, self.block, args, self.shared)
            params = self.kernel.params
            aligns = [(i, p.pointer.align) for i, p in enumerate(params)
                      if p.pointer is not None and p.pointer.align > 1]
            fix = [i for i, (a, c) in enumerate(zip(args, converted))
                   if isinstance(a, np.generic) and type(c) is not type(a)]
            plan = self._plans[key] = (aligns, fix)
        aligns, fix = plan
        raw = list(raws)
        for i in fix:
            raw[i] = scalar_arg(self.kernel.name, self.kernel.params[i], args[i])
        for i, align in aligns:
            if raw[i] % align:
                checked_launch(self.kernel, self.grid, self.block, args, self.shared)   # raises
        self._launch(raw, stream)
        return True

    def _launch(self, raw, stream):
        import cuda.core as core
        if self._config is None:
            self._config = core.LaunchConfig(grid=self.grid, block=self.block,
                                             shmem_size=self.shared)
        try:
            core.launch(core_stream(stream), self._config, self.kernel.fn.kernel, *raw)
        except Exception as e:
            raise LaunchError(f"kernel {self.kernel.name}: launch failed: "
                              f"{first_line(e)}") from None
