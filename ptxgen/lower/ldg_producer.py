"""The sm_90a GEMM's producer for K-major operands whose rows are not 16-byte aligned (K not a
multiple of 8 16-bit or 4 tf32 elements), where TMA cannot load them: the whole producer
warpgroup copies the tile with cp.async (LDGSTS: global to shared without registers) into the
128-byte swizzled slot layout TMA would produce, so the consumers' wgmma descriptors are
unchanged, and re-aligns the rows that start 2 bytes off a 4-byte boundary in shared memory with
funnel shifts. No pad copy of the operand is needed (ops/tc_matmul.py, k_pack="ldg").

A mixin of tc_matmul._Lowering: it provides self.b, self.s, self.elem, self.base,
self.stage_bytes, self.a_bytes, self.M, self.N, self.K, self.kblocks, self.ldg, self.k_odd,
self.side, self.tiles(), self.tile_origin(), self.full_bar(), self.empty_bar(), self.advance()
and self.load() (TMA).

Why cp.async, not ld.global into registers: with every byte in flight held in a register, 128
threads cannot keep the bytes a k-block needs in flight against L2/DRAM latency; cp.async keeps
any number in flight. The operator still prefers pad copies + TMA (the measured default
"tc_matmul.k_pack", docs/PERF.md#odd-shapes: the copy-to-arrival latency per k-block limits this
producer); k_pack="ldg" selects it.

Work split: warp w of the producer copies the tile rows r = 4i + (w ^ (i & 1)), i < rows/4, one
row per instruction: lane l the 4-byte word l of the row's k-block, read from the 4-byte aligned
address S - mis (S = A + ((r0 + r) * K + kc) * elem, mis = S mod 4: 0, or 2 for a 16-bit row at
odd K and odd r). A row's word l goes to the slot's row r, 16-byte chunk l/4 XORed with r mod 8
(the TMA 128-byte swizzle: slots and boxes start on 1024 bytes), byte 4 (l mod 4). A row with
mis = 2 also needs the word after its 32 ("side" word, lane l copies it for row i = 32g + l into
a small per-stage side buffer); once copied, each such row's words are shifted in place: word l
becomes (word l+1 : word l) >> 16 (word l+1 from lane l+1 by shfl.down, the side word for lane
31), so a row starting 2 bytes off lands exactly where TMA would have put it. The rows
alternate between the warp's two parity classes, so every warp re-aligns half its rows.

Pipeline: the copies of k-block i are committed as one cp.async group; then k-block i-1's group
is waited for (cp.async.wait_group 1: the copies of i stay in flight), re-aligned, fenced for the
async proxy (fence.proxy.async.shared::cta: wgmma reads the slot through it) and its slot's full
barrier arrived on by every producer thread (128 arrivals; +1 where the other operand comes by
TMA: thread 0 arms the barrier with its bytes by arrive.expect_tx and issues the copy when it
issues k-block i's). The lag of one k-block needs stages >= 3 (the slot of k-block i is freed
once k-block i-2 or earlier has been consumed, which must not wait on k-block i-1's arrival).

Edges: where the tile's rows and the k-block (with its side word) lie inside the array, the
copies are plain 4-byte ones; otherwise (edge tiles, the tail k-block) each copy's src-size is
the bytes of the word inside the row (0 past K or for rows past M / N, which cp.async fills with
zeros) and its address is the array's start where nothing is read. The first word of an odd row
reads the previous row's last element, which the shift drops. Nothing is read outside the arrays.

The kernel is specialized for K's parity (which rows need the shift) like the rest of the
lowering is for its shape. Clusters: B's multicast to the peer CTA is a TMA feature; this
producer writes only its own CTA's shared memory, so the mode needs cluster_m == 1 (check_ldg).
"""
import contextlib

from ..errors import ScheduleError
from ..ir import Addr, Imm
from ..ir import types as T
from ..ir.instr import Instr
from ..schedule.tc_matmul import SWIZZLE_ATOM_BYTES, SWIZZLE_BYTES, WARPGROUP

