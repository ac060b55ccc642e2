"""The emulator as a backend of `ptxgen run`: one library operator on its arrays."""
from ..ir.verify import verify_module
from .api import emulate


def run_operator(op, shape, arrays, arch="sm_90", check="error"):
    """Build op's IR for `shape`, launch it as op.launch(shape) says with
    op.kernel_args(shape, arrays), on the emulator. Output arrays are written in place.
    Returns the EmulationResult."""
    module = verify_module(op.build(shape, arch))
    cfg = op.launch(shape)
    return emulate(module, op.kernel_name(), cfg.grid, cfg.block,
                   *op.kernel_args(shape, arrays), shared_bytes=cfg.shared_bytes, check=check)
