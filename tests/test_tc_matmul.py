"""The sm_90a tensor-core GEMM: schedule validation, emission through ptxas, SASS, the operator's
reference and tolerance, and (GPU) results at small odd shapes."""
import dataclasses
import re

import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ir import types as T
from ptxgen.ops.tc_matmul import TcMatmul, bf16_bits, bf16_values
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

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
    (dict(epilogue="tma"), "C tile"),                      # 4 stages + C exceed shared memory
    (dict(epilogue="tma", stages=3, BN=128, wgmma_n=32), "wgmma_n=32"),
    (dict(epilogue="smem"), "epilogue='smem'"),
    (dict(cluster_m=4), "cluster_m=4"),
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


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("dtype, out", [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"),
                                        ("tf32", "f32")])
@pytest.mark.parametrize("shape", [dict(M=4096, N=4096, K=4096), dict(M=67, N=45, K=40)])
def test_emits_ptxas_clean_with_hgmma_and_no_spills(dtype, out, shape):
    op = TcMatmul(dtype, out)
    ptx, asm, mix = _assembled(op, shape)
    k = {"bf16": 16, "f16": 16, "tf32": 8}[dtype]
    assert ".target sm_90a" in ptx and f"k{k}.f32.{dtype}.{dtype}" in ptx
    r = asm.resources["tc_matmul"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    s = op.schedule_for(op.shape(**shape))
    hgmma = sum(v for k_, v in mix.items() if k_.startswith("HGMMA"))
    assert hgmma == s.BK // k * s.m_blocks * s.n_blocks, mix
    assert mix.get("UTMALDG.2D") == 2 and "LDL" not in mix and "STL" not in mix, mix
    # the register split took effect (ptxas warns C7508 and drops it otherwise)
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL" in mix and "C7508" not in asm.log


@pytest.mark.needs_nvdisasm
def test_cluster_multicast_assembles():
    s = TcMatmulSchedule(cluster_m=2)
    ptx, asm, mix = _assembled(TcMatmul("bf16", "bf16", s), dict(M=4095, N=4097, K=4096))
    assert ".reqnctapercluster 2, 1, 1" in ptx and "multicast::cluster" in ptx
    assert asm.resources["tc_matmul"].spills == 0
    assert mix.get("UTMALDG.2D.MULTICAST") == 1 and mix.get("UTMALDG.2D") == 1, mix
    # slot releases reach both CTAs with cta-scope arrives: no GPU-wide fence in the main loop
    assert mix.get("MEMBAR.ALL.GPU", 0) <= 2, mix          # the two cluster barriers only


@pytest.mark.needs_nvdisasm
def test_tma_epilogue_stores_through_shared_memory():
    s = TcMatmulSchedule(epilogue="tma", stages=3, cluster_m=2, inflight=0)
    op = TcMatmul("bf16", "bf16", s)
    ptx, asm, mix = _assembled(op, dict(M=4095, N=4096, K=4096))
    assert "C_map" in ptx and asm.resources["tc_matmul"].spills == 0
    # 16 stmatrix.x4 per thread (64 x 256 bf16 per consumer), 4 TMA stores of 64 columns
    assert mix.get("STSM.16.M88.4") == 16 and mix.get("UTMASTG.2D") == 4, mix
    assert not any(k.startswith("STG") for k in mix), mix
    assert op.launch(op.shape(M=4095, N=4096, K=4096)).shared_bytes == \
        s.shared_bytes(2, "tile")
    # an f32 C: its 128 KB tile does not fit beside 3 stages: direct stores, no C map
    o = TcMatmul("bf16", "f32", s)
    ptx, _, mix = _assembled(o, dict(M=64, N=4096, K=64))
    assert "C_map" not in ptx and "UTMASTG.2D" not in mix
    assert len(o.kernel_args(o.shape(M=64, N=4096, K=64), o.make_inputs(
        o.shape(M=64, N=4096, K=64), np.random.default_rng()))) == 6


@pytest.mark.needs_nvdisasm
def test_f32_c_staged_with_two_stages():
    """With 2 stages the f32 tile fits: 64 8-byte shared stores per thread (128x256 tile, two
    consumers), 8 TMA stores of 32-column boxes."""
    from ptxgen.schedule.matmul import target_limits
    limit = target_limits("sm_90")["max_shared_per_block"]
    s = TcMatmulSchedule(epilogue="tma", stages=2).for_dtype("tf32")
    op = TcMatmul("tf32", "f32", s)
    ptx, asm, mix = _assembled(op, dict(M=4096, N=4096, K=4096))
    assert s.c_store("f32", 4096, 4096) == "tile" and "C_map" in ptx
    assert mix.get("STS.64") == 64 and mix.get("UTMASTG.2D") == 8, mix
    assert asm.resources["tc_matmul"].spills == 0
    assert op.launch(op.shape(M=4096, N=4096, K=4096)).shared_bytes == \
        s.shared_bytes(4, "tile", "f32") <= limit


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("schedule", [TcMatmulSchedule(epilogue="tma", stages=3),
                                      TcMatmulSchedule(epilogue="rows", stages=3),
                                      TcMatmulSchedule(BM=256, BN=128, wgmma_n=128,
                                                       epilogue="tma", stages=3, cluster_m=2,
                                                       inflight=0)])
def test_c_rows_not_16_byte_aligned_are_stored_by_rows_from_shared_memory(schedule):
    """N = 4097: C's rows are 2-byte aligned. TMA stores of row pieces starting off a 16-byte
    boundary were an illegal instruction on the H200 (2026-12-01), so "tma" and "rows" stage
    C by stmatrix as "tile" does and copy it with st.global ("rows_st"): no tensor map for C,
    no TMA store; 4-byte pair stores (STG.E) and the lone 2-byte elements of shifted rows
    (STG.E.U16), no spills, only warp barriers after the staging."""
    op = TcMatmul("bf16", "bf16", schedule)
    shape = op.shape(M=4095, N=4097, K=4096)
    ptx, asm, mix = _assembled(op, shape)
    assert schedule.c_store("bf16", 4095, 4097) == "rows_st" and "C_map" not in ptx
    r = asm.resources["tc_matmul"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    assert not mix.get("UTMASTG.2D") and mix.get("STSM.16.M88.4") == 16, mix
    assert mix.get("STG.E") and mix.get("STG.E.U16") and mix.get("LDS.U16"), mix
    assert "LDL" not in mix and "STL" not in mix and "bar.warp.sync" in ptx
    # no CTA barrier beyond those of the fragment-store kernel (the mbarrier setup)
    _, _, frag = _assembled(TcMatmul("bf16", "bf16", dataclasses.replace(
        schedule, epilogue="direct")), shape)
    assert mix.get("BAR.SYNC.DEFER_BLOCKING") == frag.get("BAR.SYNC.DEFER_BLOCKING"), mix
    assert len(op.kernel_args(shape, op.make_inputs(shape, np.random.default_rng()))) == \
        len(TcMatmul("bf16", "bf16", TcMatmulSchedule(stages=3)).kernel_args(
            shape, op.make_inputs(shape, np.random.default_rng())))


@pytest.mark.needs_nvdisasm
def test_f32_c_rows_st_uses_8_byte_stores():
    s = TcMatmulSchedule(epilogue="tma", stages=2)
    op = TcMatmul("bf16", "f32", s)
    ptx, asm, mix = _assembled(op, dict(M=4096, N=4097, K=4096))
    assert s.c_store("f32", 4096, 4097) == "rows_st"
    assert asm.resources["tc_matmul"].spills == 0
    assert mix.get("STS.64") == 64 and mix.get("STG.E.64") and mix.get("LDS.64"), mix
    assert not mix.get("UTMASTG.2D"), mix


@pytest.mark.needs_nvdisasm
def test_f16_and_narrow_tiles_assemble():
    s = TcMatmulSchedule(BM=128, BN=128, wgmma_n=128, stages=6, group_m=0)
    _, asm, mix = _assembled(TcMatmul("f16", "f32", s), dict(M=300, N=200, K=64))
    assert asm.resources["tc_matmul"].spills == 0
    assert any(k.startswith("HGMMA") for k in mix), mix


@pytest.mark.needs_nvdisasm
def test_row_major_b_assembles_with_transposed_hgmma():
    s = TcMatmulSchedule(cluster_m=2, inflight=0, epilogue="tma", stages=3)
    op = TcMatmul("bf16", "bf16", s, b_layout="row")
    ptx, asm, mix = _assembled(op, dict(M=4096, N=4096, K=4096))
    assert asm.resources["tc_matmul"].spills == 0
    # trans-b immediate 1 on every wgmma; B loaded in 128/64 = 2 multicast boxes per CTA
    assert ptx.count(", 1, 1, 0, 1;") == ptx.count("wgmma.mma_async") == 4
    assert mix.get("UTMALDG.2D.MULTICAST") == 2 and mix.get("HGMMA.64") == 4, mix


def test_auto_schedule_by_tiles_per_sm():
    from ptxgen.ops.tc_matmul import default_tc_schedule
    small = default_tc_schedule(dict(M=128, N=8192, K=8192))          # 32 tiles
    mid = default_tc_schedule(dict(M=4096, N=4096, K=4096))           # 512 tiles
    big = default_tc_schedule(dict(M=8192, N=8192, K=8192))           # 2048 tiles
    assert (small.BN, small.cluster_m) == (128, 1)
    assert (mid.epilogue, mid.cluster_m) == ("tma", 1)
    assert (big.epilogue, big.cluster_m, big.inflight) == ("tma", 2, 0)
    for s in (small, mid, big):
        s.validate(ARCH)
    assert TcMatmul().schedule_for(dict(M=8192, N=8192, K=8192)) == big
    # a ragged N: 544 tiles of 128x256 (5 rounds of 132 SMs), 528 of 256x128 (4 rounds)
    odd = default_tc_schedule(dict(M=4095, N=4097, K=4093))
    assert (odd.BM, odd.BN, odd.wgmma_n, odd.epilogue) == (256, 128, 128, "tma")
    odd.validate(ARCH)


def test_skinny_bf16_shapes_default_to_split_k():
    """defaults.json tc_matmul.schedule skinny_bf16: at most 64 rows, K >= 4096, the split
    units within one wave; not f16, not 128 rows, not a short K."""
    from ptxgen.ops.tc_matmul import default_tc_schedule
    skinny = default_tc_schedule(dict(M=16, N=8192, K=8192), dtype="bf16")
    assert (skinny.BM, skinny.BN, skinny.split_k, skinny.consumers) == (64, 128, 2, 1)
    skinny.validate(ARCH)
    assert default_tc_schedule(dict(M=64, N=8192, K=8192), dtype="bf16") == skinny
    for shape, dtype in ((dict(M=16, N=8192, K=8192), "f16"), (dict(M=128, N=8192, K=8192),
                         "bf16"), (dict(M=16, N=8192, K=1024), "bf16"),
                         (dict(M=16, N=32768, K=8192), "bf16")):        # 512 units > 132 SMs
        assert default_tc_schedule(shape, dtype=dtype).split_k == 1
    assert TcMatmul("bf16", "bf16").schedule_for(dict(M=16, N=8192, K=8192)) == skinny


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


def test_tf32_tolerance_covers_input_truncation_only():
    """tf32 inputs are f32 arrays; the bound allows each input to lose its low 13 bits (what
    the tensor cores ignore) and not much more: with positive inputs the truncation errors all
    point one way, and losing 15 bits exceeds it."""
    rng = np.random.default_rng()
    op = TcMatmul("tf32", "f32")
    shape = op.shape(M=37, N=29, K=48)
    arrays = {k: np.abs(v) for k, v in op.make_inputs(shape, rng).items()}
    assert arrays["A"].dtype == np.float32 and op.tiles(shape) == 1
    ref = op.reference(shape, arrays)

    def truncated_product(bits):
        mask = np.uint32((0xFFFFFFFF << bits) & 0xFFFFFFFF)
        a, bt = ((arrays[k].view(np.uint32) & mask).view(np.float32).astype(np.float64)
                 for k in ("A", "Bt"))
        return (a @ bt.T).astype(np.float32)
    arrays["C"] = truncated_product(13)                  # tf32 inputs, exact sums
    assert op.check(shape, arrays, ref)[0]
    arrays["C"] = truncated_product(15)                  # 8 fraction bits: too coarse
    assert not op.check(shape, arrays, ref)[0]


# -- on the GPU ------------------------------------------------------------------------------
def _gpu_run(op, shape, rng):
    return op.check(shape, _gpu_arrays(op, shape, rng))


def _gpu_arrays(op, shape, rng):
    """All of op's steps (pads included) on the GPU, on device copies of fresh inputs."""
    from numba import cuda
    from ptxgen.runtime import bound_steps, load_steps
    arrays = dict(op.make_inputs(shape, rng), **op.workspace_arrays(shape, ARCH))
    dev = {k: cuda.to_device(v) for k, v in arrays.items()}
    kernels = load_steps(op, shape, op.build(shape, ARCH), ARCH)
    bound_steps(op, shape, kernels, dev, ARCH)()
    arrays["C"] = dev["C"].copy_to_host()
    return arrays


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out", [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"),
                                        ("f16", "bf16"), ("tf32", "f32")])
