"""What ptxas folds away (ptxgen.sim.fold): which PTX instructions issue for free in the
simulator, that the timing follows, and that ptxas really makes the folded form."""
import re

import pytest

from ptxgen import isa, toolchain
from ptxgen.parse import parse_ptx
from ptxgen.sim import simulate
from ptxgen.sim.program import compile_kernel
from sim_helpers import HEAD

TABLE = isa.load("sm_90")


def _kernel(body, regs=".reg .b32 %r<40>;\n  .reg .pred %p<2>;"):
    text = HEAD + (".visible .entry k(.param .u64 out, .param .u32 n)\n{\n  " + regs + "\n"
                   + body + "\n  ret;\n}\n")
    return text, parse_ptx(text).kernels[0]


def _free(body):
    _text, k = _kernel(body)
    prog = compile_kernel(k, TABLE)
    return [st.text.split()[0] for st in prog.instrs if st.free]


def test_a_shift_feeding_one_add_is_a_lea_and_copies_are_coalesced():
    assert _free("mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n add.s32 %r3, %r2, %r1;\n"
                 " mov.u32 %r4, %r3;") == ["shl.b32", "mov.u32"]
    # two readers: the shifted value must exist in a register of its own
    assert _free("mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n add.s32 %r3, %r2, %r1;\n"
                 " add.s32 %r4, %r2, %r3;") == []
    # read in another block, a variable shift, a 64-bit add, a special register: not folded
    assert _free("mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n setp.eq.u32 %p1, %r1, 0;\n"
                 " @%p1 bra L;\nL:\n add.s32 %r3, %r2, %r1;") == []
    assert _free("mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, %r1;\n add.s32 %r3, %r2, %r1;") == []
    # the same register written again after its one reader: that value has one reader
    assert _free("mov.u32 %r1, %tid.x;\n shl.b32 %r2, %r1, 2;\n add.s32 %r2, %r2, %r1;\n"
                 " add.s32 %r3, %r2, %r1;") == ["shl.b32"]


def _address_loop(shift):
    """An ALU-bound loop of four (add, and, shl by `shift`, add) address computations."""
    addr = "".join(f"  add.s32 %r{10 + k}, %r5, {k};\n  and.b32 %r{10 + k}, %r{10 + k}, 1023;\n"
                   f"  shl.b32 %r{10 + k}, %r{10 + k}, {shift};\n"
                   f"  add.s32 %r{10 + k}, %r4, %r{10 + k};\n" for k in range(4))
    body = ("  ld.param.u32 %r1, [n];\n  mov.u32 %r3, 2;\n  mov.u32 %r4, %tid.x;\n"
            "  mov.u32 %r5, 0;\nLOOP:\n" + addr + "  add.s32 %r5, %r5, 4;\n"
            "  setp.lt.u32 %p1, %r5, %r1;\n  @%p1 bra LOOP;\n  add.s32 %r30, %r10, %r11;\n"
            "  add.s32 %r30, %r30, %r12;\n  add.s32 %r30, %r30, %r13;\n"
            "  ld.param.u64 %rd1, [out];\n  st.global.u32 [%rd1], %r30;")
    return _kernel(body, ".reg .b32 %r<40>;\n  .reg .b64 %rd<2>;\n  .reg .pred %p<2>;")[1]


def test_folded_instructions_take_no_issue_slot(sm90):
    """With the shifts folded into LEAs a trip issues 13 instead of 17 instructions (4 x (add,
    and, add) and the branch; the small loop's counter add and setp are free in both)."""
    k, variable = _address_loop(2), _address_loop("%r3")
    assert sum(st.free for st in compile_kernel(k, sm90).instrs) == 4 + 2
    assert sum(st.free for st in compile_kernel(variable, sm90).instrs) == 2
    r, no_fold = (simulate(x, (132 * 4,), (512,), args={"n": 4096}, registers=32)
                  for x in (k, variable))
    issued = [x.cycles * x.issue_utilization for x in (r, no_fold)]
    assert issued[0] / issued[1] == pytest.approx(13 / 17, rel=0.03)
    assert r.cycles < 0.85 * no_fold.cycles


