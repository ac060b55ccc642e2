"""The sm_90a GEMM's fused pad copy (k_pack="fused"): K-major operands whose rows are not
16-byte aligned (K not a multiple of 8 16-bit or 4 tf32 elements) are still loaded by TMA from
a zero-padded workspace copy, but the copy is made inside the GEMM kernel by the producer
warpgroup's three idle warps, chunk by chunk, while the consumers multiply, instead of by two
pad-copy launches before it (ops/pack.py; ~39 us of ~215 us at 4096x4096x4093 on the H200).

A mixin of tc_matmul._Lowering: it provides self.b, self.s, self.elem, self.M, self.N,
self.K, self.kblocks, self.ntiles, self.fused, self.tiles() and self.tile_origin().

Chunks: the padded workspace of operand X (A: M x Kp, Bt: N x Kp, Kp = K rounded up to 16
bytes) is cut into exactly the boxes the producer's TMA loads: (X, row panel of BM or BN rows,
k-block of BK elements). Chunk (X, p, kb) has flag index base_X + p * kblocks + kb (base_A = 0,
base_B = A's panels x kblocks when A is fused too). The host orders the chunks by when the
persistent grid first needs them (chunk_table: wave by wave of the tile raster, k-block by
k-block) and passes the order as a workspace array; CTA c's copier warps copy entries c,
c + G, c + 2G, ... (G = the grid) with the realigning 16-byte copy of pad_rows.py, two
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

Correct (bit-equal to the pad path on the emulator, on the H200 too) but not faster than
separate pad copies: three warps per SM cannot keep enough bytes in flight for the first wave's
panels, so k_pack="auto" keeps pad copies (docs/PERF.md#odd-shapes); "fused1" copies only the
lighter operand here.
"""
import functools

import numpy as np

from ..errors import ScheduleError
from ..ir import Addr, Imm, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from ..ir.instr import Instr
from .pad_rows import CHUNK
from ..schedule.tc_matmul import SWIZZLE_BYTES

HEADER_WORDS = 4                # flags[0] epoch, flags[1] exit counter, 2..3 unused
ENTRY_WORDS = 4                 # order entry: flag index, operand (0 A, 1 B), first row, kb
COPIER_WARPS = 3                # producer warps 1..3 (warp 0 holds the TMA thread)
COPIERS = 32 * COPIER_WARPS
# The copy goes through shared memory (_copy_chunk_staged): per copier warp, two halves of
# STAGED_ROUNDS / 2 rounds of 4 rows x 9 aligned 16-byte blocks, one in flight through cp.async
# (holding no registers) while the other is realigned.
# (Loads held in registers instead could not feed the first wave at the producer's register
# share: docs/PERF.md#odd-shapes.)
STAGED_ROUNDS = 8
STAGED_ROW_BYTES = 9 * 16       # a misaligned 128-byte row piece spans nine 16-byte blocks
ROUND_BYTES = 4 * STAGED_ROW_BYTES
# the producer's setmaxnreg share, the least without spills (ptxas 13.0, 4096x4096x4093,
# 4095x4097x4093, 8192x8192x8189 bf16: 12-16 bytes spilled at 72, none at 80); the consumers
# get what is left of the CTA's 168 x 384 registers (ldg_producer.ldg_schedule): 208. A split needing more than the CTA
# holds hangs the consumers' setmaxnreg.inc (64 + 2 x 224 did on the H200).
PRODUCER_REGS = 80
FULL_MASK = 0xFFFFFFFF
POLL_AHEAD = 8                  # k-blocks whose flags the TMA thread reads in one round trip
# the longest a TMA thread waits for one chunk before it traps: a copy takes microseconds, so
# seconds mean a CTA that is not resident (a GPU shared with other work) or a bug
SPIN_LIMIT_NS = 2 * 10 ** 9


def producer_regs():
    """The producer's register share with the fused copy."""
    return PRODUCER_REGS


def staging_bytes(fused):
    """Shared memory the staged copy needs (after the mbarriers): every copier warp's rounds
    (read at lowering and launch time, so an experiment may set STAGED_ROUNDS)."""
    return COPIER_WARPS * STAGED_ROUNDS * ROUND_BYTES if any(fused) else 0


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


