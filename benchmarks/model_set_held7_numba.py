"""Numba kernels of the seventh held-out group (held7) of the model benchmark set
(benchmarks/model_set_held7.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine;
tests/test_model_set.py compiles them with compile_ptx and runs them on ptxgen's emulator at
small sizes.
"""
import math

from numba import cuda, float64, uint8

NBLOCK = 128       # rownorm_f64: threads per block (one block per row)


def life_u8(a, b):
    # one Game of Life step on a grid of 0/1 bytes, cells beyond the edge dead: every thread
    # reads its 3x3 neighbourhood (bounds-checked) and writes one byte
    i, j = cuda.grid(2)
    m, n = a.shape
    if i < m and j < n:
        s = 0
        for di in range(-1, 2):
            for dj in range(-1, 2):
                if (di != 0 or dj != 0) and 0 <= i + di < m and 0 <= j + dj < n:
                    s += a[i + di, j + dj]
        alive = a[i, j]
        b[i, j] = uint8(1) if s == 3 or (s == 2 and alive == 1) else uint8(0)


def bsearch_keys(table, keys, out):
    # lower bound of each key in a sorted table: the count of entries below it (about
    # log2(len(table)) dependent loads per key, at data-dependent addresses)
    i = cuda.grid(1)
    if i < keys.size:
        key = keys[i]
        lo = 0
        hi = table.size
        while lo < hi:
            mid = (lo + hi) // 2
            if table[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo


def rownorm_f64(x, y):
    # each row scaled to unit L2 norm in float64: the block sums the row's squares by a
    # shared-memory tree, then writes x / sqrt(sum)
    sm = cuda.shared.array(NBLOCK, float64)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = x.shape[1]
    acc = float64(0.0)
    for j in range(t, n, NBLOCK):
        v = x[row, j]
        acc += v * v
    sm[t] = acc
    cuda.syncthreads()
    s = NBLOCK // 2
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    inv = 1.0 / math.sqrt(sm[0])
    for j in range(t, n, NBLOCK):
        y[row, j] = x[row, j] * inv


def bitmap_dot(words, x, y):
    # one 32-bit word of a dense bitmap per thread: y[i] = the sum of x over the word's set
    # bits (x[32 i + b] where bit b is set); the branches follow the data
    i = cuda.grid(1)
    if i < words.size:
        w = words[i]
        acc = x[0] * 0
        for bit in range(32):
            if (w >> bit) & 1:
                acc += x[32 * i + bit]
        y[i] = acc


# name: (function, Numba signature)
KERNELS = {
    "life_u8": (life_u8, "void(uint8[:,:], uint8[:,:])"),
    "bsearch_keys": (bsearch_keys, "void(int32[:], int32[:], int32[:])"),
    "rownorm_f64": (rownorm_f64, "void(float64[:,:], float64[:,:])"),
    "bitmap_dot": (bitmap_dot, "void(int32[:], float32[:], float32[:])"),
}
