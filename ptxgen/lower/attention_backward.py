"""Lowering of an AttentionBackwardSchedule to the attention backward's three kernels
(FlashAttention-2's algorithm on mma.sync m16n8k16, ldmatrix and cp.async; sm_80 and newer):

    attn_bwd_pre(O, dO, Delta, rows)
        Delta_i = Σ_d dO_id · O_id in f32: D/8 threads per row, 8 products each (16-byte
        loads), then a shfl.bfly tree over those lanes
    attn_bwd_dkdv(Q, K, V, dO, LSE, Delta, dK, dV, S, scale_log2, scale)
        grid (ceil(S / BK), B·H_kv): the CTA owns BK keys of one (batch, K/V head), each warp
        16 of them; it loops over the query blocks (q_step rows) of every query head of the
        K/V head's group, summing in registers in a fixed order (deterministic GQA):
            Sᵀ  = K_w Qᵀ               (16 x q_step; A = K rows, B = Q rows, k = D)
            Pᵀ  = 2^(Sᵀ·scale·log2 e - LSE_q·log2 e)    (masked entries -inf → 0)
            dV += Pᵀ dO                (A = Pᵀ packed from Sᵀ's accumulators, B = dO .trans)
            dPᵀ = V_w dOᵀ              (A = V rows, B = dO rows)
            dSᵀ = Pᵀ ∘ (dPᵀ - Delta_q)
            dK += dSᵀ Q                (B = Q .trans);  dK · scale at the end
        causal: the CTA starts at the query block of its first key; a warp skips the blocks
        that end before its first key (a warp-uniform branch) and masks the diagonal ones
    attn_bwd_dq(Q, K, V, dO, LSE, Delta, dQ, S, scale_log2, scale)
        grid (ceil(S / BQ), B·H): the forward's shape (each warp 16 query rows), recomputing
        S = Q Kᵀ, P and dS = P ∘ (dO Vᵀ - Delta) per key block, dQ += dS K (B = K .trans);
        dQ · scale at the end. No atomics: dQ is bit-deterministic.

Arrays are (B·H·S) x D row-major bf16 (K, V, dK, dV: B·H_kv heads); LSE, Delta: B·H·S f32.
Shared memory as the forward's sm_80 path (mma_attention.py): two own tiles, then `stages`
slots of two streamed tiles; 16-byte chunk c of a row stored at c ^ (row & 7); rows past S
clamped to the last (their P is masked to 0, their dK/dV/dQ rows not stored). The A and B
fragment addresses are the forward's (one row offset and XOR-swizzled chunk per k-step).
"""
from ..ir import Addr, Builder, Imm, Module, Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from ..ir.instr import Instr
from ..schedule.mma_matmul import CHUNK, MMA_M
from .cp_async_ring import cp_async_ring
from .mma_attention import MMA_K, SWIZZLE_ALIGN
from .online_softmax import NEG_INF
from .score_mods import block_list

LOG2E = 1.4426950408889634
KERNELS = ("attn_bwd_pre", "attn_bwd_dkdv", "attn_bwd_dq")
PRE_THREADS = 256


def backward_module(s, arch, D, pre=KERNELS[0]):
    """Schedule s checked, the Module with the Delta pre-pass (kernel `pre`), and the scalar
    parameters the dense main kernels take after their pointers (S, scale_log2, scale)."""
    s.validate(arch, "bf16", D)
    m = Module(target=arch)
    add_preprocess(m, pre, D)
    return m, [Param("S", T.u32), Param("scale_log2", T.f32), Param("scale", T.f32)]


def lower(s, arch, shape, causal=False, kv_group=1, mods=None, lists=None):
    """The backward's Module: its three kernels (KERNELS) for schedule s. mods: an
    AttentionMods (kv_group 1) and its .grad, the Graph of ∂score_mod/∂score (None: 1): the
    two main kernels take its parameters after S, scale_log2, scale. lists: {"dkdv" | "dq":
    block_lists} (AttentionMods.block_lists of the kernel's own tiles: for dK/dV a block mask
    of the transposed mask, rows key blocks, entries query blocks): the kernel walks only the
    non-empty blocks and skips the mask on full ones."""
    from dataclasses import replace
    D = shape["D"]
    m, tail = backward_module(s, arch, D)
    for name, outs in ((KERNELS[1], ["dK", "dV"]), (KERNELS[2], ["dQ"])):
        kind = name.removeprefix("attn_bwd_")
        kmods = mods if mods is None else \
            replace(mods, block_lists=(lists or {}).get(kind))
        k = m.add_kernel(name, main_params(outs) + tail +
                         (kmods.params() if kmods is not None else []))
        warps, own, step = s.kernel_tiles(D)[kind]
        k.directives.append(f".maxntid {32 * warps}, 1, 1")
        low = BackwardLowering(Builder(k), s, D, causal, kv_group, warps, own, step, kmods)
        low.run_dkdv() if kind == "dkdv" else low.run_dq()
    return m


