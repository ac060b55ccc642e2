"""Tensor-core instructions: mma.sync, ldmatrix, stmatrix (warp-collective) and wgmma
(warpgroup-collective), plus the cvt forms around them (fp8 pairs, tf32 with .satfinite).

A collective instruction runs for whole warps (warpgroups: 4 warps, 128 consecutive threads from
a multiple of 128): the executing lanes of each such group are gathered into a (groups × 32)
index, fragments are scattered into matrices with the ISA's layouts (ir.fragments), multiplied
with the tensor-core model (tensor_math), and gathered back. `.aligned` means every thread of
the group executes the same instruction: a partial group is an EmulationError naming it.
wgmma completes when issued (its asynchrony is not observable without a data race, which the
emulator does not model); wgmma.fence/commit_group/wait_group therefore change nothing.
"""
import numpy as np

from ..arrays import from_fp8, to_fp8
from ..errors import EmulationError
from ..ir import fragments as F
from ..ir.values import Imm, Reg, Vec
from . import memops, tensor_math as TM
from .alu import make

_U32 = np.dtype(np.uint32)
_LANE = np.arange(32)


def _groups(ctx, st, m, size):
    """Lanes (groups × size) of the groups of `size` threads that execute (all must)."""
    active = np.ones(st.n, bool) if m is None else m
    starts = np.flatnonzero((st.tlin % size == 0))
    starts = starts[starts + size <= st.n]
    full = np.zeros(st.n, bool)
    idx = starts[:, None] + np.arange(size)
    ok = (st.lane_cta[idx] == st.lane_cta[starts][:, None]).all(1)
    starts, idx = starts[ok], idx[ok]
    count = active[idx].sum(1)
    full[idx[count == size].ravel()] = True
    partial = active & ~full
    if partial.any():
        lane = int(np.flatnonzero(partial)[0])
        what = "warp" if size == 32 else "warpgroup (4 warps from a multiple of 128 threads)"
        raise EmulationError(
            f"kernel {ctx.prog.name}: `{str(ctx.ins).split('  //')[0]}` at "
            f"{_where(ctx)} is .aligned: every thread of a {what} must execute it, but "
            f"{st.block_name(lane)} {st.thread_name(lane)} executes it without the whole {what}")
    return idx[count == size]


def _where(ctx):
    return f"PTX line {ctx.ins.line}" if ctx.ins.line else f"instruction {ctx.index}"


def _gather(st, fetchers, idx):
    """Register values of lanes idx (groups × lanes) stacked on a last axis."""
    cols = []
    for f in fetchers:
        v = np.asarray(f(st))
        cols.append(np.broadcast_to(v, (st.n,))[idx] if v.ndim == 0 else v[idx])
    return np.stack(cols, -1)


def _items(ctx, o, n, what):
    items = o.items if isinstance(o, Vec) else (o,)
    if len(items) != n:
        ctx.fail(f"{what} needs {n} registers, got {len(items)}")
    return items


def _to_matrix(elems, table, rows, cols):
    """Fragment elements (groups, lanes, count) → matrices (groups, rows, cols)."""
    flat = (table[..., 0] * cols + table[..., 1]).ravel()
    if flat.size == rows * cols and np.bincount(flat, minlength=flat.size).max() == 1:
        # every element once (a whole fragment): a gather, several times faster than scatter
        inv = np.empty(flat.size, np.intp)
        inv[flat] = np.arange(flat.size)
        return elems.reshape(elems.shape[0], -1)[:, inv].reshape(-1, rows, cols)
    out = np.zeros((elems.shape[0], rows * cols), elems.dtype)
    out[:, flat] = elems.reshape(elems.shape[0], -1)
    return out.reshape(-1, rows, cols)


def _accumulator_regs(vals, acc):
    """Accumulator element values (groups, lanes, count) → register contents."""
    if acc == "f32":
        return vals.astype(np.float32)
    if acc == "s32":
        return vals.astype(np.int32)
    h = vals.astype(np.float16).view(np.uint16)
    return TM.pack_halves(h[..., 0::2], h[..., 1::2])


def _accumulator_elems(regs, acc):
    if acc == "f32":
        return regs.view(np.float32).astype(np.float64)
    if acc == "s32":
        return regs.view(np.int32).astype(np.int64)
    return TM.unpack(regs, "f16")


