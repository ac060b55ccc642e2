"""GEMM epilogues written in Python, traced once into a small expression graph.

    def bias_gelu(acc, row, col, bias):
        return gelu_tanh(acc + bias[col])

    epi = trace_epilogue(bias_gelu, bias=Tensor("col"))

The function runs ONCE, on symbolic values: `acc` (the f32 accumulator element), `row` and `col`
(its global output coordinates, s32) and one proxy per extra tensor. Every operation records a
node; nothing is evaluated per element in Python. The graph is lowered into IR by
lower/epilogue.py (applied to the accumulator fragments before C is stored) and
evaluated in float64 by `Epilogue.evaluate` (the operators' reference, with an error bound
propagated through each operation).

Tensors (`Tensor(kind, dtype)`): kind "row" (M values, `t[row]`), "col" (N values, `t[col]`),
"elem" (M x N row-major, `t[row, col]`) or "scalar" (one f32 value, used as `t` itself); dtype
f32, bf16 or f16 (16-bit values are widened to f32 when loaded). An index may be any integer
expression of row and col; it is clamped into the tensor, so lanes of edge tiles outside C (whose
results are never stored) read in-bounds values.

Operations: + - * / (f32 division rounds to nearest), unary -, abs(), comparisons (< <= > >= ==
!=) giving predicates, & | ~ on predicates, and the functions below: where, maximum, minimum,
exp, tanh, sigmoid, erf, sqrt, cast (to "f32" from an index; to "bf16"/"f16": rounded and widened
back). Integer values support + - * and // % by positive constants (non-negative operands).
"""
import hashlib
import math
import re
import threading

import numpy as np

from ..errors import PtxgenError
from .traced import ForwardedOperators, TracedOperators

KINDS = ("row", "col", "elem", "scalar")
MATHS = ("ieee", "fast")
# .approx instructions (PTX ISA 9.0, 9.7.3): tanh.approx.f32 max relative error 2^-11 (about),
# ex2.approx.ftz.f32 2 ulp; taken with margin
TANH_APPROX_REL = 2.0 ** -10.5
EX2_APPROX_ULPS = 4
TENSOR_DTYPES = ("f32", "bf16", "f16")
U = 2.0 ** -24                    # f32 unit roundoff (round to nearest)
# absolute errors of the IR implementations (lower/epilogue.py) besides rounding:
# erf is Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, Handbook of Mathematical Functions)
ERF_ABS = 1.5e-7
BF16_HALF_ULP = 2.0 ** -8         # relative rounding error of a bf16 (8 significant bits)
F16_HALF_ULP = 2.0 ** -11

_state = threading.local()


class Tensor:
    """An extra input of an epilogue: kind ("row", "col", "elem", "scalar") and element type."""
    def __init__(self, kind, dtype="f32"):
        if kind not in KINDS:
            raise PtxgenError(f"epilogue tensor kind must be one of {', '.join(KINDS)}, got "
                              f"{kind!r}")
        if dtype not in TENSOR_DTYPES:
            raise PtxgenError(f"epilogue tensor dtype must be one of {', '.join(TENSOR_DTYPES)},"
                              f" got {dtype!r}")
        if kind == "scalar" and dtype != "f32":
            raise PtxgenError("an epilogue scalar is f32")
        self.kind, self.dtype = kind, dtype

    def shape(self, M, N):
        return {"row": (M,), "col": (N,), "elem": (M, N), "scalar": ()}[self.kind]

    def __repr__(self):
        return f"Tensor({self.kind!r}, {self.dtype!r})"

    def __eq__(self, other):
        return isinstance(other, Tensor) and (self.kind, self.dtype) == (other.kind, other.dtype)

    def __hash__(self):
        return hash((self.kind, self.dtype))


class Node:
    """One operation: op, argument node ids, result type ("f32", "s32", "pred"), attribute."""
    __slots__ = ("op", "args", "dtype", "attr", "deps")

    def __init__(self, op, args, dtype, attr, deps):
        self.op, self.args, self.dtype, self.attr, self.deps = op, args, dtype, attr, deps

    def key(self):
        return (self.op, self.args, self.dtype, self.attr)


