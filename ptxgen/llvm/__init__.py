"""ptxgen IR lowered to LLVM IR (llvmlite), and the two compilers that take it to PTX.

    lower_module(module, dialect)   IR → llvmlite.ir.Module (nvptx64-nvidia-cuda)
    emit_via(module, arch, via)     PTX text: "direct" (ptxgen's emitter), "llvm" (LLVM's NVPTX
                                    back end in llvmlite), "nvvm" (libNVVM via numba-cuda)
"""
from .lower import lower_module
from .paths import VIAS, emit_via, llvm_ir

__all__ = ["VIAS", "emit_via", "llvm_ir", "lower_module"]