@pytest.mark.parametrize("M, N, K", [(67, 45, 40), (129, 257, 72), (300, 520, 8), (70, 131, 41),
                                     (5, 300, 3)])
def test_gpu_small_odd_shapes(dtype, out, M, N, K):
    op = TcMatmul(dtype, out)
    ok, worst = _gpu_run(op, op.shape(M=M, N=N, K=K), np.random.default_rng())
    assert ok, worst


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16", "tf32"])
def test_gpu_and_emulator_agree_at_a_small_odd_shape(dtype):
    """Same inputs on the GPU and the emulator: both within the float64 bound, and within 8 f32
    ulps of sum |a||b| of each other (a tenth of that bound at K=40). Not bit for bit: on the
    H200 on 2026-12-01, 94 % of the elements were bit-equal for bf16, 48-53 % for f16 and tf32,
    the rest 1-2 ulps apart (docs/EMULATOR.md): the emulator's tensor-core summation model,
    fitted on single wgmmas, does not yet reproduce the chain of k-steps."""
    from ptxgen.emu import run_operator
    from ptxgen.ops.tc_matmul import F32_ULP
    op = TcMatmul(dtype, "f32")
    shape = op.shape(M=67, N=45, K=40)
    seed = int(np.random.default_rng().integers(2 ** 31))
    on_gpu = _gpu_arrays(op, shape, np.random.default_rng(seed))
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    run_operator(op, shape, arrays, ARCH)
    assert np.array_equal(on_gpu["A"], arrays["A"])                 # the same inputs
    assert op.check(shape, on_gpu)[0] and op.check(shape, arrays)[0]
    a, bt = op.values(arrays["A"], dtype), op.values(arrays["Bt"], dtype)
    close = 8 * F32_ULP * (np.abs(a) @ np.abs(bt).T)
    assert np.all(np.abs(on_gpu["C"].astype(np.float64) - arrays["C"]) <= close)


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", [TcMatmulSchedule(inflight=0, persistent=False),
                                      TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=3),
                                      TcMatmulSchedule(cluster_m=2),
                                      TcMatmulSchedule(cluster_m=2, persistent=False,
                                                       group_m=0),
                                      TcMatmulSchedule(cluster_m=2, epilogue="tma", stages=3,
                                                       inflight=0),
                                      TcMatmulSchedule(epilogue="tma", stages=3),
                                      TcMatmulSchedule(epilogue="tma", stages=2)])
