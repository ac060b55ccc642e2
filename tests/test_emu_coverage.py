"""Emulator coverage the numba-cuda test kernels needed (issue 15): bar.red.popc/.and/.or
(Numba's syncthreads_count/and/or), checked against numpy on fresh random predicates, also
after the kernel went through the LLVM lowering and both compilers."""
import numpy as np
import pytest

from ptxgen.emu import emulate
from ptxgen.emu.api import LANES_PER_BATCH
from ptxgen.reports.paths import emit_via
from ptxgen.parse import parse_ptx

SEED = np.random.SeedSequence().entropy

BAR_RED = """
.version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u64 q)
{
 .reg .pred %p<4>; .reg .b32 %r<8>; .reg .b64 %rd<6>;
 ld.param.u64 %rd1, [p];
 ld.param.u64 %rd4, [q];
 mov.u32 %r1, %tid.x;
 mov.u32 %r5, %ctaid.x;
 mov.u32 %r6, %ntid.x;
 mad.lo.u32 %r5, %r5, %r6, %r1;
 mul.wide.u32 %rd2, %r5, 4;
 add.u64 %rd5, %rd4, %rd2;
 ld.global.u32 %r7, [%rd5];
 setp.ne.u32 %p1, %r7, 0;
 bar.red.popc.u32 %r2, 0, %p1;
 bar.red.and.pred %p2, 0, %p1;
 barrier.red.or.pred %p3, 0, !%p1;
 selp.u32 %r3, 1, 0, %p2;
 selp.u32 %r4, 1, 0, %p3;
 mul.wide.u32 %rd2, %r5, 12;
 add.u64 %rd2, %rd1, %rd2;
 st.global.u32 [%rd2], %r2;
 st.global.u32 [%rd2+4], %r3;
 st.global.u32 [%rd2+8], %r4;
 ret;
}"""


@pytest.mark.parametrize("via", ["direct", "llvm", "nvvm"])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_bar_red_popc_and_or(via, density):
    rng = np.random.default_rng([SEED, int(density * 10)])
    grid, block = 3, 70                      # a CTA that is not a whole number of warps
    flags = (rng.random(grid * block) < density).astype(np.uint32)
    text = BAR_RED if via == "direct" else emit_via(parse_ptx(BAR_RED), "sm_90", via)
    out = np.zeros((grid * block, 3), np.uint32)
    emulate(text, "k", grid, block, out, flags)
    per_cta = flags.reshape(grid, block)
    want = np.stack([per_cta.sum(1), per_cta.all(1), (per_cta == 0).any(1)], 1)
    np.testing.assert_array_equal(out.reshape(grid, block, 3),
                                  np.repeat(want[:, None, :], block, 1).astype(np.uint32),
                                  err_msg=f"seed {SEED}")


# -- printf ------------------------------------------------------------------------------------
PRINTF = """
.version 7.8
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0,
    .param .b64 vprintf_param_1);
.global .align 1 .b8 fmt[40] = {116,37,100,32,117,37,117,32,120,37,48,56,120,32,37,115,32,99,
    37,99,32,37,53,46,50,102,32,37,108,108,100,32,37,37,10,0};
.global .align 1 .b8 word[4] = {104,105,33,0};
.visible .entry k()
{
 .local .align 8 .b8 buf[48];
 .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<10>; .reg .f64 %fd<2>;
 mov.u32 %r1, %tid.x;
 setp.eq.u32 %p1, %r1, 2;
 mov.u64 %rd1, buf;
 cvta.local.u64 %rd2, %rd1;
 st.local.u32 [buf], %r1;
 sub.u32 %r2, 0, %r1;
 st.local.u32 [buf+4], %r2;
 mul.lo.u32 %r3, %r1, 48879;
 st.local.u32 [buf+8], %r3;
 mov.u64 %rd3, word;
 cvta.global.u64 %rd4, %rd3;
 st.local.u64 [buf+16], %rd4;
 add.u32 %r4, %r1, 65;
 st.local.u32 [buf+24], %r4;
 cvt.rn.f64.u32 %fd1, %r1;
 mul.f64 %fd1, %fd1, 0d3FF8000000000000;
 st.local.f64 [buf+32], %fd1;
 cvt.u64.u32 %rd5, %r1;
 sub.u64 %rd5, 0, %rd5;
 mul.lo.u64 %rd5, %rd5, 1000000007;
 st.local.u64 [buf+40], %rd5;
 mov.u64 %rd6, fmt;
 cvta.global.u64 %rd7, %rd6;
 @%p1 bra $skip;
 {
 .param .b64 param0;
 st.param.b64 [param0+0], %rd7;
 .param .b64 param1;
 st.param.b64 [param1+0], %rd2;
 .param .b32 retval0;
 call.uni (retval0), vprintf, (param0, param1);
 ld.param.b32 %r5, [retval0+0];
 }
$skip:
 ret;
}"""


