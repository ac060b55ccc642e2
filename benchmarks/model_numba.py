"""Numba kernels of the model benchmark set (benchmarks/model_set.py): code ptxgen did not write.

Plain Python functions, written the way a Numba user would write them, not tuned. model_set.py
compiles them with numba.cuda on the GPU machine (the PTX it simulates is the PTX that ran);
the CPU tests compile them with compile_ptx and run them on ptxgen's emulator at small sizes.
"""
import math
import sys
from pathlib import Path

import numpy as np
from numba import cuda, float32, float64, int32, int8, uint32, uint8
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


def radix_digits(keys, counts, shift):
    # the counting pass of an LSD radix sort: each block counts the 4-bit digit at `shift` of
    # its 2048 keys in 16 shared counters and writes its row of the digit table (no global
    # atomics: a later scan of the table gives every block its output offsets)
    h = cuda.shared.array(16, int32)
    t = cuda.threadIdx.x
    if t < 16:
        h[t] = 0
    cuda.syncthreads()
    base = cuda.blockIdx.x * 2048
    for q in range(8):
        i = base + q * 256 + t
        if i < keys.size:
            cuda.atomic.add(h, (keys[i] >> shift) & 15, 1)
    cuda.syncthreads()
    if t < 16:
        counts[cuda.blockIdx.x, t] = h[t]


def gemv_colmajor(at, x, y):
    # y = A x with A stored column-major (at is A's transpose, row-major): one thread per row,
    # a warp reads 32 consecutive words of each column, x[k] is the same for the whole warp
    i = cuda.grid(1)
    if i < at.shape[1]:
        s = float32(0.0)
        for k in range(at.shape[0]):
            s += at[k, i] * x[k]
        y[i] = s


def inv4x4_batch(a, out):
    # one 4x4 inverse per thread, Gauss-Jordan without pivoting on A + 4I (entries of A in
    # [0, 1): diagonally dominant, so no pivot is needed); matrices are rows of 16 floats
    i = cuda.grid(1)
    if i < a.shape[0]:
        m = cuda.local.array(16, float32)
        r = cuda.local.array(16, float32)
        for k in range(16):
            d = k % 5 == 0
            m[k] = a[i, k] + (float32(4.0) if d else float32(0.0))
            r[k] = float32(1.0) if d else float32(0.0)
        for p in range(4):
            inv = float32(1.0) / m[p * 5]
            for c in range(4):
                m[p * 4 + c] *= inv
                r[p * 4 + c] *= inv
            for q in range(4):
                if q != p:
                    f = m[q * 4 + p]
                    for c in range(4):
                        m[q * 4 + c] -= f * m[p * 4 + c]
                        r[q * 4 + c] -= f * r[p * 4 + c]
        for k in range(16):
            out[i, k] = r[k]


def fft_radix2(src, dst, half):
    # one radix-2 decimation-in-time stage of a complex FFT (rows are re, im), out of place:
    # pairs `half` apart, twiddles from sin/cos (libdevice's accurate sinf/cosf)
    i = cuda.grid(1)
    if i < src.shape[0] // 2:
        j = i % half
        a = (i - j) * 2 + j
        b = a + half
        ang = float32(-math.pi) * (float32(j) / float32(half))
        wr = math.cos(ang)
        wi = math.sin(ang)
        xr = src[a, 0]
        xi = src[a, 1]
        yr = src[b, 0]
        yi = src[b, 1]
        tr = wr * yr - wi * yi
        ti = wr * yi + wi * yr
        dst[a, 0] = xr + tr
        dst[a, 1] = xi + ti
        dst[b, 0] = xr - tr
        dst[b, 1] = xi - ti


def ell_spmv(cols, vals, x, y):
    # sparse matrix times vector, ELLPACK layout stored column-major (cols[k, row]): the
    # index and value loads are coalesced, the x loads random
    r = cuda.grid(1)
    if r < y.size:
        s = float32(0.0)
        for k in range(cols.shape[0]):
            s += vals[k, r] * x[cols[k, r]]
        y[r] = s


