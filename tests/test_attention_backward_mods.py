"""The attention backward with FlexAttention-style mods: ∂score_mod/∂score derived from the
traced graph (schedule/score_mods.derivative), the dK/dV and dQ kernels on the emulator
against the float64 gradients within their bound (mask_mods, ALiBi, soft-capping), causal as a
mask_mod bit-equal to the built-in causal backward, the library's autograd through the mods,
the one-line error of a score_mod without a derivative, ptxas at D = 128 for sm_90a."""
import numpy as np
import pytest

import ptxgen
from ptxgen import toolchain
from ptxgen.emit import emit_module
from ptxgen.emu import run_operator
from ptxgen.errors import PtxgenError
from ptxgen.ops.attention_backward import AttentionBackward
from ptxgen.ops.attention_mods import (alibi, alibi_slopes, causal, document, prefix_lm,
                                       sliding_window, soft_cap)
from ptxgen.schedule.attention_backward import AttentionBackwardSchedule as Sched
from ptxgen.schedule.score_mods import (derivative, evaluate, exp, log, maximum, minimum,
                                        sqrt, tanh, trace_score_mod, where)

try:
    import torch
except ImportError:             # pragma: no cover
    torch = None
torch_only = pytest.mark.skipif(torch is None, reason="torch not installed")
SMALL = Sched(kv_warps=4, q_step=16, q_warps=4, kv_step=16)          # 64-row CTAs


def step(s, b, h, q, kv):
    return where(s > 0.0, s, 0.0)


