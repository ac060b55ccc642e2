"""PTX kernels of the eleventh held-out group (held11, benchmarks/model_set_held11.py), built
with ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned
operators); model_set.py loads and launches them as it does held5's (raw addresses, pointer
parameters emitted as plain .u64).
"""
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Addr, Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T

CRC_POLY = 0x82F63B78   # crc32c: Castagnoli's polynomial, bit-reflected (iSCSI, ext4, SSE4.2)
RECORD_WORDS = 8        # crc32c: a 32-byte record per thread, two 16-byte loads
CRC_BLOCK = 256         # crc32c: threads a block = entries of the table they build together
MORTON_BITS = 10        # morton3d: bits per axis (a 30-bit code)
VEC_DIM = 128           # warp_l2norm: floats per vector, four per lane
FULL = -1               # shfl.sync member mask: all 32 lanes
L2_EPS = 1e-12          # warp_l2norm: added to the sum of squares (a zero vector stays finite)
# morton3d: (shift, mask) steps that spread 10 bits to every third bit of a 30-bit word
SPREAD = ((16, 0x030000FF), (8, 0x0300F00F), (4, 0x030C30C3), (2, 0x09249249))


def crc32c():
    """CRC-32C of each thread's 32-byte record by a 256-entry table in shared memory: the block
    first builds the table (thread t its entry t, eight shift/xor steps by the reflected
    polynomial; bar.sync), then each thread folds its eight words in, four table look-ups a
    word (crc ^= w; 4x crc = T[crc & 0xff] ^ (crc >> 8)): 32 dependent ld.shared a thread at
    data-dependent banks. Initial value and final xor 0xffffffff, as the standard has it."""
    m = Module(target="sm_90")
    k = m.add_kernel("crc32c", [Param("n", T.u32), Param("rec", T.u64, ptr(T.u32, align=16)),
                                Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, rec, out = (b.param(p) for p in ("n", "rec", "out"))
    table = b.address_of(b.shared("crc_table", T.u32, CRC_BLOCK))
    tid = b.special("tid.x")
    c = tid
    for _ in range(8):
        half = b.shr(c, 1, type=T.u32)
        odd = b.setp("ne", b.and_(c, 1, type=T.u32), Imm(0, T.u32), type=T.u32)
        c = b.selp(b.xor(half, Imm(CRC_POLY, T.u32), type=T.u32), half, odd, type=T.u32)
    b.st("shared", b.add(table, b.shl(tid, 2, type=T.u32), type=T.u32, name="ta"), c)
    b.bar_sync()
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        ra = b.element_addr(rec, i, 4 * RECORD_WORDS, name="ra")
        words = []
        for q in range(RECORD_WORDS // 4):
            words += b.ld("global", T.u32, Addr(ra, 16 * q), vec=4, name="w")
        crc = b.const(0xFFFFFFFF, T.u32, name="crc")
        for w in words:
            crc = b.xor(crc, w, type=T.u32)
            for _ in range(4):
                idx = b.shl(b.and_(crc, 0xFF, type=T.u32), 2, type=T.u32)
                t = b.ld("shared", T.u32, Addr(b.add(table, idx, type=T.u32)), name="t")
                crc = b.xor(t, b.shr(crc, 8, type=T.u32), type=T.u32)
        crc = b.xor(crc, Imm(0xFFFFFFFF, T.u32), type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), crc)
    b.ret()
    return _plain_pointers(emit_module(m)), "crc32c"


def morton3d():
    """30-bit Morton codes of points (x, y, z, w float4; w unused) for a linear BVH build:
    each axis (p - lo) * scale (sub then mul, no fused rounding), cvt.rzi.u32.f32 (saturating:
    below the box gives 0), min 1023, its 10 bits spread to every third bit by four
    shift-or-and steps, code = x << 2 | y << 1 | z. One ld.global.v4.f32 and one 4-byte store a
    point."""
    m = Module(target="sm_90")
    k = m.add_kernel("morton3d", [Param("n", T.u32), Param("lo", T.f32),
                                  Param("scale", T.f32),
                                  Param("pts", T.u64, ptr(T.f32, align=16)),
                                  Param("code", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, lo, scale, pts, code = (b.param(p) for p in ("n", "lo", "scale", "pts", "code"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        p = b.ld("global", T.f32, b.element_addr(pts, i, 16, name="pa"), vec=4, name="p")
        spread = []
        for axis in range(3):
            q = b.cvt(T.u32, b.mul(b.sub(p[axis], lo), scale), rounding="rzi")
            x = b.min(q, (1 << MORTON_BITS) - 1, type=T.u32)
            for s, mask in SPREAD:
                x = b.and_(b.or_(x, b.shl(x, s, type=T.u32), type=T.u32), Imm(mask, T.u32),
                           type=T.u32)
            spread.append(x)
        c = b.or_(b.shl(spread[0], 2, type=T.u32), b.shl(spread[1], 1, type=T.u32),
                  type=T.u32)
        c = b.or_(c, spread[2], type=T.u32)
        b.st("global", b.element_addr(code, i, 4, name="ca"), c)
    b.ret()
    return _plain_pointers(emit_module(m)), "morton3d"


def warp_l2norm():
    """Embedding vectors of VEC_DIM floats scaled to unit length, one warp a vector: each lane
    loads four floats (16 bytes), squares them into a partial sum, five shfl.sync.bfly.b32
    steps (xor 16 .. 1) leave the whole sum in every lane, rsqrt.approx.f32 of sum + eps, four
    multiplies, one 16-byte store. A warp past the last vector skips everything (the branch is
    the same in all its lanes, so the full-mask shuffles stay whole)."""
    m = Module(target="sm_90")
    k = m.add_kernel("warp_l2norm", [Param("n", T.u32),
                                     Param("x", T.u64, ptr(T.f32, align=16)),
                                     Param("y", T.u64, ptr(T.f32, align=16))])
    b = Builder(k)
    n, x, y = (b.param(p) for p in ("n", "x", "y"))
    i = b.global_index()
    vec = b.shr(i, 5, type=T.u32, name="vec")
    with b.if_(b.setp("lt", vec, n)):
        xa = b.element_addr(x, i, 16, name="xa")      # vec * 512 + lane * 16
        v = b.ld("global", T.f32, xa, vec=4, name="v")
        s = b.mul(v[0], v[0])
        for e in v[1:]:
            s = b.fma(e, e, s)
        for d in (16, 8, 4, 2, 1):
            other = b.reg(T.f32, "o")
            b.emit(Instr("shfl", ("sync", "bfly", "b32"),
                         (other, s, Imm(d, T.b32), Imm(31, T.b32), Imm(FULL, T.b32))))
            s = b.add(s, other)
        r = b.unary("rsqrt", b.add(s, Imm(L2_EPS, T.f32)), mods=("approx",), name="r")
        b.st("global", b.element_addr(y, i, 16, name="ya"), tuple(b.mul(e, r) for e in v))
    b.ret()
    return _plain_pointers(emit_module(m)), "warp_l2norm"


# family: builder of (PTX text, entry)
KERNELS = {"ptx_crc32c": crc32c, "ptx_morton3d": morton3d, "ptx_warp_l2norm": warp_l2norm}
