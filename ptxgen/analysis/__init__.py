"""Static analyses of kernels: occupancy, shared-memory bank conflicts, instruction timing."""
