"""Block-level kernels in the style of Triton, lowered to the ptxgen IR while they are traced.

    from ptxgen.frontends import block as bk

    @bk.kernel(num_warps=4)
    def vadd(x: bk.pointer, y: bk.pointer, out: bk.pointer, n: bk.int32, BLOCK: bk.constexpr):
        offs = bk.program_id(0) * BLOCK + bk.arange(0, BLOCK)
        mask = offs < n
        bk.store(out + offs, bk.load(x + offs, mask=mask) + bk.load(y + offs, mask=mask),
                 mask=mask)

    module = vadd.build(BLOCK=1024)          # an IR Module; vadd.ptx(BLOCK=1024) gives text

The function runs once, at build time, on proxies: every block operation emits IR right away.
A block's last axis is spread over the CTA's num_warps*32 threads, each thread holding V
consecutive elements (V up to 4) K times, T*V apart; leading axes are held whole by every
thread, and so are blocks whose last axis is shorter than the CTA (results of reductions over
the last axis, `rows[:, None]` columns). Index blocks (`arange` arithmetic) stay symbolic until
used, so `ptr + offs` knows when a thread's V elements are contiguous and aligned and loads or
stores them with one ld/st.v4; aligned means the index's scalar part is a known multiple of V
(program_id*BLOCK is; a parameter is when its `hints` say so, like Triton's divisibility).
Masked vector accesses take the vector path when all V lanes are in range and per-element
predicated accesses otherwise, unless the mask is known constant over each aligned V group.

Runtime loops: `for k in bk.range(0, K, BK):` emits a loop; values carried across trips are
updated in place (`acc += ...`, `ptrs += step`, `acc.assign(...)`); no `break`. Python loops
over constants unroll. `dot` lowers a whole matmul kernel to ptxgen's SGEMM schedule (see
ptxgen/frontends/block_dot.py).
"""
import builtins
import functools
import inspect

from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError
from ..ir import Builder, Module, Param, Reg, ptr
from ..ir import types as T
from ..ops.reduce import LOG2E, block_allreduce, warp_allreduce
from ..schedule import epilogue as epimod
from . import block_tc
from .block_ptr import PtrBlock, PtrScalar
from .block_values import (Affine, Data, Scalar, Tracer, tracing_state, binary, layout, materialize,
                           positions, scalar_of, tracer, unary_op)


class _Ann:
    def __init__(self, kind, type=None):
        self.kind, self.type = kind, type

    def __repr__(self):
        return f"bk.{self.kind}" + (f"[{self.type}]" if self.type else "")


def pointer_to(elem):
    return _Ann("pointer", elem)


pointer = pointer_to(T.f32)
int_pointer = pointer_to(T.s32)
int32 = _Ann("scalar", T.s32)
float32 = _Ann("scalar", T.f32)
constexpr = _Ann("constexpr")
bf16, f16, f32 = T.bf16, T.f16, T.f32


def _tc():
    """The tensor-core dot tracer when a 16-bit `acc += bk.dot` kernel is being traced."""
    return block_tc.active()


# -- program-level values -----------------------------------------------------------------------
def program_id(axis=0):
    if _tc():
        return _tc().program_id(axis)
    return Scalar(tracer().b.special(f"ctaid.{'xyz'[axis]}"), T.s32, 1)


def num_programs(axis=0):
    return Scalar(tracer().b.special(f"nctaid.{'xyz'[axis]}"), T.s32, 1)


def arange(start, stop):
    if _tc():
        return _tc().arange(start, stop)
    if not (isinstance(start, int) and isinstance(stop, int) and stop > start):
        raise PtxgenError(f"arange needs constant bounds start < stop, got {start!r}, {stop!r}")
    return Affine.new((stop - start,), Scalar.const(start), (Scalar.const(1),))


