"""A kernel's body compiled once into a list of ops for the executor.

Each register gets a slot in the batch's register list; labels become op indices; every operand
becomes a small fetch function; every instruction becomes a closure `fn(state, mask)` from the
semantics tables (alu, bits, floats, convert, memops, warp). Control flow (bra, ret/exit, bar.sync)
is not a closure: the executor handles it from the op's kind. An instruction the emulator cannot
run compiles to an op that raises EmulationError when a thread reaches it, so kernels with
unsupported code on paths never taken still run.
"""
import functools
import re
from collections import ChainMap

import numpy as np

from ..errors import EmulationError
from ..ir import types as T
from ..ir.instr import Instr, Label, Verbatim
from ..ir.values import Addr, LabelRef, Raw, Reg, Sym, Vec, regs_in
from . import memory
from .compiled_op import BARRIER, BRANCH, EXIT, NORMAL, Op, guarded_op, raiser
from .operands import Ctx, Unsupported
from .values import storage

_GPU_ACQUIRE = frozenset(("acquire", "acq_rel"))
_WIDE_SCOPES = frozenset(("gpu", "sys"))


class Program:
    """A kernel compiled for emulation; holds no launch state and is reused across launches."""

    def __init__(self, module, kernel):
        if kernel.kind != "entry":
            raise EmulationError(f"{kernel.name} is a .func, not a kernel entry; only .entry "
                                 f"functions can be launched")
        self.module, self.kernel, self.name = module, kernel, kernel.name
        self.slot_of, self.slot_dtypes, self.slot_regs = {}, [], []
        self.by_name = {}
        for r in kernel.regs:
            self.by_name.setdefault(r.name, r)
        self._layout()
        self.code = []
        self.granule = 16
        self.uses_barrier = False
        self.has_barrier_reductions = False     # bar.red: the executor reduces at release
        self.grid_sync = False      # grid sync or gpu-scope acquires: every CTA in one batch
        self._compile()

    @functools.cached_property
    def written(self):
        """Names of the pointer parameters the kernel stores through (a data-flow pass over the
        body: made when a launch first passes a read-only array)."""
        from ..launch_shape import written_params
        return written_params(self.kernel)

    # -- registers -----------------------------------------------------------------------------
    def slot(self, reg):
        s = self.slot_of.get(id(reg))
        if s is None:
            s = len(self.slot_dtypes)
            self.slot_of[id(reg)] = s
            self.slot_dtypes.append(storage(reg.type))
            self.slot_regs.append(reg)
            self.by_name.setdefault(reg.name, reg)
        return s

    # -- variables and parameters ----------------------------------------------------------------
    def _layout(self):
        k, m = self.kernel, self.module
        # functions are inlined, so their variables and accesses count as the kernel's
        self.funcs = [f for f in m.kernels if f.kind == "func" and f.body]
        used = set().union(*(_symbols_used(f) for f in [k] + self.funcs))
        off = 0
        self.params = {}
        for p in k.params:
            align = max(p.align or 0, p.type.nbytes if not p.array else 1, 1)
            off = _align(off, align)
            self.params[p.name] = (off, p)
            off += p.nbytes
        self.param_size = off
        self.shared_vars, self.local_vars, self.const_vars, self.global_vars = {}, {}, {}, []
        shared_off, local_off, dyn_align = 0, 0, 16
        self.dynamic_vars = set()
        candidates = list(k.vars) + [v for v in m.vars if v.name in used]
        seen = set()
        const_image = bytearray()
        for v in candidates:
            if v.name in seen:
                continue
            seen.add(v.name)
            align = max(v.align or v.type.nbytes, 1)
            if v.space == "shared":
                if v.extern:
                    self.dynamic_vars.add(v.name)
                    dyn_align = max(dyn_align, align)
                else:
                    shared_off = _align(shared_off, align)
                    self.shared_vars[v.name] = shared_off
                    shared_off += v.nbytes
            elif v.space == "local":
                local_off = _align(local_off, align)
                self.local_vars[v.name] = local_off
                local_off += v.nbytes
            elif v.space == "const":
                start = _align(len(const_image), align)
                const_image.extend(bytes(start - len(const_image)))
                self.const_vars[v.name] = start
                const_image.extend(memory.var_image(v, self.name))
            elif v.space == "global":
                self.global_vars.append(v)
        self.static_shared = shared_off
        self.dynamic_offset = _align(shared_off, dyn_align)
        for name in self.dynamic_vars:
            self.shared_vars[name] = self.dynamic_offset
        self.local_size = local_off
        self.const_image = bytes(const_image)

    def symbol(self, name):
        """(space, address) of a symbol; global variables' addresses are known per launch, so
        their address is None here and the state supplies it."""
        if name in self.params:
            return "param", self.params[name][0]
        if name in self.shared_vars:
            return "shared", self.shared_vars[name]
        if name in self.local_vars:
            return "local", self.local_vars[name]
        if name in self.const_vars:
            return "const", self.const_vars[name]
        if any(v.name == name for v in self.global_vars):
            return "global", None
        if any(f.name == name for f in self.module.kernels):
            raise Unsupported(f"function address {name} (indirect calls are not emulated)")
        raise Unsupported(f"unknown symbol {name}")

    # -- compilation -------------------------------------------------------------------------------
    def _compile(self):
        from . import floats, memops
        from .builders import builder_table
        self.table = builder_table()
        self.granule = min(memops.shared_granule(f.body) for f in [self.kernel] + self.funcs)
        self.targets = set()
        self._func_locals = {}
        self._emit(self.kernel, {}, ())
        self._fuse(floats)
        self.code.append(Op(EXIT, None, None, len(self.kernel.body)))

    def _emit(self, func, binding, stack):
        """Append the ops of func's body. A .func is inlined at its call site: `binding` maps its
        parameters and return values to the caller's call-sequence .params, which live in the
        thread's local memory; its `ret` branches past the inlined body."""
        labels, pending, returns = {}, [], []
        scopes = [dict(binding)]
        visible = None              # the scopes' view, made again when a scope opens or closes
        if func is not self.kernel:
            for v in func.vars:               # a function's .local frame (NVVM's depot)
                if v.space == "local":
                    scopes[0][v.name] = self._func_local(func, v)
        for index, s in enumerate(func.body):
            if isinstance(s, Label):
                labels[s.name] = len(self.code)
                self.targets.add(len(self.code))
                continue
            if isinstance(s, Verbatim):
                t = s.text.strip()
                if t.startswith("{"):
                    scopes.append({})
                    visible = None
                elif t.startswith("}") and len(scopes) > 1:
                    scopes.pop()
                    visible = None
                else:
                    m = _CALL_PARAM.match(t)
                    if m:
                        scopes[-1][m.group(3)] = self._call_param(m)
                continue
            if not isinstance(s, Instr):
                continue
            if visible is None:
                visible = ChainMap(*reversed(scopes))
            if s.row.effect == "call":
                self._inline(s, index, visible, stack)
                continue
            op = self._op(s, index, pending, visible, inlined=func is not self.kernel)
            if op.kind == BRANCH and op.target == -3:
                returns.append(op)
            self.code.append(op)
        for op, name in pending:
            if name not in labels:
                op.kind, op.fn = NORMAL, raiser(self._unsupported(
                    op.instr, op.index, f"branch target {name} is not a label"))
            else:
                op.target = labels[name]
        for op in returns:
            op.target = len(self.code)
        self.targets.add(len(self.code))

    def _func_local(self, func, var):
        """One frame per function: calls do not recurse, so activations never overlap."""
        key = (id(func), var.name)
        off = self._func_locals.get(key)
        if off is None:
            off = _align(self.local_size, max(var.align or var.type.nbytes, 1))
            self.local_size = off + var.nbytes
            self._func_locals[key] = off
        return off

    def _call_param(self, m):
        """Local-memory offset of a call-sequence '.param' declaration."""
        t = T.type_of(m.group(2)) if m.group(2) else T.b8
        count = int(m.group(4)) if m.group(4) else 1
        align = max(int(m.group(1) or 0), t.nbytes)
        off = _align(self.local_size, align)
        self.local_size = off + t.nbytes * count
        return off

    def _inline(self, ins, index, visible, stack):
        rets, name, args = _call_parts(ins)
        why = None
        callee = next((f for f in self.module.kernels if f.name == name), None) if name else None
        from . import calls
        external = callee is None or not callee.body
        if external and name in calls.GRID_SYNC and all(a in visible for a in args + rets):
            self.code.extend(calls.grid_sync_ops(self, ins, index, name, visible, rets))
            return
        if name == "vprintf" and external and len(args) == 2 \
                and len(rets) <= 1 and all(a in visible for a in args + rets):
            self.code.append(calls.vprintf_op(self, ins, index, [visible[a] for a in args],
                                              visible[rets[0]] if rets else None))
            return
        if name is None:
            why = "indirect calls are not emulated"
        elif callee is None or not callee.body:
            why = f"{name} has no body in this module (an external function)"
        elif name in stack:
            why = f"{name} calls itself (recursion is not emulated)"
        elif len(stack) >= MAX_INLINE_DEPTH:
            why = f"calls nest deeper than {MAX_INLINE_DEPTH}"
        elif len(args) != len(callee.params) or len(rets) != len(callee.returns):
            why = f"{name} takes {len(callee.params)} arguments and returns " \
                  f"{len(callee.returns)} values"
        elif any(a not in visible for a in args + rets):
            why = "call arguments must be call-sequence .params"
        if why is not None:
            self.code.append(Op(NORMAL, raiser(self._unsupported(ins, index, why)), ins, index))
            return
        binding = {p.name: visible[a] for p, a in zip(callee.params, args)}
        binding.update({r.name: visible[a] for r, a in zip(callee.returns, rets)})
        skip = None
        if ins.guard is not None:         # @p call: branch around the inlined body when !p
            skip = Op(BRANCH, None, ins, index, guard=self.slot(ins.guard),
                      neg=not ins.guard_negated)
            self.code.append(skip)
        self._emit(callee, binding, stack + (name,))
        if skip is not None:
            skip.target = len(self.code)
            self.targets.add(len(self.code))

    def _fuse(self, floats, longest=256):
        """Runs of independent fma.rn.f32 become one op spanning them. A run never contains a
        label after its first op, so no lane can stop inside it (lanes stop only at labels,
        after branches and barriers, and where other lanes stopped)."""
        targets = self.targets
        code = self.code
        i = 0
        while i < len(code):
            if not (code[i].kind == NORMAL and floats.fusable_fma(code[i].instr)):
                i += 1
                continue
            written = set()
            j = i
            while j < len(code) and j - i < longest and code[j].kind == NORMAL and \
                    (j == i or j not in targets) and floats.fusable_fma(code[j].instr):
                ins = code[j].instr
                if any(id(o) in written for o in ins.operands[1:]):
                    break
                written.add(id(ins.operands[0]))
                j += 1
            if j - i >= 2:
                run = code[i:j]
                ctxs = []
                for op in run:
                    c = Ctx(self, op.instr, op.index, {})
                    c.code_index = code.index(op, i, j)
                    ctxs.append(c)
                try:
                    code[i].fn = floats.build_fused_fma(ctxs, [op.instr for op in run])
                    code[i].span = j - i
                except Unsupported:
                    pass                  # the ops keep their own closures (or raisers)
            i = max(j, i + 1)

    def _op(self, ins, index, pending, scope, inlined=False):
        guard, neg = -1, False
        if ins.guard is not None:
            guard, neg = self.slot(ins.guard), ins.guard_negated
        row = ins.row
        effect, key = row.effect, row.emu
        if effect in ("load", "atomic", "fence") and \
                _GPU_ACQUIRE.intersection(ins.mods) and _WIDE_SCOPES.intersection(ins.mods):
            # an acquire at gpu/sys scope (an acquiring load or atomic, or a fence after relaxed
            # loads) may wait on another CTA's release (a flag spin): every CTA runs in one
            # batch, as for a grid sync
            self.grid_sync = True
        ctx = Ctx(self, ins, index, scope)
        ctx.code_index = len(self.code)
        kind = NORMAL
        try:
            # control flow and CTA barriers are executor ops, not closures
            if effect == "branch" and ins.opcode == "bra":
                target = next((o for o in ins.operands if isinstance(o, (LabelRef, Sym))), None)
                if target is None:
                    raise Unsupported("branch without a label target")
                op = Op(BRANCH, None, ins, index, guard=guard, neg=neg)
                pending.append((op, target.name))
                return op
            if effect == "exit" and key != "trap":
                if inlined and ins.opcode == "ret":   # back to the caller: target set later
                    return Op(BRANCH, None, ins, index, target=-3, guard=guard, neg=neg)
                if guard >= 0:
                    return Op(BRANCH, None, ins, index, target=-2, guard=guard, neg=neg)
                return Op(EXIT, None, ins, index)
            if effect == "barrier" and "arrive" not in ins.mods:
                if guard >= 0:
                    raise Unsupported("a predicated CTA barrier")
                self.uses_barrier = True
                # bar.red: the executor runs its reduction when the barrier releases
                red = None
                if "red" in ins.mods:
                    from .warp import build_bar_red
                    red = build_bar_red(ctx, ins)
                    self.has_barrier_reductions = True
                return Op(BARRIER, red, ins, index)
            if key == "trap":
                fn = raiser(f"kernel {self.name}: trap executed at {_where(ins, index)}")
            elif key == "nop":
                fn = _nop
            else:
                builder = self.table.get(key)
                if builder is None:
                    raise Unsupported(f"opcode {ins.opcode!r} is not emulated" if not key else
                                      f"no emulator builder {key!r} yet")
                if key in _deferred_keys():
                    return self._deferred(Op(NORMAL, None, ins, index), ctx, builder, guard, neg)
                fn = builder(ctx, ins)
                kind = getattr(fn, "op_kind", NORMAL)
        except Unsupported as e:
            fn = raiser(self._unsupported(ins, index, str(e)))
        if guard >= 0:
            fn = guarded_op(fn, guard, neg)
        return Op(kind, fn, ins, index)

    def _deferred(self, op, ctx, builder, guard, neg):
        """op, whose closure is built the first time lanes reach it: code no thread runs (error
        paths, unused branches) costs nothing. Its registers get their slots now, before any
        batch allocates the register file."""
        ins = op.instr
        for o in ins.operands:
            for r in regs_in(o):
                self.slot(r)
        # the call parameters in view here, not later ones
        ctx.scope = dict(ctx.scope) if ctx.scope else {}

        def first_run(st, m):
            try:
                fn = builder(ctx, ins)
            except Unsupported as e:
                fn = raiser(self._unsupported(ins, op.index, str(e)))
            op.fn = guarded_op(fn, guard, neg) if guard >= 0 else fn
            _grow_registers(st, self.slot_dtypes)
            op.fn(st, m)
        op.fn = first_run
        return op

    def _unsupported(self, ins, index, why):
        return (f"kernel {self.name}: cannot emulate `{str(ins).split('  //')[0]}` "
                f"(opcode {ins.opcode}) at {_where(ins, index)}: {why}")


