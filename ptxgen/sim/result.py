"""What a simulation reports: cycles, time, IPC, utilizations, stall reasons, and the views of
the first warps (a Chrome/Perfetto trace and a PNG timeline)."""
import json
from dataclasses import dataclass, field

from ..errors import PtxgenError
from ..names import display_name
from .engine import STALLS


@dataclass
class WaveResult:
    name: str                   # "full" or "tail"
    count: int                  # how many such waves the launch has
    ctas: int                   # CTAs on the simulated SM
    active_sms: int
    cycles: float               # extrapolated cycles of one such wave
    sampled_cycles: float       # cycles actually simulated
    period: float               # steady-state cycles per sampled-loop iteration
    skipped: int                # loop iterations added back by extrapolation
    issued: float               # warp instructions (extrapolated)
    unit_busy: list             # pipe-cycles per unit (extrapolated)
    stalls: dict                # warp-cycles per reason, in the simulated sample
    warp_cycles: float
    loads: dict = field(default_factory=dict)
    bytes: dict = field(default_factory=dict)
    events: list = field(default_factory=list)
    steady: float = 0.0         # cycles each further such wave adds (CTAs start as others end)
    busy: dict = field(default_factory=dict)    # memory server → busy cycles (extrapolated)
    finish: float = 0.0         # the last warp's exit (extrapolated)

    @property
    def total(self):
        """Cycles of `count` such waves: the first whole, each further one its steady-state
        share, since the block scheduler starts a CTA as soon as one ends and the memory
        still draining from one wave overlaps the next wave's work."""
        return self.cycles + (self.count - 1) * (self.steady or self.cycles)


def pipe_share(table, waves, unit):
    """The share of the waves' time the pipes of `unit` (TENSOR, XU, ...) were busy (0
    without such a pipe)."""
    cycles = sum(w.total for w in waves)
    if unit not in table.units or not cycles:
        return 0.0
    k = table.units.index(unit)
    return sum(w.count * w.unit_busy[k] for w in waves) / (
        cycles * table.header.schedulers_per_sm)


