"""The sm_90a GEMM's ld.global producer for K-major operands whose rows are not 16-byte aligned
(schedule/tc_ldg_producer.py, TcMatmul k_pack="ldg"): on the CPU emulator against float64 and
bit for bit against the pad-copy path, ptxas without spills, and on the GPU."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.tc_ldg_producer import batch_for, ldg_schedule
from ptxgen.schedule.tc_matmul import TcMatmulSchedule, lower_tc_matmul

ARCH = "sm_90a"
TMA_128x256 = ldg_schedule(TcMatmulSchedule(epilogue="tma", stages=3))
TURNED = ldg_schedule(TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, epilogue="tma", stages=3))


def _run(op, shape, seed):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    run_operator(op, shape, arrays, ARCH)
    return arrays


def _assert_float64(op, shape, arrays):
    a, b = op.matrices(arrays)
    got = op.values(arrays["C"], op.out)
    bound = op.error_bound(shape, np.abs(a) @ np.abs(b))
    assert np.isfinite(got).all()
    assert (np.abs(got - a @ b) <= bound).all(), float(np.max(np.abs(got - a @ b) / bound))


@pytest.mark.parametrize("dtype", ["bf16", "f16", "tf32"])
@pytest.mark.parametrize("M, N, K", [(67, 45, 37), (70, 131, 93), (129, 257, 129),
                                     (260, 300, 190), (5, 30, 3)])
def test_ldg_producer_matches_float64_and_the_pad_path_bit_for_bit(dtype, M, N, K):
    """K < 64 (only the tail k-block), K = 64k + 1 (the block before the tail ends within 8
    bytes of the last row), full and edge tiles: the slots hold what TMA would have put there,
    so C equals the pad-copy path's bit for bit."""
    ldg, pad = TcMatmul(dtype, "f32", k_pack="ldg"), TcMatmul(dtype, "f32", k_pack="pad")
    shape = ldg.shape(M=M, N=N, K=K)
    assert ldg.ldg(shape) == (True, True) and pad.ldg(shape) == (False, False)
    assert [s.kernel for s in ldg.steps(shape, ARCH)] == ["tc_matmul"]
    seed = int(np.random.default_rng().integers(2 ** 31))
    got, want = _run(ldg, shape, seed), _run(pad, shape, seed)
    _assert_float64(ldg, shape, got)
    assert np.array_equal(got["C"].view(np.uint32), want["C"].view(np.uint32))


@pytest.mark.parametrize("K", range(201, 208))
def test_every_row_misalignment_with_large_tiles(K):
    """K = 8k+1 .. 8k+7 (rows start at every even byte offset mod 16), 128x256 tiles with the
    TMA epilogue and a bf16 C, edge tiles in M and N."""
    op = TcMatmul("bf16", "bf16", TMA_128x256, k_pack="ldg")
    shape = op.shape(M=136, N=264, K=K)
    _assert_float64(op, shape, _run(op, shape, K))


@pytest.mark.parametrize("dtype, kw, ldg", [
    ("bf16", dict(a_layout="col"), (False, True)),     # At by TMA, Bt by ld.global
    ("f16", dict(b_layout="row"), (True, False))])     # A by ld.global, B by TMA
def test_one_operand_by_ldg_the_other_by_tma(dtype, kw, ldg):
    op = TcMatmul(dtype, "bf16", **kw)
    shape = op.shape(M=128, N=192, K=77)
    assert op.ldg(shape) == ldg and not op.packed(shape)
    _assert_float64(op, shape, _run(op, shape, 7))


def test_turned_tiles_and_an_explicit_schedule():
    op = TcMatmul("bf16", "f32", TURNED, k_pack="ldg")
    shape = op.shape(M=300, N=140, K=139)
    _assert_float64(op, shape, _run(op, shape, 3))


def test_auto_picks_a_cluster_1_schedule_and_pads_with_a_cluster_schedule():
    op = TcMatmul("bf16", "bf16", k_pack="ldg")
    s = op.schedule_for(op.shape(M=8192, N=8192, K=8189))
    assert s.cluster_m == 1
    r = ldg_schedule(s)                               # the register split the lowering runs
    assert r.producer_regs > s.producer_regs and r.consumer_regs < s.consumer_regs
    assert r.producer_regs + r.consumers * r.consumer_regs <= 512
    x2 = TcMatmul("bf16", "bf16", TcMatmulSchedule(cluster_m=2))      # k_pack auto
    shape = x2.shape(M=256, N=256, K=77)
    assert x2.ldg(shape) == (False, False) and len(x2.packed(shape)) == 2


