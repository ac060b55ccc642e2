"""Elementwise operators: add (out = x + y) and scale (out = s*x) over n floats.

Both share saxpy's shape: `vec`-wide chunks (128-bit by default), `chunks` of them a grid stride
apart per thread per trip with every load issued before the first store, and a scalar tail for the
n % vec trailing elements. Only the per-element arithmetic differs. As for saxpy, the grid covers
the data in one trip by default (on the H200 that beat every capped grid-stride layout measured);
`ctas_per_sm` caps the grid and threads loop with a grid stride.
"""
import contextlib

import numpy as np

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir import Builder, Module, Param, ptr
from ..ir import types as T
from .base import Launch, Operator, sm_count_or_default


class Elementwise(Operator):
    shape_names = ("n",)
    defaults = {"n": 1 << 20}
    arrays = ()          # input arrays, in kernel-parameter order
    scalars = ()         # f32 scalar parameters, before the arrays
    outputs = ("out",)

    def __init__(self, vec=4, threads=256, ctas_per_sm=None, chunks=1, cache="cs"):
        if vec not in (1, 2, 4):
            raise PtxgenError(f"{self.name}: vec must be 1, 2 or 4 (v1/v2/v4), got {vec!r}")
        if not (isinstance(chunks, int) and chunks >= 1):
            raise PtxgenError(f"{self.name}: chunks must be a positive int, got {chunks!r}")
        self.vec = vec
        self.threads = threads
        self.ctas_per_sm = ctas_per_sm    # None: one trip; else grid = SMs × this at most
        self.chunks = chunks              # vec-wide chunks per thread per trip
        self.cache = cache                # "cs": streaming, each element is touched once

    @property
    def inputs(self):
        return self.arrays

    def combine(self, b, scalars, vals):
        """The output element from the scalar parameters and one element of each input."""
        raise NotImplementedError

    def build(self, shape, arch=DEFAULT_TARGET):
        V = self.vec
        m = Module(target=arch)
        params = [Param("n", T.u32)] + [Param(s, T.f32) for s in self.scalars]
        params += [Param(a, T.u64, ptr(T.f32, align=4 * V)) for a in self.arrays + ("out",)]
        k = m.add_kernel(self.kernel_name(), params)
        k.directives.append(f".maxntid {self.threads}, 1, 1")
        b = Builder(k)
        n = b.param("n")
        scalars = [b.param(s) for s in self.scalars]
        srcs = [b.param(a) for a in self.arrays]
        out = b.param("out")
        gid = b.global_index()
        stride = b.mul(b.special("nctaid.x"), b.special("ntid.x"), name="stride")
        nv = b.shr(n, V.bit_length() - 1, name="nv") if V > 1 else n
        step = b.mul(stride, self.chunks, name="step") if self.chunks > 1 else stride
        with b.for_range(gid, nv, step, type=T.u32, name="i") as i:
            idx = [i] + [b.mad(stride, c, i, name="j") for c in range(1, self.chunks)]
            live = [None] + [b.setp("lt", j, nv) for j in idx[1:]]
            pending = []
            for j, p in zip(idx, live):
                off = b.mul(j, 4 * V, mode="wide", type=T.u32, name="off")
                with _guard(b, p):
                    vals = [b.ld("global", T.f32, b.add(s, off, type=T.u64, name="addr"),
                                 vec=V, cache=self.cache, name=a)
                            for s, a in zip(srcs, self.arrays)]
                pending.append((b.add(out, off, type=T.u64, name="addr"), p, vals))
            for oa, p, vals in pending:
                lanes = zip(*[v if V > 1 else (v,) for v in vals])
                res = [self.combine(b, scalars, list(e)) for e in lanes]
                with _guard(b, p):
                    b.st("global", oa, res if V > 1 else res[0], cache=self.cache)
        if V > 1:
            # the n % vec trailing elements: one thread each
            t = b.add(b.shl(nv, V.bit_length() - 1, name="t"), gid, name="t")
            with b.if_(b.setp("lt", t, n)):
                vals = [b.ld("global", T.f32, b.element_addr(s, t, 4), name=a)
                        for s, a in zip(srcs, self.arrays)]
                b.st("global", b.element_addr(out, t, 4), self.combine(b, scalars, vals))
        b.ret()
        return m

    def launch(self, shape, sm_count=None):
        work = max(1, shape["n"] // self.vec)
        blocks = max(1, -(-work // (self.threads * self.chunks)))
        if self.ctas_per_sm is not None:
            blocks = min(blocks, sm_count_or_default(sm_count) * self.ctas_per_sm)
        return Launch(grid=(blocks, 1, 1), block=(self.threads, 1, 1))

    def make_inputs(self, shape, rng):
        n = shape["n"]
        arrays = {a: rng.standard_normal(n).astype(np.float32) for a in self.arrays}
        arrays.update({s: np.float32(rng.uniform(-2, 2)) for s in self.scalars})
        arrays["out"] = np.full(n, np.nan, dtype=np.float32)
        return arrays

    def kernel_args(self, shape, arrays):
        return ([np.uint32(shape["n"])] + [arrays[s] for s in self.scalars]
                + [arrays[a] for a in self.arrays] + [arrays["out"]])

    def flops(self, shape):
        return shape["n"]

    def bytes_moved(self, shape):
        return 4 * (len(self.arrays) + 1) * shape["n"]


class Add(Elementwise):
    name = "add"
    arrays = ("x", "y")

    def combine(self, b, scalars, vals):
        return b.add(vals[0], vals[1], name="o")

    def reference(self, shape, arrays):
        return {"out": arrays["x"].astype(np.float64) + arrays["y"].astype(np.float64)}


class Scale(Elementwise):
    name = "scale"
    arrays = ("x",)
    scalars = ("s",)

    def combine(self, b, scalars, vals):
        return b.mul(scalars[0], vals[0], name="o")

    def reference(self, shape, arrays):
        return {"out": np.float64(arrays["s"]) * arrays["x"].astype(np.float64)}


def _guard(b, p):
    return b.predicated(p) if p is not None else contextlib.nullcontext()
