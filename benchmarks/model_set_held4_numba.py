"""Numba kernels of the fourth held-out group (held4) of the model benchmark set
(benchmarks/model_set_held4.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine (the PTX
it keeps is the PTX that ran); tests/test_model_set.py compiles them with compile_ptx and runs
them on ptxgen's emulator at small sizes.
"""
import math

from numba import cuda, float32, float64, int32, uint32


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


# name: (function, Numba signature)
KERNELS = {
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
}
