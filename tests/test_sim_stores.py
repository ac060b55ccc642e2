"""The simulator's global stores: partial-sector (thin) stores a warp's later stores complete, what a
load of the warp before them changes, merged stores of one block, the read-modify-write a lone
thin write costs, scattered and bit-reversed writes, and the bytes stores count against the
footprint; checked against H200 measurements of the model set's cases."""
import pytest


from model_data import measured_case, measured_cases, predicted
from ptxgen.sim.access import Access, store_sectors
from sim_helpers import Arr, HEAD, accesses, find


# thread t writes out[4t + k] for k = 0..3 as four scalar stores (Triton without a proof of
# 16-byte alignment), or as one st.v4
QUAD = HEAD + """.visible .entry quad(.param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mul.wide.u32 %rd2, %r4, 16;
  add.s64 %rd3, %rd1, %rd2;
  mov.f32 %f1, 0f3F800000;
STORES
  ret;
}
"""
SCALAR = "\n".join(f"  st.global.f32 [%rd3+{4 * k}], %f1;" for k in range(4))
VECTOR = "  st.global.v4.f32 [%rd3], {%f1, %f1, %f1, %f1};"
FIT7 = "model_set_2026-12-01_sim7_fit7.json"
HELD8 = "model_set_2026-12-01f_sim7_held8.json.gz"
SET = "model_set_2026-12-02b_fit14a.json.gz"
SET_FIT15C = "model_set_2026-12-02f_fit15c.json.gz"


