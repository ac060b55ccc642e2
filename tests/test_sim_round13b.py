"""Round sim13b: the simulator's own speed, predictions unchanged. The shorter loop sample's
run is copied off the longer one where their paths part (Sm.set_alternative)."""
import sys
import os

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import memory as memmod
from ptxgen.sim import simulate
from ptxgen.sim.engine import Sm
from ptxgen.sim.program import compile_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_sim_round12a import loop_kernel  # noqa: E402
from test_sim_round14c import count_issues  # noqa: E402

TABLE = isa.load("sm_90")


def _simulate(monkeypatch, grid, share):
    """simulate() of a sampled FMA loop, and the instructions the engine issued for it;
    share=False: the shorter sample simulated in a run of its own (set_alternative off)."""
    issued = count_issues(monkeypatch)
    if not share:
        monkeypatch.setattr(Sm, "set_alternative", lambda self, traces: None)
    m, k = loop_kernel(12)
    rep = simulate(k, (grid,), (256,), module=m, args={"n": 5000}, registers=32)
    monkeypatch.undo()
    return rep, sum(issued)


def test_shorter_sample_is_copied_off_the_longer_run_with_the_same_result(monkeypatch):
    # one wave (no `again` run) and several (the both-sets run forks the wave's run too)
    for grid, most in ((132, 0.8), (132 * 8 * 3, 1.0)):
        alone, n_alone = _simulate(monkeypatch, grid, share=False)
        shared, n_shared = _simulate(monkeypatch, grid, share=True)
        assert shared.details["sampled_loop"]["iterations"] == \
            alone.details["sampled_loop"]["iterations"]
        # every figure of the two runs is the same, to the last bit ...
        assert shared.cycles == alone.cycles and shared.device_us == alone.device_us
        assert shared.stalls == alone.stalls and shared.ipc == alone.ipc
        # ... while the stretch both samples share (the loop's first iterations) ran once:
        # until the first warp leaves it (the oldest warps run ahead of the others)
        assert n_shared < most * n_alone, (grid, n_shared, n_alone)


_HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
# one block of 32 independent 64-bit adds
_PTX = _HEAD + """.visible .entry k(.param .u64 out)
{
  .reg .b64 %rd<40>;
  mov.u64 %rd1, 1;
""" + "\n".join(f"  add.s64 %rd{i + 2}, %rd1, %rd1;" for i in range(32)) + """
  ret;
}
"""


def test_paths_that_differ_from_their_first_block_are_not_shared():
    k = parse_ptx(_PTX).kernels[0]
    prog = compile_kernel(k, TABLE)
    sm = Sm(prog, [[[0, 0]]], TABLE, memmod.SmMemory(memmod.memory_config(TABLE, 132)))
    sm.set_alternative([[[1 * len(prog.blocks)]]])     # another lane mask from the start
    assert sm.alt is None
    sm.set_alternative([[[0]]])                         # a prefix: shared up to its end
    assert sm.alt is not None and sm.warps[0].split == 1
    sm.run()
    ref = Sm(prog, [[[0]]], TABLE, memmod.SmMemory(memmod.memory_config(TABLE, 132))).run()
    assert sm.alt_result is not None
    assert (sm.alt_result.cycles, sm.alt_result.issued, sm.alt_result.stalls) == \
        (ref.cycles, ref.issued, ref.stalls)
