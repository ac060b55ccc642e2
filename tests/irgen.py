"""Random well-typed IR programs for property tests, built with ptxgen's Builder.

`programs()` is a hypothesis strategy of `Case`s: a one-kernel Module, a 1-D launch shape and
arguments. Every program is valid by construction:

* operands are drawn from registers already defined on every path to the use (values defined
  inside an `if_` or a loop body stay in that block's scope; results leave a block only through
  assignments to variables, registers defined at the top level);
* every global access is in bounds: a thread loads from its own 64-byte input slab at an
  offset aligned to the access, from a shared 256-byte table at `value & (elements - 1)`, and
  stores to 8-byte slots of its own output slab;
* `bar.sync` and the shared-memory exchange (store own slot, barrier, load a partner's slot)
  appear only where every enclosing condition and loop bound is uniform across the block:
  derived from parameters, constants and block-wide special registers, never from variables;
* floating-point values reach bit-type registers only through loads, so NaN payloads (which
  PTX does not pin down) never become observable integers; results are compared per stored slot
  with NaN == NaN in the slot's float format.

`Case.run_reference()` runs it on tests/ref_interp.py; `Case.outputs_equal(a, b)` compares two
runs' output buffers under the rule above.
"""
import dataclasses
import random
import struct
from dataclasses import dataclass, field

from hypothesis import strategies as st

from ptxgen.ir import Builder, Imm, Instr, Module, Param, ptr
from ptxgen.ir import types as T

import ref_interp

IN_SLAB = 64            # bytes of private input per thread
TABLE_BYTES = 256       # shared read-only table (gathers)
OUT_SLOTS = 24          # 8-byte output slots per thread
SLOT = 8
OUT_FILL = 0xCD         # unwritten output bytes must stay this

INTS = [T.u16, T.s16, T.u32, T.s32, T.u64, T.s64]
BITS = [T.b16, T.b32, T.b64]
FLOATS = [T.f16, T.f32, T.f64]
VALUE_TYPES = INTS + BITS + FLOATS + [T.bf16, T.pred]
LOADABLE = INTS + BITS + FLOATS + [T.bf16]
HALF = {T.u32: T.u16, T.s32: T.s16, T.u64: T.u32, T.s64: T.s32}    # mul.wide sources
ROUNDINGS = ("rn", "rz", "rm", "rp")
INT_ROUNDINGS = ("rzi", "rni", "rmi", "rpi")
INT_CMPS = ("eq", "ne", "lt", "le", "gt", "ge")
UNSIGNED_CMPS = ("lo", "ls", "hi", "hs")
FLOAT_CMPS = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu",
              "num", "nan")
F16_LIMIT = 65504.0     # cvt to f16 from wider formats is clamped first: PTX documents overflow
                        # of such conversions loosely ("~131,000 for f16"), so stay in range

INTERESTING_F32 = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-45, -1e-40, 1.17549435e-38,
                   3.4028235e38, -3.4028235e38, float("inf"), float("-inf"), float("nan"),
                   65504.0, 65520.0, 1e-8, 16777217.0, 0.1, 2147483648.0, -2147483904.0]
INTERESTING_F64 = INTERESTING_F32 + [5e-324, 1.7976931348623157e308, 1e300, 9007199254740993.0,
                                     -9.223372036854776e18, 1.8446744073709552e19]


def storage_type(t):
    """The type a register of type t is loaded and stored as (16-bit floats travel as bits)."""
    return T.b16 if t in (T.f16, T.bf16) else t


def mov_type(t):
    return T.b16 if t in (T.f16, T.bf16) else t


