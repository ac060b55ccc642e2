"""The one memory-level assumption the simulator, the roofline and the tuner share.

Benchmarks (and ptxgen's own timing, runtime.time_calls) launch a kernel again and again. A
launch whose footprint fits in the part of L2 that keeps data across launches (isa
header.l2_bytes x memory_model.l2_resident_fraction: the H200's 60 MiB L2 is two partitions,
and a line read from both halves of the chip is held in both) finds its data there: its memory
level is L2. A larger footprint is streamed through (LRU keeps none of it for the next launch):
its level is DRAM, with whatever reuse inside the launch hitting L2. `cache="cold"` is the
first launch after L2 was flushed: DRAM for any footprint.
"""
from ..errors import PtxgenError

CACHE_STATES = ("warm", "cold")


def l2_keep_bytes(table):
    """Bytes of footprint that stay in L2 across repeated launches."""
    frac = (table.memory_model or {}).get("l2_resident_fraction", 1.0)
    return table.header.l2_bytes * frac


def memory_level(table, footprint, cache="warm"):
    """'L2' when a launch touching `footprint` bytes finds them in L2 across repeated
    launches, else 'DRAM' (also when the footprint is unknown)."""
    if cache not in CACHE_STATES:
        raise PtxgenError(f"cache must be 'warm' or 'cold', got {cache!r}")
    if cache == "warm" and footprint is not None and 0 < footprint <= l2_keep_bytes(table):
        return "L2"
    return "DRAM"
