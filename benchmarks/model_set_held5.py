"""The fifth held-out group (held5) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2, held3, held4;
tests/test_model_set.py checks it), built blind: no case of this group was simulated, or sized
by a prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate
(H200: ~4 TB/s DRAM, ~67 TFLOP/s fp32, ~34 TFLOP/s fp64, 132 SMs, 50 MB L2), from ~10 us to a
few ms. Kernels: Numba (model_set_held5_numba.py), Triton (model_set_held5_triton.py) and PTX
made with ptxgen's Builder (model_set_held5_ptx.py). As in held3/held4 each case's arguments,
launch and check are written once against the small array interface `g` (model_set.Gpu's torch
tensors on the GPU, held3's HostArrays' numpy arrays on the CPU), so the CPU test runs the very
same launch at a small size on ptxgen's emulator. New here: 8- and 16-bit data (uint8 images,
float16 vectors) and index arrays whose values the simulator must redraw to see the kernel's
addresses: CSR row offsets (init kind "offsets": a scan of random row lengths) and sorted
arrays (init "sorted"), and normal data whose values decide an early exit (init "randn"),
which model_eval.pointer draws. Checks compare with float64 (or exact
integer) numpy references over a slice; for labels, indices and counts the result is the
fraction of wrong ones; for dropout, the fraction of elements neither dropped nor scaled
right, or 1 where the kept fraction is off by more than five standard deviations.
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _double, _int_out, _pow2, _wrong

NUMBA_FAMILIES = {"csr_expand", "merge_path", "pointer_chase", "bfs_level", "sobel_u8",
                  "dgemm_tiled", "conv1d_smem", "find_first_vote", "atomic_minmax"}
TRITON_FAMILIES = {"triton_dropout", "triton_xent", "triton_swish_f16"}
PTX_FAMILIES = {"ptx_hfma2_axpy", "ptx_divmod_roll"}     # built with ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not 1e-5 (half-precision outputs)
TOLERANCE = {"triton_swish_f16": 2e-3, "ptx_hfma2_axpy": 2e-3}


def cases():
    """(family, source, size label, parameters) of every held5 case, two sizes per family."""
    out = []
    for r, hi in ((1_000_003, 25), (4_000_037, 61)):
        out.append(("csr_expand", "numba", f"rows={r} nnz/row={(hi - 1) // 2}",
                    dict(rows=r, hi=hi)))
    for na, nb in ((5_000_011, 4_999_989), (50_000_017, 30_000_001)):
        out.append(("merge_path", "numba", f"{na}+{nb}", dict(na=na, nb=nb)))
    for n, hops in ((1_000_003, 16), (20_000_003, 5)):
        out.append(("pointer_chase", "numba", f"n={n} hops={hops}", dict(n=n, hops=hops)))
    for n, hi in ((2_000_003, 17), (6_000_011, 21)):
        out.append(("bfs_level", "numba", f"n={n} deg={(hi - 1) // 2}", dict(n=n, hi=hi)))
    for h, w in ((2999, 4001), (8191, 12289)):
        out.append(("sobel_u8", "numba", f"{h}x{w}", dict(h=h, w=w)))
    for m, k, n in ((999, 777, 1001), (2003, 2001, 1999)):
        out.append(("dgemm_tiled", "numba", f"{m}x{k}x{n}", dict(m=m, k=k, n=n)))
    for n, taps in ((4_000_037, 127), (50_000_021, 31)):
        out.append(("conv1d_smem", "numba", f"n={n} taps={taps}", dict(n=n, taps=taps)))
    for r, k, th in ((100_000, 1200, 2.5), (20_000, 6000, 3.5)):
        out.append(("find_first_vote", "numba", f"{r}x{k} thresh={th}",
                    dict(rows=r, cols=k, thresh=th)))
    for n, nb in ((10_000_019, 1000), (30_000_001, 100_003)):
        out.append(("atomic_minmax", "numba", f"n={n} buckets={nb}", dict(n=n, buckets=nb)))
    for n, p in ((10_000_019, 0.1), (150_000_001, 0.5)):
        out.append(("triton_dropout", "triton", f"n={n} p={p}", dict(n=n, p=p)))
    for r, k in ((4096, 32003), (50_000, 1000)):
        out.append(("triton_xent", "triton", f"{r}x{k}", dict(rows=r, cols=k)))
    for n in (25_000_003, 400_000_009):
        out.append(("triton_swish_f16", "triton", f"n={n}", dict(n=n)))
    for n in (20_000_008, 300_000_056):
        out.append(("ptx_hfma2_axpy", "ptx", f"n={n}", dict(n=n)))
    for shape, shift in (((97, 301, 503), (5, 17, 250)), ((301, 1001, 999), (300, 1, 998))):
        out.append(("ptx_divmod_roll", "ptx", "x".join(map(str, shape)),
                    dict(shape=shape, shift=shift)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"csr_expand": dict(rows=300, hi=9), "merge_path": dict(na=700, nb=333),
              "pointer_chase": dict(n=500, hops=7), "bfs_level": dict(n=400, hi=7),
              "sobel_u8": dict(h=70, w=13), "dgemm_tiled": dict(m=37, k=21, n=29),
              "conv1d_smem": dict(n=700, taps=45),
              "find_first_vote": dict(rows=40, cols=300, thresh=1.5),
              "atomic_minmax": dict(n=2000, buckets=37),
              "triton_dropout": dict(n=3000, p=0.3), "triton_xent": dict(rows=20, cols=1500),
              "triton_swish_f16": dict(n=3000), "ptx_hfma2_axpy": dict(n=2056),
              "ptx_divmod_roll": dict(shape=(3, 7, 11), shift=(1, 9, 4))}[fam])
    return c


# -- one array interface over numpy (CPU) and torch (GPU) arrays -----------------------------
def _xp(a):
    if isinstance(a, np.ndarray):
        return np
    import torch
    return torch


def _cast(a, dtype):
    """a converted to the dtype of this numpy name (torch's of the same name on the GPU)."""
    if isinstance(a, np.ndarray):
        return a.astype(dtype)
    return a.to(getattr(_xp(a), dtype))


def _copy(a):
    return a.copy() if isinstance(a, np.ndarray) else a.clone()


def _sorted(a):
    return np.sort(a) if isinstance(a, np.ndarray) else a.sort().values


def _offsets(lens):
    """CSR row offsets: 0, then the running sum of the row lengths (int32)."""
    xp = _xp(lens)
    return _cast(xp.concatenate([lens[:1] * 0, xp.cumsum(lens, 0)]), "int32")


def _cycle(g, n):
    """succ of a linked list that runs once through all n nodes in a random order."""
    xp = _xp(g.rand(1))
    perm = xp.argsort(g.rand(n))
    succ = _copy(perm)
    succ[perm] = xp.roll(perm, -1)
    return _cast(succ, "int32")


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held5 Numba case."""
    fam, inits = c["family"], {}
    if fam == "csr_expand":
        r, hi = c["rows"], c["hi"]
        rowptr = _offsets(g.randint(0, hi, r))
        nnz = int(g.host(rowptr[-1:])[0])
        rowids = _int_out(g, nnz)
        args, grid, block = [rowptr, rowids], ((r + 255) // 256,), (256,)
        inits = {0: dict(kind="offsets", low=0, high=hi, total=nnz)}

        def check():                      # the first 65536 rows' entries, exactly
            k = min(r, 65536)
            ref = np.repeat(np.arange(k), np.diff(g.host(rowptr[:k + 1])))
            return _wrong(g.host(rowids[:len(ref)]), ref)
    elif fam == "merge_path":
        na, nb = c["na"], c["nb"]
        a = _sorted(g.randint(0, 2 ** 31 - 1, na))
        b = _sorted(g.randint(0, 2 ** 31 - 1, nb))
        out = _int_out(g, na + nb)
        args, grid, block = [a, b, out], ((na + nb + 2047) // 2048,), (256,)
        inits = {i: dict(kind="randint", low=0, high=2 ** 31 - 1, sorted=True) for i in (0, 1)}

        def check():                      # the 65536 smallest and the 65536 largest, exactly
            k = min(na, nb, 65536)
            lo = np.sort(np.concatenate([g.host(a[:k]), g.host(b[:k])]))[:k]
            hi = np.sort(np.concatenate([g.host(a[na - k:]), g.host(b[nb - k:])]))[k:]
            return _wrong(np.concatenate([g.host(out[:k]), g.host(out[na + nb - k:])]),
                          np.concatenate([lo, hi]))
    elif fam == "pointer_chase":
        n, hops = c["n"], c["hops"]
        succ, w = _cycle(g, n), g.randint(0, 1000, n)
        end, total = _int_out(g, n), _int_out(g, n)
        args, grid, block = [succ, w, end, total, hops], ((n + 255) // 256,), (256,)
        inits = {0: dict(kind="randperm")}

        def check():                      # the first 65536 walks, exactly
            sh, wh = g.host(succ).astype(np.int64), g.host(w).astype(np.int64)
            p = np.arange(min(n, 65536))
            s = np.zeros_like(p)
            for _ in range(hops):
                s, p = s + wh[p], sh[p]
            return _wrong(np.concatenate([g.host(end[:len(p)]), g.host(total[:len(p)])]),
                          np.concatenate([p, s]))
    elif fam == "bfs_level":
        n, hi, cur = c["n"], c["hi"], 2
        rowptr = _offsets(g.randint(0, hi, n))
        nnz = int(g.host(rowptr[-1:])[0])
        cols, level = g.randint(0, n, nnz), g.randint(-1, cur + 1, n)
        out = _copy(level)
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
            return _wrong(g.host(out), ref)
    elif fam == "sobel_u8":
        h, w = c["h"], c["w"]
        img = _cast(g.randint(0, 256, h * w), "uint8").reshape(h, w)
        out = _cast(g.zeros(h, w, integer=True), "uint8")
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
            return _wrong(g.host(out[:rows]), ref)
    elif fam == "dgemm_tiled":
        m, k, n = c["m"], c["k"], c["n"]
        a, b, o = _double(g.randn(m, k)), _double(g.randn(k, n)), _double(g.empty(m, n))
        args, grid, block = [a, b, o], ((n + 15) // 16, (m + 15) // 16), (16, 16)

        def check():                      # the first 64 rows
            return _rel(g.host(o[:64]), g.host(a[:64]) @ g.host(b))
    elif fam == "conv1d_smem":
        n, taps = c["n"], c["taps"]
        x, f, y = g.randn(n), g.randn(taps), g.empty(n - taps + 1)
        args, grid, block = [x, f, y], ((n - taps + 256) // 256,), (256,)

        def check():                      # the first 65536 outputs
            k = min(n - taps + 1, 65536)
            xh = g.host(x[:k + taps - 1]).astype(np.float64)
            ref = np.correlate(xh, g.host(f).astype(np.float64), mode="valid")
            return _rel(g.host(y[:k]), ref)
    elif fam == "find_first_vote":
        r, k, th = c["rows"], c["cols"], c["thresh"]
        x, out = g.randn(r, k), _int_out(g, r)
        args, grid, block = [x, out, th], ((r * 32 + 255) // 256,), (256,)
        inits = {0: dict(kind="randn")}   # the values decide where each warp stops

        def check():                      # wrong indices among the first 4096 rows
            above = g.host(x[:4096]) > np.float32(th)
            ref = np.where(above.any(1), above.argmax(1), -1)
            return _wrong(g.host(out[:len(ref)]), ref)
    elif fam == "atomic_minmax":
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
            return _wrong(np.concatenate([g.host(mn[:k]), g.host(mx[:k])]),
                          np.concatenate([lo, hi]))
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def triton_case(g, c):
    """(kernel name in model_set_held5_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held5 Triton case (a name: the CPU side builds the arguments
    without importing Triton)."""
    fam, inits = c["family"], {}
    if fam == "triton_dropout":
        n, p = c["n"], c["p"]
        x, y = g.randn(n), g.empty(n)
        kern, args = "dropout_kernel", [x, y, n, p, 1234]
        kw, grid = dict(BLOCK=1024, num_warps=4), ((n + 1023) // 1024,)

        def check():                      # the first 2^20 elements
            xh, yh = g.host(x[:1 << 20]).astype(np.float64), g.host(y[:1 << 20])
            kept = yh != 0
            bad = np.mean(kept & (np.abs(yh - xh / (1 - p)) > 1e-6 * np.abs(xh / (1 - p))))
            off = abs(kept.mean() - (1 - p)) > 5 * np.sqrt(p * (1 - p) / len(yh))
            return 1.0 if off else float(bad)
    elif fam == "triton_xent":
        r, k = c["rows"], c["cols"]
        blk = min(4096, _pow2(k))
        x, lab, loss = g.randn(r, k), g.randint(0, k, r), g.empty(r)
        kern, args = "xent_kernel", [x, lab, loss, k, k]
        kw, grid = dict(BLOCK=blk, num_warps=8 if blk >= 4096 else 4), (r,)
        inits = {1: dict(kind="randint", low=0, high=k)}

        def check():                      # the first 512 rows
            rows = min(r, 512)
            v = g.host(x[:rows]).astype(np.float64)
            m = v.max(1)
            ref = (m + np.log(np.exp(v - m[:, None]).sum(1))
                   - v[np.arange(rows), g.host(lab[:rows])])
            return _rel(g.host(loss[:rows]), ref)
    elif fam == "triton_swish_f16":
        n = c["n"]
        x, y = _cast(g.randn(n), "float16"), _cast(g.empty(n), "float16")
        kern, args = "swish_f16_kernel", [x, y, n]
        kw, grid = dict(BLOCK=2048, num_warps=4), ((n + 2047) // 2048,)

        def check():                      # the first 2^20 elements
            v = g.host(x[:1 << 20]).astype(np.float64)
            return _rel(g.host(y[:1 << 20]), v / (1 + np.exp(-v)))
    else:
        raise KeyError(fam)
    return kern, args, kw, grid, check, inits


def ptx_kernel(fam):
    """(PTX text, entry) of a held5 PTX family."""
    import model_set_held5_ptx as P
    return P.KERNELS[fam]()


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held5 PTX case; scalars as numpy scalars of the parameter's type."""
    fam = c["family"]
    if fam == "ptx_hfma2_axpy":
        n, a = c["n"], 1.7
        x, y = _cast(g.randn(n), "float16"), _cast(g.randn(n), "float16")
        z = _cast(g.empty(n), "float16")
        a2 = np.array([a, a], np.float16).view(np.uint32)[0]
        args, grid = [np.uint32(n // 8), a2, x, y, z], ((n // 8 + 255) // 256,)

        def check():                      # the first 2^20 elements
            xh, yh = (g.host(v[:1 << 20]).astype(np.float64) for v in (x, y))
            return _rel(g.host(z[:1 << 20]), float(np.float16(a)) * xh + yh)
        return args, grid, (256,), check, {}
    if fam == "ptx_divmod_roll":
        (d, h, w), (dz, dy, dx) = c["shape"], c["shift"]
        src, dst = g.randn(d, h, w), g.empty(d, h, w)
        args = [np.uint32(v) for v in (d, h, w, dz, dy, dx)] + [src, dst]
        grid = ((d * h * w + 255) // 256,)

        def check():                      # the first two planes, exactly
            ref = np.roll(g.host(src), (-dz, -dy, -dx), axis=(0, 1, 2))[:2]
            return _wrong(g.host(dst[:2]), ref)
        return args, grid, (256,), check, {}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held5", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held5", save_triton_small)      # python with Triton (/work/tvenv)
