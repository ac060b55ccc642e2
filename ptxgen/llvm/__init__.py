"""ptxgen IR lowered to LLVM IR (llvmlite), and LLVM's NVPTX back end that takes it to PTX.

    lower_module(module, dialect)   IR → llvmlite.ir.Module (nvptx64-nvidia-cuda)

Choosing among ptxgen's emitter, LLVM's NVPTX back end and libNVVM (which the runtime reaches
through numba-cuda) is ptxgen.reports.paths (emit_via, llvm_ir, VIAS): it needs the runtime,
a stage above this one, which the emulator's native engine also builds on.
"""
from .lower import lower_module

__all__ = ["lower_module"]
