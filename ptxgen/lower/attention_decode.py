"""Lowering of the attention decode (ops/attention_decode.py): a split kernel, a combine kernel
and the K/V cache append, on mma.sync m16n8k16 (every target from sm_80).

    decode_split(Q, K, V, seqlens, [block_table], Opart, Lpart, scale_log2)
        Q: B x S_q x H_q x D;  K, V: the cache, B x S_max x H_kv x D (contiguous) or the page
        pool num_pages x page x H_kv x D with block_table B x max_pages (u32 page ids)
        Opart: rows x splits x D f32, Lpart: rows x splits f32 (log2 units), rows = B·S_q·H_q

Grid (splits / warps, B·H_kv, 16-row tiles). A warp is one split: the key blocks
[split·per, min((split+1)·per, nb)) of its (batch, kv head), per = ceil(nb / splits) and nb =
ceil(len / 16). Its M rows are (token t, query head j of the group) at row t·G + j; row t
sees keys < len - S_q + 1 + t (the new tokens are the last S_q of the cache: causal). The
CTA's 16 Q rows are copied to shared memory once (its warps read them by ldmatrix at every
block: registers for O, not Q, at D = 128); K and V tiles of 16 keys go through the
warp's own cp.async ring (lower/cp_async_ring.py with bar.warp.sync), rows stored with 16-byte
chunk c at c ^ (row & 7) (no bank conflicts for the copies or ldmatrix). Keys past the length
are clamped to the last one (in the same page: a page holds whole blocks) and masked to -inf.
S = Q·Kᵀ (ldmatrix), the online softmax (online_softmax.py), O += P·V (ldmatrix.trans), then
O / l and m + log2 l per row into the workspace (rows of this split with no key: O = 0,
LSE = -inf).

    decode_combine(Opart, Lpart, O, LSE)
One warp per output row: w_s = 2^(L_s - max L), O = Σ w_s O_s / Σ w_s in the input type,
LSE = (max L + log2 Σ w_s)·ln 2 (natural log).

    kv_append(K, V, K_new, V_new, seqlens, [block_table])
One thread per 16-byte chunk of K_new / V_new (B x S_q x H_kv x D): token t of batch b goes to
position seqlens[b] + t (positions past the cache are skipped).
"""
from ..ir import Addr, Builder, Imm, Module, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from ..ir.instr import Instr
from ..schedule.attention import COL_BLOCK
from ..schedule.mma_matmul import CHUNK, MMA_M, MMA_N, WARP
from .cp_async_ring import cp_async_ring
from .online_softmax import LN2, NEG_INF, OnlineSoftmax

MMA_K = 16
FULL_MASK = 0xFFFFFFFF
SWIZZLE_ALIGN = 128
COMBINE_WARPS = 4
APPEND_THREADS = 128


def _warp_sync(b):
    b.emit(Instr("bar", ("warp", "sync"), (Imm(FULL_MASK, T.u32),)))


def _u32_rem(b, x, d, q=None, name="rem"):
    """(x / d, x % d) for a u32 register and a constant d."""
    q = b.div(x, d, type=T.u32, name="quo") if q is None else q
    return q, b.sub(x, b.mul(q, d, type=T.u32), type=T.u32, name=name)


def cache_params(paged):
    return [Param("seqlens", T.u64, ptr(T.u32, align=4))] + \
        ([Param("block_table", T.u64, ptr(T.u32, align=4))] if paged else [])


class CacheRows:
    """Byte offsets of K/V cache rows (key position `pos` of batch `bi`, head `h`): the
    contiguous layout B x cap x H_kv x D or pages of `page` keys through the block table."""

    def __init__(self, b, geom, bi, h):
        self.b, self.g = b, geom
        self.RB = 2 * geom["D"]
        self.key_bytes = geom["H_kv"] * self.RB
        self.bi = bi
        if geom["page"]:
            self.head = b.mul(h, self.RB, mode="wide", type=T.u32, name="hoff")
            self.table = b.element_addr(b.param("block_table"),
                                        b.mul(bi, geom["max_pages"], type=T.u32), 4,
                                        name="btab")
        else:
            self.head = b.mul(b.mad(bi, geom["cap"] * geom["H_kv"], h, type=T.u32),
                              self.RB, mode="wide", type=T.u32, name="hoff")

    def page_base(self, pos):
        """The byte offset of position pos's page start (contiguous: the head's row 0) and the
        position within it."""
        b, g = self.b, self.g
        if not g["page"]:
            return self.head, pos
        pi, inpage = _u32_rem(b, pos, g["page"], name="inpage") if g["page"] & (g["page"] - 1) \
            else (b.shr(pos, pow2_exponent(g["page"]), name="pidx"),
                  b.and_(pos, g["page"] - 1, name="inpage"))
        pid = b.ld("global", T.u32, b.element_addr(self.table, pi, 4), cache="nc", name="page")
        off = b.mul(pid, g["page"] * self.key_bytes, mode="wide", type=T.u32, name="poff")
        return b.add(off, self.head, type=T.u64, name="pbase"), inpage

    def row(self, base, inpage):
        b = self.b
        return b.add(base, b.mul(inpage, self.key_bytes, mode="wide", type=T.u32),
                     type=T.u64, name="krow")