def full(shape, value, dtype=T.f32):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    v = scalar_of(value, dtype)
    b = tracer().b
    lay = layout(shape, tracer().threads)
    return Data(shape, dtype, lay, [b.mov(v.operand, type=dtype, name="z")
                                    for _ in positions(shape, lay)])


def zeros(shape, dtype=T.f32):
    if _tc():
        return _tc().zeros()
    return full(shape, 0.0 if dtype.is_float else 0, dtype)


def multiple_of(x, k):
    """Promise that a scalar is a multiple of k (a power of two), like tl.multiple_of."""
    if not isinstance(x, Scalar):
        raise PtxgenError("multiple_of takes a scalar")
    return Scalar(x.v, x.dtype, builtins.max(x.div, k & -k))


# -- elementwise math ----------------------------------------------------------------------------
def maximum(a, c):
    if _tc():
        return epimod.maximum(epimod.as_value(a), c)
    return binary("max", a, c)


def minimum(a, c):
    if _tc():
        return epimod.minimum(epimod.as_value(a), c)
    return binary("min", a, c)


def where(cond, a, c):
    if _tc():
        return epimod.where(cond, a, c)
    return binary("where", a, c, cond=cond)


def exp(x):
    """e^x as ex2.approx(x*log2(e)), as Triton lowers tl.exp (in a tensor-core dot kernel's
    epilogue: the IEEE-only exp of lower/epilogue.py)."""
    if _tc():
        return epimod.exp(x)
    return unary_op("ex2", binary("mul", x, LOG2E))


def sigmoid(x):
    """1 / (1 + e^-x)."""
    if _tc():
        return epimod.sigmoid(x)
    return 1.0 / (1.0 + exp(-x))


def tanh(x):
    if _tc():
        return epimod.tanh(x)
    return 2.0 / (1.0 + exp(-2.0 * x)) - 1.0


def erf(x):
    """erf: in the epilogue of a tensor-core dot kernel only."""
    if _tc():
        return epimod.erf(x)
    raise PtxgenError("bk.erf is supported after the loop of a bf16/f16 `acc += bk.dot` "
                      "kernel (the tensor-core epilogue)")


def exp2(x):
    return unary_op("ex2", x)


def sqrt(x):
    if _tc():
        return epimod.sqrt(x)
    return unary_op("sqrt", x)


def abs(x):       # noqa: A001 (the block API's name)
    if _tc():
        return builtins.abs(epimod.as_value(x))
    return unary_op("abs", x)


# -- memory --------------------------------------------------------------------------------------
def load(p, mask=None, other=0.0):
    """Load a block (or one scalar) through a pointer block; masked-off elements read `other`."""
    if _tc():
        return _tc().load(p)
    if isinstance(p, PtrScalar):
        return p.load(mask, other)
    if not isinstance(p, PtrBlock):
        raise PtxgenError(f"load needs a pointer (pointer parameter + offsets), got {p!r}")
    return p.access(None, mask, other)


def store(p, value, mask=None):
    if _tc():
        return _tc().store(p, value)
    if isinstance(p, PtrScalar):
        return p.store(value, mask)
    if not isinstance(p, PtrBlock):
        raise PtxgenError(f"store needs a pointer (pointer parameter + offsets), got {p!r}")
    p.access(value, mask, None)


# -- reductions ----------------------------------------------------------------------------------
def sum(x, axis=None):     # noqa: A001
    return _reduce(x, axis, "add", 0.0)


def max(x, axis=None):     # noqa: A001
    return _reduce(x, axis, "max", float("-inf"))


def min(x, axis=None):     # noqa: A001
    return _reduce(x, axis, "min", float("inf"))


