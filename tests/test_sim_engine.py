"""The simulator's event loop in parts (ptxgen.sim.engine.Sm): warp choice, issue, stall
accounting and barriers, each driven alone; the sampled loop (ptxgen.sim.waves: its iteration
caps, the per-iteration cost from the slowest warps), a shorter sample's run copied off the
longer one (Sm.set_alternative), and the event loop's written-out common case
(ptxgen.sim.engine_loop.issue_loop) against one Sm.pick and one Sm.step call per issue."""
import pytest

from model_data import measured_case
from ptxgen import isa
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.parse import parse_ptx
from ptxgen.sim import memory as memmod
from ptxgen.sim import simulate
from ptxgen.sim.engine import Sm
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.waves import SAMPLE_COVER, sample_caps, sampled_pair
from sim_helpers import HEAD, count_issues

TABLE = isa.load("sm_90")
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


def test_issue_sets_the_scoreboard_and_schedule_charges_the_wait(sm90):
    sm, prog = _sm()
    w = sm.warps[0]
    sm.load_block(w)
    sm.schedule(w, 0.0)
    fma = sm90.ops["FMA"]
    assert sm.step(w, 0, 0.0) == 0.0           # mov: issued, the fma scheduled
    mov_done = w.ready                          # the fma waits for the mov's result
    assert mov_done == pytest.approx(sm90.op_for(prog.instrs[0].instr).latency)
    before = sm.stalls["dependency"]
    t1 = sm.step(w, 0, mov_done)               # the first fma
    assert t1 == mov_done
    # the second fma waits for the first one's result: a dependency stall until it arrives
    assert w.ready == pytest.approx(t1 + fma.latency)
    assert sm.stalls["dependency"] - before == pytest.approx(fma.latency - 1)


def test_barrier_releases_after_the_last_warp(sm90):
    sm, _ = _sm(warps_per_cta=3)
    r = sm.run()
    bar = sm90.ops["BAR"].latency
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


def test_sfu_range_fixup_costs_issue_slots_and_latency(sm90):
    from ptxgen.sim import simulate
    n = sm90.memory_model["ptxas_sfu_range_fixup_instructions"]
    assert n == 3
    plain, fixed = (compile_kernel(parse_ptx(_sfu_loop(op)).kernels[0], sm90)
                    for op in ("rsqrt.approx.ftz.f32", "rsqrt.approx.f32"))
    pick = [next(s for s in p.instrs if s.instr.opcode == "rsqrt") for p in (plain, fixed)]
    assert pick[0].extra == () and pick[1].extra[0][0] == n
    assert pick[1].latency == pytest.approx(
        pick[0].latency + n * sm90.ops["FMUL"].latency)
    # sin has no such fix-up (ptxas: FMUL.RZ + MUFU.SIN with or without .ftz)
    sin = compile_kernel(parse_ptx(_sfu_loop("sin.approx.f32")).kernels[0], sm90)
    assert next(s for s in sin.instrs if s.instr.opcode == "sin").extra == ()
    # one warp, one dependent chain: each trip waits for the fix-up's FP32 latency too
    t = [simulate(parse_ptx(_sfu_loop(op, chains=1)).kernels[0], (1,), (32,),
                  args=[0, 256], registers=32).device_us
         for op in ("rsqrt.approx.ftz.f32", "rsqrt.approx.f32")]
    assert t[1] > 1.3 * t[0]


def test_register_spills_become_local_memory_issues(monkeypatch, sm90):
    from ptxgen.sim.program import add_spills
    prog = compile_kernel(parse_ptx(_sfu_loop("rsqrt.approx.ftz.f32")).kernels[0], sm90)
    issuing = [s for s in prog.instrs if not s.free]
    add_spills(prog, sm90, 8 * len(issuing), 4 * len(issuing))
    ldl, stl = (prog.units.index(sm90.ops[c].unit) for c in ("LDL", "STL"))
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


