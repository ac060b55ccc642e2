"""How the emulator's instruction builders read their operands and write their results: the
compile-time context of one instruction (Ctx: operand fetchers and writers, symbols) and the
helpers alu, bits, floats and convert share. One home, below all of them, so none reaches into
another's private helpers (or into program.py, which compiles a kernel with them)."""
import numpy as np

from ..ir import types as T
from ..ir.values import Imm, Raw, Reg, Special, Sym
from .cluster import SPECIALS as CLUSTER_SPECIALS
from .values import FLOAT_OF_WIDTH, STORAGE, UNSIGNED, const, convert, literal_bits, storage


class Unsupported(Exception):
    """Raised by a semantics builder: the instruction cannot be emulated (message says why)."""


def sources(ctx, ins, n, dt=None, t=None, start=1):
    """Readers of n source operands from operand `start` on, as type t (default: the
    instruction's) stored as dt; a one-line failure when the count is wrong."""
    t = t or ins.type
    dt = dt or storage(t)
    ops = ins.operands[start:start + n]
    if len(ops) != n:
        ctx.fail(f"{ins.opcode} takes {n} source operand(s)")
    return [ctx.read(o, dt, t) for o in ops]


def make(w, srcs, compute):
    """fn(state, mask) writing compute(*sources)."""
    if len(srcs) == 1:
        a, = srcs
        return lambda st, m: w(st, m, compute(a(st)))
    if len(srcs) == 2:
        a, b = srcs
        return lambda st, m: w(st, m, compute(a(st), b(st)))
    if len(srcs) == 3:
        a, b, c = srcs
        return lambda st, m: w(st, m, compute(a(st), b(st), c(st)))
    return lambda st, m: w(st, m, compute(*[f(st) for f in srcs]))


def int_type(ctx, ins):
    """The type of an integer/bit instruction, refusing untyped ones and arithmetic on
    predicates."""
    t = ins.type
    if t is None:
        ctx.fail("instruction without a type")
    if t.kind == "pred" and ins.opcode not in ("and", "or", "xor", "not"):
        ctx.fail(f"{ins.opcode} on predicates")
    return t