# -- the split kernel -------------------------------------------------------------------------
def lower_split(s, arch, geom, dtype="bf16", name="decode_split"):
    m = Module(target=arch)
    add_split(m, s, geom, dtype, name)
    return m


def add_split(m, s, geom, dtype="bf16", name="decode_split"):
    s.validate(arch=m.target, D=geom["D"])
    k = m.add_kernel(name, [
        Param("Q", T.u64, ptr(T.b16, align=4)), Param("K", T.u64, ptr(T.b16, align=CHUNK)),
        Param("V", T.u64, ptr(T.b16, align=CHUNK))] + cache_params(geom["page"]) + [
        Param("Opart", T.u64, ptr(T.f32, align=8)), Param("Lpart", T.u64, ptr(T.f32, align=4)),
        Param("scale_log2", T.f32)])
    k.directives.append(f".maxntid {s.threads}, 1, 1")
    _Split(Builder(k), s, geom, dtype).run()
    return k


class _Split(OnlineSoftmax):
    empty_rows = True            # a split may hold no key of a row: its maximum stays -inf
    mask = OnlineSoftmax.limit_mask     # keys up to each row's limit (self.lim, self.lmin)

    def __init__(self, b, s, geom, dtype):
        self.b, self.s, self.g, self.dtype = b, s, geom, dtype
        self.D = geom["D"]
        self.RB = 2 * self.D
        self.cpr = self.RB // CHUNK                # 16-byte chunks per row
        self.pass_rows = WARP // self.cpr          # rows one pass of the warp's copies covers
        self.causal = False

    def run(self):
        b, s, g = self.b, self.s, self.g
        tid = b.special("tid.x")
        warp, lane = b.shr(tid, 5, name="warp"), b.and_(tid, 31, name="lane")
        self.c = b.param("scale_log2")
        smem = b.address_of(b.dynamic_shared("smem", align=SWIZZLE_ALIGN))
        self.qbase = smem
        self.base = b.mad(warp, s.warp_bytes(self.D), b.add(smem, s.q_bytes(self.D)),
                          name="wbase")
        bi, h = _u32_rem(b, b.special("ctaid.y"), g["H_kv"], name="kvh")
        self.bi, self.h = bi, h
        split = b.mad(b.special("ctaid.x"), s.warps, warp, name="split")
        slen = b.ld("global", T.u32, b.element_addr(b.param("seqlens"), bi, 4), cache="nc",
                    name="slen")
        self.S = b.min(slen, g["cap"], type=T.u32, name="len")
        nb = b.shr(b.add(self.S, s.BN - 1), pow2_exponent(s.BN), name="nb")
        per = b.div(b.add(nb, s.splits - 1), s.splits, type=T.u32, name="per")
        self.kb0 = b.mul(split, per, type=T.u32, name="kb0")
        kb1 = b.max(b.min(b.add(self.kb0, per), nb, type=T.u32), self.kb0, type=T.u32)
        nblocks = b.sub(kb1, self.kb0, type=T.u32, name="nblk")
        self.split = split

        self.tq = b.and_(lane, 3, name="tq")
        first = b.mad(b.special("ctaid.z"), MMA_M, b.shr(lane, 2), name="r0")
        self.first, self.rows = first, (first, b.add(first, 8, name="r1"))
        self.row_setup()
        self.loader_setup(lane)
        self.load_q(tid)
        self.fragment_setup(lane)
        self.cache = CacheRows(b, g, bi, h)
        self.zero = b.zeros(4, name="z")
        self.sacc = [b.reg(T.f32, "s") for _ in range(s.BN // 2)]
        self.oacc = [[b.const(0.0, T.f32, name="o") for _ in range(COL_BLOCK // 2)]
                     for _ in range(self.D // COL_BLOCK)]
        self.mx = [b.const(NEG_INF, T.f32, name="m") for _ in range(2)]
        self.lsum = [b.const(0.0, T.f32, name="l") for _ in range(2)]
        cp_async_ring(b, s.stages, nblocks, 0, s.stage_bytes(self.D), self.load_kv,
                      self.block, sync=lambda: _warp_sync(b), guard_load=False)
        self.store_partial()
        b.ret()

    # -- rows ----------------------------------------------------------------------------------
    def row_setup(self):
        """Per row of this lane: valid (row < G·S_q), its query row in Q (clamped), its key
        limit len - S_q + 1 + t (0 for padding rows)."""
        b, g = self.b, self.g
        M = g["G"] * g["S_q"]
        self.valid, self.qrow, self.lim = [], [], []
        for r in self.rows:
            ok = b.setp("lt", r, M, type=T.u32, name="vrow")
            qrow, t = self.q_row(r)
            self.qrow.append(qrow)
            lim = b.max(b.add(b.add(self.S, t, type=T.s32), 1 - g["S_q"], type=T.s32), 0,
                        type=T.s32, name="klim")
            self.lim.append(b.selp(lim, 0, ok, type=T.s32, name="klim"))
            self.valid.append(ok)
        self.lmin = b.min(self.lim[0], self.lim[1], type=T.s32, name="lmin")

    def q_row(self, r):
        """(row of Q, token t) of tile row r (a register: rows past G·S_q clamped)."""
        b, g = self.b, self.g
        rc = b.min(r, g["G"] * g["S_q"] - 1, type=T.u32, name="rc")
        t, j = _u32_rem(b, rc, g["G"], name="j")
        tok = b.mad(self.bi, g["S_q"], t, type=T.u32, name="tok")
        qh = b.mad(self.h, g["G"], j, type=T.u32, name="qh")
        return b.mad(tok, g["G"] * g["H_kv"], qh, type=T.u32, name="qrow"), t

    def load_q(self, tid):
        """The CTA's 16 Q rows into shared memory (swizzled like K and V), by every thread,
        before any warp's loop: one cp.async group waited for, one bar.sync."""
        b, s = self.b, self.s
        chunks = MMA_M * self.cpr
        tile0 = b.shl(b.special("ctaid.z"), pow2_exponent(MMA_M), name="tile0")
        for i in range(-(-chunks // s.threads)):
            idx = b.add(tid, i * s.threads, name="qi")
            with b.if_(b.setp("lt", idx, chunks, type=T.u32)):
                r = b.shr(idx, pow2_exponent(self.cpr), name="qr")
                c = b.and_(idx, self.cpr - 1, name="qc")
                qrow, _ = self.q_row(b.add(tile0, r, name="qt"))
                src = b.add(b.element_addr(b.param("Q"), qrow, self.RB),
                            b.cvt(T.u64, b.shl(c, 4)), type=T.u64, name="qsrc")
                dst = b.add(self.qbase, b.mad(r, self.RB, b.shl(b.xor(c, b.and_(r, 7)), 4)),
                            name="qdst")
                b.cp_async(dst, src, CHUNK)
        b.cp_async_commit()
        b.cp_async_wait(0)
        b.bar_sync(0)

    # -- cp.async loads ------------------------------------------------------------------------
    def loader_setup(self, lane):
        """This lane's chunk and rows of a 16-key tile (rows lrow + i·pass_rows); the shared
        offsets of its rows repeat with the swizzle's period of 8 rows."""
        b = self.b
        chunk = b.and_(lane, self.cpr - 1, name="chunk")
        self.lrow = b.shr(lane, pow2_exponent(self.cpr), name="lrow")
        key_bytes = self.g["H_kv"] * self.RB
        self.coff = b.cvt(T.u64, b.shl(chunk, 4), name="coff")
        self.lane_off = b.cvt(T.u64, b.mad(self.lrow, key_bytes, b.shl(chunk, 4)), name="loff")
        self.period = 8 // self.pass_rows
        self.lds = []
        for i in range(min(self.period, self.s.BN // self.pass_rows)):
            r = b.add(self.lrow, i * self.pass_rows, name="lr")
            swz = b.xor(chunk, b.and_(r, 7), name="lswz")
            self.lds.append(b.mad(r, self.RB, b.shl(swz, 4), name="lds"))

    def load_kv(self, kb, slot, live):
        """Block kb of this split into `slot` where `live`: a whole block (the common case)
        by immediate offsets from one address per tensor; the sequence's last, partial block
        with its rows past the length clamped to the last key (a warp-uniform branch)."""
        b, s = self.b, self.s
        end, partial = b.new_label("loaded"), b.new_label("partial")
        b.branch(end, live, negate=True)
        k0 = b.shl(b.add(self.kb0, kb), pow2_exponent(s.BN), name="k0")
        left = b.sub(self.S, k0, type=T.u32, name="left")            # >= 1 keys
        pbase, in0 = self.cache.page_base(k0)
        blk = self.cache.row(pbase, in0)
        dst = b.add(self.base, slot, name="ldst")
        K, V = b.param("K"), b.param("V")
        step = self.pass_rows * self.cache.key_bytes
        b.branch(partial, b.setp("lt", left, s.BN, type=T.u32))
        srcs = [b.add(t, b.add(blk, self.lane_off, type=T.u64), type=T.u64, name="src")
                for t in (K, V)]
        self.copies(dst, lambda i, t: Addr(srcs[t], i * step))
        b.branch(end)
        b.label(partial)
        last = b.sub(left, 1, type=T.u32, name="lastr")

        def clamped(i, t):
            key = b.min(b.add(self.lrow, i * self.pass_rows), last, type=T.u32, name="kk")
            row = b.add(self.cache.row(blk, key), self.coff, type=T.u64, name="koff")
            return Addr(b.add((K, V)[t], row, type=T.u64, name="src"))
        self.copies(dst, clamped)
        b.label(end)

    def copies(self, dst, src):
        """The 16-byte cp.async copies of one K and V tile: pass i's row from src(i, 0 or 1)."""
        b, s = self.b, self.s
        for i in range(s.BN // self.pass_rows):
            i0, wrap = i % self.period, (i // self.period) * 8 * self.RB
            loc = b.add(dst, self.lds[i0], name="sdst")
            for t in range(2):
                b.cp_async(Addr(loc, t * s.BN * self.RB + wrap), src(i, t), CHUNK)

    # -- fragments -----------------------------------------------------------------------------
    def fragment_setup(self, lane):
        """ldmatrix row addresses (j = lane / 8, r = lane % 8, chunks XORed with r as stored):
        K rows 8·(j>>1) + r, chunk 2·step + (j&1); V (transposed) rows 8·(j&1) + r, chunk
        2·step + (j>>1)."""
        b = self.b
        j, r = b.shr(lane, 3, name="mj"), b.and_(lane, 7, name="mr")
        j0, j1 = b.and_(j, 1, name="j0"), b.shr(j, 1, name="j1")
        rk = b.mul(b.mad(j1, 8, r), self.RB, name="rowk")
        rv = b.mul(b.mad(j0, 8, r), self.RB, name="rowv")
        sk, sv = b.xor(j0, r, name="sk"), b.xor(j1, r, name="sv")
        self.k_off, self.v_off = [], []
        for step in range(self.D // MMA_K):
            self.k_off.append(b.add(rk, b.shl(b.xor(sk, 2 * step), 4), name="ka"))
            self.v_off.append(b.add(rv, b.shl(b.xor(sv, 2 * step), 4), name="va"))

    def block(self, kb, slot):
        """One 16-key block: S = Q·Kᵀ, the online softmax, O += P·V."""
        b, s = self.b, self.s
        kslot = b.add(self.base, slot, name="kslot")
        vslot = b.add(kslot, s.BN * self.RB, name="vslot")
        for kk in range(self.D // MMA_K):
            # Q's A fragment: the rows and chunks of V's transposed read (8·(j&1) + r, ...)
            qf = b.ldmatrix(b.add(self.qbase, self.v_off[kk], name="qaddr"), num=4, name="qf")
            d = b.ldmatrix(b.add(kslot, self.k_off[kk], name="kaddr"), num=4, name="kf")
            for half in range(2):
                acc = self.sacc[4 * half: 4 * half + 4]
                b.mma_sync("m16n8k16", qf, d[2 * half: 2 * half + 2],
                           self.zero if kk == 0 else acc, ab=self.dtype, out=acc)
        n0 = b.shl(b.add(self.kb0, kb), pow2_exponent(s.BN), name="n0")
        alphas, p = self.statistics(n0)
        self.rescale(alphas)
        pk = self.packed(p)
        for dp, voff in enumerate(self.v_off):
            d = b.ldmatrix(b.add(vslot, voff, name="vaddr"), num=4, trans=True, name="vf")
            for half in range(2):
                blk, i = divmod(2 * dp + half, COL_BLOCK // MMA_N)
                acc = self.oacc[blk][4 * i: 4 * i + 4]
                b.mma_sync("m16n8k16", pk, d[2 * half: 2 * half + 2], acc, ab=self.dtype,
                           out=acc)

    def store_partial(self):
        """O / l (0 for a row without keys) and m + log2 l of this split's rows."""
        b, g, D = self.b, self.g, self.D
        col = b.shl(self.tq, 3, name="ocol")                      # bytes: 2 f32 per lane
        for h in range(2):
            total = self.quad_reduce(self.lsum[h], "add")
            inv = b.unary("rcp", total, mods=("approx", "ftz"), name="inv")
            inv = b.selp(inv, 0.0, b.setp("gt", total, 0.0, type=T.f32), type=T.f32)
            lse = b.add(self.mx[h], b.unary("lg2", total, mods=("approx", "ftz")), name="lse")
            with b.if_(self.valid[h]):
                prow = b.mad(self.qrow[h], g["splits"], self.split, type=T.u32, name="prow")
                base = b.add(b.element_addr(b.param("Opart"), prow, 4 * D),
                             b.cvt(T.u64, col), type=T.u64, name="orow")
                for blk_i, blk in enumerate(self.oacc):
                    for cc in range(COL_BLOCK // 8):
                        lo, hi = blk[4 * cc + 2 * h], blk[4 * cc + 2 * h + 1]
                        b.st("global", Addr(base, 4 * (blk_i * COL_BLOCK + 8 * cc)),
                             (b.mul(lo, inv), b.mul(hi, inv)), type=T.f32)
                with b.predicated(b.setp("eq", self.tq, 0)):
                    b.st("global", b.element_addr(b.param("Lpart"), prow, 4), lse)


# -- the combine kernel -----------------------------------------------------------------------
def add_combine(m, geom, dtype="bf16", name="decode_combine"):
    k = m.add_kernel(name, [
        Param("Opart", T.u64, ptr(T.f32, align=16)), Param("Lpart", T.u64, ptr(T.f32, align=4)),
        Param("O", T.u64, ptr(T.b16, align=4)), Param("LSE", T.u64, ptr(T.f32, align=4))])
    k.directives.append(f".maxntid {COMBINE_WARPS * WARP}, 1, 1")
    b = Builder(k)
    D, NS, rows = geom["D"], geom["splits"], geom["rows"]
    per = D // WARP                                           # columns per lane: 2 or 4
    tid = b.special("tid.x")
    lane = b.and_(tid, 31, name="lane")
    row = b.mad(b.special("ctaid.x"), COMBINE_WARPS, b.shr(tid, 5), name="row")
    with b.if_(b.setp("lt", row, rows, type=T.u32)):
        lp = b.element_addr(b.param("Lpart"), b.mul(row, NS, type=T.u32), 4, name="lp")
        mx = b.const(NEG_INF, T.f32, name="mx")
        for i in range(0, NS, WARP):
            sl = b.add(lane, i, name="sl")
            with b.if_(b.setp("lt", sl, NS, type=T.u32)):
                b.max(mx, b.ld("global", T.f32, b.element_addr(lp, sl, 4), name="ls"), out=mx)
        for lane_mask in (16, 8, 4, 2, 1):
            other = b.reg(T.f32, "sh")
            b.emit(Instr("shfl", ("sync", "bfly", "b32"),
                         (other, mx, Imm(lane_mask, T.b32), Imm(0x1F, T.b32),
                          Imm(-1, T.b32))))
            b.max(mx, other, out=mx)
        safe = b.selp(0.0, mx, b.setp("eq", mx, Imm(NEG_INF, T.f32)), type=T.f32, name="safe")
        op = b.add(b.element_addr(b.param("Opart"), b.mul(row, NS, type=T.u32), 4 * D),
                   b.cvt(T.u64, b.shl(lane, pow2_exponent(4 * per))), type=T.u64, name="op")
        tot = b.const(0.0, T.f32, name="tot")
        acc = [b.const(0.0, T.f32, name="acc") for _ in range(per)]
        with b.for_range(0, NS, type=T.u32, name="sp") as sp:
            w = b.unary("ex2", b.sub(b.ld("global", T.f32, b.element_addr(lp, sp, 4),
                                          name="ls"), safe), mods=("approx", "ftz"), name="w")
            b.add(tot, w, out=tot)
            part = b.ld("global", T.f32, b.element_addr(op, b.mul(sp, D, type=T.u32), 4),
                        vec=per, name="po")
            for a, x in zip(acc, part):
                b.fma(w, x, a, out=a)
        inv = b.unary("rcp", tot, mods=("approx", "ftz"), name="inv")
        inv = b.selp(inv, 0.0, b.setp("gt", tot, 0.0, type=T.f32), type=T.f32)
        pack = "bf16x2" if dtype == "bf16" else "f16x2"
        vals = [b.cvt_pack(pack, b.mul(acc[i + 1], inv), b.mul(acc[i], inv))
                for i in range(0, per, 2)]
        orow = b.element_addr(b.param("O"), b.mad(row, D, b.mul(lane, per)), 2, name="orow")
        b.st("global", orow, tuple(vals) if len(vals) > 1 else vals[0], type=T.b32)
        lse = b.mul(b.add(safe, b.unary("lg2", tot, mods=("approx", "ftz"))), LN2,
                    name="lse")
        lse = b.selp(lse, Imm(NEG_INF, T.f32), b.setp("gt", tot, 0.0, type=T.f32), type=T.f32)
        with b.predicated(b.setp("eq", lane, 0)):
            b.st("global", b.element_addr(b.param("LSE"), row, 4), lse)
    b.ret()
    return k


# -- the cache append -------------------------------------------------------------------------
def lower_append(arch, geom, name="kv_append"):
    """K_new / V_new (B x S_q x H_kv x D) into the cache at positions seqlens[b] + t."""
    m = Module(target=arch)
    k = m.add_kernel(name, [
        Param("K", T.u64, ptr(T.b16, align=CHUNK)), Param("V", T.u64, ptr(T.b16, align=CHUNK)),
        Param("K_new", T.u64, ptr(T.b16, align=CHUNK)),
        Param("V_new", T.u64, ptr(T.b16, align=CHUNK))] + cache_params(geom["page"]))
    k.directives.append(f".maxntid {APPEND_THREADS}, 1, 1")
    b = Builder(k)
    D, S_q, H_kv = geom["D"], geom["S_q"], geom["H_kv"]
    cpr = 2 * D // CHUNK
    chunks = geom["B"] * S_q * H_kv * cpr
    idx = b.mad(b.special("ctaid.x"), APPEND_THREADS, b.special("tid.x"), name="idx")
    end = b.new_label("done")
    b.branch(end, b.setp("ge", idx, chunks, type=T.u32))
    row = b.shr(idx, pow2_exponent(cpr), name="row")                # row of K_new
    chunk = b.and_(idx, cpr - 1, name="chunk")
    bi, rest = _u32_rem(b, row, S_q * H_kv, name="rest")
    t, h = _u32_rem(b, rest, H_kv, name="h")
    pos = b.add(b.ld("global", T.u32, b.element_addr(b.param("seqlens"), bi, 4), cache="nc"),
                t, name="pos")
    limit = geom["max_pages"] * geom["page"] if geom["page"] else geom["cap"]
    b.branch(end, b.setp("ge", pos, limit, type=T.u32))
    rows = CacheRows(b, geom, bi, h)
    dst = b.add(rows.row(*rows.page_base(pos)), b.cvt(T.u64, b.shl(chunk, 4)), type=T.u64,
                name="dst")
    src = b.mul(idx, CHUNK, mode="wide", type=T.u32, name="srco")
    for new, cache in (("K_new", "K"), ("V_new", "V")):
        v = b.ld("global", T.u32, b.add(b.param(new), src, type=T.u64), vec=4, cache="nc",
                 name="v")
        b.st("global", b.add(b.param(cache), dst, type=T.u64), v, type=T.u32)
    b.label(end)
    b.ret()
    return m
