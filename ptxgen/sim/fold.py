"""PTX instructions that ptxas folds into a neighbour, leaving no SASS instruction of their own.

The simulator issues PTX, but the GPU issues ptxas's SASS, which fuses common address
arithmetic: a 32-bit shift left by a constant feeding a 32-bit add becomes one LEA (the shift
folds only where the shifted value has exactly one reader, in the same basic block, so nothing
else needs it in a register of its own); a copy between registers is coalesced away; a 32-bit
constant moved into a register that one 32-bit float or integer instruction of the block reads
becomes that instruction's immediate operand (NVVM writes `mov.f32 %f4, 0fBFC90FDA; fma.rn.f32
%f5, %f3, %f4, %f1`, ptxas `FFMA R8, R9, -1.5707962..., R14`: the haversine case); and a small
loop counted by a 32-bit register is unrolled 4x, so its counter's add and compare run once
per four trips (`unrolled_control`; the back-edge branch still issues every trip, standing in
for the unrolled loop's add, compare and branch per four). The instructions found here still
run in the path interpreter (their values steer addresses and branches); the timing engine
lets them take no issue slot and no pipe, their results ready as soon as their operands are.

Checked against SASS (ptxgen.toolchain: ptxas -O3 for sm_90, nvdisasm) on the fitting part's
hand-written smem_stride (`shl.b32`+`add.s32` → `LEA`) and fma_chain (its 11-instruction loop
unrolled 4x: 32 FFMA + 4 control instructions per four trips). Not folded, though ptxas does it:
`mul.wide`+`add.s64` → one `IMAD.WIDE`. The simulator charges 64-bit adds and logic one issue
where SASS needs two (IADD3 + IADD3.X, LOP3 pairs; compares and multiplies get their halves,
`program._int64_halves`), so the add this fusion removes stands in for halves charged nowhere
else; folding it made the fitting part worse (9.07 % against 8.91 % MAPE with the other rules,
docs/MODEL.md).
"""
from ..ir.values import Imm, Reg

_I32 = ("s32", "u32", "b32")
_INT = _I32 + ("s64", "u64", "b64")


def _typed(ins, opcode, types):
    return ins.opcode == opcode and ins.guard is None and ins.type is not None and \
        ins.type.name in types


def _lea_shift(ins):
    """shl.b32 d, a, k: folds into the add that reads it (LEA d, a, b, k)."""
    return _typed(ins, "shl", _I32) and len(ins.operands) == 3 and \
        isinstance(ins.operands[2], Imm)


def _copy(ins):
    """mov between two registers of one type: ptxas coalesces the copy."""
    return ins.opcode == "mov" and ins.guard is None and len(ins.operands) == 2 and \
        all(isinstance(o, Reg) for o in ins.operands)


def _sole_reader(instrs, start, end, i, reg, reads):
    """The index of the one instruction in [i+1, end) reading the value `reg` gets at i, when
    that value has no other reader (it is written again in the block after that read, or the
    register is read nowhere else in the kernel); else None."""
    reader = None
    for j in range(i + 1, end):
        ins = instrs[j]
        if reg in ins.uses():
            if reader is not None:
                return None
            reader = j
        if reg in ins.defs():
            return reader
    return reader if reader is not None and reads.get(reg, 0) == 1 else None


def folded(instrs, blocks):
    """Indices of the instructions of `instrs` (Instr, program order) that issue for free,
    given basic blocks as (start, end) index ranges."""
    reads = {}
    for ins in instrs:
        for r in ins.uses():
            reads[r] = reads.get(r, 0) + 1
    out = set()
    for start, end in blocks:
        for i in range(start, end):
            ins = instrs[i]
            if _lea_shift(ins):
                j = _sole_reader(instrs, start, end, i, ins.operands[0], reads)
                if j is not None and _typed(instrs[j], "add", _I32) and j not in out:
                    out.add(i)
            elif _copy(ins):
                out.add(i)
            elif _constant(ins):
                j = _sole_reader(instrs, start, end, i, ins.operands[0], reads)
                if j is not None and _takes_immediate(instrs[j], ins.operands[0]):
                    out.add(i)
    return out


