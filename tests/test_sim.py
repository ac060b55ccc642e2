from ptxgen import isa as isamod
"""Simulator sanity: latency chains, issue limits, latency hiding, barriers, memory levels,
bandwidth, waves, loops and paths."""
import json

import numpy as np
import pytest

from ptxgen import isa
from ptxgen.errors import PtxgenError
from ptxgen.ir import Addr, Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ops import get_operator
from ptxgen.sim import simulate, simulate_operator
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import Env

TABLE = isa.load("sm_90")
H = TABLE.header
FMA = TABLE.ops["FMA"]


def _kernel(params=()):
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param("out", T.u64, ptr(T.f32))] + list(params))
    return m, k, Builder(k)


def fma_chains(n, chains=1):
    """Each thread runs `chains` independent chains of n dependent FMAs."""
    m, k, b = _kernel()
    out = b.param("out")
    xs = [b.const(1.0 + i, T.f32) for i in range(chains)]
    for _ in range(n):
        xs = [b.fma(x, x, x, out=x) for x in xs]
    acc = xs[0]
    for x in xs[1:]:
        acc = b.add(acc, x)
    b.st("global", out, acc)
    b.ret()
    return m, k


def sim(m, k, grid=(1,), block=(32,), **kw):
    kw.setdefault("registers", 32)
    return simulate(k, grid, block, module=m, **kw)


def test_dependent_chain_takes_n_times_latency():
    n = 1024
    m, k = fma_chains(n)
    r = sim(m, k)
    assert r.cycles == pytest.approx(n * FMA.latency, rel=0.03)
    assert r.stalls["dependency"] > 0.7
    table = isamod.load("sm_90")
    # device time: the cycles at the sustained clock plus the GPU's own per-launch gap; events
    # around a lone launch add the launch path's measured overhead
    assert r.device_us == pytest.approx(r.cycles / table.time_clock_mhz + table.kernel_gap_us)
    assert r.time_us == pytest.approx(r.device_us + table.launch_overhead_us)
    assert table.launch_overhead_us > 0 and table.time_clock_mhz < H.clock_mhz
    assert table.kernel_gap_us > 0


def test_independent_chains_saturate_issue():
    n, chains = 256, 8
    m, k = fma_chains(n, chains)
    # 4 warps: one per sub-partition, 8 independent FMAs each cover the 4-cycle latency
    r = sim(m, k, block=(32 * H.schedulers_per_sm,))
    assert r.issue_utilization > 0.9
    assert r.cycles == pytest.approx(n * chains * FMA.issue_interval, rel=0.05)
    assert r.unit_utilization["FMA"] > 0.9


def test_more_warps_hide_latency():
    n = 256
    m, k = fma_chains(n)
    per_sp = [sim(m, k, block=(32 * H.schedulers_per_sm * w,)) for w in (1, 2, 4, 8)]
    # up to latency/interval warps per sub-partition the time stays one chain's length ...
    for r in per_sp[:3]:
        assert r.cycles == pytest.approx(n * FMA.latency, rel=0.05)
    assert per_sp[2].ipc == pytest.approx(4 * per_sp[0].ipc, rel=0.05)
    # ... beyond, issue is the limit: twice the warps, twice the time
    assert per_sp[3].cycles == pytest.approx(2 * per_sp[2].cycles, rel=0.05)
    assert per_sp[0].stalls["dependency"] > 0.7 and per_sp[3].stalls["not_selected"] > 0.3


def test_bar_sync_waits_for_the_whole_cta(sm90):
    n = 300
    m, k, b = _kernel()
    out = b.param("out")
    tid = b.special("tid.x")
    x = b.const(1.0, T.f32, name="x")
    with b.if_(b.setp("lt", tid, 32)):          # only warp 0 runs the long chain
        for _ in range(n):
            b.fma(x, x, x, out=x)
    b.bar_sync(0)
    b.st("global", out, x)
    b.ret()
    r = sim(m, k, block=(64,))
    bar = sm90.ops["BAR"].latency
    assert r.cycles >= n * FMA.latency + bar
    assert r.stalls["barrier"] > 0.3
    events = r.trace_events[1]                  # warp 1 waits while warp 0 computes
    waits = [e for e in events if e[0] == "barrier"]
    assert waits and waits[0][2] - waits[0][1] >= n * FMA.latency
    # without the barrier warp 1 does not wait
    body = [s for s in k.body if not (getattr(s, "opcode", "") == "bar")]
    k.body[:] = body
    r2 = sim(m, k, block=(64,))
    assert r2.stalls["barrier"] == 0.0