def test_cluster_schedule_with_ldg_is_a_one_line_error():
    with pytest.raises(ScheduleError, match="cluster_m=1") as e:
        lower_tc_matmul(TcMatmulSchedule(cluster_m=2), ARCH, dict(M=256, N=256, K=77),
                        ldg=(True, True))
    assert "\n" not in str(e.value)
    with pytest.raises(PtxgenError, match="k_pack"):
        TcMatmul("bf16", k_pack="tma")


def test_batch_follows_the_producer_registers():
    assert batch_for(TMA_128x256, 128, 256) == 8
    assert batch_for(TcMatmulSchedule(), 128, 256) == 1
    ptx = emit_module(TcMatmul("bf16", "bf16", TcMatmulSchedule(), k_pack="ldg").build(
        dict(M=256, N=256, K=77), ARCH))
    assert "setmaxnreg.dec.sync.aligned.u32 104" in ptx


@pytest.mark.skipif(not toolchain.have_tool("ptxas"), reason="ptxas not found")
@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
@pytest.mark.parametrize("M, N, K", [(4096, 4096, 4093), (4095, 4097, 4093), (8192, 8192, 8189)])
def test_ptxas_no_spills_and_loads_in_flight(dtype, M, N, K):
    """No spills, and ptxas keeps a batch of 8-byte loads in flight (at a tight producer
    share it sank each load to its use: tc_ldg_producer.LDG_BASE_REGS)."""
    import re
    op = TcMatmul(dtype, "bf16" if dtype != "tf32" else "f32")
    shape = op.shape(M=M, N=N, K=K)
    assert op.ldg(shape) == (True, True)
    r = toolchain.assemble(emit_module(op.build(shape, ARCH)), ARCH)
    res = r.resources["tc_matmul"]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
    run = best = 0
    for o in re.findall(r"\b(LDG\.E\.64|SEL)\b", toolchain.disassemble(r.cubin)):
        run = run + 1 if o.startswith("LDG") else 0
        best = max(best, run)
    assert best >= 12                 # 6 or more passes' loads issued before the first use


# -- on the GPU ------------------------------------------------------------------------------
def _gpu_arrays(op, shape, seed):
    """All of op's steps on the GPU, on device copies of fresh inputs (C poisoned with NaN)."""
    from numba import cuda
    from ptxgen.runtime import bound_steps, load_steps
    arrays = dict(op.make_inputs(shape, np.random.default_rng(seed)),
                  **op.workspace_arrays(shape, ARCH))
    dev = {k: cuda.to_device(v) for k, v in arrays.items()}
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    bound_steps(op, shape, kernels, dev, ARCH)()
    arrays["C"] = dev["C"].copy_to_host()
    return arrays


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out", [("bf16", "bf16"), ("bf16", "f32"), ("f16", "bf16"),
                                        ("tf32", "f32")])
@pytest.mark.parametrize("M, N, K", [(67, 45, 37), (70, 131, 41), (129, 257, 129),
                                     (300, 520, 203), (5, 300, 3), (1000, 777, 1031)])
def test_gpu_ldg_odd_k(dtype, out, M, N, K):
    op = TcMatmul(dtype, out, k_pack="ldg")
    shape = op.shape(M=M, N=N, K=K)
    assert op.ldg(shape) == (True, True)
    arrays = _gpu_arrays(op, shape, int(np.random.default_rng().integers(2 ** 31)))
    _assert_float64(op, shape, arrays)


@pytest.mark.gpu
@pytest.mark.parametrize("K", range(513, 520))
@pytest.mark.parametrize("schedule", [TMA_128x256, TURNED, "auto"])
def test_gpu_ldg_every_misalignment(K, schedule):
    """K = 8k+1 .. 8k+7, large tiles with edge tiles in M and N."""
    op = TcMatmul("bf16", "bf16", schedule, k_pack="ldg")
    shape = op.shape(M=333, N=390, K=K)
    _assert_float64(op, shape, _gpu_arrays(op, shape, K))


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [dict(a_layout="col"), dict(b_layout="row")])
def test_gpu_ldg_one_operand(kw):
    op = TcMatmul("bf16", "f32", **kw)
    shape = op.shape(M=256, N=384, K=301)
    assert sum(op.ldg(shape)) == 1
    _assert_float64(op, shape, _gpu_arrays(op, shape, 11))
