"""Score and mask modifications of attention (FlexAttention's model), traced from Python once.

    score_mod(score, b, h, q_idx, kv_idx) -> a new score      (score already scaled)
    mask_mod(b, h, q_idx, kv_idx)         -> True where the key may be attended

The functions are called once with symbolic values (Expr) and the expression graph they build is
used three ways: evaluated with numpy in float64 (the reference, with a forward bound on the f32
kernel's error, and the host-side block mask), and lowered to IR on the score fragment
(ModLowering) — never interpreted per element. Operations: + - * / // % and unary -, the
comparisons (giving masks), & | ^ ~ on masks, and where / minimum / maximum / abs / exp / log /
tanh / sqrt of this module; extra tensors (per-head slopes, document ids) are read by indexing
a ModTensor with index expressions (clamped to its bounds, as the kernel does).

Kinds: "f" a float (f32 in the kernel), "i" an integer (s32), "b" a mask (a predicate).

Lowering on the m16n8 fragment (attention_softmax.py's layout): element (row half h2, column j
= 8c + e) of a key block starting at n0 has kv_idx = n0 + 2·(lane % 4) + j. Nodes are placed by
what they read: constants and (b, h) values once per thread, q_idx values once per row, and only
kv_idx / score values per element. Integer and float values affine in kv_idx are kept as a base
per row and block plus a compile-time multiple of j (one add per element, one compare against
an immediate for a mask), a float multiply feeding an add becomes one fma, and a positive
constant factor at the root of score_mod folds into the softmax's log2 e scaling.
"""
import math
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import PtxgenError
from ..ir import Imm, Instr, Param, ptr
from ..ir import types as T
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
# every SOFT_EX2_EVERY-th score element takes the softmax's exp2 on the FMA pipe instead (0:
# none): that unit issues 16 results per clock per SM against the FMA pipe's 128, and ex2 alone
# keeps it about half busy (FlashAttention-3, Shah et al. 2024, sec. 3).
SOFT_EX2_EVERY = 4
SFU_OPS = ("exp", "log", "tanh", "sqrt")
IR_CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
LOG2E, LN2 = 1.0 / math.log(2.0), math.log(2.0)


