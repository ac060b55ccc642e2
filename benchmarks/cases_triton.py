"""Triton families of the model benchmark set: per family its sizes, its launch and its check,
as one record (model_common.family).

A setup takes the array interface `g` and the case and gives (kernel name in model_triton,
args, constexpr and launch keywords, grid, check, {argument index: init}).
"""
import numpy as np

from model_common import array_module, cast, double, int_out, pow2, registry, rel, wrong

family = registry("triton")

ADAM = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, bc1=1 - 0.9 ** 7, bc2=1 - 0.999 ** 7)
ROPE_HALF = 64          # triton_rope: half the head dimension (head dim 128)


def _softmax_causal_ref(v, q):
    """Row-wise softmax of v (float64) over columns 0..q[row], zeros beyond."""
    keep = np.arange(v.shape[1])[None, :] <= q[:, None]
    e = np.where(keep, np.exp(v - np.where(keep, v, -np.inf).max(1, keepdims=True)), 0.0)
    return e / e.sum(1, keepdims=True)


L2_DIM = 16             # triton_l2dist: the vectors' length
GROUP = 8              # triton_decode_gqa: query heads sharing one KV head
HEAD_DIM = 128         # triton_decode_gqa: a head's width


def attn_ref(q, k, v, group):
    """Single-query softmax attention: q (KVH group, D), each group of query heads on one KV
    head's k and v (KVH, S, D), float64."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    k, v = np.repeat(k, group, 0), np.repeat(v, group, 0)
    s = np.einsum("hsd,hd->hs", k, q) / np.sqrt(q.shape[1])
    p = np.exp(s - s.max(1, keepdims=True))
    return np.einsum("hs,hsd->hd", p / p.sum(1, keepdims=True), v)


def bce_ref(x, t):
    """(gradient without the 1/n, loss) of binary cross-entropy with logits x, targets t."""
    x, t = np.asarray(x, np.float64), np.asarray(t, np.float64)
    return 1 / (1 + np.exp(-x)) - t, np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))


def group_norm_ref(x, w, b, groups, eps):
    """GroupNorm of x (N, C, HW) in float64 with per-channel scale w and shift b."""
    x = np.asarray(x, np.float64)
    nn, ch, hw = x.shape
    v = x.reshape(nn, groups, -1)
    y = (v - v.mean(2, keepdims=True)) / np.sqrt(v.var(2, keepdims=True) + eps)
    return y.reshape(nn, ch, hw) * double(w)[:, None] + double(b)[:, None]


CONV_BLOCK = 1024          # triton_causal_dwconv: positions per program
CONV_W = 4                 # triton_causal_dwconv: the convolution's width


def dwconv_ref(x, w, bias):
    """Causal depthwise convolution (width w.shape[1]) plus bias, then SiLU, of x (B, C, L)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    wd = w.shape[1]
    pad = np.pad(x, ((0, 0), (0, 0), (wd - 1, 0)))
    ln = x.shape[2]
    a = sum(w[None, :, j, None] * pad[:, :, j:j + ln] for j in range(wd))
    a = a + double(bias)[None, :, None]
    return a / (1 + np.exp(-a))


def layernorm_bwd_ref(x, dy, w, mean, rstd):
    """LayerNorm's input gradient given the forward's mean and rstd per row, float64."""
    x, dy, w, mean, rstd = (np.asarray(a, np.float64) for a in (x, dy, w, mean, rstd))
    xhat = (x - mean[:, None]) * rstd[:, None]
    wdy = w * dy
    return (wdy - xhat * (xhat * wdy).mean(1, keepdims=True)
            - wdy.mean(1, keepdims=True)) * rstd[:, None]


KV_BS = 16                 # triton_paged_kv_write: tokens per cache block
SWIGLU_BLOCK = 1024        # triton_swiglu_f16: columns per program


def kl_rows_ref(s, t):
    """KL(softmax(t) || softmax(s)) per row, float64."""
    s, t = double(s), double(t)
    ls = s - s.max(1, keepdims=True)
    ls = ls - np.log(np.exp(ls).sum(1, keepdims=True))
    lt = t - t.max(1, keepdims=True)
    lt = lt - np.log(np.exp(lt).sum(1, keepdims=True))
    return (np.exp(lt) * (lt - ls)).sum(1)


