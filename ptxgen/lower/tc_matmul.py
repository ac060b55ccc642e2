"""Lowering of a TcMatmulSchedule to an sm_90a kernel: a TMA producer warpgroup feeding wgmma
consumer warpgroups through an mbarrier ring.

    tc_matmul(A_map, B_map, [C_map,] C, M, N, K)
        A_map: tensor map of A (M x K, row-major), box BM x BK, 128-byte swizzle; with
               a_major=False of At (K x M: A column-major), box BK x 64, BM/64 boxes per stage
        B_map: tensor map of Bt (N x K, row-major: B column-major), box BN/cluster_m x BK; with
               b_major=False of B (K x N, row-major), box BK x 64, BN/cluster_m/64 boxes
        C_map: (staged bf16 C, TcMatmulSchedule.c_store) "tile": tensor map of C, box
               rows_per_consumer x 64, 128-byte swizzle; "rows": C seen as one flat row of M*N
               elements, box 64, 128-byte swizzle (16-byte aligned rows only); none for
               "rows_st" (rows not 16-byte aligned: the threads copy the staged tile with
               st.global, c_row_stores.py)
        C:     M x N row-major, f32 or bf16
    then, each only where asked: scale_a, scale_b (fp8 per-tensor scales, one f32 each,
    multiplied into the accumulators before C is stored), partials, counters (split_k > 1,
    split_k.py), a_scales, b_scales (fp8 block scales, block_scales.py), and a
    grouped GEMM's rows (grouped_matmul.py).
    With ldg=(A, B) (K-major rows not 16-byte aligned, odd K), that operand's map is replaced by
    a raw pointer ("A" / "B", rows K elements apart) and the whole producer warpgroup copies it
    with cp.async (ldg_producer.py; cluster_m=1, stages >= 3).
    With fused=(A, B) the operand's map is of its padded workspace, which producer warps 1..3
    fill chunk by chunk while the kernel runs (fused_pad.py: parameters A_src, A_pad, B_src,
    B_pad, order, flags, nchunks after K; cluster_m=1, persistent).

K-major operands are the layout wgmma reads from shared memory without transposing; an M- or
N-major one lands as columns of 64-element-wide swizzle atoms and is read with the transpose bit.
Shared memory holds `stages` slots of [A box | B box], aligned to the 1024-byte swizzle atom,
(the staged C tile,) then a `full` and an `empty` mbarrier per slot. One producer thread waits
for a slot to be empty, arms its full barrier with the slot's byte count (expect_tx) and issues
the TMA copies; the copies complete the transaction. Each consumer warpgroup waits on the full
barrier, issues its wgmmas for the slot (BK/16 k-steps x its M blocks x BN/wgmma_n N blocks), and
one thread per consumer arrives on the slot's empty barrier once those wgmmas have read it (with
inflight=1 the release lags one slot so a group stays queued). Slots and barrier phases run on
across tiles, so the producer fills the next tile's slots while consumers store C.

Clusters (cluster_m=2): the two CTAs take vertically adjacent tiles; each loads its own A and
half of the common B box, multicast into the same slot of both CTAs, so a slot's empty barrier
counts the consumers of both CTAs and each consumer releases a slot in both (mapa + a remote
arrive). Cluster barriers at the start (barriers initialized) and the end (no CTA leaves while
its peer may still write into it).

Edges: TMA fills elements outside A or Bt with zeros, so partial K steps and edge tiles add
zeros; direct and "rows_st" C stores are predicated on row < M and column < N (edge tiles
only), TMA stores are clipped by the tensor map. With "rows", rows past M start past the flat
map's end (clipped); a row segment of the last, partial tile column would run into the next
row, so that column's tiles are stored from the fragments.
"""

from ..errors import ScheduleError
from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..ir.builder_tensor import cluster_dims, tensor_map_param
from .c_row_stores import RowStores
from .c_pair_stores import PairStores
from .c_tma_stores import StagedStores
from .epilogue import apply_epilogue, epilogue_params
from .raster import grouped_tile
from .fused_pad import FusedPad, check_fused, fused_params, producer_regs
from .ldg_producer import LdgProducer, check_ldg, ldg_full_arrivals, ldg_schedule
from .split_k import SplitK, split_k_params
from .block_scales import BlockScales, block_scale_params, check_block_scales
from ..schedule.tc_matmul import (ELEM_BYTES, FP8, MN_BOX, OUT_BYTES, SWIZZLE_ATOM_BYTES,
                                  SWIZZLE_BYTES, TMA_C_STORES, WARPGROUP, WGMMA_K, WGMMA_M)


