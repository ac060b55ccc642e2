"""The simulator's access model (ptxgen.sim.access): coalescing, L1 reuse, bank conflicts,
data-dependent addresses, same-address atomics, cp.async, shared-load merging, the shared
memory-level rule and the fast-forward of loops with an equality exit."""
import numpy as np
import pytest

from ptxgen import isa
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate
from ptxgen.sim import access as A
from ptxgen.sim import atomics
from ptxgen.sim.levels import l2_keep_bytes, memory_level
from ptxgen.sim.paths import PathPlan, follow
from ptxgen.sim.program import compile_kernel
from ptxgen.sim.values import Env
from sim_helpers import HEAD, Arr, accesses, find, parse_kernel

TABLE = isa.load("sm_90")
MM = TABLE.memory_model

# lane i of the grid loads x[i * stride] (4-byte words) and stores it to out[i]
STRIDED = HEAD + """.visible .entry strided(.param .u64 x, .param .u64 out, .param .u32 stride)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [stride];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mul.lo.s32 %r6, %r5, %r1;
  mul.wide.u32 %rd3, %r6, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  mul.wide.u32 %rd5, %r5, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.f32 [%rd6], %f1;
  ret;
}
"""

# out[i] = x[idx[i]]: the second load's address is data
GATHER = HEAD + """.visible .entry gather(.param .u64 x, .param .u64 idx, .param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [idx];
  ld.param.u64 %rd3, [out];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mul.wide.u32 %rd4, %r5, 4;
  add.s64 %rd5, %rd2, %rd4;
  ld.global.u32 %r6, [%rd5];
  mul.wide.u32 %rd6, %r6, 4;
  add.s64 %rd7, %rd1, %rd6;
  ld.global.f32 %f1, [%rd7];
  add.s64 %rd8, %rd3, %rd4;
  st.global.f32 [%rd8], %f1;
  ret;
}
"""

# lane l reads shared word (l * stride) mod 1024, `iters` times
BANKS = HEAD + """.visible .entry banks(.param .u64 out, .param .u32 iters, .param .u32 stride)
{
  .reg .pred %p<2>;
  .reg .b32 %r<16>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<4>;
  .shared .align 16 .b8 buf[4096];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  ld.param.u32 %r2, [stride];
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, buf;
  and.b32 %r7, %r3, 31;
  mul.lo.s32 %r8, %r7, %r2;
  and.b32 %r8, %r8, 1023;
  shl.b32 %r8, %r8, 2;
  add.s32 %r8, %r4, %r8;
  mov.f32 %f1, 0f00000000;
  mov.u32 %r9, 0;
LOOP:
  ld.shared.f32 %f2, [%r8];
  add.f32 %f1, %f1, %f2;
  add.s32 %r9, %r9, 1;
  setp.lt.u32 %p1, %r9, %r1;
  @%p1 bra LOOP;
  st.global.f32 [%rd1], %f1;
  ret;
}
"""

# thread 0 of every CTA adds 1 to out[0]
ONE_ADDRESS = HEAD + """.visible .entry one(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  red.global.add.u32 [%rd1], 1;
DONE:
  ret;
}
"""

# every thread of every CTA adds 1 to out[tid]: each CTA aims at the same 256 addresses
EVERY_CTA = HEAD + """.visible .entry every(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  red.global.add.u32 [%rd3], 1;
  ret;
}
"""

# out[idx[i]] += 1: a histogram with global atomics
HIST = HEAD + """.visible .entry hist(.param .u64 idx, .param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [idx];
  ld.param.u64 %rd2, [out];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r6, [%rd4];
  mul.wide.u32 %rd5, %r6, 4;
  add.s64 %rd6, %rd2, %rd5;
  red.global.add.u32 [%rd6], 1;
  ret;
}
"""

# every thread copies 16 bytes into shared memory with cp.async, waits, and reads them back
CP_ASYNC = HEAD + """.visible .entry cp(.param .u64 x, .param .u64 out, .param .u32 wait)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 buf[4096];
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mul.wide.u32 %rd3, %r5, 16;
  add.s64 %rd4, %rd1, %rd3;
  mov.u32 %r6, buf;
  shl.b32 %r7, %r4, 4;
  add.s32 %r6, %r6, %r7;
  cp.async.cg.shared.global [%r6], [%rd4], 16;
  cp.async.commit_group;
  cp.async.wait_group 0;
  ld.shared.f32 %f1, [%r6];
  mul.wide.u32 %rd5, %r5, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.f32 [%rd6], %f1;
  ret;
}
"""

