"""The three ways from ptxgen IR to PTX, by name: direct (ptxgen's emitter), llvm (ptxgen.llvm's
lowering compiled by LLVM's NVPTX back end), nvvm (the same lowering compiled by libNVVM, which
the runtime reaches through numba-cuda): a report above the emitter, llvm and the runtime."""
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError

VIAS = ("direct", "llvm", "nvvm")


def llvm_ir(module, dialect="llvm", kernels=None):
    """LLVM IR text of the module's entries (the NVVM dialect carries NVVM's IR version)."""
    from ..llvm.lower import lower_module      # llvmlite loads only when a path needs it
    version = None
    if dialect == "nvvm":
        from ..runtime.nvvm import ir_version
        version = ir_version()
    return str(lower_module(module, dialect, version, kernels))


def emit_via(module, arch=DEFAULT_TARGET, via="direct", opt=3):
    """PTX for `arch`: ptxgen's own emitter, or the IR lowered to LLVM and compiled by LLVM's
    NVPTX back end or by libNVVM."""
    if via == "direct":
        from ..emit import emit_module
        return emit_module(module, arch)
    if via == "llvm":
        from ..llvm.nvptx import to_ptx
        return to_ptx(llvm_ir(module, "llvm"), arch, opt)
    if via == "nvvm":
        from ..runtime.nvvm import to_ptx
        return to_ptx(llvm_ir(module, "nvvm"), arch, opt)
    raise PtxgenError(f"unknown path {via!r}; known: {', '.join(VIAS)}")
