"""The attention schedule space (ptxgen/tune/attention.py): pruning removes what cannot run or
cannot win, the simulator's ranking is deterministic and comes from simulated times, and the
simulator names the bound of the fused attention kernel (tensor pipe vs the SFU's ex2)."""
import dataclasses

import pytest

from ptxgen import isa
from ptxgen.errors import ScheduleError
from ptxgen.ops.attention import Attention
from ptxgen.schedule.attention import AttentionSchedule
from ptxgen.sim import simulate_operator
from ptxgen.tune.attention import (DOMINATED, AttentionSpace, attention_space, model_key,
                                   tune_attention)

ARCH = "sm_90a"


def test_space_holds_only_valid_undominated_points():
    space = attention_space(128)
    assert space.raw == len(space) + sum(space.rejected.values())
    assert len(space) > 10
    for s in space.points:
        s.validate(ARCH, "bf16", 128)                      # raises if invalid
        assert not (s.overlap and s.stages < 3)
    # the rules that fire at D = 128: shared memory (big key blocks x many stages), the
    # fragments (256-key blocks), the dominated 2-stage overlap
    rules = " | ".join(space.rejected)
    assert "shared memory" in rules and "fragment registers" in rules
    assert space.rejected[DOMINATED] > 0
    too_big = AttentionSchedule(BN=192, stages=3)
    with pytest.raises(ScheduleError):
        too_big.validate(ARCH, "bf16", 128)
    assert too_big not in space.points and AttentionSchedule(stages=2) not in space.points
    assert AttentionSchedule() in space.points             # the default survives
    # D = 64 halves the tiles: 192-key blocks with 3 stages fit there
    assert AttentionSchedule(BN=192, stages=3) in attention_space(64).points


SMALL = {"B": 1, "H": 132, "S": 1024, "D": 128}
PICK = [AttentionSchedule(), AttentionSchedule(overlap=False, stages=2),
        AttentionSchedule(BN=64), AttentionSchedule(BN=64, stages=4),
        AttentionSchedule(BN=64, consumers=3, consumer_regs=160)]


def _small_space():
    return AttentionSpace(list(PICK), raw=len(PICK))


def _tune():
    return tune_attention(SMALL, jobs=1, space=_small_space())


def test_ranking_is_deterministic_and_groups_timed_only_fields():
    a, b = _tune(), _tune()
    assert [str(r.schedule) for r in a.ranked] == [str(r.schedule) for r in b.ranked]
    assert [r.predicted_us for r in a.ranked] == [r.predicted_us for r in b.ranked]
    preds = [r.predicted_us for r in a.ranked]
    assert all(p and p > 0 for p in preds) and preds == sorted(preds)
    # 3 and 4 stages look alike to the simulator: one group, the 4-stage point its variant
    assert len(a.ranked) == 4
    head = next(r for r in a.ranked if r.schedule == AttentionSchedule(BN=64))
    assert [str(v) for v in head.variants] == [str(AttentionSchedule(BN=64, stages=4))]
    assert model_key(AttentionSchedule(BN=64, stages=4)) == model_key(AttentionSchedule(BN=64))
    assert a.top(1)[0] == a.ranked[0].schedule
    text = a.to_text()
    assert "simulator" in text and str(a.ranked[0].schedule) in text


def test_ranking_uses_the_isa_tensor_timings(monkeypatch):
    """Slower tensor cores in the machine model: every prediction grows, the overlapped
    schedule's the most (its softmax no longer hides under P·V), and the order changes."""
    base = {str(r.schedule): r.predicted_us for r in _tune().ranked}
    real = isa.load

    def slow(arch):
        t = real(arch)
        w = t.ops["WGMMA"]
        ops = dict(t.ops, WGMMA=dataclasses.replace(w, latency=w.latency * 4,
                                                    issue_interval=w.issue_interval * 4))
        return dataclasses.replace(t, ops=ops)
    monkeypatch.setattr(isa, "load", slow)
    rep = _tune()
    slowed = {str(r.schedule): r.predicted_us for r in rep.ranked}
    assert set(slowed) == set(base)
    assert all(slowed[k] > 2 * base[k] for k in base)
    assert all(r.bound == "pipe TENSOR" for r in rep.ranked)


@pytest.mark.parametrize("D, bound", [(128, "pipe TENSOR"), (64, "pipe XU")])
def test_simulator_names_the_attention_bound(D, bound):
    """D = 128 non-causal at S = 4096: the tensor pipe (wgmma) bounds the kernel; D = 64 halves
    the matrix work per score while the exponentials stay: the SFU (pipe XU, ex2) bounds."""
    op = Attention("bf16")
    shape = op.shape(B=4, H=32, S=4096, D=D)
    rep = simulate_operator(op, shape, arch=ARCH)
    b = rep.details["bound"]
    assert b["resource"] == bound, b
    shares = b["shares"]
    assert shares["pipe TENSOR"] > 0.4 and shares["pipe XU"] > 0.3
    # the prediction stays under the tensor-core peak of the machine model
    h = isa.load(ARCH).header
    peak = h.tensor_flops_per_cycle_per_sm * h.sm_count * isa.load(ARCH).time_clock_mhz * 1e6
    assert op.flops(shape) / (rep.device_us * 1e-6) < peak


def test_wgmma_cost_scales_with_its_shape():
    """The machine model's wgmma figures are per m64n128k16; m64n64k16 costs half the pipe
    time (measured 32.82 vs 64.84 cycles) and its result comes earlier."""
    from ptxgen.ir import Builder, Module, Param
    from ptxgen.ir import types as T
    m = Module(target=ARCH)
    b = Builder(m.add_kernel("k", [Param("x", T.u64)]))
    d = b.const(0, T.u64, name="d")
    on = b.setp("ne", b.const(1, T.u32), 0)
    acc = {n: [b.const(0.0, T.f32) for _ in range(n // 2)] for n in (64, 128, 256)}
    ins = {}
    for n in (64, 128, 256):
        b.wgmma_mma_async(n, acc[n], d, d, ab="bf16", scale_d=on)
        ins[n] = m.kernels[0].body[-1]
    t = isa.load(ARCH)
    c = {n: t.op_for(ins[n]) for n in ins}
    assert c[128].issue_interval == t.ops["WGMMA"].issue_interval
    assert c[64].issue_interval == pytest.approx(c[128].issue_interval / 2)
    assert c[256].issue_interval == pytest.approx(2 * c[128].issue_interval)
    assert c[64].latency < c[128].latency < c[256].latency
    assert c[64].latency == pytest.approx(85.1, rel=0.07)        # calibrate's n64 figure
