"""The online softmax of a FlashAttention-style forward on m16n8 accumulator fragments, and its
epilogue: shared by the sm_90a lowering (attention.py, wgmma) and the sm_80 one
(mma_attention.py, mma.sync), whose score and output fragments have the same layout —
a lane holds rows g and g + 8 (g = lane / 4) of its 16-row slice, columns 8c + 2(lane % 4) and
+1 of every 8-column block c, as registers 4c + 2h + e (h: the row, e: the column).

A mixin. The lowering provides: b (the Builder), s (a schedule with BN), S (the sequence
length register), causal, D, dtype, c (scale·log2 e), sacc (the score fragment, BN/2
registers), oacc (D/64 blocks of 32 output registers), mx, lsum (two rows each), first (the
first row of this lane's 16-row slice), rows (its two rows), tq (lane % 4) and row0 (the
head's first row in the (B·H·S) x D arrays). A packed layout (lower/attention_varlen.py) sets
o_stride (elements between O rows, default D), o_head (a register added to O's column: the
head's offset in a row) and lse_head (a register added to LSE's index).
"""
import math

import numpy as np
from numpy.polynomial import Chebyshev, Polynomial

from ..ir import Addr, Imm
from ..ir import types as T
from ..ir.instr import Instr
from ..schedule.attention import COL_BLOCK

LN2 = math.log(2.0)
NEG_INF = float("-inf")


# 2^f on [-1/2, 1/2]: Chebyshev interpolation of degree 4 in the power basis, f32 (relative
# error 3.6e-6: below the f32 statistics' bound, far below P's 16-bit rounding)
EXP2_POLY = [float(c) for c in np.float32(
    Chebyshev.interpolate(lambda f: 2.0 ** f, 4, domain=[-0.5, 0.5])
    .convert(kind=Polynomial).coef)]
ROUND_MAGIC = 12582912.0          # 1.5 * 2^23: x + it holds round(x) in its low mantissa bits


def soft_exp2(b, x):
    """2^x for x <= 0 on the FMA and integer pipes (no special-function unit): n = round(x),
    2^(x - n) by the polynomial, n added to the exponent field; x <= -127 (-inf) gives 0."""
    x = b.max(x, -127.0, type=T.f32, name="sx")
    t = b.add(x, ROUND_MAGIC, type=T.f32, name="st")
    f = b.sub(x, b.sub(t, ROUND_MAGIC, type=T.f32), type=T.f32, name="sf")
    poly = EXP2_POLY[-1]
    for k in reversed(EXP2_POLY[:-1]):
        poly = b.fma(poly, f, k, type=T.f32, name="sp") if hasattr(poly, "type") else \
            b.fma(f, poly, k, type=T.f32, name="sp")
    # the low 9 bits of t's pattern are n (mod 2^9): shifted up, they add n to the exponent
    n = b.shl(b.mov(t, type=T.b32, name="sb"), 23, type=T.b32)
    bits = b.add(b.mov(poly, type=T.b32, name="sb"), n, type=T.u32)
    return b.mov(bits, type=T.f32, name="p")


