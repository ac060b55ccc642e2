"""The opcode table: one row per PTX opcode (or opcode plus leading modifiers), read by every stage.

In the style of GPGPU-Sim's opcodes.def: what an instruction writes, what it does to memory and
ordering, which class it counts in, what it costs, how the emulator runs it, how many FLOPs it
does and which PTX ISA version and target it needs are data here, not `if opcode in …` code in
the IR, verifier, isa classifier, scheduler, simulator, emulator, roofline, emitter and parser.
An instruction finds its row by the longest match of its opcode and leading modifiers
(`cp.async.bulk.tensor.2d…` → row `cp.async.bulk.tensor`, `cp.async.ca…` → `cp.async`, `add.f32`
→ `add`).

Columns:
  dest     which operands are written: '-' none; 'd' the first operand (a register, an `a|b` pair
           like `elect.sync %r|%p` or setp's, or a `{…}` vector: every register in it);
           'acc' the first operand is an accumulator vector, written and also read unless the
           scale-d operand (the 4th) is the immediate 0 (wgmma.mma_async)
  effect   pure (writes only its destinations) | load | store | atomic | fence (orders memory
           or the warp, or has effects the IR does not model) | barrier (a CTA-wide bar/barrier)
           | async (starts work that completes later) | branch | exit | call | control (other
           control: brkpt)
  mix      the class Instr.cls reports: a fixed name, or a rule: @space (memory by state
           space), @type (fp32/fp64/fp16/integer/other by the instruction type), @move (move,
           special when it reads a special register)
  timing   the isa/*.toml [ops.X] class: a fixed name, 'F/I' (float types: F for f32, HFMA for
           16-bit, FP64 for f64; otherwise I), or a rule: @load / @store (by state space), @cvt,
           @mov, @sfu (SFU, FP64 for f64; ptxas wraps the f32 `.approx` form without `.ftz` in
           a denormal-range fix-up of extra FP32 instructions, isa memory_model
           ptxas_sfu_range_fixup_instructions: rows whose SASS has no such fix-up — sin, cos,
           tanh — name SFU itself). A class a machine model does not define costs as its OTHER.
  emu      the emulator builder key (ptxgen/emu's BUILDERS), 'nop' (no effect the emulator
           models) or '-' (not emulated: running it reports so)
  flops    per lane and execution when the instruction has a float type (packed x2 types
           count twice); 'mma' = 2·m·n·k per warp, 'wgmma' = 2·m·n·k per warpgroup, from the
           shape modifier (m16n8k16)
  ptx, target  the oldest PTX ISA version and target that accept it ('-': every target
           ptxgen emits for, PTX ISA 7.0 / sm_80). Sources: NVIDIA, "Parallel Thread Execution
           ISA Version 9.0", chapter 9, each instruction's "PTX ISA Notes" and "Target ISA Notes";
           the sm_80+ / sm_90 / sm_90a rows are checked against ptxas by tests/test_opcodes.py.
  space    the state space implied when no modifier names one ('-': none)
  operands how the register operands are typed (the verifier checks it, ir/verify.py RULES;
           the builder reads it for the type modifier and the shift amount):
           typed    every register operand holds the instruction's type
           bits     typed, and the type is named by its width (.b32; on predicates .pred)
           shift    destination and value typed, the shift amount 32-bit (.u32)
           shift_bits  shift, with the type named by its width (shl.b32)
           cvt      destination of the first type, source of the second (cvt.f32.s32)
           setp     a predicate destination (or a pair), typed sources
           selp     typed destination and values, a predicate selector
           wide     typed; with .wide the destination (and mad's addend) twice as wide
           load     a typed destination of the access's vector width (ld)
           store    a typed stored value of the access's vector width (st)
           move     typed destination; a vector {a, b} moves the type's width in pieces
           mixed    operands of several types (MMA fragments, descriptors, mbarrier
                    states), not type-checked
"""
import functools
import re
from dataclasses import dataclass

