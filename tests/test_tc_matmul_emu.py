"""The sm_90a tensor-core GEMM on the CPU emulator: the whole kernel (TMA loads through the
operator's tensor maps, the mbarrier ring between a setmaxnreg producer warpgroup and wgmma
consumer warpgroups, direct and stmatrix + TMA-store epilogues) against the float64 reference at
shapes that are not tile multiples."""
import dataclasses

import numpy as np
import pytest

from ptxgen.arrays import TiledMap
from ptxgen.emu import emulate, run_operator
from ptxgen.errors import PtxgenError
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

ARCH = "sm_90a"
# one consumer warpgroup, 64 x 64 tiles and a 2-slot ring: small enough that a few CTAs walk
# several tiles each, so slots and barrier phases wrap inside a tile and across tiles
SMALL = TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=2, group_m=2)


def _emulated(op, shape, sm_count=None, rng=None):
    """op's steps on the emulator for fresh inputs (sm_count: the persistent grid's CTAs)."""
    arrays = op.make_inputs(shape, rng or np.random.default_rng())
    if sm_count is None:
        run_operator(op, shape, arrays, ARCH)
        return arrays
    m = op.build(shape, ARCH)
    arrays.update(op.workspace_arrays(shape, ARCH))
    for step in op.steps(shape, ARCH, sm_count):
        L = step.launch
        emulate(m, step.kernel, L.grid, L.block, *step.args(arrays), shared_bytes=L.shared_bytes)
    return arrays


def _assert_matches_float64(op, shape, arrays):
    """C against float64 of the exact 16-bit inputs, within the operator's bound per element
    (C starts as NaN, so an element never written fails)."""
    a, b = op.matrices(arrays)
    want = a @ b
    got = op.values(arrays["C"], op.out)
    bound = op.error_bound(shape, np.abs(a) @ np.abs(b))
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), float(np.max(np.abs(got - want) / bound))


@pytest.mark.parametrize("dtype", ["bf16", "f16", "tf32"])
@pytest.mark.parametrize("out", ["f32", "bf16"])
@pytest.mark.parametrize("M, N, K", [(67, 45, 40), (70, 131, 41), (5, 30, 3)])
def test_default_schedule_at_odd_shapes(dtype, out, M, N, K):
    op = TcMatmul(dtype, out)
    shape = op.shape(M=M, N=N, K=K)
    _assert_matches_float64(op, shape, _emulated(op, shape))


@pytest.mark.parametrize("schedule", [SMALL, TcMatmulSchedule(
    BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, inflight=0, group_m=0, epilogue="tma")])
@pytest.mark.parametrize("out, N", [("f32", 150), ("bf16", 152)])     # 152: TMA-stored C
def test_persistent_ctas_walk_several_tiles_through_the_ring(schedule, out, N):
    op = TcMatmul("bf16", out, schedule)
    shape = op.shape(M=190, N=N, K=300)
    assert op.tiles(shape) == 9 and op.launch(shape, 2).grid == (2, 1, 1)
    _assert_matches_float64(op, shape, _emulated(op, shape, sm_count=2))


def test_two_consumer_warpgroups_and_tma_epilogue():
    op = TcMatmul("f16", "bf16", TcMatmulSchedule(BN=128, wgmma_n=128, stages=2,
                                                  epilogue="tma"))
    shape = op.shape(M=133, N=136, K=72)
    _assert_matches_float64(op, shape, _emulated(op, shape))


def test_a_wrong_operand_type_is_a_one_line_error_on_the_emulator():
    op = TcMatmul("bf16", "f32")
    shape = op.shape(M=67, N=45, K=40)
    arrays = op.make_inputs(shape, np.random.default_rng())
    m = op.build(shape, ARCH)
    args = op.kernel_args(shape, arrays)
    args[0] = TiledMap(arrays["A"].astype(np.float32), "bf16", 128, 64)
    L = op.launch(shape)
    with pytest.raises(PtxgenError) as e:
        emulate(m, "tc_matmul", L.grid, L.block, *args, shared_bytes=L.shared_bytes,
                verify=False)
    assert "\n" not in str(e.value) and "elements are 4 bytes" in str(e.value)


