"""Emulator control flow, warp operations, atomics, special registers and state spaces, through
hand-written PTX kernels with plain pointer parameters."""
import numpy as np
import pytest

from ptxgen import EmulationError, PtxgenError
from ptxgen.emu import emulate

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(name, params, body, decls=""):
    regs = (".reg .pred %p<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<32>;\n.reg .f32 %f<16>;\n"
            + decls)
    return HEAD + f".visible .entry {name}({params})\n{{\n{regs}\n{body}\n}}\n"


DIVERGE = kernel("diverge", ".param .u64 out", """
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;
    and.b32 %r1, %r0, 1;
    setp.eq.u32 %p0, %r1, 0;
    @%p0 bra $even;
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
$loop:                                   // odd threads: a loop of tid trips
    add.u32 %r3, %r3, 3;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, %r0;
    @%p1 bra $loop;
    bra.uni $join;
$even:
    mul.lo.u32 %r3, %r0, 100;
    setp.gt.u32 %p2, %r0, 20;
    @%p2 bra $join;                       // nested divergence inside the even side
    add.u32 %r3, %r3, 7;
$join:
    activemask.b32 %r4;
    setp.ne.u32 %p3, %r0, 1000;
    vote.sync.ballot.b32 %r5, %p3, -1;
    shfl.sync.idx.b32 %r6, %r3, 5, 31, -1;
    mul.wide.u32 %rd1, %r0, 16;
    add.u64 %rd2, %rd0, %rd1;
    st.global.v4.u32 [%rd2], {%r3, %r4, %r5, %r6};
    ret;
""")


def test_divergence_and_reconvergence():
    out = np.zeros((64, 4), np.uint32)
    emulate(DIVERGE, "diverge", 1, 64, out)
    tid = np.arange(64)
    r3 = np.where(tid % 2, 3 * tid, 100 * tid + np.where(tid <= 20, 7, 0))
    np.testing.assert_array_equal(out[:, 0], r3)
    # every lane is back in one group at the join: full active mask and ballot
    np.testing.assert_array_equal(out[:, 1], 0xFFFFFFFF)
    np.testing.assert_array_equal(out[:, 2], 0xFFFFFFFF)
    np.testing.assert_array_equal(out[:, 3], np.repeat(r3[[5, 37]], 32))


BARRIER_EXIT = kernel("early_exit", ".param .u64 out", """
    .shared .align 4 .u32 tile[64];
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;
    setp.ge.u32 %p0, %r0, 40;
    @%p0 ret;                             // these threads leave before the barrier
    mov.u32 %r1, tile;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    add.u32 %r4, %r0, 1000;
    st.shared.u32 [%r3], %r4;
    bar.sync 0;
    sub.u32 %r5, 39, %r0;
    shl.b32 %r6, %r5, 2;
    add.u32 %r7, %r1, %r6;
    ld.shared.u32 %r8, [%r7];
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r8;
    ret;
""")


def test_barrier_with_exited_threads():
    out = np.zeros(64, np.uint32)
    emulate(BARRIER_EXIT, "early_exit", 1, 64, out)
    np.testing.assert_array_equal(out[:40], 1000 + 39 - np.arange(40))
    np.testing.assert_array_equal(out[40:], 0)


WARP = kernel("warp", ".param .u64 out, .param .u32 c", """
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r9, [c];
    mov.u32 %r0, %tid.x;
    mul.lo.u32 %r1, %r0, 7;
    shfl.sync.up.b32 %r2|%p0, %r1, 3, %r9, -1;
    shfl.sync.down.b32 %r3|%p1, %r1, 5, 31, -1;
    shfl.sync.bfly.b32 %r4, %r1, 6, 31, -1;
    shfl.sync.idx.b32 %r5, %r1, %r0, 31, -1;
    and.b32 %r10, %r0, 3;
    setp.eq.u32 %p2, %r10, 0;
    vote.sync.all.pred %p3, %p2, -1;
    vote.sync.any.pred %p4, %p2, -1;
    vote.sync.ballot.b32 %r6, %p2, -1;
    selp.u32 %r7, 1, 0, %p3;
    selp.u32 %r8, 1, 0, %p4;
    selp.u32 %r11, 1, 0, %p0;
    selp.u32 %r12, 1, 0, %p1;
    mov.u32 %r13, %laneid;
    mov.u32 %r14, %lanemask_lt;
    mul.wide.u32 %rd1, %r0, 48;
    add.u64 %rd2, %rd0, %rd1;
    st.global.v4.u32 [%rd2], {%r2, %r3, %r4, %r5};
    st.global.v4.u32 [%rd2+16], {%r6, %r7, %r8, %r11};
    st.global.u32 [%rd2+32], %r12;
    st.global.v2.u32 [%rd2+40], {%r13, %r14};
""")


