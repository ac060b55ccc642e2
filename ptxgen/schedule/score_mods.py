"""Score and mask modifications of attention (FlexAttention's model), traced from Python once.

    score_mod(score, b, h, q_idx, kv_idx) -> a new score      (score already scaled)
    mask_mod(b, h, q_idx, kv_idx)         -> True where the key may be attended

The functions are called once with symbolic values (Expr) and the expression graph they build is
used three ways: evaluated with numpy in float64 (the reference, with a forward bound on the f32
kernel's error, and the host-side block mask), and lowered to IR on the score fragment
(lower/score_mods.py) — never interpreted per element. Operations: + - * / // % and unary -, the
comparisons (giving masks), & | ^ ~ on masks, and where / minimum / maximum / abs / exp / log /
tanh / sqrt of this module; extra tensors (per-head slopes, document ids) are read by indexing
a ModTensor with index expressions (clamped to its bounds, as the kernel does).

Kinds: "f" a float (f32 in the kernel), "i" an integer (s32), "b" a mask (a predicate).
"""
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import PtxgenError
from ..ir import Param, ptr
from ..ir import types as T
from .defaults import choice
from .traced import TracedOperators

_state = threading.local()
F32_ULP = 2.0 ** -23
# PTX ISA 9.0, 9.7.4 (tanh.approx.f32: maximum relative error 2^-10.987; ex2.approx.ftz.f32
# 2^-22 relative; lg2.approx.f32 2^-22 absolute; sqrt.approx.f32 2^-23 relative)
APPROX_REL = {"tanh": 2.0 ** -10.987, "exp": 2.0 ** -22, "sqrt": 2.0 ** -23}
LOG_ABS = 2.0 ** -22
LEAVES = ("score", "b", "h", "q", "kv")
LEVEL = {"const": 0, "b": 1, "h": 1, "q": 2, "kv": 3, "score": 3}
ELEM = 3


class ModTensor:
    """An extra tensor a mod reads (e.g. per-head ALiBi slopes, per-token document ids): a
    kernel parameter of f32 (float arrays) or s32 (integer and boolean arrays). Index it with
    expressions: t[h], t[q_idx], t[b, kv_idx]; indices are clamped to the tensor's bounds."""

    def __init__(self, array, name="tensor"):
        a = np.asarray(array)
        if a.ndim < 1 or a.size == 0:
            raise PtxgenError(f"{name}: an extra tensor of a mod must have at least one element "
                              f"and one dimension, got shape {a.shape}")
        if a.dtype.kind in "iub":
            if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
                raise PtxgenError(f"{name}: integer values must fit 32 bits")
            a, self.kind = a.astype(np.int32), "i"
        elif a.dtype.kind == "f":
            a, self.kind = a.astype(np.float32), "f"
        else:
            raise PtxgenError(f"{name}: an extra tensor must hold numbers, got {a.dtype}")
        self.array, self.name = np.ascontiguousarray(a), name

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.array.ndim:
            raise PtxgenError(f"{self.name}: indexed with {len(idx)} indices, it has "
                              f"{self.array.ndim} dimensions")
        args = tuple(as_expr(i) for i in idx)
        for a in args:
            if a.kind != "i":
                raise PtxgenError(f"{self.name}: an index must be an integer expression")
        return _node("load", args, self.kind, self)

    def __repr__(self):
        return f"ModTensor({self.name}, {self.array.shape}, {self.kind})"


class Expr(TracedOperators):
    """A symbolic value of a mod being traced (see the module docstring)."""
    __slots__ = ("op", "args", "kind", "value", "__weakref__")

    def __init__(self, op, args, kind, value=None):
        self.op, self.args, self.kind, self.value = op, args, kind, value

    def __repr__(self):
        return f"Expr({self.op}, {self.kind})"

    def __bool__(self):
        raise PtxgenError("a traced mod cannot branch on a value (if/and/or/not): use "
                          "where(), & | ~ instead")

    __hash__ = object.__hash__

    def _bin(self, op, other, swap=False):
        a, b = as_expr(self), as_expr(other)
        return binary(op, *((b, a) if swap else (a, b)))

    # + - * / comparisons & | come from TracedOperators
    def __floordiv__(self, o): return self._bin("floordiv", o)
    def __rfloordiv__(self, o): return self._bin("floordiv", o, True)
    def __mod__(self, o): return self._bin("mod", o)
    def __rmod__(self, o): return self._bin("mod", o, True)
    def __xor__(self, o): return self._bin("xor", o)
    def __rxor__(self, o): return self._bin("xor", o, True)

    def __neg__(self):
        if self.kind == "b":
            raise PtxgenError("use ~ to negate a mask, not -")
        return _node("neg", (self,), self.kind)

    def __invert__(self):
        if self.kind != "b":
            raise PtxgenError("~ applies to masks (comparisons) only")
        return _node("not", (self,), "b")

    def __abs__(self):
        return absolute(self)

    def exp(self): return exp(self)
    def log(self): return log(self)
    def tanh(self): return tanh(self)
    def sqrt(self): return sqrt(self)


