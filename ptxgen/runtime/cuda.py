"""numba.cuda, imported only when called: whether a GPU is there, and the module itself (a
one-line LaunchError without one). Every runtime module that touches the device starts here."""
import functools

from ..errors import LaunchError


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
        raise LaunchError("no CUDA GPU is available (use --backend emu to run on the CPU)")
    from numba import cuda
    return cuda
