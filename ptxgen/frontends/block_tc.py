"""`acc += bk.dot(a, b)` over bf16 / f16 tiles: a block kernel lowered to the tensor-core GEMM
(ops/tc_matmul.py: wgmma + TMA on sm_90a, mma.sync on sm_80), with everything the kernel does to
`acc` after the loop lowered as that GEMM's epilogue (schedule/epilogue.py).

    @bk.kernel(num_warps=8)
    def mm(A: bk.pointer_to(bk.bf16), B: bk.pointer_to(bk.bf16), C: bk.pointer_to(bk.bf16),
           bias: bk.pointer, M: bk.int32, N: bk.int32, K: bk.int32,
           BM: bk.constexpr, BN: bk.constexpr, BK: bk.constexpr):
        rm = bk.program_id(0) * BM + bk.arange(0, BM)
        rn = bk.program_id(1) * BN + bk.arange(0, BN)
        rk = bk.arange(0, BK)
        acc = bk.zeros([BM, BN])
        for k in bk.range(0, K, BK):
            a = bk.load(A + rm[:, None] * K + (k + rk)[None, :])
            b = bk.load(B + (k + rk)[:, None] * N + rn[None, :])
            acc += bk.dot(a, b)
        acc = acc + bk.load(bias + rn)[None, :]
        acc = acc * bk.sigmoid(acc)
        bk.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

The function runs once on proxies. Index blocks are polynomials over program ids, aranges, the
int parameters and the loop variable; from the A and B loads in the loop the tracer learns
which expression is the tile's rows (the one A's offset multiplies by K) and which its columns
(B's offset without N). After the loop, `acc` is the epilogue's accumulator, those expressions
are its row and col, a load through another pointer at rows (`t + rm`), columns (`t + rn`) or
`rm * N + rn` is a per-row / per-column / per-element epilogue tensor, and the store through C
at `rm * N + rn` gives the result. Masks are accepted and not needed: the GEMM masks its edges
(loads of epilogue tensors are clamped in). A, B, C are row-major (M x K, K x N, M x N; B is
read through wgmma's transpose); the int parameters are M, N, K in that order. The tile sizes
BM, BN, BK and the grid are the user's view only: the schedule comes from the tune cache (`ptxgen
tune matmul --dtype`) or the operator's default, and so does the launch.
"""
import inspect
import threading

from ..errors import PtxgenError
from ..ir import types as T
from ..schedule import epilogue as epimod
from ..schedule.traced import ForwardedOperators

_state = threading.local()
IN_TYPES = {"bf16": "bf16", "f16": "f16"}
TENSOR_TYPES = {"f32": "f32", "bf16": "bf16", "f16": "f16"}


def active():
    return getattr(_state, "tc", None)


def is_tc_dot(kernel):
    """Whether a dot kernel's pointers are 16-bit floats (the tensor-core path)."""
    return any(getattr(p.annotation, "kind", None) == "pointer" and
               getattr(p.annotation, "type", None) in (T.bf16, T.f16)
               for p in inspect.signature(kernel.fn).parameters.values())


# -- index polynomials --------------------------------------------------------------------------
def _poly(x):
    if isinstance(x, Idx):
        return dict(x.terms)
    if isinstance(x, int) and not isinstance(x, bool):
        return {(): x} if x else {}
    raise PtxgenError(f"bk.dot kernel: an index takes integers, program ids, aranges and int "
                      f"parameters, got {type(x).__name__}")


def _add(p, q, sign=1):
    out = dict(p)
    for k, v in q.items():
        out[k] = out.get(k, 0) + sign * v
        if not out[k]:
            del out[k]
    return out


def _mul(p, q):
    out = {}
    for k1, v1 in p.items():
        for k2, v2 in q.items():
            k = tuple(sorted(k1 + k2))
            out[k] = out.get(k, 0) + v1 * v2
            if not out[k]:
                del out[k]
    return out


class Idx:
    """An integer index block kept as a polynomial {monomial (sorted atoms): coefficient}."""
    def __init__(self, terms):
        self.terms = dict(terms)

    def __add__(self, o): return Idx(_add(self.terms, _poly(o)))
    def __radd__(self, o): return Idx(_add(_poly(o), self.terms))
    def __sub__(self, o): return Idx(_add(self.terms, _poly(o), -1))
    def __rsub__(self, o): return Idx(_add(_poly(o), self.terms, -1))
    def __mul__(self, o): return Idx(_mul(self.terms, _poly(o)))
    def __rmul__(self, o): return Idx(_mul(_poly(o), self.terms))
    def __lt__(self, o): return Cond("lt", self, o)
    def __le__(self, o): return Cond("le", self, o)
    def __gt__(self, o): return Cond("gt", self, o)
    def __ge__(self, o): return Cond("ge", self, o)

    def __getitem__(self, idx):       # [:, None] / [None, :]: broadcasting, a no-op here
        return self

    def epilogue_value(self):
        return active().to_sym(self.terms)


