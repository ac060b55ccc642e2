"""Round 9a of the simulator (issue 14, branch simA: the over-predicted cases): a select of two
constants may issue on the FMA pipe as ptxas's predicated IMAD.MOV; a further wave of CTAs of
unequal work adds the mean CTA, not a second copy of the slowest; a load finds in L1 the
sectors an earlier load of another block of the same loop (or of the code outside loops) read."""
import os
import sys

from test_sim_access import HEAD, Arr, _accesses

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate
from ptxgen.sim.engine import SmResult
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.waves import extrapolate
from model_data import measured_case

ROOT = os.path.dirname(os.path.dirname(__file__))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
DATA = "model_set_2026-12-01f_sim7_held8.json.gz"
TABLE = isa.load("sm_90")


def _selp_kernel(a, b, n=48):
    """n independent selects of a and b (a register or a constant) under one predicate,
    summed by a tree of adds that the selects dominate."""
    body = "\n".join(f"  selp.u32 %r{10 + k}, {a}, {b}, %p1;" for k in range(n))
    return parse_ptx(HEAD + f""".visible .entry k(.param .u64 p)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<{10 + n + 2}>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %clock;
  setp.lt.u32 %p1, %r1, 16;
{body}
  xor.b32 %r3, %r10, %r11;
  st.global.u32 [%rd1], %r3;
  ret;
}}
""").kernels[0]


def test_a_select_of_two_constants_may_take_the_fma_pipe_and_one_of_a_register_not():
    imm = compile_kernel(_selp_kernel(1, 0), TABLE)
    reg = compile_kernel(_selp_kernel("%r2", 0), TABLE)
    s_imm = [st for st in imm.instrs if st.instr.opcode == "selp"]
    s_reg = [st for st in reg.instrs if st.instr.opcode == "selp"]
    assert s_imm and all(st.alt is not None for st in s_imm)
    assert s_reg and all(st.alt is None for st in s_reg)
    # with the second pipe, 8 warps' 48 selects issue in fewer cycles
    c_imm = simulate(_selp_kernel(1, 0), (1,), (256,), args=[0], registers=32).cycles
    c_reg = simulate(_selp_kernel("%r2", 0), (1,), (256,), args=[0], registers=32).cycles
    assert c_imm < 0.8 * c_reg


def _sm(cta_finish, issued=100.0):
    end = max(cta_finish)
    return SmResult(cycles=end, issued=issued, unit_busy=[issued], stalls={}, warp_cycles=0.0,
                    events=[], finish=end, cta_finish=list(cta_finish))


