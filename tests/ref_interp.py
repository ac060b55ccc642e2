"""A reference interpreter for ptxgen IR kernels: one thread at a time, in plain Python.

It is the oracle the property tests hold the emulator (ptxgen.emu) against, so it is written
to be obviously correct rather than fast, and it shares no code with ptxgen.emu:

* every register holds the bit pattern of its value as a Python int; an instruction reads bits
  and interprets them by the instruction's type, exactly as PTX describes;
* floating-point arithmetic is exact rational arithmetic (fractions.Fraction) followed by one
  rounding to the destination format in the instruction's rounding mode, so fma rounds once,
  directed roundings are exact and subnormals are kept (nothing here has .ftz);
* immediates are read from their PTX text (`str(imm)`), i.e. from what ptxas would see;
* threads run one after another; `bar.sync` suspends a thread (a Python generator) until every
  thread of the block has arrived, which is all a barrier means for race-free programs.

Only the instruction forms the program generator (irgen.py) produces are implemented; anything
else raises RefError, so an unexpected form can never be silently misinterpreted.

Semantics taken from the PTX ISA where hardware-specific: shift amounts above the width clamp to
the width; float min/max return the non-NaN operand and order -0.0 below +0.0; float-to-integer
conversion saturates to the destination range and turns NaN into 0; NaN results are canonical
(payloads are not modelled: outputs compare NaN with NaN of the same format as equal).
"""
from fractions import Fraction

from ptxgen.ir import types as T
from ptxgen.ir.instr import Instr, Label
from ptxgen.ir.values import Addr, Imm, LabelRef, Reg, Special, Sym, Vec


class RefError(Exception):
    """The kernel does something the reference does not model, or is ill-formed at run time
    (out-of-bounds access, undefined register, barrier reached by only some threads)."""


# -- floating-point formats -----------------------------------------------------------------
class Fmt:
    def __init__(self, name, exp_bits, man_bits):
        self.name = name
        self.e = exp_bits
        self.m = man_bits
        self.bits = 1 + exp_bits + man_bits
        self.bias = (1 << (exp_bits - 1)) - 1
        self.emax = self.bias
        self.emin = 1 - self.bias
        self.exp_all = (1 << exp_bits) - 1
        self.sign_bit = 1 << (exp_bits + man_bits)
        self.inf = self.exp_all << man_bits
        self.nan = (self.exp_all << man_bits) | ((1 << man_bits) - 1)   # canonical: all ones
        self.max_finite = ((self.exp_all - 1) << man_bits) | ((1 << man_bits) - 1)


FMTS = {"f16": Fmt("f16", 5, 10), "bf16": Fmt("bf16", 8, 7), "f32": Fmt("f32", 8, 23),
        "f64": Fmt("f64", 11, 52)}


class FVal:
    """A decoded float: kind 'nan', 'inf' or 'num'; sign 0/1; mag a non-negative Fraction."""
    __slots__ = ("kind", "sign", "mag")

    def __init__(self, kind, sign=0, mag=Fraction(0)):
        self.kind, self.sign, self.mag = kind, sign, mag

    @property
    def value(self):
        return -self.mag if self.sign else self.mag

    def is_zero(self):
        return self.kind == "num" and self.mag == 0


def decode(bits, fmt):
    sign = 1 if bits & fmt.sign_bit else 0
    exp = (bits >> fmt.m) & fmt.exp_all
    man = bits & ((1 << fmt.m) - 1)
    if exp == fmt.exp_all:
        return FVal("nan") if man else FVal("inf", sign)
    if exp == 0:
        mag = Fraction(man) * Fraction(2) ** (fmt.emin - fmt.m)
    else:
        mag = Fraction((1 << fmt.m) | man) * Fraction(2) ** (exp - fmt.bias - fmt.m)
    return FVal("num", sign, mag)


