"""Tensor-core microbenchmark kernels (mma.sync, wgmma.mma_async), written with the Builder.

Like ptxgen.calibrate.kernels: operands come from parameters (nothing folds), results are
stored (nothing is dead), and the timed region sits between two %clock64 reads. Every kernel
stores (start, end) clocks per warp at out[2·warp], out[2·warp + 1] and one value per thread
into `sink`.

The wgmma kernels read A (64×16) and B (N×16) bf16 tiles from shared memory through
descriptors in the 128-byte-swizzle, K-major layout of ops/tensor_probes.wgmma_probe (rows of
128 bytes in 8-row atoms 1024 bytes apart); the tiles are filled with a parameter's bits, since
only the timing matters here.
"""
from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET, DEFAULT_TARGET
from ..ir import Builder, Module, Param, ptr
from ..ir import types as T

MMA_SHAPE = "m16n8k16"
WGMMA_NS = (64, 128, 256)
MMA_PTX = f"mma.sync.aligned.{MMA_SHAPE}.row.col.f32.bf16.bf16.f32"


def wgmma_ptx(n):
    return f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"


def clock_params():
    return [Param("out", T.u64, ptr(T.u64, align=8)), Param("sink", T.u64, ptr(T.f32)),
            Param("x", T.b32)]


def store_clocks(b, t0, t1, accs):
    """Store this warp's clocks (lane 0) and the sum of the accumulators (every thread)."""
    out, sink = b.param("out"), b.param("sink")
    tid = b.special("tid.x")
    total = accs[0]
    for r in accs[1:]:
        total = b.add(total, r, name="sum")
    b.st("global", b.element_addr(sink, tid, 4), total)
    lane = b.and_(tid, 31, name="lane")
    with b.predicated(b.setp("eq", lane, 0)):
        base = b.element_addr(out, b.shl(b.shr(tid, 5, name="warp"), 1, name="slot"), 8)
        b.st("global", base, t0)
        b.st("global", b.add(base, 8, type=T.u64, name="eaddr"), t1)


def mma_chains(chains, rounds, arch=DEFAULT_TARGET):
    """Every warp runs `chains` independent accumulator chains of `rounds` dependent
    mma.sync m16n8k16 bf16→f32 each (interleaved round by round, unrolled).
    params (out: u64[2·warps], sink: f32[threads], x: b32 = the bf16x2 bits of A and B)."""
    m = Module(target=arch)
    k = m.add_kernel(f"mma_c{chains}_r{rounds}", clock_params())
    b = Builder(k)
    x = b.param("x")
    # every chain its own A (x with a low mantissa bit flipped per chain): chains with the
    # same inputs compute the same values, and ptxas merges them into one (it did: 64 HMMA
    # for 4 chains x 64 rounds, measured as a latency-bound 1.63 cycles)
    a = [tuple(b.xor(x, j, type=T.b32, name="a") for _ in range(4)) for j in range(chains)]
    bb = tuple(b.mov(x, type=T.b32, name="b") for _ in range(2))
    accs = [b.zeros(4) for _ in range(chains)]
    t0 = b.special("clock64")
    for _ in range(rounds):
        for j in range(chains):
            accs[j] = b.mma_sync(MMA_SHAPE, a[j], bb, accs[j], ab="bf16", acc="f32",
                                 out=accs[j])
    t1 = b.special("clock64")
    store_clocks(b, t0, t1, [r for acc in accs for r in acc])
    b.ret()
    return m


def _wgmma_tiles(b, n):
    """A (64 rows) and B (n rows) tiles of 128-byte rows in shared memory, filled with x;
    returns their descriptors (k-step 0: the first 32 bytes of every row)."""
    x = b.param("x")
    sa = b.address_of(b.shared("sa", T.b8, 64 * 128, align=1024))
    sb = b.address_of(b.shared("sb", T.b8, n * 128, align=1024))
    tid = b.special("tid.x")
    v = [b.mov(x, type=T.b32, name="fill") for _ in range(4)]
    for base, rows in ((sa, 64), (sb, n)):
        # 16-byte chunks, 128 threads: ids ≥ 128 (a second warpgroup) write the same chunks
        for rep in range(rows * 8 // 128):
            chunk = b.add(b.and_(tid, 127, name="t"), rep * 128, type=T.u32, name="ch")
            b.st("shared", b.add(base, b.shl(chunk, 4, name="o"), type=T.u32), v,
                 type=T.b32)
    b.fence_proxy_async()
    b.bar_sync()
    return (b.wgmma_descriptor(sa, lbo=16, sbo=1024, swizzle=128),
            b.wgmma_descriptor(sb, lbo=16, sbo=1024, swizzle=128))


def wgmma_latency(n, reps, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
    """One warpgroup: `reps` times fence, one wgmma m64n{n}k16 into the same accumulator,
    commit, wait_group 0: each round is one wgmma's time from issue to completion.
    Launch with 128 threads. params as mma_chains."""
    m = Module(target=arch)
    k = m.add_kernel(f"wgmma_lat_n{n}_r{reps}", clock_params())
    b = Builder(k)
    da, db = _wgmma_tiles(b, n)
    acc = b.zeros(n // 2)
    t0 = b.special("clock64")
    for _ in range(reps):
        b.wgmma_fence()
        acc = b.wgmma_mma_async(n, acc, da, db, scale_d=1)
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
    t1 = b.special("clock64")
    store_clocks(b, t0, t1, list(acc))
    b.ret()
    return m


def wgmma_stream(n, count, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
    """Every warpgroup of the CTA issues `count` wgmma m64n{n}k16 into its accumulator
    without waiting (all in flight, as a GEMM's k-loop does), commits once and waits: the span
    over all warpgroups / (warpgroups · count) is the tensor cores' time per wgmma.
    Launch with 128 · warpgroups threads. params as mma_chains."""
    m = Module(target=arch)
    k = m.add_kernel(f"wgmma_tput_n{n}_c{count}", clock_params())
    b = Builder(k)
    da, db = _wgmma_tiles(b, n)
    acc = b.zeros(n // 2)
    b.wgmma_fence()
    t0 = b.special("clock64")
    for _ in range(count):
        acc = b.wgmma_mma_async(n, acc, da, db, scale_d=1)
    b.wgmma_commit_group()
    b.wgmma_wait_group(0)
    t1 = b.special("clock64")
    store_clocks(b, t0, t1, list(acc))
    b.ret()
    return m
