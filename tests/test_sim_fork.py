"""The launch's `again` run (a wave's CTAs twice, the second set starting in the slots the first
set's CTAs leave) forks the wave's own run off at the first CTA's end (ptxgen.sim.fork): the
copy must give exactly what a separate run of the first set gives, every field to the bit."""
import dataclasses

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import memory as memmod
from ptxgen.sim.engine import Sm

from ptxgen.sim.program import compile_kernel

TABLE = isa.load("sm_90")
# a global load feeding dependent FMAs, a barrier, a store: pipes, memory servers, barriers
PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<4>;
  .reg .f32 %f<5>;
  ld.param.u64 %rd1, [p];
  ld.global.f32 %f1, [%rd1];
  fma.rn.f32 %f2, %f1, %f1, %f1;
  fma.rn.f32 %f3, %f2, %f2, %f2;
  bar.sync 0;
  fma.rn.f32 %f4, %f3, %f3, %f3;
  st.global.f32 [%rd1], %f4;
  ret;
}
"""


def _mem():
    return memmod.SmMemory(memmod.memory_config(TABLE, 132))


def test_the_fork_is_the_separate_run(sm90):
    prog = compile_kernel(parse_ptx(PTX).kernels[0], sm90)
    # CTAs of unequal work (1 .. 6 passes of the block per warp), 2-4 warps each
    traces = [[[0] * (1 + (c + w) % 6) for w in range(2 + c % 3)] for c in range(6)]
    alone = Sm(prog, traces, sm90, _mem(), trace_warps=3).run()
    both = Sm(prog, traces + traces, sm90, _mem(), trace_warps=3, resident=len(traces))
    again = both.run(fork=True)
    assert both.forked is not None
    assert dataclasses.asdict(both.forked) == dataclasses.asdict(alone)
    # and `again` is the run without the fork
    plain = Sm(prog, traces + traces, sm90, _mem(), trace_warps=3, resident=len(traces)).run()
    assert dataclasses.asdict(again) == dataclasses.asdict(plain)
    assert again.issued == 2 * alone.issued and again.cycles > alone.cycles