def lower(s, arch, shape, dtype="bf16", out="f32", name="tc_matmul", a_major=True,
          b_major=True, ldg=(False, False), fused=(False, False), epilogue=None, b_dtype=None,
          scales=False, block_scales=False, lowering=None, extra_params=()):
    """lowering: the _Lowering class (or a factory of one) to run, extra_params: Params after
    the others (a grouped GEMM's, grouped_matmul.py). block_scales: fp8 scales per 1 x 128
    block of A and 128 x 128 block of B (block_scales.py) instead of `scales`."""
    s.validate(arch, dtype)
    if block_scales:
        check_block_scales(s, dtype, lambda what: _refuse(s, what))
    b_dtype = b_dtype or dtype
    if (dtype in FP8 or b_dtype in FP8) and not (dtype in FP8 and b_dtype in FP8 and a_major
                                                 and b_major and not any(ldg) and not any(fused)):
        raise ScheduleError(f"tc_matmul: fp8 wgmma takes e4m3/e5m2 A and B, both K-major "
                            f"through TMA (row-major A, column-major B), got {dtype} x "
                            f"{b_dtype}")
    if b_dtype != dtype and dtype not in FP8:
        raise ScheduleError(f"tc_matmul: A and B differ in type ({dtype} x {b_dtype}): only "
                            f"the fp8 formats mix")
    check_ldg(s, ldg)
    check_fused(s, fused)
    if s.split_k > 1 and (any(ldg) or any(fused)):
        raise ScheduleError("tc_matmul: split_k takes TMA-loaded operands (no ldg or fused "
                            "copies)")
    if any(ldg) and any(fused):
        raise ScheduleError("tc_matmul: an operand is either copied by the cp.async producer "
                            "(ldg) or by the fused pad copy, not both")
    if (fused[0] and not a_major) or (fused[1] and not b_major):
        raise ScheduleError("tc_matmul: the fused pad copy takes K-major operands only "
                            "(row-major A, column-major B)")
    if any(ldg):                # the producer's register share for its addresses
        s = ldg_schedule(s)
    elif any(fused):            # ... or for the copies' loads in flight
        s = ldg_schedule(s, producer_regs())
    if (ldg[0] and not a_major) or (ldg[1] and not b_major):
        raise ScheduleError("tc_matmul: the ld.global producer loads K-major operands only "
                            "(row-major A, column-major B)")
    if out not in ("f32", "bf16"):
        raise ScheduleError(f"tc_matmul: output type must be f32 or bf16, got {out!r}")
    if not (a_major and b_major):
        if dtype == "tf32":
            raise ScheduleError("tc_matmul: tf32 wgmma has no transpose: A and B must be "
                                "K-major (row-major A, column-major B)")
        if (s.BN // s.cluster_m) % MN_BOX or s.wgmma_n % MN_BOX:
            raise ScheduleError(f"tc_matmul schedule {s}: an N-major B is loaded in "
                                f"{MN_BOX}-column boxes: BN/cluster_m={s.BN // s.cluster_m} and "
                                f"wgmma_n={s.wgmma_n} must be multiples of {MN_BOX}")
    m = Module(target=arch)
    out_t = T.TYPES[out]
    staged = s.c_store(out, shape["M"], shape["N"])
    in_t = T.f32 if dtype == "tf32" else T.b8 if dtype in FP8 else T.b16
    k = m.add_kernel(name, [
        Param(p, T.u64, ptr(in_t)) if on else tensor_map_param(p + "_map")
        for p, on in zip(("A", "B"), ldg)] +
        ([tensor_map_param("C_map")] if staged in TMA_C_STORES else []) + [
        Param("C", T.u64, ptr(out_t, align=OUT_BYTES[out])),
        Param("M", T.u32), Param("N", T.u32), Param("K", T.u32)] + fused_params(fused, in_t) +
        [Param(p, T.u64, ptr(T.f32)) for p in (("scale_a", "scale_b") if scales else ())] +
        split_k_params(s) + (block_scale_params() if block_scales else []) +
        epilogue_params(epilogue) + list(extra_params))
    # setmaxnreg only takes effect under a register cap at entry (.maxnreg)
    k.directives += [f".maxntid {s.threads}, 1, 1", f".maxnreg {s.entry_regs()}"]
    if s.cluster_m > 1:
        cluster_dims(k, s.cluster_m)
    low = (lowering or _Lowering)(Builder(k), s, dtype, out, shape, a_major, b_major, ldg,
                                  fused)
    low.epi = epilogue
    low.ab, low.scales = (dtype, b_dtype) if b_dtype != dtype else dtype, scales
    low.block_scales = block_scales
    low.run()
    return m


def _refuse(s, what):
    raise ScheduleError(f"tc_matmul schedule {s}: {what}")


class _Lowering(StagedStores, PairStores, RowStores, LdgProducer, FusedPad, SplitK,
                BlockScales):
    epi = None          # a traced epilogue (schedule/epilogue.py) applied before C is stored
    block_scales = False
    def __init__(self, b, s, dtype, out, shape, a_major=True, b_major=True, ldg=(False, False),
                 fused=(False, False)):
        self.b, self.s, self.dtype, self.out = b, s, dtype, out
        self.ldg = tuple(ldg)           # (A, B) copied by the producer's threads (cp.async)
        self.fused = tuple(fused)       # (A, B) pad-copied by producer warps 1..3 in-kernel
        # 16-bit rows at odd K: every other row starts 2 bytes off a 4-byte boundary
        self.k_odd = ELEM_BYTES[dtype] == 2 and shape["K"] % 2 == 1
        self.a_major, self.b_major = a_major, b_major
        self.elem = ELEM_BYTES[dtype]
        self.even_n = shape["N"] % 2 == 0      # C rows hold whole pairs: 2-element stores
        self.staged = s.c_store(out, shape["M"], shape["N"])   # None or a staged kind

    # -- layout ---------------------------------------------------------------------------------
    def run(self):
        b, s = self.b, self.s
        tid = b.special("tid.x")
        wg = b.shr(tid, pow2_exponent(WARPGROUP), name="wg")
        smem = b.dynamic_shared("smem", align=SWIZZLE_ATOM_BYTES)
        raw = b.address_of(smem)
        # the swizzle pattern is a function of address bits 4-9: slots start on 1024 bytes
        self.base = b.and_(b.add(raw, SWIZZLE_ATOM_BYTES - 1), -SWIZZLE_ATOM_BYTES & 0xFFFFFFFF,
                           name="base")
        self.stage_bytes = s.stage_bytes(self.elem)
        self.a_bytes = s.a_stage_bytes(self.elem)
        self.cbuf = b.add(self.base, s.stages * self.stage_bytes, name="cbuf")
        self.bars = b.add(self.cbuf, s.c_stage_bytes(self.staged, self.out), name="bars")
        if any(self.ldg):               # the cp.async producer's side words (after the barriers)
            self.side = b.add(self.bars, 16 * s.stages, name="side")
        if any(self.fused):             # the fused copy's staging (after the barriers)
            self.fstage = b.add(self.bars, 16 * s.stages, name="fstage")
        with b.if_(b.setp("eq", tid, 0)):
            for st in range(s.stages):
                b.mbarrier_init(Addr(self.bars, 8 * st),
                                ldg_full_arrivals(self.ldg) if any(self.ldg) else 1)
                # a slot is free once every consumer of every CTA it was multicast to is done
                b.mbarrier_init(Addr(self.bars, 8 * (s.stages + st)), s.consumers * s.cluster_m)
            b.fence_mbarrier_init()
        if s.cluster_m > 1:
            b.cluster_sync()             # the peer's barriers exist before anything targets them
            self.rank = b.cluster_special("cluster_ctarank")
        else:
            b.bar_sync(0)
        self.M, self.N, self.K = b.param("M"), b.param("N"), b.param("K")
        self.ntiles = self.count_tiles()
        self.nunits = self.units()                          # x split_k pieces (split_k.py)
        self.kblocks = b.shr(b.add(self.K, s.BK - 1), pow2_exponent(s.BK), name="kblocks")
        consumer, end = b.new_label("consumer"), b.new_label("done")
        b.branch(consumer, b.setp("ne", wg, 0))
        b.setmaxnreg(s.producer_regs, inc=False)
        if any(self.ldg):               # the whole warpgroup loads (ldg_producer.py)
            self.ldg_producer(tid)
        else:
            if any(self.fused):         # warps 1..3 copy chunks (first: see fused_pad.py)
                self.flags = b.param("flags")       # loaded where both roles pass
                tma = b.new_label("tma")
                b.branch(tma, b.setp("lt", tid, 32))
                self.fused_copier(tid)
                b.branch(end)
                b.label(tma)
            b.branch(end, b.setp("ne", tid, 0))
            self.producer()
        b.branch(end)
        b.label(consumer)
        b.setmaxnreg(s.consumer_regs, inc=True)
        self.consumer(b.sub(wg, 1, name="cw"), b.and_(tid, WARPGROUP - 1, name="t"))
        if self.staged == "rows":       # every thread's last row store has read its source
            b.cp_async_bulk_wait_group(0, read=True)
        elif self.staged in TMA_C_STORES:   # the last TMA store has read its shared source
            with b.predicated(b.setp("eq", b.and_(tid, WARPGROUP - 1), 0)):
                b.cp_async_bulk_wait_group(0, read=True)
        b.label(end)
        if s.cluster_m > 1:
            # no CTA leaves while its peer may still multicast into it or arrive on its barriers
            b.barrier_cluster_arrive(aligned=False)
            b.barrier_cluster_wait(aligned=False)
        b.ret()

    def count_tiles(self):
        """Cluster tiles of C: cluster_m x BM rows by BN columns."""
        b, s = self.b, self.s
        tm = b.shr(b.add(self.M, s.BM * s.cluster_m - 1), pow2_exponent(s.BM * s.cluster_m),
                   name="tiles_m")
        tn = b.shr(b.add(self.N, s.BN - 1), pow2_exponent(s.BN), name="tiles_n")
        return b.mul(tm, tn, name="ntiles")

    def b_row(self, n0):
        """B's tensor-map coordinate of C column n0 (a grouped GEMM's experts stack their B
        rows)."""
        return n0

    def b_k(self, kc):
        """B's tensor-map coordinate of k element kc (likewise, for an N-major B)."""
        return kc

    def tiles(self):
        """for_range over this CTA's (cluster's) tiles: from its id, the grid's count apart."""
        b, s = self.b, self.s
        if s.cluster_m > 1:
            first, count = b.cluster_special("clusterid.x"), b.cluster_special("nclusterid.x")
        else:
            first, count = b.special("ctaid.x"), b.special("nctaid.x")
        # not persistent: one tile per CTA (cluster), and a step of ntiles runs the loop once
        return b.for_range(first, self.nunits, count if s.persistent else self.ntiles,
                           type=T.u32, name="tile")

    def tile_origin(self, tile):
        """(m0, n0) of this CTA's BM x BN tile: the cluster tile's rows split by CTA rank."""
        b, s = self.b, self.s
        rows = s.BM * s.cluster_m
        if s.group_m:
            pm, pn = grouped_tile(b, self.M, self.N, rows, s.BN, s.group_m, pid=tile)
        else:
            tn = b.shr(b.add(self.N, s.BN - 1), pow2_exponent(s.BN), name="tiles_n")
            pm = b.div(tile, tn, name="pid_m")
            pn = b.sub(tile, b.mul(pm, tn), name="pid_n")
        m0 = b.shl(pm, pow2_exponent(rows), name="m0")
        if s.cluster_m > 1:
            m0 = b.mad(self.rank, s.BM, m0, name="m0")
        return m0, b.shl(pn, pow2_exponent(s.BN), name="n0")

    def advance(self, stage, phase):
        b = self.b
        b.add(stage, 1, out=stage)
        wrap = b.setp("eq", stage, self.s.stages)
        with b.predicated(wrap):
            b.mov(0, type=T.u32, out=stage)
            b.xor(phase, 1, out=phase)

    def full_bar(self, stage):
        return self.b.mad(stage, 8, self.bars, name="full")

    def empty_bar(self, stage):
        return self.b.mad(stage, 8, self.b.add(self.bars, 8 * self.s.stages), name="empty")

    # -- producer -------------------------------------------------------------------------------
    def producer(self):
        b, s = self.b, self.s
        # the tensor maps' generic addresses (cvta.param: the form checked on the H200)
        maps = [self.b.tensor_map_address(p, name="map") for p in ("A_map", "B_map")]
        b_rows = s.BN // s.cluster_m                 # B rows this CTA loads (and multicasts)
        if s.cluster_m > 1:
            mask = b.const((1 << s.cluster_m) - 1, T.u16, name="mask")
            b_off = b.mad(self.rank, b_rows * SWIZZLE_BYTES, self.a_bytes, name="boff")
        else:
            mask, b_off = None, self.a_bytes
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        if any(self.fused):
            self.fused_setup()
        with self.tiles() as unit:
            tile, piece = self.unit_tile(unit)
            m0, n0 = self.tile_origin(tile)
            if s.cluster_m > 1:
                n0 = b.mad(self.rank, b_rows, n0, name="nb0")
            with b.for_range(*self.k_range(piece), type=T.u32, name="kb") as kb:
                if any(self.fused):
                    self.fused_wait(m0, n0, kb)
                b.mbarrier_wait_parity(self.empty_bar(stage), b.xor(phase, 1, name="par"))
                full = self.full_bar(stage)
                # the whole slot arrives here: this CTA's A, its B rows and the peers' B rows
                b.mbarrier_arrive_expect_tx(full, self.stage_bytes)
                dst = b.mad(stage, self.stage_bytes, self.base, name="dst")
                kc = b.shl(kb, pow2_exponent(s.BK), name="kc")
                self.load(dst, maps[0], kc, m0, s.BM, self.a_major, full)
                self.load(b.add(dst, b_off, name="dstb"), maps[1], self.b_k(kc),
                          self.b_row(n0), b_rows,
                          self.b_major, full, mask)
                self.advance(stage, phase)
        if any(self.fused):
            self.fused_exit()

    def load(self, dst, tmap, kc, r0, rows, k_major, full, mask=None):
        """TMA loads of one operand's `rows` tile rows (M or N) from r0, K from kc: K-major,
        one box of rows x BK (128-byte rows); M-/N-major, rows/64 boxes of BK k-rows of 64
        elements, each a column of 1024-byte swizzle atoms, BK x 128 bytes apart (the
        descriptor's leading byte offset)."""
        b = self.b
        if k_major:
            b.cp_async_bulk_tensor_load(dst, tmap, (kc, r0), full, multicast_mask=mask)
            return
        for j in range(rows // MN_BOX):
            b.cp_async_bulk_tensor_load(b.add(dst, j * self.s.BK * SWIZZLE_BYTES, name="dstj"),
                                        tmap, (b.add(r0, j * MN_BOX, name="rj"), kc), full,
                                        multicast_mask=mask)


    # -- consumers ------------------------------------------------------------------------------
    def consumer(self, cw, t):
        b, s = self.b, self.s
        leader = b.setp("eq", t, 0)
        a_rows = b.mul(cw, s.rows_per_consumer * SWIZZLE_BYTES, name="arows")
        # K-major: rows of 128 bytes, 8-row atoms 1024 apart (the leading offset unused: one
        # swizzled row spans BK); M-/N-major: 64-element runs, the next 64 a box (BK x 128
        # bytes) apart, 8 k-rows an atom. Either way 64 tile rows take 64 x 128 bytes.
        desc = {True: dict(lbo=16, sbo=SWIZZLE_ATOM_BYTES, swizzle=SWIZZLE_BYTES),
                False: dict(lbo=s.BK * SWIZZLE_BYTES, sbo=SWIZZLE_ATOM_BYTES,
                            swizzle=SWIZZLE_BYTES)}
        desc_a = b.wgmma_descriptor(b.add(self.base, a_rows, name="abase"), **desc[self.a_major])
        desc_b = b.wgmma_descriptor(b.add(self.base, self.a_bytes, name="bbase"),
                                    **desc[self.b_major])
        trans = dict(trans_a=int(not self.a_major), trans_b=int(not self.b_major)) \
            if not (self.a_major and self.b_major) else {}
        scale_d = b.setp("ne", b.const(1, T.u32, name="one"), 0)
        if self.scales:                 # the per-tensor scales' product, once per consumer
            scale = b.mul(*(b.ld("global", T.f32, b.param(p), name=p)
                            for p in ("scale_a", "scale_b")), type=T.f32, name="scale")
        if self.staged in TMA_C_STORES:
            self.cmap = self.b.tensor_map_address("C_map", name="map")
        stage, phase = b.const(0, T.u32, name="stage"), b.const(0, T.u32, name="phase")
        prev = b.const(0, T.u32, name="prev")
        # several wgmma blocks with block scales: one block accumulator (blockwise_k_loop)
        blockwise = self.block_scales and s.m_blocks * s.n_blocks > 1
        acc = [[[b.reg(T.f32, "acc") for _ in range(s.wgmma_n // 2)]
                for _ in range(1 if blockwise else s.n_blocks)]
               for _ in range(1 if blockwise else s.m_blocks)]
        if self.block_scales:           # the promoted f32 sum beside the per-block accumulator
            self.block_scale_setup()
            total = [[[b.reg(T.f32, "tot") for _ in range(s.wgmma_n // 2)]
                      for _ in range(s.n_blocks)] for _ in range(s.m_blocks)]
        pingpong = self.block_scales and s.inflight
        if pingpong:                    # the second block accumulator (block_scales.py)
            pong = [[[b.reg(T.f32, "pong") for _ in nb] for nb in mb] for mb in acc]

        def next_group(into):
            self.issue_stage(stage, phase, into, desc_a, desc_b, scale_d, trans)
            self.advance(stage, phase)
        with self.tiles() as unit:
            tile, piece = self.unit_tile(unit)
            m0, n0 = self.tile_origin(tile)
            klo, khi = self.k_range(piece)
            for r in (r for mb in (total if self.block_scales else acc) for nb in mb for r in nb):
                b.mov(0.0, type=T.f32, out=r)
            if blockwise:
                self.blockwise_k_loop(acc[0][0], total, klo, khi, stage, phase, leader,
                                      (desc_a, desc_b, scale_d, trans), (m0, n0, cw, t))
            elif pingpong:
                self.pingpong_k_loop(next_group, (acc, pong), total, klo, khi, prev, leader,
                                     (m0, n0, cw, t))
            else:
                self.k_loop(acc, total if self.block_scales else None, klo, khi, stage, phase,
                            prev, leader, (desc_a, desc_b, scale_d, trans), (m0, n0, cw, t))
            if self.block_scales:
                acc_out, acc = acc, total     # C is the promoted sum (acc restored below)
            if piece is not None:       # split-K: only a tile's last piece stores C
                skip = b.new_label("notlast")
                self.split_k_fixup(acc, cw, t, tile, piece, m0, skip)
            if self.scales:
                for r in (r for mb in acc for nb in mb for r in nb):
                    b.mul(r, scale, type=T.f32, out=r)
            if self.epi is not None:
                self.user_epilogue(acc, cw, t, m0, n0)
            if self.staged == "rows_st":
                self.rows_st_epilogue(acc, cw, t, m0, n0)
            elif self.staged:
                self.staged_epilogue(acc, cw, t, leader, m0, n0)
            else:
                self.epilogue(acc, cw, t, m0, n0)
            if piece is not None:
                b.label(skip)
            if self.block_scales:
                acc = acc_out

    def k_loop(self, acc, total, klo, khi, stage, phase, prev, leader, operands, where):
        """The K loop: a wgmma group per stage, inflight groups left running when its slot is
        released; with block scales (total), each stage's block promoted once it is done."""
        b, s = self.b, self.s
        with b.for_range(klo, khi, type=T.u32, name="kb") as kb:
            self.issue_stage(stage, phase, acc, *operands)
            b.wgmma_wait_group(s.inflight)
            if total is not None:
                self.promote(acc, total, kb, *where)
            if s.inflight:
                # the group before this one has finished reading its slot
                with b.predicated(b.and_(leader, b.setp("ne", kb, klo), name="rel")):
                    self.release(prev)
                b.mov(stage, out=prev)
            else:
                with b.predicated(leader):
                    self.release(stage)
            self.advance(stage, phase)
        if s.inflight:
            b.wgmma_wait_group(0)
            with b.predicated(b.and_(leader, b.setp("ne", khi, klo), name="rel")):
                self.release(prev)

    def issue_stage(self, stage, phase, acc, desc_a, desc_b, scale_d, trans):
        """Wait for the slot to be full and issue its wgmmas into acc as one group (block
        scales: from zero)."""
        self.issue_group(self.slot_descriptors(stage, phase, desc_a, desc_b), acc, scale_d,
                         trans)

    def slot_descriptors(self, stage, phase, desc_a, desc_b):
        """Wait for the slot to be full: the descriptors of its A and B boxes."""
        b = self.b
        b.mbarrier_wait_parity(self.full_bar(stage), phase)
        off = b.mul(stage, self.stage_bytes >> 4, mode="wide", type=T.u32, name="doff")
        return b.add(desc_a, off, name="da"), b.add(desc_b, off, name="db")

    def issue_group(self, descs, acc, scale_d, trans, block=None):
        """The slot's wgmmas into acc[mb][nb] as one group; block=(mb, nb): that wgmma block's
        only."""
        b, s = self.b, self.s
        da, db = descs
        b.wgmma_fence()
        wk = WGMMA_K[self.dtype]
        for kk in range(s.BK // wk):
            # a k step: wk elements along a K-major row, wk 128-byte rows M-/N-major
            ka, kb_ = (kk * wk * (self.elem if major else SWIZZLE_BYTES)
                       for major in (self.a_major, self.b_major))
            for mb in range(s.m_blocks) if block is None else (block[0],):
                dam = b.add(da, (mb * WGMMA_M * SWIZZLE_BYTES + ka) >> 4, name="dam")
                for nb in range(s.n_blocks) if block is None else (block[1],):
                    dbn = b.add(db, (nb * s.wgmma_n * SWIZZLE_BYTES + kb_) >> 4, name="dbn")
                    b.wgmma_mma_async(s.wgmma_n, acc[mb][nb], dam, dbn, ab=self.ab,
                                      scale_d=0 if self.block_scales and kk == 0
                                      else scale_d, **trans)
        b.wgmma_commit_group()

    def release(self, stage):
        """Arrive on the slot's empty barrier in every CTA whose producer fills it."""
        b, s = self.b, self.s
        bar = self.empty_bar(stage)
        if s.cluster_m == 1:
            b.mbarrier_arrive(bar)
            return
        for rank in range(s.cluster_m):     # the slot was read by wgmma only: cta scope
            b.mbarrier_arrive(b.mapa(bar, rank), cluster=True, scope="cta")

    # -- epilogue -------------------------------------------------------------------------------
    def user_epilogue(self, acc, cw, t, m0, n0):
        """The traced epilogue on every accumulator, in place, before any kind of C store (the
        wgmma D layout: see epilogue())."""
        b, s = self.b, self.s
        lane = b.and_(t, 31, name="lane")
        row = b.add(m0, b.mad(cw, s.rows_per_consumer, b.mad(b.shr(t, 5), 16, b.shr(lane, 2))),
                    name="erow")
        col = b.add(n0, b.shl(b.and_(lane, 3), 1), name="ecol")
        elements = [(acc[mb][nb][4 * j + 2 * h + e], mb * WGMMA_M + 8 * h, nb * s.wgmma_n + 8 * j + e)
                    for nb in range(s.n_blocks) for j in range(s.wgmma_n // 8) for e in (0, 1)
                    for mb in range(s.m_blocks) for h in (0, 1)]
        apply_epilogue(b, self.epi, self.M, self.N, row, col, elements)

    def epilogue(self, acc, cw, t, m0, n0):
        """Accumulator fragment of m64nN (PTX ISA 9.0, 9.7.15.5.1, wgmma D layout): thread t
        holds, for j < N/8, rows r = 16*(t/32) + (t%32)/4 and r+8, columns 8j + 2*(t%4) + {0,1},
        as acc[4j], acc[4j+1] (row r) and acc[4j+2], acc[4j+3] (row r+8)."""
        b, s = self.b, self.s
        eb = OUT_BYTES[self.out]
        lane = b.and_(t, 31, name="lane")
        row = b.add(m0, b.mad(cw, s.rows_per_consumer, b.mad(b.shr(t, 5), 16, b.shr(lane, 2))),
                    name="row")
        col = b.add(n0, b.shl(b.and_(lane, 3), 1), name="col")
        C = b.param("C")
        row_bytes = b.mul(self.N, eb, name="ldc")
        rows = []
        for mb in range(s.m_blocks):
            r = b.add(row, mb * WGMMA_M, name="r")
            a0 = b.element_addr(C, b.mad(r, self.N, col, name="ci"), eb, name="c0")
            a8 = b.add(a0, b.mul(row_bytes, 8, mode="wide", type=T.u32), type=T.u64, name="c8")
            rows.append((r, a0, a8, [(nb * s.wgmma_n + 8 * j, acc[mb][nb][4 * j: 4 * j + 4])
                                     for nb in range(s.n_blocks)
                                     for j in range(s.wgmma_n // 8)]))
        inside = b.and_(b.setp("le", b.add(m0, s.BM), self.M),
                        b.setp("le", b.add(n0, s.BN), self.N), name="inside")
        self.store_c_tile(rows, col, inside)


TcLowering = _Lowering
