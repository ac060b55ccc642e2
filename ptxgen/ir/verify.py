"""The verifier: malformed IR is rejected before any PTX is printed.

Each error names the kernel, the instruction (its index and PTX text) and what is wrong. Checks:
registers used before any definition, operand types against the instruction type, stores to
parameter space, vector operand width and proven misalignment of vector accesses, and bar.sync
inside code controlled by a thread-dependent branch (where the branch is visible).
"""
from ..errors import VerifyError
from . import types as T
from .instr import Instr, Label, Verbatim
from .values import Addr, Imm, Reg, Special, Sym, Vec

THREAD_VARYING = ("tid", "laneid", "warpid", "lanemask_lt", "lanemask_le", "lanemask_eq",
                  "lanemask_gt", "lanemask_ge", "clock", "clock64")


def verify_module(module):
    for k in module.kernels:
        verify_kernel(k)
    return module


def verify_kernel(kernel):
    _Checker(kernel).run()
    return kernel


class _Checker:
    def __init__(self, kernel):
        self.k = kernel
        self.params = {p.name: p for p in kernel.params}
        # a .func's '.reg' parameters are declared and hold the caller's values on entry;
        # parsed inline-asm scopes declare registers in Verbatim statements
        self.reg_params = [p.reg for p in kernel.params + kernel.returns if p.reg is not None]
        self.declared = {r.name for r in kernel.regs} | {r.name for r in self.reg_params} | {
            r.name for s in kernel.body if isinstance(s, Verbatim) for r in s.regs}

    def fail(self, idx, ins, what):
        raise VerifyError(f"kernel {self.k.name}, instruction {idx} `{ins}`: {what}")

    def run(self):
        defined = set(self.reg_params)
        labels = {s.name for s in self.k.body if isinstance(s, Label)}
        align = {}
        varying = set()
        for idx, ins in enumerate(self.k.body):
            if not isinstance(ins, Instr):
                continue
            for r in ins.certain_uses():
                if r.name not in self.declared:
                    self.fail(idx, ins, f"register {r.name} is not declared in the kernel")
                if r not in defined:
                    self.fail(idx, ins, f"register {r.name} is used before it is defined")
            if ins.guard is not None and ins.guard.type != T.pred:
                self.fail(idx, ins, f"guard {ins.guard.name} is {ins.guard.type}, not a predicate")
            self.check_types(idx, ins)
            self.check_memory(idx, ins, align)
            for o in ins.operands:
                if hasattr(o, "name") and ins.is_branch and o.name not in labels:
                    self.fail(idx, ins, f"branch target {o.name} is not a label in the kernel")
            self.track_alignment(ins, align)
            if self.is_varying(ins, varying):
                varying.update(ins.defs())
            for r in ins.defs():
                if r.name not in self.declared:
                    self.fail(idx, ins, f"register {r.name} is not declared in the kernel")
                defined.add(r)
        self.check_divergent_barriers(varying)

    # -- types -------------------------------------------------------------------------------
    def check_types(self, idx, ins):
        """Register operands against the instruction's type, by its row's operands rule."""
        if ins.type is None or not ins.row.typed or ins.row.is_control:
            return
        RULES.get(ins.row.operands, _typed)(self, idx, ins, list(ins.operands), ins.type)

    def need(self, idx, ins, o, typ, role):
        if isinstance(o, Reg) and not T.compatible(o.type, typ):
            self.fail(idx, ins, f"{role} {o.name} is {o.type}, expected {typ}")
        if isinstance(o, Vec):
            for item in o.items:
                self.need(idx, ins, item, typ, role)

    def check_vec(self, idx, ins, o):
        w = ins.vector_width
        n = len(o.items) if isinstance(o, Vec) else 1
        if w != n:
            self.fail(idx, ins, f"{'v%d' % w if w > 1 else 'scalar'} access with {n} value(s)")

    # -- memory ------------------------------------------------------------------------------
    def check_memory(self, idx, ins, align):
        if ins.opcode in ("st", "atom", "red") and ins.space == "param" and self.k.kind == "entry":
            self.fail(idx, ins, "stores to kernel parameters are not allowed")
        if ins.opcode in ("st",) and ins.operands:
            a = ins.operands[0]
            if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in self.params:
                self.fail(idx, ins, f"store to parameter {a.base.name}")
        if ins.opcode in ("ld", "st") and ins.vector_width > 1:
            a = ins.operands[1] if ins.opcode == "ld" else ins.operands[0]
            width = ins.vector_width * ins.type.nbytes
            if isinstance(a, Addr):
                if a.offset % width:
                    self.fail(idx, ins, f"offset {a.offset} is not a multiple of the "
                                        f"{width}-byte vector width")
                known = align.get(a.base) if isinstance(a.base, Reg) else None
                if known is not None and known < width:
                    self.fail(idx, ins, f"address {a.base} is only known to be {known}-byte "
                                        f"aligned; a v{ins.vector_width} access needs {width}")

    def track_alignment(self, ins, align):
        """Largest power of two proven to divide each register (None: unknown)."""
        d = ins.dests
        if len(d) != 1 or not isinstance(d[0], Reg):
            return
        dst, src = d[0], ins.sources

        def of(o):
            if isinstance(o, Imm) and isinstance(o.value, int):
                v = abs(int(o.value))
                return v & -v if v else 1 << 30
            if isinstance(o, Reg):
                return align.get(o)
            if isinstance(o, Special):
                return 1
            return None

        op = ins.opcode
        val = None
        if op == "ld" and ins.space == "param" and isinstance(src[0], Addr):
            p = self.params.get(str(src[0].base))
            val = p.pointer.align if p is not None and p.pointer is not None else None
        elif op in ("mov", "cvta", "cvt") and src:
            val = of(src[0])
        elif op in ("add", "sub") and len(src) == 2:
            a, b = of(src[0]), of(src[1])
            val = None if a is None or b is None else min(a, b)
        elif op == "mul" and len(src) == 2:
            a, b = of(src[0]), of(src[1])
            val = None if a is None or b is None else a * b
        elif op == "shl" and isinstance(src[1], Imm):
            a = of(src[0])
            val = None if a is None else a << int(src[1].value)
        elif op == "mad" and len(src) == 3:
            a, b, c = of(src[0]), of(src[1]), of(src[2])
            val = None if None in (a, b, c) else min(a * b, c)
        align[dst] = val

    # -- divergence --------------------------------------------------------------------------
    def is_varying(self, ins, varying):
        if any(isinstance(o, Special) and o.name.split(".")[0] in THREAD_VARYING
               for o in ins.operands):
            return True
        # loaded values may differ per thread; read-only data (ld.global.nc) at the same
        # address is the same for every thread
        if ins.opcode in ("ld", "atom") and ins.space not in ("param", "const") and \
                not (ins.opcode == "ld" and ins.space == "global" and "nc" in ins.mods):
            return True
        return any(r in varying for r in ins.uses() if r is not ins.guard) or (
            ins.guard is not None and ins.guard in varying)

    def check_divergent_barriers(self, varying):
        body = self.k.body
        where = {s.name: i for i, s in enumerate(body) if isinstance(s, Label)}
        regions = []
        for i, s in enumerate(body):
            if isinstance(s, Instr) and s.is_branch and s.guard is not None and s.guard in varying:
                target = where.get(s.operands[0].name)
                if target is None:
                    continue
                lo, hi = (i, target) if target > i else (target, i)
                regions.append((lo, hi, i))
        for lo, hi, br in regions:
            for j in range(lo + 1, hi):
                s = body[j]
                # a named barrier with a thread count (bar.sync id, n) is meant for a subset
                # of the CTA (warp-specialized roles), so only the CTA-wide form must not sit
                # under a thread-dependent branch
                if isinstance(s, Instr) and s.is_barrier and not _has_thread_count(s):
                    self.fail(j, s, f"bar.sync in divergent code: the branch at instruction {br} "
                                    f"`{body[br]}` depends on the thread index")


