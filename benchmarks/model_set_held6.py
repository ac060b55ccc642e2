"""The sixth held-out group (held6) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2 .. held5; tests/test_model_set.py
checks it), built blind as held4 and held5: no case of this group was simulated, or sized by a
prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200:
~4 TB/s DRAM, ~67 TFLOP/s fp32, 132 SMs, 50 MB L2), from ~10 us to a few ms. Kernels: Numba
(model_set_held6_numba.py), Triton (model_set_held6_triton.py) and PTX made with ptxgen's
Builder (model_set_held6_ptx.py); arguments, launch and check are written once against held3's
array interface `g`, so the CPU test runs the very same launch at a small size on ptxgen's
emulator. New here: int8 outputs, packed 4-bit weights, half/bfloat16 conversions, bit-field
instructions, float reductions to global memory and data-dependent loop trip counts (Newton's
method: its input is recorded as init "randn" so the model can redraw it; red_scatter's
indices as "randint"). Checks compare with float64 (or exact integer) numpy references over a
slice; outputs the kernel accumulates into (red_scatter) are compared with the reference
times the number of launches the sums show.
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _double, _int_out, _pow2, _wrong
from model_set_held5 import _cast, _xp

NUMBA_FAMILIES = {"quant_int8_rows", "sort8_network", "newton_cubic", "complex_mac",
                  "int4_gemv"}
TRITON_FAMILIES = {"triton_rope", "triton_causal_softmax", "triton_adam"}
PTX_FAMILIES = {"ptx_cvt_roundtrip", "ptx_prmt_bits", "ptx_red_scatter"}   # ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not exact (PTX cases default to 0):
# red_scatter's float sums depend on the order the atomics land in
TOLERANCE = {"ptx_red_scatter": 1e-5}
ROPE_HALF = 64          # triton_rope: half the head dimension (head dim 128)
ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, bc1=1 - 0.9 ** 7, bc2=1 - 0.999 ** 7)


def cases():
    """(family, source, size label, parameters) of every held6 case, two sizes per family."""
    out = []
    for r, k in ((7001, 1531), (20_011, 4099)):
        out.append(("quant_int8_rows", "numba", f"{r}x{k}", dict(rows=r, cols=k)))
    for g8 in (3_000_017, 40_000_003):
        out.append(("sort8_network", "numba", f"n={8 * g8}", dict(n=8 * g8)))
    for n, s in ((5_000_011, 30.0), (60_000_013, 3000.0)):
        out.append(("newton_cubic", "numba", f"n={n} s={s:g}", dict(n=n, s=s)))
    for n in (10_000_019, 100_000_007):
        out.append(("complex_mac", "numba", f"n={n}", dict(n=n)))
    for r, k in ((22_013, 4160), (50_021, 16_000)):
        out.append(("int4_gemv", "numba", f"{r}x{k}", dict(rows=r, cols=k)))
    for seq, batch, heads in ((1999, 3, 12), (4093, 7, 40)):
        out.append(("triton_rope", "triton", f"{batch}x{seq} heads={heads}",
                    dict(seq=seq, batch=batch, heads=heads)))
    for seq, batch in ((1000, 24), (3001, 8)):
        out.append(("triton_causal_softmax", "triton", f"{batch}x{seq}^2",
                    dict(seq=seq, batch=batch)))
    for n in (3_000_017, 200_000_033):
        out.append(("triton_adam", "triton", f"n={n}", dict(n=n)))
    for n in (12_000_004, 250_000_012):
        out.append(("ptx_cvt_roundtrip", "ptx", f"n={n}", dict(n=n)))
    for n in (6_000_011, 180_000_001):
        out.append(("ptx_prmt_bits", "ptx", f"n={n}", dict(n=n)))
    for n, nb in ((4_000_037, 100_003), (50_000_017, 1_000_003)):
        out.append(("ptx_red_scatter", "ptx", f"n={n} bins={nb}", dict(n=n, bins=nb)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"quant_int8_rows": dict(rows=300, cols=45), "sort8_network": dict(n=8 * 333),
              "newton_cubic": dict(n=700, s=200.0), "complex_mac": dict(n=1001),
              "int4_gemv": dict(rows=260, cols=192),
              "triton_rope": dict(seq=7, batch=11, heads=3),
              "triton_causal_softmax": dict(seq=50, batch=6), "triton_adam": dict(n=3001),
              "ptx_cvt_roundtrip": dict(n=2052), "ptx_prmt_bits": dict(n=1999),
              "ptx_red_scatter": dict(n=3001, bins=37)}[fam])
    return c


def newton_ref(b):
    """The real root of u^3 + u = b in float64 (Newton from u = b, run to convergence)."""
    u = np.asarray(b, np.float64).copy()
    for _ in range(200):
        u -= (u ** 3 + u - b) / (3 * u * u + 1)
    return u


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held6 Numba case."""
    fam, inits = c["family"], {}
    if fam == "quant_int8_rows":
        r, k = c["rows"], c["cols"]
        x, q, sc = g.randn(r, k), _cast(g.zeros(r, k, integer=True), "int8"), g.empty(r)
        args, grid, block = [x, q, sc], (r,), (256,)

        def check():                      # the first 256 rows: scales, and codes off by > 1
            xh = g.host(x[:256]).astype(np.float64)
            amax = np.abs(xh).max(1)
            ref = np.rint(xh * (127 / amax)[:, None])
            off = np.mean(np.abs(g.host(q[:256]).astype(np.float64) - ref) > 1)
            return max(float(off), _rel(g.host(sc[:256]), amax / 127))
    elif fam == "sort8_network":
        n = c["n"]
        x, y = g.randn(n), g.empty(n)
        args, grid, block = [x, y], ((n // 8 + 255) // 256,), (256,)

        def check():                      # the first 65536 groups of 8, exactly
            k = min(n, 8 * 65536)
            ref = np.sort(g.host(x[:k]).reshape(-1, 8), axis=1).ravel()
            return _wrong(g.host(y[:k]), ref)
    elif fam == "newton_cubic":
        n, s = c["n"], c["s"]
        x, t = g.randn(n), g.empty(n)
        args, grid, block = [x, t, s], ((n + 255) // 256,), (256,)
        inits = {0: dict(kind="randn")}   # the values decide each element's Newton steps

        def check():                      # the first 65536 roots
            b = np.float32(s) * g.host(x[:65536])        # b as the kernel forms it (fp32)
            return _rel(g.host(t[:65536]), newton_ref(b.astype(np.float64)))
    elif fam == "complex_mac":
        n = c["n"]
        a, b, cc, d = g.randn(2 * n), g.randn(2 * n), g.randn(2 * n), g.empty(2 * n)
        args, grid, block = [a, b, cc, d], ((n + 255) // 256,), (256,)

        def check():                      # the first 2^20 complex numbers
            k = 2 * min(n, 1 << 20)
            z = [g.host(v[:k]).astype(np.float64) for v in (a, b, cc)]
            za, zb, zc = (v[0::2] + 1j * v[1::2] for v in z)
            ref = zc + za * zb
            return _rel(g.host(d[:k]), np.stack([ref.real, ref.imag], 1).ravel())
    elif fam == "int4_gemv":
        r, k = c["rows"], c["cols"]
        w = g.randint(-2 ** 31, 2 ** 31 - 1, r * (k // 8)).reshape(r, k // 8)
        sc, x, y = g.rand(r, k // 64), g.randn(k), g.empty(r)
        args, grid, block = [w, sc, x, y], ((r * 32 + 255) // 256,), (256,)

        def check():                      # the first 256 rows
            wh = g.host(w[:256]).astype(np.int64) & 0xFFFFFFFF
            nib = (wh[:, :, None] >> (4 * np.arange(8))) & 15
            deq = (nib - 8).reshape(len(wh), -1) * np.repeat(
                g.host(sc[:256]).astype(np.float64), 64, axis=1)
            return _rel(g.host(y[:256]), deq @ g.host(x).astype(np.float64))
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def _softmax_causal_ref(v, q):
    """Row-wise softmax of v (float64) over columns 0..q[row], zeros beyond."""
    keep = np.arange(v.shape[1])[None, :] <= q[:, None]
    e = np.where(keep, np.exp(v - np.where(keep, v, -np.inf).max(1, keepdims=True)), 0.0)
    return e / e.sum(1, keepdims=True)


def triton_case(g, c):
    """(kernel name in model_set_held6_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held6 Triton case."""
    fam, inits = c["family"], {}
    if fam == "triton_rope":
        seq, batch, heads, half = c["seq"], c["batch"], c["heads"], ROPE_HALF
        toks = seq * batch
        x, y = g.randn(toks, heads, 2 * half), g.empty(toks, heads, 2 * half)
        ang = g.rand(seq, half) * 6.2831855
        xp = _xp(ang)
        cos, sin = (_cast(f(_double(ang)), "float32") for f in (xp.cos, xp.sin))
        kern, args = "rope_kernel", [x, cos, sin, y, seq, heads]
        kw = dict(HALF=half, BLOCK_H=_pow2(heads), num_warps=4)

        def check():                      # the first 64 tokens (past the table's end too)
            k = min(toks, 64)
            xh = g.host(x[:k]).astype(np.float64)
            pos = np.arange(k) % seq
            co, si = (g.host(t).astype(np.float64)[pos][:, None, :] for t in (cos, sin))
            x1, x2 = xh[..., :half], xh[..., half:]
            ref = np.concatenate([x1 * co - x2 * si, x2 * co + x1 * si], -1)
            return _rel(g.host(y[:k]), ref)
        return kern, args, kw, (toks,), check, inits
    if fam == "triton_causal_softmax":
        seq, batch = c["seq"], c["batch"]
        x, y = g.randn(batch * seq, seq), g.empty(batch * seq, seq)
        blk = _pow2(seq)
        kern, args = "causal_softmax_kernel", [x, y, seq]
        kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

        def check():                      # the first 256 rows (into the second batch)
            k = min(batch * seq, 256)
            ref = _softmax_causal_ref(g.host(x[:k]).astype(np.float64), np.arange(k) % seq)
            return _rel(g.host(y[:k]), ref)
        return kern, args, kw, (batch * seq,), check, inits
    if fam == "triton_adam":
        n, h = c["n"], ADAM
        p, gr, m, v = g.randn(n), g.randn(n), g.randn(n), g.rand(n)
        po, mo, vo = g.empty(n), g.empty(n), g.empty(n)
        kern = "adam_kernel"
        args = [p, gr, m, v, po, mo, vo, n] + [h[k] for k in ("lr", "beta1", "beta2", "eps",
                                                              "bc1", "bc2")]
        kw = dict(BLOCK=1024, num_warps=4)

        def check():                      # the first 2^20 elements of the three outputs
            k = min(n, 1 << 20)
            ph, gh, mh, vh = (g.host(a[:k]).astype(np.float64) for a in (p, gr, m, v))
            m2 = h["beta1"] * mh + (1 - h["beta1"]) * gh
            v2 = h["beta2"] * vh + (1 - h["beta2"]) * gh * gh
            p2 = ph - h["lr"] * (m2 / h["bc1"]) / (np.sqrt(v2 / h["bc2"]) + h["eps"])
            return max(_rel(g.host(mo[:k]), m2), _rel(g.host(vo[:k]), v2),
                       _rel(g.host(po[:k]), p2))
        return kern, args, kw, ((n + 1023) // 1024,), check, inits
    raise KeyError(fam)


def ptx_kernel(fam):
    """(PTX text, entry) of a held6 PTX family."""
    import model_set_held6_ptx as P
    return P.KERNELS[fam]()


def _bf16(a):
    """float32 -> bfloat16 -> float32, rounding to nearest even (finite inputs)."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def cvt_ref(x):
    """cvt_roundtrip's result in float32 arithmetic, the kernel's order of additions."""
    x = np.asarray(x, np.float32)
    a = x.astype(np.float16).astype(np.float32)
    return (a + _bf16(x)) + _bf16(a)


def prmt_ref(w):
    """prmt_bits's result on uint32 words."""
    w = np.asarray(w).view(np.uint32).astype(np.uint64)
    r = ((w & 0xFF) << 24) | ((w & 0xFF00) << 8) | ((w >> 8) & 0xFF00) | (w >> 24)
    e = (r >> 5) & 0x7FF
    z = (r & ~np.uint64(0x7F << 13)) | ((e & 0x7F) << 13)
    sw = ((w << 16) | (w >> 16)) & 0xFFFFFFFF
    return ((z ^ sw) & 0xFFFFFFFF).astype(np.uint32)


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held6 PTX case; scalars as numpy scalars of the parameter's type."""
    fam = c["family"]
    if fam == "ptx_cvt_roundtrip":
        n = c["n"]
        x, y = g.randn(n) * 300, g.empty(n)
        args, grid = [np.uint32(n // 4), x, y], ((n // 4 + 255) // 256,)

        def check():                      # the first 2^20 elements, exactly
            return _wrong(g.host(y[:1 << 20]), cvt_ref(g.host(x[:1 << 20])))
        return args, grid, (256,), check, {}
    if fam == "ptx_prmt_bits":
        n = c["n"]
        w, o = g.randint(-2 ** 31, 2 ** 31 - 1, n), _int_out(g, n)
        args, grid = [np.uint32(n), w, o], ((n + 255) // 256,)

        def check():                      # the first 2^20 words, exactly
            return _wrong(g.host(o[:1 << 20]).view(np.uint32),
                          prmt_ref(g.host(w[:1 << 20])))
        return args, grid, (256,), check, {}
    if fam == "ptx_red_scatter":
        n, nb = c["n"], c["bins"]
        idx, val, out = g.randint(0, nb, n), g.rand(n), g.zeros(nb)
        args, grid = [np.uint32(n), idx, val, out], ((n + 255) // 256,)
        inits = {1: dict(kind="randint", low=0, high=nb)}

        def check():
            # the sums accumulate over every launch before the check (the collect's first go,
            # a warm-up): compare with the reference times the launches the total shows
            ref = np.bincount(g.host(idx), g.host(val).astype(np.float64), minlength=nb)
            oh = g.host(out).astype(np.float64)
            runs = round(oh.sum() / ref.sum())
            return 1.0 if runs < 1 else _rel(oh, runs * ref)
        return args, grid, (256,), check, inits
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held6", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held6", save_triton_small)      # python with Triton (/work/tvenv)
