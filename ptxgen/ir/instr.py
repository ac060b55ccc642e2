"""IR statements: instructions, labels and the few verbatim pieces parsed PTX carries.

An instruction is PTX's own shape: an opcode, its dot-modifiers, operands and an optional guard
predicate. The builder and the parser both produce it; `str()` is its PTX text, so the emitter only
arranges statements. What an opcode writes and which class it belongs to is table data below, not
per-opcode code.
"""
from dataclasses import dataclass

from . import types as T
from .values import Reg, Special, regs_in

# Opcodes whose operands are all sources (nothing is written to a register).
NO_DEST = frozenset({
    "st", "red", "bar", "barrier", "bra", "ret", "exit", "membar", "fence", "prefetch",
    "prefetchu", "trap", "brkpt", "nanosleep", "pmevent", "griddepcontrol", "stmatrix",
    "cp", "call", "st.async", "red.async", "elect", "setmaxnreg", "wgmma", "cp.async",
})
# Opcodes with no operands that still get a class.
CONTROL = frozenset({"bra", "ret", "exit", "call", "brx", "trap", "brkpt"})
SYNC = frozenset({"bar", "barrier", "membar", "fence", "nanosleep", "mbarrier", "griddepcontrol"})
MEMORY = frozenset({"ld", "st", "atom", "red", "cp", "prefetch", "prefetchu", "ldu", "ldmatrix",
                    "stmatrix", "cp.async"})
CONVERSION = frozenset({"cvt", "cvta", "cvt.pack"})
WARP = frozenset({"shfl", "vote", "match", "redux", "activemask", "elect"})
SPECIAL_FUNCTION = frozenset({"rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh"})
SPACES = ("global", "shared", "local", "param", "const", "generic")
CACHE_OPS = frozenset({"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc"})


@dataclass(eq=False)
class Instr:
    opcode: str                      # "fma", "ld", "setp" …
    mods: tuple = ()                 # ("rn", "f32")
    operands: tuple = ()
    guard: Reg = None                # predicate register guarding execution
    guard_negated: bool = False
    comment: str = ""
    line: int = 0                    # source line when parsed from PTX

    # -- printing --------------------------------------------------------------------------
    @property
    def full_opcode(self):
        return ".".join((self.opcode,) + tuple(self.mods))

    def __str__(self):
        g = ""
        if self.guard is not None:
            g = f"@{'!' if self.guard_negated else ''}{self.guard} "
        ops = ", ".join(str(o) for o in self.operands)
        text = f"{g}{self.full_opcode}" + (f" {ops}" if ops else "") + ";"
        if self.comment:
            text += f"  // {self.comment}"
        return text

    # -- meaning ---------------------------------------------------------------------------
    @property
    def types(self):
        """Type modifiers in order (cvt has two: destination, source)."""
        return tuple(t for t in (T.type_of(m) for m in self.mods) if t is not None)

    @property
    def type(self):
        ts = self.types
        return ts[-1] if ts else None

    @property
    def space(self):
        for m in self.mods:
            if m in SPACES:
                return m
        if self.opcode in ("ld", "st", "atom", "red", "ldu"):
            return "generic"
        if self.opcode == "cp" and "async" in self.mods:
            return "shared"
        return None

    @property
    def vector_width(self):
        for m in self.mods:
            if m in ("v2", "v4", "v8"):
                return int(m[1])
        return 1

    @property
    def n_dests(self):
        if self.opcode in NO_DEST or ".".join((self.opcode,) + self.mods[:1]) in NO_DEST:
            return 0
        if self.opcode == "mbarrier" and self.mods[:1] in (("init",), ("inval",)):
            return 0
        return 1 if self.operands else 0

    @property
    def dests(self):
        return self.operands[: self.n_dests]

    @property
    def sources(self):
        return self.operands[self.n_dests:]

    def defs(self):
        """Registers written (vector destinations expand to their items)."""
        out = []
        for o in self.dests:
            out.extend(regs_in(o))
        return out

    def uses(self):
        """Registers read, the guard included. A store's address register is a use."""
        out = [self.guard] if self.guard is not None else []
        for o in self.sources:
            out.extend(regs_in(o))
        # a destination address (no such case in PTX) or a memory-operand destination is read
        return out

    @property
    def is_branch(self):
        return self.opcode in ("bra", "brx")

    @property
    def is_terminator(self):
        return self.opcode in ("bra", "brx", "ret", "exit", "trap")

    @property
    def is_barrier(self):
        return self.opcode in ("bar", "barrier") and not (
            len(self.mods) > 0 and self.mods[0] == "warp")

    @property
    def cls(self):
        """Instruction class for the mix report."""
        op = self.opcode
        if op in MEMORY:
            space = self.space
            return {"global": "global_memory", "shared": "shared_memory", "local": "local_memory",
                    "param": "param", "const": "constant_memory"}.get(space, "generic_memory")
        if op in CONTROL:
            return "control"
        if op in SYNC:
            return "sync"
        if op in CONVERSION:
            return "conversion"
        if op in WARP:
            return "warp"
        if op == "mov" and any(isinstance(o, Special) for o in self.operands):
            return "special"
        if op in ("mov", "selp", "prmt", "mov.b32"):
            return "move"
        if op in SPECIAL_FUNCTION:
            return "special_function"
        t = self.type
        if op == "setp" and t is not None and t.is_float:
            return "fp32" if t.bits == 32 else ("fp64" if t.bits == 64 else "fp16")
        if t is not None and t.is_float:
            return {32: "fp32", 64: "fp64"}.get(t.bits, "fp16")
        if t is not None and t.name in ("f16x2", "bf16x2"):
            return "fp16"
        if t is not None:
            return "integer"
        return "other"


@dataclass(eq=False)
class Label:
    name: str

    def __str__(self):
        return f"{self.name}:"


@dataclass(eq=False)
class Verbatim:
    """A statement the IR keeps as text: '.loc', '.pragma', scope braces, local '.reg' lines.

    `regs` holds registers a local declaration introduces, so analyses still see their types.
    """
    text: str
    regs: tuple = ()
    line: int = 0

    def __str__(self):
        return self.text


def instructions(body):
    """The instruction statements of a body, in order."""
    return [s for s in body if isinstance(s, Instr)]
