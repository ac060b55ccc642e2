"""pad_copy: copy a row-major fp32 matrix into a larger, zero-padded one whose rows are
16-byte aligned (pad_copy_b16: the same for 16-bit elements).

    pad_copy(u32 rows, u32 cols, u32 out_rows, u32 out_chunks, f32* src, f32* dst)

dst has out_rows rows of 4*out_chunks floats (8*out_chunks 16-bit elements); dst[r][c] =
src[r][c] for r < rows, c < cols, else 0. One thread writes one 16-byte chunk (st.global.v4, the
rows being 16-byte aligned) from up to four 32-bit (eight 16-bit) predicated loads (src rows need
not be aligned). The fp32 matmul uses it to give misaligned operands 128-bit loads in its main
loop (ops/matmul.py); the tensor-core matmul to give its tensor maps 16-byte aligned rows
(ops/tc_matmul.py).
"""
import numpy as np

from ..ir.builder import pow2_exponent
from ..ir import Addr, Builder, Param, ptr
from ..ir.values import Vec
from ..ir import types as T
from .base import Launch

KERNEL = "pad_copy"
KERNEL16 = "pad_copy_b16"
THREADS = 256


def add_pad_copy(module, elem=T.f32):
    """Add pad_copy (elem f32) or pad_copy_b16 (elem b16) to `module` (once); return it."""
    name = KERNEL if elem.bits == 32 else KERNEL16
    if any(k.name == name for k in module.kernels):
        return module
    per_chunk = 16 // elem.nbytes
    k = module.add_kernel(name, [
        Param("rows", T.u32), Param("cols", T.u32), Param("out_rows", T.u32),
        Param("out_chunks", T.u32), Param("src", T.u64, ptr(elem)),
        Param("dst", T.u64, ptr(elem, align=16))])
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
    c = b.shl(b.sub(idx, b.mul(r, chunks, name="rc"), name="cq"), pow2_exponent(per_chunk), name="c")
    row_ok = b.setp("lt", r, rows)
    base = b.element_addr(src, b.mad(r, cols, b.cvt(T.u64, c, name="c64"), mode="wide",
                                     type=T.u32, name="si"), elem.nbytes)
    vals = []
    for i in range(per_chunk):
        v = b.const(0.0 if elem.is_float else 0, elem, name="v")
        ok = b.and_(row_ok, b.setp("lt", b.add(c, i, name="ci") if i else c, cols), name="ok")
        with b.predicated(ok):
            b.ld("global", elem, Addr(base, elem.nbytes * i), out=v)
        vals.append(v)
    if elem.bits == 16:                  # pairs into words, element i in the low half
        words = [b.reg(T.b32, "w") for _ in range(4)]
        for w, i in zip(words, range(0, 8, 2)):
            b.mov(Vec((vals[i], vals[i + 1])), type=T.b32, out=w)
        vals = words
    b.st("global", b.element_addr(dst, b.cvt(T.u64, idx, name="i64"), 16), vals)
    b.label(done)
    b.ret()
    return module


def padded(n, multiple=4):
    """n rounded up to a multiple of 4 (a 16-byte aligned row of fp32; 8 for 16-bit)."""
    return -(-n // multiple) * multiple


def pad_launch(out_rows, out_cols, per_chunk=4):
    chunks = out_rows * (out_cols // per_chunk)
    return Launch(grid=(max(1, -(-chunks // THREADS)), 1, 1), block=(THREADS, 1, 1))


def pad_args(rows, cols, out_rows, out_cols, src, dst, per_chunk=4):
    return [np.uint32(rows), np.uint32(cols), np.uint32(out_rows),
            np.uint32(out_cols // per_chunk), src, dst]
