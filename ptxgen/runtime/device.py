"""Facts about the current GPU, read through Numba (imported lazily)."""
from ..errors import LaunchError


def device_arch():
    """'sm_XY' of the current device, limited to the targets ptxgen emits for."""
    from .driver import _cuda
    cuda = _cuda()
    major, minor = cuda.get_current_device().compute_capability
    arch = f"sm_{major}{minor}"
    from ..arch import targets
    if arch not in targets():
        newest = max((t for t in targets() if int(t[3:]) <= major * 10 + minor),
                     key=lambda t: int(t[3:]), default=None)
        if newest is None:
            raise LaunchError(f"GPU {arch} is older than every target ptxgen supports")
        return newest
    return arch


def sm_count():
    from .driver import _cuda
    return _cuda().get_current_device().MULTIPROCESSOR_COUNT


def free_device_bytes():
    """Free memory on the current GPU, in bytes."""
    from .driver import _cuda
    return int(_cuda().current_context().get_memory_info()[0])