class Cond:
    """A comparison of index blocks: a load / store mask (ignored) or an epilogue predicate."""
    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b

    def __and__(self, o): return Cond("and", self, o)
    def __rand__(self, o): return Cond("and", o, self)
    def __or__(self, o): return Cond("or", self, o)
    def __ror__(self, o): return Cond("or", o, self)

    def __getitem__(self, idx):
        return self

    def epilogue_value(self):
        a, b = (x.epilogue_value() if isinstance(x, (Idx, Cond)) else x for x in (self.a, self.b))
        if self.op == "and":
            return a & b
        if self.op == "or":
            return a | b
        a = epimod.as_value(a, "s32")
        return getattr(a, f"__{self.op}__")(b)


class Ptr:
    def __init__(self, name, dtype, off=None):
        self.name, self.dtype, self.off = name, dtype, off or {}

    def __add__(self, o):
        return Ptr(self.name, self.dtype, _add(self.off, _poly(o)))

    __radd__ = __add__


class Tile:
    def __init__(self, ptr):
        self.ptr = ptr


class Dot:
    def __init__(self, a, b):
        self.a, self.b = a, b


class Acc(ForwardedOperators):
    """The accumulator: `acc += bk.dot(a, b)` in the loop; after it, the epilogue's acc."""
    def __init__(self, tc):
        self.tc = tc

    def __iadd__(self, o):
        if not isinstance(o, Dot):
            raise PtxgenError("bk.dot kernel: inside the loop the accumulator only takes "
                              "`acc += bk.dot(a, b)`")
        self.tc.record_dot(o)
        return self

    def epilogue_value(self):
        return self.tc.acc_sym()

    def _v(self):
        return self.epilogue_value()

    def to(self, dtype):
        return self._v().to(dtype)

    def __getitem__(self, idx):
        return self._v()


# -- the tracer ---------------------------------------------------------------------------------
class TcTrace:
    def __init__(self, kernel, params):
        self.kernel, self.params = kernel, params
        self.dot = None
        self.acc = None
        self.out = None
        self.epi = epimod.Trace({})
        self.rm = self.rn = None
        self.aranges = 0
        self.pointer_types = {n: t for n, t in params["pointers"].items()}

    # operations -----------------------------------------------------------------------------
    def program_id(self, axis):
        return Idx({(f"pid{axis}",): 1})

    def arange(self, start, stop):
        self.aranges += 1
        return Idx({(f"ar{self.aranges}",): 1, (): start} if start else
                   {(f"ar{self.aranges}",): 1})

    def zeros(self):
        if self.acc is not None:
            raise PtxgenError(f"{self.kernel.name}: a tensor-core dot kernel has one "
                              f"accumulator (one bk.zeros)")
        self.acc = Acc(self)
        return self.acc

    def range(self, start, stop, step):
        if self.dot is not None:
            raise PtxgenError(f"{self.kernel.name}: one bk.range loop around the dot")
        yield Idx({("k",): 1})

    def load(self, p):
        if not isinstance(p, Ptr):
            raise PtxgenError(f"{self.kernel.name}: bk.load needs a pointer parameter plus an "
                              f"index")
        if self.dot is None:
            return Tile(p)
        kind, syms = self.classify(p.off, f"load through {p.name}")
        dtype = TENSOR_TYPES.get(self.pointer_types[p.name])
        if dtype is None:
            raise PtxgenError(f"{self.kernel.name}: epilogue tensor {p.name} must point to f32, "
                              f"bf16 or f16")
        spec = epimod.Tensor(kind, dtype)
        if self.epi.tensors.setdefault(p.name, spec) != spec:
            raise PtxgenError(f"{self.kernel.name}: {p.name} is loaded both as {kind} and "
                              f"{self.epi.tensors[p.name].kind}")
        return self.epi.add("load", tuple(s.i for s in syms), "f32", p.name)

    def store(self, p, value):
        if self.dot is None or not isinstance(p, Ptr):
            raise PtxgenError(f"{self.kernel.name}: the store comes after the dot loop, "
                              f"through the C pointer")
        kind, _ = self.classify(p.off, f"store through {p.name}")
        if kind != "elem":
            raise PtxgenError(f"{self.kernel.name}: the store must write C at rm * N + rn "
                              f"(row-major C)")
        if self.out is not None:
            raise PtxgenError(f"{self.kernel.name}: one store of the result")
        self.out = (p.name, epimod.as_value(value, "f32"))

    def record_dot(self, d):
        if self.dot is not None:
            raise PtxgenError(f"{self.kernel.name}: one `acc += bk.dot(a, b)`")
        if not (isinstance(d.a, Tile) and isinstance(d.b, Tile)):
            raise PtxgenError(f"{self.kernel.name}: bk.dot's operands must be tiles loaded in "
                              f"the loop")
        M, N, K = self.params["ints"]
        a, b = d.a.ptr, d.b.ptr
        # A + rm*K + (k + rk): the rows are what multiplies K; B + (k + rk)*N + rn: the columns
        # are what is left of B's offset once the N terms are taken out
        self.rm = {tuple(x for x in m if x != f"p:{K}"): v for m, v in a.off.items()
                   if f"p:{K}" in m}
        self.rn = {m: v for m, v in b.off.items() if f"p:{N}" not in m and "k" not in m}
        if not self.rm or not self.rn:
            raise PtxgenError(f"{self.kernel.name}: the dot's tiles must be loaded as "
                              f"A + rm[:, None] * K + (k + rk)[None, :] and B + (k + rk)[:, None] "
                              f"* N + rn[None, :] (row-major A and B)")
        self.dot = (a.name, b.name)

    def acc_sym(self):
        if self.dot is None:
            raise PtxgenError(f"{self.kernel.name}: the accumulator is used before the dot loop")
        return self.epi.add("acc", (), "f32")

    # index expressions -> epilogue values -------------------------------------------------------
    def classify(self, off, what):
        """(kind, index Syms) of an offset: rows, columns or rows * N + columns."""
        N = self.params["ints"][1]
        row, col = self.epi.add("row", (), "s32"), self.epi.add("col", (), "s32")
        if off == self.rm:
            return "row", (row,)
        if off == self.rn:
            return "col", (col,)
        if off == _add(_mul(self.rm, {(f"p:{N}",): 1}), self.rn):
            return "elem", (row, col)
        raise PtxgenError(f"{self.kernel.name}: {what}: the offset must be rm, rn or "
                          f"rm * {N} + rn (rm, rn: the dot tile's rows and columns)")

    def to_sym(self, terms):
        """An index block as an epilogue value: a + b*rm + c*rn."""
        row, col = self.epi.add("row", (), "s32"), self.epi.add("col", (), "s32")
        rest, out = dict(terms), epimod.as_value(0, "s32")
        for base, sym in ((self.rm, row), (self.rn, col)):
            lead = next(iter(base))
            c = rest.get(lead, 0) // base[lead] if base[lead] else 0
            if c and all(rest.get(m, 0) == c * v for m, v in base.items()):
                rest = _add(rest, {m: c * v for m, v in base.items()}, -1)
                out = out + sym * c
        const = rest.pop((), 0)
        if rest:
            raise PtxgenError(f"{self.kernel.name}: after the loop an index must be built from "
                              f"the tile's rows and columns and constants")
        return out + const if const else out