class Trace:
    def __init__(self, tensors):
        self.nodes, self.index, self.tensors = [], {}, tensors

    def add(self, op, args, dtype, attr=None):
        deps = frozenset().union(*(self.nodes[a].deps for a in args)) if args else frozenset()
        if op in ("acc", "row", "col"):
            deps = frozenset((op,))
        node = Node(op, tuple(args), dtype, attr, deps)
        k = node.key()
        if k not in self.index:                 # identical operations share one node
            self.index[k] = len(self.nodes)
            self.nodes.append(node)
        return Sym(self, self.index[k])


class tracing:
    """Context: operations on Syms record into `trace` (a Trace): front ends that build an
    epilogue while running a kernel function (frontends/block_tc.py)."""
    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.saved = getattr(_state, "trace", None)
        _state.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        _state.trace = self.saved


def as_value(x, like="f32"):
    """A number, Sym or front-end proxy as a Sym of the trace being recorded."""
    return _sym(x, like)


def _trace():
    t = getattr(_state, "trace", None)
    if t is None:
        raise PtxgenError("epilogue operations are only valid inside a traced epilogue "
                          "function")
    return t


class Sym(TracedOperators):
    """A symbolic value of the epilogue being traced."""
    __slots__ = ("t", "i")

    def __init__(self, t, i):
        self.t, self.i = t, i

    @property
    def dtype(self):
        return self.t.nodes[self.i].dtype

    def __bool__(self):
        raise PtxgenError("an epilogue value has no truth value while tracing: use "
                          "where(cond, a, b) instead of if / and / or")

    def _bin(self, op, other, swap=False):
        a, b = (_sym(other, self.dtype), self) if swap else (self, _sym(other, self.dtype))
        return _binary(op, a, b)

    # + - * / comparisons & | come from TracedOperators; // and % take integer constants
    def __floordiv__(self, o): return self._int_const("idiv", o)
    def __mod__(self, o): return self._int_const("irem", o)
    def __hash__(self): return hash((id(self.t), self.i))

    def __invert__(self):
        if self.dtype != "pred":
            raise PtxgenError("~ applies to predicates (comparison results) in an epilogue")
        return self.t.add("not", (self.i,), "pred")

    def __neg__(self):
        return _unary("neg", self)

    def __abs__(self):
        return _unary("abs", self)

    def _int_const(self, op, o):
        if self.dtype != "s32" or not isinstance(o, int) or o <= 0:
            raise PtxgenError(f"// and % in an epilogue take an index and a positive integer "
                              f"constant, got {o!r}")
        return self.t.add(op, (self.i, _sym(o, "s32").i), "s32")

    def to(self, dtype):
        return cast(self, dtype)

    def __getitem__(self, idx):
        """x[None, :] / x[:, None]: broadcasting, a no-op on an elementwise value."""
        if all(i is None or i == slice(None) for i in (idx if isinstance(idx, tuple) else
                                                        (idx,))):
            return self
        raise PtxgenError("an epilogue value is elementwise: only [None, :] / [:, None]")


def _sym(x, like):
    """A Python number or a Sym as a Sym (numbers take the other operand's type)."""
    if isinstance(x, Sym):
        return x
    if hasattr(x, "epilogue_value"):        # a front end's proxy (frontends/block_tc.py)
        return x.epilogue_value()
    t = _trace()
    if isinstance(x, bool):
        return t.add("const", (), "pred", bool(x))
    if isinstance(x, (int, np.integer)) and like == "s32":
        return t.add("const", (), "s32", int(x))
    if isinstance(x, (int, float, np.integer, np.floating)):
        v = float(np.float32(x))
        if math.isnan(v):
            raise PtxgenError("an epilogue constant must not be NaN")
        return t.add("const", (), "f32", v)
    if isinstance(x, _TensorProxy):
        return x.value()
    raise PtxgenError(f"an epilogue operand must be a number or an epilogue value, got "
                      f"{type(x).__name__}")


