"""The values a block kernel computes with, and how each operation becomes IR.

Scalar    one value, the same in every thread (a parameter, program_id, a full reduction)
Affine    an index block base + Σ coef_axis * index_axis, kept symbolic (arange arithmetic)
Data      a block held in registers: `regs` in the order `positions(shape, layout)` gives
PtrScalar / PtrBlock   a pointer parameter, plus a scalar or block offset in elements

Layouts: "dist" spreads the last axis over the T threads, thread t holding elements
k*T*V + t*V + v (v < V, k < K) of each leading index; "repl" gives every thread every element.
Scalars keep `div`, a power of two known to divide them, which is what proves an Affine's V
elements per thread aligned for a vector access.
"""
import functools
import itertools
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import PtxgenError
from ..ir import Imm, Instr, Reg
from ..ir import types as T

BIG = 1 << 30
tracing_state = threading.local()
CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}


class Tracer:
    """What the operations of one kernel being built share."""

    def __init__(self, b, threads):
        self.b, self.threads, self.warps = b, threads, threads // 32
        self.loop_depth = 0
        self.reductions = 0
        self._tid = None

    @property
    def tid(self):
        if self._tid is None:
            self._tid = self.b.special("tid.x")
        return self._tid


def tracer():
    t = getattr(tracing_state, "tracer", None)
    if t is None:
        raise PtxgenError("block operations are only valid inside a kernel being built")
    return t


# -- layouts ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    kind: str          # "dist" or "repl"
    T: int
    V: int = 1
    K: int = 1

    def drop_lead(self):
        return self


