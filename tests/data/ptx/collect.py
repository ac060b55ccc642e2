"""Regenerate the Numba and ptxgen PTX samples in this folder (no GPU needed: NVVM only).

    .venv/bin/python tests/data/ptx/collect.py

The parser and analyzer tests read these files; they are checked in so tests do not depend on
Numba's compiler being importable. hand_*.ptx are written by hand; triton_*.ptx come from
`benchmarks/triton_kernels.py --launch` on a GPU machine (add, fp32 matmul, softmax) and
benchmarks/triton_kernels.py on any machine (wgmma/TMA matmuls, attention).
"""
import sys
from pathlib import Path

from numba import cuda, float32

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
TILE = 16


def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


def matmul_naive(A, B, C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = acc


def matmul_shared(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    x, y = cuda.grid(2)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    acc = float32(0.0)
    for t in range((A.shape[1] + TILE - 1) // TILE):
        sA[ty, tx] = 0.0
        sB[ty, tx] = 0.0
        if y < A.shape[0] and tx + t * TILE < A.shape[1]:
            sA[ty, tx] = A[y, tx + t * TILE]
        if x < B.shape[1] and ty + t * TILE < B.shape[0]:
            sB[ty, tx] = B[ty + t * TILE, x]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = acc


def block_reduce(x, total):
    buf = cuda.shared.array(256, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    s = 128
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        cuda.atomic.add(total, 0, buf[0])


def transpose_padded(a, b):
    tile = cuda.shared.array((32, 33), float32)
    x = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    y = cuda.blockIdx.y * 32 + cuda.threadIdx.y
    if x < a.shape[1] and y < a.shape[0]:
        tile[cuda.threadIdx.y, cuda.threadIdx.x] = a[y, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * 32 + cuda.threadIdx.x
    y = cuda.blockIdx.x * 32 + cuda.threadIdx.y
    if x < b.shape[1] and y < b.shape[0]:
        b[y, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y]


KERNELS = {
    "saxpy": (saxpy, "float32, float32[:], float32[:], float32[:]"),
    "matmul_naive": (matmul_naive, "float32[:,:], float32[:,:], float32[:,:]"),
    "matmul_shared": (matmul_shared, "float32[:,:], float32[:,:], float32[:,:]"),
    "block_reduce": (block_reduce, "float32[:], float32[:]"),
    "transpose_padded": (transpose_padded, "float32[:,:], float32[:,:]"),
}


def main():
    for cc in ((8, 0), (9, 0)):
        for name, (fn, sig) in KERNELS.items():
            ptx, _ = cuda.compile_ptx(fn, sig, cc=cc)
            (HERE / f"numba_{name}_sm{cc[0]}{cc[1]}.ptx").write_text(ptx)
    # debug info: .file/.loc lines and .section blocks the parser must carry through
    ptx, _ = cuda.compile_ptx(saxpy, KERNELS["saxpy"][1], cc=(8, 0), lineinfo=True)
    (HERE / "numba_saxpy_lineinfo_sm80.ptx").write_text(ptx)
    ptx, _ = cuda.compile_ptx(block_reduce, KERNELS["block_reduce"][1], cc=(9, 0), debug=True,
                              opt=False)
    (HERE / "numba_block_reduce_debug_sm90.ptx").write_text(ptx)
    from ptxgen.emit import emit_module
    from ptxgen.ops import OPERATORS
    for arch in ("sm_80", "sm_90"):
        for name, op in sorted(OPERATORS.items()):
            module = op.build(op.shape(), arch)
            (HERE / f"ptxgen_{name}_{arch.replace('_', '')}.ptx").write_text(
                emit_module(module, arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