def test_printf_is_formatted_in_thread_order(capsys):
    r = emulate(PRINTF, "k", 2, 4)
    want = []
    for cta in range(2):
        for t in range(4):
            if t == 2:
                continue                      # this thread branches around the call
            want.append(f"t{t} u{(-t) % 2**32} x{(t * 48879) % 2**32:08x} hi! c{chr(65 + t)} "
                        f"{1.5 * t:5.2f} {-t * 1000000007} %\n")
    assert r.printed == want
    assert capsys.readouterr().out == "".join(want)


def test_numba_print_runs():
    from numba import cuda

    from ptxgen.emu import numba_array_args

    def k(a):
        i = cuda.grid(1)
        print("i =", i, "val", a[i])
    ptx, _ = cuda.compile_ptx(k, "void(float32[::1])", cc=(9, 0))
    m = parse_ptx(ptx)
    a = np.random.default_rng(SEED).random(6).astype(np.float32)
    r = emulate(m, m.entries[0].name, 2, 3, *numba_array_args(a))
    assert r.printed == [f"i = {i} val {float(a[i]):f}\n" for i in range(6)]


# -- cooperative grid sync --------------------------------------------------------------------
GRID_SYNC = """
.version 7.8
.target sm_90
.address_size 64
.extern .func (.param .b64 func_retval0) cudaCGGetIntrinsicHandle (.param .b32 p0);
.extern .func (.param .b32 func_retval0) cudaCGSynchronize (.param .b64 p0, .param .b32 p1);
.visible .entry k(.param .u64 a, .param .u64 b)
{
 .reg .b32 %r<9>; .reg .b64 %rd<12>;
 ld.param.u64 %rd1, [a];
 ld.param.u64 %rd2, [b];
 mov.u32 %r1, %ctaid.x;
 mov.u32 %r2, %nctaid.x;
 mov.u32 %r3, %tid.x;
 mul.wide.u32 %rd3, %r1, 4;
 add.u64 %rd4, %rd1, %rd3;
 add.u32 %r4, %r1, 1;
 st.global.u32 [%rd4], %r4;
 {
 .param .b32 param0;
 st.param.b32 [param0+0], 1;
 .param .b64 retval0;
 call.uni (retval0), cudaCGGetIntrinsicHandle, (param0);
 ld.param.b64 %rd5, [retval0+0];
 }
 {
 .param .b64 param0;
 st.param.b64 [param0+0], %rd5;
 .param .b32 param1;
 st.param.b32 [param1+0], 0;
 .param .b32 retval0;
 call.uni (retval0), cudaCGSynchronize, (param0, param1);
 ld.param.b32 %r8, [retval0+0];
 }
 add.u32 %r5, %r1, 1;
 rem.u32 %r5, %r5, %r2;
 mul.wide.u32 %rd6, %r5, 4;
 add.u64 %rd7, %rd1, %rd6;
 ld.global.u32 %r6, [%rd7];
 mad.lo.u32 %r7, %r1, %ntid.x, %r3;
 mul.wide.u32 %rd8, %r7, 4;
 add.u64 %rd9, %rd2, %rd8;
 add.u32 %r6, %r6, %r8;
 st.global.u32 [%rd9], %r6;
 ret;
}"""


def test_grid_sync_orders_every_cta():
    """Each CTA reads what the next CTA wrote before the grid sync (with CTAs run one batch
    after another, as the emulator does above LANES_PER_BATCH lanes, the last CTA of a batch
    would read a zero)."""
    grid, block = 300, 64
    assert grid * block > LANES_PER_BATCH
    a = np.zeros(grid, np.uint32)
    b = np.zeros(grid * block, np.uint32)
    emulate(GRID_SYNC, "k", grid, block, a, b)
    want = (np.arange(grid) + 1) % grid + 1
    np.testing.assert_array_equal(b.reshape(grid, block), np.repeat(want[:, None], block, 1))


def test_warp_sz_is_the_warp_width():
    # PTX's predefined WARP_SZ (Numba's cuda.warpsize compiles to it)
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd0, [p];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, WARP_SZ;
    rem.u32 %r2, %r0, %r1;
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r2;
    ret;
}"""
    out = np.full(70, 99, np.uint32)
    emulate(parse_ptx(ptx), "k", 1, 70, out)
    np.testing.assert_array_equal(out, np.arange(70) % 32)
