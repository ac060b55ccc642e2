"""Schedules: the tiling and pipelining choices of a kernel, lowered to IR through the builder."""
# The submodule first: loading it later (lower_matmul() imports it on first use) would set the
# package attribute `lower_matmul` to the module, and `from ptxgen.schedule import lower_matmul`
# after that would get the module, not the function.
from . import lower_matmul as _lowering  # noqa: F401
from .matmul import (CANDIDATES, MatmulSchedule, default_schedule, lower_matmul,
                     target_limits)

__all__ = ["CANDIDATES", "MatmulSchedule", "default_schedule", "lower_matmul", "target_limits"]
