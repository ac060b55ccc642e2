"""The sm_90a GEMM's producer for K-major operands whose rows are not 16-byte aligned (K not a
multiple of 8 16-bit or 4 tf32 elements), where TMA cannot load them: the whole producer
warpgroup loads the tile with ld.global at 8-byte aligned addresses, re-aligns it with funnel
shifts and writes it with st.shared into the 128-byte swizzled slot layout TMA would produce,
so the consumers' wgmma descriptors are unchanged. No pad copy of the operand is needed
(ops/tc_matmul.py, k_pack="ldg").

A mixin of lower_tc_matmul._Lowering: it provides self.b, self.s, self.elem, self.base,
self.stage_bytes, self.a_bytes, self.M, self.N, self.K, self.kblocks, self.tiles(),
self.tile_origin(), self.full_bar(), self.empty_bar(), self.advance() and self.load() (TMA).

Work split: a tile of `rows` rows x 128 bytes is walked in passes of 8 rows; half a warp (16
lanes) takes one row per pass, lane l the row's bytes 8l..8l+7. Their source starts at
S = A + ((r0 + row) * K + kc) * elem + 8l, any multiple of elem bytes. The lane loads the two
8-byte words at S & ~7 and (S & ~7) + 8 (ld.global.v2.u32 each) and takes bytes
[S & 7, (S & 7) + 8) of the 16: the 4-byte words starting at word (S & 7) / 4 (selp), shifted
right by 8 * (S & 3) bits across word pairs (shf.r.clamp). Row r0 + 8p + h's S mod 8 is the same
for every pass p (8 rows are 16 K bytes, a multiple of 8) and every k-block (128 bytes apart), so
the selection and shift are fixed per tile. The destination is the TMA layout: row 8p + h of the
box at 128 bytes a row, 16-byte chunk l/2 XORed with the row's index mod 8 (= h: slots and boxes
start on 1024 bytes), so every thread's address is a fixed offset plus 1024 per pass.

Loads are issued `batch` passes at a time (4 registers each, all in flight) before the first is
shifted and stored: the producer's setmaxnreg share bounds the batch (batch_for); the lowering
raises that share to LDG_PRODUCER_REGS (ldg_schedule), taking it from the consumers.

Edges: the fast path reads up to 8 bytes past a row's k-block (the second word): inside the array
whenever a later row exists or 8 bytes of the row remain. In edge tiles (rows past M or N) it
predicates each pass's loads on the thread's row being in the array and stores zeros for the
others. The tail k-block (k >= K must be zero), and a k-block of the tile holding the array's
last row that ends within 8 bytes of K, take a predicated path: one element per load, zero where
row >= rows of the array or k >= K. Nothing is read outside the arrays.

Hand-over: every producer thread stores its part of the slot, fences the generic-proxy writes for
the async proxy (fence.proxy.async.shared::cta: wgmma reads the slot through it) and arrives on
the slot's full barrier, initialized to 128 arrivals (+1 where the other operand of the slot
comes by TMA: thread 0 arms the barrier with that operand's bytes by arrive.expect_tx and issues
the copy, whose completion the phase then also waits for).

Clusters: B's multicast to the peer CTA is a TMA feature; this producer writes only its own CTA's
shared memory, so the mode needs cluster_m == 1 (check_ldg).
"""
from ..errors import ScheduleError
from ..ir.builder import pow2_exponent
from ..ir import Addr, Vec
from ..ir import types as T
from ..ir.instr import Instr
from .tc_matmul import SWIZZLE_BYTES, WARPGROUP

ROWS_PER_PASS = 8             # 128 producer threads, 16 lanes (8 bytes each) per 128-byte row
LANES_PER_ROW = 16
WORD_BYTES = 8                # ld.global.v2.u32: one 8-byte aligned word pair per load
# registers of the producer's loop (addresses, counters, the tiles' selections and shifts) besides
# the batch's 4 data registers a pass: the largest batch that fits producer_regs (batch_for).
# ptxas (13.0, 2026-12-01) sinks the loads to their uses when the producer's share is tight: a
# 4096x4096x4093 bf16 kernel kept 2 ld.global in flight per thread at producer_regs=72, 24 at
# 104, so the base leaves it that room.
LDG_BASE_REGS = 72
MAX_BATCH = 8