def chase(n, space="global"):
    """n dependent loads: each address is the value loaded before (a pointer chase)."""
    m, k, b = _kernel()
    out = b.param("out")
    p = b.mov(out, name="p")
    for _ in range(n):
        b.ld(space, T.u64, p, out=p)
    b.st("global", out, p, type=T.u64)
    b.ret()
    return m, k


@pytest.mark.parametrize("level", ["L2", "DRAM"])
def test_memory_latency_by_level(level, sm90):
    n = 200
    m, k = chase(n)
    r = sim(m, k, level=level)
    assert r.cycles == pytest.approx(n * sm90.memory[level].latency, rel=0.03)
    assert r.stalls["memory"] > 0.9


def test_shared_chase_uses_shared_latency(sm90):
    n = 200
    m, k = chase(n, "shared")
    r = sim(m, k)
    assert r.cycles == pytest.approx(n * sm90.ops["LDS"].latency, rel=0.05)


def test_streaming_kernel_is_dram_bandwidth_bound(sm90):
    op = get_operator("saxpy")
    shape = op.shape(n=1 << 26)
    r = simulate_operator(op, shape, registers=32)
    achieved_gbs = op.bytes_moved(shape) / (r.device_us * 1e3)
    assert achieved_gbs == pytest.approx(sm90.memory["DRAM"].bandwidth_gbs, rel=0.1)
    assert achieved_gbs <= sm90.memory["DRAM"].bandwidth_gbs * 1.01
    assert r.stalls["memory"] > 0.8
    assert r.details["memory_model"]["dram_fraction"] == 1.0


def test_reuse_model_sends_reused_loads_to_l2():
    op = get_operator("matmul")
    shape = op.shape(M=512, N=512, K=512)
    r = simulate_operator(op, shape, registers=64)
    mm = r.details["memory_model"]
    assert mm["dram_fraction"] < 0.2
    assert mm["footprint_bytes"] == op.bytes_moved(shape)


def test_waves_scale_time():
    m, k = fma_chains(64)
    per_wave = H.sm_count * 8                   # 8 CTAs of 256 threads fill an SM's warps
    one = sim(m, k, grid=(per_wave,), block=(256,))
    two = sim(m, k, grid=(2 * per_wave,), block=(256,))
    assert one.details["ctas_per_sm"] == 8
    # the second wave adds its steady-state share: the first wave's store drain overlaps it
    assert two.cycles <= 2 * one.cycles
    assert two.cycles == pytest.approx(2 * one.cycles, rel=0.02)
    tail = sim(m, k, grid=(2 * per_wave + 1,), block=(256,))
    assert [w["kind"] for w in tail.details["waves"]] == ["full", "tail"]
    assert tail.cycles > two.cycles


def test_a_resident_wave_lasts_as_long_as_its_slowest_cta():
    """One CTA per SM (its shared memory allows no second), a grid of exactly one wave looping
    over tiles: with 4 x sm_count + 16 tiles the first 16 CTAs run 5 tiles and the rest 4 (the
    middle of the grid is not the slowest); the launch takes 5 tiles' time, as long as
    5 x sm_count tiles."""
    m, k = loop_kernel(64, persistent=True)
    S = H.sm_count
    big = H.shared_per_sm // 2 + 1024
    wave = {n: sim(m, k, grid=(S,), block=(128,), args={"n": n}, shared_bytes=big)
            for n in (4 * S, 4 * S + 16, 5 * S)}
    assert wave[4 * S].details["ctas_per_sm"] == 1
    assert [(w["kind"], w["count"]) for w in wave[4 * S].details["waves"]] == [("full", 1)]
    t = {n: r.cycles for n, r in wave.items()}
    assert t[4 * S + 16] == pytest.approx(t[5 * S], rel=0.01)
    assert t[4 * S + 16] > 1.2 * t[4 * S]
    # over several waves CTAs start as others finish: the typical CTA (from the middle of the
    # grid) stands for a wave, and 16 extra tiles among 32 x sm_count cost little
    many = {n: sim(m, k, grid=(8 * S,), block=(1024,), args={"n": n})
            for n in (32 * S, 32 * S + 16)}
    assert [w["count"] for w in many[32 * S + 16].details["waves"]] == [4]
    assert many[32 * S + 16].cycles == pytest.approx(many[32 * S].cycles, rel=0.02)