ARITH = ("add", "sub", "mul", "div", "min", "max")
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")


def _binary(op, a, b):
    t = a.t
    if a.dtype == "pred" or b.dtype == "pred":
        if op not in ("and", "or") or a.dtype != b.dtype:
            raise PtxgenError(f"epilogue: {op} of a predicate and a {b.dtype if a.dtype == 'pred' else a.dtype} "
                              f"(combine predicates with & | ~, choose values with where)")
        return t.add(op, (a.i, b.i), "pred")
    if op in ("and", "or"):
        raise PtxgenError("epilogue: & and | combine predicates (comparison results)")
    if a.dtype != b.dtype:          # an index meeting a float: the index is converted
        a, b = (cast(a, "f32") if a.dtype == "s32" else a), (cast(b, "f32") if b.dtype == "s32"
                                                             else b)
    if a.dtype == "s32" and op in ("div", "min", "max"):
        if op == "div":
            raise PtxgenError("epilogue: / divides floats; use // for indices")
    return t.add(op, (a.i, b.i), "pred" if op in COMPARE else a.dtype)


FLOAT_FUNCS = ("exp", "tanh", "sigmoid", "erf", "sqrt")


def _unary(op, x):
    x = _sym(x, "f32")
    if op in FLOAT_FUNCS and x.dtype == "s32":
        x = cast(x, "f32")
    if x.dtype == "pred":
        raise PtxgenError(f"epilogue: {op} of a predicate")
    return x.t.add(op, (x.i,), x.dtype)


# -- the functions an epilogue calls ----------------------------------------------------------
def where(cond, a, b):
    """cond ? a : b, elementwise (cond a predicate)."""
    cond = cond.epilogue_value() if hasattr(cond, "epilogue_value") else cond
    a = a.epilogue_value() if hasattr(a, "epilogue_value") else a
    if not isinstance(cond, Sym) or cond.dtype != "pred":
        raise PtxgenError("where() takes a predicate (a comparison) first")
    t = cond.t
    a, b = _sym(a, "f32" if not isinstance(b, Sym) else b.dtype), _sym(b, "f32")
    if a.dtype != b.dtype:
        a, b = (cast(a, "f32") if a.dtype == "s32" else a), (cast(b, "f32")
                                                              if b.dtype == "s32" else b)
    return t.add("where", (cond.i, a.i, b.i), a.dtype)


def maximum(a, b):
    a = a if isinstance(a, Sym) else _sym(a, getattr(b, "dtype", "f32"))
    return _binary("max", a, _sym(b, a.dtype))


def minimum(a, b):
    a = a if isinstance(a, Sym) else _sym(a, getattr(b, "dtype", "f32"))
    return _binary("min", a, _sym(b, a.dtype))


def exp(x):
    return _unary("exp", x)


def tanh(x):
    return _unary("tanh", x)


def sigmoid(x):
    return _unary("sigmoid", x)


def erf(x):
    return _unary("erf", x)


def sqrt(x):
    return _unary("sqrt", x)


def cast(x, dtype):
    """To "f32" (an index converted, a float unchanged), or rounded to "bf16" / "f16" (nearest
    even) and kept as that value in f32."""
    x = _sym(x, "f32")
    if dtype == "f32":
        return x if x.dtype == "f32" else x.t.add("itof", (x.i,), "f32")
    if dtype in ("bf16", "f16"):
        if x.dtype == "s32":
            x = x.t.add("itof", (x.i,), "f32")
        return x.t.add("round", (x.i,), "f32", dtype)
    raise PtxgenError(f"epilogue cast: dtype must be f32, bf16 or f16, got {dtype!r}")