from ..arch import BASELINE_PTX, BASELINE_TARGET   # what a row without needs needs
from . import types as T

# name                     dest effect  mix              timing    emu                        flops ptx target  space   operands
_TABLE = """
abs                        d    pure    @type            IALU/IALU abs                        -     -   -       -       typed
activemask                 d    pure    warp             SHFL      activemask                 -     -   -       -       typed
add                        d    pure    @type            FADD/IALU add                        1     -   -       -       typed
addc                       d    pure    @type            IALU      addc                       -     -   -       -       typed
alloca                     d    fence   @type            OTHER     -                          -     7.3 sm_52   -       typed
and                        d    pure    @type            IALU      and                        -     -   -       -       bits
applypriority              -    fence   @type            OTHER     nop                        -     7.4 sm_80   -       typed
atom                       d    atomic  @space           ATOM      atom                       -     -   -       generic typed
bar                        -    barrier sync             BAR       bar                        -     -   -       -       typed
bar.warp                   -    fence   sync             BAR       bar                        -     -   -       -       typed
barrier                    -    barrier sync             BAR       barrier                    -     -   -       -       typed
barrier.cluster            -    fence   sync             BAR       barrier.cluster            -     7.8 sm_90   -       typed
bfe                        d    pure    @type            IALU      bfe                        -     -   -       -       typed
bfi                        d    pure    @type            IALU      bfi                        -     -   -       -       typed
bfind                      d    pure    @type            IALU      bfind                      -     -   -       -       typed
bmsk                       d    pure    @type            IALU      -                          -     7.6 sm_70   -       typed
bra                        -    branch  control          BRANCH    -                          -     -   -       -       typed
brev                       d    pure    @type            IALU      brev                       -     -   -       -       bits
brkpt                      -    control control          BRANCH    nop                        -     -   -       -       typed
brx                        -    branch  control          BRANCH    -                          -     6.0 sm_30   -       typed
call                       -    call    control          BRANCH    -                          -     -   -       -       typed
clusterlaunchcontrol       -    async   sync             OTHER     -                          -     8.6 sm_100  -       mixed
clusterlaunchcontrol.query_cancel d    pure    @type            OTHER     -                          -     8.6 sm_100  -       mixed
clz                        d    pure    @type            IALU      clz                        -     -   -       -       bits
cnot                       d    pure    @type            IALU      cnot                       -     -   -       -       typed
copysign                   d    pure    @type            IALU/IALU copysign                   -     -   -       -       typed
cos                        d    pure    special_function SFU       cos                        1     -   -       -       typed
cp                         -    async   @space           LDG       cp                         -     -   -       -       typed
cp.async                   -    async   @space           LDG       cp                         -     7.0 sm_80   shared  typed
cp.async.commit_group      -    fence   sync             LDG       cp                         -     7.0 sm_80   -       typed
cp.async.wait_group        -    fence   sync             LDG       cp                         -     7.0 sm_80   -       typed
cp.async.wait_all          -    fence   sync             LDG       cp                         -     7.0 sm_80   -       typed
cp.async.mbarrier          -    async   sync             OTHER     -                          -     7.0 sm_80   -       mixed
cp.async.bulk              -    async   @space           TMA       cp.async.bulk              -     8.0 sm_90   -       mixed
cp.async.bulk.tensor       -    async   @space           TMA       cp.async.bulk.tensor       -     8.0 sm_90   -       mixed
cp.async.bulk.commit_group -    fence   sync             OTHER     cp.async.bulk.commit_group -     8.0 sm_90   -       mixed
cp.async.bulk.wait_group   -    fence   sync             OTHER     cp.async.bulk.wait_group   -     8.0 sm_90   -       mixed
cp.reduce.async.bulk       -    async   @space           TMA       -                          -     8.0 sm_90   -       mixed
createpolicy               d    pure    @type            OTHER     nop                        -     7.4 sm_80   -       typed
cvt                        d    pure    conversion       @cvt      cvt                        -     -   -       -       cvt
cvta                       d    pure    conversion       IALU      cvta                       -     -   -       -       move
discard                    -    fence   @type            OTHER     nop                        -     7.4 sm_80   -       typed
div                        d    pure    @type            SFU/IMAD  div                        1     -   -       -       typed
dp2a                       d    pure    @type            IMAD      dp2a                       -     -   -       -       typed
dp4a                       d    pure    @type            IMAD      dp4a                       -     -   -       -       typed
elect                      d    pure    warp             SHFL      elect                      -     8.0 sm_90   -       typed
ex2                        d    pure    special_function @sfu      ex2                        1     -   -       -       typed
exit                       -    exit    control          BRANCH    -                          -     -   -       -       typed
fence                      -    fence   sync             BAR       nop                        -     -   -       -       typed
fence.proxy.async          -    fence   sync             BAR       fence.proxy.async          -     8.0 sm_90   -       typed
fence.mbarrier_init        -    fence   sync             BAR       nop                        -     8.0 sm_90   -       typed
fence.proxy.tensormap      -    fence   sync             BAR       nop                        -     8.3 sm_90   -       typed
fma                        d    pure    @type            FMA/IMAD  fma                        2     -   -       -       typed
fns                        d    pure    @type            IALU      -                          -     -   -       -       typed
getctarank                 d    pure    @type            OTHER     getctarank                 -     7.8 sm_90   -       typed
griddepcontrol             -    fence   sync             OTHER     nop                        -     7.8 sm_90   -       typed
isspacep                   d    pure    @type            IALU      isspacep                   -     -   -       -       typed
istypeof                   d    pure    @type            OTHER     -                          -     -   -       -       mixed
ld                         d    load    @space           @load     ld                         -     -   -       generic load
ldmatrix                   d    load    @space           @load     ldmatrix                   -     6.5 sm_75   shared  mixed
ldu                        d    load    @space           @load     ldu                        -     -   -       generic typed
lg2                        d    pure    special_function @sfu      lg2                        1     -   -       -       typed
lop3                       d    pure    @type            IALU      lop3                       -     -   -       -       typed
mad                        d    pure    @type            FMA/IMAD  mad                        2     -   -       -       wide
mad24                      d    pure    @type            IMAD      mad24                      -     -   -       -       typed
madc                       d    pure    @type            IMAD      madc                       -     -   -       -       typed
mapa                       d    pure    @type            OTHER     mapa                       -     7.8 sm_90   -       typed
match                      d    pure    warp             SHFL      match                      -     -   -       -       typed
max                        d    pure    @type            IALU/IALU max                        1     -   -       -       typed
mbarrier                   d    atomic  sync             OTHER     -                          -     7.0 sm_80   shared  mixed
mbarrier.init              -    atomic  sync             OTHER     mbarrier.init              -     7.0 sm_80   shared  mixed
mbarrier.inval             -    atomic  sync             OTHER     mbarrier.inval             -     7.0 sm_80   shared  mixed
mbarrier.arrive            d    atomic  sync             OTHER     mbarrier.arrive            -     7.0 sm_80   shared  mixed
mbarrier.arrive.expect_tx  d    atomic  sync             OTHER     mbarrier.arrive            -     8.0 sm_90   shared  mixed
mbarrier.arrive_drop       d    atomic  sync             OTHER     mbarrier.arrive            -     7.0 sm_80   shared  mixed
mbarrier.expect_tx         -    atomic  sync             OTHER     mbarrier.expect_tx         -     8.0 sm_90   shared  mixed
mbarrier.complete_tx       -    atomic  sync             OTHER     mbarrier.complete_tx       -     8.0 sm_90   shared  mixed
mbarrier.test_wait         d    atomic  sync             OTHER     mbarrier.test_wait         -     7.0 sm_80   shared  mixed
mbarrier.try_wait          d    atomic  sync             OTHER     mbarrier.try_wait          -     7.8 sm_90   shared  mixed
mbarrier.pending_count     d    pure    sync             OTHER     mbarrier.pending_count     -     7.0 sm_80   -       mixed
membar                     -    fence   sync             BAR       nop                        -     -   -       -       typed
min                        d    pure    @type            IALU/IALU min                        1     -   -       -       typed
mma                        d    pure    tensor           MMA       mma                        mma   7.0 sm_80   -       mixed
mov                        d    pure    @move            @mov      mov                        -     -   -       -       move
movmatrix                  d    pure    @type            OTHER     -                          -     7.8 sm_75   -       mixed
mul                        d    pure    @type            FMUL/IMAD mul                        1     -   -       -       wide
mul24                      d    pure    @type            IMAD      mul24                      -     -   -       -       typed
multimem                   d    atomic  @type            OTHER     -                          -     8.1 sm_90   -       mixed
multimem.st                -    store   @type            OTHER     -                          -     8.1 sm_90   -       mixed
multimem.red               -    atomic  @type            OTHER     -                          -     8.1 sm_90   -       mixed
nanosleep                  -    fence   sync             BAR       nop                        -     -   -       -       typed
neg                        d    pure    @type            IALU/IALU neg                        -     -   -       -       typed
not                        d    pure    @type            IALU      not                        -     -   -       -       bits
or                         d    pure    @type            IALU      or                         -     -   -       -       bits
pmevent                    -    fence   @type            OTHER     nop                        -     -   -       -       typed
popc                       d    pure    @type            IALU      popc                       -     -   -       -       bits
prefetch                   -    load    @space           LDG       nop                        -     -   -       -       typed
prefetchu                  -    load    @space           LDG       nop                        -     -   -       -       typed
prmt                       d    pure    move             IALU      prmt                       -     -   -       -       typed
rcp                        d    pure    special_function @sfu      rcp                        1     -   -       -       typed
red                        -    atomic  @space           ATOM      red                        -     -   -       generic typed
red.async                  -    async   @space           ATOM      red.async                  -     8.1 sm_90   -       typed
redux                      d    pure    warp             SHFL      redux                      -     7.0 sm_80   -       typed
rem                        d    pure    @type            SFU/IMAD  rem                        -     -   -       -       typed
ret                        -    exit    control          BRANCH    -                          -     -   -       -       typed
rsqrt                      d    pure    special_function @sfu      rsqrt                      1     -   -       -       typed
sad                        d    pure    @type            IALU      sad                        -     -   -       -       typed
selp                       d    pure    move             IALU/IALU selp                       -     -   -       -       selp
set                        d    pure    @type            IALU/IALU set                        -     -   -       -       typed
setmaxnreg                 -    fence   @type            OTHER     setmaxnreg                 -     8.0 sm_90a  -       typed
setp                       d    pure    @type            IALU/IALU setp                       -     -   -       -       setp
shf                        d    pure    @type            IALU      shf                        -     -   -       -       typed
shfl                       d    pure    warp             SHFL      shfl                       -     -   -       -       typed
shl                        d    pure    @type            IALU      shl                        -     -   -       -       shift_bits
shr                        d    pure    @type            IALU      shr                        -     -   -       -       shift
sin                        d    pure    special_function SFU       sin                        1     -   -       -       typed
slct                       d    pure    @type            IALU/IALU slct                       -     -   -       -       typed
sqrt                       d    pure    special_function @sfu      sqrt                       1     -   -       -       typed
st                         -    store   @space           @store    st                         -     -   -       generic store
st.async                   -    async   @space           STS       st.async                   -     8.1 sm_90   -       store
stackrestore               -    fence   @type            OTHER     -                          -     7.3 sm_52   -       typed
stacksave                  d    fence   @type            OTHER     -                          -     7.3 sm_52   -       typed
stmatrix                   -    store   @space           @store    stmatrix                   -     7.8 sm_90   shared  mixed
sub                        d    pure    @type            FADD/IALU sub                        1     -   -       -       typed
subc                       d    pure    @type            IALU      subc                       -     -   -       -       typed
suld                       d    fence   @type            OTHER     -                          -     -   -       -       mixed
suq                        d    pure    @type            OTHER     -                          -     -   -       -       mixed
sured                      -    fence   @type            OTHER     -                          -     -   -       -       mixed
sust                       -    fence   @type            OTHER     -                          -     -   -       -       mixed
szext                      d    pure    @type            IALU      -                          -     7.6 sm_70   -       typed
tanh                       d    pure    special_function SFU       tanh                       1     7.0 sm_75   -       typed
tcgen05                    -    async   tensor           OTHER     -                          -     8.6 sm_100a -       mixed
tensormap                  -    fence   @type            OTHER     -                          -     8.3 sm_90   -       mixed
testp                      d    pure    @type            IALU/IALU testp                      -     -   -       -       typed
tex                        d    fence   @type            OTHER     -                          -     -   -       -       mixed
tld4                       d    fence   @type            OTHER     -                          -     -   -       -       mixed
trap                       -    exit    control          BRANCH    trap                       -     -   -       -       typed
txq                        d    pure    @type            OTHER     -                          -     -   -       -       mixed
vote                       d    pure    warp             SHFL      vote                       -     -   -       -       typed
wgmma                      -    fence   sync             OTHER     -                          -     8.0 sm_90a  -       mixed
wgmma.mma_async            acc  async   tensor           WGMMA     wgmma.mma_async            wgmma 8.0 sm_90a  -       mixed
wgmma.fence                -    fence   sync             OTHER     wgmma.fence                -     8.0 sm_90a  -       mixed
wgmma.commit_group         -    fence   sync             OTHER     wgmma.commit_group         -     8.0 sm_90a  -       mixed
wgmma.wait_group           -    fence   sync             OTHER     wgmma.wait_group           -     8.0 sm_90a  -       mixed
wmma                       d    fence   tensor           OTHER     -                          -     7.0 sm_80   -       mixed
wmma.load                  d    load    @space           @load     -                          -     7.0 sm_80   generic mixed
wmma.store                 -    store   @space           @store    -                          -     7.0 sm_80   generic mixed
wmma.mma                   d    pure    tensor           MMA       -                          mma   7.0 sm_80   -       mixed
xor                        d    pure    @type            IALU      xor                        -     -   -       -       bits
"""
# PTX's SIMD video instructions: integer, register-only, not emulated or timed.
_VIDEO = ("vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 "
          "vmin vmin2 vmin4 vset vset2 vset4 vshl vshr vsub vsub2 vsub4").split()

