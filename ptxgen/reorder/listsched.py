"""List scheduling of each region by critical path, under the pipes' issue limits.

One warp's view of one sub-partition: at most one instruction issues per cycle, an instruction
becomes ready when every predecessor has issued and every register result it reads has arrived
(the producer's latency from the isa table), and a pipe that accepted an instruction takes no
other until its issue interval has passed. Among the ready instructions the one with the smallest
`critical_path_first` key issues; the policy is that function and nothing else.

    res = schedule_block(instrs, isa.load("sm_90"), debug=True)
    print(res.format_debug())          # the ready list of every cycle, best first
    kernel2 = schedule_kernel(kernel, "sm_90")
"""
import dataclasses
import sys
from dataclasses import dataclass, field

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from .deps import Region, build_graph, critical_path, split_body
from .inflight import held as is_held, load_slots


@dataclass(frozen=True)
class Candidate:
    """What the priority function sees of an instruction."""
    index: int            # position in program order
    height: float         # cycles from its issue to the end of the region on its longest path
    fanout: int           # instructions that depend on it


def critical_path_first(c):
    """The scheduling policy: longest remaining path first (latency hiding), then the one
    that unblocks the most instructions, then program order (stability)."""
    return (-c.height, -c.fanout, c.index)


@dataclass
class CycleView:
    """The scheduler's state in one cycle (debug view)."""
    cycle: float
    ready: list                     # [(index, key, why)] best first; why: "" (issuable),
                                    # "operands" (waiting for a result) or "pipe:UNIT"
    issued: object = None           # index of the instruction issued, or None


@dataclass
class BlockSchedule:
    order: list                     # the instructions in their new order
    indices: list                   # their positions in the original order
    cycles: float                   # estimated cycles until the last result (new order)
    original_cycles: float          # the same estimate for the original order
    debug: list = field(default=None)
    texts: list = field(default=None)

    def format_debug(self):
        if self.debug is None:
            return "(no debug view: call schedule_block(..., debug=True))"
        lines = []
        for v in self.debug:
            chosen = "-" if v.issued is None else f"#{v.issued}"
            lines.append(f"cycle {v.cycle:>7g}: issue {chosen}")
            for idx, key, why in v.ready:
                mark = "*" if idx == v.issued else " "
                state = "ready" if not why else f"wait {why}"
                lines.append(f"   {mark} #{idx:<4} key={key} {state:<14} {self.texts[idx]}")
        return "\n".join(lines)


class _Costs:
    """Latency, pipe and issue interval of each instruction, looked up once."""

    def __init__(self, table):
        self.table = table
        self._cache = {}

    def info(self, ins):
        k = id(ins)
        if k not in self._cache:
            self._cache[k] = (ins, self.table.op_for(ins))
        return self._cache[k][1]

    def latency(self, ins):
        return self.info(ins).latency


def _table(isa):
    return isamod.load(isa) if isinstance(isa, str) else isa


def _simulate_order(instrs, graph, costs, order):
    """Cycles the region takes when issued in `order` (in order, same rules)."""
    issue = {}
    unit_free = {}
    cycle, end = 0.0, 0.0
    for j in order:
        info = costs.info(instrs[j])
        t = max([cycle] + [issue[i] + d for i, d in graph.preds[j]] +
                [unit_free.get(info.unit, 0.0)])
        issue[j] = t
        unit_free[info.unit] = t + info.issue_interval
        end = max(end, t + info.latency)
        cycle = t + 1
    return end


