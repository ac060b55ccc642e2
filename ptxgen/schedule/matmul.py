"""MatmulSchedule: how an fp32 C = A @ B kernel (row-major, FFMA only) is tiled and pipelined.

A schedule names the choices of a SIMT SGEMM and nothing about the shape:

    block tile   BM x BN, stepping BK along K per shared-memory tile
    warp tile    WM x WN: the block's (BM/WM) x (BN/WN) warps each own one
    thread tile  TM x TN accumulators, split into vec_shared-wide groups so every fragment
                 load is one ld.shared.v4 and a warp's lanes read broadcast-friendly addresses
    pipeline     `stages` shared-memory buffers, filled through registers (ld.global then
                 st.shared) or with cp.async; fragments double-buffered across k steps
    layout       A transposed in shared memory (As[BK][BM+pad_a]) so A fragments are rows too

`ptxgen.lower.lower_matmul(schedule, arch, shape)` turns one into a Module through the IR builder.
"""
import dataclasses
import json
from dataclasses import dataclass

from .. import arch as archmod
from .. import isa
from ..arch import DEFAULT_TARGET
from ..errors import IsaDataError, ScheduleError
from .defaults import choice

def target_limits(arch):
    """{limit: value} a schedule must respect on `arch`, from ptxgen.isa.limits (the machine
    model's header, or isa/targets.toml for a target without one)."""
    archmod.check_arch(arch)
    try:
        h = isa.limits(arch)
    except IsaDataError as e:
        raise ScheduleError(f"no resource limits known for {arch}: {e}") from None
    return dict(max_threads_per_block=h["max_threads_per_block"],
                max_threads_per_sm=h["max_threads_per_sm"],
                max_regs_per_thread=h["max_registers_per_thread"],
                regs_per_sm=h["registers_per_sm"],
                static_shared_per_block=h["shared_per_block"],
                max_shared_per_block=h["shared_per_block_optin"],
                shared_per_sm=h["shared_per_sm"],
                reserved_shared_per_block=h["reserved_shared_per_block"])


def _pow2(x):
    return isinstance(x, int) and x > 0 and x & (x - 1) == 0