DESTS = ("-", "d", "acc")
EFFECTS = ("pure", "load", "store", "atomic", "fence", "barrier", "async",
           "branch", "exit", "call", "control")
CONTROL_EFFECTS = ("branch", "exit", "call", "control")
MIX_RULES = ("@space", "@type", "@move")
TIMING_RULES = ("@load", "@store", "@cvt", "@mov", "@sfu")
FLOP_MODELS = ("mma", "wgmma")
OPERAND_RULES = ("typed", "bits", "shift", "shift_bits", "cvt", "setp", "selp", "wide", "load",
                 "store", "move", "mixed")
# Opcodes whose result is data the instruction reads — from memory (loads, atomics, texture and
# surface reads) or, for shfl, another lane's register — not a function of its operands: an
# address computed from one depends on data (sim/access.py, analysis/banks_static.py).
DATA_RESULT = frozenset(("ld", "ldu", "atom", "tex", "suld", "shfl"))


@dataclass(frozen=True)
class Row:
    name: str            # "add", "cp.async.bulk.tensor"
    dest: str
    effect: str
    mix: str
    timing: str
    emu: str             # builder key, "nop" or "" (not emulated)
    flops: object        # int per lane, "mma"/"wgmma", or 0
    ptx: str             # "" = baseline
    target: str          # "" = baseline
    space: str           # "" = none implied
    operands: str = "typed"     # how register operands are typed (OPERAND_RULES)

    @property
    def typed(self):
        """The register operands are type-checked (operands is not 'mixed')."""
        return self.operands != "mixed"

    @property
    def writes(self):
        return self.dest != "-"

    @property
    def is_control(self):
        return self.effect in CONTROL_EFFECTS

    @property
    def needs(self):
        """(PTX ISA version, target) this row needs beyond the baseline, or None."""
        return (self.ptx or BASELINE_PTX, self.target or BASELINE_TARGET) \
            if (self.ptx or self.target) else None


