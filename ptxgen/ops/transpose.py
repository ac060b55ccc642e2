"""transpose: out[N, M] = x[M, N]^T for row-major fp32, through a shared-memory tile.

A CTA of 32 × `block_rows` threads moves one `tile` × `tile` tile: it reads tile rows with
consecutive threads on consecutive columns (coalesced), writes them to shared memory, and after
one barrier reads shared memory down a column so that its global stores are coalesced too. Each
thread moves (tile/32) × (tile/block_rows) elements and issues all its loads before any store.
block_rows=4 (8 elements per thread, 128 threads, 32 registers) keeps twice the bytes in flight
per SM of the classic 32×8 CTA at full occupancy; bandwidth is latency-bound without that.

The tile rows are `tile + pad` floats apart. With pad=1 the 32 threads of a warp reading one
tile column hit 32 different banks; pad=0 gives the classic 32-way bank conflict (the variant
kept for comparison). Every access is predicated, so any M and N work.

vec=4 moves 16 bytes per global access instead (a quarter of the load and store instructions,
and `tile`²/(128·block_rows) float4 chunks in flight per thread): a thread reads a float4 along
an x row, writes its 4 elements down a column of the transposed tile in shared memory, and after
the barrier reads a float4 along an out row. The tile is stored transposed, S[c][r], with the
16-byte chunks of each row XOR-swizzled, chunk (r/4) ^ ((c/4) % 8), so that both the scalar
stores (4 x rows by 8 chunks per warp instruction) and the float4 reads (8 chunks of one row per
quarter warp) fall in 32 distinct banks without padding. A side whose rows are not 16-byte
aligned (N % 4 for x, M % 4 for out) falls back to 4 scalar accesses per chunk. With tiles > 1
a CTA moves that many tiles side by side, double-buffered: the loads of tile t are issued before
tile t-1 is read back and stored, one barrier per tile. load_cache / store_cache add a cache
operator to the global accesses (e.g. "cs" streaming stores: out is not read again).

group=G walks a 1-D grid G tile rows at a time, column by column, so the CTAs resident at once
cover a square-ish patch of tiles (about G × G at G ≈ sqrt(resident CTAs)): their reads are
G row tiles tall and their writes as many column tiles wide, long runs in both matrices. The
2-D grid's row-major order instead spreads the writes of the resident CTAs over every row of
out, a few hundred bytes in each.

Defaults (the fastest measured on the H200, docs/PERF.md): 64x64 tiles, 32x8 threads, float4
accesses when M and N are multiples of 4 (else scalar), group=128: 0.97 of the copy bandwidth
at 8192², 0.94 at 16384², 0.83 at 8191x8193 (the 2-D grid: 0.93, 0.92, 0.68).
"""
import numpy as np

from .. import isa
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from ..lower.raster import grouped_tile
from .base import Launch, Operator

_LOAD_CACHE = ("ca", "cg", "cs", "lu", "nc")
_STORE_CACHE = ("wb", "cg", "cs", "wt")