@dataclass(frozen=True)
class MatmulSchedule:
    """One SGEMM schedule: frozen, hashable, printable (str gives a short name), JSON
    round-trippable. Defaults are the classic 128x128x8 tile of 256 threads with 8x8
    accumulators per thread, two register-staged shared-memory stages and 2 CTAs per SM."""
    BM: int = 128
    BN: int = 128
    BK: int = 8
    WM: int = 32
    WN: int = 64
    TM: int = 8
    TN: int = 8
    vec_global: int = 4          # widest global access; the lowering narrows it for odd K or N
    vec_shared: int = 4          # fragment loads: 4 → ld.shared.v4, 1 → scalar
    vec_store: int = 2           # C store width: v2 asks ptxas to place accumulator pairs,
                                 # not quads, in aligned registers: room to spare at 128
    a_transposed: bool = True    # As[BK][BM+pad_a] (fragment rows) or As[BM][BK+pad_a]
    pad_a: int = 4               # floats added to each As row (bank spreading of the stores)
    pad_b: int = 0
    stages: int = 2              # shared-memory buffers in flight
    use_cp_async: bool = False   # fill shared memory with cp.async instead of ld+st
    frag_double_buffer: bool = True   # load the next k step's fragments before this step's FMAs
    group_m: int = 0             # >0: CTAs walk GROUP_M row tiles per column (L2 reuse)
    min_ctas_per_sm: int = 2     # .minnctapersm: caps registers at 65536/(threads*this)
    ffma_order: str = "serpentine"    # "serpentine" (alternate row direction) or "row"
    unroll: int = 1              # k-tile loop copies per trip (the BK steps are always unrolled)
    stage_c: bool = True         # store C through shared memory, 128 contiguous bytes per
                                 # warp store (False: straight from the fragments, vec_store
                                 # wide, unless C rows are misaligned); 3-6 % faster on the H200

    # -- derived sizes ------------------------------------------------------------------------
    @property
    def warps_m(self):
        return self.BM // self.WM

    @property
    def warps_n(self):
        return self.BN // self.WN

    @property
    def lanes_m(self):
        return self.WM // self.TM

    @property
    def lanes_n(self):
        return self.WN // self.TN

    @property
    def threads(self):
        return self.warps_m * self.warps_n * 32

    @property
    def a_smem_floats(self):
        return self.BK * (self.BM + self.pad_a) if self.a_transposed else \
            self.BM * (self.BK + self.pad_a)

    @property
    def b_smem_floats(self):
        return self.BK * (self.BN + self.pad_b)

    @property
    def stage_bytes(self):
        return 4 * (self.a_smem_floats + self.b_smem_floats)

    @property
    def shared_bytes(self):
        return self.stages * self.stage_bytes

    def a_slots(self):
        """Mapping of the A tile's 4-float groups (along K) to threads: (g, rows, per_thread).
        Each load instruction covers `rows` tile rows with g consecutive groups per row; a
        thread owns per_thread groups. g is at least 2 where possible so a warp's transposed
        stores fall in distinct banks (row stride BM+pad_a)."""
        cols4, t = self.BK // 4, self.threads
        for g in range(max(min(2, cols4), -(-t // self.BM)), cols4 + 1):
            if cols4 % g == 0 and t % g == 0 and self.BM % (t // g) == 0:
                return g, t // g, self.BM * cols4 // t
        raise ScheduleError(f"{self}: {t} threads cannot share the {self.BM}x{self.BK} A tile "
                            f"in whole 4-float groups (need BM*BK/4 a multiple of threads)")

    def b_slots(self):
        """(rows, per_thread): one load instruction covers `rows` rows of the B tile."""
        c4, t = self.BN // 4, self.threads
        if t % c4 or (self.BK * c4) % t:
            raise ScheduleError(f"{self}: {t} threads cannot share the {self.BK}x{self.BN} B "
                                f"tile in whole rows of 4-float groups (need threads a multiple "
                                f"of BN/4={c4} and BK*BN/4 a multiple of threads)")
        return t // c4, self.BK * c4 // t

    def a_scalar_slots(self):
        """Element mapping of A for 32-bit loads (K not a multiple of 4): (ek, lanes_k, rows).
        A thread loads ek elements, lanes_k apart, in each of BM/rows rows: lanes_k threads
        span a tile row and one load instruction covers `rows` rows, so a warp touches few
        128-byte lines per instruction; ek grows with the per-thread share so a thread keeps
        at most four rows (offset registers)."""
        t, per = self.threads, self.BM * self.BK // self.threads
        ek = min(self.BK, max(1, per // 4))
        lanes_k = self.BK // ek
        if per < 1 or t % lanes_k or t // lanes_k > self.BM:
            raise ScheduleError(f"{self}: {t} threads cannot share the {self.BM}x{self.BK} A "
                                f"tile element-wise (need BM*BK a multiple of threads)")
        return ek, lanes_k, t // lanes_k

    def b_scalar_slots(self):
        """Element mapping of B for 32-bit loads (N not a multiple of 4): (lanes, rows): lanes
        consecutive threads take consecutive columns (one clamp per column), a load instruction
        covers `rows` rows of the tile."""
        t = self.threads
        lanes = min(self.BN, t)
        if (t // lanes) > self.BK:
            raise ScheduleError(f"{self}: {t} threads are more than the {self.BK}x{self.BN} B "
                                f"tile's elements")
        return lanes, t // lanes

    def registers_estimate(self):
        """The 32-bit registers the main loop cannot do without: accumulators, fragments,
        staged tile data, offsets and loop state. validate rejects a schedule whose estimate
        exceeds the register cap; ptxas then fits the rest (the 8x8 candidates use 117-128 of
        128 without spilling)."""
        acc = self.TM * self.TN
        frag = (self.TM + self.TN) * (2 if self.frag_double_buffer else 1)
        staged = 0
        if not self.use_cp_async:
            staged = 4 * (self.BM * self.BK + self.BK * self.BN) // (4 * self.threads)
        return acc + frag + staged + 12

    def register_cap(self, arch=DEFAULT_TARGET):
        lim = target_limits(arch)
        cap = lim["max_regs_per_thread"]
        if self.min_ctas_per_sm > 0:
            per = lim["regs_per_sm"] // (self.threads * self.min_ctas_per_sm)
            cap = min(cap, per // 8 * 8)           # allocation granularity: 8 per thread
        return cap

    # -- checking ---------------------------------------------------------------------------
    def validate(self, arch=DEFAULT_TARGET, shape=None):
        """Raise ScheduleError naming the first violated rule; returns self."""
        for f in ("BM", "BN", "BK", "WM", "WN", "TM", "TN"):
            if not _pow2(getattr(self, f)):
                raise ScheduleError(f"{self}: {f}={getattr(self, f)!r} must be a power of two")
        if self.BM % self.WM or self.BN % self.WN:
            raise ScheduleError(f"{self}: warp tile {self.WM}x{self.WN} must divide block tile "
                                f"{self.BM}x{self.BN}")
        if self.WM % self.TM or self.WN % self.TN or self.lanes_m * self.lanes_n != 32:
            raise ScheduleError(f"{self}: warp tile {self.WM}x{self.WN} over thread tile "
                                f"{self.TM}x{self.TN} must give 32 lanes, got "
                                f"{self.WM // max(self.TM, 1)}x{self.WN // max(self.TN, 1)}")
        if self.vec_shared not in (1, 4) or self.vec_global not in (1, 4):
            raise ScheduleError(f"{self}: vec_shared and vec_global must be 1 or 4")
        if self.vec_store not in (1, 2, 4) or self.vec_store > self.vec_shared:
            raise ScheduleError(f"{self}: vec_store must be 1, 2 or 4 and at most vec_shared "
                                f"(a thread's contiguous columns)")
        if self.TM % self.vec_shared or self.TN % self.vec_shared:
            raise ScheduleError(f"{self}: thread tile {self.TM}x{self.TN} must split into "
                                f"vec_shared={self.vec_shared} groups")
        if self.BK % 4:
            raise ScheduleError(f"{self}: BK={self.BK} must be a multiple of 4 (tiles are "
                                f"loaded in 4-float groups)")
        if self.pad_a < 0 or self.pad_b < 0:
            raise ScheduleError(f"{self}: paddings must be >= 0")
        a_row = (self.BM if self.a_transposed else self.BK) + self.pad_a
        if a_row % 4 or (self.BN + self.pad_b) % 4:
            raise ScheduleError(f"{self}: padded shared rows ({a_row}, {self.BN + self.pad_b} "
                                f"floats) must stay multiples of 4 for 128-bit accesses")
        if self.ffma_order not in ("serpentine", "row"):
            raise ScheduleError(f"{self}: ffma_order must be 'serpentine' or 'row'")
        if self.unroll not in (1, 2, 4):
            raise ScheduleError(f"{self}: unroll must be 1, 2 or 4")
        if self.group_m < 0 or self.min_ctas_per_sm < 0:
            raise ScheduleError(f"{self}: group_m and min_ctas_per_sm must be >= 0")
        if self.use_cp_async:
            if archmod.sm_number(arch) < 80:
                raise ScheduleError(f"{self}: cp.async needs sm_80 or newer, not {arch}")
            if not 2 <= self.stages <= 8:
                raise ScheduleError(f"{self}: cp.async pipelines need 2..8 stages")
        elif self.stages not in (1, 2):
            raise ScheduleError(f"{self}: register-staged loads use 1 or 2 stages, not "
                                f"{self.stages} (more need use_cp_async)")
        lim = target_limits(arch)
        if self.threads > lim["max_threads_per_block"]:
            raise ScheduleError(f"{self}: {self.threads} threads per CTA exceed {arch}'s "
                                f"{lim['max_threads_per_block']}")
        if self.min_ctas_per_sm * self.threads > lim["max_threads_per_sm"]:
            raise ScheduleError(f"{self}: {self.min_ctas_per_sm} CTAs of {self.threads} "
                                f"threads exceed {arch}'s {lim['max_threads_per_sm']} per SM")
        self.a_slots()
        self.b_slots()
        self.a_scalar_slots()
        self.b_scalar_slots()
        smem = self.shared_bytes
        if smem > lim["static_shared_per_block"]:
            raise ScheduleError(f"{self}: {smem} bytes of shared memory exceed the "
                                f"{lim['static_shared_per_block']}-byte static limit of {arch}")
        per_cta = smem + lim["reserved_shared_per_block"]
        if self.min_ctas_per_sm * per_cta > lim["shared_per_sm"]:
            raise ScheduleError(f"{self}: {self.min_ctas_per_sm} CTAs x {per_cta} bytes of "
                                f"shared memory exceed {arch}'s {lim['shared_per_sm']} per SM")
        est, cap = self.registers_estimate(), self.register_cap(arch)
        if est > cap:
            raise ScheduleError(f"{self}: needs about {est} registers per thread, over the cap "
                                f"of {cap} for {self.min_ctas_per_sm} CTA(s) of {self.threads} "
                                f"threads per SM on {arch}")
        if shape is not None:
            for k in ("M", "N", "K"):
                v = shape.get(k)
                if not isinstance(v, int) or v <= 0:
                    raise ScheduleError(f"{self}: shape {k} must be a positive int, got {v!r}")
            M, N, K = shape["M"], shape["N"], shape["K"]
            for key in ("ldb", "ldc"):
                ld = shape.get(key, N)
                if not isinstance(ld, int) or ld < N:
                    raise ScheduleError(f"{self}: {key} (the row stride of "
                                        f"{'B' if key == 'ldb' else 'C'}) must be an int >= "
                                        f"N={N}, got {ld!r}")
            ldb = shape.get("ldb", N)
            if max(M * K, (K + self.BK) * ldb) >= 2 ** 32:
                raise ScheduleError(f"{self}: A ({M}x{K}) or B ({K}x{N}) has 2^32 elements or "
                                    f"more; the kernel indexes them with 32-bit offsets")
        return self

    # -- naming and serialization -------------------------------------------------------------
    def __str__(self):
        parts = [f"{self.BM}x{self.BN}x{self.BK}", f"w{self.WM}x{self.WN}",
                 f"t{self.TM}x{self.TN}", f"{'cp' if self.use_cp_async else 's'}{self.stages}"]
        d = MatmulSchedule()
        for f in ("vec_global", "vec_shared", "vec_store", "a_transposed", "pad_a", "pad_b",
                  "frag_double_buffer", "group_m", "min_ctas_per_sm", "ffma_order", "unroll",
                  "stage_c"):
            if getattr(self, f) != getattr(d, f):
                parts.append(f"{f}={getattr(self, f)}")
        return "_".join(parts)

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d):
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise ScheduleError(f"unknown MatmulSchedule field(s): {', '.join(unknown)}")
        kw = {}
        for k, v in d.items():
            want = type(getattr(cls(), k))
            if want is bool and not isinstance(v, bool) or \
                    want is not bool and (isinstance(v, bool) or not isinstance(v, want)):
                raise ScheduleError(f"MatmulSchedule.{k} must be {want.__name__}, got {v!r}")
            kw[k] = v
        return cls(**kw)

    @classmethod
    def from_json(cls, text):
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ScheduleError(f"schedule JSON is malformed: {e}") from None
        if not isinstance(d, dict):
            raise ScheduleError("schedule JSON must be an object")
        return cls.from_dict(d)

    def replace(self, **kw):
        return dataclasses.replace(self, **kw)

    # -- launch -----------------------------------------------------------------------------
    def grid(self, shape):
        tm = -(-shape["M"] // self.BM)
        tn = -(-shape["N"] // self.BN)
        if self.group_m:
            return (tm * tn, 1, 1)
        return (tn, tm, 1)

    def block(self):
        return (self.threads, 1, 1)


# The variants a benchmark compares. Register-staged 128x128 with BK=8 is the classic
# SIMT SGEMM; the others trade shared-memory traffic, latency hiding and occupancy.
CANDIDATES = {
    "128x128x8": MatmulSchedule(),
    "128x128x16": MatmulSchedule(BK=16, stage_c=False),   # a staged C spills here
    "128x128x8_g8": MatmulSchedule(group_m=8),
    "128x128x8_cp3": MatmulSchedule(use_cp_async=True, stages=3),
    "128x128x16_cp2": MatmulSchedule(BK=16, use_cp_async=True, stages=2),
    "128x256x8": MatmulSchedule(BN=256, WN=128, TN=16, min_ctas_per_sm=1),
    "128x64x8": MatmulSchedule(BN=64, WM=32, WN=64, min_ctas_per_sm=4, stage_c=False),
    "64x64x8": MatmulSchedule(BM=64, BN=64, min_ctas_per_sm=8),
}

def default_schedule(shape, arch=DEFAULT_TARGET, sm_count=None):
    """The schedule Matmul.build uses for `shape`: the largest block tile whose grid still
    gives every SM at least one CTA (small problems need smaller tiles to fill the GPU), from
    the measured pool "sgemm.default_pool" (schedule/data/defaults.json,
    docs/PERF.md#fp32-gemm-no-tensor-cores); a tuned schedule for the shape's class comes
    first (Matmul.schedule_for). sm_count: the device's (None: the target's, isa.sm_count)."""
    sm_count = isa.sm_count(arch) if sm_count is None else sm_count
    pool = choice("sgemm.default_pool")
    for name in pool:
        s = CANDIDATES[name]
        if -(-shape["M"] // s.BM) * -(-shape["N"] // s.BN) >= sm_count:
            return s
    return CANDIDATES[pool[-1]]