# -- mma.sync ------------------------------------------------------------------------------------
def build_mma(ctx, ins):
    mods = ins.mods
    shape = next((m for m in mods if m.startswith("m") and "n" in m and "k" in m), None)
    tmods = [m for m in mods if m in ("f32", "f16", "bf16", "tf32", "s8", "u8", "s32")]
    if shape is None or len(tmods) != 4 or "row" not in mods or "col" not in mods:
        ctx.fail("only mma.sync.aligned.mMnNkK.row.col with four types is emulated")
    dtype, atype, btype, ctype = tmods
    if atype != btype or dtype != ctype:
        ctx.fail("mixed input or accumulator types are not emulated")
    try:
        kind = F.mma_kind(shape, atype)
    except ValueError as e:
        ctx.fail(str(e))
    if dtype not in kind.accs:
        ctx.fail(f"{shape}.{atype} does not accumulate into {dtype}")
    d, a, b, c = ins.operands
    nc = kind.c_regs(dtype)
    cdt = {"f32": np.float32, "s32": np.int32, "f16": np.uint32}[dtype]
    af = [ctx.read(o, _U32) for o in _items(ctx, a, kind.a_regs, "A")]
    bf = [ctx.read(o, _U32) for o in _items(ctx, b, kind.b_regs, "B")]
    cf = [ctx.read(o, cdt) for o in _items(ctx, c, nc, "C")]
    dw = [ctx.write_lanes(o) for o in _items(ctx, d, nc, "D")]
    ta = F.coord_table(lambda l, i: F.mma_a_coord(kind, l, i), kind.a_elems)
    tb = F.coord_table(lambda l, i: F.mma_b_coord(kind, l, i), kind.b_elems)
    tc = F.coord_table(F.mma_c_coord, kind.c_elems)
    sat = "satfinite" in mods

    def fn(st, m):
        idx = _groups(ctx, st, m, 32)
        if not idx.size:
            return
        A = _to_matrix(TM.unpack(_gather(st, af, idx), atype), ta, kind.m, kind.k)
        B = _to_matrix(TM.unpack(_gather(st, bf, idx), atype), tb, kind.k, kind.n)
        C = _to_matrix(_accumulator_elems(_gather(st, cf, idx).astype(cdt), dtype), tc,
                       kind.m, kind.n)
        if dtype == "s32":
            D = TM.int_dot(A, B, C, sat)
        else:
            D = TM.block_dot(A, B, C, dtype)
        regs = _accumulator_regs(D[:, tc[..., 0], tc[..., 1]], dtype)
        lanes = idx.ravel()
        for j, w in enumerate(dw):
            w(st, lanes, regs[..., j].ravel())
    return fn


# -- ldmatrix / stmatrix -------------------------------------------------------------------------
def _matrix_mods(ctx, ins):
    num = next((int(m[1:]) for m in ins.mods if m in ("x1", "x2", "x4")), None)
    if num is None or "m8n8" not in ins.mods or "b16" not in ins.mods:
        ctx.fail("only .m8n8 .x1/.x2/.x4 .b16 matrices are emulated")
    return num, "trans" in ins.mods


def _rows(st, af, idx, num):
    """Row addresses given by lanes 0..8*num-1 of each warp, and those lanes."""
    src = idx[:, :8 * num]
    a = np.asarray(af(st))
    addr = (np.broadcast_to(a, (st.n,)) if a.ndim == 0 else a)[src].astype(np.uint64)
    return src.ravel(), addr.ravel()


def _pair_cells(trans):
    """(row, col) in its 8×8 matrix of the low and high half of each lane's register: row
    lane/4, columns 2·(lane%4)+{0,1}; transposed with .trans."""
    r, c = _LANE // 4, 2 * (_LANE % 4)
    if trans:
        return (c, r), (c + 1, r)
    return (r, c), (r, c + 1)


def _matrix_setup(ctx, ins, a):
    """Matrix count, address space and fetcher of the row addresses, and the lane cells."""
    num, trans = _matrix_mods(ctx, ins)
    space = memops.access_space(ctx, ins, a)
    return num, space, memops.address_fetch(ctx, a, space), _pair_cells(trans)


