"""Numba kernels of the eighth held-out group (held8) of the model benchmark set
(benchmarks/model_set_held8.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine;
tests/test_model_set.py compiles them with compile_ptx and runs them on ptxgen's emulator at
small sizes.
"""
from numba import cuda, float32

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


# name: (function, Numba signature)
KERNELS = {
    "xform_points_aos": (xform_points_aos, "void(float32[:,:], float32[:,:], float32[:,:])"),
    "box_rows_running": (box_rows_running, "void(float32[:,:], float32[:,:])"),
    "lut_u8": (lut_u8, "void(uint8[:], float32[:], float32[:])"),
}
