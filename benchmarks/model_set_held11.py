"""The eleventh held-out group (held11) of the model benchmark set (benchmarks/model_set.py).

Kinds of kernel in none of the other parts (fit, held, held2 .. held10; tests/test_model_set.py
checks it), built blind as held4 .. held10: no case of this group was simulated, or sized by a
prediction, before the lead's one evaluation. Sizes come from a bytes/FLOPs estimate (H200:
~4 TB/s DRAM, ~67 TFLOP/s fp32, 132 SMs, 50 MB L2), from ~10 us to a few hundred us. Kernels:
Numba (model_set_held11_numba.py), Triton (model_set_held11_triton.py) and PTX made with
ptxgen's Builder (model_set_held11_ptx.py); arguments, launch and check are written once against
held3's array interface `g`, so the CPU test runs the very same launch at a small size on
ptxgen's emulator. New here: one time step of leaky integrate-and-fire neurons with refractory
counters, three arrays in and three out (lif_step), cloud-in-cell charge deposition by four
float atomic adds a particle into a 2-D grid (cic_deposit), haversine great-circle distances
with sin, cos, sqrt and asin (haversine), the SwiGLU gate on float16 (triton_swiglu_f16), the
distillation loss KL(softmax(t) || softmax(s)) per row (triton_kl_div_rows), a paged KV-cache
write through a slot mapping (triton_paged_kv_write), CRC-32C of 32-byte records by a table the
block builds in shared memory (ptx_crc32c), 30-bit Morton codes of float4 points
(ptx_morton3d) and embedding vectors scaled to unit length, one warp a vector, by a
shfl.sync.bfly all-reduce and rsqrt.approx (ptx_warp_l2norm). Checks compare with float64 (or
exact integer) numpy references over a slice; tests/test_model_set.py also runs each check on
an output larger than its slice.
"""
import numpy as np

import model_set_held3 as H3
from model_set_held3 import _rel
from model_set_held4 import _double, _pow2, _wrong
from model_set_held5 import _cast, _xp

NUMBA_FAMILIES = {"lif_step", "cic_deposit", "haversine"}
TRITON_FAMILIES = {"triton_swiglu_f16", "triton_kl_div_rows", "triton_paged_kv_write"}
PTX_FAMILIES = {"ptx_crc32c", "ptx_morton3d", "ptx_warp_l2norm"}  # ptxgen's Builder
FAMILIES = NUMBA_FAMILIES | TRITON_FAMILIES | PTX_FAMILIES
# the largest check result a correct kernel gives where not 1e-5 (PTX cases default to 0):
# SwiGLU stores float16 (half an ulp is 2^-11 relative); the unit vectors use rsqrt.approx
TOLERANCE = {"triton_swiglu_f16": 1e-3, "ptx_warp_l2norm": 1e-5}
DT_TAU, V_TH, T_REF = 0.1, 1.0, 3     # lif_step: dt / tau, threshold, refractory steps
LIF_MARGIN = 1e-5          # lif_step: neurons this close to the threshold are not judged
SWIGLU_BLOCK = 1024        # triton_swiglu_f16: columns per program
KV_BS = 16                 # triton_paged_kv_write: tokens per cache block
MORTON_LO, MORTON_SCALE = -0.05, 1023.0 / 1.1    # ptx_morton3d: the box [-0.05, 1.05)^3


