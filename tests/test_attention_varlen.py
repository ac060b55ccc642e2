"""Attention over packed variable-length sequences (ops/attention_varlen.py, the mma.sync
forward with cu_seqlens): the emulator against float64 at mixed lengths with an empty
sequence, causal (bottom-right aligned, also where query and key lengths differ) and not,
GQA and MHA, D 64 and 128; bit-equality with the dense operator at equal lengths; ptxas for
sm_90a without spills; the operator's errors; the CLI."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError
from ptxgen.ops.attention import Attention
from ptxgen.ops.attention_varlen import AttentionVarlen
from ptxgen.schedule.mma_attention import MmaAttentionSchedule

LENS = [1, 37, 0, 130, 64]


def run(op, shape, seed=0, arch="sm_90a"):
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    assert np.isnan(op.values(arrays["O"])).all() and np.isnan(arrays["LSE"]).all()
    run_operator(op, shape, arrays, arch, engine="auto")
    return arrays


@pytest.mark.parametrize("causal, kv_group, D, lens_k", [
    (False, 1, 64, None),
    (True, 1, 128, None),
    (True, 2, 64, None),                        # GQA 4/2
    (False, 2, 128, None),
    (True, 2, 64, [5, 0, 200, 64, 3]),          # S_k != S_q: rows before the diagonal empty
    (False, 1, 64, [5, 0, 200, 64, 3]),
])
def test_emulated_matches_float64(causal, kv_group, D, lens_k):
    op = AttentionVarlen(causal=causal, kv_group=kv_group)
    shape = op.shape(H=4, D=D, seqlens_q=LENS, seqlens_k=lens_k)
    arrays = run(op, shape)
    ref = op.reference(shape, arrays)
    ok, worst = op.check(shape, arrays, ref)
    assert ok, worst
    empty = np.isneginf(ref["LSE"])             # rows that see no key: O = 0, LSE = -inf
    assert empty.any() == (lens_k is not None)
    assert (op.values(arrays["O"]).transpose(1, 0, 2)[empty] == 0).all()
    assert np.isneginf(arrays["LSE"][empty]).all()
    arrays["LSE"][1, -1] += 1e-3                # the check sees a wrong value
    assert not op.check(shape, arrays, ref)[0]


def test_f16_interpreter_small_tiles():
    """f16, 32-row query blocks (CTAs past a sequence's end return at once), a 3-slot ring
    that wraps, key lengths unlike the query lengths; the interpreter with its race check."""
    op = AttentionVarlen("f16", causal=True, kv_group=2,
                         schedule=MmaAttentionSchedule(BN=32, warps=2, stages=3))
    shape = op.shape(H=2, D=64, seqlens_q=[33, 0, 70], seqlens_k=[40, 3, 50])
    arrays = op.make_inputs(shape, np.random.default_rng(3))
    run_operator(op, shape, arrays, "sm_80", engine="interp", check="error")
    ok, worst = op.check(shape, arrays)
    assert ok, worst


@pytest.mark.parametrize("causal, kv_group", [(True, 2), (False, 1)])
def test_equal_lengths_bit_equal_to_dense(causal, kv_group):
    """B sequences of S tokens: the dense mma.sync forward's O and LSE, bit for bit."""
    B, H, S, D = 2, 4, 77, 64
    sched = MmaAttentionSchedule(BN=64, warps=4)
    op = AttentionVarlen(causal=causal, kv_group=kv_group, schedule=sched)
    shape = op.shape(H=H, D=D, seqlens_q=[S] * B)
    arrays = run(op, shape, arch="sm_80")
    dense = Attention(causal=causal, kv_group=kv_group, schedule=sched)
    dshape = dense.shape(B=B, H=H, S=S, D=D)
    d = dense.make_inputs(dshape, np.random.default_rng(0))

    def unpack(x):                              # total x heads x D → B x heads x S x D
        return np.ascontiguousarray(x.reshape(B, S, -1, D).transpose(0, 2, 1, 3))
    for n in ("Q", "K", "V"):
        d[n] = unpack(arrays[n])
    run_operator(dense, dshape, d, "sm_80", engine="auto")
    assert np.array_equal(unpack(arrays["O"]), d["O"])
    assert np.array_equal(arrays["LSE"].reshape(H, B, S).transpose(1, 0, 2), d["LSE"])


@pytest.mark.parametrize("causal, D", [(False, 64), (True, 64), (False, 128), (True, 128)])
def test_wgmma_path_equal_lengths_bit_equal_to_the_dense_wgmma_kernel(causal, D):
    """sm_90a: B sequences of S tokens give the dense wgmma forward's O and LSE bit for bit
    (the same tiles, TMA boxes of the packed rows, per-row key limits for the bounds)."""
    B, H, S = 2, 3, 130
    op = AttentionVarlen(causal=causal)
    shape = op.shape(H=H, D=D, seqlens_q=[S] * B)
    arrays = run(op, shape, seed=2)
    assert "attn" in str(op.schedule_for(shape))          # the wgmma path's schedule
    dense = Attention(causal=causal)
    dshape = dense.shape(B=B, H=H, S=S, D=D)
    d = dense.make_inputs(dshape, np.random.default_rng(0))
    for n in ("Q", "K", "V"):
        d[n] = np.ascontiguousarray(arrays[n].reshape(B, S, H, D).transpose(0, 2, 1, 3))
    run_operator(dense, dshape, d, "sm_90a")
    assert np.array_equal(arrays["O"].reshape(B, S, H, D).transpose(0, 2, 1, 3), d["O"])
    assert np.array_equal(arrays["LSE"].reshape(H, B, S).transpose(1, 0, 2), d["LSE"])


def test_mma_sync_schedule_on_sm90a_still_takes_the_mma_path():
    op = AttentionVarlen(causal=True, schedule=MmaAttentionSchedule(BN=64, warps=4))
    shape = op.shape(H=2, D=64, seqlens_q=[37, 0, 130], seqlens_k=[50, 3, 100])
    arrays = run(op, shape)
    assert "mma.sync" in emit_module(op.build(shape, "sm_90a"), "sm_90a")
    assert op.check(shape, arrays)[0]


@pytest.mark.parametrize("kw, words", [
    (dict(seqlens_q=[3, -1]), "non-negative"),
    (dict(seqlens_q=[0, 0]), "empty"),
    (dict(seqlens_q=[3, 4], seqlens_k=[3]), "2 query sequences but 1 key"),
    (dict(seqlens_q=[3, 4], B=3), "B=3 disagrees"),
    (dict(seqlens_k=[3]), "needs seqlens_q"),
    (dict(H=5), "multiple of kv_group"),
    (dict(D=96), "D=96"),
])
def test_operator_errors_are_one_line(kw, words):
    with pytest.raises(PtxgenError) as e:
        AttentionVarlen(kv_group=2).shape(**kw)
    assert "\n" not in str(e.value) and words in str(e.value), e.value


def test_shape_without_lengths_draws_them_once():
    op = AttentionVarlen()
    a, b = op.shape(B=6, max_seqlen_q=300), op.shape(B=6, max_seqlen_q=300)
    assert a == b and a["seqlens_q"][-1] == 300 and len(set(a["seqlens_q"])) > 1
    assert a["total_q"] == sum(a["seqlens_q"]) and a["seqlens_k"] == a["seqlens_q"]


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("causal", [False, True])
def test_ptxas_sm90a_no_spills(causal):
    op = AttentionVarlen(causal=causal, kv_group=4)
    shape = op.shape(H=32, D=128, seqlens_q=[64, 4096, 1000])
    asm = toolchain.assemble(emit_module(op.build(shape, "sm_90a"), "sm_90a"), "sm_90a")
    r = asm.resources[op.kernel_name()]
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, r
    assert "HGMMA" in toolchain.disassemble(asm.cubin)


def test_cli_emits_and_runs_packed_sequences(cli):
    rc, out, err = cli("emit", "attention", "--varlen", "64,4096,1000", "--H", "32",
                       "--kv-heads", "8", "--D", "128", "--causal", "--arch", "sm_90a")
    assert rc == 0, err
    assert ".entry attention_varlen(" in out and "cu_seqlens_q" in out
    assert "wgmma.mma_async" in out and ".target sm_90a" in out
    rc, out, err = cli("emit", "attention", "--varlen", "64,1000", "--H", "4", "--D", "64",
                       "--arch", "sm_80")
    assert rc == 0 and "mma.sync.aligned.m16n8k16" in out, err
    rc, out, err = cli("run", "attention", "--varlen", "37,0,130", "--H", "4", "--kv-heads",
                       "2", "--causal", "--backend", "emu", "--check")
    assert rc == 0 and "check: PASS" in out, (out, err)
    assert "seqlens_q=(37, 0, 130)" in out, out


@pytest.mark.parametrize("args, words", [
    (["--varlen", "64,x"], "comma-separated"),
    (["--varlen", "0,0"], "every sequence is empty"),
    (["--varlen", "64", "--S", "64"], "--S does not apply"),
    (["--varlen", "64", "--backward"], "--backward is not implemented"),
    (["--varlen", "64", "--decode"], "--varlen does not apply"),
    (["--varlen", "64", "--H", "6", "--kv-heads", "4"], "not a multiple of --kv-heads"),
    (["--varlen", "64", "--D", "96"], "D=96"),
])
def test_cli_errors_are_one_line(cli, args, words):
    rc, out, err = cli("emit", "attention", *args)
    assert rc != 0 and words in err and len(err.strip().splitlines()) == 1, err
