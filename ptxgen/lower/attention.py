"""Lowering of an AttentionSchedule to an sm_90a fused attention forward kernel.

    attention(Q_map, K_map, V_map, O, LSE, S, scale_log2)
        Q_map, K_map, V_map: tensor maps of Q, K, V viewed as (B·H·S) x D row-major arrays,
            boxes of BM (Q) or BN (K, V) rows x 64 columns, 128-byte swizzle
        O:     B·H·S x D, the input type;  LSE: B·H·S f32, the natural-log logsumexp per row
        S:     sequence length;  scale_log2: the softmax scale times log2(e)

Grid (ceil(S / BM), B·H): CTA (x, y) takes query block ceil(S/BM)-1-x of head y (the longest
causal rows first, so the short ones fill the tail). Shared memory: Q as D/64 column blocks of
BM x 128 bytes, then `stages` slots of [K tile | V tile], each D/64 column blocks of BN x 128
bytes, all 1024-byte aligned for the swizzle, then the Q barrier and a full/empty pair per slot.

Producer (one thread): Q once, then per key block K and V into the next slot (expect_tx of the
slot's bytes on its full barrier). Consumer warpgroup cw (rows q0 + 64cw ..): per key block,
    S  = Q·Kᵀ            wgmma m64nBNk16, A = Q and B = K (K-major) from shared memory
    S' = S·scale·log2 e, masked (keys >= S; causal: keys > row) to -inf where the block needs it
    m' = max(m, rowmax S') (the four lanes of a row combine by shuffles);  α = 2^(m - m')
    P  = 2^(S' - m'),  l = α·l + rowsum P (per-lane partial sums; combined once at the end)
    O  = α·O + P·V        wgmma m64n64k16 per 64 columns of D, A = P from registers (the S
                          accumulator's layout is the A fragment's: registers 8j..8j+7 of S are
                          k-step j's A elements), B = V (MN-major, transposed read)
then O/l in the input type and LSE = (m + log2 l)·ln 2. Causal: key blocks past the CTA's last
row are not loaded; a consumer computes the blocks up to its own last row and then releases the
CTA's remaining slots unread. With schedule.overlap, S of block n and P·V of block n-1 are issued
together (see WgmmaForwardLowering.overlapped).

Persistent (schedule.persistent; a `tile_plan` pointer follows scale_log2): a 1-D grid of at
most one CTA per SM, CTA x walking the lists x, x + nctaid.x, … of the host's plan of the
nq·B·H (query block, head) tiles (ops/tile_plan.py: head-major, longest causal block first,
dealt by their key blocks as the hardware deals one-tile CTAs; see tile_loop). The ring's stage
and phase run on across tiles; the consumers hand Q's buffer back on one more barrier once
their last S = Q·Kᵀ has completed, so the producer loads the next tile's Q and first K/V
slots while they finish P·V, normalise and store O.

Keys and rows past S: the 2-D maps read the next head's rows there (zeros past the last head):
those keys are masked to -inf, so their P is exactly 0 and V's rows there add 0·v; rows past S
are computed and not stored.
"""
import contextlib

from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..ir.builder_tensor import tensor_map_param
from ..schedule.attention import COL_BLOCK
from .online_softmax import NEG_INF, OnlineSoftmax
from .tma_ring import TmaRing
from ..schedule.tc_matmul import SWIZZLE_ATOM_BYTES, SWIZZLE_BYTES, WARPGROUP, WGMMA_M

WGMMA_K = 16


def lower(s, arch, shape, dtype="bf16", causal=False, name="attention", mods=None,
          kv_group=1):
    D = shape["D"]
    s.validate(arch, dtype, D)
    m = Module(target=arch)
    k = add_forward_kernel(m, name, s, [Param("S", T.u32), Param("scale_log2", T.f32)] +
                           ([Param("tile_plan", T.u64, ptr(T.u32, align=4))]
                            if s.persistent else []) +
                           (mods.params() if mods else []))
    WgmmaForwardLowering(Builder(k), s, dtype, D, causal, mods, kv_group).run()
    return m


