"""The attention backward (ops/attention_backward.py: Delta, dK/dV over key blocks, dQ over
query blocks on mma.sync): schedule errors, the emulator against the float64 gradients within
their propagated bound (odd S, causal and not, GQA and MHA, D 64 and 128, several key and
query blocks, the ring wrapping), determinism, ptxas at D = 128 for sm_90a, and the CLI."""
import numpy as np
import pytest

from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError, ScheduleError
from ptxgen.ops.attention_backward import AttentionBackward
from ptxgen.schedule.attention_backward import AttentionBackwardSchedule as Sched

SMALL = Sched(kv_warps=4, q_step=16, q_warps=4, kv_step=16)          # 64-row CTAs
WRAP = Sched(kv_warps=2, q_step=16, q_warps=2, kv_step=32, stages=3)


@pytest.mark.parametrize("fields, D, words", [
    (dict(q_step=48), 64, "q_step=48"),
    (dict(kv_warps=3), 64, "kv_warps=3"),
    (dict(stages=1), 64, "stages=1"),
    (dict(q_step=32), 128, "fragment registers"),      # ptxas spills there
    (dict(kv_warps=1), 128, "copy 2 rows"),
])
def test_schedule_errors_are_one_line(fields, D, words):
    with pytest.raises(ScheduleError) as e:
        Sched(**fields).validate("sm_80", "bf16", D)
    assert "\n" not in str(e.value) and words in str(e.value), e.value


@pytest.mark.parametrize("kw, shape, words", [
    (dict(dtype="f16"), {}, "dtype"),
    (dict(kv_group=3), dict(H=4), "multiple of kv_group"),
    (dict(), dict(D=96), "D=96"),
    (dict(scale=-1.0), {}, "scale"),
])
def test_operator_errors_are_one_line(kw, shape, words):
    with pytest.raises(PtxgenError) as e:
        AttentionBackward(**kw).shape(**shape)
    assert "\n" not in str(e.value) and words in str(e.value), e.value


def run(causal, kv_group, H, S, D, schedule="auto", B=1, seed=0):
    op = AttentionBackward(causal=causal, kv_group=kv_group, schedule=schedule)
    shape = op.shape(B=B, H=H, S=S, D=D)
    arrays = op.make_inputs(shape, np.random.default_rng(seed))
    assert all((arrays[n] == 0x7FC0).all() for n in op.outputs)      # NaN-poisoned
    run_operator(op, shape, arrays, "sm_80", engine="auto")
    return op, shape, arrays


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_group, H, S, D, schedule", [
    (1, 2, 37, 64, "auto"),                 # MHA, one block of each kind
    (2, 4, 80, 128, SMALL),                 # GQA 4/2: 2 key blocks, 5 query steps per head
    (4, 4, 37, 64, WRAP),                   # MQA-like 4/1, the 3-slot ring wraps
    (1, 2, 80, 128, "auto"),
])
def test_emulated_gradients_match_float64(causal, kv_group, H, S, D, schedule):
    op, shape, arrays = run(causal, kv_group, H, S, D, schedule)
    ok, worst = op.check(shape, arrays)
    assert ok, worst


def test_gradients_are_deterministic_and_tiles_agree():
    """dQ and the GQA sums of dK/dV are summed in one fixed order: two runs are bit-equal;
    another tiling changes the summation order only (both within the bound)."""
    a = run(True, 2, 4, 45, 64, SMALL)[2]
    b = run(True, 2, 4, 45, 64, SMALL)[2]
    c = run(True, 2, 4, 45, 64, "auto")
    for n in ("dQ", "dK", "dV"):
        assert (a[n] == b[n]).all(), n
    assert c[0].check(c[1], c[2])[0]


@pytest.mark.needs_ptxas
def test_ptxas_assembles_d128_for_sm90a_without_spills():
    for causal in (False, True):
        op = AttentionBackward(causal=causal, kv_group=4)
        shape = op.shape(B=4, H=32, S=4096, D=128)
        asm = toolchain.assemble(emit_module(op.build(shape, "sm_90a"), "sm_90a"), "sm_90a")
        for k in ("attn_bwd_pre", "attn_bwd_dkdv", "attn_bwd_dq"):
            r = asm.resources[k]
            assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, (k, r)
            assert r.registers <= 255, (k, r)


def test_cli_emits_and_runs_the_backward(cli):
    rc, out, err = cli("emit", "attention", "--B", "4", "--H", "32", "--S", "4096", "--D", "128",
                       "--dtype", "bf16", "--causal", "--backward", "--arch", "sm_90a")
    assert rc == 0, err
    for k in ("attn_bwd_pre", "attn_bwd_dkdv", "attn_bwd_dq"):
        assert f".entry {k}(" in out, k
    assert "mma.sync.aligned.m16n8k16" in out and ".target sm_90a" in out
    rc, out, err = cli("run", "attention", "--B", "1", "--H", "4", "--kv-heads", "2", "--S",
                       "37", "--D", "64", "--causal", "--backward", "--backend", "emu",
                       "--check")
    assert rc == 0 and "check: PASS" in out, (out, err)
    assert "attn_bwd_pre, attn_bwd_dkdv, attn_bwd_dq" in out, out
    rc, out, err = cli("emit", "attention", "--backward", "--score-mod", "softcap:30",
                       "--mask", "sliding:64", "--arch", "sm_90a")
    assert rc == 0 and ".entry attn_bwd_dkdv(" in out and "tanh.approx.f32" in out, err
    rc, out, err = cli("emit", "attention", "--backward", "--score-mod", "alibi", "--H", "4",
                       "--kv-heads", "2")
    assert rc != 0 and "kv_group" in err and len(err.strip().splitlines()) == 1, err


def test_a_few_training_steps_track_sdpa():
    """Gradients through ptxgen.attention (the emulator) train a causal attention layer as
    SDPA's do: the same weights and batches give the same losses, and the loss falls."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    import ptxgen

    def losses(attend):
        torch.manual_seed(0)
        qkv, out = torch.nn.Linear(128, 384), torch.nn.Linear(128, 16)
        opt = torch.optim.SGD([*qkv.parameters(), *out.parameters()], lr=0.5)
        x = torch.randn(2, 40, 128)
        y = torch.randint(16, (2, 40))
        seen = []
        for _ in range(3):
            q, k, v = qkv(x).view(2, 40, 3, 2, 64).permute(2, 0, 3, 1, 4).to(torch.bfloat16)
            a = attend(q.contiguous(), k.contiguous(), v.contiguous()).float()
            loss = F.cross_entropy(out(a.transpose(1, 2).reshape(2, 40, 128)).reshape(-1, 16),
                                   y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.append(float(loss.detach()))
        return seen
    ours = losses(lambda q, k, v: ptxgen.attention(q, k, v, causal=True))
    ref = losses(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert np.allclose(ours, ref, atol=2e-2) and ours[-1] < ours[0]
    frozen = losses(lambda q, k, v: ptxgen.attention(q.detach(), k.detach(), v.detach(),
                                                     causal=True))
    assert not np.allclose(frozen, ref, atol=1e-4)        # the attention's gradient matters
