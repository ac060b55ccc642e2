"""The simulator's global loads: sectors and lines from L1, L2 and DRAM, loads whose lanes spread
over a loop (binary searches), L1 reuse across blocks, L1's bank passes and tag rate, data read
back from DRAM, hashed and random loads, strided row pieces, and shared-memory banks of masked
indices; checked against H200 measurements of the model set's cases."""
import pytest


import model_eval
from model_data import measured_case, measured_cases, predicted
from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate
from ptxgen.sim.access import Access
from ptxgen.sim.reuse import spread_cost, spreading
from sim_helpers import Arr, HEAD, accesses


TWO_PASS = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry two_pass(.param .u64 x, .param .u64 out, .param .u32 len)
{
  .reg .pred %p<3>; .reg .b32 %r<10>; .reg .b64 %rd<8>; .reg .f32 %f<4>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [len];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %tid.x;
  mul.lo.u32 %r4, %r2, %r1;
  mov.f32 %f1, 0f00000000;
  mov.u32 %r5, %r3;
ONE:
  add.u32 %r6, %r4, %r5;
  mul.wide.u32 %rd3, %r6, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f2, [%rd4];
  max.f32 %f1, %f1, %f2;
  add.u32 %r5, %r5, 256;
  setp.lt.u32 %p1, %r5, %r1;
  @%p1 bra ONE;
  mov.u32 %r5, %r3;
TWO:
  add.u32 %r6, %r4, %r5;
  mul.wide.u32 %rd3, %r6, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f2, [%rd4];
  sub.f32 %f3, %f2, %f1;
  add.f32 %f1, %f1, %f3;
  add.u32 %r5, %r5, 256;
  setp.lt.u32 %p2, %r5, %r1;
  @%p2 bra TWO;
  mul.wide.u32 %rd5, %r2, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.f32 [%rd6], %f1;
  ret;
}
"""
FIT7 = "model_set_2026-12-01_sim7_fit7.json"
DATA = "model_set_2026-12-01f_sim7_held7.json.gz"


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
HELD8 = "model_set_2026-12-01f_sim7_held8.json.gz"
DATA_FIT10B = "model_set_2026-12-01k_fit10b.json"
SET = "model_set_2026-12-02b_fit14a.json.gz"
SET_ONERUN = "model_set_2026-12-02h_onerun.json.gz"


def _dram_fraction(text, row_floats, rows):
    module = parse_ptx(text)
    rep = simulate(module.kernel("two_pass"), (rows, 1, 1), (256, 1, 1), module=module,
                   args=[object(), object(), row_floats],      # (pointers: synthetic addresses)
                   footprint=4 * row_floats * rows + 4 * rows)
    return rep.to_dict()["details"]["memory_model"]["dram_fraction"]


def _bsearch_execs(warp, levels, n=1 << 20):
    """Per level, the byte address each of a warp's 32 lanes probes in a binary search of a
    sorted table of n int32 for distinct keys (lane keys spread evenly over the table)."""
    out = []
    keys = [((warp * 32 + lane) * 7919 % 4096) * (n // 4096) + 3 for lane in range(32)]
    lo = [0] * 32
    hi = [n] * 32
    for _ in range(levels):
        ex = []
        for j in range(32):
            mid = (lo[j] + hi[j]) // 2
            ex.append(4 * mid)
            if mid < keys[j]:
                lo[j] = mid + 1
            else:
                hi[j] = mid
        out.append(ex)
    return out


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


def _cases():
    return measured_cases("model_set_2026-12-01j_fit10a.json")


def _err(case):
    return predicted(case)[1]


@pytest.fixture(scope="module")
def cases():
    return measured_cases(DATA_FIT10B)


def _case(name):
    return measured_case("model_set_2026-12-01l_fit10ab.json", name)


def _err_in(cases, name):
    return predicted(cases[name])[1]


def test_rows_read_twice_come_from_dram_when_the_ctas_in_flight_exceed_l2():
    # both launches stream 1 GB (more than L2) and read each row twice, in two loops; with
    # 4 KB rows the CTAs in flight hold ~4 MB and the second pass hits L2 (half the loads
    # from DRAM), with 256 KB rows they hold far more than L2 keeps and it comes from DRAM
    # as the first did (triton_xent 4096x32003)
    assert _dram_fraction(TWO_PASS, 1024, 1 << 18) == pytest.approx(0.5, abs=0.05)
    assert _dram_fraction(TWO_PASS, 65536, 1 << 12) > 0.9
    # the second loop reading another array (`out`'s address: the simulator does not check
    # bounds) is no second pass: the rule stays out, as for a GEMM's panels that other CTAs
    # share (the footprint's reuse rule alone)
    second = "add.s64 %rd4, %rd1, %rd3;\n  ld.global.f32 %f2, [%rd4];\n  sub.f32"
    other = TWO_PASS.replace(second, "add.s64 %rd7, %rd2, %rd3;\n  ld.global.f32 %f2, [%rd7];\n"
                                     "  sub.f32")
    assert other != TWO_PASS
    assert _dram_fraction(other, 65536, 1 << 12) == pytest.approx(0.5, abs=0.05)


def test_a_scattered_load_costs_l2_per_line_a_coalesced_one_per_sector():
    from ptxgen.isa import load
    from ptxgen.sim.memory import MemoryConfig, SmMemory
    table = load("sm_90")
    per_line = table.memory_model["l2_load_line_bytes"]
    assert 32 < per_line < 128            # more than the sector it brings, less than a line
    cfg = MemoryConfig({}, {})
    cfg.load_line_bytes = per_line
    mem = SmMemory.__new__(SmMemory)
    mem.cfg = cfg
    coalesced = Access(bytes=128, l1_bytes=128)          # one line, its four sectors
    scattered = Access(bytes=32 * 32, l1_bytes=32 * 128)  # a lane per line
    assert mem._l2_load_bytes(coalesced, 128) == 128
    assert mem._l2_load_bytes(scattered, 32 * 32) == pytest.approx(32 * per_line)


@pytest.mark.parametrize("n", [1 << 20, 1 << 22])
def test_hashed_loads_from_a_table_in_l2_land_near_their_h200_times(n):
    import model_eval
    case = measured_case(FIT7.replace("fit7", "fit7g"), f"gather_hash n={n} table=4MiB")
    rep, _ = model_eval.predict(case)
    assert abs(rep.device_us / case["gpu_us"] - 1) < 0.10, (rep.device_us, case["gpu_us"])


def test_a_binary_search_load_spreads_and_a_streaming_one_does_not():
    assert spreading(_bsearch_execs(0, 12), 4, 32)
    stream = [[4 * (32 * k + j) for j in range(32)] for k in range(12)]
    assert not spreading(stream, 4, 32)
    assert not spreading(_bsearch_execs(0, 2), 4, 32)     # two executions: nothing to tell


def test_spread_cost_is_the_mean_over_executions_and_reuse_lowers_the_miss_rate():
    by_warp = {w: _bsearch_execs(w, 16) for w in range(4)}
    acc = Access(bytes=32)
    spread_cost(acc, by_warp, 4, 32, 128)
    # level 0 is one sector, levels 5 and on one per lane: the mean lies well between
    assert 16 * 32 < acc.bytes < 32 * 32
    assert acc.l1_bytes >= acc.bytes
    # the first probes are the same for all four warps: they hit after the first warp's
    assert 0.3 < acc.miss < 1.0
    one = Access(bytes=32)
    spread_cost(one, {0: by_warp[0]}, 4, 32, 128)
    assert one.miss > acc.miss                  # fewer warps, less reuse


def test_the_l2_resident_binary_search_lands_near_its_h200_time():
    """bsearch_keys (held7, SEEN now) with a 4 MB table: −57 % before this rule (the first
    probe, one sector for the warp, stood for all 21); the rule was written from its cause,
    not fitted to it — the test guards its wiring."""
    import model_eval
    case = measured_case(DATA, "bsearch_keys table=1000003 keys=4000037")
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.25


def test_a_load_in_another_block_finds_the_sectors_an_earlier_block_read():
    seen, _ = accesses(BRANCHY, (132,), (256,), [Arr(), Arr()])
    first = next(a for t, a in seen.items() if t.startswith("ld.global.f32 %f1"))
    second = next(a for t, a in seen.items() if t.startswith("ld.global.f32 %f2, [%rd4+4]"))
    assert first.miss == 1.0
    assert second.miss == 0.0          # every lane's word sits in the sector %f1's load read


def test_a_search_finds_its_last_probes_in_l1():
    import numpy as np
    table = (np.arange(65536) * 3).astype(np.uint32)
    seen, _ = accesses(SEARCH, (132,), (256,), [table, Arr()])
    probe = next(a for t, a in seen.items() if t.startswith("ld.global.u32"))
    # every execution a sector per lane: not a load whose lanes part, but one steered by the
    # values it loads; its first two probes are 16 words apart (a miss each), but of its six
    # the last three fall in the sector of the one before
    assert probe.indirect and probe.bytes == 32 * 32
    assert probe.miss < 0.6


def test_a_masked_shared_index_costs_the_banks_of_its_few_words():
    sixteen, _ = accesses(_digit_count(60), (132,), (256,), [Arr()])
    many, _ = accesses(_digit_count(1020), (132,), (256,), [Arr()])
    a16 = next(a for t, a in sixteen.items() if t.startswith("atom.shared"))
    a256 = next(a for t, a in many.items() if t.startswith("atom.shared"))
    # 16 counters sit in 16 banks: lanes on one counter share its pass, no bank conflict
    assert a16.pattern == "masked" and a16.wavefronts == 1.0
    # 256 counters, 8 per bank: about as many passes as 32 lanes on random banks
    assert a256.pattern == "masked" and 3.0 < a256.wavefronts < 4.5


def test_hashed_loads_over_a_table_larger_than_l2_miss_it():
    """gather_hash (fitting part): 8 loads per thread at hashed places, addresses from the
    thread index (not loaded data). The 256 MiB table took 3.3x the 4 MiB table's time on the
    H200 (688 / 210 us); the scattered-DRAM rule used to fire for data-dependent addresses only
    and priced both alike (-70 %)."""
    import model_eval
    cases = measured_cases(HELD8)
    small, big = (model_eval.predict(cases[f"gather_hash n=4194304 table={t}MiB"])[0]
                  for t in (4, 256))
    assert big.device_us > 2 * small.device_us
    assert big.to_dict()["details"]["bound"]["resource"] == "DRAM"


def test_loads_from_l2_alone_run_at_the_measured_load_rate():
    """fit10a_lines_l2: 16 loads a thread from an 8 MiB table, 2^25 sectors in 107 us on the
    H200 (10 TB/s). At memory.L2's copy figure (8204 GB/s, reads and writes) the model said
    +27 %; the per-line floor of scattered loads (gather_hash) stays as it was."""
    cases = _cases()
    import model_eval
    for name in ("fit10a_lines_l2 L=8 n=4194304", "fit10a_lines_l2 L=2 n=1048576",
                 "gather_hash n=4194304 table=4MiB"):
        case = cases[name]
        rep, _ = model_eval.predict(case, launch_path=case["path"])
        assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.12, name


def test_row_pieces_of_256_bytes_and_more_copy_at_contiguous_speed(cases):
    """The guess that DRAM delivers ~512-byte pieces of rows 32 KB apart below copy bandwidth
    is wrong on the H200: the 256 MiB copies by 256 .. 1024-byte pieces at a 32 KB or 4 KB
    pitch are within 2 % of the same kernel on contiguous pieces (128-byte pieces: 13 %
    slower), and the model, which charges no more for them, is within 8 % of each."""
    for p in (256, 512, 1024):
        ref = cases[f"fitd_rows P={p} pitch={p} 256MiB"]["gpu_us"]
        for pitch in (32768, 4096):
            c = cases[f"fitd_rows P={p} pitch={pitch} 256MiB"]
            assert abs(c["gpu_us"] / ref - 1) < 0.03
            assert abs(_err(c)) < 0.08


def test_a_sweep_reading_back_what_an_earlier_sweep_wrote_beyond_l2_comes_from_dram():
    """tridiag_thomas 160x200003 (768 MB): the forward sweep writes its intermediates, the
    backward sweep reads them back after every resident CTA has streamed its part of all six
    arrays, far more than L2 keeps. The loads of the second sweep were taken for L2 hits (data
    the launch wrote), 37 % of the loads from DRAM and 198 us where the H200 took 433 us; the
    pass from stores to later loads makes them DRAM reads again."""
    case = _case("tridiag_thomas 160x200003")
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    mm = rep.to_dict()["details"]["memory_model"]
    assert mm["dram_fraction"] > 0.9
    assert -0.4 < (rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.1


def test_lines_at_one_offset_take_a_pass_each_lines_apart_in_offset_share_passes():
    """16 lines, two bytes on each: at one offset of every line all 16 words sit on one bank
    (16 passes); 4099 bytes apart (offsets 3 bytes apart) at most two on a bank, and then the
    tag stage (4 lines a cycle) bounds it at 4 line-times. A whole-line access stays one pass
    a line (the rule changes nothing for coalesced loads)."""
    from ptxgen import isa
    from ptxgen.sim.access import l1_data_bytes
    rate = isa.load("sm_90").memory_model["l1_tag_lines_per_cycle"]
    same = [g * 4096 + c for g in range(16) for c in (0, 1)]
    apart = [g * 4099 + c for g in range(16) for c in (0, 1)]
    assert l1_data_bytes([same], 1, 128, 32, 4, rate) == 16 * 128
    assert l1_data_bytes([apart], 1, 128, 32, 4, rate) == 16 / rate * 128
    assert l1_data_bytes([[4 * t for t in range(128)]], 4, 128, 32, 4, rate) == 4 * 128
    assert l1_data_bytes([apart], 1, 128, 32, 4, None) == 0.0      # no figure: lines stand


def test_fit14a_pitch_4099_runs_at_the_tag_rate_and_4096_at_a_line_a_cycle():
    """fit14a_pitch (fitting): 39.9 us with the lines 4096 bytes apart, 11.9 us 4099 apart
    (three consecutive loads on the same lines). Without the rule both were predicted ~39 us
    (+225 % for 4099)."""
    cases = measured_cases(SET)
    assert abs(_err_in(cases, "fit14a_pitch P=4096 R=3 n=1048576")) < 0.10
    assert abs(_err_in(cases, "fit14a_pitch P=4099 R=3 n=1048576")) < 0.15
    assert abs(_err_in(cases, "fit14a_sector u8 l1 L=2 n=1048576")) < 0.10


def test_life_u8_is_no_longer_bound_by_a_line_a_cycle():
    """life_u8 (held7, seen): 16 rows 4099 bytes apart a load, two bytes on each, the
    pattern fit14a_pitch P=4099 measures: +92 % / +60 % with a line a cycle, now within
    35 % (4099^2: -13.5 %, L2-bound; 15013^2: -31 %, ALU-bound)."""
    cases = measured_cases(SET)
    for name in ("life_u8 4099^2", "life_u8 15013^2"):
        assert abs(_err_in(cases, name)) < 0.35, name


def test_a_random_read_costs_less_dram_than_a_random_write():
    mm = isa.load("sm_90").memory_model
    assert 32 < mm["dram_random_read_sector_bytes"] < mm["dram_random_sector_bytes"]


@pytest.mark.parametrize("name, bound", [("gather_hash n=4194304 table=256MiB", 0.10),
                                         ("gather n=16777216", 0.15),      # held-out (seen)
                                         ("scatter n=16777216", 0.10)])    # stores: unchanged
def test_random_gathers_and_scatters_land_near_their_h200_time(name, bound):
    case = measured_case(SET_ONERUN, name)
    pred = model_eval._one(case)
    assert abs(pred["device_us"] / case["gpu_us"] - 1) < bound, (name, pred["device_us"])
