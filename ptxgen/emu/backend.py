"""The emulator as a backend of `ptxgen run`: one library operator on its arrays."""
from ..arch import DEFAULT_TARGET
from ..errors import NativeUnsupported
from ..ir.verify import verify_module
from .api import emulate


def run_operator(op, shape, arrays, arch=DEFAULT_TARGET, check="error", engine="interp",
                 progress=None):
    """Build op's IR for `shape` and run its steps (op.steps: usually one launch) on the
    emulator with arguments from `arrays`, to which the operator's zero-filled workspace is
    added. Output arrays are written in place. Returns the last step's EmulationResult.

    engine 'auto': each step on the native engine (emu.native: bounds and alignment checked,
    no racecheck) when it supports the kernel, else on the interpreter with `check`.
    progress: as emulate() takes it, for each step."""
    module = verify_module(op.build(shape, arch))   # once here, not again per step
    for name, buf in op.workspace_arrays(shape, arch).items():
        arrays.setdefault(name, buf)
    result = None
    for step in op.steps(shape, arch):
        cfg = step.launch
        args = step.args(arrays)
        if engine in ("auto", "native"):
            try:
                result = emulate(module, step.kernel, cfg.grid, cfg.block, *args,
                                 shared_bytes=cfg.shared_bytes, check="off", engine="native",
                                 verify=False, progress=progress)
                continue
            except NativeUnsupported:
                if engine == "native":
                    raise                   # refused before running: the interpreter runs it
        result = emulate(module, step.kernel, cfg.grid, cfg.block, *args,
                         shared_bytes=cfg.shared_bytes, check=check, verify=False,
                         progress=progress)
    return result
