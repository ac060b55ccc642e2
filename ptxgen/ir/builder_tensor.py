"""Builder methods for tensor cores and Hopper's asynchronous machinery (a Builder mixin).

    acc = b.mma_sync("m16n8k16", a_regs, b_regs, acc, ab="bf16")          # sm_80
    frag = b.ldmatrix(smem_addr, num=4, trans=False)
    b.wgmma_fence(); acc = b.wgmma_mma_async(128, acc, desc_a, desc_b, scale_d=1)   # sm_90a
    b.wgmma_commit_group(); b.wgmma_wait_group(0)
    b.mbarrier_init(bar, 1); b.mbarrier_arrive_expect_tx(bar, nbytes)
    b.cp_async_bulk_tensor_load(dst, tmap, (x, y), bar); b.mbarrier_wait_parity(bar, phase)

Each method emits exactly the PTX instruction the ISA spells (PTX ISA 9.0, sections 9.7.14 mma,
9.7.15 wgmma, 9.7.9.24/25 cp.async.bulk(.tensor), 9.7.13.15 mbarrier) as a generic Instr:
operand order is PTX's, vector operands are Vec, the tensor operand is TensorCoords. Fragment
sizes come from ir.fragments. Shared addresses are 32-bit shared-window registers (or Addr).
"""
from . import fragments as F
from . import types as T
from .instr import Instr
from .values import Addr, Imm, PredPair, Raw, Reg, Sym, TensorCoords, Vec

SINK = Raw("_")
CLUSTER_SPECIALS = frozenset({
    "clusterid.x", "clusterid.y", "clusterid.z", "nclusterid.x", "nclusterid.y", "nclusterid.z",
    "cluster_ctaid.x", "cluster_ctaid.y", "cluster_ctaid.z", "cluster_nctaid.x",
    "cluster_nctaid.y", "cluster_nctaid.z", "cluster_ctarank", "cluster_nctarank",
    "is_explicit_cluster"})
FP8 = ("e4m3", "e5m2")


def _addr(a):
    return a if isinstance(a, Addr) else Addr(a)


def _regs(xs, n, what):
    xs = tuple(xs)
    if len(xs) != n:
        raise ValueError(f"{what} needs {n} registers, got {len(xs)}")
    for x in xs:
        if not isinstance(x, Reg):
            raise ValueError(f"{what} operands must be registers, got {x!r}")
    return xs


def tensor_map_param(name):
    """The kernel parameter holding a CUtensorMap: 128 bytes, 64-byte aligned (CUDA driver API,
    cuTensorMapEncodeTiled: the map must be 64-byte aligned)."""
    from .module import Param
    return Param(name, T.b8, array=128, align=64)