class _TensorProxy(ForwardedOperators):
    """An extra tensor inside the traced function: t[row], t[col], t[row, col], or (scalar)
    the value itself."""
    def __init__(self, name, spec):
        self.name, self.spec = name, spec

    def value(self):
        if self.spec.kind != "scalar":
            raise PtxgenError(f"epilogue tensor {self.name} ({self.spec.kind}) must be indexed: "
                              f"{self.name}[{'row, col' if self.spec.kind == 'elem' else self.spec.kind}]")
        return _trace().add("scalar", (), "f32", self.name)

    def __getitem__(self, idx):
        kind = self.spec.kind
        idx = idx if isinstance(idx, tuple) else (idx,)
        want = 2 if kind == "elem" else 1
        if kind == "scalar" or len(idx) != want:
            raise PtxgenError(f"epilogue tensor {self.name} ({kind}) takes "
                              f"{'no index' if kind == 'scalar' else f'{want} index(es)'}, "
                              f"got {len(idx)}")
        t = _trace()
        syms = [_sym(i, "s32") for i in idx]
        if any(s.dtype != "s32" for s in syms):
            raise PtxgenError(f"epilogue tensor {self.name}: an index must be an integer "
                              f"expression of row and col")
        return t.add("load", tuple(s.i for s in syms), "f32", self.name)

    def _v(self):
        return self.value()


# -- the traced epilogue ----------------------------------------------------------------------
class Epilogue:
    """A traced epilogue: nodes (topological), the output node, tensors {name: Tensor} in
    parameter order, a name and a stable key (name + hash of the graph)."""
    def __init__(self, name, nodes, out, tensors, math="ieee"):
        if math not in MATHS:
            raise PtxgenError(f"epilogue math must be one of {', '.join(MATHS)}, got {math!r}")
        self.name, self.nodes, self.out, self.tensors = name, nodes, out, dict(tensors)
        self.math = math
        text = ";".join(f"{n.op}:{n.args}:{n.dtype}:{n.attr!r}" for n in nodes) + \
            f"|{out}|" + ",".join(f"{k}={v.kind}/{v.dtype}" for k, v in self.tensors.items()) + \
            ("" if math == "ieee" else f"|{math}")
        self.hash = hashlib.sha256(text.encode()).hexdigest()[:10]
        self.key = f"{_ident(name)}_{self.hash}"

    def with_math(self, math):
        """The same graph lowered with other math: "ieee" (IEEE-rounded operations only, the
        emulator bit-equal to the GPU) or "fast" (tanh.approx / ex2.approx: MUFU, a few
        instructions per element; within the bound, not bit-equal on the emulator)."""
        return Epilogue(self.name, self.nodes, self.out, self.tensors, math)

    def __repr__(self):
        return f"Epilogue({self.name!r}, {len(self.nodes)} nodes, tensors={self.tensors})"

    def __eq__(self, other):
        return isinstance(other, Epilogue) and other.key == self.key

    def __hash__(self):
        return hash(self.key)

    def uses(self, what):
        """Whether the output depends on "acc", "row" or "col"."""
        return what in self.nodes[self.out].deps

    # -- float64 reference with an error bound --------------------------------------------
    def evaluate(self, acc, acc_err, tensors, rows=None, cols=None):
        """(value, bound): the epilogue in float64 on acc (an R x C array: rows `rows` and
        columns `cols` of C, default all) whose elements are within acc_err of the kernel's
        accumulator; bound: how far an f32 implementation's result may be from value."""
        acc = np.asarray(acc, dtype=np.float64)
        R, C = acc.shape
        rows = np.arange(R) if rows is None else np.asarray(rows)
        cols = np.arange(C) if cols is None else np.asarray(cols)
        M = N = None
        for name, spec in self.tensors.items():
            a = np.asarray(tensors[name])
            if spec.kind == "row":
                M = a.shape[0]
            elif spec.kind == "col":
                N = a.shape[0]
            elif spec.kind == "elem":
                M, N = a.shape
        vals = []
        for n in self.nodes:
            vals.append(_eval_node(n, vals, acc, acc_err, rows[:, None], cols[None, :],
                                   tensors, self.tensors, (M, N), self.math))
        v, e = vals[self.out]
        if self.nodes[self.out].dtype != "f32":
            raise PtxgenError(f"epilogue {self.name} must return a float value")
        return np.broadcast_to(v, acc.shape).astype(np.float64), \
            np.broadcast_to(e, acc.shape).astype(np.float64)