def test_engine_auto_takes_the_interpreter_for_clusters():
    """The native engine refuses a kernel of 2-CTA clusters before running it (a
    NativeUnsupported, which names the interpreter in the caller's words); engine 'auto' then
    runs it on the interpreter, as `ptxgen run --backend emu` does at M=1000000."""
    from ptxgen.errors import NativeUnsupported, cli_text
    op = TcMatmul("bf16", "f32", TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1,
                                                  stages=2, cluster_m=2, inflight=0))
    shape = op.shape(M=190, N=45, K=40)
    assert op.launch(shape).grid[0] % 2 == 0
    arrays = op.make_inputs(shape, np.random.default_rng())
    assert run_operator(op, shape, arrays, ARCH, check="off", engine="auto").engine == "interp"
    _assert_matches_float64(op, shape, arrays)
    with pytest.raises(NativeUnsupported) as e:
        run_operator(op, shape, op.make_inputs(shape, np.random.default_rng()), ARCH,
                     check="off", engine="native")
    assert "use engine='interp'" in str(e.value) and "--" not in str(e.value)
    assert cli_text(e.value).endswith("use --engine interp")


def test_cli_runs_the_gemm_on_the_emulator(cli):
    rc, out, err = cli("run", "matmul", "--dtype", "bf16", "--M", "67", "--N", "45", "--K", "40",
                       "--backend", "emu", "--check")
    assert rc == 0, err
    assert "CPU emulator" in out and "check: PASS" in out
    rc, out, err = cli("run", "matmul", "--dtype", "tf32", "--M", "67", "--N", "45", "--K", "37",
                       "--backend", "emu", "--check")
    assert rc == 0 and "check: PASS" in out, err


@pytest.mark.parametrize("schedule, M, N, K, kind", [
    # odd N: stored by the threads from the staged tile (TMA row pieces off 16 bytes fault
    # on the GPU)
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, group_m=2,
                      epilogue="tma"), 190, 151, 75, "rows_st"),
    # "rows" at an aligned N, edge rows past M clipped by the flat map's end
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, group_m=0,
                      epilogue="rows"), 190, 152, 64, "rows"),
    # 256x128 tiles (two consumers of 128 rows, two wgmma M blocks each), odd N and even N
    (TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=2, epilogue="tma"), 300, 141, 70,
     "rows_st"),
    (TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=2, epilogue="tma"), 300, 144, 70,
     "tile"),
])
def test_rows_epilogue_and_turned_tiles(schedule, M, N, K, kind):
    op = TcMatmul("bf16", "bf16", schedule)
    shape = op.shape(M=M, N=N, K=K)
    assert schedule.c_store("bf16", M, N) == kind
    _assert_matches_float64(op, shape, _emulated(op, shape, sm_count=2))


@pytest.mark.parametrize("dtype", ["tf32", "bf16"])
@pytest.mark.parametrize("N, kind", [(152, "tile"), (151, "rows_st")])
def test_staged_f32_c(dtype, N, kind):
    """An f32 C through shared memory (8-byte stores into 32-column swizzled boxes), stored
    by 2-D TMA boxes; at odd N by the threads, row by row."""
    s = TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, group_m=2,
                         epilogue="tma").for_dtype(dtype)
    op = TcMatmul(dtype, "f32", s)
    shape = op.shape(M=190, N=N, K=75)
    assert s.c_store("f32", 190, N) == kind
    _assert_matches_float64(op, shape, _emulated(op, shape, sm_count=2))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("a_layout, b_layout", [("row", "row"), ("col", "col"), ("col", "row")])
@pytest.mark.parametrize("schedule, M, N, K", [
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=2, group_m=2), 67, 45, 40),
    (TcMatmulSchedule(BN=128, wgmma_n=128, stages=2, epilogue="tma"), 190, 152, 75),
])
def test_transposed_operand_layouts(dtype, a_layout, b_layout, schedule, M, N, K):
    """Column-major A (At, K x M) and row-major B (K x N): M-/N-major boxes of 64 and wgmma's
    transpose bits; odd M, N or K pad the operand whose stored rows are not 16-byte aligned."""
    op = TcMatmul(dtype, "bf16", schedule, a_layout=a_layout, b_layout=b_layout)
    shape = op.shape(M=M, N=N, K=K)
    arrays = _emulated(op, shape, sm_count=2)
    assert set(op.inputs) <= set(arrays)
    _assert_matches_float64(op, shape, arrays)