def test_derivative_rules():
    """ALiBi: the constant 1 (nothing to emit); soft-cap: 1 - tanh²(s/c) sharing the tanh;
    a mod using every rule against central differences; a step in the score: one line."""
    assert derivative(trace_score_mod(alibi(alibi_slopes(4)))) is None
    g = derivative(trace_score_mod(soft_cap(30.0)))
    assert [n.op for n in g.nodes].count("tanh") == 1 and g.root.op == "sub"

    def mod(s, b, h, q, kv):
        return exp(s * 0.25) * 2 + sqrt(abs(s) + 1.0) + log(maximum(s, 1.0)) - s / (kv + 1) \
            + minimum(tanh(s), 0.5) * (q - kv) + where(kv > q, s * 0.5, -s)
    for f in (mod, soft_cap(3.0)):
        gr = trace_score_mod(f)
        s = np.linspace(-3.1, 7.3, 11)
        env = dict(score=s, b=np.int64(0), h=np.int64(1), q=np.int64(5), kv=np.arange(11) % 9)
        e = 1e-6
        fd = (evaluate(gr, dict(env, score=s + e))[0] - evaluate(gr, dict(env, score=s - e))[0])
        assert np.allclose(fd / (2 * e), evaluate(derivative(gr), env)[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(PtxgenError) as e:
        derivative(trace_score_mod(step))
    assert "\n" not in str(e.value) and "not defined" in str(e.value)


def run(S=45, D=64, schedule=SMALL, **kw):
    op = AttentionBackward(schedule=schedule, **kw)
    shape = op.shape(B=1, H=2, S=S, D=D)
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    assert all((arrays[n] == 0x7FC0).all() for n in op.outputs)      # NaN-poisoned
    run_operator(op, shape, arrays, "sm_80", engine="auto")
    return op, shape, arrays


@pytest.mark.parametrize("S, kw", [
    (80, dict(mask_mod=sliding_window(9))),
    (80, dict(mask_mod=document(np.arange(80) // 17))),
    (45, dict(score_mod=alibi(alibi_slopes(2)))),
    (80, dict(score_mod=soft_cap(30.0))),
    (45, dict(score_mod=soft_cap(1.0), causal=True)),              # the chain rule matters
    (80, dict(score_mod=alibi(alibi_slopes(2)), mask_mod=prefix_lm(7))),
], ids=["sliding", "document", "alibi", "softcap30", "softcap1_causal", "alibi_prefix"])
def test_emulated_gradients_with_mods_match_float64(S, kw):
    op, shape, arrays = run(S=S, **kw)
    ok, worst = op.check(shape, arrays)
    assert ok, worst
    if kw.get("score_mod") is not None and kw["score_mod"].__qualname__.startswith("soft_cap") \
            and kw.get("causal"):
        op.grad = None                      # the reference without ∂score_mod/∂score: fails
        assert not op.check(shape, arrays)[0]


@pytest.mark.parametrize("D", [64, 128])
def test_causal_mask_mod_is_the_built_in_causal_bit_for_bit(D):
    a = run(S=80, D=D, schedule="auto", causal=True)[2]
    b = run(S=80, D=D, schedule="auto", mask_mod=causal())[2]
    for n in ("dQ", "dK", "dV"):
        assert (a[n] == b[n]).all(), n


def test_mods_with_grouped_query_heads_are_one_line():
    with pytest.raises(PtxgenError) as e:
        AttentionBackward(kv_group=2, mask_mod=causal())
    assert "\n" not in str(e.value) and "kv_group" in str(e.value)


def _torch_reference(q, k, v, g, score=None, mask=None):
    """float64 autograd of softmax(mod(q kᵀ / sqrt(D))) v (torch operations)."""
    S, D = q.shape[-2], q.shape[-1]
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = q64 @ k64.transpose(-1, -2) / D ** 0.5
    if score is not None:
        s = score(s)
    if mask is not None:
        s = s.masked_fill(~mask(torch.arange(S)[:, None], torch.arange(S)[None, :]),
                          float("-inf"))
    (torch.softmax(s, -1) @ v64).backward(g.double())
    return q64.grad, k64.grad, v64.grad


@torch_only
@pytest.mark.parametrize("which", ["mask", "score"])
def test_library_autograd_through_mods_against_float64(which):
    """ptxgen.attention(..., mask_mod= / score_mod=) on CPU bf16 tensors is differentiable:
    the emulator's forward and backward against float64 torch autograd of the same attention
    (bf16 inputs and outputs: a few bf16 units of the largest gradient)."""
    torch.manual_seed(0)
    S, D = 45, 64
    q, k, v = (torch.randn(1, 2, S, D, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    g = torch.randn(1, 2, S, D, dtype=torch.bfloat16)
    if which == "mask":
        kw = dict(mask_mod=sliding_window(11))
        want = _torch_reference(q, k, v, g, mask=lambda i, j: (i - j >= 0) & (i - j < 11))
    else:
        kw = dict(score_mod=soft_cap(2.0))
        want = _torch_reference(q, k, v, g, score=lambda s: 2.0 * torch.tanh(s / 2.0))
    ptxgen.attention(q, k, v, **kw).backward(g)
    assert "attn_bwd_dq" in ptxgen.last_launch().launches
    for x, w in zip((q, k, v), want):
        assert x.grad.dtype == torch.bfloat16 and x.grad.shape == w.shape
        err = (x.grad.double() - w).abs().max().item()
        assert err <= 0.03 * w.abs().max().item() + 1e-3, (err, w.abs().max().item())


@torch_only
def test_library_backward_of_a_score_mod_without_derivative_is_one_line():
    q = torch.randn(1, 1, 16, 64, dtype=torch.bfloat16, requires_grad=True)
    o = ptxgen.attention(q, q.detach(), q.detach(), score_mod=step)      # the forward runs
    with pytest.raises(PtxgenError) as e:
        o.float().sum().backward()
    assert "\n" not in str(e.value) and "derivative" in str(e.value), e.value


@pytest.mark.needs_ptxas
def test_ptxas_assembles_the_soft_cap_backward_at_d128_for_sm90a_without_spills():
    op = AttentionBackward(score_mod=soft_cap(30.0), mask_mod=sliding_window(256))
    shape = op.shape(B=2, H=16, S=4096, D=128)
    asm = toolchain.assemble(emit_module(op.build(shape, "sm_90a"), "sm_90a"), "sm_90a")
    for kname in ("attn_bwd_dkdv", "attn_bwd_dq"):
        r = asm.resources[kname]
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, (kname, r)
        assert r.registers <= 255, (kname, r)


def test_block_lists_drive_both_loops():
    """With a mask_mod both main kernels walk block lists (dK/dV those of the transposed
    mask): a sliding window leaves empty tiles never loaded; zeroing the dQ kernel's counts
    leaves dQ zero while dK still comes out."""
    from ptxgen.ops.tc_matmul import bf16_values
    op = AttentionBackward(schedule=SMALL, mask_mod=sliding_window(9))
    shape = op.shape(B=1, H=2, S=80, D=64)
    masks = op.block_masks(shape)
    assert masks["dq"].sparsity() > 0.3 and masks["dkdv"].sparsity() > 0.3
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    arrays["BMdq_counts"][1:] = 0
    run_operator(op, shape, arrays, "sm_80", engine="auto")
    assert (bf16_values(arrays["dQ"]) == 0).all() and np.abs(bf16_values(arrays["dK"])).max() > 0