def _node(op, args, kind, value=None):
    """A node, the same object for the same operation on the same operands (hash-consed)."""
    table = getattr(_state, "table", None)
    if table is None:
        raise PtxgenError("mod expressions exist only while a score_mod or mask_mod is traced")
    key = (op, tuple(id(a) for a in args), kind,
           id(value) if isinstance(value, ModTensor) else value)
    node = table.get(key)
    if node is None:
        node = table[key] = Expr(op, args, kind, value)
    return node


def as_expr(x):
    if isinstance(x, Expr):
        return x
    if isinstance(x, (bool, np.bool_)):
        return _node("const", (), "b", bool(x))
    if isinstance(x, (int, np.integer)):
        if not -2 ** 31 <= int(x) < 2 ** 31:
            raise PtxgenError(f"mod: the integer constant {x} does not fit 32 bits")
        return _node("const", (), "i", int(x))
    if isinstance(x, (float, np.floating)):
        return _node("const", (), "f", float(x))
    raise PtxgenError(f"mod: cannot use {type(x).__name__} {x!r} in a traced expression "
                      f"(extra tensors are read through ModTensor)")


def _to_float(a):
    if a.kind == "f":
        return a
    if a.kind == "b":
        raise PtxgenError("mod: a mask is not a number (use where(mask, x, y))")
    if a.op == "const":
        return as_expr(float(a.value))
    return _node("cvt_f", (a,), "f")


CMP = ("lt", "le", "gt", "ge", "eq", "ne")


def binary(op, a, b):
    if op in ("and", "or", "xor"):
        if a.kind != "b" or b.kind != "b":
            raise PtxgenError("mod: & | ^ combine masks (comparisons), not numbers")
        return _node(op, (a, b), "b")
    if a.kind == "b" or b.kind == "b":
        raise PtxgenError("mod: a mask is not a number (use where(mask, x, y))")
    if op in ("floordiv", "mod"):
        if a.kind != "i" or b.kind != "i":
            raise PtxgenError("mod: // and % take integers")
        return _node(op, (a, b), "i")
    if op == "div" or a.kind != b.kind:
        a, b = _to_float(a), _to_float(b)
    return _node(op, (a, b), "b" if op in CMP else a.kind)


def where(cond, x, y):
    """x where the mask cond holds, else y."""
    c, x, y = as_expr(cond), as_expr(x), as_expr(y)
    if c.kind != "b":
        raise PtxgenError("where: the condition must be a mask (a comparison)")
    if x.kind == "b" or y.kind == "b":
        if x.kind != y.kind:
            raise PtxgenError("where: both branches must be masks or both numbers")
    elif x.kind != y.kind:
        x, y = _to_float(x), _to_float(y)
    return _node("where", (c, x, y), x.kind)


def minimum(x, y):
    return binary("min", as_expr(x), as_expr(y))


def maximum(x, y):
    return binary("max", as_expr(x), as_expr(y))


def _unary_float(op, x):
    return _node(op, (_to_float(as_expr(x)),), "f")


def absolute(x):
    x = as_expr(x)
    if x.kind == "b":
        raise PtxgenError("abs: a mask is not a number")
    return _node("abs", (x,), x.kind)


def exp(x):
    return _unary_float("exp", x)


def log(x):
    return _unary_float("log", x)


def tanh(x):
    return _unary_float("tanh", x)


def sqrt(x):
    return _unary_float("sqrt", x)


