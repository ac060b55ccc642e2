"""A blocked (tiled, register-blocked) matmul checked against numpy.

C = A @ B in fp32 with ptxgen's SGEMM schedule: 64x64 block tiles, 8-deep K steps, 8x8
accumulators per thread. The shapes are chosen to hit every edge: sizes that are not tile
multiples (predicated/clamped tiles), K and N not multiples of 4 (scalar instead of 128-bit
loads), a single partial tile. The error is judged against the bound of fp32 summation:
|C - A@B| <= K * eps32 * (|A| @ |B|) elementwise (a sum of K products, each rounded).

    python samples/blocked_matmul.py
"""
import numpy as np
from _common import backend, run_op, say_backend

from ptxgen.ops.matmul import Matmul
from ptxgen.schedule import CANDIDATES

SCHEDULE = CANDIDATES["64x64x8"]
SHAPES_CPU = [(128, 128, 64), (100, 75, 33), (64, 200, 130), (17, 9, 5)]
SHAPES_GPU = [(1024, 1024, 1024), (1000, 750, 333), (640, 2000, 1300), (17, 9, 5)]


def main():
    where = backend()
    op = Matmul(SCHEDULE)
    s = SCHEDULE
    print(f"blocked matmul, schedule {s}: {s.BM}x{s.BN} tile per CTA of {s.threads} threads, "
          f"{s.TM}x{s.TN} accumulators per thread, K in steps of {s.BK}; on "
          f"{say_backend(where)}")
    eps = float(np.finfo(np.float32).eps)
    worst = 0.0
    for M, N, K in (SHAPES_GPU if where == "gpu" else SHAPES_CPU):
        shape = op.shape(M=M, N=N, K=K)
        arrays, where = run_op(op, shape, seed=M * N + K)
        A, B, C = (arrays[k] for k in ("A", "B", "C"))
        ref = A.astype(np.float64) @ B.astype(np.float64)
        bound = K * eps * (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64))
        err = np.abs(C.astype(np.float64) - ref)
        used = float(np.max(err / bound))
        worst = max(worst, used if np.all(np.isfinite(C)) else np.inf)
        edges = []
        if M % s.BM or N % s.BN:
            edges.append("partial tiles")
        if K % 4 or N % 4:
            edges.append("scalar loads (K or N not a multiple of 4)")
        print(f"  {M:>5} x {N:>5} x {K:>5}: max |C - A@B| = {float(err.max()):.2e}, "
              f"{100 * used:5.2f}% of the fp32 summation bound"
              + (f"  [{', '.join(edges)}]" if edges else ""))
    ok = worst <= 1.0
    print(f"{'all within' if ok else 'OUTSIDE'} the bound: the kernel computes A @ B "
          f"(numpy's float64 product is the reference)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
