"""CPU PTX emulator: runs kernels of the IR (built or parsed) with numpy, one vector lane per
thread, with memcheck (out-of-bounds and misaligned accesses) and shared-memory racecheck and
initcheck. numpy only: importing it does not import numba."""
from .api import EmulationResult, as_module, compile_kernel, emulate, numba_array_args
from .backend import run_operator
from .executor import EmulationWarning
from .tensormap import TensorMap
# Kinds of the ops of compile_kernel(...).code, for observers passed to emulate().
from .compiled_op import BARRIER, BRANCH, EXIT, NORMAL

__all__ = ["emulate", "numba_array_args", "compile_kernel", "as_module", "run_operator",
           "EmulationResult", "EmulationWarning", "TensorMap", "NORMAL", "BRANCH", "BARRIER",
           "EXIT"]
