"""Resource limits per target, for occupancy and for sizing schedules.

A target with a machine model (isa/sm_XX.toml) takes them from its [header]; the others from
isa/limits.toml, which holds only what the CUDA C++ Programming Guide's tables give (no
latencies, no throughput). So occupancy works for every target ptxgen emits for, while the
analyses that need a machine model say which file is missing.
"""
import functools
import tomllib
from types import SimpleNamespace

from . import arch as archmod
from . import isa
from .errors import IsaDataError


# The [header] keys occupancy and schedules read (isa.Header has them all, and more).
LIMIT_KEYS = ("warp_size", "schedulers_per_sm", "max_warps_per_sm", "max_blocks_per_sm",
              "max_threads_per_sm", "max_threads_per_block", "registers_per_sm",
              "registers_per_block", "max_registers_per_thread", "register_allocation_unit",
              "warp_allocation_granularity", "shared_per_sm", "shared_per_block",
              "shared_per_block_optin", "reserved_shared_per_block", "shared_allocation_unit",
              "shared_carveout_kb")


@functools.lru_cache(maxsize=1)
def _table():
    path = archmod.isa_dir() / "limits.toml"
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise IsaDataError(f"{path}: cannot read the limits table: {e}") from None
    out = {}
    for arch, entry in data.items():
        missing = [k for k in LIMIT_KEYS if k not in entry]
        if missing:
            raise IsaDataError(f"{path}: [{arch}] lacks {', '.join(missing)}")
        out[arch] = SimpleNamespace(**{k: isa._number(path, f"{arch}.{k}", entry[k],
                                                       allow_list=k == "shared_carveout_kb")[0]
                                       for k in LIMIT_KEYS})
    return out


def known():
    """Targets whose limits are known (a machine model or a limits.toml entry)."""
    return sorted(set(isa.available()) | set(_table()))


def limits(arch):
    """The limits of `arch` as attributes named like LIMIT_KEYS (the machine model's Header,
    or its isa/limits.toml entry); a one-line PtxgenError for a target without them."""
    archmod.check_arch(arch)
    if arch in isa.available():
        return isa.load(arch).header
    if arch in _table():
        return _table()[arch]
    raise IsaDataError(f"no resource limits for {arch}: add them to isa/limits.toml or write a "
                       f"machine model isa/{arch}.toml")
