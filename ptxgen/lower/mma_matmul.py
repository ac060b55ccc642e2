"""Lowering of an MmaMatmulSchedule to an sm_80-style kernel: a multi-stage cp.async pipeline
feeding ldmatrix + mma.sync warps.

    tc_matmul(A, Bt, C, M, N, K)
        A:  M x K row-major (bf16 bits, f16, or f32 read as tf32)
        Bt: N x K row-major (B column-major)
        C:  M x N row-major, f32 or bf16
        K must be a multiple of 8 16-bit (4 tf32) elements, so that every row starts 16-byte
        aligned for cp.async.cg; the operator pads A and Bt first otherwise (ops/pack.py).

Shared memory holds `stages` slots of [A tile BM x 128 B | B tile BN x 128 B]. A row's eight
16-byte chunks are stored XOR-swizzled, chunk c of row r at chunk c ^ (r & 7): the 8 rows an
ldmatrix reads at one K offset then sit in 8 different 16-byte bank groups (no bank conflicts),
and so do the 8 chunks of a row that 8 threads write with cp.async.

Loads: thread t copies chunk t % 8 of rows t / 8 + i * (threads / 8) of each tile. Rows past M
(N) are clamped to the last row: they only feed C rows (columns) that are never stored. Chunks
past K are zero-filled (cp.async src-size 0, the address clamped inside the row), so a ragged
last K step adds zeros. Pipeline: the prologue issues K steps 0 .. stages-2, one commit group
each; step kb waits until at most stages-2 groups are pending (step kb has landed), bar.syncs
(every warp is done with step kb-1, whose slot is refilled next), issues step kb+stages-1 and
commits (an empty group past the end, to keep the count), then runs the mma.sync of step kb.

Fragments (PTX ISA 9.0, 9.7.14.5.8 and 9.7.14.4): ldmatrix.x4 lanes 8j..8j+7 address the rows of
matrix j. For A (m16 x k16) the matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7,
k 8-15), (rows 8-15, k 8-15): exactly a0..a3 of mma m16n8k16. For B, two n8 blocks at once from
Bt (rows n, K contiguous, which is B's "col" layout): (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15,
k 0-7), (n 8-15, k 8-15) = b0, b1 of both blocks. tf32 (m16n8k8) reads the same 32 bytes of a
row per step with the same addresses: a 16-bit pair of ldmatrix is one tf32 element, and the
k8 fragments a0..a3 = (g, t), (g+8, t), (g, t+4), (g+8, t+4), b0, b1 = (t, g), (t+4, g) are the
same four (two) 8x8 b16 matrices.
"""
from ..errors import ScheduleError
from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..schedule.mma_matmul import CHUNK, MMA_K_BYTES, MMA_M, MMA_N, MMA_SHAPE, WARP
from .c_pair_stores import PairStores
from .epilogue import apply_epilogue, epilogue_params
from .cp_async_ring import cp_async_ring
from .raster import grouped_tile
from ..schedule.tc_matmul import ELEM_BYTES, OUT_BYTES, SWIZZLE_BYTES

IN_TYPE = {"bf16": T.b16, "f16": T.f16, "tf32": T.f32}
ROW_CHUNKS = SWIZZLE_BYTES // CHUNK          # 16-byte chunks in one 128-byte tile row