def cases():
    """(family, source, size label, parameters) of every held11 case, two sizes per family."""
    out = []
    for n in (4_000_037, 40_000_003):
        out.append(("lif_step", "numba", f"n={n}", dict(n=n)))
    for n, ny, nx in ((1_000_003, 1001, 1003), (12_000_007, 2003, 1999)):
        out.append(("cic_deposit", "numba", f"n={n} {ny}x{nx}", dict(n=n, ny=ny, nx=nx)))
    for n in (4_000_037, 30_000_001):
        out.append(("haversine", "numba", f"n={n}", dict(n=n)))
    for r, h in ((2053, 5504), (8191, 11008)):
        out.append(("triton_swiglu_f16", "triton", f"{r}x{h}", dict(rows=r, h=h)))
    for r, cc in ((4099, 2000), (16001, 4000)):
        out.append(("triton_kl_div_rows", "triton", f"{r}x{cc}", dict(rows=r, cols=cc)))
    for t, d in ((16411, 768), (65537, 1280)):
        out.append(("triton_paged_kv_write", "triton", f"{t}x{d}", dict(tokens=t, d=d)))
    for n in (1_000_003, 8_000_009):
        out.append(("ptx_crc32c", "ptx", f"n={n}", dict(n=n)))
    for n in (4_000_037, 30_000_001):
        out.append(("ptx_morton3d", "ptx", f"n={n}", dict(n=n)))
    for n in (100_003, 600_001):
        out.append(("ptx_warp_l2norm", "ptx", f"n={n}", dict(n=n)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (shapes not tile multiples)."""
    fam, c = c["family"], dict(c)
    c.update({"lif_step": dict(n=1001), "cic_deposit": dict(n=701, ny=13, nx=17),
              "haversine": dict(n=1001),
              "triton_swiglu_f16": dict(rows=3, h=1500),
              "triton_kl_div_rows": dict(rows=4, cols=700),
              "triton_paged_kv_write": dict(tokens=37, d=160),
              "ptx_crc32c": dict(n=301), "ptx_morton3d": dict(n=1001),
              "ptx_warp_l2norm": dict(n=21)}[fam])
    return c


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


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held11 Numba case."""
    fam, inits = c["family"], {}
    n = c["n"]
    grid, block = ((n + 255) // 256,), (256,)
    if fam == "lif_step":
        v, refr, cur = g.rand(n), g.randint(0, 3, n), g.rand(n) * 4
        v_out, refr_out = g.empty(n), g.zeros(n, integer=True) - 1
        spike = _cast(g.zeros(n, integer=True) + 7, "uint8")
        args = [v, refr, cur, v_out, refr_out, spike, DT_TAU, V_TH, T_REF]
        inits = {1: dict(kind="randint", low=0, high=3)}

        def check():                      # the first 2^16 neurons (but those at the threshold)
            m = 1 << 16
            rv, rr, rs, judged = lif_ref(g.host(v[:m]), g.host(refr[:m]), g.host(cur[:m]))
            ints = max(_wrong(g.host(refr_out[:m])[judged], rr[judged]),
                       _wrong(g.host(spike[:m])[judged], rs[judged]))
            return max(ints, _rel(g.host(v_out[:m])[judged], rv[judged]))
    elif fam == "cic_deposit":
        ny, nx = c["ny"], c["nx"]
        px, py, q = g.rand(n) * (nx - 1), g.rand(n) * (ny - 1), g.rand(n) + 0.5
        dens = g.zeros(ny, nx)
        args = [px, py, q, dens]

        def check():                      # the whole grid (every particle)
            return _rel(g.host(dens), cic_ref(g.host(px), g.host(py), g.host(q), ny, nx))
    elif fam == "haversine":
        lat1, lat2 = g.rand(n) * 180 - 90, g.rand(n) * 180 - 90
        lon1, lon2 = g.rand(n) * 360 - 180, g.rand(n) * 360 - 180
        dist = g.empty(n)
        args = [lat1, lon1, lat2, lon2, dist]

        def check():                      # the first 2^16 pairs
            m = 1 << 16
            return _rel(g.host(dist[:m]), haversine_ref(g.host(lat1[:m]), g.host(lon1[:m]),
                                                        g.host(lat2[:m]), g.host(lon2[:m])))
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits


def swiglu_ref(x):
    """silu(gate) * up of rows [gate | up], float64."""
    x = _double(x)
    h = x.shape[1] // 2
    gate, up = x[:, :h], x[:, h:]
    return gate / (1 + np.exp(-gate)) * up


def kl_rows_ref(s, t):
    """KL(softmax(t) || softmax(s)) per row, float64."""
    s, t = _double(s), _double(t)
    ls = s - s.max(1, keepdims=True)
    ls = ls - np.log(np.exp(ls).sum(1, keepdims=True))
    lt = t - t.max(1, keepdims=True)
    lt = lt - np.log(np.exp(lt).sum(1, keepdims=True))
    return (np.exp(lt) * (lt - ls)).sum(1)


def triton_case(g, c):
    """(kernel name in model_set_held11_triton, args, constexpr/launch keywords, grid, check,
    {argument index: init}) of a held11 Triton case."""
    fam, inits = c["family"], {}
    if fam == "triton_swiglu_f16":
        r, h = c["rows"], c["h"]
        x, y = _cast(g.randn(r, 2 * h), "float16"), _cast(g.empty(r, h), "float16")
        kern, args = "swiglu_f16_kernel", [x, y, h]
        kw = dict(BLOCK=SWIGLU_BLOCK, num_warps=4)

        def check():                      # the first 64 rows
            return _rel(g.host(y[:64]), swiglu_ref(g.host(x[:64])))
        return kern, args, kw, (r, (h + SWIGLU_BLOCK - 1) // SWIGLU_BLOCK), check, inits
    if fam == "triton_kl_div_rows":
        r, cc = c["rows"], c["cols"]
        s, t, out = g.randn(r, cc) * 2, g.randn(r, cc) * 2, g.empty(r)
        kern, args = "kl_div_rows_kernel", [s, t, out, cc]
        kw = dict(BLOCK=_pow2(cc), num_warps=4 if cc <= 1024 else 8)

        def check():                      # the first 256 rows
            return _rel(g.host(out[:256]), kl_rows_ref(g.host(s[:256]), g.host(t[:256])))
        return kern, args, kw, (r,), check, inits
    if fam == "triton_paged_kv_write":
        t, d = c["tokens"], c["d"]
        blocks = (t + KV_BS - 1) // KV_BS
        key, val = _cast(g.randn(t, d), "float16"), _cast(g.randn(t, d), "float16")
        kc = _cast(g.empty(blocks, KV_BS, d), "float16")
        vc = _cast(g.empty(blocks, KV_BS, d), "float16")
        slot = _cast(_xp(key).argsort(g.rand(t)), "int32")   # t distinct slots of t
        kern, args = "paged_kv_write_kernel", [key, val, kc, vc, slot, d]
        kw = dict(BS=KV_BS, BLOCK=_pow2(d), num_warps=4)
        inits = {4: dict(kind="randperm")}

        def check():                      # the first 64 tokens' rows in both caches, exactly
            bad = 0.0
            for tok, s in enumerate(g.host(slot[:64])):
                b, o = divmod(int(s), KV_BS)
                bad += _wrong(g.host(kc[b, o]), g.host(key[tok]))
                bad += _wrong(g.host(vc[b, o]), g.host(val[tok]))
            return bad / 128
        return kern, args, kw, (t,), check, inits
    raise KeyError(fam)


def ptx_kernel(fam):
    """(PTX text, entry) of a held11 PTX family."""
    import model_set_held11_ptx as P
    return P.KERNELS[fam]()


def crc32c_table():
    """The 256-entry CRC-32C table (reflected polynomial), as the kernel's blocks build it."""
    import model_set_held11_ptx as P
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        c = np.where(c & 1, (c >> np.uint32(1)) ^ np.uint32(P.CRC_POLY), c >> np.uint32(1))
    return c.astype(np.uint32)


def crc32c_ref(records):
    """CRC-32C of each row of bytes (n, length) uint8."""
    table, rec = crc32c_table(), np.asarray(records, np.uint8)
    crc = np.full(len(rec), 0xFFFFFFFF, np.uint32)
    for j in range(rec.shape[1]):
        crc = table[(crc ^ rec[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def _spread10(v):
    out = np.zeros_like(v)
    for bit in range(10):
        out |= ((v >> np.uint32(bit)) & np.uint32(1)) << np.uint32(3 * bit)
    return out


def morton_ref(pts):
    """30-bit Morton codes of float32 points (n, 4) in the box: float32 (p - lo) * scale,
    truncated and clamped to [0, 1023], bits interleaved x above y above z."""
    p = np.asarray(pts, np.float32)[:, :3]
    q = (p - np.float32(MORTON_LO)) * np.float32(MORTON_SCALE)
    q = np.clip(np.trunc(q.astype(np.float64)), 0, 1023).astype(np.uint32)
    return (_spread10(q[:, 0]) << np.uint32(2)) | (_spread10(q[:, 1]) << np.uint32(1)) \
        | _spread10(q[:, 2])


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init}) of a
    held11 PTX case; scalars as numpy scalars of the parameter's type."""
    import model_set_held11_ptx as P
    fam, n = c["family"], c["n"]
    grid = ((n + 255) // 256,)
    if fam == "ptx_crc32c":
        rec = g.randint(-2 ** 31, 2 ** 31 - 1, P.RECORD_WORDS * n)
        out = g.zeros(n, integer=True)

        def check():                      # the first 2^16 records, exactly
            k = 1 << 16
            words = np.asarray(g.host(rec[:P.RECORD_WORDS * k]), np.int32)
            ref = crc32c_ref(words.view(np.uint8).reshape(-1, 4 * P.RECORD_WORDS))
            return _wrong(np.asarray(g.host(out[:k])).view(np.uint32), ref)
        return [np.uint32(n), rec, out], grid, (P.CRC_BLOCK,), check, {}
    if fam == "ptx_morton3d":
        pts, code = g.rand(n, 4) * 1.2 - 0.1, g.zeros(n, integer=True) - 1

        def check():                      # the first 2^20 points, exactly
            k = 1 << 20
            return _wrong(np.asarray(g.host(code[:k])).view(np.uint32),
                          morton_ref(g.host(pts[:k])))
        return [np.uint32(n), np.float32(MORTON_LO), np.float32(MORTON_SCALE), pts, code], \
            grid, (256,), check, {}
    if fam == "ptx_warp_l2norm":
        x, y = g.randn(n, P.VEC_DIM), g.empty(n, P.VEC_DIM)

        def check():                      # the first 4096 vectors
            xh = _double(g.host(x[:4096]))
            return _rel(g.host(y[:4096]), xh / np.sqrt((xh * xh).sum(1, keepdims=True)
                                                       + P.L2_EPS))
        return [np.uint32(n), x, y], ((32 * n + 255) // 256,), (256,), check, {}
    raise KeyError(fam)


# -- CPU checks (tests/test_model_set.py): held3's, bound to this group's case builders --------
compile_triton, save_triton_small, emulate_numba, emulate_triton, emulate_ptx = H3.cpu_checks(
    "held11", cases, small, numba_case, triton_case, ptx_case, ptx_kernel)

if __name__ == "__main__":
    H3.save_triton_main("held11", save_triton_small)      # python with Triton (/work/tvenv)
