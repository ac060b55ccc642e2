"""Numba kernels of the model benchmark set (benchmarks/model_set.py): code ptxgen did not write.

Plain Python functions; model_set.py compiles them with numba.cuda on the GPU machine (the PTX
it simulates is the PTX that ran). Written the way a Numba user would write them, not tuned.
"""
import math

import sys
from pathlib import Path

import numpy as np
from numba import cuda, float32, int32
from numba.cuda import libdevice

# the five kernels the parser's PTX corpus is compiled from (one definition of each)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "data" / "ptx"))
from collect import block_reduce, matmul_naive, matmul_shared, saxpy, transpose_padded  # noqa: E402,F401

TILE = 16


def stencil1d(x, out):
    i = cuda.grid(1)
    n = x.size
    if i >= 3 and i < n - 3:
        out[i] = (0.05 * (x[i - 3] + x[i + 3]) + 0.1 * (x[i - 2] + x[i + 2])
                  + 0.2 * (x[i - 1] + x[i + 1]) + 0.3 * x[i])


def stencil2d(a, b):
    j, i = cuda.grid(2)
    if i >= 1 and j >= 1 and i < a.shape[0] - 1 and j < a.shape[1] - 1:
        b[i, j] = 0.2 * (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])


def hist_shared(data, bins):
    h = cuda.shared.array(256, int32)
    t = cuda.threadIdx.x
    h[t] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < data.size:
        cuda.atomic.add(h, data[i], 1)
        i += stride
    cuda.syncthreads()
    cuda.atomic.add(bins, t, h[t])


def hist_global(data, bins):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(bins, data[i], 1)


