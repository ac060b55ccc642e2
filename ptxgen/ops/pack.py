"""pad_copy: copy a row-major fp32 matrix into a larger, zero-padded one whose rows are
16-byte aligned (pad_copy_b16: the same for 16-bit elements).

    pad_copy(u32 rows, u32 cols, u32 out_rows, u32 out_chunks, f32* src, f32* dst)

dst has out_rows rows of 4*out_chunks floats (8*out_chunks 16-bit elements); dst[r][c] =
src[r][c] for r < rows, c < cols, else 0. One thread writes one 16-byte chunk (st.global.v2.b64,
the rows being 16-byte aligned) from the one or two aligned 16-byte blocks of the source that
cover it, re-aligned in registers (lower/pad_rows.py: no element-wise loads). The launch is
2-D, so no thread divides: x runs over a row's chunks (a block's x extent is the chunks per row
rounded up to a power of two, at most THREADS), y over rows (a grid-stride loop past the grid's
y limit). The fp32 matmul uses it to give misaligned operands 128-bit loads in its main loop
(ops/matmul.py); the tensor-core matmuls to give their tensor maps 16-byte aligned rows
(ops/tc_matmul.py, ops/mma_matmul.py).

Measured on the H200 (docs/PERF.md, "Fast pad copy"): see there for its GB/s against the
element-wise kernel it replaced and torch's strided copy.
"""
import numpy as np

from .. import isa
from ..ir import Builder, Param, ptr
from ..ir import types as T
from ..lower.pad_rows import copy_chunk
from .base import Launch

KERNEL = "pad_copy"
KERNEL16 = "pad_copy_b16"
KERNEL8 = "pad_copy_b8"
THREADS = 256

def add_pad_copy(module, elem=T.f32):
    """Add pad_copy (elem f32), pad_copy_b16 (elem b16) or pad_copy_b8 (elem b8) to `module`
    (once); return it."""
    name = {32: KERNEL, 16: KERNEL16, 8: KERNEL8}[elem.bits]
    if any(k.name == name for k in module.kernels):
        return module
    k = module.add_kernel(name, [
        Param("rows", T.u32), Param("cols", T.u32), Param("out_rows", T.u32),
        Param("out_chunks", T.u32), Param("src", T.u64, ptr(elem)),
        Param("dst", T.u64, ptr(elem, align=16))])
    k.directives.append(f".maxntid {THREADS}, 1, 1")
    b = Builder(k)
    rows, cols = b.param("rows"), b.param("cols")
    out_rows, chunks = b.param("out_rows"), b.param("out_chunks")
    src, dst = b.param("src"), b.param("dst")
    c = b.mad(b.special("ctaid.x"), b.special("ntid.x"), b.special("tid.x"), name="c")
    done = b.new_label("done")
    b.branch(done, b.setp("ge", c, chunks))
    end = b.add(src, b.mul(b.mul(rows, cols, mode="wide", type=T.u32, name="n"), elem.nbytes,
                           type=T.u64), type=T.u64, name="end")
    first = b.mad(b.special("ctaid.y"), b.special("ntid.y"), b.special("tid.y"), name="r0")
    step = b.mul(b.special("nctaid.y"), b.special("ntid.y"), name="rstep")
    pitch = b.shl(chunks, 4, name="pitch")
    with b.for_range(first, out_rows, step, type=T.u32, name="r") as r:
        row = b.add(dst, b.mul(r, pitch, mode="wide", type=T.u32, name="ro"), type=T.u64,
                    name="drow")
        copy_chunk(b, src, end, row, r, c, rows, cols, elem.nbytes)
    b.label(done)
    b.ret()
    return module

def padded(n, multiple=4):
    """n rounded up to a multiple of 4 (a 16-byte aligned row of fp32; 8 for 16-bit)."""
    return -(-n // multiple) * multiple

def pad_launch(out_rows, out_cols, per_chunk=4):
    """Block: x over a row's chunks (a power of two up to THREADS), y over rows; grid y capped
    at the launch limit (the kernel loops over the rows past it)."""
    chunks = max(1, out_cols // per_chunk)
    bx = min(THREADS, 1 << (chunks - 1).bit_length())
    by = THREADS // bx
    gy = min(-(-out_rows // by), isa.launch_limits()["max_grid_dim"][1])
    return Launch(grid=(-(-chunks // bx), max(1, gy), 1), block=(bx, by, 1))

def pad_args(rows, cols, out_rows, out_cols, src, dst, per_chunk=4):
    return [np.uint32(rows), np.uint32(cols), np.uint32(out_rows),
            np.uint32(out_cols // per_chunk), src, dst]
