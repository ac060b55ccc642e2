"""The attention backward over packed variable-length sequences
(ops/attention_varlen_backward.py): the emulator against the float64 gradients within their
bound at mixed lengths with an empty sequence, causal (bottom-right aligned, also where query
and key lengths differ) and not, MHA and GQA; zero gradients where nothing takes part;
bit-equality with the dense backward at equal lengths; the interpreter's race check; ptxas
for sm_90a at D = 128 without spills."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError
from ptxgen.ops.attention_backward import AttentionBackward
from ptxgen.ops.attention_varlen_backward import AttentionVarlenBackward
from ptxgen.ops.tc_matmul import bf16_values
from ptxgen.schedule.attention_backward import AttentionBackwardSchedule as Sched

LENS = [1, 37, 0, 80]


def run(op, shape, seed=0, engine="auto", **kw):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    assert all((arrays[n] == 0x7FC0).all() for n in op.outputs)      # NaN-poisoned
    run_operator(op, shape, arrays, "sm_80", engine=engine, **kw)
    return arrays


@pytest.mark.parametrize("causal, kv_group, lens_k, D", [
    (False, 1, None, 64),
    (True, 2, [5, 0, 200, 64], 128),            # D 128, more keys than queries
    (True, 1, None, 64),
    (False, 2, None, 64),                           # GQA 4/2
    (True, 2, None, 64),
    (True, 2, [5, 0, 50, 64], 64),                  # S_k != S_q: rows before the diagonal see none
    (False, 1, [5, 3, 50, 0], 64),                  # keys without queries, queries without keys
])
def test_emulated_gradients_match_float64(causal, kv_group, lens_k, D):
    op = AttentionVarlenBackward(causal=causal, kv_group=kv_group)
    shape = op.shape(H=2 * kv_group, D=D, seqlens_q=LENS, seqlens_k=lens_k)
    arrays = run(op, shape)
    ref = op.reference(shape, arrays)
    ok, worst = op.check(shape, arrays, ref)
    assert ok, worst
    for n in op.outputs:                        # nothing takes part: exactly 0
        zero = (ref[n] == 0) & (ref[n + "_bound"] == 0)
        assert (bf16_values(arrays[n])[zero] == 0).all(), n
    if lens_k is not None:
        assert (ref["dQ_bound"] == 0).any()     # rows without keys exist
    arrays["dK"][-1, 0, 0] ^= 0x0100            # the check sees a wrong value
    assert not op.check(shape, arrays, ref)[0]


@pytest.mark.parametrize("causal", [False, True])
def test_equal_lengths_bit_equal_to_dense(causal):
    B, H, S, D, G = 2, 4, 45, 64, 2
    op = AttentionVarlenBackward(causal=causal, kv_group=G)
    shape = op.shape(H=H, D=D, seqlens_q=[S] * B)
    a = run(op, shape, seed=1)
    dense = AttentionBackward(causal=causal, kv_group=G)
    dshape = dense.shape(B=B, H=H, S=S, D=D)

    def to_dense(x):                            # total x heads x D → B x heads x S x D
        return np.ascontiguousarray(x.reshape(B, S, -1, D).transpose(0, 2, 1, 3))
    d = {n: to_dense(a[n]) for n in ("Q", "K", "V", "O", "dO")}
    d.update({n: np.full_like(to_dense(a[n]), 0x7FC0) for n in dense.outputs})
    d["LSE"] = np.ascontiguousarray(a["LSE"].reshape(H, B, S).transpose(1, 0, 2))
    run_operator(dense, dshape, d, "sm_80", engine="auto")
    for n in dense.outputs:
        assert (d[n] == to_dense(a[n])).all(), n


def test_interpreter_small_tiles_race_check():
    """Small tiles (several key and query blocks per sequence, CTAs past a sequence's end
    return), a 3-slot ring that wraps; the interpreter with its race check."""
    op = AttentionVarlenBackward(causal=True, kv_group=2,
                                 schedule=Sched(kv_warps=2, q_step=16, q_warps=2, kv_step=16,
                                                stages=3))
    shape = op.shape(H=2, D=64, seqlens_q=[33, 0, 20], seqlens_k=[40, 3, 10])
    arrays = run(op, shape, seed=3, engine="interp", check="error")
    ok, worst = op.check(shape, arrays)
    assert ok, worst


@pytest.mark.parametrize("kw, shape, words", [
    (dict(dtype="f16"), {}, "dtype"),
    (dict(kv_group=3), dict(H=4), "multiple of kv_group"),
    (dict(), dict(seqlens_q=[0, 0]), "empty"),
])
def test_operator_errors_are_one_line(kw, shape, words):
    with pytest.raises(PtxgenError) as e:
        AttentionVarlenBackward(**kw).shape(**shape)
    assert "\n" not in str(e.value) and words in str(e.value), e.value


@pytest.mark.needs_ptxas
def test_ptxas_assembles_d128_for_sm90a_without_spills():
    for causal in (False, True):
        op = AttentionVarlenBackward(causal=causal, kv_group=4)
        shape = op.shape(H=32, D=128, seqlens_q=[4096, 100, 0])
        asm = toolchain.assemble(emit_module(op.build(shape, "sm_90a"), "sm_90a"), "sm_90a")
        for k in ("attn_varlen_bwd_pre", "attn_varlen_bwd_dkdv", "attn_varlen_bwd_dq"):
            r = asm.resources[k]
            assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, (k, r)
            assert r.registers <= 255, (k, r)
