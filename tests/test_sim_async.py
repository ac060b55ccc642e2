"""Hopper's asynchronous work in the simulator (sim/async_copy.py, sim/cta_work.py, the clock
under tensor load): TMA transactions consumers wait on, the producer's ring of stages, wgmma
groups, per-CTA work over the grid."""
import pytest

from ptxgen import isa
from ptxgen.ops.attention import Attention
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.attention import AttentionSchedule
from ptxgen.sim import async_copy as AC
from ptxgen.sim import simulate_operator
from ptxgen.sim.program import compile_kernel

SHAPE = dict(B=1, H=8, S=2048, D=128)


def _prog(op, shape):
    table = isa.load("sm_90a")
    return compile_kernel(op.build(op.shape(**shape), "sm_90a").kernel(op.kernel_name()), table)


@pytest.mark.parametrize("stages", [2, 3])
def test_the_ring_and_the_transactions_are_read_from_the_kernel(stages):
    op = Attention("bf16", schedule=AttentionSchedule(stages=stages))
    prog = _prog(op, SHAPE)
    roles = AC.async_roles(prog)
    assert AC.ring_stages(prog, roles) == stages
    kinds = [k for k, _ in roles.values()]
    # Q: one transaction of 2 boxes; per key block one of 4 (K and V, two 64-column halves)
    tma = sorted(a for k, a in roles.values() if k == AC.TMA)
    assert set(tma) == {16384.0} and kinds.count(AC.EXPECT) == 2
    assert kinds.count(AC.WG_WAIT) >= 2 and AC.WAIT in kinds and AC.RELEASE in kinds


def test_the_gemm_ring():
    op = TcMatmul("bf16", "bf16")
    prog = _prog(op, dict(M=1024, N=1024, K=1024))
    roles = AC.async_roles(prog)
    assert AC.ring_stages(prog, roles) == op.schedule_for(op.shape(M=1024, N=1024, K=1024)).stages
    # the A and B boxes of a stage share its expect_tx bytes (split evenly: the total counts)
    expect = [i for i, (k, _) in roles.items() if k == AC.EXPECT]
    assert len(expect) == 1
    nbytes = int(prog.instrs[expect[0]].instr.operands[-1].value)
    assert sum(a for k, a in roles.values() if k == AC.TMA) == nbytes


def test_fewer_stages_expose_the_copies():
    """With 2 stages the producer refills a stage only after both consumers released it, and
    the next block's K/V land a TMA latency (queued behind L2) later: measured 2385 us against
    1712 us with 3 stages (B4 H32 S4096 D128, docs/data/attention_2026-12-01_issue17_final.json);
    without the ring every schedule predicted alike."""
    us = {}
    for s in (2, 3):
        op = Attention("bf16", schedule=AttentionSchedule(stages=s))
        us[s] = simulate_operator(op, op.shape(**SHAPE), arch="sm_90a").device_us
    assert us[2] > 1.25 * us[3]


def test_causal_work_follows_the_query_block():
    """Causal: query block x has x + 1 key blocks; the full waves cost the grid's mean CTA,
    about half a non-causal CTA (not the CTAs spread_ctas happens to simulate)."""
    shape = dict(B=2, H=16, S=4096, D=64)
    full = {}
    for causal in (False, True):
        op = Attention("bf16", causal=causal)
        rep = simulate_operator(op, op.shape(**shape), arch="sm_90a")
        full[causal] = rep.device_us
    assert 0.4 < full[True] / full[False] < 0.65


def test_clock_under_tensor_load():
    table = isa.load("sm_90a")
    f = table.time_clock_mhz
    ft = (table.timing or {}).get("tensor_clock_mhz")
    assert table.clock_for_tensor_share(0.0) == f
    if ft:
        assert table.clock_for_tensor_share(1.0) == pytest.approx(ft)
        assert table.clock_for_tensor_share(0.5) == pytest.approx((f + ft) / 2)
        assert table.clock_for_tensor_share(2.0) == pytest.approx(ft)


def test_sfu_work_lowers_the_clock_only_under_tensor_load():
    """SFU (XU) work beside tensor work lowers the clock further, toward tensor_sfu_clock_mhz
    at both pipes full; alone (a SIMT kernel's ex2 and sin) it leaves the sustained clock."""
    table = isa.load("sm_90a")
    f = table.time_clock_mhz
    ft, fts = table.timing["tensor_clock_mhz"], table.timing["tensor_sfu_clock_mhz"]
    assert fts < ft < f
    assert table.clock_for_tensor_share(0.0, 0.8) == f
    assert table.clock_for_tensor_share(1.0, 0.0) == pytest.approx(ft)
    assert table.clock_for_tensor_share(1.0, 1.0) == pytest.approx(fts)
    assert table.clock_for_tensor_share(0.5, 0.5) == pytest.approx(
        f - 0.5 * (f - ft) - 0.25 * (ft - fts))
    # D=128 attention (tensor 0.94, XU 0.60 busy) runs slower than the GEMM's clock
    assert table.clock_for_tensor_share(0.94, 0.6) < table.clock_for_tensor_share(0.97)


def test_attention_schedules_on_the_clock_under_sfu_load():
    """The default D=128 attention (overlapped softmax: tensor and XU pipes busy together)
    simulates at a lower clock than the serial schedule, whose pipes take turns."""
    clocks = {}
    for overlap in (True, False):
        op = Attention("bf16", schedule=AttentionSchedule(overlap=overlap))
        clocks[overlap] = simulate_operator(op, op.shape(**SHAPE), arch="sm_90a").clock_mhz
    table = isa.load("sm_90a")
    assert table.timing["tensor_sfu_clock_mhz"] < clocks[True] < clocks[False] < \
        table.time_clock_mhz
    assert clocks[True] < table.timing["tensor_clock_mhz"]
