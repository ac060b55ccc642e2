"""Fitting cases of round sim10b (benchmarks/model_set.py, split "fit"): global atomics over a
number of buckets, and a copy of P-byte pieces of rows at a pitch against the same copy of
contiguous pieces. Written with ptxgen's Builder (a user's kernel, not ptxgen's operators) on
the blind groups' interface (cases / small / ptx_kernel / ptx_case), so model_set.py collects
them as it does held8's PTX families and the CPU test runs the very same launch on ptxgen's
emulator at a small size.

fitd_atom: thread i hashes its index (h = i * 0x9E3779B1, h ^= h >> 15) to bucket h % buckets
and does one global atomic there: atom.add.u32 of 1, atom.max.u32 of a second hash (both keep
the old value: a store guarded by old == 0xFFFFFFFF, which never holds, so ptxas must keep the
returning ATOM), or red.add.f32 of 1.0. Same op count at 1 .. 1000003 buckets: what the L2
atomic units take per operation as the addresses go from one word (every lane of every warp
serialized there) through one line, L1-sized and L2-sized tables to tables past where a
warp's 32 lanes share no line. The question (issue 14) is atomic_minmax's 1000 buckets
(+169 %) and ptx_red_scatter's 1000003 (+36 %): the model's `atomic_interleave_bytes` and
`atomic_same_address_ns` were fitted on two cases.

fitd_rows: a copy of a rows x pitch byte array by CTAs that each move one P-byte piece of 64
consecutive rows (128 threads, 16 bytes each, ld/st.global.v4.u32; up to 8 loads in flight per
thread before their stores). CTAs are numbered row group fastest, so the CTAs resident at
once all read one P-byte column band of the rows: at pitch 32 KB or 4 KB DRAM sees P-byte
pieces that far apart; at pitch = P (the reference, same kernel and threads) it sees a
contiguous stream. The question is whether DRAM delivers such pieces below copy bandwidth
(triton_colsum, _transpose_add, _masked_mean, _scale_bias_relu and gemv_colmajor read ~512-byte
pieces of rows 32 KB or more apart and are under-predicted by 27 .. 64 %).
"""
import numpy as np

from model_set_held3 import _emulate_ptx_with
from model_set_held4 import _wrong
from model_set_held5_ptx import _plain_pointers, _rem
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Module, Param, ptr
from ptxgen.ir import types as T

PTX_FAMILIES = {"fitd_atom", "fitd_rows"}
FAMILIES = PTX_FAMILIES
NUMBA_FAMILIES = TRITON_FAMILIES = frozenset()
TOLERANCE = {}
MB = 1 << 20
ROWS_PER_CTA = 64               # fitd_rows: rows of its piece each CTA copies
THREADS = 128                   # fitd_rows: threads per CTA, 16 bytes each per row step
IN_FLIGHT = 8                   # fitd_rows: loads a thread issues before their stores
OPS = ("add_u32", "max_u32", "red_f32")
H1, H2 = 0x9E3779B1, 0x85EBCA6B