def _shfl_ref(vals, mode, b, c):
    """PTX ISA shfl pseudo-code for a full warp of 32 values."""
    out, ok = [], []
    clamp, seg = c & 31, (c >> 8) & 31
    for lane in range(32):
        maxl = (lane & seg) | (clamp & ~seg)
        if mode == "up":
            j, p = lane - b, lane - b >= maxl
        elif mode == "down":
            j, p = lane + b, lane + b <= maxl
        elif mode == "bfly":
            j, p = lane ^ b, (lane ^ b) <= maxl
        else:
            j = (lane & seg) | (b & ~seg)
            p = j <= maxl
        out.append(vals[j] if p else vals[lane])
        ok.append(int(p))
    return np.array(out), np.array(ok)


@pytest.mark.parametrize("c", [0, 0x1F, 0x0818])
def test_shfl_and_vote(c):
    out = np.zeros((32, 12), np.uint32)
    emulate(WARP, "warp", 1, 32, out, np.uint32(c))
    v = list(range(0, 32 * 7, 7))
    up, upok = _shfl_ref(v, "up", 3, c)
    np.testing.assert_array_equal(out[:, 0], up)
    np.testing.assert_array_equal(out[:, 7], upok)
    down, downok = _shfl_ref(v, "down", 5, 31)
    np.testing.assert_array_equal(out[:, 1], down)
    np.testing.assert_array_equal(out[:, 8], downok)
    np.testing.assert_array_equal(out[:, 2], _shfl_ref(v, "bfly", 6, 31)[0])
    np.testing.assert_array_equal(out[:, 3], v)
    np.testing.assert_array_equal(out[:, 4], 0x11111111)
    np.testing.assert_array_equal(out[:, 5], 0)
    np.testing.assert_array_equal(out[:, 6], 1)
    np.testing.assert_array_equal(out[:, 10], np.arange(32))
    np.testing.assert_array_equal(out[:, 11], (1 << np.arange(32)) - 1)


ATOMICS = kernel("atomics", ".param .u64 cnt, .param .u64 old, .param .u64 fsum, "
                 ".param .u64 hist", """
    .shared .align 4 .u32 sh[8];
    ld.param.u64 %rd0, [cnt];
    ld.param.u64 %rd1, [old];
    ld.param.u64 %rd2, [fsum];
    ld.param.u64 %rd9, [hist];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mad.lo.u32 %r3, %r1, %r2, %r0;
    setp.lt.u32 %p0, %r0, 8;
    mov.u32 %r20, sh;
    shl.b32 %r21, %r0, 2;
    add.u32 %r22, %r20, %r21;
    mov.u32 %r23, 0;
    @%p0 st.shared.u32 [%r22], %r23;
    bar.sync 0;
    atom.global.add.u32 %r4, [%rd0], 1;
    mul.wide.u32 %rd3, %r3, 4;
    add.u64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r4;
    atom.global.cas.b32 %r5, [%rd0+4], 0, %r3;
    atom.global.max.s32 %r6, [%rd0+8], %r3;
    neg.s32 %r7, %r3;
    atom.global.min.s32 %r8, [%rd0+12], %r7;
    atom.global.inc.u32 %r9, [%rd0+16], 9;
    atom.global.exch.b32 %r10, [%rd0+20], %r3;
    cvt.rn.f32.u32 %f0, %r3;
    red.global.add.f32 [%rd2], %f0;
    and.b32 %r11, %r3, 7;
    shl.b32 %r12, %r11, 2;
    add.u32 %r13, %r20, %r12;
    atom.shared.add.u32 %r14, [%r13], 1;
    bar.sync 0;
    @%p0 ld.shared.u32 %r15, [%r22];
    mul.wide.u32 %rd5, %r1, 32;
    add.u64 %rd6, %rd9, %rd5;
    mul.wide.u32 %rd7, %r0, 4;
    add.u64 %rd8, %rd6, %rd7;
    @%p0 st.global.u32 [%rd8], %r15;
""")