def lower(s, arch, shape, dtype="bf16", out="f32", name="tc_matmul", epilogue=None):
    s.validate(arch, dtype)
    if out not in ("f32", "bf16"):
        raise ScheduleError(f"mma_matmul: output type must be f32 or bf16, got {out!r}")
    if shape["K"] % (CHUNK // ELEM_BYTES[dtype]):
        raise ScheduleError(f"mma_matmul: K={shape['K']} must be a multiple of "
                            f"{CHUNK // ELEM_BYTES[dtype]} (16-byte rows for cp.async); pad "
                            f"A and Bt first")
    m = Module(target=arch)
    in_t, out_t = IN_TYPE[dtype], T.TYPES[out]
    k = m.add_kernel(name, [
        Param("A", T.u64, ptr(in_t, align=CHUNK)), Param("Bt", T.u64, ptr(in_t, align=CHUNK)),
        Param("C", T.u64, ptr(out_t, align=OUT_BYTES[out])),
        Param("M", T.u32), Param("N", T.u32), Param("K", T.u32)] + epilogue_params(epilogue))
    k.directives.append(f".maxntid {s.threads}, 1, 1")
    low = _Lowering(Builder(k), s, dtype, out, shape)
    low.epi = epilogue
    low.run()
    return m


class _Lowering(PairStores):
    epi = None          # a traced epilogue (schedule/epilogue.py) applied before C is stored
    def __init__(self, b, s, dtype, out, shape):
        self.b, self.s, self.dtype, self.out = b, s, dtype, out
        self.elem = ELEM_BYTES[dtype]
        self.per_chunk = CHUNK // self.elem
        self.even_n = shape["N"] % 2 == 0
        self.a_bytes = s.BM * SWIZZLE_BYTES
        self.stage_bytes = s.stage_bytes(self.elem)

    def run(self):
        b, s = self.b, self.s
        tid = b.special("tid.x")
        self.M, self.N, self.K = b.param("M"), b.param("N"), b.param("K")
        self.base = b.address_of(b.dynamic_shared("smem", align=SWIZZLE_BYTES))
        if s.group_m:
            pm, pn = grouped_tile(b, self.M, self.N, s.BM, s.BN, s.group_m)
        else:
            tn = b.shr(b.add(self.N, s.BN - 1), pow2_exponent(s.BN), name="tiles_n")
            ctaid = b.special("ctaid.x")
            pm = b.div(ctaid, tn, name="pid_m")
            pn = b.sub(ctaid, b.mul(pm, tn), name="pid_n")
        self.m0 = b.shl(pm, pow2_exponent(s.BM), name="m0")
        self.n0 = b.shl(pn, pow2_exponent(s.BN), name="n0")
        kblocks = b.shr(b.add(self.K, s.BK - 1), pow2_exponent(s.BK), name="kblocks")
        self.loader_setup(tid)
        warp, lane = b.shr(tid, 5, name="warp"), b.and_(tid, WARP - 1, name="lane")
        wm = b.shr(warp, pow2_exponent(s.warps_n), name="wm")
        wn = b.and_(warp, s.warps_n - 1, name="wn")
        self.fragment_setup(lane, wm, wn)
        acc = [[b.zeros(4) for _ in range(s.WN // MMA_N)] for _ in range(s.WM // MMA_M)]

        cp_async_ring(b, s.stages, kblocks, 0, self.stage_bytes, self.load_step,
                      lambda kb, slot: self.compute_step(acc, slot))
        if self.epi is not None:
            self.user_epilogue(acc, lane, wm, wn)
        self.epilogue(acc, lane, wm, wn)
        b.ret()

    # -- cp.async loads ---------------------------------------------------------------------
    def loader_setup(self, tid):
        """Per operand: the global addresses of this thread's rows (clamped inside the matrix)
        and its shared offset in slot 0; chunk = tid % 8, rows tid/8 + i * threads/8."""
        b, s = self.b, self.s
        self.chunk = b.and_(tid, ROW_CHUNKS - 1, name="chunk")
        row0 = b.shr(tid, pow2_exponent(ROW_CHUNKS), name="lrow")
        self.pass_rows = s.threads // ROW_CHUNKS
        # rows of one pass are a multiple of 8 apart: the swizzle (row & 7) is the same
        swz = b.xor(self.chunk, b.and_(row0, 7), name="lswz")
        self.lds_off = b.mad(row0, SWIZZLE_BYTES, b.shl(swz, 4), name="lsoff")
        ld_bytes = b.mul(self.K, self.elem, name="ldbytes")
        self.rows = {}
        for op, rows, origin, limit in (("A", s.BM, self.m0, self.M),
                                        ("Bt", s.BN, self.n0, self.N)):
            ptr_ = b.param(op)
            last = b.sub(limit, 1, name="last")
            addrs = []
            for i in range(rows // self.pass_rows):
                r = b.min(b.add(origin, b.add(row0, i * self.pass_rows)), last, name="grow")
                addrs.append(b.add(ptr_, b.mul(r, ld_bytes, mode="wide", type=T.u32),
                                   type=T.u64, name=f"g{op}"))
            self.rows[op] = addrs
        self.chunk_elem = b.shl(self.chunk, pow2_exponent(self.per_chunk), name="celem")
        self.k_last = b.sub(self.K, self.per_chunk, name="klast")

    def load_step(self, kb, slot):
        """cp.async of K step kb into the slot at byte offset `slot` (registers)."""
        b, s = self.b, self.s
        kcol = b.add(b.shl(kb, pow2_exponent(s.BK)), self.chunk_elem, name="kcol")
        size = b.selp(CHUNK, 0, b.setp("lt", kcol, self.K), type=T.u32, name="ssize")
        koff = b.cvt(T.u64, b.mul(b.min(kcol, self.k_last), self.elem, name="kb8"), name="koff")
        dst = b.add(b.add(self.base, slot), self.lds_off, name="ldst")
        for op, off in (("A", 0), ("Bt", self.a_bytes)):
            for i, g in enumerate(self.rows[op]):
                src = b.add(g, koff, type=T.u64, name="src")
                b.cp_async(Addr(dst, off + i * self.pass_rows * SWIZZLE_BYTES), src, CHUNK,
                           src_size=size)

    # -- ldmatrix + mma.sync ----------------------------------------------------------------
    def fragment_setup(self, lane, wm, wn):
        """Shared offsets (slot 0) of this lane's ldmatrix rows for each 32-byte K step:
        A rows wm*WM + 8*(j&1) + r, chunk 2*kk + (j>>1); B rows wn*WN + 8*(j>>1) + r, chunk
        2*kk + (j&1) (j = lane/8, r = lane%8), chunks XORed with r as they were stored."""
        b, s = self.b, self.s
        j = b.shr(lane, 3, name="mj")
        r = b.and_(lane, 7, name="mr")
        j0, j1 = b.and_(j, 1, name="j0"), b.shr(j, 1, name="j1")
        a_row = b.add(b.mul(wm, s.WM), b.mad(j0, 8, r), name="arow")
        b_row = b.add(b.mul(wn, s.WN), b.mad(j1, 8, r), name="brow")
        a_base = b.mul(a_row, SWIZZLE_BYTES, name="abase")
        b_base = b.add(b.mul(b_row, SWIZZLE_BYTES), self.a_bytes, name="bbase")
        sa, sb = b.xor(j1, r, name="sa"), b.xor(j0, r, name="sb")
        steps = SWIZZLE_BYTES // MMA_K_BYTES
        self.frag = []
        for kk in range(steps):
            ca = b.shl(b.xor(sa, 2 * kk), 4)
            cb = b.shl(b.xor(sb, 2 * kk), 4)
            self.frag.append((b.add(b.add(self.base, a_base), ca, name=f"fa{kk}"),
                              b.add(b.add(self.base, b_base), cb, name=f"fb{kk}")))

    def compute_step(self, acc, slot):
        b, s = self.b, self.s
        shape = MMA_SHAPE[self.dtype]
        for fa, fb in self.frag:
            pa, pb = b.add(fa, slot, name="pa"), b.add(fb, slot, name="pb")
            a = [b.ldmatrix(Addr(pa, mt * MMA_M * SWIZZLE_BYTES), num=4, name="fa")
                 for mt in range(s.WM // MMA_M)]
            bq = []
            for p in range(s.WN // (2 * MMA_N)):
                d = b.ldmatrix(Addr(pb, p * 2 * MMA_N * SWIZZLE_BYTES), num=4, name="fb")
                bq += [d[0:2], d[2:4]]
            for mt, am in enumerate(a):
                for nt, bn in enumerate(bq):
                    b.mma_sync(shape, am, bn, acc[mt][nt], ab=self.dtype, out=acc[mt][nt])

    # -- epilogue ---------------------------------------------------------------------------
    def user_epilogue(self, acc, lane, wm, wn):
        """The traced epilogue on every accumulator, in place (the m16n8 layout below)."""
        b, s = self.b, self.s
        row = b.add(self.m0, b.mad(wm, s.WM, b.shr(lane, 2)), name="erow")
        col = b.add(self.n0, b.mad(wn, s.WN, b.shl(b.and_(lane, 3), 1)), name="ecol")
        elements = [(acc[mt][nt][2 * h + e], mt * MMA_M + 8 * h, nt * MMA_N + e)
                    for nt in range(s.WN // MMA_N) for e in (0, 1)
                    for mt in range(s.WM // MMA_M) for h in (0, 1)]
        apply_epilogue(b, self.epi, self.M, self.N, row, col, elements)

    def epilogue(self, acc, lane, wm, wn):
        """m16n8 accumulators: lane holds rows g, g+8 (g = lane/4) and columns 2*(lane%4)
        and +1 of each block; stored as pairs (whole tiles unpredicated)."""
        b, s = self.b, self.s
        eb = OUT_BYTES[self.out]
        row = b.add(self.m0, b.mad(wm, s.WM, b.shr(lane, 2)), name="row")
        col = b.add(self.n0, b.mad(wn, s.WN, b.shl(b.and_(lane, 3), 1)), name="col")
        C = b.param("C")
        a0 = b.element_addr(C, b.mad(row, self.N, col, name="ci"), eb, name="c0")
        step8 = b.mul(b.mul(self.N, eb, name="ldc"), 8, mode="wide", type=T.u32, name="c8")
        rows = []
        for mt in range(s.WM // MMA_M):
            lo = a0 if mt == 0 else b.add(rows[-1][2], step8, type=T.u64, name="cr")
            hi = b.add(lo, step8, type=T.u64, name="cr")
            rows.append((b.add(row, mt * MMA_M, name="r") if mt else row, lo, hi,
                         [(nt * MMA_N, acc[mt][nt]) for nt in range(s.WN // MMA_N)]))
        inside = b.and_(b.setp("le", b.add(self.m0, s.BM), self.M),
                        b.setp("le", b.add(self.n0, s.BN), self.N), name="inside")
        self.store_c_tile(rows, col, inside)
