"""Lowering of a TcMatmulSchedule to an sm_90a kernel: a TMA producer warpgroup feeding wgmma
consumer warpgroups through an mbarrier ring.

    tc_matmul(A_map, B_map, C, M, N, K)
        A_map: tensor map of A (M x K, row-major), box BM x BK, 128-byte swizzle
        B_map: tensor map of Bt (N x K, row-major: B column-major), box BN x BK, same swizzle
        C:     M x N row-major, f32 or bf16

Both operands are K-major, the layout wgmma reads from shared memory without transposing.
Shared memory holds `stages` slots of [A box | B box], aligned to the 1024-byte swizzle atom,
then a `full` and an `empty` mbarrier per slot. One producer thread waits for a slot to be
empty, arms its full barrier with the slot's byte count (expect_tx) and issues both TMA copies;
the copies complete the transaction. Each consumer warpgroup waits on the full barrier, issues
its wgmmas for the slot (BK/16 k-steps x its M blocks x BN/wgmma_n N blocks), and one thread per
consumer arrives on the slot's empty barrier once those wgmmas have read it (with inflight=1 the
release lags one slot so the tensor cores always have a group queued). Slots and barrier phases
run on across tiles, so the producer fills the next tile's slots while consumers store C.

Edges: TMA fills elements outside A or Bt with zeros, so partial K steps and edge tiles add
zeros; C stores are predicated on row < M and column < N (edge tiles only).
"""
from ..errors import ScheduleError
from ..ir import Addr, Builder, Imm, Module, Param, Reg, Sym, ptr
from ..ir import types as T
from ..ir.instr import Instr
from ..ir.values import Raw, Vec
from .raster import grouped_tile
from .tc_matmul import (ELEM_BYTES, OUT_BYTES, SWIZZLE_ATOM_BYTES, SWIZZLE_BYTES, WARPGROUP,
                        WGMMA_K, WGMMA_M)

TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN = 128, 64


def _log2(x):
    return x.bit_length() - 1


def lower(s, arch, shape, dtype="bf16", out="f32", name="tc_matmul"):
    s.validate(arch, dtype)
    if out not in ("f32", "bf16"):
        raise ScheduleError(f"tc_matmul: output type must be f32 or bf16, got {out!r}")
    m = Module(target=arch)
    out_t = T.TYPES[out]
    k = m.add_kernel(name, [
        Param("A_map", T.b8, array=TENSOR_MAP_BYTES, align=TENSOR_MAP_ALIGN),
        Param("B_map", T.b8, array=TENSOR_MAP_BYTES, align=TENSOR_MAP_ALIGN),
        Param("C", T.u64, ptr(out_t, align=OUT_BYTES[out])),
        Param("M", T.u32), Param("N", T.u32), Param("K", T.u32)])
    # setmaxnreg only takes effect under a register cap at entry (.maxnreg)
    k.directives += [f".maxntid {s.threads}, 1, 1", f".maxnreg {s.entry_regs()}"]
    _Lowering(Builder(k), s, dtype, out, shape).run()
    return m


