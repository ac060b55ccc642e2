"""PTX kernels of the ninth held-out group (held9, benchmarks/model_set_held9.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators);
model_set.py loads and launches them as it does held5's (raw addresses, pointer parameters
emitted as plain .u64).
"""
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Addr, Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T

FP_WORDS = 16                # tanimoto: 512-bit fingerprints, four 16-byte loads each
PRIME = 2013265921           # modinv_fermat: the prime 15 2^27 + 1 (fits 31 bits)
BARRETT_MU = (1 << 62) // PRIME    # floor(2^62 / PRIME) < 2^32: the quotient estimate's factor
FULL = -1                    # shfl.sync member mask: all 32 lanes


def tanimoto():
    """sim[i] = popc(db_i & q) / popc(db_i | q) for 512-bit fingerprints: each thread reads its
    64 bytes by four ld.global.v4.u32 (a warp's loads 64 bytes apart), the query's 64 bytes
    (the same address in every lane), two popc.b32 per word pair, one div.rn.f32."""
    m = Module(target="sm_90")
    k = m.add_kernel("tanimoto", [Param("n", T.u32), Param("q", T.u64, ptr(T.u32, align=16)),
                                  Param("db", T.u64, ptr(T.u32, align=16)),
                                  Param("sim", T.u64, ptr(T.f32))])
    b = Builder(k)
    n, q, db, sim = (b.param(p) for p in ("n", "q", "db", "sim"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        fa = b.element_addr(db, i, 4 * FP_WORDS, name="fa")
        inter, union = b.const(0, T.u32, name="inter"), b.const(0, T.u32, name="union")
        for c in range(FP_WORDS // 4):
            words = b.ld("global", T.u32, Addr(fa, 16 * c), vec=4, name="w")
            qw = b.ld("global", T.u32, Addr(q, 16 * c), vec=4, name="qw")
            for w, v in zip(words, qw):
                inter = b.add(inter, b.unary("popc", b.and_(w, v, type=T.b32), type=T.u32))
                union = b.add(union, b.unary("popc", b.or_(w, v, type=T.b32), type=T.u32))
        s = b.div(b.cvt(T.f32, inter), b.cvt(T.f32, union), name="s")
        b.st("global", b.element_addr(sim, i, 4, name="sa"), s)
    b.ret()
    return _plain_pointers(emit_module(m)), "tanimoto"


def _modmul(b, u, v):
    """u v mod PRIME for u, v < PRIME by Barrett reduction: the 62-bit product (mul.wide.u32),
    a quotient estimate from its top 32 bits (mul.hi.u32 by BARRETT_MU) short by at most 2,
    and two conditional subtractions (setp/selp on u64)."""
    prod = b.mul(u, v, mode="wide", type=T.u32, name="prod")
    top = b.cvt(T.u32, b.shr(prod, Imm(30, T.u32), type=T.u64), name="top")
    quo = b.mul(top, Imm(BARRETT_MU, T.u32), mode="hi", type=T.u32, name="quo")
    r = b.sub(prod, b.mul(quo, Imm(PRIME, T.u32), mode="wide", type=T.u32), type=T.u64)
    for _ in range(2):
        over = b.setp("ge", r, Imm(PRIME, T.u64), type=T.u64)
        r = b.selp(b.sub(r, Imm(PRIME, T.u64), type=T.u64), r, over, type=T.u64)
    return b.cvt(T.u32, r, name="mm")


def modinv_fermat():
    """out[i] = a[i]^(PRIME-2) mod PRIME, the modular inverse by Fermat's little theorem (batch
    inversion in number-theoretic transforms): left-to-right square-and-multiply over the
    exponent's 31 bits, unrolled (30 squares and 29 multiplies, each a Barrett reduction)."""
    m = Module(target="sm_90")
    k = m.add_kernel("modinv_fermat", [Param("n", T.u32), Param("a", T.u64, ptr(T.u32)),
                                       Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, a, out = (b.param(p) for p in ("n", "a", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        x = b.ld("global", T.u32, b.element_addr(a, i, 4, name="xa"), name="x")
        r = x
        for bit in bin(PRIME - 2)[3:]:
            r = _modmul(b, r, r)
            if bit == "1":
                r = _modmul(b, r, x)
        b.st("global", b.element_addr(out, i, 4, name="oa"), r)
    b.ret()
    return _plain_pointers(emit_module(m)), "modinv_fermat"


def _shfl_up(b, value, delta):
    """shfl.sync.up.b32: the value of the lane `delta` below ours (our own in lanes < delta)."""
    dst = b.reg(value.type, "up")
    b.emit(Instr("shfl", ("sync", "up", "b32"),
                 (dst, value, Imm(delta, T.b32), Imm(0, T.b32), Imm(FULL, T.b32))))
    return dst


def seg_scan_warp():
    """y = the inclusive sums of x over runs of equal keys, within each warp's 32 elements (a
    run also starts at lane 0): the head flags from the key of the lane below (shfl.sync.up),
    then five Hillis-Steele steps that shuffle value and flag up by 1, 2, 4, 8, 16 lanes and
    add only where no head lies between. Every lane of the last warp shuffles (its loads are
    clamped to element n - 1); only lanes i < n store."""
    m = Module(target="sm_90")
    k = m.add_kernel("seg_scan_warp", [Param("n", T.u32), Param("x", T.u64, ptr(T.f32)),
                                       Param("keys", T.u64, ptr(T.s32)),
                                       Param("y", T.u64, ptr(T.f32))])
    b = Builder(k)
    n, x, keys, y = (b.param(p) for p in ("n", "x", "keys", "y"))
    i = b.global_index()
    lane = b.and_(b.special("tid.x"), 31, type=T.u32, name="lane")
    j = b.min(i, b.sub(n, 1, type=T.u32), type=T.u32, name="j")
    v = b.ld("global", T.f32, b.element_addr(x, j, 4, name="xa"), name="v")
    key = b.ld("global", T.s32, b.element_addr(keys, j, 4, name="ka"), name="key")
    one, zero = Imm(1, T.u32), Imm(0, T.u32)
    f = b.selp(one, zero, b.setp("ne", _shfl_up(b, key, 1), key), type=T.u32, name="head")
    f = b.or_(f, b.selp(one, zero, b.setp("eq", lane, zero), type=T.u32), type=T.u32)
    for d in (1, 2, 4, 8, 16):
        vu, fu = _shfl_up(b, v, d), (_shfl_up(b, f, d) if d < 16 else None)
        inside = b.setp("ge", lane, Imm(d, T.u32), type=T.u32)
        stop = b.selp(f, one, inside, type=T.u32)        # a lane below d: nothing to add
        v = b.selp(v, b.add(v, vu), b.setp("ne", stop, zero), type=T.f32)
        if d < 16:                                     # the last step's flags are not read
            f = b.or_(f, b.selp(fu, zero, inside, type=T.u32), type=T.u32)
    with b.if_(b.setp("lt", i, n)):
        b.st("global", b.element_addr(y, i, 4, name="ya"), v)
    b.ret()
    return _plain_pointers(emit_module(m)), "seg_scan_warp"


# family: builder of (PTX text, entry)
KERNELS = {"ptx_tanimoto": tanimoto, "ptx_modinv_fermat": modinv_fermat,
           "ptx_seg_scan_warp": seg_scan_warp}
