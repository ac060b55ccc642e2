"""ptxgen: write GPU kernels at the instruction level, emit PTX, analyze, emulate and run it."""
from .errors import (EmulationError, LaunchError, ParseError, PtxgenError, ToolchainError,
                     VerifyError)
from .emit import emit_module

__version__ = "0.1.0"

__all__ = ["matmul", "grouped_matmul", "attention", "attention_decode", "attention_varlen",
           "kv_cache_append", "softmax", "transpose", "row_sum", "row_max",
           "saxpy", "add", "scale", "epilogues", "mods", "create_block_mask", "last_launch",
           "clear_cache", "emit_module", "parse_ptx", "kernel", "analyze", "emulate",
           "occupancy", "bank_conflicts", "warp_efficiency", "roofline", "torch_op",
           "PtxgenError", "ParseError", "VerifyError", "ToolchainError", "LaunchError",
           "EmulationError", "__version__"]


# imported on first use so `import ptxgen` stays light (and never pulls in numba or torch)
_LAZY = {"parse_ptx": ".parse", "kernel": ".kernel_object", "analyze": ".analysis",
         "emulate": ".emu", "occupancy": ".analysis.occupancy",
         "bank_conflicts": ".analysis.banks", "warp_efficiency": ".reports.warp_efficiency",
         "roofline": ".reports.roofline", "torch_op": ".torch_ops",
         "matmul": ".library", "attention": ".library", "last_launch": ".library",
         "clear_cache": ".library", "softmax": ".library", "transpose": ".library",
         "row_sum": ".library", "row_max": ".library", "saxpy": ".library", "add": ".library",
         "scale": ".library", "create_block_mask": ".library.mods",
         "grouped_matmul": ".library", "attention_decode": ".library",
         "attention_varlen": ".library", "kv_cache_append": ".library"}


def __getattr__(name):
    if name in ("epilogues", "mods"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'ptxgen' has no attribute {name!r}")


def __dir__():
    # the lazy names too, as tab completion and help() look for them here
    return sorted(set(globals()) | set(_LAZY) | {"epilogues", "mods"})
