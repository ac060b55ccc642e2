"""The eighth held-out group (held8) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2 .. held7; tests/test_model_set.py
checks it), built blind as held4 .. held7: no case of this group was simulated, or sized by a
prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200:
~4 TB/s DRAM, ~67 TFLOP/s fp32, 132 SMs, 50 MB L2), from ~10 us to a few hundred us. Kernels:
Numba (model_set_held8_numba.py), Triton (model_set_held8_triton.py) and PTX made with ptxgen's
Builder (model_set_held8_ptx.py); arguments, launch and check are written once against held3's
array interface `g`, so the CPU test runs the very same launch at a small size on ptxgen's
emulator. New here: an array of 12-byte structures read and written field by field
(xform_points_aos), one thread per row walking its row sequentially (box_rows_running), a
1 KiB lookup table indexed by bytes (lut_u8, init "randint"), a column-broadcast 2-D epilogue
(triton_scale_bias_relu), two reductions in sequence over one row (triton_top2), three dot
products in one pass (triton_cosine_rows), funnel-shift rotates (shf.l.wrap) in an add-xor-rotate
chain on v4.u32 states (ptx_quarter_round), cvt.rni float-to-int rounding with clamping
(ptx_round_sat) and a histogram held in registers (bfe, setp/selp counts; ptx_byte_bins). Checks compare with float64 (or exact integer) numpy references over a slice;
tests/test_model_set.py also runs each check on an output larger than its slice.
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _double, _int_out, _pow2, _wrong
from model_set_held5 import _cast

NUMBA_FAMILIES = {"xform_points_aos", "box_rows_running", "lut_u8"}
TRITON_FAMILIES = {"triton_scale_bias_relu", "triton_top2", "triton_cosine_rows"}
PTX_FAMILIES = {"ptx_quarter_round", "ptx_round_sat", "ptx_byte_bins"}   # ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not exact (PTX cases default to 0):
# box_rows_running's float32 running sum drifts by a rounding per step over the row; lut_u8
# and triton_top2 copy input values, so their checks (a fraction of wrong elements) must be 0
TOLERANCE = {"box_rows_running": 1e-4, "lut_u8": 0.0, "triton_top2": 0.0}


def cases():
    """(family, source, size label, parameters) of every held8 case, two sizes per family."""
    out = []
    for n in (2_000_003, 60_000_011):
        out.append(("xform_points_aos", "numba", f"n={n}", dict(n=n)))
    for r, k in ((20_011, 1027), (60_013, 2053)):
        out.append(("box_rows_running", "numba", f"{r}x{k}", dict(rows=r, cols=k)))
    for n in (10_000_019, 200_000_003):
        out.append(("lut_u8", "numba", f"n={n}", dict(n=n)))
    for r, k in ((3001, 4099), (24_007, 8191)):
        out.append(("triton_scale_bias_relu", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for r, k in ((20_011, 1500), (100_003, 3000)):
        out.append(("triton_top2", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for r, d in ((10_007, 1000), (150_001, 1536)):
        out.append(("triton_cosine_rows", "triton", f"{r}x{d}", dict(rows=r, dim=d)))
    for n4 in (1_500_007, 40_000_003):
        out.append(("ptx_quarter_round", "ptx", f"states={n4}", dict(n4=n4)))
    for n in (5_000_011, 150_000_001):
        out.append(("ptx_round_sat", "ptx", f"n={n}", dict(n=n)))
    for n4 in (2_000_003, 50_000_017):
        out.append(("ptx_byte_bins", "ptx", f"groups={n4}", dict(n4=n4)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"xform_points_aos": dict(n=1999), "box_rows_running": dict(rows=70, cols=300),
              "lut_u8": dict(n=2001), "triton_scale_bias_relu": dict(rows=70, cols=300),
              "triton_top2": dict(rows=70, cols=300), "triton_cosine_rows": dict(rows=70, dim=300),
              "ptx_quarter_round": dict(n4=999), "ptx_round_sat": dict(n=2001),
              "ptx_byte_bins": dict(n4=1001)}[fam])
    return c


def box_ref(x, radius):
    """Each row's sums over columns j - radius .. j + radius (cut at the row's ends), float64."""
    x = np.asarray(x, np.float64)
    n = x.shape[1]
    cs = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, 1)], 1)
    j = np.arange(n)
    return cs[:, np.minimum(j + radius + 1, n)] - cs[:, np.maximum(j - radius, 0)]


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held8 Numba case."""
    fam, inits = c["family"], {}
    if fam == "xform_points_aos":
        n = c["n"]
        m, p, q = g.randn(3, 3), g.randn(n, 3), g.empty(n, 3)
        args, grid, block = [m, p, q], ((n + 255) // 256,), (256,)

        def check():                      # the first 65536 points
            return _rel(g.host(q[:65536]), _double(g.host(p[:65536])) @ _double(g.host(m)).T)
    elif fam == "box_rows_running":
        import model_set_held8_numba as N
        r, k = c["rows"], c["cols"]
        x, y = g.randn(r, k), g.empty(r, k)
        args, grid, block = [x, y], ((r + 127) // 128,), (128,)

        def check():                      # the first 160 rows (two blocks' worth in)
            return _rel(g.host(y[:160]), box_ref(g.host(x[:160]), N.RADIUS))
    elif fam == "lut_u8":
        n = c["n"]
        img, lut, out = _cast(g.randint(0, 256, n), "uint8"), g.randn(256), g.empty(n)
        args, grid, block = [img, lut, out], ((n + 255) // 256,), (256,)
        inits = {0: dict(kind="randint", low=0, high=256)}

        def check():                      # the first 2^20 pixels, exactly
            k = 1 << 20
            return _wrong(g.host(out[:k]), g.host(lut)[g.host(img[:k]).astype(np.int64)])
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def triton_case(g, c):
    """(kernel name in model_set_held8_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held8 Triton case."""
    fam, inits = c["family"], {}
    if fam == "triton_scale_bias_relu":
        r, k = c["rows"], c["cols"]
        x, s, bias, y = g.randn(r, k), g.randn(k), g.randn(k), g.empty(r, k)
        kern, args = "scale_bias_relu_kernel", [x, s, bias, y, r, k]
        kw = dict(BR=32, BC=128, num_warps=4)

        def check():                      # the first 80 rows (into the third row of tiles)
            ref = _double(g.host(x[:80])) * _double(g.host(s)) + _double(g.host(bias))
            return _rel(g.host(y[:80]), np.maximum(ref, 0.0))
        return kern, args, kw, ((r + 31) // 32, (k + 127) // 128), check, inits
    if fam == "triton_top2":
        r, k = c["rows"], c["cols"]
        x, o = g.randn(r, k), g.empty(r, 2)
        blk = _pow2(k)
        kern, args = "top2_kernel", [x, o, k]
        kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

        def check():                      # the first 64 rows, exactly
            return _wrong(g.host(o[:64]), np.sort(g.host(x[:64]), 1)[:, :-3:-1])
        return kern, args, kw, (r,), check, inits
    if fam == "triton_cosine_rows":
        r, d = c["rows"], c["dim"]
        a, bv, o = g.randn(r, d), g.randn(r, d), g.empty(r)
        blk = _pow2(d)
        kern, args = "cosine_rows_kernel", [a, bv, o, d]
        kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

        def check():                      # the first 256 rows
            ah, bh = _double(g.host(a[:256])), _double(g.host(bv[:256]))
            ref = (ah * bh).sum(1) / np.sqrt((ah * ah).sum(1) * (bh * bh).sum(1))
            return _rel(g.host(o[:256]), ref)
        return kern, args, kw, (r,), check, inits
    raise KeyError(fam)


def ptx_kernel(fam):
    """(PTX text, entry) of a held8 PTX family."""
    import model_set_held8_ptx as P
    return P.KERNELS[fam]()


def quarter_round_ref(s):
    """ptx_quarter_round's result for int32 states s (4 words each), in uint32 arithmetic."""
    import model_set_held8_ptx as P
    a, b, c, d = (np.asarray(s).reshape(-1, 4).view(np.uint32)[:, j].copy() for j in range(4))

    def rotl(x, r):
        return (x << np.uint32(r)) | (x >> np.uint32(32 - r))
    for _ in range(P.ROUNDS):
        a += b
        d = rotl(d ^ a, 16)
        c += d
        b = rotl(b ^ c, 12)
        a += b
        d = rotl(d ^ a, 8)
        c += d
        b = rotl(b ^ c, 7)
    return np.stack([a, b, c, d], 1).reshape(-1).view(np.int32)


def round_sat_ref(x):
    """ptx_round_sat's result: float32 QUANT x, rounded half to even, clamped to int8's range."""
    import model_set_held8_ptx as P
    v = np.asarray(x, np.float32) * np.float32(P.QUANT)
    return np.clip(np.rint(v), -128, 127).astype(np.int32)


def byte_bins_ref(w):
    """ptx_byte_bins' result for int32 words w: per 16 bytes, the count of bytes in each of
    [0, 64), [64, 128), [128, 192), [192, 256)."""
    top = np.asarray(w, np.int32).view(np.uint8).reshape(-1, 16) >> 6
    return (top[:, :, None] == np.arange(4)).sum(1).astype(np.int32).reshape(-1)


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held8 PTX case; scalars as numpy scalars of the parameter's type."""
    fam = c["family"]
    if fam in ("ptx_quarter_round", "ptx_byte_bins"):       # 16 random bytes a thread
        n4 = c["n4"]
        w, o = g.randint(-2 ** 31, 2 ** 31 - 1, 4 * n4), _int_out(g, 4 * n4)
        args, grid = [np.uint32(n4), w, o], ((n4 + 255) // 256,)
        ref = quarter_round_ref if fam == "ptx_quarter_round" else byte_bins_ref

        def check():                      # the first 2^16 threads' words, exactly
            k = 4 << 16
            return _wrong(g.host(o[:k]), ref(g.host(w[:k])))
        return args, grid, (256,), check, {}
    if fam == "ptx_round_sat":
        n = c["n"]
        x, y = g.randn(n), _int_out(g, n)
        args, grid = [np.uint32(n), x, y], ((n + 255) // 256,)

        def check():                      # the first 2^20 elements, exactly
            k = 1 << 20
            return _wrong(g.host(y[:k]), round_sat_ref(g.host(x[:k])))
        return args, grid, (256,), check, {}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held8", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held8", save_triton_small)      # python with Triton (/work/tvenv)
