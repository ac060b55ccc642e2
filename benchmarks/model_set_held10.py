"""The tenth held-out group (held10) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2 .. held9; tests/test_model_set.py
checks it), built blind as held4 .. held9: no case of this group was simulated, or sized by a
prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200:
~4 TB/s DRAM, ~67 TFLOP/s fp32, 132 SMs, 50 MB L2), from ~10 us to a few hundred us. Kernels:
Numba (model_set_held10_numba.py), Triton (model_set_held10_triton.py) and PTX made with
ptxgen's Builder (model_set_held10_ptx.py); arguments, launch and check are written once against
held3's array interface `g`, so the CPU test runs the very same launch at a small size on
ptxgen's emulator. New here: a Floyd-Warshall pivot step on a 2-D grid (a row piece, a column
word shared by a warp and row k; floyd_warshall_k), NV12 video frames to packed 8-bit RGB with
integer BT.601 arithmetic and three byte stores a pixel (nv12_to_rgb), Black-Scholes option
prices with log, exp, sqrt and two libdevice erf a thread (black_scholes), LayerNorm's backward
input gradient with two row sums (triton_layernorm_bwd), tl.cumsum over rows
(triton_cumsum_rows), Mamba's causal depthwise convolution of width 4 with SiLU over masked
shifted windows (triton_causal_dwconv), RGB10A2 pixels unpacked by bfe to float4 (four bytes
in, sixteen out; ptx_rgb10a2_unpack), block matching by sad.u32 on bytes split out by bfe, nine
candidate shifts a thread (ptx_sad_match), and a histogram with warp-aggregated atomics by
match.any.sync and %lanemask_lt (ptx_match_hist). Checks compare with float64 (or exact
integer) numpy references over a slice; tests/test_model_set.py also runs each check on an
output larger than its slice.
"""
import math

import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _double, _pow2, _wrong
from model_set_held5 import _cast

NUMBA_FAMILIES = {"floyd_warshall_k", "nv12_to_rgb", "black_scholes"}
TRITON_FAMILIES = {"triton_layernorm_bwd", "triton_cumsum_rows", "triton_causal_dwconv"}
PTX_FAMILIES = {"ptx_rgb10a2_unpack", "ptx_sad_match", "ptx_match_hist"}  # ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not 1e-5 (PTX cases default to 0):
# the Floyd-Warshall step and the colour conversion are exact (float32 sums as numpy's)
TOLERANCE = {"floyd_warshall_k": 0.0, "nv12_to_rgb": 0.0}
RATE, VOL = 0.02, 0.30     # black_scholes: the riskless rate and the volatility
CONV_W = 4                 # triton_causal_dwconv: the convolution's width
CONV_BLOCK = 1024          # triton_causal_dwconv: positions per program


