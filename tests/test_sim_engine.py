"""The simulator's event loop in parts (ptxgen.sim.engine.Sm): warp choice, issue, stall
accounting and barriers, each driven alone."""
import pytest

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import memory as memmod
from ptxgen.sim.engine import Sm
from ptxgen.sim.program import compile_kernel

TABLE = isa.load("sm_90")
HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
# two dependent FMAs, a barrier, one more FMA
PTX = HEAD + """.visible .entry k(.param .u64 out)
{
  .reg .f32 %f<4>;
  mov.f32 %f1, 0f3F800000;
  fma.rn.f32 %f2, %f1, %f1, %f1;
  fma.rn.f32 %f3, %f2, %f2, %f2;
  bar.sync 0;
  fma.rn.f32 %f1, %f3, %f3, %f3;
  ret;
}
"""


def _sm(warps_per_cta=1, ctas=1):
    k = parse_ptx(PTX).kernels[0]
    prog = compile_kernel(k, TABLE)
    mem = memmod.SmMemory(memmod.memory_config(TABLE, 132))
    traces = [[[0] for _ in range(warps_per_cta)] for _ in range(ctas)]
    return Sm(prog, traces, TABLE, mem), prog


def test_pick_is_greedy_then_oldest():
    sm, _ = _sm(warps_per_cta=8)
    for w in sm.warps:
        sm.load_block(w)
        sm.schedule(w, 0.0)
    q = sm.queues[0]
    assert [w.wid for w in q] == [0, 4]          # warps i and i+4 share scheduler 0
    assert sm.pick(0, 0.0, 1.0) is q[0]          # nothing issued yet: the oldest
    sm.last[0] = q[1]
    assert sm.pick(0, 0.0, 1.0) is q[1]          # the one issued last, while it can go
    q[1].ready = 5.0
    assert sm.pick(0, 0.0, 1.0) is q[0]          # it cannot: back to the oldest


def test_issue_sets_the_scoreboard_and_schedule_charges_the_wait():
    sm, prog = _sm()
    w = sm.warps[0]
    sm.load_block(w)
    sm.schedule(w, 0.0)
    fma = TABLE.ops["FMA"]
    assert sm.step(w, 0, 0.0) == 0.0           # mov: issued, the fma scheduled
    mov_done = w.ready                          # the fma waits for the mov's result
    assert mov_done == pytest.approx(TABLE.op_for(prog.instrs[0].instr).latency)
    before = sm.stalls["dependency"]
    t1 = sm.step(w, 0, mov_done)               # the first fma
    assert t1 == mov_done
    # the second fma waits for the first one's result: a dependency stall until it arrives
    assert w.ready == pytest.approx(t1 + fma.latency)
    assert sm.stalls["dependency"] - before == pytest.approx(fma.latency - 1)


def test_barrier_releases_after_the_last_warp():
    sm, _ = _sm(warps_per_cta=3)
    r = sm.run()
    bar = TABLE.ops["BAR"].latency
    assert r.stalls["barrier"] > 0
    # every warp leaves the barrier at the same cycle: the last arrival plus its latency
    assert len({w.finish for w in sm.warps}) == 1
    assert r.cycles > bar


# 8 independent rsqrt per trip: with .ftz ptxas emits the MUFU alone, without it a range fix-up
# of FP32 instructions around each (isa memory_model.ptxas_sfu_range_fixup_instructions)
def _sfu_loop(op, chains=8):
    return HEAD + """.visible .entry k(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<3>;
  .reg .f32 %f<17>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.b32 %f1, 0f3F800000;
LOOP:
""" + "".join(f"  {op} %f{k + 9}, %f{k + 1};\n  add.f32 %f{k + 1}, %f{k + 1}, %f{k + 9};\n"
              for k in range(chains)) + """  add.s32 %r1, %r1, -1;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra LOOP;
  st.global.f32 [%rd1], %f1;
  ret;
}
"""


