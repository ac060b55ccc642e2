"""Roofline: where kernels stand against the machine's compute and memory ceilings.

Ceilings come from the machine model (isa/<arch>.toml) and nowhere else:

    FP32 FMA peak   header.sm_count x header.fp32_lanes_per_sm x 2 FLOP x header.clock_mhz
    tensor peak     header.sm_count x header.tensor_flops_per_cycle_per_sm x header.clock_mhz
                    (where the model has it: dense tensor-core FLOP/cycle measured by
                    `ptxgen calibrate --only tensor`; a ceiling shown, kernels are still
                    placed against the FP32 peak)
    HBM peak        header.hbm_bandwidth_gbs (the datasheet figure)
    DRAM, L2, shared  memory.<level>.bandwidth_gbs (measured or derived, with their sources)

A number the table lacks is listed in `missing` and its ceiling left out; nothing is filled in
here. A kernel's point is its arithmetic intensity (FLOPs / bytes) and its achieved GFLOP/s:
FLOPs and bytes from the operator (flops(), bytes_moved(): the compulsory DRAM traffic), or,
where the operator gives none, counted dynamically on the CPU emulator (every executed
floating-point instruction per active lane, every global load/store byte); time measured on
the GPU when there is one, else predicted by the cycle simulator (ptxgen.sim). The binding
roof at the kernel's intensity is min(FP32 peak, intensity x memory roof), the memory roof being
the HBM peak, or L2's bandwidth when the kernel's bytes stay in L2 across repeated launches
(ptxgen.sim.levels, the rule the simulator and the tuner use too); the fraction achieved is GFLOP/s over that roof (for memory-bound kernels the same as
GB/s over the memory roof).

    r = roofline(["saxpy", "matmul"], arch="sm_90")
    print(r.to_text()); r.write_png("roofline.png")
"""
from dataclasses import dataclass, field

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir import opcodes

TIME_SOURCES = ("auto", "sim", "gpu")


@dataclass
class Roof:
    name: str
    kind: str                # "compute" (GFLOP/s) or "memory" (GB/s)
    value: float
    source: str


@dataclass
class Workload:
    """One point of the chart: one or more launches whose FLOPs, bytes and times add up
    (an attention block is three kernels: scores, softmax, weighted sum)."""
    name: str
    parts: list              # [(Operator, shape dict)]


@dataclass
class Point:
    name: str
    flops: float
    bytes: float
    seconds: float
    time_source: str         # "simulated" or "measured"
    counts_source: str       # "operator" or "emulator"
    parts: list = field(default_factory=list)
    simulated_seconds: float = None
    level: str = ""          # the memory level assumed (ptxgen.sim.levels): "L2" or "DRAM"
    measured_seconds: float = None
    intensity: float = 0.0
    gflops: float = 0.0
    gbs: float = 0.0
    roof_gflops: float = 0.0
    bound: str = ""              # "compute" or "memory"
    roof: str = ""               # the ceiling that binds at this intensity
    fraction: float = 0.0        # of that ceiling

    def to_dict(self):
        return dict(self.__dict__)


