"""A ptxgen kernel as a PyTorch operator (`torch.library.custom_op`), so eager code,
`torch.compile` and CUDA graphs call it like any torch op.

    op = ptxgen.torch_op("mylib::axpy", k,
                         schema="(float a, Tensor x, Tensor y) -> Tensor",
                         outputs=lambda a, x, y: [torch.empty_like(y)],
                         launch=lambda a, x, y, out: (grid, block, kernel_args))

`outputs(*inputs)` allocates the results (it also describes them to torch.compile, so it must
only use shapes and dtypes: torch.empty_like / torch.empty); `launch(*inputs, *outputs)` gives
(grid, block, args) or (grid, block, args, shared) for one launch of the kernel. CUDA tensors
run on the GPU on torch's current stream, with no copies; CPU tensors run on the emulator, which
makes the op testable on a machine without a GPU.

torch is an optional dependency (`pip install ptxgen[torch]`), imported only here.
"""
from .errors import PtxgenError


def import_torch():
    try:
        import torch
    except ImportError:
        raise PtxgenError("PyTorch is not installed (pip install 'ptxgen[torch]')") from None
    return torch


def torch_op(name, kernel, *, schema, outputs, launch, backend="auto"):
    """Register `kernel` (a ptxgen.kernel object) as the torch custom op `name`
    ("namespace::op") with `schema` (torch's schema string, e.g. "(Tensor x) -> Tensor").
    Returns the op (callable; also torch.ops.namespace.op)."""
    torch = import_torch()
    if "::" not in name:
        raise PtxgenError(f"torch_op name must be 'namespace::name', got {name!r}")

    def _outs(inputs):
        outs = outputs(*inputs)
        return [outs] if isinstance(outs, torch.Tensor) else list(outs)

    def _result(outs):
        return outs[0] if len(outs) == 1 else tuple(outs)

    def impl(*inputs):
        outs = _outs(inputs)
        cfg = launch(*inputs, *outs)
        if len(cfg) not in (3, 4):
            raise PtxgenError(f"{name}: launch() must return (grid, block, args[, shared]), "
                              f"got {len(cfg)} items")
        grid, block, args = cfg[:3]
        kernel[grid, block](*args, shared=cfg[3] if len(cfg) == 4 else 0, backend=backend)
        return _result(outs)

    op = torch.library.custom_op(name, impl, mutates_args=(), schema=schema)
    op.register_fake(lambda *inputs: _result(_outs(inputs)))
    return op
