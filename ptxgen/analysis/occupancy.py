"""Theoretical occupancy: how many blocks of a kernel fit on one SM at once.

The rules are those of the CUDA occupancy calculator (cuda_occupancy.h,
cudaOccMaxActiveBlocksPerMultiprocessor), which the driver's
cuOccupancyMaxActiveBlocksPerMultiprocessor agrees with:

- warps: a block takes ceil(threads / warp_size) warp slots of max_warps_per_sm;
- registers: each warp is allocated regs*warp_size rounded up to the allocation unit, out of
  the register file split evenly over the sub-partitions, so a sub-partition holds
  floor(regs_per_sm / partitions / regs_per_warp) warps; a block must also pass the hardware
  check with its warp count rounded up to the number of sub-partitions;
- shared memory: a block takes static + dynamic + the per-block reservation, rounded up to the
  allocation unit, out of the shared-memory carveout. The carveout is the preference (by default
  the largest) unless a single block needs more, in which case the driver picks the smallest
  supported carveout that holds one block;
- blocks: at most max_blocks_per_sm.

Every limit comes from ptxgen.isa.limits (the isa/<arch>.toml header, or isa/limits.toml for targets
without a machine model); nothing here is architecture-specific.
"""
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

from .. import isa
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError

LIMITERS = ("warps", "registers", "shared", "blocks")
# INT_MAX in cuda_occupancy.h: a resource the kernel does not use imposes no limit.
_UNLIMITED = 2 ** 31 - 1


@dataclass
class Occupancy:
    active_blocks_per_sm: int
    active_warps_per_sm: int
    occupancy: float                     # active warps / max warps per SM
    limiter: str                         # the first of LIMITERS reaching the minimum
    limiters: list = field(default_factory=list)     # every resource at the minimum
    block_limits: dict = field(default_factory=dict)  # blocks per SM allowed by each resource
    warps_per_block: int = 0
    registers_per_block: int = 0         # allocated, after rounding
    shared_per_block: int = 0            # allocated, reservation and rounding included
    shared_per_sm: int = 0               # the carveout the calculation used
    arch: str = ""

    def to_dict(self):
        d = asdict(self)
        d["block_limits"] = {k: (None if v >= _UNLIMITED else v)
                             for k, v in self.block_limits.items()}
        return d


def _ceil_div(a, b):
    return -(-a // b)


def _round_up(a, b):
    return _ceil_div(a, b) * b


def _align_to_carveout(nbytes, h):
    """The smallest supported shared-memory carveout (bytes) holding nbytes, or None."""
    for kb in h.shared_carveout_kb:
        if nbytes <= kb * 1024:
            return kb * 1024
    return None


def _check_int(name, v, minimum):
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise PtxgenError(f"occupancy: {name} must be an integer >= {minimum}, got {v!r}")


def occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block,
              arch=DEFAULT_TARGET, carveout=None, opt_in=True):
    """Active blocks and warps per SM for a kernel launched with these resources.

    shared_bytes_per_block: static + dynamic shared memory of one block (without the driver's
    per-block reservation, which is added here). carveout: the kernel's preferred shared-memory
    carveout in percent of the maximum (CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
    None means no preference, which the driver treats as the maximum. opt_in: the kernel raised
    its dynamic shared-memory limit (needed above shared_per_block, 48 KB), as launches of
    such kernels must.
    """
    _check_int("threads_per_block", threads_per_block, 1)
    _check_int("registers_per_thread", registers_per_thread, 0)
    _check_int("shared_bytes_per_block", shared_bytes_per_block, 0)
    if carveout is not None and not (isinstance(carveout, (int, float)) and 0 <= carveout <= 100):
        raise PtxgenError(f"occupancy: carveout is a percentage 0..100, got {carveout!r}")
    h = target_limits(arch)

    warps = _ceil_div(threads_per_block, h.warp_size)
    limits = {}

    # warps
    if threads_per_block > h.max_threads_per_block:
        limits["warps"] = 0
    else:
        limits["warps"] = (h.max_threads_per_sm // h.warp_size) // warps
    # hardware warp slots also cap the thread count; both tables agree (64 x 32 = 2048)
    limits["warps"] = min(limits["warps"], h.max_warps_per_sm // warps)

    # registers
    regs_per_warp = _round_up(registers_per_thread * h.warp_size, h.register_allocation_unit)
    regs_per_block = regs_per_warp * warps
    regs_assumed = regs_per_warp * _round_up(warps, h.warp_allocation_granularity)
    if (regs_assumed > h.registers_per_block or regs_per_block > h.registers_per_block
            or registers_per_thread > h.max_registers_per_thread):
        limits["registers"] = 0
    elif regs_per_warp == 0:
        limits["registers"] = _UNLIMITED
    else:
        per_partition = h.registers_per_sm // h.schedulers_per_sm
        warps_per_sm = (per_partition // regs_per_warp) * h.schedulers_per_sm
        limits["registers"] = warps_per_sm // warps

    # shared memory
    smem_block = _round_up(shared_bytes_per_block + h.reserved_shared_per_block,
                           h.shared_allocation_unit)
    per_block_limit = (h.shared_per_block_optin if opt_in and shared_bytes_per_block >
                       h.shared_per_block else h.shared_per_block) + h.reserved_shared_per_block
    if carveout is None:
        preference = h.shared_per_sm
    else:
        preference = _align_to_carveout(int(carveout * h.shared_per_sm) // 100, h)
    smem_sm = preference
    if smem_block > per_block_limit:
        limits["shared"] = 0
    else:
        if preference < smem_block:
            smem_sm = _align_to_carveout(smem_block, h)
            if smem_sm is None:
                raise PtxgenError(f"occupancy: {smem_block} bytes of shared memory per block "
                                  f"exceed every {arch} carveout")
        limits["shared"] = smem_sm // smem_block if smem_block > 0 else _UNLIMITED

    limits["blocks"] = h.max_blocks_per_sm

    blocks = min(limits.values())
    tied = [k for k in LIMITERS if limits[k] == blocks]
    active_warps = blocks * warps
    return Occupancy(
        active_blocks_per_sm=blocks,
        active_warps_per_sm=active_warps,
        occupancy=active_warps / h.max_warps_per_sm,
        limiter=tied[0],
        limiters=tied,
        block_limits={k: limits[k] for k in LIMITERS},
        warps_per_block=warps,
        registers_per_block=regs_per_block,
        shared_per_block=smem_block,
        shared_per_sm=smem_sm,
        arch=arch,
    )


def invalid_launch(threads_per_block, registers_per_thread, shared_bytes_per_block,
                   arch=DEFAULT_TARGET):
    """Why a block with these resources cannot run on `arch` at all (one line), or None."""
    h = target_limits(arch)
    if threads_per_block > h.max_threads_per_block:
        return (f"{threads_per_block} threads per block exceed the {h.max_threads_per_block} "
                f"of {arch}")
    if registers_per_thread > h.max_registers_per_thread:
        return (f"{registers_per_thread} registers per thread exceed the "
                f"{h.max_registers_per_thread} of {arch}")
    if shared_bytes_per_block > h.shared_per_block_optin:
        return (f"{shared_bytes_per_block} bytes of shared memory per block exceed the "
                f"{h.shared_per_block_optin} of {arch}")
    r = occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block, arch)
    if r.active_blocks_per_sm == 0:
        return f"not one block fits on an {arch} SM (limited by {', '.join(r.limiters)})"
    return None


def target_limits(arch):
    """The limits of `arch` (ptxgen.isa.limits) as attributes."""
    return SimpleNamespace(**isa.limits(arch))