def test_gpu_schedule_variants(schedule):
    # 616: 2-D TMA-stored C; 611 with tma: row by row (f32 C only with 2 stages: it fits)
    for out, N in (("f32", 611), ("f32", 616), ("bf16", 611), ("bf16", 616)):
        op = TcMatmul("bf16", out, schedule)
        ok, worst = _gpu_run(op, op.shape(M=333, N=N, K=200), np.random.default_rng())
        assert ok, (out, N, worst)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, out", [("bf16", "bf16"), ("f16", "bf16"), ("bf16", "f32")])
@pytest.mark.parametrize("schedule", [TcMatmulSchedule(epilogue="tma", stages=3),
                                      TcMatmulSchedule(epilogue="tma", stages=2),
                                      TcMatmulSchedule(BM=256, BN=128, wgmma_n=128,
                                                       epilogue="tma", stages=3),
                                      TcMatmulSchedule(BM=256, BN=128, wgmma_n=128,
                                                       epilogue="tma", stages=3, cluster_m=2,
                                                       inflight=0)])
def test_gpu_rows_st_at_odd_n(dtype, out, schedule):
    """C rows not 16-byte aligned stored by the threads from the staged tile ("rows_st"):
    against float64 and bit for bit against the fragment stores of the same schedule on the
    same inputs (N odd: shifted rows; N = 1030: even, 4-byte aligned rows)."""
    for M, N, K in ((333, 611, 200), (1000, 4097, 136), (517, 1030, 64)):
        op = TcMatmul(dtype, out, schedule)
        shape = op.shape(M=M, N=N, K=K)
        kind = schedule.c_store(out, M, N)
        if kind is None:                      # an f32 C tile that does not fit: fragments
            continue
        assert kind == "rows_st"
        seed = int(np.random.default_rng().integers(2 ** 31))
        got = _gpu_arrays(op, shape, np.random.default_rng(seed))
        ok, worst = op.check(shape, got)
        assert ok, (M, N, K, worst)
        frag = TcMatmul(dtype, out, dataclasses.replace(schedule, epilogue="direct"))
        want = _gpu_arrays(frag, shape, np.random.default_rng(seed))
        assert np.array_equal(got["C"].view(np.uint8), want["C"].view(np.uint8)), (M, N, K)


