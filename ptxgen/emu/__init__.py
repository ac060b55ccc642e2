"""CPU PTX emulator: runs kernels of the IR (built or parsed) with numpy, one vector lane per
thread, with memcheck (out-of-bounds and misaligned accesses) and shared-memory racecheck and
initcheck. numpy only: importing it does not import numba."""
from .api import EmulationResult, compile_kernel, emulate, numba_array_args
from .executor import EmulationWarning
from .tensormap import TensorMap

__all__ = ["emulate", "numba_array_args", "compile_kernel", "EmulationResult",
           "EmulationWarning", "TensorMap"]
