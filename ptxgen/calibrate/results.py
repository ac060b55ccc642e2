"""Raw microbenchmark numbers → model values, the table, and the machine-model entries they
replace."""
import math
from dataclasses import asdict, dataclass, field

from .kernels import ARITH_CLASSES, CHAIN_PTX
from .kernels_tensor import MMA_PTX, WGMMA_NS, wgmma_ptx
from .kernels_tma import TMA_PTX

# the pipe the tensor-core classes occupy, and the wgmma N whose figures set ops.WGMMA: the
# one ops/tc_matmul's GEMM issues (its other N are in the table and the JSON)
TENSOR_UNIT = "TENSOR"
TMA_UNIT = "TMA"                 # the bulk copy engine: its own pipe in the machine model
WGMMA_MODEL_N = 128


@dataclass
class Measurement:
    name: str                  # what the table calls it
    value: float
    unit: str
    what: str                  # how it was measured (goes into the source text)
    targets: tuple = ()        # ("ops.FMA.latency", …): machine-model entries it sets
    model: float = None        # the value the machine model has now (first target)
    decimals: int = 1
    unit_of: str = None        # the pipe its ops.X targets name (a class the model may lack)

    def to_dict(self):
        return asdict(self)


@dataclass
class Calibration:
    device: str
    arch: str
    date: str
    measurements: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def source(self, m):
        return f"measured {self.date} on {self.device} by ptxgen calibrate: {m.what}"

    def updates(self):
        """{"ops.FMA.latency": (value, source)} for every entry a measurement sets (and
        {"ops.MMA.unit": ("TENSOR", None)}: a plain value, for a class the file lacks)."""
        out = {}
        for m in self.measurements:
            if m.unit_of:
                for t in m.targets:
                    out[t.rpartition(".")[0] + ".unit"] = (m.unit_of, None)
        for m in self.measurements:
            if not _usable(m.value):
                continue
            v = round(m.value, m.decimals) if m.decimals else int(round(m.value))
            for t in m.targets:
                out[t] = (v, self.source(m))
        return out

    def to_dict(self):
        return {"device": self.device, "arch": self.arch, "date": self.date,
                "measurements": [m.to_dict() for m in self.measurements],
                "errors": dict(self.errors), "notes": list(self.notes)}

    def to_text(self):
        rows = [("measurement", "value", "model now", "sets")]
        for m in self.measurements:
            fmt = f"{{:.{m.decimals}f}}" if m.decimals else "{:.0f}"
            now = "" if m.model is None else fmt.format(m.model)
            rows.append((m.name, f"{fmt.format(m.value)} {m.unit}", now,
                         ", ".join(m.targets) or "-"))
        w = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = [f"calibration of {self.arch} on {self.device} ({self.date})", ""]
        for k, r in enumerate(rows):
            lines.append(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}  {r[3]}")
            if k == 0:
                lines.append("-" * (sum(w) + 6))
        for n in self.notes:
            lines.append(f"note: {n}")
        for name, e in self.errors.items():
            lines.append(f"failed: {name}: {e}")
        return "\n".join(lines)


def _usable(v):
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _model(table, target):
    if table is None:
        return None
    parts = target.split(".")
    if parts[0] == "ops" and parts[1] not in table.ops:
        return None
    if parts[0] == "header":
        return getattr(table.header, parts[1], None)
    if parts[0] == "timing":
        return table.timing.get(parts[1]) if table.timing else None
    if parts[0] == "memory_model":
        return (table.memory_model or {}).get(parts[1])
    kind, name, key = parts
    if kind == "ops":
        return getattr(table.ops[name], key)
    return getattr(table.memory[name], key)