def test_sfu_range_fixup_costs_issue_slots_and_latency():
    from ptxgen.sim import simulate
    n = TABLE.memory_model["ptxas_sfu_range_fixup_instructions"]
    assert n == 3
    plain, fixed = (compile_kernel(parse_ptx(_sfu_loop(op)).kernels[0], TABLE)
                    for op in ("rsqrt.approx.ftz.f32", "rsqrt.approx.f32"))
    pick = [next(s for s in p.instrs if s.instr.opcode == "rsqrt") for p in (plain, fixed)]
    assert pick[0].extra == () and pick[1].extra[0][0] == n
    assert pick[1].latency == pytest.approx(
        pick[0].latency + n * TABLE.ops["FMUL"].latency)
    # sin has no such fix-up (ptxas: FMUL.RZ + MUFU.SIN with or without .ftz)
    sin = compile_kernel(parse_ptx(_sfu_loop("sin.approx.f32")).kernels[0], TABLE)
    assert next(s for s in sin.instrs if s.instr.opcode == "sin").extra == ()
    # one warp, one dependent chain: each trip waits for the fix-up's FP32 latency too
    t = [simulate(parse_ptx(_sfu_loop(op, chains=1)).kernels[0], (1,), (32,),
                  args=[0, 256], registers=32).device_us
         for op in ("rsqrt.approx.ftz.f32", "rsqrt.approx.f32")]
    assert t[1] > 1.3 * t[0]


def test_register_spills_become_local_memory_issues(monkeypatch):
    from ptxgen.sim.program import add_spills
    prog = compile_kernel(parse_ptx(_sfu_loop("rsqrt.approx.ftz.f32")).kernels[0], TABLE)
    issuing = [s for s in prog.instrs if not s.free]
    add_spills(prog, TABLE, 8 * len(issuing), 4 * len(issuing))
    ldl, stl = (prog.units.index(TABLE.ops[c].unit) for c in ("LDL", "STL"))
    for s in issuing:
        # 8 bytes of spill loads and 4 of stores per instruction: two LDL and one STL issues
        assert [(k, u) for k, u, _i in s.extra] == [(2.0, ldl), (1.0, stl)]
    assert all(s.extra == () for s in prog.instrs if s.free)
    # in the engine they hold the scheduler: the same loop takes longer with them
    from ptxgen.sim import simulate
    k = parse_ptx(_sfu_loop("rsqrt.approx.ftz.f32", chains=1)).kernels[0]
    base = simulate(k, (132 * 8,), (256,), args=[0, 64], registers=32).device_us
    import ptxgen.sim.launch as L
    # (ptxas's -v report for a kernel that spills 1024 bytes of loads and 512 of stores)
    monkeypatch.setattr(L, "_registers", lambda module, kernel, arch, warnings, given=None:
                        (32, 1024, 512))
    spilled = simulate(k, (132 * 8,), (256,), args=[0, 64], registers=32).device_us
    assert spilled > 1.5 * base


def test_a_further_cta_starts_in_the_slots_of_the_one_that_ends():
    k = parse_ptx(PTX).kernels[0]
    prog = compile_kernel(k, TABLE)
    relaunch = TABLE.memory_model["cta_relaunch_cycles"]
    # CTA 0: one warp, one pass; CTA 1: three warps (slots 1-3), three passes; CTAs 2 and 3
    # wait for free slots
    traces = [[[0]], [[0, 0, 0]] * 3, [[0]] * 3, [[0]]]

    def run(resident):
        sm = Sm(prog, traces, TABLE, memmod.SmMemory(memmod.memory_config(TABLE, 132)),
                resident=resident)
        return sm, sm.run()

    sm, r = run(2)
    ends = {c: max(w.finish for w in sm.warps if w.cta == c) for c in range(4)}
    assert ends[0] < ends[1] < ends[0] + relaunch
    # CTA 2 takes the slot CTA 0 left (sub-partition 0) for all its warps, the relaunch
    # time after CTA 0 ended; CTA 3 takes CTA 1's slots once CTA 1 has ended
    assert {w.sched for w in sm.warps if w.cta == 2} == {0}
    assert {w.sched for w in sm.warps if w.cta == 3} == {1}
    assert ends[0] + relaunch < ends[2] < ends[3] and ends[1] + relaunch < ends[3]
    # every CTA resident at once (the default) runs them together: much sooner, same work
    _, together = run(None)
    assert together.cycles + relaunch < r.cycles
    assert r.issued == together.issued