def _constant(ins):
    """mov of a 32-bit immediate into a register."""
    return ins.opcode == "mov" and ins.guard is None and len(ins.operands) == 2 and \
        isinstance(ins.operands[0], Reg) and isinstance(ins.operands[1], Imm) and \
        ins.type is not None and ins.type.bits == 32


def _takes_immediate(ins, reg):
    """A 32-bit float or integer arithmetic instruction (the opcode table's fp32 / integer
    mix classes: FFMA, FMUL, FADD, FSETP, IMAD, IADD3, LOP3... in SASS) with no immediate
    of its own, reading `reg` in one operand: SASS gives it the constant as its one
    immediate operand."""
    return ins.cls in ("fp32", "integer") and ins.type is not None and \
        ins.type.bits == 32 and not any(isinstance(o, Imm) for o in ins.operands) and \
        sum(o == reg for o in ins.operands[1:]) == 1


def unrolled_control(instrs, loops, limit):
    """Indices of the counter's add and compare of each one-block loop (`loops`: (first, last)
    instruction indices, the last its back-edge branch) of at most `limit` instructions whose
    branch tests (setp) a 32-bit register the body steps by a constant (add): ptxas unrolls
    such a loop 4x (isa memory_model.ptxas_unroll_max_instructions, measured with ptxas)."""
    out = set()
    for head, end in loops:
        br = instrs[end]
        body = range(head, end)
        if end - head + 1 > limit or br.guard is None or any(
                instrs[i].row.effect in ("branch", "exit", "barrier") for i in body):
            continue
        cmp = [i for i in body if br.guard in instrs[i].defs()]
        if len(cmp) != 1 or instrs[cmp[0]].opcode != "setp" or instrs[cmp[0]].guard is not None:
            continue
        tested = instrs[cmp[0]].operands[1:]
        step = [i for i in body if _typed(instrs[i], "add", _I32)
                and isinstance(instrs[i].operands[2], Imm)
                and instrs[i].operands[0] == instrs[i].operands[1]
                and instrs[i].operands[0] in tested]
        if len(step) == 1:
            out |= {cmp[0], step[0]}
    return out


def unrolled_loops(instrs, loops, limit):
    """The innermost loops (`loops`: (first, last) instruction indices) ptxas unrolls with the
    iterations' loads issued together: at most `limit` instructions, no barrier or exit, one
    conditional branch (the exit test, at the top of a rotated loop or at its back edge) whose
    setp compares a 32- or 64-bit register the loop steps by a constant. SASS of such loops
    (ptxas 13.0 -O3, sm_90): a dp4a row loop (top-tested, 32-bit counter) and Triton's
    embedding-bag loop (64-bit counter) both become 4 copies whose 8 LDG issue before the
    first use, so four iterations' loads are in flight per warp."""
    out = []
    for head, end in loops:
        if end - head + 1 > limit or any(h != head and head <= h <= end and e <= end
                                         for h, e in loops):
            continue
        body = range(head, end + 1)
        if any(instrs[i].row.effect in ("exit", "barrier") for i in body):
            continue
        conds = [i for i in body if instrs[i].row.effect == "branch"
                 and instrs[i].guard is not None]
        if len(conds) != 1:
            continue
        cmp = [i for i in body if instrs[conds[0]].guard in instrs[i].defs()]
        if len(cmp) != 1 or instrs[cmp[0]].opcode != "setp":
            continue
        tested = instrs[cmp[0]].operands[1:]
        if any(_typed(instrs[i], "add", _INT) and isinstance(instrs[i].operands[2], Imm)
               and instrs[i].operands[0] == instrs[i].operands[1]
               and instrs[i].operands[0] in tested for i in body):
            out.append((head, end))
    return out
