"""Hand-written PTX kernels of the model benchmark set (benchmarks/model_set.py).

Each isolates one resource: a 16-byte copy (DRAM or L2 bandwidth), independent FMA chains (the
FP32 pipe), shared loads at a lane stride (bank conflicts: stride 1 none, 8 eight-way, 32
thirty-two-way), global atomics to one address and to a spread of addresses (L2 atomic units),
and an empty kernel (launch overhead).
"""

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n\n"

COPY_V4 = HEAD + """.visible .entry copy_v4(.param .u64 src, .param .u64 dst, .param .u32 n4)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  ld.param.u32 %r1, [n4];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.u32 %rd5, %r5, 16;
  add.s64 %rd6, %rd3, %rd5;
  add.s64 %rd7, %rd4, %rd5;
  ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd6];
  st.global.v4.f32 [%rd7], {%f0, %f1, %f2, %f3};
DONE:
  ret;
}
"""

FMA_CHAIN = HEAD + """.visible .entry fma_chain(.param .u64 out, .param .u32 iters)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<20>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  cvt.rn.f32.u32 %f0, %r5;
  mov.f32 %f9, 0f3F800100;
  mov.f32 %f10, 0f3C23D70A;
  add.f32 %f1, %f0, 0f3F800000;
  add.f32 %f2, %f0, 0f40000000;
  add.f32 %f3, %f0, 0f40400000;
  add.f32 %f4, %f0, 0f40800000;
  add.f32 %f5, %f0, 0f40A00000;
  add.f32 %f6, %f0, 0f40C00000;
  add.f32 %f7, %f0, 0f40E00000;
  add.f32 %f8, %f0, 0f41000000;
  mov.u32 %r6, 0;
LOOP:
  fma.rn.f32 %f1, %f1, %f9, %f10;
  fma.rn.f32 %f2, %f2, %f9, %f10;
  fma.rn.f32 %f3, %f3, %f9, %f10;
  fma.rn.f32 %f4, %f4, %f9, %f10;
  fma.rn.f32 %f5, %f5, %f9, %f10;
  fma.rn.f32 %f6, %f6, %f9, %f10;
  fma.rn.f32 %f7, %f7, %f9, %f10;
  fma.rn.f32 %f8, %f8, %f9, %f10;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p1, %r6, %r1;
  @%p1 bra LOOP;
  add.f32 %f11, %f1, %f2;
  add.f32 %f12, %f3, %f4;
  add.f32 %f13, %f5, %f6;
  add.f32 %f14, %f7, %f8;
  add.f32 %f15, %f11, %f12;
  add.f32 %f16, %f13, %f14;
  add.f32 %f17, %f15, %f16;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.f32 [%rd2], %f17;
  ret;
}
"""

# lane l reads word (l * stride + k) mod 1024 of a 4 KB shared array, four loads per trip
SMEM_STRIDE = HEAD + """.visible .entry smem_stride(.param .u64 out, .param .u32 iters,
                                  .param .u32 stride)
{
  .reg .pred %p<2>;
  .reg .b32 %r<24>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<4>;
  .shared .align 16 .b8 buf[4096];
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  ld.param.u32 %r2, [stride];
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, buf;
  and.b32 %r5, %r3, 1023;
  cvt.rn.f32.u32 %f0, %r3;
  shl.b32 %r6, %r5, 2;
  add.s32 %r6, %r4, %r6;
  st.shared.f32 [%r6], %f0;
  bar.sync 0;
  and.b32 %r7, %r3, 31;
  mul.lo.s32 %r8, %r7, %r2;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.u32 %r9, 0;
LOOP:
  add.s32 %r10, %r8, %r9;
  and.b32 %r11, %r10, 1023;
  shl.b32 %r11, %r11, 2;
  add.s32 %r11, %r4, %r11;
  ld.shared.f32 %f3, [%r11];
  add.s32 %r12, %r10, 1;
  and.b32 %r12, %r12, 1023;
  shl.b32 %r12, %r12, 2;
  add.s32 %r12, %r4, %r12;
  ld.shared.f32 %f4, [%r12];
  add.s32 %r13, %r10, 2;
  and.b32 %r13, %r13, 1023;
  shl.b32 %r13, %r13, 2;
  add.s32 %r13, %r4, %r13;
  ld.shared.f32 %f5, [%r13];
  add.s32 %r14, %r10, 3;
  and.b32 %r14, %r14, 1023;
  shl.b32 %r14, %r14, 2;
  add.s32 %r14, %r4, %r14;
  ld.shared.f32 %f6, [%r14];
  add.f32 %f1, %f1, %f3;
  add.f32 %f2, %f2, %f4;
  add.f32 %f1, %f1, %f5;
  add.f32 %f2, %f2, %f6;
  add.s32 %r9, %r9, 4;
  setp.lt.u32 %p1, %r9, %r1;
  @%p1 bra LOOP;
  add.f32 %f7, %f1, %f2;
  mov.u32 %r15, %ctaid.x;
  mov.u32 %r16, %ntid.x;
  mad.lo.s32 %r17, %r15, %r16, %r3;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r17, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.f32 [%rd2], %f7;
  ret;
}
"""

