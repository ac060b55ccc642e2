"""The sm_90a (wgmma) attention backward, selected by a WgmmaBackwardSchedule: schedule errors,
the emulator against the float64 gradients within their propagated bound (odd S, causal and
not, GQA, D 64 and 128, several key and query blocks, the rings wrapping, one and two consumer
warpgroups), every output element written, determinism, and ptxas (no spills, HGMMA in SASS)."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.attention_backward import AttentionBackward
from ptxgen.schedule.attention_backward import WgmmaBackwardSchedule as W
from ptxgen.schedule.attention_backward import default_wgmma_backward_schedule

ARCH = "sm_90a"
ONE = W(consumers=1, kv_step=32, stages=3)        # 64-row CTAs, 32-row steps, 3 slots


@pytest.mark.parametrize("fields, D, arch, words", [
    (dict(q_step=64), 128, ARCH, "fragment registers"),     # ptxas spills there
    (dict(consumers=3), 64, ARCH, "consumers=3"),
    (dict(kv_step=48), 64, ARCH, "kv_step=48"),
    (dict(stages=1), 64, ARCH, "stages=1"),
    (dict(), 64, "sm_80", "sm_90a"),
])
def test_schedule_errors_are_one_line(fields, D, arch, words):
    with pytest.raises(ScheduleError) as e:
        W(**fields).validate(arch, "bf16", D)
    assert "\n" not in str(e.value) and words in str(e.value), e.value


def test_mods_are_refused_and_auto_stays_mma_sync():
    with pytest.raises(PtxgenError, match="WgmmaBackwardSchedule"):
        AttentionBackward(schedule=W(), score_mod=lambda s, b, h, q, kv: s)
    op = AttentionBackward()
    ptx = emit_module(op.build(op.shape(S=64, D=64), ARCH), ARCH)
    assert "wgmma" not in ptx and "mma.sync" in ptx
    op = AttentionBackward(schedule=W())
    ptx = emit_module(op.build(op.shape(S=64, D=64), ARCH), ARCH)
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx


def run(causal, kv_group, H, S, D, schedule, seed=0):
    op = AttentionBackward(causal=causal, kv_group=kv_group, schedule=schedule)
    shape = op.shape(B=1, H=H, S=S, D=D)
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    assert all((arrays[n] == 0x7FC0).all() for n in op.outputs)      # NaN-poisoned
    run_operator(op, shape, arrays, ARCH, check="off")
    return op, shape, arrays


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_group, H, S, D, schedule", [
    (1, 2, 77, 64, default_wgmma_backward_schedule(64)),    # one block each, rows past S
    (2, 4, 130, 128, W()),              # GQA 4/2: 2 key blocks, 5 query steps per head
    (4, 4, 45, 64, ONE),                # MQA-like 4/1, one consumer, the 3-slot rings wrap
])
def test_emulated_gradients_match_float64(causal, kv_group, H, S, D, schedule):
    op, shape, arrays = run(causal, kv_group, H, S, D, schedule)
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_gradients_are_deterministic():
    """dQ and the GQA sums of dK/dV are summed in one fixed order: two runs are bit-equal."""
    a = run(True, 2, 4, 45, 64, ONE)[2]
    b = run(True, 2, 4, 45, 64, ONE)[2]
    for n in ("dQ", "dK", "dV"):
        assert (a[n] == b[n]).all(), n


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("D", [64, 128])
def test_ptxas_assembles_without_spills_on_hgmma(D):
    for causal in (False, True):
        for kv_group in (1, 4):
            op = AttentionBackward(causal=causal, kv_group=kv_group,
                                   schedule=default_wgmma_backward_schedule(D))
            shape = op.shape(B=4, H=32, S=4096, D=D)
            asm = toolchain.assemble(emit_module(op.build(shape, ARCH), ARCH), ARCH)
            for k in ("attn_bwd_dkdv", "attn_bwd_dq"):
                r = asm.resources[k]
                assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, \
                    (D, causal, kv_group, k, r)
            assert "HGMMA" in toolchain.disassemble(asm.cubin)
