"""The cycle-level simulator: one SM running a launch, scaled to the whole GPU by waves.

    rep = simulate(kernel, grid=(1056,), block=(256,), args=[np.uint32(n), ...])
    rep = simulate_operator(get_operator("matmul"), shape)
    rep.cycles, rep.time_us, rep.ipc, rep.stalls, rep.write_trace("t.json")

The model is described in docs/MODEL.md.
"""
from .engine import STALLS
from .launch import simulate
from .operator_args import simulate_operator
from .result import SimReport, WaveResult

__all__ = ["STALLS", "simulate", "simulate_operator", "SimReport", "WaveResult"]