def swiglu_ref(x):
    """silu(gate) * up of rows [gate | up], float64."""
    x = double(x)
    h = x.shape[1] // 2
    gate, up = x[:, :h], x[:, h:]
    return gate / (1 + np.exp(-gate)) * up


@family(sizes=[
        ('n=1048576', {'n': 1048576}),
        ('n=16777216', {'n': 16777216}),
        ('n=67108864', {'n': 67108864})])
def triton_add(g, c):
    check, inits = None, {}
    n = c["n"]
    x, y, o = g.randn(n), g.randn(n), g.empty(n)
    kern, args, kw, grid = "add_kernel", [x, y, o, n], dict(BLOCK=1024), (n // 1024,)
    check = lambda: float((o - (x + y)).norm() / (x + y).norm())  # noqa: E731
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('1024^3', {'m': 1024}),
        ('2048^3', {'m': 2048}),
        ('4096^3', {'m': 4096})])
def triton_matmul(g, c):
    check, inits = None, {}
    m = c["m"]
    a, b, o = g.randn(m, m), g.randn(m, m), g.empty(m, m)
    kern = "matmul_kernel"
    args = [a, b, o, m, m, m, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            o.stride(0), o.stride(1)]
    kw = dict(BM=128, BN=128, BK=32, num_warps=8, num_stages=3)
    grid = (m // 128, m // 128)

    def check():
        ref = a.double() @ b.double()
        return float((o.double() - ref).norm() / ref.norm())
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('4096x4096', {'rows': 4096, 'cols': 4096}),
        ('16384x1024', {'rows': 16384, 'cols': 1024})])
def triton_softmax(g, c):
    torch = g.torch
    check, inits = None, {}
    r, cc = c["rows"], c["cols"]
    x, o = g.randn(r, cc), g.empty(r, cc)
    kern, args, grid = "softmax_kernel", [o, x, x.stride(0), cc], (r,)
    kw = dict(BLOCK=cc, num_warps=8 if cc >= 2048 else 4)
    check = lambda: float((o - torch.softmax(x, 1)).norm() / torch.softmax(x, 1).norm())  # noqa
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('4096x4096', {'rows': 4096, 'cols': 4096}),
        ('8192x1024', {'rows': 8192, 'cols': 1024})])
def triton_layernorm(g, c):
    torch = g.torch
    check, inits = None, {}
    r, cc = c["rows"], c["cols"]
    x, y = g.randn(r, cc), g.empty(r, cc)
    w, b = g.randn(cc), g.randn(cc)
    kern, args, grid = "layernorm_kernel", [x, y, w, b, x.stride(0), cc, 1e-5], (r,)
    kw = dict(BLOCK=cc, num_warps=8 if cc >= 2048 else 4)

    def check():
        ref = torch.nn.functional.layer_norm(x.double(), (cc,), w.double(), b.double(), 1e-5)
        return float((y.double() - ref).norm() / ref.norm())
    return kern, args, kw, grid, check, inits


@family(sizes=[('n=4194304', {'n': 4194304}), ('n=16777216', {'n': 16777216})])
def triton_fused(g, c):
    torch = g.torch
    check, inits = None, {}
    n = c["n"]
    x, y, o = g.randn(n), g.randn(n), g.empty(n)
    kern, args, kw, grid = "fused_chain_kernel", [x, y, o, n], dict(BLOCK=1024), (n // 1024,)

    def check():
        z = x.double() * y.double() + 0.5 * x.double()
        ref = z * torch.sigmoid(z) + 0.25 * y.double().abs()
        return float((o.double() - ref).norm() / ref.norm())
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('4096x4096', {'rows': 4096, 'cols': 4096}),
        ('16384x1024', {'rows': 16384, 'cols': 1024})])
def triton_rowmax(g, c):
    check, inits = None, {}
    r, cc = c["rows"], c["cols"]
    x, o = g.randn(r, cc), g.empty(r)
    kern, args, grid = "rowmax_kernel", [x, o, x.stride(0), cc], (r,)
    kw = dict(BLOCK=cc, num_warps=8 if cc >= 2048 else 4)
    check = lambda: float((o - x.amax(1)).norm() / x.amax(1).norm())  # noqa: E731
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('4096x4096', {'rows': 4096, 'cols': 4096}),
        ('16384x8192', {'rows': 16384, 'cols': 8192})], small={'rows': 100, 'cols': 72})