def cases():
    """(family, source, size label, parameters) of every held10 case, two sizes per family."""
    out = []
    for n in (2003, 7001):
        out.append(("floyd_warshall_k", "numba", f"{n}^2", dict(n=n, k=n // 2)))
    for h, w in ((2162, 3842), (4322, 7682)):
        out.append(("nv12_to_rgb", "numba", f"{h}x{w}", dict(h=h, w=w)))
    for n in (4_000_037, 40_000_003):
        out.append(("black_scholes", "numba", f"n={n}", dict(n=n)))
    for r, cc in ((8191, 1000), (16001, 4000)):
        out.append(("triton_layernorm_bwd", "triton", f"{r}x{cc}", dict(rows=r, cols=cc)))
    for r, cc in ((20011, 1000), (40009, 3000)):
        out.append(("triton_cumsum_rows", "triton", f"{r}x{cc}", dict(rows=r, cols=cc)))
    for bb, ch, ln in ((2, 1536, 4001), (8, 2560, 4099)):
        out.append(("triton_causal_dwconv", "triton", f"{bb}x{ch}x{ln}",
                    dict(b=bb, c=ch, l=ln)))
    for n in (4_000_037, 40_000_003):
        out.append(("ptx_rgb10a2_unpack", "ptx", f"n={n}", dict(n=n)))
    for n in (1_000_003, 8_000_009):
        out.append(("ptx_sad_match", "ptx", f"n={n}", dict(n=n)))
    for n in (2_000_003, 20_000_003):
        out.append(("ptx_match_hist", "ptx", f"n={n}", dict(n=n)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"floyd_warshall_k": dict(n=37, k=5), "nv12_to_rgb": dict(h=10, w=38),
              "black_scholes": dict(n=1001),
              "triton_layernorm_bwd": dict(rows=5, cols=300),
              "triton_cumsum_rows": dict(rows=4, cols=700),
              "triton_causal_dwconv": dict(b=1, c=3, l=1500),
              "ptx_rgb10a2_unpack": dict(n=1001), "ptx_sad_match": dict(n=301),
              "ptx_match_hist": dict(n=2001)}[fam])
    return c


def nv12_ref(y, uv):
    """BT.601 integer NV12 -> RGB (H, W, 3) uint8 of planes y (H, W) and uv (H/2, W)."""
    y, uv = np.asarray(y, np.int32), np.asarray(uv, np.int32)
    up = np.repeat(uv.reshape(uv.shape[0], -1, 2), 2, 0)
    d = np.repeat(up[..., 0], 2, 1)[:y.shape[0]] - 128
    e = np.repeat(up[..., 1], 2, 1)[:y.shape[0]] - 128
    c = 298 * (y - 16) + 128
    rgb = np.stack([(c + 409 * e) >> 8, (c - 100 * d - 208 * e) >> 8, (c + 516 * d) >> 8], -1)
    return np.clip(rgb, 0, 255).astype(np.uint8)


def black_scholes_ref(s, k, t):
    """(call, put) European prices, float64."""
    s, k, t = (np.asarray(a, np.float64) for a in (s, k, t))
    erf = np.frompyfunc(math.erf, 1, 1)
    vs = VOL * np.sqrt(t)
    d1 = (np.log(s / k) + (RATE + 0.5 * VOL * VOL) * t) / vs
    n1, n2 = (0.5 * (1 + erf(d / np.sqrt(2)).astype(np.float64)) for d in (d1, d1 - vs))
    disc = k * np.exp(-RATE * t)
    return s * n1 - disc * n2, disc * (1 - n2) - s * (1 - n1)


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held10 Numba case."""
    fam, inits = c["family"], {}
    if fam == "floyd_warshall_k":
        n, k = c["n"], c["k"]
        d, out = g.rand(n, n) * 100, g.empty(n, n)
        args, grid, block = [d, out, k], ((n + 31) // 32, (n + 7) // 8), (32, 8)

        def check():                      # the first 64 rows, exactly
            rows, row_k = g.host(d[:64]), g.host(d[k:k + 1])
            return _wrong(g.host(out[:64]), np.minimum(rows, rows[:, k:k + 1] + row_k))
    elif fam == "nv12_to_rgb":
        h, w = c["h"], c["w"]
        assert h % 2 == 0 and w % 2 == 0, "nv12_to_rgb: NV12 frames have even sides"
        y = _cast(g.randint(0, 256, h * w), "uint8").reshape(h, w)
        uv = _cast(g.randint(0, 256, h * w // 2), "uint8").reshape(h // 2, w)
        rgb = _cast(g.zeros(h, w, 3, integer=True), "uint8")
        args, grid, block = [y, uv, rgb], ((w + 31) // 32, (h + 7) // 8), (32, 8)
        inits = {0: dict(kind="randint", low=0, high=256),
                 1: dict(kind="randint", low=0, high=256)}

        def check():                      # the first 64 rows, exactly
            return _wrong(g.host(rgb[:64]), nv12_ref(g.host(y[:64]), g.host(uv[:32])))
    elif fam == "black_scholes":
        n = c["n"]
        s, k, t = g.rand(n) * 25 + 5, g.rand(n) * 99 + 1, g.rand(n) * 9.75 + 0.25
        call, put = g.empty(n), g.empty(n)
        args, grid, block = [s, k, t, RATE, VOL, call, put], ((n + 127) // 128,), (128,)

        def check():                      # the first 2^16 options
            m = 1 << 16
            rc, rp = black_scholes_ref(g.host(s[:m]), g.host(k[:m]), g.host(t[:m]))
            return max(_rel(g.host(call[:m]), rc), _rel(g.host(put[:m]), rp))
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def layernorm_bwd_ref(x, dy, w, mean, rstd):
    """LayerNorm's input gradient given the forward's mean and rstd per row, float64."""
    x, dy, w, mean, rstd = (np.asarray(a, np.float64) for a in (x, dy, w, mean, rstd))
    xhat = (x - mean[:, None]) * rstd[:, None]
    wdy = w * dy
    return (wdy - xhat * (xhat * wdy).mean(1, keepdims=True)
            - wdy.mean(1, keepdims=True)) * rstd[:, None]


def dwconv_ref(x, w, bias):
    """Causal depthwise convolution (width w.shape[1]) plus bias, then SiLU, of x (B, C, L)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    wd = w.shape[1]
    pad = np.pad(x, ((0, 0), (0, 0), (wd - 1, 0)))
    ln = x.shape[2]
    a = sum(w[None, :, j, None] * pad[:, :, j:j + ln] for j in range(wd))
    a = a + _double(bias)[None, :, None]
    return a / (1 + np.exp(-a))


def triton_case(g, c):
    """(kernel name in model_set_held10_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held10 Triton case."""
    fam, inits = c["family"], {}
    if fam == "triton_layernorm_bwd":
        r, cc = c["rows"], c["cols"]
        x, dy, w = g.randn(r, cc), g.randn(r, cc), g.randn(cc)
        mean, rstd, dx = g.randn(r) * 0.1, g.rand(r) + 0.5, g.empty(r, cc)
        kern, args = "layernorm_bwd_kernel", [x, dy, w, mean, rstd, dx, cc]
        kw = dict(BLOCK=_pow2(cc), num_warps=4 if cc <= 1024 else 8)

        def check():                      # the first 64 rows
            return _rel(g.host(dx[:64]), layernorm_bwd_ref(
                g.host(x[:64]), g.host(dy[:64]), g.host(w), g.host(mean[:64]),
                g.host(rstd[:64])))
        return kern, args, kw, (r,), check, inits
    if fam == "triton_cumsum_rows":
        r, cc = c["rows"], c["cols"]
        x, y = g.randn(r, cc), g.empty(r, cc)
        kern, args = "cumsum_rows_kernel", [x, y, cc]
        kw = dict(BLOCK=_pow2(cc), num_warps=4 if cc <= 1024 else 8)

        def check():                      # the first 64 rows
            return _rel(g.host(y[:64]), np.cumsum(np.asarray(g.host(x[:64]), np.float64), 1))
        return kern, args, kw, (r,), check, inits
    if fam == "triton_causal_dwconv":
        bb, ch, ln = c["b"], c["c"], c["l"]
        x, w, bias, y = g.randn(bb, ch, ln), g.randn(ch, CONV_W), g.randn(ch), g.empty(bb, ch, ln)
        kern, args = "causal_dwconv_silu_kernel", [x, w, bias, y, ch, ln]
        kw = dict(W=CONV_W, BLOCK=CONV_BLOCK, num_warps=4)

        def check():                      # the first sample's first 8 channels
            return _rel(g.host(y[:1, :8]), dwconv_ref(g.host(x[:1, :8]), g.host(w[:8]),
                                                     g.host(bias[:8])))
        return kern, args, kw, (bb * ch, (ln + CONV_BLOCK - 1) // CONV_BLOCK), check, inits
    raise KeyError(fam)


def ptx_kernel(fam):
    """(PTX text, entry) of a held10 PTX family."""
    import model_set_held10_ptx as P
    return P.KERNELS[fam]()


def rgb10a2_ref(words):
    """The float4 (n, 4) of packed RGB10A2 words, in float32 as the kernel rounds (exact)."""
    import model_set_held10_ptx as P
    w = np.asarray(words).view(np.uint32)
    return np.stack([((w >> np.uint32(pos)) & np.uint32((1 << bits) - 1)).astype(np.float32)
                     * np.float32(scale) for pos, bits, scale in P.FIELDS], 1)


def sad_match_ref(q, ref):
    """min over shifts s of 16 SAD(query patch, reference bytes 16 i + 4 s ..) + s, per patch;
    q holds 4 words a patch, ref 4 words a patch plus REF_PAD."""
    import model_set_held10_ptx as P
    qb = np.asarray(q, np.int32).view(np.uint8).reshape(-1, 16).astype(np.int32)
    rb = np.asarray(ref, np.int32).view(np.uint8).astype(np.int32)
    n = len(qb)
    idx = 16 * np.arange(n)[:, None] + np.arange(16)[None, :]
    keys = [16 * np.abs(qb - rb[idx + 4 * s]).sum(1) + s for s in range(P.SHIFTS)]
    return np.min(keys, 0).astype(np.int32)


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held10 PTX case; scalars as numpy scalars of the parameter's type."""
    import model_set_held10_ptx as P
    fam, n = c["family"], c["n"]
    grid = ((n + 255) // 256,)
    if fam == "ptx_rgb10a2_unpack":
        words, out = g.randint(-2 ** 31, 2 ** 31 - 1, n), g.empty(n, 4)

        def check():                      # the first 2^20 pixels, exactly
            k = 1 << 20
            return _wrong(g.host(out[:k]), rgb10a2_ref(g.host(words[:k])))
        return [np.uint32(n), words, out], grid, (256,), check, {}
    if fam == "ptx_sad_match":
        q = g.randint(-2 ** 31, 2 ** 31 - 1, P.QUERY_WORDS * n)
        ref = g.randint(-2 ** 31, 2 ** 31 - 1, P.QUERY_WORDS * n + P.REF_PAD)
        out = g.zeros(n, integer=True) - 1

        def check():                      # the first 2^16 patches, exactly
            k = 1 << 16
            return _wrong(g.host(out[:k]), sad_match_ref(
                g.host(q[:P.QUERY_WORDS * k]), g.host(ref[:P.QUERY_WORDS * k + P.REF_PAD])))
        return [np.uint32(n), q, ref, out], grid, (256,), check, {}
    if fam == "ptx_match_hist":
        keys, bins = g.randint(0, P.BINS, n), g.zeros(P.BINS, integer=True)

        def check():                      # every bin, exactly
            return _wrong(g.host(bins), np.bincount(g.host(keys), minlength=P.BINS))
        return [np.uint32(n), keys, bins], grid, (256,), check, \
            {1: dict(kind="randint", low=0, high=P.BINS)}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held10", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held10", save_triton_small)      # python with Triton (/work/tvenv)
