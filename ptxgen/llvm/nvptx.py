"""LLVM IR → PTX through LLVM's NVPTX back end, which llvmlite ships (no GPU or CUDA needed).

The module is optimized with LLVM's O-level pipeline for the target machine (sm_80/sm_90 as the
CPU name) and printed as PTX. FMA contraction is off: ptxgen's `add.rn`/`mul.rn` are separate
roundings in PTX (ptxas never fuses them), and the lowering keeps them plain fadd/fmul so the
optimizer still understands them; fusing them would change results.
"""
import functools

from ..arch import DEFAULT_TARGET
from ..errors import LoweringError
from .lower import TRIPLE


@functools.lru_cache(maxsize=1)
def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.set_option("ptxgen", "-nvptx-fma-level=0")
    return llvm


@functools.lru_cache(maxsize=None)
def target_machine(arch, opt=3):
    llvm = _llvm()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, opt=opt)


def optimize(text, arch, opt=3):
    """Parse and verify LLVM IR text, run the O-`opt` pipeline; returns the binding module."""
    llvm = _llvm()
    tm = target_machine(arch, opt)
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as e:
        raise LoweringError(f"LLVM rejected the lowered IR: {_first_line(e)}") from None
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    if opt:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


def to_ptx(text, arch=DEFAULT_TARGET, opt=3):
    """PTX text from LLVM IR text for `arch` (sm_80, sm_86, sm_89, sm_90)."""
    mod = optimize(text, arch, opt)
    try:
        return target_machine(arch, opt).emit_assembly(mod)
    except RuntimeError as e:
        raise LoweringError(f"LLVM's NVPTX back end failed: {_first_line(e)}") from None


def _first_line(e):
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    return lines[0][:200] if lines else type(e).__name__