def triton_transpose(g, c):
    m, n = c["rows"], c["cols"]
    x, y = g.randn(m, n), g.empty(n, m)
    kern, args = "transpose_kernel", [x, y, m, n, n, m]
    kw, grid = dict(BM=64, BN=64, num_warps=4), ((m + 63) // 64, (n + 63) // 64)

    def check():
        return rel(g.host(y[:256]), g.host(x[:, :256]).T)
    return kern, args, kw, grid, check, {}


@family(sizes=[
        ('4096x16384', {'rows': 4096, 'cols': 16384}),
        ('16384x2048', {'rows': 16384, 'cols': 2048})], small={'rows': 70, 'cols': 200})
def triton_colsum(g, c):
    m, n = c["rows"], c["cols"]
    x, out = g.randn(m, n), g.empty(n)
    kern, args = "colsum_kernel", [x, out, m, n, n]
    kw, grid = dict(BM=32, BN=128, num_warps=4), ((n + 127) // 128,)

    def check():
        return rel(g.host(out[:256]), g.host(x[:, :256]).astype(np.float64).sum(0))
    return kern, args, kw, grid, check, {}


@family(sizes=[
        ('batch=8192 32^3', {'batch': 8192, 's': 32}),
        ('batch=8192 64^3', {'batch': 8192, 's': 64})], small={'batch': 3})
def triton_bmm_small(g, c):
    b, s = c["batch"], c["s"]
    a, bb, o = g.randn(b, s, s), g.randn(b, s, s), g.empty(b, s, s)
    kern, args, kw, grid = "bmm_small_kernel", [a, bb, o], dict(S=s, num_warps=4), (b,)

    def check():
        k = min(b, 64)
        ref = g.host(a[:k]).astype(np.float64) @ g.host(bb[:k]).astype(np.float64)
        return rel(g.host(o[:k]), ref)
    return kern, args, kw, grid, check, {}


@family(name='triton_logsumexp', sizes=[
        ('4096x10000', {'rows': 4096, 'cols': 10000}),
        ('100000x200', {'rows': 100000, 'cols': 200})], small={'rows': 20, 'cols': 300})
@family(name='triton_argmax', sizes=[
        ('4096x3000', {'rows': 4096, 'cols': 3000}),
        ('50000x1000', {'rows': 50000, 'cols': 1000})],
        small={'rows': 20, 'cols': 300}, tolerance=0.001)
@family(name='triton_rmsnorm', sizes=[
        ('8192x5120', {'rows': 8192, 'cols': 5120}),
        ('65536x768', {'rows': 65536, 'cols': 768})], small={'rows': 20, 'cols': 300})
def triton_rmsnorm_argmax_logsumexp(g, c):
    fam, inits = c['family'], {}
    r, k = c["rows"], c["cols"]
    blk = pow2(k)
    kw = dict(BLOCK=blk, num_warps=16 if blk >= 16384 else 8 if blk >= 2048 else 4)
    x, grid, rows = g.randn(r, k), (r,), min(r, 1024)
    xh = lambda: g.host(x[:rows]).astype(np.float64)  # noqa: E731
    if fam == "triton_rmsnorm":
        w, y = g.randn(k), g.empty(r, k)
        kern, args = "rmsnorm_kernel", [x, y, w, k, k, 1e-6]

        def check():
            v = xh()
            ref = v / np.sqrt((v * v).mean(1, keepdims=True) + 1e-6) * g.host(w)
            return rel(g.host(y[:rows]), ref)
    elif fam == "triton_argmax":
        out = int_out(g, r)
        kern, args = "argmax_kernel", [x, out, k, k]

        def check():
            return wrong(g.host(out[:rows]), xh().argmax(1))
    else:
        out = g.empty(r)
        kern, args = "logsumexp_kernel", [x, out, k, k]

        def check():
            v = xh()
            m = v.max(1)
            return rel(g.host(out[:rows]), m + np.log(np.exp(v - m[:, None]).sum(1)))
    return kern, args, kw, grid, check, inits


@family(sizes=[('n=10000000', {'n': 10000000}), ('n=100000007', {'n': 100000007})],
        small={'n': 3000})
def triton_gelu(g, c):
    inits = {}
    n = c["n"]
    x, y = g.randn(n), g.empty(n)
    kern, args = "gelu_kernel", [x, y, n]
    kw, grid = dict(BLOCK=1024, num_warps=4), ((n + 1023) // 1024,)

    def check():
        v = g.host(x[:1 << 20]).astype(np.float64)
        ref = 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
        return rel(g.host(y[:1 << 20]), ref)
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('bags=16384 L=20 V=100000 D=128', {'bags': 16384, 'L': 20, 'V': 100000, 'D': 128}),
        ('bags=65536 L=50 V=1000000 D=96', {'bags': 65536, 'L': 50, 'V': 1000000, 'D': 96})],
        small={'bags': 10, 'L': 7, 'V': 50, 'D': 96})
def triton_embbag(g, c):
    inits = {}
    b, ln, v, d = c["bags"], c["L"], c["V"], c["D"]
    idx, table, out = g.randint(0, v, b * ln), g.randn(v, d), g.empty(b, d)
    kern, args = "embbag_kernel", [idx, table, out, ln, d]
    kw, grid = dict(BLOCK_D=pow2(d), num_warps=4), (b,)
    inits = {0: dict(kind="randint", low=0, high=v)}

    def check():
        k = min(b, 256)
        ih = g.host(idx[:k * ln]).astype(np.int64).reshape(k, ln)
        ref = g.host(table).astype(np.float64)[ih].sum(1)
        return rel(g.host(out[:k]), ref)
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('n=10000019 p=0.1', {'n': 10000019, 'p': 0.1}),
        ('n=150000001 p=0.5', {'n': 150000001, 'p': 0.5})], small={'n': 3000, 'p': 0.3})
