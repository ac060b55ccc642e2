"""Opcode semantics kept once (ptxgen/ir/semantics.py) and operand typing as a column of the
opcode table: the evaluation functions as the PTX ISA defines them, on Python values and numpy
arrays alike; the verifier's and the builder's typing read from the table's operands rule."""
import numpy as np
import pytest

from ptxgen.errors import VerifyError
from ptxgen.ir import Builder, Module, Param, opcodes, ptr
from ptxgen.ir import types as T
from ptxgen.ir.instr import Instr
from ptxgen.ir.semantics import COMPARE, PREDICATE, evaluation
from ptxgen.ir.verify import RULES, verify_module


def test_bit_reverse_as_the_isa_defines_it():
    """brev: bit i of the result is bit width-1-i (bit-reversed store addresses)."""
    f = evaluation("brev", (), T.b32)
    assert f(0b1011) == 0b1101 << 28
    assert f(1) == 1 << 31 and f(0xFFFFFFFF) == 0xFFFFFFFF
    assert [f(j) >> 20 for j in range(8)] == [0, 2048, 1024, 3072, 512, 2560, 1536, 3584]
    assert evaluation("brev", (), T.b64)(1) == 1 << 63


def test_integer_division_truncates_and_the_remainder_takes_the_dividends_sign():
    div, rem = evaluation("div", (), T.s32), evaluation("rem", (), T.s32)
    assert [div(7, 2), div(-7, 2), div(7, -2), div(-7, -2)] == [3, -3, -3, 3]
    assert [rem(7, 2), rem(-7, 2), rem(7, -2)] == [1, -1, 1]
    assert div(5, 0) is None and rem(5, 0) is None
    assert evaluation("div", (), T.f32)(1.0, 4.0) == 0.25
    assert evaluation("rem", (), T.f32)(1.0, 4.0) is None


def test_multiply_forms_and_unknown_opcodes():
    assert evaluation("mul", ("hi",), T.u32)(1 << 31, 4) == 2
    assert evaluation("mad", ("lo",), T.s32)(3, 4, 5) == 17
    assert evaluation("mul", (), T.u32) is None          # an integer mul needs lo/hi/wide
    assert evaluation("tanh", ("approx",), T.f32) is None
    assert evaluation("shl", (), T.b32)(1, 100) == 1 << 64   # the caller wraps to the width


def test_predicates_and_comparisons_work_on_bools_and_arrays():
    a, b = np.array([True, True, False]), np.array([True, False, False])
    assert list(PREDICATE["and"](a, b)) == [True, False, False]
    assert list(PREDICATE["xor"](a, b)) == [False, True, False]
    assert list(PREDICATE["not"](a)) == [False, False, True]
    assert PREDICATE["not"](True) is False and PREDICATE["or"](False, True) is True
    assert evaluation("and", (), T.pred) is PREDICATE["and"]
    assert evaluation("and", (), T.b32)(6, 3) == 2
    assert list(COMPARE["lt"](np.arange(3), 1)) == [True, False, False]
    assert COMPARE["hs"](3, 3) and not COMPARE["neu"](2, 2)


def test_the_opcode_table_names_every_typing_rule_the_verifier_has():
    rules = {row.operands for row in opcodes.ROWS.values()}
    assert rules <= set(opcodes.OPERAND_RULES)
    assert rules - {"mixed"} <= set(RULES)
    assert opcodes.ROWS["shl"].operands == "shift_bits" and opcodes.ROWS["shr"].operands == "shift"
    assert not opcodes.ROWS["wgmma.mma_async"].typed and opcodes.ROWS["add"].typed


def _kernel():
    m = Module()
    k = m.add_kernel("k", [Param("p", T.u64, ptr(T.u32))])
    return m, k, Builder(k)


def test_the_builder_types_shifts_and_logic_by_the_table():
    m, k, b = _kernel()
    x = b.special("tid.x")
    b.shl(x, 3)
    b.shr(x, 1)
    b.and_(x, 7)
    b.unary("popc", x)
    body = [str(s) for s in k.body if isinstance(s, Instr)]
    assert any(s.startswith("shl.b32") for s in body)
    assert any(s.startswith("shr.u32") for s in body)
    assert any(s.startswith("and.b32") for s in body)
    assert any(s.startswith("popc.b32") for s in body)
    verify_module(m)


@pytest.mark.parametrize("opcode, mods, dst_t, srcs, words", [
    ("shl", ("b32",), T.u32, [T.u32, T.u64], "shift amount"),
    ("mul", ("wide", "u32"), T.u32, [T.u32, T.u32], "expected u64"),
    ("setp", ("lt", "u32"), T.u32, [T.u32, T.u32], "setp must write a predicate"),
    ("cvt", ("rn", "f32", "u32"), T.u32, [T.u32], "expected f32"),
])
def test_the_verifier_applies_the_rule_of_the_row(opcode, mods, dst_t, srcs, words):
    m, k, b = _kernel()
    regs = []
    for t in srcs:
        r = b.reg(t)
        b.emit(Instr("mov", (t.name,), (r, b.operand(0, t))))
        regs.append(r)
    b.emit(Instr(opcode, mods, (b.reg(dst_t),) + tuple(regs)))
    with pytest.raises(VerifyError, match=words):
        verify_module(m)
