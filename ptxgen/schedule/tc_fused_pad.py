"""The sm_90a GEMM's fused pad copy (k_pack="fused"): K-major operands whose rows are not
16-byte aligned (K not a multiple of 8 16-bit or 4 tf32 elements) are still loaded by TMA from
a zero-padded workspace copy, but the copy is made inside the GEMM kernel by the producer
warpgroup's three idle warps, chunk by chunk, while the consumers multiply, instead of by two
pad-copy launches before it (ops/pack.py; ~39 us of ~215 us at 4096x4096x4093 on the H200).

A mixin of lower_tc_matmul._Lowering: it provides self.b, self.s, self.elem, self.M, self.N,
self.K, self.kblocks, self.ntiles, self.fused, self.tiles() and self.tile_origin().

Chunks: the padded workspace of operand X (A: M x Kp, Bt: N x Kp, Kp = K rounded up to 16
bytes) is cut into exactly the boxes the producer's TMA loads: (X, row panel of BM or BN rows,
k-block of BK elements). Chunk (X, p, kb) has flag index base_X + p * kblocks + kb (base_A = 0,
base_B = A's panels x kblocks when A is fused too). The host orders the chunks by when the
persistent grid first needs them (chunk_table: wave by wave of the tile raster, k-block by
k-block) and passes the order as a workspace array; CTA c's copier warps copy entries c,
c + G, c + 2G, ... (G = the grid) with the realigning 16-byte copy of schedule/pad_rows.py, two
chunks of 16 bytes per thread in flight.

Hand-over (generic-proxy stores, async-proxy TMA loads, other CTAs): each copier thread fences
its stores for the async proxy (fence.proxy.async.global), the warp syncs (bar.warp.sync
orders the lanes' accesses), and lane 0 adds 1 to the chunk's flag with release semantics at
gpu scope (red.release.gpu). The TMA-issuing thread, before loading a chunk, spins on
ld.acquire.gpu of its flag until it reaches 3 (warps) x the launch's epoch, fences
(fence.proxy.async.global) and issues the load. Flags are never reset: the header holds an
epoch (launches so far) and an exit counter; every CTA's TMA thread reads the epoch first and
counts itself out at the end (every chunk is waited for by some TMA thread, so by then every
copy of the launch has landed); the last one out (atom acq_rel) zeroes the exit counter and
bumps the epoch, so the next launch waits for 3 more per chunk (timing loops launch many times
on one workspace).

Residency: a TMA thread waits on chunks other CTAs copy, and copiers never wait on anything,
so the kernel cannot deadlock as long as every CTA of the grid is resident at once (else the
spin traps after SPIN_LIMIT_NS of %globaltimer, a launch failure instead of a hang): a persistent
grid (at most one CTA per SM, and validate() guarantees one fits) with one CTA per cluster;
the operator takes the fused copy only for such schedules and pad-copies otherwise
(ops/tc_matmul.TcMatmul.fused). The CPU emulator runs every CTA in one batch for a kernel with
gpu-scope acquires (emu/program.py), and runs the copier warps, whose code comes first, before
the TMA thread's spin.

Status (docs/PERF.md, "Odd K: a realigning pad copy, and the pad copy fused into the GEMM"):
bit-equal to the pad path on the emulator; its first H200 run hung on a register split the CTA
could not hold (fixed, now a ScheduleError and an emulator error); not yet measured on the GPU.
"""
import functools

import numpy as np

from ..errors import ScheduleError
from ..ir import Addr, Imm, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from ..ir.instr import Instr
from .pad_rows import CHUNK, chunk_loads, chunk_store
from .tc_matmul import SWIZZLE_BYTES

