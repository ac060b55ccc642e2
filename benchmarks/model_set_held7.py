"""The seventh held-out group (held7) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2 .. held6; tests/test_model_set.py
checks it), built blind as held4 .. held6: no case of this group was simulated, or sized by a
prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200:
~4 TB/s DRAM, ~67 TFLOP/s fp32, ~34 TFLOP/s fp64, 132 SMs, 50 MB L2), from ~10 us to about a
millisecond. Kernels: Numba (model_set_held7_numba.py), Triton (model_set_held7_triton.py) and
PTX made with ptxgen's Builder (model_set_held7_ptx.py); arguments, launch and check are
written once against held3's array interface `g`, so the CPU test runs the very same launch at
a small size on ptxgen's emulator. New here: uint8 cellular automata, binary search (a sorted
table and keys recorded as init "randint", sorted, so the model can redraw them), float64
reductions, bitmaps that steer branches (init "randint"), data-dependent loop trip counts in
Triton (masked_mean's lengths, init "randint"), 64-bit integer multiplies, SFU approximations
(tanh.approx, ex2.approx), the read-only ld.global.nc path on v2.f64 and a transposed tile
turned through shared memory (transpose_add). Checks compare with float64 (or exact integer)
numpy references over a slice; tests/test_model_set.py also runs each check on an output larger
than its slice (right values pass, one wrong value at the slice's far end fails).
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _double, _int_out, _pow2, _wrong
from model_set_held5 import _cast, _xp

NUMBA_FAMILIES = {"life_u8", "bsearch_keys", "rownorm_f64", "bitmap_dot"}
TRITON_FAMILIES = {"triton_add_layernorm", "triton_l2dist", "triton_masked_mean",
                   "triton_transpose_add"}
PTX_FAMILIES = {"ptx_splitmix64", "ptx_tanh_ex2", "ptx_axpy_v2f64"}    # ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not exact (PTX cases default to 0):
# tanh.approx's relative error is about 2^-11; fma rounds once where numpy rounds twice
TOLERANCE = {"ptx_tanh_ex2": 2e-3, "ptx_axpy_v2f64": 1e-12}
KEY_HIGH = 1 << 30      # bsearch_keys: table entries and keys are drawn from [0, KEY_HIGH)
L2_DIM = 16             # triton_l2dist: the vectors' length
SEED = 0x243F6A8885A308D3   # ptx_splitmix64's seed (below 2^63: a plain int everywhere)


def cases():
    """(family, source, size label, parameters) of every held7 case, two sizes per family."""
    out = []
    for m in (4099, 15_013):
        out.append(("life_u8", "numba", f"{m}^2", dict(m=m)))
    for t, n in ((1_000_003, 4_000_037), (50_000_017, 20_000_003)):
        out.append(("bsearch_keys", "numba", f"table={t} keys={n}", dict(table=t, n=n)))
    for r, k in ((3001, 1027), (20_011, 4099)):
        out.append(("rownorm_f64", "numba", f"{r}x{k}", dict(rows=r, cols=k)))
    for w in (1_000_003, 10_000_019):
        out.append(("bitmap_dot", "numba", f"words={w}", dict(words=w)))
    for r, k in ((4001, 768), (30_011, 2560)):
        out.append(("triton_add_layernorm", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for n, m in ((3001, 2999), (20_011, 15_013)):
        out.append(("triton_l2dist", "triton", f"{n}x{m} d={L2_DIM}", dict(n=n, m=m)))
    for b, ln, d in ((64, 1000, 300), (96, 4001, 1000)):
        out.append(("triton_masked_mean", "triton", f"{b}x{ln}x{d}",
                    dict(batch=b, length=ln, dim=d)))
    for r, k in ((1999, 1501), (12_007, 10_009)):
        out.append(("triton_transpose_add", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for n in (5_000_011, 300_000_007):
        out.append(("ptx_splitmix64", "ptx", f"n={n}", dict(n=n)))
    for n in (6_000_004, 200_000_012):
        out.append(("ptx_tanh_ex2", "ptx", f"n={n}", dict(n=n)))
    for n in (4_000_002, 120_000_002):
        out.append(("ptx_axpy_v2f64", "ptx", f"n={n}", dict(n=n)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"life_u8": dict(m=70), "bsearch_keys": dict(table=1001, n=700),
              "rownorm_f64": dict(rows=70, cols=300), "bitmap_dot": dict(words=300),
              "triton_add_layernorm": dict(rows=70, cols=300),
              "triton_l2dist": dict(n=90, m=67),
              "triton_masked_mean": dict(batch=5, length=45, dim=150),
              "triton_transpose_add": dict(rows=90, cols=70),
              "ptx_splitmix64": dict(n=1999), "ptx_tanh_ex2": dict(n=2052),
              "ptx_axpy_v2f64": dict(n=2002)}[fam])
    return c


def life_ref(a):
    """One Game of Life step of a 0/1 grid, cells beyond the edge dead."""
    a = np.asarray(a, np.int64)
    p = np.pad(a, 1)
    m, n = a.shape
    s = sum(p[1 + di:1 + di + m, 1 + dj:1 + dj + n] for di in (-1, 0, 1) for dj in (-1, 0, 1)
            if di or dj)
    return ((s == 3) | ((s == 2) & (a == 1))).astype(np.uint8)


def _sorted(a):
    return np.sort(a) if isinstance(a, np.ndarray) else _xp(a).sort(a).values


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held7 Numba case."""
    fam, inits = c["family"], {}
    if fam == "life_u8":
        m = c["m"]
        a = _cast(g.randint(0, 2, m * m).reshape(m, m), "uint8")
        b = _cast(g.zeros(m, m, integer=True) + 7, "uint8")     # 7: a cell the kernel missed
        args, grid, block = [a, b], ((m + 15) // 16, (m + 15) // 16), (16, 16)

        def check():                      # the first 64 rows (their lower neighbours too)
            k = min(m, 64)
            ref = life_ref(g.host(a[:k + 1]))[:k]
            return _wrong(g.host(b[:k]), ref)
    elif fam == "bsearch_keys":
        t, n = c["table"], c["n"]
        table, keys, out = _sorted(g.randint(0, KEY_HIGH, t)), g.randint(0, KEY_HIGH, n), \
            _int_out(g, n)
        args, grid, block = [table, keys, out], ((n + 255) // 256,), (256,)
        inits = {0: dict(kind="randint", low=0, high=KEY_HIGH, sorted=True),
                 1: dict(kind="randint", low=0, high=KEY_HIGH)}

        def check():                      # the first 65536 keys, exactly
            ref = np.searchsorted(g.host(table), g.host(keys[:65536]), side="left")
            return _wrong(g.host(out[:65536]), ref)
    elif fam == "rownorm_f64":
        r, k = c["rows"], c["cols"]
        x, y = _cast(g.randn(r, k), "float64"), _cast(g.empty(r, k), "float64")
        args, grid, block = [x, y], (r,), (128,)

        def check():                      # the first 64 rows
            xh = g.host(x[:64]).astype(np.float64)
            return _rel(g.host(y[:64]), xh / np.sqrt((xh * xh).sum(1, keepdims=True)))
    elif fam == "bitmap_dot":
        w = c["words"]
        words, x, y = g.randint(-2 ** 31, 2 ** 31 - 1, w), g.randn(32 * w), g.empty(w)
        args, grid, block = [words, x, y], ((w + 255) // 256,), (256,)
        inits = {0: dict(kind="randint", low=-2 ** 31, high=2 ** 31 - 1)}

        def check():                      # the first 65536 words
            k = min(w, 65536)
            wh = g.host(words[:k]).astype(np.int64) & 0xFFFFFFFF
            bits = (wh[:, None] >> np.arange(32)) & 1
            xh = g.host(x[:32 * k]).astype(np.float64).reshape(k, 32)
            return _rel(g.host(y[:k]), (bits * xh).sum(1))
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def triton_case(g, c):
    """(kernel name in model_set_held7_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held7 Triton case."""
    fam, inits = c["family"], {}
    if fam == "triton_add_layernorm":
        r, k = c["rows"], c["cols"]
        x, res, w, bias = g.randn(r, k), g.randn(r, k), g.randn(k), g.randn(k)
        h, y = g.empty(r, k), g.empty(r, k)
        blk = _pow2(k)
        kern, args = "add_layernorm_kernel", [x, res, w, bias, h, y, k, 1e-5]
        kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

        def check():                      # the first 64 rows of both outputs
            hh = _double(g.host(x[:64])) + _double(g.host(res[:64]))
            d = hh - hh.mean(1, keepdims=True)
            ref = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * _double(g.host(w)) \
                + _double(g.host(bias))
            return max(_rel(g.host(h[:64]), hh), _rel(g.host(y[:64]), ref))
        return kern, args, kw, (r,), check, inits
    if fam == "triton_l2dist":
        n, m = c["n"], c["m"]
        x, yv, o = g.randn(n, L2_DIM), g.randn(m, L2_DIM), g.empty(n, m)
        kern, args = "l2dist_kernel", [x, yv, o, n, m]
        kw = dict(D=L2_DIM, BM=64, BN=64, num_warps=4)

        def check():                      # the first 80 rows (into the second row of tiles)
            xh, yh = _double(g.host(x[:80])), _double(g.host(yv))
            ref = ((xh[:, None, :] - yh[None, :, :]) ** 2).sum(-1)
            return _rel(g.host(o[:80]), ref)
        return kern, args, kw, ((n + 63) // 64, (m + 63) // 64), check, inits
    if fam == "triton_masked_mean":
        b, ln, d = c["batch"], c["length"], c["dim"]
        x, lens, o = g.randn(b, ln, d), g.randint(1, ln + 1, b), g.empty(b, d)
        kern, args = "masked_mean_kernel", [x, lens, o, ln, d]
        kw = dict(BLOCK_L=32, BLOCK_D=128, num_warps=4)
        inits = {1: dict(kind="randint", low=1, high=ln + 1)}   # the loops' trip counts

        def check():                      # the first 4 sequences
            k = min(b, 4)
            xh, nh = _double(g.host(x[:k])), g.host(lens[:k])
            ref = np.stack([xh[i, :nh[i]].mean(0) for i in range(k)])
            return _rel(g.host(o[:k]), ref)
        return kern, args, kw, (b, (d + 127) // 128), check, inits
    if fam == "triton_transpose_add":
        r, k = c["rows"], c["cols"]
        a, bt, o = g.randn(r, k), g.randn(k, r), g.empty(r, k)
        kern, args = "transpose_add_kernel", [a, bt, o, r, k]
        kw = dict(BR=64, BC=64, num_warps=4)

        def check():                      # the first 80 rows (into the second row of tiles)
            ref = _double(g.host(a[:80])) + _double(g.host(bt[:, :80])).T
            return _rel(g.host(o[:80]), ref)
        return kern, args, kw, ((r + 63) // 64, (k + 63) // 64), check, inits
    raise KeyError(fam)


def ptx_kernel(fam):
    """(PTX text, entry) of a held7 PTX family."""
    import model_set_held7_ptx as P
    return P.KERNELS[fam]()


def splitmix_ref(n, seed=SEED):
    """splitmix64's kernel result for indices 0..n-1 (uint64, wrapping arithmetic)."""
    import model_set_held7_ptx as P
    u = np.uint64
    with np.errstate(over="ignore"):
        z = u(seed) + (np.arange(1, n + 1, dtype=np.uint64) * u(P.GOLDEN))
        z = (z ^ (z >> u(30))) * u(P.MIX1)
        z = (z ^ (z >> u(27))) * u(P.MIX2)
        z = z ^ (z >> u(31))
    hi = np.array([(int(v) * P.GOLDEN) >> 64 for v in z], dtype=np.uint64)
    return z ^ hi


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held7 PTX case; scalars as numpy scalars of the parameter's type."""
    fam = c["family"]
    if fam == "ptx_splitmix64":
        n = c["n"]
        out = _cast(_int_out(g, n), "int64")
        args, grid = [np.uint32(n), np.uint64(SEED), out], ((n + 255) // 256,)

        def check():                      # the first 2^16 words, exactly
            k = min(n, 1 << 16)
            return _wrong(g.host(out[:k]).view(np.uint64), splitmix_ref(k))
        return args, grid, (256,), check, {}
    if fam == "ptx_tanh_ex2":
        n = c["n"]
        x, y = g.randn(n), g.empty(n)
        args, grid = [np.uint32(n // 4), x, y], ((n // 4 + 255) // 256,)

        def check():                      # the first 2^20 elements
            xh = _double(g.host(x[:1 << 20]))
            return _rel(g.host(y[:1 << 20]), np.tanh(xh) + np.exp2(xh))
        return args, grid, (256,), check, {}
    if fam == "ptx_axpy_v2f64":
        n = c["n"]
        x, y = _cast(g.randn(n), "float64"), _cast(g.randn(n), "float64")
        z = _cast(g.empty(n), "float64")
        a = 1.7182818284590453
        args, grid = [np.uint32(n // 2), np.float64(a), x, y, z], ((n // 2 + 255) // 256,)

        def check():                      # the first 2^20 elements
            xh, yh = g.host(x[:1 << 20]), g.host(y[:1 << 20])
            return _rel(g.host(z[:1 << 20]), a * xh + yh)
        return args, grid, (256,), check, {}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held7", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held7", save_triton_small)      # python with Triton (/work/tvenv)
