"""Fitting cases of round sim15b (issue 14): one global atomic add per thread on a hashed word of
a table L2 keeps, by each form a kernel writes it in.

Why: held11's cic_deposit (Numba: four float atomic adds per particle into the grid cells
around it, at random places) ran 3x slower than the model said. Its PTX is generic
`atom.add.f32` whose result is unused; ptxas 13.0 makes it `ATOM.E.ADD.F32...` with RZ as
destination (an atomic with a reply), not `RED`. The fitting part has scattered atomics only as
fitd_atom on 1000003 buckets, where atom.add.u32 (a returning ATOM) took 55.6 us for 2^22 and
red.add.f32 42.1 us: is a reduction cheaper because it has no reply, or because it is a float
add? fit15b_atom separates the two: thread i adds to word hash(i) & (words - 1) by atom.global
(its old value kept: a store guarded by a test that never holds, so ptxas must keep the
reply), red.global, or generic atom with the result unused (Numba's form), in u32 and f32, on
tables of 4 and 16 MiB (L2 keeps both across the timed launches). Built with ptxgen's Builder
on the blind groups' interface (cases / small / ptx_kernel / ptx_case), in the fitting part,
checked on the emulator by the CPU tests.
"""
import numpy as np

from model_set_fit_dram import H1, _hash
from model_set_held3 import _emulate_ptx_with
from model_set_held4 import _wrong
from model_set_held5_ptx import _plain_pointers
from ptxgen import emit_module
from ptxgen.ir import Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ir.values import Addr

MB = 1 << 20
# the forms: atom (reply kept), red (no reply), gen (generic atom, result unused: Numba's)
OPS = ("atom_u32", "red_u32", "gen_u32", "atom_f32", "red_f32", "gen_f32")
TABLES_MIB = (4, 16)
FAMILIES = PTX_FAMILIES = {"fit15b_atom"}
NUMBA_FAMILIES = TRITON_FAMILIES = frozenset()
TOLERANCE = {}                  # every check is exact (counts of at most 2^24 in f32 too)


def cases():
    """(family, source, size label, parameters): ~10-250 us each on the H200."""
    return [("fit15b_atom", "ptx", f"{op} n={n} table={mib}MiB",
             dict(op=op, n=n, words=mib * MB // 4))
            for op in OPS for mib in TABLES_MIB for n in (1 << 22, 1 << 24)]


def small(c):
    """The same case at a size the emulator runs in seconds (not a multiple of the block)."""
    c = dict(c)
    c.update(n=3001, words=1024)
    return c


def atom_kernel(op):
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
    return _plain_pointers(emit_module(m)), entry


def ptx_kernel(fam, c=None):
    """(PTX text, entry) of a case's kernel (model_set.py passes the case)."""
    c = c or dict(cases()[0][3])
    return atom_kernel(c["op"])


def atom_ref(op, n, words):
    """fit15b_atom's table after one launch on a zeroed buffer (numpy, exact)."""
    i = np.arange(n, dtype=np.uint32)
    h = i * np.uint32(H1)
    h ^= h >> np.uint32(15)
    counts = np.bincount((h & np.uint32(words - 1)).astype(np.int64), minlength=words)
    return counts.astype(np.float32 if op.endswith("f32") else np.int32)


def ptx_case(g, c):
    """(args in the kernel's parameter order, grid, block, check, {argument index: init})."""
    op, n, words = c["op"], c["n"], c["words"]
    buf = g.zeros(words, integer=op.endswith("u32"))
    ref = atom_ref(op, n, words)

    def check():                              # every word, exactly
        return _wrong(g.host(buf), ref)
    return [buf, np.uint32(n), np.uint32(words - 1)], ((n + 255) // 256,), (256,), check, {}


def emulate_ptx(c):
    """Run a small case on ptxgen's emulator; its check's result (0: every word right)."""
    return _emulate_ptx_with(lambda fam: ptx_kernel(fam, c), ptx_case, c)