def schedule_block(instrs, isa=DEFAULT_TARGET, debug=False, in_flight=None):
    """Reorder one region's instructions; returns a BlockSchedule. `debug` True records the
    ready list of every cycle (`.debug`, `.format_debug()`); a writable file also prints it.

    in_flight: the most 32-bit registers of global/generic load results that may wait for
    their first reader at once (inflight.py: what ptxas's SASS of the kernel keeps; None: no
    limit). A load that would exceed it waits while another instruction can issue or will
    once its operands arrive, as ptxas issues a block's loads in rounds under its budget."""
    costs = _Costs(_table(isa))
    instrs = list(instrs)
    n = len(instrs)
    # registers each load the limit holds back fills (global or generic ones: inflight.py)
    held = [load_slots(ins) if in_flight is not None and is_held(ins) else 0 for ins in instrs]
    flying = {}                         # held load issued → its registers, until a reader
    graph = build_graph(instrs, costs.latency)
    height = critical_path(graph, costs.latency)
    key = [critical_path_first(Candidate(i, height[i], len(graph.succs[i]))) for i in range(n)]
    waiting = [len(graph.preds[j]) for j in range(n)]
    earliest = [0.0] * n
    ready = {j for j in range(n) if waiting[j] == 0}
    unit_free = {}
    unit = [costs.info(ins).unit for ins in instrs]
    order, views = [], [] if debug else None
    cycle = 0.0
    while len(order) < n:
        def why(j):
            if earliest[j] > cycle:
                return "operands"
            u = unit[j]
            if unit_free.get(u, 0.0) > cycle:
                return f"pipe:{u}"
            return ""

        if views is not None:
            states = {j: why(j) for j in ready}
            issuable = [j for j in ready if not states[j]]
        else:                           # (the same test without the reasons: hot on big bodies)
            issuable = [j for j in ready if earliest[j] <= cycle and
                        unit_free.get(unit[j], 0.0) <= cycle]
        waits = ()
        if flying:
            now = sum(flying.values())
            over = {j for j in ready if held[j] and now + held[j] > in_flight}
            if over and len(over) < len(ready):     # (only loads left: they go)
                issuable = [j for j in issuable if j not in over]
                waits = over
                if views is not None:
                    states.update((j, "loads in flight") for j in over)
        pick = min(issuable, key=lambda j: key[j]) if issuable else None
        if views is not None:
            views.append(CycleView(cycle, [(j, key[j], states[j])
                                                for j in sorted(ready, key=lambda j: key[j])],
                                   pick))
        if pick is None:
            # nothing can issue: jump to the first cycle something not held back can
            cycle = min(max(earliest[j], unit_free.get(costs.info(instrs[j]).unit, 0.0))
                        for j in ready if j not in waits)
            continue
        info = costs.info(instrs[pick])
        if flying:
            for i, _ in graph.preds[pick]:
                if i in flying and graph.kinds[(i, pick)] == "raw":
                    del flying[i]
        if held[pick]:
            flying[pick] = held[pick]
        order.append(pick)
        ready.discard(pick)
        unit_free[info.unit] = cycle + info.issue_interval
        for j, d in graph.succs[pick]:
            earliest[j] = max(earliest[j], cycle + d)
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.add(j)
        cycle += 1
    res = BlockSchedule(
        order=[instrs[j] for j in order], indices=order,
        cycles=_simulate_order(instrs, graph, costs, order),
        original_cycles=_simulate_order(instrs, graph, costs, range(n)),
        debug=views, texts=[str(i) for i in instrs] if debug else None)
    if debug and hasattr(debug, "write"):
        debug.write(res.format_debug() + "\n")
    return res


def schedule_body(body, isa=DEFAULT_TARGET, in_flight=None):
    """A new statement list: every region reordered (under the load limit `in_flight`, if
    given: schedule_block), everything else in place."""
    table = _table(isa)
    out = []
    for item in split_body(body):
        if not isinstance(item, Region):
            out.append(item)
            continue
        if len(item.instrs) > 1:
            res = schedule_block(item.instrs, table, in_flight=in_flight)
            order = res.indices
        else:
            order = [0]
        for j in order:
            out.extend(item.riders[j])
            out.append(item.instrs[j])
    return out


def schedule_kernel(kernel, arch=DEFAULT_TARGET, isa=None, in_flight=None):
    """A copy of `kernel` whose body has every basic block list-scheduled (keeping at most
    `in_flight` registers of global-load results waiting, if given). The instructions are the
    same objects, each block keeps its instructions, and every dependence keeps its order, so
    the kernel computes what it did."""
    table = _table(isa if isa is not None else arch)
    return dataclasses.replace(kernel, body=schedule_body(kernel.body, table, in_flight),
                               regs=list(kernel.regs), vars=list(kernel.vars),
                               directives=list(kernel.directives))


def schedule_module(module, arch=None):
    arch = arch or module.target
    table = _table(arch)
    return dataclasses.replace(module, kernels=[schedule_kernel(k, isa=table)
                                                for k in module.kernels])


def print_debug(instrs, isa=DEFAULT_TARGET, file=None):
    """Schedule one region and print its per-cycle ready lists."""
    return schedule_block(instrs, isa, debug=file or sys.stdout)

