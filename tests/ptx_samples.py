"""Hand-written PTX shared by tests that need a small real kernel."""

# y = a·x + y over n elements, one thread per element of a 1-D grid
SAXPY = """.version 8.0
.target sm_90
.address_size 64
.visible .entry saxpy(.param .u64 x, .param .u64 y, .param .f32 a, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd0, [x];
    ld.param.u64 %rd1, [y];
    ld.param.f32 %f0, [a];
    ld.param.u32 %r0, [n];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    setp.ge.u32 %p0, %r4, %r0;
    @%p0 bra $done;
    mul.wide.u32 %rd2, %r4, 4;
    add.u64 %rd3, %rd0, %rd2;
    add.u64 %rd4, %rd1, %rd2;
    ld.global.f32 %f1, [%rd3];
    ld.global.f32 %f2, [%rd4];
    fma.rn.f32 %f3, %f0, %f1, %f2;
    st.global.f32 [%rd4], %f3;
$done:
    ret;
}
"""
