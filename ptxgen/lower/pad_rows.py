"""The realigning 16-byte row copy shared by the pad-copy kernel (ops/pack.py) and the GEMM's
fused pad copy (fused_pad.py): one lane writes one 16-byte chunk of a zero-padded
row whose source row is not 16-byte aligned.

Why this shape: a source row of `cols` 16-bit (or 32-bit) elements starts at byte
(r * cols + c * per) * elem, which is only 2- (4-) byte aligned. Element-wise loads cost eight
(four) load instructions per 16 bytes; instead the lane loads the one or two 16-byte aligned
blocks that cover its 16 source bytes (ld.global.v4: the bytes from s & ~15 to (s & ~15) + 32),
views them as four 64-bit words and shifts them right by the byte offset m = s & 15 (a select
by m >= 8, then a funnel of two 64-bit shifts by (m & 7) * 8 bits; PTX clamps 64-bit shift
counts at 64, so m & 7 == 0 needs no special case). Elements past `cols` (the pad) and whole
rows past `rows` are masked to zero with the same clamped shifts.

Never outside the source array: a block that is not wholly inside [src, src + rows*cols*elem)
(the last row's tail, or a source that does not start 16-byte aligned) is loaded element by
element, each load predicated on its element lying inside; a block needed by no element is
not loaded (the second block only when m + valid bytes > 16).
"""
from ..ir import Addr
from ..ir import types as T
from ..ir.values import Vec

CHUNK = 16                      # bytes a lane writes: one st.global.v2.b64


def copy_chunk(b, src, end, dst_row, r, c, rows, cols, elem_bytes, store_ok=None):
    """Emit the copy of chunk c (16 bytes) of padded row r: from row r, elements c*per .. of
    the rows x cols source at `src` (u64 generic/global address; `end` = src + rows*cols*elem)
    to the 16-byte aligned address dst_row + 16*c. r, c, rows, cols: u32 registers. A row
    r >= rows writes zeros; store_ok (a predicate) skips the store where false."""
    chunk_store(b, chunk_loads(b, src, end, r, c, rows, cols, elem_bytes), dst_row, c,
                store_ok)


def chunk_loads(b, src, end, r, c, rows, cols, elem_bytes, valid=None):
    """The loads of copy_chunk (issued here, used by chunk_store): a caller that copies several
    chunks issues all their loads first so they are in flight together. valid (a predicate):
    where false nothing is loaded (the chunk is all zeros)."""
    per = CHUNK // elem_bytes
    # valid elements of this chunk: clamp(cols - c*per, 0, per), 0 for rows past `rows`
    left = b.sub(cols, b.mul(c, per, name="cp"), type=T.s32, name="left")
    n = b.min(b.max(left, 0, type=T.s32), per, type=T.s32, name="nval")
    b.selp(n, 0, b.setp("lt", r, rows, type=T.u32), type=T.u32, out=n)
    if valid is not None:
        b.selp(n, 0, valid, type=T.u32, out=n)
    nbytes = b.mul(n, elem_bytes, type=T.u32, name="nbytes")
    # source byte address of the chunk's first element (64-bit: rows*cols may pass 2^32)
    first = b.add(b.mul(r, cols, mode="wide", type=T.u32, name="rc"),
                  b.cvt(T.u64, b.mul(c, per, name="cpe"), name="cpe64"), type=T.u64, name="fe")
    s = b.add(src, b.mul(first, elem_bytes, type=T.u64, name="fb"), type=T.u64, name="s")
    a = b.and_(s, ~(CHUNK - 1) & 0xFFFFFFFFFFFFFFFF, type=T.b64, name="al")
    m = b.and_(b.cvt(T.u32, s, name="s32"), CHUNK - 1, type=T.u32, name="mis")
    need0 = b.setp("ne", n, 0, type=T.u32, name="need0")
    need1 = b.setp("gt", b.add(m, nbytes, name="mend"), CHUNK, type=T.u32, name="need1")
    words = (_block(b, a, src, end, need0, elem_bytes) +
             _block(b, b.add(a, CHUNK, type=T.u64, name="al1"), src, end, need1, elem_bytes))
    return dict(words=words, m=m, nbytes=nbytes)