WORD = 4                        # cp.async.ca copies of 4 bytes: the alignment odd K leaves
ROW_WORDS = SWIZZLE_BYTES // WORD
FULL_MASK = 0xFFFFFFFF


def check_ldg(s, ldg):
    """ScheduleError unless schedule `s` can take the cp.async producer for the operands in
    `ldg` ((A, B) booleans)."""
    if not any(ldg):
        return
    if s.cluster_m != 1:
        raise ScheduleError(f"tc_matmul schedule {s}: the cp.async producer (K not a multiple "
                            f"of 16 bytes, k_pack='ldg') needs cluster_m=1, got {s.cluster_m}")
    if s.stages < 3:
        raise ScheduleError(f"tc_matmul schedule {s}: the cp.async producer (k_pack='ldg') "
                            f"arrives one k-block late and needs stages >= 3, got {s.stages}")


def side_bytes(s, ldg):
    """Shared memory for the side words: 4 bytes per row of each cp.async operand per stage."""
    return s.stages * WORD * ((s.BM if ldg[0] else 0) + (s.BN if ldg[1] else 0))


def ldg_full_arrivals(ldg):
    """Arrivals that complete a slot's full barrier: every producer thread, and thread 0's
    arrive.expect_tx where one operand still comes by TMA."""
    return WARPGROUP + (0 if all(ldg) else 1)