def _ident(name):
    s = re.sub(r"\W", "_", name)
    return s if s and not s[0].isdigit() else "e_" + s


def trace_epilogue(fn, name=None, **tensors):
    """Trace fn(acc, row, col, **tensors) once; tensors: {name: Tensor}. Returns an Epilogue."""
    if isinstance(fn, Epilogue):
        return fn
    for k, v in tensors.items():
        if not isinstance(v, Tensor):
            raise PtxgenError(f"epilogue tensor {k} must be described by Tensor(kind, dtype), "
                              f"got {v!r}")
        if not k.isidentifier():
            raise PtxgenError(f"epilogue tensor name {k!r} is not an identifier")
    t = Trace(tensors)
    saved = getattr(_state, "trace", None)
    _state.trace = t
    try:
        acc = t.add("acc", (), "f32")
        row, col = t.add("row", (), "s32"), t.add("col", (), "s32")
        out = fn(acc, row, col, **{k: _TensorProxy(k, v) for k, v in tensors.items()})
        out = _sym(out, "f32")
        if out.dtype == "s32":
            out = cast(out, "f32")
        if out.dtype != "f32":
            raise PtxgenError(f"epilogue {name or fn.__name__} returns a predicate; return a "
                              f"value (where(cond, a, b))")
    except TypeError as e:
        raise PtxgenError(f"epilogue {name or getattr(fn, '__name__', fn)}: {e}") from None
    finally:
        _state.trace = saved
    return Epilogue(name or getattr(fn, "__name__", "epilogue"), t.nodes, out.i, tensors)


def _eval_node(n, vals, acc, acc_err, row, col, tensors, specs, dims, math="ieee"):
    """(value, error bound) of one node in float64 (predicates: (value, uncertain))."""
    op = n.op
    a = [vals[i] for i in n.args]
    if op == "acc":
        return acc, np.broadcast_to(np.asarray(acc_err, dtype=np.float64), acc.shape)
    if op == "row":
        return row.astype(np.int64), 0
    if op == "col":
        return col.astype(np.int64), 0
    if op == "const":
        return (np.int64(n.attr) if n.dtype == "s32" else n.attr), (False if n.dtype == "pred"
                                                                    else 0.0)
    if op == "scalar":
        return float(np.asarray(tensors[n.attr], dtype=np.float64).reshape(())), 0.0
    if op == "load":
        arr = _tensor_values(tensors[n.attr], specs[n.attr].dtype)
        idx = [np.clip(i[0], 0, d - 1) for i, d in zip(a, arr.shape)]
        return arr[tuple(idx)], 0.0
    if n.dtype == "s32":
        x = [v for v, _ in a]
        if op == "add":
            return x[0] + x[1], 0
        if op == "sub":
            return x[0] - x[1], 0
        if op == "mul":
            return x[0] * x[1], 0
        if op == "idiv":
            return np.trunc(x[0] / x[1]).astype(np.int64), 0
        if op == "irem":
            return np.fmod(x[0], x[1]), 0
        if op == "min":
            return np.minimum(x[0], x[1]), 0
        if op == "max":
            return np.maximum(x[0], x[1]), 0
        if op == "neg":
            return -x[0], 0
        if op == "abs":
            return np.abs(x[0]), 0
        if op == "where":
            (c, unc), (p, _), (q, _) = a
            return np.where(c, p, q), 0
    if op in COMPARE:
        (x, ex), (y, ey) = a
        v = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
             "eq": np.equal, "ne": np.not_equal}[op](x, y)
        room = np.asarray(ex) + ey
        return v, (np.abs(np.asarray(x, np.float64) - y) <= room) & (room > 0)
    if op in ("and", "or"):
        (x, ux), (y, uy) = a
        v = np.logical_and(x, y) if op == "and" else np.logical_or(x, y)
        return v, np.logical_or(ux, uy)
    if op == "not":
        (x, ux), = a
        return np.logical_not(x), ux
    if op == "where":
        (c, unc), (p, ep), (q, eq) = a
        v = np.where(c, p, q)
        e = np.where(c, ep, eq)
        return v, np.where(unc, np.maximum(ep, eq) + np.abs(np.asarray(p) - q), e)
    if op == "itof":
        (x, _), = a
        v = np.asarray(x, np.float64)
        return v, U * np.abs(v)
    if op == "round":
        (x, ex), = a
        half = BF16_HALF_ULP if n.attr == "bf16" else F16_HALF_ULP
        return x, ex + 2 * half * np.abs(x) + ex * 2 * half
    return _eval_float(op, a, math)


