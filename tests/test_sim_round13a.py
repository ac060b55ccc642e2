"""Round sim13a of the simulator (issue 14): held10's misses (docs/data/
model_set_2026-12-02a_held10.json.gz, measured on the H200; held10 is seen data since its blind
evaluation)."""

import numpy as np
import pytest

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim.access import address_slice
from ptxgen.sim.launch import _lane_specs
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import Env
from model_data import measured_case

TABLE = isa.load("sm_90")
KEYS, BINS = 1 << 32, 1 << 33          # synthetic array addresses


def _case(name):
    return measured_case("model_set_2026-12-02a_held10.json.gz", name)


def _walk(ptx, entry, params, memory, record):
    """Lane addresses one warp (every lane followed) gives the first instruction whose text
    starts with `record`."""
    kernel = parse_ptx(ptx).kernel(entry)
    prog = compile_kernel(kernel, TABLE)
    i = next(st.index for st in prog.instrs if st.instr.opcode == record)
    plan = PathPlan(prog, Env(params, {}, memory), slice_=address_slice(prog, [i]), record=[i])
    path = follow(plan, _lane_specs(0, (4, 1, 1), (256, 1, 1), 1, 32, 132, 0, TABLE,
                                    every_lane=True))
    ran = any(prog.blocks[e % len(prog.blocks)].start <= i < prog.blocks[e % len(prog.blocks)].end
              for e in path.trace)
    return plan.records[i][0][0], ran


def test_a_warp_aggregated_histogram_adds_once_per_distinct_key():
    """ptx_match_hist: match.any.sync groups the lanes by key, the lowest lane of each group
    (peers & %lanemask_lt == 0) adds the group's count with red.global.add. The walk did not
    evaluate the match: every lane looked like a leader, 32 adds a warp with ~1.6 lanes on
    each word, the address's atomic unit 2.6x too busy (+157 / +154 %). With the match
    evaluated only the ~20 leaders add, one per word."""
    case = _case("ptx_match_hist n=2000003")
    keys = np.random.default_rng(1).integers(0, 32, size=1024).astype(np.int32)
    params = {"n": 1024, "keys": KEYS, "bins": BINS}
    lanes, _ = _walk(case["ptx"], case["entry"], params, [(KEYS, keys.tobytes())], "red")
    mine = keys[32:64]                                  # warp 1 of CTA 0
    leaders = {int(np.flatnonzero(mine == k)[0]) for k in set(mine.tolist())}
    assert {k for k, a in enumerate(lanes) if a is not None} == leaders
    assert sorted(a for a in lanes if a is not None) == sorted(BINS + 4 * int(k)
                                                               for k in set(mine.tolist()))
    # keys the walk cannot read: the match is unknown and every lane adds (a guarded body runs)
    # (the addresses, made of the keys, are unknown too)
    assert _walk(case["ptx"], case["entry"], params, [], "red")[1]


@pytest.mark.parametrize("name", ["ptx_match_hist n=2000003", "ptx_match_hist n=20000003"])
def test_match_hist_is_priced_by_its_leaders_adds(name):
    import model_eval
    case = _case(name)
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert abs(rep.device_us / case["gpu_us"] - 1) < 0.1


# match.all: a warp whose lanes all hold one value stores, the others do not
ALL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry uniform(.param .u64 x, .param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r5, [%rd4];
  match.all.sync.b32 %r6|%p1, %r5, -1;
  add.s64 %rd5, %rd2, %rd3;
  @%p1 st.global.u32 [%rd5], %r6;
  ret;
}
"""


@pytest.mark.parametrize("uniform", [True, False])
def test_match_all_is_true_only_for_a_warp_of_one_value(uniform):
    x = np.zeros(1024, np.int32) if uniform else np.arange(1024, dtype=np.int32) % 2
    lanes, _ = _walk(ALL, "uniform", {"x": KEYS, "out": BINS}, [(KEYS, x.tobytes())], "st")
    assert all((a is not None) == uniform for a in lanes)


def test_stores_count_the_bytes_they_write_against_the_footprint():
    """nv12_to_rgb writes each pixel's three channels with three st.u8 (a lane's bytes three
    apart: 32 bytes of data over four sectors per store). The loads' share of DRAM is the
    footprint's bytes the launch does not only write over what they ask of L2; counted in
    sectors the stores wrote 4x their 100 MB (more than the whole footprint) and every load
    was taken to come from DRAM. Counted in the lanes' bytes the loads' DRAM share is the
    input's: Y and UV planes, 50 MB, of the 100 MB of sectors they ask for."""
    import model_eval
    case = _case("nv12_to_rgb 4322x7682")
    h, w = case["h"], case["w"]
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    mm = rep.to_dict()["details"]["memory_model"]
    assert mm["footprint_bytes"] == h * w + h // 2 * w + 3 * h * w
    expected = (mm["footprint_bytes"] - 3 * h * w) / mm["requested_load_bytes"]
    assert mm["dram_fraction"] == pytest.approx(expected, rel=0.02)
    assert 0.4 < mm["dram_fraction"] < 0.6
