"""Autotuning: search a schedule space with the static models, time the survivors on the GPU,
and cache the winner per (arch, operator, shape class). See tuner.py for the pruning steps and
ptxgen.schedule.tuned for where results live."""
from ..schedule.tuned import shape_class, tuned_matmul_schedule
from .space import matmul_space


def tune_matmul(*args, **kw):
    from .tuner import tune_matmul as run          # noqa: PLC0415 (simulator, toolchain)
    return run(*args, **kw)


def tune_tc_matmul(*args, **kw):
    from .tc import tune_tc_matmul as run          # noqa: PLC0415 (simulator, toolchain)
    return run(*args, **kw)


__all__ = ["matmul_space", "shape_class", "tune_matmul", "tune_tc_matmul",
           "tuned_matmul_schedule"]