def test_a_further_cta_starts_in_the_slots_of_the_one_that_ends(sm90):
    k = parse_ptx(PTX).kernels[0]
    prog = compile_kernel(k, sm90)
    relaunch = sm90.memory_model["cta_relaunch_cycles"]
    # CTA 0: one warp, one pass; CTA 1: three warps (slots 1-3), three passes; CTAs 2 and 3
    # wait for free slots
    traces = [[[0]], [[0, 0, 0]] * 3, [[0]] * 3, [[0]]]

    def run(resident):
        sm = Sm(prog, traces, sm90, memmod.SmMemory(memmod.memory_config(sm90, 132)),
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


# -- the sampled loop: its iteration caps, the pair read off the slowest warps, a shorter
# sample's run copied off the longer one, and the event loop's written-out common case
# one block of 32 independent 64-bit adds
_PTX = HEAD + """.visible .entry k(.param .u64 out)
{
  .reg .b64 %rd<40>;
  mov.u64 %rd1, 1;
""" + "\n".join(f"  add.s64 %rd{i + 2}, %rd1, %rd1;" for i in range(32)) + """
  ret;
}
"""


# barriers and shuffles; shared atomics; cp.async and mma.sync (async-copy roles); 64-bit
# division and remainder (ptxas's extra SASS) with local memory; a warp-aggregated atomic
# (match.any); a long-iteration DP row in local memory (16 warps a scheduler on one pipe)
CASES = ("triton_rmsnorm 65536x768", "hist_shared n=4194304",
         "triton_decode_gqa kvheads=64 S=3001", "fft_radix2 n=6291456 half=1",
         "ptx_match_hist n=2000003", "permute_nchw 16x256x64x64")
SET = "model_set_2026-12-02a_held10.json.gz"


def kept(rep):
    return rep.details["sampled_loop"]["iterations"]


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


def _predict(name, inline, monkeypatch):
    import model_eval
    monkeypatch.setattr(Sm, "inline", inline)
    steps, step = [0], Sm.step

    def counted(self, w, s, now):
        steps[0] += 1
        return step(self, w, s, now)

    monkeypatch.setattr(Sm, "step", counted)
    issues = count_issues(monkeypatch)
    case = measured_case(SET, name)
    rep, _wall = model_eval.predict(case, launch_path=case.get("path", "cuda.core"))
    monkeypatch.undo()
    d = rep.to_dict()
    d.pop("wall_s", None)
    d["details"].pop("simulation_seconds")
    d["events"] = rep.trace_events
    return d, sum(issues), steps[0]


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


def test_paths_that_differ_from_their_first_block_are_not_shared(sm90):
    k = parse_ptx(_PTX).kernels[0]
    prog = compile_kernel(k, sm90)
    sm = Sm(prog, [[[0, 0]]], sm90, memmod.SmMemory(memmod.memory_config(sm90, 132)))
    sm.set_alternative([[[1 * len(prog.blocks)]]])     # another lane mask from the start
    assert sm.alt is None
    sm.set_alternative([[[0]]])                         # a prefix: shared up to its end
    assert sm.alt is not None and sm.warps[0].split == 1
    sm.run()
    ref = Sm(prog, [[[0]]], sm90, memmod.SmMemory(memmod.memory_config(sm90, 132))).run()
    assert sm.alt_result is not None
    assert (sm.alt_result.cycles, sm.alt_result.issued, sm.alt_result.stalls) == \
        (ref.cycles, ref.issued, ref.stalls)


@pytest.mark.parametrize("name", CASES)
def test_written_out_loop_equals_the_reference_loop(name, monkeypatch):
    ref, n_ref, steps_ref = _predict(name, False, monkeypatch)
    new, n_new, steps_new = _predict(name, True, monkeypatch)
    assert n_ref == n_new == steps_ref > 0
    # every figure of the report (cycles, stalls, unit busy, traced warps' events ...)
    assert new == ref
    # ... while the written-out path took the issues it is for (Sm.step only for the rest)
    assert steps_new < n_new


def test_most_issues_of_an_alu_bound_loop_skip_the_call_chain(monkeypatch):
    _d, n, steps = _predict("permute_nchw 16x256x64x64", True, monkeypatch)
    assert steps < 0.5 * n, (steps, n)
