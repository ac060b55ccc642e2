"""Named barriers whose id is a register (`bar.sync %id, 128`, one barrier per warpgroup, as the
tensor-core GEMM's TMA-store epilogue syncs each consumer warpgroup alone): the simulator
resolves the id per warp from its path, so warpgroups do not share one barrier.

Taking every register id as barrier 0 let the warps of two warpgroups release each other; once
a slow warp (the epilogue's leader, which waits for the last TMA store) fell a barrier behind
its own group, the last arrivals found no partners: "simulation deadlock" on the 128x128-tile
TMA-store GEMM with many tiles per SM (the tuner's 8192^3 and 16384x4096x4096 runs)."""
from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.schedule.tc_matmul import TcMatmulSchedule
from ptxgen.sim import memory as memmod
from ptxgen.sim.engine import Sm
from ptxgen.sim.launch import _lane_specs
from ptxgen.sim.paths import PathPlan, follow, named_barriers
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import Env
from ptxgen.tune import tc_space

TABLE = isa.load("sm_90")
TRIPS = 12
# 256 threads = two warpgroups; each syncs on barrier 1 + its warpgroup, 128 threads. Thread 0
# (warp 0, warpgroup 0) runs a chain of dependent square roots before each barrier.
PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 out)
{
  .reg .u32 %r<8>;
  .reg .f32 %f<4>;
  .reg .pred %p<3>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 7;
  add.u32 %r3, %r2, 1;
  setp.ne.u32 %p1, %r1, 0;
  mov.u32 %r5, 0;
  mov.f32 %f1, 0f3F800000;
LOOP:
  @%p1 bra SYNC;
""" + "  sqrt.rn.f32 %f1, %f1;\n" * 16 + """SYNC:
  bar.sync %r3, 128;
  add.u32 %r5, %r5, 1;
  setp.lt.u32 %p2, %r5, """ + str(TRIPS) + """;
  @%p2 bra LOOP;
  ret;
}
"""


def _run(ptx, threads=256):
    k = parse_ptx(ptx).kernels[0]
    prog = compile_kernel(k, TABLE)
    plan = PathPlan(prog, Env({"out": 1 << 40}, {}, []))
    traces = [follow(plan, _lane_specs(0, (1, 1, 1), (threads, 1, 1), w, 32, 132, 0,
                                       TABLE)).trace for w in range(threads // 32)]
    sm = Sm(prog, [traces], TABLE, memmod.SmMemory(memmod.memory_config(TABLE, 132)))
    sm.run()
    return prog, traces, sm


def test_register_barrier_ids_resolve_per_warp():
    prog, traces, _ = _run(PTX)
    (bar,) = named_barriers(prog)
    assert prog.instrs[bar].barrier[0] == 0          # the program text alone cannot tell
    assert [tr.barriers[bar][0] for tr in traces] == [1] * 4 + [2] * 4
    assert all(tr.barriers[bar][1] is None for tr in traces)     # the count is immediate


def test_each_warpgroup_waits_only_for_its_own_warps(sm90):
    _, _, sm = _run(PTX)
    fin = [w.finish for w in sm.warps]
    slow, group0, group1 = fin[0], fin[1:4], fin[4:]
    # warps 1-3 wait for warp 0 at every trip; warpgroup 1 runs its trips unhindered
    assert all(abs(f - slow) < 0.05 * slow for f in group0)
    assert max(group1) < 0.5 * slow
    # the square roots really cost something: the slow warp spends most of its time on them
    assert slow > TRIPS * 16 * sm90.op_for(sm.instrs[8].instr).latency * 0.5


def test_register_thread_count_is_resolved_too():
    # the count in a register as well: 64 threads (2 warps) per barrier, four barriers
    ptx = PTX.replace("shr.u32 %r2, %r1, 7;", "shr.u32 %r2, %r1, 6;\n  mov.u32 %r6, 64;") \
             .replace("bar.sync %r3, 128;", "bar.sync %r3, %r6;")
    prog, traces, sm = _run(ptx)
    (bar,) = named_barriers(prog)
    assert [tr.barriers[bar] for tr in traces] == [(1 + w // 2, 64) for w in range(8)]
    fin = [w.finish for w in sm.warps]
    assert abs(fin[1] - fin[0]) < 0.05 * fin[0]      # warp 1 shares warp 0's barrier
    assert max(fin[2:]) < 0.5 * fin[0]


def test_tc_gemm_tma_epilogue_deep_grid_simulates():
    # 128x128 tiles, TMA-store epilogue, 2048 tiles over 132 SMs (15-16 per CTA): deadlocked
    # before (the smallest of the shapes found to); 3 stages as the tuner's `tma` variants
    s = TcMatmulSchedule(BM=128, BN=128, wgmma_n=128, epilogue="tma", stages=3) \
        .for_dtype("bf16")
    shape = {"M": 4096, "N": 8192, "K": 512}
    r = tc_space.simulate(s, "sm_90a", shape, "bf16", "bf16", registers=168)
    assert "error" not in r, r["error"]
    # no faster than whole rounds of tiles at the tensor cores' peak
    assert r["us"] > tc_space.bound_us(s, shape, "sm_90a")


def test_a_barrier_id_that_changes_between_executions_is_warned_about(sm90):
    # every warp alternates between barriers 1 and 2 from one trip to the next
    ptx = PTX.replace("bar.sync %r3, 128;",
                      "and.b32 %r6, %r5, 1;\n  add.u32 %r3, %r6, 1;\n  bar.sync %r3, 256;")
    k = parse_ptx(ptx).kernels[0]
    prog = compile_kernel(k, sm90)
    warnings = {}
    p = follow(PathPlan(prog, Env({"out": 1 << 40}, {}, [])),
               _lane_specs(0, (1, 1, 1), (256, 1, 1), 5, 32, 132, 0, sm90), warnings=warnings)
    (bar,) = named_barriers(prog)
    assert p.trace.barriers[bar] == (1, None)         # the first execution's
    (text,) = warnings.values()
    assert f"instruction {bar}" in text and "barrier 1 in" in text and "and 2 later" in text
