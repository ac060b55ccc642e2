"""row_reduce: the sum (or max) of each row of a [M, N] row-major fp32 matrix → [M].

Rows of up to `warp_cols` columns get one warp each (several rows per CTA, shuffles only); longer
rows get one CTA each (shuffles, then shared memory across warps), or with rows_per_cta > 1 a
group of threads/rows_per_cta threads each. Every thread issues `unroll` 128-bit loads per trip
before combining any of them, so enough bytes are in flight per SM. `cache` adds a cache
operator to those loads ("nc": the read-only path; "cs": streaming) and `evict` an L1 eviction
priority ("no_allocate": the data is read once, keep it out of L1).

A row starts 16-byte aligned only when N % 4 == 0, so each row is split at run time into a
head of up to 3 elements, a 16-byte aligned body read with ld.v4 and a tail of up to 3 elements;
head and tail go to the first threads of the row as one scalar each. The helpers here (the
split, warp and CTA all-reductions) are shared with softmax.
"""
import contextlib

import numpy as np

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir import Addr, Builder, Imm, Instr, Module, Param, ptr
from ..ir import types as T
from ..ir.values import Vec
from .base import Launch, Operator

LOG2E = 1.4426950408889634
FLT_MAX = 3.4028234663852886e38
FULL_MASK = -1                       # shfl.sync member mask: all 32 lanes


# -- shared building blocks --------------------------------------------------------------------
def shfl_bfly(b, value, lane_mask, name="sh"):
    """shfl.sync.bfly.b32: the value of the lane whose id is ours XOR lane_mask."""
    dst = b.reg(value.type, name)
    b.emit(Instr("shfl", ("sync", "bfly", "b32"),
                 (dst, value, Imm(lane_mask, T.b32), Imm(0x1F, T.b32), Imm(FULL_MASK, T.b32))))
    return dst


def warp_allreduce(b, values, combine):
    """Butterfly over the 32 lanes: every lane ends with the combination of all lanes' values.
    `values` is a tuple (several quantities reduced together); combine(a, b) → tuple."""
    for off in (16, 8, 4, 2, 1):
        other = tuple(shfl_bfly(b, v, off) for v in values)
        values = combine(values, other)
    return values


def block_allreduce(b, values, combine, identity, warps, lane, warp, tag, group_warps=None):
    """All-reduce across a CTA of `warps` warps: warp butterfly, lane 0 of each warp writes its
    partial to shared memory, one barrier, then every warp reduces the partials again. Each call
    gets its own shared arrays (suffix `tag`), so consecutive calls need no second barrier.
    group_warps: reduce within aligned groups of that many warps instead (several rows per
    CTA); every thread of the CTA must still reach the barrier."""
    values = warp_allreduce(b, values, combine)
    group = group_warps or warps
    if group == 1:
        return values
    bufs = [b.shared(f"red_{tag}{c}", T.f32, warps, align=4) for c in range(len(values))]
    bases = [b.address_of(buf) for buf in bufs]
    first = b.setp("eq", lane, 0)
    slot = b.shl(warp, 2, name="slot")
    with b.predicated(first):
        for base, v in zip(bases, values):
            b.st("shared", b.add(base, slot, name="sa"), v)
    b.bar_sync(0)
    has = b.setp("lt", lane, group)
    if group < warps:            # this group's partials start at slot warp & -group
        lane = b.add(b.and_(warp, warps - group, name="gw"), lane, name="gl")
    lslot = b.shl(lane, 2, name="slot")
    parts = []
    for base, ident in zip(bases, identity):
        p = b.const(ident, T.f32, name="part")
        with b.predicated(has):
            b.ld("shared", T.f32, b.add(base, lslot, name="sa"), out=p)
        parts.append(p)
    return warp_allreduce(b, tuple(parts), combine)