class _Lowering:
    def __init__(self, b, s, dtype, out, shape):
        self.b, self.s, self.dtype, self.out = b, s, dtype, out
        self.elem = ELEM_BYTES[dtype]
        self.even_n = shape["N"] % 2 == 0      # C rows hold whole pairs: 2-element stores

    # -- layout ---------------------------------------------------------------------------------
    def run(self):
        b, s = self.b, self.s
        tid = b.special("tid.x")
        wg = b.shr(tid, _log2(WARPGROUP), name="wg")
        smem = b.dynamic_shared("smem", align=SWIZZLE_ATOM_BYTES)
        raw = b.address_of(smem)
        # the swizzle pattern is a function of address bits 4-9: slots start on 1024 bytes
        self.base = b.and_(b.add(raw, SWIZZLE_ATOM_BYTES - 1), -SWIZZLE_ATOM_BYTES & 0xFFFFFFFF,
                           name="base")
        self.stage_bytes = s.stage_bytes(self.elem)
        self.a_bytes = s.a_stage_bytes(self.elem)
        self.bars = b.add(self.base, s.stages * self.stage_bytes, name="bars")
        with b.if_(b.setp("eq", tid, 0)):
            for st in range(s.stages):
                self.mbarrier_init(Addr(self.bars, 8 * st), 1)
                self.mbarrier_init(Addr(self.bars, 8 * (s.stages + st)), s.consumers)
            b.emit(Instr("fence", ("mbarrier_init", "release", "cluster")))
        b.bar_sync(0)
        self.M, self.N, self.K = b.param("M"), b.param("N"), b.param("K")
        tm = b.shr(b.add(self.M, s.BM - 1), _log2(s.BM), name="tiles_m")
        tn = b.shr(b.add(self.N, s.BN - 1), _log2(s.BN), name="tiles_n")
        self.ntiles = b.mul(tm, tn, name="ntiles")
        self.kblocks = b.shr(b.add(self.K, s.BK - 1), _log2(s.BK), name="kblocks")
        consumer, end = b.new_label("consumer"), b.new_label("done")
        b.branch(consumer, b.setp("ne", wg, 0))
        b.emit(Instr("setmaxnreg", ("dec", "sync", "aligned", "u32"),
                     (Imm(s.producer_regs, T.u32),)))
        b.branch(end, b.setp("ne", tid, 0))
        self.producer()
        b.branch(end)
        b.label(consumer)
        b.emit(Instr("setmaxnreg", ("inc", "sync", "aligned", "u32"),
                     (Imm(s.consumer_regs, T.u32),)))
        self.consumer(b.sub(wg, 1, name="cw"), b.and_(tid, WARPGROUP - 1, name="t"))
        b.label(end)
        b.ret()

    def tiles(self):
        """for_range over this CTA's tiles: all of them from ctaid.x, nctaid.x apart."""
        b = self.b
        # not persistent: a CTA per tile, and a step of ntiles runs the loop once
        step = b.special("nctaid.x") if self.s.persistent else self.ntiles
        return b.for_range(b.special("ctaid.x"), self.ntiles, step, type=T.u32, name="tile")

    def tile_origin(self, tile):
        b, s = self.b, self.s
        if s.group_m:
            pm, pn = grouped_tile(b, self.M, self.N, s.BM, s.BN, s.group_m, pid=tile)
        else:
            tn = b.shr(b.add(self.N, s.BN - 1), _log2(s.BN), name="tiles_n")
            pm = b.div(tile, tn, name="pid_m")
            pn = b.sub(tile, b.mul(pm, tn), name="pid_n")
        return b.shl(pm, _log2(s.BM), name="m0"), b.shl(pn, _log2(s.BN), name="n0")

    def advance(self, stage, phase):
        b = self.b
        b.add(stage, 1, out=stage)
        wrap = b.setp("eq", stage, self.s.stages)
        with b.predicated(wrap):
            b.mov(0, type=T.u32, out=stage)
            b.xor(phase, 1, out=phase)

    def full_bar(self, stage):
        return self.b.mad(stage, 8, self.bars, name="full")

    def empty_bar(self, stage):
        return self.b.mad(stage, 8, self.b.add(self.bars, 8 * self.s.stages), name="empty")

    # -- producer -------------------------------------------------------------------------------
    def producer(self):
        b, s = self.b, self.s
        maps = []
        for p in ("A_map", "B_map"):
            a = b._op("mov", ("u64",), T.u64, (Sym(p),), name="pmap")
            maps.append(b._op("cvta", ("param", "u64"), T.u64, (a,), name="map"))
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        with self.tiles() as tile:
            m0, n0 = self.tile_origin(tile)
            with b.for_range(0, self.kblocks, type=T.u32, name="kb") as kb:
                self.mbarrier_wait(self.empty_bar(stage), b.xor(phase, 1, name="par"))
                full = self.full_bar(stage)
                b.emit(Instr("mbarrier", ("arrive", "expect_tx", "shared::cta", "b64"),
                             (Raw("_"), Addr(full), Imm(self.stage_bytes, T.u32))))
                dst = b.mad(stage, self.stage_bytes, self.base, name="dst")
                kc = b.shl(kb, _log2(s.BK), name="kc")
                self.tma_load(dst, maps[0], kc, m0, full)
                self.tma_load(b.add(dst, self.a_bytes, name="dstb"), maps[1], kc, n0, full)
                self.advance(stage, phase)

    # -- consumers ------------------------------------------------------------------------------
    def consumer(self, cw, t):
        b, s = self.b, self.s
        leader = b.setp("eq", t, 0)
        a_rows = b.mul(cw, s.rows_per_consumer * SWIZZLE_BYTES, name="arows")
        desc_a = self.descriptor(b.add(self.base, a_rows, name="abase"))
        desc_b = self.descriptor(b.add(self.base, self.a_bytes, name="bbase"))
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        prev = b.const(0, T.u32, name="prev")
        acc = [[[b.reg(T.f32, "acc") for _ in range(s.wgmma_n // 2)] for _ in range(s.n_blocks)]
               for _ in range(s.m_blocks)]
        with self.tiles() as tile:
            m0, n0 = self.tile_origin(tile)
            for r in (r for mb in acc for nb in mb for r in nb):
                b.mov(0.0, type=T.f32, out=r)
            with b.for_range(0, self.kblocks, type=T.u32, name="kb") as kb:
                self.mbarrier_wait(self.full_bar(stage), phase)
                off = b.mul(stage, self.stage_bytes >> 4, mode="wide", type=T.u32, name="doff")
                da, db = b.add(desc_a, off, name="da"), b.add(desc_b, off, name="db")
                b.emit(Instr("wgmma", ("fence", "sync", "aligned")))
                for kk in range(s.BK // WGMMA_K):
                    koff = kk * WGMMA_K * self.elem
                    for mb in range(s.m_blocks):
                        dam = b.add(da, (mb * WGMMA_M * SWIZZLE_BYTES + koff) >> 4, name="dam")
                        for nb in range(s.n_blocks):
                            dbn = b.add(db, (nb * s.wgmma_n * SWIZZLE_BYTES + koff) >> 4,
                                        name="dbn")
                            self.wgmma(acc[mb][nb], dam, dbn)
                b.emit(Instr("wgmma", ("commit_group", "sync", "aligned")))
                b.emit(Instr("wgmma", ("wait_group", "sync", "aligned"),
                             (Imm(s.inflight, T.u32),)))
                if s.inflight:
                    # the group before this one has finished reading its slot
                    with b.predicated(b.and_(leader, b.setp("ne", kb, 0), name="rel")):
                        self.mbarrier_arrive(self.empty_bar(prev))
                    b.mov(stage, out=prev)
                else:
                    with b.predicated(leader):
                        self.mbarrier_arrive(self.empty_bar(stage))
                self.advance(stage, phase)
            if s.inflight:
                b.emit(Instr("wgmma", ("wait_group", "sync", "aligned"), (Imm(0, T.u32),)))
                with b.predicated(b.and_(leader, b.setp("ne", self.kblocks, 0), name="rel")):
                    self.mbarrier_arrive(self.empty_bar(prev))
            self.epilogue(acc, cw, t, m0, n0)

    def descriptor(self, addr):
        """wgmma matrix descriptor of a K-major, 128-byte-swizzled operand at shared `addr`:
        start address >> 4 in bits 0-13, leading offset (unused for swizzled K-major; 1) in
        16-29, stride between 8-row groups (1024 bytes >> 4) in 32-45, swizzle mode 1 (128B)
        in 62-63. Source: PTX ISA 9.0, section 9.7.15.5.1.1 (matrix descriptor format)."""
        b = self.b
        lo = b.or_(b.and_(b.shr(addr, 4), 0x3FFF), 1 << 16, name="dlo")
        hi = b.const((SWIZZLE_ATOM_BYTES >> 4) | (1 << 30), T.u32, name="dhi")
        d = b.reg(T.u64, "desc")
        b.emit(Instr("mov", ("b64",), (d, Vec((lo, hi)))))
        return d

    def wgmma(self, acc, da, db):
        b = self.b
        scale_d = getattr(self, "_scale_d", None)
        if scale_d is None:
            scale_d = self._scale_d = b.setp("eq", b.const(1, T.u32, name="one"), 1)
        t = self.dtype
        b.emit(Instr("wgmma", ("mma_async", "sync", "aligned", f"m64n{self.s.wgmma_n}k16", "f32",
                               t, t),
                     (Vec(tuple(acc)), da, db, scale_d, Imm(1, T.s32), Imm(1, T.s32),
                      Imm(0, T.s32), Imm(0, T.s32))))

    # -- epilogue -------------------------------------------------------------------------------
    def epilogue(self, acc, cw, t, m0, n0):
        """Accumulator fragment of m64nN (PTX ISA 9.0, 9.7.15.5.1, wgmma D layout): thread t
        holds, for j < N/8, rows r = 16*(t/32) + (t%32)/4 and r+8, columns 8j + 2*(t%4) + {0,1},
        as acc[4j], acc[4j+1] (row r) and acc[4j+2], acc[4j+3] (row r+8)."""
        b, s = self.b, self.s
        eb = OUT_BYTES[self.out]
        lane = b.and_(t, 31, name="lane")
        row = b.add(m0, b.mad(cw, s.rows_per_consumer, b.mad(b.shr(t, 5), 16, b.shr(lane, 2))),
                    name="row")
        col = b.add(n0, b.shl(b.and_(lane, 3), 1), name="col")
        C = b.param("C")
        row_bytes = b.mul(self.N, eb, name="ldc")
        bases = []
        for mb in range(s.m_blocks):
            r = b.add(row, mb * WGMMA_M, name="r")
            a0 = b.element_addr(C, b.mad(r, self.N, col, name="ci"), eb, name="c0")
            a8 = b.add(a0, b.mul(row_bytes, 8, mode="wide", type=T.u32), type=T.u64, name="c8")
            bases.append((r, a0, a8))
        inside = b.and_(b.setp("le", b.add(m0, s.BM), self.M),
                        b.setp("le", b.add(n0, s.BN), self.N), name="inside")
        edge, done = b.new_label("edge"), b.new_label("stored")
        b.branch(edge, inside, negate=True)
        self.store_tile(acc, bases, None)
        b.branch(done)
        b.label(edge)
        col_left = b.sub(self.N, col, type=T.s32, name="cleft")
        self.store_tile(acc, bases, col_left)
        b.label(done)

    def store_tile(self, acc, bases, col_left):
        """Stores of every accumulator pair; with col_left (N - this thread's first column)
        each is predicated on its row and column being inside C. Odd N: C rows are not
        8-byte (f32) or 4-byte (bf16) aligned, so each pair is stored as two elements."""
        b, s = self.b, self.s
        eb = OUT_BYTES[self.out]
        for mb, (r, a0, a8) in enumerate(bases):
            row_ok = None
            if col_left is not None:
                row_ok = (b.setp("lt", r, self.M), b.setp("lt", b.add(r, 8), self.M))
            for nb in range(s.n_blocks):
                for j in range(s.wgmma_n // 8):
                    c = nb * s.wgmma_n + 8 * j
                    for h, addr in enumerate((a0, a8)):
                        pair = self.converted(acc[mb][nb][4 * j + 2 * h: 4 * j + 2 * h + 2])
                        parts = [(pair, c)] if self.even_n else [((v,), c + e)
                                                                 for e, v in enumerate(pair)]
                        for vals, cc in parts:
                            if col_left is None:
                                self.store(Addr(addr, cc * eb), vals)
                                continue
                            ok = b.and_(row_ok[h], b.setp("gt", col_left, cc, type=T.s32))
                            with b.predicated(ok):
                                self.store(Addr(addr, cc * eb), vals)

    def converted(self, pair):
        """An accumulator pair in C's type: f32 as it is; bf16 rounded into one b32 register
        (low half: the first column), split into halves when stored one by one."""
        b = self.b
        if self.out == "f32":
            return tuple(pair)
        pk = b.reg(T.TYPES["bf16x2"], "pk")
        b.emit(Instr("cvt", ("rn", "bf16x2", "f32"), (pk, pair[1], pair[0])))
        if self.even_n:
            return (pk,)
        lo, hi = b.reg(T.b16, "h"), b.reg(T.b16, "h")
        b.emit(Instr("mov", ("b32",), (Vec((lo, hi)), pk)))
        return (lo, hi)

    def store(self, addr, vals):
        b = self.b
        if self.out == "f32":
            b.st("global", addr, vals if len(vals) > 1 else vals[0])
        else:
            b.st("global", addr, vals[0], type=T.b32 if self.even_n else T.b16)

    # -- tensor-core and async-copy instructions ------------------------------------------------
    def mbarrier_init(self, addr, count):
        self.b.emit(Instr("mbarrier", ("init", "shared::cta", "b64"), (addr, Imm(count, T.u32))))

    def mbarrier_arrive(self, bar):
        self.b.emit(Instr("mbarrier", ("arrive", "shared::cta", "b64"), (Raw("_"), Addr(bar))))

    def mbarrier_wait(self, bar, parity):
        b = self.b
        spin = b.new_label("wait")
        b.label(spin)
        p = b.reg(T.pred, "ready")
        b.emit(Instr("mbarrier", ("try_wait", "parity", "shared::cta", "b64"),
                     (p, Addr(bar), parity)))
        b.branch(spin, p, negate=True)

    def tma_load(self, dst, tmap, c0, c1, bar):
        self.b.emit(Instr("cp", ("async", "bulk", "tensor", "2d", "shared::cluster", "global",
                                 "tile", "mbarrier::complete_tx::bytes"),
                          (Addr(dst), Raw(f"[{tmap}, {{{c0}, {c1}}}]"), Addr(bar))))
