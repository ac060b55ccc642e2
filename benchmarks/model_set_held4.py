"""The fourth held-out group (held4) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2, held3; tests/test_model_set.py
checks it), built blind: no case of this group was simulated, or sized by a prediction, before
the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200: ~4 TB/s DRAM, ~67
TFLOP/s fp32, ~34 TFLOP/s fp64, 132 SMs), from ~10 us to a few ms. Kernels: Numba
(model_set_held4_numba.py), Triton (model_set_held4_triton.py) and PTX made with ptxgen's
Builder (model_set_held4_ptx.py). As in model_set_held3.py each case's arguments, launch and
correctness check are written once against the small array interface `g` (model_set.Gpu on
the GPU, held3's HostArrays on the CPU), so the CPU test runs the very same launch at a small
size on ptxgen's emulator. Checks compare with float64 (or exact integer) numpy references
over a slice; the result is the relative error, or for outputs that are labels, hashes or
counts the fraction of wrong ones (mandelbrot's fp32 orbits near the set's boundary may
legitimately differ from numpy's: FMA contraction).
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel

NUMBA_FAMILIES = {"radix_digits", "gemv_colmajor", "inv4x4_batch", "fft_radix2", "ell_spmv",
                  "maxpool3x3s2", "bilinear_resize", "kmeans_assign", "f64_rk4", "hash_bits",
                  "mandelbrot"}
TRITON_FAMILIES = {"triton_rmsnorm", "triton_gelu", "triton_argmax", "triton_embbag",
                   "triton_logsumexp"}
PTX_FAMILIES = {"ptx_dp4a_dot", "ptx_xorshift"}     # built with ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives (fractions of wrong labels where not 1e-5)
TOLERANCE = {"mandelbrot": 2e-2, "kmeans_assign": 1e-3, "triton_argmax": 1e-3}


def cases():
    """(family, source, size label, parameters) of every held4 case, two sizes per family."""
    out = []
    for n, sh in ((5_000_000, 0), (50_000_003, 20)):
        out.append(("radix_digits", "numba", f"n={n} shift={sh}", dict(n=n, shift=sh)))
    for r, k in ((300_000, 700), (24_000, 4_000)):
        out.append(("gemv_colmajor", "numba", f"{r}x{k}", dict(rows=r, cols=k)))
    for n in (700_000, 6_000_000):
        out.append(("inv4x4_batch", "numba", f"n={n}", dict(n=n)))
    for n, half in ((3 << 21, 1), (5 << 22, 1 << 18)):
        out.append(("fft_radix2", "numba", f"n={n} half={half}", dict(n=n, half=half)))
    for r, k in ((300_007, 12), (2_500_000, 24)):
        out.append(("ell_spmv", "numba", f"rows={r} nnz/row={k}", dict(rows=r, k=k)))
    for shape in ((64, 225, 225), (96, 999, 1001)):
        out.append(("maxpool3x3s2", "numba", "x".join(map(str, shape)), dict(shape=shape)))
    for src, dst in (((1080, 1920), (2561, 4551)), ((4321, 7777), (2999, 5003))):
        out.append(("bilinear_resize", "numba", f"{src[0]}x{src[1]}->{dst[0]}x{dst[1]}",
                    dict(src=src, dst=dst)))
    for n in (1_000_000, 12_000_001):
        out.append(("kmeans_assign", "numba", f"n={n} k=16 d=8", dict(n=n)))
    for n, steps in ((1_000_000, 100), (3_000_000, 600)):
        out.append(("f64_rk4", "numba", f"n={n} steps={steps}", dict(n=n, steps=steps)))
    for n, rounds in ((20_000_000, 4), (5_000_000, 256)):
        out.append(("hash_bits", "numba", f"n={n} rounds={rounds}", dict(n=n, rounds=rounds)))
    for h, w, it in ((1000, 1500, 256), (3000, 4001, 1000)):
        out.append(("mandelbrot", "numba", f"{h}x{w} max_iter={it}", dict(h=h, w=w, it=it)))
    for r, k in ((8192, 5120), (65536, 768)):
        out.append(("triton_rmsnorm", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for n in (10_000_000, 100_000_007):
        out.append(("triton_gelu", "triton", f"n={n}", dict(n=n)))
    for r, k in ((4096, 3000), (50_000, 1000)):
        out.append(("triton_argmax", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for b, l, v, d in ((16384, 20, 100_000, 128), (65536, 50, 1_000_000, 96)):
        out.append(("triton_embbag", "triton", f"bags={b} L={l} V={v} D={d}",
                    dict(bags=b, L=l, V=v, D=d)))
    for r, k in ((4096, 10_000), (100_000, 200)):
        out.append(("triton_logsumexp", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for r, kw in ((1_000_003, 64), (200_000, 512)):
        out.append(("ptx_dp4a_dot", "ptx", f"rows={r} bytes={4 * kw}", dict(rows=r, kw=kw)))
    for blocks, per in ((1000, 111), (5000, 250)):
        out.append(("ptx_xorshift", "ptx", f"threads={blocks * 256} per={per}",
                    dict(blocks=blocks, per=per)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"radix_digits": dict(n=5000, shift=4), "gemv_colmajor": dict(rows=300, cols=37),
              "inv4x4_batch": dict(n=300), "fft_radix2": dict(n=96, half=4),
              "ell_spmv": dict(rows=500, k=5), "maxpool3x3s2": dict(shape=(3, 21, 19)),
              "bilinear_resize": dict(src=(17, 23), dst=(40, 31)),
              "kmeans_assign": dict(n=600), "f64_rk4": dict(n=300, steps=7),
              "hash_bits": dict(n=1000, rounds=3), "mandelbrot": dict(h=24, w=40, it=60),
              "triton_rmsnorm": dict(rows=20, cols=300), "triton_gelu": dict(n=3000),
              "triton_argmax": dict(rows=20, cols=300),
              "triton_embbag": dict(bags=10, L=7, V=50, D=96),
              "triton_logsumexp": dict(rows=20, cols=300),
              "ptx_dp4a_dot": dict(rows=300, kw=9), "ptx_xorshift": dict(blocks=3, per=7)}[fam])
    return c


def _double(a):
    return a.double() if hasattr(a, "double") else a.astype(np.float64)


def _int_out(g, *shape):
    return g.zeros(*shape, integer=True) - 1       # -1: a slot the kernel missed shows


def _wrong(out, ref):
    return float(np.mean(np.asarray(out) != np.asarray(ref)))


def _brev32(h):
    h = h.astype(np.uint32)
    for s, m in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        m = np.uint32(m)
        h = ((h >> np.uint32(s)) & m) | ((h & m) << np.uint32(s))
    return (h >> np.uint32(16)) | (h << np.uint32(16))


def hash_bits_ref(keys, rounds):
    """hash_bits in numpy uint32 arithmetic (wrapping multiplies, exact)."""
    h = np.asarray(keys).astype(np.int64).astype(np.uint32)
    for _ in range(rounds):
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(0x7FEB352D)
        bits = np.frexp(h.astype(np.float64))[1]          # bit length (0 for 0)
        clz = (32 - bits).astype(np.uint32)
        h = _brev32(h) ^ (np.bitwise_count(h).astype(np.uint32) << np.uint32(8)) ^ clz
        h = h ^ (h >> np.uint32(15))
        h = h * np.uint32(0x846CA68B)
    return h.view(np.int32)


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held4 Numba case."""
    fam, inits = c["family"], {}
    if fam == "radix_digits":
        n, sh = c["n"], c["shift"]
        nb = (n + 2047) // 2048
        keys, counts = g.randint(0, 2 ** 31, n), _int_out(g, nb, 16)
        args, grid, block = [keys, counts, sh], (nb,), (256,)
        inits = {0: dict(kind="randint", low=0, high=2 ** 31)}

        def check():                      # the first 512 blocks' rows, exactly
            k = min(nb, 512)
            kh = g.host(keys[:k * 2048]).astype(np.int64)
            ref = np.bincount(np.arange(len(kh)) // 2048 * 16 + ((kh >> sh) & 15),
                              minlength=k * 16).reshape(k, 16)
            return _rel(g.host(counts[:k]), ref)
    elif fam == "gemv_colmajor":
        r, k = c["rows"], c["cols"]
        at, x, y = g.randn(k, r), g.randn(k), g.empty(r)
        args, grid, block = [at, x, y], ((r + 255) // 256,), (256,)

        def check():
            ref = g.host(at[:, :256]).astype(np.float64).T @ g.host(x).astype(np.float64)
            return _rel(g.host(y[:256]), ref)
    elif fam == "inv4x4_batch":
        n = c["n"]
        a, out = g.rand(n, 16), g.empty(n, 16)
        args, grid, block = [a, out], ((n + 255) // 256,), (256,)

        def check():
            m = g.host(a[:4096]).astype(np.float64).reshape(-1, 4, 4) + 4 * np.eye(4)
            return _rel(g.host(out[:4096]).reshape(-1, 4, 4), np.linalg.inv(m))
    elif fam == "fft_radix2":
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
            return _rel(np.concatenate([d[a], d[b]]),
                        np.concatenate([np.stack([(z[a] + t).real, (z[a] + t).imag], 1),
                                        np.stack([(z[a] - t).real, (z[a] - t).imag], 1)]))
    elif fam == "ell_spmv":
        r, k = c["rows"], c["k"]
        cols = g.randint(0, r, k * r).reshape(k, r)
        vals, x, y = g.randn(k, r), g.randn(r), g.empty(r)
        args, grid, block = [cols, vals, x, y], ((r + 255) // 256,), (256,)
        inits = {0: dict(kind="randint", low=0, high=r)}

        def check():
            ch = g.host(cols[:, :1024]).astype(np.int64)
            ref = (g.host(vals[:, :1024]).astype(np.float64)
                   * g.host(x).astype(np.float64)[ch]).sum(0)
            return _rel(g.host(y[:1024]), ref)
    elif fam == "maxpool3x3s2":
        ch, h, w = c["shape"]
        ho, wo = (h - 3) // 2 + 1, (w - 3) // 2 + 1
        x, y = g.randn(ch, h, w), g.empty(ch, ho, wo)
        args, grid, block = [x, y], ((wo + 31) // 32, (ho + 7) // 8, ch), (32, 8, 1)

        def check():                      # the first two channels, exactly
            xh = g.host(x[:2])
            ref = np.max([xh[:, dy:dy + 2 * ho - 1:2, dx:dx + 2 * wo - 1:2]
                          for dy in range(3) for dx in range(3)], axis=0)
            return _rel(g.host(y[:2]), ref)
    elif fam == "bilinear_resize":
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
            return _rel(g.host(dst[:rows]), top + fy * (bot - top))
    elif fam == "kmeans_assign":
        n = c["n"]
        pts, cent, lab = g.randn(n, 8), g.randn(16, 8), _int_out(g, n)
        args, grid, block = [pts, cent, lab], ((n + 255) // 256,), (256,)

        def check():                      # wrong labels: not the nearest centroid (float64)
            p = g.host(pts[:65536]).astype(np.float64)
            d2 = ((p[:, None, :] - g.host(cent).astype(np.float64)[None]) ** 2).sum(2)
            lh = g.host(lab[:65536]).astype(np.int64)
            if lh.min() < 0 or lh.max() > 15:
                return 1.0
            chosen = d2[np.arange(len(p)), lh]
            return float(np.mean(chosen > d2.min(1) * (1 + 1e-5) + 1e-6))
    elif fam == "f64_rk4":
        n, steps = c["n"], c["steps"]
        y0, out = _double(g.rand(n) * 0.98 + 0.01), _double(g.empty(n))
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
            return _rel(g.host(out[:65536]), y)
    elif fam == "hash_bits":
        n, rounds = c["n"], c["rounds"]
        keys, out = g.randint(-2 ** 31, 2 ** 31, n), _int_out(g, n)
        args, grid, block = [keys, out, rounds], ((n + 255) // 256,), (256,)

        def check():                      # wrong hashes among the first 65536
            return _wrong(g.host(out[:65536]), hash_bits_ref(g.host(keys[:65536]), rounds))
    elif fam == "mandelbrot":
        h, w, it = c["h"], c["w"], c["it"]
        step = 3.0 / w
        x0, y0 = -2.2, -0.5 * step * h
        counts = _int_out(g, h, w)
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
            return _wrong(g.host(counts[r0:r0 + len(i)]), k)
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def _pow2(n):
    return 1 << (n - 1).bit_length()


def triton_case(g, c):
    """(kernel name in model_set_held4_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held4 Triton case (a name: the CPU side builds the arguments
    without importing Triton)."""
    fam, inits = c["family"], {}
    if fam in ("triton_rmsnorm", "triton_argmax", "triton_logsumexp"):
        r, k = c["rows"], c["cols"]
        blk = _pow2(k)
        kw = dict(BLOCK=blk, num_warps=16 if blk >= 16384 else 8 if blk >= 2048 else 4)
        x, grid, rows = g.randn(r, k), (r,), min(r, 1024)
        xh = lambda: g.host(x[:rows]).astype(np.float64)  # noqa: E731
        if fam == "triton_rmsnorm":
            w, y = g.randn(k), g.empty(r, k)
            kern, args = "rmsnorm_kernel", [x, y, w, k, k, 1e-6]

            def check():
                v = xh()
                ref = v / np.sqrt((v * v).mean(1, keepdims=True) + 1e-6) * g.host(w)
                return _rel(g.host(y[:rows]), ref)
        elif fam == "triton_argmax":
            out = _int_out(g, r)
            kern, args = "argmax_kernel", [x, out, k, k]

            def check():
                return _wrong(g.host(out[:rows]), xh().argmax(1))
        else:
            out = g.empty(r)
            kern, args = "logsumexp_kernel", [x, out, k, k]

            def check():
                v = xh()
                m = v.max(1)
                return _rel(g.host(out[:rows]), m + np.log(np.exp(v - m[:, None]).sum(1)))
    elif fam == "triton_gelu":
        n = c["n"]
        x, y = g.randn(n), g.empty(n)
        kern, args = "gelu_kernel", [x, y, n]
        kw, grid = dict(BLOCK=1024, num_warps=4), ((n + 1023) // 1024,)

        def check():
            v = g.host(x[:1 << 20]).astype(np.float64)
            ref = 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
            return _rel(g.host(y[:1 << 20]), ref)
    elif fam == "triton_embbag":
        b, ln, v, d = c["bags"], c["L"], c["V"], c["D"]
        idx, table, out = g.randint(0, v, b * ln), g.randn(v, d), g.empty(b, d)
        kern, args = "embbag_kernel", [idx, table, out, ln, d]
        kw, grid = dict(BLOCK_D=_pow2(d), num_warps=4), (b,)
        inits = {0: dict(kind="randint", low=0, high=v)}

        def check():
            k = min(b, 256)
            ih = g.host(idx[:k * ln]).astype(np.int64).reshape(k, ln)
            ref = g.host(table).astype(np.float64)[ih].sum(1)
            return _rel(g.host(out[:k]), ref)
    else:
        raise KeyError(fam)
    return kern, args, kw, grid, check, inits


def ptx_kernel(fam):
    """(PTX text, entry) of a held4 PTX family."""
    import model_set_held4_ptx as P
    return P.KERNELS[fam]()


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held4 PTX case; scalars as numpy scalars of the parameter's type."""
    fam = c["family"]
    if fam == "ptx_dp4a_dot":
        r, kw = c["rows"], c["kw"]
        db = g.randint(-2 ** 31, 2 ** 31, kw * r).reshape(kw, r)
        q, out = g.randint(-2 ** 31, 2 ** 31, kw), _int_out(g, r)
        args, grid = [np.uint32(r), np.uint32(kw), db, q, out], ((r + 255) // 256,)

        def check():                      # the first 4096 vectors, exactly (int64 numpy)
            k = min(r, 4096)
            v = np.ascontiguousarray(g.host(db[:, :k]).T).view(np.int8).astype(np.int64)
            qq = np.ascontiguousarray(g.host(q)).view(np.int8).astype(np.int64)
            return _wrong(g.host(out[:k]), (v @ qq).astype(np.int32))
        return args, grid, (256,), check, {}
    if fam == "ptx_xorshift":
        threads, per = c["blocks"] * 256, c["per"]
        out = g.empty(per, threads)
        args, grid = [np.uint32(per), out], (c["blocks"],)

        def check():                      # every number of the first 4096 threads, exactly
            k = min(threads, 4096)
            x = (np.arange(k, dtype=np.uint32) * np.uint32(0x9E3779B9)
                 + np.uint32(0x6A09E667))
            ref = np.empty((per, k), np.float32)
            for j in range(per):
                x ^= x << np.uint32(13)
                x ^= x >> np.uint32(17)
                x ^= x << np.uint32(5)
                ref[j] = (x >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
            return _wrong(g.host(out[:, :k]), ref)
        return args, grid, (256,), check, {}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held4", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held4", save_triton_small)      # python with Triton (/work/tvenv)
