"""Issue 29's GEMMs on the GPU against the emulator, same inputs, bit for bit: split-K and the
grouped GEMM in bf16 (the 16-bit tensor-core model is measured), and the fp8 GEMM, whose
accumulation model (tensor_math.MODEL_FP8) this checks: where it fails, fit it with
benchmarks/numerics.py. Every result also within the float64 bound."""
import numpy as np
import pytest

from ptxgen.emu import run_operator
from ptxgen.ops.fp8_matmul import Fp8Matmul
from ptxgen.ops.grouped_matmul import GroupedMatmul
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"
S64 = dict(BM=64, BN=128, wgmma_n=128, consumers=1, stages=4)
CASES = [
    (TcMatmul("bf16", "bf16", TcMatmulSchedule(**S64, split_k=3)), dict(M=37, N=200, K=1000)),
    (TcMatmul("bf16", "f32", TcMatmulSchedule(BN=128, wgmma_n=128, stages=6, split_k=2)),
     dict(M=130, N=300, K=2048)),
    (GroupedMatmul("bf16", "bf16", TcMatmulSchedule(**dict(S64, stages=3))),
     dict(M=300, N=136, K=72, G=5)),
    (GroupedMatmul("bf16", "f32", layout="masked"), dict(M=512, N=300, K=256, G=4)),
    (GroupedMatmul("bf16", "bf16", TcMatmulSchedule(**dict(S64, stages=3, epilogue="tma"))),
     dict(M=300, N=136, K=72, G=5)),                  # C staged and stored by TMA (and not)
    (GroupedMatmul("bf16", "bf16"), dict(M=1000, N=264, K=256, G=5)),
    (Fp8Matmul("e4m3", "f32"), dict(M=67, N=45, K=64)),
    (Fp8Matmul("e5m2", "bf16", b_dtype="e4m3"), dict(M=130, N=72, K=200)),
    (Fp8Matmul("e4m3", "f32", scaling="block"), dict(M=130, N=200, K=384)),
    (Fp8Matmul("e4m3", "f32", TcMatmulSchedule(BM=128, BN=128, wgmma_n=128, stages=5,
                                               inflight=1).for_dtype("e4m3"), scaling="block"),
     dict(M=200, N=300, K=520)),
]


def _on_gpu(op, shape, arrays):
    from numba import cuda
    from ptxgen.runtime import bound_steps, load_steps
    arrays = dict(arrays, **op.workspace_arrays(shape, ARCH))
    dev = {k: cuda.to_device(v) for k, v in arrays.items()}
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    bound_steps(op, shape, kernels, dev, ARCH)()
    return dict(arrays, C=dev["C"].copy_to_host())


@pytest.mark.gpu
@pytest.mark.parametrize("op, shape", CASES, ids=lambda x: str(x) if isinstance(x, dict)
                         else type(x).__name__)
def test_gpu_equals_emulator(op, shape):
    shape = op.shape(**shape)
    seed = int(np.random.default_rng().integers(2 ** 31))
    inputs = op.make_inputs(shape, np.random.default_rng(seed))
    gpu = _on_gpu(op, shape, {k: v.copy() for k, v in inputs.items()})
    emu = {k: v.copy() for k, v in inputs.items()}
    run_operator(op, shape, emu, ARCH)
    assert op.check(shape, gpu)[0] and op.check(shape, emu)[0]
    g, e = gpu["C"], emu["C"]
    same = (g == e) | (np.isnan(g) & np.isnan(e)) if g.dtype.kind == "f" else g == e
    assert same.all(), f"seed {seed}: {np.mean(same):.4%} of C bit-equal"
