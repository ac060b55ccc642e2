"""The sm_90a GEMM's cp.async producer for K-major operands whose rows are not 16-byte aligned
(lower/ldg_producer.py, TcMatmul k_pack="ldg"): on the CPU emulator (racecheck on)
against float64 and bit for bit against the pad-copy path, ptxas without spills, and on the
GPU."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.lower import lower_tc_matmul
from ptxgen.lower.ldg_producer import LDG_PRODUCER_REGS, ldg_schedule
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

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
    """K < 64 (only the tail k-block), K = 64k + 1 (the tail k-block holds one element), odd K
    (every other row shifted in shared memory), full and edge tiles: the slots hold what TMA
    would have put there, so C equals the pad-copy path's bit for bit."""
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
    op = TcMatmul(dtype, "bf16", k_pack="ldg", **kw)
    shape = op.shape(M=128, N=192, K=77)
    assert op.ldg(shape) == ldg and not op.packed(shape)
    _assert_float64(op, shape, _run(op, shape, 7))


def test_small_tiles_walked_by_few_persistent_ctas():
    """64-row tiles (16 rows a producer warp: the side words of fewer rows than lanes), two
    CTAs walking 9 tiles each through a 3-slot ring: the one-k-block lag wraps the ring and
    crosses tiles."""
    from ptxgen.emu import emulate
    op = TcMatmul("bf16", "f32", TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1,
                                                  stages=3, group_m=2), k_pack="ldg")
    shape = op.shape(M=150, N=190, K=101)
    arrays = op.make_inputs(shape, np.random.default_rng(5))
    m = op.build(shape, ARCH)
    (step,) = op.steps(shape, ARCH, 2)
    L = step.launch
    emulate(m, step.kernel, L.grid, L.block, *step.args(arrays), shared_bytes=L.shared_bytes)
    _assert_float64(op, shape, arrays)


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


@pytest.mark.parametrize("schedule, words", [(TcMatmulSchedule(cluster_m=2), "cluster_m=1"),
                                              (TcMatmulSchedule(stages=2), "stages >= 3")])
def test_schedules_the_producer_cannot_take_are_one_line_errors(schedule, words):
    with pytest.raises(ScheduleError, match=words) as e:
        lower_tc_matmul(schedule, ARCH, dict(M=256, N=256, K=77), ldg=(True, True))
    assert "\n" not in str(e.value)
    auto = TcMatmul("bf16", "bf16", schedule)               # k_pack auto: pad copies instead
    assert auto.ldg(dict(M=256, N=256, K=77)) == (False, False)
    with pytest.raises(PtxgenError, match="k_pack"):
        TcMatmul("bf16", k_pack="tma")


def test_producer_register_share_and_side_buffer():
    op = TcMatmul("bf16", "bf16", TcMatmulSchedule(), k_pack="ldg")
    shape = dict(M=256, N=256, K=77)
    ptx = emit_module(op.build(shape, ARCH))
    assert f"setmaxnreg.dec.sync.aligned.u32 {LDG_PRODUCER_REGS}" in ptx
    assert "cp.async.ca.shared.global" in ptx and "cp.async.wait_group 1" in ptx
    pad = TcMatmul("bf16", "bf16", TcMatmulSchedule(), k_pack="pad")
    # side words: 4 bytes per tile row of A and B per stage
    assert op.launch(shape).shared_bytes - pad.launch(shape).shared_bytes == 4 * 4 * (128 + 256)


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
@pytest.mark.parametrize("M, N, K", [(4096, 4096, 4093), (4095, 4097, 4093), (8192, 8192, 8189)])
def test_ptxas_no_spills_and_copies_without_registers(dtype, M, N, K):
    """No spills; the tile is copied by LDGSTS (cp.async), one row per instruction."""
    op = TcMatmul(dtype, "bf16" if dtype != "tf32" else "f32", k_pack="ldg")
    shape = op.shape(M=M, N=N, K=K)
    assert op.ldg(shape) == (True, True)
    r = toolchain.assemble(emit_module(op.build(shape, ARCH)), ARCH)
    res = r.resources["tc_matmul"]
    assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
    sass = toolchain.disassemble(r.cubin)
    # (128 + 256) rows / 4 warps per k-block, plain and with src-sizes: at least 2 x 96
    assert sass.count("LDGSTS") >= 2 * 96 and "LDG.E" not in sass


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
    op = TcMatmul("bf16", "f32", k_pack="ldg", **kw)
    shape = op.shape(M=256, N=384, K=301)
    assert sum(op.ldg(shape)) == 1
    _assert_float64(op, shape, _gpu_arrays(op, shape, 11))