class RowSpan:
    """Where one row's elements live: `nvec` aligned float4 chunks from `body[name]` (a 16-byte
    aligned address per array), plus at most 6 leftover elements (head before the body, tail
    after it). Thread `t` of the row's group owns leftover `t` when `has_extra`; `extra[name]`
    is its address."""

    def __init__(self, b, row, ncols, tid, arrays):
        start = b.mul(row, ncols, mode="wide", type=T.u32, name="start")     # element index
        lo = b.cvt(T.u32, start, name="slo")
        head = b.and_(b.sub(0, lo, type=T.u32, name="head"), 3, name="head")  # to 16 B
        head = b.min(head, ncols, name="head")
        rest = b.sub(ncols, head, name="rest")
        self.nvec = b.shr(rest, 2, name="nvec")
        nextra = b.add(head, b.and_(rest, 3, name="tail"), name="nextra")
        self.has_extra = b.setp("lt", tid, nextra)
        # leftover t is element t of the head, or element t - head of the tail
        in_tail = b.setp("ge", tid, head)
        jump = b.selp(b.shl(self.nvec, 2, name="jump"), 0, in_tail, type=T.u32, name="jump")
        e = b.cvt(T.u64, b.add(tid, jump, name="e"), name="e")
        a0 = b.add(start, b.cvt(T.u64, head, name="h64"), name="a0")
        bytes0 = b.shl(a0, 2, name="a0b")
        ebytes = b.shl(b.add(start, e, name="ei"), 2, name="eb")
        self.body = {k: b.add(p, bytes0, name="body") for k, p in arrays.items()}
        self.extra = {k: b.add(p, ebytes, name="xa") for k, p in arrays.items()}

    def chunk_addr(self, b, name, j):
        return b.add(self.body[name], b.mul(j, 16, mode="wide", type=T.u32, name="cj"),
                     type=T.u64, name="ca")


def group_layout(b, threads, per_row):
    """(tid.x, row, thread index within its row's group, lane, warp) for CTAs of `threads`
    threads where each group of `per_row` threads owns one row."""
    tid = b.special("tid.x")
    lane = b.and_(tid, 31, name="lane")
    warp = b.shr(tid, 5, name="warp")
    if per_row == threads:
        return tid, b.special("ctaid.x"), tid, lane, warp
    groups = threads // per_row
    row = b.mad(b.special("ctaid.x"), groups, b.shr(tid, per_row.bit_length() - 1, name="g"),
                name="row")
    return tid, row, b.and_(tid, per_row - 1, name="gt"), lane, warp


def fmax(b):
    return lambda a, c: tuple(b.max(x, y, name="mx") for x, y in zip(a, c))


def fsum(b):
    return lambda a, c: tuple(b.add(x, y, name="sm") for x, y in zip(a, c))


def check_threads(name, threads):
    if threads not in (32, 64, 128, 256, 512, 1024):
        raise PtxgenError(f"{name}: threads must be a power of two from 32 to 1024, "
                          f"got {threads!r}")


