"""What the simulator's value walk knows: the index a one-register vector load gives, a ballot-driven
early exit that follows the data, conversions' wrap rules, and branches on floats compared with
constants beyond or within the magnitude of ordinary data (libdevice's sin and cos)."""
import numpy as np
import pytest


from model_data import measured_case
from ptxgen import isa
from ptxgen.ir import types as T
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate
from ptxgen.sim.launch import _lane_specs
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import DATA_MAGNITUDE, Env, convert, converter
from sim_helpers import Arr, HEAD, accesses


# one CTA per bag: row = idx[ctaid] (loaded the way Triton writes every load, through inline
# asm into a vector of one register), then each of the 128 threads reads table[row * 128 + tid]
BAG = HEAD + """.visible .entry bag(.param .u64 idx, .param .u64 table, .param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [idx];
  ld.param.u64 %rd2, [table];
  ld.param.u64 %rd3, [out];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.b32 { %r3 }, [ %rd5 + 0 ];
  shl.b32 %r4, %r3, 7;
  add.s32 %r5, %r4, %r2;
  mul.wide.u32 %rd6, %r5, 4;
  add.s64 %rd7, %rd2, %rd6;
  ld.global.b32 { %r6 }, [ %rd7 + 0 ];
  shl.b32 %r7, %r1, 7;
  add.s32 %r7, %r7, %r2;
  mul.wide.u32 %rd8, %r7, 4;
  add.s64 %rd9, %rd3, %rd8;
  st.global.b32 [%rd9], %r6;
  ret;
}
"""
FIND = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry find(.param .u64 x, .param .u64 out)
{
  .reg .pred %p<4>; .reg .b32 %r<10>; .reg .b64 %rd<10>; .reg .f32 %f<2>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  mov.u32 %r2, %tid.x;
  and.b32 %r3, %r2, 31;
  mov.u32 %r4, 0;
LOOP:
  add.u32 %r5, %r4, %r3;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  setp.gt.f32 %p2, %f1, 0f3F000000;
  vote.sync.ballot.b32 %r6, %p2, -1;
  setp.eq.s32 %p3, %r6, 0;
  add.u32 %r4, %r4, 32;
  @%p3 bra LOOP;
  st.global.u32 [%rd2], %r4;
  ret;
}
"""


# y[i] = x[i], through a 64-iteration integer loop (the slow path) unless |x[i]| < LIMIT; x has
# no values for the walk, so the comparison is unknown without an assumption on the data
SLOW_PATH = """.version 8.0
.target sm_90
.address_size 64

.visible .entry slow_path(.param .u64 x, .param .u64 y)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  abs.f32 %f2, %f1;
  setp.CMP.f32 %p1, %f2, LIMIT;
  @%p1 bra FAST;
  mov.b32 %r2, %f1;
  mov.u32 %r3, 0;
SLOW:
  mad.lo.u32 %r2, %r2, 1103515245, 12345;
  add.s32 %r3, %r3, 1;
  setp.ne.s32 %p2, %r3, 64;
  @%p2 bra SLOW;
  mov.b32 %f1, %r2;