@pytest.mark.gpu
@pytest.mark.parametrize("N", [612, 611])
def test_gpu_tf32_staged_f32_c(N):
    op = TcMatmul("tf32", "f32", TcMatmulSchedule(epilogue="tma", stages=2).for_dtype("tf32"))
    ok, worst = _gpu_run(op, op.shape(M=333, N=N, K=201), np.random.default_rng())
    assert ok, worst


@pytest.mark.gpu
@pytest.mark.parametrize("a_layout, b_layout", [("row", "row"), ("col", "col"), ("col", "row")])
@pytest.mark.parametrize("schedule", ["auto", TcMatmulSchedule(BM=256, BN=128, wgmma_n=128,
                                                               epilogue="tma", stages=3),
                                      TcMatmulSchedule(cluster_m=2, epilogue="tma", stages=3,
                                                       inflight=0)])
def test_gpu_operand_layouts(a_layout, b_layout, schedule):
    """Column-major A / row-major B through wgmma's transpose bits against float64; odd M, N
    or K pad the operand whose stored rows are not 16-byte aligned; N=611: C by rows."""
    for M, N, K in ((333, 611, 200), (336, 616, 201)):
        op = TcMatmul("bf16", "bf16", schedule, a_layout=a_layout, b_layout=b_layout)
        ok, worst = _gpu_run(op, op.shape(M=M, N=N, K=K), np.random.default_rng())
        assert ok, (M, N, K, worst)


