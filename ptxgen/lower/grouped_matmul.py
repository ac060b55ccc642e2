"""Grouped GEMM (mixture-of-experts) on the sm_90a tensor-core kernel: one persistent launch
multiplies each expert's rows of X by that expert's weights, over all experts' tiles.

    grouped_matmul(X_map, W_map, [C_map,] C, M, N, K, [scale_a, scale_b,] rows)
        X_map: tensor map of X (M x K row-major, the tokens of every expert), box BM x BK
        W_map: tensor map of W seen as (G*N) x K (expert g's weights, N x K K-major, are rows
               g*N ..), box BN x BK; or N-major (w_major=False: W is G x K x N, seen as
               (G*K) x N, BK x 64 boxes from row g*K, wgmma's transpose bit)
        C_map: (epilogue "tma") tensor map of C, box rows_per_consumer x 128 bytes
        C:     M x N row-major; only the rows of some expert are written
        rows:  u32[G]; layout "offsets": the end row of each expert's tokens (torch's
               _grouped_mm offsets: expert g owns rows offsets[g-1] .. offsets[g]); "masked":
               each expert's token count, expert g owning rows g*(M/G) .. + count (the count
               read on the device, so a CUDA graph replays with new counts)

Tiles: expert g has ceil(rows_g / BM) x ceil(N / BN) tiles, numbered expert after expert; a
persistent CTA walks tile numbers ctaid, ctaid + nctaid, ... and finds each tile's expert by
walking the experts' row counts from where its last tile's search stopped (the numbers only
grow: mostly one expert's counts read per tile; the producer and the consumers each search
for themselves). Inside an expert the tiles go group_m tile rows at a time
(raster.grouped_tile), like the dense kernel. A's boxes start at the expert's first row and
may run into the next expert's rows (multiplied, never stored); W's boxes of a ragged N run
into the next expert's rows (columns past N, never stored).

C: with epilogue "direct", stored from the fragments, predicated on the expert's last row and
N. With "tma" (C's rows 16-byte aligned), a tile whose rows all belong to its expert (m0 + BM
at most the expert's end row) takes the dense kernel's staged store: written into shared
memory and stored by TMA, which clips at C's edges (N, M) only, while the next tile's loop
starts; the one tile per expert and tile column that crosses the expert's end is stored from
the fragments as above. The producer, pipeline and consumers are the dense kernel's
(lower/tc_matmul.py).
"""
from ..ir import Param, ptr
from ..ir import types as T
from ..ir.builder import pow2_exponent
from .tc_matmul import TcLowering, lower
from .raster import grouped_tile

LAYOUTS = ("offsets", "masked")


