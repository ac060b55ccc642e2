"""Grouped matmul (mixture-of-experts): C[rows of expert g] = X[those rows] @ W[g]^T for G
experts in one persistent sm_90a launch (lower/grouped_matmul.py).

Arrays: X (M x K, row-major: every expert's tokens), W (G x N x K: each expert's weights K-major,
as torch's nn.Linear stores them; torch._grouped_mm's (G, K, N) operand is W.transpose(1, 2)) or,
with w_layout="kn", a contiguous G x K x N (N-major, read through wgmma's transpose; bf16/f16,
K a multiple of 64),
C (M x N), rows (uint32 [G]): with layout="offsets" the end row of each expert's tokens
(torch._grouped_mm's offs), with layout="masked" each expert's token count, expert g's tokens
in rows g*(M/G) .. of a padded X (the counts may live on the device, for CUDA graphs). Rows of C
that belong to no expert are left as they were. Inputs bf16 / f16 (uint16 bits / float16), or
fp8 e4m3 / e5m2 bytes with per-tensor scales (scale_a, scale_b: one f32 each, as in
ops/fp8_matmul.py). K must give 16-byte rows (a multiple of 8, fp8 16): no pad copy here.

With a schedule of epilogue="tma", C's tiles that lie inside an expert's rows are staged in shared
memory and stored by TMA (C's rows 16-byte aligned, the tile beside the stages: a bf16 C); the
rest are stored from the registers (lower/grouped_matmul.py). The default stores every tile
from the registers.
"""
import numpy as np

from ..arch import DEFAULT_ARCH_SPECIFIC_TARGET
from ..arrays import TiledMap
from ..errors import Arg, PtxgenError, Spelled
from ..lower.grouped_matmul import LAYOUTS, lower_grouped_matmul
from ..schedule.tc_matmul import (ELEM_BYTES, FP8, MN_BOX, OUT_BYTES, SWIZZLE_BYTES,
                                  TcMatmulSchedule)
from .base import Launch, Operator, sm_count_or_default
from .tc_matmul import MAP_DTYPE, TC_CHIP, TcMatmul


W_LAYOUTS = ("nk", "kn")       # W as G x N x K (K-major) or G x K x N (N-major, 16-bit only)


