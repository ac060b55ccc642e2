"""Fitting cases of round sim15c (issue 14): sort8_network's own shape, piece by piece.

Why: sort8_network (held6) loads 8 consecutive floats a thread (x[8 i + j]), sorts them with
Batcher's 19 compare-exchanges and stores them back thin (out[8 i + j], every store 4 bytes of
each of 32 sectors). Round sim14a's fit14a_store thin (the same loads and stores, nothing
between) writes 256 MiB in 461 us; sort8 writes at ~1.5x that rate, and the model, fitted on
fit14a, stays +53 / +64 % on it. Between the two: sort8's compute between loads and stores,
and ptxas's placement of its first store ~30 instructions before the other seven.
fit15c_sort measures them apart (f32 values, as sort8):
  net:       sort8's PTX in order (load pairs each followed by its compare-exchange, the
             network, the 8 stores by st.global); ptxas places the stores as it does for sort8;
  net_gen:   the same by generic ld / st (Numba's sort8_network);
  net_spread: net with each load's address from its own 32-bit index 8 i + j (ptxas cannot
             fold those into one base, as with sort8's Numba indexing: its loads spread out);
  net_late:  the same, every store's address offset by (bits of the network's last result AND
             a parameter that is 0), so ptxas can issue no store before the network ends;
  net_nold:  no loads: the 8 values from the thread's index (a multiplicative hash), the
             network, the stores (compute without loads before the stores);
  thin_early: sort8's loads and stores with nothing between, the first store right after
             the first load (before the other loads: ptxas cannot move it past loads of an
             array it cannot prove apart), the first store early without the network.
Built with ptxgen's Builder on the blind groups' interface (cases / small / ptx_kernel /
ptx_case), in the fitting part, checked on the emulator by the CPU tests.
"""
import numpy as np

import model_set_held3 as H3
from model_set_fit14a import _load, _store
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ir.values import Addr

MB = 1 << 20
K = 8                           # words a thread loads, sorts and stores
VARIANTS = ("net", "net_gen", "net_spread", "net_late", "net_nold", "thin_early")
SIZES_MIB = (32, 256, 1024)     # bytes written (as many read where the variant loads)
HASH = 2654435761               # net_nold: v_j = f32(u32((8 i + j) HASH))
# Batcher's odd-even merge network on 8 values, sort8_network's order (19 compare-exchanges:
# (a, b) -> (min, max)); the first four follow the loads of their pair
NETWORK = ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (1, 3), (4, 6), (5, 7), (1, 2), (5, 6),
           (0, 4), (1, 5), (2, 6), (3, 7), (2, 4), (3, 5), (1, 2), (3, 4), (5, 6))
FAMILIES = PTX_FAMILIES = {"fit15c_sort"}
NUMBA_FAMILIES = TRITON_FAMILIES = frozenset()
TOLERANCE = {}                  # every check is exact (min / max move words, never round)


def cases():
    """(family, source, size label, parameters): three sizes each, ~60-2500 us on the H200."""
    return [("fit15c_sort", "ptx", f"{v} {mib}MiB", dict(variant=v, n=mib * MB // (4 * K)))
            for v in VARIANTS for mib in SIZES_MIB]


def small(c):
    """The same case at a size the emulator runs in seconds (not a multiple of the block)."""
    return dict(c, n=999)


def _x_addr(b, variant, xb, i, j):
    """x[8 i + j]: off the thread's base, or (net_spread) from its own 32-bit index."""
    if variant != "net_spread":
        return Addr(xb, 4 * j)
    e = b.mad(i, Imm(K, T.u32), Imm(j, T.u32), type=T.u32, name="e")
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
        base = b.element_addr(out, i, 4 * K, name="oa")
        v = [None] * K
        if variant == "net_nold":
            first = b.mul(i, Imm(K, T.u32), type=T.u32, name="e")
            for j in range(K):
                e = b.add(first, Imm(j, T.u32), type=T.u32, name="e") if j else first
                h = b.mul(e, Imm(HASH, T.u32), type=T.u32, name="h")
                v[j] = b.cvt(T.f32, h, rounding="rn", name="v")
        else:
            xb = b.element_addr(b.param("x"), i, 4 * K, name="xa")
        if variant == "thin_early":
            for j in range(K):
                v[j] = _load(b, False, Addr(xb, 4 * j), "v", T.f32)
                if j == 0:
                    _store(b, False, Addr(base, 0), v[0], T.f32)
            for j in range(1, K):
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
            for j in range(K):
                _store(b, gen, Addr(base, 4 * j), v[j], T.f32)
    b.ret()
    return _plain_pointers(emit_module(m)), name


def ptx_kernel(fam, c=None):
    """(PTX text, entry) of a case's kernel (c gives the variant; without it, the first)."""
    c = c or next(dict(kw) for f, _s, _z, kw in cases() if f == fam)
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
    vals = vals.reshape(m, K)
    return vals if variant == "thin_early" else np.sort(vals, axis=1)


def ptx_case(g, c):
    """(args in parameter order, grid, block, check, inits) of a case; the check counts wrong
    words (exact)."""
    fam, n, v = c["family"], c["n"], c["variant"]
    if fam != "fit15c_sort":
        raise KeyError(fam)
    grid, block = ((n + 255) // 256,), (256,)
    out = g.zeros(n * K)
    x = None if v == "net_nold" else g.randn(n * K)
    args = [np.uint32(n), out, np.uint32(0)]
    if x is not None:
        args.insert(1, x)

    def check():
        m = min(n, 1 << 16)
        want = sort_ref(None if x is None else g.host(x), v, m)
        got = np.asarray(g.host(out[:m * K]), np.float32).reshape(m, K)
        return float((got != want).sum())
    return args, grid, block, check, {}


def emulate_ptx(c):
    """A small case on ptxgen's emulator with the collect's launch; its check's result."""
    return H3._emulate_ptx_with(lambda fam: ptx_kernel(fam, c), ptx_case, c)
