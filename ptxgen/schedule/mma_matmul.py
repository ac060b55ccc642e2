"""MmaMatmulSchedule: the sm_80-style tensor-core GEMM (mma.sync + ldmatrix + cp.async), the
second code path of the tensor-core matmul beside TcMatmulSchedule's sm_90a one (tc_matmul.py).

It is a schedule class of its own, not a mode of TcMatmulSchedule: apart from the CTA tile, none
of the wgmma schedule's choices (consumer warpgroups, wgmma N, setmaxnreg budgets, persistence,
clusters, the TMA epilogue) exists on this path, and this one's (warps along M and N, each owning
a warp tile of mma.sync fragments) means nothing to wgmma. Both share the operand layout (A and
Bt K-major), the K step (one 128-byte row: 64 16-bit or 32 tf32 elements) and the operator
(ops/tc_matmul.py, which picks this path for targets without wgmma).

    block tile    BM x BN outputs per CTA, BK along K per pipeline stage (one 128-byte row)
    warps         warps_m x warps_n warps, each owning a WM x WN = BM/warps_m x BN/warps_n tile
                  of m16n8 accumulators: WM/16 x WN/8 mma.sync per k step
    instruction   mma.sync.aligned m16n8k16 (bf16, f16) or m16n8k8 (tf32), f32 accumulators;
                  fragments by ldmatrix.x4 from shared memory
    pipeline      `stages` shared slots [A tile | B tile] filled by cp.async.cg (16 bytes,
                  zero-fill past K), one commit group per K step, stages-1 steps in flight
    raster        group_m tile rows per tile column (L2 reuse), one CTA per tile

`ptxgen.lower.lower_mma_matmul(schedule, arch, shape)` (lower/mma_matmul.py) turns one into a Module.
"""
import dataclasses
from dataclasses import dataclass

from .. import arch as archmod
from ..errors import ScheduleError
from .matmul import target_limits
from .tc_matmul import ELEM_BYTES, SWIZZLE_BYTES

INSTRUCTION = "mma.sync"
WARP = 32
# mma.sync shapes: m16n8k16 for 16-bit inputs, m16n8k8 for tf32 — 32 bytes of a row either way.
# Source: PTX ISA 9.0, section 9.7.14.5 (mma.m16n8k16 .bf16/.f16, mma.m16n8k8 .tf32).
MMA_M, MMA_N = 16, 8
MMA_SHAPE = {"bf16": "m16n8k16", "f16": "m16n8k16", "tf32": "m16n8k8"}
MMA_K_BYTES = 32
CHUNK = 16                       # bytes of one cp.async.cg and of one ldmatrix row
# the lowest target with mma.sync on bf16/tf32, ldmatrix and cp.async (PTX ISA 9.0, 9.7.14.5,
# 9.7.9.25) is ptxgen's baseline; arch-specific targets count as their family (sm_90a: sm_90)
MIN_SM = archmod.sm_number(archmod.BASELINE_TARGET)


def _pow2(x):
    return isinstance(x, int) and x > 0 and x & (x - 1) == 0


def check_ints_and_target(schedule, arch, bad):
    """What every sm_80-path schedule checks first: int fields, and a target with mma.sync on
    bf16/tf32, ldmatrix and cp.async; bad(message) raises."""
    for f in dataclasses.fields(schedule):
        v = getattr(schedule, f.name)
        if not isinstance(v, int) or isinstance(v, bool):
            bad(f"{f.name} must be an int, got {v!r}")
    archmod.check_arch(arch)
    if archmod.sm_number(arch) < MIN_SM:
        bad(f"needs {archmod.BASELINE_TARGET} or newer (mma.sync bf16/tf32, cp.async), not "
            f"{arch}")


