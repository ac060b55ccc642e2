"""Bulk tensor copy (TMA) microbenchmark kernels: cp.async.bulk.tensor.2d loads, global → shared,
completing on an mbarrier (expect_tx, then try_wait.parity), written with the Builder.

Like ptxgen.calibrate.kernels_tensor: the timed region sits between two %clock64 reads, the
clocks go to out[0], out[1] (one warp) and a value read back from the copied box to `sink` (so
the copies are observably used). One thread issues every copy, as a GEMM's producer does. The
source is a 2-D tensor map (`tmap`, 128-byte-swizzled rows of 128 bytes) over a small tensor
of `boxes` boxes stacked by rows, cycled through: after the first run it sits in L2, so the
figures are the copy engine's and L2's, not DRAM's. The destination is dynamic shared memory
(launch with shared_bytes(...)): 1024-byte-aligned slots (the 128-byte swizzle repeats every
1024 bytes) and, after them, one 8-byte mbarrier per slot.
"""
from ..arch import DEFAULT_TARGET
from ..ir import Builder, Module
from ..ir import types as T
from ..ir.builder_tensor import tensor_map_param
from ..ir.values import Addr
from .kernels_tensor import clock_params, store_clocks

SWIZZLE = 128                 # bytes per box row: the swizzle width, as the GEMM's tiles
ALIGN = 1024                  # the 128-byte swizzle pattern's period (address bits 4-9)
TMA_PTX = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


def box_bytes(box_rows):
    return box_rows * SWIZZLE


def shared_bytes(box_rows, slots):
    """Dynamic shared memory a kernel of `slots` slots needs (alignment slack included)."""
    return ALIGN + slots * box_bytes(box_rows) + 8 * slots


def _setup(b, box_rows, slots):
    """(slot addresses, mbarrier addresses), the barriers initialised for one arrival each
    and made visible to the async proxy. Call from the issuing thread only."""
    raw = b.address_of(b.dynamic_shared("smem", align=16))
    base = b.and_(b.add(raw, ALIGN - 1), -ALIGN & 0xFFFFFFFF, name="base")
    size = box_bytes(box_rows)
    bufs = [b.add(base, s * size, name="slot") for s in range(slots)]
    bars = [b.add(base, slots * size + 8 * s, name="bar") for s in range(slots)]
    for bar in bars:
        b.mbarrier_init(Addr(bar), 1)
    b.fence_mbarrier_init()
    return bufs, bars


def _load(b, buf, bar, box_rows, i, boxes):
    """Arrive on `bar` expecting one box, and copy box i (mod boxes) into `buf`."""
    b.mbarrier_arrive_expect_tx(Addr(bar), box_bytes(box_rows))
    b.cp_async_bulk_tensor_load(Addr(buf), "tmap", (0, (i % boxes) * box_rows), Addr(bar))


def _kernel(name, arch):
    m = Module(target=arch)
    k = m.add_kernel(name, clock_params()[:2] + [tensor_map_param("tmap")])
    return m, Builder(k)


def _end(b, t0, t1, buf):
    """Store the clocks and the first word of the box in `buf` (0.0 when nothing was copied:
    the empty kernels that time the clock reads themselves)."""
    first = b.ld("shared", T.f32, Addr(buf), name="first") if buf is not None else \
        b.zeros(1)[0]
    store_clocks(b, t0, t1, [first])


def tma_latency(reps, box_rows, boxes, arch=DEFAULT_TARGET):
    """`reps` times: arrive.expect_tx, one box of box_rows x 128 bytes, try_wait.parity until
    it has landed: each round is one copy's time from issue to completion on the barrier.
    Launch with 32 threads and shared_bytes(box_rows, 1). params (out: u64[2], sink: f32[32],
    tmap: the tensor map of a (boxes·box_rows) x 64 bf16 tensor, box box_rows x 64)."""
    m, b = _kernel(f"tma_lat_b{box_rows}_r{reps}", arch)
    with b.if_(b.setp("eq", b.special("tid.x"), 0)):
        (buf,), (bar,) = _setup(b, box_rows, 1)
        t0 = b.special("clock64")
        for r in range(reps):
            _load(b, buf, bar, box_rows, r, boxes)
            b.mbarrier_wait_parity(Addr(bar), r & 1)
        t1 = b.special("clock64")
        _end(b, t0, t1, buf if reps else None)
    b.ret()
    return m


def tma_stream(count, slots, box_rows, boxes, arch=DEFAULT_TARGET):
    """`count` copies through a ring of `slots` slots, each slot refilled as soon as its last
    copy has landed, so up to `slots` boxes are in flight (a GEMM producer's steady state);
    the clocks span the first issue to the last completion. Launch with 32 threads and
    shared_bytes(box_rows, slots). params as tma_latency."""
    m, b = _kernel(f"tma_tput_b{box_rows}_s{slots}_c{count}", arch)
    with b.if_(b.setp("eq", b.special("tid.x"), 0)):
        bufs, bars = _setup(b, box_rows, slots)
        t0 = b.special("clock64")
        for i in range(count):
            s = i % slots
            if i >= slots:                      # the slot's previous copy (i - slots) landed
                b.mbarrier_wait_parity(Addr(bars[s]), ((i - slots) // slots) & 1)
            _load(b, bufs[s], bars[s], box_rows, i, boxes)
        for i in range(max(count - slots, 0), count):
            b.mbarrier_wait_parity(Addr(bars[i % slots]), (i // slots) & 1)
        t1 = b.special("clock64")
        _end(b, t0, t1, bufs[(count - 1) % slots] if count else None)
    b.ret()
    return m