class ModLowering:
    """IR of a score graph and a mask graph on one thread's score fragment.

    b: the Builder; bh: the (batch·H + head) register; heads: H; rows: this thread's two query
    rows; kvlane: 2·(lane % 4); tensors: {id(ModTensor): pointer register}; scale: the softmax
    scale (an immediate); columns: the fragment's key columns per row, [(register index, j)]
    for each of the two rows."""

    def __init__(self, b, score, mask, bh, heads, rows, kvlane, tensors, scale, columns):
        self.b, self.score, self.mask = b, score, mask
        self.tensors, self.scale, self.columns, self.kvlane = tensors, scale, columns, kvlane
        self.uses = {}
        for g in (score, mask):
            if g is not None:
                for k, v in g.uses.items():
                    self.uses[k] = self.uses.get(k, 0) + v
        self.level = {}
        for g in (score, mask):
            if g is not None:
                self.level.update(g.level)
        leaves = set().union(*[g.leaves for g in (score, mask) if g is not None])
        self.head = {}                  # node id -> operand (per thread)
        if "b" in leaves:
            self.head["b"] = b.div(bh, heads, type=T.s32, name="mb")
        if "h" in leaves:
            self.head["h"] = self._rem(bh, heads)
        self.rowv = [{"q": r} for r in rows]
        for g in (score, mask):         # once per thread / row: before the key loop
            if g is not None:
                for n in g.nodes:
                    lv = self.level[id(n)]
                    if lv == 1:
                        self._head(n)
                    elif lv == 2:
                        for h2 in (0, 1):
                            self._row(n, h2)
        self.factor = 1.0               # a positive constant factor left to the softmax scale
        self.root = score.root if score is not None else None
        r = self.root
        if r is not None and r.op == "mul" and self.uses.get(id(r)) == 1:
            for x, y in ((r.args[0], r.args[1]), (r.args[1], r.args[0])):
                if y.op == "const" and y.value > 0 and self.level[id(x)] == ELEM:
                    self.root, self.factor = x, float(np.float32(y.value))
                    break

    # -- placement by level --------------------------------------------------------------------
    def _const(self, n):
        v = n.value
        return int(v) if n.kind == "b" else v

    def _head(self, n):
        key = id(n)
        if key in self.head:
            return self.head[key]
        if n.op in ("b", "h"):
            return self.head[n.op]
        self.head[key] = v = self._compute(n, [self._operand(a, None) for a in n.args])
        return v

    def _row(self, n, h2):
        rv = self.rowv[h2]
        if n.op == "q":
            return rv["q"]
        if id(n) not in rv:
            rv[id(n)] = self._compute(n, [self._operand(a, h2) for a in n.args])
        return rv[id(n)]

    def _operand(self, n, h2, j=None):
        lv = self.level[id(n)]
        if n.op == "const":
            return self._const(n)
        if lv == 1:
            return self._head(n)
        if lv == 2:
            return self._row(n, h2)
        return self._elem(n, h2, j)

    def _typed(self, x, kind):
        """An operand for an instruction of `kind`: a constant stays an immediate."""
        if kind == "f" and isinstance(x, int) and not isinstance(x, bool):
            return float(x)
        return x

    def _compute(self, n, a):
        """One node's IR from its operands' (registers or Python constants)."""
        b, op, t = self.b, n.op, ITYPE[n.kind]
        if op == "load":
            arr = n.value.array
            lin = None
            for i, (x, d) in enumerate(zip(a, arr.shape)):
                x = b.mov(x, type=T.s32, name="ix") if not hasattr(x, "type") else x
                x = b.min(b.max(x, 0, type=T.s32), d - 1, type=T.s32, name="ix")
                lin = x if lin is None else b.mad(lin, d, x, type=T.s32, name="ix")
            addr = b.element_addr(self.tensors[id(n.value)], b.cvt(T.u32, lin, name="iu"), 4,
                                  name="taddr")
            return b.ld("global", t, addr, cache="nc", name="tv")
        if op == "cvt_f":
            return b.cvt(T.f32, a[0], name="cf") if hasattr(a[0], "type") else float(a[0])
        if all(not hasattr(x, "type") for x in a) and op not in ("load",):
            return self._fold(n, a)
        if op in ("add", "sub", "min", "max"):
            return getattr(b, {"min": "min", "max": "max"}.get(op, op))(
                *[self._typed(x, n.kind) for x in a], type=t)
        if op == "mul":
            return b.mul(*[self._typed(x, n.kind) for x in a], type=t)
        if op == "div":
            return b.div(a[0], a[1], type=T.f32) if hasattr(a[1], "type") else \
                b.mul(a[0], float(np.float32(1.0 / a[1])), type=T.f32)
        if op in ("floordiv", "mod"):
            q = b.div(a[0], a[1], type=T.s32, name="fq")
            r = self._rem(a[0], a[1])
            # Python's floor: one less where the remainder is nonzero and of the other sign
            adj = b.and_(b.setp("ne", r, 0, type=T.s32),
                         b.setp("lt", b.xor(r, a[1], type=T.s32), 0, type=T.s32))
            if op == "floordiv":
                return b.sub(q, b.selp(1, 0, adj, type=T.s32), type=T.s32)
            return b.add(r, b.selp(a[1], 0, adj, type=T.s32), type=T.s32)
        if op == "neg":
            return b.neg(a[0], type=t)
        if op == "abs":
            return b.unary("abs", a[0], type=t)
        if op in CMP:
            kt = ITYPE[n.args[0].kind]
            x, y = a
            if not hasattr(x, "type"):
                x, y, cmp = y, x, {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}.get(op, op)
            else:
                cmp = op
            return b.setp(IR_CMP[cmp], x, self._typed(y, n.args[0].kind), type=kt)
        if op in ("and", "or", "xor"):
            x, y = a
            if not hasattr(x, "type"):
                x, y = y, x
            if not hasattr(y, "type"):       # a constant operand of a mask
                if op == "and":
                    return x if y else b.setp("ne", b.const(0, T.u32), 0, type=T.u32)
                if op == "or":
                    return b.setp("eq", b.const(0, T.u32), 0, type=T.u32) if y else x
                return self._not(x) if y else x
            return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](x, y, type=T.pred)
        if op == "not":
            return self._not(a[0])
        if op == "where":
            c, x, y = a
            if not hasattr(c, "type"):
                return x if c else y
            if n.kind == "b":
                x = x if hasattr(x, "type") else self._pred_const(x)
                y = y if hasattr(y, "type") else self._pred_const(y)
                return b.or_(b.and_(c, x, type=T.pred),
                             b.and_(self._not(c), y, type=T.pred), type=T.pred)
            return b.selp(self._typed(x, n.kind), self._typed(y, n.kind), c, type=t)
        if op == "exp":
            return b.unary("ex2", b.mul(a[0], LOG2E, type=T.f32), mods=("approx", "ftz"))
        if op == "log":
            return b.mul(b.unary("lg2", a[0], mods=("approx", "ftz")), LN2, type=T.f32)
        if op == "tanh":
            return b.unary("tanh", a[0], mods=("approx",), type=T.f32)
        if op == "sqrt":
            return b.unary("sqrt", a[0], mods=("approx", "ftz"), type=T.f32)
        raise PtxgenError(f"mod: no lowering for {op}")

    def _rem(self, x, y):
        b = self.b
        d = b.reg(T.s32, "rm")
        b.emit(Instr("rem", ("s32",), (d, b.operand(x, T.s32), b.operand(y, T.s32))))
        return d

    def _not(self, p):
        d = self.b.reg(T.pred, "np")
        self.b.emit(Instr("not", ("pred",), (d, p)))
        return d

    def _pred_const(self, v):
        return self.b.setp("eq" if v else "ne", self.b.const(0, T.u32), 0, type=T.u32)

    def _fold(self, n, a):
        """A node of constants only: its value (as the f32 / s32 kernel would compute it)."""
        env = {}
        fake = Graph.__new__(Graph)
        fake.nodes = [Expr("const", (), x.kind, v) for x, v in zip(n.args, a)] + \
            [Expr(n.op, None, n.kind, n.value)]
        fake.nodes[-1].args = tuple(fake.nodes[:-1])
        fake.root, fake.what = fake.nodes[-1], "mod"
        v, _ = evaluate(fake, env)
        v = v.item() if hasattr(v, "item") else v
        if n.kind == "f":
            return float(np.float32(v))
        return bool(v) if n.kind == "b" else int(v)

    # -- per element ---------------------------------------------------------------------------
    def begin_block(self, n0):
        """A key block starting at key n0 (a u32 register): the memo of its per-element
        values, with kv_idx's base for this thread."""
        self.blk = {"kvbase": self.b.add(n0, self.kvlane, type=T.s32, name="kvb")}
        self.elem = {}
        self.aff = {}

    def _affine(self, n, h2):
        """(kind, base register, step) with value base + step·j at column j, or None."""
        key = (id(n), h2)
        if key in self.aff:
            return self.aff[key]
        b, op, lv = self.b, n.op, self.level[id(n)]
        out = None
        if op == "kv":
            out = ("i", self.blk["kvbase"], 1)
        elif lv == ELEM and op in ("add", "sub") and n.kind in "if":
            x, y = n.args
            ax, ay = self._affine(x, h2), self._affine(y, h2)
            t = ITYPE[n.kind]
            sign = 1 if op == "add" else -1
            if ax and ay:
                out = (n.kind, getattr(b, op)(ax[1], ay[1], type=t), self._step_add(ax[2], ay[2],
                                                                                   sign))
            elif ax and self.level[id(y)] < ELEM:
                out = (n.kind, getattr(b, op)(ax[1], self._typed(self._operand(y, h2), n.kind),
                                              type=t), ax[2])
            elif ay and self.level[id(x)] < ELEM:
                out = (n.kind, getattr(b, op)(self._typed(self._operand(x, h2), n.kind), ay[1],
                                              type=t),
                       ay[2] if sign > 0 else self._step_neg(ay[2]))
        elif lv == ELEM and op == "neg" and n.kind in "if":
            ax = self._affine(n.args[0], h2)
            if ax:
                out = (n.kind, b.neg(ax[1], type=ITYPE[n.kind]), self._step_neg(ax[2]))
        elif lv == ELEM and op == "mul" and n.kind in "if":
            x, y = n.args
            if self.level[id(x)] < ELEM:
                x, y = y, x
            ax = self._affine(x, h2)
            if ax and self.level[id(y)] < ELEM:
                yv = self._typed(self._operand(y, h2), n.kind)
                if n.kind == "i" and isinstance(yv, int):
                    out = ("i", b.mul(ax[1], yv, type=T.s32), ax[2] * yv)
                elif n.kind == "f":
                    step = ax[2] * yv if not hasattr(yv, "type") and \
                        not hasattr(ax[2], "type") else \
                        (b.mul(ax[2], yv, type=T.f32) if hasattr(ax[2], "type") else
                         (yv if ax[2] == 1.0 else b.mul(yv, float(ax[2]), type=T.f32)))
                    out = ("f", b.mul(ax[1], yv, type=T.f32), step)
        elif lv == ELEM and op == "cvt_f":
            ax = self._affine(n.args[0], h2)
            if ax:
                out = ("f", b.cvt(T.f32, ax[1], name="kf"), float(ax[2]))
        self.aff[key] = out
        return out

    def _step_add(self, s1, s2, sign):
        if hasattr(s1, "type") or hasattr(s2, "type"):
            f = lambda s: s if hasattr(s, "type") else float(s)    # noqa: E731
            return (self.b.add if sign > 0 else self.b.sub)(f(s1), f(s2), type=T.f32) \
                if hasattr(s1, "type") else \
                (self.b.add(s2, float(s1), type=T.f32) if sign > 0 else
                 self.b.sub(float(s1), s2, type=T.f32))
        return s1 + sign * s2

    def _step_neg(self, s):
        return self.b.neg(s, type=T.f32) if hasattr(s, "type") else -s

    def _materialize(self, aff, j):
        kind, base, step = aff
        b = self.b
        if kind == "i":
            return base if step * j == 0 else b.add(base, step * j, type=T.s32)
        if hasattr(step, "type"):
            return base if j == 0 else b.fma(step, float(j), base, type=T.f32)
        return base if step * j == 0 else b.add(base, float(np.float32(step * j)), type=T.f32)

    def _elem(self, n, h2, j):
        key = (id(n), h2, j)
        if key in self.elem:
            return self.elem[key]
        b, op = self.b, n.op
        if op == "score":
            v = b.mul(self.raw[(h2, j)], float(np.float32(self.scale)), type=T.f32)
        elif op in CMP and n.args[0].kind == "i":
            v = self._affine_compare(n, h2, j)
        elif self._affine(n, h2) is not None:
            v = self._materialize(self._affine(n, h2), j)
        elif op == "mul" and n.kind == "f" and self._score_const(n):
            c, _ = self._score_const(n)
            v = b.mul(self.raw[(h2, j)], float(np.float32(self.scale * c)), type=T.f32)
        elif op == "div" and n.kind == "f" and n.args[0].op == "score" and \
                n.args[1].op == "const" and self.uses.get(id(n.args[0])) == 1:
            v = b.mul(self.raw[(h2, j)], float(np.float32(self.scale / n.args[1].value)),
                      type=T.f32)
        elif op in ("add", "sub") and n.kind == "f" and self._fusable(n.args[0], h2):
            x, y = n.args
            m1, m2 = self._mul_operands(x, h2, j)
            z = self._operand(y, h2, j)
            if op == "sub":
                z = -z if not hasattr(z, "type") else b.neg(z, type=T.f32)
            v = b.fma(m1, m2, self._typed(z, "f"), type=T.f32)
        elif op == "add" and n.kind == "f" and self._fusable(n.args[1], h2):
            m1, m2 = self._mul_operands(n.args[1], h2, j)
            v = b.fma(m1, m2, self._typed(self._operand(n.args[0], h2, j), "f"), type=T.f32)
        else:
            v = self._compute(n, [self._operand(a, h2, j) for a in n.args])
        self.elem[key] = v
        return v

    def _score_const(self, n):
        """For mul(score, c) with score used once: (c, True)."""
        x, y = n.args
        for s, c in ((x, y), (y, x)):
            if s.op == "score" and c.op == "const" and self.uses.get(id(s)) == 1:
                return c.value, True
        return None

    def _fusable(self, x, h2):
        """A float product (or the scaled score) used once, at element level: fused into fma."""
        return self.level[id(x)] == ELEM and self.uses.get(id(x)) == 1 and \
            (x.op == "score" or (x.op == "mul" and x.kind == "f" and
                                  self._affine(x, h2) is None and not self._score_const(x)))

    def _mul_operands(self, x, h2, j):
        if x.op == "score":
            return self.raw[(h2, j)], float(np.float32(self.scale))
        return tuple(self._typed(self._operand(a, h2, j), "f") for a in x.args)

    def _affine_compare(self, n, h2, j):
        """An integer comparison with kv_idx affine: base cmp -step·j, one setp."""
        x, y = n.args
        ax, ay = self._affine(x, h2), self._affine(y, h2)
        lx, ly = self.level[id(x)], self.level[id(y)]
        b = self.b
        if ax and (ay or ly < ELEM) or ay and lx < ELEM:
            key = (id(n), h2, "diff")
            if key not in self.aff:
                base_x = ax[1] if ax else self._operand(x, h2)
                base_y = ay[1] if ay else self._operand(y, h2)
                step = (ax[2] if ax else 0) - (ay[2] if ay else 0)
                if not hasattr(base_x, "type"):
                    base_x = b.mov(base_x, type=T.s32)
                self.aff[key] = (b.sub(base_x, base_y, type=T.s32, name="kd"), step)
            d, step = self.aff[key]
            return b.setp(IR_CMP[n.op], d, -step * j, type=T.s32)
        return self._compute(n, [self._operand(a, h2, j) for a in n.args])

    # -- what the kernel calls -----------------------------------------------------------------
    def apply_score(self, sacc):
        """sacc[i] = score_mod(raw · scale) / factor for every element (the factor is in c)."""
        self.raw = {(h2, j): sacc[i] for h2 in (0, 1) for i, j in self.columns[h2]}
        for h2 in (0, 1):
            for i, j in self.columns[h2]:
                self.b.mov(self._operand(self.root, h2, j), out=sacc[i], type=T.f32)

    def apply_mask(self, sacc):
        """sacc[i] = -inf where mask_mod is False."""
        saved = (dict(self.elem), dict(self.aff))
        for h2 in (0, 1):
            for i, j in self.columns[h2]:
                keep = self._operand(self.mask.root, h2, j)
                if not hasattr(keep, "type"):
                    if not keep:
                        self.b.mov(float("-inf"), out=sacc[i], type=T.f32)
                    continue
                self.b.selp(sacc[i], Imm(float("-inf"), T.f32), keep, type=T.f32, out=sacc[i])
        self.elem, self.aff = saved       # values made inside the mask's branch stay there


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
