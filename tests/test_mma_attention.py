"""The attention forward's sm_80 path (FlashAttention-2's form: mma.sync, ldmatrix(.trans),
cp.async, P reused from the S accumulators): schedule validation, the operator's choice of path
by target, the emulator against float64 at odd sequence lengths (causal and not, D 64 and 128,
several query and key blocks, rings of 2 and 3 slots), ptxas/SASS for sm_80 and sm_90, the CLI,
and (GPU) the device against float64 and the emulator."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import ScheduleError
from ptxgen.ops.attention import Attention
from ptxgen.ops.tensor_path import uses_mma_sync
from ptxgen.schedule.attention import AttentionSchedule
from ptxgen.schedule.mma_attention import MmaAttentionSchedule



@pytest.mark.parametrize("fields, D, words", [
    (dict(BN=48), 64, "BN=48"),
    (dict(warps=3), 64, "warps=3"),
    (dict(warps=2), 128, "copy 4 rows"),            # 64 threads, 256-byte rows: 4 per pass
    (dict(stages=1), 64, "stages=1"),
    (dict(stages=5), 128, "shared memory"),            # 192 KB: above sm_80's 163 KB
    (dict(BN=128, warps=8), 128, "fragment registers"),
])
def test_schedule_errors_are_one_line(fields, D, words):
    with pytest.raises(ScheduleError) as e:
        MmaAttentionSchedule(**fields).validate("sm_80", "bf16", D)
    msg = str(e.value)
    assert "\n" not in msg and words in msg, msg


def test_paths_by_target():
    assert [uses_mma_sync(a) for a in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")] == \
        [True, True, True, True, False]
    op = Attention("bf16")
    shape = op.shape(B=1, H=2, S=300, D=128)
    ptx = emit_module(op.build(shape, "sm_86"), "sm_86")
    assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx
    assert op.launch(shape).block == (256, 1, 1) and op.launch(shape).grid == (3, 2, 1)
    assert "wgmma" in emit_module(op.build(shape, "sm_90a"), "sm_90a")
    assert op.launch(shape).block == (384, 1, 1)              # back on the sm_90a path
    assert Attention("bf16", schedule=MmaAttentionSchedule()).launch(shape).block == (256, 1, 1)
    # the 99 KB parts hold the default's Q and two K/V slots at D = 128
    MmaAttentionSchedule().validate("sm_89", "f16", 128)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("schedule, S, D", [
    ("auto", 77, 64),                                     # 2 key blocks, S < BM
    (MmaAttentionSchedule(BN=32, warps=4), 150, 64),      # 3 query blocks, 5 key blocks
    (MmaAttentionSchedule(BN=32, warps=4, stages=3), 200, 128),   # the 3-slot ring wraps
    (MmaAttentionSchedule(BN=128, warps=4), 45, 64),      # one block, most keys masked
])
def test_emulated_kernel_matches_float64(causal, schedule, S, D):
    op = Attention("bf16", causal=causal, schedule=schedule)
    shape = op.shape(B=1, H=2, S=S, D=D)
    arrays = op.make_inputs(shape, np.random.default_rng())
    run_operator(op, shape, arrays, "sm_80")
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_f16_scale_and_several_heads_on_the_emulator():
    op = Attention("f16", causal=True, scale=0.05)
    shape = op.shape(B=2, H=2, S=70, D=128)
    arrays = op.make_inputs(shape, np.random.default_rng())
    run_operator(op, shape, arrays, "sm_90")
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_cli_runs_the_sm80_path_on_the_emulator(cli):
    rc, out, err = cli("run", "attention", "--B", "1", "--H", "2", "--S", "77", "--D", "64",
                       "--arch", "sm_80", "--backend", "emu", "--check")
    assert rc == 0 and "check: PASS" in out, err
    rc, out, err = cli("emit", "attention", "--D", "128", "--causal", "--arch", "sm_80")
    assert rc == 0 and ".target sm_80" in out and "mma.sync" in out, err


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_ptxas_clean_with_hmma_ldsm_ldgsts_and_no_spills(arch, D, causal):
    op = Attention("bf16", causal=causal)
    shape = op.shape(B=4, H=32, S=4096, D=D)
    ptx = emit_module(op.build(shape, arch), arch)
    asm = toolchain.assemble(ptx, arch)
    r = asm.resources["attention"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))["attention"]
    s = op.schedule_for(shape)
    hmma = sum(v for k, v in mix.items() if k.startswith("HMMA"))
    assert hmma == 2 * (D // 16) * (s.BN // 8), mix                # Q·Kᵀ and P·V
    assert mix.get("LDSM.16.MT88.4") == (s.BN // 16) * (D // 16), mix    # V transposed
    assert mix.get("LDSM.16.M88.4") == (D // 16) * (s.BN // 16 + 1), mix  # K, and Q once
    assert any(k.startswith("LDGSTS") for k in mix) and "LDL" not in mix, mix
    # one exponential per score and two per row for the rescaling (ex2.approx → MUFU.EX2)
    assert mix.get("MUFU.EX2") == s.BN // 2 + 2, mix


def test_the_sm90a_schedule_is_not_the_sm80_one():
    with pytest.raises(ScheduleError, match="sm_90a"):
        AttentionSchedule().validate("sm_80")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S, D", [(77, 64), (201, 128), (1000, 128)])
def test_gpu_matches_float64_and_the_emulator(causal, S, D):
    from ptxgen.runtime import load_steps, run_steps
    op = Attention("bf16", causal=causal)
    shape = op.shape(B=1, H=2, S=S, D=D)
    gpu = op.make_inputs(shape, np.random.default_rng(11))
    run_steps(op, shape, load_steps(op, shape, op.build(shape, "sm_80"), "sm_80"), gpu, "sm_80")
    ok, worst = op.check(shape, gpu)
    assert ok, worst
    if S < 1000:
        emu = op.make_inputs(shape, np.random.default_rng(11))
        run_operator(op, shape, emu, "sm_80")
        assert op.check(shape, emu)[0]
        # ex2/rcp/lg2.approx are the hardware's own; the emulator's are within an ulp or two
        assert np.max(np.abs(op.values(gpu["O"]) - op.values(emu["O"]))) <= 2 ** -6
