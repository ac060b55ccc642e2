"""matmul_edge: the last few columns of C = A @ B as matrix-vector products, one warp per row.

    matmul_edge(u32 M, u32 n0, u32 K, u32 ldb, u32 ldc, f32* A, f32* B, f32* C)

C[r][n0 + e] = sum_k A[r][k] * B[k][n0 + e] for r < M and e < E (E, at most MAX_COLS, is
compiled in). A is row-major M x K with K a multiple of 4 and 16-byte aligned rows (the packed
operand), so each lane reads float4 chunks of its row, 128 floats apart per warp trip; the
columns of B it needs are scalar loads that every warp shares through L1. Lanes combine their
partial sums with shuffles and lane 0 stores the E results.

Why: N = 4097 with 128-wide block tiles needs a 33rd column of CTAs for one column, 3 % more
CTAs. With pack=True the matmul operator instead runs its kernel on the first N - E columns (a
multiple of BN) and this one on the last E.
"""
import numpy as np

from ..ir import Addr, Builder, Param, ptr
from ..ir import types as T
from .base import Launch
from .reduce import fsum, warp_allreduce

KERNEL = "matmul_edge"
MAX_COLS = 4
WARPS = 8                       # rows per CTA


def add_matmul_edge(module, cols):
    """Add matmul_edge for `cols` (1..MAX_COLS) trailing columns to `module`."""
    k = module.add_kernel(KERNEL, [
        Param("M", T.u32), Param("n0", T.u32), Param("K", T.u32), Param("ldb", T.u32),
        Param("ldc", T.u32), Param("A", T.u64, ptr(T.f32, align=16)),
        Param("B", T.u64, ptr(T.f32)), Param("C", T.u64, ptr(T.f32))])
    k.directives.append(f".reqntid {32 * WARPS}, 1, 1")
    b = Builder(k)
    M, n0, K = b.param("M"), b.param("n0"), b.param("K")
    ldb, ldc = b.param("ldb"), b.param("ldc")
    A, B, C = b.param("A"), b.param("B"), b.param("C")
    tid = b.special("tid.x")
    lane = b.and_(tid, 31, name="lane")
    row = b.mad(b.special("ctaid.x"), WARPS, b.shr(tid, 5, name="warp"), name="row")
    done = b.new_label("done")
    b.branch(done, b.setp("ge", row, M))           # whole warps leave: shuffles stay full
    arow = b.element_addr(A, b.mul(row, K, mode="wide", type=T.u32, name="ai"), 4)
    bcol = b.element_addr(B, n0, 4)
    acc = [b.const(0.0, T.f32, name="acc") for _ in range(cols)]
    with b.for_range(b.shl(lane, 2, name="k0"), K, 128, type=T.u32, name="k") as kk:
        a = b.ld("global", T.f32, b.element_addr(arow, kk, 4), vec=4, name="a")
        brow = b.element_addr(bcol, b.mul(kk, ldb, mode="wide", type=T.u32, name="bi"), 4)
        step = b.mul(ldb, 4, mode="wide", type=T.u32, name="bstep")
        for q in range(4):
            if q:
                brow = b.add(brow, step, type=T.u64, name="brow")
            for e in range(cols):
                bv = b.ld("global", T.f32, Addr(brow, 4 * e), name="b")
                b.fma(a[q], bv, acc[e], out=acc[e])
    total = warp_allreduce(b, tuple(acc), fsum(b))
    crow = b.element_addr(C, b.mad(row, ldc, b.cvt(T.u64, n0, name="n64"), mode="wide",
                                   type=T.u32, name="ci"), 4)
    with b.predicated(b.setp("eq", lane, 0)):
        for e in range(cols):
            b.st("global", Addr(crow, 4 * e), total[e])
    b.label(done)
    b.ret()
    return module


def edge_launch(M):
    return Launch(grid=(-(-M // WARPS), 1, 1), block=(32 * WARPS, 1, 1))


def edge_args(M, n0, K, ldb, ldc, A, B, C):
    return [np.uint32(M), np.uint32(n0), np.uint32(K), np.uint32(ldb), np.uint32(ldc), A, B, C]