def triton_dropout(g, c):
    inits = {}
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
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('4096x32003', {'rows': 4096, 'cols': 32003}),
        ('50000x1000', {'rows': 50000, 'cols': 1000})], small={'rows': 20, 'cols': 1500})
def triton_xent(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    blk = min(4096, pow2(k))
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
        return rel(g.host(loss[:rows]), ref)
    return kern, args, kw, grid, check, inits


@family(sizes=[('n=25000003', {'n': 25000003}), ('n=400000009', {'n': 400000009})],
        small={'n': 3000}, tolerance=0.002)
def triton_swish_f16(g, c):
    inits = {}
    n = c["n"]
    x, y = cast(g.randn(n), "float16"), cast(g.empty(n), "float16")
    kern, args = "swish_f16_kernel", [x, y, n]
    kw, grid = dict(BLOCK=2048, num_warps=4), ((n + 2047) // 2048,)

    def check():                      # the first 2^20 elements
        v = g.host(x[:1 << 20]).astype(np.float64)
        return rel(g.host(y[:1 << 20]), v / (1 + np.exp(-v)))
    return kern, args, kw, grid, check, inits


@family(sizes=[
        ('3x1999 heads=12', {'seq': 1999, 'batch': 3, 'heads': 12}),
        ('7x4093 heads=40', {'seq': 4093, 'batch': 7, 'heads': 40})],
        small={'seq': 7, 'batch': 11, 'heads': 3})
def triton_rope(g, c):
    inits = {}
    seq, batch, heads, half = c["seq"], c["batch"], c["heads"], ROPE_HALF
    toks = seq * batch
    x, y = g.randn(toks, heads, 2 * half), g.empty(toks, heads, 2 * half)
    ang = g.rand(seq, half) * 6.2831855
    xp = array_module(ang)
    cos, sin = (cast(f(double(ang)), "float32") for f in (xp.cos, xp.sin))
    kern, args = "rope_kernel", [x, cos, sin, y, seq, heads]
    kw = dict(HALF=half, BLOCK_H=pow2(heads), num_warps=4)

    def check():                      # the first 64 tokens (past the table's end too)
        k = min(toks, 64)
        xh = g.host(x[:k]).astype(np.float64)
        pos = np.arange(k) % seq
        co, si = (g.host(t).astype(np.float64)[pos][:, None, :] for t in (cos, sin))
        x1, x2 = xh[..., :half], xh[..., half:]
        ref = np.concatenate([x1 * co - x2 * si, x2 * co + x1 * si], -1)
        return rel(g.host(y[:k]), ref)
    return kern, args, kw, (toks,), check, inits


@family(sizes=[
        ('24x1000^2', {'seq': 1000, 'batch': 24}),
        ('8x3001^2', {'seq': 3001, 'batch': 8})], small={'seq': 50, 'batch': 6})
def triton_causal_softmax(g, c):
    inits = {}
    seq, batch = c["seq"], c["batch"]
    x, y = g.randn(batch * seq, seq), g.empty(batch * seq, seq)
    blk = pow2(seq)
    kern, args = "causal_softmax_kernel", [x, y, seq]
    kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

    def check():                      # the first 256 rows (into the second batch)
        k = min(batch * seq, 256)
        ref = _softmax_causal_ref(g.host(x[:k]).astype(np.float64), np.arange(k) % seq)
        return rel(g.host(y[:k]), ref)
    return kern, args, kw, (batch * seq,), check, inits


@family(sizes=[('n=3000017', {'n': 3000017}), ('n=200000033', {'n': 200000033})], small={'n': 3001})
def triton_adam(g, c):
    inits = {}
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
        return max(rel(g.host(mo[:k]), m2), rel(g.host(vo[:k]), v2),
                   rel(g.host(po[:k]), p2))
    return kern, args, kw, ((n + 1023) // 1024,), check, inits


@family(sizes=[
        ('4001x768', {'rows': 4001, 'cols': 768}),
        ('30011x2560', {'rows': 30011, 'cols': 2560})], small={'rows': 70, 'cols': 300})
def triton_add_layernorm(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    x, res, w, bias = g.randn(r, k), g.randn(r, k), g.randn(k), g.randn(k)
    h, y = g.empty(r, k), g.empty(r, k)
    blk = pow2(k)
    kern, args = "add_layernorm_kernel", [x, res, w, bias, h, y, k, 1e-5]
    kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

    def check():                      # the first 64 rows of both outputs
        hh = double(g.host(x[:64])) + double(g.host(res[:64]))
        d = hh - hh.mean(1, keepdims=True)
        ref = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * double(g.host(w)) \
            + double(g.host(bias))
        return max(rel(g.host(h[:64]), hh), rel(g.host(y[:64]), ref))
    return kern, args, kw, (r,), check, inits


@family(sizes=[
        ('3001x2999 d=16', {'n': 3001, 'm': 2999}),
        ('20011x15013 d=16', {'n': 20011, 'm': 15013})], small={'n': 90, 'm': 67})
def triton_l2dist(g, c):
    inits = {}
    n, m = c["n"], c["m"]
    x, yv, o = g.randn(n, L2_DIM), g.randn(m, L2_DIM), g.empty(n, m)
    kern, args = "l2dist_kernel", [x, yv, o, n, m]
    kw = dict(D=L2_DIM, BM=64, BN=64, num_warps=4)

    def check():                      # the first 80 rows (into the second row of tiles)
        xh, yh = double(g.host(x[:80])), double(g.host(yv))
        ref = ((xh[:, None, :] - yh[None, :, :]) ** 2).sum(-1)
        return rel(g.host(o[:80]), ref)
    return kern, args, kw, ((n + 63) // 64, (m + 63) // 64), check, inits


@family(sizes=[
        ('64x1000x300', {'batch': 64, 'length': 1000, 'dim': 300}),
        ('96x4001x1000', {'batch': 96, 'length': 4001, 'dim': 1000})],
        small={'batch': 5, 'length': 45, 'dim': 150})
def triton_masked_mean(g, c):
    inits = {}
    b, ln, d = c["batch"], c["length"], c["dim"]
    x, lens, o = g.randn(b, ln, d), g.randint(1, ln + 1, b), g.empty(b, d)
    kern, args = "masked_mean_kernel", [x, lens, o, ln, d]
    kw = dict(BLOCK_L=32, BLOCK_D=128, num_warps=4)
    inits = {1: dict(kind="randint", low=1, high=ln + 1)}   # the loops' trip counts

    def check():                      # the first 4 sequences
        k = min(b, 4)
        xh, nh = double(g.host(x[:k])), g.host(lens[:k])
        ref = np.stack([xh[i, :nh[i]].mean(0) for i in range(k)])
        return rel(g.host(o[:k]), ref)
    return kern, args, kw, (b, (d + 127) // 128), check, inits


@family(sizes=[
        ('1999x1501', {'rows': 1999, 'cols': 1501}),
        ('12007x10009', {'rows': 12007, 'cols': 10009})], small={'rows': 90, 'cols': 70})
def triton_transpose_add(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    a, bt, o = g.randn(r, k), g.randn(k, r), g.empty(r, k)
    kern, args = "transpose_add_kernel", [a, bt, o, r, k]
    kw = dict(BR=64, BC=64, num_warps=4)

    def check():                      # the first 80 rows (into the second row of tiles)
        ref = double(g.host(a[:80])) + double(g.host(bt[:, :80])).T
        return rel(g.host(o[:80]), ref)
    return kern, args, kw, ((r + 63) // 64, (k + 63) // 64), check, inits


@family(sizes=[
        ('3001x4099', {'rows': 3001, 'cols': 4099}),
        ('24007x8191', {'rows': 24007, 'cols': 8191})], small={'rows': 70, 'cols': 300})
def triton_scale_bias_relu(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    x, s, bias, y = g.randn(r, k), g.randn(k), g.randn(k), g.empty(r, k)
    kern, args = "scale_bias_relu_kernel", [x, s, bias, y, r, k]
    kw = dict(BR=32, BC=128, num_warps=4)

    def check():                      # the first 80 rows (into the third row of tiles)
        ref = double(g.host(x[:80])) * double(g.host(s)) + double(g.host(bias))
        return rel(g.host(y[:80]), np.maximum(ref, 0.0))
    return kern, args, kw, ((r + 31) // 32, (k + 127) // 128), check, inits


@family(sizes=[
        ('20011x1500', {'rows': 20011, 'cols': 1500}),
        ('100003x3000', {'rows': 100003, 'cols': 3000})],
        small={'rows': 70, 'cols': 300}, tolerance=0.0)
def triton_top2(g, c):
    inits = {}
    r, k = c["rows"], c["cols"]
    x, o = g.randn(r, k), g.empty(r, 2)
    blk = pow2(k)
    kern, args = "top2_kernel", [x, o, k]
    kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

    def check():                      # the first 64 rows, exactly
        return wrong(g.host(o[:64]), np.sort(g.host(x[:64]), 1)[:, :-3:-1])
    return kern, args, kw, (r,), check, inits


@family(sizes=[
        ('10007x1000', {'rows': 10007, 'dim': 1000}),
        ('150001x1536', {'rows': 150001, 'dim': 1536})], small={'rows': 70, 'dim': 300})
def triton_cosine_rows(g, c):
    inits = {}
    r, d = c["rows"], c["dim"]
    a, bv, o = g.randn(r, d), g.randn(r, d), g.empty(r)
    blk = pow2(d)
    kern, args = "cosine_rows_kernel", [a, bv, o, d]
    kw = dict(BLOCK=blk, num_warps=8 if blk >= 2048 else 4)

    def check():                      # the first 256 rows
        ah, bh = double(g.host(a[:256])), double(g.host(bv[:256]))
        ref = (ah * bh).sum(1) / np.sqrt((ah * ah).sum(1) * (bh * bh).sum(1))
        return rel(g.host(o[:256]), ref)
    return kern, args, kw, (r,), check, inits


@family(sizes=[
        ('4x320x3969', {'n': 4, 'c': 320, 'hw': 3969, 'groups': 32}),
        ('16x640x2025', {'n': 16, 'c': 640, 'hw': 2025, 'groups': 32})],
        small={'n': 2, 'c': 6, 'hw': 700, 'groups': 3})
def triton_group_norm(g, c):
    inits = {}
    nn, ch, hw, grp = c["n"], c["c"], c["hw"], c["groups"]
    x, w, bias, y = g.randn(nn, ch, hw), g.randn(ch), g.randn(ch), g.empty(nn, ch, hw)
    kern, args = "group_norm_kernel", [x, w, bias, y, ch, hw, grp, 1e-5]
    kw = dict(BLOCK=1024, num_warps=4)

    def check():                      # the first sample's groups
        return rel(g.host(y[:1]), group_norm_ref(g.host(x[:1]), g.host(w), g.host(bias),
                                                  grp, 1e-5))
    return kern, args, kw, (nn * grp,), check, inits


@family(sizes=[('n=5000011', {'n': 5000011}), ('n=100000007', {'n': 100000007})], small={'n': 3001})
def triton_bce_fused(g, c):
    inits = {}
    n = c["n"]
    nb = (n + 1023) // 1024
    x, t, gr, part = g.randn(n), g.rand(n), g.empty(n), g.empty(nb)
    kern, args = "bce_fused_kernel", [x, t, gr, part, n, 1.0 / n]
    kw = dict(BLOCK=1024, num_warps=4)

    def check():                      # the first 2^20 gradients, 256 partial sums
        k = min(n, 256 * 1024)
        grad, loss = bce_ref(g.host(x[:1 << 20]), g.host(t[:1 << 20]))
        sums = np.add.reduceat(loss[:k], np.arange(0, k, 1024))
        return max(rel(g.host(gr[:1 << 20]), grad / n), rel(g.host(part[:256]), sums))
    return kern, args, kw, (nb,), check, inits


@family(sizes=[
        ('kvheads=64 S=3001', {'kvh': 64, 's': 3001}),
        ('kvheads=256 S=8191', {'kvh': 256, 's': 8191})],
        small={'kvh': 3, 's': 150}, tolerance=0.001)
def triton_decode_gqa(g, c):
    inits = {}
    kvh, s = c["kvh"], c["s"]
    q = cast(g.randn(kvh * GROUP, HEAD_DIM), "float16")
    k = cast(g.randn(kvh, s, HEAD_DIM), "float16")
    v = cast(g.randn(kvh, s, HEAD_DIM), "float16")
    o = g.empty(kvh * GROUP, HEAD_DIM)
    kern, args = "decode_gqa_kernel", [q, k, v, o, s, float(HEAD_DIM ** -0.5)]
    kw = dict(G=GROUP, BH=16, D=HEAD_DIM, BS=64, num_warps=4)

    def check():                      # the query heads of the first 2 KV heads
        return rel(g.host(o[:2 * GROUP]), attn_ref(g.host(q[:2 * GROUP]),
                                                    g.host(k[:2]), g.host(v[:2]), GROUP))
    return kern, args, kw, (kvh,), check, inits


@family(sizes=[
        ('8191x1000', {'rows': 8191, 'cols': 1000}),
        ('16001x4000', {'rows': 16001, 'cols': 4000})], small={'rows': 5, 'cols': 300})
def triton_layernorm_bwd(g, c):
    inits = {}
    r, cc = c["rows"], c["cols"]
    x, dy, w = g.randn(r, cc), g.randn(r, cc), g.randn(cc)
    mean, rstd, dx = g.randn(r) * 0.1, g.rand(r) + 0.5, g.empty(r, cc)
    kern, args = "layernorm_bwd_kernel", [x, dy, w, mean, rstd, dx, cc]
    kw = dict(BLOCK=pow2(cc), num_warps=4 if cc <= 1024 else 8)

    def check():                      # the first 64 rows
        return rel(g.host(dx[:64]), layernorm_bwd_ref(
            g.host(x[:64]), g.host(dy[:64]), g.host(w), g.host(mean[:64]),
            g.host(rstd[:64])))
    return kern, args, kw, (r,), check, inits


@family(sizes=[
        ('20011x1000', {'rows': 20011, 'cols': 1000}),
        ('40009x3000', {'rows': 40009, 'cols': 3000})], small={'rows': 4, 'cols': 700})
def triton_cumsum_rows(g, c):
    inits = {}
    r, cc = c["rows"], c["cols"]
    x, y = g.randn(r, cc), g.empty(r, cc)
    kern, args = "cumsum_rows_kernel", [x, y, cc]
    kw = dict(BLOCK=pow2(cc), num_warps=4 if cc <= 1024 else 8)

    def check():                      # the first 64 rows
        return rel(g.host(y[:64]), np.cumsum(np.asarray(g.host(x[:64]), np.float64), 1))
    return kern, args, kw, (r,), check, inits


@family(sizes=[
        ('2x1536x4001', {'b': 2, 'c': 1536, 'l': 4001}),
        ('8x2560x4099', {'b': 8, 'c': 2560, 'l': 4099})], small={'b': 1, 'c': 3, 'l': 1500})
def triton_causal_dwconv(g, c):
    inits = {}
    bb, ch, ln = c["b"], c["c"], c["l"]
    x, w, bias, y = g.randn(bb, ch, ln), g.randn(ch, CONV_W), g.randn(ch), g.empty(bb, ch, ln)
    kern, args = "causal_dwconv_silu_kernel", [x, w, bias, y, ch, ln]
    kw = dict(W=CONV_W, BLOCK=CONV_BLOCK, num_warps=4)

    def check():                      # the first sample's first 8 channels
        return rel(g.host(y[:1, :8]), dwconv_ref(g.host(x[:1, :8]), g.host(w[:8]),
                                                 g.host(bias[:8])))
    return kern, args, kw, (bb * ch, (ln + CONV_BLOCK - 1) // CONV_BLOCK), check, inits


@family(sizes=[
        ('2053x5504', {'rows': 2053, 'h': 5504}),
        ('8191x11008', {'rows': 8191, 'h': 11008})], small={'rows': 3, 'h': 1500}, tolerance=0.001)
def triton_swiglu_f16(g, c):
    inits = {}
    r, h = c["rows"], c["h"]
    x, y = cast(g.randn(r, 2 * h), "float16"), cast(g.empty(r, h), "float16")
    kern, args = "swiglu_f16_kernel", [x, y, h]
    kw = dict(BLOCK=SWIGLU_BLOCK, num_warps=4)

    def check():                      # the first 64 rows
        return rel(g.host(y[:64]), swiglu_ref(g.host(x[:64])))
    return kern, args, kw, (r, (h + SWIGLU_BLOCK - 1) // SWIGLU_BLOCK), check, inits


@family(sizes=[
        ('4099x2000', {'rows': 4099, 'cols': 2000}),
        ('16001x4000', {'rows': 16001, 'cols': 4000})], small={'rows': 4, 'cols': 700})
def triton_kl_div_rows(g, c):
    inits = {}
    r, cc = c["rows"], c["cols"]
    s, t, out = g.randn(r, cc) * 2, g.randn(r, cc) * 2, g.empty(r)
    kern, args = "kl_div_rows_kernel", [s, t, out, cc]
    kw = dict(BLOCK=pow2(cc), num_warps=4 if cc <= 1024 else 8)

    def check():                      # the first 256 rows
        return rel(g.host(out[:256]), kl_rows_ref(g.host(s[:256]), g.host(t[:256])))
    return kern, args, kw, (r,), check, inits


@family(sizes=[
        ('16411x768', {'tokens': 16411, 'd': 768}),
        ('65537x1280', {'tokens': 65537, 'd': 1280})], small={'tokens': 37, 'd': 160})
def triton_paged_kv_write(g, c):
    inits = {}
    t, d = c["tokens"], c["d"]
    blocks = (t + KV_BS - 1) // KV_BS
    key, val = cast(g.randn(t, d), "float16"), cast(g.randn(t, d), "float16")
    kc = cast(g.empty(blocks, KV_BS, d), "float16")
    vc = cast(g.empty(blocks, KV_BS, d), "float16")
    slot = cast(array_module(key).argsort(g.rand(t)), "int32")   # t distinct slots of t
    kern, args = "paged_kv_write_kernel", [key, val, kc, vc, slot, d]
    kw = dict(BS=KV_BS, BLOCK=pow2(d), num_warps=4)
    inits = {4: dict(kind="randperm")}

    def check():                      # the first 64 tokens' rows in both caches, exactly
        bad = 0.0
        for tok, s in enumerate(g.host(slot[:64])):
            b, o = divmod(int(s), KV_BS)
            bad += wrong(g.host(kc[b, o]), g.host(key[tok]))
            bad += wrong(g.host(vc[b, o]), g.host(val[tok]))
        return bad / 128
    return kern, args, kw, (t,), check, inits
