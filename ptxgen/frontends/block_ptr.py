"""Pointers of block kernels and the loads and stores through them.

A PtrBlock is a pointer parameter plus a block of element offsets. When the offsets are an
Affine whose per-thread V elements are contiguous and aligned, each (leading index, k) group is
one ld/st.v{V} at a register address plus an immediate offset; otherwise every element gets its
own address. Masks are predicates: a group whose mask may differ across its V lanes is accessed
as a vector when all lanes are on and element by element when only some are.
"""
from ..errors import PtxgenError
from ..ir import Addr, Instr
from ..ir import types as T
from .block_values import (Affine, Data, Pointer, Scalar, cast_operand, binary, elem, layout,
                           materialize, positions, scalar_of, tracer)


class PtrScalar(Pointer):
    """A pointer; `div`: a power of two (in elements) its address is known to be a multiple of
    (a parameter is 16-byte aligned)."""

    def __init__(self, reg, elem_type, div=None):
        self.reg, self.elem = reg, elem_type
        self.div = div if div is not None else 16 // elem_type.nbytes

    @property
    def shape(self):
        return ()

    def offset(self, o, sign=1, out=None):
        if out is not None:
            raise PtxgenError("a pointer parameter cannot be updated in place; use a pointer "
                              "block (pointer + offsets)")
        if isinstance(o, (Affine, Data)):
            offs = o if sign > 0 else binary("mul", o, -1)
            return PtrBlock(self, offs)
        s = scalar_of(o, T.s32)
        if s.dtype != T.s32:
            raise PtxgenError("pointer offsets are int32 element counts")
        b = tracer().b
        if s.is_const:
            return PtrScalar(b.add(self.reg, sign * s.v * self.elem.nbytes, type=T.u64,
                                   name="pa"), self.elem, min(self.div, s.div))
        s = s if sign > 0 else binary("mul", s, -1)
        off = b.mul(s.v, self.elem.nbytes, mode="wide", type=T.s32, name="po")
        return PtrScalar(b.add(self.reg, off, type=T.u64, name="pa"), self.elem,
                         min(self.div, s.div))

    def __add__(self, o):
        return self.offset(o)

    __radd__ = __add__

    def __sub__(self, o):
        return self.offset(o, -1)

    def load(self, mask, other):
        b = tracer().b
        if mask is None:
            return Scalar(b.ld("global", self.elem, self.reg, name="ls"), self.elem, 1)
        dst = b.mov(cast_operand(scalar_of(other, self.elem).operand, self.elem), type=self.elem,
                    name="ls")
        with b.predicated(_pred(mask)):
            b.ld("global", self.elem, self.reg, out=dst)
        return Scalar(dst, self.elem, 1)

    def store(self, value, mask):
        """Every thread holds the value; thread 0 writes it."""
        tr = tracer()
        b = tr.b
        if not isinstance(value, (Scalar, int, float)):
            raise PtxgenError("storing through a scalar pointer needs a scalar value")
        v = cast_operand(scalar_of(value, self.elem).operand, self.elem)
        p = b.setp("eq", tr.tid, 0, type=T.u32)
        if mask is not None:
            p = b.and_(p, _pred(mask), type=T.pred, name="m")
        with b.predicated(p):
            b.st("global", self.reg, v, type=self.elem)


def _pred(mask):
    if isinstance(mask, Scalar) and mask.dtype == T.pred:
        return mask.v if not mask.is_const else tracer().b.setp("ne", int(mask.v), 0,
                                                                  type=T.s32)
    raise PtxgenError("a scalar access needs a scalar mask")