class TensorOps:
    """Mixed into Builder: needs self.reg, self.emit, self.operand, self._op, self.setp …"""

    # -- registers ----------------------------------------------------------------------------
    def zeros(self, n, type=T.f32, name="acc"):
        """n fresh registers set to 0 (an accumulator to start from)."""
        return tuple(self.mov(Imm(0, type) if type.is_int or type.kind == "bits" else
                              Imm(0.0, type), type=type, name=name) for _ in range(n))

    def _fresh(self, n, type, name):
        return tuple(self.reg(type, name) for _ in range(n))

    # -- mma.sync (sm_80) -----------------------------------------------------------------------
    def mma_sync(self, shape, a, b, c, *, ab="bf16", acc=None, satfinite=False, out=None,
                 name="d"):
        """D = A·B + C on one warp: A row-major, B column-major (the only layouts of these
        shapes). a/b are the packed 32-bit input registers, c the accumulator registers (f32,
        s32, or f16x2-packed b32 for acc='f16'); returns D's registers (new unless `out`).
        satfinite (integer shapes): clamp to the s32 range instead of wrapping."""
        kind = F.mma_kind(shape, ab)
        acc = acc or kind.accs[0]
        if acc not in kind.accs:
            raise ValueError(f"mma.sync {shape}.{ab} accumulates into {', '.join(kind.accs)}, "
                             f"not {acc}")
        a = _regs(a, kind.a_regs, f"mma {shape} A")
        b = _regs(b, kind.b_regs, f"mma {shape} B")
        nc = kind.c_regs(acc)
        c = _regs(c, nc, f"mma {shape} C")
        rt = {"f32": T.f32, "s32": T.s32, "f16": T.b32}[acc]
        d = _regs(out, nc, f"mma {shape} D") if out is not None else self._fresh(nc, rt, name)
        mods = ("sync", "aligned", shape, "row", "col")
        if ab in ("s8", "u8"):
            mods += (("satfinite",) if satfinite else ()) + ("s32", ab, ab, "s32")
        else:
            mods += (acc, ab, ab, acc)
        self.emit(Instr("mma", mods, (Vec(d), Vec(a), Vec(b), Vec(c))))
        return d

    # -- ldmatrix / stmatrix ----------------------------------------------------------------------
    def ldmatrix(self, address, *, num=4, trans=False, out=None, name="fr"):
        """ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16: `num` 8×8 b16 matrices, one
        32-bit register each; lanes 8j..8j+7 give matrix j's row addresses (sm_75+)."""
        if num not in (1, 2, 4):
            raise ValueError(f"ldmatrix loads 1, 2 or 4 matrices, not {num}")
        d = _regs(out, num, "ldmatrix") if out is not None else self._fresh(num, T.b32, name)
        mods = ("sync", "aligned", "m8n8", f"x{num}") + (("trans",) if trans else ()) + \
            ("shared", "b16")
        self.emit(Instr("ldmatrix", mods, (Vec(d), _addr(address))))
        return d

    def stmatrix(self, address, regs, *, trans=False):
        """stmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16 (sm_90): ldmatrix's inverse."""
        regs = tuple(regs)
        if len(regs) not in (1, 2, 4):
            raise ValueError(f"stmatrix stores 1, 2 or 4 matrices, not {len(regs)}")
        _regs(regs, len(regs), "stmatrix")
        mods = ("sync", "aligned", "m8n8", f"x{len(regs)}") + (("trans",) if trans else ()) + \
            ("shared", "b16")
        return self.emit(Instr("stmatrix", mods, (_addr(address), Vec(regs))))

    # -- conversions ----------------------------------------------------------------------------
    def cvt_pack(self, dtype, hi, lo, *, relu=False, satfinite=False, name="pk"):
        """cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo: two f32 rounded to nearest-even and packed, `hi`
        in the upper half (the ISA's operand order). Returns a b32 register."""
        if dtype not in ("bf16x2", "f16x2"):
            raise ValueError(f"cvt_pack packs into bf16x2 or f16x2, not {dtype!r}")
        mods = ("rn",) + (("relu",) if relu else ()) + (("satfinite",) if satfinite else ()) + \
            (dtype, "f32")
        return self._op("cvt", mods, T.b32,
                        (self.operand(hi, T.f32), self.operand(lo, T.f32)), name=name)

    def cvt_tf32(self, x, *, rounding="rna", name="tf"):
        """cvt.rna.tf32.f32: f32 rounded to tf32 (10-bit mantissa), kept in a b32 register.
        rounding 'rna' (sm_80) or 'rn'/'rz' with .satfinite (sm_90, PTX 7.8)."""
        if rounding == "rna":
            mods = ("rna", "tf32", "f32")
        elif rounding in ("rn", "rz"):
            mods = (rounding, "satfinite", "tf32", "f32")
        else:
            raise ValueError(f"cvt to tf32 rounds 'rna', 'rn' or 'rz', not {rounding!r}")
        return self._op("cvt", mods, T.b32, (self.operand(x, T.f32),), name=name)

    def cvt_to_fp8x2(self, fmt, hi, lo=None, *, relu=False, name="f8"):
        """cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, hi, lo (two f32 → a b16 pair, `hi` upper), or
        .f16x2 d, x when `lo` is None and `hi` is an f16x2 register (sm_89+)."""
        if fmt not in FP8:
            raise ValueError(f"fp8 format must be e4m3 or e5m2, not {fmt!r}")
        mods = ("rn", "satfinite") + (("relu",) if relu else ()) + (f"{fmt}x2",)
        if lo is None:
            srcs, mods = (self.operand(hi, T.b32),), mods + ("f16x2",)
        else:
            srcs, mods = (self.operand(hi, T.f32), self.operand(lo, T.f32)), mods + ("f32",)
        return self._op("cvt", mods, T.b16, srcs, name=name)

    def cvt_from_fp8x2(self, fmt, x, *, relu=False, name="h2"):
        """cvt.rn.f16x2.{e4m3x2,e5m2x2} d, x: a b16 fp8 pair → f16x2 in a b32 register (exact)."""
        if fmt not in FP8:
            raise ValueError(f"fp8 format must be e4m3 or e5m2, not {fmt!r}")
        mods = ("rn",) + (("relu",) if relu else ()) + ("f16x2", f"{fmt}x2")
        return self._op("cvt", mods, T.b32, (self.operand(x, T.b16),), name=name)

    # -- wgmma (sm_90a) ---------------------------------------------------------------------------
    def wgmma_fence(self):
        """wgmma.fence: order this warpgroup's register accesses (accumulators, A fragments)
        before the wgmma.mma_async that follow."""
        return self.emit(Instr("wgmma", ("fence", "sync", "aligned")))

    def wgmma_commit_group(self):
        """wgmma.commit_group: close the group of wgmma.mma_async issued since the last one."""
        return self.emit(Instr("wgmma", ("commit_group", "sync", "aligned")))

    def wgmma_wait_group(self, pending=0):
        """wgmma.wait_group N: wait until at most `pending` committed wgmma groups are still
        running (their accumulators are then safe to read)."""
        return self.emit(Instr("wgmma", ("wait_group", "sync", "aligned"),
                               (Imm(pending, T.u32),)))

    def wgmma_descriptor(self, smem_addr, *, lbo, sbo, swizzle=None, name="desc"):
        """The 64-bit matrix descriptor of a shared tile at run time: ((addr & 0x3FFFF) >> 4)
        ORed with the constant fields (fragments.encode_descriptor)."""
        high = F.descriptor_high(lbo, sbo, swizzle)
        a = self.and_(smem_addr, 0x3FFFF, type=T.u32, name=name)
        a = self.shr(a, 4, type=T.u32, name=name)
        wide = self.cvt(T.u64, a, name=name)
        return self.or_(wide, Imm(high, T.b64), type=T.u64, name=name)

    def wgmma_mma_async(self, n, d, a, b_desc, *, ab="bf16", acc="f32", scale_d=1,
                        scale_a=1, scale_b=1, trans_a=0, trans_b=0, name="acc"):
        """wgmma.mma_async.sync.aligned.m64n{n}k{16|8|32}.{acc}.{ab}.{ab} on a warpgroup (k8 for
        ab="tf32": 32-bit elements, f32 accumulators; k32 for the fp8 formats "e4m3"/"e5m2",
        or an (A, B) pair of them: 8-bit elements; both K-major in shared memory).

        d: the accumulator registers (n/2 f32 per thread; None → fresh ones, for scale_d=0);
        a: a u64 descriptor register (A in shared memory) or 4 b32 registers (A in registers,
        then trans_a must be 0); b_desc: B's descriptor. scale_d: a predicate register or
        0/1 (0: D = A·B, ignoring d's value). scale_a/b: ±1. Returns the D registers."""
        if n not in F.WGMMA_N:
            raise ValueError(f"wgmma N must be a multiple of 8 in 8..256, not {n}")
        # ab: one type for A and B, or an (A, B) pair of fp8 formats (e4m3 x e5m2 is legal)
        a_t, b_t = ab if isinstance(ab, tuple) else (ab, ab)
        fp8 = a_t in FP8 and b_t in FP8
        if not (fp8 or (a_t == b_t and a_t in ("bf16", "f16", "tf32"))) or \
                acc not in ("f32", "f16") or (a_t not in ("f16",) + FP8 and acc == "f16"):
            raise ValueError(f"wgmma {ab} → {acc} is not supported (bf16/f16/tf32/e4m3/e5m2 → "
                             f"f32, f16/e4m3/e5m2 → f16)")
        # PTX ISA 9.0, 9.7.15.5: .tf32 is m64nNk8 and .e4m3/.e5m2 m64nNk32, both K-major
        # operands only (no transpose immediates), A from a descriptor or registers
        k = 8 if a_t == "tf32" else 32 if fp8 else 16
        if (a_t == "tf32" or fp8) and (trans_a or trans_b or not isinstance(a, Reg)):
            raise ValueError(f"wgmma .{a_t} reads K-major A and B through descriptors (no "
                             f"transpose; A in registers is not supported here)")
        nd = F.wgmma_d_regs(n, acc)
        rt = T.f32 if acc == "f32" else T.b32
        d = _regs(d, nd, f"wgmma m64n{n}k{k} D") if d is not None else self._fresh(nd, rt, name)
        if scale_a not in (1, -1) or scale_b not in (1, -1):
            raise ValueError("wgmma scale-a and scale-b are immediates 1 or -1")
        if isinstance(scale_d, Reg):
            if scale_d.type != T.pred:
                raise ValueError(f"wgmma scale-d {scale_d.name} must be a predicate")
            sd = scale_d
        elif scale_d in (0, 1, True, False):
            sd = self.setp("ne", Imm(int(scale_d), T.u32), Imm(0, T.u32), type=T.u32,
                           name="scd")
        else:
            raise ValueError(f"wgmma scale-d must be a predicate register or 0/1, not {scale_d!r}")
        imms = [Imm(scale_a, T.s32), Imm(scale_b, T.s32)]
        if a_t == "tf32" or fp8:
            a_op = a
        elif isinstance(a, Reg):
            a_op = a
            imms += [Imm(int(trans_a), T.u32), Imm(int(trans_b), T.u32)]
        else:
            if trans_a:
                raise ValueError("wgmma with A in registers has no A transpose")
            a_op = Vec(_regs(a, 4, "wgmma A from registers"))
            imms += [Imm(int(trans_b), T.u32)]
        mods = ("mma_async", "sync", "aligned", f"m64n{n}k{k}", acc, a_t, b_t)
        self.emit(Instr("wgmma", mods, (Vec(d), a_op, b_desc, sd) + tuple(imms)))
        return d

    # -- mbarrier --------------------------------------------------------------------------------
    def mbarrier_init(self, bar, count):
        """mbarrier.init.shared::cta.b64 [bar], count: `count` arrivals complete a phase."""
        return self.emit(Instr("mbarrier", ("init", "shared::cta", "b64"),
                               (_addr(bar), self.operand(count, T.u32))))

    def mbarrier_inval(self, bar):
        """mbarrier.inval: retire the barrier at shared address `bar` so its memory can be reused."""
        return self.emit(Instr("mbarrier", ("inval", "shared::cta", "b64"), (_addr(bar),)))

    def mbarrier_arrive(self, bar, *, count=None, cluster=False, scope="cluster", name="state"):
        """mbarrier.arrive: returns the b64 state register; `cluster=True` arrives on a barrier
        of another CTA of the cluster (address from mapa; the state is then the sink `_`).
        scope (cluster=True): "cluster" releases this thread's earlier accesses to the whole
        cluster (.release.cluster: ptxas emits a GPU-wide MEMBAR for it); "cta" keeps the
        default .release.cta, enough when what is released was only read through the async
        proxy (wgmma operands in shared memory), as CUTLASS's ClusterBarrier::arrive does."""
        if scope not in ("cluster", "cta"):
            raise ValueError(f"mbarrier.arrive scope must be cluster or cta, not {scope!r}")
        if cluster:
            sem = ("release", "cluster") if scope == "cluster" else ()
            mods, dst = ("arrive",) + sem + ("shared::cluster", "b64"), SINK
        else:
            mods, dst = ("arrive", "shared::cta", "b64"), self.reg(T.b64, name)
        ops = (dst, _addr(bar)) + ((self.operand(count, T.u32),) if count is not None else ())
        self.emit(Instr("mbarrier", mods, ops))
        return None if cluster else dst

    def mbarrier_arrive_expect_tx(self, bar, tx_bytes, *, cluster=False, name="state"):
        """mbarrier.arrive.expect_tx.shared::cta.b64: arrive once and expect `tx_bytes` more
        bytes of asynchronous copies before the phase can complete (sm_90). cluster=True:
        on a barrier of another CTA of the cluster (address from mapa;
        .release.cluster.shared::cluster, the state is the sink `_`; returns None)."""
        if cluster:
            mods, dst = ("arrive", "expect_tx", "release", "cluster", "shared::cluster",
                         "b64"), SINK
        else:
            mods, dst = ("arrive", "expect_tx", "shared::cta", "b64"), self.reg(T.b64, name)
        self.emit(Instr("mbarrier", mods, (dst, _addr(bar), self.operand(tx_bytes, T.u32))))
        return None if cluster else dst

    def mbarrier_expect_tx(self, bar, tx_bytes):
        """mbarrier.expect_tx.relaxed.cta.shared::cta.b64: raise the expected bytes, no arrive."""
        return self.emit(Instr("mbarrier", ("expect_tx", "relaxed", "cta", "shared::cta", "b64"),
                               (_addr(bar), self.operand(tx_bytes, T.u32))))

    def mbarrier_try_wait_parity(self, bar, parity, *, name="ready"):
        """mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity: p is true once the phase
        with that parity has completed (may also return false after a time-out: loop)."""
        p = self.reg(T.pred, name)
        self.emit(Instr("mbarrier", ("try_wait", "parity", "shared::cta", "b64"),
                        (p, _addr(bar), self.operand(parity, T.u32))))
        return p

    def mbarrier_wait_parity(self, bar, parity):
        """Loop on try_wait.parity until the phase of that parity has completed."""
        head = self.new_label("mbar_wait")
        self.label(head)
        p = self.mbarrier_try_wait_parity(bar, parity)
        self.branch(head, p, negate=True)

    # -- TMA: cp.async.bulk.tensor (sm_90) --------------------------------------------------------
    def cp_async_bulk_tensor_load(self, dst, tmap, coords, bar, *, multicast_mask=None):
        """cp.async.bulk.tensor.{2,3}d.shared::cluster.global.mbarrier::complete_tx::bytes
        [dst], [tmap, {coords}], [bar] (+ .multicast::cluster and a 16-bit CTA mask): one box
        of the tensor map at `coords` (innermost first) into shared memory; the bytes complete
        on mbarrier `bar`. tmap: see tensor_map_address."""
        coords, tmap = self._coords(coords), self.tensor_map_address(tmap)
        mods = ("async", "bulk", "tensor", f"{len(coords)}d", "shared::cluster", "global",
                "mbarrier::complete_tx::bytes")
        ops = (_addr(dst), TensorCoords(tmap, coords), _addr(bar))
        if multicast_mask is not None:
            mods += ("multicast::cluster",)
            ops += (self.operand(multicast_mask, T.u16),)
        return self.emit(Instr("cp", mods, ops))

    def cp_async_bulk_tensor_store(self, tmap, coords, src):
        """cp.async.bulk.tensor.{2,3}d.global.shared::cta.bulk_group [tmap, {coords}], [src]:
        one box from shared memory to the tensor; completes through bulk commit/wait groups."""
        coords, tmap = self._coords(coords), self.tensor_map_address(tmap)
        mods = ("async", "bulk", "tensor", f"{len(coords)}d", "global", "shared::cta",
                "bulk_group")
        return self.emit(Instr("cp", mods, (TensorCoords(tmap, coords), _addr(src))))

    def tensor_map_address(self, tmap, name="tmap"):
        """A tensor map operand as a 64-bit register: a kernel parameter (its name, a Sym or a
        Param from tensor_map_param) becomes its generic address, `mov.u64 %p, param;
        cvta.param.u64 %rd, %p` (the __grid_constant__ form: the ISA takes the map's generic
        address, and the parameter's own .param address faulted on the H200 as a misaligned
        address); a register is used as it is. `name`: the register's name."""
        if isinstance(tmap, Reg):
            return tmap
        param = tmap if isinstance(tmap, str) else tmap.name
        self.kernel.param(param)                    # KeyError naming the kernel when absent
        a = self._op("mov", ("u64",), T.u64, (Sym(param),), name="pmap")
        return self._op("cvta", ("param", "u64"), T.u64, (a,), name=name)

    def _coords(self, coords):
        coords = tuple(self.operand(c, T.s32) if not isinstance(c, Reg) else c for c in coords)
        if len(coords) not in (2, 3):
            raise ValueError(f"cp.async.bulk.tensor here takes 2 or 3 coordinates, not "
                             f"{len(coords)}")
        return coords

    def cp_async_bulk_commit_group(self):
        """cp.async.bulk.commit_group: close the group of bulk (TMA) stores issued so far."""
        return self.emit(Instr("cp", ("async", "bulk", "commit_group")))

    def cp_async_bulk_wait_group(self, pending=0, *, read=False):
        """Wait until at most `pending` bulk groups are in flight (.read: until their sources
        may be overwritten)."""
        mods = ("async", "bulk", "wait_group") + (("read",) if read else ())
        return self.emit(Instr("cp", mods, (Imm(pending, T.u32),)))

    def fence_mbarrier_init(self):
        """fence.mbarrier_init.release.cluster (sm_90): make mbarrier.init visible to the other
        CTAs of the cluster and to the async proxy (TMA) before they use the barriers."""
        return self.emit(Instr("fence", ("mbarrier_init", "release", "cluster")))

    def fence_proxy_async(self, space="shared::cta"):
        """fence.proxy.async[.space]: order generic-proxy accesses (st.shared) before async-proxy
        ones (wgmma, TMA) and back. space None → all state spaces."""
        if space not in (None, "shared::cta", "shared::cluster", "global"):
            raise ValueError(f"fence.proxy.async space must be shared::cta, shared::cluster, "
                             f"global or None, not {space!r}")
        return self.emit(Instr("fence", ("proxy", "async") + ((space,) if space else ())))

    # -- warp and warpgroup control (sm_90) ---------------------------------------------------
    def elect_sync(self, mask=0xFFFFFFFF, *, name="elected"):
        """elect.sync %r|%p, mask: one leader lane of `mask`; returns (leader lane, is-me)."""
        lane, p = self.reg(T.u32, "leader"), self.reg(T.pred, name)
        self.emit(Instr("elect", ("sync",), (PredPair(lane, p), self.operand(mask, T.u32))))
        return lane, p

    def setmaxnreg(self, count, *, inc=True):
        """setmaxnreg.{inc,dec}.sync.aligned.u32 count (sm_90a): a warpgroup's register budget,
        a multiple of 8 in 24..256."""
        if not (24 <= count <= 256 and count % 8 == 0):
            raise ValueError(f"setmaxnreg count must be a multiple of 8 in 24..256, not {count}")
        return self.emit(Instr("setmaxnreg", ("inc" if inc else "dec", "sync", "aligned", "u32"),
                               (Imm(count, T.u32),)))

    # -- clusters (sm_90) ---------------------------------------------------------------------------
    def cluster_special(self, name):
        """Read a cluster special register (%cluster_ctarank, %clusterid.x, …) into a u32
        (%is_explicit_cluster into a predicate)."""
        if name not in CLUSTER_SPECIALS:
            raise ValueError(f"not a cluster special register: %{name}")
        return self.special(name)

    def mapa(self, address, cta_rank, *, name="remote"):
        """mapa.shared::cluster.u32: the address of the same shared variable in CTA `cta_rank`
        of the cluster (distributed shared memory)."""
        t = T.u32 if not isinstance(address, Reg) or address.type.bits == 32 else T.u64
        return self._op("mapa", ("shared::cluster", t.name), t,
                        (self.operand(address, t), self.operand(cta_rank, T.u32)), name=name)

    def getctarank(self, address, *, name="rank"):
        """getctarank.shared::cluster.{u32,u64}: the cluster rank (a u32) of the CTA whose
        shared memory the shared::cluster `address` lies in."""
        t = T.u64 if isinstance(address, Reg) and address.type.bits == 64 else T.u32
        return self._op("getctarank", ("shared::cluster", t.name), T.u32,
                        (self.operand(address, t),), name=name)

    def fence_acq_rel_cluster(self):
        """fence.acq_rel.cluster: order this thread's memory accesses for the whole cluster."""
        return self.emit(Instr("fence", ("acq_rel", "cluster")))

    def barrier_cluster_arrive(self, *, sem=None, aligned=True):
        """barrier.cluster.arrive[.release|.relaxed][.aligned]."""
        if sem not in (None, "release", "relaxed"):
            raise ValueError(f"barrier.cluster.arrive semantics is release or relaxed, not {sem!r}")
        mods = ("cluster", "arrive") + ((sem,) if sem else ()) + (("aligned",) if aligned else ())
        return self.emit(Instr("barrier", mods))

    def barrier_cluster_wait(self, *, aligned=True):
        """barrier.cluster.wait: wait until every thread of the cluster has arrived."""
        return self.emit(Instr("barrier", ("cluster", "wait") + (("aligned",) if aligned else ())))

    def cluster_sync(self):
        """barrier.cluster arrive then wait: a cluster-wide barrier (distributed shared memory
        written before it is visible to the whole cluster after it)."""
        self.barrier_cluster_arrive()
        self.barrier_cluster_wait()


def cluster_dims(kernel, x, y=1, z=1):
    """Give a kernel a compile-time cluster shape (.reqnctapercluster x, y, z)."""
    kernel.directives.append(f".reqnctapercluster {x}, {y}, {z}")
    return kernel


def mma_flops(kind):
    """Floating-point (or integer) operations of one mma.sync: 2·m·n·k per warp."""
    return 2 * kind.m * kind.n * kind.k