def trace_tc_dot(kernel, constexprs):
    """Run the kernel once on proxies: (epilogue, roles {A, B, C, M, N, K}, input dtype, C's
    dtype)."""
    sig = inspect.signature(kernel.fn)
    pointers, ints, values = {}, [], {}
    for pname, p in sig.parameters.items():
        ann = p.annotation
        kind = getattr(ann, "kind", None)
        if kind == "constexpr":
            if pname not in constexprs:
                raise PtxgenError(f"{kernel.name}: constexpr {pname} needs a value")
            values[pname] = constexprs[pname]
        elif kind == "pointer":
            pointers[pname] = ann.type.name
            values[pname] = Ptr(pname, ann.type.name)
        elif kind == "scalar":
            ints.append(pname)
            values[pname] = Idx({(f"p:{pname}",): 1})
        else:
            raise PtxgenError(f"{kernel.name}: annotate parameter {pname}")
    if len(ints) != 3:
        raise PtxgenError(f"{kernel.name}: a tensor-core dot kernel takes int parameters M, N, K")
    tc = TcTrace(kernel, dict(pointers=pointers, ints=ints))
    saved = active()
    _state.tc = tc
    try:
        with epimod.tracing(tc.epi):
            kernel.fn(**values)
    finally:
        _state.tc = saved
    if tc.dot is None or tc.out is None:
        raise PtxgenError(f"{kernel.name}: a tensor-core dot kernel needs `acc += bk.dot(a, b)` "
                          f"in a bk.range loop and a store of the result through C")
    a, b = tc.dot
    c, out = tc.out
    dtype = IN_TYPES.get(pointers[a])
    if dtype is None or pointers[b] != pointers[a]:
        raise PtxgenError(f"{kernel.name}: bk.dot on the tensor cores takes two bf16 or two f16 "
                          f"tiles, got {pointers[a]} and {pointers[b]}")
    if pointers[c] not in ("f32", "bf16"):
        raise PtxgenError(f"{kernel.name}: C must point to f32 or bf16, got {pointers[c]}")
    used = {n for n in tc.epi.tensors}
    epi = epimod.Epilogue(kernel.name, tc.epi.nodes, out.i,
                          {n: s for n, s in tc.epi.tensors.items() if n in used})
    roles = dict(A=a, B=b, C=c, M=ints[0], N=ints[1], K=ints[2])
    return epi, roles, dtype, pointers[c]


def tc_operator(kernel, constexprs, math="ieee"):
    """(TcMatmul with the traced epilogue, roles): the operator a tensor-core dot kernel is
    (math: the epilogue's functions, "ieee" or "fast", schedule/epilogue.py)."""
    from ..ops.tc_matmul import TcMatmul
    epi, roles, dtype, out = trace_tc_dot(kernel, constexprs)
    epi = epi.with_math(math)
    plain = epi.nodes[epi.out].op == "acc"
    return TcMatmul(dtype, out, b_layout="row", epilogue=None if plain else epi), roles
