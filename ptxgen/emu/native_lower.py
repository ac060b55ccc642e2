"""The LLVM lowering of ptxgen.llvm retargeted at the host, for the emulator's native engine.

One host function runs one thread from an entry point to the next CTA barrier or its exit:

    i32 thread(i8* regs, i64* ctx, i32 entry, i32 t)

`regs` is the thread's register block (8 bytes per register, the layout of HostLayout): the
function loads every register from it on entry and stores them back at a barrier, so threads of a
CTA run one after another between barriers (thread fusion, as GPU Ocelot does). It returns 0 when
the thread exits, k > 0 when it stops at barrier k (the next call resumes there with entry=k),
and -2 on an invalid access (ctx[FAULT] holds the address, ctx[FAULT_LINE] the PTX line).

The table rows are the same; the rules that differ on the host are overridden here with the
interpreter's semantics (ptxgen.emu): float min/max, float→int conversions, integer division
by zero. Anything the host cannot do bit-identically to the interpreter (NVVM intrinsics, inline
PTX, rounding modes other than nearest, warp-level instructions) fails to lower, and the
interpreter runs the kernel instead.
"""
from llvmlite import ir

from ..errors import LoweringError
from ..ir import types as T
from ..ir.instr import Instr
from ..ir.values import Addr, Reg, Sym
from ..llvm.lower import RULES, Body
from ..llvm.values import I1, I8, I32, I64, Frame, ltype, resize, to_bits

# ctx: i64 fields
NTID, CTAID, NCTAID = 0, 3, 6
SHARED_BASE, SHARED_SIZE, LOCAL_BASE, LOCAL_SIZE, PARAM_BASE, CONST_BASE = range(9, 15)
FAULT, FAULT_LINE, N_RANGES, RANGES = 15, 16, 17, 18       # RANGES: (lo, hi) pairs follow
GLOBAL_VARS = 64                                            # host addresses of .global vars
CTX_WORDS = 128
MAX_RANGES = (GLOBAL_VARS - RANGES) // 2
_LIKELY = [1 << 20, 1]                # branch weights of a check that passes
_WRITTEN = (CTAID, CTAID + 1, CTAID + 2, FAULT, FAULT_LINE)
_SPECIAL = {"ntid": NTID, "ctaid": CTAID, "nctaid": NCTAID}


class HostLayout:
    """Register block offsets for a kernel: every register the body mentions, 8 bytes each."""

    def __init__(self, kernel):
        regs = {}
        for r in kernel.regs:
            regs.setdefault(r.name, r)
        for s in kernel.body:
            for r in getattr(s, "regs", ()):
                regs.setdefault(r.name, r)
            if isinstance(s, Instr):
                for r in s.defs() + s.uses():
                    regs.setdefault(r.name, r)
        self.regs = list(regs.values())
        self.offset = {r.name: 8 * i for i, r in enumerate(self.regs)}
        self.stride = 8 * max(1, len(self.regs))


