"""Round sim15a of the simulator (issue 14): a branch on a float the walk cannot know, compared
with a constant beyond the magnitude of ordinary data, follows the side ordinary data takes
(libdevice's sinf/cosf: Payne-Hanek argument reduction only above |x| = 105615; haversine was
+152/+165 % with its four reductions walked); and a 32-bit constant moved into a register that
one float or integer instruction reads is that instruction's immediate in SASS (no issue)."""
import re

import pytest

from ptxgen import isa, toolchain
from ptxgen.parse import parse_ptx
from ptxgen.sim.launch import _lane_specs
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import DATA_MAGNITUDE, Env
from model_data import measured_case

TABLE = isa.load("sm_90")

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


def _blocks_walked(cmp, limit):
    k = parse_ptx(SLOW_PATH.replace("CMP", cmp).replace("LIMIT", limit)).kernels[0]
    prog = compile_kernel(k, TABLE)
    plan = PathPlan(prog, Env({"x": 1 << 40, "y": 1 << 41}, {}))
    specs = _lane_specs(0, (1, 1, 1), (32, 1, 1), 0, 32, 132, 0, TABLE)
    path = follow(plan, specs)
    slow = {b.id for b in prog.blocks for lp in prog.loops if lp.contains(b.start)}
    assert slow, "the slow path's loop was not found"
    return {e % plan.nb for e in path.trace}, slow


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


HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
# Cody-Waite reduction as NVVM writes it for sinf: each constant moved into a register of its
# own, each register read once by an fma
REDUCE = """.visible .entry reduce(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<2>;
  mov.u32 %r1, %tid.x;
  cvt.rn.f32.u32 %f1, %r1;
  mul.f32 %f2, %f1, 0f3F22F983;
  cvt.rni.s32.f32 %r2, %f2;
  cvt.rn.f32.s32 %f3, %r2;
  mov.f32 %f4, 0fBFC90FDA;
  fma.rn.f32 %f5, %f3, %f4, %f1;
  mov.f32 %f6, 0fB3A22168;
  fma.rn.f32 %f7, %f3, %f6, %f5;
  mov.f32 %f8, 0fA7C234C5;
  fma.rn.f32 %f9, %f3, %f8, %f7;
  mov.f32 %f10, 0f3F000000;
  add.f32 %f11, %f9, %f10;
  mul.f32 %f11, %f11, %f10;
  ld.param.u64 %rd1, [out];
  st.global.f32 [%rd1], %f11;
  ret;
}
"""


def test_a_constant_moved_into_its_one_readers_register_is_that_readers_immediate():
    k = parse_ptx(HEAD + REDUCE).kernels[0]
    free = [st.text.split(",")[1].strip(" ;") for st in compile_kernel(k, TABLE).instrs
            if st.free]
    # 0.5 has two readers: ptxas keeps it in a register
    assert free == ["0fBFC90FDA", "0fB3A22168", "0fA7C234C5"]


@pytest.mark.needs_ptxas
def test_ptxas_puts_the_constants_into_the_ffmas():
    sass = toolchain.disassemble(toolchain.assemble(HEAD + REDUCE, "sm_90").cubin)
    ffma = re.findall(r"FFMA R\d+, R\d+, (-?[0-9.e+-]+), R\d+", sass)
    assert len(ffma) == 3 and "MOV" not in re.findall(r"\s(MOV)\s", sass)