def block_scan(x, out):
    s = cuda.shared.array(1024, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    d = 1
    while d < 1024:
        v = s[t - d] if t >= d else 0.0
        cuda.syncthreads()
        s[t] += v
        cuda.syncthreads()
        d *= 2
    if i < x.size:
        out[i] = s[t]


def gather(x, idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[idx[i]]


def scatter(x, idx, out):
    i = cuda.grid(1)
    if i < x.size:
        out[idx[i]] = x[i]


def layernorm(x, y, eps):
    s1 = cuda.shared.array(256, float32)
    s2 = cuda.shared.array(256, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = x.shape[1]
    a = float32(0.0)
    b = float32(0.0)
    j = t
    while j < n:
        v = x[row, j]
        a += v
        b += v * v
        j += 256
    s1[t] = a
    s2[t] = b
    cuda.syncthreads()
    s = 128
    while s > 0:
        if t < s:
            s1[t] += s1[t + s]
            s2[t] += s2[t + s]
        cuda.syncthreads()
        s //= 2
    mean = s1[0] / n
    inv = 1.0 / math.sqrt(s2[0] / n - mean * mean + eps)
    j = t
    while j < n:
        y[row, j] = (x[row, j] - mean) * inv
        j += 256


def divergent(x, out, iters):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        if i % 4 == 0:
            for _ in range(iters):
                v = v * float32(1.0001) + float32(0.5)
        else:
            for _ in range(iters // 4):
                v = v * float32(0.999) - float32(0.25)
        out[i] = v


# -- the second held-out group (held2): added before the model changes of 2026-12-01 (second
# round), kinds of kernel not in the set before; their errors were not looked at while fitting.
def transpose_naive(a, b):
    j, i = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        b[j, i] = a[i, j]


def warp_reduce(x, partial):
    # grid-stride partial sums, a warp-shuffle tree, one partial per warp (no atomics)
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    v = float32(0.0)
    while i < x.size:
        v += x[i]
        i += stride
    off = 16
    while off > 0:
        v += cuda.shfl_down_sync(0xffffffff, v, off)
        off //= 2
    if cuda.laneid == 0:
        partial[cuda.grid(1) // 32] = v


def spmv_csr(rowptr, cols, vals, x, y):
    r = cuda.grid(1)
    if r < y.size:
        s = float32(0.0)
        for k in range(rowptr[r], rowptr[r + 1]):
            s += vals[k] * x[cols[k]]
        y[r] = s


def row_scan(x, out):
    # one warp per row: 32 columns at a time, a shuffle scan, the carry from lane 31
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    lane = cuda.laneid
    if row < x.shape[0]:
        carry = float32(0.0)
        for c0 in range(0, x.shape[1], 32):
            c = c0 + lane
            v = x[row, c] if c < x.shape[1] else float32(0.0)
            off = 1
            while off < 32:
                t = cuda.shfl_up_sync(0xffffffff, v, off)
                if lane >= off:
                    v += t
                off *= 2
            if c < x.shape[1]:
                out[row, c] = v + carry
            carry += cuda.shfl_sync(0xffffffff, v, 31)


def bitonic_step(a, b, j, k):
    # one compare-exchange step of a bitonic sort, out of place (repeat launches do the same work)
    i = cuda.grid(1)
    if i < a.size:
        p = i ^ j
        x = a[i]
        y = a[p]
        keep_min = (i < p) == ((i & k) == 0)
        b[i] = min(x, y) if keep_min else max(x, y)


def stencil3d(a, b):
    k, j, i = cuda.grid(3)
    if (i >= 1 and j >= 1 and k >= 1 and i < a.shape[0] - 1 and j < a.shape[1] - 1
            and k < a.shape[2] - 1):
        b[i, j, k] = (float32(0.4) * a[i, j, k]
                      + float32(0.1) * (a[i - 1, j, k] + a[i + 1, j, k] + a[i, j - 1, k]
                                        + a[i, j + 1, k] + a[i, j, k - 1] + a[i, j, k + 1]))


def softmax_rows(x, y):
    s = cuda.shared.array(256, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = x.shape[1]
    m = float32(-math.inf)
    j = t
    while j < n:
        m = max(m, x[row, j])
        j += 256
    s[t] = m
    cuda.syncthreads()
    h = 128
    while h > 0:
        if t < h:
            s[t] = max(s[t], s[t + h])
        cuda.syncthreads()
        h //= 2
    m = s[0]
    cuda.syncthreads()
    a = float32(0.0)
    j = t
    while j < n:
        a += math.exp(x[row, j] - m)
        j += 256
    s[t] = a
    cuda.syncthreads()
    h = 128
    while h > 0:
        if t < h:
            s[t] += s[t + h]
        cuda.syncthreads()
        h //= 2
    inv = float32(1.0) / s[0]
    j = t
    while j < n:
        y[row, j] = math.exp(x[row, j] - m) * inv
        j += 256


def strided_copy(x, out, stride):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i * stride]


# -- the third held-out group (held3): added after every error of fit/held/held2 had been seen,
# kinds of kernel not in the set before; evaluated once, after the model is frozen.
def gemv_warp(a, x, y):
    # batched matrix-vector y = A x: one warp per row, lanes stride the row, a shuffle tree
    row = cuda.grid(1) // 32
    lane = cuda.laneid
    if row < a.shape[0]:                # the same for all lanes of a warp
        s = float32(0.0)
        j = lane
        while j < a.shape[1]:
            s += a[row, j] * x[j]
            j += 32
        off = 16
        while off > 0:
            s += cuda.shfl_down_sync(0xffffffff, s, off)
            off //= 2
        if lane == 0:
            y[row] = s


def conv3x3_smem(a, w, b):
    # 3x3 cross-correlation, zero padding: a 16x16 output tile reads an 18x18 input tile
    # (halo included) from shared memory
    tile = cuda.shared.array((18, 18), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    y0 = cuda.blockIdx.y * 16 - 1
    x0 = cuda.blockIdx.x * 16 - 1
    h = a.shape[0]
    wd = a.shape[1]
    k = ty * 16 + tx
    while k < 18 * 18:
        r = k // 18
        gy = y0 + r
        gx = x0 + k - r * 18
        tile[r, k - r * 18] = a[gy, gx] if gy >= 0 and gy < h and gx >= 0 and gx < wd else 0.0
        k += 256
    cuda.syncthreads()
    i = y0 + 1 + ty
    j = x0 + 1 + tx
    if i < h and j < wd:
        s = float32(0.0)
        for dy in range(3):
            for dx in range(3):
                s += w[dy, dx] * tile[ty + dy, tx + dx]
        b[i, j] = s


def hist_warp_bytes(words, bins):
    # byte histogram of int32 words (4 bytes each): one private 256-bin histogram per warp in
    # shared memory (less contention than one per block), merged once per block
    h = cuda.shared.array((8, 256), int32)
    t = cuda.threadIdx.x
    for q in range(8):
        h[q, t] = 0
    cuda.syncthreads()
    wp = t // 32
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < words.size:
        v = words[i]
        for k in range(4):
            cuda.atomic.add(h, (wp, (v >> (8 * k)) & 255), 1)
        i += stride
    cuda.syncthreads()
    s = 0
    for q in range(8):
        s += h[q, t]
    cuda.atomic.add(bins, t, s)


# p(v) = 0.5 * sum_k (-0.4 v)^k, degree 16: a contraction on [-1, 1], so repeated evaluation
# neither overflows nor amplifies rounding
HORNER = tuple(np.float32(0.5 * (-0.4) ** k) for k in range(17))


def poly_horner(x, out, reps):
    # 16 dependent FMAs per evaluation, `reps` evaluations per element (v <- p(v))
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        for _ in range(reps):
            p = HORNER[16]
            p = p * v + HORNER[15]
            p = p * v + HORNER[14]
            p = p * v + HORNER[13]
            p = p * v + HORNER[12]
            p = p * v + HORNER[11]
            p = p * v + HORNER[10]
            p = p * v + HORNER[9]
            p = p * v + HORNER[8]
            p = p * v + HORNER[7]
            p = p * v + HORNER[6]
            p = p * v + HORNER[5]
            p = p * v + HORNER[4]
            p = p * v + HORNER[3]
            p = p * v + HORNER[2]
            p = p * v + HORNER[1]
            v = p * v + HORNER[0]
        out[i] = v


def sfu_trig(x, out, reps):
    # the special-function unit: fast sine, cosine and exponential (sin/cos/ex2.approx)
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        acc = float32(0.0)
        for _ in range(reps):
            acc = float32(0.5) * acc + libdevice.fast_sinf(v) * libdevice.fast_cosf(acc)
            v = libdevice.fast_expf(float32(-0.5) * v * v)
        out[i] = acc


def nbody_tiled(pos, acc, eps2):
    # all-pairs gravitational acceleration: pos is (n, 4) = x, y, z, mass; one thread per body,
    # the bodies staged through shared memory 256 at a time
    sh = cuda.shared.array((256, 4), float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = pos.shape[0]
    ii = min(i, n - 1)
    xi = pos[ii, 0]
    yi = pos[ii, 1]
    zi = pos[ii, 2]
    ax = float32(0.0)
    ay = float32(0.0)
    az = float32(0.0)
    for base in range(0, n, 256):
        j = base + t
        for q in range(4):
            sh[t, q] = pos[j, q] if j < n else 0.0
        cuda.syncthreads()
        for k in range(256):
            dx = sh[k, 0] - xi
            dy = sh[k, 1] - yi
            dz = sh[k, 2] - zi
            inv = libdevice.rsqrtf(dx * dx + dy * dy + dz * dz + eps2)
            s = sh[k, 3] * inv * inv * inv
            ax += dx * s
            ay += dy * s
            az += dz * s
        cuda.syncthreads()
    if i < n:
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


def permute_nchw(x, y, c, h, w):
    # NCHW -> NHWC layout change of a flat tensor: coalesced reads, stores at a stride of c
    i = cuda.grid(1)
    if i < x.size:
        iw = i % w
        r = i // w
        ih = r % h
        r = r // h
        ic = r % c
        n = r // c
        y[((n * h + ih) * w + iw) * c + ic] = x[i]


def block_compact(x, out, counts, thresh):
    # stream compaction inside each 256-element block: the elements above thresh, in order, at
    # the start of the block's slots (warp ballots, popc ranks, warp counts through shared)
    wc = cuda.shared.array(8, int32)
    t = cuda.threadIdx.x
    lane = cuda.laneid
    i = cuda.grid(1)
    v = x[i] if i < x.size else float32(0.0)
    keep = i < x.size and v > thresh
    m = cuda.ballot_sync(0xffffffff, keep)
    rank = cuda.popc(m & ((1 << lane) - 1))
    if lane == 0:
        wc[t // 32] = cuda.popc(m)
    cuda.syncthreads()
    base = 0
    for q in range(t // 32):
        base += wc[q]
    if keep:
        out[cuda.blockIdx.x * 256 + base + rank] = v
    if t == 0:
        total = 0
        for q in range(8):
            total += wc[q]
        counts[cuda.blockIdx.x] = total


def empty3(a, b, c):
    pass


# name: (function, Numba signature)
KERNELS = {
    "saxpy": (saxpy, "void(float32, float32[:], float32[:], float32[:])"),
    "matmul_naive": (matmul_naive, "void(float32[:,:], float32[:,:], float32[:,:])"),
    "matmul_shared": (matmul_shared, "void(float32[:,:], float32[:,:], float32[:,:])"),
    "block_reduce": (block_reduce, "void(float32[:], float32[:])"),
    "transpose_padded": (transpose_padded, "void(float32[:,:], float32[:,:])"),
    "stencil1d": (stencil1d, "void(float32[:], float32[:])"),
    "stencil2d": (stencil2d, "void(float32[:,:], float32[:,:])"),
    "hist_shared": (hist_shared, "void(int32[:], int32[:])"),
    "hist_global": (hist_global, "void(int32[:], int32[:])"),
    "block_scan": (block_scan, "void(float32[:], float32[:])"),
    "gather": (gather, "void(float32[:], int32[:], float32[:])"),
    "scatter": (scatter, "void(float32[:], int32[:], float32[:])"),
    "layernorm": (layernorm, "void(float32[:,:], float32[:,:], float32)"),
    "divergent": (divergent, "void(float32[:], float32[:], int32)"),
    "transpose_naive": (transpose_naive, "void(float32[:,:], float32[:,:])"),
    "warp_reduce": (warp_reduce, "void(float32[:], float32[:])"),
    "spmv_csr": (spmv_csr, "void(int32[:], int32[:], float32[:], float32[:], float32[:])"),
    "row_scan": (row_scan, "void(float32[:,:], float32[:,:])"),
    "bitonic_step": (bitonic_step, "void(float32[:], float32[:], int32, int32)"),
    "stencil3d": (stencil3d, "void(float32[:,:,:], float32[:,:,:])"),
    "softmax_rows": (softmax_rows, "void(float32[:,:], float32[:,:])"),
    "strided_copy": (strided_copy, "void(float32[:], float32[:], int32)"),
    "gemv_warp": (gemv_warp, "void(float32[:,:], float32[:], float32[:])"),
    "conv3x3_smem": (conv3x3_smem, "void(float32[:,:], float32[:,:], float32[:,:])"),
    "hist_warp_bytes": (hist_warp_bytes, "void(int32[:], int32[:])"),
    "poly_horner": (poly_horner, "void(float32[:], float32[:], int32)"),
    "sfu_trig": (sfu_trig, "void(float32[:], float32[:], int32)"),
    "nbody_tiled": (nbody_tiled, "void(float32[:,:], float32[:,:], float32)"),
    "permute_nchw": (permute_nchw, "void(float32[:], float32[:], int32, int32, int32)"),
    "block_compact": (block_compact, "void(float32[:], float32[:], int32[:], float32)"),
    "empty3": (empty3, "void(float32[:], float32[:], float32[:])"),
}