def cases():
    """(family, source, size label, parameters) of every case."""
    out = []
    for n, buckets in ((1 << 18, (1, 32, 1000, 100003, 1000003)), (1 << 22, (1000, 1000003))):
        for op in OPS:
            for k in buckets:
                out.append(("fitd_atom", "ptx", f"{op} n={n} buckets={k}",
                            dict(op=op, n=n, buckets=k)))
    for mib in (64, 256):
        for piece in (128, 256, 512, 1024):
            for pitch in (32768, 4096, piece):
                out.append(("fitd_rows", "ptx", f"P={piece} pitch={pitch} {mib}MiB",
                            dict(piece=piece, pitch=pitch, rows=mib * MB // pitch)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds."""
    c = dict(c)
    if c["family"] == "fitd_atom":
        c.update(n=3001, buckets=min(c["buckets"], 1009))
    else:
        c.update(pitch=2 * c["piece"], rows=2 * ROWS_PER_CTA)
    return c


def _hash(b, i):
    h = b.mul(i, Imm(H1, T.u32), mode="lo", type=T.u32, name="h")
    return b.xor(h, b.shr(h, Imm(15, T.u32), type=T.u32), type=T.b32, name="hx")


def atom_kernel(op):
    """One global atomic per thread on bucket hash(i) % buckets (see the module's text)."""
    entry = f"fitd_atom_{op}"
    m = Module(target="sm_90")
    t = T.f32 if op == "red_f32" else T.u32
    k = m.add_kernel(entry, [Param("buf", T.u64, ptr(t)), Param("n", T.u32),
                             Param("buckets", T.u32)])
    b = Builder(k)
    buf, n, buckets = (b.param(p) for p in ("buf", "n", "buckets"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        h = _hash(b, i)
        a = b.element_addr(buf, _rem(b, h, buckets), 4, name="ba")
        if op == "red_f32":
            b.red("global", "add", a, Imm(1.0, T.f32), type=T.f32)
        else:
            v = (Imm(1, T.u32) if op == "add_u32" else
                 b.shr(b.mul(h, Imm(H2, T.u32), mode="lo", type=T.u32), Imm(1, T.u32),
                       type=T.u32, name="v"))
            old = b.atom("global", op[:3], a, v, type=T.u32, name="old")
            with b.if_(b.setp("eq", old, Imm(0xFFFFFFFF, T.u32))):
                b.st("global", a, old, type=T.u32)
    b.ret()
    return _plain_pointers(emit_module(m)), entry


def rows_kernel(piece):
    """Copy of one `piece`-byte piece of ROWS_PER_CTA rows per CTA; CTA c takes row group
    c % groups of column band c / groups (see the module's text)."""
    entry = f"fitd_rows_p{piece}"
    m = Module(target="sm_90")
    k = m.add_kernel(entry, [Param("src", T.u64, ptr(T.u32, align=16)),
                             Param("dst", T.u64, ptr(T.u32, align=16)),
                             Param("pitch", T.u32), Param("groups", T.u32)])
    b = Builder(k)
    src, dst, pitch, groups = (b.param(p) for p in ("src", "dst", "pitch", "groups"))
    lanes = piece // 16                       # threads across one row's piece
    step = THREADS // lanes                   # rows one pass of the CTA covers
    c, t = b.special("ctaid.x"), b.special("tid.x")
    band = b.div(c, groups, type=T.u32, name="band")
    row0 = b.mad(_rem(b, c, groups), Imm(ROWS_PER_CTA, T.u32),
                 b.shr(t, Imm(lanes.bit_length() - 1, T.u32), type=T.u32), type=T.u32,
                 mode="lo", name="row0")
    col = b.mad(band, Imm(piece, T.u32),
                b.shl(b.and_(t, Imm(lanes - 1, T.u32), type=T.b32), Imm(4, T.u32), type=T.b32),
                mode="lo", type=T.u32, name="col")
    offs = []
    for j in range(ROWS_PER_CTA // step):
        row = b.add(row0, Imm(j * step, T.u32), type=T.u32, name="row")
        off = b.mul(row, pitch, mode="wide", type=T.u32, name="ro")
        offs.append(b.add(off, b.cvt(T.u64, col), type=T.u64, name="off"))
    for g0 in range(0, len(offs), IN_FLIGHT):
        group = offs[g0:g0 + IN_FLIGHT]
        vals = [b.ld("global", T.u32, b.add(src, o, type=T.u64, name="sa"), vec=4, name="w")
                for o in group]
        for o, v in zip(group, vals):
            b.st("global", b.add(dst, o, type=T.u64, name="da"), v, type=T.u32)
    b.ret()
    return _plain_pointers(emit_module(m)), entry


def ptx_kernel(fam, c=None):
    """(PTX text, entry) of a case's kernel (model_set.py passes the case)."""
    if fam == "fitd_atom":
        return atom_kernel(c["op"])
    return rows_kernel(c["piece"])


def atom_ref(op, n, buckets):
    """fitd_atom's buckets after the kernel, from a zeroed buffer (numpy, exact)."""
    i = np.arange(n, dtype=np.uint32)
    h = i * np.uint32(H1)
    h ^= h >> np.uint32(15)
    k = (h % np.uint32(buckets)).astype(np.int64)
    if op == "max_u32":
        out = np.zeros(buckets, np.uint32)
        np.maximum.at(out, k, (h * np.uint32(H2)) >> np.uint32(1))
        return out.view(np.int32)
    counts = np.bincount(k, minlength=buckets)
    return counts.astype(np.int32) if op == "add_u32" else counts.astype(np.float32)


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init})."""
    if c["family"] == "fitd_atom":
        op, n, k = c["op"], c["n"], c["buckets"]
        buf = g.zeros(k, integer=op != "red_f32")
        ref = atom_ref(op, n, k)

        def check():                          # every bucket, exactly
            return _wrong(g.host(buf), ref)
        return [buf, np.uint32(n), np.uint32(k)], ((n + 255) // 256,), (256,), check, {}
    piece, pitch, rows = c["piece"], c["pitch"], c["rows"]
    src = g.randint(-2 ** 31, 2 ** 31 - 1, rows * pitch // 4)
    dst = g.zeros(rows * pitch // 4, integer=True)
    groups = rows // ROWS_PER_CTA

    def check():                              # the whole copy, exactly
        return _wrong(g.host(dst), g.host(src))
    return ([src, dst, np.uint32(pitch), np.uint32(groups)], (groups * (pitch // piece),),
            (THREADS,), check, {})


def emulate_ptx(c):
    """Run a small case on ptxgen's emulator; its check's result (0: every word right)."""
    return _emulate_ptx_with(lambda fam: ptx_kernel(fam, c), ptx_case, c)