HEADER_WORDS = 4                # flags[0] epoch, flags[1] exit counter, 2..3 unused
ENTRY_WORDS = 4                 # order entry: flag index, operand (0 A, 1 B), first row, kb
COPIER_WARPS = 3                # producer warps 1..3 (warp 0 holds the TMA thread)
COPIERS = 32 * COPIER_WARPS
INFLIGHT = 2                    # 16-byte chunks per copier thread loaded before storing
# the producer's setmaxnreg share per INFLIGHT, the least without spills (ptxas 13.0,
# 4096x4096x4093, 4095x4097x4093, 8192x8192x8189 bf16): 2 spilled 12 bytes at 56, none at 64;
# 4 none at 80. The consumers get what is left of the CTA's 168 x 384 registers
# (tc_ldg_producer.ldg_schedule): 224 at 56, 216 at 64, 208 at 80. A split needing more than
# the CTA holds hangs the consumers' setmaxnreg.inc: the first H200 run of this mode
# (64 + 2 x 224) did.
PRODUCER_REGS = {1: 56, 2: 64, 4: 80}
FULL_MASK = 0xFFFFFFFF
# the longest a TMA thread waits for one chunk before it traps: a copy takes microseconds, so
# seconds mean a CTA that is not resident (a GPU shared with other work) or a bug
SPIN_LIMIT_NS = 2 * 10 ** 9


def producer_regs():
    """The producer's register share for the current INFLIGHT (read at lowering time, so an
    experiment may set INFLIGHT)."""
    return PRODUCER_REGS[INFLIGHT]


def check_fused(s, fused):
    """ScheduleError unless schedule `s` can take the fused pad copy for `fused` ((A, B))."""
    if not any(fused):
        return
    if s.cluster_m != 1 or not s.persistent:
        raise ScheduleError(f"tc_matmul schedule {s}: the fused pad copy (k_pack='fused') "
                            f"needs a persistent schedule with cluster_m=1")


def fused_params(fused, elem_t):
    """The kernel parameters the fused copy adds: each fused operand's source and padded
    workspace, the chunk order, the flags and the chunk count (none without a fused operand)."""
    if not any(fused):
        return []
    ps = []
    for on, x in zip(fused, ("A", "B")):
        if on:
            ps += [Param(f"{x}_src", T.u64, ptr(elem_t)),
                   Param(f"{x}_pad", T.u64, ptr(elem_t, align=16))]
    return ps + [Param("order", T.u64, ptr(T.u32, align=16)), Param("flags", T.u64, ptr(T.u32)),
                 Param("nchunks", T.u32)]


def _grouped(tile, tm, tn, group):
    if not group:
        return tile // tn, tile % tn
    width = tn * group
    band = tile // width
    first = band * group
    gsize = min(tm - first, group)
    r = tile - band * width
    pn = r // gsize
    return first + r - pn * gsize, pn


def chunk_table(s, shape, fused, grid):
    """(order, nflags): the chunk order as a (chunks, ENTRY_WORDS) uint32 array and the flag
    count, for schedule `s` (cluster_m 1, persistent), `shape` and a grid of `grid` CTAs:
    wave by wave of the tile raster the kernel walks (tile t on CTA t % grid), k-block by
    k-block, each chunk where it is first needed. (A fresh array; the walk is cached: about a
    second in Python at 16384^3, and the operator asks for it twice.)"""
    order, nflags = _walk(s, shape["M"], shape["N"], shape["K"], tuple(fused), grid)
    return order.copy(), nflags


