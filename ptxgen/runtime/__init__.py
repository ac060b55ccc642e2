"""GPU runtime: the only part of ptxgen that imports numba.cuda, and only when called."""
from .driver import (GpuKernel, bound_launch, bound_steps, gpu_available, launch, load_kernel,
                     load_steps, time_kernel, validate_launch)
from .timing import time_calls

__all__ = ["GpuKernel", "bound_launch", "bound_steps", "gpu_available", "launch", "load_kernel",
           "load_steps", "time_calls", "time_kernel", "validate_launch"]
