"""The instruction list scheduler: per basic block, a dependence graph and list scheduling by
critical path under the pipes' issue limits (ptxgen.isa). It reorders instructions inside
blocks only, never changing what a kernel computes. (Tiling schedules — which tiles a kernel
computes — are ptxgen.schedule.)"""
from .deps import DepGraph, Region, access, build_graph, conflict, critical_path, split_body
from .inflight import loads_in_flight, most_held_in_a_block, sass_in_flight
from .listsched import (BlockSchedule, Candidate, CycleView, critical_path_first, print_debug,
                        schedule_block, schedule_body, schedule_kernel, schedule_module)

__all__ = ["DepGraph", "Region", "access", "build_graph", "conflict", "critical_path",
           "split_body", "BlockSchedule", "Candidate", "CycleView", "critical_path_first",
           "print_debug", "schedule_block", "schedule_body", "schedule_kernel",
           "schedule_module", "loads_in_flight", "most_held_in_a_block",
           "sass_in_flight"]
