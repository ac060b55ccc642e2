"""GPU runtime: the only part of ptxgen that imports numba.cuda, and only when called."""
from .cuda import gpu_available
from .device import device_arch, device_array, device_name, sm_count, to_device, to_host
from .driver import (GpuKernel, bound_launch, bound_steps, launch, load_kernel, load_steps,
                     run_steps, synchronize, time_kernel, validate_launch)
from .timing import time_calls

__all__ = ["GpuKernel", "bound_launch", "bound_steps", "device_arch", "device_array",
           "device_name", "gpu_available", "launch", "load_kernel", "load_steps", "run_steps",
           "sm_count", "synchronize", "time_calls", "time_kernel", "to_device", "to_host",
           "validate_launch"]
