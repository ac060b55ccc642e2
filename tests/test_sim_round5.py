"""Simulator changes after the second blind check (held-out 4): Triton's one-register vector
loads give their values, a warp's stores of one block merge, CTAs sampled over both axes."""
import numpy as np

from ptxgen.sim.waves import spread_ctas

from test_sim_access import HEAD, Arr, _accesses, _find

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


def test_a_vector_of_one_register_load_gives_the_index_value():
    n = 132 * 8
    idx = np.random.default_rng(5).integers(0, 4096, size=n).astype(np.int32)
    seen, known = _accesses(BAG, (n,), (128,), [idx, Arr(), Arr()])
    rows = [a for t, a in seen.items() if t.startswith("ld.global") and a.indirect]
    assert len(rows) == 1
    # the row's 32 lanes read 128 contiguous bytes: 4 sectors, one line (not a line per lane)
    assert rows[0].pattern == "data" and rows[0].bytes == 4 * 32 and rows[0].l1_bytes == 128
    seen2, unknown = _accesses(BAG, (n,), (128,), [Arr(), Arr(), Arr()])
    assert [a for t, a in seen2.items() if a.indirect][0].pattern == "indirect"
    assert unknown.device_us > known.device_us


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


def test_a_warps_stores_of_one_block_merge():
    seen, four = _accesses(QUAD.replace("STORES", SCALAR), (132 * 64,), (256,), [Arr()])
    sts = sorted((t, a) for t, a in seen.items() if t.startswith("st.global"))
    assert len(sts) == 4
    # the first store writes 16 sectors, each partly; the four together fill them: none is
    # partial, and the three later stores add nothing DRAM must take again; L2 takes each
    # store's sectors (round sim9b: store_lanes k=4, this pattern, takes 2x the time of the
    # same bytes written by two stores of 16 bytes per sector on the H200)
    merged = sorted(a.merged for _, a in sts)
    assert merged == [0.0, 1.0, 1.0, 1.0]
    assert all(a.partial_sectors == 0 for _, a in sts)
    assert all(a.l2_sectors == 16 for _, a in sts)
    _, one = _accesses(QUAD.replace("STORES", VECTOR), (132 * 64,), (256,), [Arr()])
    assert 1.5 * one.device_us < four.device_us < 4.5 * one.device_us
    # one scalar store alone leaves 16 partial sectors (a read-modify-write each in L2)
    seen1, _ = _accesses(QUAD.replace("STORES", SCALAR.splitlines()[0]), (132 * 64,), (256,),
                         [Arr()])
    assert _find(seen1, "st.global").partial_sectors == 16


def test_cta_sample_spreads_over_both_axes_of_a_2d_grid():
    # 1-D: the middles of equal parts, as before
    assert spread_ctas(1000, 1000, 4) == [125, 375, 625, 875]
    # 47 CTAs per row, 112 rows (Mandelbrot 1000×1500's full waves), 8 CTAs
    ids = spread_ctas(47 * 112, 47, 8)
    cols, rows = [i % 47 for i in ids], [i // 47 for i in ids]
    assert rows == sorted(rows) and len(set(rows)) == 8 and rows[0] > 0 and rows[-1] < 111
    # columns in every eighth of the width (evenly spaced ids gave 1, 3, …, 15 only)
    assert sorted(c * 8 // 47 for c in cols) == list(range(8))
    assert all(0 <= i < 47 * 112 for i in ids)


def test_a_store_writing_one_lane_per_sector_pays_the_read_modify_write_each_time():
    """Sixteen scalar stores per thread, one lane (4 bytes) per sector each (store_lanes k=16,
    Numba's row of 16 floats per thread): eight stores fill each sector, but every one costs
    L2 the read-modify-write (measured: ~96 bytes a sector and store); DRAM takes each sector
    once."""
    sixteen = "\n".join(f"  st.global.f32 [%rd3+{4 * k}], %f1;" for k in range(16))
    text = QUAD.replace("mul.wide.u32 %rd2, %r4, 16;", "mul.wide.u32 %rd2, %r4, 64;")
    seen, thin = _accesses(text.replace("STORES", sixteen), (132 * 64,), (256,), [Arr()])
    sts = [a for t, a in seen.items() if t.startswith("st.global")]
    assert len(sts) == 16 and all(a.partial_sectors == 32 and a.l2_sectors == 32 for a in sts)
    assert sorted(a.merged for a in sts) == [0.0, 0.0] + [1.0] * 14
    # four times the bytes of the k = 4 kernel above, and each store a read-modify-write
    _, four = _accesses(QUAD.replace("STORES", SCALAR), (132 * 64,), (256,), [Arr()])
    assert thin.device_us > 10 * four.device_us


# a row loop like the dp4a kernel's: top-tested, counted by k, two loads per trip
ROWLOOP = HEAD + """.visible .entry rowloop(.param .u32 rows, .param .u32 kw, .param .u64 db,
  .param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<10>;
  ld.param.u32 %r1, [rows];
  ld.param.u32 %r2, [kw];
  ld.param.u64 %rd1, [db];
  ld.param.u64 %rd2, [out];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  mov.u32 %r7, 0;
  mov.u32 %r8, 0;
LOOP:
  setp.ge.u32 %p1, %r8, %r2;
  @%p1 bra DONE;
  mad.lo.u32 %r9, %r8, %r1, %r6;
  mul.wide.u32 %rd3, %r9, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.u32 %r10, [%rd4];
  EXIT_TEST
  add.u32 %r7, %r7, %r10;
  add.u32 %r8, %r8, 1;
  bra.uni LOOP;
DONE:
  mul.wide.u32 %rd5, %r6, 4;
  add.u64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r7;
  ret;
}
"""


def test_loads_of_a_loop_ptxas_unrolls_are_in_flight_together():
    from ptxgen import isa
    from ptxgen.parse import parse_ptx
    from ptxgen.sim import simulate
    from ptxgen.sim.program import LDG, compile_kernel
    table = isa.load("sm_90")
    factor = table.memory_model["ptxas_unroll_factor"]
    counted = ROWLOOP.replace("EXIT_TEST", "")
    # a second exit that tests loaded data: ptxas cannot unroll it with the loads hoisted
    searched = ROWLOOP.replace("EXIT_TEST", "setp.eq.u32 %p2, %r10, 0;\n  @%p2 bra DONE;")
    for text, want in ((counted, factor), (searched, 1)):
        k = parse_ptx(text).kernel("rowloop")
        prog = compile_kernel(k, table)
        assert [st.unroll for st in prog.instrs if st.kind == LDG] == [want]
    # few warps (latency-bound): four trips' loads in flight make the walk several times faster
    # (the searched loop's loaded values are unknown: both run 256 trips)
    m1, m2 = parse_ptx(counted), parse_ptx(searched)
    args = [132 * 64, 256, Arr(), Arr()]
    fast = simulate(m1.kernel("rowloop"), (132,), (64,), args=args, module=m1, registers=32,
                    trip=256)
    slow = simulate(m2.kernel("rowloop"), (132,), (64,), args=args, module=m2, registers=32,
                    trip=256)
    assert slow.device_us > 2.5 * fast.device_us