def floor_log2(q):
    """The e with 2**e <= q < 2**(e+1), for a positive Fraction."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    return e


def round_int(q, sign, mode):
    """Round a non-negative Fraction magnitude to an integer magnitude; `sign` is the sign of the
    value, which directed modes need. Modes: rn (nearest even), rz, rm (toward -inf), rp."""
    n = q.numerator // q.denominator
    rem = q - n
    if rem == 0:
        return n
    if mode == "rn":
        half = Fraction(1, 2)
        return n + 1 if rem > half or (rem == half and n % 2 == 1) else n
    if mode == "rz":
        return n
    if mode == "rp":
        return n if sign else n + 1
    if mode == "rm":
        return n + 1 if sign else n
    raise RefError(f"unknown rounding mode {mode}")


def encode(sign, mag, fmt, mode):
    """The bits of the value (-1)**sign * mag rounded once to fmt in mode."""
    s = fmt.sign_bit if sign else 0
    if mag == 0:
        return s
    e = max(floor_log2(mag), fmt.emin)
    n = round_int(mag / Fraction(2) ** (e - fmt.m), sign, mode)
    if n == 1 << (fmt.m + 1):           # rounding carried into the next binade
        n >>= 1
        e += 1
    if e > fmt.emax:
        toward_inf = mode == "rn" or (mode == "rp" and not sign) or (mode == "rm" and sign)
        return s | (fmt.inf if toward_inf else fmt.max_finite)
    if n < 1 << fmt.m:                  # subnormal (only possible at e == emin)
        return s | n
    return s | ((e + fmt.bias) << fmt.m) | (n - (1 << fmt.m))


def exact_sum(a, b, mode, fmt):
    """Round(a + b) with IEEE special cases; a and b are FVal."""
    if a.kind == "nan" or b.kind == "nan":
        return fmt.nan
    if a.kind == "inf" or b.kind == "inf":
        if a.kind == "inf" and b.kind == "inf" and a.sign != b.sign:
            return fmt.nan
        inf = a if a.kind == "inf" else b
        return (fmt.sign_bit if inf.sign else 0) | fmt.inf
    total = a.value + b.value
    if total == 0:
        # x + x keeps x's sign (zeros of one sign); an exact zero from opposite signs is +0,
        # except under round-toward-negative (IEEE 754 section 6.3)
        if a.sign == b.sign and a.is_zero() and b.is_zero():
            return fmt.sign_bit if a.sign else 0
        return fmt.sign_bit if mode == "rm" else 0
    return encode(1 if total < 0 else 0, abs(total), fmt, mode)


def f_add(x, y, fmt, mode):
    return exact_sum(decode(x, fmt), decode(y, fmt), mode, fmt)


def f_sub(x, y, fmt, mode):
    return exact_sum(decode(x, fmt), decode(y ^ fmt.sign_bit, fmt), mode, fmt)


def product(a, b):
    """a*b as an FVal (exact), or None for NaN."""
    if a.kind == "nan" or b.kind == "nan":
        return None
    sign = a.sign ^ b.sign
    if a.kind == "inf" or b.kind == "inf":
        if a.is_zero() or b.is_zero():
            return None
        return FVal("inf", sign)
    return FVal("num", sign, a.mag * b.mag)


def f_mul(x, y, fmt, mode):
    p = product(decode(x, fmt), decode(y, fmt))
    if p is None:
        return fmt.nan
    if p.kind == "inf":
        return (fmt.sign_bit if p.sign else 0) | fmt.inf
    return encode(p.sign, p.mag, fmt, mode)


def f_fma(x, y, z, fmt, mode):
    p = product(decode(x, fmt), decode(y, fmt))
    c = decode(z, fmt)
    if p is None or c.kind == "nan":
        return fmt.nan
    return exact_sum(p, c, mode, fmt)


def f_less(a, b):
    """a < b for non-NaN FVal, with -0.0 < +0.0 (the order PTX min/max use)."""
    def key(v):
        if v.kind == "inf":
            return (Fraction(-1) if v.sign else Fraction(1), 0, 0)
        return (Fraction(0), v.value, -v.sign)
    ka, kb = key(a), key(b)
    if ka[0] != kb[0]:
        return ka[0] < kb[0]
    if ka[1] != kb[1]:
        return ka[1] < kb[1]
    return ka[2] < kb[2]


def f_minmax(x, y, fmt, want_min):
    a, b = decode(x, fmt), decode(y, fmt)
    if a.kind == "nan" and b.kind == "nan":
        return fmt.nan
    if a.kind == "nan":
        return y
    if b.kind == "nan":
        return x
    a_first = f_less(a, b) if want_min else f_less(b, a)
    return x if a_first else y


UNORDERED = {"equ": "eq", "neu": "ne", "ltu": "lt", "leu": "le", "gtu": "gt", "geu": "ge"}


def f_compare(x, y, fmt, cmp):
    """setp on floats: ordered comparisons are false with a NaN operand, unordered ones
    (equ, ltu, ...) true; num and nan test for NaN operands."""
    a, b = decode(x, fmt), decode(y, fmt)
    unordered = a.kind == "nan" or b.kind == "nan"
    if cmp == "num":
        return not unordered
    if cmp == "nan":
        return unordered
    if unordered:
        return cmp in UNORDERED
    return _int_compare(_ordered_value(a), _ordered_value(b), UNORDERED.get(cmp, cmp))


def _ordered_value(v):
    # infinities as values beyond any finite float; zeros compare equal whatever their sign
    if v.kind == "inf":
        return Fraction(-(1 << 2000)) if v.sign else Fraction(1 << 2000)
    return v.value


def _int_compare(a, b, cmp):
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
            "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}[cmp]


# -- integers -------------------------------------------------------------------------------
def mask(bits):
    return (1 << bits) - 1


def as_signed(v, bits):
    v &= mask(bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def int_value(v, t):
    """The integer a bit pattern means for type t (bit types read as unsigned)."""
    return as_signed(v, t.bits) if t.kind == "sint" else v & mask(t.bits)


# -- conversions ----------------------------------------------------------------------------
def convert(bits, dst, src, rnd):
    """cvt.rnd.dst.src of a bit pattern."""
    if src.is_float and dst.is_float:
        sf, df = FMTS[src.name], FMTS[dst.name]
        v = decode(bits, sf)
        if v.kind == "nan":
            return df.nan
        if v.kind == "inf":
            return (df.sign_bit if v.sign else 0) | df.inf
        if rnd in ("rni", "rzi", "rmi", "rpi"):
            if sf is not df:
                raise RefError("integer rounding between different float types")
            return encode(v.sign, Fraction(round_int(v.mag, v.sign, rnd[:2])), df, "rn")
        return encode(v.sign, v.mag, df, rnd or "rn")
    if src.is_float:                                   # float -> integer, saturating
        v = decode(bits, FMTS[src.name])
        if v.kind == "nan":
            return 0
        lo = -(1 << (dst.bits - 1)) if dst.is_signed else 0
        hi = (1 << (dst.bits - 1)) - 1 if dst.is_signed else mask(dst.bits)
        if v.kind == "inf":
            n = lo if v.sign else hi
        else:
            if rnd not in ("rni", "rzi", "rmi", "rpi"):
                raise RefError(f"float-to-integer cvt needs an integer rounding, got {rnd}")
            n = round_int(v.mag, v.sign, rnd[:2])
            n = -n if v.sign else n
            n = min(max(n, lo), hi)
        return n & mask(dst.bits)
    value = int_value(bits, src)
    if dst.is_float:                                   # integer -> float
        return encode(1 if value < 0 else 0, Fraction(abs(value)), FMTS[dst.name], rnd or "rn")
    return value & mask(dst.bits)                      # integer -> integer: extend or chop


# -- the interpreter ------------------------------------------------------------------------
ROUNDINGS = ("rn", "rz", "rm", "rp")
INT_ROUNDINGS = ("rni", "rzi", "rmi", "rpi")
GLOBAL_BASE = 1 << 40        # buffer k lives at GLOBAL_BASE * (k + 1)


class Memory:
    """Global memory: one bytearray per pointer parameter, at a distinct fake address."""

    def __init__(self):
        self.buffers = []    # (base, bytearray)

    def add(self, data):
        base = GLOBAL_BASE * (len(self.buffers) + 1)
        self.buffers.append((base, bytearray(data)))
        return base

    def locate(self, addr, n):
        for base, buf in self.buffers:
            if base <= addr and addr + n <= base + len(buf):
                return buf, addr - base
        raise RefError(f"global access of {n} bytes at {addr:#x} is outside every buffer")


def shared_layout(kernel):
    """Offsets of the kernel's static shared variables (in declaration order, aligned)."""
    offsets, size = {}, 0
    for v in kernel.vars:
        if v.space != "shared" or v.extern:
            continue
        align = max(v.align, v.type.nbytes, 1)
        size = -(-size // align) * align
        offsets[v.name] = size
        size += v.nbytes
    return offsets, size


def run_kernel(kernel, grid, block, args):
    """Run `kernel` over a 1-D grid of 1-D blocks. `args` maps parameter names to bytes-like
    objects (pointer parameters) or Python numbers (scalars). Returns {name: bytes} of every
    pointer argument after the run."""
    mem = Memory()
    param_bits = {}
    buffers = {}
    for p in kernel.params:
        if p.name not in args:
            raise RefError(f"no argument for parameter {p.name}")
        a = args[p.name]
        if p.pointer is not None:
            base = mem.add(a)
            buffers[p.name] = len(mem.buffers) - 1
            param_bits[p.name] = base
        else:
            param_bits[p.name] = scalar_bits(a, p.type)
    program = Program(kernel)
    shared_offsets, shared_size = shared_layout(kernel)
    for cta in range(grid):
        shared = bytearray(shared_size)
        threads = [program.thread(param_bits, mem, shared, shared_offsets,
                                  {"tid.x": t, "ntid.x": block, "ctaid.x": cta,
                                   "nctaid.x": grid})
                   for t in range(block)]
        _run_block(threads)
    return {name: bytes(mem.buffers[i][1]) for name, i in buffers.items()}


def _run_block(threads):
    """Step every thread to its next barrier (or its end); all must agree on which."""
    live = list(threads)
    while live:
        stops = []
        for th in live:
            stops.append(next(th, None))
        arrived = [s for s in stops if s is not None]
        if arrived and len(arrived) != len(stops):
            raise RefError("bar.sync reached by some threads of a block while others exited")
        if len(set(arrived)) > 1:
            raise RefError(f"threads wait at different barriers: {sorted(set(arrived))}")
        live = [th for th, s in zip(live, stops) if s is not None]


def scalar_bits(value, t):
    if t.is_float:
        from struct import pack, unpack
        if t.bits == 32:
            return unpack("<I", pack("<f", value))[0]
        if t.bits == 64:
            return unpack("<Q", pack("<d", value))[0]
        raise RefError(f"scalar parameter of type {t}")
    return int(value) & mask(t.bits)


def imm_bits(imm, t):
    """The bits an immediate has in an instruction of type t, from its PTX spelling."""
    text = str(imm)
    if text[:2] in ("0f", "0F"):
        bits = int(text[2:], 16)
        if t.bits == 64 and t.is_float:
            # a single-precision literal in a double instruction means that float's value
            return convert(bits, T.f64, T.f32, None)
        return bits & mask(t.bits)
    if text[:2] in ("0d", "0D"):
        bits = int(text[2:], 16)
        if t.bits == 32 and t.is_float:
            raise RefError("double literal in a single-precision instruction")
        return bits & mask(t.bits)
    return int(text.rstrip("uU"), 0) & mask(t.bits)


class Program:
    def __init__(self, kernel):
        self.kernel = kernel
        self.body = [s for s in kernel.body if isinstance(s, (Instr, Label))]
        self.labels = {s.name: i for i, s in enumerate(self.body) if isinstance(s, Label)}
        self.params = {p.name: p for p in kernel.params}
        # what every thread would look up again and again: the instruction's type, its
        # handler, and the bits of its immediates (pure functions of the instruction)
        self.decoded = {}
        self.imms = {}
        for s in self.body:
            if isinstance(s, Instr):
                self.decoded[id(s)] = (getattr(Thread, "op_" + s.opcode, None), s.type)

    def imm(self, o, t):
        key = (id(o), t.name)
        if key not in self.imms:
            self.imms[key] = imm_bits(o, t)
        return self.imms[key]

    def thread(self, param_bits, mem, shared, shared_offsets, specials):
        return Thread(self, param_bits, mem, shared, shared_offsets, specials).run()


class Thread:
    def __init__(self, program, param_bits, mem, shared, shared_offsets, specials):
        self.p = program
        self.params = param_bits
        self.mem = mem
        self.shared = shared
        self.shared_offsets = shared_offsets
        self.specials = specials
        self.regs = {}

    # -- operands ------------------------------------------------------------------------------
    def read(self, o, t):
        """Bits of a source operand for an instruction of type t."""
        if isinstance(o, Reg):
            if o not in self.regs:
                raise RefError(f"register {o.name} read before any write")
            return self.regs[o] & mask(t.bits)
        if isinstance(o, Imm):
            return self.p.imm(o, t)
        if isinstance(o, Special):
            if o.name not in self.specials:
                raise RefError(f"special register %{o.name} is not modelled")
            return self.specials[o.name] & mask(t.bits)
        if isinstance(o, Sym):
            if o.name in self.shared_offsets:
                return self.shared_offsets[o.name]
            raise RefError(f"symbol {o.name} as a value")
        raise RefError(f"operand {o!r} is not modelled")

    def write(self, r, bits):
        if not isinstance(r, Reg):
            raise RefError(f"destination {r!r} is not a register")
        self.regs[r] = bits & mask(r.type.bits)

    def address(self, a, t_addr=T.u64):
        if not isinstance(a, Addr):
            raise RefError(f"memory operand {a!r} is not an address")
        if isinstance(a.base, Sym):
            if a.base.name in self.params:
                return ("param", a.base.name)
            if a.base.name in self.shared_offsets:
                return self.shared_offsets[a.base.name] + a.offset
            raise RefError(f"address of unknown symbol {a.base.name}")
        return self.read(a.base, a.base.type if isinstance(a.base, Reg) else t_addr) + a.offset

    # -- memory --------------------------------------------------------------------------------
    def load(self, space, addr, n):
        if space == "global":
            buf, off = self.mem.locate(addr, n)
        elif space == "shared":
            if not 0 <= addr <= len(self.shared) - n:
                raise RefError(f"shared access of {n} bytes at {addr} outside {len(self.shared)}")
            buf, off = self.shared, addr
        else:
            raise RefError(f"loads from .{space} are not modelled")
        return int.from_bytes(buf[off:off + n], "little")

    def store(self, space, addr, n, bits):
        if space == "global":
            buf, off = self.mem.locate(addr, n)
        elif space == "shared":
            if not 0 <= addr <= len(self.shared) - n:
                raise RefError(f"shared access of {n} bytes at {addr} outside {len(self.shared)}")
            buf, off = self.shared, addr
        else:
            raise RefError(f"stores to .{space} are not modelled")
        buf[off:off + n] = (bits & mask(8 * n)).to_bytes(n, "little")

    # -- execution -----------------------------------------------------------------------------
    def run(self):
        body, pc, steps = self.p.body, 0, 0
        while pc < len(body):
            s = body[pc]
            pc += 1
            if isinstance(s, Label):
                continue
            steps += 1
            if steps > 1_000_000:
                raise RefError("more than a million instructions in one thread")
            if s.guard is not None:
                taken = self.regs.get(s.guard)
                if taken is None:
                    raise RefError(f"guard {s.guard.name} read before any write")
                if bool(taken) == s.guard_negated:
                    continue
            op = s.opcode
            if op == "bra":
                target = s.operands[0]
                if not isinstance(target, LabelRef) or target.name not in self.p.labels:
                    raise RefError(f"branch to unknown label {target}")
                pc = self.p.labels[target.name]
                continue
            if op in ("ret", "exit"):
                return
            if op == "bar":
                if s.mods != ("sync",) or len(s.operands) != 1:
                    raise RefError(f"barrier form `{s}` is not modelled")
                yield self.read(s.operands[0], T.u32)
                continue
            self.execute(s)

    def execute(self, s):
        handler, t = self.p.decoded[id(s)]
        if handler is None or t is None:
            raise RefError(f"instruction `{s}` is not modelled")
        handler(self, s, s.mods, s.operands, t)

    # -- data movement -------------------------------------------------------------------------
    def op_ld(self, s, mods, ops, t):
        space = s.space
        if space == "param":
            name = self.address(ops[1])
            if not (isinstance(name, tuple) and name[0] == "param"):
                raise RefError(f"`{s}`: ld.param of a non-parameter")
            self.write(ops[0], self.params[name[1]])
            return
        addr = self.address(ops[1])
        n = t.nbytes
        dsts = ops[0].items if isinstance(ops[0], Vec) else (ops[0],)
        if len(dsts) != s.vector_width:
            raise RefError(f"`{s}`: vector width does not match its operand")
        for k, d in enumerate(dsts):
            self.write(d, self.load(space, addr + k * n, n))

    def op_st(self, s, mods, ops, t):
        addr = self.address(ops[0])
        n = t.nbytes
        srcs = ops[1].items if isinstance(ops[1], Vec) else (ops[1],)
        if len(srcs) != s.vector_width:
            raise RefError(f"`{s}`: vector width does not match its operand")
        for k, v in enumerate(srcs):
            self.store(s.space, addr + k * n, n, self.read(v, t))

    def op_cvta(self, s, mods, ops, t):
        if mods[:2] != ("to", "global"):
            raise RefError(f"`{s}` is not modelled")
        self.write(ops[0], self.read(ops[1], t))      # global addresses are generic addresses

    def op_mov(self, s, mods, ops, t):
        self.write(ops[0], self.read(ops[1], t))

    def op_selp(self, s, mods, ops, t):
        p = self.read(ops[3], T.pred)
        self.write(ops[0], self.read(ops[1], t) if p else self.read(ops[2], t))

    def op_cvt(self, s, mods, ops, t):
        types = s.types
        if len(types) != 2:
            raise RefError(f"`{s}`: cvt needs two types")
        dst, src = types
        rnd = [m for m in mods if m in ROUNDINGS + INT_ROUNDINGS]
        if set(mods) - set(rnd) - {dst.name, src.name}:
            raise RefError(f"`{s}`: modifiers not modelled")
        self.write(ops[0], convert(self.read(ops[1], src), dst, src, rnd[0] if rnd else None))

    # -- comparison and selection --------------------------------------------------------------
    def op_setp(self, s, mods, ops, t):
        cmp = mods[0]
        if len(mods) != 2 or not isinstance(ops[0], Reg):
            raise RefError(f"`{s}` is not modelled")
        a, b = self.read(ops[1], t), self.read(ops[2], t)
        if t.is_float:
            r = f_compare(a, b, FMTS[t.name], cmp)
        else:
            if cmp in ("lo", "ls", "hi", "hs"):
                va, vb = a, b
            else:
                va, vb = int_value(a, t), int_value(b, t)
            r = _int_compare(va, vb, cmp)
        self.write(ops[0], 1 if r else 0)

    # -- integer and float arithmetic ----------------------------------------------------------
    def _rounding(self, s, mods, t):
        rnd = [m for m in mods if m in ROUNDINGS]
        extra = set(mods) - set(rnd) - {t.name}
        if extra:
            raise RefError(f"`{s}`: modifiers {sorted(extra)} not modelled")
        return rnd[0] if rnd else "rn"

    def _float_binary(self, s, mods, ops, t, fn):
        mode = self._rounding(s, mods, t)
        fmt = FMTS[t.name]
        self.write(ops[0], fn(self.read(ops[1], t), self.read(ops[2], t), fmt, mode))

    def op_add(self, s, mods, ops, t):
        if t.is_float:
            return self._float_binary(s, mods, ops, t, f_add)
        self._plain(s, mods, t)
        self.write(ops[0], self.read(ops[1], t) + self.read(ops[2], t))

    def op_sub(self, s, mods, ops, t):
        if t.is_float:
            return self._float_binary(s, mods, ops, t, f_sub)
        self._plain(s, mods, t)
        self.write(ops[0], self.read(ops[1], t) - self.read(ops[2], t))

    def _plain(self, s, mods, t, allowed=()):
        if set(mods) - {t.name} - set(allowed):
            raise RefError(f"`{s}`: modifiers not modelled")

    def op_mul(self, s, mods, ops, t):
        if t.is_float:
            return self._float_binary(s, mods, ops, t, f_mul)
        mode = mods[0]
        a, b = int_value(self.read(ops[1], t), t), int_value(self.read(ops[2], t), t)
        if mode == "lo":
            r = a * b
        elif mode == "hi":
            r = (a * b) >> t.bits
        elif mode == "wide":
            r = a * b
        else:
            raise RefError(f"`{s}`: mul mode not modelled")
        self.write(ops[0], r & mask(2 * t.bits if mode == "wide" else t.bits))

    def op_mad(self, s, mods, ops, t):
        mode = mods[0]
        if t.is_float:
            raise RefError(f"`{s}`: float mad is not modelled")
        a, b = int_value(self.read(ops[1], t), t), int_value(self.read(ops[2], t), t)
        if mode == "lo":
            r = a * b + self.read(ops[3], t)
            width = t.bits
        elif mode == "hi":
            r = ((a * b) >> t.bits) + self.read(ops[3], t)
            width = t.bits
        elif mode == "wide":
            wide = T.TYPES[t.name[0] + str(2 * t.bits)]
            r = a * b + self.read(ops[3], wide)
            width = 2 * t.bits
        else:
            raise RefError(f"`{s}`: mad mode not modelled")
        self.write(ops[0], r & mask(width))

    def op_fma(self, s, mods, ops, t):
        mode = self._rounding(s, mods, t)
        fmt = FMTS[t.name]
        self.write(ops[0], f_fma(self.read(ops[1], t), self.read(ops[2], t),
                                 self.read(ops[3], t), fmt, mode))

    def _minmax(self, s, mods, ops, t, want_min):
        self._plain(s, mods, t)
        a, b = self.read(ops[1], t), self.read(ops[2], t)
        if t.is_float:
            r = f_minmax(a, b, FMTS[t.name], want_min)
        else:
            va, vb = int_value(a, t), int_value(b, t)
            r = a if (va <= vb) == want_min else b
        self.write(ops[0], r)

    def op_min(self, s, mods, ops, t):
        self._minmax(s, mods, ops, t, True)

    def op_max(self, s, mods, ops, t):
        self._minmax(s, mods, ops, t, False)

    def op_neg(self, s, mods, ops, t):
        self._plain(s, mods, t)
        a = self.read(ops[1], t)
        if t.is_float:
            fmt = FMTS[t.name]
            self.write(ops[0], fmt.nan if decode(a, fmt).kind == "nan" else a ^ fmt.sign_bit)
        else:
            self.write(ops[0], -a)

    def _logic(self, s, mods, ops, t, fn):
        self._plain(s, mods, t)
        self.write(ops[0], fn(self.read(ops[1], t), self.read(ops[2], t)))

    def op_and(self, s, mods, ops, t):
        self._logic(s, mods, ops, t, lambda a, b: a & b)

    def op_or(self, s, mods, ops, t):
        self._logic(s, mods, ops, t, lambda a, b: a | b)

    def op_xor(self, s, mods, ops, t):
        self._logic(s, mods, ops, t, lambda a, b: a ^ b)

    def op_not(self, s, mods, ops, t):
        self._plain(s, mods, t)
        self.write(ops[0], ~self.read(ops[1], t))

    def op_shl(self, s, mods, ops, t):
        self._plain(s, mods, t)
        n = min(self.read(ops[2], T.u32), t.bits)
        self.write(ops[0], self.read(ops[1], t) << n)

    def op_shr(self, s, mods, ops, t):
        self._plain(s, mods, t)
        n = min(self.read(ops[2], T.u32), t.bits)
        a = self.read(ops[1], t)
        self.write(ops[0], (as_signed(a, t.bits) if t.is_signed else a) >> n)
