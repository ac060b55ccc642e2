"""Memcheck (out-of-bounds, misaligned) and racecheck/initcheck on shared memory."""
import warnings

import numpy as np
import pytest

from ptxgen import EmulationError
from ptxgen.emu import EmulationWarning, emulate
from ptxgen.emu.memory import GLOBAL_BASE
from ptxgen.ir import Addr, Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ops import get_operator

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"

OFF_BY = HEAD + """.visible .entry fill(.param .u64 out, .param .u32 n, .param .u32 shift)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [n];
    ld.param.u32 %r6, [shift];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    setp.ge.u32 %p0, %r4, %r0;
    @%p0 bra $done;
    add.u32 %r5, %r4, %r6;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r4;
$done:
    ret;
}
"""
STORE_LINE = OFF_BY.splitlines().index("    st.global.u32 [%rd2], %r4;") + 1


def test_out_of_bounds_store_names_block_thread_address_and_line():
    n = 100
    out = np.zeros(n, np.uint32)
    emulate(OFF_BY, "fill", 4, 32, out, np.uint32(n), np.uint32(0))
    np.testing.assert_array_equal(out, np.arange(n))
    with pytest.raises(EmulationError) as e:
        emulate(OFF_BY, "fill", 4, 32, out, np.uint32(n), np.uint32(1))
    msg = str(e.value)
    # thread 99 = block 3, thread 3 writes out[100], one element past the end
    addr = GLOBAL_BASE + 4 * n
    assert "kernel fill" in msg and "out-of-bounds global store of 4 bytes" in msg
    assert "block (3, 0, 0) thread (3, 0, 0)" in msg
    assert f"{addr:#x}" in msg
    assert "`st.global.u32 [%rd2], %r4;`" in msg and f"PTX line {STORE_LINE}" in msg
    assert "0 bytes past the end of out" in msg
    assert "\n" not in msg


def test_out_of_bounds_in_warn_mode_skips_the_access():
    out = np.zeros(10, np.uint32)
    with pytest.warns(EmulationWarning, match="out-of-bounds global store"):
        r = emulate(OFF_BY, "fill", 1, 32, out, np.uint32(12), np.uint32(0), check="warn")
    np.testing.assert_array_equal(out, np.arange(10))
    assert len(r.findings) == 1 and "thread (10, 0, 0)" in r.findings[0]
    # an invalid access is a fault even with the shared-memory checks off
    with pytest.raises(EmulationError, match="out-of-bounds"):
        emulate(OFF_BY, "fill", 1, 32, out, np.uint32(12), np.uint32(0), check="off")


def test_operator_with_short_arrays_faults():
    op = get_operator("saxpy")
    shape = op.shape(n=1000)
    arrays = op.make_inputs(shape, np.random.default_rng(0))
    arrays["y"] = arrays["y"][:900].copy()
    from ptxgen.emu.backend import run_operator
    with pytest.raises(EmulationError, match=r"kernel saxpy: out-of-bounds global load .* "
                                             r"by block \(\d+, 0, 0\) thread \(\d+, 0, 0\)"):
        run_operator(op, shape, arrays)


def test_misaligned_access():
    text = OFF_BY.replace("mul.wide.u32 %rd1, %r5, 4;", "mul.wide.u32 %rd1, %r5, 6;")
    with pytest.raises(EmulationError, match=r"misaligned global store of 4 bytes .* thread "
                                             r"\(1, 0, 0\)"):
        emulate(text, "fill", 1, 8, np.zeros(64, np.uint32), np.uint32(8), np.uint32(0))


