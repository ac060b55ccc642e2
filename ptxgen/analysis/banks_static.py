"""Static shared-memory bank conflicts: every shared access of a kernel, from its IR alone.

For each ld/st/atom/red on shared memory (and cp.async's shared destination, and generic
accesses whose address comes from a shared variable) the address is rebuilt by walking the
instructions that define it, in program order:

- %tid.x/y/z, %laneid, %warpid and %ntid are known per thread from the block shape;
- shared variables are at their offsets in the CTA's shared window (declaration order, aligned
  as the driver lays them out);
- kernel parameters, %ctaid, %nctaid and registers rewritten with thread-invariant values
  (loop counters, stage offsets) are uniform terms: the same for every thread of the warp. A
  uniform term moves every lane's address by the same amount, which never changes how many
  distinct words a bank must deliver, so it is left symbolic (and named in the report); a
  register rewritten with a different thread pattern is flagged (first trip shown);
- add/sub/mul/mad/shl by constants keep the address affine in the thread index; shr, and, or,
  xor, div, rem, min, max are evaluated per thread (the result is reported as non-affine).

The 32 lane addresses of every warp of the block are then given to the bank model
(ptxgen.analysis.banks). Where an access takes more wavefronts than its ideal, a row padding and
an XOR swizzle of the same shared array are tried on every access to that array and the smallest
change that removes the conflicts is suggested. What cannot be derived (addresses loaded from
memory, products of two runtime values) is reported as such, never guessed.

Guards that depend only on the thread index (setp of %tid against constants) switch lanes off;
other guards count every lane as active (the report says which).
"""
from dataclasses import dataclass

import numpy as np

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir.instr import Instr
from ..ir.opcodes import DATA_RESULT
from ..ir.semantics import COMPARE, PREDICATE, evaluation
from ..ir.values import Addr, Imm, Reg, Special, Sym
from .bank_report import BankReport, SharedAccess
from .banks import WIDTHS, bank_conflicts, layout_remedies, normalise, warp_addresses

TID = ("tid.x", "tid.y", "tid.z")
_LINEAR = frozenset({"add", "sub", "mul", "mad", "shl", "neg", "mov", "cvt", "cvta"})
# two-operand ops evaluated thread by thread with the opcode table's meaning (ir/semantics.py)
_PER_THREAD = frozenset({"shr", "and", "or", "xor", "min", "max", "div", "rem"})
_UNIFORM_SPECIALS = ("ctaid", "nctaid", "smid", "nsmid", "gridid", "dynamic_smem_size",
                     "total_smem_size", "nwarpid")


class _Unknown(Exception):
    """The address cannot be derived; the message says why."""


@dataclass(frozen=True)
class _V:
    """A register's value for every thread of the block.

    vec: the per-thread part (int64, one entry per thread, constants included); uniform: the
    uniform terms left symbolic {name: coefficient}; aff: {tid.x/y/z or '1': coefficient} when
    the per-thread part is affine in the thread index, else None; shared: the shared variable
    the value points into, if any."""
    vec: np.ndarray
    uniform: tuple = ()
    aff: tuple = ()
    shared: str = None

    @property
    def varies(self):
        return bool(np.any(self.vec != self.vec[0]))

    @property
    def known(self):
        return not self.uniform


@dataclass(frozen=True)
class _P:
    """A predicate: per thread when `vec` is known, else only whether it is the same for every
    thread (a uniform condition on runtime values)."""
    vec: np.ndarray = None
    uniform: bool = False




def _aff_add(a, b, sign=1):
    if a is None or b is None:
        return None
    d = dict(a)
    for k, c in b:
        d[k] = d.get(k, 0) + sign * c
    return tuple(sorted((k, c) for k, c in d.items() if c))


def _aff_scale(a, s):
    return None if a is None else tuple((k, c * s) for k, c in a if c * s)


