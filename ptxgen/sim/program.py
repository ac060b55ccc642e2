"""A kernel compiled for simulation: flat instructions with their costs, basic blocks, loops,
and the slice of instructions that decide control flow.

Everything the event loop touches per dynamic instruction is precomputed here into plain tuples
and ints, because that loop runs hundreds of thousands of times per simulation.
"""
import re
from dataclasses import dataclass, field

from ..errors import PtxgenError
from ..ir.instr import Instr, Label
from ..ir.opcodes import FLOP_MODELS
from ..ir.values import Imm, Reg
from .fold import folded, unrolled_control, unrolled_loops

_BRANCHTARGETS = re.compile(r"^\s*\.branchtargets\s+(.*?);?\s*$", re.S)

# Kinds of instructions for the timing model.
ALU, LDG, STG, LDS, STS, FIXED, ATOM, BAR, BRANCH, EXIT = range(10)
KIND_NAMES = ("alu", "ldg", "stg", "lds", "sts", "fixed", "atom", "bar", "branch", "exit")


@dataclass
class StaticInstr:
    index: int
    instr: Instr
    text: str
    kind: int
    uses: tuple                 # register ids read (guard included)
    defs: tuple                 # register ids written
    unit: int                   # index into Program.units
    latency: float
    interval: float
    bytes: int = 0              # bytes one warp moves (memory kinds)
    guard_bit: int = -1         # position among its block's guarded memory instructions
    guard_id: int = -1          # register id of the guard predicate
    barrier: tuple = None       # (id, threads or 0 for the whole CTA, waits) of bar/barrier
    queued: bool = False        # an async tensor op: waits in its pipe's queue, not the warp
    free: bool = False          # folded by ptxas into a neighbour (ptxgen.sim.fold): no issue
    unroll: int = 1             # global loads of a loop ptxas unrolls: iterations whose loads
                                # are in flight together (each waits 1/unroll of the latency)
    alt: tuple = None           # (unit, interval) of a second pipe that can take it instead
    extra: tuple = ()           # ((count, unit, interval), …): SASS instructions ptxas adds
                                # around it (a range fix-up, register spills), no PTX of their own


@dataclass
class Block:
    id: int
    start: int                  # first instruction index
    end: int                    # one past the last
    guarded: list = field(default_factory=list)   # indices of guarded memory instructions


@dataclass
class Loop:
    id: int
    header: int                 # instruction index of the first instruction of the loop
    end: int                    # index of the last back-edge branch
    line: int = 0

    def contains(self, i):
        return self.header <= i <= self.end


@dataclass
class Program:
    kernel: object
    instrs: list                # StaticInstr, in order
    blocks: list
    block_of: list              # instruction index → block id
    loops: list
    loop_of: list               # instruction index → innermost loop id or -1
    units: list                 # unit names (index = StaticInstr.unit)
    nregs: int
    reg_index: dict             # Reg → id
    slice: set                  # instruction indices the control-flow interpreter runs
    targets: dict               # branch instruction index → target instruction index
    tables: dict = field(default_factory=dict)   # brx.idx index → its targets' indices


_LOAD_KIND = {"global": LDG, "generic": LDG, "shared": LDS}
_STORE_KIND = {"global": STG, "generic": STG, "shared": STS}


def _kind(ins):
    """The timing kind, from the opcode table's effect and the state space."""
    effect, space = ins.row.effect, ins.space
    if effect == "load":
        # a prefetch writes no register: nothing waits for it
        return _LOAD_KIND.get(space, FIXED) if ins.n_dests else FIXED
    if effect == "store":
        return _STORE_KIND.get(space, FIXED)
    if effect == "atomic":
        return ATOM if space in ("global", "generic") else FIXED
    if effect == "barrier":
        return BAR if not ins.mods or ins.mods[0] in ("sync", "red", "arrive") else ALU
    if effect == "branch":
        return BRANCH
    if effect == "exit":
        return EXIT
    if effect in ("fence", "async"):
        return FIXED
    return ALU