def maxpool3x3s2(x, y):
    # 2-D max pooling, 3x3 window, stride 2, no padding, per channel of a (C, H, W) tensor
    ox, oy, c = cuda.grid(3)
    if c < y.shape[0] and oy < y.shape[1] and ox < y.shape[2]:
        m = x[c, 2 * oy, 2 * ox]
        for dy in range(3):
            for dx in range(3):
                m = max(m, x[c, 2 * oy + dy, 2 * ox + dx])
        y[c, oy, ox] = m


def bilinear_resize(src, dst):
    # image resize with bilinear interpolation (half-pixel centres, edges clamped): each
    # output pixel gathers four neighbours at a non-integer scale
    j, i = cuda.grid(2)
    h = src.shape[0]
    w = src.shape[1]
    if i < dst.shape[0] and j < dst.shape[1]:
        sy = (float32(i) + float32(0.5)) * (float32(h) / float32(dst.shape[0])) - float32(0.5)
        sx = (float32(j) + float32(0.5)) * (float32(w) / float32(dst.shape[1])) - float32(0.5)
        sy = min(max(sy, float32(0.0)), float32(h - 1))
        sx = min(max(sx, float32(0.0)), float32(w - 1))
        y0 = int32(sy)
        x0 = int32(sx)
        y1 = min(y0 + 1, h - 1)
        x1 = min(x0 + 1, w - 1)
        fy = sy - float32(y0)
        fx = sx - float32(x0)
        top = src[y0, x0] + fx * (src[y0, x1] - src[y0, x0])
        bot = src[y1, x0] + fx * (src[y1, x1] - src[y1, x0])
        dst[i, j] = top + fy * (bot - top)


