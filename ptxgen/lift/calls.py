"""Lift stage, instructions: one Instr → the Python statement that rebuilds it.

Each instruction gets candidate calls of the Builder's typed methods (b.add, b.ld, b.setp …),
simplest first, then the generic `b.emit(Instr(...))`. A candidate is kept only if running it on
a scratch Builder appends exactly the original instruction (same PTX text, same register
objects) and declares nothing, so the script is readable wherever a typed method fits and exact
everywhere.
"""
import math

from ..errors import PtxgenError
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.instr import Instr, SPACES
from ..ir.module import Kernel
from ..ir.values import Addr, Imm, LabelRef, PredPair, Raw, Reg, Special, Sym, Vec, regs_in
from .prelude import AddrPlus0

BINARY = {"add": "add", "sub": "sub", "min": "min", "max": "max", "and": "and_", "or": "or_",
          "xor": "xor", "shl": "shl", "shr": "shr", "div": "div"}
UNARY = frozenset({"abs", "neg", "not", "cnot", "popc", "clz", "brev", "sqrt", "rsqrt", "rcp",
                   "ex2", "lg2", "sin", "cos", "tanh"})
# names the generated code binds itself; registers never take them
GLOBALS = {"T": T, "Instr": Instr, "Addr": Addr, "Imm": Imm, "LabelRef": LabelRef,
           "PredPair": PredPair, "Raw": Raw, "Reg": Reg, "Special": Special, "Sym": Sym,
           "Vec": Vec, "AddrPlus0": AddrPlus0}


class Renderer:
    """Python expressions for operands; `names` maps a Reg object (by id) to its expression."""

    def __init__(self, names):
        self.names = names
        self.prefixes = []       # (PTX name prefix, Python constant holding it), longest first

    def name(self, text):
        """A PTX symbol name as Python: a long mangled prefix becomes its constant."""
        for prefix, const in self.prefixes:
            if text.startswith(prefix):
                rest = text[len(prefix):]
                return f"{const} + {rest!r}" if rest else const
        return repr(text)

    def reg(self, r):
        try:
            return self.names[id(r)]
        except KeyError:
            raise PtxgenError(f"lift: register {r.name} is used but never declared") from None

    def expr(self, o, literal=False):
        if isinstance(o, Reg):
            return self.reg(o)
        if isinstance(o, Imm):
            if literal and _plain_literal(o):
                return repr(o.value)
            return f"Imm({_number(o.value)}, T.{o.type})" if o.type is not None \
                else f"Imm({_number(o.value)})"
        if isinstance(o, Special):
            return f"Special({o.name!r})"
        if isinstance(o, Sym):
            return f"Sym({self.name(o.name)})"
        if isinstance(o, AddrPlus0):
            return f"AddrPlus0({self.expr(o.base)})"
        if isinstance(o, Addr):
            base = self.expr(o.base)
            return f"Addr({base}, {o.offset})" if o.offset else f"Addr({base})"
        if isinstance(o, Vec):
            items = ", ".join(self.expr(i) for i in o.items)
            return f"Vec(({items},))"
        if isinstance(o, LabelRef):
            return f"LabelRef({o.name!r})"
        if isinstance(o, PredPair):
            return f"PredPair({self.expr(o.first)}, {self.expr(o.second)})"
        if isinstance(o, Raw):
            return f"Raw({o.text!r})"
        raise PtxgenError(f"lift: cannot write operand {o!r} as Python")

    def generic(self, ins, with_guard=False):
        """b.emit(Instr(...)) — the Builder's path for any instruction."""
        ops = ", ".join(self.expr(o) for o in ins.operands)
        args = [repr(ins.opcode)]
        if ins.mods or ins.operands:
            args.append(repr(tuple(ins.mods)))
        if ins.operands:
            args.append(f"({ops},)")
        if with_guard and ins.guard is not None:
            args.append(f"guard={self.reg(ins.guard)}")
            if ins.guard_negated:
                args.append("guard_negated=True")
        if ins.comment:
            args.append(f"comment={ins.comment!r}")
        return f"b.emit(Instr({', '.join(args)}))"


def _number(v):
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)


def _plain_literal(imm):
    """A Python number the typed method turns back into this Imm (the method supplies the
    instruction's type; the check against the original decides whether that was right)."""
    return isinstance(imm.value, (int, float)) and not isinstance(imm.value, bool) and (
        not isinstance(imm.value, float) or math.isfinite(imm.value))