def _uni_add(a, b, sign=1):
    d = dict(a)
    for k, c in b:
        d[k] = d.get(k, 0) + sign * c
    return tuple(sorted((k, c) for k, c in d.items() if c))


# -- shared layout ---------------------------------------------------------------------------------
def shared_layout(kernel, module=None):
    """{name: (offset, bytes)} of the shared variables in the CTA's window: static ones in
    declaration order at their alignment, dynamic (extern) ones after them."""
    out, off, dyn_align, dynamic = {}, 0, 16, []
    seen = set()
    for v in list(kernel.vars) + list(module.vars if module is not None else []):
        if v.space != "shared" or v.name in seen:
            continue
        seen.add(v.name)
        align = max(v.align or v.type.nbytes, 1)
        if v.extern:
            dynamic.append(v.name)
            dyn_align = max(dyn_align, align)
            continue
        off = -(-off // align) * align
        out[v.name] = (off, v.nbytes)
        off += v.nbytes
    dyn = -(-off // dyn_align) * dyn_align
    for name in dynamic:
        out[name] = (dyn, 0)
    return out


# -- evaluation ------------------------------------------------------------------------------------
class _Walker:
    def __init__(self, kernel, block, layout, warp_size):
        self.kernel, self.layout = kernel, layout
        bx, by, bz = block
        t = np.arange(bx * by * bz, dtype=np.int64)
        self.n = len(t)
        self.tid = {"tid.x": t % bx, "tid.y": (t // bx) % by, "tid.z": t // (bx * by)}
        self.known = {"ntid.x": bx, "ntid.y": by, "ntid.z": bz}
        self.lane, self.warp = t % warp_size, t // warp_size
        self.env = {}

    def const(self, c, shared=None):
        return _V(np.full(self.n, int(c), np.int64), (), (("1", int(c)),) if c else (), shared)

    def uniform(self, name):
        return _V(np.zeros(self.n, np.int64), ((name, 1),), ())

    def value(self, o):
        if isinstance(o, Reg):
            v = self.env.get(id(o))
            if v is None:
                raise _Unknown(f"{o.name} is read before any definition the analysis follows")
            if isinstance(v, str):
                raise _Unknown(v)
            if isinstance(v, _P):
                raise _Unknown(f"{o.name} is a predicate")
            return v
        if isinstance(o, Imm):
            if isinstance(o.value, float) and not float(o.value).is_integer():
                raise _Unknown(f"float immediate {o.value}")
            return self.const(int(o.value))
        if isinstance(o, Special):
            name = o.name
            if name in self.tid:
                return _V(self.tid[name].copy(), (), ((name, 1),))
            if name in self.known:
                return self.const(self.known[name])
            if name == "laneid":
                return _V(self.lane.copy(), (), None)
            if name == "warpid":
                return _V(self.warp.copy(), (), None)
            if name.split(".")[0] in _UNIFORM_SPECIALS:
                return self.uniform("%" + name)
            raise _Unknown(f"special register %{name} differs per thread in unknown ways")
        if isinstance(o, Sym):
            if o.name in self.layout:
                return self.const(self.layout[o.name][0], shared=o.name)
            return self.uniform(o.name)
        raise _Unknown(f"operand {o} is not an integer value")

    def address(self, a):
        if not isinstance(a, Addr):
            raise _Unknown(f"operand {a} is not an address")
        v = self.value(a.base)
        if a.offset:
            v = _V(v.vec + a.offset, v.uniform, _aff_add(v.aff, (("1", a.offset),)), v.shared)
        return v

    # one instruction: the value it writes to its (single) destination register
    def define(self, ins):
        op, srcs = ins.opcode, ins.sources
        if op == "ld" and ins.space == "param":
            return self.uniform(str(srcs[0].base) if isinstance(srcs[0], Addr) else str(srcs[0]))
        if op in DATA_RESULT or ins.row.mix == "warp":      # memory, or other lanes' values
            raise _Unknown(f"{ins.full_opcode} reads data, so the address depends on memory")
        if op == "setp" or (ins.type is not None and ins.type.kind == "pred"):
            return self.predicate(ins)
        if any(t.kind == "float" for t in ins.types):
            raise _Unknown(f"{ins.full_opcode} does not compute an integer")
        if op == "selp":
            return self.select(ins, [self.value(s) for s in srcs[:2]], self.pred(srcs[2]))
        vals = [self.value(s) for s in srcs]
        if op in _LINEAR:
            return self._linear(ins, op, vals)
        if op in _PER_THREAD and len(vals) == 2:
            return self._per_thread(ins, op, vals)
        if op == "not" and len(vals) == 1 and vals[0].known:
            return self._per_thread_result(ins, ~vals[0].vec, vals)
        if all(not v.varies for v in vals):
            # a thread-invariant result of an operation the walk does not model: uniform
            return self.uniform(f"{ins.full_opcode}@{ins.line or id(ins)}")
        raise _Unknown(f"{ins.full_opcode} of a thread-dependent value is not modelled")

    def pred(self, o):
        """The _P of a predicate operand (unknown: neither per thread nor uniform)."""
        v = self.env.get(id(o)) if isinstance(o, Reg) else None
        return v if isinstance(v, _P) else _P()

    def predicate(self, ins):
        op, srcs = ins.opcode, ins.sources
        if op == "setp":
            cmp = COMPARE.get(ins.mods[0]) if ins.mods else None
            try:
                a, b = self.value(srcs[0]), self.value(srcs[1])
            except _Unknown:
                return _P()
            if cmp is not None and a.known and b.known and len(srcs) == 2:
                return _P(cmp(a.vec, b.vec), False)
            return _P(None, not a.varies and not b.varies)
        ps = [self.pred(o) for o in srcs]
        if op == "mov" and len(ps) == 1:
            return ps[0]
        fn = PREDICATE.get(op)
        if fn is not None and all(p.vec is not None for p in ps):
            return _P(np.asarray(fn(*[np.asarray(p.vec, bool) for p in ps]), bool), False)
        return _P(None, all(p.uniform or (p.vec is not None and not p.vec.any() or
                                          p.vec is not None and p.vec.all()) for p in ps))

    def select(self, ins, vals, p):
        a, b = vals
        if p.vec is not None and a.known and b.known:
            return self._per_thread_result(ins, np.where(p.vec, a.vec, b.vec), vals)
        if p.vec is not None and (p.vec.all() or not p.vec.any()):
            return a if p.vec.all() else b
        if _same(a, b):
            return a
        if p.uniform or not (a.varies or b.varies):
            d = a.vec - b.vec
            if not np.any(d != d[0]):
                # the same thread pattern either way: only a uniform term depends on p
                name = f"{ins.full_opcode}@{ins.line or id(ins)}"
                return _V(a.vec, _uni_add(a.uniform, ((name, 1),)), a.aff,
                          a.shared if a.shared == b.shared else None)
        raise _Unknown(f"{ins.full_opcode} picks between thread patterns by a runtime "
                       f"condition")

    def _linear(self, ins, op, vals):
        if op in ("mov", "cvt", "cvta"):
            return vals[0]
        if op == "neg":
            v = vals[0]
            return _V(-v.vec, tuple((k, -c) for k, c in v.uniform), _aff_scale(v.aff, -1))
        if op in ("add", "sub"):
            a, b = vals
            s = 1 if op == "add" else -1
            if op == "add":
                shared = (a.shared or b.shared) if not (a.shared and b.shared) else None
            else:
                shared = a.shared if not b.shared else None
            return self._wrap(ins, _V(a.vec + s * b.vec, _uni_add(a.uniform, b.uniform, s),
                                      _aff_add(a.aff, b.aff, s), shared))
        if op == "shl":
            a, b = vals
            if b.varies or not b.known:
                raise _Unknown(f"{ins.full_opcode} by a thread-dependent or runtime amount")
            return self._scale(ins, a, 1 << int(b.vec[0]))
        # mul / mad
        a, b = vals[0], vals[1]
        if "hi" in ins.mods:
            if a.known and b.known:
                return self._per_thread_result(ins, (a.vec * b.vec) >> ins.type.bits, [a, b])
            raise _Unknown(f"{ins.full_opcode} of runtime values")
        prod = self._product(ins, a, b)
        if op == "mad":
            c = vals[2]
            return _V(prod.vec + c.vec, _uni_add(prod.uniform, c.uniform),
                      _aff_add(prod.aff, c.aff), c.shared)
        return prod

    def _product(self, ins, a, b):
        for x, y in ((a, b), (b, a)):
            if x.known and not x.varies:
                return self._scale(ins, y, int(x.vec[0]))
        if not a.varies and not b.varies:
            return self.uniform(f"({_show_uniform(a)})*({_show_uniform(b)})")
        raise _Unknown(f"{ins.full_opcode}: a thread-dependent value times a runtime value")

    def _scale(self, ins, v, s):
        return self._wrap(ins, _V(v.vec * s, tuple((k, c * s) for k, c in v.uniform),
                                  _aff_scale(v.aff, s)))

    def _per_thread(self, ins, op, vals):
        a, b = vals
        if not (a.known and b.known):
            if not a.varies and not b.varies:
                return self.uniform(f"{ins.full_opcode}@{ins.line or id(ins)}")
            raise _Unknown(f"{ins.full_opcode} mixes thread-dependent values and runtime values")
        av, bv = a.vec, b.vec
        if ins.type is not None and not ins.type.is_signed:
            mask = (1 << min(ins.type.bits, 63)) - 1
            av, bv = av & mask, bv & mask
        if op in ("div", "rem"):
            bv = np.where(bv == 0, 1, bv)       # lanes dividing by zero: as by one
        f = evaluation(op, ins.mods, ins.type)
        r = [f(int(x), int(y)) for x, y in zip(av, bv)]
        v = self._per_thread_result(ins, r, vals)
        if op in ("and", "or", "xor") and (a.shared is None) != (b.shared is None):
            v = _V(v.vec, v.uniform, v.aff, a.shared or b.shared)
        return v

    def _per_thread_result(self, ins, r, vals):
        r = np.asarray(r, np.int64)
        varies = bool(np.any(r != r[0]))
        aff = None if varies else ((("1", int(r[0])),) if r[0] else ())
        return self._wrap(ins, _V(r, (), aff))

    def _wrap(self, ins, v):
        """Wrap the per-thread part to the instruction's width, as the hardware does."""
        t = ins.type
        if t is None or not v.known or t.bits >= 64 or not t.is_int and t.kind != "bits":
            return v
        m = (1 << t.bits) - 1
        w = v.vec & m
        if t.is_signed:
            w = np.where(w >= 1 << (t.bits - 1), w - (1 << t.bits), w)
        if np.array_equal(w, v.vec):
            return v
        return _V(w, v.uniform, None, v.shared)


def _same(a, b):
    return np.array_equal(a.vec, b.vec) and a.uniform == b.uniform


def _show_uniform(v):
    parts = [f"{c}*{k}" if c != 1 else k for k, c in v.uniform]
    if v.vec[0]:
        parts.append(str(int(v.vec[0])))
    return " + ".join(parts) or "0"


def _expression(v, layout):
    if v.aff is None:
        return None
    d = dict(v.aff)
    parts = []
    const = d.pop("1", 0)
    if v.shared is not None:
        parts.append(v.shared)
        const -= layout[v.shared][0]
    for k in TID:
        if d.get(k):
            parts.append(f"{d[k]}*{k}")
    if const:
        parts.append(str(const))
    return " + ".join(parts).replace("+ -", "- ") or "0"


def _access_of(ins, layout):
    """(kind, width, address operand) of a shared-memory access, or None."""
    op, space = ins.opcode, ins.space
    if op == "cp" and "async" in ins.mods and ins.operands and isinstance(ins.operands[0], Addr):
        size = ins.operands[2].value if len(ins.operands) > 2 and \
            isinstance(ins.operands[2], Imm) else 0
        return "copy", int(size), ins.operands[0]
    kind = {"ld": "load", "ldu": "load", "st": "store", "atom": "atomic", "red": "atomic"}.get(op)
    if kind is None or space not in ("shared", "generic") or ins.type is None:
        return None
    addr = ins.operands[0] if op in ("st", "red") else ins.operands[1]
    if not isinstance(addr, Addr):
        return None
    return kind, ins.type.nbytes * ins.vector_width, addr


def _changed_registers(kernel, walker):
    """(registers written more than once, those of them whose thread pattern differs between
    writes: an address built on one changes from trip to trip)."""
    first, changed, count = {}, set(), {}
    for s in kernel.body:
        if not isinstance(s, Instr) or s.n_dests != 1 or not isinstance(s.dests[0], Reg):
            continue
        r = s.dests[0]
        count[id(r)] = count.get(id(r), 0) + 1
        try:
            v = walker.define(s)
        except _Unknown:
            v = None
        if v is None:
            continue
        walker.env[id(r)] = v
        if isinstance(v, _P):
            continue
        pattern = tuple(v.vec - v.vec[0])
        if id(r) in first and first[id(r)] != pattern:
            changed.add(id(r))
        first.setdefault(id(r), pattern)
    return {k for k, n in count.items() if n > 1}, changed


def static_bank_conflicts(kernel, block, arch=DEFAULT_TARGET, module=None, kernel_name=None):
    """A BankReport for every shared access of `kernel` (an IR Kernel, or a Module with
    kernel_name) launched with `block` threads (x[, y[, z]])."""
    if hasattr(kernel, "kernels"):
        module = kernel
        kernel = module.kernel(kernel_name) if kernel_name else module.entries[0]
    block = tuple(int(x) for x in (block if isinstance(block, (tuple, list)) else (block,)))
    block = block + (1,) * (3 - len(block))
    if len(block) != 3 or any(b <= 0 for b in block):
        raise PtxgenError(f"block must be 1 to 3 positive integers, got {block!r}")
    h = isamod.load(arch).header
    layout = shared_layout(kernel, module)
    threads = block[0] * block[1] * block[2]
    if threads > h.max_threads_per_block:
        raise PtxgenError(f"block {block} has {threads} threads; {arch} allows "
                          f"{h.max_threads_per_block}")
    # pass 1: which registers change their thread pattern between writes
    multi, changed = _changed_registers(kernel, _Walker(kernel, block, layout, h.warp_size))
    w = _Walker(kernel, block, layout, h.warp_size)
    tainted = set()
    accesses = []
    for index, s in enumerate(kernel.body):
        if not isinstance(s, Instr):
            continue
        acc = _access_of(s, layout)
        if acc is not None:
            a = _analyse(s, index, acc, w, layout, tainted, h, arch)
            if a is not None:
                accesses.append(a)
        if s.n_dests != 1 or not isinstance(s.dests[0], Reg):
            for r in s.defs():
                w.env[id(r)] = f"{r.name} is written by {s.full_opcode}"
            continue
        r = s.dests[0]
        try:
            v = w.define(s)
        except _Unknown as e:
            w.env[id(r)] = str(e)
            continue
        if id(r) in multi and isinstance(v, _V) and not v.varies:
            # a register rewritten with thread-invariant values (a loop counter, a stage
            # offset): a uniform term, whatever trip it is in
            # (its first value stays in the lane addresses: a uniform shift changes nothing)
            v = _V(v.vec, _uni_add(v.uniform, ((r.name, 1),)), v.aff, v.shared)
        if v is not None:
            w.env[id(r)] = v
            if id(r) in changed or any(id(u) in tainted for u in s.uses()):
                tainted.add(id(r))
    elem = {v.name: v.type.nbytes for v in list(kernel.vars) +
            list(module.vars if module is not None else []) if v.space == "shared"}
    variables = suggest_layouts(accesses, layout, elem, arch)
    assumptions = ["guards on runtime values count every lane as active",
                   "uniform terms shift every lane alike, which changes no bank count: "
                   "parameters and %ctaid are left out, loop counters enter with their first "
                   "value"]
    return BankReport(kernel.name, arch, block, h.shared_banks, h.shared_bank_bytes, accesses,
                      variables, assumptions)


def _analyse(ins, index, acc, w, layout, tainted, h, arch):
    kind, width, addr = acc
    a = SharedAccess(index=index, line=ins.line, text=str(ins).split("  //")[0], kind=kind,
                     width=width, predicated=ins.guard is not None)
    try:
        v = w.address(addr)
    except _Unknown as e:
        if ins.space == "generic":
            return None                 # a generic access of unknown target: not ours
        a.note = f"address not derivable: {e}"
        return a
    if ins.space == "generic" and v.shared is None:
        return None
    a.variable = v.shared
    a.expression = _expression(v, layout)
    a.uniform_terms = [k for k, _ in v.uniform]
    a.varies_per_trip = any(id(r) in tainted for r in [addr.base] if isinstance(r, Reg))
    if width not in WIDTHS:
        a.note = f"{width}-byte accesses are not modelled"
        return a
    mask = None
    if ins.guard is not None:
        p = w.pred(ins.guard)
        if p.vec is not None:
            mask = ~p.vec if ins.guard_negated else p.vec
            a.guard = "evaluated per thread"
        else:
            a.guard = "uniform: all or no lanes" if p.uniform else "runtime: every lane counted"
    if mask is not None and not mask.any():
        a.note = "the guard is false for every thread"
        return a
    live = v.vec if mask is None else v.vec[mask]
    if np.any(live % width != live[0] % width):
        a.note = "lane addresses are not equally aligned to the access width"
        return a
    warps = [(i, lanes) for i, lanes in enumerate(warp_addresses(v.vec, h.warp_size, mask))
             if any(x is not None for x in lanes)]
    a.warps = len(warps)
    a.lane_addresses = warps[0][1]
    res = [(i, bank_conflicts(normalise(lanes, width), width, arch)) for i, lanes in warps]
    r0 = res[0][1]
    a.wavefronts, a.ideal, a.degree = r0.wavefronts, r0.ideal, r0.degree
    a.worst_warp, worst = max(res, key=lambda x: (x[1].wavefronts - x[1].ideal, -x[0]))
    a.worst_wavefronts, a.worst_ideal = worst.wavefronts, worst.ideal
    a._vec, a._mask = v.vec, mask
    return a


def suggest_layouts(accesses, layout, elem_bytes, arch):
    """Per shared array: wavefronts of its accesses per block and, where some conflict, the
    padding or swizzle (applied to every access of the array) that removes the most."""
    out = {}
    for name, (offset, nbytes) in layout.items():
        mine = [a for a in accesses if a.variable == name and hasattr(a, "_vec")]
        info = {"offset": offset, "bytes": nbytes, "accesses": len(mine)}
        if mine:
            info.update(layout_remedies([(a._vec, a._mask, a.width) for a in mine], offset,
                                        elem_bytes.get(name, 1), arch))
            for a in mine:
                if a.conflicted:
                    a.suggestion = info.get("suggestion")
        out[name] = info
    for a in accesses:
        a.__dict__.pop("_vec", None)
        a.__dict__.pop("_mask", None)
    return out
