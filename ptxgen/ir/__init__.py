"""The one instruction IR: built by ptxgen.ir.builder, parsed from PTX by ptxgen.parse,
printed by ptxgen.emit, read by the scheduler, simulator, emulator and analyses."""
from . import types
from .builder import Builder
from .instr import Instr, Label, Verbatim, instructions
from .module import Kernel, Module, Param, Pointer, Var, ptr
from .values import Addr, Imm, LabelRef, PredPair, Raw, Reg, Special, Sym, Vec

__all__ = ["types", "Builder", "Instr", "Label", "Verbatim", "instructions", "Kernel", "Module",
           "Param", "Pointer", "Var", "ptr", "Addr", "Imm", "LabelRef", "PredPair", "Raw", "Reg",
           "Special", "Sym", "Vec"]