def first_wave_rows(s, M, N, grid):
    """(rows of A, rows of Bt) whose k-blocks the first wave of tiles (the first `grid` of the
    raster) needs at each k step: what the in-kernel copy must deliver before the GEMM runs at
    speed."""
    tm, tn = -(-M // s.BM), -(-N // s.BN)
    wave = [_grouped(t, tm, tn, s.group_m) for t in range(min(grid, tm * tn))]
    return len({pm for pm, _ in wave}) * s.BM, len({pn for _, pn in wave}) * s.BN


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
        """TMA thread, before its loop: the epoch's target, B's flag base and the k-blocks of
        the current tile known to be copied."""
        b, s = self.b, self.s
        self.target = self.fused_epoch()
        tiles_m = b.shr(b.add(self.M, s.BM - 1), pow2_exponent(s.BM), name="ptm")
        self.base_b = b.mul(tiles_m, self.kblocks, name="baseb") if self.fused[0] else None
        self.ready = b.const(0, T.u32, name="ready")

    def fused_wait(self, m0, n0, kb):
        """TMA thread, before k-block kb's loads: unless kb is known copied, poll the flags of
        kb .. kb + POLL_AHEAD - 1 (relaxed loads, all in flight at once) until kb's are set,
        note how many k-blocks in a row are copied, then acquire (fence.acq_rel.gpu) and fence
        them for the async proxy. One L2 round trip per POLL_AHEAD k-blocks where the copies
        are ahead: an acquire load per k-block put an L2 round trip (~0.5 us) in front of each
        k-block's TMA loads, about a k-block's time at the tensor cores' rate."""
        b, s = self.b, self.s
        b.selp(0, self.ready, b.setp("eq", kb, 0, type=T.u32), type=T.u32, out=self.ready)
        known = b.new_label("known")
        b.branch(known, b.setp("lt", kb, self.ready, type=T.u32, name="known"))
        bases = []
        if self.fused[0]:
            bases.append(b.mad(b.shr(m0, pow2_exponent(s.BM)), self.kblocks, kb, name="fa"))
        if self.fused[1]:
            i = b.mad(b.shr(n0, pow2_exponent(s.BN)), self.kblocks, kb, name="fb")
            bases.append(b.add(i, self.base_b, name="fb") if self.base_b is not None else i)
        addrs = [b.element_addr(self.flags, b.add(i, HEADER_WORDS), 4, name="fl") for i in bases]
        spin = b.new_label("spin")
        t0 = b.special("globaltimer")
        b.label(spin)
        values = []
        for d in range(POLL_AHEAD):
            inside = b.setp("lt", b.add(kb, d), self.kblocks, type=T.u32, name="kin")
            vs = []
            for a in addrs:
                v = b.const(0, T.u32, name="flag")
                with b.predicated(inside):
                    b.emit(Instr("ld", ("relaxed", "gpu", "global", "u32"), (v, Addr(a, 4 * d))))
                vs.append(v)
            values.append((inside, vs))
        run = None
        count = b.const(0, T.u32, name="run")
        for inside, vs in values:
            ok = inside
            for v in vs:
                ok = b.and_(ok, b.setp("ge", v, self.target, type=T.u32), name="cp")
            run = ok if run is None else b.and_(run, ok, name="cp")
            b.add(count, b.selp(1, 0, run, type=T.u32), out=count)
        go = b.new_label("copied")
        b.branch(go, b.setp("ne", count, 0, type=T.u32))
        # never a hang: a chunk not copied within SPIN_LIMIT_NS means its copier's CTA was not
        # resident (or a bug); trap, which the host sees as a launch failure
        waited = b.sub(b.special("globaltimer"), t0, type=T.u64, name="waited")
        with b.predicated(b.setp("gt", waited, SPIN_LIMIT_NS, type=T.u64, name="late")):
            b.emit(Instr("trap"))
        b.emit(Instr("nanosleep", ("u32",), (Imm(64, T.u32),)))
        b.branch(spin)
        b.label(go)
        b.add(kb, count, out=self.ready)
        # the relaxed loads saw the copiers' release; the fence makes this an acquire of them
        b.emit(Instr("fence", ("acq_rel", "gpu")))
        b.fence_proxy_async("global")
        b.label(known)

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
            self._copy_chunk_staged(op, row0, c0, t, chunks_row, pitch)
            b.fence_proxy_async("global")            # the stores before async-proxy reads
            b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))
            with b.predicated(lane0):
                b.emit(Instr("red", ("release", "gpu", "global", "add", "u32"),
                             (Addr(b.element_addr(self.flags, b.add(fi, HEADER_WORDS), 4,
                                                  name="fl")), Imm(1, T.u32))))

    def _copy_chunk_staged(self, op, row0, c0, t, chunks_row, pitch):
        """The chunk through shared memory. A warp's round is 4 rows of the k-block (32 items, 8
        per row); lane j of a row cp.asyncs the row's aligned 16-byte block j (lane 0 also
        block 8: a misaligned 128-byte piece spans 9), zero-filled past the array's end
        (src-size) and never read past it. Rounds go in two halves of STAGED_ROUNDS / 2, one
        half in flight while the other is realigned: once a half has landed (wait_group 1,
        then bar.warp.sync: lane j also reads lane j + 1's block), each lane reads its 16
        bytes back as five 32-bit words from the row's byte offset rounded down to 4, and
        where the offset is 2 mod 4 (16-bit rows at odd K) moves them into place with prmt,
        then stores them to the padded row. The copies hold no registers, so the bytes in
        flight are bounded by the staging buffer, not by the producer's register share."""
        b = self.b
        lane = b.and_(t, 31, name="lane")
        j = b.and_(lane, 7, name="blk")
        head = b.setp("eq", j, 0, type=T.u32, name="head")
        rounds = STAGED_ROUNDS // 2
        half_bytes = rounds * ROUND_BYTES
        step = COPIERS * rounds
        # this lane's row in round 0 of its warp's staging: warp (t / 32), row (lane / 8)
        row_base = b.add(self.fstage, b.add(b.mul(b.shr(t, 5), 2 * half_bytes),
                                            b.mul(b.shr(lane, 3), STAGED_ROW_BYTES)),
                         name="srow")
        op = dict(op, row0=row0, c0=c0)
        half = b.const(0, T.u32, name="half")
        self._staged_issue(op, t, step, j, head, b.add(row_base, b.shl(j, 4), name="sd0"))
        with b.for_range(t, op["items"], step, type=T.u32, name="it") as it:
            other = b.xor(half, half_bytes, name="other")
            nxt = b.add(it, step, name="nxt")
            with b.if_(b.setp("lt", nxt, op["items"], type=T.u32)):
                self._staged_issue(op, nxt, step, j, head,
                                   b.add(b.add(row_base, other), b.shl(j, 4), name="sd1"))
            b.cp_async_commit()
            b.cp_async_wait(1)                      # this half has landed, the next flies
            b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))
            self._staged_store(op, it, step, j, b.add(row_base, half, name="sh"), chunks_row,
                               pitch)
            # the half's blocks are read before the copies after next overwrite them
            b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))
            b.mov(other, out=half)

    def _staged_issue(self, op, it, step, j, head, first_slot):
        """cp.async the blocks of the rounds it, it + 96, ... (< it + step, < the chunk's
        items) to the half at first_slot (this lane's block of round 0), then commit them."""
        b = self.b
        dst = b.mov(first_slot, name="sd")
        stop = b.min(b.add(it, step), op["items"], type=T.u32, name="stop")
        # a PTX loop bounded by a register: unrolled (ptxas unrolls a loop of constant trips),
        # every round's addresses were hoisted together and spilled
        with b.for_range(it, stop, COPIERS, type=T.u32, name="iv") as i:
            r, c, row_ok, s_addr = self._staged_item(op, i, j)
            blk = b.and_(s_addr, ~(CHUNK - 1) & 0xFFFFFFFFFFFFFFFF, type=T.b64, name="al")
            with b.predicated(row_ok):
                b.cp_async(Addr(dst), Addr(blk), CHUNK, src_size=self._inside(blk, op))
            with b.predicated(b.and_(row_ok, head, name="rok8")):
                last = b.add(blk, 8 * CHUNK, type=T.u64, name="al8")
                b.cp_async(Addr(dst, 8 * CHUNK), Addr(last), CHUNK,
                           src_size=self._inside(last, op))
            b.add(dst, ROUND_BYTES, out=dst)
        b.cp_async_commit()

    def _staged_store(self, op, it, step, j, half_row, chunks_row, pitch):
        """Realign and store the rounds it, it + 96, ... of the landed half at half_row (this
        lane's row of round 0)."""
        b = self.b
        per = CHUNK // self.elem
        row_slot = b.mov(half_row, name="rs")
        stop = b.min(b.add(it, step), op["items"], type=T.u32, name="stop")
        with b.for_range(it, stop, COPIERS, type=T.u32, name="iv") as i:
            r, c, row_ok, s_addr = self._staged_item(op, i, j)
            ok = b.and_(row_ok, b.setp("lt", c, chunks_row, type=T.u32), name="ok")
            m = b.and_(b.cvt(T.u32, s_addr, name="s32"), CHUNK - 1, type=T.u32, name="mis")
            src = b.add(row_slot, b.add(b.and_(m, ~3 & 0xFFFFFFFF, type=T.u32), b.shl(j, 4)),
                        name="sw")
            words = [b.const(0, T.b32, name="w") for _ in range(5)]
            with b.predicated(row_ok):              # rows not copied were not staged either
                for k, w in enumerate(words):
                    b.ld("shared", T.b32, Addr(src, 4 * k), out=w)
            # bytes 2..5 of (w[k], w[k+1]) where the offset is 2 mod 4, else w[k] itself
            sel = b.selp(0x5432, 0x3210, b.setp("ne", b.and_(m, 2, type=T.u32), 0,
                                               type=T.u32), type=T.u32, name="sel")
            out = [b.reg(T.b32, "o") for _ in range(4)]
            for k in range(4):
                b.emit(Instr("prmt", ("b32",), (out[k], words[k], words[k + 1], sel)))
            # the chunk at the row's end keeps only its valid elements (the rest is the pad)
            left = b.sub(self.K, b.mul(c, per, name="cp"), type=T.s32, name="left")
            nbytes = b.mul(b.min(b.max(left, 0, type=T.s32), per, type=T.s32), self.elem,
                           type=T.u32, name="nbytes")
            with b.if_(b.setp("lt", nbytes, CHUNK, type=T.u32, name="part")):
                for k in range(4):
                    vb = b.min(b.max(b.sub(nbytes, 4 * k, type=T.s32), 0, type=T.s32), 4,
                               type=T.s32, name="vb")
                    keep = b.sub(b.shl(b.const(1, T.b32), b.shl(vb, 3), type=T.b32), 1,
                                 type=T.u32, name="keep")
                    b.and_(out[k], keep, type=T.b32, out=out[k])
            at = b.add(b.add(op["pad"], b.mul(r, pitch, mode="wide", type=T.u32), type=T.u64),
                       b.cvt(T.u64, b.shl(c, 4)), type=T.u64, name="dd")
            with b.predicated(ok):
                b.st("global", Addr(at), out, type=T.b32)
            b.add(row_slot, ROUND_BYTES, out=row_slot)

    def _staged_item(self, op, i, j):
        """Item i of the chunk (row i / 8 of it, 16-byte chunk j = i % 8 of the k-block's row
        piece): (source row r, chunk c of the padded row, whether row r exists, the chunk's
        source address)."""
        b = self.b
        per = CHUNK // self.elem
        r = b.add(op["row0"], b.shr(i, 3), name="cr")
        c = b.add(op["c0"], j, name="cc")
        row_ok = b.setp("lt", r, op["total"], type=T.u32, name="rok")
        first = b.add(b.mul(r, self.K, mode="wide", type=T.u32, name="rc"),
                      b.cvt(T.u64, b.mul(c, per, name="cpe"), name="cpe64"), type=T.u64,
                      name="fe")
        s_addr = b.add(op["src"], b.mul(first, self.elem, type=T.u64, name="fb"), type=T.u64,
                       name="s")
        return r, c, row_ok, s_addr

    def _inside(self, x, op):
        """Bytes of the 16-byte block at x inside the source (16 unless it crosses its end)."""
        b = self.b
        left = b.sub(op["end"], x, type=T.s64, name="left")
        return b.cvt(T.u32, b.min(b.max(left, 0, type=T.s64), CHUNK, type=T.s64), name="inb")