def loop_kernel(body=8, persistent=False):
    """for i in range(n): `body` dependent FMAs — n is a parameter. persistent: a persistent
    grid's tile loop instead, CTA c taking tiles c, c + nctaid, … below n."""
    m, k, b = _kernel([Param("n", T.u32)])
    out, n = b.param("out"), b.param("n")
    x = b.const(1.0, T.f32, name="x")
    start, step = (b.special("ctaid.x"), b.special("nctaid.x")) if persistent else (0, 1)
    with b.for_range(start, n, step, type=T.u32):
        for _ in range(body):
            b.fma(x, x, x, out=x)
    b.st("global", out, x)
    b.ret()
    return m, k


def test_loop_trip_count_from_arguments_and_override(sm90):
    m, k = loop_kernel()
    r10 = sim(m, k, args={"n": 10}, sample=64)
    r20 = sim(m, k, args={"n": np.uint32(20)}, sample=64)
    r30 = sim(m, k, args={"n": 30}, sample=64)
    # each trip costs the same: at least its 8 dependent FMAs, plus the loop's own overhead
    assert r30.cycles - r20.cycles == pytest.approx(r20.cycles - r10.cycles, rel=0.01)
    per_iter = (r20.cycles - r10.cycles) / 10
    assert 8 * FMA.latency <= per_iter <= 8 * FMA.latency + 4 * sm90.ops["BRANCH"].latency
    t20 = sim(m, k, args={"n": 10}, trip=20, sample=64)
    assert t20.cycles == pytest.approx(r20.cycles, rel=0.01)
    unknown = sim(m, k, sample=64)              # no value: one trip and a warning
    assert unknown.warnings and "trip" in unknown.warnings[0]
    assert unknown.cycles < r10.cycles


def test_loop_sampling_extrapolates_steady_state():
    m, k = loop_kernel()
    full = sim(m, k, args={"n": 200}, block=(256,), sample=256)
    sampled = sim(m, k, args={"n": 200}, block=(256,), sample=8)
    assert full.details["waves"][0]["loop_iterations_extrapolated"] == 0
    assert sampled.details["waves"][0]["loop_iterations_extrapolated"] > 150
    assert sampled.cycles == pytest.approx(full.cycles, rel=0.02)
    assert sampled.ipc == pytest.approx(full.ipc, rel=0.03)
    # the work avoided, in simulated cycles (wall-clock seconds of a 0.1 s run flip under load)
    full_work = full.details["waves"][0]["simulated_cycles"]
    assert sampled.details["waves"][0]["simulated_cycles"] < full_work / 10


def _follow(m, k, grid, block, cta=0, warp=0, args=None):
    from ptxgen.sim.launch import _lane_specs, _param_values, _symbols
    prog = compile_kernel(k, TABLE)
    plan = PathPlan(prog, Env(_param_values(k, args), _symbols(k, m)))
    specs = _lane_specs(cta, grid, block, warp, 32, H.sm_count, 0, TABLE)
    return prog, follow(plan, specs)


def test_sampled_loop_is_counted_without_running_it(sm90):
    m, k = loop_kernel()
    from ptxgen.sim.launch import _lane_specs, _param_values, _symbols
    prog = compile_kernel(k, sm90)
    specs = _lane_specs(0, (1, 1, 1), (32, 1, 1), 0, 32, H.sm_count, 0, sm90)
    results = []
    for n in (37, 1000, 123457):
        plan = PathPlan(prog, Env(_param_values(k, {"n": n}), _symbols(k, m)))
        full = follow(plan, specs) if n < 2000 else None
        p = follow(plan, specs, cap=(8, 4), hot_loop=0)
        assert [sk for _t, sk in p.samples] == [n - 8, n - 4]
        assert p.loop_iters[0] == n
        if full is not None:
            # the trace keeps the first 8 iterations and the last, partial one
            nb = len(prog.blocks)
            per_iter = (len(full.trace) - len(p.trace)) / (n - 8)
            assert per_iter == int(per_iter) and per_iter >= 1
            assert [e % nb for e in p.trace[-3:]] == [e % nb for e in full.trace[-3:]]
        results.append(p.steps)
    assert results[2] < 3 * results[1]          # 100x the trips, not 100x the work