def _reduce(x, axis, op, ident):
    tr = tracer()
    b = tr.b
    if isinstance(x, Scalar):
        return x
    x = materialize(x)
    if axis is None:
        while x.shape:
            x = _reduce(x, len(x.shape) - 1, op, ident)
            if isinstance(x, Scalar):
                return x
        return x
    nd = len(x.shape)
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis < nd:
        raise PtxgenError(f"reduction axis {axis} out of range for a block of shape {x.shape}")
    ident = ident if x.dtype.is_float else {"add": 0, "max": -2 ** 31, "min": 2 ** 31 - 1}[op]

    def combine(u, v):
        return tuple(getattr(b, op)(p, q, name="red") for p, q in zip(u, v))

    pos = positions(x.shape, x.lay)
    groups = {}
    for (lead, last), r in zip(pos, x.regs):
        if axis == nd - 1:
            key = lead
        else:
            key = (lead[:axis] + lead[axis + 1:], last)
        groups.setdefault(key, []).append(r)
    keys = list(groups)
    parts = [_tree(b, groups[k], op) for k in keys]
    out_shape = x.shape[:axis] + x.shape[axis + 1:]
    if axis == nd - 1:
        if x.lay.kind == "dist":
            tr.reductions += 1
            if tr.warps == 1:
                parts = list(warp_allreduce(b, tuple(parts), combine))
            else:
                lane = b.and_(tr.tid, 31, name="lane")
                warp = b.shr(tr.tid, 5, name="warp")
                parts = list(block_allreduce(b, tuple(parts), combine, (ident,) * len(parts),
                                             tr.warps, lane, warp, f"b{tr.reductions}_"))
                if tr.loop_depth:
                    b.bar_sync(0)        # the next trip writes the same shared partials
        if not out_shape:
            return Scalar(parts[0], x.dtype, 1)
        return Data(out_shape, x.dtype, layout(out_shape, tr.threads, force_repl=True), parts)
    return Data(out_shape, x.dtype, x.lay.drop_lead(), parts)