def _eval_float(op, a, math="ieee"):
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if op in ("add", "sub"):
            (x, ex), (y, ey) = a
            v = x + y if op == "add" else x - y
            return v, ex + ey + U * np.abs(v)
        if op == "mul":
            (x, ex), (y, ey) = a
            v = x * y
            return v, np.abs(x) * ey + np.abs(y) * ex + ex * ey + U * np.abs(v)
        if op == "div":
            (x, ex), (y, ey) = a
            v = x / y
            room = np.abs(y) - ey
            e = np.where(room > 0, (ex + np.abs(v) * ey) / np.where(room > 0, room, 1), np.inf)
            return v, e + U * np.abs(v)
        if op in ("min", "max"):
            (x, ex), (y, ey) = a
            return (np.minimum if op == "min" else np.maximum)(x, y), np.maximum(ex, ey)
        (x, ex), = a
        x = np.asarray(x, np.float64)
        if op == "neg":
            return -x, ex
        if op == "abs":
            return np.abs(x), ex
        if op == "exp":
            v = np.exp(x)
            # the kernel's exp: a few ulps (range reduction, degree-6 polynomial, 2^n scaling);
            # fast: ex2.approx of x*log2(e), whose rounding moves the result by |x| ulps
            own = 4 * U if math == "ieee" else (np.abs(x) + 2 * EX2_APPROX_ULPS) * U
            return v, np.exp(x + ex) - v + own * np.exp(x + ex)
        # monotone functions: the exact spread over [x - ex, x + ex], plus the kernel's own
        # error (rounding, polynomial, the erf approximation)
        if op == "sigmoid":
            f = _sigmoid
            if math == "fast":        # 0.5 + 0.5 tanh.approx(x/2)
                return f(x), _spread(f, x, ex) + 0.5 * TANH_APPROX_REL * np.abs(
                    np.tanh(x / 2)) + 4 * U
            return f(x), _spread(f, x, ex) + 8 * U * f(x) + 1e-43     # e^-x clamped at e^100
        if op == "tanh":
            own = 16 * U if math == "ieee" else TANH_APPROX_REL * np.abs(np.tanh(x)) + 2 * U
            return np.tanh(x), _spread(np.tanh, x, ex) + own
        if op == "erf":
            own = 8 * U if math == "ieee" else (x * x + 32) * U
            return _erf(x), _spread(_erf, x, ex) + ERF_ABS + own
        if op == "sqrt":
            v = np.sqrt(x)
            return v, np.sqrt(x + ex) - np.sqrt(np.maximum(x - ex, 0)) + U * v
    raise PtxgenError(f"epilogue: no float64 rule for {op!r}")


def _sigmoid(x):
    """1/(1 + e^-x) without overflow, accurate in both tails."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _spread(f, x, ex):
    """The largest change of a monotone f over [x - ex, x + ex]."""
    v = f(x)
    return np.maximum(np.abs(f(x + ex) - v), np.abs(v - f(x - ex)))


_erf = np.frompyfunc(math.erf, 1, 1)
_erf_f64 = _erf


def _erf(x):
    return np.asarray(_erf_f64(np.asarray(x, np.float64)), dtype=np.float64)


def _tensor_values(arr, dtype):
    """float64 values of an extra tensor (bf16 given as uint16 bit patterns)."""
    a = np.asarray(arr)
    if dtype == "bf16":
        return (a.astype(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)
