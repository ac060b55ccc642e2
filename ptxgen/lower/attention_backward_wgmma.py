"""Lowering of a WgmmaBackwardSchedule to the attention backward on sm_90a: the Delta pre-pass
of lower/attention_backward.py and two warp-specialized wgmma kernels (FlashAttention-3's form,
deterministic: dQ by its own kernel, no atomics).

    attn_bwd_dkdv(Q_map, K_map, V_map, dO_map, LSE, Delta, dK, dV, S, scale_log2, scale)
        grid (ceil(S / BK), B·H_kv): K and V (BK rows) loaded once; Q and dO tiles of q_step
        rows streamed, over every query head of the K/V head's group in a fixed order
        (deterministic GQA sums). Consumer warpgroup cw owns keys k0 + 64cw ..; per step
            Sᵀ  = K·Qᵀ          A = K (shared, K-major), B = Q tile (K-major)
            Pᵀ  = 2^(Sᵀ·scale·log2 e - LSE_col·log2 e)     (masked entries -inf → 0)
            dV += Pᵀ·dO         A = Pᵀ from registers, B = dO tile MN-major (transposed)
            dPᵀ = V·dOᵀ         A = V (shared), B = dO tile (K-major)
            dSᵀ = Pᵀ ∘ (dPᵀ - Delta_col)
            dK += dSᵀ·Q         A = dSᵀ from registers, B = Q tile MN-major
        dK · scale and dV as bf16. Causal: steps start at the query block of the CTA's first
        key; a warpgroup skips the steps before its first key and masks the diagonal ones.
    attn_bwd_dq(Q_map, K_map, V_map, dO_map, LSE, Delta, dQ, S, scale_log2, scale)
        grid (ceil(S / BQ), B·H): Q and dO (BQ rows) loaded once, K and V tiles of kv_step
        keys streamed (causal: up to the CTA's last row); per key block
            S = Q·Kᵀ, dP = dO·Vᵀ (both A and B from shared memory, K-major),
            P = 2^(S·scale·log2 e - LSE·log2 e), dS = P ∘ (dP - Delta),
            dQ += dS·K          A = dS from registers, B = K tile MN-major
        dQ · scale as bf16.

The maps view Q, dO (B·H·S rows) and K, V (B·H_kv·S rows) as row-major x D arrays in boxes of
own or step rows x 64 columns, 128-byte swizzle; shared memory, barriers, the producer's ring
and the wgmma descriptors are the forward's (lower/attention.py). Rows past S read the next
head's rows (zeros past the last): their keys (or query columns) are masked to P = 0, so they
add exactly 0; own rows past S are computed and not stored. LSE and Delta indices are clamped
to S - 1. The sequence hooks (BackwardLowering's, with dkdv_block/dq_block and box here) are
what lower/attention_varlen_backward.py replaces for packed sequences.
"""
from ..ir import Builder, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from ..ir.builder_tensor import tensor_map_param
from ..schedule.attention import COL_BLOCK
from ..schedule.tc_matmul import SWIZZLE_ATOM_BYTES, SWIZZLE_BYTES, WARPGROUP, WGMMA_M
from .attention import WGMMA_K
from .attention_backward import KERNELS, BackwardLowering, backward_module
from .tma_ring import TmaRing

MAPS = ("Q_map", "K_map", "V_map", "dO_map")


def lower(s, arch, shape, causal=False, kv_group=1):
    """The backward's Module for a WgmmaBackwardSchedule: the pre-pass and the two main kernels
    (KERNELS)."""
    D = shape["D"]
    m, tail = backward_module(s, arch, D)
    for name, outs in ((KERNELS[1], ["dK", "dV"]), (KERNELS[2], ["dQ"])):
        kind = name.removeprefix("attn_bwd_")
        k = m.add_kernel(name, [tensor_map_param(n) for n in MAPS] +
                         [Param(n, T.u64, ptr(T.f32, align=4)) for n in ("LSE", "Delta")] +
                         [Param(n, T.u64, ptr(T.b16, align=4)) for n in outs] + tail)
        # setmaxnreg only takes effect under a register cap at entry (.maxnreg)
        k.directives += [f".maxntid {s.threads}, 1, 1", f".maxnreg {s.entry_regs()}"]
        WgmmaBackwardLowering(Builder(k), s, D, causal, kv_group, kind).run()
    return m


