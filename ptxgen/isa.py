"""Machine models: per-architecture latencies, issue intervals and resource limits (isa/sm_*.toml).

    table = load("sm_90")
    info = table.op_for(instr)          # OpInfo(key="FMA", latency=4.0, issue_interval=1.0, unit="FMA")
    table.memory["L2"].latency          # cycles
    table.header.max_warps_per_sm

Every number comes from the TOML file with the source it cites; this module only reads, checks
and classifies. Which op class an instruction belongs to is ISA semantics (the same on every
target), so that mapping lives here; what a class costs is data.
"""
import dataclasses
import functools
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from . import arch as archmod
from .errors import IsaDataError, PtxgenError
from .ir.values import Special

# Op classes every table must define (op_for returns only these).
OP_CLASSES = ("FMA", "FADD", "FMUL", "FP64", "HFMA", "IALU", "IMAD", "CONV", "SFU",
              "LDG", "STG", "LDS", "STS", "LDL", "STL", "ATOM", "CONST",
              "BAR", "BRANCH", "SHFL", "SPECIAL", "OTHER")
MEMORY_LEVELS = ("SHARED", "L1", "L2", "DRAM")
OP_NUMBERS = ("latency", "issue_interval")
# optional per op class: the FLOPs of the instruction shape its numbers were measured at (a
# tensor class: wgmma per warpgroup, mma per warp); other shapes of the class scale by FLOPs
OP_OPTIONAL = ("reference_flops",)
MEMORY_NUMBERS = ("latency", "bandwidth_gbs")
# [timing]: how device cycles become the times CUDA events report. Optional (a model without it
# predicts device cycles at header.clock_mhz, no launch cost); when present, both keys.
TIMING_KEYS = ("launch_overhead_us", "sustained_clock_mhz")
# optional [timing] keys: the GPU's own cost per launch in a stream of launches, and the launch
# overhead of the other launch paths (launch_overhead_us is ptxgen's runtime, cuda.core)
TIMING_OPTIONAL = ("kernel_gap_us", "launch_overhead_numba_us", "launch_overhead_triton_us",
                   "tensor_clock_mhz", "tensor_sfu_clock_mhz")
# optional [memory_model]: facts the simulator's memory model uses beyond latency and bandwidth,
# what the target's ptxas makes of PTX (the simulator issues PTX, the GPU ptxas's SASS), and
# how soon the block scheduler refills a CTA's slots
MEMORY_MODEL_KEYS = ("sector_bytes", "l1_line_bytes", "l2_resident_fraction", "atomic_same_address_ns",
                     "shared_atomic_cycles_per_wavefront", "atomic_op_ns", "atomic_float_op_ns",
                     "atomic_interleave_bytes", "l2_partial_write_bytes", "l2_red_partial_bytes",
                     "l2_partial_write_min_bytes", "l2_filled_thin_sector_bytes",
                     "l2_filled_thin_line_bytes", "l2_load_line_bytes", "l2_load_bandwidth_gbs",
                     "l1_tag_lines_per_cycle", "l2_paced_thin_sector_bytes",
                     "l2_paced_thin_load_sector_bytes",
                     "dram_random_sector_bytes", "dram_random_read_sector_bytes",
                     "tma_bytes_per_cycle_per_sm", "l2_tma_bandwidth_gbs",
                     "ptxas_unroll_max_instructions", "ptxas_sfu_range_fixup_instructions",
                     "ptxas_unroll_factor", "ptxas_unroll_loads_max_instructions",
                     "cta_relaunch_cycles", "cta_dispatch_ns", "ptxas_int_reciprocal_instructions",
                     "ptxas_int_divide_instructions", "ptxas_f32_divide_ffma_instructions",
                     "ptxas_f32_divide_other_instructions", "ptxas_int64_compare_instructions",
                     "ptxas_int64_multiply_instructions")


@dataclass(frozen=True)
class Header:
    """Per-SM and per-device limits. Sizes are bytes except shared_carveout_kb."""
    sm_count: int
    clock_mhz: float
    warp_size: int
    schedulers_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int
    warp_allocation_granularity: int
    shared_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    reserved_shared_per_block: int
    shared_allocation_unit: int
    shared_carveout_kb: tuple
    shared_banks: int
    shared_bank_bytes: int
    l1_shared_per_sm: int
    l2_bytes: int
    hbm_bandwidth_gbs: float
    fp32_lanes_per_sm: int
    fp64_lanes_per_sm: int
    # optional: dense tensor-core FLOP per cycle per SM (the roofline's tensor ceiling)
    tensor_flops_per_cycle_per_sm: float = None

    def to_dict(self):
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in fields(self) if getattr(self, f.name) is not None}


