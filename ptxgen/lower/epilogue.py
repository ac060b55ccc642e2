"""A traced epilogue (schedule/epilogue.py) lowered into IR on accumulator fragments.

Every function is built from IEEE operations only (add, mul, fma and div/rcp/sqrt rounded to
nearest, integer and bit operations): no .approx instruction, so the CPU emulator computes the
same bits as the GPU. exp(x): x clamped to [-150, 100], n = rint(x log2 e), r = x - n ln2 in two
fmas (ln2's high part has 15 significant bits, so n*ln2_hi is exact), e^r by a degree-6
polynomial fitted on [-ln2/2, ln2/2] (0.62 ulp, Horner in f32), times 2^(n>>1) and
2^(n - (n>>1)) built from exponent bits (each a normal float, so overflow gives inf and
underflow rounds once). sigmoid(x) = 1/(1 + e^-x) (rcp.rn); tanh(x) = 2 sigmoid(2x) - 1;
erf: Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).

With an epilogue's math "fast" the functions take the special function unit instead, as
Triton and torch.compile's kernels do: exp = ex2.approx.ftz(x log2 e), tanh = tanh.approx,
sigmoid(x) = 0.5 + 0.5 tanh.approx(x/2), rcp.approx in erf (one MUFU instruction per function
instead of ~30 FMA-pipe ones; the emulator's .approx results are correctly rounded, so not
bit-equal to the GPU's there).

Values are computed once per distinct (row, column, element) they depend on: a per-column load
is shared by every row of the fragment, a per-row one by every column; the caller orders the
elements so that the column-shared values die early (tc_matmul.py: column
pairs outer).
"""
from ..errors import ScheduleError
from ..ir import Param, ptr
from ..ir import types as T

LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125          # 0x3F317200
LN2_LO = 1.428606765330187e-06
# e^r on [-ln2/2, ln2/2], degree 6, Chebyshev-node least squares rounded to f32 (0.62 ulp)
EXP_POLY = (1.0, 1.0, 0.5, 0.16666415333747864, 0.041666217148303986, 0.008375128731131554,
            0.001394858118146658)
EXP_LO, EXP_HI = -150.0, 100.0
# Abramowitz & Stegun 7.1.26: erf(x) = 1 - (a1 t + ... + a5 t^5) e^(-x^2), t = 1/(1 + p x)
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
PARAM_PREFIX = "epi_"


def epilogue_params(epi):
    """The kernel parameters of an epilogue's tensors, in its order (appended to the GEMM's)."""
    if epi is None:
        return []
    out = []
    for name, spec in epi.tensors.items():
        if spec.kind == "scalar":
            out.append(Param(PARAM_PREFIX + name, T.f32))
        else:
            elem = T.f32 if spec.dtype == "f32" else T.b16
            out.append(Param(PARAM_PREFIX + name, T.u64, ptr(elem, align=ELEM_BYTES[spec.dtype])))
    return out


