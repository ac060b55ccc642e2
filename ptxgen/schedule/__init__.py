"""Schedules: the tiling and pipelining choices of a kernel, lowered to IR through the builder."""
from .matmul import (CANDIDATES, MatmulSchedule, default_schedule, lower_matmul,
                     target_limits)

__all__ = ["CANDIDATES", "MatmulSchedule", "default_schedule", "lower_matmul", "target_limits"]
