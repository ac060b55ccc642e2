"""Every instruction name of the PTX ISA (up to 9.0), without modifiers: the opcode table's.

Source: NVIDIA, "Parallel Thread Execution ISA Version 9.0", chapter 9 (Instruction Set),
section headings per instruction; each has a row in ptxgen/ir/opcodes.py. The parser keeps
instructions the IR does not model as opaque instructions, but a name outside this list is a
typo or garbage and gets a located error.
"""
from ..ir.opcodes import OPCODES as PTX_OPCODES

__all__ = ["PTX_OPCODES"]
