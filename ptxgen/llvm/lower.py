"""ptxgen IR → an llvmlite.ir.Module for the NVPTX target.

One LLVM function per entry kernel, marked a kernel in !nvvm.annotations (which both LLVM's
NVPTX back end and libNVVM read). Labels start basic blocks; a guarded instruction becomes a
conditional branch around it (the back ends turn short ones back into predication); each
instruction is lowered by its row of ptxgen.llvm.table. `dialect` picks the few spellings where
the LLVM that libNVVM is built on (LLVM 7) and today's LLVM differ: "llvm" or "nvvm".
"""
import re

from llvmlite import ir

from ..errors import LoweringError
from ..ir import types as T
from ..ir.instr import Instr, Label
from ..ir.values import LabelRef
from . import rules, rules_convert, rules_memory, table
from .values import ADDRSPACE, I32, Frame, ltype

TRIPLE = "nvptx64-nvidia-cuda"
# libNVVM's documented data layout for 64-bit targets
NVVM_DATALAYOUT = ("e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-"
                   "f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64")
# launch-bound directives → NVVM annotation names
_BOUNDS = {".maxntid": "maxntid", ".reqntid": "reqntid"}
_SCALAR = {".minnctapersm": "minctasm", ".maxnreg": "maxnreg"}


# rule name (table.Row.rule) → function
RULES = {name: getattr(mod, fn) for mod, names in (
    (rules, ("arith", "product", "fma", "minmax", "neg", "abs_", "not_", "shift", "bitcount",
             "nvvm_math", "setp", "selp", "mov")),
    (rules_memory, ("cvta", "load", "store", "atomic", "cp_async", "barrier", "membar",
                    "shuffle", "vote", "drop")),
    (rules_convert, ("cvt", "asm"))) for fn in names for name in (fn.rstrip("_"),)}


def lower_module(module, dialect="llvm", nvvm_ir_version=None, kernels=None):
    """The module's entry kernels (or those named in `kernels`) as an llvmlite.ir.Module."""
    if dialect not in ("llvm", "nvvm"):
        raise LoweringError(f"unknown LLVM dialect {dialect!r} (llvm or nvvm)")
    lm = ir.Module(name=module.filename)
    lm.triple = TRIPLE
    if dialect == "nvvm":
        lm.data_layout = NVVM_DATALAYOUT
    variables = {}
    for v in module.vars:
        variables[v.name] = _global(lm, v, v.name)
    entries = [k for k in module.kernels if k.kind == "entry"
               and (kernels is None or k.name in kernels)]
    if not entries:
        raise LoweringError(f"{module.filename}: no entry kernel to lower")
    for k in entries:
        for v in k.vars:
            name = v.name if v.name not in lm.globals else f"{k.name}.{v.name}"
            variables[(k.name, v.name)] = _global(lm, v, name)
    annotations = []
    for k in entries:
        fn = _lower_kernel(lm, k, variables, dialect)
        annotations.append(lm.add_metadata([fn, "kernel", I32(1)]))
        annotations.extend(_bounds(lm, fn, k))
    named = lm.add_named_metadata("nvvm.annotations")
    for a in annotations:
        named.add(a)
    if nvvm_ir_version:
        lm.add_named_metadata("nvvmir.version", [I32(x) for x in nvvm_ir_version])
    return lm


def _global(lm, var, name):
    """A module or kernel variable as bytes in its state space's address space."""
    if var.init:
        raise LoweringError(f"variable {var.name}: initialized {var.space} variables do not "
                            f"lower to LLVM yet")
    if var.space not in ("shared", "global", "const"):
        raise LoweringError(f"variable {var.name}: .{var.space} variables do not lower to LLVM")
    ty = ir.ArrayType(ir.IntType(8), var.nbytes)
    gv = ir.GlobalVariable(lm, ty, name, addrspace=ADDRSPACE[var.space])
    gv.align = var.align or var.type.nbytes
    if var.extern:
        gv.linkage = "external"
    elif var.space == "shared":
        gv.linkage = "internal"
        gv.initializer = ir.Constant(ty, ir.Undefined)    # NVVM: shared is never initialized
    else:
        gv.initializer = ir.Constant(ty, bytearray(var.nbytes))
    return gv