# -- tracing ------------------------------------------------------------------------------------
class Graph:
    """A traced mod: its root, every node in dependency order, uses per node, the tensors read
    (in parameter order) and the leaves it depends on."""

    def __init__(self, root, what):
        self.root, self.what = root, what
        self.nodes, self.uses, seen = [], {}, set()

        def visit(n):
            if id(n) in seen:
                return
            seen.add(id(n))
            for a in n.args:
                visit(a)
                self.uses[id(a)] = self.uses.get(id(a), 0) + 1
            self.nodes.append(n)
        visit(root)
        self.uses[id(root)] = self.uses.get(id(root), 0) + 1
        self.tensors = []
        for n in self.nodes:
            if n.op == "load" and all(t is not n.value for t in self.tensors):
                self.tensors.append(n.value)
        self.leaves = {n.op for n in self.nodes if n.op in LEAVES}
        self.level = {}
        for n in self.nodes:
            if n.op in LEVEL:
                lv = LEVEL[n.op]
            else:
                lv = max([self.level[id(a)] for a in n.args] + [0])
                lv = max(lv, 1) if n.op == "load" else lv
            self.level[id(n)] = lv


def _trace(fn, args, what):
    if getattr(_state, "table", None) is not None:
        raise PtxgenError(f"{what}: tracing is not re-entrant")
    _state.table = {}
    try:
        leaves = [_node(a, (), k) for a, k in args]
        try:
            out = fn(*leaves)
        except PtxgenError as e:
            raise PtxgenError(f"{what}: {e}") from None
        except TypeError as e:
            raise PtxgenError(f"{what} could not be traced: {e}") from None
        return as_expr(out), leaves
    finally:
        _state.table = None


def trace_score_mod(fn):
    """The graph of score_mod(score, b, h, q_idx, kv_idx) (a number)."""
    if not callable(fn):
        raise PtxgenError(f"score_mod must be a function (score, b, h, q_idx, kv_idx), got {fn!r}")
    out, _ = _trace(fn, [("score", "f"), ("b", "i"), ("h", "i"), ("q", "i"), ("kv", "i")],
                    "score_mod")
    if out.kind == "b":
        raise PtxgenError("score_mod must return a score, not a mask (that is mask_mod)")
    return Graph(_with_table(lambda: _to_float(out)), "score_mod")


def trace_mask_mod(fn):
    """The graph of mask_mod(b, h, q_idx, kv_idx) (a mask: True where attention is allowed)."""
    if not callable(fn):
        raise PtxgenError(f"mask_mod must be a function (b, h, q_idx, kv_idx), got {fn!r}")
    out, _ = _trace(fn, [("b", "i"), ("h", "i"), ("q", "i"), ("kv", "i")], "mask_mod")
    if out.kind != "b":
        raise PtxgenError("mask_mod must return a mask (a comparison), not a number")
    return Graph(out, "mask_mod")


def _with_table(f):
    _state.table = {}
    try:
        return f()
    finally:
        _state.table = None


