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
              resident=False,
              path_steps, trace_events):
        h = table.header
        # cycles are SM cycles at the clock the GPU sustains under load (isa [timing]); what
        # CUDA events report around a launch adds the measured launch overhead to them
        clock = table.time_clock_mhz
        cycles = sum(w.count * w.cycles for w in waves)
        issued = sum(w.count * w.issued for w in waves)
        slot_cycles = sum(w.count * w.cycles for w in waves) * h.schedulers_per_sm
        units = table.units
        busy = [sum(w.count * w.unit_busy[u] for w in waves) for u in range(len(units))]
        stall_tot = {r: sum(w.count * w.stalls[r] for w in waves) for r in STALLS}
        warp_cycles = sum(w.count * w.warp_cycles for w in waves)
        details = {
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
            "launch_overhead_us": table.launch_overhead_us,
            "path_steps": path_steps,
        }
        return cls(
            kernel=kernel, arch=arch, device=table.name, grid=tuple(grid), block=tuple(block),
            cycles=cycles, time_us=cycles / clock + table.launch_overhead_us,
            device_us=cycles / clock,
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

    def format_text(self):
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
            f"  predicted: {self.cycles:,.0f} cycles = {self.device_us:.2f} us at "
            f"{self.clock_mhz:.0f} MHz; {self.time_us:.2f} us with the launch overhead "
            f"({d['launch_overhead_us']:.2f} us)",
            f"  IPC {self.ipc:.2f} (warp instructions per cycle per SM), issue slots used "
            f"{100 * self.issue_utilization:.1f}%",
            "  pipes: " + ", ".join(f"{u} {100 * v:.1f}%" for u, v in
                                    self.unit_utilization.items() if v > 0.0005),
            "  warp stalls: " + ", ".join(f"{r} {100 * v:.1f}%" for r, v in self.stalls.items()),
            f"  global loads: {100 * d['memory_model']['dram_fraction']:.1f}% from DRAM "
            f"(level {d['memory_model']['level']}"
            + ("; footprint L2-resident across launches)" if d["memory_model"]["l2_resident"]
               else ")"),
            f"  simulated in {d['simulation_seconds']:.2f} s",
        ]
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


def _xyz(t):
    return ",".join(str(x) for x in t)
