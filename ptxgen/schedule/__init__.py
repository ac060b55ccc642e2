"""Schedules: the tiling and pipelining choices of a kernel (dataclasses, candidates, defaults
and the tuned-schedule store); ptxgen.lower turns one into IR."""
from .matmul import CANDIDATES, MatmulSchedule, default_schedule, target_limits

__all__ = ["CANDIDATES", "MatmulSchedule", "default_schedule", "target_limits"]
