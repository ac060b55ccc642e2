"""The opcode table is the one source: the parser's list, Instr, the verifier, the isa classifier,
the scheduler, the simulator, the emulator, the roofline and the emitter all agree with it."""
import pytest

from ptxgen import arch as archmod
from ptxgen import isa
from ptxgen.emit import emit_module
from ptxgen.emit.ptx import features_used
from ptxgen.emit.ptx import requirement as emit_requirement
from ptxgen.errors import PtxgenError
from ptxgen.ir import Builder, Instr, Module, Param, Reg, ptr
from ptxgen.ir import opcodes
from ptxgen.ir import types as T
from ptxgen.ir.values import Addr, Imm, PredPair, Vec
from ptxgen.ir.verify import verify_module
from ptxgen.parse import parse_ptx
from ptxgen.parse.opcodes import PTX_OPCODES
from ptxgen.reorder.deps import access
from ptxgen.sim import program as simprog
from ptxgen.toolchain import ToolchainError, assemble

R = [Reg(f"%r{i}", T.b32) for i in range(8)]
F = [Reg(f"%f{i}", T.f32) for i in range(8)]
D = Reg("%rd1", T.b64)
P = Reg("%p1", T.pred)


def sample(row):
    """An instruction of the row: its name's opcode and modifiers, and operands of its shape."""
    opcode, *mods = row.name.split(".")
    ops = (R[0], R[1], R[2]) if row.writes else (Addr(R[1]), R[2])
    return Instr(opcode, tuple(mods) + ("b32",), ops)


# PTX ISA 9.0, chapter 9: the instruction section headings (an independent list to check against)
ISA_9_0 = set("""
abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev
brkpt brx call clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div
dp2a dp4a elect ex2 exit fence fma fns getctarank griddepcontrol isspacep istypeof ld ldmatrix
ldu lg2 lop3 mad mad24 madc mapa match max mbarrier membar min mma mov movmatrix mul mul24
multimem nanosleep neg not or pmevent popc prefetch prefetchu prmt rcp red redux rem ret rsqrt
sad selp set setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix
sub subc suld suq sured sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff
vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4 vote
vset vset2 vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor
""".split())


def test_every_opcode_the_parser_accepts_has_a_row():
    assert set(PTX_OPCODES) == ISA_9_0
    body = "\n".join(f"    {op}.b32 %r1, %r2;" for op in sorted(ISA_9_0))
    m = parse_ptx(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
                  "    .reg .b32 %r<3>;\n" + body + "\n}\n")
    parsed = [s for s in m.kernels[0].body if isinstance(s, Instr)]
    assert len(parsed) == len(ISA_9_0)
    for ins in parsed:
        assert opcodes.lookup(ins.opcode, ins.mods) is not None, ins.opcode
    with pytest.raises(Exception, match="unknown opcode 'fmaa'"):
        parse_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
                  "    fmaa.f32 %r1;\n}\n")


@pytest.mark.parametrize("name", ["mma", "ldmatrix", "stmatrix", "cp.async",
                                  "cp.async.commit_group", "cp.async.wait_group", "cvt",
                                  "wgmma.mma_async", "wgmma.fence", "wgmma.commit_group",
                                  "wgmma.wait_group", "mbarrier.init", "mbarrier.arrive",
                                  "mbarrier.arrive.expect_tx", "mbarrier.try_wait",
                                  "mbarrier.inval", "cp.async.bulk", "cp.async.bulk.tensor",
                                  "cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
                                  "fence.proxy.async", "elect", "setmaxnreg", "mapa",
                                  "barrier.cluster", "getctarank"])
def test_issue_12_instructions_have_rows_with_builder_names(name):
    row = opcodes.ROWS[name]
    assert row.emu                           # a builder key (or nop) the emulator resolves


