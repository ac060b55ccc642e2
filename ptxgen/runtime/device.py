"""Facts about the current GPU, read through Numba (imported lazily)."""
from ..errors import LaunchError


def device_arch():
    """'sm_XY' of the current device, limited to the targets ptxgen emits for."""
    from .driver import _cuda
    cuda = _cuda()
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
    from .driver import _cuda
    return _cuda().get_current_device().MULTIPROCESSOR_COUNT