class LdgProducer:
    def ldg_producer(self, tid):
        """The producer warpgroup's loop when A and/or B (self.ldg) come by cp.async."""
        b, s = self.b, self.s
        a_ldg, b_ldg = self.ldg
        w = b.shr(tid, 5, name="w")
        lane = b.and_(tid, 31, name="l")
        self.w_odd = b.setp("ne", b.and_(w, 1), 0, name="wodd")
        self.lane31 = b.setp("eq", lane, 31, name="l31")
        tmap, tma_bytes = None, 0
        if not all(self.ldg):
            tmap = b.tensor_map_address("B_map" if a_ldg else "A_map", name="map")
            tma_bytes = s.b_stage_bytes(self.elem) if a_ldg else s.a_stage_bytes(self.elem)
        # rows of the array 8 apart (one step of a parity class)
        self.stride8 = b.mul(self.K, 8 * self.elem, mode="wide", type=T.u32, name="stride8")
        self.row_bytes = b.mul(self.K, self.elem, name="kbytes")
        ops, side_off = [], 0
        for on, ptr, rows, total, off in zip(self.ldg, ("A", "B"), (s.BM, s.BN),
                                             (self.M, self.N), (0, self.a_bytes)):
            if on:
                ops.append(self._operand(b.param(ptr), rows, total, off, side_off, w, lane))
                side_off += rows * WORD
        is0 = b.setp("eq", tid, 0, name="is0")
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        pending = b.const(0, T.u32, name="pend")          # the stage waiting to be finished
        has = b.setp("ne", stage, stage, name="has")       # false until the first k-block
        with self.tiles() as tile:
            m0, n0 = self.tile_origin(tile)
            for op in ops:
                self._tile_setup(op, m0 if op["off"] == 0 else n0, w, lane)
            with b.for_range(0, self.kblocks, type=T.u32, name="kb") as kb:
                b.mbarrier_wait_parity(self.empty_bar(stage), b.xor(phase, 1, name="par"))
                full = self.full_bar(stage)
                dst = b.mad(stage, self.stage_bytes, self.base, name="dst")
                kc = b.shl(kb, 6 if self.elem == 2 else 5, name="kc")
                if tmap is not None:
                    with b.if_(is0):
                        b.mbarrier_arrive_expect_tx(full, tma_bytes)
                        if a_ldg:
                            self.load(b.add(dst, self.a_bytes, name="dstb"), tmap, kc, n0,
                                      s.BN, self.b_major, full)
                        else:
                            self.load(dst, tmap, kc, m0, s.BM, self.a_major, full)
                kbytes = b.shl(kb, 7, name="kboff")            # 128 bytes a k-block
                for op in ops:
                    self._copy(op, dst, stage, kbytes)
                b.cp_async_commit()
                with b.if_(has):
                    self._finish(ops, pending, 1)
                b.mov(stage, out=pending)
                b.setp("eq", stage, stage, out=has)
                self.advance(stage, phase)
        with b.if_(has):
            self._finish(ops, pending, 0)

    # -- per operand ------------------------------------------------------------------------------
    def _operand(self, ptr, rows, total, off, side_off, w, lane):
        """The kernel-wide constants of one operand for this thread: its two row classes'
        destination offsets in a box, side-buffer offsets and byte misalignments."""
        b = self.b
        wx = b.xor(w, 1, name="wx")
        cls = []
        for k, wr in enumerate((w, wx)):        # rows i even: 4i + w; odd: 4i + (w ^ 1)
            r8 = b.add(wr, 4 * k, name="r8")    # the row's index mod 8 (its swizzle)
            d = b.add(b.shl(r8, 7), b.add(b.shl(b.xor(b.shr(lane, 2), r8), 4),
                                          b.shl(b.and_(lane, 3), 2)), name="doff")
            mis = b.const(0, T.u32, name="mis")
            if self.k_odd:                      # odd rows of a 16-bit operand start 2 bytes off
                b.shl(b.and_(wr, 1), 1, out=mis)
            # the class's first row (i = k) is 4k + wr: its rows step 8 array rows (j = i // 2)
            cls.append(dict(row=r8, doff=d, mis=mis))
        # side word of the lane's row i = 32g + l: class l & 1, row 4i + (w ^ (l & 1))
        lodd = b.setp("ne", b.and_(lane, 1), 0, name="lodd")
        sw = b.selp(wx, w, lodd, type=T.u32, name="sw")
        side_dst = b.add(b.shl(lane, 4), b.shl(sw, 2), name="sdst")
        return dict(ptr=ptr, rows=rows, total=total, off=off, side=side_off, cls=cls,
                    lodd=lodd, side_dst=side_dst, side_mis=b.selp(cls[1]["mis"], cls[0]["mis"],
                                                              lodd, type=T.u32, name="smis"),
                    lane4=b.cvt(T.u64, b.shl(lane, 2), name="l4"), lane=lane)

    def _tile_setup(self, op, r0, w, lane):
        """This tile's source addresses (word l of the class's first row, and the side word of
        row 32g + l) and whether all its rows lie in the array."""
        b = self.b
        for c in op["cls"]:
            row = b.add(r0, c["row"], name="grow")
            rb = b.element_addr(op["ptr"], b.mul(row, self.K, name="rk"), self.elem, name="rb")
            c["g"] = b.sub(b.add(rb, op["lane4"], type=T.u64, name="gl"),
                           b.cvt(T.u64, c["mis"], name="m64"), type=T.u64, name="g")
            c["left"] = b.sub(b.sub(op["total"], r0, name="tl"), c["row"], type=T.s32,
                              name="left")
        # the side word of row i = 32g + l: class l & 1, step 16g + l/2, 128 bytes past word 0
        base = b.selp(op["cls"][1]["g"], op["cls"][0]["g"], op["lodd"], type=T.u64, name="sg")
        half = b.cvt(T.u64, b.shr(lane, 1, name="lh"), name="lh64")
        step = b.mul(half, self.stride8, type=T.u64, name="sstep")
        op["side_g"] = b.sub(b.add(b.add(base, step, type=T.u64), SWIZZLE_BYTES, type=T.u64),
                             op["lane4"], type=T.u64, name="sideg")
        op["side_left"] = b.selp(op["cls"][1]["left"], op["cls"][0]["left"], op["lodd"],
                                 type=T.s32, name="sleft")
        op["rows_ok"] = b.setp("le", b.add(r0, op["rows"], name="rend"), op["total"],
                               type=T.u32, name="rowsok")

    def _copy(self, op, dst, stage, kbytes):
        """cp.async of one operand's box of k-block kbytes/128 into the slot at dst: plain
        copies where the tile's rows and the k-block (side words included) are inside the
        array, else with src-sizes."""
        b = self.b
        box = b.add(dst, op["off"], name="box")
        side = b.mad(stage, self._side_stage_bytes(), b.add(self.side, op["side"]), name="side")
        k64 = b.cvt(T.u64, kbytes, name="k64")
        # the side word of the k-block ends at kc*elem - mis + 132 <= K*elem
        fast = b.and_(b.setp("le", b.add(kbytes, SWIZZLE_BYTES + WORD, name="kend"),
                             self.row_bytes, type=T.u32), op["rows_ok"], name="fast")
        edge, done = b.new_label("cpedge"), b.new_label("cpdone")
        b.branch(edge, fast, negate=True)
        self._rows(op, box, side, k64, None)
        b.branch(done)
        b.label(edge)
        self._rows(op, box, side, k64, kbytes)
        b.label(done)

    def _rows(self, op, box, side, k64, kbytes):
        """One instruction per row (lane l: word l), then the side words (lane l: row 32g + l).
        kbytes None: plain copies; else src-sizes from the bytes left in the row (0 past K, or
        for rows past the array's) and the array's start as the address where nothing is read."""
        b = self.b
        per_warp = op["rows"] // 4
        srcs = [b.add(c["g"], k64, type=T.u64, name="gk") for c in op["cls"]]
        dsts = [b.add(box, c["doff"], name="cd") for c in op["cls"]]
        if kbytes is not None:
            # bytes of the row from word l on: K*elem - (kc*elem - mis + 4l), clamped to 0..4
            sizes = []
            for c in op["cls"]:
                rem = b.sub(b.add(b.sub(self.row_bytes, kbytes, name="rk"), c["mis"]),
                            b.shl(op["lane"], 2), type=T.s32, name="rem")
                sizes.append(b.min(b.max(rem, 0, type=T.s32), WORD, type=T.s32, name="n"))
        for i in range(per_warp):
            k, j = i & 1, i >> 1
            c, src = op["cls"][k], srcs[k]
            at = Addr(dsts[k], j * SWIZZLE_ATOM_BYTES)
            if kbytes is None:
                b.cp_async(at, Addr(src), WORD)
            else:                        # the class's row j (8 array rows a step) in the array
                ok = b.setp("gt", c["left"], 8 * j, type=T.s32, name="rok")
                n = b.selp(sizes[k], 0, ok, type=T.u32, name="sz")
                g = b.selp(src, op["ptr"], b.setp("ne", n, 0, type=T.u32), type=T.u64,
                           name="ga")
                b.cp_async(at, Addr(g), WORD, src_size=n)
            if i + 2 < per_warp:
                srcs[k] = b.add(src, self.stride8, type=T.u64, name="gk")
        if not self.k_odd:
            return
        for g in range(-(-per_warp // 32)):  # lane l: the side word of the warp's row 32g + l
            part = per_warp - 32 * g < 32        # fewer rows than lanes left: lanes predicated
            with (b.predicated(b.setp("lt", op["lane"], per_warp - 32 * g, type=T.u32))
                  if part else contextlib.nullcontext()):
                self._side_copy(op, side, k64, kbytes, g)

    def _side_copy(self, op, side, k64, kbytes, g):
        b = self.b
        src = b.add(op["side_g"], k64, type=T.u64, name="sgk")
        if g:
            src = b.add(src, b.mul(self.stride8, 16 * g, type=T.u64, name="s16"), type=T.u64,
                        name="sgk")
        dst = Addr(b.add(side, op["side_dst"], name="sd"), 512 * g)
        if kbytes is None:
            b.cp_async(dst, Addr(src), WORD)
            return
        rem = b.add(b.sub(b.sub(self.row_bytes, kbytes, name="rk"), SWIZZLE_BYTES, type=T.s32,
                          name="srem"), op["side_mis"], type=T.s32, name="srem")
        step = b.add(b.shl(b.shr(op["lane"], 1), 3), 128 * g, name="sstep")
        ok = b.setp("gt", op["side_left"], step, type=T.s32, name="sok")
        n = b.selp(b.min(b.max(rem, 0, type=T.s32), WORD, type=T.s32), 0, ok, type=T.u32,
                   name="ssz")
        ga = b.selp(src, op["ptr"], b.setp("ne", n, 0, type=T.u32), type=T.u64, name="sga")
        b.cp_async(dst, Addr(ga), WORD, src_size=n)

    def _side_stage_bytes(self):
        return WORD * ((self.s.BM if self.ldg[0] else 0) + (self.s.BN if self.ldg[1] else 0))

    # -- hand-over --------------------------------------------------------------------------------
    def _finish(self, ops, stage, pending):
        """Wait for the stage's copies (all but `pending` groups), shift its misaligned rows,
        fence them for wgmma and arrive on its full barrier."""
        b = self.b
        b.cp_async_wait(pending)
        if self.k_odd:
            # lanes read other lanes' side words: the warp's copies complete before them
            b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))
            dst = b.mad(stage, self.stage_bytes, self.base, name="fdst")
            for op in ops:
                box = b.add(dst, op["off"], name="fbox")
                side = b.mad(stage, self._side_stage_bytes(), b.add(self.side, op["side"]),
                             name="fside")
                even_w, done = b.new_label("fixevenw"), b.new_label("fixdone")
                b.branch(even_w, self.w_odd, negate=True)
                self._shift_rows(op, box, side, 0)    # odd warp: class 0 (rows 4i + w) is odd
                b.branch(done)
                b.label(even_w)
                self._shift_rows(op, box, side, 1)    # even warp: class 1 (4i + (w ^ 1))
                b.label(done)
            b.fence_proxy_async()        # the shifted rows' st.shared before wgmma reads them
        b.mbarrier_arrive(self.full_bar(stage))

    def _shift_rows(self, op, box, side, k):
        """Shift this warp's rows of class k (odd array rows) right by 2 bytes in place: word l
        becomes (word l+1 : word l) >> 16, word l+1 from lane l+1, the side word for lane 31.
        Each lane reads and writes only its own word of the row."""
        b = self.b
        c = op["cls"][k]
        dst = b.add(box, c["doff"], name="fd")
        # the side word of row 4i + (w ^ k): 4 bytes a row
        sbase = b.add(side, b.shl(b.xor(b.shr(b.special("tid.x"), 5), k), 2), name="sb")
        for i in range(k, op["rows"] // 4, 2):
            at = Addr(dst, (i >> 1) * SWIZZLE_ATOM_BYTES)
            x = b.ld("shared", T.b32, at, name="x")
            nxt = b.reg(T.b32, "nx")
            b.emit(Instr("shfl", ("sync", "down", "b32"),
                         (nxt, x, Imm(1, T.b32), Imm(0x1F, T.b32), Imm(FULL_MASK, T.b32))))
            sw = b.ld("shared", T.b32, Addr(sbase, 16 * i), name="sw")
            y = b.selp(sw, nxt, self.lane31, type=T.b32, name="y")
            out = b.reg(T.b32, "z")
            b.emit(Instr("shf", ("r", "clamp", "b32"), (out, x, y, Imm(16, T.u32))))
            b.st("shared", at, out, type=T.b32)


# the setmaxnreg split of a schedule taking the cp.async producer: the loop's addresses and
# per-class constants for two operands (no data registers: the copies go straight to shared)
LDG_PRODUCER_REGS = 56


def ldg_schedule(s, regs=LDG_PRODUCER_REGS):
    """Schedule `s` as the lowering runs it with the cp.async producer (or the fused pad copy,
    with its `regs`): one CTA per cluster (no multicast), the producer's register share raised
    to `regs` and the consumers' lowered to what is left of the register file (multiples of
    8). The operator's schedule_for only sets cluster_m (the tuner's schedules keep their
    identity)."""
    import dataclasses
    if s.producer_regs >= regs and s.cluster_m == 1:
        return s
    # what the CTA holds at entry, per thread of a warpgroup (not the SM's registers: the
    # consumers' setmaxnreg.inc can only take what the producer gave back)
    per_thread = s.entry_regs() * s.threads // WARPGROUP
    consumer = min(s.consumer_regs, (per_thread - regs) // s.consumers // 8 * 8)
    return dataclasses.replace(s, cluster_m=1, producer_regs=regs, consumer_regs=consumer)
