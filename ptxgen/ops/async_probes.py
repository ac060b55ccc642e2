"""Small kernels for Hopper's asynchronous machinery, built with the builder API: a TMA +
mbarrier ring (a producer thread and a consumer warpgroup) and a 2-CTA cluster with multicast TMA
and distributed shared memory.

Like ops/tensor_probes.py they exist to check the instructions end to end — on the emulator
against numpy (tests/test_emu_cluster.py) and on the GPU against the emulator
(benchmarks/tensor_emu_vs_gpu.py). Their tensor-map parameters take a `TiledMap` of a row-major
f32 array, which both the GPU runtime and the emulator read.
"""
import numpy as np

from ..arch import DEFAULT_TARGET
from ..ir import Builder, Module, Param, fragments as F, ptr, types as T
from ..ir.builder_tensor import cluster_dims, tensor_map_param

PIPE_BOX = (16, 32)                # rows x f32 columns of one ring slot (128-byte rows)
PIPE_THREADS = 160                 # warp 0: the producer; warps 1-4: the consumer warpgroup
CLUSTER_BOX = (8, 32)              # rows x f32 columns each CTA of the cluster loads
CLUSTER_THREADS = 128


def pipeline_tma_probe(steps=8, stages=3, target=DEFAULT_TARGET):
    """Kernel `pipeline_tma_probe(x, w, out)`: CTA c owns columns 32c.. of x (rows x cols f32,
    a TiledMap with a PIPE_BOX box). Thread 0 produces: for step s it waits until slot s % stages
    is empty (parity of its previous use), expects the box's bytes on the slot's 'full' mbarrier
    and TMA-loads rows 16s.. into it. The 128 consumer threads wait on 'full' (parity
    (s // stages) & 1), each folds its 4 words of the slot into 4 accumulators
    (acc = fma(x, w[s], acc)) and arrives on 'empty' (128 arrivals). out[c, 4t + j] = acc[j]
    of consumer t. Rows and columns past x's edges arrive as zeros (the box's OOB fill)."""
    rows, cols = PIPE_BOX
    nbytes = rows * cols * 4
    m = Module(target=target)
    k = m.add_kernel("pipeline_tma_probe", [tensor_map_param("x"),
                                            Param("w", T.u64, ptr(T.f32)),
                                            Param("out", T.u64, ptr(T.f32))])
    b = Builder(k)
    ring = b.address_of(b.shared("ring", T.b8, nbytes * stages, align=1024))
    full = b.address_of(b.shared("full", T.b64, stages, align=8))
    empty = b.address_of(b.shared("empty", T.b64, stages, align=8))
    tid = b.special("tid.x")
    col0 = b.shl(b.special("ctaid.x"), 5, name="col0")
    with b.if_(b.setp("eq", tid, 0)):
        for s in range(stages):
            b.mbarrier_init(b.add(full, 8 * s, type=T.u32), 1)
            b.mbarrier_init(b.add(empty, 8 * s, type=T.u32), 128)
        b.fence_mbarrier_init()
    b.bar_sync()
    consumer = b.setp("ge", tid, 32)
    t = b.sub(tid, 32, name="t")
    acc = [b.const(0.0, T.f32, name="acc") for _ in range(4)]
    for s in range(steps):
        slot, phase = s % stages, (s // stages) & 1
        f, e = b.add(full, 8 * slot, type=T.u32), b.add(empty, 8 * slot, type=T.u32)
        dst = b.add(ring, nbytes * slot, type=T.u32, name="slot")
        with b.if_(b.setp("eq", tid, 0)):
            b.mbarrier_wait_parity(e, phase ^ 1)      # a fresh barrier's previous phase is done
            b.mbarrier_arrive_expect_tx(f, nbytes)
            b.cp_async_bulk_tensor_load(dst, "x", (col0, rows * s), f)
        with b.if_(consumer):
            b.mbarrier_wait_parity(f, phase)
            ws = b.ld("global", T.f32, b.element_addr(b.param("w"), s, 4))
            for j in range(4):
                v = b.ld("shared", T.f32, b.mad(t, 16, b.add(dst, 4 * j, type=T.u32),
                                                type=T.u32, name="sa"))
                b.fma(v, ws, acc[j], out=acc[j])
            b.mbarrier_arrive(e)
    with b.if_(consumer):
        base = b.mad(b.special("ctaid.x"), 128 * 4, b.shl(t, 2), type=T.u32, name="o")
        for j in range(4):
            b.st("global", b.element_addr(b.param("out"), b.add(base, j, type=T.u32), 4), acc[j])
    b.ret()
    return m


def smem_image(boxes, swizzle=128):
    """Shared memory as a TMA load leaves f32 boxes (..., rows, cols): each box's elements in
    box order, moved by the swizzle (words of the last axis)."""
    flat = boxes.reshape(boxes.shape[:-2] + (-1,))
    out = np.zeros_like(flat)
    out[..., F.swizzle(np.arange(flat.shape[-1]) * 4, swizzle) // 4] = flat
    return out


def _fma32(a, b, c):
    """float32 a·b + c rounded once (the product is exact in float64; the sum's double rounding
    differs from fma.rn.f32 only in rare ties)."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def pipeline_tma_expected(x, w, ctas, steps=8):
    """numpy of pipeline_tma_probe's out for x (rows x cols f32) and w (steps f32)."""
    rows, cols = PIPE_BOX
    H, W = x.shape
    pad = np.zeros((rows * steps, cols * ctas), np.float32)
    h, wd = min(H, pad.shape[0]), min(W, pad.shape[1])
    pad[:h, :wd] = x[:h, :wd]
    acc = np.zeros((ctas, 128 * 4), np.float32)
    for s in range(steps):
        box = pad[rows * s:rows * (s + 1)].reshape(rows, ctas, cols).transpose(1, 0, 2)
        acc = _fma32(smem_image(box), np.float32(w[s]), acc)
    return acc


def cluster_probe(target=DEFAULT_TARGET):
    """Kernel `cluster_probe(x, raw, out, x0, y0)`, clusters of 2 CTAs of 128 threads.

    Each CTA of cluster k TMA-loads its half (CLUSTER_BOX: 8 rows) of a 16 x 32 f32 box of x at
    (x0, y0 + 6k + 8·rank) and multicasts it (ctaMask 0b11) to the same offset in both CTAs,
    each expecting the whole box on its own mbarrier; so both hold the 16-row box. Then, through
    distributed shared memory: thread t stores fma(w0, w1, w2) of its 4 words to xch[t] of the
    peer (mapa + st.shared::cluster), adds (t + 1)·(rank + 1) to the peer's counter
    (red.shared::cluster.add), and thread 0 arrives on the peer's mbarrier 'ping' (a remote
    arrive), which everybody waits for. After a barrier.cluster (arrive.release / wait.acquire):
    raw[cta] = the CTA's shared box (swizzle and OOB fill visible), out[cta, t] = the value
    the peer left in xch[t], out[cta, 128] = the counter, out[cta, 129] = getctarank of the
    peer's xch address, out[cta, 130] = %cluster_ctarank."""
    rows, cols = CLUSTER_BOX
    half = rows * cols * 4
    m = Module(target=target)
    k = m.add_kernel("cluster_probe", [tensor_map_param("x"),
                                       Param("raw", T.u64, ptr(T.u32)),
                                       Param("out", T.u64, ptr(T.u32)),
                                       Param("x0", T.s32), Param("y0", T.s32)])
    cluster_dims(k, 2)
    b = Builder(k)
    tile = b.address_of(b.shared("tile", T.b8, 2 * half, align=1024))
    xch = b.address_of(b.shared("xch", T.u32, CLUSTER_THREADS, align=16))
    bars = b.address_of(b.shared("bars", T.b64, 2, align=8))
    count = b.address_of(b.shared("count", T.u32, 1, align=4))
    ping = b.add(bars, 8, type=T.u32, name="ping")
    tid = b.special("tid.x")
    rank = b.cluster_special("cluster_ctarank")
    peer = b.xor(rank, 1, name="peer")
    first = b.setp("eq", tid, 0)
    with b.if_(first):
        b.mbarrier_init(bars, 1)
        b.mbarrier_init(ping, 1)
        b.st("shared", count, 0, type=T.u32)
        b.fence_mbarrier_init()
    # every barrier.cluster here is the non-.aligned form: threads may arrive from divergent
    # paths (after if-blocks and wait loops), which .aligned does not allow
    _cluster_barrier(b)           # both CTAs' barriers exist before either is targeted
    with b.if_(first):
        b.mbarrier_arrive_expect_tx(bars, 2 * half)
        y = b.mad(b.cluster_special("clusterid.x"), 6, b.param("y0"), type=T.s32, name="y")
        y = b.mad(rank, rows, y, type=T.s32, name="y")
        b.cp_async_bulk_tensor_load(b.mad(rank, half, tile, type=T.u32, name="dst"), "x",
                                    (b.param("x0"), y), bars, multicast_mask=0b11)
    b.mbarrier_wait_parity(bars, 0)
    words = [b.ld("shared", T.f32, b.mad(tid, 16, b.add(tile, 4 * j, type=T.u32),
                                         type=T.u32, name="sa")) for j in range(4)]
    cta = b.special("ctaid.x")
    for j in range(4):
        i = b.mad(cta, 512, b.mad(tid, 4, j, type=T.u32), type=T.u32, name="ri")
        b.st("global", b.element_addr(b.param("raw"), i, 4), words[j], type=T.b32)
    v = b.fma(words[0], words[1], words[2])
    remote = b.mapa(b.mad(tid, 4, xch, type=T.u32, name="mine"), peer)
    b.st("shared::cluster", remote, v, type=T.b32)
    b.red("shared::cluster", "add", b.mapa(count, peer),
          b.mul(b.add(tid, 1), b.add(rank, 1), type=T.u32), type=T.u32)
    with b.if_(first):
        b.mbarrier_arrive(b.mapa(ping, peer), cluster=True)
    b.mbarrier_wait_parity(ping, 0)
    _cluster_barrier(b, sem="release")
    o = b.mul(cta, 131, type=T.u32, name="o")
    out = b.param("out")
    got = b.ld("shared", T.u32, b.mad(tid, 4, xch, type=T.u32, name="own"))
    b.st("global", b.element_addr(out, b.add(o, tid, type=T.u32), 4), got)
    with b.if_(first):
        b.st("global", b.element_addr(out, b.add(o, 128, type=T.u32), 4),
             b.ld("shared", T.u32, count))
        b.st("global", b.element_addr(out, b.add(o, 129, type=T.u32), 4), b.getctarank(remote))
        b.st("global", b.element_addr(out, b.add(o, 130, type=T.u32), 4), rank)
    _cluster_barrier(b)           # no CTA leaves while its peer may still touch its memory
    b.ret()
    return m


def _cluster_barrier(b, sem=None):
    b.barrier_cluster_arrive(sem=sem, aligned=False)
    b.barrier_cluster_wait(aligned=False)


def cluster_expected(x, clusters, x0, y0):
    """numpy of cluster_probe's raw (per CTA: the 16 x 32 box as shared memory holds it, 128-byte
    swizzle) and out words."""
    rows, cols = CLUSTER_BOX
    H, W = x.shape
    boxes = np.zeros((clusters, 2 * rows, cols), np.float32)
    for k in range(clusters):
        ys = np.arange(2 * rows)[:, None] + y0 + 6 * k
        xs = np.arange(cols)[None, :] + x0
        inside = (ys >= 0) & (ys < H) & (xs >= 0) & (xs < W)
        boxes[k] = np.where(inside, x[np.clip(ys, 0, H - 1), np.clip(xs, 0, W - 1)], 0)
    raw = np.repeat(smem_image(boxes), 2, axis=0)                       # both CTAs: one box
    words = raw.reshape(2 * clusters, 128, 4)
    v = _fma32(words[..., 0], words[..., 1], words[..., 2])
    out = np.zeros((2 * clusters, 131), np.uint32)
    out[:, :128] = v.view(np.uint32)                  # the peer's values equal the CTA's own
    t = np.arange(1, 129)
    for c in range(2 * clusters):
        rank = c % 2
        out[c, 128] = (t * (2 - rank)).sum()          # the peer's rank + 1
        out[c, 129] = 1 - rank
        out[c, 130] = rank
    return raw.view(np.uint32), out
