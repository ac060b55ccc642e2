"""Lowering of a MatmulSchedule to ptxgen IR: a register-blocked SIMT SGEMM.

Kernel signature (all schedules): matmul(u32 M, u32 N, u32 K, f32* A, f32* B, f32* C).

Edges cost nothing in the main loop:
  * K: the first k tile is the partial one. Tile t covers [kfirst + (t-1)*BK, kfirst + t*BK)
    with kfirst = ((K-1) mod BK) + 1, so tile 0 starts at a negative k; its loads are predicated
    on k >= 0 and zero-filled, and every later tile is whole and unpredicated.
  * M: A rows past M are clamped to M-1; they only feed C rows that are never stored.
  * N: with 128-bit B loads (N % 4 == 0) a 4-column group is all in or all out, so its start is
    clamped to N-4; with 32-bit loads (N % 4 != 0) each thread owns whole columns, clamped to
    N-1. Either way the clamped columns only feed C columns that are never stored.
  * C stores are predicated on row < M and column < N.

When K or N is not a multiple of 4 the rows of A or B are not 16-byte aligned and that operand
is loaded 32 bits at a time, with a thread-to-element mapping that keeps each warp instruction
on few 128-byte lines (MatmulSchedule.a_scalar_slots / b_scalar_slots).

B's row stride is N unless the shape gives `ldb` (an int >= N, compiled in as a constant), and
C's is N unless it gives `ldc`: the matmul operator packs misaligned operands into buffers whose
rows are 16-byte aligned and runs this kernel on them with ldb = N rounded up to 4, on the
first N columns only (a multiple of BN) with ldc = the full N when it splits off the last few. Columns up to N rounded up to 4 must then be
readable (the packed buffer's zero padding), since 4-column groups are clamped to that bound.

Global addresses come from 32-bit element offsets (one register each instead of a 64-bit pointer
pair), so A and B must each hold fewer than 2^32 elements; MatmulSchedule.validate checks it when
given the shape.
"""
import contextlib
from dataclasses import dataclass

from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from .raster import grouped_tile


@dataclass(frozen=True)
class _Load:
    """One global load instruction of a thread's share of a tile."""
    off: int          # which offset register (A: tile row, B: column)
    rows: int         # B: multiples of the per-load row step added to the offset
    disp: int         # elements added to the address
    width: int        # 4 (ld.v4) or 1
    k: int            # tile-local k of its first element beyond the thread's k (A) or row (B)
    dst: tuple        # shared byte displacements from the store base: one per store


def lower(s, arch, shape=None, name="matmul"):
    """Module with one kernel `name` for schedule `s` (see MatmulSchedule / lower_matmul)."""
    s.validate(arch, shape)
    va = s.vec_global if shape is None or shape["K"] % 4 == 0 else 1
    ldb = None if shape is None else shape.get("ldb")
    ldc = None if shape is None else shape.get("ldc")
    vb = s.vec_global if shape is None or (ldb or shape["N"]) % 4 == 0 else 1
    # C rows are 8- or 16-byte aligned only when their stride is even or a multiple of 4; a
    # store group must also lie all inside or all outside [0, N)
    n_align = vb if shape is None else next(
        w for w in (4, 2, 1) if shape["N"] % w == 0 and (ldc or shape["N"]) % w == 0)
    vc = min(s.vec_store, n_align)
    c_aligned = shape is None or n_align == 4
    return _Lowering(s, arch, va, vb, vc, name, ldb, ldc, c_aligned).build()


