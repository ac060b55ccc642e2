"""Numba families of the model benchmark set: per family its sizes (size label and parameters,
in the collect's order), its launch and its check, as one record (model_common.family).

A setup takes the array interface `g` (model_set.Gpu: torch tensors on the GPU; HostArrays:
numpy on the CPU, so the CPU tests run the very same launch at a small size on ptxgen's
emulator) and the case, and gives (args, grid, block, check, {argument index: init}); the
kernels are model_numba.KERNELS[family]. Checks compare with float64 (or exact integer) numpy
references, over a slice where the whole would cost more than the kernel (the result is the
relative error, or the count or share of wrong elements: 0 for exact results).
"""
import math

import numpy as np

from model_common import (SMS_X8, array_module, brev32, cast, copy_array, double, int_out, registry,
                          rel, sort_values, wrong)

family = registry("numba")

def hash_bits_ref(keys, rounds):
    """hash_bits in numpy uint32 arithmetic (wrapping multiplies, exact)."""
    h = np.asarray(keys).astype(np.int64).astype(np.uint32)
    for _ in range(rounds):
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x7FEB352D)
        bits = np.frexp(h.astype(np.float64))[1]          # bit length (0 for 0)
        clz = (32 - bits).astype(np.uint32)
        h = brev32(h) ^ (np.bitwise_count(h).astype(np.uint32) << np.uint32(8)) ^ clz
        h = h ^ (h >> np.uint32(15))
        h = h * np.uint32(0x846CA68B)
    return h.view(np.int32)


def _cycle(g, n):
    """succ of a linked list that runs once through all n nodes in a random order."""
    xp = array_module(g.rand(1))
    perm = xp.argsort(g.rand(n))
    succ = copy_array(perm)
    succ[perm] = xp.roll(perm, -1)
    return cast(succ, "int32")


def _offsets(lens):
    """CSR row offsets: 0, then the running sum of the row lengths (int32)."""
    xp = array_module(lens)
    return cast(xp.concatenate([lens[:1] * 0, xp.cumsum(lens, 0)]), "int32")


def newton_ref(b):
    """The real root of u^3 + u = b in float64 (Newton from u = b, run to convergence)."""
    u = np.asarray(b, np.float64).copy()
    for _ in range(200):
        u -= (u ** 3 + u - b) / (3 * u * u + 1)
    return u


KEY_HIGH = 1 << 30      # bsearch_keys: table entries and keys are drawn from [0, KEY_HIGH)


def life_ref(a):
    """One Game of Life step of a 0/1 grid, cells beyond the edge dead."""
    a = np.asarray(a, np.int64)
    p = np.pad(a, 1)
    m, n = a.shape
    s = sum(p[1 + di:1 + di + m, 1 + dj:1 + dj + n] for di in (-1, 0, 1) for dj in (-1, 0, 1)
            if di or dj)
    return ((s == 3) | ((s == 2) & (a == 1))).astype(np.uint8)


def box_ref(x, radius):
    """Each row's sums over columns j - radius .. j + radius (cut at the row's ends), float64."""
    x = np.asarray(x, np.float64)
    n = x.shape[1]
    cs = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, 1)], 1)
    j = np.arange(n)
    return cs[:, np.minimum(j + radius + 1, n)] - cs[:, np.maximum(j - radius, 0)]


ALPHABET = 4           # edit_distance_local: bytes drawn from [0, ALPHABET) (DNA letters)
EXTRA = 4              # edit_distance_local: the second strings are this much longer


def bitrev_index(bits):
    """The bit-reversed position of each of 2^bits indices."""
    return (brev32(np.arange(1 << bits)) >> np.uint32(32 - bits)).astype(np.int64)


def edit_ref(s, t):
    """The Levenshtein distance of each row pair of byte arrays s, t (vectorised over rows)."""
    s, t = np.asarray(s), np.asarray(t)
    row = np.tile(np.arange(t.shape[1] + 1), (len(s), 1))
    for p in range(1, s.shape[1] + 1):
        prev, row = row, row.copy()
        row[:, 0] = p
        for j in range(1, t.shape[1] + 1):
            cost = s[:, p - 1] != t[:, j - 1]
            row[:, j] = np.minimum(np.minimum(prev[:, j], row[:, j - 1]) + 1,
                                   prev[:, j - 1] + cost)
    return row[:, -1].astype(np.int32)


def im2col_ref(img):
    """The (C 9, H W) im2col matrix of a 3x3, stride-1, zero-padded convolution of img."""
    img = np.asarray(img)
    ch, h, w = img.shape
    pad = np.pad(img, ((0, 0), (1, 1), (1, 1)))
    return np.stack([pad[:, ky:ky + h, kx:kx + w] for ky in range(3) for kx in range(3)],
                    1).reshape(ch * 9, h * w)


def thomas_ref(a, b, c, d):
    """The solutions of the tridiagonal systems in the columns of (a, b, c, d), float64."""
    a, b, c, d = (np.asarray(v, np.float64) for v in (a, b, c, d))
    cp, dp = np.empty_like(b), np.empty_like(b)
    cp[0], dp[0] = c[0] / b[0], d[0] / b[0]
    for k in range(1, len(b)):
        den = b[k] - a[k] * cp[k - 1]
        cp[k], dp[k] = c[k] / den, (d[k] - a[k] * dp[k - 1]) / den
    x = np.empty_like(b)
    x[-1] = dp[-1]
    for k in range(len(b) - 2, -1, -1):
        x[k] = dp[k] - cp[k] * x[k + 1]
    return x


RATE, VOL = 0.02, 0.30     # black_scholes: the riskless rate and the volatility


def black_scholes_ref(s, k, t):
    """(call, put) European prices, float64."""
    s, k, t = (np.asarray(a, np.float64) for a in (s, k, t))
    erf = np.frompyfunc(math.erf, 1, 1)
    vs = VOL * np.sqrt(t)
    d1 = (np.log(s / k) + (RATE + 0.5 * VOL * VOL) * t) / vs
    n1, n2 = (0.5 * (1 + erf(d / np.sqrt(2)).astype(np.float64)) for d in (d1, d1 - vs))
    disc = k * np.exp(-RATE * t)
    return s * n1 - disc * n2, disc * (1 - n2) - s * (1 - n1)


def nv12_ref(y, uv):
    """BT.601 integer NV12 -> RGB (H, W, 3) uint8 of planes y (H, W) and uv (H/2, W)."""
    y, uv = np.asarray(y, np.int32), np.asarray(uv, np.int32)
    up = np.repeat(uv.reshape(uv.shape[0], -1, 2), 2, 0)
    d = np.repeat(up[..., 0], 2, 1)[:y.shape[0]] - 128
    e = np.repeat(up[..., 1], 2, 1)[:y.shape[0]] - 128
    c = 298 * (y - 16) + 128
    rgb = np.stack([(c + 409 * e) >> 8, (c - 100 * d - 208 * e) >> 8, (c + 516 * d) >> 8], -1)
    return np.clip(rgb, 0, 255).astype(np.uint8)


DT_TAU, V_TH, T_REF = 0.1, 1.0, 3     # lif_step: dt / tau, threshold, refractory steps
LIF_MARGIN = 1e-5          # lif_step: neurons this close to the threshold are not judged


def cic_ref(px, py, q, ny, nx):
    """The (ny, nx) grid of charges q deposited by cloud-in-cell weights, float64."""
    x, y, q = (np.asarray(a, np.float64) for a in (px, py, q))
    ix = np.minimum(np.trunc(x).astype(np.int64), nx - 2)
    iy = np.minimum(np.trunc(y).astype(np.int64), ny - 2)
    fx, fy = x - ix, y - iy
    grid = np.zeros(ny * nx)
    for dy, dx, w in ((0, 0, (1 - fx) * (1 - fy)), (0, 1, fx * (1 - fy)),
                      (1, 0, (1 - fx) * fy), (1, 1, fx * fy)):
        grid += np.bincount((iy + dy) * nx + ix + dx, q * w, ny * nx)
    return grid.reshape(ny, nx)


