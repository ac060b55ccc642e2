"""Lowering rules for memory, synchronization and warp-level instructions (see rules.py)."""
from llvmlite import ir

from ..ir import types as T
from ..ir.values import Addr, Imm, PredPair, Reg
from . import table
from .rules import float_suffix
from .rules_convert import asm
from .values import ADDRSPACE, I1, I32, ltype, resize, to_bits


def cvta(f, ins, row):
    """cvta[.to].space.size: an address moved between a state space's window and generic."""
    space = next(m for m in ins.mods if m in ADDRSPACE)
    t = ins.type
    b = f.b
    v = resize(b, to_bits(b, f.read(ins.operands[1], t)), 64, False)
    src_as, dst_as = (0, ADDRSPACE[space]) if "to" in ins.mods else (ADDRSPACE[space], 0)
    p = b.inttoptr(v, ir.PointerType(ir.IntType(8), src_as))
    q = b.addrspacecast(p, ir.PointerType(ir.IntType(8), dst_as))
    f.write(ins.operands[0], b.ptrtoint(q, ltype(t)), t)


def load(f, ins, row):
    t, n = ins.type, ins.vector_width
    space = ins.space
    if space == "param":
        return _load_param(f, ins, t)
    addr = ins.operands[1]
    lt = ltype(t)
    b = f.b
    if n == 1:
        return f.write(ins.operands[0], b.load(f.pointer(addr, space, lt), align=t.nbytes), t)
    vec = b.load(f.pointer(addr, space, ir.VectorType(lt, n)), align=n * t.nbytes)
    for i, r in enumerate(ins.operands[0].items):
        if isinstance(r, Reg):
            f.write(r, b.extract_element(vec, ir.Constant(I32, i)), t)


def _load_param(f, ins, t):
    addr = ins.operands[1]
    if not isinstance(addr, Addr) or addr.offset or getattr(addr.base, "name", None) \
            not in f.params:
        f.fail("only whole kernel parameters can be loaded from .param")
    f.write(ins.operands[0], f.read(addr.base, t), t)


def store(f, ins, row):
    t, n = ins.type, ins.vector_width
    addr, val = ins.operands[0], ins.operands[1]
    lt = ltype(t)
    b = f.b
    if n == 1:
        b.store(f.read(val, t), f.pointer(addr, ins.space, lt), align=t.nbytes)
    else:
        b.store(f.vector(val, t, n), f.pointer(addr, ins.space, ir.VectorType(lt, n)),
                align=n * t.nbytes)


def atomic(f, ins, row):
    t = ins.type
    has_dest = row.data["result"]
    ops = ins.operands[1:] if has_dest else ins.operands
    op = next((m for m in ins.mods if m in table.ATOMIC or m in ("cas", "inc", "dec")), None)
    b = f.b
    ptr = f.pointer(ops[0], ins.space, ltype(t))
    val = f.read(ops[1], t)
    if op == "cas":
        pair = b.cmpxchg(ptr, val, f.read(ops[2], t), "monotonic", "monotonic")
        old = b.extract_value(pair, 0)
    elif op == "add" and t.is_float:
        old = _atomic_fadd(f, ptr, val, t)
    elif op in table.ATOMIC and not t.is_float:
        kind = table.ATOMIC[op]
        if isinstance(kind, tuple):
            kind = kind[0] if t.is_signed else kind[1]
        old = b.atomic_rmw(kind, ptr, val, "monotonic")
    else:
        f.fail(f"atomic .{op} on .{t} has no LLVM lowering")
    if has_dest:
        f.write(ins.operands[0], old, t)


def _atomic_fadd(f, ptr, val, t):
    if f.dialect == "nvvm":             # LLVM 7 has no atomicrmw fadd; NVVM's intrinsic is it
        suffix = f"{float_suffix(t)}.p{ptr.type.addrspace}{float_suffix(t)}"
        return f.call(f"llvm.nvvm.atomic.load.add.{suffix}", ltype(t), ptr, val)
    return f.b.atomic_rmw("fadd", ptr, val, "monotonic")