class Transpose(Operator):
    name = "transpose"
    shape_names = ("M", "N")
    defaults = {"M": 1024, "N": 1000}
    inputs = ("x",)
    outputs = ("out",)
    rtol = 0.0                 # a transpose moves bits: the output must match exactly
    atol = 0.0

    def __init__(self, tile=64, block_rows=8, pad=1, vec=None, tiles=1, load_cache=None,
                 store_cache=None, group=128):
        if tile not in (32, 64):
            raise PtxgenError(f"transpose: tile must be 32 or 64, got {tile!r}")
        if block_rows not in (1, 2, 4, 8, 16, 32) or block_rows > tile:
            raise PtxgenError(f"transpose: block_rows must be a power of two up to the tile, "
                              f"got {block_rows!r}")
        if pad not in (0, 1):
            raise PtxgenError(f"transpose: pad must be 0 or 1, got {pad!r}")
        if pad == 0 and vec == 4:
            raise PtxgenError("transpose: pad=0 is a layout of the scalar tile (vec=1); the "
                              "float4 tile is swizzled instead of padded")
        if vec not in (None, 1, 4):
            raise PtxgenError(f"transpose: vec must be 1, 4 or None (4 when the rows of x "
                              f"and out are 16-byte aligned, else 1), got {vec!r}")
        lo = max(tile // 32, tile * tile // 1024)
        if vec in (None, 4) and not lo <= block_rows <= tile * tile // 128:
            raise PtxgenError(f"transpose: with vec=4 or None a {tile}x{tile} tile needs block_rows "
                              f"from {lo} to {tile * tile // 128} (whole warps per 32 columns, "
                              f"1 to 8 float4 chunks per thread), got {block_rows}")
        if tiles not in (1, 2, 4) or (tiles > 1 and vec != 4):
            raise PtxgenError(f"transpose: tiles must be 1, 2 or 4, and above 1 only with "
                              f"vec=4, got tiles={tiles!r}")
        if vec in (None, 4) and tiles * tile * tile // (128 * block_rows) > 16:
            # two tiles' chunks are live at once, with an address per chunk: ptxas spills
            raise PtxgenError(f"transpose: {tiles} tiles of {tile * tile // (128 * block_rows)}"
                              f" float4 chunks per thread are more than 16 (registers)")
        for what, c, allowed in (("load_cache", load_cache, _LOAD_CACHE),
                                 ("store_cache", store_cache, _STORE_CACHE)):
            if c is not None and c not in allowed:
                raise PtxgenError(f"transpose: {what} must be one of {', '.join(allowed)} or "
                                  f"None, got {c!r}")
        if not isinstance(group, int) or not 0 <= group <= 256:
            raise PtxgenError(f"transpose: group must be 0 (2-D grid) or 1 to 256 tile rows, "
                              f"got {group!r}")
        self.group = group
        self.tile, self.block_rows, self.pad = tile, block_rows, pad
        self.vec, self.tiles = vec, tiles
        self.load_cache, self.store_cache = load_cache, store_cache

    def kernel_name(self):
        return self.name

    def vec_for(self, shape):
        """The access width used for `shape`: vec, or with vec=None 4 when both M and N are
        multiples of 4 (every row of x and out 16-byte aligned), else 1 (on the H200 the
        scalar kernel beats the float4 one's per-element fallback on unaligned rows)."""
        if self.vec is not None:
            return self.vec
        if self.pad == 0:                   # the unpadded layout exists in the scalar tile only
            return 1
        return 4 if shape["M"] % 4 == 0 and shape["N"] % 4 == 0 else 1

    def build(self, shape, arch=DEFAULT_TARGET):
        if self.vec_for(shape) == 4:
            return _build_vec4(self, shape, arch)
        TS, R, P = self.tile, self.block_rows, self.pad
        cols_per_thread, rows_per_thread = TS // 32, TS // R
        pitch = (TS + P) * 4                   # bytes between tile rows in shared memory
        m = Module(target=arch)
        k = m.add_kernel(self.kernel_name(), [
            Param("M", T.u32), Param("N", T.u32),
            Param("x", T.u64, ptr(T.f32)), Param("out", T.u64, ptr(T.f32))])
        k.directives.append(f".reqntid 32, {R}, 1")
        b = Builder(k)
        M, N, x, out = b.param("M"), b.param("N"), b.param("x"), b.param("out")
        tile = b.shared("tile", T.f32, TS * (TS + P), align=16)
        tx, ty = b.special("tid.x"), b.special("tid.y")
        tile_x, tile_y = _tile_ids(b, self, M, N)
        c0 = b.mul(tile_x, TS, name="c0")                   # first column of x in this tile
        r0 = b.mul(tile_y, TS, name="r0")                   # first row of x in this tile
        sbase = b.address_of(tile)

        # load: x[r0 + ty + R*j, c0 + tx + 32*c] → tile[ty + R*j][tx + 32*c]
        col = b.add(c0, tx, name="col")
        row = b.add(r0, ty, name="row")
        col_ok = [b.setp("lt", _plus(b, col, 32 * c), N) for c in range(cols_per_thread)]
        src = _addr(b, x, row, N, col, "src")
        row_step = b.mul(N, 4 * R, mode="wide", type=T.u32, name="rstep")   # R rows, bytes
        st_at = b.add(sbase, b.shl(b.mad(ty, TS + P, tx, name="sl"), 2, name="sl"), name="st")
        loaded = []
        for j in range(rows_per_thread):
            if j:
                src = b.add(src, row_step, name="src")
            r_ok = b.setp("lt", _plus(b, row, R * j), M)
            for c in range(cols_per_thread):
                ok = b.and_(r_ok, col_ok[c], name="ok")
                with b.predicated(ok):
                    v = b.ld("global", T.f32, Addr(src, 128 * c), cache=self.load_cache,
                             name="v")
                loaded.append((ok, v, j * R * pitch + 128 * c))
        for ok, v, soff in loaded:
            with b.predicated(ok):
                b.st("shared", Addr(st_at, soff), v)
        b.bar_sync(0)

        # store: out[c0 + ty + R*j, r0 + tx + 32*c] = tile[tx + 32*c][ty + R*j]
        ocol = b.add(r0, tx, name="ocol")                    # column of out = row of x
        orow = b.add(c0, ty, name="orow")
        ocol_ok = [b.setp("lt", _plus(b, ocol, 32 * c), M)
                   for c in range(cols_per_thread)]
        dst = _addr(b, out, orow, M, ocol, "dst")
        orow_step = b.mul(M, 4 * R, mode="wide", type=T.u32, name="ostep")
        ld_at = b.add(sbase, b.shl(b.mad(tx, TS + P, ty, name="ls"), 2, name="ls"), name="ldp")
        vals = []
        for j in range(rows_per_thread):
            r_ok = b.setp("lt", _plus(b, orow, R * j), N)
            for c in range(cols_per_thread):
                ok = b.and_(r_ok, ocol_ok[c], name="ok")
                with b.predicated(ok):
                    v = b.ld("shared", T.f32, Addr(ld_at, 32 * c * pitch + 4 * R * j), name="t")
                vals.append((ok, v, j, c))
        for j in range(rows_per_thread):
            if j:
                dst = b.add(dst, orow_step, name="dst")
            for ok, v, jj, c in vals:
                if jj == j:
                    with b.predicated(ok):
                        b.st("global", Addr(dst, 128 * c), v, cache=self.store_cache)
        b.ret()
        return m

    def launch(self, shape, sm_count=None):
        TS = self.tile
        gy = -(-shape["M"] // TS)
        max_x, max_y, _ = isa.launch_limits()["max_grid_dim"]
        if gy > max_y:
            raise PtxgenError(f"transpose: M={shape['M']} needs {gy} tile rows, more than the "
                              f"grid's {max_y}")
        gx = -(-shape["N"] // (TS * self.tiles))
        if self.group:
            if gx * gy > max_x:
                raise PtxgenError(f"transpose: {gx * gy} tiles are more than a 1-D grid holds")
            return Launch(grid=(gx * gy, 1, 1), block=(32, self.block_rows, 1))
        return Launch(grid=(gx, gy, 1), block=(32, self.block_rows, 1))

    def make_inputs(self, shape, rng):
        M, N = shape["M"], shape["N"]
        return {"x": rng.standard_normal((M, N)).astype(np.float32),
                "out": np.full((N, M), np.nan, dtype=np.float32)}

    def kernel_args(self, shape, arrays):
        return [np.uint32(shape["M"]), np.uint32(shape["N"]), arrays["x"], arrays["out"]]

    def reference(self, shape, arrays):
        return {"out": arrays["x"].astype(np.float64).T}

    def bytes_moved(self, shape):
        return 8 * shape["M"] * shape["N"]


def _tile_ids(b, op, M, N):
    """(column tile, row tile) of this CTA: the 2-D grid's ctaid, or with op.group the 1-D
    grid walked down `group` tile rows at a time (see the module docstring)."""
    if not op.group:
        return b.special("ctaid.x"), b.special("ctaid.y")
    # x columns per CTA: tile * tiles, a power of two
    tile_y, tile_x = grouped_tile(b, M, N, op.tile, op.tile * op.tiles, op.group)
    return tile_x, tile_y


def _addr(b, base, row, ncols, col, name):
    """base + (row*ncols + col)*4 with the index computed in 64 bits."""
    idx = b.mad(row, ncols, b.cvt(T.u64, col, name="c64"), mode="wide", type=T.u32, name="idx")
    return b.add(base, b.shl(idx, 2, name="ib"), name=name)


def _plus(b, r, k):
    return b.add(r, k, name="ix") if k else r


# -- vec=4 -------------------------------------------------------------------------------------
def _build_vec4(op, shape, arch):
    """The float4 kernel (see the module docstring). Thread (lane, w) of warp w owns chunk
    slots j = 0..J-1 of each tile: x rows r0 + 4(rb0 + j*S) + lane/8, columns
    c0 + 32h + 4(lane%8) .. +3, with h = w % H and rb0 = w / H (H = tile/32 groups of 32
    columns)."""
    TS, R, TL = op.tile, op.block_rows, op.tiles
    H = TS // 32                        # 32-column groups per tile row
    S = R // H                          # 4-row blocks between a thread's consecutive slots
    J = TS * TS // (128 * R)            # float4 chunks per thread per tile
    vin, vout = shape["N"] % 4 == 0, shape["M"] % 4 == 0
    m = Module(target=arch)
    k = m.add_kernel(op.kernel_name(), [
        Param("M", T.u32), Param("N", T.u32),
        Param("x", T.u64, ptr(T.f32, align=16 if vin else 4)),
        Param("out", T.u64, ptr(T.f32, align=16 if vout else 4))])
    k.directives.append(f".reqntid 32, {R}, 1")
    b = Builder(k)
    M, N, x, out = b.param("M"), b.param("N"), b.param("x"), b.param("out")
    nbuf = 2 if TL > 1 else 1
    sbase = b.address_of(b.shared("tile", T.f32, nbuf * TS * TS, align=16))
    lane, w = b.special("tid.x"), b.special("tid.y")
    q4 = b.shr(lane, 3, name="q4")                      # row within a 4-row block
    l8 = b.and_(lane, 7, name="l8")                     # 16-byte chunk within 32 columns
    h = b.and_(w, H - 1, name="h") if H > 1 else 0
    rb0 = b.shr(w, pow2_exponent(H), name="rb0") if H > 1 else w
    tile_x, tile_y = _tile_ids(b, op, M, N)
    c0 = b.mul(tile_x, TS * TL, name="c0")
    r0 = b.mul(tile_y, TS, name="r0")
    col4 = b.shl(l8, 2, name="col4")
    if H > 1:
        col4 = b.add(col4, b.shl(h, 5, name="hc"), name="col4")   # 32h + 4*(lane%8)

    # load side: x[lr + 4Sj][lc + t*TS + i]
    lr = b.add(r0, b.add(b.shl(rb0, 2, name="rb4"), q4, name="lro"), name="lr")
    lc = b.add(c0, col4, name="lc")
    src0 = _addr(b, x, lr, N, lc, "src")
    rstep = b.mul(N, 16 * S, mode="wide", type=T.u32, name="rstep")      # 4S rows, bytes
    row_ok = [b.setp("lt", _plus(b, lr, 4 * S * j), M) for j in range(J)]
    # shared address of element (i, j): S[col4 + i][4*((rb0 + jS) ^ l8) + q4]
    st_base = b.add(sbase, b.shl(b.add(b.mul(col4, TS, name="sc"), q4, name="sq"), 2,
                                 name="sb"), name="stb")
    st_at = [b.add(st_base, b.shl(b.xor(_plus(b, rb0, S * j), l8, name="sw"), 4, name="swb"),
                   name="st") for j in range(J)]

    # store side: out[oc + 4Sj + t*TS][orc .. orc+3] = S[4(cb0 + jS) + q4][chunk kk]
    kk = b.add(l8, b.shl(h, 3, name="h8"), name="kk") if H > 1 else l8
    oc = b.add(c0, b.add(b.shl(rb0, 2, name="cb4"), q4, name="oco"), name="oc")
    orc = b.add(r0, b.shl(kk, 2, name="kk4"), name="orc")
    dst0 = _addr(b, out, oc, M, orc, "dst")
    ostep = b.mul(M, 16 * S, mode="wide", type=T.u32, name="ostep")
    col_ok = _col_preds(b, orc, M, vout)
    ld_at = []
    for j in range(J):
        cb = _plus(b, rb0, S * j)
        row = b.add(b.shl(cb, 2, name="cl"), q4, name="cl")                  # S row
        phys = b.xor(kk, b.and_(cb, 7, name="cb7"), name="ph")
        ld_at.append(b.add(sbase, b.shl(b.mad(row, TS, b.shl(phys, 2, name="p4"), name="la"),
                                        2, name="lab"), name="ldp"))

    tstep = b.mul(M, 4 * TS, mode="wide", type=T.u32, name="tstep") if TL > 1 else None

    def load(t):
        """Issue tile t's global loads: [(predicates, 4 registers)] per slot."""
        cols = _col_preds(b, _plus(b, lc, t * TS), N, vin)
        vals, src = [], src0
        for j in range(J):
            if j:
                src = b.add(src, rstep, name="src")
            oks = [b.and_(row_ok[j], c, name="ok") for c in cols]
            vals.append((oks, _load4(b, src, 4 * TS * t, oks, op.load_cache)))
        return vals

    def to_shared(t, vals):
        buf = (t % nbuf) * TS * TS
        for j, (oks, v) in enumerate(vals):
            for i in range(4):
                with b.predicated(oks[i if len(oks) > 1 else 0]):
                    b.st("shared", Addr(st_at[j], 4 * (buf + i * TS)), v[i])

    def to_global(t, dst_t):
        """Read tile t back along out rows and store it."""
        buf = (t % nbuf) * TS * TS
        oc_t = _plus(b, oc, t * TS)
        got = []
        for j in range(J):
            r_ok = b.setp("lt", _plus(b, oc_t, 4 * S * j), N)
            oks = [b.and_(r_ok, c, name="ok") for c in col_ok]
            if len(oks) == 1:
                with b.predicated(oks[0]):
                    v = b.ld("shared", T.f32, Addr(ld_at[j], 4 * buf), vec=4, name="t")
            else:
                # M % 4 != 0: the last chunk of a row holds x rows past M, never written
                v = []
                for i, ok in enumerate(oks):
                    with b.predicated(ok):
                        v.append(b.ld("shared", T.f32, Addr(ld_at[j], 4 * (buf + i)),
                                      name="t"))
            got.append((oks, v))
        dst = dst_t
        for j, (oks, v) in enumerate(got):
            if j:
                dst = b.add(dst, ostep, name="dst")
            _store4(b, dst, oks, v, op.store_cache)

    to_shared(0, load(0))
    b.bar_sync(0)
    dst_t = dst0
    for t in range(1, TL):
        nxt = load(t)                   # in flight while tile t-1 is read back and stored
        to_global(t - 1, dst_t)
        dst_t = b.add(dst_t, tstep, name="dstt")
        to_shared(t, nxt)
        b.bar_sync(0)
    to_global(TL - 1, dst_t)
    b.ret()
    return m


def _col_preds(b, c, limit, whole):
    """Predicates of a 4-element chunk starting at column c: one when the chunk is all in or
    all out (rows of a multiple of 4), else one per element."""
    if whole:
        return [b.setp("lt", c, limit)]
    return [b.setp("lt", _plus(b, c, i), limit) for i in range(4)]


def _load4(b, src, disp, oks, cache):
    if len(oks) == 1:
        with b.predicated(oks[0]):
            return b.ld("global", T.f32, Addr(src, disp), vec=4, cache=cache, name="v")
    vals = []
    for i, ok in enumerate(oks):
        with b.predicated(ok):
            vals.append(b.ld("global", T.f32, Addr(src, disp + 4 * i), cache=cache, name="v"))
    return tuple(vals)


def _store4(b, dst, oks, v, cache):
    if len(oks) == 1:
        with b.predicated(oks[0]):
            b.st("global", Addr(dst), v, cache=cache)
        return
    for i, ok in enumerate(oks):
        with b.predicated(ok):
            b.st("global", Addr(dst, 4 * i), v[i], cache=cache)