class OnlineSoftmax:
    empty_rows = False      # True: a row may see no key (its maximum stays -inf) without mods
    unmasked = False        # True while lowering key blocks the built-in mask leaves whole
    mask_free = False       # True while lowering a block mask's full blocks (full_apart)
    all_partial = False     # True while lowering its partial blocks (full_apart)
    o_stride = o_head = lse_head = None         # the epilogue's packed layout (see above)

    def mask(self, sacc, n0, first, rows, tq):
        """-inf for keys >= S and (causal) keys > row, only in blocks that hold such keys:
        element (c, e) of a row is key n0 + 8c + 2tq + e; it stays where 8c + e < limit."""
        b, s = self.b, self.s
        need = b.setp("gt", b.add(n0, s.BN), self.S, type=T.u32)
        if self.causal:
            need = b.or_(need, b.setp("gt", b.add(n0, s.BN - 1), first, type=T.u32))
        done = b.new_label("masked")
        b.branch(done, need, negate=True)
        base = b.add(n0, b.shl(tq, 1), name="kcol")
        for h, row in enumerate(rows):
            lim = self.S
            if self.causal:
                lim = b.min(self.S, b.add(row, 1), type=T.u32, name="klim")
            self.mask_past(sacc, h, b.sub(lim, base, type=T.s32, name="lim"))
        b.label(done)

    def limit_mask(self, sacc, n0, first, rows, tq):
        """-inf for keys at or past each row's limit (s32 registers self.lim, their minimum
        self.lmin), only in blocks that reach one: a mask() for per-row key limits."""
        b, s = self.b, self.s
        done = b.new_label("masked")
        b.branch(done, b.setp("gt", b.add(n0, s.BN, type=T.s32), self.lmin, type=T.s32),
                 negate=True)
        base = b.add(n0, b.shl(tq, 1), name="kcol")
        for h in range(2):
            self.mask_past(sacc, h, b.sub(self.lim[h], base, type=T.s32, name="lim"))
        b.label(done)

    def mask_past(self, sacc, h, lim):
        """-inf for row half h's fragment columns at or past `lim` (s32, relative to this
        thread's first column)."""
        b = self.b
        for cc in range(self.s.BN // 8):
            for e in range(2):
                i = 4 * cc + 2 * h + e
                keep = b.setp("gt", lim, 8 * cc + e, type=T.s32)
                b.selp(sacc[i], Imm(NEG_INF, T.f32), keep, type=T.f32, out=sacc[i])

    def quad_reduce(self, x, op):
        """Combine x over the four lanes of a row (lanes 4g .. 4g+3): shfl.bfly 1 and 2."""
        b = self.b
        for lane_mask in (1, 2):
            other = b.reg(T.f32, "sh")
            b.emit(Instr("shfl", ("sync", "bfly", "b32"),
                         (other, x, Imm(lane_mask, T.b32), Imm(0x1F, T.b32),
                          Imm(-1, T.b32))))
            x = getattr(b, op)(x, other, name="q")
        return x

    def statistics(self, n0):
        """The online-softmax step on the S fragment of key block n0 (masked first where it
        needs it): new row maxima, α per row, P = 2^(S·c - m) and the running sums l.
        Returns (α of the two rows, P registers in S's order)."""
        b, s, c = self.b, self.s, self.c
        sacc, mx, lsum = self.sacc, self.mx, self.lsum
        mods = getattr(self, "mods", None)
        if mods is None:
            if not self.unmasked:
                self.mask(sacc, n0, self.first, self.rows, self.tq)
        else:
            self.modded(n0)
        p, alphas = list(sacc), []
        for h in range(2):
            idx = [4 * cc + 2 * h + e for cc in range(s.BN // 8) for e in range(2)]
            vals = [sacc[i] for i in idx]
            while len(vals) > 1:                                      # a max tree
                vals = [b.max(vals[i], vals[i + 1], name="mx") if i + 1 < len(vals)
                        else vals[i] for i in range(0, len(vals), 2)]
            top = b.mul(self.quad_reduce(vals[0], "max"), c, name="top")
            new = b.max(mx[h], top, name="mnew")
            # a mask may leave a row without keys so far: its maximum -inf counts as 0 here
            safe = new if mods is None and not self.empty_rows else \
                b.selp(0.0, new, b.setp("eq", new, Imm(NEG_INF, T.f32)), type=T.f32)
            alphas.append(b.unary("ex2", b.sub(mx[h], safe), mods=("approx", "ftz"),
                                  name="alpha"))
            b.mov(new, out=mx[h])
            neg = b.neg(safe, name="nm")
            every = getattr(s, "soft_ex2_every", 0) or \
                (self.mod_spec.soft_ex2_every if mods is not None else 0)
            for i in idx:
                if every and i % every == every - 1:
                    p[i] = soft_exp2(b, b.fma(sacc[i], c, neg))
                    continue
                p[i] = b.unary("ex2", b.fma(sacc[i], c, neg), mods=("approx", "ftz"), name="p")
            part = [p[i] for i in idx]
            while len(part) > 1:
                part = [b.add(part[i], part[i + 1], name="ps") if i + 1 < len(part)
                        else part[i] for i in range(0, len(part), 2)]
            b.fma(lsum[h], alphas[h], part[0], out=lsum[h])
        return alphas, p

    def modded(self, n0):
        """score_mod on every element, then the bounds (and built-in causal) mask, then
        mask_mod: everywhere, or where self.partial holds (a block the block mask calls
        partial; its full blocks skip the mask)."""
        m = self.mods
        m.begin_block(n0)
        if m.score is not None:
            m.apply_score(self.sacc)
        if not self.unmasked:
            self.mask(self.sacc, n0, self.first, self.rows, self.tq)
        if m.mask is not None and not self.mask_free:
            if getattr(self, "partial", None) is None or self.all_partial:
                m.apply_mask(self.sacc)
            else:
                with self.b.if_(self.partial):
                    m.apply_mask(self.sacc)

    def mod_setup(self, bh):
        """The ModLowering of self.mod_spec (an AttentionMods) for this thread's rows, placed
        before the key loop; the softmax's log2 scaling becomes an immediate."""
        from .score_mods import ModLowering, LOG2E
        spec = self.mod_spec
        cols = [[(4 * cc + 2 * h + e, 8 * cc + e) for cc in range(self.s.BN // 8)
                 for e in range(2)] for h in range(2)]
        ptrs = {id(t): self.b.param(f"t{i}") for i, t in enumerate(spec.tensors)}
        self.mods = ModLowering(self.b, spec.score, spec.mask, bh, spec.heads, self.rows,
                                self.b.shl(self.tq, 1, name="kvl"), ptrs, spec.scale, cols)
        if spec.score is not None:        # scores leave score_mod scaled: only log2 e is left
            self.c = self.mods.factor * LOG2E

    # -- block lists (the block mask) --------------------------------------------------------
    def block_list_setup(self, qblk):
        """This CTA's key blocks from the block mask: self.nkb of them, their list at
        self.blist (a partial block's entry has bit 31 set: times BN, a multiple of 2, it
        leaves the first key exact)."""
        from .score_mods import block_list
        parts = []
        self.nkb, self.blist = block_list(self.b, self.mod_spec.block_lists, self.mod_spec.heads,
                                          qblk, "nkb", getattr(self, "bh", None), parts)
        self.nparts = parts[0]

    def list_entry(self, kb):
        return self.b.ld("global", T.u32, self.b.element_addr(self.blist, kb, 4),
                         cache="nc", name="kidx")

    def key_start(self, kb):
        """With block lists: the first key of list entry kb (loaded early, before the wait for
        its tile) and self.partial (bit 31) for it; else None (the caller uses kb·BN)."""
        if self.blist is None:
            return None
        b = self.b
        entry = self.list_entry(kb)
        self.partial = b.setp("lt", entry, 0, type=T.s32, name="part")
        return b.mul(entry, self.s.BN, type=T.u32, name="n0")

    def rescale(self, alphas):
        """O *= α, row by row of the accumulator fragment."""
        for blk in self.oacc:
            for cc in range(COL_BLOCK // 8):
                for h in range(2):
                    for e in range(2):
                        r = blk[4 * cc + 2 * h + e]
                        self.b.mul(r, alphas[h], out=r)

    def packed(self, p):
        """P rounded to 16-bit pairs in A-fragment order: k-step j's registers are
        (row g, cols 2t..), (g+8, 2t..), (g, 8+2t..), (g+8, 8+2t..) = S registers 8j..8j+7."""
        pack = "bf16x2" if self.dtype == "bf16" else "f16x2"
        return [self.b.cvt_pack(pack, p[i + 1], p[i]) for i in range(0, len(p), 2)]

    # -- epilogue -----------------------------------------------------------------------------
    def epilogue(self, oacc, mx, lsum, rows, tq):
        """O / l in the input type (rows < S only) and LSE = (m + log2 l)·ln 2 by lane 0 of
        each row's quad."""
        b, D = self.b, self.D
        O, LSE = b.param("O"), b.param("LSE")
        pack = "bf16x2" if self.dtype == "bf16" else "f16x2"
        col = b.shl(tq, 1, name="ocol")
        if self.o_head is not None:
            col = b.add(col, self.o_head, name="ocol")
        for h, row in enumerate(rows):
            total = self.quad_reduce(lsum[h], "add")
            inv = b.unary("rcp", total, mods=("approx", "ftz"), name="inv")
            if getattr(self, "mods", None) is not None or self.empty_rows:
                # a row without keys: O = 0
                inv = b.selp(inv, 0.0, b.setp("gt", total, 0.0, type=T.f32), type=T.f32)
            lse = b.mul(b.add(mx[h], b.unary("lg2", total, mods=("approx", "ftz"))), LN2,
                        name="lse")
            with b.if_(b.setp("lt", row, self.S, type=T.u32)):
                grow = b.add(self.row0, row, name="grow")
                base = b.element_addr(O, b.mad(grow, self.o_stride or D, col, name="oi"), 2,
                                      name="orow")
                for hb, blk in enumerate(oacc):
                    for cc in range(COL_BLOCK // 8):
                        lo, hi = blk[4 * cc + 2 * h], blk[4 * cc + 2 * h + 1]
                        v = b.cvt_pack(pack, b.mul(hi, inv), b.mul(lo, inv))
                        b.st("global", Addr(base, 2 * (hb * COL_BLOCK + 8 * cc)), v,
                             type=T.b32)
                with b.predicated(b.setp("eq", tq, 0)):
                    lrow = grow if self.lse_head is None else \
                        b.add(grow, self.lse_head, name="lidx")
                    b.st("global", b.element_addr(LSE, lrow, 4, name="lrow"), lse)