class WgmmaBackwardLowering(TmaRing, BackwardLowering):
    """One main kernel: own tiles (own0, own1) = (K, V) or (Q, dO), streamed tiles (st0, st1)
    = (Q, dO) or (K, V). The mask, P, dS, the LSE/Delta loads and the bf16 store are the
    mma.sync lowering's (the wgmma D fragment is its m16n8 layout, 16 rows per warp)."""

    def __init__(self, b, s, D, causal, kv_group, kind):
        self.b, self.s, self.D, self.causal, self.G = b, s, D, causal, kv_group
        self.spec, self.mods, self.kind = None, None, kind
        self.own, self.step = s.kernel_tiles(D)[kind]
        self.hblocks = D // COL_BLOCK
        self.own_tile = self.own * D * 2            # bytes of one own tile
        self.tile = self.step * D * 2               # bytes of one streamed tile

    # -- layout and roles ---------------------------------------------------------------------
    def run(self):
        b = self.b
        tid = b.special("tid.x")
        wg = b.shr(tid, pow2_exponent(WARPGROUP), name="wg")
        self.ring_layout(tid, 2 * self.own_tile, 2 * self.tile, "ring")
        b.bar_sync(0)
        self.bounds()
        self.block()
        self.split_roles(tid, wg)

    def block(self):
        """This CTA's own rows (self.own0, self.own_row0: the head's rows) and its steps
        (self.nsteps; causal dK/dV: from query block self.start)."""
        b, lg = self.b, pow2_exponent(self.step)
        if self.kind == "dkdv":
            self.own0, _, self.own_row0, self.mha_rows = self.dkdv_block()
            nqb = b.shr(b.add(self.S_q, self.step - 1), lg, name="nqb")
            self.start = b.shr(self.unshift0(self.own0), lg, name="qstart") if self.causal \
                else b.const(0, T.u32, name="qstart")
            self.nq = b.sub(nqb, self.start, name="nq")
            self.nsteps = self.nq if self.G == 1 else b.mul(self.nq, self.G, name="nsteps")
            return
        _, self.own0, self.own_row0, self.kv_row0 = self.dq_block()
        keys = self.keys_before(b.add(self.own0, self.own), "keys") if self.causal \
            else self.S_k
        self.nsteps = b.shr(b.add(keys, self.step - 1), lg, name="nkb")

    # the dense square's blocks (BK, BQ = 64·consumers: multiplied, not shifted); the packed
    # sequences' (lower/attention_varlen_backward.py) are the mma.sync kernels'
    def dkdv_block(self):
        b = self.b
        bh = b.special("ctaid.y")
        k0 = b.mul(b.special("ctaid.x"), self.own, name="k0")
        kv_row0 = self.head_rows(bh, "kvrow0")
        return k0, bh, kv_row0, kv_row0

    def dq_block(self):
        b = self.b
        bh = b.special("ctaid.y")
        nq = b.div(b.add(self.S, self.own - 1), self.own, type=T.u32, name="nqb")
        q0 = b.mul(b.sub(b.sub(nq, 1), b.special("ctaid.x")), self.own, name="q0")
        q_row0 = self.head_rows(bh, "qrow0")
        kv_row0 = q_row0 if self.G == 1 else \
            b.mul(b.div(bh, self.G, type=T.u32), self.S, name="kvrow0")
        return nq, q0, q_row0, kv_row0

    def box(self, rows, first, name):
        """(the maps' column of the head's D columns or None for 0, their row) of row `first`
        of `rows` (head_rows)."""
        return None, self.b.add(rows, first, name=name)

    def locate(self, kb):
        """(the streamed tile's head's first row, its first sequence position) of step kb."""
        b, lg = self.b, pow2_exponent(self.step)
        if self.kind == "dq":
            return self.kv_row0, b.shl(kb, lg, name="n0")
        if self.G == 1:
            return self.mha_rows, b.shl(b.add(self.start, kb), lg, name="qs")
        i = b.div(kb, self.nq, type=T.u32, name="gi")               # query head i of the group
        qb = b.add(self.start, b.sub(kb, b.mul(i, self.nq)), name="qb")
        head = b.mad(b.special("ctaid.y"), self.G, i, name="qh")
        return self.head_rows(head, "qrow0"), b.shl(qb, lg, name="qs")

    # -- the ring (lower/tma_ring.py) ---------------------------------------------------------
    def producer(self):
        b = self.b
        own_maps, st_maps = (("K_map", "V_map"), ("Q_map", "dO_map")) if self.kind == "dkdv" \
            else (("Q_map", "dO_map"), ("K_map", "V_map"))
        own_maps = [b.tensor_map_address(p, name="map") for p in own_maps]
        st_maps = [b.tensor_map_address(p, name="map") for p in st_maps]
        b.mbarrier_arrive_expect_tx(self.bars, 2 * self.own_tile)
        col0, row = self.box(self.own_row0, self.own0, "orow")
        for i, mp in enumerate(own_maps):
            for h in range(self.hblocks):
                b.cp_async_bulk_tensor_load(
                    b.add(self.base, i * self.own_tile + h * self.own * SWIZZLE_BYTES), mp,
                    (self.map_col(col0, h), row), self.bars)
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        with b.for_range(0, self.nsteps, type=T.u32, name="kb") as kb:
            head_row0, first = self.locate(kb)
            b.mbarrier_wait_parity(self.empty_bar(stage), b.xor(phase, 1, name="par"))
            full = self.full_bar(stage)
            b.mbarrier_arrive_expect_tx(full, 2 * self.tile)
            dst = b.mad(stage, 2 * self.tile, self.stage0, name="slot")
            col0, srow = self.box(head_row0, first, "srow")
            for i, mp in enumerate(st_maps):
                for h in range(self.hblocks):
                    b.cp_async_bulk_tensor_load(
                        b.add(dst, i * self.tile + h * self.step * SWIZZLE_BYTES), mp,
                        (self.map_col(col0, h), srow), full)
            self.advance(stage, phase)

    # -- consumers ----------------------------------------------------------------------------
    def consumer(self, cw, t):
        b = self.b
        lane = b.and_(t, 31, name="lane")
        self.tq = b.and_(lane, 3, name="tq")
        # this warpgroup's 64 own rows; a lane's fragment rows g and g + 8 of its warp's 16
        self.first = b.mad(cw, WGMMA_M, self.own0, name="first")
        rlo = b.add(self.first, b.mad(b.shr(t, 5), 16, b.shr(lane, 2)), name="rlo")
        self.rows = (rlo, b.add(rlo, 8, name="rhi"))
        self.leader = b.setp("eq", t, 0)
        k_major = dict(lbo=16, sbo=SWIZZLE_ATOM_BYTES, swizzle=SWIZZLE_BYTES)
        own_w = b.mad(cw, WGMMA_M * SWIZZLE_BYTES, self.base, name="ownw")
        self.desc_own = [b.wgmma_descriptor(b.add(own_w, i * self.own_tile), **k_major)
                         for i in range(2)]
        self.desc_st = [b.wgmma_descriptor(b.add(self.stage0, i * self.tile), **k_major)
                        for i in range(2)]
        # a streamed tile read MN-major (rows = k, D contiguous): one 64-column run per wgmma
        self.desc_tr = [b.wgmma_descriptor(b.add(self.stage0, i * self.tile),
                                           lbo=self.step * SWIZZLE_BYTES,
                                           sbo=SWIZZLE_ATOM_BYTES, swizzle=SWIZZLE_BYTES)
                        for i in range(2)]
        self.on = b.setp("ne", b.const(1, T.u32, name="one"), 0)
        self.off = b.setp("eq", b.const(1, T.u32, name="one"), 0)
        self.sacc = [b.reg(T.f32, "s") for _ in range(self.step // 2)]
        self.dpacc = [b.reg(T.f32, "dp") for _ in range(self.step // 2)]
        self.stage, self.phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="ph")
        b.mbarrier_wait_parity(self.bars, 0)                          # own tiles are in
        if self.kind == "dkdv":
            self.consume_dkdv()
        else:
            self.consume_dq()

    def wait_full(self):
        self.b.mbarrier_wait_parity(self.full_bar(self.stage), self.phase)

    def release(self):
        with self.b.predicated(self.leader):
            self.b.mbarrier_arrive(self.empty_bar(self.stage))

    def blocks(self, name):
        """D/64 blocks of 32 zeroed f32 accumulators (a 64 x D wgmma result)."""
        return [[self.b.const(0.0, T.f32, name=name) for _ in range(COL_BLOCK // 2)]
                for _ in range(self.hblocks)]

    def ss(self, acc, own, st, soff):
        """acc = own tile i's 64 rows · streamed tile j (K-major)ᵀ over k = D: D/16 steps of
        m64n{step}k16, both operands from shared memory."""
        b = self.b
        db = b.add(self.desc_st[st], soff, name="dst")
        for h in range(self.hblocks):
            for kk in range(COL_BLOCK // WGMMA_K):
                koff = kk * WGMMA_K * 2
                da = b.add(self.desc_own[own], (h * self.own * SWIZZLE_BYTES + koff) >> 4,
                           name="da")
                dbk = b.add(db, (h * self.step * SWIZZLE_BYTES + koff) >> 4, name="db")
                b.wgmma_mma_async(self.step, acc, da, dbk, ab="bf16",
                                  scale_d=self.off if h == kk == 0 else self.on)

    def rs(self, blocks, pk, st, soff):
        """blocks += X·T: X (64 x step) packed bf16 from registers, T streamed tile st read
        MN-major; per k16 step and 64-column block of D one m64n64k16."""
        b = self.b
        dt = b.add(self.desc_tr[st], soff, name="dtr")
        for j in range(self.step // WGMMA_K):
            for h, blk in enumerate(blocks):
                d = b.add(dt, (h * self.step * SWIZZLE_BYTES + j * WGMMA_K * SWIZZLE_BYTES) >> 4,
                          name="dtj")
                b.wgmma_mma_async(COL_BLOCK, blk, pk[4 * j: 4 * j + 4], d, ab="bf16",
                                  scale_d=self.on, trans_b=1)

    def slot_offset(self):
        """The current slot's byte offset >> 4, as a u64 to add to a descriptor."""
        b = self.b
        return b.cvt(T.u64, b.shr(b.mul(self.stage, 2 * self.tile), 4), name="soff")

    def flat(self, blocks):
        """A 64 x D accumulator's registers in the m16n8 order BackwardLowering.store takes."""
        return [r for blk in blocks for r in blk]

    # -- dK/dV --------------------------------------------------------------------------------
    def consume_dkdv(self):
        b, step = self.b, self.step
        krows = self.rows
        k0w = self.first
        dk, dv = self.blocks("dk"), self.blocks("dv")
        with b.for_range(0, self.nsteps, type=T.u32, name="kb") as kb:
            q_row0, q0 = self.locate(kb)
            self.wait_full()
            skip = b.new_label("skip")
            qend = b.add(q0, step, name="qend")
            if self.causal:                       # every query of the step before our keys
                b.branch(skip, b.setp("le", self.shift(qend), k0w, type=self.ctype))
            soff = self.slot_offset()
            col0 = b.add(q0, b.shl(self.tq, 1), name="col0")

            def per_column(param):      # element i is column 8(i / 4) + i % 2 of the step
                x = [self.stat(param, q_row0, b.add(col0, 8 * cc + e))
                     for cc in range(step // 8) for e in range(2)]
                return lambda i: x[2 * (i // 4) + i % 2]
            b.wgmma_fence()
            self.ss(self.sacc, 0, 0, soff)                            # Sᵀ = K·Qᵀ
            b.wgmma_commit_group()
            nl = per_column("LSE")                                    # loads under the wgmma
            b.wgmma_wait_group(0)
            need = b.setp("gt", qend, self.S_q, type=T.u32)
            if self.causal:
                need = b.or_(need, b.setp("lt", self.shift(q0), b.add(k0w, WGMMA_M - 1),
                                          type=self.ctype))
            self.mask(krows, col0, need, keys_are_rows=True)
            p = self.probabilities(nl)
            b.wgmma_fence()
            self.rs(dv, self.packed(p), 1, soff)                      # dV += Pᵀ·dO
            self.ss(self.dpacc, 1, 1, soff)                           # dPᵀ = V·dOᵀ
            b.wgmma_commit_group()
            delta = per_column("Delta")
            b.wgmma_wait_group(0)
            ds = self.dscores(p, delta)
            b.wgmma_fence()
            self.rs(dk, self.packed(ds), 0, soff)                     # dK += dSᵀ·Q
            b.wgmma_commit_group()
            b.wgmma_wait_group(0)
            b.label(skip)
            self.release()
            self.advance(self.stage, self.phase)
        self.store(self.flat(dk), krows, self.own_row0, "dK", b.param("scale"))
        self.store(self.flat(dv), krows, self.own_row0, "dV")

    # -- dQ -----------------------------------------------------------------------------------
    def consume_dq(self):
        b, step = self.b, self.step
        rows, first = self.rows, self.first
        stats = [[self.stat(n, self.own_row0, r) for n in ("LSE", "Delta")] for r in rows]
        dq = self.blocks("dq")
        mine = self.nsteps
        if self.causal:                           # key blocks up to this warpgroup's last row
            mine = b.shr(b.add(self.keys_before(b.add(first, WGMMA_M)), step - 1),
                         pow2_exponent(step), name="mine")
        with b.for_range(0, mine, type=T.u32, name="kb") as kb:
            _, n0 = self.locate(kb)
            self.wait_full()
            soff = self.slot_offset()
            b.wgmma_fence()
            self.ss(self.sacc, 0, 0, soff)                            # S = Q·Kᵀ
            self.ss(self.dpacc, 1, 1, soff)                           # dP = dO·Vᵀ
            b.wgmma_commit_group()
            b.wgmma_wait_group(0)
            need = b.setp("gt", b.add(n0, step), self.S_k, type=T.u32)
            if self.causal:
                need = b.or_(need, b.setp("gt", b.add(n0, step - 1), self.shift(first),
                                          type=self.ctype))
            self.mask(rows, b.add(n0, b.shl(self.tq, 1), name="col0"), need,
                      keys_are_rows=False)
            p = self.probabilities(lambda i: stats[(i // 2) % 2][0])
            ds = self.dscores(p, lambda i: stats[(i // 2) % 2][1])
            b.wgmma_fence()
            self.rs(dq, self.packed(ds), 0, soff)                     # dQ += dS·K
            b.wgmma_commit_group()
            b.wgmma_wait_group(0)
            self.release()
            self.advance(self.stage, self.phase)
        # the CTA's blocks past this warpgroup's rows (causal): hand their slots back unread
        with b.for_range(mine, self.nsteps, type=T.u32, name="kb"):
            self.wait_full()
            self.release()
            self.advance(self.stage, self.phase)
        self.store(self.flat(dq), rows, self.own_row0, "dQ", b.param("scale"))