def test_a_further_wave_of_unequal_ctas_adds_the_mean_cta_not_a_second_slowest():
    # seven CTAs end at 1000 cycles, one at 5000; a second set of the same CTAs (`again`)
    # places the slow one's copy in the slot that frees last: 10000 cycles
    sm = _sm([1000] * 7 + [5000])
    uneven = extrapolate("full", 10, 8, 132, (sm, 0), None, again=10000, balance=0.3,
                         relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert uneven.steady == (7 * 1000 + 5000) / 8 + 500
    # CTAs of equal work (balance 1) that end staggered share a saturated resource: `again`
    even = extrapolate("full", 10, 8, 132, (sm, 0), None, again=10000, balance=1.0,
                       relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert even.steady == 5000
    # the wave's issue slots bound it from below (4 sub-partitions issue 16000 instructions)
    busy = extrapolate("full", 10, 8, 132, (_sm([1000] * 7 + [5000], 16000), 0), None,
                       again=10000, balance=0.3, relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert busy.steady == 4000
    # given the second set's run, its CTAs stand for the steady state: they start staggered
    # (no first-wave burst of every warp's first load) and here last 600 and 3000 cycles
    rerun = SmResult(cycles=10000, issued=200.0, unit_busy=[200.0], stalls={}, warp_cycles=0.0,
                     events=[], finish=10000, cta_finish=[1000] * 7 + [5000] + [1700] * 7
                     + [10000], cta_start=[0.0] * 8 + [1100.0] * 7 + [7000.0])
    staggered = extrapolate("full", 10, 8, 132, (sm, 0), None, again=rerun, balance=0.3,
                            relaunch=500, cta_skipped=[0] * 8, nsched=4)
    assert staggered.steady == (7 * 600 + 3000) / 8 + 500


def test_a_row_search_with_data_dependent_exits_lands_nearer_its_h200_time():
    """find_first_vote 100000x1200 (held5, SEEN): one warp per row stops at its first value
    above 2.5, so CTAs last from 6 to 15 thousand cycles; the second copy of the slowest CTA
    made every further wave as long as it (+75 %). The rule was written from that cause, not
    fitted to the case; the test guards its wiring (the old rule fails it)."""
    import model_eval
    case = measured_case(DATA, "find_first_vote 100000x1200 thresh=2.5")
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert rep.device_us < 1.6 * case["gpu_us"]


# lane i reads x[8i] and then, in one of two blocks, x[8i + 1] or x[8i + 2]: the same sector
BRANCHY = HEAD + """.visible .entry k(.param .u64 x, .param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.s32 %rd3, %r4, 32;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  setp.lt.u32 %p1, %r4, 1000000;
  @%p1 bra ONE;
  ld.global.f32 %f2, [%rd4+8];
  bra.uni JOIN;
ONE:
  ld.global.f32 %f2, [%rd4+4];
JOIN:
  add.f32 %f3, %f1, %f2;
  mul.wide.s32 %rd5, %r4, 4;
  add.s64 %rd5, %rd2, %rd5;
  st.global.f32 [%rd5], %f3;
  ret;
}
"""


def test_a_load_in_another_block_finds_the_sectors_an_earlier_block_read():
    seen, _ = _accesses(BRANCHY, (132,), (256,), [Arr(), Arr()])
    first = next(a for t, a in seen.items() if t.startswith("ld.global.f32 %f1"))
    second = next(a for t, a in seen.items() if t.startswith("ld.global.f32 %f2, [%rd4+4]"))
    assert first.miss == 1.0
    assert second.miss == 0.0          # every lane's word sits in the sector %f1's load read


def _split_stores():
    """Lane i writes the eight words of out[8i : 8i + 8], the first before a branch and the
    other seven after the join: eight thin stores that fill each sector across blocks."""
    rest = "\n".join(f"  st.global.f32 [%rd4+{4 * k}], %f1;" for k in range(1, 8))
    return HEAD + f""".visible .entry k(.param .u64 out)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  cvt.rn.f32.s32 %f1, %r4;
  mul.wide.s32 %rd3, %r4, 32;
  add.s64 %rd4, %rd1, %rd3;
  st.global.f32 [%rd4], %f1;
  setp.lt.u32 %p1, %r4, 7;
  @%p1 bra JOIN;
  add.f32 %f1, %f1, 0f3F800000;
JOIN:
{rest}
  ret;
}}
"""


def test_thin_stores_outside_loops_fill_their_sectors_across_blocks():
    seen, _ = _accesses(_split_stores(), (132,), (256,), [Arr()])
    first = next(a for t, a in seen.items() if t.startswith("st.global.f32 [%rd4],"))
    # 32 lanes 32 bytes apart: 32 thin sectors the seven later stores complete
    assert first.partial_sectors == 32 and first.filled_thin == 32


# thread i searches its own 64-word segment of a sorted table (segments 256 bytes apart) for
# a key in it (LLVM's branch-free halving: two selp on the loaded comparison)
SEARCH = HEAD + """.visible .entry k(.param .u64 t, .param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<14>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  and.b32 %r10, %r4, 1023;
  shl.b32 %r5, %r10, 6;
  add.u32 %r6, %r5, 64;
  mul.lo.u32 %r11, %r4, 37;
  and.b32 %r11, %r11, 63;
  add.u32 %r11, %r11, %r5;
  mul.lo.u32 %r12, %r11, 3;
LOOP:
  add.u32 %r7, %r5, %r6;
  shr.u32 %r7, %r7, 1;
  mul.wide.u32 %rd3, %r7, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r8, [%rd4];
  setp.lt.u32 %p1, %r8, %r12;
  add.u32 %r9, %r7, 1;
  selp.u32 %r5, %r9, %r5, %p1;
  selp.u32 %r6, %r6, %r7, %p1;
  setp.lt.u32 %p2, %r5, %r6;
  @%p2 bra LOOP;
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r5;
  ret;
}
"""


def test_a_search_finds_its_last_probes_in_l1():
    import numpy as np
    table = (np.arange(65536) * 3).astype(np.uint32)
    seen, _ = _accesses(SEARCH, (132,), (256,), [table, Arr()])
    probe = next(a for t, a in seen.items() if t.startswith("ld.global.u32"))
    # every execution a sector per lane: not a load whose lanes part, but one steered by the
    # values it loads; its first two probes are 16 words apart (a miss each), but of its six
    # the last three fall in the sector of the one before
    assert probe.indirect and probe.bytes == 32 * 32
    assert probe.miss < 0.6


def _digit_count(mask):
    """Each thread adds 1 to a shared counter picked by a loaded key masked by `mask` (a
    radix sort's digit count: 16 counters for mask 60)."""
    return HEAD + f""".visible .entry k(.param .u64 keys)
{{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 h[1024];
  ld.param.u64 %rd1, [keys];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.s32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r5, [%rd3];
  shl.b32 %r6, %r5, 2;
  and.b32 %r6, %r6, {mask};
  mov.u32 %r7, h;
  add.u32 %r7, %r7, %r6;
  atom.shared.add.u32 %r5, [%r7], 1;
  ret;
}}
"""


def test_a_masked_shared_index_costs_the_banks_of_its_few_words():
    sixteen, _ = _accesses(_digit_count(60), (132,), (256,), [Arr()])
    many, _ = _accesses(_digit_count(1020), (132,), (256,), [Arr()])
    a16 = next(a for t, a in sixteen.items() if t.startswith("atom.shared"))
    a256 = next(a for t, a in many.items() if t.startswith("atom.shared"))
    # 16 counters sit in 16 banks: lanes on one counter share its pass, no bank conflict
    assert a16.pattern == "masked" and a16.wavefronts == 1.0
    # 256 counters, 8 per bank: about as many passes as 32 lanes on random banks
    assert a256.pattern == "masked" and 3.0 < a256.wavefronts < 4.5
