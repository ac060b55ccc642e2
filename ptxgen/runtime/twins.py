"""Numba @cuda.jit twins of the library operators: the NVVM-compiled comparators.

Each twin is plain Python compiled by Numba (NVVM); `twin_ptx` gives its PTX without a GPU
(numba.cuda.compile_ptx with the nvidia-nvvm wheel), `twin_kernel` the launchable dispatcher.
"""
import functools

from ..errors import PtxgenError, ToolchainError

TILE = 16


def _define():
    from numba import cuda, float32

    def saxpy(n, a, x, y, out):
        # grid-stride, as the ptxgen kernel; Numba has no 128-bit vector loads
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < n:
            out[i] = a * x[i] + y[i]
            i += stride

    def matmul(A, B, C):
        # 16x16 shared-memory tiles with bounds checks (Numba's documented fast matmul)
        sA = cuda.shared.array(shape=(TILE, TILE), dtype=float32)
        sB = cuda.shared.array(shape=(TILE, TILE), dtype=float32)
        x, y = cuda.grid(2)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        M, K = A.shape
        N = B.shape[1]
        acc = float32(0.0)
        for t in range((K + TILE - 1) // TILE):
            k = t * TILE
            sA[ty, tx] = A[y, k + tx] if y < M and k + tx < K else float32(0.0)
            sB[ty, tx] = B[k + ty, x] if x < N and k + ty < K else float32(0.0)
            cuda.syncthreads()
            for j in range(TILE):
                acc += sA[ty, j] * sB[j, tx]
            cuda.syncthreads()
        if y < M and x < N:
            C[y, x] = acc

    return {"saxpy": (saxpy, "void(int32, float32, float32[::1], float32[::1], float32[::1])"),
            "matmul": (matmul, "void(float32[:,::1], float32[:,::1], float32[:,::1])")}


@functools.lru_cache(maxsize=None)
def _twins():
    return _define()


def has_twin(name):
    return name in ("saxpy", "matmul")


def twin_ptx(name, arch="sm_90"):
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


def twin_launch_args(name, shape, arrays):
    """Launch shape and arguments of the twin for an operator's inputs (device arrays)."""
    if name == "saxpy":
        n = shape["n"]
        blocks = min(-(-n // 256), 132 * 32)
        return (blocks,), (256,), (n, arrays["a"], arrays["x"], arrays["y"], arrays["out"])
    if name == "matmul":
        M, N = shape["M"], shape["N"]
        return (-(-N // TILE), -(-M // TILE)), (TILE, TILE), (arrays["A"], arrays["B"],
                                                              arrays["C"])
    raise PtxgenError(f"no Numba twin for {name!r}")
