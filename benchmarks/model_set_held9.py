"""The ninth held-out group (held9) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2 .. held8; tests/test_model_set.py
checks it), built blind as held4 .. held8: no case of this group was simulated, or sized by a
prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200:
~4 TB/s DRAM, ~67 TFLOP/s fp32, 132 SMs, 50 MB L2), from ~10 us to a few hundred us. Kernels:
Numba (model_set_held9_numba.py), Triton (model_set_held9_triton.py) and PTX made with ptxgen's
Builder (model_set_held9_ptx.py); arguments, launch and check are written once against held3's
array interface `g`, so the CPU test runs the very same launch at a small size on ptxgen's
emulator. New here: a sequential solver per thread with divisions down and back up a column of
an interleaved batch (tridiag_thomas), a dynamic-programming row in per-thread local memory
indexed at run time (edit_distance_local, its bytes recorded as init "randint"), scattered
in-row writes of a bit-reversal permutation (bitrev_rows, brev), im2col's nine-fold copies with
zero padding (im2col3x3), a Triton program looping twice over a long contiguous span
(triton_group_norm), a fused loss forward and backward with one partial sum per program
(triton_bce_fused), single-token decode attention with grouped queries (8 query heads on one KV
head, tl.dot on float16 K/V caches, online softmax; triton_decode_gqa), popc over 64-byte
records read by four 16-byte loads a thread (ptx_tanimoto), long chains of 32x32->64-bit
multiplies and Barrett reductions (ptx_modinv_fermat) and a warp-shuffle (shfl.sync.up)
segmented scan (ptx_seg_scan_warp). Checks compare with float64 (or exact integer) numpy
references over a slice; tests/test_model_set.py also runs each check on an output larger than
its slice.
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _brev32, _double, _int_out, _wrong
from model_set_held5 import _cast

NUMBA_FAMILIES = {"tridiag_thomas", "edit_distance_local", "bitrev_rows", "im2col3x3"}
TRITON_FAMILIES = {"triton_group_norm", "triton_bce_fused", "triton_decode_gqa"}
PTX_FAMILIES = {"ptx_tanimoto", "ptx_modinv_fermat", "ptx_seg_scan_warp"}  # ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not 1e-5 (PTX cases default to 0):
# edit distances and permuted copies are exact; the warp scan adds in a tree order, not
# numpy's sequential one; decode_gqa rounds its probabilities to float16 for the P V tl.dot
TOLERANCE = {"edit_distance_local": 0.0, "bitrev_rows": 0.0, "im2col3x3": 0.0,
             "ptx_seg_scan_warp": 1e-6,
             "triton_decode_gqa": 1e-3}
ALPHABET = 4           # edit_distance_local: bytes drawn from [0, ALPHABET) (DNA letters)
EXTRA = 4              # edit_distance_local: the second strings are this much longer
HEAD_DIM = 128         # triton_decode_gqa: a head's width
GROUP = 8              # triton_decode_gqa: query heads sharing one KV head
KEYS = 4               # ptx_seg_scan_warp: keys drawn from [0, KEYS); a run of equal keys
#                        is a segment


def cases():
    """(family, source, size label, parameters) of every held9 case, two sizes per family."""
    out = []
    for m, ns in ((64, 50_021), (160, 200_003)):
        out.append(("tridiag_thomas", "numba", f"{m}x{ns}", dict(m=m, systems=ns)))
    for n, ln in ((200_003, 24), (600_011, 32)):
        out.append(("edit_distance_local", "numba", f"pairs={n} len={ln}", dict(n=n, l=ln)))
    for r, bits in ((3001, 12), (8191, 13)):
        out.append(("bitrev_rows", "numba", f"{r}x{1 << bits}", dict(rows=r, bits=bits)))
    for ch, hw in ((64, 223), (128, 447)):
        out.append(("im2col3x3", "numba", f"{ch}x{hw}x{hw}", dict(c=ch, h=hw, w=hw)))
    for nn, ch, hw in ((4, 320, 3969), (16, 640, 2025)):
        out.append(("triton_group_norm", "triton", f"{nn}x{ch}x{hw}",
                    dict(n=nn, c=ch, hw=hw, groups=32)))
    for n in (5_000_011, 100_000_007):
        out.append(("triton_bce_fused", "triton", f"n={n}", dict(n=n)))
    for kvh, s in ((64, 3001), (256, 8191)):
        out.append(("triton_decode_gqa", "triton", f"kvheads={kvh} S={s}", dict(kvh=kvh, s=s)))
    for n in (1_000_003, 12_000_007):
        out.append(("ptx_tanimoto", "ptx", f"n={n}", dict(n=n)))
    for n in (300_007, 4_000_037):
        out.append(("ptx_modinv_fermat", "ptx", f"n={n}", dict(n=n)))
    for n in (3_000_017, 80_000_023):
        out.append(("ptx_seg_scan_warp", "ptx", f"n={n}", dict(n=n)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"tridiag_thomas": dict(m=9, systems=301), "edit_distance_local": dict(n=301, l=9),
              "bitrev_rows": dict(rows=5, bits=9), "im2col3x3": dict(c=3, h=11, w=13),
              "triton_group_norm": dict(n=2, c=6, hw=700, groups=3),
              "triton_bce_fused": dict(n=3001), "triton_decode_gqa": dict(kvh=3, s=150),
              "ptx_tanimoto": dict(n=1001), "ptx_modinv_fermat": dict(n=301),
              "ptx_seg_scan_warp": dict(n=2001)}[fam])
    return c


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


def bitrev_index(bits):
    """The bit-reversed position of each of 2^bits indices."""
    return (_brev32(np.arange(1 << bits)) >> np.uint32(32 - bits)).astype(np.int64)


def im2col_ref(img):
    """The (C 9, H W) im2col matrix of a 3x3, stride-1, zero-padded convolution of img."""
    img = np.asarray(img)
    ch, h, w = img.shape
    pad = np.pad(img, ((0, 0), (1, 1), (1, 1)))
    return np.stack([pad[:, ky:ky + h, kx:kx + w] for ky in range(3) for kx in range(3)],
                    1).reshape(ch * 9, h * w)


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held9 Numba case."""
    fam, inits = c["family"], {}
    if fam == "tridiag_thomas":
        m, ns = c["m"], c["systems"]
        a, cc = g.rand(m, ns) - 0.5, g.rand(m, ns) - 0.5     # |a| + |c| < 1 < b: dominant
        b, d = g.rand(m, ns) * 2 + 2, g.randn(m, ns)
        cw, x = g.empty(m, ns), g.empty(m, ns)
        args, grid, block = [a, b, cc, d, cw, x], ((ns + 127) // 128,), (128,)

        def check():                      # the first 256 systems
            return _rel(g.host(x[:, :256]), thomas_ref(*(g.host(v[:, :256])
                                                         for v in (a, b, cc, d))))
    elif fam == "edit_distance_local":
        import model_set_held9_numba as N
        n, ln = c["n"], c["l"]
        assert ln + EXTRA < N.ROW, "edit_distance_local: strings longer than its local row"
        s = _cast(g.randint(0, ALPHABET, n * ln), "uint8").reshape(n, ln)
        t = _cast(g.randint(0, ALPHABET, n * (ln + EXTRA)), "uint8").reshape(n, ln + EXTRA)
        out = _int_out(g, n)
        args, grid, block = [s, t, out], ((n + 127) // 128,), (128,)
        inits = {0: dict(kind="randint", low=0, high=ALPHABET),
                 1: dict(kind="randint", low=0, high=ALPHABET)}

        def check():                      # the first 4096 pairs, exactly
            return _wrong(g.host(out[:4096]), edit_ref(g.host(s[:4096]), g.host(t[:4096])))
    elif fam == "bitrev_rows":
        r, bits = c["rows"], c["bits"]
        x, y = g.randn(r, 1 << bits), g.empty(r, 1 << bits)
        args, grid, block = [x, y, bits], (((r << bits) + 255) // 256,), (256,)

        def check():                      # the first 64 rows, exactly
            return _wrong(g.host(y[:64]), g.host(x[:64])[:, bitrev_index(bits)])
    elif fam == "im2col3x3":
        ch, h, w = c["c"], c["h"], c["w"]
        img, cols = g.randn(ch, h, w), g.empty(ch * 9, h * w)
        args, grid, block = [img, cols], ((ch * 9 * h * w + 255) // 256,), (256,)

        def check():                      # the first 4 channels' 36 rows, exactly
            return _wrong(g.host(cols[:36]), im2col_ref(g.host(img[:4])))
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def group_norm_ref(x, w, b, groups, eps):
    """GroupNorm of x (N, C, HW) in float64 with per-channel scale w and shift b."""
    x = np.asarray(x, np.float64)
    nn, ch, hw = x.shape
    v = x.reshape(nn, groups, -1)
    y = (v - v.mean(2, keepdims=True)) / np.sqrt(v.var(2, keepdims=True) + eps)
    return y.reshape(nn, ch, hw) * _double(w)[:, None] + _double(b)[:, None]


def bce_ref(x, t):
    """(gradient without the 1/n, loss) of binary cross-entropy with logits x, targets t."""
    x, t = np.asarray(x, np.float64), np.asarray(t, np.float64)
    return 1 / (1 + np.exp(-x)) - t, np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))


def attn_ref(q, k, v, group):
    """Single-query softmax attention: q (KVH group, D), each group of query heads on one KV
    head's k and v (KVH, S, D), float64."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    k, v = np.repeat(k, group, 0), np.repeat(v, group, 0)
    s = np.einsum("hsd,hd->hs", k, q) / np.sqrt(q.shape[1])
    p = np.exp(s - s.max(1, keepdims=True))
    return np.einsum("hs,hsd->hd", p / p.sum(1, keepdims=True), v)


def triton_case(g, c):
    """(kernel name in model_set_held9_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held9 Triton case."""
    fam, inits = c["family"], {}
    if fam == "triton_group_norm":
        nn, ch, hw, grp = c["n"], c["c"], c["hw"], c["groups"]
        x, w, bias, y = g.randn(nn, ch, hw), g.randn(ch), g.randn(ch), g.empty(nn, ch, hw)
        kern, args = "group_norm_kernel", [x, w, bias, y, ch, hw, grp, 1e-5]
        kw = dict(BLOCK=1024, num_warps=4)

        def check():                      # the first sample's groups
            return _rel(g.host(y[:1]), group_norm_ref(g.host(x[:1]), g.host(w), g.host(bias),
                                                      grp, 1e-5))
        return kern, args, kw, (nn * grp,), check, inits
    if fam == "triton_bce_fused":
        n = c["n"]
        nb = (n + 1023) // 1024
        x, t, gr, part = g.randn(n), g.rand(n), g.empty(n), g.empty(nb)
        kern, args = "bce_fused_kernel", [x, t, gr, part, n, 1.0 / n]
        kw = dict(BLOCK=1024, num_warps=4)

        def check():                      # the first 2^20 gradients, 256 partial sums
            k = min(n, 256 * 1024)
            grad, loss = bce_ref(g.host(x[:1 << 20]), g.host(t[:1 << 20]))
            sums = np.add.reduceat(loss[:k], np.arange(0, k, 1024))
            return max(_rel(g.host(gr[:1 << 20]), grad / n), _rel(g.host(part[:256]), sums))
        return kern, args, kw, (nb,), check, inits
    if fam == "triton_decode_gqa":
        kvh, s = c["kvh"], c["s"]
        q = _cast(g.randn(kvh * GROUP, HEAD_DIM), "float16")
        k = _cast(g.randn(kvh, s, HEAD_DIM), "float16")
        v = _cast(g.randn(kvh, s, HEAD_DIM), "float16")
        o = g.empty(kvh * GROUP, HEAD_DIM)
        kern, args = "decode_gqa_kernel", [q, k, v, o, s, float(HEAD_DIM ** -0.5)]
        kw = dict(G=GROUP, BH=16, D=HEAD_DIM, BS=64, num_warps=4)

        def check():                      # the query heads of the first 2 KV heads
            return _rel(g.host(o[:2 * GROUP]), attn_ref(g.host(q[:2 * GROUP]),
                                                        g.host(k[:2]), g.host(v[:2]), GROUP))
        return kern, args, kw, (kvh,), check, inits
    raise KeyError(fam)


def ptx_kernel(fam):
    """(PTX text, entry) of a held9 PTX family."""
    import model_set_held9_ptx as P
    return P.KERNELS[fam]()


def tanimoto_ref(q, db):
    """popc(f & q) / popc(f | q) in float32 for each 512-bit fingerprint f of db (int32 words)."""
    import model_set_held9_ptx as P
    f = np.asarray(db, np.int32).reshape(-1, P.FP_WORDS)
    qq = np.asarray(q, np.int32)[None, :]

    def pop(w):
        return np.unpackbits(np.ascontiguousarray(w).view(np.uint8), axis=1).sum(1)
    return (pop(f & qq).astype(np.float32) / pop(f | qq).astype(np.float32)).astype(np.float32)


def modinv_ref(a):
    """a^(PRIME-2) mod PRIME for each a (square-and-multiply in uint64), as int32."""
    import model_set_held9_ptx as P
    x = np.asarray(a).astype(np.uint64)
    p, r = np.uint64(P.PRIME), x.copy()
    for bit in bin(P.PRIME - 2)[3:]:
        r = r * r % p
        if bit == "1":
            r = r * x % p
    return r.astype(np.int32)


def seg_scan_ref(x, keys):
    """ptx_seg_scan_warp's result: inclusive sums over runs of equal keys within each 32-element
    window, float64 (a partial last window padded past the end)."""
    n = len(x)
    pad = -n % 32
    x = np.pad(np.asarray(x, np.float64), (0, pad)).reshape(-1, 32)
    k = np.pad(np.asarray(keys), (0, pad), mode="edge").reshape(-1, 32)
    out = x.copy()
    for lane in range(1, 32):
        same = k[:, lane] == k[:, lane - 1]
        out[:, lane] += np.where(same, out[:, lane - 1], 0.0)
    return out.reshape(-1)[:n]


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held9 PTX case; scalars as numpy scalars of the parameter's type."""
    import model_set_held9_ptx as P
    fam, n = c["family"], c["n"]
    grid = ((n + 255) // 256,)
    if fam == "ptx_tanimoto":
        q = g.randint(-2 ** 31, 2 ** 31 - 1, P.FP_WORDS)
        db, sim = g.randint(-2 ** 31, 2 ** 31 - 1, P.FP_WORDS * n), g.empty(n)

        def check():                      # the first 2^16 fingerprints, exactly
            k = 1 << 16
            return _wrong(g.host(sim[:k]), tanimoto_ref(g.host(q), g.host(db[:P.FP_WORDS * k])))
        return [np.uint32(n), q, db, sim], grid, (256,), check, {}
    if fam == "ptx_modinv_fermat":
        a, out = g.randint(1, P.PRIME, n), _int_out(g, n)

        def check():                      # the first 2^16 inverses, exactly
            return _wrong(g.host(out[:1 << 16]), modinv_ref(g.host(a[:1 << 16])))
        return [np.uint32(n), a, out], grid, (256,), check, {}
    if fam == "ptx_seg_scan_warp":
        x, keys, y = g.randn(n), g.randint(0, KEYS, n), g.empty(n)

        def check():                      # the first 2^20 elements
            k = 1 << 20
            return _rel(g.host(y[:k]), seg_scan_ref(g.host(x[:k]), g.host(keys[:k])))
        return [np.uint32(n), x, keys, y], grid, (256,), check, {}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held9", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held9", save_triton_small)      # python with Triton (/work/tvenv)
