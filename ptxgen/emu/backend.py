"""The emulator as a backend of `ptxgen run`: one library operator on its arrays."""
from ..arch import DEFAULT_TARGET
from ..ir.verify import verify_module
from .api import emulate


def run_operator(op, shape, arrays, arch=DEFAULT_TARGET, check="error"):
    """Build op's IR for `shape` and run its steps (op.steps: usually one launch) on the
    emulator with arguments from `arrays`, to which the operator's zero-filled workspace is
    added. Output arrays are written in place. Returns the last step's EmulationResult."""
    module = op.build(shape, arch)
    if op.verify:
        verify_module(module)
    for name, buf in op.workspace_arrays(shape, arch).items():
        arrays.setdefault(name, buf)
    result = None
    for step in op.steps(shape, arch):
        cfg = step.launch
        result = emulate(module, step.kernel, cfg.grid, cfg.block, *step.args(arrays),
                         shared_bytes=cfg.shared_bytes, check=check, verify=op.verify)
    return result