@dataclass
class Roofline:
    arch: str
    device: str
    roofs: list
    points: list
    missing: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def roof(self, name):
        return next((r for r in self.roofs if r.name == name), None)

    @property
    def ridge(self):
        """FLOP/byte where the HBM slope meets the FP32 peak."""
        c, m = self.roof("FP32 FMA peak"), self.roof("HBM peak")
        return c.value / m.value if c and m else None

    def to_dict(self):
        return {"arch": self.arch, "device": self.device, "ridge_flop_per_byte": self.ridge,
                "roofs": [r.__dict__ for r in self.roofs],
                "points": [p.to_dict() for p in self.points],
                "missing": list(self.missing), "notes": list(self.notes)}

    def to_text(self):
        L = [f"roofline for {self.arch} ({self.device})", "  ceilings (from the machine model):"]
        for r in self.roofs:
            unit = "GFLOP/s" if r.kind == "compute" else "GB/s"
            L.append(f"    {r.name:<16} {r.value:>10,.0f} {unit:<8} {r.source}")
        if self.ridge:
            L.append(f"  ridge point: {self.ridge:.1f} FLOP/byte (kernels below it are "
                     f"memory-bound on HBM)")
        L += [f"  missing from the machine model: {m}" for m in self.missing]
        rows = [("kernel", "FLOP", "bytes", "FLOP/B", "time", "GFLOP/s", "GB/s", "bound",
                 "of roof")]
        for p in self.points:
            rows.append((p.name, f"{p.flops:.3g}", f"{p.bytes:.3g}", f"{p.intensity:.3g}",
                         f"{p.seconds * 1e6:,.1f} us {p.time_source[:3]}",
                         f"{p.gflops:,.0f}", f"{p.gbs:,.0f}", p.bound,
                         f"{100 * p.fraction:.1f}%"))
        w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        L += ["  " + "  ".join(c.rjust(w[i]) if i else c.ljust(w[i])
                               for i, c in enumerate(r)) for r in rows]
        for p in self.points:
            L.append(f"  {p.name}: {p.bound}-bound ({p.intensity:.3g} FLOP/B, ridge "
                     f"{self.ridge or 0:.1f}); {100 * p.fraction:.1f}% of the {p.roof} roof "
                     f"({p.roof_gflops:,.0f} GFLOP/s there); time {p.time_source}, counts "
                     f"from the {p.counts_source}")
        L += [f"  note: {n}" for n in self.notes]
        return "\n".join(L) + "\n"

    def write_png(self, path):
        """A log-log chart (matplotlib, Agg): every ceiling labelled, one point per kernel."""
        plot(self, path)


# -- ceilings ------------------------------------------------------------------------------------
def ceilings(arch):
    """(roofs, missing) from the isa table of `arch`."""
    t = isamod.load(arch)
    h, missing, roofs = t.header, [], []

    def need(key):
        v = getattr(h, key, None)
        if not v:
            missing.append(f"header.{key}")
        return v

    sms, lanes, mhz = need("sm_count"), need("fp32_lanes_per_sm"), need("clock_mhz")
    if sms and lanes and mhz:
        roofs.append(Roof("FP32 FMA peak", "compute", sms * lanes * 2 * mhz / 1e3,
                          f"{sms} SMs x {lanes} FP32 lanes x 2 FLOP x {mhz:g} MHz"))
    tensor = h.tensor_flops_per_cycle_per_sm
    if sms and mhz and tensor:
        roofs.append(Roof("tensor peak", "compute", sms * tensor * mhz / 1e3,
                          f"{sms} SMs x {tensor:g} FLOP/cycle x {mhz:g} MHz "
                          f"({t.sources['header.tensor_flops_per_cycle_per_sm']})"))
    hbm = need("hbm_bandwidth_gbs")
    if hbm:
        roofs.append(Roof("HBM peak", "memory", float(hbm), t.sources["header.hbm_bandwidth_gbs"]))
    for level, name in (("DRAM", "DRAM sustained"), ("L2", "L2"), ("SHARED", "shared")):
        m = t.memory.get(level)
        if m is None or not m.bandwidth_gbs:
            missing.append(f"memory.{level}.bandwidth_gbs")
            continue
        roofs.append(Roof(name, "memory", m.bandwidth_gbs, m.bandwidth_source))
    return t, roofs, missing


# -- counting and timing -------------------------------------------------------------------------
def emulator_counts(op, shape, arch=DEFAULT_TARGET, seed=0):
    """(FLOPs, global bytes) of one launch, counted while it runs on the CPU emulator: every
    executed floating-point instruction times its active, unpredicated lanes, and every global
    load/store/atomic byte. Slow for large shapes (the whole launch is emulated)."""
    from .warp_efficiency import warp_efficiency
    rep = warp_efficiency(op, shape=shape, arch=arch, seed=seed)
    flops = nbytes = 0
    for i in rep.instructions:
        base, *mods = i["opcode"].split(".")
        flops += opcodes.flops(base, mods, i["predicated_on"])      # the opcode table's model
        if i["space"] in ("global", "generic"):
            nbytes += i["bytes_per_lane"] * i["predicated_on"]
    return flops, nbytes


def _time_sim(op, shape, arch):
    """Seconds the simulator predicts for the kernel's own execution (without what CUDA events
    add around a launch, where the simulator reports that separately)."""
    from ..sim import simulate_operator
    rep = simulate_operator(op, shape, arch=arch)
    return (getattr(rep, "device_us", 0.0) or rep.time_us) * 1e-6