LAUNCH_PATHS = {"cuda.core": "launch_overhead_us", "numba": "launch_overhead_numba_us",
                "triton": "launch_overhead_triton_us"}
HEADER_KEYS = tuple(f.name for f in fields(Header))
HEADER_OPTIONAL = ("tensor_flops_per_cycle_per_sm",)
_LIST_KEYS = {"shared_carveout_kb"}


@dataclass(frozen=True)
class OpInfo:
    key: str
    latency: float
    issue_interval: float
    unit: str
    source: str = ""                 # latency's source
    issue_source: str = ""
    reference_flops: float = None    # FLOPs of the shape measured (tensor classes), else None


@dataclass(frozen=True)
class MemLevel:
    latency: float
    bandwidth_gbs: float
    source: str = ""                 # latency's source
    bandwidth_source: str = ""


@dataclass(frozen=True)
class IsaTable:
    arch: str
    name: str
    header: Header
    ops: dict
    units: list
    memory: dict
    sources: dict                    # "header.sm_count" → source text, for every number
    path: str = ""
    timing: dict = None              # TIMING_KEYS → value, or None when the file has no [timing]
    memory_model: dict = None        # MEMORY_MODEL_KEYS present → value ({} when none)

    @property
    def time_clock_mhz(self):
        """The clock device cycles are converted at: the one the GPU sustains under load when
        measured, else the header's (boost) clock."""
        return self.timing["sustained_clock_mhz"] if self.timing else self.header.clock_mhz

    def clock_for_tensor_share(self, share, sfu_share=0.0):
        """The clock of a launch whose tensor pipes are busy `share` (0..1) of its time and its
        SFU (XU) pipes `sfu_share`: the sustained clock lowered linearly toward
        timing.tensor_clock_mhz (the clock measured with wgmma back to back on every SM: the
        power limit lowers it as tensor work rises), and under tensor load further by the SFU
        work, toward timing.tensor_sfu_clock_mhz at both pipes full (SFU work alone, as in SIMT
        kernels, leaves the sustained clock); the sustained clock when not measured."""
        f = self.time_clock_mhz
        t = self.timing or {}
        ft = t.get("tensor_clock_mhz")
        if not ft:
            return f
        share = min(1.0, max(0.0, share))
        fts = t.get("tensor_sfu_clock_mhz") or ft
        return f - share * (f - ft) - share * min(1.0, max(0.0, sfu_share)) * (ft - fts)

    @property
    def launch_overhead_us(self):
        """Time CUDA events see around a launch besides the kernel's own execution."""
        return self.timing["launch_overhead_us"] if self.timing else 0.0

    def launch_overhead_for(self, path="cuda.core"):
        """The launch overhead of one launch path (cuda.core: ptxgen's runtime; numba;
        triton); a path the model has not measured gets the cuda.core figure."""
        if path not in LAUNCH_PATHS:
            raise PtxgenError(f"unknown launch path {path!r}; choose {', '.join(LAUNCH_PATHS)}")
        key = LAUNCH_PATHS[path]
        t = self.timing or {}
        return t.get(key, self.launch_overhead_us)

    @property
    def kernel_gap_us(self):
        """What each launch costs on the GPU itself in a stream of back-to-back launches
        (start and drain), part of a kernel's device time; 0 when not measured."""
        return (self.timing or {}).get("kernel_gap_us", 0.0)

    def op_for(self, instr):
        """The cost class of an IR instruction (builder-made or parsed, known or not). A class
        this table does not define (a tensor or bulk-copy class not yet measured for it) costs
        as OTHER."""
        ops = self.ops
        info = ops.get(op_class(instr)) or ops["OTHER"]
        return info if info.reference_flops is None else _shape_scaled(info, instr)

    def to_dict(self):
        return {
            "arch": self.arch,
            "name": self.name,
            "header": self.header.to_dict(),
            "header_sources": {k: self.sources[f"header.{k}"] for k in HEADER_KEYS
                               if f"header.{k}" in self.sources},
            "units": list(self.units),
            "ops": {k: {"latency": o.latency, "issue_interval": o.issue_interval, "unit": o.unit,
                        "source": o.source, "issue_source": o.issue_source}
                    for k, o in self.ops.items()},
            "memory": {k: {"latency": m.latency, "bandwidth_gbs": m.bandwidth_gbs,
                           "source": m.source, "bandwidth_source": m.bandwidth_source}
                       for k, m in self.memory.items()},
            "timing": None if self.timing is None else
            {k: {"value": v, "source": self.sources[f"timing.{k}"]}
             for k, v in self.timing.items()},
            "memory_model": {k: {"value": v, "source": self.sources[f"memory_model.{k}"]}
                             for k, v in (self.memory_model or {}).items()},
        }

    def to_text(self, sources=False):
        """The model as text (`ptxgen isa`); with sources, each number's source beside it."""
        d = self.to_dict()
        out = [f"{self.arch}: {self.name}", "", "limits"]
        w = max(len(k) for k in d["header"])
        for k, v in d["header"].items():
            line = f"  {k:<{w}}  {_num(v) if not isinstance(v, list) else v}"
            if sources:
                line += f"   [{d['header_sources'][k]}]"
            out.append(line)
        out += ["", f"{'op':<8} {'latency':>8} {'issue':>6}  unit"]
        for k, o in d["ops"].items():
            line = f"{k:<8} {_num(o['latency']):>8} {_num(o['issue_interval']):>6}  {o['unit']}"
            if sources:
                line += f"   [{o['source']}] [{o['issue_source']}]"
            out.append(line)
        out += ["", f"{'memory':<8} {'latency':>8} {'GB/s':>8}"]
        for k, m in d["memory"].items():
            line = f"{k:<8} {_num(m['latency']):>8} {_num(m['bandwidth_gbs']):>8}"
            if sources:
                line += f"   [{m['source']}] [{m['bandwidth_source']}]"
            out.append(line)
        estimates = sum(1 for s in self.sources.values() if s.startswith("estimate"))
        out += ["", f"{len(self.sources)} numbers, {estimates} of them estimates "
                    f"(--sources shows where each comes from)"]
        return "\n".join(out) + "\n"