@dataclass
class SimReport:
    kernel: str
    arch: str
    device: str
    grid: tuple
    block: tuple
    cycles: float
    time_us: float
    ipc: float
    issue_utilization: float
    unit_utilization: dict
    stalls: dict
    details: dict
    warnings: list
    trace_events: list = field(default_factory=list, repr=False)
    clock_mhz: float = 0.0
    device_us: float = 0.0          # the kernel's own execution; time_us adds the launch

    @classmethod
    def build(cls, *, kernel, arch, table, grid, block, regs, shared, occupancy, waves, n_ctas,
              dram_fraction, footprint, requested, level, hot, sample, warnings, wall_s,
              resident=False, launch_path="cuda.core", clock_mhz=None,
              path_steps, trace_events):
        h = table.header
        # cycles are SM cycles at the clock the GPU sustains under load (isa [timing]); what
        # CUDA events report around a launch adds the measured launch overhead to them
        clock = clock_mhz or table.time_clock_mhz
        cycles = sum(w.total for w in waves)
        # the GPU starts the grid's CTAs one after another at a fixed rate, whatever each does:
        # a grid of short CTAs (one store a thread) lasts at least that long
        dispatch = n_ctas * (table.memory_model or {}).get("cta_dispatch_ns", 0.0) * clock * 1e-3
        cycles = max(cycles, dispatch)
        issued = sum(w.count * w.issued for w in waves)
        slot_cycles = cycles * h.schedulers_per_sm
        units = table.units
        busy = [sum(w.count * w.unit_busy[u] for w in waves) for u in range(len(units))]
        stall_tot = {r: sum(w.count * w.stalls[r] for w in waves) for r in STALLS}
        warp_cycles = sum(w.count * w.warp_cycles for w in waves)
        mem_busy = {}
        for w in waves:
            n = w.total / w.cycles if w.cycles else w.count
            for k, v in w.busy.items():
                mem_busy[k] = mem_busy.get(k, 0.0) + n * v
        if dispatch:
            mem_busy["DISPATCH"] = dispatch
        details = {
            "bound": explain(cycles, issued, busy, units, mem_busy, stall_tot, warp_cycles,
                             waves, h.schedulers_per_sm),
            "registers": regs, "shared_bytes": shared,
            "ctas_per_sm": occupancy.active_blocks_per_sm,
            "warps_per_sm": occupancy.active_warps_per_sm,
            "occupancy": occupancy.occupancy, "occupancy_limiter": occupancy.limiter,
            "ctas": n_ctas,
            "waves": [{"kind": w.name, "count": w.count, "ctas_on_sm": w.ctas,
                       "active_sms": w.active_sms, "cycles": w.cycles,
                       "simulated_cycles": w.sampled_cycles,
                       "loop_period_cycles": w.period, "loop_iterations_extrapolated": w.skipped,
                       "global_loads_by_level": w.loads, "bytes_by_level": w.bytes}
                      for w in waves],
            "memory_model": {"level": level, "dram_fraction": dram_fraction,
                             "footprint_bytes": footprint, "requested_load_bytes": requested,
                             "l2_resident": resident},
            "sampled_loop": None if hot is None else {"header_instruction": hot[0],
                                                      "line": hot[1], "iterations": sample},
            "warp_instructions": issued,
            "stall_cycles": stall_tot,
            "simulation_seconds": wall_s,
            "kernel_us": cycles / clock,
            "kernel_gap_us": table.kernel_gap_us,
            "launch_path": launch_path,
            "launch_overhead_us": table.launch_overhead_for(launch_path),
            "path_steps": path_steps,
        }
        return cls(
            kernel=kernel, arch=arch, device=table.name, grid=tuple(grid), block=tuple(block),
            cycles=cycles,
            time_us=cycles / clock + table.kernel_gap_us + table.launch_overhead_for(launch_path),
            device_us=cycles / clock + table.kernel_gap_us,
            ipc=issued / cycles if cycles else 0.0,
            issue_utilization=issued / slot_cycles if slot_cycles else 0.0,
            unit_utilization={u: (busy[k] / slot_cycles if slot_cycles else 0.0)
                              for k, u in enumerate(units)},
            stalls={r: (stall_tot[r] / warp_cycles if warp_cycles else 0.0) for r in STALLS},
            details=details, warnings=list(warnings), trace_events=trace_events,
            clock_mhz=clock)

    def to_dict(self):
        return {"kernel": self.kernel, "arch": self.arch, "device": self.device,
                "grid": list(self.grid), "block": list(self.block), "cycles": self.cycles,
                "time_us": self.time_us, "device_us": self.device_us, "ipc": self.ipc,
                "issue_utilization": self.issue_utilization,
                "unit_utilization": self.unit_utilization, "stalls": self.stalls,
                "details": self.details, "warnings": self.warnings}

    def explain_text(self):
        """Which resource bounds the time, with every resource's share of the SM's time."""
        b = self.details["bound"]
        lines = [f"{self.kernel}: {self.device_us:.2f} us on the device, bound by "
                 f"{format_bound(b)}",
                 "  share of the time each resource is busy (issue and pipes: of the "
                 "schedulers' slots; memory levels: of the SM's share of the level):"]
        for k, v in sorted(b["shares"].items(), key=lambda kv: -kv[1]):
            lines.append(f"    {k:22s} {100 * v:5.1f}%")
        lines.append("  warp stalls: " + ", ".join(f"{r} {100 * v:.1f}%"
                                                     for r, v in self.stalls.items()))
        mm = self.details["memory_model"]
        lines.append(f"  memory level: {_level_text(mm)}")
        return "\n".join(lines)

    def to_text(self, warnings=True):
        """The report in lines; its warnings last (warnings=False: without them, for a caller
        that shows them itself)."""
        d = self.details
        lines = [
            f"{display_name(self.kernel)} on {self.arch} ({self.device}): "
            f"grid {_xyz(self.grid)}, "
            f"block {_xyz(self.block)}",
            f"  placement: {d['ctas_per_sm']} CTAs/SM ({d['warps_per_sm']} warps, "
            f"{d['registers']} registers, {d['shared_bytes']} B shared; limited by "
            f"{d['occupancy_limiter']}), {d['ctas']} CTAs",
        ]
        for w in d["waves"]:
            extra = ""
            if w["loop_iterations_extrapolated"]:
                extra = (f"; {w['loop_iterations_extrapolated']} loop iterations at "
                         f"{w['loop_period_cycles']:.1f} cycles extrapolated")
            lines.append(f"  {w['kind']} wave x{w['count']}: {w['ctas_on_sm']} CTAs on the SM, "
                         f"{w['cycles']:.0f} cycles (simulated {w['simulated_cycles']:.0f}"
                         f"{extra})")
        lines += [
            f"  device time: {self.device_us:.2f} us ({self.cycles:,.0f} cycles = "
            f"{d['kernel_us']:.2f} us at {self.clock_mhz:.0f} MHz + {d['kernel_gap_us']:.2f} us "
            f"the GPU spends per launch), as back-to-back launches see it",
            f"  launch overhead ({d['launch_path']}): {d['launch_overhead_us']:.2f} us more for a "
            f"lone launch timed with events: {self.time_us:.2f} us",
            f"  bound by: {format_bound(d['bound'])}",
            f"  IPC {self.ipc:.2f} (warp instructions per cycle per SM), issue slots used "
            f"{100 * self.issue_utilization:.1f}%",
            "  pipes: " + ", ".join(f"{u} {100 * v:.1f}%" for u, v in
                                    self.unit_utilization.items() if v > 0.0005),
            "  warp stalls: " + ", ".join(f"{r} {100 * v:.1f}%" for r, v in self.stalls.items()),
            f"  global loads: {_level_text(d['memory_model'])}",
            f"  simulated in {d['simulation_seconds']:.2f} s",
        ]
        if warnings:
            lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    # -- views of the first warps -------------------------------------------------------------
    def chrome_trace(self):
        """Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one track per warp,
        issues and stalls as complete events; timestamps in microseconds of device time."""
        us = 1.0 / self.clock_mhz
        ev = [{"name": "process_name", "ph": "M", "pid": 0,
               "args": {"name": f"{self.kernel} SM 0 ({self.arch})"}}]
        for wid, events in enumerate(self.trace_events):
            ev.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": wid,
                       "args": {"name": f"warp {wid}"}})
            for kind, start, end, text in events:
                ev.append({"name": text if kind == "issue" else kind,
                           "cat": "issue" if kind == "issue" else "stall",
                           "ph": "X", "pid": 0, "tid": wid, "ts": start * us,
                           "dur": (end - start) * us,
                           "args": {"cycle": start, "cycles": end - start}})
        return {"traceEvents": ev, "displayTimeUnit": "ns",
                "otherData": {"kernel": self.kernel, "clock_mhz": self.clock_mhz}}

    def write_trace(self, path):
        try:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(self.chrome_trace(), f)
        except OSError as e:
            raise PtxgenError(f"cannot write {path}: {e.strerror}") from None

    def write_png(self, path, max_cycles=None):
        """A timeline of the first warps: issues (black ticks) and stalls colored by reason."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise PtxgenError("the PNG timeline needs matplotlib (pip install ptxgen[plot])") \
                from None
        colors = {"issue": "black", "dependency": "tab:orange", "memory": "tab:red",
                  "throughput": "tab:purple", "barrier": "tab:blue",
                  "not_selected": "tab:gray"}
        n = len(self.trace_events)
        fig, ax = plt.subplots(figsize=(12, 1.6 + 0.45 * max(n, 1)))
        end = 0
        for wid, events in enumerate(self.trace_events):
            by = {}
            for kind, start, stop, _t in events:
                if max_cycles is not None and start >= max_cycles:
                    continue
                by.setdefault(kind, []).append((start, stop - start))
                end = max(end, stop)
            for kind, spans in by.items():
                ax.broken_barh(spans, (wid - 0.4, 0.8), facecolors=colors.get(kind, "green"),
                               linewidth=0)
        ax.set_yticks(range(n))
        ax.set_yticklabels([f"warp {i}" for i in range(n)])
        ax.invert_yaxis()
        ax.set_xlim(0, max_cycles or max(end, 1))
        ax.set_xlabel("cycle")
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
        ax.legend(handles, list(colors), loc="lower center", ncol=len(colors),
                  bbox_to_anchor=(0.5, 1.0), fontsize=8, frameon=False)
        fig.suptitle(f"{display_name(self.kernel)}: first {n} warps of SM 0 (first wave)")
        fig.tight_layout()
        try:
            fig.savefig(path, dpi=110)
        except OSError as e:
            raise PtxgenError(f"cannot write {path}: {e.strerror}") from None
        finally:
            plt.close(fig)


# a resource busy at least this share of the time is what the time is made of; below it the
# warps mostly wait (latency), and the stall reasons say on what
BOUND_SHARE = 0.6


def explain(cycles, issued, unit_busy, units, mem_busy, stalls, warp_cycles, waves, nsched):
    """Which resource bounds the predicted time: the busiest of the issue slots, each pipe and
    each memory level (share of the SM's time it was busy), else latency (named by the
    dominant stall reason), and how much of the time the last, partial wave takes."""
    if not cycles:
        return {"resource": "none", "share": 0.0, "shares": {}}
    shares = {"issue": issued / (cycles * nsched)}
    for k, u in enumerate(units):
        shares[f"pipe {u}"] = unit_busy[k] / (cycles * nsched)
    for k, v in mem_busy.items():
        shares[{"SHARED": "shared memory", "ATOMIC": "same-address atomics",
                 "DISPATCH": "CTA dispatch"}.get(k, k)] = \
            v / cycles
    top = max(shares, key=shares.get)
    out = {"resource": top, "share": shares[top],
           "shares": {k: round(v, 4) for k, v in shares.items() if v > 0.005}}
    if shares[top] < BOUND_SHARE:
        waits = {r: v for r, v in stalls.items() if r != "not_selected"}
        why = max(waits, key=waits.get) if warp_cycles and any(waits.values()) else "issue"
        out["resource"] = "latency" if why in ("memory", "dependency") else why
        out["waiting_on"] = why
    tail = [w for w in waves if w.name == "tail"]
    if tail and len(waves) > 1:
        out["tail_wave_share"] = tail[0].total / cycles
    return out


def format_bound(b):
    """One line: what bounds the time and the shares behind it."""
    head = b["resource"]
    if "waiting_on" in b:
        head = f"{head} (warps mostly wait on {b['waiting_on']}; busiest resource " \
               f"{max(b['shares'], key=b['shares'].get, default='none')} " \
               f"{100 * max(b['shares'].values(), default=0):.0f}%)"
    else:
        head = f"{head} ({100 * b['share']:.0f}% busy)"
    if b.get("tail_wave_share", 0) > 0.2:
        head += f"; the last, partial wave takes {100 * b['tail_wave_share']:.0f}% of the time"
    return head


def _level_text(mm):
    text = f"{100 * mm['dram_fraction']:.1f}% of L2-level traffic from DRAM (level {mm['level']}"
    return text + ("; footprint L2-resident across launches)" if mm["l2_resident"] else ")")


def _xyz(t):
    return ",".join(str(x) for x in t)