class HostFrame(Frame):
    def __init__(self, kernel, func, builder, prog, layout, n_ranges):
        super().__init__(kernel, func, builder, {}, "host")
        self.params = {p.name: (p, None) for p in kernel.params}
        self.prog, self.layout = prog, layout
        self.regs_arg, self.ctx, self.entry_arg, self.t, *self.tid = func.args
        self.global_var_index = {v.name: i for i, v in enumerate(prog.global_vars)}
        self.n_ranges = n_ranges
        self.origin = pointer_origins(kernel)

    def field(self, i):
        v = self.b.load(self.b.gep(self.ctx, [ir.Constant(I64, i)]))
        # fixed for the launch (only the block index and the fault fields are written)
        return v if i in _WRITTEN else self.invariant(v)

    def invariant(self, load):
        """Mark a load of what no code of the launch writes (the launch's fields, parameter
        values): without it, every store to global memory could alias it, and the range checks
        would reload their bounds at every access."""
        md = self.func.module.add_metadata([])
        load.set_metadata("invariant.load", md)
        return load

    def call(self, name, ret, *values):
        if name.startswith("llvm.nvvm."):
            self.fail(f"{name} has no host equivalent")
        return super().call(name, ret, *values)

    def special(self, op):
        b = self.b
        base, _, axis = op.name.partition(".")
        k = "xyz".index(axis) if axis in ("x", "y", "z") else 0
        t = b.zext(self.t, I64)
        if base == "tid":                   # counted by the CTA loop (no divisions)
            return self.tid[k]
        if base in _SPECIAL:
            v = self.field(_SPECIAL[base] + k)
        elif base == "laneid":
            v = b.urem(t, ir.Constant(I64, 32))
        elif base == "warpid":
            v = b.udiv(t, ir.Constant(I64, 32))
        else:
            self.fail(f"%{op.name} is not available to the native engine")
        return b.trunc(v, I32)

    def param_value(self, name, t):
        off, p = self.prog.params[name]
        return self.invariant(self.b.load(self._param_ptr(off, ltype(t)), align=1))

    def _param_ptr(self, off, elem):
        """The parameter bytes live in ctx after its CTX_WORDS fields (see native.run_native),
        so their loads are as dereferenceable and alias-free as the fields'."""
        b = self.b
        p = b.gep(b.bitcast(self.ctx, ir.PointerType(I8)), [ir.Constant(I64, 8 * CTX_WORDS + off)])
        return b.bitcast(p, ir.PointerType(elem))

    def var_address(self, name, bits):
        space, addr = self.prog.symbol(name)
        if space == "global":
            v = self.field(GLOBAL_VARS + self.global_var_index[name])
        else:
            v = ir.Constant(I64, addr)
        return resize(self.b, v, bits, False)

    # -- addresses: host pointers, checked against the launch's ranges ----------------------
    def pointer(self, addr, space, elem):
        if not isinstance(addr, Addr):
            self.fail(f"operand {addr} is not an address")
        b = self.b
        base = addr.base
        if isinstance(base, Sym):
            sp, off = self.prog.symbol(base.name)
            if sp == "param":
                return self._param_ptr(off + addr.offset, elem)
            v = self.var_address(base.name, 64)
            space = sp if space == "generic" and sp != "global" else space
        elif isinstance(base, Reg):
            v = resize(b, to_bits(b, self.read(base, T.TYPES[f"u{base.type.bits}"]
                                               if base.type.bits in (32, 64) else T.u64)),
                       64, False)
        else:
            self.fail(f"address {addr} has no register or variable base")
        if addr.offset:
            v = b.add(v, ir.Constant(I64, addr.offset))
        width = _width(elem)
        if space == "const":
            self.fail(".const accesses are not available to the native engine")
        if space in ("shared", "local"):
            size = SHARED_SIZE if space == "shared" else LOCAL_SIZE
            self._check(b.icmp_unsigned("<=", b.add(v, ir.Constant(I64, width)),
                                        self.field(size)), v, width)
            v = b.add(v, self._space_base(space))
        elif space in ("global", "generic"):
            # ranges 0 and 1 (shared, local buffers) are reached through generic addresses only
            order = list(range(0 if space == "generic" else 2, self.n_ranges))
            first = self.origin.get(base.name) if isinstance(base, Reg) else None
            if first is not None and 2 + first in order:   # its own buffer first
                order.remove(2 + first)
                order.insert(0, 2 + first)
            self._check_ranges(order, v, width)
        else:
            self.fail(f".{space} accesses are not available to the native engine")
        return b.inttoptr(v, ir.PointerType(elem))

    def _check_ranges(self, ranges, v, width):
        """Leave with -2 unless [v, v+width) lies in one of the ranges and v is aligned: one
        subtraction and one unsigned comparison per range, tried in turn (the limits are
        loop-invariant, so LLVM computes them once per launch)."""
        b = self.b
        found = self.func.append_basic_block("inrange")
        w = ir.Constant(I64, width)
        for i in ranges:
            lo, hi = self.field(RANGES + 2 * i), self.field(RANGES + 2 * i + 1)
            size = b.sub(hi, lo)
            # v - lo < size - width + 1, or never when the range is shorter than the access
            lim = b.select(b.icmp_unsigned(">=", size, w),
                           b.add(b.sub(size, w), ir.Constant(I64, 1)), ir.Constant(I64, 0))
            nxt = self.func.append_basic_block("range")
            # weighted: LLVM keeps the chain of branches (the first one is taken nearly always)
            # instead of computing every comparison and or-ing them
            b.cbranch(b.icmp_unsigned("<", b.sub(v, lo), lim), found, nxt).set_weights(_LIKELY)
            b.position_at_end(nxt)
        self._fault(v)
        b.position_at_end(found)
        self._check(ir.Constant(I1, 1), v, width)

    def _fault(self, addr):
        b = self.b
        b.store(addr, b.gep(self.ctx, [ir.Constant(I64, FAULT)]))
        line = self.instr.line if self.instr is not None else 0
        b.store(ir.Constant(I64, line), b.gep(self.ctx, [ir.Constant(I64, FAULT_LINE)]))
        b.ret(ir.Constant(I32, -2))

    def _space_base(self, space):
        if space == "local":
            return b_add(self.b, self.field(LOCAL_BASE),
                         self.b.mul(self.b.zext(self.t, I64), self.field(LOCAL_SIZE)))
        return self.field({"shared": SHARED_BASE, "const": CONST_BASE}[space])

    def _check(self, ok, addr, width):
        """Leave with -2 (ctx[FAULT] = address) unless ok and the address is aligned."""
        b = self.b
        aligned = b.icmp_unsigned("==", b.and_(addr, ir.Constant(I64, width - 1)),
                                  ir.Constant(I64, 0))
        good = b.and_(ok, aligned)
        bad_blk = self.func.append_basic_block("fault")
        cont = self.func.append_basic_block("ok")
        b.cbranch(good, cont, bad_blk).set_weights(_LIKELY)
        with b.goto_block(bad_blk):
            self._fault(addr)
        b.position_at_end(cont)