def _time_gpu(op, shape):
    from .run import run_operator
    res = run_operator(op, shape, backend="gpu", check=True, time_it=True)
    if not res.ok:
        raise PtxgenError(f"{op.label} {shape}: wrong result on the GPU (max rel. error "
                          f"{res.max_rel_error:.2e}); not timing it")
    return res.time_ms * 1e-3


def _workload(item, shape_args):
    from ..ops import Operator, get_operator
    if isinstance(item, Workload):
        return item
    if isinstance(item, tuple):
        op, shape = item
        op = get_operator(op) if isinstance(op, str) else op
        return Workload(op.label, [(op, op.shape(**(shape or {})))])
    op = get_operator(item) if isinstance(item, str) else item
    if not isinstance(op, Operator):
        raise PtxgenError(f"roofline: {item!r} is not an operator, (operator, shape) or "
                          f"Workload")
    given = {k: v for k, v in (shape_args or {}).items() if k in op.shape_names}
    return Workload(op.label, [(op, op.shape(**given))])


def roofline(kernels, arch=DEFAULT_TARGET, time="auto", shape=None, counts="auto"):
    """A Roofline of `kernels` for `arch`.

    kernels: library names, Operators, (operator, shape) pairs or Workloads; `shape` gives
    sizes (M, N, K, n …) to the names and Operators that have them. time: 'auto' (measured on a
    GPU if one is present, else simulated), 'sim' or 'gpu'. counts: 'auto' (the operator's
    flops()/bytes_moved(), counted on the emulator where it gives none), 'operator' or
    'emulator'."""
    if time not in TIME_SOURCES:
        raise PtxgenError(f"time must be one of {', '.join(TIME_SOURCES)}, got {time!r}")
    if counts not in ("auto", "operator", "emulator"):
        raise PtxgenError(f"counts must be auto, operator or emulator, got {counts!r}")
    table, roofs, missing = ceilings(arch)
    res = Roofline(arch, table.name, roofs, [], missing)
    peak, hbm = res.roof("FP32 FMA peak"), res.roof("HBM peak")
    if peak is None or hbm is None:
        raise PtxgenError(f"isa/{arch}.toml lacks {', '.join(missing)}: the roofline needs the "
                          f"FP32 peak and HBM bandwidth")
    measure = time == "gpu"
    if time == "auto":
        from ..runtime import gpu_available
        measure = gpu_available()
    if measure:
        from ..runtime.device import device_arch
        dev = device_arch()
        if dev != arch:
            res.notes.append(f"times measured on the {dev} GPU, ceilings of {arch}")
    for item in kernels:
        wl = _workload(item, shape)
        p = Point(wl.name, 0.0, 0.0, 0.0, "measured" if measure else "simulated", "operator")
        sim = meas = 0.0
        for op, shp in wl.parts:
            f, b = op.flops(shp), op.bytes_moved(shp)
            if counts == "emulator" or (counts == "auto" and not f and not b):
                f, b = emulator_counts(op, shp, arch)
                p.counts_source = "emulator"
            p.flops += f
            p.bytes += b
            sim += _time_sim(op, shp, arch)
            if measure:
                meas += _time_gpu(op, shp)
            p.parts.append({"kernel": op.label, "shape": dict(shp), "flops": f, "bytes": b})
        p.simulated_seconds = sim
        p.measured_seconds = meas if measure else None
        p.seconds = meas if measure else sim
        if measure:
            # CUDA events around a launch include the launch itself; the machine model says how
            # much that is (timing.launch_overhead_us), so the kernel's own time is what remains
            # when it clearly dominates
            over = getattr(table, "launch_overhead_us", 0.0) * 1e-6 * len(wl.parts)
            if over and meas > 2 * over:
                p.seconds = meas - over
                p.time_source = "measured, launch overhead subtracted"
            elif over:
                res.notes.append(f"{p.name}: {meas * 1e6:.1f} us measured is within twice the "
                                 f"launch overhead ({over * 1e6:.1f} us): overhead-dominated")
        # the memory level the simulator assumes too (ptxgen.sim.levels): a footprint that
        # stays in L2 across repeated launches has L2's roof, a larger one streams from HBM
        from ..sim.levels import memory_level
        l2 = res.roof("L2")
        mem = l2 if l2 is not None and memory_level(table, p.bytes) == "L2" else hbm
        p.level = "L2" if mem is l2 else "DRAM"
        _place(p, peak, mem)
        if p.fraction > 1:
            res.notes.append(f"{p.name}: above its roof: the {p.time_source} time is shorter "
                             f"than the {p.roof} ceiling allows for {p.bytes:.3g} bytes")
        res.points.append(p)
    return res