def chunk_store(b, loaded, dst_row, c, store_ok=None):
    """Shift the loaded blocks by the source's byte offset, zero the bytes past the valid
    elements and store the 16 bytes at dst_row + 16*c."""
    words, m, nbytes = loaded["words"], loaded["m"], loaded["nbytes"]
    d = [b.mov(Vec((words[2 * i], words[2 * i + 1])), type=T.b64, name="d") for i in range(4)]
    hi = b.setp("ge", m, 8, type=T.u32, name="hi8")
    e = [b.selp(d[i + 1], d[i], hi, type=T.b64, name="e") for i in range(3)]
    sh = b.shl(b.and_(m, 7, type=T.u32), 3, type=T.u32, name="sh")
    back = b.sub(64, sh, type=T.u32, name="back")
    out = [b.or_(b.shr(e[i], sh, type=T.b64), b.shl(e[i + 1], back, type=T.b64),
                 type=T.b64, name="o") for i in range(2)]
    # keep the low nbits = 8*nbytes bits of the 128: (1 << min(nbits, 64)) - 1 and
    # (1 << max(nbits - 64, 0)) - 1, the clamped shift giving 0 (all ones after -1) past 63
    nbits = b.shl(nbytes, 3, type=T.u32, name="nbits")
    one = b.const(1, T.b64, name="one")
    keep0 = b.sub(b.shl(one, nbits, type=T.b64), 1, type=T.s64, name="k0")
    over = b.max(b.sub(nbits, 64, type=T.s32, name="nb64"), 0, type=T.s32, name="over")
    keep1 = b.sub(b.shl(one, over, type=T.b64), 1, type=T.s64, name="k1")
    vals = [b.and_(out[0], keep0, type=T.b64, name="v"), b.and_(out[1], keep1, type=T.b64,
                                                             name="v")]
    at = Addr(b.add(dst_row, b.cvt(T.u64, b.shl(c, 4, name="c16"), name="c64"), type=T.u64,
                    name="dd"))
    if store_ok is None:
        b.st("global", at, vals, type=T.b64)
        return
    with b.predicated(store_ok):
        b.st("global", at, vals, type=T.b64)


def _block(b, x, src, end, need, elem_bytes):
    """The four 32-bit words of the aligned 16-byte block at x (zero where not needed): one
    ld.global.v4 when the block lies inside [src, end), else element loads predicated on each
    element being inside."""
    words = [b.const(0, T.b32, name="w") for _ in range(4)]
    inside = b.and_(b.setp("ge", x, src, type=T.u64),
                    b.setp("le", b.add(x, CHUNK, type=T.u64, name="xe"), end, type=T.u64),
                    name="inside")
    full = b.and_(need, inside, name="full")
    with b.predicated(full):
        b.ld("global", T.b32, Addr(x), vec=4, out=words)
    with b.if_(need), b.if_(inside, negate=True):   # rare: the array's last (first) block
        if elem_bytes == 4:
            for i, w in enumerate(words):
                _load_inside(b, x, i * 4, src, end, T.b32, w)
        else:
            for i, w in enumerate(words):
                halves = [b.const(0, T.b16, name="h") for _ in range(2)]
                for j, h in enumerate(halves):
                    _load_inside(b, x, i * 4 + 2 * j, src, end, T.b16, h)
                b.mov(Vec(tuple(halves)), type=T.b32, out=w)
    return words


def _load_inside(b, x, off, src, end, t, out):
    at = b.add(x, off, type=T.u64, name="xa")
    ok = b.and_(b.setp("ge", at, src, type=T.u64),
                b.setp("lt", at, end, type=T.u64), name="in")
    with b.predicated(ok):
        b.ld("global", t, Addr(at), out=out)
