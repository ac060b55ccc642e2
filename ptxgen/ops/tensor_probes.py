"""Small tensor-core kernels built with the builder API, one tile per warp or warpgroup.

They exist to check the tensor instructions end to end — on the emulator against numpy, and on
the GPU against the emulator (benchmarks/tensor_emu_vs_gpu.py): each loads its operands with
plain loads in the ISA's fragment layouts (or through ldmatrix / swizzled shared memory), runs
the instruction, and stores the result where a numpy reference can find it.

Every fragment register is one aligned 32-bit load: A is row-major (M×K), B is stored N×K (K
contiguous), so the elements a register packs are adjacent in memory. A fragment coordinate is
affine in the lane's groupID g and threadID_in_group t, so each is base + g·dg + t·dt.
"""
import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..ir import Builder, Module, Param, fragments as F, ptr, types as T

_ACC_T = {"f32": T.f32, "s32": T.s32, "f16": T.b32}


def _affine(fn):
    """(base, dg, dt) with fn(lane) = base + g*dg + t*dt for every lane (checked)."""
    base = fn(0)
    dg, dt = fn(4) - base, fn(1) - base
    for lane in range(32):
        assert fn(lane) == base + (lane >> 2) * dg + (lane & 3) * dt
    return base, dg, dt


def _lane_parts(b):
    tid = b.special("tid.x")
    lane = b.and_(tid, 31, name="lane")
    g = b.shr(lane, 2, name="g")
    t = b.and_(lane, 3, name="t")
    gw = b.mad(b.special("ctaid.x"), b.special("ntid.x"), tid, name="gtid")
    return b.shr(gw, 5, name="warp"), g, t


def _addr(b, base_ptr, tile, tile_elems, g, t, affine, esize):
    """Address of element base + g*dg + t*dt of tile number `tile`."""
    base, dg, dt = affine
    idx = b.mad(tile, tile_elems, base, type=T.u32, name="i")
    if dg:
        idx = b.mad(g, dg, idx, type=T.u32, name="i")
    if dt:
        idx = b.mad(t, dt, idx, type=T.u32, name="i")
    return b.element_addr(base_ptr, idx, esize)


def mma_probe(shape="m16n8k16", ab="bf16", acc=None, ksteps=1, target=DEFAULT_TARGET):
    """Kernel `mma_probe(a, b, c, d)`: warp w computes D[w] = A[w]·B[w] + C[w] with `ksteps`
    chained mma.sync; A[w] is M×K row-major, B[w] N×K, C/D M×N row-major, K = ksteps·k.
    Launch with 32·tiles threads. Returns (module, K)."""
    kind = F.mma_kind(shape, ab)
    acc = acc or kind.accs[0]
    K = kind.k * ksteps
    epr = 32 // kind.elem_bits                     # elements per 32-bit register
    m = Module(target=target)
    k = m.add_kernel("mma_probe", [Param(n, T.u64, ptr(T.b8, align=16)) for n in "abcd"])
    b = Builder(k)
    pa, pb, pc, pd = (b.param(n) for n in "abcd")
    warp, g, t = _lane_parts(b)
    esz = kind.elem_bits // 8
    cbytes = 2 if acc == "f16" else 4
    c_per_reg = 2 if acc == "f16" else 1
    acc_t = _ACC_T[acc]

    def c_addr(p, j):
        i = j * c_per_reg
        aff = _affine(lambda l: (lambda rc: rc[0] * kind.n + rc[1])(F.mma_c_coord(l, i)))
        return _addr(b, p, warp, kind.m * kind.n, g, t, aff, cbytes)

    nc = kind.c_regs(acc)
    d = tuple(b.ld("global", acc_t if acc != "f16" else T.b32, c_addr(pc, j)) for j in range(nc))
    for s in range(ksteps):
        regs_a, regs_b = [], []
        for j in range(kind.a_regs):
            aff = _affine(lambda l: (lambda rc: rc[0] * K + rc[1] + s * kind.k)(
                F.mma_a_coord(kind, l, j * epr)))
            regs_a.append(b.ld("global", T.b32, _addr(b, pa, warp, kind.m * K, g, t, aff, esz)))
        for j in range(kind.b_regs):
            aff = _affine(lambda l: (lambda rc: rc[1] * K + rc[0] + s * kind.k)(
                F.mma_b_coord(kind, l, j * epr)))
            regs_b.append(b.ld("global", T.b32, _addr(b, pb, warp, kind.n * K, g, t, aff, esz)))
        d = b.mma_sync(shape, regs_a, regs_b, d, ab=ab, acc=acc)
    for j, r in enumerate(d):
        b.st("global", c_addr(pd, j), r, type=acc_t if acc != "f16" else T.b32)
    b.ret()
    return m, K


