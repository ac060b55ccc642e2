"""LLVM IR → PTX through NVIDIA's libNVVM (the compiler behind Numba's CUDA target), reached
through numba-cuda's NVVM binding.

Importing numba.cuda.cudadrv.nvvm also imports numba.cuda's driver module, so, like everything
that touches numba.cuda, this lives in ptxgen.runtime and imports lazily. libNVVM itself needs no
GPU: it comes with the nvidia-nvvm wheel and compiles on a CPU-only machine.
"""
import functools

from ..arch import DEFAULT_TARGET
from ..errors import LoweringError, ToolchainError


def _nvvm():
    try:
        from numba.cuda.cudadrv import nvvm
        nvvm.NVVM()
    except Exception as e:
        raise ToolchainError(f"libNVVM is not available through numba-cuda: "
                             f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None
    return nvvm


@functools.lru_cache(maxsize=1)
def ir_version():
    """The NVVM IR version libNVVM expects in !nvvmir.version."""
    return tuple(_nvvm().NVVM().get_ir_version())


def to_ptx(text, arch=DEFAULT_TARGET, opt=3):
    """PTX from LLVM IR text (LLVM 7 dialect: ptxgen.llvm.lower with dialect='nvvm').

    fma=0 for the same reason as the NVPTX path: the IR's separate roundings stay separate;
    divisions and square roots keep IEEE precision unless the IR asks for approximations."""
    nvvm = _nvvm()
    cu = nvvm.CompilationUnit({"arch": "compute_" + arch.split("_")[1], "opt": opt, "fma": 0,
                               "prec_div": 1, "prec_sqrt": 1, "ftz": 0})
    cu.add_module(text.encode())
    try:
        cu.verify()
        ptx = cu.compile()
    except Exception as e:
        log = cu.get_log().strip()
        first = next((l for l in log.splitlines() if l.strip()), str(e) or type(e).__name__)
        raise LoweringError(f"libNVVM rejected the lowered IR: {first.strip()[:200]}") from None
    return ptx.decode().rstrip("\x00")