def haversine_ref(lat1, lon1, lat2, lon2):
    """Great-circle distances in km, float64."""
    p1, l1, p2, l2 = (np.radians(np.asarray(a, np.float64)) for a in (lat1, lon1, lat2, lon2))
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin((l2 - l1) / 2) ** 2
    return 2 * 6371.0 * np.arcsin(np.sqrt(np.minimum(a, 1.0)))


def lif_ref(v, refr, cur):
    """(v_out, refr_out, spike, judged) of one LIF step in float64; judged: the neurons not
    within LIF_MARGIN of the threshold (float32 rounding may go either way there)."""
    v, cur = np.asarray(v, np.float64), np.asarray(cur, np.float64)
    refr = np.asarray(refr, np.int64)
    active = refr <= 0
    vn = v + float(np.float32(DT_TAU)) * (cur - v)
    fire = active & (vn >= V_TH)
    v_out = np.where(active & ~fire, vn, 0.0)
    refr_out = np.where(active, np.where(fire, T_REF, 0), refr - 1)
    return v_out, refr_out, fire.astype(np.uint8), ~(active & (np.abs(vn - V_TH) < LIF_MARGIN))


@family(sizes=[
        ('n=1048576', {'n': 1048576}),
        ('n=4194304', {'n': 4194304}),
        ('n=16777216', {'n': 16777216}),
        ('n=67108864', {'n': 67108864})])
