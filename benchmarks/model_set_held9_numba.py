"""Numba kernels of the ninth held-out group (held9) of the model benchmark set
(benchmarks/model_set_held9.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine;
tests/test_model_set.py compiles them with compile_ptx and runs them on ptxgen's emulator at
small sizes.
"""
from numba import cuda, float32, int32, uint32

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


# name: (function, Numba signature)
KERNELS = {
    "tridiag_thomas": (tridiag_thomas, "void(float32[:,:], float32[:,:], float32[:,:], "
                                       "float32[:,:], float32[:,:], float32[:,:])"),
    "edit_distance_local": (edit_distance_local, "void(uint8[:,:], uint8[:,:], int32[:])"),
    "bitrev_rows": (bitrev_rows, "void(float32[:,:], float32[:,:], int32)"),
    "im2col3x3": (im2col3x3, "void(float32[:,:,:], float32[:,:])"),
}
