"""The Numba twins' kernel sources: plain Python functions that numba.cuda compiles (NVVM).

Module-level functions, so the names they use (`cuda`, `float32`, the tile constants) are this
module's globals: Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, used by
`benchmarks/cpu_speed.py emulator`) swaps `cuda` in a kernel's globals for its per-thread fake, which a
closure variable would escape. Imported only when a twin is needed (it imports numba).
twins.py pairs each with its signature and launch shape.
"""
import math

from numba import cuda, float32

from .twin_tiles import RED_T, ROWS_T, TILE, TILE_PAD, TILE_T


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