def typed_candidates(ins, R):
    """Typed Builder calls that may rebuild `ins` (guard not included), simplest first."""
    op, mods, ops = ins.opcode, ins.mods, ins.operands
    t = ins.type
    E = lambda o: R.expr(o, literal=True)      # noqa: E731 - a local shorthand
    out = []
    if t is None and op not in ("bra", "ret", "bar", "cp"):
        return out
    tname = f"T.{t}" if t is not None else None
    extra = tuple(m for m in mods if T.type_of(m) is None)
    if op in BINARY and len(ops) == 3:
        d, a, c = ops
        base = f"b.{BINARY[op]}({E(a)}, {E(c)}, out={R.expr(d)}"
        for kw in ("", f", type={tname}"):
            out.append(base + kw + ")")
            if extra:
                out.append(base + kw + f", extra={extra!r})")
    elif op in ("mul", "mad") and len(ops) == (3 if op == "mul" else 4):
        srcs = ", ".join(E(o) for o in ops[1:])
        mode = [m for m in extra if m in ("lo", "hi", "wide")]
        for kw in ("", f", type={tname}"):
            out.append(f"b.{op}({srcs}, out={R.expr(ops[0])}{kw})")
            if mode:
                out.append(f"b.{op}({srcs}, out={R.expr(ops[0])}, mode={mode[0]!r}{kw})")
    elif op == "fma" and len(ops) == 4:
        srcs = ", ".join(E(o) for o in ops[1:])
        rnd = f", rounding={extra[0]!r}" if len(extra) == 1 else ""
        out.append(f"b.fma({srcs}, out={R.expr(ops[0])})")
        out.append(f"b.fma({srcs}, out={R.expr(ops[0])}{rnd})")
        out.append(f"b.fma({srcs}, out={R.expr(ops[0])}{rnd}, type={tname})")
    elif op in UNARY and len(ops) == 2:
        m = f", mods={extra!r}" if extra else ""
        out.append(f"b.unary({op!r}, {E(ops[1])}{m}, out={R.expr(ops[0])})")
        out.append(f"b.unary({op!r}, {E(ops[1])}{m}, out={R.expr(ops[0])}, type={tname})")
        if op == "neg":
            out.insert(0, f"b.neg({E(ops[1])}, out={R.expr(ops[0])})")
    elif op == "setp" and len(ops) == 3 and extra:
        cmp = extra[0]
        out.append(f"b.setp({cmp!r}, {E(ops[1])}, {E(ops[2])}, out={R.expr(ops[0])})")
        out.append(f"b.setp({cmp!r}, {E(ops[1])}, {E(ops[2])}, type={tname}, "
                   f"out={R.expr(ops[0])})")
    elif op == "selp" and len(ops) == 4:
        srcs = ", ".join(E(o) for o in ops[1:])
        out.append(f"b.selp({srcs}, out={R.expr(ops[0])})")
        out.append(f"b.selp({srcs}, type={tname}, out={R.expr(ops[0])})")
    elif op == "cvt" and len(ops) == 2 and len(ins.types) == 2:
        rnd = [m for m in extra]
        dt = f"T.{ins.types[0]}"
        out.append(f"b.cvt({dt}, {E(ops[1])}, out={R.expr(ops[0])})")
        if len(rnd) <= 1:
            out.append(f"b.cvt({dt}, {E(ops[1])}, rounding={(rnd or [''])[0]!r}, "
                       f"out={R.expr(ops[0])})")
    elif op == "mov" and len(ops) == 2 and not isinstance(ops[0], (Vec, Raw)):
        out.append(f"b.mov({E(ops[1])}, out={R.expr(ops[0])})")
        out.append(f"b.mov({E(ops[1])}, type={tname}, out={R.expr(ops[0])})")
    elif op in ("ld", "st") and mods and mods[0] in SPACES:
        out.extend(_memory(ins, R, E, tname))
    elif op == "red" and len(mods) == 3 and len(ops) == 2 and mods[0] in SPACES:
        out.append(f"b.red({mods[0]!r}, {mods[1]!r}, {R.expr(ops[0])}, {E(ops[1])}, "
                   f"type={tname})")
    elif op == "bar" and mods == ("sync",) and len(ops) == 1 and isinstance(ops[0], Imm):
        out.append(f"b.bar_sync({ops[0].value!r})")
    elif op == "cp" and mods[:1] == ("async",):
        out.extend(_cp_async(ins, R, E))
    elif op == "ret" and not ops and not mods:
        out.append("b.ret()")
    return out


