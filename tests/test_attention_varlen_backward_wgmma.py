"""The sm_90a (wgmma) attention backward over packed variable-length sequences, selected by a
WgmmaBackwardSchedule: the emulator against the float64 gradients within their bound at mixed
lengths (an empty query sequence, keys without queries, boxes reaching into the next sequence),
causal (bottom-right, S_k != S_q) and not, MHA and GQA, D 64 and 128; every output written,
zero where nothing takes part; two runs bit-equal; bit-equality with the dense wgmma backward
at equal lengths; the interpreter's race check; "auto" stays mma.sync; ptxas (no spills, HGMMA)."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import ScheduleError
from ptxgen.ops.attention_backward import AttentionBackward
from ptxgen.ops.attention_varlen_backward import AttentionVarlenBackward
from ptxgen.ops.tc_matmul import bf16_values
from ptxgen.schedule.attention_backward import WgmmaBackwardSchedule as W
from ptxgen.schedule.attention_backward import default_wgmma_backward_schedule

ARCH = "sm_90a"
LENS_Q, LENS_K = [37, 0, 130, 64], [50, 3, 130, 40]
ONE = W(consumers=1, kv_step=32, stages=3)        # 64-row CTAs, 32-row steps, 3 slots


def run(op, shape, seed=0, **kw):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    assert all((arrays[n] == 0x7FC0).all() for n in op.outputs)      # NaN-poisoned
    run_operator(op, shape, arrays, ARCH, **{"check": "off", **kw})
    return arrays


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D, kv_group, schedule", [
    (64, 1, None), (64, 2, None), (128, 1, None), (128, 2, None),
    (64, 4, ONE),                       # one consumer, 64-row blocks, the 3-slot rings wrap
])
def test_emulated_gradients_match_float64(causal, D, kv_group, schedule):
    op = AttentionVarlenBackward(causal=causal, kv_group=kv_group,
                                 schedule=schedule or default_wgmma_backward_schedule(D))
    shape = op.shape(H=4, D=D, seqlens_q=LENS_Q, seqlens_k=LENS_K)
    arrays = run(op, shape)
    for n in op.outputs:                        # every element written
        assert not (arrays[n] == 0x7FC0).any(), n
    ref = op.reference(shape, arrays)
    ok, worst = op.check(shape, arrays, ref)
    assert ok, worst
    zero = {}
    for n in op.outputs:        # nothing takes part (bound at most backward_reference's 1e-30)
        zero[n] = (ref[n] == 0) & (ref[n + "_bound"] <= 1e-30)
        assert (bf16_values(arrays[n])[zero[n]] == 0).all(), n
    assert zero["dK"].any()                     # keys without queries exist (sequence 1)
    if causal:
        assert zero["dQ"].any()                 # rows before the diagonal see no key
    arrays["dQ"][-1, 0, 0] ^= 0x0100            # the check sees a wrong value
    assert not op.check(shape, arrays, ref)[0]


def test_gradients_are_deterministic():
    op = AttentionVarlenBackward(causal=True, kv_group=2, schedule=ONE)
    shape = op.shape(H=4, D=64, seqlens_q=LENS_Q, seqlens_k=LENS_K)
    a, b = run(op, shape, seed=2), run(op, shape, seed=2)
    for n in op.outputs:
        assert (a[n] == b[n]).all(), n


@pytest.mark.parametrize("causal, D, schedule", [
    (False, 64, None), (True, 64, None), (True, 128, None), (True, 64, ONE)])
def test_equal_lengths_bit_equal_to_dense_wgmma(causal, D, schedule):
    B, H, S, G = 2, 4, 77, 2
    schedule = schedule or default_wgmma_backward_schedule(D)
    op = AttentionVarlenBackward(causal=causal, kv_group=G, schedule=schedule)
    shape = op.shape(H=H, D=D, seqlens_q=[S] * B)
    a = run(op, shape, seed=1)
    dense = AttentionBackward(causal=causal, kv_group=G, schedule=schedule)
    dshape = dense.shape(B=B, H=H, S=S, D=D)

    def to_dense(x):                            # total x heads x D → B x heads x S x D
        return np.ascontiguousarray(x.reshape(B, S, -1, D).transpose(0, 2, 1, 3))
    d = {n: to_dense(a[n]) for n in ("Q", "K", "V", "O", "dO")}
    d.update({n: np.full_like(to_dense(a[n]), 0x7FC0) for n in dense.outputs})
    d["LSE"] = np.ascontiguousarray(a["LSE"].reshape(H, B, S).transpose(1, 0, 2))
    run_operator(dense, dshape, d, ARCH, check="off")
    for n in dense.outputs:
        assert (d[n] == to_dense(a[n])).all(), n


def test_interpreter_race_check():
    """32-row steps (several per sequence), CTAs past a sequence's end return; the interpreter
    with its race check."""
    op = AttentionVarlenBackward(causal=True, kv_group=2,
                                 schedule=W(consumers=1, q_step=32, kv_step=32))
    shape = op.shape(H=2, D=64, seqlens_q=[33, 0, 20], seqlens_k=[40, 3, 10])
    arrays = run(op, shape, seed=3, engine="interp", check="error")
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_auto_stays_mma_sync_and_wgmma_needs_sm90a():
    shape_of = lambda op: op.shape(H=4, D=64, seqlens_q=LENS_Q)      # noqa: E731
    op = AttentionVarlenBackward(kv_group=2)
    ptx = emit_module(op.build(shape_of(op), ARCH), ARCH)
    assert "wgmma" not in ptx and "mma.sync" in ptx
    op = AttentionVarlenBackward(kv_group=2, schedule=W())
    ptx = emit_module(op.build(shape_of(op), ARCH), ARCH)
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx and "mma.sync" not in ptx
    with pytest.raises(ScheduleError, match="sm_90a"):
        op.build(shape_of(op), "sm_80")


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("D", [64, 128])
def test_ptxas_assembles_without_spills_on_hgmma(D):
    for causal in (False, True):
        for kv_group in (1, 4):
            op = AttentionVarlenBackward(causal=causal, kv_group=kv_group,
                                         schedule=default_wgmma_backward_schedule(D))
            shape = op.shape(H=32, D=D, seqlens_q=[4096, 100, 0], seqlens_k=[4096, 37, 5])
            asm = toolchain.assemble(emit_module(op.build(shape, ARCH), ARCH), ARCH)
            for k in ("attn_varlen_bwd_dkdv", "attn_varlen_bwd_dq"):
                r = asm.resources[k]
                assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, \
                    (D, causal, kv_group, k, r)
            assert "HGMMA" in toolchain.disassemble(asm.cubin)


def test_the_path_it_reports_is_the_one_it_builds():
    from ptxgen.ops.tensor_path import describe_path
    from ptxgen.schedule.attention_backward import WgmmaBackwardSchedule
    assert describe_path(AttentionVarlenBackward(), "sm_90a") == "mma.sync (sm_90a)"
    assert describe_path(AttentionVarlenBackward(schedule=WgmmaBackwardSchedule()),
                         "sm_90a") == "wgmma (sm_90a)"