def layout(shape, threads, force_repl=False):
    if force_repl or not shape or shape[-1] < threads:
        return Layout("repl", threads)
    C = shape[-1]
    if C % threads:
        raise PtxgenError(f"a block's last axis ({C}) must be a multiple of the CTA's "
                          f"{threads} threads, or shorter than it")
    per = C // threads
    V = 4 if per % 4 == 0 else (2 if per % 2 == 0 else 1)
    return Layout("dist", threads, V, per // V)


@functools.lru_cache(maxsize=None)
def positions(shape, lay):
    """Each thread's elements in register order: (leading index tuple, last) with last = (k, v)
    for "dist", the index itself for "repl", None for a 0-d shape."""
    if not shape:
        return (((), None),)
    leads = list(itertools.product(*[range(s) for s in shape[:-1]]))
    if lay.kind == "dist":
        return tuple((L, (k, v)) for L in leads for k in range(lay.K) for v in range(lay.V))
    return tuple((L, c) for L in leads for c in range(shape[-1]))


def broadcast(*shapes):
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        dims = {s[i - nd + len(s)] for s in shapes if i - nd + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise PtxgenError(f"shapes {' and '.join(str(s) for s in shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _pow2_div(v):
    v = int(v)
    return BIG if v == 0 else min(v & -v, BIG)


def _dtype_of_number(x):
    return T.f32 if isinstance(x, float) else (T.pred if isinstance(x, bool) else T.s32)


# -- values -------------------------------------------------------------------------------------
class _Ops:
    """Python operators of every value kind, all through binary()."""
    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __lt__(self, o): return binary("lt", self, o)
    def __le__(self, o): return binary("le", self, o)
    def __gt__(self, o): return binary("gt", self, o)
    def __ge__(self, o): return binary("ge", self, o)
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __neg__(self): return binary("sub", 0.0 if self.dtype.is_float else 0, self)
    def __invert__(self): return unary_op("not", self)

    def eq(self, o):
        return binary("eq", self, o)

    def ne(self, o):
        return binary("ne", self, o)

    def to(self, dtype):
        return unary_op("cvt", self, dtype=dtype)

    def __bool__(self):
        raise PtxgenError("a traced value has no truth value at build time (use bk.where, "
                          "masks, or bk.range)")


class Scalar(_Ops):
    def __init__(self, v, dtype, div=1):
        self.v, self.dtype, self.div = v, dtype, div

    @staticmethod
    def const(value, dtype=None):
        dtype = dtype or _dtype_of_number(value)
        if dtype.is_float:
            return Scalar(float(value), dtype, 1)
        return Scalar(int(value), dtype, _pow2_div(value))

    @property
    def is_const(self):
        return not isinstance(self.v, Reg)

    @property
    def operand(self):
        return self.v if isinstance(self.v, Reg) else Imm(self.v, self.dtype)

    @property
    def shape(self):
        return ()

    def __repr__(self):
        return f"Scalar({self.v}:{self.dtype})"


def scalar_of(x, dtype=None):
    if isinstance(x, Scalar):
        return x if dtype is None or x.dtype == dtype else _convert_scalar(x, dtype)
    if isinstance(x, (bool, int, float, np.integer, np.floating)):
        if isinstance(x, np.integer):
            x = int(x)
        elif isinstance(x, np.floating):
            x = float(x)
        return Scalar.const(x if dtype is None or dtype.is_float or not isinstance(x, float)
                            else int(x), dtype)
    raise PtxgenError(f"expected a scalar, got {x!r}")


def _convert_scalar(s, dtype):
    if s.is_const:
        return Scalar.const(s.v, dtype)
    return Scalar(tracer().b.cvt(dtype, s.v, name="cv"), dtype, 1)


class Affine(_Ops):
    dtype = T.s32

    def __init__(self, shape, base, coefs):
        self.shape, self.base, self.coefs = tuple(shape), base, tuple(coefs)
        self._tb = {}

    @staticmethod
    def new(shape, base, coefs):
        """A fresh Affine owning its base register, so in-place updates touch nothing else."""
        b = tracer().b
        own = Scalar(b.mov(base.operand, type=T.s32, name="ix"), T.s32, base.div)
        return Affine(shape, own, coefs)

    def __getitem__(self, idx):
        shape, coefs = _expand(self.shape, idx, self.coefs, Scalar.const(0))
        return Affine(shape, self.base, coefs)

    def __iadd__(self, o):
        o = scalar_of(o, T.s32) if not isinstance(o, Scalar) else o
        if not isinstance(o, Scalar) or o.dtype != T.s32:
            raise PtxgenError("an index block can only be advanced in place by an int scalar")
        if o.div < self.base.div and tracer().loop_depth:
            raise PtxgenError("advancing an index block in a loop by a step less aligned than "
                              "its start would break the vector accesses already emitted; "
                              "promise the step's alignment with bk.multiple_of")
        tracer().b.add(self.base.v, o.operand, out=self.base.v)
        self.base.div = min(self.base.div, o.div)
        self._tb.clear()
        return self

    def thread_base(self, V):
        """base + coef_last * tid * V, once per V."""
        if V not in self._tb:
            tid = Scalar(tracer().tid, T.s32, 1)
            self._tb[V] = binary("add", self.base, binary("mul", self.coefs[-1],
                                                          binary("mul", tid, V)))
        return self._tb[V]

    def parts(self, pos, rshape, lay):
        """(register part, constant part) of the element at pos of a result of rshape/lay."""
        lead, last = pos
        off = len(rshape) - len(self.shape)
        dist = lay.kind == "dist" and self.shape[-1] != 1
        reg = self.thread_base(lay.V) if dist else self.base
        const = 0
        for a in range(len(self.shape) - 1):
            idx = lead[off + a] if self.shape[a] != 1 else 0
            if idx:
                c = self.coefs[a]
                if c.is_const:
                    const += c.v * idx
                else:
                    reg = binary("add", reg, binary("mul", c, idx))
        if self.shape and self.shape[-1] != 1:
            c = self.coefs[-1]
            pos_last = last[0] * lay.T * lay.V + last[1] if dist else last
            if c.is_const:
                const += c.v * pos_last
            elif pos_last:
                reg = binary("add", reg, binary("mul", c, pos_last))
        return reg, const

    def value(self, pos, rshape, lay):
        reg, const = self.parts(pos, rshape, lay)
        return binary("add", reg, const) if const else reg

    def vector_aligned(self, V):
        """Whether each thread's V consecutive elements are contiguous and V-aligned."""
        last = self.coefs[-1]
        if not (last.is_const and last.v == 1) or self.base.div < V:
            return False
        return all((c.v % V == 0) if c.is_const else c.div >= V for c in self.coefs[:-1])


class Data(_Ops):
    def __init__(self, shape, dtype, lay, regs, vdiv=1):
        self.shape, self.dtype, self.lay, self.regs = tuple(shape), dtype, lay, list(regs)
        self.vdiv = vdiv          # masks: constant over aligned groups of this many elements
        self._index = None

    def index(self, lead, last):
        if self._index is None:
            self._index = {p: i for i, p in enumerate(positions(self.shape, self.lay))}
        return self._index[(lead, last)]

    def __getitem__(self, idx):
        shape, _ = _expand(self.shape, idx, (), None)
        if shape[-1] != self.shape[-1] or (len(shape) and shape[-1] == 1 and self.shape[-1]
                                           != 1 and self.lay.kind == "dist"):
            if self.lay.kind == "dist":
                raise PtxgenError("moving a block's distributed last axis to a leading "
                                  "position needs a layout conversion, which is not supported")
        lay = self.lay if self.lay.kind == "dist" else layout(shape, self.lay.T, True)
        return Data(shape, self.dtype, lay, self.regs, self.vdiv)

    def assign(self, value):
        b = tracer().b
        for i, p in enumerate(positions(self.shape, self.lay)):
            b.mov(cast_operand(elem(value, p, self.shape, self.lay), self.dtype), type=self.dtype,
                  out=self.regs[i])
        return self

    def __iadd__(self, o):
        return binary("add", self, o, out=self)

    def __isub__(self, o):
        return binary("sub", self, o, out=self)

    def __imul__(self, o):
        return binary("mul", self, o, out=self)


def _expand(shape, idx, coefs, zero):
    """Insert the size-1 axes of x[None, :] / x[:, None]."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(i is not None and i != slice(None) for i in idx) or \
            sum(i is not None for i in idx) != len(shape):
        raise PtxgenError("block indexing supports only ':' and None (new axes)")
    out_shape, out_coefs, src = [], [], 0
    for i in idx:
        if i is None:
            out_shape.append(1)
            out_coefs.append(zero)
        else:
            out_shape.append(shape[src])
            if coefs:
                out_coefs.append(coefs[src])
            src += 1
    return tuple(out_shape), tuple(out_coefs)


def materialize(x, shape=None, lay=None):
    """Data (or Scalar) for x; an Affine gets registers in its own layout."""
    if isinstance(x, (Data, Scalar)):
        return x
    if isinstance(x, Affine):
        shape = shape or x.shape
        lay = lay or layout(shape, tracer().threads)
        return Data(shape, T.s32, lay, [_reg(x.value(p, shape, lay), T.s32)
                                        for p in positions(shape, lay)])
    raise PtxgenError(f"cannot use {x!r} as a block value")


def _reg(s, dtype):
    if s.is_const:
        return tracer().b.mov(s.operand, type=dtype, name="c")
    return s.v


def elem(x, pos, rshape, lay):
    """x's operand for the element at pos of a result of shape rshape in layout lay."""
    if isinstance(x, Scalar):
        return x.operand
    if isinstance(x, Affine):
        return x.value(pos, rshape, lay).operand
    if isinstance(x, Data):
        lead, last = pos
        off = len(rshape) - len(x.shape)
        xl = tuple(lead[off + a] if x.shape[a] != 1 else 0 for a in range(len(x.shape) - 1))
        if x.shape[-1] == 1:
            return x.regs[x.index(xl, 0)]
        if x.lay.kind != lay.kind:
            raise PtxgenError(f"a block of shape {x.shape} held whole by every thread cannot "
                              f"combine with one spread across threads (shape {rshape})")
        return x.regs[x.index(xl, last)]
    raise PtxgenError(f"cannot use {x!r} in a block expression")


def cast_operand(o, dtype):
    if isinstance(o, Imm):
        v = o.value
        return Imm(float(v) if dtype.is_float else int(v), dtype)
    if o.type == dtype or (o.type.bits == dtype.bits and not (o.type.is_float or
                                                               dtype.is_float)):
        return o
    if dtype == T.pred or o.type == T.pred:
        raise PtxgenError("predicates (masks) do not convert to numbers; use bk.where")
    return tracer().b.cvt(dtype, o, name="cv")


# -- operations ---------------------------------------------------------------------------------
def _result_dtype(op, xs):
    types = [x.dtype for x in xs]
    if op in ("and", "or"):
        return T.pred
    return T.f32 if T.f32 in types else (T.s32 if T.s32 in types else types[0])


class Pointer:
    """Base of the pointer values (block_ptr.py: PtrScalar, PtrBlock), which `p + x` and
    `p - x` offset instead of computing (binary)."""

    def offset(self, o, sign=1, out=None):
        raise NotImplementedError


def binary(op, a, c, cond=None, out=None):
    for p, q, sign in ((a, c, 1), (c, a, 0)):
        if isinstance(p, Pointer) and op in ("add", "sub") and (sign or op == "add"):
            return p.offset(q, -1 if op == "sub" else 1, out=out)
    if isinstance(a, (bool, int, float, np.number)):
        a = scalar_of(a, T.f32 if isinstance(a, float) or getattr(c, "dtype", None) == T.f32
                      and not isinstance(a, bool) else None)
    if isinstance(c, (bool, int, float, np.number)):
        c = scalar_of(c, T.f32 if isinstance(c, float) or getattr(a, "dtype", None) == T.f32
                      and not isinstance(c, bool) else None)
    if cond is not None and isinstance(cond, (bool,)):
        cond = scalar_of(cond)
    xs = [a, c] + ([cond] if cond is not None else [])
    if out is None:
        fast = _affine_fast(op, a, c)
        if fast is not None:
            return fast
    dtype = _result_dtype(op, [a, c])
    tr = tracer()
    b = tr.b
    if all(isinstance(x, Scalar) for x in xs) and out is None:
        return _scalar_op(b, op, a, c, cond, dtype)
    rshape = broadcast(*[x.shape for x in xs])
    lay = out.lay if out is not None else layout(rshape, tr.threads)
    if out is not None and out.shape != rshape:
        raise PtxgenError(f"in-place update of a {out.shape} block with a {rshape} result")
    regs = []
    for i, p in enumerate(positions(rshape, lay)):
        ea, ec = (cast_operand(elem(x, p, rshape, lay), dtype) for x in (a, c))
        ecnd = elem(cond, p, rshape, lay) if cond is not None else None
        regs.append(_emit(b, op, ea, ec, ecnd, dtype, out.regs[i] if out is not None else None))
    if out is not None:
        return out
    rtype = T.pred if op in CMP else dtype
    return Data(rshape, rtype, lay, regs, _vdiv(op, a, c, rshape))


def _emit(b, op, x, y, cnd, dtype, out):
    if op in CMP:
        return b.setp(CMP[op], x, y, type=dtype)
    if op == "where":
        return b.selp(x, y, cnd, type=dtype, out=out, name="w")
    if op in ("and", "or"):
        return getattr(b, op + "_")(x, y, type=T.pred, out=out, name="m")
    fn = {"add": b.add, "sub": b.sub, "mul": b.mul, "div": b.div, "max": b.max, "min": b.min}[op]
    return fn(x, y, type=dtype, out=out, name=op[:2] if dtype.is_float else "i")


def _scalar_op(b, op, a, c, cond, dtype):
    if a.is_const and c.is_const and cond is None and op in ("add", "sub", "mul", "max", "min"):
        f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
             "max": lambda x, y: x if x > y else y, "min": lambda x, y: x if x < y else y}[op]
        v = f(a.v, c.v)
        return Scalar.const(float(np.float32(v)) if dtype.is_float else int(v), dtype)
    ea, ec = cast_operand(a.operand, dtype), cast_operand(c.operand, dtype)
    r = _emit(b, op, ea, ec, cond.operand if cond is not None else None, dtype, None)
    div = 1
    if dtype == T.s32:
        if op in ("add", "sub"):
            div = min(a.div, c.div)
        elif op == "mul":
            div = min(a.div * c.div, BIG)
    return Scalar(r, T.pred if op in CMP else dtype, div)


def _affine_fast(op, a, c):
    """Index arithmetic that stays symbolic: Affine ± Affine, Affine ± int, Affine × int."""
    def int_scalar(x):
        return isinstance(x, Scalar) and x.dtype == T.s32
    if op in ("add", "sub") and isinstance(a, Affine) and (isinstance(c, Affine) or
                                                          int_scalar(c)):
        sgn = 1 if op == "add" else -1
        if int_scalar(c):
            return Affine.new(a.shape, binary(op, a.base, c), a.coefs)
        shape = broadcast(a.shape, c.shape)
        ca = (Scalar.const(0),) * (len(shape) - len(a.shape)) + a.coefs
        cc = (Scalar.const(0),) * (len(shape) - len(c.shape)) + c.coefs
        coefs = tuple(binary(op, x, y) if sgn < 0 or not (y.is_const and y.v == 0) else x
                      for x, y in zip(ca, cc))
        return Affine.new(shape, binary(op, a.base, c.base), coefs)
    if op == "add" and int_scalar(a) and isinstance(c, Affine):
        return _affine_fast("add", c, a)
    if op == "sub" and int_scalar(a) and isinstance(c, Affine):
        return _affine_fast("add", _affine_fast("mul", c, Scalar.const(-1)), a)
    if op == "mul" and isinstance(a, Affine) and int_scalar(c):
        return Affine.new(a.shape, binary("mul", a.base, c),
                          tuple(binary("mul", x, c) for x in a.coefs))
    if op == "mul" and int_scalar(a) and isinstance(c, Affine):
        return _affine_fast("mul", c, a)
    return None


def _vdiv(op, a, c, rshape):
    """How many aligned consecutive elements of the last axis a mask is known constant over."""
    def flat(x):
        return isinstance(x, Scalar) or x.shape == () or x.shape[-1] == 1
    if op in ("and", "or"):
        return min(BIG if flat(x) else getattr(x, "vdiv", 1) for x in (a, c))
    if op not in CMP:
        return 1
    if flat(a) and flat(c):
        return BIG
    if isinstance(c, Affine) and isinstance(a, Scalar):
        a, c, op = c, a, SWAP[op]
    if op in ("lt", "ge") and isinstance(a, Affine) and isinstance(c, Scalar):
        last = a.coefs[-1]
        if last.is_const and last.v == 1:
            d = min(a.base.div, c.div)
            for k in a.coefs[:-1]:
                d = min(d, _pow2_div(k.v) if k.is_const else k.div)
            return d
    return 1


def unary_op(op, x, dtype=None):
    b = tracer().b
    if isinstance(x, (int, float)):
        x = scalar_of(x)
    if op == "cvt":
        if isinstance(x, Scalar):
            return scalar_of(x, dtype)
        x = materialize(x)
        return Data(x.shape, dtype, x.lay, [cast_operand(r, dtype) for r in x.regs])
    if op == "not":
        def f(r):
            d = b.reg(T.pred, "m")
            b.emit(Instr("not", ("pred",), (d, r)))
            return d
        want = T.pred
    else:
        want = T.f32 if op in ("ex2", "sqrt") else None
        mods = {"ex2": ("approx", "ftz"), "sqrt": ("rn",)}.get(op, ())

        def f(r):
            return b.unary(op, r, mods=mods, type=want or r.type, name=op[:2])
    if isinstance(x, Scalar):
        o = cast_operand(x.operand, want or x.dtype)
        return Scalar(f(o if isinstance(o, Reg) else b.mov(o, type=want or x.dtype)),
                      want or x.dtype, 1)
    x = materialize(x)
    regs = [f(cast_operand(r, want or x.dtype)) for r in x.regs]
    return Data(x.shape, want or x.dtype, x.lay, regs, x.vdiv if op == "not" else 1)
