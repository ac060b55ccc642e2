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
"""
import numpy as np

from ..errors import PtxgenError
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from .base import Launch, Operator

MAX_GRID_Y = 65535


class Transpose(Operator):
    name = "transpose"
    shape_names = ("M", "N")
    defaults = {"M": 1024, "N": 1000}
    inputs = ("x",)
    outputs = ("out",)
    rtol = 0.0                 # a transpose moves bits: the output must match exactly
    atol = 0.0

    def __init__(self, tile=32, block_rows=4, pad=1):
        if tile not in (32, 64):
            raise PtxgenError(f"transpose: tile must be 32 or 64, got {tile!r}")
        if block_rows not in (1, 2, 4, 8, 16, 32) or block_rows > tile:
            raise PtxgenError(f"transpose: block_rows must be a power of two up to the tile, "
                              f"got {block_rows!r}")
        if pad not in (0, 1):
            raise PtxgenError(f"transpose: pad must be 0 or 1, got {pad!r}")
        self.tile, self.block_rows, self.pad = tile, block_rows, pad

    def kernel_name(self):
        return self.name

    def build(self, shape, arch="sm_90"):
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
        c0 = b.mul(b.special("ctaid.x"), TS, name="c0")     # first column of x in this tile
        r0 = b.mul(b.special("ctaid.y"), TS, name="r0")     # first row of x in this tile
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
                    v = b.ld("global", T.f32, Addr(src, 128 * c), name="v")
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
                        b.st("global", Addr(dst, 128 * c), v)
        b.ret()
        return m

    def launch(self, shape, sm_count=132):
        TS = self.tile
        gy = -(-shape["M"] // TS)
        if gy > MAX_GRID_Y:
            raise PtxgenError(f"transpose: M={shape['M']} needs {gy} tile rows, more than the "
                              f"grid's {MAX_GRID_Y}")
        return Launch(grid=(-(-shape["N"] // TS), gy, 1), block=(32, self.block_rows, 1))

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


def _addr(b, base, row, ncols, col, name):
    """base + (row*ncols + col)*4 with the index computed in 64 bits."""
    idx = b.mad(row, ncols, b.cvt(T.u64, col, name="c64"), mode="wide", type=T.u32, name="idx")
    return b.add(base, b.shl(idx, 2, name="ib"), name=name)


def _plus(b, r, k):
    return b.add(r, k, name="ix") if k else r