def check_ldg(s, ldg):
    """ScheduleError unless schedule `s` can take the ldg producer for the operands in `ldg`
    ((A, B) booleans)."""
    if any(ldg) and s.cluster_m != 1:
        raise ScheduleError(f"tc_matmul schedule {s}: the ld.global producer (K not a multiple "
                            f"of 16 bytes, k_pack='ldg') needs cluster_m=1, got {s.cluster_m}")


def batch_for(s, rows_a, rows_b):
    """Passes of loads kept in flight per batch: as many as the producer's registers allow
    (4 a pass), at most MAX_BATCH, dividing both operands' pass counts."""
    fit = max(1, min(MAX_BATCH, (s.producer_regs - LDG_BASE_REGS) // 4))
    passes = [r // ROWS_PER_PASS for r in (rows_a, rows_b) if r]
    while any(p % fit for p in passes):
        fit -= 1
    return fit


class LdgProducer:
    def ldg_producer(self, tid):
        """The producer warpgroup's loop when A and/or B (self.ldg) come by ld.global."""
        b, s = self.b, self.s
        a_ldg, b_ldg = self.ldg
        rows = (s.BM, s.BN)
        self.batch = batch_for(s, s.BM if a_ldg else 0, s.BN if b_ldg else 0)
        h = b.shr(tid, 4, name="h")                              # the half-warp: row mod 8
        lane = b.and_(tid, LANES_PER_ROW - 1, name="l")
        # per thread: row h of a pass, chunk l/2 XORed with h, 8-byte half l%2
        soff = b.add(b.shl(h, 7), b.add(b.shl(b.xor(b.shr(lane, 1), h), 4),
                                        b.shl(b.and_(lane, 1), 3)), name="soff")
        lane_bytes = b.shl(lane, 3, name="lbytes")
        ptrs = [b.param(p) if on else None for p, on in zip(("A", "B"), self.ldg)]
        tmap = None
        tma_bytes = 0
        if not all(self.ldg):
            tmap = self.b.tensor_map_address("B_map" if a_ldg else "A_map", name="map")
            tma_bytes = s.b_stage_bytes(self.elem) if a_ldg else s.a_stage_bytes(self.elem)
        # 8 rows of the array apart: one pass
        stride8 = b.mul(self.K, ROWS_PER_PASS * self.elem, mode="wide", type=T.u32,
                        name="stride8")
        is0 = b.setp("eq", tid, 0, name="is0")
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        with self.tiles() as tile:
            m0, n0 = self.tile_origin(tile)
            ops = []
            for on, ptr, r0, nrows, total, off in zip(self.ldg, ptrs, (m0, n0), rows,
                                                      (self.M, self.N), (0, self.a_bytes)):
                if on:
                    ops.append(self._tile_setup(ptr, r0, nrows, total, h, lane_bytes, off))
            with b.for_range(0, self.kblocks, type=T.u32, name="kb") as kb:
                b.mbarrier_wait_parity(self.empty_bar(stage), b.xor(phase, 1, name="par"))
                full = self.full_bar(stage)
                dst = b.mad(stage, self.stage_bytes, self.base, name="dst")
                kc = b.shl(kb, pow2_exponent(s.BK), name="kc")
                if tmap is not None:
                    with b.if_(is0):
                        b.mbarrier_arrive_expect_tx(full, tma_bytes)
                        if a_ldg:
                            self.load(b.add(dst, self.a_bytes, name="dstb"), tmap, kc, n0,
                                      s.BN, self.b_major, full)
                        else:
                            self.load(dst, tmap, kc, m0, s.BM, self.a_major, full)
                kbytes = b.shl(kb, 7, name="kbytes")              # 128 bytes a k-block
                for op in ops:
                    self._fill(op, dst, soff, kc, kbytes, h, lane, stride8)
                b.fence_proxy_async()        # the slot's st.shared before wgmma reads it
                b.mbarrier_arrive(full)
                self.advance(stage, phase)

    def ldg_full_arrivals(self):
        """Arrivals that complete a slot's full barrier: every producer thread, and thread 0's
        arrive.expect_tx where one operand still comes by TMA."""
        return WARPGROUP + (0 if all(self.ldg) else 1)

    def _tile_setup(self, ptr, r0, nrows, total, h, lane_bytes, off):
        """The per-tile, per-thread constants of one operand: its aligned source address, the
        word selection and the shift, and which k-blocks may take the fast path."""
        b = self.b
        src = b.add(b.element_addr(ptr, b.mul(b.add(r0, h, name="rh"), self.K, name="rk"),
                                   self.elem, name="row"),
                    b.cvt(T.u64, lane_bytes, name="lb64"), type=T.u64, name="src")
        mis = b.and_(b.cvt(T.u32, src, name="srclo"), WORD_BYTES - 1, name="mis")
        aligned = b.sub(src, b.cvt(T.u64, mis, name="mis64"), type=T.u64, name="asrc")
        hi = b.setp("ge", mis, 4, type=T.u32, name="hiw")         # start in the second word
        sh = b.shl(b.and_(mis, 3), 3, name="sh")                  # bits within the word pair
        end = b.add(r0, nrows, name="rend")
        rows_ok = b.setp("le", end, total, type=T.u32, name="rowsok")
        # rows of this thread left in the array (signed): pass p's row is in it where 8p < left
        left = b.sub(b.sub(total, r0, name="rleft"), h, type=T.s32, name="left")
        # the last tile row is the array's: the second word may run 8 bytes past the k-block
        kneed = b.selp(self.s.BK, self.s.BK + WORD_BYTES // self.elem,
                       b.setp("lt", end, total, type=T.u32), type=T.u32, name="kneed")
        return dict(ptr=ptr, r0=r0, rows=nrows, total=total, src=aligned, hi=hi, sh=sh,
                    rows_ok=rows_ok, kneed=kneed, off=off, left=left)

    def _fill(self, op, dst, soff, kc, kbytes, h, lane, stride8):
        """Write one operand's box of the slot at dst: the fast path where the k-block and its
        over-read lie inside the array (its rows past the array's end, in an edge tile, loaded
        by no thread and stored as zeros), else the predicated one."""
        b = self.b
        fast = b.setp("le", b.add(kc, op["kneed"], name="kend"), self.K, type=T.u32, name="fast")
        box = b.add(b.add(dst, op["off"], name="box"), soff, name="sdst")
        slow, edge, done = (b.new_label(x) for x in ("ldgslow", "ldgedge", "ldgdone"))
        b.branch(slow, fast, negate=True)
        b.branch(edge, op["rows_ok"], negate=True)
        self._fast(op, box, kbytes, stride8)
        b.branch(done)
        b.label(edge)
        self._fast(op, box, kbytes, stride8, edge=True)
        b.branch(done)
        b.label(slow)
        self._slow(op, box, kc, h, lane)
        b.label(done)

    def _fast(self, op, box, kbytes, stride8, edge=False):
        b, n = self.b, self.batch
        addr = b.add(op["src"], b.cvt(T.u64, kbytes, name="kb64"), type=T.u64, name="ga")
        passes = op["rows"] // ROWS_PER_PASS
        for p0 in range(0, passes, n):
            words = []
            for p in range(n):
                if edge:                     # rows past the array's end load nothing: zeros
                    ok = b.setp("gt", op["left"], (p0 + p) * ROWS_PER_PASS, type=T.s32,
                                name="rv")
                    w = tuple(b.const(0, T.u32, name="w") for _ in range(4))
                    with b.predicated(ok):
                        b.ld("global", T.u32, Addr(addr), vec=2, out=w[:2])
                        b.ld("global", T.u32, Addr(addr, WORD_BYTES), vec=2, out=w[2:])
                else:
                    w = b.ld("global", T.u32, Addr(addr), vec=2, name="w") + \
                        b.ld("global", T.u32, Addr(addr, WORD_BYTES), vec=2, name="w")
                words.append(w)
                if p0 + p + 1 < passes:
                    addr = b.add(addr, stride8, type=T.u64, name="ga")
            for p, w in enumerate(words):
                x = [b.selp(w[i + 1], w[i], op["hi"], type=T.b32, name="x") for i in range(3)]
                out = [self._funnel(x[0], x[1], op["sh"]), self._funnel(x[1], x[2], op["sh"])]
                b.st("shared", Addr(box, (p0 + p) * ROWS_PER_PASS * SWIZZLE_BYTES), out,
                     type=T.b32)

    def _funnel(self, lo, hi, sh):
        """The low word of (hi:lo) >> sh (shf.r.clamp: sh is 0 or 16 for 16-bit elements)."""
        if self.elem == 4:                   # tf32 rows start on whole words: no shift
            return lo
        b = self.b
        d = b.reg(T.b32, "y")
        b.emit(Instr("shf", ("r", "clamp", "b32"), (d, lo, hi, b.operand(sh, T.u32))))
        return d

    def _slow(self, op, box, kc, h, lane):
        """Edge tiles and tail k-blocks: element loads predicated on row < rows of the array and
        k < K, zeros elsewhere; one pass at a time."""
        b, e = self.b, self.elem
        per = WORD_BYTES // e                                      # elements of the lane's 8 bytes
        k0 = b.add(kc, b.shl(lane, 2 if e == 2 else 1), name="k0")
        et = T.b16 if e == 2 else T.b32
        with b.for_range(0, op["rows"] // ROWS_PER_PASS, type=T.u32, name="p") as p:
            row = b.add(op["r0"], b.mad(p, ROWS_PER_PASS, h), name="srow")
            row_ok = b.setp("lt", row, op["total"], type=T.u32, name="srok")
            at = b.element_addr(op["ptr"], b.mad(row, self.K, k0, name="si"), e, name="sa")
            vals = []
            for i in range(per):
                v = b.const(0, et, name="v")
                ok = b.and_(row_ok, b.setp("lt", b.add(k0, i, name="ki") if i else k0, self.K,
                                           type=T.u32), name="ok")
                with b.predicated(ok):
                    b.ld("global", et, Addr(at, e * i), out=v)
                vals.append(v)
            if e == 2:                       # element pairs into words, the first in the low half
                words = [b.reg(T.b32, "sw") for _ in range(2)]
                for w, i in zip(words, (0, 2)):
                    b.mov(Vec((vals[i], vals[i + 1])), type=T.b32, out=w)
                vals = words
            b.st("shared", Addr(b.mad(p, ROWS_PER_PASS * SWIZZLE_BYTES, box, name="sd")), vals,
                 type=T.b32)


# the setmaxnreg split of a schedule taking the ld.global producer: MAX_BATCH passes of loads
# in flight need the producer's 72 + 32 registers, taken from the consumers
LDG_PRODUCER_REGS = LDG_BASE_REGS + 4 * MAX_BATCH


def ldg_schedule(s):
    """Schedule `s` as the lowering runs it with the ld.global producer: one CTA per cluster
    (no multicast), the producer's register share raised to LDG_PRODUCER_REGS and the
    consumers' lowered to what is left of the register file (multiples of 8). The operator's
    schedule_for only sets cluster_m (the tuner's schedules keep their identity)."""
    import dataclasses
    from .matmul import target_limits
    from ..arch import DEFAULT_TARGET
    if s.producer_regs >= LDG_PRODUCER_REGS and s.cluster_m == 1:
        return s
    per_thread = target_limits(DEFAULT_TARGET)["regs_per_sm"] // WARPGROUP
    consumer = min(s.consumer_regs, (per_thread - LDG_PRODUCER_REGS) // s.consumers // 8 * 8)
    return dataclasses.replace(s, cluster_m=1, producer_regs=LDG_PRODUCER_REGS,
                               consumer_regs=consumer)
