"""Lowering of an MmaAttentionSchedule to an sm_80-style fused attention forward
(FlashAttention-2's form: each warp owns 16 query rows; mma.sync, ldmatrix, cp.async).

    attention(Q, K, V, O, LSE, S, scale_log2)
        Q, K, V, O: (B·H·S) x D row-major, bf16 bits or f16;  LSE: B·H·S f32 (natural log)
        S: sequence length;  scale_log2: the softmax scale times log2(e)

Grid (ceil(S / BM), B·H): CTA (x, y) takes query block ceil(S/BM)-1-x of head y (the longest
causal rows first). Shared memory: Q (BM rows), then `stages` slots of [K tile | V tile] (BN rows
each); every row is D·2 bytes whose 16-byte chunk c is stored at c ^ (row & 7), so the 8 rows one
ldmatrix reads, and the 8 chunks 8 threads copy, fall in 8 different bank groups.

Loads (cp.async.cg, 16 bytes): thread t copies chunk t % (D/8) of rows t / (D/8) + i·pass. Rows
past S are clamped to the head's last row: those keys are masked to -inf (their P is exactly
0, and V's clamped rows add 0·v), those query rows are computed and not stored. Q is its own
commit group, then one group per key block: the prologue issues blocks 0 .. stages-2; block kb
waits for all but stages-2 groups, bar.syncs (every warp is done with block kb-1, whose slot is
refilled now), issues block kb+stages-1 and computes block kb.

Per warp and key block (PTX ISA 9.0, 9.7.14.5.8 fragments, 9.7.14.4 ldmatrix):
    S  = Q·Kᵀ    D/16 k-steps x BN/8 m16n8k16; A = Q fragments held in registers since the
                 start (ldmatrix.x4 once), B from K rows (keys) read without transposing: Kᵀ
                 is the "col" B layout, as Bt in the GEMM (mma_matmul.py)
    online softmax on the S fragment (online_softmax.py: masks, row max and sum over the
                 quad by shfl.bfly, ex2.approx with the log2 e scaling, α-rescaling of O)
    O += P·V     BN/16 k-steps x D/8 m16n8k16; A = P packed to 16-bit pairs straight from S's
                 accumulators (registers 8j..8j+7 of S are k-step j's A fragment), B = V by
                 ldmatrix.x4.trans (V rows are keys: transposed into the "col" layout)
Causal: the CTA loads key blocks up to its last row; a warp computes those up to its own last
row (a warp-uniform branch; the loads and bar.syncs stay CTA-wide).
"""
from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..schedule.attention import COL_BLOCK
from .online_softmax import NEG_INF, OnlineSoftmax
from .cp_async_ring import cp_async_ring
from ..schedule.mma_matmul import CHUNK, MMA_M, MMA_N

MMA_K = 16
SWIZZLE_ALIGN = 128      # shared rows start on bank 0: the XOR swizzle's bank groups hold


def lower(s, arch, shape, dtype="bf16", causal=False, name="attention", mods=None,
          kv_group=1):
    D = shape["D"]
    s.validate(arch, dtype, D)
    m = Module(target=arch)
    k = m.add_kernel(name, array_params() + [Param("S", T.u32), Param("scale_log2", T.f32)]
                     + (mods.params() if mods else []))
    k.directives.append(f".maxntid {s.threads}, 1, 1")
    ForwardLowering(Builder(k), s, dtype, D, causal, mods, kv_group).run()
    return m


def array_params():
    """The kernel's first parameters: Q, K, V, O (16-bit elements) and LSE (f32)."""
    return [Param("Q", T.u64, ptr(T.b16, align=CHUNK)), Param("K", T.u64, ptr(T.b16, align=CHUNK)),
            Param("V", T.u64, ptr(T.b16, align=CHUNK)), Param("O", T.u64, ptr(T.b16, align=4)),
            Param("LSE", T.u64, ptr(T.f32, align=4))]