def build_ldmatrix(ctx, ins):
    dst, a = ins.operands
    num, space, af, ((lr, lc), (hr, hc)) = _matrix_setup(ctx, ins, a)
    dw = [ctx.write_lanes(o) for o in _items(ctx, dst, num, "ldmatrix")]
    opi = ctx.code_index

    def fn(st, m):
        idx = _groups(ctx, st, m, 32)
        if not idx.size:
            return
        src, addr = _rows(st, af, idx, num)
        words = np.stack(memops.load(st, space, src, addr, _U32, 4, opi), -1)
        halves = words.view(np.uint16).reshape(len(idx), num, 8, 8)   # warp, matrix, row, col
        for j, w in enumerate(dw):
            mat = halves[:, j]
            w(st, idx.ravel(), TM.pack_halves(mat[:, lr, lc], mat[:, hr, hc]).ravel())
    return fn


def build_stmatrix(ctx, ins):
    a, src = ins.operands
    num, space, af, ((lr, lc), (hr, hc)) = _matrix_setup(ctx, ins, a)
    vf = [ctx.read(o, _U32) for o in _items(ctx, src, num, "stmatrix")]
    opi = ctx.code_index

    def fn(st, m):
        idx = _groups(ctx, st, m, 32)
        if not idx.size:
            return
        regs = _gather(st, vf, idx)                                  # warp, lane, matrix
        mats = np.zeros((len(idx), num, 8, 8), np.uint16)
        lo = (regs & np.uint32(0xFFFF)).astype(np.uint16)
        hi = (regs >> np.uint32(16)).astype(np.uint16)
        for j in range(num):
            mats[:, j, lr, lc] = lo[..., j]
            mats[:, j, hr, hc] = hi[..., j]
        rows, addr = _rows(st, af, idx, num)
        words = mats.reshape(-1, 8).copy().view(np.uint32)              # one row: 4 words
        memops.store(st, space, rows, addr, _U32, 4, list(words.T), opi)
    return fn


# -- wgmma ------------------------------------------------------------------------------------------
def build_wgmma(ctx, ins):
    sub = ins.mods[0] if ins.mods else ""
    if sub in ("fence", "commit_group", "wait_group"):
        return lambda st, m: None                # issued operations are already complete
    shape = next((m for m in ins.mods if m.startswith("m64n") and
                  m.endswith(("k16", "k8", "k32"))), None)
    tmods = [m for m in ins.mods if m in ("f32", "f16", "bf16", "tf32") + TM.FP8_TYPES]
    fp8 = len(tmods) == 3 and tmods[1] in TM.FP8_TYPES and tmods[2] in TM.FP8_TYPES
    if sub != "mma_async" or shape is None or len(tmods) != 3 or \
            (tmods[1] != tmods[2] and not fp8) or (tmods[1] == "tf32") != shape.endswith("k8") \
            or fp8 != shape.endswith("k32") or (tmods[0] == "f16" and tmods[1] not in
                                                ("f16",) + TM.FP8_TYPES):
        ctx.fail("only wgmma.mma_async m64nNk16 with f16/bf16 inputs, m64nNk8 with tf32 and "
                 "m64nNk32 with e4m3/e5m2 inputs are emulated")
    n, kdim = (int(v) for v in shape[4:].split("k"))
    acc, ab, bb = tmods
    esize = 4 if ab == "tf32" else 1 if fp8 else 2
    ops = ins.operands
    a_regs = isinstance(ops[1], Vec)
    if a_regs and (ab == "tf32" or fp8):
        ctx.fail(f"wgmma .{ab} with A in registers is not emulated")
    want = 6 if ab == "tf32" or fp8 else 7 if a_regs else 8   # no transpose immediates
    if len(ops) != want or not all(isinstance(o, Imm) for o in ops[4:]):
        ctx.fail(f"wgmma takes d, a, b-desc, scale-d and {want - 4} immediates")
    imm = [int(o.value) for o in ops[4:]] + [0, 0]
    scale_a, scale_b = imm[0], imm[1]
    trans_a, trans_b = (0, imm[2]) if a_regs else (imm[2], imm[3])
    nd = F.wgmma_d_regs(n, acc)
    cdt = np.float32 if acc == "f32" else np.uint32
    dregs = _items(ctx, ops[0], nd, "wgmma D")
    cf = [ctx.read(o, cdt) for o in dregs]
    dw = [ctx.write_lanes(o) for o in dregs]
    if a_regs:
        af = [ctx.read(o, _U32) for o in _items(ctx, ops[1], 4, "wgmma A")]
        ta = np.array([[F.wgmma_a_coord(t, i) for i in range(8)] for t in range(128)])
    else:
        adesc = ctx.read(ops[1], np.uint64)
    bdesc = ctx.read(ops[2], np.uint64)
    sd = ctx.read(ops[3], bool) if isinstance(ops[3], Reg) else (lambda st, v=bool(
        ops[3].value): np.bool_(v))
    td = np.array([[F.wgmma_d_coord(t, i) for i in range((nd if acc == "f32" else 2 * nd))]
                   for t in range(128)])
    opi = ctx.code_index
    mk, kk = np.meshgrid(np.arange(64), np.arange(kdim), indexing="ij")    # A: m × k
    nk, kb = np.meshgrid(np.arange(n), np.arange(kdim), indexing="ij")      # B: n × k

    def fn(st, m):
        idx = _groups(ctx, st, m, 128)
        if not idx.size:
            return
        starts = idx[:, 0]
        B = np.empty((len(starts), kdim, n))
        A = np.empty((len(starts), 64, kdim))
        for g, s in enumerate(starts):
            d = F.decode_descriptor(_lane_value(st, bdesc, s))
            offs = _offsets(ctx, d, nk, kb, trans_b == 0, esize)
            B[g] = _shared_matrix(st, offs, s, bb, opi, "wgmma B").T
            if not a_regs:
                d = F.decode_descriptor(_lane_value(st, adesc, s))
                offs = _offsets(ctx, d, mk, kk, trans_a == 0, esize)
                A[g] = _shared_matrix(st, offs, s, ab, opi, "wgmma A")
        if a_regs:
            A = _to_matrix(TM.unpack(_gather(st, af, idx), ab), ta, 64, 16)
        A, B = A * scale_a, B * scale_b
        C = _to_matrix(_accumulator_elems(_gather(st, cf, idx).astype(cdt), acc), td, 64, n)
        keep = np.asarray([bool(np.broadcast_to(sd(st), (st.n,))[s]) for s in starts])
        C[~keep] = 0.0
        D = TM.block_dot(A, B, C, acc, TM.MODEL_FP8 if fp8 and acc == "f32" else None)
        regs = _accumulator_regs(D[:, td[..., 0], td[..., 1]], acc)
        lanes = idx.ravel()
        for j, w in enumerate(dw):
            w(st, lanes, regs[..., j].ravel())
    return fn


