"""ptxgen: write GPU kernels at the instruction level, emit PTX, analyze, emulate and run it."""
from .errors import (EmulationError, LaunchError, ParseError, PtxgenError, ToolchainError,
                     VerifyError)
from .emit import emit_module

__version__ = "0.1.0"

__all__ = ["emit_module", "PtxgenError", "ParseError", "VerifyError", "ToolchainError",
           "LaunchError", "EmulationError", "__version__"]