class ForwardLowering(OnlineSoftmax):
    def __init__(self, b, s, dtype, D, causal, mods=None, kv_group=1):
        self.b, self.s, self.dtype, self.D, self.causal = b, s, dtype, D, causal
        self.kv_group = kv_group            # query heads per K/V head (grouped-query attention)
        self.mod_spec, self.blist = mods, None
        self.RB = s.row_bytes(D)                    # bytes of one Q/K/V row
        self.cpr = self.RB // CHUNK                 # 16-byte chunks per row
        self.pass_rows = s.pass_rows(D)

    def sequence(self):
        """This CTA's sequence: self.S (its query rows), self.keys (its keys), self.row0 (its
        first row in O / LSE), self.q_head, self.kv_head (the first Q and K/V row, in units of
        RB), self.q_stride, self.kv_stride (bytes between rows); returns q0, the first query
        row. Here the B·H heads of S rows each, one after the other."""
        b, s = self.b, self.s
        self.S, self.c = b.param("S"), b.param("scale_log2")
        self.keys = self.S
        self.base = b.address_of(b.dynamic_shared("smem", align=SWIZZLE_ALIGN))
        nq = b.shr(b.add(self.S, s.BM - 1), pow2_exponent(s.BM), name="nq")
        q0 = b.shl(b.sub(b.sub(nq, 1), b.special("ctaid.x"), name="qblk"), pow2_exponent(s.BM),
                   name="q0")
        self.row0 = b.mul(b.special("ctaid.y"), self.S, name="row0")     # head's first row
        # K/V head of this (batch, query head): (b·H + h) / g = b·H/g + h/g for H a multiple of g
        self.kv_row0 = self.row0 if self.kv_group == 1 else b.mul(
            b.div(b.special("ctaid.y"), self.kv_group, type=T.u32), self.S, name="kvrow0")
        self.q_head, self.kv_head = self.row0, self.kv_row0
        self.q_stride = self.kv_stride = self.RB
        return q0

    def key_limit(self, end, name):
        """The keys the causal rows before query row `end` see."""
        return self.b.min(self.S, end, name=name)

    def row_limits(self):
        """Per-row key limits for a mask() of the lowering's own (none here)."""

    def run(self):
        b, s = self.b, self.s
        tid = b.special("tid.x")
        warp, lane = b.shr(tid, 5, name="warp"), b.and_(tid, 31, name="lane")
        q0 = self.sequence()
        keys = self.key_limit(b.add(q0, s.BM), "keys") if self.causal else self.keys
        if self.mod_spec is not None and self.mod_spec.block_lists:
            self.block_list_setup(b.shr(q0, pow2_exponent(s.BM), name="qblk"))
            nkb = self.nkb
        else:
            nkb = b.shr(b.add(keys, s.BN - 1), pow2_exponent(s.BN), name="nkb")
        self.first = b.mad(warp, MMA_M, q0, name="first")
        self.tq = b.and_(lane, 3, name="tq")
        row_lo = b.add(self.first, b.shr(lane, 2), name="rlo")
        self.rows = (row_lo, b.add(row_lo, 8, name="rhi"))
        own = nkb
        if self.causal:                      # key blocks up to this warp's last row
            own = self.key_limit(b.add(self.first, MMA_M), "ownkeys")
            own = b.shr(b.add(own, s.BN - 1), pow2_exponent(s.BN), name="own")
        self.row_limits()

        self.loader_setup(tid)
        self.load_rows("Q", q0, s.BM, [(self.q_src, 0)], last=self.last, stride=self.q_stride)
        b.cp_async_commit()
        self.fragment_setup(warp, lane)
        self.zero = b.zeros(4, name="z")
        self.sacc = [b.reg(T.f32, "s") for _ in range(s.BN // 2)]
        self.oacc = [[b.const(0.0, T.f32, name="o") for _ in range(COL_BLOCK // 2)]
                     for _ in range(self.D // COL_BLOCK)]
        self.mx = [b.const(NEG_INF, T.f32, name="m") for _ in range(2)]
        self.lsum = [b.const(0.0, T.f32, name="l") for _ in range(2)]
        if self.mod_spec is not None:
            self.mod_setup(b.special("ctaid.y"))

        def q_fragments():                      # Q's group is the oldest: wait for it alone
            b.cp_async_wait(s.stages - 1)
            b.bar_sync(0)
            self.qf = [b.ldmatrix(a, num=4, name="qf") for a in self.q_addrs]

        def compute(kb, slot):
            skip = b.new_label("skip")
            if self.causal:                     # a warp-uniform branch: no barrier inside
                b.branch(skip, b.setp("ge", kb, own))
            self.block(kb, slot)
            b.label(skip)
        cp_async_ring(b, s.stages, nkb, self.slot_const(0), s.stage_bytes(self.D), self.load_kv,
                      compute, after_prologue=q_fragments)
        self.epilogue(self.oacc, self.mx, self.lsum, self.rows, self.tq)
        b.ret()

    def slot_const(self, st):
        """Byte offset of slot st from the start of shared memory (after Q)."""
        return self.s.q_bytes(self.D) + st * self.s.stage_bytes(self.D)

    # -- cp.async loads -----------------------------------------------------------------------
    def loader_setup(self, tid):
        b = self.b
        chunk = b.and_(tid, self.cpr - 1, name="chunk")
        self.lrow = b.shr(tid, pow2_exponent(self.cpr), name="lrow")
        # rows of one pass are a multiple of 8 apart: the same swizzle for all of them
        swz = b.xor(chunk, b.and_(self.lrow, 7), name="lswz")
        self.lds = b.add(self.base, b.mad(self.lrow, self.RB, b.shl(swz, 4)), name="lds")
        self.last = b.sub(self.S, 1, name="last")
        self.kv_last = self.last if self.keys is self.S else b.sub(self.keys, 1, name="klast")
        coff = b.cvt(T.u64, b.shl(chunk, 4), name="coff")

        def head(name):
            row0 = self.q_head if name == "Q" else self.kv_head
            p = b.element_addr(b.param(name), row0, self.RB, name=f"h{name}")
            return b.add(p, coff, type=T.u64, name=f"h{name}")
        self.q_src, self.k_src, self.v_src = head("Q"), head("K"), head("V")

    def load_rows(self, what, first, rows, srcs, slot=None, last=None, stride=None):
        """cp.async of `rows` rows from row `first` of the head (clamped to `last`, rows
        `stride` bytes apart) for each (source, shared offset) in srcs, into the slot
        register's tile (or Q's)."""
        b = self.b
        dst = self.lds if slot is None else b.add(self.lds, slot, name="ldst")
        for i in range(rows // self.pass_rows):
            r = b.min(b.add(first, b.add(self.lrow, i * self.pass_rows)), last,
                      name=f"{what}row")
            off = b.mul(r, stride, mode="wide", type=T.u32, name="roff")
            for src, toff in srcs:
                b.cp_async(Addr(dst, toff + i * self.pass_rows * self.RB),
                           b.add(src, off, type=T.u64, name="src"), CHUNK)

    def load_kv(self, kb, slot):
        s = self.s
        tile = s.BN * self.RB
        kb = kb if self.blist is None else self.list_entry(kb)
        self.load_rows("kv", self.b.shl(kb, pow2_exponent(s.BN), name="k0"), s.BN,
                       [(self.k_src, 0), (self.v_src, tile)], slot, last=self.kv_last,
                       stride=self.kv_stride)

    # -- fragments -----------------------------------------------------------------------------
    def fragment_setup(self, warp, lane):
        """ldmatrix row addresses of this lane (j = lane / 8, r = lane % 8, chunks XORed with
        r as stored): Q (A) and V (B, transposed) rows 8·(j&1) + r, chunk 2·step + (j>>1);
        K (B) rows 8·(j>>1) + r, chunk 2·step + (j&1)."""
        b, D = self.b, self.D
        j = b.shr(lane, 3, name="mj")
        r = b.and_(lane, 7, name="mr")
        j0, j1 = b.and_(j, 1, name="j0"), b.shr(j, 1, name="j1")
        row_a = b.mul(b.mad(j0, 8, r), self.RB, name="rowa")
        row_b = b.mul(b.mad(j1, 8, r), self.RB, name="rowb")
        sa, sb = b.xor(j1, r, name="sa"), b.xor(j0, r, name="sb")
        q_row = b.add(self.base, b.mad(warp, MMA_M * self.RB, row_a), name="qrow")
        self.q_addrs, self.k_off, self.v_off = [], [], []
        for step in range(D // MMA_K):
            ca = b.shl(b.xor(sa, 2 * step), 4, name="ca")
            cb = b.shl(b.xor(sb, 2 * step), 4, name="cb")
            self.q_addrs.append(b.add(q_row, ca, name="qa"))
            self.v_off.append(b.add(row_a, ca, name="va"))
            self.k_off.append(b.add(row_b, cb, name="ka"))

    def block(self, kb, slot):
        """One key block of this warp: S = Q·Kᵀ, the online softmax, O += P·V."""
        b, s = self.b, self.s
        n0 = self.key_start(kb)
        kslot = b.add(self.base, slot, name="kslot")
        vslot = b.add(kslot, s.BN * self.RB, name="vslot")
        for kk, qf in enumerate(self.qf):
            ka = b.add(kslot, self.k_off[kk], name="kaddr")
            for np_ in range(s.BN // (2 * MMA_N)):
                d = b.ldmatrix(Addr(ka, np_ * 2 * MMA_N * self.RB), num=4, name="kf")
                for half in range(2):
                    nt = 2 * np_ + half
                    acc = self.sacc[4 * nt: 4 * nt + 4]
                    b.mma_sync("m16n8k16", qf, d[2 * half: 2 * half + 2],
                               self.zero if kk == 0 else acc, ab=self.dtype, out=acc)
        alphas, p = self.statistics(b.shl(kb, pow2_exponent(s.BN), name="n0") if n0 is None
                                    else n0)
        self.rescale(alphas)
        pk = self.packed(p)
        for dp, voff in enumerate(self.v_off):
            va = b.add(vslot, voff, name="vaddr")
            for j in range(s.BN // MMA_K):
                d = b.ldmatrix(Addr(va, j * MMA_K * self.RB), num=4, trans=True, name="vf")
                for half in range(2):
                    nt = 2 * dp + half
                    blk, i = divmod(nt, COL_BLOCK // MMA_N)
                    acc = self.oacc[blk][4 * i: 4 * i + 4]
                    b.mma_sync("m16n8k16", pk[4 * j: 4 * j + 4], d[2 * half: 2 * half + 2],
                               acc, ab=self.dtype, out=acc)