class GroupedLowering(TcLowering):
    groups = 1
    layout = "offsets"

    def expert_rows(self, g):
        """(first row, row count) of expert g (a u32 register)."""
        b = self.b
        here = b.ld("global", T.u32, b.element_addr(self.rows, g, 4), name="rows_g")
        if self.layout == "masked":
            per = b.div(self.M, self.groups, name="per")
            return b.mul(g, per, name="first"), b.min(here, per, name="count")
        prev = b.reg(T.u32, "first")
        b.mov(0, type=T.u32, out=prev)
        with b.predicated(b.setp("ne", g, 0)):
            b.ld("global", T.u32, b.element_addr(self.rows, b.sub(g, 1), 4), out=prev)
        return prev, b.sub(here, prev, name="count")

    def expert_tiles(self, count):
        s, b = self.s, self.b
        tm = b.shr(b.add(count, s.BM - 1), pow2_exponent(s.BM), name="tiles_m")
        return b.mul(tm, self.tiles_n, name="etiles")

    def count_tiles(self):
        b, s = self.b, self.s
        self.rows = b.param("rows")
        self.tiles_n = b.shr(b.add(self.N, s.BN - 1), pow2_exponent(s.BN), name="tiles_n")
        total = b.const(0, T.u32, name="ntiles")
        with b.for_range(0, self.groups, type=T.u32, name="g") as g:
            _, count = self.expert_rows(g)
            b.add(total, self.expert_tiles(count), out=total)
        return total

    def tiles(self):
        """The dense kernel's tile loop, and before it the expert search's position (an
        expert and the tiles of the experts before it), carried from tile to tile."""
        b = self.b
        self.at = (b.const(0, T.u32, name="eg"), b.const(0, T.u32, name="eseen"))
        return super().tiles()

    def tile_origin(self, tile):
        """(m0, n0) of a tile number: its expert's first row + the tile row, and the column;
        sets self.end_row (the expert's end: C's row limit) and self.w_row (its W rows). A
        CTA's tile numbers only grow, so the search goes on from the last tile's expert."""
        b, s = self.b, self.s
        g, seen = self.at
        look, found = b.new_label("expert"), b.new_label("found")
        b.label(look)
        first, count = self.expert_rows(g)
        nxt = b.add(seen, self.expert_tiles(count), name="nseen")
        b.branch(found, b.setp("lt", tile, nxt))
        b.mov(nxt, type=T.u32, out=seen)
        b.add(g, 1, out=g)
        b.branch(look)
        b.label(found)
        pm, pn = grouped_tile(b, count, self.N, s.BM, s.BN, s.group_m or 1 << 20,
                              pid=b.sub(tile, seen, name="elocal"))
        self.end_row = b.add(first, count, name="erow")
        # W's rows of this expert: N of them (K-major W) or K (N-major)
        self.w_row = b.mul(g, self.N if self.b_major else self.K, name="wrow")
        return (b.add(first, b.shl(pm, pow2_exponent(s.BM)), name="m0"),
                b.shl(pn, pow2_exponent(s.BN), name="n0"))

    def b_row(self, n0):
        return self.b.add(self.w_row, n0, name="wr") if self.b_major else n0

    def b_k(self, kc):
        return kc if self.b_major else self.b.add(self.w_row, kc, name="wk")

    def epilogue(self, acc, cw, t, m0, n0):
        """The dense kernel's fragment stores, C's rows limited to this tile's expert."""
        whole = self.M
        self.M = self.end_row
        try:
            super().epilogue(acc, cw, t, m0, n0)
        finally:
            self.M = whole

    def staged_epilogue(self, acc, cw, t, leader, m0, n0):
        """A tile wholly inside its expert's rows: the dense kernel's staged C, stored by TMA
        (which clips at C's edges, not at an expert's end); the tile that crosses the
        expert's end: the fragment stores. The branch is the same for the whole CTA, and the
        fragment way leaves the staging buffer alone (the next staged tile still waits for
        the last TMA stores to have read it)."""
        b = self.b
        cross, done = b.new_label("cross"), b.new_label("cstored")
        b.branch(cross, b.setp("gt", b.add(m0, self.s.BM), self.end_row))
        super().staged_epilogue(acc, cw, t, leader, m0, n0)
        b.branch(done)
        b.label(cross)
        self.epilogue(acc, cw, t, m0, n0)
        b.label(done)


def lower_grouped_matmul(s, arch, shape, dtype="bf16", out="bf16", layout="offsets",
                         b_dtype=None, scales=False, name="grouped_matmul", w_major=True):
    """The grouped kernel for schedule s (epilogue "direct", or "tma" where C's rows are
    16-byte aligned: then a C_map parameter; cluster_m=1, split_k=1, persistent) at shape
    {M (all tokens), N, K, G}. w_major=False: W is G x K x N (N-major, torch._grouped_mm's
    layout; 16-bit inputs), its map (G*K) x N in BK x 64 boxes read through wgmma's transpose,
    K a multiple of BK (a box must not run into the next expert)."""
    from ..errors import ScheduleError
    if layout not in LAYOUTS:
        raise ScheduleError(f"grouped_matmul: layout must be one of {', '.join(LAYOUTS)}, got "
                            f"{layout!r}")
    if s.cluster_m != 1 or s.split_k != 1 or not s.persistent:
        raise ScheduleError(f"grouped_matmul schedule {s}: needs cluster_m=1, split_k=1 and "
                            f"a persistent grid (tiles found expert by expert)")
    if s.epilogue == "rows" or s.c_store(out, shape["M"], shape["N"]) not in (None, "tile"):
        raise ScheduleError(f"grouped_matmul schedule {s}: C is stored by TMA in 2-D tiles "
                            f"(epilogue='tma', {out} rows of N={shape['N']} 16-byte aligned) "
                            f"or from the fragments (epilogue='direct')")
    G = shape["G"]
    if not w_major and shape["K"] % s.BK:
        raise ScheduleError(f"grouped_matmul: an N-major W needs K={shape['K']} a multiple of "
                            f"BK={s.BK} (a k-box must stay inside its expert)")
    if layout == "masked" and shape["M"] % G:
        raise ScheduleError(f"grouped_matmul: masked layout needs M={shape['M']} a multiple of "
                            f"G={G} (each expert's block of rows)")

    def make(*args):
        low = GroupedLowering(*args)
        low.groups, low.layout = G, layout
        return low
    return lower(s, arch, shape, dtype=dtype, out=out, name=name, b_dtype=b_dtype,
                 scales=scales, lowering=make, b_major=w_major,
                 extra_params=[Param("rows", T.u64, ptr(T.u32))])