# -- K not a multiple of 8: operands padded first ------------------------------------------------
@pytest.mark.parametrize("rows, cols", [(5, 41), (3, 8), (17, 1)])
def test_pad_copy_b16_copies_and_zero_fills_on_emulator(rows, cols):
    from ptxgen.emu import emulate
    from ptxgen.ir import Module
    from ptxgen.ops import pack
    m = pack.add_pad_copy(Module(target="sm_90"), T.b16)
    cols8 = pack.padded(cols, 8)
    src = np.random.default_rng().integers(1, 2 ** 16, size=(rows, cols), dtype=np.uint16)
    dst = np.full((rows, cols8), 0xFFFF, dtype=np.uint16)
    L = pack.pad_launch(rows, cols8, 8)
    emulate(m, pack.KERNEL16, L.grid, L.block, *pack.pad_args(rows, cols, rows, cols8, src, dst, 8))
    assert np.array_equal(dst[:, :cols], src) and not dst[:, cols:].any()


def test_k_not_multiple_of_8_pads_operands_in_steps():
    op = TcMatmul(k_pack="pad")
    shape = op.shape(M=67, N=45, K=41)
    m = op.build(shape, ARCH)
    steps = op.steps(shape, ARCH)
    assert [s.kernel for s in steps] == ["pad_copy_b16", "pad_copy_b16", "tc_matmul"]
    ws = op.workspace(shape, ARCH)
    assert ws["A_packed"][0] == (67, 48) and ws["Bt_packed"][0] == (45, 48)
    arrays = dict(op.make_inputs(shape, np.random.default_rng()), **op.workspace_arrays(shape))
    maps = steps[-1].args(arrays)[:2]
    assert maps[0].array is arrays["A_packed"] and maps[1].array is arrays["Bt_packed"]
    assert {k.name for k in m.kernels} == {"tc_matmul", "pad_copy_b16"}
    assert not op.packs(op.shape(M=67, N=45, K=40))


