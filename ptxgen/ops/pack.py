"""pad_copy: copy a row-major fp32 matrix into a larger, zero-padded one whose rows are
16-byte aligned.

    pad_copy(u32 rows, u32 cols, u32 out_rows, u32 out_chunks, f32* src, f32* dst)

dst has out_rows rows of 4*out_chunks floats; dst[r][c] = src[r][c] for r < rows, c < cols,
else 0. One thread writes one 16-byte chunk (st.global.v4, the rows being 16-byte aligned) from
up to four predicated 32-bit loads (src rows need not be aligned). The matmul operator uses it
to give misaligned operands 128-bit loads in its main loop (see ops/matmul.py).
"""
import numpy as np

from ..ir import Addr, Builder, Param, ptr
from ..ir import types as T
from .base import Launch

KERNEL = "pad_copy"
THREADS = 256


def add_pad_copy(module):
    """Add the pad_copy kernel to `module` (once) and return the module."""
    if any(k.name == KERNEL for k in module.kernels):
        return module
    k = module.add_kernel(KERNEL, [
        Param("rows", T.u32), Param("cols", T.u32), Param("out_rows", T.u32),
        Param("out_chunks", T.u32), Param("src", T.u64, ptr(T.f32)),
        Param("dst", T.u64, ptr(T.f32, align=16))])
    k.directives.append(f".reqntid {THREADS}, 1, 1")
    b = Builder(k)
    rows, cols = b.param("rows"), b.param("cols")
    out_rows, chunks = b.param("out_rows"), b.param("out_chunks")
    src, dst = b.param("src"), b.param("dst")
    idx = b.mad(b.special("ctaid.x"), THREADS, b.special("tid.x"), name="idx")
    total = b.mul(out_rows, chunks, name="total")
    done = b.new_label("done")
    b.branch(done, b.setp("ge", idx, total))
    r = b.div(idx, chunks, name="r")
    c = b.shl(b.sub(idx, b.mul(r, chunks, name="rc"), name="cq"), 2, name="c")
    row_ok = b.setp("lt", r, rows)
    base = b.element_addr(src, b.mad(r, cols, b.cvt(T.u64, c, name="c64"), mode="wide",
                                     type=T.u32, name="si"), 4)
    vals = []
    for i in range(4):
        v = b.const(0.0, T.f32, name="v")
        ok = b.and_(row_ok, b.setp("lt", b.add(c, i, name="ci") if i else c, cols), name="ok")
        with b.predicated(ok):
            b.ld("global", T.f32, Addr(base, 4 * i), out=v)
        vals.append(v)
    b.st("global", b.element_addr(dst, b.cvt(T.u64, idx, name="i64"), 16), vals)
    b.label(done)
    b.ret()
    return module


def padded(n):
    """n rounded up to a multiple of 4 (a 16-byte aligned row of fp32)."""
    return -(-n // 4) * 4


def pad_launch(out_rows, out_cols):
    chunks = out_rows * (out_cols // 4)
    return Launch(grid=(max(1, -(-chunks // THREADS)), 1, 1), block=(THREADS, 1, 1))


def pad_args(rows, cols, out_rows, out_cols, src, dst):
    return [np.uint32(rows), np.uint32(cols), np.uint32(out_rows), np.uint32(out_cols // 4),
            src, dst]