@functools.lru_cache(maxsize=16)
def _walk(s, M, N, K, fused, grid):
    tm, tn = -(-M // s.BM), -(-N // s.BN)
    kbs = -(-K // s.BK)
    base_b = tm * kbs if fused[0] else 0
    seen, order = set(), []
    ntiles = tm * tn
    for w0 in range(0, ntiles, grid):
        wave = [_grouped(t, tm, tn, s.group_m) for t in range(w0, min(w0 + grid, ntiles))]
        for kb in range(kbs):
            for pm, pn in wave:
                for x, on, p, rows, base in ((0, fused[0], pm, s.BM, 0),
                                             (1, fused[1], pn, s.BN, base_b)):
                    idx = base + p * kbs + kb
                    if on and idx not in seen:
                        seen.add(idx)
                        order.append((idx, x, p * rows, kb))
    nflags = base_b + (tn * kbs if fused[1] else 0)
    return np.asarray(order, np.uint32).reshape(-1, ENTRY_WORDS), nflags


class FusedPad:
    # -- shared by the copiers and the TMA thread -----------------------------------------------
    def fused_epoch(self):
        """The launch's epoch (ld.relaxed.gpu: written by the last launch's last agent)."""
        b = self.b
        e = b.reg(T.u32, "epoch")
        b.emit(Instr("ld", ("relaxed", "gpu", "global", "u32"), (e, Addr(self.flags))))
        # a chunk is copied in this launch once its flag reaches 3 x (epoch + 1)
        return b.mul(b.add(e, 1), COPIER_WARPS, name="target")

    def fused_exit(self):
        """TMA thread, after its loop: count out; the grid's last zeroes the counter and bumps
        the epoch. Only the TMA threads count: every chunk is waited for by one of them, so once
        all are out every copier's flag adds of this launch have landed."""
        b = self.b
        old = b.reg(T.u32, "out")
        b.emit(Instr("atom", ("acq_rel", "gpu", "global", "add", "u32"),
                     (old, Addr(self.flags, 4), Imm(1, T.u32))))
        with b.if_(b.setp("eq", b.add(old, 1), b.special("nctaid.x"))):
            b.emit(Instr("st", ("relaxed", "gpu", "global", "u32"),
                         (Addr(self.flags, 4), Imm(0, T.u32))))
            b.emit(Instr("red", ("relaxed", "gpu", "global", "add", "u32"),
                         (Addr(self.flags), Imm(1, T.u32))))

    # -- the TMA thread -------------------------------------------------------------------------
    def fused_setup(self):
        """TMA thread, before its loop: the epoch's target and B's flag base."""
        b, s = self.b, self.s
        self.target = self.fused_epoch()
        tiles_m = b.shr(b.add(self.M, s.BM - 1), pow2_exponent(s.BM), name="ptm")
        self.base_b = b.mul(tiles_m, self.kblocks, name="baseb") if self.fused[0] else None

    def fused_wait(self, m0, n0, kb):
        """TMA thread: spin until this k-block's fused chunks are copied, then fence them for
        the async proxy."""
        b, s = self.b, self.s
        idx = []
        if self.fused[0]:
            idx.append(b.mad(b.shr(m0, pow2_exponent(s.BM)), self.kblocks, kb, name="fa"))
        if self.fused[1]:
            i = b.mad(b.shr(n0, pow2_exponent(s.BN)), self.kblocks, kb, name="fb")
            idx.append(b.add(i, self.base_b, name="fb") if self.base_b is not None else i)
        addrs = [b.element_addr(self.flags, b.add(i, HEADER_WORDS), 4, name="fl") for i in idx]
        spin, go = b.new_label("spin"), b.new_label("copied")
        t0 = b.special("globaltimer")
        b.label(spin)
        ok = None
        for a in addrs:
            v = b.reg(T.u32, "flag")
            b.emit(Instr("ld", ("acquire", "gpu", "global", "u32"), (v, Addr(a))))
            p = b.setp("ge", v, self.target, type=T.u32, name="cp")
            ok = p if ok is None else b.and_(ok, p, name="cp")
        b.branch(go, ok)
        # never a hang: a chunk not copied within SPIN_LIMIT_NS means its copier's CTA was not
        # resident (or a bug); trap, which the host sees as a launch failure
        waited = b.sub(b.special("globaltimer"), t0, type=T.u64, name="waited")
        with b.predicated(b.setp("gt", waited, SPIN_LIMIT_NS, type=T.u64, name="late")):
            b.emit(Instr("trap"))
        b.emit(Instr("nanosleep", ("u32",), (Imm(64, T.u32),)))
        b.branch(spin)
        b.label(go)
        b.fence_proxy_async("global")

    # -- the copier warps ----------------------------------------------------------------------
    def fused_copier(self, tid):
        """Producer warps 1..3: copy this CTA's share of the chunk order, then count out."""
        b, s = self.b, self.s
        t = b.sub(tid, 32, name="ct")
        lane0 = b.setp("eq", b.and_(tid, 31), 0, name="lane0")
        per = CHUNK // self.elem
        chunks_row = b.shr(b.add(self.K, per - 1), pow2_exponent(per), name="kp16")
        pitch = b.shl(chunks_row, 4, name="pitch")
        kb_chunks = SWIZZLE_BYTES // CHUNK           # 16-byte chunks in a k-block's row
        ops = []
        for on, x, total, rows in ((self.fused[0], "A", self.M, s.BM),
                                   (self.fused[1], "B", self.N, s.BN)):
            if on:
                src = b.param(f"{x}_src")
                end = b.add(src, b.mul(b.mul(total, self.K, mode="wide", type=T.u32),
                                       self.elem, type=T.u64), type=T.u64, name="end")
                ops.append(dict(src=src, pad=b.param(f"{x}_pad"), total=total, rows=rows,
                                end=end))
        order = b.param("order")
        with b.for_range(b.special("ctaid.x"), b.param("nchunks"), b.special("nctaid.x"),
                         type=T.u32, name="q") as q:
            ent = b.ld("global", T.u32, Addr(b.element_addr(order, q, 4 * ENTRY_WORDS)), vec=4,
                       name="ent")
            fi, x, row0, kb = ent
            if len(ops) == 2:                        # pick the entry's operand
                isb = b.setp("ne", x, 0, type=T.u32, name="isb")
                op = {k: b.selp(ops[1][k], ops[0][k], isb,
                                type=T.u64 if k in ("src", "pad", "end") else T.u32, name=k)
                      for k in ("src", "pad", "end", "total")}
                op["items"] = b.selp(ops[1]["rows"] * kb_chunks, ops[0]["rows"] * kb_chunks,
                                     isb, type=T.u32, name="items")
            else:
                op = dict(ops[0], items=b.const(ops[0]["rows"] * kb_chunks, T.u32,
                                                name="items"))
            c0 = b.mul(kb, kb_chunks, name="c0")
            self._copy_chunk(op, row0, c0, t, chunks_row, pitch)
            b.fence_proxy_async("global")            # the stores before async-proxy reads
            b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))
            with b.predicated(lane0):
                b.emit(Instr("red", ("release", "gpu", "global", "add", "u32"),
                             (Addr(b.element_addr(self.flags, b.add(fi, HEADER_WORDS), 4,
                                                  name="fl")), Imm(1, T.u32))))

    def _copy_chunk(self, op, row0, c0, t, chunks_row, pitch):
        """Items i = t, t + 96, ... of the chunk (row i / 8, 16-byte chunk i % 8 of the
        k-block), INFLIGHT at a time: all their loads, then all their stores."""
        b = self.b
        with b.for_range(t, op["items"], COPIERS * INFLIGHT, type=T.u32, name="it") as it:
            loaded = []
            for u in range(INFLIGHT):
                i = b.add(it, u * COPIERS, name="iu") if u else it
                r = b.add(row0, b.shr(i, 3), name="cr")
                c = b.add(c0, b.and_(i, 7), name="cc")
                ok = b.and_(b.and_(b.setp("lt", i, op["items"], type=T.u32),
                                   b.setp("lt", r, op["total"], type=T.u32), name="ok"),
                            b.setp("lt", c, chunks_row, type=T.u32), name="ok")
                loaded.append((r, c, ok, chunk_loads(b, op["src"], op["end"], r, c, op["total"],
                                                     self.K, self.elem, valid=ok)))
            for r, c, ok, ld in loaded:
                row = b.add(op["pad"], b.mul(r, pitch, mode="wide", type=T.u32), type=T.u64,
                            name="prow")
                chunk_store(b, ld, row, c, store_ok=ok)