def add_preprocess(m, name, D):
    """The Delta kernel (O, dO, Delta, rows) into module m."""
    pre = m.add_kernel(name, [
        Param("O", T.u64, ptr(T.b16, align=CHUNK)), Param("dO", T.u64, ptr(T.b16, align=CHUNK)),
        Param("Delta", T.u64, ptr(T.f32, align=4)), Param("rows", T.u32)])
    pre.directives.append(f".maxntid {PRE_THREADS}, 1, 1")
    _preprocess(Builder(pre), D)


def main_params(outs):
    """A main kernel's array parameters: Q, K, V, dO, LSE, Delta, then the outputs."""
    return [Param(n, T.u64, ptr(T.b16, align=CHUNK)) for n in ("Q", "K", "V", "dO")] + \
        [Param(n, T.u64, ptr(T.f32, align=4)) for n in ("LSE", "Delta")] + \
        [Param(n, T.u64, ptr(T.b16, align=4)) for n in outs]


def _shfl_sum(b, x, lanes):
    """x summed over `lanes` (a power of 2) neighbouring lanes by shfl.bfly."""
    m = 1
    while m < lanes:
        other = b.reg(T.f32, "sh")
        b.emit(Instr("shfl", ("sync", "bfly", "b32"),
                     (other, x, Imm(m, T.b32), Imm(0x1F, T.b32), Imm(-1, T.b32))))
        x = b.add(x, other, name="q")
        m *= 2
    return x


def _preprocess(b, D):
    """Delta = rowsum(dO ∘ O): thread t takes 16-byte chunk t % (D/8) of row t / (D/8)."""
    cpr = D // 8
    gid = b.global_index()
    rows = b.param("rows")
    row = b.shr(gid, pow2_exponent(cpr), name="row")
    rc = b.min(row, b.sub(rows, 1), name="rc")             # every lane joins the shuffles
    idx = b.add(b.shl(rc, pow2_exponent(cpr)), b.and_(gid, cpr - 1), name="ci")
    o = b.ld("global", T.b32, b.element_addr(b.param("O"), idx, CHUNK), vec=4, cache="nc",
             name="o")
    g = b.ld("global", T.b32, b.element_addr(b.param("dO"), idx, CHUNK), vec=4, cache="nc",
             name="g")
    acc = b.const(0.0, T.f32, name="acc")

    def halves(x):                  # a bf16 pair's two values as f32 (low element first)
        return (b.mov(b.shl(x, 16, type=T.b32), type=T.f32, name="lo"),
                b.mov(b.and_(x, 0xFFFF0000, type=T.b32), type=T.f32, name="hi"))
    for x, y in zip(o, g):
        for fx, fy in zip(halves(x), halves(y)):
            acc = b.fma(fx, fy, acc, name="acc")
    acc = _shfl_sum(b, acc, cpr)
    first = b.setp("eq", b.and_(gid, cpr - 1), 0)
    with b.if_(b.and_(first, b.setp("lt", row, rows))):
        b.st("global", b.element_addr(b.param("Delta"), row, 4), acc)
    b.ret()