def _num(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


# -- loading and validation ----------------------------------------------------------------------
def available():
    """Architectures with a machine model in isa/."""
    return sorted(p.stem for p in archmod.isa_dir().glob("sm_*.toml"))


@functools.lru_cache(maxsize=None)
def load(arch):
    """The machine model of `arch` (cached; sm_90a uses sm_90's: same chip). PtxgenError when
    there is none."""
    if archmod.is_arch_specific(arch) and arch in archmod.targets():
        return load(archmod.base_arch(arch))
    if arch not in available():
        known = ", ".join(available()) or "none"
        try:
            archmod.check_arch(arch)
        except PtxgenError:
            raise PtxgenError(f"unknown arch {arch!r}; machine models exist for: {known}") \
                from None
        raise IsaDataError(f"no machine model for {arch} (isa/{arch}.toml: latencies, issue "
                           f"intervals, memory levels; only its resource limits are known); "
                           f"machine models exist for: {known}")
    return load_path(archmod.isa_dir() / f"{arch}.toml")


def load_path(path):
    """Read and check one isa TOML file (not cached; tests load broken copies through this)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise IsaDataError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise IsaDataError(f"{path}: not valid TOML: {e}") from None
    return _parse(data, path)


def _err(path, key, what):
    return IsaDataError(f"{path}: {key}: {what}")


def _number(path, key, item, *, allow_list=False):
    """(value, source) of one {value, source} entry, checked."""
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        raise _err(path, key, "number without a source (write {value = ..., source = \"...\"})")
    if not isinstance(item, dict) or "value" not in item:
        raise _err(path, key, "expected {value = ..., source = \"...\"}")
    source = item.get("source")
    if not isinstance(source, str) or not source.strip():
        raise _err(path, key, "missing or empty source")
    extra = set(item) - {"value", "source"}
    if extra:
        raise _err(path, key, f"unexpected field(s) {', '.join(sorted(extra))}")
    v = item["value"]
    if allow_list:
        if not isinstance(v, list) or not v:
            raise _err(path, key, "expected a non-empty list of numbers")
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
                raise _err(path, key, f"list entry {x!r} is not a non-negative number")
        if v != sorted(v):
            raise _err(path, key, "list must be ascending")
        return tuple(v), source
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _err(path, key, f"value {v!r} is not a number")
    if not v > 0:
        raise _err(path, key, f"value {v!r} must be positive")
    return v, source


def _table(path, data, key):
    t = data.get(key)
    if not isinstance(t, dict):
        raise _err(path, key, "missing table")
    return t


def _check_no_stray_numbers(path, data, prefix=""):
    """Any number outside a {value, source} entry is an unsourced constant."""
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            if "value" in v:
                continue
            _check_no_stray_numbers(path, v, key + ".")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            raise _err(path, key, "number without a source (write {value = ..., source = \"...\"})")
        elif isinstance(v, list) and any(isinstance(x, (int, float)) for x in v):
            raise _err(path, key, "numbers without a source")


def _parse(data, path):
    _check_no_stray_numbers(path, data)
    arch = data.get("arch")
    if not isinstance(arch, str):
        raise _err(path, "arch", "missing")
    name = data.get("name", arch)
    sources = {}

    h = _table(path, data, "header")
    hv = {}
    for k in HEADER_KEYS:
        if k not in h:
            if k in HEADER_OPTIONAL:
                continue
            raise _err(path, f"header.{k}", "missing")
        hv[k], sources[f"header.{k}"] = _number(path, f"header.{k}", h[k],
                                                allow_list=k in _LIST_KEYS)
    unknown = set(h) - set(HEADER_KEYS)
    if unknown:
        raise _err(path, f"header.{sorted(unknown)[0]}", "unknown header key")
    header = Header(**hv)

    units = data.get("units")
    if not isinstance(units, list) or not units or not all(isinstance(u, str) for u in units):
        raise _err(path, "units", "expected a non-empty list of unit names")

    ops_t = _table(path, data, "ops")
    ops = {}
    for k in OP_CLASSES:
        if k not in ops_t:
            raise _err(path, f"ops.{k}", "missing op class")
    for k, o in ops_t.items():
        if not isinstance(o, dict):
            raise _err(path, f"ops.{k}", "expected a table")
        unit = o.get("unit")
        if unit not in units:
            raise _err(path, f"ops.{k}.unit", f"{unit!r} is not one of units {units}")
        vals = {}
        for n in OP_NUMBERS:
            if n not in o:
                raise _err(path, f"ops.{k}.{n}", "missing")
            vals[n], sources[f"ops.{k}.{n}"] = _number(path, f"ops.{k}.{n}", o[n])
        ref = None
        for n in OP_OPTIONAL:
            if n in o:
                ref, sources[f"ops.{k}.{n}"] = _number(path, f"ops.{k}.{n}", o[n])
        unknown = set(o) - {"unit"} - set(OP_NUMBERS) - set(OP_OPTIONAL)
        if unknown:
            raise _err(path, f"ops.{k}.{sorted(unknown)[0]}", "unknown op key")
        ops[k] = OpInfo(k, float(vals["latency"]), float(vals["issue_interval"]), unit,
                        sources[f"ops.{k}.latency"], sources[f"ops.{k}.issue_interval"],
                        None if ref is None else float(ref))

    mem_t = _table(path, data, "memory")
    memory = {}
    for k in MEMORY_LEVELS:
        m = mem_t.get(k)
        if not isinstance(m, dict):
            raise _err(path, f"memory.{k}", "missing memory level")
        vals = {}
        for n in MEMORY_NUMBERS:
            if n not in m:
                raise _err(path, f"memory.{k}.{n}", "missing")
            vals[n], sources[f"memory.{k}.{n}"] = _number(path, f"memory.{k}.{n}", m[n])
        memory[k] = MemLevel(float(vals["latency"]), float(vals["bandwidth_gbs"]),
                             sources[f"memory.{k}.latency"], sources[f"memory.{k}.bandwidth_gbs"])
    timing = None
    if "timing" in data:
        t = _table(path, data, "timing")
        unknown = set(t) - set(TIMING_KEYS) - set(TIMING_OPTIONAL)
        if unknown:
            raise _err(path, f"timing.{sorted(unknown)[0]}", "unknown timing key")
        timing = {}
        for k in TIMING_KEYS + TIMING_OPTIONAL:
            if k not in t:
                if k in TIMING_OPTIONAL:
                    continue
                raise _err(path, f"timing.{k}", "missing")
            timing[k], sources[f"timing.{k}"] = _number(path, f"timing.{k}", t[k])
    mm = {}
    if "memory_model" in data:
        t = _table(path, data, "memory_model")
        unknown = set(t) - set(MEMORY_MODEL_KEYS)
        if unknown:
            raise _err(path, f"memory_model.{sorted(unknown)[0]}", "unknown memory_model key")
        for k, item in t.items():
            mm[k], sources[f"memory_model.{k}"] = _number(path, f"memory_model.{k}", item)
    return IsaTable(arch=arch, name=name, header=header, ops=ops, units=list(units),
                    memory=memory, sources=sources, path=str(path), timing=timing,
                    memory_model=mm)


# -- limits of every target ---------------------------------------------------------------------
# A target with a machine model takes these from its [header]; one without (sm_86, sm_89) from
# isa/limits.toml (only what NVIDIA's tables give: no latencies, no throughput), and the launch
# API limits from the [launch] table of isa/targets.toml.
LIMIT_KEYS = ("sm_count", "warp_size", "schedulers_per_sm", "max_warps_per_sm",
              "max_blocks_per_sm", "max_threads_per_sm", "max_threads_per_block",
              "registers_per_sm", "registers_per_block", "max_registers_per_thread",
              "register_allocation_unit", "warp_allocation_granularity", "shared_per_sm",
              "shared_per_block", "shared_per_block_optin", "reserved_shared_per_block",
              "shared_allocation_unit", "shared_carveout_kb")
LAUNCH_KEYS = ("max_threads_per_block", "max_block_dim", "max_grid_dim", "shared_per_block")


@functools.lru_cache(maxsize=None)
def launch_limits():
    """{key: value} of the CUDA API launch limits (LAUNCH_KEYS; block and grid dims as 3-tuples)
    every target shares, from isa/targets.toml [launch] (checked once per table read)."""
    t = archmod.launch_table()
    if _LAUNCH_MEMO and _LAUNCH_MEMO[0] is t:
        return dict(_LAUNCH_MEMO[1])
    out = _launch_limits(t)
    _LAUNCH_MEMO[:] = [t, out]
    return dict(out)


_LAUNCH_MEMO = []


def _launch_limits(t):
    path = archmod.isa_dir() / "targets.toml"
    if not isinstance(t, dict):
        raise _err(path, "launch", "missing table")
    out = {}
    for k in LAUNCH_KEYS:
        if k not in t:
            raise _err(path, f"launch.{k}", "missing")
        if k.endswith("_dim"):
            v = t[k].get("value") if isinstance(t[k], dict) else None
            if not (isinstance(v, list) and len(v) == 3
                    and all(isinstance(x, int) and x > 0 for x in v)):
                raise _err(path, f"launch.{k}", "expected {value = [x, y, z], source = \"...\"}")
            _number(path, f"launch.{k}", {**t[k], "value": 1})          # checks the source
            out[k] = tuple(v)
        else:
            out[k] = _number(path, f"launch.{k}", t[k])[0]
    return out


@functools.lru_cache(maxsize=1)
def _limits_table():
    path = archmod.isa_dir() / "limits.toml"
    try:
        with open(path, "rb") as f:
            return path, tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise IsaDataError(f"{path}: cannot read the limits table: {e}") from None


def model_targets():
    """Targets with a machine model: those of isa/sm_XX.toml and their arch-specific variants
    (sm_90a is sm_90's chip)."""
    return [t for t in archmod.targets() if archmod.base_arch(t) in available()]


def limit_targets():
    """Targets whose limits are known (a machine model or an isa/limits.toml entry)."""
    known = set(available()) | set(_limits_table()[1])
    return [t for t in archmod.targets() if archmod.base_arch(t) in known]


@functools.lru_cache(maxsize=None)
def _limits(arch):
    if archmod.base_arch(arch) in available():        # sm_90a: sm_90's chip and model
        h = load(arch).header
        return {k: getattr(h, k) for k in LIMIT_KEYS}
    path, data = _limits_table()
    t = data.get(arch)
    if not isinstance(t, dict):
        raise IsaDataError(f"no resource limits for {arch}: add them to {path} or write a "
                           f"machine model isa/{arch}.toml")
    api = launch_limits()
    out = {}
    for k in LIMIT_KEYS:
        if k not in t:
            raise _err(path, f"{arch}.{k}", "missing")
        out[k] = _number(path, f"{arch}.{k}", t[k], allow_list=k in _LIST_KEYS)[0]
    unknown = set(t) - set(out) - {"name"}
    if unknown:
        raise _err(path, f"{arch}.{sorted(unknown)[0]}", "unknown limit key")
    for k in ("max_threads_per_block", "shared_per_block"):
        if out[k] != api[k]:
            raise _err(path, f"{arch}.{k}", f"disagrees with targets.toml [launch] ({api[k]})")
    return out


def limits(arch):
    """{key: value} of LIMIT_KEYS for any target ptxgen emits for: SM count, residency and
    per-block limits, each read from isa/ with its source."""
    archmod.check_arch(arch)
    return dict(_limits(arch))


def sm_count(arch):
    """The SM count of the target's device (the machine model's, or the representative part's
    in isa/targets.toml). Runs on a real GPU use the live device's count instead."""
    return limits(arch)["sm_count"]


# -- instruction → op class ----------------------------------------------------------------------
_HALF = frozenset({"f16", "bf16", "f16x2", "bf16x2"})
_LOAD_CLASS = {"global": "LDG", "generic": "LDG", "shared": "LDS", "local": "LDL",
               "param": "CONST", "const": "CONST"}
_STORE_CLASS = {"global": "STG", "generic": "STG", "shared": "STS", "local": "STL",
                "param": "STL"}


def _float_class(t, f32_class):
    """Class of a float arithmetic op by its type: f64 → FP64, 16-bit → HFMA, f32 → f32_class."""
    if t.name in _HALF:
        return "HFMA"
    if t.bits == 64:
        return "FP64"
    return f32_class


def _is_float(t):
    return t is not None and (t.is_float or t.name in _HALF)


_TYPE_COST = {"tf32": 2.0, "e4m3": 0.5, "e5m2": 0.5}


def _shape_scaled(info, instr):
    """A tensor instruction's cost at its own shape: the pipe stays busy in proportion to the
    FLOPs (wgmma m64nNk16 on the H200: 32.8 / 64.8 / 129.1 cycles at N = 64 / 128 / 256), and
    the result comes that much earlier or later than at the measured shape (85.1 / 117.1 /
    194.7: latency = measured latency + the change of the interval, within 7 %)."""
    from .ir.opcodes import flops
    model = instr.row.flops
    lanes = 128 if model == "wgmma" else 32            # per warpgroup / per warp
    f = flops(instr.opcode, instr.mods, lanes) if model in ("mma", "wgmma") else 0
    # the tensor cores' rate per FLOP by input type, relative to 16-bit inputs (NVIDIA H100
    # datasheet, dense: TF32 494.7, BF16/FP16 989.4, FP8 1978.9 TFLOPS); the reference shape
    # was measured with bf16
    f *= _TYPE_COST.get(next((m for m in instr.mods if m in _TYPE_COST), None), 1.0)
    if not f or f == info.reference_flops:
        return info
    interval = info.issue_interval * f / info.reference_flops
    return dataclasses.replace(info, issue_interval=interval,
                               latency=max(info.latency + interval - info.issue_interval,
                                           interval))


def op_class(instr):
    """The op class name of an IR instruction: its opcode-table row's timing class (a class
    the machine model lacks costs as its OTHER, see IsaTable.op_for)."""
    rule = instr.row.timing
    t = instr.type
    if rule == "@load":
        return _LOAD_CLASS.get(instr.space, "LDG")
    if rule == "@store":
        return _STORE_CLASS.get(instr.space, "STG")
    if rule == "@mov":
        if any(isinstance(o, Special) for o in instr.operands[1:]):
            return "SPECIAL"
        rule = "IALU/IALU"
    if rule == "@cvt":
        # integer widening/narrowing is a move or a bit-field op
        return "CONV" if any(_is_float(x) for x in instr.types) else "IALU"
    if rule == "@sfu":
        return "FP64" if t is not None and t.bits == 64 and t.is_float else "SFU"
    if "/" in rule:
        f32_class, int_class = rule.split("/")
        return _float_class(t, f32_class) if _is_float(t) else int_class
    return rule