def test_cli_emit_matmul_bf16_sm_90a(cli):
    rc, out, err = cli("emit", "matmul", "--dtype", "bf16", "--arch", "sm_90a", "--M", "67",
                       "--N", "45", "--K", "40")
    assert rc == 0, err
    assert ".target sm_90a" in out and \
        re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16", out)
    rc, out, err = cli("emit", "saxpy", "--dtype", "bf16", "--arch", "sm_90a")
    assert rc != 0 and len(err.strip().splitlines()) == 1 and "--dtype" in err
    # sm_90 without the 'a' has no wgmma: the sm_80 path (mma.sync; tests/test_mma_matmul.py)
    rc, out, err = cli("emit", "matmul", "--dtype", "bf16", "--arch", "sm_90")
    assert rc == 0 and "mma.sync.aligned.m16n8k16.row.col.f32.bf16" in out and "wgmma" not in out


@pytest.mark.parametrize("array, kw, words", [
    (np.zeros((8, 41), np.uint16), dict(box_rows=64, box_cols=64), "multiple of 16"),
    (np.zeros((8, 64), np.uint16), dict(box_rows=512, box_cols=64), "exceeds 256"),
    (np.zeros((8, 128), np.uint16), dict(box_rows=64, box_cols=128), "128-byte swizzle"),
    (np.zeros((8, 64), np.float32), dict(box_rows=64, box_cols=64), "elements are 4 bytes"),
    (np.zeros((8, 64), np.uint16), dict(box_rows=64, box_cols=64, swizzle=96), "swizzle"),
])
def test_tensor_map_refusals_are_one_line(array, kw, words):
    from ptxgen.errors import LaunchError
    from ptxgen.arrays import TiledMap
    with pytest.raises(LaunchError) as e:
        TiledMap(array, "bf16", **kw).check(0x10000)
    assert "\n" not in str(e.value) and words in str(e.value), str(e.value)


def test_tensor_map_argument_is_checked_against_the_parameter():
    from ptxgen.runtime.driver import validate_launch
    from ptxgen.arrays import TiledMap
    op = TcMatmul()
    shape = op.shape(M=64, N=64, K=64)
    k = op.build(shape, ARCH).kernel("tc_matmul")
    arrays = op.make_inputs(shape, np.random.default_rng())
    args = op.kernel_args(shape, arrays)
    assert isinstance(args[0], TiledMap)
    block = op.launch(shape).block
    validate_launch(k.name, k.params, (1,), block, args, 1000, 200_000, k.directives)
    with pytest.raises(PtxgenError, match="A_map is a 128-byte array"):
        validate_launch(k.name, k.params, (1,), block, [arrays["A"]] + args[1:], 1000,
                        200_000, k.directives)
