"""ptxgen: write GPU kernels at the instruction level, emit PTX, analyze, emulate and run it."""
from .errors import (EmulationError, LaunchError, ParseError, PtxgenError, ToolchainError,
                     VerifyError)
from .emit import emit_module

__version__ = "0.1.0"

__all__ = ["emit_module", "parse_ptx", "analyze", "emulate", "bank_conflicts",
           "warp_efficiency", "roofline", "PtxgenError", "ParseError", "VerifyError",
           "ToolchainError", "LaunchError", "EmulationError", "__version__"]


def __getattr__(name):
    # imported on first use so `import ptxgen` stays light (and never pulls in numba)
    if name == "parse_ptx":
        from .parse import parse_ptx
        return parse_ptx
    if name == "analyze":
        from .analysis import analyze
        return analyze
    if name == "emulate":
        from .emu import emulate
        return emulate
    if name == "bank_conflicts":
        from .analysis.banks import bank_conflicts
        return bank_conflicts
    if name == "warp_efficiency":
        from .reports.warp_efficiency import warp_efficiency
        return warp_efficiency
    if name == "roofline":
        from .reports.roofline import roofline
        return roofline
    raise AttributeError(f"module 'ptxgen' has no attribute {name!r}")