@dataclass(frozen=True)
class MmaMatmulSchedule:
    """One sm_80-style tensor-core GEMM schedule (frozen, hashable; str gives a short name)."""
    BM: int = 128
    BN: int = 256
    BK: int = 64                 # one 128-byte row of the input type (`for_dtype` sets it)
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 3
    group_m: int = 8             # tile rows walked per tile column (0: row-major tile order)

    instruction = INSTRUCTION    # what the operator dispatches on (TcMatmulSchedule: wgmma)

    def __str__(self):
        return (f"mma{self.BM}x{self.BN}x{self.BK}_w{self.warps_m}x{self.warps_n}"
                f"_s{self.stages}_g{self.group_m}")

    def for_dtype(self, dtype):
        """This schedule with BK set to one 128-byte row of `dtype` (64 16-bit, 32 tf32)."""
        return dataclasses.replace(self, BK=SWIZZLE_BYTES // ELEM_BYTES.get(dtype, 2))

    @property
    def warps(self):
        return self.warps_m * self.warps_n

    @property
    def threads(self):
        return WARP * self.warps

    @property
    def WM(self):
        return self.BM // self.warps_m

    @property
    def WN(self):
        return self.BN // self.warps_n

    @property
    def acc_regs(self):
        """f32 accumulator registers per thread: a WM x WN warp tile over 32 lanes."""
        return self.WM * self.WN // WARP

    def stage_bytes(self, elem=2):
        return (self.BM + self.BN) * self.BK * elem

    def shared_bytes(self, elem=2):
        return self.stages * self.stage_bytes(elem)

    def validate(self, arch=archmod.BASELINE_TARGET, dtype="bf16"):
        """ScheduleError (one line, naming the field) when this schedule cannot be lowered."""
        def bad(what):
            raise ScheduleError(f"mma_matmul schedule {self}: {what}")

        check_ints_and_target(self, arch, bad)
        if dtype not in ELEM_BYTES:
            bad(f"input type must be one of {', '.join(ELEM_BYTES)}, got {dtype!r}")
        elem = ELEM_BYTES[dtype]
        if self.BK * elem != SWIZZLE_BYTES:
            bad(f"BK={self.BK}: a K step must be one {SWIZZLE_BYTES}-byte row "
                f"({SWIZZLE_BYTES // elem} elements of {dtype})")
        if not (_pow2(self.BM) and _pow2(self.BN)):
            bad(f"BM={self.BM} and BN={self.BN} must be powers of two (tile raster)")
        if not (_pow2(self.warps_m) and _pow2(self.warps_n)) or not 1 <= self.warps <= 16:
            bad(f"warps_m={self.warps_m} x warps_n={self.warps_n} must be powers of two, "
                f"1 to 16 warps")
        if self.BM % (self.warps_m * MMA_M) or self.WM < MMA_M:
            bad(f"BM={self.BM} must split into {self.warps_m} warp tiles of whole "
                f"{MMA_M}-row mma blocks")
        if self.BN % (self.warps_n * 2 * MMA_N) or self.WN < 2 * MMA_N:
            bad(f"BN={self.BN} must split into {self.warps_n} warp tiles of whole pairs of "
                f"{MMA_N}-column mma blocks (one ldmatrix.x4 each)")
        rows_per_pass = self.threads * CHUNK // SWIZZLE_BYTES
        if self.BM % rows_per_pass or self.BN % rows_per_pass:
            bad(f"BM={self.BM} and BN={self.BN} must be multiples of {rows_per_pass} rows (one "
                f"16-byte copy per thread per pass of {self.threads} threads)")
        if self.stages < 2:
            bad(f"stages={self.stages}: the pipeline needs at least 2")
        if self.group_m < 0:
            bad(f"group_m={self.group_m} must be >= 0")
        if self.acc_regs > 128:
            bad(f"{self.acc_regs} accumulators per thread (a {self.WM}x{self.WN} warp tile) "
                f"leave too few of the 255 registers for fragments and addresses")
        lim = target_limits(archmod.base_arch(arch))
        if self.threads > lim["max_threads_per_block"]:
            bad(f"{self.threads} threads exceed {lim['max_threads_per_block']} per block")
        need = self.shared_bytes(elem)
        if need > lim["max_shared_per_block"]:
            bad(f"{self.stages} stages need {need} bytes of shared memory, more than "
                f"{lim['max_shared_per_block']} per block on {arch}")
        return self


def default_mma_schedule(arch, shape=None):
    """128x256 tiles of 8 warps (64x64 each) and 3 stages where a block may have 144 KB of
    shared memory (sm_80, sm_90); 128x128 tiles of 4 warps and 3 stages (96 KB) on the 99 KB
    parts (sm_86, sm_89). With fewer 128x256 tiles than the target has SMs, 128x128 tiles."""
    lim = target_limits(archmod.base_arch(arch))
    big = MmaMatmulSchedule()
    if big.shared_bytes() > lim["max_shared_per_block"]:
        return MmaMatmulSchedule(BN=128, warps_n=2)
    if shape is not None:
        from .. import isa
        tiles = -(-shape["M"] // big.BM) * -(-shape["N"] // big.BN)
        if tiles < isa.sm_count(archmod.base_arch(arch)):
            return MmaMatmulSchedule(BN=128, warps_n=2, stages=4)
    return big