@dataclass
class Case:
    module: Module
    kernel: object
    grid: int
    block: int
    args: dict                      # param name -> bytes (buffers) or number (scalars)
    slot_types: dict = field(default_factory=dict)   # output slot -> set of stored types
    n_instructions: int = 0

    def __repr__(self):
        return (f"Case(kernel {self.kernel.name}: {self.n_instructions} instructions, "
                f"grid {self.grid}, block {self.block}, n={self.args.get('n')})")

    def _repr_pretty_(self, p, cycle):
        # hypothesis prints dataclasses field by field (the whole IR); the PTX goes into the
        # failure message instead (describe())
        p.text(repr(self))

    def ptx(self, kernel=None):
        from ptxgen import emit_module
        m = Module(target=self.module.target)
        m.kernels.append(kernel or self.kernel)
        return emit_module(m, verify=False)     # for failure messages: ill-formed IR too

    def describe(self):
        """The program and its scalar arguments, for failure messages."""
        scalars = {k: v for k, v in self.args.items() if not isinstance(v, bytes)}
        return (f"grid={self.grid} block={self.block} scalars={scalars}\n"
                f"inp={self.args['inp'].hex()}\ntab={self.args['tab'].hex()}\n{self.ptx()}")

    @property
    def threads(self):
        return self.grid * self.block

    def arg_list(self):
        return [self.args[p.name] for p in self.kernel.params]

    def run_reference(self, kernel=None):
        return ref_interp.run_kernel(kernel or self.kernel, self.grid, self.block, self.args)

    def outputs_equal(self, a, b):
        """First difference between two runs' buffers as text, or None when they agree."""
        for name in sorted(set(a) | set(b)):
            x, y = bytes(a[name]), bytes(b[name])
            if len(x) != len(y):
                return f"buffer {name}: {len(x)} bytes vs {len(y)}"
            if x == y:
                continue
            if name != "out":
                return f"buffer {name} differs at byte {_first_diff(x, y)}"
            for th in range(self.threads):
                for slot in range(OUT_SLOTS):
                    o = (th * OUT_SLOTS + slot) * SLOT
                    if x[o:o + SLOT] == y[o:o + SLOT]:
                        continue
                    if self._nan_equal(x[o:o + SLOT], y[o:o + SLOT], slot):
                        continue
                    t, count = self.slot_types.get(slot, (None, 0))
                    return (f"out: thread {th} slot {slot} ({t} x{count}): "
                            f"{x[o:o + SLOT].hex()} vs {y[o:o + SLOT].hex()}")
        return None

    def _nan_equal(self, x, y, slot):
        """Whether two slots differ only in NaN payloads of the float values stored there."""
        t, count = self.slot_types.get(slot, (None, 0))
        if t is None or t.name not in ref_interp.FMTS:
            return False
        fmt, n = ref_interp.FMTS[t.name], t.nbytes
        if x[n * count:] != y[n * count:]:
            return False
        for k in range(count):
            a = int.from_bytes(x[k * n:(k + 1) * n], "little")
            b = int.from_bytes(y[k * n:(k + 1) * n], "little")
            if a != b and not (ref_interp.decode(a, fmt).kind == "nan"
                               and ref_interp.decode(b, fmt).kind == "nan"):
                return False
        return True


def _first_diff(x, y):
    return next(i for i, (p, q) in enumerate(zip(x, y)) if p != q)


class Scope:
    def __init__(self, uniform):
        self.regs = []
        self.uniform = uniform      # every thread of the block executes this block alike


