"""The sm_90a tensor-core GEMM: schedule validation, emission through ptxas, SASS, the operator's
reference and tolerance, and (GPU) results at small odd shapes."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.tc_matmul import TcMatmul, bf16_bits, bf16_values
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

needs_ptxas = pytest.mark.skipif(not (toolchain.have_tool("ptxas") and
                                      toolchain.have_tool("nvdisasm")),
                                 reason="ptxas/nvdisasm not found")
ARCH = "sm_90a"


@pytest.mark.parametrize("fields, words", [
    (dict(BK=32), "BK=32"),
    (dict(BM=96), "BM=96"),
    (dict(BN=256, wgmma_n=96), "wgmma_n=96"),
    (dict(stages=1), "stages=1"),
    (dict(stages=5), "shared memory"),
    (dict(consumer_regs=248, producer_regs=40), "registers"),
    (dict(BM=512, BN=128, wgmma_n=128, stages=2), "BM=512"),
    (dict(inflight=2), "inflight=2"),
    (dict(BM=256, BN=256, stages=2), "accumulators"),
])
def test_schedule_errors_are_one_line(fields, words):
    with pytest.raises(ScheduleError) as e:
        TcMatmulSchedule(**fields).validate(ARCH)
    msg = str(e.value)
    assert "\n" not in msg and words in msg, msg


def test_schedule_needs_sm_90a():
    with pytest.raises(ScheduleError, match="sm_90a"):
        TcMatmulSchedule().validate("sm_90")


def _assembled(op, shape):
    m = op.build(op.shape(**shape), ARCH)
    ptx = emit_module(m, ARCH)
    asm = toolchain.assemble(ptx, ARCH)
    return ptx, asm, toolchain.sass_mix(toolchain.disassemble(asm.cubin))["tc_matmul"]


@needs_ptxas
@pytest.mark.parametrize("out", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [dict(M=4096, N=4096, K=4096), dict(M=67, N=45, K=40)])
def test_emits_ptxas_clean_with_hgmma_and_no_spills(out, shape):
    ptx, asm, mix = _assembled(TcMatmul("bf16", out), shape)
    assert ".target sm_90a" in ptx and "wgmma.mma_async" in ptx
    r = asm.resources["tc_matmul"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    s = TcMatmulSchedule()
    hgmma = sum(v for k, v in mix.items() if k.startswith("HGMMA"))
    assert hgmma == s.BK // 16 * s.m_blocks * s.n_blocks, mix
    assert mix.get("UTMALDG.2D") == 2 and "LDL" not in mix and "STL" not in mix, mix
    # the register split took effect (ptxas warns C7508 and drops it otherwise)
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL" in mix and "C7508" not in asm.log


@needs_ptxas
def test_cluster_multicast_assembles():
    s = TcMatmulSchedule(cluster_m=2)
    ptx, asm, mix = _assembled(TcMatmul("bf16", "bf16", s), dict(M=4095, N=4097, K=4096))
    assert ".reqnctapercluster 2, 1, 1" in ptx and "multicast::cluster" in ptx
    assert asm.resources["tc_matmul"].spills == 0
    assert mix.get("UTMALDG.2D.MULTICAST") == 1 and mix.get("UTMALDG.2D") == 1, mix
    # slot releases reach both CTAs with cta-scope arrives: no GPU-wide fence in the main loop
    assert mix.get("MEMBAR.ALL.GPU", 0) <= 2, mix          # the two cluster barriers only


@needs_ptxas
def test_f16_and_narrow_tiles_assemble():
    s = TcMatmulSchedule(BM=128, BN=128, wgmma_n=128, stages=6, group_m=0)
    _, asm, mix = _assembled(TcMatmul("f16", "f32", s), dict(M=300, N=200, K=64))
    assert asm.resources["tc_matmul"].spills == 0
    assert any(k.startswith("HGMMA") for k in mix), mix


def test_k_must_be_row_aligned():
    with pytest.raises(PtxgenError, match="K=41"):
        TcMatmul().build(dict(M=64, N=64, K=41), ARCH)


def test_bf16_rounding_is_nearest_even():
    x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, 3.0e38], dtype=np.float32)
    got = bf16_values(bf16_bits(x))
    assert list(got[:4]) == [1.0, 1.0, 1.0 + 2 ** -6, -2.5]     # ties go to the even mantissa
    assert np.isfinite(got[4])


@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_check_accepts_rounded_result_and_rejects_a_wrong_element(out):
    rng = np.random.default_rng()
    op = TcMatmul("bf16", out)
    shape = op.shape(M=37, N=29, K=48)
    arrays = op.make_inputs(shape, rng)
    ref = op.reference(shape, arrays)
    arrays["C"] = ref["C"].astype(np.float32) if out == "f32" else bf16_bits(ref["C"])
    assert op.check(shape, arrays, ref)[0]
    wrong = ref["C"][5, 7] + 4 * ref["bound"][5, 7] + 0.5
    arrays["C"][5, 7] = wrong if out == "f32" else bf16_bits(np.array([wrong]))[0]
    assert not op.check(shape, arrays, ref)[0]


# -- on the GPU ------------------------------------------------------------------------------
def _gpu_run(op, shape, rng):
    from ptxgen.runtime import launch, load_kernel
    from ptxgen.runtime.device import sm_count
    m = op.build(shape, ARCH)
    k = m.kernel("tc_matmul")
    kern = load_kernel(emit_module(m, ARCH), k.name, k.params, k.directives)
    arrays = op.make_inputs(shape, rng)
    L = op.launch(shape, sm_count())
    launch(kern, L.grid, L.block, op.kernel_args(shape, arrays), L.shared_bytes)
    return op.check(shape, arrays)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out", [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32")])
@pytest.mark.parametrize("M, N, K", [(67, 45, 40), (129, 257, 72), (300, 520, 8)])
def test_gpu_small_odd_shapes(dtype, out, M, N, K):
    op = TcMatmul(dtype, out)
    ok, worst = _gpu_run(op, op.shape(M=M, N=N, K=K), np.random.default_rng())
    assert ok, worst


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", [TcMatmulSchedule(inflight=0, persistent=False),
                                      TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=3),
                                      TcMatmulSchedule(cluster_m=2),
                                      TcMatmulSchedule(cluster_m=2, persistent=False,
                                                       group_m=0)])
def test_gpu_schedule_variants(schedule):
    op = TcMatmul("bf16", "f32", schedule)
    ok, worst = _gpu_run(op, op.shape(M=333, N=611, K=200), np.random.default_rng())
    assert ok, worst