def _memory(ins, R, E, tname):
    """b.ld / b.st: mods are [space] [one cache or qualifier] [vN] type."""
    mods, ops = ins.mods, ins.operands
    middle = list(mods[1:-1])
    vec = 1
    if middle and middle[-1] in ("v2", "v4", "v8"):
        vec = int(middle.pop()[1])
    if len(middle) > 1 or T.type_of(mods[-1]) is None:
        return []
    cache = f", cache={middle[0]!r}" if middle else ""
    space = repr(mods[0])
    if ins.opcode == "ld" and len(ops) == 2:
        d, addr = ops
        if vec > 1:
            if not isinstance(d, Vec) or not all(isinstance(r, Reg) for r in d.items):
                return []
            dst = "(" + ", ".join(R.expr(r) for r in d.items) + ",)"
            return [f"b.ld({space}, {tname}, {_address(addr, R)}, vec={vec}{cache}, out={dst})"]
        return [f"b.ld({space}, {tname}, {_address(addr, R)}{cache}, out={R.expr(d)})"]
    if ins.opcode == "st" and len(ops) == 2:
        addr, v = ops
        if vec > 1:
            if not isinstance(v, Vec):
                return []
            val = "(" + ", ".join(E(i) for i in v.items) + ",)"
        else:
            val = E(v)
        call = f"b.st({space}, {_address(addr, R)}, {val}{cache}"
        return [call + ")", call + f", type={tname})"]
    return []


def _address(addr, R):
    if type(addr) is Addr and addr.offset == 0 and isinstance(addr.base, Reg):
        return R.expr(addr.base)
    return R.expr(addr)


def _cp_async(ins, R, E):
    mods, ops = ins.mods, ins.operands
    if mods == ("async", "commit_group") and not ops:
        return ["b.cp_async_commit()"]
    if mods == ("async", "wait_group") and len(ops) == 1 and isinstance(ops[0], Imm):
        return [f"b.cp_async_wait({ops[0].value!r})"]
    if len(mods) == 4 and mods[2:] == ("shared", "global") and len(ops) in (3, 4) and \
            isinstance(ops[2], Imm):
        size = f", src_size={E(ops[3])}" if len(ops) == 4 else ""
        call = f"b.cp_async({_address(ops[0], R)}, {_address(ops[1], R)}, {ops[2].value!r}{size}"
        return [call + ")", call + f", cache={mods[1]!r})"]
    return []


def branch_candidates(ins, R):
    """b.branch(label, pred, negate) — a branch carries its guard in the call."""
    if ins.opcode != "bra" or len(ins.operands) != 1 or \
            not isinstance(ins.operands[0], LabelRef):
        return []
    target = repr(ins.operands[0].name)
    if ins.guard is None:
        return [f"b.branch({target})"]
    neg = ", negate=True" if ins.guard_negated else ""
    return [f"b.branch({target}, {R.reg(ins.guard)}{neg})"]


class Checker:
    """Runs candidate statements on a scratch Builder and keeps the first exact one."""

    def __init__(self, namespace):
        self.ns = dict(GLOBALS)
        self.ns.update(namespace)
        self.kernel = Kernel("lift_scratch")
        self.b = Builder(self.kernel)
        self.ns["b"] = self.b

    def bind(self, name, value):
        self.ns[name] = value

    def exact(self, code, ins, guard):
        b = self.b
        b.block, b._guard = [], guard
        try:
            eval(code, self.ns)              # noqa: S307 - our own generated expression
        except (TypeError, ValueError, KeyError, AttributeError, IndexError):
            return False
        finally:
            b._guard = None
        if len(b.block) != 1 or self.kernel.regs or self.kernel.vars:
            self.kernel.regs.clear()
            self.kernel.vars.clear()
            return False
        got = b.block[0]
        return (isinstance(got, Instr) and str(got) == str(ins) and got.guard is ins.guard
                and _same_regs(got, ins))

    def statement(self, ins, R):
        """(code, guarded_by_context): the Python statement rebuilding `ins`."""
        guard = (ins.guard, ins.guard_negated) if ins.guard is not None else None
        for code in branch_candidates(ins, R):
            if self.exact(code, ins, None):
                return code, False
        for literal_first in typed_candidates(ins, R):
            if self.exact(literal_first, ins, guard):
                return literal_first, guard is not None
        code = R.generic(ins)
        if self.exact(code, ins, guard):
            return code, guard is not None
        code = R.generic(ins, with_guard=True)
        if self.exact(code, ins, None):
            return code, False
        raise PtxgenError(f"lift: cannot rebuild instruction {str(ins)!r} (line {ins.line})")


def _same_regs(a, b):
    ra = [r for o in a.operands for r in regs_in(o)]
    rb = [r for o in b.operands for r in regs_in(o)]
    return len(ra) == len(rb) and all(x is y for x, y in zip(ra, rb))
