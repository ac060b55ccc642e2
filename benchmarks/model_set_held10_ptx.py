"""PTX kernels of the tenth held-out group (held10, benchmarks/model_set_held10.py), built with
ptxgen's Builder the way a user of the library writes a kernel (not ptxgen's tuned operators);
model_set.py loads and launches them as it does held5's (raw addresses, pointer parameters
emitted as plain .u64).
"""
from model_set_held5_ptx import _plain_pointers
from model_set_held6_ptx import _op
from ptxgen import emit_module
from ptxgen.ir import Addr, Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T

# rgb10a2_unpack: (bit position, width, scale) of R, G, B (10 bits) and A (2 bits)
FIELDS = ((0, 10, 1 / 1023), (10, 10, 1 / 1023), (20, 10, 1 / 1023), (30, 2, 1 / 3))
QUERY_WORDS = 4        # sad_match: a 16-byte query patch per thread
SHIFTS = 9             # sad_match: candidates at byte offsets 0, 4, .. 32 of the reference
REF_PAD = 8            # sad_match: words past 4 n the reference holds (the last candidates)
BINS = 32              # match_hist: bins of the histogram (keys drawn from [0, BINS))
FULL = -1              # match.any.sync member mask: all 32 lanes


def rgb10a2_unpack():
    """Packed RGB10A2 pixels (one 32-bit word each) to normalised float4: four bfe.u32 field
    extracts, cvt.rn.f32.u32 and a multiply by 1/1023 (1/3 for alpha) each, one 16-byte
    st.global.v4.f32 per pixel (four bytes read, sixteen written)."""
    m = Module(target="sm_90")
    k = m.add_kernel("rgb10a2_unpack", [Param("n", T.u32), Param("src", T.u64, ptr(T.u32)),
                                        Param("dst", T.u64, ptr(T.f32, align=16))])
    b = Builder(k)
    n, src, dst = (b.param(p) for p in ("n", "src", "dst"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        w = b.ld("global", T.u32, b.element_addr(src, i, 4, name="sa"), name="w")
        out = []
        for pos, bits, scale in FIELDS:
            f = _op(b, "bfe", ("u32",), T.u32, w, Imm(pos, T.u32), Imm(bits, T.u32))
            out.append(b.mul(b.cvt(T.f32, f), Imm(scale, T.f32)))
        b.st("global", b.element_addr(dst, i, 16, name="da"), tuple(out), type=T.f32)
    b.ret()
    return _plain_pointers(emit_module(m)), "rgb10a2_unpack"


def _bytes(b, words):
    """The bytes of 32-bit words, lowest first, each by bfe.u32 into its own register."""
    return [_op(b, "bfe", ("u32",), T.u32, w, Imm(8 * j, T.u32), Imm(8, T.u32))
            for w in words for j in range(4)]


def sad_match():
    """Block matching (motion search along a row): each thread's 16-byte query patch against
    SHIFTS candidates of the reference starting 0, 4, .. 32 bytes after its own position; per
    candidate sixteen sad.u32 (|a - b| + c) on bytes split out by bfe; out = the smallest
    16 SAD + shift (min.u32: the lowest shift wins ties). Query and reference by 16-byte loads
    (the reference's 48 bytes overlap the next two threads')."""
    m = Module(target="sm_90")
    k = m.add_kernel("sad_match", [Param("n", T.u32), Param("q", T.u64, ptr(T.u32, align=16)),
                                   Param("ref", T.u64, ptr(T.u32, align=16)),
                                   Param("out", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, q, ref, out = (b.param(p) for p in ("n", "q", "ref", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        qa = b.element_addr(q, i, 4 * QUERY_WORDS, name="qa")
        ra = b.element_addr(ref, i, 4 * QUERY_WORDS, name="ra")
        qb = _bytes(b, b.ld("global", T.u32, Addr(qa), vec=4, name="qw"))
        rw = []
        for c in range(3):
            rw += b.ld("global", T.u32, Addr(ra, 16 * c), vec=4, name="rw")
        rb = _bytes(b, rw)
        best = None
        for s in range(SHIFTS):
            acc = b.const(0, T.u32, name="acc")
            for j in range(4 * QUERY_WORDS):
                acc = _op(b, "sad", ("u32",), T.u32, qb[j], rb[4 * s + j], acc)
            key = b.add(b.shl(acc, 4, type=T.u32), s, type=T.u32)
            best = key if best is None else b.min(best, key, type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), best)
    b.ret()
    return _plain_pointers(emit_module(m)), "sad_match"


def match_hist():
    """A histogram with warp-aggregated atomics: match.any.sync.b32 gives each lane the lanes
    holding its key, the lowest of them (no peer under %lanemask_lt) adds their popc with one
    red.global.add.u32. Every lane of the last warp takes part (lanes past n hold key -1 and
    add nothing)."""
    m = Module(target="sm_90")
    k = m.add_kernel("match_hist", [Param("n", T.u32), Param("keys", T.u64, ptr(T.u32)),
                                    Param("bins", T.u64, ptr(T.u32))])
    b = Builder(k)
    n, keys, bins = (b.param(p) for p in ("n", "keys", "bins"))
    i = b.global_index()
    valid = b.setp("lt", i, n, name="valid")
    j = b.min(i, b.sub(n, 1, type=T.u32), type=T.u32, name="j")
    key = b.ld("global", T.u32, b.element_addr(keys, j, 4, name="ka"), name="key")
    key = b.selp(key, Imm(0xFFFFFFFF, T.u32), valid, type=T.u32, name="key")
    peers = b.reg(T.b32, "peers")
    b.emit(Instr("match", ("any", "sync", "b32"), (peers, key, Imm(FULL, T.b32))))
    below = b.and_(peers, b.special("lanemask_lt"), type=T.b32, name="below")
    with b.if_(valid):
        with b.if_(b.setp("eq", below, Imm(0, T.b32), type=T.b32)):
            count = b.unary("popc", peers, type=T.b32, name="count")
            b.red("global", "add", b.element_addr(bins, key, 4, name="ba"), count,
                  type=T.u32)
    b.ret()
    return _plain_pointers(emit_module(m)), "match_hist"


# family: builder of (PTX text, entry)
KERNELS = {"ptx_rgb10a2_unpack": rgb10a2_unpack, "ptx_sad_match": sad_match,
           "ptx_match_hist": match_hist}