# four scalar shared loads at base+0, 4, 8, 12 of a 16-byte aligned row: ptxas emits one LDS.128
ROW = HEAD + """.visible .entry row(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;
  .shared .align 16 .b8 buf[4096];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  shl.b32 %r2, %r2, 4;
  mov.u32 %r3, buf;
  add.s32 %r3, %r3, %r2;
  ld.shared.f32 %f1, [%r3];
  ld.shared.f32 %f2, [%r3+4];
  ld.shared.f32 %f3, [%r3+8];
  ld.shared.f32 %f4, [%r3+12];
  add.f32 %f5, %f1, %f2;
  add.f32 %f6, %f3, %f4;
  add.f32 %f7, %f5, %f6;
  st.global.f32 [%rd1], %f7;
  ret;
}
"""


def test_coalesced_and_strided_loads():
    sector, line = MM["sector_bytes"], MM["l1_line_bytes"]
    one, r1 = accesses(STRIDED, (132 * 64,), (256,), [Arr(), Arr(), 1])
    wide, r32 = accesses(STRIDED, (132 * 64,), (256,), [Arr(), Arr(), 32])
    a1, a32 = find(one, "ld.global"), find(wide, "ld.global")
    # 32 lanes x 4 bytes: 4 sectors of one line; 128 bytes apart: a sector and a line per lane
    assert (a1.bytes, a1.l1_bytes) == (4 * sector, line)
    assert (a32.bytes, a32.l1_bytes) == (32 * sector, 32 * line)
    assert find(wide, "st.global").bytes == 4 * sector      # the store stays coalesced
    # 32 times the sectors from DRAM for the load (the store is the same): several times slower
    assert r32.device_us > 3 * r1.device_us
    assert r32.details["bound"]["resource"] == "DRAM"


def test_data_dependent_address_is_a_sector_per_lane():
    seen, _ = accesses(GATHER, (132,), (256,), [Arr(), Arr(), Arr()])
    idx = [a for t, a in seen.items() if t.startswith("ld.global.u32")][0]
    x = [a for t, a in seen.items() if t.startswith("ld.global.f32")][0]
    assert not idx.indirect and idx.bytes == 4 * MM["sector_bytes"]
    assert x.indirect and x.bytes == 32 * MM["sector_bytes"]


@pytest.mark.parametrize("stride, wavefronts", [(1, 1), (2, 2), (8, 8), (32, 32), (33, 1)])
def test_bank_conflict_wavefronts(stride, wavefronts, sm90):
    seen, _ = accesses(BANKS, (1,), (32,), [Arr(), 64, stride])
    lds = find(seen, "ld.shared")
    assert lds.wavefronts == wavefronts
    assert lds.bytes == wavefronts * sm90.header.shared_banks * sm90.header.shared_bank_bytes


def test_bank_conflicts_cost_time():
    _, free = accesses(BANKS, (132 * 8,), (256,), [Arr(), 4096, 1])
    _, conflicted = accesses(BANKS, (132 * 8,), (256,), [Arr(), 4096, 32])
    assert conflicted.device_us > 8 * free.device_us
    assert conflicted.details["bound"]["resource"] == "shared memory"


def test_random_shared_wavefronts_are_the_expected_largest_bank_load():
    wf = A.expected_wavefronts(32)
    assert 3.2 < wf < 3.9                # 32 random lanes over 32 banks: about 3.5
    assert A.expected_wavefronts(32) == wf                     # the same on every run


def test_same_address_atomics_queue_for_the_whole_grid(sm90):
    seen, small = accesses(ONE_ADDRESS, (132 * 32,), (64,), [Arr()])
    red = find(seen, "red.global")
    assert red.serial_lanes == 1
    _, big = accesses(ONE_ADDRESS, (132 * 128,), (64,), [Arr()])
    ns = MM["atomic_same_address_ns"]
    # one atomic per CTA, one at a time: the grid's atomics take CTAs x ns
    assert big.device_us == pytest.approx(132 * 128 * ns * 1e-3 + sm90.kernel_gap_us, rel=0.1)
    assert big.details["bound"]["resource"] == "same-address atomics"
    assert big.device_us > 3 * small.device_us