def test_longest_prefix_lookup():
    assert opcodes.lookup("cp", ("async", "bulk", "tensor", "2d", "shared::cluster")).name == \
        "cp.async.bulk.tensor"
    assert opcodes.lookup("cp", ("async", "ca", "shared", "global")).name == "cp.async"
    assert opcodes.lookup("cp", ("async", "wait_group")).name == "cp.async.wait_group"
    assert opcodes.lookup("mbarrier", ("arrive", "expect_tx", "shared", "b64")).name == \
        "mbarrier.arrive.expect_tx"
    assert opcodes.lookup("add", ("f32",)).name == "add"
    assert opcodes.lookup("bar", ("warp", "sync")).name == "bar.warp"
    assert opcodes.lookup("nonsense") is None


@pytest.mark.parametrize("name", sorted(opcodes.ROWS))
def test_consumers_agree_with_the_row(name):
    row = opcodes.ROWS[name]
    ins = sample(row)
    assert ins.row is row
    assert ins.n_dests == (1 if row.writes else 0)
    assert (ins.defs() != []) == row.writes
    # scheduler: pure rows reorder freely, loads/stores by space, the rest are fences
    kind = access(ins).kind
    assert kind == {"pure": None, "load": "load", "store": "store"}.get(row.effect, "fence")
    # isa classifier and mix: fixed classes come straight from the row
    if not row.timing.startswith("@") and "/" not in row.timing:
        assert isa.op_class(ins) == row.timing
    if not row.mix.startswith("@"):
        assert ins.cls == row.mix
    assert ins.is_branch == (row.effect == "branch")
    assert ins.is_barrier == (row.effect == "barrier")
    # the machine model costs every row (a class it lacks costs as OTHER)
    assert isa.load("sm_90").op_for(ins).key in isa.load("sm_90").ops
    # the simulator's timing kind follows the effect
    sim_kind = {"branch": simprog.BRANCH, "exit": simprog.EXIT, "fence": simprog.FIXED,
                "async": simprog.FIXED, "pure": simprog.ALU, "call": simprog.ALU,
                "control": simprog.ALU}.get(row.effect)
    if sim_kind is not None:
        assert simprog._kind(ins) == sim_kind
    elif row.effect in ("load", "store"):
        fast = {"shared": "LDS" if row.effect == "load" else "STS"}.get(ins.space)
        want = getattr(simprog, fast) if fast else None
        assert simprog._kind(ins) in ((want,) if want else (simprog.LDG, simprog.STG,
                                                             simprog.FIXED))


def test_emulator_builders_are_named_by_the_table():
    from ptxgen.emu import alu, bits, convert, floats, memops, warp
    keys = set()
    for mod in (alu, bits, convert, floats, memops, warp):
        keys |= set(mod.BUILDERS)
    named = {r.emu for r in opcodes.ROWS.values()}
    assert keys <= named, f"builders no row names: {sorted(keys - named)}"
    # every row the emulator ran before the table still finds its builder
    for op in ("add", "fma", "ld", "st", "atom", "cvt", "shfl", "elect", "cp", "bar", "lop3"):
        assert opcodes.ROWS[op].emu in keys


