"""Values of the LLVM lowering: IR types as LLVM types, the register file, operands, addresses.

PTX registers are untyped storage of a width: a '.b32' register may be read as u32 by one
instruction and as f32 by the next. Each register therefore lives in an alloca of an integer of
its width (i1 for predicates); a read reinterprets (bitcast) and resizes to the type the
instruction reads, a write does the reverse. mem2reg in the optimizer turns the allocas into SSA
values, so the back ends see ordinary code.
"""
from llvmlite import ir

from ..errors import LoweringError
from ..ir import types as T
from ..ir.values import SPECIAL_TYPES, Addr, Imm, Raw, Reg, Special, Sym, Vec

# PTX state spaces as NVPTX address spaces (the numbers LLVM's NVPTX back end and NVVM share).
ADDRSPACE = {"generic": 0, "global": 1, "shared": 3, "const": 4, "local": 5, "param": 101}

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_FLOATS = {16: F16, 32: F32, 64: F64}


def ltype(t):
    """The LLVM type an instruction of PTX type t computes in. bf16 has no type in the LLVM that
    libNVVM is built on, so it stays its 16 bits."""
    if t.kind == "pred":
        return I1
    if t.is_float and t.name != "bf16":
        return _FLOATS[t.bits]
    return ir.IntType(t.bits)


def storage(t):
    """The type a register of PTX type t is kept in."""
    return I1 if t.kind == "pred" else ir.IntType(t.bits)


def resize(b, v, bits, signed):
    """An integer value widened (by sign when `signed`) or truncated to `bits`."""
    have = v.type.width
    if have == bits:
        return v
    if have > bits:
        return b.trunc(v, ir.IntType(bits))
    return b.sext(v, ir.IntType(bits)) if signed else b.zext(v, ir.IntType(bits))


def to_bits(b, v):
    """A value as an integer of its width (floats bitcast)."""
    if isinstance(v.type, ir.IntType):
        return v
    width = {F16: 16, F32: 32, F64: 64}[v.type]
    return b.bitcast(v, ir.IntType(width))


def from_bits(b, v, t):
    """An integer value reinterpreted as PTX type t (resized first when the widths differ)."""
    lt = ltype(t)
    if lt == I1:
        return v if v.type == I1 else b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    if v.type == I1:
        v = b.zext(v, ir.IntType(t.bits))
    v = resize(b, v, t.bits, t.is_signed)
    return v if isinstance(lt, ir.IntType) else b.bitcast(v, lt)