def _queued(ins):
    """wgmma.mma_async (an async op with a tensor FLOP model) is handed to the tensor core and
    the warp goes on: it queues behind the pipe's earlier work instead of stalling the warp's
    issue (what lets FlashAttention-3's softmax run while P·V is on the tensor cores)."""
    return ins.row.effect == "async" and ins.row.flops in FLOP_MODELS


def _barrier(ins):
    """(barrier id, participating threads or 0 for all, whether the warp waits): bar.sync a{, b}
    and bar.red wait, bar.arrive only counts. A barrier id or count in a register is taken as
    barrier 0 of the whole CTA."""
    ops = [o for o in ins.operands if isinstance(o, Imm) or isinstance(o, Reg)]
    if ins.mods and ins.mods[0] == "red":
        ops = ops[1:]                 # bar.red's first operand is its destination
    bid = int(ops[0].value) if ops and isinstance(ops[0], Imm) else 0
    count = int(ops[1].value) if len(ops) > 1 and isinstance(ops[1], Imm) else 0
    return bid, count, not (ins.mods and ins.mods[0] == "arrive")


def _either_pipe(ins, info, table):
    """A 32-bit integer add or subtract, or a select of two constants (costed as IALU), which
    SASS can run on the FMA pipe. ptxas 13.0 writes `selp.u32 d, 1, 0, p` as SEL on the integer
    pipe or as a predicated IMAD.MOV of the constant on the FMA pipe (held8's ptx_byte_bins: of
    64, 60 became `@P IMAD.MOV` and 4 SEL, leaving 115 integer-pipe and 113 FMA-pipe
    instructions); a select of a register stays SEL (held5's triton_dropout: 8 `selp.b32 d, r,
    0, p`, 8 SEL)."""
    if ins.opcode == "selp" and not all(isinstance(o, Imm) for o in ins.operands[1:3]):
        return False
    return ins.opcode in ("add", "sub", "selp") and ins.type is not None and \
        ins.type.name in ("s32", "u32", "b32") and info is table.ops.get("IALU") and \
        "IMAD" in table.ops


def _range_fixup(ins, table):
    """SASS instructions ptxas adds around an f32 `.approx` special function without `.ftz`
    (the opcode table's @sfu rows; isa memory_model.ptxas_sfu_range_fixup_instructions)."""
    n = (table.memory_model or {}).get("ptxas_sfu_range_fixup_instructions")
    if not n or "FMUL" not in table.ops or ins.row is None or ins.row.timing != "@sfu":
        return 0
    t = ins.type
    return int(n) if "approx" in ins.mods and "ftz" not in ins.mods and t is not None and \
        t.name == "f32" else 0