def test_atomics():
    blocks, threads = 4, 96
    n = blocks * threads
    cnt = np.array([0, 0, 0, 0, 0, 12345], np.int32)
    old = np.zeros(n, np.uint32)
    fsum = np.zeros(1, np.float32)
    hist = np.zeros((blocks, 8), np.uint32)
    emulate(ATOMICS, "atomics", blocks, threads, cnt, old, fsum, hist)
    assert cnt[0] == n
    np.testing.assert_array_equal(np.sort(old), np.arange(n))
    assert 0 <= cnt[1] < n                        # exactly one cas saw 0 and stored its id
    assert cnt[2] == n - 1 and cnt[3] == -(n - 1)
    assert cnt[4] == n % 10                       # inc wraps to 0 after 9
    assert 0 <= cnt[5] < n
    assert fsum[0] == pytest.approx(n * (n - 1) / 2, rel=1e-6)
    np.testing.assert_array_equal(hist, threads // 8)


SPECIALS = kernel("specials", ".param .u64 out", """
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;   mov.u32 %r1, %tid.y;   mov.u32 %r2, %tid.z;
    mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ctaid.y; mov.u32 %r5, %ctaid.z;
    mov.u32 %r6, %ntid.x;  mov.u32 %r7, %ntid.y;  mov.u32 %r8, %nctaid.x;
    mov.u32 %r9, %nctaid.y; mov.u32 %r10, %warpid; mov.u32 %r11, %laneid;
    // linear global thread id: ((bz*gy + by)*gx + bx) * threads + tlin
    mad.lo.u32 %r12, %r2, %r7, %r1;
    mad.lo.u32 %r12, %r12, %r6, %r0;
    mad.lo.u32 %r13, %r5, %r9, %r4;
    mad.lo.u32 %r13, %r13, %r8, %r3;
    mul.lo.u32 %r14, %r6, %r7;
    mov.u32 %r15, %ntid.z;
    mul.lo.u32 %r14, %r14, %r15;
    mad.lo.u32 %r16, %r13, %r14, %r12;
    mul.wide.u32 %rd1, %r16, 32;
    add.u64 %rd2, %rd0, %rd1;
    st.global.v4.u32 [%rd2], {%r0, %r1, %r2, %r3};
    st.global.v4.u32 [%rd2+16], {%r4, %r5, %r10, %r11};
""")


def test_special_registers_3d():
    grid, block = (3, 2, 2), (5, 4, 3)
    nthr = 60
    out = np.zeros((12 * nthr, 8), np.uint32)
    emulate(SPECIALS, "specials", grid, block, out)
    bz, by, bx, tz, ty, tx = np.meshgrid(range(2), range(2), range(3), range(3), range(4),
                                         range(5), indexing="ij")
    tlin = (tz * 4 + ty) * 5 + tx
    want = np.stack([tx, ty, tz, bx, by, bz, tlin // 32, tlin % 32], -1).reshape(-1, 8)
    np.testing.assert_array_equal(out, want)


SPACES = HEAD + """
.extern .shared .align 16 .b8 dyn[];
.global .align 4 .u32 gcount = 5;
.const .align 4 .u32 ctab[4] = {10, 20, 30, 40};
.visible .entry spaces(.param .u64 inp, .param .u64 out)
{
    .local .align 8 .b8 depot[32];
    .shared .align 4 .u32 stat[4];
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<32>;
    ld.param.u64 %rd0, [inp];
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ntid.x;
    mul.wide.u32 %rd2, %r0, 4;
    add.u64 %rd3, %rd0, %rd2;
    ld.u32 %r2, [%rd3];                    // generic load of a global address
    // reverse through dynamic shared memory, written generically after cvta.shared
    mov.u64 %rd4, dyn;
    cvta.shared.u64 %rd5, %rd4;
    add.u64 %rd6, %rd5, %rd2;
    st.u32 [%rd6], %r2;
    setp.eq.u32 %p0, %r0, 0;
    @%p0 st.shared.u32 [stat+4], %r1;
    bar.sync 0;
    sub.u32 %r3, %r1, %r0;
    sub.u32 %r3, %r3, 1;
    mul.wide.u32 %rd7, %r3, 4;
    add.u64 %rd8, %rd4, %rd7;
    ld.shared.u32 %r4, [%rd8];
    ld.shared.u32 %r5, [stat+4];
    // per-thread local array: depot[k] = tid + k, read back through a generic address
    mov.u64 %rd9, depot;
    cvta.local.u64 %rd10, %rd9;
    mov.u32 %r6, 0;
$fill:
    add.u32 %r7, %r0, %r6;
    mul.wide.u32 %rd11, %r6, 4;
    add.u64 %rd12, %rd9, %rd11;
    st.local.u32 [%rd12], %r7;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p1, %r6, 8;
    @%p1 bra $fill;
    ld.u32 %r8, [%rd10+28];
    and.b32 %r9, %r0, 3;
    mul.wide.u32 %rd13, %r9, 4;
    mov.u64 %rd14, ctab;
    add.u64 %rd15, %rd14, %rd13;
    ld.const.u32 %r10, [%rd15];
    ld.global.u32 %r11, [gcount];
    isspacep.shared %p2, %rd6;
    selp.u32 %r12, 1, 0, %p2;
    mul.wide.u32 %rd16, %r0, 32;
    add.u64 %rd17, %rd1, %rd16;
    st.global.v2.u32 [%rd17], {%r4, %r5};
    st.global.v4.u32 [%rd17+16], {%r8, %r10, %r11, %r12};
    ret;
}
"""


def test_state_spaces_and_generic_addressing():
    n = 48
    inp = np.arange(100, 100 + n, dtype=np.uint32)
    out = np.zeros((n, 8), np.uint32)
    emulate(SPACES, "spaces", 1, n, inp, out, shared_bytes=4 * n)
    np.testing.assert_array_equal(out[:, 0], inp[::-1])
    np.testing.assert_array_equal(out[:, 1], n)
    np.testing.assert_array_equal(out[:, 4], np.arange(n) + 7)
    np.testing.assert_array_equal(out[:, 5], 10 * (np.arange(n) % 4 + 1))
    np.testing.assert_array_equal(out[:, 6], 5)
    np.testing.assert_array_equal(out[:, 7], 1)
    # too little dynamic shared memory: the reversal reads past it
    with pytest.raises(EmulationError, match="out-of-bounds shared"):
        emulate(SPACES, "spaces", 1, n, inp, out, shared_bytes=4 * n - 4)


def test_unsupported_opcode_names_opcode_kernel_and_line():
    text = kernel("uses_tex", ".param .u64 out", """
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p0, %r0, 99;
    @%p0 bra $skip;
    tex.1d.v4.f32.s32 {%f0, %f1, %f2, %f3}, [tref, {%r0}];
$skip:
    ret;
""")
    line = text.splitlines().index(next(x for x in text.splitlines() if "tex.1d" in x)) + 1
    with pytest.raises(EmulationError) as e:
        emulate(text, "uses_tex", 1, 32, np.zeros(1, np.uint32))
    msg = str(e.value)
    assert "tex" in msg and "uses_tex" in msg and f"PTX line {line}" in msg
    assert "\n" not in msg
    # the same instruction on a path no thread takes does not stop the kernel
    emulate(text.replace("99", "0"), "uses_tex", 1, 1, np.zeros(1, np.uint32))


CALLS = HEAD + """
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 fmt, .param .b64 args);
.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    shl.b32 %r2, %r1, 1;
    st.param.b32 [r], %r2;
    ret;
}
.func (.param .b32 r) twice_plus(.param .b32 x, .param .b32 y)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    ld.param.b32 %r1, [x];
    ld.param.b32 %r2, [y];
    setp.gt.s32 %p1, %r2, 100;
    @%p1 bra $big;
    {
    .param .b32 p0;
    st.param.b32 [p0], %r1;
    .param .b32 r0;
    call.uni (r0), twice, (p0);
    ld.param.b32 %r3, [r0];
    }
    add.s32 %r4, %r3, %r2;
    st.param.b32 [r], %r4;
    ret;
$big:
    st.param.b32 [r], %r2;
    ret;
}
.func loop_forever(.param .b32 x)
{
    {
    .param .b32 q;
    st.param.b32 [q], 1;
    call.uni loop_forever, (q);
    }
    ret;
}
.visible .entry caller(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;
    mul.lo.u32 %r1, %r0, 10;
    {
    .param .b32 p0;
    st.param.b32 [p0], %r0;
    .param .b32 p1;
    st.param.b32 [p1], %r1;
    .param .b32 r0;
    call.uni (r0), twice_plus, (p0, p1);
    ld.param.b32 %r2, [r0];
    }
    setp.eq.u32 %p1, %r0, 3;
    @%p1 bra $skip;
    {
    .param .b32 p0;
    st.param.b32 [p0], %r2;
    .param .b32 r0;
    call.uni (r0), twice, (p0);
    ld.param.b32 %r2, [r0];
    }
$skip:
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r2;
    ret;
}
.visible .entry prints()
{
    .reg .b64 %rd<2>;
    {
    .param .b64 a0;
    st.param.b64 [a0], 0;
    .param .b64 a1;
    st.param.b64 [a1], 0;
    .param .b32 r0;
    call.uni (r0), vprintf, (a0, a1);
    }
    ret;
}
.visible .entry recurses()
{
    {
    .param .b32 q;
    st.param.b32 [q], 1;
    call.uni loop_forever, (q);
    }
    ret;
}
"""


def test_func_calls_are_inlined():
    out = np.zeros(16, np.uint32)
    emulate(CALLS, "caller", 1, 16, out)
    t = np.arange(16)
    first = np.where(10 * t > 100, 10 * t, 2 * t + 10 * t)      # twice_plus(t, 10 t)
    np.testing.assert_array_equal(out, np.where(t == 3, first, 2 * first))


# vprintf is emulated (emu.printf): a null format string is an invalid access at the call
@pytest.mark.parametrize("entry,why", [("prints", "out-of-bounds global load of 1 bytes at "
                                                  "global address 0x0"),
                                       ("recurses", "loop_forever calls itself (recursion is not emulated)")])
def test_calls_that_cannot_be_emulated_are_reported(entry, why):
    line = CALLS.splitlines().index(next(x for x in CALLS.splitlines()[
        CALLS.splitlines().index(f".visible .entry {entry}()"):] if "call.uni" in x)) + 1
    with pytest.raises(EmulationError) as e:
        emulate(CALLS, entry, 1, 1)
    msg = str(e.value)
    assert f"kernel {entry}" in msg and "call.uni" in msg and why in msg
    if entry == "prints":
        assert f"PTX line {line}" in msg


def test_argument_checks():
    with pytest.raises(PtxgenError, match=r"spaces takes 2 arguments"):
        emulate(SPACES, "spaces", 1, 4, np.zeros(4, np.uint32))
    text = kernel("scalar", ".param .u32 n, .param .f32 a, .param .u64 out", "ret;")
    out = np.zeros(1, np.float32)
    with pytest.raises(PtxgenError, match=r"kernel scalar: parameter n is \.u32.*np\.uint32"):
        emulate(text, "scalar", 1, 1, 3, np.float32(1), out)
    with pytest.raises(PtxgenError, match=r"kernel scalar: parameter a is \.f32.*float64"):
        emulate(text, "scalar", 1, 1, np.uint32(3), np.float64(1), out)
    with pytest.raises(PtxgenError, match=r"parameter n is \.u32; .*array"):
        emulate(text, "scalar", 1, 1, out, np.float32(1), out)
    emulate(text, "scalar", 1, 1, np.uint32(3), np.float32(1), out)
    with pytest.raises(PtxgenError, match="more than 1024 threads"):
        emulate(text, "scalar", 1, (64, 32), np.uint32(3), np.float32(1), out)
    with pytest.raises(PtxgenError, match="no kernel named"):
        emulate(text, "nope", 1, 1)


MORE_WARP = kernel("more_warp", ".param .u64 out, .param .align 8 .b8 pair[16]", """
    .shared .align 8 .u64 acc;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r20, [pair+8];
    mov.u64 %rd9, pair;
    ld.param.u32 %r21, [%rd9+12];
    mov.u32 %r0, %tid.x;
    redux.sync.add.u32 %r1, %r0, -1;
    redux.sync.max.s32 %r2, %r0, -1;
    and.b32 %r3, %r0, 1;
    setp.eq.u32 %p0, %r3, 1;
    setp.lt.u32 %p1, %r0, 64;
    vote.sync.uni.pred %p2, %p1, -1;
    selp.u32 %r4, 1, 0, %p2;
    mov.u32 %r5, 0;
    @%p0 bra $odd;
    activemask.b32 %r5;
$odd:
    bar.warp.sync -1;
    setp.eq.u32 %p3, %r0, 0;
    mov.u64 %rd1, acc;
    cvta.shared.u64 %rd2, %rd1;
    mov.u64 %rd3, 0;
    @%p3 st.u64 [%rd2], %rd3;
    bar.sync 0;
    cvt.u64.u32 %rd4, %r0;
    atom.add.u64 %rd5, [%rd2], %rd4;
    bar.sync 0;
    ld.shared.u64 %rd6, [acc];
    mul.wide.u32 %rd7, %r0, 32;
    add.u64 %rd8, %rd0, %rd7;
    st.global.v4.u32 [%rd8], {%r1, %r2, %r4, %r5};
    st.global.v2.u32 [%rd8+16], {%r20, %r21};
    st.global.u64 [%rd8+24], %rd6;
""")


def test_redux_vote_uni_activemask_generic_atomics_and_byte_params():
    out = np.zeros((64, 8), np.uint32)
    pair = np.array([1, 2, 77, 99], np.uint32)
    emulate(MORE_WARP, "more_warp", 1, 64, out, pair.tobytes())
    tid = np.arange(64)
    np.testing.assert_array_equal(out[:, 0], np.where(tid < 32, sum(range(32)),
                                                      sum(range(32, 64))))
    np.testing.assert_array_equal(out[:, 1], np.where(tid < 32, 31, 63))
    np.testing.assert_array_equal(out[:, 2], 1)
    # even lanes only are active inside the branch
    np.testing.assert_array_equal(out[:, 3], np.where(tid % 2 == 0, 0x55555555, 0))
    np.testing.assert_array_equal(out[:, 4:6], np.tile([77, 99], (64, 1)))
    assert (out[:, 6:8].copy().view(np.uint64) == sum(range(64))).all()
    with pytest.raises(PtxgenError, match="pair has 16 bytes, got 12"):
        emulate(MORE_WARP, "more_warp", 1, 64, out, pair[:3].tobytes())


def test_infinite_loop_is_stopped(monkeypatch):
    from ptxgen.emu import executor
    monkeypatch.setattr(executor, "MAX_GROUP_STEPS", 1000)
    text = kernel("spin", "", "$top:\n    bra.uni $top;")
    with pytest.raises(EmulationError, match="spin: no end after"):
        emulate(text, "spin", 1, 1)


MATCH = kernel("match", ".param .u64 out", """
    ld.param.u64 %rd0, [out];
    mov.u32 %r0, %tid.x;
    and.b32 %r1, %r0, 3;                     // four classes per warp
    match.any.sync.b32 %r2, %r1, -1;
    shr.u32 %r3, %r0, 5;                      // one value per warp
    match.all.sync.b32 %r4|%p0, %r3, -1;
    selp.u32 %r5, 1, 0, %p0;
    match.all.sync.b32 %r6|%p1, %r1, -1;
    selp.u32 %r7, 1, 0, %p1;
    setp.gt.u32 %p2, %r0, 4;
    mov.u32 %r8, 77;
    mov.u32 %r9, 0;
    @!%p2 bra $skip;
    elect.sync %r8|%p3, -1;
    selp.u32 %r9, 1, 0, %p3;
$skip:
    mul.wide.u32 %rd1, %r0, 32;
    add.u64 %rd2, %rd0, %rd1;
    st.global.v4.u32 [%rd2], {%r2, %r4, %r5, %r6};
    st.global.v4.u32 [%rd2+16], {%r7, %r8, %r9, %r0};
""")


def test_match_and_elect():
    out = np.zeros((64, 8), np.uint32)
    emulate(MATCH, "match", 1, 64, out)
    t = np.arange(64)
    np.testing.assert_array_equal(out[:, 0], np.array([0x11111111 << (k % 4) for k in t],
                                                      np.uint64).astype(np.uint32))
    np.testing.assert_array_equal(out[:, 1], 0xFFFFFFFF)
    np.testing.assert_array_equal(out[:, 2], 1)
    np.testing.assert_array_equal(out[:, 3], 0)
    np.testing.assert_array_equal(out[:, 4], 0)
    # lanes 5.. of warp 0 and every lane of warp 1 elect their lowest active lane
    np.testing.assert_array_equal(out[:, 5], np.where(t <= 4, 77, np.where(t < 32, 5, 0)))
    np.testing.assert_array_equal(out[:, 6], (t == 5) | (t == 32))


CONFLICTS = kernel("conflicts", ".param .u64 idx, .param .u64 val, .param .u64 cell, "
                   ".param .u64 old", """
    ld.param.u64 %rd0, [idx];  ld.param.u64 %rd1, [val];
    ld.param.u64 %rd2, [cell]; ld.param.u64 %rd3, [old];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd4, %r0, 4;
    add.u64 %rd5, %rd0, %rd4;  ld.global.u32 %r1, [%rd5];
    add.u64 %rd6, %rd1, %rd4;  ld.global.u32 %r2, [%rd6];
    mul.wide.u32 %rd7, %r1, 4;
    add.u64 %rd8, %rd2, %rd7;
    atom.global.{op}.u32 %r3, [%rd8], %r2;
    add.u64 %rd9, %rd3, %rd4;  st.global.u32 [%rd9], %r3;
""")


@pytest.mark.parametrize("op", ["add", "exch", "max", "inc"])
def test_conflicting_atomics_apply_in_lane_order(op):
    # lanes of a warp on a few addresses: each lane's old value is the cell after the lanes
    # before it (in lane order) on the same address
    rng = np.random.default_rng(7)
    n, cells = 96, 5
    idx = rng.integers(0, cells, n).astype(np.uint32)
    val = rng.integers(0, 50, n).astype(np.uint32)
    cell = rng.integers(0, 50, cells).astype(np.uint32)
    want_cell, want_old = cell.copy(), np.zeros(n, np.uint32)
    for k in range(n):
        o = want_cell[idx[k]]
        want_old[k] = o
        want_cell[idx[k]] = {"add": o + val[k], "exch": val[k], "max": max(o, val[k]),
                             "inc": 0 if o >= val[k] else o + 1}[op]
    old = np.zeros(n, np.uint32)
    emulate(CONFLICTS.replace("{op}", op), "conflicts", 1, n, idx, val, cell, old)
    np.testing.assert_array_equal(old, want_old)
    np.testing.assert_array_equal(cell, want_cell)
