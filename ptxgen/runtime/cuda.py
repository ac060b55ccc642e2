"""numba.cuda, imported only when called: whether a GPU is there, and the module itself (a
one-line LaunchError without one). Every runtime module that touches the device starts here."""
import functools

from ..errors import Arg, LaunchError, Spelled

EMULATE = Arg("ptxgen.emulate", "--backend emu")      # the CPU emulator, where there is no GPU


@functools.lru_cache(maxsize=1)
def gpu_available():
    """True when Numba finds a usable CUDA GPU (never raises)."""
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:
        return False


def numba_cuda():
    if not gpu_available():
        raise LaunchError(Spelled("no CUDA GPU is available (", EMULATE,
                                  " runs kernels on the CPU)"))
    from numba import cuda
    return cuda
