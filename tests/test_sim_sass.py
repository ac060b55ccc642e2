"""What ptxas's SASS does with the PTX, as the simulator prices it: loads in flight of an unrolled
loop and under the register budget, integer division and IEEE float division, selects on the
FMA pipe, 64-bit compares and multiplies in halves, constants moved into their readers'
immediates, and the list scheduler's limit on loads in flight."""
import dataclasses
import re

import pytest


from model_data import measured_case
from ptxgen import isa, toolchain
from ptxgen.ir.instr import Instr, Label
from ptxgen.ir.values import LabelRef
from ptxgen.parse import parse_ptx
from ptxgen.reorder import loads_in_flight, schedule_block, split_body
from ptxgen.reorder.deps import Region
from ptxgen.sim import simulate
from ptxgen.sim.program import compile_kernel
from ptxgen.toolchain import assemble, disassemble
from sim_helpers import Arr, HEAD


# a row loop like the dp4a kernel's: top-tested, counted by k, two loads per trip
ROWLOOP = HEAD + """.visible .entry rowloop(.param .u32 rows, .param .u32 kw, .param .u64 db,
  .param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<10>;
  ld.param.u32 %r1, [rows];
  ld.param.u32 %r2, [kw];
  ld.param.u64 %rd1, [db];
  ld.param.u64 %rd2, [out];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.u32 %r6, %r3, %r4, %r5;
  mov.u32 %r7, 0;
  mov.u32 %r8, 0;
LOOP:
  setp.ge.u32 %p1, %r8, %r2;
  @%p1 bra DONE;
  mad.lo.u32 %r9, %r8, %r1, %r6;
  mul.wide.u32 %rd3, %r9, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.u32 %r10, [%rd4];
  EXIT_TEST
  add.u32 %r7, %r7, %r10;
  add.u32 %r8, %r8, 1;
  bra.uni LOOP;
DONE:
  mul.wide.u32 %rd5, %r6, 4;
  add.u64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r7;
  ret;
}
"""
DIV = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 a, .param .u32 b, .param .u32 c, .param .u64 o)
{
  .reg .b32 %r<12>; .reg .b64 %rd<4>;
  ld.param.u32 %r1, [a]; ld.param.u32 %r2, [b]; ld.param.u32 %r9, [c];
  ld.param.u64 %rd1, [o];
  mov.u32 %r5, %tid.x;
  add.u32 %r1, %r1, %r5;
  div.u32 %r3, %r1, %r2;
  rem.u32 %r4, %r1, %r2;
  rem.u32 %r6, %r4, %r9;
  div.u32 %r7, %r1, 7;
  st.global.u32 [%rd1], %r3;
  ret;
}
"""
SET = "model_set_2026-12-02a_held10.json.gz"


# Cody-Waite reduction as NVVM writes it for sinf: each constant moved into a register of its
# own, each register read once by an fma
REDUCE = """.visible .entry reduce(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<2>;
  mov.u32 %r1, %tid.x;
  cvt.rn.f32.u32 %f1, %r1;
  mul.f32 %f2, %f1, 0f3F22F983;
  cvt.rni.s32.f32 %r2, %f2;
  cvt.rn.f32.s32 %f3, %r2;
  mov.f32 %f4, 0fBFC90FDA;
  fma.rn.f32 %f5, %f3, %f4, %f1;
  mov.f32 %f6, 0fB3A22168;
  fma.rn.f32 %f7, %f3, %f6, %f5;
  mov.f32 %f8, 0fA7C234C5;
  fma.rn.f32 %f9, %f3, %f8, %f7;
  mov.f32 %f10, 0f3F000000;
  add.f32 %f11, %f9, %f10;
  mul.f32 %f11, %f11, %f10;
  ld.param.u64 %rd1, [out];
  st.global.f32 [%rd1], %f11;
  ret;
}
"""


def _div_kernel(op):
    from ptxgen.parse import parse_ptx
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p){
.reg .f32 %f<4>; .reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
ld.global.f32 %f1, [%rd1];
ld.global.f32 %f2, [%rd1+4];
""" + op + """ %f3, %f1, %f2;
st.global.f32 [%rd1+8], %f3;
ret;}
"""
    return parse_ptx(ptx).kernel("k")


