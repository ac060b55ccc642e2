"""Numba kernels of the sixth held-out group (held6) of the model benchmark set
(benchmarks/model_set_held6.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine (the PTX
it keeps is the PTX that ran); tests/test_model_set.py compiles them with compile_ptx and runs
them on ptxgen's emulator at small sizes.
"""
import math

from numba import cuda, float32, int8

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


# name: (function, Numba signature)
KERNELS = {
    "quant_int8_rows": (quant_int8_rows, "void(float32[:,:], int8[:,:], float32[:])"),
    "sort8_network": (sort8_network, "void(float32[:], float32[:])"),
    "newton_cubic": (newton_cubic, "void(float32[:], float32[:], float32)"),
    "complex_mac": (complex_mac, "void(float32[:], float32[:], float32[:], float32[:])"),
    "int4_gemv": (int4_gemv, "void(int32[:,:], float32[:,:], float32[:], float32[:])"),
}