class _Lowering:
    def __init__(self, s, arch, va, vb, vc, name, ldb=None, ldc=None, c_aligned=True):
        self.s, self.arch, self.name, self.ldb_given, self.ldc_given = s, arch, name, ldb, ldc
        self.c_rows_aligned = c_aligned             # C rows 16-byte aligned
        self.va, self.vb, self.vc = va, vb, vc        # A, B load and C store widths
        self.vs = s.vec_shared
        self.a_ld = (s.BM if s.a_transposed else s.BK) + s.pad_a     # As row length (floats)
        self.b_ld = s.BN + s.pad_b
        self.a_bytes = 4 * s.a_smem_floats

    # -- setup --------------------------------------------------------------------------------
    def build(self):
        s = self.s
        m = Module(target=self.arch)
        k = m.add_kernel(self.name, [
            Param("M", T.u32), Param("N", T.u32), Param("K", T.u32),
            Param("A", T.u64, ptr(T.f32, align=4 * self.va)),
            Param("B", T.u64, ptr(T.f32, align=4 * self.vb)),
            Param("C", T.u64, ptr(T.f32, align=4 * self.vc))])
        k.directives.append(f".reqntid {s.threads}, 1, 1")
        if s.min_ctas_per_sm:
            k.directives.append(f".minnctapersm {s.min_ctas_per_sm}")
        self.b = b = Builder(k)
        self.M, self.N, self.K = b.param("M"), b.param("N"), b.param("K")
        self.ldb = self.N if self.ldb_given is None else \
            b.mov(self.ldb_given, type=T.u32, name="ldb")                  # B's row stride
        smem = b.shared("smem", T.f32, s.stages * s.stage_bytes // 4, align=16)
        self.sbase = b.address_of(smem)
        self.tid = b.special("tid.x")
        self.fzero = b.const(0.0, T.f32, name="zero")
        self.bm0, self.bn0 = self._tile_origin()
        self._k_tiles()
        self._fragment_bases()
        self._global_slots()
        self.acc = [[b.const(0.0, T.f32, name="acc") for _ in range(s.TN)] for _ in range(s.TM)]
        self._zero_shared()
        if s.use_cp_async:
            self._main_cp_async()
        else:
            self._main_registers()
        self._epilogue()
        b.ret()
        return m

    def _tile_origin(self):
        s, b = self.s, self.b
        if s.group_m:
            # 1-D grid walked GROUP_M row tiles at a time so concurrent CTAs share B columns
            pid_m, pid_n = grouped_tile(b, self.M, self.N, s.BM, s.BN, s.group_m)
        else:
            pid_n, pid_m = b.special("ctaid.x"), b.special("ctaid.y")
        return b.shl(pid_m, pow2_exponent(s.BM), name="bm0"), b.shl(pid_n, pow2_exponent(s.BN), name="bn0")

    def _k_tiles(self):
        s, b = self.s, self.b
        km1 = b.sub(self.K, 1, name="km1")
        self.tiles_m1 = b.shr(km1, pow2_exponent(s.BK), name="ntiles")       # whole tiles after tile 0
        self.kfirst = b.add(b.and_(km1, s.BK - 1), 1, name="kfirst")
        self.kzero = b.sub(s.BK, self.kfirst, type=T.u32, name="kzero")  # tile-0 k below this: 0

    def _thread_offsets(self, tid):
        """First row and column of this thread's TM x TN tile inside the block tile."""
        s, b = self.s, self.b
        warp, lane = b.shr(tid, 5, name="warp"), b.and_(tid, 31, name="lane")
        wm = b.shr(warp, pow2_exponent(s.warps_n), name="wm")
        wn = b.and_(warp, s.warps_n - 1, name="wn")
        lm = b.shr(lane, pow2_exponent(s.lanes_n), name="lm")
        ln = b.and_(lane, s.lanes_n - 1, name="ln")
        return (b.mad(wm, s.WM, b.mul(lm, self.vs), name="mthr"),
                b.mad(wn, s.WN, b.mul(ln, self.vs), name="nthr"))

    def _fragment_bases(self):
        """Shared-memory byte addresses of this thread's first A and B fragment (stage 0)."""
        s, b = self.s, self.b
        m_thr, n_thr = self._thread_offsets(self.tid)
        a_stride = self.a_ld if not s.a_transposed else 1
        self.a_rd0 = b.mad(m_thr, 4 * a_stride, self.sbase, name="a_rd")
        self.b_rd0 = b.add(b.mad(n_thr, 4, self.sbase), self.a_bytes, name="b_rd")

    def _row_off(self, i, lanes):
        """Offset of a thread's i-th row (or column) from its first: vec_shared groups spaced
        vec_shared*lanes apart so a warp's lanes cover contiguous 16-byte pieces."""
        return (i // self.vs) * self.vs * lanes + i % self.vs

    def _global_slots(self):
        """The tile loads of this thread (_Load lists for A and B), their offset registers and
        shared-memory store bases."""
        s, b = self.s, self.b
        mlast = b.sub(self.M, 1, name="mlast")
        if self.va == 4:
            # 4-float groups along K, g per row per instruction (conflict-free transposed stores)
            g, rows, na = s.a_slots()
            per_row = s.BK // 4 // g
            ar = b.shr(self.tid, pow2_exponent(g), name="ar")
            ak = b.shl(b.and_(self.tid, g - 1), 2, name="ak")
            place = [(rows * (i // per_row), 4 * g * (i % per_row), 0) for i in range(na)]
        else:
            ek, lanes_k, rows = s.a_scalar_slots()
            ar = b.shr(self.tid, pow2_exponent(lanes_k), name="ar")
            ak = b.and_(self.tid, lanes_k - 1, name="ak")
            # a thread's ek elements lie lanes_k apart: each instruction reads whole 4*lanes_k
            # byte row pieces and its transposed stores stay in distinct banks
            place = [(rows * i, 0, lanes_k * e) for i in range(s.BM // rows) for e in range(ek)]
        d_rows = sorted({r for r, _, _ in place})
        k_in = b.add(ak, self.kfirst, name="ak1")                      # k of tile 1
        # 32-bit element offsets rather than 64-bit pointers: one register each, and the
        # address is one mad.wide per tile. Rows past M are clamped (they feed no stored C).
        self.a_off = [b.mad(b.min(b.add(b.add(self.bm0, ar), d), mlast, name="arow"), self.K,
                            k_in, name="a_off") for d in d_rows]
        ld = self.a_ld
        self.a_loads = []
        for d_row, dk, e in place:
            k0 = dk + e
            if s.a_transposed:              # As[k][m]: one 32-bit store per element
                dst = [4 * ((k0 + q) * ld + d_row) for q in range(self.va)]
            else:
                dst = [4 * (d_row * ld + k0)]
            self.a_loads.append(_Load(d_rows.index(d_row), 0, k0, self.va, k0, tuple(dst)))
        if s.a_transposed:
            self.a_wr0 = b.mad(b.mad(ak, ld, ar), 4, self.sbase, name="a_wr")
        else:
            self.a_wr0 = b.mad(b.mad(ar, ld, ak), 4, self.sbase, name="a_wr")
        self.a_kl = ak

        if self.vb == 4:
            rows_b, nb = s.b_slots()
            lanes = s.BN // 4
            bk = b.shr(self.tid, pow2_exponent(lanes), name="bk")
            bn = b.shl(b.and_(self.tid, lanes - 1), 2, name="bn")
            # a 4-column group is all in or all out (N % 4 == 0), or with a padded ldb reads
            # columns up to N rounded up to 4: clamp its start to the last such group
            if self.ldb_given is None:
                last = b.sub(self.N, 4, name="blast")
            else:
                last = b.sub(b.and_(b.add(self.N, 3, name="n3"), -4, type=T.u32,
                                    name="n4"), 4, name="blast")
            cols = [b.min(b.add(self.bn0, bn), last, name="bcol")]
            self.b_loads = [_Load(0, i, 0, 4, rows_b * i, (4 * rows_b * i * self.b_ld,))
                            for i in range(nb)]
        else:
            lanes, rows_b = s.b_scalar_slots()
            bk = b.shr(self.tid, pow2_exponent(lanes), name="bk")
            bn = b.and_(self.tid, lanes - 1, name="bn")
            nlast = b.sub(self.N, 1, name="nlast")
            cols = [b.min(b.add(self.bn0, b.add(bn, j * lanes)), nlast, name="bcol")
                    for j in range(s.BN // lanes)]
            self.b_loads = [_Load(j, i, 0, 1, rows_b * i, (4 * (rows_b * i * self.b_ld +
                                                                 j * lanes),))
                            for j in range(len(cols)) for i in range(s.BK // rows_b)]
        self.b_step = b.shl(self.ldb, pow2_exponent(s.BK), name="bstep")       # one tile of rows
        self.b_rows = b.mul(self.ldb, rows_b, name="brows")           # one load's rows
        krow = b.add(bk, self.kfirst, name="bkrow")
        self.b_off = [b.mad(krow, self.ldb, c, name="b_off") for c in cols]
        self.b_wr0 = b.add(b.mad(b.mad(bk, self.b_ld, bn), 4, self.sbase), self.a_bytes,
                           name="b_wr")
        self.b_kl = bk

    def _zero_shared(self):
        """Zero every stage once. Stages the pipeline reads but never fills (the prefetch after
        the last tile, stages beyond a short K, columns past N that cp.async skips) then hold
        defined values; it costs a few 128-bit stores and one barrier per CTA."""
        s, b = self.s, self.b
        n16 = s.shared_bytes // 16
        base = b.mad(self.tid, 16, self.sbase, name="zaddr")
        z = [self.fzero] * 4
        for j in range(-(-n16 // s.threads)):
            if (j + 1) * s.threads <= n16:
                b.st("shared", Addr(base, 16 * j * s.threads), z)
            else:
                with b.predicated(b.setp("lt", self.tid, n16 - j * s.threads, name="pz")):
                    b.st("shared", Addr(base, 16 * j * s.threads), z)
        b.bar_sync(0)

    # -- tile loads -----------------------------------------------------------------------------
    def _tile_ptrs(self, prologue=False):
        """64-bit addresses of this tile's loads from the element offsets: A per row, B per
        load. Tile 0 (prologue) lies one tile back: for A a negative displacement, for B one
        tile of rows subtracted."""
        b = self.b
        A, B = b.param("A"), b.param("B")
        a = [b.mad(o, 4, A, mode="wide", name="a_g") for o in self.a_off]
        bp = {}
        for L in self.b_loads:
            if (L.off, L.rows) not in bp:
                o = self.b_off[L.off]
                if L.rows:
                    o = b.mad(self.b_rows, L.rows, o, name="b_o")
                if prologue:
                    o = b.sub(o, self.b_step, name="b_o")
                bp[L.off, L.rows] = b.mad(o, 4, B, mode="wide", name="b_g")
        back = -4 * self.s.BK if prologue else 0
        return ([Addr(a[L.off], 4 * L.disp + back) for L in self.a_loads],
                [Addr(bp[L.off, L.rows], 4 * L.disp) for L in self.b_loads])

    def _prologue_preds(self):
        """Tile-0 validity (k >= 0) per A load element and per B load (row)."""
        b = self.b
        pa = [[b.setp("ge", b.add(self.a_kl, L.k + e), self.kzero, name="pk")
               for e in range(1 if L.width == 4 else L.width)] for L in self.a_loads]
        pb = [[b.setp("ge", b.add(self.b_kl, L.k), self.kzero, name="pk")]
              for L in self.b_loads]
        return pa, pb

    def _staging(self, init):
        """Registers receiving one tile (zeros for the prologue's skipped loads)."""
        b = self.b
        make = (lambda: b.const(0.0, T.f32, name="st")) if init else \
            (lambda: b.reg(T.f32, "st"))
        return {"a": [[make() for _ in range(L.width)] for L in self.a_loads],
                "b": [[make() for _ in range(L.width)] for L in self.b_loads]}

    def _load_regs(self, stage, prologue=False, guard=None):
        """ld.global one tile into the staging registers: tile 0 predicated on k >= 0 (the
        registers hold zeros), later tiles under `guard`."""
        b = self.b
        preds = self._prologue_preds() if prologue else (None, None)
        for loads, srcs, regs, pp in zip((self.a_loads, self.b_loads), self._tile_ptrs(prologue),
                                         (stage["a"], stage["b"]), preds):
            for i, (L, src, r) in enumerate(zip(loads, srcs, regs)):
                with self._guard(pp[i][0] if pp else guard):
                    if L.width == 4:
                        b.ld("global", T.f32, src, vec=4, out=r)
                    else:
                        b.ld("global", T.f32, src, out=r[0])

    def _store_regs(self, stage, off):
        b = self.b
        for loads, base, regs in ((self.a_loads, self.a_wr0, stage["a"]),
                                  (self.b_loads, self.b_wr0, stage["b"])):
            w = base if off is None else b.add(base, off, name="s_w")
            for L, r in zip(loads, regs):
                if len(L.dst) == L.width > 1:          # transposed: one float per store
                    for d, x in zip(L.dst, r):
                        b.st("shared", Addr(w, d), x)
                else:
                    b.st("shared", Addr(w, L.dst[0]), r if L.width > 1 else r[0])

    def _issue_cp_async(self, off, guard=None, prologue=False):
        """cp.async one tile into the stage at byte offset `off` (a register or None for 0);
        in the prologue, elements with k < 0 are zeroed with st.shared instead."""
        b = self.b
        preds = self._prologue_preds() if prologue else (None, None)
        for loads, base, srcs, pp in zip((self.a_loads, self.b_loads), (self.a_wr0, self.b_wr0),
                                         self._tile_ptrs(prologue), preds):
            w = base if off is None else b.add(base, off, name="s_w")
            for i, (L, src) in enumerate(zip(loads, srcs)):
                p = pp[i][0] if pp else guard
                if len(L.dst) == L.width > 1:          # transposed: 4-byte copies
                    parts = [(d, Addr(src.base, src.offset + 4 * e), 4, self.fzero)
                             for e, d in enumerate(L.dst)]
                else:
                    parts = [(L.dst[0], src, 4 * L.width,
                              [self.fzero] * 4 if L.width == 4 else self.fzero)]
                for d, a, n, zero in parts:
                    with self._guard(p):
                        b.cp_async(Addr(w, d), a, n)
                    if pp:
                        with self._guard(p, negate=True):
                            b.st("shared", Addr(w, d), zero)

    def _guard(self, pred, negate=False):
        return self.b.predicated(pred, negate) if pred is not None else contextlib.nullcontext()

    def _advance(self):
        b = self.b
        for o in self.a_off:
            b.add(o, self.s.BK, out=o)
        for o in self.b_off:
            b.add(o, self.b_step, out=o)

    # -- compute --------------------------------------------------------------------------------
    def _frags(self, a_base, b_base, kk, out=None):
        """Load the A and B fragments of step kk: TM and TN floats."""
        s, b, vs = self.s, self.b, self.vs
        a, bb = [], []
        outa, outb = out if out is not None else (None, None)
        if s.a_transposed:
            for i in range(0, s.TM, vs):
                addr = Addr(a_base, 4 * (kk * self.a_ld + self._row_off(i, s.lanes_m)))
                dst = outa[i:i + vs] if outa else None
                r = b.ld("shared", T.f32, addr, vec=vs, out=dst if vs > 1 else
                         (dst[0] if dst else None), name="fa")
                a.extend(r if vs > 1 else [r])
        else:
            for i in range(s.TM):
                addr = Addr(a_base, 4 * (self._row_off(i, s.lanes_m) * self.a_ld + kk))
                a.append(b.ld("shared", T.f32, addr, out=outa[i] if outa else None, name="fa"))
        for j in range(0, s.TN, vs):
            addr = Addr(b_base, 4 * (kk * self.b_ld + self._row_off(j, s.lanes_n)))
            dst = outb[j:j + vs] if outb else None
            r = b.ld("shared", T.f32, addr, vec=vs, out=dst if vs > 1 else
                     (dst[0] if dst else None), name="fb")
            bb.extend(r if vs > 1 else [r])
        return a, bb

    def _ffma(self, frag):
        a, bv = frag
        for i in range(self.s.TM):
            cols = range(self.s.TN)
            if self.s.ffma_order == "serpentine" and i % 2:
                cols = reversed(cols)      # the B operand of a row's first FMA is still hot
            for j in cols:
                self.b.fma(a[i], bv[j], self.acc[i][j], out=self.acc[i][j])

    def _compute_tile(self, a_r, b_r, frag0, at_end):
        """BK fully unrolled k steps. Fragments of step kk+1 load before step kk's FMAs; before
        the last step's FMAs `at_end()` runs (store or await the next tile, sync, load its
        step-0 fragments)."""
        frag, nxt = frag0, None
        for kk in range(self.s.BK):
            if kk + 1 < self.s.BK:
                nxt = self._frags(a_r, b_r, kk + 1)
            elif at_end is not None:
                at_end()
            self._ffma(frag)
            frag = nxt

    def _frag_regs(self):
        b, s = self.b, self.s
        return ([b.reg(T.f32, "fa") for _ in range(s.TM)],
                [b.reg(T.f32, "fb") for _ in range(s.TN)])

    def _main_registers(self):
        """ld.global → registers → st.shared. One loop trip per k tile; the trip loads the next
        tile into registers first, computes, then stores it to the other stage, so global
        latency hides behind a whole tile of FMAs and one barrier per tile suffices. The last
        trip's loads are predicated off: one copy of the compute body keeps the code small and
        leaves the epilogue outside any body where fragments are live."""
        s, b = self.s, self.b
        stage = self._staging(init=True)
        self._load_regs(stage, prologue=True)
        self._store_regs(stage, None)
        b.bar_sync(0)
        double = s.frag_double_buffer and s.stages == 2
        f0 = self._frag_regs() if double else None
        if double:
            self._frags(self.a_rd0, self.b_rd0, 0, out=f0)
        off = b.const(0, T.u32, name="off") if s.stages == 2 else None
        ntiles = b.add(self.tiles_m1, 1, name="ktiles")
        with b.for_range(0, ntiles, 1, unroll=s.unroll, type=T.u32, name="kt") as kt:
            more = b.setp("lt", kt, self.tiles_m1, name="pmore")
            stage = self._staging(init=False)   # nothing of the last tile needs to survive
            self._load_regs(stage, guard=more)
            self._advance()
            if s.stages == 2:
                a_r, b_r = b.add(self.a_rd0, off, name="a_r"), b.add(self.b_rd0, off, name="b_r")
                noff = b.sub(s.stage_bytes, off, type=T.u32, name="noff")
            else:
                a_r, b_r, noff = self.a_rd0, self.b_rd0, None
            frag = f0 if double else self._frags(a_r, b_r, 0)

            def at_end():
                if s.stages == 1:
                    return
                with b.predicated(more):
                    self._store_regs(stage, noff)
                b.bar_sync(0)
                if double:
                    self._frags(b.add(self.a_rd0, noff), b.add(self.b_rd0, noff), 0, out=f0)
            self._compute_tile(a_r, b_r, frag, at_end)
            if s.stages == 1:
                b.bar_sync(0)
                with b.predicated(more):
                    self._store_regs(stage, None)
                b.bar_sync(0)
            else:
                b.mov(noff, out=off)

    def _next_stage(self, off):
        s, b = self.s, self.b
        if s.stages == 2:
            b.sub(s.stage_bytes, off, type=T.u32, out=off)
            return
        b.add(off, s.stage_bytes, out=off)
        wrap = b.setp("ge", off, s.stages * s.stage_bytes, name="pwrap")
        b.selp(0, off, wrap, type=T.u32, out=off)

    def _main_cp_async(self):
        """cp.async straight into shared memory, `stages` tiles in flight: the prologue issues
        tiles 0..S-2, each trip issues tile t+S-1 into the stage read last trip and waits for
        tile t+1 before the barrier that ends it."""
        s, b = self.s, self.b
        S = s.stages
        ntiles = b.add(self.tiles_m1, 1, name="ktiles")
        self._issue_cp_async(None, prologue=True)
        b.cp_async_commit()
        for t in range(1, S - 1):
            have = b.setp("ge", self.tiles_m1, t, name="phave")   # tile t exists ⇔ T-1 >= t
            self._issue_cp_async(b.const(t * s.stage_bytes, T.u32, name="soff"), guard=have)
            self._advance()
            b.cp_async_commit()
        b.cp_async_wait(S - 2)
        b.bar_sync(0)
        woff = b.const((S - 1) * s.stage_bytes, T.u32, name="woff")
        roff = b.const(0, T.u32, name="roff")
        double = s.frag_double_buffer
        f0 = self._frag_regs() if double else None
        if double:
            self._frags(self.a_rd0, self.b_rd0, 0, out=f0)
        with b.for_range(0, ntiles, 1, unroll=s.unroll, type=T.u32, name="kt") as kt:
            a_r, b_r = b.add(self.a_rd0, roff, name="a_r"), b.add(self.b_rd0, roff, name="b_r")
            frag = f0 if double else self._frags(a_r, b_r, 0)
            # the tile S-1 ahead goes to the stage everyone finished reading last iteration
            have = b.setp("lt", b.add(kt, S - 1), ntiles, name="pload")
            self._issue_cp_async(woff, guard=have)
            b.cp_async_commit()
            self._advance()
            self._next_stage(woff)

            def at_end():
                b.cp_async_wait(S - 2)
                b.bar_sync(0)
                self._next_stage(roff)
                if double:
                    self._frags(b.add(self.a_rd0, roff), b.add(self.b_rd0, roff), 0, out=f0)
            self._compute_tile(a_r, b_r, frag, at_end)

    # -- epilogue -------------------------------------------------------------------------------
    def _staging_fits(self):
        """The staged epilogue needs float4 fragments, whole 32-column pieces per warp row, 8
        lanes across a warp row and room in the (reused) shared memory for lanes_m rows of
        each warp's tile."""
        s = self.s
        # lanes_n * 4 == 32: a fragment row's lanes cover banks 0, 4, .., 28 (+q) and the
        # lanes_m <= 4 rows, WN+1 floats apart, add 0..3: every store conflict-free
        return ((s.stage_c or not self.c_rows_aligned) and self.vs == 4 and s.WN % 32 == 0 and
                s.lanes_n * 4 == 32 and
                s.warps_m * s.warps_n * s.lanes_m * (s.WN + 1) * 4 <= s.shared_bytes)

    def _ldc(self):
        """C's row stride: the N parameter, or the shape's ldc as a constant."""
        if self.ldc_given is None:
            return self.N
        return self.b.mov(self.ldc_given, type=T.u32, name="ldc")

    def _epilogue(self):
        if self._staging_fits():
            return self._epilogue_staged()
        s, b = self.s, self.b
        # recomputed rather than kept live through the main loop, where registers are scarce
        bm0, bn0 = self._tile_origin()
        m_thr, n_thr = self._thread_offsets(b.special("tid.x"))
        row0 = b.add(bm0, m_thr, name="crow")
        col0 = b.add(bn0, n_thr, name="ccol")
        C = b.param("C")
        ldc = self._ldc()
        idx = b.mad(row0, ldc, b.cvt(T.u64, col0), mode="wide", name="cidx")
        cbase = b.add(C, b.shl(idx, 2, type=T.u64), type=T.u64, name="c_g")
        width = self.vc
        cols = [self._row_off(j, s.lanes_n) for j in range(0, s.TN, width)]
        # a width-aligned group of columns is all inside or all outside [0, N)
        pcol = [b.setp("lt", b.add(col0, c), self.N, name="pc") for c in cols]
        for i in range(s.TM):
            ro = self._row_off(i, s.lanes_m)
            prow = b.setp("lt", b.add(row0, ro), self.M, name="pr")
            rptr = cbase if ro == 0 else b.add(
                cbase, b.mul(ldc, 4 * ro, mode="wide"), type=T.u64, name="c_r")
            for g, c in enumerate(cols):
                vals = self.acc[i][g * width:(g + 1) * width]
                with b.predicated(b.and_(prow, pcol[g], name="pst")):
                    b.st("global", Addr(rptr, 4 * c), vals if width > 1 else vals[0])

    def _epilogue_staged(self):
        """C rows not 16-byte aligned (ldc % 4 != 0): stored straight from the fragments, a
        warp's 32-bit stores would each touch 4 rows at a 16-byte stride, a fifth of every
        sector written. Instead, for each fragment row i every warp writes its lanes_m rows of
        the tile to its own slice of the (reused) shared memory and reads them back along rows,
        so consecutive lanes store consecutive columns: 128 contiguous bytes per warp
        instruction. The slice's rows are WN+1 floats apart, so the 32-bit stores (lane (lm,
        ln) at lm*(WN+1) + 4*ln + q) fall in 32 distinct banks; float4 stores would need the
        accumulators in aligned register quads, which makes ptxas spill in the main loop."""
        s, b = self.s, self.b
        bm0, bn0 = self._tile_origin()
        tid = b.special("tid.x")
        warp, lane = b.shr(tid, 5, name="warp"), b.and_(tid, 31, name="lane")
        wm = b.shr(warp, pow2_exponent(s.warps_n), name="wm")
        wn = b.and_(warp, s.warps_n - 1, name="wn")
        lm = b.shr(lane, pow2_exponent(s.lanes_n), name="lm")
        ln = b.and_(lane, s.lanes_n - 1, name="ln")
        pitch = s.WN + 1
        slice_bytes = s.lanes_m * pitch * 4
        region = b.mad(warp, slice_bytes, self.sbase, name="ep_s")
        wr = b.add(region, b.shl(b.mad(lm, pitch, b.shl(ln, 2, name="ln4"), name="ep_w"), 2,
                                 name="ep_wb"), name="ep_wr")
        rd = b.add(region, b.shl(lane, 2, name="ep_l4"), name="ep_rd")
        rowbase = b.mad(wm, s.WM, bm0, name="ep_row")
        colbase = b.add(b.mad(wn, s.WN, bn0, name="ep_c0"), lane, name="ep_col")
        ldc = self._ldc()
        idx = b.mad(rowbase, ldc, b.cvt(T.u64, colbase), mode="wide", name="cidx")
        cbase = b.add(b.param("C"), b.shl(idx, 2, type=T.u64), type=T.u64, name="c_g")
        pieces = s.WN // 32
        pcol = [b.setp("lt", b.add(colbase, 32 * h) if h else colbase, self.N, name="pc")
                for h in range(pieces)]
        rstep = b.mul(ldc, 16, mode="wide", name="c_rs")    # 4 rows of C, bytes
        b.bar_sync(0)                         # every warp is done reading the last k tile
        for i in range(s.TM):
            if i:
                b.bar_sync(0)                 # the previous row's reads are done
            for g in range(s.TN // 4):
                for q in range(4):
                    b.st("shared", Addr(wr, 4 * (4 * g * s.lanes_n + q)), self.acc[i][4 * g + q])
            b.bar_sync(0)
            got = []
            for r in range(s.lanes_m):
                for h in range(pieces):
                    got.append((r, h, b.ld("shared", T.f32, Addr(rd, 4 * (r * pitch + 32 * h)),
                                            name="ep_v")))
            ro = self._row_off(i, s.lanes_m)
            rptr = cbase if ro == 0 else b.add(cbase, b.mul(ldc, 4 * ro, mode="wide"),
                                               type=T.u64, name="c_r")
            for r in range(s.lanes_m):
                d = 4 * r + ro                                 # row within the warp tile
                prow = b.setp("lt", b.add(rowbase, d) if d else rowbase, self.M, name="pr")
                if r:
                    rptr = b.add(rptr, rstep, type=T.u64, name="c_r")
                for rr, h, v in got:
                    if rr == r:
                        with b.predicated(b.and_(prow, pcol[h], name="pst")):
                            b.st("global", Addr(rptr, 128 * h), v)