def ldmatrix_probe(num=4, trans=False, store=False, target=DEFAULT_TARGET):
    """Kernel `ldmatrix_probe(src, out)`: warp w copies its 8·num × 8 b16 tile src[w] (matrix j
    is rows 8j..8j+7) to shared memory, ldmatrix's it and writes register j of lane l to
    out[w, l, j] (u32). With store=True (sm_90) it then stmatrix's those registers back into
    shared memory with the same `trans` and writes the tile back to `out` (shaped like src)."""
    m = Module(target=target)
    k = m.add_kernel("ldmatrix_probe", [Param("src", T.u64, ptr(T.b8, align=16)),
                                        Param("out", T.u64, ptr(T.b8, align=16))])
    b = Builder(k)
    src, out = b.param("src"), b.param("out")
    tile = 8 * num * 8 * 2                      # bytes per warp
    smem = b.address_of(b.shared("tiles", T.b8, tile * 32, align=16))
    warp, g, t = _lane_parts(b)
    lane = b.and_(b.special("tid.x"), 31, name="lane")
    wl = b.shr(b.special("tid.x"), 5, name="wl")
    mybase = b.mad(wl, tile, smem, type=T.u32, name="mine")
    row_addr = b.mad(lane, 16, mybase, type=T.u32, name="row")      # row l of the warp's tile
    with b.if_(b.setp("lt", lane, 8 * num)):
        gidx = b.mad(warp, tile // 4, b.mul(lane, 4, type=T.u32), type=T.u32, name="gi")
        vals = b.ld("global", T.b32, b.element_addr(src, gidx, 4), vec=4)
        b.st("shared", row_addr, vals, type=T.b32)
    b.bar_sync()
    regs = b.ldmatrix(row_addr, num=num, trans=trans)
    if not store:
        base = b.mad(warp, 32 * num, b.mul(lane, num, type=T.u32), type=T.u32, name="o")
        for j, r in enumerate(regs):
            b.st("global", b.element_addr(out, b.add(base, j, type=T.u32), 4), r, type=T.b32)
    else:
        b.bar_sync()
        b.stmatrix(row_addr, regs, trans=trans)
        b.bar_sync()
        with b.if_(b.setp("lt", lane, 8 * num)):
            vals = b.ld("shared", T.b32, row_addr, vec=4)
            gidx = b.mad(warp, tile // 4, b.mul(lane, 4, type=T.u32), type=T.u32, name="go")
            b.st("global", b.element_addr(out, gidx, 4), vals, type=T.b32)
    b.ret()
    return m


def wgmma_probe(n=128, ksteps=4, fence=True, trans_a=False, trans_b=False, a_regs=False,
                target=DEFAULT_ARCH_SPECIFIC_TARGET, ab="bf16", c_in=False):
    """Kernel `wgmma_probe(a, b, d)`, 128 threads per CTA, one 64×n tile per CTA (n a multiple
    of 16): D = A·B with bf16 A (64×K) and B (K×n), K = 16·ksteps ≤ 64, multiplied by `ksteps`
    wgmma m64n{n}k16, D f32 64×n row-major. ab="e4m3"/"e5m2" (or an (A, B) pair of them):
    fp8 operands, 128 to a 128-byte row, K = 32·ksteps ≤ 128 by wgmma m64n{n}k32 (K-major
    only). c_in: kernel `wgmma_probe(a, b, c, d)`, the accumulators start from C (f32 64×n per
    CTA, like D) instead of zero.

    Operands are staged into shared memory with the 128-byte swizzle, as rows of 128 bytes (64
    elements) in 8-row atoms 1024 bytes apart; the global arrays hold those rows in order
    (wgmma_operands builds them): K-major (default) rows are the m (n) index with k along the
    row, and k-step s starts 32·s bytes into them; MN-major (trans_*) rows are k with 64 m (n)
    along the row, blocks of 64 m (n) 8192 bytes apart (the leading byte offset), and k-step s
    starts 2048·s bytes in. a_regs: A comes from registers (row-major 64×64 global array).
    fence=False leaves out fence.proxy.async (a proxy race)."""
    if not 1 <= ksteps <= 4 or n % 16 or (trans_b and n % 64):
        raise ValueError("ksteps must be 1..4 and n a multiple of 16 (of 64 with trans_b)")
    fp8 = ab != "bf16"
    if fp8 and (trans_a or trans_b or a_regs):
        raise ValueError("fp8 wgmma reads K-major A and B from shared memory only")
    m = Module(target=target)
    k = m.add_kernel("wgmma_probe", [Param(x, T.u64, ptr(T.b8, align=16))
                                     for x in ("a", "b") + (("c",) if c_in else ()) + ("d",)])
    b = Builder(k)
    pa, pb, pd = b.param("a"), b.param("b"), b.param("d")
    sa = b.address_of(b.shared("sa", T.b8, 64 * 128, align=1024))
    sb = b.address_of(b.shared("sb", T.b8, n * 128, align=1024))
    tid = b.special("tid.x")
    cta = b.special("ctaid.x")
    for sbase, gptr, rows in ((sa, pa, 64), (sb, pb, n))[1 if a_regs else 0:]:
        _stage_rows(b, sbase, gptr, rows, tid, b.mul(cta, rows * 32, type=T.u32), 32)
    if fence:
        b.fence_proxy_async()
    b.bar_sync()
    warp = b.shr(tid, 5, name="w")
    lane = b.and_(tid, 31, name="lane")
    g, t = b.shr(lane, 2, name="g"), b.and_(lane, 3, name="t")
    acc = None
    if c_in:
        acc = _load_accumulators(b, b.param("c"), n, b.mul(cta, 64 * n, type=T.u32), n, warp,
                                 g, t)
    b.wgmma_fence()
    kind = F.mma_kind("m16n8k16", "bf16")

    def desc(base, s, trans):
        if trans:
            return b.wgmma_descriptor(b.add(base, 2048 * s, type=T.u32), lbo=8192, sbo=1024,
                                      swizzle=128)
        return b.wgmma_descriptor(b.add(base, 32 * s, type=T.u32), lbo=16, sbo=1024,
                                  swizzle=128)
    for s in range(ksteps):
        if a_regs:
            a = []
            tile = b.mad(cta, 4, warp, type=T.u32, name="wt")      # 16-row slab of this warp
            for j in range(4):
                aff = _affine(lambda l: (lambda rc: rc[0] * 64 + rc[1] + 16 * s)(
                    F.mma_a_coord(kind, l, 2 * j)))
                a.append(b.ld("global", T.b32, _addr(b, pa, tile, 16 * 64, g, t, aff, 2)))
        else:
            a = desc(sa, s, trans_a)
        acc = b.wgmma_mma_async(n, acc, a, desc(sb, s, trans_b), scale_d=int(s > 0 or c_in),
                                trans_a=int(trans_a), trans_b=int(trans_b), ab=ab)
    b.wgmma_commit_group()
    b.wgmma_wait_group(0)
    _store_accumulators(b, pd, acc, b.mul(cta, 64 * n, type=T.u32), n, warp, g, t)
    b.ret()
    return m


def _stage_rows(b, sbase, gptr, rows, tid, base_words, stride_words):
    """128 threads copy `rows` rows of 128 bytes (global row r at word base + r·stride) into
    shared memory with the 128-byte swizzle: chunk c of row r lands at r·128 + (c ^ r%8)·16."""
    for rep in range(rows * 8 // 128):
        chunk = b.add(tid, rep * 128, type=T.u32, name="ch")
        r = b.shr(chunk, 3, name="r")
        c = b.and_(chunk, 7, name="c")
        sw = b.xor(c, b.and_(r, 7, name="r8"), name="sw")
        soff = b.mad(r, 128, b.shl(sw, 4, name="sw16"), type=T.u32, name="so")
        gidx = b.mad(r, stride_words, b.mad(c, 4, base_words, type=T.u32), type=T.u32,
                     name="gi")
        vals = b.ld("global", T.b32, b.element_addr(gptr, gidx, 4), vec=4)
        b.st("shared", b.add(sbase, soff, type=T.u32), vals, type=T.b32)


def _store_accumulators(b, pd, acc, base, ld, warp, g, t):
    """Store a 64×n f32 wgmma accumulator at element base of a row-major array with leading
    dimension ld (the ISA's accumulator layout: fragments.wgmma_d_coord)."""
    row = b.mad(warp, 16, g, type=T.u32, name="row")
    start = b.add(base, b.mad(row, ld, b.shl(t, 1, name="t2"), type=T.u32), type=T.u32,
                  name="db")
    for i, r in enumerate(acc):
        off = (8 * ((i % 4) >> 1)) * ld + 8 * (i // 4) + (i & 1)
        b.st("global", b.element_addr(pd, b.add(start, off, type=T.u32), 4), r, type=T.f32)


def _load_accumulators(b, pc, n, base, ld, warp, g, t):
    """The f32 accumulator registers of a 64×n tile loaded from element base of a row-major
    array with leading dimension ld (the layout _store_accumulators writes)."""
    row = b.mad(warp, 16, g, type=T.u32, name="row")
    start = b.add(base, b.mad(row, ld, b.shl(t, 1, name="t2"), type=T.u32), type=T.u32,
                  name="cb")
    acc = []
    for i in range(n // 2):
        off = (8 * ((i % 4) >> 1)) * ld + 8 * (i // 4) + (i & 1)
        acc.append(b.ld("global", T.f32, b.element_addr(pc, b.add(start, off, type=T.u32), 4),
                        name="acc"))
    return acc


def wgmma_gemm(M, N, K, n=128, target=DEFAULT_ARCH_SPECIFIC_TARGET):
    """Kernel `wgmma_gemm(a, b, c)`: C = A·Bᵀ with bf16 A (M×K) and B (N×K) row-major and f32 C
    (M×N); grid (M/64, N/n) of 128 threads, one 64×n tile per CTA. Per 64 of K: both tiles are
    staged with the 128-byte swizzle, fenced for the async proxy, and multiplied by four wgmma
    m64n{n}k16 (a plain, unpipelined GEMM, for checking and timing the emulator)."""
    if M % 64 or N % n or K % 64 or n % 16:
        raise ValueError("M and K must be multiples of 64, N of n, n of 16")
    m = Module(target=target)
    k = m.add_kernel("wgmma_gemm", [Param(x, T.u64, ptr(T.b8, align=16)) for x in "abc"])
    b = Builder(k)
    pa, pb, pc = b.param("a"), b.param("b"), b.param("c")
    sa = b.address_of(b.shared("sa", T.b8, 64 * 128, align=1024))
    sb = b.address_of(b.shared("sb", T.b8, n * 128, align=1024))
    tid, cx, cy = b.special("tid.x"), b.special("ctaid.x"), b.special("ctaid.y")
    warp = b.shr(tid, 5, name="w")
    lane = b.and_(tid, 31, name="lane")
    g, t = b.shr(lane, 2, name="g"), b.and_(lane, 3, name="t")
    acc = None
    for kb in range(K // 64):
        for sbase, gptr, rows, tile in ((sa, pa, 64, cx), (sb, pb, n, cy)):
            base = b.mad(tile, rows * K // 2, kb * 32, type=T.u32, name="gb")
            _stage_rows(b, sbase, gptr, rows, tid, base, K // 2)
        b.fence_proxy_async()
        b.bar_sync()
        b.wgmma_fence()
        for s in range(4):
            da = b.wgmma_descriptor(b.add(sa, 32 * s, type=T.u32), lbo=16, sbo=1024, swizzle=128)
            db = b.wgmma_descriptor(b.add(sb, 32 * s, type=T.u32), lbo=16, sbo=1024, swizzle=128)
            acc = b.wgmma_mma_async(n, acc, da, db, scale_d=int(kb > 0 or s > 0))
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
        b.bar_sync()                            # the tiles are overwritten next
    base = b.mad(cx, 64 * N, b.mul(cy, n, type=T.u32), type=T.u32, name="cb")
    _store_accumulators(b, pc, acc, base, N, warp, g, t)
    b.ret()
    return m


def wgmma_operands(rng, ctas, n, trans_a=False, trans_b=False, a_regs=False):
    """Global arrays for wgmma_probe (bf16 bits) and the float64 A (ctas, 64, 64) and
    B (ctas, 64, n) they hold."""
    a_bits, a = random_bits(rng, "bf16", (ctas, 64, 64))
    b_bits, bm = random_bits(rng, "bf16", (ctas, 64, n))              # k × n
    if a_regs or not trans_a:
        ga = a_bits                                                     # rows m, k along
    else:
        ga = np.swapaxes(a_bits, 1, 2)                                  # rows k, m along
    if trans_b:
        gb = b_bits.reshape(ctas, 64, n // 64, 64).transpose(0, 2, 1, 3)   # block, k, n
    else:
        gb = np.swapaxes(b_bits, 1, 2)                                      # rows n, k along
    return np.ascontiguousarray(ga), np.ascontiguousarray(gb), a, bm


# -- inputs and references ---------------------------------------------------------------------------
def random_bits(rng, ab, shape):
    """Random operands of format ab as their bit patterns (uint16 / uint32 / int8) and values."""
    if ab in ("s8", "u8"):
        v = rng.integers(-128 if ab == "s8" else 0, 128 if ab == "s8" else 256, shape)
        bits = v.astype(np.int8 if ab == "s8" else np.uint8)
        return bits, v.astype(np.float64)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
    if ab in ("e4m3", "e5m2"):
        from ..arrays import from_fp8, to_fp8
        bits = to_fp8(x, ab)
        return bits, from_fp8(bits, ab)
    if ab == "f16":
        bits = x.astype(np.float16).view(np.uint16)
        return bits, bits.view(np.float16).astype(np.float64)
    if ab == "bf16":
        from .tc_matmul import bf16_bits, bf16_values
        bits = bf16_bits(x)
        return bits, bf16_values(bits)
    if ab == "tf32":
        bits = (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000))
        return bits, bits.view(np.float32).astype(np.float64)      # tf32: f32 with 10 bits
    raise ValueError(ab)


def ldmatrix_expected(src, num, trans):
    """What ldmatrix gives each lane, from the ISA's layout (fragments.ldmatrix_coord): src is
    (warps, 8·num, 8) uint16; returns (warps, 32, num) uint32."""
    out = np.zeros(src.shape[:1] + (32, num), np.uint32)
    for lane in range(32):
        for j in range(num):
            _, r, c = F.ldmatrix_coord(lane, j)
            mat = src[:, 8 * j:8 * j + 8]
            if trans:
                mat = np.swapaxes(mat, 1, 2)
            out[:, lane, j] = mat[:, r, c].astype(np.uint32) | \
                (mat[:, r, c + 1].astype(np.uint32) << 16)
    return out


# -- mbarrier and TMA ---------------------------------------------------------------------------------
def tma_probe(box=(64, 32), esize=2, target=DEFAULT_TARGET, offset=0):
    """Kernel `tma_probe(tin, tout, raw, x0, y0, x1, y1)`, 128 threads, one CTA: thread 0 sets up
    an mbarrier, expects the box's bytes and TMA-loads the box of tensor map `tin` at (x0, y0);
    every thread waits on the barrier's phase 0, copies the shared tile byte for byte to `raw`
    (so the swizzle and the out-of-bounds fill are visible), and thread 0 TMA-stores the tile
    into `tout` at (x1, y1). offset: bytes from the 1024-byte aligned shared buffer to the
    tile (TMA needs 128)."""
    from ..ir.builder_tensor import tensor_map_param
    nbytes = box[0] * box[1] * esize
    m = Module(target=target)
    k = m.add_kernel("tma_probe", [tensor_map_param("tin"), tensor_map_param("tout"),
                                   Param("raw", T.u64, ptr(T.b8, align=16))] +
                     [Param(x, T.s32) for x in ("x0", "y0", "x1", "y1")])
    b = Builder(k)
    tile = b.address_of(b.shared("tile", T.b8, nbytes + offset, align=1024))
    if offset:
        tile = b.add(tile, offset, name="tile")
    bar = b.address_of(b.shared("bar", T.b64, 1, align=8))
    raw = b.param("raw")
    tid = b.special("tid.x")
    first = b.setp("eq", tid, 0)
    with b.if_(first):
        b.mbarrier_init(bar, 1)
        b.fence_mbarrier_init()         # the init visible to the async proxy (the TMA unit)
    b.bar_sync()
    with b.if_(first):
        b.mbarrier_arrive_expect_tx(bar, nbytes)
        b.cp_async_bulk_tensor_load(tile, "tin", (b.param("x0"), b.param("y0")), bar)
    b.mbarrier_wait_parity(bar, 0)
    for rep in range(-(-nbytes // (128 * 4))):
        w = b.add(tid, rep * 128, type=T.u32, name="w")
        with b.if_(b.setp("lt", w, nbytes // 4)):
            v = b.ld("shared", T.b32, b.mad(w, 4, tile, type=T.u32, name="sa"))
            b.st("global", b.element_addr(raw, w, 4), v, type=T.b32)
    b.bar_sync()
    with b.if_(first):
        b.cp_async_bulk_tensor_store("tout", (b.param("x1"), b.param("y1")), tile)
        b.cp_async_bulk_commit_group()
        b.cp_async_bulk_wait_group(0)
        b.mbarrier_inval(bar)
    b.ret()
    return m


def pipeline_probe(steps=6, stages=2, target=DEFAULT_TARGET):
    """Kernel `pipeline_probe(src, out)`, 64 threads: warp 0 produces, warp 1 consumes through a
    ring of `stages` shared slots of 32 words guarded by 'full' and 'empty' mbarriers (the
    warp-specialized pattern): the producer waits for a slot to be empty, fills it with step s's
    32 words from src, and arrives on 'full' (32 arrivals); the consumer waits for it, adds the
    words into its registers and arrives on 'empty'. out[lane] = sum over steps of src[s, lane]."""
    m = Module(target=target)
    k = m.add_kernel("pipeline_probe", [Param("src", T.u64, ptr(T.u32)),
                                        Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    slots = b.address_of(b.shared("slots", T.b32, 32 * stages, align=16))
    full = b.address_of(b.shared("full", T.b64, stages, align=8))
    empty = b.address_of(b.shared("empty", T.b64, stages, align=8))
    src, out = b.param("src"), b.param("out")
    tid = b.special("tid.x")
    lane = b.and_(tid, 31, name="lane")
    with b.if_(b.setp("eq", tid, 0)):
        for s in range(stages):
            b.mbarrier_init(b.add(full, 8 * s, type=T.u32), 32)
            b.mbarrier_init(b.add(empty, 8 * s, type=T.u32), 32)
    b.bar_sync()
    producer = b.setp("lt", tid, 32)
    total = b.const(0, T.u32, name="total")
    for s in range(steps):
        slot, phase = s % stages, (s // stages) & 1
        f, e = b.add(full, 8 * slot, type=T.u32), b.add(empty, 8 * slot, type=T.u32)
        addr = b.mad(lane, 4, b.add(slots, 128 * slot, type=T.u32), type=T.u32, name="sl")
        with b.if_(producer):
            b.mbarrier_wait_parity(e, phase ^ 1)      # a fresh barrier's previous phase is done
            v = b.ld("global", T.u32, b.element_addr(src, b.add(lane, 32 * s, type=T.u32), 4))
            b.st("shared", addr, v)
            b.mbarrier_arrive(f)
        with b.if_(producer, negate=True):
            b.mbarrier_wait_parity(f, phase)
            b.add(total, b.ld("shared", T.u32, addr), out=total)
            b.mbarrier_arrive(e)
    with b.if_(producer, negate=True):
        b.st("global", b.element_addr(out, lane, 4), total)
    b.ret()
    return m


def deadlock_probe(target=DEFAULT_TARGET):
    """Kernel `deadlock_probe()`: a barrier expecting 2 arrivals gets 1, then 32 threads wait."""
    m = Module(target=target)
    k = m.add_kernel("deadlock_probe", [])
    b = Builder(k)
    bar = b.address_of(b.shared("bar", T.b64, 1, align=8))
    tid = b.special("tid.x")
    with b.if_(b.setp("eq", tid, 0)):
        b.mbarrier_init(bar, 2)
    b.bar_sync()
    with b.if_(b.setp("eq", tid, 0)):
        b.mbarrier_arrive(bar)
    b.mbarrier_wait_parity(bar, 0)
    b.ret()
    return m
