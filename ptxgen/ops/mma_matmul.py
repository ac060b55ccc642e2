"""The tensor-core matmul's sm_80 path: TcMatmul's operator (same inputs, outputs, reference and
bound; ops/tc_matmul.py) with the kernel lowered from an MmaMatmulSchedule — mma.sync, ldmatrix
and a cp.async pipeline (schedule/lower_mma_matmul.py) — which runs on every target from sm_80
(sm_80, sm_86, sm_89, and sm_90 without the arch-specific wgmma).

TcMatmul hands itself over to this class for such targets (or for an MmaMatmulSchedule), so
`Matmul --dtype bf16 --arch sm_80` and the library call alike take this path. A and Bt are
passed as plain pointers (no tensor maps); K not a multiple of 16 bytes is padded first, as on
the sm_90a path (ops/pack.py), since cp.async.cg copies whole aligned 16-byte chunks.
"""
import numpy as np

from .. import arch as archmod
from ..errors import PtxgenError
from ..schedule.mma_matmul import (INSTRUCTION, MmaMatmulSchedule, default_mma_schedule,
                                   lower_mma_matmul)
from ..schedule.tc_matmul import ELEM_BYTES
from ..ir import types as T
from . import pack as packmod
from .base import Launch
from .tc_matmul import TcMatmul, epilogue_args


def uses_mma_sync(arch, schedule="auto"):
    """Whether a tensor-core operator (this matmul, attention) takes the sm_80 path: an sm_80
    schedule (instruction "mma.sync"), or "auto" on a target without wgmma (every one but the
    arch-specific sm_90a)."""
    if schedule != "auto":
        return getattr(schedule, "instruction", None) == INSTRUCTION
    return arch is not None and not archmod.is_arch_specific(arch)


class MmaMatmul(TcMatmul):
    def __init__(self, dtype="bf16", out="f32", schedule="auto", arch=archmod.BASELINE_TARGET,
                 epilogue=None):
        super().__init__(dtype, out, epilogue=epilogue)
        if schedule != "auto" and not isinstance(schedule, MmaMatmulSchedule):
            raise PtxgenError(f"matmul: the sm_80 path takes 'auto' or an MmaMatmulSchedule, "
                              f"got {schedule!r}")
        self.schedule, self.arch = schedule, archmod.check_arch(arch)

    def handover(self, arch):
        return None                     # this is the sm_80 path already

    def schedule_for(self, shape):
        if self.schedule == "auto":
            return default_mma_schedule(self.arch, shape).for_dtype(self.dtype)
        return self.schedule

    def build(self, shape, arch=None):
        self.arch = archmod.check_arch(arch or self.arch)
        main = dict(shape, K=packmod.padded(shape["K"], self._per16))
        m = lower_mma_matmul(self.schedule_for(shape), self.arch, main, dtype=self.dtype,
                             out=self.out, name=self.kernel_name(), epilogue=self.epilogue)
        if not self.packs(shape):
            return m
        return packmod.add_pad_copy(m, T.f32 if self.dtype == "tf32" else T.b16)

    def tiles(self, shape):
        s = self.schedule_for(shape)
        return -(-shape["M"] // s.BM) * -(-shape["N"] // s.BN)

    def launch(self, shape, sm_count=None):
        """One CTA per BM x BN tile of C."""
        s = self.schedule_for(shape)
        return Launch(grid=(self.tiles(shape), 1, 1), block=(s.threads, 1, 1),
                      shared_bytes=s.shared_bytes(ELEM_BYTES[self.dtype]))

    def kernel_args(self, shape, arrays):
        a, bt = ("A_packed", "Bt_packed") if self.packs(shape) else ("A", "Bt")
        K = packmod.padded(shape["K"], self._per16)
        return [arrays[a], arrays[bt], arrays["C"], np.uint32(shape["M"]), np.uint32(shape["N"]),
                np.uint32(K)] + epilogue_args(self.epilogue, arrays)