class EpilogueLowering:
    """Lower `epi` with builder b. M, N: registers of C's size (u32). row_of(key) / col_of(key)
    give the s32 register of a row / column key the caller hands in with each element."""
    def __init__(self, b, epi, M, N, row_of, col_of):
        self.b, self.epi, self.M, self.N = b, epi, M, N
        self.row_of, self.col_of = row_of, col_of
        self.memo, self.rows, self.cols, self.limits = {}, {}, {}, {}
        self.uses = [0] * len(epi.nodes)
        for n in epi.nodes:
            for a in n.args:
                self.uses[a] += 1

    def apply(self, elements):
        """elements: [(acc register, row key, column key)]; each accumulator is replaced (in
        place) by the epilogue of it."""
        epi = self.epi
        out = epi.nodes[epi.out]
        if out.op == "acc":
            return
        for i, (reg, rk, ck) in enumerate(elements):
            self._elem = (i, reg, rk, ck)
            v = self.value(epi.out)
            self.b.mov(v, type=T.f32, out=reg)
        self.memo = {k: v for k, v in self.memo.items() if k[1] is None and k[2] is None
                     and k[3] is None}       # only element-free values survive to the next call

    def value(self, idx):
        n = self.epi.nodes[idx]
        i, reg, rk, ck = self._elem
        key = (idx, rk if "row" in n.deps else None, ck if "col" in n.deps else None,
               i if "acc" in n.deps else None)
        if key not in self.memo:
            self.memo[key] = self._lower(n, reg, rk, ck)
        return self.memo[key]

    # -- one node ----------------------------------------------------------------------------
    def _lower(self, n, reg, rk, ck):
        b = self.b
        op = n.op
        if op == "acc":
            return reg
        if op == "row":
            return self.row_of(rk)
        if op == "col":
            return self.col_of(ck)
        if op == "const":
            if n.dtype == "pred":
                return b.setp("eq", b.const(0, T.u32), 0 if n.attr else 1, type=T.u32)
            return b.const(n.attr, T.f32 if n.dtype == "f32" else T.s32, name="ek")
        if op == "scalar":
            return b.param(PARAM_PREFIX + n.attr)
        if op == "add" and n.dtype == "f32":
            fused = self._fma(n)
            if fused is not None:
                return fused
        args = [self.value(a) for a in n.args]
        if op == "load":
            return self._load(n, args)
        t = {"f32": T.f32, "s32": T.s32}.get(self.epi.nodes[n.args[0]].dtype)
        if op in ("add", "sub", "mul", "min", "max"):
            return getattr(b, {"min": "min", "max": "max"}.get(op, op))(*args, type=t, name="ev")
        if op == "div":
            return b.div(args[0], args[1], type=T.f32, name="ev")
        if op == "idiv":
            return b.div(args[0], args[1], type=T.s32, name="ev")
        if op == "irem":
            q = b.div(args[0], args[1], type=T.s32)
            return b.sub(args[0], b.mul(q, args[1], type=T.s32), type=T.s32, name="ev")
        if op == "neg":
            return b.neg(args[0], type=t, name="ev")
        if op == "abs":
            return b.unary("abs", args[0], type=t, name="ev")
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            return b.setp(op, args[0], args[1], type=t)
        if op in ("and", "or"):
            return (b.and_ if op == "and" else b.or_)(args[0], args[1], type=T.pred)
        if op == "not":
            return b.unary("not", args[0], type=T.pred)
        if op == "where":
            return b.selp(args[1], args[2], args[0],
                          type=T.f32 if n.dtype == "f32" else T.s32, name="ev")
        if op == "itof":
            return b.cvt(T.f32, args[0], name="ev")
        if op == "round":
            return self._round(args[0], n.attr)
        if op == "exp":
            return self.exp(args[0])
        if op == "sigmoid":
            return self.sigmoid(args[0])
        if op == "tanh":
            if self.epi.math == "fast":
                return b.unary("tanh", args[0], mods=("approx",), type=T.f32, name="ev")
            s = self.sigmoid(b.add(args[0], args[0], type=T.f32))
            return b.fma(s, 2.0, -1.0, type=T.f32, name="ev")
        if op == "erf":
            return self.erf(args[0])
        if op == "sqrt":
            return b.unary("sqrt", args[0], mods=("rn",), type=T.f32, name="ev")
        raise ScheduleError(f"epilogue {self.epi.name}: no lowering for {op!r}")

    def _fma(self, n):
        """a*b + c as one fma when the product is used only there (one rounding instead of
        two: within the reference's bound, which counts both)."""
        nodes = self.epi.nodes
        for i in (0, 1):
            m = nodes[n.args[i]]
            if m.op == "mul" and m.dtype == "f32" and self.uses[n.args[i]] == 1:
                a, b = (self.value(x) for x in m.args)
                return self.b.fma(a, b, self.value(n.args[1 - i]), type=T.f32, name="ev")
        return None

    # -- loads -------------------------------------------------------------------------------
    def _limit(self, which):
        """M-1 or N-1 as s32 (an index's clamp)."""
        if which not in self.limits:
            self.limits[which] = self.b.sub(self.M if which == "M" else self.N, 1, type=T.s32,
                                            name="elim")
        return self.limits[which]

    def _clamp(self, idx, node_id, which):
        b = self.b
        i = b.min(idx, self._limit(which), type=T.s32, name="ei")
        if self.epi.nodes[node_id].op not in ("row", "col"):   # an expression may go below 0
            i = b.max(i, 0, type=T.s32, name="ei")
        return i

    def _load(self, node, idx):
        b = self.b
        name, ids = node.attr, node.args
        spec = self.epi.tensors[name]
        base = b.param(PARAM_PREFIX + name)
        if spec.kind == "elem":
            r = self._clamp(idx[0], ids[0], "M")
            c = self._clamp(idx[1], ids[1], "N")
            lin = b.mad(r, self.N, c, type=T.u32, name="eli")
        else:
            lin = self._clamp(idx[0], ids[0], "M" if spec.kind == "row" else "N")
        addr = b.element_addr(base, lin, ELEM_BYTES[spec.dtype], name="eaddr")
        if spec.dtype == "f32":
            return b.ld("global", T.f32, addr, name="ex")
        h = b.ld("global", T.b16, addr, name="eh")
        if spec.dtype == "f16":
            return b.cvt(T.f32, b.mov(h, type=T.f16, name="ehf"), name="ex")
        wide = b.shl(b.cvt(T.u32, b.mov(h, type=T.u16, name="ehu"), name="ew"), 16)
        return b.mov(wide, type=T.f32, name="ex")

    # -- functions ---------------------------------------------------------------------------
    def _round(self, x, dtype):
        """x rounded to bf16 / f16 (nearest even) and widened back to f32."""
        b = self.b
        if dtype == "f16":
            return b.cvt(T.f32, b.cvt(T.f16, x, name="eh"), name="ev")
        bits = b.mov(x, type=T.u32, name="eb")
        odd = b.and_(b.shr(bits, 16, type=T.u32), 1, type=T.u32)
        r = b.add(bits, b.add(odd, 0x7FFF, type=T.u32), type=T.u32)
        return b.mov(b.and_(r, 0xFFFF0000, type=T.u32), type=T.f32, name="ev")

    def exp(self, x):
        b = self.b
        if self.epi.math == "fast":
            return b.unary("ex2", b.mul(x, LOG2E, type=T.f32), mods=("approx", "ftz"),
                           type=T.f32, name="ev")
        x = b.max(b.min(x, EXP_HI, type=T.f32), EXP_LO, type=T.f32, name="xc")
        n = b.cvt(T.f32, b.mul(x, LOG2E, type=T.f32), rounding="rni", name="en")
        r = b.fma(n, -LN2_HI, x, type=T.f32, name="er")
        r = b.fma(n, -LN2_LO, r, type=T.f32, name="er")
        p = b.const(EXP_POLY[-1], T.f32, name="ep")
        for c in EXP_POLY[-2::-1]:
            p = b.fma(p, r, c, type=T.f32, name="ep")
        ni = b.cvt(T.s32, n, name="eni")
        n1 = b.shr(ni, 1, type=T.s32)
        n2 = b.sub(ni, n1, type=T.s32)
        s1 = b.mov(b.shl(b.add(n1, 127, type=T.s32), 23, type=T.s32), type=T.f32, name="es")
        s2 = b.mov(b.shl(b.add(n2, 127, type=T.s32), 23, type=T.s32), type=T.f32, name="es")
        return b.mul(b.mul(p, s1, type=T.f32), s2, type=T.f32, name="ev")

    def rcp(self, x):
        return self.b.unary("rcp", x, mods=("approx", "ftz") if self.epi.math == "fast" else
                            ("rn",), type=T.f32, name="ev")

    def sigmoid(self, x):
        b = self.b
        if self.epi.math == "fast":
            t = b.unary("tanh", b.mul(x, 0.5, type=T.f32), mods=("approx",), type=T.f32)
            return b.fma(t, 0.5, 0.5, type=T.f32, name="ev")
        e = self.exp(b.neg(x, type=T.f32))
        return self.rcp(b.add(e, 1.0, type=T.f32))

    def erf(self, x):
        b = self.b
        ax = b.unary("abs", x, type=T.f32, name="eax")
        t = self.rcp(b.fma(ax, ERF_P, 1.0, type=T.f32))
        p = b.const(ERF_A[-1], T.f32, name="ep")
        for c in ERF_A[-2::-1]:
            p = b.fma(p, t, c, type=T.f32, name="ep")
        p = b.mul(p, t, type=T.f32)
        e = self.exp(b.neg(b.mul(ax, ax, type=T.f32), type=T.f32))
        y = b.fma(b.neg(p, type=T.f32), e, 1.0, type=T.f32, name="ey")
        return b.selp(b.neg(y, type=T.f32), y, b.setp("lt", x, 0.0, type=T.f32), type=T.f32,
                      name="ev")


def fragment_coords(b, base, offset, cache):
    """An s32 register base + offset (base: a row or column register), built once per offset."""
    if offset not in cache:
        cache[offset] = b.add(base, offset, type=T.s32, name="ec") if offset else \
            b.mov(base, type=T.s32, name="ec")
    return cache[offset]




def apply_epilogue(b, epi, M, N, row_base, col_base, elements):
    """Replace accumulators by the epilogue of them. row_base / col_base: registers of the
    lane's first row and column of C (global coordinates); elements: [(register, row offset,
    column offset)] in the order to compute them (column-outer keeps per-column loads short
    lived)."""
    rows, cols = {}, {}
    low = EpilogueLowering(b, epi, M, N, lambda k: fragment_coords(b, row_base, k, rows),
                           lambda k: fragment_coords(b, col_base, k, cols))
    low.apply(elements)
