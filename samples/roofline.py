"""A roofline of three kernels: a naive matmul, a blocked matmul and an attention-like block,
softmax(Q K^T) V, built from library operators (transpose, matmul, softmax, matmul).

The ceilings come from the machine model (isa/<arch>.toml); FLOPs and bytes from the operators
(compulsory DRAM traffic); times are measured on the GPU when there is one, else predicted by
the cycle simulator. The chart is written as a PNG. The attention pipeline is also run end to
end at a small size and compared with numpy.

    python samples/roofline.py [OUT.png]
"""
import os
import sys
import tempfile

import numpy as np
from _common import backend, run_op, say_backend

from ptxgen.reports.roofline import Workload, roofline
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.ops.base import Launch
from ptxgen.ops.matmul import Matmul
from ptxgen.ops.softmax import Softmax
from ptxgen.ops.transpose import Transpose

N_MM = 1024                       # the matmuls: 1024^3
SEQ, HEAD = 1024, 64              # attention: 1024 queries and keys, 64 features


class NaiveMatmul(Matmul):
    """One thread per element of C reading A and B straight from global memory: every value is
    loaded K times (by different threads), nothing is kept in shared memory or registers."""
    name = "matmul_naive"

    def __init__(self):
        super().__init__(schedule=None)

    def kernel_name(self):
        return "matmul_naive"

    def build(self, shape, arch="sm_90"):
        m = Module(target=arch)
        k = m.add_kernel("matmul_naive", [
            Param("M", T.u32), Param("N", T.u32), Param("K", T.u32),
            Param("A", T.u64, ptr(T.f32)), Param("B", T.u64, ptr(T.f32)),
            Param("C", T.u64, ptr(T.f32))])
        b = Builder(k)
        M, N, K = b.param("M"), b.param("N"), b.param("K")
        A, B, C = b.param("A"), b.param("B"), b.param("C")
        row, col = b.global_index("y"), b.global_index("x")
        with b.if_(b.and_(b.setp("lt", row, M), b.setp("lt", col, N))):
            acc = b.const(0.0, T.f32, name="acc")
            with b.for_range(0, K, 1, type=T.u32, name="k") as kk:
                a = b.ld("global", T.f32, b.element_addr(A, b.mad(row, K, kk), 4))
                v = b.ld("global", T.f32, b.element_addr(B, b.mad(kk, N, col), 4))
                b.fma(a, v, acc, out=acc)
            b.st("global", b.element_addr(C, b.mad(row, N, col), 4), acc)
        b.ret()
        return m

    def launch(self, shape, sm_count=132):
        return Launch(grid=(-(-shape["N"] // 16), -(-shape["M"] // 16), 1), block=(16, 16, 1))


def attention_parts(n, d):
    """softmax(Q K^T) V as library launches: K^T, scores = Q @ K^T, softmax, scores @ V."""
    return [(Transpose(), {"M": n, "N": d}), (Matmul(), {"M": n, "N": n, "K": d}),
            (Softmax(), {"M": n, "N": n}), (Matmul(), {"M": n, "N": d, "K": n})]


def check_attention(n=48, d=16, seed=0):
    """The four launches chained on real data, compared with numpy; returns max abs error."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    q = (q / np.sqrt(d)).astype(np.float32)           # the 1/sqrt(d) scale, folded into Q
    tr, qk, sm, pv = (op for op, _ in attention_parts(n, d))
    kt = run_op(tr, {"M": n, "N": d}, {"x": k, "out": np.empty((d, n), np.float32)})[0]["out"]
    s = run_op(qk, {"M": n, "N": n, "K": d},
               {"A": q, "B": kt, "C": np.empty((n, n), np.float32)})[0]["C"]
    p = run_op(sm, {"M": n, "N": n}, {"x": s, "out": np.empty((n, n), np.float32)})[0]["out"]
    o, where = run_op(pv, {"M": n, "N": d, "K": n},
                      {"A": p, "B": v, "C": np.empty((n, d), np.float32)})
    s64 = q.astype(np.float64) @ k.astype(np.float64).T
    e = np.exp(s64 - s64.max(axis=1, keepdims=True))
    ref = (e / e.sum(axis=1, keepdims=True)) @ v
    return float(np.max(np.abs(o["C"] - ref))), where


def main(argv):
    out = argv[0] if argv else os.path.join(tempfile.gettempdir(), "ptxgen_roofline.png")
    where = backend()
    mm = {"M": N_MM, "N": N_MM, "K": N_MM}
    err, ran = check_attention()
    print(f"attention-like softmax(Q K^T) V from transpose + matmul + softmax + matmul, run at "
          f"48x16 on {say_backend(ran)}: max |error| {err:.1e} against numpy "
          f"({'ok' if err < 1e-4 else 'WRONG'})")
    r = roofline([(NaiveMatmul(), mm), (Matmul(), mm),
                  Workload(f"attention {SEQ}x{HEAD}", attention_parts(SEQ, HEAD))],
                 time="gpu" if where == "gpu" else "sim")
    r.points[0].name, r.points[1].name = "naive matmul", "blocked matmul"
    print(r.to_text(), end="")
    naive, blocked, att = r.points
    sm = Softmax()
    sm_shape = {"M": SEQ, "N": SEQ}
    print(f"why: both matmuls do the same {naive.flops:.3g} FLOPs on the same {naive.bytes:.3g} "
          f"compulsory bytes ({naive.intensity:.0f} FLOP/B, right of the ridge at "
          f"{r.ridge:.1f}): compute-bound in principle. The naive one re-reads A and B from "
          f"memory for every output and reaches {blocked.gflops / naive.gflops:.1f}x less than "
          f"the blocked one, which reuses tiles from shared memory and registers.")
    print(f"     attention: its softmax moves the {SEQ}x{SEQ} scores in and out "
          f"({sm.bytes_moved(sm_shape):.3g} of its {att.bytes:.3g} bytes) for "
          f"{sm.flops(sm_shape) / sm.bytes_moved(sm_shape):.2f} FLOP/B, which pulls the block "
          f"to {att.intensity:.1f} FLOP/B ({att.bound}-bound at {100 * att.fraction:.0f}% of "
          f"its roof, {att.roof}); fusing the softmax into the matmuls would remove that "
          f"traffic.")
    r.write_png(out)
    print(f"chart written: {out}")
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