def _one_store(addrs, size, group_bytes):
    """Access of one store of warp 0 whose lanes write `size` bytes at `addrs`; the warp's
    stores together write `group_bytes` of every sector they touch."""
    acc = Access(bytes=32 * len(addrs))
    group = {a // 32: group_bytes for a in addrs}
    store_sectors(acc, {0: [addrs]}, [0], size, 32, group, set(), 8, 128)
    return acc


def _case(k, b, mib):
    """The measured store_lanes case (its PTX, launch and H200 time)."""
    return measured_cases(FIT7)[f"store_lanes k={k}" + ("" if b == 4 else f" u{8 * b}") + f" {mib}MiB"]


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


def _cases():
    return measured_cases("model_set_2026-12-01j_fit10a.json")


def _case_fit10ab(name):
    return measured_case("model_set_2026-12-01l_fit10ab.json", name)


def _case_held10(name):
    return measured_case("model_set_2026-12-02a_held10.json.gz", name)


def _err(cases, name):
    return predicted(cases[name])[1]


def test_a_warps_stores_of_one_block_merge():
    seen, four = accesses(QUAD.replace("STORES", SCALAR), (132 * 64,), (256,), [Arr()])
    sts = sorted((t, a) for t, a in seen.items() if t.startswith("st.global"))
    assert len(sts) == 4
    # the first store writes 16 sectors, each partly; the four together fill them: none is
    # partial, and the three later stores add nothing DRAM must take again; L2 takes each
    # store's sectors (store_lanes k=4, this pattern, takes 2x the time of the same bytes
    # written by two stores of 16 bytes per sector on the H200)
    merged = sorted(a.merged for _, a in sts)
    assert merged == [0.0, 1.0, 1.0, 1.0]
    assert all(a.partial_sectors == 0 for _, a in sts)
    assert all(a.l2_sectors == 16 for _, a in sts)
    _, one = accesses(QUAD.replace("STORES", VECTOR), (132 * 64,), (256,), [Arr()])
    assert 1.5 * one.device_us < four.device_us < 4.5 * one.device_us
    # one scalar store alone leaves 16 partial sectors (a read-modify-write each in L2)
    seen1, _ = accesses(QUAD.replace("STORES", SCALAR.splitlines()[0]), (132 * 64,), (256,),
                         [Arr()])
    assert find(seen1, "st.global").partial_sectors == 16


def test_a_store_writing_one_lane_per_sector_pays_the_read_modify_write_each_time():
    """Sixteen scalar stores per thread, one lane (4 bytes) per sector each (store_lanes k=16,
    Numba's row of 16 floats per thread): eight stores fill each sector, but every one costs
    L2 the read-modify-write (measured: ~96 bytes a sector and store); DRAM takes each sector
    once."""
    sixteen = "\n".join(f"  st.global.f32 [%rd3+{4 * k}], %f1;" for k in range(16))
    text = QUAD.replace("mul.wide.u32 %rd2, %r4, 16;", "mul.wide.u32 %rd2, %r4, 64;")
    seen, thin = accesses(text.replace("STORES", sixteen), (132 * 64,), (256,), [Arr()])
    sts = [a for t, a in seen.items() if t.startswith("st.global")]
    assert len(sts) == 16 and all(a.partial_sectors == 32 and a.l2_sectors == 32 for a in sts)
    assert sorted(a.merged for a in sts) == [0.0, 0.0] + [1.0] * 14
    # four times the bytes of the k = 4 kernel above, and each store a read-modify-write
    _, four = accesses(QUAD.replace("STORES", SCALAR), (132 * 64,), (256,), [Arr()])
    assert thin.device_us > 10 * four.device_us


def test_thin_sectors_the_warp_completes_are_counted_with_their_lines():
    # store_lanes k=8: lanes 32 bytes apart, 4 bytes of each sector, eight stores fill it
    acc = _one_store([32 * i for i in range(32)], 4, 32)
    assert (acc.partial_sectors, acc.filled_thin, acc.filled_thin_lines) == (32, 32, 8)
    # k=32: lanes 128 bytes apart, one sector per line
    acc = _one_store([128 * i for i in range(32)], 4, 32)
    assert (acc.filled_thin, acc.filled_thin_lines) == (32, 32)


def test_eight_bytes_per_sector_is_not_thin_and_a_lone_thin_write_is_not_filled():
    # k=4: two lanes, 8 bytes per sector per store, four stores fill it: no read-modify-write
    acc = _one_store([16 * i for i in range(32)], 4, 32)
    assert (acc.partial_sectors, acc.filled_thin) == (0, 0)
    # scatter: 4 bytes at places no other store of the warp writes: thin, never completed
    acc = _one_store([4096 * i + 12 for i in range(32)], 4, 4)
    assert (acc.partial_sectors, acc.filled_thin, acc.filled_thin_lines) == (32, 0, 0)


@pytest.mark.parametrize("k,b", [(8, 4), (16, 4), (32, 4), (16, 2)])
def test_thin_store_kernels_land_near_their_h200_times(k, b):
    """The fitted figures reproduce the measured 16 MiB store_lanes times within 10 % (these
    cases set them; the test guards the rule's wiring, not its prediction of new kernels)."""
    import model_eval
    case = _case(k, b, 16)
    want = case["gpu_us"]
    rep, _ = model_eval.predict(case)
    assert abs(rep.device_us / want - 1) < 0.10, (rep.device_us, want)


def test_more_lines_per_store_cost_more_at_the_same_thin_sector_count():
    import model_eval
    t = [model_eval.predict(_case(k, 4, 16))[0].device_us for k in (8, 16, 32)]
    assert t[0] < t[1] < t[2] and t[2] > 1.4 * t[0]


def test_thin_stores_outside_loops_fill_their_sectors_across_blocks():
    seen, _ = accesses(_split_stores(), (132,), (256,), [Arr()])
    first = next(a for t, a in seen.items() if t.startswith("st.global.f32 [%rd4],"))
    # 32 lanes 32 bytes apart: 32 thin sectors the seven later stores complete
    assert first.partial_sectors == 32 and first.filled_thin == 32


def test_l2_takes_every_store_to_a_sector_while_dram_takes_it_once():
    """store_lanes k=4 (fitting part): four scalar stores per thread, lanes 16 bytes apart,
    fill each sector together. The H200 wrote 512 MiB so in 276 us, twice the k=2 time: L2
    takes each store's 16 sectors. Counting a sector only at its first store said 131 us."""
    import model_eval
    cases = measured_cases(HELD8)
    for name in ("store_lanes k=4 512MiB", "store_lanes k=2 512MiB"):
        case = cases[name]
        rep, _ = model_eval.predict(case, launch_path=case["path"])
        assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.15, name


def test_stores_after_a_load_reach_l2_merged_but_stores_alone_do_not():
    """Four scalar stores per thread (lanes 16 bytes apart, 8 bytes per sector and store)
    after one coalesced load wrote 256 MiB in 84.4 us, as whole-sector stores; the same stores
    alone took 143.7 us (generic st) / 138 us (store_lanes, 512 MiB in 276 us), each its own
    L2 write. Without the rule the first was predicted 154 us (+83 %)."""
    cases = _cases()
    import model_eval
    for name in ("fit10a_store_ld k=4 256MiB", "fit10a_store_ld k=4 32MiB",
                 "fit10a_store_gen k=4 256MiB", "store_lanes k=4 512MiB"):
        case = cases[name]
        rep, _ = model_eval.predict(case, launch_path=case["path"])
        assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.15, name


def test_thin_stores_after_a_load_keep_their_read_modify_write():
    """k = 8 (one lane, 4 bytes, per sector and store) after a load: 544 us for 256 MiB on the
    H200, near the stores alone (595 us): the merge spares only sectors of 8 bytes or more."""
    from ptxgen import isa
    from ptxgen.sim.access import Access, store_sectors
    sector, mins = 32, int(isa.load("sm_90").memory_model["l2_partial_write_min_bytes"])
    for k, want_second in ((4, 0), (8, 32)):
        # one warp, thread t stores word j of its own k words: store j at 4 (k t + j)
        recs = [{0: [[4 * (k * t + j) for t in range(32)]]} for j in range(2)]
        group = {}
        for r in recs:
            for a in r[0][0]:
                for b in range(a, a + 4):
                    group[b // sector] = group.get(b // sector, 0) + 1
        done, seen = set(), []
        for r in recs:
            acc = Access(bytes=128)
            store_sectors(acc, r, [0], 4, sector, group, done, mins, 128, paced=True)
            seen.append(acc.l2_sectors)
        assert seen[1] == want_second, (k, seen)
        done, alone = set(), []
        for r in recs:
            acc = Access(bytes=128)
            store_sectors(acc, r, [0], 4, sector, group, done, mins, 128, paced=False)
            alone.append(acc.l2_sectors)
        assert alone[1] == alone[0] > 0


def test_bit_reversed_stores_are_priced_as_the_scattered_thin_writes_they_are():
    """bitrev_rows writes each row's words at bit-reversed places: a warp's 32 lanes 512 bytes
    apart, 4 bytes in each of 32 sectors. The H200 took 171.3 us (3001x4096); when the pilot
    could not follow brev, the store had no addresses, was priced as a coalesced one, and the
    prediction was 43.8 us (-74 %)."""
    case = _case_fit10ab("bitrev_rows 3001x4096")
    import model_eval
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert abs(rep.device_us - case["gpu_us"]) / case["gpu_us"] < 0.15


def test_stores_count_the_bytes_they_write_against_the_footprint():
    """nv12_to_rgb writes each pixel's three channels with three st.u8 (a lane's bytes three
    apart: 32 bytes of data over four sectors per store). The loads' share of DRAM is the
    footprint's bytes the launch does not only write over what they ask of L2; counted in
    sectors the stores wrote 4x their 100 MB (more than the whole footprint) and every load
    was taken to come from DRAM. Counted in the lanes' bytes the loads' DRAM share is the
    input's: Y and UV planes, 50 MB, of the 100 MB of sectors they ask for."""
    import model_eval
    case = _case_held10("nv12_to_rgb 4322x7682")
    h, w = case["h"], case["w"]
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    mm = rep.to_dict()["details"]["memory_model"]
    assert mm["footprint_bytes"] == h * w + h // 2 * w + 3 * h * w
    expected = (mm["footprint_bytes"] - 3 * h * w) / mm["requested_load_bytes"]
    assert mm["dram_fraction"] == pytest.approx(expected, rel=0.02)
    assert 0.4 < mm["dram_fraction"] < 0.6


def test_thin_stores_after_a_load_cost_less_than_alone():
    """fit14a_store (fitting, 256 MiB in 8 thin 4-byte stores a thread): alone 602 us, after a
    chain of 64 integer ops 584, after the first store and the chain 580; after 8 coalesced
    loads 532 (generic st 520), after sort8's thin loads 461, after one load and the rest a
    load latency later 434; fit10a_store_ld k=8 (one 4-byte load before) 544. With the stores'
    old per-sector figure the loaded ones were +14 … +46 %; with l2_paced_thin_sector_bytes
    they are within 15 % and the unloaded ones unchanged."""
    cases = measured_cases(SET)
    for name in ("fit14a_store coal 256MiB", "fit14a_store thin 256MiB",
                 "fit14a_store thin_gen 32MiB", "fit10a_store_ld k=8 256MiB",
                 "fit14a_store coal_early 256MiB"):
        assert abs(_err(cases, name)) < 0.15, name
    for name in ("fit14a_store none 256MiB", "fit14a_store gap 256MiB", "store_lanes k=8 512MiB"):
        assert abs(_err(cases, name)) < 0.06, name


def test_a_load_is_thin_when_it_reads_less_than_the_minimum_of_every_sector():
    from ptxgen.sim.thin_stores import (AFTER_LOAD, AFTER_THIN_LOAD, paced_figures,
                                        sector_bytes, thin_load)
    sort8 = {0: [[32 * t for t in range(32)]]}          # 4 bytes of each of 32 sectors
    coalesced = {0: [[4 * t for t in range(32)]]}       # whole sectors
    pairs = {0: [[16 * t for t in range(32)]]}          # two lanes a sector: 8 bytes
    assert thin_load(sort8, 4, 32, 8)
    assert not thin_load(coalesced, 4, 32, 8) and not thin_load(pairs, 4, 32, 8)
    assert not thin_load(sort8, 4, 32, 0) and not thin_load({}, 4, 32, 8)
    figs = paced_figures({"l2_paced_thin_sector_bytes": 40, "l2_paced_thin_load_sector_bytes": 30})
    assert sector_bytes(figs, AFTER_THIN_LOAD, 57) == 30
    assert sector_bytes(figs, AFTER_LOAD, 57) == 40 and sector_bytes(figs, 0, 57) == 57
    assert paced_figures({"l2_paced_thin_sector_bytes": 40}) == (40, 40)


def test_thin_stores_after_thin_loads_cost_less_than_after_coalesced_loads():
    """256 MiB in 8 thin 4-byte stores a thread: after 8 coalesced loads 532 us, after sort8's
    thin loads 460, with sort8's compare-exchange network between them 397-406, the first
    store early 422. With one figure for any load (40) the thin-loaded ones were +8 … +28 %;
    with the thin-load figure they are within 12 % and the coalesced-loaded ones unchanged."""
    cases = measured_cases(SET_FIT15C)
    for name in ("fit15c_sort net 256MiB", "fit15c_sort net_gen 1024MiB",
                 "fit15c_sort net_spread 256MiB", "fit15c_sort thin_early 256MiB",
                 "fit14a_store thin 256MiB"):
        assert abs(_err(cases, name)) < 0.12, name
    for name in ("fit14a_store coal 256MiB", "fit10a_store_ld k=8 256MiB"):
        assert -0.15 < _err(cases, name) < -0.03, name
    assert abs(_err(cases, "fit15c_sort net_nold 256MiB")) < 0.06     # no loads: unchanged


def test_sort8_network_within_fifty_percent():
    """sort8_network (held6, seen): +53 / +64 % with the any-load figure."""
    cases = measured_cases(SET_FIT15C)
    for name in ("sort8_network n=24000136", "sort8_network n=320000024"):
        assert abs(_err(cases, name)) < 0.50, name