class GroupedMatmul(Operator):
    name = "grouped_matmul"
    instruction = "wgmma"                       # sm_90a only: one persistent wgmma launch
    shape_names = ("M", "N", "K", "G")
    defaults = {"M": 512, "N": 256, "K": 256, "G": 4}
    outputs = ("C",)

    def __init__(self, dtype="bf16", out="bf16", schedule="auto", layout="offsets",
                 b_dtype=None, w_layout="nk"):
        if dtype in FP8:
            from .fp8_matmul import Fp8Matmul
            self.dense = Fp8Matmul(dtype, out, b_dtype=b_dtype)
        elif dtype in ("bf16", "f16"):
            if b_dtype not in (None, dtype):
                raise PtxgenError(f"grouped_matmul: b_dtype applies to fp8 inputs, got "
                                  f"dtype={dtype!r}, b_dtype={b_dtype!r}")
            self.dense = TcMatmul(dtype, out)
        else:
            raise PtxgenError(f"grouped_matmul: dtype must be bf16, f16, e4m3 or e5m2, got "
                              f"{dtype!r}")
        if layout not in LAYOUTS:
            raise PtxgenError(f"grouped_matmul: layout must be one of {', '.join(LAYOUTS)}, "
                              f"got {layout!r}")
        if w_layout not in W_LAYOUTS:
            raise PtxgenError(f"grouped_matmul: w_layout must be one of {', '.join(W_LAYOUTS)}, "
                              f"got {w_layout!r}")
        if w_layout == "kn" and dtype not in ("bf16", "f16"):
            raise PtxgenError(f"grouped_matmul: an N-major W (w_layout='kn') is read through "
                              f"wgmma's transpose, which {dtype} has not: use w_layout='nk'")
        if schedule != "auto" and not isinstance(schedule, TcMatmulSchedule):
            raise PtxgenError(f"grouped_matmul: schedule must be 'auto' or a TcMatmulSchedule, "
                              f"got {schedule!r}")
        self.dtype, self.out, self.layout, self.schedule = dtype, out, layout, schedule
        self.w_layout = w_layout
        self.b_dtype = b_dtype or dtype
        self.fp8 = dtype in FP8
        self.inputs = ("X", "W", "rows") + (("scale_a", "scale_b") if self.fp8 else ())

    def shape(self, **given):
        shape = super().shape(**given)
        per16 = 16 // ELEM_BYTES[self.dtype]
        if shape["K"] % per16:
            raise PtxgenError(f"grouped_matmul: K={shape['K']} must be a multiple of {per16} "
                              f"(16-byte rows of {self.dtype} for the tensor maps)")
        if self.w_layout == "kn" and shape["K"] % self.schedule_for(shape).BK:
            raise PtxgenError(f"grouped_matmul: an N-major W (w_layout='kn') needs K="
                              f"{shape['K']} a multiple of {self.schedule_for(shape).BK} (a "
                              f"k-box must stay inside its expert)")
        if self.w_layout == "kn" and shape["N"] % 8:
            raise PtxgenError(f"grouped_matmul: an N-major W needs N={shape['N']} a multiple "
                              f"of 8 (16-byte rows for its tensor map)")
        if self.layout == "masked" and shape["M"] % shape["G"]:
            raise PtxgenError(f"grouped_matmul: masked layout needs M={shape['M']} a multiple "
                              f"of G={shape['G']} (M/G rows per expert)")
        return shape

    def schedule_for(self, shape):
        """The given schedule, or the dense kernel's 128x256 tiles with 4 stages and C stored
        from the fragments. The staged form (epilogue="tma", 3 stages: tiles inside their
        expert's rows stored by TMA) is a schedule choice until a GPU run times it against
        this one (benchmarks/llm_gemms.py --parts grouped)."""
        if self.schedule != "auto":
            return self.schedule
        return TcMatmulSchedule().for_dtype(self.dtype)

    def build(self, shape, arch=DEFAULT_ARCH_SPECIFIC_TARGET):
        from .tensor_path import uses_mma_sync
        if uses_mma_sync(arch, "auto"):
            raise PtxgenError(Spelled("grouped_matmul: needs wgmma (",
                                      Arg("arch='sm_90a'", "--arch sm_90a"), f"), not {arch}"))
        return lower_grouped_matmul(self.schedule_for(shape), arch, shape, self.dtype,
                                    self.out, self.layout,
                                    b_dtype=self.b_dtype if self.fp8 else None,
                                    scales=self.fp8, name=self.kernel_name(),
                                    w_major=self.w_layout == "nk")

    def launch(self, shape, sm_count=None):
        """One CTA per SM: how many tiles there are is known on the device only."""
        s = self.schedule_for(shape)
        return Launch(grid=(sm_count_or_default(sm_count, TC_CHIP), 1, 1),
                      block=(s.threads, 1, 1),
                      shared_bytes=s.shared_bytes(ELEM_BYTES[self.dtype], self.c_store(shape),
                                                  self.out))

    def c_store(self, shape):
        """None (C stored from the fragments) or "tile" (staged, TMA; lower_grouped_matmul)."""
        return self.schedule_for(shape).c_store(self.out, shape["M"], shape["N"])

    def kernel_args(self, shape, arrays):
        s = self.schedule_for(shape)
        M, N, K, G = (shape[k] for k in ("M", "N", "K", "G"))
        dt = MAP_DTYPE[self.dtype]
        w = arrays["W"]
        maps = [TiledMap(arrays["X"], dt, s.BM, s.BK),
                TiledMap(w, dt, s.BN, s.BK, rows=G * N, cols=K) if self.w_layout == "nk" else
                TiledMap(w, dt, s.BK, MN_BOX, rows=G * K, cols=N)]
        if self.c_store(shape) == "tile":       # C by TMA: boxes of a consumer's rows x 128 bytes
            maps.append(TiledMap(arrays["C"], self.out, s.rows_per_consumer,
                                 SWIZZLE_BYTES // OUT_BYTES[self.out]))
        args = maps + [arrays["C"], np.uint32(M), np.uint32(N), np.uint32(K)]
        if self.fp8:
            args += [arrays["scale_a"], arrays["scale_b"]]
        return args + [arrays["rows"]]

    # -- inputs and reference --------------------------------------------------------------------
    def expert_rows(self, shape, rows):
        """[(first, end)] of each expert's rows of X and C."""
        rows = np.asarray(rows, np.int64)
        if self.layout == "offsets":
            starts = np.concatenate([[0], rows[:-1]])
            return list(zip(starts.tolist(), rows.tolist()))
        per = shape["M"] // shape["G"]
        return [(g * per, g * per + min(int(c), per)) for g, c in enumerate(rows)]

    def sim_arrays(self, shape):
        """The rows a simulation reads: M split evenly over the experts (every expert full in
        the masked layout)."""
        M, G = shape["M"], shape["G"]
        per = M // G
        rows = (np.arange(1, G + 1) * per if self.layout == "offsets" else np.full(G, per))
        if self.layout == "offsets":
            rows[-1] = M
        return {"rows": rows.astype(np.uint32)}

    def make_inputs(self, shape, rng):
        M, N, K, G = (shape[k] for k in ("M", "N", "K", "G"))
        if self.layout == "offsets":     # random cut points: uneven experts, some maybe empty
            rows = np.sort(rng.integers(0, M + 1, G - 1))
            rows = np.concatenate([rows, [M]]).astype(np.uint32)
        else:
            rows = rng.integers(0, M // G + 1, G).astype(np.uint32)
        d = self.dense
        arrays = dict(X=d.to_input(rng.standard_normal((M, K))),
                      W=d.to_input(rng.standard_normal((G, N, K) if self.w_layout == "nk"
                                                       else (G, K, N)), *(
                          (self.b_dtype,) if self.fp8 else ())),
                      rows=rows, C=d.make_inputs(dict(M=M, N=N, K=8), rng)["C"])
        if self.fp8:
            for s in ("scale_a", "scale_b"):
                arrays[s] = np.array([rng.uniform(0.25, 2.0)], np.float32)
        return arrays

    def _dense_arrays(self, arrays, g, lo, hi):
        w = arrays["W"][g]
        a = dict(A=arrays["X"][lo:hi], Bt=w if self.w_layout == "nk" else w.T,
                 C=arrays["C"][lo:hi])
        if self.fp8:
            a.update(scale_a=arrays["scale_a"], scale_b=arrays["scale_b"])
        return a

    def reference(self, shape, arrays):
        """float64 C and bounds of every expert's rows (NaN where no expert writes)."""
        M, N = shape["M"], shape["N"]
        want, bound = np.full((M, N), np.nan), np.full((M, N), np.nan)
        for g, (lo, hi) in enumerate(self.expert_rows(shape, arrays["rows"])):
            if hi > lo:
                sub = dict(M=hi - lo, N=N, K=shape["K"])
                r = self.dense.reference(sub, self._dense_arrays(arrays, g, lo, hi))
                want[lo:hi], bound[lo:hi] = r["C"], r["bound"]
        return {"C": want, "bound": bound}

    def check(self, shape, arrays, reference=None):
        """Every expert's rows within their bound, every other row of C untouched (still the
        poison make_inputs filled it with)."""
        ref = reference or self.reference(shape, arrays)
        got = self.dense.values(arrays["C"], self.out)
        mine = ~np.isnan(ref["C"])
        err = np.abs(got - np.where(mine, ref["C"], 0.0))
        ok = bool(np.all(np.isfinite(got[mine])) and np.all(err[mine] <= ref["bound"][mine])
                  and np.all(np.isnan(got[~mine])))
        worst = float(np.max(err[mine] / np.maximum(np.abs(ref["C"][mine]), 1.0))) \
            if mine.any() else 0.0
        return ok, worst

    def flops(self, shape):
        return 2 * shape["M"] * shape["N"] * shape["K"]

    def bytes_moved(self, shape):
        e = ELEM_BYTES[self.dtype]
        return e * (shape["M"] * shape["K"] + shape["G"] * shape["N"] * shape["K"]) + \
            (4 if self.out == "f32" else 2) * shape["M"] * shape["N"]
