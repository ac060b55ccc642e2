"""IR statements: instructions, labels and the few verbatim pieces parsed PTX carries.

An instruction is PTX's own shape: an opcode, its dot-modifiers, operands and an optional guard
predicate. The builder and the parser both produce it; `str()` is its PTX text, so the emitter only
arranges statements. What an opcode writes and which class it belongs to is its row of the opcode
table (ir/opcodes.py), not per-opcode code.
"""
from dataclasses import dataclass

from . import types as T
from .opcodes import row_of
from .values import Imm, Reg, Special, regs_in

SPACES = ("global", "shared", "local", "param", "const", "generic")
_TYPES_OF_MODS = {}         # modifier tuple -> its types (Instr.types)
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
        mods = self.mods
        ts = _TYPES_OF_MODS.get(mods) if type(mods) is tuple else None
        if ts is None:          # asked many times per instruction by every stage
            ts = tuple(t for t in (T.type_of(m) for m in mods) if t is not None)
            if type(mods) is tuple and len(_TYPES_OF_MODS) < 65536:
                _TYPES_OF_MODS[mods] = ts
        return ts

    @property
    def type(self):
        ts = self.types
        return ts[-1] if ts else None

    @property
    def row(self):
        """This instruction's row of the opcode table."""
        return row_of(self)

    @property
    def space(self):
        for m in self.mods:
            if m in SPACES:
                return m
        return self.row.space or None

    @property
    def vector_width(self):
        for m in self.mods:
            if m in ("v2", "v4", "v8"):
                return int(m[1])
        return 1

    @property
    def n_dests(self):
        return 1 if self.row.writes and self.operands else 0

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
        """Registers that may be read, the guard included. A store's address register is a
        use; an accumulator destination (wgmma's) is read as well as written unless scale-d
        is the immediate 0 (what dependences must assume)."""
        return self._uses(lambda scale_d: not _zero(scale_d))

    def certain_uses(self):
        """Registers read on every execution: like uses(), but an accumulator is counted only
        when scale-d is a nonzero immediate. A run-time scale-d predicate (false on a tile's
        first k-step, so D = A·B) leaves the accumulators possibly unread, and a kernel may
        leave them undefined until then (what the verifier must accept)."""
        return self._uses(lambda scale_d: len(scale_d) == 1 and isinstance(scale_d[0], Imm)
                          and scale_d[0].value != 0)

    def timing_uses(self):
        """Registers whose values must be ready before this instruction issues: uses() less an
        accumulator (acc dest), which the async tensor pipe chains from the previous
        wgmma.mma_async's result inside itself (wgmma into one accumulator issue one per
        tensor-core interval, not one per completion latency: `ptxgen calibrate --only
        tensor`); its readers outside the pipe wait for wait_group. What cost models use,
        never what ordering must respect."""
        return self._uses(lambda scale_d: False)

    def _uses(self, reads_accumulator):
        out = [self.guard] if self.guard is not None else []
        ops = self.sources
        if self.row.dest == "acc" and reads_accumulator(self.operands[3:4]):
            ops = self.operands        # scale-d (4th operand) 0: D = A·B, C is not read
        for o in ops:
            out.extend(regs_in(o))
        return out

    @property
    def is_branch(self):
        return self.row.effect == "branch"

    @property
    def is_terminator(self):
        return self.row.effect in ("branch", "exit")

    @property
    def is_barrier(self):
        """A CTA-wide barrier (bar.sync/arrive/red, barrier.*), not bar.warp.sync."""
        return self.row.effect == "barrier"

    @property
    def cls(self):
        """Instruction class for the mix report: the row's mix class or rule."""
        rule = self.row.mix
        if rule == "@space":
            return _SPACE_CLASS.get(self.space, "generic_memory")
        if rule == "@move":
            return "special" if any(isinstance(o, Special) for o in self.operands) else "move"
        if rule != "@type":
            return rule
        t = self.type
        if t is not None and t.is_float:
            return {32: "fp32", 64: "fp64"}.get(t.bits, "fp16")
        if t is not None and t.name in ("f16x2", "bf16x2"):
            return "fp16"
        if t is not None:
            return "integer"
        return "other"


def _zero(operand):
    return len(operand) == 1 and isinstance(operand[0], Imm) and operand[0].value == 0


_SPACE_CLASS = {"global": "global_memory", "shared": "shared_memory", "local": "local_memory",
                "param": "param", "const": "constant_memory"}


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
