"""Round sim12a: the sampled loop keeps fewer iterations where its iterations are long
(ptxgen.sim.waves.sampled_pair)."""
import pytest

from ptxgen import isa
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.sim import simulate
from ptxgen.sim.waves import SAMPLE_COVER, sample_caps, sampled_pair

TABLE = isa.load("sm_90")


def loop_kernel(body):
    """for i in range(n): `body` dependent FMAs (n a parameter)."""
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param("out", T.u64, ptr(T.f32)), Param("n", T.u32)])
    b = Builder(k)
    out, n = b.param("out"), b.param("n")
    x = b.const(1.0, T.f32, name="x")
    with b.for_range(0, n, 1, type=T.u32):
        for _ in range(body):
            b.fma(x, x, x, out=x)
    b.st("global", out, x)
    b.ret()
    return m, k


def sim(body, n, **kw):
    m, k = loop_kernel(body)
    return simulate(k, (1,), (64,), module=m, args={"n": n}, registers=32, **kw)


def kept(rep):
    return rep.details["sampled_loop"]["iterations"]


def test_caps_halve_down_to_two():
    assert sample_caps(16) == (16, 8, 4, 2)
    assert sample_caps(5) == (5, 2)
    assert sample_caps(4) == (4, 2)


def test_short_iterations_keep_the_whole_sample():
    # 8 FMAs an iteration: 16 iterations cover far fewer than SAMPLE_COVER instructions
    assert kept(sim(8, 100)) == 16


@pytest.mark.parametrize("body,want", [(SAMPLE_COVER // 8 + 40, 8),
                                       (SAMPLE_COVER // 4 + 40, 4),
                                       (4 * SAMPLE_COVER, 4)])
def test_long_iterations_keep_fewer_but_at_least_four(body, want):
    """The fewest iterations (halving from 16, at least 4) that still cover SAMPLE_COVER
    instructions: without the rule every loop keeps 16 and 8."""
    assert kept(sim(body, 40)) == want


def test_fewer_long_iterations_predict_what_all_of_them_do():
    """A long-iteration loop sampled at 4 and 2 iterations (the rule) against the same loop
    run whole (sample 64 > 40 iterations): the steady state is the same."""
    body = SAMPLE_COVER // 4 + 40
    short, whole = sim(body, 40), sim(body, 40, sample=64)
    assert kept(short) == 4 and whole.details["waves"][0]["loop_iterations_extrapolated"] == 0
    assert short.details["waves"][0]["loop_iterations_extrapolated"] == 36
    assert short.cycles == pytest.approx(whole.cycles, rel=0.01)
    assert short.details["simulation_seconds"] < whole.details["simulation_seconds"]


def test_pair_from_the_slowest_warps_cost_per_iteration():
    """sampled_pair reads the per-iteration cost from the two longest samples' traces: a warp
    whose iterations are short keeps the whole sample for every warp."""

    class Blk:
        def __init__(self, n):
            self.start, self.end = 0, n

    class Prog:
        blocks = [Blk(1000), Blk(10)]           # block 0: a long iteration, block 1: short

    caps = sample_caps(16)
    long_trace = {c: ([[[0] * c]], [40 - c]) for c in caps}
    assert sampled_pair(Prog, [long_trace[c] for c in caps], caps) == 2     # 4 and 2 kept
    mixed = [([[[0] * c, [1] * c]], [40 - c, 40 - c]) for c in caps]
    assert sampled_pair(Prog, mixed, caps) == 0
    assert sampled_pair(Prog, [long_trace[16]], (16,)) == 0                 # no hot loop