class Gen:
    """Draws one program. `draw` is hypothesis's draw function."""

    def __init__(self, draw, name="k", max_stmts=30):
        self.draw = draw
        self.max_stmts = max_stmts
        self.name = name

    # -- drawing helpers ---------------------------------------------------------------------
    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def chance(self, p):
        # booleans shrink to False; a weighted integer keeps shrinking toward "no"
        return self.draw(st.integers(0, 99)) < p * 100

    def int_in(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    # -- program ---------------------------------------------------------------------------
    def build(self):
        self.block = self.pick([1, 2, 4, 8, 16, 32, 64])
        self.grid = self.pick([1, 2, 3])
        self.trips = self.int_in(0, 5)
        m = Module(target="sm_90")
        params = [Param("inp", T.u64, ptr(T.b8, align=16)), Param("tab", T.u64, ptr(T.b8, align=16)),
                  Param("out", T.u64, ptr(T.b8, align=16)), Param("n", T.u32),
                  Param("sa", T.s32), Param("fa", T.f32), Param("da", T.f64), Param("ua", T.u64)]
        k = m.add_kernel(self.name, params)
        self.m, self.k = m, k
        self.b = b = Builder(k)
        self.scopes = [Scope(True)]
        self.uniform = set()        # immutable registers with block-uniform values
        self.variables = []         # assignable registers (top level)
        self.fixed = set()          # registers never to be reassigned (addresses, loop indices)
        self.slot_types = {}
        self.next_slot = 0
        self.shared_var = None
        self.loop_depth = 0

        pin, ptab, pout = b.param("inp"), b.param("tab"), b.param("out")
        self.ptab = ptab
        tid = b.special("tid.x")
        self.tid = tid
        gid = b.global_index()
        self.ain = b.element_addr(pin, gid, IN_SLAB, name="ain")
        self.aout = b.element_addr(pout, gid, OUT_SLOTS * SLOT, name="aout")
        self.fixed.update({pin, ptab, pout, self.ain, self.aout})
        for r in (tid, gid):
            self.add(r, uniform=False)
        for name in ("n", "sa", "fa", "da", "ua"):
            self.add(b.param(name), uniform=True)
        self.n_reg = b.param("n")
        if self.chance(0.5):
            self.add(b.special("ctaid.x"), uniform=True)
        if self.chance(0.3):
            self.add(b.special("ntid.x"), uniform=True)

        self.block_stmts(self.int_in(1, self.max_stmts))
        self.epilogue()
        b.ret()
        args = self.arguments()
        n_instr = sum(1 for s in k.body if isinstance(s, Instr))
        return Case(m, k, self.grid, self.block, args, self.slot_types, n_instr)

    def arguments(self):
        seed = self.draw(st.integers(0, 2**32 - 1))
        rng = random.Random(seed)
        threads = self.grid * self.block
        return {
            "inp": bytes(fill_bytes(rng, threads * IN_SLAB)),
            "tab": bytes(fill_bytes(rng, TABLE_BYTES)),
            "out": bytes([OUT_FILL]) * (threads * OUT_SLOTS * SLOT),
            "n": self.trips,
            "sa": rng.choice([0, 1, -1, 7, -2**31, 2**31 - 1, rng.randrange(-2**31, 2**31)]),
            "fa": struct.unpack("<f", struct.pack("<f", rng.choice(INTERESTING_F32)))[0],
            "da": rng.choice(INTERESTING_F64),
            "ua": rng.choice([0, 1, 2**64 - 1, 2**63, rng.randrange(2**64)]),
        }

    # -- scopes and values -----------------------------------------------------------------
    def add(self, r, uniform):
        self.scopes[-1].regs.append(r)
        if uniform:
            self.uniform.add(r)
        return r

    def visible(self, pred=lambda r: True):
        return [r for s in self.scopes for r in s.regs if pred(r)]

    def of_type(self, t, compatible=False):
        if compatible:
            return self.visible(lambda r: r.type == t or (
                T.compatible(r.type, t) and not r.type.is_float and not t.is_float
                and r.type != T.pred))
        return self.visible(lambda r: r.type == t)

    @property
    def in_uniform_code(self):
        return all(s.uniform for s in self.scopes)

    def value(self, t, compatible=False):
        """A register of type t (or of a compatible integer/bit type): an existing one, or a
        new one from a constant, a conversion or a load."""
        pool = self.of_type(t, compatible)
        if pool and self.chance(0.85):
            return self.pick(pool)
        return self.fresh(t)

    def is_uniform(self, *xs):
        return all(not hasattr(x, "type") or isinstance(x, Imm) or x in self.uniform
                   for x in xs)

    def fresh(self, t):
        how = self.pick(["const", "load", "cvt"] if t != T.pred else ["setp"])
        if how == "setp":
            return self.new_setp()
        if how == "load" and t in LOADABLE:
            return self.add(self.load(t), uniform=False)
        if how == "cvt" and t not in BITS and t != T.bf16:
            src_types = [s for s in INTS + FLOATS if self.of_type(s) and s != t]
            if src_types:
                src = self.pick(self.of_type(self.pick(src_types)))
                r = self.convert(t, src)
                if r is not None:
                    return self.add(r, uniform=self.is_uniform(src))
        return self.add(self.const(t), uniform=True)

    def const(self, t):
        b = self.b
        if t.is_float and t.bits == 16 or t == T.bf16:
            r = b.reg(t)
            b.mov(Imm(self.int_in(0, 0xFFFF), T.b16), type=T.b16, out=r)
            return r
        return b.mov(self.imm(t), type=t)

    def imm(self, t):
        if t == T.f32:
            v = self.pick(INTERESTING_F32 + [None])
            if v is None:
                v = struct.unpack("<f", struct.pack("<I", self.int_in(0, 2**32 - 1)))[0]
            return Imm(v, T.f32)
        if t == T.f64:
            v = self.pick(INTERESTING_F64 + [None])
            if v is None:
                v = struct.unpack("<d", struct.pack("<Q", self.int_in(0, 2**64 - 1)))[0]
            return Imm(v, T.f64)
        if t.is_signed:
            lo, hi = -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
        else:
            lo, hi = 0, (1 << t.bits) - 1
        v = self.pick([0, 1, -1, 2, 3, 7, 8, 31, 32, 33, 63, 64, lo, hi, None])
        if v is None or not lo <= v <= hi:
            v = self.int_in(lo, hi)
        return Imm(v, t)

    # -- statements --------------------------------------------------------------------------
    def block_stmts(self, n):
        for _ in range(n):
            self.statement()

    def statement(self):
        kinds = ["arith", "arith", "arith", "assign", "assign", "load", "store", "if", "loop",
                 "var", "guarded", "gather", "exchange", "barrier", "setp"]
        kind = self.pick(kinds)
        depth = len(self.scopes) - 1
        if kind == "arith":
            t = self.pick(VALUE_TYPES)
            r = self.op(t)
            if r is not None:
                self.add(r, uniform=self._last_uniform)
        elif kind == "setp":
            self.new_setp()
        elif kind == "var" and depth == 0:
            t = self.pick([x for x in VALUE_TYPES if x != T.pred])
            src = self.value(t)
            v = self.b.reg(t, "v")
            self.b.mov(src, type=mov_type(t), out=v)
            self.variables.append(v)
            self.add(v, uniform=False)
        elif kind in ("assign", "guarded") and self.variables:
            v = self.pick(self.variables)
            if kind == "guarded":
                # only the instruction writing the variable is guarded: operands it needs are
                # computed unconditionally, so they are defined wherever they are used
                p = self.value(T.pred)
                negate = self.chance(0.5)
                if self.op(v.type, out=v) is not None:
                    last = self.b.block[-1]
                    assert isinstance(last, Instr) and v in last.defs() and last.guard is None
                    last.guard, last.guard_negated = p, negate
            else:
                self.op(v.type, out=v)
        elif kind == "load":
            self.add(self.load(self.pick(LOADABLE)), uniform=False)
        elif kind == "gather":
            self.add(self.gather(self.pick([t for t in LOADABLE])), uniform=False)
        elif kind == "store":
            self.store(self.pick(self.visible(lambda r: r not in self.fixed)))
        elif kind == "if" and depth < 3:
            self.if_stmt()
        elif kind == "loop" and self.loop_depth < 2 and depth < 3:
            self.loop_stmt()
        elif kind == "exchange" and self.in_uniform_code:
            self.exchange()
        elif kind == "barrier" and self.in_uniform_code:
            self.b.bar_sync()

    def if_stmt(self):
        p = self.value(T.pred)
        uniform = p in self.uniform
        with self.b.if_(p, negate=self.chance(0.5)):
            self.scopes.append(Scope(uniform))
            self.block_stmts(self.int_in(1, 6))
            self.scopes.pop()

    def loop_stmt(self):
        b = self.b
        kind = self.pick(["const", "param", "reg"])
        unroll = self.pick([1, 2, 3, 4])
        typ = self.pick([T.s32, T.u32])
        if kind == "const":
            start = self.int_in(-2, 3)
            step = self.int_in(1, 3)
            stop = start + step * self.int_in(0, 4) - self.int_in(0, step - 1)
            uniform = True
        elif kind == "param":
            start, step = self.int_in(0, 2), self.int_in(1, 2)
            stop = self.n_reg
            uniform = True
        else:
            # a trip count that differs per thread: (tid & 3); never holds a barrier
            start, step = 0, 1
            stop = b.and_(self.tid, 3, type=T.u32, name="trip")
            uniform = False
        if typ == T.u32 and isinstance(start, int) and start < 0:
            start = 0
        if isinstance(stop, int) and typ == T.u32 and stop < 0:
            stop = 0
        self.loop_depth += 1
        with b.for_range(start, stop, step, unroll=unroll, type=typ, name="i") as i:
            self.fixed.add(i)
            self.scopes.append(Scope(uniform))
            self.add(i, uniform=uniform)
            self.block_stmts(self.int_in(1, 6))
            self.scopes.pop()
        self.loop_depth -= 1

    # -- memory ------------------------------------------------------------------------------
    def load(self, t):
        st_t = storage_type(t)
        n = st_t.nbytes
        vec = 1
        if n in (4, 8) and self.chance(0.2):
            vec = self.pick([2, 4] if n == 4 else [2])
        off = self.int_in(0, IN_SLAB // (n * vec) - 1) * n * vec
        out = tuple(self.b.reg(t) for _ in range(vec)) if vec > 1 else self.b.reg(t)
        self.b.ld("global", st_t, ir_addr(self.ain, off), vec=vec, out=out)
        if vec > 1:
            for r in out[1:]:
                self.add(r, uniform=False)
            return out[0]
        return out

    def gather(self, t):
        b = self.b
        st_t = storage_type(t)
        n = st_t.nbytes
        src = self.value(T.u32, compatible=True)
        idx = b.and_(src, TABLE_BYTES // n - 1, type=T.u32, name="idx")
        addr = b.element_addr(self.ptab, idx, n)
        r = b.reg(t)
        b.ld("global", st_t, addr, out=r)
        return r

    def store(self, r):
        if self.next_slot >= OUT_SLOTS:
            return
        b = self.b
        if r.type == T.pred:
            r = b.selp(self.imm(T.u32), self.imm(T.u32), r, type=T.u32)
        slot = self.next_slot
        self.next_slot += 1
        st_t = storage_type(r.type)
        if st_t.nbytes == 4 and self.chance(0.2):
            other = self.value(r.type)
            self.slot_types[slot] = (r.type, 2)
            b.st("global", ir_addr(self.aout, slot * SLOT), (r, other), type=st_t)
            return
        self.slot_types[slot] = (r.type, 1)
        b.st("global", ir_addr(self.aout, slot * SLOT), r, type=st_t)

    def exchange(self):
        """Each thread stores a value in its own shared slot; after a barrier it reads a
        partner's slot, (tid + c) mod block or tid ^ c."""
        b = self.b
        if self.shared_var is None:
            self.shared_var = b.shared("xch", T.b8, self.block * SLOT, align=8)
        t = self.pick([x for x in LOADABLE])
        v = self.value(t)
        st_t = storage_type(t)
        base = b.address_of(self.shared_var)
        mine = b.mad(self.tid, SLOT, base, type=T.u32, name="mine")
        c = self.int_in(0, self.block - 1)
        mix = b.xor(self.tid, c, type=T.u32) if self.chance(0.5) else b.add(self.tid, c, type=T.u32)
        partner = b.and_(mix, self.block - 1, type=T.u32, name="partner")
        theirs = b.mad(partner, SLOT, base, type=T.u32, name="theirs")
        b.bar_sync()                        # earlier readers of the slots are done
        b.st("shared", ir_addr(mine, 0), v, type=st_t)
        b.bar_sync()
        r = b.reg(v.type)
        b.ld("shared", st_t, ir_addr(theirs, 0), out=r)
        self.add(r, uniform=False)

    def epilogue(self):
        for v in self.variables:
            self.store(v)
        for r in self.visible(lambda r: r not in self.fixed)[::-1]:
            if self.next_slot >= OUT_SLOTS or not self.chance(0.5):
                break
            self.store(r)

    # -- operations --------------------------------------------------------------------------
    def new_setp(self):
        t = self.pick(INTS + FLOATS + BITS)
        a, c = self.operand(t, allow_imm=t not in (T.f16,)), None
        if t in BITS:
            cmp = self.pick(["eq", "ne"])
        elif t.is_float:
            cmp = self.pick(FLOAT_CMPS)
        else:
            cmp = self.pick(INT_CMPS + (UNSIGNED_CMPS if not t.is_signed else ()))
        c = self.operand(t, allow_imm=t != T.f16)
        if isinstance(a, Imm) and isinstance(c, Imm):
            a = self.value(t, compatible=True)
        p = self.b.setp(cmp, a, c, type=t)
        return self.add(p, uniform=self.is_uniform(a, c))

    def operand(self, t, allow_imm=True):
        if allow_imm and t != T.pred and t != T.bf16 and self.chance(0.25):
            if t in BITS:
                return Imm(self.imm(T.TYPES["u" + str(t.bits)]).value, t)
            return self.imm(t)
        return self.value(t, compatible=True)

    def op(self, t, out=None):
        """Emit one operation producing type t (into `out` when given); returns the result
        register, or None when no operation of that type applies. Sets _last_uniform."""
        self._last_uniform = False
        kinds = {
            "int": ["add", "sub", "mul", "mulhi", "wide", "mad", "madhi", "madwide", "min", "max",
                    "and", "or", "xor", "shl", "shr", "neg", "selp", "cvt", "mov"],
            "bits": ["and", "or", "xor", "not", "shl", "shr", "selp", "reinterpret"],
            "float": ["add", "sub", "mul", "fma", "min", "max", "neg", "selp", "cvt", "mov",
                      "reinterpret"],
            "bf16": ["cvt", "selp", "mov"],
            "pred": ["and", "or", "xor", "not", "setp", "mov"],
        }
        fam = ("int" if t in INTS else "bits" if t in BITS else "bf16" if t == T.bf16
               else "pred" if t == T.pred else "float")
        kind = self.pick(kinds[fam])
        b = self.b
        if kind == "setp":
            if out is not None:
                p = self.new_setp()
                b.mov(p, type=T.pred, out=out)
                return out
            return self.new_setp()
        if kind in ("wide", "madwide") and t not in HALF:
            kind = "mul"
        if kind == "neg" and fam == "int" and not t.is_signed:
            kind = "sub"
        if kind == "reinterpret":
            # bits -> float, or int -> bits, of the same width: never float -> bits
            if fam == "float":
                src = self.value(T.TYPES[f"b{t.bits}"], compatible=True)
            else:
                src = self.value(T.TYPES[f"u{t.bits}"], compatible=True)
            dst = out if out is not None else b.reg(t)
            b.mov(src, type=T.TYPES[f"b{t.bits}"], out=dst)
            self._last_uniform = self.is_uniform(src)
            return dst
        if kind == "mov":
            src = self.value(t)
            # the builder picks the mov type from the register (b16 for 16-bit floats)
            r = b.mov(src, out=out if out is not None else b.reg(t))
            self._last_uniform = self.is_uniform(src)
            return r
        if kind == "cvt":
            srcs = [s for s in INTS + FLOATS if s != t and (t != T.bf16 or s == T.f32)]
            if t == T.f32 and self.of_type(T.bf16):
                srcs.append(T.bf16)
            src = self.value(self.pick(srcs))
            r = self.convert(t, src, out=out)
            if r is None:
                return None
            self._last_uniform = self.is_uniform(src)
            return r
        if kind == "selp":
            a, c = self.operand(t), self.operand(t)
            p = self.value(T.pred)
            r = b.selp(a, c, p, type=mov_type(t) if t != T.pred else t,
                       out=out if out is not None else b.reg(t))
            self._last_uniform = self.is_uniform(a, c, p)
            return r
        if kind == "not":
            a = self.operand(t, allow_imm=False)
            dst = out if out is not None else b.reg(t)
            b.emit(Instr("not", (t.name if t == T.pred else f"b{t.bits}",), (dst, a)))
            self._last_uniform = self.is_uniform(a)
            return dst
        if fam == "pred":
            a, c = self.value(T.pred), self.value(T.pred)
            r = getattr(b, {"and": "and_", "or": "or_", "xor": "xor"}[kind])(a, c, type=T.pred,
                                                                              out=out)
            self._last_uniform = self.is_uniform(a, c)
            return r
        if fam == "float":
            return self.float_op(kind, t, out)
        return self.int_op(kind, t, out)

    def int_op(self, kind, t, out):
        b = self.b
        if kind in ("shl", "shr"):
            a = self.operand(t, allow_imm=False)
            amount = (Imm(self.int_in(0, t.bits + 3), T.u32) if self.chance(0.6)
                      else self.value(T.u32, compatible=True))
            r = getattr(b, kind)(a, amount, type=t, out=out)
            self._last_uniform = self.is_uniform(a, amount)
            return r
        if kind in ("wide", "madwide"):
            h = HALF[t]
            x, y = self.operand(h, allow_imm=False), self.operand(h)
            if kind == "wide":
                r = b.mul(x, y, mode="wide", type=h, out=out)
                self._last_uniform = self.is_uniform(x, y)
            else:
                c = self.operand(t)
                r = b.mad(x, y, c, mode="wide", type=h, out=out)
                self._last_uniform = self.is_uniform(x, y, c)
            return r
        x = self.operand(t, allow_imm=False)
        y = self.operand(t)
        if kind in ("mad", "madhi"):
            c = self.operand(t)
            r = b.mad(x, y, c, mode="lo" if kind == "mad" else "hi", type=t, out=out)
            self._last_uniform = self.is_uniform(x, y, c)
            return r
        if kind in ("mul", "mulhi"):
            r = b.mul(x, y, mode="lo" if kind == "mul" else "hi", type=t, out=out)
        elif kind == "neg":
            r = b.neg(x, type=t, out=out)
        else:
            fn = {"add": b.add, "sub": b.sub, "min": b.min, "max": b.max, "and": b.and_,
                  "or": b.or_, "xor": b.xor}[kind]
            r = fn(x, y, type=t, out=out)
        self._last_uniform = self.is_uniform(x, y)
        return r

    def float_op(self, kind, t, out):
        b = self.b
        imm_ok = t != T.f16
        rnd = "rn" if t == T.f16 else self.pick(ROUNDINGS)
        x = self.value(t)
        y = self.operand(t, allow_imm=imm_ok)
        if kind == "fma":
            z = self.operand(t, allow_imm=imm_ok)
            r = b.fma(x, y, z, type=t, out=out, rounding=rnd)
            self._last_uniform = self.is_uniform(x, y, z)
            return r
        if kind == "neg":
            r = b.neg(x, type=t, out=out)
        elif kind in ("min", "max"):
            r = getattr(b, kind)(x, y, type=t, out=out)
        else:
            r = b._arith(kind, x, y, type=t, out=out, extra=(rnd,))
        self._last_uniform = self.is_uniform(x, y)
        return r

    def convert(self, t, src, out=None):
        """cvt to t from src's type with a legal rounding; None when the pair is not one the
        programs use."""
        b = self.b
        s = src.type
        if t == T.bf16:
            if s != T.f32:
                return None
            return b.cvt(t, src, rounding=self.pick(["rn", "rz"]), out=out)
        if s == T.bf16:
            if t != T.f32:
                return None
            return b.cvt(t, src, rounding="", out=out)
        if t == T.f16 and s in INTS and s != T.s16:
            return None                     # out-of-range integer -> f16 is loosely specified
        if t == T.f16 and s in (T.f32, T.f64):
            src = b.max(b.min(src, F16_LIMIT, type=s), -F16_LIMIT, type=s)
        if t.is_float and s.is_float:
            if t.bits > s.bits:
                rnd = ""
            elif t.bits < s.bits:
                rnd = self.pick(ROUNDINGS)
            elif t in (T.f32, T.f64):
                rnd = self.pick(INT_ROUNDINGS)      # round to an integral value, same format
                return b.cvt(t, src, rounding=rnd, out=out)
            else:
                return None
        elif t.is_float:
            rnd = self.pick(ROUNDINGS)
        elif s.is_float:
            rnd = self.pick(INT_ROUNDINGS)
        else:
            rnd = ""
        if t == src.type:
            return None
        return b.cvt(t, src, rounding=rnd, out=out)


def ir_addr(base, off):
    from ptxgen.ir import Addr
    return Addr(base, off)


def fill_bytes(rng, n):
    """Input bytes: a mix of small integers, special float bit patterns and random bytes, laid
    out in 8-byte cells so that loads of every width see interesting values."""
    out = bytearray()
    specials32 = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000,
                  0x7FC00000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x4B800001, 0x3C003C00,
                  0x7BFF7C00, 0xFFFFFFFF, 0x7FFFFFFF]
    specials64 = [0x0, 0x8000000000000000, 0x3FF0000000000000, 0x7FF0000000000000,
                  0x0000000000000001, 0x7FEFFFFFFFFFFFFF, 0xFFF8000000000000,
                  0x43E0000000000000, 0xC3E0000000000001, 0x3FF0000000000001]
    while len(out) < n:
        k = rng.randrange(6)
        if k == 0:
            out += rng.choice(specials64).to_bytes(8, "little")
        elif k == 1:
            out += rng.choice(specials32).to_bytes(4, "little") + \
                rng.choice(specials32).to_bytes(4, "little")
        elif k == 2:
            out += rng.randrange(-40, 40).to_bytes(8, "little", signed=True)
        elif k == 3:
            out += struct.pack("<ff", rng.uniform(-100, 100), rng.uniform(-1e6, 1e6))
        elif k == 4:
            out += struct.pack("<d", rng.uniform(-1e3, 1e3))
        else:
            out += bytes(rng.randrange(256) for _ in range(8))
    return out[:n]


@st.composite
def programs(draw, max_stmts=30):
    return Gen(draw, max_stmts=max_stmts).build()


def merged_module(cases, target="sm_90"):
    """One module holding every case's kernel (renamed k0, k1, ...) for a single ptxas call."""
    m = Module(target=target)
    for i, c in enumerate(cases):
        m.kernels.append(dataclasses.replace(c.kernel, name=f"k{i}"))
    return m


# -- the properties, shared by tests/test_property_ir.py and benchmarks/reliability_cpu.py -----
ARCHS = ("sm_80", "sm_90")


def check_assembles(cases, archs=ARCHS):
    """Every program passes the verifier, and ptxas accepts all of them, batched into one module
    per architecture."""
    from ptxgen import emit_module, toolchain
    from ptxgen.ir.verify import verify_kernel
    for c in cases:
        verify_kernel(c.kernel)
    m = merged_module(cases)
    for arch in archs:
        toolchain.assemble(emit_module(m, arch), arch)


def check_round_trip(case):
    """PTX printed for the program and parsed back computes what the program computes."""
    from ptxgen import emit_module
    from ptxgen.parse import parse_ptx
    want = case.run_reference()
    parsed = parse_ptx(emit_module(case.module), "generated.ptx")
    got = case.run_reference(parsed.kernel(case.kernel.name))
    diff = case.outputs_equal(want, got)
    assert diff is None, f"emit -> parse changed the result: {diff}\n{case.describe()}"


def check_schedule(case, schedule=None, run=None):
    """Scheduling for sm_90 changes no result. `run(case, kernel)` executes a kernel (the
    reference interpreter by default; the emulator when given)."""
    if schedule is None:
        from ptxgen.reorder import schedule_kernel

        def schedule(k):
            return schedule_kernel(k, "sm_90")
    run = run or (lambda c, k: c.run_reference(k))
    want = run(case, case.kernel)
    scheduled = schedule(case.kernel)
    try:
        got = run(case, scheduled)
    except ref_interp.RefError as e:
        raise AssertionError(f"the scheduled kernel is ill-formed: {e}\n{case.describe()}\n"
                             f"scheduled:\n{case.ptx(scheduled)}") from None
    diff = case.outputs_equal(want, got)
    assert diff is None, f"scheduling changed the result: {diff}\n{case.describe()}\n" \
        f"scheduled:\n{case.ptx(scheduled)}"


def emulator():
    """ptxgen.emulate, or None while the emulator is not there."""
    import importlib.util
    if importlib.util.find_spec("ptxgen.emu") is None:
        return None
    import ptxgen
    fn = getattr(ptxgen, "emulate", None)
    if fn is None:
        try:
            from ptxgen.emu import emulate as fn
        except ImportError:
            return None
    return fn


def run_emulator(case, kernel=None, via_text=False):
    """Run a kernel of the case on ptxgen's emulator; {buffer name: bytes} like the reference.
    With via_text the emulator gets the emitted PTX instead of the Module."""
    import numpy as np
    from ptxgen import emit_module
    emulate = emulator()
    kernel = kernel or case.kernel
    m = Module(target=case.module.target)
    m.kernels.append(kernel)
    src = emit_module(m) if via_text else m
    arrays, args = {}, []
    for p in kernel.params:
        a = case.args[p.name]
        if p.pointer is not None:
            arrays[p.name] = np.frombuffer(a, dtype=np.uint8).copy()
            args.append(arrays[p.name])
        else:
            args.append(np.dtype(_NUMPY[p.type.name]).type(a))
    emulate(src, kernel.name, (case.grid, 1, 1), (case.block, 1, 1), *args,
            shared_bytes=0)
    return {name: arr.tobytes() for name, arr in arrays.items()}


_NUMPY = {"u32": "uint32", "s32": "int32", "u64": "uint64", "s64": "int64", "f32": "float32",
          "f64": "float64"}


def check_emulator(case, via_text=False):
    """The emulator computes what the reference interpreter computes."""
    want = case.run_reference()
    got = run_emulator(case, via_text=via_text)
    diff = case.outputs_equal(want, got)
    assert diff is None, f"emulator differs from the reference: {diff}\n{case.describe()}"