def _bounds(lm, fn, kernel):
    out = []
    for d in kernel.directives:
        parts = d.replace(",", " ").split()
        if not parts:
            continue
        nums = [int(x) for x in parts[1:] if re.fullmatch(r"\d+", x)]
        if parts[0] in _BOUNDS:
            for axis, n in zip("xyz", nums):
                out.append(lm.add_metadata([fn, _BOUNDS[parts[0]] + axis, I32(n)]))
        elif parts[0] in _SCALAR and nums:
            out.append(lm.add_metadata([fn, _SCALAR[parts[0]], I32(nums[0])]))
    return out


def _lower_kernel(lm, kernel, variables, dialect):
    for p in kernel.params:
        if p.array:
            raise LoweringError(f"kernel {kernel.name}: parameter {p.name} is a byte array "
                                f"({p.decl()}); array parameters do not lower to LLVM")
    fnty = ir.FunctionType(ir.VoidType(), [ltype(p.type) for p in kernel.params])
    fn = ir.Function(lm, fnty, kernel.name)
    for p, a in zip(kernel.params, fn.args):
        a.name = p.name
    entry = fn.append_basic_block("entry")
    b = ir.IRBuilder(entry)
    scope = {name[1] if isinstance(name, tuple) else name: gv for name, gv in variables.items()
             if not isinstance(name, tuple) or name[0] == kernel.name}
    f = Frame(kernel, fn, b, scope, dialect)
    Body(f).lower(kernel.body)
    return fn


class Body:
    """Basic blocks from labels and branches; guarded instructions branch around. A subclass
    (the emulator's host lowering) changes how the function is entered and left and overrides
    rules by name."""
    rules = RULES

    def __init__(self, frame):
        self.f = frame
        self.blocks = {}

    def enter(self, start):
        self.f.b.branch(start)

    def leave(self):
        self.f.b.ret_void()

    def block(self, name):
        blk = self.blocks.get(name)
        if blk is None:
            blk = self.blocks[name] = self.f.func.append_basic_block(name.lstrip("$") or "L")
        return blk

    def lower(self, body):
        f, b = self.f, self.f.b
        start = f.func.append_basic_block("body")
        self.enter(start)
        b.position_at_end(start)
        for s in body:
            if isinstance(s, Label):
                blk = self.block(s.name)
                if not b.block.is_terminated:
                    b.branch(blk)
                b.position_at_end(blk)
            elif isinstance(s, Instr):
                if b.block.is_terminated:          # code after an unconditional branch
                    b.position_at_end(f.func.append_basic_block("dead"))
                f.instr = s
                self.instruction(s)
        if not b.block.is_terminated:
            self.leave()

    def instruction(self, ins):
        f, b = self.f, self.f.b
        row = table.LOWERING.get(ins.opcode)
        if row is None:
            f.fail(f"no LLVM lowering for opcode '{ins.opcode}'")
        if row.rule == "control":
            return self.control(ins)
        if ins.guard is None:
            return self.apply(row, ins)
        g = f.read(ins.guard, T.pred)
        then = f.func.append_basic_block("guarded")
        cont = f.func.append_basic_block("cont")
        b.cbranch(g, cont, then) if ins.guard_negated else b.cbranch(g, then, cont)
        b.position_at_end(then)
        self.apply(row, ins)
        b.branch(cont)
        b.position_at_end(cont)

    def apply(self, row, ins):
        try:
            self.rules[row.rule](self.f, ins, row)
        except LoweringError:
            raise
        except (TypeError, ValueError, AttributeError, IndexError, KeyError, StopIteration,
                AssertionError) as e:
            self.f.fail(f"cannot lower ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
                        if str(e) else f"cannot lower ({type(e).__name__})")

    def control(self, ins):
        f, b = self.f, self.f.b
        if ins.opcode == "bra":
            target = ins.operands[0] if ins.operands else None
            if not isinstance(target, LabelRef):
                f.fail("branch target is not a label")
            dest = self.block(target.name)
        else:
            dest = f.func.append_basic_block("exit")
            with b.goto_block(dest):
                self.leave()
        if ins.guard is None:
            b.branch(dest)
            return
        g = f.read(ins.guard, T.pred)
        cont = f.func.append_basic_block("fall")
        b.cbranch(g, cont, dest) if ins.guard_negated else b.cbranch(g, dest, cont)
        b.position_at_end(cont)