@functools.lru_cache(maxsize=1)
def _deferred_keys():
    """Builder keys whose builders only read the program (and give registers slots): their ops
    can be built on first use. The others (barriers, mbarrier waits, tensor cores, TMA) may
    mark the program or the op's kind, or refuse the kernel before it runs."""
    from . import alu, bits, convert, floats, memops
    from .builders import builder_table
    table = builder_table()
    return frozenset(k for m in (alu, bits, convert, floats, memops)
                     for k, b in m.BUILDERS.items() if table.get(k) is b)


def _grow_registers(batch, slot_dtypes):
    """A builder run after the batch was made may have given a register (one read through a
    negated-predicate literal, say) a new slot: the batch's register file gets it, zeroed."""
    R = batch.R
    for dt in slot_dtypes[len(R):]:
        R.append(np.zeros(batch.n, dt))


MAX_INLINE_DEPTH = 16
_CALL_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?(?:\.(\w+)\s+)?([A-Za-z_$][\w$]*)"
                         r"\s*(?:\[(\d+)\])?\s*;")


def _call_parts(ins):
    """(return names, function name or None, argument names) of a call instruction."""
    rets, name, args = [], None, []
    for o in ins.operands:
        if isinstance(o, Sym) and name is None:
            name = o.name
        elif isinstance(o, Raw) and o.text.strip().startswith("("):
            names = _words(o.text)
            if name is None:
                rets = names
            else:
                args = names
        elif isinstance(o, Reg) and name is None:
            return rets, None, args          # call through a register
    return rets, name, args


def _where(ins, index):
    return f"PTX line {ins.line}" if ins.line else f"instruction {index}"


def _align(n, a):
    return -(-n // a) * a


def _symbols_used(kernel):
    names = set()

    def visit(o):
        if isinstance(o, Sym):
            names.add(o.name)
        elif isinstance(o, Addr):
            visit(o.base)
        elif isinstance(o, Vec):
            for i in o.items:
                visit(i)
        elif isinstance(o, Raw):
            names.update(w for w in _words(o.text))

    for s in kernel.body:
        if isinstance(s, Instr):
            for o in s.operands:
                visit(o)
    return names


def _words(text):
    return re.findall(r"[A-Za-z_$][A-Za-z0-9_$]*", text)


def _nop(st, m):
    pass