FAST:
  add.s64 %rd5, %rd2, %rd3;
  st.global.f32 [%rd5], %f1;
  ret;
}
"""
TABLE = isa.load("sm_90")


def _find_instructions(hit):
    """Warp instructions of one warp scanning 32 columns a step until a lane sees a value
    above 0.5 (at column `hit`)."""
    module = parse_ptx(FIND)
    x = np.zeros(32 * 64, dtype=np.float32)
    x[hit] = 1.0
    rep = simulate(module.kernel("find"), (1, 1, 1), (32, 1, 1), module=module,
                   args=[x, np.zeros(1, dtype=np.int32)])
    return rep.to_dict()["details"]["warp_instructions"]


def _blocks_walked(cmp, limit):
    k = parse_ptx(SLOW_PATH.replace("CMP", cmp).replace("LIMIT", limit)).kernels[0]
    prog = compile_kernel(k, TABLE)
    plan = PathPlan(prog, Env({"x": 1 << 40, "y": 1 << 41}, {}))
    specs = _lane_specs(0, (1, 1, 1), (32, 1, 1), 0, 32, 132, 0, TABLE)
    path = follow(plan, specs)
    slow = {b.id for b in prog.blocks for lp in prog.loops if lp.contains(b.start)}
    assert slow, "the slow path's loop was not found"
    return {e % plan.nb for e in path.trace}, slow


def test_a_vector_of_one_register_load_gives_the_index_value():
    n = 132 * 8
    idx = np.random.default_rng(5).integers(0, 4096, size=n).astype(np.int32)
    seen, known = accesses(BAG, (n,), (128,), [idx, Arr(), Arr()])
    rows = [a for t, a in seen.items() if t.startswith("ld.global") and a.indirect]
    assert len(rows) == 1
    # the row's 32 lanes read 128 contiguous bytes: 4 sectors, one line (not a line per lane)
    assert rows[0].pattern == "data" and rows[0].bytes == 4 * 32 and rows[0].l1_bytes == 128
    seen2, unknown = accesses(BAG, (n,), (128,), [Arr(), Arr(), Arr()])
    assert [a for t, a in seen2.items() if a.indirect][0].pattern == "indirect"
    assert unknown.device_us > known.device_us


def test_ballot_early_exit_follows_the_data():
    # the exit depends on a ballot over all 32 lanes' loaded values: with two lanes followed
    # the mask was unknown and the loop ran once whatever the data; and past the sampled 16
    # trips the fast-forward read the misses as a steady state and bisected for an exit that
    # is not monotone (it found the array's end, 64 trips)
    n0, n1, n2 = (_find_instructions(k * 32 + 5) for k in (0, 1, 2))
    per_step = n1 - n0
    assert n2 - n1 == per_step and per_step >= 8          # 9 PTX instructions a trip
    assert _find_instructions(40 * 32 + 17) == n0 + 40 * per_step


def test_converter_matches_the_wrap_rules():
    for t, v, want in [(T.u32, -1, 0xFFFFFFFF), (T.s32, 0x80000000, -0x80000000),
                       (T.s64, 5, 5), (T.u8, 300, 44), (T.s32, 2.9, 2), (T.u32, float("nan"), None),
                       (T.pred, 3, True), (T.f32, 2, 2.0), (T.s32, None, None)]:
        assert converter(t)(v) == want and convert(v, t) == want


@pytest.mark.parametrize("cmp,limit", [("ltu", "0f47CE4780"),     # sinf's 105615.0
                                       ("lt", "0f7F800000"),      # |x| < infinity
                                       ("le", "0f4B800000")])     # 2^24
def test_a_test_against_a_constant_beyond_ordinary_data_follows_ordinary_data(cmp, limit):
    walked, slow = _blocks_walked(cmp, limit)
    assert not walked & slow


@pytest.mark.parametrize("cmp,limit", [("ltu", "0f42C80000"),     # 100.0: data can be beyond
                                       ("ltu", "0f477FE000")])    # 65504.0: the bound itself
def test_a_test_against_a_constant_within_ordinary_data_stays_unknown(cmp, limit):
    # unknown: the branch is not taken (a guarded body runs), so the slow path is walked
    assert float.fromhex("0x1.ffcp15") == DATA_MAGNITUDE
    walked, slow = _blocks_walked(cmp, limit)
    assert slow <= walked


@pytest.mark.parametrize("name,measured_error", [("haversine n=4000037", 1.519),
                                                 ("haversine n=30000001", 1.653)])
def test_haversine_walks_libdevices_fast_sin_and_cos(name, measured_error):
    """The four sinf/cosf of a haversine distance: the H200 runs their Cody-Waite reduction
    only (the inputs are degrees); walking their Payne-Hanek loops was +152/+165 %."""
    case = measured_case("model_set_2026-12-02d_all.json.gz", name)
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    err = (rep.device_us - case["gpu_us"]) / case["gpu_us"]
    assert abs(err) < 0.10 < measured_error, (name, err)