@pytest.mark.needs_ptxas
def test_ptxas_makes_the_lea():
    text, _k = _kernel("  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %ctaid.x;\n"
                       "  shl.b32 %r3, %r1, 2;\n  add.s32 %r4, %r3, %r2;\n"
                       "  mov.u32 %r5, %r4;\n  ld.param.u64 %rd1, [out];\n"
                       "  st.global.u32 [%rd1], %r5;",
                       ".reg .b32 %r<8>;\n  .reg .b64 %rd<2>;")
    sass = toolchain.disassemble(toolchain.assemble(text, "sm_90").cubin)
    ops = re.findall(r"^\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M)
    assert "LEA" in ops and "SHL" not in ops and "MOV" not in ops


def _fma_loop(k, counter="u32"):
    """A one-block loop of k independent FMAs counted by a 32- or 64-bit register."""
    c = "%r6" if counter == "u32" else "%rd6"
    fmas = "".join(f"  fma.rn.f32 %f{1 + j % 8}, %f{1 + j % 8}, %f9, %f10;\n" for j in range(k))
    init = "".join(f"  add.f32 %f{j}, %f0, 0f3F800000;\n" for j in range(1, 9))
    body = (f"  ld.param.u32 %r1, [n];\n  cvt.u64.u32 %rd1, %r1;\n  mov.{counter} {c}, 0;\n"
            "  mov.u32 %r2, %tid.x;\n  cvt.rn.f32.u32 %f0, %r2;\n" + init +
            "  mov.f32 %f9, 0f3F800100;\n  mov.f32 %f10, 0f3C23D70A;\nLOOP:\n" + fmas +
            f"  add.{counter} {c}, {c}, 1;\n  setp.lt.{counter} %p1, {c}, "
            f"{'%r1' if counter == 'u32' else '%rd1'};\n  @%p1 bra LOOP;\n"
            "  add.f32 %f1, %f1, %f2;\n  add.f32 %f1, %f1, %f3;\n  add.f32 %f1, %f1, %f4;\n"
            "  add.f32 %f1, %f1, %f5;\n  add.f32 %f1, %f1, %f6;\n  add.f32 %f1, %f1, %f7;\n"
            "  add.f32 %f1, %f1, %f8;\n  ld.param.u64 %rd2, [out];\n  st.global.f32 [%rd2], %f1;")
    return _kernel(body, ".reg .b32 %r<8>;\n  .reg .b64 %rd<8>;\n  .reg .f32 %f<12>;\n"
                   "  .reg .pred %p<2>;")


def test_a_small_loop_counted_in_32_bits_pays_its_control_once_per_four_trips(sm90):
    limit = sm90.memory_model["ptxas_unroll_max_instructions"]
    small = compile_kernel(_fma_loop(8)[1], sm90)
    assert sorted(st.text.split()[0] for st in small.instrs if st.free) == \
        ["add.u32", "setp.lt.u32"]
    for k, counter in ((limit - 2, "u32"), (8, "u64")):     # too long; a 64-bit counter
        assert not any(st.free for st in compile_kernel(_fma_loop(k, counter)[1],
                                                        sm90).instrs)
    # issue-bound (16 warps per scheduler): 9 instead of 11 issues per trip
    r, wide = (simulate(_fma_loop(8, c)[1], (132 * 8,), (256,), args={"n": 512}, registers=24)
               for c in ("u32", "u64"))
    # (the 64-bit compare's second SASS half, round sim9b, takes issue slots that are not
    # PTX issues: the wide loop's PTX issue share is lower by about 11 / 12)
    assert r.issue_utilization > 0.95 and wide.issue_utilization > 0.75
    issued = [x.cycles * x.issue_utilization for x in (r, wide)]
    assert issued[0] / issued[1] == pytest.approx(9 / 11, rel=0.03)
    assert wide.cycles > r.cycles * 12 / 9


@pytest.mark.needs_ptxas
def test_ptxas_unrolls_up_to_the_isa_limit(sm90):
    """The isa number is what ptxas does: a loop of `limit` instructions is unrolled (each FMA
    copied into the 4x loop and its remainder), one of limit + 2 is not."""
    limit = int(sm90.memory_model["ptxas_unroll_max_instructions"])

    def copies(k):
        sass = toolchain.disassemble(toolchain.assemble(_fma_loop(k)[0], "sm_90").cubin)
        return len(re.findall(r"\bFFMA\b", sass)) / k
    assert copies(limit - 3) >= 4 and copies(limit - 1) < 2


def test_32_bit_adds_spread_over_the_integer_and_fma_pipes(sm90):
    """Eight independent chains of 32-bit adds issue about one per cycle (the integer pipe
    takes one every IALU interval, the FMA pipe the others, as ptxas's IADD3 / VIADD mix);
    the same chains of `and` only have the integer pipe."""
    def chains(op):
        steps = "".join(f"  {op}.b32 %r{10 + j}, %r{10 + j}, 3;\n" for j in range(8))
        body = ("  mov.u32 %r1, %tid.x;\n" +
                "".join(f"  add.s32 %r{10 + j}, %r1, {j};\n" for j in range(8)) +
                steps * 64 + "".join(f"  xor.b32 %r1, %r1, %r{10 + j};\n" for j in range(8)) +
                "  ld.param.u64 %rd1, [out];\n  st.global.u32 [%rd1], %r1;")
        return _kernel(body.replace("add.b32", "add.s32"),
                       ".reg .b32 %r<20>;\n  .reg .b64 %rd<2>;")[1]
    r = {op: simulate(chains(op), (132,), (512,), registers=32) for op in ("add", "and")}
    assert r["and"].unit_utilization["ALU"] > 0.9
    assert r["add"].unit_utilization["FMA"] > 0.3
    ialu = sm90.ops["IALU"].issue_interval
    assert r["add"].cycles < 0.7 * r["and"].cycles
    assert r["and"].cycles > 0.9 * ialu * 8 * 64 * 4       # 16 warps x 512 ops / 4 schedulers