def _selp_kernel(a, b, n=48):
    """n independent selects of a and b (a register or a constant) under one predicate,
    summed by a tree of adds that the selects dominate."""
    body = "\n".join(f"  selp.u32 %r{10 + k}, {a}, {b}, %p1;" for k in range(n))
    return parse_ptx(HEAD + f""".visible .entry k(.param .u64 p)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<{10 + n + 2}>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %clock;
  setp.lt.u32 %p1, %r1, 16;
{body}
  xor.b32 %r3, %r10, %r11;
  st.global.u32 [%rd1], %r3;
  ret;
}}
""").kernels[0]


def _one(op, t):
    k = parse_ptx(HEAD + f""".visible .entry k(.param .u64 p){{
.reg .pred %p<2>; .reg .b32 %r<4>; .reg .b64 %rd<4>;
ld.param.u64 %rd1, [p];
ld.global.u64 %rd2, [%rd1];
cvt.u32.u64 %r1, %rd2;
{op.format(t=t, r='%rd' if t.endswith('64') else '%r')}
st.global.u64 [%rd1], %rd3;
ret;}}
""").kernel("k")
    table = isa.load("sm_90")
    return next(st for st in compile_kernel(k, table).instrs
                if st.instr.opcode == op.split(".")[0]), table


def _loop_kernel(t):
    """A counted loop of 64 trips whose counter and bound are of type t (s64: Numba's
    `range`); the body is one FMA chain."""
    r = "%rd" if t == "s64" else "%r"
    return parse_ptx(HEAD + f""".visible .entry k(.param .u64 p, .param .{t} n){{
.reg .pred %p<2>; .reg .f32 %f<3>; .reg .b32 %r<4>; .reg .b64 %rd<4>;
ld.param.u64 %rd1, [p];
ld.param.{t} {r}2, [n];
mov.{t} {r}3, 0;
mov.f32 %f1, 0f3F800000;
L:
fma.rn.f32 %f1, %f1, %f1, 0f3F000000;
add.{t} {r}3, {r}3, 1;
setp.lt.{t} %p1, {r}3, {r}2;
@%p1 bra L;
st.global.f32 [%rd1], %f1;
ret;}}
""").kernel("k")


def _case(name):
    return measured_case(SET, name)