def _shared_matrix(st, offs, lane, ab, opi, what):
    """16-bit (tf32: 32-bit, fp8: 8-bit) elements at CTA shared addresses offs, read by the
    async proxy, as float64."""
    from .async_copy import read_shared_async
    if ab == "tf32":
        v = read_shared_async(st, opi, lane, offs, np.dtype(np.uint32), what)
        return TM.unpack(v[..., None], "tf32")[..., 0]
    if ab in TM.FP8_TYPES:
        return from_fp8(read_shared_async(st, opi, lane, offs, np.dtype(np.uint8), what), ab)
    v = read_shared_async(st, opi, lane, offs, np.dtype(np.uint16), what)
    return v.view(np.float16).astype(np.float64) if ab == "f16" else TM.fp.bf16_to_f64(v)


def _lane_value(st, f, lane):
    v = np.asarray(f(st))
    return int(v if v.ndim == 0 else v[lane])


def _offsets(ctx, d, mn, k, k_major, esize=2):
    try:
        return F.descriptor_offset(d, mn, k, esize, k_major)
    except ValueError as e:
        raise EmulationError(f"kernel {ctx.prog.name}: `{str(ctx.ins).split('  //')[0]}` at "
                             f"{_where(ctx)}: {e}") from None


# -- cvt forms the generic converter does not know ---------------------------------------------------
def build_fp8_cvt(ctx, ins):
    """cvt to or from an e4m3x2/e5m2x2 pair (ptxgen.emu.convert.build_cvt sends them here)."""
    mods = ins.mods
    fp8 = [m for m in mods if m in ("e4m3x2", "e5m2x2")]
    relu = "relu" in mods
    ops = ins.operands
    fmt = fp8[0][:4]
    if mods.index(fp8[0]) < len(mods) - 1:        # to fp8: the pair is the destination
        if "rn" not in mods or "satfinite" not in mods:
            ctx.fail("conversions to fp8 are cvt.rn.satfinite")
        src = mods[-1]
        if src == "f32" and len(ops) == 3:
            hi, lo = ctx.read(ops[1], np.float32), ctx.read(ops[2], np.float32)

            def pack(x, y):
                h = to_fp8(np.asarray(x, np.float64), fmt, relu).astype(np.uint16)
                l_ = to_fp8(np.asarray(y, np.float64), fmt, relu).astype(np.uint16)
                return (h << np.uint16(8)) | l_
            return make(ctx.write(ops[0]), [hi, lo], pack)
        if src == "f16x2" and len(ops) == 2:
            a = ctx.read(ops[1], _U32)

            def pack2(x):
                v = TM.unpack(np.asarray(x, np.uint32)[..., None], "f16")
                b = to_fp8(v, fmt, relu).astype(np.uint16)
                return (b[..., 1] << np.uint16(8)) | b[..., 0]
            return make(ctx.write(ops[0]), [a], pack2)
        ctx.fail(f"cvt to {fp8[0]} from .{src} is not emulated")
    if mods[-1] == fp8[0] and "f16x2" in mods and len(ops) == 2:      # fp8 pair → f16x2
        a = ctx.read(ops[1], np.uint16)

        def unpack(x):
            x = np.asarray(x, np.uint16)
            lo = from_fp8(x & np.uint16(0xFF), fmt)
            hi = from_fp8(x >> np.uint16(8), fmt)
            if relu:
                lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
            h = np.stack([lo, hi], -1).astype(np.float16).view(np.uint16)
            return TM.pack_halves(h[..., 0], h[..., 1])
        return make(ctx.write(ops[0]), [a], unpack)
    ctx.fail(f"cvt {'.'.join(mods)} is not emulated")