def test_every_cta_on_the_same_addresses_queues_per_address_and_atomic_unit(sm90):
    seen, small = accesses(EVERY_CTA, (132 * 32,), (256,), [Arr()])
    red = find(seen, "red.global")
    # one lane per address in a warp, one line (four sectors: four atomic-unit operations,
    # round sim12b) per warp; the CTA's 8 warps share the 8 lines of 1 KiB (two interleave
    # chunks of 512 bytes) evenly: each address is in 1/8 of the warps' atomics
    assert red.serial_lanes == 1 and red.atom_ops == 4 and red.atom_chunks == 2
    assert red.addr_share == pytest.approx(1 / 8)
    _, big = accesses(EVERY_CTA, (132 * 128,), (256,), [Arr()])
    # per CTA: each address takes one atomic (same-address interval), the two atomic units
    # take 8 x 4 operations; the slower of the two queues sets the pace
    per_cta_ns = max(MM["atomic_same_address_ns"], 8 * 4 / 2 * MM["atomic_op_ns"])
    assert big.device_us == pytest.approx(132 * 128 * per_cta_ns * 1e-3 + sm90.kernel_gap_us,
                                          rel=0.15)


def test_histogram_addresses_come_from_the_given_index_values():
    """An atomic whose address is data: with the index array's values given (numpy), the
    pilot reads them; few bins mean a few lines in one interleave chunk, which queue."""
    rng = np.random.default_rng(3)
    n = 132 * 64 * 256
    few = rng.integers(0, 256, size=n).astype(np.uint32)
    many = rng.integers(0, 1 << 22, size=n).astype(np.uint32)
    seen, hot = accesses(HIST, (n // 256,), (256,), [few, Arr()])
    atom = find(seen, "red.global")
    assert atom.indirect and atom.pattern != "indirect"
    # 32 lanes on the 32 sectors of 1 KiB: ~20.5 distinct sectors (an operation each, round
    # sim12b), a few more for lanes on one word; two 512-byte interleave chunks
    assert 18 <= atom.atom_ops <= 25 and atom.atom_chunks == 2
    assert atom.addr_share == pytest.approx(29 / 256, rel=0.25)      # uniform over the bins
    _, cold = accesses(HIST, (n // 256,), (256,), [many, Arr()])
    # (10x, was 20x: since round sim9b the many-bin scatter pays L2's read-modify-write per
    # partial sector, as ptx_red_scatter does on the H200, which took cold up by ~1.4x)
    assert hot.device_us > 10 * cold.device_us
    _, unknown = accesses(HIST, (n // 256,), (256,), [Arr(), Arr()])
    assert find(accesses(HIST, (1,), (256,), [Arr(), Arr()])[0], "red.global").pattern \
        == "indirect"
    assert unknown.device_us < hot.device_us


def test_chao1_and_the_uniform_share():
    assert atomics.chao1({1: 5, 2: 7}) == 2                       # nothing seen once: all seen
    assert atomics.chao1({1: 1, 2: 1, 3: 2}) == 3 + 4 / 2         # f1 = 2, f2 = 1
    # every sampled warp on one address: hot, share 1
    assert atomics.hot_share({0: 40}, {0: 40}, 40, 1, 1) == 1.0
    # one address in every warp besides spread ones: the busy line stands out
    touched = {0: 40, **{100 + k: 1 for k in range(40)}}
    lines = {0: 40, **{10 + k: 1 for k in range(40)}}
    assert atomics.hot_share(touched, lines, 40, 2, 2) == 1.0


def test_cp_async_moves_bytes_and_wait_holds_the_warp(sm90):
    m, k = parse_kernel(CP_ASYNC)
    prog = compile_kernel(k, sm90)
    roles = A.async_roles(prog)
    assert sorted(r for r, _n in roles.values()) == ["commit", "copy", "wait"]
    seen, rep = accesses(CP_ASYNC, (132 * 64,), (256,), [Arr(), Arr(), 0])
    cp = find(seen, "cp.async.cg")
    assert cp.bytes == 16 * 32 and cp.miss == 1.0                # .cg: past L1
    moved = sum(w["bytes_by_level"]["DRAM"] + w["bytes_by_level"]["L2"]
                for w in rep.details["waves"])
    assert moved > 0
    # the copy's latency is waited for: more than a DRAM round trip per CTA
    assert rep.details["bound"]["shares"].get("DRAM", 0) > 0.3 or \
        rep.stalls["dependency"] + rep.stalls["memory"] > 0.3


def test_scalar_shared_loads_of_an_aligned_row_merge(sm90):
    m, k = parse_kernel(ROW)
    prog = compile_kernel(k, sm90)
    idx = A.memory_instrs(prog)
    plan = PathPlan(prog, Env({"out": 1 << 40}, {"buf": 0}), slice_=A.address_slice(prog, idx),
                    record=idx)
    from ptxgen.sim.launch import _lane_specs
    follow(plan, _lane_specs(0, (1, 1, 1), (64, 1, 1), 0, 32, 132, 0, sm90, every_lane=True))
    merges = A.vector_merges(prog, plan.records)
    lds = [st.index for st in prog.instrs if st.text.startswith("ld.shared")]
    assert merges == {i: lds[0] for i in lds[1:]}
    # 4 bytes off: only the middle pair is aligned (to 8 bytes) and becomes one LDS.64
    plan2 = PathPlan(prog, Env({"out": 1 << 40}, {"buf": 4}),
                     slice_=A.address_slice(prog, idx), record=idx)
    follow(plan2, _lane_specs(0, (1, 1, 1), (64, 1, 1), 0, 32, 132, 0, sm90, every_lane=True))
    assert A.vector_merges(prog, plan2.records) == {lds[2]: lds[1]}


def test_one_memory_level_rule(sm90):
    keep = l2_keep_bytes(sm90)
    assert keep == sm90.header.l2_bytes * MM["l2_resident_fraction"] < sm90.header.l2_bytes
    assert memory_level(sm90, keep) == "L2"
    assert memory_level(sm90, keep + 1) == "DRAM"
    assert memory_level(sm90, 1024, cache="cold") == "DRAM"
    assert memory_level(sm90, None) == "DRAM"
    # the roofline places a kernel by the same rule
    from ptxgen.reports.roofline import roofline
    r = roofline(["saxpy"], arch="sm_90", shape={"n": 1 << 20}, time="sim")
    assert r.points[0].level == memory_level(sm90, r.points[0].bytes) == "L2"
    assert r.points[0].fraction < 1.0


# for (k = n; k != 0; k -= 4): an equality exit, which doubling steps over
COUNTDOWN = HEAD + """.visible .entry countdown(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.f32 %f1, 0f3F800000;
LOOP:
  fma.rn.f32 %f1, %f1, %f1, %f1;
  add.s32 %r1, %r1, -4;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra LOOP;
  st.global.f32 [%rd1], %f1;
  ret;
}
"""


@pytest.mark.parametrize("n", [4 * 37, 4 * 100_003])
def test_equality_exit_is_fast_forwarded(n, sm90):
    m, k = parse_kernel(COUNTDOWN)
    prog = compile_kernel(k, sm90)
    plan = PathPlan(prog, Env({"out": 1 << 40, "n": n}, {}))
    from ptxgen.sim.launch import _lane_specs
    p = follow(plan, _lane_specs(0, (1, 1, 1), (32, 1, 1), 0, 32, 132, 0, sm90), cap=(16, 8),
               hot_loop=0)
    assert p.skipped + 16 + 1 == n // 4            # every iteration counted
    assert p.steps < 2000                            # not walked iteration by iteration


# column store: thread (x, y) of a 32 x 8 CTA writes out[x * 8 + y] (4 bytes)
COLUMN = HEAD + """.visible .entry column(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %ctaid.x;
  shl.b32 %r4, %r1, 3;
  add.s32 %r4, %r4, %r2;
  shl.b32 %r5, %r3, 8;
  add.s32 %r4, %r4, %r5;
  cvt.rn.f32.u32 %f1, %r4;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.f32 [%rd3], %f1;
  ret;
}
"""


def test_partial_sector_stores_cost_l2_and_merge_before_dram():
    seen, col = accesses(COLUMN, (132 * 256,), (32, 8), [Arr()])
    st = find(seen, "st.global")
    # each lane writes 4 bytes of its own sector; the CTA's 8 warps fill those sectors
    assert st.partial_sectors == 32 and st.dram_share == pytest.approx(1 / 8)
    # the same CTA writing row-wise: thread (x, y) writes out[y * 32 + x], whole sectors
    row = COLUMN.replace("shl.b32 %r4, %r1, 3;\n  add.s32 %r4, %r4, %r2;",
                         "shl.b32 %r4, %r2, 5;\n  add.s32 %r4, %r4, %r1;")
    seen2, flat = accesses(row, (132 * 256,), (32, 8), [Arr()])
    st2 = find(seen2, "st.global")
    assert st2.partial_sectors == 0 and st2.dram_share == 1.0
    # the same bytes written as partial sectors take longer than written whole
    assert col.device_us > 2 * flat.device_us


def test_scattered_loads_over_more_than_l2_keeps_miss_it(sm90):
    """A gather whose index values are given: over 64 MiB of x, the part L2 cannot keep
    misses; over 4 MiB nothing does."""
    keep = l2_keep_bytes(sm90)
    rng = np.random.default_rng(5)
    n = 132 * 8 * 256
    for span, want in ((1 << 24, 1 - keep / (4 << 24)), (1 << 20, 0.0)):
        idx = rng.integers(0, span, size=n).astype(np.uint32)
        seen, _ = accesses(GATHER, (n // 256,), (256,), [Arr(), idx, Arr()])
        x = [a for t, a in seen.items() if t.startswith("ld.global.f32")][0]
        assert x.pattern == "data" and x.bytes == 32 * MM["sector_bytes"]
        assert x.dram_miss == pytest.approx(want, abs=0.02)


# smem[(tid / 32) * 256 * PRIV + (idx[i] & 255)] += 1: a shared histogram, block-wide (PRIV 0)
# or privatised per warp (PRIV 1)
SHIST = HEAD + """.visible .entry shist(.param .u64 idx, .param .u32 priv)
{
  .reg .b32 %r<12>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 bins[8192];
  ld.param.u64 %rd1, [idx];
  ld.param.u32 %r10, [priv];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r6, [%rd4];
  and.b32 %r6, %r6, 255;
  shr.u32 %r7, %r4, 5;
  mul.lo.s32 %r7, %r7, %r10;
  mad.lo.s32 %r8, %r7, 256, %r6;
  shl.b32 %r8, %r8, 2;
  mov.u32 %r9, bins;
  add.s32 %r9, %r9, %r8;
  atom.shared.add.u32 %r11, [%r9], 1;
  ret;
}
"""


def test_privatised_shared_atomics_take_one_pass_per_wavefront():
    n = 256 * 264
    vals = np.random.default_rng(1).integers(0, 256, n).astype(np.int32)
    got = {}
    for priv in (0, 1):
        seen, rep = accesses(SHIST, (n // 256,), (256,), [vals, priv])
        got[priv] = (find(seen, "atom.shared"), rep)
    (block, rep_block), (own, rep_own) = got[0], got[1]
    # the same bank wavefronts per warp (the same random bins), but only the per-warp tables
    # are seen to share no word between warps
    assert block.wavefronts == own.wavefronts > 1
    assert own.private and not block.private
    assert rep_own.device_us < rep_block.device_us


# block compaction: lane l keeps x[i] > 0 and writes it to out[warp base + popc(ballot & lanes
# below l)] — the kept values' slots are contiguous, whatever the data
COMPACT = HEAD + """.visible .entry compact(.param .u64 x, .param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  setp.gt.f32 %p1, %f1, 0f00000000;
  vote.sync.ballot.b32 %r6, %p1, -1;
  mov.u32 %r7, %laneid;
  shl.b32 %r8, 1, %r7;
  add.s32 %r8, %r8, -1;
  and.b32 %r9, %r6, %r8;
  popc.b32 %r10, %r9;
  sub.s32 %r11, %r5, %r7;
  add.s32 %r11, %r11, %r10;
  mul.wide.u32 %rd5, %r11, 4;
  add.s64 %rd6, %rd2, %rd5;
  @%p1 st.global.f32 [%rd6], %f1;
  ret;
}
"""


def test_compaction_stores_through_a_ballot_are_contiguous():
    seen, _rep = accesses(COMPACT, (132 * 8,), (256,), [Arr(), Arr()])
    st = find(seen, "@%p1 st.global")
    # data the pilot does not have: every lane counts as kept, so the warp's slots are its
    # 32 consecutive words (4 sectors), not one scattered sector per lane
    assert st.bytes == 4 * MM["sector_bytes"]