def test_emulator_reports_a_row_without_builder_by_its_key(monkeypatch):
    from ptxgen.emu.api import emulate
    from ptxgen.emu.builders import builder_table
    # every row's key has a builder today: take one away (from the per-process table the
    # emulator compiles with) to see the report
    monkeypatch.delitem(builder_table(), "barrier.cluster")
    text = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{
    barrier.cluster.arrive;
    ret;
}"""
    import numpy as np
    with pytest.raises(Exception, match=r"barrier\.cluster.*no emulator builder 'barrier\.cluster'"):
        emulate(parse_ptx(text), "k", 1, 128, np.zeros(4, np.float32))


# -- the misclassifications of issue 12 ------------------------------------------------------------
MMA = Instr("mma", ("sync", "aligned", "m16n8k16", "row", "col", "f32", "bf16", "bf16", "f32"),
            (Vec(tuple(F[:4])), Vec(tuple(R[:4])), Vec(tuple(R[4:6])), Vec(tuple(F[4:8]))))


def test_mma_sync_is_a_pure_tensor_instruction():
    assert MMA.cls == "tensor"                 # was "fp32"
    assert isa.op_class(MMA) == "MMA"          # was "OTHER"
    assert access(MMA).kind is None            # was a fence for the scheduler
    assert MMA.defs() == F[:4]
    assert set(MMA.uses()) == set(R[:6]) | set(F[4:8])
    assert simprog._kind(MMA) == simprog.ALU


def _wgmma(scale_d):
    acc = Vec(tuple(F[:4]))
    return Instr("wgmma", ("mma_async", "sync", "aligned", "m64n8k16", "f32", "bf16", "bf16"),
                 (acc, D, D, scale_d, Imm(1), Imm(1), Imm(0), Imm(0)))


def test_wgmma_writes_and_reads_its_accumulators():
    w = _wgmma(P)
    assert w.defs() == F[:4]                   # was no destination at all
    assert set(F[:4]) <= set(w.uses())         # the accumulator is read (scale-d from %p1)
    assert P in w.uses() and D in w.uses()
    assert not set(F[:4]) & set(_wgmma(Imm(0)).uses())   # scale-d = 0: D = A·B
    assert _wgmma(P).cls == "tensor" and access(w).kind == "fence"


def test_elect_sync_pair_destination_verifies():
    m = Module(target="sm_90")
    k = m.add_kernel("k", [Param("x", T.u64, ptr(T.u32, align=4))])
    b = Builder(k)
    r, p = b.reg(T.b32), b.reg(T.pred)
    b.emit(Instr("elect", ("sync",), (PredPair(r, p), Imm(0xffffffff))))
    b.emit(Instr("selp", ("b32",), (r, r, r, p)))
    verify_module(m)                           # was "used before it is defined"
    assert k.body[0].defs() == [r, p]
    assert isa.op_class(k.body[0]) == "SHFL"


def test_flops_from_the_table():
    full = 32
    assert opcodes.flops("mma", MMA.mods, full) == 2 * 16 * 8 * 16
    assert opcodes.flops("wgmma", ("mma_async", "sync", "aligned", "m64n128k16", "f32", "bf16",
                                   "bf16"), 128) == 2 * 64 * 128 * 16
    assert opcodes.flops("fma", ("rn", "f32"), 32) == 64
    assert opcodes.flops("fma", ("rn", "f16x2"), 32) == 128
    assert opcodes.flops("add", ("s32",), 32) == 0
    assert opcodes.flops("mma", ("sync", "aligned", "m16n8k32", "row", "col", "s32", "s8",
                                 "s8", "s32"), 32) == 0     # integer MMAs are not FLOPs


# -- targets --------------------------------------------------------------------------------------
def _module(*instrs, target="sm_90"):
    m = Module(target=target)
    k = m.add_kernel("k", [])
    k.body.extend(instrs)
    k.body.append(Instr("ret"))
    return m


def test_sm_90a_is_picked_for_arch_specific_instructions():
    assert "sm_90a" in archmod.targets()
    m = _module(Instr("wgmma", ("fence", "sync", "aligned")))
    assert features_used(m.kernels) == ["wgmma.fence"]
    text = emit_module(m)
    assert ".target sm_90a" in text and ".version 8.0" in text
    with pytest.raises(PtxgenError, match=r"wgmma.fence needs sm_90a"):
        emit_module(m, arch="sm_80")
    plain = emit_module(_module(Instr("membar", ("gl",))))
    assert ".target sm_90\n" in plain


def test_targets_and_versions_from_rows_and_modifier_features():
    # bare instructions on undeclared registers: the target rules, not the verifier, are tested
    m = _module(Instr("elect", ("sync",), (PredPair(R[0], P), Imm(-1))))
    with pytest.raises(PtxgenError, match=r"elect needs sm_90 or newer"):
        emit_module(m, arch="sm_89", verify=False)
    cvt8 = Instr("cvt", ("rn", "satfinite", "e4m3x2", "f32"), (Reg("%rs1", T.b16), F[0], F[1]))
    assert "cvt.fp8" in features_used(_module(cvt8).kernels)
    assert ".version 8.1" in emit_module(_module(cvt8), arch="sm_89", verify=False)
    with pytest.raises(PtxgenError, match="cvt.fp8 needs sm_89"):
        emit_module(_module(cvt8), arch="sm_80", verify=False)
    assert isa.load("sm_90a") is isa.load("sm_90")


def test_tensor_types():
    for name, bits in (("tf32", 32), ("e4m3", 8), ("e5m2", 8), ("e4m3x2", 16), ("e5m2x2", 16)):
        assert T.type_of(name).bits == bits
    assert T.tf32.is_float and T.e4m3.is_float
    assert cvt_types("cvt.rn.satfinite.e5m2x2.f32") == ("e5m2x2", "f32")


def cvt_types(text):
    opcode, *mods = text.split(".")
    return tuple(t.name for t in Instr(opcode, tuple(mods)).types)


# One instruction per row whose version or target is above the baseline. The emitter picks the
# version and target from the table; ptxas must accept that, and reject one PTX version less.
NEEDS = [
    ("elect", "elect.sync %r2|%p1, -1;"),
    ("stmatrix", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r1};"),
    ("mapa", "mapa.shared::cluster.u32 %r2, %r1, 1;"),
    ("getctarank", "getctarank.shared::cluster.u32 %r2, %r1;"),
    ("mbarrier.try_wait", "mbarrier.try_wait.shared.b64 %p1, [%r1], %rd1;"),
    ("mbarrier.arrive.expect_tx", "mbarrier.arrive.expect_tx.shared.b64 %rd3, [%r1], 16;"),
    ("fence.proxy.async", "fence.proxy.async.shared::cta;"),
    ("fence.proxy.tensormap", "fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;"),
    ("barrier.cluster", "barrier.cluster.arrive;"),
    ("cp.async.bulk.commit_group", "cp.async.bulk.commit_group;"),
    ("cp.async.bulk.wait_group", "cp.async.bulk.wait_group 0;"),
    ("wgmma.fence", "wgmma.fence.sync.aligned;"),
    ("wgmma.commit_group", "wgmma.commit_group.sync.aligned;"),
    ("setmaxnreg", "setmaxnreg.dec.sync.aligned.u32 40;"),
    ("griddepcontrol", "griddepcontrol.wait;"),
    ("mbarrier.init", "mbarrier.init.shared.b64 [%r1], 1;"),
    ("cp.async.wait_group", "cp.async.wait_group 0;"),
    ("cvt.fp8", "cvt.rn.satfinite.e4m3x2.f32 %rs1, %f1, %f2;"),
]
_PREVIOUS = {"8.3": "8.2", "8.1": "8.0", "8.0": "7.8", "7.8": "7.7", "7.0": None}


def _snippet(line, version="8.0", target="sm_90a"):
    return parse_ptx(f""".version {version}
