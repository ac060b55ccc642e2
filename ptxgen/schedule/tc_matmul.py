"""TcMatmulSchedule: how a tensor-core C = A @ B kernel (bf16/f16/tf32 in, f32 accumulate) is
tiled, pipelined and specialized on sm_90a.

    block tile    BM x BN outputs per tile, BK along K per pipeline stage: one 128-byte swizzled
                  row (64 16-bit elements, 32 tf32; `for_dtype` sets it)
    instruction   wgmma.mma_async m64nNk16 (tf32: m64nNk8) with N = wgmma_n, A and B read from
                  shared memory through matrix descriptors
    warpgroups    one producer warpgroup (a single thread issues the TMA copies) and
                  `consumers` consumer warpgroups, each owning BM/consumers rows of the tile;
                  setmaxnreg moves registers from the producer to the consumers
    pipeline      `stages` shared-memory slots, each one A box and one B box, filled by
                  cp.async.bulk.tensor and handed over through a full/empty mbarrier pair
    persistence   persistent=True: one CTA per SM walks tiles ctaid, ctaid+nctaid, …;
                  group_m > 0 walks group_m tile rows per tile column (L2 reuse)
    clusters      cluster_m = 2: two CTAs (a cluster) take vertically adjacent tiles, which
                  need the same B columns; each loads half of that B box and multicasts it to
                  both, halving B's traffic from L2

`ptxgen.lower.lower_tc_matmul(schedule, arch, shape)` (lower/tc_matmul.py) turns one into a Module.
"""
import dataclasses
from dataclasses import dataclass

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from .. import arch as archmod
from ..errors import ScheduleError
from .matmul import target_limits

# The only swizzle the lowering lays shared memory out for: 128-byte rows in 1024-byte atoms of
# 8 rows. Source: PTX ISA 9.0, section 9.7.15.5.1 (shared memory matrix layout, 128B swizzle).
SWIZZLE_BYTES = 128
SWIZZLE_ATOM_BYTES = 1024
WARPGROUP = 128
# wgmma shapes: M is 64, N a multiple of 8 up to 256, K 16 for 16-bit inputs, 8 for tf32 and
# 32 for the fp8 formats (32 bytes of a row each). Source: PTX ISA 9.0, section 9.7.15.5
# (wgmma.mma_async shapes, .f16/.bf16, .tf32 and .e4m3/.e5m2 rows).
WGMMA_M, WGMMA_MAX_N = 64, 256
WGMMA_K = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}
TMA_MAX_BOX = 256              # cuTensorMapEncodeTiled: boxDim[i] <= 256 (CUDA Driver API)
C_BOX_COLS = 64                # a staged bf16 C is stored in boxes of 64 columns (128 bytes)
MN_BOX = 64                    # an M-/N-major operand is loaded in boxes 64 16-bit elements wide
                               # (one 128-byte swizzled row; 8 of them along K make an atom)
ELEM_BYTES = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}
FP8 = ("e4m3", "e5m2")         # 8-bit inputs: K-major only (wgmma has no fp8 transpose)
OUT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
TMA_C_STORES = ("tile", "rows")   # staged C kinds stored by TMA through a C tensor map


def _pow2(x):
    return isinstance(x, int) and x > 0 and x & (x - 1) == 0


def check_register_split(s, lim, bad):
    """The setmaxnreg split of a warp-specialized schedule `s` (one producer warpgroup and
    s.consumers consumer warpgroups; producer_regs, consumer_regs): each count a multiple of 8
    from 24 to 256, all of them within the SM's register file (lim: target_limits)."""
    for name in ("producer_regs", "consumer_regs"):
        v = getattr(s, name)
        if not (24 <= v <= 256 and v % 8 == 0):
            bad(f"{name}={v} must be a multiple of 8 from 24 to 256 (setmaxnreg)")
    total = WARPGROUP * (s.producer_regs + s.consumers * s.consumer_regs)
    if total > lim["regs_per_sm"]:
        bad(f"producer_regs + consumers x consumer_regs need {total} registers, more than "
            f"the SM's {lim['regs_per_sm']}")
    # setmaxnreg moves registers inside the CTA's allocation, entry_regs() per thread at
    # launch: a split needing more makes the consumers' setmaxnreg.inc wait forever (a hang on
    # the H200: 64 + 2 x 224 = 512 per 128 threads against 3 x 168 = 504)
    held = s.entry_regs() * s.threads
    if total > held:
        bad(f"producer_regs + consumers x consumer_regs need {total} registers, more than "
            f"the {held} the CTA holds ({s.entry_regs()} per thread at entry): setmaxnreg.inc "
            f"would wait forever")


