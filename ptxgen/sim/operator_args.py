"""simulate() for a library operator: its IR, launch and arguments, where only the arrays
whose contents steer the work (the operator's sim_arrays) carry values and the others are
placeholders of the right shape."""
import numpy as np

from .. import isa as isamod
from ..arch import DEFAULT_TARGET
from .launch import simulate


def simulate_operator(op, shape, arch=DEFAULT_TARGET, schedule=False, **kw):
    """simulate() for a library operator: its IR, launch and argument values. schedule=True
    list-schedules the kernel's blocks first (ptxgen.reorder)."""
    module = op.build(shape, arch)
    if schedule:
        from ..reorder import schedule_module
        module = schedule_module(module, arch)
    kernel = module.kernel(op.kernel_name())
    cfg = op.launch(shape, isamod.load(arch).header.sm_count)
    args = op.kernel_args(shape, _Placeholders(op, shape, arch))
    if kw.get("footprint") is None:             # the CLI passes footprint=None when not given
        kw["footprint"] = op.bytes_moved(shape) or None
    return simulate(kernel, cfg.grid, cfg.block, args=args, shared_bytes=cfg.shared_bytes,
                    arch=arch, module=module, **kw)


class _Placeholders(dict):
    """Stands for an operator's arrays: pointer arguments only need to exist; a tensor map
    needs its array's shape and type, which make_inputs gives when every draw is zeros."""

    def __init__(self, op, shape=None, arch=DEFAULT_TARGET):
        super().__init__()
        self.op = op
        if shape is not None:
            try:
                made = dict(op.make_inputs(shape, _ZeroDraws()))
                made.update(op.workspace_arrays(shape, arch))
            except (TypeError, ValueError, AttributeError):
                made = {}
            for name, a in made.items():
                if isinstance(a, np.ndarray):
                    self[name] = _Buffer(name, a.shape, a.dtype)
            # index arrays whose contents steer the work (sequence lengths, page tables): the
            # operator's own choice of them, so loads of them give values; an attention's mod
            # arrays (a block mask's key block lists and counts, a score mod's tensors) are
            # made from its mods, not drawn, and are those the kernel reads
            for steer in (getattr(op, "mod_arrays", None), getattr(op, "sim_arrays", None)):
                if steer is not None:
                    self.update(steer(shape))

    def __missing__(self, key):
        return _Buffer(key)


class _ZeroDraws:
    """A numpy Generator whose every draw is zeros, broadcast (no memory of its own)."""
    SIZE_AT = {"integers": 2, "uniform": 2, "normal": 2, "choice": 1, "standard_normal": 0,
               "random": 0, "permutation": 0}          # the positional index of `size`

    def __getattr__(self, name):
        def draw(*args, size=None, **kw):
            at = self.SIZE_AT.get(name)
            if size is None and at is not None and len(args) > at:
                size = args[at]
            if size is None:
                size = next((a for a in reversed(args) if isinstance(a, tuple)), ())
            return np.broadcast_to(np.float64(0.0), size)
        return draw


class _Buffer:
    def __init__(self, name, shape=(), dtype=None):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype
