"""IRBuilder: appends instructions at an insertion point, names registers readably.

    b = Builder(kernel)
    i = b.global_index()                      # ctaid.x * ntid.x + tid.x
    with b.if_(b.setp("lt", i, n)):
        x = b.ld("global", T.f32, b.element_addr(xp, i, 4))
        b.st("global", b.element_addr(yp, i, 4), b.fma(a, x, y))

Structured control flow (if_, for_range) is lowered to labels and branches right away, so
every later stage sees one flat statement list; `for_range(..., unroll=k)` repeats the body k
times per trip (with a remainder loop), which is what the scheduler then interleaves.
"""
import contextlib
import itertools

from . import opcodes
from . import types as T
from .builder_tensor import TensorOps
from .instr import Instr, Label, Verbatim
from .module import Var
from ..errors import PtxgenError
from .values import SPECIAL_TYPES, Addr, Imm, LabelRef, Reg, Special, Sym, Vec

FLOAT_ROUNDED = ("add", "sub", "mul", "fma", "div", "sqrt", "rcp")
_BITS_RULES = ("bits", "shift_bits")        # opcode-table operand rules typed by width (.b32)
_SHIFT_RULES = ("shift", "shift_bits")      # ... whose second source is a 32-bit amount
CMP_NAMES = {"lt", "le", "gt", "ge", "eq", "ne", "lo", "ls", "hi", "hs",
             "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}


class Builder(TensorOps):
    """Appends instructions to `kernel`'s body. Every value-producing method returns the new
    register (named after `name=` where given), so kernels read like the arithmetic they do.
    Tensor-core and async-copy methods come from TensorOps (builder_tensor.py). See
    docs/first_kernel.md for a walk-through."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.block = kernel.body          # the insertion point: the list appended to
        self._counters = {}
        self._labels = itertools.count()
        self._guard = None
        self._param_cache = {}
        for r in kernel.regs:
            self._counters.setdefault(_stem(r.name), 0)

    # -- registers and operands ------------------------------------------------------------
    def reg(self, type, name=None):
        """A fresh register of `type`, named from `name` (or the type's prefix) plus a counter."""
        stem = name or T.REG_PREFIX[type.name]
        if stem[-1].isdigit():
            stem += "_"
        n = self._counters.get(stem, 0)
        self._counters[stem] = n + 1
        r = Reg(f"%{stem}{n}", type)
        self.kernel.declare(r)
        return r

    def operand(self, x, type):
        """`x` as an operand of `type`: registers and operands pass through, Python ints,
        floats and bools become immediates."""
        if isinstance(x, (Reg, Imm, Special, Sym, Addr, Vec)):
            return x
        if isinstance(x, bool):
            return Imm(int(x), type)
        if isinstance(x, (int, float)):
            return Imm(x, type)
        raise TypeError(f"cannot use {x!r} as a {type} operand")

    def emit(self, instr):
        """Append `instr` at the insertion point (guarded by the enclosing predicated() block,
        if any) and return it."""
        if instr.guard is None and self._guard is not None:
            instr.guard, instr.guard_negated = self._guard
        self.block.append(instr)
        return instr

    def _op(self, opcode, mods, type, srcs, out=None, name=None):
        dst = out if out is not None else self.reg(type, name)
        self.emit(Instr(opcode, tuple(mods), (dst,) + tuple(srcs)))
        return dst

    @staticmethod
    def _type_of(*xs):
        for x in xs:
            t = getattr(x, "type", None)
            if isinstance(x, (Reg, Special)) and t is not None:
                return t
        for x in xs:
            if isinstance(x, Imm) and x.type is not None:
                return x.type
        raise TypeError("cannot infer an operand type from immediates alone; pass type=")

    # -- parameters, special registers, variables --------------------------------------------
    def param(self, name, out_name=None):
        """Load a kernel parameter (pointers converted to the global window)."""
        if name in self._param_cache:
            return self._param_cache[name]
        p = self.kernel.param(name)
        r = self._op("ld", ("param", p.type.name), p.type, (Addr(Sym(p.name)),),
                     name=out_name or p.name)
        if p.pointer is not None and p.pointer.space == "global":
            r = self._op("cvta", ("to", "global", "u64"), T.u64, (r,), name=out_name or p.name)
        self._param_cache[name] = r
        return r

    def special(self, name):
        """A special register copied to a new register: 'tid.x', 'ntid.y', 'ctaid.z',
        'nctaid.x', 'laneid', 'warpid', 'smid', 'clock64', 'globaltimer', … (a leading '%'
        is accepted and dropped). Unknown names, and tid/ntid/ctaid/nctaid without their .x/.y/.z
        component, raise a one-line PtxgenError."""
        reg = special_register(name)
        return self._op("mov", (reg.type.name,), reg.type, (reg,),
                        name=reg.name.replace(".", "_"))

    def shared(self, name, type, count, align=16):
        """Declare a kernel-scope `.shared` array of `count` elements of `type` (aligned to
        `align` bytes); returns the Var, whose address address_of() gives."""
        v = Var(name, "shared", type, count, align)
        self.kernel.vars.append(v)
        return v

    def dynamic_shared(self, name="smem", align=16):
        """Declare the kernel's dynamic shared memory (`.extern .shared .b8 name[]`);
        its size is the launch's `shared=` bytes. Returns the Var (see address_of())."""
        v = Var(name, "shared", T.b8, 0, align, extern=True)
        self.kernel.vars.append(v)
        return v

    def address_of(self, var, bits=32):
        """The address of a variable (`shared(...)`/`dynamic_shared()`) in a new register:
        `bits=32` (default) gives the 32-bit shared-window address that ld/st.shared take;
        bits=64 a 64-bit one (for generic addressing, after cvta)."""
        t = T.u32 if bits == 32 else T.u64
        return self._op("mov", (t.name,), t, (Sym(var.name),), name="sbase")

    # -- arithmetic ---------------------------------------------------------------------------
    def _arith(self, opcode, a, b, *, out=None, type=None, name=None, extra=()):
        t = type or self._type_of(a, b)
        mods = list(extra)
        if t.is_float and opcode in FLOAT_ROUNDED and not any(m.startswith("r") for m in mods):
            mods.insert(0, "rn")
        rule = opcodes.ROWS[opcode].operands          # how the opcode table types operands
        t_mod = T.TYPES[f"b{t.bits}"] if rule in _BITS_RULES and t.kind != "pred" else t
        srcs = [self.operand(a, t)]
        if b is not None:
            srcs.append(self.operand(b, T.u32 if rule in _SHIFT_RULES else t))
        return self._op(opcode, mods + [t_mod.name], t, srcs, out, name)

    def add(self, a, b, **kw):
        """a + b (float adds round to nearest by default). Keywords for every arithmetic op:
        type= (default: the first register operand's), out= (write this register), name=."""
        return self._arith("add", a, b, **kw)

    def sub(self, a, b, **kw):
        """a - b."""
        return self._arith("sub", a, b, **kw)

    def min(self, a, b, **kw):
        """min(a, b)."""
        return self._arith("min", a, b, **kw)

    def max(self, a, b, **kw):
        """max(a, b)."""
        return self._arith("max", a, b, **kw)

    def and_(self, a, b, **kw):
        """a & b (bitwise .bN; on predicates, logical and)."""
        return self._arith("and", a, b, **kw)

    def or_(self, a, b, **kw):
        """a | b (bitwise .bN; on predicates, logical or)."""
        return self._arith("or", a, b, **kw)

    def xor(self, a, b, **kw):
        """a ^ b (bitwise .bN; on predicates, logical xor)."""
        return self._arith("xor", a, b, **kw)

    def shl(self, a, b, **kw):
        """a << b (b is a u32 shift count)."""
        return self._arith("shl", a, b, **kw)

    def shr(self, a, b, **kw):
        """a >> b: arithmetic for signed types, logical for unsigned (b is a u32 count)."""
        return self._arith("shr", a, b, **kw)

    def neg(self, a, **kw):
        """-a."""
        return self._arith("neg", a, None, **kw)

    def div(self, a, b, **kw):
        """a / b: f32 rounds to nearest (div.rn.f32, IEEE), integers truncate."""
        t = kw.get("type") or self._type_of(a, b)
        if t.is_float and t.bits == 32:
            kw.setdefault("extra", ("rn",))
        return self._arith("div", a, b, **kw)

    def mul(self, a, b, *, mode=None, out=None, type=None, name=None):
        """Multiply. Integers need mode 'lo' (default), 'hi' or 'wide' (result twice as wide)."""
        t = type or self._type_of(a, b)
        if t.is_float:
            return self._arith("mul", a, b, out=out, type=t, name=name)
        mode = mode or "lo"
        rt = _widen(t) if mode == "wide" else t
        dst = out if out is not None else self.reg(rt, name)
        self.emit(Instr("mul", (mode, t.name), (dst, self.operand(a, t), self.operand(b, t))))
        return dst

    def mad(self, a, b, c, *, mode=None, out=None, type=None, name=None):
        """a*b+c. Integers: mode 'lo' (default) or 'wide' (c and result twice as wide)."""
        t = type or self._type_of(a, b)
        if t.is_float:
            return self.fma(a, b, c, out=out, type=t, name=name)
        mode = mode or "lo"
        rt = _widen(t) if mode == "wide" else t
        dst = out if out is not None else self.reg(rt, name)
        self.emit(Instr("mad", (mode, t.name),
                        (dst, self.operand(a, t), self.operand(b, t), self.operand(c, rt))))
        return dst

    def fma(self, a, b, c, *, out=None, type=None, name=None, rounding="rn"):
        """a*b + c with one rounding (fma.rn by default; rounding='rz', 'rm', 'rp')."""
        t = type or self._type_of(a, b, c)
        srcs = [self.operand(x, t) for x in (a, b, c)]
        return self._op("fma", (rounding, t.name), t, srcs, out, name)

    def unary(self, opcode, a, *, mods=(), out=None, type=None, name=None):
        """Any one-source op: 'abs', 'sqrt' (mods=('rn',)), 'ex2' (mods=('approx',)), 'not' …"""
        t = type or self._type_of(a)
        row = opcodes.ROWS.get(opcode)
        tm = T.TYPES[f"b{t.bits}"] if row is not None and row.operands in _BITS_RULES \
            and t.kind != "pred" else t
        return self._op(opcode, tuple(mods) + (tm.name,), t, (self.operand(a, t),), out, name)

    def setp(self, cmp, a, b, *, type=None, out=None, name=None):
        """A new predicate: `a cmp b` for cmp in lt, le, gt, ge, eq, ne (signed/float), lo, ls,
        hi, hs (unsigned) or the unordered float forms (equ, neu, ltu, …, num, nan)."""
        if cmp not in CMP_NAMES:
            raise ValueError(f"unknown comparison {cmp!r}")
        t = type or self._type_of(a, b)
        dst = out if out is not None else self.reg(T.pred, name)
        self.emit(Instr("setp", (cmp, t.name), (dst, self.operand(a, t), self.operand(b, t))))
        return dst

    def selp(self, a, b, pred, *, type=None, out=None, name=None):
        """pred ? a : b in a new register."""
        t = type or self._type_of(a, b)
        return self._op("selp", (t.name,), t,
                        (self.operand(a, t), self.operand(b, t), pred), out, name)

    def cvt(self, type, a, *, rounding=None, out=None, name=None):
        """Convert `a` to `type`. Rounding defaults the way C does: rn for narrowing floats and
        int→float, rzi (truncate) for float→int; pass rounding= to choose."""
        src_t = self._type_of(a)
        if rounding is None:
            rounding = _default_rounding(type, src_t)
        mods = ((rounding,) if rounding else ()) + (type.name, src_t.name)
        return self._op("cvt", mods, type, (self.operand(a, src_t),), out, name)

    def mov(self, a, *, type=None, out=None, name=None):
        """Copy `a` (a register, immediate, special register or variable address) to a register."""
        t = type or (out.type if out is not None else self._type_of(a))
        return self._op("mov", (_mov_type(t).name,), t, (self.operand(a, t),), out, name)

    def const(self, value, type, name=None):
        """A register holding the immediate `value` of `type`."""
        return self.mov(Imm(value, type), type=type, name=name)

    # -- memory -------------------------------------------------------------------------------
    def element_addr(self, base, index, elem_bytes, *, name="addr"):
        """base + index*elem_bytes as a 64-bit address (index of 32 bits is widened)."""
        if isinstance(index, int):
            return self.add(base, index * elem_bytes, name=name)
        if index.type.bits == 32:
            mode_t = T.s32 if index.type.is_signed else T.u32
            off = self.mul(index, elem_bytes, mode="wide", type=mode_t, name="off")
        else:
            off = self.mul(index, elem_bytes, type=T.u64, name="off")
        return self.add(base, off, type=T.u64, name=name)

    def ld(self, space, type, address, *, vec=1, cache=None, out=None, name=None):
        """Load; returns a register, or a tuple of `vec` registers for v2/v4."""
        addr = address if isinstance(address, Addr) else Addr(address)
        mods = [space] + ([cache] if cache else []) + ([f"v{vec}"] if vec > 1 else []) + [type.name]
        if vec > 1:
            dsts = tuple(out) if out is not None else tuple(self.reg(type, name) for _ in range(vec))
            self.emit(Instr("ld", tuple(mods), (Vec(dsts), addr)))
            return dsts
        dst = out if out is not None else self.reg(type, name)
        self.emit(Instr("ld", tuple(mods), (dst, addr)))
        return dst

    def st(self, space, address, value, *, type=None, cache=None):
        """Store `value` (a register, an immediate, or a tuple of 2 or 4 for st.v2/v4) to
        `address` in `space` ('global', 'shared', 'local'); cache= adds a cache operator
        ('wb', 'cg', 'cs', 'wt')."""
        addr = address if isinstance(address, Addr) else Addr(address)
        vals = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        t = type or self._type_of(*vals)
        vec = len(vals)
        mods = [space] + ([cache] if cache else []) + ([f"v{vec}"] if vec > 1 else []) + [t.name]
        src = Vec(tuple(self.operand(v, t) for v in vals)) if vec > 1 else self.operand(vals[0], t)
        return self.emit(Instr("st", tuple(mods), (addr, src)))

    def atom(self, space, op, address, value, *, type=None, name=None):
        """Atomic read-modify-write (`op`: add, min, max, exch, cas, and, or, xor, inc, dec)
        on `address` in `space`; returns the old value in a new register."""
        addr = address if isinstance(address, Addr) else Addr(address)
        t = type or self._type_of(value)
        return self._op("atom", (space, op, t.name), t, (addr, self.operand(value, t)), None, name)

    def red(self, space, op, address, value, *, type=None):
        """Atomic reduction without a result (red.space.op.type [address], value)."""
        addr = address if isinstance(address, Addr) else Addr(address)
        t = type or self._type_of(value)
        return self.emit(Instr("red", (space, op, t.name), (addr, self.operand(value, t))))

    def cp_async(self, dst, src, nbytes, *, src_size=None, cache=None):
        """cp.async global→shared copy of 4, 8 or 16 bytes (sm_80+); bytes past `src_size`
        (a register or int) are zero-filled. .cg (bypassing L1) is only legal for 16 bytes, so
        it is the default there and .ca otherwise."""
        if nbytes not in (4, 8, 16):
            raise ValueError(f"cp.async copies 4, 8 or 16 bytes, not {nbytes}")
        cache = cache or ("cg" if nbytes == 16 else "ca")
        ops = [dst if isinstance(dst, Addr) else Addr(dst),
               src if isinstance(src, Addr) else Addr(src), Imm(nbytes, T.u32)]
        if src_size is not None:
            ops.append(self.operand(src_size, T.u32))
        return self.emit(Instr("cp", ("async", cache, "shared", "global"), tuple(ops)))

    def cp_async_commit(self):
        """Close the group of cp.async copies issued since the last commit."""
        return self.emit(Instr("cp", ("async", "commit_group")))

    def cp_async_wait(self, pending=0):
        """Wait until at most `pending` committed cp.async groups are still in flight."""
        return self.emit(Instr("cp", ("async", "wait_group"), (Imm(pending, T.u32),)))

    def bar_sync(self, barrier=0):
        """bar.sync: wait until every thread of the block arrives at barrier `barrier`
        (shared-memory writes before it are visible after it). Every thread of the block must
        reach it: the verifier refuses one under a thread-dependent branch."""
        return self.emit(Instr("bar", ("sync",), (Imm(barrier, T.u32),)))

    # -- control flow -------------------------------------------------------------------------
    def new_label(self, hint="L"):
        """A fresh, unique label name starting with `hint` (not yet placed: see label())."""
        return f"${hint}_{next(self._labels)}"

    def label(self, name):
        """Place label `name` at the insertion point."""
        self.block.append(Label(name))
        return name

    def branch(self, label, pred=None, negate=False):
        """Jump to `label`, always (bra.uni) or where `pred` holds (where it does not, with
        negate=True)."""
        ins = Instr("bra", ("uni",) if pred is None and self._guard is None else (),
                    (LabelRef(label),))
        if pred is not None:
            ins.guard, ins.guard_negated = pred, negate
        return self.emit(ins)

    def ret(self):
        """Return from the kernel."""
        return self.emit(Instr("ret"))

    @contextlib.contextmanager
    def predicated(self, pred, negate=False):
        """Guard every instruction emitted inside with @pred (or @!pred)."""
        saved = self._guard
        self._guard = (pred, negate)
        try:
            yield
        finally:
            self._guard = saved

    @contextlib.contextmanager
    def if_(self, pred, negate=False):
        """Run the body only where pred holds (a forward branch around it)."""
        end = self.new_label("endif")
        self.branch(end, pred, negate=not negate)
        yield
        self.label(end)

    @contextlib.contextmanager
    def for_range(self, start, stop, step=1, *, unroll=1, type=T.s32, name="i"):
        """for i in range(start, stop, step) with step > 0; the body may be repeated `unroll`
        times per trip. Yields the index register."""
        if isinstance(step, Reg):
            if unroll != 1:
                raise ValueError("for_range with a register step cannot be unrolled")
        elif not (isinstance(step, int) and step > 0):
            raise ValueError(f"for_range step must be a positive int or a register, got {step!r}")
        if not (isinstance(unroll, int) and unroll >= 1):
            raise ValueError(f"unroll must be a positive int, got {unroll!r}")
        i = self.reg(type, name)
        outer, body = self.block, []
        self.block = body
        try:
            yield i
        finally:
            self.block = outer
        const_trips = None
        if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
            const_trips = max(0, -(-(stop - start) // step))
        self.mov(start, type=type, out=i)
        if const_trips is not None and const_trips <= unroll:
            for c in range(const_trips):          # fully unrolled: straight-line code
                self._splice(body, c)
                if c + 1 < const_trips:
                    self.add(i, step, out=i)
            return
        if unroll > 1:
            # main loop: while i + (unroll-1)*step < stop
            head, done = self.new_label("loop"), self.new_label("loop_end")
            last = self.reg(type, "last")
            self.label(head)
            self.add(i, (unroll - 1) * step, out=last)
            self.branch(done, self.setp("ge", last, stop, type=type))
            for c in range(unroll):
                self._splice(body, c)
                self.add(i, step, out=i)
            self.branch(head)
            self.label(done)
            if const_trips is not None and const_trips % unroll == 0:
                return
        head, done = self.new_label("loop"), self.new_label("loop_end")
        self.label(head)
        self.branch(done, self.setp("ge", i, stop, type=type))
        self._splice(body, unroll)
        self.add(i, step, out=i)
        self.branch(head)
        self.label(done)

    def _splice(self, body, copy):
        """Append a copy of body; labels defined in it get a per-copy suffix."""
        names = {s.name for s in body if isinstance(s, Label)}
        for s in body:
            if isinstance(s, Label):
                self.block.append(Label(f"{s.name}_u{copy}"))
            elif isinstance(s, Instr):
                ops = tuple(LabelRef(f"{o.name}_u{copy}") if isinstance(o, LabelRef)
                            and o.name in names else o for o in s.operands)
                self.block.append(Instr(s.opcode, s.mods, ops, s.guard, s.guard_negated,
                                        s.comment))
            else:
                self.block.append(s)

    # -- conveniences for kernels -------------------------------------------------------------
    def global_index(self, dim="x"):
        """ctaid*ntid + tid in one dimension (u32)."""
        tid = self.special(f"tid.{dim}")
        ntid = self.special(f"ntid.{dim}")
        ctaid = self.special(f"ctaid.{dim}")
        return self.mad(ctaid, ntid, tid, name=f"gid_{dim}")

    def comment(self, text):
        """A `// text` line in the emitted PTX (no instruction)."""
        self.block.append(Verbatim(f"// {text}"))


VECTOR_SPECIALS = ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid",
                   "cluster_nctaid")


def pow2_exponent(n):
    """k for n = 2**k: the shift that multiplies or divides by a power-of-two tile size."""
    return n.bit_length() - 1


def special_register(name):
    """The Special for `name` ('tid.x' or '%tid.x'), checked against the registers ptxgen
    knows."""
    if not isinstance(name, str):
        raise PtxgenError(f"special register name must be a string, got {name!r}")
    bare = name[1:] if name.startswith("%") else name
    base, _, comp = bare.partition(".")
    if base not in SPECIAL_TYPES:
        raise PtxgenError(f"unknown special register {name!r}; known: "
                          f"{', '.join(sorted(SPECIAL_TYPES))}")
    if base in VECTOR_SPECIALS and comp not in ("x", "y", "z"):
        raise PtxgenError(f"special register {name!r} needs a component: {base}.x, {base}.y "
                          f"or {base}.z")
    if base not in VECTOR_SPECIALS and comp:
        raise PtxgenError(f"special register {name!r}: %{base} has no components")
    return Special(bare)


def _stem(name):
    return name.lstrip("%").rstrip("0123456789")


def _widen(t):
    return T.TYPES[t.name[0] + str(t.bits * 2)]


def _mov_type(t):
    if t.name in ("f16", "bf16"):
        return T.b16          # PTX mov has no .f16/.bf16 type: 16-bit floats move as bits
    return t if t.kind != "bits" or t.name in ("b16", "b32", "b64") else T.TYPES[f"b{t.bits}"]


def _default_rounding(dst, src):
    if dst.is_float and src.is_float:
        return "rn" if dst.bits < src.bits else None
    if dst.is_float and not src.is_float:
        return "rn"
    if not dst.is_float and src.is_float:
        return "rzi"
    return None
