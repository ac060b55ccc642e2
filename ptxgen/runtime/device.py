"""The current GPU through Numba (imported lazily): its facts, and copies of arrays to it and
back for the layers above that must not import numba.cuda themselves."""
import numpy as np

from ..errors import LaunchError
from .cuda import numba_cuda


def device_arch():
    """'sm_XY' of the current device, limited to the targets ptxgen emits for."""
    cuda = numba_cuda()
    major, minor = cuda.get_current_device().compute_capability
    arch = f"sm_{major}{minor}"
    from ..arch import is_arch_specific, sm_number, targets
    if arch not in targets():
        # the newest family target not above the device (arch-specific ones run on one chip)
        newest = max((t for t in targets() if not is_arch_specific(t)
                      and sm_number(t) <= major * 10 + minor), key=sm_number, default=None)
        if newest is None:
            raise LaunchError(f"GPU {arch} is older than every target ptxgen supports")
        return newest
    return arch


def sm_count():
    return numba_cuda().get_current_device().MULTIPROCESSOR_COUNT


def device_name():
    name = numba_cuda().get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def to_device(arrays):
    """{name: value} with every numpy array copied to the GPU; other values (scalars) kept."""
    cuda = numba_cuda()
    return {n: cuda.to_device(v) if isinstance(v, np.ndarray) else v for n, v in arrays.items()}


def to_host(dev_arrays, names):
    """{name: numpy array} copied back from the device arrays `names` of `dev_arrays`."""
    return {n: dev_arrays[n].copy_to_host() for n in names}


def device_array(n, dtype):
    """An uninitialised device array of n elements of dtype."""
    return numba_cuda().device_array(n, dtype=dtype)


def free_device_bytes():
    """Free memory on the current GPU, in bytes."""
    return int(numba_cuda().current_context().get_memory_info()[0])
