"""Numba @cuda.jit twins of the library operators: the NVVM-compiled comparators.

Each twin is plain Python compiled by Numba (NVVM); `twin_ptx` gives its PTX without a GPU
(numba.cuda.compile_ptx with the nvidia-nvvm wheel), `twin_kernel` the launchable dispatcher.
"""
import functools

from ..errors import PtxgenError, ToolchainError

TILE = 16
TILE_T, ROWS_T = 32, 8      # transpose twin: tile and thread rows
TILE_PAD = TILE_T + 1       # transpose twin: tile row pitch, one padding column
RED_T = 256                # reduction and softmax twins: threads per row
LIBRARY_TWINS = ("add", "scale", "transpose", "row_reduce", "row_max", "softmax")


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

    twins = {"saxpy": (saxpy, "void(int32, float32, float32[::1], float32[::1], float32[::1])"),
             "matmul": (matmul, "void(float32[:,::1], float32[:,::1], float32[:,::1])")}
    twins.update(_define_library(cuda, float32))
    return twins


def _define_library(cuda, float32):
    """Twins of the elementwise, transpose, reduction and softmax operators: what a Numba user
    would write (grid-stride loops, a padded shared tile, shared-memory tree reductions)."""
    import math

    def add(n, x, y, out):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < n:
            out[i] = x[i] + y[i]
            i += stride

    def scale(n, s, x, out):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        while i < n:
            out[i] = s * x[i]
            i += stride

    def transpose(x, out):
        # 32x32 tile, one padding column against bank conflicts, 32x8 threads
        tile = cuda.shared.array(shape=(TILE_T, TILE_PAD), dtype=float32)
        M, N = x.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        c = cuda.blockIdx.x * TILE_T + tx
        r0 = cuda.blockIdx.y * TILE_T
        for j in range(0, TILE_T, ROWS_T):
            if r0 + ty + j < M and c < N:
                tile[ty + j, tx] = x[r0 + ty + j, c]
        cuda.syncthreads()
        oc = r0 + tx
        orow0 = cuda.blockIdx.x * TILE_T
        for j in range(0, TILE_T, ROWS_T):
            if orow0 + ty + j < N and oc < M:
                out[orow0 + ty + j, oc] = tile[tx, ty + j]

    def row_sum(x, out):
        buf = cuda.shared.array(RED_T, dtype=float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        acc = float32(0.0)
        for j in range(t, x.shape[1], RED_T):
            acc += x[row, j]
        buf[t] = acc
        cuda.syncthreads()
        s = RED_T // 2
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            out[row] = buf[0]

    def row_max(x, out):
        buf = cuda.shared.array(RED_T, dtype=float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        acc = float32(-math.inf)
        for j in range(t, x.shape[1], RED_T):
            acc = max(acc, x[row, j])
        buf[t] = acc
        cuda.syncthreads()
        s = RED_T // 2
        while s > 0:
            if t < s:
                buf[t] = max(buf[t], buf[t + s])
            cuda.syncthreads()
            s //= 2
        if t == 0:
            out[row] = buf[0]

    def softmax(x, out):
        # one block per row: max, sum of exponentials, normalized write (three row passes)
        buf = cuda.shared.array(RED_T, dtype=float32)
        row, t = cuda.blockIdx.x, cuda.threadIdx.x
        n = x.shape[1]
        m = float32(-math.inf)
        for j in range(t, n, RED_T):
            m = max(m, x[row, j])
        buf[t] = m
        cuda.syncthreads()
        s = RED_T // 2
        while s > 0:
            if t < s:
                buf[t] = max(buf[t], buf[t + s])
            cuda.syncthreads()
            s //= 2
        m = buf[0]
        cuda.syncthreads()
        acc = float32(0.0)
        for j in range(t, n, RED_T):
            acc += math.exp(x[row, j] - m)
        buf[t] = acc
        cuda.syncthreads()
        s = RED_T // 2
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            cuda.syncthreads()
            s //= 2
        inv = float32(1.0) / buf[0]
        for j in range(t, n, RED_T):
            out[row, j] = math.exp(x[row, j] - m) * inv

    v1 = "float32[::1]"
    v2 = "float32[:,::1]"
    return {"add": (add, f"void(int32, {v1}, {v1}, {v1})"),
            "scale": (scale, f"void(int32, float32, {v1}, {v1})"),
            "transpose": (transpose, f"void({v2}, {v2})"),
            "row_reduce": (row_sum, f"void({v2}, {v1})"),
            "row_max": (row_max, f"void({v2}, {v1})"),
            "softmax": (softmax, f"void({v2}, {v2})")}


@functools.lru_cache(maxsize=None)
def _twins():
    return _define()


def has_twin(name):
    return name in ("saxpy", "matmul") + LIBRARY_TWINS


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
    if name in ("add", "scale"):
        n = shape["n"]
        blocks = min(-(-n // 256), 132 * 32)
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
