"""Numba @cuda.jit twins of the library operators: the NVVM-compiled comparators.

Each twin is plain Python compiled by Numba (NVVM); `twin_ptx` gives its PTX without a GPU
(numba.cuda.compile_ptx with the nvidia-nvvm wheel), `twin_kernel` the launchable dispatcher.
"""
import functools

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError, ToolchainError
from .twin_tiles import RED_T, ROWS_T, TILE, TILE_T

LIBRARY_TWINS = ("add", "scale", "transpose", "row_reduce", "row_max", "softmax")
# Grid-stride twins (saxpy, add, scale) launch at most this many CTAs per SM: the twins' own
# design choice (several waves keep every SM busy), not a hardware limit.
TWIN_CTAS_PER_SM = 32


def _define():
    """{operator: (kernel function, Numba signature)} (twin_sources: the kernels)."""
    from . import twin_sources as k
    v1, v2 = "float32[::1]", "float32[:,::1]"
    return {"saxpy": (k.saxpy, f"void(int32, float32, {v1}, {v1}, {v1})"),
            "matmul": (k.matmul, f"void({v2}, {v2}, {v2})"),
            "add": (k.add, f"void(int32, {v1}, {v1}, {v1})"),
            "scale": (k.scale, f"void(int32, float32, {v1}, {v1})"),
            "transpose": (k.transpose, f"void({v2}, {v2})"),
            "row_reduce": (k.row_sum, f"void({v2}, {v1})"),
            "row_max": (k.row_max, f"void({v2}, {v1})"),
            "softmax": (k.softmax, f"void({v2}, {v2})")}


@functools.lru_cache(maxsize=None)
def _twins():
    return _define()


def has_twin(name):
    return name in ("saxpy", "matmul") + LIBRARY_TWINS


def twin_ptx(name, arch=DEFAULT_TARGET):
    """(PTX text, kernel entry name) of the Numba twin, compiled without a GPU."""
    if not has_twin(name):
        raise PtxgenError(f"no Numba twin for {name!r}")
    try:
        from numba import cuda
        fn, sig = _twins()[name]
        cc = (int(arch[3]), int(arch[4:]))
        ptx, _ = cuda.compile_ptx(fn, sig, cc=cc, fastmath=False)
    except PtxgenError:
        raise
    except Exception as e:
        raise ToolchainError(f"Numba could not compile its {name} twin ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}); install "
                             f"`ptxgen[cuda]` for NVVM") from None
    entry = [l.split()[-1].rstrip("(") for l in ptx.splitlines() if ".entry" in l][0]
    return ptx, entry


@functools.lru_cache(maxsize=None)
def twin_kernel(name):
    from numba import cuda
    fn, sig = _twins()[name]
    return cuda.jit(sig)(fn)


def twin_call(name, shape, dev_arrays):
    """A no-argument callable that launches the twin of operator `name` on device arrays."""
    grid, block, args = twin_launch_args(name, shape, dev_arrays)
    go = twin_kernel(name)[grid, block]
    return lambda: go(*args)


def _grid_stride_blocks(n, sm_count):
    """CTAs of 256 threads for n elements, capped at TWIN_CTAS_PER_SM per SM of the device."""
    if sm_count is None:
        from .device import sm_count as device_sm_count
        sm_count = device_sm_count()
    return min(-(-n // 256), sm_count * TWIN_CTAS_PER_SM)


def twin_launch_args(name, shape, arrays, sm_count=None):
    """Launch shape and arguments of the twin for an operator's inputs (device arrays).
    sm_count: of the device the grid-stride twins run on (None: the current GPU's)."""
    if name == "saxpy":
        n = shape["n"]
        blocks = _grid_stride_blocks(n, sm_count)
        return (blocks,), (256,), (n, arrays["a"], arrays["x"], arrays["y"], arrays["out"])
    if name == "matmul":
        M, N = shape["M"], shape["N"]
        return (-(-N // TILE), -(-M // TILE)), (TILE, TILE), (arrays["A"], arrays["B"],
                                                              arrays["C"])
    if name in ("add", "scale"):
        n = shape["n"]
        blocks = _grid_stride_blocks(n, sm_count)
        if name == "add":
            return (blocks,), (256,), (n, arrays["x"], arrays["y"], arrays["out"])
        return (blocks,), (256,), (n, arrays["s"], arrays["x"], arrays["out"])
    if name == "transpose":
        M, N = shape["M"], shape["N"]
        return ((-(-N // TILE_T), -(-M // TILE_T)), (TILE_T, ROWS_T),
                (arrays["x"], arrays["out"]))
    if name in ("row_reduce", "row_max", "softmax"):
        return (shape["M"],), (RED_T,), (arrays["x"], arrays["out"])
    raise PtxgenError(f"no Numba twin for {name!r}")