class Ctx:
    """What a semantics builder needs while compiling one instruction."""

    def __init__(self, prog, ins, index, scope=None):
        self.prog, self.ins, self.index = prog, ins, index
        self.scope = scope if scope is not None else {}     # call-sequence .params in view

    def symbol(self, name):
        """(space, address) of a symbol here: call-sequence parameters (and an inlined
        function's own parameters) are thread-local memory."""
        off = self.scope.get(name)
        if off is not None:
            return "local", off
        return self.prog.symbol(name)

    def fail(self, why):
        raise Unsupported(why)

    def _declared(self, name):
        try:
            return bool(self.symbol(name))
        except Unsupported:
            return False

    def mods(self):
        return set(self.ins.mods)

    # -- operand fetchers: fn(state) -> array (one element per lane) or numpy scalar -----------
    def read(self, o, dt, type_=None):
        """Fetcher of operand o as numpy dtype dt (type_: the IR type, for immediates)."""
        dt = np.dtype(dt)
        if isinstance(o, Reg):
            return self._reg_reader(self.prog.slot(o), dt)
        if isinstance(o, Raw) and o.text.startswith("!"):
            reg = self.prog.by_name.get(o.text[1:].strip())
            if reg is None or reg.type != T.pred:
                self.fail(f"operand {o.text} is not a negated predicate register")
            s = self.prog.slot(reg)
            return lambda st: ~st.R[s]
        if isinstance(o, Imm):
            t = type_ or _type_for(dt)
            c = const(o.value, t)
            if c.dtype != dt:
                c = convert(np.asarray(c), dt)[()]
            return lambda st: c
        if isinstance(o, Special):
            name = o.name
            if name not in SPECIAL_NAMES:
                self.fail(f"special register %{name} is not emulated")
            sdt = storage(o.type)
            if sdt == dt:
                return lambda st: st.special(name)
            return lambda st: convert(st.special(name), dt)
        if isinstance(o, Sym) and o.name == "WARP_SZ" and not self._declared(o.name):
            # PTX's predefined constant: the warp width the executor groups lanes by
            c = convert(np.asarray(const(WARP_WIDTH, T.u32)), dt)[()]
            return lambda st: c
        if isinstance(o, Sym):
            return self.address_of(o.name, dt)
        if isinstance(o, Raw):
            lit = literal_bits(o.text)
            if lit is None:
                self.fail(f"operand {o.text!r} is not emulated")
            bits, nbytes = lit
            v = np.array(bits, UNSIGNED[nbytes]).view(FLOAT_OF_WIDTH[nbytes])
            c = convert(v, dt)[()] if dt.itemsize == nbytes or dt.kind != "f" else \
                v.astype(dt)[()]
            return lambda st: c
        self.fail(f"operand {o!r} cannot be read as a value")

    def _reg_reader(self, s, dt):
        sd = self.prog.slot_dtypes[s]
        if sd == dt:
            return lambda st: st.R[s]
        if (sd == np.dtype(bool)) != (dt == np.dtype(bool)):
            self.fail("predicate and non-predicate registers mixed")
        if sd.itemsize == dt.itemsize:
            return lambda st: st.R[s].view(dt)
        return lambda st: convert(st.R[s], dt)

    def address_of(self, name, dt):
        """Fetcher of a symbol's address in its own state space (what `mov %r, sym` gives)."""
        space, addr = self.symbol(name)
        if addr is None:
            return lambda st: np.asarray(st.global_addr[name]).astype(dt)[()]
        c = np.asarray(addr).astype(dt)[()]
        return lambda st: c

    # -- destination writers ---------------------------------------------------------------------
    def _destination(self, o):
        """(register slot, its storage dtype) of destination o."""
        if not isinstance(o, Reg):
            self.fail(f"destination {o} is not a register")
        s = self.prog.slot(o)
        return s, self.prog.slot_dtypes[s]

    def write(self, o, dt=None):
        """Writer fn(state, mask, values): full-width values merged under the mask."""
        if _is_sink(o):
            return lambda st, m, v: None
        s, sd = self._destination(o)

        def w(st, m, v):
            v = v if v.dtype == sd else convert(v, sd)
            if m is None:
                if v.ndim == 0:
                    v = np.full(st.n, v, sd)
                st.R[s] = v
            else:
                st.R[s] = np.where(m, v, st.R[s])
        return w

    def write_lanes(self, o):
        """Writer fn(state, lanes, values): values for the listed lanes only (None: all)."""
        if _is_sink(o):
            return lambda st, lanes, v: None
        s, sd = self._destination(o)

        def w(st, lanes, v):
            v = v if v.dtype == sd else convert(v, sd)
            if lanes is None:
                st.R[s] = v
            else:
                new = st.R[s].copy()
                new[lanes] = v
                st.R[s] = new
        return w

    def dest_dtype(self, o):
        return self.prog.slot_dtypes[self.prog.slot(o)] if isinstance(o, Reg) else None


def _is_sink(o):
    return (isinstance(o, Raw) and o.text.strip() == "_") or (isinstance(o, Sym) and
                                                              o.name == "_")


def _type_for(dt):
    for name in ("pred", "u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "f16", "f32",
                 "f64"):
        if STORAGE[name] == dt:
            return T.TYPES[name]
    raise Unsupported(f"no PTX type for {dt}")


SPECIAL_NAMES = frozenset(
    [f"{n}.{c}" for n in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"]
    + ["laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid", "clock", "clock_hi", "clock64",
       "globaltimer", "globaltimer_lo", "globaltimer_hi", "lanemask_eq", "lanemask_le",
       "lanemask_lt", "lanemask_ge", "lanemask_gt", "dynamic_smem_size", "total_smem_size"]
    + sorted(CLUSTER_SPECIALS))


WARP_WIDTH = 32         # lanes per warp, as the executor groups them (PTX's WARP_SZ)