def b_add(b, v, off):
    return b.add(v, ir.Constant(I64, off)) if off else v


def _width(elem):
    if isinstance(elem, ir.VectorType):
        return elem.count * _width(elem.element)
    return {I8: 1}.get(elem, None) or max(1, _bits(elem) // 8)


def _bits(t):
    if isinstance(t, ir.IntType):
        return t.width
    return {ir.HalfType(): 16, ir.FloatType(): 32, ir.DoubleType(): 64}[t]


class HostBody(Body):
    """Entry dispatch, register save/restore at barriers, host rules."""

    def __init__(self, frame):
        super().__init__(frame)
        from .native_rules import HOST_RULES
        self.rules = dict(RULES, **HOST_RULES)
        self.resume = []

    def _reg_ptr(self, r):
        b = self.f.b
        p = b.gep(self.f.regs_arg, [ir.Constant(I64, self.f.layout.offset[r.name])])
        return b.bitcast(p, ir.PointerType(I8 if r.type.kind == "pred" else
                                           ir.IntType(r.type.bits)))

    def enter(self, start):
        b = self.f.b
        for r in self.f.layout.regs:        # allocas first, zero like the interpreter's
            st = self.f.slot(r).type.pointee
            b.store(ir.Constant(st, 0), self.f.slot(r))
        self.live = live_after_barriers(self.f.kernel, self.f.layout)
        self.switch = b.switch(self.f.entry_arg, start)

    def leave(self):
        self.f.b.ret(ir.Constant(I32, 0))

    def barrier(self, f, ins, row):
        if ins.guard is not None or "red" in ins.mods or ins.mods[:1] == ("warp",) or \
                "arrive" in ins.mods or len(ins.operands) != 1:
            f.fail("only bar.sync of every thread runs on the native engine")
        b = f.b
        live = self.live[id(ins)]           # only what is read after the barrier travels
        for r in live:
            v = b.load(f.slot(r))
            b.store(b.zext(v, I8) if r.type.kind == "pred" else v, self._reg_ptr(r))
        k = len(self.resume) + 1
        b.ret(ir.Constant(I32, k))
        blk = f.func.append_basic_block(f"resume{k}")
        self.resume.append(blk)
        self.switch.add_case(ir.Constant(I32, k), blk)
        b.position_at_end(blk)
        for r in live:
            v = b.load(self._reg_ptr(r))
            b.store(b.trunc(v, I1) if r.type.kind == "pred" else v, f.slot(r))


def live_after_barriers(kernel, layout):
    """{id(barrier instruction): [registers live after it]}: backward liveness over the
    statement list (a guarded definition does not kill; bit sets as ints)."""
    from ..ir.instr import Label
    from ..ir.values import LabelRef
    body = kernel.body
    index = {r.name: i for i, r in enumerate(layout.regs)}
    labels = {st.name: i for i, st in enumerate(body) if isinstance(st, Label)}
    n = len(body)
    use, kill, succ = [0] * n, [0] * n, []
    for i, st in enumerate(body):
        nxt = [i + 1] if i + 1 < n else []
        if isinstance(st, Instr):
            for r in st.uses():
                use[i] |= 1 << index[r.name]
            if st.guard is None:
                for r in st.defs():
                    kill[i] |= 1 << index[r.name]
            if st.opcode == "bra":
                tgt = [labels[o.name] for o in st.operands if isinstance(o, LabelRef)
                       and o.name in labels]
                nxt = tgt + (nxt if st.guard is not None else [])
            elif st.opcode in ("ret", "exit") and st.guard is None:
                nxt = []
        succ.append(nxt)
    live_in, live_out = [0] * n, [0] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out = 0
            for j in succ[i]:
                out |= live_in[j]
            new = use[i] | (out & ~kill[i])
            if new != live_in[i] or out != live_out[i]:
                live_in[i], live_out[i], changed = new, out, True
    return {id(st): [r for k, r in enumerate(layout.regs) if live_out[i] >> k & 1]
            for i, st in enumerate(body) if isinstance(st, Instr) and st.opcode in
            ("bar", "barrier")}


def lower_host(prog, module_name="native"):
    """(llvmlite module, HostLayout) of prog's kernel for the host; LoweringError when it has
    anything the native engine does not run."""
    kernel = prog.kernel
    if kernel.params and any(p.array for p in kernel.params):
        raise LoweringError(f"kernel {kernel.name}: array parameters")
    if len(prog.global_vars) > MAX_RANGES - 8:
        raise LoweringError(f"kernel {kernel.name}: too many .global variables")
    layout = HostLayout(kernel)
    lm = ir.Module(name=module_name)
    fnty = ir.FunctionType(I32, [ir.PointerType(I8), ir.PointerType(I64), I32, I32, I32, I32,
                                 I32])
    fn = ir.Function(lm, fnty, "thread")
    fn.linkage = "internal"             # inlined into the CTA loop: one native loop per CTA
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    # ranges: the shared and local buffers (reached through generic addresses), every 64-bit
    # integer parameter (an array's bytes, or empty), every .global variable
    n_ranges = 2 + len(pointer_params(kernel)) + len(prog.global_vars)
    if n_ranges > MAX_RANGES:
        raise LoweringError(f"kernel {kernel.name}: too many pointer parameters")
    ctx_bytes = ctx_words(prog) * 8
    _no_alias(fn.args[0], fn.args[1], ctx_bytes)
    frame = HostFrame(kernel, fn, b, prog, layout, n_ranges)
    body = HostBody(frame)
    body.rules["barrier"] = body.barrier
    body.lower(kernel.body)
    barriers = bool(body.resume)        # without any, every thread runs once to its exit
    _grid_loop(lm, _cta_loop(lm, fn, ctx_bytes, barriers), ctx_bytes, barriers)
    return lm, layout


def ctx_words(prog):
    """ctx's length in i64 words: the fields, then the parameter bytes."""
    return CTX_WORDS + -(-prog.param_size // 8) + 2


def _no_alias(regs, ctx, ctx_bytes, *others):
    """The launch's own buffers (registers, ctx, thread states) are separate allocations that
    the kernel's memory accesses never reach (they are checked against the user's buffers):
    telling LLVM so lets it keep the fields in registers across the kernel's stores."""
    for a in (regs, ctx) + others:
        a.add_attribute("noalias")
    ctx.attributes.dereferenceable = ctx_bytes
    ctx.attributes.align = 8


def pointer_origins(kernel):
    """{register name: index among pointer_params} for registers that hold an address derived
    from one pointer parameter only (ld.param of it, then cvta, mov, add, sub, mad.wide of
    an offset): the range checks try that parameter's buffer first. Only an ordering hint,
    the check itself still accepts any buffer."""
    index = {p.name: i for i, p in enumerate(pointer_params(kernel))}
    origin, spoiled = {}, set()

    def note(reg, k):
        if reg.name in spoiled or origin.get(reg.name, k) != k:
            spoiled.add(reg.name)
            origin.pop(reg.name, None)
        elif k is not None:
            origin[reg.name] = k
        else:
            spoiled.add(reg.name)
    for _ in range(2):                  # a second sweep sees origins defined later in the text
        for st in kernel.body:
            if not isinstance(st, Instr) or len(st.defs()) != 1:
                continue
            d = st.defs()[0]
            if st.opcode == "ld" and "param" in st.mods:
                a = st.sources[0] if st.sources else None
                k = index.get(a.base.name) if isinstance(a, Addr) and \
                    isinstance(a.base, Sym) else None
                note(d, k)
            elif st.opcode in ("cvta", "mov", "add", "sub", "mad"):
                ks = {origin.get(r.name) for r in st.uses()} - {None}
                if len(ks) == 1:
                    note(d, ks.pop())
    return origin


def pointer_params(kernel):
    return [p for p in kernel.params if p.type.bits == 64 and not p.type.is_float]


def _cta_loop(lm, thread, ctx_bytes, barriers=True):
    """void cta(i8* regs, i64 stride, i64* ctx, i32* state, i32 n): every live thread of the
    CTA to its next barrier (state[t]: entry point, -1 exited; -2 stops the loop)."""
    fnty = ir.FunctionType(I32, [ir.PointerType(I8), I64, ir.PointerType(I64),
                                 ir.PointerType(I32), I32])
    fn = ir.Function(lm, fnty, "cta")
    fn.linkage = "internal"
    regs, stride, ctx, state, n = fn.args
    _no_alias(regs, ctx, ctx_bytes, state)
    entry, loop, run, nxt, done, fault = (fn.append_basic_block(x) for x in
                                          ("entry", "loop", "run", "next", "done", "fault"))
    b = ir.IRBuilder(entry)
    nx = b.trunc(b.load(b.gep(ctx, [ir.Constant(I64, NTID)])), I32)
    ny = b.trunc(b.load(b.gep(ctx, [ir.Constant(I64, NTID + 1)])), I32)
    b.branch(loop)
    b.position_at_end(loop)
    t, tx, ty, tz = (b.phi(I32) for _ in range(4))
    for v in (t, tx, ty, tz):
        v.add_incoming(ir.Constant(I32, 0), entry)
    b.cbranch(b.icmp_signed("<", t, n), run, done)
    b.position_at_end(run)
    if barriers:
        sp = b.gep(state, [t])
        e = b.load(sp)
        live = b.icmp_signed(">=", e, ir.Constant(I32, 0))
        call_blk = fn.append_basic_block("call")
        b.cbranch(live, call_blk, nxt)
        b.position_at_end(call_blk)
    else:                               # no thread states: each runs from the entry to its exit
        e = ir.Constant(I32, 0)
    r = b.call(thread, [b.gep(regs, [b.mul(b.zext(t, I64), stride)]), ctx, e, t, tx, ty, tz])
    if barriers:
        b.store(b.select(b.icmp_signed("==", r, ir.Constant(I32, 0)), ir.Constant(I32, -1), r),
                sp)
    b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, -2)), fault, nxt)
    b.position_at_end(nxt)
    one, zero = ir.Constant(I32, 1), ir.Constant(I32, 0)
    t.add_incoming(b.add(t, one), nxt)
    x1 = b.add(tx, one)
    wrap_x = b.icmp_unsigned("==", x1, nx)
    y1 = b.select(wrap_x, b.add(ty, one), ty)
    wrap_y = b.icmp_unsigned("==", y1, ny)
    tx.add_incoming(b.select(wrap_x, zero, x1), nxt)
    ty.add_incoming(b.select(wrap_y, zero, y1), nxt)
    tz.add_incoming(b.select(wrap_y, b.add(tz, one), tz), nxt)
    b.branch(loop)
    b.position_at_end(done)
    b.ret(ir.Constant(I32, 0))
    b.position_at_end(fault)
    b.ret(ir.Constant(I32, -2))
    return fn


