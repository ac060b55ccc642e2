"""softmax: out[i, :] = exp(x[i, :] - max_i) / sum(exp(x[i, :] - max_i)), row-wise fp32.

exp(v - m) is ex2.approx(v*log2(e) - m*log2(e)): one FMA and one MUFU op per element; the
rounding of m*log2(e) is the same for the whole row, so it cancels in the division.

Three plans, picked from the row length at build time:
  warp      rows of up to `warp_cols` columns: one warp per row, the row held in registers,
            reductions with shuffles only (several rows per CTA)
  resident  one CTA per row, up to `max_chunks` float4 chunks of the row per thread held in
            registers: one read and one write of each element
  online    longer rows: one CTA per row, a first pass keeps a running (max, sum) per thread,
            rescaling the sum when the max grows; a second pass reads the row again and writes
Rows are split into an unaligned head, a 16-byte aligned body and a tail as in row_reduce.
"""
import contextlib

import numpy as np

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir import Addr, Builder, Module, Param, ptr
from ..ir import types as T
from .base import Launch, Operator
from .reduce import (FLT_MAX, LOG2E, RowSpan, block_allreduce, check_threads, fmax, fsum,
                     group_layout, warp_allreduce)

NEG_INF = float("-inf")


class Softmax(Operator):
    name = "softmax"
    shape_names = ("M", "N")
    defaults = {"M": 1024, "N": 1000}
    inputs = ("x",)
    outputs = ("out",)
    rtol = 1e-5
    atol = 1e-9           # outputs are ~1/N: an absolute floor of 1e-5 would hide real errors

    def __init__(self, threads=None, max_chunks=8, unroll=4, warp_cols=1024, warp_threads=128):
        if threads is not None:
            check_threads("softmax", threads)
        check_threads("softmax", warp_threads)
        self.threads = threads            # CTA size for CTA-per-row plans (None: from N)
        self.max_chunks = max_chunks      # float4 chunks per thread a resident row may use
        self.unroll = unroll              # float4 loads per thread per trip (online plan)
        self.warp_cols = warp_cols
        self.warp_threads = warp_threads  # CTA size of the warp plan (threads/32 rows per CTA)

    def plan(self, shape):
        """(plan, threads per row, threads per CTA, float4 chunks per thread)."""
        N = shape["N"]
        if N <= self.warp_cols:
            return "warp", 32, self.warp_threads, max(1, -(-(N // 4) // 32))
        th = self.threads
        if th is None:
            th = 128
            while th < 1024 and th * 16 < N:      # about 4 chunks per thread
                th *= 2
        chunks = max(1, -(-(N // 4) // th))
        if chunks <= self.max_chunks:
            return "resident", th, th, chunks
        return "online", th, th, self.unroll

    def build(self, shape, arch=DEFAULT_TARGET):
        plan, G, TH, K = self.plan(shape)
        m = Module(target=arch)
        k = m.add_kernel(self.kernel_name(), [
            Param("M", T.u32), Param("N", T.u32),
            Param("x", T.u64, ptr(T.f32, align=16)), Param("out", T.u64, ptr(T.f32, align=16))])
        k.directives.append(f".reqntid {TH}, 1, 1")
        b = Builder(k)
        M, N, x, out = b.param("M"), b.param("N"), b.param("x"), b.param("out")
        tid, row, gt, lane, warp = group_layout(b, TH, G)
        end = b.new_label("done")
        if G < TH:
            b.branch(end, b.setp("ge", row, M))   # whole warps leave together
        span = RowSpan(b, row, N, gt, {"x": x, "out": out})
        ctx = _Row(b, span, gt, G, TH, lane, warp)
        if plan == "online":
            self._online(ctx, K)
        else:
            self._resident(ctx, K)
        b.label(end)
        b.ret()
        return m

    # -- plans -------------------------------------------------------------------------------
    def _resident(self, r, K):
        b = r.b
        base = r.span.chunk_addr(b, "x", r.gt)
        obase = r.span.chunk_addr(b, "out", r.gt)
        live, vals = [], []
        for c in range(K):
            p = b.setp("lt", b.add(r.gt, c * r.G, name="j") if c else r.gt, r.span.nvec)
            regs = tuple(b.const(NEG_INF, T.f32, name="v") for _ in range(4))
            with b.predicated(p):
                b.ld("global", T.f32, Addr(base, 16 * r.G * c), vec=4, out=regs)
            live.append(p)
            vals.append(regs)
        e = b.const(NEG_INF, T.f32, name="e")
        with b.predicated(r.span.has_extra):
            b.ld("global", T.f32, r.span.extra["x"], out=e)
        flat = [v for regs in vals for v in regs] + [e]
        mx = r.allreduce((_tree(b, flat, b.max),), fmax(b), (NEG_INF,), "m")[0]
        nmb = b.mul(mx, -LOG2E, name="nmb")       # -max*log2(e)
        ex = [_exp2(b, v, nmb) for v in flat]     # masked-off -inf → 0
        total = r.allreduce((_tree(b, ex, b.add),), fsum(b), (0.0,), "s")[0]
        inv = b.unary("rcp", total, mods=("rn",), name="inv")
        for c, p in enumerate(live):
            res = [b.mul(v, inv, name="o") for v in ex[4 * c:4 * c + 4]]
            with b.predicated(p):
                b.st("global", Addr(obase, 16 * r.G * c), res, cache="cs")
        with b.predicated(r.span.has_extra):
            b.st("global", r.span.extra["out"], b.mul(ex[-1], inv, name="o"))

    def _online(self, r, U):
        b = r.b
        G = r.G
        mx = b.const(-FLT_MAX, T.f32, name="m")   # finite: merging two empty states stays 0
        s = b.const(0.0, T.f32, name="s")

        def absorb(values):
            top = b.max(mx, _tree(b, values, b.max), name="top")
            b.mul(s, _exp_diff(b, mx, top), out=s)
            b.add(s, _tree(b, [_exp_diff(b, v, top) for v in values], b.add), out=s)
            b.mov(top, out=mx)

        with b.for_range(r.gt, r.span.nvec, G * U, type=T.u32, name="i") as i:
            live, chunks = self._load_trip(r, i, U, "x")
            absorb([v for c in chunks for v in c])
        e = b.const(NEG_INF, T.f32, name="e")
        with b.predicated(r.span.has_extra):
            b.ld("global", T.f32, r.span.extra["x"], out=e)
        absorb([e])

        def merge(a, c):
            top = b.max(a[0], c[0], name="top")
            sa = b.mul(a[1], _exp_diff(b, a[0], top), name="sa")
            return top, b.fma(c[1], _exp_diff(b, c[0], top), sa, name="sm")

        mx_all, total = r.allreduce((mx, s), merge, (-FLT_MAX, 0.0), "o")
        inv = b.unary("rcp", total, mods=("rn",), name="inv")
        nmb = b.mul(mx_all, -LOG2E, name="nmb")
        with b.for_range(r.gt, r.span.nvec, G * U, type=T.u32, name="i") as i:
            live, chunks = self._load_trip(r, i, U, "x")
            obase = r.span.chunk_addr(b, "out", i)
            for u, (p, c) in enumerate(zip(live, chunks)):
                res = [b.mul(_exp2(b, v, nmb), inv, name="o") for v in c]
                with _guard(b, p):
                    b.st("global", Addr(obase, 16 * G * u), res, cache="cs")
        with b.predicated(r.span.has_extra):
            b.ld("global", T.f32, r.span.extra["x"], out=e)
            b.st("global", r.span.extra["out"], b.mul(_exp2(b, e, nmb), inv, name="o"))

    def _load_trip(self, r, i, U, name):
        """U float4 chunks a row-group stride apart from chunk i; chunk 0 is always in range,
        the others are predicated and read as -inf when past the row's body."""
        b = r.b
        base = r.span.chunk_addr(b, name, i)
        left = b.sub(r.span.nvec, i, name="left")
        live, chunks = [], []
        for u in range(U):
            p = b.setp("gt", left, u * r.G) if u else None
            if p is None:
                regs = b.ld("global", T.f32, base, vec=4, name="v")
            else:
                regs = tuple(b.const(NEG_INF, T.f32, name="v") for _ in range(4))
                with b.predicated(p):
                    b.ld("global", T.f32, Addr(base, 16 * r.G * u), vec=4, out=regs)
            live.append(p)
            chunks.append(regs)
        return live, chunks

    # -- operator interface --------------------------------------------------------------------
    def launch(self, shape, sm_count=None):
        _, G, TH, _ = self.plan(shape)
        rows_per_cta = TH // G
        return Launch(grid=(-(-shape["M"] // rows_per_cta), 1, 1), block=(TH, 1, 1))

    def make_inputs(self, shape, rng):
        M, N = shape["M"], shape["N"]
        # rows offset by up to ±80: exp without the max subtraction would overflow fp32
        x = rng.standard_normal((M, N)) * 3.0 + rng.uniform(-80, 80, size=(M, 1))
        return {"x": x.astype(np.float32), "out": np.full((M, N), np.nan, dtype=np.float32)}

    def kernel_args(self, shape, arrays):
        return [np.uint32(shape["M"]), np.uint32(shape["N"]), arrays["x"], arrays["out"]]

    def reference(self, shape, arrays):
        x = arrays["x"].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return {"out": e / e.sum(axis=1, keepdims=True)}

    def flops(self, shape):
        # max, subtract, exp, sum, scale: five operations per element
        return 5 * shape["M"] * shape["N"]

    def bytes_moved(self, shape):
        return 8 * shape["M"] * shape["N"]


class _Row:
    """What the plans share: the row split, the thread's place in its row group, and the
    all-reduction that fits the group (a warp or the whole CTA)."""

    def __init__(self, b, span, gt, G, TH, lane, warp):
        self.b, self.span, self.gt, self.G, self.TH = b, span, gt, G, TH
        self.lane, self.warp = lane, warp

    def allreduce(self, values, combine, identity, tag):
        if self.G == 32:
            return warp_allreduce(self.b, values, combine)
        if self.G != self.TH:
            raise PtxgenError("softmax: a row group must be one warp or the whole CTA")
        return block_allreduce(self.b, values, combine, identity, self.TH // 32, self.lane,
                               self.warp, tag)


def _exp2(b, v, neg_scaled_max):
    """exp(v - max) as ex2.approx(v*log2(e) - max*log2(e)); max is a real element here."""
    return b.unary("ex2", b.fma(v, LOG2E, neg_scaled_max, name="z"), mods=("approx", "ftz"),
                   name="ex")


def _exp_diff(b, v, top):
    """exp(v - top) as ex2.approx((v - top)*log2(e)), for the running maxima of the online
    plan: the difference is formed first, so an empty state (top = -FLT_MAX) meets -inf or
    itself without producing inf - inf."""
    d = b.mul(b.sub(v, top, name="d"), LOG2E, name="z")
    return b.unary("ex2", d, mods=("approx", "ftz"), name="ex")


def _tree(b, values, op):
    """Balanced reduction tree: short dependency chains."""
    values = list(values)
    while len(values) > 1:
        nxt = [op(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


def _guard(b, p):
    return b.predicated(p) if p is not None else contextlib.nullcontext()