def derive(raw, table=None):
    """The Calibration a raw measurement dict gives (`table`: the current machine model, for
    the comparison column and the issue-interval arithmetic)."""
    cal = Calibration(raw.get("device", "?"), raw.get("arch", "?"), raw.get("date", "?"),
                      errors=dict(raw.get("errors", {})))
    ms = cal.measurements

    def add(name, value, unit, what, targets=(), decimals=1, unit_of=None):
        m = Measurement(name, float(value), unit, what, tuple(targets),
                        _model(table, targets[0]) if targets else None, decimals, unit_of)
        if _usable(m.value):
            ms.append(m)
        else:
            cal.errors[name] = f"measured {value!r}, not a positive number"

    for cls in ARITH_CLASSES:
        r = raw.get("latency", {}).get(cls)
        if r:
            add(f"{cls} latency", (r["cycles"] - r["base"]) / r["n"], "cycles",
                f"dependent {CHAIN_PTX[cls]} chain, {r['n']} instructions, one warp",
                [f"ops.{cls}.latency"])
    sched = table.header.schedulers_per_sm if table is not None else None
    for cls in ARITH_CLASSES:
        r = raw.get("throughput", {}).get(cls)
        if r and sched:
            per_sp = r["warps"] * r["chains"] * r["ops_per_chain"] / sched
            add(f"{cls} issue interval", r["cycles"] / per_sp, "cycles/warp instr",
                f"{r['warps']} warps x {r['chains']} independent {CHAIN_PTX[cls]} chains, "
                f"cycles per warp instruction per sub-partition",
                [f"ops.{cls}.issue_interval"], decimals=2)
    chase = raw.get("chase", {})
    what = {"SHARED": "ld.shared.u32 pointer chase",
            "L1": "ld.global.ca pointer chase, {kb} KB array (L1-resident)",
            "L2": "ld.global.cg pointer chase, {kb} KB array (L2-resident)",
            "DRAM": "ld.global.cg pointer chase, {kb} KB array, after writing {fkb} KB to "
                    "flush L2"}
    targets = {"SHARED": ["memory.SHARED.latency", "ops.LDS.latency"],
               "L1": ["memory.L1.latency"],
               "L2": ["memory.L2.latency", "ops.LDG.latency"],
               "DRAM": ["memory.DRAM.latency"]}
    for level in ("SHARED", "L1", "L2", "DRAM"):
        r = chase.get(level)
        if r:
            text = what[level].format(kb=r.get("bytes", 0) // 1024,
                                      fkb=r.get("flush_bytes", 0) // 1024)
            add(f"{level} load latency", r["cycles"] / r["steps"], "cycles",
                f"{text}, {r['steps']} dependent loads", targets[level])
    r = raw.get("barrier")
    if r:
        add("bar.sync", r["cycles"] / r["n"], "cycles",
            f"{r['n']} back-to-back bar.sync, {r['warps']} warps", ["ops.BAR.latency"])
    # Event-timed kernels include the launch overhead the empty kernel shows (host submission
    # in this environment: 34-69 us on the lent H200); the bandwidths and the clock are the
    # kernel's own, so that the model can add the overhead back once (sim/result.py).
    launch_us = raw.get("launch_us")
    overhead_ms = launch_us * 1e-3 if _usable(launch_us) else 0.0
    less = " minus the empty-kernel launch time" if overhead_ms else ""

    def exec_ms(ms):
        # a kernel shorter than the overhead cannot be corrected: keep the event time
        return ms - overhead_ms if ms > 2 * overhead_ms else ms

    copy = raw.get("copy", {})
    for level, key in (("DRAM", "memory.DRAM.bandwidth_gbs"), ("L2", "memory.L2.bandwidth_gbs")):
        r = copy.get(level)
        if r:
            gbs = r["bytes"] / (exec_ms(r["ms"]) * 1e-3) / 1e9
            add(f"{level} copy bandwidth", gbs, "GB/s",
                f"v4 copy kernel, {r['bytes'] // (1 << 20)} MiB read+written, CUDA events "
                f"median{less}", [key], decimals=0)
    r = raw.get("ffma")
    if r:
        tflops = r["flops"] / (exec_ms(r["ms"]) * 1e-3) / 1e12
        add("FFMA peak", tflops, "TFLOP/s", "independent FMAs on every SM", decimals=1)
        if table is not None:
            lanes = table.header.fp32_lanes_per_sm * r["sm_count"]
            mhz = r["flops"] / 2 / lanes / (exec_ms(r["ms"]) * 1e-3) / 1e6
            add("sustained FMA clock", mhz, "MHz",
                f"FFMA peak (8 CTAs x 256 threads per SM, 8 independent fma.rn.f32 chains, "
                f"CUDA events median{less}) / (2 x FP32 lanes x SMs): the clock under full "
                f"load", ["timing.sustained_clock_mhz"], decimals=0)
            if mhz < 0.95 * table.header.clock_mhz:
                cal.notes.append(
                    f"the GPU sustained {mhz:.0f} MHz under full FMA load, below the model's "
                    f"{table.header.clock_mhz:.0f} MHz: predicted times of compute-bound "
                    f"kernels will read short by {100 * (1 - mhz / table.header.clock_mhz):.0f}%")
    _derive_tensor(raw.get("tensor", {}), sched, add)
    _derive_tma(raw.get("tma", {}), add)
    if raw.get("launch_us") is not None:
        n = raw.get("plan", {}).get("launch_repeats")
        add("empty kernel (events)", raw["launch_us"], "us",
            f"1 CTA of an empty kernel timed with CUDA events, median of "
            f"{n or raw.get('plan', {}).get('event_repeats', '?')} launches",
            ["timing.launch_overhead_us"], decimals=2)
    return cal


def _derive_tensor(tc, sched, add):
    """mma.sync: latency of a dependent chain, issue interval per sub-partition; wgmma: time
    from issue to wait_group 0 of one, and tensor-core time per wgmma with many in flight
    (a warpgroup's wgmma occupies all four sub-partitions' tensor cores at once, so that time
    is each one's issue interval)."""
    r = tc.get("MMA")
    if r:
        add("MMA latency", (r["cycles"] - r["base"]) / r["n"], "cycles",
            f"dependent {MMA_PTX} chain, {r['n']} instructions, one warp",
            ["ops.MMA.latency"], unit_of=TENSOR_UNIT)
        if sched:
            per_sp = r["warps"] * r["chains"] * r["rounds"] / sched
            add("MMA issue interval", r["tput_cycles"] / per_sp, "cycles/warp instr",
                f"{r['warps']} warps x {r['chains']} independent {MMA_PTX} chains, cycles per "
                f"warp instruction per sub-partition", ["ops.MMA.issue_interval"], decimals=2,
                unit_of=TENSOR_UNIT)
    lat, tput = {}, {}
    for n in WGMMA_NS:
        r = tc.get(f"WGMMA{n}")
        if r:
            lat[n] = (r["cycles"] - r["base"]) / r["reps"]
            tput[n] = r["tput_cycles"] / (r["warpgroups"] * r["count"])
    others = [n for n in WGMMA_NS if n != WGMMA_MODEL_N and n in lat]
    # the SM's tensor peak: the best rate of any N (wider N amortize more per instruction)
    best = max(tput, key=lambda n: 2 * 64 * n * 16 / tput[n]) if tput else None
    for n in WGMMA_NS:
        if n not in lat:
            continue
        r = tc[f"WGMMA{n}"]
        model = n == WGMMA_MODEL_N
        also = "; " + ", ".join(f"m64n{o}k16: {lat[o]:.1f}" for o in others) if model else ""
        add(f"WGMMA n{n} latency", lat[n], "cycles",
            f"wgmma.fence + one {wgmma_ptx(n)} + commit_group + wait_group 0, {r['reps']} "
            f"rounds, one warpgroup{also}", ["ops.WGMMA.latency"] if model else [],
            unit_of=TENSOR_UNIT if model else None)
        also = "; " + ", ".join(f"m64n{o}k16: {tput[o]:.2f}" for o in others) if model else ""
        add(f"WGMMA n{n} interval", tput[n], "cycles/wgmma",
            f"{r['warpgroups']} warpgroups x {r['count']} {wgmma_ptx(n)} in flight into one "
            f"accumulator each, SM cycles per wgmma (each sub-partition's tensor core busy "
            f"that long){also}", ["ops.WGMMA.issue_interval"] if model else [], decimals=2,
            unit_of=TENSOR_UNIT if model else None)
        add(f"WGMMA n{n} tensor FLOP/cycle/SM", 2 * 64 * n * 16 / tput[n], "FLOP/cycle",
            f"2 x 64 x {n} x 16 / the SM cycles per {wgmma_ptx(n)} with many in flight "
            f"(the best of N = {', '.join(map(str, sorted(tput)))})" if n == best else
            f"2 x 64 x {n} x 16 / the SM cycles per {wgmma_ptx(n)} with many in flight",
            ["header.tensor_flops_per_cycle_per_sm"] if n == best else [], decimals=0)


def _derive_tma(tma, add):
    """TMA: one box's time from issue to completion on its mbarrier (latency), and SM cycles
    per box with many in flight (the copy engine's interval for that box size; bytes / interval
    is the SM's TMA bandwidth from L2)."""
    r, small = tma.get("latency"), tma.get("latency_small")
    if r:
        lat = (r["cycles"] - r["base"]) / r["reps"]
        also = ""
        if small:
            also = (f"; a {small['box_rows']}x128-byte box ({small['bytes']} B): "
                    f"{(small['cycles'] - small['base']) / small['reps']:.1f}")
        add("TMA latency", lat, "cycles",
            f"mbarrier.arrive.expect_tx + one {TMA_PTX} of a {r['box_rows']}x128-byte box "
            f"({r['bytes']} B, 128-byte swizzle, L2-resident) + try_wait.parity until it has "
            f"landed, {r['reps']} rounds, one thread{also}", ["ops.TMA.latency"],
            unit_of=TMA_UNIT)
    if small:
        add("TMA latency, small box", (small["cycles"] - small["base"]) / small["reps"],
            "cycles", f"as TMA latency with a {small['box_rows']}x128-byte box")
    s = tma.get("stream")
    if s:
        n = s["count"] - s["base_count"]
        interval = (s["cycles"] - s["base_cycles"]) / n if n > 0 else float("nan")
        what = (f"{s['count']} minus {s['base_count']} {TMA_PTX} of {s['bytes']}-byte boxes "
                f"(L2-resident) through a ring of {s['slots']} shared-memory slots, each refilled "
                f"once its copy landed, one thread of one CTA")
        add("TMA interval", interval, "cycles/box", f"{what}: SM cycles per box",
            ["ops.TMA.issue_interval"], decimals=2, unit_of=TMA_UNIT)
        add("TMA bandwidth", s["bytes"] / interval if interval > 0 else float("nan"),
            "B/cycle/SM",
            f"{what}: bytes per SM cycle", ["memory_model.tma_bytes_per_cycle_per_sm"])