# -- float64 evaluation with a bound on the kernel's error ---------------------------------------
def evaluate(graph, env, score_err=0.0):
    """(value, bound) of graph in float64 (integers int64, masks bool) broadcast over env's
    arrays {'score', 'b', 'h', 'q', 'kv'}; bound: what the f32 kernel may differ by (score_err:
    the input score's own)."""
    val, err = {}, {}
    for n in graph.nodes:
        a = [val[id(x)] for x in n.args]
        ea = [err[id(x)] for x in n.args]
        op, e = n.op, 0.0
        if op == "const":
            v = n.value
        elif op in LEAVES:
            v = env[op]
            e = score_err if op == "score" else 0.0
        elif op == "load":
            arr = n.value.array
            idx = tuple(np.clip(np.asarray(i), 0, d - 1) for i, d in zip(a, arr.shape))
            v = arr[idx].astype(np.float64 if n.kind == "f" else np.int64)
        elif op == "cvt_f":
            v = np.asarray(a[0], dtype=np.float64)
        elif op in ("add", "sub"):
            v = a[0] + a[1] if op == "add" else a[0] - a[1]
            if n.kind == "f":
                e = ea[0] + ea[1] + 2 * F32_ULP * (np.abs(a[0]) + np.abs(a[1]))
        elif op == "mul":
            v = a[0] * a[1]
            if n.kind == "f":
                e = np.abs(a[0]) * ea[1] + np.abs(a[1]) * ea[0] + ea[0] * ea[1] + \
                    2 * F32_ULP * np.abs(v)
        elif op == "div":
            with np.errstate(divide="ignore", invalid="ignore"):
                v = a[0] / a[1]
                e = (ea[0] + np.abs(v) * ea[1]) / np.maximum(np.abs(a[1]) - ea[1], 1e-300) + \
                    3 * F32_ULP * np.abs(v)
        elif op == "floordiv":
            with np.errstate(divide="ignore"):
                v = np.floor_divide(a[0], np.where(a[1] == 0, 1, a[1]))
        elif op == "mod":
            v = np.mod(a[0], np.where(a[1] == 0, 1, a[1]))
        elif op == "neg":
            v, e = -a[0], ea[0]
        elif op == "abs":
            v, e = np.abs(a[0]), ea[0]
        elif op in ("min", "max"):
            v = np.minimum(a[0], a[1]) if op == "min" else np.maximum(a[0], a[1])
            if n.kind == "f":
                e = np.maximum(ea[0], ea[1])
        elif op in CMP:
            v = {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                 "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}[op](a[0], a[1])
        elif op in ("and", "or", "xor"):
            v = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op](*a)
        elif op == "not":
            v = np.logical_not(a[0])
        elif op == "where":
            v = np.where(a[0], a[1], a[2])
            if n.kind == "f":
                e = np.where(a[0], ea[1], ea[2])
        elif op == "exp":
            with np.errstate(over="ignore"):
                v = np.exp(a[0])
                e = v * (np.expm1(ea[0] + 2 * F32_ULP * np.abs(a[0])) + APPROX_REL["exp"])
        elif op == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.log(a[0])
                e = ea[0] / np.maximum(np.abs(a[0]) - ea[0], 1e-300) + LOG_ABS + \
                    2 * F32_ULP * np.abs(v)
        elif op == "tanh":
            v = np.tanh(a[0])
            e = (1 - v * v) * ea[0] + APPROX_REL["tanh"] * np.abs(v)
        elif op == "sqrt":
            with np.errstate(invalid="ignore", divide="ignore"):
                v = np.sqrt(a[0])
                e = ea[0] / np.maximum(2 * v, 1e-300) + APPROX_REL["sqrt"] * v
        else:
            raise PtxgenError(f"{graph.what}: no float64 rule for {op}")
        val[id(n)], err[id(n)] = v, e
    return val[id(graph.root)], err[id(graph.root)]


# -- lowering onto the score fragment ------------------------------------------------------------
ITYPE = {"f": T.f32, "i": T.s32, "b": T.pred}
# With a score_mod that itself takes the special-function unit per element (tanh, exp, ...),
# every SOFT_EX2_EVERY-th score element can take the softmax's exp2 on the FMA pipe instead
# (0: none), as FlashAttention-3 sec. 3 suggests; measured, it does not pay (defaults.json).
SOFT_EX2_EVERY = choice("attention.soft_ex2_every")
SFU_OPS = ("exp", "log", "tanh", "sqrt")
@dataclass(frozen=True, eq=False)
class AttentionMods:
    """What an attention lowering needs of the mods: the traced graphs (None: none), the
    softmax scale, H, and with block_lists = (per batch, per head, QB, KB) the K/V loop walks
    the block mask's lists: kernel parameters BM_counts (a row (Q_BLOCK, KV_BLOCK), then QB
    rows of (partial, full) per mask head, u32 pairs) and BM_lists (QB rows of KB key-block
    indices, ascending, bit 31 set on partial ones) of the mask heads (batch if per batch,
    head if per head)."""
    score: object
    mask: object
    scale: float
    heads: int
    block_lists: tuple = None
    grad: object = None           # the backward's Graph of ∂score_mod/∂score (None: 1)

    @property
    def tensors(self):
        out = []
        for g in (self.score, self.mask):
            for t in (g.tensors if g is not None else ()):
                if all(t is not x for x in out):
                    out.append(t)
        return out

    @property
    def soft_ex2_every(self):
        """k: every k-th score element's exp2 on the FMA pipe (0: all on the SFU)."""
        g = self.score
        busy = g is not None and any(n.op in SFU_OPS and g.level[id(n)] == ELEM
                                     for n in g.nodes)
        return SOFT_EX2_EVERY if busy else 0

    def params(self):
        """The kernel parameters after the unmodified kernel's."""
        ps = []
        if self.block_lists:
            ps += [Param("BM_counts", T.u64, ptr(T.u32, align=8)),
                   Param("BM_lists", T.u64, ptr(T.u32, align=4))]
        return ps + [Param(f"t{i}", T.u64, ptr(ITYPE[t.kind], align=4))
                     for i, t in enumerate(self.tensors)]


