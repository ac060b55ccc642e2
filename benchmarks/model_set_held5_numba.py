"""Numba kernels of the fifth held-out group (held5) of the model benchmark set
(benchmarks/model_set_held5.py): kinds of kernel in none of the other parts, written the way a
Numba user would write them, not tuned. model_set.py compiles them on the GPU machine (the PTX
it keeps is the PTX that ran); tests/test_model_set.py compiles them with compile_ptx and runs
them on ptxgen's emulator at small sizes.
"""
from numba import cuda, float32, float64, int32, uint8

TILE = 16          # dgemm_tiled's square shared-memory tile
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


# name: (function, Numba signature)
KERNELS = {
    "csr_expand": (csr_expand, "void(int32[:], int32[:])"),
    "merge_path": (merge_path, "void(int32[:], int32[:], int32[:])"),
    "pointer_chase": (pointer_chase, "void(int32[:], int32[:], int32[:], int32[:], int32)"),
    "bfs_level": (bfs_level, "void(int32[:], int32[:], int32[:], int32[:], int32)"),
    "sobel_u8": (sobel_u8, "void(uint8[:,:], uint8[:,:])"),
    "dgemm_tiled": (dgemm_tiled, "void(float64[:,:], float64[:,:], float64[:,:])"),
    "conv1d_smem": (conv1d_smem, "void(float32[:], float32[:], float32[:])"),
    "find_first_vote": (find_first_vote, "void(float32[:,:], int32[:], float32)"),
    "atomic_minmax": (atomic_minmax, "void(int32[:], int32[:], int32[:], int32[:])"),
}
