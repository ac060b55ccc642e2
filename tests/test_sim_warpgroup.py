"""wgmma as the warpgroup's instruction (sim/warpgroup.py): the warpgroup's op starts once all
four of its warps have issued it, and each warp's wait_group ends with the op."""
from ptxgen.parse import parse_ptx
from ptxgen.sim import memory as memmod
from ptxgen.sim.engine import Sm
from ptxgen.sim.launch import _lane_specs
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import Env

ACC = ", ".join(f"%f{i}" for i in range(64))
# two warpgroups; thread 0 (warp 0 of warpgroup 0) runs 16 dependent square roots first
PTX = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 out)
{
  .reg .u32 %r<4>;
  .reg .u64 %rd<4>;
  .reg .f32 %f<70>;
  .reg .pred %p<2>;
  mov.u32 %r1, %tid.x;
  mov.u64 %rd1, 0;
  mov.u64 %rd2, 0;
  setp.ne.u32 %p1, %r1, 0;
  mov.f32 %f65, 0f3F800000;
  @%p1 bra GO;
""" + "  sqrt.rn.f32 %f65, %f65;\n" * 16 + """GO:
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {""" + ACC + """}, %rd1, %rd2, 0, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  ret;
}
"""


def test_wgmma_starts_when_the_last_warp_of_its_warpgroup_issues(sm90):
    prog = compile_kernel(parse_ptx(PTX).kernels[0], sm90)
    plan = PathPlan(prog, Env({"out": 1 << 40}, {}, []))
    traces = [follow(plan, _lane_specs(0, (1, 1, 1), (256, 1, 1), w, 32, 132, 0, sm90)).trace
              for w in range(8)]
    sm = Sm(prog, [traces], sm90, memmod.SmMemory(memmod.memory_config(sm90, 132)),
            trace_warps=8)
    res = sm.run()
    wgmma = [next(s for kind, s, _e, text in ev if kind == "issue" and "mma_async" in text)
             for ev in res.events]
    fin = [w.finish for w in sm.warps]
    op = next(st for st in prog.instrs if st.queued)
    # warp 0 issues its wgmma after the square roots, its warpgroup's others at once
    assert wgmma[0] > max(wgmma[1:4]) + 100
    # warps 1-3 wait for the op that starts at warp 0's issue; warpgroup 1 does not
    assert all(f >= wgmma[0] + op.latency for f in fin[:4])
    assert max(fin[:4]) - min(fin[:4]) < 1
    assert all(f < wgmma[0] for f in fin[4:])
    assert all(f <= max(wgmma[4:]) + op.latency + 20 for f in fin[4:])
