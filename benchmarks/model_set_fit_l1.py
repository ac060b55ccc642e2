"""Fitting cases of round sim10a (issue 14): thin stores after a load, thin stores in the generic
form, and loads whose warp touches many 128-byte lines, L1-resident and not.

Why: on the H200 the seen kernels' thin stores (sort8_network, triton_swish_f16, triton_gelu)
cost at most half of what `store_lanes` (stores alone) measures, and store_lanes k=1 itself is
under-predicted; the L1 cost of a load whose lanes spread over many lines (life_u8, bitmap_dot,
spmv_csr) was never measured. These kernels isolate each of those, built with ptxgen's Builder,
on the blind groups' interface (cases / small / ptx_kernel / ptx_case) but in the fitting part.
"""
import numpy as np

import model_set_held3 as H3
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ir.values import Addr

MB = 1 << 20
STORE_KS = (1, 2, 4, 8)         # words each thread stores after its load
GENERIC_KS = (1, 4, 8)          # words each thread stores by generic st
LANES = (2, 4, 8, 16, 32)       # lanes of a warp per 128-byte line and load
LOADS = 16                      # loads a thread makes in fit10a_lines_*
STEP = 4099                     # lines between one load's line and the next (odd: wraps apart)
L1_LINES, L2_LINES = 256, 65536     # tables of 32 KiB (stays in L1) and 8 MiB (L2, not L1)

STORE_FAMILIES = {"fit10a_store_ld", "fit10a_store_gen"}
LINE_FAMILIES = {"fit10a_lines_l1", "fit10a_lines_l2"}
PTX_FAMILIES = STORE_FAMILIES | LINE_FAMILIES
FAMILIES = PTX_FAMILIES
TOLERANCE = {"fit10a_lines_l1": 1e-5, "fit10a_lines_l2": 1e-5}   # float32 sums of 16 values


def cases():
    """(family, source, size label, parameters): two sizes each, ~10-300 us on the H200."""
    out = []
    for k in STORE_KS:
        for mib in (32, 256):
            out.append(("fit10a_store_ld", "ptx", f"k={k} {mib}MiB",
                        dict(k=k, n=mib * MB // (4 * k))))
    for k in GENERIC_KS:
        for mib in (32, 256):
            out.append(("fit10a_store_gen", "ptx", f"k={k} {mib}MiB",
                        dict(k=k, n=mib * MB // (4 * k))))
    for fam, lines in (("fit10a_lines_l1", L1_LINES), ("fit10a_lines_l2", L2_LINES)):
        for lanes in LANES:
            for s in (1 << 17, 1 << 19):        # the same count of line visits for every L
                out.append((fam, "ptx", f"L={lanes} n={lanes * s}",
                            dict(lanes=lanes, n=lanes * s, lines=lines)))
    return out


def small(c):
    """The same case at a size the emulator runs in seconds (not a multiple of the block)."""
    c = dict(c)
    c["n"] = 999 if c["family"] in STORE_FAMILIES else 1001
    return c


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
    return _plain_pointers(emit_module(m)), f"fit10a_store_ld{k}"


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
    return _plain_pointers(emit_module(m)), f"fit10a_store_gen{k}"


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
    return _plain_pointers(emit_module(m)), name


def ptx_kernel(fam, c=None):
    """(PTX text, entry) of a case's kernel (c gives k or L; without it, the smallest)."""
    c = c or next(dict(kw) for f, _s, _z, kw in cases() if f == fam)
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


def ptx_case(g, c):
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


def emulate_ptx(c):
    """A small case on ptxgen's emulator with the collect's launch; its check's result."""
    return H3._emulate_ptx_with(lambda fam: ptx_kernel(fam, c), ptx_case, c)