def add_forward_kernel(m, name, s, tail):
    """The forward's kernel in module m: the Q, K, V maps, O and LSE, then `tail`'s parameters;
    setmaxnreg only takes effect under a register cap at entry (.maxnreg)."""
    k = m.add_kernel(name, [
        tensor_map_param("Q_map"), tensor_map_param("K_map"), tensor_map_param("V_map"),
        Param("O", T.u64, ptr(T.b16, align=4)), Param("LSE", T.u64, ptr(T.f32, align=4))] +
        tail)
    k.directives += [f".maxntid {s.threads}, 1, 1", f".maxnreg {s.entry_regs()}"]
    return k


class WgmmaForwardLowering(TmaRing, OnlineSoftmax):
    def __init__(self, b, s, dtype, D, causal, mods=None, kv_group=1):
        self.b, self.s, self.dtype, self.D, self.causal = b, s, dtype, D, causal
        self.kv_group = kv_group            # query heads per K/V head (grouped-query attention)
        self.mod_spec, self.blist = mods, None
        self.hblocks = D // COL_BLOCK

    # -- layout and roles -------------------------------------------------------------------
    def run(self):
        b, s = self.b, self.s
        tid = b.special("tid.x")
        wg = b.shr(tid, pow2_exponent(WARPGROUP), name="wg")
        self.ring_layout(tid, s.q_bytes(self.D), s.stage_bytes(self.D), "kv",    # own tile: Q
                         own_release=s.persistent)
        b.bar_sync(0)
        if not s.persistent:
            self.tile_setup(self.sequence())
        else:       # loaded here: both roles' tile loops read them (param() loads once)
            self.S = b.param("S")
            for name in ("tile_plan",) + (("BM_counts", "BM_lists") if self.block_lists() else ()):
                b.param(name)
        self.split_roles(tid, wg)

    def block_lists(self):
        return self.mod_spec is not None and bool(self.mod_spec.block_lists)

    def tile_setup(self, qblk):
        """self.nkb (and with a block mask self.blist): the key blocks of query block qblk."""
        b, s = self.b, self.s
        keys = self.cta_keys()
        if self.block_lists():
            self.block_list_setup(qblk)
        else:
            self.nkb = b.div(b.add(keys, s.BN - 1), s.BN, type=T.u32, name="nkb")

    # -- a persistent CTA's tiles --------------------------------------------------------------
    bh = None       # persistent: the tile's batch·H + head register (else ctaid.y is)

    @contextlib.contextmanager
    def tile_loop(self):
        """This CTA's tiles: lists x, x + nctaid.x, … of the host's tile plan (ops/tile_plan.py:
        [n, start_0 … start_n, tiles…], the tiles dealt to n lists by their key blocks, as
        the hardware deals one-tile CTAs). Tile t is head t / nq's query block
        nq - 1 - t % nq. The body runs with the tile's sequence and key blocks set."""
        b, s = self.b, self.s
        plan = b.param("tile_plan")
        nq = b.div(b.add(self.S, s.BM - 1), s.BM, type=T.u32, name="nq")
        lists = b.ld("global", T.u32, plan, cache="nc", name="lists")
        with b.for_range(b.special("ctaid.x"), lists, b.special("nctaid.x"), type=T.u32,
                         name="list") as x:
            start = b.element_addr(plan, b.add(x, 1, type=T.u32), 4, name="start")
            first = b.ld("global", T.u32, start, cache="nc", name="first")
            end = b.ld("global", T.u32, Addr(start, 4), cache="nc", name="end")
            with b.for_range(first, end, type=T.u32, name="i") as i:
                tile = b.ld("global", T.u32, b.element_addr(plan, i, 4), cache="nc",
                            name="tile")
                self.bh = b.div(tile, nq, type=T.u32, name="bh")
                qblk = b.sub(b.sub(nq, 1), b.sub(tile, b.mul(self.bh, nq, type=T.u32)),
                             name="qblk")
                self.q0 = b.mul(qblk, s.BM, name="q0")
                self.row0 = b.mul(self.bh, self.S, name="row0")
                self.kv_row0 = self.row0 if self.kv_group == 1 else b.mul(
                    b.div(self.bh, self.kv_group, type=T.u32), self.S, name="kvrow0")
                self.tile_setup(qblk)
                yield

    # -- the sequence a CTA works on (lower/attention_varlen.py replaces these) ----------------
    q_col0 = kv_col0 = None     # a register added to the maps' column coordinate (packed rows)

    def sequence(self):
        """self.S (the query rows' bound), q0, row0 (the head's first row in the maps and O),
        kv_row0; returns the query block's index."""
        b, s = self.b, self.s
        self.S = b.param("S")
        # BM = 64·consumers need not be a power of two (192): divide and multiply
        nq = b.div(b.add(self.S, s.BM - 1), s.BM, type=T.u32, name="nq")
        qblk = b.sub(b.sub(nq, 1), b.special("ctaid.x"), name="qblk")
        self.q0 = b.mul(qblk, s.BM, name="q0")
        self.row0 = b.mul(b.special("ctaid.y"), self.S, name="row0")    # head's first row
        # K/V head of this (batch, query head): (b·H + h) / g = b·H/g + h/g for H a multiple of g
        self.kv_row0 = self.row0 if self.kv_group == 1 else b.mul(
            b.div(b.special("ctaid.y"), self.kv_group, type=T.u32), self.S, name="kvrow0")
        return qblk

    def cta_keys(self):
        """The keys this CTA loads: all of them, or (causal) up to its last row."""
        if self.causal:
            return self.b.min(self.S, self.b.add(self.q0, self.s.BM), name="keys")
        return self.S

    def own_keys(self, first):
        """Causal: the keys a warpgroup whose rows start at `first` computes."""
        return self.b.min(self.S, self.b.add(first, WGMMA_M), type=T.u32, name="ownkeys")

    def rows_known(self):
        """Called once the consumer's rows are set (a per-row mask's limits go here)."""

    def slot(self, stage):
        return self.b.mad(stage, self.s.stage_bytes(self.D), self.stage0, name="slot")


    # -- producer -----------------------------------------------------------------------------
    def producer(self):
        """Q, then the key blocks' K and V through the ring; persistent: per tile, once the
        consumers have handed Q's buffer back."""
        b = self.b
        maps = tuple(self.b.tensor_map_address(p, name="map")
                     for p in ("Q_map", "K_map", "V_map"))
        if not self.s.persistent:
            self.load_q(maps[0])
            stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
            self.load_kv(maps, stage, phase)
            return
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        qph = b.const(0, T.u32, name="qph")
        with self.tile_loop():
            b.mbarrier_wait_parity(self.own_empty, b.xor(qph, 1, name="par"))
            self.load_q(maps[0])
            self.load_kv(maps, stage, phase)
            b.xor(qph, 1, out=qph)

    def load_q(self, qmap):
        b, s = self.b, self.s
        b.mbarrier_arrive_expect_tx(self.bars, s.q_bytes(self.D))
        qrow = b.add(self.row0, self.q0, name="qrow")
        for h in range(self.hblocks):
            b.cp_async_bulk_tensor_load(b.add(self.base, h * s.BM * SWIZZLE_BYTES), qmap,
                                        (self.map_col(self.q_col0, h), qrow), self.bars)

    def load_kv(self, maps, stage, phase):
        b, s, D = self.b, self.s, self.D
        _, kmap, vmap = maps
        tile = s.kv_tile_bytes(D)
        with b.for_range(0, self.nkb, type=T.u32, name="kb") as kb:
            b.mbarrier_wait_parity(self.empty_bar(stage), b.xor(phase, 1, name="par"))
            full = self.full_bar(stage)
            b.mbarrier_arrive_expect_tx(full, s.stage_bytes(D))
            dst = self.slot(stage)
            krow = b.mad(kb if self.blist is None else self.list_entry(kb), s.BN, self.kv_row0,
                         name="krow")
            for h in range(self.hblocks):
                off = h * s.BN * SWIZZLE_BYTES
                col = self.map_col(self.kv_col0, h)
                b.cp_async_bulk_tensor_load(b.add(dst, off), kmap, (col, krow), full)
                b.cp_async_bulk_tensor_load(b.add(dst, tile + off), vmap, (col, krow), full)
            self.advance(stage, phase)

    # -- consumers ----------------------------------------------------------------------------
    def consumer(self, cw, t):
        b, s, D = self.b, self.s, self.D
        lane = b.and_(t, 31, name="lane")
        self.tq = b.and_(lane, 3, name="tq")
        if not s.persistent:
            self.consumer_rows(cw, t, lane)
        leader = b.setp("eq", t, 0)
        c = b.param("scale_log2")
        k_major = dict(lbo=16, sbo=SWIZZLE_ATOM_BYTES, swizzle=SWIZZLE_BYTES)
        desc_q = b.wgmma_descriptor(b.mad(cw, WGMMA_M * SWIZZLE_BYTES, self.base), **k_major)
        desc_k = b.wgmma_descriptor(self.stage0, **k_major)
        # V read MN-major (rows of keys, D contiguous): 8-key groups SBO apart; one 64-column
        # run per wgmma (N = 64), so the leading offset is the column block's size
        desc_v = b.wgmma_descriptor(b.add(self.stage0, s.kv_tile_bytes(D)),
                                    lbo=s.BN * SWIZZLE_BYTES, sbo=SWIZZLE_ATOM_BYTES,
                                    swizzle=SWIZZLE_BYTES)
        on = b.setp("ne", b.const(1, T.u32, name="one"), 0)
        off = b.setp("eq", b.const(1, T.u32, name="one"), 0)
        self.leader, self.c, self.on, self.off = leader, c, on, off
        self.desc_q, self.desc_k, self.desc_v = desc_q, desc_k, desc_v
        if not s.persistent:
            self.consume_tile(0)
            return
        self.stage, self.phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="ph")
        qph = b.const(0, T.u32, name="qph")
        with self.tile_loop():
            self.consumer_rows(cw, t, lane)
            self.consume_tile(qph)
            b.xor(qph, 1, out=qph)

    def consumer_rows(self, cw, t, lane):
        """self.first and self.rows: this thread's fragment rows, 16 per warp, g and g + 8 (wgmma
        D layout)."""
        b = self.b
        self.first = b.mad(cw, WGMMA_M, self.q0, name="qfirst")
        row_lo = b.add(self.first, b.mad(b.shr(t, 5), 16, b.shr(lane, 2)), name="rlo")
        self.rows = (row_lo, b.add(row_lo, 8, name="rhi"))

    def consume_tile(self, q_parity):
        """One query block: the key loop once Q is in (its barrier's phase q_parity), then the
        epilogue; persistent, Q's buffer is handed back once the last S = Q·Kᵀ has run."""
        b, s = self.b, self.s
        nacc = s.BN // 2
        sacc = [b.reg(T.f32, "s") for _ in range(nacc)]
        oacc = [[b.const(0.0, T.f32, name="o") for _ in range(COL_BLOCK // 2)]
                for _ in range(self.hblocks)]
        mx = [b.const(NEG_INF, T.f32, name="m") for _ in range(2)]
        lsum = [b.const(0.0, T.f32, name="l") for _ in range(2)]
        b.mbarrier_wait_parity(self.bars, q_parity)                   # Q is in
        if not s.persistent:
            self.stage, self.phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="ph")
        self.sacc, self.oacc, self.mx, self.lsum = sacc, oacc, mx, lsum
        self.rows_known()
        if self.mod_spec is not None:
            self.mod_setup(b.special("ctaid.y") if self.bh is None else self.bh)
        # key blocks this warpgroup computes: causal, up to its own last row
        own = self.nkb
        if self.causal:
            own = b.div(b.add(self.own_keys(self.first), s.BN - 1), s.BN, type=T.u32,
                        name="own")
        if s.overlap and (self.blist is not None or self.empty_rows):
            # a query block may have no key block (a block list; a sequence without keys)
            with b.if_(b.setp("ne", own, 0, type=T.u32)):
                self.overlapped(own)
        elif s.overlap:
            self.overlapped(own)
        else:
            for lo, hi in self.key_loops(0, own):
                with b.for_range(lo, hi, type=T.u32, name="kb") as kb:
                    self.serial_step(kb)
            self.unmasked = False
        if s.persistent:                    # every wgmma reading Q has completed
            with b.predicated(self.leader):
                b.mbarrier_arrive(self.own_empty)
        # the CTA's blocks past this warpgroup's rows (causal): hand their slots back unread
        with b.for_range(own, self.nkb, type=T.u32, name="kb") as kb:
            self.wait_full()
            self.release(self.stage)
            self.advance(self.stage, self.phase)
        self.epilogue(oacc, mx, lsum, self.rows, self.tq)

    def key_loops(self, start, own):
        """The key loops over blocks start .. own-1, as (lo, hi): one, or with schedule.peel
        first the blocks that need no built-in mask, lowered without its code (ptxas would
        predicate its selects into every step), then the rest. Sets self.unmasked for the
        loop being lowered. Without a block list those blocks are the ones every row of the
        CTA sees whole (keys < S; causal: keys <= its first row: a CTA-uniform trip count
        keeps ptxas's descriptor arithmetic on the uniform datapath); a block list ascends, so
        only its last block may hold keys >= S."""
        b, s = self.b, self.s
        if s.full_apart and self.blist is not None and not self.causal and \
                self.mod_spec.mask is not None:
            # the lists hold partial blocks first (ops/attention_mods.py): those with the mask,
            # then the full ones (none past S) with no mask code at all
            parts = b.max(b.min(self.nparts, own, type=T.u32), start, type=T.u32, name="parts")
            self.all_partial = True
            yield start, parts
            self.all_partial = False
            self.unmasked = self.mask_free = True
            yield parts, own
            self.mask_free = False
            return
        if not s.peel or getattr(self.mask, "__func__", None) is not OnlineSoftmax.mask or \
                (self.blist is not None and self.causal):
            yield start, own
            return
        if self.blist is None:
            limit = b.min(self.S, b.add(self.q0, 1), type=T.u32, name="seen") if self.causal \
                else self.S
            whole = b.div(limit, s.BN, type=T.u32)
        else:
            whole = b.sub(b.max(own, 1, type=T.u32), 1, type=T.u32)
        # not clamped to own: never above it but for an empty range
        whole = b.max(whole, start, type=T.u32, name="whole")
        self.unmasked = True
        yield start, whole
        self.unmasked = False
        yield whole, own

    def serial_step(self, kb):
        """Key block kb without the overlap: S, the softmax, then P·V, each waited for."""
        b, s = self.b, self.s
        n0 = self.key_start(kb)
        self.wait_full()
        soff = self.slot_offset(self.stage)
        b.wgmma_fence()
        self.scores(soff)
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
        alphas, p = self.statistics(b.mul(kb, s.BN, name="n0") if n0 is None else n0)
        self.rescale(alphas)
        pk = self.packed(p)
        b.wgmma_fence()
        self.pv(pk, soff)
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
        self.release(self.stage)
        self.advance(self.stage, self.phase)

    def overlapped(self, own):
        """FlashAttention-3's intra-warpgroup overlap: S(n) = Q·K(n) and O += P(n-1)·V(n-1) are
        issued together; the softmax exponentials of block n run while P·V of block n-1 is on
        the tensor cores (wait_group 1: S(n) is done, P·V may still run); O is rescaled and
        P(n) packed once P·V(n-1) has finished (wait_group 0), and slot n-1 released then."""
        b, s = self.b, self.s
        n0 = self.key_start(0)
        self.wait_full()
        prev = b.mov(self.stage, name="prev")
        b.wgmma_fence()
        self.scores(self.slot_offset(self.stage))
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
        alphas, p = self.statistics(b.const(0, T.u32, name="n0") if n0 is None else n0)
        self.rescale(alphas)
        pk = [b.reg(T.b32, "pk") for _ in range(s.BN // 4)]
        for r, v in zip(pk, self.packed(p)):
            b.mov(v, out=r)
        self.advance(self.stage, self.phase)
        for lo, hi in self.key_loops(1, own):
            with b.for_range(lo, hi, type=T.u32, name="kb") as kb:
                self.overlapped_step(kb, pk, prev)
        self.unmasked = False
        b.wgmma_fence()
        self.pv(pk, self.slot_offset(prev))
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
        self.release(prev)

    def overlapped_step(self, kb, pk, prev):
        """Key block kb of the overlapped loop: S(kb) with P(kb-1)·V(kb-1), then the softmax."""
        b, s = self.b, self.s
        n0 = self.key_start(kb)
        self.wait_full()
        b.wgmma_fence()
        self.scores(self.slot_offset(self.stage))
        b.wgmma_commit_group()
        self.pv(pk, self.slot_offset(prev))
        b.wgmma_commit_group()
        b.wgmma_wait_group(1)                                         # S(n) is in
        alphas, p = self.statistics(b.mul(kb, s.BN, name="n0") if n0 is None else n0)
        b.wgmma_wait_group(0)                                         # P(n-1)·V(n-1) too
        self.release(prev)
        self.rescale(alphas)
        for r, v in zip(pk, self.packed(p)):
            b.mov(v, out=r)
        b.mov(self.stage, out=prev)
        self.advance(self.stage, self.phase)

    def wait_full(self):
        self.b.mbarrier_wait_parity(self.full_bar(self.stage), self.phase)

    def release(self, stage):
        with self.b.predicated(self.leader):
            self.b.mbarrier_arrive(self.empty_bar(stage))

    def slot_offset(self, stage):
        """A slot's byte offset >> 4, as a u64 to add to a descriptor."""
        b = self.b
        return b.cvt(T.u64, b.shr(b.mul(stage, self.s.stage_bytes(self.D)), 4), name="soff")

    def scores(self, soff):
        """Issue S = Q·Kᵀ for the key block in slot soff: D/16 k-steps of m64nBNk16."""
        b, s = self.b, self.s
        desc_k = b.add(self.desc_k, soff, name="dk")
        for h in range(self.hblocks):
            for kk in range(COL_BLOCK // WGMMA_K):
                koff = kk * WGMMA_K * 2
                da = b.add(self.desc_q, (h * s.BM * SWIZZLE_BYTES + koff) >> 4, name="dq")
                db = b.add(desc_k, (h * s.BN * SWIZZLE_BYTES + koff) >> 4, name="dkk")
                b.wgmma_mma_async(s.BN, self.sacc, da, db, ab=self.dtype,
                                  scale_d=self.off if h == kk == 0 else self.on)

    def pv(self, pk, soff):
        """Issue O += P·V for the key block in slot soff: per k16 step (16 keys) and 64-column
        block of D one m64n64k16 wgmma, A = P from registers, V transposed from shared memory."""
        b, s = self.b, self.s
        desc_v = b.add(self.desc_v, soff, name="dv")
        for j in range(s.BN // WGMMA_K):
            for h, blk in enumerate(self.oacc):
                dv = b.add(desc_v, (h * s.BN * SWIZZLE_BYTES + j * WGMMA_K * SWIZZLE_BYTES) >> 4,
                           name="dvj")
                b.wgmma_mma_async(COL_BLOCK, blk, pk[4 * j: 4 * j + 4], dv, ab=self.dtype,
                                  scale_d=self.on, trans_b=1)