def test_tf32_refuses_transposed_layouts():
    with pytest.raises(PtxgenError, match="tf32 wgmma reads K-major operands only.*b_layout"):
        TcMatmul("tf32", "f32", b_layout="row")
    with pytest.raises(PtxgenError, match="a_layout must be 'row' or 'col'"):
        TcMatmul("bf16", "f32", a_layout="rows")


ROWS_ST = [
    # one consumer, 64x64 tiles: several tiles per CTA, edge rows and columns
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, group_m=2,
                      epilogue="tma"), 190, 151, 75),
    # N even but rows not 16-byte aligned: no row is shifted
    (TcMatmulSchedule(BM=64, BN=64, wgmma_n=64, consumers=1, stages=3, group_m=2,
                      epilogue="tma"), 190, 150, 40),
    # two consumers of 64 rows, 128 columns (two pair steps per row)
    (TcMatmulSchedule(BN=128, wgmma_n=128, stages=2, epilogue="tma"), 133, 259, 72),
    # 256x128 tiles: two wgmma M blocks per consumer
    (TcMatmulSchedule(BM=256, BN=128, wgmma_n=128, stages=2, epilogue="tma"), 300, 141, 70),
    # 128x256 tiles in 2-CTA clusters, "rows" asked for
    (TcMatmulSchedule(stages=2, cluster_m=2, inflight=0, epilogue="rows"), 300, 263, 64),
]


@pytest.mark.parametrize("dtype, out", [("bf16", "bf16"), ("f16", "bf16"), ("bf16", "f32"),
                                        ("tf32", "f32")])
@pytest.mark.parametrize("schedule, M, N, K", ROWS_ST)
def test_rows_st_matches_float64_and_the_fragment_stores(dtype, out, schedule, M, N, K):
    """C rows not 16-byte aligned ("rows_st"): the staged tile copied to C by the threads
    (4-byte bf16 / 8-byte f32 pairs, lone first and last elements of shifted rows), under the
    emulator's racecheck; C within the float64 bound and bit for bit what the fragment
    stores of the same schedule write."""
    s = schedule.for_dtype(dtype)
    if s.c_store(out, M, N) is None:
        pytest.skip(f"{s}: an f32 C tile does not fit beside the stages")
    assert s.c_store(out, M, N) == "rows_st"
    op = TcMatmul(dtype, out, s)
    shape = op.shape(M=M, N=N, K=K)
    seed = int(np.random.default_rng().integers(2 ** 31))
    got = _emulated(op, shape, sm_count=2, rng=np.random.default_rng(seed))
    _assert_matches_float64(op, shape, got)
    frag = TcMatmul(dtype, out, dataclasses.replace(s, epilogue="direct"))
    assert frag.schedule_for(shape).c_store(out, M, N) is None
    want = _emulated(frag, shape, sm_count=2, rng=np.random.default_rng(seed))
    assert np.array_equal(got["A"], want["A"])
    assert np.array_equal(got["C"].view(np.uint8), want["C"].view(np.uint8))


def test_rows_st_without_the_warp_barrier_is_a_race(monkeypatch):
    """Each warp reads back only the rows it staged, so a warp barrier orders them: without
    it the emulator's racecheck reports the read."""
    from ptxgen.lower import c_row_stores
    calls = []
    sync = c_row_stores.RowStores._warp_sync

    def every_other(self):
        calls.append(1)
        if len(calls) % 2:
            sync(self)
    monkeypatch.setattr(c_row_stores.RowStores, "_warp_sync", every_other)
    op = TcMatmul("bf16", "bf16", ROWS_ST[0][0])
    with pytest.raises(PtxgenError, match="race"):
        _emulated(op, op.shape(M=70, N=67, K=16))