@dataclass(frozen=True)
class TcMatmulSchedule:
    """One sm_90a tensor-core GEMM schedule (frozen, hashable; str gives a short name)."""
    BM: int = 128
    BN: int = 256
    BK: int = 64
    stages: int = 4
    consumers: int = 2           # consumer warpgroups (each owns BM/consumers rows)
    wgmma_n: int = 256           # N of one wgmma instruction; BN/wgmma_n of them per k16 step
    persistent: bool = True      # one CTA per SM looping over tiles
    group_m: int = 8             # tile rows walked per tile column (0: row-major tile order)
    inflight: int = 1            # wgmma groups left running when a stage is released (0 or 1)
    producer_regs: int = 40      # setmaxnreg.dec of the producer warpgroup
    consumer_regs: int = 232     # setmaxnreg.inc of the consumer warpgroups
    cluster_m: int = 1           # CTAs per cluster along M, sharing B by TMA multicast (1 or 2)
    epilogue: str = "direct"     # "direct": st.global from the fragments; "tma": a bf16 C
                                 # through shared memory (stmatrix) and TMA stores (64-column
                                 # boxes; where C's rows are not 16-byte aligned, staged the
                                 # same way and copied by the threads with st.global);
                                 # "rows": TMA row by row (aligned rows)
    split_k: int = 1             # pieces each tile's K loop is cut into, summed in-kernel
                                 # (lower/split_k.py; direct epilogue, cluster_m=1, persistent)

    instruction = "wgmma"        # the operator's path (schedule/mma_matmul.py: "mma.sync")

    def __str__(self):
        return (f"tc{self.BM}x{self.BN}x{self.BK}_s{self.stages}_c{self.consumers}"
                f"_n{self.wgmma_n}{'_p' if self.persistent else ''}_g{self.group_m}"
                f"_f{self.inflight}{f'_x{self.cluster_m}' if self.cluster_m > 1 else ''}"
                f"{'' if self.epilogue == 'direct' else '_' + self.epilogue}"
                f"{f'_k{self.split_k}' if self.split_k > 1 else ''}")

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        """The schedule of a to_dict() dict (a tune cache entry); unknown fields are an
        error (validate() checks the values)."""
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ScheduleError(f"unknown TcMatmulSchedule field(s): {', '.join(unknown)}")
        return cls(**d)

    def for_dtype(self, dtype):
        """This schedule with BK set to one swizzled row of `dtype` (64 16-bit, 32 tf32)."""
        return dataclasses.replace(self, BK=SWIZZLE_BYTES // ELEM_BYTES.get(dtype, 2))

    # -- derived sizes ------------------------------------------------------------------------
    @property
    def threads(self):
        return WARPGROUP * (1 + self.consumers)

    @property
    def rows_per_consumer(self):
        return self.BM // self.consumers

    @property
    def m_blocks(self):
        """wgmma M blocks (64 rows) of one consumer."""
        return self.rows_per_consumer // WGMMA_M

    @property
    def n_blocks(self):
        return self.BN // self.wgmma_n

    @property
    def acc_regs(self):
        """f32 accumulator registers per consumer thread."""
        return self.m_blocks * self.n_blocks * self.wgmma_n // 2

    @property
    def b_box_rows(self):
        """Rows of B one CTA loads per stage (its share of the multicast)."""
        return self.BN // self.cluster_m

    def a_stage_bytes(self, elem=2):
        return self.BM * self.BK * elem

    def b_stage_bytes(self, elem=2):
        return self.BN * self.BK * elem

    def stage_bytes(self, elem=2):
        return self.a_stage_bytes(elem) + self.b_stage_bytes(elem)

    def c_store(self, out, m, n):
        """How C leaves the kernel: None (st.global from the fragments), "tile" (the tile
        written into shared memory in swizzled boxes of 128-byte rows, 64 bf16 or 32 f32
        columns each, and stored by TMA through C's 2-D tensor map: rows 16-byte aligned),
        "rows" (the same shared tile, each row's 128-byte pieces stored by TMA through a flat
        view of C; only for 16-byte aligned rows, like "tile") or "rows_st" (C's rows not
        16-byte aligned: the same shared tile copied to C row by row with coalesced 4-byte
        (bf16) or 8-byte (f32) st.global, lower/c_row_stores.py). A bf16 C goes through stmatrix, an
        f32 C through 8-byte shared stores, and only where its twice as large tile fits beside
        the stages (else C is stored from the fragments); "rows" flat coordinates must fit
        TMA's s32."""
        if self.epilogue == "direct" or out not in OUT_BYTES:
            return None
        if self.shared_bytes(SWIZZLE_BYTES // self.BK, "tile", out) > \
                target_limits(DEFAULT_TARGET)["max_shared_per_block"]:
            return None
        if (n * OUT_BYTES[out]) % 16:
            # a row-piece of the flat view starting off a 16-byte boundary is an illegal
            # instruction on the H200 (tests/test_tc_matmul.py at N = 611): rows
            # not 16-byte aligned are stored by the threads
            return "rows_st"
        if self.epilogue == "tma":
            return "tile"
        # a tile's rows past M start past M*N (clipped) but must stay positive s32 coordinates
        return "rows" if (m + TMA_MAX_BOX) * n < 2 ** 31 else None

    def stages_c(self, out, n, m=1):
        """Whether C goes through shared memory (c_store is not None)."""
        return self.c_store(out, m, n) is not None

    def c_stage_bytes(self, kind="tile", out="bf16"):
        """The staged C tile (either kind: the same swizzled boxes)."""
        return self.BM * self.BN * OUT_BYTES[out] if kind else 0

    def shared_bytes(self, elem=2, staged_c=None, out="bf16"):
        """Dynamic shared memory: the stages, the staged C tile (staged_c: a c_store kind),
        1024 bytes of slack to align them to the swizzle atom, and a full and an empty
        mbarrier per stage."""
        c = self.c_stage_bytes(staged_c, out)
        return self.stages * self.stage_bytes(elem) + c + SWIZZLE_ATOM_BYTES + 16 * self.stages

    # -- validation ---------------------------------------------------------------------------
    def validate(self, arch=DEFAULT_ARCH_SPECIFIC_TARGET, dtype="bf16"):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"tc_matmul schedule {self}: {what}")

        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type in ("int", int) and (not isinstance(v, int) or isinstance(v, bool)):
                bad(f"{f.name} must be an int, got {v!r}")
        if archmod.check_arch(arch) != DEFAULT_ARCH_SPECIFIC_TARGET:
            bad(f"needs target sm_90a (wgmma, setmaxnreg), not {arch}")
        if dtype not in ELEM_BYTES:
            bad(f"input type must be one of {', '.join(ELEM_BYTES)}, got {dtype!r}")
        elem = ELEM_BYTES[dtype]
        if self.BK * elem != SWIZZLE_BYTES:
            bad(f"BK={self.BK}: a K step must be one {SWIZZLE_BYTES}-byte swizzled row "
                f"({SWIZZLE_BYTES // elem} elements of {dtype})")
        if not (1 <= self.consumers <= 3):
            bad(f"consumers={self.consumers} must be 1, 2 or 3 warpgroups")
        if self.BM % (self.consumers * WGMMA_M):
            bad(f"BM={self.BM} must split into {self.consumers} consumers of whole "
                f"{WGMMA_M}-row wgmma blocks")
        if not (_pow2(self.BM) and _pow2(self.BN)):
            bad(f"BM={self.BM} and BN={self.BN} must be powers of two (tile raster)")
        if not (8 <= self.wgmma_n <= WGMMA_MAX_N and self.wgmma_n % 8 == 0):
            bad(f"wgmma_n={self.wgmma_n} must be a multiple of 8 from 8 to {WGMMA_MAX_N}")
        if self.BN % self.wgmma_n:
            bad(f"BN={self.BN} must be a multiple of wgmma_n={self.wgmma_n}")
        if self.BM > TMA_MAX_BOX or self.BN > TMA_MAX_BOX:
            bad(f"BM={self.BM} and BN={self.BN} must be at most {TMA_MAX_BOX} (one TMA box)")
        if self.stages < 2:
            bad(f"stages={self.stages}: the pipeline needs at least 2")
        if self.inflight not in (0, 1):
            bad(f"inflight={self.inflight} must be 0 or 1")
        if self.cluster_m not in (1, 2):
            bad(f"cluster_m={self.cluster_m} must be 1 or 2")
        if self.BN % (8 * self.cluster_m):
            bad(f"BN={self.BN} must split into {self.cluster_m} multicast boxes of whole "
                f"8-row swizzle atoms")
        if self.epilogue not in ("direct", "tma", "rows"):
            bad(f"epilogue={self.epilogue!r} must be 'direct', 'tma' or 'rows'")
        if self.epilogue != "direct" and self.wgmma_n % C_BOX_COLS:
            bad(f"epilogue {self.epilogue!r} stores {C_BOX_COLS}-column boxes: wgmma_n={self.wgmma_n} must "
                f"be a multiple of {C_BOX_COLS}")
        if self.group_m < 0:
            bad(f"group_m={self.group_m} must be >= 0")
        if self.split_k < 1:
            bad(f"split_k={self.split_k} must be >= 1")
        if self.split_k > 1 and (self.epilogue != "direct" or self.cluster_m != 1 or
                                 not self.persistent):
            bad(f"split_k={self.split_k} needs epilogue='direct', cluster_m=1 and a persistent "
                f"grid (the last piece of a tile stores C from its fragments)")
        lim = target_limits(DEFAULT_TARGET)
        if self.threads > lim["max_threads_per_block"]:
            bad(f"{self.threads} threads exceed {lim['max_threads_per_block']} per block")
        need = self.shared_bytes(elem, None if self.epilogue == "direct" else "tile")
        if need > lim["max_shared_per_block"]:
            bad(f"{self.stages} stages{'' if self.epilogue == 'direct' else ' and the C tile'} "
                f"need {need} bytes of shared memory, more than "
                f"{lim['max_shared_per_block']} per block")
        check_register_split(self, lim, bad)
        if self.acc_regs + 24 > self.consumer_regs:
            bad(f"{self.acc_regs} accumulators per thread do not fit consumer_regs="
                f"{self.consumer_regs}")
        return self

    def entry_regs(self):
        """The register cap every thread starts with (.maxnreg): the SM's registers shared by
        all threads of the one resident CTA, rounded down to the allocation unit of 8."""
        return (target_limits(DEFAULT_TARGET)["regs_per_sm"] // self.threads) // 8 * 8