def _counted_loop(b, fn, count, body, name):
    """for (i = 0; i < count; i++) body(i), i64 count; leaves b after the loop."""
    pre = b.block
    head, step, out = (fn.append_basic_block(f"{name}.{x}") for x in ("head", "step", "out"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), pre)
    go = fn.append_basic_block(f"{name}.body")
    b.cbranch(b.icmp_signed("<", i, count), go, out)
    b.position_at_end(go)
    body(i)
    b.branch(step)
    b.position_at_end(step)
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), step)
    b.branch(head)
    b.position_at_end(out)


def _grid_loop(lm, cta, ctx_bytes, barriers=True):
    """i32 grid(i8* regs, i64 stride, i64* ctx, i32* state, i32 n, i64 first, i64 count,
    i64* shared, i64 shared_words, i64* local, i64 local_words): CTAs first … first+count-1,
    each from zeroed registers and memory until every thread exited. Returns 0, -2 on an invalid
    access, -3 when a CTA's threads wait at different barriers (ctx[FAULT] = that CTA)."""
    p64 = ir.PointerType(I64)
    fnty = ir.FunctionType(I32, [ir.PointerType(I8), I64, p64, ir.PointerType(I32), I32, I64,
                                 I64, p64, I64, p64, I64])
    fn = ir.Function(lm, fnty, "grid")
    regs, stride, ctx, state, n, first, count, shared, sw, local, lw = fn.args
    _no_alias(regs, ctx, ctx_bytes, state)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n64 = b.zext(n, I64)
    common = b.alloca(I32)          # the live threads' common entry point (-1: none, -3: differ)

    def field(i):
        return b.gep(ctx, [ir.Constant(I64, i)])

    def zero(ptr, words):
        _counted_loop(b, fn, words, lambda i: b.store(ir.Constant(I64, 0), b.gep(ptr, [i])),
                      "zero")

    def run_cta(after):
        """Call the CTA loop; leave with -2 on an invalid access, else go on in `after`."""
        r = b.call(cta, [regs, stride, ctx, state, n])
        bad, cont = fn.append_basic_block("bad"), fn.append_basic_block(after)
        b.cbranch(b.icmp_signed("==", r, ir.Constant(I32, -2)), bad, cont)
        with b.goto_block(bad):
            b.ret(r)
        b.position_at_end(cont)

    def one_cta(k):
        c = b.add(first, k)
        gx, gy = b.load(field(NCTAID)), b.load(field(NCTAID + 1))
        b.store(b.urem(c, gx), field(CTAID))
        b.store(b.urem(b.udiv(c, gx), gy), field(CTAID + 1))
        b.store(b.udiv(c, b.mul(gx, gy)), field(CTAID + 2))
        zero(shared, sw)
        zero(local, lw)
        if not barriers:                # one pass over the threads; no rounds to agree on
            return run_cta("done")
        _counted_loop(b, fn, n64, lambda t: b.store(ir.Constant(I32, 0), b.gep(state, [t])),
                      "state")
        rounds = fn.append_basic_block("rounds")
        b.branch(rounds)
        b.position_at_end(rounds)
        run_cta("scan")
        b.store(ir.Constant(I32, -1), common)

        def look(t):
            e = b.load(b.gep(state, [t]))
            cur = b.load(common)
            live = b.icmp_signed(">=", e, ir.Constant(I32, 0))
            new = b.select(b.icmp_signed("==", cur, ir.Constant(I32, -1)), e,
                           b.select(b.icmp_signed("==", cur, e), cur, ir.Constant(I32, -3)))
            b.store(b.select(b.and_(live, b.icmp_signed("!=", cur, ir.Constant(I32, -3))),
                             new, cur), common)
        _counted_loop(b, fn, n64, look, "scan")
        k2 = b.load(common)
        differ, again, done = (fn.append_basic_block(x) for x in ("differ", "again", "done"))
        sw_ = b.switch(k2, again)
        sw_.add_case(ir.Constant(I32, -1), done)
        sw_.add_case(ir.Constant(I32, -3), differ)
        with b.goto_block(differ):
            b.store(c, field(FAULT))
            b.ret(ir.Constant(I32, -3))
        with b.goto_block(again):
            b.branch(rounds)
        b.position_at_end(done)
    _counted_loop(b, fn, count, one_cta, "cta")
    b.ret(ir.Constant(I32, 0))
