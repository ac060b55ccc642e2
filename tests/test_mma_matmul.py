"""The tensor-core matmul's sm_80 path (mma.sync + ldmatrix + cp.async): schedule validation, the
operator's choice of path by target, the emulator against float64 at odd shapes (several tiles,
ragged K steps, padded K), ptxas resources and SASS for sm_80 and sm_90, and (GPU) results."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.matmul import Matmul
from ptxgen.ops.mma_matmul import MmaSyncMatmulPath
from ptxgen.ops.tc_matmul import TcMatmul, WgmmaMatmulPath
from ptxgen.ops.tensor_path import uses_mma_sync
from ptxgen.schedule.mma_matmul import MmaMatmulSchedule, default_mma_schedule
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

# 2 warps, 32 x 32 tiles: small enough that the odd shapes below span several CTAs in both
# directions and several K steps (the pipeline's slots wrap), and the emulator stays quick
SMALL = MmaMatmulSchedule(BM=32, BN=32, warps_m=2, warps_n=1, stages=2, group_m=2)
THREE = MmaMatmulSchedule(BM=32, BN=64, warps_m=1, warps_n=2, stages=3, group_m=0)


@pytest.mark.parametrize("fields, words", [
    (dict(BK=32), "BK=32"),
    (dict(BM=96), "BM=96"),
    (dict(warps_n=3), "warps_n=3"),
    (dict(BN=32, warps_n=4), "pairs"),
    (dict(stages=1), "stages=1"),
    (dict(stages=5), "shared memory"),
    (dict(BM=256, BN=256, warps_m=2, warps_n=2, stages=2), "accumulators"),
    (dict(group_m=-1), "group_m=-1"),
])
def test_schedule_errors_are_one_line(fields, words):
    with pytest.raises(ScheduleError) as e:
        MmaMatmulSchedule(**fields).validate("sm_80")
    msg = str(e.value)
    assert "\n" not in msg and words in msg, msg


def test_paths_by_target():
    assert [uses_mma_sync(a) for a in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")] == \
        [True, True, True, True, False]
    assert uses_mma_sync("sm_90a", SMALL) and not uses_mma_sync("sm_80", TcMatmulSchedule())
    # the 99 KB parts get 128 x 128 tiles; sm_80 and sm_90 the 144 KB 128 x 256 ones
    assert default_mma_schedule("sm_86").BN == 128 and default_mma_schedule("sm_80").BN == 256
    big = dict(M=4096, N=4096, K=4096)
    for arch in ("sm_80", "sm_86", "sm_89", "sm_90"):
        default_mma_schedule(arch, big).validate(arch)
    op = TcMatmul("bf16", "f32")
    shape = op.shape(M=4096, N=4096, K=4096)
    assert "mma.sync.aligned.m16n8k16" in emit_module(op.build(shape, "sm_80"), "sm_80")
    assert op.launch(shape).block == (256, 1, 1) and len(op.kernel_args(
        shape, op.make_inputs(op.shape(M=8, N=8, K=8), np.random.default_rng()))) == 6
    assert "wgmma" in emit_module(op.build(shape, "sm_90a"), "sm_90a")
    assert op.launch(shape).block == (384, 1, 1)              # back on the sm_90a path


def test_one_operator_picks_its_path_from_the_table():
    """TcMatmul is one operator whose path (PATHS) follows the target of its last build and
    its schedule; the SGEMM and it are both `matmul` to the user but differ by name."""
    op = TcMatmul("bf16", "f32")
    assert op.path() is WgmmaMatmulPath                       # not built yet: sm_90a
    op.build(op.shape(M=64, N=64, K=64), "sm_86")
    assert op.path() is MmaSyncMatmulPath and op.built_arch == "sm_86"
    assert TcMatmul("bf16", "f32", SMALL).path() is MmaSyncMatmulPath
    assert set(TcMatmul.PATHS) == {"wgmma", "mma.sync"}
    # the path's target is no part of the operator's configuration (the kernel cache's key)
    from ptxgen.library.compiled import operator_key
    key = operator_key(op)
    op.build(op.shape(M=64, N=64, K=64), "sm_90a")
    assert op.path() is WgmmaMatmulPath and operator_key(op) == key
    assert TcMatmul().label == Matmul().label == "matmul" and TcMatmul().name != Matmul().name
    with pytest.raises(PtxgenError, match="matmul: size K must"):
        TcMatmul().shape(K=0)
    with pytest.raises(PtxgenError, match="a_layout='col'"):
        TcMatmul("bf16", "f32", SMALL, a_layout="col")


def _check(op, shape, arch):
    arrays = op.make_inputs(shape, np.random.default_rng())
    run_operator(op, shape, arrays, arch)
    a, bt = op.values(arrays["A"], op.dtype), op.values(arrays["Bt"], op.dtype)
    want = a @ bt.T
    got = op.values(arrays["C"], op.out)
    bound = op.error_bound(shape, np.abs(a) @ np.abs(bt).T)
    assert np.isfinite(got).all()                 # C starts as NaN: every element was written
    assert (np.abs(got - want) <= bound).all(), float(np.max(np.abs(got - want) / bound))


@pytest.mark.parametrize("dtype", ["bf16", "f16", "tf32"])
@pytest.mark.parametrize("out", ["f32", "bf16"])
@pytest.mark.parametrize("M, N, K", [(70, 131, 200), (33, 40, 77), (5, 30, 3)])
def test_emulator_matches_float64_at_odd_shapes(dtype, out, M, N, K):
    """Several tiles each way, ragged last K steps (zero-filled chunks), K not a multiple of
    16 bytes (A and Bt padded first: 77, 3), odd N (single-element C stores)."""
    op = TcMatmul(dtype, out, SMALL.for_dtype(dtype))
    shape = op.shape(M=M, N=N, K=K)
    assert op.tiles(shape) == -(-M // 32) * -(-N // 32)
    _check(op, shape, "sm_80")


@pytest.mark.parametrize("arch, schedule", [("sm_86", THREE), ("sm_89", "auto"),
                                            ("sm_90", "auto")])
def test_emulator_three_stages_and_default_tiles(arch, schedule):
    op = TcMatmul("f16", "bf16", schedule)
    _check(op, op.shape(M=45, N=97, K=300), arch)


def test_cli_runs_the_sm80_path_on_the_emulator(cli):
    rc, out, err = cli("run", "matmul", "--dtype", "bf16", "--M", "67", "--N", "45", "--K", "40",
                       "--arch", "sm_80", "--backend", "emu", "--check")
    assert rc == 0 and "check: PASS" in out, err
    rc, out, err = cli("emit", "matmul", "--dtype", "tf32", "--arch", "sm_86")
    assert rc == 0 and ".target sm_86" in out and "m16n8k8.row.col.f32.tf32.tf32" in out, err


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype, out", [("bf16", "f32"), ("bf16", "bf16"), ("f16", "f32"),
                                        ("tf32", "f32")])
def test_ptxas_clean_with_hmma_ldsm_ldgsts_and_no_spills(arch, dtype, out):
    op = TcMatmul(dtype, out)
    shape = op.shape(M=4096, N=4096, K=4096)
    ptx = emit_module(op.build(shape, arch), arch)
    assert f".target {arch}" in ptx and "wgmma" not in ptx
    asm = toolchain.assemble(ptx, arch)
    r = asm.resources["tc_matmul"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))["tc_matmul"]
    s = op.schedule_for(shape)
    steps = 4                                     # 32-byte mma K steps in a 128-byte K row
    hmma = sum(v for k, v in mix.items() if k.startswith("HMMA"))
    assert hmma == steps * (s.WM // 16) * (s.WN // 8), mix
    ldsm = sum(v for k, v in mix.items() if k.startswith("LDSM"))
    assert ldsm == steps * (s.WM // 16 + s.WN // 16), mix
    # one 16-byte zero-filling copy per thread and row pass, in the loop and the prologue
    copies = (s.BM + s.BN) * 8 // s.threads
    assert mix.get("LDGSTS.E.BYPASS.128.ZFILL") == copies * s.stages, mix
    assert "LDL" not in mix and "STL" not in mix, mix


def _gpu_arrays(op, shape, arch, rng):
    from ptxgen.runtime import load_steps, run_steps
    arrays = dict(op.make_inputs(shape, rng), **op.workspace_arrays(shape, arch))
    run_steps(op, shape, load_steps(op, shape, op.build(shape, arch), arch), arrays, arch)
    return arrays


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16", "tf32"])
@pytest.mark.parametrize("out", ["f32", "bf16"])
@pytest.mark.parametrize("M, N, K", [(67, 45, 40), (300, 520, 136), (1000, 777, 1033)])
def test_gpu_odd_shapes(dtype, out, M, N, K):
    op = TcMatmul(dtype, out)
    shape = op.shape(M=M, N=N, K=K)
    ok, worst = op.check(shape, _gpu_arrays(op, shape, "sm_80", np.random.default_rng()))
    assert ok, worst


@pytest.mark.gpu
def test_gpu_and_emulator_agree_bit_for_bit():
    op = TcMatmul("bf16", "f32", SMALL)
    shape = op.shape(M=70, N=131, K=200)
    gpu = _gpu_arrays(op, shape, "sm_80", np.random.default_rng(7))
    emu = op.make_inputs(shape, np.random.default_rng(7))
    run_operator(op, shape, emu, "sm_80")
    assert np.array_equal(gpu["C"].view(np.uint32), emu["C"].view(np.uint32))