# -- the operator ------------------------------------------------------------------------------
class RowReduce(Operator):
    shape_names = ("M", "N")
    defaults = {"M": 1024, "N": 1000}
    inputs = ("x",)
    outputs = ("out",)

    def __init__(self, op="sum", threads=256, unroll=8, warp_cols=2048, cache=None,
                 evict=None, rows_per_cta=1):
        if op not in ("sum", "max"):
            raise PtxgenError(f"row_reduce: op must be 'sum' or 'max', got {op!r}")
        check_threads("row_reduce", threads)
        if unroll not in (1, 2, 4, 8, 16):
            raise PtxgenError(f"row_reduce: unroll must be 1, 2, 4, 8 or 16, got {unroll!r}")
        if cache not in (None, "ca", "cg", "cs", "lu", "nc"):
            raise PtxgenError(f"row_reduce: cache must be ca, cg, cs, lu, nc or None, got "
                              f"{cache!r}")
        if evict not in (None, "no_allocate", "evict_first"):
            raise PtxgenError(f"row_reduce: evict must be no_allocate, evict_first or None, "
                              f"got {evict!r}")
        if evict and cache not in (None, "nc"):
            raise PtxgenError("row_reduce: an L1 eviction priority combines with cache='nc' "
                              "or no cache operator (PTX has no form with both)")
        if rows_per_cta not in (1, 2, 4, 8) or threads // rows_per_cta < 64:
            raise PtxgenError(f"row_reduce: rows_per_cta must be 1, 2, 4 or 8 and leave at "
                              f"least 64 threads per row (shorter rows take the warp plan), "
                              f"got {rows_per_cta!r} with {threads} threads")
        self.op = op
        self.name = "row_reduce" if op == "sum" else "row_max"
        self.threads = threads
        self.unroll = unroll            # float4 loads in flight per thread per trip
        self.warp_cols = warp_cols      # rows up to this many columns get one warp each
        self.cache = cache
        self.evict = evict
        self.rows_per_cta = rows_per_cta    # rows longer than warp_cols per CTA
        self.rtol, self.atol = (1e-5, 1e-6) if op == "sum" else (0.0, 0.0)

    def per_row(self, shape):
        """Threads cooperating on one row: a warp for short rows, else the CTA's share."""
        return 32 if shape["N"] <= self.warp_cols else self.threads // self.rows_per_cta

    def build(self, shape, arch=DEFAULT_TARGET):
        TH, U = self.threads, self.unroll
        G = self.per_row(shape)
        m = Module(target=arch)
        k = m.add_kernel(self.kernel_name(), [
            Param("M", T.u32), Param("N", T.u32),
            Param("x", T.u64, ptr(T.f32, align=16)), Param("out", T.u64, ptr(T.f32))])
        k.directives.append(f".reqntid {TH}, 1, 1")
        b = Builder(k)
        M, N, x, out = b.param("M"), b.param("N"), b.param("x"), b.param("out")
        tid, row, gt, lane, warp = group_layout(b, TH, G)
        ident = 0.0 if self.op == "sum" else float("-inf")
        comb = fsum(b) if self.op == "sum" else fmax(b)
        end = b.new_label("done")
        valid = None
        if G == 32 < TH:
            # whole warps leave together: a row's shuffles never lose a lane
            b.branch(end, b.setp("ge", row, M))
        elif G < TH:
            # groups past M reduce row M-1 again: every thread must reach the barrier
            valid = b.setp("lt", row, M)
            row = b.min(row, b.sub(M, 1, name="mlast"), name="row")
        span = RowSpan(b, row, N, gt, {"x": x})
        acc = [b.const(ident, T.f32, name="acc") for _ in range(4)]
        with b.for_range(gt, span.nvec, G * U, type=T.u32, name="i") as i:
            base = span.chunk_addr(b, "x", i)
            left = b.sub(span.nvec, i, name="left")
            live = [None] + [b.setp("gt", left, u * G) for u in range(1, U)]
            chunks = []
            for u, p in enumerate(live):
                with _guard(b, p):
                    chunks.append(_ld4(b, Addr(base, 16 * G * u), self.cache, self.evict))
            for p, v in zip(live, chunks):
                with _guard(b, p):
                    for c in range(4):
                        self._fold(b, acc[c], v[c])
        with b.predicated(span.has_extra):
            e = b.ld("global", T.f32, span.extra["x"], name="e")
            self._fold(b, acc[0], e)
        total = comb(comb((acc[0],), (acc[1],)), comb((acc[2],), (acc[3],)))
        if G == 32:
            total = warp_allreduce(b, total, comb)
        else:
            total = block_allreduce(b, total, comb, (ident,), TH // 32, lane, warp, "r",
                                    group_warps=G // 32)
        first = b.setp("eq", gt, 0)
        if valid is not None:
            first = b.and_(first, valid, name="first")
        with b.if_(first):
            b.st("global", b.element_addr(out, row, 4), total[0])
        b.label(end)
        b.ret()
        return m

    def _fold(self, b, acc, v):
        if self.op == "sum":
            b.add(acc, v, out=acc)
        else:
            b.max(acc, v, out=acc)

    def launch(self, shape, sm_count=None):
        G = self.per_row(shape)
        rows_per_cta = self.threads // G
        return Launch(grid=(-(-shape["M"] // rows_per_cta), 1, 1), block=(self.threads, 1, 1))

    def make_inputs(self, shape, rng):
        M, N = shape["M"], shape["N"]
        return {"x": rng.standard_normal((M, N)).astype(np.float32),
                "out": np.full(M, np.nan, dtype=np.float32)}

    def kernel_args(self, shape, arrays):
        return [np.uint32(shape["M"]), np.uint32(shape["N"]), arrays["x"], arrays["out"]]

    def reference(self, shape, arrays):
        x = arrays["x"].astype(np.float64)
        return {"out": x.sum(axis=1) if self.op == "sum" else x.max(axis=1)}

    def tolerance_scale(self, shape):
        # fp32 summation error grows like sqrt(N) for random normal data
        return float(np.sqrt(shape["N"])) if self.op == "sum" else 1.0

    def flops(self, shape):
        return shape["M"] * shape["N"]

    def bytes_moved(self, shape):
        return 4 * shape["M"] * shape["N"] + 4 * shape["M"]


def _guard(b, p):
    return b.predicated(p) if p is not None else contextlib.nullcontext()


def _ld4(b, addr, cache, evict):
    """ld.global[.cache][.L1::evict].v4.f32: the builder's ld has one cache-operator slot."""
    if evict is None:
        return b.ld("global", T.f32, addr, vec=4, cache=cache, name="v")
    dsts = tuple(b.reg(T.f32, "v") for _ in range(4))
    mods = ("global",) + ((cache,) if cache else ()) + (f"L1::{evict}", "v4", "f32")
    b.emit(Instr("ld", mods, (Vec(dsts), addr)))
    return dsts
