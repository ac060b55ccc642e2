"""Static analyses of kernels: occupancy, shared-memory bank conflicts, instruction timing, and
the PTX analyzer (instruction mix, control flow and loops, llvm-mca style throughput per block,
register pressure, memory traffic) whose entry point is analyze()."""

__all__ = ["analyze", "AnalysisResult", "KernelReport"]


def __getattr__(name):
    # loaded on first use: the occupancy and bank modules need none of the analyzer
    if name in __all__:
        from . import analyzer
        return getattr(analyzer, name)
    raise AttributeError(f"module 'ptxgen.analysis' has no attribute {name!r}")