def _place(p, peak, mem):
    if p.bytes <= 0 or p.seconds <= 0:
        raise PtxgenError(f"{p.name}: no bytes or no time to place on the roofline")
    p.intensity = p.flops / p.bytes
    p.gflops = p.flops / p.seconds / 1e9
    p.gbs = p.bytes / p.seconds / 1e9
    p.roof_gflops = min(peak.value, p.intensity * mem.value)
    compute = p.intensity * mem.value >= peak.value
    p.bound = "compute" if compute else "memory"
    p.roof = peak.name if compute else mem.name
    p.fraction = p.gflops / peak.value if compute else p.gbs / mem.value


# -- chart ---------------------------------------------------------------------------------------
def plot(r, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PtxgenError("the roofline chart needs matplotlib (pip install ptxgen[plot])") \
            from None
    peak = r.roof("FP32 FMA peak").value
    xs = [p.intensity for p in r.points if p.intensity > 0]
    lo = min(xs + [r.ridge or 1.0]) / 8
    hi = max(xs + [r.ridge or 1.0]) * 8
    fig, ax = plt.subplots(figsize=(9, 6.5))
    ax.set_xscale("log")
    ax.set_yscale("log")
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax.axhline(peak, color="black", lw=2)
    ax.text(hi, peak * 1.08, f"FP32 FMA peak {peak:,.0f} GFLOP/s", ha="right", va="bottom")
    tensor = r.roof("tensor peak")
    top = peak if tensor is None else max(peak, tensor.value)
    if tensor is not None:
        ax.axhline(tensor.value, color="black", lw=1.2, ls="--")
        ax.text(hi, tensor.value * 1.08, f"tensor peak {tensor.value:,.0f} GFLOP/s",
                ha="right", va="bottom")
    styles = {"HBM peak": ("tab:red", "-"), "DRAM sustained": ("tab:red", "--"),
              "L2": ("tab:orange", "-."), "shared": ("tab:green", ":")}
    for roof in r.roofs:
        if roof.kind != "memory":
            continue
        color, ls = styles.get(roof.name, ("tab:gray", "-"))
        ax.plot(grid, [min(peak, x * roof.value) for x in grid], color=color, ls=ls, lw=1.5,
                label=f"{roof.name}: {roof.value:,.0f} GB/s")
    if r.ridge:
        ax.axvline(r.ridge, color="gray", lw=0.8, ls=":")
        ax.text(r.ridge * 1.05, 0.02, f"ridge {r.ridge:.1f} FLOP/B", color="gray",
                fontsize=8, rotation=90, transform=ax.get_xaxis_transform())
    ymin = min([p.gflops for p in r.points if p.gflops > 0] + [lo * r.roof("HBM peak").value])
    markers = "osD^vP*X"
    for k, p in enumerate(r.points):
        x = p.intensity if p.intensity > 0 else lo * 1.2
        y = max(p.gflops, ymin)
        ax.plot([x], [y], markers[k % len(markers)], ms=9, color="black", mfc=f"C{k + 4}")
        what = f"{100 * p.fraction:.0f}% of {p.roof} ({p.time_source})"
        if p.intensity <= 0:             # no FLOPs: drawn at the left edge, by its bandwidth
            what = f"no FLOPs: {p.gbs:,.0f} GB/s, {what}"
        ax.annotate(f"{p.name}\n{what}",
                    (x, y), textcoords="offset points", xytext=(8, -4), fontsize=8,
                    va="top")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=4, fontsize=8,
              title="memory roofs", title_fontsize=8, frameon=False)
    ax.set_xlim(lo, hi)
    ax.set_ylim(ymin / 4, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.set_title(f"roofline: {r.device} ({r.arch})")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise PtxgenError(f"cannot write {path}: {e.strerror}") from None
    finally:
        plt.close(fig)
