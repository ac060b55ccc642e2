"""Stores of m16n8-style accumulator pairs to a row-major C, shared by the tensor-core GEMM
lowerings (tc_matmul.py, mma_matmul.py): both hold C as pairs of adjacent columns
per lane (the mma.sync C layout, which wgmma repeats along N).

A mixin: the lowering provides self.b (the Builder), self.out ("f32" or "bf16"), self.even_n
(N even: C rows hold whole pairs, 2-element stores stay aligned) and self.M, self.N (registers).
"""
from ..ir import Addr
from ..ir import types as T
from ..ir.values import Vec
from ..schedule.tc_matmul import OUT_BYTES


class PairStores:
    def store_c_tile(self, rows, col, inside):
        """Store a lane's m16n8 fragments. rows: [(row, address of (row, col), address of
        (row + 8, col), [(column offset, (c0, c1, c2, c3)), ...]), ...] where c0, c1 belong
        at row and c2, c3 at row + 8; col: the lane's first column; inside: a predicate, true
        when the CTA's whole tile lies inside C (then nothing is predicated)."""
        b = self.b
        edge, done = b.new_label("edge"), b.new_label("stored")
        b.branch(edge, inside, negate=True)
        self._store_rows(rows, None)
        b.branch(done)
        b.label(edge)
        self._store_rows(rows, b.sub(self.N, col, type=T.s32, name="cleft"))
        b.label(done)

    def _store_rows(self, rows, col_left):
        """Stores of every accumulator pair; with col_left (N - this lane's first column) each
        is predicated on its row and column being inside C. Odd N: C rows are not 8-byte (f32)
        or 4-byte (bf16) aligned, so each pair is stored as two elements."""
        b = self.b
        eb = OUT_BYTES[self.out]
        for r, lo, hi, blocks in rows:
            row_ok = None
            if col_left is not None:
                row_ok = (b.setp("lt", r, self.M), b.setp("lt", b.add(r, 8), self.M))
            for c, frag in blocks:
                for h, addr in enumerate((lo, hi)):
                    pair = self.converted(frag[2 * h: 2 * h + 2])
                    parts = [(pair, c)] if self.even_n else \
                        [((v,), c + e) for e, v in enumerate(pair)]
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
        pk = b.cvt_pack("bf16x2", pair[1], pair[0])
        if self.even_n:
            return (pk,)
        lo, hi = b.reg(T.b16, "h"), b.reg(T.b16, "h")
        b.mov(pk, type=T.b32, out=Vec((lo, hi)))
        return (lo, hi)

    def store(self, addr, vals):
        b = self.b
        if self.out == "f32":
            b.st("global", addr, vals if len(vals) > 1 else vals[0])
        else:
            b.st("global", addr, vals[0], type=T.b32 if self.even_n else T.b16)