def reduction(barriers=(True,) * 7, init_shared=True, n=64):
    """Per-block sums of n floats through shared memory (block c sums x[c*n:(c+1)*n] into
    out[c]), built with the IR builder; barriers[i] says whether the i-th bar.sync is there
    (leave one out to plant a race)."""
    m = Module()
    k = m.add_kernel("block_sum", [Param("x", T.u64, ptr(T.f32)), Param("out", T.u64,
                                                                         ptr(T.f32))])
    b = Builder(k)
    buf = b.shared("buf", T.f32, n)
    tid = b.special("tid.x")
    x, out = b.param("x"), b.param("out")
    slot = b.add(b.address_of(buf), b.shl(tid, 2), name="slot")
    if init_shared:
        gid = b.global_index()
        b.st("shared", slot, b.ld("global", T.f32, b.element_addr(x, gid, 4)))
    bars = iter(barriers)
    if next(bars):
        b.bar_sync()
    s = n // 2
    while s:
        with b.if_(b.setp("lt", tid, s)):
            lo = b.ld("shared", T.f32, slot)
            hi = b.ld("shared", T.f32, Addr(slot, 4 * s))
            b.st("shared", slot, b.add(lo, hi))
        if next(bars):
            b.bar_sync()
        s //= 2
    with b.if_(b.setp("eq", tid, 0)):
        cta = b.special("ctaid.x")
        b.st("global", b.element_addr(out, cta, 4), b.ld("shared", T.f32, slot))
    b.ret()
    return m


def test_reduction_with_barriers_is_clean():
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    out = np.zeros(1, np.float32)
    r = emulate(reduction(), "block_sum", 1, 64, x, out)
    assert r.findings == []
    assert out[0] == pytest.approx(float(x.astype(np.float64).sum()), abs=1e-4)


def test_planted_race_is_reported():
    # no barrier after the first step: step 2 reads buf[t+16], which thread t+16 just wrote
    m = reduction(barriers=(True, False, True, True, True, True, True))
    x = np.ones(64, np.float32)
    with pytest.raises(EmulationError) as e:
        emulate(m, "block_sum", 1, 64, x, np.zeros(1, np.float32))
    msg = str(e.value)
    assert "shared-memory race" in msg and "kernel block_sum" in msg
    assert "block (0, 0, 0) thread (0, 0, 0)" in msg and "thread (16, 0, 0) wrote" in msg
    assert "shared address 0x40" in msg and "ld.shared.f32" in msg
    with pytest.warns(EmulationWarning, match="shared-memory race"):
        r = emulate(m, "block_sum", 1, 64, x, np.zeros(1, np.float32), check="warn")
    assert r.findings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = emulate(m, "block_sum", 1, 64, x, np.zeros(1, np.float32), check="off")
    assert r.findings == []


def test_write_after_read_race():
    # without the first barrier, step 1 reads buf[t+32] possibly before thread t+32 stores it
    m = reduction(barriers=(False, True, True, True, True, True, True))
    with pytest.raises(EmulationError, match="shared-memory race"):
        emulate(m, "block_sum", 1, 64, np.ones(64, np.float32), np.zeros(1, np.float32))


def test_same_location_written_by_many_threads():
    text = HEAD + """.visible .entry flag(.param .u64 out)
{
    .shared .align 4 .u32 f;
    .reg .b32 %r<3>;
    mov.u32 %r0, %tid.x;
    st.shared.u32 [f], %r0;
    ret;
}
"""
    with pytest.raises(EmulationError, match=r"race: thread \(\d+, 0, 0\) writes a different "
                                             r"value to the same location in the same "
                                             r"instruction"):
        emulate(text, "flag", 1, 32, np.zeros(1, np.uint32))
    emulate(text, "flag", 1, 1, np.zeros(1, np.uint32))


# lanes store a pair {tid / g0, tid / g1} to slot tid / 4 (a layout conversion's pattern: with
# g0 = g1 = 4 the four lanes of a slot hold copies of one value); after a barrier every lane
# reads its slot back
SLOTS = HEAD + """.visible .entry slots(.param .u64 out, .param .u32 g0, .param .u32 g1)
{
    .shared .align 8 .b32 buf[64];
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r8, [g0];
    ld.param.u32 %r9, [g1];
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 2;
    div.u32 %r2, %r0, %r8;
    div.u32 %r3, %r0, %r9;
    mov.u32 %r4, buf;
    shl.b32 %r5, %r1, 3;
    add.u32 %r4, %r4, %r5;
    st.shared.v2.b32 [%r4], {%r2, %r3};
    bar.sync 0;
    ld.shared.v2.b32 {%r6, %r7}, [%r4];
    mul.lo.u32 %r7, %r7, 1000;
    add.u32 %r6, %r6, %r7;
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r6;
    ret;
}
"""
SLOTS_STORE = "`st.shared.v2.b32 [%r4], {%r2, %r3};` at PTX line " + \
    str(SLOTS.splitlines().index("    st.shared.v2.b32 [%r4], {%r2, %r3};") + 1)


