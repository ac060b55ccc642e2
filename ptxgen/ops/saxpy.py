"""saxpy: out = a*x + y over n floats, 128-bit accesses, scalar tail.

By default each thread moves one 16-byte chunk of each array (a CTA per 4 KB slice, as many CTAs
as needed): on the H200 this beat every grid-stride variant measured (docs/PERF.md). With
`ctas_per_sm` set the grid is capped and threads loop with a grid stride.
"""
import contextlib

import numpy as np

from ..arch import DEFAULT_TARGET
from ..ir import Builder, Module, Param, ptr
from ..ir import types as T
from .base import Launch, Operator, sm_count_or_default


class Saxpy(Operator):
    name = "saxpy"
    shape_names = ("n",)
    defaults = {"n": 1 << 20}
    inputs = ("x", "y")
    outputs = ("out",)

    def __init__(self, threads=256, ctas_per_sm=None, cache="cs", chunks=1, load_cache=None):
        self.threads = threads
        # grid = SMs × ctas_per_sm (grid-stride loop), or None: one trip, a CTA per slice
        self.ctas_per_sm = ctas_per_sm
        self.cache = cache                  # "cs": streaming, the data is touched once
        self.load_cache = load_cache or cache   # loads may differ ("nc": read-only path)
        self.chunks = chunks                # 16-byte chunks per thread per trip

    def build(self, shape, arch=DEFAULT_TARGET):
        m = Module(target=arch)
        k = m.add_kernel("saxpy", [
            Param("n", T.u32), Param("a", T.f32),
            Param("x", T.u64, ptr(T.f32, align=16)), Param("y", T.u64, ptr(T.f32, align=16)),
            Param("out", T.u64, ptr(T.f32, align=16))])
        k.directives.append(f".maxntid {self.threads}, 1, 1")
        b = Builder(k)
        n, a = b.param("n"), b.param("a")
        x, y, out = b.param("x"), b.param("y"), b.param("out")
        gid = b.global_index()
        stride = b.mul(b.special("nctaid.x"), b.special("ntid.x"), name="stride")
        n4 = b.shr(n, 2, name="n4")
        # Each trip handles `chunks` 16-byte chunks spaced a grid stride apart: all loads are
        # issued before the first store, so more bytes are in flight per thread.
        step = b.mul(stride, self.chunks, name="step") if self.chunks > 1 else stride
        with b.for_range(gid, n4, step, type=T.u32, name="i") as i:
            idx = [i] + [b.mad(stride, c, i, name="j") for c in range(1, self.chunks)]
            live = [None] + [b.setp("lt", j, n4) for j in idx[1:]]
            vals = []
            for j, p in zip(idx, live):
                off = b.mul(j, 16, mode="wide", type=T.u32, name="off")
                xa, ya, oa = (b.add(q, off, type=T.u64, name="addr") for q in (x, y, out))
                with b.predicated(p) if p is not None else _nothing():
                    xv = b.ld("global", T.f32, xa, vec=4, cache=self.load_cache, name="x")
                    yv = b.ld("global", T.f32, ya, vec=4, cache=self.load_cache, name="y")
                vals.append((oa, p, xv, yv))
            for oa, p, xv, yv in vals:
                res = [b.fma(a, xi, yi, name="o") for xi, yi in zip(xv, yv)]
                with b.predicated(p) if p is not None else _nothing():
                    b.st("global", oa, res, cache=self.cache)
        # the n % 4 trailing elements: one thread each
        t = b.add(b.shl(n4, 2, name="t"), gid, name="t")
        with b.if_(b.setp("lt", t, n)):
            xa = b.element_addr(x, t, 4)
            ya = b.element_addr(y, t, 4)
            oa = b.element_addr(out, t, 4)
            b.st("global", oa, b.fma(a, b.ld("global", T.f32, xa, name="x"),
                                     b.ld("global", T.f32, ya, name="y"), name="o"))
        b.ret()
        return m

    def launch(self, shape, sm_count=None):
        n = shape["n"]
        blocks = max(1, -(-max(n // 4, 1) // (self.threads * self.chunks)))
        if self.ctas_per_sm is not None:
            blocks = min(blocks, sm_count_or_default(sm_count) * self.ctas_per_sm)
        return Launch(grid=(blocks, 1, 1), block=(self.threads, 1, 1))

    def make_inputs(self, shape, rng):
        n = shape["n"]
        return {"x": rng.standard_normal(n).astype(np.float32),
                "y": rng.standard_normal(n).astype(np.float32),
                "a": np.float32(rng.uniform(-2, 2)),
                "out": np.full(n, np.nan, dtype=np.float32)}

    def kernel_args(self, shape, arrays):
        return [np.uint32(shape["n"]), arrays["a"], arrays["x"], arrays["y"], arrays["out"]]

    def reference(self, shape, arrays):
        return {"out": np.float64(arrays["a"]) * arrays["x"].astype(np.float64)
                + arrays["y"].astype(np.float64)}

    def flops(self, shape):
        return 2 * shape["n"]

    def bytes_moved(self, shape):
        return 12 * shape["n"]


def _nothing():
    return contextlib.nullcontext()
