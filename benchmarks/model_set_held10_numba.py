"""Numba kernels of the tenth held-out group (held10) of the model benchmark set
(benchmarks/model_set_held10.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine;
tests/test_model_set.py compiles them with compile_ptx and runs them on ptxgen's emulator at
small sizes.
"""
import math

from numba import cuda, float32, int32


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


# name: (function, Numba signature)
KERNELS = {
    "floyd_warshall_k": (floyd_warshall_k, "void(float32[:,:], float32[:,:], int32)"),
    "nv12_to_rgb": (nv12_to_rgb, "void(uint8[:,:], uint8[:,:], uint8[:,:,:])"),
    "black_scholes": (black_scholes, "void(float32[:], float32[:], float32[:], float32, "
                                     "float32, float32[:], float32[:])"),
}