# every thread adds 1 to word (i & mask) of ptr: mask 0 is one address for the whole grid
ATOMIC_ADD = HEAD + """.visible .entry atomic_add(.param .u64 ptr, .param .u32 n, .param .u32 mask)
{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [ptr];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [mask];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r6, %r1;
  @%p1 bra DONE;
  and.b32 %r7, %r6, %r2;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r7, 4;
  add.s64 %rd4, %rd2, %rd3;
  red.global.add.u32 [%rd4], 1;
DONE:
  ret;
}
"""

EMPTY = HEAD + """.visible .entry empty()
{
  ret;
}
"""



def store_lanes(k, b=4):
    """Thread i writes the k b-byte words of out[k*i : k*i + k], each by its own scalar
    `st.global.u32` (what Triton writes when it cannot prove 16-byte alignment, and Numba for a
    row per thread): k = 1 whole sectors; k = 4 two lanes per sector, four stores fill it;
    k = 16 one lane per sector, eight stores fill it. How L2 and DRAM take partial-sector
    stores that later stores of the same warp complete (fitting part, added in branch sim5).
    Branch sim6 added k = 8 (one lane and 4 bytes per sector and store, lanes 32 bytes apart)
    and b = 2, k = 8 (`st.global.u16`: two lanes and 4 bytes per sector and store, lanes 16
    bytes apart, as Triton's float16 stores without a proof of alignment). Branch sim7 added
    k = 2 (16 bytes per sector and store), k = 32 (one lane per 128-byte line and store) and
    b = 2, k = 16 (one lane and 2 bytes per sector and store)."""
    src = "%r6" if b == 4 else "%h1"
    stores = "\n".join(f"  st.global.u{8 * b} [%rd4+{b * j}], {src};" for j in range(k))
    name = f"store_lanes{k}" + ("" if b == 4 else f"_u{8 * b}")
    half = "" if b == 4 else "  .reg .b16 %h1;\n"
    narrow = "" if b == 4 else "  cvt.u16.u32 %h1, %r6;\n"
    return HEAD + f""".visible .entry {name}(.param .u64 out, .param .u32 n)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
{half}  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r6, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r6, %r1;
  @%p1 bra DONE;
{narrow}  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r6, {b * k};
  add.s64 %rd4, %rd2, %rd3;
{stores}
DONE:
  ret;
}}
"""


def gather_hash(k=8):
    """Thread i sums k floats of `table` at hashed places (h <- h * 0x9E3779B1 + 0x7F4A7C15,
    index (h >> 7) & mask): lone 4-byte loads spread over the table, whose addresses follow from
    the thread index alone (the simulator knows them). With a 4 MiB table every load is one
    sector of L2: what scattered L2 loads cost against streaming ones (fitting part, added in
    branch sim6 for pointer chasing's and gathers' misses; measured only once a device call is
    made for it)."""
    body = "\n".join("""  mad.lo.u32 %r5, %r5, -1640531535, 2135587861;
  shr.u32 %r6, %r5, 7;
  and.b32 %r6, %r6, %r2;
  mul.wide.u32 %rd3, %r6, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f2, %f1;""" for _ in range(k))
    return HEAD + f""".visible .entry gather_hash(.param .u64 table, .param .u64 out,
                                   .param .u32 n, .param .u32 mask)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [table];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [mask];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r7, %r3, %r4, %r5;
  setp.ge.u32 %p1, %r7, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r5, %r7;
  mov.f32 %f2, 0f00000000;
{body}
  mul.wide.u32 %rd5, %r7, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.f32 [%rd6], %f2;
DONE:
  ret;
}}
"""


def gather_hash_ref(table, n, mask, k=8):
    """gather_hash's sums on the host (numpy arrays), for the check."""
    import numpy as np
    h = np.arange(n, dtype=np.uint32)
    s = np.zeros(n, dtype=np.float64)
    for _ in range(k):
        h = h * np.uint32(0x9E3779B1) + np.uint32(0x7F4A7C15)
        s += table[(h >> np.uint32(7)) & np.uint32(mask)]
    return s


# name: (PTX text, entry)
KERNELS = {
    **{f"store_lanes{k}": (store_lanes(k), f"store_lanes{k}") for k in (1, 2, 4, 8, 16, 32)},
    **{f"store_lanes{k}_u16": (store_lanes(k, 2), f"store_lanes{k}_u16") for k in (8, 16)},
    "copy_v4": (COPY_V4, "copy_v4"),
    "gather_hash": (gather_hash(), "gather_hash"),
    "fma_chain": (FMA_CHAIN, "fma_chain"),
    "smem_stride": (SMEM_STRIDE, "smem_stride"),
    "atomic_add": (ATOMIC_ADD, "atomic_add"),
    "empty": (EMPTY, "empty"),
}
