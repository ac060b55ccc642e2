"""The async proxy: TMA copies (cp.async.bulk.tensor), bulk groups, fence.proxy.async, and the
shared-memory accesses wgmma and TMA make.

A TMA load runs when issued: it reads the box of the tensor map at the given coordinates (elements
outside the tensor read as zero, or NaN with oob='nan'), writes it into shared memory in box order
(innermost dimension fastest) through the map's swizzle, and completes the box's byte count on
the mbarrier. With .multicast::cluster the box lands at the same offset in the shared memory of
every CTA of the cluster the 16-bit mask names, and completes on the mbarrier at the same offset
in each (emu.cluster). A TMA store reads the box back (through the swizzle) and writes the
elements that lie inside the tensor. Bulk commit/wait groups change nothing (copies are complete).

Proxies: shared memory written by ordinary stores (the generic proxy) must be ordered by
fence.proxy.async before wgmma or a TMA store read it (the async proxy). The shared-memory shadow
records generically written granules; a fence clears its CTA's record; an async read of a
recorded granule is reported like a race. Bytes a TMA load writes count as initialized.
"""
import numpy as np

from ..errors import EmulationError
from ..ir import fragments as F
from ..ir.values import TensorCoords
from . import cluster, mbarrier, memops, memory, tensormap
from .values import UNSIGNED

_U64 = np.dtype(np.uint64)
# a tensor copy's shared-memory box starts on 128 bytes (CUDA C++ Programming Guide, tensor
# memory access: alignment requirements)
TMA_SHARED_ALIGN = 128
# and its global box starts on 16 bytes along the contiguous dimension (measured: see build_cp)
TMA_GLOBAL_ALIGN = 16


# -- shared memory through the async proxy --------------------------------------------------------
def _check(st, opi, lane, addr, width, what, write, base=None):
    """Buffer offsets of CTA shared addresses `addr` (of lane's CTA, or of the CTA whose buffer
    starts at `base`), reported when out of bounds or misaligned; shadow checks."""
    size = st.shared.size
    base = int(st.shared.base[lane]) if base is None else base
    bad = (addr < 0) | (addr + width > size) | (addr % width != 0)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        a = int(addr.ravel()[i])
        kind = "misaligned" if 0 <= a <= size - width else "oob"
        st.report(kind, opi, lane, a & ((1 << 64) - 1),
                  f"{'out-of-bounds' if kind == 'oob' else 'misaligned'} shared {what} of "
                  f"{width} bytes", extra=f"the shared space of this CTA has {size} bytes",
                  space="shared")
        addr = np.where(bad, 0, addr)
    flat = base + addr
    sh = st.shadow
    if sh is not None:
        gi = flat.ravel() // sh.g           # granules, repeats and all: a report names the lowest
        if write:
            sh.init[gi] = True
        else:
            init = sh.init[gi]
            if not init.all():
                g = int(gi[~init].min())
                st.report("uninit", opi, lane, g * sh.g - base,
                          f"{what} reads shared memory never written")
            dirty = sh.generic[gi]
            if dirty.any():
                g = int(gi[dirty].min())
                st.report("race", opi, lane, g * sh.g - base,
                          f"proxy race: {what} (async proxy) reads shared memory that "
                          f"st.shared (generic proxy) wrote at "
                          f"{st.op_where(int(sh.writer_op[g]))} with no fence.proxy.async "
                          f"between")
    return flat