def _int_divide(st, ins, table, divisors):
    """ptxas's SASS for an integer div/rem by a register (the opcode table's SFU/IMAD rows on
    an integer type): a reciprocal of the divisor (I2F.U32.RP, MUFU.RCP, F2I.FTZ.U32.TRUNC and
    integer refinement), computed once per divisor register and shared by every div/rem by it,
    then a quotient/remainder correction per instruction (IMAD.HI, IMAD, ISETP, predicated
    IADDs, SEL). isa memory_model.ptxas_int_reciprocal_instructions / _divide_instructions;
    the two conversions and the MUFU go to the XU pipe (CONV, SFU), the rest half to the FMA
    pipe (IMAD) and half to the ALU (IALU); the correction's chain adds to the latency. `divisors`: the
    divisor registers seen so far (updated)."""
    mm = table.memory_model or {}
    rcp, per = mm.get("ptxas_int_reciprocal_instructions"), mm.get("ptxas_int_divide_instructions")
    t = ins.type
    if not (rcp and per) or ins.row is None or ins.row.timing != "SFU/IMAD" or t is None or \
            not t.is_int or len(ins.sources) != 2 or not isinstance(ins.sources[1], Reg) or \
            not all(k in table.ops for k in ("IMAD", "CONV", "SFU")):
        return
    units = list(table.units)
    imad, conv, sfu = table.ops["IMAD"], table.ops["CONV"], table.ops["SFU"]
    n_imad = int(per) - 1                       # the div/rem itself already issues as one IMAD
    st.latency += n_imad * float(imad.latency)  # the correction chain, after the dividend
    add = []
    if ins.sources[1] not in divisors:
        # the reciprocal costs issue slots and pipes but no latency in the dividend's
        # chain: ptxas hoists it to where the divisor is known (divmod_roll's SASS computes
        # all four at the top, their I2Fs and MUFUs interleaved)
        divisors.add(ins.sources[1])
        n_imad += int(rcp) - 3
        add += [(2, units.index(conv.unit), float(conv.issue_interval)),
                (1, units.index(sfu.unit), float(sfu.issue_interval))]
    # the integer work splits about evenly between the pipes (div.u32's SASS: 9 IMAD /
    # IMAD.HI / VIADD / HFMA2.MMA on the FMA pipe, 7 ISETP / IADD3 / LOP3 on the ALU pipe)
    alu = table.ops.get("IALU", imad)
    add += [(n_imad - n_imad // 2, units.index(imad.unit), float(imad.issue_interval)),
            (n_imad // 2, units.index(alu.unit), float(alu.issue_interval))]
    st.extra = tuple(st.extra) + tuple(add)


def _float_divide(st, ins, table):
    """ptxas's SASS for an IEEE div.rn.f32 (the opcode table's SFU row on f32, which costs
    the MUFU.RCP): its fast path adds FCHK, five dependent FFMA refining the reciprocal and the
    quotient, and a predicated BRA around the out-of-line slow path (rarely taken: operands
    outside the fast range). isa memory_model.ptxas_f32_divide_ffma_instructions /
    _other_instructions; the FFMAs are in the quotient's dependency chain."""
    mm = table.memory_model or {}
    ffma, other = mm.get("ptxas_f32_divide_ffma_instructions"), \
        mm.get("ptxas_f32_divide_other_instructions")
    t = ins.type
    if not (ffma and other) or ins.opcode != "div" or t is None or t.name != "f32" or \
            "approx" in ins.mods or "full" in ins.mods or \
            not all(k in table.ops for k in ("FMA", "IALU")):
        return
    units = list(table.units)
    fma, alu = table.ops["FMA"], table.ops["IALU"]
    st.latency += int(ffma) * float(fma.latency)
    st.extra = tuple(st.extra) + (
        (int(ffma), units.index(fma.unit), float(fma.issue_interval)),
        (int(other), units.index(alu.unit), float(alu.issue_interval)))


def _int64_halves(st, ins, table):
    """ptxas's SASS for 64-bit integer compares and multiplies, which the GPU does on 32-bit
    halves: setp on a 64-bit integer is ISETP + ISETP.EX (the high half after the low half's
    predicate); mul.lo / mad.lo on 64 bits IMAD.WIDE.U32 and two IMAD for the cross terms, one
    fewer by an immediate (its cross term is folded), the IADD3 that sums the high halves
    merged with the add of the address it usually feeds (isa memory_model.
    ptxas_int64_compare_instructions / _multiply_instructions). Numba's loop counters, bounds
    checks and index arithmetic are 64-bit. 64-bit adds, shifts and logic stay one
    instruction: ptxas folds most of them into address arithmetic (IMAD.WIDE, LEA.HI.X, the
    load's offset) or drops a known high half; charging two each made the benchmark set worse
    (docs/MODEL.md)."""
    mm = table.memory_model or {}
    t = ins.type
    if t is None or t.kind not in ("uint", "sint", "bits") or t.bits != 64 or \
            ins.row is None or ins.row.effect != "pure":
        return
    from ..isa import op_class
    cls = op_class(ins)
    key = ("ptxas_int64_compare_instructions" if ins.opcode == "setp" and cls == "IALU" else
           "ptxas_int64_multiply_instructions" if cls == "IMAD" else None)
    n = int(mm.get(key) or 0) if key else 0
    if key == "ptxas_int64_multiply_instructions" and \
            any(isinstance(o, Imm) for o in ins.sources):
        n -= 1
    if n < 2 or cls not in table.ops:
        return
    info = table.ops[cls]
    st.latency += float(info.latency)            # the high half waits for the low half
    st.extra = tuple(st.extra) + (
        (n - 1, list(table.units).index(info.unit), float(info.issue_interval)),)


def add_spills(prog, table, load_bytes, store_bytes):
    """ptxas's register spills (its -v report: bytes of local loads and stores per thread) as
    local-memory instructions spread evenly over the program's issuing instructions: where
    ptxas puts them is not known, so each static instruction carries an equal share (a loop's
    instructions then spill as often as they run). One 4-byte LDL/STL per 4 bytes."""
    issuing = [st for st in prog.instrs if not st.free]
    if not issuing or not (load_bytes or store_bytes):
        return
    units = prog.units
    add = []
    for nbytes, cls in ((load_bytes, "LDL"), (store_bytes, "STL")):
        info = table.ops.get(cls)
        if nbytes and info is not None:
            add.append((nbytes / 4 / len(issuing), units.index(info.unit),
                        float(info.issue_interval)))
    for st in issuing:
        st.extra = tuple(st.extra) + tuple(add)


def _access_bytes(ins, warp_size):
    t = ins.type
    size = t.nbytes if t is not None else 4
    return warp_size * size * ins.vector_width


def compile_kernel(kernel, table):
    """Program of `kernel` costed with the isa table."""
    instrs, label_at, tables, last_label = [], {}, {}, None
    for s in kernel.body:
        if isinstance(s, Label):
            label_at[s.name] = len(instrs)
            last_label = s.name
            continue
        if isinstance(s, Instr):
            instrs.append(s)
        else:
            m = _BRANCHTARGETS.match(str(s))
            if m and last_label is not None:
                tables[last_label] = [x.strip() for x in m.group(1).split(",") if x.strip()]
        last_label = None
    if not instrs:
        raise PtxgenError(f"kernel {kernel.name} has no instructions to simulate")
    n = len(instrs)
    reg_index = {}

    def rid(r):
        if r not in reg_index:
            reg_index[r] = len(reg_index)
        return reg_index[r]

    units = list(table.units)
    warp = table.header.warp_size
    statics, targets, brx = [], {}, {}
    divisors = set()
    for i, ins in enumerate(instrs):
        info = table.op_for(ins)
        kind = _kind(ins)
        st = StaticInstr(i, ins, str(ins), kind, tuple(rid(r) for r in ins.timing_uses()),
                         tuple(rid(r) for r in ins.defs()), units.index(info.unit),
                         float(info.latency), float(info.issue_interval))
        if ins.guard is not None:
            st.guard_id = rid(ins.guard)
        st.queued = _queued(ins)
        if _either_pipe(ins, info, table):
            # ptxas writes such adds as IADD3 on the integer pipe or as VIADD / IMAD.IADD on
            # the FMA pipe, whichever balances the code (smem_stride's SASS: the loop's
            # `add.s32 r, i, 1..3` are VIADDs beside the LOP3s and LEAs): the engine issues
            # it to whichever of the two frees first, at that pipe's integer-add rate
            imad = table.ops["IMAD"]
            st.alt = (units.index(imad.unit), float(imad.issue_interval))
        fix = _range_fixup(ins, table)
        if fix:
            # ptxas's denormal-range fix-up around the MUFU: FP32 instructions that take the
            # scheduler's issue slots and the FMA pipe, in the MUFU's dependency chain
            fm = table.ops["FMUL"]
            st.extra = ((fix, units.index(fm.unit), float(fm.issue_interval)),)
            st.latency += fix * float(fm.latency)
        _int_divide(st, ins, table, divisors)
        _float_divide(st, ins, table)
        _int64_halves(st, ins, table)
        if kind in (LDG, STG, LDS, STS, ATOM):
            st.bytes = _access_bytes(ins, warp)
        if kind == BAR:
            st.barrier = _barrier(ins)
        if kind == BRANCH:
            names = [o.name for o in ins.operands if hasattr(o, "name")
                     and not isinstance(o, Reg)]
            if ins.opcode == "brx" and names:
                # brx.idx jumps through a '.branchtargets' table
                names = tables.get(names[-1], names[-1:])
            if not names or any(n not in label_at for n in names):
                raise PtxgenError(f"kernel {kernel.name}: branch `{ins}` targets no label")
            targets[i] = label_at[names[0]]
            if ins.opcode == "brx":
                brx[i] = [label_at[n] for n in names]
        statics.append(st)

    # basic blocks: leaders are the entry, branch targets (labels) and fall-throughs
    leaders = {0} | {t for t in label_at.values() if t < n}
    for i, st in enumerate(statics):
        if st.kind in (BRANCH, EXIT) and i + 1 < n:
            leaders.add(i + 1)
    starts = sorted(leaders)
    blocks, block_of = [], [0] * n
    for b, s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else n
        blk = Block(b, s, e)
        for i in range(s, e):
            block_of[i] = b
            st = statics[i]
            if st.instr.guard is not None and st.kind in (LDG, STG, LDS, STS, ATOM, FIXED):
                st.guard_bit = len(blk.guarded)
                blk.guarded.append(i)
        blocks.append(blk)

    for i in folded(instrs, [(blk.start, blk.end) for blk in blocks]):
        if statics[i].kind == ALU:
            statics[i].free = True

    # loops: a branch to an earlier (or the same) position closes one; back-edges to one header
    # form a single loop
    heads = {}
    for i, t in targets.items():
        for t in brx.get(i, [t]):
            if t <= i:
                heads[t] = max(heads.get(t, i), i)
    loops = [Loop(k, h, e, instrs[h].line) for k, (h, e) in enumerate(sorted(heads.items()))]
    limit = (table.memory_model or {}).get("ptxas_unroll_max_instructions")
    if limit:
        for i in unrolled_control(instrs, [(lp.header, lp.end) for lp in loops], limit):
            statics[i].free = True
    mm = table.memory_model or {}
    if mm.get("ptxas_unroll_loads_max_instructions") and mm.get("ptxas_unroll_factor"):
        for head, end in unrolled_loops(instrs, [(lp.header, lp.end) for lp in loops],
                                        mm["ptxas_unroll_loads_max_instructions"]):
            for i in range(head, end + 1):
                if statics[i].kind == LDG:
                    statics[i].unroll = mm["ptxas_unroll_factor"]
    loop_of = [-1] * n
    for lp in sorted(loops, key=lambda lp: lp.end - lp.header, reverse=True):
        for i in range(lp.header, lp.end + 1):
            loop_of[i] = lp.id          # narrower loops overwrite: innermost wins

    return Program(kernel, statics, blocks, block_of, loops, loop_of, units, len(reg_index),
                   reg_index, _control_slice(statics, instrs, reg_index), targets, brx)


def _control_slice(statics, instrs, reg_index):
    """Instructions whose results reach a branch condition or a memory instruction's guard."""
    needed = set()
    for st in statics:
        ins = st.instr
        if ins.opcode == "brx" and ins.operands and isinstance(ins.operands[0], Reg):
            needed.add(reg_index[ins.operands[0]])
        if ins.guard is not None and st.kind in (BRANCH, LDG, STG, LDS, STS, ATOM, FIXED, BAR,
                                                 EXIT):
            needed.add(reg_index[ins.guard])
    return _closure(statics, (), needed)[0]


def backward_closure(prog, chosen, needed):
    """(`chosen` widened by every instruction the registers `needed` depend on, those
    registers with every register they are computed from)."""
    return _closure(prog.instrs, chosen, needed)


def _closure(instrs, chosen, needed):
    chosen, needed = set(chosen), set(needed)
    by_def = {}
    for st in instrs:
        for d in st.defs:
            by_def.setdefault(d, []).append(st.index)
    work = list(needed)
    while work:
        for i in by_def.get(work.pop(), ()):
            if i not in chosen:
                chosen.add(i)
                for u in instrs[i].uses:
                    if u not in needed:
                        needed.add(u)
                        work.append(u)
    return chosen, needed
