"""Emulator coverage the numba-cuda test kernels needed (issue 15): bar.red.popc/.and/.or
(Numba's syncthreads_count/and/or), checked against numpy on fresh random predicates, also
after the kernel went through the LLVM lowering and both compilers."""
import numpy as np
import pytest

from ptxgen.emu import emulate
from ptxgen.llvm import emit_via
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
