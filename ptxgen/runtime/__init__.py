"""GPU runtime: the only part of ptxgen that imports numba.cuda, and only when called."""
from .driver import (GpuKernel, gpu_available, launch, load_kernel, time_kernel,
                     validate_launch)

__all__ = ["GpuKernel", "gpu_available", "launch", "load_kernel", "time_kernel",
           "validate_launch"]
