"""Fitting microbenchmarks of the model benchmark set: hand-built PTX kernels that each measure
one mechanism of the memory system, kernels built per case with ptxgen's Builder.

- store_lines: stores after loads of the same thread (k words, ld then st or generic st), and
  loads of 2 .. 32 lanes per 128-byte line from a table L1 or only L2 keeps;
- dram: atomics over hashed buckets (atom.add / atom.max / red.add.f32) and copies of strided
  row pieces of 16 .. 512 bytes;
- thin_access: thin stores behind loads (coalesced, thin, generic, early, gaps), one-sector
  lines by lanes per line, and loads at pitches over a table;
- atomic_form: one global atomic add per thread on a hashed word by the form a kernel writes it
  in (atom with its reply kept, red, generic atom with the result unused: Numba's);
- sort_net: an 8-word sorting network per thread (loads, min/max, stores) in its variants.

The records (model_common.family) give each family's sizes, its small size for the emulator
and its kernel per case; checks are exact unless a tolerance says otherwise.
"""
import numpy as np

from cases_ptx import plain_pointers, rem
from model_common import registry, wrong
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ir.values import Addr

family = registry("ptx")


MB = 1 << 20
STORE_KS = (1, 2, 4, 8)         # words each thread stores after its load
GENERIC_KS = (1, 4, 8)          # words each thread stores by generic st
LANES = (2, 4, 8, 16, 32)       # lanes of a warp per 128-byte line and load
LOADS = 16                      # loads a thread makes in fit10a_lines_*
STEP = 4099                     # lines between one load's line and the next (odd: wraps apart)
L1_LINES, L2_LINES = 256, 65536     # tables of 32 KiB (stays in L1) and 8 MiB (L2, not L1)
STORE_FAMILIES = {"fit10a_store_ld", "fit10a_store_gen"}
LINE_FAMILIES = {"fit10a_lines_l1", "fit10a_lines_l2"}


def _kernel_name(fam, c):
    return f"{fam}{c['k']}" if fam in STORE_FAMILIES else f"{fam}_{c['lanes']}"