def _lifted(ptx, entry):
    """The PTX with the register limit lifted (.maxnreg 255 after the entry's parameters)."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\([^)]*\)", ptx)
    return ptx[:m.end()] + "\n.maxnreg 255\n" + ptx[m.end():]


def _sass_in_flight(ptx, entry):
    return loads_in_flight(disassemble(assemble(ptx, "sm_90").cubin), entry)


def _kernel(case):
    return parse_ptx(case["ptx"]).kernel(case["entry"])


def _loads_before_first_reader(order):
    """Global loads issued before the first instruction that reads one of their results."""
    done, n = set(), 0
    for ins in order:
        if set(ins.uses()) & done:
            return n
        if ins.opcode == "ld" and ins.space != "param":
            done.update(ins.defs())
            n += 1
    return n


def _loop_region(kernel, n_loads):
    """The region of `kernel` with `n_loads` global/generic loads."""
    for item in split_body(kernel.body):
        if isinstance(item, Region) and sum(
                1 for i in item.instrs if i.opcode == "ld" and i.space != "param") == n_loads:
            return item.instrs
    raise AssertionError("no such region")


def test_loads_of_a_loop_ptxas_unrolls_are_in_flight_together():
    from ptxgen import isa
    from ptxgen.parse import parse_ptx
    from ptxgen.sim import simulate
    from ptxgen.sim.program import LDG, compile_kernel
    table = isa.load("sm_90")
    factor = table.memory_model["ptxas_unroll_factor"]
    counted = ROWLOOP.replace("EXIT_TEST", "")
    # a second exit that tests loaded data: ptxas cannot unroll it with the loads hoisted
    searched = ROWLOOP.replace("EXIT_TEST", "setp.eq.u32 %p2, %r10, 0;\n  @%p2 bra DONE;")
    for text, want in ((counted, factor), (searched, 1)):
        k = parse_ptx(text).kernel("rowloop")
        prog = compile_kernel(k, table)
        assert [st.unroll for st in prog.instrs if st.kind == LDG] == [want]
    # few warps (latency-bound): four trips' loads in flight make the walk several times faster
    # (the searched loop's loaded values are unknown: both run 256 trips)
    m1, m2 = parse_ptx(counted), parse_ptx(searched)
    args = [132 * 64, 256, Arr(), Arr()]
    fast = simulate(m1.kernel("rowloop"), (132,), (64,), args=args, module=m1, registers=32,
                    trip=256)
    slow = simulate(m2.kernel("rowloop"), (132,), (64,), args=args, module=m2, registers=32,
                    trip=256)
    assert slow.device_us > 2.5 * fast.device_us


def test_integer_division_costs_ptxas_sass():
    # SASS (ptxas 13.0): a reciprocal per divisor register, shared by the div and rem by it,
    # then a short correction per div/rem; an immediate divisor is left as it was
    from ptxgen import isa
    from ptxgen.sim.program import compile_kernel
    table = isa.load("sm_90")
    mm = table.memory_model
    prog = compile_kernel(parse_ptx(DIV).kernel("k"), table)
    extra = {st.instr.opcode + str(k): sum(n for n, _, _ in st.extra)
             for k, st in enumerate(prog.instrs) if st.instr.opcode in ("div", "rem")}
    rcp, per = mm["ptxas_int_reciprocal_instructions"], mm["ptxas_int_divide_instructions"]
    first, again = rcp + per - 1, per - 1
    assert list(extra.values()) == [first, again, first, 0]
    div = next(st for st in prog.instrs if st.instr.opcode == "div")
    assert div.latency == pytest.approx(table.ops["IMAD"].latency * per)


def test_ieee_f32_divide_costs_ptxas_fast_path_and_approx_does_not():
    """div.rn.f32 is MUFU.RCP plus FCHK, five dependent FFMA and a branch in ptxas's SASS
    (isa numbers measured with ptxas 13); div.approx.f32 is one MUFU: the IEEE one issues 7
    more instructions and its result comes 5 FFMA latencies later."""
    from ptxgen import isa
    from ptxgen.sim.program import compile_kernel
    table = isa.load("sm_90")
    rn, ap = (next(st for st in compile_kernel(_div_kernel(op), table).instrs
                   if st.instr.opcode == "div") for op in ("div.rn.f32", "div.approx.f32"))
    mm = table.memory_model
    assert sum(n for n, _, _ in rn.extra) - sum(n for n, _, _ in ap.extra) == \
        mm["ptxas_f32_divide_ffma_instructions"] + mm["ptxas_f32_divide_other_instructions"]
    fma = table.ops["FMA"].latency
    assert abs(rn.latency - ap.latency - mm["ptxas_f32_divide_ffma_instructions"] * fma) < 1e-6


def test_a_select_of_two_constants_may_take_the_fma_pipe_and_one_of_a_register_not(sm90):
    imm = compile_kernel(_selp_kernel(1, 0), sm90)
    reg = compile_kernel(_selp_kernel("%r2", 0), sm90)
    s_imm = [st for st in imm.instrs if st.instr.opcode == "selp"]
    s_reg = [st for st in reg.instrs if st.instr.opcode == "selp"]
    assert s_imm and all(st.alt is not None for st in s_imm)
    assert s_reg and all(st.alt is None for st in s_reg)
    # with the second pipe, 8 warps' 48 selects issue in fewer cycles
    c_imm = simulate(_selp_kernel(1, 0), (1,), (256,), args=[0], registers=32).cycles
    c_reg = simulate(_selp_kernel("%r2", 0), (1,), (256,), args=[0], registers=32).cycles
    assert c_imm < 0.8 * c_reg


def test_64_bit_compares_and_multiplies_issue_their_sass_halves():
    """setp on 64-bit integers is ISETP + ISETP.EX, mul.lo.s64 three IMADs (ptxas 13's SASS;
    isa numbers); the 32-bit forms, mul.wide and 64-bit adds stay one instruction."""
    mm = isa.load("sm_90").memory_model
    extra = {}
    for op, t in (("setp.lt.{t} %p1, {r}2, 5;", "s64"), ("setp.lt.{t} %p1, {r}1, 5;", "s32"),
                  ("mul.lo.{t} %rd3, %rd2, %rd2;", "s64"),
                  ("mul.wide.{t} %rd3, %r1, %r1;", "s32"),
                  ("add.{t} %rd3, %rd2, %rd2;", "s64")):
        st, table = _one(op, t)
        extra[(op.split(".")[0], t)] = (sum(n for n, _, _ in st.extra), st.latency)
    assert extra[("setp", "s64")][0] == mm["ptxas_int64_compare_instructions"] - 1
    assert extra[("setp", "s32")][0] == 0
    assert extra[("setp", "s64")][1] > extra[("setp", "s32")][1]     # the .EX waits
    assert extra[("mul", "s64")][0] == mm["ptxas_int64_multiply_instructions"] - 1
    assert extra[("mul", "s32")][0] == 0
    assert extra[("add", "s64")][0] == 0


def test_a_64_bit_counted_loop_is_slower_with_the_compare_halves(monkeypatch):
    """One warp, 64 trips of a dependent FMA and a 64-bit counter: the compare's second half
    (and its latency) adds to every trip; with the isa number at 1 the loop is as before."""
    from ptxgen.sim import simulate
    table = isa.load("sm_90")
    assert isa.load("sm_90") is table          # simulate reads this same table

    def cycles():
        return simulate(_loop_kernel("s64"), (1,), (32,), args=[None, 64],
                        registers=16).cycles
    with_halves = cycles()
    monkeypatch.setitem(table.memory_model, "ptxas_int64_compare_instructions", 1)
    without = cycles()
    assert with_halves > without + 64 * 0.5 * table.ops["IALU"].latency


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("name, default, lifted", [
    ("gemv_colmajor 24000x4000", 4, 8),           # 8 generic loads per unrolled trip
    ("triton_masked_mean 64x1000x300", 12, 32),   # 32 masked global loads per trip
])
def test_ptxas_keeps_fewer_loads_in_flight_under_its_register_budget(name, default, lifted):
    """SASS facts (ptxas 13.0, sm_90): at the register count ptxas settles on (32 for both)
    it issues a block's loads in rounds; with the limit lifted (40 / 56 registers) all of
    them before the first reader. loads_in_flight reads that from the SASS."""
    case = _case(name)
    assert _sass_in_flight(case["ptx"], case["entry"]) == default
    assert _sass_in_flight(_lifted(case["ptx"], case["entry"]), case["entry"]) == lifted


def test_loads_in_flight_counts_registers_until_the_first_reader():
    sass = """
        .text.k:
        /*0000*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0010*/                   LDG.E.128 R8, desc[UR4][R6.64] ;
        /*0020*/                   LDS R12, [R3] ;
        /*0030*/                   FADD R0, R2, R1 ;
        /*0040*/                   FADD R0, R9, R0 ;
        /*0050*/              @!P0 LD.E.64 R14, desc[UR4][R6.64] ;
        /*0060*/                   LDG.E.64 R16, desc[UR4][R4.64] ;
    """
    # R2 and R8..R11 before the first FADD: 5 (the shared load does not count); reading R9
    # ends the wait of all four of its load's registers, so the last two loads make 4, not 7
    assert loads_in_flight(sass, "k") == 5
    assert loads_in_flight(sass) == {"k": 5}


@pytest.mark.parametrize("name, n_loads, limit", [
    ("gemv_colmajor 24000x4000", 8, 4), ("triton_masked_mean 64x1000x300", 32, 12)])
def test_the_scheduler_holds_loads_back_to_the_limit(name, n_loads, limit, sm90):
    """Without a limit the scheduler hoists every load of the block above the first reader
    (one DRAM latency per trip); with ptxas's count it issues that many and the next ones
    only after a reader, as the SASS does (two or more latencies per trip)."""
    instrs = _loop_region(_kernel(_case(name)), n_loads)
    free = schedule_block(instrs, sm90).order
    held = schedule_block(instrs, sm90, in_flight=limit).order
    assert _loads_before_first_reader(free) == n_loads
    assert _loads_before_first_reader(held) == limit
    assert sorted(map(id, held)) == sorted(map(id, instrs))


def test_labels_nothing_refers_to_ride_along():
    """Triton marks debug ranges with $L__tmp labels no branch targets; they split
    masked_mean's trip into a block of 32 loads and a block of the adds that read them,
    so no scheduler could interleave the two. A label a branch targets still splits."""
    kernel = _kernel(_case("triton_masked_mean 64x1000x300"))
    regions = [it for it in split_body(kernel.body) if isinstance(it, Region)]
    trip = [r for r in regions if sum(1 for i in r.instrs if i.opcode == "ld"
                                      and i.space == "global") == 32]
    assert len(trip) == 1
    assert any(i.opcode == "add" and i.type.is_float for i in trip[0].instrs)
    assert any(isinstance(s, Label) for rider in trip[0].riders for s in rider)
    # the same body with the label made a branch target splits again
    label = next(s for rider in trip[0].riders for s in rider if isinstance(s, Label))
    bra = Instr("bra", ("uni",), (LabelRef(label.name),))
    body = list(kernel.body) + [bra]
    regions2 = [it for it in split_body(body) if isinstance(it, Region)]
    assert not any(sum(1 for i in r.instrs if i.opcode == "ld" and i.space == "global") == 32
                   and any(i.opcode == "add" and i.type.is_float for i in r.instrs)
                   for r in regions2)


@pytest.mark.needs_nvdisasm
@pytest.mark.parametrize("name, low, high", [
    ("gemv_colmajor 24000x4000", -0.45, 0.1),       # was -63.8 % (all 8 loads at once)
    ("triton_masked_mean 64x1000x300", -0.35, 0.1),  # was -49.9 %
])
def test_loads_in_rounds_cost_their_latencies(name, low, high):
    import model_eval
    case = _case(name)
    rep, _ = model_eval.predict(case, launch_path=case["path"])
    assert low < rep.device_us / case["gpu_us"] - 1 < high


def test_without_ptxas_output_the_order_is_unlimited(monkeypatch, sm90):
    """No SASS at hand (ptxas missing): the old unlimited schedule."""
    import ptxgen.sim.launch as L
    from ptxgen.errors import ToolchainError
    from ptxgen.reorder import schedule_kernel

    def missing(module, arch):
        raise ToolchainError("ptxas not found")
    monkeypatch.setattr(L, "_ptxas", missing)
    module = parse_ptx(_case("gemv_colmajor 24000x4000")["ptx"])
    kernel = module.kernels[0]
    a = L._ptxas_order(kernel, sm90, module, "sm_90")
    b = schedule_kernel(kernel, isa=sm90)
    assert [id(s) for s in a.body] == [id(s) for s in b.body]
    assert dataclasses.is_dataclass(a)


def test_a_constant_moved_into_its_one_readers_register_is_that_readers_immediate(sm90):
    k = parse_ptx(HEAD + REDUCE).kernels[0]
    free = [st.text.split(",")[1].strip(" ;") for st in compile_kernel(k, sm90).instrs
            if st.free]
    # 0.5 has two readers: ptxas keeps it in a register
    assert free == ["0fBFC90FDA", "0fB3A22168", "0fA7C234C5"]


@pytest.mark.needs_ptxas
def test_ptxas_puts_the_constants_into_the_ffmas():
    sass = toolchain.disassemble(toolchain.assemble(HEAD + REDUCE, "sm_90").cubin)
    ffma = re.findall(r"FFMA R\d+, R\d+, (-?[0-9.e+-]+), R\d+", sass)
    assert len(ffma) == 3 and "MOV" not in re.findall(r"\s(MOV)\s", sass)
