"""Throughput and latency of straight-line code, in the manner of llvm-mca, for one GPU warp.

For a region (a basic block, or the blocks of an innermost loop in layout order):
  * a dependency graph over registers: RAW (true), WAR (anti) and WAW (output) edges;
  * the critical path: the longest chain of RAW edges, each weighted by its producer's latency;
  * per execution unit, the cycles one iteration keeps it busy (sum of issue intervals): the
    resource pressure, and with the issue slots the throughput bound;
  * an in-order issue simulation of one warp (one instruction per scheduler cycle, an
    instruction waits for its source registers and for its unit), repeated for loops until the
    per-iteration time is steady: the estimated cycles per iteration and the IPC;
  * which bound binds: 'latency' when the dependency chain (for a loop: its steady single-warp
    time) exceeds the throughput bound, else the busiest unit or 'issue'; and how many warps a
    scheduler needs so that the throughput bound, not latency, sets the pace.

Latencies and issue intervals come only from the machine model (ptxgen.isa). Time is counted in
scheduler cycles: one issue slot per cycle is the model's unit of time, the isa tables' issue
intervals being defined against it. WAR and WAW edges are reported but add no delay: a warp
reads its operands at issue, and scoreboarded writes retire in order.
"""
import math
from dataclasses import dataclass, field

from ..ir.values import Special

ISSUE_SLOT = 1.0        # cycles per issued warp instruction: the model's time unit (see above)


@dataclass
class Prepared:
    """Per-instruction facts computed once per function and shared by every region."""
    instr: object
    uses: tuple
    defs: tuple
    latency: float
    issue_interval: float
    unit: str
    key: str


def prepare(instrs, table):
    out = []
    cache = {}
    for ins in instrs:
        # the cost class depends on opcode, modifiers and whether a special register is read
        key = (ins.opcode, ins.mods, ins.opcode == "mov" and any(
            isinstance(o, Special) for o in ins.operands))
        info = cache.get(key)
        if info is None:
            info = cache[key] = table.op_for(ins)
        out.append(Prepared(ins, tuple(ins.timing_uses()), tuple(ins.defs()), info.latency,
                            info.issue_interval, info.unit, info.key))
    return out


@dataclass
class Timing:
    instructions: int
    dependencies: dict
    loop_carried: int
    critical_path: float
    critical_chain: list                 # lines of the instructions on the critical path
    unit_cycles: dict                    # unit → busy cycles per iteration
    issue_cycles: float
    throughput_bound: float
    latency_bound: float
    bound_by: str
    cycles_per_iteration: float
    ipc: float
    resource_pressure: dict              # unit → fraction of the iteration the unit is busy
    warps_to_hide_latency: int
    repeated: bool
    op_classes: dict = field(default_factory=dict)

    def to_dict(self):
        r = lambda x: round(x, 3)
        return {
            "instructions": self.instructions,
            "dependencies": dict(self.dependencies),
            "loop_carried_dependencies": self.loop_carried,
            "critical_path": r(self.critical_path),
            "critical_path_lines": list(self.critical_chain),
            "issue_cycles": r(self.issue_cycles),
            "unit_cycles": {u: r(c) for u, c in self.unit_cycles.items()},
            "throughput_bound": r(self.throughput_bound),
            "latency_bound": r(self.latency_bound),
            "bound_by": self.bound_by,
            "cycles_per_iteration": r(self.cycles_per_iteration),
            "ipc": r(self.ipc),
            "resource_pressure": {u: r(c) for u, c in self.resource_pressure.items()},
            "warps_to_hide_latency": self.warps_to_hide_latency,
            "repeats": self.repeated,
            "op_classes": dict(self.op_classes),
        }


def dependency_graph(region):
    """Edges (src, dst, kind, register name) between positions of a region; and the number of
    registers read before they are written (loop-carried when the region repeats)."""
    last_def, readers = {}, {}
    edges = []
    carried = set()
    for i, p in enumerate(region):
        for r in p.uses:
            d = last_def.get(r)
            if d is not None:
                edges.append((d, i, "RAW", r.name))
            else:
                carried.add(r)
            readers.setdefault(r, []).append(i)
        for r in p.defs:
            for j in readers.get(r, ()):
                if j != i:
                    edges.append((j, i, "WAR", r.name))
            d = last_def.get(r)
            if d is not None:
                edges.append((d, i, "WAW", r.name))
            last_def[r] = i
            readers[r] = []
    defined = set(last_def)
    return edges, len(carried & defined)