# -- the derivative with respect to the score ----------------------------------------------------
class _Deriv:
    """Nodes of a derivative graph (built outside tracing, sharing the score graph's nodes),
    with constants folded and x·1, x + 0 dropped; None stands for the constant 0."""

    def __init__(self):
        self.table = {}

    def node(self, op, args, kind="f", value=None):
        key = (op, tuple(id(a) for a in args), kind, value)
        n = self.table.get(key)
        if n is None:
            n = self.table[key] = Expr(op, args, kind, value)
        return n

    def const(self, v):
        return self.node("const", (), "f", float(v))

    def add(self, x, y, sign=1.0):
        if y is None:
            return x
        if x is None:
            return y if sign > 0 else self.neg(y)
        if x.op == "const" and y.op == "const":
            return self.const(x.value + sign * y.value)
        return self.node("add" if sign > 0 else "sub", (x, y))

    def neg(self, x):
        if x is None:
            return None
        return self.const(-x.value) if x.op == "const" else self.node("neg", (x,))

    def mul(self, x, y):
        if x is None or y is None:
            return None
        if x.op == "const":
            x, y = y, x
        if y.op == "const":
            if x.op == "const":
                return self.const(x.value * y.value)
            if x.op == "mul" and x.args[1].op == "const":
                x, y = x.args[0], self.const(x.args[1].value * y.value)
            if float(np.float32(y.value)) == 1.0:
                return x
            if y.value == 0.0:
                return None
        return self.node("mul", (x, y))

    def div(self, x, y):
        if x is None:
            return None
        if y.op == "const":
            return self.mul(x, self.const(1.0 / y.value))
        return self.node("div", (x, y))


def derivative(graph):
    """The Graph of ∂score_mod/∂score (forward mode over the nodes), or None where it is the
    constant 1 (e.g. ALiBi: nothing to compute) — 0 is a Graph of the constant. PtxgenError
    (one line) where it is not defined by the rules: a where() whose condition compares
    score-dependent values (a step in the score)."""
    d, dv, dep = {}, _Deriv(), set()
    for n in graph.nodes:
        a = [d.get(id(x)) for x in n.args]
        if n.op == "score":
            r = dv.const(1.0)
        elif not any(id(x) in dep for x in n.args):
            continue
        elif n.op in CMP:
            raise PtxgenError(f"{graph.what}: the derivative with respect to the score is not "
                              f"defined: a comparison of score-dependent values (a step; use "
                              f"minimum / maximum for a clamp)")
        elif n.kind == "b":
            r = None
        elif n.op in ("add", "sub"):
            r = dv.add(a[0], a[1], 1.0 if n.op == "add" else -1.0)
        elif n.op == "mul":
            r = dv.add(dv.mul(a[0], n.args[1]), dv.mul(n.args[0], a[1]))
        elif n.op == "div":
            r = dv.div(dv.add(a[0], dv.mul(n, a[1]), -1.0), n.args[1])
        elif n.op == "neg":
            r = dv.neg(a[0])
        elif n.op == "abs":
            neg = dv.node("lt", (n.args[0], dv.const(0.0)), "b")
            r = dv.node("where", (neg, dv.neg(a[0]), a[0]))
        elif n.op in ("min", "max"):
            pick = dv.node("le" if n.op == "min" else "ge", n.args, "b")
            x, y = (v if v is not None else dv.const(0.0) for v in a)
            r = dv.node("where", (pick, x, y))
        elif n.op == "where":
            x, y = (v if v is not None else dv.const(0.0) for v in a[1:])
            r = None if a[1] is None and a[2] is None else \
                dv.node("where", (n.args[0], x, y))
        elif n.op == "exp":
            r = dv.mul(n, a[0])
        elif n.op == "log":
            r = dv.div(a[0], n.args[0])
        elif n.op == "tanh":
            r = dv.mul(dv.add(dv.const(1.0), dv.mul(n, n), -1.0), a[0])
        elif n.op == "sqrt":
            r = dv.div(dv.mul(a[0], dv.const(0.5)), n)
        else:
            raise PtxgenError(f"{graph.what}: the derivative with respect to the score is not "
                              f"defined for {n.op}")
        dep.add(id(n))
        if r is not None:
            d[id(n)] = r
    root = d.get(id(graph.root))
    if root is not None and root.op == "const" and float(np.float32(root.value)) == 1.0:
        return None
    return Graph(root if root is not None else dv.const(0.0), f"{graph.what}'")
