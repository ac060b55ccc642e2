"""Path following of nested loops: the inner loop of a tiled kernel is fast-forwarded (in the
access pilot and in every probe) without changing what is recorded or where loops end."""
import time

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import access as A
from ptxgen.sim.launch import _lane_specs
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import Env

TABLE = isa.load("sm_90")

# for t in 0..tiles: { for (k = 255; k != 0; k -= 4 saturating) acc += buf[k]; p += 1024 }
# out[p] = acc — an n-body-like tile loop: the inner loop's equality exit, an epilogue store
# whose address the outer loop moves
TILED = """.version 8.0
.target sm_90
.address_size 64

.visible .entry tiled(.param .u64 out, .param .u32 tiles)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 buf[1024];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [tiles];
  mov.u32 %r5, %tid.x;
  mul.wide.u32 %rd2, %r5, 4;
  add.s64 %rd1, %rd1, %rd2;
  mov.f32 %f1, 0f00000000;
OUTER:
  mov.u32 %r2, 255;
  mov.u64 %rd3, buf;
INNER:
  ld.shared.f32 %f2, [%rd3];
  add.f32 %f1, %f1, %f2;
  add.s64 %rd3, %rd3, 16;
  setp.ne.s32 %p1, %r2, 0;
  selp.s32 %r3, -4, 0, %p1;
  add.s32 %r2, %r2, %r3;
  max.s32 %r2, %r2, 0;
  setp.ne.s32 %p2, %r2, 0;
  @%p2 bra INNER;
  add.s64 %rd1, %rd1, 1024;
  add.s32 %r1, %r1, -1;
  setp.gt.s32 %p3, %r1, 0;
  @%p3 bra OUTER;
  st.global.f32 [%rd1], %f1;
  ret;
}
"""


def _walk(tiles, nested):
    m = parse_ptx(TILED)
    k = m.kernels[0]
    prog = compile_kernel(k, TABLE)
    idx = A.memory_instrs(prog)
    plan = PathPlan(prog, Env({"out": 1 << 40, "tiles": tiles}, {"buf": 0}),
                    slice_=A.address_slice(prog, idx), record=idx)
    specs = _lane_specs(0, (1, 1, 1), (32, 1, 1), 0, 32, 132, 0, TABLE, every_lane=True)
    outer = max(prog.loops, key=lambda lp: lp.end - lp.header).id
    t = time.process_time()
    p = follow(plan, specs, cap=(4,), hot_loop=outer, nested=nested)
    return prog, plan, p, time.process_time() - t


def test_nested_loops_fast_forward_records_the_same_addresses():
    tiles = 40
    prog, plan_walked, walked, t_walked = _walk(tiles, nested=False)
    _, plan_fast, fast, t_fast = _walk(tiles, nested=True)
    st = next(i for i, s in enumerate(prog.instrs) if s.text.startswith("st.global"))
    rec = plan_fast.records[st][0][0]
    # the epilogue store is reached and recorded as the walked path records it
    assert rec == plan_walked.records[st][0][0] and rec[1] - rec[0] == 4
    for i, r in plan_walked.records.items():
        assert plan_fast.records[i] == r
    assert fast.skipped == walked.skipped == tiles - 4 - 1
    # the inner loop (64 iterations per tile) is jumped over, not walked: far fewer steps
    assert fast.steps * 3 < walked.steps


def test_inner_loop_exit_is_found_once_per_entry_state():
    tiles = 300
    _prog, plan, p, _t = _walk(tiles, nested=True)
    assert p.skipped == tiles - 4 - 1
    # every tile enters the inner loop in the same control state: one search, then a lookup
    # 64 iterations from 255 down by 4: three seen, 60 jumped over, the last one walked
    assert len(plan.exits) == 1 and list(plan.exits.values()) == [60]


# `if (lane == 0) smem[warp] = x;` then code every lane runs, laid out as LLVM writes it: the
# lanes that take the branch wait at THEN, which comes after the other lanes' jump to JOIN
IF_THEN_AFTER_JOIN = """.version 8.0
.target sm_90
.address_size 64

.visible .entry iflane(.param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 buf[64];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %laneid;
  setp.eq.s32 %p1, %r2, 0;
  @%p1 bra THEN;
  bra.uni JOIN;
THEN:
  shr.u32 %r3, %r1, 5;
  st.shared.u32 [buf], %r3;
JOIN:
  bar.sync 0;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
}
"""


def test_divergent_if_reconverges_at_the_join(sm90):
    prog = compile_kernel(parse_ptx(IF_THEN_AFTER_JOIN).kernels[0], sm90)
    plan = PathPlan(prog, Env({"out": 1 << 40}, {"buf": 0}))
    specs = _lane_specs(0, (1, 1, 1), (64, 1, 1), 1, 32, 132, 0, sm90)
    p = follow(plan, specs)
    nb = len(prog.blocks)
    ran = [prog.instrs[i].instr.opcode for e in p.trace
           for i in range(prog.blocks[e % nb].start, prog.blocks[e % nb].end)]
    # lane 0's THEN runs once, between the others' jump and the join; the code after the
    # join (barrier, global store) runs once for the whole warp, not once per side
    assert ran.count("st") == 2 and ran.count("bar") == 1 and ran.count("ret") == 1
    blocks = [e % nb for e in p.trace]
    assert blocks == sorted(blocks) and len(set(blocks)) == len(blocks)