def _rows():
    rows = {}
    lines = [ln.split() for ln in _TABLE.strip().splitlines()]
    lines += [[v, "d", "pure", "@type", "OTHER", "-", "-", "-", "-", "-", "typed"]
              for v in _VIDEO]
    for cols in lines:
        if len(cols) != 11:
            raise ValueError(f"opcode table row {cols[0]!r} has {len(cols)} columns, not 11")
        name, dest, effect, mix, timing, emu, flops, ptx, target, space, operands = \
            (None if c == "-" else c for c in cols)
        if name in rows or dest not in (None, "d", "acc") or effect not in EFFECTS \
                or operands not in OPERAND_RULES:
            raise ValueError(f"opcode table row {name!r} is repeated or malformed")
        rows[name] = Row(name, dest or "-", effect, mix, timing, emu or "",
                         int(flops) if flops and flops.isdigit() else (flops or 0),
                         ptx or "", target or "", space or "", operands)
    return rows


ROWS = _rows()
# Opcodes (before the first dot) the table knows: the parser's list of PTX instructions.
OPCODES = frozenset(name.split(".")[0] for name in ROWS)


@functools.lru_cache(maxsize=4096)
def lookup(opcode, mods=()):
    """The row of an opcode with its modifiers: the longest name that is a prefix, a modifier
    counting by its part before '::' (fence.proxy.tensormap::generic → fence.proxy.tensormap);
    None when the opcode has no row at all."""
    parts = (opcode,) + tuple(m.split("::")[0] for m in mods[:3])
    for n in range(min(len(parts), 4), 0, -1):
        row = ROWS.get(".".join(parts[:n]))
        if row is not None:
            return row
    return None


