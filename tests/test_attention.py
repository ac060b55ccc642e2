"""Fused attention forward (sm_90a): the float64 reference, schedule validation, ptxas/SASS,
the whole kernel on the CPU emulator (TMA, the K/V mbarrier ring, wgmma with P from registers,
online softmax) against float64 at odd shapes, the CLI, and (GPU) the same on the device."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.cli import main
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.attention import Attention, attention_reference
from ptxgen.schedule.attention import AttentionSchedule

ARCH = "sm_90a"


def _emulated(op, shape, seed=None):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    run_operator(op, shape, arrays, ARCH)
    return arrays


def test_reference_matches_a_direct_softmax_and_logsumexp():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((2, 7, 16)) for _ in range(3))
    for causal in (False, True):
        ref = attention_reference(q, k, v, 0.3, causal, 2.0 ** -8)
        for h in range(2):
            for i in range(7):
                n = i + 1 if causal else 7
                s = 0.3 * k[h, :n] @ q[h, i]
                w = np.exp(s - s.max())
                assert np.allclose(ref["O"][h, i], w @ v[h, :n] / w.sum(), rtol=1e-12)
                assert np.isclose(ref["LSE"][h, i], np.log(np.exp(s).sum()), rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("schedule, S, D", [
    ("auto", 77, 64),                                      # one key block, S < BM
    (AttentionSchedule(BN=32, consumers=1), 77, 64),       # 3 key blocks: the ring wraps
    (AttentionSchedule(BN=64, consumers=2), 200, 128),     # D = 128: two column blocks
    (AttentionSchedule(BN=32, overlap=False), 150, 64),    # S(n) and P·V(n-1) one at a time
    (AttentionSchedule(BN=32, stages=2), 150, 64),         # the 2-slot ring wraps
    # BM = 192 (not a power of two: query blocks by division)
    (AttentionSchedule(BN=64, consumers=3, consumer_regs=160), 333, 128),
])
def test_emulated_kernel_matches_float64(causal, schedule, S, D):
    op = Attention("bf16", causal=causal, schedule=schedule)
    shape = op.shape(B=1, H=2, S=S, D=D)
    arrays = _emulated(op, shape)
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_f16_and_an_explicit_scale_on_the_emulator():
    op = Attention("f16", scale=0.05, schedule=AttentionSchedule(BN=32, consumers=1))
    shape = op.shape(B=2, H=1, S=45, D=64)
    arrays = _emulated(op, shape)
    assert op.check(shape, arrays)[0]


def test_check_catches_a_wrong_mask_and_a_wrong_scale():
    """The bound is tight enough to see a missing causal mask or an unscaled softmax."""
    op = Attention("bf16", causal=True, schedule=AttentionSchedule(BN=32, consumers=1))
    shape = op.shape(B=1, H=1, S=50, D=64)
    arrays = _emulated(op, shape, seed=3)
    assert op.check(shape, arrays)[0]
    assert not Attention("bf16", causal=False).check(shape, arrays)[0]
    assert not Attention("bf16", causal=True, scale=0.2).check(shape, arrays)[0]
    bad = dict(arrays, LSE=arrays["LSE"] + 1e-3)
    assert not op.check(shape, bad)[0]


@pytest.mark.parametrize("fields, words", [
    (dict(BN=48), "BN=48"),
    (dict(stages=1), "stages=1"),
    (dict(consumers=3, stages=2), "registers"),
    (dict(consumers=4, consumer_regs=128), "consumers=4"),
    (dict(BN=256, stages=4), "shared memory"),
])
def test_schedule_errors_are_one_line(fields, words):
    with pytest.raises(ScheduleError) as e:
        AttentionSchedule(**fields).validate(ARCH, "bf16", 128)
    assert "\n" not in str(e.value) and words in str(e.value), str(e.value)


def test_bad_operator_arguments_are_one_line_errors():
    with pytest.raises(PtxgenError, match="D=96"):
        Attention().shape(B=1, H=1, S=8, D=96)
    with pytest.raises(PtxgenError, match="dtype"):
        Attention("tf32")
    with pytest.raises(PtxgenError, match="scale"):
        Attention(scale=-1.0)
    # sm_90 without the 'a' takes the sm_80 path (tests/test_mma_attention.py); an sm_90a
    # schedule there is refused
    with pytest.raises(ScheduleError, match="sm_90a"):
        Attention(schedule=AttentionSchedule()).build(Attention().shape(), "sm_90")


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_assembles_with_hgmma_tma_and_no_spills(D, causal):
    op = Attention("bf16", causal=causal)
    shape = op.shape(B=4, H=32, S=4096, D=D)
    ptx = emit_module(op.build(shape, ARCH), ARCH)
    asm = toolchain.assemble(ptx, ARCH)
    mix = toolchain.sass_mix(toolchain.disassemble(asm.cubin))["attention"]
    r = asm.resources["attention"]
    assert r.spills == 0 and r.stack_bytes == 0, r
    s = op.schedule_for(shape)
    # Q·Kᵀ: D/16 k-steps of one wgmma; P·V: BN/16 k-steps x D/64 column blocks; the overlapped
    # loop has each chain twice (first block before the loop, last P·V after it); the peeled
    # form (the default) has a second loop body, the mask-free one
    hgmma = sum(v for k, v in mix.items() if k.startswith("HGMMA"))
    assert s.overlap and s.peel and hgmma == 3 * (D // 16 + s.BN // 16 * (D // 64)), mix
    assert mix.get("UTMALDG.2D") == 3 * D // 64, mix            # Q, K, V per column block
    assert "LDL" not in mix and "STL" not in mix
    assert "USETMAXREG.TRY_ALLOC.CTAPOOL" in mix and "C7508" not in asm.log


def test_cli_emit_and_emulated_run(capsys, tmp_path):
    out = tmp_path / "a.ptx"
    assert main(["emit", "attention", "--B", "1", "--H", "2", "--S", "77", "--D", "64",
                 "--dtype", "bf16", "--causal", "--arch", "sm_90a", "-o", str(out)]) == 0
    assert "wgmma.mma_async" in out.read_text()
    assert main(["run", "attention", "--B", "1", "--H", "2", "--S", "77", "--D", "64",
                 "--causal", "--backend", "emu", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out
    assert main(["run", "attention", "--D", "96", "--backend", "emu"]) != 0
    assert "D=96" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_matches_float64_and_the_emulator(causal):
    from ptxgen.runtime import load_steps, run_steps
    op = Attention("bf16", causal=causal, schedule=AttentionSchedule(BN=64))
    shape = op.shape(B=1, H=3, S=201, D=128)
    gpu = op.make_inputs(shape, np.random.default_rng(5))
    run_steps(op, shape, load_steps(op, shape, op.build(shape, ARCH), ARCH), gpu, ARCH)
    assert op.check(shape, gpu)[0]
    emu = _emulated(op, shape, seed=5)
    diff = np.abs(op.values(gpu["O"]) - op.values(emu["O"]))
    assert diff.max() <= 2.0 ** -7 * max(1.0, np.abs(op.values(emu["O"])).max())


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_heads_on_the_emulator(arch, causal):
    """H = 8 query heads over 2 K/V heads (and multi-query: 1) at an odd S: each query head
    reads K/V head h // kv_group; the check against float64 fails for another grouping."""
    for group in (4, 8):
        op = Attention("bf16", causal=causal, kv_group=group)
        shape = op.shape(B=2, H=8, S=133, D=64)
        arrays = op.make_inputs(shape, np.random.default_rng())
        assert arrays["K"].shape == (2, 8 // group, 133, 64)
        run_operator(op, shape, arrays, arch, engine="auto", check="off")
        assert op.check(shape, arrays)[0]
        wrong = dict(arrays, K=arrays["K"][:, ::-1].copy(), V=arrays["V"][:, ::-1].copy())
        if group == 4:                                   # two K/V heads swapped: wrong
            assert not op.check(shape, wrong)[0]


def test_grouped_query_kernel_is_the_mha_kernel_with_one_division():
    """kv_group=1 emits the unchanged kernel; a group adds the K/V head's row arithmetic only."""
    mha = Attention("bf16").build(Attention("bf16").shape(B=1, H=8, S=256, D=128), "sm_90a")
    gqa_op = Attention("bf16", kv_group=4)
    gqa = gqa_op.build(gqa_op.shape(B=1, H=8, S=256, D=128), "sm_90a")
    a, b = emit_module(mha, "sm_90a"), emit_module(gqa, "sm_90a")
    assert a != b and "kvrow0" in b and "kvrow0" not in a
    with pytest.raises(PtxgenError, match="not a multiple of kv_group"):
        Attention("bf16", kv_group=3).shape(B=1, H=8, S=64, D=64)