class BackwardLowering:
    """One main kernel: `own` rows (16 per warp) of two tiles kept in shared memory, two tiles
    of `step` rows streamed per loop step."""

    def __init__(self, b, s, D, causal, kv_group, warps, own, step, mods=None):
        self.b, self.s, self.D, self.causal, self.G = b, s, D, causal, kv_group
        self.spec, self.mods = mods, None
        self.warps, self.own, self.step = warps, own, step
        self.RB = s.row_bytes(D)
        self.cpr = self.RB // CHUNK
        self.pass_rows = s.pass_rows(warps, D)

    # -- set-up --------------------------------------------------------------------------------
    def setup(self):
        b, RB = self.b, self.RB
        tid = b.special("tid.x")
        self.warp, lane = b.shr(tid, 5, name="warp"), b.and_(tid, 31, name="lane")
        self.bounds()
        self.base = b.address_of(b.dynamic_shared("smem", align=SWIZZLE_ALIGN))
        self.tq, self.g = b.and_(lane, 3, name="tq"), b.shr(lane, 2, name="g")
        # the cp.async loader: chunk tid % cpr of rows tid / cpr + i·pass_rows
        chunk = b.and_(tid, self.cpr - 1, name="chunk")
        self.lrow = b.shr(tid, pow2_exponent(self.cpr), name="lrow")
        swz = b.xor(chunk, b.and_(self.lrow, 7), name="lswz")
        self.lds = b.add(self.base, b.mad(self.lrow, RB, b.shl(swz, 4)), name="lds")
        self.coff = b.cvt(T.u64, b.shl(chunk, 4), name="coff")
        # ldmatrix row offsets (mma_attention.fragment_setup): A and B.trans rows 8·(j&1) + r,
        # chunk 2·step + (j>>1); B rows 8·(j>>1) + r, chunk 2·step + (j&1); j = lane/8, r = lane%8
        j, r = b.shr(lane, 3, name="mj"), b.and_(lane, 7, name="mr")
        j0, j1 = b.and_(j, 1, name="j0"), b.shr(j, 1, name="j1")
        row_a = b.mul(b.mad(j0, 8, r), RB, name="rowa")
        row_b = b.mul(b.mad(j1, 8, r), RB, name="rowb")
        sa, sb = b.xor(j1, r, name="sa"), b.xor(j0, r, name="sb")
        # k-steps 4..7 (D = 128) XOR a chunk bit above the swizzle's three: an immediate
        self.a_off = [b.add(row_a, b.shl(b.xor(sa, 2 * k), 4), name="aoff")
                      for k in range(min(4, self.D // MMA_K))]
        self.b_off = [b.add(row_b, b.shl(b.xor(sb, 2 * k), 4), name="boff")
                      for k in range(min(4, self.D // MMA_K))]
        self.own_w = b.add(self.base, b.mul(self.warp, MMA_M * RB), name="ownw")
        self.zero = b.zeros(4, name="z")
        self.sacc = [b.reg(T.f32, "s") for _ in range(self.step // 2)]
        self.dpacc = [b.reg(T.f32, "dp") for _ in range(self.step // 2)]

    # -- sequence hooks (the dense square here; lower/attention_varlen_backward.py's packed
    #    sequences override them) --------------------------------------------------------------
    ctype = T.u32           # the type of comparisons between query and key positions

    def bounds(self):
        """self.S_q, self.S_k (query and key rows), self.last_q, self.last_k (the last ones)
        and self.c; here S for both."""
        b = self.b
        self.S, self.c = b.param("S"), b.param("scale_log2")
        self.last = b.sub(self.S, 1, name="last")
        self.S_q = self.S_k = self.S
        self.last_q = self.last_k = self.last

    def shift(self, q):
        """Query position q moved onto the key axis (causal: q sees keys <= shift(q))."""
        return q

    def unshift0(self, k):
        """The first query position that sees key k (>= 0)."""
        return k

    def keys_before(self, end, name=None):
        """The keys the causal query rows before `end` see."""
        return self.b.min(self.S, end, name=name)

    def head_rows(self, head, name):
        """The rows of head `head` (a register), as load_rows / store take them."""
        return self.b.mul(head, self.S, name=name)

    def row_index(self, rows, r, name):
        """Row r of `rows` (head_rows) in rows of D elements from the array's start."""
        return self.b.add(rows, r, name=name)

    def row_last(self, rows):
        return self.last

    def row_count(self, rows):
        return self.S

    def dkdv_block(self):
        """(k0, the K/V head register, its rows, the query rows for kv_group 1) of this CTA."""
        b = self.b
        k0 = b.shl(b.special("ctaid.x"), pow2_exponent(self.own), name="k0")
        bh = b.special("ctaid.y")                                   # b·H_kv + K/V head
        kv_row0 = self.head_rows(bh, "kvrow0")
        return k0, bh, kv_row0, kv_row0

    def dq_block(self):
        """(query blocks, q0, the query rows, the K/V rows) of this CTA."""
        b, lq = self.b, pow2_exponent(self.own)
        nq = b.shr(b.add(self.S, self.own - 1), lq, name="nqb")
        q0 = b.shl(b.sub(b.sub(nq, 1), b.special("ctaid.x")), lq, name="q0")   # longest first
        bh = b.special("ctaid.y")
        q_row0 = self.head_rows(bh, "qrow0")
        kv_row0 = q_row0 if self.G == 1 else \
            b.mul(b.div(bh, self.G, type=T.u32), self.S, name="kvrow0")
        return nq, q0, q_row0, kv_row0

    def accumulator(self, name):
        return [self.b.const(0.0, T.f32, name=name) for _ in range(self.D // 2)]

    def slot_bytes(self):
        return 2 * self.step * self.RB

    def own_bytes(self):
        return 2 * self.own * self.RB

    def load_rows(self, head_row0, first, rows, srcs, slot=None):
        """cp.async of `rows` rows from row `first` of the head starting at global row
        head_row0 (clamped to S-1) for each (pointer parameter, shared offset) in srcs."""
        b = self.b
        dst = self.lds if slot is None else b.add(self.lds, slot, name="ldst")
        for i in range(rows // self.pass_rows):
            r = b.min(b.add(first, b.add(self.lrow, i * self.pass_rows)),
                      self.row_last(head_row0), name="lr")
            grow = self.row_index(head_row0, r, "grow")
            off = b.add(b.mul(grow, self.RB, mode="wide", type=T.u32), self.coff, type=T.u64,
                        name="roff")
            for param, toff in srcs:
                b.cp_async(Addr(dst, toff + i * self.pass_rows * self.RB),
                           b.add(b.param(param), off, type=T.u64, name="src"), CHUNK)

    # -- fragments -----------------------------------------------------------------------------
    def gemm_nt(self, acc, own_off, sb, tile_off):
        """acc = X_w · Yᵀ over k = D: X_w this warp's 16 rows of the own tile at own_off, Y
        the streamed tile at sb + tile_off (step rows)."""
        b, RB = self.b, self.RB
        for kk in range(self.D // MMA_K):
            hi = CHUNK * 8 * (kk // 4)
            a = b.ldmatrix(Addr(b.add(self.own_w, self.a_off[kk % 4], name="aa"),
                                own_off + hi), num=4, name="af")
            ya = b.add(sb, self.b_off[kk % 4], name="ya")
            for np_ in range(self.step // MMA_K):
                d = b.ldmatrix(Addr(ya, tile_off + hi + np_ * MMA_K * RB), num=4, name="bf")
                for half in range(2):
                    nt = 2 * np_ + half
                    c4 = acc[4 * nt: 4 * nt + 4]
                    b.mma_sync("m16n8k16", a, d[2 * half: 2 * half + 2],
                               self.zero if kk == 0 else c4, ab="bf16", out=c4)

    def gemm_nn(self, acc, packed, sb, tile_off):
        """acc += P · Y: P (16 x step) packed in A-fragment order, Y the streamed tile at
        sb + tile_off (step rows = k, D columns = n) read by ldmatrix .trans."""
        b, RB = self.b, self.RB
        for dp in range(self.D // MMA_K):
            ya = b.add(sb, self.a_off[dp % 4], name="yt")
            for j in range(self.step // MMA_K):
                d = b.ldmatrix(Addr(ya, tile_off + CHUNK * 8 * (dp // 4) + j * MMA_K * RB),
                               num=4, trans=True, name="tf")
                for half in range(2):
                    nt = 2 * dp + half
                    c4 = acc[4 * nt: 4 * nt + 4]
                    b.mma_sync("m16n8k16", packed[4 * j: 4 * j + 4],
                               d[2 * half: 2 * half + 2], c4, ab="bf16", out=c4)

    def packed(self, x):
        """f32 fragment values rounded to bf16 pairs: k-step j's A registers are 8j..8j+7."""
        return [self.b.cvt_pack("bf16x2", x[i + 1], x[i]) for i in range(0, len(x), 2)]

    def mask(self, rows, col0, need, keys_are_rows):
        """-inf where a column (col0 + 8c + e) is >= S or, causal, on the wrong side of the
        row's diagonal (keys_are_rows: query column < key row; else key column > query row);
        only where `need` holds."""
        b, acc = self.b, self.sacc
        done = b.new_label("masked")
        b.branch(done, need, negate=True)
        for h, row in enumerate(rows):
            hi, lo = (self.S_q if keys_are_rows else self.S_k), None
            if self.causal and not keys_are_rows:
                hi = b.min(self.S_k, self.shift(b.add(row, 1)), type=self.ctype, name="klim")
            hi = b.sub(hi, col0, type=T.s32, name="hi")
            if self.causal and keys_are_rows:
                lo = b.sub(row, self.shift(col0), type=T.s32, name="lo")
            for cc in range(self.step // 8):
                for e in range(2):
                    i = 4 * cc + 2 * h + e
                    keep = b.setp("gt", hi, 8 * cc + e, type=T.s32)
                    if lo is not None:
                        keep = b.and_(keep, b.setp("le", lo, 8 * cc + e, type=T.s32))
                    b.selp(acc[i], Imm(NEG_INF, T.f32), keep, type=T.f32, out=acc[i])
        b.label(done)

    def mod_setup(self, rows, transposed):
        """The ModLowering of the mods on this thread's two fragment rows (keys when
        transposed, else queries), placed before the loop; with a score_mod the exponent's
        scale becomes the immediate factor · log2 e (the forward's)."""
        from .score_mods import LOG2E as L2E, ModLowering
        spec, b = self.spec, self.b
        cols = [[(4 * cc + 2 * h + e, 8 * cc + e) for cc in range(self.step // 8)
                 for e in range(2)] for h in range(2)]
        ptrs = {id(t): b.param(f"t{i}") for i, t in enumerate(spec.tensors)}
        self.mods = ModLowering(b, spec.score, spec.mask, b.special("ctaid.y"), spec.heads,
                                rows, b.shl(self.tq, 1, name="kvl"), ptrs, spec.scale, cols,
                                grad=spec.grad, transposed=transposed)
        if spec.score is not None:
            self.c = self.mods.factor * L2E

    def modded(self, col0_block, rows, col0, need, keys_are_rows, partial=None):
        """score_mod (and its derivative: returned, None for 1) on the fragment, the bounds
        mask where `need` holds, then mask_mod (masked: -inf, P = 0): everywhere, or where
        `partial` holds (a block the block lists call partial)."""
        m, grad = self.mods, None
        m.begin_block(col0_block)
        if m.score is not None:
            grad = m.score_and_grad(self.sacc)
        self.mask(rows, col0, need, keys_are_rows)
        if m.mask is not None:
            if partial is None:
                m.apply_mask(self.sacc)
            else:
                with self.b.if_(partial):
                    m.apply_mask(self.sacc)
        return grad

    def block_lists(self, tile):
        """(count, list address) of this CTA's blocks in the block lists (BM_counts,
        BM_lists) for its own tile index tile() (emitted only with lists); None without."""
        if self.spec is None or not self.spec.block_lists:
            return None
        return block_list(self.b, self.spec.block_lists, self.spec.heads, tile(), "nblk")

    def list_block(self, blist, kb, lg):
        """(first row, partial predicate) of list entry kb (bit 31: partial)."""
        b = self.b
        e = b.ld("global", T.u32, b.element_addr(blist, kb, 4), cache="nc", name="ent")
        return (b.shl(b.and_(e, 0x7FFFFFFF, type=T.u32), lg, name="bs"),
                b.setp("lt", e, 0, type=T.s32, name="part"))

    def chain(self, ds, grad):
        """dS of the raw scores: dS of the modified ones times ∂score_mod/∂score."""
        if grad is None:
            return ds
        return [self.b.mul(x, g, name="dsr") for x, g in zip(ds, grad)]

    def probabilities(self, neg_lse):
        """P = 2^(S·scale·log2 e - LSE·log2 e); neg_lse(i): -LSE·log2 e of element i."""
        b = self.b
        return [b.unary("ex2", b.fma(s, self.c, neg_lse(i)), mods=("approx", "ftz"), name="p")
                for i, s in enumerate(self.sacc)]

    def dscores(self, p, delta):
        """dS = P ∘ (dP - Delta); delta(i): Delta of element i."""
        b = self.b
        return [b.mul(pi, b.sub(dp, delta(i)), name="ds")
                for i, (pi, dp) in enumerate(zip(p, self.dpacc))]

    def stat(self, param, head_row0, idx):
        """LSE·(-log2 e) (param "LSE") or Delta of sequence position idx (clamped to S-1) of a
        head."""
        b = self.b
        g = b.add(head_row0, b.min(idx, self.last), name="srow")
        x = b.ld("global", T.f32, b.element_addr(b.param(param), g, 4), cache="nc", name="st")
        if param != "LSE":
            return x
        if self.mods is not None:       # a row without keys (LSE -inf): P = 2^-inf = 0
            return b.min(b.mul(x, -LOG2E, name="nl"), 3.0e38, name="nl")
        return b.mul(x, -LOG2E, name="nl")

    def store(self, acc, rows, head_row0, param, scale=None):
        """acc (16 x D of this warp) as bf16 rows of `param` (rows < S), times scale."""
        b, D = self.b, self.D
        col = b.shl(self.tq, 1, name="ocol")
        for h, row in enumerate(rows):
            with b.if_(b.setp("lt", row, self.row_count(head_row0), type=T.u32)):
                grow = self.row_index(head_row0, row, "orow")
                addr = b.element_addr(b.param(param), b.mad(grow, D, col), 2, name="oaddr")
                for nt in range(D // 8):
                    lo, hi = acc[4 * nt + 2 * h], acc[4 * nt + 2 * h + 1]
                    if scale is not None:
                        lo, hi = b.mul(lo, scale), b.mul(hi, scale)
                    b.st("global", Addr(addr, 2 * 8 * nt), b.cvt_pack("bf16x2", hi, lo),
                         type=T.b32)

    def wait_own(self):
        self.b.cp_async_wait(self.s.stages - 1)          # the own tiles' group is the oldest
        self.b.bar_sync(0)

    # -- the dK/dV kernel ----------------------------------------------------------------------
    def run_dkdv(self):
        b, s, RB, step = self.b, self.s, self.RB, self.step
        self.setup()
        k0, bh, kv_row0, mha_rows = self.dkdv_block()
        k0w = b.mad(self.warp, MMA_M, k0, name="k0w")
        krows = (b.add(k0w, self.g, name="krlo"), b.add(k0w, b.add(self.g, 8), name="krhi"))
        if self.spec is not None:
            self.mod_setup(krows, transposed=True)
        lg = pow2_exponent(step)
        nqb = b.shr(b.add(self.S_q, step - 1), lg, name="nqb")
        start = b.shr(self.unshift0(k0), lg, name="qstart") if self.causal else \
            b.const(0, T.u32, name="q0")
        n = b.sub(nqb, start, name="nq")
        total = n if self.G == 1 else b.mul(n, self.G, name="nsteps")
        bl = self.block_lists(lambda: b.special("ctaid.x"))
        if bl is not None:
            total = bl[0]
        self.load_rows(kv_row0, k0, self.own, [("K", 0), ("V", self.own * RB)])
        b.cp_async_commit()
        dk, dv = self.accumulator("dk"), self.accumulator("dv")

        def locate(kb):
            """(first global row of the query head, first query row) of step kb: query head
            kb / n of the group, query block start + kb % n."""
            if bl is not None:
                return kv_row0, self.list_block(bl[1], kb, lg)[0]
            if self.G == 1:
                return mha_rows, b.shl(b.add(start, kb), lg, name="qs")
            i = b.div(kb, n, type=T.u32, name="gi")
            qb = b.add(start, b.sub(kb, b.mul(i, n)), name="qb")
            head = b.mad(bh, self.G, i, name="qh")
            return self.head_rows(head, "qrow0"), b.shl(qb, lg, name="qs")

        def load(kb, slot):
            q_row0, q0 = locate(kb)
            self.load_rows(q_row0, q0, step, [("Q", 0), ("dO", step * RB)], slot)

        def compute(kb, slot):
            part = None
            if bl is not None:
                q_row0, (q0, part) = kv_row0, self.list_block(bl[1], kb, lg)
            else:
                q_row0, q0 = locate(kb)
            skip = b.new_label("skip")
            qend = b.add(q0, step, name="qend")
            if self.causal:                       # every query of the block before our keys
                b.branch(skip, b.setp("le", self.shift(qend), k0w, type=self.ctype))
            sb = b.add(self.base, slot, name="sb")
            col0 = b.add(q0, b.shl(self.tq, 1), name="col0")

            def per_column(param):      # element i is column 8(i / 4) + i % 2 of the block
                x = [self.stat(param, q_row0, b.add(col0, 8 * cc + e))
                     for cc in range(step // 8) for e in range(2)]
                return lambda i: x[2 * (i // 4) + i % 2]
            self.gemm_nt(self.sacc, 0, sb, 0)                          # Sᵀ = K_w Qᵀ
            need = b.setp("gt", qend, self.S_q, type=T.u32)
            if self.causal:
                need = b.or_(need, b.setp("lt", self.shift(q0), b.add(k0w, MMA_M - 1),
                                          type=self.ctype))
            grad = None
            if self.mods is None:
                self.mask(krows, col0, need, keys_are_rows=True)
            else:
                grad = self.modded(q0, krows, col0, need, keys_are_rows=True, partial=part)
            p = self.probabilities(per_column("LSE"))
            self.gemm_nn(dv, self.packed(p), sb, step * RB)            # dV += Pᵀ dO
            self.gemm_nt(self.dpacc, self.own * RB, sb, step * RB)     # dPᵀ = V_w dOᵀ
            ds = self.chain(self.dscores(p, per_column("Delta")), grad)
            self.gemm_nn(dk, self.packed(ds), sb, 0)                   # dK += dSᵀ Q
            b.label(skip)
        cp_async_ring(b, s.stages, total, self.own_bytes(), self.slot_bytes(), load, compute,
                      after_prologue=self.wait_own)
        self.store(dk, krows, kv_row0, "dK", b.param("scale"))
        self.store(dv, krows, kv_row0, "dV")
        b.ret()

    # -- the dQ kernel -------------------------------------------------------------------------
    def run_dq(self):
        b, s, RB, step = self.b, self.s, self.RB, self.step
        self.setup()
        nq, q0, q_row0, kv_row0 = self.dq_block()
        first = b.mad(self.warp, MMA_M, q0, name="first")
        rows = (b.add(first, self.g, name="rlo"), b.add(first, b.add(self.g, 8), name="rhi"))
        if self.spec is not None:
            self.mod_setup(rows, transposed=False)
        lg = pow2_exponent(step)
        keys = self.keys_before(b.add(q0, self.own), "keys") if self.causal else self.S_k
        nkb = b.shr(b.add(keys, step - 1), lg, name="nkb")
        mine = nkb
        bl = self.block_lists(lambda: b.sub(b.sub(nq, 1), b.special("ctaid.x"), name="qblk"))
        if bl is not None:
            nkb = bl[0]
        if self.causal:                                  # key blocks up to this warp's last row
            mine = b.shr(b.add(self.keys_before(b.add(first, MMA_M)), step - 1), lg, name="own")
        self.load_rows(q_row0, q0, self.own, [("Q", 0), ("dO", self.own * RB)])
        b.cp_async_commit()
        row_stats = [[self.stat(n, q_row0, r) for n in ("LSE", "Delta")] for r in rows]
        dq = self.accumulator("dq")

        def load(kb, slot):
            k0 = b.shl(kb, lg, name="k0") if bl is None else self.list_block(bl[1], kb, lg)[0]
            self.load_rows(kv_row0, k0, step, [("K", 0), ("V", step * RB)], slot)

        def compute(kb, slot):
            skip = b.new_label("skip")
            if self.causal:
                b.branch(skip, b.setp("ge", kb, mine, type=T.u32))
            part = None
            if bl is None:
                n0 = b.shl(kb, lg, name="n0")
            else:
                n0, part = self.list_block(bl[1], kb, lg)
            sb = b.add(self.base, slot, name="sb")
            self.gemm_nt(self.sacc, 0, sb, 0)                          # S = Q_w Kᵀ
            need = b.setp("gt", b.add(n0, step), self.S_k, type=T.u32)
            if self.causal:
                need = b.or_(need, b.setp("gt", b.add(n0, step - 1), self.shift(first),
                                          type=self.ctype))
            grad = None
            col0 = b.add(n0, b.shl(self.tq, 1), name="col0")
            if self.mods is None:
                self.mask(rows, col0, need, keys_are_rows=False)
            else:
                grad = self.modded(n0, rows, col0, need, keys_are_rows=False, partial=part)
            p = self.probabilities(lambda i: row_stats[(i // 2) % 2][0])
            self.gemm_nt(self.dpacc, self.own * RB, sb, step * RB)     # dP = dO_w Vᵀ
            ds = self.chain(self.dscores(p, lambda i: row_stats[(i // 2) % 2][1]), grad)
            self.gemm_nn(dq, self.packed(ds), sb, 0)                   # dQ += dS K
            b.label(skip)
        cp_async_ring(b, s.stages, nkb, self.own_bytes(), self.slot_bytes(), load, compute,
                      after_prologue=self.wait_own)
        self.store(dq, rows, q_row0, "dQ", b.param("scale"))
        b.ret()
