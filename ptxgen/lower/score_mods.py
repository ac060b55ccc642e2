"""IR of traced score and mask mods (schedule/score_mods.py) on one thread's score fragment of
the attention forward.

Lowering on the m16n8 fragment (attention_softmax.py's layout): element (row half h2, column j
= 8c + e) of a key block starting at n0 has kv_idx = n0 + 2·(lane % 4) + j. Nodes are placed by
what they read: constants and (b, h) values once per thread, q_idx values once per row, and only
kv_idx / score values per element. Integer and float values affine in kv_idx are kept as a base
per row and block plus a compile-time multiple of j (one add per element, one compare against
an immediate for a mask), a float multiply feeding an add becomes one fma, and a positive
constant factor at the root of score_mod folds into the softmax's log2 e scaling.
"""
import math

import numpy as np

from ..errors import PtxgenError
from ..ir import Addr, Imm, Instr
from ..ir import types as T
from ..schedule.score_mods import CMP, ELEM, ITYPE, LEVEL, Expr, Graph, evaluate

IR_CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
LOG2E, LN2 = 1.0 / math.log(2.0), math.log(2.0)


def _levels(graphs, leaf_level):
    """Placement levels of the graphs' nodes for leaves at leaf_level (see Graph.level)."""
    lv = {}
    for g in graphs:
        for n in g.nodes:
            if id(n) not in lv:
                lv[id(n)] = leaf_level[n.op] if n.op in leaf_level else \
                    max([lv[id(a)] for a in n.args] + [1 if n.op == "load" else 0])
    return lv


class ModLowering:
    """IR of a score graph and a mask graph on one thread's score fragment.

    b: the Builder; bh: the (batch·H + head) register; heads: H; rows: this thread's two query
    rows; kvlane: 2·(lane % 4); tensors: {id(ModTensor): pointer register}; scale: the softmax
    scale (an immediate); columns: the fragment's key columns per row, [(register index, j)]
    for each of the two rows."""

    def __init__(self, b, score, mask, bh, heads, rows, kvlane, tensors, scale, columns,
                 grad=None, transposed=False):
        self.b, self.score, self.mask, self.grad = b, score, mask, grad
        self.tensors, self.scale, self.columns, self.kvlane = tensors, scale, columns, kvlane
        # transposed (the backward's Kᵀ-major fragment): rows are keys, columns queries
        self.row_leaf, self.elem_leaf = ("kv", "q") if transposed else ("q", "kv")
        self.uses = {}
        for g in (score, mask):         # the grad's own uses change no fusion of score_mod's
            if g is not None:
                for k, v in g.uses.items():
                    self.uses[k] = self.uses.get(k, 0) + v
        graphs = [g for g in (score, mask, grad) if g is not None]
        self.level = {}
        if transposed:
            self.level = _levels(graphs, dict(LEVEL, q=ELEM, kv=2))
        else:
            for g in graphs:
                self.level.update(g.level)
        leaves = set().union(*[g.leaves for g in graphs])
        self.head = {}                  # node id -> operand (per thread)
        if "b" in leaves:
            self.head["b"] = b.div(bh, heads, type=T.s32, name="mb")
        if "h" in leaves:
            self.head["h"] = self._rem(bh, heads)
        self.rowv = [{self.row_leaf: r} for r in rows]
        for g in graphs:                # once per thread / row: before the key loop
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
        if n.op == self.row_leaf:
            return rv[n.op]
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
        values, with kv_idx's base for this thread (transposed: a query block, q_idx's)."""
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
        if op == self.elem_leaf:
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

    def score_and_grad(self, sacc):
        """apply_score, after which returns ∂score_mod/∂score of every element (registers in
        sacc's order, computed from the raw scores first; values shared with score_mod are
        computed once), or None where the derivative is the constant 1 (no grad graph)."""
        out = None
        if self.grad is not None:
            self.raw = {(h2, j): sacc[i] for h2 in (0, 1) for i, j in self.columns[h2]}
            out = [None] * len(sacc)
            for h2 in (0, 1):
                for i, j in self.columns[h2]:
                    v = self._operand(self.grad.root, h2, j)
                    out[i] = v if hasattr(v, "type") else self.b.const(float(v), T.f32)
        self.apply_score(sacc)
        return out

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


def block_list(b, block_lists, heads, tile, count_name, bh=None, partials=None):
    """(count, list address) of a CTA's key (or query) blocks in the block mask's lists
    (kernel parameters BM_counts, BM_lists; AttentionMods.block_lists = (per batch, per head,
    rows, cols)) for its tile index `tile`, the mask head from bh = batch·H + head (a
    register; by default ctaid.y). `partials`, a list, receives the partial blocks' count."""
    per_b, per_h, rows, cols = block_lists
    bh = b.special("ctaid.y") if bh is None else bh
    mh = bh if per_b and per_h else \
        b.div(bh, heads, type=T.u32, name="mb") if per_b else \
        b.sub(bh, b.mul(b.div(bh, heads, type=T.u32), heads, type=T.u32), type=T.u32,
              name="mh") if per_h else None
    mrow = tile if mh is None else b.mad(mh, rows, tile, type=T.u32, name="mrow")
    cnt = b.ld("global", T.u32, Addr(b.element_addr(b.param("BM_counts"), b.shl(mrow, 1), 4),
                                     8), vec=2, cache="nc", name="cnt")
    if partials is not None:                # the partial blocks' count, kept (full_apart)
        partials.append(cnt[0])
    return (b.add(cnt[0], cnt[1], type=T.u32, name=count_name),
            b.element_addr(b.param("BM_lists"), b.mul(mrow, cols, type=T.u32), 4,
                           name="blist"))