def test_grid_stride_trip_count_follows_the_thread():
    op = get_operator("saxpy")
    shape = op.shape(n=1 << 20)
    m = op.build(shape)
    k = m.kernels[0]
    cfg = op.launch(shape)
    args = op.kernel_args(shape, {"x": None, "y": None, "out": None, "a": np.float32(1)})
    prog, path = _follow(m, k, cfg.grid, cfg.block, args=args)
    threads = cfg.grid[0] * cfg.block[0]
    expect = -(-(shape["n"] // 4) // threads)   # lane 0 of CTA 0: ceil(n4 / stride)
    assert max(path.loop_iters.values()) == expect


def test_divergent_branch_runs_the_body_while_any_lane_needs_it():
    for cmp, bound, runs in (("lt", 16, True), ("ge", 16, True), ("ge", 32, False)):
        m, k, b = _kernel()
        out = b.param("out")
        tid = b.special("tid.x")
        with b.if_(b.setp(cmp, tid, bound)):
            b.st("global", out, b.const(1.0, T.f32))
        b.ret()
        prog, path = _follow(m, k, (1, 1, 1), (64, 1, 1))
        nb = len(prog.blocks)
        stores = sum(1 for e in path.trace for i in range(prog.blocks[e % nb].start,
                                                            prog.blocks[e % nb].end)
                     if prog.instrs[i].instr.opcode == "st")
        assert (stores == 1) == runs, (cmp, bound)


def test_predicated_off_loads_make_no_traffic():
    m, k, b = _kernel()
    out = b.param("out")
    tid = b.special("tid.x")
    p = b.setp("ge", tid, 1 << 20)              # false for every thread
    with b.predicated(p):
        b.ld("global", T.f32, out)
    b.ret()
    r = sim(m, k, level="DRAM")
    assert r.details["waves"][0]["global_loads_by_level"]["DRAM"] == 0


def test_trace_and_png(tmp_path):
    m, k = fma_chains(32, 2)
    r = sim(m, k, block=(128,), trace_warps=3)
    tj, png = tmp_path / "t.json", tmp_path / "t.png"
    r.write_trace(str(tj))
    data = json.loads(tj.read_text())
    tids = {e["tid"] for e in data["traceEvents"] if e.get("ph") == "X"}
    assert tids == {0, 1, 2}
    issues = [e for e in data["traceEvents"] if e.get("cat") == "issue" and e["tid"] == 0]
    assert len(issues) == len([s for s in k.body if hasattr(s, "opcode")])
    # every instruction issues once, in the list-scheduled order ptxas would run (the
    # parameter load that feeds the chains still comes before any FMA)
    names = [e["name"] for e in issues]
    assert any(n.startswith("ld.param") for n in names)
    assert min(i for i, n in enumerate(names) if n.startswith("ld.param")) < \
        min(i for i, n in enumerate(names) if n.startswith("fma"))
    r.write_png(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_keys_and_bad_inputs(sm90):
    m, k = fma_chains(4)
    d = sim(m, k).to_dict()
    for key in ("cycles", "time_us", "ipc", "issue_utilization", "unit_utilization", "stalls"):
        assert key in d
    assert set(d["stalls"]) == {"dependency", "memory", "barrier", "throughput",
                                "not_selected"}
    assert set(d["unit_utilization"]) == set(sm90.units)
    for bad in (dict(grid=(0,)), dict(block=(2048,)), dict(trip=0), dict(level="L3"),
                dict(args={"nope": 1}), dict(args=[1, 2, 3]), dict(sample=2)):
        kw = dict(grid=(1,), block=(32,))
        kw.update(bad)
        with pytest.raises(PtxgenError) as e:
            sim(m, k, **kw)
        assert "\n" not in str(e.value)


def test_kernel_too_big_for_an_sm():
    m, k = fma_chains(4)
    with pytest.raises(PtxgenError, match="does not fit"):
        sim(m, k, block=(1024,), registers=255)


def test_argument_by_position_and_mangled_suffix():
    m, k = loop_kernel()
    a = sim(m, k, args={"1": 12}, sample=64)
    b = sim(m, k, args={"n": 12}, sample=64)
    assert a.cycles == b.cycles and not a.warnings
    with pytest.raises(PtxgenError, match="no parameter"):
        sim(m, k, args={"7": 1})


def test_memory_addresses_of_parameters():
    """ld.param of a pointer gives a synthetic address, so address arithmetic stays known."""
    m, k, b = _kernel([Param("n", T.u32)])
    out = b.param("out")
    q = b.add(out, 64, type=T.u64)
    p = b.setp("ne", q, 0, type=T.u64)
    with b.if_(p):
        b.st("global", Addr(out), b.const(1.0, T.f32))
    b.ret()
    prog, path = _follow(m, k, (1, 1, 1), (32, 1, 1))
    assert len(path.trace) == 3                  # entry, body, exit: the branch is known


def test_footprint_within_l2_stays_resident_across_launches():
    """A launch whose footprint fits in L2 is served by L2 when warm, by DRAM when cold."""
    from ptxgen.ops import get_operator
    from ptxgen.sim import simulate_operator
    op = get_operator("saxpy")
    sh = op.shape(n=1 << 20)                 # 12 MiB: fits the H200's 60 MiB L2
    warm = simulate_operator(op, sh, "sm_90", registers=24)
    cold = simulate_operator(op, sh, "sm_90", registers=24, cache="cold")
    assert warm.details["memory_model"]["l2_resident"]
    assert not cold.details["memory_model"]["l2_resident"]
    assert warm.details["waves"][0]["global_loads_by_level"]["DRAM"] == 0
    assert cold.details["waves"][0]["global_loads_by_level"]["DRAM"] > 0
    big = simulate_operator(op, op.shape(n=1 << 24), "sm_90", registers=24)   # 192 MiB
    assert not big.details["memory_model"]["l2_resident"]


def test_tensor_map_operators_simulate():
    """simulate_operator gives a tensor map's placeholder array its shape and type (from the
    operator's own make_inputs, every draw zeros): the sm_90a GEMM simulates."""
    from ptxgen.ops.tc_matmul import TcMatmul
    from ptxgen.sim import simulate_operator
    op = TcMatmul("bf16", "f32")
    small = simulate_operator(op, op.shape(M=256, N=256, K=256), arch="sm_90a")
    big = simulate_operator(op, op.shape(M=1024, N=1024, K=1024), arch="sm_90a")
    assert 0 < small.device_us < big.device_us


# warps 3 and 7 of each CTA (sub-partition 3) run a long integer loop after a load, the others
# only the load: the busiest sub-partition's ALU is what each further wave costs once CTAs start
# in the slots of those that end, not the whole span of a wave started in step
UNEVEN = """.version 8.0
.target sm_90
.address_size 64

.visible .entry uneven(.param .u64 src, .param .u32 n)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src];
  ld.param.u32 %r9, [n];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mad.lo.s32 %r3, %r2, 256, %r1;
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r4, [%rd3];
  shr.u32 %r5, %r1, 5;
  and.b32 %r6, %r5, 3;
  setp.ne.u32 %p1, %r6, 3;
  @%p1 bra DONE;
  mov.u32 %r7, 0;
LOOP:
  xor.b32 %r10, %r4, %r7;
  xor.b32 %r11, %r4, %r10;
  xor.b32 %r12, %r7, %r11;
  xor.b32 %r13, %r12, %r10;
  xor.b32 %r14, %r13, %r11;
  xor.b32 %r4, %r14, %r12;
  add.s32 %r7, %r7, 1;
  setp.lt.u32 %p2, %r7, %r9;
  @%p2 bra LOOP;
  st.global.u32 [%rd3], %r4;
DONE:
  ret;
}
"""


def test_further_waves_overlap_the_ramps_of_uneven_ctas(monkeypatch):
    from ptxgen.parse import parse_ptx
    k = parse_ptx(UNEVEN).kernels[0]
    table = isa.load("sm_90")
    per_wave = table.header.sm_count * 8        # 8 CTAs of 256 threads per SM
    trips = 50

    def cycles(waves):
        r = simulate(k, (per_wave * waves,), (256,), args=[None, trips], registers=16,
                     level="L2")
        return r.cycles

    one = cycles(1)
    steady = (cycles(4) - one) / 3
    assert steady < 0.92 * one
    # sub-partition 3's ALU work (its 16 warps x trips x 6 xor) still bounds each wave
    alu = 16 * trips * 6 * table.ops["IALU"].issue_interval
    assert 0.97 * alu < steady < one
    # in step (a target without the relaunch figure): each further wave costs a whole wave
    monkeypatch.delitem(table.memory_model, "cta_relaunch_cycles")
    assert (cycles(4) - cycles(1)) / 3 == pytest.approx(cycles(1), rel=1e-3)