def saxpy(g, c):
    check, inits = None, {}
    x, y, o = g.randn(c["n"]), g.randn(c["n"]), g.empty(c["n"])
    args, grid, block = [2.5, x, y, o], ((c["n"] + 255) // 256,), (256,)
    check = lambda: float((o - (2.5 * x + y)).norm() / (2.5 * x + y).norm())  # noqa: E731
    return args, grid, block, check, inits


@family(name='matmul_shared', sizes=[
        ('512^3', {'m': 512}),
        ('1024^3', {'m': 1024}),
        ('2048^3', {'m': 2048})])
@family(name='matmul_naive', sizes=[('512^3', {'m': 512}), ('1024^3', {'m': 1024})])
def matmul_naive_shared(g, c):
    fam = c["family"]
    check, inits = None, {}
    m = c["m"]
    A, B, C = g.randn(m, m), g.randn(m, m), g.empty(m, m)
    args = [A, B, C]
    if fam == "matmul_naive":
        grid, block = ((m + 15) // 16, (m + 15) // 16), (16, 16)
    else:
        grid, block = ((m + 15) // 16, (m + 15) // 16), (16, 16)

    def check():
        ref = A.double() @ B.double()
        return float((C.double() - ref).norm() / ref.norm())
    return args, grid, block, check, inits


@family(sizes=[
        ('n=4194304', {'n': 4194304}),
        ('n=16777216', {'n': 16777216}),
        ('n=67108864', {'n': 67108864})])
def block_reduce(g, c):
    torch = g.torch
    check, inits = None, {}
    x, t = g.randn(c["n"]), torch.zeros(1, device="cuda")
    args, grid, block = [x, t], (c["n"] // 256,), (256,)
    return args, grid, block, check, inits


@family(sizes=[
        ('2048^2', {'m': 2048}),
        ('4096^2', {'m': 4096}),
        ('8192^2', {'m': 8192})])
def transpose_padded(g, c):
    check, inits = None, {}
    m = c["m"]
    a, b = g.randn(m, m), g.empty(m, m)
    args, grid, block = [a, b], (m // 32, m // 32), (32, 32)
    check = lambda: float((b - a.t()).norm() / a.norm())  # noqa: E731
    return args, grid, block, check, inits


@family(sizes=[
        ('n=4194304', {'n': 4194304}),
        ('n=16777216', {'n': 16777216}),
        ('n=67108864', {'n': 67108864})])
def stencil1d(g, c):
    torch = g.torch
    check, inits = None, {}
    x, o = g.randn(c["n"]), torch.zeros(c["n"], device="cuda")
    args, grid, block = [x, o], ((c["n"] + 255) // 256,), (256,)
    return args, grid, block, check, inits


@family(sizes=[('2048^2', {'m': 2048}), ('8192^2', {'m': 8192})])
def stencil2d(g, c):
    torch = g.torch
    check, inits = None, {}
    m = c["m"]
    a, b = g.randn(m, m), torch.zeros(m, m, device="cuda")
    args, grid, block = [a, b], (m // 32, m // 8), (32, 8)
    return args, grid, block, check, inits


@family(name='hist_global', sizes=[('n=1048576', {'n': 1048576}), ('n=4194304', {'n': 4194304})])
@family(name='hist_shared', sizes=[('n=4194304', {'n': 4194304}), ('n=16777216', {'n': 16777216})])
def hist_shared_global(g, c):
    torch = g.torch
    fam = c["family"]
    check, inits = None, {}
    d = torch.randint(0, 256, (c["n"],), device="cuda", dtype=torch.int32)
    bins = torch.zeros(256, device="cuda", dtype=torch.int32)
    args = [d, bins]
    grid, block = ((132 * 8,) if fam == "hist_shared" else (c["n"] // 256,)), (256,)
    inits = {0: dict(kind="randint", low=0, high=256)}
    return args, grid, block, check, inits


@family(sizes=[('n=4194304', {'n': 4194304}), ('n=16777216', {'n': 16777216})])
def block_scan(g, c):
    check, inits = None, {}
    x, o = g.randn(c["n"]), g.empty(c["n"])
    args, grid, block = [x, o], (c["n"] // 1024,), (1024,)

    def check():
        ref = x.double().view(-1, 1024).cumsum(1).view(-1)
        return float((o.double() - ref).norm() / ref.norm())
    return args, grid, block, check, inits


@family(name='scatter', sizes=[('n=4194304', {'n': 4194304}), ('n=16777216', {'n': 16777216})])
@family(name='gather', sizes=[('n=4194304', {'n': 4194304}), ('n=16777216', {'n': 16777216})])
def gather_scatter(g, c):
    torch = g.torch
    check, inits = None, {}
    x, o = g.randn(c["n"]), g.empty(c["n"])
    idx = torch.randperm(c["n"], device="cuda", dtype=torch.int64).to(torch.int32)
    args, grid, block = [x, idx, o], (c["n"] // 256,), (256,)
    inits = {1: dict(kind="randperm")}
    return args, grid, block, check, inits


@family(sizes=[
        ('4096x1024', {'rows': 4096, 'cols': 1024}),
        ('8192x4096', {'rows': 8192, 'cols': 4096})])
def layernorm(g, c):
    torch = g.torch
    check, inits = None, {}
    x, y = g.randn(c["rows"], c["cols"]), g.empty(c["rows"], c["cols"])
    args, grid, block = [x, y, 1e-5], (c["rows"],), (256,)

    def check():
        ref = torch.nn.functional.layer_norm(x.double(), (c["cols"],), eps=1e-5)
        return float((y.double() - ref).norm() / ref.norm())
    return args, grid, block, check, inits


@family(sizes=[
        ('n=4194304 iters=64', {'n': 4194304, 'iters': 64}),
        ('n=16777216 iters=16', {'n': 16777216, 'iters': 16})])
def divergent(g, c):
    check, inits = None, {}
    x, o = g.randn(c["n"]), g.empty(c["n"])
    args, grid, block = [x, o, c["iters"]], (c["n"] // 256,), (256,)
    return args, grid, block, check, inits


@family(sizes=[('4096^2', {'m': 4096}), ('8192^2', {'m': 8192})])
def transpose_naive(g, c):
    check, inits = None, {}
    m = c["m"]
    a, b = g.randn(m, m), g.empty(m, m)
    args, grid, block = [a, b], (m // 32, m // 8), (32, 8)
    check = lambda: float((b - a.t()).norm() / a.norm())  # noqa: E731
    return args, grid, block, check, inits


@family(sizes=[('n=16777216', {'n': 16777216}), ('n=67108864', {'n': 67108864})])
def warp_reduce(g, c):
    check, inits = None, {}
    x, p = g.randn(c["n"]), g.empty(132 * 8 * 256 // 32)
    args, grid, block = [x, p], (132 * 8,), (256,)
    check = lambda: abs(float(p.double().sum() - x.double().sum())) / float(  # noqa: E731
        x.double().abs().sum())
    return args, grid, block, check, inits


@family(sizes=[
        ('rows=262144 nnz/row=16', {'rows': 262144, 'per_row': 16}),
        ('rows=1048576 nnz/row=16', {'rows': 1048576, 'per_row': 16})])
def spmv_csr(g, c):
    torch = g.torch
    check, inits = None, {}
    r, k = c["rows"], c["per_row"]
    rowptr = torch.arange(0, r * k + 1, k, device="cuda", dtype=torch.int32)
    cols = torch.randint(0, r, (r * k,), device="cuda", dtype=torch.int32)
    vals, x, y = g.randn(r * k), g.randn(r), g.empty(r)
    args, grid, block = [rowptr, cols, vals, x, y], ((r + 255) // 256,), (256,)
    inits = {0: dict(kind="arange", step=k), 1: dict(kind="randint", low=0, high=r)}

    def check():
        ref = (vals.double().view(r, k) * x.double()[cols.long()].view(r, k)).sum(1)
        return float((y.double() - ref).norm() / ref.norm())
    return args, grid, block, check, inits


@family(sizes=[
        ('16384x1024', {'rows': 16384, 'cols': 1024}),
        ('4096x4096', {'rows': 4096, 'cols': 4096})])
def row_scan(g, c):
    check, inits = None, {}
    r, cc = c["rows"], c["cols"]
    x, o = g.randn(r, cc), g.empty(r, cc)
    args, grid, block = [x, o], (r // 8,), (256,)

    def check():
        ref = x.double().cumsum(1)
        return float((o.double() - ref).norm() / ref.norm())
    return args, grid, block, check, inits


@family(sizes=[
        ('n=16777216 j=1', {'n': 16777216, 'j': 1, 'k': 2}),
        ('n=16777216 j=65536', {'n': 16777216, 'j': 65536, 'k': 131072})])
def bitonic_step(g, c):
    check, inits = None, {}
    n = c["n"]
    a, b = g.randn(n), g.empty(n)
    args, grid, block = [a, b, c["j"], c["k"]], (n // 256,), (256,)
    return args, grid, block, check, inits


@family(sizes=[('256^3', {'m': 256}), ('512^3', {'m': 512})])
def stencil3d(g, c):
    torch = g.torch
    check, inits = None, {}
    m = c["m"]
    a, b = g.randn(m, m, m), torch.zeros(m, m, m, device="cuda")
    args, grid, block = [a, b], (m // 32, m // 8, m), (32, 8, 1)
    return args, grid, block, check, inits


@family(sizes=[
        ('8192x1024', {'rows': 8192, 'cols': 1024}),
        ('2048x8192', {'rows': 2048, 'cols': 8192})])
def softmax_rows(g, c):
    torch = g.torch
    check, inits = None, {}
    r, cc = c["rows"], c["cols"]
    x, y = g.randn(r, cc), g.empty(r, cc)
    args, grid, block = [x, y], (r,), (256,)
    check = lambda: float((y - torch.softmax(x, 1)).norm() / torch.softmax(x, 1).norm())  # noqa
    return args, grid, block, check, inits


@family(sizes=[
        ('n=4194304 stride=2', {'n': 4194304, 'stride': 2}),
        ('n=4194304 stride=8', {'n': 4194304, 'stride': 8})])
def strided_copy(g, c):
    check, inits = None, {}
    n, st = c["n"], c["stride"]
    x, o = g.randn(n * st), g.empty(n)
    args, grid, block = [x, o, st], (n // 256,), (256,)
    check = lambda: float((o - x[::st]).norm() / x[::st].norm())  # noqa: E731
    return args, grid, block, check, inits


@family(sizes=[
        ('8192x2048', {'rows': 8192, 'cols': 2048}),
        ('131072x512', {'rows': 131072, 'cols': 512})], small={'rows': 19, 'cols': 100})
def gemv_warp(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    a, x, y = g.randn(r, k), g.randn(k), g.empty(r)
    args, grid, block = [a, x, y], ((r * 32 + 255) // 256,), (256,)

    def check():
        rows = g.host(a[:256]).astype(np.float64)
        return rel(g.host(y[:256]), rows @ g.host(x).astype(np.float64))
    return args, grid, block, check, inits


@family(sizes=[('2048^2', {'m': 2048}), ('8192^2', {'m': 8192})], small={'m': 37})
def conv3x3_smem(g, c):
    inits = {}
    m = c["m"]
    a, w, b = g.randn(m, m), g.randn(3, 3), g.empty(m, m)
    args, grid, block = [a, w, b], ((m + 15) // 16, (m + 15) // 16), (16, 16)

    def check():                      # the first 64 rows (zero padding above and beside)
        top = min(64, m)
        rows = g.host(a[:top + 1]).astype(np.float64)
        pad = np.zeros((top + 2, m + 2))
        pad[1:1 + len(rows), 1:-1] = rows
        wh = g.host(w).astype(np.float64)
        ref = sum(wh[dy, dx] * pad[dy:dy + top, dx:dx + m]
                  for dy in range(3) for dx in range(3))
        return rel(g.host(b[:top]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('words=16777216', {'n': 16777216}),
        ('words=67108864', {'n': 67108864})], small={'n': 3000})
def hist_warp_bytes(g, c):
    inits = {}
    words, bins = g.randint(-2 ** 31, 2 ** 31, c["n"]), g.zeros(256, integer=True)
    args, grid, block = [words, bins], (SMS_X8,), (256,)
    inits = {0: dict(kind="randint", low=-2 ** 31, high=2 ** 31)}

    def check():
        ref = np.bincount(np.ascontiguousarray(g.host(words)).view(np.uint8), minlength=256)
        return rel(g.host(bins), ref)
    return args, grid, block, check, inits


@family(name='sfu_trig', sizes=[
        ('n=16777216 reps=4', {'n': 16777216, 'reps': 4}),
        ('n=4194304 reps=64', {'n': 4194304, 'reps': 64})], small={'n': 1000, 'reps': 5})
@family(name='poly_horner', sizes=[
        ('n=16777216 reps=1', {'n': 16777216, 'reps': 1}),
        ('n=4194304 reps=64', {'n': 4194304, 'reps': 64})], small={'n': 1000, 'reps': 3})
def poly_horner_sfu_trig(g, c):
    fam, inits = c['family'], {}
    n, reps = c["n"], c["reps"]
    x = g.rand(n) * 2 - 1 if fam == "poly_horner" else g.randn(n)
    out = g.empty(n)
    args, grid, block = [x, out, reps], ((n + 255) // 256,), (256,)

    def check():
        v = g.host(x[:65536]).astype(np.float64)
        if fam == "poly_horner":
            coef = [0.5 * (-0.4) ** k for k in range(17)]
            for _ in range(reps):
                v = np.polyval(coef[::-1], v)
            return rel(g.host(out[:65536]), v)
        acc = np.zeros_like(v)
        for _ in range(reps):
            acc = 0.5 * acc + np.sin(v) * np.cos(acc)
            v = np.exp(-0.5 * v * v)
        return rel(g.host(out[:65536]), acc)
    return args, grid, block, check, inits


@family(sizes=[('n=8192', {'n': 8192}), ('n=32768', {'n': 32768})], small={'n': 300})
def nbody_tiled(g, c):
    inits = {}
    n = c["n"]
    pos, acc = g.rand(n, 4), g.empty(n, 3)
    args, grid, block = [pos, acc, 1e-3], ((n + 255) // 256,), (256,)

    def check():                      # the first 128 bodies against all n
        p = g.host(pos).astype(np.float64)
        d = p[None, :, :3] - p[:128, None, :3]
        inv = 1 / np.sqrt((d * d).sum(2) + 1e-3)
        ref = (d * (p[None, :, 3] * inv ** 3)[:, :, None]).sum(1)
        return rel(g.host(acc[:128]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('32x64x56x56', {'shape': (32, 64, 56, 56)}),
        ('16x256x64x64', {'shape': (16, 256, 64, 64)})], small={'shape': (2, 3, 5, 7)})
def permute_nchw(g, c):
    inits = {}
    nn, ch, h, w = c["shape"]
    total = nn * ch * h * w
    x, y = g.randn(total), g.empty(total)
    args, grid, block = [x, y, ch, h, w], ((total + 255) // 256,), (256,)

    def check():
        ref = g.host(x).reshape(nn, ch, h, w).transpose(0, 2, 3, 1).reshape(-1)
        return rel(g.host(y), ref)
    return args, grid, block, check, inits


@family(sizes=[('n=4194304', {'n': 4194304}), ('n=33554432', {'n': 33554432})], small={'n': 1000})
def block_compact(g, c):
    inits = {}
    n = c["n"]
    nb = (n + 255) // 256
    x, out, counts = g.randn(n), g.empty(nb * 256), g.zeros(nb, integer=True)
    args, grid, block = [x, out, counts, 0.0], (nb,), (256,)

    def check():
        xh, cnt = g.host(x), g.host(counts)
        ref_cnt = np.bincount(np.nonzero(xh > 0)[0] // 256, minlength=nb)
        if not np.array_equal(cnt, ref_cnt):
            return 1.0
        slots = np.arange(256)[None, :] < cnt[:, None]
        return rel(g.host(out).reshape(nb, 256)[slots], xh[xh > 0])
    return args, grid, block, check, inits


@family(sizes=[
        ('n=5000000 shift=0', {'n': 5000000, 'shift': 0}),
        ('n=50000003 shift=20', {'n': 50000003, 'shift': 20})], small={'n': 5000, 'shift': 4})
def radix_digits(g, c):
    inits = {}
    n, sh = c["n"], c["shift"]
    nb = (n + 2047) // 2048
    keys, counts = g.randint(0, 2 ** 31, n), int_out(g, nb, 16)
    args, grid, block = [keys, counts, sh], (nb,), (256,)
    inits = {0: dict(kind="randint", low=0, high=2 ** 31)}

    def check():                      # the first 512 blocks' rows, exactly
        k = min(nb, 512)
        kh = g.host(keys[:k * 2048]).astype(np.int64)
        ref = np.bincount(np.arange(len(kh)) // 2048 * 16 + ((kh >> sh) & 15),
                          minlength=k * 16).reshape(k, 16)
        return rel(g.host(counts[:k]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('300000x700', {'rows': 300000, 'cols': 700}),
        ('24000x4000', {'rows': 24000, 'cols': 4000})], small={'rows': 300, 'cols': 37})
def gemv_colmajor(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    at, x, y = g.randn(k, r), g.randn(k), g.empty(r)
    args, grid, block = [at, x, y], ((r + 255) // 256,), (256,)

    def check():
        ref = g.host(at[:, :256]).astype(np.float64).T @ g.host(x).astype(np.float64)
        return rel(g.host(y[:256]), ref)
    return args, grid, block, check, inits


@family(sizes=[('n=700000', {'n': 700000}), ('n=6000000', {'n': 6000000})], small={'n': 300})
def inv4x4_batch(g, c):
    inits = {}
    n = c["n"]
    a, out = g.rand(n, 16), g.empty(n, 16)
    args, grid, block = [a, out], ((n + 255) // 256,), (256,)

    def check():
        m = g.host(a[:4096]).astype(np.float64).reshape(-1, 4, 4) + 4 * np.eye(4)
        return rel(g.host(out[:4096]).reshape(-1, 4, 4), np.linalg.inv(m))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=6291456 half=1', {'n': 6291456, 'half': 1}),
        ('n=20971520 half=262144', {'n': 20971520, 'half': 262144})], small={'n': 96, 'half': 4})
def fft_radix2(g, c):
    inits = {}
    n, half = c["n"], c["half"]
    src, dst = g.randn(n, 2), g.empty(n, 2)
    args, grid, block = [src, dst, half], ((n // 2 + 255) // 256,), (256,)

    def check():                      # the first 65536 butterflies
        i = np.arange(min(n // 2, 65536))
        j = i % half
        a = (i - j) * 2 + j
        b = a + half
        s = g.host(src[:b[-1] + 1]).astype(np.float64)
        z = s[:, 0] + 1j * s[:, 1]
        t = np.exp(-1j * np.pi * j / half) * z[b]
        d = g.host(dst[:b[-1] + 1])
        return rel(np.concatenate([d[a], d[b]]),
                    np.concatenate([np.stack([(z[a] + t).real, (z[a] + t).imag], 1),
                                    np.stack([(z[a] - t).real, (z[a] - t).imag], 1)]))
    return args, grid, block, check, inits


@family(sizes=[
        ('rows=300007 nnz/row=12', {'rows': 300007, 'k': 12}),
        ('rows=2500000 nnz/row=24', {'rows': 2500000, 'k': 24})], small={'rows': 500, 'k': 5})
def ell_spmv(g, c):
    inits = {}
    r, k = c["rows"], c["k"]
    cols = g.randint(0, r, k * r).reshape(k, r)
    vals, x, y = g.randn(k, r), g.randn(r), g.empty(r)
    args, grid, block = [cols, vals, x, y], ((r + 255) // 256,), (256,)
    inits = {0: dict(kind="randint", low=0, high=r)}

    def check():
        ch = g.host(cols[:, :1024]).astype(np.int64)
        ref = (g.host(vals[:, :1024]).astype(np.float64)
               * g.host(x).astype(np.float64)[ch]).sum(0)
        return rel(g.host(y[:1024]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('64x225x225', {'shape': (64, 225, 225)}),
        ('96x999x1001', {'shape': (96, 999, 1001)})], small={'shape': (3, 21, 19)})
def maxpool3x3s2(g, c):
    inits = {}
    ch, h, w = c["shape"]
    ho, wo = (h - 3) // 2 + 1, (w - 3) // 2 + 1
    x, y = g.randn(ch, h, w), g.empty(ch, ho, wo)
    args, grid, block = [x, y], ((wo + 31) // 32, (ho + 7) // 8, ch), (32, 8, 1)

    def check():                      # the first two channels, exactly
        xh = g.host(x[:2])
        ref = np.max([xh[:, dy:dy + 2 * ho - 1:2, dx:dx + 2 * wo - 1:2]
                      for dy in range(3) for dx in range(3)], axis=0)
        return rel(g.host(y[:2]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('1080x1920->2561x4551', {'src': (1080, 1920), 'dst': (2561, 4551)}),
        ('4321x7777->2999x5003', {'src': (4321, 7777), 'dst': (2999, 5003)})],
        small={'src': (17, 23), 'dst': (40, 31)})
def bilinear_resize(g, c):
    inits = {}
    (h, w), (ho, wo) = c["src"], c["dst"]
    src, dst = g.randn(h, w), g.empty(ho, wo)
    args, grid, block = [src, dst], ((wo + 31) // 32, (ho + 7) // 8), (32, 8)

    def check():                      # the first 64 output rows
        s = g.host(src).astype(np.float64)
        rows = min(ho, 64)
        sy = np.clip((np.arange(rows) + 0.5) * (h / ho) - 0.5, 0, h - 1)[:, None]
        sx = np.clip((np.arange(wo) + 0.5) * (w / wo) - 0.5, 0, w - 1)[None, :]
        y0, x0 = np.floor(sy).astype(int), np.floor(sx).astype(int)
        y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
        fy, fx = sy - y0, sx - x0
        top = s[y0, x0] + fx * (s[y0, x1] - s[y0, x0])
        bot = s[y1, x0] + fx * (s[y1, x1] - s[y1, x0])
        return rel(g.host(dst[:rows]), top + fy * (bot - top))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=1000000 k=16 d=8', {'n': 1000000}),
        ('n=12000001 k=16 d=8', {'n': 12000001})], small={'n': 600}, tolerance=0.001)
def kmeans_assign(g, c):
    inits = {}
    n = c["n"]
    pts, cent, lab = g.randn(n, 8), g.randn(16, 8), int_out(g, n)
    args, grid, block = [pts, cent, lab], ((n + 255) // 256,), (256,)

    def check():                      # wrong labels: not the nearest centroid (float64)
        p = g.host(pts[:65536]).astype(np.float64)
        d2 = ((p[:, None, :] - g.host(cent).astype(np.float64)[None]) ** 2).sum(2)
        lh = g.host(lab[:65536]).astype(np.int64)
        if lh.min() < 0 or lh.max() > 15:
            return 1.0
        chosen = d2[np.arange(len(p)), lh]
        return float(np.mean(chosen > d2.min(1) * (1 + 1e-5) + 1e-6))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=1000000 steps=100', {'n': 1000000, 'steps': 100}),
        ('n=3000000 steps=600', {'n': 3000000, 'steps': 600})], small={'n': 300, 'steps': 7})
def f64_rk4(g, c):
    inits = {}
    n, steps = c["n"], c["steps"]
    y0, out = double(g.rand(n) * 0.98 + 0.01), double(g.empty(n))
    args, grid, block = [y0, out, steps], ((n + 255) // 256,), (256,)

    def check():
        y, h = g.host(y0[:65536]).copy(), 0.01
        f = lambda v: v * (1.0 - v)  # noqa: E731
        for _ in range(steps):
            k1 = f(y)
            k2 = f(y + 0.5 * h * k1)
            k3 = f(y + 0.5 * h * k2)
            k4 = f(y + h * k3)
            y = y + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        return rel(g.host(out[:65536]), y)
    return args, grid, block, check, inits


@family(sizes=[
        ('n=20000000 rounds=4', {'n': 20000000, 'rounds': 4}),
        ('n=5000000 rounds=256', {'n': 5000000, 'rounds': 256})], small={'n': 1000, 'rounds': 3})
def hash_bits(g, c):
    inits = {}
    n, rounds = c["n"], c["rounds"]
    keys, out = g.randint(-2 ** 31, 2 ** 31, n), int_out(g, n)
    args, grid, block = [keys, out, rounds], ((n + 255) // 256,), (256,)

    def check():                      # wrong hashes among the first 65536
        return wrong(g.host(out[:65536]), hash_bits_ref(g.host(keys[:65536]), rounds))
    return args, grid, block, check, inits


@family(sizes=[
        ('1000x1500 max_iter=256', {'h': 1000, 'w': 1500, 'it': 256}),
        ('3000x4001 max_iter=1000', {'h': 3000, 'w': 4001, 'it': 1000})],
        small={'h': 24, 'w': 40, 'it': 60}, tolerance=0.02)
def mandelbrot(g, c):
    inits = {}
    h, w, it = c["h"], c["w"], c["it"]
    step = 3.0 / w
    x0, y0 = -2.2, -0.5 * step * h
    counts = int_out(g, h, w)
    args, grid, block = [counts, x0, y0, step, it], ((w + 31) // 32, (h + 7) // 8), (32, 8)

    def check():                      # the 16 middle rows, in numpy float32
        f = np.float32
        r0 = max(0, h // 2 - 8)
        i = np.arange(r0, min(h, r0 + 16), dtype=np.float32)[:, None]
        cr = f(x0) + np.arange(w, dtype=np.float32)[None, :] * f(step)
        ci = f(y0) + i * f(step)
        zr, zi = np.zeros_like(cr * ci), np.zeros_like(cr * ci)
        k = np.zeros(zr.shape, np.int32)
        for _ in range(it):
            live = zr * zr + zi * zi <= f(4)
            if not live.any():
                break
            zr, zi = (np.where(live, zr * zr - zi * zi + cr, zr),
                      np.where(live, f(2) * zr * zi + ci, zi))
            k += live
        return wrong(g.host(counts[r0:r0 + len(i)]), k)
    return args, grid, block, check, inits


@family(sizes=[
        ('rows=1000003 nnz/row=12', {'rows': 1000003, 'hi': 25}),
        ('rows=4000037 nnz/row=30', {'rows': 4000037, 'hi': 61})], small={'rows': 300, 'hi': 9})
def csr_expand(g, c):
    inits = {}
    r, hi = c["rows"], c["hi"]
    rowptr = _offsets(g.randint(0, hi, r))
    nnz = int(g.host(rowptr[-1:])[0])
    rowids = int_out(g, nnz)
    args, grid, block = [rowptr, rowids], ((r + 255) // 256,), (256,)
    inits = {0: dict(kind="offsets", low=0, high=hi, total=nnz)}

    def check():                      # the first 65536 rows' entries, exactly
        k = min(r, 65536)
        ref = np.repeat(np.arange(k), np.diff(g.host(rowptr[:k + 1])))
        return wrong(g.host(rowids[:len(ref)]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('5000011+4999989', {'na': 5000011, 'nb': 4999989}),
        ('50000017+30000001', {'na': 50000017, 'nb': 30000001})], small={'na': 700, 'nb': 333})
def merge_path(g, c):
    inits = {}
    na, nb = c["na"], c["nb"]
    a = sort_values(g.randint(0, 2 ** 31 - 1, na))
    b = sort_values(g.randint(0, 2 ** 31 - 1, nb))
    out = int_out(g, na + nb)
    args, grid, block = [a, b, out], ((na + nb + 2047) // 2048,), (256,)
    inits = {i: dict(kind="randint", low=0, high=2 ** 31 - 1, sorted=True) for i in (0, 1)}

    def check():                      # the 65536 smallest and the 65536 largest, exactly
        k = min(na, nb, 65536)
        lo = np.sort(np.concatenate([g.host(a[:k]), g.host(b[:k])]))[:k]
        hi = np.sort(np.concatenate([g.host(a[na - k:]), g.host(b[nb - k:])]))[k:]
        return wrong(np.concatenate([g.host(out[:k]), g.host(out[na + nb - k:])]),
                      np.concatenate([lo, hi]))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=1000003 hops=16', {'n': 1000003, 'hops': 16}),
        ('n=20000003 hops=5', {'n': 20000003, 'hops': 5})], small={'n': 500, 'hops': 7})
def pointer_chase(g, c):
    inits = {}
    n, hops = c["n"], c["hops"]
    succ, w = _cycle(g, n), g.randint(0, 1000, n)
    end, total = int_out(g, n), int_out(g, n)
    args, grid, block = [succ, w, end, total, hops], ((n + 255) // 256,), (256,)
    inits = {0: dict(kind="randperm")}

    def check():                      # the first 65536 walks, exactly
        sh, wh = g.host(succ).astype(np.int64), g.host(w).astype(np.int64)
        p = np.arange(min(n, 65536))
        s = np.zeros_like(p)
        for _ in range(hops):
            s, p = s + wh[p], sh[p]
        return wrong(np.concatenate([g.host(end[:len(p)]), g.host(total[:len(p)])]),
                      np.concatenate([p, s]))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=2000003 deg=8', {'n': 2000003, 'hi': 17}),
        ('n=6000011 deg=10', {'n': 6000011, 'hi': 21})], small={'n': 400, 'hi': 7})
def bfs_level(g, c):
    inits = {}
    n, hi, cur = c["n"], c["hi"], 2
    rowptr = _offsets(g.randint(0, hi, n))
    nnz = int(g.host(rowptr[-1:])[0])
    cols, level = g.randint(0, n, nnz), g.randint(-1, cur + 1, n)
    out = copy_array(level)
    args, grid, block = [rowptr, cols, level, out, cur], ((n + 255) // 256,), (256,)
    inits = {0: dict(kind="offsets", low=0, high=hi, total=nnz),
             1: dict(kind="randint", low=0, high=n),
             2: dict(kind="randint", low=-1, high=cur + 1)}

    def check():                      # every vertex's new level, exactly
        lv, rp = g.host(level), g.host(rowptr).astype(np.int64)
        front = np.nonzero(lv == cur)[0]
        lens = rp[front + 1] - rp[front]
        starts = np.repeat(rp[front] - np.cumsum(lens) + lens, lens)
        nbr = g.host(cols)[starts + np.arange(lens.sum())]
        ref = lv.copy()
        ref[nbr[lv[nbr] == -1]] = cur + 1
        return wrong(g.host(out), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('2999x4001', {'h': 2999, 'w': 4001}),
        ('8191x12289', {'h': 8191, 'w': 12289})], small={'h': 70, 'w': 13})
def sobel_u8(g, c):
    inits = {}
    h, w = c["h"], c["w"]
    img = cast(g.randint(0, 256, h * w), "uint8").reshape(h, w)
    out = cast(g.zeros(h, w, integer=True), "uint8")
    args, grid, block = [img, out], ((w + 31) // 32, (h + 7) // 8), (32, 8)

    def check():                      # the first 64 rows, exactly
        # rows 1..rows-1 are interior (need rows + 1 <= h); rows - 1 once held the slice's
        # border 0 though the kernel computes it (run e: 1/64 of the pixels "wrong")
        rows = min(h - 1, 64)
        p = g.host(img[:rows + 1]).astype(np.int64)
        s = lambda dy, dx: p[1 + dy:rows + dy, 1 + dx:w - 1 + dx]  # noqa: E731
        gx = (s(-1, 1) + 2 * s(0, 1) + s(1, 1)) - (s(-1, -1) + 2 * s(0, -1) + s(1, -1))
        gy = (s(1, -1) + 2 * s(1, 0) + s(1, 1)) - (s(-1, -1) + 2 * s(-1, 0) + s(-1, 1))
        ref = np.zeros((rows, w), np.int64)
        ref[1:rows, 1:w - 1] = np.minimum(np.abs(gx) + np.abs(gy), 255)
        return wrong(g.host(out[:rows]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('999x777x1001', {'m': 999, 'k': 777, 'n': 1001}),
        ('2003x2001x1999', {'m': 2003, 'k': 2001, 'n': 1999})], small={'m': 37, 'k': 21, 'n': 29})
def dgemm_tiled(g, c):
    inits = {}
    m, k, n = c["m"], c["k"], c["n"]
    a, b, o = double(g.randn(m, k)), double(g.randn(k, n)), double(g.empty(m, n))
    args, grid, block = [a, b, o], ((n + 15) // 16, (m + 15) // 16), (16, 16)

    def check():                      # the first 64 rows
        return rel(g.host(o[:64]), g.host(a[:64]) @ g.host(b))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=4000037 taps=127', {'n': 4000037, 'taps': 127}),
        ('n=50000021 taps=31', {'n': 50000021, 'taps': 31})], small={'n': 700, 'taps': 45})
def conv1d_smem(g, c):
    inits = {}
    n, taps = c["n"], c["taps"]
    x, f, y = g.randn(n), g.randn(taps), g.empty(n - taps + 1)
    args, grid, block = [x, f, y], ((n - taps + 256) // 256,), (256,)

    def check():                      # the first 65536 outputs
        k = min(n - taps + 1, 65536)
        xh = g.host(x[:k + taps - 1]).astype(np.float64)
        ref = np.correlate(xh, g.host(f).astype(np.float64), mode="valid")
        return rel(g.host(y[:k]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('100000x1200 thresh=2.5', {'rows': 100000, 'cols': 1200, 'thresh': 2.5}),
        ('20000x6000 thresh=3.5', {'rows': 20000, 'cols': 6000, 'thresh': 3.5})],
        small={'rows': 40, 'cols': 300, 'thresh': 1.5})
def find_first_vote(g, c):
    inits = {}
    r, k, th = c["rows"], c["cols"], c["thresh"]
    x, out = g.randn(r, k), int_out(g, r)
    args, grid, block = [x, out, th], ((r * 32 + 255) // 256,), (256,)
    inits = {0: dict(kind="randn")}   # the values decide where each warp stops

    def check():                      # wrong indices among the first 4096 rows
        above = g.host(x[:4096]) > np.float32(th)
        ref = np.where(above.any(1), above.argmax(1), -1)
        return wrong(g.host(out[:len(ref)]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('n=10000019 buckets=1000', {'n': 10000019, 'buckets': 1000}),
        ('n=30000001 buckets=100003', {'n': 30000001, 'buckets': 100003})],
        small={'n': 2000, 'buckets': 37})
def atomic_minmax(g, c):
    inits = {}
    n, nb = c["n"], c["buckets"]
    bucket, vals = g.randint(0, nb, n), g.randint(-10 ** 9, 10 ** 9, n)
    mn = g.zeros(nb, integer=True) + (2 ** 31 - 1)      # the int32 extremes but -2^31
    mx = g.zeros(nb, integer=True) + (1 - 2 ** 31)
    args, grid, block = [bucket, vals, mn, mx], ((n + 255) // 256,), (256,)
    inits = {0: dict(kind="randint", low=0, high=nb)}

    def check():                      # the first 256 buckets, exactly
        k = min(nb, 256)
        bh, vh = g.host(bucket), g.host(vals)
        sel = bh < k
        lo, hi = np.full(k, 2 ** 31 - 1, np.int64), np.full(k, -2 ** 31 + 1, np.int64)
        np.minimum.at(lo, bh[sel], vh[sel])
        np.maximum.at(hi, bh[sel], vh[sel])
        return wrong(np.concatenate([g.host(mn[:k]), g.host(mx[:k])]),
                      np.concatenate([lo, hi]))
    return args, grid, block, check, inits


@family(sizes=[
        ('7001x1531', {'rows': 7001, 'cols': 1531}),
        ('20011x4099', {'rows': 20011, 'cols': 4099})], small={'rows': 300, 'cols': 45})
def quant_int8_rows(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    x, q, sc = g.randn(r, k), cast(g.zeros(r, k, integer=True), "int8"), g.empty(r)
    args, grid, block = [x, q, sc], (r,), (256,)

    def check():                      # the first 256 rows: scales, and codes off by > 1
        xh = g.host(x[:256]).astype(np.float64)
        amax = np.abs(xh).max(1)
        ref = np.rint(xh * (127 / amax)[:, None])
        off = np.mean(np.abs(g.host(q[:256]).astype(np.float64) - ref) > 1)
        return max(float(off), rel(g.host(sc[:256]), amax / 127))
    return args, grid, block, check, inits


@family(sizes=[('n=24000136', {'n': 24000136}), ('n=320000024', {'n': 320000024})],
        small={'n': 2664})
def sort8_network(g, c):
    inits = {}
    n = c["n"]
    x, y = g.randn(n), g.empty(n)
    args, grid, block = [x, y], ((n // 8 + 255) // 256,), (256,)

    def check():                      # the first 65536 groups of 8, exactly
        k = min(n, 8 * 65536)
        ref = np.sort(g.host(x[:k]).reshape(-1, 8), axis=1).ravel()
        return wrong(g.host(y[:k]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('n=5000011 s=30', {'n': 5000011, 's': 30.0}),
        ('n=60000013 s=3000', {'n': 60000013, 's': 3000.0})], small={'n': 700, 's': 200.0})
def newton_cubic(g, c):
    inits = {}
    n, s = c["n"], c["s"]
    x, t = g.randn(n), g.empty(n)
    args, grid, block = [x, t, s], ((n + 255) // 256,), (256,)
    inits = {0: dict(kind="randn")}   # the values decide each element's Newton steps

    def check():                      # the first 65536 roots
        b = np.float32(s) * g.host(x[:65536])        # b as the kernel forms it (fp32)
        return rel(g.host(t[:65536]), newton_ref(b.astype(np.float64)))
    return args, grid, block, check, inits


@family(sizes=[('n=10000019', {'n': 10000019}), ('n=100000007', {'n': 100000007})],
        small={'n': 1001})
def complex_mac(g, c):
    inits = {}
    n = c["n"]
    a, b, cc, d = g.randn(2 * n), g.randn(2 * n), g.randn(2 * n), g.empty(2 * n)
    args, grid, block = [a, b, cc, d], ((n + 255) // 256,), (256,)

    def check():                      # the first 2^20 complex numbers
        k = 2 * min(n, 1 << 20)
        z = [g.host(v[:k]).astype(np.float64) for v in (a, b, cc)]
        za, zb, zc = (v[0::2] + 1j * v[1::2] for v in z)
        ref = zc + za * zb
        return rel(g.host(d[:k]), np.stack([ref.real, ref.imag], 1).ravel())
    return args, grid, block, check, inits


@family(sizes=[
        ('22013x4160', {'rows': 22013, 'cols': 4160}),
        ('50021x16000', {'rows': 50021, 'cols': 16000})], small={'rows': 260, 'cols': 192})
def int4_gemv(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    w = g.randint(-2 ** 31, 2 ** 31 - 1, r * (k // 8)).reshape(r, k // 8)
    sc, x, y = g.rand(r, k // 64), g.randn(k), g.empty(r)
    args, grid, block = [w, sc, x, y], ((r * 32 + 255) // 256,), (256,)

    def check():                      # the first 256 rows
        wh = g.host(w[:256]).astype(np.int64) & 0xFFFFFFFF
        nib = (wh[:, :, None] >> (4 * np.arange(8))) & 15
        deq = (nib - 8).reshape(len(wh), -1) * np.repeat(
            g.host(sc[:256]).astype(np.float64), 64, axis=1)
        return rel(g.host(y[:256]), deq @ g.host(x).astype(np.float64))
    return args, grid, block, check, inits


@family(sizes=[('4099^2', {'m': 4099}), ('15013^2', {'m': 15013})], small={'m': 70})
def life_u8(g, c):
    inits = {}
    m = c["m"]
    a = cast(g.randint(0, 2, m * m).reshape(m, m), "uint8")
    b = cast(g.zeros(m, m, integer=True) + 7, "uint8")     # 7: a cell the kernel missed
    args, grid, block = [a, b], ((m + 15) // 16, (m + 15) // 16), (16, 16)

    def check():                      # the first 64 rows (their lower neighbours too)
        k = min(m, 64)
        ref = life_ref(g.host(a[:k + 1]))[:k]
        return wrong(g.host(b[:k]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('table=1000003 keys=4000037', {'table': 1000003, 'n': 4000037}),
        ('table=50000017 keys=20000003', {'table': 50000017, 'n': 20000003})],
        small={'table': 1001, 'n': 700})
def bsearch_keys(g, c):
    inits = {}
    t, n = c["table"], c["n"]
    table, keys, out = sort_values(g.randint(0, KEY_HIGH, t)), g.randint(0, KEY_HIGH, n), \
        int_out(g, n)
    args, grid, block = [table, keys, out], ((n + 255) // 256,), (256,)
    inits = {0: dict(kind="randint", low=0, high=KEY_HIGH, sorted=True),
             1: dict(kind="randint", low=0, high=KEY_HIGH)}

    def check():                      # the first 65536 keys, exactly
        ref = np.searchsorted(g.host(table), g.host(keys[:65536]), side="left")
        return wrong(g.host(out[:65536]), ref)
    return args, grid, block, check, inits


@family(sizes=[
        ('3001x1027', {'rows': 3001, 'cols': 1027}),
        ('20011x4099', {'rows': 20011, 'cols': 4099})], small={'rows': 70, 'cols': 300})
def rownorm_f64(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    x, y = cast(g.randn(r, k), "float64"), cast(g.empty(r, k), "float64")
    args, grid, block = [x, y], (r,), (128,)

    def check():                      # the first 64 rows
        xh = g.host(x[:64]).astype(np.float64)
        return rel(g.host(y[:64]), xh / np.sqrt((xh * xh).sum(1, keepdims=True)))
    return args, grid, block, check, inits


@family(sizes=[
        ('words=1000003', {'words': 1000003}),
        ('words=10000019', {'words': 10000019})], small={'words': 300})
def bitmap_dot(g, c):
    inits = {}
    w = c["words"]
    words, x, y = g.randint(-2 ** 31, 2 ** 31 - 1, w), g.randn(32 * w), g.empty(w)
    args, grid, block = [words, x, y], ((w + 255) // 256,), (256,)
    inits = {0: dict(kind="randint", low=-2 ** 31, high=2 ** 31 - 1)}

    def check():                      # the first 65536 words
        k = min(w, 65536)
        wh = g.host(words[:k]).astype(np.int64) & 0xFFFFFFFF
        bits = (wh[:, None] >> np.arange(32)) & 1
        xh = g.host(x[:32 * k]).astype(np.float64).reshape(k, 32)
        return rel(g.host(y[:k]), (bits * xh).sum(1))
    return args, grid, block, check, inits


@family(sizes=[('n=2000003', {'n': 2000003}), ('n=60000011', {'n': 60000011})], small={'n': 1999})
def xform_points_aos(g, c):
    inits = {}
    n = c["n"]
    m, p, q = g.randn(3, 3), g.randn(n, 3), g.empty(n, 3)
    args, grid, block = [m, p, q], ((n + 255) // 256,), (256,)

    def check():                      # the first 65536 points
        return rel(g.host(q[:65536]), double(g.host(p[:65536])) @ double(g.host(m)).T)
    return args, grid, block, check, inits


@family(sizes=[
        ('20011x1027', {'rows': 20011, 'cols': 1027}),
        ('60013x2053', {'rows': 60013, 'cols': 2053})],
        small={'rows': 70, 'cols': 300}, tolerance=0.0001)
def box_rows_running(g, c):
    inits = {}
    import model_numba as N
    r, k = c["rows"], c["cols"]
    x, y = g.randn(r, k), g.empty(r, k)
    args, grid, block = [x, y], ((r + 127) // 128,), (128,)

    def check():                      # the first 160 rows (two blocks' worth in)
        return rel(g.host(y[:160]), box_ref(g.host(x[:160]), N.RADIUS))
    return args, grid, block, check, inits


@family(sizes=[('n=10000019', {'n': 10000019}), ('n=200000003', {'n': 200000003})],
        small={'n': 2001}, tolerance=0.0)
def lut_u8(g, c):
    inits = {}
    n = c["n"]
    img, lut, out = cast(g.randint(0, 256, n), "uint8"), g.randn(256), g.empty(n)
    args, grid, block = [img, lut, out], ((n + 255) // 256,), (256,)
    inits = {0: dict(kind="randint", low=0, high=256)}

    def check():                      # the first 2^20 pixels, exactly
        k = 1 << 20
        return wrong(g.host(out[:k]), g.host(lut)[g.host(img[:k]).astype(np.int64)])
    return args, grid, block, check, inits


@family(sizes=[
        ('64x50021', {'m': 64, 'systems': 50021}),
        ('160x200003', {'m': 160, 'systems': 200003})], small={'m': 9, 'systems': 301})
def tridiag_thomas(g, c):
    inits = {}
    m, ns = c["m"], c["systems"]
    a, cc = g.rand(m, ns) - 0.5, g.rand(m, ns) - 0.5     # |a| + |c| < 1 < b: dominant
    b, d = g.rand(m, ns) * 2 + 2, g.randn(m, ns)
    cw, x = g.empty(m, ns), g.empty(m, ns)
    args, grid, block = [a, b, cc, d, cw, x], ((ns + 127) // 128,), (128,)

    def check():                      # the first 256 systems
        return rel(g.host(x[:, :256]), thomas_ref(*(g.host(v[:, :256])
                                                     for v in (a, b, cc, d))))
    return args, grid, block, check, inits


@family(sizes=[
        ('pairs=200003 len=24', {'n': 200003, 'l': 24}),
        ('pairs=600011 len=32', {'n': 600011, 'l': 32})], small={'n': 301, 'l': 9}, tolerance=0.0)
def edit_distance_local(g, c):
    inits = {}
    import model_numba as N
    n, ln = c["n"], c["l"]
    assert ln + EXTRA < N.ROW, "edit_distance_local: strings longer than its local row"
    s = cast(g.randint(0, ALPHABET, n * ln), "uint8").reshape(n, ln)
    t = cast(g.randint(0, ALPHABET, n * (ln + EXTRA)), "uint8").reshape(n, ln + EXTRA)
    out = int_out(g, n)
    args, grid, block = [s, t, out], ((n + 127) // 128,), (128,)
    inits = {0: dict(kind="randint", low=0, high=ALPHABET),
             1: dict(kind="randint", low=0, high=ALPHABET)}

    def check():                      # the first 4096 pairs, exactly
        return wrong(g.host(out[:4096]), edit_ref(g.host(s[:4096]), g.host(t[:4096])))
    return args, grid, block, check, inits


@family(sizes=[
        ('3001x4096', {'rows': 3001, 'bits': 12}),
        ('8191x8192', {'rows': 8191, 'bits': 13})], small={'rows': 5, 'bits': 9}, tolerance=0.0)
def bitrev_rows(g, c):
    inits = {}
    r, bits = c["rows"], c["bits"]
    x, y = g.randn(r, 1 << bits), g.empty(r, 1 << bits)
    args, grid, block = [x, y, bits], (((r << bits) + 255) // 256,), (256,)

    def check():                      # the first 64 rows, exactly
        return wrong(g.host(y[:64]), g.host(x[:64])[:, bitrev_index(bits)])
    return args, grid, block, check, inits


@family(sizes=[
        ('64x223x223', {'c': 64, 'h': 223, 'w': 223}),
        ('128x447x447', {'c': 128, 'h': 447, 'w': 447})],
        small={'c': 3, 'h': 11, 'w': 13}, tolerance=0.0)
def im2col3x3(g, c):
    inits = {}
    ch, h, w = c["c"], c["h"], c["w"]
    img, cols = g.randn(ch, h, w), g.empty(ch * 9, h * w)
    args, grid, block = [img, cols], ((ch * 9 * h * w + 255) // 256,), (256,)

    def check():                      # the first 4 channels' 36 rows, exactly
        return wrong(g.host(cols[:36]), im2col_ref(g.host(img[:4])))
    return args, grid, block, check, inits


@family(sizes=[
        ('2003^2', {'n': 2003, 'k': 1001}),
        ('7001^2', {'n': 7001, 'k': 3500})], small={'n': 37, 'k': 5}, tolerance=0.0)
def floyd_warshall_k(g, c):
    inits = {}
    n, k = c["n"], c["k"]
    d, out = g.rand(n, n) * 100, g.empty(n, n)
    args, grid, block = [d, out, k], ((n + 31) // 32, (n + 7) // 8), (32, 8)

    def check():                      # the first 64 rows, exactly
        rows, row_k = g.host(d[:64]), g.host(d[k:k + 1])
        return wrong(g.host(out[:64]), np.minimum(rows, rows[:, k:k + 1] + row_k))
    return args, grid, block, check, inits


@family(sizes=[
        ('2162x3842', {'h': 2162, 'w': 3842}),
        ('4322x7682', {'h': 4322, 'w': 7682})], small={'h': 10, 'w': 38}, tolerance=0.0)
def nv12_to_rgb(g, c):
    inits = {}
    h, w = c["h"], c["w"]
    assert h % 2 == 0 and w % 2 == 0, "nv12_to_rgb: NV12 frames have even sides"
    y = cast(g.randint(0, 256, h * w), "uint8").reshape(h, w)
    uv = cast(g.randint(0, 256, h * w // 2), "uint8").reshape(h // 2, w)
    rgb = cast(g.zeros(h, w, 3, integer=True), "uint8")
    args, grid, block = [y, uv, rgb], ((w + 31) // 32, (h + 7) // 8), (32, 8)
    inits = {0: dict(kind="randint", low=0, high=256),
             1: dict(kind="randint", low=0, high=256)}

    def check():                      # the first 64 rows, exactly
        return wrong(g.host(rgb[:64]), nv12_ref(g.host(y[:64]), g.host(uv[:32])))
    return args, grid, block, check, inits


@family(sizes=[('n=4000037', {'n': 4000037}), ('n=40000003', {'n': 40000003})], small={'n': 1001})
def black_scholes(g, c):
    inits = {}
    n = c["n"]
    s, k, t = g.rand(n) * 25 + 5, g.rand(n) * 99 + 1, g.rand(n) * 9.75 + 0.25
    call, put = g.empty(n), g.empty(n)
    args, grid, block = [s, k, t, RATE, VOL, call, put], ((n + 127) // 128,), (128,)

    def check():                      # the first 2^16 options
        m = 1 << 16
        rc, rp = black_scholes_ref(g.host(s[:m]), g.host(k[:m]), g.host(t[:m]))
        return max(rel(g.host(call[:m]), rc), rel(g.host(put[:m]), rp))
    return args, grid, block, check, inits


@family(sizes=[('n=4000037', {'n': 4000037}), ('n=40000003', {'n': 40000003})], small={'n': 1001})
def lif_step(g, c):
    inits = {}
    n = c["n"]
    grid, block = ((n + 255) // 256,), (256,)
    v, refr, cur = g.rand(n), g.randint(0, 3, n), g.rand(n) * 4
    v_out, refr_out = g.empty(n), g.zeros(n, integer=True) - 1
    spike = cast(g.zeros(n, integer=True) + 7, "uint8")
    args = [v, refr, cur, v_out, refr_out, spike, DT_TAU, V_TH, T_REF]
    inits = {1: dict(kind="randint", low=0, high=3)}

    def check():                      # the first 2^16 neurons (but those at the threshold)
        m = 1 << 16
        rv, rr, rs, judged = lif_ref(g.host(v[:m]), g.host(refr[:m]), g.host(cur[:m]))
        ints = max(wrong(g.host(refr_out[:m])[judged], rr[judged]),
                   wrong(g.host(spike[:m])[judged], rs[judged]))
        return max(ints, rel(g.host(v_out[:m])[judged], rv[judged]))
    return args, grid, block, check, inits


@family(sizes=[
        ('n=1000003 1001x1003', {'n': 1000003, 'ny': 1001, 'nx': 1003}),
        ('n=12000007 2003x1999', {'n': 12000007, 'ny': 2003, 'nx': 1999})],
        small={'n': 701, 'ny': 13, 'nx': 17})
def cic_deposit(g, c):
    inits = {}
    n = c["n"]
    grid, block = ((n + 255) // 256,), (256,)
    ny, nx = c["ny"], c["nx"]
    px, py, q = g.rand(n) * (nx - 1), g.rand(n) * (ny - 1), g.rand(n) + 0.5
    dens = g.zeros(ny, nx)
    args = [px, py, q, dens]

    def check():                      # the whole grid (every particle)
        return rel(g.host(dens), cic_ref(g.host(px), g.host(py), g.host(q), ny, nx))
    return args, grid, block, check, inits


@family(sizes=[('n=4000037', {'n': 4000037}), ('n=30000001', {'n': 30000001})], small={'n': 1001})
def haversine(g, c):
    inits = {}
    n = c["n"]
    grid, block = ((n + 255) // 256,), (256,)
    lat1, lat2 = g.rand(n) * 180 - 90, g.rand(n) * 180 - 90
    lon1, lon2 = g.rand(n) * 360 - 180, g.rand(n) * 360 - 180
    dist = g.empty(n)
    args = [lat1, lon1, lat2, lon2, dist]

    def check():                      # the first 2^16 pairs
        m = 1 << 16
        return rel(g.host(dist[:m]), haversine_ref(g.host(lat1[:m]), g.host(lon1[:m]),
                                                    g.host(lat2[:m]), g.host(lon2[:m])))
    return args, grid, block, check, inits