def cp_async(f, ins, row):
    """cp.async (sm_80): NVVM's cp.async intrinsics, one per copy size and cache operator."""
    mods = ins.mods
    if "commit_group" in mods:
        return f.call("llvm.nvvm.cp.async.commit.group", ir.VoidType())
    if "wait_group" in mods:
        n = int(ins.operands[0].value)
        return f.call("llvm.nvvm.cp.async.wait.group", ir.VoidType(), ir.Constant(I32, n))
    if "wait_all" in mods:
        return f.call("llvm.nvvm.cp.async.wait.all", ir.VoidType())
    dst, src, size = ins.operands[:3]
    nbytes = int(size.value)
    cache = "cg" if "cg" in mods else "ca"
    d = f.pointer(dst, "shared", ir.IntType(8))
    s = f.pointer(src, "global", ir.IntType(8))
    name = f"llvm.nvvm.cp.async.{cache}.shared.global.{nbytes}"
    if len(ins.operands) > 3:
        return f.call(name + ".s", ir.VoidType(), d, s, f.read(ins.operands[3], T.u32))
    f.call(name, ir.VoidType(), d, s)


def barrier(f, ins, row):
    """bar.sync / barrier.sync / bar.red.{popc,and,or} / bar.warp.sync."""
    mods, ops = ins.mods, ins.operands
    b = f.b
    if mods[:1] == ("warp",):
        return f.call("llvm.nvvm.bar.warp.sync", ir.VoidType(), f.read(ops[0], T.u32))
    if "red" in mods:
        kind = next(m for m in ("popc", "and", "or") if m in mods)
        if not (isinstance(ops[1], Imm) and ops[1].value == 0 and len(ops) == 3):
            f.fail("bar.red lowers only for barrier 0 with all threads")
        p = b.zext(f.read(ops[2], T.pred), I32)
        v = f.call(f"llvm.nvvm.barrier0.{kind}", I32, p)
        t = T.u32 if kind == "popc" else T.pred
        return f.write(ops[0], v, t)
    if "arrive" in mods:
        return asm(f, ins, row)
    if len(ops) == 1 and isinstance(ops[0], Imm) and ops[0].value == 0:
        return f.call("llvm.nvvm.barrier0", ir.VoidType())
    args = [f.read(o, T.u32) for o in ops]
    f.call("llvm.nvvm.barrier.sync" + (".cnt" if len(args) == 2 else ""), ir.VoidType(), *args)


def membar(f, ins, row):
    level = ins.mods[0] if ins.mods else "gl"
    if level not in row.data:
        f.fail(f"membar.{level} has no LLVM lowering")
    f.call(row.data[level], ir.VoidType())


def shuffle(f, ins, row):
    """shfl.sync.mode.b32 d[|p], a, b, c, mask → llvm.nvvm.shfl.sync.<mode>.i32[p]."""
    mode = next((m for m in ins.mods if m in table.SHUFFLE_MODES), None)
    if mode is None or "sync" not in ins.mods:
        f.fail("only shfl.sync lowers to LLVM (shfl without .sync is gone since sm_70)")
    a, lane, clamp, mask = (f.read(x, T.b32) for x in ins.operands[1:5])
    dest = ins.operands[0]
    if isinstance(dest, PredPair):
        pair = ir.LiteralStructType([I32, I1])
        r = f.call(f"llvm.nvvm.shfl.sync.{mode}.i32p", pair, mask, a, lane, clamp)
        f.write(dest.first, f.b.extract_value(r, 0), T.b32)
        return f.write(dest.second, f.b.extract_value(r, 1), T.pred)
    f.write(dest, f.call(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, mask, a, lane, clamp), T.b32)


def vote(f, ins, row):
    p = f.read(ins.operands[1], T.pred)
    mask = f.read(ins.operands[2], T.u32) if len(ins.operands) > 2 else ir.Constant(I32, -1)
    if "ballot" in ins.mods:
        return f.write(ins.operands[0], f.call("llvm.nvvm.vote.ballot.sync", I32, mask, p),
                       T.b32)
    mode = next((m for m in ins.mods if m in table.VOTE_MODES), None)
    if mode is None:
        f.fail("unknown vote mode")
    f.write(ins.operands[0], f.call(f"llvm.nvvm.vote.{mode}.sync", I1, mask, p), T.pred)


def drop(f, ins, row):
    """An instruction that is only a hint (prefetch): nothing to compute."""