def critical_path(region):
    """(length in cycles, positions on the longest RAW chain)."""
    ready, origin = {}, {}
    finish = [0.0] * len(region)
    back = [None] * len(region)
    for i, p in enumerate(region):
        start, via = 0.0, None
        for r in p.uses:
            t = ready.get(r)
            if t is not None and t > start:
                start, via = t, origin[r]
        finish[i] = start + p.latency
        back[i] = via
        for r in p.defs:
            ready[r] = finish[i]
            origin[r] = i
    if not region:
        return 0.0, []
    end = max(range(len(region)), key=lambda i: (finish[i], -i))
    chain = []
    while end is not None:
        chain.append(end)
        end = back[end]
    return finish[chain[0]], chain[::-1]


def simulate(region, iterations):
    """In-order issue of one warp over `iterations` passes of the region. Returns (issue time of
    the first instruction of each pass, completion time of the whole run)."""
    ready, unit_free = {}, {}
    t = -ISSUE_SLOT
    firsts = []
    end = 0.0
    for _ in range(iterations):
        for k, p in enumerate(region):
            s = t + ISSUE_SLOT
            for r in p.uses:
                x = ready.get(r)
                if x is not None and x > s:
                    s = x
            f = unit_free.get(p.unit)
            if f is not None and f > s:
                s = f
            unit_free[p.unit] = s + p.issue_interval
            done = s + p.latency
            for r in p.defs:
                ready[r] = done
            if done > end:
                end = done
            if k == 0:
                firsts.append(s)
            t = s
    return firsts, end


def _iterations(n):
    # enough passes for the per-iteration time to settle; long bodies settle within a few
    return max(4, min(12, 4000 // max(n, 1)))


def analyze_region(region, units, repeats):
    """Timing of a region (list of Prepared). `repeats`: it is a loop body run back to back."""
    n = len(region)
    edges, carried = dependency_graph(region)
    deps = {"RAW": 0, "WAR": 0, "WAW": 0}
    for kind in {(s, d, k) for s, d, k, _ in edges}:
        deps[kind[2]] += 1
    cp, chain = critical_path(region)
    unit_cycles = {u: 0.0 for u in units}
    classes = {}
    for p in region:
        unit_cycles[p.unit] = unit_cycles.get(p.unit, 0.0) + p.issue_interval
        classes[p.key] = classes.get(p.key, 0) + 1
    issue = n * ISSUE_SLOT
    busiest = max(unit_cycles, key=lambda u: (unit_cycles[u], u)) if unit_cycles else None
    throughput = max([issue] + list(unit_cycles.values()))
    if n == 0:
        cycles = 0.0
    elif repeats:
        iters = _iterations(n)
        firsts, _ = simulate(region, iters)
        half = iters // 2
        cycles = (firsts[-1] - firsts[half]) / (iters - 1 - half)
    else:
        firsts, end = simulate(region, 1)
        cycles = max(end, n * ISSUE_SLOT)
    # the latency bound: for a loop, its steady single-warp time (recurrences and in-order
    # stalls); for one pass, the dependency chain alone (the drain after the last issue is not
    # a bound, just the pipeline emptying)
    latency = cycles if repeats else cp
    if n and latency > throughput + 1e-9:
        bound = "latency"
    elif busiest is not None and unit_cycles[busiest] > issue:
        bound = busiest
    else:
        bound = "issue"
    pressure = {u: (c / cycles if cycles else 0.0) for u, c in unit_cycles.items()}
    warps = math.ceil(cycles / throughput - 1e-9) if throughput else 0
    return Timing(
        instructions=n, dependencies=deps, loop_carried=carried if repeats else 0,
        critical_path=cp, critical_chain=[region[i].instr.line for i in chain],
        unit_cycles=unit_cycles, issue_cycles=issue, throughput_bound=throughput,
        latency_bound=latency, bound_by=bound, cycles_per_iteration=max(cycles, throughput),
        ipc=(n / max(cycles, throughput)) if n else 0.0, resource_pressure=pressure,
        warps_to_hide_latency=max(warps, 1 if n else 0), repeated=repeats,
        op_classes=dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))))


def block_timings(cfg, prepared, units):
    """Timing per basic block; a block that branches to itself is timed as a repeating loop."""
    out = []
    for b in cfg.blocks:
        region = prepared[b.first:b.first + len(b.instrs)]
        out.append(analyze_region(region, units, b.index in b.succs))
    return out


def loop_timings(cfg, prepared, units, blocks=None):
    """Timing per innermost loop (its blocks in layout order, each once per iteration); outer
    loops get None: their inner trip counts are not known statically. `blocks`: block_timings()
    when already computed (a one-block loop is timed exactly like its block)."""
    out = []
    for loop in cfg.loops:
        if not loop.innermost:
            out.append(None)
            continue
        if blocks is not None and len(loop.blocks) == 1 and blocks[loop.header].repeated:
            out.append(blocks[loop.header])
            continue
        region = []
        for bi in loop.blocks:
            b = cfg.blocks[bi]
            region.extend(prepared[b.first:b.first + len(b.instrs)])
        out.append(analyze_region(region, units, True))
    return out
