"""What every operator provides: IR, a launch shape, inputs, a float64 reference, work counts.

Most operators are one kernel launch. One that needs several (the matmul packs misaligned
operands first) lists them in steps(): every step names a kernel of the module build() returns,
its launch shape and its arguments taken from the arrays; workspace() names the scratch arrays
those steps need besides the operator's inputs and outputs. Runners (ptxgen.reports.run, the
emulator backend, benchmarks) allocate the workspace and launch the steps in order.
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import isa
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError


def sm_count_or_default(sm_count, arch=DEFAULT_TARGET):
    """sm_count when given (a live device's), else the target's from its isa model."""
    return isa.sm_count(arch) if sm_count is None else sm_count


@dataclass(frozen=True)
class Launch:
    grid: tuple
    block: tuple
    shared_bytes: int = 0


@dataclass(frozen=True)
class Step:
    kernel: str                     # kernel name in the operator's module
    launch: Launch
    args: Callable                  # arrays (inputs, outputs, workspace) → kernel arguments


class Operator:
    name = ""
    shape_names = ()
    defaults = {}
    inputs = ()
    outputs = ()
    rtol = 1e-5
    atol = 1e-5

    @property
    def label(self):
        """The name the user calls the operator by (command line, messages): the SGEMM and
        the tensor-core matmul are both `matmul`; `name` tells them apart."""
        return self.name

    def shape(self, **given):
        """The full shape from user values (None → default), validated."""
        shape = {}
        for k in self.shape_names:
            v = given.get(k)
            v = self.defaults[k] if v is None else v
            if not isinstance(v, (int, np.integer)) or v <= 0:
                raise PtxgenError(f"{self.label}: size {k} must be a positive integer, got {v!r}")
            if v >= 2 ** 31:
                raise PtxgenError(f"{self.label}: size {k}={v} is too large (limit 2^31-1)")
            shape[k] = int(v)
        return shape

    def kernel_name(self):
        return self.name

    def build(self, shape, arch=DEFAULT_TARGET):
        raise NotImplementedError

    def launch(self, shape, sm_count=None):
        """The main kernel's Launch. sm_count: the device's SM count, for operators that size
        a grid-stride grid by it (None: the default target's, see sm_count_or_default)."""
        raise NotImplementedError

    def make_inputs(self, shape, rng):
        raise NotImplementedError

    def steps(self, shape, arch=DEFAULT_TARGET, sm_count=None):
        """The launches that compute the operator, in order (build() first: it decides).
        sm_count: the live device's SM count when running on one (None: the target's)."""
        return [Step(self.kernel_name(), self.launch(shape, sm_count_or_default(sm_count, arch)),
                     lambda arrays: self.kernel_args(shape, arrays))]

    def workspace(self, shape, arch=DEFAULT_TARGET):
        """{name: (shape, dtype)} of scratch arrays steps() uses (build() first)."""
        return {}

    def workspace_arrays(self, shape, arch=DEFAULT_TARGET):
        """The workspace as zero-filled numpy arrays."""
        return {n: np.zeros(d, t) for n, (d, t) in self.workspace(shape, arch).items()}

    def kernel_args(self, shape, arrays):
        raise NotImplementedError

    def reference(self, shape, arrays):
        raise NotImplementedError

    def check(self, shape, arrays, reference=None):
        """Compare outputs with the float64 reference; returns (ok, worst relative error)."""
        ref = reference or self.reference(shape, arrays)
        worst, ok = 0.0, True
        for name in self.outputs:
            got = arrays[name].astype(np.float64)
            want = ref[name]
            scale = self.tolerance_scale(shape)
            err = np.abs(got - want)
            bound = self.atol * scale + self.rtol * scale * np.abs(want)
            if not np.all(np.isfinite(got)) or np.any(err > bound):
                ok = False
            denom = np.maximum(np.abs(want), 1.0)
            worst = max(worst, float(np.nanmax(err / denom)) if err.size else 0.0)
        return ok, worst

    def tolerance_scale(self, shape):
        return 1.0

    def flops(self, shape):
        return 0

    def bytes_moved(self, shape):
        return 0