def kmeans_assign(pts, cent, lab):
    # the assignment step of k-means: the nearest of 16 centroids (8 dimensions, staged in
    # shared memory) for each point, by squared Euclidean distance
    sc = cuda.shared.array((16, 8), float32)
    t = cuda.threadIdx.x
    if t < 128:
        sc[t // 8, t % 8] = cent[t // 8, t % 8]
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < pts.shape[0]:
        p = cuda.local.array(8, float32)
        for d in range(8):
            p[d] = pts[i, d]
        best = float32(math.inf)
        arg = 0
        for k in range(16):
            s = float32(0.0)
            for d in range(8):
                e = p[d] - sc[k, d]
                s += e * e
            if s < best:
                best = s
                arg = k
        lab[i] = arg


def f64_rk4(y0, out, steps):
    # `steps` classical Runge-Kutta steps of the logistic equation y' = y (1 - y) in double
    # precision (the FP64 pipe), one independent initial value per thread
    i = cuda.grid(1)
    if i < y0.size:
        y = y0[i]
        h = float64(0.01)
        for _ in range(steps):
            k1 = y * (1.0 - y)
            u = y + 0.5 * h * k1
            k2 = u * (1.0 - u)
            u = y + 0.5 * h * k2
            k3 = u * (1.0 - u)
            u = y + h * k3
            k4 = u * (1.0 - u)
            y += h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out[i] = y


def hash_bits(keys, out, rounds):
    # an integer hash built from bit-manipulation instructions: xor-shift, a 32-bit multiply,
    # bit reversal (brev), population count (popc) and leading zeros (clz), `rounds` times
    i = cuda.grid(1)
    if i < keys.size:
        h = uint32(keys[i])
        for _ in range(rounds):
            h = uint32(h ^ (h >> uint32(16)))
            h = uint32(h * uint32(0x7FEB352D))
            h = uint32(cuda.brev(h) ^ (uint32(cuda.popc(h)) << uint32(8)) ^ uint32(cuda.clz(h)))
            h = uint32(h ^ (h >> uint32(15)))
            h = uint32(h * uint32(0x846CA68B))
        out[i] = int32(h)


def mandelbrot(counts, x0, y0, step, max_iter):
    # escape-time iteration counts: neighbouring pixels run very different trip counts, so
    # warps diverge and run as long as their slowest lane
    j, i = cuda.grid(2)
    if i < counts.shape[0] and j < counts.shape[1]:
        cr = x0 + float32(j) * step
        ci = y0 + float32(i) * step
        zr = float32(0.0)
        zi = float32(0.0)
        k = 0
        while k < max_iter and zr * zr + zi * zi <= float32(4.0):
            t = zr * zr - zi * zi + cr
            zi = float32(2.0) * zr * zi + ci
            zr = t
            k += 1
        counts[i, j] = k


CONV_BLOCK = 256   # conv1d_smem: outputs per block (= threads per block)
CONV_KMAX = 256    # conv1d_smem: the longest filter its shared arrays hold
CONV_WINDOW = 512  # conv1d_smem: CONV_BLOCK + CONV_KMAX (Numba wants one constant)


def csr_expand(rowptr, rowids):
    # CSR -> COO: every nonzero learns its row (one thread per row writes its own run of
    # entries: runs of random length, so a warp's stores are spread over 32 runs)
    r = cuda.grid(1)
    if r < rowptr.size - 1:
        for k in range(rowptr[r], rowptr[r + 1]):
            rowids[k] = r


def merge_path(a, b, out):
    # merge two sorted int32 arrays: thread t writes outputs 8t..8t+7, finding where its
    # diagonal crosses the merge path by a binary search over a and b, then merging 8 items
    na = a.size
    nb = b.size
    diag = cuda.grid(1) * 8
    if diag < na + nb:
        lo = max(0, diag - nb)
        hi = min(diag, na)
        while lo < hi:
            mid = (lo + hi) // 2
            if a[mid] <= b[diag - 1 - mid]:
                lo = mid + 1
            else:
                hi = mid
        i = lo
        j = diag - lo
        for k in range(8):
            if diag + k < na + nb:
                if j >= nb or (i < na and a[i] <= b[j]):
                    out[diag + k] = a[i]
                    i += 1
                else:
                    out[diag + k] = b[j]
                    j += 1


def pointer_chase(succ, w, end, total, hops):
    # `hops` steps along a linked list (one random cycle through all nodes) from every node,
    # summing the weights met: each load's address is the previous load's value
    i = cuda.grid(1)
    if i < succ.size:
        p = i
        s = 0
        for _ in range(hops):
            s += w[p]
            p = succ[p]
        end[i] = p
        total[i] = s


def bfs_level(rowptr, cols, level, out, cur):
    # one level of a top-down breadth-first search over a CSR graph: every vertex at level
    # `cur` marks its unvisited (-1) neighbours cur + 1 in `out` (a copy of `level`; threads
    # that mark the same vertex write the same value)
    v = cuda.grid(1)
    if v < level.size and level[v] == cur:
        for e in range(rowptr[v], rowptr[v + 1]):
            u = cols[e]
            if level[u] == -1:
                out[u] = cur + 1


def sobel_u8(img, out):
    # Sobel gradient magnitude |gx| + |gy| of an 8-bit image, clamped to 255 (border left 0)
    x, y = cuda.grid(2)
    h = img.shape[0]
    w = img.shape[1]
    if y >= 1 and y < h - 1 and x >= 1 and x < w - 1:
        a = int32(img[y - 1, x - 1])
        b = int32(img[y - 1, x])
        c = int32(img[y - 1, x + 1])
        d = int32(img[y, x - 1])
        f = int32(img[y, x + 1])
        g = int32(img[y + 1, x - 1])
        k = int32(img[y + 1, x])
        m = int32(img[y + 1, x + 1])
        gx = (c + 2 * f + m) - (a + 2 * d + g)
        gy = (g + 2 * k + m) - (a + 2 * b + c)
        out[y, x] = uint8(min(abs(gx) + abs(gy), 255))


def dgemm_tiled(a, b, c):
    # C = A B in double precision with 16x16 shared-memory tiles (the FP64 pipe, shared loads)
    sa = cuda.shared.array((TILE, TILE), float64)
    sb = cuda.shared.array((TILE, TILE), float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    kk = a.shape[1]
    acc = float64(0.0)
    for t in range((kk + TILE - 1) // TILE):
        ka = t * TILE + tx
        kb = t * TILE + ty
        sa[ty, tx] = a[row, ka] if row < a.shape[0] and ka < kk else 0.0
        sb[ty, tx] = b[kb, col] if kb < kk and col < b.shape[1] else 0.0
        cuda.syncthreads()
        for q in range(TILE):
            acc += sa[ty, q] * sb[q, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


def conv1d_smem(x, f, y):
    # valid 1-D correlation y[i] = sum_k f[k] x[i + k] with a long filter: the filter and the
    # block's input window (256 + K - 1 values) staged in shared memory
    sx = cuda.shared.array(CONV_WINDOW, float32)
    sf = cuda.shared.array(CONV_KMAX, float32)
    t = cuda.threadIdx.x
    kk = f.size
    base = cuda.blockIdx.x * CONV_BLOCK
    for j in range(t, kk, CONV_BLOCK):
        sf[j] = f[j]
    for j in range(t, CONV_BLOCK + kk - 1, CONV_BLOCK):
        sx[j] = x[base + j] if base + j < x.size else float32(0.0)
    cuda.syncthreads()
    i = base + t
    if i < y.size:
        s = float32(0.0)
        for k in range(kk):
            s += sf[k] * sx[t + k]
        y[i] = s


def find_first_vote(x, out, thresh):
    # the first column of each row above `thresh`, one warp per row: lanes test 32 columns at
    # a time, a ballot tells the warp whether any did and it stops early (-1: none)
    lane = cuda.threadIdx.x % 32
    row = cuda.grid(1) // 32
    if row < x.shape[0]:
        res = -1
        n = x.shape[1]
        for base in range(0, n, 32):
            j = base + lane
            hit = j < n and x[row, min(j, n - 1)] > thresh
            m = cuda.ballot_sync(0xFFFFFFFF, hit)
            if m != 0:
                res = base + cuda.ffs(m) - 1
                break
        if lane == 0:
            out[row] = res


def atomic_minmax(bucket, vals, mn, mx):
    # per-bucket minimum and maximum of int32 values by global atomicMin / atomicMax
    i = cuda.grid(1)
    if i < vals.size:
        b = bucket[i]
        v = vals[i]
        cuda.atomic.min(mn, b, v)
        cuda.atomic.max(mx, b, v)


QBLOCK = 256       # quant_int8_rows: threads per block (one block per row)
NEWTON_MAX = 100   # newton_cubic: the most Newton steps an element takes


def quant_int8_rows(x, q, scale):
    # symmetric int8 quantization with one scale per row: the block finds the row's largest
    # magnitude by a shared-memory tree, then writes round(x * 127 / absmax)
    sm = cuda.shared.array(QBLOCK, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = x.shape[1]
    m = float32(0.0)
    for j in range(t, n, QBLOCK):
        m = max(m, abs(x[row, j]))
    sm[t] = m
    cuda.syncthreads()
    s = QBLOCK // 2
    while s > 0:
        if t < s:
            sm[t] = max(sm[t], sm[t + s])
        cuda.syncthreads()
        s //= 2
    amax = sm[0]
    inv = float32(127.0) / amax if amax > 0 else float32(0.0)
    for j in range(t, n, QBLOCK):
        q[row, j] = int8(math.floor(x[row, j] * inv + float32(0.5)))
    if t == 0:
        scale[row] = amax / float32(127.0)


def sort8_network(x, y):
    # each thread sorts its own 8 consecutive floats with Batcher's odd-even merge network
    # (19 compare-exchanges on scalars: all in registers)
    i = cuda.grid(1)
    if i < x.size // 8:
        j = 8 * i
        v0, v1, v2, v3 = x[j], x[j + 1], x[j + 2], x[j + 3]
        v4, v5, v6, v7 = x[j + 4], x[j + 5], x[j + 6], x[j + 7]
        v0, v1 = min(v0, v1), max(v0, v1)
        v2, v3 = min(v2, v3), max(v2, v3)
        v4, v5 = min(v4, v5), max(v4, v5)
        v6, v7 = min(v6, v7), max(v6, v7)
        v0, v2 = min(v0, v2), max(v0, v2)
        v1, v3 = min(v1, v3), max(v1, v3)
        v4, v6 = min(v4, v6), max(v4, v6)
        v5, v7 = min(v5, v7), max(v5, v7)
        v1, v2 = min(v1, v2), max(v1, v2)
        v5, v6 = min(v5, v6), max(v5, v6)
        v0, v4 = min(v0, v4), max(v0, v4)
        v1, v5 = min(v1, v5), max(v1, v5)
        v2, v6 = min(v2, v6), max(v2, v6)
        v3, v7 = min(v3, v7), max(v3, v7)
        v2, v4 = min(v2, v4), max(v2, v4)
        v3, v5 = min(v3, v5), max(v3, v5)
        v1, v2 = min(v1, v2), max(v1, v2)
        v3, v4 = min(v3, v4), max(v3, v4)
        v5, v6 = min(v5, v6), max(v5, v6)
        y[j], y[j + 1], y[j + 2], y[j + 3] = v0, v1, v2, v3
        y[j + 4], y[j + 5], y[j + 6], y[j + 7] = v4, v5, v6, v7


def newton_cubic(x, t, s):
    # the real root of u^3 + u = s * x[i] by Newton's method from u = s * x[i], stopping when
    # the step is below 1e-6 of u: large |s x| takes many more steps (warps diverge)
    i = cuda.grid(1)
    if i < x.size:
        b = s * x[i]
        u = b
        for _ in range(NEWTON_MAX):
            du = (u * u * u + u - b) / (float32(3.0) * u * u + float32(1.0))
            u -= du
            if abs(du) <= float32(1e-6) * abs(u):
                break
        t[i] = u


def complex_mac(a, b, c, d):
    # d = c + a * b on complex numbers stored interleaved (re, im) in float32 arrays
    i = cuda.grid(1)
    if i < a.size // 2:
        ar = a[2 * i]
        ai = a[2 * i + 1]
        br = b[2 * i]
        bi = b[2 * i + 1]
        d[2 * i] = c[2 * i] + ar * br - ai * bi
        d[2 * i + 1] = c[2 * i + 1] + ar * bi + ai * br


def int4_gemv(w, scales, x, y):
    # y = dequant(W) x with W packed 8 signed 4-bit weights per int32 word (nibble - 8) and one
    # float scale per 64 weights of a row; one warp per row, reduced by shuffles
    lane = cuda.threadIdx.x % 32
    row = cuda.grid(1) // 32
    if row < w.shape[0]:
        acc = float32(0.0)
        for wi in range(lane, w.shape[1], 32):
            word = w[row, wi]
            part = float32(0.0)
            for k in range(8):
                part += float32(((word >> (4 * k)) & 15) - 8) * x[8 * wi + k]
            acc += scales[row, wi // 8] * part
        off = 16
        while off > 0:
            acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, off)
            off //= 2
        if lane == 0:
            y[row] = acc


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


RADIUS = 4         # box_rows_running: the window is 2 RADIUS + 1 columns, cut at the row's ends


def xform_points_aos(m, p, q):
    # q = M p for points stored as (n, 3) float32 (array of structures: 12 bytes a point);
    # M is a 3x3 matrix every thread reads (the same 9 words)
    i = cuda.grid(1)
    if i < p.shape[0]:
        x = p[i, 0]
        y = p[i, 1]
        z = p[i, 2]
        for r in range(3):
            q[i, r] = m[r, 0] * x + m[r, 1] * y + m[r, 2] * z


def box_rows_running(x, y):
    # a 1-D box filter along each row by a running sum, one thread per row: the window sum
    # gains the entering column and loses the leaving one (sequential, row-strided accesses
    # across a warp)
    r = cuda.grid(1)
    n = x.shape[1]
    if r < x.shape[0]:
        s = float32(0.0)
        for j in range(min(RADIUS, n)):
            s += x[r, j]
        for j in range(n):
            if j + RADIUS < n:
                s += x[r, j + RADIUS]
            if j - RADIUS - 1 >= 0:
                s -= x[r, j - RADIUS - 1]
            y[r, j] = s


def lut_u8(img, lut, out):
    # a 256-entry float lookup table applied to a byte image (tone curve): one byte in, a
    # data-dependent load from a 1 KiB table, four bytes out
    i = cuda.grid(1)
    if i < img.size:
        out[i] = lut[img[i]]


ROW = 65           # edit_distance_local: its local DP row holds second strings up to ROW - 1


def tridiag_thomas(a, b, c, d, cw, x):
    # a batch of tridiagonal systems (sub-diagonal a, diagonal b, super-diagonal c, right-hand
    # side d), one thread per system by the Thomas algorithm; arrays are (equations, systems)
    # so a warp's threads read consecutive words at each step; the forward sweep keeps its
    # modified super-diagonal in cw and the modified right-hand side in x, the backward sweep
    # turns x into the solution
    i = cuda.grid(1)
    m = b.shape[0]
    if i < b.shape[1]:
        cp = c[0, i] / b[0, i]
        dp = d[0, i] / b[0, i]
        cw[0, i] = cp
        x[0, i] = dp
        for k in range(1, m):
            den = b[k, i] - a[k, i] * cp
            cp = c[k, i] / den
            dp = (d[k, i] - a[k, i] * dp) / den
            cw[k, i] = cp
            x[k, i] = dp
        xn = dp
        for k in range(m - 2, -1, -1):
            xn = x[k, i] - cw[k, i] * xn
            x[k, i] = xn


def edit_distance_local(s, t, out):
    # the Levenshtein distance of each string pair (s[i], t[i]) (bytes; lengths known only at
    # run time), one thread per pair: the dynamic-programming row lives in a per-thread local
    # array indexed by the loop counter
    i = cuda.grid(1)
    if i < s.shape[0]:
        n = s.shape[1]
        m = t.shape[1]
        row = cuda.local.array(ROW, int32)
        for j in range(m + 1):
            row[j] = j
        for p in range(1, n + 1):
            diag = row[0]
            row[0] = p
            ch = s[i, p - 1]
            for j in range(1, m + 1):
                up = row[j]
                cost = 0 if ch == t[i, j - 1] else 1
                row[j] = min(up + 1, row[j - 1] + 1, diag + cost)
                diag = up
        out[i] = row[m]


def bitrev_rows(x, y, bits):
    # the bit-reversal permutation of each row of 2^bits floats (an FFT's input reordering):
    # reads are consecutive, each warp's 32 writes land 2^(bits-5) words apart and more
    i = cuda.grid(1)
    if i < x.size:
        r = i >> bits
        j = uint32(i & (x.shape[1] - 1))
        y[r, cuda.brev(j) >> uint32(32 - bits)] = x[r, j]


def im2col3x3(img, cols):
    # the im2col lowering of a 3x3, stride-1, zero-padded convolution of a (C, H, W) image:
    # cols[c 9 + ky 3 + kx, y W + x] = img[c, y + ky - 1, x + kx - 1], one thread per output
    # element (integer divisions by the run-time extents), each input read for nine outputs
    i = cuda.grid(1)
    h = img.shape[1]
    w = img.shape[2]
    hw = h * w
    if i < cols.size:
        row = i // hw
        p = i - row * hw
        c = row // 9
        k = row - c * 9
        py = p // w
        y = py + k // 3 - 1
        x = p - py * w + k % 3 - 1
        v = float32(0.0)
        if 0 <= y < h and 0 <= x < w:
            v = img[c, y, x]
        cols[row, p] = v


def floyd_warshall_k(d, out, k):
    # one pivot step of Floyd-Warshall all-pairs shortest paths, out of place (the two
    # buffers swap between pivots): out[i, j] = min(d[i, j], d[i, k] + d[k, j]); a 2-D grid,
    # each warp reads a row piece, one word of column k (the same in every lane) and row k
    j, i = cuda.grid(2)
    n = d.shape[0]
    if i < n and j < n:
        out[i, j] = min(d[i, j], d[i, k] + d[k, j])


def nv12_to_rgb(y, uv, rgb):
    # a video frame's NV12 planes (luma y (H, W), interleaved chroma uv (H/2, W) at half
    # resolution) to packed 8-bit RGB (H, W, 3) by BT.601's integer formulas (8-bit fixed
    # point, saturated); one thread per pixel, four pixels share a chroma pair
    x, r = cuda.grid(2)
    if r < y.shape[0] and x < y.shape[1]:
        c = 298 * (int32(y[r, x]) - 16) + 128
        cx = (x >> 1) << 1
        d = int32(uv[r >> 1, cx]) - 128
        e = int32(uv[r >> 1, cx + 1]) - 128
        rgb[r, x, 0] = min(max((c + 409 * e) >> 8, 0), 255)
        rgb[r, x, 1] = min(max((c - 100 * d - 208 * e) >> 8, 0), 255)
        rgb[r, x, 2] = min(max((c + 516 * d) >> 8, 0), 255)


def black_scholes(s, k, t, r, v, call, put):
    # European call and put prices by Black-Scholes for arrays of spot s, strike k and
    # expiry t (rate r and volatility v shared), the normal CDF from erf: one thread per
    # option, log, sqrt, exp and two erf (libdevice) per thread
    i = cuda.grid(1)
    if i < s.shape[0]:
        st = s[i]
        kt = k[i]
        tt = t[i]
        vs = v * math.sqrt(tt)
        d1 = (math.log(st / kt) + (r + float32(0.5) * v * v) * tt) / vs
        d2 = d1 - vs
        n1 = float32(0.5) * (float32(1.0) + math.erf(d1 * float32(0.70710678)))
        n2 = float32(0.5) * (float32(1.0) + math.erf(d2 * float32(0.70710678)))
        disc = kt * math.exp(-r * tt)
        call[i] = st * n1 - disc * n2
        put[i] = disc * (float32(1.0) - n2) - st * (float32(1.0) - n1)


def lif_step(v, refr, cur, v_out, refr_out, spike, dt_tau, v_th, t_ref):
    # one time step of a population of leaky integrate-and-fire neurons (rest and reset at
    # 0): a neuron in its refractory period counts down and stays at reset; the others
    # integrate their input current, v += dt/tau (I - v), and fire (spike, reset, refractory
    # for t_ref steps) on reaching the threshold; one thread per neuron, state out of place
    i = cuda.grid(1)
    if i < v.shape[0]:
        r = refr[i]
        if r > 0:
            v_out[i] = float32(0.0)
            refr_out[i] = r - 1
            spike[i] = uint8(0)
        else:
            v0 = v[i]
            vn = v0 + dt_tau * (cur[i] - v0)
            if vn >= v_th:
                v_out[i] = float32(0.0)
                refr_out[i] = t_ref
                spike[i] = uint8(1)
            else:
                v_out[i] = vn
                refr_out[i] = 0
                spike[i] = uint8(0)


def cic_deposit(px, py, q, grid):
    # cloud-in-cell charge deposition of a particle-in-cell step: each particle (one thread)
    # spreads its charge over the four grid nodes around it with bilinear weights, four
    # float atomic adds into a (ny, nx) grid
    i = cuda.grid(1)
    if i < px.shape[0]:
        x = px[i]
        y = py[i]
        ix = min(int32(x), grid.shape[1] - 2)
        iy = min(int32(y), grid.shape[0] - 2)
        fx = x - float32(ix)
        fy = y - float32(iy)
        w = q[i]
        gx = float32(1.0) - fx
        gy = float32(1.0) - fy
        cuda.atomic.add(grid, (iy, ix), w * gx * gy)
        cuda.atomic.add(grid, (iy, ix + 1), w * fx * gy)
        cuda.atomic.add(grid, (iy + 1, ix), w * gx * fy)
        cuda.atomic.add(grid, (iy + 1, ix + 1), w * fx * fy)


def haversine(lat1, lon1, lat2, lon2, dist):
    # great-circle distance in km between pairs of (latitude, longitude) points in degrees
    # by the haversine formula: sin, cos, sqrt and asin (libdevice) per pair
    i = cuda.grid(1)
    if i < dist.shape[0]:
        d2r = float32(math.pi / 180.0)
        p1 = lat1[i] * d2r
        p2 = lat2[i] * d2r
        sa = math.sin((p2 - p1) * float32(0.5))
        so = math.sin((lon2[i] - lon1[i]) * d2r * float32(0.5))
        a = sa * sa + math.cos(p1) * math.cos(p2) * so * so
        dist[i] = float32(2.0 * 6371.0) * math.asin(math.sqrt(min(a, float32(1.0))))



# family: (function, Numba signature)
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
    "radix_digits": (radix_digits, "void(int32[:], int32[:,:], int32)"),
    "gemv_colmajor": (gemv_colmajor, "void(float32[:,:], float32[:], float32[:])"),
    "inv4x4_batch": (inv4x4_batch, "void(float32[:,:], float32[:,:])"),
    "fft_radix2": (fft_radix2, "void(float32[:,:], float32[:,:], int32)"),
    "ell_spmv": (ell_spmv, "void(int32[:,:], float32[:,:], float32[:], float32[:])"),
    "maxpool3x3s2": (maxpool3x3s2, "void(float32[:,:,:], float32[:,:,:])"),
    "bilinear_resize": (bilinear_resize, "void(float32[:,:], float32[:,:])"),
    "kmeans_assign": (kmeans_assign, "void(float32[:,:], float32[:,:], int32[:])"),
    "f64_rk4": (f64_rk4, "void(float64[:], float64[:], int32)"),
    "hash_bits": (hash_bits, "void(int32[:], int32[:], int32)"),
    "mandelbrot": (mandelbrot, "void(int32[:,:], float32, float32, float32, int32)"),
    "csr_expand": (csr_expand, "void(int32[:], int32[:])"),
    "merge_path": (merge_path, "void(int32[:], int32[:], int32[:])"),
    "pointer_chase": (pointer_chase, "void(int32[:], int32[:], int32[:], int32[:], int32)"),
    "bfs_level": (bfs_level, "void(int32[:], int32[:], int32[:], int32[:], int32)"),
    "sobel_u8": (sobel_u8, "void(uint8[:,:], uint8[:,:])"),
    "dgemm_tiled": (dgemm_tiled, "void(float64[:,:], float64[:,:], float64[:,:])"),
    "conv1d_smem": (conv1d_smem, "void(float32[:], float32[:], float32[:])"),
    "find_first_vote": (find_first_vote, "void(float32[:,:], int32[:], float32)"),
    "atomic_minmax": (atomic_minmax, "void(int32[:], int32[:], int32[:], int32[:])"),
    "quant_int8_rows": (quant_int8_rows, "void(float32[:,:], int8[:,:], float32[:])"),
    "sort8_network": (sort8_network, "void(float32[:], float32[:])"),
    "newton_cubic": (newton_cubic, "void(float32[:], float32[:], float32)"),
    "complex_mac": (complex_mac, "void(float32[:], float32[:], float32[:], float32[:])"),
    "int4_gemv": (int4_gemv, "void(int32[:,:], float32[:,:], float32[:], float32[:])"),
    "life_u8": (life_u8, "void(uint8[:,:], uint8[:,:])"),
    "bsearch_keys": (bsearch_keys, "void(int32[:], int32[:], int32[:])"),
    "rownorm_f64": (rownorm_f64, "void(float64[:,:], float64[:,:])"),
    "bitmap_dot": (bitmap_dot, "void(int32[:], float32[:], float32[:])"),
    "xform_points_aos": (xform_points_aos, "void(float32[:,:], float32[:,:], float32[:,:])"),
    "box_rows_running": (box_rows_running, "void(float32[:,:], float32[:,:])"),
    "lut_u8": (lut_u8, "void(uint8[:], float32[:], float32[:])"),
    "tridiag_thomas": (tridiag_thomas, "void(float32[:,:], float32[:,:], float32[:,:], "
                                       "float32[:,:], float32[:,:], float32[:,:])"),
    "edit_distance_local": (edit_distance_local, "void(uint8[:,:], uint8[:,:], int32[:])"),
    "bitrev_rows": (bitrev_rows, "void(float32[:,:], float32[:,:], int32)"),
    "im2col3x3": (im2col3x3, "void(float32[:,:,:], float32[:,:])"),
    "floyd_warshall_k": (floyd_warshall_k, "void(float32[:,:], float32[:,:], int32)"),
    "nv12_to_rgb": (nv12_to_rgb, "void(uint8[:,:], uint8[:,:], uint8[:,:,:])"),
    "black_scholes": (black_scholes, "void(float32[:], float32[:], float32[:], float32, "
                                     "float32, float32[:], float32[:])"),
    "lif_step": (lif_step, "void(float32[:], int32[:], float32[:], float32[:], int32[:], "
                           "uint8[:], float32, float32, int32)"),
    "cic_deposit": (cic_deposit, "void(float32[:], float32[:], float32[:], float32[:,:])"),
    "haversine": (haversine, "void(float32[:], float32[:], float32[:], float32[:], "
                             "float32[:])"),
}