.target {target}
.address_size 64
.visible .entry k()
{{
 .reg .pred %p<3>; .reg .b16 %rs<3>; .reg .b32 %r<9>; .reg .b64 %rd<4>; .reg .f32 %f<9>;
 mov.u32 %r1, 0; mov.u64 %rd1, 0; mov.f32 %f1, 0f3F800000; mov.f32 %f2, 0f3F800000;
 {line}
 ret;
}}""")


@pytest.mark.needs_ptxas
@pytest.mark.parametrize("feature,line", NEEDS, ids=[n for n, _ in NEEDS])
def test_versions_and_targets_agree_with_ptxas(feature, line):
    ptx, target = emit_requirement(feature)
    m = _snippet(line)
    m.version = ""                                   # the emitter chooses
    family = archmod.base_arch(target)
    text = emit_module(m, arch=family)
    assert f".version {ptx}" in text and f".target {target}" in text
    assemble(text, target)
    if archmod.is_arch_specific(target):
        with pytest.raises(ToolchainError, match="not supported on .target"):
            assemble(text.replace(f".target {target}", f".target {family}"), family)
    if _PREVIOUS[ptx]:
        with pytest.raises(ToolchainError):
            assemble(text.replace(f".version {ptx}", f".version {_PREVIOUS[ptx]}"), target)