def row_of(instr):
    """The row of an IR instruction; an opcode the table lacks gets an opaque row (writes its
    first operand, orders with everything, not emulated) so builder-made IR never crashes."""
    mods = instr.mods
    row = _BY_KEY.get((instr.opcode, mods)) if type(mods) is tuple else None
    if row is None:                 # (every analysis asks per instruction, many times)
        mods = tuple(instr.mods)
        row = lookup(instr.opcode, mods) or _opaque(instr.opcode)
        if len(_BY_KEY) < 65536:
            _BY_KEY[(instr.opcode, mods)] = row
    return row


_BY_KEY = {}


@functools.lru_cache(maxsize=64)
def _opaque(opcode):
    return Row(opcode, "d", "fence", "@type", "OTHER", "", 0, "", "", "")


_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
# float types, and the packed pairs of 16- and 8-bit floats
_FLOAT_MODS = frozenset(n for n, t in T.TYPES.items() if t.is_float or n.endswith("x2"))


def flops(opcode, mods, lanes):
    """FLOPs of `lanes` active lanes executing one instruction (0 for non-float work)."""
    row = lookup(opcode, tuple(mods))
    if row is None or not row.flops or not _FLOAT_MODS.intersection(mods):
        return 0
    if row.flops in FLOP_MODELS:
        m = next((s for s in map(_SHAPE.fullmatch, mods) if s), None)
        if m is None:
            return 0
        per = 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3))
        return per * lanes / (32 if row.flops == "mma" else 128)
    return row.flops * lanes * (2 if any(x.endswith("x2") for x in mods) else 1)