class PtrBlock(Pointer):
    def __init__(self, base, offs):
        self.base, self.offs = base, offs
        self.elem = base.elem

    @property
    def shape(self):
        return self.offs.shape

    def offset(self, o, sign=1, out=None):
        if out is not None:
            return self.__iadd__(o if sign > 0 else binary("mul", o, -1))
        return PtrBlock(self.base, binary("add" if sign > 0 else "sub", self.offs, o))

    def __add__(self, o):
        return self.offset(o)

    __radd__ = __add__

    def __sub__(self, o):
        return self.offset(o, -1)

    def __iadd__(self, o):
        if isinstance(self.offs, Affine):
            self.offs += o
        else:
            self.offs = materialize(self.offs)
            self.offs += o
        return self

    def __getitem__(self, idx):
        return PtrBlock(self.base, self.offs[idx])

    def access(self, value, mask, other):
        """Store `value` (value is not None) or load (returns Data), masked."""
        tr = tracer()
        b = tr.b
        shape = self.shape
        lay = layout(shape, tr.threads)
        pos = positions(shape, lay)
        et, esz = self.elem, self.elem.nbytes
        vec = (lay.kind == "dist" and lay.V > 1 and isinstance(self.offs, Affine)
               and self.base.div >= lay.V and self.offs.vector_aligned(lay.V))
        V = lay.V if vec else 1
        preds, vdiv = None, 1
        if mask is not None:
            if isinstance(mask, Scalar):
                preds, vdiv = [_pred(mask)] * len(pos), 1 << 30
            else:
                m = materialize(mask)
                if m.dtype != T.pred:
                    raise PtxgenError("a mask must be a comparison or a combination of them")
                preds = [elem(m, p, shape, lay) for p in pos]
                vdiv = m.vdiv if m.shape[-1] != 1 else 1 << 30
        if value is None:
            regs = [b.reg(et, "ld") for _ in pos]
            if mask is not None:
                o = cast_operand(scalar_of(other, et).operand, et)
                for r in regs:
                    b.mov(o, type=et, out=r)
        else:
            vals = [cast_operand(elem(value, p, shape, lay), et) for p in pos]
        addrs = {}

        def address(i):
            """Addr of element i (the first of its vector group when vectorized)."""
            if vec:
                reg, const = self.offs.parts(pos[i], shape, lay)
            else:
                reg, const = _elem_scalar(self.offs, pos[i], shape, lay), 0
            key = reg.v if not reg.is_const else ("c", reg.v)
            if key not in addrs:
                if reg.is_const:
                    addrs[key] = (self.base.reg, reg.v * esz)
                else:
                    off = b.mul(reg.v, esz, mode="wide", type=T.s32, name="bo")
                    addrs[key] = (b.add(self.base.reg, off, type=T.u64, name="ba"), 0)
            base, c0 = addrs[key]
            return base, c0 + const * esz

        for g in range(0, len(pos), V):
            base, off = address(g)
            idx = list(range(g, g + V))
            if V == 1:
                guard = preds[g] if preds is not None else None
                self._one(b, value, base, off, guard, regs if value is None else vals, g, et)
                continue
            if preds is None or vdiv >= V:
                guard = preds[g] if preds is not None else None
                with _maybe(b, guard):
                    self._vec(b, value, base, off, idx, regs if value is None else vals, et)
                continue
            whole = preds[g]
            for i in idx[1:]:
                whole = b.and_(whole, preds[i], type=T.pred, name="all")
            with b.predicated(whole):
                self._vec(b, value, base, off, idx, regs if value is None else vals, et)
            some = b.reg(T.pred, "part")
            b.emit(Instr("not", ("pred",), (some, whole)))
            for j, i in enumerate(idx):
                q = b.and_(preds[i], some, type=T.pred, name="one")
                self._one(b, value, base, off + j * esz, q, regs if value is None else vals,
                          i, et)
        if value is None:
            return Data(shape, et, lay, regs)
        return None

    @staticmethod
    def _vec(b, value, base, off, idx, regs, et):
        if value is None:
            b.ld("global", et, Addr(base, off), vec=len(idx), out=tuple(regs[i] for i in idx))
        else:
            b.st("global", Addr(base, off), [regs[i] for i in idx], type=et)

    @staticmethod
    def _one(b, value, base, off, guard, regs, i, et):
        with _maybe(b, guard):
            if value is None:
                b.ld("global", et, Addr(base, off), out=regs[i])
            else:
                b.st("global", Addr(base, off), regs[i], type=et)


def _elem_scalar(offs, p, shape, lay):
    if isinstance(offs, Affine):
        return offs.value(p, shape, lay)
    r = elem(offs, p, shape, lay)
    return Scalar(r, T.s32, 1) if not hasattr(r, "value") else Scalar.const(r.value)


class _maybe:
    def __init__(self, b, guard):
        self.b, self.guard, self.ctx = b, guard, None

    def __enter__(self):
        if self.guard is not None:
            self.ctx = self.b.predicated(self.guard)
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.ctx is not None:
            return self.ctx.__exit__(*exc)
        return False