def read_shared_async(st, opi, lane, addr, dt, what):
    """Values (dtype dt) at CTA shared addresses `addr` (int array) of lane's CTA."""
    addr = np.asarray(addr, np.int64)
    flat = _check(st, opi, lane, addr, dt.itemsize, what, write=False)
    return st.shared.view(dt)[flat // dt.itemsize]


def write_shared_async(st, opi, lane, addr, values, what, base=None):
    addr = np.asarray(addr, np.int64)
    flat = _check(st, opi, lane, addr, values.dtype.itemsize, what, write=True, base=base)
    st.shared.view(values.dtype)[flat // values.dtype.itemsize] = values


def build_fence(ctx, ins):
    if ins.mods[:2] != ("proxy", "async"):
        return lambda st, m: None         # other fences order nothing the emulator reorders

    def fence(st, m):
        sh = st.shadow
        if sh is None:
            return
        lanes = np.arange(st.n) if m is None else np.flatnonzero(m)
        for cta in np.unique(st.lane_cta[lanes]):
            lo = int(cta) * st.shared.stride // sh.g
            sh.generic[lo:lo + -(-st.shared.stride // sh.g)] = False
    return fence


# -- TMA ------------------------------------------------------------------------------------------
def _map_of(ctx, st, lane, addr):
    """The decoded tensor map at `addr` (a .param offset from `mov %rd, param`, a generic param
    address, or a global address)."""
    addr = int(addr)
    win = addr >> memory.WINDOW_SHIFT
    if addr < memory.GLOBAL_BASE and win in (0, 4):
        off = addr - (memory.PARAM_WINDOW if win == 4 else 0)
        data = st.params.buf[off:off + tensormap.SIZE] if 0 <= off else b""
    else:
        r = st.gmem.find(addr)
        data = b"" if r is None else r.buf[addr - r.start:addr - r.start + tensormap.SIZE]
    tm = tensormap.decode(bytes(data))
    if tm is None:
        raise EmulationError(
            f"kernel {ctx.prog.name}: `{str(ctx.ins).split('  //')[0]}` at {_where(ctx)}: the "
            f"tensor map at {addr:#x} is not one the emulator knows; pass a "
            f"ptxgen.emu.TensorMap for the kernel's tensor-map parameter")
    return tm


def _where(ctx):
    return f"PTX line {ctx.ins.line}" if ctx.ins.line else f"instruction {ctx.index}"


def _box(tm, coords, store=False):
    """Global byte offsets of the box's elements (box order) and which lie inside the tensor.
    A store writes rows up to the next 16-byte boundary past the tensor's width: on the H200
    (benchmarks/tensor_emu_vs_gpu.py) a store over the right edge of a 117-column
    bf16 (29-column f32) tensor wrote columns 117-119 (29-31) of the padded rows too, while a
    load filled them with zeros."""
    grids = np.meshgrid(*[np.arange(b) for b in tm.box[::-1]], indexing="ij")
    idx = [g.ravel() + int(c) for g, c in zip(grids[::-1], coords)]     # innermost first
    inside = np.ones(idx[0].size, bool)
    off = np.zeros(idx[0].size, np.int64)
    dims = list(tm.dims)
    if store:
        dims[0] = -(-dims[0] * tm.esize // TMA_GLOBAL_ALIGN) * TMA_GLOBAL_ALIGN // tm.esize
    for i, d, s in zip(idx, dims, tm.strides):
        inside &= (i >= 0) & (i < d)
        off += i * s
    return off, inside


def _global_view(ctx, st, tm, lane, opi):
    r = st.gmem.find(tm.address)
    if r is None:
        raise EmulationError(f"kernel {ctx.prog.name}: the tensor map's global address "
                             f"{tm.address:#x} is in no allocation")
    return r.view(UNSIGNED[tm.esize]), (tm.address - r.start) // tm.esize


def _smem_addrs(tm, dst, n):
    offs = np.arange(n, dtype=np.int64) * tm.esize + int(dst)
    return F.swizzle(offs, tm.swizzle)


def build_cp(ctx, ins):
    mods = ins.mods
    if mods[:2] != ("async", "bulk"):
        return memops.build_cp(ctx, ins)
    if "commit_group" in mods or "wait_group" in mods:
        return lambda st, m: None              # bulk copies complete when issued
    if len(mods) < 4 or mods[2] != "tensor" or mods[3] not in ("1d", "2d", "3d", "4d", "5d"):
        ctx.fail("only cp.async.bulk.tensor copies and bulk groups are emulated")
    ops = ins.operands
    load = mods[4].startswith("shared")
    if load:
        if "mbarrier::complete_tx::bytes" not in mods or len(ops) < 3:
            ctx.fail("TMA loads complete on an mbarrier (.mbarrier::complete_tx::bytes)")
        smem, tc, bar = ops[0], ops[1], ops[2]
        if any(m.startswith("im2col") for m in mods):
            ctx.fail("im2col TMA loads are not emulated")
    else:
        tc, smem, bar = ops[0], ops[1], None
    if not isinstance(tc, TensorCoords):
        ctx.fail("expected a [tensor-map, {coordinates}] operand")
    mask = ctx.read(ops[3], np.uint16) if load and "multicast::cluster" in mods else None
    tmf = ctx.read(tc.tmap, _U64)
    cfs = [ctx.read(c, np.int32) for c in tc.coords]
    sf = memops.address_fetch(ctx, smem, "shared")
    bf = memops.address_fetch(ctx, bar, "shared") if bar is not None else None
    opi = ctx.code_index

    def at(st, f, lane):
        v = np.asarray(f(st))
        return v if v.ndim == 0 else v[lane]

    def fail_at(st, lane):
        def f(why):
            raise EmulationError(f"kernel {ctx.prog.name}: `{str(ins).split('  //')[0]}` at "
                                 f"{_where(ctx)} by {st.block_name(lane)} "
                                 f"{st.thread_name(lane)}: {why}")
        return f

    def targets(st, lane, dst):
        """[(buffer base, CTA rank or None)] of the CTAs a load writes: the masked CTAs of the
        cluster for .multicast::cluster, else the CTA `dst` names."""
        fail = fail_at(st, lane)
        base, off = cluster.split(st, lane, dst, fail)
        if mask is None:
            return off, [(base, None)]
        bits = int(at(st, mask, lane))
        ranks = [r for r in range(16) if bits >> r & 1]
        if bits and ranks[-1] >= st.csize:
            fail(f"multicast mask {bits:#06x} names CTA rank {ranks[-1]}, but the cluster has "
                 f"{st.csize} CTA{'s' if st.csize > 1 else ''}")
        return off, [(cluster.cta_base(st, lane, r), r) for r in ranks]

    def fn(st, m):
        lanes = np.arange(st.n) if m is None else np.flatnonzero(m)
        for lane in lanes:
            tm = _map_of(ctx, st, lane, at(st, tmf, lane))
            coords = [int(at(st, f, lane)) for f in cfs]
            if len(coords) != len(tm.dims):
                raise EmulationError(f"kernel {ctx.prog.name}: {len(coords)} coordinates for a "
                                     f"tensor map of rank {len(tm.dims)} at {_where(ctx)}")
            off, inside = _box(tm, coords, store=not load)
            view, base = _global_view(ctx, st, tm, lane, opi)
            if coords[0] * tm.esize % TMA_GLOBAL_ALIGN:
                # the box's first element off a 16-byte boundary: an illegal instruction on the
                # H200 (bf16 x = 39 and f32 x = 30 faulted; x = -8, 8, 16, 32 ran)
                st.report("misaligned", opi, lane, coords[0] * tm.esize,
                          f"TMA {'load' if load else 'store'} box starting at x = {coords[0]}, "
                          f"{coords[0] * tm.esize} bytes into a row: not a multiple of "
                          f"{TMA_GLOBAL_ALIGN}")
            if not load and min(coords[1:]) < 0:
                # a store box starting above the first row (y = -16) was an illegal instruction
                # on the H200, while loads at y = -2 and stores past the last row
                # ran; x < 0 stores were not measured
                st.report("misaligned", opi, lane, 0,
                          f"TMA store box starting at a negative coordinate "
                          f"{tuple(coords)} (only loads may start before the tensor)")
            saddr = int(at(st, sf, lane))
            if saddr % TMA_SHARED_ALIGN:
                # the GPU faults (CUDA_ERROR_MISALIGNED_ADDRESS, seen on the H200)
                st.report("misaligned", opi, lane, saddr,
                          f"TMA {'load' if load else 'store'} of a shared box not "
                          f"{TMA_SHARED_ALIGN}-byte aligned", space="shared")
            if load:
                vals = np.zeros(off.size, view.dtype)
                vals[inside] = view[base + off[inside] // tm.esize]
                if tm.oob == "nan" and tm.kind == 0:
                    nan = {2: 0x7FFF, 4: 0x7FFFFFFF, 8: 0x7FF8000000000000}[tm.esize]
                    vals[~inside] = nan
                doff, dests = targets(st, lane, int(at(st, sf, lane)))
                dst = _smem_addrs(tm, doff, off.size)
                bar = int(at(st, bf, lane))
                for cbase, rank in dests:
                    write_shared_async(st, opi, lane, dst, vals, "TMA load", base=cbase)
                    # the box's bytes complete on the mbarrier at the same offset in each CTA
                    mbarrier.complete_tx(ctx, st, lane, bar if rank is None else
                                         cluster.address(rank, bar & cluster.LOW),
                                         off.size * tm.esize)
            else:
                dst = _smem_addrs(tm, int(at(st, sf, lane)), off.size)
                vals = read_shared_async(st, opi, lane, dst, view.dtype, "TMA store")
                view[base + off[inside] // tm.esize] = vals[inside]
    return fn


# keyed by the opcode table's emulator column (ptxgen/ir/opcodes.py); plain cp/cp.async stay
# with memops under "cp"
BUILDERS = {"cp.async.bulk": build_cp, "cp.async.bulk.tensor": build_cp,
            "cp.async.bulk.commit_group": build_cp, "cp.async.bulk.wait_group": build_cp,
            "fence.proxy.async": build_fence}