# -- setmaxnreg ---------------------------------------------------------------------------------
def build_setmaxnreg(ctx, ins):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 n: moves registers between warpgroups. Checked:
    the operand's rule (24..256, a multiple of 8), the warpgroup-wide execution (.aligned) and,
    under a .maxnreg cap R (without one setmaxnreg does nothing), the CTA's budget: it holds
    R per thread from launch, so once every warpgroup of a CTA has set its count, counts that
    add up to more make an .inc wait forever on the GPU (an error here)."""
    ops = ins.operands
    n = int(ops[0].value) if len(ops) == 1 and isinstance(ops[0], Imm) else None
    if n is None or not (24 <= n <= 256 and n % 8 == 0):
        ctx.fail("setmaxnreg takes one immediate register count from 24 to 256, a multiple of 8")
    cap = next((int(d.split()[1]) for d in ctx.prog.kernel.directives
                if d.startswith(".maxnreg") and d.split()[1:2] and d.split()[1].isdigit()),
               None)
    text = str(ins).split("  //")[0]

    def fn(st, m):
        groups = _groups(ctx, st, m, 128)
        if cap is None or not len(groups):
            return
        counts = getattr(st, "maxnreg_counts", None)
        if counts is None:          # per warpgroup of the batch: 0 = not set yet
            counts = st.maxnreg_counts = np.zeros(-(-st.n // 128), np.int64)
        wg = groups[:, 0] // 128
        counts[wg] = n
        threads = st.launch.threads
        per_cta = -(-threads // 128)
        for cta in np.unique(st.lane_cta[groups[:, 0]]):
            mine = counts[cta * per_cta:(cta + 1) * per_cta]
            if (mine > 0).all() and int(mine.sum()) * 128 > cap * threads:
                raise EmulationError(
                    f"kernel {ctx.prog.name}: `{text}` at {_where(ctx)}: the warpgroups' "
                    f"setmaxnreg counts {'+'.join(map(str, mine.tolist()))} x 128 threads "
                    f"need {int(mine.sum()) * 128} registers, more than the {cap * threads} "
                    f"the CTA holds (.maxnreg {cap} x {threads} threads): setmaxnreg.inc would "
                    f"wait forever on the GPU")
    return fn


BUILDERS = {"mma": build_mma, "setmaxnreg": build_setmaxnreg, "ldmatrix": build_ldmatrix, "stmatrix": build_stmatrix,
            "wgmma.mma_async": build_wgmma, "wgmma.fence": build_wgmma,
            "wgmma.commit_group": build_wgmma, "wgmma.wait_group": build_wgmma}
