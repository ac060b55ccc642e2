"""GPU trials of the tuner: each surviving schedule is first run on a small shape that is no
multiple of any tile (every edge path) and compared with a float64 product, then timed at the
shape being tuned. Nothing here runs without a GPU."""
import numpy as np

from ..emit import emit_module
from ..ir.verify import verify_module


def check_shape(shape):
    """A small shape of the same alignment class as `shape` (K % 4, N % 4, N % 2 pick the
    kernel's access widths, so the check runs the very code that is timed) whose M, N and K
    are multiples of no block tile or k tile: M=261, N=260+N%4, K=36+K%4."""
    return {"M": 261, "N": 260 + shape["N"] % 4, "K": 36 + shape["K"] % 4}


class GpuTrials:
    """Device buffers for one shape and the kernels loaded so far."""

    def __init__(self, shape, arch, seed=0, target_ms=150.0):
        from ..ops.matmul import Matmul
        from ..runtime import to_device
        self.shape, self.arch, self.target_ms = dict(shape), arch, target_ms
        rng = np.random.default_rng(seed)
        self.dev = to_device(Matmul(None).make_inputs(shape, rng))
        self.small = check_shape(shape)
        self.small_host = Matmul(None).make_inputs(self.small, rng)

    def _kernel(self, sched, shape):
        from ..runtime import load_kernel
        from ..lower import lower_matmul
        m = verify_module(lower_matmul(sched, self.arch, shape))
        kir = m.kernel("matmul")
        return load_kernel(emit_module(m, self.arch), kir.name, kir.params)

    def check(self, sched):
        """(ok, worst relative error) of `sched` on the small shape."""
        from ..ops.matmul import Matmul
        from ..runtime import launch
        op, shape = Matmul(sched), self.small
        arrays = {k: v.copy() for k, v in self.small_host.items()}
        k = self._kernel(sched, shape)
        launch(k, sched.grid(shape), sched.block(), op.kernel_args(shape, arrays))
        return op.check(shape, arrays)

    def time(self, sched):
        """(GPU ms per launch, registers) at the tuned shape: runtime.time_calls, batches of
        about 10 ms of back-to-back launches, ~target_ms in all."""
        from ..ops.matmul import Matmul
        from ..runtime import bound_launch, time_calls
        k = self._kernel(sched, self.shape)
        go = bound_launch(k, sched.grid(self.shape), sched.block(),
                          Matmul(sched).kernel_args(self.shape, self.dev))
        return time_calls(go, repeat=max(3, int(self.target_ms // 10)), target_ms=10.0), \
            k.registers

    def device_name(self):
        from ..runtime import device_name
        return device_name()