def store_after_load(k):
    """v = x[i] by one coalesced ld.global.u32, then out[k i + j] = v for j < k, each by its own
    st.global.u32 (store_lanes' stores with a load before them, as in Triton's and Numba's
    element-wise kernels)."""
    m = Module(target="sm_90")
    kern = m.add_kernel(f"fit10a_store_ld{k}", [Param("n", T.u32), Param("x", T.u64, ptr(T.u32)),
                                               Param("out", T.u64, ptr(T.u32))])
    b = Builder(kern)
    n, x, out = (b.param(p) for p in ("n", "x", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        v = b.ld("global", T.u32, b.element_addr(x, i, 4, name="xa"), name="v")
        base = b.element_addr(out, i, 4 * k, name="oa")
        for j in range(k):
            b.st("global", Addr(base, 4 * j), v, type=T.u32)
    b.ret()
    return plain_pointers(emit_module(m)), f"fit10a_store_ld{k}"


def store_generic(k):
    """out[k i + j] = i for j < k by generic `st.u32` (no state space): store_lanes' kernel in
    the form a compiler writes when it cannot prove the pointer global."""
    m = Module(target="sm_90")
    kern = m.add_kernel(f"fit10a_store_gen{k}", [Param("n", T.u32),
                                                Param("out", T.u64, ptr(T.u32))])
    b = Builder(kern)
    n, out = (b.param(p) for p in ("n", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        base = b.element_addr(out, i, 4 * k, name="oa")
        for j in range(k):
            b.emit(Instr("st", ("u32",), (Addr(base, 4 * j), i)))
    b.ret()
    return plain_pointers(emit_module(m)), f"fit10a_store_gen{k}"


def lines_load(lanes, fam):
    """Thread i sums LOADS floats of `table`: load r reads word
    (((i >> log2 L) + r STEP) & mask) * 32 + (i & (L-1)) * (32 / L), so each warp's load touches
    32 / L lines, L lanes on each, 128 / L bytes apart; the sum goes to out[i] (coalesced).
    The table's size (mask + 1 lines) decides where the lines live: L1 or only L2."""
    lg, name = lanes.bit_length() - 1, f"{fam}_{lanes}"
    m = Module(target="sm_90")
    kern = m.add_kernel(name, [Param("n", T.u32), Param("table", T.u64, ptr(T.f32)),
                               Param("out", T.u64, ptr(T.f32)), Param("mask", T.u32)])
    b = Builder(kern)
    n, table, out, mask = (b.param(p) for p in ("n", "table", "out", "mask"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        line = b.shr(i, Imm(lg, T.u32), type=T.u32, name="line")
        lane_word = b.shl(b.and_(i, Imm(lanes - 1, T.u32), type=T.b32), Imm(5 - lg, T.u32),
                          type=T.b32, name="lw")
        s = b.const(0.0, T.f32, name="s")
        for r in range(LOADS):
            cur = b.and_(line, mask, type=T.b32)
            word = b.or_(b.shl(cur, Imm(5, T.u32), type=T.b32), lane_word, type=T.b32)
            v = b.ld("global", T.f32, b.element_addr(table, word, 4,
                                                    name="ta"), name="v")
            s = b.add(s, v, type=T.f32)
            if r + 1 < LOADS:
                line = b.add(line, Imm(STEP, T.u32), type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), s)
    b.ret()
    return plain_pointers(emit_module(m)), name


def store_lines_kernel(c):
    """(PTX text, entry) of a case's kernel (the case gives k or the lanes)."""
    fam = c["family"]
    if fam == "fit10a_store_ld":
        return store_after_load(c["k"])
    if fam == "fit10a_store_gen":
        return store_generic(c["k"])
    if fam in LINE_FAMILIES:
        return lines_load(c["lanes"], fam)
    raise KeyError(fam)


def lines_ref(table, n, lanes, mask):
    """fit10a_lines_*'s sums for threads 0..n-1 in float64 (the same word indices)."""
    i = np.arange(n, dtype=np.int64)
    lg = lanes.bit_length() - 1
    s = np.zeros(n)
    for r in range(LOADS):
        word = (((i >> lg) + r * STEP) & mask) * 32 + (i & (lanes - 1)) * (32 // lanes)
        s += np.asarray(table, np.float64)[word]
    return s


@family(name='fit10a_lines_l2', kernel=store_lines_kernel, small={'n': 1001}, tolerance=1e-05,
        sizes=[
        ('L=2 n=262144', {'lanes': 2, 'n': 262144, 'lines': 65536}),
        ('L=2 n=1048576', {'lanes': 2, 'n': 1048576, 'lines': 65536}),
        ('L=4 n=524288', {'lanes': 4, 'n': 524288, 'lines': 65536}),
        ('L=4 n=2097152', {'lanes': 4, 'n': 2097152, 'lines': 65536}),
        ('L=8 n=1048576', {'lanes': 8, 'n': 1048576, 'lines': 65536}),
        ('L=8 n=4194304', {'lanes': 8, 'n': 4194304, 'lines': 65536}),
        ('L=16 n=2097152', {'lanes': 16, 'n': 2097152, 'lines': 65536}),
        ('L=16 n=8388608', {'lanes': 16, 'n': 8388608, 'lines': 65536}),
        ('L=32 n=4194304', {'lanes': 32, 'n': 4194304, 'lines': 65536}),
        ('L=32 n=16777216', {'lanes': 32, 'n': 16777216, 'lines': 65536})])
@family(name='fit10a_lines_l1', kernel=store_lines_kernel, small={'n': 1001}, tolerance=1e-05,
        sizes=[
        ('L=2 n=262144', {'lanes': 2, 'n': 262144, 'lines': 256}),
        ('L=2 n=1048576', {'lanes': 2, 'n': 1048576, 'lines': 256}),
        ('L=4 n=524288', {'lanes': 4, 'n': 524288, 'lines': 256}),
        ('L=4 n=2097152', {'lanes': 4, 'n': 2097152, 'lines': 256}),
        ('L=8 n=1048576', {'lanes': 8, 'n': 1048576, 'lines': 256}),
        ('L=8 n=4194304', {'lanes': 8, 'n': 4194304, 'lines': 256}),
        ('L=16 n=2097152', {'lanes': 16, 'n': 2097152, 'lines': 256}),
        ('L=16 n=8388608', {'lanes': 16, 'n': 8388608, 'lines': 256}),
        ('L=32 n=4194304', {'lanes': 32, 'n': 4194304, 'lines': 256}),
        ('L=32 n=16777216', {'lanes': 32, 'n': 16777216, 'lines': 256})])
@family(name='fit10a_store_gen', kernel=store_lines_kernel, small={'n': 999}, sizes=[
        ('k=1 32MiB', {'k': 1, 'n': 8388608}),
        ('k=1 256MiB', {'k': 1, 'n': 67108864}),
        ('k=4 32MiB', {'k': 4, 'n': 2097152}),
        ('k=4 256MiB', {'k': 4, 'n': 16777216}),
        ('k=8 32MiB', {'k': 8, 'n': 1048576}),
        ('k=8 256MiB', {'k': 8, 'n': 8388608})])
@family(name='fit10a_store_ld', kernel=store_lines_kernel, small={'n': 999}, sizes=[
        ('k=1 32MiB', {'k': 1, 'n': 8388608}),
        ('k=1 256MiB', {'k': 1, 'n': 67108864}),
        ('k=2 32MiB', {'k': 2, 'n': 4194304}),
        ('k=2 256MiB', {'k': 2, 'n': 33554432}),
        ('k=4 32MiB', {'k': 4, 'n': 2097152}),
        ('k=4 256MiB', {'k': 4, 'n': 16777216}),
        ('k=8 32MiB', {'k': 8, 'n': 1048576}),
        ('k=8 256MiB', {'k': 8, 'n': 8388608})])
def store_lines_case(g, c):
    """(args in parameter order, grid, block, check, inits) of a case; the check counts wrong
    words (stores, exact) or gives the largest relative error of the first 2^16 sums."""
    fam, n = c["family"], c["n"]
    grid, block = ((n + 255) // 256,), (256,)
    if fam in STORE_FAMILIES:
        k = c["k"]
        out = g.zeros(n * k, integer=True)
        if fam == "fit10a_store_ld":
            x = g.randint(-2 ** 31, 2 ** 31 - 1, n)
            args = [np.uint32(n), x, out]
        else:
            args = [np.uint32(n), out]

        def check():
            m = min(n, 1 << 16)
            want = g.host(x[:m]) if fam == "fit10a_store_ld" else np.arange(m, dtype=np.int32)
            got = g.host(out[:m * k]).reshape(m, k)
            return float((got != want[:, None]).sum())
        return args, grid, block, check, {}
    if fam in LINE_FAMILIES:
        table, out = g.randn(32 * c["lines"]), g.empty(n)
        args = [np.uint32(n), table, out, np.uint32(c["lines"] - 1)]

        def check():
            m = min(n, 1 << 16)
            ref = lines_ref(g.host(table), m, c["lanes"], c["lines"] - 1)
            return float(np.abs(g.host(out[:m]) - ref).max() / np.abs(ref).max())
        return args, grid, block, check, {}
    raise KeyError(fam)


ROWS_PER_CTA = 64               # fitd_rows: rows of its piece each CTA copies
THREADS = 128                   # fitd_rows: threads per CTA, 16 bytes each per row step
IN_FLIGHT = 8                   # fitd_rows: loads a thread issues before their stores
OPS = ("add_u32", "max_u32", "red_f32")
H1, H2 = 0x9E3779B1, 0x85EBCA6B


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
        a = b.element_addr(buf, rem(b, h, buckets), 4, name="ba")
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
    return plain_pointers(emit_module(m)), entry


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
    row0 = b.mad(rem(b, c, groups), Imm(ROWS_PER_CTA, T.u32),
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
    return plain_pointers(emit_module(m)), entry


def dram_kernel(c):
    """(PTX text, entry) of a case's kernel."""
    fam = c["family"]
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


@family(name='fitd_rows', kernel=dram_kernel,
        small=lambda c: dict(pitch=2 * c["piece"], rows=2 * ROWS_PER_CTA), sizes=[
        ('P=128 pitch=32768 64MiB', {'piece': 128, 'pitch': 32768, 'rows': 2048}),
        ('P=128 pitch=4096 64MiB', {'piece': 128, 'pitch': 4096, 'rows': 16384}),
        ('P=128 pitch=128 64MiB', {'piece': 128, 'pitch': 128, 'rows': 524288}),
        ('P=256 pitch=32768 64MiB', {'piece': 256, 'pitch': 32768, 'rows': 2048}),
        ('P=256 pitch=4096 64MiB', {'piece': 256, 'pitch': 4096, 'rows': 16384}),
        ('P=256 pitch=256 64MiB', {'piece': 256, 'pitch': 256, 'rows': 262144}),
        ('P=512 pitch=32768 64MiB', {'piece': 512, 'pitch': 32768, 'rows': 2048}),
        ('P=512 pitch=4096 64MiB', {'piece': 512, 'pitch': 4096, 'rows': 16384}),
        ('P=512 pitch=512 64MiB', {'piece': 512, 'pitch': 512, 'rows': 131072}),
        ('P=1024 pitch=32768 64MiB', {'piece': 1024, 'pitch': 32768, 'rows': 2048}),
        ('P=1024 pitch=4096 64MiB', {'piece': 1024, 'pitch': 4096, 'rows': 16384}),
        ('P=1024 pitch=1024 64MiB', {'piece': 1024, 'pitch': 1024, 'rows': 65536}),
        ('P=128 pitch=32768 256MiB', {'piece': 128, 'pitch': 32768, 'rows': 8192}),
        ('P=128 pitch=4096 256MiB', {'piece': 128, 'pitch': 4096, 'rows': 65536}),
        ('P=128 pitch=128 256MiB', {'piece': 128, 'pitch': 128, 'rows': 2097152}),
        ('P=256 pitch=32768 256MiB', {'piece': 256, 'pitch': 32768, 'rows': 8192}),
        ('P=256 pitch=4096 256MiB', {'piece': 256, 'pitch': 4096, 'rows': 65536}),
        ('P=256 pitch=256 256MiB', {'piece': 256, 'pitch': 256, 'rows': 1048576}),
        ('P=512 pitch=32768 256MiB', {'piece': 512, 'pitch': 32768, 'rows': 8192}),
        ('P=512 pitch=4096 256MiB', {'piece': 512, 'pitch': 4096, 'rows': 65536}),
        ('P=512 pitch=512 256MiB', {'piece': 512, 'pitch': 512, 'rows': 524288}),
        ('P=1024 pitch=32768 256MiB', {'piece': 1024, 'pitch': 32768, 'rows': 8192}),
        ('P=1024 pitch=4096 256MiB', {'piece': 1024, 'pitch': 4096, 'rows': 65536}),
        ('P=1024 pitch=1024 256MiB', {'piece': 1024, 'pitch': 1024, 'rows': 262144})])
@family(name='fitd_atom', kernel=dram_kernel,
        small=lambda c: dict(n=3001, buckets=min(c["buckets"], 1009)), sizes=[
        ('add_u32 n=262144 buckets=1', {'op': 'add_u32', 'n': 262144, 'buckets': 1}),
        ('add_u32 n=262144 buckets=32', {'op': 'add_u32', 'n': 262144, 'buckets': 32}),
        ('add_u32 n=262144 buckets=1000', {'op': 'add_u32', 'n': 262144, 'buckets': 1000}),
        ('add_u32 n=262144 buckets=100003', {'op': 'add_u32', 'n': 262144, 'buckets': 100003}),
        ('add_u32 n=262144 buckets=1000003', {'op': 'add_u32', 'n': 262144, 'buckets': 1000003}),
        ('max_u32 n=262144 buckets=1', {'op': 'max_u32', 'n': 262144, 'buckets': 1}),
        ('max_u32 n=262144 buckets=32', {'op': 'max_u32', 'n': 262144, 'buckets': 32}),
        ('max_u32 n=262144 buckets=1000', {'op': 'max_u32', 'n': 262144, 'buckets': 1000}),
        ('max_u32 n=262144 buckets=100003', {'op': 'max_u32', 'n': 262144, 'buckets': 100003}),
        ('max_u32 n=262144 buckets=1000003', {'op': 'max_u32', 'n': 262144, 'buckets': 1000003}),
        ('red_f32 n=262144 buckets=1', {'op': 'red_f32', 'n': 262144, 'buckets': 1}),
        ('red_f32 n=262144 buckets=32', {'op': 'red_f32', 'n': 262144, 'buckets': 32}),
        ('red_f32 n=262144 buckets=1000', {'op': 'red_f32', 'n': 262144, 'buckets': 1000}),
        ('red_f32 n=262144 buckets=100003', {'op': 'red_f32', 'n': 262144, 'buckets': 100003}),
        ('red_f32 n=262144 buckets=1000003', {'op': 'red_f32', 'n': 262144, 'buckets': 1000003}),
        ('add_u32 n=4194304 buckets=1000', {'op': 'add_u32', 'n': 4194304, 'buckets': 1000}),
        ('add_u32 n=4194304 buckets=1000003', {'op': 'add_u32', 'n': 4194304, 'buckets': 1000003}),
        ('max_u32 n=4194304 buckets=1000', {'op': 'max_u32', 'n': 4194304, 'buckets': 1000}),
        ('max_u32 n=4194304 buckets=1000003', {'op': 'max_u32', 'n': 4194304, 'buckets': 1000003}),
        ('red_f32 n=4194304 buckets=1000', {'op': 'red_f32', 'n': 4194304, 'buckets': 1000}),
        ('red_f32 n=4194304 buckets=1000003', {'op': 'red_f32', 'n': 4194304, 'buckets': 1000003})])
def dram_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init})."""
    if c["family"] == "fitd_atom":
        op, n, k = c["op"], c["n"], c["buckets"]
        buf = g.zeros(k, integer=op != "red_f32")
        ref = atom_ref(op, n, k)

        def check():                          # every bucket, exactly
            return wrong(g.host(buf), ref)
        return [buf, np.uint32(n), np.uint32(k)], ((n + 255) // 256,), (256,), check, {}
    piece, pitch, rows = c["piece"], c["pitch"], c["rows"]
    src = g.randint(-2 ** 31, 2 ** 31 - 1, rows * pitch // 4)
    dst = g.zeros(rows * pitch // 4, integer=True)
    groups = rows // ROWS_PER_CTA

    def check():                              # the whole copy, exactly
        return wrong(g.host(dst), g.host(src))
    return ([src, dst, np.uint32(pitch), np.uint32(groups)], (groups * (pitch // piece),),
            (THREADS,), check, {})


K = 8                           # fit14a_store: words each thread stores (lanes 32 bytes apart)


# fit14a_store variants: what comes before the thin stores
#   none: nothing (store_lanes k=8 in this run);  coal: 8 coalesced loads x[j n + i];
#   coal_gen: the same, stores by generic st;  coal_early: the first store right after the
#   first load, before the other seven;  thin: sort8's loads x[8 i + j] (thin, like the
#   stores);  thin_gen: the same by generic ld / st (Numba's sort8_network);  gap: no loads,
#   the first store, then a chain of CHAIN dependent integer ops, then the other seven;
#   busy: no loads, a chain of CHAIN dependent ops before the eight stores (of its result).
STORE_VARIANTS = ("none", "coal", "coal_gen", "coal_early", "thin", "thin_gen", "gap", "busy")
CHAIN = 64                      # fit14a_store gap / busy: dependent mad.lo.u32 in the chain
SECTOR_LANES = (1, 2, 4, 8)            # fit14a_sector: lanes per line and load, one sector of it


# fit14a_pitch: life_u8's loads (16 lines per warp load, 2 adjacent bytes on each) with the
# 16 lines PITCH bytes apart (life_u8: its row length, 4099), from a 64 KiB table (stays in
# L1); REPEAT consecutive loads on the same lines (life_u8's three columns of a row: 3)
PITCHES = (128, 512, 2048, 4096, 4099)
REPEATS = (1, 3)
PITCH_LOADS = 18                # loads a thread makes in fit14a_pitch
PITCH_TABLE = 1 << 16


def _chain(b, x, count):
    """x after `count` dependent mad.lo.u32 (x * 3 + 1): issue-cheap time between stores."""
    for _ in range(count):
        x = b.mad(x, Imm(3, T.u32), Imm(1, T.u32), type=T.u32, name="c")
    return x


def _store(b, generic, addr, v, type=T.u32):
    """A global store by st.global, or (generic) by generic st (Numba's form)."""
    if generic:
        b.emit(Instr("st", (type.name,), (addr, v)))
    else:
        b.st("global", addr, v, type=type)


def _load(b, generic, addr, name, type=T.u32):
    if not generic:
        return b.ld("global", type, addr, name=name)
    r = b.reg(type, name)
    b.emit(Instr("ld", (type.name,), (r, addr)))
    return r


def store_kernel(variant):
    """out[8 i + j] for j < 8, each by its own 4-byte store (a warp's store: 32 sectors of 8
    lines, 4 bytes of each), after the variant's loads (module docstring)."""
    name = f"fit14a_store_{variant}"
    gen_st = variant in ("coal_gen", "thin_gen")
    m = Module(target="sm_90")
    params = [Param("n", T.u32), Param("out", T.u64, ptr(T.u32))]
    if variant not in ("none", "gap", "busy"):
        params.insert(1, Param("x", T.u64, ptr(T.u32)))
    kern = m.add_kernel(name, params)
    b = Builder(kern)
    n, out = b.param("n"), b.param("out")
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        base = b.element_addr(out, i, 4 * K, name="oa")
        if variant == "none":
            for j in range(K):
                _store(b, False, Addr(base, 4 * j), i)
        elif variant in ("gap", "busy"):
            v = i
            for j in range(K):
                if j == (1 if variant == "gap" else 0):
                    v = _chain(b, v, CHAIN)
                _store(b, False, Addr(base, 4 * j), v)
        elif variant.startswith("thin"):
            xb = b.element_addr(b.param("x"), i, 4 * K, name="xa")
            vals = [_load(b, variant == "thin_gen", Addr(xb, 4 * j), "v") for j in range(K)]
            for j in range(K):
                _store(b, gen_st, Addr(base, 4 * j), vals[j])
        else:
            x, vals = b.param("x"), []
            for j in range(K):
                idx = i if j == 0 else b.mad(n, Imm(j, T.u32), i, type=T.u32, name="xi")
                vals.append(b.ld("global", T.u32, b.element_addr(x, idx, 4, name="xa"),
                                 name="v"))
                if j == 0 and variant == "coal_early":
                    _store(b, False, Addr(base, 0), vals[0])
            for j in range(1 if variant == "coal_early" else 0, K):
                _store(b, gen_st, Addr(base, 4 * j), vals[j])
    b.ret()
    return plain_pointers(emit_module(m)), name


def sector_kernel(esize, lanes):
    """Thread i sums LOADS elements of `table` (u8 or u32, as u32): load r reads element
    ((((i >> log2 L) + r STEP) & mask) * 128 + (i & (L-1)) * esize) / esize, so each warp's
    load touches 32 / L lines with its L lanes side by side in the line's first sector; the
    sum goes to out[i] (coalesced). The table's size decides where the lines live."""
    lg, name = lanes.bit_length() - 1, f"fit14a_sector_u{8 * esize}_{lanes}"
    et = T.u8 if esize == 1 else T.u32
    m = Module(target="sm_90")
    kern = m.add_kernel(name, [Param("n", T.u32), Param("table", T.u64, ptr(et)),
                               Param("out", T.u64, ptr(T.u32)), Param("mask", T.u32)])
    b = Builder(kern)
    n, table, out, mask = (b.param(p) for p in ("n", "table", "out", "mask"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        line = b.shr(i, Imm(lg, T.u32), type=T.u32, name="line")
        lane = b.and_(i, Imm(lanes - 1, T.u32), type=T.b32, name="ln")
        s = b.mov(Imm(0, T.u32), type=T.u32, name="s")
        for r in range(LOADS):
            cur = b.and_(line, mask, type=T.b32)
            elem = b.or_(b.shl(cur, Imm(7 - (esize // 4) * 2, T.u32), type=T.b32), lane,
                         type=T.b32)
            addr = b.element_addr(table, elem, esize, name="ta")
            if esize == 1:
                v = b.cvt(T.u32, b.ld("global", T.u8, addr, name="vb"), name="v")
            else:
                v = b.ld("global", T.u32, addr, name="v")
            s = b.add(s, v, type=T.u32)
            if r + 1 < LOADS:
                line = b.add(line, Imm(STEP, T.u32), type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), s, type=T.u32)
    b.ret()
    return plain_pointers(emit_module(m)), name


def thin_access_kernel(c):
    """(PTX text, entry) of a case's kernel (the case gives the variant, or esize and lanes, or
    pitch and repeat)."""
    fam = c["family"]
    if fam == "fit14a_store":
        return store_kernel(c["variant"])
    if fam == "fit14a_sector":
        return sector_kernel(c["esize"], c["lanes"])
    if fam == "fit14a_pitch":
        return pitch_kernel(c["pitch"], c["repeat"])
    raise KeyError(fam)


def pitch_kernel(pitch, repeat):
    """Thread i (g = (i >> 1) & 15, c = i & 1, warp w = i >> 5) sums PITCH_LOADS bytes of
    `table`: load r reads byte (base + g pitch + c + r % repeat) & (PITCH_TABLE - 1), base =
    ((w + (r / repeat) STEP) & 511) * 128, so each warp load touches 16 lines pitch bytes
    apart with two adjacent bytes on each (life_u8's rows), and `repeat` loads in a row reuse
    the same lines."""
    name = f"fit14a_pitch_{pitch}_{repeat}"
    m = Module(target="sm_90")
    kern = m.add_kernel(name, [Param("n", T.u32), Param("table", T.u64, ptr(T.u8)),
                               Param("out", T.u64, ptr(T.u32))])
    b = Builder(kern)
    n, table, out = (b.param(p) for p in ("n", "table", "out"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        g = b.and_(b.shr(i, Imm(1, T.u32), type=T.u32), Imm(15, T.u32), type=T.b32, name="g")
        lane = b.add(b.mul(g, Imm(pitch, T.u32), type=T.u32),
                     b.and_(i, Imm(1, T.u32), type=T.b32), type=T.u32, name="lo")
        w = b.shr(i, Imm(5, T.u32), type=T.u32, name="w")
        s = b.mov(Imm(0, T.u32), type=T.u32, name="s")
        for r in range(PITCH_LOADS):
            if r % repeat == 0:
                base = b.shl(b.and_(w, Imm(511, T.u32), type=T.b32), Imm(7, T.u32),
                             type=T.b32, name="base")
                row = b.add(base, lane, type=T.u32, name="row")
                if r + repeat < PITCH_LOADS:
                    w = b.add(w, Imm(STEP, T.u32), type=T.u32)
            at = b.add(row, Imm(r % repeat, T.u32), type=T.u32) if r % repeat else row
            at = b.and_(at, Imm(PITCH_TABLE - 1, T.u32), type=T.b32)
            v = b.cvt(T.u32, b.ld("global", T.u8, b.element_addr(table, at, 1, name="ta"),
                                  name="vb"), name="v")
            s = b.add(s, v, type=T.u32)
        b.st("global", b.element_addr(out, i, 4, name="oa"), s, type=T.u32)
    b.ret()
    return plain_pointers(emit_module(m)), name


def pitch_ref(table_bytes, n, pitch, repeat):
    """fit14a_pitch's sums for threads 0..n-1 (exact)."""
    i = np.arange(n, dtype=np.int64)
    t = np.asarray(table_bytes, np.uint8).astype(np.int64)
    g, c, w = (i >> 1) & 15, i & 1, i >> 5
    s = np.zeros(n, np.int64)
    for r in range(PITCH_LOADS):
        base = ((w + (r // repeat) * STEP) & 511) * 128
        s += t[(base + g * pitch + c + r % repeat) & (PITCH_TABLE - 1)]
    return s


def store_ref(x, n, variant, m):
    """fit14a_store's out[:8 m] as (m, 8) int64 words for threads 0..m-1 (x: int32 words)."""
    i = np.arange(m, dtype=np.int64)
    if variant == "none":
        return np.repeat(i[:, None], K, axis=1)
    if variant in ("gap", "busy"):
        out, v = [], i.copy()
        for j in range(K):
            if j == (1 if variant == "gap" else 0):
                for _ in range(CHAIN):
                    v = (v * 3 + 1) % (1 << 32)
            out.append(v.copy())
        return np.stack(out, axis=1)
    x = np.asarray(x, np.int64)
    if variant.startswith("thin"):
        return x[:8 * m].reshape(m, K)
    return np.stack([x[j * n + i] for j in range(K)], axis=1)


def sector_ref(table_bytes, n, esize, lanes, mask):
    """fit14a_sector's sums for threads 0..n-1 (exact, modulo 2^32)."""
    i = np.arange(n, dtype=np.int64)
    lg = lanes.bit_length() - 1
    elems = np.asarray(table_bytes, np.uint8)
    if esize == 4:
        elems = elems.view(np.uint32)
    s = np.zeros(n, np.int64)
    for r in range(LOADS):
        e = ((((i >> lg) + r * STEP) & mask) * 128 + (i & (lanes - 1)) * esize) // esize
        s += elems[e].astype(np.int64)
    return s % (1 << 32)


@family(name='fit14a_pitch', kernel=thin_access_kernel, small={'n': 1001}, sizes=[
        ('P=128 R=1 n=262144', {'pitch': 128, 'repeat': 1, 'n': 262144}),
        ('P=128 R=1 n=1048576', {'pitch': 128, 'repeat': 1, 'n': 1048576}),
        ('P=128 R=3 n=262144', {'pitch': 128, 'repeat': 3, 'n': 262144}),
        ('P=128 R=3 n=1048576', {'pitch': 128, 'repeat': 3, 'n': 1048576}),
        ('P=512 R=1 n=262144', {'pitch': 512, 'repeat': 1, 'n': 262144}),
        ('P=512 R=1 n=1048576', {'pitch': 512, 'repeat': 1, 'n': 1048576}),
        ('P=512 R=3 n=262144', {'pitch': 512, 'repeat': 3, 'n': 262144}),
        ('P=512 R=3 n=1048576', {'pitch': 512, 'repeat': 3, 'n': 1048576}),
        ('P=2048 R=1 n=262144', {'pitch': 2048, 'repeat': 1, 'n': 262144}),
        ('P=2048 R=1 n=1048576', {'pitch': 2048, 'repeat': 1, 'n': 1048576}),
        ('P=2048 R=3 n=262144', {'pitch': 2048, 'repeat': 3, 'n': 262144}),
        ('P=2048 R=3 n=1048576', {'pitch': 2048, 'repeat': 3, 'n': 1048576}),
        ('P=4096 R=1 n=262144', {'pitch': 4096, 'repeat': 1, 'n': 262144}),
        ('P=4096 R=1 n=1048576', {'pitch': 4096, 'repeat': 1, 'n': 1048576}),
        ('P=4096 R=3 n=262144', {'pitch': 4096, 'repeat': 3, 'n': 262144}),
        ('P=4096 R=3 n=1048576', {'pitch': 4096, 'repeat': 3, 'n': 1048576}),
        ('P=4099 R=1 n=262144', {'pitch': 4099, 'repeat': 1, 'n': 262144}),
        ('P=4099 R=1 n=1048576', {'pitch': 4099, 'repeat': 1, 'n': 1048576}),
        ('P=4099 R=3 n=262144', {'pitch': 4099, 'repeat': 3, 'n': 262144}),
        ('P=4099 R=3 n=1048576', {'pitch': 4099, 'repeat': 3, 'n': 1048576})])
@family(name='fit14a_sector', kernel=thin_access_kernel, small={'n': 1001}, sizes=[
        ('u8 l1 L=1 n=131072', {'esize': 1, 'lanes': 1, 'n': 131072, 'lines': 256}),
        ('u8 l1 L=1 n=524288', {'esize': 1, 'lanes': 1, 'n': 524288, 'lines': 256}),
        ('u8 l1 L=2 n=262144', {'esize': 1, 'lanes': 2, 'n': 262144, 'lines': 256}),
        ('u8 l1 L=2 n=1048576', {'esize': 1, 'lanes': 2, 'n': 1048576, 'lines': 256}),
        ('u8 l1 L=4 n=524288', {'esize': 1, 'lanes': 4, 'n': 524288, 'lines': 256}),
        ('u8 l1 L=4 n=2097152', {'esize': 1, 'lanes': 4, 'n': 2097152, 'lines': 256}),
        ('u8 l1 L=8 n=1048576', {'esize': 1, 'lanes': 8, 'n': 1048576, 'lines': 256}),
        ('u8 l1 L=8 n=4194304', {'esize': 1, 'lanes': 8, 'n': 4194304, 'lines': 256}),
        ('u32 l1 L=1 n=131072', {'esize': 4, 'lanes': 1, 'n': 131072, 'lines': 256}),
        ('u32 l1 L=1 n=524288', {'esize': 4, 'lanes': 1, 'n': 524288, 'lines': 256}),
        ('u32 l1 L=2 n=262144', {'esize': 4, 'lanes': 2, 'n': 262144, 'lines': 256}),
        ('u32 l1 L=2 n=1048576', {'esize': 4, 'lanes': 2, 'n': 1048576, 'lines': 256}),
        ('u32 l1 L=4 n=524288', {'esize': 4, 'lanes': 4, 'n': 524288, 'lines': 256}),
        ('u32 l1 L=4 n=2097152', {'esize': 4, 'lanes': 4, 'n': 2097152, 'lines': 256}),
        ('u32 l1 L=8 n=1048576', {'esize': 4, 'lanes': 8, 'n': 1048576, 'lines': 256}),
        ('u32 l1 L=8 n=4194304', {'esize': 4, 'lanes': 8, 'n': 4194304, 'lines': 256}),
        ('u8 l2 L=1 n=131072', {'esize': 1, 'lanes': 1, 'n': 131072, 'lines': 65536}),
        ('u8 l2 L=1 n=524288', {'esize': 1, 'lanes': 1, 'n': 524288, 'lines': 65536}),
        ('u8 l2 L=2 n=262144', {'esize': 1, 'lanes': 2, 'n': 262144, 'lines': 65536}),
        ('u8 l2 L=2 n=1048576', {'esize': 1, 'lanes': 2, 'n': 1048576, 'lines': 65536}),
        ('u8 l2 L=4 n=524288', {'esize': 1, 'lanes': 4, 'n': 524288, 'lines': 65536}),
        ('u8 l2 L=4 n=2097152', {'esize': 1, 'lanes': 4, 'n': 2097152, 'lines': 65536}),
        ('u8 l2 L=8 n=1048576', {'esize': 1, 'lanes': 8, 'n': 1048576, 'lines': 65536}),
        ('u8 l2 L=8 n=4194304', {'esize': 1, 'lanes': 8, 'n': 4194304, 'lines': 65536})])
@family(name='fit14a_store', kernel=thin_access_kernel, small={'n': 999}, sizes=[
        ('none 32MiB', {'variant': 'none', 'n': 1048576}),
        ('none 256MiB', {'variant': 'none', 'n': 8388608}),
        ('coal 32MiB', {'variant': 'coal', 'n': 1048576}),
        ('coal 256MiB', {'variant': 'coal', 'n': 8388608}),
        ('coal_gen 32MiB', {'variant': 'coal_gen', 'n': 1048576}),
        ('coal_gen 256MiB', {'variant': 'coal_gen', 'n': 8388608}),
        ('coal_early 32MiB', {'variant': 'coal_early', 'n': 1048576}),
        ('coal_early 256MiB', {'variant': 'coal_early', 'n': 8388608}),
        ('thin 32MiB', {'variant': 'thin', 'n': 1048576}),
        ('thin 256MiB', {'variant': 'thin', 'n': 8388608}),
        ('thin_gen 32MiB', {'variant': 'thin_gen', 'n': 1048576}),
        ('thin_gen 256MiB', {'variant': 'thin_gen', 'n': 8388608}),
        ('gap 32MiB', {'variant': 'gap', 'n': 1048576}),
        ('gap 256MiB', {'variant': 'gap', 'n': 8388608}),
        ('busy 32MiB', {'variant': 'busy', 'n': 1048576}),
        ('busy 256MiB', {'variant': 'busy', 'n': 8388608})])
def thin_access_case(g, c):
    """(args in parameter order, grid, block, check, inits) of a case; the check counts wrong
    words (both families are exact)."""
    fam, n = c["family"], c["n"]
    grid, block = ((n + 255) // 256,), (256,)
    if fam == "fit14a_store":
        v = c["variant"]
        out = g.zeros(n * K, integer=True)
        x = None if v in ("none", "gap", "busy") else g.randint(-2 ** 31, 2 ** 31 - 1, n * K)
        args = [np.uint32(n), out] if x is None else [np.uint32(n), x, out]

        def check():
            m = min(n, 1 << 16)
            want = store_ref(None if x is None else g.host(x), n, v, m)
            got = np.asarray(g.host(out[:m * K]), np.int64).reshape(m, K)
            return float((got % (1 << 32) != want % (1 << 32)).sum())
        return args, grid, block, check, {}
    if fam == "fit14a_pitch":
        table, out = g.randint(-2 ** 31, 2 ** 31 - 1, PITCH_TABLE // 4), g.zeros(n, integer=True)
        args = [np.uint32(n), table, out]

        def check():
            m = min(n, 1 << 16)
            tb = np.ascontiguousarray(g.host(table)).view(np.uint8)
            ref = pitch_ref(tb, m, c["pitch"], c["repeat"])
            return float((np.asarray(g.host(out[:m]), np.int64) != ref).sum())
        return args, grid, block, check, {}
    if fam == "fit14a_sector":
        words = c["lines"] * 32                     # 128-byte lines as int32 words
        table, out = g.randint(-2 ** 31, 2 ** 31 - 1, words), g.zeros(n, integer=True)
        args = [np.uint32(n), table, out, np.uint32(c["lines"] - 1)]

        def check():
            m = min(n, 1 << 16)
            tb = np.ascontiguousarray(g.host(table)).view(np.uint8)
            ref = sector_ref(tb, m, c["esize"], c["lanes"], c["lines"] - 1)
            got = np.asarray(g.host(out[:m]), np.int64) % (1 << 32)
            return float((got != ref).sum())
        return args, grid, block, check, {}
    raise KeyError(fam)


# the forms: atom (reply kept), red (no reply), gen (generic atom, result unused: Numba's)
FORMS = ("atom_u32", "red_u32", "gen_u32", "atom_f32", "red_f32", "gen_f32")
TABLES_MIB = (4, 16)


def form_kernel(op):
    """buf[hash(i) & mask] += 1 by the form `op` (module docstring)."""
    form, tn = op.split("_")
    t = T.f32 if tn == "f32" else T.u32
    one = Imm(1.0, t) if tn == "f32" else Imm(1, t)
    entry = f"fit15b_atom_{op}"
    m = Module(target="sm_90")
    k = m.add_kernel(entry, [Param("buf", T.u64, ptr(t)), Param("n", T.u32),
                             Param("mask", T.u32)])
    b = Builder(k)
    buf, n, mask = (b.param(p) for p in ("buf", "n", "mask"))
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        a = b.element_addr(buf, b.and_(_hash(b, i), mask, type=T.b32), 4, name="ba")
        if form == "red":
            b.red("global", "add", a, one, type=t)
        elif form == "gen":
            b.emit(Instr("atom", ("add", tn), (b.reg(t, "unused"), Addr(a), one)))
        else:
            old = b.atom("global", "add", a, one, type=t, name="old")
            never = Imm(-1.0, t) if tn == "f32" else Imm(0xFFFFFFFF, t)
            with b.if_(b.setp("eq", old, never)):
                b.st("global", a, old, type=t)
    b.ret()
    return plain_pointers(emit_module(m)), entry


def atomic_form_kernel(c):
    """(PTX text, entry) of a case's kernel."""
    return form_kernel(c["op"])


def form_ref(op, n, words):
    """fit15b_atom's table after one launch on a zeroed buffer (numpy, exact)."""
    i = np.arange(n, dtype=np.uint32)
    h = i * np.uint32(H1)
    h ^= h >> np.uint32(15)
    counts = np.bincount((h & np.uint32(words - 1)).astype(np.int64), minlength=words)
    return counts.astype(np.float32 if op.endswith("f32") else np.int32)


@family(name='fit15b_atom', kernel=atomic_form_kernel, small={'n': 3001, 'words': 1024}, sizes=[
        ('atom_u32 n=4194304 table=4MiB', {'op': 'atom_u32', 'n': 4194304, 'words': 1048576}),
        ('atom_u32 n=16777216 table=4MiB', {'op': 'atom_u32', 'n': 16777216, 'words': 1048576}),
        ('atom_u32 n=4194304 table=16MiB', {'op': 'atom_u32', 'n': 4194304, 'words': 4194304}),
        ('atom_u32 n=16777216 table=16MiB', {'op': 'atom_u32', 'n': 16777216, 'words': 4194304}),
        ('red_u32 n=4194304 table=4MiB', {'op': 'red_u32', 'n': 4194304, 'words': 1048576}),
        ('red_u32 n=16777216 table=4MiB', {'op': 'red_u32', 'n': 16777216, 'words': 1048576}),
        ('red_u32 n=4194304 table=16MiB', {'op': 'red_u32', 'n': 4194304, 'words': 4194304}),
        ('red_u32 n=16777216 table=16MiB', {'op': 'red_u32', 'n': 16777216, 'words': 4194304}),
        ('gen_u32 n=4194304 table=4MiB', {'op': 'gen_u32', 'n': 4194304, 'words': 1048576}),
        ('gen_u32 n=16777216 table=4MiB', {'op': 'gen_u32', 'n': 16777216, 'words': 1048576}),
        ('gen_u32 n=4194304 table=16MiB', {'op': 'gen_u32', 'n': 4194304, 'words': 4194304}),
        ('gen_u32 n=16777216 table=16MiB', {'op': 'gen_u32', 'n': 16777216, 'words': 4194304}),
        ('atom_f32 n=4194304 table=4MiB', {'op': 'atom_f32', 'n': 4194304, 'words': 1048576}),
        ('atom_f32 n=16777216 table=4MiB', {'op': 'atom_f32', 'n': 16777216, 'words': 1048576}),
        ('atom_f32 n=4194304 table=16MiB', {'op': 'atom_f32', 'n': 4194304, 'words': 4194304}),
        ('atom_f32 n=16777216 table=16MiB', {'op': 'atom_f32', 'n': 16777216, 'words': 4194304}),
        ('red_f32 n=4194304 table=4MiB', {'op': 'red_f32', 'n': 4194304, 'words': 1048576}),
        ('red_f32 n=16777216 table=4MiB', {'op': 'red_f32', 'n': 16777216, 'words': 1048576}),
        ('red_f32 n=4194304 table=16MiB', {'op': 'red_f32', 'n': 4194304, 'words': 4194304}),
        ('red_f32 n=16777216 table=16MiB', {'op': 'red_f32', 'n': 16777216, 'words': 4194304}),
        ('gen_f32 n=4194304 table=4MiB', {'op': 'gen_f32', 'n': 4194304, 'words': 1048576}),
        ('gen_f32 n=16777216 table=4MiB', {'op': 'gen_f32', 'n': 16777216, 'words': 1048576}),
        ('gen_f32 n=4194304 table=16MiB', {'op': 'gen_f32', 'n': 4194304, 'words': 4194304}),
        ('gen_f32 n=16777216 table=16MiB', {'op': 'gen_f32', 'n': 16777216, 'words': 4194304})])
def atomic_form_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init})."""
    op, n, words = c["op"], c["n"], c["words"]
    buf = g.zeros(words, integer=op.endswith("u32"))
    ref = form_ref(op, n, words)

    def check():                              # every word, exactly
        return wrong(g.host(buf), ref)
    return [buf, np.uint32(n), np.uint32(words - 1)], ((n + 255) // 256,), (256,), check, {}


SORT_K = 8                           # words a thread loads, sorts and stores
VARIANTS = ("net", "net_gen", "net_spread", "net_late", "net_nold", "thin_early")
SIZES_MIB = (32, 256, 1024)     # bytes written (as many read where the variant loads)
HASH = 2654435761               # net_nold: v_j = f32(u32((8 i + j) HASH))


# Batcher's odd-even merge network on 8 values, sort8_network's order (19 compare-exchanges:
# (a, b) -> (min, max)); the first four follow the loads of their pair
NETWORK = ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (1, 3), (4, 6), (5, 7), (1, 2), (5, 6),
           (0, 4), (1, 5), (2, 6), (3, 7), (2, 4), (3, 5), (1, 2), (3, 4), (5, 6))


def _x_addr(b, variant, xb, i, j):
    """x[8 i + j]: off the thread's base, or (net_spread) from its own 32-bit index."""
    if variant != "net_spread":
        return Addr(xb, 4 * j)
    e = b.mad(i, Imm(SORT_K, T.u32), Imm(j, T.u32), type=T.u32, name="e")
    return Addr(b.element_addr(b.param("x"), e, 4, name="xa"), 0)


def _cx(b, v, a, c):
    lo = b.min(v[a], v[c], type=T.f32, name="lo")
    v[c] = b.max(v[a], v[c], type=T.f32, name="hi")
    v[a] = lo


def sort_kernel(variant):
    """out[8 i + j] = the 8 values of thread i sorted (module docstring for the variants)."""
    name = f"fit15c_sort_{variant}"
    gen = variant == "net_gen"
    m = Module(target="sm_90")
    params = [Param("n", T.u32), Param("x", T.u64, ptr(T.f32)), Param("out", T.u64, ptr(T.f32)),
              Param("zero", T.u32)]
    if variant == "net_nold":
        params.pop(1)
    kern = m.add_kernel(name, params)
    b = Builder(kern)
    n, out = b.param("n"), b.param("out")
    i = b.global_index()
    with b.if_(b.setp("lt", i, n)):
        base = b.element_addr(out, i, 4 * SORT_K, name="oa")
        v = [None] * SORT_K
        if variant == "net_nold":
            first = b.mul(i, Imm(SORT_K, T.u32), type=T.u32, name="e")
            for j in range(SORT_K):
                e = b.add(first, Imm(j, T.u32), type=T.u32, name="e") if j else first
                h = b.mul(e, Imm(HASH, T.u32), type=T.u32, name="h")
                v[j] = b.cvt(T.f32, h, rounding="rn", name="v")
        else:
            xb = b.element_addr(b.param("x"), i, 4 * SORT_K, name="xa")
        if variant == "thin_early":
            for j in range(SORT_K):
                v[j] = _load(b, False, Addr(xb, 4 * j), "v", T.f32)
                if j == 0:
                    _store(b, False, Addr(base, 0), v[0], T.f32)
            for j in range(1, SORT_K):
                _store(b, False, Addr(base, 4 * j), v[j], T.f32)
        else:
            for p, pair in enumerate(NETWORK):
                if p < 4 and variant != "net_nold":     # sort8's order: x[j + 1], x[j], cx
                    for j in (pair[1], pair[0]):
                        v[j] = _load(b, gen, _x_addr(b, variant, xb, i, j), "v", T.f32)
                _cx(b, v, *pair)
            if variant == "net_late":
                bits = b.mov(v[NETWORK[-1][1]], type=T.b32, name="bits")
                off = b.and_(bits, b.param("zero"), type=T.b32, name="off")
                base = b.element_addr(base, off, 1, name="oa")
            for j in range(SORT_K):
                _store(b, gen, Addr(base, 4 * j), v[j], T.f32)
    b.ret()
    return plain_pointers(emit_module(m)), name


def sort_net_kernel(c):
    """(PTX text, entry) of a case's kernel (the case gives the variant)."""
    fam = c["family"]
    if fam == "fit15c_sort":
        return sort_kernel(c["variant"])
    raise KeyError(fam)


def sort_ref(x, variant, m):
    """out[:8 m] as (m, 8) float32 for threads 0..m-1 (x: the input floats, or None)."""
    if variant == "net_nold":
        e = np.arange(8 * m, dtype=np.uint64)
        vals = ((e * HASH) % (1 << 32)).astype(np.float32)
    else:
        vals = np.asarray(x[:8 * m], np.float32)
    vals = vals.reshape(m, SORT_K)
    return vals if variant == "thin_early" else np.sort(vals, axis=1)


@family(name='fit15c_sort', kernel=sort_net_kernel, small={'n': 999}, sizes=[
        ('net 32MiB', {'variant': 'net', 'n': 1048576}),
        ('net 256MiB', {'variant': 'net', 'n': 8388608}),
        ('net 1024MiB', {'variant': 'net', 'n': 33554432}),
        ('net_gen 32MiB', {'variant': 'net_gen', 'n': 1048576}),
        ('net_gen 256MiB', {'variant': 'net_gen', 'n': 8388608}),
        ('net_gen 1024MiB', {'variant': 'net_gen', 'n': 33554432}),
        ('net_spread 32MiB', {'variant': 'net_spread', 'n': 1048576}),
        ('net_spread 256MiB', {'variant': 'net_spread', 'n': 8388608}),
        ('net_spread 1024MiB', {'variant': 'net_spread', 'n': 33554432}),
        ('net_late 32MiB', {'variant': 'net_late', 'n': 1048576}),
        ('net_late 256MiB', {'variant': 'net_late', 'n': 8388608}),
        ('net_late 1024MiB', {'variant': 'net_late', 'n': 33554432}),
        ('net_nold 32MiB', {'variant': 'net_nold', 'n': 1048576}),
        ('net_nold 256MiB', {'variant': 'net_nold', 'n': 8388608}),
        ('net_nold 1024MiB', {'variant': 'net_nold', 'n': 33554432}),
        ('thin_early 32MiB', {'variant': 'thin_early', 'n': 1048576}),
        ('thin_early 256MiB', {'variant': 'thin_early', 'n': 8388608}),
        ('thin_early 1024MiB', {'variant': 'thin_early', 'n': 33554432})])
def sort_net_case(g, c):
    """(args in parameter order, grid, block, check, inits) of a case; the check counts wrong
    words (exact)."""
    fam, n, v = c["family"], c["n"], c["variant"]
    if fam != "fit15c_sort":
        raise KeyError(fam)
    grid, block = ((n + 255) // 256,), (256,)
    out = g.zeros(n * SORT_K)
    x = None if v == "net_nold" else g.randn(n * SORT_K)
    args = [np.uint32(n), out, np.uint32(0)]
    if x is not None:
        args.insert(1, x)

    def check():
        m = min(n, 1 << 16)
        want = sort_ref(None if x is None else g.host(x), v, m)
        got = np.asarray(g.host(out[:m * SORT_K]), np.float32).reshape(m, SORT_K)
        return float((got != want).sum())
    return args, grid, block, check, {}