def _tree(b, values, op):
    values = list(values)
    while len(values) > 1:
        nxt = [getattr(b, op)(values[i], values[i + 1], name="red")
               for i in builtins.range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


# -- runtime loops -------------------------------------------------------------------------------
def range(start, stop=None, step=1):     # noqa: A001
    """A loop executed at run time: the body is traced once. Carried values are updated in
    place; no `break`."""
    if stop is None:
        start, stop = 0, start
    if _tc():
        yield from _tc().range(start, stop, step)
        return
    tr = tracer()
    b = tr.b
    start, stop, step = (scalar_of(v, T.s32) for v in (start, stop, step))
    if step.v is not None and not isinstance(step.v, Reg) and step.v <= 0:
        raise PtxgenError("bk.range needs a positive step")
    i = b.mov(start.operand, type=T.s32, name="it")
    head, done = b.new_label("loop"), b.new_label("loop_end")
    b.label(head)
    b.branch(done, b.setp("ge", i, stop.operand, type=T.s32))
    tr.loop_depth += 1
    yield Scalar(i, T.s32, _min_div(start.div, step.div))
    tr.loop_depth -= 1
    b.add(i, step.operand, out=i)
    b.branch(head)
    b.label(done)


def _min_div(a, c):
    return a if a < c else c


# -- kernels -------------------------------------------------------------------------------------
class BlockKernel:
    def __init__(self, fn, num_warps=4, name=None):
        self.fn, self.num_warps, self.name = fn, num_warps, name or fn.__name__
        self._built = {}

    def build(self, arch=DEFAULT_TARGET, num_warps=None, hints=None, shape=None, **constexprs):
        """The kernel as an IR Module for these constants. `hints` maps int parameters to a
        power of two they are promised to be multiples of. A bf16/f16 `acc += bk.dot` kernel
        is the tensor-core GEMM built for `shape` ({"M", "N", "K"}), its kernel named
        tc_operator(...).kernel_name() (block_tc.py)."""
        warps = num_warps or self.num_warps
        if warps not in (1, 2, 4, 8, 16, 32):
            raise PtxgenError(f"{self.name}: num_warps must be a power of two up to 32")
        hints = dict(hints or {})
        from .block_dot import find_dot, lower_dot_kernel
        if find_dot(self.fn):
            if block_tc.is_tc_dot(self):
                return self._build_tc(arch, shape, constexprs)
            return lower_dot_kernel(self, arch, warps, hints, constexprs)
        m = Module(target=arch)
        params, values = [], {}
        sig = inspect.signature(self.fn)
        for pname, p in sig.parameters.items():
            ann = p.annotation
            if not isinstance(ann, _Ann):
                raise PtxgenError(f"{self.name}: annotate parameter {pname} (bk.pointer, "
                                  f"bk.int32, bk.float32 or bk.constexpr)")
            if ann.kind == "constexpr":
                if pname not in constexprs:
                    raise PtxgenError(f"{self.name}: constexpr {pname} needs a value")
                values[pname] = constexprs[pname]
            elif ann.kind == "pointer":
                params.append(Param(pname, T.u64, ptr(ann.type, align=16)))
            else:
                params.append(Param(pname, ann.type))
        unknown = set(constexprs) - set(values)
        if unknown:
            raise PtxgenError(f"{self.name}: no constexpr parameter {sorted(unknown)[0]}")
        k = m.add_kernel(self.name, params)
        threads = 32 * warps
        k.directives.append(f".reqntid {threads}, 1, 1")
        b = Builder(k)
        tr = Tracer(b, threads)
        for prm in params:
            ann = sig.parameters[prm.name].annotation
            reg = b.param(prm.name)
            if ann.kind == "pointer":
                values[prm.name] = PtrScalar(reg, ann.type)
            else:
                values[prm.name] = Scalar(reg, ann.type, hints.get(prm.name, 1) & -hints.get(
                    prm.name, 1) if prm.name in hints else 1)
        saved = getattr(tracing_state, "tracer", None)
        tracing_state.tracer = tr
        try:
            self.fn(**values)
        finally:
            tracing_state.tracer = saved
        b.ret()
        return m

    def tc_operator(self, math="ieee", **constexprs):
        """(TcMatmul, roles {A, B, C, M, N, K} -> parameter names) of a bf16/f16
        `acc += bk.dot` kernel: the tensor-core GEMM with what follows the loop as its
        epilogue (its extra tensors named by their pointer parameters; math "ieee" or "fast":
        schedule/epilogue.py)."""
        if not block_tc.is_tc_dot(self):
            raise PtxgenError(f"{self.name}: not a bf16/f16 `acc += bk.dot` kernel")
        return block_tc.tc_operator(self, constexprs, math)

    def tc_arrays(self, roles, args):
        """The operator's arrays ({A, B, C, extra tensors}) from the kernel's arguments."""
        names = [n for n, p in inspect.signature(self.fn).parameters.items()
                 if getattr(p.annotation, "kind", None) != "constexpr"]
        vals = dict(zip(names, args))
        arrays = {r: vals[roles[r]] for r in "ABC"}
        arrays.update({n: v for n, v in vals.items() if n not in roles.values()})
        return arrays, {d: int(vals[roles[d]]) for d in "MNK"}

    def _build_tc(self, arch, shape, constexprs):
        if shape is None:
            raise PtxgenError(f"{self.name}: a tensor-core dot kernel is built for a shape: "
                              f"build(shape=dict(M=..., N=..., K=...))")
        op, _ = self.tc_operator(**constexprs)
        self.tc_kernel_name = op.kernel_name()
        return op.build(op.shape(**shape), arch)

    def ptx(self, arch=DEFAULT_TARGET, **kw):
        from ..emit import emit_module
        from ..ir.verify import verify_module
        return emit_module(verify_module(self.build(arch, **kw)), arch)

    def threads(self, num_warps=None):
        return 32 * (num_warps or self.num_warps)

    def __getitem__(self, grid):
        """kernel[grid](*args, num_warps=…, hints=…, **constexprs) on the GPU."""
        return functools.partial(self._launch, grid if isinstance(grid, tuple) else (grid,))

    def _launch(self, grid, *args, num_warps=None, hints=None, **constexprs):
        from ..runtime import launch, load_kernel
        from ..runtime.device import device_arch
        arch = device_arch()
        if block_tc.is_tc_dot(self):
            return self._launch_tc(arch, args, constexprs)
        key = (arch, num_warps, tuple(sorted((hints or {}).items())),
               tuple(sorted(constexprs.items())))
        if key not in self._built:
            from ..emit import emit_module
            from ..ir.verify import verify_module
            m = verify_module(self.build(arch, num_warps, hints, **constexprs))
            kir = m.kernel(self.name)
            self._built[key] = load_kernel(emit_module(m, arch), kir.name, kir.params)
        args = list(args)
        if getattr(self, "dot_roles", None):
            grid, args = self.dot_launch(grid, args)
        return launch(self._built[key], grid, (self.threads(num_warps), 1, 1), args)

    def _launch_tc(self, arch, args, constexprs):
        """A tensor-core dot kernel runs the GEMM operator's steps (its own grid)."""
        from ..runtime import load_steps, run_steps
        op, roles = self.tc_operator(**constexprs)
        arrays, size = self.tc_arrays(roles, args)
        shape = op.shape(**size)
        key = ("tc", arch, tuple(sorted(size.items())), tuple(sorted(constexprs.items())))
        if key not in self._built:
            self._built[key] = load_steps(op, shape, op.build(shape, arch), arch)
        arrays.update(op.workspace_arrays(shape, arch))
        run_steps(op, shape, self._built[key], arrays, arch)

    def dot_launch(self, grid, args):
        """A dot kernel runs the schedule's kernel: (M, N, K, A, B, C) and the schedule's grid
        (as many programs as the given grid asks for)."""
        import numpy as np
        names = [n for n, p in inspect.signature(self.fn).parameters.items()
                 if getattr(p.annotation, "kind", None) != "constexpr"]
        vals = dict(zip(names, args))
        r = self.dot_roles
        size = {d: int(vals[r[d]]) for d in "MNK"}
        g = self.dot_schedule.grid(size)
        if int(np.prod(grid)) != g[0] * g[1] * g[2]:
            s = self.dot_schedule
            raise PtxgenError(f"{self.name}: the grid must have one program per {s.BM}x{s.BN} "
                              f"tile of C ({g[0] * g[1] * g[2]})")
        return g, [np.uint32(size[d]) for d in "MNK"] + [vals[r[d]] for d in "ABC"]


def kernel(fn=None, *, num_warps=4, name=None):
    """Decorator: @kernel or @kernel(num_warps=8)."""
    if fn is None:
        return lambda f: BlockKernel(f, num_warps, name)
    return BlockKernel(fn, num_warps, name)


def dot(a, c):
    """Only valid in the `acc += dot(load(A-tile), load(B-tile))` form of a matmul kernel, which
    build() hands to the SGEMM schedule before any tracing (bf16/f16 tiles: to the tensor-core
    GEMM, block_tc.py)."""
    if _tc():
        return block_tc.Dot(a, c)
    raise PtxgenError("bk.dot is only supported as `acc += bk.dot(a, b)` in a matmul kernel "
                      "of the form block_dot.py describes")


__all__ = ["kernel", "BlockKernel", "pointer", "pointer_to", "int_pointer", "int32", "float32",
           "constexpr", "program_id", "num_programs", "arange", "zeros", "full", "multiple_of",
           "load", "store", "sum", "max", "min", "maximum", "minimum", "where", "exp", "exp2",
           "sqrt", "abs", "range", "dot", "sigmoid", "tanh", "erf", "bf16", "f16", "f32",
           "Scalar", "Affine", "Data", "PtrBlock", "PtrScalar"]
