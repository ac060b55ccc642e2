"""The tensor-core matmul's sm_80 path (TcMatmul's "mma.sync" entry, ops/tc_matmul.py): the
kernel lowered from an MmaMatmulSchedule — mma.sync, ldmatrix and a cp.async pipeline
(lower/mma_matmul.py) — which runs on every target from sm_80 (sm_80, sm_86, sm_89, and sm_90
without the arch-specific wgmma). Same inputs, outputs, reference and bound as the sm_90a
path; A and Bt are passed as plain pointers (no tensor maps); K not a multiple of 16 bytes is
padded first, as on the sm_90a path (ops/pack.py), since cp.async.cg copies whole aligned
16-byte chunks.
"""
import numpy as np

from .. import arch as archmod
from ..lower import lower_mma_matmul
from ..schedule.mma_matmul import default_mma_schedule
from ..schedule.tc_matmul import ELEM_BYTES
from . import pack as packmod
from .base import Launch
from .tensor_path import MMA_SYNC


class MmaSyncMatmulPath:
    """TcMatmul on mma.sync: one CTA per BM x BN tile of C, no ld.global producer or fused
    pad copy (k_pack chooses between those on sm_90a only)."""
    instruction = MMA_SYNC
    own_loads = False               # misaligned operands are always pad-copied

    @staticmethod
    def arch(op):
        """The target: the operator's last build's, else the sm_80 baseline."""
        return archmod.check_arch(op.built_arch or archmod.BASELINE_TARGET)

    @staticmethod
    def schedule_for(op, shape):
        if op.schedule == "auto":
            return default_mma_schedule(MmaSyncMatmulPath.arch(op), shape).for_dtype(op.dtype)
        return op.schedule

    @staticmethod
    def build(op, shape):
        """The GEMM kernel's module (TcMatmul.build adds the pad copy)."""
        main = dict(shape, K=packmod.padded(shape["K"], op.per16))
        return lower_mma_matmul(op.schedule_for(shape), MmaSyncMatmulPath.arch(op), main,
                                dtype=op.dtype, out=op.out, name=op.kernel_name(),
                                epilogue=op.epilogue)

    @staticmethod
    def tiles(op, shape):
        s = op.schedule_for(shape)
        return -(-shape["M"] // s.BM) * -(-shape["N"] // s.BN)

    @staticmethod
    def launch(op, shape, sm_count=None):
        """One CTA per BM x BN tile of C."""
        s = op.schedule_for(shape)
        return Launch(grid=(op.tiles(shape), 1, 1), block=(s.threads, 1, 1),
                      shared_bytes=s.shared_bytes(ELEM_BYTES[op.dtype]))

    @staticmethod
    def kernel_args(op, shape, arrays):
        """The GEMM kernel's arguments (TcMatmul.kernel_args adds the epilogue's)."""
        a, bt = ("A_packed", "Bt_packed") if op.packs(shape) else ("A", "Bt")
        K = packmod.padded(shape["K"], op.per16)
        return [arrays[a], arrays[bt], arrays["C"], np.uint32(shape["M"]), np.uint32(shape["N"]),
                np.uint32(K)]