def _has_thread_count(ins):
    """bar.sync/arrive a, b and bar.red.op d, a, b, c name the participating thread count b."""
    return len(ins.operands) >= (4 if "red" in ins.mods else 2)


# -- operand typing rules (the opcode table's operands column) -------------------------------
def _typed(c, idx, ins, ops, t):
    if not ins.is_barrier:
        for o in ops:
            if not isinstance(o, Addr):
                c.need(idx, ins, o, t, "operand")


def _cvt(c, idx, ins, ops, t):
    c.need(idx, ins, ops[0], ins.types[0], "destination")
    c.need(idx, ins, ops[1], ins.types[-1], "source")


def _setp(c, idx, ins, ops, t):
    if not (isinstance(ops[0], Reg) and ops[0].type == T.pred):
        c.fail(idx, ins, "setp must write a predicate")
    for o in ops[1:3]:
        c.need(idx, ins, o, t, "operand")


def _selp(c, idx, ins, ops, t):
    c.need(idx, ins, ops[0], t, "destination")
    c.need(idx, ins, ops[1], t, "operand")
    c.need(idx, ins, ops[2], t, "operand")
    if not (isinstance(ops[3], Reg) and ops[3].type == T.pred):
        c.fail(idx, ins, "selp's last operand must be a predicate")


def _wide(c, idx, ins, ops, t):
    if "wide" not in ins.mods:
        return _typed(c, idx, ins, ops, t)
    wide = T.TYPES[t.name[0] + str(t.bits * 2)]
    c.need(idx, ins, ops[0], wide, "destination")
    for o in ops[1:3]:
        c.need(idx, ins, o, t, "operand")
    if len(ops) > 3:
        c.need(idx, ins, ops[3], wide, "addend")


def _shift(c, idx, ins, ops, t):
    c.need(idx, ins, ops[0], t, "destination")
    c.need(idx, ins, ops[1], t, "operand")
    if isinstance(ops[2], Reg) and ops[2].type.bits != 32:
        c.fail(idx, ins, f"shift amount {ops[2].name} must be 32-bit")


def _load(c, idx, ins, ops, t):
    c.need(idx, ins, ops[0], t, "destination")
    c.check_vec(idx, ins, ops[0])


def _store(c, idx, ins, ops, t):
    c.need(idx, ins, ops[1], t, "stored value")
    c.check_vec(idx, ins, ops[1])


def _move(c, idx, ins, ops, t):
    if any(isinstance(o, Vec) for o in ops[:2]):
        # mov.b32 {lo, hi}, r / mov.b64 r, {a, b}: the pieces together are t's width
        for o in ops[:2]:
            bits = sum(r.type.bits for r in o.items) if isinstance(o, Vec) else (
                o.type.bits if isinstance(o, Reg) else t.bits)
            if bits != t.bits:
                c.fail(idx, ins, f"{o} has {bits} bits, {ins.opcode}.{t} moves {t.bits}")
        return
    c.need(idx, ins, ops[0], t, "destination")
    if isinstance(ops[1], Special) and ops[1].type.bits != t.bits:
        c.fail(idx, ins, f"%{ops[1].name} is {ops[1].type}, not {t}")


RULES = {"typed": _typed, "bits": _typed, "shift": _shift, "shift_bits": _shift, "cvt": _cvt,
         "setp": _setp, "selp": _selp, "wide": _wide, "load": _load, "store": _store,
         "move": _move}