def test_lanes_storing_the_same_value_to_one_place_are_no_race():
    # four lanes write each slot, all the same pair: any order leaves the same memory
    out = np.zeros(128, np.uint32)
    r = emulate(SLOTS, "slots", 1, 128, out, np.uint32(4), np.uint32(4))
    assert r.findings == []
    t = np.arange(128) // 4
    np.testing.assert_array_equal(out, 1001 * t)


@pytest.mark.parametrize("g0, g1", [(1, 1), (4, 1), (1, 4)])
def test_lanes_storing_different_values_to_one_place_race(g0, g1):
    # the lanes of a slot differ in both words, or in only one of the pair's two words
    with pytest.raises(EmulationError) as e:
        emulate(SLOTS, "slots", 1, 128, np.zeros(128, np.uint32), np.uint32(g0), np.uint32(g1))
    msg = str(e.value)
    assert "writes a different value to the same location in the same instruction" in msg
    assert SLOTS_STORE in msg
    addr = int(msg.split("shared address ")[1].split()[0], 16)
    assert addr == (0 if g0 == 1 else 4)        # the first granule whose bytes differ
    with pytest.warns(EmulationWarning, match="writes a different value"):
        emulate(SLOTS, "slots", 1, 128, np.zeros(128, np.uint32), np.uint32(g0), np.uint32(g1),
                check="warn")



def test_uninitialized_shared_read():
    m = reduction(init_shared=False)
    with pytest.raises(EmulationError) as e:
        emulate(m, "block_sum", 1, 64, np.ones(64, np.float32), np.zeros(1, np.float32))
    msg = str(e.value)
    assert "read of shared memory never written" in msg
    assert "block (0, 0, 0) thread (0, 0, 0)" in msg and "shared address 0x0" in msg


def test_many_ctas_have_separate_shared_memory():
    # 40 CTAs run side by side in one batch; each has its own shared memory and its own race
    # bookkeeping, so equal shared addresses in different CTAs are neither mixed nor a race
    x = np.random.default_rng(2).standard_normal(64 * 40).astype(np.float32)
    out = np.full(40, np.nan, np.float32)
    r = emulate(reduction(), "block_sum", 40, 64, x, out)
    np.testing.assert_allclose(out, x.reshape(40, 64).astype(np.float64).sum(1), atol=1e-4)
    assert r.findings == []


NEIGHBOUR_READS = HEAD + """.visible .entry rotate(.param .u64 out, .param .u32 group)
{
    .shared .align 4 .u32 buf[64];
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r9, [group];
    mov.u32 %r0, %tid.x;
    shl.b32 %r1, %r0, 2;
    mov.u32 %r2, buf;
    add.u32 %r3, %r2, %r1;
    st.shared.u32 [%r3], %r0;
    bar.warp.sync -1;
    add.u32 %r4, %r0, 1;
    rem.u32 %r4, %r4, %r9;
    div.u32 %r11, %r0, %r9;
    mad.lo.u32 %r4, %r11, %r9, %r4;
    shl.b32 %r5, %r4, 2;
    add.u32 %r6, %r2, %r5;
    ld.shared.u32 %r7, [%r3];
    ld.shared.u32 %r8, [%r6];
    bar.warp.sync -1;
    add.u32 %r8, %r8, %r7;
    st.shared.u32 [%r3], %r8;
    ld.param.u64 %rd0, [out];
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r8;
    ret;
}
"""


@pytest.mark.parametrize("group", [32, 64])
def test_a_warp_barrier_forgets_reads_by_several_lanes_of_its_warp(group):
    """Every word is read by its own lane and its neighbour (several readers); after
    bar.warp.sync each lane overwrites its word. Within a warp (group 32) that is ordered; when
    the neighbours cross into the other warp (group 64: lane 31 reads lane 32's word), the second
    warp's write still races with the first warp's read."""
    out = np.zeros(64, np.uint32)
    if group == 32:
        emulate(NEIGHBOUR_READS, "rotate", 1, 64, out, np.uint32(group))
        t = np.arange(64)
        assert (out == t + (t // 32 * 32 + (t + 1) % 32)).all()
    else:
        with pytest.raises(EmulationError, match="several other threads read"):
            emulate(NEIGHBOUR_READS, "rotate", 1, 64, out, np.uint32(group))