class Frame:
    """Per-kernel lowering state: the builder, register allocas, parameters, variables."""

    def __init__(self, kernel, func, builder, module_vars, dialect):
        self.kernel, self.func, self.b = kernel, func, builder
        self.dialect = dialect
        self.regs = {}
        self.params = {p.name: (p, a) for p, a in zip(kernel.params, func.args)}
        self.vars = dict(module_vars)
        self.entry = builder.block
        self.instr = None             # the instruction being lowered (for error messages)
        # registers by name, for operands the IR keeps as text ('!%p' negated predicates)
        self.by_name = {r.name: r for r in kernel.regs}
        for st in kernel.body:
            self.by_name.update({r.name: r for r in getattr(st, "regs", ())})

    # -- errors -----------------------------------------------------------------------------
    def fail(self, why):
        ins = self.instr
        where = f"line {ins.line}: " if ins is not None and ins.line else ""
        text = f"`{str(ins).split('//')[0].strip()}`" if ins is not None else ""
        raise LoweringError(f"kernel {self.kernel.name}: {where}{text}: {why}")

    # -- registers --------------------------------------------------------------------------
    def slot(self, reg):
        s = self.regs.get(reg.name)
        if s is None:
            with self.b.goto_entry_block():
                self.b.position_at_start(self.entry)
                s = self.b.alloca(storage(reg.type), name=reg.name.lstrip("%"))
            self.regs[reg.name] = s
        return s

    def write(self, reg, v, t):
        """Store a value computed as PTX type t into reg (extended by t's sign when wider)."""
        if not isinstance(reg, Reg):
            self.fail(f"destination {reg} is not a register")
        st = storage(reg.type)
        if st == I1:
            if v.type != I1:
                v = self.b.icmp_unsigned("!=", to_bits(self.b, v), ir.Constant(v.type, 0))
            self.b.store(v, self.slot(reg))
            return
        v = to_bits(self.b, v)
        if v.type == I1:
            v = self.b.zext(v, st)
        self.b.store(resize(self.b, v, st.width, t.is_signed), self.slot(reg))

    # -- operands ---------------------------------------------------------------------------
    def read(self, op, t):
        """An operand's value as PTX type t."""
        b = self.b
        if isinstance(op, Reg):
            v = b.load(self.slot(op))
            if op.type.kind == "pred" and t.kind != "pred":
                v = b.zext(v, ir.IntType(t.bits))
            return from_bits(b, v, t)
        if isinstance(op, Imm):
            return self.constant(op.value, t)
        if isinstance(op, Special):
            return from_bits(b, self.special(op), t)
        if isinstance(op, Raw) and op.text.startswith("!") and t.kind == "pred":
            reg = self.by_name.get(op.text[1:].strip())
            if reg is not None and reg.type.kind == "pred":
                return b.not_(b.load(self.slot(reg)))
        if isinstance(op, Sym):
            if op.name in self.params:
                return self.param_value(op.name, t)
            return from_bits(b, self.var_address(op.name, 64), t)
        self.fail(f"operand {op} cannot be read as .{t}")

    def constant(self, value, t):
        lt = ltype(t)
        if isinstance(lt, ir.IntType):
            return ir.Constant(lt, int(value) & ((1 << lt.width) - 1))
        if isinstance(value, int) and not isinstance(value, bool) and t.bits == 16:
            return ir.Constant(I16, value & 0xFFFF).bitcast(lt)   # 16-bit floats are bits
        return ir.Constant(lt, float(value))

    def special(self, op):
        name = op.name
        bits = SPECIAL_TYPES.get(name.split(".")[0], T.u32).bits   # the IR's register width
        if name in ("dynamic_smem_size", "total_smem_size"):
            return self.b.asm(ir.FunctionType(I32, []), f"mov.u32 $0, %{name};", "=r", [],
                              True)
        fn = self.intrinsic("llvm.nvvm.read.ptx.sreg." + name.replace("_", "."),
                            ir.IntType(bits), ())
        return self.b.call(fn, [])

    def intrinsic(self, name, ret, args):
        m = self.b.module
        fn = m.globals.get(name)
        if fn is None:
            fn = ir.Function(m, ir.FunctionType(ret, list(args)), name)
        return fn

    def call(self, name, ret, *values):
        return self.b.call(self.intrinsic(name, ret, [v.type for v in values]), list(values))

    def param_value(self, name, t):
        p, arg = self.params[name]
        if p.array:
            self.fail(f"array parameter {name} has no scalar value")
        v = arg
        if isinstance(v.type, (ir.FloatType, ir.DoubleType, ir.HalfType)):
            v = to_bits(self.b, v)
        return from_bits(self.b, v, t)

    def var_address(self, name, bits):
        gv = self.vars.get(name)
        if gv is None:
            self.fail(f"unknown variable {name}")
        return self.b.ptrtoint(gv, ir.IntType(bits))

    # -- addresses ----------------------------------------------------------------------------
    def pointer(self, addr, space, elem):
        """A typed pointer in `space`'s address space for a memory operand [base+offset]."""
        if not isinstance(addr, Addr):
            self.fail(f"operand {addr} is not an address")
        b = self.b
        base = addr.base
        if isinstance(base, Reg):
            v = self.read(base, T.TYPES[f"u{base.type.bits}"] if base.type.bits in (32, 64)
                          else T.u64)
            v = resize(b, v, 64, False)
        elif isinstance(base, Sym) and base.name in self.vars:
            v = self.var_address(base.name, 64)
        elif isinstance(base, Imm):
            v = ir.Constant(I64, int(base.value))
        else:
            self.fail(f"address {addr} has no register, variable or constant base")
        if addr.offset:
            v = b.add(v, ir.Constant(I64, addr.offset))
        return b.inttoptr(v, ir.PointerType(elem, ADDRSPACE[space]))

    def vector(self, op, t, n):
        """A store's vector operand {a, b, …} as an LLVM vector of n elements of type t."""
        lt = ltype(t)
        vec = ir.Constant(ir.VectorType(lt, n), None)
        items = op.items if isinstance(op, Vec) else (op,)
        for i, x in enumerate(items):
            vec = self.b.insert_element(vec, self.read(x, t), ir.Constant(I32, i))
        return vec
